// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <string>

#include "prometheus/detail/core_export.h"

namespace prometheus {
inline namespace pcpu_v0 {

/// Whether `name` is a valid metric name: [a-zA-Z_:][a-zA-Z0-9_:]*, and
/// not starting with "__" (reserved).
PROMETHEUS_CPP_CORE_EXPORT bool CheckMetricName(const std::string& name);
/// Whether `name` is a valid label name: [a-zA-Z_][a-zA-Z0-9_]*, and not
/// starting with "__".
PROMETHEUS_CPP_CORE_EXPORT bool CheckLabelName(const std::string& name);

}  // inline namespace pcpu_v0
}  // namespace prometheus
