/* SPDX-License-Identifier: MIT */
/*
 * counter.c: the slow paths of pcpu's counters -- the fallback add, reads,
 * resets, allocation. The fast path is inline in include/pcpu/counter.h.
 *
 * Words: slot s's word (at c + s * STRIDE) is written only by rseq commits;
 * its mirror word (at c + (nslots + s) * STRIDE) only by atomic
 * read-modify-writes -- the fallback add and the reset offset. A fetch sums
 * the words, and the mirror words when the chunk's mirror flag says some
 * were ever written (pcpu_mirror_mark(), before the first such write;
 * zone_mirror.h).
 *
 * Reset by offset: fetch_and_zero reads the sum S of all slots and subtracts
 * S from slot 0's mirror word with an atomic add. Adders keep adding to their
 * own words throughout; nobody ever stores into a word another thread adds
 * to with a plain read-modify-write. Resetters of one counter are serialised
 * by a striped mutex, so each reads the sum after the previous one's
 * subtraction. Then the values the resets return telescope: their total plus
 * the final fetch equals the total of all adds, exactly. A reset is a set
 * to 0 (pcpu__counter_set(), which a gauge's set uses too), and the stripes
 * are the library's (striped_lock.c).
 *
 * A shared registry's counter (a tree zone, core.h) is reset and set
 * by every process of a pre-fork tree, and one of them may be stopped,
 * traced or killed at any instant: no lock may order them. There the offset
 * moves by compare-and-swap instead (tree_set()): a resetter reads the
 * offset word m, then the sum S of every other word, and replaces m by
 * m + v - (S + m) only if the word still holds m. Another reset (or set)
 * in between changes it: the swap fails, and the resetter reads both again,
 * after that reset, so each reset returns what was added since the one
 * before it, never a second time. (A fallback add on slot 0 changes the
 * word too and costs a retry; an identical word after other resets -- they
 * returned 0 in all -- changes nothing of the above.)
 */
#include <pcpu/counter.h>

#include "core.h"
#include "rseq_internal.h"
#include "slot_walk.h"
#include "striped_lock.h"
#include "torn64.h"
#include "zone_internal.h"
#include "zone_mirror.h"

#include <pthread.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef PCPU_DEBUG_LIBRARY
#define CHECK(c) pcpu__debug_check((c), __func__)
#else
#define CHECK(c) ((void)0)
#endif

/* The fallback add itself: an atomic add on the mirror word of `slot`.
 * pcpu is initialised (a counter exists). */
static inline void add_atomic_at(pcpu_counter_t c, uint32_t slot, int64_t v)
{
	pcpu_mirror_mark(c);
	__atomic_fetch_add(pcpu_mirror_word(c, slot), v, __ATOMIC_RELAXED);
}

/* ... on the calling thread's fallback slot. */
static inline void add_atomic(pcpu_counter_t c, int64_t v)
{
	add_atomic_at(c, pcpu_fallback_slot(), v);
}

void pcpu__counter_add_atomic_slow(pcpu_counter_t c, int64_t v)
{
	CHECK(c);
	add_atomic(c, v);
}

void pcpu__counter_add_slow(pcpu_counter_t c, int64_t v)
{
	uint32_t plus1 = pcpu_t_fallback_slot_plus1;
	int tries;

	/* A thread that was given a fallback slot has no usable rseq area for
	 * good (registration refused, PCPU_RSEQ=0, or after its exit
	 * destructor): straight to the atomic add on that slot's mirror word,
	 * without asking pcpu__thread_prepare() again on every add. */
	if (PCPU_LIKELY(plus1 != 0)) {
		add_atomic_at(c, plus1 - 1, v);
		return;
	}
	/* The inline attempt did not commit: the thread is not registered
	 * (pcpu registers it now if it registers threads itself), or the
	 * section aborted. Retry rseq a few times, then take the atomic path,
	 * which is always exact. */
	if (pcpu__thread_prepare() == 0)
		for (tries = 1; tries < PCPU_RSEQ_MAX_TRIES; tries++)
			if (pcpu__counter_add_once(c, v) == 0)
				return;
	add_atomic(c, v);
}

int pcpu_counter_owned_array(pcpu_worker_t w, pcpu_counter_t array, pcpu_owned_array_t *a)
{
	if (!a) {
		errno = EINVAL;
		return -1;
	}
	a->pcpu__words = NULL;
	/* The claim must be the thread's own now: a view of a released slot
	 * would write words that the slot's next owner writes too. */
	if (w.pcpu__off == 0 || w.pcpu__off != pcpu__worker_off || !array) {
		errno = EINVAL;
		return -1;
	}
	CHECK(array);
	a->pcpu__words = pcpu__counter_owned_word(w, array);
	return 0;
}

