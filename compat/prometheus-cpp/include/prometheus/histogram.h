// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cstddef>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/counter.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/detail/pcpu_value.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_type.h"

namespace prometheus {
inline namespace pcpu_v0 {

/// Observations counted in buckets of given upper bounds (a value v goes
/// to the first bound >= v, else to +Inf) with their sum. Observe() is a
/// binary search of the bounds and per-CPU adds: one to the bucket's
/// count, one or two to the sum (detail::PcpuValue) -- no mutex, where
/// prometheus-cpp takes one. Collect() reads the buckets one after
/// another while observations go on: each bucket's count is exact at its
/// read, the set is not one instant (as in any per-CPU design; the count
/// is the sum of the buckets read, so the exposition stays monotone
/// across buckets). Thread-safe.
class PROMETHEUS_CPP_CORE_EXPORT Histogram {
 public:
  using BucketBoundaries = std::vector<double>;
  static const MetricType metric_type{MetricType::Histogram};

  /// Throws std::invalid_argument unless the bounds strictly increase.
  explicit Histogram(const BucketBoundaries& buckets);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;
  ~Histogram();

  PCPU_PROMETHEUS_HOT void Observe(double value) {
    pcpu_counter_inc(pcpu_counter_at(counts_, BucketOf(value)));
    sum_.Add(value);
  }
  /// Adds bucket_increments[i] to bucket i (fractions at 1e-9 resolution)
  /// and sum_of_values to the sum. Throws std::length_error unless there is
  /// one increment per bucket, +Inf included.
  void ObserveMultiple(const std::vector<double>& bucket_increments, double sum_of_values);
  ClientMetric Collect() const;

 private:
  // std::lower_bound's index (the first bound >= value; NaN: 0), without
  // branches on the data: a halving search whose step is a conditional move.
  PCPU_PROMETHEUS_HOT std::size_t BucketOf(double value) const {
    std::size_t n = bounds_.size();
    if (n == 0) return 0;
    const double* base = bounds_.data();
    while (n > 1) {
      std::size_t half = n / 2;
      base = base[half - 1] < value ? base + half : base;
      n -= half;
    }
    return static_cast<std::size_t>(base - bounds_.data()) + (*base < value ? 1 : 0);
  }

  const BucketBoundaries bounds_;
  pcpu_counter_t counts_;  // one whole-number count per bucket, +Inf last
  std::vector<detail::PcpuValue*> fractions_;  // ObserveMultiple's fractions, made on first use
  detail::PcpuValue sum_;
  mutable std::mutex fractions_mutex_;
  std::atomic<bool> has_fractions_{false};  // set once fractions_ has an entry
};

/// The builder of a histogram family.
PROMETHEUS_CPP_CORE_EXPORT detail::Builder<Histogram> BuildHistogram();

}  // inline namespace pcpu_v0
}  // namespace prometheus
