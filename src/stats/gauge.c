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
 * of the library's 16 striped mutexes (src/core/striped_lock.c), so unrelated
 * gauges rarely share one; the set itself is a counter's
 * (pcpu__counter_set(), which resets use too). A shared tree's gauge is set
 * by several processes, where a process-local lock orders nothing: there
 * pcpu__counter_set() moves the offset by compare-and-swap (counter.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include <pcpu/gauge.h>

#include "metrics.h"
#include "../core/core.h"

int pcpu_gauge_set(pcpu_gauge_t g, int64_t v)
{
	if (!g) {
		errno = EINVAL;
		return -1;
	}
	(void)pcpu__counter_set(&g->pcpu__adds, (uint64_t)v);
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
