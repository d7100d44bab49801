/* SPDX-License-Identifier: MIT */
/*
 * zone.c: the per-CPU zone allocator (FreeBSD's UMA_ZONE_PCPU, user space).
 *
 * Memory: a zone is a list of chunks. A chunk is one anonymous mapping of
 * nslots * PCPU_SLOT_STRIDE bytes, aligned to PCPU_SLOT_STRIDE, reserved with
 * MAP_NORESERVE and never touched by the allocator except for the chunk
 * header at the start of slot 0's region:
 *
 *   base                     base + STRIDE             base + 2*STRIDE
 *   | hdr | a | b | c ... |  | --- | a | b | c ... |  | --- | a ...
 *   '----- slot 0 --------'  '----- slot 1 --------'  '----- slot 2 ...
 *
 * Bookkeeping covers slot 0 only: an object is an offset range in slot 0's
 * region, and the same range in every other region is implied. Because all
 * slots are at the same distance, object + slot * STRIDE is that slot's copy,
 * and because the chunk is STRIDE-aligned, masking an object's address finds
 * the chunk header (the slot index field to use), with no lookup.
 *
 * Allocation: bump allocation in the newest chunk; freed objects go to
 * per-size free lists (sizes up to 4 KiB, by 16 bytes) or to a first-fit
 * list of larger extents, and are reused before bumping. A chunk is never
 * returned to the system before the zone is destroyed (objects never move).
 * Every live object is in a hash table (address -> size), so a double or
 * foreign free is refused with EINVAL instead of corrupting the lists.
 *
 * Zeroing: new bump space is zero already (never touched). A freed object is
 * zeroed at free time, slot by slot, without making untouched memory
 * resident: whole pages inside the object are dropped with MADV_DONTNEED
 * (they read as zero afterwards); the partial pages at its ends are read and
 * cleared only where not already zero. Reading an untouched private page maps
 * the kernel's shared zero page, which is not counted as resident memory; a
 * shared zone's file is read with pread() instead, which returns zeros for a
 * hole where a read fault through the mapping would allocate a page.
 *
 * Locking: one mutex per zone for alloc/free; a global mutex for the table
 * of chunks (pcpu_zone_find), which fork() handlers also take so a child
 * never inherits a lock held by a thread that no longer exists.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SMALL_MAX 4096
#define SMALL_CLASSES (SMALL_MAX / 16)

struct chunk {
	char *base;   /* slot 0's region, STRIDE-aligned */
	size_t used;  /* bump offset in slot 0's region */
	unsigned no;  /* 0 for the first chunk of the zone, then 1, 2... */
	struct chunk *next;
};

struct extent {
	uintptr_t addr;
	size_t size;
};

/* A growable array of extents (for a size class, addr only matters). */
struct extent_vec {
	struct extent *v;
	size_t n, cap;
};

/* Open-addressing hash of live objects: addr -> size. 0 = empty, 1 = deleted. */
struct live_set {
	struct extent *slots;
	size_t cap, used, tombstones;
};

struct pcpu_zone {
	pthread_mutex_t lock;
	enum pcpu_index index;
	uint32_t index_off;
	struct chunk *chunks; /* newest first: the bump chunk */
	struct extent_vec small[SMALL_CLASSES];
	struct extent_vec large;
	struct live_set live;
	struct pcpu_zone *next_zone;
	/* Shared backing (a statistics segment): chunk i maps the file at
	 * file_base + i * span, MAP_SHARED, so another process can read it. */
	int fd;              /* -1: private anonymous memory */
	uint64_t file_base;
	pcpu_zone_chunk_fn *on_chunk;
	void *on_chunk_ctx;
};

