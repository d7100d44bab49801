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
 * its struct rseq's rseq_cs field ("arming"). If the thread is preempted,
 * migrated or signalled while its instruction pointer is in [start_ip,
 * start_ip + post_commit_offset), the kernel moves it to abort_ip instead of
 * resuming, so the section either runs start to end on one CPU,
 * uninterrupted, or its last instruction (the commit) never executes.
 *
 * The four bytes before abort_ip must equal the signature the thread's rseq
 * area was registered with (PCPU__RSEQ_SIG, glibc's and pcpu's). They are
 * the displacement of a `ud1` instruction, so a stray jump into them traps.
 *
 * Operands are %fs-relative: the thread's struct rseq is at a fixed offset
 * from the thread pointer (pcpu__g, set once per process), so the section
 * addresses `%fs:offset` directly and never loads the thread pointer.
 *
 * Why an unlocked `addq` is a correct commit: only threads that read the same
 * slot index in their area write a slot's word, the kernel guarantees at most
 * one such thread runs a section at a time (the index is its CPU, or its
 * mm_cid, unique among the mm's running threads), and an interrupt lands
 * between instructions, never inside the read-modify-write.
 *
 * Test builds (the program defines PCPU_TEST_INJECT before including pcpu)
 * widen every section with a spin loop of pcpu__test_inject_spin iterations
 * between arming and commit, call pcpu__test_inject_before() before each
 * section and count aborts in the thread-local pcpu__test_inject_aborts, so
 * tests can make the abort path run millions of times (librseq's
 * RSEQ_INJECT_ASM idea). The test program defines those three symbols.
 */
#ifndef PCPU_ARCH_X86_64_H
#define PCPU_ARCH_X86_64_H

#ifndef PCPU__ARCH_H_INSIDE
#error "include <pcpu/arch.h>, not <pcpu/arch/x86_64.h>"
#endif

#include <stdint.h>

#define PCPU_ARCH_HAVE_RSEQ 1

/* The signature, once: as a number for the rseq() system call and as text
 * for the assembler. */
#define PCPU__RSEQ_SIG_ASM "0x53053053"
#define PCPU__RSEQ_SIG 0x53053053

/* The x86-64 TLS ABI keeps the thread pointer at %fs:0. Slow paths only;
 * the sections address the area %fs-relative. Not volatile: it is constant
 * for a thread, so the compiler may reuse it. */
static inline char *pcpu__arch_thread_pointer(void)
{
	char *tp;
	__asm__("movq %%fs:0, %0" : "=r"(tp));
	return tp;
}

/* gcc < 8.1 and clang < 13.0.1 miscompile some asm goto (gcc PR 103908,
 * llvm issue 52735); librseq's cure is a compiler barrier on the
 * fall-through and at each label. It costs no instruction, and the values
 * the sections read from pcpu__g are const, so it forces no reload. */
#define pcpu__after_asm_goto() __asm__ __volatile__("" : : : "memory")

#ifdef PCPU_TEST_INJECT
PCPU_BEGIN_DECLS
extern unsigned pcpu__test_inject_spin;
extern __thread unsigned long pcpu__test_inject_aborts;
void pcpu__test_inject_before(void);
PCPU_END_DECLS
#define PCPU__INJECT_ASM                                                     \
	"movl pcpu__test_inject_spin(%%rip), %%ecx\n\t"                       \
	"testl %%ecx, %%ecx\n\t"                                             \
	"jz 6f\n\t"                                                          \
	"5:\n\t"                                                             \
	"decl %%ecx\n\t"                                                     \
	"jnz 5b\n\t"                                                         \
	"6:\n\t"
#define PCPU__INJECT_CLOBBER , "rcx"
#define PCPU__INJECT_BEFORE() pcpu__test_inject_before()
#define PCPU__INJECT_ABORTED() (pcpu__test_inject_aborts++)
#else
#define PCPU__INJECT_ASM ""
#define PCPU__INJECT_CLOBBER
#define PCPU__INJECT_BEFORE() ((void)0)
#define PCPU__INJECT_ABORTED() ((void)0)
#endif

/* Descriptor for a section that starts at local label 1, commits with the
 * instruction ending at label 2, and aborts to label 4 (signature before);
 * then arms it: rseq_cs = &descriptor. */
#define PCPU__X86_RSEQ_ARM(cs_operand)                                       \
	".pushsection __rseq_cs, \"aw\"\n\t"                                 \
	".balign 32\n\t"                                                     \
	"3:\n\t"                                                             \
	".long 0x0, 0x0\n\t"                                                 \
	".quad 1f, (2f - 1f), 4f\n\t"                                        \
	".popsection\n\t"                                                    \
	"leaq 3b(%%rip), %%rax\n\t"                                          \
	"movq %%rax, %%fs:(" cs_operand ")\n\t"

/* The same, with the descriptor's address through a register the compiler
 * picks (an early-clobber output), for sections whose operands are already
 * in registers the compiler would otherwise have to move out of %rax. */
#define PCPU__X86_RSEQ_ARM_VIA(cs_operand, scratch)                          \
	".pushsection __rseq_cs, \"aw\"\n\t"                                 \
	".balign 32\n\t"                                                     \
	"3:\n\t"                                                             \
	".long 0x0, 0x0\n\t"                                                 \
	".quad 1f, (2f - 1f), 4f\n\t"                                        \
	".popsection\n\t"                                                    \
	"leaq 3b(%%rip), " scratch "\n\t"                                    \
	"movq " scratch ", %%fs:(" cs_operand ")\n\t"

#define PCPU__X86_RSEQ_ABORT_TO(label)                                       \
	".pushsection __rseq_failure, \"ax\"\n\t"                            \
	".byte 0x0f, 0xb9, 0x3d\n\t"                                         \
	".long " PCPU__RSEQ_SIG_ASM "\n\t"                                   \
	"4:\n\t"                                                             \
	"jmp %l[" label "]\n\t"                                              \
	".popsection\n\t"

/* The calling thread's slot index: its rseq area's cpu_id or mm_cid (the
 * process's choice), sign-extended by the load itself (movslq), so it can
 * index memory without another instruction. Negative when the area is not
 * registered: the caller then takes its slow path. A fresh load every time
 * (the kernel changes the field when the thread moves). */
static inline int64_t pcpu__rseq_load_index(void)
{
	int64_t idx;

	__asm__ __volatile__("movslq %%fs:(%1), %0"
			     : "=r"(idx)
			     : "r"((intptr_t)pcpu__g.index_tpoff));
	return idx;
}

/* The index for sections that compare it with the field before they use
 * it (rseq_cmpeq_addv_indexed, rseq_cmpeq_add2v_indexed, and
 * rseq_cmpeq_addv_at in pcpu_counter_add_many()): the field's low 16 bits,
 * zero-extended by the load itself (movzwl). A registered index is below
 * the possible CPUs (at most 8192 on Linux), so it reads whole. A negative
 * one, an area not registered (-1, -2), reads as 0xffff or 0xfffe: never
 * equal to the field's 32 bits, so the section's own compare leaves for
 * the slow path, and no sign test is needed. Never negative, so not for
 * code that indexes memory with it outside such a section. */
static inline int64_t pcpu__rseq_load_index16(void)
{
	int64_t idx;

	__asm__ __volatile__("movzwl %%fs:(%1), %k0"
			     : "=r"(idx)
			     : "r"((intptr_t)pcpu__g.index_tpoff));
	return idx;
}

/*
 * rseq_cmpeq_addv_at: if (index != expected) abort; *p += v;   (commit: the add)
 *
 * With the two TLS offsets passed in (csoff = pcpu__g.cs_tpoff, idxoff =
 * pcpu__g.index_tpoff): rseq_cmpeq_addv below is this with pcpu__g's, and
 * a loop of sections reads them once (pcpu_counter_add_many()). GCC reloads a
 * value it knows to be a load from pcpu__g before each section rather than
 * keep it in a register; the caller's empty asm on the copies hides that,
 * and the data plane's add_many then runs the hand-written ideal's five
 * instructions per section (bench/README.md).
 */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_addv_at(int64_t expected, int64_t *p, int64_t v, intptr_t csoff, intptr_t idxoff)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__X86_RSEQ_ARM("%[cs]")
		     "1:\n\t"
		     "cmpl %k[expected], %%fs:(%[idx])\n\t"
		     "jnz %l[aborted]\n\t"
		     PCPU__INJECT_ASM
		     "addq %[v], %[target]\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     : /* asm goto has no outputs */
		     : [cs] "r"(csoff), [idx] "r"(idxoff),
		       [expected] "r"(expected), [target] "m"(*p), [v] "er"(v)
		     : "memory", "cc", "rax" PCPU__INJECT_CLOBBER
		     : aborted);
	pcpu__after_asm_goto();
	return 0;
