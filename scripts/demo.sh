#!/usr/bin/env bash
# The demonstration, from a clean clone:
#  1. installs what it builds and shows, nothing more
#     (scripts/install-deps.sh --demo: a C compiler, CMake, Ninja,
#     pkg-config, pcpustat's libraries, man; no Python package, no test tool);
#  2. builds pcpu in build/: the libraries, pcpustat, the examples and the
#     benchmark -- not the test suite, which scripts/test.sh builds;
#  3. installs it under build/prefix, so that the README's first program
#     builds with `pkg-config pcpu` and `man pcpu` finds the pages, once the
#     one line it prints at the end is pasted into the shell;
#  4. runs an example and the benchmark's demonstration (bench/run.sh
#     --demo): one counter incremented by every thread, kept by pcpu and by
#     the usual alternatives, in CPU time per increment, and a verdict.
# Most of its time is the build: 1 min 20 s of CPU time (4 min 40 s from a
# clean clone on a 2-vCPU machine at load 15; docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/install-deps.sh --demo
# A new build folder is configured without the test suite (its tools are not
# installed here); one that scripts/test.sh configured keeps its tests.
tests=()
[ -f build/CMakeCache.txt ] || tests=(-DPCPU_BUILD_TESTS=OFF)
mkdir -p build
if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_LIBDIR=lib "${tests[@]}" \
     -DPCPU_BUILD_EXAMPLES=ON -DPCPU_BUILD_BENCH=ON >build/demo-configure.log 2>&1; then
  cat build/demo-configure.log >&2
  echo "demo.sh: configuring failed (build/demo-configure.log)" >&2
  exit 1
fi
echo "demo.sh: building pcpu, pcpustat, the examples and the benchmark in build/" >&2
if ! cmake --build build -j "$(nproc)" >build/demo-build.log 2>&1; then
  tail -n 40 build/demo-build.log >&2
  echo "demo.sh: the build failed (build/demo-build.log)" >&2
  exit 1
fi
# Installed where the README's commands find it: headers, libraries,
# pkg-config files, the CMake package, manual pages, pcpustat. The .pc
# files carry the run path (-Wl,-rpath), so a program linked by them runs.
prefix=$PWD/build/prefix
cmake --install build --prefix "$prefix" >build/demo-install.log 2>&1 \
  || { cat build/demo-install.log >&2; echo "demo.sh: installing into $prefix failed" >&2; exit 1; }
echo "demo.sh: built and installed into build/prefix in $((SECONDS - start)) s" >&2
echo
./build/examples/pcpu_example_counters
echo
# The report also goes to build/demo/report.md (and a CSV file).
bash bench/run.sh --demo --csv "$PWD/build/demo"
echo
echo "demo.sh: $((SECONDS - start)) s in all. Next:"
echo "  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig MANPATH=$prefix/share/man: CMAKE_PREFIX_PATH=$prefix"
echo "  then the README's first program: cc app.c \$(pkg-config --cflags --libs pcpu) -pthread, and man pcpu;"
echo "  build/examples/pcpu_example_forwarder & then build/tools/pcpustat forwarder;"
echo "  bash bench/run.sh --quick, the whole benchmark; ./scripts/test.sh, the test suite."
