/* SPDX-License-Identifier: MIT */
/*
 * Basic authentication of libpcpu-exporter's web configuration users, off
 * the threads that serve scrapes.
 *
 * bcrypt is slow on purpose: ~55 ms at cost 10 on an idle machine, several
 * times that under load. Run where libmicrohttpd serves every connection,
 * each wrong password stalled every scrape queued behind it: 4 clients
 * sending wrong passwords took a legitimate TLS scrape from 3-8 ms to
 * 62-177 ms, 16 to over a second, and a real Prometheus with the right
 * password saw its target down most of the time. So, as the Prometheus
 * exporter toolkit (web/handler.go, web/cache.go) does in its own way:
 *
 *  - Verdicts are remembered, keyed by a digest of (user, password): a
 *    password that matched once is granted at once from then on (one per
 *    user, kept apart, so that wrong passwords cannot evict it), and the
 *    last AUTH_DENIED_CACHED wrong ones are refused at once (a Prometheus
 *    job with a wrong password sends the same one every scrape: one
 *    bcrypt, not one per scrape). The configuration does not change while
 *    the exporter runs, so a verdict never goes stale. The toolkit keeps
 *    the plaintext password as its key; this keeps an HMAC-SHA-256 of it
 *    under a key drawn at start, which no other process shares.
 *  - Whatever the cache does not know is a job for one worker thread:
 *    one bcrypt at a time (the toolkit serialises them with a mutex), so
 *    unauthenticated clients can take one CPU at most. The connection waits
 *    suspended (MHD_suspend_connection(): request.c) while libmicrohttpd's
 *    thread goes on serving the others.
 *  - The queue is bounded (AUTH_JOBS, the one running included), and so is
 *    what one client address may have in it (AUTH_PER_CLIENT): past those
 *    a request is answered at once -- 429 past the client's share, 503
 *    when the queue is full -- never delayed. (The toolkit's optional rate
 *    limit answers 429 to everyone alike.)
 *
 * So a client whose password was verified never waits for a bcrypt, and a
 * client whose password was not yet waits for at most the jobs ahead of it,
 * or is told to retry while the queue is full.
 *
 * An unknown user costs a bcrypt too (against the first user's hash), so
 * that the time of an answer does not tell which users exist.
 *
 * Locking: one mutex over the queue and the cache, held for a few
 * comparisons and copies (and a connection's resumption), never during a
 * bcrypt: pcpu__exp_auth_lookup() and pcpu__exp_auth_submit(), which the serving thread calls,
 * never wait for one.
 */
#include <crypt.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "auth.h"

struct auth_user {
	char *name, *hash;
	struct auth_key granted; /* the password that matched, if have_granted */
	int have_granted;
};

struct auth_job {
	struct auth_key key;
	unsigned char client[16]; /* client_id() */
	size_t user;              /* index in users, or SIZE_MAX: no such user */
	char *pass;
	auth_done_fn *done;
	void *arg;
};

struct auth {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t worker;
	unsigned char hmac_key[32];
	struct auth_user *users;
	size_t nusers;
	/* Waiting jobs: a ring. AUTH_JOBS are admitted at once, counting the
	 * one running: what a client is answered does not depend on whether
	 * the worker took a job yet. */
	struct auth_job queue[AUTH_JOBS];
	size_t head, n;
	/* The job the worker runs, while busy (its client counts against
	 * AUTH_PER_CLIENT; pcpu__exp_auth_stop() answers it). */
	struct auth_job running;
	int busy;
	/* Wrong credentials: a ring, the oldest replaced. */
	struct auth_key denied[AUTH_DENIED_CACHED];
	size_t ndenied, next_denied;
	int stopping; /* pcpu__exp_auth_stop() was called */
	int orphaned; /* pcpu__exp_auth_free() left `a` to the worker */
};

/* ---- verdicts ------------------------------------------------------------------------ */