aborted:
	pcpu__after_asm_goto();
	PCPU__INJECT_ABORTED();
	return 1;
}

/*
 * rseq_cmpeq_addv: rseq_cmpeq_addv_at with the offsets read from pcpu__g.
 *
 * Returns 0 once the add is committed, 1 if the section aborted or the
 * thread is no longer on slot `expected` (nothing written).
 */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_addv(int64_t expected, int64_t *p, int64_t v)
{
	return pcpu__rseq_cmpeq_addv_at(expected, p, v, (intptr_t)pcpu__g.cs_tpoff,
					(intptr_t)pcpu__g.index_tpoff);
}

/*
 * rseq_cmpeq_addv_indexed:
 *   if (index != idx) abort;
 *   *(int64_t *)(base + idx * PCPU_SLOT_STRIDE) += v;     (commit: the add)
 *
 * The counter add: rseq_cmpeq_addv with the slot's address computed inside
 * the section from the index register itself, which the shift then
 * overwrites -- the shape of a hand-written minimal add (read the index,
 * arm, compare, shift, add), with no copy of the index kept for the
 * compare. The register is an output of the asm goto for that, which needs
 * gcc >= 11 or clang >= 11; older compilers get rseq_cmpeq_addv (one
 * register move more).
 *
 * Why the index is read before arming and compared inside, rather than
 * read once inside (rseq_loadidx_cmpeqv_addv's way): the add's address
 * then depends on no load issued after the arming store. Measured with the
 * mm_cid index, reading it inside made the add 1.22-1.35x the minimal add,
 * against 1.03-1.07x this way (bench/README.md).
 *
 * `idx` comes from pcpu__rseq_load_index16(): an unregistered area's
 * negative index reads as 0xffff or 0xfffe, which the compare finds unequal
 * to the field, so it leaves for the slow path with no test of its own.
 * The add is then the hand-written minimal add, instruction for
 * instruction. A sign test costs a third branch per add: as a `js` on the
 * shift's flags it measured 1.02-1.05x the minimal add on an AMD Zen 4
 * (against 1.04-1.08x with the test in C before arming), and 1.23-1.27x
 * on a Zen 5, where the loop of adds is bound by its branches
 * (bench/README.md, paired incr). The arming store made first is harmless
 * on an unregistered area: the kernel does not read it.
 *
 * Returns 0 once the add is committed, 1 if the section aborted or the
 * thread is no longer on slot `idx` (or never was: unregistered); nothing
 * written then.
 */
