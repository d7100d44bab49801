/* SPDX-License-Identifier: MIT */
/*
 * What pcpu_ref, pcpu_rwlock and pcpu_objcache share (src/core/percpu_sync.c): the process-wide
 * membarrier registration and the barrier itself, and futex calls.
 * Nothing here is exported.
 */
#ifndef PCPU_PERCPU_SYNC_INTERNAL_H
#define PCPU_PERCPU_SYNC_INTERNAL_H

#include <pcpu/counter.h>
#include <pcpu/percpu_sync.h>
#include <stdint.h>

#include "core.h"

/* 0 if objects created now by the calling thread may use per-CPU mode, else
 * why not. The first call registers membarrier's PRIVATE_EXPEDITED_RSEQ
 * command for the process. Unlike pcpu_sync_percpu_error(), no system call
 * afterwards: a refusal is known once a switch or pcpu_sync_percpu_error()
 * met it. */
PCPU_HIDDEN int pcpu_sync_percpu_check(void);

/* 0, or the errno membarrier failed with after it had worked: from then on
 * new objects are atomic, and pcpu_sync_barrier() walks the CPUs. */
PCPU_HIDDEN int pcpu_sync_percpu_lost(void);

/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ): returns once every rseq
 * critical section that ran on another CPU when it was called has been
 * restarted or has committed visibly. If membarrier fails (once it has, for
 * good: pcpu_sync_percpu_lost()), the same by running the calling thread
 * on every CPU in turn (src/core/percpu_sync.c). 0, or -1 with errno what membarrier
 * said when both failed. Async-signal-safe. */
PCPU_HIDDEN int pcpu_sync_barrier(void);

/* FUTEX_WAIT_PRIVATE while *word == val; returns on a wake, a signal, or at
 * once if *word != val. FUTEX_WAKE_PRIVATE of up to n waiters. Both
 * async-signal-safe. */
PCPU_HIDDEN void pcpu_futex_wait(uint32_t *word, uint32_t val);
PCPU_HIDDEN void pcpu_futex_wake(uint32_t *word, int n);

/* The per-CPU part of a ref or lock: a pcpu counter array of three words
 * per slot (struct pcpu__sync_slot): count (element 0, a real counter, read
 * with pcpu_counter_fetch), the slot's copy of the mode, and, in slot 0's
 * copy only, the pointer to the shared part. Allocated in the default zone;
 * every slot's mode copy is set to `mode`. NULL with errno ENOMEM. */
PCPU_HIDDEN struct pcpu__sync_slot *pcpu_sync_obj_alloc(void *impl, intptr_t mode);
PCPU_HIDDEN void pcpu_sync_obj_free(struct pcpu__sync_slot *obj);

/* Stores `mode` into every walked slot's copy (src/core/slot_walk.c: the
 * slots a thread's index can name), with release stores (plain moves on
 * x86): a section that reads the new value also sees what the caller wrote
 * before. Whether a section still running reads the old value is the
 * caller's membarrier's business. */
PCPU_HIDDEN void pcpu_sync_obj_set_mode(struct pcpu__sync_slot *obj, intptr_t mode);

/* Sum of every slot's count (slot and mirror words). */
static inline int64_t pcpu_sync_obj_count(const struct pcpu__sync_slot *obj)
{
	return (int64_t)pcpu_counter_fetch((pcpu_counter_t)(uintptr_t)obj);
}

/* The shared part, from any handle. */
static inline void *pcpu_sync_obj_impl(const struct pcpu__sync_slot *obj)
{
	return __atomic_load_n(&obj->impl, __ATOMIC_RELAXED);
}

#endif /* PCPU_PERCPU_SYNC_INTERNAL_H */
