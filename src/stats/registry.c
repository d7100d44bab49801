/* SPDX-License-Identifier: MIT */
/*
 * The statistics registry: families of named series whose values live in
 * the registry's own per-CPU zone. This file holds the registry itself --
 * creation, the default registry, constant labels, fork handlers and
 * destruction; the parts live beside it:
 *
 *     pcpu_registry
 *       lock ─ one mutex for the directory (families, series, structs)
 *       zone ─ every counter, gauge, histogram and struct of the registry
 *       fams[] ─ pcpu_family ─ name, help, unit, type, labels, layout  registry_families.c
 *       │                   └ series{} ─ pcpu__series ─ values, handle  registry_series.c
 *       names{} ─ every sample name a family reserves -> family         registry_names.c
 *       structs ─ registered statistics structs                         registry_structs.c
 *       gfams ─ consistent group families                               registry_groups.c
 *       callbacks ─ series a callback computes                          registry_callbacks.c
 *
 * Why one mutex: the directory changes rarely (a flow appears, an interface
 * goes away) and is read in bulk (a scrape); updates -- the hot path -- never
 * touch the directory at all, because a caller keeps the handle a lookup
 * returned and updates it with the inline counter/gauge/histogram path. A
 * lock-free directory would make registration and export more complex to
 * save nothing that matters. A snapshot holds the lock only while it copies
 * metadata and reads values; formatting happens outside.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "../core/core.h"
#include "objcache_stats.h"

/* ---- registry ---- */

/* fork(): every registry's lock is taken around fork() (fork.c), so a child
 * never inherits one held by a snapshot or a registration of another
 * thread. Order: default_lock (held while creating the default registry),
 * then the list, then each registry's lock. */
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pcpu_registry *default_reg;
static pthread_mutex_t registries_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pcpu_registry *registries;
static int fork_registered;

static void registries_fork_prepare(void)
{
	struct pcpu_registry *r;

	pthread_mutex_lock(&default_lock);
	pthread_mutex_lock(&registries_lock);
	for (r = registries; r; r = r->next) {
		pthread_mutex_lock(&r->lock);
		/* What the observer caches for the child (registry_observer.h). */
		(void)pcpu__reg_notify(r, PCPU__REG_FORK_PREPARE, NULL, NULL);
	}
}

static void registries_fork_release(void)
{
	struct pcpu_registry *r;

	for (r = registries; r; r = r->next)
		pthread_mutex_unlock(&r->lock);
	pthread_mutex_unlock(&registries_lock);
	pthread_mutex_unlock(&default_lock);
}

static void registries_fork_child(void)
{
	struct pcpu_registry *r;

	for (r = registries; r; r = r->next)
		pcpu__collect_fork_child(r);
	registries_fork_release();
}

pcpu_registry_t *pcpu_registry_create(void)
{
	struct pcpu_registry *reg;

	if (pcpu__fork_register(&fork_registered, PCPU_FORK_REGISTRY, registries_fork_prepare,
			       registries_fork_release, registries_fork_child) != 0)
		return NULL;
	/* Its histogram series are made under its lock, and take the shared
	 * layout tables' lock (histogram.c): that lock's fork handlers are
	 * registered now, under no lock. */
	pcpu__histogram_tables_fork_register();
	reg = calloc(1, sizeof *reg);
	if (!reg)
		return NULL;
	reg->zone = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	if (!reg->zone) {
		free(reg);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&reg->lock, NULL);
	pthread_cond_init(&reg->collect_cv, NULL);
	pthread_mutex_lock(&registries_lock);
	reg->next = registries;
	registries = reg;
	pthread_mutex_unlock(&registries_lock);
	/* A cache may now name a registry. */
	pcpu__objcache_stats_install();
	return reg;
}

