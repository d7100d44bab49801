// SPDX-License-Identifier: MIT
// The wrappers of metrics.hpp, in a unit that includes the layer's core
// headers after the forward declarations.
#include "metrics.hpp"

#include <prometheus/client_metric.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/info.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

namespace app {

void Counter::increment(double v) { impl_.Increment(v); }
void Gauge::set(double v) { impl_->Set(v); }
void Histogram::observe(double v) { impl_.Observe(v); }

Registry::Registry() : impl_(std::make_shared<prometheus::Registry>()) {}
Registry::~Registry() = default;

Counter Registry::counter(const std::string& name, const Labels& labels) {
  if (!counters_) counters_ = &prometheus::BuildCounter().Name(name).Help("requests").Register(*impl_);
  return Counter(counters_->Add(labels));
}

Gauge Registry::gauge(const std::string& name, const Labels& labels) {
  prometheus::detail::Builder<prometheus::Gauge> b = prometheus::BuildGauge();
  return Gauge(&b.Name(name).Help("in flight").Register(*impl_).Add(labels));
}

Histogram Registry::histogram(const std::string& name, const Labels& labels) {
  auto& family = prometheus::BuildHistogram().Name(name).Help("latency").Register(*impl_);
  return Histogram(family.Add(labels, prometheus::Histogram::BucketBoundaries{0.1, 1, 10}));
}

void Registry::info(const std::string& name, const Labels& labels) {
  prometheus::BuildInfo().Name(name).Help("build").Register(*impl_).Add(labels);
}

void Registry::summary(const std::string& name, double value) {
  auto& family = prometheus::BuildSummary().Name(name).Help("sizes").Register(*impl_);
  family.Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}}).Observe(value);
}

std::string Registry::collect() const {
  const prometheus::Collectable& c = *impl_;
  std::vector<prometheus::MetricFamily> families = c.Collect();
  const prometheus::TextSerializer text;
  const prometheus::Serializer& s = text;
  return s.Serialize(families);
}

prometheus::MetricType Registry::type_of(const std::string& name) const {
  for (const prometheus::MetricFamily& f : impl_->Collect())
    if (f.name == name) return f.type;
  return prometheus::MetricType::Untyped;
}

}  // namespace app
