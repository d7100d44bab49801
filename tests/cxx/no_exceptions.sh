#!/usr/bin/env bash
# pcpu.hpp without exceptions (issue 38): no_exceptions.cpp built with
# -fno-exceptions and without, by g++ and clang++, each run; every C++
# header of pcpu also compiles alone with -fno-exceptions.
# Usage: no_exceptions.sh SRC BIN GXX CLANGXX
set -u
src=$1 bin=$2
work=$bin/tests/no_exceptions
mkdir -p "$work"
inc=(-I"$src/include" -I"$bin/include")
fails=0
for cxx in "$3" "$4"; do
  tag=$(basename "$cxx")
  for mode in -fno-exceptions -fexceptions; do
    exe=$work/$tag$mode
    if ! "$cxx" -std=c++17 -O1 -Wall -Wextra -Werror $mode -pthread "${inc[@]}" "$src/tests/cxx/no_exceptions.cpp" \
         -o "$exe" -L"$bin" -lpcpu-stats -lpcpu -Wl,-rpath,"$bin" >"$exe.log" 2>&1; then
      echo "FAILED: $tag $mode: does not build"; head -20 "$exe.log"; fails=$((fails + 1)); continue
    fi
    if ! out=$("$exe" 2>&1); then
      echo "FAILED: $tag $mode:"; echo "$out"; fails=$((fails + 1)); continue
    fi
    echo "$tag $mode: $out"
  done
  for h in "$src"/include/pcpu/*.hpp "$src"/compat/prometheus-cpp/include/pcpu/*.hpp; do
    if ! echo "#include <pcpu/$(basename "$h")>" | "$cxx" -std=c++17 -Wall -Wextra -Werror -fno-exceptions \
         "${inc[@]}" -I"$src/compat/prometheus-cpp/include" -x c++ -fsyntax-only - >"$work/hdr.log" 2>&1; then
      echo "FAILED: $tag: $(basename "$h") with -fno-exceptions"; head -10 "$work/hdr.log"; fails=$((fails + 1))
    fi
  done
done
[ $fails -eq 0 ]
