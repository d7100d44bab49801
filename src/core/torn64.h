/* SPDX-License-Identifier: MIT */
/*
 * Reading a 64-bit word another CPU writes, on a 32-bit target. Internal.
 *
 * A slot's word is written by one 64-bit store (the rseq add's commit:
 * ARMv7's strd). On a core with LPAE (Cortex-A7, A15, A17, ARMv8 in
 * AArch32) an aligned strd is single-copy atomic, and an atomic 64-bit
 * load (ldrexd) never sees half of it. Elsewhere -- Cortex-A8/A9, and QEMU
 * before 8.1, whose "Cortex-A15" stores an strd's halves one after the
 * other -- another CPU may see one half of a store new and the other old,
 * and so may a copy of the word made 32 bits at a time (a pread() of a
 * segment file). Where the add carried into (or borrowed from) the high
 * half, that reads 2^32 off: a total of 2^32 - 1 or 2^32 read as 0 or
 * 2^33 - 1, a false counter reset and a 4.3 x 10^9 spike to Prometheus.
 *
 * So on 32-bit targets a reader loads the word three times and keeps the
 * middle load only when the high halves of all three agree: a store that
 * changes the high half and lands between two of them shows as a change,
 * and the reader loads again. Half of a store can pass for whole only if
 * both of its halves are absent from two consecutive loads (the store's
 * two halves land at once around them: impossible on hardware, where they
 * land within cycles of each other; in an emulator, when the writing vCPU's
 * host thread is descheduled between them), or if the high half changes and
 * comes back between two loads (two carries). A word whose high half
 * changes at every load (a gauge's slot swinging across 0 by +-1 in a tight
 * loop on one CPU) is loaded PCPU__SETTLE_MAX more times at most, then the
 * middle load is kept. 64-bit targets load the word once, as before.
 *
 * Cost on 32-bit targets: three loads per word instead of one, and more
 * only while the word's high half changes under the reader. The add is
 * untouched. Used by every reader of slot words: fetches (counter.c,
 * slot_walk.h, zone_mirror.h), a fork() child's copy (zone_shared.c) and
 * the segment reader (reader_values.c, on its copies).
 */
#ifndef PCPU_TORN64_H
#define PCPU_TORN64_H

#include <stdint.h>

/* 1 where a 64-bit word may be read half old, half new. */
#ifdef PCPU__TORN64
/* as the build says (a test of the 32-bit path on a 64-bit machine) */
#elif UINTPTR_MAX > 0xffffffffu || defined(__x86_64__)
#define PCPU__TORN64 0
#else
#define PCPU__TORN64 1
#endif

/* Loads a word whose high half changes at every load, at most this many
 * times more before the reader keeps one. */
#define PCPU__SETTLE_MAX 64

/* The high halves of three loads agree (the middle one is kept). */
static inline int pcpu__settled(uint64_t a, uint64_t b, uint64_t c)
{
	return ((a ^ b) | (b ^ c)) >> 32 == 0;
}

/* The value of the live 64-bit word at p (relaxed: adders write it
 * meanwhile), never half of one store and half of another's on a 32-bit
 * target (see the top). Async-signal-safe. */
static inline __attribute__((always_inline)) uint64_t pcpu__load_u64(const int64_t *p)
{
#if PCPU__TORN64
	uint64_t a = (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED);
	uint64_t b = (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED);
	uint64_t c = (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED);
	unsigned n;

	for (n = 0; !pcpu__settled(a, b, c) && n < PCPU__SETTLE_MAX; n++) {
		a = b;
		b = c;
		c = (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED);
	}
	return b;
#else
	return (uint64_t)__atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

#endif /* PCPU_TORN64_H */
