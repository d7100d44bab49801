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
#include "slot_walk.h"
#include "worker_internal.h"
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
	/* Strict commit accounting (below, "Commit"): bytes [0, window) of
	 * every writable region are writable, the rest of the chunk read-only;
	 * bits_window bytes of each bitmap likewise. 0 where not windowed. */
	size_t window;
	size_t bits_window;
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

/* Installs the owned slots' hook (zone_shared.c: an owned slot's first
 * claim reserves or opens its region in every zone that needs it). Called
 * before any lock of ours is taken. */
PCPU_HIDDEN void pcpu__zone_owned_hook_install(void);

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

/*
 * Commit. With vm.overcommit_memory=2 ("never overcommit") the kernel
 * charges commit for every writable private mapping when it is made
 * writable, MAP_NORESERVE or not: a chunk's span (2 x 256 regions of 32 MiB
 * at 256 possible CPUs: 16 GiB) could never be mapped, and pcpu failed with
 * ENOMEM from its first counter on. So where pcpu_commit_strict
 * (slot_walk.c: that mode, or PCPU_COMMIT=strict), a private zone's chunk
 * and its bitmaps are mapped read-only -- untouched memory reads as zeros,
 * and read-only private memory is charged nothing -- and made writable only
 * where pcpu writes: [0, window) of the region and the mirror of every
 * slot that has memory (pcpu__slot_needs_memory(): the walked CPU slots,
 * the claimed owned slots; not the owned slots' mirrors, which no one
 * writes), the window following the chunk's frontier by steps of 64 KiB or
 * an eighth of the window, whichever is more. Commit then follows what the
 * zone holds times the slots that can write it. The price: the regions of
 * possible CPUs that are not present are read-only, so a thread on a CPU
 * hot-added after start-up faults (SIGSEGV) at its first write -- the
 * documented limit of every per-CPU object (PCPU_SLOT_WALK=all makes every
 * CPU slot writable, and charges for them all). A backed zone's chunks are
 * its backing's shared mappings, charged page by page as the backing
 * reserves them: not windowed (their bitmaps, private memory, are).
 */
static inline int chunk_windowed(const pcpu_zone_t *zone)
{
	return pcpu_commit_strict && !zone->backing;
}

/* The protection a new private mapping of a chunk (or its bitmaps) starts
 * with: writable, unless windowed (then what open_window() opens). */
static inline int chunk_initial_prot(void)
{
	return pcpu_commit_strict ? PROT_READ : PROT_READ | PROT_WRITE;
}

/* Whether region r (of 2 * nslots) is written by anyone: a slot's region
 * or a CPU slot's mirror, of a slot that has memory. */
static inline int region_writable(uint32_t r)
{
	if (r >= pcpu_slot_count) {
		r -= pcpu_slot_count;
		if (r >= pcpu_cpu_slot_count)
			return 0; /* an owned slot's mirror: never written */
	}
	return pcpu__slot_needs_memory(r);
}

/* Bytes of each bitmap that describe [0, bytes) of slot 0's region. */
static inline size_t bits_for(size_t bytes)
{
	size_t words = ((bytes >> GRANULE_SHIFT) + 63) / 64;
	size_t ps = page_size();

	return (words * sizeof(uint64_t) + ps - 1) & ~(ps - 1);
}

/* mprotect()s [from, to) of region r of the chunk mapped at `base`
 * writable. */
static inline int region_open(char *base, uint32_t r, size_t from, size_t to)
{
	if (to <= from)
		return 0;
	return mprotect(base + ((size_t)r << PCPU_SLOT_STRIDE_SHIFT) + from, to - from,
			PROT_READ | PROT_WRITE);
}

/* [from, to) of every writable region of the chunk mapped at `base` (a
 * chunk, or a fork() child's private copy of one) made writable. 0, or -1
 * with errno ENOMEM. */
static inline int regions_open(char *base, size_t from, size_t to)
{
	for (uint32_t r = 0; r < 2 * pcpu_slot_count; r++)
		if (region_writable(r) && region_open(base, r, from, to) != 0)
			return -1;
	return 0;
}

/* Under strict commit accounting: makes the bitmaps' bits for [0, upto)
 * of slot 0's region (and a step more) writable, and in a windowed chunk
 * that much of every writable region. 0, or -1 with errno ENOMEM (the
 * commit limit: nothing handed out; what was opened before the failure
 * stays open, and the next call opens the rest). Under the zone's lock (or
 * before the chunk is visible). Otherwise 0 at once. */
static inline int open_window(pcpu_zone_t *zone, struct chunk *c, size_t upto)
{
	size_t step = c->window / 8 > ((size_t)64 << 10) ? c->window / 8 : (size_t)64 << 10;
	size_t w, bits, ps = page_size();

	if (!pcpu_commit_strict || upto <= c->window)
		return 0;
	step = (step + ps - 1) & ~(ps - 1);
	w = (upto + step - 1) / step * step;
	if (w > PCPU_SLOT_STRIDE)
		w = PCPU_SLOT_STRIDE;
	bits = bits_for(w);
	if (bits > c->bits_window) {
		if (mprotect((char *)c->alloc + c->bits_window, bits - c->bits_window,
			     PROT_READ | PROT_WRITE) != 0 ||
		    mprotect((char *)c->start + c->bits_window, bits - c->bits_window,
			     PROT_READ | PROT_WRITE) != 0)
			return -1;
		c->bits_window = bits;
	}
	if (chunk_windowed(zone) && regions_open(c->base, c->window, w) != 0)
		return -1;
	c->window = w;
	return 0;
}

/* An owned slot's first claim (zone_shared.c's hook): its region opened
 * over the window of a windowed chunk. 0, or -1 with errno ENOMEM. */
static inline int open_region_window(pcpu_zone_t *zone, struct chunk *c, uint32_t slot)
{
	if (!chunk_windowed(zone) || !c->window)
		return 0;
	return region_open(c->base, slot, 0, c->window);
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
 * mapping stays. The caller detaches the backing first (so that a
 * windowed chunk's window is opened again, over what the zone holds). */
static inline void chunk_back_to_private(pcpu_zone_t *zone, struct chunk *c)
{
	if (mmap(c->base, chunk_span(), chunk_initial_prot(),
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != MAP_FAILED) {
		pcpu__no_huge_pages(c->base, chunk_span());
		c->window = 0;
		if (open_window(zone, c, ((c->frontier << GRANULE_SHIFT) > page_size()
						  ? c->frontier << GRANULE_SHIFT : page_size())) == 0)
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
