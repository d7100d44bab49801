/* SPDX-License-Identifier: MIT */
/*
 * Zones shared by a process tree (zone_backing.h says what they are for):
 * one bump frontier and one robust lock in shared memory, chunks that any
 * process makes and the others map when they need them.
 *
 * Why a bump frontier and not the books of zone.c: those books (two
 * bitmaps and a few counters per chunk) are private memory, and making them
 * shared would only serve frees, which a tree zone cannot allow anyway -- a
 * process cannot know that no other process holds an object. So a tree
 * zone hands out never-used granules only, in chunk order: the frontier
 * (chunk, granule) under the lock is the whole allocator. Each process
 * still marks the objects it knows (its own and those it adopted) in its
 * private books, so that pcpu_zone_object_size() and the debug checks of
 * debug builds work on them.
 *
 * Robustness: a process killed at any instant while holding the lock
 * leaves the lock to the next taker (EOWNERDEAD). The frontier is bumped
 * before the object is handed out, and a chunk counted only once its
 * header is written: a death leaks at most the object being allocated, and
 * never hands one out twice. The backing's own state (the segment's
 * directory) is repaired by its callback before the taker goes on.
 */
#include <errno.h>
#include <string.h>

#include "rseq_internal.h"
#include "worker_internal.h"
#include "zone_chunk.h"

/* A process-shared robust mutex of type `type` at m. 0, or an error number. */
static int robust_init(pthread_mutex_t *m, int type)
{
	pthread_mutexattr_t a;
	int err;

	if ((err = pthread_mutexattr_init(&a)) != 0)
		return err;
	if ((err = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED)) == 0 &&
	    (err = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST)) == 0 &&
	    (err = pthread_mutexattr_settype(&a, type)) == 0)
		err = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return err;
}

int pcpu__zone_tree_init(struct pcpu_zone_tree *tree)
{
	unsigned k;
	int err;

	if ((err = robust_init(&tree->lock, PTHREAD_MUTEX_RECURSIVE)) != 0)
		goto fail;
	for (k = 0; k < PCPU__ZONE_TREE_LANES; k++)
		if ((err = robust_init(&tree->lanes[k], PTHREAD_MUTEX_ERRORCHECK)) != 0)
			goto fail;
	tree->nchunks = 0;
	tree->frontier = 0;
	tree->deaths = 0;
	tree->nlanes = 0; /* pcpu__zone_make_tree() */
	tree->lane_deaths = 0;
	return 0;
fail:
	errno = err;
	return -1;
}

/* How many lane locks: two per online CPU (so that a holder preempted on
 * its CPU leaves a free lane to that CPU's next writer), at least two, at
 * most PCPU__ZONE_TREE_LANES and the CPU slots there are (lane k is slot
 * k's copy; the owned slots after them, pcpu/worker.h, are not the tree's:
 * their file pages are not reserved). Fixed at set-up: a CPU brought
 * online later shares lanes. */
static uint32_t lanes_for(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t n = cpus > 0 ? 2 * (size_t)cpus : 2;

	if (n > PCPU__ZONE_TREE_LANES)
		n = PCPU__ZONE_TREE_LANES;
	if (n > pcpu_cpu_slot_count)
		n = pcpu_cpu_slot_count;
	return (uint32_t)(n ? n : 1);
}

int pcpu__zone_make_tree(pcpu_zone_t *zone, struct pcpu_zone_tree *tree, void (*repair)(void *ctx),
			 void *ctx)
{
	struct chunk *c;
	int rc = 0;

	if (!zone || !tree) {
		errno = EINVAL;
		return -1;
	}
	/* Owned slots are a process's own; tree memory is every process's. */
	if (pcpu__worker_block_claims() != 0)
		return -1;
	pthread_mutex_lock(&zone->lock);
	if (!zone->backing) {
		errno = EINVAL;
		rc = -1;
	} else if (zone->tree || zone->chunks->next || zone->chunks->frontier != HDR_GRANULES) {
		errno = EBUSY; /* objects, or chunks, that the tree's books do not know */
		rc = -1;
	} else {
		c = zone->chunks;
		tree->nchunks = 1; /* the zone's first chunk is the tree's chunk 0 */
		tree->frontier = c->frontier;
		tree->nlanes = lanes_for();
		zone->tree_repair = repair;
		zone->tree_ctx = ctx;
		zone->tree = tree;
	}
	pthread_mutex_unlock(&zone->lock);
	return rc;
}

