/* SPDX-License-Identifier: MIT */
/*
 * The exporter (pcpu/exporter.h): its settings, listening sockets and
 * descriptors, and the start and stop of libmicrohttpd's daemons. What a
 * request gets is request.c's, what a connection gets before it conn.c's,
 * what is served sources.c's (exporter_internal.h maps them).
 *
 * Why libmicrohttpd: an exporter faces whatever can reach its port -- idle
 * and slow clients, request smuggling, TLS -- and HTTP parsing, connection
 * limits, inactivity timeouts, request-size limits, Host checks and TLS
 * (GnuTLS) are what a well-kept, fuzzed server library gets right and a
 * hand-written one got wrong (bodies parsed as a second request, bare-LF
 * request lines unanswered, no Host check, slowloris). libmicrohttpd is
 * what prometheus-client-c uses, is packaged by Debian with GnuTLS, and
 * embeds in a C program without C++; civetweb (prometheus-cpp's) is not
 * packaged as a library by Debian. libpcpu and libpcpu-stats do not
 * depend on it: only this library does.
 *
 * Threads: each listening socket gets a daemon with one internal thread
 * (epoll) that serves every connection and runs the sources, one request
 * at a time (a scrape takes microseconds to milliseconds; idle connections
 * cost nothing meanwhile), or a pool of them (pcpu_exporter_set_threads()).
 *
 * Limits: max_clients connections per socket (beyond them libmicrohttpd
 * closes new connections at once; lowered at start so that the descriptor
 * limit leaves room for them and for the program: never EMFILE in a loop;
 * near the limit idle clients are shed, see conn.c), the inactivity
 * timeout, 16 KiB of request line and headers per connection (and of
 * response headers), no request bodies, one Host.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exporter_internal.h"

/* Descriptors kept free per socket for the program and the exporter's
 * own (epoll, libmicrohttpd's wakeup pipes), beside those open at start:
 * a scrape reads files too (segments, /proc). */
#define FD_RESERVE 8
/* Request line and headers, and the response headers, per connection. */
#define CONNECTION_MEMORY (16 * 1024)

pcpu_exporter_t *pcpu_exporter_new(void)
{
	struct pcpu_exporter *e = calloc(1, sizeof *e);

	if (!e) {
		pcpu__exp_fail(ENOMEM, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->log_lock, NULL);
	pthread_cond_init(&e->released, NULL);
	e->maxc = 1024;
	e->timeout = 10;
	e->threads = 1;
	strcpy(e->realm, "pcpu");
	return e;
}

static int not_started(const struct pcpu_exporter *e, const char *what)
{
	if (!e)
		return pcpu__exp_fail(EINVAL, "%s: NULL exporter", what);
	if (e->started)
		return pcpu__exp_fail(EBUSY, "%s: the exporter has started", what);
	return 0;
}

/* ---- listening sockets --------------------------------------------------------------- */

/* The address of a listening socket, as shown, and whether it is a loopback one. */
static void describe(struct pcpu__exp_listener *l)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char addr[INET6_ADDRSTRLEN] = "?";

	memset(&ss, 0, sizeof ss);
	getsockname(l->fd, (struct sockaddr *)&ss, &sl);
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof addr);
		snprintf(l->shown, sizeof l->shown, "[%s]:%u", addr, ntohs(s6->sin6_port));
		l->port = ntohs(s6->sin6_port);
		l->loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ||
			      (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && s6->sin6_addr.s6_addr[12] == 127);
	} else if (ss.ss_family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof addr);
		snprintf(l->shown, sizeof l->shown, "%s:%u", addr, ntohs(s4->sin_port));
		l->port = ntohs(s4->sin_port);
		l->loopback = (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
	} else {
		snprintf(l->shown, sizeof l->shown, "(socket %d)", l->fd);
		l->port = 0;
		l->loopback = ss.ss_family == AF_UNIX;
	}
}

/* Adds listening socket fd (owned from now on): 0, or -1 (fd closed). */
static int add_listener(struct pcpu_exporter *e, int fd)
{
	struct pcpu__exp_listener *p = realloc(e->ls, (e->nls + 1) * sizeof *p);

	if (!p) {
		close(fd);
		return pcpu__exp_fail(ENOMEM, "out of memory");
	}
	e->ls = p;
	memset(&p[e->nls], 0, sizeof p[e->nls]);
	p[e->nls].fd = fd;
	describe(&p[e->nls]);
	e->nls++;
	return 0;
}

