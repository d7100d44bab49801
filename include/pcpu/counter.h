/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/counter.h
 * Exact 64-bit per-CPU counters: FreeBSD's counter(9) for user space.
 *
 * A counter is an object of a per-CPU zone (pcpu/zone.h): one 64-bit word
 * per slot, written only by the rseq fast path (an unlocked `add` that
 * commits an rseq critical section on the thread's own slot), and one word
 * per slot in the zone's mirror region, written only by atomic
 * read-modify-writes (the fallback add, when rseq cannot run, and resets).
 * The two never share a word, because a plain read-modify-write beside an
 * atomic one on the same word loses updates. `*(uint64_t *)pcpu_slot_ptr(c,
 * s)` is slot s's rseq word, as FreeBSD's zpcpu_get_cpu() gives it. A fetch
 * sums every slot's word, plus the mirror words where any was written.
 *
 * Adds are exact in every mode: no update is ever lost, whatever the number
 * of threads, migrations, signals or forks. What a read guarantees:
 *  - pcpu_counter_fetch() reads each slot once, one after the other. It is
 *    not a point-in-time snapshot: adds that run concurrently may or may not
 *    be included, independently per slot. Once adders stop (and their
 *    threads' stores are visible, e.g. after pthread_join), it is exact.
 *    For a counter that is only ever added non-negative values and not reset
 *    concurrently, successive fetches never decrease.
 *  - Values wrap modulo 2^64; cast the result to int64_t for a gauge.
 *  - pcpu_counter_fetch_and_zero(): every add is reported by exactly one
 *    fetch_and_zero or by the final fetch, with any number of concurrent
 *    adders and resetters. A reset never stores into a word an adder adds to
 *    non-atomically: it subtracts what it read from slot 0's mirror word
 *    (the "reset by offset" of DPDK's statistics guide).
 *
 * Two tiers (as userspace-rcu has): by default the update operations below
 * are static inline, and compile the hot path's layout (slot stride, the
 * rseq offsets) into the program, which then needs a library of the same
 * layout (version node PCPU_LAYOUT_<n>: see pcpu/version.h). A program that
 * defines PCPU_NO_INLINE before including pcpu gets the same operations as
 * functions exported by the library, with the same semantics, a call more
 * per update, and no dependency on the layout: for other languages' bindings
 * and for programs that must run with any later library.
 */
#ifndef PCPU_COUNTER_H
#define PCPU_COUNTER_H

#include <pcpu/defs.h>
#include <pcpu/rseq.h>
#include <pcpu/zone.h>
#include <pcpu/arch.h> /* the public per-CPU operations (pcpu/percpu_ops.h) */
#include <pcpu/worker.h>

PCPU_BEGIN_DECLS

/** One slot's copy of a counter: 8 bytes. The field is private to pcpu. */
struct pcpu_counter {
	int64_t pcpu__word;
};

/** A counter: the address of slot 0's copy. NULL is never a valid counter. */
typedef struct pcpu_counter *pcpu_counter_t;

/**
 * An owned slot's words of one counter array (pcpu_counter_alloc_array()):
 * DPDK's per-core struct of statistics, as a value for a worker's loop.
 * pcpu_owned_array_add(a, i, v) adds to element i through one pointer the
 * loop keeps in a register, with nothing to test: on x86-64 one `add` to
 * memory at a constant displacement from that register for a constant i,
 * Per Core's update of `core->stats.field`. pcpu_counter_add_owned()
 * instead computes the element's owned address from the claim and the
 * handle and tests the claim at every update, which in a loop that needs
 * most registers (a data plane's) costs measurably more
 * (bench/README.md, "Owned slots for pinned workers").
 * The field is private to pcpu.
 */
typedef struct pcpu_owned_array {
	int64_t *pcpu__words; /* element 0's word in the owned slot */
} pcpu_owned_array_t;

/* Consecutive aborts after which an add takes the fallback path, so a
 * debugger single-stepping through the section, or a signal storm, cannot
 * stall it. The inline path tries once; the retries are out of line. */
#define PCPU_RSEQ_MAX_TRIES 4

/* Out-of-line rest of an add whose single inline attempt did not commit:
 * registers the thread if it never was, retries rseq up to
 * PCPU_RSEQ_MAX_TRIES times, else does an atomic add on a mirror word.
 * Async-signal-safe. Not marked cold: GCC would then move each call out of
 * the caller's straight line (saving a jump per inlined add), but in the
 * fallback mode (no rseq), where every add takes it, adds measured
 * 1.2-1.6x slower. */
PCPU_API void pcpu__counter_add_slow(pcpu_counter_t c, int64_t v);

/* Out-of-line rest of an atomic add the inline path could not do (thread
 * without an index, or the chunk's mirror not yet in use): marks the
 * chunk's mirror in use and adds atomically to the mirror word of the
 * thread's fallback slot. Async-signal-safe. */
PCPU_API void pcpu__counter_add_atomic_slow(pcpu_counter_t c, int64_t v);

static inline pcpu_counter_t pcpu__counter_slot(pcpu_counter_t c, size_t idx)
{
	return (pcpu_counter_t)((char *)c + ((size_t)idx << PCPU_SLOT_STRIDE_SHIFT));
}

/* One rseq attempt: 0 once committed, nonzero if the thread is not
 * registered or the section aborted. No retry here: the loop lives in the
 * slow path, so the inline code holds no retry budget. A registered index
 * is below pcpu_nslots() (the kernel bounds cpu_id and mm_cid by the
 * possible CPUs), so an unregistered area's negative index is the only one
 * to refuse; the section reads it as 16 bits, and it fails the section's
 * own compare (pcpu/arch/pseudocode.h). */
__attribute__((always_inline)) static inline int pcpu__counter_add_once(pcpu_counter_t c,
									 int64_t v)
{
	return pcpu_rseq_this_load_add_store(&c->pcpu__word, v);
}

/* The inline add, for both tiers: the exported pcpu_counter_add() is this
 * too (src/core/counter_stable_abi.c). */
__attribute__((always_inline)) static inline void pcpu__counter_add_inline(pcpu_counter_t c,
									  int64_t v)
{
	if (PCPU_UNLIKELY(pcpu__counter_add_once(c, v) != 0))
		pcpu__counter_add_slow(c, v);
}

/* The inline atomic add, for both tiers (pcpu_counter_add_atomic()): a
 * `lock add` on the mirror word of the thread's slot, addressed from the
 * index the rseq path reads and the chunk header's mirror_delta, so the
 * common case is two loads, two tests and the `lock add` -- no call. */
__attribute__((always_inline)) static inline void pcpu__counter_add_atomic_inline(pcpu_counter_t c,
										 int64_t v)
{
	int64_t idx = pcpu__rseq_load_index();

	if (PCPU_LIKELY(idx >= 0)) {
		int64_t delta = __atomic_load_n(&pcpu__chunk_of(c)->mirror_delta, __ATOMIC_RELAXED);

		if (PCPU_LIKELY(delta != 0)) {
			__atomic_fetch_add((int64_t *)((char *)pcpu__counter_slot(c, (size_t)idx) + delta),
					   v, __ATOMIC_RELAXED);
			return;
		}
	}
	pcpu__counter_add_atomic_slow(c, v);
}

/**
 * Views counter array `array` (element 0 of a pcpu_counter_alloc_array(),
 * or any counter as an array of one) in the owned slot of claim `w`, for
 * pcpu_owned_array_add(). Returns 0 and stores the view in *a; -1 with
 * errno EINVAL, *a zero, where `w` is not the calling thread's claim (the
 * zero claim: the thread holds no owned slot and adds with
 * pcpu_counter_add(), or the `_owned` updates, which fall back to it; a
 * released claim; another thread's), `array` is NULL or `a` is NULL (*a
 * untouched then). The view is valid
 * while the calling thread holds `w` and `array` is allocated, for that
 * thread only.
 * Thread-safe; async-signal-safe. Cost: a call and three tests (with
 * PCPU_DEBUG_LIBRARY, also a lookup of the array).
 */
PCPU_API int pcpu_counter_owned_array(pcpu_worker_t w, pcpu_counter_t array,
				      pcpu_owned_array_t *a);

#ifdef PCPU_NO_INLINE
/* The stable tier: the same operations as exported functions
 * (src/core/counter_stable_abi.c), documented below with their inline versions. */
PCPU_API void pcpu_counter_add(pcpu_counter_t c, int64_t v);
PCPU_API void pcpu_counter_add_atomic(pcpu_counter_t c, int64_t v);
PCPU_API void pcpu_counter_inc(pcpu_counter_t c);
PCPU_API void pcpu_counter_add_many(const pcpu_counter_t *cs, const int64_t *vs, size_t n);
PCPU_API pcpu_counter_t pcpu_counter_at(pcpu_counter_t array, size_t i);
PCPU_API void pcpu_counter_add_owned(pcpu_worker_t w, pcpu_counter_t c, int64_t v);
PCPU_API void pcpu_counter_add_many_owned(pcpu_worker_t w, const pcpu_counter_t *cs,
					  const int64_t *vs, size_t n);
PCPU_API void pcpu_owned_array_add(pcpu_owned_array_t a, size_t i, int64_t v);
#define PCPU__INLINE_OP(name) pcpu__##name##_inline
#else
#define PCPU__INLINE_OP(name) name
#endif

/**
 * Adds `v` (negative allowed) to counter `c`.
 *
 * Fast path: one rseq critical section on the calling thread's slot, no lock
 * prefix, no atomic instruction, no call. Fallback (no rseq, or repeated
 * aborts): one atomic add on a per-slot word, still exact and still without a
 * shared cache line. `c` must be a live counter (undefined behaviour
 * otherwise, as for any freed memory; with PCPU_DEBUG defined, it is checked
 * and a bad counter aborts with a message).
 * Thread-safe; async-signal-safe (a handler may add to the counter the code
 * it interrupted is adding to). Cost: a load of the slot index, the arming
 * store, a compare, a shift and the `add`: the minimal hand-written rseq
 * add, instruction for instruction (bench/README.md measures it beside that
 * add and a thread-private `+=`: 1.00-1.02x and about 1.5x on an AMD Zen 5).
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_counter_add)(pcpu_counter_t c,
										    int64_t v)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(c, "pcpu_counter_add");
#endif
	pcpu__counter_add_inline(c, v);
}

/** pcpu_counter_add(c, 1). Thread-safe; async-signal-safe. Cost: as
 * pcpu_counter_add(). */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_counter_inc)(pcpu_counter_t c)
{
	PCPU__INLINE_OP(pcpu_counter_add)(c, 1);
}

/**
 * Adds vs[i] to cs[i] for i < n, looking up the slot index once for all of
 * them (DPDK's multiple-counter update). Each add is its own critical
 * section, so the group is not atomic as a whole (see the statistics layer's
 * consistent groups for that); each add is exact. Counters may come from
 * different zones. Thread-safe; async-signal-safe. Cost: one index load,
 * then one rseq section per counter (pcpu_counter_add()'s, without its
 * index load).
 */
static inline void PCPU__INLINE_OP(pcpu_counter_add_many)(const pcpu_counter_t *cs,
							  const int64_t *vs, size_t n)
{
	size_t i;
	/* 16 bits: an unregistered area's index fails each section's compare
	 * (pcpu__rseq_load_index16()), so no sign test per counter. */
	int64_t idx = pcpu__rseq_load_index16();
	intptr_t csoff = (intptr_t)pcpu__g.cs_tpoff, idxoff = (intptr_t)pcpu__g.index_tpoff;

	/* Registers for the whole loop, not reloads from pcpu__g before each
	 * section (see pcpu__rseq_load_add_store_at()). */
	__asm__("" : "+r"(csoff), "+r"(idxoff));

	/* Unrolled: with a constant n (the usual 2 or 4 counters of a packet)
	 * the loop then disappears; GCC does not unroll it at -O2 by itself and
	 * the loop overhead costs more than the adds (bench/README.md). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#pragma GCC unroll 8
#endif
	for (i = 0; i < n; i++) {
#ifdef PCPU_DEBUG
		pcpu__debug_check(cs[i], "pcpu_counter_add_many");
#endif
		if (PCPU_LIKELY(pcpu__rseq_load_add_store_at(idx,
							 &pcpu__counter_slot(cs[i], (size_t)idx)->pcpu__word,
							 vs[i], csoff, idxoff) == 0))
			continue;
		pcpu__counter_add_slow(cs[i], vs[i]);
		idx = pcpu__rseq_load_index16(); /* moved, or now registered */
	}
}

