/* SPDX-License-Identifier: MIT */
/*
 * hcounter.c: hierarchical per-CPU counters (pcpu/hcounter.h): creation, the
 * carries up the tree, the limited add's reservations and precise mode, the
 * reads, reset.
 *
 * One zone object holds everything, one copy per slot (the handle is slot
 * 0's copy), each copy 64-byte lines:
 *   line 0, every slot:   its word and its mask (struct pcpu__hcounter_slot)
 *   line 1, slot 0:       the header the reads use (struct pcpu__hcounter_hdr)
 *   line 2, slot 0:       the tree's shape (struct hc_shape)
 *   line 2 + l, slot j:   item j of tree level l (1 <= l <= levels), an
 *                         int64_t, one line each so that carries into two
 *                         items never share a line.
 *
 * The invariant the bounds rest on. Let S be the precise sum (the slots'
 * words plus the central word's value), floor_l(x) = x rounded down to a
 * multiple of B_l. A slot's carries to its level-1 item add up to
 * floor_0(word); an item's carries to the next level to floor_l(item); the
 * root holds the top level's. So S = root + central + sum of every word's
 * and item's remainder (x - floor_l(x), in [0, B_l - B_(l-1)], [0, B - 1]
 * for the words) + the carries computed but not yet added to their target
 * (pending). The remainders add up to at most `range`; a carrying add
 * reserves, before it commits, a bound of everything its carries can have
 * pending (|v| + the sum of every level's batch) in inflight_pos or
 * inflight_neg, and releases it after its last carry landed. Hence
 *     root + central - inflight_neg <= S <= root + central + range + inflight_pos,
 * readers loading the in-flight words before the root (a reservation is
 * released after the root's add, with release order).
 *
 * The limited add. V = root + central + range + (what is pending) bounds S,
 * and an add that stays in its slot's window (no carry) does not change V:
 * the range counts that window. V grows only through carrying adds and
 * central adds, and each limited one reserves first, then checks
 * root + central + range + inflight_pos <= limit with its reservation in
 * the in-flight word (seq_cst: of two such adds, the later sees both
 * reservations). So among limited adds, S <= V <= limit always holds once
 * it held, and the inline path's check of the header's line is all a
 * windowed add needs. When the check fails, the counter switches to its
 * precise mode (below) and admits by compare-and-swap against the exact
 * sum.
 *
 * Precise mode. The switching thread closes every slot's gate (the mask
 * ~0: no nonzero add stays in a window, and the carrying add compares the
 * mask with the open one) and fences (pcpu_rseq_fence()): no sequence that
 * read an open gate commits afterwards, so the slots' words are frozen;
 * their sum is taken once (frozen), the central word's flag set, and from
 * then on S = frozen + central exactly, and every add is an atomic add or a
 * CAS on the central word. Leaving clears the flag first (a limited add's
 * CAS that read the flag set then fails and starts again), then opens the
 * gates. Switches are serialised by the state word (generation << 2 |
 * mode), so readers can tell a mode that changed under them.
 *
 * Reset is "by offset" (as pcpu counters' and DPDK's statistics reset): with
 * the gates closed and fenced, the central word is set to minus the slots'
 * sum, so S is 0 and nothing else is touched -- no carry in flight needs to
 * be waited for, and the tree stays consistent.
 *
 * fork(): a switch in progress in another thread would leave the child's
 * counter switching for good; the prepare handler waits until no switch
 * runs and blocks new ones until the fork is over (a limited add that would
 * have switched meanwhile refuses: the safe answer). Carries that other
 * threads had in flight never land in the child: their reservations stay,
 * so the child's bounds are that much wider, never wrong.
 */
#include <pcpu/hcounter.h>

#include "core.h"
#include "percpu_sync_internal.h"
#include "rseq_internal.h"
#include "slot_walk.h"
#include "zone_internal.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#define LINE 64
#define MAX_LEVELS 3      /* items between the slots and the root */
#define ARITY 8           /* items' fan-in */
#define ROOT_FAN_IN 16    /* at most this many children of the root */
#define MAX_BATCH ((int64_t)1 << 30)

