/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/defs.h
 * Definitions every pcpu header uses: the export and C++ linkage macros,
 * branch hints, and the slot stride (the one layout constant of all
 * per-CPU memory).
 *
 * Everything named `pcpu__` (two underscores) is visible only so that the
 * inline fast paths can use it. It is not API: it may change in any release.
 */
#ifndef PCPU_DEFS_H
#define PCPU_DEFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define PCPU_BEGIN_DECLS extern "C" {
#define PCPU_END_DECLS }
#else
#define PCPU_BEGIN_DECLS
#define PCPU_END_DECLS
#endif

#define PCPU_API __attribute__((visibility("default")))
#define PCPU_LIKELY(x) __builtin_expect(!!(x), 1)
#define PCPU_UNLIKELY(x) __builtin_expect(!!(x), 0)


/**
 * Distance in bytes between the copies of one object for consecutive slots.
 *
 * Every zone uses the same stride, as FreeBSD's UMA_ZONE_PCPU does, so the
 * copy of an object for slot i is always `obj + i * PCPU_SLOT_STRIDE` and the
 * hot path needs no per-zone lookup for it (a shift, not a multiply).
 * Zones reserve address space in chunks of `2 * nslots * PCPU_SLOT_STRIDE`
 * (each slot's words, then each slot's mirror words: pcpu/zone.h) with
 * MAP_NORESERVE; only pages that are written ever become resident. It also bounds
 * one object (an array of counters) to PCPU_ZONE_MAX_OBJECT bytes.
 */
#define PCPU_SLOT_STRIDE_SHIFT 25
#define PCPU_SLOT_STRIDE ((size_t)1 << PCPU_SLOT_STRIDE_SHIFT)

#endif /* PCPU_DEFS_H */