/* The word of `c` in the owned slot of claim `w` (w nonzero). */
static inline int64_t *pcpu__counter_owned_word(pcpu_worker_t w, pcpu_counter_t c)
{
	return (int64_t *)(void *)((char *)c + w.pcpu__off);
}

/**
 * Adds `v` to counter `c` in the owned slot of claim `w` (pcpu/worker.h):
 * DPDK's Per Core update on pcpu's counters. `w` is the calling thread's
 * claim, from pcpu_worker_claim() or pcpu_worker_self(); the zero claim
 * (none) makes this pcpu_counter_add(). Exact with every other update of
 * the counter, whatever CPU the thread runs on.
 * Thread-safe (for the thread that holds `w`); async-signal-safe where
 * PCPU_OWNED_ADD_SIGNAL_SAFE is 1 (x86-64), see pcpu/worker.h otherwise.
 * Cost: a test of `w` (hoisted out of a loop), an address add and an `add`
 * to memory on x86-64 (load, add, store elsewhere): no rseq, no atomic.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_counter_add_owned)(pcpu_worker_t w,
											  pcpu_counter_t c,
											  int64_t v)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(c, "pcpu_counter_add_owned");
	pcpu__worker_debug_check(w, "pcpu_counter_add_owned");
#endif
	if (PCPU_UNLIKELY(w.pcpu__off == 0)) {
		pcpu__counter_add_inline(c, v);
		return;
	}
	pcpu__owned_add(pcpu__counter_owned_word(w, c), v);
}

/**
 * pcpu_counter_add_many() in the owned slot of claim `w`: vs[i] to cs[i]
 * for i < n, each as pcpu_counter_add_owned(). Thread-safe (for the thread
 * that holds `w`); async-signal-safe as pcpu_counter_add_owned(). Cost: n
 * owned adds, one test of `w`.
 */
