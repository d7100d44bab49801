// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

namespace prometheus {

/// The type of a metric family, as prometheus-cpp 1.0.1 numbers them.
enum class MetricType {
  Counter,
  Gauge,
  Summary,
  Untyped,
  Histogram,
};

}  // namespace prometheus
