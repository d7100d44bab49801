/* SPDX-License-Identifier: MIT */
/*
 * The statistics layer's adapter for object caches (objcache_stats.c).
 * Nothing here is exported.
 */
#ifndef PCPU_STATS_OBJCACHE_STATS_H
#define PCPU_STATS_OBJCACHE_STATS_H

#include <pcpu/stats.h>

#include "../visibility.h"

/* How a registry registers a struct of counters: pcpu_registry_struct()
 * and pcpu_registry_struct_remove(). */
typedef void *pcpu__struct_add_fn(pcpu_registry_t *reg, size_t size,
				  const struct pcpu_stats_field *fields, size_t nfields,
				  unsigned nlabels, const char *const *label_names,
				  const char *const *label_values);
typedef int pcpu__struct_remove_fn(pcpu_registry_t *reg, void *s);

/* Lets object caches register their counters in registries (a
 * pcpu_objcache_desc naming one): called by pcpu_registry_create(), before
 * any registry can be named, with the registry's own struct registration,
 * which the adapter then calls -- so that the registry and the adapter do
 * not call each other (tests/check_layers.py: no loops). Idempotent;
 * thread-safe. */
PCPU_HIDDEN void pcpu__objcache_stats_install(pcpu__struct_add_fn *add,
					      pcpu__struct_remove_fn *remove);

#endif /* PCPU_STATS_OBJCACHE_STATS_H */
