#!/usr/bin/env bash
# Code that forward-declares prometheus-cpp's classes (OpenVINO Model
# Server's shape: forward_decl/metrics.hpp) builds on the layer and runs:
# three units (two include the layer after the forward declarations, one
# sees only them), with g++ and clang++, at -O0 and -O2, linked by the link
# names (-lpcpu-prometheus is the linker script that checks the mark of the
# layer's headers, compat/prometheus-cpp/src/headers_check.c). Issue 50.
# Usage: promcpp_forward_decl.sh SRC_DIR BUILD_DIR CXX...
set -uo pipefail
src=$1 bin=$2; shift 2
dir=$src/tests/cxx/forward_decl
work=$bin/promcpp-forward-decl
rm -rf "$work"
mkdir -p "$work"
inc=(-I"$src/compat/prometheus-cpp/include" -I"$src/include" -I"$bin/include")
libs=(-L"$bin/compat/prometheus-cpp" -L"$bin" -Wl,-rpath,"$bin/compat/prometheus-cpp:$bin"
  -lpcpu-prometheus-pull -lpcpu-prometheus-push -lpcpu-prometheus -lpcpu-stats -lpcpu -pthread)
fails=0
for cxx in "$@"; do
  for o in -O0 -O2; do
    name=$(basename "$cxx")$o out=$work/$(basename "$cxx")$o
    if "$cxx" -std=c++17 $o -Wall -Wextra -Werror "${inc[@]}" "$dir/core.cpp" "$dir/net.cpp" "$dir/main.cpp" \
         "${libs[@]}" -o "$out" > "$out.log" 2>&1 && "$out" >> "$out.log" 2>&1; then
      echo "ok   $name: builds and runs"
    else
      echo "FAIL $name:"; sed 's/^/  /' "$out.log" | head -30; fails=$((fails + 1))
    fi
  done
done
[ $fails = 0 ] || { echo "$fails build(s) failed"; exit 1; }
