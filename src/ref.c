/* SPDX-License-Identifier: MIT */
/*
 * ref.c: per-CPU reference counts (pcpu/ref.h) -- Linux's percpu_ref in
 * user space. The inline fast paths are in the header; this file has the
 * slow paths, the kill, and creation.
 *
 * Layout (one 128-byte, cache-line aligned allocation, plus a pcpu counter):
 *
 *   line 0: mode | pc | release | arg | killed     read by every get/put
 *   line 1: count                                  written by atomic gets/puts
 *
 *   pc, a pcpu counter: slot s's word += 1 per get, -= 1 per put committed
 *   by an rseq section on slot s while mode == PERCPU (mirror words: never
 *   written by the ref, read by pcpu_counter_fetch all the same).
 *
 * The number of references held is always
 *     count + sum(pc) - (BIAS while per-CPU and not yet folded)
 * so a get or put may go to either part at any time. While per-CPU, count
 * starts at BIAS + 1 (the owner's reference); gets and puts that cannot run
 * the section (thread not registered, too many aborts) add to count
 * directly. count stays near BIAS (it can drift by the references that
 * were taken per-CPU and dropped atomically: 2^62 of them would take a
 * century), so it cannot reach zero.
 *
 * Kill, per-CPU mode:
 *   1. mode = DEAD                           (new sections fail their compare)
 *   2. membarrier(PRIVATE_EXPEDITED_RSEQ)    (sections in flight restart; the
 *                                             committed ones are visible)
 *   3. s = pcpu_counter_fetch(pc)            (frozen from now on: exact)
 *   4. count += s - BIAS - 1                 (fold, and drop the owner's ref)
 *      -> zero: release() here
 * Gets and puts between 1 and 4 go to count, still biased, so no put can
 * see zero before the fold; after it, count is the number of references,
 * and the put that brings it to zero calls release(). Exactly once: count
 * reaches zero once (no get may follow the last put: the caller of get
 * holds a reference, and tryget refuses a zero count).
 *
 * Atomic mode (no rseq for the creating thread, or no membarrier): count
 * starts at 1, unbiased, mode = ATOMIC; the fast path's compare always
 * fails, and kill is: mode = DEAD, then the owner's put.
 *
 * Memory order. Atomic paths: gets relaxed (the caller holds a reference),
 * puts acquire-release, so release() sees everything every holder did
 * before its put. Per-CPU puts are plain adds; membarrier orders them
 * before the kill's fold (an acquire-release add), which the final put
 * reads. ThreadSanitizer builds have no rseq: they check the atomic mode.
 */
#include "sync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define REF_BIAS ((int64_t)1 << 62)

struct ref_impl {
	struct pcpu_ref pub; /* mode, pc: first, for the inline paths */
	pcpu_ref_release_fn *release;
	void *arg;
	int killed;  /* pcpu_ref_kill() ran (or runs) */
	int percpu;  /* created in per-CPU mode */
	/* Its own cache line: the atomic paths write it, the per-CPU
	 * sections read line 0. */
	int64_t count __attribute__((aligned(64)));
};

_Static_assert(sizeof(struct ref_impl) == 128, "two cache lines");

static struct ref_impl *impl(const pcpu_ref_t *r)
{
	return (struct ref_impl *)(uintptr_t)r;
}

static intptr_t mode_of(const struct ref_impl *r)
{
	return __atomic_load_n(&r->pub.pcpu__mode, __ATOMIC_ACQUIRE);
}

pcpu_ref_t *pcpu_ref_create(pcpu_ref_release_fn *release, void *arg)
{
	struct ref_impl *r;
	int saved = errno;

	if (!release) {
		errno = EINVAL;
		return NULL;
	}
	if (posix_memalign((void **)&r, 64, sizeof(*r)) != 0) {
		errno = ENOMEM;
		return NULL;
	}
	memset(r, 0, sizeof(*r));
	/* A counter in atomic mode too: the fast path then always has a valid
	 * address to compute, though it never writes it. */
	r->pub.pcpu__pc = pcpu_counter_alloc();
	if (!r->pub.pcpu__pc) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->release = release;
	r->arg = arg;
	r->percpu = pcpu_sync_percpu_check() == 0;
	if (r->percpu) {
		r->pub.pcpu__mode = PCPU__REF_PERCPU;
		r->count = REF_BIAS + 1;
	} else {
		r->pub.pcpu__mode = PCPU__REF_ATOMIC;
		r->count = 1;
	}
	errno = saved;
	return &r->pub;
}

void pcpu_ref_destroy(pcpu_ref_t *ref)
{
	struct ref_impl *r = impl(ref);

	if (!r)
		return;
	pcpu_counter_free(r->pub.pcpu__pc);
	free(r);
}

/* One more try of the per-CPU section, up to PCPU_RSEQ_MAX_TRIES in all
 * with the inline one: 0 committed, 2 not per-CPU (any more), 1 use the
 * atomic path (not registered, or aborted every time). */
