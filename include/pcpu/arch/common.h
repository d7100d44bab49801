/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/common.h
 * What every port shares, written once: the descriptor and exit-point
 * tables, the compiler barrier after an asm goto, the C side of the test
 * hooks, and the C around each port's assembly -- every section of
 * pcpu/arch/pseudocode.h as a function, built from the macros its port
 * defines. Included by <pcpu/arch.h> after the port's header. Not API;
 * include <pcpu/arch.h>.
 *
 * A port (pcpu/arch/<arch>.h) is its assembly. For each operation OP it
 * implements it defines three macros, and this file makes the function:
 *   PCPU__ARCH_<OP>_ASM       the asm goto template, from the arming to
 *                             the abort handler (the exit points are added
 *                             here);
 *   PCPU__ARCH_<OP>_IN        its input operands, in the port's order
 *                             (the test hooks' inputs included: the order
 *                             decides the registers the compiler picks);
 *   PCPU__ARCH_<OP>_CLOBBERS  its clobbers.
 * The operands name the function's parameters, as listed at each function
 * below. The index loads are two more templates (PCPU__ARCH_LOAD_INDEX,
 * PCPU__ARCH_LOAD_INDEX16, with PCPU__ARCH_INDEX_T and PCPU__ARCH_INDEX16_T,
 * the C types of their output register, and PCPU__ARCH_TLS_IN(off), the
 * operands that address a field of the thread's struct rseq).
 *
 * Local labels of a section (GNU as numeric labels: `1f` is the next `1:`):
 *   1: start_ip          0: the commit        2: post-commit (end of range)
 *   3: the descriptor    4: abort_ip (after the signature)
 *   5, 6: PCPU_TEST_INJECT's spin    7, 8: copy loops    9: split branches
 *   10: a PC-relative anchor (32-bit Arm)
 */
#ifndef PCPU_ARCH_COMMON_H
#define PCPU_ARCH_COMMON_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/common.h>"
#endif

#include <stdint.h>

/* gcc < 8.1 and clang < 13.0.1 miscompile some asm goto (gcc PR 103908,
 * llvm issue 52735); librseq's cure is a compiler barrier on the
 * fall-through and at each label. It costs no instruction, and the values
 * the sections read from pcpu__g are const, so it forces no reload. */
#define pcpu__after_asm_goto() __asm__ __volatile__("" : : : "memory")

#define PCPU__STR(x) #x
#define PCPU__XSTR(x) PCPU__STR(x)

/* Where a descriptor's range ends: after the commit, or, in a deliberately
 * broken test build, at its first byte, so that a preemption landing on
 * the commit itself is not aborted (pcpu/arch/pseudocode.h). */
#ifdef PCPU_TEST_BROKEN_SECTION
#define PCPU__RSEQ_RANGE_END "0f"
#else
#define PCPU__RSEQ_RANGE_END "2f"
#endif

/* Every section a critical section puts something in (its descriptor, the
 * pointer to it, its exit points, its abort handler) is a member of the
 * section group of the code around it (the `?` flag: GNU as, and LLVM's
 * integrated assembler): code the compiler emits as a COMDAT copy -- an
 * inline function, a class member, a template or a lambda emitted out of
 * line in several units, at -O0 for all of them -- takes its descriptors
 * with it. The linker keeps one copy of the group, and with it exactly the
 * descriptors and abort handlers of the code it kept, so a restart lands
 * in the copy that ran. Without the flag, the copies the linker discarded
 * left entries pointing into them: "defined in discarded section ...
 * __rseq_exit_point_array" (issue 38; tests/cxx/link_matrix.sh). Outside
 * a group (a plain function) the flag does nothing. */
#define PCPU__RSEQ_IN_GROUP "?"

/* The two debugger lists (__rseq_cs_ptr_array, __rseq_exit_point_array)
 * are read by debuggers and checkers, never by the program, so nothing
 * refers to them and a link with --gc-sections drops them: every Rust
 * binary (rustc always passes it; pcpu-sys defines this macro), and C or
 * C++ builds that ask for it. Defining PCPU_RSEQ_RETAIN_LISTS before
 * including pcpu gives them the `R` flag (SHF_GNU_RETAIN), which the
 * linker never collects. Not the default: GNU as before 2.36 and LLVM
 * before 13 reject the flag. Cost, in such a link only: the lists keep
 * the descriptors, and those the code, of every critical section in each
 * section the lists are kept from -- an unused function with an add is no
 * longer collected. The descriptors and abort handlers themselves need no
 * flag: the code refers to its descriptor, the descriptor to its abort
 * handler. */
#ifdef PCPU_RSEQ_RETAIN_LISTS
#define PCPU__RSEQ_RETAIN "R"
#else
#define PCPU__RSEQ_RETAIN ""
#endif

/* A 64-bit field of the rseq ABI holding an address or a length: the ABI
 * keeps them 64 bits wide on 32-bit targets too (struct rseq_cs's start_ip,
 * post_commit_offset and abort_ip; librseq's tables), so there the value
 * is the low word and a zero word follows it (little-endian: the only
 * byte order pcpu's 32-bit ports support). */
#if __SIZEOF_POINTER__ == 8
#define PCPU__RSEQ_U64(x) ".quad " x
#elif __SIZEOF_POINTER__ == 4 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define PCPU__RSEQ_U64(x) ".long " x ", 0x0"
#endif

/* The descriptor of the section that starts at label 1 and aborts to label
 * 4, as label 3 in __rseq_cs (32-byte aligned, as the kernel requires),
 * and a pointer to it in __rseq_cs_ptr_array (librseq's layout: a list of
 * every section for debuggers and checkers). Each port's arming macro
 * starts with it. */
#define PCPU__RSEQ_DESCRIPTOR                                                \
	".pushsection __rseq_cs, \"aw" PCPU__RSEQ_IN_GROUP "\"\n\t"          \
	".balign 32\n\t"                                                     \
	"3:\n\t"                                                             \
	".long 0x0, 0x0\n\t"                                                 \
	PCPU__RSEQ_U64("1f") "\n\t"                                         \
	PCPU__RSEQ_U64("(" PCPU__RSEQ_RANGE_END " - 1f)") "\n\t"            \
	PCPU__RSEQ_U64("4f") "\n\t"                                         \
	".popsection\n\t"                                                    \
	".pushsection __rseq_cs_ptr_array, \"aw" PCPU__RSEQ_IN_GROUP           \
	PCPU__RSEQ_RETAIN "\"\n\t"                                          \
	".balign 8\n\t"                                                      \
	PCPU__RSEQ_U64("3b") "\n\t"                                         \
	".popsection\n\t"

/* A jump out of the section (to the asm goto label `label`) that is
 * neither the abort nor the fall-through: (start_ip, exit_ip) in
 * __rseq_exit_point_array, so a debugger stepping through the section
 * knows where it may leave. Before label 1: the functions below put one
 * for each of their labels first in the template. */
#define PCPU__RSEQ_EXIT_POINT(label)                                         \
	".pushsection __rseq_exit_point_array, \"aw" PCPU__RSEQ_IN_GROUP       \
	PCPU__RSEQ_RETAIN "\"\n\t"                                          \
	".balign 8\n\t"                                                      \
	PCPU__RSEQ_U64("1f") "\n\t"                                         \
	PCPU__RSEQ_U64("%l[" label "]") "\n\t"                              \
	".popsection\n\t"

/*
 * Test builds (the program defines PCPU_TEST_INJECT before including pcpu)
 * widen every section with a spin loop of pcpu__test_inject_spin
 * iterations just before its commit, call pcpu__test_inject_before() before
 * each section and count aborts in the thread-local pcpu__test_inject_aborts,
 * so tests can make the abort path run millions of times (librseq's
 * RSEQ_INJECT_ASM idea). The test program defines those three symbols. The
 * port supplies the spin itself (PCPU__INJECT_ASM, PCPU__INJECT_INPUT,
 * PCPU__INJECT_CLOBBER), and may define the C hooks below its own way
 * first (32-bit Arm copies the spin count onto the stack).
 */
#ifdef PCPU_TEST_INJECT
PCPU_BEGIN_DECLS
extern unsigned pcpu__test_inject_spin;
extern __thread unsigned long pcpu__test_inject_aborts;
void pcpu__test_inject_before(void);
PCPU_END_DECLS
#ifndef PCPU__INJECT_BEFORE
#define PCPU__INJECT_BEFORE() pcpu__test_inject_before()
#endif
#define PCPU__INJECT_ABORTED() (pcpu__test_inject_aborts++)
/* The operations that read the index themselves, just before arming
 * (`idx16`), read it here in C in test builds, and then call the hook, so
 * that the hook runs between the read and the arming, as it does for the
 * operations given the index: tests/test_stale_index.c moves the thread to
 * another CPU there, and the section's compare must then refuse. The
 * section takes the value from a register (PCPU__IDX16_INPUT). */
#ifndef PCPU__INJECT_BEFORE_IDX16
#define PCPU__INJECT_BEFORE_IDX16()                                          \
	int64_t pcpu__idx16 = pcpu__rseq_load_index16();                      \
	pcpu__test_inject_before()
#endif
#ifndef PCPU__IDX16_INPUT
#define PCPU__IDX16_INPUT , [idx16] "r"(pcpu__idx16)
#endif
#else
#define PCPU__INJECT_BEFORE() ((void)0)
#define PCPU__INJECT_ABORTED() ((void)0)
#define PCPU__INJECT_BEFORE_IDX16() ((void)0)
#define PCPU__IDX16_INPUT
#endif
#ifndef PCPU__INJECT_ASM
#define PCPU__INJECT_ASM ""
#define PCPU__INJECT_INPUT
#define PCPU__INJECT_CLOBBER
#endif

/* PCPU_TEST_SPLIT_BLOCKS: a branch to the next instruction (the port's
 * PCPU__ARCH_SPLIT_BRANCH), which ends an emulator's translated block
 * there (pcpu/arch/pseudocode.h). */
#ifdef PCPU_TEST_SPLIT_BLOCKS
#define PCPU__SPLIT PCPU__ARCH_SPLIT_BRANCH " 9f\n\t9:\n\t"
#else
#define PCPU__SPLIT ""
#endif

/* How a section's function ends: the fall-through after the commit, and
 * each asm goto label it jumps to, returning that exit's value. */
#define PCPU__RSEQ_RETURN_COMMITTED                                          \
	pcpu__after_asm_goto();                                              \
	return PCPU_RSEQ_COMMITTED
#define PCPU__RSEQ_RETURN_ABORTED                                            \
aborted:                                                                     \
	pcpu__after_asm_goto();                                              \
	PCPU__INJECT_ABORTED();                                              \
	return PCPU_RSEQ_ABORTED
#define PCPU__RSEQ_RETURN(label, value)                                      \
label:                                                                       \
	pcpu__after_asm_goto();                                              \
	return value

/* Ports whose add sections leave for a carry section when an add changes
 * a 64-bit word's high half (32-bit Arm: pcpu/arch/arm.h, "Carries")
 * define PCPU__ARCH_CARRY_SECTIONS, and for each such operation OP the
 * carry section's PCPU__ARCH_<OP>_CARRY_ASM, _IN and _CLOBBERS, with the
 * same operands; its commit's failure is reported after the range, as a
 * jump to `aborted`. The operation's asm goto then has one more label,
 * `carry` (an exit point), where it returns what the carry section does.
 * Other ports' code is unchanged: these expand to nothing there. */
#ifdef PCPU__ARCH_CARRY_SECTIONS
/* A carry section's function: out of line and cold. A carry is rare (once
 * in 2^32 counts of an add of 1), so the hot path's code stays small; and
 * gcc counts an asm goto as one instruction when it places Arm's literal
 * pools, so every inlined one lengthens a function beyond what it thinks
 * (a test's main with dozens of sections inline failed to assemble:
 * "co-processor offset out of range"). */
#define PCPU__CARRY_FUNCTION __attribute__((noinline, cold, unused)) static
#define PCPU__CARRY_EXIT_POINT PCPU__RSEQ_EXIT_POINT("carry")
#define PCPU__CARRY_LABEL , carry
#define PCPU__RSEQ_RETURN_CARRY(call)                                        \
carry:                                                                       \
	pcpu__after_asm_goto();                                              \
	return call
#else
#define PCPU__CARRY_EXIT_POINT
#define PCPU__CARRY_LABEL
#define PCPU__RSEQ_RETURN_CARRY(call)
#endif

/* Ports with carry sections may also have shorter forms of an add whose
 * high word the compiler knows to be 0 or all ones (32-bit Arm's carry
 * test is then one branch on the low add's carry: pcpu/arch/arm.h,
 * PCPU__ARM_ADD_LOW_KNOWN): they define PCPU__ARCH_ADD_HIGH_FORMS, and
 * for OP the asm PCPU__ARCH_<OP>_HIGH0_ASM (high word 0), _HIGH1_ASM (all
 * ones), their operands _HIGH_IN and _HIGH_CLOBBERS. The operation then
 * runs one of three asm gotos, chosen at compile time: only one remains
 * in the code (without optimization, the general one). PCPU__HIGH_IS(v,
 * h): the compiler knows that v's high word is h. */
#if defined(PCPU__ARCH_CARRY_SECTIONS) && defined(PCPU__ARCH_ADD_HIGH_FORMS)
#define PCPU__HIGH_IS(v, h)                                                  \
	(__builtin_constant_p((uint64_t)(v) >> 32) && (uint64_t)(v) >> 32 == (h))
#define PCPU__RSEQ_ADD_HIGH_FORMS(op, labels)                                \
	if (PCPU__HIGH_IS(v, 0)) {                                           \
		__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")                \
			     PCPU__CARRY_EXIT_POINT                          \
			     op##_HIGH0_ASM                                  \
			     :                                               \
			     : op##_HIGH_IN                                  \
			     : op##_HIGH_CLOBBERS                            \
			     : labels);                                      \
	} else if (PCPU__HIGH_IS(v, 0xffffffffu)) {                          \
		__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")                \
			     PCPU__CARRY_EXIT_POINT                          \
			     op##_HIGH1_ASM                                  \
			     :                                               \
			     : op##_HIGH_IN                                  \
			     : op##_HIGH_CLOBBERS                            \
			     : labels);                                      \
	} else
