// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <cstddef>

#include "prometheus/detail/core_export.h"
#include "prometheus/labels.h"

namespace prometheus {
namespace detail {

/// Hashes a label set: names and values, each with its length, so that
/// {"aa": "bb"} and {"a": "abb"} differ.
struct PROMETHEUS_CPP_CORE_EXPORT LabelHasher {
  std::size_t operator()(const Labels& labels) const;
};

}  // namespace detail
}  // namespace prometheus
