#!/usr/bin/env bash
# Builds pcpu_bench, runs it, keeps its report and CSV files in
# bench/results/<mode>/ and draws the plots there.
#
#   bash bench/run.sh --demo                  # seconds: the demonstration (scripts/demo.sh)
#   bash bench/run.sh --quick                 # ~20 s: every section, few rounds
#   bash bench/run.sh --full                  # minutes: the figures of bench/README.md
#   bash bench/run.sh --build-dir /tmp/b --threads 1,2 --only incr
#
# --build-dir DIR (first argument only) picks the CMake build folder
# (default: ./build at the repository root); every other argument goes to
# pcpu_bench (see `pcpu_bench --help`). With --csv DIR the results go to DIR
# instead of bench/results/<mode>/.
#
# pcpu_bench measures the incr section in two processes by itself (pcpu's
# slot index is per process: it runs itself again with PCPU_INDEX=cpu or
# mm_cid, the index it does not have), so `run.sh --quick` needs nothing
# more. `--demo` runs pcpu_bench's demonstration alone (one table and a
# verdict), without the statistics program or plots.
#
# The plots need matplotlib: the Python of the tests' virtual environment
# (~/.cache/pcpu-venv, scripts/install-deps.sh makes it) draws them where it
# exists, else python3.
#
# Before/after comparison of two cores, in one session, runs alternating:
#   bash bench/run.sh [--build-dir DIR] --against LABEL=PATH [--against ...]
#        [--alternations N] [pcpu_bench options]
# runs, N times (default 3), each PATH (an older pcpu_bench, its library
# beside it) and then this build's pcpu_bench ("after"), each with the same
# options, into bench/results/compare/<label>-<i>/ (one folder per run:
# report.md and CSV files), then writes the medians over the runs to
# bench/results/compare/compare.md (bench/plot.py --compare).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
if [ "${1:-}" = "--build-dir" ]; then
  [ $# -ge 2 ] || { echo "run.sh: --build-dir needs a folder" >&2; exit 2; }
  build=$2
  shift 2
fi
against=()
alternations=3
while [ $# -gt 0 ]; do
  case "$1" in
    --against)
      [ $# -ge 2 ] && [[ "$2" == *=* ]] || { echo "run.sh: --against needs LABEL=PATH" >&2; exit 2; }
      against+=("$2")
      shift 2 ;;
    --alternations)
      [ $# -ge 2 ] || { echo "run.sh: --alternations needs a count" >&2; exit 2; }
      alternations=$2
      shift 2 ;;
    *) break ;;
  esac
done

mode=default
out=""
prev=""
for arg in "$@"; do
  case "$arg" in
    --quick) mode=quick ;;
    --demo) mode=demo ;;
    --full) mode=full ;;
    --help) mode=help ;;
  esac
  [ "$prev" = "--csv" ] && out=$arg
  prev=$arg
done

# Configure every time (cheap): a build folder made before bench/ existed, or
# with PCPU_BUILD_BENCH off, has no pcpu_bench target. An existing folder keeps
# its generator and build type; a new one uses Ninja when there is one. Then
# build only what the benchmark needs.
gen=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  gen=(-G Ninja)
fi
cmake -S "$root" -B "$build" "${gen[@]}" -DPCPU_BUILD_BENCH=ON >/dev/null
if [ "$mode" = demo ]; then
  cmake --build "$build" --target pcpu_bench >/dev/null
else
  cmake --build "$build" --target pcpu_bench pcpu_bench_stats >/dev/null
fi
python=python3
venv_python=${XDG_CACHE_HOME:-$HOME/.cache}/pcpu-venv/bin/python3
[ -x "$venv_python" ] && python=$venv_python
bench="$build/bench/pcpu_bench"
bench_stats="$build/bench/pcpu_bench_stats"

if [ "$mode" = help ]; then
  exec "$bench" --help
fi

if [ ${#against[@]} -gt 0 ]; then
  cmp="$here/results/compare"
  rm -rf "$cmp"
  mkdir -p "$cmp"
  for ((i = 1; i <= alternations; i++)); do
    for spec in "${against[@]}" "after=$bench"; do
      label=${spec%%=*}
      bin=${spec#*=}
      dir="$cmp/$label-$i"
      mkdir -p "$dir"
      echo "run.sh: run $i/$alternations: $label ($bin $*)" >&2
      {
        echo "<!-- $bin $* -->"
        "$bin" "$@" --csv "$dir"
      } > "$dir/report.md"
    done
  done
  "$python" "$here/plot.py" --compare "$cmp"
  echo "run.sh: comparison in $cmp/compare.md" >&2
  exit 0
fi

if [ -z "$out" ]; then
  out="$here/results/$mode"
  mkdir -p "$out"
  rm -f "$out"/*.csv "$out"/*.png "$out"/report.md
  set -- "$@" --csv "$out"
else
  mkdir -p "$out"
fi
rm -f "$out/verdict.md" "$out/stats.txt" # pcpu_bench writes a verdict only when it has targets

# The markdown report goes to the terminal and to report.md. pcpu_bench's
# stderr goes to progress.log, so that its progress lines ("progress: ...")
# do not land between the report's lines; anything else it says there (a
# warning, an error) is shown once it is done.
echo "run.sh: $bench $* (its progress: $out/progress.log)" >&2
status=0
"$bench" "$@" 2>"$out/progress.log" | tee "$out/report.md" || status=$?
grep -v '^progress: ' "$out/progress.log" >&2 || true
[ "$status" -eq 0 ] || exit "$status"
if [ "$mode" = demo ]; then
  echo "run.sh: results in $out" >&2
  exit 0
fi

# 5. The statistics layer's comparisons (a program of its own).
stats_args=()
case "$mode" in
  quick) stats_args=(--quick) ;;
  full) stats_args=(--rounds 9) ;;
esac
{
  echo
  echo "## 5. Statistics layer (pcpu_bench_stats ${stats_args[*]})"
  echo
  echo '```'
  "$bench_stats" "${stats_args[@]}" | tee "$out/stats.txt"
  echo '```'
} | tee -a "$out/report.md"

if "$python" -c 'import matplotlib' >/dev/null 2>&1; then
  "$python" "$here/plot.py" "$out"
else
  echo "run.sh: no plots drawn: matplotlib is not installed" \
       "(scripts/install-deps.sh installs it, in ~/.cache/pcpu-venv)" >&2
fi
echo "run.sh: results in $out" >&2

# The verdict last: pcpu_bench's (verdict.md), and the statistics program's
# targets in one line each.
if [ -f "$out/verdict.md" ]; then
  {
    echo
    cat "$out/verdict.md"
    sed -n 's/^    \(group add2 <= 2x two counter adds\): \([0-9.]*x\) *\(PASS\|MISS\)$/- Statistics: \1: \2, \3./p
            s/^    \(histogram record <= [0-9.]*x the hand-written record on the same layout\) (.*): \([0-9.]*x\) ([0-9.-]*) *\(PASS\|MISS\)$/- Statistics: \1: \2, \3./p' \
      "$out/stats.txt"
  } | tee -a "$out/report.md"
fi
