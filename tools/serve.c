/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat serve`: a Prometheus exporter for statistics segments. This
 * file is the command: its options, the listening socket, the descriptors it
 * needs, and the HTTP server's start and stop. What a request gets is
 * serve_request.c's, what a connection gets before it serve_conn.c's, what a
 * scrape answers scrape.c's (serve.h maps them).
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
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve.h"

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
	"A segment that cannot be read or merged is left out, never half shown, as\n"
	"pcpu_segment_up{...,reason=\"WHY\"} 0 (corrupt, permission, duplicate,\n"
	"conflict, too_large...: man pcpustat); the scrape goes on.\n"
	"\n"
	"Formats, the one the request's Accept header prefers:\n"
	"  Prometheus text 0.0.4  text/plain; version=0.0.4 (also when Accept asks for\n"
	"                         nothing served here)\n"
	"  OpenMetrics 1.0        application/openmetrics-text (Prometheus' default)\n";

/* The protobuf line depends on the libpcpu pcpustat runs with. */
static const char serve_usage_protobuf[] =
	"  protobuf               application/vnd.google.protobuf; proto=\n"
	"                         io.prometheus.client.MetricFamily; encoding=delimited\n"
	"                         (what Prometheus asks for with native histograms on;\n"
	"                         the only format with them)\n";
static const char serve_usage_no_protobuf[] =
	"  protobuf               not with this libpcpu (built without protobuf-c): a\n"
	"                         request for it gets one of the above\n";

static const char serve_usage_options[] =
	"each compressed with gzip when Accept-Encoding allows.\n"
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

/* The address a listening socket got (port 0 picks one), as printed, in
 * shown; and a warning when anyone beyond this host may read the
 * statistics unprotected (no TLS, no passwords). */
static void show_address(int fd, char *shown, size_t cap, int protected)
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
	show_address(fd, shown, cap, protected);
	freeaddrinfo(ai);
	return fd;
}

/* Sizes like 256M: 0 or -1 (pcpustat.h). */
int parse_bytes(const char *s, size_t *out)
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

/* What the command line asks of the HTTP side; the scrape's part goes to
 * server.cf. */
struct serve_args {
	const char *listen_spec, *web_config;
	size_t maxc;    /* --max-clients */
	double timeout; /* --timeout, seconds */
};

/* One option (getopt's c, with its argument): -1 to go on, or the exit
 * status (0 after --help, 2 for a bad value, said on stderr). */
static int parse_option(int c, char *arg, struct server *sv, struct serve_args *a)
{
	unsigned uid;
	char *end;

	switch (c) {
	case 'l':
		a->listen_spec = arg;
		break;
	case 'd':
		sv->cf.ropt.dir = arg;
		break;
	case 'u':
		if (parse_user(arg, &uid) < 0) {
			fprintf(stderr, "pcpustat serve: no such user '%s'\n", arg);
			return 2;
		}
		sv->cf.ropt.flags = (sv->cf.ropt.flags & ~(unsigned)PCPU_READER_ANY_OWNER) | PCPU_READER_OWNER;
		sv->cf.ropt.owner = (uid_t)uid;
		break;
	case 'a':
		sv->cf.ropt.flags |= PCPU_READER_ANY_OWNER;
		break;
	case 'm':
		a->maxc = strtoul(arg, &end, 10);
		if (*end || a->maxc < 1 || a->maxc > 65536) {
			fputs("pcpustat serve: --max-clients wants 1..65536\n", stderr);
			return 2;
		}
		break;
	case 't':
		a->timeout = strtod(arg, &end);
		if (*end || !(a->timeout >= 1 && a->timeout <= 3600)) {
			fputs("pcpustat serve: --timeout wants seconds in [1, 3600]\n", stderr);
			return 2;
		}
		break;
	case 'B':
		if (parse_bytes(arg, &sv->cf.max_bytes) < 0) {
			fputs("pcpustat serve: --max-bytes wants a size of at least 4K (e.g. 64M)\n", stderr);
			return 2;
		}
		break;
	case 'D':
		errno = 0;
		sv->cf.max_down = strtoul(arg, &end, 10);
		if (*end || !*arg || arg[0] == '-' || errno || sv->cf.max_down > 1000000) {
			fputs("pcpustat serve: --max-down wants 0..1000000\n", stderr);
			return 2;
		}
		break;
	case 'W':
		a->web_config = arg;
		break;
	case 'h':
		fputs(serve_usage, stdout);
		fputs(pcpu_format_supported(PCPU_FORMAT_PROTOBUF) ? serve_usage_protobuf : serve_usage_no_protobuf,
		      stdout);
		fputs(serve_usage_options, stdout);
		return 0;
	default:
		fputs("Try 'pcpustat serve --help'.\n", stderr);
		return 2;
	}
	return -1;
}

/* The command line into sv->cf (defaults first) and a; the SEGMENTs left
 * are the targets, checked here because HTTP clients name them too
 * (valid_target()). -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, struct server *sv, struct serve_args *a)
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
	size_t i;
	int c, rc;

	a->listen_spec = "127.0.0.1:9464";
	a->web_config = NULL;
	a->maxc = 1024;
	a->timeout = 10;
	sv->cf.max_bytes = (size_t)256 << 20;
	sv->cf.max_down = 16;
	optind = 1;
	argv[0] = (char *)"pcpustat serve"; /* getopt's messages, as ours */
	while ((c = getopt_long(argc, argv, "l:d:u:ah", longopts, NULL)) != -1)
		if ((rc = parse_option(c, optarg, sv, a)) >= 0)
			return rc;
	for (i = (size_t)optind; i < (size_t)argc; i++)
		if (!valid_target(argv[i])) {
			fprintf(stderr, "pcpustat serve: '%s' is not a segment name, pid or file name\n", argv[i]);
			return 2;
		}
	sv->cf.targets = argv + optind;
	sv->cf.ntargets = (size_t)(argc - optind);
	return -1;
}

/* --web.config.file: TLS and basic authentication, whose bcrypt worker
 * starts here. 0, or the exit status (2: a bad file; 1: no worker). */
static int load_web_config(struct server *sv, const char *file)
{
	char err[512];

	if (web_config_load(file, &sv->wc, err, sizeof err) < 0) {
		fprintf(stderr, "pcpustat serve: %s: %s\n", file, err);
		return 2;
	}
	sv->tls = sv->wc.cert_pem != NULL;
	if (sv->wc.nusers && !(sv->auth = auth_start(&sv->wc))) {
		fprintf(stderr, "pcpustat serve: cannot start the password checker: %s\n", strerror(errno));
		web_config_free(&sv->wc);
		return 1;
	}
	return 0;
}

/* SIGINT and SIGTERM are taken by sigwait() (wait_for_stop()): blocked
 * before libmicrohttpd's thread starts, so they reach only this one. A
 * client gone mid-response must not kill the exporter: SIGPIPE ignored. */
static void block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* libmicrohttpd serving on lfd with the limits, callbacks and TLS
 * credentials of sv: the daemon, or NULL. */
static struct MHD_Daemon *start_server(struct server *sv, int lfd, size_t maxc, double timeout)
{
	struct MHD_OptionItem opts[16];
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	size_t nopt = 0;

	/* The logger first, so that the other options' messages use it. */
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)log_mhd, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, lfd, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)maxc, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)(timeout + 0.999), NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONNECTION_MEMORY, NULL };
	/* Strict: HTTP/1.1 without Host is refused (400). */
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, NULL };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, sv };
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL };
	if (sv->auth)
		flags |= MHD_ALLOW_SUSPEND_RESUME; /* requests wait for bcrypt suspended */
	if (sv->tls) {
		flags |= MHD_USE_TLS;
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, sv->wc.cert_pem };
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, sv->wc.key_pem };
		opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0, sv->wc.priorities };
		if (sv->wc.ca_pem)
			opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0, sv->wc.ca_pem };
	}
	opts[nopt++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, sv, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}

/* Until SIGINT or SIGTERM (blocked by block_signals()). */
static void wait_for_stop(const sigset_t *sigs)
{
	int sig;

	do
		sig = 0;
	while (sigwait(sigs, &sig) != 0 || (sig != SIGINT && sig != SIGTERM));
}

/* Stops what serve_main() started, in an order that holds: every suspended
 * request resumed first, as libmicrohttpd must not be stopped with one
 * (auth_stop() answers them, 503); then the daemon (d, if started), which
 * closes every connection (on_connection() frees each); then the rest.
 * lfd: the listening socket, or -1. */
static void server_stop(struct server *sv, struct MHD_Daemon *d, int lfd)
{
	auth_stop(sv->auth);
	if (d)
		MHD_stop_daemon(d);
	auth_free(sv->auth);
	free(sv->conns);
	sniff_free();
	if (lfd >= 0)
		close(lfd);
	scrape_state_free(&sv->st);
	web_config_free(&sv->wc);
}

int serve_main(int argc, char **argv, const struct pcpu_reader_options *ropt)
{
	struct server sv;
	struct serve_args a;
	struct MHD_Daemon *d;
	sigset_t sigs;
	char shown[128];
	int lfd, rc;

	memset(&sv, 0, sizeof sv);
	sv.cf.ropt = *ropt;
	if ((rc = parse_args(argc, argv, &sv, &a)) >= 0)
		return rc;
	scrape_memory_setup();
	if (a.web_config && (rc = load_web_config(&sv, a.web_config)) != 0)
		return rc;

	lfd = listen_on(a.listen_spec, shown, sizeof shown, sv.tls || sv.wc.nusers);
	if (lfd < 0) {
		server_stop(&sv, NULL, -1);
		return 1;
	}
	a.maxc = fit_descriptors(a.maxc);
	sv.limit = a.maxc;
	/* A byte per descriptor a connection can have: the lowest free one
	 * is always taken, and at most maxc connections and FD_RESERVE
	 * others are open (the margin: stdio, the listening socket,
	 * libmicrohttpd's own). One past it (or without the memory) is
	 * served as before: closed unanswered. */
	if (sv.tls)
		sniff_init(a.maxc + FD_RESERVE + 64);

	block_signals(&sigs);
	d = start_server(&sv, lfd, a.maxc, a.timeout);
	if (!d) {
		fprintf(stderr, "pcpustat serve: cannot start the HTTP server on %s\n", shown);
		server_stop(&sv, NULL, lfd);
		return 1;
	}
	printf("pcpustat serve: listening on %s://%s/metrics\n", sv.tls ? "https" : "http", shown);
	fflush(stdout);

	wait_for_stop(&sigs);
	server_stop(&sv, d, lfd);
	return 0;
}
