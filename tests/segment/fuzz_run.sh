#!/bin/sh
# Builds the segment reader's libFuzzer target with clang (apart from the
# main build, whatever its compiler and sanitizers) and runs it for a few
# seconds over the kept corpus (tests/segment/corpus). New inputs go to a
# scratch directory, not into the repository. Without clang this FAILS:
# CI installs clang with scripts/install-deps.sh.
# Usage: fuzz_run.sh CLANG SOURCE_DIR BUILD_DIR SECONDS
# (PCPU_FUZZ_SECONDS overrides SECONDS for longer runs by hand.)
set -eu
CLANG=$1 SRC=$2 OUT=$3 SECS=${PCPU_FUZZ_SECONDS:-$4}
if [ -z "$CLANG" ] || ! command -v "$CLANG" >/dev/null 2>&1; then
  echo "segment_fuzz_reader: clang not found; install it (scripts/install-deps.sh installs clang and libclang-rt-dev) -- the reader fuzz test needs libFuzzer"
  exit 1
fi
mkdir -p "$OUT"
BIN=$OUT/fuzz_segment_reader
"$CLANG" -std=gnu11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I"$SRC/include" -I"$SRC/src" \
  "$SRC/tests/segment/fuzz_reader.c" "$SRC/src/segment/reader.c" "$SRC/src/segment/common.c" \
  "$SRC/src/stats/validate.c" "$SRC/src/stats/format.c" "$SRC/src/stats/expose.c" \
  -lm -o "$BIN"
NEW=$(mktemp -d)
trap 'rm -rf "$NEW"' EXIT
# Crash artifacts (if any) land in OUT for inspection.
"$BIN" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$OUT/" "$NEW" "$SRC/tests/segment/corpus" 2>&1 | tail -15
