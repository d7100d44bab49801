#!/bin/sh
# Builds the statistics fuzz targets with clang's libFuzzer (ASan + UBSan)
# and runs each from its checked-in corpus for a fixed number of inputs, as
# a ctest test: the same work however loaded the machine is (a time budget
# would test less on a busy machine). The targets link only
# src/stats/{validate,format,expose,negotiate}.c and src/stats/error.c, which
# need nothing but libc, so they build apart from the gcc-built library.
#
# Usage: run_fuzz.sh CLANG SOURCE_DIR WORK_DIR [RUNS]
#   CLANG is the compiler CMake found at configure time ("" or *-NOTFOUND
#   when there was none: the test then fails, it does not skip).
# Longer runs: PCPU_FUZZ_RUNS=10000000 ctest -R stats_fuzz (inputs per
# target), or PCPU_FUZZ_SECONDS=600 (seconds per target, however many
# inputs that makes).
set -eu
clang=$1 src=$2 work=$3 runs=${PCPU_FUZZ_RUNS:-${4:-50000}}
if [ -n "${PCPU_FUZZ_SECONDS:-}" ]; then
	limit="-max_total_time=$PCPU_FUZZ_SECONDS" what="${PCPU_FUZZ_SECONDS}s"
else
	limit="-runs=$runs" what="$runs inputs"
fi
case "$clang" in
""|*NOTFOUND*)
	echo "FAIL: clang was not found when CMake configured the build; the fuzz" \
	     "targets need clang and libFuzzer (Debian: clang, libclang-rt-14-dev)." \
	     "Install them with scripts/install-deps.sh and re-run cmake." >&2
	exit 1 ;;
esac
if ! command -v "$clang" >/dev/null 2>&1; then
	echo "FAIL: $clang (found at configure time) is gone; run scripts/install-deps.sh" >&2
	exit 1
fi
mkdir -p "$work"
for t in validate expose negotiate; do
	if ! "$clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-D_GNU_SOURCE -I"$src/include" -I"$src/src/stats" \
		"$src/src/stats/validate.c" "$src/src/stats/metric_type.c" "$src/src/stats/format.c" "$src/src/stats/expose.c" "$src/src/stats/hashtab.c" \
		"$src/src/stats/negotiate.c" "$src/src/stats/error.c" "$src/tests/stats/fuzz/fuzz_$t.c" -lm -o "$work/fuzz_$t" 2>"$work/build_$t.log"; then
		cat "$work/build_$t.log" >&2
		echo "FAIL: building fuzz_$t with $clang failed (is libFuzzer, libclang-rt-*-dev," \
		     "installed? scripts/install-deps.sh)" >&2
		exit 1
	fi
	# New inputs go to a scratch corpus; the checked-in one is only read.
	rm -rf "$work/corpus_$t"
	mkdir -p "$work/corpus_$t"
	echo "fuzz_$t: $what"
	if ! (cd "$work" && ./fuzz_$t $limit -max_len=4096 -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 "corpus_$t" \
		"$src/tests/stats/fuzz/corpus_$t" > "fuzz_$t.log" 2>&1); then
		tail -n 60 "$work/fuzz_$t.log" >&2
		echo "FAIL: fuzz_$t found a problem; the input is in $work (crash-*, leak-*," \
		     "timeout-*), reproduce with: $work/fuzz_$t <file>" >&2
		exit 1
	fi
	grep -E "stat::number_of_executed_units|Done" "$work/fuzz_$t.log" | tail -n 2
done
echo "fuzz targets ran clean"
