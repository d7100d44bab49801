/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/percpu_sync.h
 * What per-CPU reference counts (pcpu/ref.h) and the big-reader lock
 * (pcpu/rwlock.h) share: per-CPU counts with a per-slot mode word, and
 * the switch from per-CPU to atomic mode that membarrier() makes exact.
 * Linux's percpu_ref and percpu_rw_semaphore for user space, the "light
 * reference counter based on counter(9)" the thesis proposes (§2.4.2), with
 * restartable sequences doing what the kernel does with preemption control
 * and RCU-sched. Included by both headers; src/core/percpu_sync.c implements it.
 *
 * Why: a shared reference count or a pthread rwlock makes every reader write
 * one cache line, so readers that never conflict still take turns for it. A
 * pcpu_ref's get and put are each one rseq critical section on the calling
 * thread's slot of a per-CPU object: no lock prefix, no shared line written
 * or even read (bench/README.md, section "pcpu_bench_ref"). A
 * pcpu_rwlock's read lock and unlock go through a thread-local record
 * first (pcpu/rwlock.h), and use the per-CPU object the same way where the
 * record cannot serve.
 *
 * How the switch works (pcpu_ref_kill, pcpu_rwlock_wrlock). The handle is a
 * per-CPU object, like a pcpu_counter_t: each slot's copy holds that slot's
 * count and that slot's copy of the mode word. Every per-CPU get, put, read
 * lock and unlock reads its slot's copy of the mode INSIDE its critical
 * section, and adds only if it still says "per-CPU" (the public gated add,
 * pcpu_rseq_this_load_cbne_load_add_store in pcpu/percpu_ops.h). The
 * switching thread stores the new mode into every slot's copy, then calls
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
 *    correct, exactly as pcpu/ref.h and pcpu/rwlock.h document, but not
 *    scalable.
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
 * Nothing spins on a shared cache line, and nothing prints or aborts.
 *
 * Memory: 24 bytes per slot in pcpu's default zone (three counter words:
 * count, mode copy, and in slot 0 the pointer to the shared part), plus 128
 * bytes (pcpu_ref) or 192 bytes (pcpu_rwlock) of ordinary memory. A mode
 * change (kill, write lock and unlock, an atomic-mode creation) stores one
 * word into every walked slot (pcpu_slot_walked(): slot 0, the CPUs
 * present at start-up, mm_cid's range, claimed owned slots; not every
 * possible CPU), which makes that slot's page of the zone resident if no
 * other object had. A CPU hot-added later is not among them: a process
 * that expects hot-added CPUs sets PCPU_SLOT_WALK=all, as for every other
 * per-CPU object.
 */
#ifndef PCPU_PERCPU_SYNC_H
#define PCPU_PERCPU_SYNC_H

#include <pcpu/defs.h>
#include <pcpu/rseq.h>
#include <pcpu/counter.h>
#include <pcpu/percpu_ops.h>

PCPU_BEGIN_DECLS

/* One slot's copy of a ref or a lock (private to pcpu). The handle of
 * either is slot 0's copy of a per-CPU object, as for a pcpu_counter_t:
 * slot s's copy is at `handle + s * PCPU_SLOT_STRIDE`. Each copy holds that
 * slot's count and that slot's copy of the mode word, so a per-CPU
 * operation touches one cache line, its own slot's, and reads nothing
 * shared. */
struct pcpu__sync_slot {
	int64_t count;  /* this slot's gets - puts, or read locks - unlocks */
	intptr_t mode;  /* this slot's copy of the mode: 0 = per-CPU adds allowed */
#if INTPTR_MAX == INT32_MAX
	int32_t pcpu__pad_mode; /* 32-bit targets: each field fills a counter word */
#endif
	void *impl;     /* slot 0's copy only: the shared part (src/core/ref.c, src/core/rwlock.c) */
#if INTPTR_MAX == INT32_MAX
	int32_t pcpu__pad_impl;
#endif
};

/* One per-CPU add of v, if the calling thread's slot's copy of the mode is
 * 0 (the public gated add, pcpu/percpu_ops.h): PCPU_RSEQ_COMMITTED once
 * committed; nothing written when PCPU_RSEQ_ABORTED (the section aborted),
 * PCPU_RSEQ_DIFFERS (the mode is not 0) or PCPU_RSEQ_NO_INDEX (the thread
 * is not registered). */
__attribute__((always_inline)) static inline int
pcpu__sync_add_if_zero(struct pcpu__sync_slot *obj, int64_t v)
{
	return pcpu_rseq_this_load_cbne_load_add_store(obj, (long)offsetof(struct pcpu__sync_slot, mode),
						       0, v);
}

/**
 * 0 if refs, locks and object caches the calling thread creates now use
 * per-CPU mode, else the errno value that keeps them atomic: what
 * pcpu_rseq_error() says when the thread cannot use rseq (ECANCELED for
 * PCPU_RSEQ=0 or a ThreadSanitizer build, EPERM, ENOSYS...), or what
 * membarrier() said (ENOSYS, EPERM: seccomp, old kernel; EOPNOTSUPP: the
 * kernel lacks the PRIVATE_EXPEDITED_RSEQ command) -- at the registration,
 * or at any time since: a seccomp filter installed after per-CPU objects
 * exist is reported from then on, for good. Registers membarrier on first
 * use; asks the kernel whether it is still allowed on every call.
 * Thread-safe; not async-signal-safe. Cost: one membarrier() system call
 * (two on the first call).
 */
PCPU_API int pcpu_sync_percpu_error(void);

PCPU_END_DECLS

#endif /* PCPU_PERCPU_SYNC_H */
