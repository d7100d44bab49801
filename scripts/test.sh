#!/usr/bin/env bash
# pcpu's whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. installs what the tests need (scripts/install-deps.sh; the tests'
#      Python packages into the virtual environment ~/.cache/pcpu-venv,
#      whose python3 every step below runs),
#   2. plain build (RelWithDebInfo): every test, the stress test in all three
#      rseq modes and under valgrind, fuzzers, Prometheus checks,
#   3. AddressSanitizer + UndefinedBehaviorSanitizer build: every test,
#   4. ThreadSanitizer build: every test (TSan cannot see inline assembly, so
#      there pcpu runs its atomic fallback path, which TSan checks),
#   2b. the Rust crates (rust/): `cargo test` of pcpu-sys and pcpu, doctests
#      and the metrics / prometheus-client integrations included, in the
#      plain configuration (their own cc build of the C library), with the
#      plain build's pcpustat reading a Rust program (about 50 s from clean),
#      then the crates as crates.io users get them (run_rust_package:
#      fmt, publish --dry-run, a program against the .crate files),
#      then the pcpu crate's tests under Miri (run_miri, about 30 s),
#   5. the emulated machines (scripts/vm/run-all.sh, not under ctest):
#      aarch64, ARMv7, riscv64 and a 16-CPU x86-64 with 256 possible CPUs
#      under QEMU's TCG, in the background from the start (below),
#      Debian kernels downloaded into ~/.cache/pcpu-vm, every mode, and a
#      deliberately broken build that must be caught; counted as one test.
# Usage: scripts/test.sh [--quick] [--no-vm]
#   --quick: the fast tier before a commit: the plain build and its unit
#            tests (ctest -L unit), nothing else (no Rust, Go, sanitizers,
#            emulated machines); a few minutes once build/ exists. It
#            installs only what it uses (install-deps.sh --quick: no
#            emulators, cross compilers, Chromium, nginx or Miri)
#   --no-vm: skip step 5 (quick local runs; CI never passes it)
# Build folders: build/, build-asan/, build-tsan/ (reused if present).
# The sanitizer builds leave out the tests labelled `repeat` there (ctest
# -LE repeat): the same code as another test of that build, or a check of
# sources and packaging that the plain build runs (tests/CMakeLists.txt,
# pcpu_label_repeats; docs/testing.md says which build runs what).
# At the end: each step's wall-clock and CPU seconds (children's user +
# system: on a shared machine, what the step costs whatever the load).
#
# No test depends on how much CPU it gets: tests that need N events run
# until they have them, and each test's ctest timeout only catches a hang
# (tests/CMakeLists.txt). On a machine slow enough to need more than those
# timeouts, PCPU_TEST_TIMEOUT_SCALE=N (a whole number) multiplies them all.
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0 vm=1
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    --no-vm) vm=0 ;;
    *) echo "usage: scripts/test.sh [--quick] [--no-vm]"; exit 2 ;;
  esac
done
scale=${PCPU_TEST_TIMEOUT_SCALE:-1}
[[ "$scale" =~ ^[1-9][0-9]*$ ]] || { echo "test.sh: PCPU_TEST_TIMEOUT_SCALE must be a whole number >= 1"; exit 2; }
start=$SECONDS