/* Slot 0's third line: the tree's shape, fixed at creation. */
struct hc_shape {
	int64_t batch;             /* the slots' batch B */
	int64_t levels;            /* items' levels, 0 to MAX_LEVELS */
	int64_t nslots;            /* the CPU slots: level 0 */
	int64_t items[MAX_LEVELS]; /* items of level 1, 2, 3 */
	int64_t carry_room;        /* B_0 + ... + B_levels: a reservation's extra */
	int64_t pad;
};

_Static_assert(sizeof(struct pcpu__hcounter_slot) == LINE, "slot line");
_Static_assert(sizeof(struct pcpu__hcounter_hdr) == LINE, "header line");
_Static_assert(sizeof(struct hc_shape) == LINE, "shape line");
_Static_assert(offsetof(struct pcpu_hcounter, pcpu__h) == LINE, "header at line 1");

static struct pcpu__hcounter_hdr *hdr(pcpu_hcounter_t *h)
{
	return &h->pcpu__h;
}

static const struct hc_shape *shape(const pcpu_hcounter_t *h)
{
	return (const struct hc_shape *)(const void *)((const char *)h + 2 * LINE);
}

static struct pcpu__hcounter_slot *slot(const pcpu_hcounter_t *h, int64_t i)
{
	return (struct pcpu__hcounter_slot *)pcpu_slot_ptr(h, (unsigned)i);
}

/* Item j of level l (1-based): line 2 + l of the copy of the j-th walked
 * CPU slot (slot_walk.c). Items live in walked slots' copies only, as
 * everything of a counter does: the other slots' copies have no memory of
 * their own (no page in a published segment's file; read-only under strict
 * commit accounting). j is below the walked slots' count: propagate()
 * starts from the leaf's position in the walk, and each level's index is
 * the one below modulo that level's items. */
static int64_t *item(const pcpu_hcounter_t *h, int64_t l, int64_t j)
{
	return (int64_t *)(void *)((char *)pcpu_slot_ptr(h, pcpu_slot_walk_nth((uint32_t)j)) +
				   (size_t)(2 + l) * LINE);
}

/* Level l's batch: B x ARITY^l. */
static int64_t batch_of(const struct hc_shape *sh, int64_t l)
{
	return sh->batch << (3 * l);
}

/* The carry of x's move to y at batch b: the difference of the multiples
 * of b they round down to (two's complement: also for negative values). */
static int64_t carry(int64_t x, int64_t y, int64_t b)
{
	return (int64_t)(((uint64_t)y & ~(uint64_t)(b - 1)) - ((uint64_t)x & ~(uint64_t)(b - 1)));
}

static int64_t next_state(int64_t st, int64_t mode)
{
	return (int64_t)((((uint64_t)st >> 2) + 1) << 2) | mode;
}

/* ---- fork: no switch across it ------------------------------------------------- */

static int switching, forking, fork_once;

static void hc_prepare(void)
{
	__atomic_store_n(&forking, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&switching, __ATOMIC_SEQ_CST) != 0)
		sched_yield();
}

static void hc_after(void)
{
	__atomic_store_n(&forking, 0, __ATOMIC_SEQ_CST);
}

/* A switch may begin: 1, or 0 while a fork() runs. */
static int switch_begin(void)
{
	__atomic_fetch_add(&switching, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&forking, __ATOMIC_SEQ_CST)) {
		__atomic_fetch_sub(&switching, 1, __ATOMIC_SEQ_CST);
		return 0;
	}
	return 1;
}

static void switch_end(void)
{
	__atomic_fetch_sub(&switching, 1, __ATOMIC_SEQ_CST);
}

/* Nonzero while the calling thread runs a switch (set before its state's
 * CAS, cleared after the new state's store): a signal handler that
 * interrupted it and makes a limited add on the counter being switched must
 * not wait for the switch to end -- the thread it would wait for is its
 * own. It refuses instead (the safe answer). Initial-exec: a load, no call,
 * in a handler too. */
static __thread int in_switch __attribute__((tls_model("initial-exec")));

/* Test hook (tests/test_hcounter_switch_signal.c): when set, called by
 * every switch (switch_take()) once the counter is in the switching state,
 * so that a test can deliver a signal exactly there. */
PCPU_HIDDEN void (*pcpu__test_hcounter_switching)(pcpu_hcounter_t *h);

/* Test hook (tests/test_hcounter_stale.c): when set, called by a limited
 * carrying add between its check and its section, so that a test can hold
 * the thread there while others switch the counter. */
