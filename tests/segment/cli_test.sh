#!/usr/bin/env bash
# pcpustat's output against golden files (tests/segment/golden/), through
# plain pipes, and its watch mode in a real terminal (tmux, else script(1)).
# Machine-dependent parts (pids, slot counts, times, paths) are normalised
# before comparing. UPDATE_GOLDEN=1 rewrites the golden files instead.
#
# Usage: cli_test.sh PCPUSTAT FIXTURE GOLDEN_DIR
set -u
PCPUSTAT=$1 FIXTURE=$2 GOLDEN=$3
T=$(mktemp -d /tmp/pcpu-cli.XXXXXX)
export PCPU_SEGMENT_DIR=$T/seg
mkdir -m 700 "$PCPU_SEGMENT_DIR"
fails=0 pids=()

cleanup() {
  exec 3>&- 4>&- 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  tmux kill-session -t "pcpu-cli-$$" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

# start_fixture FD MODE NAME: runs the fixture with stdin on a fifo held by
# file descriptor FD (closing it stops the fixture); waits for "ready".
start_fixture() {
  local fd=$1; shift
  mkfifo "$T/in.$fd"
  "$FIXTURE" "$@" <"$T/in.$fd" >"$T/out.$fd" 2>&1 &
  pids+=($!)
  eval "exec $fd>\"$T/in.$fd\""
  # Up to 2 minutes: the bound only catches a fixture that never starts.
  for _ in $(seq 2400); do grep -q '^ready' "$T/out.$fd" 2>/dev/null && return 0; sleep 0.05; done
  echo "fixture $* did not start:"; cat "$T/out.$fd"; exit 1
}

# The header line's slots: N in all, by CPU or by mm_cid, then (the
# default: one per possible CPU) owned slots of pinned workers, whose
# number only the check that sets PCPU_OWNED_SLOTS keeps (KEEP_OWNED=1).
normalise() {
  local owned='s/\(pid [0-9]+\): [0-9]+ slots: [0-9]+ by (CPU|concurrency id \(mm_cid\)), [0-9]+ owned \(pinned workers\)/(pid PID): N slots by SLOT/'
  [ "${KEEP_OWNED:-0}" = 1 ] && owned='s/\(pid [0-9]+\): [0-9]+ slots: [0-9]+ by (CPU|concurrency id \(mm_cid\)),/(pid PID): N slots: N by SLOT,/'
  sed -E -e "s#$T#TMP#g" \
    -e "s/\(pid [0-9]+\): [0-9]+ slots by [^,]*/(pid PID): N slots by SLOT/" -e "$owned" \
    -e "s/ (cpu|cid)[0-9]+=/ cpuN=/g" \
    -e "s/pid [0-9]+/pid PID/g" -e "s/pcpu\.[0-9]+\./pcpu.PID./g" \
    -e "s/^[0-9]{2}:[0-9]{2}:[0-9]{2}, /HH:MM:SS, /"
}

# check NAME CMD...: runs CMD, compares "stdout, stderr, exit status" with
# golden/NAME.txt.
check() {
  local name=$1; shift
  local out
  out=$( { "$@" 2>"$T/err"; echo "[exit $?]"; cat "$T/err"; } | normalise)
  if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
    printf '%s\n' "$out" >"$GOLDEN/$name.txt"
  elif ! diff -u "$GOLDEN/$name.txt" <(printf '%s\n' "$out") >"$T/diff"; then
    echo "FAIL $name:"; cat "$T/diff"; fails=$((fails+1)); return
  fi
  echo "ok   $name"
}

list_norm() { "$PCPUSTAT" "$@" | awk 'NR==1 || NF >= 7 { $1 = "PID"; $3 = "USER"; $6 = "N" } { print }'; }

start_fixture 3 golden fixture
FPID=$(sed -n 's#^ready .*/pcpu\.\([0-9]*\)\..*#\1#p' "$T/out.3")

check list            list_norm
check print           "$PCPUSTAT" fixture
check print-by-pid    "$PCPUSTAT" "$FPID"
check filter-glob     "$PCPUSTAT" fixture 'app_req*' '*_celsius'
check filter-regex    "$PCPUSTAT" fixture -e 'code="5[0-9]{2}"' -e '^app_queue'
check filter-labels   "$PCPUSTAT" fixture '*method="GET"*'
check json            sh -c "\"$PCPUSTAT\" --json fixture | python3 -c 'import json,sys; d=json.load(sys.stdin); d[\"pid\"]=0; d[\"slots\"]=0; d[\"owned_slots\"]=0; d[\"slot_index\"]=\"x\"; print(json.dumps(d, indent=1, ensure_ascii=False))'"
check watch-pipe      "$PCPUSTAT" --watch=0.2 --count 3 fixture 'app_q*' 'app_lat*' 'app_req*'
check no-such         "$PCPUSTAT" nosuch
check usage-count     "$PCPUSTAT" --count 2 fixture
check usage-regex     "$PCPUSTAT" -e '(' fixture
check usage-interval  "$PCPUSTAT" -i 0 fixture
check help-head       sh -c "\"$PCPUSTAT\" --help | head -5"

# --per-cpu: the slots add up to the value (which slot a thread used is the
# kernel's choice, so no golden file).
if "$PCPUSTAT" --json --per-cpu fixture | python3 -c '
import json, sys
d = json.load(sys.stdin)
vals = {}
for f in d["statistics"]["families"]:
    for m in f["metrics"]:
        n = f["name"] + ("_total" if f["type"] == "counter" else "")
        if m["labels"]:
            n += "{" + ",".join("%s=%s" % (k, json.dumps(v, ensure_ascii=False)) for k, v in m["labels"].items()) + "}"
        vals[n] = m.get("value", m.get("count"))
assert len(d["per_slot"]) == 8, d["per_slot"]
for p in d["per_slot"]:
    assert len(p["slots"]) == d["slots"], p
    n = p["series"]
    want = [v for k, v in vals.items() if k.split("{")[0] == n.split("{")[0]]
    assert sum(p["slots"]) in want, (n, p["slots"], want)
'; then echo "ok   per-cpu-sums"; else echo "FAIL per-cpu-sums"; fails=$((fails+1)); fi

# Owned slots of pinned workers (pcpu_worker_claim()) are labelled ownedK,
# never as CPUs (cpu2/cpu3 on a 2-CPU machine before): the header line
# counts them, JSON says how many of the slots they are (the last ones).
PCPU_OWNED_SLOTS=2 start_fixture 5 owned owned
KEEP_OWNED=1 check per-cpu-owned "$PCPUSTAT" -p owned
if "$PCPUSTAT" --json --per-cpu owned | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["owned_slots"] == 2 and d["slots"] > 2, (d["slots"], d["owned_slots"])
p = {x["series"]: x["slots"] for x in d["per_slot"]}
pk = p["test_packets_total"]
assert pk[-2:] == [7, 5] and sum(pk[:-2]) == 3, pk
assert p["test_owned_latency_seconds"][-2:] == [2, 0], p
'; then echo "ok   per-cpu-owned-json"; else echo "FAIL per-cpu-owned-json"; fails=$((fails+1)); fi
exec 5>&-
wait "${pids[-1]}"

# Watch mode's rates are for people (pcpu_format_si()): three significant
# digits, an SI prefix, "/s" -- "2.30 M/s", never "2302049.7" or
# "2.3020497611e+09" -- whatever the rate (the latency fixture records all
# the time; a frame that saw nothing prints "0 /s"), so no golden file.
start_fixture 4 latency rates
if "$PCPUSTAT" --watch=0.3 --count 3 rates 'test_latency_seconds' | python3 -c '
import re, sys
rate = re.compile(r"^  test_latency_seconds +[0-9]+ +(0|[1-9]\.[0-9]{2}|[1-9][0-9]\.[0-9]|[1-9][0-9]{2}) [kMGTPEZY]?/s  count ")
lines = [l for l in sys.stdin.read().splitlines() if l.startswith("  test_latency_seconds ")]
assert len(lines) == 3 and all(rate.match(l) for l in lines[1:]), lines
print("     rates seen: %s" % ", ".join(rate.match(l).group(0).split()[2] + " " + rate.match(l).group(0).split()[3]
                                      for l in lines[1:]))
'; then echo "ok   watch-rates"; else echo "FAIL watch-rates"; fails=$((fails+1)); fi
# Stopped ('s' ends its recording thread, then end of input) and waited
# for: the listings below must see the golden fixture alone.
echo s >&4
exec 4>&-
wait "${pids[-1]}"

# Incompatible version: a copy of the header that says version 9.
mkdir -m 700 "$T/old"
python3 - "$PCPU_SEGMENT_DIR/pcpu.$FPID.fixture" "$T/old/pcpu.$FPID.fixture" <<'EOF'
import struct, sys
h = bytearray(open(sys.argv[1], "rb").read(4096))
h[8:12] = struct.pack("<HH", 9, 0)
open(sys.argv[2], "wb").write(bytes(h))
EOF
check version         "$PCPUSTAT" -d "$T/old" fixture
# A segment written by pcpu 1.x (format 1.0, no mirror regions): refused too.
mkdir -m 700 "$T/v1"
python3 - "$PCPU_SEGMENT_DIR/pcpu.$FPID.fixture" "$T/v1/pcpu.$FPID.fixture" <<'EOF'
import struct, sys
h = bytearray(open(sys.argv[1], "rb").read(4096))
h[8:12] = struct.pack("<HH", 1, 0)
open(sys.argv[2], "wb").write(bytes(h))
EOF
check version1        "$PCPUSTAT" -d "$T/v1" fixture

# Permission denied: as another user (root), or with the file unreadable.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  chmod 755 "$T" "$PCPU_SEGMENT_DIR"
  check permission    setpriv --reuid=65534 --regid=65534 --clear-groups "$PCPUSTAT" fixture
  check list-other-user sh -c "setpriv --reuid=65534 --regid=65534 --clear-groups \"$PCPUSTAT\" | awk 'NR==1 || NF >= 7 { \$1 = \"PID\"; \$3 = \"USER\"; \$6 = \"N\" } { print }'"
  chmod 700 "$PCPU_SEGMENT_DIR"
elif [ "$(id -u)" != 0 ]; then
  chmod 000 "$PCPU_SEGMENT_DIR/pcpu.$FPID.fixture"
  check permission    "$PCPUSTAT" fixture
  chmod 600 "$PCPU_SEGMENT_DIR/pcpu.$FPID.fixture"
  echo "skip list-other-user (needs root to switch users)"
else
  echo "FAIL permission: running as root without setpriv(1) (util-linux)"; fails=$((fails+1))
fi

# A writer that died: detected, last values on request, pruned.
"$FIXTURE" die ghost >"$T/ghost.out" 2>&1 </dev/null
check gone            "$PCPUSTAT" ghost
check gone-stale      "$PCPUSTAT" --stale ghost
check list-gone       list_norm
check prune           "$PCPUSTAT" --prune
check list-pruned     list_norm

# Watch mode in a terminal: redraws, and Ctrl-C ends it cleanly (exit 0,
# cursor shown again).
if command -v tmux >/dev/null; then
  s="pcpu-cli-$$"
  tmux new-session -d -s "$s" -x 120 -y 30 \
    "\"$PCPUSTAT\" -w -i 0.2 fixture 'app_*'; echo \"EXIT=\$?\" >\"$T/tmux.rc\"; sleep 5"
  ok=0
  # Waits of up to a minute: they only catch a watch that never draws or
  # never exits, however slowly a loaded machine runs it.
  for _ in $(seq 600); do
    tmux capture-pane -p -t "$s" >"$T/pane" 2>/dev/null
    grep -q 'app_requests_total{method="GET",code="200"} *1234 *0 /s' "$T/pane" && { ok=1; break; }
    sleep 0.1
  done
  tmux send-keys -t "$s" C-c
  for _ in $(seq 600); do [ -s "$T/tmux.rc" ] && break; sleep 0.1; done
  if [ $ok = 1 ] && grep -q '^EXIT=0$' "$T/tmux.rc" 2>/dev/null && grep -q 'VALUE *RATE' "$T/pane" &&
     [ "$(grep -c 'NAME ' "$T/pane")" = 1 ]; then
    echo "ok   watch-terminal (tmux: redraw in place, Ctrl-C exits 0)"
  else
    echo "FAIL watch-terminal:"; cat "$T/pane"; cat "$T/tmux.rc" 2>/dev/null; fails=$((fails+1))
  fi
  tmux kill-session -t "$s" 2>/dev/null
elif command -v script >/dev/null; then
  script -qfec "timeout -s INT 1 \"$PCPUSTAT\" -w -i 0.2 fixture" /dev/null >"$T/typescript" 2>&1
  rc=$?
  if [ $rc = 0 ] && grep -q $'\e\[?25h' "$T/typescript" && grep -q 'VALUE *RATE' "$T/typescript"; then
    echo "ok   watch-terminal (script: Ctrl-C exits 0, cursor restored)"
  else
    echo "FAIL watch-terminal (script, rc $rc)"; fails=$((fails+1))
  fi
else
  echo "FAIL watch-terminal: neither tmux nor script(1) found"; fails=$((fails+1))
fi

exec 3>&-
if [ $fails -gt 0 ]; then echo "cli_test: $fails failed"; exit 1; fi
echo "cli_test: ok"