static inline void PCPU__INLINE_OP(pcpu_counter_add_many_owned)(pcpu_worker_t w,
								const pcpu_counter_t *cs,
								const int64_t *vs, size_t n)
{
	size_t i;

#ifdef PCPU_DEBUG
	pcpu__worker_debug_check(w, "pcpu_counter_add_many_owned");
#endif
	if (PCPU_UNLIKELY(w.pcpu__off == 0)) {
		PCPU__INLINE_OP(pcpu_counter_add_many)(cs, vs, n);
		return;
	}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#pragma GCC unroll 8
#endif
	for (i = 0; i < n; i++) {
#ifdef PCPU_DEBUG
		pcpu__debug_check(cs[i], "pcpu_counter_add_many_owned");
#endif
		pcpu__owned_add(pcpu__counter_owned_word(w, cs[i]), vs[i]);
	}
}

/**
 * Adds `v` to element `i` of view `a` (pcpu_counter_owned_array()):
 * pcpu_counter_add_owned() of pcpu_counter_at(array, i), without
 * computing the owned address or testing the claim again. `a` must be a
 * view the call returned 0 for, used by the thread that holds its claim
 * (undefined behaviour otherwise, as for a freed handle; with PCPU_DEBUG
 * defined, the zero view aborts with a message), and `i` below the
 * array's length (not checked, as by pcpu_counter_at()). Exact with every
 * other update of the counter.
 * Thread-safe (for the thread that holds the view's claim);
 * async-signal-safe as pcpu_counter_add_owned(). Cost: an `add` to memory
 * on x86-64 (load, add, store elsewhere): no rseq, no atomic, no test.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_owned_array_add)(pcpu_owned_array_t a,
										       size_t i, int64_t v)
{
#ifdef PCPU_DEBUG
	if (a.pcpu__words == (int64_t *)0)
		pcpu__debug_check((const void *)0, "pcpu_owned_array_add");
#endif
	pcpu__owned_add(a.pcpu__words + i, v);
}

/** Element i of a counter array from pcpu_counter_alloc_array().
 * Thread-safe; async-signal-safe. Cost: an add. */
