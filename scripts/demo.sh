#!/usr/bin/env bash
# The demonstration: builds pcpu and runs the benchmark suite's quick mode
# (under a minute on an idle 2-CPU machine, the build included), which
# prints pcpu beside +=, atomics, locks and per-thread counters, the seeds'
# published figures, and the targets with PASS/MISS (README.md and
# bench/README.md state each target and the figures measured).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Only what the demonstration runs: the test suite (scripts/test.sh) builds
# the rest.
cmake --build build -j "$(nproc)" --target pcpu_example_counters pcpu_bench pcpu_bench_stats >/dev/null
./build/examples/pcpu_example_counters
# Results go to build/demo/ (report.md, CSVs, plots), not over the recorded ones.
bash bench/run.sh --quick --csv "$PWD/build/demo"
echo "demo.sh: $((SECONDS - start)) s in all"