#if (defined(__clang__) && __clang_major__ >= 11) || (!defined(__clang__) && __GNUC__ >= 11)
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_addv_indexed(int64_t idx, int64_t *base, int64_t v)
{
	intptr_t scratch;

	PCPU__INJECT_BEFORE();
	__asm__ __volatile__ goto(PCPU__X86_RSEQ_ARM_VIA("%[cs]", "%[scratch]")
		     "1:\n\t"
		     "cmpl %k[idx], %%fs:(%[idxoff])\n\t"
		     "jnz %l[aborted]\n\t"
		     "shlq %[shift], %[idx]\n\t"
		     PCPU__INJECT_ASM
		     "addq %[v], (%[base], %[idx])\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     : [idx] "+r"(idx), [scratch] "=&r"(scratch)
		     : [cs] "r"((intptr_t)pcpu__g.cs_tpoff),
		       [idxoff] "r"((intptr_t)pcpu__g.index_tpoff), [base] "r"(base), [v] "er"(v),
		       [shift] "n"(PCPU_SLOT_STRIDE_SHIFT)
		     : "memory", "cc" PCPU__INJECT_CLOBBER
		     : aborted);
	pcpu__after_asm_goto();
	return 0;
aborted:
	pcpu__after_asm_goto();
	PCPU__INJECT_ABORTED();
	return 1;
}
#else
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_addv_indexed(int64_t idx, int64_t *base, int64_t v)
{
	/* idx from pcpu__rseq_load_index16(): never negative; an unregistered
	 * area's fails the section's compare before the address is used. */
	return pcpu__rseq_cmpeq_addv(idx, (int64_t *)((char *)base + (idx << PCPU_SLOT_STRIDE_SHIFT)), v);
}
#endif