# Each step's wall-clock and CPU time, printed as it ends and in a table
# at the end. CPU time: user + system of the processes the step waited for
# (bash's `times`, children's line).
steps=()
# (`times` in this shell, not in a $(...) subshell, which has its own.)
times_file=$(mktemp) && trap 'rm -f "$times_file"' EXIT
times_cpu() { # FILE (`times` output) -> the children's user + system seconds
  awk 'NR==2 { t=0; for (i=1;i<=2;i++) { split($i,a,/[ms]/); t+=a[1]*60+a[2] } printf "%.0f", t }' "$1"
}
cpu_now() { # -> $cpu
  times >"$times_file"
  cpu=$(times_cpu "$times_file")
}
# A step in the background (the emulated machines, below) writes its own
# CPU (`times`, TIMES_FILE) as it ends. bash adds a job's CPU to its
# children's when it reaps it, in whichever step runs then; that step's
# figure leaves it out (bg_reaped_cpu: jobs gone from /proc).
bg_pids=() bg_times=() bg_counted=()
bg_started() { bg_pids+=("$!") bg_times+=("$1") bg_counted+=(0); } # TIMES_FILE, after `... &`
bg_reaped_cpu() { # -> $bg_cpu: the CPU of the jobs reaped since the last call
  local i
  bg_cpu=0
  for i in "${!bg_pids[@]}"; do
    if [ "${bg_counted[$i]}" -eq 0 ] && [ ! -e "/proc/${bg_pids[$i]}" ] && [ -s "${bg_times[$i]}" ]; then
      bg_cpu=$((bg_cpu + $(times_cpu "${bg_times[$i]}"))) bg_counted[$i]=1
    fi
  done
}
step_start() { step_name=$1 step_t0=$SECONDS; cpu_now; bg_reaped_cpu; step_c0=$cpu; }
step_end() {
  cpu_now
  bg_reaped_cpu
  local w=$((SECONDS - step_t0)) c=$((cpu - step_c0 - bg_cpu))
  steps+=("$(printf '%-22s %6d s wall %7d s CPU' "$step_name" "$w" "$c")")
  echo "=== step $step_name: $w s wall, $c s CPU"
}

step_start install-deps
deps_mode=""
[ $quick -eq 1 ] && deps_mode=--quick
bash scripts/install-deps.sh $deps_mode || { echo "test.sh: installing dependencies failed"; exit 1; }
step_end
# The tests' Python packages are in the virtual environment install-deps.sh
# made: its python3 first on PATH for every step (ctest, cargo, go), and
# CMake's PCPU_PYTHON3 (also for a build folder configured before).
venv=${XDG_CACHE_HOME:-$HOME/.cache}/pcpu-venv
export PATH="$venv/bin:$PATH"

jobs=$(nproc)
# The unit tier's tests mostly wait (processes starting, sockets): twice
# as many at once as CPUs (34 s -> 25 s on 2 CPUs). The whole suite's
# plain ctest keeps one per CPU, the emulated machines filling what it
# leaves idle; the sanitizer configurations, after them, one more
# (san_ctest_jobs below).
ctest_jobs=$jobs
[ $quick -eq 1 ] && ctest_jobs=$((2 * jobs))
total_pass=0 total_fail=0 failed_configs=()

# The emulated machines (step 5) need nothing the other steps build (their
# own cross builds, in build/vm/): they start here, in the background, and
# their QEMU threads take the CPU the steps below leave idle (a ctest -j N
# keeps fewer than N CPUs busy much of the time: a chain of heavy tests, a
# tail, tests waiting on sockets and timers). Their log is printed, and
# their result counted, at the end. A boot beside the ctest steps takes
# up to ten times as long as alone (scripts/vm/run.sh's bounds allow it).
vm_log=build-vm.log vm_times=build-vm-times.log vm_pid=
if [ $vm -eq 1 ] && [ $quick -eq 0 ]; then
  mkdir -p build
  rm -f "$vm_times"
  vm_t0=$SECONDS
  (
    bash scripts/vm/run-all.sh
    rc=$?
    times >"$vm_times" # the CPU of the whole step: this subshell's children
    exit $rc
  ) >"$vm_log" 2>&1 &
  vm_pid=$!
  bg_started "$vm_times"
  echo "=== emulated machines: started in the background (scripts/vm/run-all.sh; log: $vm_log)"
fi

