// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp 1.0.1 core compatibility layer: the export macro
// prometheus-cpp's headers carry (symbols are exported by the version script
// of libpcpu-prometheus, so it is empty here).
#pragma once
#ifndef PROMETHEUS_CPP_CORE_EXPORT
#define PROMETHEUS_CPP_CORE_EXPORT
#endif
