#!/usr/bin/env bash
# One emulated machine: builds tests/vm/vm_stress.c statically for ARCH,
# packs it as /init of an initramfs, boots a Debian kernel under TCG
# (scripts/vm/fetch-kernels.sh downloads it) and runs vm_stress in each
# MODE, one after the other, in that one boot.
#
# Usage: scripts/vm/run.sh [options] ARCH MODE...   (options anywhere)
#   ARCH       aarch64 | x86_64 | arm (ARMv7, armhf) | riscv64: the machines
#              of scripts/vm/fetch-kernels.sh (its `machines` table: kernel,
#              cross compiler, emulator and its arguments)
#   MODE       glibc | own | fallback | seccomp, optionally :cpu or :mm_cid
#              and :tree (vm_stress --workload tree: a pre-fork server's
#              shared-tree registry instead of the threads' stress) or :carry
#              (--workload carry: readers racing adds that carry past 2^32)
#              (the slot index asked for with PCPU_INDEX) and :expect=cpu|mm_cid
#              (the index the process must then report) and :hotplug=N (CPU
#              offline/online switches during the run), e.g. glibc:mm_cid:expect=cpu;
#              or footprint | footprint-all (vm_stress --footprint, with the
#              slot walk / with PCPU_SLOT_WALK=all) | footprint-sparse (the
#              segment file's bytes per series of published histograms, dense
#              and sparse, at the present CPUs: bench/memory.md, "Sparse
#              histograms, published"; e.g. scripts/vm/run.sh --smp 16
#              --possible 256 --tcg single x86_64 footprint-sparse)
#   --variant plain|split|broken|skew
#              plain: the ordinary sections (with PCPU_TEST_INJECT's abort count);
#              split: PCPU_TEST_SPLIT_BLOCKS, a branch after each load and add
#              inside the sections, so TCG (which takes interrupts only between
#              translated blocks) can preempt a section mid-way;
#              broken: split + PCPU_TEST_BROKEN_SECTION (every range ends before
#              its commit): the run must FAIL (lost updates); this script then
#              succeeds only if every mode failed on a total (with --args
#              "--rounds R" a mode runs again while it ends exact, R runs at
#              most: its last run decides);
#              skew (arm only): the library built with PCPU_TEST_TREE_SKEW,
#              a process-tree group's 32-bit lane take without its reread of
#              the whole seq (commit fdd6c8f's fix left out): every rseq
#              MODE with :tree must FAIL on a torn group read, the fallback
#              ones (no rseq take) stay exact
#   --kernel 6.1|6.12   (default: the machine's; amd64's 6.12 has mm_cid)
#   --smp N             vCPUs (default: the machine's: aarch64 2, x86_64 16,
#                       arm and riscv64 4)
#   --possible N        x86_64: possible CPUs (possible_cpus=N; 6.1 only)
#   --tcg multi|single  QEMU's TCG with a host thread per vCPU, or one thread
#                       for all (default: multi while the vCPUs fit the
#                       host's CPUs; beyond, the machine's choice in
#                       fetch-kernels.sh: single for aarch64, whose
#                       oversubscribed multi-threaded runs crawl (8 vCPUs on
#                       2 host CPUs: 334 s, single: 20 s; docs/design.md
#                       section 10); multi for the others, as measured)
#   --footprint         run vm_stress --footprint instead of the modes
#   --stage VARIANT     another build in the same boot: the options --args
#                       and --rust and the MODEs after it are that stage's
#                       (before the first --stage: the first stage's). The
#                       first stage's C vm_stress is /init and runs each
#                       stage's binary in turn, as a child, from /stages
#                       (VM_STAGE lines mark each stage's results): a boot
#                       of an emulated machine (QEMU's firmware, the
#                       kernel, up to 16 vCPUs brought up under TCG) costs
#                       as much as a stage's run, so the builds of one
#                       machine share it. Each stage's modes get their
#                       verdicts as their own boot would.
#   --args "..."        more vm_stress arguments for every mode
#   --rust              /init is rust/pcpu-vm's vm_stress instead of the C one:
#                       the Rust crate's inline Counter::add (its rseq
#                       section in Rust asm) under threads, migrations and
#                       signals, checked exact; aarch64 and x86_64 only
#                       (where the crate has the inline add); modes glibc,
#                       own, fallback; variants plain, split, broken (as
#                       rustc cfgs: pcpu_test_split_blocks,
#                       pcpu_test_broken_section); built with cargo for
#                       ARCH-unknown-linux-gnu, static (+crt-static), in
#                       build/vm/<arch>-rust/
# Prints the guest's VM_RESULT / VM_FOOTPRINT lines and one summary line per
# mode:  VM arch=... kernel=... variant=... mode=... adds=... aborts=...
#        seconds=... -> PASS exact | PASS caught | FAIL ...
# Every boot is bounded, so a hung guest fails: init must start within 420 s
# and the boot end within 1200 s (each x PCPU_TEST_TIMEOUT_SCALE). The
# bounds only catch hangs: the boots run beside the rest of the test
# command (scripts/test.sh), and a loaded host slows a guest's runs many
# times over (aarch64's broken boot: 40 s alone, 147 s and over 420 s beside
# the plain ctest). Build folders: build/vm/<arch>/. Never run by ctest.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
kernel="" smp="" possible="" footprint=0 tcg="" arch=""
# The stages: S_VARIANT[i], S_RUST[i], S_ARGS[i] (vm_stress's arguments),
# S_MODES[i] (space-separated).
S_VARIANT=(plain) S_RUST=(0) S_ARGS=("") S_MODES=("")
st=0
while [ $# -gt 0 ]; do
  case $1 in
    --variant) S_VARIANT[st]=$2; shift 2 ;;
    --kernel) kernel=$2; shift 2 ;;
    --smp) smp=$2; shift 2 ;;
    --possible) possible=$2; shift 2 ;;
    --tcg) tcg=$2; shift 2 ;;
    --footprint) footprint=1; shift ;;
    --rust) S_RUST[st]=1; shift ;;
    --args) S_ARGS[st]=$2; shift 2 ;;
    --stage) st=$((st + 1)); S_VARIANT[st]=$2 S_RUST[st]=0 S_ARGS[st]="" S_MODES[st]=""; shift 2 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) if [ -z "$arch" ]; then arch=$1; else S_MODES[st]+="${S_MODES[st]:+ }$1"; fi; shift ;;
  esac