PCPU_HIDDEN void (*pcpu__test_hcounter_checked)(pcpu_hcounter_t *h);

/* ---- the gates -------------------------------------------------------------------- */

/* The walked CPU slots (slot_walk.c): the leaves a thread's index can
 * name. A CPU hot-added after start-up is not among them (unless
 * PCPU_SLOT_WALK=all), as for every per-CPU object. */
static void set_masks(pcpu_hcounter_t *h, int64_t mask)
{
	for (uint32_t k = 0; k < pcpu_walk_cpu_count; k++)
		__atomic_store_n(&slot(h, pcpu_slot_walk_nth(k))->mask, mask, __ATOMIC_RELAXED);
}

/* The slots' words, gated and fenced: stable. */
static int64_t slots_sum(const pcpu_hcounter_t *h)
{
	uint64_t sum = 0;

	for (uint32_t k = 0; k < pcpu_walk_cpu_count; k++)
		sum += (uint64_t)__atomic_load_n(&slot(h, pcpu_slot_walk_nth(k))->value,
						 __ATOMIC_RELAXED);
	return (int64_t)sum;
}

/* The steps of a switch out of the per-CPU mode (enter_precise() and
 * pcpu_hcounter_reset()), after switch_begin():
 *  - switch_take(): the state from st to switching, by CAS; 0 when the
 *    state moved (the switch is given up: the caller looks again);
 *  - switch_gate(): every slot gated and the sequences fenced; -1 when
 *    the fence was refused (the counter is back in its per-CPU mode,
 *    errno set);
 *  - switch_done(): the new state stored, and the switch ended.
 * in_switch covers the thread from before the CAS to after the store. */
static int switch_take(pcpu_hcounter_t *h, int64_t st, int64_t sw)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	in_switch++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_compare_exchange_n(&hdr(h)->state, &st, sw, 0, __ATOMIC_SEQ_CST,
					 __ATOMIC_SEQ_CST)) {
		in_switch--;
		switch_end();
		return 0;
	}
	if (PCPU_UNLIKELY(pcpu__test_hcounter_switching != NULL))
		pcpu__test_hcounter_switching(h);
	return 1;
}

static void switch_done(pcpu_hcounter_t *h, int64_t state)
{
	__atomic_store_n(&hdr(h)->state, state, __ATOMIC_SEQ_CST);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	in_switch--;
	switch_end();
}

static int switch_gate(pcpu_hcounter_t *h, int64_t sw)
{
	set_masks(h, ~(int64_t)0);
	if (pcpu_rseq_fence() != 0) {
		int err = errno;

		set_masks(h, hdr(h)->mask);
		switch_done(h, next_state(sw, PCPU__HC_PERCPU));
		errno = err;
		return -1;
	}
	return 0;
}

/* Per-CPU -> precise, from state st. 0 switched (or someone else did: the
 * caller looks again), -1 the fence was refused (nothing changed). */
static int enter_precise(pcpu_hcounter_t *h, int64_t st)
{
	struct pcpu__hcounter_hdr *hd = hdr(h);
	int64_t sw;

	if (!switch_begin())
		return -1;
	sw = next_state(st, PCPU__HC_SWITCHING);
	if (!switch_take(h, st, sw))
		return 0;
	if (switch_gate(h, sw) != 0)
		return -1;
	__atomic_store_n(&hd->frozen, slots_sum(h), __ATOMIC_RELAXED);
	__atomic_fetch_or(&hd->central, 1, __ATOMIC_SEQ_CST);
	switch_done(h, next_state(sw, PCPU__HC_PRECISE));
	return 0;
}

/* Precise -> per-CPU, if still precise in state st and the per-CPU bounds
 * then leave `limit` unpassed.
 *
 * Why the bounds are checked here, once no precise add can land: the
 * precise mode's adds check the exact sum, not the reservations of carrying
 * adds that were checked before it began and have not committed (their
 * threads preempted between the check and the section); such an add finds
 * the gate open again once the mode is left, and commits. Nor does the
 * decision to leave (central_limited_add()) see the precise adds that land
 * until the flag is cleared. Leaving only while root + central + range +
 * in-flight <= limit keeps the invariant every per-CPU add relies on: in
 * per-CPU mode that bound never passes the limit (each add that raises it
 * checks it first), so a windowed add, whenever it was checked, and a
 * reserved carrying add leave the precise sum within it. (Before, a
 * carrying add checked before a precise period committed after it and
 * passed the limit: quota_malloc under ASan, once in a full run of the
 * tests and once in 47 runs beside another.) */
