// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 push compatibility layer (compat/prometheus-cpp).
#pragma once

#include "prometheus/detail/push_export.h"

namespace prometheus {
namespace detail {

/// The HTTP methods of the Pushgateway's API: Put replaces the whole group
/// (Gateway::Push), Post replaces only the metric names it sends
/// (Gateway::PushAdd), Delete removes a group (Gateway::Delete*).
enum class HttpMethod {
  Post,
  Put,
  Delete,
};

}  // namespace detail
}  // namespace prometheus
