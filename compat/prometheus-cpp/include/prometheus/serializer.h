// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "prometheus/detail/core_export.h"
#include "prometheus/metric_family.h"

namespace prometheus {

/// Writes collected families in some exposition format.
class PROMETHEUS_CPP_CORE_EXPORT Serializer {
 public:
  virtual ~Serializer() = default;
  /// The whole exposition as a string.
  virtual std::string Serialize(const std::vector<MetricFamily>&) const;
  /// Writes the exposition to `out`, leaving its formatting state as it was.
  virtual void Serialize(std::ostream& out, const std::vector<MetricFamily>& metrics) const = 0;
};

}  // namespace prometheus