static void leave_precise(pcpu_hcounter_t *h, int64_t st, int64_t limit)
{
	struct pcpu__hcounter_hdr *hd = hdr(h);
	int64_t sw = next_state(st, PCPU__HC_SWITCHING), central, pos;

	if (!switch_begin())
		return;
	if (!switch_take(h, st, sw))
		return;
	/* The flag first: a limited add's CAS that read it set fails, so
	 * the central word read here is final for the precise mode. */
	central = __atomic_fetch_and(&hd->central, ~(int64_t)1, __ATOMIC_SEQ_CST) >> 1;
	pos = __atomic_load_n(&hd->inflight_pos, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&hd->root, __ATOMIC_SEQ_CST) + central + hd->range + pos > limit) {
		/* Not yet: precise again (the gates never opened). */
		__atomic_fetch_or(&hd->central, 1, __ATOMIC_SEQ_CST);
		switch_done(h, next_state(sw, PCPU__HC_PRECISE));
		return;
	}
	set_masks(h, hd->mask);
	switch_done(h, next_state(sw, PCPU__HC_PERCPU));
}

/* ---- adds ------------------------------------------------------------------------- */

static void central_add(pcpu_hcounter_t *h, int64_t v)
{
	__atomic_fetch_add(&hdr(h)->central, (int64_t)((uint64_t)v << 1), __ATOMIC_SEQ_CST);
}

/* Carries the move of slot idx's word from old to old + v up the tree. */
static void propagate(pcpu_hcounter_t *h, int64_t idx, int64_t old, int64_t v)
{
	const struct hc_shape *sh = shape(h);
	int64_t c = carry(old, (int64_t)((uint64_t)old + (uint64_t)v), sh->batch);
	int64_t j = pcpu_slot_walk_pos((uint32_t)idx); /* the leaf's place in the walk */

	for (int64_t l = 1; l <= sh->levels && c != 0; l++) {
		int64_t *it, o;

		j %= sh->items[l - 1];
		it = item(h, l, j);
		o = __atomic_fetch_add(it, c, __ATOMIC_RELAXED);
		c = carry(o, (int64_t)((uint64_t)o + (uint64_t)c), batch_of(sh, l));
	}
	if (c != 0)
		__atomic_fetch_add(&hdr(h)->root, c, __ATOMIC_SEQ_CST);
}

static int64_t *inflight(pcpu_hcounter_t *h, int64_t v)
{
	return v > 0 ? &hdr(h)->inflight_pos : &hdr(h)->inflight_neg;
}

static int64_t reservation(pcpu_hcounter_t *h, int64_t v)
{
	return (v > 0 ? v : -v) + shape(h)->carry_room;
}

/* root + central + range + inflight_pos: S's upper bound. */
static int64_t upper_bound(pcpu_hcounter_t *h)
{
	struct pcpu__hcounter_hdr *hd = hdr(h);
	int64_t pos = __atomic_load_n(&hd->inflight_pos, __ATOMIC_SEQ_CST);

	return __atomic_load_n(&hd->root, __ATOMIC_SEQ_CST) +
	       (__atomic_load_n(&hd->central, __ATOMIC_SEQ_CST) >> 1) + hd->range + pos;
}

/* A carrying add of v on the calling thread's slot, its room reserved
 * first; with a limit (limited != 0), only if the bounds with the room leave
 * the limit unpassed. Returns PCPU_RSEQ_COMMITTED, PCPU_RSEQ_ABORTED,
 * PCPU_RSEQ_DIFFERS (the gate is closed), PCPU_RSEQ_NO_INDEX (no index),
 * or PCPU_RSEQ_UNFIT (over the limit). */
