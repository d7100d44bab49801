/* SPDX-License-Identifier: MIT */
/*
 * zone.c: the per-CPU zone allocator (FreeBSD's UMA_ZONE_PCPU, user space).
 *
 * Memory: a zone is a list of chunks. A chunk is one anonymous mapping of
 * 2 * nslots * PCPU_SLOT_STRIDE bytes, aligned to PCPU_SLOT_STRIDE, reserved
 * with MAP_NORESERVE and never touched by the allocator except for the chunk
 * header at the start of slot 0's region:
 *
 *   base                   base + STRIDE          base + nslots*STRIDE
 *   | hdr | a | b | c ... | | --- | a | b | c ... | ... | --- | a | b | c ... | ...
 *   '---- slot 0 ---------' '---- slot 1 ---------'     '---- mirror of 0 ---'
 *
 * Bookkeeping covers slot 0 only: an object is a range of 8-byte granules
 * of slot 0's region, and the same range in every other region (slots and
 * mirrors) is implied. Because all regions are at the same distance,
 * object + slot * STRIDE is that slot's copy, and because the chunk is
 * STRIDE-aligned, masking an object's address finds the chunk header.
 *
 * Bookkeeping (UMA's slab bitmaps, per chunk rather than per slab): two
 * bitmaps with a bit per granule, `alloc` (granule in use) and `start` (an
 * object begins here). An object is its start granule and the allocated
 * granules after it up to the next start or free granule, so nothing is
 * kept per object: a quarter byte per 8-byte counter. The bitmaps are one
 * MAP_NORESERVE mapping per chunk, resident only where objects are.
 * A free is accepted only for a granule whose start bit is set: a double
 * free, a foreign pointer, a pointer inside an object or into memory never
 * allocated is refused with EINVAL, nothing changed.
 *
 * Allocation: a chunk hands out granules below its `frontier` (bump
 * allocation into never-used space); freed granules below the frontier are
 * holes, counted in `holes` and found again by scanning `alloc | start`
 * from `hint`, the lowest granule that may be free (address-ordered first
 * fit, so reuse stays compact). A chunk whose holes cannot fit the request
 * is skipped without a scan. A chunk is never returned to the system before
 * the zone is destroyed (objects never move).
 *
 * Zeroing: new bump space is zero already (never touched). A freed object is
 * zeroed at free time, slot by slot (and mirror by mirror where the chunk's
 * mirror was ever written), without making untouched memory resident:
 * whole pages inside the object are dropped with MADV_DONTNEED (they read
 * as zero afterwards); the partial pages at its ends are read and cleared
 * only where not already zero. Reading an untouched private page maps the
 * kernel's shared zero page, which is not counted as resident memory; a
 * shared zone's memory is read through its backing instead (a file's
 * pread(), which returns zeros for a hole where a read fault through the
 * mapping would allocate a page).
 *
 * Transparent huge pages: every mapping of a chunk, and of its bitmaps, is
 * marked MADV_NOHUGEPAGE as soon as it is made (and each new mapping over
 * it again: a MAP_FIXED mapping starts with fresh flags; a backing's map()
 * does so for its mappings). A chunk's regions are STRIDE-aligned, so
 * 2 MiB-aligned, and written sparsely: with THP `always` (Debian's and
 * RHEL's kernels' default) the first write into a region would fault a
 * whole 2 MiB page -- the chunk header's write into slot 0 made 2 MiB
 * resident at a process's first counter, and each slot a thread first
 * writes as much again, where 4 kB pages hold the few counters that are
 * there. (The same holds for shared zones on shmem and tmpfs: see
 * src/segment/backing.c for how it reserves pages without huge ones.)
 *
 * Locking: one mutex per zone for alloc/free (zeroing included: a freed
 * object's granules are free only once it reads zero); a global mutex for
 * the table of chunks (pcpu_zone_find). fork() handlers (fork.c, the lowest
 * rank) take them all, so a child never inherits a lock held by a thread
 * that no longer exists.
 *
 * Shared zones (a backing another process reads) and the fork() handlers:
 * zone_shared.c.
 */
#include "core.h"
#include "zone_chunk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The table of all chunks of all zones, sorted by base, for pcpu_zone_find
 * (under pcpu__zone_table_lock, zone_shared.c). */
