/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/arm/objcache.h
 * The object cache's four sections for 32-bit Arm (pcpu/arch/objcache.h
 * states them). The cache's layout comes from <pcpu/objcache.h> as the
 * offsets PCPU__OBJCACHE_OFF_{MODE,COUNT,CAP,PTRS}, immediate offsets
 * here. The count and capacity are int64_t whose high words are always 0
 * (a cache holds at most a few thousand pointers): the sections load them
 * and commit the count as their low words (`ldr`/`str`, little-endian).
 * Object pointers are 4 bytes. Not API; pcpu/arch/objcache.h includes it.
 */
#ifndef PCPU_ARCH_ARM_OBJCACHE_H
#define PCPU_ARCH_ARM_OBJCACHE_H

#ifndef PCPU__OBJCACHE_OFF_PTRS
#error "include <pcpu/objcache.h>, not <pcpu/arch/arm/objcache.h>"
#endif

/* What every cache section starts with, after arming: the index compare
 * and the mode compare (to the labels `aborted` and `differs`). */
#define PCPU__ARM_CACHE_CHECKS                                               \
	PCPU__ARM_CMPEQ("%[expected]")                                       \
	"ldr r0, [%[cache], %[mode]]\n\t"                                    \
	PCPU__SPLIT                                                          \
	"cmp r0, #0\n\t"                                                     \
	"bne %l[differs]\n\t"

/* The jumps out of every cache section but the abort. */
#define PCPU__ARM_CACHE_EXITS                                                \
	PCPU__RSEQ_EXIT_POINT("aborted")                                     \
	PCPU__RSEQ_EXIT_POINT("differs")                                     \
	PCPU__RSEQ_EXIT_POINT("unfit")

/* How every cache section ends (pcpu/arch/objcache.h's return values). */
#define PCPU__ARM_CACHE_RETURNS                                              \
	pcpu__after_asm_goto();                                              \
	return PCPU__RSEQ_COMMITTED;                                         \
aborted:                                                                     \
	pcpu__after_asm_goto();                                              \
	PCPU__INJECT_ABORTED();                                              \
	return PCPU__RSEQ_ABORTED;                                           \
differs:                                                                     \
	pcpu__after_asm_goto();                                              \
	return PCPU__RSEQ_DIFFERS;                                           \
unfit:                                                                       \
	pcpu__after_asm_goto();                                              \
	return PCPU__RSEQ_UNFIT

/* Their common operands: the rseq operands, the slot, the cache, and the
 * layout's offsets (each section uses those it needs). */
#define PCPU__ARM_CACHE_OPERANDS(expected, cache)                            \
	PCPU__ARM_RSEQ_OPERANDS((intptr_t)pcpu__g.cs_tpoff,                   \
				(intptr_t)pcpu__g.index_tpoff),               \
	[expected] "r"((int32_t)(expected)), [cache] "r"(cache),              \
	[mode] "n"(PCPU__OBJCACHE_OFF_MODE), [count] "n"(PCPU__OBJCACHE_OFF_COUNT), \
	[cap] "n"(PCPU__OBJCACHE_OFF_CAP), [ptrs] "n"(PCPU__OBJCACHE_OFF_PTRS)  \
	PCPU__INJECT_INPUT

/* pop one: rseq_cmpeq_cmpeqz_cbz_load_storev */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev(int64_t expected, void *cache, void **out)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__ARM_CACHE_EXITS
		     PCPU__ARM_ARM
		     PCPU__ARM_CACHE_CHECKS
		     "ldr r2, [%[cache], %[count]]\n\t"
		     PCPU__SPLIT
		     "cmp r2, #0\n\t"
		     "beq %l[unfit]\n\t"
		     "sub r2, r2, #1\n\t"
		     "add r3, %[cache], r2, lsl #2\n\t"
		     "ldr r3, [r3, %[ptrs]]\n\t"
		     PCPU__SPLIT
		     "str r3, [%[out]]\n\t"
		     PCPU__INJECT_ASM
		     "0:\n\t"
		     "str r2, [%[cache], %[count]]\n\t"
		     "2:\n\t"
		     PCPU__ARM_ABORT_TO("aborted")
		     :
		     : PCPU__ARM_CACHE_OPERANDS(expected, cache), [out] "r"(out)
		     : "r2", "r3", PCPU__ARM_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__ARM_CACHE_RETURNS;
}
#define pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev

