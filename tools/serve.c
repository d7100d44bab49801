/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat serve`: a Prometheus exporter for statistics segments. This
 * file is the command: its options, and the sources it gives
 * libpcpu-exporter (pcpu/exporter.h), which does everything HTTP --
 * listening, connection and memory limits, shedding idle and slow clients,
 * request checks, negotiation, gzip, TLS and basic authentication (the web
 * configuration file) -- as it does for every other program that serves
 * statistics, so that they cannot diverge. What a scrape answers is
 * scrape.c's.
 *
 * Threads: the exporter's one serving thread runs the scrapes, one at a
 * time (scrape_state is that thread's); the main thread only waits for
 * SIGINT/SIGTERM.
 *
 * Descriptors: the exporter lowers its connection limit to what
 * RLIMIT_NOFILE leaves room for and never raises the limit itself (a
 * library must not); this command, whose process it is, raises the soft
 * limit toward the hard one first, for --max-clients connections.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <pcpu/exporter.h>

#include "pcpustat.h"

/* Descriptors beside the connections: what the exporter keeps free for a
 * scrape and for itself (libpcpu-exporter's FD_RESERVE), and stdio. */
#define FD_MARGIN 16

/* The exporter's state, handed to the sources. */
struct server {
	struct scrape_config cf;
	struct scrape_state st; /* used by the one serving thread only */
};

static const char index_text[] =
	"pcpustat serve: pcpu statistics for Prometheus\n"
	"  /metrics          all served segments\n"
	"  /metrics/SEGMENT  one segment (name, pid or file name)\n";

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

/* Segment readers kept open from one scrape to the next (a descriptor
 * each), where the descriptor limit has room for them beside maxc
 * connections: the next scrape of an unchanged segment then reads only its
 * values (scrape_read.c). */
#define KEEP_READERS 256

/* Descriptors for maxc connections and KEEP_READERS readers: raises the
 * soft limit toward the hard one (the exporter fits its connection limit
 * in what is left, and says so through the log). Returns how many readers
 * may be kept: KEEP_READERS, or 0 where the limit has no room for them. */
static size_t raise_descriptors(size_t maxc)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)maxc + FD_MARGIN + KEEP_READERS;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 0;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur >= want ? KEEP_READERS : 0;
}

/* What the command line asks of the HTTP side; the scrape's part goes to
 * server.cf. */
struct serve_args {
	const char *listen_spec, *web_config;
	size_t maxc;    /* --max-clients */
	unsigned timeout; /* --timeout, seconds */
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
	case 't': {
		double t = strtod(arg, &end);

		if (*end || !(t >= 1 && t <= 3600)) {
			fputs("pcpustat serve: --timeout wants seconds in [1, 3600]\n", stderr);
			return 2;
		}
		a->timeout = (unsigned)(t + 0.999);
		break;
	}
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
	if (check_segment_args("pcpustat serve", argv + optind, (size_t)(argc - optind)) < 0)
		return 2;
	sv->cf.targets = argv + optind;
	sv->cf.ntargets = (size_t)(argc - optind);
	return -1;
}

/* ---- the sources ---------------------------------------------------------------------- */

/* /metrics (every served segment) and /metrics/SEGMENT (one). A scrape
 * that fails on the server's side (5xx) is said on stderr too: the
 * operator must see it, not only the scraper. */
static void metrics_source(void *arg, struct pcpu_exporter_scrape *s)
{
	struct server *sv = arg;
	struct scrape_result res;

	if (s->rest[0])
		scrape_one(&sv->cf, &sv->st, s->rest, s->format, &res);
	else
		scrape_all(&sv->cf, &sv->st, s->format, &res);
	if (res.status != 200) {
		if (res.status >= 500)
			fprintf(stderr, "pcpustat serve: %s: %s\n", s->path, res.msg);
		s->status = res.status;
		snprintf(s->message, sizeof s->message, "%.300s", res.msg);
		return;
	}
	s->body = res.body;
	s->len = res.len;
}

static void index_source(void *arg, struct pcpu_exporter_scrape *s)
{
	(void)arg;
	s->body = strdup(index_text);
	if (!s->body) {
		s->status = 503;
		snprintf(s->message, sizeof s->message, "out of memory");
		return;
	}
	s->len = strlen(s->body);
	s->content_type = "text/plain; charset=utf-8";
}

/* The exporter's messages, prefixed as ours. */
static void log_line(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "pcpustat serve: %s\n", msg);
}

/* The exporter as the command line asks: 0, or the exit status (said on
 * stderr: 2 for a bad web configuration or address, 1 for the rest). */
static int exporter_setup(pcpu_exporter_t *e, struct server *sv, const struct serve_args *a)
{
	if (a->web_config && pcpu_exporter_web_config(e, a->web_config) < 0) {
		fprintf(stderr, "pcpustat serve: %s\n", pcpu_exporter_error());
		return errno == EINVAL || errno == ENOENT || errno == EACCES ? 2 : 1;
	}
	if (pcpu_exporter_listen(e, a->listen_spec) < 0) {
		fprintf(stderr, "pcpustat serve: %s\n", pcpu_exporter_error());
		return errno == EINVAL ? 2 : 1;
	}
	if (pcpu_exporter_set_max_clients(e, a->maxc) < 0 || pcpu_exporter_set_timeout(e, a->timeout) < 0 ||
	    pcpu_exporter_set_realm(e, "pcpustat") < 0 || pcpu_exporter_set_log(e, log_line, NULL) < 0 ||
	    pcpu_exporter_add_source(e, "/metrics", PCPU_EXPORTER_PREFIX, 0, metrics_source, sv) < 0 ||
	    pcpu_exporter_add_source(e, "/", 0, 0, index_source, NULL) < 0) {
		fprintf(stderr, "pcpustat serve: %s\n", pcpu_exporter_error());
		return 1;
	}
	return 0;
}

/* SIGINT and SIGTERM are taken by sigwait() (wait_for_stop()): blocked
 * before the exporter's threads start, so they reach only this one. A
 * client gone mid-response must not kill the exporter: SIGPIPE ignored
 * (the exporter sends with MSG_NOSIGNAL; the segments' reads do not
 * write, but a belt for whatever else might). */
static void block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Until SIGINT or SIGTERM (blocked by block_signals()). */
static void wait_for_stop(const sigset_t *sigs)
{
	int sig;

	do
		sig = 0;
	while (sigwait(sigs, &sig) != 0 || (sig != SIGINT && sig != SIGTERM));
}

int serve_main(int argc, char **argv, const struct pcpu_reader_options *ropt)
{
	struct server sv;
	struct serve_args a;
	pcpu_exporter_t *e;
	sigset_t sigs;
	char shown[128];
	int rc;

	memset(&sv, 0, sizeof sv);
	sv.cf.ropt = *ropt;
	if ((rc = parse_args(argc, argv, &sv, &a)) >= 0)
		return rc;
	scrape_memory_setup();
	sv.cf.keep_readers = raise_descriptors(a.maxc);
	e = pcpu_exporter_new();
	if (!e) {
		fprintf(stderr, "pcpustat serve: %s\n", pcpu_exporter_error());
		return 1;
	}
	if ((rc = exporter_setup(e, &sv, &a)) != 0) {
		pcpu_exporter_free(e);
		return rc;
	}
	block_signals(&sigs);
	if (pcpu_exporter_start(e) < 0) {
		fprintf(stderr, "pcpustat serve: %s\n", pcpu_exporter_error());
		pcpu_exporter_free(e);
		return 1;
	}
	pcpu_exporter_address(e, 0, shown, sizeof shown);
	printf("pcpustat serve: listening on %s://%s/metrics\n", pcpu_exporter_tls(e) ? "https" : "http", shown);
	fflush(stdout);

	wait_for_stop(&sigs);
	/* Every connection closed, waiting password checks answered 503, the
	 * threads joined: then the scrapes' state goes. */
	pcpu_exporter_free(e);
	scrape_state_free(&sv.st);
	return 0;
}
