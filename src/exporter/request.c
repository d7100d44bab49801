/* SPDX-License-Identifier: MIT */
/*
 * One HTTP request, from its headers to its response. Checked in this
 * order, each answered as it fails: no request body (400, or 405 for a
 * method other than GET or HEAD; on the first call, the connection
 * closed), one Host (400), the client certificate (403), the web
 * configuration's basic authentication (401, or 429/503 while bcrypt is
 * busy), a source for the path (404), GET or HEAD (405), the source's own
 * password check (401, 500). Then the source answers, in the format the
 * Accept header prefers among the source's (pcpu_format_negotiate_among(),
 * libpcpu-stats' one implementation), gzip-compressed when Accept-Encoding
 * allows it (pcpu_format_gzip_acceptable()).
 *
 * Malformed requests are libmicrohttpd's (0.9.75): it answers 400 or 505 to
 * most and closes the connection; a request line it cannot split into
 * method, target and version ("GARBAGE") is closed unanswered, as it is
 * parsed before any callback of ours runs and no option makes the library
 * answer it (1.0 rewrote that parser, with MHD_OPTION_CLIENT_DISCIPLINE_LVL;
 * Debian 12 has 0.9.75). A bare LF ends a line (RFC 9112 2.2 allows it).
 * pcpustat(1) and tests/segment/exporter_test.py's MALFORMED table pin
 * which is which.
 */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exporter_internal.h"

/* One request (libmicrohttpd's per-request context), from its first call
 * to its completion (pcpu__exp_on_completed()). */
struct request {
	struct MHD_Connection *conn;
	enum {
		REQ_STARTED, /* headers checked: answered on the next call */
		REQ_WAITING, /* suspended until auth.c's worker decides */
		REQ_DECIDED, /* resumed with `verdict` */
		REQ_PENALIZED, /* refused (`verdict`), suspended until penalty.c answers */
		REQ_REFUSED,  /* resumed: answered `verdict` now */
		REQ_SOURCE_PENALIZED, /* the source's check refused: suspended likewise */
		REQ_SOURCE_REFUSED,   /* resumed: answered 401 now */
	} state;
	enum auth_verdict verdict;
	char *user; /* who the web configuration let in (NULL: nobody asked) */
};

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

/* 401 with a challenge for `realm`. */
static enum MHD_Result reply_unauthorized(struct MHD_Connection *conn, const char *realm)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(13, (void *)"Unauthorized\n", MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	ret = MHD_queue_basic_auth_fail_response(conn, realm, r);
	MHD_destroy_response(r);
	return ret;
}

