/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/pcpu.h
 * pcpu: per-CPU statistics for Linux user space. This header gives the whole
 * API: the per-CPU zones (pcpu/zone.h), exact counters (pcpu/counter.h) and
 * their owned slots for pinned workers (pcpu/worker.h), the
 * statistics layer (pcpu/stats.h: registry, gauges, histograms, consistent
 * groups, exposition), per-CPU reference counts (pcpu/ref.h) and a
 * big-reader lock (pcpu/rwlock.h), per-CPU object caches
 * (pcpu/objcache.h), the shared statistics segment (pcpu/segment.h) and its
 * reader (pcpu/reader.h). Every name it declares starts with pcpu_ or PCPU_.
 * FreeBSD counter(9) compatibility, whose names are unprefixed, is opt-in:
 * pcpu/counter9.h. The section 3 manual pages start at pcpu(3).
 *
 * Link with -lpcpu (pkg-config pcpu, or CMake's pcpu::pcpu); a program
 * that uses the statistics layer links -lpcpu-stats (pkg-config pcpu-stats,
 * CMake's pcpu::stats), whose headers this one includes where they are
 * installed.
 */
#ifndef PCPU_PCPU_H
#define PCPU_PCPU_H

#include <pcpu/defs.h>
#include <pcpu/rseq.h>
#include <pcpu/runtime_version.h>
#include <pcpu/common.h> /* compatibility: the three above */
#include <pcpu/version.h> /* generated from the CMake project version */
#include <pcpu/zone.h>
#include <pcpu/worker.h>
#include <pcpu/percpu_ops.h>
#include <pcpu/counter.h>
#include <pcpu/ref.h>
#include <pcpu/rwlock.h>
#include <pcpu/objcache.h>
#include <pcpu/hcounter.h>
#include <pcpu/flows.h>
/* libpcpu-stats' headers, where they are installed: they come with that
 * library's development files (Debian: libpcpu-stats-dev), and a program
 * that only counts builds with libpcpu's alone (libpcpu-dev). A compiler
 * without __has_include gets them unconditionally, as before. */
#if defined(__has_include)
#if __has_include(<pcpu/stats.h>)
#include <pcpu/stats.h>
#include <pcpu/segment.h>
#include <pcpu/reader.h>
#endif
#else
#include <pcpu/stats.h>
#include <pcpu/segment.h>
#include <pcpu/reader.h>
#endif

#endif /* PCPU_PCPU_H */
