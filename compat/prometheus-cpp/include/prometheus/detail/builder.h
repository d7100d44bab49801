// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <string>

#include "prometheus/detail/core_export.h"
#include "prometheus/labels.h"

namespace prometheus {

template <typename T>
class Family;
class Registry;

namespace detail {

/// BuildCounter().Name(...).Help(...).Labels(...).Register(registry):
/// registers (or, with InsertBehavior::Merge, finds) a family. Register()
/// throws std::invalid_argument as Registry's insert rules say.
template <typename T>
class PROMETHEUS_CPP_CORE_EXPORT Builder {
 public:
  Builder& Labels(const ::prometheus::Labels& labels) {
    labels_ = labels;
    return *this;
  }
  Builder& Name(const std::string& name) {
    name_ = name;
    return *this;
  }
  Builder& Help(const std::string& help) {
    help_ = help;
    return *this;
  }
  Family<T>& Register(Registry& registry);

 private:
  ::prometheus::Labels labels_;
  std::string name_;
  std::string help_;
};

}  // namespace detail
}  // namespace prometheus
