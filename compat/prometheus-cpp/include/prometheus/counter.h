// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include "prometheus/client_metric.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/detail/pcpu_family.h"
#include "prometheus/detail/pcpu_value.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_type.h"

namespace prometheus {

/// A value that only goes up, held in per-CPU words: Increment() is one
/// pcpu_counter_add() (an rseq add on this CPU's own word, no atomic
/// instruction, no shared cache line); Increment(0.5) adds the fraction to
/// a second word at 1e-9 resolution (detail::PcpuValue). A counter a
/// Registry's family makes is a series of the registry's pcpu counter
/// family with fractions (prometheus/pcpu.h): pcpu's expositions and
/// segments show its value to 1e-9. Thread-safe.
class PROMETHEUS_CPP_CORE_EXPORT Counter {
 public:
  static const MetricType metric_type{MetricType::Counter};

  Counter() = default;

  PCPU_PROMETHEUS_HOT void Increment() { value_.AddWhole(1); }
  /// Adds `v`; a negative `v` is ignored (a counter never goes down).
  PCPU_PROMETHEUS_HOT void Increment(double v) {
    if (v < 0.0) return;
    value_.Add(v);
  }
  /// The value now (whole words exact below 2^53, fractions to 1e-9).
  /// Thread-safe; cost: a read of every CPU's words.
  double Value() const { return value_.Value(); }
  /// Sets the counter back to 0 (prometheus-cpp 1.1): increments racing it
  /// land before or after. Thread-safe; cost: pcpu_gauge_set() of its words.
  void Reset() { value_.Set(0.0); }
  /// Inline: the caller builds the ClientMetric in place, and reads a
  /// counter that only ever counted whole units with one call
  /// (pcpu_counter_fetch(): detail::PcpuValue::Value()).
  ClientMetric Collect() const {
    ClientMetric m;
    m.counter.value = value_.Value();
    return m;
  }

 private:
  template <typename>
  friend class Family;
  explicit Counter(detail::SeriesTag s) : value_(static_cast<pcpu_counter_t>(s.series)) {}
  detail::PcpuValue value_;
};

/// The builder of a counter family.
PROMETHEUS_CPP_CORE_EXPORT detail::Builder<Counter> BuildCounter();

}  // namespace prometheus
