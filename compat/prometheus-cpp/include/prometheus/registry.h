// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/info.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"
#include "prometheus/summary.h"

namespace prometheus {

/// Families by type, registered through the builders. A name belongs to
/// one type (std::invalid_argument otherwise). With InsertBehavior::Merge
/// (the default) registering a name again with the same constant labels
/// returns the existing family, with other constant labels throws; with
/// Throw any second registration of a name throws. Thread-safe.
///
/// A Registry is a pcpu statistics registry (pcpu/stats.h): it owns a
/// pcpu_registry_t, each of its families is a pcpu family and each metric
/// a pcpu series (detail::PcpuFamily says which are published), so
/// pcpu_registry_write() exposes them in every pcpu format and
/// pcpu_segment_publish() makes them readable by pcpustat and the Python
/// reader. prometheus/pcpu.h gives the pcpu_registry_t.
class PROMETHEUS_CPP_CORE_EXPORT Registry : public Collectable {
 public:
  enum class InsertBehavior {
    Merge,
    Throw,
  };

  /// std::bad_alloc when pcpu_registry_create() fails.
  explicit Registry(InsertBehavior insert_behavior = InsertBehavior::Merge);
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  Registry(Registry&&) = delete;
  Registry& operator=(Registry&&) = delete;
  /// Destroys the families and the pcpu registry: unpublish its segment
  /// (pcpu_segment_unpublish()) first.
  ~Registry() override;

  /// Every non-empty family: counters, gauges, histograms, infos,
  /// summaries (prometheus-cpp 1.1's order), each in registration order.
  std::vector<MetricFamily> Collect() const override;

  /// Removes and destroys `family` if it is registered here; whether it was.
  template <typename T>
  bool Remove(const Family<T>& family);

 private:
  template <typename T>
  friend class detail::Builder;

  template <typename T>
  std::vector<std::unique_ptr<Family<T>>>& GetFamilies();
  template <typename T>
  bool NameExistsInOtherType(const std::string& name) const;
  template <typename T>
  Family<T>& Add(const std::string& name, const std::string& help, const Labels& labels);

  friend pcpu_registry_t* PcpuRegistry(const Registry& registry);

  pcpu_registry_t* const reg_;
  const InsertBehavior insert_behavior_;
  std::vector<std::unique_ptr<Family<Counter>>> counters_;
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_;
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_;
  std::vector<std::unique_ptr<Family<Summary>>> summaries_;
  std::vector<std::unique_ptr<Family<Info>>> infos_;
  mutable std::mutex mutex_;
};

}  // namespace prometheus
