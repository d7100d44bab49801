/* SPDX-License-Identifier: MIT */
/*
 * rwlock.c: the big-reader lock (pcpu/rwlock.h) -- Linux's percpu_rw_semaphore
 * in user space. The inline fast paths are in the header; this file has the
 * slow paths and the writer's side.
 *
 * Layout: the handle is a per-CPU object of three words per slot (struct
 * pcpu__sync_slot, src/core/percpu_sync.c), and a 64-byte-aligned shared part:
 *
 *   slot s:  readers[s] | state[s] | (slot 0: -> shared part)
 *            readers[s]: +1 per read lock, -1 per read unlock committed
 *            per-CPU (only while state[s] == 0: the check inside the
 *            section); state[s]: slot s's copy of the state, written by
 *            writers only.
 *   shared:  state | percpu | handle                       (line 0)
 *            slow_readers | gen | waiters | wseq            (line 1)
 *            writer mutex                                   (line 2)
 *
 *   state: WRITER while a writer holds or waits; ATOMIC in atomic mode (then
 *   every state[s] says ATOMIC for good, and the fast path never commits).
 *   A per-CPU lock turns atomic at its first write lock after membarrier
 *   stopped working (src/core/percpu_sync.c): that writer's barrier is the CPU walk,
 *   and it leaves every state[s] nonzero for good, so later writers need
 *   no barrier. Its per-CPU words then only go down (unlocks of read locks
 *   taken before) and stay part of the sum.
 *   slow_readers: the same count for readers that cannot use the section
 *   (atomic mode, a thread without rseq, a writer around), with sequentially
 *   consistent atomics.
 *
 *   records: every registered thread's pcpu__rwlock_rec (src/core/rwlock_readers.c),
 *   the handle of the one lock it holds through it (tagged |1 with a
 *   depth while held more than once), 0, or UNREG.
 *
 * Reader lock, record (inline; the thread registered, its record 0):
 *                        rec = handle; compiler barrier; if (mode[0] != 0)
 *                        { rec = 0; slow path }
 * Reader unlock, record: rec == handle: rec = 0 (release); compiler barrier;
 *                        if (mode[0] != 0) wake the writer
 * Reader lock, per-CPU (the record holds another lock, the thread is not
 *                        registered): section { if (state[s] != 0) fail;
 *                        readers[s] += 1 }
 * Reader lock, atomic:   slow_readers += 1; if (state & WRITER) { undo;
 *                        wake the writer; wait }        (Dekker, seq_cst)
 * Reader unlock, else:   section { if (state[s] != 0) fail; readers[s] -= 1 };
 *                        failed: -1 unconditionally (rseq, or slow_readers),
 *                        then if (state & WRITER) wake the writer (wseq += 1,
 *                        FUTEX_WAKE)
 * Writer lock:           mutex; state |= WRITER; state[s] |= WRITER for
 *                        every s; membarrier (per-CPU mode); until readers
 *                        inside == 0: sleep on wseq
 * Writer unlock:         state[s] = 0 for every s; state &= ~WRITER;
 *                        gen += 1; FUTEX_WAKE readers sleeping on gen;
 *                        mutex unlock
 * Readers inside = the records naming the lock (1, or 1 + depth when
 * tagged) + sum(readers[s]) + slow_readers, read in that order. A read lock
 * and its unlock may land in different parts (another thread's unlock, a
 * second lock meanwhile): each part is a count, only the sum means anything.
 *
 * Why a reader cannot slip past a writer. Records: the reader's store of
 * the handle and its load of mode[0] against the writer's store of
 * mode[0] and its membarrier (MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ also
 * orders memory, as MEMBARRIER_CMD_PRIVATE_EXPEDITED does), then its loads
 * of the records: the barrier runs on every CPU that runs a thread of the
 * process (or the scheduler's does, for the others), so either the
 * reader's store is visible to the scan, or its later load sees the mode
 * -- liburcu memb's argument, with the asymmetric fence on the writer's
 * side. A reader that saw the mode withdraws (rec = 0) and, in the slow
 * path, wakes the writer, which may have counted it. The slow path's
 * record steps use seq_cst fences, so they need no membarrier. The CPU
 * walk (membarrier refused) orders memory too: every CPU switches context.
 * Per-CPU words: after the writer's membarrier every per-CPU lock either
 * committed visibly (the writer counts it) or reads WRITER in its slot's
 * copy inside its section and fails. The atomic path is the
 * classic store-then-load with sequentially consistent operations on both
 * sides: a reader that did not see WRITER has its +1 counted by the writer.
 * Readers inside only leave after that, so once the writer reads a sum of
 * zero (each word read once, each only decreasing but for a reader's short
 * announce-and-withdraw), no reader is inside, nor can enter. A nested
 * hold through the record (depth + 1) checks the flag as a first one does:
 * its thread's first hold may have been released by another thread.
 * A thread that exits holding locks through its record moves them to
 * slow_readers before its record leaves the list, under the list lock the
 * scan holds: read in the order above, the move can be counted twice (and
 * wakes the writer to count again), never missed.
 *
 * Why no wake-up is lost. Writer: s = wseq; if (sum == 0) done; else
 * futex_wait(&wseq, s). A reader's per-CPU unlock that commits did so
 * before the writer's membarrier (else it was restarted and read WRITER):
 * the sum counts it. Any other unlock is followed by a seq_cst load of
 * state that sees WRITER (it comes after the flag: membarrier, or seq_cst
 * in atomic mode), and bumps wseq: the writer's futex_wait then returns at once
 * (wseq changed) or is woken. Readers waiting for the writer do the same
 * with gen (bumped by the writer's unlock) and `waiters`, which spares the
 * writer's unlock a system call when nobody sleeps.
 *
 * Misuse (pcpu/ref.h says what is undefined). The write lock has an owner
 * (a thread-local address), so wrunlock by a thread that does not hold it,
 * and a second wrlock by the holder, fail instead of corrupting the lock.
 * A read unlock without a read lock cannot be told from a legitimate one
 * on the way (the words of a lock taken on one slot and released on another
 * are +1 and -1), but it leaves the sum below zero for good, and a writer's
 * sum is exact (above: every lock whose unlock it counts was counted too):
 * a writer that reads a negative sum fails with ENOTRECOVERABLE rather than
 * waiting for ever.
 *
 * Memory order: in per-CPU mode, membarrier and x86's order (a reader's
 * loads stay before its unlock's store; the writer's stores stay after its
 * loads of the sum), and for records, acquire and release: the read lock's
 * load of mode[0] is an acquire (the section sees the last writer's
 * stores), the unlock's store of 0 a release and the scan's loads
 * acquires (the next writer's stores come after the section); in atomic
 * mode, the seq_cst operations above, which
 * ThreadSanitizer builds check.
 */