static inline pcpu_counter_t PCPU__INLINE_OP(pcpu_counter_at)(pcpu_counter_t array, size_t i)
{
	return array + i;
}

/**
 * Allocates one counter, zero, in pcpu's default zone (created on first use
 * with PCPU_INDEX_DEFAULT). Returns NULL with errno ENOMEM on failure.
 * Memory: 8 bytes per slot that writes it, plus a quarter byte of
 * bookkeeping. Thread-safe; not async-signal-safe. Cost: a mutex and a
 * bitmap update.
 */
PCPU_API pcpu_counter_t pcpu_counter_alloc(void);

/**
 * Allocates `n` counters (per-flow counters, a struct of statistics) as one
 * object: element i is pcpu_counter_at(c, i), freed together with
 * pcpu_counter_free(c). NULL with errno EINVAL (n == 0), E2BIG (more than
 * PCPU_ZONE_MAX_OBJECT / 8 counters) or ENOMEM.
 * Thread-safe; not async-signal-safe. Cost: as pcpu_counter_alloc().
 */
PCPU_API pcpu_counter_t pcpu_counter_alloc_array(size_t n);

/**
 * Allocates `n` counters in `zone` (to choose the slot index, or to keep a
 * subsystem's counters together). Same errors as pcpu_counter_alloc_array(),
 * EINVAL for a NULL zone. Thread-safe; not async-signal-safe. Cost: as
 * pcpu_counter_alloc().
 */