/* Test hook (tests/test_reset_interleaving.c): when set, called by
 * fetch_and_zero between reading the sum and subtracting it, so a test can
 * hold a resetter there and prove the reset lock serialises resetters. */
PCPU_HIDDEN void (*pcpu__test_reset_pause)(void *counter);

uint64_t pcpu_counter_fetch(pcpu_counter_t c)
{
	uint64_t sum;

	if (!c) {
		errno = EINVAL;
		return 0;
	}
	CHECK(c);
	sum = pcpu_slot_walk_sum(&c->pcpu__word);
	/* The mirror words from the mirror region's start: the walk adds
	 * each slot's offset to it as to slot 0's word. */
	if (pcpu_mirror_in_use(c))
		sum += pcpu_slot_walk_sum(pcpu_mirror_word(c, 0));
	return sum;
}

uint64_t pcpu_counter_fetch_slot(pcpu_counter_t c, unsigned slot)
{
	if (!c || slot >= pcpu_slot_count) {
		errno = EINVAL;
		return 0;
	}
	CHECK(c);
	/* A slot no thread can write (a possible CPU that is not present, an
	 * owned slot never claimed) holds 0, and in a published zone its
	 * copy is a hole of the file, which a load would allocate: not read. */
	if (!pcpu_slot_walked(slot))
		return 0;
	return pcpu__slot_value(c, slot, pcpu_mirror_in_use(c));
}

/* Relaxed loads: adders write the words meanwhile (untorn on 32-bit
 * targets: torn64.h). */
#define WORD(p, i) pcpu__load_u64(&(p)[i])

/* out[i] += the sum of word i of the k (1 to 4) slots' words at p[0..k-1],
 * i < n: one pass over out, each slot's words streamed. */
static void sum_pass(uint64_t *out, const int64_t *const *p, unsigned k, size_t n)
{
	size_t i;

	switch (k) {
	case 4:
		for (i = 0; i < n; i++)
			out[i] += WORD(p[0], i) + WORD(p[1], i) + WORD(p[2], i) + WORD(p[3], i);
		break;
	case 3:
		for (i = 0; i < n; i++)
			out[i] += WORD(p[0], i) + WORD(p[1], i) + WORD(p[2], i);
		break;
	case 2:
		for (i = 0; i < n; i++)
			out[i] += WORD(p[0], i) + WORD(p[1], i);
		break;
	case 1:
		for (i = 0; i < n; i++)
			out[i] += WORD(p[0], i);
		break;
	}
}
#undef WORD

/* out[i] += word i at `words` summed over the walked slots, i < n.
 * Slot-major, so each slot's words stream, four slots a pass: out[i] is
 * loaded, added to and stored once per four slots, not once per slot (a
 * histogram's 2 x 9 words over 16 slots were 288 such read-modify-writes
 * of out, now 72). */
static void sum_words(const int64_t *words, size_t n, uint64_t *out)
{
	const int64_t *p[4];
	unsigned k = 0;
	uint32_t slot;

	PCPU_SLOT_WALK(s, slot) {
		p[k++] = (const int64_t *)((const char *)words + ((size_t)slot << PCPU_SLOT_STRIDE_SHIFT));
		if (k == 4) {
			sum_pass(out, p, 4, n);
			k = 0;
		}
	}
	sum_pass(out, p, k, n); /* the rest: 0 to 3 slots */
}

int pcpu_counter_fetch_array(pcpu_counter_t c, size_t n, uint64_t *out)
{
	if (!c || (n && !out)) {
		errno = EINVAL;
		return -1;
	}
	CHECK(c);
	memset(out, 0, n * sizeof(*out));
	sum_words(&c->pcpu__word, n, out);
	/* The mirror words from the mirror region's start (the walk adds each
	 * slot's offset to it as to slot 0's word). */
	if (pcpu_mirror_in_use(c))
		sum_words(pcpu_mirror_word(c, 0), n, out);
	return 0;
}

