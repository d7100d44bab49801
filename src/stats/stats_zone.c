/* SPDX-License-Identifier: MIT */
/*
 * The zone that standalone gauges, histograms and groups live in when the
 * caller names none (pcpu_gauge_alloc(), pcpu_histogram_create(),
 * pcpu_group_alloc()).
 *
 * Why a zone of its own rather than the core's default counter zone: the
 * core does not export its default zone, and keeping the statistics objects
 * apart keeps their pages apart from plain counters' (a registry has its
 * own zone for the same reason: one zone per set of statistics that a
 * reader will map and walk as a whole). Created on first use; a failed
 * creation is retried by the next call rather than remembered, so a
 * transient ENOMEM is not permanent. Never destroyed: objects in it may be
 * used until the process exits.
 */
#include <errno.h>
#include <pthread.h>

#include <pcpu/zone.h>

#include "metrics.h"
#include "../core/core.h"

static pthread_mutex_t stats_zone_lock = PTHREAD_MUTEX_INITIALIZER;
static pcpu_zone_t *stats_zone;
static int fork_registered;

/* fork(): the lock is held while the zone is installed (fork.c). */
static void stats_zone_prepare(void)
{
	pthread_mutex_lock(&stats_zone_lock);
}

static void stats_zone_release(void)
{
	pthread_mutex_unlock(&stats_zone_lock);
}

pcpu_zone_t *pcpu__stats_zone(void)
{
	pcpu_zone_t *z = __atomic_load_n(&stats_zone, __ATOMIC_ACQUIRE), *mine;

	if (z)
		return z;
	(void)pcpu__fork_register(&fork_registered, PCPU_FORK_STATS, stats_zone_prepare,
				 stats_zone_release, stats_zone_release);
	/* Created outside the lock: the first zone of the process registers
	 * the zone layer's fork handlers, which waits for a fork() in
	 * progress, whose prepare waits for this lock (fork.c: never register
	 * while holding a pcpu lock). A thread that loses the race destroys
	 * its zone. */
	mine = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	if (!mine) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&stats_zone_lock);
	z = stats_zone;
	if (!z) {
		z = mine;
		mine = NULL;
		__atomic_store_n(&stats_zone, z, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&stats_zone_lock);
	if (mine)
		pcpu_zone_destroy(mine);
	return z;
}
