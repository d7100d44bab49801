/* SPDX-License-Identifier: MIT */
/*
 * Mirror words, in one place. Every 8-byte word of a zone object has, per
 * slot, its own word (written only by rseq commits) and a mirror word at
 * the same offset in the slot's mirror region (written only by atomic
 * read-modify-writes: the fallback add, the reset offset, a gauge's set):
 *
 *   region:   0 .. nslots-1          nslots .. 2*nslots-1
 *             the slots' words       their mirrors: region r is slot r % nslots
 *
 * A slot's value is the sum of its two words (modulo 2^64); the mirror
 * words count only once the chunk's header says they are in use
 * (PCPU__CHUNK_MIRROR_USED, pcpu/zone.h), set before the first write there.
 * The core's counters, zones and object caches use the live words here;
 * the arithmetic on a slot's two words (pcpu__mirror_region_slot(),
 * pcpu__slot_sum()) is the seam's (core.h), since the segment reader
 * applies it to words it copied from a segment file, whose chunks have the
 * same layout. Nothing here is exported.
 */
#ifndef PCPU_ZONE_MIRROR_H
#define PCPU_ZONE_MIRROR_H

#include <pcpu/zone.h>
#include <stdint.h>

#include "rseq_internal.h" /* pcpu_slot_count */
#include "core.h" /* pcpu__slot_sum */
#include "torn64.h"

/* Address of the mirror copy of slot `slot` of the object at `obj`. */
static inline void *pcpu__mirror_ptr(const void *obj, unsigned nslots, unsigned slot)
{
	return pcpu__slot_ptr_inline(obj, nslots + slot);
}

/* The mirror word of slot `slot` of the 8-byte word at `obj`. */
static inline int64_t *pcpu_mirror_word(const void *obj, uint32_t slot)
{
	return (int64_t *)pcpu__mirror_ptr(obj, pcpu_slot_count, slot);
}

/* Marks the chunk holding `obj` as having mirror words in use, before the
 * caller's first atomic write there, so fetches read the mirror from then
 * on. Async-signal-safe: one load, and an atomic OR the first time. */
static inline void pcpu_mirror_mark(const void *obj)
{
	struct pcpu__chunk_hdr *h = pcpu__chunk_of(obj);

	if (PCPU_UNLIKELY(__atomic_load_n(&h->mirror_delta, __ATOMIC_RELAXED) == 0)) {
		__atomic_fetch_or(&h->flags, PCPU__CHUNK_MIRROR_USED, __ATOMIC_SEQ_CST);
		/* After the flag: whoever takes the inline atomic add because
		 * it reads the delta finds the flag set for fetches. */
		__atomic_store_n(&h->mirror_delta,
				 (int64_t)((uint64_t)pcpu_slot_count << PCPU_SLOT_STRIDE_SHIFT),
				 __ATOMIC_RELEASE);
	}
}

/* Whether fetches must read the mirror words of the chunk holding `obj`.
 * A fetch that reads the flag clear can only miss mirror writes that are
 * concurrent with it (the writer sets the flag first), which a fetch may
 * miss anyway: it is not a point-in-time snapshot. */
static inline int pcpu_mirror_in_use(const void *obj)
{
	return (__atomic_load_n(&pcpu__chunk_of(obj)->flags, __ATOMIC_ACQUIRE) &
		PCPU__CHUNK_MIRROR_USED) != 0;
}

/* Slot `slot`'s value of the live 8-byte word at `obj` (relaxed loads:
 * adders write the words meanwhile; untorn on 32-bit targets, torn64.h);
 * `mirror`: pcpu_mirror_in_use(obj). */
static inline uint64_t pcpu__slot_value(const void *obj, uint32_t slot, int mirror)
{
	uint64_t w = pcpu__load_u64((const int64_t *)pcpu__slot_ptr_inline(obj, slot));

	return pcpu__slot_sum(w, mirror ? pcpu__load_u64(pcpu_mirror_word(obj, slot)) : 0);
}

#endif /* PCPU_ZONE_MIRROR_H */
