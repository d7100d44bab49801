// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "prometheus/check_names.h"
#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/detail/future_std.h"
#include "prometheus/detail/pcpu_family.h"
#include "prometheus/detail/utils.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"

namespace prometheus {
inline namespace pcpu_v0 {

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
    auto it = index_.find(labels);
    if (it != index_.end()) return *it->second->metric;
    detail::CheckSeriesLabels(labels, constant_labels_);
    auto e = detail::make_unique<Entry>();
    detail::SeriesTag tag =
        pcpu_.Publish(name_, help_, constant_labels_, labels, T::metric_type, detail::FirstBounds(args...));
    e->metric = std::unique_ptr<T>(new T(tag, std::forward<Args>(args)...));
    e->published = tag.series != nullptr;
    e->labels = labels;
    for (auto& l : constant_labels_) e->collected.push_back(ClientMetric::Label{l.first, l.second});
    for (auto& l : labels) e->collected.push_back(ClientMetric::Label{l.first, l.second});
    T& ref = *e->metric;
    index_.emplace(labels, e.get());
    entries_.push_back(std::move(e));
    return ref;
  }

  /// Removes and destroys `metric` (nothing if it is not one of this
  /// family's, nullptr included). No thread may still use it.
  void Remove(T* metric) {
    std::lock_guard<std::mutex> lock{mutex_};
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if ((*it)->metric.get() == metric) {
        std::unique_ptr<Entry> e = std::move(*it);
        index_.erase(e->labels);
        entries_.erase(it);
        e->metric.reset();
        if (e->published) pcpu_.Unpublish(e->labels);
        return;
      }
    }
  }

  bool Has(const Labels& labels) const {
    std::lock_guard<std::mutex> lock{mutex_};
    return index_.count(labels) != 0;
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
      f.metric.push_back(e->metric->Collect());
      f.metric.back().label = e->collected;
    }
    return out;
  }

 private:
  struct Entry {
    std::unique_ptr<T> metric;
    Labels labels;
    std::vector<ClientMetric::Label> collected;  // constant labels, then own
    bool published = false;                      // metric's words are a pcpu series
  };
  friend class Registry;
  detail::PcpuFamily pcpu_;
  const std::string name_;
  const std::string help_;
  const Labels constant_labels_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::unordered_map<Labels, Entry*, detail::LabelHasher> index_;
  mutable std::mutex mutex_;
};

}  // inline namespace pcpu_v0
}  // namespace prometheus
