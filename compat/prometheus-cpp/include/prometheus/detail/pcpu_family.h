// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp compatibility layer: how a Family's series become
// series of pcpu's statistics registry (pcpu/stats.h). Not a prometheus-cpp
// header.
#pragma once

#include <pcpu/stats.h>

#include <memory>
#include <string>
#include <vector>

#include "prometheus/detail/core_export.h"
#include "prometheus/labels.h"
#include "prometheus/metric_type.h"

namespace prometheus {

class Registry;

namespace detail {

/// What a Family hands the metric it constructs: the pcpu series whose
/// words the metric updates (pcpu_counter_t, pcpu_gauge_t or
/// pcpu_histogram_t *, by type), or nullptr when the metric keeps words of
/// its own (a Family outside a Registry, or a series pcpu's registry cannot
/// hold: see PcpuFamily::Publish). `mult`: a histogram's 10^-scale_exp10.
struct SeriesTag {
  void* series = nullptr;
  double mult = 1.0;
  /// A histogram's bounds when an earlier histogram of the family has the
  /// same: shared, not copied.
  std::shared_ptr<const std::vector<double>> bounds;
};

/// The pcpu family behind a prometheus::Family, made on the first Add(): a
/// prometheus-cpp family learns its label names (and a histogram its
/// bounds) only then, while a pcpu family fixes them at creation. So the
/// first Add() fixes the pcpu family's label names (sorted, as Labels are)
/// and, for histograms, its bounds and scale. A later Add() with other
/// label names makes another label set of the name (pcpu's
/// PCPU_FAMILY_LABELSET: one metric, under one HELP and TYPE in pcpu's
/// expositions and segments, as in prometheus-cpp's). A later Add() with
/// other bounds, or one whose series pcpu refuses (a label value over
/// PCPU_STATS_LABEL_VALUE_MAX bytes or not UTF-8, a series another label
/// set has -- an empty label value is an absent one --, say), still works
/// as in prometheus-cpp but keeps its words to itself: it is in Collect()
/// and the TextSerializer's output, not in the pcpu registry, its
/// expositions or its published segment. When pcpu refuses the family the first Add()
/// describes (a name it reserves -- `x` beside a counter `x_total`, more
/// than PCPU_STATS_LABELS_MAX labels with the constant ones, a histogram
/// label `le`, bounds without a decimal scale: PcpuBoundsScale), nothing of
/// the family is published. Summaries have no pcpu type: never published.
/// Not thread-safe: its Family calls it under the family's mutex.
class PROMETHEUS_CPP_CORE_EXPORT PcpuFamily {
 public:
  PcpuFamily() = default;
  PcpuFamily(const PcpuFamily&) = delete;
  PcpuFamily& operator=(const PcpuFamily&) = delete;

  /// The series of `labels` in pcpu's registry, made (zero) now, for a
  /// metric of `type` (`bounds`: a histogram's); {nullptr} when not
  /// published (see the class comment). Never throws. Cost: on the first
  /// call a pcpu family registration, then pcpu_family_counter() (or
  /// gauge, histogram): a mutex and a hash lookup.
  SeriesTag Publish(const std::string& name, const std::string& help, const Labels& constant_labels,
                    const Labels& labels, MetricType type, const std::vector<double>* bounds);
  /// Removes the series of `labels` from pcpu's registry (after the metric
  /// that used it is gone). Cost: a hash lookup and a free.
  void Unpublish(const Labels& labels);
  /// The pcpu family, or nullptr (none made yet, or refused).
  pcpu_family_t* family() const { return fam_; }
  /// Every pcpu family of the name this family made: its other label sets
  /// (PCPU_FAMILY_LABELSET), then family() (none: empty).
  std::vector<pcpu_family_t*> families() const {
    std::vector<pcpu_family_t*> v;
    for (auto& s : sets_)
      if (s.second) v.push_back(s.second);
    if (fam_) v.push_back(fam_);
    return v;
  }

 private:
  friend class ::prometheus::Registry;
  bool Create(const std::string& name, const std::string& help, const Labels& constant_labels,
              const Labels& labels, MetricType type, const std::vector<double>* bounds);
  pcpu_family_t* Register(const std::string& name, const std::string& help, const Labels& constant_labels,
                          const Labels& labels, MetricType type, const std::vector<double>* bounds,
                          unsigned flags);
  pcpu_family_t* LabelSet(const std::string& name, const std::string& help, const Labels& constant_labels,
                          const Labels& labels, MetricType type, const std::vector<double>* bounds);
  bool Matches(const Labels& labels, const std::vector<double>* bounds) const;
  SeriesTag PublishSeries(const std::string& name, const std::string& help, const Labels& constant_labels,
                          const Labels& labels, MetricType type, const std::vector<double>* bounds);

  pcpu_registry_t* reg_ = nullptr;  // set by the Registry that owns the Family
  pcpu_family_t* fam_ = nullptr;
  bool refused_ = false;  // pcpu refused the family: nothing of it is published
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;
  std::vector<std::string> prefix_values_;
  std::shared_ptr<const std::vector<double>> shared_bounds_;  // the first histogram's  // an info family's constant label values
  double mult_ = 1.0;
  // The name's other label sets (PCPU_FAMILY_LABELSET): their label names
  // and family, or nullptr where pcpu refused it.
  std::vector<std::pair<std::vector<std::string>, pcpu_family_t*>> sets_;
};

/// The scale 10^s of a histogram's sums: the finest s in -9..0 that keeps
/// the largest bound at most 10^10 units of 10^s (so that a bucket's sum
/// takes about 10^9 observations of the largest bound before its int64
/// wraps). Cost: linear in the bounds.
PROMETHEUS_CPP_CORE_EXPORT int SumScaleExp10(const std::vector<double>& bounds);

/// The histogram's bounds as a pcpu family scale (written to
/// *scale_exp10): the finest s in -9..0 that keeps the largest bound at
/// most 10^10 units of 10^s (so the sum, in those units, takes about 10^9
/// observations of the largest bound before its int64 wraps). False when
/// a bound times 10^-s is not an integer, the bounds are empty, not
/// strictly increasing or more than PCPU_HISTOGRAM_MAX_BOUNDS. Bounds
/// {0.005 .. 10} give s = -9, {100 .. 10^6} give s = -4. Cost: linear in
/// the bounds.
PROMETHEUS_CPP_CORE_EXPORT bool PcpuBoundsScale(const std::vector<double>& bounds, int* scale_exp10);

// The first argument of Family::Add()'s metric arguments when it is a
// histogram's bounds, else nullptr.
inline const std::vector<double>* FirstBounds() { return nullptr; }
template <typename... R>
const std::vector<double>* FirstBounds(const std::vector<double>& b, R&&...) {
  return &b;
}
template <typename A, typename... R>
const std::vector<double>* FirstBounds(const A&, R&&...) {
  return nullptr;
}

/// Throws std::invalid_argument(what) (out of line, so that the headers
/// compile with -fno-exceptions).
[[noreturn]] PROMETHEUS_CPP_CORE_EXPORT void ThrowInvalidArgument(const char* what);
/// Throws std::invalid_argument unless `name` is a valid metric name and
/// every constant label name is valid (Family's constructor).
PROMETHEUS_CPP_CORE_EXPORT void CheckFamilyNames(const std::string& name, const Labels& constant_labels);
/// Throws std::invalid_argument for an invalid label name in `labels` or
/// one of the constant labels' (Family::Add()).
PROMETHEUS_CPP_CORE_EXPORT void CheckSeriesLabels(const Labels& labels, const Labels& constant_labels);

}  // namespace detail
}  // namespace prometheus
