// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp compatibility layer: the export macro prometheus-cpp's
// headers carry, and what keeps the layer from mixing with the real library.
//
// Every header of the layer includes this one. The layer's classes are
// prometheus-cpp's own names (prometheus::Counter, prometheus::Family<T>...,
// no namespace of pcpu's in between), so that code which forward-declares
// them (`namespace prometheus { class Counter; }`) compiles. Mixing with the
// real prometheus-cpp fails at build or link time, never at run time, with a
// message that names the fix:
//  - each unit that includes a layer header refers to the symbol below that
//    only libpcpu-prometheus defines: linking libprometheus-cpp-core instead
//    (or forgetting -lpcpu-prometheus) fails with "undefined reference to
//    `pcpu_prometheus_layer_headers_need_lpcpu_prometheus'";
//  - each unit that includes a layer header defines the mark below, and the
//    link name -lpcpu-prometheus is a linker script that brings an object
//    referring to it (libpcpu-prometheus-headers.o: src/headers_check.c):
//    a program compiled with prometheus-cpp's own headers and linked with
//    the layer fails with "undefined reference to
//    `pcpu_prometheus_library_needs_its_headers_pkg_config_cflags_pcpu_prometheus'";
//  - a real prometheus-cpp header seen first (its export header) stops the
//    build with the #error below; one seen after the layer's makes its
//    classes redefinitions.
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

// The mark: defined by every unit that includes the layer; weak, so that
// one copy is kept; hidden, so that each program or library has its own and
// exports none (the layer's libraries, which include their headers too,
// cannot stand in for a program's). Never read; one byte.
extern "C" {
extern const char pcpu_prometheus_library_needs_its_headers_pkg_config_cflags_pcpu_prometheus;
__attribute__((weak, visibility("hidden"))) extern const char
    pcpu_prometheus_library_needs_its_headers_pkg_config_cflags_pcpu_prometheus = 0;
}

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
