#!/usr/bin/env bash
# The link matrix (issue 38): ordinary C++ and C around pcpu's hot paths
# (link_matrix/shapes.hpp, shapes_c.h: class members, inline helpers,
# templates, lambdas, an RAII timer of the prometheus-cpp layer; C99
# inline, GNU89 extern inline, static inline), included by two units, each
# emitting its own out-of-line copies, built with every compiler at every
# level, with and without LTO, as one executable and with the two units in
# two shared libraries (PIC), and run: every value exact, and sections
# aborted and restarted in whichever copy ran (link_matrix/inject.h).
# Before the rseq sections followed their function's section group
# (pcpu/arch/common.h), most of these failed to link: "defined in discarded
# section ... __rseq_exit_point_array".
# Usage: link_matrix.sh SRC BIN GXX CLANGXX GCC CLANG
set -u
src=$1 bin=$2
dir=$src/tests/cxx/link_matrix
work=$bin/tests/link_matrix
rm -rf "$work"
mkdir -p "$work"
inc=(-I"$src/include" -I"$bin/include" -I"$src/compat/prometheus-cpp/include" -I"$dir")
promlib=$bin/compat/prometheus-cpp
libs=(-L"$promlib" -L"$bin" -Wl,-rpath,"$promlib" -Wl,-rpath,"$bin" -pthread)
defs=(-DPCPU_TEST_INJECT=1 -D_GNU_SOURCE -Wall -Wextra)
levels=(-O0 -O1 -O2 -O3 -Os)
fails=0 runs=0
rows=()

# build NAME KIND(exe|shared) LANG(cxx|c) COMPILER FLAGS...
build_and_run() {
  local name=$1 kind=$2 lang=$3 cc=$4; shift 4
  local out=$work/$name log=$work/$name.log
  local a b main std lib
  local werror=-Werror
  if [ "$lang" = cxx ]; then
    a=$dir/a.cpp b=$dir/b.cpp main=$dir/main.cpp std=-std=c++17 lib=(-lpcpu-prometheus -lpcpu-stats -lpcpu)
  else
    a=$dir/c_a.c b=$dir/c_b.c main=$dir/c_main.c std=-std=gnu11 lib=(-lpcpu)
    # gcc reports what C forbids: an inline function with external
    # linkage (C99 inline, GNU89 extern inline) referring to pcpu's static
    # inline operations (C11 6.7.4p3; docs/cxx.md). A warning, which has
    # no flag: not an error here, the link and the run are what is tested.
    werror=-Wno-error
  fi
  mkdir -p "$out"
  if [ "$kind" = exe ]; then
    "$cc" $std $werror "$@" "${defs[@]}" "${inc[@]}" "$a" "$b" "$main" -o "$out/prog" "${libs[@]}" "${lib[@]}" \
      >"$log" 2>&1
  else
    "$cc" $std $werror "$@" "${defs[@]}" "${inc[@]}" -fPIC -shared "$a" -o "$out/liba.so" "${libs[@]}" "${lib[@]}" \
      >"$log" 2>&1 &&
    "$cc" $std $werror "$@" "${defs[@]}" "${inc[@]}" -fPIC -shared "$b" -o "$out/libb.so" "${libs[@]}" "${lib[@]}" \
      >>"$log" 2>&1 &&
    "$cc" $std $werror "$@" "${defs[@]}" "${inc[@]}" -rdynamic "$main" -o "$out/prog" -L"$out" -Wl,-rpath,"$out" \
      -la -lb "${libs[@]}" "${lib[@]}" >>"$log" 2>&1
  fi
  local rc=$? result
  runs=$((runs + 1))
  if [ $rc -ne 0 ]; then
    result="LINK FAILED: $(grep -m1 -E 'error|discarded' "$log")"
  elif ! result=$("$out/prog" 2>&1); then
    result="RUN FAILED: $result"
    rc=1
  elif [ -n "${gc_check-}" ] && ! check=$(python3 "$src/tests/check_rseq_sections.py" 1 "$out/prog" 2>&1); then
    result="SECTIONS: $(printf '%s\n' "$check" | grep -m1 FAULT)"
    rc=1
  fi
  [ $rc -eq 0 ] || fails=$((fails + 1))
  rows+=("$(printf '%-34s %s' "$name" "$result")")
}

for pair in "g++:${3}" "clang++:${4}"; do
  cxx=${pair#*:} tag=${pair%%:*}
  [ -x "$cxx" ] || { echo "link_matrix: no $tag ($cxx)"; exit 1; }
  for o in "${levels[@]}"; do
    build_and_run "$tag$o" exe cxx "$cxx" "$o"
    build_and_run "$tag$o-shared" shared cxx "$cxx" "$o"
  done
  build_and_run "$tag-O2-flto" exe cxx "$cxx" -O2 -flto
  build_and_run "$tag-O0-flto-shared" shared cxx "$cxx" -O0 -flto
done
for pair in "gcc:${5}" "clang:${6}"; do
  cc=${pair#*:} tag=${pair%%:*}
  [ -x "$cc" ] || { echo "link_matrix: no $tag ($cc)"; exit 1; }
  for o in "${levels[@]}"; do
    build_and_run "c-$tag$o" exe c "$cc" "$o"
  done
  build_and_run "c-$tag-O0-shared" shared c "$cc" -O0
  build_and_run "c-$tag-O2-flto" exe c "$cc" -O2 -flto
done
# A link that collects unused sections (-ffunction-sections,
# --gc-sections; every Rust binary links so) drops the debugger lists
# nothing refers to, unless the program defines PCPU_RSEQ_RETAIN_LISTS
# (pcpu/arch/common.h): then tests/check_rseq_sections.py must find every
# section of the program listed, as it does without --gc-sections.
gc_check=1
for pair in "g++:${3}:cxx" "clang++:${4}:cxx" "gcc:${5}:c" "clang:${6}:c"; do
  IFS=: read -r tag cc lang <<<"$pair"
  for o in -O0 -O2; do
    build_and_run "gc-$tag$o-retain" exe "$lang" "$cc" "$o" -ffunction-sections -Wl,--gc-sections \
      -DPCPU_RSEQ_RETAIN_LISTS=1
  done
done
unset gc_check
printf '%s\n' "${rows[@]}"
echo "link_matrix: $((runs - fails)) of $runs built, linked and ran exact"
[ $fails -eq 0 ]
