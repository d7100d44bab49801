/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces between pcpu's source files. Nothing here is exported.
 */
#ifndef PCPU_INTERNAL_H
#define PCPU_INTERNAL_H

#include <pcpu/pcpu.h>
#include <pthread.h>

#define PCPU_HIDDEN __attribute__((visibility("hidden")))

/* ---- rseq.c: process init, per-thread rseq registration ------------------- */

/* Process-wide way of using rseq, decided once by pcpu_init(). */
enum pcpu_process_mode {
	PCPU_PROCESS_GLIBC = 1, /* glibc registered every thread's area */
	PCPU_PROCESS_OWN = 2,   /* pcpu registers its own area per thread */
	PCPU_PROCESS_NONE = 3,  /* rseq disabled: fallback everywhere */
};

/* Initialises everything once: pcpu__g (normally already done at load
 * time), the mode, and pcpu_slot_count. Safe to call from any thread, any
 * number of times; async-signal-safe. */
PCPU_HIDDEN void pcpu_init(void);

/* Number of slots (pcpu_nslots()), valid once pcpu_init() ran -- always the
 * case where a zone exists. */
PCPU_HIDDEN extern uint32_t pcpu_slot_count;

/* The index every zone of this process uses (never PCPU_INDEX_DEFAULT). */
PCPU_HIDDEN enum pcpu_index pcpu_process_index(void);

/* The slot assigned to the calling thread for its fallback adds, plus one
 * (0: none yet); and the call that assigns one, round-robin. */
PCPU_HIDDEN extern __thread uint32_t pcpu_t_fallback_slot_plus1
	__attribute__((tls_model("initial-exec")));
PCPU_HIDDEN uint32_t pcpu_fallback_slot_assign(void);

/* Slot the calling thread uses on the fallback path: its current CPU/mm_cid
 * when its area is registered (locality), else the slot assigned to the
 * thread on its first fallback add. Inline: it is on the fallback add's
 * path, which the benchmark compares with a bare `lock add`. */
static inline char *pcpu_thread_pointer(void)
{
	return pcpu__arch_thread_pointer(); /* pcpu/arch.h, every target */
}

static inline uint32_t pcpu_fallback_slot(void)
{
	char *tp = pcpu_thread_pointer();
	int32_t idx = __atomic_load_n((int32_t *)(tp + pcpu__g.index_tpoff), __ATOMIC_RELAXED);
	uint32_t plus1;

	if (PCPU_LIKELY((uint32_t)idx < pcpu_slot_count))
		return (uint32_t)idx;
	plus1 = pcpu_t_fallback_slot_plus1;
	if (PCPU_LIKELY(plus1 != 0))
		return plus1 - 1;
	return pcpu_fallback_slot_assign();
}

/* ---- zone.c: the per-CPU allocator --------------------------------------- */

/* pcpu's default zone for counters (PCPU_INDEX_DEFAULT), created on first
 * use. NULL with errno on failure. */
PCPU_HIDDEN pcpu_zone_t *pcpu_default_zone(void);

/* The zone whose chunks contain `addr`, or NULL. Safe on any address: it
 * searches the chunk table, never dereferences `addr`. */
PCPU_HIDDEN pcpu_zone_t *pcpu_zone_find(const void *addr);

/* For the fork() child handlers of the layers above the zone (they run
 * after the zone's, fork.c): `obj`'s address in a read-only mapping of the
 * parent's live file, if obj is an object of a zone that was shared until
 * this fork() and is now the child's private copy; NULL otherwise (a
 * private zone, outside those handlers, or the mapping failed). What the
 * view shows goes on changing: the parent's threads write it. Valid until
 * the last child handler (rank PCPU_FORK_LATE) unmaps it. Reading a page of
 * the view that is a hole in the file would allocate it: read only where
 * the child's copy holds data. */
PCPU_HIDDEN const void *pcpu__zone_fork_parent_view(const void *obj);

/* Called for every chunk a shared zone has and gets: its number, its
 * address, and its offset in the zone's file. Under the zone's lock. */
typedef void pcpu_zone_chunk_fn(void *ctx, unsigned chunk_no, char *base, uint64_t file_off);

/* Moves a zone with no live object into a file (a statistics segment):
 * chunk i becomes a MAP_SHARED mapping of `fd` at file_base + i *
 * nslots * PCPU_SLOT_STRIDE, now and for every chunk it grows. Returns 0, or
 * -1 with errno EBUSY (live objects, or already shared), EINVAL, or what
 * ftruncate/mmap said. A fork() child leaves the file: zone.c's fork
 * handlers give it a private copy at the same addresses. */
PCPU_HIDDEN int pcpu_zone_attach_file(pcpu_zone_t *zone, int fd, uint64_t file_base,
				      pcpu_zone_chunk_fn *on_chunk, void *ctx);

/* Told (under the zone's lock) when a reserved shared zone could not
 * allocate its file's pages for an object or a chunk: err is ENOSPC,
 * ENOMEM, EFBIG... The allocation then fails with that errno. */
typedef void pcpu_zone_nospace_fn(void *ctx, int err);

