// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

namespace prometheus {

/// The type of a metric family, as prometheus-cpp numbers them (Info
/// since 1.1).
enum class MetricType {
  Counter,
  Gauge,
  Summary,
  Untyped,
  Histogram,
  Info,
};

}  // namespace prometheus
