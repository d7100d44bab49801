#!/usr/bin/env bash
# The installed library, used the way users use it, in two layouts:
#  1. the build tree installed into a scratch prefix (`cmake --install
#     --prefix`): consumers built with CMake's find_package and with
#     pkg-config; pkg-config names that prefix; the installed pcpustat starts
#     without LD_LIBRARY_PATH (its RUNPATH finds ../lib);
#     and, installed there (a prefix outside the loader's directories, as
#     `cmake --install build --prefix ~/.local` makes), programs linked with
#     -Wl,-rpath,<prefix>/lib and programs linked with nothing but
#     pkg-config start without LD_LIBRARY_PATH, C and prometheus-cpp code,
#     with and without --as-needed: libpcpu-prometheus finds libpcpu-stats.so.1
#     by its own RUNPATH ($ORIGIN; a program's run path does not apply to
#     its libraries' dependencies), pkg-config adds the -rpath (issue 37);
#  2. libpcpu's components alone (`cmake --install --component pcpu` and
#     `pcpu-dev`, what Debian's libpcpu1 and libpcpu-dev hold): the README's
#     first program, copied from README.md, builds and runs through
#     pkg-config pcpu and through find_package(pcpu) and pcpu::pcpu, with
#     no header, link or CMake file of another library installed, and
#     every installed file belongs to a component.
# The distribution layout (prefix /usr, the multiarch libdir, no RUNPATH,
# .pc files without -rpath, consumers against the unpacked files) and the
# build with -O3 -Werror are tests/packaging/deb_test.sh's: it builds
# that tree once, as the Debian packages, and checks it there.
# usage: run.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "install_consumer: $*" >&2; exit 1; }
# The C++ layer's SONAME carries the release's major.minor
# (libpcpu-prometheus.so.0.2: compat/prometheus-cpp/CMakeLists.txt).
cxx=$(sed -n 's/^project(pcpu VERSION \([0-9]*\.[0-9]*\)\..*/\1/p' "$src/CMakeLists.txt")
[ -n "$cxx" ] || fail "no project(pcpu VERSION x.y.z) in $src/CMakeLists.txt"

# ---- 1. scratch prefix ----------------------------------------------------------
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$here" -B "$work/cbuild" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cbuild" >/dev/null
LD_LIBRARY_PATH="$prefix/lib" "$work/cbuild/consumer_counter"
"$work/cbuild/consumer_counter_static"
LD_LIBRARY_PATH="$prefix/lib" "$work/cbuild/consumer_c"
# The split (issue 39): a program that only counts needs libpcpu alone (no
# libpcpu-stats, no protobuf-c), one with statistics both libraries.
needed_of() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }
case " $(needed_of "$work/cbuild/consumer_counter") " in
  *" libpcpu.so.1 "*) ;; *) fail "consumer_counter does not need libpcpu.so.1: $(needed_of "$work/cbuild/consumer_counter")";;
esac
case " $(needed_of "$work/cbuild/consumer_counter") " in
  *libpcpu-stats*|*protobuf*) fail "a program that only counts needs $(needed_of "$work/cbuild/consumer_counter")";;
esac
case " $(needed_of "$work/cbuild/consumer_c") " in
  *" libpcpu-stats.so.1 "*) ;; *) fail "consumer_c does not need libpcpu-stats.so.1";;
esac
for l in libpcpu.so.1 libpcpu-stats.so.1; do
  [ -e "$prefix/lib/$l" ] || fail "$l not installed"
done
case " $(needed_of "$prefix/lib/libpcpu.so.1") " in
  *protobuf*|*libpcpu-stats*|*libz*) fail "libpcpu.so.1 needs $(needed_of "$prefix/lib/libpcpu.so.1")";;
esac
LD_LIBRARY_PATH="$prefix/lib" "$work/cbuild/consumer_cxx"
"$work/cbuild/consumer_static"
LD_LIBRARY_PATH="$prefix/lib" "$work/cbuild/consumer_hpp"
LD_LIBRARY_PATH="$prefix/lib" "$work/cbuild/consumer_promcpp"
if [ -e "$work/cbuild/consumer_promcpp_push" ]; then
  LD_LIBRARY_PATH="$prefix/lib" "$work/cbuild/consumer_promcpp_push"