/* A tree zone's set (see the top): lock-free across processes. */
static uint64_t tree_set(pcpu_counter_t c, uint64_t v)
{
	int64_t *offset = pcpu_mirror_word(c, 0);
	uint32_t slot;

	/* The flag first, so every later fetch reads the offset. */
	pcpu_mirror_mark(c);
	for (;;) {
		int64_t m = __atomic_load_n(offset, __ATOMIC_ACQUIRE);
		uint64_t total = (uint64_t)m;

		/* Acquire above: every word is read after m. */
		PCPU_SLOT_WALK(i, slot) {
			total += pcpu__load_u64(&pcpu__counter_slot(c, slot)->pcpu__word);
			if (slot != 0)
				total += (uint64_t)__atomic_load_n(pcpu_mirror_word(c, slot),
								   __ATOMIC_RELAXED);
		}
		if (pcpu__test_reset_pause)
			pcpu__test_reset_pause(c);
		if (__atomic_compare_exchange_n(offset, &m, (int64_t)((uint64_t)m + (v - total)), 0,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return total;
	}
}

uint64_t pcpu__counter_set(pcpu_counter_t c, uint64_t v)
{
	pthread_mutex_t *lock;
	uint64_t total;

	if (pcpu__zone_is_tree(pcpu_zone_find(c)))
		return tree_set(c, v);
	lock = pcpu_stripe_lock(c);
	total = pcpu_counter_fetch(c);

	if (pcpu__test_reset_pause)
		pcpu__test_reset_pause(c);
	/* The offset lives in slot 0's mirror word: only atomic RMWs touch it.
	 * The flag first, so every later fetch reads the offset. */
	pcpu_mirror_mark(c);
	__atomic_fetch_add(pcpu_mirror_word(c, 0), (int64_t)(v - total), __ATOMIC_RELAXED);
	pcpu_stripe_unlock(lock);
	return total;
}

uint64_t pcpu_counter_fetch_and_zero(pcpu_counter_t c)
{
	if (!c) {
		errno = EINVAL;
		return 0;
	}
	CHECK(c);
	return pcpu__counter_set(c, 0);
}

void pcpu_counter_zero(pcpu_counter_t c)
{
	(void)pcpu_counter_fetch_and_zero(c);
}

pcpu_counter_t pcpu_counter_alloc_in(pcpu_zone_t *zone, size_t n)
{
	if (!zone || n == 0) {
		errno = EINVAL;
		return NULL;
	}
	if (n > PCPU_ZONE_MAX_OBJECT / sizeof(struct pcpu_counter)) {
		errno = E2BIG;
		return NULL;
	}
	return pcpu_zone_alloc(zone, n * sizeof(struct pcpu_counter), sizeof(struct pcpu_counter));
}

pcpu_counter_t pcpu_counter_alloc_array(size_t n)
{
	pcpu_zone_t *z;

	if (n == 0) {
		errno = EINVAL;
		return NULL;
	}
	z = pcpu_default_zone();
	return z ? pcpu_counter_alloc_in(z, n) : NULL;
}

pcpu_counter_t pcpu_counter_alloc(void)
{
	return pcpu_counter_alloc_array(1);
}

int pcpu_counter_free(pcpu_counter_t c)
{
	pcpu_zone_t *z;

	if (!c)
		return 0;
	/* A foreign or double free is refused in every build (EINVAL,
	 * nothing changed): it is cheap to detect here, unlike on an add. */
	z = pcpu_zone_find(c);
	if (!z) {
		errno = EINVAL;
		return -1;
	}
	return pcpu_zone_free(z, c);
}

/* ---- per-slot access for counter(9)'s zpcpu_* ------------------------------ */

unsigned pcpu_current_slot(void)
{
	pcpu_init();
	(void)pcpu__thread_prepare(); /* registers the thread where pcpu does */
	return pcpu_fallback_slot();  /* its current index, when registered */
}

uint64_t pcpu_slot_replace(void *obj, uint64_t v)
{
#if PCPU_ARCH_HAVE_RSEQ
	if (pcpu__thread_prepare() == 0) {
		for (;;) {
			int64_t idx = pcpu__rseq_load_index();
			intptr_t *p, old;

			if (idx < 0)
				break; /* unregistered since: the fallback below */
			p = (intptr_t *)pcpu_slot_ptr(obj, (unsigned)idx);
			old = __atomic_load_n(p, __ATOMIC_RELAXED);
			if (pcpu_rseq_load_cbne_store(idx, p, old, (intptr_t)v) == 0)
				return (uint64_t)old;
		}
	}
#endif
	pcpu_init();
	return __atomic_exchange_n((uint64_t *)pcpu_slot_ptr(obj, pcpu_fallback_slot()), v,
				   __ATOMIC_RELAXED);
}
