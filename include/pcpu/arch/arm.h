/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/arm.h
 * pcpu's rseq critical sections for 32-bit Arm, ARMv7-A and later,
 * little-endian (armhf, armel built for ARMv7): each operation of
 * pcpu/arch/pseudocode.h, which states what it does. Not API; include
 * <pcpu/arch.h>.
 *
 * The ABI. The rseq ABI keeps its address fields 64 bits wide on 32-bit
 * targets: a descriptor is { u32 version, u32 flags, u64 start_ip, u64
 * post_commit_offset, u64 abort_ip } (pcpu/arch/common.h writes each u64
 * as the address and a zero word), and struct rseq's rseq_cs is a u64 whose
 * high word stays 0 (the kernel refuses a pointer at or above TASK_SIZE):
 * arming stores the descriptor's address into its low word with one `str`.
 * The signature is glibc's RSEQ_SIG for little-endian Arm, 0xe7f5def3 (`udf
 * #24035` in A32; in T32 `udf #243` followed by a branch): emitted as data
 * (`.word`), because the kernel compares the 4 bytes before abort_ip as a
 * data word, and in Thumb code `.inst` would store the two halfwords in
 * the other order.
 *
 * Both instruction sets: the code is unified syntax that assembles as A32
 * and as T32 (Debian's armhf compiler emits Thumb-2 by default). The
 * descriptor's address is built PC-relatively, `movw`/`movt` of
 * (descriptor - anchor) and an `add` of pc at the anchor (pc reads 8 bytes
 * ahead in A32, 4 in T32), so it works in a shared library and reaches any
 * distance. The code addresses in a descriptor are local labels: even,
 * without the Thumb bit (tests/check_rseq_sections.py checks it), which is
 * what the kernel compares the instruction pointer with.
 *
 * Operands: struct rseq's fields are reached through two pointers the
 * compiler computes from the thread pointer (TPIDRURO, read by
 * __builtin_thread_pointer()) and pcpu__g's offsets: `csp` (rseq_cs) and
 * `idxp` (the index). Scratch values are in fixed registers named as
 * clobbers (r0-r3, and lr for PCPU_TEST_INJECT's spin and some carry
 * tests); r12 (ip) is
 * clobbered by every section, because its abort handler lies in another
 * section and the linker may reach it through a veneer that uses ip.
 *
 * Counter words are 64-bit, and a 64-bit word is only ever written whole
 * by one store that is single-copy atomic for 64 bits, or by a 32-bit
 * store of its low half while its high half does not change ("Carries"
 * below). One instruction is what a commit needs: the kernel takes an
 * interrupt, preemption or signal between instructions (Linux runs with
 * SCTLR.FI clear, so no interrupt abandons an `stm` part-way), and a fault
 * part-way is impossible: the words lie in one page (8- or 16-byte
 * aligned), so the first access faults if any does.
 *
 * Carries. An `strd` is single-copy atomic only on cores with the Large
 * Physical Address Extension (Cortex-A7, A15, A17, ARMv8 in AArch32); on
 * Cortex-A8/A9, and in QEMU's emulated Cortex-A15 before 8.1 (two 32-bit
 * host stores: a writer's vCPU thread descheduled between them leaves the
 * word half-written for as long as it waits), another CPU may see one
 * half of it new and the other old. Where an add carries into (or borrows
 * from) the high half, that reads 2^32 off -- a false counter reset and a
 * 4.3 x 10^9 spike -- and no reader can tell it from a value. So every add
 * section is two: the common one adds to the low word and commits it with
 * one `str` (or, for the histogram's pair, re-stores both high words as
 * loaded with the `stm`), after testing that the high half does not
 * change (PCPU__ARM_ADD_LOW: `adcs`, `bne carry`, two instructions; one,
 * `bcs` or `bcc`, where the compiler knows v's high word:
 * PCPU__ARM_ADD_LOW_KNOWN); an add that changes it leaves for the asm goto
 * label `carry` before anything is written, and pcpu/arch/common.h runs
 * the operation's carry section: the same compares, the word loaded with
 * `ldrexd` and committed with `strexd`, which is single-copy atomic for 64
 * bits on every ARMv7 core (and one host compare-and-swap in QEMU). A
 * `strexd` that fails (the exclusive monitor cleared by an exception
 * return that did not preempt: the kernel aborts a section only on
 * preemption, migration or a signal) wrote nothing; the code after the
 * range reports it as an abort, and the caller retries as for any. The
 * histogram's pair, on a carry, is two single adds
 * (PCPU__ARCH_ADD2_AS_TWO_ADDS's semantics). A 64-bit relaxed
 * atomic load is `ldrexd` (gcc, clang: ARMv7 without LPAE), single-copy
 * atomic, so readers load each word once and never see half of a store;
 * only a copy of the word made 32 bits at a time (a pread() of a segment
 * file) may still straddle a carry, which the segment reader detects
 * (src/core/core.h, "torn copies"). Owned adds (not a section) do the
 * same: the low word's `str`, or a 64-bit atomic store when the high half
 * changes.
 *
 * Not in a section: the object cache's count is an int64_t whose high word
 * is always 0 (counts are small): its sections load and commit the low
 * word alone with `ldr`/`str`, and its object pointers are 4 bytes.
 */
#ifndef PCPU_ARCH_ARM_H
#define PCPU_ARCH_ARM_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/arm.h>"
#endif

#include <stdint.h>

/* The target, for tests and tools: its name (as the emulated-machine
 * scripts call it) and its seccomp audit architecture (a name from
 * <linux/audit.h>, expanded only where that header is included). */
#define PCPU_ARCH_NAME "arm"
#define PCPU__ARCH_AUDIT AUDIT_ARCH_ARM

/* What the tests need to read this target's machine code
 * (tests/arch_headers.py; pcpu/arch/x86_64.h says what each is). The ELF
 * class is 32, but the rseq tables keep the ABI's 64-bit fields. */
#define PCPU__ARCH_ELF_MACHINE 40
#define PCPU__ARCH_ELF_CLASS 32
#define PCPU__ARCH_CROSS "arm-linux-gnueabihf"
#define PCPU__ARCH_RELATIVE_RELOC "R_ARM_RELATIVE"
#define PCPU__ARCH_ASM_COMMENT "@"
#define PCPU__ARCH_INSN_STORE "^(st|push)"
#define PCPU__ARCH_INSN_LOAD "^ld"
#define PCPU__ARCH_INSN_CALL "^(bl|blx|svc)( |$)"
#define PCPU__ARCH_INSN_BRANCH "^(b(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)?([.][nw])?|cbn?z)( |$)"
#define PCPU__ARCH_INSN_JUMP "^b([.][nw])?( |$)"
/* Optional (this port's carry sections): a commit that may fail and write
 * nothing, its status in its first operand, which the code right after
 * the range must test (tests/check_rseq_sections.py). */
#define PCPU__ARCH_INSN_STORE_EXCLUSIVE "^strex"

/* ---- not sections: what the subjects' code asks of the target ----------------
 * (also in a fallback build; pcpu/arch/generic.h has the portable versions) */

/* A spin-wait hint (src/stats/group.c's waits): `yield` (ARMv6K and later). */
#define pcpu__arch_cpu_relax() __asm__ __volatile__("yield" ::: "memory")

/* Whether a copy of a 64-bit word may be made 32 bits at a time: yes. In
 * memory a word is never half-written ("Carries" above), but the kernel's
 * copy of a segment file (a pread()) copies 32 bits at a time, and its two
 * halves may come from the two sides of a carry: the segment reader
 * copies three times and keeps what settled (src/core/core.h, "torn
 * copies"). */
#ifndef PCPU__TORN64 /* a build may say otherwise: tests/segment's 32-bit reader */
#define PCPU__TORN64 1
#endif

#if PCPU__ARCH_SECTIONS

#define PCPU_ARCH_HAVE_RSEQ 1

/* glibc's RSEQ_SIG for little-endian Arm: `udf #24035` in A32. */
#define PCPU__RSEQ_SIG 0xe7f5def3

/* The per-CPU stack's sections (pcpu/arch/common.h includes them). */
#define PCPU__ARCH_STACK_H "arm/stack.h"

/* TPIDRURO (`mrc p15, 0, rX, c13, c0, 3`). Not volatile: constant for a
 * thread, so the compiler may reuse it. */
static inline char *pcpu__arch_thread_pointer(void)
{
	return (char *)__builtin_thread_pointer();
}
#define pcpu__arch_thread_pointer pcpu__arch_thread_pointer

/* ---- building blocks --------------------------------------------------------- */

/* How far ahead pc reads: 8 bytes in A32, 4 in T32. */
#if defined(__thumb__)
#define PCPU__ARM_PC_BIAS "4"
#else
#define PCPU__ARM_PC_BIAS "8"
#endif

/* Test builds: the spin count and the idx16 operations' index (read in C
 * before the hook, PCPU__INJECT_BEFORE_IDX16) are memory operands, so that
 * they take no register: the histogram's section needs 7 of the 9 that
 * its fixed scratch registers leave, and a global's address would take
 * one. The spin count is copied, before the hook, onto the stack (this
 * port's versions of pcpu/arch/common.h's C hooks). */
#ifdef PCPU_TEST_INJECT
#define PCPU__ARM_SPIN(reg)                                                  \
	"ldr " reg ", %[inject_spin]\n\t"                                    \
	"cmp " reg ", #0\n\t"                                                \
	"beq 6f\n\t"                                                         \
	"5:\n\t"                                                             \
	"subs " reg ", " reg ", #1\n\t"                                      \
	"bne 5b\n\t"                                                         \
	"6:\n\t"
#define PCPU__INJECT_ASM PCPU__ARM_SPIN("lr")
#define PCPU__INJECT_INPUT , [inject_spin] "m"(pcpu__spin)
#define PCPU__INJECT_CLOBBER , "lr"
#define PCPU__ARM_LOAD_IDX16 "ldr r12, %[idx16]\n\t"
#define PCPU__IDX16_INPUT , [idx16] "m"(pcpu__idx16)
#define PCPU__INJECT_BEFORE()                                                \
	unsigned pcpu__spin = pcpu__test_inject_spin;                         \
	pcpu__test_inject_before()
#define PCPU__INJECT_BEFORE_IDX16()                                          \
	int64_t pcpu__idx16 = pcpu__rseq_load_index16();                      \
	unsigned pcpu__spin = pcpu__test_inject_spin;                         \
	pcpu__test_inject_before()
#else
#define PCPU__ARM_SPIN(reg) ""
#define PCPU__ARM_LOAD_IDX16 "ldrh r12, [%[idxp]]\n\t"
#endif

/* PCPU_TEST_SPLIT_BLOCKS' branch to the next instruction. */
#define PCPU__ARCH_SPLIT_BRANCH "b"

/* What every section clobbers besides its own scratch registers. */
#define PCPU__ARM_CLOBBERS "memory", "cc", "r0", "r12" PCPU__INJECT_CLOBBER

/* What a carry section clobbers besides its own registers: its test
 * builds' spin counts down the register of its commit's status (free
 * before the commit), not lr. */
#define PCPU__ARM_CLOBBERS_NO_SPIN "memory", "cc", "r0", "r12"

/* lr, free for a section's own use before the test builds' spin (which
 * loads it itself, and names it as its clobber). */
#ifdef PCPU_TEST_INJECT
#define PCPU__ARM_LR_CLOBBER
#else
#define PCPU__ARM_LR_CLOBBER , "lr"
#endif

/* Carries (see the top): the sections' adds to 64-bit words jump to the
 * asm goto label `carry` when the add would change the word's high half,
 * and pcpu/arch/common.h then runs the operation's carry section
 * (PCPU__ARCH_<OP>_CARRY_ASM). */
#define PCPU__ARCH_CARRY_SECTIONS 1

/* The low word's add and the carry test: lo += vlo, and leave for `carry`
 * unless the high half stays as it is, which is when vhi plus the low
 * add's carry is 0 modulo 2^32 (vhi 0 and no carry out of the low word,
 * or vhi 0xffffffff, a negative v, and a carry): `adcs` computes that sum
 * into `scratch` and sets Z when it is 0. Two instructions more than the
 * add alone; the high half needs no add, no register and no store. */
#define PCPU__ARM_ADD_LOW(lo, vlo, vhi, scratch)                             \
	"adds " lo ", " lo ", " vlo "\n\t"                                    \
	"adcs " scratch ", " vhi ", #0\n\t"                                  \
	"bne %l[carry]\n\t"

/* The same where the compiler knows vhi (pcpu/arch/common.h,
 * PCPU__ARCH_ADD_HIGH_FORMS): with vhi 0 (0 <= v < 2^32: a count, a
 * length) the high half changes exactly when the low add carries, `bcs`;
 * with vhi 0xffffffff (-2^32 <= v < 0) exactly when it does not, `bcc`.
 * One instruction less, and v's high half takes no register (its low half
 * may be an immediate: "rI"). The counter add and the public adds (their
 * _HIGH0_ASM, _HIGH1_ASM and _HIGH_IN) have these forms. */
#define PCPU__ARM_ADD_LOW_KNOWN(lo, vlo, leave_if)                           \
	"adds " lo ", " lo ", " vlo "\n\t"                                    \
	leave_if " %l[carry]\n\t"
#define PCPU__ARCH_ADD_HIGH_FORMS 1

/* A carry section's commit: `strexd` of the pair (lo, hi), which writes
 * the 64-bit word as one single-copy atomic store or, when the exclusive
 * monitor was cleared since the `ldrexd` (an exception return, without a
 * preemption the kernel would have aborted for), writes nothing and sets
 * `status`. After the range: nothing written is an abort. (A32 wants lo
 * an even register and hi the next one.) */
#define PCPU__ARM_COMMIT_EXCLUSIVE(status, lo, hi, addr)                     \
	"0:\n\t"                                                             \
	"strexd " status ", " lo ", " hi ", [" addr "]\n\t"                  \
	"2:\n\t"                                                             \
	"cmp " status ", #0\n\t"                                             \
	"bne %l[aborted]\n\t"

/* The descriptor (label 3), then arming: rseq_cs = &descriptor, built in
 * r0 PC-relatively (anchor: label 10). The section starts at label 1. */
#define PCPU__ARM_ARM                                                        \
	PCPU__RSEQ_DESCRIPTOR                                                \
	"movw r0, #:lower16:(3b - (10f + " PCPU__ARM_PC_BIAS "))\n\t"        \
	"movt r0, #:upper16:(3b - (10f + " PCPU__ARM_PC_BIAS "))\n\t"        \
	"10:\n\t"                                                            \
	"add r0, r0, pc\n\t"                                                 \
	"str r0, [%[csp]]\n\t"

/* The abort handler: the signature as data, label 4 (abort_ip), a branch
 * to the asm goto label `label`. Out of line, in __rseq_failure. */
#define PCPU__ARM_ABORT_TO(label)                                            \
	".pushsection __rseq_failure, \"ax" PCPU__RSEQ_IN_GROUP "\"\n\t"     \
	".balign 4\n\t"                                                      \
	".word " PCPU__XSTR(PCPU__RSEQ_SIG) "\n\t"                           \
	"4:\n\t"                                                             \
	"b %l[" label "]\n\t"                                                \
	".popsection\n\t"

/* The index compare every section but loadidx's starts with: leave for
 * `aborted` unless the thread's index is still `reg`. */
#define PCPU__ARM_CMPEQ(reg)                                                 \
	"1:\n\t"                                                             \
	"ldr r0, [%[idxp]]\n\t"                                              \
	"cmp r0, " reg "\n\t"                                                \
	"bne %l[aborted]\n\t"                                                \
	PCPU__SPLIT

/* The operands every section has: the addresses of rseq_cs and the index. */
#define PCPU__ARM_RSEQ_OPERANDS(csoff, idxoff)                               \
	[csp] "r"(pcpu__arch_thread_pointer() + (csoff)),                     \
	[idxp] "r"(pcpu__arch_thread_pointer() + (idxoff))
#define PCPU__ARM_G_OPERANDS                                                 \
	PCPU__ARM_RSEQ_OPERANDS((intptr_t)pcpu__g.cs_tpoff, (intptr_t)pcpu__g.index_tpoff)

/* The 32-bit word at p (a 64-bit word's low half) as a memory operand of
 * an `ldr` and a `str`: the compiler chooses the address form ([rN,
 * #imm], [rN, rM, lsl #n]), so a slot's offset from a pointer it has is
 * no instruction of its own (gcc folds it; clang gives [rN]). An SImode
 * operand, so every form it takes suits both instructions. */
#define PCPU__ARM_MEM(p) "m"(*(uint32_t *)(void *)(p))

/* ---- the index ------------------------------------------------------------------ */

/* The index is 32 bits here (negative when not registered); ldrh loads
 * its low half (at the field's address), zero-extended. */
#define PCPU__ARCH_INDEX_T int32_t
#define PCPU__ARCH_INDEX16_T uint32_t
#define PCPU__ARCH_LOAD_INDEX "ldr %[idx], [%[p]]"
#define PCPU__ARCH_LOAD_INDEX16 "ldrh %[idx], [%[p]]"
#define PCPU__ARCH_TLS_IN(offset_) [p] "r"(pcpu__arch_thread_pointer() + (offset_))

/* ---- sections ------------------------------------------------------------------- */

/* rseq_cmpeq_addv_at: if (index != expected) abort; *p += v;
 * the low word's add, the carry test, its store (see "Carries" at the
 * top): ldr, adds, adcs, bne carry, str (the str commits). The low word
 * is a memory operand, as in librseq: the compiler folds the slot's
 * offset into the load's and the store's address (PCPU__ARM_MEM). */
#define PCPU__ARM_LOAD_ADD_STORE_AT(add_low)                                 \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("%[expected]")                                       \
	"ldr r0, %[lo]\n\t"                                                  \
	PCPU__SPLIT                                                          \
	add_low                                                              \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r0, %[lo]\n\t"                                                  \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
/* Its operands, and its forms' (which differ in the word's and v's). */
#define PCPU__ARM_LOAD_ADD_STORE_AT_IN(word, vop)                            \
	PCPU__ARM_RSEQ_OPERANDS(csoff, idxoff), [expected] "r"((int32_t)expected), \
	word, vop PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_ADD_STORE_AT_ASM                                         \
	PCPU__ARM_LOAD_ADD_STORE_AT(PCPU__ARM_ADD_LOW("r0", "%Q[v]", "%R[v]", "r1"))
#define PCPU__ARCH_LOAD_ADD_STORE_AT_IN                                          \
	PCPU__ARM_LOAD_ADD_STORE_AT_IN([lo] PCPU__ARM_MEM(p), [v] "r"(v))
#define PCPU__ARCH_LOAD_ADD_STORE_AT_CLOBBERS "r1", PCPU__ARM_CLOBBERS
#define PCPU__ARCH_LOAD_ADD_STORE_AT_HIGH0_ASM                                   \
	PCPU__ARM_LOAD_ADD_STORE_AT(PCPU__ARM_ADD_LOW_KNOWN("r0", "%[v]", "bcs"))
#define PCPU__ARCH_LOAD_ADD_STORE_AT_HIGH1_ASM                                   \
	PCPU__ARM_LOAD_ADD_STORE_AT(PCPU__ARM_ADD_LOW_KNOWN("r0", "%[v]", "bcc"))
#define PCPU__ARCH_LOAD_ADD_STORE_AT_HIGH_IN                                     \
	PCPU__ARM_LOAD_ADD_STORE_AT_IN([lo] PCPU__ARM_MEM(p), [v] "rI"((uint32_t)v))
#define PCPU__ARCH_LOAD_ADD_STORE_AT_HIGH_CLOBBERS PCPU__ARM_CLOBBERS
/* Its carry section: ldrexd, adds, adc, strexd (commits or fails whole). */
#define PCPU__ARCH_LOAD_ADD_STORE_AT_CARRY_ASM                                   \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("%[expected]")                                       \
	"ldrexd r0, r1, [%[p]]\n\t"                                          \
	PCPU__SPLIT                                                          \
	"adds r0, r0, %Q[v]\n\t"                                             \
	"adc r1, r1, %R[v]\n\t"                                              \
	PCPU__SPLIT                                                          \
	PCPU__ARM_SPIN("r2")                                                 \
	PCPU__ARM_COMMIT_EXCLUSIVE("r2", "r0", "r1", "%[p]")                 \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_ADD_STORE_AT_CARRY_IN                                    \
	PCPU__ARM_LOAD_ADD_STORE_AT_IN([p] "r"(p), [v] "r"(v))
#define PCPU__ARCH_LOAD_ADD_STORE_AT_CARRY_CLOBBERS "r1", "r2", PCPU__ARM_CLOBBERS_NO_SPIN

/*
 * rseq_idx16_cmpeq_addv_indexed: the counter add.
 *   ldrh r12, index;  arm (movw, movt, add, str);
 *   1: ldr r0, index;  cmp r0, r12;  bne aborted;
 *   add r12, base, r12, lsl #PCPU_SLOT_STRIDE_SHIFT;
 *   ldr r0, [r12];  adds r0, r0, v.lo;  adcs r1, v.hi, #0;  bne carry;
 *   0: str r0, [r12];  2:
 * (with v's high word known: adds r0, r0, v.lo;  bcs carry  (or bcc)),
 * and its carry section, the same with
 *   ldrexd r0, r1, [r12];  adds r0, r0, v.lo;  adc r1, r1, v.hi;
 *   0: strexd r2, r0, r1, [r12];  2: cmp r2, #0;  bne aborted
 */
#define PCPU__ARM_THIS_LOAD_ADD_STORE(add_low)                               \
	PCPU__ARM_LOAD_IDX16                                                 \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("r12")                                               \
	"add r12, %[base], r12, lsl %[shift]\n\t"                            \
	"ldr r0, [r12]\n\t"                                                  \
	PCPU__SPLIT                                                          \
	add_low                                                              \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r0, [r12]\n\t"                                                  \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_ASM                                            \
	PCPU__ARM_THIS_LOAD_ADD_STORE(PCPU__ARM_ADD_LOW("r0", "%Q[v]", "%R[v]", "r1"))
#define PCPU__ARM_THIS_LOAD_ADD_STORE_IN(vop)                                \
	PCPU__ARM_G_OPERANDS, [base] "r"(base), vop,                         \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT PCPU__IDX16_INPUT
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_IN PCPU__ARM_THIS_LOAD_ADD_STORE_IN([v] "r"(v))
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_CLOBBERS "r1", PCPU__ARM_CLOBBERS
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_HIGH0_ASM                                      \
	PCPU__ARM_THIS_LOAD_ADD_STORE(PCPU__ARM_ADD_LOW_KNOWN("r0", "%[v]", "bcs"))
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_HIGH1_ASM                                      \
	PCPU__ARM_THIS_LOAD_ADD_STORE(PCPU__ARM_ADD_LOW_KNOWN("r0", "%[v]", "bcc"))
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_HIGH_IN                                        \
	PCPU__ARM_THIS_LOAD_ADD_STORE_IN([v] "rI"((uint32_t)v))
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_HIGH_CLOBBERS PCPU__ARM_CLOBBERS
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_CARRY_ASM                                      \
	PCPU__ARM_LOAD_IDX16                                                 \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("r12")                                               \
	"add r12, %[base], r12, lsl %[shift]\n\t"                            \
	"ldrexd r0, r1, [r12]\n\t"                                           \
	PCPU__SPLIT                                                          \
	"adds r0, r0, %Q[v]\n\t"                                             \
	"adc r1, r1, %R[v]\n\t"                                              \
	PCPU__SPLIT                                                          \
	PCPU__ARM_SPIN("r2")                                                 \
	PCPU__ARM_COMMIT_EXCLUSIVE("r2", "r0", "r1", "r12")                  \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_CARRY_IN PCPU__ARCH_THIS_LOAD_ADD_STORE_IN
#define PCPU__ARCH_THIS_LOAD_ADD_STORE_CARRY_CLOBBERS "r1", "r2", PCPU__ARM_CLOBBERS_NO_SPIN

/*
 * rseq_idx16_cmpeq_add2v_indexed: the histogram's pair, four words loaded
 * with one `ldm`, the low words added to, and committed with one `stm`
 * while neither high word changes (each re-stored as it was loaded: see
 * "Carries" at the top); a carry into either leaves for `carry` before
 * anything is written, where pcpu/arch/common.h makes the pair two adds
 * (PCPU__ARCH_ADD2_AS_TWO_ADDS's). Readers load the two words separately,
 * as on every target. The carry tests' scratch register is r3, the second
 * high word, loaded again for the `stm` (one `ldr` more): a sixth fixed
 * register (lr) leaves clang at -O0 too few for the seven operands.
 */
#define PCPU__ARCH_THIS_ADD2_ASM                                           \
	PCPU__ARM_LOAD_IDX16                                                 \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("r12")                                               \
	"add r12, %[base], r12, lsl %[shift]\n\t"                            \
	"ldm r12, {r0, r1, r2, r3}\n\t"                                      \
	PCPU__SPLIT                                                          \
	PCPU__ARM_ADD_LOW("r0", "%Q[a]", "%R[a]", "r3")                      \
	PCPU__ARM_ADD_LOW("r2", "%Q[b]", "%R[b]", "r3")                      \
	"ldr r3, [r12, #12]\n\t"                                             \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"stm r12, {r0, r1, r2, r3}\n\t"                                      \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_ADD2_IN                                            \
	PCPU__ARM_G_OPERANDS, [base] "r"(base), [a] "r"(a), [b] "r"(b),      \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT PCPU__IDX16_INPUT
#define PCPU__ARCH_THIS_ADD2_CLOBBERS "r1", "r2", "r3", PCPU__ARM_CLOBBERS

/* rseq_cmpeq_cmpeqv_storev: if (index != expected) abort;
 * if (*p != expect) return DIFFERS; *p = newv.  (32-bit words) */
#define PCPU__ARCH_LOAD_CBNE_STORE_ASM                                          \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("%[expected]")                                       \
	"ldr r0, %[w]\n\t"                                                   \
	PCPU__SPLIT                                                          \
	"cmp r0, %[expect]\n\t"                                              \
	"bne %l[differs]\n\t"                                                \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str %[newv], %[w]\n\t"                                              \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_STORE_IN                                           \
	PCPU__ARM_G_OPERANDS, [expected] "r"((int32_t)expected), [w] PCPU__ARM_MEM(p), \
	[expect] "r"(expect), [newv] "r"(newv) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_STORE_CLOBBERS PCPU__ARM_CLOBBERS

/*
 * rseq_loadidx_cmpeqv_addv: the index is read inside the section (so no
 * separate compare: a thread that moves after the load is restarted before
 * the commit); a negative one leaves before anything is written.
 */
#define PCPU__ARM_LOADIDX_GATE                                               \
	PCPU__ARM_ARM                                                        \
	"1:\n\t"                                                             \
	"ldr r12, [%[idxp]]\n\t"                                             \
	PCPU__SPLIT                                                          \
	"cmp r12, #0\n\t"                                                    \
	"blt %l[unregistered]\n\t"                                           \
	"lsl r12, r12, %[shift]\n\t"                                         \
	"ldr r1, [%[vbase], r12]\n\t"                                        \
	PCPU__SPLIT                                                          \
	"cmp r1, %[expect]\n\t"                                              \
	"bne %l[differs]\n\t"                                                \
	"add r12, %[base], r12\n\t"
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_ASM                                          \
	PCPU__ARM_LOADIDX_GATE                                               \
	"ldr r0, [r12]\n\t"                                                  \
	PCPU__SPLIT                                                          \
	PCPU__ARM_ADD_LOW("r0", "%Q[add]", "%R[add]", "r1")                  \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r0, [r12]\n\t"                                                  \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_IN                                           \
	PCPU__ARM_G_OPERANDS, [base] "r"(base), [vbase] "r"((char *)base + v_off), \
	[expect] "r"(expect), [add] "r"(add),                                \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CLOBBERS "r1", PCPU__ARM_CLOBBERS
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CARRY_ASM                                    \
	PCPU__ARM_LOADIDX_GATE                                               \
	"ldrexd r0, r1, [r12]\n\t"                                           \
	PCPU__SPLIT                                                          \
	"adds r0, r0, %Q[add]\n\t"                                           \
	"adc r1, r1, %R[add]\n\t"                                            \
	PCPU__SPLIT                                                          \
	PCPU__ARM_SPIN("r2")                                                 \
	PCPU__ARM_COMMIT_EXCLUSIVE("r2", "r0", "r1", "r12")                  \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CARRY_IN PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_IN
#define PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CARRY_CLOBBERS "r1", "r2", PCPU__ARM_CLOBBERS_NO_SPIN

/* load_cbne_store_store: if (index != expected) abort;
 * if (*p != expect) return DIFFERS; *p2 = newv2; *p = newv.  (32-bit words)
 * Eight register operands: a test build's spin uses r12 here (free: this
 * section has no other use for it), not lr, so that the compiler keeps
 * enough registers for them. */
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_ASM                                 \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("%[expected]")                                       \
	"ldr r0, %[w]\n\t"                                                   \
	PCPU__SPLIT                                                          \
	"cmp r0, %[expect]\n\t"                                              \
	"bne %l[differs]\n\t"                                                \
	"str %[newv2], %[w2]\n\t"                                            \
	PCPU__ARM_SPIN("r12")                                                \
	"0:\n\t"                                                             \
	"str %[newv], %[w]\n\t"                                              \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_IN                                  \
	PCPU__ARM_G_OPERANDS, [expected] "r"((int32_t)expected), [w] PCPU__ARM_MEM(p), \
	[expect] "r"(expect), [w2] PCPU__ARM_MEM(p2), [newv2] "r"(newv2),    \
	[newv] "r"(newv) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_STORE_STORE_CLOBBERS "memory", "cc", "r0", "r12"

/*
 * this_load_add_cbmask_store: the hierarchical counter's add, on a 64-bit
 * word. While its high word does not change (the carry test), only the
 * low word's changed bits need testing against the mask's low word (the
 * next word), and the low word is the commit:
 *   ... ldr r0, [r12];  adds r2, r0, v.lo;  adcs r1, v.hi, #0;  bne carry;
 *   eor r0, r0, r2;  ldr r1, [r12, #8];  tst r0, r1;  bne unfit;
 *   0: str r2, [r12];  2:
 * The carry section tests both halves: the sum in r2:r3, the changed bits
 * in r0:r1, the mask loaded half by half into lr:
 *   ... ldrexd r0, r1, [r12];  adds r2, r0, v.lo;  adc r3, r1, v.hi;
 *   eor r0, r0, r2;  eor r1, r1, r3;  ldr lr, [r12, #8];  tst r0, lr;
 *   bne unfit;  ldr lr, [r12, #12];  tst r1, lr;  bne unfit;
 *   0: strexd r0, r2, r3, [r12];  2: cmp r0, #0;  bne aborted
 */
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_ASM                            \
	PCPU__ARM_LOAD_IDX16                                                 \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("r12")                                               \
	"add r12, %[base], r12, lsl %[shift]\n\t"                            \
	"ldr r0, [r12]\n\t"                                                  \
	PCPU__SPLIT                                                          \
	"adds r2, r0, %Q[v]\n\t"                                             \
	"adcs r1, %R[v], #0\n\t"                                             \
	"bne %l[carry]\n\t"                                                  \
	"eor r0, r0, r2\n\t"                                                 \
	"ldr r1, [r12, #8]\n\t"                                              \
	PCPU__SPLIT                                                          \
	"tst r0, r1\n\t"                                                     \
	"bne %l[unfit]\n\t"                                                  \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r2, [r12]\n\t"                                                  \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_IN                             \
	PCPU__ARM_G_OPERANDS, [base] "r"(base), [v] "r"(v),                  \
	[shift] "n"(PCPU_SLOT_STRIDE_SHIFT) PCPU__INJECT_INPUT PCPU__IDX16_INPUT
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CLOBBERS "r1", "r2", PCPU__ARM_CLOBBERS
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CARRY_ASM                      \
	PCPU__ARM_LOAD_IDX16                                                 \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("r12")                                               \
	"add r12, %[base], r12, lsl %[shift]\n\t"                            \
	"ldrexd r0, r1, [r12]\n\t"                                           \
	PCPU__SPLIT                                                          \
	"adds r2, r0, %Q[v]\n\t"                                             \
	"adc r3, r1, %R[v]\n\t"                                              \
	"eor r0, r0, r2\n\t"                                                 \
	"eor r1, r1, r3\n\t"                                                 \
	"ldr lr, [r12, #8]\n\t"                                              \
	PCPU__SPLIT                                                          \
	"tst r0, lr\n\t"                                                     \
	"bne %l[unfit]\n\t"                                                  \
	"ldr lr, [r12, #12]\n\t"                                             \
	PCPU__SPLIT                                                          \
	"tst r1, lr\n\t"                                                     \
	"bne %l[unfit]\n\t"                                                  \
	PCPU__ARM_SPIN("r0")                                                 \
	PCPU__ARM_COMMIT_EXCLUSIVE("r0", "r2", "r3", "r12")                  \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CARRY_IN PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_IN
#define PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CARRY_CLOBBERS                 \
	"r1", "r2", "r3", "lr", PCPU__ARM_CLOBBERS_NO_SPIN

/* load_cbne_load_store_add_store: if (index != expected) abort;
 * if (p[1] != gexpect) return DIFFERS (its low word: pseudocode.h);
 * *oldp = p[0]; p[0] += v. The carry test and the low word's commit as in
 * the counter add. Its carry section writes *oldp after the commit, from
 * the sum less v (a store between ldrexd and strexd may clear the
 * exclusive monitor on some cores, and registers are short here: the
 * test builds' spin uses r12, the status register after it). */
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_ASM                        \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("%[expected]")                                       \
	"ldr r0, [%[p], #8]\n\t"                                             \
	PCPU__SPLIT                                                          \
	"cmp r0, %[gexpect]\n\t"                                             \
	"bne %l[differs]\n\t"                                                \
	"ldrd r0, r1, [%[p]]\n\t"                                            \
	PCPU__SPLIT                                                          \
	"strd r0, r1, [%[oldp]]\n\t"                                         \
	PCPU__ARM_ADD_LOW("r0", "%Q[v]", "%R[v]", "r1")                      \
	PCPU__SPLIT                                                          \
	PCPU__INJECT_ASM                                                     \
	"0:\n\t"                                                             \
	"str r0, [%[p]]\n\t"                                                 \
	"2:\n\t"                                                             \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_IN                         \
	PCPU__ARM_G_OPERANDS, [expected] "r"((int32_t)expected), [p] "r"(p), \
	[gexpect] "r"((int32_t)gexpect), [oldp] "r"(oldp), [v] "r"(v) PCPU__INJECT_INPUT
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CLOBBERS "r1", PCPU__ARM_CLOBBERS
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CARRY_ASM                  \
	PCPU__ARM_ARM                                                        \
	PCPU__ARM_CMPEQ("%[expected]")                                       \
	"ldr r0, [%[p], #8]\n\t"                                             \
	PCPU__SPLIT                                                          \
	"cmp r0, %[gexpect]\n\t"                                             \
	"bne %l[differs]\n\t"                                                \
	"ldrexd r0, r1, [%[p]]\n\t"                                          \
	PCPU__SPLIT                                                          \
	"adds r0, r0, %Q[v]\n\t"                                             \
	"adc r1, r1, %R[v]\n\t"                                              \
	PCPU__SPLIT                                                          \
	PCPU__ARM_SPIN("r12")                                                \
	PCPU__ARM_COMMIT_EXCLUSIVE("r12", "r0", "r1", "%[p]")                \
	"subs r0, r0, %Q[v]\n\t"                                             \
	"sbc r1, r1, %R[v]\n\t"                                              \
	"strd r0, r1, [%[oldp]]\n\t"                                         \
	PCPU__ARM_ABORT_TO("aborted")
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CARRY_IN PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_IN
#define PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CARRY_CLOBBERS "r1", PCPU__ARM_CLOBBERS_NO_SPIN

/* ---- not a section ------------------------------------------------------------- */

/* owned_add(p, v) (pcpu/worker.h): *p += v by the word's only writer. As
 * in the sections (see "Carries" at the top): the low word's add, its
 * `str`, and, when the high half changes, the whole word with a 64-bit
 * atomic store instead (__atomic_store_n: an ldrexd/strexd loop on
 * ARMv7), so that no reader ever sees a carry half made. A signal handler
 * of the same thread that adds to the word between the load and the
 * store loses its add, as with the generic version
 * (PCPU_OWNED_ADD_SIGNAL_SAFE 0). */
#define PCPU_OWNED_ADD_SIGNAL_SAFE 0
__attribute__((always_inline)) static inline void pcpu__owned_add(int64_t *p, int64_t v)
{
	__asm__ goto("ldr r0, [%[p]]\n\t"
		     PCPU__ARM_ADD_LOW("r0", "%Q[v]", "%R[v]", "r1")
		     "str r0, [%[p]]\n\t"
		     :
		     : [p] "r"(p), [v] "r"(v), "m"(*p)
		     : "r0", "r1", "cc", "memory"
		     : carry);
	__asm__ __volatile__("" : : : "memory"); /* pcpu__after_asm_goto() */
	return;
carry:
	__asm__ __volatile__("" : : : "memory");
	__atomic_store_n(p, (int64_t)((uint64_t)*p + (uint64_t)v), __ATOMIC_RELAXED);
}
#define pcpu__owned_add pcpu__owned_add

#endif /* PCPU__ARCH_SECTIONS */

#endif /* PCPU_ARCH_ARM_H */