/* push one: rseq_cmpeq_cmpeqz_cbge_store_storev */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev(int64_t expected, void *cache, void *p)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__ARM_CACHE_EXITS
		     PCPU__ARM_ARM
		     PCPU__ARM_CACHE_CHECKS
		     "ldr r2, [%[cache], %[count]]\n\t"
		     "ldr r3, [%[cache], %[cap]]\n\t"
		     PCPU__SPLIT
		     "cmp r2, r3\n\t"
		     "bge %l[unfit]\n\t"
		     "add r3, %[cache], r2, lsl #2\n\t"
		     "str %[p], [r3, %[ptrs]]\n\t"
		     "add r2, r2, #1\n\t"
		     PCPU__SPLIT
		     PCPU__INJECT_ASM
		     "0:\n\t"
		     "str r2, [%[cache], %[count]]\n\t"
		     "2:\n\t"
		     PCPU__ARM_ABORT_TO("aborted")
		     :
		     : PCPU__ARM_CACHE_OPERANDS(expected, cache), [p] "r"(p)
		     : "r2", "r3", PCPU__ARM_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__ARM_CACHE_RETURNS;
}
#define pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev

/* push k: rseq_cmpeq_cmpeqz_cbgt_memcpy_storev. The copy is a loop of
 * 4-byte moves inside the section (a preemption in the middle restarts it
 * all). */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev(int64_t expected, void *cache, void *const *src,
					    int64_t k)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__ARM_CACHE_EXITS
		     PCPU__ARM_ARM
		     PCPU__ARM_CACHE_CHECKS
		     "ldr r2, [%[cache], %[count]]\n\t"
		     "ldr r3, [%[cache], %[cap]]\n\t"
		     PCPU__SPLIT
		     "add r1, r2, %[k]\n\t"
		     "cmp r1, r3\n\t"
		     "bgt %l[unfit]\n\t"
		     "add r3, %[cache], r2, lsl #2\n\t"
		     "add r3, r3, %[ptrs]\n\t"
		     "mov r0, #0\n\t"
		     "cmp r0, %[k]\n\t"
		     "bge 8f\n\t"
		     "7:\n\t"
		     "ldr r2, [%[src], r0, lsl #2]\n\t"
		     PCPU__SPLIT
		     "str r2, [r3, r0, lsl #2]\n\t"
		     "add r0, r0, #1\n\t"
		     "cmp r0, %[k]\n\t"
		     "blt 7b\n\t"
		     "8:\n\t"
		     PCPU__INJECT_ASM
		     "0:\n\t"
		     "str r1, [%[cache], %[count]]\n\t"
		     "2:\n\t"
		     PCPU__ARM_ABORT_TO("aborted")
		     :
		     : PCPU__ARM_CACHE_OPERANDS(expected, cache), [src] "r"(src),
		       [k] "r"((int32_t)k)
		     : "r1", "r2", "r3", PCPU__ARM_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__ARM_CACHE_RETURNS;
}
#define pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev

/* pop k: rseq_cmpeq_cmpeqz_cblt_memcpy_storev */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev(int64_t expected, void *cache, void **dst, int64_t k)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__ARM_CACHE_EXITS
		     PCPU__ARM_ARM
		     PCPU__ARM_CACHE_CHECKS
		     "ldr r2, [%[cache], %[count]]\n\t"
		     PCPU__SPLIT
		     "subs r2, r2, %[k]\n\t"
		     "blt %l[unfit]\n\t"
		     "add r3, %[cache], r2, lsl #2\n\t"
		     "add r3, r3, %[ptrs]\n\t"
		     "mov r0, #0\n\t"
		     "cmp r0, %[k]\n\t"
		     "bge 8f\n\t"
		     "7:\n\t"
		     "ldr r1, [r3, r0, lsl #2]\n\t"
		     PCPU__SPLIT
		     "str r1, [%[dst], r0, lsl #2]\n\t"
		     "add r0, r0, #1\n\t"
		     "cmp r0, %[k]\n\t"
		     "blt 7b\n\t"
		     "8:\n\t"
		     PCPU__INJECT_ASM
		     "0:\n\t"
		     "str r2, [%[cache], %[count]]\n\t"
		     "2:\n\t"
		     PCPU__ARM_ABORT_TO("aborted")
		     :
		     : PCPU__ARM_CACHE_OPERANDS(expected, cache), [dst] "r"(dst),
		       [k] "r"((int32_t)k)
		     : "r1", "r2", "r3", PCPU__ARM_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__ARM_CACHE_RETURNS;
}
#define pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev

#endif /* PCPU_ARCH_ARM_OBJCACHE_H */
