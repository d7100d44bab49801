/* SPDX-License-Identifier: MIT */
/*
 * Connections, before and beside their requests -- idle clients shed near
 * the connection limit (pcpu__exp_on_connection()), plain HTTP sent to the
 * TLS port answered (below), and libmicrohttpd's log kept short
 * (pcpu__exp_log_mhd()). Every callback here runs in the serving thread
 * that owns the connection.
 */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "exporter_internal.h"

/* A connection being tracked for shedding (its socket context). */
struct pcpu__exp_tracked {
	struct MHD_Connection *conn;
	struct pcpu__exp_worker *w;
	size_t index; /* in w->conns */
};

/*
 * Plain HTTP sent to the TLS port. GnuTLS takes it for a broken handshake
 * and libmicrohttpd closes the connection without a word, logging a line
 * each time: a scraper configured with http:// instead of https:// learned
 * nothing, and filled the log. Go's net/http (every Go exporter) answers
 * 400 "Client sent an HTTP request to an HTTPS server." instead; so do we.
 * The first byte of a TLS connection is a record type (20..23) and the
 * first of an HTTP request is the method's first letter: libmicrohttpd
 * gives the TLS session of each new connection (on_connection()), and its
 * pull function -- how GnuTLS reads the socket -- is replaced with
 * tls_pull(), which peeks at that byte before the handshake reads anything.
 * A letter gets the 400, the connection ends, and the log says nothing of
 * it (log_mhd() drops libmicrohttpd's one line about the failed handshake).
 *
 * GnuTLS gives the pull function the descriptor only (libmicrohttpd set
 * it as the transport), so what is known of each connection's first byte
 * is kept by descriptor, in one table for the process -- descriptors are
 * the process's -- shared by every exporter with TLS, made when the first
 * starts and freed when the last stops. Each entry is touched by the
 * thread serving the connection that has the descriptor now (relaxed
 * atomics: a descriptor reused by another thread's connection is
 * re-armed by that thread before any byte is read).
 */
enum { SNIFF_FIRST = 1, SNIFF_TLS = 2 };
static pthread_mutex_t sniff_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *sniff; /* by descriptor */
static size_t nsniff;
static unsigned sniff_users;
/* The next libmicrohttpd message of this thread is about a 400 sent here. */
static __thread int quiet_handshake;

static const char plain_http_answer[] =
	"HTTP/1.1 400 Bad Request\r\n"
	"Content-Type: text/plain; charset=utf-8\r\n"
	"Content-Length: 48\r\n"
	"Connection: close\r\n"
	"\r\n"
	"Client sent an HTTP request to an HTTPS server.\n";

