/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/pseudocode.h
 * What every operation of the architecture layer does, stated once, for
 * every architecture: each arch header (pcpu/arch/<arch>.h) implements
 * exactly these, and pcpu/arch/generic.h supplies the fallback of any it
 * does not. Not API; include <pcpu/arch.h>.
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
 *            reads until the commit says so (above an object cache's count)
 *            or to the caller's private memory.
 * abort      any exit before the commit: nothing anyone else can see was
 *            written. The caller may retry or take its slow path.
 * stride     PCPU_SLOT_STRIDE: slot i's copy of an object is at
 *            obj + i * stride.
 *
 * Operations are named after their pseudo-code, as librseq's are:
 * `cmpeq` the index compared with a value read before the section,
 * `loadidx` the index read inside the section, `idx16` the index read by the
 * operation itself just before arming, as its low 16 bits, `cmpeqv`/`cmpeqz`
 * a word compared with a value/with zero, `cbz`/`cbge`/`cbgt`/`cblt` branch
 * out if a count is zero/at least/more than/less than a bound, `addv`/
 * `add2v` the commit adds one/two values, `storev` the commit stores one,
 * `load`/`store`/`memcpy` what happens in between.
 *
 * ---- The thread and its index (not sections) --------------------------------
 *
 * char *pcpu__arch_thread_pointer(void)
 *     The thread pointer pcpu__g's offsets are relative to. Slow paths.
 *
 * int64_t pcpu__rseq_load_index(void)
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
 * Every one returns PCPU__RSEQ_COMMITTED once its commit ran, and
 * PCPU__RSEQ_ABORTED when it was aborted or its index compare failed
 * (moved, or not registered), nothing written then; some return one more
 * reason, as stated. None retries: the caller decides.
 *
 * pcpu__rseq_cmpeq_addv(expected, p, v)
 *     if (index != expected) return ABORTED;
 *     *p += v;                                               commit
 *
 * pcpu__rseq_cmpeq_addv_at(expected, p, v, csoff, idxoff)
 *     The same with pcpu__g.cs_tpoff and pcpu__g.index_tpoff passed in, so
 *     that a loop of sections keeps them in registers (counter add_many).
 *
 * pcpu__rseq_idx16_cmpeq_addv_indexed(base, v)             (counter add)
 *     idx = index & 0xffff;                         (before the section)
 *     if (index != idx) return ABORTED;
 *     *(int64_t *)(base + idx * stride) += v;                commit
 *   The index is read before arming, so the add's address does not wait
 *   for a load issued after the arming store (bench/README.md measured
 *   reading it inside slower), and compared inside.
 *
 * pcpu__rseq_idx16_cmpeq_add2v_indexed(base, a, b)     (histogram record)
 *     idx = index & 0xffff;                         (before the section)
 *     if (index != idx) return ABORTED;
 *     p = (int64_t *)(base + idx * stride);        (16-byte aligned)
 *     p[0] += a; p[1] += b;                 commit: ONE store of both
 *   Two stores could not be a section: an abort between them, then the
 *   retry, would add p[0] twice. What the one store does NOT promise is
 *   that another thread reads the pair at one instant: a reader loads
 *   the two words separately and may see one add before the other; each
 *   word is exact.
 *
 * pcpu__rseq_cmpeq_cmpeqv_storev(expected, p, expect, newv)  (group take)
 *     if (index != expected) return ABORTED;
 *     if (*p != expect) return DIFFERS;
 *     *p = newv;                                             commit
 *
 * pcpu__rseq_loadidx_cmpeqv_addv(base, v_off, expect, add)  (ref, rwlock)
 *     idx = index;                                  (inside the section)
 *     if (idx < 0) return UNREGISTERED;
 *     slot = base + idx * stride;
 *     if (*(intptr_t *)(slot + v_off) != expect) return DIFFERS;
 *     *(int64_t *)slot += add;                               commit
 *   The compared word (a mode) is read inside the section, so a switching
 *   thread's membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) restarts a
 *   section that read the old mode, and no add commits under a mode that
 *   was already left.
 *
 * ---- Not a section -----------------------------------------------------------
 *
 * pcpu__owned_add(p, v)  (owned slots, pcpu/worker.h)
 *     *p += v;       by the word's only writer: one instruction where the
 *                    target has an add to memory (PCPU_OWNED_ADD_SIGNAL_SAFE
 *                    1), else a relaxed load and a relaxed store (0). Never
 *                    torn for a reader.
 *
 * The object cache's four sections (pop one, push one, push k, pop k) are
 * stated with their subject, in pcpu/arch/objcache.h.
 *
 * ---- What an arch header provides -------------------------------------------
 *
 *  - PCPU_ARCH_HAVE_RSEQ 1;
 *  - PCPU__RSEQ_SIG: the signature as the rseq() system call takes it
 *    (glibc's RSEQ_SIG for the target), and the same 4 bytes before every
 *    abort handler;
 *  - the operations above it implements, each followed by a macro of its
 *    own name (`#define pcpu__rseq_cmpeq_addv pcpu__rseq_cmpeq_addv`), which
 *    tells pcpu/arch/generic.h not to supply the fallback;
 *  - PCPU__ARCH_OBJCACHE_H, the file (relative to pcpu/arch/) of its object
 *    cache sections, if it has them;
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

/* The sections' return values. */
#define PCPU__RSEQ_COMMITTED 0
#define PCPU__RSEQ_ABORTED 1      /* aborted, or the index compare failed */
#define PCPU__RSEQ_DIFFERS 2      /* the compared word held another value */
#define PCPU__RSEQ_UNREGISTERED 3 /* loadidx: the thread has no index */
#define PCPU__RSEQ_UNFIT 3        /* object cache: empty, full, no room */

#endif /* PCPU_ARCH_PSEUDOCODE_H */
