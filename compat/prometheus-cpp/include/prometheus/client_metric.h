// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "prometheus/detail/core_export.h"

namespace prometheus {

/// One collected series: its labels and its value, in the member its
/// family's type names (the others stay zero).
struct PROMETHEUS_CPP_CORE_EXPORT ClientMetric {
  struct Label {
    std::string name;
    std::string value;
    bool operator<(const Label& o) const { return std::tie(name, value) < std::tie(o.name, o.value); }
    bool operator==(const Label& o) const { return name == o.name && value == o.value; }
  };
  std::vector<Label> label;

  struct Counter {
    double value = 0.0;
  };
  Counter counter;

  struct Gauge {
    double value = 0.0;
  };
  Gauge gauge;

  struct Info {
    double value = 1.0;
  };
  Info info;

  struct Quantile {
    double quantile = 0.0;
    double value = 0.0;
  };
  struct Summary {
    std::uint64_t sample_count = 0;
    double sample_sum = 0.0;
    std::vector<Quantile> quantile;
  };
  Summary summary;

  struct Bucket {
    std::uint64_t cumulative_count = 0;
    double upper_bound = 0.0;
  };
  struct Histogram {
    std::uint64_t sample_count = 0;
    double sample_sum = 0.0;
    std::vector<Bucket> bucket;
  };
  Histogram histogram;

  struct Untyped {
    double value = 0;
  };
  Untyped untyped;

  std::int64_t timestamp_ms = 0;
};

}  // namespace prometheus
