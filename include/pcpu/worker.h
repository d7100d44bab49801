/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/worker.h
 * Owned slots: DPDK's registered lcores for pcpu's counters.
 *
 * A data-plane worker pinned to its core adds to its own copy of every
 * counter with a plain load, add and store (DPDK's "Per Core" pattern,
 * seed 004): nothing to arm, nothing atomic. An rseq add cannot go below
 * arming its critical section, so pcpu offers the same to a thread that
 * claims a slot of its own: an **owned slot**. While a thread holds one,
 * pcpu_counter_add_owned() and the other `_owned` updates (counter.h,
 * histogram.h) write that slot's word of the counter and no other thread
 * ever does, so the update needs no atomicity against other threads: on
 * x86-64 it is a single `add` to memory (the Per Core update's own
 * instruction), elsewhere a relaxed load, add and relaxed store. It is
 * correct whatever CPU the thread runs on, migrating or not, with rseq or
 * without it (PCPU_RSEQ=0, seccomp, valgrind, ThreadSanitizer builds).
 * A data plane's loop takes, once, a view of its counter array in its slot
 * (pcpu_counter_owned_array(), counter.h) and adds through it
 * (pcpu_owned_array_add()): one pointer in a register and nothing to test
 * per update, DPDK's `core->stats.field += v` exactly.
 *
 * The same counters stay ordinary counters: other threads keep adding to
 * them through rseq or the fallback, and fetches, resets (by offset in slot
 * 0's mirror word: an owned slot's word is never written by anyone but its
 * owner), exposition and segments read the owned slots as any other slot.
 * A reader never sees a torn word: the owner's store is one aligned 8-byte
 * store.
 *
 * Where they are. A zone has pcpu_nslots() slots: first the CPU slots (the
 * possible CPUs, or PCPU_NSLOTS), then pcpu_worker_max() owned slots, which
 * no rseq index, fallback add or reset ever writes. Like every slot, an
 * owned slot's memory is reserved, not resident: it costs a page per chunk
 * only once its owner writes there, and fetches visit an owned slot only
 * once some thread has claimed it. In a published segment, whose file
 * pages are allocated before any update can fault on them
 * (docs/segment-format.md), an owned slot's pages are allocated at its
 * first claim, under every object of the segment (a claim fails with
 * ENOSPC where the file system has no room), and never before.
 *
 * How many: one per possible CPU (at most 128, DPDK's default
 * RTE_MAX_LCORE) unless the environment variable PCPU_OWNED_SLOTS=N (0 to
 * PCPU_OWNED_MAX, decimal digits only), read once at start-up, says
 * otherwise; never more than 4096 slots in all. Unset or empty, it is the
 * default. Any other value (1025, -1, abc, 3x) is refused, never replaced
 * by the default: the process then has no owned slots
 * (pcpu_worker_max() is 0) and every claim fails with EINVAL, which is how
 * the program learns of it (the library prints nothing;
 * pcpu_environment_error() names the variable). A claim when
 * every owned slot is held fails with EBUSY. Either way the thread goes on
 * with ordinary adds: an `_owned` update with no claim (the zero
 * pcpu_worker_t) is the ordinary update.
 *
 * Life cycle. A slot is claimed by one thread (pcpu_worker_claim()) and
 * held until pcpu_worker_release() or the thread's exit. Its words keep
 * their values when released: the next claimer adds on from them, so
 * nothing is lost or counted twice. After fork() the child's calling
 * thread keeps its claim (on the child's own copy of the counters); every
 * other claim is released in the child.
 *
 * Limits. A process whose counters live in a shared registry (a segment
 * published with PCPU_SEGMENT_SHARED_TREE: one memory for a process tree)
 * cannot claim owned slots: a slot there is shared with every process of
 * the tree, and the claim would be this process's alone. Claims there fail
 * with ENOTSUP, and creating a shared registry while a thread holds a claim
 * fails with EBUSY. Consistent groups have no owned form: their readers
 * need a sequence word per slot that only an rseq section or a
 * compare-and-swap makes safe to take.
 *
 * Signals. On x86-64 (rseq builds), an owned update is async-signal-safe:
 * a handler of the owning thread may do owned updates too (an interrupt
 * lands between instructions). Where PCPU_OWNED_ADD_SIGNAL_SAFE is 0
 * (aarch64, ThreadSanitizer and PCPU_NO_RSEQ builds) it is a load and a
 * store: a handler that interrupts an owned update of the same word and
 * does one itself loses one of them. Handlers there use the ordinary
 * updates (pcpu_counter_add(), always async-signal-safe).
 */
#ifndef PCPU_WORKER_H
#define PCPU_WORKER_H

#include <pcpu/defs.h>
#include <pcpu/arch.h>

PCPU_BEGIN_DECLS

/** The most owned slots PCPU_OWNED_SLOTS may ask for. */
#define PCPU_OWNED_MAX 1024

/** A claim: the owned slot's distance from slot 0 in bytes, 0 for none.
 * A value type, for a register of the worker's loop: copy the claim
 * pcpu_worker_claim() stored into a local whose address is never taken
 * (`const pcpu_worker_t w = claimed;`), else the compiler reloads it from
 * memory after every update. The field is private to pcpu. */
typedef struct pcpu_worker {
	uintptr_t pcpu__off;
} pcpu_worker_t;

/* The calling thread's claim (pcpu_worker_self()): set by the claim, zero
 * again at release. Initial-exec, so reading it is one %fs-relative load
 * also from shared objects. */
PCPU_API extern __thread uintptr_t pcpu__worker_off __attribute__((tls_model("initial-exec")));

/**
 * Claims an owned slot for the calling thread: the lowest free one. On
 * success stores the claim in *w (may be NULL) and returns 0; a thread
 * that holds one already gets it again. Fails with -1 and errno: EBUSY
 * (every owned slot is held: pcpu_worker_max() of them), EINVAL (the
 * environment variable PCPU_OWNED_SLOTS is not a number 0 to
 * PCPU_OWNED_MAX: the process has no owned slots), ENOTSUP (the
 * process uses a shared registry, see the file comment), ENOSPC (a
 * published segment's file system has no room for the slot), ENOMEM (the
 * thread-exit hook could not be installed); *w is then the zero claim,
 * whose `_owned` updates are ordinary updates.
 * Thread-safe; not async-signal-safe (a mutex; the first claim of a
 * thread installs its exit hook). Cost: a mutex and a scan of the owned
 * slots; the first claim of a slot also adds it to the slots fetches read.
 */
PCPU_API int pcpu_worker_claim(pcpu_worker_t *w);

/**
 * Releases the calling thread's owned slot (also done at thread exit). The
 * slot's words keep their values; the thread's `_owned` updates become
 * ordinary updates, and a pcpu_worker_t it kept must not be used again
 * (with PCPU_DEBUG defined, updates check that the claim is the thread's).
 * Returns 0, or -1 with errno EINVAL when the thread holds none.
 * Thread-safe; not async-signal-safe. Cost: a mutex.
 */
PCPU_API int pcpu_worker_release(void);

/** How many owned slots the process has (see the file comment); 0 where
 * PCPU_OWNED_SLOTS is 0 or was refused. Thread-safe; async-signal-safe once pcpu is
 * initialised. Cost: a load. */
PCPU_API unsigned pcpu_worker_max(void);

/** The slot number of a claim (pcpu_slot_ptr(), pcpu_counter_fetch_slot()
 * take it), or -1 for the zero claim. Thread-safe; async-signal-safe.
 * Cost: a shift. */
PCPU_API int pcpu_worker_slot(pcpu_worker_t w);

static inline pcpu_worker_t pcpu__worker_self_inline(void)
{
	pcpu_worker_t w;

	w.pcpu__off = pcpu__worker_off;
	return w;
}

/* With PCPU_DEBUG: aborts with a message if `w` is not the calling
 * thread's claim (a claim used after its release, or by another thread).
 * Not API. */
PCPU_API void pcpu__worker_debug_check(pcpu_worker_t w, const char *func);

#ifdef PCPU_NO_INLINE
PCPU_API pcpu_worker_t pcpu_worker_self(void);
#else
/**
 * The calling thread's claim, or the zero claim: for code far from the
 * loop that claimed (a callee that counts). Thread-safe; async-signal-safe.
 * Cost: one thread-local load (a call in the stable tier).
 */
static inline pcpu_worker_t pcpu_worker_self(void)
{
	return pcpu__worker_self_inline();
}
#endif

PCPU_END_DECLS

#endif /* PCPU_WORKER_H */
