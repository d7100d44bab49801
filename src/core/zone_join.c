/* SPDX-License-Identifier: MIT */
/*
 * A zone joining a process tree it was not forked from (core.h,
 * pcpu__zone_join_tree): the zone of a shared registry that a program
 * exec()ed by one of the tree's processes -- a server's new binary, in a
 * binary upgrade -- makes one more writer of the tree's file.
 *
 * Why not pcpu__zone_attach_backing() then pcpu__zone_make_tree(): both
 * are for the tree's first process. Attaching starts the backing afresh --
 * it writes chunk 0's header, clearing its flags and mirror_delta -- and
 * making a tree sets the shared frontier from this zone's. In a live tree
 * chunk 0 holds every process's objects, and its header says that their
 * mirror words are in use (PCPU__CHUNK_MIRROR_USED, pcpu/zone.h): cleared
 * for an instant, fetches in the other processes would skip the mirrors
 * and read values that go back. So a joining zone maps the tree's chunk 0
 * over its own, as it is, header included, and takes the tree's shared
 * state as the tree's processes left it. Its private books start empty:
 * the objects it uses are the ones it adopts (pcpu__zone_tree_adopt), and
 * its allocations come from the shared frontier (zone.c), as in any
 * process of the tree. Chunks past 0 are mapped when first needed, as the
 * other processes map chunks they did not make.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "worker_internal.h"
#include "zone_chunk.h"

/* Back to private memory after a failed join: the zone stays as usable as
 * a new one (its chunk's header written again, in its own memory). */
static void back_to_private(pcpu_zone_t *zone, struct chunk *c)
{
	zone->backing = NULL;
	zone->backing_ctx = NULL;
	chunk_back_to_private(zone, c);
}

int pcpu__zone_join_tree(pcpu_zone_t *zone, const struct pcpu_zone_backing *backing, void *ctx,
			 struct pcpu_zone_tree *tree, void (*repair)(void *ctx), void *repair_ctx)
{
	struct pcpu__chunk_hdr hdr;
	struct chunk *c;
	void (*old_release)(void *);
	void *old_ctx;
	int err = 0;

	if (!zone || !backing || !backing->map || !backing->extent || !backing->read || !tree) {
		errno = EINVAL;
		return -1;
	}
	/* Owned slots are a process's own; tree memory is every process's. */
	if (pcpu__worker_block_claims() != 0)
		return -1;
	pthread_mutex_lock(&zone->lock);
	c = zone->chunks;
	if (zone->backing || zone->tree || !c || c->next || c->no != 0 ||
	    c->frontier != HDR_GRANULES) {
		/* Live objects (threads add to them by address), a backing,
		 * or chunks the tree's books do not know. */
		pthread_mutex_unlock(&zone->lock);
		errno = EBUSY;
		return -1;
	}
	/* The tree's chunk 0 must be one: read without mapping it (a hole of
	 * a shared mapping, read, would allocate a page of the file). */
	old_ctx = zone->backing_ctx; /* a backing a fork() child left, or NULL */
	old_release = zone->release;
	if (__atomic_load_n(&tree->nchunks, __ATOMIC_ACQUIRE) == 0 ||
	    backing->read(ctx, 0, 0, &hdr, sizeof hdr) != 0 || hdr.magic != PCPU__CHUNK_MAGIC) {
		pthread_mutex_unlock(&zone->lock);
		errno = EINVAL;
		return -1;
	}
	zone->backing = backing;
	zone->backing_ctx = ctx;
	if (map_shared_chunk(zone, 0, c->base) != 0) {
		err = errno;
		back_to_private(zone, c);
		zone->backing_ctx = old_ctx;
		pthread_mutex_unlock(&zone->lock);
		errno = err;
		return -1;
	}
	/* The tree's objects in it are not this process's until adopted;
	 * nothing reserved by this process yet (reserve_pages() reserves
	 * again from 0 what it first needs: the pages are the file's
	 * already, so that only maps them). */
	c->backed = 0;
	c->frontier = HDR_GRANULES;
	c->hint = HDR_GRANULES;
	c->holes = 0;
	memset(c->nofit, 0, sizeof(c->nofit));
	if (old_release)
		old_release(old_ctx);
	zone->release = backing->release;
	zone->tree_repair = repair;
	zone->tree_ctx = repair_ctx;
	zone->tree = tree;
	chunk_added(zone, c);
	pthread_mutex_unlock(&zone->lock);
	return 0;
}