/*
 * rseq_cmpeq_add2v_indexed:
 *   if (index != idx) abort;
 *   p = (int64_t *)(base + idx * PCPU_SLOT_STRIDE);
 *   p[0] += a; p[1] += b;             (commit: ONE 16-byte store of both)
 *
 * Two adds under one commit (a histogram bucket's count and sum): the pair
 * is loaded into an SSE register, (a, b) added to it, and one `movdqa`
 * stores both words. A preemption, migration or signal lands before that
 * store (abort: nothing written) or after it (both adds done), never
 * between two stores -- two scalar stores could not be a section, as the
 * retry after an abort between them would add the first word twice.
 * `base` must be 16-byte aligned: movdqa faults otherwise, and an aligned
 * pair never straddles a cache line. A reader on another CPU loads the two
 * words separately and may see one add and not yet the other; each word is
 * exact. SSE2 is part of x86-64, so every x86-64 CPU runs this.
 *
 * gcc/clang >= 11 (outputs of asm goto): the index register is shifted in
 * place as in rseq_cmpeq_addv_indexed; older compilers compute the address
 * before arming and use a fixed scratch register.
 *
 * `idx` comes from pcpu__rseq_load_index16(), as in
 * rseq_cmpeq_addv_indexed: an unregistered area fails the compare.
 *
 * Returns 0 once both adds are committed, 1 if the section aborted, the
 * thread is no longer on slot `idx` (or never was: unregistered); nothing
 * written then.
 */
typedef long long pcpu__v2i64 __attribute__((vector_size(16)));

#if (defined(__clang__) && __clang_major__ >= 11) || (!defined(__clang__) && __GNUC__ >= 11)
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_add2v_indexed(int64_t idx, int64_t *base, int64_t a, int64_t b)
{
	pcpu__v2i64 add, hi;
	intptr_t scratch;

	PCPU__INJECT_BEFORE();
	/* (a, b) into one SSE register straight from the general ones: left
	 * to itself, gcc 12 goes through a stack slot (a store and a movhps
	 * load) on every record. */
	__asm__ __volatile__ goto("movq %[a], %[add]\n\t"
		     "movq %[b], %[hi]\n\t"
		     "punpcklqdq %[hi], %[add]\n\t"
		     PCPU__X86_RSEQ_ARM_VIA("%[cs]", "%[scratch]")
		     "1:\n\t"
		     "cmpl %k[idx], %%fs:(%[idxoff])\n\t"
		     "jnz %l[aborted]\n\t"
		     "shlq %[shift], %[idx]\n\t"
		     "paddq (%[base], %[idx]), %[add]\n\t"
		     PCPU__INJECT_ASM /* widens load..commit, the window that matters */
		     "movdqa %[add], (%[base], %[idx])\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     : [idx] "+r"(idx), [scratch] "=&r"(scratch), [add] "=&x"(add), [hi] "=&x"(hi)
		     : [cs] "r"((intptr_t)pcpu__g.cs_tpoff),
		       [idxoff] "r"((intptr_t)pcpu__g.index_tpoff), [base] "r"(base), [a] "r"(a),
		       [b] "r"(b), [shift] "n"(PCPU_SLOT_STRIDE_SHIFT)
		     : "memory", "cc" PCPU__INJECT_CLOBBER
		     : aborted);
	pcpu__after_asm_goto();
	return 0;
aborted:
	pcpu__after_asm_goto();
	PCPU__INJECT_ABORTED();
	return 1;
}
#else
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_add2v_indexed(int64_t idx, int64_t *base, int64_t a, int64_t b)
{
	pcpu__v2i64 add = { (long long)a, (long long)b };
	pcpu__v2i64 *p = (pcpu__v2i64 *)((char *)base + (idx << PCPU_SLOT_STRIDE_SHIFT));

	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__X86_RSEQ_ARM("%[cs]")
		     "1:\n\t"
		     "cmpl %k[expected], %%fs:(%[idxoff])\n\t"
		     "jnz %l[aborted]\n\t"
		     "movdqa %[target], %%xmm15\n\t"
		     "paddq %[add], %%xmm15\n\t"
		     PCPU__INJECT_ASM
		     "movdqa %%xmm15, %[target]\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     :
		     : [cs] "r"((intptr_t)pcpu__g.cs_tpoff),
		       [idxoff] "r"((intptr_t)pcpu__g.index_tpoff), [expected] "r"(idx),
		       [target] "m"(*p), [add] "x"(add)
		     : "memory", "cc", "rax", "xmm15" PCPU__INJECT_CLOBBER
		     : aborted);
	pcpu__after_asm_goto();
	return 0;
