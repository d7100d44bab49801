/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces between pcpu's source files. Nothing here is exported.
 */
#ifndef PCPU_INTERNAL_H
#define PCPU_INTERNAL_H

#include <pcpu/pcpu.h>
#include <pthread.h>

#include "visibility.h"
#include "zone_backing.h"
#include "zone_mirror.h"

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

/* Whether `obj` lies inside a live allocation of some zone (debug checks). */
PCPU_HIDDEN int pcpu_zone_contains_live(const void *obj);

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
