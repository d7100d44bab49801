/* SPDX-License-Identifier: MIT */
/*
 * zone.c's internals for the layers above it: the default zone, finding an
 * object's zone, and the parent's values in a fork() child. The zone's
 * other internal headers: zone_mirror.h (mirror words), zone_backing.h
 * (shared backing). Nothing here is exported.
 */
#ifndef PCPU_ZONE_INTERNAL_H
#define PCPU_ZONE_INTERNAL_H

#include <pcpu/zone.h>

#include "visibility.h"

/* pcpu's default zone for counters (PCPU_INDEX_DEFAULT), created on first
 * use. NULL with errno on failure. */
PCPU_HIDDEN pcpu_zone_t *pcpu_default_zone(void);

/* The zone whose chunks contain `addr`, or NULL. Safe on any address: it
 * searches the chunk table, never dereferences `addr`. */
PCPU_HIDDEN pcpu_zone_t *pcpu_zone_find(const void *addr);

/* For the fork() child handlers of the layers above the zone (they run
 * after the zone's, fork.c): `obj`'s address in a read-only mapping of the
 * parent's live file, if obj is an object of a zone that was shared until
 * this fork() and is now the child's private copy; NULL otherwise (a
 * private zone, outside those handlers, or the mapping failed). What the
 * view shows goes on changing: the parent's threads write it. Valid until
 * the last child handler (rank PCPU_FORK_LATE) unmaps it. Reading a page of
 * the view that is a hole in the file would allocate it: read only where
 * the child's copy holds data. */
PCPU_PRIVATE const void *pcpu__zone_fork_parent_view(const void *obj);

#endif /* PCPU_ZONE_INTERNAL_H */
