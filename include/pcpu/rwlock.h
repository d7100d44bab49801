/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/rwlock.h
 * A big-reader lock (pcpu_rwlock): Linux's percpu_rw_semaphore for user
 * space, with the read side of liburcu's membarrier flavour (issue 29).
 *
 * Read side: each thread has one record, a thread-local word. A read lock
 * stores the lock's handle there, and after a compiler barrier loads the
 * lock's mode (slot 0's copy, written only by writers); an unlock stores 0
 * back and loads the mode again (a writer waits: wake it). No atomic
 * instruction, no rseq section, no shared line written: the cost of
 * liburcu's rcu_read_lock/unlock (bench/README.md, "A read side at
 * liburcu's cost"). A thread registers its record in a list at its first
 * pcpu_rwlock_rdlock() (not at a pcpu_rwlock_tryrdlock(), which may run in
 * a signal handler, where registering is not safe) and leaves it at its
 * exit. Where the record cannot serve (the thread holds another
 * pcpu_rwlock through it, or has not registered, or could not yet, or has
 * exited), a read lock is one rseq critical section on the calling
 * thread's slot of a per-CPU object, as before issue 29, and programs built
 * with the older header keep using those words: writers count both.
 *
 * Write side: the writer sets the writer flag (the mode word, in every
 * slot's copy) and makes it seen with one membarrier(), then waits until
 * the readers' sum (the registered records that name the lock, and the
 * per-CPU and atomic words) is zero: no new reader gets in
 * (pcpu/percpu_sync.h: how the switch works, when a lock is per-CPU or
 * atomic, memory).
 *
 * Progress guarantees:
 *  - pcpu_rwlock_rdlock: wait-free while no writer holds or waits for the
 *    lock; otherwise it sleeps on a futex until the writer leaves (no
 *    spinning). pcpu_rwlock_rdunlock never blocks; while a writer waits it
 *    makes a FUTEX_WAKE system call. Writers take a mutex among themselves,
 *    set the flag (which stops new readers, so writers never starve), call
 *    membarrier and sleep on a futex until the readers inside have left.
 *    Writer preference: readers wait behind every writer that queued before
 *    them, and behind a continuous stream of writers they wait as long as it
 *    lasts (as with percpu_rw_semaphore: for data written rarely).
 *  - Nothing spins on a shared cache line, and nothing prints or aborts.
 *
 * Signals: a handler may take a read lock only with pcpu_rwlock_tryrdlock()
 * (and release it with pcpu_rwlock_rdunlock()), also of a lock the
 * interrupted code holds or is taking: pcpu_rwlock_rdlock() would
 * deadlock if the interrupted thread holds the write lock, or holds a read
 * lock while a writer waits. For the same reason a thread must not take a
 * read lock it already holds with pcpu_rwlock_rdlock() (recursive reading
 * deadlocks against a waiting writer); tryrdlock may fail there instead.
 * A handler must release what it took before it returns (no longjmp out
 * of it with a read lock held): its lock and unlock then leave the
 * thread's record as they found it, whatever step they interrupted.
 *
 * Threads: a thread that exits holding read locks leaves them held (any
 * thread may release them); its record leaves the list. Nothing is
 * allocated per thread (the record is static TLS).
 *
 * fork(): the child gets a copy of every lock, in the state the parent's
 * was in at the fork: per-CPU and atomic counts, mode, writer flag.
 *  - A read lock held by the forking thread may be released in the child.
 *    Read locks held by other parent threads stay held in the child
 *    forever (their records are folded into the lock's atomic count, and
 *    the child's list has only its own threads), so a writer in the child would wait for ever: use
 *    pcpu_rwlock_trywrlock() there, which fails instead. A lock whose write
 *    lock another thread held at the fork cannot be used in the child at all
 *    (as with a pthread mutex held across fork()).
 *  - Nothing is shared between parent and child afterwards.
 *  tests/test_ref_fork.c checks all of these but the held write lock;
 *  tests/test_rwlock_records.c the records across fork().
 */
#ifndef PCPU_RWLOCK_H
#define PCPU_RWLOCK_H

#include <pcpu/defs.h>
#include <pcpu/percpu_sync.h>

PCPU_BEGIN_DECLS

/* Bits of a lock's mode word. Not API. */
#define PCPU__RW_WRITER 1 /* a writer holds or waits for the lock */
#define PCPU__RW_ATOMIC 2 /* atomic mode: the per-CPU fast path never commits */

/*
 * Misuse of a pcpu_rwlock, and what comes of it:
 *  - pcpu_rwlock_rdunlock() without a read lock held (unbalanced, or
 *    twice): undefined -- it can let a writer in while a reader is inside.
 *    It cannot be caught on the way (a lock taken on one CPU and released
 *    on another is a +1 and a -1 in different words), but when it leaves
 *    fewer read locks than unlocks, writers see it: pcpu_rwlock_wrlock()
 *    and pcpu_rwlock_trywrlock() fail with ENOTRECOVERABLE instead of
 *    waiting for ever, and keep failing (the lock is broken for writers;
 *    pcpu_rwlock_destroy() still frees it).
 *  - pcpu_rwlock_wrunlock() by a thread that does not hold the write lock
 *    (never taken, released already, another thread's): -1 EPERM,
 *    nothing changed.
 *  - pcpu_rwlock_wrlock() by the thread that holds the write lock: -1
 *    EDEADLK. By a thread that holds a read lock: deadlock (not caught);
 *    pcpu_rwlock_rdlock() by a thread that holds the write lock, or a
 *    read lock while a writer waits: deadlock (not caught).
 *  - A destroyed lock, or a handle that is not a lock: undefined. Compiled
 *    with PCPU_DEBUG, the read side checks that the handle is a live pcpu
 *    allocation and aborts with a message if not.
 */

/** A big-reader lock (see the file comment). Create with
 * pcpu_rwlock_create(). Slot s's mode copy holds PCPU__RW_WRITER and
 * PCPU__RW_ATOMIC. */
struct pcpu_rwlock {
	struct pcpu__sync_slot pcpu__s;
};
typedef struct pcpu_rwlock pcpu_rwlock_t;

/*
 * The calling thread's reader record (src/core/rwlock_readers.c): the handle of
 * the one lock it holds through the record, tagged with 1 while it holds
 * that lock more than once; 0 when it holds none; tagged with 2 for an
 * instant (PCPU__RW_REC_WITHDRAWN, below); PCPU__RW_REC_UNREG before
 * the thread registered (its first pcpu_rwlock_rdlock() registers it) and
 * after it exited. A writer reads every registered thread's record after
 * its membarrier. Static TLS, as pcpu's rseq area. Not API.
 */
#define PCPU__RW_REC_UNREG ((uintptr_t)1)
/* handle | PCPU__RW_REC_WITHDRAWN: the fast path announced itself, met a
 * writer of that lock, withdrew, and calls the slow path, which wakes the
 * writer (it may have counted the announce) and resets the record to 0. */
#define PCPU__RW_REC_WITHDRAWN ((uintptr_t)2)
extern PCPU_API __thread uintptr_t pcpu__rwlock_rec __attribute__((tls_model("initial-exec")));

PCPU_API __attribute__((cold)) void pcpu__rwlock_rdlock_slow(pcpu_rwlock_t *lock);
PCPU_API __attribute__((cold)) int pcpu__rwlock_tryrdlock_slow(pcpu_rwlock_t *lock);
PCPU_API __attribute__((cold)) void pcpu__rwlock_rdunlock_slow(pcpu_rwlock_t *lock);
/* After a read unlock through the record met a nonzero mode: wakes the
 * writer if one waits. */
PCPU_API __attribute__((cold)) void pcpu__rwlock_rdunlock_wake(pcpu_rwlock_t *lock);

/* The read side's fast path (src/core/rwlock.c, file comment, proves it): the
 * thread's record announces the lock, a compiler barrier, and a load of the
 * mode (slot 0's copy, written only by writers). A writer sets the mode,
 * calls membarrier and then reads every record: either it sees this record
 * or this load sees the mode. 1: taken; 0: not (nothing changed). */
__attribute__((always_inline)) static inline int pcpu__rwlock_rec_lock(pcpu_rwlock_t *lock)
{
	/* The first look at the mode keeps readers that arrive while a
	 * writer is known from announcing (and from waking it for nothing). */
	if (PCPU_LIKELY(__atomic_load_n(&pcpu__rwlock_rec, __ATOMIC_RELAXED) == 0 &&
			__atomic_load_n(&lock->pcpu__s.mode, __ATOMIC_RELAXED) == 0)) {
		__atomic_store_n(&pcpu__rwlock_rec, (uintptr_t)lock, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (PCPU_LIKELY(__atomic_load_n(&lock->pcpu__s.mode, __ATOMIC_ACQUIRE) == 0))
			return 1;
		/* A writer came meanwhile: withdraw; the slow path wakes it. */
		__atomic_store_n(&pcpu__rwlock_rec, (uintptr_t)lock | PCPU__RW_REC_WITHDRAWN,
				 __ATOMIC_RELAXED);
	}
	return 0;
}

#ifdef PCPU_NO_INLINE
/* The stable tier (src/core/rwlock_stable_abi.c), documented below. */
PCPU_API void pcpu_rwlock_rdlock(pcpu_rwlock_t *lock);
PCPU_API int pcpu_rwlock_tryrdlock(pcpu_rwlock_t *lock);
PCPU_API void pcpu_rwlock_rdunlock(pcpu_rwlock_t *lock);
#endif

/**
 * Creates an unlocked big-reader lock. Returns NULL with errno ENOMEM.
 * Per-CPU or atomic mode: see the file comment. Thread-safe; not
 * async-signal-safe. Cost: as pcpu_ref_create().
 */
PCPU_API pcpu_rwlock_t *pcpu_rwlock_create(void);

/**
 * Destroys an unlocked lock. Returns 0, -1 with errno EBUSY if it is
 * (read- or write-) locked (nothing changed); NULL is a no-op returning 0.
 * A lock that unbalanced read unlocks broke (see "Misuse") is freed. The
 * caller guarantees no thread uses it any more, so no membarrier is needed
 * (it works whatever seccomp allows). Not thread-safe (no thread may use
 * the lock meanwhile); not async-signal-safe. Cost: a read of every slot
 * and of every registered thread's record, a zone free and a free().
 */
PCPU_API int pcpu_rwlock_destroy(pcpu_rwlock_t *lock);

/**
 * Takes a read lock: waits (sleeping on a futex) while a writer holds or
 * waits for the lock. Must not be called by a thread that already holds a
 * read or the write lock of `lock`, nor from a signal handler (see the file
 * comment). Thread-safe. Cost while no writer is around, per-CPU mode, the
 * calling thread holding no other pcpu_rwlock: a load and a store of a
 * thread-local word and a load of the handle's mode (liburcu's
 * rcu_read_lock, bench/README.md); the thread's first pcpu_rwlock_rdlock()
 * registers it (the registry's lock, tried, and pthread_setspecific()).
 * Holding another lock already, or not registered: one rseq section (as
 * pcpu_ref_get()). Atomic mode: two atomic operations on shared words.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_rwlock_rdlock)(pcpu_rwlock_t *lock)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(lock, "pcpu_rwlock_rdlock");
#endif
	if (PCPU_UNLIKELY(!pcpu__rwlock_rec_lock(lock)))
		pcpu__rwlock_rdlock_slow(lock);
}

/**
 * Takes a read lock if no writer holds or waits for the lock: returns 1
 * with the lock taken, 0 without (errno untouched). Never blocks.
 * Thread-safe; async-signal-safe (the one read-lock call a signal handler
 * may use). Cost: as pcpu_rwlock_rdlock(), but it never registers the
 * thread (registering calls pthread_setspecific(), which is not
 * async-signal-safe): until the thread's first pcpu_rwlock_rdlock(), one
 * rseq section.
 */
__attribute__((always_inline)) static inline int PCPU__INLINE_OP(pcpu_rwlock_tryrdlock)(pcpu_rwlock_t *lock)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(lock, "pcpu_rwlock_tryrdlock");
#endif
	if (PCPU_LIKELY(pcpu__rwlock_rec_lock(lock)))
		return 1;
	return pcpu__rwlock_tryrdlock_slow(lock);
}

/**
 * Releases a read lock the caller holds (any thread may release it, on any
 * CPU). Never blocks; wakes the waiting writer if there is one. Without a
 * read lock held: undefined (see "Misuse" above; writers then fail with
 * ENOTRECOVERABLE). Thread-safe; async-signal-safe. Cost while no writer
 * waits, the lock taken through the thread's record: a load and a store of
 * the thread-local word and a load of the handle's mode; otherwise one rseq
 * section and a load of the (read-mostly) state word.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_rwlock_rdunlock)(pcpu_rwlock_t *lock)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(lock, "pcpu_rwlock_rdunlock");
#endif
	if (PCPU_LIKELY(__atomic_load_n(&pcpu__rwlock_rec, __ATOMIC_RELAXED) == (uintptr_t)lock)) {
		/* Release: the section's accesses stay before it. A writer
		 * that read the record before this store sleeps until the
		 * load below sees its mode (after its membarrier) and wakes
		 * it. */
		__atomic_store_n(&pcpu__rwlock_rec, 0, __ATOMIC_RELEASE);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (PCPU_UNLIKELY(__atomic_load_n(&lock->pcpu__s.mode, __ATOMIC_RELAXED) != 0))
			pcpu__rwlock_rdunlock_wake(lock);
		return;
	}
	pcpu__rwlock_rdunlock_slow(lock);
}

