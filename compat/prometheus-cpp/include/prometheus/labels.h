// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer (compat/prometheus-cpp).
#pragma once

#include <map>
#include <string>

namespace prometheus {

/// Label names to values, ordered by name.
using Labels = std::map<std::string, std::string>;

}  // namespace prometheus
