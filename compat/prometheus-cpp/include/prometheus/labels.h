// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <map>
#include <string>

namespace prometheus {
inline namespace pcpu_v0 {

/// Label names to values, ordered by name.
using Labels = std::map<std::string, std::string>;

}  // inline namespace pcpu_v0
}  // namespace prometheus
