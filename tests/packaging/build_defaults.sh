#!/usr/bin/env bash
# pcpu's configure-time defaults (configure only, nothing is built):
#  - pulled into another project (add_subdirectory), pcpu builds neither its
#    tests nor its benchmarks nor its examples, and so configures on a machine
#    without valgrind or python3;
#  - as the top-level project its tests are on, and a missing test tool stops
#    the configuration with a message saying how to get it or how to turn the
#    tests off (the suite never skips silently);
#  - PCPU_DEBUG=AUTO: the library checks handles in Debug builds only, and a
#    tree configured Debug then Release gets the unchecked library (the
#    Debug configuration does not write ON into the cache).
# usage: build_defaults.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "build_defaults: $*" >&2; exit 1; }
cache() { sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt"; }
# find_program() sees neither PATH nor the system directories, so valgrind
# and python3 are "not installed"; the compilers and ninja are given.
bare=(-G Ninja -DCMAKE_FIND_USE_SYSTEM_ENVIRONMENT_PATH=OFF -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF
      -DCMAKE_MAKE_PROGRAM="$(command -v ninja)" -DCMAKE_C_COMPILER="$(command -v cc)"
      -DCMAKE_CXX_COMPILER="$(command -v c++)")

# 1. As a subproject, on a machine without the test tools.
mkdir "$work/app"
cat >"$work/app/CMakeLists.txt" <<CML
cmake_minimum_required(VERSION 3.18)
project(app C CXX)
add_subdirectory("$src" pcpu)
CML
cmake -S "$work/app" -B "$work/sub" "${bare[@]}" >"$work/sub.log" 2>&1 \
  || { cat "$work/sub.log"; fail "pcpu as a subproject does not configure without valgrind/python3"; }
for opt in PCPU_BUILD_TESTS PCPU_BUILD_BENCH PCPU_BUILD_EXAMPLES; do
  [ "$(cache "$work/sub" $opt)" = OFF ] || fail "subproject: $opt is '$(cache "$work/sub" $opt)', not OFF"
done
[ ! -e "$work/sub/pcpu/tests" ] || fail "subproject: the tests were configured"

# 2. Top level: tests on by default; without valgrind the configuration
#    stops and says what to do.
if cmake -S "$src" -B "$work/top" "${bare[@]}" >"$work/top.log" 2>&1; then
  fail "top level without valgrind/python3: configured anyway (tests skipped silently?)"
fi
grep -q 'valgrind' "$work/top.log" && grep -q -- '-DPCPU_BUILD_TESTS=OFF' "$work/top.log" \
  || { cat "$work/top.log"; fail "top level without valgrind: the message does not say what to do"; }
[ "$(cache "$work/top" PCPU_BUILD_TESTS)" = ON ] || fail "top level: PCPU_BUILD_TESTS is not ON by default"
# ... and with the tests turned off it configures.
cmake -S "$src" -B "$work/top" "${bare[@]}" -DPCPU_BUILD_TESTS=OFF >"$work/top.log" 2>&1 \
  || { cat "$work/top.log"; fail "top level with -DPCPU_BUILD_TESTS=OFF does not configure"; }

# 3. PCPU_DEBUG follows the build type without sticking in the cache.
lib_debug() { grep -q 'PCPU_DEBUG_LIBRARY' "$1/build.ninja"; }
nodev=(-G Ninja -DPCPU_BUILD_TESTS=OFF -DPCPU_BUILD_BENCH=OFF -DPCPU_BUILD_EXAMPLES=OFF -DPCPU_BUILD_TOOLS=OFF)
cmake -S "$src" -B "$work/dbg" "${nodev[@]}" -DCMAKE_BUILD_TYPE=Debug >/dev/null
lib_debug "$work/dbg" || fail "Debug build: the library is built without handle checks"
cmake -S "$src" -B "$work/dbg" -DCMAKE_BUILD_TYPE=Release >/dev/null
[ "$(cache "$work/dbg" PCPU_DEBUG)" = AUTO ] || fail "PCPU_DEBUG is '$(cache "$work/dbg" PCPU_DEBUG)' after a Debug configuration"
! lib_debug "$work/dbg" || fail "Debug then Release: the library still checks handles"
cmake -S "$src" -B "$work/dbg" -DPCPU_DEBUG=ON >/dev/null
lib_debug "$work/dbg" || fail "PCPU_DEBUG=ON in Release: no handle checks"
cmake -S "$src" -B "$work/dbg" -DPCPU_DEBUG=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
! lib_debug "$work/dbg" || fail "PCPU_DEBUG=OFF in Debug: handle checks anyway"
echo "build_defaults: ok"
