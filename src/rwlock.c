/* SPDX-License-Identifier: MIT */
/*
 * rwlock.c: the big-reader lock (pcpu/ref.h) -- Linux's percpu_rw_semaphore
 * in user space. The inline fast paths are in the header; this file has the
 * slow paths and the writer's side.
 *
 * Layout (one 192-byte, cache-line aligned allocation, plus a pcpu counter):
 *
 *   line 0: state | readers | percpu            read by every reader
 *   line 1: slow_readers | gen | waiters | wseq  slow paths only
 *   line 2: writer mutex
 *
 *   readers, a pcpu counter: +1 per read lock, -1 per read unlock committed
 *   per-CPU (a lock only while state == 0, the check inside the section).
 *   slow_readers: the same for readers that cannot use the section (atomic
 *   mode, or a thread without rseq), with sequentially consistent atomics.
 *   Readers inside = sum(readers) + slow_readers (a lock and its unlock may
 *   land in different words).
 *
 * Reader lock, per-CPU:  section { if (state != 0) fail; readers[slot] += 1 }
 * Reader lock, atomic:   slow_readers += 1; if (state & WRITER) { undo;
 *                        wake the writer; wait }        (Dekker, seq_cst)
 * Reader unlock:         -1 in either word; then if (state & WRITER) wake
 *                        the writer (wseq += 1, FUTEX_WAKE)
 * Writer lock:           mutex; state |= WRITER; membarrier (per-CPU mode);
 *                        until readers inside == 0: sleep on wseq
 * Writer unlock:         state &= ~WRITER; gen += 1; FUTEX_WAKE readers
 *                        sleeping on gen; mutex unlock
 *
 * Why a reader cannot slip past a writer: after the writer's membarrier
 * every per-CPU lock either committed visibly (the writer counts it) or
 * reads WRITER inside its section and fails. The atomic path is the
 * classic store-then-load with sequentially consistent operations on both
 * sides: a reader that did not see WRITER has its +1 counted by the writer.
 * Readers inside only leave after that, so once the writer reads a sum of
 * zero (each word read once, each only decreasing but for an atomic
 * reader's short +1/-1 backing out), no reader is inside, nor can enter.
 *
 * Why no wake-up is lost. Writer: s = wseq; if (sum == 0) done; else
 * futex_wait(&wseq, s). A reader's unlock either is visible to that sum,
 * or comes after the flag (membarrier, or seq_cst in atomic mode), so it
 * sees WRITER and bumps wseq: the writer's futex_wait then returns at once
 * (wseq changed) or is woken. Readers waiting for the writer do the same
 * with gen (bumped by the writer's unlock) and `waiters`, which spares the
 * writer's unlock a system call when nobody sleeps.
 *
 * Memory order: in per-CPU mode, membarrier and x86's order (a reader's
 * loads stay before its unlock's store; the writer's stores stay after its
 * loads of the sum); in atomic mode, the seq_cst operations above, which
 * ThreadSanitizer builds check.
 */
#include "sync.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct rwlock_impl {
	struct pcpu_rwlock pub; /* state, readers, percpu: first */
	int64_t slow_readers __attribute__((aligned(64)));
	uint32_t gen;     /* futex: bumped by every writer unlock */
	uint32_t waiters; /* readers sleeping (or about to) on gen */
	uint32_t wseq;    /* futex: bumped by readers that may be the last */
	pthread_mutex_t writer __attribute__((aligned(64)));
};

static struct rwlock_impl *impl(const pcpu_rwlock_t *l)
{
	return (struct rwlock_impl *)(uintptr_t)l;
}

static intptr_t state_of(struct rwlock_impl *l)
{
	return __atomic_load_n(&l->pub.pcpu__state, __ATOMIC_SEQ_CST);
}

pcpu_rwlock_t *pcpu_rwlock_create(void)
{
	struct rwlock_impl *l;
	int saved = errno;

	if (posix_memalign((void **)&l, 64, sizeof(*l)) != 0) {
		errno = ENOMEM;
		return NULL;
	}
	memset(l, 0, sizeof(*l));
	l->pub.pcpu__readers = pcpu_counter_alloc();
	if (!l->pub.pcpu__readers) {
		free(l);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&l->writer, NULL);
	l->pub.pcpu__percpu = pcpu_sync_percpu_check() == 0;
	l->pub.pcpu__state = l->pub.pcpu__percpu ? 0 : PCPU__RW_ATOMIC;
	errno = saved;
	return &l->pub;
}

/* Readers inside now (see the file comment for when zero is final). */
static int64_t readers_inside(struct rwlock_impl *l)
{
	int64_t n = __atomic_load_n(&l->slow_readers, __ATOMIC_SEQ_CST);

#if PCPU_ARCH_HAVE_RSEQ
	if (l->pub.pcpu__percpu) {
		n += (int64_t)pcpu_counter_fetch(l->pub.pcpu__readers);
		/* The fetch's loads are relaxed: keep the writer's accesses
		 * after them. (Per-CPU mode needs rseq, so ThreadSanitizer
		 * builds, which do not model fences, never get here.) */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	}
#endif
	return n;
}

int pcpu_rwlock_destroy(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);

	if (!l)
		return 0;
	if ((state_of(l) & PCPU__RW_WRITER) || readers_inside(l) != 0) {
		errno = EBUSY;
		return -1;
	}
	pthread_mutex_destroy(&l->writer);
	pcpu_counter_free(l->pub.pcpu__readers);
	free(l);
	return 0;
}

