/* SPDX-License-Identifier: MIT */
/*
 * Consistent groups: several counters updated in one call and read so that
 * no reader sees part of an update.
 *
 * The problem. Per-CPU counters are cheap because each slot has one writer
 * at a time and needs no atomics. DPDK makes a per-core set of counters
 * consistent with a per-core seqcount: the writer increments it to odd,
 * updates, increments it to even, and a reader retries while it is odd or
 * changed. That relies on the writer never being preempted by another writer
 * of the same core. Under rseq that does not hold: a thread can be preempted
 * after making the seqcount odd, and the next thread on that CPU would then
 * increment it again (even: readers trust a half-written copy) and write the
 * same words concurrently with the first thread when it resumes elsewhere.
 *
 * The design. Each slot has, for each group, a copy ("lane")
 *
 *     [ seq | value[0] | value[1] | ... | value[members-1] ]
 *
 * whose seqcount is also its lock: odd means "held". A writer takes the lane
 * of its current slot with one rseq compare-and-store, seq: even s -> s + 1,
 * which commits only if the thread is still on that slot and seq still holds
 * s (pcpu_rseq_load_cbne_store). Among threads of one slot the kernel runs at
 * most one critical section at a time, and nobody else stores into an even
 * seq, so exactly one thread owns the lane from then on -- even if it is
 * preempted or migrated right after: it then finishes from another CPU,
 * which is fine, because the lane is owned by the thread, not by the CPU.
 * The owner adds to the values with plain loads and release stores (plain
 * moves on x86; release so that a reader that sees a new value also sees
 * the odd seq) and releases the lane with a release store of s + 2. Readers use the
 * ordinary seqcount protocol on each lane and sum the lanes; as every update
 * touches exactly one lane, the sum contains each update wholly or not at
 * all.
 *
 * A writer that finds its slot's lane odd (the owner was preempted in its
 * few-store window, or the writer is a signal handler that interrupted the
 * owner -- itself) never waits for it: it goes to a fallback lane. Fallback
 * lanes have the same layout in a second zone object, two per slot; they
 * are taken with an atomic compare-and-swap (even -> odd), never with rseq,
 * so no word is ever written both by an rseq section and by an atomic
 * instruction. A fallback writer starts at the lanes of the CPU it runs on
 * and skips held lanes, so it only spins while every fallback lane is held
 * at once. It holds its lane with all signals blocked: otherwise two threads
 * each holding a lane, each interrupted by a handler that updates the group,
 * would wait for each other's lane forever (the first version of this file
 * did, and the stress test caught it). With signals blocked a holder is
 * always a few stores from releasing its lane once it runs, so the wait is
 * bounded by scheduling, not by other writers. The two signal-mask calls
 * are the price of the fallback path; the rseq path never pays them.
 * Threads without rseq (fallback mode, ThreadSanitizer builds, other
 * architectures) use the fallback lanes only.
 *
 * Alternatives considered.
 *  - A per-CPU seqcount incremented with rseq adds around the stores: the
 *    preemption problem above; the adds cannot be made one critical section
 *    with the value stores through the primitives pcpu has.
 *  - A separate per-CPU lock word plus a seqcount: one more word and one
 *    more store per update for what the seqcount's low bit already says.
 *  - Double-buffered copies committed by one store (write the inactive copy,
 *    then flip an index): needs every store of the update inside one rseq
 *    critical section, i.e. a custom assembly sequence per member count, and
 *    still a generation check on the read side; and it doubles the memory of
 *    every group (a flow table with millions of groups feels that). The lane
 *    lock needs only the compare-and-store every arch header provides.
 *  - Atomic adds under a per-group spinlock: a shared cache line per group
 *    for every writer, which is what per-CPU statistics exist to avoid.
 *
 * Costs. Update on the rseq path: one rseq compare-and-store, a load and a
 * store per member, one release store (a plain store on x86) -- about two
 * counter adds for a two-member group. Fallback path: two signal-mask
 * system calls, one compare-and-swap, the same stores. Read: (members + 1)
 * loads per lane, 3 * nslots lanes. Memory per group and slot: 8 * (1 +
 * members) bytes, plus twice that for the fallback lanes, which only become
 * resident where the fallback is used.
 *
 * fork(). A child's copy of a group must be whole too, and fork() can copy
 * a lane another thread holds, half updated; its holder does not exist in
 * the child. So a holder keeps a record of the lane as it was before its
 * update -- its values, in its own stack frame (an undo log of one entry)
 * -- and the seq it takes the lane with is the record's address
 * + 1 (odd: records are 8-byte aligned). The record is written before the
 * take commits; the values are read before it too, the take's check that
 * seq is still s proving they are the values of seq s. Every live group is
 * on a list, and the child's fork handler (fork.c) repairs each lane:
 *  - private memory (a stand-alone group, an unpublished registry): the
 *    kernel's copy-on-write gives the child the parent's memory at an
 *    instant, and each thread's stores up to it in order. A lane odd in
 *    that copy was held at that instant, and that copy of its holder's
 *    stack holds the record whole: the child puts the old values back and
 *    makes seq even. The update concurrent with fork() is wholly absent
 *    from the child (it is in the parent).
 *  - a shared file (a published registry): the zone's fork handler
 *    (zone_shared.c) copied it word by word in prepare, while writers ran,
 *    so a lane can be copied half updated even with an even seq, and a
 *    record on a stack may since have been reused. The zone lets the layers above read the
 *    parent's live file during the child's handlers: a lane whose copied
 *    seq is even and still the parent's is whole as copied; any other lane
 *    with data is read again from the parent, whole (the seqcount protocol:
 *    the parent's holder runs and releases it), so the child may start
 *    with a few of the parent's updates made while it was being forked. A
 *    lane the parent holds for longer than PCPU_GROUP_FORK_TIMEOUT_NS (a
 *    parent stopped or killed in mid-update) is left odd for good: reads of that group fail with ETIMEDOUT, never
 *    with a torn value, and updates go to other lanes.
 * The cost in the update: the record, one store per member to the writer's
 * stack (bench/README.md, "group add2"). The repair
 * costs a load per lane of every live group in the child.
 *
 * The first version released odd lanes in the child without the record
 * (seq + 1): the child then read a half-applied update as consistent, in
 * about a third of the children of a process with busy writers
 * (tests/stats/test_group_fork.c).
 *
 * Shared by a process tree. A shared registry's groups (pcpu/segment.h,
 * PCPU_SEGMENT_SHARED_TREE: every process forked from its creator updates
 * them; g->pcpu__tree set, the inline path sends them here) cannot use the
 * record above: it is in the holder's stack, in its own process, and a
 * process killed while it holds a lane (SIGKILL of a worker, at any
 * instant) would leave the lane odd for ever, its old values unknowable.
 * So a tree lane keeps its undo copy beside its values, and says who holds
 * it:
 *
 *     [ seq | undo_seq | repairer | value[members] | undo[members] ]
 *
 * seq is gen << 32 while free, (gen << 32) | tag while held, tag being the
 * holder's thread id << 1 | 1 (thread ids are below 2^22). A writer takes
 * its CPU's lane with the rseq compare-and-store (free s -> s | tag), a
 * fallback lane with a compare-and-swap (held: a preempted holder; and
 * always without rseq), copies the values to undo, sets undo_seq to seq
 * (the copy is whole), adds, and releases with (gen + 1) << 32. Only the
 * holder writes a held lane. A reader never waits for it:
 *  - seq even: the values, as the seqcount above;
 *  - seq odd and undo_seq == seq: undo, which does not change until seq
 *    does: the group before the update in progress;
 *  - seq odd and undo_seq != seq: the values, which the holder does not
 *    touch until it sets undo_seq;
 * each read valid if seq and undo_seq read the same after it. So a holder
 * preempted, stopped, traced or killed leaves every read whole and current
 * but for its own update, with no time bound to reach. A held lane whose
 * holder is dead (kill(tid, 0): ESRCH; EPERM is a live thread of another
 * user) is repaired by the reader that finds it, or by a writer that finds
 * every fallback lane held: undo back if undo_seq says the update began,
 * seq even. Repairers exclude each other with a compare-and-swap of their
 * own tag into `repairer` (a dead repairer's taken over; the repair is
 * idempotent). The tag is cached per thread and forgotten in a fork()
 * child. Thread ids of one pid namespace: the tree's processes share one.
 * A reused thread id makes a dead holder look alive: its lane stays held
 * (reads still whole, its CPU's writers on fallback lanes) until that
 * thread ends.
 * Nothing here is per process, so fork() needs nothing (the child keeps
 * the shared mapping; a holder in the parent goes on there). The price,
 * against the rseq path: a call, the tag, and the undo copy and undo_seq
 * stores; 2.6-2.7x an ordinary group's update (`pcpu_bench_prefork
 * --groups-only`; the robust lane locks this replaced cost 5.4-6.3x and
 * made reads wait for a stopped holder). Memory: 8 * (3 + 2 * members)
 * bytes per lane, primary and fallback lanes in one zone object, so that
 * another process adopts both by the one address the directory gives.
 *
 * The files: group.c, creation, updates and fork(); group_read.c, the reads
 * and the repair of a tree lane whose holder died; group_lanes.h, what both
 * know of the lanes.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/group.h>
#include <pcpu/worker.h>

#include "stats_internal.h"
#include "metrics.h"
#include "../core/core.h"
#include "group_lanes.h"

/* Test hook (tests/segment/test_shared_registry.c): called by a shared
 * registry's group writer once its lane is odd and its first member
 * written, the others not: where a test kills the writing process. */
