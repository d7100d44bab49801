/* SPDX-License-Identifier: MIT */
/*
 * zone.c's internals for the core's layers above it: the default zone,
 * finding an object's zone, memory advice. The zone's other internal
 * header: zone_mirror.h (mirror words); what libpcpu-stats uses of the
 * zone (backings, tree zones, a fork() child's view of the parent's
 * values) is the seam's, core.h. Nothing here is exported.
 */
#ifndef PCPU_ZONE_INTERNAL_H
#define PCPU_ZONE_INTERNAL_H

#include <pcpu/zone.h>
#include <stddef.h>

#include "core.h"

/* pcpu's default zone for counters (PCPU_INDEX_DEFAULT), created on first
 * use. NULL with errno on failure. */
PCPU_HIDDEN pcpu_zone_t *pcpu_default_zone(void);

/* The zone whose chunks contain `addr`, or NULL. Safe on any address: it
 * searches the chunk table, never dereferences `addr`. */
PCPU_HIDDEN pcpu_zone_t *pcpu_zone_find(const void *addr);

/* Advises the kernel not to back [p, p + len) with transparent huge pages
 * (memory pcpu writes sparsely); errno kept, failure ignored (a kernel
 * without THP). (zone_shared.c) */
PCPU_HIDDEN void pcpu__no_huge_pages(void *p, size_t len);

#endif /* PCPU_ZONE_INTERNAL_H */
