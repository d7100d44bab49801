/* SPDX-License-Identifier: MIT */
/*
 * fork.c: one pthread_atfork for every layer, each layer's handlers run in
 * the order of its rank. Beside the lowest layer: it includes nothing of
 * pcpu. Nothing here is exported.
 */
#ifndef PCPU_FORK_H
#define PCPU_FORK_H

#include "visibility.h"

/* Layers, lowest first: a layer may take a lower layer's locks while holding
 * its own, never the reverse. prepare handlers run from the highest rank
 * down, parent and child handlers from the lowest up (fork.c). */
enum pcpu_fork_rank {
	PCPU_FORK_ZONE = 0,     /* zone_shared.c */
	PCPU_FORK_COUNTER = 1,  /* counter.c */
	PCPU_FORK_STATS = 2,    /* stats zone, gauges, groups */
	PCPU_FORK_REGISTRY = 3, /* registries */
	PCPU_FORK_SEGMENT = 4,  /* the segment writer */
	PCPU_FORK_SYSCTL = 5,   /* counter(9) sysctl records */
	PCPU_FORK_LATE = 6,     /* zone_shared.c: the child's last step (parent views) */
};

/* Registers a subsystem's fork handlers (any may be NULL) once: `*once` is
 * the subsystem's flag, set when registered (a later call is one load).
 * Call it before the subsystem first takes a lock of its own, and never
 * while holding any pcpu lock. Returns 0, or -1 with errno ENOMEM
 * (pthread_atfork failed). Thread-safe; not async-signal-safe. */
PCPU_PRIVATE int pcpu__fork_register(int *once, enum pcpu_fork_rank rank, void (*prepare)(void),
				   void (*parent)(void), void (*child)(void));

#endif /* PCPU_FORK_H */