done
nstages=${#S_VARIANT[@]}
[ -n "$arch" ] || { sed -n '2,30p' "$0" >&2; exit 2; }
for ((i = 0; i < nstages; i++)); do
  [ -n "${S_MODES[i]}" ] || [ $footprint -eq 1 ] || { echo "run.sh: no MODE (stage $((i + 1)))" >&2; exit 2; }
done
if [ "$nstages" -gt 1 ]; then
  [ $footprint -eq 0 ] || { echo "run.sh: --footprint is a boot of its own (no --stage)" >&2; exit 2; }
  [ "${S_RUST[0]}" = 0 ] || { echo "run.sh: with --stage, the first stage is C (its vm_stress is /init)" >&2; exit 2; }
fi
scale=${PCPU_TEST_TIMEOUT_SCALE:-1}
# The boot's bound grows with its stages (each may take as long as a boot).
boot_bound=$((1200 * scale * nstages)) init_bound=$((420 * scale))

machine=$(bash scripts/vm/fetch-kernels.sh --machine "$arch") || { echo "run.sh: unknown ARCH $arch" >&2; exit 2; }
read -r _ debarch mkernel msmp mtcg qemu console qemu_args <<<"$machine"
# The port's cross triplet, from its arch header; the host's own
# architecture builds with the host's compiler.
triplet=$(python3 tests/arch_headers.py "$arch" PCPU__ARCH_CROSS) || exit 2
[ "$arch" = "$(uname -m)" ] && triplet=-
kernel=${kernel:-$mkernel} smp=${smp:-$msmp} key=${debarch}_$kernel
if [ -z "$tcg" ]; then
  tcg=multi
  [ "$smp" -gt "$(nproc)" ] && tcg=$mtcg
fi
case $tcg in
  multi) accel=tcg ;;
  single) accel=tcg,thread=single ;;
  *) echo "run.sh: --tcg multi or single" >&2; exit 2 ;;
