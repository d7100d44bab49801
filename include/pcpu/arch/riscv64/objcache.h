/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/riscv64/objcache.h
 * The object cache's four sections for 64-bit RISC-V (pcpu/arch/objcache.h
 * states them). The cache's layout comes from <pcpu/objcache.h> as the
 * offsets PCPU__OBJCACHE_OFF_{MODE,COUNT,CAP,PTRS}, immediate offsets
 * here (12-bit: the slot's header is far smaller), so each section needs
 * one register for the cache. Not API; pcpu/arch/objcache.h includes it.
 */
#ifndef PCPU_ARCH_RISCV64_OBJCACHE_H
#define PCPU_ARCH_RISCV64_OBJCACHE_H

#ifndef PCPU__OBJCACHE_OFF_PTRS
#error "include <pcpu/objcache.h>, not <pcpu/arch/riscv64/objcache.h>"
#endif

/* What every cache section starts with, after arming: the index compare
 * and the mode compare (to the labels `aborted` and `differs`). */
#define PCPU__RV_CACHE_CHECKS                                                \
	PCPU__RV_CMPEQ("%[expected]")                                        \
	"ld t6, %[mode](%[cache])\n\t"                                       \
	PCPU__SPLIT                                                          \
	"bnez t6, %l[differs]\n\t"

/* Their common operands: the rseq operands, the slot, the cache, and the
 * layout's offsets (each section uses those it needs). */
#define PCPU__RV_CACHE_OPERANDS                                              \
	PCPU__RV_G_OPERANDS, [expected] "r"(expected), [cache] "r"(cache),   \
	[mode] "n"(PCPU__OBJCACHE_OFF_MODE), [count] "n"(PCPU__OBJCACHE_OFF_COUNT), \
	[cap] "n"(PCPU__OBJCACHE_OFF_CAP), [ptrs] "n"(PCPU__OBJCACHE_OFF_PTRS)  \
	PCPU__INJECT_INPUT

/* pop one: rseq_cmpeq_cmpeqz_cbz_load_storev */
#define PCPU__ARCH_CACHE_POP_ASM                                             \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CACHE_CHECKS                                                \
	"ld t5, %[count](%[cache])\n\t"                                      \
	PCPU__SPLIT                                                          \
	"beqz t5, %l[unfit]\n\t"                                             \
	"addi t5, t5, -1\n\t"                                                \
	"slli t4, t5, 3\n\t"                                                 \
	"add t4, %[cache], t4\n\t"                                           \
	"ld t4, %[ptrs](t4)\n\t"                                             \
	PCPU__SPLIT                                                          \
	"sd t4, 0(%[out])\n\t"                                               \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd t5, %[count](%[cache])\n\t"                                      \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_CACHE_POP_IN PCPU__RV_CACHE_OPERANDS, [out] "r"(out)
#define PCPU__ARCH_CACHE_POP_CLOBBERS "t4", "t5", PCPU__RV_CLOBBERS

/* push one: rseq_cmpeq_cmpeqz_cbge_store_storev */
#define PCPU__ARCH_CACHE_PUSH_ASM                                            \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CACHE_CHECKS                                                \
	"ld t5, %[count](%[cache])\n\t"                                      \
	"ld t4, %[cap](%[cache])\n\t"                                        \
	PCPU__SPLIT                                                          \
	"bge t5, t4, %l[unfit]\n\t"                                          \
	"slli t4, t5, 3\n\t"                                                 \
	"add t4, %[cache], t4\n\t"                                           \
	"sd %[p], %[ptrs](t4)\n\t"                                           \
	"addi t5, t5, 1\n\t"                                                 \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd t5, %[count](%[cache])\n\t"                                      \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_CACHE_PUSH_IN PCPU__RV_CACHE_OPERANDS, [p] "r"(p)
#define PCPU__ARCH_CACHE_PUSH_CLOBBERS "t4", "t5", PCPU__RV_CLOBBERS

/* push k: rseq_cmpeq_cmpeqz_cbgt_memcpy_storev. The copy is a loop of
 * 8-byte moves inside the section (a preemption in the middle restarts it
 * all). */
#define PCPU__ARCH_CACHE_PUSHK_ASM                                           \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CACHE_CHECKS                                                \
	"ld t5, %[count](%[cache])\n\t"                                      \
	"ld t4, %[cap](%[cache])\n\t"                                        \
	PCPU__SPLIT                                                          \
	"add a7, t5, %[k]\n\t"                                               \
	"bgt a7, t4, %l[unfit]\n\t"                                          \
	"slli t4, t5, 3\n\t"                                                 \
	"add t4, %[cache], t4\n\t"                                           \
	"addi t4, t4, %[ptrs]\n\t"                                           \
	"mv t5, %[src]\n\t"                                                  \
	"slli a6, %[k], 3\n\t"                                               \
	"add a6, t5, a6\n\t"                                                 \
	"bgeu t5, a6, 8f\n\t"                                                \
	"7:\n\t"                                                             \
	"ld t6, 0(t5)\n\t"                                                   \
	PCPU__SPLIT                                                          \
	"sd t6, 0(t4)\n\t"                                                   \
	"addi t5, t5, 8\n\t"                                                 \
	"addi t4, t4, 8\n\t"                                                 \
	"bltu t5, a6, 7b\n\t"                                                \
	"8:\n\t"                                                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd a7, %[count](%[cache])\n\t"                                      \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_CACHE_PUSHK_IN PCPU__RV_CACHE_OPERANDS, [src] "r"(src), [k] "r"(k)
#define PCPU__ARCH_CACHE_PUSHK_CLOBBERS "a6", "a7", "t4", "t5", PCPU__RV_CLOBBERS

/* pop k: rseq_cmpeq_cmpeqz_cblt_memcpy_storev */
#define PCPU__ARCH_CACHE_POPK_ASM                                            \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CACHE_CHECKS                                                \
	"ld a7, %[count](%[cache])\n\t"                                      \
	PCPU__SPLIT                                                          \
	"sub a7, a7, %[k]\n\t"                                               \
	"bltz a7, %l[unfit]\n\t"                                             \
	"slli t4, a7, 3\n\t"                                                 \
	"add t4, %[cache], t4\n\t"                                           \
	"addi t4, t4, %[ptrs]\n\t"                                           \
	"mv t5, %[dst]\n\t"                                                  \
	"slli a6, %[k], 3\n\t"                                               \
	"add a6, t5, a6\n\t"                                                 \
	"bgeu t5, a6, 8f\n\t"                                                \
	"7:\n\t"                                                             \
	"ld t6, 0(t4)\n\t"                                                   \
	PCPU__SPLIT                                                          \
	"sd t6, 0(t5)\n\t"                                                   \
	"addi t5, t5, 8\n\t"                                                 \
	"addi t4, t4, 8\n\t"                                                 \
	"bltu t5, a6, 7b\n\t"                                                \
	"8:\n\t"                                                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd a7, %[count](%[cache])\n\t"                                      \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_CACHE_POPK_IN PCPU__RV_CACHE_OPERANDS, [dst] "r"(dst), [k] "r"(k)
#define PCPU__ARCH_CACHE_POPK_CLOBBERS "a6", "a7", "t4", "t5", PCPU__RV_CLOBBERS

#endif /* PCPU_ARCH_RISCV64_OBJCACHE_H */