fi
# pkg-config, as a Makefile user would.
libdir=$(ls -d "$prefix"/lib* | head -1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
[ "$(pkg-config --variable=includedir pcpu)" = "$prefix/include" ] \
  || fail "pkg-config includedir is $(pkg-config --variable=includedir pcpu), not $prefix/include"
[ "$(pkg-config --variable=libdir pcpu)" = "$libdir" ] \
  || fail "pkg-config libdir is $(pkg-config --variable=libdir pcpu), not $libdir"
cc $(pkg-config --cflags pcpu) "$here/consumer_counter.c" -o "$work/pc_counter" $(pkg-config --libs pcpu) -pthread
LD_LIBRARY_PATH="$libdir" "$work/pc_counter"
cc $(pkg-config --cflags pcpu-stats) "$here/consumer.c" -o "$work/pc_consumer" $(pkg-config --libs pcpu-stats) -pthread
LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"
# Static: libpcpu-stats.a, libpcpu.a and what Libs.private names (protobuf-c
# where built in).
cc $(pkg-config --cflags pcpu-stats) "$here/consumer.c" -o "$work/pc_static_consumer" \
  -Wl,-Bstatic $(pkg-config --static --libs pcpu-stats) -Wl,-Bdynamic
! readelf -d "$work/pc_static_consumer" | grep -q 'libpcpu.*\.so' \
  || fail "pkg-config --static: the consumer links libpcpu*.so, not the .a files"
env -u LD_LIBRARY_PATH "$work/pc_static_consumer"
# prometheus-cpp code through pkg-config pcpu-prometheus (issue 28).
c++ -std=c++17 $(pkg-config --cflags pcpu-prometheus) "$here/consumer_promcpp.cpp" -o "$work/pc_promcpp" \
  $(pkg-config --libs pcpu-prometheus) -pthread
LD_LIBRARY_PATH="$libdir" "$work/pc_promcpp"
# The exporter core: CMake (pcpu::exporter) and pkg-config pcpu-exporter,
# where the build has it (issue 51).
if [ -e "$libdir/pkgconfig/pcpu-exporter.pc" ]; then
  LD_LIBRARY_PATH="$prefix/lib" "$work/cbuild/consumer_exporter"
  cc $(pkg-config --cflags pcpu-exporter) "$here/consumer_exporter.c" -o "$work/pc_exporter" \
    $(pkg-config --libs pcpu-exporter) -pthread
  env -u LD_LIBRARY_PATH "$work/pc_exporter"
fi
# prometheus-cpp's pull API: CMake (pcpu::prometheus-pull) and pkg-config
# pcpu-prometheus-pull, where the build has it (libmicrohttpd found).
if [ -e "$libdir/pkgconfig/pcpu-prometheus-pull.pc" ]; then
  LD_LIBRARY_PATH="$prefix/lib" "$work/cbuild/consumer_promcpp_pull"
  c++ -std=c++17 $(pkg-config --cflags pcpu-prometheus-pull) "$here/consumer_promcpp_pull.cpp" \
    -o "$work/pc_promcpp_pull" $(pkg-config --libs pcpu-prometheus-pull) -pthread
  env -u LD_LIBRARY_PATH "$work/pc_promcpp_pull"
fi
# Installed outside the loader's directories, used as the README says, with
# no LD_LIBRARY_PATH: linked with -rpath <prefix>/lib, or by pkg-config
# alone. A prometheus-cpp program that uses only out-of-line API does not
# itself need libpcpu.so.1 under --as-needed (Ubuntu's default): that one
# is found by libpcpu-prometheus's RUNPATH or not at all ("libpcpu.so.0:
# cannot open shared object file" before).
alone() {
  env -u LD_LIBRARY_PATH "$@" >"$work/alone.out" 2>&1 \
    || { cat "$work/alone.out"; fail "$* does not start without LD_LIBRARY_PATH (installed in $prefix)"; }
}
# The layer is built where its pkg-config file is installed; then its
# library must be there under its SONAME.
promcpp=false
if [ -e "$libdir/pkgconfig/pcpu-prometheus.pc" ]; then
  promcpp=true
  [ -e "$libdir/libpcpu-prometheus.so.$cxx" ] || fail "libpcpu-prometheus.so.$cxx not installed in $libdir"
fi
for l in libpcpu-stats.so.1 libpcpu-prometheus.so.$cxx; do
  [ -e "$libdir/$l" ] || continue
  [ "$(readelf -d "$libdir/$l" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')" = '$ORIGIN' ] \
    || fail "$l in $prefix: RUNPATH is not \$ORIGIN: $(readelf -d "$libdir/$l" | grep -E 'RPATH|RUNPATH')"
done
for needed in --no-as-needed --as-needed; do
  cc -I"$prefix/include" "$here/consumer.c" -o "$work/rp_c" -Wl,$needed -L"$libdir" -Wl,-rpath,"$libdir" \
    -lpcpu-stats -lpcpu -pthread
  alone "$work/rp_c"
  cc $(pkg-config --cflags pcpu-stats) "$here/consumer.c" -o "$work/pc_alone_c" -Wl,$needed $(pkg-config --libs pcpu-stats) -pthread
  alone "$work/pc_alone_c"
  cc $(pkg-config --cflags pcpu) "$here/consumer_counter.c" -o "$work/pc_alone_counter" -Wl,$needed $(pkg-config --libs pcpu) -pthread
  alone "$work/pc_alone_counter"
  $promcpp || continue
  for p in consumer_promcpp consumer_promcpp_registry; do
    c++ -std=c++17 -I"$prefix/include/pcpu-prometheus" -I"$prefix/include" "$here/$p.cpp" -o "$work/rp_$p" \
      -Wl,$needed -L"$libdir" -Wl,-rpath,"$libdir" -lpcpu-prometheus -lpcpu-stats -lpcpu -pthread
    alone "$work/rp_$p"
    c++ -std=c++17 $(pkg-config --cflags pcpu-prometheus) "$here/$p.cpp" -o "$work/pc_alone_$p" \
      -Wl,$needed $(pkg-config --libs pcpu-prometheus) -pthread
    alone "$work/pc_alone_$p"
  done
done
# The push library (prometheus/gateway.h), where built: pkg-config alone,
# with its own RUNPATH ($ORIGIN) finding libpcpu-prometheus and libpcpu.
if [ -e "$libdir/pkgconfig/pcpu-prometheus-push.pc" ]; then
  push=$libdir/libpcpu-prometheus-push.so.$cxx
  [ -e "$push" ] || fail "libpcpu-prometheus-push.so.$cxx not installed in $libdir"
  [ "$(readelf -d "$push" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')" = '$ORIGIN' ] \
    || fail "libpcpu-prometheus-push.so.$cxx in $prefix: RUNPATH is not \$ORIGIN"
  for needed in --no-as-needed --as-needed; do
    c++ -std=c++17 $(pkg-config --cflags pcpu-prometheus-push) "$here/consumer_promcpp_push.cpp" \
      -o "$work/pc_alone_push" -Wl,$needed $(pkg-config --libs pcpu-prometheus-push) -pthread
    alone "$work/pc_alone_push"
  done
fi
unset PKG_CONFIG_PATH
# Only pcpu_-prefixed symbols are exported, and the SONAME is versioned.
for name in libpcpu libpcpu-stats; do
  lib=$(ls "$libdir/$name.so.1")
  bad=$(nm -D --defined-only "$lib" | awk '$3 !~ /^pcpu_/ && $3 !~ /^PCPU_([0-9]+(\.[0-9]+)?|LAYOUT_[0-9]+|PRIVATE_[0-9]+(\.[0-9]+)*)$/ {print $3}')
  if [ -n "$bad" ]; then echo "$name: exported symbols without the pcpu_ prefix: $bad"; exit 1; fi
  objdump -p "$lib" | grep -q "SONAME *$name.so.1" || { echo "SONAME of $name is not $name.so.1"; exit 1; }
done
# The seam: libpcpu-stats calls libpcpu's internals only through the private
# node, which it records in its version needs (a mismatched pair fails to load).
objdump -p "$libdir/libpcpu-stats.so.1" | grep -q 'PCPU_PRIVATE_[0-9]' \
  || fail "libpcpu-stats.so.1 does not need libpcpu's PCPU_PRIVATE node"
# The installed tool starts on its own (no LD_LIBRARY_PATH) and lists
# segments in an empty directory.
if [ -e "$prefix/bin/pcpustat" ]; then
  mkdir "$work/segs"
  env -u LD_LIBRARY_PATH PCPU_SEGMENT_DIR="$work/segs" "$prefix/bin/pcpustat" >"$work/out" 2>&1 \
    || { cat "$work/out"; fail "installed pcpustat does not run from $prefix/bin"; }
  [ -e "$prefix/share/man/man1/pcpustat.1" ] || fail "pcpustat.1 not installed"
fi

# ---- 2. libpcpu's components alone ------------------------------------------------
core=$work/core
for c in pcpu pcpu-dev; do
  cmake --install "$build" --prefix "$core" --component "$c" >/dev/null
done
other=$(ls -d "$core"/include/pcpu/stats.h "$core"/include/pcpu/*.hpp "$core"/include/pcpu-prometheus \
  "$core"/lib/libpcpu-* "$core"/lib/cmake/pcpu/pcpu-* "$core"/lib/pkgconfig/pcpu-stats.pc 2>/dev/null || true)
[ -z "$other" ] || fail "components pcpu and pcpu-dev install another library's files: $other"
# Every header pcpu-dev installs compiles with pcpu-dev alone: a header of
# the statistics layer left off PCPU_STATS_PUBLIC_HEADERS (CMakeLists.txt)
# would include one that is not there.
for h in "$core"/include/pcpu/*.h; do
  echo "#include <pcpu/$(basename "$h")>" | cc -x c -fsyntax-only -Wall -Werror -I"$core/include" - \
    || fail "pcpu/$(basename "$h") does not compile with the pcpu-dev component alone"
done
cmake --install "$build" --prefix "$work/unspecified" --component Unspecified >/dev/null
[ -z "$(find "$work/unspecified" -type f 2>/dev/null)" ] \
  || fail "files installed without a component: $(find "$work/unspecified" -type f)"
awk '/^## A first program/{f=1} f&&/^```c/{p=1;next} p&&/^```/{exit} p' "$src/README.md" >"$work/app.c"
grep -q pcpu_counter_inc "$work/app.c" || fail "README.md: no first program under '## A first program'"
export PKG_CONFIG_PATH=$core/lib/pkgconfig
# shellcheck disable=SC2046
cc -Wall -Werror "$work/app.c" $(pkg-config --cflags --libs pcpu) -pthread -o "$work/app_pc" \
  || fail "the README's first program does not build with libpcpu's components alone (pkg-config pcpu)"
[ "$(env -u LD_LIBRARY_PATH "$work/app_pc")" = "400000 requests" ] || fail "the first program (pkg-config) printed something else"
unset PKG_CONFIG_PATH
mkdir "$work/app_cmake"
cat >"$work/app_cmake/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.18)
project(app C)
find_package(pcpu REQUIRED)
add_executable(app $work/app.c)
target_link_libraries(app PRIVATE pcpu::pcpu)
find_package(pcpu QUIET COMPONENTS stats)
if(pcpu_stats_FOUND OR TARGET pcpu::stats)
  message(FATAL_ERROR "libpcpu's components alone: pcpu::stats found")
endif()
EOF
cmake -S "$work/app_cmake" -B "$work/app_cmake/b" -G Ninja -DCMAKE_PREFIX_PATH="$core" >"$work/app_cmake.log" 2>&1 \
  && cmake --build "$work/app_cmake/b" >>"$work/app_cmake.log" 2>&1 \
  || { cat "$work/app_cmake.log"; fail "find_package(pcpu) and pcpu::pcpu with libpcpu's components alone"; }
[ "$(env -u LD_LIBRARY_PATH "$work/app_cmake/b/app")" = "400000 requests" ] || fail "the first program (CMake) printed something else"
echo "install_consumer: ok"
