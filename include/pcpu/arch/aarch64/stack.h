/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/aarch64/stack.h
 * The per-CPU stack's four sections for aarch64 (pop one, push one, push k,
 * pop k: pcpu/arch/pseudocode.h states them; pcpu/arch/common.h makes
 * their functions from this assembly). The layout is struct
 * pcpu_rseq_stack's, as the offsets PCPU__STACK_OFF_{GATE,COUNT,CAP,PTRS}.
 * The offsets are immediates here, so each section needs one register for
 * the stack.
 * Not API; pcpu/arch/common.h includes it.
 */
#ifndef PCPU_ARCH_AARCH64_STACK_H
#define PCPU_ARCH_AARCH64_STACK_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/aarch64/stack.h>"
#endif

/* What every stack section starts with, after arming: the index compare
 * and the gate compare (to the labels `aborted` and `differs`). */
#define PCPU__A64_CACHE_CHECKS                                               \
	PCPU__A64_CMPEQ("%w[expected]")                                      \
	"ldr x14, [%[cache], %[mode]]\n\t"                                   \
	PCPU__SPLIT                                                          \
	"cbnz x14, %l[differs]\n\t"

/* Their common operands: the rseq operands, the slot, the cache, and the
 * layout's offsets (each section uses those it needs). */
#define PCPU__A64_CACHE_OPERANDS                                             \
	PCPU__A64_G_OPERANDS, [expected] "r"(expected), [cache] "r"(cache),  \
	[mode] "n"(PCPU__STACK_OFF_GATE), [count] "n"(PCPU__STACK_OFF_COUNT), \
	[cap] "n"(PCPU__STACK_OFF_CAP), [ptrs] "n"(PCPU__STACK_OFF_PTRS)  \
	PCPU__INJECT_INPUT

/* pop one: pcpu_rseq_stack_pop */
#define PCPU__ARCH_STACK_POP_ASM                                             \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CACHE_CHECKS                                               \
	"ldr x12, [%[cache], %[count]]\n\t"                                  \
	PCPU__SPLIT                                                          \
	"cbz x12, %l[unfit]\n\t"                                             \
	"sub x12, x12, 1\n\t"                                                \
	"add x13, %[cache], x12, lsl 3\n\t"                                  \
	"ldr x13, [x13, %[ptrs]]\n\t"                                        \
	PCPU__SPLIT                                                          \
	"str x13, [%[out]]\n\t"                                              \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str x12, [%[cache], %[count]]\n\t"                                  \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_STACK_POP_IN PCPU__A64_CACHE_OPERANDS, [out] "r"(out)
#define PCPU__ARCH_STACK_POP_CLOBBERS "x12", "x13", "x14", PCPU__A64_CLOBBERS

/* push one: pcpu_rseq_stack_push */
#define PCPU__ARCH_STACK_PUSH_ASM                                            \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CACHE_CHECKS                                               \
	"ldr x12, [%[cache], %[count]]\n\t"                                  \
	"ldr x13, [%[cache], %[cap]]\n\t"                                    \
	PCPU__SPLIT                                                          \
	"cmp x12, x13\n\t"                                                   \
	"b.ge %l[unfit]\n\t"                                                 \
	"add x13, %[cache], x12, lsl 3\n\t"                                  \
	"str %[p], [x13, %[ptrs]]\n\t"                                       \
	"add x12, x12, 1\n\t"                                                \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str x12, [%[cache], %[count]]\n\t"                                  \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_STACK_PUSH_IN PCPU__A64_CACHE_OPERANDS, [p] "r"(p)
#define PCPU__ARCH_STACK_PUSH_CLOBBERS "x12", "x13", "x14", PCPU__A64_CLOBBERS

/* push k: pcpu_rseq_stack_push_many. The copy is a loop of
 * 8-byte moves inside the section (a preemption in the middle restarts it
 * all). */
#define PCPU__ARCH_STACK_PUSH_MANY_ASM                                           \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CACHE_CHECKS                                               \
	"ldr x12, [%[cache], %[count]]\n\t"                                  \
	"ldr x13, [%[cache], %[cap]]\n\t"                                    \
	PCPU__SPLIT                                                          \
	"add x11, x12, %[k]\n\t"                                             \
	"cmp x11, x13\n\t"                                                   \
	"b.gt %l[unfit]\n\t"                                                 \
	"add x13, %[cache], x12, lsl 3\n\t"                                  \
	"add x13, x13, %[ptrs]\n\t"                                          \
	"mov x10, 0\n\t"                                                     \
	"cmp x10, %[k]\n\t"                                                  \
	"b.ge 8f\n\t"                                                        \
	"7:\n\t"                                                             \
	"ldr x9, [%[src], x10, lsl 3]\n\t"                                   \
	PCPU__SPLIT                                                          \
	"str x9, [x13, x10, lsl 3]\n\t"                                      \
	"add x10, x10, 1\n\t"                                                \
	"cmp x10, %[k]\n\t"                                                  \
	"b.lt 7b\n\t"                                                        \
	"8:\n\t"                                                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str x11, [%[cache], %[count]]\n\t"                                  \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_STACK_PUSH_MANY_IN PCPU__A64_CACHE_OPERANDS, [src] "r"(src), [k] "r"(k)
#define PCPU__ARCH_STACK_PUSH_MANY_CLOBBERS                                      \
	"x9", "x10", "x11", "x12", "x13", "x14", PCPU__A64_CLOBBERS

/* pop k: pcpu_rseq_stack_pop_many */
#define PCPU__ARCH_STACK_POP_MANY_ASM                                            \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CACHE_CHECKS                                               \
	"ldr x12, [%[cache], %[count]]\n\t"                                  \
	PCPU__SPLIT                                                          \
	"subs x12, x12, %[k]\n\t"                                            \
	"b.lt %l[unfit]\n\t"                                                 \
	"add x13, %[cache], x12, lsl 3\n\t"                                  \
	"add x13, x13, %[ptrs]\n\t"                                          \
	"mov x10, 0\n\t"                                                     \
	"cmp x10, %[k]\n\t"                                                  \
	"b.ge 8f\n\t"                                                        \
	"7:\n\t"                                                             \
	"ldr x9, [x13, x10, lsl 3]\n\t"                                      \
	PCPU__SPLIT                                                          \
	"str x9, [%[dst], x10, lsl 3]\n\t"                                   \
	"add x10, x10, 1\n\t"                                                \
	"cmp x10, %[k]\n\t"                                                  \
	"b.lt 7b\n\t"                                                        \
	"8:\n\t"                                                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str x12, [%[cache], %[count]]\n\t"                                  \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_STACK_POP_MANY_IN PCPU__A64_CACHE_OPERANDS, [dst] "r"(dst), [k] "r"(k)
#define PCPU__ARCH_STACK_POP_MANY_CLOBBERS "x9", "x10", "x12", "x13", "x14", PCPU__A64_CLOBBERS

#endif /* PCPU_ARCH_AARCH64_STACK_H */