#else
#define PCPU__RSEQ_ADD_HIGH_FORMS(op, labels)
#endif

/* ---- the sections, from the port's macros ------------------------------------ */

#if PCPU__ARCH_SECTIONS && defined(PCPU_ARCH_HAVE_RSEQ)

/* The calling thread's slot index (pseudocode.h), loaded by the port's
 * instruction, which sign-extends it to the output's width. A fresh load at
 * every call (volatile: the kernel changes the field). */
static inline int64_t pcpu__rseq_load_index(void)
{
	PCPU__ARCH_INDEX_T idx;

	__asm__ __volatile__(PCPU__ARCH_LOAD_INDEX
			     : [idx] "=r"(idx)
			     : PCPU__ARCH_TLS_IN((intptr_t)pcpu__g.index_tpoff));
	return idx;
}
#define pcpu__rseq_load_index pcpu__rseq_load_index

/* The field's low 16 bits, zero-extended by the load itself. */
static inline int64_t pcpu__rseq_load_index16(void)
{
	PCPU__ARCH_INDEX16_T idx;

	__asm__ __volatile__(PCPU__ARCH_LOAD_INDEX16
			     : [idx] "=r"(idx)
			     : PCPU__ARCH_TLS_IN((intptr_t)pcpu__g.index_tpoff));
	return idx;
}
#define pcpu__rseq_load_index16 pcpu__rseq_load_index16

