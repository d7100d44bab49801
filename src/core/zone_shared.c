/* SPDX-License-Identifier: MIT */
/*
 * zone_shared.c: a zone whose memory another process can read -- a backing
 * attached to it (pcpu__zone_attach_backing()) -- and the zone's fork()
 * handlers (every zone's locks taken; a child leaves shared backings), with
 * the list of zones and the locks they take. The allocator itself is zone.c,
 * which uses this file; this file uses only zone_chunk.h's inline helpers.
 *
 * Shared zones (core.h): a layer above (the statistics segment,
 * src/segment/backing.c) may attach a backing to a zone with no live
 * object; the backing then maps every chunk, and the zone asks it where
 * data lies (a sparse file: frees and fork() skip holes) and how to read
 * without allocating. A backing that reserves is asked, before an object
 * is handed out, to make the memory under it safe to write in every
 * region a thread can write, slots and mirrors alike, so that no add, fallback add, reset or
 * gauge set can fault for lack of space (a full tmpfs answers a write
 * fault with SIGBUS). Each chunk keeps `backed`, the bytes of every region
 * so reserved; bump allocation past it reserves the next pages first (or
 * fails with the backing's errno, nothing handed out; what else happens
 * when there is no space is the backing's business). Freed objects in such
 * a zone are zeroed without giving pages back, so memory below `backed`
 * stays reserved for reuse. The price: every page of slot 0 holding
 * objects costs a page in the region and the mirror of every slot a thread
 * can write (the backing's choice: src/segment/backing.c, region_needed()).
 *
 * fork() and shared zones: a shared zone (a published segment's file) is
 * MAP_SHARED, so after fork() parent and child would add to the same words
 * -- and two processes' threads can hold the same CPU number or mm_cid at
 * once, so their unlocked rseq adds would lose updates. The child leaves
 * the backing instead: while prepare holds every zone lock (no chunk appears
 * or changes hands), each chunk of each shared zone is copied, word by word
 * with 8-byte atomic loads (a word is never torn; torn64.h) and only over the backing's data
 * extents (backing->extent(): holes stay untouched), into private
 * anonymous memory; in the child that copy is moved over the chunk's
 * address with mremap(MREMAP_FIXED), so every handle stays valid, and the
 * zone becomes private; in the parent it is unmapped. The child thus starts
 * from the parent's values as the copy read them, during fork(): an add
 * that completed before fork() was called is in both; one concurrent with
 * fork() is in the parent and may or may not be in the child's copy; one
 * after fork() returned is only in the process that made it.
 */
#include "core.h"
#include "torn64.h"
#include "worker_internal.h"
#include "zone_chunk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- every zone, and the locks fork() takes ------------------------------ */

/* Defined here, below the allocator (zone.c uses them, this file never calls
 * zone.c): the fork handlers take them. */
pcpu_zone_t *pcpu__all_zones;
pthread_mutex_t pcpu__zones_lock = PTHREAD_MUTEX_INITIALIZER;
/* A mutex, not a rwlock: glibc's rwlock remembers the writer's tid, which a
 * fork() child's thread does not have, so the child could not release it. */
pthread_mutex_t pcpu__zone_table_lock = PTHREAD_MUTEX_INITIALIZER;

/* Marks a new mapping as not to be backed by transparent huge pages (see
 * the top): its pages are written sparsely. Advice only: a kernel built
 * without THP refuses it (EINVAL), and then there is nothing to avoid. */
void pcpu__no_huge_pages(void *p, size_t len)
{
	int saved_errno = errno;

	(void)madvise(p, len, MADV_NOHUGEPAGE);
	errno = saved_errno;
}

/* ---- fork: take every lock; a child leaves shared backings -------------- */

/* dst[i] = src[i] over len bytes, an 8-byte load per word (an adder may be
 * writing it: a plain memcpy could tear it; pcpu__load_u64() is one
 * single-copy atomic load, torn64.h), storing only non-zero words so zero pages
 * of the copy are never touched. */