PCPU_API pcpu_counter_t pcpu_counter_alloc_in(pcpu_zone_t *zone, size_t n);

/**
 * Frees a counter or counter array (the handle the allocation returned).
 * Returns 0, or -1 with errno EINVAL if `c` is not a live allocation
 * (nothing is changed). NULL is a no-op. The caller guarantees no thread
 * still adds to it. Thread-safe; not async-signal-safe. Cost: the zone's
 * chunk-table lookup, then pcpu_zone_free()'s.
 */
PCPU_API int pcpu_counter_free(pcpu_counter_t c);

/**
 * Sum of the counter over all slots (see the file comment for what a read
 * guarantees). NULL returns 0 with errno EINVAL. Works on any element of an
 * array. Thread-safe, async-signal-safe, lock-free. Cost: one load per slot
 * walked, two where a fallback add or a reset ever wrote the counter's
 * chunk. The slots walked are slot 0, the CPUs present when pcpu started
 * (and mm_cid's range 0 .. present - 1) and the claimed owned slots, not
 * all pcpu_nslots() possible ones (src/core/slot_walk.c), so the cost follows
 * the present CPUs: about 2 ns natively at 2, 16 or 256 possible slots,
 * 1.9 us with 16 present and 9.9 us with 64 present CPUs in a VM. A CPU
 * hot-added (made present) after start-up is walked only with
 * PCPU_SLOT_WALK=all in the environment, which walks every slot.
 */
PCPU_API uint64_t pcpu_counter_fetch(pcpu_counter_t c);

/**
 * Contribution of one slot (its word and its mirror word). Slot >=
 * pcpu_nslots() or NULL: 0 with errno EINVAL. A slot no thread can write
 * -- a CPU slot pcpu_counter_fetch() does not walk (a possible CPU that was
 * not present at start-up), an owned slot never claimed -- is 0 and is not
 * read (in a published segment its copy is a hole of the file). The
 * per-slot split is only meaningful between resets: a reset is recorded in
 * slot 0's mirror word. Thread-safe; async-signal-safe. Cost: two loads.
 */
PCPU_API uint64_t pcpu_counter_fetch_slot(pcpu_counter_t c, unsigned slot);

/**
 * Reads `n` consecutive counters starting at `c` into out[0..n-1], walking
 * slot by slot (sequential memory): about twice as fast as n fetches up to
 * ~10^5 counters; beyond that both are bound by memory bandwidth.
 * Same guarantees as pcpu_counter_fetch() for each counter. Returns 0 or -1
 * with errno EINVAL (NULL argument). Thread-safe; async-signal-safe. Cost:
 * n loads per slot (2n where the mirror was written).
 */
PCPU_API int pcpu_counter_fetch_array(pcpu_counter_t c, size_t n, uint64_t *out);

/**
 * Returns the counter's value and subtracts it, so the next fetch starts from
 * zero: every add is reported by exactly one fetch_and_zero or the final
 * fetch (see the file comment). Concurrent resetters of one counter are
 * serialised by a lock striped over counters. NULL: 0 with errno EINVAL.
 * Thread-safe; not async-signal-safe (takes a mutex). Cost: a mutex, a
 * pcpu_counter_fetch() and one atomic add.
 */
PCPU_API uint64_t pcpu_counter_fetch_and_zero(pcpu_counter_t c);

/** pcpu_counter_fetch_and_zero() without the value. Thread-safe; not
 * async-signal-safe. Cost: as pcpu_counter_fetch_and_zero(). */
PCPU_API void pcpu_counter_zero(pcpu_counter_t c);

/**
 * Adds through the fallback path only: an atomic add on the mirror word of
 * the thread's slot. Exact, never uses rseq. For benchmarks, for comparing
 * modes in one process, and for code that must not enter an rseq critical
 * section; pcpu_counter_add() does the same by itself when rseq cannot run.
 * Thread-safe; async-signal-safe. Cost: inline, two loads (the slot index,
 * the chunk header's mirror offset), a test and a `lock add` on a word no
 * other CPU writes (bench/README.md, "Figures and where they come from":
 * the fallback add against a bare per-slot `lock add`); a call for the
 * first atomic add in a chunk (it marks the chunk's mirror in use) and for
 * threads without rseq.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_counter_add_atomic)(pcpu_counter_t c,
											   int64_t v)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(c, "pcpu_counter_add_atomic");
#endif
	pcpu__counter_add_atomic_inline(c, v);
}

PCPU_END_DECLS

#endif /* PCPU_COUNTER_H */
