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
 * section returns PCPU_RSEQ_ABORTED (or PCPU_RSEQ_NO_INDEX), so the
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

/* Whether a copy of a 64-bit word may be made 32 bits at a time (the
 * kernel's copy of a segment file: src/core/core.h, "torn copies"),
 * where the arch header did not say: on a target with 32-bit pointers,
 * the word size the kernel's copy loops use. */
#ifndef PCPU__TORN64
#if UINTPTR_MAX > 0xffffffffu
#define PCPU__TORN64 0
#else
#define PCPU__TORN64 1
#endif
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

#ifndef pcpu__rseq_load_add_store_at
static inline int pcpu__rseq_load_add_store_at(int64_t expected, int64_t *p, int64_t v,
					       intptr_t csoff, intptr_t idxoff)
{
	(void)expected, (void)p, (void)v, (void)csoff, (void)idxoff;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu__rseq_load_add_store_at pcpu__rseq_load_add_store_at
#endif

/* load_add_store: load_add_store_at with the offsets read from pcpu__g,
 * for every target. */
#ifndef pcpu_rseq_load_add_store
__attribute__((always_inline)) static inline int
pcpu_rseq_load_add_store(int64_t idx, int64_t *v, int64_t count)
{
	return pcpu__rseq_load_add_store_at(idx, v, count, (intptr_t)pcpu__g.cs_tpoff,
					    (intptr_t)pcpu__g.index_tpoff);
}
#define pcpu_rseq_load_add_store pcpu_rseq_load_add_store
#endif

#ifndef pcpu_rseq_this_load_add_store
static inline int pcpu_rseq_this_load_add_store(int64_t *obj, int64_t count)
{
	(void)obj, (void)count;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu_rseq_this_load_add_store pcpu_rseq_this_load_add_store
#endif

#ifndef pcpu__rseq_this_add2
static inline int pcpu__rseq_this_add2(int64_t *obj, int64_t a, int64_t b)
{
	(void)obj, (void)a, (void)b;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu__rseq_this_add2 pcpu__rseq_this_add2
#endif

#ifndef pcpu_rseq_load_cbne_store
static inline int pcpu_rseq_load_cbne_store(int64_t idx, intptr_t *v, intptr_t expect,
					    intptr_t newv)
{
	(void)idx, (void)v, (void)expect, (void)newv;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu_rseq_load_cbne_store pcpu_rseq_load_cbne_store
#endif

#ifndef pcpu_rseq_load_cbne_store_store
static inline int pcpu_rseq_load_cbne_store_store(int64_t idx, intptr_t *v, intptr_t expect,
						  intptr_t *v2, intptr_t newv2, intptr_t newv)
{
	(void)idx, (void)v, (void)expect, (void)v2, (void)newv2, (void)newv;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu_rseq_load_cbne_store_store pcpu_rseq_load_cbne_store_store
#endif

#ifndef pcpu_rseq_this_load_cbne_load_add_store
static inline int pcpu_rseq_this_load_cbne_load_add_store(void *obj, long gate_off,
							  intptr_t expect, int64_t count)
{
	(void)obj, (void)gate_off, (void)expect, (void)count;
	return PCPU_RSEQ_NO_INDEX;
}
#define pcpu_rseq_this_load_cbne_load_add_store pcpu_rseq_this_load_cbne_load_add_store
#endif

#ifndef pcpu__rseq_this_load_add_cbmask_store
static inline int pcpu__rseq_this_load_add_cbmask_store(int64_t *obj, int64_t count)
{
	(void)obj, (void)count;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu__rseq_this_load_add_cbmask_store pcpu__rseq_this_load_add_cbmask_store
#endif

#ifndef pcpu__rseq_load_cbne_load_store_add_store
static inline int pcpu__rseq_load_cbne_load_store_add_store(int64_t idx, int64_t *p,
							    int64_t gexpect, int64_t *oldp,
							    int64_t count)
{
	(void)idx, (void)p, (void)gexpect, (void)oldp, (void)count;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu__rseq_load_cbne_load_store_add_store pcpu__rseq_load_cbne_load_store_add_store
#endif

#ifndef pcpu_rseq_stack_pop
static inline int pcpu_rseq_stack_pop(int64_t idx, struct pcpu_rseq_stack *s, void **out)
{
	(void)idx, (void)s, (void)out;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu_rseq_stack_pop pcpu_rseq_stack_pop
#endif

#ifndef pcpu_rseq_stack_push
static inline int pcpu_rseq_stack_push(int64_t idx, struct pcpu_rseq_stack *s, void *p)
{
	(void)idx, (void)s, (void)p;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu_rseq_stack_push pcpu_rseq_stack_push
#endif

#ifndef pcpu_rseq_stack_push_many
static inline int pcpu_rseq_stack_push_many(int64_t idx, struct pcpu_rseq_stack *s,
					    void *const *src, int64_t k)
{
	(void)idx, (void)s, (void)src, (void)k;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu_rseq_stack_push_many pcpu_rseq_stack_push_many
#endif

#ifndef pcpu_rseq_stack_pop_many
static inline int pcpu_rseq_stack_pop_many(int64_t idx, struct pcpu_rseq_stack *s, void **dst,
					   int64_t k)
{
	(void)idx, (void)s, (void)dst, (void)k;
	return PCPU_RSEQ_ABORTED;
}
#define pcpu_rseq_stack_pop_many pcpu_rseq_stack_pop_many
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
