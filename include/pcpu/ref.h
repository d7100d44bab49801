/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/ref.h
 * Per-CPU reference counts (pcpu_ref) and a big-reader lock (pcpu_rwlock):
 * Linux's percpu_ref and percpu_rw_semaphore for user space, the "light
 * reference counter based on counter(9)" the thesis proposes (§2.4.2), with
 * restartable sequences doing what the kernel does with preemption control
 * and RCU-sched.
 *
 * Why: a shared reference count or a pthread rwlock makes every reader write
 * one cache line, so readers that never conflict still take turns for it. A
 * pcpu_ref's get and put, and a pcpu_rwlock's read lock and unlock, are each
 * one rseq critical section on the calling thread's slot of a per-CPU
 * object: no lock prefix, no shared line written or even read
 * (bench/README.md, section "pcpu_bench_ref").
 *
 * How the switch works (pcpu_ref_kill, pcpu_rwlock_wrlock). The handle is a
 * per-CPU object, like a pcpu_counter_t: each slot's copy holds that slot's
 * count and that slot's copy of the mode word. Every per-CPU get, put, read
 * lock and unlock reads its slot's copy of the mode INSIDE its critical
 * section, and adds only if it still says "per-CPU"
 * (pcpu__rseq_loadidx_cmpeqv_addv in pcpu/arch.h). The switching thread
 * stores the new mode into every slot's copy, then calls
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ), which interrupts every
 * CPU running a thread of the process: a section that was running there is
 * restarted (and reads the new mode), one that had committed is visible to
 * the caller when membarrier returns, and sections that start later read the
 * new mode. So once membarrier returns, the per-CPU counts no longer change
 * (pcpu_ref) or only go down (pcpu_rwlock: unlocks), and their sum
 * (pcpu_counter_fetch: slot and mirror words) is exact.
 *  - pcpu_ref: kill folds that sum into one atomic count and drops the
 *    owner's reference; from then on get/put are atomic adds on that count,
 *    and release() runs when it reaches zero. While the ref is per-CPU the
 *    atomic count carries a bias of 2^62, so it cannot reach zero before the
 *    fold removes the bias (Linux's PERCPU_COUNT_BIAS).
 *  - pcpu_rwlock: the writer sets the writer flag (the mode word, in every
 *    slot's copy), and waits until the readers' sum is zero: no new reader
 *    gets in.
 *
 * Per-CPU or atomic, decided when an object is created:
 *  - Per-CPU when the creating thread uses rseq (pcpu_rseq_mode() is not
 *    fallback) and membarrier's PRIVATE_EXPEDITED_RSEQ command works (Linux
 *    >= 5.10; registered once per process, at the first creation).
 *  - Atomic from the start otherwise: ThreadSanitizer builds, PCPU_RSEQ=0,
 *    a seccomp filter denying rseq or membarrier, old kernels, valgrind. Then
 *    every operation is an atomic read-modify-write on one shared word:
 *    correct, exactly as documented below, but not scalable.
 *    pcpu_sync_percpu_error() says which, and why.
 *  - membarrier refused after per-CPU objects exist (a seccomp filter
 *    installed since): once pcpu_sync_percpu_error() or a switch has met
 *    the refusal, it is recorded for good, pcpu_sync_percpu_error()
 *    reports it, and objects created from then on are atomic from the
 *    start (creation itself does not ask the kernel: an object created
 *    per-CPU before the refusal is known still works). The per-CPU ones
 *    still switch: kill and wrlock get membarrier's guarantee from rseq's
 *    restart on preemption, by running the calling thread on every CPU in
 *    turn (sched_setaffinity(); its affinity is restored). That costs two
 *    system calls and a migration per CPU, and waits for each CPU to
 *    schedule the thread (a CPU monopolised by a real-time thread of higher
 *    priority delays it that long); it assumes every thread of the process
 *    is in the calling thread's cpuset. A lock turns atomic for good at
 *    that first write lock (pcpu_rwlock_is_percpu() says 0), so later
 *    writers pay nothing more. Only if sched_setaffinity() is refused too
 *    do kill and wrlock fail, with membarrier's errno, leaving the object
 *    usable as it was.
 *  - In a per-CPU object, a thread that cannot run the rseq section (its
 *    registration failed, or it aborted PCPU_RSEQ_MAX_TRIES times in a row)
 *    uses the shared atomic word instead. Both are always part of the sum,
 *    so that is correct in every mode.
 *  - The core's mm_cid caveat (pcpu/zone.h) applies here too: a thread whose
 *    glibc rseq registration failed after the first thread's succeeded (a
 *    seccomp filter installed later) reads mm_cid 0 and would add to slot 0
 *    unprotected; such a process sets PCPU_INDEX=cpu.
 *
 * Progress guarantees:
 *  - pcpu_ref_get/put/tryget: wait-free except for the retries: at most
 *    PCPU_RSEQ_MAX_TRIES short sections, then one atomic add (get/put) or a
 *    compare-and-swap loop on the shared count (tryget: lock-free). They
 *    never wait for another thread. put calls release() when it drops the
 *    last reference.
 *  - pcpu_ref_kill: never waits for references to be dropped. In per-CPU
 *    mode it makes one membarrier system call (IPIs to the CPUs that run the
 *    process's threads; a few microseconds) and reads every slot once
 *    (membarrier refused: the CPU walk above instead).
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
 * Signals: get, put and tryget are async-signal-safe (a handler may use the
 * ref the code it interrupted is using; a put that drops the last reference
 * runs release() in the handler, so release() must then be async-signal-safe
 * too). A handler may take a read lock only with pcpu_rwlock_tryrdlock()
 * (and release it with pcpu_rwlock_rdunlock()): pcpu_rwlock_rdlock() would
 * deadlock if the interrupted thread holds the write lock, or holds a read
 * lock while a writer waits. For the same reason a thread must not take a
 * read lock it already holds with pcpu_rwlock_rdlock() (recursive reading
 * deadlocks against a waiting writer); tryrdlock may fail there instead.
 *
 * fork(): the child gets a copy of every ref and lock, in the state the
 * parent's was in at the fork: per-CPU and atomic counts, mode, writer flag.
 *  - Refs: references held by the parent's other threads are counted in the
 *    child but nobody will put them there, so a child's ref that such
 *    references were held on at the fork never reaches zero in the child
 *    (release() does not run there; the object is simply not freed). The
 *    references of the forking thread itself, and everything the child
 *    takes, work as usual; pcpu_ref_kill works in the child.
 *  - Locks: a read lock held by the forking thread may be released in the
 *    child. Read locks held by other parent threads stay held in the child
 *    forever, so a writer in the child would wait for ever: use
 *    pcpu_rwlock_trywrlock() there, which fails instead. A lock whose write
 *    lock another thread held at the fork cannot be used in the child at all
 *    (as with a pthread mutex held across fork()).
 *  - Nothing is shared between parent and child afterwards.
 *  tests/test_ref_fork.c checks all of these but the held write lock.
 *
 * Memory: 24 bytes per slot in pcpu's default zone (three counter words:
 * count, mode copy, and in slot 0 the pointer to the shared part), plus 128
 * bytes (pcpu_ref) or 192 bytes (pcpu_rwlock) of ordinary memory. A mode
 * change (kill, write lock and unlock, an atomic-mode creation) stores one
 * word into every slot, pcpu_nslots() of them, which makes that slot's page
 * of the zone resident if no other object had.
 *
 * Why pcpu does not use pcpu_ref itself (issue 15, item 3). The restriction
 * in sight is "the caller guarantees no thread still updates a series it
 * removes" (pcpu/stats.h, and pcpu_counter_free()). Lifting it inside pcpu
 * would put a get and a put around every counter add, tripling the cost of
 * the one operation pcpu exists to make cheap (bench: a get+put pair costs
 * about two adds), or make removal wait for something updaters would have
 * to announce anyway. Snapshots and removal already exclude each other (the
 * registry's mutex), so nothing else needs it. A program that wants removal
 * while other threads update composes it: keep a pcpu_ref beside the series,
 * updaters hold a reference across a batch of adds (tryget fails once the
 * series is going away), and release() calls pcpu_family_remove().
 */
#ifndef PCPU_REF_H
#define PCPU_REF_H

#include <pcpu/common.h>
#include <pcpu/counter.h>
#include <pcpu/arch.h>

PCPU_BEGIN_DECLS

/* ---- pcpu_ref ------------------------------------------------------------- */

/* Values of a ref's mode word. Not API. */
#define PCPU__REF_PERCPU 0 /* gets/puts commit per-CPU adds */
#define PCPU__REF_ATOMIC 1 /* atomic from the start, not killed */
#define PCPU__REF_DEAD 2   /* killed: atomic; tryget fails */

/* One slot's copy of a ref or a lock (private to pcpu). The handle of
 * either is slot 0's copy of a per-CPU object, as for a pcpu_counter_t:
 * slot s's copy is at `handle + s * PCPU_SLOT_STRIDE`. Each copy holds that
 * slot's count and that slot's copy of the mode word, so a per-CPU
 * operation touches one cache line, its own slot's, and reads nothing
 * shared. */
struct pcpu__sync_slot {
	int64_t count;  /* this slot's gets - puts, or read locks - unlocks */
	intptr_t mode;  /* this slot's copy of the mode: 0 = per-CPU adds allowed */
	void *impl;     /* slot 0's copy only: the shared part (src/ref.c, src/rwlock.c) */
};

/* One per-CPU add of v, if the calling thread's slot's copy of the mode is
 * 0: returns 0 once committed, 1 if the section aborted, 2 if the mode is
 * not 0, 3 if the thread is not registered (nothing written but 0). */
__attribute__((always_inline)) static inline int
pcpu__sync_add_if_zero(struct pcpu__sync_slot *obj, int64_t v)
{
	return pcpu__rseq_loadidx_cmpeqv_addv(obj, (long)offsetof(struct pcpu__sync_slot, mode), 0, v);
}

/** A reference count (see the file comment). Create with pcpu_ref_create(). */
struct pcpu_ref {
	struct pcpu__sync_slot pcpu__s;
};
typedef struct pcpu_ref pcpu_ref_t;

/** Called once, when the last reference is dropped after pcpu_ref_kill(). */
typedef void pcpu_ref_release_fn(void *arg);

/* Out-of-line rest of get/put/tryget when the inline section did not commit
 * (atomic mode, killed, thread not registered, aborted). Async-signal-safe. */
PCPU_API __attribute__((cold)) void pcpu__ref_get_slow(pcpu_ref_t *ref);
PCPU_API __attribute__((cold)) void pcpu__ref_put_slow(pcpu_ref_t *ref);
PCPU_API __attribute__((cold)) int pcpu__ref_tryget_slow(pcpu_ref_t *ref);

/* Debug-build check of get and put (PCPU_DEBUG): pcpu__debug_check() of the
 * handle, then: a released ref (killed, last reference dropped) prints what
 * is wrong to stderr and aborts; else returns. */
PCPU_API void pcpu__ref_debug_check(const pcpu_ref_t *ref, const char *func);

#ifdef PCPU_NO_INLINE
/* The stable tier (pcpu/counter.h explains the two): the same operations as
 * exported functions (src/ref_abi.c), documented below with their inline
 * versions. */
PCPU_API void pcpu_ref_get(pcpu_ref_t *ref);
PCPU_API int pcpu_ref_tryget(pcpu_ref_t *ref);
PCPU_API void pcpu_ref_put(pcpu_ref_t *ref);
#endif

/**
 * Creates a reference count that starts holding one reference, the owner's,
 * which pcpu_ref_kill() drops. `release(arg)` runs exactly once, in the
 * thread that drops the last reference after the kill (a put, or the kill
 * itself), and never while a reference is held; the ref stays valid until
 * release() returns, and release() may call pcpu_ref_destroy() on it.
 *
 * Returns NULL with errno EINVAL (release is NULL) or ENOMEM.
 * Per-CPU or atomic mode: see the file comment (pcpu_ref_is_percpu()).
 * Thread-safe; not async-signal-safe. Cost: a malloc and a counter
 * allocation; the first creation in a process also registers membarrier
 * (one system call, which may wait for a scheduler grace period).
 */
PCPU_API pcpu_ref_t *pcpu_ref_create(pcpu_ref_release_fn *release, void *arg);

/**
 * Takes a reference. The caller must already hold one (or own the ref, not
 * yet killed): it is not a way to revive a released object, see
 * pcpu_ref_tryget(). Thread-safe; async-signal-safe. Cost while per-CPU: one
 * rseq section (arming store, index load, sign test, mode compare and an
 * `add`, all on the thread's own slot: as many memory operations as one
 * pcpu_counter_add()); after the kill, or in atomic mode, a call and an
 * atomic add on the shared count.
 *
 * Misuse. A get (or put) on a ref whose release() ran is a programming
 * error. If the ref's memory still exists, it takes (drops) nothing: the
 * library sees the released count and undoes the add, so release() never
 * runs twice and pcpu_ref_read() stays 0 -- unless two threads misuse the
 * same ref at the same time, which is undefined. Compiled with PCPU_DEBUG,
 * get and put abort with a message instead (pcpu__ref_debug_check()). On a
 * destroyed ref, or one never created, every function here is undefined
 * (PCPU_DEBUG catches a handle that is no live allocation). A put of a
 * reference never taken, before the kill, is undefined: the count is off by
 * one, and release() runs early or never.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_ref_get)(pcpu_ref_t *ref)
{
#ifdef PCPU_DEBUG
	pcpu__ref_debug_check(ref, "pcpu_ref_get");
#endif
	if (PCPU_UNLIKELY(pcpu__sync_add_if_zero(&ref->pcpu__s, 1) != 0))
		pcpu__ref_get_slow(ref);
}

/**
 * Takes a reference unless the ref was killed. Returns 1 with a reference
 * taken, 0 without (errno untouched): pcpu_ref_kill() had begun (a tryget
 * that races with the kill may succeed; one that starts after kill returned
 * never does), or, in atomic mode, the count is already zero. Safe on a
 * killed and released ref as long as its memory still exists (release()
 * did not destroy it). Thread-safe; async-signal-safe. Cost: as
 * pcpu_ref_get() while per-CPU; after the kill, a load (failure).
 */
__attribute__((always_inline)) static inline int PCPU__INLINE_OP(pcpu_ref_tryget)(pcpu_ref_t *ref)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(ref, "pcpu_ref_tryget"); /* released is fine here */
#endif
	if (PCPU_LIKELY(pcpu__sync_add_if_zero(&ref->pcpu__s, 1) == 0))
		return 1;
	return pcpu__ref_tryget_slow(ref);
}

