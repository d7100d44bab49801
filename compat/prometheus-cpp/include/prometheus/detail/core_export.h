// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp compatibility layer: the export macro prometheus-cpp's
// headers carry, and what keeps the layer from mixing with the real library.
//
// Every header of the layer includes this one. Mixing fails at build or link
// time, never at run time:
//  - the layer's names live in the inline namespace prometheus::pcpu_v0, so
//    code compiled against these headers never links to libprometheus-cpp-*
//    symbols, and code compiled against prometheus-cpp's headers never links
//    to the layer's;
//  - each unit that includes a layer header refers to the symbol named below,
//    which only libpcpu-prometheus defines: linking the real library instead
//    fails with "undefined reference to
//    `pcpu_prometheus_layer_headers_need_lpcpu_prometheus'";
//  - a real prometheus-cpp header seen first (its export header) stops the
//    build with the #error below.
#pragma once

#if defined(PROMETHEUS_CPP_CORE_EXPORT_H) || defined(PROMETHEUS_CPP_PULL_EXPORT_H) || \
    defined(PROMETHEUS_CPP_PUSH_EXPORT_H)
#error "prometheus-cpp's own headers and pcpu's prometheus-cpp layer are mixed in one unit: put the layer's include directory (pkg-config --cflags pcpu-prometheus) before /usr/include and use only its headers"
#endif

#ifndef PROMETHEUS_CPP_CORE_EXPORT
#define PROMETHEUS_CPP_CORE_EXPORT
#endif

/// Defined by every header of pcpu's layer (never by prometheus-cpp): code
/// that must know which one it is built against may test it.
#define PCPU_PROMETHEUS_LAYER 1

// The link guard: an undefined reference from every unit that includes the
// layer, resolved by libpcpu-prometheus alone (src/registry.cc). A section
// of its own in a group keyed by a name, so that one copy survives a link
// however many units carry it; it defines no symbol, so that LTO, which
// puts the top-level asm of many units in one file, may repeat it.
__asm__(
    ".pushsection .data.rel.ro.pcpu_prometheus_layer_guard,\"awG\",%progbits,"
    "pcpu_prometheus_layer_guard,comdat\n"
    ".dc.a pcpu_prometheus_layer_headers_need_lpcpu_prometheus\n"
    ".popsection\n");
