/* SPDX-License-Identifier: MIT */
/*
 * Counter words that hold doubles: what the statistics layer's values
 * with fractions keep beside their integer words (pcpu/fraction.h,
 * docs/stats-design.md "Values beyond the integer words").
 *
 * Two kinds of word, each a word of a zone object like a counter's:
 *
 *  - a *shared double*: one double in slot 0's mirror word, changed only
 *    by atomic compare-and-swap (an add) or exchange (a set). A counter's
 *    or gauge's residue: rare updates, and a set must be able to store it.
 *    Every fetch of the word reads those bits, since every other copy of
 *    it is 0 (summing slot and mirror words, modulo 2^64, gives them).
 *  - *per-slot doubles*: each slot's word holds a double, added to by an
 *    rseq compare-and-store on the calling thread's slot (no atomic
 *    instruction, no shared cache line: pcpu_rseq_load_cbne_store(),
 *    the section the consistent groups take their lanes with), its mirror
 *    word by compare-and-swap where rseq cannot be used. The value is the
 *    sum over the slots of (word + mirror word) as doubles, slot by slot.
 *    A histogram's sum of the observations its integer words cannot hold:
 *    those may be frequent (byte counts recorded in billionths), so they
 *    must not meet on one cache line.
 *
 * Why a slot's (word + mirror) is added first: a reset stores into the
 * mirror word minus the slot's sum, and x + (-x) is exactly 0 in every
 * rounding, so a reset leaves exactly 0 however large the values were --
 * where one offset for the whole sum would leave the rounding of a sum
 * taken in another order. Readers in other processes (the segment reader,
 * the Go reader) add in the same order.
 *
 * 32-bit targets have no 64-bit rseq compare-and-store (the section
 * compares a pointer-sized word): there every per-slot add takes the
 * atomic path, on the mirror word of the thread's fallback slot.
 */
#include <pcpu/counter.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "rseq_internal.h"
#include "slot_walk.h"
#include "striped_lock.h"
#include "zone_internal.h"
#include "zone_mirror.h"

static inline double bits_double(uint64_t b)
{
	double d;

	memcpy(&d, &b, sizeof d);
	return d;
}

static inline uint64_t double_bits(double d)
{
	uint64_t b;

	memcpy(&b, &d, sizeof b);
	return b;
}