PCPU_HIDDEN void (*pcpu__test_group_tree_pause)(void *lane);
void (*pcpu__test_group_tree_pause)(void *lane);

/* Test hook (tests/vm/vm_stress.c --workload tree): called by a shared
 * registry's group writer on the rseq path between its read of the lane's
 * seq (free) and the section that takes the lane -- where another take and
 * release of the lane (a signal handler's update of the group, another
 * thread of this CPU) moves seq's generation under the taker, which the
 * 32-bit reread in tree_add() is for. The probe updates the group there. */
PCPU_HIDDEN void (*pcpu__test_group_tree_before_take)(void *lane);
void (*pcpu__test_group_tree_before_take)(void *lane);

/* A deliberately broken test build (scripts/vm/run.sh --variant skew, the
 * library compiled with PCPU_TEST_TREE_SKEW): tree_add() without its 32-bit
 * reread of seq, which vm_stress --workload tree must catch on ARMv7. */
#ifdef PCPU_TEST_TREE_SKEW
#define PCPU__TEST_TREE_SKEW 1
#else
#define PCPU__TEST_TREE_SKEW 0
#endif

/* A lane that a fork() child could not make whole: odd for ever (readers
 * time out, writers go elsewhere). Never a holder's record + 1: a record
 * is not at address 0. */
