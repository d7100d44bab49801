#!/usr/bin/env bash
# prometheus-cpp 1.0.1's own core/benchmarks (from Debian's source package,
# fetched as tests/cxx/promcpp_peer.sh does) plus bench/promcpp_threads_bench.cc,
# built twice from the same sources: against the real prometheus-cpp
# (Debian prometheus-cpp-dev) and against libpcpu-prometheus; both run in
# one invocation, interleaved (real, pcpu, real, pcpu, ...), and the script
# prints each benchmark's median time per operation and the ratio.
# Then bench/promcpp_memory.cc, built the same two ways, prints the bytes
# per series of 10^5 labelled counters and 10^5 11-bucket histograms
# ($PCPU_PROMCPP_MEMORY_SERIES to change the count).
# Usage: bench/promcpp_compat.sh BUILD_DIR [ROUNDS (default 5)] [FILTER regex]
# BUILD_DIR: a configured, built tree (libpcpu, libpcpu-prometheus).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$1" && pwd)
rounds=${2:-5}
# Seconds each benchmark runs at least (Google Benchmark's min_time); the
# test suite's smoke run (ctest promcpp_peer_benchmarks) makes it short.
min_time=${PCPU_PROMCPP_BENCH_MIN_TIME:-0.2}
filter=${3:-'BM_(Counter_Increment|Counter_Collect|Gauge_Increment|Histogram_Observe/(8|64|512)$|Histogram_Collect/(8|64)$|Threads_|Exposition|Registry_CreateFamily)'}
work=$bin/promcpp-bench
mkdir -p "$work"
peer=$("$src/tests/cxx/promcpp_peer.sh" --fetch-only "$src" "$bin")
cxx=${CXX:-g++}
flags=(-std=c++17 -O2 -DNDEBUG -pthread)
benches=("$peer"/core/benchmarks/{main,benchmark_helpers,counter_bench,gauge_bench,histogram_bench,registry_bench,summary_bench}.cc "$src/bench/promcpp_threads_bench.cc")
"$cxx" "${flags[@]}" -I"$peer/core/benchmarks" "${benches[@]}" -o "$work/real" -lprometheus-cpp-core -lbenchmark
"$cxx" "${flags[@]}" -I"$peer/core/benchmarks" -I"$src/compat/prometheus-cpp/include" -I"$src/include" -I"$bin/include" \
  "${benches[@]}" -o "$work/pcpu" -L"$bin/compat/prometheus-cpp" -L"$bin" \
  -Wl,-rpath,"$bin/compat/prometheus-cpp:$bin" -lpcpu-prometheus -lpcpu-stats -lpcpu -lbenchmark
"$cxx" "${flags[@]}" "$src/bench/promcpp_memory.cc" -o "$work/memory-real" -lprometheus-cpp-core
"$cxx" "${flags[@]}" -I"$src/compat/prometheus-cpp/include" -I"$src/include" -I"$bin/include" \
  "$src/bench/promcpp_memory.cc" -o "$work/memory-pcpu" -L"$bin/compat/prometheus-cpp" -L"$bin" \
  -Wl,-rpath,"$bin/compat/prometheus-cpp:$bin" -lpcpu-prometheus -lpcpu-stats -lpcpu
for r in $(seq 1 "$rounds"); do
  for lib in real pcpu; do
    "$work/$lib" --benchmark_filter="$filter" --benchmark_format=json --benchmark_min_time="$min_time" \
      > "$work/$lib.$r.json" 2>/dev/null
  done
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
res = {}
for r in range(1, rounds + 1):
    for lib in ("real", "pcpu"):
        for b in json.load(open("%s/%s.%d.json" % (work, lib, r)))["benchmarks"]:
            # real time per operation; a threaded run's is per thread's op
            t = b["real_time"] if "Threads_" in b["name"] else b["cpu_time"]
            res.setdefault(b["name"], {}).setdefault(lib, []).append(t)
print("%-52s %14s %14s %8s" % ("benchmark (median of %d, ns)" % rounds, "prometheus-cpp", "pcpu", "ratio"))
rows = 0
for name, v in res.items():
    if "real" in v and "pcpu" in v:
        a, b = statistics.median(v["real"]), statistics.median(v["pcpu"])
        print("%-52s %14.1f %14.1f %7.1fx" % (name, a, b, a / b))
        rows += 1
# Both builds ran every benchmark the filter names (the peer's and ours).
if rows < 10 or not any(n.startswith("BM_Exposition") for n in res):
    sys.exit("promcpp_compat: only %d benchmarks ran in both builds" % rows)
PY
# Memory per series, each library in a process of its own.
series=${PCPU_PROMCPP_MEMORY_SERIES:-100000}
"$work/memory-real" "$series"
"$work/memory-pcpu" "$series"
