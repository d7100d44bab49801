/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/objcache.h
 * The object cache's critical sections: what they do, the target's
 * implementation (the arch header names its file, PCPU__ARCH_OBJCACHE_H),
 * and the fallback of any it lacks. Included by <pcpu/objcache.h> once it
 * has defined the slot's layout, so the arch layer knows the offsets and
 * not the struct:
 *   PCPU__OBJCACHE_OFF_MODE   intptr_t, 0: sections may commit here
 *   PCPU__OBJCACHE_OFF_COUNT  int64_t, objects in the array
 *   PCPU__OBJCACHE_OFF_CAP    int64_t, the array's capacity
 *   PCPU__OBJCACHE_OFF_PTRS   the array of object pointers
 * Not API.
 *
 * Each operation is one section whose only store others can see is its
 * last, the commit of the new count (the rseq slides' "speculative store,
 * then final commit store"): a pointer stored into the array above the
 * count, or copied out of it, is not part of the cache until, or stays part
 * of it unless, the count says so. Copies go to or come from the caller's
 * private memory, so an aborted section leaves nothing behind. Every one
 * compares the index first, so it commits only on slot `expected`, then
 * the mode (a collecting thread sets it, then membarrier restarts the
 * sections in flight). Returns as in pcpu/arch/pseudocode.h: COMMITTED,
 * ABORTED, DIFFERS (the mode was not 0) or UNFIT.
 *
 * pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev(expected, cache, out)   (pop one)
 *     if (index != expected) return ABORTED;
 *     if (cache->mode != 0) return DIFFERS;
 *     n = cache->count; if (n == 0) return UNFIT;
 *     *out = cache->ptrs[n - 1];             (private: the caller's variable)
 *     cache->count = n - 1;                                      commit
 *
 * pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev(expected, cache, p)  (push one)
 *     ... checks as above;
 *     n = cache->count; if (n >= cache->cap) return UNFIT;
 *     cache->ptrs[n] = p;                            (speculative: above n)
 *     cache->count = n + 1;                                      commit
 *
 * pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev(expected, cache, src, k) (push k)
 *     ... checks as above;
 *     n = cache->count; if (n + k > cache->cap) return UNFIT;
 *     memcpy(&cache->ptrs[n], src, k * sizeof(void *)); (speculative: above n)
 *     cache->count = n + k;                                      commit
 *
 * pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev(expected, cache, dst, k)  (pop k)
 *     ... checks as above;
 *     n = cache->count; if (n < k) return UNFIT;
 *     memcpy(dst, &cache->ptrs[n - k], k * sizeof(void *)); (private: the caller's buffer)
 *     cache->count = n - k;                                      commit
 */
#ifndef PCPU_ARCH_OBJCACHE_H
#define PCPU_ARCH_OBJCACHE_H

#ifndef PCPU__OBJCACHE_OFF_PTRS
#error "include <pcpu/objcache.h>, not <pcpu/arch/objcache.h>"
#endif

#include <pcpu/arch.h>

#ifdef PCPU__ARCH_OBJCACHE_H
#include PCPU__ARCH_OBJCACHE_H
#endif

/* ---- the sections, from the port's macros (pcpu/arch/common.h says how) ------ *
 * Operands: expected, cache, and out / p / src, k / dst, k. Each jumps to
 * `aborted` (the index compare), `differs` (the mode was not 0) or `unfit`
 * (empty, full, no room, too few), or falls through once committed. */

#if PCPU__ARCH_SECTIONS && defined(PCPU_ARCH_HAVE_RSEQ)

/* The jumps out of every cache section but the abort. */
#define PCPU__CACHE_EXIT_POINTS                                              \
	PCPU__RSEQ_EXIT_POINT("aborted")                                     \
	PCPU__RSEQ_EXIT_POINT("differs")                                     \
	PCPU__RSEQ_EXIT_POINT("unfit")

/* How every cache section ends. */
#define PCPU__CACHE_RETURNS                                                  \
	PCPU__RSEQ_RETURN_COMMITTED;                                         \
	PCPU__RSEQ_RETURN_ABORTED;                                           \
	PCPU__RSEQ_RETURN(differs, PCPU__RSEQ_DIFFERS);                      \
	PCPU__RSEQ_RETURN(unfit, PCPU__RSEQ_UNFIT)

/* pop one */
#ifdef PCPU__ARCH_CACHE_POP_ASM
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev(int64_t expected, void *cache, void **out)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__CACHE_EXIT_POINTS
		     PCPU__ARCH_CACHE_POP_ASM
		     :
		     : PCPU__ARCH_CACHE_POP_IN
		     : PCPU__ARCH_CACHE_POP_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__CACHE_RETURNS;
}
#define pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev
#endif

/* push one */
#ifdef PCPU__ARCH_CACHE_PUSH_ASM
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev(int64_t expected, void *cache, void *p)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__CACHE_EXIT_POINTS
		     PCPU__ARCH_CACHE_PUSH_ASM
		     :
		     : PCPU__ARCH_CACHE_PUSH_IN
		     : PCPU__ARCH_CACHE_PUSH_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__CACHE_RETURNS;
}
#define pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev
#endif

/* push k */
#ifdef PCPU__ARCH_CACHE_PUSHK_ASM
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev(int64_t expected, void *cache, void *const *src,
					    int64_t k)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__CACHE_EXIT_POINTS
		     PCPU__ARCH_CACHE_PUSHK_ASM
		     :
		     : PCPU__ARCH_CACHE_PUSHK_IN
		     : PCPU__ARCH_CACHE_PUSHK_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__CACHE_RETURNS;
}
#define pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev
#endif

/* pop k */
#ifdef PCPU__ARCH_CACHE_POPK_ASM
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev(int64_t expected, void *cache, void **dst, int64_t k)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__CACHE_EXIT_POINTS
		     PCPU__ARCH_CACHE_POPK_ASM
		     :
		     : PCPU__ARCH_CACHE_POPK_IN
		     : PCPU__ARCH_CACHE_POPK_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__CACHE_RETURNS;
}
#define pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev
#endif

#endif /* PCPU__ARCH_SECTIONS && PCPU_ARCH_HAVE_RSEQ */

/* ---- the fallbacks ------------------------------------------------------------- */

#ifndef pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev
static inline int pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev(int64_t expected, void *cache, void **out)
{
	(void)expected, (void)cache, (void)out;
	return PCPU__RSEQ_ABORTED;
}
#define pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev
#endif

#ifndef pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev
static inline int pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev(int64_t expected, void *cache, void *p)
{
	(void)expected, (void)cache, (void)p;
	return PCPU__RSEQ_ABORTED;
}
#define pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev
#endif

#ifndef pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev
static inline int pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev(int64_t expected, void *cache,
							     void *const *src, int64_t k)
{
	(void)expected, (void)cache, (void)src, (void)k;
	return PCPU__RSEQ_ABORTED;
}
#define pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev
#endif

#ifndef pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev
static inline int pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev(int64_t expected, void *cache,
							     void **dst, int64_t k)
{
	(void)expected, (void)cache, (void)dst, (void)k;
	return PCPU__RSEQ_ABORTED;
}
#define pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev
#endif

#endif /* PCPU_ARCH_OBJCACHE_H */