#define GROUP_LANE_POISONED ((intptr_t)1)

/* Every live group, for the fork() child handler: a node in front of each
 * group's struct (the struct is public; the node is not). */
struct group_node {
	struct group_node *prev, *next;
	pcpu_group_t g;
};

static pthread_mutex_t groups_lock = PTHREAD_MUTEX_INITIALIZER;
static struct group_node groups = { &groups, &groups, { 0 } };
static int fork_registered;

static struct group_node *node_of(const pcpu_group_t *g)
{
	return (struct group_node *)((char *)(uintptr_t)g - offsetof(struct group_node, g));
}

static sigset_t all_signals; /* filled once, before the first group exists */
static pthread_once_t all_signals_once = PTHREAD_ONCE_INIT;

static void fill_all_signals(void)
{
	sigfillset(&all_signals);
}
/* Reads the values of a lane into the holder's record, before the take
 * that checks its seq is still the one read before them. */
static void undo_fill(struct pcpu__group_undo *undo, const intptr_t *seqp, unsigned n)
{
	const int64_t *v = (const int64_t *)(const void *)((const char *)seqp + PCPU__GROUP_SEQ_SIZE);
	unsigned k;

	for (k = 0; k < n; k++)
		undo->value[k] = __atomic_load_n(&v[k], __ATOMIC_ACQUIRE);
}