/**
 * Drops a reference the caller holds, taken by get or a successful tryget
 * (the owner's reference is dropped by pcpu_ref_kill(), never by put). If
 * it was the last one after the kill, calls release(arg) before returning;
 * the caller must not touch the ref afterwards (release() may have
 * destroyed it). A put on a released ref: see pcpu_ref_get(), "Misuse".
 * Thread-safe; async-signal-safe if release() is. Cost: as pcpu_ref_get();
 * after the kill an atomic subtract (acquire-release).
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_ref_put)(pcpu_ref_t *ref)
{
#ifdef PCPU_DEBUG
	pcpu__ref_debug_check(ref, "pcpu_ref_put");
#endif
	if (PCPU_UNLIKELY(pcpu__sync_add_if_zero(&ref->pcpu__s, -1) != 0))
		pcpu__ref_put_slow(ref);
}

/**
 * Kills the ref: from now on tryget fails, get/put are atomic adds on one
 * count, and the owner's reference is dropped, so release() runs as soon as
 * no reference is left -- inside this call if none is held now.
 *
 * Returns 0, or -1 with errno:
 *  - EINVAL: ref is NULL, or was killed already (nothing changed);
 *  - what membarrier() said (EPERM, ENOSYS) if it worked when the ref was
 *    created but is refused now (a seccomp filter installed since) AND the
 *    fallback, running on every CPU in turn (file comment), failed too
 *    (sched_setaffinity() refused as well): the ref is then left per-CPU
 *    and not killed, fully usable (get, put, tryget, read), the owner
 *    still holds its reference, and a tryget that ran meanwhile may have
 *    failed. The kill may be tried again; pcpu_ref_destroy() works as ever.
 * Thread-safe (one kill per ref); async-signal-safe if release() is. Cost
 * in per-CPU mode: one membarrier() system call and a read of every slot
 * (pcpu_counter_fetch()); membarrier refused: the CPU walk instead; in
 * atomic mode, one atomic subtract. Never waits for references.
 */