aborted:
	pcpu__after_asm_goto();
	PCPU__INJECT_ABORTED();
	return 1;
}
#endif

/*
 * rseq_cmpeq_cmpeqv_storev:
 *   if (index != expected) abort;
 *   if (*p != expect) return 2;
 *   *p = newv;                                          (commit: the store)
 *
 * Returns 0 once stored, 1 if aborted or no longer on slot `expected`,
 * 2 if *p did not hold `expect` (nothing written).
 */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqv_storev(int64_t expected, intptr_t *p, intptr_t expect,
			       intptr_t newv)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__X86_RSEQ_ARM("%[cs]")
		     "1:\n\t"
		     "cmpl %k[expected], %%fs:(%[idx])\n\t"
		     "jnz %l[aborted]\n\t"
		     "cmpq %[expect], %[target]\n\t"
		     "jnz %l[differs]\n\t"
		     PCPU__INJECT_ASM
		     "movq %[newv], %[target]\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     :
		     : [cs] "r"((intptr_t)pcpu__g.cs_tpoff),
		       [idx] "r"((intptr_t)pcpu__g.index_tpoff),
		       [expected] "r"(expected), [target] "m"(*p),
		       [expect] "r"(expect), [newv] "r"(newv)
		     : "memory", "cc", "rax" PCPU__INJECT_CLOBBER
		     : aborted, differs);
	pcpu__after_asm_goto();
	return 0;
aborted:
	pcpu__after_asm_goto();
	PCPU__INJECT_ABORTED();
	return 1;
differs:
	pcpu__after_asm_goto();
	return 2;
}

/*
 * rseq_loadidx_cmpeqv_addv:            (the index is read INSIDE the section)
 *   idx = index; if (idx < 0) return 3;            (not registered)
 *   slot = base + idx * PCPU_SLOT_STRIDE;
 *   if (*(intptr_t *)(slot + v_off) != expect) return 2;
 *   *(int64_t *)slot += add;                             (commit: the add)
 *
 * The per-CPU reference counts and the big-reader lock (pcpu/ref.h) use it:
 * the compared word is the slot's copy of their mode (or writer) word, read
 * inside the section, so a thread that the switching thread's
 * membarrier(PRIVATE_EXPEDITED_RSEQ) restarts reads it again, and no add
 * commits under a mode that has already been left. Reading the index inside
 * the section too (as tcmalloc's per-CPU caches do) makes the separate
 * index compare unnecessary: a thread that moves after the load is
 * restarted before the commit. An unregistered area reads a negative index
 * and leaves before anything is written (the arming store is harmless
 * there: the kernel does not look at an unregistered area).
 * Test builds widen the section between the compare and the commit, the
 * window that matters.
 *
 * Returns 0 once the
 * add is committed, 1 if the section aborted, 2 if the word did not hold
 * `expect`, 3 if the thread is not registered (nothing written but 0).
 */
