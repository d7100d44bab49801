/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/group.h
 * Consistent groups: counters that are updated in one call and read
 * together, so that a reader never sees one member updated without the
 * others (a flow's packets and bytes, a request count and its total
 * latency).
 *
 * A group object holds `count` groups of `members` 64-bit values each (one
 * allocation for a whole flow table). Updates are per-CPU like counters: each
 * slot has its own copy of every group, guarded by a sequence count that is
 * also the lock of that copy (odd = being written). The writer takes it with
 * an rseq compare-and-store, so it costs no atomic instruction; a copy that
 * another thread left odd (preempted in mid-update) is never waited for: the
 * writer uses a fallback copy instead. A reader sums the copies, reading each
 * under its sequence count. src/stats/group.c explains the design and the
 * alternatives.
 *
 * What a read guarantees: every update is either wholly included or wholly
 * absent -- a snapshot of (packets, bytes) where every update adds (1, 1500)
 * always has bytes == 1500 * packets. Not a point-in-time snapshot across
 * copies: of two updates made one after the other on different CPUs, a read
 * may include the second without the first. Once writers stop a read is
 * exact. Values wrap modulo 2^64.
 *
 * Writers never block for long: the rseq path never waits, and the fallback
 * path (no rseq, or the slot's copy held by a preempted writer) only spins
 * while every fallback copy is held by another thread that is a few stores
 * from releasing it once it runs. Readers retry a copy that is being
 * written, with a time bound, and report when they gave up.
 */
#ifndef PCPU_GROUP_H
#define PCPU_GROUP_H

#include <pcpu/common.h>
#include <pcpu/zone.h>
#include <pcpu/arch.h>
#include <pcpu/counter.h> /* PCPU_RSEQ_MAX_TRIES */

PCPU_BEGIN_DECLS

/** Most members one group may have. */
#define PCPU_GROUP_MAX_MEMBERS 16

/** How long pcpu_group_read() retries a copy being written: 100 ms. */
#define PCPU_GROUP_READ_TIMEOUT_NS 100000000ull

/** How long a fork() child waits, at most, for the parent's writer to finish
 * an update of a group in a published registry, so as to copy it whole:
 * 10 s. The writer is a few stores from done once it runs; this bounds a
 * parent stopped or killed in mid-update (see pcpu_group_read()). */
#define PCPU_GROUP_FORK_TIMEOUT_NS 10000000000ull

/* Read-only after creation; fields private to pcpu, visible for the inline
 * update path. One copy ("lane") of group i in slot s is
 *     primary + s * PCPU_SLOT_STRIDE + i * lane_size:
 *     [ intptr_t seq | int64_t value[members] ]
 * Fallback lanes have the same layout, fb_per_slot (2) of them per slot per
 * group, in a second zone object that rseq updates never touch (so it never
 * becomes resident while rseq works). */
struct pcpu_group {
	char *pcpu__primary;
	char *pcpu__fallback;
	size_t pcpu__count;        /* groups in this object */
	uint32_t pcpu__members;    /* values per group */
	uint32_t pcpu__lane_size;  /* bytes: 8 * (1 + members) */
	uint32_t pcpu__fb_per_slot;
	uint32_t pcpu__reserved;
	/* A shared registry's zone (PCPU_SEGMENT_SHARED_TREE), whose groups
	 * have lanes of their own (src/stats/group.c), updated out of line;
	 * NULL for any other group. */
	pcpu_zone_t *pcpu__tree;
};

typedef struct pcpu_group pcpu_group_t;

/* Why the inline path handed an update to the slow path. */
#define PCPU__GROUP_UNREGISTERED 1 /* thread has no valid slot index (yet) */
#define PCPU__GROUP_BUSY 2         /* lane held, or too many aborts */
#define PCPU__GROUP_SHARED 3       /* a shared registry's group */

/* Out of line: registers the thread and retries rseq, or updates a fallback
 * lane. Async-signal-safe. */
PCPU_API void pcpu__group_add_slow(const pcpu_group_t *g, size_t i, const int64_t *d, int why);

/* a + b modulo 2^64: member values wrap, as documented, so the add is
 * done in unsigned arithmetic (a signed overflow would be undefined
 * behaviour). Shared by the rseq path and src/stats/group.c. */
static inline int64_t pcpu__group_wrap_add(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* The record a writer keeps while it holds a lane: the lane's values from
 * before its update. The held lane's sequence count is the record's address
 * + 1 (odd: records are 8-byte aligned), so that a fork() child, whose copy
 * of memory is an instant of the parent's, finds the values to put back in
 * a lane another thread held at that instant (src/stats/group.c, "fork()").
 * It lives in the writer's own stack frame: a signal handler that updates a
 * group while the code it interrupted holds a lane has a record of its own. */
/* A lane: its seq (an intptr_t) in an 8-byte field, then the values, so
 * that the values are 8-byte aligned on 32-bit targets too. */
#define PCPU__GROUP_SEQ_SIZE 8

struct pcpu__group_undo {
	int64_t value[PCPU_GROUP_MAX_MEMBERS];
};

/* The rseq path: returns 0 once the update is done, or why it could not. */
__attribute__((always_inline)) static inline int pcpu__group_add_rseq(const pcpu_group_t *g, size_t i, const int64_t *d,
				       unsigned n)
{
	struct pcpu__group_undo undo;
	int tries;

	/* A lane that another process may hold needs a holder it can see die
	 * (src/stats/group.c, "Shared by a process tree"). */
	if (PCPU_UNLIKELY(g->pcpu__tree != NULL))
		return PCPU__GROUP_SHARED;
	for (tries = 0; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
		int64_t idx = pcpu__rseq_load_index();
		int64_t nv[PCPU_GROUP_MAX_MEMBERS];
		char *lane;
		intptr_t *seqp, s;
		int64_t *v;
		unsigned k;
		int r;

		if (PCPU_UNLIKELY(idx < 0))
			return PCPU__GROUP_UNREGISTERED;
		lane = g->pcpu__primary + ((size_t)idx << PCPU_SLOT_STRIDE_SHIFT) +
		       i * g->pcpu__lane_size;
		seqp = (intptr_t *)lane;
		v = (int64_t *)(lane + PCPU__GROUP_SEQ_SIZE);
		s = __atomic_load_n(seqp, __ATOMIC_ACQUIRE);
		if (PCPU_UNLIKELY(s & 1))
			return PCPU__GROUP_BUSY; /* held by a preempted writer */
		/* The values as of seq s (if the take below finds seq still s,
		 * nobody changed them since: only a holder writes them), into
		 * the record, and the new values, kept in registers (nv's
		 * address never escapes) across the take. */
		for (k = 0; k < n; k++) {
			undo.value[k] = __atomic_load_n(&v[k], __ATOMIC_ACQUIRE);
			nv[k] = pcpu__group_wrap_add(undo.value[k], d[k]);
		}
		/* Take the lane: seq s -> &undo + 1, only if still on slot idx
		 * and seq still s. The "memory" clobber orders the record's
		 * stores before the commit. */
		r = pcpu_rseq_load_cbne_store(idx, seqp, s, (intptr_t)&undo + 1);
		if (PCPU_UNLIKELY(r != 0))
			continue; /* migrated, preempted, or another writer won */
		/* The lane is ours until seq is even again, wherever this thread
		 * now runs: writers on slot idx see it odd and go elsewhere.
		 * Release stores keep the odd seq visible before any new value
		 * (plain moves on x86). */
		for (k = 0; k < n; k++)
			__atomic_store_n(&v[k], nv[k], __ATOMIC_RELEASE);
		__atomic_store_n(seqp, s + 2, __ATOMIC_RELEASE);
		return 0;
	}
	return PCPU__GROUP_BUSY;
}

#ifdef PCPU_NO_INLINE
/** The stable tier (src/stats/stable_abi.c): the same operations as exported functions, each with
 * the contract of its inline version below (thread safety and signal
 * safety as documented there). Cost: a function call plus the inline
 * version's. */
PCPU_API void pcpu_group_add(const pcpu_group_t *g, size_t i, const int64_t *d);
PCPU_API void pcpu_group_add2(const pcpu_group_t *g, size_t i, int64_t d0, int64_t d1);
PCPU_API unsigned pcpu_group_members(const pcpu_group_t *g);
PCPU_API size_t pcpu_group_count(const pcpu_group_t *g);
#endif

/**
 * Adds d[k] to member k of group `i` for every member, as one update:
 * no reader sees part of it. `g` must be live, i < its count, and `d` must
 * hold pcpu_group_members(g) values (negative allowed).
 * Thread-safe; async-signal-safe (a handler may update the group the code
 * it interrupted is updating); lock-free under rseq, and never waits for
 * the calling thread itself. Cost: one rseq compare-and-store, a load and
 * store per member, and one store; the fallback path costs one atomic
 * compare-and-swap more.
 * A group of a shared registry (PCPU_SEGMENT_SHARED_TREE, pcpu/segment.h)
 * is updated by every process of the tree, out of line, with the same
 * guarantees (and safe across processes: an update whose process is killed
 * midway is wholly absent from every read, and its lane is repaired by the
 * next read); it costs a call and a store per member more (2.6-2.7x an
 * ordinary group's update, `pcpu_bench_prefork --groups-only`).
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_group_add)(const pcpu_group_t *g, size_t i, const int64_t *d)
{
	int why = pcpu__group_add_rseq(g, i, d, g->pcpu__members);

	if (PCPU_UNLIKELY(why != 0))
		pcpu__group_add_slow(g, i, d, why);
}

/**
 * pcpu_group_add() for a group of exactly two members (packets and bytes),
 * with the member count known to the compiler. Same guarantees: thread-safe,
 * async-signal-safe, never waits for the calling thread; about two counter
 * adds (tests/stats/stats_bench measures it).
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_group_add2)(const pcpu_group_t *g, size_t i, int64_t d0, int64_t d1)
{
	int64_t d[2];
	int why;

	d[0] = d0;
	d[1] = d1;
	why = pcpu__group_add_rseq(g, i, d, 2);
	if (PCPU_UNLIKELY(why != 0))
		pcpu__group_add_slow(g, i, d, why);
}

/**
 * Allocates `count` groups of `members` values each, all zero, in the
 * statistics layer's default zone (see pcpu_gauge_alloc()). A flow table
 * is one call: group i is flow i. Returns NULL with errno EINVAL (members 0
 * or more than PCPU_GROUP_MAX_MEMBERS, count 0), E2BIG (more groups than one
 * zone object holds: PCPU_ZONE_MAX_OBJECT / (16 * (1 + members))), ENOMEM.
 * Thread-safe; not async-signal-safe. Cost: two zone allocations.
 */
PCPU_API pcpu_group_t *pcpu_group_alloc(unsigned members, size_t count);

/** pcpu_group_alloc() in `zone` (EINVAL for a NULL zone); same errors,
 * thread safety and cost. */
PCPU_API pcpu_group_t *pcpu_group_alloc_in(pcpu_zone_t *zone, unsigned members, size_t count);

/**
 * Frees groups. The caller guarantees no thread still updates or reads
 * them. NULL is a no-op. Thread-safe; not async-signal-safe. Cost: two zone
 * frees (finding each zone by address) and a global list's lock.
 */
PCPU_API void pcpu_group_free(pcpu_group_t *g);

/** Members per group. Thread-safe; async-signal-safe. Cost: a load. */
static inline unsigned PCPU__INLINE_OP(pcpu_group_members)(const pcpu_group_t *g)
{
	return g->pcpu__members;
}

/** Number of groups in the object. Thread-safe; async-signal-safe.
 * Cost: a load. */
static inline size_t PCPU__INLINE_OP(pcpu_group_count)(const pcpu_group_t *g)
{
	return g->pcpu__count;
}

/**
 * Reads group `i` consistently into out[0..members-1] (see the file comment
 * for what that guarantees). Retries a copy that is being written for at most
 * PCPU_GROUP_READ_TIMEOUT_NS in all. Returns 0, or -1 with errno: EINVAL
 * (NULL argument, i out of range), ETIMEDOUT (gave up: a copy stayed in
 * mid-update -- its writer preempted for that long, or a fork() copied a
 * lane another thread was writing; out is then unspecified).
 * A shared registry's group never makes a read wait for a writer: a copy
 * in mid-update is read as it was before that update (ETIMEDOUT only if
 * updates end faster than the read can copy one, for that long); a copy
 * whose writer's process died costs a kill(2) of its thread id and is
 * repaired.
 * Thread-safe; async-signal-safe; never blocks a writer.
 * Cost: about (members + 1) loads per slot and per fallback lane.
 */
PCPU_API int pcpu_group_read(const pcpu_group_t *g, size_t i, int64_t *out);

/** pcpu_group_read() with a time bound in nanoseconds (0: one attempt per
 * copy, no waiting); same errors, thread safety and cost. */
PCPU_API int pcpu_group_read_timeout(const pcpu_group_t *g, size_t i, int64_t *out,
				     uint64_t timeout_ns);

PCPU_END_DECLS

#endif /* PCPU_GROUP_H */
