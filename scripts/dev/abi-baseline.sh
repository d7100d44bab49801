#!/usr/bin/env bash
# Rewrites abi/<soname>.abi, the committed ABI of the C libraries that ctest
# abi_baseline compares every build with (docs/stability.md). Run it on
# purpose only: when a release line starts (a new SONAME, a new minor
# release whose additions are to be kept), or for a break the CHANGELOG
# announces under Breaking (a new PCPU_LAYOUT). Then commit abi/ with it.
#
#   scripts/dev/abi-baseline.sh [BUILD_DIR]     (default: build)
#   scripts/dev/abi-baseline.sh --previous [BUILD_DIR]
#       after a release, once abi/previous-release names it: builds that
#       release's libpcpu from its git commit (into BUILD_DIR/abi/previous)
#       and writes abi/<version>/<soname>.abi, which ctest
#       abi_previous_release compares every build with (no git history
#       needed there).
#
# BUILD_DIR: a plain build configured as the test command's (RelWithDebInfo,
# no sanitizer); the libraries are built first. Needs abidw (abigail-tools).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
previous=0
if [ "${1:-}" = --previous ]; then previous=1; shift; fi
build=${1:-$src/build}
cache=$build/CMakeCache.txt
[ -f "$cache" ] || { echo "abi-baseline: $build is not a configured build (cmake -S . -B $build -DCMAKE_BUILD_TYPE=RelWithDebInfo ...)" >&2; exit 1; }
grep -qx 'CMAKE_BUILD_TYPE:STRING=RelWithDebInfo' "$cache" \
  || { echo "abi-baseline: $build is not a RelWithDebInfo build" >&2; exit 1; }
grep -q '^PCPU_SANITIZE:STRING=$' "$cache" \
  || { echo "abi-baseline: $build is a sanitizer build" >&2; exit 1; }
if [ $previous -eq 1 ]; then
  python3 "$src/tests/abi/abi_check.py" write-previous "$src" "$build" "$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$cache")"
  git -C "$src" status --short -- abi/
  exit 0
fi
cmake --build "$build" --target pcpu pcpu_stats pcpu_exporter
python3 "$src/tests/abi/abi_check.py" write-baseline "$src" "$build"
git -C "$src" status --short -- abi/
