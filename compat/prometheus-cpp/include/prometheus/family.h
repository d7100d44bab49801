// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "prometheus/check_names.h"
#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/detail/future_std.h"
#include "prometheus/detail/label_set.h"
#include "prometheus/detail/pcpu_family.h"
#include "prometheus/detail/utils.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"

namespace prometheus {

/// The metrics of one name, one per label set (T: Counter, Gauge,
/// Histogram or Summary). Add() returns the metric of a label set, making
/// it on first use: keep the reference, it stays valid until Remove() or
/// the family goes. Add, Remove, Has and Collect take the family's mutex;
/// the metrics' own operations never do. Collect() lists the metrics in
/// the order they were added.
///
/// A family a Registry makes is a family of the registry's pcpu registry
/// (prometheus/pcpu.h), made on the first Add(), and its metrics are that
/// family's series: see detail::PcpuFamily for which Add()s are published
/// (the first Add's label names fix the pcpu family's). A Family built on
/// its own, outside a Registry, is not published.
template <typename T>
class PROMETHEUS_CPP_CORE_EXPORT Family : public Collectable {
 public:
  /// Throws std::invalid_argument for an invalid name or constant label name.
  Family(const std::string& name, const std::string& help, const Labels& constant_labels)
      : name_(name), help_(help), constant_labels_(constant_labels) {
    detail::CheckFamilyNames(name_, constant_labels_);
  }

  /// The metric of `labels`, constructed T(args...) if absent. Throws
  /// std::invalid_argument for an invalid label name or one of the
  /// constant labels' names.
  template <typename... Args>
  T& Add(const Labels& labels, Args&&... args) {
    std::lock_guard<std::mutex> lock{mutex_};
    const std::size_t hash = detail::LabelHasher()(labels);
    if (detail::SeriesKey* found = index_.Find(hash, labels)) return static_cast<Entry*>(found)->metric;
    detail::CheckSeriesLabels(labels, constant_labels_);
    detail::SeriesTag tag =
        pcpu_.Publish(name_, help_, constant_labels_, labels, T::metric_type, detail::FirstBounds(args...));
    std::unique_ptr<Entry> e{new Entry(labels, tag, std::forward<Args>(args)...)};
    Entry* raw = e.get();
    entries_.push_back(std::move(e));
    index_.Insert(hash, raw);
    return raw->metric;
  }

  /// Removes and destroys `metric` (nothing if it is not one of this
  /// family's, nullptr included). No thread may still use it.
  void Remove(T* metric) {
    std::lock_guard<std::mutex> lock{mutex_};
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (&(*it)->metric == metric) {
        std::unique_ptr<Entry> e = std::move(*it);
        entries_.erase(it);
        Labels labels = e->labels.ToLabels();
        index_.Erase(detail::LabelHasher()(labels), e.get());
        bool published = e->published;
        e.reset();  // the metric, then its pcpu series
        if (published) pcpu_.Unpublish(labels);
        return;
      }
    }
  }

  bool Has(const Labels& labels) const {
    std::lock_guard<std::mutex> lock{mutex_};
    return index_.Find(detail::LabelHasher()(labels), labels) != nullptr;
  }

  const std::string& GetName() const { return name_; }
  const Labels GetConstantLabels() const { return constant_labels_; }

  /// One MetricFamily with every metric, or none when the family is empty.
  std::vector<MetricFamily> Collect() const override {
    std::lock_guard<std::mutex> lock{mutex_};
    if (entries_.empty()) return {};
    std::vector<MetricFamily> out(1);
    MetricFamily& f = out.back();
    f.name = name_;
    f.help = help_;
    f.type = T::metric_type;
    f.metric.reserve(entries_.size());
    for (auto& e : entries_) {
      f.metric.push_back(e->metric.Collect());
      auto& out_labels = f.metric.back().label;
      out_labels.reserve(constant_labels_.size() + e->labels.size());
      for (auto& l : constant_labels_) out_labels.push_back(ClientMetric::Label{l.first, l.second});
      e->labels.ForEach([&out_labels](const char* n, std::size_t nl, const char* v, std::size_t vl) {
        out_labels.push_back(ClientMetric::Label{std::string(n, nl), std::string(v, vl)});
      });
    }
    return out;
  }

 private:
  // One metric with its labels (packed: detail::LabelSet), in one
  // allocation; the index maps the labels' hash to it.
  struct Entry : detail::SeriesKey {
    template <typename... Args>
    Entry(const Labels& l, detail::SeriesTag tag, Args&&... args)
        : detail::SeriesKey(l), metric(tag, std::forward<Args>(args)...) {
      published = tag.series != nullptr;
    }
    T metric;
  };
  const std::string name_;
  const std::string help_;
  const Labels constant_labels_;
  std::vector<std::unique_ptr<Entry>> entries_;
  detail::SeriesIndex index_;
  mutable std::mutex mutex_;
  friend class Registry;
  detail::PcpuFamily pcpu_;
};

}  // namespace prometheus
