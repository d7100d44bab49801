// SPDX-License-Identifier: MIT
// Beside prometheus-cpp's own core/benchmarks (all single-threaded): the
// same operations from 1 and 2 threads on one shared metric, a whole
// exposition (Registry::Collect() + TextSerializer), and a summary
// collected right after each observation (no cached answers). Built twice by
// bench/promcpp_compat.sh: against prometheus-cpp 1.0.1 and against
// libpcpu-prometheus, with the same source.
#include <benchmark/benchmark.h>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace prometheus;

static Registry& SharedRegistry() {
  static Registry r;
  return r;
}

// Thread counts of the threaded benchmarks: $PCPU_BENCH_THREADS, a comma
// list ("1,2,4,8,16" on a 16-core machine), default "1,2".
static void ThreadCounts(benchmark::internal::Benchmark* b) {
  const char* env = std::getenv("PCPU_BENCH_THREADS");
  std::string list = env && *env ? env : "1,2";
  for (std::size_t at = 0; at < list.size();) {
    std::size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    int n = std::atoi(list.substr(at, end - at).c_str());
    if (n > 0) b->Threads(n);
    at = end + 1;
  }
  b->UseRealTime();
}

static void BM_Threads_Counter_Increment(benchmark::State& state) {
  static Counter& c = BuildCounter().Name("bench_counter").Register(SharedRegistry()).Add({});
  for (auto _ : state) c.Increment();
}
BENCHMARK(BM_Threads_Counter_Increment)->Apply(ThreadCounts);

static void BM_Threads_Histogram_Observe(benchmark::State& state) {
  static Histogram& h = BuildHistogram().Name("bench_histogram").Register(SharedRegistry())
      .Add({}, Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  // Latencies, log-uniform over 100 us .. 20 s, drawn before timing.
  std::mt19937_64 rng(42 + static_cast<unsigned>(state.thread_index()));
  std::uniform_real_distribution<double> e(-4, 1.3);
  std::vector<double> v(4096);
  for (auto& x : v) x = std::pow(10.0, e(rng));
  std::size_t i = 0;
  for (auto _ : state) h.Observe(v[i++ & 4095]);
}
BENCHMARK(BM_Threads_Histogram_Observe)->Apply(ThreadCounts);

// 20 counter families of 10 series (2 labels), 5 gauge families of 10, 5
// histogram families of 10 series of 13 buckets: 300 series, 950 samples.
static void BM_Exposition(benchmark::State& state) {
  Registry reg;
  std::mt19937_64 rng(7);
  for (int f = 0; f < 20; f++) {
    auto& fam = BuildCounter().Name("app_requests_" + std::to_string(f) + "_total").Help("Requests.").Register(reg);
    for (int s = 0; s < 10; s++)
      fam.Add({{"method", s % 2 ? "GET" : "POST"}, {"code", std::to_string(200 + s)}}).Increment(static_cast<double>(rng() % 100000));
  }
  for (int f = 0; f < 5; f++) {
    auto& fam = BuildGauge().Name("app_queue_" + std::to_string(f)).Help("Depth.").Register(reg);
    for (int s = 0; s < 10; s++) fam.Add({{"queue", "q" + std::to_string(s)}}).Set(static_cast<double>(rng() % 1000));
  }
  for (int f = 0; f < 5; f++) {
    auto& fam = BuildHistogram().Name("app_latency_" + std::to_string(f) + "_seconds").Help("Latency.").Register(reg);
    for (int s = 0; s < 10; s++) {
      auto& h = fam.Add({{"handler", "/api/v" + std::to_string(s)}},
                        Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
      for (int k = 0; k < 100; k++) h.Observe(static_cast<double>(rng() % 20000) / 1000.0);
    }
  }
  TextSerializer ser;
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string text = ser.Serialize(reg.Collect());
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Exposition);

// Observe + Collect of one summary (prometheus-cpp's common quantiles),
// uniform random values in [0, 100) drawn before timing, after
// state.range(0) observations: every Collect() follows an Observe(), so
// no answer is cached -- the cost of a scrape of a busy summary.
static void BM_Summary_ObserveCollect(benchmark::State& state) {
  Registry reg;
  auto& s = BuildSummary().Name("bench_summary").Register(reg).Add(
      {}, Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.95, 0.005}, {0.99, 0.001}});
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> d(0, 100);
  for (long i = 0; i < state.range(0); i++) s.Observe(d(rng));
  std::vector<double> v(4096);
  for (auto& x : v) x = d(rng);
  std::size_t i = 0;
  for (auto _ : state) {
    s.Observe(v[i++ & 4095]);
    benchmark::DoNotOptimize(s.Collect());
  }
}
BENCHMARK(BM_Summary_ObserveCollect)->Arg(512)->Arg(20000);
