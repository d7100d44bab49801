// SPDX-License-Identifier: MIT
// The Pushgateway's grouping key in a URL path (internal to
// libpcpu-prometheus-push).
#pragma once

#include <string>

#include "prometheus/labels.h"

namespace prometheus {
namespace detail {

/// Appends "/<name>/<value>" to `path`: `value` percent-encoded (every byte
/// outside [A-Za-z0-9._~-]), or "/<name>@base64/<value in base64url>" when
/// it is empty ("="), "." or "..", or holds a '/', which the Pushgateway
/// would otherwise split or drop (it decodes %2F before splitting the path;
/// URL parsers remove dot segments). Returns false,
/// appending nothing, when `name` is not a valid label name
/// ([a-zA-Z_][a-zA-Z0-9_]*).
bool AppendGroupingLabel(std::string& path, const std::string& name, const std::string& value);

/// AppendGroupingLabel() for each label, in the map's order; false if any
/// name is invalid (what was appended is then meaningless).
bool AppendGroupingLabels(std::string& path, const Labels& labels);

}  // namespace detail
}  // namespace prometheus