static void copy_words(char *dst, const char *src, size_t len)
{
	const int64_t *s = (const int64_t *)src;
	int64_t *d = (int64_t *)dst;
	size_t i;

	for (i = 0; i < len / 8; i++) {
		int64_t v = (int64_t)pcpu__load_u64(&s[i]);

		if (v)
			d[i] = v;
	}
}

/* The bytes of each region that a windowed private copy of chunk c makes
 * writable: its objects' (the frontier's), at least a page. */
static size_t copy_window(const struct chunk *c)
{
	size_t w = c->frontier << GRANULE_SHIFT, ps = page_size();

	return w < ps ? ps : (w + ps - 1) & ~(ps - 1);
}

/* Private copy of a shared chunk: fresh anonymous memory holding the data
 * extents of the chunk's backing (holes stay untouched). Under strict
 * commit accounting, only what lies in writable regions below the
 * objects' frontier (copy_window()) is copied -- nothing else is ever
 * written, by this process or a reserving backing's -- and only that is
 * writable. NULL if out of memory. */
static char *copy_shared_chunk(const pcpu_zone_t *z, const struct chunk *c)
{
	size_t span = chunk_span(), off, d, h, w = copy_window(c);
	char *copy = mmap(NULL, span, chunk_initial_prot(),
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (copy == MAP_FAILED)
		return NULL;
	pcpu__no_huge_pages(copy, span); /* moved over the chunk in the child */
	if (pcpu_commit_strict && regions_open(copy, 0, w) != 0) {
		munmap(copy, span);
		return NULL;
	}
	for (off = 0; off < span; off = h) {
		int r = z->backing->extent(z->backing_ctx, c->no, off, span, &d, &h);

		if (r == 0)
			break; /* no data after off */
		if (r < 0) {
			d = off; /* cannot tell where data is: copy all of it */
			h = span;
		}
		if (d >= span)
			break;
		if (h > span)
			h = span;
		if (!pcpu_commit_strict) {
			copy_words(copy + d, c->base + d, h - d);
			continue;
		}
		/* Region by region, the writable part of each. */
		while (d < h) {
			uint32_t r = (uint32_t)(d >> PCPU_SLOT_STRIDE_SHIFT);
			size_t rbase = (size_t)r << PCPU_SLOT_STRIDE_SHIFT, in = d - rbase;
			size_t end = h < rbase + PCPU_SLOT_STRIDE ? h : rbase + PCPU_SLOT_STRIDE;

			if (region_writable(r) && in < w)
				copy_words(copy + d, c->base + d, (end < rbase + w ? end : rbase + w) - d);
			d = end;
		}
	}
	return copy;
}

static void zone_fork_prepare(void)
{
	int saved_errno = errno;
	pcpu_zone_t *z;
	struct chunk *c;

	pthread_mutex_lock(&pcpu__zones_lock);
	for (z = pcpu__all_zones; z; z = z->next_zone)
		pthread_mutex_lock(&z->lock);
	pthread_mutex_lock(&pcpu__zone_table_lock);
	for (z = pcpu__all_zones; z; z = z->next_zone)
		if (z->backing && !z->tree) /* a tree zone stays shared */
			for (c = z->chunks; c; c = c->next)
				c->fork_copy = copy_shared_chunk(z, c);
	errno = saved_errno;
}

static void zone_fork_unlock(void)
{
	pcpu_zone_t *z;

	pthread_mutex_unlock(&pcpu__zone_table_lock);
	for (z = pcpu__all_zones; z; z = z->next_zone)
		pthread_mutex_unlock(&z->lock);
	pthread_mutex_unlock(&pcpu__zones_lock);
}

static void zone_fork_parent(void)
{
	int saved_errno = errno;
	pcpu_zone_t *z;
	struct chunk *c;

	for (z = pcpu__all_zones; z; z = z->next_zone)
		for (c = z->chunks; c; c = c->next)
			if (c->fork_copy) {
				munmap(c->fork_copy, chunk_span());
				c->fork_copy = NULL;
			}
	zone_fork_unlock();
	errno = saved_errno;
}

/* The child's only thread, before any code of the program runs in it. */
static void zone_fork_child(void)
{
	int saved_errno = errno;
	size_t span = chunk_span();
	pcpu_zone_t *z;
	struct chunk *c;

	for (z = pcpu__all_zones; z; z = z->next_zone) {
		if (!z->backing || z->tree) /* a tree zone stays shared */
			continue;
		for (c = z->chunks; c; c = c->next) {
			char *copy = c->fork_copy;

			/* The parent's live values, for the higher layers'
			 * child handlers (pcpu__zone_fork_parent_view()). */
			c->parent_view = z->backing->map(z->backing_ctx, c->no, NULL, span,
							 PCPU_ZONE_MAP_VIEW);
			c->fork_copy = NULL;
			if (!copy) /* prepare had no memory: copy now */
				copy = copy_shared_chunk(z, c);
			/* Windowed from now on (private): its window opened
			 * again, from 0, by the next allocation (the copy is
			 * writable over its objects already). */
			c->window = 0;
			if (copy && mremap(copy, span, span, MREMAP_MAYMOVE | MREMAP_FIXED,
					   c->base) != MAP_FAILED)
				continue;
			if (copy)
				munmap(copy, span);
			/* Last resort, out of memory: a private mapping of the
			 * backing (read-only, zone_backing.h), made writable
			 * where the child writes -- all of it, MAP_NORESERVE,
			 * or under strict commit accounting only the window.
			 * The child's writes stay its own (the parent's words
			 * are never written), but pages it has not written yet
			 * show the parent's later adds. */
			if (z->backing->map(z->backing_ctx, c->no, c->base, span,
					    PCPU_ZONE_MAP_PRIVATE)) {
				if (!pcpu_commit_strict)
					(void)mprotect(c->base, span, PROT_READ | PROT_WRITE);
				else
					(void)regions_open(c->base, 0, copy_window(c));
			}
		}
		/* Private from now on; the backing is the segment's, which
		 * leaves it in its own child handler (z->release stays, for
		 * pcpu_zone_destroy()). */
		z->backing = NULL;
	}
	zone_fork_unlock();
	errno = saved_errno;
}

/* The fork's last child handler (rank PCPU_FORK_LATE): the higher layers
 * are done with the parent's views. */
static void zone_fork_child_late(void)
{
	int saved_errno = errno;
	pcpu_zone_t *z;
	struct chunk *c;

	for (z = pcpu__all_zones; z; z = z->next_zone)
		for (c = z->chunks; c; c = c->next)
			if (c->parent_view) {
				munmap(c->parent_view, chunk_span());
				c->parent_view = NULL;
			}
	errno = saved_errno;
}

const void *pcpu__zone_fork_parent_view(const void *obj)
{
	uintptr_t a = (uintptr_t)obj;
	const void *view = NULL;
	pcpu_zone_t *z;
	struct chunk *c;

	/* A walk, not pcpu_zone_find()'s table: only fork() children's
	 * handlers ask, and this file stays below zone.c. */
	pthread_mutex_lock(&pcpu__zones_lock);
	for (z = pcpu__all_zones; z; z = z->next_zone)
		for (c = z->chunks; c; c = c->next)
			if (a - (uintptr_t)c->base < PCPU_SLOT_STRIDE)
				view = c->parent_view ? c->parent_view + (a - (uintptr_t)c->base)
						      : NULL;
	pthread_mutex_unlock(&pcpu__zones_lock);
	return view;
}

static int fork_registered, fork_late_registered;

int pcpu__zone_fork_register(void)
{
	/* Not at load time: only processes that use pcpu pay. */
	if (pcpu__fork_register(&fork_registered, PCPU_FORK_ZONE, zone_fork_prepare,
			       zone_fork_parent, zone_fork_child) != 0 ||
	    pcpu__fork_register(&fork_late_registered, PCPU_FORK_LATE, NULL, NULL,
			       zone_fork_child_late) != 0)
		return -1;
	return 0;
}

/* Whether any object of the zone is live: a chunk with fewer holes than
 * granules handed out. Under the zone's lock. */
static int zone_has_objects(const pcpu_zone_t *zone)
{
	const struct chunk *c;

	for (c = zone->chunks; c; c = c->next)
		if (c->frontier - HDR_GRANULES != c->holes)
			return 1;
	return 0;
}

/* The owned slots' hook (worker_internal.h): reserves region `slot` under
 * every object of every zone with a reserving backing, and opens it over
 * the window of every windowed chunk (zone_chunk.h, "Commit"), before the
 * slot's first claim. Lock order: the claims' lock (held), the zones'
 * list, a zone. */
static int reserve_owned_slot(uint32_t slot)
{
	pcpu_zone_t *z;
	struct chunk *c;
	int rc = 0;

	pthread_mutex_lock(&pcpu__zones_lock);
	for (z = pcpu__all_zones; z && rc == 0; z = z->next_zone) {
		pthread_mutex_lock(&z->lock);
		for (c = z->chunks; c && rc == 0 && chunk_windowed(z); c = c->next)
			rc = open_region_window(z, c, slot);
		if (z->backing && z->backing->reserve && z->backing->reserve_region)
			for (c = z->chunks; c && rc == 0; c = c->next)
				if (c->backed) /* the slot's region and its mirror */
					rc = z->backing->reserve_region(z->backing_ctx, c->no, c->base,
									slot, c->backed) ||
					     z->backing->reserve_region(z->backing_ctx, c->no, c->base,
									pcpu_slot_count + slot, c->backed);
		pthread_mutex_unlock(&z->lock);
	}
	pthread_mutex_unlock(&pcpu__zones_lock);
	return rc;
}

void pcpu__zone_owned_hook_install(void)
{
	pcpu__worker_set_reserve_hook(reserve_owned_slot);
}

int pcpu__zone_attach_backing(pcpu_zone_t *zone, const struct pcpu_zone_backing *backing,
			       void *ctx)
{
	struct chunk *c;
	void *old_ctx;
	int rc = 0;

	if (!zone || !backing || !backing->map || !backing->extent || !backing->read) {
		errno = EINVAL;
		return -1;
	}
	/* Before the zone's lock: the hook is installed under the claims'
	 * lock, which is taken before any zone's. */
	if (backing->reserve && backing->reserve_region)
		pcpu__worker_set_reserve_hook(reserve_owned_slot);
	pthread_mutex_lock(&zone->lock);
	if (zone->backing || zone_has_objects(zone)) {
		/* Live objects cannot move into the backing: threads hold
		 * pointers to them and add to them without any lock. */
		pthread_mutex_unlock(&zone->lock);
		errno = EBUSY;
		return -1;
	}
	old_ctx = zone->backing_ctx; /* a backing a fork() child left, or NULL */
	zone->backing = backing;
	zone->backing_ctx = ctx;
	for (c = zone->chunks; c && rc == 0; c = c->next) {
		struct pcpu__chunk_hdr hdr = *(struct pcpu__chunk_hdr *)c->base;

		c->backed = 0;
		rc = map_shared_chunk(zone, c->no, c->base);
		if (rc == 0)
			rc = reserve_pages(zone, c, page_size()); /* before the header is written */
		if (rc == 0) {
			/* Nothing live: start afresh, with the backing's zeros. */
			hdr.flags = 0;
			hdr.mirror_delta = 0;
			*(struct pcpu__chunk_hdr *)c->base = hdr;
			memset(c->alloc, 0, (c->frontier + 63) / 64 * sizeof(uint64_t));
			memset(c->start, 0, (c->frontier + 63) / 64 * sizeof(uint64_t));
			c->frontier = HDR_GRANULES;
			c->hint = HDR_GRANULES;
			c->holes = 0;
			memset(c->nofit, 0, sizeof(c->nofit));
			chunk_added(zone, c);
		}
	}
	if (rc != 0) {
		/* Back to private memory, so that the zone stays usable. */
		int err = errno;

		zone->backing = NULL;
		for (c = zone->chunks; c; c = c->next)
			chunk_back_to_private(zone, c);
		zone->backing_ctx = old_ctx;
		errno = err;
	} else {
		/* A backing a fork() child left before (pcpu_zone_destroy()
		 * would have released it): released now, its place taken. */
		if (zone->release)
			zone->release(old_ctx);
		zone->release = backing->release;
	}
	pthread_mutex_unlock(&zone->lock);
	return rc;
}
