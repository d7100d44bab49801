/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/hcounter.h
 * Hierarchical per-CPU counters: a per-CPU counter whose approximate value,
 * with bounds on the precise sum, is read in O(1) -- Linux's hierarchical
 * per-CPU counters (Mathieu Desnoyers, "Introduce Hierarchical Per-CPU
 * Counters", core-api/percpu-counter-tree) for user space, with exact
 * comparisons and a limited add.
 *
 * Why: a pcpu_counter_t's read sums every CPU's word (16 loads on 16 CPUs),
 * the right trade for statistics but not for a decision taken on every
 * request -- a connection limit, a memory quota (a cache's used memory
 * against its maximum), a token bucket, admission control -- where programs
 * fall back to one shared atomic, which every update then fights over. An
 * hcounter adds like a pcpu counter (one rseq sequence on the thread's
 * slot), and reads its approximation from one cache line.
 *
 * How. Each slot's word counts its own adds. When an add moves the word
 * across a multiple of the batch B (2, 4, 8 ... 2^30), the difference of the
 * two multiples -- the carry -- is added, atomically, to an item of the
 * next level of a tree; an item's carries move up when its value crosses a
 * multiple of its own batch (B times the arity, per level), and the top
 * level's land in the root. The root is the approximation: what every carry
 * has brought. The precise sum is the slots' words (and the central word,
 * below); the approximation lags it by each word's and item's remainder
 * below its batch, so at any quiescent point
 *     root <= precise sum <= root + range,
 *     range = n x (B - 1) + sum over levels l >= 1 of n_l x (B_l - B_(l-1)),
 * n the slots, n_l the items of level l, B_l = B x arity^l: about
 * B x n x (levels - 1) (the kernel's batch x n x log(n)). Carries on their
 * way up are counted too (each carrying add reserves its carry's room in
 * an in-flight word before it commits), so for a counter that only grows
 * the bounds hold during concurrent adds as well; a shrinking one's lower
 * bound likewise.
 *
 * The tree's shape, from the CPU slots n (pcpu_nslots() without the owned
 * slots): no intermediate level up to 16 (the slots carry into the root),
 * then arity 8 with as many levels as needed, then 16 above 4096 slots: at
 * most 5 levels from the slots to the root (the kernel's choice). 16 CPUs,
 * B = 32: range 496; 64 CPUs: 64 x 31 + 8 x 224 = 3,776. Only the walked
 * slots (pcpu_slot_walked(): the CPUs present at start-up) are written or
 * read: the tree's items live in their copies, and the gates and sums
 * visit them alone, so memory follows the present CPUs, not the possible
 * ones. A CPU hot-added later is not among them unless PCPU_SLOT_WALK=all.
 *
 * Reading: pcpu_hcounter_approx() returns the root's value and the bounds
 * (one cache line, a few loads, no walk: O(1) whatever the CPU count);
 * pcpu_hcounter_compare() says how the precise sum compares to a value,
 * summing the slots only when the bounds straddle it;
 * pcpu_hcounter_sum() sums them.
 *
 * Limits: pcpu_hcounter_limited_add(h, v, limit) adds v only if the precise
 * sum stays at most `limit`, and never lets it pass (among the counter's
 * limited adds with that limit; a negative v always succeeds). While the
 * bounds leave room -- root + range + in-flight <= limit -- it is the plain
 * add, with a check of the root's line. Near the limit the counter switches
 * to its precise mode: every slot's word is gated (its mask, below) and a
 * fence (pcpu_rseq_fence()) stops the sequences, the slots' sum is taken
 * once, and adds go to one central word by compare-and-swap, checked
 * exactly against the limit; once the sum is back below limit - 2 x range
 * it switches back, if the per-CPU bounds with every reserved carry (adds
 * checked before the precise mode began, still to commit) leave the limit
 * unpassed; else it stays precise. Adds of other threads meanwhile are
 * atomic adds on the central word: exact, but contended, which near the
 * limit is what exactness costs (a CAS-loop limiter pays it all the time).
 *
 * Every mode is exact: no add is lost or doubled. Without rseq or
 * membarrier (pcpu_sync_percpu_error()) a counter is atomic from its
 * creation: every add is an atomic add on the central word, every read
 * exact.
 *
 * fork(): the child gets a copy of every counter as it was (slot words,
 * tree, central word); nothing is shared afterwards. A pre-fork tree's
 * shared registry cannot hold one (pcpu_hcounter_create_in() refuses its
 * zone with EOPNOTSUPP): the precise mode and reset need a fence that stops
 * every process's sequences, which membarrier does for one process only;
 * and a process killed between a carrying add's reservation and its
 * release, or in the middle of a switch, would leave the bounds loose or
 * the switch unfinished for the others, with nothing to repair them.
 *
 * Memory: (3 + levels - 2) x 64 bytes of address space per slot, in
 * pcpu's default zone (or the caller's); resident where a slot adds, plus
 * slot 0's two lines of header and the tree's items.
 *
 * The fields of the structs below are private to pcpu; they are here for
 * the inline paths.
 */
