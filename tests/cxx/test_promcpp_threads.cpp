// SPDX-License-Identifier: MIT
// libpcpu-prometheus from 8 threads: counters (whole and fractional
// increments), gauges, histograms and a family's Add() racing, with exact
// totals at the end (the fractions are multiples of 1/1024, so the
// prometheus-cpp semantics give exact doubles too). Runs under TSan in the
// thread-sanitized build.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

using namespace prometheus;

int main() {
  constexpr int kThreads = 8;
  constexpr long kIters = 100000;
  Registry reg;
  auto& cf = BuildCounter().Name("ops_total").Register(reg);
  auto& gf = BuildGauge().Name("inflight").Register(reg);
  auto& hf = BuildHistogram().Name("size_bytes").Register(reg);
  Counter& total = cf.Add({{"kind", "all"}});
  Gauge& inflight = gf.Add({});
  Histogram& sizes = hf.Add({}, Histogram::BucketBoundaries{10, 100, 1000});

  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      // Each thread adds its own series (the family's mutex) and shares one.
      Counter& mine = cf.Add({{"kind", std::to_string(t)}});
      for (long i = 0; i < kIters; i++) {
        inflight.Increment();
        total.Increment();
        mine.Increment(0.5);
        mine.Increment(-3);  // ignored
        sizes.Observe(static_cast<double>(i % 2000));
        inflight.Decrement(1.0);
      }
    });
  }
  for (auto& th : ts) th.join();

  const double n = static_cast<double>(kThreads) * kIters;
  CHECK(total.Value() == n);
  CHECK(inflight.Value() == 0.0);
  for (int t = 0; t < kThreads; t++) CHECK(cf.Add({{"kind", std::to_string(t)}}).Value() == kIters * 0.5);
  auto m = sizes.Collect().histogram;
  CHECK(m.sample_count == static_cast<std::uint64_t>(n));
  // i % 2000 over 100000 iterations: 50 rounds of 0..1999 per thread.
  CHECK(m.bucket.at(0).cumulative_count == kThreads * 50 * 11u);
  CHECK(m.bucket.at(2).cumulative_count == kThreads * 50 * 1001u);
  CHECK(m.sample_sum == kThreads * 50 * (1999.0 * 2000 / 2));
  auto fams = reg.Collect();
  CHECK(fams.size() == 3 && fams[0].metric.size() == kThreads + 1);
  std::string text = TextSerializer().Serialize(fams);
  CHECK(text.find("ops_total{kind=\"all\"} 800000\n") != std::string::npos);
  CHECK(text.find("ops_total{kind=\"3\"} 50000\n") != std::string::npos);
  std::printf("prometheus-cpp layer: 8 threads exact\n");
  return 0;
}