#include <pcpu/rwlock.h>

#include "percpu_sync_internal.h"
#include "rwlock_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static struct rwlock_impl *impl(const pcpu_rwlock_t *lock)
{
	return pcpu_rwlock_impl(lock);
}

static intptr_t state_of(struct rwlock_impl *l)
{
	return __atomic_load_n(&l->state, __ATOMIC_SEQ_CST);
}

/* Who holds the write lock: the address of this thread-local byte is
 * distinct for every live thread, costs no system call, and survives
 * fork() for the forking thread (which may release the lock in the child). */
static __thread char owner_tag;

static const void *me(void)
{
	return &owner_tag;
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
	pthread_mutex_init(&l->writer, NULL);
	l->percpu = pcpu_sync_percpu_check() == 0;
	l->state = l->percpu ? 0 : PCPU__RW_ATOMIC;
	/* Without the thread-exit key (no key left), readers count in the
	 * per-CPU words, as before records. */
	if (l->percpu)
		(void)pcpu_rwlock_readers_init();
	l->obj = pcpu_sync_obj_alloc(l, l->state);
	if (!l->obj) {
		pthread_mutex_destroy(&l->writer);
		free(l);
		errno = ENOMEM;
		return NULL;
	}
	errno = saved;
	return (pcpu_rwlock_t *)(void *)l->obj;
}

/* Readers inside now (see the file comment for when zero is final). The
 * records first: a thread that exits moves its holds from its record to
 * slow_readers, so this order can count them twice, never not at all. */
