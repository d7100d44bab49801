// SPDX-License-Identifier: MIT
// Every code path of the prometheus-cpp layer's headers that calls into
// its libraries: the families of each metric type (Add, Has, Remove), the
// builders, the values' slow paths (large and fractional increments, a
// gauge set then added to, Value()), Registry::Remove, Collect, the
// Exposer, the Gateway and pcpu::exposer. Compiled at -O0, its object's
// symbols are what the headers use: abi_symbols.sh refuses a
// prometheus::detail symbol that the libraries export and this unit does not
// use. Linked with the libraries and run: they export all it needs.
#include <pcpu/exposer.hpp>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gateway.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/info.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <cstdio>
#include <memory>
#include <string>

int main() {
  using namespace prometheus;
  auto reg = std::make_shared<Registry>();
  auto& counters = BuildCounter().Name("probe_total").Help("h").Labels({{"c", "1"}}).Register(*reg);
  Counter& c = counters.Add({{"k", "v"}});
  c.Increment();
  c.Increment(0.5);
  c.Increment(1e30);  // beyond the whole words: the extra sum
  auto& gauges = BuildGauge().Name("probe_gauge").Help("h").Labels({}).Register(*reg);
  Gauge& g = gauges.Add({}, 3.0);
  g.Set(2.5);
  g.Increment();
  g.Decrement(0.25);
  g.SetToCurrentTime();
  g.Set(1.0);
  auto& hists = BuildHistogram().Name("probe_seconds").Help("h").Labels({}).Register(*reg);
  Histogram& h = hists.Add({}, Histogram::BucketBoundaries{0.1, 1, 10});
  h.Observe(0.5);
  h.ObserveMultiple({1, 0, 0, 0}, 0.05);
  auto& sums = BuildSummary().Name("probe_bytes").Help("h").Labels({}).Register(*reg);
  sums.Add({}, Summary::Quantiles{{0.5, 0.05}}).Observe(3);
  BuildInfo().Name("probe_build").Help("h").Labels({}).Register(*reg).Add({{"version", "1"}});
  Counter& gone = counters.Add({{"k", "gone"}});
  int bad = counters.Has({{"k", "gone"}}) ? 0 : 1;
  counters.Remove(&gone);
  bad |= counters.Has({{"k", "gone"}}) ? 1 : 0;
  bad |= c.Value() > 1e29 ? 0 : 1;
  bad |= g.Value() == 1.0 ? 0 : 1;
  Counter standalone;  // metrics outside a family (prometheus-cpp allows them)
  standalone.Increment(2);
  Gauge standalone_gauge(4.0);
  standalone_gauge.Increment(0.5);
  Histogram standalone_hist(Histogram::BucketBoundaries{1, 2});
  standalone_hist.Observe(1.5);
  Summary standalone_summary(Summary::Quantiles{{0.9, 0.01}});
  standalone_summary.Observe(1);
  bad |= standalone.Value() == 2 && standalone_gauge.Value() == 4.5 ? 0 : 1;
  Family<Counter> alone("probe_alone_total", "a family outside a registry", {});
  alone.Add({}).Increment();
  const std::string text = TextSerializer().Serialize(reg->Collect());
  bad |= text.find("probe_gauge 1") == std::string::npos ? 1 : 0;
  bad |= reg->Remove(hists) ? 0 : 1;

  Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(reg);
  bad |= exposer.GetListeningPorts().empty() ? 1 : 0;
  Gateway gateway("127.0.0.1", "1", "abi_probe");
  gateway.RegisterCollectable(reg);
  pcpu::exposer mine("127.0.0.1:0");
  bad |= mine.ports().empty() ? 1 : 0;
  if (bad) std::fprintf(stderr, "abi probe: a check failed\n%s", text.c_str());
  return bad;
}