__attribute__((always_inline)) static inline int
pcpu__rseq_loadidx_cmpeqv_addv(void *base, long v_off, intptr_t expect, int64_t add)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__X86_RSEQ_ARM("%[cs]")
		     "1:\n\t"
		     "movslq %%fs:(%[idx]), %%rdx\n\t"
		     "testq %%rdx, %%rdx\n\t"
		     "js %l[unregistered]\n\t"
		     "shlq %[shift], %%rdx\n\t"
		     "cmpq %[expect], (%[vbase], %%rdx)\n\t"
		     "jnz %l[differs]\n\t"
		     PCPU__INJECT_ASM
		     "addq %[add], (%[base], %%rdx)\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     :
		     : [cs] "r"((intptr_t)pcpu__g.cs_tpoff),
		       [idx] "r"((intptr_t)pcpu__g.index_tpoff), [base] "r"(base),
		       [vbase] "r"((char *)base + v_off), [expect] "er"(expect), [add] "er"(add),
		       [shift] "n"(PCPU_SLOT_STRIDE_SHIFT)
		     : "memory", "cc", "rax", "rdx" PCPU__INJECT_CLOBBER
		     : aborted, differs, unregistered);
	pcpu__after_asm_goto();
	return 0;
aborted:
	pcpu__after_asm_goto();
	PCPU__INJECT_ABORTED();
	return 1;
differs:
	pcpu__after_asm_goto();
	return 2;
unregistered:
	pcpu__after_asm_goto();
	return 3;
}

/* ---- object caches (pcpu/objcache.h) ------------------------------------
 *
 * A slot's cache is one slot's copy of a per-CPU object laid out as below
 * (pcpu/objcache.h checks its struct against these offsets): a mode word
 * (0: sections may commit; a collecting thread sets it, then membarrier
 * restarts the sections in flight), the count of object pointers in use,
 * the capacity, and from PCPU__CACHE_PTRS on the array of pointers. Fixed
 * offsets, so each operation needs one register for the cache (the
 * sections must also build at -O0 with a frame pointer).
 *
 * Each operation is one section whose only store others can see is its
 * last, the commit of the new count (the rseq slides' "speculative store,
 * then final commit store"): a pointer stored into the array above the
 * count, or copied out of it, is not part of the cache until, or stays
 * part of it unless, the count says so. Copies go to or come from the
 * caller's private memory, so an aborted section leaves nothing behind.
 * Every one compares the index first, so it commits only on slot
 * `expected`.
 */
#define PCPU__CACHE_MODE 0
#define PCPU__CACHE_COUNT 8
#define PCPU__CACHE_CAP 16
#define PCPU__CACHE_PTRS 64

/* What every cache section starts with, after arming: the index compare
 * and the mode compare (to the labels `aborted` and `differs`). */
#define PCPU__X86_CACHE_CHECKS                                               \
	"1:\n\t"                                                             \
	"cmpl %k[expected], %%fs:(%[idx])\n\t"                                \
	"jnz %l[aborted]\n\t"                                                \
	"cmpq $0, %c[mode](%[cache])\n\t"                                    \
	"jnz %l[differs]\n\t"

/* How every cache section ends: its asm goto jumps to `aborted` (1),
 * `differs` (2: the mode was not 0) or `unfit` (3: empty, full, no room,
 * too few), or falls through once committed (0). */
#define PCPU__X86_CACHE_RETURNS                                              \
	pcpu__after_asm_goto();                                              \
	return 0;                                                            \
aborted:                                                                     \
	pcpu__after_asm_goto();                                              \
	PCPU__INJECT_ABORTED();                                              \
	return 1;                                                            \
differs:                                                                     \
	pcpu__after_asm_goto();                                              \
	return 2;                                                            \
unfit:                                                                       \
	pcpu__after_asm_goto();                                              \
	return 3