/* An exposition, gzip-compressed if the client takes it. */
static enum MHD_Result reply_exposition(struct MHD_Connection *conn, enum pcpu_format fmt, char *body,
					size_t len)
{
	const char *ae = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *z = NULL;
	size_t zlen = 0;

	if (pcpu_format_gzip_acceptable(ae) && (z = pcpu_exporter_gzip(body, len, 1, &zlen)) != NULL) {
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

/* ---- the web configuration's users ---------------------------------------------------- */

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
static enum auth_verdict check_credentials(struct pcpu_exporter *e, struct request *rq)
{
	const union MHD_ConnectionInfo *ci;
	struct auth_key key;
	enum auth_verdict v;
	const char *user = NULL, *pass = NULL;
	char *buf = NULL;
	int rc;

	if (rq->state == REQ_DECIDED)
		return rq->verdict;
	rc = pcpu__exp_parse_basic(MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
							       MHD_HTTP_HEADER_AUTHORIZATION),
				   &buf, &user, &pass);
	if (rc < 0)
		return AUTH_BUSY; /* out of memory: retry later */
	v = rc ? pcpu__exp_auth_lookup(e->auth, user, pass, &key) : AUTH_DENIED;
	if (rc && !rq->user)
		rq->user = strdup(user); /* NULL without memory: the source sees no user */
	if (v == AUTH_UNKNOWN) {
		/* Suspended first: the worker may decide, and resume the
		 * connection, before pcpu__exp_auth_submit() returns. */
		ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		MHD_suspend_connection(rq->conn);
		rq->state = REQ_WAITING;
		v = pcpu__exp_auth_submit(e->auth, &key, user, pass, ci ? ci->client_addr : NULL, auth_decided, rq);
		if (v != AUTH_PENDING) /* refused at once: answered on the next call */
			auth_decided(rq, v);
		v = AUTH_PENDING;
	}
	if (buf) {
		explicit_bzero(buf, strlen(user) + strlen(pass) + 2);
		free(buf);
	}
	explicit_bzero(&key, sizeof key);
	return v;
}

/* Called by penalty.c's thread once a refusal waited. */
static void penalty_over(void *arg)
{
	struct request *rq = arg;

	rq->state = rq->state == REQ_SOURCE_PENALIZED ? REQ_SOURCE_REFUSED : REQ_REFUSED;
	MHD_resume_connection(rq->conn);
}

/* A refusal waits first (penalty.c says why): 1 if the request is
 * suspended until then (`waiting`, then the state penalty_over() sets), 0
 * if it is answered now (the refused state set at once). */
static int penalize(struct pcpu_exporter *e, struct request *rq, int waiting)
{
	rq->state = waiting;
	/* Suspended first: the delay may end before pcpu__exp_penalty_add()
	 * returns. */
	MHD_suspend_connection(rq->conn);
	if (pcpu__exp_penalty_add(e->penalty, penalty_over, rq) == 0)
		return 1;
	MHD_resume_connection(rq->conn); /* no room: answered at once */
	rq->state = waiting == REQ_PENALIZED ? REQ_REFUSED : REQ_SOURCE_REFUSED;
	return 0;
}

/* Basic authentication per the web configuration: 1 to go on, 0 when the
 * request was answered (401, 429, 503) or suspended (ret set). */
static int authorized(struct pcpu_exporter *e, struct request *rq, enum MHD_Result *ret)
{
	enum auth_verdict v;

	if (!e->auth)
		return 1;
	v = rq->state == REQ_REFUSED ? rq->verdict : check_credentials(e, rq);
	if (v != AUTH_GRANTED && v != AUTH_PENDING && rq->state != REQ_REFUSED) {
		rq->verdict = v;
		if (penalize(e, rq, REQ_PENALIZED)) {
			*ret = MHD_YES;
			return 0;
		}
	}
	switch (v) {
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
	*ret = reply_unauthorized(rq->conn, e->realm);
	return 0;
}

/* Client certificates the TLS handshake requested: checked here, as
 * libmicrohttpd leaves verification to the application. 1 to go on. */
static int client_cert_ok(struct pcpu_exporter *e, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;
	unsigned status = 0;
	int have;

	if (!e->tls || e->wc.client_auth == WEB_CLIENT_NONE)
		return 1;
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return 0;
	have = gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &(unsigned){ 0 }) != NULL;
	if (!have)
		return e->wc.client_auth == WEB_CLIENT_REQUEST || e->wc.client_auth == WEB_CLIENT_VERIFY_IF_GIVEN;
	if (e->wc.client_auth == WEB_CLIENT_REQUEST || e->wc.client_auth == WEB_CLIENT_REQUIRE_ANY)
		return 1;
	return gnutls_certificate_verify_peers2((gnutls_session_t)ci->tls_session, &status) == 0 && status == 0;
}

/* ---- the request ------------------------------------------------------------------------ */

/* Counts the Host headers (MHD_get_connection_values()'s iterator). */
static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	(void)value;
	if (key && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
		++*(unsigned *)cls;
	return MHD_YES;
}

/*
 * The first call, when the headers are in. A request with a body is
 * refused now: libmicrohttpd then discards the body and closes the
 * connection, so its bytes cannot pass for a second request behind a
 * keep-alive proxy, and a client announcing a huge body holds nothing.
 * Others are answered on the second call (a response queued before then
 * closes the connection too). The request's context is made here (freed
 * by pcpu__exp_on_completed()).
 */
static enum MHD_Result request_start(struct MHD_Connection *conn, const char *method, void **con_cls)
{
	struct request *rq;
	const char *cl, *te;
	unsigned hosts = 0;

	rq = calloc(1, sizeof *rq);
	if (!rq)
		return MHD_NO;
	rq->conn = conn;
	rq->state = REQ_STARTED;
	*con_cls = rq;
	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
	if (te || (cl && strcmp(cl, "0") != 0)) {
		/* A POST with a form is told its method is wrong (405, what a
		 * prometheus-cpp Exposer answered), a GET with a body that
		 * bodies are (400); both close the connection. */
		if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
			return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or HEAD only", 1,
					  MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
		return reply_text(conn, MHD_HTTP_BAD_REQUEST, "request bodies are not accepted", 1, NULL, NULL);
	}
	/* RFC 9112 3.2: 400 for more than one Host (libmicrohttpd 0.9.75
	 * checks only that HTTP/1.1 has one): proxies that read another Host
	 * than this server are a smuggling tool. */
	MHD_get_connection_values(conn, MHD_HEADER_KIND, count_host, &hosts);
	if (hosts > 1)
		return reply_text(conn, MHD_HTTP_BAD_REQUEST, "more than one Host header", 1, NULL, NULL);
	return MHD_YES;
}

/* The source's own password check: 1 to go on, 0 when answered (ret). */
static int source_authorized(struct pcpu_exporter *e, struct request *rq, const struct pcpu__exp_source *src,
			     const char **user, enum MHD_Result *ret)
{
	pcpu_exporter_auth_fn *fn;
	void *arg;
	char realm[PCPU_EXP_REALM_MAX + 1], *buf = NULL;
	const char *u = NULL, *p = NULL;
	int rc, ok;

	pcpu__exp_source_auth(e, src, &fn, &arg, realm);
	if (!fn)
		return 1;
	if (rq->state == REQ_SOURCE_REFUSED) { /* refused, then waited */
		*ret = reply_unauthorized(rq->conn, realm);
		return 0;
	}
	rc = pcpu__exp_parse_basic(MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
							       MHD_HTTP_HEADER_AUTHORIZATION),
				   &buf, &u, &p);
	if (rc < 0) {
		*ret = reply_text(rq->conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory", 0, NULL, NULL);
		return 0;
	}
	ok = rc ? fn(arg, u, p) : 0;
	if (ok == 1 && !rq->user)
		rq->user = strdup(u);
	if (buf) {
		explicit_bzero(buf, strlen(u) + strlen(p) + 2);
		free(buf);
	}
	if (ok == 1) {
		*user = rq->user;
		return 1;
	}
	if (ok < 0) {
		*ret = reply_text(rq->conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "the password check failed", 0, NULL,
				  NULL);
		return 0;
	}
	/* Refused: answered 401 after the delay (penalty.c), on the call
	 * that comes when the request is resumed. */
	if (penalize(e, rq, REQ_SOURCE_PENALIZED)) {
		*ret = MHD_YES;
		return 0;
	}
	*ret = reply_unauthorized(rq->conn, realm);
	return 0;
}

/* A request for a source's path: its method, its password, then the
 * source's answer in the format Accept asks for. */
static enum MHD_Result serve(struct pcpu_exporter *e, struct request *rq, const struct pcpu__exp_source *src,
			     const char *url, const char *rest, const char *method)
{
	struct pcpu_exporter_scrape s;
	enum MHD_Result ret;

	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_text(rq->conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or HEAD only", 0, MHD_HTTP_HEADER_ALLOW,
				  "GET, HEAD");
	memset(&s, 0, sizeof s);
	s.user = rq->user;
	if (!source_authorized(e, rq, src, &s.user, &ret))
		return ret;
	s.path = url;
	s.rest = rest;
	s.format = pcpu_format_negotiate_among(
		MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT), src->formats);
	s.status = MHD_HTTP_OK;
	src->fn(src->arg, &s);
	if (s.status != MHD_HTTP_OK || (!s.body && s.len)) {
		free(s.body);
		if (s.status == MHD_HTTP_OK) { /* a length without a body */
			s.status = MHD_HTTP_INTERNAL_SERVER_ERROR;
			snprintf(s.message, sizeof s.message, "the source answered no body");
		}
		s.message[sizeof s.message - 1] = '\0';
		return reply_text(rq->conn, s.status < 100 || s.status > 599 ? 500 : s.status,
				  s.message[0] ? s.message : "error", 0, NULL, NULL);
	}
	if (s.content_type)
		return reply(rq->conn, MHD_HTTP_OK, s.content_type, s.body, s.len, 0, NULL, NULL);
	return reply_exposition(rq->conn, s.format, s.body, s.len);
}

