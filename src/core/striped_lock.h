/* SPDX-License-Identifier: MIT */
/*
 * Striped locks: a few mutexes chosen by address, for operations that must
 * be serialised per object but are too rare to give every object a mutex
 * (a counter's reset, a gauge's set: read the value, then add an offset).
 * One array for the whole library (striped_lock.c), taken all at once by
 * fork()'s prepare handler, so no child inherits a stripe held by a thread
 * it does not have. Nothing here is exported.
 */
#ifndef PCPU_STRIPED_LOCK_H
#define PCPU_STRIPED_LOCK_H

#include <pthread.h>

#include "core.h"

/* Takes the stripe of `addr` and returns it, for pcpu_stripe_unlock().
 * The first call registers the fork handlers (fork.c: rank
 * PCPU_FORK_COUNTER; before it no stripe can be held). Thread-safe; not
 * async-signal-safe. */
PCPU_HIDDEN pthread_mutex_t *pcpu_stripe_lock(const void *addr);

/* The stripes' fork handlers, registered (the first call takes fork.c's
 * registration lock; later ones cost a load). pcpu_stripe_lock() does it;
 * a caller about to take a lock that pcpu_stripe_lock() then nests in (a
 * tree zone's, core.h) does it first, so that fork.c's lock is
 * never taken under that one (fork()'s prepare holds fork.c's lock while it
 * takes the registries' locks, which are taken before the tree's). */
PCPU_HIDDEN void pcpu_stripes_register(void);

static inline void pcpu_stripe_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}

#endif /* PCPU_STRIPED_LOCK_H */
