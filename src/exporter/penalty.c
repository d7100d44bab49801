/* SPDX-License-Identifier: MIT */
/*
 * Refusals answered late: a request the web configuration's basic
 * authentication refuses (401, or 429/503 while the password checker is
 * busy), or a source's password check refuses (401), waits PENALTY_MS,
 * suspended, before its answer.
 *
 * Why (issue 51): clients sending wrong passwords as fast as they are
 * answered were answered at once -- 429 from the second check of one
 * address on, without a bcrypt -- so each spun through thousands of
 * requests a second, and every one of them cost the serving thread TLS
 * records, HTTP parsing and an HMAC: 8 such clients made a legitimate
 * scrape 3.9-4.7x slower than an idle one. A suspended connection costs
 * nothing while it waits, and a client that waits for its answer sends
 * 1000 / PENALTY_MS requests a second per connection at most. A client
 * whose password was verified never waits: it is never refused. (Browsers
 * and Prometheus see the same answers, later; Retry-After says 1.)
 *
 * One thread per started exporter (a source may get a password check at
 * any time), sleeping until the oldest
 * delay is over; the delays are all equal, so the queue is in deadline
 * order. Bounded: past PENALTY_QUEUE waiting refusals a refusal is
 * answered at once, as before (pcpu__exp_penalty_add() says so).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "exporter_internal.h"

#define PENALTY_MS 500
#define PENALTY_QUEUE 4096

struct penalty_item {
	struct timespec due;
	void (*fn)(void *arg);
	void *arg;
};

struct pcpu__exp_penalty {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	struct penalty_item q[PENALTY_QUEUE];
	size_t head, n;
	int stopping;
};

static int due(const struct timespec *now, const struct timespec *t)
{
	return now->tv_sec > t->tv_sec || (now->tv_sec == t->tv_sec && now->tv_nsec >= t->tv_nsec);
}

static void *penalty_main(void *arg)
{
	struct pcpu__exp_penalty *p = arg;
	struct timespec now;

	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		struct penalty_item it;

		if (!p->n) {
			pthread_cond_wait(&p->wake, &p->lock);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!due(&now, &p->q[p->head].due)) {
			pthread_cond_timedwait(&p->wake, &p->lock, &p->q[p->head].due);
			continue;
		}
		it = p->q[p->head];
		p->head = (p->head + 1) % PENALTY_QUEUE;
		p->n--;
		/* Under the lock, as auth.c resumes: stopping cannot pass a
		 * connection being resumed. The lock is taken before
		 * libmicrohttpd's, never after. */
		it.fn(it.arg);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct pcpu__exp_penalty *pcpu__exp_penalty_start(void)
{
	struct pcpu__exp_penalty *p = calloc(1, sizeof *p);
	pthread_condattr_t ca;
	int e;

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->wake, &ca);
	pthread_condattr_destroy(&ca);
	e = pthread_create(&p->thread, NULL, penalty_main, p);
	if (e) {
		pthread_cond_destroy(&p->wake);
		pthread_mutex_destroy(&p->lock);
		free(p);
		errno = e;
		return NULL;
	}
	pthread_setname_np(p->thread, "pcpu-penalty");
	return p;
}

int pcpu__exp_penalty_add(struct pcpu__exp_penalty *p, void (*fn)(void *arg), void *arg)
{
	struct penalty_item *it;

	pthread_mutex_lock(&p->lock);
	if (p->stopping || p->n == PENALTY_QUEUE) {
		pthread_mutex_unlock(&p->lock);
		return -1;
	}
	it = &p->q[(p->head + p->n) % PENALTY_QUEUE];
	clock_gettime(CLOCK_MONOTONIC, &it->due);
	it->due.tv_nsec += (long)PENALTY_MS * 1000000;
	it->due.tv_sec += it->due.tv_nsec / 1000000000;
	it->due.tv_nsec %= 1000000000;
	it->fn = fn;
	it->arg = arg;
	if (p->n++ == 0)
		pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

void pcpu__exp_penalty_stop(struct pcpu__exp_penalty *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	/* Every refusal waiting is answered now: libmicrohttpd must not be
	 * stopped with a suspended connection. */
	while (p->n) {
		struct penalty_item it = p->q[p->head];

		p->head = (p->head + 1) % PENALTY_QUEUE;
		p->n--;
		it.fn(it.arg);
	}
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
}

void pcpu__exp_penalty_free(struct pcpu__exp_penalty *p)
{
	if (!p)
		return;
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
