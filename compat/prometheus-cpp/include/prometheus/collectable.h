// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <vector>

#include "prometheus/detail/core_export.h"

namespace prometheus {
struct MetricFamily;
}  // namespace prometheus

namespace prometheus {

/// Anything an exposer can collect: a Registry, a Family.
class PROMETHEUS_CPP_CORE_EXPORT Collectable {
 public:
  virtual ~Collectable() = default;
  /// The families and their series now.
  virtual std::vector<MetricFamily> Collect() const = 0;
};

}  // namespace prometheus
