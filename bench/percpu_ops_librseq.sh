#!/usr/bin/env bash
# pcpu's public per-CPU operations (pcpu/percpu_ops.h) beside librseq's same
# operations, in one run: builds bench/percpu_ops_librseq.c against a librseq
# checkout and the build's libpcpu, runs it, and prints its table
# (bench/percpu_ops.md records the runs).
# librseq is not a Debian package (bookworm), so it is built here from the
# checkout given, into a scratch folder outside the repository: its
# registration code (src/rseq.c, src/smp.c) as a static object, its headers
# from include/. Nothing of librseq is copied into pcpu.
# Usage: bench/percpu_ops_librseq.sh LIBRSEQ_DIR BUILD_DIR [program options:
#        --rounds N --ops M --threads 1,2]
#        bench/percpu_ops_librseq.sh --count LIBRSEQ_DIR BUILD_DIR [CC ...]
# LIBRSEQ_DIR: a checkout of github.com/compudj/librseq (the runs recorded
# used cbdabc4). BUILD_DIR: a configured, built pcpu tree (libpcpu).
# The program's instructions per loop: PCPU_LOOP_INSNS=1 counts each loop
# function with bench/loop_insns.py (objdump).
# --count runs nothing: it compiles the same file with each compiler
# command CC (one argument each, flags included; default: gcc and clang
# for x86-64, aarch64, ARMv7 (gcc's T32 and -marm's A32) and riscv64, the
# Debian cross compilers) into a -nostdlib shared object, and prints a
# table of each loop's instructions / loads per iteration (committing
# path, bench/loop_insns.py), one column per compiler. BUILD_DIR needs
# only its include/ (pcpu/version.h): configured is enough.
set -euo pipefail
usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2; }
count=0
[[ ${1:-} == --count ]] && { count=1; shift; }
[[ $# -ge 2 ]] || usage
src=$(cd "$(dirname "$0")/.." && pwd)
lrseq=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
shift 2
[[ -f $lrseq/include/rseq/rseq.h && -f $lrseq/src/rseq.c ]] ||
  { echo "percpu_ops_librseq.sh: $lrseq is not a librseq checkout" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pcpu-librseq.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The loops, pcpu's each beside librseq's (index mm_cid, then cpu).
loops=(pcpu_add_loop lrseq_add_loop_cid lrseq_add_loop_cpu pcpu_this_add_loop
       pcpu_cas_loop lrseq_cas_loop_cid lrseq_cas_loop_cpu
       pcpu_cas2_loop lrseq_cas2_loop_cid lrseq_cas2_loop_cpu)
# "N / M": instructions / loads per iteration of loop $2 in ELF $1.
count_loop() {
  python3 "$src/bench/loop_insns.py" "$1" "$2" | tail -1 |
    sed -E 's/.*: ([0-9]+) instructions, ([0-9]+) loads per iteration$/\1 \/ \2/'
}

if [[ $count == 1 ]]; then
  (($# > 0)) || set -- gcc clang aarch64-linux-gnu-gcc \
    "clang --target=aarch64-linux-gnu -I/usr/aarch64-linux-gnu/include" \
    arm-linux-gnueabihf-gcc "arm-linux-gnueabihf-gcc -marm" \
    "clang --target=arm-linux-gnueabihf -I/usr/arm-linux-gnueabihf/include" \
    riscv64-linux-gnu-gcc "clang --target=riscv64-linux-gnu -I/usr/riscv64-linux-gnu/include"
  heads=() sos=()
  for cc in "$@"; do
    read -ra cmd <<<"$cc"
    # The column: the target's architecture, the compiler, its other flags.
    arch=$("${cmd[@]}" -dumpmachine) arch=${arch%%-*}
    name=gcc; [[ ${cmd[0]##*/} == *clang* ]] && name=clang
    for w in "${cmd[@]:1}"; do [[ $w == --target=* || $w == -I* ]] || name+=" $w"; done
    so=$work/${#sos[@]}.so
    "${cmd[@]}" -O2 -pthread -D_GNU_SOURCE -fPIC -shared -nostdlib -I"$src/include" \
      -I"$bin/include" -I"$lrseq/include" "$src/bench/percpu_ops_librseq.c" -o "$so"
    heads+=("$arch $name") sos+=("$so")
    echo "$arch $name: $("${cmd[@]}" --version | head -1)"
  done
  echo
  line="| loop, instructions / loads per iteration |" rule="|---|"
  for h in "${heads[@]}"; do line+=" $h |" rule+="---|"; done
  printf '%s\n%s\n' "$line" "$rule"
  for f in "${loops[@]}"; do
    line="| $f |"
    for so in "${sos[@]}"; do line+=" $(count_loop "$so" "$f") |"; done
    echo "$line"
  done
  exit 0
fi

cc=${CC:-gcc}
flags=(-O2 -g -pthread -D_GNU_SOURCE)
for f in rseq smp; do
  "$cc" "${flags[@]}" -fPIC -I"$lrseq/include" -c "$lrseq/src/$f.c" -o "$work/$f.o"
done
"$cc" "${flags[@]}" -I"$src/include" -I"$bin/include" -I"$lrseq/include" \
  "$src/bench/percpu_ops_librseq.c" "$work/rseq.o" "$work/smp.o" -o "$work/percpu_ops_librseq" \
  -L"$bin" -Wl,-rpath,"$bin" -lpcpu -ldl
"$cc" --version | head -1
"$work/percpu_ops_librseq" "$@"
if [[ ${PCPU_LOOP_INSNS:-0} == 1 ]]; then
  echo
  echo "instructions / loads per iteration, committing path (bench/loop_insns.py):"
  for f in "${loops[@]}"; do
    printf '%-22s ' "$f"
    python3 "$src/bench/loop_insns.py" "$work/percpu_ops_librseq" "$f" | tail -1 | sed 's/.*: //'
  done
fi