int pcpu__zone_is_tree(const pcpu_zone_t *zone)
{
	return zone && zone->tree;
}

int pcpu__zone_tree_lock(pcpu_zone_t *zone)
{
	int err;

	if (!zone || !zone->tree)
		return 0;
	err = pthread_mutex_lock(&zone->tree->lock);
	if (err == EOWNERDEAD) {
		/* Its holder died: the zone's state is consistent by
		 * construction (see the top); the backing's is repaired. */
		__atomic_add_fetch(&zone->tree->deaths, 1, __ATOMIC_RELAXED);
		if (zone->tree_repair)
			zone->tree_repair(zone->tree_ctx);
		err = pthread_mutex_consistent(&zone->tree->lock);
	}
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

void pcpu__zone_tree_unlock(pcpu_zone_t *zone)
{
	if (zone && zone->tree)
		pthread_mutex_unlock(&zone->tree->lock);
}

/* ---- lane locks ---- */

unsigned pcpu__zone_tree_lanes(const pcpu_zone_t *zone)
{
	return zone && zone->tree ? zone->tree->nlanes : 0;
}

/* What a lock call said: 0 held, else an error number. A dead holder's
 * lock is ours now; what it guarded is repaired by the caller (the lane's
 * own undo copy, src/stats/group.c), so here it is only made usable. */
static int lane_took(struct pcpu_zone_tree *t, pthread_mutex_t *m, int err)
{
	if (err == EOWNERDEAD) {
		__atomic_add_fetch(&t->lane_deaths, 1, __ATOMIC_RELAXED);
		err = pthread_mutex_consistent(m);
		if (err != 0)
			pthread_mutex_unlock(m);
	}
	return err;
}

int pcpu__zone_tree_lane_trylock(pcpu_zone_t *zone, unsigned k)
{
	struct pcpu_zone_tree *t = zone ? zone->tree : NULL;
	int err;

	if (!t || k >= t->nlanes) {
		errno = EINVAL;
		return -1;
	}
	err = lane_took(t, &t->lanes[k], pthread_mutex_trylock(&t->lanes[k]));
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

int pcpu__zone_tree_lane_lock(pcpu_zone_t *zone, unsigned hint)
{
	struct pcpu_zone_tree *t = zone ? zone->tree : NULL;
	unsigned n, k, i;
	int err = EINVAL;

	if (!t || !(n = t->nlanes)) {
		errno = EINVAL;
		return -1;
	}
	hint %= n;
	/* A free lane first: its holder preempted, a writer goes elsewhere,
	 * as rseq writers do (any lane will do: readers sum them all). */
	for (i = 0; i < n; i++) {
		k = (hint + i) % n;
		if (lane_took(t, &t->lanes[k], pthread_mutex_trylock(&t->lanes[k])) == 0)
			return (int)k;
	}
	/* Every lane held: wait for one. EDEADLK: this thread holds it (a
	 * signal handler that interrupted an update); another lane then. */
	for (i = 0; i < n; i++) {
		k = (hint + i) % n;
		err = lane_took(t, &t->lanes[k], pthread_mutex_lock(&t->lanes[k]));
		if (err == 0)
			return (int)k;
		if (err != EDEADLK)
			break;
	}
	errno = err;
	return -1;
}

void pcpu__zone_tree_lane_unlock(pcpu_zone_t *zone, unsigned k)
{
	pthread_mutex_unlock(&zone->tree->lanes[k]);
}
