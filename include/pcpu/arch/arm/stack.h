/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/arm/stack.h
 * The per-CPU stack's four sections for 32-bit Arm (pop one, push one, push k,
 * pop k: pcpu/arch/pseudocode.h states them; pcpu/arch/common.h makes
 * their functions from this assembly). The layout is struct
 * pcpu_rseq_stack's, as the offsets PCPU__STACK_OFF_{GATE,COUNT,CAP,PTRS}.
 * The offsets are immediates here. The count and capacity are int64_t
 * whose high words are always 0 (a stack holds fewer than 2^31 pointers):
 * the sections load them and commit the count as their low words
 * (`ldr`/`str`, little-endian). Pointers are 4 bytes. The copies keep
 * their pointer in r12 (clobbered by every section anyway), so that a
 * test build's spin (lr) still leaves the compiler the registers for
 * their six operands in Thumb PIC code.
 * Not API; pcpu/arch/common.h includes it.
 */
#ifndef PCPU_ARCH_ARM_STACK_H
#define PCPU_ARCH_ARM_STACK_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/arm/stack.h>"
#endif

/* What every stack section starts with, after arming: the index compare
 * and the gate compare (to the labels `aborted` and `differs`). */
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
	[mode] "n"(PCPU__STACK_OFF_GATE), [count] "n"(PCPU__STACK_OFF_COUNT), \
	[cap] "n"(PCPU__STACK_OFF_CAP), [ptrs] "n"(PCPU__STACK_OFF_PTRS)  \
	PCPU__INJECT_INPUT

/* pop one: pcpu_rseq_stack_pop */
#define PCPU__ARCH_STACK_POP_ASM                                             \
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
#define PCPU__ARCH_STACK_POP_IN PCPU__ARM_CACHE_OPERANDS, [out] "r"(out)
#define PCPU__ARCH_STACK_POP_CLOBBERS "r2", "r3", PCPU__ARM_CLOBBERS

/* push one: pcpu_rseq_stack_push */
#define PCPU__ARCH_STACK_PUSH_ASM                                            \
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
#define PCPU__ARCH_STACK_PUSH_IN PCPU__ARM_CACHE_OPERANDS, [p] "r"(p)
#define PCPU__ARCH_STACK_PUSH_CLOBBERS "r2", "r3", PCPU__ARM_CLOBBERS

/* push k: pcpu_rseq_stack_push_many. The copy is a loop of
 * 4-byte moves inside the section (a preemption in the middle restarts it
 * all). */
#define PCPU__ARCH_STACK_PUSH_MANY_ASM                                       \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CACHE_CHECKS                                               \
	"ldr r2, [%[cache], %[count]]\n\t"                                   \
	"ldr r12, [%[cache], %[cap]]\n\t"                                    \
	PCPU__SPLIT                                                          \
	"add r1, r2, %[k]\n\t"                                               \
	"cmp r1, r12\n\t"                                                    \
	"bgt %l[unfit]\n\t"                                                  \
	"add r12, %[cache], r2, lsl #2\n\t"                                  \
	"add r12, r12, %[ptrs]\n\t"                                          \
	"mov r0, #0\n\t"                                                     \
	"cmp r0, %[k]\n\t"                                                   \
	"bge 8f\n\t"                                                         \
	"7:\n\t"                                                             \
	"ldr r2, [%[src], r0, lsl #2]\n\t"                                   \
	PCPU__SPLIT                                                          \
	"str r2, [r12, r0, lsl #2]\n\t"                                      \
	"add r0, r0, #1\n\t"                                                 \
	"cmp r0, %[k]\n\t"                                                   \
	"blt 7b\n\t"                                                         \
	"8:\n\t"                                                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r1, [%[cache], %[count]]\n\t"                                   \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_STACK_PUSH_MANY_IN PCPU__ARM_CACHE_OPERANDS, [src] "r"(src), [k] "r"((int32_t)k)
#define PCPU__ARCH_STACK_PUSH_MANY_CLOBBERS "r1", "r2", PCPU__ARM_CLOBBERS

/* pop k: pcpu_rseq_stack_pop_many */
#define PCPU__ARCH_STACK_POP_MANY_ASM                                        \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CACHE_CHECKS                                               \
	"ldr r2, [%[cache], %[count]]\n\t"                                   \
	PCPU__SPLIT                                                          \
	"subs r2, r2, %[k]\n\t"                                              \
	"blt %l[unfit]\n\t"                                                  \
	"add r12, %[cache], r2, lsl #2\n\t"                                  \
	"add r12, r12, %[ptrs]\n\t"                                          \
	"mov r0, #0\n\t"                                                     \
	"cmp r0, %[k]\n\t"                                                   \
	"bge 8f\n\t"                                                         \
	"7:\n\t"                                                             \
	"ldr r1, [r12, r0, lsl #2]\n\t"                                      \
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
#define PCPU__ARCH_STACK_POP_MANY_IN PCPU__ARM_CACHE_OPERANDS, [dst] "r"(dst), [k] "r"((int32_t)k)
#define PCPU__ARCH_STACK_POP_MANY_CLOBBERS "r1", "r2", PCPU__ARM_CLOBBERS

#endif /* PCPU_ARCH_ARM_STACK_H */
