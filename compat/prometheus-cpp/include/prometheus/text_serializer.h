// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "prometheus/detail/core_export.h"
#include "prometheus/metric_family.h"
#include "prometheus/serializer.h"

namespace prometheus {

/// The Prometheus text format 0.0.4, byte for byte as prometheus-cpp 1.0.1
/// writes it (values as printf's %.16g in the C locale, "Nan", "+Inf",
/// "-Inf"), formatted into one buffer with std::to_chars instead of
/// through the stream: independent of any locale, the stream's state
/// untouched.
class PROMETHEUS_CPP_CORE_EXPORT TextSerializer : public Serializer {
 public:
  using Serializer::Serialize;
  /// The whole exposition, formatted straight into the string returned.
  std::string Serialize(const std::vector<MetricFamily>& metrics) const override;
  void Serialize(std::ostream& out, const std::vector<MetricFamily>& metrics) const override;
  /// Appends the exposition to `out` (what both Serialize()s use).
  static void Append(std::string& out, const std::vector<MetricFamily>& metrics);
};

}  // namespace prometheus
