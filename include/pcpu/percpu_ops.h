/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/percpu_ops.h
 * Per-CPU operations: the rseq critical sections pcpu's own counters,
 * references, locks and object caches are built on, for programs that
 * build their own per-CPU structures on pcpu's zone memory -- a per-CPU
 * free list, a ring, a flag, a statistic pcpu has no type for. librseq's
 * operations, on pcpu's slots, with the same names where librseq has the
 * operation (rseq/pseudocode.h: `rseq_load_add_store`, `rseq_load_cbne_store`,
 * `rseq_load_cbne_store_store`).
 *
 * An operation is one restartable sequence on one slot's copy of an object:
 * it checks that the calling thread still runs with the index the caller
 * read (or reads the index itself), does its loads and compares, and ends
 * with ONE store, the commit. If the thread is preempted, migrated or
 * signalled before the commit, the kernel abandons the sequence and the
 * operation returns PCPU_RSEQ_ABORTED with nothing written. So every slot's
 * words are written by one thread at a time, with no lock and no atomic
 * instruction, and no update is ever lost or doubled.
 *
 * The memory: a zone object (pcpu_zone_alloc(), or the default zone's
 * through the counters) has a copy per slot; `pcpu_slot_ptr(obj, idx)` is
 * slot idx's (at obj + idx * PCPU_SLOT_STRIDE). The `this_` operations take
 * the object (slot 0's copy) and find the calling thread's slot
 * themselves; the others take the index the caller read with
 * pcpu_rseq_index() and pointers into that slot's copy.
 *
 * The index: the process's (pcpu_zone_index(NULL)): the rseq mm_cid where
 * the kernel has it (Linux >= 6.3: a dense id below the number of threads
 * running at once), else the CPU number; PCPU_INDEX=cpu|mm_cid or
 * pcpu_configure() chooses. Both are below pcpu_nslots(). Memory shared
 * between processes needs the CPU number (two processes' threads may hold
 * the same mm_cid at once, and their sections would then write one slot
 * together): such a program sets PCPU_INDEX_CPU with pcpu_configure(), as
 * a pre-fork server does (docs/prefork.md). An index is stale as soon as it
 * is read -- the thread may move -- which is why every operation compares
 * it again inside the sequence.
 *
 * The retry contract. Every operation returns:
 *  - PCPU_RSEQ_COMMITTED (0): the commit ran, once.
 *  - PCPU_RSEQ_ABORTED (-1): nothing written. The thread was preempted,
 *    migrated or signalled inside the sequence, or its index is no longer
 *    `idx` (it moved), or it has no index at all (not registered: then
 *    every attempt aborts); on 32-bit Arm also when an add that carries
 *    into a 64-bit word's high half lost its store-exclusive to an
 *    interrupt. Read the index again and retry; after a few
 *    aborts in a row take a slow path of your own (pcpu's types try
 *    PCPU_RSEQ_MAX_TRIES = 4 times, then use an atomic on a word no section
 *    writes): a debugger single-stepping the sequence, or a signal storm,
 *    aborts it every time.
 *  - PCPU_RSEQ_DIFFERS (1): nothing written: a compared word (or a gate)
 *    held another value. Not a reason to retry blindly: read the state
 *    again and decide.
 *  - PCPU_RSEQ_UNFIT (2): nothing written: a stack was empty, full, or had
 *    no room for k pointers.
 *  - PCPU_RSEQ_NO_INDEX (-2): the gated add only: the thread has no index
 *    (not registered).
 * A thread gets its index when pcpu registers its rseq area
 * (pcpu_thread_init(), or its first pcpu update); pcpu_rseq_index() reads
 * negative until then, and forever in a thread or process that cannot use
 * rseq (pcpu_rseq_mode() says PCPU_RSEQ_FALLBACK: seccomp, valgrind,
 * PCPU_RSEQ=0, a ThreadSanitizer build, a target without sections). Such
 * threads need the slow path: every operation aborts there.
 *
 * Who may write what. The words a sequence writes on a slot must be written
 * only by sequences on that slot, or by code that has stopped them (a gate,
 * below). A plain store, or an atomic read-modify-write, to the same word
 * from anywhere else loses updates. Any thread may read any slot's words at
 * any time (a relaxed load): each aligned word is written whole (on
 * 32-bit Arm an add that changes a 64-bit word's high half commits it with
 * one 64-bit store-exclusive, `strexd`: pcpu/arch/arm.h, "Carries").
 *
 * Gates: taking a slot's data away from the sequences. The gated add and
 * the stacks compare a gate word inside the sequence and commit only while
 * it holds the expected value (0 for the stacks). To collect a stack, or
 * switch an object to another mode, a thread stores the new gate value into
 * every slot's copy, then calls pcpu_rseq_fence(): when it returns, no
 * sequence that read the old gate can still commit, and the slots' words
 * are the collector's. pcpu's references, read-mostly locks and object
 * caches switch this way.
 *
 * Memory ordering: relaxed. The commit is a plain store, ordered after the
 * sequence's own loads and stores on the same CPU; a sequence that runs
 * later on the same slot sees it (the kernel orders a thread switch). For
 * another CPU to see a slot's words in order, use the gate and
 * pcpu_rseq_fence(), whose barriers order everything before them.
 *
 * Cost: one sequence: a store that arms it, the index compare, the
 * operation's loads and compares, and the commit; no atomic instruction, no
 * fence, no call (every operation is inline and compiles into the caller;
 * on 32-bit Arm an add that changes a 64-bit word's high half calls its
 * carry sequence, an ldrexd/strexd pair).
 * pcpu_rseq_this_load_add_store() is pcpu_counter_add()'s fast path,
 * instruction for instruction (bench/instructions.md compares each
 * operation with librseq's). Sequences cannot nest: do not call one from
 * inside another (a signal handler may run one while the thread it
 * interrupted is in the middle of one: the interrupted sequence restarts).
 *
 * Signals: every operation is async-signal-safe, also on the same slot and
 * the same words as the code it interrupted (that code's sequence is
 * aborted by the signal and retries). Thread-safe as stated above (one
 * slot's words written only by sequences).
 *
 * The inline layout. Like pcpu's inline updates, these compile the slot
 * stride and the rseq area's offsets into the program (version node
 * PCPU_LAYOUT_<n>: pcpu/version.h), also when PCPU_NO_INLINE is defined:
 * there is no out-of-line form of a sequence that runs in its caller.
 *
 * Code that a sequence ran in must stay mapped until the thread's next
 * sequence or pcpu_prepare_unload() (pcpu/rseq.h): the kernel reads the
 * last descriptor when the thread is next preempted.
 *
 * Example, a per-CPU free list of buffers (a stack of pointers per slot;
 * tests/test_percpu_ops.c and pcpu's object cache do this, in full):
 *
 *     // one stack of 64 pointers per slot, in a zone
 *     struct pcpu_rseq_stack *fl = (struct pcpu_rseq_stack *)pcpu_zone_alloc(
 *             zone, sizeof(struct pcpu_rseq_stack) + 64 * sizeof(void *), 64);
 *     for (unsigned s = 0; s < pcpu_nslots(); s++)
 *             ((struct pcpu_rseq_stack *)pcpu_slot_ptr(fl, s))->cap = 64;
 *
 *     void *buf_get(void)
 *     {
 *             for (int tries = 0; tries < 4; tries++) {
 *                     int64_t idx = pcpu_rseq_index();
 *                     void *b;
 *
 *                     if (idx < 0)
 *                             break;          // no rseq here: slow path
 *                     switch (pcpu_rseq_stack_pop(idx, (struct pcpu_rseq_stack *)
 *                                                 pcpu_slot_ptr(fl, (unsigned)idx), &b)) {
 *                     case PCPU_RSEQ_COMMITTED: return b;
 *                     case PCPU_RSEQ_ABORTED: continue;
 *                     default: goto slow;  // empty (or gated)
 *                     }
 *             }
 *     slow:
 *             return malloc(BUF_SIZE);
 *     }
 */
#ifndef PCPU_PERCPU_OPS_H
#define PCPU_PERCPU_OPS_H

#include <pcpu/defs.h>
#include <pcpu/rseq.h>
#include <pcpu/zone.h>
#include <pcpu/arch.h>

PCPU_BEGIN_DECLS

/*
 * The operations, defined inline by the architecture layer (each target's
 * assembly, pcpu/arch/<arch>.h; pcpu/arch/pseudocode.h states each; on a
 * target without sections, in a ThreadSanitizer build and with
 * PCPU_NO_RSEQ, each returns PCPU_RSEQ_ABORTED, or PCPU_RSEQ_NO_INDEX for
 * the gated add, and never writes):
 *
 * int pcpu_rseq_load_add_store(int64_t idx, int64_t *v, int64_t count);
 *     if (index != idx) return ABORTED;  *v += count;      (the commit)
 *     A per-CPU add on slot idx's word v. The counters' add_many.
 *
 * int pcpu_rseq_this_load_add_store(int64_t *obj, int64_t count);
 *     idx = index;  obj[idx * stride] += count             (the commit)
 *     The add on the calling thread's slot of zone word obj (slot 0's
 *     address), the index read and compared by the operation itself:
 *     pcpu_counter_add(). Never NO_INDEX: a thread without an index aborts.
 *
 * int pcpu_rseq_load_cbne_store(int64_t idx, intptr_t *v, intptr_t expect,
 *                               intptr_t newv);
 *     if (index != idx) return ABORTED;  if (*v != expect) return DIFFERS;
 *     *v = newv;                                            (the commit)
 *     A per-CPU compare-and-store: a flag, a head pointer, a sequence
 *     number. pcpu's consistent groups take their lanes with it.
 *
 * int pcpu_rseq_load_cbne_store_store(int64_t idx, intptr_t *v,
 *                                     intptr_t expect, intptr_t *v2,
 *                                     intptr_t newv2, intptr_t newv);
 *     if (index != idx) return ABORTED;  if (*v != expect) return DIFFERS;
 *     *v2 = newv2;  *v = newv;                    (*v's store commits)
 *     A compare-and-store with a second store before the commit, to memory
 *     nobody reads until the commit says so: a ring's slot before its head
 *     (store the element, then advance), a node linked before it is
 *     published. If the sequence aborts, *v2 may hold newv2 already:
 *     harmless exactly when nobody reads v2 before the commit.
 *
 * int pcpu_rseq_this_load_cbne_load_add_store(void *obj, long gate_off,
 *                                             intptr_t expect, int64_t count);
 *     idx = index (inside the sequence);  if (idx < 0) return NO_INDEX;
 *     slot = obj + idx * stride;
 *     if (*(intptr_t *)(slot + gate_off) != expect) return DIFFERS;
 *     *(int64_t *)slot += count;                            (the commit)
 *     A gated add on the calling thread's slot: the add commits only while
 *     the slot's gate word still holds `expect` (see "Gates" above).
 *     pcpu_ref_get() and _put(), pcpu_rwlock's read side.
 *
 * The per-CPU stack (struct pcpu_rseq_stack, then its `cap` pointers:
 * pcpu_rseq_stack_ptrs(); a zone object of sizeof(struct pcpu_rseq_stack)
 * + cap * sizeof(void *) bytes, cap < 2^31, each slot's `cap` set by the
 * program, `gate` and `count` 0 to start with). Each compares the index,
 * then the gate (DIFFERS unless 0), then the count:
 *
 * int pcpu_rseq_stack_pop(int64_t idx, struct pcpu_rseq_stack *s, void **out);
 *     n = s->count;  if (n == 0) return UNFIT;
 *     *out = ptrs[n - 1];  s->count = n - 1;     (the count's store commits)
 *     A per-CPU free list's pop: compare, the second store (into the
 *     caller's *out), the commit. pcpu_objcache_get().
 *
 * int pcpu_rseq_stack_push(int64_t idx, struct pcpu_rseq_stack *s, void *p);
 *     n = s->count;  if (n >= s->cap) return UNFIT;
 *     ptrs[n] = p;  s->count = n + 1;            (the count's store commits)
 *     pcpu_objcache_put().
 *
 * int pcpu_rseq_stack_push_many(int64_t idx, struct pcpu_rseq_stack *s,
 *                               void *const *src, int64_t k);
 * int pcpu_rseq_stack_pop_many(int64_t idx, struct pcpu_rseq_stack *s,
 *                              void **dst, int64_t k);
 *     k pointers at once (UNFIT without room for all k, or with fewer than
 *     k): the copy runs inside the sequence, so a preemption in the middle
 *     restarts it all; cost grows with k. The object cache's transfers to
 *     and from its depot.
 */

/**
 * The calling thread's slot index now: its rseq area's mm_cid or CPU
 * number (the process's choice, see the file comment), below
 * pcpu_nslots(); negative when the thread has no index (not registered,
 * or rseq is not used: pcpu_rseq_mode()). Stale as soon as it is read;
 * the operations compare it again. Does not register the thread (see
 * pcpu_thread_init()). Thread-safe; async-signal-safe. Cost: one load.
 */
static inline int64_t pcpu_rseq_index(void)
{
	return pcpu__rseq_load_index();
}

/** The pointers of a per-CPU stack's slot copy: just after its header.
 * Thread-safe; async-signal-safe. Cost: an add. */
static inline void **pcpu_rseq_stack_ptrs(struct pcpu_rseq_stack *s)
{
	return (void **)(void *)(s + 1);
}

/**
 * Waits until no rseq sequence of this process that was running when the
 * call began can still commit: each one has committed (and its store is
 * visible to the caller) or will restart. Sequences that start later see
 * every store the caller made before the call. With it, a gate closes: store
 * the new gate value into every slot's copy, call this, and the slots'
 * words are the caller's (see the file comment).
 *
 * How: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) (Linux >= 5.10),
 * registered on first use; where it is refused (seccomp, an old kernel),
 * the calling thread runs on every CPU in turn instead (sched_setaffinity(),
 * its affinity restored), which restarts the sequences the same way
 * (pcpu/percpu_sync.h describes both).
 *
 * Returns 0, or -1 with errno set to membarrier's error (EPERM, ENOSYS)
 * when both ways were refused: then nothing is guaranteed, and the caller
 * must leave its gates as they were (or keep them closed and not touch the
 * slots' words). Thread-safe; not async-signal-safe. Cost: one system call
 * that interrupts every CPU running a thread of the process (a few
 * microseconds); the CPU walk: two system calls and a migration per CPU.
 */
PCPU_API int pcpu_rseq_fence(void);

PCPU_END_DECLS

#endif /* PCPU_PERCPU_OPS_H */
