/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/riscv64.h
 * pcpu's rseq critical sections for 64-bit RISC-V (RV64, little-endian,
 * Linux): each operation of pcpu/arch/pseudocode.h, which states what it
 * does. Not API; include <pcpu/arch.h>.
 *
 * The ABI. Each section's descriptor is emitted into __rseq_cs
 * (pcpu/arch/common.h, PCPU__RSEQ_DESCRIPTOR); arming stores its address,
 * built with `lla` (auipc + addi, PC-relative: a shared library needs no
 * GOT entry), into the thread's rseq_cs field. The abort handler lies out
 * of line, in the section __rseq_failure, after the signature 0xf1401073
 * (glibc's RSEQ_SIG for RISC-V, 2.41: `csrw mhartid, x0`, which traps in
 * every mode), 4-byte aligned; it leaves with `jump`, auipc + jalr through
 * t6, which reaches any distance (RISC-V linkers insert no veneers).
 * Branches to the C labels inside a section reach 4 KB (`bne`) or 1 MB
 * (`j`) within a function, as librseq's do.
 *
 * Operands: loads and stores take a register and a 12-bit immediate only,
 * so the sections get the addresses of rseq_cs (`csp`) and of the index
 * (`idxp`) as registers, computed by the compiler from the thread pointer
 * (tp) and pcpu__g's offsets. Scratch values are in t3-t6, named as
 * clobbers.
 *
 * Why `ld`, `add`, `sd` is a correct commit: as on every target, only
 * threads on the same slot write a slot's word, at most one of them runs a
 * section at a time, and the kernel restarts a thread interrupted anywhere
 * before the `sd`. An aligned `sd` is single-copy atomic, so readers never
 * see a torn word.
 *
 * The histogram's pair: RV64 (without the vector extension) has no store
 * of 16 bytes, so there is no one-instruction commit of both words. The
 * pair is added as two sections, the count's, then the sum's
 * (PCPU__ARCH_ADD2_AS_TWO_ADDS: pcpu/arch/common.h says what that
 * promises).
 *
 * owned_add: the generic version's relaxed load and store are `ld` and
 * `sd` here (no AMO), so this header does not provide one.
 */
#ifndef PCPU_ARCH_RISCV64_H
#define PCPU_ARCH_RISCV64_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/riscv64.h>"
#endif

#include <stdint.h>

/* The target, for tests and tools: its name (as the emulated-machine
 * scripts call it) and its seccomp audit architecture (a name from
 * <linux/audit.h>, expanded only where that header is included). */
#define PCPU_ARCH_NAME "riscv64"
#define PCPU__ARCH_AUDIT AUDIT_ARCH_RISCV64

/* What the tests need to read this target's machine code
 * (tests/arch_headers.py; pcpu/arch/x86_64.h says what each is). */
#define PCPU__ARCH_ELF_MACHINE 243
#define PCPU__ARCH_ELF_CLASS 64
#define PCPU__ARCH_CROSS "riscv64-linux-gnu"
#define PCPU__ARCH_RELATIVE_RELOC "R_RISCV_RELATIVE"
#define PCPU__ARCH_ASM_COMMENT "#"
#define PCPU__ARCH_INSN_STORE "^(s[bhwd]|sc[.]|amo)"
#define PCPU__ARCH_INSN_LOAD "^l[bhwd]u?( |$)"
#define PCPU__ARCH_INSN_CALL "^(jal|jalr|call|ecall)( |$)"
#define PCPU__ARCH_INSN_BRANCH "^(j|beqz?|bnez?|bltu?|bgeu?|bgtu?|bleu?|bltz|bgez|blez|bgtz)( |$)"
#define PCPU__ARCH_INSN_JUMP "^j( |$)"

/* ---- not sections: what the subjects' code asks of the target ----------------
 * (also in a fallback build; pcpu/arch/generic.h has the portable versions) */

/* A spin-wait hint (src/stats/group.c's waits): `pause` (Zihintpause), written as its encoding: a FENCE hint that cores without the extension execute as a no-op. */
#define pcpu__arch_cpu_relax() __asm__ __volatile__(".insn i 0x0f, 0, x0, x0, 0x010" ::: "memory")