/* load_add_store with the rseq offsets passed in. Operands: expected, p, v,
 * csoff, idxoff. */
#ifdef PCPU__ARCH_LOAD_ADD_STORE_AT_ASM
#ifdef PCPU__ARCH_CARRY_SECTIONS
/* The carry section of load_add_store_at takes the offsets from pcpu__g
 * and the index as 32 bits (what its compare uses): three arguments, all
 * in registers, so that the caller's loop sets up nothing for the call. */
PCPU__CARRY_FUNCTION int
pcpu__rseq_load_add_store_at_carry(int64_t *p, int32_t expected, int64_t v)
{
	intptr_t csoff = (intptr_t)pcpu__g.cs_tpoff, idxoff = (intptr_t)pcpu__g.index_tpoff;

	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__ARCH_LOAD_ADD_STORE_AT_CARRY_ASM
		     :
		     : PCPU__ARCH_LOAD_ADD_STORE_AT_CARRY_IN
		     : PCPU__ARCH_LOAD_ADD_STORE_AT_CARRY_CLOBBERS
		     : aborted);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
}
#endif
__attribute__((always_inline)) static inline int
pcpu__rseq_load_add_store_at(int64_t expected, int64_t *p, int64_t v, intptr_t csoff,
			     intptr_t idxoff)
{
	PCPU__INJECT_BEFORE();
	PCPU__RSEQ_ADD_HIGH_FORMS(PCPU__ARCH_LOAD_ADD_STORE_AT, aborted PCPU__CARRY_LABEL)
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__CARRY_EXIT_POINT
		     PCPU__ARCH_LOAD_ADD_STORE_AT_ASM
		     : /* asm goto has no outputs */
		     : PCPU__ARCH_LOAD_ADD_STORE_AT_IN
		     : PCPU__ARCH_LOAD_ADD_STORE_AT_CLOBBERS
		     : aborted PCPU__CARRY_LABEL);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN_CARRY(pcpu__rseq_load_add_store_at_carry(p, (int32_t)expected, v));
}
#define pcpu__rseq_load_add_store_at pcpu__rseq_load_add_store_at
#endif