PCPU_API int pcpu_ref_kill(pcpu_ref_t *ref);

/**
 * Frees the ref. The caller guarantees no thread uses it any more: after
 * release() ran (typically from release() itself), or on a ref never shared
 * with another thread. NULL is a no-op. Not async-signal-safe (free()).
 */
PCPU_API void pcpu_ref_destroy(pcpu_ref_t *ref);

/** 1 while the ref is in per-CPU mode (created so, not killed yet), else 0
 * (also for NULL). Thread-safe; async-signal-safe. */
PCPU_API int pcpu_ref_is_percpu(const pcpu_ref_t *ref);

/** 1 once pcpu_ref_kill() succeeded (or is running), else 0 (also for
 * NULL). Thread-safe; async-signal-safe. */
PCPU_API int pcpu_ref_is_killed(const pcpu_ref_t *ref);

/**
 * The number of references held (the owner's included until the kill).
 * Exact when no get/put/kill runs concurrently (e.g. after joining the
 * threads); otherwise not a snapshot, like pcpu_counter_fetch(), and it may
 * even be off by the references that migrate between slots meanwhile.
 * For tests and diagnostics. NULL: 0 with errno EINVAL. Thread-safe;
 * async-signal-safe. Cost: one load per slot while per-CPU.
 */
PCPU_API int64_t pcpu_ref_read(const pcpu_ref_t *ref);

