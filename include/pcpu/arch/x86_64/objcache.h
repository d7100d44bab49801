/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/x86_64/objcache.h
 * The object cache's four sections for x86-64, as the assembly
 * pcpu/arch/objcache.h makes its functions from (it states them). The cache's layout comes from <pcpu/objcache.h> as the offsets
 * PCPU__OBJCACHE_OFF_{MODE,COUNT,CAP,PTRS}, assembler constants here, so
 * each section needs one register for the cache (they must also build at
 * -O0 with a frame pointer). Not API; pcpu/arch/objcache.h includes it.
 */
#ifndef PCPU_ARCH_X86_64_OBJCACHE_H
#define PCPU_ARCH_X86_64_OBJCACHE_H

#ifndef PCPU__OBJCACHE_OFF_PTRS
#error "include <pcpu/objcache.h>, not <pcpu/arch/x86_64/objcache.h>"
#endif

/* What every cache section starts with, after arming: the index compare
 * and the mode compare (to the labels `aborted` and `differs`). */
#define PCPU__X86_CACHE_CHECKS                                               \
	PCPU__X86_CMPEQ("%k[expected]", "%[idx]")                             \
	"cmpq $0, %c[mode](%[cache])\n\t"                                    \
	"jnz %l[differs]\n\t"                                                \
	PCPU__SPLIT

/* Their common operands: the rseq offsets, the slot, the cache, and the
 * layout's offsets (each section uses those it needs). */
#define PCPU__X86_CACHE_OPERANDS                                             \
	PCPU__X86_OFFSETS(idx), [expected] "r"(expected),                    \
	[cache] "r"(cache), [mode] "n"(PCPU__OBJCACHE_OFF_MODE),              \
	[count] "n"(PCPU__OBJCACHE_OFF_COUNT), [cap] "n"(PCPU__OBJCACHE_OFF_CAP), \
	[ptrs] "n"(PCPU__OBJCACHE_OFF_PTRS)

/* pop one: rseq_cmpeq_cmpeqz_cbz_load_storev */
#define PCPU__ARCH_CACHE_POP_ASM                                             \
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
#define PCPU__ARCH_CACHE_POP_IN PCPU__X86_CACHE_OPERANDS, [out] "r"(out) PCPU__INJECT_INPUT
#define PCPU__ARCH_CACHE_POP_CLOBBERS "memory", "cc", "rax", "rdx", "r8" PCPU__INJECT_CLOBBER

/* push one: rseq_cmpeq_cmpeqz_cbge_store_storev */
#define PCPU__ARCH_CACHE_PUSH_ASM                                            \
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
#define PCPU__ARCH_CACHE_PUSH_IN PCPU__X86_CACHE_OPERANDS, [p] "r"(p) PCPU__INJECT_INPUT
#define PCPU__ARCH_CACHE_PUSH_CLOBBERS "memory", "cc", "rax", "rdx" PCPU__INJECT_CLOBBER

/* push k: rseq_cmpeq_cmpeqz_cbgt_memcpy_storev. The copy is a loop of
 * 8-byte moves inside the section (a preemption in the middle restarts it
 * all). */
#define PCPU__ARCH_CACHE_PUSHK_ASM                                           \
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
#define PCPU__ARCH_CACHE_PUSHK_IN                                            \
	PCPU__X86_CACHE_OPERANDS, [src] "r"(src), [k] "r"(k) PCPU__INJECT_INPUT
#define PCPU__ARCH_CACHE_PUSHK_CLOBBERS                                      \
	"memory", "cc", "rax", "rdx", "r10", "r11" PCPU__INJECT_CLOBBER

/* pop k: rseq_cmpeq_cmpeqz_cblt_memcpy_storev */
#define PCPU__ARCH_CACHE_POPK_ASM                                            \
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
#define PCPU__ARCH_CACHE_POPK_IN                                             \
	PCPU__X86_CACHE_OPERANDS, [dst] "r"(dst), [k] "r"(k) PCPU__INJECT_INPUT
#define PCPU__ARCH_CACHE_POPK_CLOBBERS                                       \
	"memory", "cc", "rax", "rdx", "r8", "r10", "r11" PCPU__INJECT_CLOBBER

#endif /* PCPU_ARCH_X86_64_OBJCACHE_H */
