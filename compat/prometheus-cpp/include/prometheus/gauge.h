// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include "prometheus/client_metric.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/detail/pcpu_family.h"
#include "prometheus/detail/pcpu_value.h"
#include "prometheus/metric_type.h"

namespace prometheus {

/// A value that goes up and down, held in per-CPU words
/// (detail::PcpuValue: integer changes exact, fractions to 1e-9 each).
/// Increment/Decrement are per-CPU adds; Set() of a gauge never
/// incremented is two stores (three where the value has a fraction), else
/// pcpu_gauge_set() of its words (a fetch and a striped mutex each):
/// detail::PcpuValue. A gauge a Registry's family makes is a series of the
/// registry's pcpu gauge family with fractions (prometheus/pcpu.h): pcpu's
/// expositions and segments show its value to 1e-9. Thread-safe.
class PROMETHEUS_CPP_CORE_EXPORT Gauge {
 public:
  static const MetricType metric_type{MetricType::Gauge};

  Gauge() : value_(nullptr, true) {}
  explicit Gauge(double value) : value_(nullptr, true) { value_.Set(value); }

  PCPU_PROMETHEUS_HOT void Increment() { value_.GaugeAddWhole(1); }
  /// Adds `v` (which may be negative).
  PCPU_PROMETHEUS_HOT void Increment(double v) { value_.GaugeAdd(v); }
  PCPU_PROMETHEUS_HOT void Decrement() { value_.GaugeAddWhole(-1); }
  /// Subtracts `v` (which may be negative).
  PCPU_PROMETHEUS_HOT void Decrement(double v) { value_.GaugeAdd(-v); }
  void Set(double v) { value_.Set(v); }
  /// Sets the gauge to the whole seconds since the Unix epoch (time(), as
  /// prometheus-cpp does).
  void SetToCurrentTime();
  double Value() const { return value_.Value(); }
  /// Inline, as Counter::Collect().
  ClientMetric Collect() const {
    ClientMetric m;
    m.gauge.value = value_.Value();
    return m;
  }

 private:
  template <typename>
  friend class Family;
  explicit Gauge(detail::SeriesTag s) : value_(static_cast<pcpu_counter_t>(s.series), true) {}
  Gauge(detail::SeriesTag s, double value) : value_(static_cast<pcpu_counter_t>(s.series), true) {
    value_.Set(value);
  }
  detail::PcpuValue value_;
};

/// The builder of a gauge family.
PROMETHEUS_CPP_CORE_EXPORT detail::Builder<Gauge> BuildGauge();

}  // namespace prometheus
