/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/x86_64.h
 * The rseq critical sections of pcpu for x86-64. Not API; include
 * <pcpu/arch.h>.
 *
 * A critical section (kernel ABI, linux/rseq.h) is described by a 32-byte
 * aligned struct rseq_cs { u32 version; u32 flags; u64 start_ip;
 * u64 post_commit_offset; u64 abort_ip; }, emitted here into the section
 * __rseq_cs. Before entering, the thread stores the descriptor's address in
 * its struct rseq's rseq_cs field. If the thread is preempted, migrated or
 * signalled while its instruction pointer is in [start_ip, start_ip +
 * post_commit_offset), the kernel moves it to abort_ip instead of resuming,
 * so the section either runs start to end on one CPU, uninterrupted, or its
 * last instruction (the commit) never executes.
 *
 * The four bytes before abort_ip must equal the signature the thread's rseq
 * area was registered with (0x53053053 on x86, glibc's and pcpu's). They are
 * the displacement of a `ud1` instruction, so a stray jump into them traps.
 *
 * Why an unlocked `addq` is a correct commit: only threads that read the same
 * slot index in their area write a slot's word, the kernel guarantees at most
 * one such thread runs a section at a time (the index is its CPU, or its
 * mm_cid, unique among the mm's running threads), and an interrupt lands
 * between instructions, never inside the read-modify-write.
 */
#ifndef PCPU_ARCH_X86_64_H
#define PCPU_ARCH_X86_64_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/x86_64.h>"
#endif

#include <stdint.h>

#define PCPU_ARCH_HAVE_RSEQ 1
#define PCPU__RSEQ_SIG 0x53053053

/* The x86-64 TLS ABI keeps the thread pointer at %fs:0. Not volatile: it is
 * constant for a thread, so the compiler may reuse it. */
static inline char *pcpu__arch_thread_pointer(void)
{
	char *tp;
	__asm__("movq %%fs:0, %0" : "=r"(tp));
	return tp;
}

/* Descriptor for a section that starts at local label 1, commits with the
 * instruction ending at label 2, and aborts to label 4 (signature before). */
#define PCPU__X86_RSEQ_CS_DESCRIPTOR                                         \
	".pushsection __rseq_cs, \"aw\"\n\t"                                 \
	".balign 32\n\t"                                                     \
	"3:\n\t"                                                             \
	".long 0x0, 0x0\n\t"                                                 \
	".quad 1f, (2f - 1f), 4f\n\t"                                        \
	".popsection\n\t"                                                    \
	"leaq 3b(%%rip), %%rax\n\t"                                          \
	"movq %%rax, %[cs]\n\t"

#define PCPU__X86_RSEQ_ABORT_TO(label)                                       \
	".pushsection __rseq_failure, \"ax\"\n\t"                            \
	".byte 0x0f, 0xb9, 0x3d\n\t"                                         \
	".long 0x53053053\n\t"                                               \
	"4:\n\t"                                                             \
	"jmp %l[" label "]\n\t"                                              \
	".popsection\n\t"

/*
 * if (area->index_field != expected) abort; *p += v;   (commit: the add)
 *
 * area: this thread's struct rseq; idx_off: offset of the index field
 * (cpu_id or mm_cid). Returns 0 once the add is committed, 1 if the section
 * aborted or the thread is no longer on slot `expected` (nothing written).
 */
static inline int pcpu__rseq_addv(char *area, uint32_t idx_off,
				  int32_t expected, int64_t *p, int64_t v)
{
	__asm__ goto(PCPU__X86_RSEQ_CS_DESCRIPTOR
		     "1:\n\t"
		     "cmpl %[expected], %[idx]\n\t"
		     "jnz %l[aborted]\n\t"
		     "addq %[v], %[target]\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     : /* asm goto has no outputs */
		     : [cs] "m"(*(uint64_t *)(area + 8)),
		       [idx] "m"(*(int32_t *)(area + idx_off)),
		       [expected] "r"(expected), [target] "m"(*p), [v] "er"(v)
		     : "memory", "cc", "rax"
		     : aborted);
	return 0;
aborted:
	return 1;
}

/*
 * if (area->index_field != expected) abort;
 * if (*p != expect) return 2;
 * *p = newv;                                           (commit: the store)
 *
 * Returns 0 once stored, 1 if aborted or no longer on slot `expected`,
 * 2 if *p did not hold `expect` (nothing written).
 */
static inline int pcpu__rseq_cmpeqv_storev(char *area, uint32_t idx_off,
					   int32_t expected, intptr_t *p,
					   intptr_t expect, intptr_t newv)
{
	__asm__ goto(PCPU__X86_RSEQ_CS_DESCRIPTOR
		     "1:\n\t"
		     "cmpl %[expected], %[idx]\n\t"
		     "jnz %l[aborted]\n\t"
		     "cmpq %[expect], %[target]\n\t"
		     "jnz %l[differs]\n\t"
		     "movq %[newv], %[target]\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     :
		     : [cs] "m"(*(uint64_t *)(area + 8)),
		       [idx] "m"(*(int32_t *)(area + idx_off)),
		       [expected] "r"(expected), [target] "m"(*p),
		       [expect] "r"(expect), [newv] "r"(newv)
		     : "memory", "cc", "rax"
		     : aborted, differs);
	return 0;
aborted:
	return 1;
differs:
	return 2;
}

#endif /* PCPU_ARCH_X86_64_H */