esac
if [ "$triplet" = - ]; then
  cc=gcc toolchain=()
else
  cc=$triplet-gcc
  toolchain=(-DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchain-cross.cmake" -DPCPU_CROSS_TRIPLET="$triplet")
fi
# stage_setup I: the stage's variant, rust, extra (its vm_stress
# arguments), defs (the C build's) and vlabel (the variant as the summary
# lines name it: rust-VARIANT for --rust), checked.
stage_setup() {
  variant=${S_VARIANT[$1]} rust=${S_RUST[$1]} extra=${S_ARGS[$1]}
  case $variant in
    plain) defs=() ;;
    split) defs=(-DPCPU_TEST_SPLIT_BLOCKS) ;;
    broken) defs=(-DPCPU_TEST_SPLIT_BLOCKS -DPCPU_TEST_BROKEN_SECTION) ;;
    skew) defs=()
          [ "$arch" = arm ] || { echo "run.sh: --variant skew is for arm (where a word is 32 bits)" >&2; exit 2; } ;;
    *) echo "run.sh: unknown variant $variant" >&2; exit 2 ;;
  esac
  vlabel=$variant
  if [ "$rust" -eq 1 ]; then
    vlabel=rust-$variant
    case $arch in
      aarch64|x86_64) ;;
      *) echo "run.sh: --rust: no inline add on $arch (the crate's asm is for aarch64 and x86_64)" >&2; exit 2 ;;
    esac
    case $variant in
      plain|split|broken) ;;
      *) echo "run.sh: --rust: variant plain, split or broken" >&2; exit 2 ;;
    esac
    [ $footprint -eq 0 ] || { echo "run.sh: --rust has no footprint" >&2; exit 2; }
  fi
}
for ((i = 0; i < nstages; i++)); do stage_setup $i; done

# The kernel.
kernels=$(bash scripts/vm/fetch-kernels.sh) || { echo "run.sh: fetching the kernels failed" >&2; exit 1; }
vmlinuz=$(sed -n "s/^$key=//p" <<<"$kernels")
[ -n "$vmlinuz" ] && [ -f "$vmlinuz" ] || { echo "run.sh: no kernel $key" >&2; exit 1; }

build_init_c() { # -> $work/root/init
# The libraries, static, for the target (only the libraries: no tests, tools,
# protobuf), then vm_stress against them.
bdir=$root/build/vm/$arch libdefs=()
if [ "$variant" = skew ]; then # a library of its own
  bdir=$root/build/vm/$arch-skew libdefs=(-DCMAKE_C_FLAGS=-DPCPU_TEST_TREE_SKEW)
fi
mkdir -p "$root/build/vm"
if [ ! -f "$bdir/build.ninja" ]; then
  cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${toolchain[@]}" "${libdefs[@]}" \
    -DPCPU_BUILD_TESTS=OFF -DPCPU_BUILD_BENCH=OFF -DPCPU_BUILD_EXAMPLES=OFF \
    -DPCPU_BUILD_TOOLS=OFF -DPCPU_PROTOBUF=OFF >"$bdir.configure.log" 2>&1 \
    || { cat "$bdir.configure.log"; echo "run.sh: configure failed" >&2; exit 1; }
fi
# Both libraries: vm_stress's trees, histograms and groups are
# libpcpu-stats', which comes first on the link line (it calls libpcpu).
cmake --build "$bdir" --target pcpu_stats_static pcpu_static -j 2 >"$bdir.build.log" 2>&1 \
  || { tail -30 "$bdir.build.log"; echo "run.sh: build failed" >&2; exit 1; }
libs=("$bdir/libpcpu-stats.a" "$bdir/libpcpu.a")
work=$bdir/$kernel-$variant
rm -rf "$work" && mkdir -p "$work/root"
$cc -O2 -g -static -pthread -D_GNU_SOURCE "${defs[@]}" -Iinclude -I"$bdir/include" \
  -o "$work/root/init" tests/vm/vm_stress.c "${libs[@]}" \
  || { echo "run.sh: building vm_stress failed" >&2; exit 1; }
}