/* "HOST:PORT", "[IPV6]:PORT" or "PORT" into host and port: 0 or -1. */
static int split_address(const char *spec, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *colon;

	if (spec[0] == '[') {
		const char *close_br = strchr(spec, ']');

		if (!close_br || close_br[1] != ':')
			return -1;
		snprintf(host, hcap, "%.*s", (int)(close_br - spec - 1), spec + 1);
		snprintf(port, pcap, "%s", close_br + 2);
	} else if ((colon = strrchr(spec, ':')) != NULL) {
		snprintf(host, hcap, "%.*s", (int)(colon - spec), spec);
		snprintf(port, pcap, "%s", colon + 1);
	} else {
		snprintf(host, hcap, "127.0.0.1");
		snprintf(port, pcap, "%s", spec);
	}
	if (!host[0] || !port[0] || strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 ||
	    atoi(port) > 65535)
		return -1;
	return 0;
}

int pcpu_exporter_listen(pcpu_exporter_t *e, const char *address)
{
	char host[256], port[16];
	struct addrinfo hints, *ai = NULL, *a;
	int fd = -1, one = 1, rc, err = 0;

	if (not_started(e, "pcpu_exporter_listen") < 0)
		return -1;
	if (!address || split_address(address, host, sizeof host, port, sizeof port) < 0)
		return pcpu__exp_fail(EINVAL, "bad address '%s' (HOST:PORT, [IPV6]:PORT or PORT)",
				      address ? address : "(null)");
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0)
		return pcpu__exp_fail(rc == EAI_MEMORY ? ENOMEM : EINVAL, "%s: %s", host, gai_strerror(rc));
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0)
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return pcpu__exp_fail(err ? err : EADDRNOTAVAIL, "cannot listen on %s: %s", address,
				      strerror(err ? err : EADDRNOTAVAIL));
	return add_listener(e, fd);
}

int pcpu_exporter_listen_fd(pcpu_exporter_t *e, int fd)
{
	int type = 0, acc = 0;
	socklen_t tl = sizeof type, al = sizeof acc;

	if (fd < 0)
		return pcpu__exp_fail(EBADF, "pcpu_exporter_listen_fd: bad descriptor %d", fd);
	if (not_started(e, "pcpu_exporter_listen_fd") < 0) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) != 0 || type != SOCK_STREAM || !acc) {
		int err = errno == ENOTSOCK || errno == EBADF ? errno : EINVAL;

		close(fd);
		return pcpu__exp_fail(err, "pcpu_exporter_listen_fd: descriptor %d is not a listening stream socket",
				      fd);
	}
	return add_listener(e, fd);
}

size_t pcpu_exporter_nlisten(const pcpu_exporter_t *e)
{
	return e ? e->nls : 0;
}

int pcpu_exporter_port(const pcpu_exporter_t *e, size_t i)
{
	if (!e || i >= e->nls)
		return pcpu__exp_fail(EINVAL, "no listening socket %zu", i);
	return e->ls[i].port;
}

int pcpu_exporter_address(const pcpu_exporter_t *e, size_t i, char *buf, size_t cap)
{
	if (!e || i >= e->nls || !buf || !cap)
		return pcpu__exp_fail(EINVAL, "no listening socket %zu, or no buffer", i);
	snprintf(buf, cap, "%s", e->ls[i].shown);
	return 0;
}

int pcpu_exporter_tls(const pcpu_exporter_t *e)
{
	return e && e->tls;
}

/* ---- settings ------------------------------------------------------------------------ */

int pcpu_exporter_set_max_clients(pcpu_exporter_t *e, size_t n)
{
	if (not_started(e, "pcpu_exporter_set_max_clients") < 0)
		return -1;
	if (n < 1 || n > 65536)
		return pcpu__exp_fail(EINVAL, "at most 1..65536 connections, not %zu", n);
	e->maxc = n;
	return 0;
}

int pcpu_exporter_set_timeout(pcpu_exporter_t *e, unsigned seconds)
{
	if (not_started(e, "pcpu_exporter_set_timeout") < 0)
		return -1;
	if (seconds < 1 || seconds > 3600)
		return pcpu__exp_fail(EINVAL, "a timeout of 1..3600 s, not %u", seconds);
	e->timeout = seconds;
	return 0;
}

