/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/x86_64.h
 * pcpu's rseq critical sections for x86-64: each operation of
 * pcpu/arch/pseudocode.h, which states what it does. Not API; include
 * <pcpu/arch.h>.
 *
 * The ABI. Each section's descriptor is emitted into __rseq_cs
 * (pcpu/arch/common.h, PCPU__RSEQ_DESCRIPTOR); arming stores its address,
 * taken %rip-relative, into the thread's rseq_cs field. The abort handler
 * lies out of line, in the section __rseq_failure, after the signature
 * 0x53053053 (glibc's RSEQ_SIG for x86): the four bytes are the
 * displacement of a `ud1` instruction (0f b9 3d), so a stray jump into them
 * traps.
 *
 * Operands are %fs-relative: the thread's struct rseq is at a fixed offset
 * from the thread pointer (pcpu__g, set once per process), so a section
 * addresses `%fs:offset` directly and never loads the thread pointer.
 *
 * Why an unlocked `addq` is a correct commit: only threads that read the
 * same slot index in their area write a slot's word, the kernel guarantees
 * at most one such thread runs a section at a time (the index is its CPU,
 * or its mm_cid, unique among the mm's running threads), and an interrupt
 * lands between instructions, never inside the read-modify-write.
 *
 * One form for every compiler: asm goto without outputs (gcc >= 4.5, clang
 * >= 9). Scratch values live in fixed registers named as clobbers: %rax
 * arms, %rdx holds the index (or a count), %ecx is PCPU_TEST_INJECT's
 * spin. Where the index is both compared and used as an address, the
 * operation loads it itself, just before arming, into %rdx: the compare
 * takes it whole and the shift then turns it into the slot's offset in
 * place, the hand-written minimal add's shape with no copy of the index
 * (an output operand of the asm goto, gcc/clang >= 11, would be the only
 * other way to let the compiler see the register change).
 */
#ifndef PCPU_ARCH_X86_64_H
#define PCPU_ARCH_X86_64_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/x86_64.h>"
#endif

#include <stdint.h>

/* The target, for tests and tools: its name (as the emulated-machine
 * scripts call it) and its seccomp audit architecture (a name from
 * <linux/audit.h>, expanded only where that header is included). */
#define PCPU_ARCH_NAME "x86_64"
#define PCPU__ARCH_AUDIT AUDIT_ARCH_X86_64

/* What the tests need to read this target's machine code
 * (tests/arch_headers.py reads these lines as text, for
 * tests/check_rseq_sections.py, bench/loop_insns.py and scripts/vm):
 * its ELF e_machine and class, the Debian triplet of its cross tools, the
 * relative relocation's name, what starts a comment in objdump's output,
 * and which instructions store to memory, load from it, call, branch
 * (direct, with a target) and jump (unconditionally) -- Python regular
 * expressions, without backslashes, matched against objdump's
 * "mnemonic operands" (AT&T syntax here: the destination is last). */
#define PCPU__ARCH_ELF_MACHINE 62
#define PCPU__ARCH_ELF_CLASS 64
#define PCPU__ARCH_CROSS "x86_64-linux-gnu"
#define PCPU__ARCH_RELATIVE_RELOC "R_X86_64_RELATIVE"
#define PCPU__ARCH_ASM_COMMENT "#"
#define PCPU__ARCH_INSN_STORE "^(?!j|set|(cmp|test|bt|nop|ud1|ud2|prefetcht0|prefetchnta)[bwlq]? )[^ ]+ (.*[, ])?([*]?(%[a-z]s:)?-?(0x)?[0-9a-f]*[(][^()]*[)]|%[fg]s:[^,]*)$"
#define PCPU__ARCH_INSN_LOAD "^(?!lea|nop)(?!mov[^ ]* (?![^,]*%fs:)[^,(]*(,|$))[^ ]+ .*[(]"
#define PCPU__ARCH_INSN_CALL "^(call[^ ]*|syscall|int|sysenter)( |$)"
#define PCPU__ARCH_INSN_BRANCH "^j"
#define PCPU__ARCH_INSN_JUMP "^jmpq?( |$)"

/* ---- not sections: what the subjects' code asks of the target ----------------
 * (also in a fallback build; pcpu/arch/generic.h has the portable versions) */

/* A spin-wait hint (src/stats/group.c's waits). */
#define pcpu__arch_cpu_relax() __builtin_ia32_pause()

/* Whether a copy of a 64-bit word may be made 32 bits at a time (the
 * kernel's copy of a segment file, a pread(): src/core/core.h, "torn
 * copies"): no. The kernel copies 64 bits at a time, under the x32 ABI
 * (32-bit pointers) too. */
#ifndef PCPU__TORN64 /* a build may say otherwise: tests/segment's 32-bit reader */
#define PCPU__TORN64 0
#endif

/* One step of the histogram's branch-free binary search
 * (pcpu__histogram_search): base + half if base[half - 1] < v, else base.
 * gcc 12 turns the C form into a conditional branch, which mispredicts half
 * the time on random values: a compare and cmov in asm. */
__attribute__((always_inline)) static inline const int64_t *
pcpu__arch_search_step(const int64_t *base, size_t half, int64_t v)
{
	const int64_t *next = base + half;

	__asm__("cmpq %[v], %[b]\n\t"
		"cmovl %[next], %[base]"
		: [base] "+r"(base)
		: [b] "m"(base[half - 1]), [v] "r"(v), [next] "r"(next)
		: "cc");
	return base;
}
#define pcpu__arch_search_step pcpu__arch_search_step

/* The log-linear histogram's exponent of t > 0 (pcpu__histogram_loglin):
 * its top bit's index. Without LZCNT (not baseline) it is read from the
 * exponent of (double)t: the int-to-double conversion is SSE2, and on the
 * AMD Zen 4 this was measured on a lookup loop took 1.9 ns with it against
 * 2.8-3.7 with `bsr`. Above 2^53 the conversion rounds, and in any rounding
 * mode may round t up to 2^(e+1), never below 2^e: the result is then one
 * more, which pcpu__histogram_loglin()'s formula absorbs (pcpu/histogram.h
 * says why). */
#ifndef __LZCNT__
__attribute__((always_inline)) static inline unsigned pcpu__arch_loglin_exponent(uint64_t t)
{
	double d = (double)(int64_t)t;
	uint64_t bits;

	__builtin_memcpy(&bits, &d, sizeof bits);
	return (unsigned)(bits >> 52) - 1023u;
}
#define pcpu__arch_loglin_exponent pcpu__arch_loglin_exponent
#endif

#if PCPU__ARCH_SECTIONS

#define PCPU_ARCH_HAVE_RSEQ 1

/* glibc's RSEQ_SIG for x86 (sysdeps/unix/sysv/linux/x86/bits/rseq.h). */
#define PCPU__RSEQ_SIG 0x53053053

/* The per-CPU stack's sections (pcpu/arch/common.h includes them). */
#define PCPU__ARCH_STACK_H "x86_64/stack.h"

/* The x86-64 TLS ABI keeps the thread pointer at %fs:0. Slow paths only;
 * the sections address the area %fs-relative. Not volatile: it is constant
 * for a thread, so the compiler may reuse it. */
static inline char *pcpu__arch_thread_pointer(void)
{
	char *tp;
	__asm__("movq %%fs:0, %0" : "=r"(tp));
	return tp;
}
#define pcpu__arch_thread_pointer pcpu__arch_thread_pointer

/* ---- building blocks --------------------------------------------------------- */

#ifdef PCPU_TEST_INJECT
/* The spin count is an operand (PCPU__INJECT_INPUT), so that the compiler
 * addresses it as the code needs (through the GOT in a shared library). */
#define PCPU__INJECT_ASM                                                     \
	"movl %[inject_spin], %%ecx\n\t"                                      \
	"testl %%ecx, %%ecx\n\t"                                             \
	"jz 6f\n\t"                                                          \
	"5:\n\t"                                                             \
	"decl %%ecx\n\t"                                                     \
	"jnz 5b\n\t"                                                         \
	"6:\n\t"
#define PCPU__INJECT_INPUT , [inject_spin] "m"(pcpu__test_inject_spin)
#define PCPU__INJECT_CLOBBER , "rcx"
#endif

/* The idx16 operations' index read, before arming: from the field, or in
 * test builds from the value read in C before the hook
 * (PCPU__INJECT_BEFORE_IDX16, pcpu/arch/common.h). */
#ifdef PCPU_TEST_INJECT
#define PCPU__X86_LOAD_IDX16 "movq %[idx16], %%rdx\n\t"
#else
#define PCPU__X86_LOAD_IDX16 "movzwl %%fs:(%[idxoff]), %%edx\n\t"
#endif

/* PCPU_TEST_SPLIT_BLOCKS' branch to the next instruction. */
#define PCPU__ARCH_SPLIT_BRANCH "jmp"

/* The descriptor (label 3), then arming: rseq_cs = &descriptor, through
 * %rax. The section starts at label 1, after it. */
#define PCPU__X86_ARM(cs_operand)                                            \
	PCPU__RSEQ_DESCRIPTOR                                                \
	"leaq 3b(%%rip), %%rax\n\t"                                          \
	"movq %%rax, %%fs:(" cs_operand ")\n\t"

/* The abort handler: the signature, label 4 (abort_ip), a jump to the asm
 * goto label `label`. Out of line, so the straight path has no jump over
 * it. */
#define PCPU__X86_ABORT_TO(label)                                            \
	".pushsection __rseq_failure, \"ax" PCPU__RSEQ_IN_GROUP "\"\n\t"     \
	".byte 0x0f, 0xb9, 0x3d\n\t"                                         \
	".long " PCPU__XSTR(PCPU__RSEQ_SIG) "\n\t"                           \
	"4:\n\t"                                                             \
	"jmp %l[" label "]\n\t"                                              \
	".popsection\n\t"

/* The index compare every section but loadidx's starts with: leave for
 * `aborted` unless the thread's index is still `reg` (32 bits). */
#define PCPU__X86_CMPEQ(reg, idxoff_operand)                                 \
	"1:\n\t"                                                             \
	"cmpl " reg ", %%fs:(" idxoff_operand ")\n\t"                         \
	"jnz %l[aborted]\n\t"                                                \
	PCPU__SPLIT

/* The rseq offsets, as every section but cmpeq_addv_at takes them. */
#define PCPU__X86_OFFSETS(idxname)                                           \
	[cs] "r"((intptr_t)pcpu__g.cs_tpoff), [idxname] "r"((intptr_t)pcpu__g.index_tpoff)

/* ---- the index ------------------------------------------------------------------ */

/* movslq sign-extends the index as it loads it, so it can index memory
 * without another instruction; movzwl zero-extends the low 16 bits. */
#define PCPU__ARCH_INDEX_T int64_t
#define PCPU__ARCH_INDEX16_T int64_t
#define PCPU__ARCH_LOAD_INDEX "movslq %%fs:(%[off]), %[idx]"
#define PCPU__ARCH_LOAD_INDEX16 "movzwl %%fs:(%[off]), %k[idx]"
#define PCPU__ARCH_TLS_IN(offset_) [off] "r"(offset_)

/* ---- sections ------------------------------------------------------------------- */

/*
 * rseq_cmpeq_addv_at: if (index != expected) abort; *p += v;
 *
 * GCC reloads a value it knows to be a load from pcpu__g before each
 * section rather than keep it in a register; pcpu_counter_add_many()'s
 * empty asm on its copies of the offsets hides that, and its loop then runs
 * the hand-written ideal's five instructions per section (bench/README.md).
 * Why an unlocked `addq` is a correct commit: see the top of this file.
 */
#define PCPU__ARCH_LOAD_ADD_STORE_AT_ASM                                         \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CMPEQ("%k[expected]", "%[idx]")                             \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"addq %[v], %[target]\n\t"                                           \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_ADD_STORE_AT_IN                                          \
	[cs] "r"(csoff), [idx] "r"(idxoff), [expected] "r"(expected),        \
	[target] "m"(*p), [v] "er"(v) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_ADD_STORE_AT_CLOBBERS "memory", "cc", "rax" PCPU__INJECT_CLOBBER

/*
 * rseq_idx16_cmpeq_addv_indexed: the counter add.
 *   movzwl index, %edx;  arm;  1: cmpl %edx, index;  jnz aborted;
 *   shlq $PCPU_SLOT_STRIDE_SHIFT, %rdx;  0: addq v, (base, %rdx);  2:
 * The hand-written minimal add (bench/incr.c, IDEAL_ADD), instruction for
 * instruction. An unregistered area's index (-1, -2) reads 0xffff or
 * 0xfffe, which the compare finds unequal to the field's 32 bits: it
 * leaves for the slow path with no sign test of its own. A sign test
 * costs a third branch per add: measured 1.02-1.05x the minimal add on an
 * AMD Zen 4 and 1.23-1.27x on a Zen 5, where the loop of adds is bound by
 * its branches (bench/README.md, paired incr). The arming store made first
 * is harmless on an unregistered area: the kernel does not read it.
 */
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_ASM                                            \
	PCPU__X86_LOAD_IDX16                                                 \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CMPEQ("%%edx", "%[idxoff]")                                 \
	"shlq %[shift], %%rdx\n\t"                                           \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"addq %[v], (%[base], %%rdx)\n\t"                                    \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_IN                                             \
	PCPU__X86_OFFSETS(idxoff), [base] "r"(base), [v] "er"(v),            \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__IDX16_INPUT PCPU__INJECT_INPUT
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_CLOBBERS "memory", "cc", "rax", "rdx" PCPU__INJECT_CLOBBER

/*
 * rseq_idx16_cmpeq_add2v_indexed: the histogram's pair.
 * (a, b) go into %xmm15 straight from the general registers (left to
 * itself, gcc 12 builds the vector through a stack slot), the pair is
 * added to it with `paddq`, and one `movdqa` stores both words: the
 * commit. `base` must be 16-byte aligned (movdqa faults otherwise; an
 * aligned pair never straddles a cache line). SSE2 is part of x86-64.
 */
#define PCPU__ARCH_THIS_ADD2_ASM                                           \
	"movq %[a], %%xmm15\n\t"                                             \
	"movq %[b], %%xmm14\n\t"                                             \
	"punpcklqdq %%xmm14, %%xmm15\n\t"                                    \
	PCPU__X86_LOAD_IDX16                                                 \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CMPEQ("%%edx", "%[idxoff]")                                 \
	"shlq %[shift], %%rdx\n\t"                                           \
	"paddq (%[base], %%rdx), %%xmm15\n\t"                                \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"movdqa %%xmm15, (%[base], %%rdx)\n\t"                               \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_ADD2_IN                                            \
	PCPU__X86_OFFSETS(idxoff), [base] "r"(base), [a] "r"(a), [b] "r"(b), \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__IDX16_INPUT PCPU__INJECT_INPUT
#define PCPU__ARCH_THIS_ADD2_CLOBBERS                                      \
	"memory", "cc", "rax", "rdx", "xmm14", "xmm15" PCPU__INJECT_CLOBBER

/* rseq_cmpeq_cmpeqv_storev: if (index != expected) abort;
 * if (*p != expect) return DIFFERS; *p = newv. */
#define PCPU__ARCH_LOAD_CBNE_STORE_ASM                                          \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CMPEQ("%k[expected]", "%[idx]")                             \
	"cmpq %[expect], %[target]\n\t"                                      \
	"jnz %l[differs]\n\t"                                                \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"movq %[newv], %[target]\n\t"                                        \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_STORE_IN                                           \
	PCPU__X86_OFFSETS(idx), [expected] "r"(expected), [target] "m"(*p),  \
	[expect] "r"(expect), [newv] "r"(newv) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_STORE_CLOBBERS "memory", "cc", "rax" PCPU__INJECT_CLOBBER

/*
 * rseq_loadidx_cmpeqv_addv: the index is read inside the section, so no
 * separate compare is needed (a thread that moves after the load is
 * restarted before the commit), as in tcmalloc's per-CPU caches. An
 * unregistered area reads a negative index and leaves before anything is
 * written. Test builds widen the section between the compare and the
 * commit, the window that matters.
 */
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_ASM                                          \
	PCPU__X86_ARM("%[cs]")                                               \
	"1:\n\t"                                                             \
	"movslq %%fs:(%[idx]), %%rdx\n\t"                                    \
	PCPU__SPLIT                                                          \
	"testq %%rdx, %%rdx\n\t"                                             \
	"js %l[unregistered]\n\t"                                            \
	"shlq %[shift], %%rdx\n\t"                                           \
	"cmpq %[expect], (%[vbase], %%rdx)\n\t"                              \
	"jnz %l[differs]\n\t"                                                \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"addq %[add], (%[base], %%rdx)\n\t"                                  \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_IN                                           \
	PCPU__X86_OFFSETS(idx), [base] "r"(base), [vbase] "r"((char *)base + v_off), \
	[expect] "er"(expect), [add] "er"(add),                              \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CLOBBERS "memory", "cc", "rax", "rdx" PCPU__INJECT_CLOBBER

/* load_cbne_store_store: if (index != expected) abort;
 * if (*p != expect) return DIFFERS; *p2 = newv2; *p = newv. */
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_ASM                                 \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CMPEQ("%k[expected]", "%[idx]")                             \
	"cmpq %[expect], %[target]\n\t"                                      \
	"jnz %l[differs]\n\t"                                                \
	PCPU__SPLIT                                                          \
	"movq %[newv2], %[target2]\n\t"                                      \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"movq %[newv], %[target]\n\t"                                        \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_IN                                  \
	PCPU__X86_OFFSETS(idx), [expected] "r"(expected), [target] "m"(*p),  \
	[target2] "m"(*p2), [expect] "er"(expect), [newv2] "er"(newv2),      \
	[newv] "er"(newv) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_CLOBBERS "memory", "cc", "rax" PCPU__INJECT_CLOBBER

/*
 * this_load_add_cbmask_store: the hierarchical counter's add, the counter
 * add's shape with the word loaded, the sum built in %r8, and the bits it
 * changes tested against the slot's mask (the next word) before the store:
 *   ... cmpl; jnz aborted; shlq;  movq (base, %rdx), %rax;
 *   leaq (%rax, v), %r8;  xorq %r8, %rax;  andq 8(base, %rdx), %rax;
 *   jnz unfit;  0: movq %r8, (base, %rdx);  2:
 */
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_ASM                            \
	PCPU__X86_LOAD_IDX16                                                 \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CMPEQ("%%edx", "%[idxoff]")                                 \
	"shlq %[shift], %%rdx\n\t"                                           \
	"movq (%[base], %%rdx), %%rax\n\t"                                   \
	PCPU__SPLIT                                                          \
	"leaq (%%rax, %[v]), %%r8\n\t"                                       \
	"xorq %%r8, %%rax\n\t"                                               \
	"andq 8(%[base], %%rdx), %%rax\n\t"                                  \
	"jnz %l[unfit]\n\t"                                                  \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"movq %%r8, (%[base], %%rdx)\n\t"                                    \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_IN                             \
	PCPU__X86_OFFSETS(idxoff), [base] "r"(base), [v] "r"(v),             \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__IDX16_INPUT PCPU__INJECT_INPUT
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CLOBBERS                       \
	"memory", "cc", "rax", "rdx", "r8" PCPU__INJECT_CLOBBER

/* load_cbne_load_store_add_store: if (index != expected) abort;
 * if (p[1] != gexpect) return DIFFERS; *oldp = p[0]; p[0] += v. */
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_ASM                        \
	PCPU__X86_ARM("%[cs]")                                               \
	PCPU__X86_CMPEQ("%k[expected]", "%[idx]")                             \
	"cmpq %[gexpect], 8(%[p])\n\t"                                       \
	"jnz %l[differs]\n\t"                                                \
	PCPU__SPLIT                                                          \
	"movq (%[p]), %%rdx\n\t"                                             \
	"movq %%rdx, (%[oldp])\n\t"                                          \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"addq %[v], (%[p])\n\t"                                              \
	"2:\n\t"                                                             \
	PCPU__X86_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_IN                         \
	PCPU__X86_OFFSETS(idx), [expected] "r"(expected), [p] "r"(p),        \
	[gexpect] "r"(gexpect), [oldp] "r"(oldp), [v] "er"(v) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CLOBBERS                   \
	"memory", "cc", "rax", "rdx" PCPU__INJECT_CLOBBER

/* ---- owned slots (pcpu/worker.h) ------------------------------------------------ */

/* owned_add(p, v): *p += v by the word's only writer, no section. One
 * unlocked `addq` to memory, the instruction DPDK's Per Core update
 * compiles to: a reader sees the old or the new word (an aligned 8-byte
 * store), and a signal handler of the same thread lands before or after it,
 * so its own owned add to the word is not lost. */
#define PCPU_OWNED_ADD_SIGNAL_SAFE 1
static inline void pcpu__owned_add(int64_t *p, int64_t v)
{
	/* The address as one register, not base + index: AMD Zen 2 and later
	 * then forward a store to the next add of the same word without the
	 * store-to-load latency (memory renaming, which takes base-only
	 * addresses), as Per Core's updates of its struct get; the indexed
	 * form measured 1.9x a thread-private `+=` in a loop of adds to one
	 * counter (bench/README.md, "Owned slots for pinned workers"). */
	__asm__ volatile("addq %2, (%1)" : "+m"(*p) : "r"(p), "er"(v) : "cc");
}
#define pcpu__owned_add pcpu__owned_add

#endif /* PCPU__ARCH_SECTIONS */

#endif /* PCPU_ARCH_X86_64_H */
