/* SPDX-License-Identifier: MIT */
/*
 * objcache_stats.c: the statistics layer's adapter for object caches -- a
 * cache's counters as a registered struct (pcpu_registry_struct()), one
 * series per counter, label `cache`, families pcpu_objcache_*. Installed
 * into objcache.c through src/core/core.h by
 * pcpu_registry_create(), so that the cache itself (core, below this
 * layer) depends on nothing of it: a cache whose description names no
 * registry never reaches this file. It registers through the public
 * struct API (registry_structs.c); registry.c only installs it.
 */
#include <pcpu/objcache.h>
#include <pcpu/stats.h>

#include "../core/core.h"
#include "objcache_stats.h"

struct objcache_stats_struct {
	struct pcpu_counter c[PCPU_OBJCACHE_NSTATS];
};

#define STAT_FIELD(i, type, name, help) \
	{ (name), (help), NULL, (type), (i) * sizeof(struct pcpu_counter), 0 }
static const struct pcpu_stats_field stat_fields[PCPU_OBJCACHE_NSTATS] = {
	STAT_FIELD(PCPU_OBJCACHE_GETS, PCPU_METRIC_COUNTER, "pcpu_objcache_gets",
		   "Objects handed out by the cache."),
	STAT_FIELD(PCPU_OBJCACHE_PUTS, PCPU_METRIC_COUNTER, "pcpu_objcache_puts",
		   "Objects given back to the cache."),
	STAT_FIELD(PCPU_OBJCACHE_GET_MISSES, PCPU_METRIC_COUNTER, "pcpu_objcache_get_misses",
		   "Gets the slot's cache could not serve (depot or new objects)."),
	STAT_FIELD(PCPU_OBJCACHE_PUT_MISSES, PCPU_METRIC_COUNTER, "pcpu_objcache_put_misses",
		   "Puts that found the slot's cache full."),
	STAT_FIELD(PCPU_OBJCACHE_DEPOT_XFERS, PCPU_METRIC_COUNTER, "pcpu_objcache_depot_transfers",
		   "Batches moved between a slot's cache and the depot."),
	STAT_FIELD(PCPU_OBJCACHE_STRAYS, PCPU_METRIC_COUNTER, "pcpu_objcache_strays",
		   "Puts on another slot than the object's get."),
	STAT_FIELD(PCPU_OBJCACHE_OBJECTS, PCPU_METRIC_GAUGE, "pcpu_objcache_objects",
		   "Objects in existence: constructed and not destructed."),
};

static struct pcpu_counter *stats_add(struct pcpu_registry *reg, const char *name)
{
	static const char *const label_names[] = {"cache"};
	const char *label_values[] = {name};

	return pcpu_registry_struct(reg, sizeof(struct objcache_stats_struct), stat_fields,
				    PCPU_OBJCACHE_NSTATS, 1, label_names, label_values);
}

static int stats_remove(struct pcpu_registry *reg, struct pcpu_counter *stats)
{
	return pcpu_registry_struct_remove(reg, stats);
}

static const struct pcpu__objcache_stats_ops ops = {
	.add = stats_add,
	.remove = stats_remove,
};

void pcpu__objcache_stats_install(void)
{
	pcpu__objcache_set_stats_ops(&ops);
}
