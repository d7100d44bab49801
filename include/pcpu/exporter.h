/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/exporter.h
 * libpcpu-exporter: a Prometheus exporter's HTTP side, for any program that
 * serves statistics -- `pcpustat serve`, the prometheus-cpp layer's
 * Exposer, and yours. One implementation of what faces the network:
 * listening, connection and memory limits, shedding idle and slow clients,
 * request checks (no bodies, one Host), content negotiation, gzip, TLS and
 * basic authentication from an exporter-toolkit web configuration file.
 * What is served comes from sources: callbacks that write an exposition in
 * the format asked for (pcpu_exporter_add_source()), or a registry
 * (pcpu_exporter_add_registry()).
 *
 *     pcpu_exporter_t *e = pcpu_exporter_new();
 *     if (!e || pcpu_exporter_listen(e, "127.0.0.1:9464") < 0 ||
 *         pcpu_exporter_add_registry(e, "/metrics", reg) < 0 ||
 *         pcpu_exporter_start(e) < 0)
 *         errx(1, "%s", pcpu_exporter_error());
 *     ...                                  // serves until
 *     pcpu_exporter_free(e);
 *
 * Link with pkg-config pcpu-exporter, or CMake pcpu::exporter. The library
 * uses libmicrohttpd (with GnuTLS), zlib, libyaml and libcrypt; libpcpu and
 * libpcpu-stats do not.
 *
 * Threads: each listening socket is served by its own thread (or pool of
 * threads: pcpu_exporter_set_threads()), started by pcpu_exporter_start().
 * Sources run in those threads: with one socket and one thread, one request
 * at a time. Every function here is thread-safe unless it says otherwise;
 * none is async-signal-safe. Nothing is printed: failures are returned
 * (-1 or NULL with errno, and pcpu_exporter_error() says why), and what the
 * server meets while it runs goes to the log callback, if one is set.
 *
 * Requests are checked in this order, each answered as it fails: a body
 * (400, or 405 for a method other than GET or HEAD; connection closed:
 * Content-Length other than 0, or Transfer-Encoding), more than one Host (400), HTTP/1.1 without Host
 * (400), a client certificate the web configuration requires (403), the
 * web configuration's basic authentication (401; 429 or 503 while the
 * password checker is busy), a path no source serves (404), a method other
 * than GET or HEAD (405), the source's own authentication (401). Then the
 * source answers: in the format the Accept header prefers among those the
 * source writes (pcpu_format_negotiate_among()), gzip-compressed where
 * Accept-Encoding takes gzip (pcpu_format_gzip_acceptable()).
 */
#ifndef PCPU_EXPORTER_H
#define PCPU_EXPORTER_H

#include <stddef.h>
#include <pcpu/defs.h>
#include <pcpu/expose.h>
#include <pcpu/stats.h>

PCPU_BEGIN_DECLS

/** An exporter: its listening sockets, settings, sources and threads. */
typedef struct pcpu_exporter pcpu_exporter_t;

/** The bit of format `f` in a source's set of formats. */
#define PCPU_EXPORTER_FORMAT(f) (1u << (unsigned)(f))

/** One scrape as a source sees it (the fields marked in) and answers it
 * (out). Valid during the source's call only. */
struct pcpu_exporter_scrape {
	/** in: the request's path, without its query ("/metrics"). */
	const char *path;
	/** in: what follows the source's path: "" for an exact match; for a
	 * PCPU_EXPORTER_PREFIX source, the part after "PATH/" (never
	 * empty). */
	const char *rest;
	/** in: the format to answer in: the one the Accept header prefers
	 * among the source's formats. */
	enum pcpu_format format;
	/** in: the user who authenticated (web configuration or the source's
	 * check), or NULL. */
	const char *user;
	/** out: the HTTP status, preset to 200. Anything else answers
	 * `message` as text/plain. */
	int status;
	/** out: with 200, the body: malloc()ed, handed over to the exporter
	 * (which frees it, also when the client has gone). */
	char *body;
	/** out: its length in bytes. */
	size_t len;
	/** out: with 200, the Content-Type; NULL (preset): the format's
	 * (pcpu_format_content_type()), and the body may be gzip-compressed.
	 * Another value (a string that outlives the exporter) is sent as is,
	 * uncompressed: an index page, say. */
	const char *content_type;
	/** out: not 200: what the client is told (one line). */
	char message[320];
};

