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
# LIBRSEQ_DIR: a checkout of github.com/compudj/librseq (the runs recorded
# used cbdabc4). BUILD_DIR: a configured, built pcpu tree (libpcpu).
# The program's instructions per loop: PCPU_LOOP_INSNS=1 counts each loop
# function with bench/loop_insns.py (objdump).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
lrseq=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
shift 2
[[ -f $lrseq/include/rseq/rseq.h && -f $lrseq/src/rseq.c ]] ||
  { echo "percpu_ops_librseq.sh: $lrseq is not a librseq checkout" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pcpu-librseq.XXXXXX")
trap 'rm -rf "$work"' EXIT
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
  for f in pcpu_add_loop lrseq_add_loop_cid lrseq_add_loop_cpu pcpu_this_add_loop \
           pcpu_cas_loop lrseq_cas_loop_cid lrseq_cas_loop_cpu \
           pcpu_cas2_loop lrseq_cas2_loop_cid lrseq_cas2_loop_cpu; do
    printf '%-22s ' "$f"
    python3 "$src/bench/loop_insns.py" "$work/percpu_ops_librseq" "$f" | tail -1 | sed 's/.*: //'
  done
fi
