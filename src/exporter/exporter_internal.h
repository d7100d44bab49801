/* SPDX-License-Identifier: MIT */
/*
 * libpcpu-exporter's parts (pcpu/exporter.h), one subject a file:
 *
 *   exporter.c    the object: settings, listening sockets, descriptors,
 *                 start and stop of libmicrohttpd's daemons
 *   sources.c     the sources by path: adding, finding (with a hold that
 *                 removal waits for), removing; the registry source
 *   request.c     one request: its checks (body, Host, client certificate,
 *                 basic authentication), routing, the responses (gzip)
 *   conn.c        connections before any request: shedding idle clients
 *                 near the limit, plain HTTP sent to the TLS port, and
 *                 libmicrohttpd's log
 *   auth.c        bcrypt off the serving threads (auth.h)
 *   penalty.c     refusals of basic authentication answered late
 *   basic_auth.c  the Authorization header (RFC 7617)
 *   webconfig.c   the exporter toolkit's web configuration (webconfig.h)
 *   gzip.c        pcpu_exporter_gzip()
 *   error.c       pcpu_exporter_error(): the per-thread message
 *
 * Nothing here is exported; only pcpu/exporter.h's functions are.
 */
#ifndef PCPU_EXPORTER_INTERNAL_H
#define PCPU_EXPORTER_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include <microhttpd.h>

#include <pcpu/exporter.h>

#include "auth.h"
#include "webconfig.h"

#define PCPU_EXP_HIDDEN __attribute__((visibility("hidden")))

/* Paths and realms, bytes. */
#define PCPU_EXP_PATH_MAX 255
#define PCPU_EXP_REALM_MAX 127

/* A path served (sources.c). */
struct pcpu__exp_source {
	char path[PCPU_EXP_PATH_MAX + 1];
	size_t pathlen;
	unsigned flags, formats;
	pcpu_exporter_source_fn *fn;
	void *arg;
	/* The source's own password check (NULL: none), and its realm. */
	pcpu_exporter_auth_fn *auth;
	void *auth_arg;
	char realm[PCPU_EXP_REALM_MAX + 1];
	/* Requests holding it (pcpu__exp_source_find()): removal waits for 0. */
	unsigned holds;
};

/* A listening socket and its daemon (exporter.c). */
struct pcpu__exp_listener {
	int fd; /* -1 once libmicrohttpd owns it (started) */
	int port;
	int loopback;
	char shown[128]; /* "HOST:PORT" */
	struct MHD_Daemon *d;
};

/* The connections of one serving thread (libmicrohttpd's worker daemon),
 * for shedding (conn.c): touched by that thread alone. */
struct pcpu__exp_worker {
	const struct MHD_Daemon *d;
	struct pcpu__exp_tracked **conns;
	size_t n, cap;
	int shedding;
};

struct pcpu_exporter {
	/* Sources and the workers' table; never held while a source, a
	 * password check or libmicrohttpd runs. */
	pthread_mutex_t lock;
	pthread_cond_t released; /* a source's holds went down */
	struct pcpu__exp_source **sources;
	size_t nsources, capsources;
	struct pcpu__exp_worker **workers;
	size_t nworkers, capworkers;

	/* Settings: fixed once started. */
	struct pcpu__exp_listener *ls;
	size_t nls;
	size_t maxc;       /* per socket, after fitting the descriptors */
	size_t worker_limit; /* per serving thread: maxc / threads */
	unsigned timeout;  /* seconds */
	unsigned threads;  /* per socket */
	int started;
	struct web_config wc; /* zeroed without a web configuration */
	int tls;
	struct auth *auth; /* basic_auth_users: verdicts and the bcrypt worker */
	struct pcpu__exp_penalty *penalty; /* once started */
	char realm[PCPU_EXP_REALM_MAX + 1];

	/* The log, and what repeats (conn.c), under log_lock. */
	pcpu_exporter_log_fn *log;
	void *log_arg;
	pthread_mutex_t log_lock;
	const char *last_fmt;
	time_t last_t;
	unsigned long repeats;
};

/* ---- error.c ---- */

/* Records the message (printf-style) for pcpu_exporter_error() and sets
 * errno to err: returns -1. */
PCPU_EXP_HIDDEN int pcpu__exp_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears the message. */
PCPU_EXP_HIDDEN void pcpu__exp_clear(void);

/* ---- conn.c: the log ---- */

/* Says msg (printf-style) through the log callback, if any; a message
 * repeated within 10 s is counted instead (conn.c's log_mhd() too). */
