#!/usr/bin/env bash
# Name/value pairs in braced lists work or do not compile, never run on a
# string made of the bytes between two literals (issue 50): label_pairs.cpp
# (series/has/remove by pairs, errors named) builds as C++17 and C++20 with
# g++ and clang++ and runs; in label_pairs_bad.cpp, each -DBAD expression
# below (a pair where label names are expected, a list mixing the two
# forms) and a prometheus::Exposer given pairs must fail to compile, with
# pcpu's message where pcpu gives one.
# Usage: label_pairs.sh SRC BIN GXX CLANGXX
set -u
src=$1 bin=$2
work=$bin/tests/label_pairs
mkdir -p "$work"
inc=(-I"$src/include" -I"$bin/include" -I"$src/compat/prometheus-cpp/include")
prog=$src/tests/cxx/label_pairs.cpp
bad_unit=$src/tests/cxx/label_pairs_bad.cpp
# BAD expression | what the error must say ("" : any compile error)
bad=('reg.counter_family("x").labels({{"method", "GET"}})|is a constant label: const_label(name, value)'
     'requests.series({{"method", "GET"}, "200"})|'
     'requests.series({"GET", {"code", "200"}})|'
     'requests.series({{"method", "GET"}, {"code", 200}})|'
     'requests.has({{"method", "GET"}, "200"})|'
     'requests.remove({"GET", {"code", "200"}})|'
     'reg.gauge_family("y").labels({{"a", "b"}, {"c", "d"}})|is a constant label: const_label(name, value)')
fails=0
for cxx in "$3" "$4"; do
  for std in c++17 c++20; do
    tag="$(basename "$cxx") -std=$std"
    if ! "$cxx" -std=$std -Wall -Wextra -Werror "${inc[@]}" "$prog" -o "$work/good" \
         -L"$bin" -lpcpu-stats -lpcpu -Wl,-rpath,"$bin" > "$work/good.log" 2>&1 || ! "$work/good" >> "$work/good.log" 2>&1; then
      echo "FAIL $tag: label_pairs.cpp does not build or run:"; head -20 "$work/good.log"
      fails=$((fails + 1))
    else
      echo "ok   $tag: $(tail -1 "$work/good.log")"
    fi
    if ! "$cxx" -std=$std -Wall -Wextra -Werror "${inc[@]}" -c "$bad_unit" -o "$work/bad.o" > "$work/bad.log" 2>&1; then
      echo "FAIL $tag: label_pairs_bad.cpp does not compile without BAD:"; head -5 "$work/bad.log"
      fails=$((fails + 1))
    fi
    for b in "${bad[@]}" "BAD_EXPOSER|takes civetweb's options as a flat list"; do
      expr=${b%%|*} want=${b#*|}
      if [ "$expr" = BAD_EXPOSER ]; then def=(-DBAD_EXPOSER); else def=(-DBAD="$expr"); fi
      if "$cxx" -std=$std "${inc[@]}" "${def[@]}" -c "$bad_unit" -o "$work/bad.o" > "$work/bad.log" 2>&1; then
        echo "FAIL $tag: '$expr' compiles"; fails=$((fails + 1))
      elif [ -n "$want" ] && ! grep -qF -- "$want" "$work/bad.log"; then
        echo "FAIL $tag: '$expr' refused without \"$want\":"; grep -m3 error "$work/bad.log"
        fails=$((fails + 1))
      else
        echo "ok   $tag: '$expr' does not compile"
      fi
    done
  done
done
[ $fails -eq 0 ]
