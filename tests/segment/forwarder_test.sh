#!/bin/sh
# The forwarder example runs (workers, flows coming and going, a latency
# histogram) while pcpustat reads it in a loop; the forwarder checks at exit
# that rx == tx + drops as read back through its segment.
# Usage: forwarder_test.sh FORWARDER PCPUSTAT
set -u
FWD=$1 PCPUSTAT=$2
T=$(mktemp -d /tmp/pcpu-fwd.XXXXXX)
trap 'rm -rf "$T"' EXIT
export PCPU_SEGMENT_DIR=$T
"$FWD" --seconds 2 --workers 2 --flows 32 --name fwdtest >"$T/out" 2>&1 &
fpid=$!
reads=0
for _ in $(seq 200); do
  [ -e "$T/pcpu.$fpid.fwdtest" ] && break
  sleep 0.02
done
while kill -0 $fpid 2>/dev/null; do
  if "$PCPUSTAT" --json fwdtest >"$T/json.new" 2>"$T/err"; then
    mv "$T/json.new" "$T/json"
    reads=$((reads+1))
  elif ! grep -q -e 'no segment' -e 'closed' -e 'gone' "$T/err"; then
    echo "pcpustat failed while the forwarder ran:"; cat "$T/err"; exit 1
  fi
  sleep 0.05
done
wait $fpid; rc=$?
cat "$T/out"
[ $rc = 0 ] || { echo "forwarder exited $rc"; exit 1; }
# The workers keep every CPU busy: on a small machine a read may take long.
[ $reads -ge 1 ] || { echo "no read succeeded while the forwarder ran"; exit 1; }
python3 - "$T/json" <<'PY' || { echo "bad JSON from pcpustat"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
names = {f["name"] for f in d["statistics"]["families"]}
assert {"fwd_rx_packets", "fwd_flow_packets", "fwd_latency_seconds"} <= names, names
PY
echo "forwarder_test: ok ($reads reads while it ran)"