static ssize_t tls_pull(gnutls_transport_ptr_t ptr, void *buf, size_t len)
{
	int fd = (int)(intptr_t)ptr;
	unsigned char first;
	char sink[4096];
	int i;

	if (fd >= 0 && (size_t)fd < nsniff && __atomic_load_n(&sniff[fd], __ATOMIC_RELAXED) == SNIFF_FIRST &&
	    recv(fd, &first, 1, MSG_PEEK) == 1) {
		__atomic_store_n(&sniff[fd], SNIFF_TLS, __ATOMIC_RELAXED);
		if (first >= 'A' && first <= 'Z') {
			/* Read what came (the request, usually in one
			 * segment) before answering: a socket closed with
			 * unread data sends a reset, which can destroy the
			 * answer before the client reads it. */
			for (i = 0; i < 4 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
				;
			if (send(fd, plain_http_answer, sizeof plain_http_answer - 1, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
				shutdown(fd, SHUT_WR);
			quiet_handshake = 1;
			errno = ECONNRESET; /* the handshake fails: libmicrohttpd closes */
			return -1;
		}
	}
	return recv(fd, buf, len, 0);
}

/* GnuTLS's companion of a pull function (for handshake timeouts; unused with
 * libmicrohttpd's non-blocking sockets, but GnuTLS refuses a replaced pull
 * function without one where it needs it). */
static int tls_pull_timeout(gnutls_transport_ptr_t ptr, unsigned ms)
{
	struct pollfd p = { (int)(intptr_t)ptr, POLLIN, 0 };

	return poll(&p, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

/* A new TLS connection: its first byte will be looked at (tls_pull()). */
static void sniff_connection(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *fdi = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *si = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);

	if (!fdi || !si || !si->tls_session || fdi->connect_fd < 0 || (size_t)fdi->connect_fd >= nsniff)
		return; /* served as before: closed unanswered */
	__atomic_store_n(&sniff[fdi->connect_fd], SNIFF_FIRST, __ATOMIC_RELAXED);
	gnutls_transport_set_pull_function((gnutls_session_t)si->tls_session, tls_pull);
	gnutls_transport_set_pull_timeout_function((gnutls_session_t)si->tls_session, tls_pull_timeout);
}

int pcpu__exp_sniff_get(size_t ndesc)
{
	int rc = 0;

	pthread_mutex_lock(&sniff_lock);
	if (!sniff) {
		sniff = calloc(ndesc, 1);
		nsniff = sniff ? ndesc : 0;
	}
	if (sniff)
		sniff_users++;
	else
		rc = -1;
	pthread_mutex_unlock(&sniff_lock);
	return rc;
}

void pcpu__exp_sniff_put(void)
{
	pthread_mutex_lock(&sniff_lock);
	if (sniff_users && --sniff_users == 0) {
		free(sniff);
		sniff = NULL;
		nsniff = 0;
	}
	pthread_mutex_unlock(&sniff_lock);
}

/* ---- shedding idle clients ------------------------------------------------------------ */

/* The tracking of the serving thread (libmicrohttpd's worker daemon) `d`,
 * made on its first connection; NULL without memory. */
static struct pcpu__exp_worker *worker_of(struct pcpu_exporter *e, const struct MHD_Daemon *d)
{
	struct pcpu__exp_worker *w = NULL;
	size_t i;

	pthread_mutex_lock(&e->lock);
	for (i = 0; i < e->nworkers; i++)
		if (e->workers[i]->d == d) {
			w = e->workers[i];
			goto out;
		}
	if (e->nworkers == e->capworkers) {
		size_t cap = e->capworkers ? e->capworkers * 2 : 4;
		struct pcpu__exp_worker **p = realloc(e->workers, cap * sizeof *p);

		if (!p)
			goto out;
		e->workers = p;
		e->capworkers = cap;
	}
	w = calloc(1, sizeof *w);
	if (w) {
		w->d = d;
		e->workers[e->nworkers++] = w;
	}
out:
	pthread_mutex_unlock(&e->lock);
	return w;
}

void pcpu__exp_workers_free(struct pcpu_exporter *e)
{
	size_t i;

	for (i = 0; i < e->nworkers; i++) {
		free(e->workers[i]->conns);
		free(e->workers[i]);
	}
	free(e->workers);
	e->workers = NULL;
	e->nworkers = e->capworkers = 0;
}

/* Shedding idle clients: libmicrohttpd closes connections past the limit
 * at once, so clients that only hold connections open could keep scrapes
 * out until the timeout. Past three quarters of the limit, every
 * connection gets a 1 s inactivity timeout instead (a scrape in progress is
 * active: unaffected); below half the limit, new ones get the timeout
 * again. Each serving thread (worker daemon) sheds its own connections,
 * against its share of the limit, as libmicrohttpd divides it: a
 * connection's timeout may be changed only by the thread serving it
 * (MHD_set_connection_option(), after the connection joined its lists). */
void pcpu__exp_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			     enum MHD_ConnectionNotificationCode code)
{
	struct pcpu_exporter *e = cls;
	struct pcpu__exp_tracked *t = *socket_context;
	const union MHD_ConnectionInfo *di;
	struct pcpu__exp_worker *w;
	size_t i, limit = e->worker_limit;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		quiet_handshake = 0; /* libmicrohttpd said nothing about it */
		if (!t)
			return;
		w = t->w;
		w->conns[t->index] = w->conns[--w->n];
		w->conns[t->index]->index = t->index;
		free(t);
		*socket_context = NULL;
		if (w->shedding && w->n < limit / 2)
			w->shedding = 0;
		return;
	}
	if (e->tls)
		sniff_connection(conn);
	di = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
	if (!di || !(w = worker_of(e, di->daemon)))
		return; /* untracked: only never shed early */
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct pcpu__exp_tracked **p = realloc(w->conns, cap * sizeof *p);

		if (!p)
			return;
		w->conns = p;
		w->cap = cap;
	}
	t = malloc(sizeof *t);
	if (!t)
		return;
	t->conn = conn;
	t->w = w;
	t->index = w->n;
	w->conns[w->n++] = t;
	*socket_context = t;
	/* At three quarters (4 n >= 3 limit: also with the tiny shares
	 * of a low descriptor limit split among threads, where limit / 4
	 * is 0 and "past" would never come). */
	if (!w->shedding && 4 * w->n >= 3 * limit) {
		w->shedding = 1;
		for (i = 0; i < w->n; i++)
			MHD_set_connection_option(w->conns[i]->conn, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
	} else if (w->shedding) {
		MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
	}
}

/* ---- the log ----------------------------------------------------------------------- */

void pcpu__exp_vlog(struct pcpu_exporter *e, const char *fmt, va_list ap)
{
	char msg[512], note[96];
	time_t now = time(NULL);
	size_t n;

	if (!e->log)
		return;
	pthread_mutex_lock(&e->log_lock);
	/* A message repeated within 10 s is counted, not said: a client
	 * opening connections past the limit in a loop must not flood the
	 * log ("reached connection limit"). */
	if (fmt == e->last_fmt && now - e->last_t < 10) {
		e->repeats++;
		pthread_mutex_unlock(&e->log_lock);
		return;
	}
	if (e->repeats) {
		snprintf(note, sizeof note, "(the last message %lu more times)", e->repeats);
		e->log(e->log_arg, note);
	}
	e->last_fmt = fmt;
	e->last_t = now;
	e->repeats = 0;
	vsnprintf(msg, sizeof msg, fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	e->log(e->log_arg, msg);
	pthread_mutex_unlock(&e->log_lock);
}

void pcpu__exp_log(struct pcpu_exporter *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pcpu__exp_vlog(e, fmt, ap);
	va_end(ap);
}

/* libmicrohttpd's messages, but for its one line about the handshake a
 * plain HTTP request made fail (tls_pull() answered it). */
void pcpu__exp_log_mhd(void *cls, const char *fmt, va_list ap)
{
	if (quiet_handshake) {
		quiet_handshake = 0;
		return;
	}
	pcpu__exp_vlog(cls, fmt, ap);
}
