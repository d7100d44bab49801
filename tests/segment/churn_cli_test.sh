#!/bin/sh
# pcpustat reads in a loop while the writer registers and removes series as
# fast as it can (segment_fixture churn): every run must succeed and every
# value shown must belong to its series: churn_value_total{id="K"} is 0 or 7*K.
# Usage: churn_cli_test.sh PCPUSTAT FIXTURE [SECONDS]
set -u
PCPUSTAT=$1 FIXTURE=$2 SECS=${3:-2}
T=$(mktemp -d /tmp/pcpu-churn-cli.XXXXXX)
export PCPU_SEGMENT_DIR=$T/seg
mkdir -m 700 "$PCPU_SEGMENT_DIR"
mkfifo "$T/in"
"$FIXTURE" churn churn <"$T/in" >"$T/out" 2>&1 &
fpid=$!
exec 3>"$T/in"
trap 'exec 3>&-; wait; rm -rf "$T"' EXIT
for _ in $(seq 2400); do grep -q '^ready' "$T/out" && break; sleep 0.05; done
grep -q '^ready' "$T/out" || { echo "fixture did not start"; cat "$T/out"; exit 1; }
end=$(( $(date +%s) + SECS )) runs=0 cap=$(( $(date +%s) + 300 ))
# SECS seconds, and at least 2 runs (a loaded machine or a sanitizer build
# can make one run take that long); the 5-minute cap only catches a hang.
while [ "$(date +%s)" -lt "$end" ] || { [ $runs -lt 2 ] && [ "$(date +%s)" -lt "$cap" ]; }; do
  if ! "$PCPUSTAT" --json churn >"$T/json" 2>"$T/err"; then
    echo "pcpustat failed during churn:"; cat "$T/err"; exit 1
  fi
  python3 - "$T/json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
for f in d["statistics"]["families"]:
    if f["name"] == "churn_value":
        for m in f["metrics"]:
            k = int(m["labels"]["id"])
            if m["value"] not in (0, 7 * k):
                sys.exit("churn_value_total{id=%d} = %d: not 0 or %d" % (k, m["value"], 7 * k))
PY
  runs=$((runs+1))
done
[ $runs -ge 2 ] || { echo "only $runs runs"; exit 1; }
echo "churn_cli_test: ok ($runs pcpustat runs during churn)"
