/* SPDX-License-Identifier: MIT */
/*
 * The zone allocator's own structures, shared by its three files only:
 * zone.c (zones, chunks, allocation, free), zone_shared.c (a shared
 * backing attached to a zone, and what fork() does to it) and zone_join.c
 * (a zone that takes over another process's shared chunks). The layers
 * above see zones through pcpu/zone.h, zone_internal.h, zone_mirror.h and
 * core.h, never through this header.
 */
#ifndef PCPU_ZONE_CHUNK_H
#define PCPU_ZONE_CHUNK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rseq_internal.h"
#include "core.h"
#include "zone_internal.h"
#include "zone_mirror.h"

#define GRANULE_SHIFT 3
#define GRANULE ((size_t)1 << GRANULE_SHIFT)
#define CHUNK_GRANULES (PCPU_SLOT_STRIDE >> GRANULE_SHIFT)
#define BITMAP_WORDS (CHUNK_GRANULES / 64)
#define BITMAP_BYTES (2 * BITMAP_WORDS * sizeof(uint64_t)) /* alloc + start */
#define HDR_GRANULES (PCPU__CHUNK_HDR_SIZE >> GRANULE_SHIFT)
#define PCPU__ALIGN_CLASSES 10 /* alignments of 8 .. 4096 bytes: 2^0 .. 2^9 granules */

struct chunk {
	char *base;       /* slot 0's region, STRIDE-aligned */
	uint64_t *alloc;  /* bit g: granule g is in use */
	uint64_t *start;  /* bit g: an object starts at granule g */
	size_t frontier;  /* granules below it have been handed out at least once */
	size_t holes;     /* free granules below the frontier */
	size_t hint;      /* no free granule below it */
	/* Failed hole searches since the last free: no hole of at least
	 * nofit[k] granules aligned to 2^k granules exists below the frontier
	 * (0: not known). Alignment gaps left by bump allocation count as
	 * holes yet fit no aligned request, so without this every aligned
	 * allocation would rescan all of them (quadratic). */
	size_t nofit[PCPU__ALIGN_CLASSES];
	size_t backed;    /* reserving backings: bytes of every region reserved */
	unsigned no;      /* 0 for the first chunk of the zone, then 1, 2... */
	char *fork_copy;  /* a shared chunk's copy for a fork() child (see top) */
	char *parent_view; /* in a fork() child's handlers: the parent's backing, read-only */
	struct chunk *next;
};

struct pcpu_zone {
	pthread_mutex_t lock;
	enum pcpu_index index;
	struct chunk *chunks; /* newest first: the bump chunk */
	struct pcpu_zone *next_zone;
	/* Shared backing (core.h; a statistics segment's file): every
	 * chunk is mapped by it, so another process can read it. NULL:
	 * private anonymous memory. A backing that reserves has its memory
	 * reserved under objects before they are handed out (see the top). */
	const struct pcpu_zone_backing *backing;
	void *backing_ctx;
	/* backing->release, kept when a fork() child leaves the backing:
	 * called with backing_ctx when the zone is destroyed. */
	void (*release)(void *ctx);
	/* A zone shared by a process tree (core.h, zone_tree.c):
	 * its shared state, and the backing's repair of its own. NULL: an
	 * ordinary zone. */
	struct pcpu_zone_tree *tree;
	void (*tree_repair)(void *ctx);
	void *tree_ctx;
};



/* Every zone, newest first, under pcpu__zones_lock (zone_shared.c). */
PCPU_HIDDEN extern pcpu_zone_t *pcpu__all_zones;
PCPU_HIDDEN extern pthread_mutex_t pcpu__zones_lock;
/* The lock of the table of chunks that pcpu_zone_find() searches (zone_shared.c). */
PCPU_HIDDEN extern pthread_mutex_t pcpu__zone_table_lock;

/* Registers the zone's fork() handlers, once (zone_shared.c); 0, or -1 with
 * errno. Called by pcpu_zone_create() before any lock of ours is taken. */
PCPU_HIDDEN int pcpu__zone_fork_register(void);

static inline size_t page_size(void)
{
	static size_t ps;

	if (!ps)
		ps = (size_t)sysconf(_SC_PAGESIZE);
	return ps;
}

/* A chunk: every slot's region, then every slot's mirror region. */
static inline size_t chunk_span(void)
{
	return (size_t)(2 * pcpu_slot_count) << PCPU_SLOT_STRIDE_SHIFT;
}

/* Writes a new chunk's header at `base` (the start of slot 0's region). */
static inline void chunk_header_init(char *base)
{
	struct pcpu__chunk_hdr *h = (struct pcpu__chunk_hdr *)base;

	h->magic = PCPU__CHUNK_MAGIC;
	h->flags = 0;
	h->mirror_delta = 0;
}

/* After a backing failed: chunk c's span mapped again as private, zeroed
 * memory, its header written again, so that the zone stays as usable as a
 * new one (a chunk left mapped to the backing without its pages reserved
 * could fault, SIGBUS, when written). If even that mmap() fails, the old
 * mapping stays. The caller detaches the backing. */
static inline void chunk_back_to_private(struct chunk *c)
{
	if (mmap(c->base, chunk_span(), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != MAP_FAILED) {
		pcpu__no_huge_pages(c->base, chunk_span());
		chunk_header_init(c->base);
	}
}

/* Reserved zones: has the backing reserve [c->backed, upto) of every
 * region of chunk c, slots and mirrors (upto: a page multiple). On failure
 * nothing more is reserved and the backing has handled the lack of space:
 * -1 with its errno. Under the zone's lock (or before the chunk is
 * visible). */
static inline int reserve_pages(pcpu_zone_t *zone, struct chunk *c, size_t upto)
{
	if (!zone->backing || !zone->backing->reserve || upto <= c->backed)
		return 0;
	if (zone->backing->reserve(zone->backing_ctx, c->no, c->base, chunk_span(), c->backed,
				   upto) != 0)
		return -1;
	c->backed = upto;
	return 0;
}

/* Replaces the chunk's private memory at `base` by the zone's backing. */
static inline int map_shared_chunk(pcpu_zone_t *zone, unsigned no, char *base)
{
	return zone->backing->map(zone->backing_ctx, no, base, chunk_span(), PCPU_ZONE_MAP_SHARED)
		       ? 0
		       : -1;
}

/* Tells the backing that chunk c is in use (mapped, header written). */
static inline void chunk_added(pcpu_zone_t *zone, struct chunk *c)
{
	if (zone->backing && zone->backing->chunk_added)
		zone->backing->chunk_added(zone->backing_ctx, c->no, c->base);
}

#endif /* PCPU_ZONE_CHUNK_H */