/* Their common operands: the rseq offsets, the slot, the cache, and the
 * layout's offsets (each section uses those it needs). */
#define PCPU__X86_CACHE_OPERANDS(expected, cache)                            \
	[cs] "r"((intptr_t)pcpu__g.cs_tpoff),                                 \
	[idx] "r"((intptr_t)pcpu__g.index_tpoff), [expected] "r"(expected),  \
	[cache] "r"(cache), [mode] "n"(PCPU__CACHE_MODE),                     \
	[count] "n"(PCPU__CACHE_COUNT), [cap] "n"(PCPU__CACHE_CAP),           \
	[ptrs] "n"(PCPU__CACHE_PTRS)

/*
 * rseq_cmpeq_cmpeqz_cbz_load_storev ("pop"):
 *   if (index != expected) abort;
 *   if (cache->mode != 0) return 2;
 *   n = cache->count; if (n == 0) return 3;
 *   *out = cache->ptrs[n - 1];              (private: the caller's variable)
 *   cache->count = n - 1;                              (commit: the store)
 *
 * Returns 0 once the object is taken (*out holds it), 1 if aborted or no
 * longer on slot `expected`, 2 if the mode was not 0, 3 if the cache was
 * empty (nothing written but *out).
 */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cbz_load_storev(int64_t expected, void *cache, void **out)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__X86_RSEQ_ARM("%[cs]")
		     PCPU__X86_CACHE_CHECKS
		     "movq %c[count](%[cache]), %%rdx\n\t"
		     "testq %%rdx, %%rdx\n\t"
		     "jz %l[unfit]\n\t"
		     "movq %c[ptrs]-8(%[cache], %%rdx, 8), %%r8\n\t"
		     "movq %%r8, (%[out])\n\t"
		     "decq %%rdx\n\t"
		     PCPU__INJECT_ASM
		     "movq %%rdx, %c[count](%[cache])\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     :
		     : PCPU__X86_CACHE_OPERANDS(expected, cache), [out] "r"(out)
		     : "memory", "cc", "rax", "rdx", "r8" PCPU__INJECT_CLOBBER
		     : aborted, differs, unfit);
	PCPU__X86_CACHE_RETURNS;
}

/*
 * rseq_cmpeq_cmpeqz_cbge_store_storev ("push"):
 *   if (index != expected) abort;
 *   if (cache->mode != 0) return 2;
 *   n = cache->count; if (n >= cache->cap) return 3;
 *   cache->ptrs[n] = p;                           (speculative: above n)
 *   cache->count = n + 1;                              (commit: the store)
 *
 * Returns 0 once the object is in the cache, 1 if aborted or no longer on
 * slot `expected`, 2 if the mode was not 0, 3 if the cache was full
 * (nothing written).
 */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cbge_store_storev(int64_t expected, void *cache, void *p)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__X86_RSEQ_ARM("%[cs]")
		     PCPU__X86_CACHE_CHECKS
		     "movq %c[count](%[cache]), %%rdx\n\t"
		     "cmpq %c[cap](%[cache]), %%rdx\n\t"
		     "jge %l[unfit]\n\t"
		     "movq %[p], %c[ptrs](%[cache], %%rdx, 8)\n\t"
		     "incq %%rdx\n\t"
		     PCPU__INJECT_ASM
		     "movq %%rdx, %c[count](%[cache])\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     :
		     : PCPU__X86_CACHE_OPERANDS(expected, cache), [p] "r"(p)
		     : "memory", "cc", "rax", "rdx" PCPU__INJECT_CLOBBER
		     : aborted, differs, unfit);
	PCPU__X86_CACHE_RETURNS;
}

