/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch/common.h
 * What every arch header's sections share: the compiler barrier after an
 * asm goto, the local labels every section uses, and the C side of the
 * test hooks. Not API; include <pcpu/arch.h>.
 *
 * Local labels of a section (GNU as numeric labels: `1f` is the next `1:`):
 *   1: start_ip          0: the commit        2: post-commit (end of range)
 *   3: the descriptor    4: abort_ip (after the signature)
 *   5, 6: PCPU_TEST_INJECT's spin    7, 8: copy loops    9: split branches
 */
#ifndef PCPU_ARCH_COMMON_H
#define PCPU_ARCH_COMMON_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/common.h>"
#endif

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
 * every section for debuggers and checkers). */
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
 * knows where it may leave. Before label 1. */
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
 * arch header supplies the spin itself (PCPU__INJECT_ASM).
 */
#ifdef PCPU_TEST_INJECT
PCPU_BEGIN_DECLS
extern unsigned pcpu__test_inject_spin;
extern __thread unsigned long pcpu__test_inject_aborts;
void pcpu__test_inject_before(void);
PCPU_END_DECLS
#define PCPU__INJECT_BEFORE() pcpu__test_inject_before()
#define PCPU__INJECT_ABORTED() (pcpu__test_inject_aborts++)
/* The operations that read the index themselves, just before arming
 * (`idx16`), read it here in C in test builds, and then call the hook, so
 * that the hook runs between the read and the arming, as it does for the
 * operations given the index: tests/test_stale_index.c moves the thread to
 * another CPU there, and the section's compare must then refuse. The
 * section takes the value from a register (PCPU__IDX16_INPUT). */
#define PCPU__INJECT_BEFORE_IDX16()                                          \
	int64_t pcpu__idx16 = pcpu__rseq_load_index16();                      \
	pcpu__test_inject_before()
#define PCPU__IDX16_INPUT , [idx16] "r"(pcpu__idx16)
#else
#define PCPU__INJECT_BEFORE() ((void)0)
#define PCPU__INJECT_ABORTED() ((void)0)
#define PCPU__INJECT_BEFORE_IDX16() ((void)0)
#define PCPU__IDX16_INPUT
#endif

#endif /* PCPU_ARCH_COMMON_H */