static int carrying_add(pcpu_hcounter_t *h, int64_t v, int limited, int64_t limit)
{
	int64_t idx = pcpu_rseq_index(), res, old = 0;
	int rc;

	/* A slot outside the walk (a CPU hot-added after start-up) has no
	 * item to carry into: the central word takes the add. */
	if (idx < 0 || idx >= shape(h)->nslots || !pcpu_slot_walk_has_cpu((uint32_t)idx))
		return PCPU_RSEQ_NO_INDEX;
	res = reservation(h, v);
	__atomic_fetch_add(inflight(h, v), res, __ATOMIC_SEQ_CST);
	if (limited && upper_bound(h) > limit) {
		rc = PCPU_RSEQ_UNFIT;
	} else {
		if (PCPU_UNLIKELY(limited && pcpu__test_hcounter_checked != NULL))
			pcpu__test_hcounter_checked(h);
		rc = pcpu__rseq_load_cbne_load_store_add_store(idx, &slot(h, idx)->value, hdr(h)->mask,
							       &old, v);
		if (rc == PCPU_RSEQ_COMMITTED)
			propagate(h, idx, old, v);
	}
	__atomic_fetch_sub(inflight(h, v), res, __ATOMIC_SEQ_CST);
	return rc;
}

void pcpu__hcounter_add_slow(pcpu_hcounter_t *h, int64_t v)
{
	if (v == 0)
		return;
	for (int tries = 0; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
		int64_t st = __atomic_load_n(&hdr(h)->state, __ATOMIC_ACQUIRE);
		int rc;

		if (PCPU__HC_MODE(st) != PCPU__HC_PERCPU || pcpu__thread_prepare() != 0)
			break;
		/* The windowed add again (it may have been preempted), then the
		 * carrying one. */
		rc = pcpu__rseq_this_load_add_cbmask_store(&h->pcpu__s.value, v);
		if (rc == PCPU_RSEQ_COMMITTED)
			return;
		if (rc == PCPU_RSEQ_ABORTED)
			continue;
		rc = carrying_add(h, v, 0, 0);
		if (rc == PCPU_RSEQ_COMMITTED)
			return;
		if (rc == PCPU_RSEQ_NO_INDEX)
			break;
	}
	central_add(h, v);
}

/* The limited add without its slots: a CAS on the central word, against
 * the exact sum (precise or atomic mode). 1 added, 0 over the limit, -1
 * the mode changed. */