/* ---- pcpu_rwlock ---------------------------------------------------------- */

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

PCPU_API __attribute__((cold)) void pcpu__rwlock_rdlock_slow(pcpu_rwlock_t *lock);
PCPU_API __attribute__((cold)) int pcpu__rwlock_tryrdlock_slow(pcpu_rwlock_t *lock);
PCPU_API __attribute__((cold)) void pcpu__rwlock_rdunlock_slow(pcpu_rwlock_t *lock);

#ifdef PCPU_NO_INLINE
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
 * (it works whatever seccomp allows). Not async-signal-safe.
 */
PCPU_API int pcpu_rwlock_destroy(pcpu_rwlock_t *lock);

/**
 * Takes a read lock: waits (sleeping on a futex) while a writer holds or
 * waits for the lock. Must not be called by a thread that already holds a
 * read or the write lock of `lock`, nor from a signal handler (see the file
 * comment). Thread-safe. Cost while no writer is around, per-CPU mode: one
 * rseq section (as pcpu_ref_get()); atomic mode: two atomic operations on
 * shared words.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_rwlock_rdlock)(pcpu_rwlock_t *lock)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(lock, "pcpu_rwlock_rdlock");
#endif
	if (PCPU_UNLIKELY(pcpu__sync_add_if_zero(&lock->pcpu__s, 1) != 0))
		pcpu__rwlock_rdlock_slow(lock);
}

/**
 * Takes a read lock if no writer holds or waits for the lock: returns 1
 * with the lock taken, 0 without (errno untouched). Never blocks.
 * Thread-safe; async-signal-safe (the one read-lock call a signal handler
 * may use). Cost: as pcpu_rwlock_rdlock().
 */