/* Compares in time independent of where they differ. */
static int same(const unsigned char *a, const unsigned char *b, size_t n)
{
	unsigned char diff = 0;
	size_t i;

	for (i = 0; i < n; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

/* 1 if pass matches the bcrypt hash. Tens of milliseconds or more. */
static int bcrypt_matches(const char *hash, const char *pass, struct crypt_data *cd)
{
	const char *out;
	int ok;

	memset(cd, 0, sizeof *cd);
	out = crypt_r(pass, hash, cd);
	ok = out && out[0] != '*' && strlen(out) == strlen(hash) &&
	     same((const unsigned char *)out, (const unsigned char *)hash, strlen(hash));
	explicit_bzero(cd, sizeof *cd);
	return ok;
}

static size_t find_user(const struct auth *a, const char *name)
{
	size_t i;

	for (i = 0; i < a->nusers; i++)
		if (strcmp(a->users[i].name, name) == 0)
			return i;
	return SIZE_MAX;
}

/* HMAC-SHA-256 of "user NUL password" (neither holds a NUL). 0 or -1. */
static int make_key(const struct auth *a, const char *user, const char *pass, struct auth_key *key)
{
	size_t ul = strlen(user), pl = strlen(pass);
	unsigned char *buf = malloc(ul + pl + 1);
	int rc;

	if (!buf)
		return -1;
	memcpy(buf, user, ul + 1);
	memcpy(buf + ul + 1, pass, pl);
	rc = gnutls_hmac_fast(GNUTLS_MAC_SHA256, a->hmac_key, sizeof a->hmac_key, buf, ul + pl + 1, key->d);
	explicit_bzero(buf, ul + pl + 1);
	free(buf);
	return rc == 0 ? 0 : -1;
}

enum auth_verdict pcpu__exp_auth_lookup(struct auth *a, const char *user, const char *pass, struct auth_key *key)
{
	enum auth_verdict v = AUTH_UNKNOWN;
	size_t u, i;

	if (make_key(a, user, pass, key) < 0)
		return AUTH_BUSY; /* out of memory: retry later */
	u = find_user(a, user);
	pthread_mutex_lock(&a->lock);
	if (u != SIZE_MAX && a->users[u].have_granted && same(a->users[u].granted.d, key->d, sizeof key->d))
		v = AUTH_GRANTED;
	for (i = 0; v == AUTH_UNKNOWN && i < a->ndenied; i++)
		if (same(a->denied[i].d, key->d, sizeof key->d))
			v = AUTH_DENIED;
	pthread_mutex_unlock(&a->lock);
	return v;
}

/* Remembers a verdict (lock held). */
static void remember(struct auth *a, const struct auth_job *j, int ok)
{
	if (ok) {
		a->users[j->user].granted = j->key;
		a->users[j->user].have_granted = 1;
		return;
	}
	a->denied[a->next_denied] = j->key;
	a->next_denied = (a->next_denied + 1) % AUTH_DENIED_CACHED;
	if (a->ndenied < AUTH_DENIED_CACHED)
		a->ndenied++;
}

/* ---- the queue and its worker --------------------------------------------------------- */

/* Who a client is, for AUTH_PER_CLIENT: an IPv4 address (also when mapped
 * into IPv6), or the /64 of an IPv6 one; all zeros if unknown. */
static void client_id(const struct sockaddr *sa, unsigned char out[16])
{
	memset(out, 0, 16);
	if (sa && sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *in6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(in6))
			memcpy(out, in6->s6_addr + 12, 4);
		else
			memcpy(out + 4, in6->s6_addr, 8);
	}
}

static void job_free(struct auth_job *j)
{
	if (j->pass) {
		explicit_bzero(j->pass, strlen(j->pass));
		free(j->pass);
		j->pass = NULL;
	}
}

static void auth_destroy(struct auth *a)
{
	size_t i;

	for (i = 0; i < a->nusers; i++) {
		free(a->users[i].name);
		free(a->users[i].hash);
	}
	free(a->users);
	pthread_cond_destroy(&a->wake);
	pthread_mutex_destroy(&a->lock);
	explicit_bzero(a, sizeof *a);
	free(a);
}

static void *worker_main(void *arg)
{
	struct auth *a = arg;
	struct crypt_data *cd = malloc(sizeof *cd); /* 32 KiB */
	struct auth_job j;
	int ok, orphaned;

	/* bcrypt is slow on purpose and runs whenever clients send passwords
	 * never seen: on a busy machine it yields to the scrapes (a thread's
	 * nice value on Linux; lowering it needs no privilege). */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);

	pthread_mutex_lock(&a->lock);
	for (;;) {
		while (!a->n && !a->stopping)
			pthread_cond_wait(&a->wake, &a->lock);
		if (a->stopping)
			break; /* pcpu__exp_auth_stop() answered what was queued */
		j = a->queue[a->head];
		a->head = (a->head + 1) % AUTH_JOBS;
		a->n--;
		a->running = j;
		a->running.pass = NULL; /* the worker's copy, j, frees it */
		a->busy = 1;
		pthread_mutex_unlock(&a->lock);

		/* An unknown user is checked against a real hash too: the
		 * same cost, whatever the user. */
		ok = cd && bcrypt_matches(a->users[j.user == SIZE_MAX ? 0 : j.user].hash, j.pass, cd) &&
		     j.user != SIZE_MAX;
		job_free(&j);

		pthread_mutex_lock(&a->lock);
		a->busy = 0;
		if (a->orphaned)
			break;
		if (a->stopping)
			continue; /* pcpu__exp_auth_stop() answered this job */
		if (cd)
			remember(a, &j, ok);
		/* Under the lock, so that pcpu__exp_auth_stop() cannot return (and the
		 * server be stopped) while a connection is being resumed. The
		 * lock is only ever taken before libmicrohttpd's (done()
		 * resumes a connection), never after: no inversion. */
		j.done(j.arg, ok ? AUTH_GRANTED : cd ? AUTH_DENIED : AUTH_BUSY);
	}
	orphaned = a->orphaned;
	pthread_mutex_unlock(&a->lock);
	free(cd);
	if (orphaned) /* pcpu__exp_auth_free() left it to us */
		auth_destroy(a);
	return NULL;
}

