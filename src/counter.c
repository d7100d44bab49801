/* SPDX-License-Identifier: MIT */
/*
 * counter.c: the slow paths of pcpu's counters -- the fallback add, reads,
 * resets, allocation. The fast path is inline in include/pcpu/counter.h.
 *
 * Reset by offset: fetch_and_zero reads the sum S of all slots and subtracts
 * S from slot 0's atomic_sum with an atomic add. Adders keep adding to their
 * own words throughout; nobody ever stores into a word another thread adds
 * to with a plain read-modify-write. Resetters of one counter are serialised
 * by a striped mutex, so each reads the sum after the previous one's
 * subtraction. Then the values the resets return telescope: their total plus
 * the final fetch equals the total of all adds, exactly.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Few stripes: resets are rare, and fork() takes them all at once (tools
 * such as ThreadSanitizer cap how many locks one thread may hold). */
#define RESET_STRIPES 16

static pthread_mutex_t reset_locks[RESET_STRIPES] = {
	[0 ... RESET_STRIPES - 1] = PTHREAD_MUTEX_INITIALIZER,
};

static pthread_mutex_t *reset_lock_of(pcpu_counter_t c)
{
	return &reset_locks[((uintptr_t)c >> 4) % RESET_STRIPES];
}

void pcpu_counter_atfork_prepare(void)
{
	for (int i = 0; i < RESET_STRIPES; i++)
		pthread_mutex_lock(&reset_locks[i]);
}

void pcpu_counter_atfork_release(void)
{
	for (int i = RESET_STRIPES - 1; i >= 0; i--)
		pthread_mutex_unlock(&reset_locks[i]);
}

#ifdef PCPU_DEBUG_LIBRARY
#define CHECK(c) pcpu__debug_check((c), __func__)
#else
#define CHECK(c) ((void)0)
#endif

void pcpu__debug_check(const void *obj, const char *func)
{
	const char *what = NULL;

	if (!obj)
		what = "is NULL";
	else if (!pcpu_zone_contains_live(obj))
		what = "is not a live pcpu allocation (freed, or never allocated)";
	if (!what)
		return;
	/* Debug builds only (PCPU_DEBUG): a programming error, reported the way
	 * assert() reports one. Release builds never get here. */
	fprintf(stderr, "pcpu: %s: handle %p %s\n", func ? func : "?", obj, what);
	abort();
}

/* The fallback add itself; pcpu is initialised (a counter exists). */
static inline void add_atomic(pcpu_counter_t c, int64_t v)
{
	uint32_t slot = pcpu_fallback_slot(pcpu__chunk_of(c)->index_off);

	__atomic_fetch_add(&pcpu__counter_slot(c, slot)->pcpu__atomic_sum, v, __ATOMIC_RELAXED);
}

void pcpu_counter_add_atomic(pcpu_counter_t c, int64_t v)
{
	CHECK(c);
	add_atomic(c, v);
}

void pcpu__counter_add_slow(pcpu_counter_t c, int64_t v)
{
	/* First add of a thread that pcpu registers itself: register, then
	 * the rseq path works. Otherwise (no rseq, or it kept aborting) the
	 * atomic path, which is always exact. */
	if (pcpu__thread_prepare() == 0 && pcpu__counter_add_rseq(c, v) == 0)
		return;
	add_atomic(c, v);
}

static uint64_t slot_value(pcpu_counter_t c, uint32_t slot)
{
	pcpu_counter_t s = pcpu__counter_slot(c, slot);

	return (uint64_t)__atomic_load_n(&s->pcpu__rseq_sum, __ATOMIC_RELAXED) +
	       (uint64_t)__atomic_load_n(&s->pcpu__atomic_sum, __ATOMIC_RELAXED);
}

uint64_t pcpu_counter_fetch(pcpu_counter_t c)
{
	uint64_t sum = 0;
	uint32_t slot, n = pcpu__g.nslots;

	if (!c) {
		errno = EINVAL;
		return 0;
	}
	CHECK(c);
	for (slot = 0; slot < n; slot++)
		sum += slot_value(c, slot);
	return sum;
}

uint64_t pcpu_counter_fetch_slot(pcpu_counter_t c, unsigned slot)
{
	if (!c || slot >= pcpu__g.nslots) {
		errno = EINVAL;
		return 0;
	}
	CHECK(c);
	return slot_value(c, slot);
}

int pcpu_counter_fetch_array(pcpu_counter_t c, size_t n, uint64_t *out)
{
	uint32_t slot, nslots = pcpu__g.nslots;
	size_t i;

	if (!c || (n && !out)) {
		errno = EINVAL;
		return -1;
	}
	CHECK(c);
	for (i = 0; i < n; i++)
		out[i] = 0;
	/* Slot-major: each slot's copies are contiguous, so this streams. */
	for (slot = 0; slot < nslots; slot++) {
		pcpu_counter_t s = pcpu__counter_slot(c, slot);

		for (i = 0; i < n; i++)
			out[i] += (uint64_t)__atomic_load_n(&s[i].pcpu__rseq_sum, __ATOMIC_RELAXED) +
				  (uint64_t)__atomic_load_n(&s[i].pcpu__atomic_sum, __ATOMIC_RELAXED);
	}
	return 0;
}

uint64_t pcpu_counter_fetch_and_zero(pcpu_counter_t c)
{
	pthread_mutex_t *lock;
	uint64_t total;

	if (!c) {
		errno = EINVAL;
		return 0;
	}
	CHECK(c);
	lock = reset_lock_of(c);
	pthread_mutex_lock(lock);
	total = pcpu_counter_fetch(c);
	/* The offset lives in slot 0's atomic word: only atomic RMWs touch it. */
	__atomic_fetch_sub(&c->pcpu__atomic_sum, (int64_t)total, __ATOMIC_RELAXED);
	pthread_mutex_unlock(lock);
	return total;
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
	return pcpu_zone_alloc(zone, n * sizeof(struct pcpu_counter), 16);
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