static int64_t readers_inside(struct rwlock_impl *l)
{
	int64_t n = 0;

#if PCPU_ARCH_HAVE_RSEQ
	if (l->percpu) {
		n += pcpu_rwlock_records_count((const pcpu_rwlock_t *)(void *)l->obj);
		n += pcpu_sync_obj_count(l->obj);
		/* The fetch's loads are relaxed: keep the writer's accesses
		 * after them. (Per-CPU mode needs rseq, so ThreadSanitizer
		 * builds, which do not model fences, never get here.) */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	}
#endif
	return n + __atomic_load_n(&l->slow_readers, __ATOMIC_SEQ_CST);
}

int pcpu_rwlock_destroy(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l;

	if (!lock)
		return 0;
	l = impl(lock);
	/* Below zero: an unbalanced read unlock broke the count (the file
	 * comment); nothing can be told about readers, and the caller says
	 * none is left. */
	if ((state_of(l) & PCPU__RW_WRITER) || readers_inside(l) > 0) {
		errno = EBUSY;
		return -1;
	}
	if (l->percpu)
		pcpu_rwlock_records_forget(lock);
	pthread_mutex_destroy(&l->writer);
	pcpu_sync_obj_free(l->obj);
	free(l);
	return 0;
}

int pcpu_rwlock_is_percpu(const pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l;

	if (!lock)
		return 0;
	l = impl(lock);
	return l->percpu && !(state_of(l) & PCPU__RW_ATOMIC);
}

/* Undoes a nested hold taken through the record (tagged h | 1). */
static void unnest(uintptr_t h)
{
	uintptr_t *depth = pcpu_rwlock_rec_depth();
	uintptr_t d = __atomic_load_n(depth, __ATOMIC_RELAXED) - 1;

	__atomic_store_n(depth, d, __ATOMIC_RELAXED);
	if (d == 0)
		__atomic_store_n(&pcpu__rwlock_rec, h, __ATOMIC_RELEASE);
}

/* A read lock through the calling thread's record: 1 taken, 0 a writer
 * holds or waits (nothing left behind), -1 the record cannot take it (not
 * registered, or it holds another lock): the caller counts it in the
 * words. Registers the thread first only if `may_register` (the caller is
 * not in a signal handler: registration calls pthread_setspecific(), which
 * is not async-signal-safe). Each step leaves the record as a signal
 * handler of this thread may find it and must leave it: a handler's lock
 * and unlock restore it. */
