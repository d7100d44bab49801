/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/pcpu.h
 * pcpu: per-CPU statistics for Linux user space. Include this header for the
 * per-CPU zones (pcpu/zone.h), exact counters (pcpu/counter.h), and the
 * statistics layer (pcpu/stats.h: registry, gauges, histograms, consistent
 * groups, exposition).
 * FreeBSD counter(9) compatibility: pcpu/counter9.h.
 *
 * Link with -lpcpu (pkg-config pcpu, or CMake's pcpu::pcpu).
 */
#ifndef PCPU_PCPU_H
#define PCPU_PCPU_H

#include <pcpu/common.h>
#include <pcpu/version.h> /* generated from the CMake project version */
#include <pcpu/zone.h>
#include <pcpu/counter.h>
#include <pcpu/stats.h>

#endif /* PCPU_PCPU_H */
