/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/ref.h
 * Per-CPU reference counts (pcpu_ref): Linux's percpu_ref for user space.
 * A get and a put are each one rseq critical section on the calling
 * thread's slot of a per-CPU object; pcpu_ref_kill() switches the ref to
 * one atomic count (pcpu/percpu_sync.h: how the switch works, when an
 * object is per-CPU or atomic, memory).
 *
 * Kill folds the per-CPU counts' exact sum into one atomic count and drops
 * the owner's reference; from then on get/put are atomic adds on that
 * count, and release() runs when it reaches zero. While the ref is per-CPU
 * the atomic count carries a bias of 2^62, so it cannot reach zero before
 * the fold removes the bias (Linux's PERCPU_COUNT_BIAS).
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
 *    (membarrier refused: the CPU walk of pcpu/percpu_sync.h instead).
 *  - Nothing spins on a shared cache line, and nothing prints or aborts.
 *
 * Signals: get, put and tryget are async-signal-safe (a handler may use the
 * ref the code it interrupted is using; a put that drops the last reference
 * runs release() in the handler, so release() must then be async-signal-safe
 * too).
 *
 * fork(): the child gets a copy of every ref, in the state the parent's was
 * in at the fork: per-CPU and atomic counts, mode.
 *  - References held by the parent's other threads are counted in the
 *    child but nobody will put them there, so a child's ref that such
 *    references were held on at the fork never reaches zero in the child
 *    (release() does not run there; the object is simply not freed). The
 *    references of the forking thread itself, and everything the child
 *    takes, work as usual; pcpu_ref_kill works in the child.
 *  - Nothing is shared between parent and child afterwards.
 *  tests/test_ref_fork.c checks these (and pcpu/rwlock.h's).
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
 *
 * The big-reader lock (pcpu_rwlock) has its own header, pcpu/rwlock.h,
 * which this one includes for programs written when both lived here.
 */
#ifndef PCPU_REF_H
#define PCPU_REF_H

#include <pcpu/defs.h>
#include <pcpu/percpu_sync.h>

PCPU_BEGIN_DECLS

/* Values of a ref's mode word. Not API. */
#define PCPU__REF_PERCPU 0 /* gets/puts commit per-CPU adds */
#define PCPU__REF_ATOMIC 1 /* atomic from the start, not killed */
#define PCPU__REF_DEAD 2   /* killed: atomic; tryget fails */

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
 * exported functions (src/core/ref_stable_abi.c), documented below with their
 * inline versions. */
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
 * with another thread. NULL is a no-op. Not thread-safe (no thread may use
 * the ref meanwhile); not async-signal-safe (free()). Cost: a zone free
 * and a free().
 */
PCPU_API void pcpu_ref_destroy(pcpu_ref_t *ref);

/** 1 while the ref is in per-CPU mode (created so, not killed yet), else 0
 * (also for NULL). Thread-safe; async-signal-safe. Cost: a load. */
PCPU_API int pcpu_ref_is_percpu(const pcpu_ref_t *ref);

/** 1 once pcpu_ref_kill() succeeded (or is running), else 0 (also for
 * NULL). Thread-safe; async-signal-safe. Cost: a load. */
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

PCPU_END_DECLS

/* Source compatibility: pcpu_rwlock was declared here before it had its
 * own header. */
#include <pcpu/rwlock.h>

#endif /* PCPU_REF_H */
