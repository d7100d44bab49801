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

/* Their common operands: the rseq operands, the slot, the cache, and the
 * layout's offsets (each section uses those it needs). */
#define PCPU__ARM_CACHE_OPERANDS                                             \
	PCPU__ARM_G_OPERANDS, [expected] "r"((int32_t)(expected)), [cache] "r"(cache), \
	[mode] "n"(PCPU__OBJCACHE_OFF_MODE), [count] "n"(PCPU__OBJCACHE_OFF_COUNT), \
	[cap] "n"(PCPU__OBJCACHE_OFF_CAP), [ptrs] "n"(PCPU__OBJCACHE_OFF_PTRS)  \
	PCPU__INJECT_INPUT

/* pop one: rseq_cmpeq_cmpeqz_cbz_load_storev */
#define PCPU__ARCH_CACHE_POP_ASM                                             \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CACHE_CHECKS                                               \
	"ldr r2, [%[cache], %[count]]\n\t"                                   \
	PCPU__SPLIT                                                          \
	"cmp r2, #0\n\t"                                                     \
	"beq %l[unfit]\n\t"                                                  \
	"sub r2, r2, #1\n\t"                                                 \
	"add r3, %[cache], r2, lsl #2\n\t"                                   \
	"ldr r3, [r3, %[ptrs]]\n\t"                                          \
	PCPU__SPLIT                                                          \
	"str r3, [%[out]]\n\t"                                               \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r2, [%[cache], %[count]]\n\t"                                   \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_CACHE_POP_IN PCPU__ARM_CACHE_OPERANDS, [out] "r"(out)
#define PCPU__ARCH_CACHE_POP_CLOBBERS "r2", "r3", PCPU__ARM_CLOBBERS

/* push one: rseq_cmpeq_cmpeqz_cbge_store_storev */
#define PCPU__ARCH_CACHE_PUSH_ASM                                            \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CACHE_CHECKS                                               \
	"ldr r2, [%[cache], %[count]]\n\t"                                   \
	"ldr r3, [%[cache], %[cap]]\n\t"                                     \
	PCPU__SPLIT                                                          \
	"cmp r2, r3\n\t"                                                     \
	"bge %l[unfit]\n\t"                                                  \
	"add r3, %[cache], r2, lsl #2\n\t"                                   \
	"str %[p], [r3, %[ptrs]]\n\t"                                        \
	"add r2, r2, #1\n\t"                                                 \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r2, [%[cache], %[count]]\n\t"                                   \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_CACHE_PUSH_IN PCPU__ARM_CACHE_OPERANDS, [p] "r"(p)
#define PCPU__ARCH_CACHE_PUSH_CLOBBERS "r2", "r3", PCPU__ARM_CLOBBERS

/* push k: rseq_cmpeq_cmpeqz_cbgt_memcpy_storev. The copy is a loop of
 * 4-byte moves inside the section (a preemption in the middle restarts it
 * all). */
#define PCPU__ARCH_CACHE_PUSHK_ASM                                           \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CACHE_CHECKS                                               \
	"ldr r2, [%[cache], %[count]]\n\t"                                   \
	"ldr r3, [%[cache], %[cap]]\n\t"                                     \
	PCPU__SPLIT                                                          \
	"add r1, r2, %[k]\n\t"                                               \
	"cmp r1, r3\n\t"                                                     \
	"bgt %l[unfit]\n\t"                                                  \
	"add r3, %[cache], r2, lsl #2\n\t"                                   \
	"add r3, r3, %[ptrs]\n\t"                                            \
	"mov r0, #0\n\t"                                                     \
	"cmp r0, %[k]\n\t"                                                   \
	"bge 8f\n\t"                                                         \
	"7:\n\t"                                                             \
	"ldr r2, [%[src], r0, lsl #2]\n\t"                                   \
	PCPU__SPLIT                                                          \
	"str r2, [r3, r0, lsl #2]\n\t"                                       \
	"add r0, r0, #1\n\t"                                                 \
	"cmp r0, %[k]\n\t"                                                   \
	"blt 7b\n\t"                                                         \
	"8:\n\t"                                                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r1, [%[cache], %[count]]\n\t"                                   \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_CACHE_PUSHK_IN PCPU__ARM_CACHE_OPERANDS, [src] "r"(src), [k] "r"((int32_t)k)
#define PCPU__ARCH_CACHE_PUSHK_CLOBBERS "r1", "r2", "r3", PCPU__ARM_CLOBBERS

/* pop k: rseq_cmpeq_cmpeqz_cblt_memcpy_storev */
#define PCPU__ARCH_CACHE_POPK_ASM                                            \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CACHE_CHECKS                                               \
	"ldr r2, [%[cache], %[count]]\n\t"                                   \
	PCPU__SPLIT                                                          \
	"subs r2, r2, %[k]\n\t"                                              \
	"blt %l[unfit]\n\t"                                                  \
	"add r3, %[cache], r2, lsl #2\n\t"                                   \
	"add r3, r3, %[ptrs]\n\t"                                            \
	"mov r0, #0\n\t"                                                     \
	"cmp r0, %[k]\n\t"                                                   \
	"bge 8f\n\t"                                                         \
	"7:\n\t"                                                             \
	"ldr r1, [r3, r0, lsl #2]\n\t"                                       \
	PCPU__SPLIT                                                          \
	"str r1, [%[dst], r0, lsl #2]\n\t"                                   \
	"add r0, r0, #1\n\t"                                                 \
	"cmp r0, %[k]\n\t"                                                   \
	"blt 7b\n\t"                                                         \
	"8:\n\t"                                                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r2, [%[cache], %[count]]\n\t"                                   \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_CACHE_POPK_IN PCPU__ARM_CACHE_OPERANDS, [dst] "r"(dst), [k] "r"((int32_t)k)
#define PCPU__ARCH_CACHE_POPK_CLOBBERS "r1", "r2", "r3", PCPU__ARM_CLOBBERS

#endif /* PCPU_ARCH_ARM_OBJCACHE_H */
