/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/x86_64/stack.h
 * The per-CPU stack's four sections for x86-64 (pop one, push one, push k,
 * pop k: pcpu/arch/pseudocode.h states them; pcpu/arch/common.h makes
 * their functions from this assembly). The layout is struct
 * pcpu_rseq_stack's, as the offsets PCPU__STACK_OFF_{GATE,COUNT,CAP,PTRS}.
 * The offsets are assembler constants here, so each section needs one
 * register for the stack (they must also build at -O0 with a frame
 * pointer).
 * Not API; pcpu/arch/common.h includes it.
 */
#ifndef PCPU_ARCH_X86_64_STACK_H
#define PCPU_ARCH_X86_64_STACK_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/x86_64/stack.h>"
#endif

/* What every stack section starts with, after arming: the index compare
 * and the gate compare (to the labels `aborted` and `differs`). */
#define PCPU__X86_CACHE_CHECKS                                               \
	PCPU__X86_CMPEQ("%k[expected]", "%[idx]")                             \
	"cmpq $0, %c[mode](%[cache])\n\t"                                    \
	"jnz %l[differs]\n\t"                                                \
	PCPU__SPLIT

/* Their common operands: the rseq offsets, the slot, the cache, and the
 * layout's offsets (each section uses those it needs). */
#define PCPU__X86_CACHE_OPERANDS                                             \
	PCPU__X86_OFFSETS(idx), [expected] "r"(expected),                    \
	[cache] "r"(cache), [mode] "n"(PCPU__STACK_OFF_GATE),              \
	[count] "n"(PCPU__STACK_OFF_COUNT), [cap] "n"(PCPU__STACK_OFF_CAP), \
	[ptrs] "n"(PCPU__STACK_OFF_PTRS)

/* pop one: pcpu_rseq_stack_pop */
#define PCPU__ARCH_STACK_POP_ASM                                             \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CACHE_CHECKS                                               \
	"movq %c[count](%[cache]), %%rdx\n\t"                                \
	PCPU__SPLIT                                                          \
	"testq %%rdx, %%rdx\n\t"                                             \
	"jz %l[unfit]\n\t"                                                   \
	"movq %c[ptrs]-8(%[cache], %%rdx, 8), %%r8\n\t"                      \
	PCPU__SPLIT                                                          \
	"movq %%r8, (%[out])\n\t"                                            \
	"decq %%rdx\n\t"                                                     \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"movq %%rdx, %c[count](%[cache])\n\t"                                \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_STACK_POP_IN PCPU__X86_CACHE_OPERANDS, [out] "r"(out) PCPU__INJECT_INPUT
#define PCPU__ARCH_STACK_POP_CLOBBERS "memory", "cc", "rax", "rdx", "r8" PCPU__INJECT_CLOBBER

/* push one: pcpu_rseq_stack_push */
#define PCPU__ARCH_STACK_PUSH_ASM                                            \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CACHE_CHECKS                                               \
	"movq %c[count](%[cache]), %%rdx\n\t"                                \
	PCPU__SPLIT                                                          \
	"cmpq %c[cap](%[cache]), %%rdx\n\t"                                  \
	"jge %l[unfit]\n\t"                                                  \
	"movq %[p], %c[ptrs](%[cache], %%rdx, 8)\n\t"                        \
	"incq %%rdx\n\t"                                                     \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"movq %%rdx, %c[count](%[cache])\n\t"                                \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_STACK_PUSH_IN PCPU__X86_CACHE_OPERANDS, [p] "r"(p) PCPU__INJECT_INPUT
#define PCPU__ARCH_STACK_PUSH_CLOBBERS "memory", "cc", "rax", "rdx" PCPU__INJECT_CLOBBER

/* push k: pcpu_rseq_stack_push_many. The copy is a loop of
 * 8-byte moves inside the section (a preemption in the middle restarts it
 * all). */
#define PCPU__ARCH_STACK_PUSH_MANY_ASM                                           \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CACHE_CHECKS                                               \
	"movq %c[count](%[cache]), %%rdx\n\t"                                \
	PCPU__SPLIT                                                          \
	"leaq (%%rdx, %[k]), %%r10\n\t"                                      \
	"cmpq %c[cap](%[cache]), %%r10\n\t"                                  \
	"jg %l[unfit]\n\t"                                                   \
	"xorl %%r10d, %%r10d\n\t"                                            \
	"cmpq %[k], %%r10\n\t"                                               \
	"jge 8f\n\t"                                                         \
	"7:\n\t"                                                             \
	"movq (%[src], %%r10, 8), %%r11\n\t"                                 \
	PCPU__SPLIT                                                          \
	"movq %%r11, %c[ptrs](%[cache], %%rdx, 8)\n\t"                       \
	"incq %%rdx\n\t"                                                     \
	"incq %%r10\n\t"                                                     \
	"cmpq %[k], %%r10\n\t"                                               \
	"jl 7b\n\t"                                                          \
	"8:\n\t"                                                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"movq %%rdx, %c[count](%[cache])\n\t"                                \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_STACK_PUSH_MANY_IN                                            \
	PCPU__X86_CACHE_OPERANDS, [src] "r"(src), [k] "r"(k) PCPU__INJECT_INPUT
#define PCPU__ARCH_STACK_PUSH_MANY_CLOBBERS                                      \
	"memory", "cc", "rax", "rdx", "r10", "r11" PCPU__INJECT_CLOBBER

/* pop k: pcpu_rseq_stack_pop_many */
#define PCPU__ARCH_STACK_POP_MANY_ASM                                            \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CACHE_CHECKS                                               \
	"movq %c[count](%[cache]), %%r8\n\t"                                 \
	PCPU__SPLIT                                                          \
	"subq %[k], %%r8\n\t"                                                \
	"jl %l[unfit]\n\t"                                                   \
	"movq %%r8, %%rdx\n\t"                                               \
	"xorl %%r10d, %%r10d\n\t"                                            \
	"cmpq %[k], %%r10\n\t"                                               \
	"jge 8f\n\t"                                                         \
	"7:\n\t"                                                             \
	"movq %c[ptrs](%[cache], %%rdx, 8), %%r11\n\t"                       \
	PCPU__SPLIT                                                          \
	"movq %%r11, (%[dst], %%r10, 8)\n\t"                                 \
	"incq %%rdx\n\t"                                                     \
	"incq %%r10\n\t"                                                     \
	"cmpq %[k], %%r10\n\t"                                               \
	"jl 7b\n\t"                                                          \
	"8:\n\t"                                                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"movq %%r8, %c[count](%[cache])\n\t"                                 \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_STACK_POP_MANY_IN                                             \
	PCPU__X86_CACHE_OPERANDS, [dst] "r"(dst), [k] "r"(k) PCPU__INJECT_INPUT
#define PCPU__ARCH_STACK_POP_MANY_CLOBBERS                                       \
	"memory", "cc", "rax", "rdx", "r8", "r10", "r11" PCPU__INJECT_CLOBBER

#endif /* PCPU_ARCH_X86_64_STACK_H */
