#!/bin/sh
# Builds the segment reader's libFuzzer target with clang (apart from the
# main build, whatever its compiler and sanitizers) and runs it over the
# kept corpus (tests/segment/corpus) for a fixed number of inputs: the
# same work however loaded the machine is (a time budget would test less
# on a busy machine, and pass or fail on how much CPU it got). New inputs
# go to a scratch directory, not into the repository. Without clang this
# FAILS: CI installs clang with scripts/install-deps.sh.
# Usage: fuzz_run.sh CLANG SOURCE_DIR BUILD_DIR RUNS
# Longer runs by hand: PCPU_FUZZ_RUNS=N for N inputs, or PCPU_FUZZ_SECONDS=S
# for S seconds (then however many inputs that makes).
set -eu
CLANG=$1 SRC=$2 OUT=$3 RUNS=${PCPU_FUZZ_RUNS:-$4}
if [ -z "$CLANG" ] || ! command -v "$CLANG" >/dev/null 2>&1; then
  echo "segment_fuzz_reader: clang not found; install it (scripts/install-deps.sh installs clang and libclang-rt-dev) -- the reader fuzz test needs libFuzzer"
  exit 1
fi
mkdir -p "$OUT"
BIN=$OUT/fuzz_segment_reader
# The segment's shared helpers and the reader, as src/segment/sources.cmake
# lists them (the writer and the file backing need the core), with the
# statistics validators.
SEG=
for f in $(sed -n '/^set(PCPU_SEGMENT_\(SHARED\|READER\)_SOURCES/,/^)/p' \
             "$SRC/src/segment/sources.cmake" | grep -o 'src/segment/[A-Za-z0-9_]*\.c'); do
  SEG="$SEG $SRC/$f"
done
[ -n "$SEG" ] || { echo "segment_fuzz_reader: no reader sources in src/segment/sources.cmake"; exit 1; }
# shellcheck disable=SC2086 # SEG is a list of paths without blanks
"$CLANG" -std=gnu11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I"$SRC/include" -I"$SRC/src" \
  "$SRC/tests/segment/fuzz_reader.c" $SEG \
  "$SRC/src/stats/validate.c" "$SRC/src/stats/metric_type.c" "$SRC/src/stats/format.c" "$SRC/src/stats/expose.c" \
  "$SRC/src/stats/hashtab.c" "$SRC/src/stats/histogram_layout.c" "$SRC/src/stats/error.c" \
  -lm -o "$BIN"
NEW=$(mktemp -d)
trap 'rm -rf "$NEW"' EXIT
if [ -n "${PCPU_FUZZ_SECONDS:-}" ]; then
  limit="-max_total_time=$PCPU_FUZZ_SECONDS"
else
  limit="-runs=$RUNS"
fi
# Crash artifacts (if any) land in OUT for inspection. The fuzzer's exit
# status decides (its log is long: the tail is shown either way).
rc=0
"$BIN" $limit -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$OUT/" "$NEW" "$SRC/tests/segment/corpus" >"$OUT/fuzz.log" 2>&1 || rc=$?
tail -15 "$OUT/fuzz.log"
if [ $rc -ne 0 ]; then
  echo "segment_fuzz_reader: the fuzzer failed (exit $rc); the input is in $OUT (crash-*," \
       "leak-*, timeout-*), reproduce with: $BIN <file>"
  exit 1
fi
