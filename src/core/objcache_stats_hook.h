/* SPDX-License-Identifier: MIT */
/*
 * How an object cache's counters get into a registry without objcache.c
 * knowing registries (issue 25: objcache beside the counters, below the
 * statistics layer). pcpu_objcache_desc.registry names a registry; the
 * statistics layer, which owns registries, installs these operations
 * (src/stats/objcache_stats.c) when the first registry is created -- a
 * description can only name a registry that exists, so they are always
 * installed by the time one is used. objcache.c calls through them and
 * includes nothing of the statistics layer. Nothing here is exported.
 */
#ifndef PCPU_OBJCACHE_STATS_HOOK_H
#define PCPU_OBJCACHE_STATS_HOOK_H

#include <pcpu/counter.h>
#include <pcpu/objcache.h>

#include "visibility.h"

struct pcpu__objcache_stats_ops {
	/* The cache's PCPU_OBJCACHE_NSTATS counters (indexed by enum
	 * pcpu_objcache_stat), allocated by `reg` and registered there with
	 * label cache=`name` (families pcpu_objcache_*). NULL with errno
	 * (EINVAL: name not a valid label value; EEXIST: that name is
	 * registered already; ENOMEM). */
	struct pcpu_counter *(*add)(struct pcpu_registry *reg, const char *name);
	/* Unregisters and frees what add() returned. */
	int (*remove)(struct pcpu_registry *reg, struct pcpu_counter *stats);
};

/* Installs the operations (the statistics layer; idempotent, thread-safe:
 * one atomic store of a pointer to constant operations). */
PCPU_PRIVATE void pcpu__objcache_set_stats_ops(const struct pcpu__objcache_stats_ops *ops);

#endif /* PCPU_OBJCACHE_STATS_HOOK_H */
