/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat serve`: connections, before and beside their requests -- idle
 * clients shed near the connection limit (on_connection()), plain HTTP sent
 * to the TLS port answered (below), and libmicrohttpd's log kept short
 * (log_mhd()). Serving thread only, as every callback here.
 */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "serve.h"

/* A connection being tracked for shedding (its socket context). */
struct tracked {
	struct MHD_Connection *conn;
	size_t index; /* in server.conns */
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
 * Serving thread only, as every callback here.
 */
enum { SNIFF_FIRST, SNIFF_TLS };
static unsigned char *sniff; /* by descriptor: SNIFF_FIRST until its first byte was seen */
static size_t nsniff;
static int quiet_handshake; /* the next libmicrohttpd message is about a 400 sent here */

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

	if (fd >= 0 && (size_t)fd < nsniff && sniff[fd] == SNIFF_FIRST && recv(fd, &first, 1, MSG_PEEK) == 1) {
		sniff[fd] = SNIFF_TLS;
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
	sniff[fdi->connect_fd] = SNIFF_FIRST;
	gnutls_transport_set_pull_function((gnutls_session_t)si->tls_session, tls_pull);
	gnutls_transport_set_pull_timeout_function((gnutls_session_t)si->tls_session, tls_pull_timeout);
}

void sniff_init(size_t ndesc)
{
	sniff = calloc(ndesc, 1);
	nsniff = sniff ? ndesc : 0;
}

void sniff_free(void)
{
	free(sniff);
	sniff = NULL;
	nsniff = 0;
}

/* Shedding idle clients: libmicrohttpd closes connections past the limit
 * at once, so clients that only hold connections open could keep scrapes
 * out until --timeout. Past three quarters of the limit, every connection
 * gets a 1 s inactivity timeout instead (a scrape in progress is active:
 * unaffected); below half the limit, new ones get --timeout again. Runs
 * in libmicrohttpd's one thread, after the connection joined its lists
 * (where MHD_set_connection_option() may change its timeout). */
void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
		   enum MHD_ConnectionNotificationCode code)
{
	struct server *sv = cls;
	struct tracked *t = *socket_context;
	size_t i;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		quiet_handshake = 0; /* libmicrohttpd said nothing about it */
		if (!t)
			return;
		sv->conns[t->index] = sv->conns[--sv->nconns];
		sv->conns[t->index]->index = t->index;
		free(t);
		*socket_context = NULL;
		if (sv->shedding && sv->nconns < sv->limit / 2)
			sv->shedding = 0;
		return;
	}
	if (sv->tls)
		sniff_connection(conn);
	if (sv->nconns == sv->capconns) {
		size_t cap = sv->capconns ? sv->capconns * 2 : 64;
		struct tracked **p = realloc(sv->conns, cap * sizeof *p);

		if (!p)
			return; /* untracked: only never shed early */
		sv->conns = p;
		sv->capconns = cap;
	}
	t = malloc(sizeof *t);
	if (!t)
		return;
	t->conn = conn;
	t->index = sv->nconns;
	sv->conns[sv->nconns++] = t;
	*socket_context = t;
	if (!sv->shedding && sv->nconns > sv->limit - sv->limit / 4) {
		sv->shedding = 1;
		for (i = 0; i < sv->nconns; i++)
			MHD_set_connection_option(sv->conns[i]->conn, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
	} else if (sv->shedding) {
		MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
	}
}

/* libmicrohttpd's messages, prefixed as ours. A message repeated within
 * 10 s is counted, not printed: a client opening connections past the
 * limit in a loop must not flood the log ("reached connection limit"). */
void log_mhd(void *cls, const char *fmt, va_list ap)
{
	static const char *last;
	static time_t last_t;
	static unsigned long repeats;
	time_t now = time(NULL);

	(void)cls;
	if (quiet_handshake) { /* a plain HTTP request answered 400: tls_pull() */
		quiet_handshake = 0;
		return;
	}
	if (fmt == last && now - last_t < 10) {
		repeats++;
		return;
	}
	if (repeats)
		fprintf(stderr, "pcpustat serve: (the last message %lu more times)\n", repeats);
	last = fmt;
	last_t = now;
	repeats = 0;
	fputs("pcpustat serve: ", stderr);
	vfprintf(stderr, fmt, ap);
}
