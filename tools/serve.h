/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat serve`'s own declarations, shared by the files of the exporter's
 * HTTP side (what it answers lives in scrape.c, declared in pcpustat.h):
 *
 *   serve.c          the command: options, the listening socket, descriptors,
 *                    the HTTP server's start and stop
 *   serve_request.c  one request: its checks (body, Host, client certificate,
 *                    basic authentication), routing, and the responses (gzip)
 *   serve_conn.c     connections before any request is read: shedding idle
 *                    clients near the limit, plain HTTP sent to the TLS port,
 *                    and libmicrohttpd's log
 *
 * Every function here runs in libmicrohttpd's one serving thread (serve.c's
 * comment), but for serve_main()'s set-up and teardown around it.
 */
#ifndef PCPUSTAT_SERVE_H
#define PCPUSTAT_SERVE_H

#include <stdarg.h>
#include <stddef.h>

#include <microhttpd.h>

#include "auth.h"
#include "pcpustat.h"
#include "webconfig.h"

/* A connection tracked for shedding (serve_conn.c). */
struct tracked;

/* The exporter's state, handed to every libmicrohttpd callback. */
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

/* ---- serve_request.c ---- */

/* libmicrohttpd's request handler (MHD_AccessHandlerCallback); cls is the
 * struct server. */
enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
			   const char *version, const char *upload_data, size_t *upload_data_size,
			   void **con_cls);
/* MHD_OPTION_NOTIFY_COMPLETED: frees what on_request() kept for a request. */
void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		  enum MHD_RequestTerminationCode toe);

/* ---- serve_conn.c ---- */

/* MHD_OPTION_NOTIFY_CONNECTION (cls: the struct server): tracks connections
 * to shed idle ones near the limit, and watches a TLS connection's first
 * byte for plain HTTP. */
void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
		   enum MHD_ConnectionNotificationCode code);
/* MHD_OPTION_EXTERNAL_LOGGER: libmicrohttpd's messages on stderr, repeats
 * counted. */
void log_mhd(void *cls, const char *fmt, va_list ap);
/* With TLS, before the server starts: room to watch descriptors below
 * `ndesc` for plain HTTP (without the memory, such requests are closed
 * unanswered, as without it). sniff_free() after the server stopped. */
void sniff_init(size_t ndesc);
void sniff_free(void);

#endif /* PCPUSTAT_SERVE_H */