/* Whether a copy of a 64-bit word may be made 32 bits at a time (the
 * kernel's copy of a segment file: src/core/core.h, "torn copies"): no. */
#ifndef PCPU__TORN64 /* a build may say otherwise: tests/segment's 32-bit reader */
#define PCPU__TORN64 0
#endif

#if PCPU__ARCH_SECTIONS

#define PCPU_ARCH_HAVE_RSEQ 1

/* glibc's RSEQ_SIG for RISC-V: `csrw mhartid, x0`. */
#define PCPU__RSEQ_SIG 0xf1401073

/* The per-CPU stack's sections (pcpu/arch/common.h includes them). */
#define PCPU__ARCH_STACK_H "riscv64/stack.h"

/* tp. Not volatile: constant for a thread, so the compiler may reuse it. */
static inline char *pcpu__arch_thread_pointer(void)
{
	char *tp;

	__asm__("mv %0, tp" : "=r"(tp));
	return tp;
}
#define pcpu__arch_thread_pointer pcpu__arch_thread_pointer

/* ---- building blocks --------------------------------------------------------- */

#ifdef PCPU_TEST_INJECT
#define PCPU__INJECT_ASM                                                     \
	"beqz %[inject_spin], 6f\n\t"                                        \
	"mv t3, %[inject_spin]\n\t"                                          \
	"5:\n\t"                                                             \
	"addi t3, t3, -1\n\t"                                                \
	"bnez t3, 5b\n\t"                                                    \
	"6:\n\t"
#define PCPU__INJECT_INPUT , [inject_spin] "r"((uintptr_t)pcpu__test_inject_spin)
#define PCPU__INJECT_CLOBBER , "t3"
#define PCPU__RV_LOAD_IDX16 "mv t5, %[idx16]\n\t"
#else
#define PCPU__RV_LOAD_IDX16 "lhu t5, 0(%[idxp])\n\t"
#endif

/* PCPU_TEST_SPLIT_BLOCKS' jump to the next instruction. */
#define PCPU__ARCH_SPLIT_BRANCH "j"

/* What every section clobbers besides its own scratch registers. */
#define PCPU__RV_CLOBBERS "memory", "t6" PCPU__INJECT_CLOBBER

/* The descriptor (label 3), then arming: rseq_cs = &descriptor, through
 * t6. The section starts at label 1, after it. */
#define PCPU__RV_ARM                                                         \
	PCPU__RSEQ_DESCRIPTOR                                                \
	"lla t6, 3b\n\t"                                                     \
	"sd t6, 0(%[csp])\n\t"

/* The abort handler: the signature, label 4 (abort_ip), a jump to the asm
 * goto label `label`. Out of line, so the straight path has no jump over
 * it (librseq's riscv sections have one). */
#define PCPU__RV_ABORT_TO(label)                                             \
	".pushsection __rseq_failure, \"ax" PCPU__RSEQ_IN_GROUP "\"\n\t"     \
	".balign 4\n\t"                                                      \
	".long " PCPU__XSTR(PCPU__RSEQ_SIG) "\n\t"                           \
	"4:\n\t"                                                             \
	"jump %l[" label "], t6\n\t"                                         \
	".popsection\n\t"

/* The index compare every section but loadidx's starts with: leave for
 * `aborted` unless the thread's index (lw: sign-extended) is `reg`. */
#define PCPU__RV_CMPEQ(reg)                                                  \
	"1:\n\t"                                                             \
	"lw t6, 0(%[idxp])\n\t"                                              \
	"bne t6, " reg ", %l[aborted]\n\t"                                   \
	PCPU__SPLIT

/* The operands every section has: the addresses of rseq_cs and the index. */
#define PCPU__RV_RSEQ_OPERANDS(csoff, idxoff)                                \
	[csp] "r"(pcpu__arch_thread_pointer() + (csoff)),                     \
	[idxp] "r"(pcpu__arch_thread_pointer() + (idxoff))
#define PCPU__RV_G_OPERANDS                                                  \
	PCPU__RV_RSEQ_OPERANDS((intptr_t)pcpu__g.cs_tpoff, (intptr_t)pcpu__g.index_tpoff)

/* ---- the index ------------------------------------------------------------------ */

