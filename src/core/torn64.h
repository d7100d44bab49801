/* SPDX-License-Identifier: MIT */
/*
 * Reading a 64-bit word another CPU writes, on a 32-bit target. Internal.
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
 * What can still tear is a copy of the word made 32 bits at a time: a
 * pread() of a segment file (the kernel's copy), whose two halves may
 * come from the two sides of a carry. The segment reader therefore copies
 * a run three times and keeps each word from the middle copy when the
 * high halves of all three agree, reading it again while they do not
 * (pcpu__settled(), PCPU__SETTLE_MAX; src/segment/reader_values.c): a
 * carry that lands between two copies shows as a change. A word still
 * changing after PCPU__SETTLE_MAX more reads fails the snapshot's attempt
 * (EAGAIN): a value that may be torn is never returned. 64-bit targets
 * copy once.
 */
#ifndef PCPU_TORN64_H
#define PCPU_TORN64_H

#include <stdint.h>

/* 1 where a copy of a 64-bit word may be made 32 bits at a time. */
#ifdef PCPU__TORN64
/* as the build says (a test of the 32-bit path on a 64-bit machine) */
#elif UINTPTR_MAX > 0xffffffffu || defined(__x86_64__)
#define PCPU__TORN64 0
#else
#define PCPU__TORN64 1
#endif

/* Reads a word whose high half changes at every read at most this many
 * times more; then the attempt fails (EAGAIN) and the snapshot tries
 * again (src/segment/reader_snapshot.c). */
#define PCPU__SETTLE_MAX 64

/* The high halves of three reads agree (the middle one is kept). */
static inline int pcpu__settled(uint64_t a, uint64_t b, uint64_t c)
{
	return ((a ^ b) | (b ^ c)) >> 32 == 0;
}

/* The value of the live 64-bit word at p (relaxed: adders write it
 * meanwhile), one single-copy atomic load on every target (ldrexd on
 * 32-bit Arm). Async-signal-safe. */
static inline __attribute__((always_inline)) uint64_t pcpu__load_u64(const int64_t *p)
{
	return (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED);
}

#endif /* PCPU_TORN64_H */