/**
 * A source: writes the exposition of one scrape into `s` (s->body,
 * s->len), or sets s->status and s->message. Called in one of the
 * exporter's threads, with the exporter's locks not held; with one
 * listening socket and one thread (the defaults), never twice at once.
 * It must not call pcpu_exporter_remove_source() or pcpu_exporter_free()
 * of its own exporter.
 */
typedef void pcpu_exporter_source_fn(void *arg, struct pcpu_exporter_scrape *s);

/**
 * A source's own password check (pcpu_exporter_set_source_auth()): 1 to
 * let the request through, 0 to answer 401, -1 to answer 500 (the check
 * itself failed). Called in the exporter's threads, synchronously: a slow
 * check delays the other requests of its thread. Web-configuration users
 * (pcpu_exporter_web_config()) are checked off those threads instead.
 */
typedef int pcpu_exporter_auth_fn(void *arg, const char *user, const char *password);

/**
 * The log callback (pcpu_exporter_set_log()): one message, without a
 * trailing newline. Called in the exporter's threads (and in the caller's,
 * from pcpu_exporter_start()); a message that repeats within 10 s is
 * counted, then said once with the count.
 */
typedef void pcpu_exporter_log_fn(void *arg, const char *message);

/** Flags of pcpu_exporter_add_source(). */
enum {
	/** Serve PATH and every PATH/REST below it (REST in s->rest). */
	PCPU_EXPORTER_PREFIX = 1u << 0,
};

/**
 * A new exporter with the defaults: no listening socket yet, at most 1024
 * connections, 10 s of inactivity closes a connection, one thread per
 * socket, no TLS, no passwords, no log. Returns NULL with errno ENOMEM.
 * Thread-safe. Cost: one allocation; nothing starts until
 * pcpu_exporter_start().
 */
PCPU_API pcpu_exporter_t *pcpu_exporter_new(void);

/**
 * Listens on `address`: "HOST:PORT", "[IPV6]:PORT" or "PORT" (then on
 * 127.0.0.1); port 0 picks a free one (pcpu_exporter_port()). HOST may be
 * a name (resolved now). The socket is bound now, so that a taken port
 * fails here. May be called several times, before pcpu_exporter_start():
 * each socket gets its own threads and its own connection limit.
 * Returns 0, or -1 with errno: EINVAL (malformed address, or a host that
 * does not resolve), EBUSY (already started), or bind()'s and listen()'s
 * (EADDRINUSE, EACCES...). The settings functions below (listen, set_*,
 * web_config) are not thread-safe on one exporter: one thread sets it up.
 * Cost: a name resolution (getaddrinfo()) and a socket.
 */
PCPU_API int pcpu_exporter_listen(pcpu_exporter_t *e, const char *address);

/**
 * Serves on `fd`, a listening stream socket the caller made (and
 * bound), e.g. from socket activation. The exporter owns it from now on,
 * also on failure, and closes it in pcpu_exporter_free(). Before
 * pcpu_exporter_start(). Returns 0, or -1 with errno EBADF, ENOTSOCK,
 * EINVAL (not listening), EBUSY (started), ENOMEM. Not thread-safe on one
 * exporter (settings). Cost: two getsockopt() calls.
 */
PCPU_API int pcpu_exporter_listen_fd(pcpu_exporter_t *e, int fd);

/** The number of listening sockets (pcpu_exporter_listen*() calls that
 * succeeded). Thread-safe once started (the sockets are fixed then).
 * Cost: a load. */
PCPU_API size_t pcpu_exporter_nlisten(const pcpu_exporter_t *e);

/** The port of listening socket `i` (0-based, in the order they were
 * added), or -1 with errno EINVAL. Thread-safe once started. Cost: a
 * load. */
PCPU_API int pcpu_exporter_port(const pcpu_exporter_t *e, size_t i);

