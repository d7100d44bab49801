/* SPDX-License-Identifier: MIT */
/*
 * Basic authentication of libpcpu-exporter's web configuration users
 * (auth.c): bcrypt off the threads that serve scrapes, behind a cache of
 * verdicts and a bounded queue. Internal, as the whole folder.
 */
#ifndef PCPUSTAT_AUTH_H
#define PCPUSTAT_AUTH_H

#include <stddef.h>
#include <sys/socket.h>

#include "webconfig.h"

/* Password checks admitted at once: the one the bcrypt worker runs and
 * those waiting for it. At cost 10 (~55 ms), the last waits half a second. */
#define AUTH_JOBS 9
/* Jobs (waiting or running) one client address may have: an IPv4 address,
 * or an IPv6 /64 (what one host, or one customer, is given). */
#define AUTH_PER_CLIENT 2
/* Wrong (user, password) pairs remembered. */
#define AUTH_DENIED_CACHED 64

enum auth_verdict {
	AUTH_GRANTED,
	AUTH_DENIED,
	AUTH_UNKNOWN,     /* pcpu__exp_auth_lookup(): not in the cache, pcpu__exp_auth_submit() it */
	AUTH_PENDING,     /* pcpu__exp_auth_submit(): queued; done() will say */
	AUTH_BUSY_CLIENT, /* pcpu__exp_auth_submit(): the client has AUTH_PER_CLIENT jobs already */
	AUTH_BUSY,        /* pcpu__exp_auth_submit(): AUTH_JOBS admitted already, or the exporter stops */
};

/* A credential's identity in the cache: a keyed digest of user and password. */
struct auth_key {
	unsigned char d[32];
};

/* Called once per AUTH_PENDING job, from the worker thread (or from
 * pcpu__exp_auth_stop()'s), with AUTH_GRANTED, AUTH_DENIED or AUTH_BUSY (the exporter
 * stops). */
typedef void auth_done_fn(void *arg, enum auth_verdict v);

struct auth;

/* The users of wc (copied: wc may be freed after) and the worker thread.
 * NULL with errno on failure. */
struct auth *pcpu__exp_auth_start(const struct web_config *wc);

/* The cached verdict on (user, pass): AUTH_GRANTED or AUTH_DENIED at once,
 * or AUTH_UNKNOWN with *key set for pcpu__exp_auth_submit(). Never waits for a bcrypt:
 * takes a mutex that is only ever held for a few comparisons. */
enum auth_verdict pcpu__exp_auth_lookup(struct auth *a, const char *user, const char *pass, struct auth_key *key);

/* Queues the bcrypt of a credential pcpu__exp_auth_lookup() did not know, for a
 * client at `client` (NULL: one anonymous client): AUTH_PENDING, and
 * done(arg, verdict) will be called exactly once from another thread, maybe
 * before pcpu__exp_auth_submit() returns; or AUTH_BUSY_CLIENT or AUTH_BUSY at once,
 * and done() is never called. Never waits for a bcrypt. */
enum auth_verdict pcpu__exp_auth_submit(struct auth *a, const struct auth_key *key, const char *user, const char *pass,
			      const struct sockaddr *client, auth_done_fn *done, void *arg);

/* Shutting down, step 1 (while the server may still call pcpu__exp_auth_submit()):
 * every job not yet answered gets done(arg, AUTH_BUSY) before this returns,
 * and later pcpu__exp_auth_submit()s get AUTH_BUSY. A bcrypt in progress is not
 * waited for: one of a huge cost could take days. */
void pcpu__exp_auth_stop(struct auth *a);
/* Step 2, once nothing calls pcpu__exp_auth_lookup() or pcpu__exp_auth_submit() any more: frees
 * `a`, or leaves that to the worker if a bcrypt still runs. */
void pcpu__exp_auth_free(struct auth *a);

#endif /* PCPUSTAT_AUTH_H */
