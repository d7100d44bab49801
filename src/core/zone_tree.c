/* SPDX-License-Identifier: MIT */
/*
 * Zones shared by a process tree (core.h says what they are for):
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

int pcpu__shared_mutex_init(pthread_mutex_t *m, int type)
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
	int err = pcpu__shared_mutex_init(&tree->lock, PTHREAD_MUTEX_RECURSIVE);

	if (err != 0) {
		errno = err;
		return -1;
	}
	tree->nchunks = 0;
	tree->frontier = 0;
	tree->deaths = 0;
	return 0;
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
