/* SPDX-License-Identifier: MIT */
/*
 * Owned slots (src/worker.c): what the rest of the library asks of them.
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

/* How many owned slots are held now (a hint: claims may come and go).
 * Thread-safe; not async-signal-safe (a mutex). */
PCPU_HIDDEN uint32_t pcpu__worker_claims_held(void);

#endif /* PCPU_WORKER_INTERNAL_H */
