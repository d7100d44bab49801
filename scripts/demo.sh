#!/usr/bin/env bash
# The demonstration: builds pcpu in build/ (the library, its tools, the
# examples, the test suite and the benchmarks: everything README.md uses
# after this), runs an example and the benchmark suite's quick mode, which
# prints pcpu beside +=, atomics, locks and per-thread counters, the seeds'
# published figures, and the targets with PASS, MISS or "not measurable"
# (bench/README.md indexes each target and the figures
# measured). Under a minute from a clean clone on a 2-CPU machine (the
# build ~30 s of it), under half a minute once built (README.md, "Set-up").
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# The whole tree, so that what the README shows next works as it stands:
# build/tools/pcpustat, build/examples/*, `ctest -L unit` in build/.
echo "demo.sh: building pcpu, its tools, examples, tests and benchmarks in build/" >&2
if ! cmake --build build -j "$(nproc)" >build/demo-build.log 2>&1; then
  tail -n 40 build/demo-build.log >&2
  echo "demo.sh: the build failed (build/demo-build.log)" >&2
  exit 1
fi
echo "demo.sh: built in $((SECONDS - start)) s" >&2
./build/examples/pcpu_example_counters
# Results go to build/demo/ (report.md, CSVs, plots), not over the recorded ones.
bash bench/run.sh --quick --csv "$PWD/build/demo"
echo "demo.sh: $((SECONDS - start)) s in all. Next: build/examples/pcpu_example_forwarder &" \
     "then build/tools/pcpustat forwarder; (cd build && ctest -L unit -j$(nproc)), the fast tests."