__attribute__((always_inline)) static inline int PCPU__INLINE_OP(pcpu_rwlock_tryrdlock)(pcpu_rwlock_t *lock)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(lock, "pcpu_rwlock_tryrdlock");
#endif
	if (PCPU_LIKELY(pcpu__sync_add_if_zero(&lock->pcpu__s, 1) == 0))
		return 1;
	return pcpu__rwlock_tryrdlock_slow(lock);
}

/**
 * Releases a read lock the caller holds (any thread may release it, on any
 * CPU). Never blocks; wakes the waiting writer if there is one. Without a
 * read lock held: undefined (see "Misuse" above; writers then fail with
 * ENOTRECOVERABLE). Thread-safe; async-signal-safe. Cost while no writer
 * waits, per-CPU mode: one rseq section and a load of the (read-mostly)
 * state word.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_rwlock_rdunlock)(pcpu_rwlock_t *lock)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(lock, "pcpu_rwlock_rdunlock");
#endif
	/* With the state checked inside the section too: an unlock that
	 * commits per-CPU did so before a writer's membarrier (the writer
	 * counts it), and one that meets the flag goes to the slow path,
	 * which also counts unconditionally and then wakes the writer. */
	if (PCPU_UNLIKELY(pcpu__sync_add_if_zero(&lock->pcpu__s, -1) != 0))
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
 * an atomic OR, one membarrier() system call (per-CPU mode) and a read of
 * every slot (bench/README.md: microseconds).
 */
