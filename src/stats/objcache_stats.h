/* SPDX-License-Identifier: MIT */
/*
 * The statistics layer's adapter for object caches (objcache_stats.c).
 * Nothing here is exported.
 */
#ifndef PCPU_STATS_OBJCACHE_STATS_H
#define PCPU_STATS_OBJCACHE_STATS_H

#include <pcpu/stats.h>

#include "../core/core.h"

/* Lets object caches register their counters in registries (a
 * pcpu_objcache_desc naming one): called by pcpu_registry_create(), before
 * any registry can be named. Idempotent; thread-safe. */
PCPU_HIDDEN void pcpu__objcache_stats_install(void);

#endif /* PCPU_STATS_OBJCACHE_STATS_H */
