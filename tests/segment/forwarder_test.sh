#!/bin/sh
# The forwarder example runs (workers, flows coming and going, a latency
# histogram) while pcpustat reads it in a loop; the forwarder checks at exit
# that rx == tx + drops as read back through its segment.
# It runs until pcpustat has read it 3 times and at least 2 s have passed
# (a loaded machine gets there later: the workers keep every CPU busy), then
# is stopped with SIGTERM; 5 minutes only bound a run that never gets there.
# Usage: forwarder_test.sh FORWARDER PCPUSTAT
set -u
FWD=$1 PCPUSTAT=$2
T=$(mktemp -d /tmp/pcpu-fwd.XXXXXX)
trap 'rm -rf "$T"' EXIT
export PCPU_SEGMENT_DIR=$T
"$FWD" --seconds 600 --workers 2 --flows 32 --name fwdtest >"$T/out" 2>&1 &
fpid=$!
reads=0 start=$(date +%s)
while [ $(( $(date +%s) - start )) -lt 300 ] && kill -0 $fpid 2>/dev/null; do
  if [ -e "$T/pcpu.$fpid.fwdtest" ]; then
    if "$PCPUSTAT" --json fwdtest >"$T/json.new" 2>"$T/err"; then
      mv "$T/json.new" "$T/json"
      reads=$((reads+1))
    elif ! grep -q -e 'no segment' -e 'closed' -e 'gone' "$T/err"; then
      echo "pcpustat failed while the forwarder ran:"; cat "$T/err"; kill $fpid; exit 1
    fi
  fi
  [ $reads -ge 3 ] && [ $(( $(date +%s) - start )) -ge 2 ] && break
  sleep 0.05
done
kill -TERM $fpid 2>/dev/null
wait $fpid; rc=$?
cat "$T/out"
[ $rc = 0 ] || { echo "forwarder exited $rc"; exit 1; }
[ $reads -ge 3 ] || { echo "only $reads reads succeeded while the forwarder ran"; exit 1; }
python3 - "$T/json" <<'PY' || { echo "bad JSON from pcpustat"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
names = {f["name"] for f in d["statistics"]["families"]}
assert {"fwd_rx_packets", "fwd_flow_packets", "fwd_latency_seconds"} <= names, names
PY
echo "forwarder_test: ok ($reads reads while it ran)"
