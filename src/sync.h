/* SPDX-License-Identifier: MIT */
/*
 * What pcpu_ref and pcpu_rwlock share (src/sync.c): the process-wide
 * membarrier registration and the barrier itself, and futex calls.
 * Nothing here is exported.
 */
#ifndef PCPU_SYNC_H
#define PCPU_SYNC_H

#include "internal.h"
#include <pcpu/ref.h>

/* 0 if objects created now by the calling thread may use per-CPU mode, else
 * why not (pcpu_sync_percpu_error()). The first call registers membarrier's
 * PRIVATE_EXPEDITED_RSEQ command for the process. */
PCPU_HIDDEN int pcpu_sync_percpu_check(void);

/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ): returns once every rseq
 * critical section that ran on another CPU when it was called has been
 * restarted or has committed visibly. 0, or -1 with errno (what membarrier
 * said). Async-signal-safe. */
PCPU_HIDDEN int pcpu_sync_barrier(void);

/* FUTEX_WAIT_PRIVATE while *word == val; returns on a wake, a signal, or at
 * once if *word != val. FUTEX_WAKE_PRIVATE of up to n waiters. Both
 * async-signal-safe. */
PCPU_HIDDEN void pcpu_futex_wait(uint32_t *word, uint32_t val);
PCPU_HIDDEN void pcpu_futex_wake(uint32_t *word, int n);

#endif /* PCPU_SYNC_H */
