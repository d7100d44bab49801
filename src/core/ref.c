/* SPDX-License-Identifier: MIT */
/*
 * ref.c: per-CPU reference counts (pcpu/ref.h) -- Linux's percpu_ref in
 * user space. The inline fast paths are in the header; this file has the
 * slow paths, the kill, and creation.
 *
 * Layout: the handle is a per-CPU object of three words per slot
 * (struct pcpu__sync_slot, a pcpu counter array: src/core/percpu_sync.c), and a
 * 64-byte-aligned shared part:
 *
 *   slot s:  count[s] | mode[s] | (slot 0: -> shared part)
 *            count[s] += 1 per get, -= 1 per put committed by an rseq
 *            section on slot s while mode[s] == PERCPU; mode[s] is slot s's
 *            copy of the mode, so a per-CPU get/put reads and writes one
 *            line of its own slot, nothing shared.
 *   shared:  mode | release | arg | killed | percpu | handle  (line 0)
 *            count                                         (line 1, atomics)
 *
 * The number of references held is always
 *     count + sum(count[s]) - (BIAS while per-CPU and not yet folded)
 * so a get or put may go to either part at any time. While per-CPU, count
 * starts at BIAS + 1 (the owner's reference); gets and puts that cannot run
 * the section (thread not registered, too many aborts) add to count
 * directly. count stays near BIAS (it can drift by the references that
 * were taken per-CPU and dropped atomically: 2^62 of them would take a
 * century), so it cannot reach zero.
 *
 * Kill, per-CPU mode:
 *   1. mode = mode[s] = DEAD for every slot  (new sections fail their compare)
 *   2. membarrier(PRIVATE_EXPEDITED_RSEQ)    (sections in flight restart; the
 *                                             committed ones are visible)
 *   3. s = pcpu_counter_fetch(count)         (frozen from now on: exact)
 *   4. count += s - BIAS - 1                 (fold, and drop the owner's ref)
 *      -> zero: release() here
 * Gets and puts between 1 and 4 go to count, still biased, so no put can
 * see zero before the fold; after it, count is the number of references,
 * and the put that brings it to zero calls release(). Exactly once: count
 * reaches zero once (no get may follow the last put: the caller of get
 * holds a reference, and tryget refuses a zero count).
 *
 * Atomic mode (no rseq for the creating thread, or no membarrier): count
 * starts at 1, unbiased, mode = mode[s] = ATOMIC; the fast path's compare
 * always fails, and kill is: mode = DEAD, then the owner's put.
 *
 * If membarrier stopped working since the creation, step 2 is the CPU walk
 * of src/core/percpu_sync.c; if that fails too, the kill undoes step 1 and fails.
 *
 * Misuse the atomic paths catch (pcpu/ref.h): every get and put of a
 * released ref runs here (its mode is DEAD), where count is 0. A get that
 * finds count <= 0, or a put that takes it below 0, undoes its add: so a
 * get-then-put on a released ref does not run release() a second time, and
 * read() stays 0. A fetch-and-add and a test, as cheap as it gets; two
 * threads misusing the same ref at once can still get past it (its
 * undefined behaviour). Compiled with PCPU_DEBUG, the callers abort before
 * they get here (pcpu__ref_debug_check()).
 *
 * Memory order. Atomic paths: gets relaxed (the caller holds a reference),
 * puts acquire-release, so release() sees everything every holder did
 * before its put. Per-CPU puts are plain adds; membarrier orders them
 * before the kill's fold (an acquire-release add), which the final put
 * reads. ThreadSanitizer builds have no rseq: they check the atomic mode.
 */
#include <pcpu/ref.h>

#include "percpu_sync_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_BIAS ((int64_t)1 << 62)

struct ref_impl {
	intptr_t mode; /* the authority; mode[s] are copies for the sections */
	pcpu_ref_release_fn *release;
	void *arg;
	struct pcpu__sync_slot *obj; /* the handle */
	int killed; /* pcpu_ref_kill() ran (or runs) */
	int percpu; /* created in per-CPU mode */
	/* Its own cache line: the atomic paths write it. */
	int64_t count __attribute__((aligned(64)));
};

static struct ref_impl *impl(const pcpu_ref_t *ref)
{
	return (struct ref_impl *)pcpu_sync_obj_impl(&ref->pcpu__s);
}

static intptr_t mode_of(const struct ref_impl *r)
{
	return __atomic_load_n(&r->mode, __ATOMIC_ACQUIRE);
}

