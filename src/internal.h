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

/* Initialises the globals (pcpu__g, mode, mm_cid support) once. Safe to
 * call from any thread, any number of times; async-signal-safe once done. */
PCPU_HIDDEN void pcpu_init(void);

/* Slot the calling thread uses on the fallback path for an object whose
 * zone indexes by the rseq field at `index_off`: the thread's current
 * CPU/mm_cid when its area is registered (locality), else a slot assigned to
 * the thread round-robin on first use (no system call per add). */
PCPU_HIDDEN uint32_t pcpu_fallback_slot(uint32_t index_off);

/* ---- zone.c: the per-CPU allocator --------------------------------------- */

/* pcpu's default zone for counters (PCPU_INDEX_DEFAULT), created on first
 * use. NULL with errno on failure. */
PCPU_HIDDEN pcpu_zone_t *pcpu_default_zone(void);

/* The zone whose chunks contain `addr`, or NULL. Safe on any address: it
 * searches the chunk table, never dereferences `addr`. */
PCPU_HIDDEN pcpu_zone_t *pcpu_zone_find(const void *addr);

/* Called for every chunk a shared zone has and gets: its number, its
 * address, and its offset in the zone's file. Under the zone's lock. */
typedef void pcpu_zone_chunk_fn(void *ctx, unsigned chunk_no, char *base, uint64_t file_off);

/* Moves a zone with no live object into a file (a statistics segment):
 * chunk i becomes a MAP_SHARED mapping of `fd` at file_base + i *
 * nslots * PCPU_SLOT_STRIDE, now and for every chunk it grows. Returns 0, or
 * -1 with errno EBUSY (live objects, or already shared), EINVAL, or what
 * ftruncate/mmap said. fork() children share the file's counters. */
PCPU_HIDDEN int pcpu_zone_attach_file(pcpu_zone_t *zone, int fd, uint64_t file_base,
				      pcpu_zone_chunk_fn *on_chunk, void *ctx);

/* Number of chunks of a zone (they are numbered 0 .. n-1). */
PCPU_HIDDEN size_t pcpu_zone_chunk_count(pcpu_zone_t *zone);

/* Whether `obj` lies inside a live allocation of some zone (debug checks). */
PCPU_HIDDEN int pcpu_zone_contains_live(const void *obj);

/* ---- counter.c ------------------------------------------------------------ */

/* fork() handlers for the reset locks (called by zone.c's atfork handlers). */
PCPU_HIDDEN void pcpu_counter_atfork_prepare(void);
PCPU_HIDDEN void pcpu_counter_atfork_release(void);

#endif /* PCPU_INTERNAL_H */