pcpu_registry_t *pcpu_registry_default(void)
{
	struct pcpu_registry *r = __atomic_load_n(&default_reg, __ATOMIC_ACQUIRE);

	if (r)
		return r;
	if (pcpu__fork_register(&fork_registered, PCPU_FORK_REGISTRY, registries_fork_prepare,
			       registries_fork_release, registries_fork_child) != 0)
		return NULL;
	/* Created before default_lock is taken: creating one may register
	 * fork handlers (the zone's), which takes fork.c's lock, and fork()'s
	 * prepare takes that lock before default_lock -- the other order
	 * would deadlock a first call racing a fork(). Two first callers may
	 * both create one; the loser destroys its own. */
	struct pcpu_registry *mine = pcpu_registry_create();

	if (!mine)
		return NULL;
	pthread_mutex_lock(&default_lock);
	r = default_reg;
	if (!r) {
		r = mine;
		mine = NULL;
		r->is_default = 1;
		__atomic_store_n(&default_reg, r, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&default_lock);
	if (mine)
		pcpu_registry_destroy(mine);
	return r;
}

pcpu_zone_t *pcpu_registry_zone(pcpu_registry_t *reg)
{
	return reg ? reg->zone : NULL;
}

uint64_t pcpu_registry_generation(pcpu_registry_t *reg)
{
	return reg ? __atomic_load_n(&reg->generation, __ATOMIC_ACQUIRE) : 0;
}



static void free_strings(char **v, unsigned n)
{
	unsigned k;

	if (!v)
		return;
	for (k = 0; k < n; k++)
		free(v[k]);
	free(v);
}

static char **dup_strings(const char *const *v, unsigned n)
{
	char **out = calloc(n, sizeof *out);
	unsigned k;

	if (!out)
		return NULL;
	for (k = 0; k < n; k++)
		if (!(out[k] = strdup(v[k]))) {
			free_strings(out, k);
			errno = ENOMEM;
			return NULL;
		}
	return out;
}

int pcpu_registry_const_labels(pcpu_registry_t *reg, unsigned n, const char *const *names,
			       const char *const *values)
{
	char **cn = NULL, **cv = NULL;
	int r = 0;

	if (!reg)
		return pcpu__reg_fail(EINVAL, "constant labels: NULL registry");
	if (pcpu__const_labels_check(n, names, values) < 0)
		return -1;
	if (!(cn = dup_strings(names, n)) || !(cv = dup_strings(values, n))) {
		free_strings(cn, n);
		return pcpu__reg_fail(ENOMEM, NULL);
	}
	pthread_mutex_lock(&reg->lock);
	if (reg->nfams || reg->nconst) {
		r = pcpu__reg_fail(EBUSY, "constant labels: set them once, before the first family");
	} else {
		reg->const_names = cn;
		reg->const_values = cv;
		reg->nconst = n;
		cn = cv = NULL;
	}
	pthread_mutex_unlock(&reg->lock);
	free_strings(cn, n);
	free_strings(cv, n);
	return r;
}



void pcpu_registry_destroy(pcpu_registry_t *reg)
{
	struct pcpu__sstruct *ss, *next;
	struct pcpu_registry **pp;

	if (!reg || reg->is_default)
		return;
	pthread_mutex_lock(&registries_lock);
	for (pp = &registries; *pp; pp = &(*pp)->next)
		if (*pp == reg) {
			*pp = reg->next;
			break;
		}
	pthread_mutex_unlock(&registries_lock);
	pthread_mutex_lock(&reg->lock);
	(void)pcpu__collect_wait_locked(reg); /* by contract none runs; be safe */
	for (ss = reg->structs; ss; ss = next) {
		next = ss->next;
		free(ss->fams);
		free(ss->series);
		free(ss);
	}
	reg->structs = NULL;
	while (reg->nfams)
		pcpu__family_destroy_locked(reg, reg->fams[reg->nfams - 1]);
	pthread_mutex_unlock(&reg->lock);
	free(reg->fams);
	pcpu__htab_free(&reg->names); /* its names went with the families */
	while (reg->gfams) {
		struct pcpu__gfamily *gf = reg->gfams;

		reg->gfams = gf->next;
		free(gf);
	}
	free_strings(reg->const_names, reg->nconst);
	free_strings(reg->const_values, reg->nconst);
	/* Struct objects and any storage not freed above go with the zone. */
	pcpu_zone_destroy(reg->zone);
	pcpu__reg_notify(reg, PCPU__REG_DESTROYED, NULL, NULL);
	pthread_cond_destroy(&reg->collect_cv);
	pthread_mutex_destroy(&reg->lock);
	free(reg);
}

