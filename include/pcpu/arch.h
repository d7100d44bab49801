/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/arch.h
 * The architecture layer: the one place that picks the target's rseq
 * critical sections. Not API.
 *
 *   pcpu/arch/pseudocode.h   what each operation does, for every target
 *   pcpu/arch/x86_64.h       x86-64: who the target is (for the tests
 *                            too), its signature, and the assembly of each
 *                            operation as macros: arming, index compare,
 *                            abort handler, the sections
 *   pcpu/arch/aarch64.h      aarch64 (little-endian), the same
 *   pcpu/arch/arm.h          32-bit Arm, ARMv7-A and later (little-endian)
 *   pcpu/arch/riscv64.h      64-bit RISC-V
 *   pcpu/arch/common.h       what every port shares, written once: the
 *                            descriptor tables, the test hooks, and the C
 *                            around each port's assembly (the functions)
 *   pcpu/arch/generic.h      the fallback of every operation a target lacks
 *   pcpu/arch/<arch>/stack.h the per-CPU stack's sections (pop, push,
 *                            push k, pop k), which the object cache and
 *                            pcpu/percpu_ops.h use; common.h includes the
 *                            one each arch header names (PCPU__ARCH_STACK_H)
 *
 * The subject headers (counter, histogram, group, ref, objcache) call the
 * operations unconditionally: on a target without sections, in a
 * ThreadSanitizer build and with PCPU_NO_RSEQ, the generic fallbacks make
 * every update take its exact atomic slow path. A port to a new target is
 * its arch header, its stack section file and one line below; the tests
 * that read machine code (tests/check_rseq_sections.py, bench/loop_insns.py)
 * and the emulated machines (scripts/vm) read what they need of it from
 * the arch header (tests/arch_headers.py), and its kernel is a line of
 * scripts/vm/fetch-kernels.sh.
 *
 * An unknown target builds, on the fallback path, with a warning that says
 * so; defining PCPU_NO_RSEQ chooses the fallback on purpose and silences it.
 * An arch header is always included on its target: first what the target
 * is (its name, its seccomp audit architecture, what the tests need to
 * read its code: tests and tools use them, also in a fallback build), then,
 * only if PCPU__ARCH_SECTIONS, its sections.
 */
#ifndef PCPU_ARCH_H
#define PCPU_ARCH_H

#include <pcpu/rseq.h> /* pcpu__g: the offsets the sections use */

#define PCPU__ARCH_H_INSIDE 1

#include <pcpu/arch/pseudocode.h>

/* ThreadSanitizer cannot see inside inline assembly, so code built with it
 * takes the (atomic, TSan-visible) fallback path everywhere. */
#if defined(__SANITIZE_THREAD__)
#define PCPU__NO_RSEQ_ASM 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PCPU__NO_RSEQ_ASM 1
#endif
#endif

/* PCPU__ARCH_SECTIONS 0: the arch header says who the target is
 * (PCPU_ARCH_NAME, PCPU__ARCH_AUDIT) and nothing more; the fallback is
 * chosen. */
#if defined(PCPU_NO_RSEQ) || defined(PCPU__NO_RSEQ_ASM)
#define PCPU__ARCH_SECTIONS 0
#else
#define PCPU__ARCH_SECTIONS 1
#endif

/* The dispatch: one line per port. */
#if defined(__x86_64__)
#include <pcpu/arch/x86_64.h>
#elif defined(__aarch64__) && defined(__AARCH64EL__)
#include <pcpu/arch/aarch64.h>
#elif defined(__arm__) && defined(__ARMEL__) && __ARM_ARCH >= 7 && __ARM_ARCH_PROFILE == 'A'
#include <pcpu/arch/arm.h>
#elif defined(__riscv) && __riscv_xlen == 64
#include <pcpu/arch/riscv64.h>
#elif PCPU__ARCH_SECTIONS
#warning "pcpu: no rseq critical sections for this target yet: every update takes the exact atomic fallback path (define PCPU_NO_RSEQ to choose it and silence this)"
#endif

/* The C around the port's assembly, then the fallback of what it lacks. */
#include <pcpu/arch/common.h>
#include <pcpu/arch/generic.h>

#undef PCPU__ARCH_H_INSIDE

#endif /* PCPU_ARCH_H */
