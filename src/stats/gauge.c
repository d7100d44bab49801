/* SPDX-License-Identifier: MIT */
/*
 * Gauges: a counter for the adds plus a base word that set() adjusts.
 *
 *     slot 0:  [ adds.rseq_sum | adds.atomic_sum | base | reserved ]
 *     slot i:  [ adds.rseq_sum | adds.atomic_sum |  --  |    --    ]
 *     value = fetch(adds) + base
 *
 * Why an offset rather than zeroing the slots: the slots are written by
 * their threads without atomics (rseq), so any store into them from the
 * setting thread could be overwritten by an add in flight and lost (DPDK's
 * statistics guide, "Reset"). set(v) instead reads the sum of the adds and
 * stores base = v - sum, a word no adder ever writes.
 *
 * Why setters take a lock: two concurrent sets that each read the sum and
 * then store their base would be fine, but a set that reads the sum, is
 * delayed, and stores its base after a later set completed would undo that
 * later set with a stale sum -- a value neither set asked for. Serialising
 * the read and the store makes each set's (read, store) pair atomic with
 * respect to the other sets; adders are never blocked. The lock is one of 64
 * mutexes striped by address, so unrelated gauges rarely share one.
 * A compare-and-swap on base would avoid the mutex but not the ABA case
 * above (a base value can recur), which a lock rules out simply.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include <pcpu/gauge.h>

#include "registry.h"

#define GAUGE_LOCKS 64

static pthread_mutex_t gauge_locks[GAUGE_LOCKS] = {
#define L1 PTHREAD_MUTEX_INITIALIZER
#define L8 L1, L1, L1, L1, L1, L1, L1, L1
	L8, L8, L8, L8, L8, L8, L8, L8
#undef L8
#undef L1
};

static pthread_mutex_t *gauge_lock(pcpu_gauge_t g)
{
	uintptr_t a = (uintptr_t)g >> 5; /* gauges are 32 bytes apart */
	return &gauge_locks[(a ^ (a >> 6) ^ (a >> 12)) % GAUGE_LOCKS];
}

int pcpu_gauge_set(pcpu_gauge_t g, int64_t v)
{
	pthread_mutex_t *m;
	uint64_t sum;

	if (!g) {
		errno = EINVAL;
		return -1;
	}
	m = gauge_lock(g);
	pthread_mutex_lock(m);
	sum = pcpu_counter_fetch(&g->pcpu__adds);
	__atomic_store_n(&g->pcpu__base, (int64_t)((uint64_t)v - sum), __ATOMIC_RELAXED);
	pthread_mutex_unlock(m);
	return 0;
}

int64_t pcpu_gauge_read(pcpu_gauge_t g)
{
	uint64_t sum;

	if (!g) {
		errno = EINVAL;
		return 0;
	}
	sum = pcpu_counter_fetch(&g->pcpu__adds);
	return (int64_t)(sum + (uint64_t)__atomic_load_n(&g->pcpu__base, __ATOMIC_RELAXED));
}

pcpu_gauge_t pcpu_gauge_alloc_in(pcpu_zone_t *zone)
{
	if (!zone) {
		errno = EINVAL;
		return NULL;
	}
	return (pcpu_gauge_t)pcpu_zone_alloc(zone, sizeof(struct pcpu_gauge), 16);
}

pcpu_gauge_t pcpu_gauge_alloc(void)
{
	pcpu_zone_t *z = pcpu__stats_zone();

	return z ? pcpu_gauge_alloc_in(z) : NULL;
}

int pcpu_gauge_free(pcpu_gauge_t g)
{
	if (!g)
		return 0;
	return pcpu_zone_free(pcpu_zone_of(g), g);
}
