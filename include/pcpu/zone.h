/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/zone.h
 * Per-CPU memory zones: UMA_ZONE_PCPU brought to user space.
 *
 * A zone hands out objects of any small size. Each object has one copy per
 * slot (per possible CPU, or per rseq mm_cid), and the copy for slot i lives
 * at `obj + i * PCPU_SLOT_STRIDE`: the handle the allocator returns is the
 * address of slot 0's copy, and finding another slot's copy is a shift and an
 * add. Layout of one chunk of a zone (nslots regions of PCPU_SLOT_STRIDE bytes,
 * the first aligned to PCPU_SLOT_STRIDE):
 *
 *     slot 0: [chunk header | obj A | obj B | arr C ........ | free ...]
 *     slot 1: [ (unused)    | obj A | obj B | arr C ........ | free ...]
 *     ...
 *     slot n-1: ...
 *
 * Objects of one slot are packed densely and share cache lines with each
 * other, never with another slot's (the slots are PCPU_SLOT_STRIDE apart).
 * The address space is reserved with MAP_NORESERVE and never touched by the
 * allocator itself, so only pages that some slot writes become resident: a
 * process that runs on 2 of 64 possible CPUs pays memory for 2 slots.
 * A zone grows by whole chunks when full; it never moves an object.
 *
 * The slot index is chosen per zone: the CPU number (rseq cpu_id), or the
 * rseq mm_cid (Linux >= 6.3), a dense per-process id below
 * min(running threads, CPUs), so a process with 4 threads on a 64-CPU machine
 * touches at most 4 slots. PCPU_INDEX_DEFAULT picks mm_cid where the kernel
 * provides it (see pcpu_zone_create() for why), else the CPU number.
 */
#ifndef PCPU_ZONE_H
#define PCPU_ZONE_H

#include <pcpu/common.h>

PCPU_BEGIN_DECLS

/** Largest object (slot-0 bytes) one zone allocation may have. */
#define PCPU_ZONE_MAX_OBJECT (PCPU_SLOT_STRIDE - 4096)

/** Which per-thread number selects an object's slot. */
enum pcpu_index {
	PCPU_INDEX_DEFAULT = 0, /**< mm_cid where available, else cpu */
	PCPU_INDEX_CPU = 1,     /**< rseq cpu_id: the CPU the thread runs on */
	PCPU_INDEX_MM_CID = 2,  /**< rseq mm_cid: dense concurrency id */
};

typedef struct pcpu_zone pcpu_zone_t;

/* The first bytes of every chunk's slot-0 region; read-only once the chunk
 * exists. The fast path finds it by masking an object's address. */
struct pcpu__chunk_hdr {
	uint32_t magic;
	uint32_t index_off; /* offset of cpu_id or mm_cid in struct rseq */
	/* No pointer here: a shared zone's chunks are readable by other
	 * processes, and an address would hand them the writer's layout. */
};
#define PCPU__CHUNK_MAGIC 0x70637075u /* "pcpu" */
/* Two cache lines, so adjacent-line prefetch never pairs the read-only
 * header with counters that slot 0's CPU writes. */
#define PCPU__CHUNK_HDR_SIZE 128

static inline const struct pcpu__chunk_hdr *pcpu__chunk_of(const void *obj)
{
	return (const struct pcpu__chunk_hdr *)((uintptr_t)obj &
						~(uintptr_t)(PCPU_SLOT_STRIDE - 1));
}

/**
 * Creates a zone whose objects are indexed by `index`.
 *
 * PCPU_INDEX_DEFAULT resolves to PCPU_INDEX_MM_CID when the kernel fills
 * mm_cid, because an add costs the same either way (one load of a field of
 * the same struct rseq) while mm_cid keeps the touched slots, and so the
 * resident memory and the cost of every fetch's walk over written pages, at
 * the number of threads that run at once rather than the number of CPUs they
 * ever ran on. The benchmark suite (bench/) measures both.
 * PCPU_INDEX_MM_CID on a kernel without mm_cid falls back to PCPU_INDEX_CPU;
 * pcpu_zone_index() reports what the zone uses.
 *
 * Returns NULL with errno EINVAL (unknown index) or ENOMEM. Reserves
 * nslots * PCPU_SLOT_STRIDE bytes of address space, none of it resident.
 * Thread-safe; not async-signal-safe. Cost: an mmap.
 */
PCPU_API pcpu_zone_t *pcpu_zone_create(enum pcpu_index index);

/**
 * Destroys a zone and unmaps all its memory. Every object of the zone
 * becomes invalid; the caller guarantees no thread still uses one.
 * NULL is a no-op. Not async-signal-safe.
 */
PCPU_API void pcpu_zone_destroy(pcpu_zone_t *zone);

/** The index the zone actually uses (never PCPU_INDEX_DEFAULT). */
PCPU_API enum pcpu_index pcpu_zone_index(const pcpu_zone_t *zone);

/**
 * Allocates an object of `size` bytes per slot, aligned to `align` (a power
 * of two up to 4096; 0 means 16). Every slot's copy reads as zero, also when
 * the memory is reused from a freed object. Returns the handle (slot 0's
 * copy) or NULL with errno: EINVAL (zone NULL, size 0, bad alignment),
 * E2BIG (size > PCPU_ZONE_MAX_OBJECT), ENOMEM (no address space).
 * Thread-safe (one mutex per zone); not async-signal-safe.
 * Cost: amortised O(1); a new chunk costs an mmap.
 */
PCPU_API void *pcpu_zone_alloc(pcpu_zone_t *zone, size_t size, size_t align);

/**
 * Frees an object. Its slots are zeroed for reuse without making untouched
 * pages resident (untouched pages already read as zero; whole pages are
 * handed back to the kernel). Returns 0, or -1 with errno EINVAL if `obj`
 * is not a live object of `zone` (double free, foreign pointer): nothing is
 * changed then. NULL is a no-op returning 0.
 * Thread-safe; not async-signal-safe.
 */
PCPU_API int pcpu_zone_free(pcpu_zone_t *zone, void *obj);

/**
 * Size in bytes of a live object (what was asked for, rounded up to 16),
 * or 0 with errno EINVAL if `obj` is not a live object of `zone`.
 */
PCPU_API size_t pcpu_zone_object_size(pcpu_zone_t *zone, const void *obj);

/**
 * The zone whose slot-0 memory contains `obj` (any address inside an
 * object), or NULL with errno EINVAL for an address no zone owns. Safe on
 * any pointer: it searches pcpu's table of chunks and never dereferences
 * `obj`. Thread-safe; not async-signal-safe (a read lock). Cost: a binary
 * search over all zones' chunks.
 */
PCPU_API pcpu_zone_t *pcpu_zone_of(const void *obj);

/**
 * Address of slot `slot`'s copy of `obj` (slot < pcpu_nslots()). Pure
 * arithmetic; reading it is always safe, writing it is the caller's
 * business (use counters for lossless updates).
 */
static inline void *pcpu_slot_ptr(const void *obj, unsigned slot)
{
	return (char *)(uintptr_t)obj + ((size_t)slot << PCPU_SLOT_STRIDE_SHIFT);
}

PCPU_END_DECLS

#endif /* PCPU_ZONE_H */
