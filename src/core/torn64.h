/* SPDX-License-Identifier: MIT */
/*
 * Reading a 64-bit word another CPU writes. Internal.
 *
 * In memory a slot's word is never half-written: on 32-bit Arm every add
 * that changes its high half commits it with one single-copy atomic 64-bit
 * store (strexd), and every other add stores only its low half
 * (pcpu/arch/arm.h, "Carries"). A relaxed 64-bit atomic load is
 * single-copy atomic too (ldrexd), so pcpu__load_u64() is one load on
 * every target. (Before, an add committed the whole word with strd, which
 * Cortex-A8/A9 and QEMU's Cortex-A15 before 8.1 store as two 32-bit
 * halves: readers saw 2^32 - 1 or 2^32 as 0 or 2^33 - 1, and no reader
 * could tell a half-written word from a value -- tests/vm/vm_stress.c
 * --workload carry.)
 *
 * What can still tear is a copy of the word made 32 bits at a time (a
 * pread() of a segment file): the segment reader's business, with what
 * the seam gives it (src/core/core.h, "torn copies"; whether a target
 * copies so is its arch header's PCPU__TORN64).
 */
#ifndef PCPU_TORN64_H
#define PCPU_TORN64_H

#include <stdint.h>

/* The value of the live 64-bit word at p (relaxed: adders write it
 * meanwhile), one single-copy atomic load on every target (ldrexd on
 * 32-bit Arm). Async-signal-safe. */
static inline __attribute__((always_inline)) uint64_t pcpu__load_u64(const int64_t *p)
{
	return (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED);
}

#endif /* PCPU_TORN64_H */
