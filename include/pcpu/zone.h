/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/zone.h
 * Per-CPU memory zones: UMA_ZONE_PCPU brought to user space.
 *
 * A zone hands out objects of any small size. Each object has one copy per
 * slot (per possible CPU, or per rseq mm_cid), and the copy for slot i lives
 * at `obj + i * PCPU_SLOT_STRIDE`: the handle the allocator returns is the
 * address of slot 0's copy, and finding another slot's copy is a shift and an
 * add (FreeBSD's zpcpu_get_cpu()). Layout of one chunk of a zone: 2 * nslots
 * regions of PCPU_SLOT_STRIDE bytes, the first aligned to PCPU_SLOT_STRIDE:
 *
 *     slot 0:          [chunk header | obj A | obj B | arr C ...... | free ...]
 *     slot 1:          [ (unused)    | obj A | obj B | arr C ...... | free ...]
 *     ...
 *     slot n-1:        ...
 *     mirror of 0:     [ (unused)    | obj A | obj B | arr C ...... | free ...]
 *     ...
 *     mirror of n-1:   ...
 *
 * Slot regions hold the words the rseq fast paths write (a counter is one
 * 64-bit word per slot). Mirror regions hold, at the same offsets, the words
 * only atomic read-modify-writes touch: adds that could not use rseq, and
 * offsets (resets, gauge sets). Keeping them apart keeps a counter at 8 bytes
 * per slot and the two kinds of writers off each other's words; mirror pages
 * become resident only where such a write happens, and a chunk whose mirror
 * was never written is not read by fetches (PCPU__CHUNK_MIRROR_USED).
 *
 * Objects of one slot are packed densely and share cache lines with each
 * other, never with another slot's (the slots are PCPU_SLOT_STRIDE apart).
 * The address space is reserved with MAP_NORESERVE and never touched by the
 * allocator itself, so only pages that some slot writes become resident: a
 * process that runs on 2 of 64 possible CPUs pays memory for 2 slots.
 * Every zone mapping is marked MADV_NOHUGEPAGE, so that such a write makes
 * one small page resident, not a 2 MiB transparent huge page, whatever the
 * system's THP setting (`always` is Debian's and RHEL's kernel default).
 * A zone grows by whole chunks when full; it never moves an object.
 *
 * The slot index is chosen once per process: the rseq mm_cid (Linux >= 6.3),
 * a dense per-process id below min(running threads, CPUs), where the kernel
 * provides it, else the CPU number (rseq cpu_id). The environment variable
 * PCPU_INDEX=cpu or PCPU_INDEX=mm_cid, read once at load, overrides it.
 * PCPU_INDEX=mm_cid on a kernel without mm_cid (before Linux 6.3, or
 * AT_RSEQ_FEATURE_SIZE below 32) is a visible fallback, not an error: the
 * process uses the CPU number, pcpu_zone_index(NULL) reports
 * PCPU_INDEX_CPU and pcpu_rseq_has_mm_cid() 0, and pcpu_zone_create(
 * PCPU_INDEX_MM_CID) fails with EINVAL (code that needs mm_cid asks for it
 * there). Verified in the emulated machines (scripts/vm/run-all.sh):
 * Debian 12's 6.1 kernel reports the fallback and counts exactly, the 6.12
 * kernel uses mm_cid.
 * Why per process and not per zone: the fast path then reads the index field
 * at an offset fixed for the whole process, with no per-object lookup (see
 * docs/design.md). Why mm_cid by default: an add costs the same (one load of
 * another field of the same struct rseq), while mm_cid keeps the touched
 * slots -- resident memory, and the pages every fetch walks -- at the number
 * of threads that run at once rather than the number of CPUs they ever ran
 * on.
 *
 * Caveat of mm_cid with glibc's area: if glibc's rseq registration fails for
 * some thread while it succeeded for the first one (a seccomp filter denying
 * rseq installed after start-up), that thread's area reads mm_cid 0 instead
 * of a negative index. Set PCPU_INDEX=cpu in such a process: an unregistered
 * area always reads a negative cpu_id.
 */
#ifndef PCPU_ZONE_H
#define PCPU_ZONE_H

#include <pcpu/defs.h>
#include <pcpu/rseq.h> /* enum pcpu_index, pcpu_nslots() */

PCPU_BEGIN_DECLS

/** Largest object (slot-0 bytes) one zone allocation may have. */
#define PCPU_ZONE_MAX_OBJECT (PCPU_SLOT_STRIDE - 4096)

typedef struct pcpu_zone pcpu_zone_t;

/* The first bytes of every chunk's slot-0 region. The rseq fast paths never
 * read it; fetches read `flags`; the inline atomic add
 * (pcpu_counter_add_atomic) reads `mirror_delta`. No pointer here: a shared
 * zone's chunks are readable by other processes. */
struct pcpu__chunk_hdr {
	uint32_t magic;
	uint32_t flags; /* PCPU__CHUNK_MIRROR_USED, set atomically, never cleared */
	/* 0 until the chunk's mirror words are in use, then the distance from a
	 * slot's word to its mirror word (nslots * PCPU_SLOT_STRIDE), stored
	 * after `flags` is set: one load tells the inline atomic add both that
	 * fetches read the mirror and where it is. */
	int64_t mirror_delta;
};
#define PCPU__CHUNK_MAGIC 0x70637075u /* "pcpu" */
#define PCPU__CHUNK_MIRROR_USED 1u
/* Two cache lines, so adjacent-line prefetch never pairs the header with
 * counters that slot 0's CPU writes. */
#define PCPU__CHUNK_HDR_SIZE 128

static inline struct pcpu__chunk_hdr *pcpu__chunk_of(const void *obj)
{
	return (struct pcpu__chunk_hdr *)((uintptr_t)obj &
					  ~(uintptr_t)(PCPU_SLOT_STRIDE - 1));
}

/**
 * Creates a zone whose objects are indexed by `index`.
 *
 * The index is the process's (see the file comment): PCPU_INDEX_DEFAULT
 * always works; PCPU_INDEX_CPU or PCPU_INDEX_MM_CID is a check that the
 * process uses that index, so code that depends on it (e.g. memory shared
 * between processes wants CPU numbers) fails cleanly instead of silently
 * getting the other one. pcpu_zone_index() reports what the zone uses.
 *
 * Returns NULL with errno EINVAL (unknown index, or not the process's) or
 * ENOMEM. Reserves 2 * nslots * PCPU_SLOT_STRIDE bytes of address space,
 * none of it resident.
 * Thread-safe; not async-signal-safe. Cost: an mmap.
 */
PCPU_API pcpu_zone_t *pcpu_zone_create(enum pcpu_index index);

/**
 * Destroys a zone and unmaps all its memory. Every object of the zone
 * becomes invalid; the caller guarantees no thread still uses one.
 * NULL is a no-op. Thread-safe (against other zones' calls; not against
 * uses of this zone's objects, see above); not async-signal-safe. Cost: a
 * munmap per chunk.
 */
PCPU_API void pcpu_zone_destroy(pcpu_zone_t *zone);

/** The index the zone uses: the process's (never PCPU_INDEX_DEFAULT).
 * NULL: the process's index. Thread-safe; async-signal-safe. Cost: a
 * load. */
PCPU_API enum pcpu_index pcpu_zone_index(const pcpu_zone_t *zone);

/**
 * Allocates an object of `size` bytes per slot (rounded up to 8), aligned to
 * `align` (a power of two up to 4096; 0 means 8). Every slot's copy, and
 * every mirror copy, reads as zero, also when the memory is reused from a
 * freed object. Returns the handle (slot 0's copy) or NULL with errno:
 * EINVAL (zone NULL, size 0, bad alignment), E2BIG (size >
 * PCPU_ZONE_MAX_OBJECT), ENOMEM (no address space).
 * Bookkeeping: two bits per 8 bytes of slot-0 memory (an allocation bitmap
 * and an object-start bitmap per chunk), nothing per object.
 * Thread-safe (one mutex per zone); not async-signal-safe.
 * Cost: O(1) when nothing was freed; otherwise a bitmap scan from the lowest
 * free granule (a word per 64 granules). A new chunk costs an mmap.
 */
PCPU_API void *pcpu_zone_alloc(pcpu_zone_t *zone, size_t size, size_t align);

/**
 * Frees an object. Its slots and mirror copies are zeroed for reuse without
 * making untouched pages resident (untouched pages already read as zero;
 * whole pages are handed back to the kernel). Returns 0, or -1 with errno
 * EINVAL if `obj` is not the handle of a live object of `zone` (double free,
 * foreign pointer, a pointer inside an object, memory never allocated):
 * nothing is changed then. NULL is a no-op returning 0.
 * Thread-safe; not async-signal-safe. Cost: the zone's mutex, and zeroing
 * the object in every slot that holds data (a madvise per whole page, a
 * read of the partial ones).
 */
PCPU_API int pcpu_zone_free(pcpu_zone_t *zone, void *obj);

/**
 * Size in bytes of a live object (what was asked for, rounded up to 8),
 * or 0 with errno EINVAL if `obj` is not a live object of `zone`.
 * Thread-safe; not async-signal-safe. Cost: the zone's mutex and a bitmap
 * scan over the object.
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

/* pcpu_slot_ptr()'s arithmetic, for both tiers. */
static inline void *pcpu__slot_ptr_inline(const void *obj, unsigned slot)
{
	return (char *)(uintptr_t)obj + ((size_t)slot << PCPU_SLOT_STRIDE_SHIFT);
}

/**
 * Address of slot `slot`'s copy of `obj` (slot < pcpu_nslots()): FreeBSD's
 * zpcpu_get_cpu(). For a counter, `*(uint64_t *)pcpu_slot_ptr(c, s)` is slot
 * s's rseq word. Pure arithmetic; reading it is always safe, writing it is
 * the caller's business (use counters for lossless updates).
 * Thread-safe; async-signal-safe. Cost: a shift and an add, inline (a call
 * in the stable tier, src/core/counter_stable_abi.c).
 */
#ifdef PCPU_NO_INLINE
PCPU_API void *pcpu_slot_ptr(const void *obj, unsigned slot);
#else
static inline void *pcpu_slot_ptr(const void *obj, unsigned slot)
{
	return pcpu__slot_ptr_inline(obj, slot);
}
#endif

/**
 * The calling thread's slot: its current CPU number or mm_cid where its
 * rseq area is registered, else the slot its fallback adds use (FreeBSD's
 * curcpu, for zpcpu_get()). Stale as soon as it is returned: the thread
 * can move. Initialises pcpu if needed. Thread-safe; async-signal-safe.
 * Cost: a load; a call on the fallback path.
 */
PCPU_API unsigned pcpu_current_slot(void);

/**
 * Stores v into the calling thread's slot copy of the 8-byte word at `obj`
 * and returns the previous value (FreeBSD's zpcpu_replace()). Atomic with
 * respect to counter adds on that slot: an rseq compare-and-store, retried
 * when the thread moves or is preempted. Without rseq (fallback mode) an
 * atomic exchange on the word of the thread's fallback slot: exact with
 * other callers of this function, but not with rseq adders of that slot.
 * `obj` must be an 8-byte-aligned word of a live zone object.
 * Thread-safe; async-signal-safe. Cost: a few loads and one rseq store.
 */
PCPU_API uint64_t pcpu_slot_replace(void *obj, uint64_t v);

/* Debug-build handle check (PCPU_DEBUG): prints what is wrong with `obj`
 * to stderr and aborts if it is not a live allocation of some zone; else
 * returns. Not API: the inline operations of every layer call it in
 * debug builds. */
PCPU_API void pcpu__debug_check(const void *obj, const char *func);

PCPU_END_DECLS

#endif /* PCPU_ZONE_H */