#ifndef PCPU_HCOUNTER_H
#define PCPU_HCOUNTER_H

#include <pcpu/defs.h>
#include <pcpu/rseq.h>
#include <pcpu/zone.h>
#include <pcpu/percpu_ops.h>
#include <stdbool.h>

PCPU_BEGIN_DECLS

/* One slot's copy (its first cache line): the slot's word, and its mask:
 * ~(batch - 1) while per-CPU adds may commit, ~0 when the gate is closed
 * (precise mode, reset). The add commits only while the word stays in its
 * batch-aligned window (pcpu/arch/pseudocode.h: this_load_add_cbmask_store). */
struct pcpu__hcounter_slot {
	int64_t value;
	int64_t mask;
	int64_t pcpu__pad[6];
};

/* Slot 0's second line: what the reads and the limited add need, one
 * cache line, written only by carries into the root, by the central word's
 * adds and by switches. */
struct pcpu__hcounter_hdr {
	int64_t root;         /* the carries' total: the approximation */
	int64_t central;      /* 2 x (adds that bypassed the slots) + precise flag */
	int64_t inflight_pos; /* rooms reserved by carrying adds of v > 0 */
	int64_t inflight_neg; /* ... of v < 0 */
	int64_t state;        /* generation << 2 | mode (PCPU__HC_*) */
	int64_t range;        /* the bounds' width at a quiescent point */
	int64_t frozen;       /* precise mode: the slots' sum at the switch */
	int64_t mask;         /* ~(batch - 1), the slots' open mask */
};

/* The mode, in the state word's low bits. */
#define PCPU__HC_PERCPU 0    /* adds on the slots, carries up the tree */
#define PCPU__HC_SWITCHING 1 /* a switch or reset runs */
#define PCPU__HC_PRECISE 2   /* gates closed: adds on the central word */
#define PCPU__HC_ATOMIC 3    /* no rseq or membarrier: central word only */
#define PCPU__HC_MODE(state) ((state) & 3)

/** A hierarchical counter: slot 0's copy of a zone object. */
struct pcpu_hcounter {
	struct pcpu__hcounter_slot pcpu__s;
	struct pcpu__hcounter_hdr pcpu__h;
};
typedef struct pcpu_hcounter pcpu_hcounter_t;

/** What pcpu_hcounter_approx() returns: the approximation and the bounds
 * of the precise sum (min <= precise <= max; value == min == max when the
 * value is exact). */
struct pcpu_hcounter_approx {
	int64_t value; /**< the approximation (the root, plus the central word) */
	int64_t min;   /**< the precise sum is at least this */
	int64_t max;   /**< and at most this */
};

/* Out-of-line rests of the inline add and limited add. Async-signal-safe. */
PCPU_API void pcpu__hcounter_add_slow(pcpu_hcounter_t *h, int64_t v);
PCPU_API bool pcpu__hcounter_limited_add_slow(pcpu_hcounter_t *h, int64_t v, int64_t limit);

/**
 * Creates a hierarchical counter, 0, in pcpu's default zone. `batch`: the
 * slots' batch, a power of two from 2 to 2^30: larger batches mean fewer
 * carries (cheaper adds) and a wider range (see the file comment; the
 * kernel's RSS counters use 32).
 * Returns NULL with errno EINVAL (batch) or ENOMEM.
 * Thread-safe; not async-signal-safe. Cost: a zone allocation; the first
 * per-CPU object of a process also registers membarrier (one system call).
 */
PCPU_API pcpu_hcounter_t *pcpu_hcounter_create(int64_t batch);

/**
 * pcpu_hcounter_create() in the caller's zone (pcpu/zone.h). Fails with
 * EINVAL (zone NULL, batch) or EOPNOTSUPP for a zone shared by a process
 * tree (see the file comment), ENOMEM. Thread-safe; not async-signal-safe.
 * Cost: as pcpu_hcounter_create().
 */
PCPU_API pcpu_hcounter_t *pcpu_hcounter_create_in(pcpu_zone_t *zone, int64_t batch);

/**
 * Frees the counter. NULL is a no-op. The caller guarantees no thread uses
 * it any more. Not thread-safe (no other use meanwhile); not
 * async-signal-safe. Cost: a zone free.
 */
