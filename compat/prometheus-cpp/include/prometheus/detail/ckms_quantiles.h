// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp):
// the quantile description Summary::Quantiles holds. The CKMS estimator
// itself is not provided: Summary estimates differently (summary.h).
#pragma once

#include "prometheus/detail/core_export.h"

namespace prometheus {
namespace detail {

class PROMETHEUS_CPP_CORE_EXPORT CKMSQuantiles {
 public:
  /// A quantile (0..1) to report and its allowed error.
  struct PROMETHEUS_CPP_CORE_EXPORT Quantile {
    Quantile(double q, double e) : quantile(q), error(e), u(2.0 * e / (1.0 - q)), v(2.0 * e / q) {}
    double quantile;
    double error;
    double u;
    double v;
  };
};

}  // namespace detail
}  // namespace prometheus