build_init_rust() { # -> $work/root/init
# rust/pcpu-vm for ARCH-unknown-linux-gnu, static: pcpu-sys's build.rs
# compiles the C library with the cc crate and the machine's compiler; the
# variant's cfgs reach every crate of the target (RUSTFLAGS, not the build
# scripts), a cargo target folder per variant so that none rebuilds another.
local target=$arch-unknown-linux-gnu flags="-C target-feature=+crt-static"
local tvar=${target//-/_}
case $variant in
  split) flags+=" --cfg pcpu_test_split_blocks" ;;
  broken) flags+=" --cfg pcpu_test_split_blocks --cfg pcpu_test_broken_section" ;;
esac
bdir=$root/build/vm/$arch-rust
local tdir=$bdir/target-$variant
mkdir -p "$bdir"
(cd rust && env "CC_$tvar=$cc" "CARGO_TARGET_${tvar^^}_LINKER=$cc" \
   "CARGO_TARGET_${tvar^^}_RUSTFLAGS=$flags" \
   cargo build --locked --release -j 2 -p pcpu-vm --target "$target" --target-dir "$tdir") \
  >"$bdir/build-$variant.log" 2>&1 \
  || { tail -30 "$bdir/build-$variant.log"; echo "run.sh: building rust/pcpu-vm failed" >&2; exit 1; }
work=$bdir/$kernel-$variant
rm -rf "$work" && mkdir -p "$work/root"
cp "$tdir/$target/release/vm_stress" "$work/root/init"
}

S_WORK=() S_LABEL=()
for ((i = 0; i < nstages; i++)); do
  stage_setup $i
  if [ "$rust" -eq 1 ]; then build_init_rust; else build_init_c; fi
  S_WORK[i]=$work S_LABEL[i]=$vlabel
done
# shellcheck disable=SC2206 # the modes, split on purpose
modes_of() { local m=(${S_MODES[$1]}); (IFS=,; echo "${m[*]}"); }
# The command line: everything after "--" is init's argv. With stages,
# init has none: it finds /stages (one line per stage: its binary, then its
# arguments) and runs them.
if [ "$nstages" -eq 1 ]; then
  if [ $footprint -eq 1 ]; then
    init_args="--footprint"
  else
    init_args="--modes $(modes_of 0) ${S_ARGS[0]}"
  fi
