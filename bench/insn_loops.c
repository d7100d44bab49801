/* SPDX-License-Identifier: MIT */
/*
 * Loops whose instructions bench/loop_insns.py counts, per architecture
 * (bench/instructions.md): pcpu_counter_inc, an object cache's get and put,
 * a ref's get and put, a two-counter add_many, and the minimal rseq add
 * written by hand, in
 * the shape of incr.c's IDEAL_ADD (the rseq area's address hoisted out of
 * the loop, the field offsets assembler constants, the array base in a
 * register). Not built by CMake: compiled by the commands in the README,
 * natively or with a cross compiler, into a shared object.
 */
#include <pcpu/pcpu.h>

void pcpu_inc_loop(pcpu_counter_t c, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_counter_inc(c);
}

/* An object cache's get and put, and a ref's get and put, in a loop: their
 * sections' instructions (and the gets' and puts' statistics adds). */
void pcpu_objcache_loop(pcpu_objcache_t *c, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_objcache_put(c, pcpu_objcache_get(c));
}

void pcpu_ref_loop(pcpu_ref_t *r, long n)
{
	for (long i = 0; i < n; i++) {
		pcpu_ref_get(r);
		pcpu_ref_put(r);
	}
}

/* Two counters updated together (a packet's count and bytes). */
void pcpu_add_many_loop(const pcpu_counter_t *cs, long n)
{
	const int64_t vs[2] = {1, 64};

	for (long i = 0; i < n; i++)
		pcpu_counter_add_many(cs, vs, 2);
}

/* glibc >= 2.35: the thread's struct rseq is at __rseq_offset from the
 * thread pointer. */
extern const ptrdiff_t __rseq_offset;

static struct {
	int64_t v;
	char pad[56];
} arr[1024];

#define DESCRIPTOR                                                           \
	".pushsection __rseq_cs, \"aw\"\n\t.balign 32\n\t3:\n\t"              \
	".long 0, 0\n\t.quad 1f, 2f - 1f, 4f\n\t.popsection\n\t"

#if defined(__aarch64__)
/* 0: read cpu_id; arm; 1: compare; address; ldr, add, str (the commit). */
#define HAND_ADD(area_, v_)                                                  \
	__asm__ volatile(DESCRIPTOR                                          \
			 "0: ldr w9, [%[a], 4]\n\t"                          \
			 "adrp x10, 3b\n\tadd x10, x10, :lo12:3b\n\t"        \
			 "str x10, [%[a], 8]\n\t"                            \
			 "1: ldr w11, [%[a], 4]\n\tcmp w11, w9\n\tb.ne 4f\n\t" \
			 "add x9, %[arr], x9, lsl 6\n\tldr x11, [x9]\n\t"    \
			 "add x11, x11, %[v]\n\tstr x11, [x9]\n\t2:\n\t"     \
			 ".pushsection __rseq_failure, \"ax\"\n\t"           \
			 ".inst 0xd428bc00\n\t4: b 0b\n\t.popsection\n\t"    \
			 :                                                   \
			 : [a] "r"(area_), [arr] "r"(arr), [v] "rI"((int64_t)(v_)) \
			 : "memory", "cc", "x9", "x10", "x11")
#elif defined(__arm__)
/* The descriptor's 64-bit fields as the address and a zero word. */
#undef DESCRIPTOR
#define DESCRIPTOR                                                           \
	".pushsection __rseq_cs, \"aw\"\n\t.balign 32\n\t3:\n\t"              \
	".long 0, 0, 1f, 0, 2f - 1f, 0, 4f, 0\n\t.popsection\n\t"
#ifdef __thumb__
#define PC_BIAS "4"
#else
#define PC_BIAS "8"
#endif
/* 0: read cpu_id; arm (movw, movt, add pc, str); 1: compare; address;
 * ldrd, adds, adc, strd (the commit). */
