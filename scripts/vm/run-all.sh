#!/usr/bin/env bash
# The emulated machines' step of scripts/test.sh: every mode on aarch64 and
# on a many-CPU x86-64, the block-splitting build, and a deliberately broken
# build that must be caught. Each `run` line below is one boot of
# scripts/vm/run.sh; the builds of one machine (plain, split, broken, skew,
# Rust) share a boot as its stages (run.sh --stage): under TCG a boot
# (firmware, kernel, up to 16 vCPUs brought up) costs as much as a
# build's run, 6-75 s here. The machines and what runs on them:
#
#   aarch64, Debian 12's 6.1, 2 vCPUs (no mm_cid):
#     plain   glibc, own, fallback, seccomp, mm_cid asked for (reports cpu);
#             tree (a pre-fork server's shared-tree registry) glibc, fallback
#     split   glibc, own          broken  glibc, own   (must lose updates)
#   aarch64, 8 vCPUs (single-threaded TCG): glibc, own, fallback
#   x86-64, Debian 12's 6.1, 16 vCPUs of 256 possible (possible_cpus=256):
#     plain   glibc with 10 CPU hotplug switches, own under strict commit
#             accounting (vm.overcommit_memory=2: vm_stress --strict-commit),
#             fallback, seccomp, mm_cid asked for (reports cpu); footprint:
#             10^6 counters written from 2 slots (bytes per counter, page
#             tables, a fetch's cost), with the slot walk, with every slot
#             walked, and under strict commit accounting (its commit)
#     split   glibc               broken  glibc        (must lose updates)
#   x86-64, bookworm-backports' 6.12 (has mm_cid), 16 vCPUs:
#     plain   glibc and own with index mm_cid (must use it), own with 20
#             hotplug switches; tree glibc, own (index cpu; own under strict
#             commit accounting: a published tree on a tmpfs)
#   ARMv7 (arm), Debian 12's 6.1 armmp, cortex-a15, 4 vCPUs:
#     plain   glibc, own, fallback, seccomp; tree glibc, own, fallback, seccomp
#     split   glibc, own, carry glibc/own/fallback   broken  glibc, own   (must lose updates)
#     skew    tree glibc, own (must tear a group read: the library without
#             its 32-bit reread of a tree lane's seq), tree fallback (exact)
#   riscv64, Debian 13's 6.12, 4 vCPUs (bookworm's cross glibc does not
#   register rseq on riscv64: pcpu's own registration is the fast path):
#     plain   own, fallback, seccomp
#     split   own; tree own, fallback    broken  own   (must lose updates)
#   Rust (run.sh --rust: rust/pcpu-vm, the pcpu crate's inline Counter::add,
#   its rseq section in Rust asm, under migrations and a signal handler's adds):
#     aarch64 2 vCPUs  plain glibc, own, fallback   split glibc, own
#                      broken glibc, own (must lose updates)
#     x86_64 4 vCPUs   plain glibc, own, fallback
#
# The stress modes add counter(9) counters too (pcpu/counter9.h), a
# hierarchical counter (its carries), a limiter on another one (limited adds
# that must never hold more than the limit) and a per-slot log written by
# pcpu_rseq_load_cbne_store_store() (pcpu/hcounter.h, pcpu/percpu_ops.h). A tree
# mode (MODE:tree, vm_stress --workload tree) runs --tree-adds adds and
# --tree-aborts aborts instead of the boot's --adds and --aborts.
#
# Usage: scripts/vm/run-all.sh      (exit 0 when every boot passed)
# Each run goes until its adds and aborts are done, never for a fixed time;
# each boot is bounded (scripts/vm/run.sh: init within 420 s, the boot within
# 1200 s per stage, x PCPU_TEST_TIMEOUT_SCALE). Never run by ctest.
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
pass=0 fail=0 failed=() fail_tails=""
log_dir=build/vm
mkdir -p "$log_dir"
summary=$log_dir/summary.txt
: >"$summary"