else
  work=${S_WORK[0]%/*}/$kernel-$(IFS=+; echo "${S_LABEL[*]}")
  rm -rf "$work" && mkdir -p "$work/root"
  cp "${S_WORK[0]}/root/init" "$work/root/init"
  : >"$work/root/stages"
  for ((i = 0; i < nstages; i++)); do
    bin=/init
    if [ $i -gt 0 ]; then bin=/stage$i; cp "${S_WORK[i]}/root/init" "$work/root$bin"; fi
    echo "$bin --modes $(modes_of $i) ${S_ARGS[i]}" >>"$work/root/stages"
  done
  init_args=""
fi
(cd "$work/root" && find . | cpio -o -H newc --quiet | gzip -1 >"$work/init.cpio.gz")
pc=""; [ -n "$possible" ] && pc="possible_cpus=$possible"
# shellcheck disable=SC2206 # the machine's arguments, split on purpose
cmd=($qemu -accel $accel $qemu_args -smp "$smp" -nographic -no-reboot -nic none
     -kernel "$vmlinuz" -initrd "$work/init.cpio.gz"
     -append "console=$console quiet panic=-1 $pc -- $init_args")
log=$work/console.log
start=$SECONDS
# A kernel that panics before init runs (seen once: Debian's 6.12 under
# TCG, an int3 oops in sched_init_debug) or hangs silently before it (seen
# once: riscv64's 6.12 under multi-threaded TCG at load average 6, no
# output after the firmware's for 420 s; three boots of the same build
# after it took 24-33 s) tested nothing: that boot is made again, twice at
# most, and said so. Once init has run (it prints VM_INIT first, right
# after mounting /proc, /sys and /dev), whatever happens is the run's
# result.
for boot in 1 2 3; do
  boot_t0=$SECONDS
  : >"$log" # the loop below may read it before the machine's redirection made it
  timeout -k 10 "$boot_bound" "${cmd[@]}" </dev/null >"$log" 2>&1 &
  qpid=$!
  # init within init_bound (a kernel hung before init is booted again
  # sooner than the whole boot's bound).
  timed_out=0
  while kill -0 "$qpid" 2>/dev/null; do
    if tr -d '\r' <"$log" | grep -q 'VM_INIT'; then break; fi
    if [ $((SECONDS - boot_t0)) -ge "$init_bound" ]; then
      kill "$qpid" 2>/dev/null; timed_out=1; break
    fi
    sleep 1
  done
  wait "$qpid"
  qrc=$?
  if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then timed_out=1; fi
  if tr -d '\r' <"$log" | grep -q 'VM_INIT' || [ $boot = 3 ] ||
     { ! grep -q 'Kernel panic' "$log" && [ $timed_out = 0 ]; }; then
    break
  fi
  cp "$log" "$work/console.noinit$boot.log"
  if grep -q 'Kernel panic' "$log"; then
    why="the kernel panicked before init ran ($(grep -m1 -oE '(Oops|BUG|RIP)[^[]*' "$log" | head -1))"
  else
    why="init did not start within $init_bound s (no output after the firmware's)"
  fi
  echo "VM arch=$arch kernel=$kernel boot $boot: $why; booting again (console: $work/console.noinit$boot.log)"
done
secs=$((SECONDS - start))
# The console's text, from the guest's lines on (the firmware's escape
# sequences may precede a line).
tr -d '\r' <"$log" | grep -oE '(VM_STAGE|VM_RESULT|VM_FOOTPRINT|vm_stress: ).*' >"$work/results.txt" || true
grep -v '^VM_STAGE' "$work/results.txt"
vlabel=$(IFS=+; echo "${S_LABEL[*]}") # the boot's
krel=$(cat "$(dirname "$vmlinuz")/release" 2>/dev/null || echo "$kernel")
if [ $timed_out = 1 ] && ! tr -d '\r' <"$log" | grep -q 'VM_INIT'; then
  echo "VM arch=$arch kernel=$krel variant=$vlabel boot=${secs}s -> FAIL: init did not start within $init_bound s, three boots (console: $log)"
  tail -20 "$log"
  exit 1
fi
if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then
  echo "VM arch=$arch kernel=$krel variant=$vlabel boot=${secs}s -> FAIL: no power-off within $boot_bound s (console: $log)"
  tail -20 "$log"
  exit 1
fi
if [ $footprint -eq 1 ]; then
  if grep -q '^VM_FOOTPRINT .*result=ok' "$work/results.txt"; then
    echo "VM arch=$arch kernel=$krel footprint boot=${secs}s -> PASS"; exit 0
  fi
  echo "VM arch=$arch kernel=$krel footprint -> FAIL (console: $log)"; tail -20 "$log"; exit 1
fi

# One verdict per mode of each stage, from its VM_RESULT line (init prints
# VM_MODE_END with the child's exit status after each) among the lines of
# its stage (after the runner's "VM_STAGE N", before the next one).
rc=0
for ((i = 0; i < nstages; i++)); do
  stage_setup $i
  res_file=$work/results.txt
  if [ "$nstages" -gt 1 ]; then
    res_file=$work/results-$i.txt
    awk -v n=$((i + 1)) '/^VM_STAGE / { in_stage = ($2 == n); next } in_stage' "$work/results.txt" >"$res_file"
  fi
  # shellcheck disable=SC2086 # the modes, split on purpose
  set -- ${S_MODES[i]}
  for m in "$@"; do
    name=${m%%:*}
    if [ "$m" = footprint-sparse ]; then
      # The file bytes per series, a kind a line (the guest's lines above).
      if grep -qE "^VM_FOOTPRINT .*result=ok spec=$m( |$)" "$res_file"; then
        echo "VM arch=$arch kernel=$krel mode=$m -> PASS"
        sed -nE 's/^VM_FOOTPRINT_SPARSE .* cpus=([^ ]*) .* kind=([^ ]*) .* writers=([0-9]+) file_per_series (.*)/  \1 \2 (wall: \3 CPUs): \4/p' "$res_file"
      else
        echo "VM arch=$arch kernel=$krel mode=$m -> FAIL: no footprint (console: $log)"; rc=1
      fi
      continue
    fi
    if [ "${m#footprint}" != "$m" ]; then
      if grep -qE "^VM_FOOTPRINT .*result=ok spec=$m( |$)" "$res_file"; then
        echo "VM arch=$arch kernel=$krel mode=$m -> PASS ($(grep -E "^VM_FOOTPRINT .* spec=$m( |$)" "$res_file" | grep -oE 'bytes_per_counter.*fetch_ns=[0-9]+'))"
      else
        echo "VM arch=$arch kernel=$krel mode=$m -> FAIL: no footprint (console: $log)"; rc=1
      fi
      continue
    fi
    line=$(grep -E "^VM_RESULT .* spec=$m( |$)" "$res_file" | tail -1)
    if [ -z "$line" ]; then
      echo "VM arch=$arch kernel=$krel variant=$vlabel mode=$m -> FAIL: no result (console: $log)"
      rc=1; continue
    fi
    get() { sed -nE "s/.* $1=([^ ]*).*/\1/p" <<<"$line"; }
    res=$(get result)
    summary="VM arch=$arch kernel=$krel cpus=$(get cpus) variant=$vlabel mode=$m index=$(get index) adds=$(get adds) aborts=$(get aborts) hotplug=$(get hotplug) seconds=$(get seconds)"
    if [ "$variant" = skew ]; then
      # The test of the tree test: without the reread, a lane taken after
      # another take and release (vm_stress makes one there) keeps a stale
      # generation, and a read during its update shows half of it.
      if [ "$name" = fallback ] || [ "$name" = seccomp ]; then
        [ "$res" = exact ] && echo "$summary -> PASS exact (no rseq take)" \
          || { echo "$summary -> FAIL: $res"; rc=1; }
      elif [ "$res" = FAILED ] && grep -qE '^vm_stress: FAIL: tree: .*torn' "$res_file"; then
        torn=$(awk -v spec="$m" '/^vm_stress: FAIL: tree: group read in mid-update torn/ { t = $0 }
          /^VM_RESULT/ { if (index($0, " spec=" spec) && $NF == "spec=" spec) { print t; exit } t = "" }' \
          "$res_file" | grep -oE 'torn [0-9]+ times of [0-9]+')
        echo "$summary -> PASS caught (${torn:-torn group reads}: reads in mid-update)"
      else
        echo "$summary -> FAIL: the skewed build was not caught ($res)"; rc=1
      fi
    elif [ "$variant" = broken ]; then
      # The test of the test: a section whose range ends before its commit
      # must lose updates, seen as a wrong total. In the fallback modes no
      # section runs, so they stay exact.
      if [ "$name" = fallback ] || [ "$name" = seccomp ]; then
        [ "$res" = exact ] && echo "$summary -> PASS exact (no section runs)" \
          || { echo "$summary -> FAIL: $res"; rc=1; }
      elif [ "$res" = FAILED ] && grep -qE '^vm_stress: FAIL: (counter|add_many|histogram|group|rwlock|ref holds|hcounter|load_cbne_store_store)' "$res_file"; then
        runs=$(grep -cE "^VM_RESULT .* spec=$m( |$)" "$res_file")
        echo "$summary -> PASS caught in run $runs (the broken build lost updates)"
      else
        echo "$summary -> FAIL: the broken build was not caught ($res)"; rc=1
      fi
    else
      if [ "$res" = exact ]; then echo "$summary -> PASS exact"; else echo "$summary -> FAIL: $res"; rc=1; fi
    fi
  done
done
vlabel=$(IFS=+; echo "${S_LABEL[*]}")
echo "VM arch=$arch kernel=$krel variant=$vlabel tcg=$tcg boot+run=${secs}s rc=$rc"
exit $rc
