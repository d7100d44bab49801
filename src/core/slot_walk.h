/* SPDX-License-Identifier: MIT */
/*
 * The slots a fetch visits: only those a thread can ever have written,
 * not every possible CPU (src/core/slot_walk.c). Internal; nothing exported.
 */
#ifndef PCPU_SLOT_WALK_H
#define PCPU_SLOT_WALK_H

#include <pcpu/defs.h>
#include <stddef.h>
#include <stdint.h>

#include "torn64.h"
#include "core.h"

/* Slot numbers, ascending, and how many; set once by pcpu_slot_walk_init()
 * (from pcpu_init()), before any zone exists. */
PCPU_HIDDEN extern uint16_t pcpu_walk_slots[];
PCPU_HIDDEN extern uint32_t pcpu_walk_count;
/* How many of them are CPU slots (the rest: owned slots some thread has
 * claimed, appended by pcpu_slot_walk_add()). */
PCPU_HIDDEN extern uint32_t pcpu_walk_cpu_count;
/* 1 when the list does not apply: more slots than it can hold (over 4096
 * possible CPUs), then every slot is walked, pcpu_walk_count of them. */
PCPU_HIDDEN extern int pcpu_walk_all;
/* 1 when the process's private zones keep the regions of slots that are
 * not walked read-only, and make the walked slots' regions writable only
 * as far as objects reach (src/core/zone_chunk.h, "Commit"): the kernel
 * charges commit for writable private memory when vm.overcommit_memory is
 * 2, MAP_NORESERVE or not. Set by pcpu_slot_walk_init() from PCPU_COMMIT
 * (auto: when the kernel's overcommit mode is 2; strict: always). */
PCPU_HIDDEN extern int pcpu_commit_strict;
/* Where each CPU slot (below pcpu_cpu_slot_count) is in the walk: k with
 * pcpu_walk_slots[k] == slot for a walked slot; for one that is not
 * walked, some k below the walked CPU slots' count. Set with the list,
 * never changed after. */
PCPU_HIDDEN extern uint16_t pcpu_walk_pos[];

/* Whether CPU slot `slot` (below pcpu_cpu_slot_count) is walked: can hold
 * a value, so a reserving backing gives it memory (pcpu__slot_needs_memory)
 * and readers read it. Async-signal-safe (loads). */
static inline int pcpu_slot_walk_has_cpu(uint32_t slot)
{
	return pcpu_walk_all || pcpu_walk_slots[pcpu_walk_pos[slot]] == slot;
}

/* Builds the list for `nslots` slots (pcpu_cpu_slot_count): slot 0, every
 * present CPU, and 0 .. (number of present CPUs - 1), each below nslots;
 * every slot if the present CPUs cannot be read. Async-signal-safe (open,
 * read, close; no malloc). */
PCPU_HIDDEN void pcpu_slot_walk_init(uint32_t nslots);

/* Appends owned slot `slot` (above every CPU slot, and above every slot
 * appended before) to the walk, before its first owner writes it: the
 * entry is stored before the count that makes readers visit it. Once per
 * slot, under the owned slots' lock (src/core/worker.c). Async-signal-safe. */
PCPU_HIDDEN void pcpu_slot_walk_add(uint32_t slot);

/* Every slot that can hold a value, in ascending order:
 *   uint32_t slot;
 *   PCPU_SLOT_WALK(i, slot) sum += ...slot...;                             */
#define PCPU_SLOT_WALK(i, slot)                                               \
	for (uint32_t i = 0, i##_n = __atomic_load_n(&pcpu_walk_count, __ATOMIC_ACQUIRE); \
	     i < i##_n && ((slot) = pcpu_walk_all ? i : pcpu_walk_slots[i], 1); i++)

/* The walked CPU slots alone (no owned slot), in ascending order: what a
 * per-CPU object that owned slots never use (refs, locks, object caches)
 * visits.
 *   uint32_t slot;
 *   PCPU_CPU_SLOT_WALK(i, slot) ...slot...;                                */
#define PCPU_CPU_SLOT_WALK(i, slot)                                           \
	for (uint32_t i = 0, i##_n = pcpu_walk_cpu_count;                     \
	     i < i##_n && ((slot) = pcpu_walk_all ? i : pcpu_walk_slots[i], 1); i++)

/* The sum, modulo 2^64, of the 8-byte word at `word` in every walked slot
 * (relaxed loads: adders write the words meanwhile; on a 32-bit target
 * each word untorn, torn64.h): a fetch's walk, for
 * the words of slot 0 at `word` or, from a mirror region's start, for their
 * mirror words. The loop is what a fetch costs, so it is written for
 * throughput: the list-or-all choice made once, four loads in flight with
 * four sums. Slot numbers stay 16-bit (the list is read by every fetch:
 * 8 KiB at most, in cache) and are shifted here. */
static inline __attribute__((always_inline)) uint64_t pcpu_slot_walk_sum(const void *word)
{
	const char *p = (const char *)word;
	uint32_t n = __atomic_load_n(&pcpu_walk_count, __ATOMIC_ACQUIRE), i = 0;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;

#define PCPU__WALK_WORD(slot) pcpu__load_u64((const int64_t *)(p + ((size_t)(slot) << PCPU_SLOT_STRIDE_SHIFT)))
	if (pcpu_walk_all) {
		for (; i < n; i++)
			s0 += PCPU__WALK_WORD(i);
		return s0;
	}
	const uint16_t *sl = pcpu_walk_slots, *end = pcpu_walk_slots + n;

	for (; end - sl >= 4; sl += 4) {
		s0 += PCPU__WALK_WORD(sl[0]);
		s1 += PCPU__WALK_WORD(sl[1]);
		s2 += PCPU__WALK_WORD(sl[2]);
		s3 += PCPU__WALK_WORD(sl[3]);
	}
	for (; sl < end; sl++)
		s0 += PCPU__WALK_WORD(*sl);
#undef PCPU__WALK_WORD
	return (s0 + s1) + (s2 + s3);
}

/* CPU slot `slot`'s place in the walk (pcpu_walk_pos). */
static inline uint32_t pcpu_slot_walk_pos(uint32_t slot)
{
	return pcpu_walk_all ? slot : pcpu_walk_pos[slot];
}

/* The k-th CPU slot of the walk, k any number (wraps): where rseq-less
 * threads' fallback adds go, spread over the walked CPU slots. */
static inline uint32_t pcpu_slot_walk_nth(uint32_t k)
{
	return pcpu_walk_all ? k % pcpu_walk_cpu_count : pcpu_walk_slots[k % pcpu_walk_cpu_count];
}

#endif /* PCPU_SLOT_WALK_H */