/* this_load_add_store (the counter add). Operands: base, v. */
#ifdef PCPU__ARCH_THIS_LOAD_ADD_STORE_ASM
#ifdef PCPU__ARCH_CARRY_SECTIONS
PCPU__CARRY_FUNCTION int
pcpu__rseq_this_load_add_store_carry(int64_t *base, int64_t v)
{
	PCPU__INJECT_BEFORE_IDX16();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__ARCH_THIS_LOAD_ADD_STORE_CARRY_ASM
		     :
		     : PCPU__ARCH_THIS_LOAD_ADD_STORE_CARRY_IN
		     : PCPU__ARCH_THIS_LOAD_ADD_STORE_CARRY_CLOBBERS
		     : aborted);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
}
#endif
__attribute__((always_inline)) static inline int
pcpu_rseq_this_load_add_store(int64_t *base, int64_t v)
{
	PCPU__INJECT_BEFORE_IDX16();
	PCPU__RSEQ_ADD_HIGH_FORMS(PCPU__ARCH_THIS_LOAD_ADD_STORE, aborted PCPU__CARRY_LABEL)
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__CARRY_EXIT_POINT
		     PCPU__ARCH_THIS_LOAD_ADD_STORE_ASM
		     :
		     : PCPU__ARCH_THIS_LOAD_ADD_STORE_IN
		     : PCPU__ARCH_THIS_LOAD_ADD_STORE_CLOBBERS
		     : aborted PCPU__CARRY_LABEL);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN_CARRY(pcpu__rseq_this_load_add_store_carry(base, v));
}
#define pcpu_rseq_this_load_add_store pcpu_rseq_this_load_add_store
#endif