/**
 * Takes the write lock: waits for other writers (a mutex), stops new
 * readers, and waits (sleeping on a futex) until the readers inside have
 * left. Returns 0, or -1 with errno (the lock not taken):
 *  - EINVAL: lock is NULL;
 *  - EDEADLK: the calling thread holds the write lock already;
 *  - ENOTRECOVERABLE: more read unlocks than read locks were made (see
 *    "Misuse" above);
 *  - what membarrier() said (EPERM, ENOSYS) if it worked at creation, is
 *    refused now, and the fallback (running on every CPU in turn: the file
 *    comment) failed too; readers are unaffected, and a later wrlock may
 *    be tried.
 * A thread that holds a read lock of `lock` deadlocks here (not detected).
 * Thread-safe; not async-signal-safe. Cost with no reader inside: a mutex,
 * an atomic OR, one membarrier() system call (per-CPU mode), a read of
 * every slot and of every registered thread's record (under the registry's
 * lock, which thread starts and exits hold briefly) (bench/README.md:
 * microseconds).
 */
PCPU_API int pcpu_rwlock_wrlock(pcpu_rwlock_t *lock);

/**
 * Takes the write lock if it is free and no reader is inside: returns 1
 * with the lock taken, 0 without, errno EBUSY (held, or readers inside),
 * EINVAL (NULL), ENOTRECOVERABLE or membarrier's error (as for
 * pcpu_rwlock_wrlock()). Does not wait for readers, but does wait for a
 * mutex briefly held by another trywrlock, and for the registry of reader
 * records, briefly held by other writers' scans and by thread starts and
 * exits. Thread-safe; not async-signal-safe. Cost: as pcpu_rwlock_wrlock() with no reader inside; a
 * failure also wakes the readers that met the flag meanwhile.
 */
PCPU_API int pcpu_rwlock_trywrlock(pcpu_rwlock_t *lock);

/**
 * Releases the write lock the calling thread holds, and wakes the readers
 * waiting for it. Returns 0, or -1 with errno EINVAL (NULL) or EPERM (the
 * calling thread does not hold the write lock: nothing changed).
 * Thread-safe; not async-signal-safe. Cost: three atomic operations, a
 * FUTEX_WAKE if readers sleep, a mutex unlock.
 */
PCPU_API int pcpu_rwlock_wrunlock(pcpu_rwlock_t *lock);

/** 1 if the lock is in per-CPU mode, 0 in atomic mode (from the start, or
 * turned atomic because membarrier was refused: the file comment) and for
 * NULL. Thread-safe; async-signal-safe. Cost: a load. */
PCPU_API int pcpu_rwlock_is_percpu(const pcpu_rwlock_t *lock);

PCPU_END_DECLS

#endif /* PCPU_RWLOCK_H */
