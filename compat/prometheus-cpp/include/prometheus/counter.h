// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include "prometheus/client_metric.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/detail/pcpu_value.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_type.h"

namespace prometheus {
inline namespace pcpu_v0 {

/// A value that only goes up, held in per-CPU words: Increment() is one
/// pcpu_counter_add() (an rseq add on this CPU's own word, no atomic
/// instruction, no shared cache line); Increment(0.5) adds the fraction to
/// a second word at 1e-9 resolution (detail::PcpuValue). Thread-safe.
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
  double Value() const { return value_.Value(); }
  ClientMetric Collect() const;

 private:
  detail::PcpuValue value_;
};

/// The builder of a counter family.
PROMETHEUS_CPP_CORE_EXPORT detail::Builder<Counter> BuildCounter();

}  // inline namespace pcpu_v0
}  // namespace prometheus