/* Each request is checked in the order of the file's comment, then served;
 * a suspended one (basic authentication pending) comes back here when
 * auth.c's worker decided. */
enum MHD_Result pcpu__exp_on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				     const char *version, const char *upload_data, size_t *upload_data_size,
				     void **con_cls)
{
	struct pcpu_exporter *e = cls;
	struct request *rq = *con_cls;
	struct pcpu__exp_source *src;
	const char *rest = "";
	enum MHD_Result ret;

	(void)version;
	(void)upload_data;
	if (!rq)
		return request_start(conn, method, con_cls);
	if (*upload_data_size)
		return MHD_NO; /* not reached: request_start() refused bodies */
	if (!client_cert_ok(e, conn))
		return reply_text(conn, MHD_HTTP_FORBIDDEN, "client certificate refused", 1, NULL, NULL);
	if (!authorized(e, rq, &ret))
		return ret;
	src = pcpu__exp_source_find(e, url, &rest);
	if (!src)
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found", 0, NULL, NULL);
	ret = serve(e, rq, src, url, rest, method);
	pcpu__exp_source_release(e, src);
	return ret;
}

/* The end of a request, answered or not: its context goes. A suspended
 * request never ends before auth.c's worker (or pcpu__exp_auth_stop())
 * resumed it. */
void pcpu__exp_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			    enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (rq)
		free(rq->user);
	free(rq);
	*con_cls = NULL;
}
