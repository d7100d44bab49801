#!/usr/bin/env bash
# The demonstration: builds pcpu and runs the benchmark suite's quick mode
# (seconds), which prints pcpu beside +=, atomics, locks and per-thread
# counters, the seeds' published figures, and the targets with PASS/MISS.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
./build/examples/pcpu_example_counters
# Results go to build/demo/ (report.md, CSVs, plots), not over the recorded ones.
exec bash bench/run.sh --quick --csv "$PWD/build/demo"