/* this_add2 (the histogram's pair). Operands: base, a, b. A port whose
 * target has no one-store commit of 16 bytes defines
 * PCPU__ARCH_ADD2_AS_TWO_ADDS instead: the pair is then two counter adds,
 * the count's, then the sum's, each on the thread's slot at that moment;
 * ABORTED only if the first did not commit (nothing written), and once it
 * did, the second is retried until it commits (never half an add). Each
 * word stays exact; the count and the sum of one record may land on two
 * slots if the thread migrates between them, which no reader can tell from
 * a preemption between its two loads (readers load the two words
 * separately on every target). A port with carry sections makes a pair
 * whose add changes a high half the same two adds (its section leaves for
 * `carry` before writing anything). */
#if defined(PCPU__ARCH_THIS_LOAD_ADD_STORE_ASM) &&                            \
	(defined(PCPU__ARCH_ADD2_AS_TWO_ADDS) || defined(PCPU__ARCH_CARRY_SECTIONS))
__attribute__((always_inline)) static inline int
pcpu__rseq_this_add2_two_adds(int64_t *base, int64_t a, int64_t b)
{
	if (PCPU_UNLIKELY(pcpu_rseq_this_load_add_store(base, a) != PCPU_RSEQ_COMMITTED))
		return PCPU_RSEQ_ABORTED;
	while (PCPU_UNLIKELY(pcpu_rseq_this_load_add_store(base + 1, b) != PCPU_RSEQ_COMMITTED))
		;
	return PCPU_RSEQ_COMMITTED;
}
#endif
#ifdef PCPU__ARCH_THIS_ADD2_ASM
#ifdef PCPU__ARCH_CARRY_SECTIONS
/* Out of line, as the carry sections are: inlined, the two adds' sections
 * at every record made functions that record into histograms too long for
 * gcc's literal pool placement (test_expose.c failed to assemble). */