static int record_read(struct rwlock_impl *l, pcpu_rwlock_t *lock, int may_register)
{
	uintptr_t h = (uintptr_t)lock, r = __atomic_load_n(&pcpu__rwlock_rec, __ATOMIC_RELAXED);
	uintptr_t *depth;

	if (r == PCPU__RW_REC_UNREG) {
		if (!may_register || pcpu_rwlock_register_self() != 0)
			return -1;
		r = __atomic_load_n(&pcpu__rwlock_rec, __ATOMIC_RELAXED);
	}
	if (r == 0) {
		__atomic_store_n(&pcpu__rwlock_rec, h, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST); /* Dekker with raise_flag() */
		if (!(state_of(l) & PCPU__RW_WRITER))
			return 1;
		__atomic_store_n(&pcpu__rwlock_rec, 0, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		pcpu_rwlock_wake_writer(l); /* it may have counted us */
		return 0;
	}
	if ((r & ~(uintptr_t)1) != h)
		return -1;
	/* The thread holds this lock already: one more hold (the writer's
	 * scan adds the depth while the record is tagged). */
	depth = pcpu_rwlock_rec_depth();
	__atomic_store_n(depth, __atomic_load_n(depth, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&pcpu__rwlock_rec, h | 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!(state_of(l) & PCPU__RW_WRITER))
		return 1;
	unnest(h);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	pcpu_rwlock_wake_writer(l);
	return 0;
}

/* The inline read lock withdrew its announce (PCPU__RW_REC_WITHDRAWN): a
 * writer may have counted it and sleep. Every slow path starts here, so
 * the record is never left so (a signal handler that finds it so does the
 * same, for the code it interrupted). */
static void clear_withdrawn(void)
{
	uintptr_t r = __atomic_load_n(&pcpu__rwlock_rec, __ATOMIC_RELAXED);

	if (r == PCPU__RW_REC_UNREG || !(r & PCPU__RW_REC_WITHDRAWN))
		return;
	/* The lock it withdrew from: the caller's, or, in a signal handler,
	 * the interrupted code's. */
	__atomic_store_n(&pcpu__rwlock_rec, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	pcpu_rwlock_wake_writer(impl((const pcpu_rwlock_t *)(r & ~(uintptr_t)3)));
}

/* One attempt at a read lock: 1 taken, 0 a writer holds or waits.
 * may_register: as for record_read(). */
static int try_read(struct rwlock_impl *l, pcpu_rwlock_t *lock, int may_register)
{
	intptr_t st = state_of(l);

	if (st & PCPU__RW_WRITER)
		return 0;
#if PCPU_ARCH_HAVE_RSEQ
	if (l->percpu && !(st & PCPU__RW_ATOMIC)) {
		int tries = record_read(l, lock, may_register);

		if (tries >= 0)
			return tries;
	}
	if (l->percpu && !(st & PCPU__RW_ATOMIC) && pcpu__thread_prepare() == 0) {
		int tries;

		for (tries = 1; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
			int rc = pcpu__sync_add_if_zero(l->obj, 1);

			if (rc == PCPU_RSEQ_COMMITTED)
				return 1;
			if (rc == PCPU_RSEQ_DIFFERS || rc == PCPU_RSEQ_NO_INDEX)
				break; /* a writer came, or the lock turned atomic
					* (the atomic path below tells which), or not
					* registered after all */
		}
	}
#else
	(void)lock;
	(void)may_register;
#endif
	__atomic_fetch_add(&l->slow_readers, 1, __ATOMIC_SEQ_CST);
	if (!(state_of(l) & PCPU__RW_WRITER))
		return 1;
	/* A writer came: back out, and wake it in case it saw our +1 and
	 * went to sleep. */
	__atomic_fetch_sub(&l->slow_readers, 1, __ATOMIC_SEQ_CST);
	pcpu_rwlock_wake_writer(l);
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

	clear_withdrawn();
	/* pcpu_rwlock_rdlock() is not for signal handlers: it may register. */
	while (!try_read(l, lock, 1))
		wait_writer_gone(l);
}

int pcpu__rwlock_tryrdlock_slow(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);

	clear_withdrawn();
	/* The read lock signal handlers may take (pcpu/rwlock.h): it never
	 * registers the thread. */
	return try_read(l, lock, 0);
}

void pcpu__rwlock_rdunlock_slow(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);
	uintptr_t h = (uintptr_t)lock, r;

	clear_withdrawn();
	r = __atomic_load_n(&pcpu__rwlock_rec, __ATOMIC_RELAXED);
	/* Held through the record: more than once (tagged), or once (a
	 * caller built against an older header, whose inline unlock did not
	 * look). */
	if (r == (h | 1)) {
		unnest(h);
		goto done;
	}
	if (r == h) {
		__atomic_store_n(&pcpu__rwlock_rec, 0, __ATOMIC_RELEASE);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		goto done;
	}
#if PCPU_ARCH_HAVE_RSEQ
	/* Per-CPU mode: count the unlock per-CPU even if a writer is around
	 * (no state check: after the writer's membarrier the words only go
	 * down, which its sum tolerates). */
	if (l->percpu && pcpu__thread_prepare() == 0) {
		int tries;

		for (tries = 1; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
			int32_t idx = pcpu__rseq_load_index();

			if (idx < 0)
				break;
			if (pcpu_rseq_load_add_store(idx,
						  &((struct pcpu__sync_slot *)pcpu_slot_ptr(
							    l->obj, (unsigned)idx))->count,
						  -1) == 0)
				goto done;
		}
	}
#endif
	__atomic_fetch_sub(&l->slow_readers, 1, __ATOMIC_SEQ_CST);
done:
	if (state_of(l) & PCPU__RW_WRITER)
		pcpu_rwlock_wake_writer(l);
}

void pcpu__rwlock_rdunlock_wake(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l = impl(lock);

	if (state_of(l) & PCPU__RW_WRITER)
		pcpu_rwlock_wake_writer(l);
}

/* Clears the flag, wakes the readers waiting for the writer to leave, and
 * lets the next writer in. The caller holds the mutex. */
static void release_write(struct rwlock_impl *l)
{
	__atomic_store_n(&l->owner, NULL, __ATOMIC_RELAXED);
	if (l->percpu && !(state_of(l) & PCPU__RW_ATOMIC))
		pcpu_sync_obj_set_mode(l->obj, 0);
	__atomic_fetch_and(&l->state, ~(intptr_t)PCPU__RW_WRITER, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&l->gen, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&l->waiters, __ATOMIC_SEQ_CST) != 0)
		pcpu_futex_wake(&l->gen, INT_MAX);
	pthread_mutex_unlock(&l->writer);
}