static void set_mode(struct ref_impl *r, intptr_t mode)
{
	__atomic_store_n(&r->mode, mode, __ATOMIC_SEQ_CST);
	pcpu_sync_obj_set_mode(r->obj, mode);
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
	r->release = release;
	r->arg = arg;
	r->percpu = pcpu_sync_percpu_check() == 0;
	r->mode = r->percpu ? PCPU__REF_PERCPU : PCPU__REF_ATOMIC;
	r->count = r->percpu ? REF_BIAS + 1 : 1;
	r->obj = pcpu_sync_obj_alloc(r, r->mode);
	if (!r->obj) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	errno = saved;
	return (pcpu_ref_t *)(void *)r->obj;
}

void pcpu_ref_destroy(pcpu_ref_t *ref)
{
	struct ref_impl *r;

	if (!ref)
		return;
	r = impl(ref);
	pcpu_sync_obj_free(r->obj);
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
		rc = pcpu__sync_add_if_zero(r->obj, v);
		if (rc == PCPU_RSEQ_COMMITTED)
			return 0;
		if (rc == PCPU_RSEQ_DIFFERS)
			return 2; /* not per-CPU any more */
		if (rc == PCPU_RSEQ_NO_INDEX)
			return 1; /* not registered (after all) */
	}
	return 1;
#else
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
	 * reference, so the count is not zero and cannot become zero --
	 * unless the ref was released: then nothing is taken. */
	if (PCPU_UNLIKELY(__atomic_fetch_add(&r->count, 1, __ATOMIC_RELAXED) <= 0))
		__atomic_fetch_sub(&r->count, 1, __ATOMIC_RELAXED);
}

static void put_atomic(struct ref_impl *r)
{
	/* While per-CPU (or before the fold) count is near BIAS: never zero.
	 * After the fold it counts the references; zero means none is left,
	 * and nobody may touch the ref after release() but release() itself.
	 * Below zero: a put on a released ref, which drops nothing. */
	int64_t left = __atomic_sub_fetch(&r->count, 1, __ATOMIC_ACQ_REL);

	if (left == 0)
		r->release(r->arg);
	else if (PCPU_UNLIKELY(left < 0))
		__atomic_fetch_add(&r->count, 1, __ATOMIC_RELAXED);
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
		if (c <= 0) /* below zero: a misused put, about to be undone */
			return 0;
	} while (!__atomic_compare_exchange_n(&r->count, &c, c + 1, 1, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return 1;
}

int pcpu_ref_kill(pcpu_ref_t *ref)
{
	struct ref_impl *r = ref ? impl(ref) : NULL;
	int64_t sum;

	if (!r || __atomic_exchange_n(&r->killed, 1, __ATOMIC_ACQ_REL)) {
		errno = EINVAL;
		return -1;
	}
	if (!r->percpu) {
		/* The slots' copies say ATOMIC already: sections never commit. */
		__atomic_store_n(&r->mode, PCPU__REF_DEAD, __ATOMIC_RELEASE);
		put_atomic(r);
		return 0;
	}
	set_mode(r, PCPU__REF_DEAD);
	if (pcpu_sync_barrier() != 0) {
		int err = errno;

		/* No barrier (neither membarrier nor the CPU walk), no switch:
		 * back to per-CPU, not killed. Gets and puts that saw DEAD
		 * went to count, which is fine. */
		set_mode(r, PCPU__REF_PERCPU);
		__atomic_store_n(&r->killed, 0, __ATOMIC_RELEASE);
		errno = err;
		return -1;
	}
	/* No section commits to count[s] any more: the sum is final. */
	sum = pcpu_sync_obj_count(r->obj);
	if (__atomic_add_fetch(&r->count, sum - REF_BIAS - 1, __ATOMIC_ACQ_REL) == 0)
		r->release(r->arg);
	return 0;
}

void pcpu__ref_debug_check(const pcpu_ref_t *ref, const char *func)
{
	const struct ref_impl *r;

	pcpu__debug_check(ref, func);
	r = impl(ref);
	/* Released: killed, folded, and the last reference dropped. A kill
	 * that has not folded yet leaves count near BIAS; a caller that holds
	 * a reference keeps it at 1 or more. */
	if (mode_of(r) != PCPU__REF_DEAD || __atomic_load_n(&r->count, __ATOMIC_RELAXED) > 0)
		return;
	/* Debug builds only (PCPU_DEBUG): a programming error, reported the
	 * way assert() reports one. */
	fprintf(stderr, "pcpu: %s: ref %p was released (its last reference dropped): "
			"get and put need a reference held\n",
		func ? func : "?", (const void *)ref);
	abort();
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
	struct ref_impl *r;
	int64_t c;

	if (!ref) {
		errno = EINVAL;
		return 0;
	}
	r = impl(ref);
	c = __atomic_load_n(&r->count, __ATOMIC_ACQUIRE);
	if (!r->percpu)
		return c;
	/* Biased: per-CPU, or killed but not folded yet. */
	if (c > REF_BIAS / 2)
		return c - REF_BIAS + pcpu_sync_obj_count(r->obj);
	return c;
}