/* The table of all chunks of all zones, sorted by base, for pcpu_zone_find. */
/* A mutex, not a rwlock: glibc's rwlock remembers the writer's tid, which a
 * fork() child's thread does not have, so the child could not release it. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uintptr_t base;
	pcpu_zone_t *zone;
} *chunk_table;
static size_t chunk_table_n, chunk_table_cap;
static pcpu_zone_t *all_zones;
static pthread_mutex_t zones_lock = PTHREAD_MUTEX_INITIALIZER;
static pcpu_zone_t *default_zone;
static int atfork_registered;

static size_t page_size(void)
{
	static size_t ps;

	if (!ps)
		ps = (size_t)sysconf(_SC_PAGESIZE);
	return ps;
}

static size_t chunk_span(void)
{
	return (size_t)pcpu__g.nslots << PCPU_SLOT_STRIDE_SHIFT;
}

/* ---- fork: take every lock, so the child inherits them consistent --------- */

static void atfork_prepare(void)
{
	pcpu_zone_t *z;

	pthread_mutex_lock(&zones_lock);
	for (z = all_zones; z; z = z->next_zone)
		pthread_mutex_lock(&z->lock);
	pthread_mutex_lock(&table_lock);
	pcpu_counter_atfork_prepare();
}

/* Parent and child alike: every lock is a plain mutex, which the child's
 * only thread may release. */
static void atfork_release(void)
{
	pcpu_zone_t *z;

	pcpu_counter_atfork_release();
	pthread_mutex_unlock(&table_lock);
	for (z = all_zones; z; z = z->next_zone)
		pthread_mutex_unlock(&z->lock);
	pthread_mutex_unlock(&zones_lock);
}

/* ---- small containers ------------------------------------------------------ */

static int vec_push(struct extent_vec *v, uintptr_t addr, size_t size)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		struct extent *nv = realloc(v->v, cap * sizeof(*nv));

		if (!nv)
			return -1;
		v->v = nv;
		v->cap = cap;
	}
	v->v[v->n].addr = addr;
	v->v[v->n].size = size;
	v->n++;
	return 0;
}

static size_t live_hash(uintptr_t addr, size_t cap)
{
	uint64_t h = (uint64_t)addr * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 17) & (cap - 1);
}

static struct extent *live_lookup(struct live_set *s, uintptr_t addr)
{
	size_t i, n;

	if (!s->cap)
		return NULL;
	for (i = live_hash(addr, s->cap), n = 0; n < s->cap; i = (i + 1) & (s->cap - 1), n++) {
		if (s->slots[i].addr == addr)
			return &s->slots[i];
		if (s->slots[i].addr == 0)
			return NULL;
	}
	return NULL;
}

static int live_insert(struct live_set *s, uintptr_t addr, size_t size);

static int live_grow(struct live_set *s)
{
	struct live_set bigger = {0};
	size_t i;

	bigger.cap = s->cap ? s->cap * 2 : 64;
	if ((s->used - s->tombstones) * 4 < s->cap)
		bigger.cap = s->cap ? s->cap : 64; /* mostly tombstones: rehash in place size */
	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return -1;
	for (i = 0; i < s->cap; i++)
		if (s->slots[i].addr > 1)
			live_insert(&bigger, s->slots[i].addr, s->slots[i].size);
	free(s->slots);
	*s = bigger;
	return 0;
}

static int live_insert(struct live_set *s, uintptr_t addr, size_t size)
{
	size_t i;

	if ((s->used + 1) * 2 > s->cap && live_grow(s) != 0)
		return -1;
	for (i = live_hash(addr, s->cap); s->slots[i].addr > 1; i = (i + 1) & (s->cap - 1))
		;
	if (s->slots[i].addr == 0)
		s->used++;
	else
		s->tombstones--;
	s->slots[i].addr = addr;
	s->slots[i].size = size;
	return 0;
}

static void live_remove(struct live_set *s, struct extent *e)
{
	e->addr = 1; /* tombstone: keeps probe chains intact */
	e->size = 0;
	s->tombstones++;
}

/* ---- the chunk table ------------------------------------------------------- */