/* lw sign-extends the index as it loads it; lhu zero-extends its low 16
 * bits. */
#define PCPU__ARCH_INDEX_T int64_t
#define PCPU__ARCH_INDEX16_T int64_t
#define PCPU__ARCH_LOAD_INDEX "lw %[idx], 0(%[p])"
#define PCPU__ARCH_LOAD_INDEX16 "lhu %[idx], 0(%[p])"
#define PCPU__ARCH_TLS_IN(offset_) [p] "r"(pcpu__arch_thread_pointer() + (offset_))

/* ---- sections ------------------------------------------------------------------- */

/* rseq_cmpeq_addv_at: if (index != expected) abort; *p += v;
 * (ld, add, sd: the sd commits). */
#define PCPU__ARCH_LOAD_ADD_STORE_AT_ASM                                         \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CMPEQ("%[expected]")                                        \
	"ld t5, 0(%[p])\n\t"                                                 \
	PCPU__SPLIT                                                          \
	"add t5, t5, %[v]\n\t"                                               \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd t5, 0(%[p])\n\t"                                                 \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_ADD_STORE_AT_IN                                          \
	PCPU__RV_RSEQ_OPERANDS(csoff, idxoff), [expected] "r"(expected),     \
	[p] "r"(p), [v] "r"(v) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_ADD_STORE_AT_CLOBBERS "t5", PCPU__RV_CLOBBERS

/*
 * rseq_idx16_cmpeq_addv_indexed: the counter add.
 *   lhu t5, index;  arm (auipc, addi, sd);
 *   1: lw t6, index;  bne t6, t5, aborted;
 *   slli t5, t5, PCPU_SLOT_STRIDE_SHIFT;  add t5, base, t5;
 *   ld t6, 0(t5);  add t6, t6, v;  0: sd t6, 0(t5);  2:
 */
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_ASM                                            \
	PCPU__RV_LOAD_IDX16                                                  \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CMPEQ("t5")                                                 \
	"slli t5, t5, %[shift]\n\t"                                          \
	"add t5, %[base], t5\n\t"                                            \
	"ld t6, 0(t5)\n\t"                                                   \
	PCPU__SPLIT                                                          \
	"add t6, t6, %[v]\n\t"                                               \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd t6, 0(t5)\n\t"                                                   \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_IN                                             \
	PCPU__RV_G_OPERANDS, [base] "r"(base), [v] "r"(v),                   \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT PCPU__IDX16_INPUT
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_CLOBBERS "t5", PCPU__RV_CLOBBERS

/* rseq_idx16_cmpeq_add2v_indexed: two counter adds (see the top: RV64 has
 * no 16-byte store); pcpu/arch/common.h composes them. */
#define PCPU__ARCH_ADD2_AS_TWO_ADDS 1

/* rseq_cmpeq_cmpeqv_storev: if (index != expected) abort;
 * if (*p != expect) return DIFFERS; *p = newv. */
#define PCPU__ARCH_LOAD_CBNE_STORE_ASM                                          \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CMPEQ("%[expected]")                                        \
	"ld t5, 0(%[p])\n\t"                                                 \
	PCPU__SPLIT                                                          \
	"bne t5, %[expect], %l[differs]\n\t"                                 \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd %[newv], 0(%[p])\n\t"                                            \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_STORE_IN                                           \
	PCPU__RV_G_OPERANDS, [expected] "r"(expected), [p] "r"(p),           \
	[expect] "r"(expect), [newv] "r"(newv) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_STORE_CLOBBERS "t5", PCPU__RV_CLOBBERS