/* pcpu_zone_attach_file(), and with `reserve`, the file's pages under every
 * object are allocated (through the mapping, else fallocate: zone.c) in
 * every region, slots and mirrors,
 * before the object is handed out, so that no write through the mapping can
 * fault for lack of space (a full tmpfs answers a write fault with SIGBUS).
 * Allocation then fails cleanly with ENOSPC (on_nospace(ctx, err) is
 * called), and freed memory stays allocated in the file for reuse. Cost: a
 * page in each of the 2 * nslots regions per page of slot 0 holding
 * objects. On failure the zone stays private and usable. */
PCPU_HIDDEN int pcpu_zone_attach_file_reserved(pcpu_zone_t *zone, int fd, uint64_t file_base,
					       pcpu_zone_chunk_fn *on_chunk,
					       pcpu_zone_nospace_fn *on_nospace, void *ctx,
					       int reserve);

/* Number of chunks of a zone (they are numbered 0 .. n-1). */
PCPU_HIDDEN size_t pcpu_zone_chunk_count(pcpu_zone_t *zone);

/* Allocates `len` bytes of file `fd` at `off` without writing them
 * (fallocate, keeping the size; zeros written where fallocate is not
 * supported). 0, or -1 with errno (ENOSPC, ENOMEM, EFBIG...). Used by the
 * zone for a shared zone's pages and by the segment for its directory. */
PCPU_HIDDEN int pcpu_file_allocate(int fd, uint64_t off, uint64_t len);

/* pcpu_file_allocate() for pages mapped (MAP_SHARED) at p: write-faults
 * them in through the mapping where the kernel can (MADV_POPULATE_WRITE),
 * so that the mapping's MADV_NOHUGEPAGE holds on a tmpfs that hands out
 * huge pages; else fallocate(). Same errors. */
PCPU_HIDDEN int pcpu_file_allocate_mapped(int fd, char *p, uint64_t off, size_t len);

/* Advises the kernel not to back [p, p + len) with transparent huge pages
 * (memory pcpu writes sparsely); errno kept, failure ignored (a kernel
 * without THP). */
PCPU_HIDDEN void pcpu_no_huge_pages(void *p, size_t len);

/* Whether `obj` lies inside a live allocation of some zone (debug checks). */
PCPU_HIDDEN int pcpu_zone_contains_live(const void *obj);

/* Marks the chunk holding `obj` as having mirror words in use, before the
 * caller's first atomic write there, so fetches read the mirror from then
 * on. Async-signal-safe: one load, and an atomic OR the first time. */
static inline void pcpu_mirror_mark(const void *obj)
{
	struct pcpu__chunk_hdr *h = pcpu__chunk_of(obj);

	if (PCPU_UNLIKELY(__atomic_load_n(&h->mirror_delta, __ATOMIC_RELAXED) == 0)) {
		__atomic_fetch_or(&h->flags, PCPU__CHUNK_MIRROR_USED, __ATOMIC_SEQ_CST);
		/* After the flag: whoever takes the inline atomic add because
		 * it reads the delta finds the flag set for fetches. */
		__atomic_store_n(&h->mirror_delta,
				 (int64_t)((uint64_t)pcpu_slot_count << PCPU_SLOT_STRIDE_SHIFT),
				 __ATOMIC_RELEASE);
	}
}

/* Whether fetches must read the mirror words of the chunk holding `obj`.
 * A fetch that reads the flag clear can only miss mirror writes that are
 * concurrent with it (the writer sets the flag first), which a fetch may
 * miss anyway: it is not a point-in-time snapshot. */
static inline int pcpu_mirror_in_use(const void *obj)
{
	return (__atomic_load_n(&pcpu__chunk_of(obj)->flags, __ATOMIC_ACQUIRE) &
		PCPU__CHUNK_MIRROR_USED) != 0;
}

/* The mirror word of slot `slot` of the 8-byte word at `obj`. */
static inline int64_t *pcpu_mirror_word(const void *obj, uint32_t slot)
{
	return (int64_t *)pcpu__mirror_ptr(obj, pcpu_slot_count, slot);
}

/* ---- fork.c: one pthread_atfork for every layer ---------------------------- */

/* Layers, lowest first: a layer may take a lower layer's locks while holding
 * its own, never the reverse. prepare handlers run from the highest rank
 * down, parent and child handlers from the lowest up (fork.c). */
enum pcpu_fork_rank {
	PCPU_FORK_ZONE = 0,     /* zone.c */
	PCPU_FORK_COUNTER = 1,  /* counter.c */
	PCPU_FORK_STATS = 2,    /* stats zone, gauges, groups */
	PCPU_FORK_REGISTRY = 3, /* registries */
	PCPU_FORK_SEGMENT = 4,  /* the segment writer */
	PCPU_FORK_SYSCTL = 5,   /* counter(9) sysctl records */
	PCPU_FORK_LATE = 6,     /* zone.c: the child's last step (parent views) */
};

/* Registers a subsystem's fork handlers (any may be NULL) once: `*once` is
 * the subsystem's flag, set when registered (a later call is one load).
 * Call it before the subsystem first takes a lock of its own, and never
 * while holding any pcpu lock. Returns 0, or -1 with errno ENOMEM
 * (pthread_atfork failed). Thread-safe; not async-signal-safe. */
PCPU_HIDDEN int pcpu_fork_register(int *once, enum pcpu_fork_rank rank, void (*prepare)(void),
				   void (*parent)(void), void (*child)(void));

#endif /* PCPU_INTERNAL_H */
