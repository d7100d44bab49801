/* SPDX-License-Identifier: MIT */
/*
 * Collectors: series whose value a callback computes when the registry is
 * read (a queue's depth, a pool's size, the process's memory), as the
 * Prometheus clients' collectors and GaugeFunc/CounterFunc do.
 *
 * The design. A callback series is an ordinary series of a counter or
 * gauge family -- same storage in the registry's zone, same directory entry
 * -- plus a callback. A collection runs every callback and stores each
 * value into its series' storage with a gauge set (a set is an offset in
 * the slot-0 mirror word, which counters have too). Everything that reads
 * values then works unchanged: snapshots, the writers, and the shared
 * segment, whose readers in other processes see the value of the last
 * collection (they cannot run the callback). A series whose callback failed
 * is marked, and snapshots leave it out until a later call succeeds.
 *
 * Locks. The callbacks run WITHOUT the registry's mutex: a callback may
 * take a while (read /proc, take the application's own lock), and holding
 * the directory's mutex meanwhile would stall every registration and, with
 * a callback that registers a series itself, deadlock. Instead a collection
 * sets `collect_busy` under the mutex, copies the list of callbacks, drops
 * the mutex, runs them, and clears the flag (broadcasting collect_cv). What
 * must not overlap a running callback waits for the flag instead of the
 * mutex: another collection (one at a time per registry, so a callback is
 * never called concurrently with itself), and removing a callback series
 * (so that after removal returns the callback is not running and `arg` may
 * be freed; the series' storage stays valid while values are stored).
 *
 * Re-entry. The thread running a collection is remembered (thread-local,
 * registry_callbacks.c, which keeps the registry's side of collections);
 * the calls that would wait for that very collection -- a snapshot, a
 * write, a collect, the removal of a callback series -- see it and fail
 * with EDEADLK rather than wait for themselves. Everything else works from
 * a callback, because no registry lock is held.
 *
 * fork(): the registry's fork handlers hold its mutex across fork(), so a
 * child never sees the list half-changed. A collection another thread was
 * running in the parent will never finish in the child: its child handler
 * clears the flag (and makes a fresh condition variable, whose waiters were
 * other threads). A fork() from inside a callback leaves the collection to
 * the forking thread, which finishes it in both processes.
 *
 * Alternatives considered: holding the mutex while calling (client_golang's
 * registry does the equivalent with its collectors' Collect()) makes every
 * callback a potential deadlock with the application's own locks and
 * stalls registrations; a recursive mutex would allow re-entry but not
 * registration from other threads meanwhile; copying values under a
 * separate "collect lock" taken by every removal made every removal wait
 * for a slow callback, where only a callback series' removal needs to.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

int pcpu__registry_collect(struct pcpu_registry *reg)
{
	struct pcpu__callback *cb, **list;
	int64_t *values;
	int *failed;
	size_t n, k;
	int nfailed = 0, err = 0;

	pthread_mutex_lock(&reg->lock);
	if (pcpu__collect_wait_locked(reg) < 0) {
		pthread_mutex_unlock(&reg->lock);
		return -1;
	}
	n = reg->ncallbacks;
	if (n == 0) {
		pthread_mutex_unlock(&reg->lock);
		return 0;
	}
	list = malloc(n * sizeof *list);
	values = malloc(n * sizeof *values);
	failed = malloc(n * sizeof *failed);
	if (!list || !values || !failed) {
		pthread_mutex_unlock(&reg->lock);
		free(list);
		free(values);
		free(failed);
		errno = ENOMEM;
		return -1;
	}
	for (k = 0, cb = reg->callbacks; cb; cb = cb->next)
		list[k++] = cb;
	reg->collect_busy = 1;
	pthread_mutex_unlock(&reg->lock);

	/* No registry lock held: see the file comment. The series cannot go
	 * away meanwhile (removal waits for collect_busy). */
	pcpu__collect_begin(reg);
	for (k = 0; k < n; k++) {
		values[k] = 0;
		errno = 0;
		failed[k] = list[k]->fn(list[k]->arg, &values[k]) != 0;
		if (failed[k]) {
			err = errno;
			nfailed++;
			pcpu__set_error("collector callback failed");
			pcpu__msg_prefix("family", list[k]->fam->name);
		} else {
			/* A set is an offset in the mirror word: counters have
			 * one too, and store the value modulo 2^64 the same way. */
			pcpu_gauge_set((pcpu_gauge_t)list[k]->se->handle, values[k]);
		}
	}
	pcpu__collect_end();

	pthread_mutex_lock(&reg->lock);
	for (k = 0; k < n; k++)
		list[k]->failed = failed[k]; /* read by snapshots, under the lock */
	reg->collect_busy = 0;
	pthread_cond_broadcast(&reg->collect_cv);
	pthread_mutex_unlock(&reg->lock);
	free(list);
	free(values);
	free(failed);
	errno = err;
	return nfailed;
}

int pcpu_registry_collect(pcpu_registry_t *reg)
{
	int r;

	if (!reg) {
		pcpu__set_error("registry is NULL");
		errno = EINVAL;
		return -1;
	}
	r = pcpu__registry_collect(reg);
	if (r >= 0) {
		/* Groups too: a published segment holds their last read. */
		int e = errno;

		pthread_mutex_lock(&reg->lock);
		pcpu__groups_read_locked(reg);
		pthread_mutex_unlock(&reg->lock);
		errno = e;
	}
	return r;
}

int pcpu_family_callback(pcpu_family_t *fam, const char *const *label_values,
			 pcpu_callback_fn fn, void *arg)
{
	struct pcpu__callback *cb;

	if (!fam || !fn) {
		pcpu__set_error("pcpu_family_callback: NULL family or callback");
		errno = EINVAL;
		return -1;
	}
	if ((fam->type != PCPU_METRIC_COUNTER && fam->type != PCPU_METRIC_GAUGE) ||
	    (fam->flags & PCPU_SNAPSHOT_INFO)) {
		pcpu__set_error("a callback computes a counter's or a gauge's value (not an info metric's: 1)");
		pcpu__msg_prefix("family", fam->name);
		errno = EINVAL;
		return -1;
	}
	cb = calloc(1, sizeof *cb);
	if (!cb)
		return -1;
	cb->fn = fn;
	cb->arg = arg;
	if (pcpu__series_add_callback(fam, label_values, cb) < 0) {
		int e = errno;

		free(cb);
		errno = e;
		return -1;
	}
	return 0;
}