static struct {
	uintptr_t base;
	pcpu_zone_t *zone;
} *chunk_table;
static size_t chunk_table_n, chunk_table_cap;
static pcpu_zone_t *default_zone;

/* ---- the bitmaps ------------------------------------------------------------ */

/* Sets (on) or clears n bits of `map` from bit g. */
static void bits_set(uint64_t *map, size_t g, size_t n, int on)
{
	while (n > 0) {
		size_t b = g % 64, k = 64 - b < n ? 64 - b : n;
		uint64_t mask = (k == 64 ? ~0ull : ((1ull << k) - 1)) << b;

		if (on)
			map[g / 64] |= mask;
		else
			map[g / 64] &= ~mask;
		g += k;
		n -= k;
	}
}

/* Marks granules [g, g + n) in use, an object starting at g. */
static void mark_allocated(struct chunk *c, size_t g, size_t n)
{
	bits_set(c->alloc, g, n, 1);
	bits_set(c->start, g, 1, 1);
}

static size_t round_to_page(size_t x)
{
	return (x + page_size() - 1) & ~(page_size() - 1);
}

static int bit_get(const uint64_t *map, size_t g)
{
	return (int)((map[g / 64] >> (g % 64)) & 1);
}

/* First granule in [g, end) whose bit in `a | b` equals `want` (b may be
 * NULL), or `end`. A word at a time. */
static size_t find_bit(const uint64_t *a, const uint64_t *b, size_t g, size_t end, int want)
{
	while (g < end) {
		uint64_t w = a[g / 64] | (b ? b[g / 64] : 0);

		if (!want)
			w = ~w;
		w &= ~0ull << (g % 64);
		if (w) {
			size_t r = (g & ~(size_t)63) + (size_t)__builtin_ctzll(w);
			return r < end ? r : end;
		}
		g = (g & ~(size_t)63) + 64;
	}
	return end;
}

/* Granules of the object starting at g: up to the next granule that is
 * free or starts another object. */
static size_t object_granules(const struct chunk *c, size_t g)
{
	size_t end = g + 1;

	while (end < c->frontier) {
		uint64_t w = ~c->alloc[end / 64] | c->start[end / 64];

		w &= ~0ull << (end % 64);
		if (w) {
			end = (end & ~(size_t)63) + (size_t)__builtin_ctzll(w);
			break;
		}
		end = (end & ~(size_t)63) + 64;
	}
	return (end < c->frontier ? end : c->frontier) - g;
}

/* A run of n free granules below the frontier, starting at a multiple of
 * `align` granules; CHUNK_GRANULES if none. Advances the hint past the
 * allocated prefix it skips. */
static size_t find_hole(struct chunk *c, size_t n, size_t align)
{
	size_t g = find_bit(c->alloc, c->start, c->hint, c->frontier, 0);

	c->hint = g;
	while (g < c->frontier) {
		size_t a = (g + align - 1) & ~(align - 1), busy;

		if (a + n > c->frontier)
			break;
		busy = find_bit(c->alloc, c->start, a, a + n, 1);
		if (busy == a + n)
			return a;
		g = find_bit(c->alloc, c->start, busy, c->frontier, 0);
	}
	return CHUNK_GRANULES;
}

/* ---- the chunk table ------------------------------------------------------- */

static int table_add(uintptr_t base, pcpu_zone_t *zone)
{
	size_t i;

	pthread_mutex_lock(&pcpu__zone_table_lock);
	if (chunk_table_n == chunk_table_cap) {
		size_t cap = chunk_table_cap ? chunk_table_cap * 2 : 16;
		void *nt = realloc(chunk_table, cap * sizeof(*chunk_table));

		if (!nt) {
			pthread_mutex_unlock(&pcpu__zone_table_lock);
			return -1;
		}
		chunk_table = nt;
		chunk_table_cap = cap;
	}
	for (i = chunk_table_n; i > 0 && chunk_table[i - 1].base > base; i--)
		chunk_table[i] = chunk_table[i - 1];
	chunk_table[i].base = base;
	chunk_table[i].zone = zone;
	chunk_table_n++;
	pthread_mutex_unlock(&pcpu__zone_table_lock);
	return 0;
}