/**
 * The address of listening socket `i` as "HOST:PORT" or "[IPV6]:PORT",
 * in buf (NUL-terminated, truncated to cap). Returns 0, or -1 with errno
 * EINVAL. Thread-safe once started. Cost: a copy.
 */
PCPU_API int pcpu_exporter_address(const pcpu_exporter_t *e, size_t i, char *buf, size_t cap);

/** 1 if `e` serves HTTPS (its web configuration has tls_server_config),
 * else 0. Thread-safe once started. Cost: a load. */
PCPU_API int pcpu_exporter_tls(const pcpu_exporter_t *e);

/**
 * At most `n` connections at once per listening socket (1..65536; default
 * 1024); more are closed at once. Past three quarters of it, idle
 * connections are closed after 1 s of inactivity instead of the timeout;
 * below half, new ones get the timeout again. Lowered at start, with a
 * log message, so that RLIMIT_NOFILE leaves descriptors for the program:
 * the exporter never raises a limit of the process. Before start.
 * Returns 0, or -1 with errno EINVAL or EBUSY. Not thread-safe on one
 * exporter (settings). Cost: a store.
 */
PCPU_API int pcpu_exporter_set_max_clients(pcpu_exporter_t *e, size_t n);

/** A connection inactive for `seconds` (1..3600; default 10) is closed.
 * Before start. Returns 0, or -1 with errno EINVAL or EBUSY. Not
 * thread-safe on one exporter (settings). Cost: a store. */
PCPU_API int pcpu_exporter_set_timeout(pcpu_exporter_t *e, unsigned seconds);

/**
 * Threads per listening socket (1..1024; default 1): more serve several
 * requests at once, the connection limit shared among them. Before
 * start. Returns 0, or -1 with errno EINVAL or EBUSY. Not thread-safe on
 * one exporter (settings). Cost: a store.
 */
PCPU_API int pcpu_exporter_set_threads(pcpu_exporter_t *e, unsigned n);

/**
 * TLS and basic authentication from `file`, in the Prometheus exporter
 * toolkit's web configuration format (tls_server_config: cert_file,
 * key_file, client_auth_type, client_ca_file, min_version, max_version;
 * basic_auth_users: NAME: BCRYPT-HASH); relative paths are relative to the
 * file's directory. Settings that cannot be honoured (cipher_suites,
 * curve_preferences, http_server_config, unknown keys) are refused, never
 * ignored. Passwords are checked with bcrypt on a thread of their own,
 * one at a time, behind a cache of verdicts and a bounded queue: a client
 * whose password was verified never waits for one, one address has at
 * most 2 checks waiting (then 429), all at most 9 (then 503); a refused
 * request is answered after half a second, so that a client cannot spin
 * through passwords. Before start. Returns 0, or -1 with errno EINVAL
 * (pcpu_exporter_error() names what is wrong), a file's errno, EBUSY or
 * ENOMEM. Not thread-safe on one exporter (settings). Cost: reading the
 * files; the password checker's thread starts here.
 */
PCPU_API int pcpu_exporter_web_config(pcpu_exporter_t *e, const char *file);

/**
 * The realm of the web configuration's 401 answers (default "pcpu"; no
 * '"', '\\', CR or LF; at most 127 bytes). Before start. Returns 0, or -1
 * with errno EINVAL or EBUSY. Not thread-safe on one exporter (settings).
 * Cost: a copy.
 */
PCPU_API int pcpu_exporter_set_realm(pcpu_exporter_t *e, const char *realm);

/** Where the server's messages go (NULL: nowhere, the default). The
 * callback must not call this library's functions on `e`. Before start.
 * Returns 0, or -1 with errno EBUSY. Not thread-safe on one exporter
 * (settings). Cost: a store. */
PCPU_API int pcpu_exporter_set_log(pcpu_exporter_t *e, pcpu_exporter_log_fn *fn, void *arg);