int pcpu_exporter_set_threads(pcpu_exporter_t *e, unsigned n)
{
	if (not_started(e, "pcpu_exporter_set_threads") < 0)
		return -1;
	if (n < 1 || n > 1024)
		return pcpu__exp_fail(EINVAL, "1..1024 threads per socket, not %u", n);
	e->threads = n;
	return 0;
}

int pcpu_exporter_set_realm(pcpu_exporter_t *e, const char *realm)
{
	if (not_started(e, "pcpu_exporter_set_realm") < 0 || pcpu__exp_check_realm(realm) < 0)
		return -1;
	snprintf(e->realm, sizeof e->realm, "%s", realm);
	return 0;
}

int pcpu_exporter_set_log(pcpu_exporter_t *e, pcpu_exporter_log_fn *fn, void *arg)
{
	if (not_started(e, "pcpu_exporter_set_log") < 0)
		return -1;
	e->log = fn;
	e->log_arg = arg;
	return 0;
}

int pcpu_exporter_web_config(pcpu_exporter_t *e, const char *file)
{
	struct web_config wc;
	char err[512];

	if (not_started(e, "pcpu_exporter_web_config") < 0)
		return -1;
	if (!file)
		return pcpu__exp_fail(EINVAL, "pcpu_exporter_web_config: no file");
	errno = 0;
	if (pcpu__exp_web_config_load(file, &wc, err, sizeof err) < 0)
		return pcpu__exp_fail(errno == ENOMEM ? ENOMEM : errno == ENOENT || errno == EACCES ? errno : EINVAL,
				      "%s: %s", file, err);
	pcpu__exp_auth_free(e->auth);
	e->auth = NULL;
	pcpu__exp_web_config_free(&e->wc);
	e->wc = wc;
	e->tls = wc.cert_pem != NULL;
	if (wc.nusers && !(e->auth = pcpu__exp_auth_start(&e->wc))) {
		int er = errno;

		pcpu__exp_web_config_free(&e->wc);
		e->tls = 0;
		return pcpu__exp_fail(er, "cannot start the password checker: %s", strerror(er));
	}
	return 0;
}

/* ---- start and stop ------------------------------------------------------------------- */

/* Descriptors open now (those in /proc/self/fd; the directory's own
 * excluded), or 0 when it cannot be read. */
static size_t open_descriptors(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n ? n - 1 : 0;
}

/* The connection limit per socket that RLIMIT_NOFILE leaves room for: the
 * descriptors open now, FD_RESERVE per socket, and the connections of
 * every socket. Never raises the limit: that is the program's to decide
 * (a raised soft limit breaks select() past FD_SETSIZE). */
static void fit_descriptors(struct pcpu_exporter *e)
{
	struct rlimit rl;
	size_t open_now = open_descriptors(), want, fit;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	want = open_now + e->nls * (e->maxc + FD_RESERVE + 2 * e->threads);
	if ((rlim_t)want <= rl.rlim_cur)
		return;
	fit = (size_t)rl.rlim_cur > open_now + e->nls * (FD_RESERVE + 2 * e->threads)
		      ? ((size_t)rl.rlim_cur - open_now - e->nls * (FD_RESERVE + 2 * e->threads)) / e->nls
		      : 0;
	if (fit < 1)
		fit = 1;
	pcpu__exp_log(e, "%zu descriptors allowed (ulimit -n), %zu open: serving %zu connections at once%s, not %zu",
		      (size_t)rl.rlim_cur, open_now, fit, e->nls > 1 ? " per socket" : "", e->maxc);
	e->maxc = fit;
}

/* libmicrohttpd serving listener l with the exporter's limits, callbacks
 * and TLS credentials: the daemon, or NULL. */
static struct MHD_Daemon *start_daemon(struct pcpu_exporter *e, struct pcpu__exp_listener *l)
{
	struct MHD_OptionItem opts[20];
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	size_t nopt = 0;

	/* The logger first, so that the other options' messages use it. */
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)pcpu__exp_log_mhd, e };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, l->fd, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)e->maxc, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)e->timeout, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONNECTION_MEMORY, NULL };
	/* Strict: HTTP/1.1 without Host is refused (400). */
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL };
	/* SIGPIPE: MSG_NOSIGNAL on every send (libmicrohttpd on Linux), so
	 * the program's own disposition of SIGPIPE is left alone. */
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)pcpu__exp_on_connection, e };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)pcpu__exp_on_completed, e };
	if (e->threads > 1)
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)e->threads, NULL };
	/* Requests wait suspended for bcrypt (auth.c) and refusals for their
	 * delay (penalty.c). */
	flags |= MHD_ALLOW_SUSPEND_RESUME;
	if (e->tls) {
		flags |= MHD_USE_TLS;
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, e->wc.cert_pem };
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, e->wc.key_pem };
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0, e->wc.priorities };
		if (e->wc.ca_pem)
			opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0, e->wc.ca_pem };
	}
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	return MHD_start_daemon(flags, 0, NULL, NULL, pcpu__exp_on_request, e, MHD_OPTION_ARRAY, opts,
				MHD_OPTION_END);
}

