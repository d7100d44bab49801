#!/usr/bin/env bash
# What the demonstration and the quick mode print, checked for what a
# newcomer must be able to trust (issue 50). Never a timing: the figures
# themselves are evidence, not assertions; these are the report's rules.
#   demo:  the table of one counter from every thread, pcpu's row exact,
#          then a verdict, which ends the report; no PASS/MISS.
#   quick: no range with a negative end ("<0"), no thread-private `+=`
#          target, "slots with data" as "N: slot(s) ...", the read side in
#          CPU time, a verdict (verdict.md); the statistics program's quick
#          output prints no sum of parts measured alone.
# usage: check_report.sh PCPU_BENCH PCPU_BENCH_STATS
set -euo pipefail
bench=$1 stats=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_report: $*" >&2; exit 1; }

# ---- the demonstration ----
"$bench" --demo --rounds 2 --duration 2 >"$work/demo.md" 2>"$work/demo.err" \
  || { cat "$work/demo.err"; fail "pcpu_bench --demo failed"; }
grep -q '^## One counter, incremented by every thread' "$work/demo.md" || fail "demo: no table"
grep -qE '^\| pcpu_counter_add +\|.*\| yes +\|$' "$work/demo.md" || fail "demo: pcpu_counter_add's row is not exact"
grep -qE '^\| shared plain `\+=` ' "$work/demo.md" || fail "demo: no racy += row"
[ "$(grep '^## ' "$work/demo.md" | tail -1)" = "## Verdict" ] || fail "demo: the verdict is not the last section"
grep -q '^- \*\*Exact.\*\* pcpu_counter_add kept every increment' "$work/demo.md" || fail "demo: no exactness verdict"
! grep -qE 'PASS|MISS' "$work/demo.md" || fail "demo: prints targets"

# ---- the quick mode, few rounds ----
"$bench" --quick --rounds 1 --duration 2 --threads 1,2 --only incr,dataplane,read \
  --csv "$work/q" >"$work/quick.md" 2>"$work/quick.err" \
  || { cat "$work/quick.err"; fail "pcpu_bench --quick failed"; }
! grep -n '<0' "$work/quick.md" || fail "quick: a range with a negative end"
! grep -nE '^\|[^|]*thread-private[^|]*\|.*\| (PASS|\*\*MISS\*\*) +\|$' "$work/quick.md" \
  || fail "quick: the thread-private += is a target again"
slots=$(awk -F'|' '/^\| counters +\| slots with data/{t=1; next} t && /^\|-/{next} t && /^\|/{print $3} t && !/^\|/{exit}' "$work/quick.md")
[ -n "$slots" ] || fail "quick: no snapshot table"
while read -r cell; do
  [[ $cell =~ ^[0-9]+:\ (slot|slots)\ ([0-9,-]+|none)$ ]] || fail "quick: 'slots with data' reads '$cell'"
done <<<"$slots"
grep -q '| CPU ns per call |' "$work/quick.md" || fail "quick: the fetch rows are not in CPU time"
head -1 "$work/q/verdict.md" | grep -qx '## Verdict' || fail "quick: no verdict.md"
grep -q 'hand-written add' "$work/q/verdict.md" || fail "quick: the verdict does not compare with the hand-written add"

# ---- the statistics program's quick mode ----
"$stats" --quick --rounds 1 --ms 1 --series 1000 >"$work/stats.txt" || fail "pcpu_bench_stats --quick failed"
! grep -nE '[0-9] ns = [a-z]' "$work/stats.txt" || fail "stats --quick: a record printed as a sum of its parts"
! grep -n 'leanest\|ideal' "$work/stats.txt" || fail "stats --quick: prints the diagnostic hand-written rows"
echo "check_report: ok"
