// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp compatibility layer, pull side (libpcpu-prometheus-pull):
// the export macros prometheus-cpp's pull headers carry, and the pull
// library's own link guard.
//
// Deliberately NOT guarded by PROMETHEUS_CPP_PULL_EXPORT_H: that macro is
// what prometheus-cpp's own pull_export.h defines, and core_export.h stops
// the build with its #error when it sees it (a real prometheus-cpp header in
// the same unit as the layer's).
#pragma once

// core_export.h's check runs once per unit, when the first layer header
// comes; this one again when the first layer pull header comes, so that a
// prometheus-cpp export header seen between the two stops the build too.
#if defined(PROMETHEUS_CPP_CORE_EXPORT_H) || defined(PROMETHEUS_CPP_PULL_EXPORT_H) || \
    defined(PROMETHEUS_CPP_PUSH_EXPORT_H)
#error "prometheus-cpp's own headers and pcpu's prometheus-cpp layer are mixed in one unit: put the layer's include directory (pkg-config --cflags pcpu-prometheus-pull) before /usr/include and use only its headers"
#endif

#include "prometheus/detail/core_export.h"

#ifndef PROMETHEUS_CPP_PULL_EXPORT
#define PROMETHEUS_CPP_PULL_EXPORT __attribute__((visibility("default")))
#endif
#ifndef PROMETHEUS_CPP_PULL_NO_EXPORT
#define PROMETHEUS_CPP_PULL_NO_EXPORT __attribute__((visibility("hidden")))
#endif
#ifndef PROMETHEUS_CPP_PULL_DEPRECATED
#define PROMETHEUS_CPP_PULL_DEPRECATED __attribute__((__deprecated__))
#endif
#ifndef PROMETHEUS_CPP_PULL_DEPRECATED_EXPORT
#define PROMETHEUS_CPP_PULL_DEPRECATED_EXPORT PROMETHEUS_CPP_PULL_EXPORT PROMETHEUS_CPP_PULL_DEPRECATED
#endif
#ifndef PROMETHEUS_CPP_PULL_DEPRECATED_NO_EXPORT
#define PROMETHEUS_CPP_PULL_DEPRECATED_NO_EXPORT PROMETHEUS_CPP_PULL_NO_EXPORT PROMETHEUS_CPP_PULL_DEPRECATED
#endif

/// Defined by the layer's pull headers (never by prometheus-cpp).
#define PCPU_PROMETHEUS_PULL_LAYER 1

// The pull library's link guard, as core_export.h's: every unit that
// includes a layer pull header refers to this symbol, which only
// libpcpu-prometheus-pull defines (src/pull/exposer.cc). Linking
// libprometheus-cpp-pull instead, or forgetting -lpcpu-prometheus-pull,
// fails with "undefined reference to
// `pcpu_prometheus_pull_layer_headers_need_lpcpu_prometheus_pull'".
__asm__(
    ".pushsection .data.rel.ro.pcpu_prometheus_pull_layer_guard,\"awG\",%progbits,"
    "pcpu_prometheus_pull_layer_guard,comdat\n"
    ".dc.a pcpu_prometheus_pull_layer_headers_need_lpcpu_prometheus_pull\n"
    ".popsection\n");