/* Adds v to the double whose bits are at `w`, atomically (a CAS loop). */
static void cas_add(int64_t *w, double v)
{
	int64_t old = __atomic_load_n(w, __ATOMIC_RELAXED);

	while (!__atomic_compare_exchange_n(w, &old, (int64_t)double_bits(bits_double((uint64_t)old) + v),
					    1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
	}
}

void pcpu__counter_double_add_shared(pcpu_counter_t w, double v)
{
	pcpu_mirror_mark(w);
	cas_add(pcpu_mirror_word(w, 0), v);
}

double pcpu__counter_double_exchange(pcpu_counter_t w, double v)
{
	pcpu_mirror_mark(w);
	return bits_double((uint64_t)__atomic_exchange_n(pcpu_mirror_word(w, 0),
							 (int64_t)double_bits(v), __ATOMIC_RELAXED));
}

/* One try of the per-slot add under rseq: 0 once committed. */
static int double_add_once(pcpu_counter_t w, double v)
{
#if UINTPTR_MAX == UINT64_MAX
	int64_t idx = pcpu__rseq_load_index();
	intptr_t *p, old;

	if (idx < 0 || (uint64_t)idx >= pcpu_slot_count)
		return -1;
	p = (intptr_t *)&pcpu__counter_slot(w, (size_t)idx)->pcpu__word;
	old = __atomic_load_n(p, __ATOMIC_RELAXED);
	return pcpu_rseq_load_cbne_store(idx, p, old,
					 (intptr_t)double_bits(bits_double((uint64_t)old) + v)) ==
			       PCPU_RSEQ_COMMITTED
		       ? 0
		       : -1;
#else
	(void)w;
	(void)v;
	return -1;
#endif
}

void pcpu__counter_double_add(pcpu_counter_t w, double v)
{
	int tries;

	/* As pcpu__counter_add_slow(): a thread given a fallback slot goes
	 * straight to it; another registers and retries a few times. */
	if (pcpu_t_fallback_slot_plus1 == 0) {
		if (double_add_once(w, v) == 0)
			return;
		if (pcpu__thread_prepare() == 0)
			for (tries = 1; tries < PCPU_RSEQ_MAX_TRIES; tries++)
				if (double_add_once(w, v) == 0)
					return;
	}
	pcpu_mirror_mark(w);
	cas_add(pcpu_mirror_word(w, pcpu_fallback_slot()), v);
}

/* Slot `slot`'s double: its word plus its mirror word, as doubles. */
static double slot_double(pcpu_counter_t w, uint32_t slot, int mirror)
{
	double d = bits_double((uint64_t)__atomic_load_n(&pcpu__counter_slot(w, slot)->pcpu__word,
							 __ATOMIC_RELAXED));

	if (mirror)
		d += bits_double((uint64_t)__atomic_load_n(pcpu_mirror_word(w, slot), __ATOMIC_RELAXED));
	return d;
}

double pcpu__counter_double_sum(pcpu_counter_t w)
{
	int mirror = pcpu_mirror_in_use(w);
	double sum = 0.0;
	uint32_t slot;

	PCPU_SLOT_WALK(i, slot) {
		sum += slot_double(w, slot, mirror);
	}
	return sum;
}

void pcpu__counter_double_reset(pcpu_counter_t w)
{
	uint32_t slot;

	pcpu_mirror_mark(w);
	PCPU_SLOT_WALK(i, slot) {
		int64_t *m = pcpu_mirror_word(w, slot);
		int64_t old = __atomic_load_n(m, __ATOMIC_RELAXED);

		/* The mirror becomes minus the slot's word, so the slot reads
		 * exactly 0 until its next add; an add racing the reset lands
		 * before (and is reset) or after it. A slot that is not finite
		 * stays so: no offset cancels an infinity. */
		for (;;) {
			double word = bits_double((uint64_t)__atomic_load_n(
				&pcpu__counter_slot(w, slot)->pcpu__word, __ATOMIC_RELAXED));

			if (__atomic_compare_exchange_n(m, &old, (int64_t)double_bits(-word), 1,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
				break;
		}
	}
}

/* A tree zone's (core.h) word set: lock-free, as pcpu__counter_set()
 * is there (another process cannot take this one's stripes). */
static void tree_word_set(pcpu_counter_t c, uint64_t v)
{
	(void)pcpu__counter_set(c, v);
}

void pcpu__counter_set_fraction(pcpu_counter_t c, uint64_t whole, uint64_t nanos, double residue)
{
	pthread_mutex_t *lock;
	pcpu_counter_t n = pcpu_counter_at(c, 1), r = pcpu_counter_at(c, 2);

	if (pcpu__zone_is_tree(pcpu_zone_find(c))) {
		tree_word_set(c, whole);
		tree_word_set(n, nanos);
		(void)pcpu__counter_double_exchange(r, residue);
		return;
	}
	/* One stripe, word 0's, for the three words: two sets of one value
	 * never mix. Each word's offset as pcpu__counter_set() computes it
	 * (that function takes its own word's stripe, which could be this
	 * one: not called under it). */
	lock = pcpu_stripe_lock(c);
	pcpu_mirror_mark(c);
	__atomic_fetch_add(pcpu_mirror_word(c, 0), (int64_t)(whole - pcpu_counter_fetch(c)),
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(pcpu_mirror_word(n, 0), (int64_t)(nanos - pcpu_counter_fetch(n)),
			   __ATOMIC_RELAXED);
	(void)__atomic_exchange_n(pcpu_mirror_word(r, 0), (int64_t)double_bits(residue),
				  __ATOMIC_RELAXED);
	pcpu_stripe_unlock(lock);
}

/* |x| for an int64 that may be INT64_MIN, as an unsigned. */
static inline uint64_t mag(int64_t x)
{
	return x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
}

int pcpu__counter_add_pair_bounded(pcpu_counter_t pair, int64_t n, int64_t v, uint64_t bound)
{
	int tries;
	uint32_t slot;
	int64_t *m;

	if (pcpu_t_fallback_slot_plus1 == 0 && pcpu__thread_prepare() == 0) {
		for (tries = 1; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
			int64_t idx = pcpu__rseq_load_index();

			if (idx < 0 || (uint64_t)idx >= pcpu_slot_count)
				break;
			if (mag(__atomic_load_n(&pcpu__counter_slot(pair + 1, (size_t)idx)->pcpu__word,
						__ATOMIC_RELAXED)) > bound)
				return 1;
			if (pcpu__rseq_this_add2(&pair->pcpu__word, n, v) == PCPU_RSEQ_COMMITTED)
				return 0;
		}
	}
	/* The atomic path: the mirror words of the thread's fallback slot,
	 * the sum's bounded as the slots' are. */
	pcpu_mirror_mark(pair);
	slot = pcpu_fallback_slot();
	m = pcpu_mirror_word(pair + 1, slot);
	if (mag(__atomic_load_n(m, __ATOMIC_RELAXED)) > bound)
		return 1;
	__atomic_fetch_add(pcpu_mirror_word(pair, slot), n, __ATOMIC_RELAXED);
	__atomic_fetch_add(m, v, __ATOMIC_RELAXED);
	return 0;
}