PCPU_API void pcpu_hcounter_destroy(pcpu_hcounter_t *h);

/**
 * The precise sum: every slot's word, plus the central word. Not a
 * snapshot (as pcpu_counter_fetch(): each slot read once); exact once adds
 * have stopped; for a counter only added to with v >= 0, never below the
 * precise sum when the call began nor above it when it returned.
 * NULL: 0 with errno EINVAL. Thread-safe; async-signal-safe. Cost: one load
 * per CPU slot (the walk of pcpu_counter_fetch()); in precise mode, two
 * loads.
 */
PCPU_API int64_t pcpu_hcounter_sum(const pcpu_hcounter_t *h);

/**
 * How the precise sum compares to v: < 0 below, 0 equal, > 0 above. From
 * the bounds when they decide (v outside [min, max], or min == max), else
 * from pcpu_hcounter_sum(). Exact once adds have stopped; during adds, as
 * exact as the sum is. NULL: 0 with errno EINVAL. Thread-safe;
 * async-signal-safe. Cost: pcpu_hcounter_approx(), and a sum only when v
 * lies within the bounds.
 */
PCPU_API int pcpu_hcounter_compare(const pcpu_hcounter_t *h, int64_t v);

/**
 * Sets the counter to 0: every slot's word, the tree, the central word.
 * Adds that run meanwhile land wholly before (and are erased) or wholly
 * after it. Returns 0, or -1 with errno EINVAL (NULL) or membarrier's
 * (EPERM, ENOSYS) when the fence was refused and the CPU walk too (the
 * counter is left as it was). Thread-safe (one reset or switch at a time,
 * the others wait); not async-signal-safe. Cost: a fence
 * (pcpu_rseq_fence()), a store into every slot's copy; atomic mode: one
 * exchange.
 */
PCPU_API int pcpu_hcounter_reset(pcpu_hcounter_t *h);

/**
 * The width of the bounds at a quiescent point (the file comment's range),
 * fixed at creation; 0 for a counter in atomic mode. NULL: 0 with errno
 * EINVAL. Thread-safe; async-signal-safe. Cost: a load.
 */
PCPU_API int64_t pcpu_hcounter_range(const pcpu_hcounter_t *h);

/** 1 if the counter adds per-CPU (its per-CPU or precise mode), 0 if atomic
 * from its creation (no rseq or membarrier) and for NULL. Thread-safe;
 * async-signal-safe. Cost: a load. */
PCPU_API int pcpu_hcounter_is_percpu(const pcpu_hcounter_t *h);

#ifdef PCPU_NO_INLINE
/* The stable tier (src/core/hcounter_stable_abi.c), documented below. */
PCPU_API void pcpu_hcounter_add(pcpu_hcounter_t *h, int64_t v);
PCPU_API bool pcpu_hcounter_limited_add(pcpu_hcounter_t *h, int64_t v, int64_t limit);
PCPU_API struct pcpu_hcounter_approx pcpu_hcounter_approx(const pcpu_hcounter_t *h);
#endif

/* The inline add, for both tiers. */
__attribute__((always_inline)) static inline void pcpu__hcounter_add_inline(pcpu_hcounter_t *h,
									   int64_t v)
{
	if (PCPU_UNLIKELY(pcpu__rseq_this_load_add_cbmask_store(&h->pcpu__s.value, v) !=
			  PCPU_RSEQ_COMMITTED))
		pcpu__hcounter_add_slow(h, v);
}

/* The inline limited add, for both tiers: while the counter is per-CPU and
 * its bounds leave room (root + range + in-flight + central <= limit), a
 * plain add that stays in its slot's window cannot take the precise sum past
 * the limit (the range counts that window already). */
__attribute__((always_inline)) static inline bool
pcpu__hcounter_limited_add_inline(pcpu_hcounter_t *h, int64_t v, int64_t limit)
{
	const struct pcpu__hcounter_hdr *hd = &h->pcpu__h;

	if (PCPU_LIKELY(v > 0 && PCPU__HC_MODE(__atomic_load_n(&hd->state, __ATOMIC_ACQUIRE)) ==
					 PCPU__HC_PERCPU)) {
		int64_t room = limit - hd->range -
			       __atomic_load_n(&hd->inflight_pos, __ATOMIC_ACQUIRE);

		room -= __atomic_load_n(&hd->root, __ATOMIC_ACQUIRE);
		room -= __atomic_load_n(&hd->central, __ATOMIC_RELAXED) >> 1;
		if (PCPU_LIKELY(room >= 0 &&
				pcpu__rseq_this_load_add_cbmask_store(&h->pcpu__s.value, v) ==
					PCPU_RSEQ_COMMITTED))
			return true;
	}
	return pcpu__hcounter_limited_add_slow(h, v, limit);
}