/*
 * rseq_loadidx_cmpeqv_addv: the index is read inside the section (so no
 * separate compare: a thread that moves after the load is restarted before
 * the commit); a negative one leaves before anything is written.
 */
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_ASM                                          \
	PCPU__RV_ARM                                                         \
	"1:\n\t"                                                             \
	"lw t5, 0(%[idxp])\n\t"                                              \
	PCPU__SPLIT                                                          \
	"bltz t5, %l[unregistered]\n\t"                                      \
	"slli t5, t5, %[shift]\n\t"                                          \
	"add t6, %[vbase], t5\n\t"                                           \
	"ld t6, 0(t6)\n\t"                                                   \
	PCPU__SPLIT                                                          \
	"bne t6, %[expect], %l[differs]\n\t"                                 \
	"add t5, %[base], t5\n\t"                                            \
	"ld t6, 0(t5)\n\t"                                                   \
	PCPU__SPLIT                                                          \
	"add t6, t6, %[add]\n\t"                                             \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd t6, 0(t5)\n\t"                                                   \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_IN                                           \
	PCPU__RV_G_OPERANDS, [base] "r"(base), [vbase] "r"((char *)base + v_off), \
	[expect] "r"(expect), [add] "r"(add),                                \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CLOBBERS "t5", PCPU__RV_CLOBBERS

/* load_cbne_store_store: if (index != expected) abort;
 * if (*p != expect) return DIFFERS; *p2 = newv2; *p = newv. */
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_ASM                                 \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CMPEQ("%[expected]")                                        \
	"ld t5, 0(%[p])\n\t"                                                 \
	PCPU__SPLIT                                                          \
	"bne t5, %[expect], %l[differs]\n\t"                                 \
	"sd %[newv2], 0(%[p2])\n\t"                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd %[newv], 0(%[p])\n\t"                                            \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_IN                                  \
	PCPU__RV_G_OPERANDS, [expected] "r"(expected), [p] "r"(p),           \
	[expect] "r"(expect), [p2] "r"(p2), [newv2] "r"(newv2),              \
	[newv] "r"(newv) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_CLOBBERS "t5", PCPU__RV_CLOBBERS

/*
 * this_load_add_cbmask_store: the hierarchical counter's add, the counter
 * add's shape with the bits the add changes tested against the slot's mask
 * (the next word) before the store:
 *   ... slli t5; add t5, base, t5;  ld t6, 0(t5);  add t4, t6, v;
 *   xor t6, t6, t4;  ld a7, 8(t5);  and t6, t6, a7;  bnez t6, unfit;
 *   0: sd t4, 0(t5);  2:
 */
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_ASM                            \
	PCPU__RV_LOAD_IDX16                                                  \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CMPEQ("t5")                                                 \
	"slli t5, t5, %[shift]\n\t"                                          \
	"add t5, %[base], t5\n\t"                                            \
	"ld t6, 0(t5)\n\t"                                                   \
	"ld a7, 8(t5)\n\t"                                                   \
	PCPU__SPLIT                                                          \
	"add t4, t6, %[v]\n\t"                                               \
	"xor t6, t6, t4\n\t"                                                 \
	"and t6, t6, a7\n\t"                                                 \
	"bnez t6, %l[unfit]\n\t"                                             \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd t4, 0(t5)\n\t"                                                   \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_IN                             \
	PCPU__RV_G_OPERANDS, [base] "r"(base), [v] "r"(v),                   \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT PCPU__IDX16_INPUT
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CLOBBERS "a7", "t4", "t5", PCPU__RV_CLOBBERS

/* load_cbne_load_store_add_store: if (index != expected) abort;
 * if (p[1] != gexpect) return DIFFERS; *oldp = p[0]; p[0] += v. */
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_ASM                        \
	PCPU__RV_ARM                                                         \
	PCPU__RV_CMPEQ("%[expected]")                                        \
	"ld t5, 8(%[p])\n\t"                                                 \
	PCPU__SPLIT                                                          \
	"bne t5, %[gexpect], %l[differs]\n\t"                                \
	"ld t5, 0(%[p])\n\t"                                                 \
	PCPU__SPLIT                                                          \
	"sd t5, 0(%[oldp])\n\t"                                              \
	"add t5, t5, %[v]\n\t"                                               \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"sd t5, 0(%[p])\n\t"                                                 \
	"2:\n\t"                                                             \
	PCPU__RV_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_IN                         \
	PCPU__RV_G_OPERANDS, [expected] "r"(expected), [p] "r"(p),           \
	[gexpect] "r"(gexpect), [oldp] "r"(oldp), [v] "r"(v) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CLOBBERS "t5", PCPU__RV_CLOBBERS

#endif /* PCPU__ARCH_SECTIONS */

#endif /* PCPU_ARCH_RISCV64_H */
