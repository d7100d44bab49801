/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/riscv64/stack.h
 * The per-CPU stack's four sections for 64-bit RISC-V (pop one, push one, push k,
 * pop k: pcpu/arch/pseudocode.h states them; pcpu/arch/common.h makes
 * their functions from this assembly). The layout is struct
 * pcpu_rseq_stack's, as the offsets PCPU__STACK_OFF_{GATE,COUNT,CAP,PTRS}.
 * The offsets are immediates here (12-bit: the header is far smaller), so
 * each section needs one register for the stack.
 * Not API; pcpu/arch/common.h includes it.
 */
#ifndef PCPU_ARCH_RISCV64_STACK_H
#define PCPU_ARCH_RISCV64_STACK_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/riscv64/stack.h>"
#endif

/* What every stack section starts with, after arming: the index compare
 * and the gate compare (to the labels `aborted` and `differs`). */
#define PCPU__RV_CACHE_CHECKS                                                \
	PCPU__RV_CMPEQ("%[expected]")                                        \
	"ld t6, %[mode](%[cache])\n\t"                                       \
	PCPU__SPLIT                                                          \
	"bnez t6, %l[differs]\n\t"

/* Their common operands: the rseq operands, the slot, the cache, and the
 * layout's offsets (each section uses those it needs). */
#define PCPU__RV_CACHE_OPERANDS                                              \
	PCPU__RV_G_OPERANDS, [expected] "r"(expected), [cache] "r"(cache),   \
	[mode] "n"(PCPU__STACK_OFF_GATE), [count] "n"(PCPU__STACK_OFF_COUNT), \
	[cap] "n"(PCPU__STACK_OFF_CAP), [ptrs] "n"(PCPU__STACK_OFF_PTRS)  \
	PCPU__INJECT_INPUT

/* pop one: pcpu_rseq_stack_pop */
#define PCPU__ARCH_STACK_POP_ASM                                             \
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
#define PCPU__ARCH_STACK_POP_IN PCPU__RV_CACHE_OPERANDS, [out] "r"(out)
#define PCPU__ARCH_STACK_POP_CLOBBERS "t4", "t5", PCPU__RV_CLOBBERS

/* push one: pcpu_rseq_stack_push */
#define PCPU__ARCH_STACK_PUSH_ASM                                            \
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
#define PCPU__ARCH_STACK_PUSH_IN PCPU__RV_CACHE_OPERANDS, [p] "r"(p)
#define PCPU__ARCH_STACK_PUSH_CLOBBERS "t4", "t5", PCPU__RV_CLOBBERS

/* push k: pcpu_rseq_stack_push_many. The copy is a loop of
 * 8-byte moves inside the section (a preemption in the middle restarts it
 * all). */
#define PCPU__ARCH_STACK_PUSH_MANY_ASM                                           \
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
#define PCPU__ARCH_STACK_PUSH_MANY_IN PCPU__RV_CACHE_OPERANDS, [src] "r"(src), [k] "r"(k)
#define PCPU__ARCH_STACK_PUSH_MANY_CLOBBERS "a6", "a7", "t4", "t5", PCPU__RV_CLOBBERS

/* pop k: pcpu_rseq_stack_pop_many */
#define PCPU__ARCH_STACK_POP_MANY_ASM                                            \
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
#define PCPU__ARCH_STACK_POP_MANY_IN PCPU__RV_CACHE_OPERANDS, [dst] "r"(dst), [k] "r"(k)
#define PCPU__ARCH_STACK_POP_MANY_CLOBBERS "a6", "a7", "t4", "t5", PCPU__RV_CLOBBERS

#endif /* PCPU_ARCH_RISCV64_STACK_H */