static int table_add(uintptr_t base, pcpu_zone_t *zone)
{
	size_t i;

	pthread_mutex_lock(&table_lock);
	if (chunk_table_n == chunk_table_cap) {
		size_t cap = chunk_table_cap ? chunk_table_cap * 2 : 16;
		void *nt = realloc(chunk_table, cap * sizeof(*chunk_table));

		if (!nt) {
			pthread_mutex_unlock(&table_lock);
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
	pthread_mutex_unlock(&table_lock);
	return 0;
}

static void table_remove_zone(pcpu_zone_t *zone)
{
	size_t i, j = 0;

	pthread_mutex_lock(&table_lock);
	for (i = 0; i < chunk_table_n; i++)
		if (chunk_table[i].zone != zone)
			chunk_table[j++] = chunk_table[i];
	chunk_table_n = j;
	pthread_mutex_unlock(&table_lock);
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

	pthread_mutex_lock(&table_lock);
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
	pthread_mutex_unlock(&table_lock);
	return zone;
}

/* ---- chunks ---------------------------------------------------------------- */

static uint64_t chunk_file_off(const pcpu_zone_t *zone, unsigned no)
{
	return zone->file_base + (uint64_t)no * chunk_span();
}

/* Replaces the chunk's private memory at `base` by the zone's file. Only the
 * pages written become file pages: tmpfs files are sparse. */
static int map_file_chunk(pcpu_zone_t *zone, unsigned no, char *base)
{
	uint64_t off = chunk_file_off(zone, no);
	struct stat st;

	if (fstat(zone->fd, &st) != 0)
		return -1;
	if ((uint64_t)st.st_size < off + chunk_span() &&
	    ftruncate(zone->fd, (off_t)(off + chunk_span())) != 0)
		return -1;
	if (mmap(base, chunk_span(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 zone->fd, (off_t)off) == MAP_FAILED)
		return -1;
	return 0;
}

static struct chunk *chunk_create(pcpu_zone_t *zone)
{
	size_t span = chunk_span();
	size_t len = span + PCPU_SLOT_STRIDE; /* room to align */
	char *map, *base;
	struct chunk *c;
	struct pcpu__chunk_hdr *hdr;

	unsigned no = zone->chunks ? zone->chunks->no + 1 : 0;

	c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	/* Trim to a STRIDE-aligned span so the header is found by masking. */
	base = (char *)(((uintptr_t)map + PCPU_SLOT_STRIDE - 1) & ~(uintptr_t)(PCPU_SLOT_STRIDE - 1));
	if (base > map)
		munmap(map, (size_t)(base - map));
	if (map + len > base + span)
		munmap(base + span, (size_t)(map + len - (base + span)));
	if (zone->fd >= 0 && map_file_chunk(zone, no, base) != 0) {
		int err = errno;

		munmap(base, span);
		free(c);
		errno = err;
		return NULL;
	}

	hdr = (struct pcpu__chunk_hdr *)base;
	hdr->magic = PCPU__CHUNK_MAGIC;
	hdr->index_off = zone->index_off;
	c->base = base;
	c->used = PCPU__CHUNK_HDR_SIZE;
	c->no = no;
	if (table_add((uintptr_t)base, zone) != 0) {
		munmap(base, span);
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->next = zone->chunks;
	zone->chunks = c;
	if (zone->on_chunk)
		zone->on_chunk(zone->on_chunk_ctx, no, base, zone->fd >= 0 ? chunk_file_off(zone, no) : 0);
	return c;
}

/* ---- zones ----------------------------------------------------------------- */

pcpu_zone_t *pcpu_zone_create(enum pcpu_index index)
{
	pcpu_zone_t *z;

	if (index != PCPU_INDEX_DEFAULT && index != PCPU_INDEX_CPU &&
	    index != PCPU_INDEX_MM_CID) {
		errno = EINVAL;
		return NULL;
	}
	pcpu_init();
	if (index == PCPU_INDEX_DEFAULT || index == PCPU_INDEX_MM_CID)
		index = pcpu_rseq_has_mm_cid() ? PCPU_INDEX_MM_CID : PCPU_INDEX_CPU;

	z = calloc(1, sizeof(*z));
	if (!z) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&z->lock, NULL);
	z->fd = -1;
	z->index = index;
	z->index_off = index == PCPU_INDEX_MM_CID ? PCPU__RSEQ_OFF_MM_CID : PCPU__RSEQ_OFF_CPU_ID;
	if (!chunk_create(z)) {
		pthread_mutex_destroy(&z->lock);
		free(z);
		return NULL;
	}

	pthread_mutex_lock(&zones_lock);
	if (!atfork_registered) {
		/* Lazily, not at load time: only processes that use pcpu pay. */
		pthread_atfork(atfork_prepare, atfork_release, atfork_release);
		atfork_registered = 1;
	}
	z->next_zone = all_zones;
	all_zones = z;
	pthread_mutex_unlock(&zones_lock);
	return z;
}

void pcpu_zone_destroy(pcpu_zone_t *zone)
{
	pcpu_zone_t **pp;
	struct chunk *c, *next;
	size_t i;

	if (!zone)
		return;
	pthread_mutex_lock(&zones_lock);
	for (pp = &all_zones; *pp; pp = &(*pp)->next_zone)
		if (*pp == zone) {
			*pp = zone->next_zone;
			break;
		}
	if (zone == default_zone)
		default_zone = NULL;
	pthread_mutex_unlock(&zones_lock);

	table_remove_zone(zone);
	for (c = zone->chunks; c; c = next) {
		next = c->next;
		munmap(c->base, chunk_span());
		free(c);
	}
	for (i = 0; i < SMALL_CLASSES; i++)
		free(zone->small[i].v);
	free(zone->large.v);
	free(zone->live.slots);
	pthread_mutex_destroy(&zone->lock);
	free(zone);
}

enum pcpu_index pcpu_zone_index(const pcpu_zone_t *zone)
{
	return zone ? zone->index : PCPU_INDEX_DEFAULT;
}

pcpu_zone_t *pcpu_default_zone(void)
{
	pcpu_zone_t *z;

	pthread_mutex_lock(&zones_lock);
	z = default_zone;
	pthread_mutex_unlock(&zones_lock);
	if (z)
		return z;
	z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	if (!z)
		return NULL;
	pthread_mutex_lock(&zones_lock);
	if (!default_zone) {
		default_zone = z;
		z = NULL;
	}
	pthread_mutex_unlock(&zones_lock);
	if (z) /* another thread won the race */
		pcpu_zone_destroy(z);
	pthread_mutex_lock(&zones_lock);
	z = default_zone;
	pthread_mutex_unlock(&zones_lock);
	return z;
}

/* Takes an extent of `size` bytes aligned to `align` from the free lists, or
 * 0 if none fits. */
static uintptr_t take_free(pcpu_zone_t *z, size_t size, size_t align)
{
	size_t i;

	if (size <= SMALL_MAX) {
		struct extent_vec *v = &z->small[size / 16 - 1];

		for (i = v->n; i > 0; i--) {
			uintptr_t a = v->v[i - 1].addr;

			if ((a & (align - 1)) == 0) {
				v->v[i - 1] = v->v[--v->n];
				return a;
			}
		}
		return 0;
	}
	for (i = 0; i < z->large.n; i++) {
		struct extent *e = &z->large.v[i];
		uintptr_t a = (e->addr + align - 1) & ~(uintptr_t)(align - 1);
		size_t lead = a - e->addr;

		if (e->size >= lead + size) {
			struct extent rest = {a + size, e->size - lead - size};

			if (lead) {
				e->size = lead; /* keep the head as a free extent */
			} else {
				*e = z->large.v[--z->large.n];
			}
			/* Return the tail; failing to record it only leaks space. */
			if (rest.size >= 16) {
				if (rest.size <= SMALL_MAX && rest.size % 16 == 0)
					vec_push(&z->small[rest.size / 16 - 1], rest.addr, rest.size);
				else
					vec_push(&z->large, rest.addr, rest.size);
			}
			return a;
		}
	}
	return 0;
}

static uintptr_t bump(pcpu_zone_t *z, size_t size, size_t align)
{
	struct chunk *c = z->chunks;
	size_t off = (c->used + align - 1) & ~(align - 1);

	if (off + size > PCPU_SLOT_STRIDE) {
		c = chunk_create(z);
		if (!c)
			return 0;
		off = (c->used + align - 1) & ~(align - 1);
	}
	c->used = off + size;
	return (uintptr_t)c->base + off;
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
	if (align < 16)
		align = 16;
	size = (size + 15) & ~(size_t)15;

	pthread_mutex_lock(&zone->lock);
	a = take_free(zone, size, align);
	if (!a)
		a = bump(zone, size, align);
	if (a && live_insert(&zone->live, a, size) != 0) {
		/* Give the space back; the object was never handed out. */
		if (size <= SMALL_MAX)
			vec_push(&zone->small[size / 16 - 1], a, size);
		else
			vec_push(&zone->large, a, size);
		a = 0;
	}
	pthread_mutex_unlock(&zone->lock);
	if (!a) {
		errno = ENOMEM;
		return NULL;
	}
	return (void *)a;
}

/* Whether [p, p + len) (at most a page) holds only zero bytes, without
 * making it resident: private memory is read through the mapping (an
 * untouched page maps the shared zero page, which is not resident memory);
 * a shared zone's file is read with pread(), because a read fault on a hole
 * of a tmpfs mapping would allocate a page where pread() returns zeros. */
static int range_is_zero(const char *p, size_t len, int fd, off_t file_off)
{
	uint64_t buf[512];
	size_t i;

	if (fd < 0) {
		for (i = 0; i < len; i += 8)
			if (*(const volatile uint64_t *)(p + i))
				return 0;
		return 1;
	}
	while (len > 0) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);
		ssize_t got = pread(fd, buf, n, file_off);

		if (got != (ssize_t)n)
			return 0; /* cannot tell: clear it */
		for (i = 0; i < n / 8; i++)
			if (buf[i])
				return 0;
		len -= n;
		file_off += (off_t)n;
	}
	return 1;
}

/* Clears [p, p + len) without making untouched pages resident. Whole pages
 * are dropped: MADV_DONTNEED for private memory, MADV_REMOVE (a hole punched
 * in the file) for a shared zone, whose file would otherwise keep the data.
 * The partial pages at both ends are written only if something is set.
 * `file_off` is where p lies in the zone's file (fd >= 0 only). */
static void zero_quietly(char *p, size_t len, int fd, off_t file_off)
{
	size_t ps = page_size();
	char *end = p + len;
	char *first_page = (char *)(((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1));
	char *last_page = (char *)((uintptr_t)end & ~(uintptr_t)(ps - 1));

	if (first_page < last_page) {
		if (madvise(first_page, (size_t)(last_page - first_page),
			    fd >= 0 ? MADV_REMOVE : MADV_DONTNEED) != 0)
			memset(first_page, 0, (size_t)(last_page - first_page));
	} else {
		first_page = last_page = end; /* no whole page inside */
	}
	if (first_page > p && !range_is_zero(p, (size_t)(first_page - p), fd, file_off))
		memset(p, 0, (size_t)(first_page - p));
	if (end > last_page &&
	    !range_is_zero(last_page, (size_t)(end - last_page), fd, file_off + (last_page - p)))
		memset(last_page, 0, (size_t)(end - last_page));
}

int pcpu_zone_free(pcpu_zone_t *zone, void *obj)
{
	struct extent *e;
	size_t size;
	uint32_t slot;
	int rc, fd;
	off_t file_off = 0;

	if (!obj)
		return 0;
	if (!zone) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&zone->lock);
	e = live_lookup(&zone->live, (uintptr_t)obj);
	if (!e) {
		pthread_mutex_unlock(&zone->lock);
		errno = EINVAL;
		return -1;
	}
	size = e->size;
	live_remove(&zone->live, e);
	fd = zone->fd;
	if (fd >= 0) { /* where the object's slot 0 lies in the zone's file */
		struct chunk *c = zone->chunks;

		while (c && !((char *)obj >= c->base && (char *)obj < c->base + PCPU_SLOT_STRIDE))
			c = c->next;
		if (c)
			file_off = (off_t)(chunk_file_off(zone, c->no) + (uint64_t)((char *)obj - c->base));
		else
			fd = -1; /* cannot happen for a live object; read the mapping */
	}
	pthread_mutex_unlock(&zone->lock);

	/* Zero outside the lock: the object is no longer live, nobody else
	 * can be handed it until it is on a free list. */
	for (slot = 0; slot < pcpu__g.nslots; slot++)
		zero_quietly((char *)pcpu_slot_ptr(obj, slot), size, fd,
			     file_off + (off_t)((size_t)slot << PCPU_SLOT_STRIDE_SHIFT));

	pthread_mutex_lock(&zone->lock);
	if (size <= SMALL_MAX)
		rc = vec_push(&zone->small[size / 16 - 1], (uintptr_t)obj, size);
	else
		rc = vec_push(&zone->large, (uintptr_t)obj, size);
	pthread_mutex_unlock(&zone->lock);
	(void)rc; /* out of memory for the free list: the space is leaked, not lost data */
	return 0;
}

size_t pcpu_zone_object_size(pcpu_zone_t *zone, const void *obj)
{
	struct extent *e;
	size_t size = 0;

	if (!zone || !obj) {
		errno = EINVAL;
		return 0;
	}
	pthread_mutex_lock(&zone->lock);
	e = live_lookup(&zone->live, (uintptr_t)obj);
	if (e)
		size = e->size;
	pthread_mutex_unlock(&zone->lock);
	if (!size)
		errno = EINVAL;
	return size;
}

int pcpu_zone_contains_live(const void *obj)
{
	pcpu_zone_t *z = pcpu_zone_find(obj);
	int found = 0;
	size_t i;

	if (!z)
		return 0;
	pthread_mutex_lock(&z->lock);
	if (live_lookup(&z->live, (uintptr_t)obj)) {
		found = 1;
	} else {
		/* An element inside an array: a slow scan, debug builds only. */
		for (i = 0; i < z->live.cap && !found; i++) {
			struct extent *e = &z->live.slots[i];

			found = e->addr > 1 && (uintptr_t)obj > e->addr &&
				(uintptr_t)obj < e->addr + e->size;
		}
	}
	pthread_mutex_unlock(&z->lock);
	return found;
}

int pcpu_zone_attach_file(pcpu_zone_t *zone, int fd, uint64_t file_base,
			  pcpu_zone_chunk_fn *on_chunk, void *ctx)
{
	struct chunk *c;
	int rc = 0;

	if (!zone || fd < 0 || file_base % (uint64_t)page_size() != 0) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&zone->lock);
	if (zone->fd >= 0 || zone->live.used - zone->live.tombstones != 0) {
		/* Live objects cannot move into the file: threads hold
		 * pointers to them and add to them without any lock. */
		pthread_mutex_unlock(&zone->lock);
		errno = EBUSY;
		return -1;
	}
	zone->fd = fd;
	zone->file_base = file_base;
	zone->on_chunk = on_chunk;
	zone->on_chunk_ctx = ctx;
	for (c = zone->chunks; c && rc == 0; c = c->next) {
		struct pcpu__chunk_hdr hdr = *(struct pcpu__chunk_hdr *)c->base;

		rc = map_file_chunk(zone, c->no, c->base);
		if (rc == 0) {
			*(struct pcpu__chunk_hdr *)c->base = hdr;
			c->used = PCPU__CHUNK_HDR_SIZE; /* nothing live: start afresh */
			if (on_chunk)
				on_chunk(ctx, c->no, c->base, chunk_file_off(zone, c->no));
		}
	}
	if (rc == 0) {
		/* Free lists point into the old memory's layout; it is all
		 * free, so forget them and let bump allocation take over. */
		for (size_t i = 0; i < SMALL_CLASSES; i++)
			zone->small[i].n = 0;
		zone->large.n = 0;
	} else {
		zone->fd = -1; /* leaves the zone usable, private, if half-mapped */
	}
	pthread_mutex_unlock(&zone->lock);
	return rc;
}

size_t pcpu_zone_chunk_count(pcpu_zone_t *zone)
{
	size_t n;

	pthread_mutex_lock(&zone->lock);
	n = zone->chunks ? zone->chunks->no + 1 : 0;
	pthread_mutex_unlock(&zone->lock);
	return n;
}
