/* SPDX-License-Identifier: MIT */
/*
 * The registry's side of collectors: its list of callback series and the
 * state of a collection in progress (collect_busy, the thread running it).
 * The registry needs these when a series goes away (its callback is
 * forgotten; removing a callback series waits for a running collection)
 * and across fork(); collector.c, above the registry, runs the callbacks
 * through pcpu__collect_begin()/pcpu__collect_end(). Kept apart so that the
 * registry never calls up into the collector. The design of collections
 * is in collector.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "registry.h"

/* The registry whose callbacks the calling thread is running, if any. */
static __thread struct pcpu_registry *collecting;

int pcpu__collect_wait_locked(struct pcpu_registry *reg)
{
	while (reg->collect_busy) {
		if (collecting == reg) {
			pcpu__set_error("called from a collector callback of the same registry: "
					"it would wait for the collection running it");
			errno = EDEADLK;
			return -1;
		}
		pthread_cond_wait(&reg->collect_cv, &reg->lock);
	}
	return 0;
}

void pcpu__collect_begin(struct pcpu_registry *reg)
{
	collecting = reg;
}

void pcpu__collect_end(void)
{
	collecting = NULL;
}

void pcpu__callback_link_locked(struct pcpu_registry *reg, struct pcpu__callback *cb)
{
	cb->next = NULL;
	cb->prev = reg->callbacks_last;
	if (cb->prev)
		cb->prev->next = cb;
	else
		reg->callbacks = cb;
	reg->callbacks_last = cb;
	reg->ncallbacks++;
}

void pcpu__callback_forget_locked(struct pcpu_registry *reg, struct pcpu__series *se)
{
	struct pcpu__callback *cb = se->cb;

	if (!cb)
		return;
	if (cb->prev)
		cb->prev->next = cb->next;
	else
		reg->callbacks = cb->next;
	if (cb->next)
		cb->next->prev = cb->prev;
	else
		reg->callbacks_last = cb->prev;
	reg->ncallbacks--;
	se->cb = NULL;
	free(cb);
}

void pcpu__collect_fork_child(struct pcpu_registry *reg)
{
	if (collecting == reg)
		return; /* forked from a callback: this thread finishes it */
	reg->collect_busy = 0;
	pthread_cond_init(&reg->collect_cv, NULL);
}