static int percpu_retry(struct ref_impl *r, int64_t v)
{
#if PCPU_ARCH_HAVE_RSEQ
	int tries, rc;

	if (mode_of(r) != PCPU__REF_PERCPU)
		return 2;
	if (pcpu__thread_prepare() != 0)
		return 1;
	for (tries = 1; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
		int32_t idx = pcpu__rseq_load_index();

		if (idx < 0)
			return 1;
		rc = pcpu__rseq_cmpeq_cmpeqv_addv(
			idx, &r->pub.pcpu__mode, PCPU__REF_PERCPU,
			&pcpu__counter_slot(r->pub.pcpu__pc, (uint32_t)idx)->pcpu__word, v);
		if (rc != 1)
			return rc;
	}
	return 1;
#else
	(void)r;
	(void)v;
	return mode_of(r) == PCPU__REF_PERCPU ? 1 : 2;
#endif
}

void pcpu__ref_get_slow(pcpu_ref_t *ref)
{
	struct ref_impl *r = impl(ref);

	if (percpu_retry(r, 1) == 0)
		return;
	/* Always part of the sum, in every mode; the caller holds a
	 * reference, so the count is not zero and cannot become zero. */
	__atomic_fetch_add(&r->count, 1, __ATOMIC_RELAXED);
}

static void put_atomic(struct ref_impl *r)
{
	/* While per-CPU (or before the fold) count is near BIAS: never zero.
	 * After the fold it counts the references; zero means none is left,
	 * and nobody may touch the ref after release() but release() itself. */
	if (__atomic_sub_fetch(&r->count, 1, __ATOMIC_ACQ_REL) == 0)
		r->release(r->arg);
}

void pcpu__ref_put_slow(pcpu_ref_t *ref)
{
	struct ref_impl *r = impl(ref);

	if (percpu_retry(r, -1) == 0)
		return;
	put_atomic(r);
}

int pcpu__ref_tryget_slow(pcpu_ref_t *ref)
{
	struct ref_impl *r = impl(ref);
	int64_t c;

	if (percpu_retry(r, 1) == 0)
		return 1;
	if (mode_of(r) == PCPU__REF_DEAD)
		return 0;
	/* Per-CPU (this thread cannot run the section) or atomic mode, not
	 * killed when we looked. A kill may run from here on: then this
	 * tryget counts as one that came before it, which is right as long as
	 * the count was not zero -- a zero count means released, and is never
	 * revived. */
	c = __atomic_load_n(&r->count, __ATOMIC_RELAXED);
	do {
		if (c == 0)
			return 0;
	} while (!__atomic_compare_exchange_n(&r->count, &c, c + 1, 1, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return 1;
}

int pcpu_ref_kill(pcpu_ref_t *ref)
{
	struct ref_impl *r = impl(ref);
	int64_t sum;

	if (!r || __atomic_exchange_n(&r->killed, 1, __ATOMIC_ACQ_REL)) {
		errno = EINVAL;
		return -1;
	}
	if (!r->percpu) {
		__atomic_store_n(&r->pub.pcpu__mode, PCPU__REF_DEAD, __ATOMIC_RELEASE);
		put_atomic(r);
		return 0;
	}
	__atomic_store_n(&r->pub.pcpu__mode, PCPU__REF_DEAD, __ATOMIC_SEQ_CST);
	if (pcpu_sync_barrier() != 0) {
		int err = errno;

		/* No barrier, no switch: back to per-CPU, not killed. Gets
		 * and puts that saw DEAD went to count, which is fine. */
		__atomic_store_n(&r->pub.pcpu__mode, PCPU__REF_PERCPU, __ATOMIC_SEQ_CST);
		__atomic_store_n(&r->killed, 0, __ATOMIC_RELEASE);
		errno = err;
		return -1;
	}
	/* No section commits to pc any more: its sum is final. */
	sum = (int64_t)pcpu_counter_fetch(r->pub.pcpu__pc);
	if (__atomic_add_fetch(&r->count, sum - REF_BIAS - 1, __ATOMIC_ACQ_REL) == 0)
		r->release(r->arg);
	return 0;
}

int pcpu_ref_is_percpu(const pcpu_ref_t *ref)
{
	return ref && mode_of(impl(ref)) == PCPU__REF_PERCPU;
}

int pcpu_ref_is_killed(const pcpu_ref_t *ref)
{
	return ref && __atomic_load_n(&impl(ref)->killed, __ATOMIC_ACQUIRE) != 0;
}

int64_t pcpu_ref_read(const pcpu_ref_t *ref)
{
	struct ref_impl *r = impl(ref);
	int64_t c;

	if (!r) {
		errno = EINVAL;
		return 0;
	}
	c = __atomic_load_n(&r->count, __ATOMIC_ACQUIRE);
	if (!r->percpu)
		return c;
	/* Biased: per-CPU, or killed but not folded yet. */
	if (c > REF_BIAS / 2)
		return c - REF_BIAS + (int64_t)pcpu_counter_fetch(r->pub.pcpu__pc);
	return c;
}
