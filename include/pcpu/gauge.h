/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/gauge.h
 * Per-CPU gauges: values that go up and down (queue depth, open flows,
 * bytes in use), with add/sub/inc/dec as cheap as a counter add, and set.
 *
 * A gauge is a counter with a set operation: 8 bytes per slot.
 *
 *     struct pcpu_gauge { struct pcpu_counter adds; }
 *
 *     value = the counter's value, read as a signed number
 *
 * Adds go to the calling thread's slot exactly as pcpu_counter_add() does.
 * pcpu_gauge_set(v) never stores into a word that rseq adders write: it
 * reads the value S and atomically adds v - S to slot 0's mirror word
 * (DPDK's "reset by offset"; pcpu/zone.h explains mirror words), so no add
 * is ever lost to a set. Concurrent sets of one gauge are serialised by a
 * lock striped over gauges, so two sets cannot both apply their offset; a
 * shared tree's gauge (PCPU_SEGMENT_SHARED_TREE, set by several processes,
 * any of which may be stopped or killed mid-set) moves the offset by
 * compare-and-swap instead, retried when another set moved it between
 * the read and the swap (src/core/counter.c, tree_set()).
 *
 * What a read guarantees: as pcpu_counter_fetch(), not a point-in-time
 * snapshot. Once adders and setters stop it is exact: the last set's value
 * plus every add that followed it. A set concurrent with adds behaves as if
 * the adds the set's read did not see came after it.
 */
#ifndef PCPU_GAUGE_H
#define PCPU_GAUGE_H

#include <pcpu/common.h>
#include <pcpu/zone.h>
#include <pcpu/counter.h>

PCPU_BEGIN_DECLS

/** One slot's copy of a gauge: 8 bytes. The field is private to pcpu. */
struct pcpu_gauge {
	struct pcpu_counter pcpu__adds; /* the adds (and set offsets) */
};

/** A gauge: the address of slot 0's copy. NULL is never a valid gauge. */
typedef struct pcpu_gauge *pcpu_gauge_t;

#ifdef PCPU_NO_INLINE
/** The stable tier (src/stats/stable_abi.c): the same operations as exported functions, each with
 * the contract of its inline version below: thread-safe, async-signal-safe,
 * lock-free. Cost: a function call plus the inline version's. */
PCPU_API void pcpu_gauge_add(pcpu_gauge_t g, int64_t v);
PCPU_API void pcpu_gauge_sub(pcpu_gauge_t g, int64_t v);
PCPU_API void pcpu_gauge_inc(pcpu_gauge_t g);
PCPU_API void pcpu_gauge_dec(pcpu_gauge_t g);
#endif

/**
 * Adds `v` (negative allowed) to gauge `g`. Same fast path and guarantees as
 * pcpu_counter_add(): exact, no lock, no atomic instruction under rseq.
 * Thread-safe; async-signal-safe. Cost: a counter add.
 */
static inline void PCPU__INLINE_OP(pcpu_gauge_add)(pcpu_gauge_t g, int64_t v)
{
	pcpu_counter_add(&g->pcpu__adds, v);
}

/** pcpu_gauge_add(g, -v). Thread-safe; async-signal-safe. */
static inline void PCPU__INLINE_OP(pcpu_gauge_sub)(pcpu_gauge_t g, int64_t v)
{
	pcpu_counter_add(&g->pcpu__adds, (int64_t)(0 - (uint64_t)v));
}

/** pcpu_gauge_add(g, 1). Thread-safe; async-signal-safe. */
static inline void PCPU__INLINE_OP(pcpu_gauge_inc)(pcpu_gauge_t g)
{
	pcpu_counter_add(&g->pcpu__adds, 1);
}

/** pcpu_gauge_add(g, -1). Thread-safe; async-signal-safe. */
static inline void PCPU__INLINE_OP(pcpu_gauge_dec)(pcpu_gauge_t g)
{
	pcpu_counter_add(&g->pcpu__adds, -1);
}

/**
 * Sets the gauge to `v`: afterwards it reads v plus whatever is added after
 * the set. Writes only slot 0's mirror word, atomically, never a word an
 * rseq adder writes.
 * Returns 0, or -1 with errno EINVAL for a NULL gauge.
 * Thread-safe, also across the processes of a shared tree; not
 * async-signal-safe (takes a mutex striped over gauges; a shared tree's
 * gauge: lock-free, a compare-and-swap retried while other sets or
 * fallback adds on slot 0 move the word).
 * Cost: a fetch and an uncontended mutex (a shared tree's: a fetch and a
 * compare-and-swap).
 */
PCPU_API int pcpu_gauge_set(pcpu_gauge_t g, int64_t v);

/**
 * Value of the gauge (see the file comment for what a read guarantees).
 * NULL: 0 with errno EINVAL. Thread-safe; async-signal-safe; lock-free.
 * Cost: a counter fetch.
 */
PCPU_API int64_t pcpu_gauge_read(pcpu_gauge_t g);

/**
 * Allocates a gauge, zero, in the statistics layer's default zone (one
 * zone, created on first use, shared by standalone gauges, histograms and
 * groups). NULL with errno ENOMEM.
 * Thread-safe; not async-signal-safe. Cost: a zone allocation (a lock, a
 * search of the zone's free space; a new chunk now and then).
 */
PCPU_API pcpu_gauge_t pcpu_gauge_alloc(void);

/**
 * Allocates a gauge in `zone`. NULL with errno EINVAL (NULL zone) or ENOMEM.
 * Thread-safe; not async-signal-safe. Cost: as pcpu_gauge_alloc().
 */
PCPU_API pcpu_gauge_t pcpu_gauge_alloc_in(pcpu_zone_t *zone);

/**
 * Frees a gauge from pcpu_gauge_alloc() or pcpu_gauge_alloc_in(). Returns 0,
 * or -1 with errno EINVAL if it was already freed (a pointer that never was
 * a gauge is undefined behaviour, as for free()). NULL is a
 * no-op. The caller guarantees no thread still uses it.
 * Thread-safe; not async-signal-safe. Cost: finding the gauge's zone by
 * address, then a zone free (zeroing the gauge in every slot).
 */
PCPU_API int pcpu_gauge_free(pcpu_gauge_t g);

PCPU_END_DECLS

#endif /* PCPU_GAUGE_H */
