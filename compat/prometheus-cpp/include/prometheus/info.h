// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp compatibility layer: prometheus-cpp 1.1's info
// metric.
#pragma once

#include "prometheus/client_metric.h"
#include "prometheus/detail/builder.h"
#include "prometheus/detail/core_export.h"
#include "prometheus/detail/pcpu_family.h"
#include "prometheus/metric_type.h"

namespace prometheus {

/// Text that does not change while the process runs (a version, a
/// revision, a compiler) as labels of a series whose value is always 1:
/// BuildInfo().Name("app_build").Register(reg).Add({{"version", "1.2"}}).
/// The text format writes the family as a gauge, its samples named
/// `<name>_info` (as prometheus-cpp does). In a Registry the family is
/// pcpu's info metric `<name>_info` (pcpu_registry_info(): OpenMetrics
/// exposes it as an info metric) with the constant labels first, then
/// the first Add()'s label names (detail::PcpuFamily). Holds nothing:
/// thread-safe, Collect() costs a ClientMetric.
class PROMETHEUS_CPP_CORE_EXPORT Info {
 public:
  static const MetricType metric_type{MetricType::Info};

  Info() = default;
  /// The series' value: always 1.
  ClientMetric Collect() const;

 private:
  template <typename>
  friend class Family;
  explicit Info(detail::SeriesTag) {}
};

/// The builder of an info family (prometheus-cpp 1.1).
PROMETHEUS_CPP_CORE_EXPORT detail::Builder<Info> BuildInfo();

}  // namespace prometheus