run_config() { # name, build dir, ctest label arguments, ctest jobs, cmake args...
  local name=$1 dir=$2 select=$3 cjobs=$4; shift 4
  step_start "$name build"
  echo "=== $name: configure + build ($dir)"
  if ! cmake -S . -B "$dir" -G Ninja "$@" -DPCPU_TEST_TIMEOUT_SCALE="$scale" -DPCPU_PYTHON3="$venv/bin/python3" \
       >"$dir.configure.log" 2>&1; then
    cat "$dir.configure.log"; failed_configs+=("$name (configure)"); total_fail=$((total_fail+1)); return
  fi
  if ! cmake --build "$dir" -j "$jobs" >"$dir.build.log" 2>&1; then
    tail -50 "$dir.build.log"; failed_configs+=("$name (build)"); total_fail=$((total_fail+1)); step_end; return
  fi
  step_end
  step_start "$name ctest"
  echo "=== $name: ctest $select"
  local log="$dir.ctest.log"
  # --timeout: only for a test without a TIMEOUT of its own (every test of
  # the suite has one: this is a backstop).
  # shellcheck disable=SC2086 # the label arguments, split on purpose
  (cd "$dir" && ctest --output-on-failure -j "$cjobs" --timeout $((600 * scale)) $select) 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line pass fail
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1)
  if [ -n "$line" ]; then
    fail=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
    pass=$(( $(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line") - fail ))
  else
    pass=0; fail=1
  fi
  total_pass=$((total_pass+pass)); total_fail=$((total_fail+fail))
  [ "$rc" -eq 0 ] && [ "$fail" -eq 0 ] || failed_configs+=("$name")
  step_end
}

# Benchmarks are built (so they cannot rot) but not run here: speed is
# measured by bench/, never asserted in tests.
# PCPU_PROTOBUF=ON: install-deps.sh installed protobuf-c, so a build that
# could not find it must fail here rather than quietly drop the protobuf tests.
# The tests, benchmarks and examples on, explicitly: scripts/demo.sh
# configures build/ without the tests (it installs only what it shows).
# --quick: the unit tier only.
plain_select=""
[ $quick -eq 1 ] && plain_select="-L unit"
run_config plain build "$plain_select" "$ctest_jobs" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPCPU_PROTOBUF=ON \
  -DPCPU_BUILD_TESTS=ON -DPCPU_BUILD_BENCH=ON -DPCPU_BUILD_EXAMPLES=ON
# count_cargo_log NAME LOG RC: adds the passed and failed counts of LOG's
# `test result:` lines to the totals; a cargo that failed (RC) with no
# failed test (a build error) counts as one failure.
count_cargo_log() {
  local name=$1 log=$2 rc=$3 pass fail
  read -r pass fail < <(awk '/^test result: /{for(i=1;i<NF;i++){if($(i+1)~/^passed/)p+=$i;if($(i+1)~/^failed/)f+=$i}}
                             END{print p+0, f+0}' "$log")
  [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ] && fail=1
  total_pass=$((total_pass+pass)); total_fail=$((total_fail+fail))
  [ "$rc" -eq 0 ] && [ "$fail" -eq 0 ] || failed_configs+=("$name")
}
# The Rust crates: every `test result:` line of cargo counts, as ctest's
# tests do; a build that fails before any test ran counts as one failure.
# PCPU_PCPUSTAT is set whether or not the plain build made pcpustat, so
# the segment test fails rather than skips when it is missing.
run_rust() {
  echo "=== rust (cargo test -p pcpu-sys -p pcpu, with the metrics, prometheus-client and protobuf features)"
  local log=build-rust.log
  if ! command -v cargo >/dev/null; then
    echo "test.sh: cargo not found"; failed_configs+=("rust (no cargo)"); total_fail=$((total_fail+1)); return
  fi
  (cd rust && PCPU_PCPUSTAT="$PWD/../build/tools/pcpustat" cargo test --locked --no-fail-fast -p pcpu-sys -p pcpu \
    --features pcpu/metrics,pcpu/prometheus-client,pcpu/protobuf) 2>&1 | tee "$log"
  count_cargo_log rust "$log" "${PIPESTATUS[0]}"
}
if [ $quick -eq 0 ]; then step_start rust; run_rust; step_end; fi

# The Rust crates as crates.io users get them (rust/package-check.sh):
# cargo fmt --check, cargo publish --dry-run of pcpu-sys and pcpu (each
# built from its package alone), and a program outside the repository
# built and run against the unpacked .crate files with the newest and the
# oldest prometheus-client pcpu takes. Each of the four checks counts as
# one test. About 70 s once its cache (~/.cache/pcpu-rust-package) is warm.
run_rust_package() {
  echo "=== rust package (rust/package-check.sh: fmt, publish --dry-run, a program against the .crate files)"
  local log=build-rust-package.log pass fail rc
  bash rust/package-check.sh >"$log" 2>&1
  rc=$?
  grep -E '^--- (PASS|FAIL)|^error' "$log"
  pass=$(grep -c '^--- PASS' "$log"); fail=$(grep -c '^--- FAIL' "$log")
  if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; tail -40 "$log"; fi
  total_pass=$((total_pass+pass)); total_fail=$((total_fail+fail))
  [ "$fail" -eq 0 ] || failed_configs+=("rust package")
}
if [ $quick -eq 0 ]; then step_start "rust package"; run_rust_package; step_end; fi

# Miri: the pcpu crate's tests under the interpreter, which checks the
# Rust side (references, lifetimes, pointer provenance and arithmetic,
# data races between Rust threads) while the plain build's shared
# libraries run natively (-Zmiri-native-lib). Miri runs no inline
# assembly, so the crate's stable tier (the C add by call) stands in for
# it; it cannot see memory the C library allocated, fork or run signal
# handlers: the tests that need those say so and are ignored there
# (rust/pcpu/tests/exact.rs, pcpustat.rs; loop_insns.rs, machine code, is
# left out). With the metrics feature (its lock-free table and recorder;
# the tests that read the exposition are ignored there), without
# prometheus-client (its one test reads the exposition). About 60 s.
run_miri() {
  echo "=== miri (cargo +nightly miri test -p pcpu, stable tier, the plain build's libraries natively)"
  local log=build-miri.log
  if ! (cd rust && cargo +nightly miri --version) >/dev/null 2>&1; then
    echo "test.sh: no Miri (scripts/install-deps.sh installs it with rustup)"
    failed_configs+=("miri (not installed)"); total_fail=$((total_fail+1)); return
  fi
  (cd rust && MIRIFLAGS="-Zmiri-disable-isolation -Zmiri-native-lib=$PWD/../build/libpcpu.so.1 -Zmiri-native-lib=$PWD/../build/libpcpu-stats.so.1" \
    cargo +nightly miri test --no-fail-fast -p pcpu --features stable-tier,metrics --lib --tests) \
    2>&1 | tee "$log"
  count_cargo_log miri "$log" "${PIPESTATUS[0]}"
}
if [ $quick -eq 0 ]; then step_start miri; run_miri; step_end; fi

# Go (go/): the pure-Go segment reader cross-checked against pcpustat, its
# fuzz targets (seed corpus, then 10 s of fuzzing each), the Collector
# receiver, and a collector built by ocb (cached between runs in
# ${PCPU_GO_CACHE:-~/.cache/pcpu-go}) -- against the plain build's C
# programs. Each top-level Go test and each fuzz run counts as one test.
run_go() {
  echo "=== go: go test ./... (go/, against build/)"
  local log=build-go.log pass fail rc
  if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then PATH=$PATH:/usr/local/go/bin; fi
  if ! command -v go >/dev/null; then
    echo "test.sh: go not found (go/ needs Go 1.26)"; failed_configs+=("go"); total_fail=$((total_fail+1)); return
  fi
  (cd go && PCPU_GO_REQUIRE_C=1 PCPU_BUILD_DIR="$PWD/../build" go test -count=1 -v ./... 2>&1) >"$log"
  rc=$?
  # -fuzzminimizetime=0x: no minimization. Go's coordinator minimizes each
  # input that adds coverage (the flows entries, format 2.9, add many) and
  # when -fuzztime runs out during one it reports the stopped worker as a
  # failure ("fuzzing process hung or terminated unexpectedly while
  # minimizing: EOF", golang/go#52569): CI failed so at 11.16 s of 10 s.
  # A crasher is still written to testdata/fuzz, only not shrunk.
  for fz in FuzzSnapshot FuzzDamage; do
    (cd go && PCPU_GO_REQUIRE_C=1 PCPU_BUILD_DIR="$PWD/../build" go test -run='^$' -fuzz="^$fz\$" \
      -fuzztime=10s -fuzzminimizetime=0x -parallel="$jobs" ./segment/ 2>&1) >>"$log" || rc=1
    grep -q "^ok " <(tail -1 "$log") && echo "--- PASS: $fz (fuzzing)" >>"$log" || echo "--- FAIL: $fz (fuzzing)" >>"$log"
  done
  grep -E '^(--- FAIL|FAIL|ok|panic:)|failing input|go test fuzz|hung or terminated' "$log"
  pass=$(grep -c '^--- PASS' "$log"); fail=$(grep -c '^--- FAIL' "$log")
  if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; tail -40 "$log"; fi
  echo "go: $pass passed, $fail failed (log: $log)"
  total_pass=$((total_pass+pass)); total_fail=$((total_fail+fail))
  [ "$fail" -eq 0 ] || failed_configs+=("go")
}
if [ $quick -eq 0 ]; then step_start go; run_go; step_end; fi

# The sanitizer configurations come after the emulated machines have
# finished (they take 25-30 min beside the steps above), and their tests
# keep two CPUs busy only 72-76 % of the time at one test per CPU (waiting
# on children, sockets, timers): one test more than CPUs. The ASan+UBSan
# ctest on 2 CPUs, alone: 449 s wall, 666 s CPU at -j2; 350 s, 583 s at -j3.
san_ctest_jobs=$((jobs + 1))
if [ $quick -eq 0 ]; then
  run_config asan+ubsan build-asan "-LE repeat" "$san_ctest_jobs" -DCMAKE_BUILD_TYPE=Debug -DPCPU_SANITIZE=address -DPCPU_BUILD_BENCH=OFF -DPCPU_PROTOBUF=ON
  run_config tsan build-tsan "-LE repeat" "$san_ctest_jobs" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPCPU_SANITIZE=thread -DPCPU_BUILD_BENCH=OFF -DPCPU_PROTOBUF=ON
fi

if [ -n "$vm_pid" ]; then
  echo "=== emulated machines (scripts/vm/run-all.sh, in the background since $((vm_t0 - start)) s)"
  wait_t0=$SECONDS
  wait "$vm_pid"
  vm_rc=$?
  cat "$vm_log"
  if [ $vm_rc -eq 0 ]; then
    total_pass=$((total_pass+1))
  else
    total_fail=$((total_fail+1)); failed_configs+=("emulated machines")
  fi
  vm_cpu=$(times_cpu "$vm_times" 2>/dev/null)
  vm_wall=$(sed -nE 's/^vm: .*\(([0-9]+) s\).*/\1/p' "$vm_log" | tail -1)
  steps+=("$(printf '%-22s %6s s wall %7s s CPU  (in the background; waited for %d s at the end)' \
    "emulated machines" "${vm_wall:-?}" "${vm_cpu:-?}" $((SECONDS - wait_t0)))")
  echo "=== step emulated machines: ${vm_wall:-?} s wall, ${vm_cpu:-?} s CPU, waited for $((SECONDS - wait_t0)) s"
fi

echo
echo "steps (wall-clock; CPU = user + system of the step's processes):"
printf '  %s\n' "${steps[@]}"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ${#failed_configs[@]} -gt 0 ]; then
  echo "FAILED in: ${failed_configs[*]}"
fi
echo "total: $total_pass passed, $total_fail failed ($(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s)"
[ $total_fail -eq 0 ] && [ ${#failed_configs[@]} -eq 0 ]