PCPU_EXP_HIDDEN void pcpu__exp_log(struct pcpu_exporter *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
PCPU_EXP_HIDDEN void pcpu__exp_vlog(struct pcpu_exporter *e, const char *fmt, va_list ap);

/* ---- sources.c ---- */

/* The source serving `path` (exact first, then the longest prefix), held
 * (pcpu__exp_source_release()), with *rest set to what follows its path;
 * NULL if none. */
PCPU_EXP_HIDDEN struct pcpu__exp_source *pcpu__exp_source_find(struct pcpu_exporter *e, const char *path,
							       const char **rest);
PCPU_EXP_HIDDEN void pcpu__exp_source_release(struct pcpu_exporter *e, struct pcpu__exp_source *s);
/* Copies a held source's password check (fn NULL: none), under the lock:
 * pcpu_exporter_set_source_auth() may change it meanwhile. */
PCPU_EXP_HIDDEN void pcpu__exp_source_auth(struct pcpu_exporter *e, const struct pcpu__exp_source *s,
					   pcpu_exporter_auth_fn **fn, void **arg, char *realm);
PCPU_EXP_HIDDEN void pcpu__exp_sources_free(struct pcpu_exporter *e);
/* A realm as an HTTP quoted string can carry it: 0, or -1 (EINVAL). */
PCPU_EXP_HIDDEN int pcpu__exp_check_realm(const char *realm);

/* ---- request.c ---- */

/* libmicrohttpd's request handler (MHD_AccessHandlerCallback); cls is the
 * exporter. */
PCPU_EXP_HIDDEN enum MHD_Result pcpu__exp_on_request(void *cls, struct MHD_Connection *conn, const char *url,
						     const char *method, const char *version,
						     const char *upload_data, size_t *upload_data_size,
						     void **con_cls);
/* MHD_OPTION_NOTIFY_COMPLETED: frees what on_request() kept for a request. */
PCPU_EXP_HIDDEN void pcpu__exp_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
					    enum MHD_RequestTerminationCode toe);

/* ---- conn.c: connections ---- */

/* MHD_OPTION_NOTIFY_CONNECTION (cls: the exporter): tracks connections to
 * shed idle ones near the limit, and watches a TLS connection's first byte
 * for plain HTTP. */
PCPU_EXP_HIDDEN void pcpu__exp_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
					     enum MHD_ConnectionNotificationCode code);
/* MHD_OPTION_EXTERNAL_LOGGER (cls: the exporter). */
PCPU_EXP_HIDDEN void pcpu__exp_log_mhd(void *cls, const char *fmt, va_list ap);
/* Before a TLS daemon starts: room to watch descriptors below `ndesc`
 * for plain HTTP (shared by every exporter of the process, as descriptors
 * are). 0, or -1 (then such requests are closed unanswered, as without
 * it). pcpu__exp_sniff_put() once per successful get, after the daemons
 * stopped. */
PCPU_EXP_HIDDEN int pcpu__exp_sniff_get(size_t ndesc);
PCPU_EXP_HIDDEN void pcpu__exp_sniff_put(void);
PCPU_EXP_HIDDEN void pcpu__exp_workers_free(struct pcpu_exporter *e);

/* ---- penalty.c ---- */

/* The thread answering refusals late: NULL with errno on failure. */
PCPU_EXP_HIDDEN struct pcpu__exp_penalty *pcpu__exp_penalty_start(void);
/* fn(arg) from that thread once the delay is over (under its lock: fn only
 * resumes a connection): 0, or -1 when the queue is full or stopping (then
 * answer at once). */
PCPU_EXP_HIDDEN int pcpu__exp_penalty_add(struct pcpu__exp_penalty *p, void (*fn)(void *arg), void *arg);
/* Calls fn(arg) of everything waiting, now, and joins the thread (before
 * the daemons stop). NULL is ignored. */
PCPU_EXP_HIDDEN void pcpu__exp_penalty_stop(struct pcpu__exp_penalty *p);
PCPU_EXP_HIDDEN void pcpu__exp_penalty_free(struct pcpu__exp_penalty *p);

/* ---- basic_auth.c ---- */

/* The user and password of an "Authorization: Basic ..." value (scheme
 * case-insensitive, strict base64, RFC 7617), decoded into a malloc()ed
 * buffer *buf ("user\0password\0"; explicit_bzero() and free() it): 1, or
 * 0 when the header is absent (NULL), not Basic, or malformed (*buf NULL);
 * -1 without memory. */
PCPU_EXP_HIDDEN int pcpu__exp_parse_basic(const char *header, char **buf, const char **user,
					  const char **password);

#endif /* PCPU_EXPORTER_INTERNAL_H */