/* The writer holds the mutex: stop new readers and make the flag visible to
 * every reader section. 0, or -1 with errno (flag cleared, mutex released). */
static int raise_flag(struct rwlock_impl *l)
{
	intptr_t st = __atomic_fetch_or(&l->state, PCPU__RW_WRITER, __ATOMIC_SEQ_CST);

	/* Atomic (from the start, or turned): every state[s] is nonzero
	 * already, no read lock commits per-CPU. */
	if (!l->percpu || (st & PCPU__RW_ATOMIC))
		return 0;
	pcpu_sync_obj_set_mode(l->obj, PCPU__RW_WRITER);
	if (pcpu_sync_barrier() != 0) {
		int err = errno;

		release_write(l);
		errno = err;
		return -1;
	}
	if (pcpu_sync_percpu_lost()) {
		/* That barrier was the CPU walk: turn atomic for good, so that
		 * the next writers need none (the file comment). */
		__atomic_fetch_or(&l->state, PCPU__RW_ATOMIC, __ATOMIC_SEQ_CST);
		pcpu_sync_obj_set_mode(l->obj, PCPU__RW_WRITER | PCPU__RW_ATOMIC);
	}
	return 0;
}

int pcpu_rwlock_wrlock(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l;

	if (!lock) {
		errno = EINVAL;
		return -1;
	}
	l = impl(lock);
	/* Only this thread stores its own tag: seeing it means it holds the
	 * lock (or waits for readers in a wrlock it is inside, impossible). */
	if (__atomic_load_n(&l->owner, __ATOMIC_RELAXED) == me()) {
		errno = EDEADLK;
		return -1;
	}
	pthread_mutex_lock(&l->writer);
	__atomic_store_n(&l->owner, me(), __ATOMIC_RELAXED);
	if (raise_flag(l) != 0)
		return -1;
	for (;;) {
		uint32_t s = __atomic_load_n(&l->wseq, __ATOMIC_SEQ_CST);
		int64_t n = readers_inside(l);

		if (n == 0)
			break;
		if (n < 0) {
			/* More read unlocks than read locks (the file comment):
			 * waiting would be for ever. */
			release_write(l);
			errno = ENOTRECOVERABLE;
			return -1;
		}
		pcpu_futex_wait(&l->wseq, s);
	}
	return 0;
}

int pcpu_rwlock_trywrlock(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l;
	int64_t n;

	if (!lock) {
		errno = EINVAL;
		return 0;
	}
	l = impl(lock);
	if (pthread_mutex_trylock(&l->writer) != 0) {
		errno = EBUSY;
		return 0;
	}
	__atomic_store_n(&l->owner, me(), __ATOMIC_RELAXED);
	if (raise_flag(l) != 0)
		return 0;
	if ((n = readers_inside(l)) != 0) {
		release_write(l);
		errno = n > 0 ? EBUSY : ENOTRECOVERABLE;
		return 0;
	}
	return 1;
}

int pcpu_rwlock_wrunlock(pcpu_rwlock_t *lock)
{
	struct rwlock_impl *l;

	if (!lock) {
		errno = EINVAL;
		return -1;
	}
	l = impl(lock);
	/* Not the holder (not locked, unlocked already, or another thread's):
	 * refused, as an error-checking mutex refuses it. */
	if (__atomic_load_n(&l->owner, __ATOMIC_RELAXED) != me()) {
		errno = EPERM;
		return -1;
	}
	release_write(l);
	return 0;
}