static void table_remove_zone(pcpu_zone_t *zone)
{
	size_t i, j = 0;

	pthread_mutex_lock(&pcpu__zone_table_lock);
	for (i = 0; i < chunk_table_n; i++)
		if (chunk_table[i].zone != zone)
			chunk_table[j++] = chunk_table[i];
	chunk_table_n = j;
	pthread_mutex_unlock(&pcpu__zone_table_lock);
}

pcpu_zone_t *pcpu_zone_of(const void *obj)
{
	pcpu_zone_t *z = pcpu_zone_find(obj);

	if (!z)
		errno = EINVAL;
	return z;
}

pcpu_zone_t *pcpu_zone_find(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	pcpu_zone_t *zone = NULL;
	size_t lo = 0, hi;

	pthread_mutex_lock(&pcpu__zone_table_lock);
	hi = chunk_table_n;
	while (lo < hi) { /* last chunk with base <= a */
		size_t mid = lo + (hi - lo) / 2;

		if (chunk_table[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Only slot 0's region holds handles. */
	if (lo > 0 && a - chunk_table[lo - 1].base < PCPU_SLOT_STRIDE)
		zone = chunk_table[lo - 1].zone;
	pthread_mutex_unlock(&pcpu__zone_table_lock);
	return zone;
}

/* ---- chunks ---------------------------------------------------------------- */

/* Maps chunk `no` of `zone` (through its backing, if any), links it and
 * tells the backing; `fresh`: a new chunk, whose header (and first page,
 * for a reserving backing) this call writes; else a tree zone's chunk that
 * another process made. Under the zone's lock. NULL with errno. */
static struct chunk *chunk_map(pcpu_zone_t *zone, unsigned no, int fresh)
{
	size_t span = chunk_span();
	size_t len = span + PCPU_SLOT_STRIDE; /* room to align */
	char *map, *base;
	struct chunk *c, **pp;
	void *bits;
	int err = ENOMEM;

	c = malloc(sizeof(*c));
	if (!c)
		goto fail;
	/* Both bitmaps in one lazily-resident mapping: 2 bits per granule
	 * of slot 0's region, resident only where objects are. */
	bits = mmap(NULL, BITMAP_BYTES, chunk_initial_prot(),
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (bits == MAP_FAILED)
		goto fail_chunk;
	pcpu__no_huge_pages(bits, BITMAP_BYTES);
	c->alloc = bits;
	c->start = c->alloc + BITMAP_WORDS;
	map = mmap(NULL, len, chunk_initial_prot(),
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED)
		goto fail_bits;
	/* Trim to a STRIDE-aligned span so the header is found by masking. */
	base = (char *)(((uintptr_t)map + PCPU_SLOT_STRIDE - 1) & ~(uintptr_t)(PCPU_SLOT_STRIDE - 1));
	if (base > map)
		munmap(map, (size_t)(base - map));
	if (map + len > base + span)
		munmap(base + span, (size_t)(map + len - (base + span)));
	pcpu__no_huge_pages(base, span); /* before the header is written */
	if (zone->backing && map_shared_chunk(zone, no, base) != 0) {
		err = errno;
		goto fail_base;
	}

	c->base = base;
	c->no = no;
	c->backed = 0;
	c->window = 0;
	c->bits_window = 0;
	/* The header's page (and the first objects'), in every region, before
	 * the header is written. A tree zone's chunk that another process
	 * made has its header (and its flags, which go on changing) already. */
	if (fresh && reserve_pages(zone, c, page_size()) != 0) {
		err = errno;
		goto fail_base;
	}
	/* Strict commit accounting: the header's page writable, and the
	 * bitmaps' first page (zone_chunk.h, "Commit"). */
	if (open_window(zone, c, page_size()) != 0) {
		err = errno;
		goto fail_base;
	}
	if (fresh)
		chunk_header_init(base);
	c->frontier = HDR_GRANULES; /* the header is never an object */
	c->holes = 0;
	memset(c->nofit, 0, sizeof(c->nofit));
	c->hint = HDR_GRANULES;
	c->fork_copy = NULL;
	c->parent_view = NULL;
	if (table_add((uintptr_t)base, zone) != 0)
		goto fail_base; /* ENOMEM */
	/* Newest (highest number) first: the bump chunk. Only a tree zone
	 * maps chunks out of order (those other processes made). */
	for (pp = &zone->chunks; *pp && (*pp)->no > no; pp = &(*pp)->next)
		;
	c->next = *pp;
	*pp = c;
	chunk_added(zone, c);
	return c;

fail_base:
	munmap(base, span);
fail_bits:
	munmap(bits, BITMAP_BYTES);
fail_chunk:
	free(c);
fail:
	errno = err;
	return NULL;
}

static struct chunk *chunk_create(pcpu_zone_t *zone)
{
	return chunk_map(zone, zone->chunks ? zone->chunks->no + 1 : 0, 1);
}

/* ---- zones ----------------------------------------------------------------- */

pcpu_zone_t *pcpu_zone_create(enum pcpu_index index)
{
	pcpu_zone_t *z;

	pcpu_init();
	/* Before any lock of ours is taken (fork.c); not at load time: only
	 * processes that use pcpu pay. */
	if (pcpu__zone_fork_register() != 0)
		return NULL;
	/* Strict commit accounting: an owned slot's first claim opens its
	 * region in every windowed chunk (zone_chunk.h, "Commit"). Before any
	 * lock of ours: the claims' lock comes first. */
	if (pcpu_commit_strict)
		pcpu__zone_owned_hook_install();
	/* One index per process (pcpu/zone.h): asking for the other one is
	 * an error, not a silent substitution. */
	if (index != PCPU_INDEX_DEFAULT && index != pcpu_process_index()) {
		errno = EINVAL;
		return NULL;
	}
	index = pcpu_process_index();

	z = calloc(1, sizeof(*z));
	if (!z) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&z->lock, NULL);
	z->index = index;
	if (!chunk_create(z)) {
		pthread_mutex_destroy(&z->lock);
		free(z);
		return NULL;
	}

	pthread_mutex_lock(&pcpu__zones_lock);
	z->next_zone = pcpu__all_zones;
	pcpu__all_zones = z;
	pthread_mutex_unlock(&pcpu__zones_lock);
	return z;
}

void pcpu_zone_destroy(pcpu_zone_t *zone)
{
	pcpu_zone_t **pp;
	struct chunk *c, *next;

	if (!zone)
		return;
	pthread_mutex_lock(&pcpu__zones_lock);
	for (pp = &pcpu__all_zones; *pp; pp = &(*pp)->next_zone)
		if (*pp == zone) {
			*pp = zone->next_zone;
			break;
		}
	if (zone == default_zone)
		default_zone = NULL;
	pthread_mutex_unlock(&pcpu__zones_lock);

	table_remove_zone(zone);
	for (c = zone->chunks; c; c = next) {
		next = c->next;
		munmap(c->base, chunk_span());
		munmap(c->alloc, BITMAP_BYTES);
		free(c);
	}
	if (zone->release)
		zone->release(zone->backing_ctx);
	pthread_mutex_destroy(&zone->lock);
	free(zone);
}

enum pcpu_index pcpu_zone_index(const pcpu_zone_t *zone)
{
	return zone ? zone->index : pcpu_process_index();
}

pcpu_zone_t *pcpu_default_zone(void)
{
	pcpu_zone_t *z;

	pthread_mutex_lock(&pcpu__zones_lock);
	z = default_zone;
	pthread_mutex_unlock(&pcpu__zones_lock);
	if (z)
		return z;
	z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	if (!z)
		return NULL;
	pthread_mutex_lock(&pcpu__zones_lock);
	if (!default_zone) {
		default_zone = z;
		z = NULL;
	}
	pthread_mutex_unlock(&pcpu__zones_lock);
	if (z) /* another thread won the race */
		pcpu_zone_destroy(z);
	pthread_mutex_lock(&pcpu__zones_lock);
	z = default_zone;
	pthread_mutex_unlock(&pcpu__zones_lock);
	return z;
}

/* Whether a search for n granules aligned to 2^k granules is known to fail:
 * one as small and at most as aligned failed since the last free (stricter
 * alignment or more granules cannot fit where that did not). */
static int known_no_fit(const struct chunk *c, size_t n, unsigned k)
{
	unsigned j;

	for (j = 0; j <= k; j++)
		if (c->nofit[j] && n >= c->nofit[j])
			return 1;
	return 0;
}

/* A new hole [from, to): forget each no-fit fact it contradicts. */
static void gap_revokes_nofit(struct chunk *c, size_t from, size_t to)
{
	unsigned k;

	for (k = 0; k < PCPU__ALIGN_CLASSES; k++) {
		size_t a = (from + ((size_t)1 << k) - 1) & ~(((size_t)1 << k) - 1);

		if (c->nofit[k] && a + c->nofit[k] <= to)
			c->nofit[k] = 0;
	}
}

/* Granule g of chunk c for n granules aligned to `align` granules: a hole
 * of some chunk, else bump space in the newest chunk, else a new chunk.
 * Under the zone's lock. Returns the address, or 0 with errno ENOMEM. */
static uintptr_t alloc_granules(pcpu_zone_t *z, size_t n, size_t align)
{
	struct chunk *c;
	size_t g;

	unsigned k = (unsigned)__builtin_ctzll(align); /* align = 2^k granules */

	for (c = z->chunks; c; c = c->next) {
		if (c->holes < n || known_no_fit(c, n, k))
			continue; /* cannot fit: no scan */
		g = find_hole(c, n, align);
		if (g != CHUNK_GRANULES) {
			mark_allocated(c, g, n);
			c->holes -= n;
			return (uintptr_t)c->base + (g << GRANULE_SHIFT);
		}
		if (c->nofit[k] == 0 || n < c->nofit[k])
			c->nofit[k] = n;
	}
	c = z->chunks;
	g = (c->frontier + align - 1) & ~(align - 1);
	if (g + n > CHUNK_GRANULES) {
		c = chunk_create(z);
		if (!c)
			return 0;
		g = (c->frontier + align - 1) & ~(align - 1);
	}
	/* Reserving backings: the memory under the object, in every region,
	 * before anyone can write it (holes below the frontier are); under
	 * strict commit accounting, the memory made writable. */
	if (reserve_pages(z, c, round_to_page((g + n) << GRANULE_SHIFT)) != 0 ||
	    open_window(z, c, (g + n) << GRANULE_SHIFT) != 0)
		return 0;
	/* An alignment gap below the new object becomes a hole; it revokes
	 * the no-fit knowledge it could satisfy. */
	if (g > c->frontier)
		gap_revokes_nofit(c, c->frontier, g);
	c->holes += g - c->frontier;
	if (g > c->frontier && c->hint > c->frontier)
		c->hint = c->frontier;
	c->frontier = g + n;
	mark_allocated(c, g, n);
	return (uintptr_t)c->base + (g << GRANULE_SHIFT);
}

/* ---- tree zones (core.h, zone_tree.c) ------------------------------ */

/* Chunk `no` of a tree zone in this process, mapped now if need be. Under
 * the zone's lock. */
static struct chunk *tree_chunk(pcpu_zone_t *zone, unsigned no, int fresh)
{
	struct chunk *c;

	for (c = zone->chunks; c; c = c->next)
		if (c->no == no)
			return c;
	return chunk_map(zone, no, fresh);
}

/* Marks [g, g + n) of chunk c live in this process's books. */
static void tree_mark(struct chunk *c, size_t g, size_t n)
{
	mark_allocated(c, g, n);
	if (g + n > c->frontier)
		c->frontier = g + n;
}

/* A tree zone's allocation of n granules aligned to `align` granules: the
 * frontier (zone_tree.c says why no books). */
static void *tree_alloc(pcpu_zone_t *zone, size_t n, size_t align)
{
	struct pcpu_zone_tree *t = zone->tree;
	struct chunk *c;
	unsigned no;
	size_t g;
	void *obj = NULL;

	if (pcpu__zone_tree_lock(zone) != 0)
		return NULL;
	pthread_mutex_lock(&zone->lock);
	no = (unsigned)(t->nchunks - 1);
	g = ((size_t)t->frontier + align - 1) & ~(align - 1);
	if (g + n > CHUNK_GRANULES) {
		/* A new chunk: counted once its header is written. */
		c = tree_chunk(zone, no + 1, 1);
		if (!c)
			goto out;
		__atomic_store_n(&t->frontier, HDR_GRANULES, __ATOMIC_RELAXED);
		__atomic_store_n(&t->nchunks, (uint64_t)no + 2, __ATOMIC_RELEASE);
		no++;
		g = (HDR_GRANULES + align - 1) & ~(align - 1);
	} else if (!(c = tree_chunk(zone, no, 0))) {
		goto out;
	}
	/* The backing's pages under the object (reserving backings), then
	 * the frontier, then the object: a holder that dies leaks it. */
	if (reserve_pages(zone, c, round_to_page((g + n) << GRANULE_SHIFT)) != 0 ||
	    open_window(zone, c, (g + n) << GRANULE_SHIFT) != 0)
		goto out;
	__atomic_store_n(&t->frontier, (uint64_t)(g + n), __ATOMIC_RELEASE);
	tree_mark(c, g, n);
	obj = c->base + (g << GRANULE_SHIFT);
out:
	pthread_mutex_unlock(&zone->lock);
	pcpu__zone_tree_unlock(zone);
	return obj; /* NULL: errno from the mapping or the backing */
}

void *pcpu__zone_tree_adopt(pcpu_zone_t *zone, unsigned no, uint64_t off, size_t size)
{
	struct pcpu_zone_tree *t = zone ? zone->tree : NULL;
	size_t g = (size_t)(off >> GRANULE_SHIFT), n = (size + GRANULE - 1) >> GRANULE_SHIFT;
	uint64_t nchunks, frontier;
	struct chunk *c;
	void *obj = NULL;

	/* Called under the tree's lock, or without it by a collection
	 * (src/segment/tree.c): the shared state read atomically; a chunk
	 * made meanwhile may make an object of the one before look past the
	 * frontier, which only skips it this time. */
	nchunks = t ? __atomic_load_n(&t->nchunks, __ATOMIC_ACQUIRE) : 0;
	frontier = t ? __atomic_load_n(&t->frontier, __ATOMIC_ACQUIRE) : 0;
	if (!t || no >= nchunks || off % GRANULE || g < HDR_GRANULES || n == 0 ||
	    g + n > CHUNK_GRANULES || (no == nchunks - 1 && g + n > frontier)) {
		errno = EINVAL; /* not an object any process of the tree made */
		return NULL;
	}
	pthread_mutex_lock(&zone->lock);
	c = tree_chunk(zone, no, 0);
	if (c && open_window(zone, c, (g + n) << GRANULE_SHIFT) == 0) { /* the bitmaps' bits */
		tree_mark(c, g, n);
		obj = c->base + off;
	}
	pthread_mutex_unlock(&zone->lock);
	return obj;
}

void *pcpu_zone_alloc(pcpu_zone_t *zone, size_t size, size_t align)
{
	uintptr_t a;

	if (!zone || size == 0 || (align & (align - 1)) != 0 || align > 4096) {
		errno = EINVAL;
		return NULL;
	}
	if (size > PCPU_ZONE_MAX_OBJECT) {
		errno = E2BIG;
		return NULL;
	}
	if (align < GRANULE)
		align = GRANULE;
	size = (size + GRANULE - 1) & ~(GRANULE - 1);

	if (zone->tree) /* one frontier for the process tree: zone_tree.c */
		return tree_alloc(zone, size >> GRANULE_SHIFT, align >> GRANULE_SHIFT);
	pthread_mutex_lock(&zone->lock);
	a = alloc_granules(zone, size >> GRANULE_SHIFT, align >> GRANULE_SHIFT);
	pthread_mutex_unlock(&zone->lock);
	if (!a)
		return NULL; /* errno: ENOMEM, or the backing's (ENOSPC...) */
	return (void *)a;
}

/* The chunk of `zone` whose slot-0 region holds `addr`, or NULL. */
static struct chunk *chunk_holding(pcpu_zone_t *zone, uintptr_t addr)
{
	struct chunk *c;

	for (c = zone->chunks; c; c = c->next)
		if (addr - (uintptr_t)c->base < PCPU_SLOT_STRIDE)
			return c;
	return NULL;
}

int pcpu__zone_locate(pcpu_zone_t *zone, const void *obj, unsigned *no, uint64_t *off)
{
	struct chunk *c;

	pthread_mutex_lock(&zone->lock);
	c = chunk_holding(zone, (uintptr_t)obj);
	if (c) {
		*no = c->no;
		*off = (uint64_t)((uintptr_t)obj - (uintptr_t)c->base);
	}
	pthread_mutex_unlock(&zone->lock);
	if (!c) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* Granule of the live object whose handle is `obj`, or CHUNK_GRANULES if
 * `obj` is not one (not 8-aligned, not in the zone, not an object start). */
static size_t live_object(pcpu_zone_t *zone, const void *obj, struct chunk **cp)
{
	struct chunk *c = chunk_holding(zone, (uintptr_t)obj);
	size_t off, g;

	if (!c)
		return CHUNK_GRANULES;
	off = (size_t)((uintptr_t)obj - (uintptr_t)c->base);
	g = off >> GRANULE_SHIFT;
	if (off % GRANULE || g < HDR_GRANULES || g >= c->frontier ||
	    !bit_get(c->start, g) || !bit_get(c->alloc, g))
		return CHUNK_GRANULES;
	*cp = c;
	return g;
}

/* Whether [p, p + len) (at most a page) holds only zero bytes, without
 * making it resident: private memory is read through the mapping (an
 * untouched page maps the shared zero page, which is not resident memory);
 * a shared zone's is read through its backing (backing->read: pread() of
 * the file), because a read fault on a hole of a tmpfs mapping would
 * allocate a page where pread() returns zeros. `off` is where p lies in
 * chunk c (shared zones only). */
static int range_is_zero(const pcpu_zone_t *zone, const struct chunk *c, const char *p,
			 size_t len, size_t off)
{
	uint64_t buf[512];
	size_t i;

	if (!zone->backing) {
		for (i = 0; i < len; i += 8)
			if (*(const volatile uint64_t *)(p + i))
				return 0;
		return 1;
	}
	while (len > 0) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);

		if (zone->backing->read(zone->backing_ctx, c->no, off, buf, n) != 0)
			return 0; /* cannot tell: clear it */
		for (i = 0; i < n / 8; i++)
			if (buf[i])
				return 0;
		len -= n;
		off += n;
	}
	return 1;
}

/* Clears [p, p + len) of chunk c (at offset `off` in it) without making
 * untouched pages resident. Whole pages are dropped: MADV_DONTNEED for
 * private memory, MADV_REMOVE (the backing's pages freed) for a shared
 * zone, whose backing would otherwise keep the data -- except where the
 * backing reserves, whose pages must stay allocated: there every page is
 * read and cleared only if something is set, as the partial pages at both
 * ends always are. */
static void zero_quietly(const pcpu_zone_t *zone, const struct chunk *c, char *p, size_t len,
			 size_t off)
{
	size_t ps = page_size();
	char *end = p + len;
	char *first_page = (char *)(((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1));
	char *last_page = (char *)((uintptr_t)end & ~(uintptr_t)(ps - 1));

	if (zone->backing && zone->backing->reserve) {
		while (p < end) {
			char *next = (char *)(((uintptr_t)p + ps) & ~(uintptr_t)(ps - 1));

			if (next > end)
				next = end;
			if (!range_is_zero(zone, c, p, (size_t)(next - p), off))
				memset(p, 0, (size_t)(next - p));
			off += (size_t)(next - p);
			p = next;
		}
		return;
	}
	if (first_page < last_page) {
		if (madvise(first_page, (size_t)(last_page - first_page),
			    zone->backing ? MADV_REMOVE : MADV_DONTNEED) != 0)
			memset(first_page, 0, (size_t)(last_page - first_page));
	} else {
		first_page = last_page = end; /* no whole page inside */
	}
	if (first_page > p && !range_is_zero(zone, c, p, (size_t)(first_page - p), off))
		memset(p, 0, (size_t)(first_page - p));
	if (end > last_page &&
	    !range_is_zero(zone, c, last_page, (size_t)(end - last_page),
			   off + (size_t)(last_page - p)))
		memset(last_page, 0, (size_t)(end - last_page));
}

int pcpu_zone_free(pcpu_zone_t *zone, void *obj)
{
	struct chunk *c;
	size_t g, n, size, off, next_data = 0, span = chunk_span(), hole;
	uint32_t slot, nregions;
	int saved_errno = errno, known = 0;

	if (!obj)
		return 0;
	if (!zone) {
		errno = EINVAL;
		return -1;
	}
	if (zone->tree) {
		/* Another process of the tree may hold it (core.h). */
		errno = EBUSY;
		return -1;
	}
	pthread_mutex_lock(&zone->lock);
	g = live_object(zone, obj, &c);
	if (g == CHUNK_GRANULES) {
		pthread_mutex_unlock(&zone->lock);
		errno = EINVAL;
		return -1;
	}
	n = object_granules(c, g);
	size = n << GRANULE_SHIFT;
	off = (size_t)((char *)obj - c->base); /* slot 0's copy, in the chunk */

	/* Zero every copy before the granules are free again, so the next
	 * owner reads zero. Mirror copies only where the chunk's mirror was
	 * ever written: elsewhere they were never touched. */
	nregions = pcpu_slot_count * (pcpu_mirror_in_use(obj) ? 2 : 1);
	for (slot = 0; slot < nregions; slot++) {
		size_t at = off + ((size_t)slot << PCPU_SLOT_STRIDE_SHIFT);

		/* A shared zone's backing is sparse: skip, with one extent
		 * query for a run of them, the slots whose copy lies in a
		 * hole, so a free costs a system call per slot that holds
		 * data, not per slot. */
		if (zone->backing && (!known || next_data < at + size)) {
			if (!known || next_data < at) {
				int r = zone->backing->extent(zone->backing_ctx, c->no, at, span,
							      &next_data, &hole);

				if (r == 0)
					break; /* no data after `at`: the rest reads zero */
				if (r < 0)
					next_data = at; /* cannot tell: look at it */
				known = 1;
			}
		}
		if (zone->backing && next_data >= at + size)
			continue;
		zero_quietly(zone, c, (char *)pcpu_slot_ptr(obj, slot), size, at);
	}

	bits_set(c->alloc, g, n, 0);
	bits_set(c->start, g, 1, 0);
	c->holes += n;
	if (g < c->hint)
		c->hint = g;
	memset(c->nofit, 0, sizeof(c->nofit)); /* a new hole may fit anything */
	pthread_mutex_unlock(&zone->lock);
	errno = saved_errno; /* a successful call leaves errno alone */
	return 0;
}

size_t pcpu_zone_object_size(pcpu_zone_t *zone, const void *obj)
{
	struct chunk *c;
	size_t g, size = 0;

	if (!zone || !obj) {
		errno = EINVAL;
		return 0;
	}
	pthread_mutex_lock(&zone->lock);
	g = live_object(zone, obj, &c);
	if (g != CHUNK_GRANULES)
		size = object_granules(c, g) << GRANULE_SHIFT;
	pthread_mutex_unlock(&zone->lock);
	if (!size)
		errno = EINVAL;
	return size;
}

/* Whether `obj` lies inside a live allocation of some zone (debug checks). */
static int pcpu_zone_contains_live(const void *obj)
{
	pcpu_zone_t *z = pcpu_zone_find(obj);
	struct chunk *c;
	size_t g;
	int found = 0;

	if (!z)
		return 0;
	pthread_mutex_lock(&z->lock);
	c = chunk_holding(z, (uintptr_t)obj);
	if (c) {
		/* Any byte of an allocated granule: elements of arrays too. */
		g = (size_t)((uintptr_t)obj - (uintptr_t)c->base) >> GRANULE_SHIFT;
		found = g >= HDR_GRANULES && g < c->frontier && bit_get(c->alloc, g);
	}
	pthread_mutex_unlock(&z->lock);
	return found;
}

/* Called by the inline operations of every layer in debug builds
 * (PCPU_DEBUG) and by the library's own CHECK()s in debug-library builds:
 * the zone is who knows what is live. */
void pcpu__debug_check(const void *obj, const char *func)
{
	const char *what = NULL;

	if (!obj)
		what = "is NULL";
	else if (!pcpu_zone_contains_live(obj))
		what = "is not a live pcpu allocation (freed, or never allocated)";
	if (!what)
		return;
	/* Debug builds only (PCPU_DEBUG): a programming error, reported the way
	 * assert() reports one. Release builds never get here. */
	fprintf(stderr, "pcpu: %s: handle %p %s\n", func ? func : "?", obj, what);
	abort();
}
