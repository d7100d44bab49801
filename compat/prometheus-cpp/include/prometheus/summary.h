// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/ckms_quantiles.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/detail/pcpu_family.h"
#include "prometheus/detail/pcpu_value.h"
#include "prometheus/metric_type.h"

namespace prometheus {

/// Quantiles over a sliding time window, with count and sum since creation.
///
/// Accuracy, as prometheus-cpp 1.0.1 states it: the value reported for a
/// quantile q with error e is an observation of the window whose rank is
/// within q n +- e n (n: the window's observations). This one bounds the
/// rank error of every quantile by the smallest error among the summary's
/// quantiles, e_min <= e: the value reported for q is an observation whose
/// rank (1-based, in the window sorted, equal values in some order) is
/// within ceil(q n) +- e_min n -- deterministic, for any input. e_min = 0
/// keeps every observation and reports the nearest-rank quantile exactly.
/// NaN is observed as 0 in the window (its sum is NaN, as prometheus-cpp's).
/// The estimator: Greenwald and Khanna's summary (value, g, delta tuples
/// with g + delta <= 2 e_min n; the window's minimum and maximum kept
/// exactly), where prometheus-cpp uses CKMS, whose targeted invariant it
/// computes from the number of samples instead of n.
/// Observations wait in a buffer shared by the windows (up to 512, sorted
/// as they are collected) and are merged into each window's tuples and
/// compressed in one linear pass when it is full: Observe() is a push
/// under the summary's mutex, as prometheus-cpp's takes one. Collect()
/// answers every quantile in one walk of the window's tuples merged with
/// the buffer, and keeps the answers until the next Observe() or rotation
/// (collecting an unchanged summary again copies them). The window:
/// `age_buckets` windows, every observation goes to all, the oldest is
/// cleared every max_age / age_buckets and reports come from the oldest
/// live one -- as prometheus-cpp does. Thread-safe.
class PROMETHEUS_CPP_CORE_EXPORT Summary {
 public:
  using Quantiles = std::vector<detail::CKMSQuantiles::Quantile>;
  static const MetricType metric_type{MetricType::Summary};

  explicit Summary(const Quantiles& quantiles,
                   std::chrono::milliseconds max_age = std::chrono::seconds{60},
                   int age_buckets = 5);
  /// prometheus-cpp 1.1's rvalue overload (the quantiles are copied).
  explicit Summary(Quantiles&& quantiles, std::chrono::milliseconds max_age = std::chrono::seconds{60},
                   int age_buckets = 5);
  void Observe(double value);
  ClientMetric Collect() const;

 private:
  struct Tuple {
    double v;          // an observation
    std::uint64_t g;   // its least rank minus the previous tuple's
    std::uint64_t d;   // its greatest rank minus its least
  };
  struct Window {
    std::vector<Tuple> t;  // by increasing v; t[0] the minimum, g 1, d 0
    std::uint64_t n = 0;   // observations in t (the sum of g)
  };
  template <typename>
  friend class Family;
  // pcpu has no summary type: a family's summaries are never published.
  template <typename... Args>
  explicit Summary(detail::SeriesTag, Args&&... args) : Summary(std::forward<Args>(args)...) {}
  void Rotate() const;
  void Flush() const;
  void SortPending() const;
  void Answer() const;

  const Quantiles quantiles_;
  std::vector<std::size_t> by_rank_;  // quantiles_' indices by increasing quantile
  double eps_ = 0.0;                  // the smallest error of quantiles_
  mutable std::mutex mutex_;
  std::uint64_t count_ = 0;
  double sum_ = 0.0;
  mutable std::vector<Window> windows_;
  mutable std::size_t current_ = 0;
  mutable std::vector<double> pending_;  // observed, in no window's tuples yet
  mutable std::size_t sorted_ = 0;       // pending_[0, sorted_) is sorted
  mutable std::vector<Tuple> merged_;    // Flush()'s output, reused
  mutable std::vector<double> answers_;  // per quantile, while answers_valid_
  mutable bool answers_valid_ = false;
  const std::chrono::steady_clock::duration rotation_;
  mutable std::chrono::steady_clock::time_point next_rotation_;

 public:
  Summary(const Summary&) = delete;
  Summary& operator=(const Summary&) = delete;
  ~Summary();
};

/// The builder of a summary family.
PROMETHEUS_CPP_CORE_EXPORT detail::Builder<Summary> BuildSummary();

}  // namespace prometheus
