/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch.h
 * Picks the architecture header that supplies the rseq critical sections.
 *
 * Each arch header defines PCPU_ARCH_HAVE_RSEQ and, when it is 1, the
 * operations below, named after their pseudo-code as librseq names its own:
 *  - pcpu__arch_thread_pointer(): the thread pointer the offsets in pcpu__g
 *    are relative to (slow paths only);
 *  - pcpu__rseq_load_index(): the calling thread's slot index, negative when
 *    its rseq area is not registered;
 *  - pcpu__rseq_load_index16(): the same read as 16 bits, never negative
 *    (an unregistered area's -1 reads 0xffff), for sections whose compare
 *    then refuses it (the two indexed ones, the counter add_many's);
 *  - pcpu__rseq_cmpeq_addv(): if (index != expected) abort; *p += v;
 *    pcpu__rseq_cmpeq_addv_at(): the same with the two TLS offsets passed
 *    in (a loop of sections reads them once);
 *  - pcpu__rseq_cmpeq_addv_indexed(): if (index != idx) abort;
 *    base[idx * stride] += v (the counter add);
 *  - pcpu__rseq_cmpeq_add2v_indexed(): if (index != idx) abort;
 *    base[idx * stride] pair += (a, b), one 16-byte store (the histogram
 *    record: a bucket's count and sum);
 *  - pcpu__rseq_cmpeq_cmpeqv_storev(): if (index != expected) abort;
 *    if (*p != expect) fail; *p = newv;
 *  - pcpu__rseq_loadidx_cmpeqv_addv(): idx = index (inside the section);
 *    slot = base + idx * stride; if (slot's word at v_off != expect) fail;
 *    slot's word += add (pcpu/ref.h: the mode word is read inside the
 *    section);
 *  - the object cache's sections (pcpu/objcache.h), on one slot's cache
 *    (mode word, count, capacity, pointers) at fixed offsets:
 *    pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev (pop one),
 *    ..._cbge_store_storev (push one), ..._cbgt_memcpy_storev (push k) and
 *    ..._cblt_memcpy_storev (pop k): speculative loads or stores, then the
 *    count's store as the commit.
 * The generic header has no assembly: everything takes the fallback path.
 * None of this is API.
 */
#ifndef PCPU_ARCH_H
#define PCPU_ARCH_H

#include <pcpu/common.h> /* pcpu__g: the offsets the sections use */

#define PCPU__ARCH_H_INSIDE 1

/* ThreadSanitizer cannot see inside inline assembly, so code built with it
 * takes the (atomic, TSan-visible) fallback path everywhere. */
#if defined(__SANITIZE_THREAD__)
#define PCPU__NO_RSEQ_ASM 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PCPU__NO_RSEQ_ASM 1
#endif
#endif

#if defined(PCPU_NO_RSEQ) || defined(PCPU__NO_RSEQ_ASM)
#include <pcpu/arch/generic.h>
#elif defined(__x86_64__)
#include <pcpu/arch/x86_64.h>
#else
/* aarch64 and others: plain C fallback until their header is written. */
#include <pcpu/arch/generic.h>
#endif

#undef PCPU__ARCH_H_INSIDE

#endif /* PCPU_ARCH_H */