#define HAND_ADD(area_, v_)                                                  \
	__asm__ volatile(DESCRIPTOR                                          \
			 "0: ldr r2, [%[a], #4]\n\t"                         \
			 "movw r0, #:lower16:(3b - (10f + " PC_BIAS "))\n\t" \
			 "movt r0, #:upper16:(3b - (10f + " PC_BIAS "))\n\t" \
			 "10: add r0, r0, pc\n\tstr r0, [%[a], #8]\n\t"     \
			 "1: ldr r1, [%[a], #4]\n\tcmp r1, r2\n\tbne 4f\n\t" \
			 "add r2, %[arr], r2, lsl #6\n\tldrd r0, r1, [r2]\n\t" \
			 "adds r0, r0, %Q[v]\n\tadc r1, r1, %R[v]\n\t"       \
			 "strd r0, r1, [r2]\n\t2:\n\t"                       \
			 ".pushsection __rseq_failure, \"ax\"\n\t"           \
			 ".word 0xe7f5def3\n\t4: b 0b\n\t.popsection\n\t"  \
			 :                                                   \
			 : [a] "r"(area_), [arr] "r"(arr), [v] "r"((int64_t)(v_)) \
			 : "memory", "cc", "r0", "r1", "r2")
#elif defined(__riscv) && __riscv_xlen == 64
/* 0: read cpu_id; arm (auipc, addi, sd); 1: compare; address (shift,
 * add); ld, add, sd (the commit). An asm goto: a branch from the section to
 * a label in another section (the abort handler) is not one instruction on
 * riscv64 (gas makes it a reversed branch over a `j`), so the compare
 * leaves for the C label `retry`, in the function, as pcpu's sections do. */
#define HAND_ADD_GOTO(area_, v_, retry_)                                     \
	__asm__ goto(DESCRIPTOR                                              \
		     "lw t5, 4(%[a])\n\t"                                     \
		     "lla t6, 3b\n\tsd t6, 8(%[a])\n\t"                      \
		     "1: lw t6, 4(%[a])\n\tbne t6, t5, %l[" #retry_ "]\n\t"  \
		     "slli t5, t5, 6\n\tadd t5, %[arr], t5\n\t"              \
		     "ld t6, 0(t5)\n\tadd t6, t6, %[v]\n\tsd t6, 0(t5)\n\t2:\n\t" \
		     ".pushsection __rseq_failure, \"ax\"\n\t"               \
		     ".balign 4\n\t.long 0xf1401073\n\t4: j %l[" #retry_ "]\n\t" \
		     ".popsection\n\t"                                        \
		     :                                                       \
		     : [a] "r"(area_), [arr] "r"(arr), [v] "r"((int64_t)(v_))   \
		     : "memory", "t5", "t6"                                  \
		     : retry_)
#elif defined(__x86_64__)
/* 0: read cpu_id; arm; 1: compare; shift; addq (the commit). */
#define HAND_ADD(area_, v_)                                                  \
	__asm__ volatile(DESCRIPTOR                                          \
			 "0: movl 4(%[a]), %%eax\n\t"                        \
			 "leaq 3b(%%rip), %%rcx\n\tmovq %%rcx, 8(%[a])\n\t"  \
			 "1: cmpl 4(%[a]), %%eax\n\tjnz 4f\n\t"              \
			 "shlq $6, %%rax\n\taddq %[v], (%[arr], %%rax)\n\t2:\n\t" \
			 ".pushsection __rseq_failure, \"ax\"\n\t"           \
			 ".byte 0x0f, 0xb9, 0x3d\n\t.long 0x53053053\n\t"    \
			 "4: jmp 0b\n\t.popsection\n\t"                      \
			 :                                                   \
			 : [a] "r"(area_), [arr] "r"(arr), [v] "er"((int64_t)(v_)) \
			 : "memory", "cc", "rax", "rcx")
#endif

#ifdef HAND_ADD_GOTO
void hand_inc_loop(long n)
{
	char *area = (char *)__builtin_thread_pointer() + __rseq_offset;

	for (long i = 0; i < n; i++) {
		HAND_ADD_GOTO(area, 1, retry);
		continue;
retry:
		i--; /* aborted: this add again */
	}
}
#endif

#ifdef HAND_ADD
void hand_inc_loop(long n)
{
	char *area = (char *)__builtin_thread_pointer() + __rseq_offset;

	for (long i = 0; i < n; i++)
		HAND_ADD(area, 1);
}
#endif
