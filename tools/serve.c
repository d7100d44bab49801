/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat serve`: a Prometheus exporter for statistics segments.
 *
 *   GET /metrics          every served segment in one exposition (scrape.c)
 *   GET /metrics/SEGMENT  one segment (name, pid or file name) as it is
 *   GET /                 a short index
 *
 * Format: as the Accept header asks (pcpu_format_negotiate(), the library's
 * one implementation), gzip-compressed when Accept-Encoding allows it
 * (pcpu_format_gzip_acceptable()); both exposition writers produce a whole
 * exposition or nothing.
 *
 * Why libmicrohttpd: the exporter faces whatever can reach its port -- idle
 * and slow clients, request smuggling, TLS -- and HTTP parsing, connection
 * limits, inactivity timeouts, request-size limits, Host checks and TLS
 * (GnuTLS) are what a well-kept, fuzzed server library gets right and a
 * hand-written one got wrong (bodies parsed as a second request, bare-LF
 * request lines unanswered, no Host check, slowloris). libmicrohttpd is
 * what prometheus-client-c uses, is packaged by Debian with GnuTLS, and
 * embeds in a C program without C++; civetweb (prometheus-cpp's) is not
 * packaged as a library by Debian. The library pcpu does not depend on it:
 * only this tool does.
 *
 * Threads: libmicrohttpd's one internal thread (epoll) serves every
 * connection and runs the scrapes, one at a time (a scrape takes
 * microseconds to milliseconds); idle connections cost nothing while a
 * scrape is served. The main thread only waits for SIGINT/SIGTERM.
 *
 * Limits: --max-clients connections (beyond them libmicrohttpd closes new
 * connections at once; the descriptor limit is raised to fit, or the
 * connection limit lowered so that a scrape always has descriptors left:
 * never EMFILE in a loop; near the limit idle clients are shed, see
 * on_connection()), --timeout of inactivity, 16 KiB of request headers, no
 * request bodies, one Host, --max-bytes per scrape.
 *
 * Malformed requests are libmicrohttpd's (0.9.75): it answers 400 or 505 to
 * most and closes the connection; a request line it cannot split into
 * method, target and version ("GARBAGE") is closed unanswered, as it is
 * parsed before any callback of ours runs and no option makes the library
 * answer it (1.0 rewrote that parser, with MHD_OPTION_CLIENT_DISCIPLINE_LVL;
 * Debian 12 has 0.9.75). A bare LF ends a line (RFC 9112 2.2 allows it).
 * pcpustat(1) and exporter_test.py's MALFORMED table pin which is which.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "auth.h"
#include "pcpustat.h"
#include "webconfig.h"

/* Descriptors kept free for a scrape (directory, segment, /proc files)
 * and libmicrohttpd itself (epoll, its wakeup pipe), besides stdio. */
#define FD_RESERVE 8
/* Request line and headers, and the response headers, per connection. */
#define CONNECTION_MEMORY (16 * 1024)

static const char serve_usage[] =
	"Usage: pcpustat serve [OPTIONS] [SEGMENT...]\n"
	"\n"
	"Serves pcpu statistics segments to Prometheus over HTTP(S):\n"
	"  /metrics          the SEGMENTs given (default: every segment you can read),\n"
	"                    labelled pcpu_segment=\"NAME\" and pcpu_pid=\"PID\", with\n"
	"                    pcpu_segment_up 1 or 0 for each\n"
	"  /metrics/SEGMENT  one segment, unlabelled\n"
	"OpenMetrics or Prometheus text format as the Accept header prefers, gzip when\n"
	"Accept-Encoding allows. A segment that cannot be read or merged is left out,\n"
	"never half shown, as pcpu_segment_up{...,reason=\"WHY\"} 0 (corrupt, permission,\n"
	"duplicate, conflict, too_large...: man pcpustat); the scrape goes on.\n"
	"\n"
	"Options:\n"
	"  -l, --listen ADDR    HOST:PORT, [IPv6]:PORT or PORT (default 127.0.0.1:9464;\n"
	"                       port 0 picks a free one). The address actually used is\n"
	"                       printed on standard output.\n"
	"  -d, --dir DIR        segment directory (default $PCPU_SEGMENT_DIR, else the\n"
	"                       per-user directories /dev/shm/pcpu-UID)\n"
	"  -u, --owner USER     serve segments owned by USER (default: yourself; root:\n"
	"                       every user's, each only if its file belongs to the user\n"
	"                       its writer process runs as)\n"
	"  -a, --any-owner      serve segments of any owner you have access to\n"
	"      --max-clients N  connections at once (default 1024); more are closed at once\n"
	"      --timeout SECS   close a connection inactive that long (default 10)\n"
	"      --max-bytes N    bytes one scrape may read and allocate (default 256M;\n"
	"                       suffixes K, M, G); a scrape over it fails alone (503)\n"
	"      --max-down N     segments down reported one by one per user (default\n"
	"                       16); the rest are left unread, counted in\n"
	"                       pcpu_segments_omitted{uid=\"UID\"}\n"
	"      --web.config.file FILE\n"
	"                       TLS and basic authentication, in the Prometheus exporter\n"
	"                       toolkit's format (tls_server_config, basic_auth_users)\n"
	"  -h, --help\n"
	"\n"
	"Prometheus scrape configuration:\n"
	"  scrape_configs:\n"
	"    - job_name: pcpu\n"
	"      static_configs: [{ targets: ['127.0.0.1:9464'] }]\n"
	"\n"
	"SIGINT or SIGTERM stop it.\n";

/* A connection being tracked for shedding (its socket context). */
struct tracked {
	struct MHD_Connection *conn;
	size_t index; /* in server.conns */
};

struct server {
	struct scrape_config cf;
	struct scrape_state st; /* used by the one serving thread only */
	struct web_config wc;
	struct auth *auth; /* basic_auth_users: verdicts and the bcrypt worker */
	int tls;
	/* Open connections (serving thread only), and whether idle ones are
	 * being shed: see on_connection(). */
	struct tracked **conns;
	size_t nconns, capconns, limit;
	int shedding;
};

/* One request (libmicrohttpd's per-request context), from its first call
 * to its completion (on_completed()). */
struct request {
	struct MHD_Connection *conn;
	enum {
		REQ_STARTED, /* headers checked: answered on the next call */
		REQ_WAITING, /* suspended until auth.c's worker decides */
		REQ_DECIDED, /* resumed with `verdict` */
	} state;
	enum auth_verdict verdict;
};

static const char index_text[] =
	"pcpustat serve: pcpu statistics for Prometheus\n"
	"  /metrics          all served segments\n"
	"  /metrics/SEGMENT  one segment (name, pid or file name)\n";

/* gzip of body; NULL if compression fails (then the plain body is sent).
 * Level 1: most of the gain on exposition text (about 10x) for a fraction
 * of the default level's CPU time, which the scraped host pays. */
static char *gzip_body(const char *body, size_t len, size_t *zlen)
{
	z_stream z;
	size_t cap;
	char *out;

	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	cap = deflateBound(&z, len);
	out = malloc(cap ? cap : 1);
	if (!out) {
		deflateEnd(&z);
		return NULL;
	}
	z.next_in = (Bytef *)body;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)cap;
	if (len > 0xffffffffu || deflate(&z, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&z);
		free(out);
		return NULL;
	}
	*zlen = z.total_out;
	deflateEnd(&z);
	return out;
}

/* Queues a response; `body` is malloc'ed and handed over, and one more
 * header (hname: hval) is added if hname is not NULL. Failures to build one
 * close the connection. */
static enum MHD_Result reply(struct MHD_Connection *conn, int status, const char *ctype, char *body,
			     size_t len, int close_it, const char *hname, const char *hval)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (close_it)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	if (hname)
		MHD_add_response_header(r, hname, hval);
	ret = MHD_queue_response(conn, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, int status, const char *msg, int close_it,
				  const char *hname, const char *hval)
{
	size_t n = strlen(msg);
	char *b = malloc(n + 2);

	if (!b)
		return MHD_NO;
	memcpy(b, msg, n);
	b[n] = '\n';
	b[n + 1] = '\0';
	return reply(conn, status, "text/plain; charset=utf-8", b, n + 1, close_it, hname, hval);
}

/* An exposition, gzip-compressed if the client takes it. */
static enum MHD_Result reply_metrics(struct MHD_Connection *conn, enum pcpu_format fmt, char *body,
				     size_t len)
{
	const char *ae = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *z = NULL;
	size_t zlen = 0;

	if (pcpu_format_gzip_acceptable(ae) && (z = gzip_body(body, len, &zlen)) != NULL) {
		free(body);
		body = z;
		len = zlen;
	}
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, pcpu_format_content_type(fmt));
	/* The format follows Accept, the compression Accept-Encoding: a
	 * cache must key on both. */
	MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept, Accept-Encoding");
	if (z)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* Called by auth.c's worker (another thread) with the verdict on a
 * suspended request. libmicrohttpd's lock in MHD_resume_connection() orders
 * the writes before the serving thread's next call for this request. */
static void auth_decided(void *arg, enum auth_verdict v)
{
	struct request *rq = arg;

	rq->verdict = v;
	rq->state = REQ_DECIDED;
	MHD_resume_connection(rq->conn);
}

/* The verdict on the request's credentials: from auth.c's cache at once,
 * else AUTH_PENDING with the connection suspended until the worker's bcrypt
 * decides (the serving thread goes on with other connections meanwhile). */
static enum auth_verdict check_credentials(struct server *sv, struct request *rq)
{
	const union MHD_ConnectionInfo *ci;
	struct auth_key key;
	enum auth_verdict v;
	char *user, *pass = NULL;

	if (rq->state == REQ_DECIDED)
		return rq->verdict;
	user = MHD_basic_auth_get_username_password(rq->conn, &pass);
	v = user && pass ? auth_lookup(sv->auth, user, pass, &key) : AUTH_DENIED;
	if (v == AUTH_UNKNOWN) {
		/* Suspended first: the worker may decide, and resume the
		 * connection, before auth_submit() returns. */
		ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		MHD_suspend_connection(rq->conn);
		rq->state = REQ_WAITING;
		v = auth_submit(sv->auth, &key, user, pass, ci ? ci->client_addr : NULL, auth_decided, rq);
		if (v != AUTH_PENDING) /* refused at once: answered on the next call */
			auth_decided(rq, v);
		v = AUTH_PENDING;
	}
	if (user)
		MHD_free(user);
	if (pass) {
		explicit_bzero(pass, strlen(pass));
		MHD_free(pass);
	}
	explicit_bzero(&key, sizeof key);
	return v;
}

/* Basic authentication per the web configuration: 1 to go on, 0 when the
 * request was answered (401, 429, 503) or suspended (ret set). */
static int authorized(struct server *sv, struct request *rq, enum MHD_Result *ret)
{
	struct MHD_Response *r;

	if (!sv->auth)
		return 1;
	switch (check_credentials(sv, rq)) {
	case AUTH_GRANTED:
		return 1;
	case AUTH_PENDING:
		*ret = MHD_YES;
		return 0;
	case AUTH_BUSY_CLIENT:
		*ret = reply_text(rq->conn, MHD_HTTP_TOO_MANY_REQUESTS,
				  "too many password checks from this address at once: retry later", 0,
				  MHD_HTTP_HEADER_RETRY_AFTER, "1");
		return 0;
	case AUTH_BUSY:
	case AUTH_UNKNOWN:
		*ret = reply_text(rq->conn, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "too many password checks at once: retry later", 0, MHD_HTTP_HEADER_RETRY_AFTER,
				  "1");
		return 0;
	default:
		break;
	}
	r = MHD_create_response_from_buffer(13, (void *)"Unauthorized\n", MHD_RESPMEM_PERSISTENT);
	if (!r) {
		*ret = MHD_NO;
		return 0;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	*ret = MHD_queue_basic_auth_fail_response(rq->conn, "pcpustat", r);
	MHD_destroy_response(r);
	return 0;
}

/* Client certificates the TLS handshake requested: checked here, as
 * libmicrohttpd leaves verification to the application. 1 to go on. */
static int client_cert_ok(struct server *sv, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;
	unsigned status = 0;
	int have;

	if (!sv->tls || sv->wc.client_auth == WEB_CLIENT_NONE)
		return 1;
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return 0;
	have = gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &(unsigned){ 0 }) != NULL;
	if (!have)
		return sv->wc.client_auth == WEB_CLIENT_REQUEST || sv->wc.client_auth == WEB_CLIENT_VERIFY_IF_GIVEN;
	if (sv->wc.client_auth == WEB_CLIENT_REQUEST || sv->wc.client_auth == WEB_CLIENT_REQUIRE_ANY)
		return 1;
	return gnutls_certificate_verify_peers2((gnutls_session_t)ci->tls_session, &status) == 0 && status == 0;
}

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	(void)value;
	if (key && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
		++*(unsigned *)cls;
	return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
			      const char *version, const char *upload_data, size_t *upload_data_size,
			      void **con_cls)
{
	struct server *sv = cls;
	struct request *rq = *con_cls;
	const char *cl, *te;
	struct scrape_result res;
	enum pcpu_format fmt;
	enum MHD_Result ret;

	(void)version;
	(void)upload_data;
	/* A request with a body is refused on the first call, when the
	 * headers are in: libmicrohttpd then discards the body and closes
	 * the connection, so its bytes cannot pass for a second request
	 * behind a keep-alive proxy. Others are answered on the second call
	 * (a response queued before then closes the connection too). */
	if (!rq) {
		unsigned hosts = 0;

		rq = calloc(1, sizeof *rq); /* freed by on_completed() */
		if (!rq)
			return MHD_NO;
		rq->conn = conn;
		rq->state = REQ_STARTED;
		*con_cls = rq;
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
		if (te || (cl && strcmp(cl, "0") != 0))
			return reply_text(conn, MHD_HTTP_BAD_REQUEST, "request bodies are not accepted", 1, NULL,
					  NULL);
		/* RFC 9112 3.2: 400 for more than one Host (libmicrohttpd
		 * 0.9.75 checks only that HTTP/1.1 has one): proxies that
		 * read another Host than this server are a smuggling tool. */
		MHD_get_connection_values(conn, MHD_HEADER_KIND, count_host, &hosts);
		if (hosts > 1)
			return reply_text(conn, MHD_HTTP_BAD_REQUEST, "more than one Host header", 1, NULL, NULL);
		return MHD_YES;
	}
	if (*upload_data_size)
		return MHD_NO; /* not reached: a body was refused above */
	if (!client_cert_ok(sv, conn))
		return reply_text(conn, MHD_HTTP_FORBIDDEN, "client certificate refused", 1, NULL, NULL);
	if (!authorized(sv, rq, &ret))
		return ret;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or HEAD only", 0, MHD_HTTP_HEADER_ALLOW,
				  "GET, HEAD");
	fmt = pcpu_format_negotiate(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
	if (strcmp(url, "/") == 0) {
		char *b = strdup(index_text);

		return b ? reply(conn, MHD_HTTP_OK, "text/plain; charset=utf-8", b, strlen(b), 0, NULL, NULL)
			 : MHD_NO;
	}
	if (strcmp(url, "/metrics") == 0)
		scrape_all(&sv->cf, &sv->st, fmt, &res);
	else if (strncmp(url, "/metrics/", 9) == 0)
		scrape_one(&sv->cf, url + 9, fmt, &res);
	else
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics", 0, NULL, NULL);
	if (res.status != 200) {
		if (res.status >= 500)
			fprintf(stderr, "pcpustat serve: %s: %s\n", url, res.msg);
		return reply_text(conn, res.status, res.msg, 0, NULL, NULL);
	}
	return reply_metrics(conn, fmt, res.body, res.len);
}

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

/* The end of a request, answered or not: its context goes. A suspended
 * request never ends before auth.c's worker (or auth_stop()) resumed it. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	free(*con_cls);
	*con_cls = NULL;
}

/* Shedding idle clients: libmicrohttpd closes connections past the limit
 * at once, so clients that only hold connections open could keep scrapes
 * out until --timeout. Past three quarters of the limit, every connection
 * gets a 1 s inactivity timeout instead (a scrape in progress is active:
 * unaffected); below half the limit, new ones get --timeout again. Runs
 * in libmicrohttpd's one thread, after the connection joined its lists
 * (where MHD_set_connection_option() may change its timeout). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
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
static void log_mhd(void *cls, const char *fmt, va_list ap)
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

/* The listening socket (passed to libmicrohttpd), and its address in shown. */
static int listen_on(const char *spec, char *shown, size_t cap, int protected)
{
	char host[256], port[16];
	struct addrinfo hints, *ai = NULL, *a;
	const char *colon;
	int fd = -1, one = 1, rc;

	if (spec[0] == '[') {
		const char *close_br = strchr(spec, ']');
		if (!close_br || close_br[1] != ':')
			return -1;
		snprintf(host, sizeof host, "%.*s", (int)(close_br - spec - 1), spec + 1);
		snprintf(port, sizeof port, "%s", close_br + 2);
	} else if ((colon = strrchr(spec, ':')) != NULL) {
		snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
		snprintf(port, sizeof port, "%s", colon + 1);
	} else {
		snprintf(host, sizeof host, "127.0.0.1");
		snprintf(port, sizeof port, "%s", spec);
	}
	if (!host[0] || strspn(port, "0123456789") != strlen(port) || !port[0]) {
		fprintf(stderr, "pcpustat serve: bad --listen '%s' (HOST:PORT, [IPv6]:PORT or PORT)\n", spec);
		return -1;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		fprintf(stderr, "pcpustat serve: %s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0)
			break;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fprintf(stderr, "pcpustat serve: cannot listen on %s:%s: %s\n", host, port, strerror(errno));
		freeaddrinfo(ai);
		return -1;
	}
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		char addr[INET6_ADDRSTRLEN];
		int loopback = 0;

		getsockname(fd, (struct sockaddr *)&ss, &sl);
		if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof addr);
			snprintf(shown, cap, "[%s]:%u", addr, ntohs(s6->sin6_port));
			loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof addr);
			snprintf(shown, cap, "%s:%u", addr, ntohs(s4->sin_port));
			loopback = (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
		}
		if (!loopback && !protected)
			fprintf(stderr, "pcpustat serve: warning: %s is not a loopback address: whoever "
				"can reach it reads these statistics (see --web.config.file)\n", shown);
	}
	freeaddrinfo(ai);
	return fd;
}

/* Sizes like 256M: 0 or -1. */
static int parse_bytes(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -1;
	switch (*end) {
	case 'G': case 'g':
		v <<= 10;
		/* fall through */
	case 'M': case 'm':
		v <<= 10;
		/* fall through */
	case 'K': case 'k':
		v <<= 10;
		end++;
		break;
	}
	if (*end || v < 4096 || v > (unsigned long long)SIZE_MAX / 2)
		return -1;
	*out = (size_t)v;
	return 0;
}

/* Descriptors for maxc connections: raises the soft limit toward the hard
 * one; returns the connection limit that leaves FD_RESERVE free. */
static size_t fit_descriptors(size_t maxc)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)maxc + FD_RESERVE + 3;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return maxc;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < want) {
		size_t fit = rl.rlim_cur > FD_RESERVE + 4 ? (size_t)rl.rlim_cur - FD_RESERVE - 3 : 1;

		fprintf(stderr, "pcpustat serve: %zu descriptors allowed (ulimit -n): serving %zu connections "
			"at once, not %zu\n", (size_t)rl.rlim_cur, fit, maxc);
		return fit;
	}
	return maxc;
}

int serve_main(int argc, char **argv, const struct pcpu_reader_options *ropt)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "dir", required_argument, NULL, 'd' },
		{ "owner", required_argument, NULL, 'u' },
		{ "any-owner", no_argument, NULL, 'a' },
		{ "max-clients", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 't' },
		{ "max-bytes", required_argument, NULL, 'B' },
		{ "max-down", required_argument, NULL, 'D' },
		{ "web.config.file", required_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct server sv;
	struct MHD_Daemon *d;
	struct MHD_OptionItem opts[16];
	sigset_t sigs;
	const char *listen_spec = "127.0.0.1:9464", *web_config = NULL;
	char shown[128], err[512];
	size_t maxc = 1024, nopt = 0, i;
	double timeout = 10;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	int c, lfd, sig;

	memset(&sv, 0, sizeof sv);
	sv.cf.ropt = *ropt;
	sv.cf.max_bytes = (size_t)256 << 20;
	sv.cf.max_down = 16;
	optind = 1;
	argv[0] = (char *)"pcpustat serve"; /* getopt's messages, as ours */
	while ((c = getopt_long(argc, argv, "l:d:u:ah", longopts, NULL)) != -1) {
		unsigned uid;
		char *end;

		switch (c) {
		case 'l':
			listen_spec = optarg;
			break;
		case 'd':
			sv.cf.ropt.dir = optarg;
			break;
		case 'u':
			if (parse_user(optarg, &uid) < 0) {
				fprintf(stderr, "pcpustat serve: no such user '%s'\n", optarg);
				return 2;
			}
			sv.cf.ropt.flags = (sv.cf.ropt.flags & ~(unsigned)PCPU_READER_ANY_OWNER) | PCPU_READER_OWNER;
			sv.cf.ropt.owner = (uid_t)uid;
			break;
		case 'a':
			sv.cf.ropt.flags |= PCPU_READER_ANY_OWNER;
			break;
		case 'm':
			maxc = strtoul(optarg, &end, 10);
			if (*end || maxc < 1 || maxc > 65536) {
				fputs("pcpustat serve: --max-clients wants 1..65536\n", stderr);
				return 2;
			}
			break;
		case 't':
			timeout = strtod(optarg, &end);
			if (*end || !(timeout >= 1 && timeout <= 3600)) {
				fputs("pcpustat serve: --timeout wants seconds in [1, 3600]\n", stderr);
				return 2;
			}
			break;
		case 'B':
			if (parse_bytes(optarg, &sv.cf.max_bytes) < 0) {
				fputs("pcpustat serve: --max-bytes wants a size of at least 4K (e.g. 64M)\n", stderr);
				return 2;
			}
			break;
		case 'D':
			errno = 0;
			sv.cf.max_down = strtoul(optarg, &end, 10);
			if (*end || !*optarg || optarg[0] == '-' || errno || sv.cf.max_down > 1000000) {
				fputs("pcpustat serve: --max-down wants 0..1000000\n", stderr);
				return 2;
			}
			break;
		case 'W':
			web_config = optarg;
			break;
		case 'h':
			fputs(serve_usage, stdout);
			return 0;
		default:
			fputs("Try 'pcpustat serve --help'.\n", stderr);
			return 2;
		}
	}
	for (i = (size_t)optind; i < (size_t)argc; i++)
		if (!valid_target(argv[i])) {
			fprintf(stderr, "pcpustat serve: '%s' is not a segment name, pid or file name\n", argv[i]);
			return 2;
		}
	scrape_memory_setup();
	sv.cf.targets = argv + optind;
	sv.cf.ntargets = (size_t)(argc - optind);
	if (web_config) {
		if (web_config_load(web_config, &sv.wc, err, sizeof err) < 0) {
			fprintf(stderr, "pcpustat serve: %s: %s\n", web_config, err);
			return 2;
		}
		sv.tls = sv.wc.cert_pem != NULL;
		if (sv.wc.nusers && !(sv.auth = auth_start(&sv.wc))) {
			fprintf(stderr, "pcpustat serve: cannot start the password checker: %s\n", strerror(errno));
			web_config_free(&sv.wc);
			return 1;
		}
	}

	lfd = listen_on(listen_spec, shown, sizeof shown, sv.tls || sv.wc.nusers);
	if (lfd < 0) {
		auth_stop(sv.auth);
		auth_free(sv.auth);
		web_config_free(&sv.wc);
		return 1;
	}
	maxc = fit_descriptors(maxc);
	sv.limit = maxc;
	if (sv.tls) {
		/* A byte per descriptor a connection can have: the lowest
		 * free one is always taken, and at most maxc connections and
		 * FD_RESERVE others are open (the margin: stdio, the listening
		 * socket, libmicrohttpd's own). One past it (or without the
		 * memory) is served as before: closed unanswered. */
		nsniff = maxc + FD_RESERVE + 64;
		sniff = calloc(nsniff, 1);
		if (!sniff)
			nsniff = 0;
	}

	/* SIGINT and SIGTERM are taken by sigwait() below: blocked before
	 * libmicrohttpd's thread starts, so they reach only this one. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* The logger first, so that the other options' messages use it. */
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)log_mhd, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, lfd, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)maxc, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)(timeout + 0.999), NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONNECTION_MEMORY, NULL };
	/* Strict: HTTP/1.1 without Host is refused (400). */
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, &sv };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL };
	if (sv.auth)
		flags |= MHD_ALLOW_SUSPEND_RESUME; /* requests wait for bcrypt suspended */
	if (sv.tls) {
		flags |= MHD_USE_TLS;
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, sv.wc.cert_pem };
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, sv.wc.key_pem };
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0, sv.wc.priorities };
		if (sv.wc.ca_pem)
			opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0, sv.wc.ca_pem };
	}
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	d = MHD_start_daemon(flags, 0, NULL, NULL, handle, &sv, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "pcpustat serve: cannot start the HTTP server on %s\n", shown);
		close(lfd);
		auth_stop(sv.auth);
		auth_free(sv.auth);
		web_config_free(&sv.wc);
		return 1;
	}
	printf("pcpustat serve: listening on %s://%s/metrics\n", sv.tls ? "https" : "http", shown);
	fflush(stdout);

	do
		sig = 0;
	while (sigwait(&sigs, &sig) != 0 || (sig != SIGINT && sig != SIGTERM));
	/* Every suspended request resumed first: libmicrohttpd must not be
	 * stopped with one (auth_stop() answers them, 503). */
	auth_stop(sv.auth);
	MHD_stop_daemon(d); /* closes every connection: on_connection() frees each */
	auth_free(sv.auth);
	free(sv.conns);
	free(sniff);
	close(lfd);
	scrape_state_free(&sv.st);
	web_config_free(&sv.wc);
	return 0;
}