/* Stops what pcpu_exporter_start() started, in an order that holds: every
 * suspended request resumed first, as libmicrohttpd must not be stopped
 * with one (pcpu__exp_auth_stop() answers them, 503); then the daemons,
 * which close every connection (on_connection() frees each). */
static void stop_daemons(struct pcpu_exporter *e)
{
	size_t i;

	pcpu__exp_auth_stop(e->auth);
	pcpu__exp_penalty_stop(e->penalty);
	for (i = 0; i < e->nls; i++)
		if (e->ls[i].d) {
			MHD_stop_daemon(e->ls[i].d); /* closes the listening socket */
			e->ls[i].d = NULL;
			e->ls[i].fd = -1;
		}
	pcpu__exp_workers_free(e);
}

int pcpu_exporter_start(pcpu_exporter_t *e)
{
	size_t i;

	if (not_started(e, "pcpu_exporter_start") < 0)
		return -1;
	if (!e->nls)
		return pcpu__exp_fail(EINVAL, "pcpu_exporter_start: no listening socket (pcpu_exporter_listen())");
	fit_descriptors(e);
	e->worker_limit = e->maxc / e->threads ? e->maxc / e->threads : 1;
	for (i = 0; i < e->nls; i++)
		if (!e->ls[i].loopback && !e->tls && !e->auth)
			pcpu__exp_log(e, "warning: %s is not a loopback address: whoever can reach it reads these "
					 "statistics (no TLS, no passwords)", e->ls[i].shown);
	/* A byte per descriptor a connection can have: the lowest free one is
	 * always taken, so those of the connections lie below the open ones,
	 * the limits and a margin (conn.c). */
	/* Any source may get a password check, also once started. */
	if (!(e->penalty = pcpu__exp_penalty_start()))
		return pcpu__exp_fail(errno, "cannot start a thread: %s", strerror(errno));
	if (e->tls && pcpu__exp_sniff_get(open_descriptors() + e->nls * (e->maxc + FD_RESERVE) + 64) < 0) {
		pcpu__exp_penalty_stop(e->penalty);
		pcpu__exp_penalty_free(e->penalty);
		e->penalty = NULL;
		return pcpu__exp_fail(ENOMEM, "out of memory");
	}
	e->started = 1;
	for (i = 0; i < e->nls; i++) {
		e->ls[i].d = start_daemon(e, &e->ls[i]);
		if (!e->ls[i].d) {
			int err = errno ? errno : EAGAIN;

			/* libmicrohttpd may have closed it, or not: never
			 * closed twice (a leak on this rare path at worst). */
			e->ls[i].fd = -1;

			stop_daemons(e);
			pcpu__exp_penalty_free(e->penalty);
			e->penalty = NULL;
			if (e->tls)
				pcpu__exp_sniff_put();
			e->started = 0;
			return pcpu__exp_fail(err, "cannot start the HTTP server on %s (libmicrohttpd, %u thread%s)",
					      e->ls[i].shown, e->threads, e->threads > 1 ? "s" : "");
		}
	}
	pcpu__exp_clear();
	return 0;
}

void pcpu_exporter_free(pcpu_exporter_t *e)
{
	size_t i;

	if (!e)
		return;
	if (e->started) {
		stop_daemons(e);
		if (e->tls)
			pcpu__exp_sniff_put();
	}
	pcpu__exp_auth_free(e->auth);
	pcpu__exp_penalty_free(e->penalty);
	for (i = 0; i < e->nls; i++)
		if (e->ls[i].fd >= 0)
			close(e->ls[i].fd);
	free(e->ls);
	pcpu__exp_sources_free(e);
	pcpu__exp_workers_free(e);
	pcpu__exp_web_config_free(&e->wc);
	pthread_cond_destroy(&e->released);
	pthread_mutex_destroy(&e->log_lock);
	pthread_mutex_destroy(&e->lock);
	free(e);
}