run() { # description, run.sh arguments...
  local what=$1; shift
  echo "--- vm: $what"
  local out
  out=$(bash scripts/vm/run.sh "$@" 2>&1)
  local rc=$?
  printf '%s\n' "$out" | grep -E '^(VM|VM_FOOTPRINT) ' | tee -a "$summary"
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1))
  else
    printf '%s\n' "$out" | grep -vE '^VM ' | tail -30
    fail=$((fail + 1)); failed+=("$what")
    # Kept for the end: a CI log shows its last lines, not the middle.
    fail_tails+="--- vm failed: $what"$'\n'"$(printf '%s\n' "$out" | grep -E 'FAIL|rc=|boot|init' | tail -15)"$'\n'
  fi
}

# Enough adds to span many timer ticks and migrations, and aborts seen in
# every rseq mode (vm_stress asks a quarter of the adds in the fallback modes,
# whose atomics TCG emulates slowly).
a64="--adds 4000000 --aborts 200"
x86="--adds 8000000 --aborts 500"
# The tree modes' adds: seconds to a minute each under TCG (a tree group's
# update costs a few counter adds, and each is read back mid-update).
tree_small="--tree-adds 200000 --tree-aborts 10"
tree_arm="--tree-adds 200000 --tree-aborts 20"

rust_a64="--adds 4000000 --aborts 1000"
run "aarch64 6.1: plain, split, broken (must be caught); Rust plain, split, broken (must be caught)" \
  aarch64 --args "$a64 $tree_small" glibc own fallback seccomp glibc:mm_cid:expect=cpu glibc:tree fallback:tree \
  --stage split --args "$a64" glibc own \
  --stage broken --args "--adds 4000000 --aborts 2000 --rounds 5" glibc own \
  --stage plain --rust --args "$rust_a64" glibc own fallback \
  --stage split --rust --args "$rust_a64" glibc own \
  --stage broken --rust --args "$rust_a64 --rounds 5" glibc own
run "aarch64 6.1 8 vCPUs" --smp 8 aarch64 --args "$a64" glibc own fallback

run "x86_64 6.1 16/256: plain, split, broken (must be caught)" --possible 256 x86_64 --args "$x86" \
  glibc:hotplug=10 own:strict fallback seccomp glibc:mm_cid:expect=cpu footprint-all footprint \
  footprint:strict \
  --stage split --args "$x86" glibc \
  --stage broken --args "$x86 --rounds 5" glibc

run "x86_64 6.12 plain mm_cid" --kernel 6.12 x86_64 --args "$x86 $tree_small" \
  glibc:mm_cid:expect=mm_cid own:mm_cid:expect=mm_cid:hotplug=20 glibc:tree own:tree:strict

run "x86_64 6.1 rust plain" --rust --smp 4 x86_64 --args "--adds 8000000 --aborts 500" glibc own fallback

run "arm 6.1: plain, split, broken (must be caught), skew (must be caught)" \
  arm --args "--adds 2000000 --aborts 100 $tree_arm" glibc own fallback seccomp \
  glibc:tree own:tree fallback:tree seccomp:tree \
  --stage split --args "--adds 2000000 --aborts 100 --carry-reads 100000" glibc own \
  glibc:carry own:carry fallback:carry \
  --stage broken --args "--adds 2000000 --aborts 200 --rounds 5" glibc own \
  --stage skew --args "--tree-adds 200000 --tree-aborts 10" glibc:tree own:tree fallback:tree
# (split's carry modes: readers racing carries past 2^32, no torn 64-bit
# word: issue 51)
run "riscv64 6.12: plain, split, broken (must be caught)" riscv64 --args "--adds 400000 --aborts 100" \
  own fallback seccomp \
  --stage split --args "--adds 400000 --aborts 100 $tree_small" own own:tree fallback:tree \
  --stage broken --args "--adds 1000000 --aborts 100 --rounds 5" own

[ -z "$fail_tails" ] || printf '%s' "$fail_tails"
echo "vm: $pass passed, $fail failed ($((SECONDS - start)) s)${failed:+; failed: ${failed[*]}}"
[ $fail -eq 0 ]