PCPU_API int pcpu_rwlock_wrlock(pcpu_rwlock_t *lock);

/**
 * Takes the write lock if it is free and no reader is inside: returns 1
 * with the lock taken, 0 without, errno EBUSY (held, or readers inside),
 * EINVAL (NULL), ENOTRECOVERABLE or membarrier's error (as for
 * pcpu_rwlock_wrlock()). Does not wait for readers, but does wait for a
 * mutex briefly held by another trywrlock. Thread-safe; not
 * async-signal-safe. Cost: as pcpu_rwlock_wrlock() with no reader inside; a
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
 * NULL. Thread-safe; async-signal-safe. */
PCPU_API int pcpu_rwlock_is_percpu(const pcpu_rwlock_t *lock);

/* ---- both ----------------------------------------------------------------- */

/**
 * 0 if refs, locks and object caches the calling thread creates now use
 * per-CPU mode, else the errno value that keeps them atomic: what
 * pcpu_rseq_error() says when the thread cannot use rseq (ECANCELED for
 * PCPU_RSEQ=0 or a ThreadSanitizer build, EPERM, ENOSYS...), or what
 * membarrier() said (ENOSYS, EPERM: seccomp, old kernel; EOPNOTSUPP: the
 * kernel lacks the PRIVATE_EXPEDITED_RSEQ command) -- at the registration,
 * or at any time since: a seccomp filter installed after per-CPU objects
 * exist is reported from then on, for good. Registers membarrier on first
 * use; asks the kernel whether it is still allowed on every call (one
 * system call). Thread-safe; not async-signal-safe.
 */
PCPU_API int pcpu_sync_percpu_error(void);

PCPU_END_DECLS

#endif /* PCPU_REF_H */
