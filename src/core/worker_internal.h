/* SPDX-License-Identifier: MIT */
/*
 * Owned slots (src/core/worker.c): what the rest of the core asks of them
 * (what libpcpu-stats asks is the seam's, core.h). Internal; nothing
 * exported.
 */
#ifndef PCPU_WORKER_INTERNAL_H
#define PCPU_WORKER_INTERNAL_H

#include <stdint.h>

#include "core.h"

/* A shared-registry tree is being made: from now on no claim succeeds
 * (ENOTSUP), because a slot of tree memory is the whole tree's. Returns 0,
 * or -1 with errno EBUSY if a thread holds a claim now (nothing changed).
 * Thread-safe; not async-signal-safe (a mutex). */
PCPU_HIDDEN int pcpu__worker_block_claims(void);

/* The zone layer's hook (zone_shared.c, installed when a zone first gets a
 * reserving backing): before an owned slot is first claimed, it reserves
 * the slot's region under every object of every such zone. 0, or -1 with
 * errno (ENOSPC...), which fails the claim. Called with the claims' lock
 * held, which is taken before any zone lock. */
PCPU_HIDDEN void pcpu__worker_set_reserve_hook(int (*hook)(uint32_t slot));

#endif /* PCPU_WORKER_INTERNAL_H */
