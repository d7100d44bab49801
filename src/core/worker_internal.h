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
 * `slot`'s region and its mirror safe to write and read: a CPU slot, or an
 * owned slot some thread is claiming or has claimed (never cleared). An
 * unclaimed owned slot costs nothing.
 * Async-signal-safe (a load). */
PCPU_PRIVATE int pcpu__slot_needs_memory(uint32_t slot);

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
