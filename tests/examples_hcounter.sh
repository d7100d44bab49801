#!/bin/sh
# The hierarchical counter examples: each runs, keeps its limit, and while it
# runs, pcpustat shows its counter's approximation and bounds from the
# segment it publishes.
# Usage: examples_hcounter.sh EXAMPLE PCPUSTAT GAUGE [ARGS...]
set -u
example=$1 pcpustat=$2 gauge=$3
shift 3
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
export PCPU_SEGMENT_DIR=$dir
"$example" --seconds 4 "$@" >"$dir/out" 2>&1 &
pid=$!
name=$(basename "$example" | sed 's/^pcpu_example_//')
# Until pcpustat sees the three series (the example collects once a second),
# or the example ended without them showing.
seen=0
while kill -0 "$pid" 2>/dev/null; do
  if "$pcpustat" "$name" "$gauge" >"$dir/stat" 2>&1 &&
     grep -q "bound=\"value\"" "$dir/stat" && grep -q "bound=\"min\"" "$dir/stat" &&
     grep -q "bound=\"max\"" "$dir/stat"; then
    seen=1
    break
  fi
  sleep 0.2
done
wait "$pid"
rc=$?
cat "$dir/out"
[ $seen = 1 ] && cat "$dir/stat"
[ $rc = 0 ] || { echo "FAIL: $name exited with $rc"; exit 1; }
[ $seen = 1 ] || { echo "FAIL: pcpustat never showed $gauge{bound=...}"; exit 1; }
echo "PASS: $name kept its limit; pcpustat showed $gauge's value and bounds"
