// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 push compatibility layer (compat/prometheus-cpp).
//
// The export macro prometheus-cpp's push headers carry. It deliberately does
// not define PROMETHEUS_CPP_PUSH_EXPORT_H, the include guard of the real
// prometheus-cpp's push_export.h: core_export.h tests that guard, so a real
// prometheus-cpp push header seen before the layer's still stops the build
// (core_export.h has the #error and the link guard every layer unit carries).
#pragma once

#include "prometheus/detail/core_export.h"

#ifndef PROMETHEUS_CPP_PUSH_EXPORT
#define PROMETHEUS_CPP_PUSH_EXPORT
#endif

/// Defined by the layer's push headers (never by prometheus-cpp).
#define PCPU_PROMETHEUS_PUSH_LAYER 1