/*
 * rseq_cmpeq_cmpeqz_cbgt_memcpy_storev ("push k"):
 *   if (index != expected) abort;
 *   if (cache->mode != 0) return 2;
 *   n = cache->count; if (n + k > cache->cap) return 3;
 *   memcpy(&cache->ptrs[n], src, k * 8);          (speculative: above n)
 *   cache->count = n + k;                              (commit: the store)
 *
 * Returns 0 once the k objects are in the cache, 1 if aborted or no longer
 * on slot `expected`, 2 if the mode was not 0, 3 if they do not fit
 * (nothing written). The copy is a loop of 8-byte moves inside the section
 * (a preemption in the middle restarts it all).
 */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cbgt_memcpy_storev(int64_t expected, void *cache, void *const *src,
					    int64_t k)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__X86_RSEQ_ARM("%[cs]")
		     PCPU__X86_CACHE_CHECKS
		     "movq %c[count](%[cache]), %%rdx\n\t"
		     "leaq (%%rdx, %[k]), %%r10\n\t"
		     "cmpq %c[cap](%[cache]), %%r10\n\t"
		     "jg %l[unfit]\n\t"
		     "xorl %%r10d, %%r10d\n\t"
		     "cmpq %[k], %%r10\n\t"
		     "jge 8f\n\t"
		     "7:\n\t"
		     "movq (%[src], %%r10, 8), %%r11\n\t"
		     "movq %%r11, %c[ptrs](%[cache], %%rdx, 8)\n\t"
		     "incq %%rdx\n\t"
		     "incq %%r10\n\t"
		     "cmpq %[k], %%r10\n\t"
		     "jl 7b\n\t"
		     "8:\n\t"
		     PCPU__INJECT_ASM
		     "movq %%rdx, %c[count](%[cache])\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     :
		     : PCPU__X86_CACHE_OPERANDS(expected, cache), [src] "r"(src), [k] "r"(k)
		     : "memory", "cc", "rax", "rdx", "r10", "r11" PCPU__INJECT_CLOBBER
		     : aborted, differs, unfit);
	PCPU__X86_CACHE_RETURNS;
}

/*
 * rseq_cmpeq_cmpeqz_cblt_memcpy_storev ("pop k"):
 *   if (index != expected) abort;
 *   if (cache->mode != 0) return 2;
 *   n = cache->count; if (n < k) return 3;
 *   memcpy(dst, &cache->ptrs[n - k], k * 8);  (private: the caller's buffer)
 *   cache->count = n - k;                              (commit: the store)
 *
 * Returns 0 once the k objects are taken (dst holds them), 1 if aborted or
 * no longer on slot `expected`, 2 if the mode was not 0, 3 if fewer than k
 * are cached (nothing written but dst).
 */
__attribute__((always_inline)) static inline int
pcpu__rseq_cmpeq_cmpeqz_cblt_memcpy_storev(int64_t expected, void *cache, void **dst, int64_t k)
{
	PCPU__INJECT_BEFORE();
	__asm__ goto(PCPU__X86_RSEQ_ARM("%[cs]")
		     PCPU__X86_CACHE_CHECKS
		     "movq %c[count](%[cache]), %%r8\n\t"
		     "subq %[k], %%r8\n\t"
		     "jl %l[unfit]\n\t"
		     "movq %%r8, %%rdx\n\t"
		     "xorl %%r10d, %%r10d\n\t"
		     "cmpq %[k], %%r10\n\t"
		     "jge 8f\n\t"
		     "7:\n\t"
		     "movq %c[ptrs](%[cache], %%rdx, 8), %%r11\n\t"
		     "movq %%r11, (%[dst], %%r10, 8)\n\t"
		     "incq %%rdx\n\t"
		     "incq %%r10\n\t"
		     "cmpq %[k], %%r10\n\t"
		     "jl 7b\n\t"
		     "8:\n\t"
		     PCPU__INJECT_ASM
		     "movq %%r8, %c[count](%[cache])\n\t"
		     "2:\n\t"
		     PCPU__X86_RSEQ_ABORT_TO("aborted")
		     :
		     : PCPU__X86_CACHE_OPERANDS(expected, cache), [dst] "r"(dst), [k] "r"(k)
		     : "memory", "cc", "rax", "rdx", "r8", "r10", "r11" PCPU__INJECT_CLOBBER
		     : aborted, differs, unfit);
	PCPU__X86_CACHE_RETURNS;
}

#endif /* PCPU_ARCH_X86_64_H */