enum auth_verdict pcpu__exp_auth_submit(struct auth *a, const struct auth_key *key, const char *user, const char *pass,
			      const struct sockaddr *client, auth_done_fn *done, void *arg)
{
	struct auth_job j;
	size_t i, mine = 0;

	memset(&j, 0, sizeof j);
	j.key = *key;
	client_id(client, j.client);
	j.user = find_user(a, user);
	j.done = done;
	j.arg = arg;
	pthread_mutex_lock(&a->lock);
	if (a->stopping) {
		pthread_mutex_unlock(&a->lock);
		return AUTH_BUSY;
	}
	/* The client's share first: a client over it is told so (429),
	 * whether or not the queue has room for others. */
	if (a->busy && memcmp(a->running.client, j.client, sizeof j.client) == 0)
		mine++;
	for (i = 0; i < a->n; i++)
		if (memcmp(a->queue[(a->head + i) % AUTH_JOBS].client, j.client, sizeof j.client) == 0)
			mine++;
	if (mine >= AUTH_PER_CLIENT || a->n + (size_t)a->busy >= AUTH_JOBS) {
		pthread_mutex_unlock(&a->lock);
		return mine >= AUTH_PER_CLIENT ? AUTH_BUSY_CLIENT : AUTH_BUSY;
	}
	j.pass = strdup(pass);
	if (!j.pass) {
		pthread_mutex_unlock(&a->lock);
		return AUTH_BUSY;
	}
	a->queue[(a->head + a->n) % AUTH_JOBS] = j;
	a->n++;
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
	return AUTH_PENDING;
}

struct auth *pcpu__exp_auth_start(const struct web_config *wc)
{
	struct auth *a = calloc(1, sizeof *a);
	size_t i;
	int e;

	if (!a)
		return NULL;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->wake, NULL);
	a->users = calloc(wc->nusers ? wc->nusers : 1, sizeof *a->users);
	if (!a->users || !wc->nusers || gnutls_rnd(GNUTLS_RND_KEY, a->hmac_key, sizeof a->hmac_key) != 0) {
		e = a->users && !wc->nusers ? EINVAL : ENOMEM;
		goto fail;
	}
	for (; a->nusers < wc->nusers; a->nusers++) {
		i = a->nusers;
		a->users[i].name = strdup(wc->users[i].name);
		a->users[i].hash = strdup(wc->users[i].hash);
		if (!a->users[i].name || !a->users[i].hash) {
			a->nusers++;
			e = ENOMEM;
			goto fail;
		}
	}
	e = pthread_create(&a->worker, NULL, worker_main, a);
	if (e)
		goto fail;
	pthread_setname_np(a->worker, "pcpu-bcrypt"); /* top -H, and the benchmark, tell it apart */
	return a;
fail:
	auth_destroy(a);
	errno = e;
	return NULL;
}

void pcpu__exp_auth_stop(struct auth *a)
{
	struct auth_job answer[AUTH_JOBS + 1];
	size_t n = 0, i;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stopping = 1;
	if (a->busy)
		answer[n++] = a->running; /* its pass is the worker's to free */
	for (i = 0; i < a->n; i++) {
		answer[n] = a->queue[(a->head + i) % AUTH_JOBS];
		job_free(&answer[n]);
		n++;
	}
	a->n = 0;
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
	for (i = 0; i < n; i++)
		answer[i].done(answer[i].arg, AUTH_BUSY);
}

void pcpu__exp_auth_free(struct auth *a)
{
	int busy;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stopping = 1;
	busy = a->busy;
	if (busy)
		a->orphaned = 1;
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
	if (busy) {
		pthread_detach(a->worker);
		return;
	}
	pthread_join(a->worker, NULL);
	auth_destroy(a);
}
