/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/aarch64.h
 * pcpu's rseq critical sections for aarch64 (little-endian): each operation
 * of pcpu/arch/pseudocode.h, which states what it does. Not API; include
 * <pcpu/arch.h>.
 *
 * The ABI. Each section's descriptor is emitted into __rseq_cs
 * (pcpu/arch/common.h, PCPU__RSEQ_DESCRIPTOR); arming stores its address,
 * built with `adrp` + `add :lo12:` (PC-relative, any distance up to 4 GB),
 * into the thread's rseq_cs field. The abort handler lies out of line, in
 * the section __rseq_failure, after the signature 0xd428bc00 (glibc's
 * RSEQ_SIG for aarch64, sysdeps/unix/sysv/linux/aarch64/bits/rseq.h): the
 * encoding of `brk #0x45e0`, emitted with `.inst`, so a stray jump into it
 * traps. Code is little-endian on every aarch64; on a big-endian one the
 * signature as data (what the rseq() call takes) would be byte-swapped,
 * and pcpu does not support it (pcpu/arch.h falls back there).
 *
 * Operands are relative to the thread pointer (tpidr_el0, read with `mrs`
 * by __builtin_thread_pointer(), which the compiler keeps in a register
 * across a loop): aarch64 has no segment-relative addressing, so every
 * access to the struct rseq is `[tp, offset]` with the offset from pcpu__g
 * in a register. glibc >= 2.35 registers its area at __rseq_offset from the
 * same thread pointer (TLS variant I: positive offsets), which src/core/rseq.c
 * reads as on x86-64.
 *
 * Why `ldr`, `add`, `str` is a correct commit: only threads on the same
 * slot write a slot's word, at most one of them runs a section at a time,
 * and the kernel restarts a thread interrupted anywhere before the `str`,
 * so the store of the sum commits only if no other add to the word ran
 * since the load. The kernel takes an interrupt, preemption or signal at
 * an instruction boundary, so a commit must be one instruction: for the
 * histogram's pair it is one `stp` of two registers (see
 * pcpu__rseq_this_add2()).
 *
 * One form for every compiler: asm goto without outputs (gcc >= 4.5, clang
 * >= 9), scratch values in fixed registers named as clobbers (x9-x15, and
 * x8 for PCPU_TEST_INJECT's spin). Added values may be immediates ("rIJ":
 * `add x, x, #1`, and -1 as `sub x, x, #1`). Every section also clobbers x16 and x17:
 * its abort handler lies in another section, and if the linker places it
 * beyond the 128 MB reach of a `b`, it inserts a veneer there, which may
 * use those two registers (the AAPCS64's IP0/IP1). Branches to the C
 * labels reach 1 MB (`b.cond`, `cbz`) or 32 KB (`tbnz`), within a
 * function, as librseq's do.
 */
#ifndef PCPU_ARCH_AARCH64_H
#define PCPU_ARCH_AARCH64_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/aarch64.h>"
#endif

#include <stdint.h>

/* The target, for tests and tools: its name (as the emulated-machine
 * scripts call it) and its seccomp audit architecture (a name from
 * <linux/audit.h>, expanded only where that header is included). */
#define PCPU_ARCH_NAME "aarch64"
#define PCPU__ARCH_AUDIT AUDIT_ARCH_AARCH64

/* What the tests need to read this target's machine code
 * (tests/arch_headers.py; pcpu/arch/x86_64.h says what each is). */
#define PCPU__ARCH_ELF_MACHINE 183
#define PCPU__ARCH_ELF_CLASS 64
#define PCPU__ARCH_CROSS "aarch64-linux-gnu"
#define PCPU__ARCH_RELATIVE_RELOC "R_AARCH64_RELATIVE"
#define PCPU__ARCH_ASM_COMMENT "//"
#define PCPU__ARCH_INSN_STORE "^(st|ld(add|clr|eor|set|smax|smin|umax|umin)|swp|cas)"
#define PCPU__ARCH_INSN_LOAD "^ld"
#define PCPU__ARCH_INSN_CALL "^(bl|blr|blraa|blrab|svc|hvc|smc)( |$)"
#define PCPU__ARCH_INSN_BRANCH "^(b|cbz|cbnz|tbz|tbnz|b[.][^ ]*)( |$)"
#define PCPU__ARCH_INSN_JUMP "^b( |$)"

/* ---- not sections: what the subjects' code asks of the target ----------------
 * (also in a fallback build; pcpu/arch/generic.h has the portable versions) */

/* A spin-wait hint (src/stats/group.c's waits): `yield`. */
#define pcpu__arch_cpu_relax() __asm__ __volatile__("yield" ::: "memory")

/* Whether a copy of a 64-bit word may be made 32 bits at a time (the
 * kernel's copy of a segment file: src/core/core.h, "torn copies"): no. */
#ifndef PCPU__TORN64 /* a build may say otherwise: tests/segment's 32-bit reader */
#define PCPU__TORN64 0
#endif

#if PCPU__ARCH_SECTIONS

#define PCPU_ARCH_HAVE_RSEQ 1

/* glibc's RSEQ_SIG for aarch64 (little-endian): `brk #0x45e0`. */
#define PCPU__RSEQ_SIG 0xd428bc00

/* The per-CPU stack's sections (pcpu/arch/common.h includes them). */
#define PCPU__ARCH_STACK_H "aarch64/stack.h"

/* tpidr_el0. Not volatile: constant for a thread, so the compiler may
 * reuse it (and does, across a loop of sections). */
static inline char *pcpu__arch_thread_pointer(void)
{
	return (char *)__builtin_thread_pointer();
}
#define pcpu__arch_thread_pointer pcpu__arch_thread_pointer

/* ---- building blocks --------------------------------------------------------- */

#ifdef PCPU_TEST_INJECT
#define PCPU__INJECT_ASM                                                     \
	"cbz %w[inject_spin], 6f\n\t"                                        \
	"mov w8, %w[inject_spin]\n\t"                                        \
	"5:\n\t"                                                             \
	"subs w8, w8, 1\n\t"                                                 \
	"b.ne 5b\n\t"                                                        \
	"6:\n\t"
#define PCPU__INJECT_INPUT , [inject_spin] "r"(pcpu__test_inject_spin)
#define PCPU__INJECT_CLOBBER , "x8"
#endif

/* The idx16 operations' index read, before arming: from the field, or in
 * test builds from the value read in C before the hook
 * (PCPU__INJECT_BEFORE_IDX16, pcpu/arch/common.h). */
#ifdef PCPU_TEST_INJECT
#define PCPU__A64_LOAD_IDX16 "mov x13, %[idx16]\n\t"
#else
#define PCPU__A64_LOAD_IDX16 "ldrh w13, [%[tp], %[idx]]\n\t"
#endif

/* PCPU_TEST_SPLIT_BLOCKS' branch to the next instruction. */
#define PCPU__ARCH_SPLIT_BRANCH "b"

/* What every section clobbers besides its own scratch registers. */
#define PCPU__A64_CLOBBERS "memory", "cc", "x15", "x16", "x17" PCPU__INJECT_CLOBBER

/* The descriptor (label 3), then arming: rseq_cs = &descriptor, through
 * x15. The section starts at label 1, after it. */
#define PCPU__A64_ARM                                                        \
	PCPU__RSEQ_DESCRIPTOR                                                \
	"adrp x15, 3b\n\t"                                                   \
	"add x15, x15, :lo12:3b\n\t"                                         \
	"str x15, [%[tp], %[cs]]\n\t"

/* The abort handler: the signature, label 4 (abort_ip), a branch to the
 * asm goto label `label`. Out of line, so the straight path has no branch
 * over it (librseq's aarch64 sections have one). */
#define PCPU__A64_ABORT_TO(label)                                            \
	".pushsection __rseq_failure, \"ax" PCPU__RSEQ_IN_GROUP "\"\n\t"     \
	".balign 4\n\t"                                                      \
	".inst " PCPU__XSTR(PCPU__RSEQ_SIG) "\n\t"                           \
	"4:\n\t"                                                             \
	"b %l[" label "]\n\t"                                                \
	".popsection\n\t"

/* The index compare every section but loadidx's starts with: leave for
 * `aborted` unless the thread's index is still `wreg` (32 bits). */
#define PCPU__A64_CMPEQ(wreg)                                                \
	"1:\n\t"                                                             \
	"ldr w15, [%[tp], %[idx]]\n\t"                                       \
	"cmp w15, " wreg "\n\t"                                              \
	"b.ne %l[aborted]\n\t"                                               \
	PCPU__SPLIT

/* The operands every section has: the thread pointer and the two offsets. */
#define PCPU__A64_RSEQ_OPERANDS(csoff, idxoff)                               \
	[tp] "r"(pcpu__arch_thread_pointer()), [cs] "r"(csoff), [idx] "r"(idxoff)
#define PCPU__A64_G_OPERANDS                                                 \
	PCPU__A64_RSEQ_OPERANDS((intptr_t)pcpu__g.cs_tpoff, (intptr_t)pcpu__g.index_tpoff)

/* ---- the index ------------------------------------------------------------------ */

/* ldrsw sign-extends the index as it loads it; ldrh loads the low half
 * (at the field's address, little-endian), zero-extended. */
#define PCPU__ARCH_INDEX_T int64_t
#define PCPU__ARCH_INDEX16_T int64_t
#define PCPU__ARCH_LOAD_INDEX "ldrsw %[idx], [%[tp], %[off]]"
#define PCPU__ARCH_LOAD_INDEX16 "ldrh %w[idx], [%[tp], %[off]]"
#define PCPU__ARCH_TLS_IN(offset_) [tp] "r"(pcpu__arch_thread_pointer()), [off] "r"(offset_)

/* ---- sections ------------------------------------------------------------------- */

/* rseq_cmpeq_addv_at: if (index != expected) abort; *p += v;
 * (ldr, add, str: the str commits). */
#define PCPU__ARCH_LOAD_ADD_STORE_AT_ASM                                         \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CMPEQ("%w[expected]")                                      \
	"ldr x14, [%[p]]\n\t"                                                \
	PCPU__SPLIT                                                          \
	"add x14, x14, %[v]\n\t"                                             \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str x14, [%[p]]\n\t"                                                \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_ADD_STORE_AT_IN                                          \
	PCPU__A64_RSEQ_OPERANDS(csoff, idxoff), [expected] "r"(expected),    \
	[p] "r"(p), [v] "rIJ"(v) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_ADD_STORE_AT_CLOBBERS "x14", PCPU__A64_CLOBBERS

/*
 * rseq_idx16_cmpeq_addv_indexed: the counter add.
 *   ldrh w13, index;  arm (adrp, add, str);
 *   1: ldr w15, index;  cmp w15, w13;  b.ne aborted;
 *   add x13, base, x13, lsl #PCPU_SLOT_STRIDE_SHIFT;
 *   ldr x14, [x13];  add x14, x14, v;  0: str x14, [x13];  2:
 * The index is read before arming (its low 16 bits: an unregistered area's
 * -1 or -2 fails the compare, with no sign test), and the slot's address
 * is one shifted-register add.
 */
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_ASM                                            \
	PCPU__A64_LOAD_IDX16                                                 \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CMPEQ("w13")                                               \
	"add x13, %[base], x13, lsl %[shift]\n\t"                            \
	"ldr x14, [x13]\n\t"                                                 \
	PCPU__SPLIT                                                          \
	"add x14, x14, %[v]\n\t"                                             \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str x14, [x13]\n\t"                                                 \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_IN                                             \
	PCPU__A64_G_OPERANDS, [base] "r"(base), [v] "rIJ"(v),               \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT PCPU__IDX16_INPUT
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_CLOBBERS "x13", "x14", PCPU__A64_CLOBBERS

/*
 * rseq_idx16_cmpeq_add2v_indexed: the histogram's pair, loaded with one
 * `ldp`, added to, and committed with one `stp` of the two registers.
 *
 * One instruction is what the section needs: the kernel restarts the
 * thread before the `stp` or after it. An interrupt is taken between
 * instructions; a fault that abandons a store pair after its first half
 * would have to hit the second half alone, and the pair, 16-byte aligned,
 * lies in one page (one translation, one permission) and one cache line.
 * Single-copy atomicity of the 16 bytes, which only FEAT_LSE2 (Armv8.4)
 * gives an aligned `stp`, is a promise to OTHER observers, and the
 * histogram's readers do not need it: they load the two words separately
 * (src/stats/histogram.c) and may see one add before the other, on every
 * target; each word is exact, being one 64-bit single-copy atomic access
 * on every Armv8.
 */
#define PCPU__ARCH_THIS_ADD2_ASM                                           \
	PCPU__A64_LOAD_IDX16                                                 \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CMPEQ("w13")                                               \
	"add x13, %[base], x13, lsl %[shift]\n\t"                            \
	"ldp x14, x12, [x13]\n\t"                                            \
	PCPU__SPLIT                                                          \
	"add x14, x14, %[a]\n\t"                                             \
	"add x12, x12, %[b]\n\t"                                             \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"stp x14, x12, [x13]\n\t"                                            \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_ADD2_IN                                            \
	PCPU__A64_G_OPERANDS, [base] "r"(base), [a] "rIJ"(a), [b] "rIJ"(b),  \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT PCPU__IDX16_INPUT
#define PCPU__ARCH_THIS_ADD2_CLOBBERS "x12", "x13", "x14", PCPU__A64_CLOBBERS

/* rseq_cmpeq_cmpeqv_storev: if (index != expected) abort;
 * if (*p != expect) return DIFFERS; *p = newv. */
#define PCPU__ARCH_LOAD_CBNE_STORE_ASM                                          \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CMPEQ("%w[expected]")                                      \
	"ldr x14, [%[p]]\n\t"                                                \
	PCPU__SPLIT                                                          \
	"cmp x14, %[expect]\n\t"                                             \
	"b.ne %l[differs]\n\t"                                               \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str %[newv], [%[p]]\n\t"                                            \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_STORE_IN                                           \
	PCPU__A64_G_OPERANDS, [expected] "r"(expected), [p] "r"(p),          \
	[expect] "rI"(expect), [newv] "r"(newv) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_STORE_CLOBBERS "x14", PCPU__A64_CLOBBERS

/*
 * rseq_loadidx_cmpeqv_addv: the index is read inside the section (so no
 * separate compare: a thread that moves after the load is restarted before
 * the commit); a negative one leaves before anything is written.
 */
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_ASM                                          \
	PCPU__A64_ARM                                                        \
	"1:\n\t"                                                             \
	"ldrsw x13, [%[tp], %[idx]]\n\t"                                     \
	PCPU__SPLIT                                                          \
	"tbnz x13, 63, %l[unregistered]\n\t"                                 \
	"lsl x13, x13, %[shift]\n\t"                                         \
	"ldr x14, [%[vbase], x13]\n\t"                                       \
	PCPU__SPLIT                                                          \
	"cmp x14, %[expect]\n\t"                                             \
	"b.ne %l[differs]\n\t"                                               \
	"ldr x14, [%[base], x13]\n\t"                                        \
	PCPU__SPLIT                                                          \
	"add x14, x14, %[add]\n\t"                                           \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str x14, [%[base], x13]\n\t"                                        \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_IN                                           \
	PCPU__A64_G_OPERANDS, [base] "r"(base), [vbase] "r"((char *)base + v_off), \
	[expect] "rI"(expect), [add] "rIJ"(add),                             \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CLOBBERS "x13", "x14", PCPU__A64_CLOBBERS

/* load_cbne_store_store: if (index != expected) abort;
 * if (*p != expect) return DIFFERS; *p2 = newv2; *p = newv. */
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_ASM                                 \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CMPEQ("%w[expected]")                                      \
	"ldr x14, [%[p]]\n\t"                                                \
	PCPU__SPLIT                                                          \
	"cmp x14, %[expect]\n\t"                                             \
	"b.ne %l[differs]\n\t"                                               \
	"str %[newv2], [%[p2]]\n\t"                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str %[newv], [%[p]]\n\t"                                            \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_IN                                  \
	PCPU__A64_G_OPERANDS, [expected] "r"(expected), [p] "r"(p),          \
	[expect] "rI"(expect), [p2] "r"(p2), [newv2] "r"(newv2),             \
	[newv] "r"(newv) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_CLOBBERS "x14", PCPU__A64_CLOBBERS

/*
 * this_load_add_cbmask_store: the hierarchical counter's add. The counter
 * add's shape with the slot's mask (the next word) loaded by the same
 * `ldp`, and the bits the add changes tested against it before the store:
 *   ... add x13, base, x13, lsl #shift;  ldp x14, x12, [x13];
 *   add x15, x14, v;  eor x14, x14, x15;  tst x14, x12;  b.ne unfit;
 *   0: str x15, [x13];  2:
 */
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_ASM                            \
	PCPU__A64_LOAD_IDX16                                                 \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CMPEQ("w13")                                               \
	"add x13, %[base], x13, lsl %[shift]\n\t"                            \
	"ldp x14, x12, [x13]\n\t"                                            \
	PCPU__SPLIT                                                          \
	"add x15, x14, %[v]\n\t"                                             \
	"eor x14, x14, x15\n\t"                                              \
	"tst x14, x12\n\t"                                                   \
	"b.ne %l[unfit]\n\t"                                                 \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str x15, [x13]\n\t"                                                 \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_IN                             \
	PCPU__A64_G_OPERANDS, [base] "r"(base), [v] "rIJ"(v),               \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT PCPU__IDX16_INPUT
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CLOBBERS "x12", "x13", "x14", PCPU__A64_CLOBBERS

/* load_cbne_load_store_add_store: if (index != expected) abort;
 * if (p[1] != gexpect) return DIFFERS; *oldp = p[0]; p[0] += v. */
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_ASM                        \
	PCPU__A64_ARM                                                        \
	PCPU__A64_CMPEQ("%w[expected]")                                      \
	"ldp x14, x13, [%[p]]\n\t"                                           \
	PCPU__SPLIT                                                          \
	"cmp x13, %[gexpect]\n\t"                                            \
	"b.ne %l[differs]\n\t"                                               \
	"str x14, [%[oldp]]\n\t"                                             \
	"add x14, x14, %[v]\n\t"                                             \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str x14, [%[p]]\n\t"                                                \
	"2:\n\t"                                                             \
	PCPU__A64_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_IN                         \
	PCPU__A64_G_OPERANDS, [expected] "r"(expected), [p] "r"(p),          \
	[gexpect] "r"(gexpect), [oldp] "r"(oldp), [v] "rIJ"(v) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CLOBBERS "x13", "x14", PCPU__A64_CLOBBERS

#endif /* PCPU__ARCH_SECTIONS */

#endif /* PCPU_ARCH_AARCH64_H */
