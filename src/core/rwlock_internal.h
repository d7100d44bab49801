/* SPDX-License-Identifier: MIT */
/*
 * What src/core/rwlock.c and src/core/rwlock_readers.c share: the lock's shared part
 * and the registry of reader records. Nothing here is exported.
 */
#ifndef PCPU_RWLOCK_INTERNAL_H
#define PCPU_RWLOCK_INTERNAL_H

#include <pcpu/rwlock.h>
#include <pthread.h>
#include <stdint.h>

#include "percpu_sync_internal.h"
#include "core.h"

struct rwlock_impl {
	intptr_t state; /* the authority; state[s] are copies for the sections */
	int percpu;     /* created per-CPU: per-CPU words are part of the sum */
	struct pcpu__sync_slot *obj; /* the handle */
	const void *owner; /* the writer's owner_tag while it holds the mutex */
	int64_t slow_readers __attribute__((aligned(64)));
	uint32_t gen;     /* futex: bumped by every writer unlock */
	uint32_t waiters; /* readers sleeping (or about to) on gen */
	uint32_t wseq;    /* futex: bumped by readers that may be the last */
	pthread_mutex_t writer __attribute__((aligned(64)));
};

static inline struct rwlock_impl *pcpu_rwlock_impl(const pcpu_rwlock_t *lock)
{
	return (struct rwlock_impl *)pcpu_sync_obj_impl(&lock->pcpu__s);
}

/* Bumps wseq and wakes the writer sleeping on it (src/core/rwlock.c's file
 * comment: why no wake-up is lost). Async-signal-safe. */
static inline void pcpu_rwlock_wake_writer(struct rwlock_impl *l)
{
	__atomic_fetch_add(&l->wseq, 1, __ATOMIC_SEQ_CST);
	pcpu_futex_wake(&l->wseq, 1); /* one writer waits at a time */
}

/* Creates the thread-exit key once. 0, or -1 with errno (EAGAIN, ENOMEM).
 * Called by pcpu_rwlock_create(), before any read lock can exist. */
PCPU_HIDDEN int pcpu_rwlock_readers_init(void);

/* Registers the calling thread's record if it is not registered and may be
 * (it has not exited, and the registry's lock is free: never waits, as a
 * signal handler of this thread may be interrupting the lock's holder). 0
 * if the record is registered now, -1 if not (the caller counts its lock
 * elsewhere). Not async-signal-safe: pthread_setspecific() may allocate
 * (glibc callocs a block for keys past its first 32), so only
 * pcpu_rwlock_rdlock(), which handlers must not call, registers. */
PCPU_HIDDEN int pcpu_rwlock_register_self(void);

/* The calling thread's extra holds of the lock its record names (the
 * record is tagged while they are not zero). Async-signal-safe. */
PCPU_HIDDEN uintptr_t *pcpu_rwlock_rec_depth(void);

/* Read locks of `lock` held through the registered records now: a record
 * naming it counts 1, tagged 1 + its depth. Takes the registry's lock
 * (waits for it). Not async-signal-safe. */
PCPU_HIDDEN int64_t pcpu_rwlock_records_count(const pcpu_rwlock_t *lock);

/* Forgets every record that names `lock` (destroy: no thread uses it, and
 * the sum of its words is zero or below). */
PCPU_HIDDEN void pcpu_rwlock_records_forget(const pcpu_rwlock_t *lock);

#endif /* PCPU_RWLOCK_INTERNAL_H */
