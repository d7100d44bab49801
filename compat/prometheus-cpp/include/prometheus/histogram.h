// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/counter.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/detail/pcpu_family.h"
#include "prometheus/detail/pcpu_value.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_type.h"

namespace prometheus {

/// Observations counted in buckets of given upper bounds (a value v goes
/// to the first bound >= v, else to +Inf) with their sum, in pcpu's
/// histogram layout: per bucket a per-CPU count and a per-CPU sum, in
/// units of 10^s where s = detail::SumScaleExp10(bounds) (-9 for bounds up
/// to 10, coarser for larger bounds so that the largest is at most 10^10
/// units). Observe() is a binary search of the bounds and two per-CPU adds
/// to words side by side (the count, round(value * 10^-s) to the sum) --
/// no mutex, where prometheus-cpp takes one. The precision of the sum:
/// 10^s per observation, 1e-9 for the usual latency bounds; an
/// observation the sum words cannot hold (|value| * 10^-s >= 4e18,
/// infinities, NaN) goes to the double sum of the words after the buckets'
/// (pcpu_fraction_sum_add(): per-CPU doubles, +-Inf and NaN a shared
/// residue), which pcpu's registry and segments read too (a family with
/// fractions, segment format 2.8). A histogram a Registry's
/// family makes is, where its bounds are whole numbers of 10^s units
/// (detail::PcpuBoundsScale), a series of the registry's pcpu histogram
/// family (prometheus/pcpu.h) of that scale: these words are that
/// series', so pcpu's expositions and segments show the same counts and
/// sums. Collect() reads the buckets one after another while
/// observations go on: each bucket's count is exact at its read, the set
/// is not one instant (as in any per-CPU design; the count is the sum of
/// the buckets read, so the exposition stays monotone across buckets).
/// Thread-safe.
class PROMETHEUS_CPP_CORE_EXPORT Histogram {
 public:
  using BucketBoundaries = std::vector<double>;
  static const MetricType metric_type{MetricType::Histogram};

  /// Throws std::invalid_argument unless the bounds strictly increase.
  explicit Histogram(const BucketBoundaries& buckets);
  /// The same, taking the bounds' storage (prometheus-cpp 1.1).
  explicit Histogram(BucketBoundaries&& buckets);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;
  ~Histogram();

  PCPU_PROMETHEUS_HOT void Observe(double value) {
    std::size_t b = BucketOf(value);
    pcpu_counter_inc(pcpu_counter_at(counts_, 2 * b));
    double x = value * mult_;
    if (std::fabs(x) < 4.0e18)  // the sum in units of 10^scale, beside the count
      pcpu_counter_add(pcpu_counter_at(counts_, 2 * b + 1), static_cast<std::int64_t>(x + (x < 0 ? -0.5 : 0.5)));
    else
      AddOtherSum(value);  // out of range, infinite or NaN
  }
  /// Sets every bucket and the sum back to 0 (prometheus-cpp 1.1):
  /// observations racing it land before or after, each bucket on its own.
  /// Thread-safe; cost: a pcpu_gauge_set() per word.
  void Reset();
  /// Adds bucket_increments[i] to bucket i (fractions at 1e-9 resolution)
  /// and sum_of_values to the sum. Throws std::length_error unless there is
  /// one increment per bucket, +Inf included.
  void ObserveMultiple(const std::vector<double>& bucket_increments, double sum_of_values);
  ClientMetric Collect() const;

 private:
  // std::lower_bound's index (the first bound >= value; NaN: 0), without
  // branches on the data: a halving search whose step is a conditional move.
  PCPU_PROMETHEUS_HOT std::size_t BucketOf(double value) const {
    const BucketBoundaries& bounds = *bounds_;
    std::size_t n = bounds.size();
    if (n == 0) return 0;
    const double* base = bounds.data();
    while (n > 1) {
      std::size_t half = n / 2;
      base = base[half - 1] < value ? base + half : base;
      n -= half;
    }
    return static_cast<std::size_t>(base - bounds.data()) + (*base < value ? 1 : 0);
  }

  template <typename>
  friend class Family;
  Histogram(detail::SeriesTag s, const BucketBoundaries& buckets);
  Histogram(detail::SeriesTag s, BucketBoundaries&& buckets);
  void Init(detail::SeriesTag s);

  void AddOtherSum(double v);

  struct Fractions;
  Fractions* GetFractions();

  // The bounds, shared by the histograms of a family that have the same
  // (detail::SeriesTag::bounds).
  std::shared_ptr<const BucketBoundaries> bounds_;
  // Per bucket, +Inf last: [2b] its whole-number count, [2b + 1] its pcpu
  // sum (pcpu's histogram layout: a pcpu series' own words when published);
  // then the double sum of what those cannot hold (PCPU_FRACTION_SUM_WORDS).
  pcpu_counter_t OtherSum() const { return pcpu_counter_at(counts_, 2 * (bounds_->size() + 1)); }
  pcpu_counter_t counts_ = nullptr;
  bool owns_counts_ = true;
  double mult_ = 1.0;  // 10^-scale_exp10, scale_exp10 = detail::SumScaleExp10(bounds_)
  std::atomic<Fractions*> fractions_{nullptr};  // ObserveMultiple's fractions, made on first use
};

/// The builder of a histogram family.
PROMETHEUS_CPP_CORE_EXPORT detail::Builder<Histogram> BuildHistogram();

}  // namespace prometheus
