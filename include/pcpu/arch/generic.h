/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/generic.h
 * The fallback of every operation of pcpu/arch/pseudocode.h that the arch
 * header (if any) did not define, as userspace-rcu's arch/generic.h fills
 * in what arch/x86.h leaves out. Included last by <pcpu/arch.h>, so the
 * subject headers call every operation unconditionally and carry no
 * architecture test.
 *
 * A fallback never commits: the index reads as "not registered" and every
 * section returns PCPU__RSEQ_ABORTED (or PCPU__RSEQ_UNREGISTERED), so the
 * callers take their slow paths, which are exact without rseq (atomic
 * read-modify-writes on words no rseq section writes). Once inlined, each
 * returns a constant and the compiler drops the dead fast path. Not API;
 * include <pcpu/arch.h>.
 */
#ifndef PCPU_ARCH_GENERIC_H
#define PCPU_ARCH_GENERIC_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/generic.h>"
#endif

#include <stdint.h>

#ifndef PCPU_ARCH_HAVE_RSEQ
#define PCPU_ARCH_HAVE_RSEQ 0
#endif

/* ---- not sections: the portable versions ------------------------------------- */

/* A spin-wait hint: none. */
#ifndef pcpu__arch_cpu_relax
#define pcpu__arch_cpu_relax() ((void)0)
#endif

/* One step of the histogram's binary search: base + half if
 * base[half - 1] < v, else base, with a mask (no branch). */
#ifndef pcpu__arch_search_step
__attribute__((always_inline)) static inline const int64_t *
pcpu__arch_search_step(const int64_t *base, size_t half, int64_t v)
{
	return base + (half & ((size_t)0 - (size_t)(base[half - 1] < v)));
}
#define pcpu__arch_search_step pcpu__arch_search_step
#endif

/* The log-linear histogram's exponent of t > 0: its top bit's index (one
 * lzcnt or clz). */
#ifndef pcpu__arch_loglin_exponent
__attribute__((always_inline)) static inline unsigned pcpu__arch_loglin_exponent(uint64_t t)
{
	return 63u ^ (unsigned)__builtin_clzll(t);
}
#define pcpu__arch_loglin_exponent pcpu__arch_loglin_exponent
#endif

/* Without sections nothing is ever registered (src/core/rseq.c runs the process
 * in its fallback mode), so no signature is ever checked. */
#ifndef PCPU__RSEQ_SIG
#define PCPU__RSEQ_SIG 0
#endif

#ifndef pcpu__arch_thread_pointer
static inline char *pcpu__arch_thread_pointer(void)
{
	return (char *)__builtin_thread_pointer();
}
#define pcpu__arch_thread_pointer pcpu__arch_thread_pointer
#endif

#ifndef pcpu__rseq_load_index
static inline int64_t pcpu__rseq_load_index(void)
{
	return -1;
}
#define pcpu__rseq_load_index pcpu__rseq_load_index
#endif

#ifndef pcpu__rseq_load_index16
static inline int64_t pcpu__rseq_load_index16(void)
{
	return 0xffff;
}
#define pcpu__rseq_load_index16 pcpu__rseq_load_index16
#endif

#ifndef pcpu__rseq_cmpeq_addv_at
static inline int pcpu__rseq_cmpeq_addv_at(int64_t expected, int64_t *p, int64_t v, intptr_t csoff,
					   intptr_t idxoff)
{
	(void)expected, (void)p, (void)v, (void)csoff, (void)idxoff;
	return PCPU__RSEQ_ABORTED;
}
#define pcpu__rseq_cmpeq_addv_at pcpu__rseq_cmpeq_addv_at
#endif

#ifndef pcpu__rseq_cmpeq_addv
static inline int pcpu__rseq_cmpeq_addv(int64_t expected, int64_t *p, int64_t v)
{
	(void)expected, (void)p, (void)v;
	return PCPU__RSEQ_ABORTED;
}
#define pcpu__rseq_cmpeq_addv pcpu__rseq_cmpeq_addv
#endif

#ifndef pcpu__rseq_idx16_cmpeq_addv_indexed
static inline int pcpu__rseq_idx16_cmpeq_addv_indexed(int64_t *base, int64_t v)
{
	(void)base, (void)v;
	return PCPU__RSEQ_ABORTED;
}
#define pcpu__rseq_idx16_cmpeq_addv_indexed pcpu__rseq_idx16_cmpeq_addv_indexed
#endif

#ifndef pcpu__rseq_idx16_cmpeq_add2v_indexed
static inline int pcpu__rseq_idx16_cmpeq_add2v_indexed(int64_t *base, int64_t a, int64_t b)
{
	(void)base, (void)a, (void)b;
	return PCPU__RSEQ_ABORTED;
}
#define pcpu__rseq_idx16_cmpeq_add2v_indexed pcpu__rseq_idx16_cmpeq_add2v_indexed
#endif

#ifndef pcpu__rseq_cmpeq_cmpeqv_storev
static inline int pcpu__rseq_cmpeq_cmpeqv_storev(int64_t expected, intptr_t *p, intptr_t expect,
						 intptr_t newv)
{
	(void)expected, (void)p, (void)expect, (void)newv;
	return PCPU__RSEQ_ABORTED;
}
#define pcpu__rseq_cmpeq_cmpeqv_storev pcpu__rseq_cmpeq_cmpeqv_storev
#endif

#ifndef pcpu__rseq_loadidx_cmpeqv_addv
static inline int pcpu__rseq_loadidx_cmpeqv_addv(void *base, long v_off, intptr_t expect,
						 int64_t add)
{
	(void)base, (void)v_off, (void)expect, (void)add;
	return PCPU__RSEQ_UNREGISTERED;
}
#define pcpu__rseq_loadidx_cmpeqv_addv pcpu__rseq_loadidx_cmpeqv_addv
#endif

/* owned_add(p, v) (pcpu/worker.h): *p += v by the word's only writer. A
 * relaxed load and a relaxed store: readers never see a torn word, and
 * ThreadSanitizer sees both; a signal handler of the same thread that adds
 * to the word between them loses its add (PCPU_OWNED_ADD_SIGNAL_SAFE 0). */
#ifndef pcpu__owned_add
#define PCPU_OWNED_ADD_SIGNAL_SAFE 0
static inline void pcpu__owned_add(int64_t *p, int64_t v)
{
	uint64_t old = (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED);

	__atomic_store_n(p, (int64_t)(old + (uint64_t)v), __ATOMIC_RELAXED);
}
#define pcpu__owned_add pcpu__owned_add
#endif

#endif /* PCPU_ARCH_GENERIC_H */