PCPU__CARRY_FUNCTION int
pcpu__rseq_this_add2_carry(int64_t *base, int64_t a, int64_t b)
{
	return pcpu__rseq_this_add2_two_adds(base, a, b);
}
#endif
__attribute__((always_inline)) static inline int
pcpu__rseq_this_add2(int64_t *base, int64_t a, int64_t b)
{
	PCPU__INJECT_BEFORE_IDX16();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__CARRY_EXIT_POINT
		     PCPU__ARCH_THIS_ADD2_ASM
		     :
		     : PCPU__ARCH_THIS_ADD2_IN
		     : PCPU__ARCH_THIS_ADD2_CLOBBERS
		     : aborted PCPU__CARRY_LABEL);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN_CARRY(pcpu__rseq_this_add2_carry(base, a, b));
}
#define pcpu__rseq_this_add2 pcpu__rseq_this_add2
#elif defined(PCPU__ARCH_ADD2_AS_TWO_ADDS) && defined(PCPU__ARCH_THIS_LOAD_ADD_STORE_ASM)
__attribute__((always_inline)) static inline int
pcpu__rseq_this_add2(int64_t *base, int64_t a, int64_t b)
{
	return pcpu__rseq_this_add2_two_adds(base, a, b);
}
#define pcpu__rseq_this_add2 pcpu__rseq_this_add2
#endif

/* load_cbne_store. Operands: expected, p, expect, newv. */
#ifdef PCPU__ARCH_LOAD_CBNE_STORE_ASM
__attribute__((always_inline)) static inline int
pcpu_rseq_load_cbne_store(int64_t expected, intptr_t *p, intptr_t expect, intptr_t newv)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__RSEQ_EXIT_POINT("differs")
		     PCPU__ARCH_LOAD_CBNE_STORE_ASM
		     :
		     : PCPU__ARCH_LOAD_CBNE_STORE_IN
		     : PCPU__ARCH_LOAD_CBNE_STORE_CLOBBERS
		     : aborted, differs);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN(differs, PCPU_RSEQ_DIFFERS);
}
#define pcpu_rseq_load_cbne_store pcpu_rseq_load_cbne_store
#endif

/* load_cbne_store_store. Operands: expected, p, expect, p2, newv2, newv. */
#ifdef PCPU__ARCH_LOAD_CBNE_STORE_STORE_ASM
__attribute__((always_inline)) static inline int
pcpu_rseq_load_cbne_store_store(int64_t expected, intptr_t *p, intptr_t expect, intptr_t *p2,
				intptr_t newv2, intptr_t newv)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__RSEQ_EXIT_POINT("differs")
		     PCPU__ARCH_LOAD_CBNE_STORE_STORE_ASM
		     :
		     : PCPU__ARCH_LOAD_CBNE_STORE_STORE_IN
		     : PCPU__ARCH_LOAD_CBNE_STORE_STORE_CLOBBERS
		     : aborted, differs);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN(differs, PCPU_RSEQ_DIFFERS);
}
#define pcpu_rseq_load_cbne_store_store pcpu_rseq_load_cbne_store_store
#endif

/* this_load_cbne_load_add_store (ref, rwlock). Operands: base, v_off,
 * expect, add. No index compare: the index is read inside the section, so
 * the section has no jump to `aborted` (the kernel's abort lands there). */
#ifdef PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_ASM
#ifdef PCPU__ARCH_CARRY_SECTIONS
/* Its carry section jumps to `aborted` only after its range (a failed
 * commit). */