static void lane_add(intptr_t *seqp, intptr_t s, const struct pcpu__group_undo *undo,
		     const int64_t *d, unsigned n)
{
	int64_t *v = (int64_t *)(void *)((char *)seqp + PCPU__GROUP_SEQ_SIZE);
	unsigned k;

	/* Seqcount writer (Boehm, "Can seqlocks get along with programming
	 * language memory models?"): a reader that sees any new value must
	 * also see the odd seq. Release stores of the values give that
	 * (they order the earlier seq store before them), paired with the
	 * reader's acquire loads of the values; on x86 both are plain moves.
	 * Fences would do the same, but ThreadSanitizer does not model them. */
	for (k = 0; k < n; k++)
		__atomic_store_n(&v[k], pcpu__group_wrap_add(undo->value[k], d[k]), __ATOMIC_RELEASE);
	__atomic_store_n(seqp, s + 2, __ATOMIC_RELEASE);
}

static void fallback_add(const pcpu_group_t *g, size_t i, const int64_t *d)
{
	size_t total = lanes_total(g), start, k;
	struct pcpu__group_undo undo;
	unsigned round;
	int cpu = sched_getcpu();
	sigset_t old;

	/* Start at this CPU's lanes: threads of one CPU share lanes, so lanes
	 * stay warm in that CPU's cache, and contention is what the CPU's own
	 * threads create. */
	start = fallback_start(g, cpu);
	pthread_sigmask(SIG_BLOCK, &all_signals, &old);
	for (round = 0;; round++) {
		for (k = 0; k < total; k++) {
			intptr_t *seqp = fallback_lane(g, i, (start + k) % total);
			intptr_t s = __atomic_load_n(seqp, __ATOMIC_ACQUIRE);

			if (s & 1)
				continue; /* held by another thread */
			undo_fill(&undo, seqp, g->pcpu__members);
			/* Release: the record is written before the lane
			 * says where it is. */
			if (__atomic_compare_exchange_n(seqp, &s, (intptr_t)&undo + 1, 0,
							__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				lane_add(seqp, s, &undo, d, g->pcpu__members);
				pthread_sigmask(SIG_SETMASK, &old, NULL);
				return;
			}
		}
		/* Every lane held: their owners are a few stores from done, or
		 * preempted; give them the CPU now and then. */
		if (round < 64)
			cpu_relax();
		else
			sched_yield();
	}
}

/* ---- shared by a process tree (see the top) ---- */

/* Lane `lane` is ours (seq == held, odd): the update, undo first. */
static void tree_update(int64_t *lane, uint64_t held, const int64_t *d, unsigned n)
{
	int64_t *v = lane + TREE_HEAD, *undo = v + n;
	unsigned k;

	/* The values before the update, then the mark that says so; release
	 * stores, so that a reader that sees a new value sees the mark, and
	 * one that sees the mark sees the whole copy. */
	for (k = 0; k < n; k++)
		__atomic_store_n(&undo[k], __atomic_load_n(&v[k], __ATOMIC_RELAXED), __ATOMIC_RELEASE);
	__atomic_store_n(&lane[TREE_UNDO_SEQ], (int64_t)held, __ATOMIC_RELEASE);
	for (k = 0; k < n; k++) {
		__atomic_store_n(&v[k], pcpu__group_wrap_add(undo[k], d[k]), __ATOMIC_RELEASE);
		if (PCPU_UNLIKELY(pcpu__test_group_tree_pause != NULL) && k == 0)
			pcpu__test_group_tree_pause(lane);
	}
	/* Even, the next generation: never a value seq had. */
	__atomic_store_n(&lane[TREE_SEQ], (int64_t)((held & ~(TREE_GEN - 1)) + TREE_GEN),
			 __ATOMIC_RELEASE);
}

/* Takes a free fallback lane of group i with a compare-and-swap, starting
 * at this CPU's. Signals blocked by the caller. */
static int64_t *tree_fallback_take(const pcpu_group_t *g, size_t i, uint64_t tag, uint64_t *held)
{
	size_t total = lanes_total(g), k, start;
	int cpu = sched_getcpu();
	unsigned round;

	start = fallback_start(g, cpu);
	for (round = 0;; round++) {
		for (k = 0; k < total; k++) {
			int64_t *lane = (int64_t *)fallback_lane(g, i, (start + k) % total);
			int64_t s = __atomic_load_n(&lane[TREE_SEQ], __ATOMIC_ACQUIRE);

			if (s & 1) {
				/* Held: by a live thread, a few stores from done
				 * once it runs; by a dead one, for good. */
				if (round >= 64 && (round & 63) == 0)
					pcpu__group_tree_lane_repair(lane, g->pcpu__members);
				continue;
			}
			if (__atomic_compare_exchange_n(&lane[TREE_SEQ], &s, (int64_t)((uint64_t)s | tag),
							0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				*held = (uint64_t)s | tag;
				return lane;
			}
		}
		if (round < 64)
			cpu_relax();
		else
			sched_yield();
	}
}

/* A tree group's update (see the top): this CPU's lane, taken with an rseq
 * compare-and-store, else a fallback lane. Async-signal-safe. */
static void tree_add(const pcpu_group_t *g, size_t i, const int64_t *d)
{
	uint64_t tag = pcpu__group_tree_tag(), held;
	unsigned n = g->pcpu__members;
	int64_t *lane;
	sigset_t old;

#if PCPU_ARCH_HAVE_RSEQ
	for (int tries = 0; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
		int64_t idx = pcpu__rseq_load_index();
		int64_t s;

		if (PCPU_UNLIKELY(idx < 0)) {
			if (tries > 0 || pcpu__thread_prepare() != 0)
				break;
			continue;
		}
		lane = (int64_t *)primary_lane(g, i, (size_t)idx);
		s = __atomic_load_n(&lane[TREE_SEQ], __ATOMIC_ACQUIRE);
		if (PCPU_UNLIKELY(s & 1)) {
			/* Held: preempted, or its process died; the next
			 * collection repairs a dead one (read_tree_lane(), group_read.c). */
			break;
		}
		if (PCPU_UNLIKELY(pcpu__test_group_tree_before_take != NULL))
			pcpu__test_group_tree_before_take(lane);
		if (pcpu_rseq_load_cbne_store(idx, (intptr_t *)&lane[TREE_SEQ], (intptr_t)s,
						   (intptr_t)((uint64_t)s | tag)) == 0) {
			uint64_t held = (uint64_t)s | tag;

			/* Where a word is 32 bits (ARMv7) the section compared
			 * and stored seq's low half only: the generation above
			 * it may have moved since `s` was read (the lane taken
			 * and released meanwhile). The lane is ours now and
			 * nobody else writes a held lane's seq: read the whole
			 * of it, so that undo_seq and the release carry the
			 * lane's real generation. */
			if (sizeof(intptr_t) < sizeof(uint64_t) && !PCPU__TEST_TREE_SKEW)
				held = (uint64_t)__atomic_load_n(&lane[TREE_SEQ], __ATOMIC_ACQUIRE);
			tree_update(lane, held, d, n);
			return;
		}
	}
#endif
	/* Signals blocked while a fallback lane is held: a handler that
	 * updated the group would wait for lanes its own thread holds (the
	 * rseq path never waits, so it needs no mask). */
	pthread_sigmask(SIG_BLOCK, &all_signals, &old);
	lane = tree_fallback_take(g, i, tag, &held);
	tree_update(lane, held, d, n);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void pcpu__group_add_slow(const pcpu_group_t *g, size_t i, const int64_t *d, int why)
{
	if (g->pcpu__tree) {
		tree_add(g, i, d);
		return;
	}
#if PCPU_ARCH_HAVE_RSEQ
	if (why == PCPU__GROUP_UNREGISTERED && pcpu__thread_prepare() == 0 &&
	    pcpu__group_add_rseq(g, i, d, g->pcpu__members) == 0)
		return;
#else
	(void)why;
#endif
	fallback_add(g, i, d);
}

/* ---- fork ---- */

static void groups_fork_prepare(void)
{
	pthread_mutex_lock(&groups_lock);
}

static void groups_fork_parent(void)
{
	pthread_mutex_unlock(&groups_lock);
}

static int lane_is_zero(const intptr_t *seqp, unsigned n)
{
	unsigned k;

	for (k = 0; k <= n; k++)
		if (seqp[k])
			return 0;
	return 1;
}

/* Makes the child's copy of one lane whole (see "fork()" at the top).
 * `view`: the same lane as the parent's file shows it now, for a lane of a
 * shared zone; NULL for private memory. */
static void lane_fork_repair(intptr_t *seqp, const intptr_t *view, unsigned n)
{
	int64_t *v = (int64_t *)(void *)((char *)seqp + PCPU__GROUP_SEQ_SIZE), live[PCPU_GROUP_MAX_MEMBERS];
	struct deadline dl = { PCPU_GROUP_FORK_TIMEOUT_NS, 0, 0 };
	intptr_t s = *seqp, live_seq;
	unsigned k;

	if (!view) {
		/* An instant's copy: a lane held at that instant shows its
		 * holder's record, which that instant's copy of the holder's
		 * stack holds whole (written before the take). */
		const struct pcpu__group_undo *undo;

		if (!(s & 1) || s == GROUP_LANE_POISONED)
			return;
		undo = (const struct pcpu__group_undo *)(uintptr_t)(s - 1);
		for (k = 0; k < n; k++)
			v[k] = undo->value[k];
		/* Even, and unlike any seq the lane had: no reader in the
		 * child can have read the lane before. */
		*seqp = s + 1;
		return;
	}
	/* A copy made word by word while the parent's writers ran. Nothing
	 * there when copied: zeros are whole (and the view must not be read:
	 * the page may be a hole of the file). */
	if (lane_is_zero(seqp, n))
		return;
	/* The copy read seq before the values: a seq still the same and even
	 * means nobody took the lane since, so the values are of that seq. */
	if (!(s & 1) && __atomic_load_n(view, __ATOMIC_ACQUIRE) == s)
		return;
	/* Otherwise take the lane's live state whole: the parent's holder is
	 * a few stores from releasing it. */
	if (pcpu__group_read_lane_whole(view, n, live, &live_seq, &dl) == 0) {
		for (k = 0; k < n; k++)
			v[k] = live[k];
		*seqp = live_seq;
		return;
	}
	/* Held past the timeout in the parent: nothing whole to copy. Reads
	 * of the group fail (ETIMEDOUT, as for any lane that stays held);
	 * updates go to other lanes. */
	*seqp = GROUP_LANE_POISONED;
}

/* The child's only thread: every lane still odd had its owner in another
 * thread, gone with the fork, and a shared zone's copy may hold a lane
 * half-updated. Cost: a load per lane of every live group (3 * nslots lanes
 * per group), and for a group that was in a shared file, a load of the
 * parent's seq per lane that holds data. */
static void groups_fork_child(void)
{
	struct group_node *n;
	size_t i, s, l;

	pcpu__group_tree_tag_forget(); /* this thread has another id in the child */
	for (n = groups.next; n != &groups; n = n->next) {
		const pcpu_group_t *g = &n->g;
		const char *pview, *fview;
		unsigned m = g->pcpu__members;
		size_t nslots = walked_slots(), nlanes = lanes_total(g);

		if (g->pcpu__tree)
			continue; /* the child keeps the tree's memory (see the top) */
		pview = pcpu__zone_fork_parent_view(g->pcpu__primary);
		fview = pcpu__zone_fork_parent_view(g->pcpu__fallback);
		for (i = 0; i < g->pcpu__count; i++) {
			for (s = 0; s < nslots; s++) {
				intptr_t *lane = primary_lane(g, i, walked_slot(s));

				lane_fork_repair(lane, pview ? (const intptr_t *)(pview +
						 ((char *)lane - g->pcpu__primary)) : NULL, m);
			}
			for (l = 0; l < nlanes; l++) {
				intptr_t *lane = fallback_lane(g, i, l);

				lane_fork_repair(lane, fview ? (const intptr_t *)(fview +
						 ((char *)lane - g->pcpu__fallback)) : NULL, m);
			}
		}
	}
	pthread_mutex_unlock(&groups_lock);
}

void pcpu__group_fork_register(void)
{
	(void)pcpu__fork_register(&fork_registered, PCPU_FORK_STATS, groups_fork_prepare,
				 groups_fork_parent, groups_fork_child);
}

/* Every group's allocation: `count` groups of `members` in `zone`, over
 * lanes `at` (a tree zone's, one group: adopted from another process) or
 * new ones (at NULL). */
static pcpu_group_t *group_create(pcpu_zone_t *zone, unsigned members, size_t count, void *at)
{
	struct group_node *node;
	pcpu_group_t *g;
	size_t lane = PCPU__GROUP_SEQ_SIZE + (size_t)members * sizeof(int64_t);
	unsigned fb_per_slot;
	int tree;

	if (!zone || members == 0 || members > PCPU_GROUP_MAX_MEMBERS || count == 0) {
		pcpu__set_error("group: needs a zone, 1 to 16 members and at least one group");
		errno = EINVAL;
		return NULL;
	}
	/* A tree's group: lanes with their undo copy, and one zone object
	 * for its primary and fallback lanes, so that another process adopts
	 * both by one address; see "Shared by a process tree". */
	tree = pcpu__zone_is_tree(zone);
	if (tree)
		lane = tree_lane_size(members);
	fb_per_slot = FB_PER_SLOT;
	pthread_once(&all_signals_once, fill_all_signals);
	if (count > PCPU_ZONE_MAX_OBJECT / (lane * (1 + fb_per_slot))) {
		pcpu__set_error("group: too many groups for one zone object");
		errno = E2BIG;
		return NULL;
	}
	pcpu__group_fork_register();
	node = calloc(1, sizeof *node);
	if (!node)
		return NULL;
	g = &node->g;
	g->pcpu__members = members;
	g->pcpu__lane_size = (uint32_t)lane;
	g->pcpu__count = count;
	g->pcpu__fb_per_slot = fb_per_slot;
	g->pcpu__tree = tree ? zone : NULL;
	if (tree) {
		g->pcpu__primary = at ? at : pcpu_zone_alloc(zone, count * lane * (1 + fb_per_slot), 64);
		if (!g->pcpu__primary)
			goto fail;
		g->pcpu__fallback = g->pcpu__primary + count * lane;
	} else {
		g->pcpu__primary = pcpu_zone_alloc(zone, count * lane, 64);
		if (!g->pcpu__primary)
			goto fail;
		g->pcpu__fallback = pcpu_zone_alloc(zone, count * lane * fb_per_slot, 64);
		if (!g->pcpu__fallback)
			goto fail;
	}
	pthread_mutex_lock(&groups_lock);
	node->next = &groups;
	node->prev = groups.prev;
	groups.prev->next = node;
	groups.prev = node;
	pthread_mutex_unlock(&groups_lock);
	return g;
fail: {
	int e = errno;

	if (g->pcpu__primary && !tree)
		pcpu_zone_free(zone, g->pcpu__primary);
	free(node);
	errno = e;
	return NULL;
}
}

pcpu_group_t *pcpu_group_alloc_in(pcpu_zone_t *zone, unsigned members, size_t count)
{
	return group_create(zone, members, count, NULL);
}

pcpu_group_t *pcpu__group_create_at(pcpu_zone_t *zone, unsigned members, void *at)
{
	return group_create(zone, members, 1, at);
}

size_t pcpu__group_tree_size(const pcpu_zone_t *zone, unsigned members)
{
	(void)zone;
	return tree_lane_size(members) * (1 + FB_PER_SLOT);
}

pcpu_group_t *pcpu_group_alloc(unsigned members, size_t count)
{
	pcpu_zone_t *z = pcpu__stats_zone();

	return z ? pcpu_group_alloc_in(z, members, count) : NULL;
}

void pcpu__group_free_in(pcpu_zone_t *zone, pcpu_group_t *g)
{
	struct group_node *node = node_of(g);

	pthread_mutex_lock(&groups_lock);
	node->prev->next = node->next;
	node->next->prev = node->prev;
	pthread_mutex_unlock(&groups_lock);
	/* Both parts come from one zone (pcpu_group_alloc_in()); a tree's
	 * stay (another process may hold them: src/core/core.h). */
	if (!g->pcpu__tree) {
		pcpu_zone_free(zone, g->pcpu__primary);
		pcpu_zone_free(zone, g->pcpu__fallback);
	}
	free(node);
}

void pcpu_group_free(pcpu_group_t *g)
{
	if (g)
		pcpu__group_free_in(pcpu_zone_of(g->pcpu__primary), g);
}