static int central_limited_add(pcpu_hcounter_t *h, int64_t st, int64_t v, int64_t limit)
{
	struct pcpu__hcounter_hdr *hd = hdr(h);
	int64_t w = __atomic_load_n(&hd->central, __ATOMIC_SEQ_CST);

	for (;;) {
		int64_t sum;

		if (!(w & 1) || __atomic_load_n(&hd->state, __ATOMIC_SEQ_CST) != st)
			return -1;
		sum = __atomic_load_n(&hd->frozen, __ATOMIC_RELAXED) + (w >> 1);
		if (sum > limit - v)
			return 0;
		if (__atomic_compare_exchange_n(&hd->central, &w, (int64_t)((uint64_t)w + ((uint64_t)v << 1)),
						0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
			/* Far enough below the limit again: back to per-CPU. */
			if (PCPU__HC_MODE(st) == PCPU__HC_PRECISE &&
			    sum + v <= limit - 2 * hd->range - shape(h)->carry_room)
				leave_precise(h, st, limit);
			return 1;
		}
	}
}

/* The limited add on the central word in per-CPU mode, its room reserved:
 * 1 added, 0 the bounds leave no room, -1 the precise flag is set (the
 * mode changed). The CAS expects the flag clear, so an add lands either
 * before the switch sets it (and every precise CAS sees it) or not at all. */
static int central_percpu_limited_add(pcpu_hcounter_t *h, int64_t v, int64_t limit)
{
	struct pcpu__hcounter_hdr *hd = hdr(h);
	int64_t w = __atomic_load_n(&hd->central, __ATOMIC_SEQ_CST);
	int rc;

	__atomic_fetch_add(&hd->inflight_pos, v, __ATOMIC_SEQ_CST);
	for (;;) {
		if (w & 1) {
			rc = -1;
			break;
		}
		if (__atomic_load_n(&hd->root, __ATOMIC_SEQ_CST) + (w >> 1) + hd->range +
			    __atomic_load_n(&hd->inflight_pos, __ATOMIC_SEQ_CST) >
		    limit) {
			rc = 0;
			break;
		}
		if (__atomic_compare_exchange_n(&hd->central, &w, (int64_t)((uint64_t)w + ((uint64_t)v << 1)),
						0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
			rc = 1;
			break;
		}
	}
	__atomic_fetch_sub(&hd->inflight_pos, v, __ATOMIC_SEQ_CST);
	return rc;
}

bool pcpu__hcounter_limited_add_slow(pcpu_hcounter_t *h, int64_t v, int64_t limit)
{
	struct pcpu__hcounter_hdr *hd = hdr(h);

	if (v <= 0) {
		pcpu__hcounter_add_inline(h, v);
		return true;
	}
	for (int aborts = 0;;) {
		int64_t st = __atomic_load_n(&hd->state, __ATOMIC_SEQ_CST);
		int rc;

		switch (PCPU__HC_MODE(st)) {
		case PCPU__HC_PERCPU:
			if (aborts < PCPU_RSEQ_MAX_TRIES && pcpu__thread_prepare() == 0) {
				rc = carrying_add(h, v, 1, limit);
				if (rc == PCPU_RSEQ_COMMITTED)
					return true;
				if (rc == PCPU_RSEQ_ABORTED) {
					aborts++;
					continue;
				}
				if (rc == PCPU_RSEQ_DIFFERS)
					continue; /* a switch closed the gate */
				if (rc == PCPU_RSEQ_UNFIT)
					goto precise;
			}
			/* No index (or aborted again and again): the central
			 * word, its room reserved, by a CAS that fails once a
			 * switch to the precise mode has set the flag. (A plain
			 * add could land after the switch, unseen by a precise
			 * CAS that checked the exact sum without it, and pass the
			 * limit.) */
			rc = central_percpu_limited_add(h, v, limit);
			if (rc == 1)
				return true;
			if (rc < 0)
				continue; /* the mode changed */
precise:
			if (enter_precise(h, st) != 0)
				return false; /* cannot be exact now: refuse */
			continue;
		case PCPU__HC_SWITCHING:
			/* A handler that interrupted this thread's own switch
			 * (of this counter or another): waiting would never end. */
			if (in_switch)
				return false;
			sched_yield();
			continue;
		default: /* precise, atomic */
			rc = central_limited_add(h, st, v, limit);
			if (rc >= 0)
				return rc == 1;
			continue;
		}
	}
}

/* ---- reads --------------------------------------------------------------------------- */

int64_t pcpu_hcounter_sum(const pcpu_hcounter_t *h)
{
	const struct pcpu__hcounter_hdr *hd;

	if (!h) {
		errno = EINVAL;
		return 0;
	}
	hd = &h->pcpu__h;
	for (;;) {
		int64_t st = __atomic_load_n(&hd->state, __ATOMIC_ACQUIRE), sum;

		if (PCPU__HC_MODE(st) >= PCPU__HC_PRECISE) {
			sum = __atomic_load_n(&hd->frozen, __ATOMIC_RELAXED) +
			      (__atomic_load_n(&hd->central, __ATOMIC_ACQUIRE) >> 1);
			if (__atomic_load_n(&hd->state, __ATOMIC_ACQUIRE) == st)
				return sum;
			continue;
		}
		return (int64_t)((uint64_t)slots_sum(h) +
				 (uint64_t)(__atomic_load_n(&hd->central, __ATOMIC_ACQUIRE) >> 1));
	}
}

int pcpu_hcounter_compare(const pcpu_hcounter_t *h, int64_t v)
{
	struct pcpu_hcounter_approx a;
	int64_t s;

	if (!h) {
		errno = EINVAL;
		return 0;
	}
	a = pcpu__hcounter_approx_inline(h);
	if (a.max < v)
		return -1;
	if (a.min > v)
		return 1;
	if (a.min == a.max)
		return (a.value > v) - (a.value < v);
	s = pcpu_hcounter_sum(h);
	return (s > v) - (s < v);
}

int64_t pcpu_hcounter_range(const pcpu_hcounter_t *h)
{
	if (!h) {
		errno = EINVAL;
		return 0;
	}
	return h->pcpu__h.range;
}

int pcpu_hcounter_is_percpu(const pcpu_hcounter_t *h)
{
	return h && PCPU__HC_MODE(__atomic_load_n(&h->pcpu__h.state, __ATOMIC_ACQUIRE)) !=
			    PCPU__HC_ATOMIC;
}

/* ---- reset --------------------------------------------------------------------------- */

int pcpu_hcounter_reset(pcpu_hcounter_t *h)
{
	struct pcpu__hcounter_hdr *hd;

	if (!h) {
		errno = EINVAL;
		return -1;
	}
	hd = hdr(h);
	for (;;) {
		int64_t st = __atomic_load_n(&hd->state, __ATOMIC_SEQ_CST), w, sw;

		switch (PCPU__HC_MODE(st)) {
		case PCPU__HC_ATOMIC:
			__atomic_store_n(&hd->central, 1, __ATOMIC_SEQ_CST);
			return 0;
		case PCPU__HC_PRECISE:
			/* Frozen already: the central word takes minus the slots'
			 * sum, keeping the flag (a CAS, so that the mode cannot
			 * have changed under it). */
			w = __atomic_load_n(&hd->central, __ATOMIC_SEQ_CST);
			if (!(w & 1) || __atomic_load_n(&hd->state, __ATOMIC_SEQ_CST) != st)
				continue;
			if (__atomic_compare_exchange_n(
				    &hd->central, &w,
				    (int64_t)(((uint64_t)0 - (uint64_t)__atomic_load_n(&hd->frozen,
									       __ATOMIC_RELAXED))
					      << 1) | 1,
				    0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
				return 0;
			continue;
		case PCPU__HC_SWITCHING:
			sched_yield();
			continue;
		default:
			break;
		}
		/* Per-CPU: gate, fence, offset, open. */
		sw = next_state(st, PCPU__HC_SWITCHING);
		while (!switch_begin())
			sched_yield();
		if (!switch_take(h, st, sw))
			continue;
		if (switch_gate(h, sw) != 0)
			return -1;
		__atomic_store_n(&hd->central, (int64_t)(((uint64_t)0 - (uint64_t)slots_sum(h)) << 1),
				 __ATOMIC_SEQ_CST);
		set_masks(h, hd->mask);
		switch_done(h, next_state(sw, PCPU__HC_PERCPU));
		return 0;
	}
}

/* ---- creation ------------------------------------------------------------------------ */

pcpu_hcounter_t *pcpu_hcounter_create_in(pcpu_zone_t *zone, int64_t batch)
{
	struct hc_shape sh;
	struct pcpu__hcounter_hdr *hd;
	pcpu_hcounter_t *h;
	int64_t range, items;
	int percpu, saved = errno;

	if (!zone || batch < 2 || batch > MAX_BATCH || (batch & (batch - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	if (pcpu__zone_is_tree(zone)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (pcpu__fork_register(&fork_once, PCPU_FORK_COUNTER, hc_prepare, hc_after, hc_after) != 0)
		return NULL;
	/* The shape: no items up to ROOT_FAN_IN slots, then levels of ARITY
	 * until the root's children are at most ROOT_FAN_IN. */
	memset(&sh, 0, sizeof(sh));
	sh.batch = batch;
	sh.nslots = (int64_t)pcpu_cpu_slot_count;
	items = sh.nslots;
	range = sh.nslots * (batch - 1);
	sh.carry_room = batch;
	while (items > ROOT_FAN_IN && sh.levels < MAX_LEVELS) {
		items = (items + ARITY - 1) / ARITY;
		sh.items[sh.levels++] = items;
		range += items * (batch_of(&sh, sh.levels) - batch_of(&sh, sh.levels - 1));
		sh.carry_room += batch_of(&sh, sh.levels);
	}
	h = (pcpu_hcounter_t *)pcpu_zone_alloc(zone, (size_t)(3 + sh.levels) * LINE, LINE);
	if (!h)
		return NULL;
	percpu = pcpu_sync_percpu_check() == 0;
	memcpy((char *)h + 2 * LINE, &sh, sizeof(sh));
	hd = hdr(h);
	hd->mask = ~(batch - 1);
	if (percpu) {
		hd->range = range;
		set_masks(h, hd->mask);
		hd->state = PCPU__HC_PERCPU;
	} else {
		set_masks(h, ~(int64_t)0); /* no add commits on a slot */
		hd->central = 1;           /* the central word is the counter */
		hd->state = PCPU__HC_ATOMIC;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	errno = saved;
	return h;
}

pcpu_hcounter_t *pcpu_hcounter_create(int64_t batch)
{
	pcpu_zone_t *z = pcpu_default_zone();

	return z ? pcpu_hcounter_create_in(z, batch) : NULL;
}

void pcpu_hcounter_destroy(pcpu_hcounter_t *h)
{
	if (h)
		(void)pcpu_zone_free(pcpu_zone_of(h), h);
}