/* The approximation, for both tiers: the in-flight words first, then the
 * root (a carry's reservation is released after it lands). */
static inline struct pcpu_hcounter_approx pcpu__hcounter_approx_inline(const pcpu_hcounter_t *h)
{
	const struct pcpu__hcounter_hdr *hd = &h->pcpu__h;
	struct pcpu_hcounter_approx a;

	for (;;) {
		int64_t st = __atomic_load_n(&hd->state, __ATOMIC_ACQUIRE);
		int64_t neg = __atomic_load_n(&hd->inflight_neg, __ATOMIC_ACQUIRE);
		int64_t pos = __atomic_load_n(&hd->inflight_pos, __ATOMIC_ACQUIRE);
		int64_t root = __atomic_load_n(&hd->root, __ATOMIC_ACQUIRE);
		int64_t central = __atomic_load_n(&hd->central, __ATOMIC_ACQUIRE) >> 1;

		/* These bounds hold in every mode (the slots' sum lies within
		 * the tree's range of the root, the central word is exact). */
		if (PCPU_LIKELY(PCPU__HC_MODE(st) <= PCPU__HC_SWITCHING)) {
			a.value = root + central;
			a.min = a.value - neg;
			a.max = a.value + hd->range + pos;
			return a;
		}
		/* Precise or atomic: the value is exact (the slots' sum frozen,
		 * or 0), if the mode did not change meanwhile. */
		a.value = central + __atomic_load_n(&hd->frozen, __ATOMIC_RELAXED);
		if (__atomic_load_n(&hd->state, __ATOMIC_ACQUIRE) == st) {
			a.min = a.max = a.value;
			return a;
		}
	}
}

#ifndef PCPU_NO_INLINE
/**
 * Adds v (negative allowed). Fast path: one rseq sequence on the calling
 * thread's slot (an add that stays in the slot's batch window: the counter
 * add's shape with a load, an xor and a test more); an add that crosses a
 * multiple of the batch carries up the tree (a few atomic adds, out of
 * line). Exact in every mode. Thread-safe; async-signal-safe (a handler may
 * add to the counter the code it interrupted is adding to). Cost: one rseq
 * sequence (bench/README.md measures it beside pcpu_counter_add()); a carry
 * a few atomic adds more, once per batch of adds on a slot.
 */
__attribute__((always_inline)) static inline void pcpu_hcounter_add(pcpu_hcounter_t *h, int64_t v)
{
	pcpu__hcounter_add_inline(h, v);
}

/**
 * Adds v only if the precise sum stays at most `limit` after it: returns
 * true if added, false (nothing added) if it would have passed. Never lets
 * the precise sum pass the limit through a limited add: with T threads
 * making N limited adds of 1 each against a limit below T x N, exactly
 * `limit` are admitted (minus any the other adds took). A v <= 0 is added
 * and returns true. The guarantee is among limited adds with the same (or a
 * larger) limit; a plain pcpu_hcounter_add() of v > 0 is outside it.
 * A signal handler's limited add that interrupted its own thread in the
 * middle of a mode switch or a reset refuses (false): waiting for the
 * switch would wait for the code it interrupted.
 * Thread-safe; async-signal-safe. Cost: while the bounds leave room, the
 * add and a check of the root's cache line; near the limit, a CAS on the
 * central word (and once per approach, a switch: a fence).
 */
__attribute__((always_inline)) static inline bool pcpu_hcounter_limited_add(pcpu_hcounter_t *h,
									    int64_t v, int64_t limit)
{
	return pcpu__hcounter_limited_add_inline(h, v, limit);
}

/**
 * The approximation and the bounds of the precise sum (see the file
 * comment): O(1), one cache line, no walk of the slots. At a quiescent
 * point min <= precise sum <= max; during adds, the bounds contain the
 * precise sum of a counter that only grows (or only shrinks) at the
 * instant of the read. In precise or atomic mode the value is exact and
 * min == value == max. Thread-safe; async-signal-safe. Cost: five loads of
 * one cache line (bench/README.md measures it beside a shared atomic's
 * load).
 */
static inline struct pcpu_hcounter_approx pcpu_hcounter_approx(const pcpu_hcounter_t *h)
{
	return pcpu__hcounter_approx_inline(h);
}
#endif

PCPU_END_DECLS

#endif /* PCPU_HCOUNTER_H */