/**
 * Serves `path` (from "/", at most 255 bytes; with PCPU_EXPORTER_PREFIX
 * also what lies below it) with `fn`, which writes any of `formats`
 * (PCPU_EXPORTER_FORMAT() bits; 0: every format the library writes but
 * JSON). Before or after start: a request sees the source or not, never
 * half of it. An exact path wins over a prefix. Returns 0, or -1 with
 * errno EINVAL (NULL fn, a path not starting with '/'), EEXIST (the path
 * is served already), ENOMEM. Thread-safe (with requests being served,
 * and with the other source functions). Cost: an allocation and a lock;
 * requests find a source in time linear in the sources.
 */
PCPU_API int pcpu_exporter_add_source(pcpu_exporter_t *e, const char *path, unsigned flags,
				      unsigned formats, pcpu_exporter_source_fn *fn, void *arg);

/**
 * Serves `path` with registry `reg`'s exposition (pcpu_registry_write()),
 * in any format the library writes but JSON. The registry must outlive its
 * source: pcpu_exporter_remove_source() first. Returns, thread safety and
 * cost as pcpu_exporter_add_source(); each scrape costs one
 * pcpu_registry_write() (and gzip where asked for).
 */
PCPU_API int pcpu_exporter_add_registry(pcpu_exporter_t *e, const char *path, pcpu_registry_t *reg);

/**
 * Adds a password check to the source at `path`, or replaces it (fn NULL:
 * removes it): a request without credentials, or refused, gets 401 with
 * `realm` (no '"', '\\', CR or LF; at most 127 bytes). A refused request
 * is answered after half a second. Returns 0, or -1 with errno ENOENT (no
 * such source) or EINVAL. Thread-safe (as pcpu_exporter_add_source()).
 * Cost: a lock and a search of the sources.
 */
PCPU_API int pcpu_exporter_set_source_auth(pcpu_exporter_t *e, const char *path, pcpu_exporter_auth_fn *fn,
					   void *arg, const char *realm);

/**
 * Stops serving `path`: returns once no request uses its source any more,
 * so that what the source reads may then be freed. Not from a source of
 * this exporter. Returns 0, or -1 with errno ENOENT. Thread-safe (as
 * pcpu_exporter_add_source()). Cost: a lock; waits for the requests in
 * that source.
 */
PCPU_API int pcpu_exporter_remove_source(pcpu_exporter_t *e, const char *path);

/**
 * Starts serving: the threads, with what was set. Logs (pcpu_exporter_set_log())
 * when a socket that is not a loopback one is served without TLS or
 * passwords, and when the connection limit was lowered. Returns 0, or -1
 * with errno EINVAL (no listening socket), EBUSY (started), ENOMEM, or
 * what libmicrohttpd or the threads met (EAGAIN...). Once. Not
 * thread-safe on one exporter (settings). Cost: the threads (one per
 * socket, or the pool; the refusals' timer; the password checker's was
 * started by pcpu_exporter_web_config()).
 */
PCPU_API int pcpu_exporter_start(pcpu_exporter_t *e);

/**
 * Stops `e` (if started) and frees it: every connection is closed, every
 * request waiting for a password check is answered 503, the threads are
 * joined (a bcrypt still running finishes on its own, detached). No
 * source is called once this returns. NULL is ignored. Not from a source
 * of `e`; not thread-safe on one exporter (no other call on `e` at the
 * same time or after). Cost: joining the threads, closing every
 * connection; a refused request waiting for its delay is answered at once.
 */
PCPU_API void pcpu_exporter_free(pcpu_exporter_t *e);

/**
 * What the last failed call of this library in this thread met, as a
 * sentence; "" if none. Thread-safe (one message per thread). Cost: a
 * load.
 */
PCPU_API const char *pcpu_exporter_error(void);

/**
 * The gzip member of body[0..len) at zlib `level` (1..9; 1 gets most of
 * the gain on exposition text, about 10x, for a fraction of the default
 * level's time), malloc()ed, its length in *zlen. The exporter's own
 * compression, for programs that send expositions otherwise. Returns NULL
 * with errno ENOMEM, EINVAL (level), EFBIG (len over 4 GiB).
 * Thread-safe. Cost: linear in len.
 */
PCPU_API char *pcpu_exporter_gzip(const void *body, size_t len, int level, size_t *zlen);

PCPU_END_DECLS

#endif /* PCPU_EXPORTER_H */
