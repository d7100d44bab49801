/* SPDX-License-Identifier: MIT */
/*
 * Owned slots (src/core/worker.c): what the rest of the library asks of them.
 * Internal; nothing exported.
 */
#ifndef PCPU_WORKER_INTERNAL_H
#define PCPU_WORKER_INTERNAL_H

#include <stdint.h>

#include "visibility.h"

/* A shared-registry tree is being made: from now on no claim succeeds
 * (ENOTSUP), because a slot of tree memory is the whole tree's. Returns 0,
 * or -1 with errno EBUSY if a thread holds a claim now (nothing changed).
 * Thread-safe; not async-signal-safe (a mutex). */
PCPU_HIDDEN int pcpu__worker_block_claims(void);

/* Whether a reserving backing (src/segment/backing.c) must make slot
 * `slot`'s region and its mirror safe to write and read: a CPU slot that a
 * thread's index or a fallback add can name (the slot walk's CPU slots,
 * src/core/slot_walk.c: slot 0, the present CPUs and mm_cid's range; every
 * CPU slot with PCPU_SLOT_WALK=all), or an owned slot some thread is
 * claiming or has claimed (never cleared). A possible CPU that is not
 * present, and an unclaimed owned slot, cost nothing.
 * Async-signal-safe (a load). */
PCPU_PRIVATE int pcpu__slot_needs_memory(uint32_t slot);

/* The CPU slots that can hold a value (the slot walk's, ascending): their
 * number, and in *list the slot numbers, or NULL when every CPU slot is
 * walked (then they are 0 .. n - 1). Fixed once pcpu_init() ran. Readers
 * of memory shared through a reserving backing read only these slots'
 * copies: the others' pages are holes of the file, which a read through
 * the mapping would allocate (and a full file system answer with SIGBUS).
 * Async-signal-safe (loads). */
PCPU_PRIVATE uint32_t pcpu__cpu_slots_walked(const uint16_t **list);

/* The zone layer's hook (zone_shared.c, installed when a zone first gets a
 * reserving backing): before an owned slot is first claimed, it reserves
 * the slot's region under every object of every such zone. 0, or -1 with
 * errno (ENOSPC...), which fails the claim. Called with the claims' lock
 * held, which is taken before any zone lock. */
PCPU_HIDDEN void pcpu__worker_set_reserve_hook(int (*hook)(uint32_t slot));

/* How many owned slots are held now (a hint: claims may come and go).
 * Thread-safe; not async-signal-safe (a mutex). */
PCPU_PRIVATE uint32_t pcpu__worker_claims_held(void);

#endif /* PCPU_WORKER_INTERNAL_H */
