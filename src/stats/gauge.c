/* SPDX-License-Identifier: MIT */
/*
 * Gauges: a counter, plus a set operation.
 *
 *     slot s:         [ adds ]     rseq adds of the threads on slot s
 *     mirror of s:    [ atomic ]   fallback adds; slot 0's also set()'s offsets
 *     value = the counter's value (sum of both rows)
 *
 * Why an offset rather than zeroing the slots: the slots are written by
 * their threads without atomics (rseq), so any store into them from the
 * setting thread could be overwritten by an add in flight and lost (DPDK's
 * statistics guide, "Reset"). set(v) instead reads the value S and adds
 * v - S, atomically, to slot 0's mirror word -- a word only atomic
 * read-modify-writes touch, so fallback adds landing there are kept too.
 *
 * Why setters take a lock: two sets that each read the value and then add
 * their offset would both apply: set(5) and set(7) at once could leave 12.
 * Serialising the read and the add makes each set's (read, add) pair atomic
 * with respect to the other sets; adders are never blocked. The lock is one
 * of 16 mutexes striped by address, so unrelated gauges rarely share one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include <pcpu/gauge.h>

#include "registry.h"
#include "../fork.h"
#include "../zone_mirror.h"

/* 16, not more: fork() takes them all at once (fork.c), and tools such as
 * ThreadSanitizer cap how many locks one thread may hold (64); sets are
 * rare enough that 16 stripes keep unrelated gauges apart. */
#define GAUGE_LOCKS 16

static pthread_mutex_t gauge_locks[GAUGE_LOCKS] = {
	[0 ... GAUGE_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER,
};

/* fork(): no set may be half-done in a child (fork.c). Registered by the
 * first set: before it, no gauge lock can be held. */
static int fork_registered;

static void gauge_locks_prepare(void)
{
	for (int i = 0; i < GAUGE_LOCKS; i++)
		pthread_mutex_lock(&gauge_locks[i]);
}

static void gauge_locks_release(void)
{
	for (int i = GAUGE_LOCKS - 1; i >= 0; i--)
		pthread_mutex_unlock(&gauge_locks[i]);
}

static pthread_mutex_t *gauge_lock(pcpu_gauge_t g)
{
	uintptr_t a = (uintptr_t)g >> 3; /* gauges are 8 bytes apart */
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
	(void)pcpu_fork_register(&fork_registered, PCPU_FORK_STATS, gauge_locks_prepare,
				 gauge_locks_release, gauge_locks_release);
	m = gauge_lock(g);
	pthread_mutex_lock(m);
	sum = pcpu_counter_fetch(&g->pcpu__adds);
	pcpu_mirror_mark(g); /* before the offset, so every later read sees it */
	__atomic_fetch_add(pcpu_mirror_word(g, 0), (int64_t)((uint64_t)v - sum), __ATOMIC_RELAXED);
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
	return (int64_t)sum;
}

pcpu_gauge_t pcpu_gauge_alloc_in(pcpu_zone_t *zone)
{
	if (!zone) {
		errno = EINVAL;
		return NULL;
	}
	return (pcpu_gauge_t)pcpu_zone_alloc(zone, sizeof(struct pcpu_gauge), sizeof(struct pcpu_gauge));
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