PCPU__CARRY_FUNCTION int
pcpu__rseq_this_load_cbne_load_add_store_carry(void *base, long v_off, intptr_t expect,
					       int64_t add)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("differs")
		     PCPU__RSEQ_EXIT_POINT("unregistered")
		     PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CARRY_ASM
		     :
		     : PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CARRY_IN
		     : PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CARRY_CLOBBERS
		     : aborted, differs, unregistered);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN(differs, PCPU_RSEQ_DIFFERS);
	PCPU__RSEQ_RETURN(unregistered, PCPU_RSEQ_NO_INDEX);
}
#endif
__attribute__((always_inline)) static inline int
pcpu_rseq_this_load_cbne_load_add_store(void *base, long v_off, intptr_t expect, int64_t add)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("differs")
		     PCPU__RSEQ_EXIT_POINT("unregistered")
		     PCPU__CARRY_EXIT_POINT
		     PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_ASM
		     :
		     : PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_IN
		     : PCPU__ARCH_THIS_LOAD_CBNE_LOAD_ADD_STORE_CLOBBERS
		     : aborted, differs, unregistered PCPU__CARRY_LABEL);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN(differs, PCPU_RSEQ_DIFFERS);
	PCPU__RSEQ_RETURN(unregistered, PCPU_RSEQ_NO_INDEX);
	PCPU__RSEQ_RETURN_CARRY(pcpu__rseq_this_load_cbne_load_add_store_carry(base, v_off, expect,
									      add));
}
#define pcpu_rseq_this_load_cbne_load_add_store pcpu_rseq_this_load_cbne_load_add_store
#endif

/* this_load_add_cbmask_store (the hierarchical counter's add). Operands:
 * base, v. The slot's mask is the word after base's. */
#ifdef PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_ASM
#ifdef PCPU__ARCH_CARRY_SECTIONS
PCPU__CARRY_FUNCTION int
pcpu__rseq_this_load_add_cbmask_store_carry(int64_t *base, int64_t v)
{
	PCPU__INJECT_BEFORE_IDX16();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__RSEQ_EXIT_POINT("unfit")
		     PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CARRY_ASM
		     :
		     : PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CARRY_IN
		     : PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CARRY_CLOBBERS
		     : aborted, unfit);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN(unfit, PCPU_RSEQ_UNFIT);
}
#endif
__attribute__((always_inline)) static inline int
pcpu__rseq_this_load_add_cbmask_store(int64_t *base, int64_t v)
{
	PCPU__INJECT_BEFORE_IDX16();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__RSEQ_EXIT_POINT("unfit")
		     PCPU__CARRY_EXIT_POINT
		     PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_ASM
		     :
		     : PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_IN
		     : PCPU__ARCH_THIS_LOAD_ADD_CBMASK_STORE_CLOBBERS
		     : aborted, unfit PCPU__CARRY_LABEL);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN(unfit, PCPU_RSEQ_UNFIT);
	PCPU__RSEQ_RETURN_CARRY(pcpu__rseq_this_load_add_cbmask_store_carry(base, v));
}
#define pcpu__rseq_this_load_add_cbmask_store pcpu__rseq_this_load_add_cbmask_store
#endif

/* load_cbne_load_store_add_store (the hierarchical counter's carrying
 * add). Operands: expected, p, gexpect, oldp, v. The gate is the word after
 * p's. */
#ifdef PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_ASM
#ifdef PCPU__ARCH_CARRY_SECTIONS
PCPU__CARRY_FUNCTION int
pcpu__rseq_load_cbne_load_store_add_store_carry(int64_t expected, int64_t *p, int64_t gexpect,
						int64_t *oldp, int64_t v)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__RSEQ_EXIT_POINT("differs")
		     PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CARRY_ASM
		     :
		     : PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CARRY_IN
		     : PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CARRY_CLOBBERS
		     : aborted, differs);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN(differs, PCPU_RSEQ_DIFFERS);
}
#endif
__attribute__((always_inline)) static inline int
pcpu__rseq_load_cbne_load_store_add_store(int64_t expected, int64_t *p, int64_t gexpect,
					  int64_t *oldp, int64_t v)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__RSEQ_EXIT_POINT("aborted")
		     PCPU__RSEQ_EXIT_POINT("differs")
		     PCPU__CARRY_EXIT_POINT
		     PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_ASM
		     :
		     : PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_IN
		     : PCPU__ARCH_LOAD_CBNE_LOAD_STORE_ADD_STORE_CLOBBERS
		     : aborted, differs PCPU__CARRY_LABEL);
	PCPU__RSEQ_RETURN_COMMITTED;
	PCPU__RSEQ_RETURN_ABORTED;
	PCPU__RSEQ_RETURN(differs, PCPU_RSEQ_DIFFERS);
	PCPU__RSEQ_RETURN_CARRY(pcpu__rseq_load_cbne_load_store_add_store_carry(expected, p, gexpect,
										oldp, v));
}
#define pcpu__rseq_load_cbne_load_store_add_store pcpu__rseq_load_cbne_load_store_add_store
#endif

