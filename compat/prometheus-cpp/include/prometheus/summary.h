// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
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
inline namespace pcpu_v0 {

/// Quantiles over a sliding time window, with count and sum since creation.
///
/// What differs from prometheus-cpp 1.0.1: its estimator (CKMS) bounds the
/// error in rank (the value returned for q has a rank within q +- error of
/// the window's observations); this one bounds it in value: each window
/// keeps a count and a sum per logarithmic bucket of relative width 1e-4
/// (zero and NaN counted apart, as 0), and reports for q the mean of the
/// bucket holding the observation of rank ceil(q n) (the nearest-rank
/// quantile): within 0.01% of that observation, exact when the bucket
/// holds one distinct value -- whatever `error` says, which is kept
/// but not used.
/// For the usual quantiles of latencies that is at least as tight; for
/// data with huge gaps between neighbouring values it is not a rank bound.
/// Memory per window: one count per distinct bucket observed (at most
/// about 5 * 10^3 per decade of values used). The window: `age_buckets`
/// windows, every observation goes to all, the oldest is cleared every
/// max_age / age_buckets and reports come from the oldest live one -- as
/// prometheus-cpp does. Observe() takes the summary's mutex, as
/// prometheus-cpp's does, and updates count, sum and the windows under it
/// (a per-CPU count would buy nothing beside that mutex). Collect() finds
/// every quantile in one walk of the window's buckets, and keeps the
/// answers until the next Observe() or rotation: collecting an unchanged
/// summary again copies them. Thread-safe.
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
  struct Cell {
    std::uint64_t n = 0;
    double sum = 0.0;
  };
  struct Window {
    std::map<int, Cell> pos, neg;
    std::uint64_t zero = 0, n = 0;
    void Clear() {
      pos.clear();
      neg.clear();
      zero = n = 0;
    }
  };
  template <typename>
  friend class Family;
  // pcpu has no summary type: a family's summaries are never published.
  template <typename... Args>
  explicit Summary(detail::SeriesTag, Args&&... args) : Summary(std::forward<Args>(args)...) {}
  void Rotate() const;
  void Answer() const;

  const Quantiles quantiles_;
  std::vector<std::size_t> by_rank_;  // quantiles_' indices by increasing quantile
  mutable std::mutex mutex_;
  std::uint64_t count_ = 0;
  double sum_ = 0.0;
  mutable std::vector<Window> windows_;
  mutable std::size_t current_ = 0;
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

}  // inline namespace pcpu_v0
}  // namespace prometheus
