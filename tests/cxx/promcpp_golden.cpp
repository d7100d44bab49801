// SPDX-License-Identifier: MIT
// One program, built twice: against the real prometheus-cpp 1.0.1 (Debian's
// libprometheus-cpp-core) and against libpcpu-prometheus. It registers
// counters, gauges and histograms with awkward names, labels and values and
// prints TextSerializer's exposition and what Collect() returned; the test
// (promcpp_golden.sh) requires the two outputs to be byte for byte the same.
// Summaries' quantiles are left out (the estimators differ by design:
// prometheus/summary.h); their count and sum are compared.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <sstream>

using namespace prometheus;

int main() {
  Registry reg;
  auto& reqs = BuildCounter().Name("http_requests_total").Help("Requests \"served\"\\ ok.").Labels({{"svc", "a\nb"}}).Register(reg);
  reqs.Add({{"code", "200"}, {"method", "GET"}}).Increment();
  auto& c2 = reqs.Add({{"code", "500"}, {"method", "P\"O\\ST"}});
  for (int i = 0; i < 10; i++) c2.Increment(0.1);
  c2.Increment(-5);  // ignored
  c2.Increment(1234567.125);
  auto& big = BuildCounter().Name("bytes_total").Register(reg).Add({});
  big.Increment(1e15);
  big.Increment(3);

  auto& g = BuildGauge().Name("temperature_celsius").Help("T").Register(reg);
  g.Add({{"room", "1"}}).Set(-12.5);
  g.Add({{"room", "2"}}).Set(1e21);
  g.Add({{"room", "3"}}).Set(std::numeric_limits<double>::infinity());
  g.Add({{"room", "4"}}).Set(-std::numeric_limits<double>::infinity());
  g.Add({{"room", "5"}}).Set(0.000123456789);
  auto& g6 = g.Add({{"room", "6"}});
  g6.Increment(2.75);
  g6.Decrement(5);
  g6.Decrement();
  g6.Increment(-0.25);
  // Around the serializer's whole-number shortcut (below 10^15).
  g.Add({{"room", "8"}}).Set(999999999999999.0);
  g.Add({{"room", "9"}}).Set(1e15);
  g.Add({{"room", "a"}}).Set(-1e16);
  g.Add({{"room", "b"}}).Set(-0.0);
  g.Add({{"room", "c"}}).Set(123456789012345678.0);
  g.Add({{"room", "d"}}).Set(-7.0);
  auto& g7 = g.Add({{"room", "7"}}, 3.0);
  g7.Increment();

  auto& h = BuildHistogram().Name("latency_seconds").Help("Latency.").Register(reg);
  auto& h1 = h.Add({{"path", "/"}}, Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  const double obs[] = {0.001, 0.005, 0.0050001, 0.02, 0.3, 0.3, 7, 100, 0, -1, 0.1, 2.5};
  for (double v : obs) h1.Observe(v);
  auto& h2 = h.Add({{"path", "/x"}}, Histogram::BucketBoundaries{1, 2});
  h2.ObserveMultiple({5, 9, 3}, 20.5);
  h2.Observe(1.5);
  // Many bounds: every bound observed exactly and between (the search).
  Histogram::BucketBoundaries many;
  for (int i = 0; i < 37; i++) many.push_back(i * 0.25 - 1);
  auto& h4 = h.Add({{"path", "/many"}}, many);
  for (int i = -10; i < 90; i++) h4.Observe(i * 0.125 - 1);
  h4.Observe(std::nan(""));
  auto& h3 = h.Add({{"path", "/none"}}, Histogram::BucketBoundaries{});
  h3.Observe(3);

  auto& s = BuildSummary().Name("rpc_seconds").Register(reg).Add({}, Summary::Quantiles{});
  s.Observe(0.5);
  s.Observe(1.25);

  // Empty families are not collected.
  BuildCounter().Name("unused_total").Register(reg);

  // A family's metrics come in an unspecified order (prometheus-cpp: its
  // hash map's; pcpu: the order of Add()): compare them sorted by labels.
  auto families = reg.Collect();
  for (auto& f : families)
    std::sort(f.metric.begin(), f.metric.end(),
              [](const ClientMetric& a, const ClientMetric& b) { return a.label < b.label; });
  TextSerializer ser;
  std::cout << ser.Serialize(families);
  std::ostringstream os;
  os << "prefix ";
  ser.Serialize(os, families);
  std::cout << (os.str().compare(0, 7, "prefix ") == 0 ? "stream ok\n" : "stream wrong\n");
  std::cout.precision(16);
  for (auto& f : families) {
    std::cout << f.name << " type " << static_cast<int>(f.type) << " metrics " << f.metric.size() << "\n";
    for (auto& m : f.metric) {
      for (auto& l : m.label) std::cout << "  " << l.name << "=" << l.value << "\n";
      std::cout << "  values " << m.counter.value << " " << m.gauge.value << " " << m.histogram.sample_count
                << " " << m.histogram.sample_sum << " " << m.histogram.bucket.size() << " "
                << m.summary.sample_count << " " << m.summary.sample_sum << "\n";
    }
  }
  std::cout << "remove " << reg.Remove(h) << reg.Remove(h) << "\n";
  std::cout << reg.Collect().size() << "\n";
  return 0;
}