int pcpu_rwlock_is_percpu(const pcpu_rwlock_t *lock)
{
	return lock && lock->pcpu__percpu != 0;
}

void pcpu__rwlock_wake_writer(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);

	__atomic_fetch_add(&l->wseq, 1, __ATOMIC_SEQ_CST);
	pcpu_futex_wake(&l->wseq, 1); /* one writer waits at a time */
}

/* One attempt at a read lock: 1 taken, 0 a writer holds or waits. */
static int try_read(struct rwlock_impl *l)
{
	if (state_of(l) & PCPU__RW_WRITER)
		return 0;
#if PCPU_ARCH_HAVE_RSEQ
	if (l->pub.pcpu__percpu && pcpu__thread_prepare() == 0) {
		int tries;

		for (tries = 1; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
			int32_t idx = pcpu__rseq_load_index();
			int rc;

			if (idx < 0)
				break;
			rc = pcpu__rseq_cmpeq_cmpeqv_addv(
				idx, &l->pub.pcpu__state, 0,
				&pcpu__counter_slot(l->pub.pcpu__readers, (uint32_t)idx)->pcpu__word,
				1);
			if (rc == 0)
				return 1;
			if (rc == 2)
				return 0; /* state != 0: a writer, in per-CPU mode */
		}
	}
#endif
	__atomic_fetch_add(&l->slow_readers, 1, __ATOMIC_SEQ_CST);
	if (!(state_of(l) & PCPU__RW_WRITER))
		return 1;
	/* A writer came: back out, and wake it in case it saw our +1 and
	 * went to sleep. */
	__atomic_fetch_sub(&l->slow_readers, 1, __ATOMIC_SEQ_CST);
	pcpu__rwlock_wake_writer(&l->pub);
	return 0;
}

/* Sleeps until no writer holds or waits for the lock (or a spurious wake:
 * the caller tries again either way). */
static void wait_writer_gone(struct rwlock_impl *l)
{
	__atomic_fetch_add(&l->waiters, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		uint32_t g = __atomic_load_n(&l->gen, __ATOMIC_SEQ_CST);

		if (!(state_of(l) & PCPU__RW_WRITER))
			break;
		pcpu_futex_wait(&l->gen, g);
	}
	__atomic_fetch_sub(&l->waiters, 1, __ATOMIC_SEQ_CST);
}

void pcpu__rwlock_rdlock_slow(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);

	while (!try_read(l))
		wait_writer_gone(l);
}

int pcpu__rwlock_tryrdlock_slow(pcpu_rwlock_t *lock)
{
	return try_read(impl(lock));
}

void pcpu__rwlock_rdunlock_slow(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);

#if PCPU_ARCH_HAVE_RSEQ
	if (l->pub.pcpu__percpu && pcpu__thread_prepare() == 0) {
		int tries;

		for (tries = 1; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
			int32_t idx = pcpu__rseq_load_index();

			if (idx < 0)
				break;
			if (pcpu__rseq_cmpeq_addv(idx,
						  &pcpu__counter_slot(l->pub.pcpu__readers,
								      (uint32_t)idx)->pcpu__word,
						  -1) == 0)
				goto done;
		}
	}
#endif
	__atomic_fetch_sub(&l->slow_readers, 1, __ATOMIC_SEQ_CST);
#if PCPU_ARCH_HAVE_RSEQ
done:
#endif
	if (state_of(l) & PCPU__RW_WRITER)
		pcpu__rwlock_wake_writer(&l->pub);
}

/* The writer holds the mutex: stop new readers and make the flag visible to
 * every reader section. 0, or -1 with errno (flag cleared again). */
static int raise_flag(struct rwlock_impl *l)
{
	__atomic_fetch_or(&l->pub.pcpu__state, PCPU__RW_WRITER, __ATOMIC_SEQ_CST);
	if (l->pub.pcpu__percpu && pcpu_sync_barrier() != 0) {
		int err = errno;

		pcpu_rwlock_wrunlock(&l->pub);
		errno = err;
		return -1;
	}
	return 0;
}

int pcpu_rwlock_wrlock(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);

	if (!l) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&l->writer);
	if (raise_flag(l) != 0)
		return -1;
	for (;;) {
		uint32_t s = __atomic_load_n(&l->wseq, __ATOMIC_SEQ_CST);

		if (readers_inside(l) == 0)
			break;
		pcpu_futex_wait(&l->wseq, s);
	}
	return 0;
}

int pcpu_rwlock_trywrlock(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);

	if (!l) {
		errno = EINVAL;
		return 0;
	}
	if (pthread_mutex_trylock(&l->writer) != 0) {
		errno = EBUSY;
		return 0;
	}
	if (raise_flag(l) != 0)
		return 0;
	if (readers_inside(l) != 0) {
		pcpu_rwlock_wrunlock(&l->pub);
		errno = EBUSY;
		return 0;
	}
	return 1;
}

void pcpu_rwlock_wrunlock(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);

	__atomic_fetch_and(&l->pub.pcpu__state, ~(intptr_t)PCPU__RW_WRITER, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&l->gen, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&l->waiters, __ATOMIC_SEQ_CST) != 0)
		pcpu_futex_wake(&l->gen, INT_MAX);
	pthread_mutex_unlock(&l->writer);
}
