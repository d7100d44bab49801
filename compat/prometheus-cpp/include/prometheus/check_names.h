// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <string>

#include "prometheus/detail/core_export.h"
#include "prometheus/metric_type.h"

namespace prometheus {

/// Whether `name` is a valid metric name: pcpu_stats_check_metric_name()
/// ([a-zA-Z_:][a-zA-Z0-9_:]*, at most PCPU_STATS_NAME_MAX bytes) and not
/// starting with "__" (reserved). Never throws; thread-safe; cost: linear
/// in the length.
PROMETHEUS_CPP_CORE_EXPORT bool CheckMetricName(const std::string& name);
/// Whether `name` is a valid label name: pcpu_stats_check_label_name()
/// ([a-zA-Z_][a-zA-Z0-9_]*, at most PCPU_STATS_LABEL_NAME_MAX bytes, not
/// starting with "__"). Never throws; thread-safe; cost: linear in the
/// length.
PROMETHEUS_CPP_CORE_EXPORT bool CheckLabelName(const std::string& name);
/// CheckLabelName(name), and not a label the type writes itself: `le` for
/// a histogram, `quantile` for a summary (prometheus-cpp 1.1). Never
/// throws; thread-safe; cost: linear in the length.
PROMETHEUS_CPP_CORE_EXPORT bool CheckLabelName(const std::string& name, MetricType type);

}  // namespace prometheus