/* ---- the per-CPU stacks: the port's PCPU__ARCH_STACK_H ------------------------ *
 * Operands: expected, cache (the struct pcpu_rseq_stack), and out / p /
 * src, k / dst, k. Each jumps to `aborted` (the index compare), `differs`
 * (the gate was not 0) or `unfit` (empty, full, no room, too few), or falls
 * through once committed. */

#ifdef PCPU__ARCH_STACK_H
#include PCPU__ARCH_STACK_H
#endif

/* The jumps out of every stack section but the abort. */
#define PCPU__STACK_EXIT_POINTS                                              \
	PCPU__RSEQ_EXIT_POINT("aborted")                                     \
	PCPU__RSEQ_EXIT_POINT("differs")                                     \
	PCPU__RSEQ_EXIT_POINT("unfit")

/* How every stack section ends. */
#define PCPU__STACK_RETURNS                                                  \
	PCPU__RSEQ_RETURN_COMMITTED;                                         \
	PCPU__RSEQ_RETURN_ABORTED;                                           \
	PCPU__RSEQ_RETURN(differs, PCPU_RSEQ_DIFFERS);                       \
	PCPU__RSEQ_RETURN(unfit, PCPU_RSEQ_UNFIT)

#ifdef PCPU__ARCH_STACK_POP_ASM
__attribute__((always_inline)) static inline int
pcpu_rseq_stack_pop(int64_t expected, struct pcpu_rseq_stack *cache, void **out)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__STACK_EXIT_POINTS
		     PCPU__ARCH_STACK_POP_ASM
		     :
		     : PCPU__ARCH_STACK_POP_IN
		     : PCPU__ARCH_STACK_POP_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__STACK_RETURNS;
}
#define pcpu_rseq_stack_pop pcpu_rseq_stack_pop
#endif

#ifdef PCPU__ARCH_STACK_PUSH_ASM
__attribute__((always_inline)) static inline int
pcpu_rseq_stack_push(int64_t expected, struct pcpu_rseq_stack *cache, void *p)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__STACK_EXIT_POINTS
		     PCPU__ARCH_STACK_PUSH_ASM
		     :
		     : PCPU__ARCH_STACK_PUSH_IN
		     : PCPU__ARCH_STACK_PUSH_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__STACK_RETURNS;
}
#define pcpu_rseq_stack_push pcpu_rseq_stack_push
#endif

#ifdef PCPU__ARCH_STACK_PUSH_MANY_ASM
__attribute__((always_inline)) static inline int
pcpu_rseq_stack_push_many(int64_t expected, struct pcpu_rseq_stack *cache, void *const *src,
			  int64_t k)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__STACK_EXIT_POINTS
		     PCPU__ARCH_STACK_PUSH_MANY_ASM
		     :
		     : PCPU__ARCH_STACK_PUSH_MANY_IN
		     : PCPU__ARCH_STACK_PUSH_MANY_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__STACK_RETURNS;
}
#define pcpu_rseq_stack_push_many pcpu_rseq_stack_push_many
#endif

#ifdef PCPU__ARCH_STACK_POP_MANY_ASM
__attribute__((always_inline)) static inline int
pcpu_rseq_stack_pop_many(int64_t expected, struct pcpu_rseq_stack *cache, void **dst, int64_t k)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__STACK_EXIT_POINTS
		     PCPU__ARCH_STACK_POP_MANY_ASM
		     :
		     : PCPU__ARCH_STACK_POP_MANY_IN
		     : PCPU__ARCH_STACK_POP_MANY_CLOBBERS
		     : aborted, differs, unfit);
	PCPU__STACK_RETURNS;
}
#define pcpu_rseq_stack_pop_many pcpu_rseq_stack_pop_many
#endif

#endif /* PCPU__ARCH_SECTIONS && PCPU_ARCH_HAVE_RSEQ */

#endif /* PCPU_ARCH_COMMON_H */
