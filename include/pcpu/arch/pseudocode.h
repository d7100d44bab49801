/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/pseudocode.h
 * What every operation of the architecture layer does, stated once, for
 * every architecture: each arch header (pcpu/arch/<arch>.h) implements
 * exactly these, and pcpu/arch/generic.h supplies the fallback of any it
 * does not. The operations named `pcpu_rseq_` are API (pcpu/percpu_ops.h
 * documents them for programs: their retry contract, cost and signal
 * safety); those named `pcpu__` are not. Include <pcpu/percpu_ops.h> or
 * <pcpu/arch.h>, not this file.
 *
 * ---- Terms ------------------------------------------------------------------
 *
 * index      the calling thread's slot index: the cpu_id or mm_cid field of
 *            its struct rseq (the process's choice, at pcpu__g.index_tpoff
 *            from the thread pointer). Negative while the area is not
 *            registered.
 * section    an rseq critical section (linux/rseq.h): the thread stores the
 *            address of a descriptor { version 0, flags 0, start_ip,
 *            post_commit_offset, abort_ip } into its area's rseq_cs field
 *            ("arming", at pcpu__g.cs_tpoff); if it is preempted, migrated
 *            or signalled while its instruction pointer is in [start_ip,
 *            start_ip + post_commit_offset), the kernel resumes it at
 *            abort_ip instead. abort_ip is preceded by the process's
 *            signature (PCPU__RSEQ_SIG) in the code.
 * commit     a section's last instruction, and its only store that others
 *            can see (or that a retry would not redo): ONE instruction, so
 *            the kernel's restart lands before it (nothing written) or after
 *            it (all written). Stores before it go only to memory nobody
 *            reads until the commit says so (above a stack's count) or to
 *            the caller's private memory.
 *            A port may commit with a store that can fail and write
 *            nothing (32-bit Arm's carry sections: `strexd`); the code
 *            right after the range then returns ABORTED for it.
 * abort      any exit before the commit: nothing anyone else can see was
 *            written. The caller may retry or take its slow path.
 * stride     PCPU_SLOT_STRIDE: slot i's copy of an object is at
 *            obj + i * stride.
 *
 * Operations are named after their pseudo-code, as librseq's are: `load`
 * a load, `add` an add, `store` a store (the last one is the commit),
 * `cbne`/`cbeq` leave if the value just loaded is not/is the given one,
 * `cbmask` leave if the add changes a bit of a mask, and `this_` says that
 * the operation finds the calling thread's slot of an object itself. Every
 * section compares the thread's index first (with the given `idx`, or with
 * the one it read itself); the names leave that out.
 *
 * ---- The thread and its index (not sections) --------------------------------
 *
 * char *pcpu__arch_thread_pointer(void)
 *     The thread pointer pcpu__g's offsets are relative to. Slow paths.
 *
 * int64_t pcpu__rseq_load_index(void)          (pcpu_rseq_index(), public)
 *     return index (sign-extended: negative when not registered).
 *     A fresh load at every call: the kernel changes it when the thread
 *     moves.
 *
 * int64_t pcpu__rseq_load_index16(void)
 *     return index & 0xffff.
 *     A registered index is below the possible CPUs (at most 8192 on
 *     Linux), so it reads whole; an unregistered one (-1, -2) reads 0xffff or
 *     0xfffe, which no section's `index != expected` compare accepts. Never
 *     negative, so only for code that hands it to such a compare before
 *     using it as an index.
 *
 * ---- Sections ---------------------------------------------------------------
 *
 * Every one returns PCPU_RSEQ_COMMITTED once its commit ran, and
 * PCPU_RSEQ_ABORTED when it was aborted or its index compare failed
 * (moved, or not registered), nothing written then; some return one more
 * reason, as stated. None retries: the caller decides.
 *
 * pcpu_rseq_load_add_store(idx, v, count)   (counter add_many, stats, rwlock)
 *     if (index != idx) return ABORTED;
 *     *v += count;                                           commit
 *
 * pcpu__rseq_load_add_store_at(idx, v, count, csoff, idxoff)
 *     The same with pcpu__g.cs_tpoff and pcpu__g.index_tpoff passed in, so
 *     that a loop of sections keeps them in registers (counter add_many).
 *
 * pcpu_rseq_this_load_add_store(obj, count)                (counter add)
 *     idx = index & 0xffff;                         (before the section)
 *     if (index != idx) return ABORTED;
 *     *(int64_t *)(obj + idx * stride) += count;             commit
 *   The index is read before arming, so the add's address does not wait
 *   for a load issued after the arming store (bench/README.md measured
 *   reading it inside slower), and compared inside.
 *
 * pcpu__rseq_this_add2(obj, a, b)                      (histogram record)
 *     idx = index & 0xffff;                         (before the section)
 *     if (index != idx) return ABORTED;
 *     p = (int64_t *)(obj + idx * stride);         (16-byte aligned)
 *     p[0] += a; p[1] += b;                 commit: ONE store of both
 *   Two stores could not be a section: an abort between them, then the
 *   retry, would add p[0] twice. What the one store does NOT promise is
 *   that another thread reads the pair at one instant: a reader loads
 *   the two words separately and may see one add before the other; each
 *   word is exact.
 *
 * pcpu_rseq_load_cbne_store(idx, v, expect, newv)   (group take, replace)
 *     if (index != idx) return ABORTED;
 *     if (*v != expect) return DIFFERS;
 *     *v = newv;                                             commit
 *
 * pcpu_rseq_load_cbne_store_store(idx, v, expect, v2, newv2, newv)
 *     if (index != idx) return ABORTED;
 *     if (*v != expect) return DIFFERS;
 *     *v2 = newv2;                 (speculative: nobody reads it yet)
 *     *v = newv;                                             commit
 *
 * pcpu_rseq_this_load_cbne_load_add_store(obj, gate_off, expect, count)
 *                                                            (ref, rwlock)
 *     idx = index;                                  (inside the section)
 *     if (idx < 0) return NO_INDEX;
 *     slot = obj + idx * stride;
 *     if (*(intptr_t *)(slot + gate_off) != expect) return DIFFERS;
 *     *(int64_t *)slot += count;                             commit
 *   The compared word (a gate) is read inside the section, so a switching
 *   thread's membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) restarts a
 *   section that read the old gate, and no add commits under a gate that
 *   was already closed.
 *
 * pcpu__rseq_this_load_add_cbmask_store(obj, count)  (hierarchical counter)
 *     idx = index & 0xffff;                         (before the section)
 *     if (index != idx) return ABORTED;
 *     p = (int64_t *)(obj + idx * stride);    (p[1]: the slot's mask)
 *     n = p[0]; s = n + count;
 *     if ((n ^ s) & p[1]) return UNFIT;    (the add changes a masked bit)
 *     p[0] = s;                                              commit
 *   With the mask ~(batch - 1) the add commits while the word stays in its
 *   batch-aligned window; with ~0 (a gate closed) no nonzero add commits.
 *
 * pcpu__rseq_load_cbne_load_store_add_store(idx, p, gexpect, oldp, count)
 *     if (index != idx) return ABORTED;
 *     if (p[1] != gexpect) return DIFFERS;         (p[1]: a gate word)
 *     *oldp = p[0];                    (the caller's private memory)
 *     p[0] += count;                                         commit
 *   A fetch-and-add on the slot's word, gated. On 32-bit targets only the
 *   gate's low word is compared.
 *
 * ---- Per-CPU stacks: struct pcpu_rseq_stack (below) -------------------------
 *
 * Each compares the index first, so it commits only on slot `idx`, then
 * the gate (a collecting thread closes it, then membarrier restarts the
 * sections in flight). Returns COMMITTED, ABORTED, DIFFERS (the gate is
 * not 0) or UNFIT. Stores before the commit go above the count (not part
 * of the stack until the count says so) or to the caller's memory.
 *
 * pcpu_rseq_stack_pop(idx, s, out)                           (pop one)
 *     if (index != idx) return ABORTED;
 *     if (s->gate != 0) return DIFFERS;
 *     n = s->count; if (n == 0) return UNFIT;
 *     *out = s->ptrs[n - 1];                 (private: the caller's variable)
 *     s->count = n - 1;                                          commit
 *
 * pcpu_rseq_stack_push(idx, s, p)                           (push one)
 *     ... checks as above;
 *     n = s->count; if (n >= s->cap) return UNFIT;
 *     s->ptrs[n] = p;                                (speculative: above n)
 *     s->count = n + 1;                                          commit
 *
 * pcpu_rseq_stack_push_many(idx, s, src, k)                   (push k)
 *     ... checks as above;
 *     n = s->count; if (n + k > s->cap) return UNFIT;
 *     memcpy(&s->ptrs[n], src, k * sizeof(void *)); (speculative: above n)
 *     s->count = n + k;                                          commit
 *
 * pcpu_rseq_stack_pop_many(idx, s, dst, k)                     (pop k)
 *     ... checks as above;
 *     n = s->count; if (n < k) return UNFIT;
 *     memcpy(dst, &s->ptrs[n - k], k * sizeof(void *)); (private: the caller's buffer)
 *     s->count = n - k;                                          commit
 *
 * ---- Not a section -----------------------------------------------------------
 *
 * pcpu__owned_add(p, v)  (owned slots, pcpu/worker.h)
 *     *p += v;       by the word's only writer: one instruction where the
 *                    target has an add to memory (PCPU_OWNED_ADD_SIGNAL_SAFE
 *                    1), else a relaxed load and a relaxed store (0). Never
 *                    torn for a reader (32-bit Arm: the low word's store,
 *                    or a 64-bit atomic store when the high half changes).
 *
 * ---- What an arch header provides -------------------------------------------
 *
 *  - what the target is, in every build: PCPU_ARCH_NAME, PCPU__ARCH_AUDIT
 *    and the constants the tests read (tests/arch_headers.py);
 *  - PCPU_ARCH_HAVE_RSEQ 1;
 *  - PCPU__RSEQ_SIG: the signature as the rseq() system call takes it
 *    (glibc's RSEQ_SIG for the target), and the same 4 bytes before every
 *    abort handler;
 *  - the assembly of the operations above it implements, as the macros
 *    pcpu/arch/common.h makes their functions from (it says which), and
 *    PCPU__ARCH_STACK_H, the file (relative to pcpu/arch/) of its stack
 *    sections' assembly;
 *  - the test hooks of every section: PCPU_TEST_INJECT (pcpu/arch/common.h:
 *    a spin before the commit, a C hook before the section, which for the
 *    idx16 operations runs after their index read, and an abort count),
 *    PCPU_TEST_SPLIT_BLOCKS (a branch to the next instruction after every
 *    load and register add inside a section, so that an emulator that takes
 *    interrupts only between translated blocks can interrupt a section
 *    there) and PCPU_TEST_BROKEN_SECTION (every descriptor's range ends
 *    just before the commit, on purpose: the stress tests must then lose
 *    updates, and tests/check_rseq_sections.py must object);
 *  - descriptors in the section __rseq_cs (32-byte aligned), a pointer to
 *    each in __rseq_cs_ptr_array, and a (start_ip, exit_ip) pair in
 *    __rseq_exit_point_array for every jump out of a section other than
 *    the abort and the fall-through (librseq's layout, which debuggers and
 *    tests/check_rseq_sections.py read); each of these, and the abort
 *    handler's code, in the section group of the code around it
 *    (PCPU__RSEQ_IN_GROUP, pcpu/arch/common.h), so that a COMDAT copy the
 *    linker discards takes its descriptors with it.
 */
#ifndef PCPU_ARCH_PSEUDOCODE_H
#define PCPU_ARCH_PSEUDOCODE_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/pseudocode.h>"
#endif

#include <stddef.h>
#include <stdint.h>

/* The sections' return values (API: pcpu/percpu_ops.h). */
#define PCPU_RSEQ_COMMITTED 0   /* the commit ran */
#define PCPU_RSEQ_ABORTED (-1)  /* aborted, or the index compare failed */
#define PCPU_RSEQ_DIFFERS 1     /* a compared word held another value */
#define PCPU_RSEQ_UNFIT 2       /* a stack was empty, full, had no room; a masked bit */
#define PCPU_RSEQ_NO_INDEX (-2) /* this_ with a gate: the thread has no index */

/* One slot's copy of a per-CPU stack of pointers (API: pcpu/percpu_ops.h),
 * followed by `cap` pointers. The same layout as the object cache's slot
 * (pcpu/objcache.h), on every target: 64 bytes with 8-byte pointers, 56
 * with 4-byte ones (each int64_t 8-byte aligned). */
struct pcpu_rseq_stack {
	intptr_t gate;          /**< 0: the sections may commit on this stack */
	int64_t count;          /**< pointers in the stack */
	int64_t cap;            /**< room for pointers after this header */
	void *user[2];          /**< the caller's (pcpu's object cache keeps its
				     counters and its shared part here) */
	int64_t reserved[3];    /**< 0 */
};

/* Its layout, as the stack sections' assembly sees it. */
#define PCPU__STACK_OFF_GATE offsetof(struct pcpu_rseq_stack, gate)
#define PCPU__STACK_OFF_COUNT offsetof(struct pcpu_rseq_stack, count)
#define PCPU__STACK_OFF_CAP offsetof(struct pcpu_rseq_stack, cap)
#define PCPU__STACK_OFF_PTRS sizeof(struct pcpu_rseq_stack)

#endif /* PCPU_ARCH_PSEUDOCODE_H */
