#!/usr/bin/env bash
# pcpu.hpp refuses floating-point values at compile time (a double would be
# truncated silently: h.record(0.0123) recorded 0; issue 38): no_float.cpp
# with integers builds and counts; with each -DBAD expression below the
# build fails with pcpu.hpp's message. g++ and clang++.
# Usage: no_float.sh SRC BIN GXX CLANGXX
set -u
src=$1 bin=$2
work=$bin/tests/no_float
mkdir -p "$work"
inc=(-I"$src/include" -I"$bin/include")
bad=("h.record(0.0123)" "hr.record(0.5f)" "h.record_n(1.5, 2)" "g.set(0.75)" "g.add(0.5)"
     "g.sub(1e3)" "c.add(1.5)" "r.add(2.0)" "r.add_atomic(0.1)" "grp.add2(0, 1, 1500.0)"
     "w.add(r, 0.5)" "w.record(h, 0.001)")
fails=0
for cxx in "$3" "$4"; do
  if ! "$cxx" -std=c++17 -Wall -Wextra -Werror "${inc[@]}" "$src/tests/cxx/no_float.cpp" -o "$work/good" \
       -L"$bin" -lpcpu-stats -lpcpu -Wl,-rpath,"$bin" || ! "$work/good"; then
    echo "FAILED: $cxx: the integer calls do not build or count"
    fails=$((fails + 1))
  fi
  for b in "${bad[@]}"; do
    if "$cxx" -std=c++17 "${inc[@]}" -DBAD="$b" -c "$src/tests/cxx/no_float.cpp" -o "$work/bad.o" \
         >"$work/bad.log" 2>&1; then
      echo "FAILED: $cxx: '$b' compiles"
      fails=$((fails + 1))
    elif ! grep -q "takes an integer" "$work/bad.log"; then
      echo "FAILED: $cxx: '$b' refused without pcpu's message:"
      head -5 "$work/bad.log"
      fails=$((fails + 1))
    else
      echo "ok: $(basename "$cxx"): '$b' refused: $(grep -m1 -o 'pcpu: [a-z_0-9]*() takes an integer' "$work/bad.log")"
    fi
  done
done
[ $fails -eq 0 ]
