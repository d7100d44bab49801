/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat push`: sends the statistics segments to a receiver on an
 * interval -- Prometheus remote write 1.0 (push_rw.c) or OTLP/HTTP
 * (push_otlp.c) -- for nodes behind NAT, short-lived jobs and sites without
 * a scraper. What it sends is what `pcpustat serve` answers a scrape with
 * (scrape_collect(): the same segments, labels, pcpu_segment_up and
 * pcpu_segments_omitted, the same --max-bytes budget and isolation).
 *
 * It is an agent beside the application, as serve is: the application only
 * publishes its segment, and nothing of the push runs in it, so a receiver
 * that is down, slow or failing cannot slow an add or block the
 * application. The agent itself stays bounded:
 *
 *  - One request at a time, each bounded by --timeout; a slow receiver
 *    delays the agent's next push, never anything else.
 *  - A bounded queue (--queue requests, oldest dropped first) while the
 *    receiver refuses or cannot be reached, retried with exponential
 *    backoff (--min-backoff doubling up to --max-backoff). Every value is
 *    cumulative (counters, histogram buckets, sums and counts; gauges are
 *    levels), so a dropped request loses no count: the next one carries
 *    every count up to its time. What a drop loses is resolution -- the
 *    receiver has fewer points in that stretch -- never an event.
 *    With OTLP delta temporality (--temporality delta) counters and
 *    histograms are sent as increases since the last acknowledged point
 *    (push_delta.c): the queue then holds one request, a new collection
 *    supersedes one not acknowledged (its deltas cover it), and the
 *    baseline advances only on a 2xx, so a failed or dropped request
 *    loses no count either.
 *  - 4xx but 429 is not retried: the receiver said the request itself is
 *    wrong (bad labels, too old samples, authentication); it is dropped and
 *    the log says why. 5xx, 429 and transport errors are retried.
 *  - Memory: at most --queue request bodies, plus one collection (bounded
 *    by --max-bytes, as a scrape) and its encoding scratch; the scratch is
 *    freed after each push but its first chunk.
 *  - SIGTERM or SIGINT: one last collection; then (and after --count
 *    collections) what is queued is delivered, retried with the backoff
 *    for at most --drain seconds (drain()); exit 0 if all was delivered.
 *
 * Requests are sent oldest first, so a receiver that refuses samples older
 * than what it has (Prometheus: out of order) sees them in order; a retry
 * after a timeout may resend a request the receiver had stored: the same
 * samples at the same timestamps, which Prometheus accepts as duplicates.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "push.h"

static const char push_usage[] =
	"Usage: pcpustat push (--remote-write URL | --otlp URL | --otlp-grpc URL) [OPTIONS]\n"
	"                     [SEGMENT...]\n"
	"\n"
	"Sends the SEGMENTs (default: every segment you can read), as `pcpustat serve`\n"
	"would expose them (labelled pcpu_segment and pcpu_pid, with pcpu_segment_up),\n"
	"to a receiver every --interval:\n"
	"  --remote-write URL   Prometheus remote write 1.0 (snappy protobuf), e.g.\n"
	"                       http://prometheus:9090/api/v1/write\n"
	"  --otlp URL           OTLP/HTTP protobuf, e.g. http://collector:4318/v1/metrics\n"
	"  --otlp-grpc URL      OTLP/gRPC (HTTP/2), e.g. http://collector:4317\n"
	"  Without one, OTLP goes to $OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or\n"
	"  $OTEL_EXPORTER_OTLP_ENDPOINT, over $OTEL_EXPORTER_OTLP_METRICS_PROTOCOL or\n"
	"  $OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf, the default, or grpc)\n"
	"\n"
	"Options:\n"
	"  -i, --interval SECS  between pushes (default: OTLP $OTEL_METRIC_EXPORT_INTERVAL\n"
	"                       in milliseconds, else 15)\n"
	"      --timeout SECS   per request (default 10)\n"
	"      --job NAME       remote write: label job (default pcpustat);\n"
	"                       OTLP: resource attribute service.name\n"
	"      --instance NAME  remote write: label instance (default: the host name);\n"
	"                       OTLP: resource attribute service.instance.id\n"
	"      --label NAME=VALUE\n"
	"                       remote write: an external label (a series' own label of\n"
	"                       that name wins); OTLP: a resource attribute. Repeatable.\n"
	"      --native-histograms\n"
	"                       remote write: exponential histograms as native\n"
	"                       histograms only (the receiver must accept them:\n"
	"                       Prometheus with --enable-feature=native-histograms)\n"
	"      --basic-auth-user USER --basic-auth-password-file FILE\n"
	"      --bearer-token-file FILE\n"
	"                       authentication; the file is read at every push\n"
	"      --ca-file FILE   CA certificates to verify an https:// receiver with\n"
	"      --compression gzip|none\n"
	"                       OTLP: gzip the requests (Content-Encoding: gzip; over\n"
	"                       gRPC grpc-encoding: gzip); default\n"
	"                       $OTEL_EXPORTER_OTLP_METRICS_COMPRESSION, then\n"
	"                       $OTEL_EXPORTER_OTLP_COMPRESSION, then none\n"
	"      --temporality cumulative|delta|lowmemory\n"
	"                       OTLP: counters and histograms as cumulative values\n"
	"                       (default) or as the increase since the last point the\n"
	"                       receiver acknowledged (delta and lowmemory: the same\n"
	"                       for pcpu's kinds); gauges stay gauges. Default\n"
	"                       $OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, then\n"
	"                       cumulative. With delta (and no --delta-state), the\n"
	"                       counts made before the agent's first collection are\n"
	"                       not sent\n"
	"      --delta-state FILE\n"
	"                       delta: what was sent, kept in FILE across agents: no\n"
	"                       FILE yet, every series is sent whole; the baseline a\n"
	"                       previous agent wrote at exit is continued from (a\n"
	"                       restart loses no count); after a crash, segments it\n"
	"                       had seen are taken up from the first collection,\n"
	"                       others sent whole\n"
	"      --queue N        requests kept while the receiver is unreachable or\n"
	"                       failing (default 4; oldest dropped first: values are\n"
	"                       cumulative, so no count is lost, only resolution;\n"
	"                       delta: one, each covering every count not acknowledged)\n"
	"      --min-backoff SECS, --max-backoff SECS\n"
	"                       retry delays, doubling (default 0.5 and 30)\n"
	"      --count N        push N times, then deliver what is queued and exit\n"
	"      --drain SECS     at exit (--count done, SIGINT, SIGTERM), retry what is\n"
	"                       queued with the backoff for at most SECS (default 10;\n"
	"                       0: one try each; a second signal stops at once)\n"
	"  -d, --dir DIR, -u, --owner USER, -a, --any-owner, --max-bytes N, --max-down N\n"
	"                       which segments, and the budget, as for pcpustat serve\n"
	"  -v, --verbose        say every push on stderr\n"
	"  -h, --help\n"
	"\n"
	"Connection failures, 429 and 5xx (OTLP: 502, 503, 504) are retried, after\n"
	"Retry-After when given; other statuses are not (logged). OTLP/gRPC retries\n"
	"CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS,\n"
	"and RESOURCE_EXHAUSTED when the receiver sent RetryInfo.\n"
	"SIGINT or SIGTERM: a last push, then exit (0: everything was delivered).\n"
	"A missing or unreadable password, token or CA file is refused at start (exit 2).\n";

/* A request waiting to be sent. */
struct queued {
	uint8_t *body;
	size_t len;
	unsigned tries; /* attempts that failed so far */
};

struct push_args {
	struct scrape_config cf;
	struct push_http_config http;
	struct push_label *labels;
	size_t nlabels;
	const char *job, *instance;
	int native, verbose;
	const char *compression; /* --compression: "gzip", "none", NULL: not given */
	const char *temporality; /* --temporality as given, NULL: not given */
	const char *delta_state; /* --delta-state FILE, or NULL */
	int delta;               /* OTLP delta temporality for counters and histograms */
	int given_timeout, given_ca, given_job, given_instance, given_interval; /* on the command line */
	const char *interval_from; /* where the interval came from, for -v */
	struct otel_env env; /* the OpenTelemetry environment (OTLP) */
	double interval, min_backoff, max_backoff;
	double drain; /* --drain: seconds to keep retrying the queue at exit */
	size_t queue_max;
	unsigned long count; /* 0: until a signal */
};

/* What the agent did, for the log and the exit status. */
struct push_stats {
	/* retried: requests sent again after a failed attempt; failed: the
	 * attempts that failed (connection or retryable status); denied: of
	 * the dropped, those whose credentials were refused (401, 403) */
	unsigned long collected, sent, retried, failed, dropped, denied, superseded, failed_collect;
};

static volatile sig_atomic_t stop_signal;
/* Signals received: a second one ends the drain at exit (drain()). */
static volatile sig_atomic_t nsignals;
/* The self-pipe: a signal wakes the agent's wait (wait_until()) whenever
 * it comes, without masking signals anywhere. */
static int wake[2] = { -1, -1 };

static void on_signal(int sig)
{
	int saved = errno;

	stop_signal = sig;
	nsignals = nsignals < 1000 ? nsignals + 1 : nsignals;
	if (write(wake[1], "x", 1) < 0) {
		/* full: a wake-up is pending anyway */
	}
	errno = saved;
}

static double now_mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t now_real_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Seconds in [lo, hi]: 0, or -1. */
static int parse_secs(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= lo && v <= hi))
		return -1;
	*out = v;
	return 0;
}

/* NAME=VALUE with a valid label name: added, 0; or -1. */
static int add_label(struct push_args *a, const char *name, const char *value)
{
	struct push_label *l = realloc(a->labels, (a->nlabels + 1) * sizeof *l);
	size_t i;

	if (!l)
		return -1;
	a->labels = l;
	for (i = 0; i < a->nlabels; i++)
		if (strcmp(l[i].name, name) == 0) {
			l[i].value = value; /* the last one given wins */
			return 0;
		}
	l[a->nlabels].name = name;
	l[a->nlabels].value = value;
	a->nlabels++;
	return 0;
}

static int valid_label_name(const char *s, int otlp)
{
	size_t i;

	if (!*s || (s[0] >= '0' && s[0] <= '9') || strncmp(s, "__", 2) == 0)
		return 0;
	for (i = 0; s[i]; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '_' || (otlp && (s[i] == '.' || s[i] == '-'))))
			return 0;
	return 1;
}

enum { O_RW = 256, O_OTLP, O_OTLP_GRPC, O_TIMEOUT, O_JOB, O_INSTANCE, O_LABEL, O_NATIVE, O_USER, O_PASSFILE,
       O_TOKENFILE, O_CAFILE, O_QUEUE, O_MINB, O_MAXB, O_COUNT, O_MAXBYTES, O_MAXDOWN, O_COMPRESSION, O_TEMPORALITY,
       O_DELTA_STATE, O_DRAIN };

static int bad(const char *msg)
{
	fprintf(stderr, "pcpustat push: %s\n", msg);
	return 2;
}

/* One option: -1 to go on, or the exit status. */
static int parse_option(int c, char *arg, struct push_args *a)
{
	unsigned uid;
	double v;
	char *eq, *end;

	switch (c) {
	case O_RW: case O_OTLP: case O_OTLP_GRPC:
		if (a->http.url)
			return bad("one --remote-write, --otlp or --otlp-grpc URL");
		a->http.url = arg;
		a->http.proto = c == O_RW ? PUSH_REMOTE_WRITE : PUSH_OTLP;
		a->http.grpc = c == O_OTLP_GRPC;
		break;
	case 'i':
		if (parse_secs(arg, 0.01, 86400, &a->interval) < 0)
			return bad("--interval wants seconds in [0.01, 86400]");
		a->given_interval = 1;
		a->interval_from = "--interval";
		break;
	case O_TIMEOUT:
		if (parse_secs(arg, 0.01, 3600, &a->http.timeout) < 0)
			return bad("--timeout wants seconds in [0.01, 3600]");
		a->given_timeout = 1;
		break;
	case O_DRAIN:
		if (parse_secs(arg, 0, 3600, &a->drain) < 0)
			return bad("--drain wants seconds in [0, 3600]");
		break;
	case O_MINB: case O_MAXB:
		if (parse_secs(arg, 0.01, 3600, &v) < 0)
			return bad("--min-backoff and --max-backoff want seconds in [0.01, 3600]");
		*(c == O_MINB ? &a->min_backoff : &a->max_backoff) = v;
		break;
	case O_JOB: a->job = arg; a->given_job = 1; break;
	case O_INSTANCE: a->instance = arg; a->given_instance = 1; break;
	case O_LABEL:
		if (!(eq = strchr(arg, '=')))
			return bad("--label wants NAME=VALUE");
		*eq = 0;
		if (!valid_label_name(arg, 1) || add_label(a, arg, eq + 1) < 0)
			return bad("--label: not a label name (letters, digits, _; OTLP also . and -)");
		break;
	case O_NATIVE: a->native = 1; break;
	case O_USER: a->http.basic_user = arg; break;
	case O_PASSFILE: a->http.basic_password_file = arg; break;
	case O_TOKENFILE: a->http.bearer_token_file = arg; break;
	case O_CAFILE: a->http.ca_file = arg; a->given_ca = 1; break;
	case O_QUEUE:
		a->queue_max = strtoul(arg, &end, 10);
		if (*end || !*arg || arg[0] == '-' || a->queue_max < 1 || a->queue_max > 1000)
			return bad("--queue wants 1..1000");
		break;
	case O_COUNT:
		a->count = strtoul(arg, &end, 10);
		if (*end || !*arg || arg[0] == '-' || a->count < 1)
			return bad("--count wants a positive number");
		break;
	case O_MAXBYTES:
		if (parse_bytes(arg, &a->cf.max_bytes) < 0)
			return bad("--max-bytes wants a size of at least 4K (e.g. 64M)");
		break;
	case O_COMPRESSION: a->compression = arg; break;
	case O_TEMPORALITY: a->temporality = arg; break;
	case O_DELTA_STATE: a->delta_state = arg; break;
	case O_MAXDOWN:
		a->cf.max_down = strtoul(arg, &end, 10);
		if (*end || !*arg || arg[0] == '-' || a->cf.max_down > 1000000)
			return bad("--max-down wants 0..1000000");
		break;
	case 'd': a->cf.ropt.dir = arg; break;
	case 'u':
		if (parse_user(arg, &uid) < 0)
			return bad("no such user");
		a->cf.ropt.flags = (a->cf.ropt.flags & ~(unsigned)PCPU_READER_ANY_OWNER) | PCPU_READER_OWNER;
		a->cf.ropt.owner = (uid_t)uid;
		break;
	case 'a': a->cf.ropt.flags |= PCPU_READER_ANY_OWNER; break;
	case 'v': a->http.verbose = a->verbose; a->verbose = 1; break; /* -vv: libcurl's too */
	case 'h':
		fputs(push_usage, stdout);
		return 0;
	default:
		fputs("Try 'pcpustat push --help'.\n", stderr);
		return 2;
	}
	return -1;
}

/* The command line's consistency, and the job and instance labels. */
/* The OpenTelemetry environment under the command line (push_env.c):
 * what the options did not say. -1 (after saying why) for exit 2. */
static int otel_env_apply(struct push_args *a)
{
	const struct otel_env *e = &a->env;
	size_t i, k;

	if (!a->given_timeout && e->timeout > 0)
		a->http.timeout = e->timeout;
	if (!a->given_interval && e->interval > 0) {
		a->interval = e->interval;
		a->interval_from = "OTEL_METRIC_EXPORT_INTERVAL";
	}
	if (!a->given_ca && e->certificate)
		a->http.ca_file = e->certificate;
	a->http.headers = e->headers;
	a->http.nheaders = e->nheaders;
	/* service.name: --job, else OTEL_SERVICE_NAME, else the one in
	 * OTEL_RESOURCE_ATTRIBUTES, else the default. */
	if (!a->given_job && e->service_name)
		a->job = e->service_name;
	for (i = 0; i < e->nattrs; i++) {
		const char *n = e->attrs[i].name;

		if (!valid_label_name(n, 1)) {
			fprintf(stderr, "pcpustat push: OTEL_RESOURCE_ATTRIBUTES: \"%.60s\" is not an attribute "
				"name (letters, digits, _, . and -)\n", n);
			return -1;
		}
		if (strcmp(n, "service.name") == 0) {
			if (!a->given_job && !e->service_name)
				a->job = e->attrs[i].value;
			continue;
		}
		if (strcmp(n, "service.instance.id") == 0 && a->given_instance)
			continue;
		for (k = 0; k < a->nlabels; k++) /* a --label of that name wins */
			if (strcmp(a->labels[k].name, n) == 0)
				break;
		if (k == a->nlabels && add_label(a, n, e->attrs[i].value) < 0) {
			fprintf(stderr, "pcpustat push: out of memory\n");
			return -1;
		}
	}
	return 0;
}

static int check_args(struct push_args *a, int argc, char **argv)
{
	static char host[256];
	int otlp = a->http.proto == PUSH_OTLP;
	size_t i;

	/* Read whatever the protocol; it matters (a malformed value is an
	 * error) only where the agent speaks OTLP. */
	if (otel_env_read(&a->env) < 0 && (otlp || !a->http.url))
		return bad(a->env.err);
	if (!a->http.url && a->env.endpoint) { /* OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT */
		a->http.url = a->env.endpoint;
		a->http.proto = PUSH_OTLP;
		a->http.grpc = a->env.grpc; /* OTEL_EXPORTER_OTLP_(METRICS_)PROTOCOL */
		otlp = 1;
	}
	if (!a->http.url)
		return bad("--remote-write URL, --otlp URL or --otlp-grpc URL is required (or, for OTLP, "
			   "OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)");
	if (a->http.grpc && strncasecmp(a->http.url, "http://", 7) != 0 &&
	    strncasecmp(a->http.url, "https://", 8) != 0)
		return bad("an OTLP/gRPC URL starts with http:// (cleartext HTTP/2) or https://");
	if (otlp && otel_env_apply(a) < 0)
		return 2;
	if (!!a->http.basic_user != !!a->http.basic_password_file)
		return bad("--basic-auth-user and --basic-auth-password-file go together");
	if (a->http.basic_user && a->http.bearer_token_file)
		return bad("basic authentication or a bearer token, not both");
	{
		/* A secret file that cannot be read now is a mistake in the
		 * command, not a receiver's trouble to retry: said at start.
		 * (Read again at every push, so that it can be rotated.) */
		const char *secret = a->http.basic_password_file ? a->http.basic_password_file
								 : a->http.bearer_token_file;
		char why[300];

		if (secret && push_secret_check(secret, why, sizeof why) < 0) {
			fprintf(stderr, "pcpustat push: %s\n", why);
			return 2;
		}
		/* The CA file likewise: one that cannot be read would fail
		 * every TLS handshake, retried forever. */
		if (a->http.ca_file && push_ca_check(a->http.ca_file, why, sizeof why) < 0) {
			fprintf(stderr, "pcpustat push: %s: %s\n", a->given_ca ? "--ca-file" : a->env.certificate_var,
				why);
			return 2;
		}
	}
	if (a->max_backoff < a->min_backoff)
		a->max_backoff = a->min_backoff;
	{
		/* OTLP's compression: the option, else the specification's
		 * environment (the metrics one first), else none. */
		const char *c = a->compression, *from = "--compression";

		if (!c && otlp && a->env.compression)
			c = a->env.compression, from = a->env.compression_var;
		if (c && strcmp(c, "gzip") != 0 && strcmp(c, "none") != 0) {
			fprintf(stderr, "pcpustat push: %s: \"%s\" is neither gzip nor none\n", from, c);
			return 2;
		}
		if (c && !otlp && strcmp(c, "gzip") == 0)
			return bad("--compression gzip is for OTLP (remote write bodies are snappy-compressed)");
		a->http.gzip = c && strcmp(c, "gzip") == 0;
	}
	{
		/* Temporality, as the OTLP exporter specification says: delta
		 * puts Counter, asynchronous Counter and Histogram in delta,
		 * lowmemory Counter and Histogram, both leave UpDownCounters
		 * cumulative. pcpu's counters are (synchronous) Counters, its
		 * histograms Histograms, and its gauges are gauges, so delta and
		 * lowmemory mean the same here. The option, else the
		 * environment (OTLP only), else cumulative; any case. */
		const char *t = a->temporality, *from = "--temporality";

		if (!t && otlp && a->env.temporality)
			t = a->env.temporality, from = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE";
		if (t && strcasecmp(t, "cumulative") != 0 && strcasecmp(t, "delta") != 0 &&
		    strcasecmp(t, "lowmemory") != 0) {
			fprintf(stderr, "pcpustat push: %s: \"%.40s\" is not cumulative, delta or lowmemory\n", from, t);
			return 2;
		}
		a->delta = t && strcasecmp(t, "cumulative") != 0;
		if (a->delta && !otlp)
			return bad("--temporality delta is for OTLP (remote write is cumulative)");
		if (a->delta_state && !a->delta)
			return bad("--delta-state goes with delta temporality");
	}
	if (!a->instance) {
		if (gethostname(host, sizeof host - 1) < 0 || !host[0])
			snprintf(host, sizeof host, "localhost");
		a->instance = host;
	}
	for (i = 0; i < a->nlabels; i++)
		if (!otlp && !valid_label_name(a->labels[i].name, 0))
			return bad("--label: a Prometheus label name has letters, digits and _ only");
	/* --label given explicitly wins over --job and --instance. */
	for (i = 0; i < a->nlabels; i++)
		if (strcmp(a->labels[i].name, otlp ? "service.name" : "job") == 0)
			a->job = NULL;
		else if (strcmp(a->labels[i].name, otlp ? "service.instance.id" : "instance") == 0)
			a->instance = NULL;
	if ((a->job && *a->job && add_label(a, otlp ? "service.name" : "job", a->job) < 0) ||
	    (a->instance && *a->instance && add_label(a, otlp ? "service.instance.id" : "instance", a->instance) < 0))
		return bad("out of memory");
	if (check_segment_args("pcpustat push", argv + optind, (size_t)(argc - optind)) < 0)
		return 2;
	a->cf.targets = argv + optind;
	a->cf.ntargets = (size_t)(argc - optind);
	return -1;
}

static int parse_args(int argc, char **argv, struct push_args *a)
{
	static const struct option longopts[] = {
		{ "remote-write", required_argument, NULL, O_RW },
		{ "otlp", required_argument, NULL, O_OTLP },
		{ "otlp-grpc", required_argument, NULL, O_OTLP_GRPC },
		{ "interval", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "job", required_argument, NULL, O_JOB },
		{ "instance", required_argument, NULL, O_INSTANCE },
		{ "label", required_argument, NULL, O_LABEL },
		{ "native-histograms", no_argument, NULL, O_NATIVE },
		{ "basic-auth-user", required_argument, NULL, O_USER },
		{ "basic-auth-password-file", required_argument, NULL, O_PASSFILE },
		{ "bearer-token-file", required_argument, NULL, O_TOKENFILE },
		{ "ca-file", required_argument, NULL, O_CAFILE },
		{ "queue", required_argument, NULL, O_QUEUE },
		{ "min-backoff", required_argument, NULL, O_MINB },
		{ "max-backoff", required_argument, NULL, O_MAXB },
		{ "count", required_argument, NULL, O_COUNT },
		{ "max-bytes", required_argument, NULL, O_MAXBYTES },
		{ "max-down", required_argument, NULL, O_MAXDOWN },
		{ "compression", required_argument, NULL, O_COMPRESSION },
		{ "temporality", required_argument, NULL, O_TEMPORALITY },
		{ "delta-state", required_argument, NULL, O_DELTA_STATE },
		{ "drain", required_argument, NULL, O_DRAIN },
		{ "dir", required_argument, NULL, 'd' },
		{ "owner", required_argument, NULL, 'u' },
		{ "any-owner", no_argument, NULL, 'a' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, rc;

	a->interval = 15;
	a->interval_from = "the default";
	a->http.timeout = 10;
	a->min_backoff = 0.5;
	a->max_backoff = 30;
	a->drain = 10;
	a->queue_max = 4;
	a->job = "pcpustat";
	a->cf.max_bytes = (size_t)256 << 20;
	a->cf.max_down = 16;
	a->cf.who = "pcpustat push";
	optind = 1;
	argv[0] = (char *)"pcpustat push";
	while ((c = getopt_long(argc, argv, "i:d:u:avh", longopts, NULL)) != -1)
		if ((rc = parse_option(c, optarg, a)) >= 0)
			return rc;
	return check_args(a, argc, argv);
}

/* The agent: its queue (a ring of queue_max requests), the encoders'
 * scratch, the retry state. */
struct agent {
	const struct push_args *a;
	struct scrape_state st;
	struct arena arena;
	struct push_http *http;
	struct queued *q;
	size_t qhead, qn;
	struct push_stats s;
	double backoff, retry_at;
	int failing;
	uint64_t start_ns;
	size_t size_hint; /* the previous request's, for rw_encode() */
	/* delta temporality: the acknowledged baseline; the queue then holds
	 * at most one request, whose values delta_acked() makes the base */
	struct push_delta *delta;
};

/* Queues a request, dropping the oldest when the queue is full (a newer
 * request carries every count the older one did). */
static void enqueue(struct agent *ag, uint8_t *body, size_t len)
{
	struct queued *slot;

	if (ag->qn == ag->a->queue_max) {
		free(ag->q[ag->qhead].body);
		ag->qhead = (ag->qhead + 1) % ag->a->queue_max;
		ag->qn--;
		ag->s.superseded++;
	}
	slot = &ag->q[(ag->qhead + ag->qn) % ag->a->queue_max];
	slot->body = body;
	slot->len = len;
	slot->tries = 0;
	ag->qn++;
}

static void dequeue(struct agent *ag)
{
	free(ag->q[ag->qhead].body);
	ag->q[ag->qhead].body = NULL;
	ag->qhead = (ag->qhead + 1) % ag->a->queue_max;
	ag->qn--;
}

/* Reads the segments (as a scrape) and queues their encoding. */
static void collect(struct agent *ag)
{
	const struct push_args *a = ag->a;
	struct scrape_hold *hold;
	struct scrape_result res;
	const struct pcpu_snapshot *snap = scrape_collect(&a->cf, &ag->st, &hold, &res);
	struct push_encode e = { a->labels, a->nlabels, a->native, 0, 0, ag->start_ns, scrape_created_ns, hold, 0,
				 &ag->size_hint, NULL };
	char err[200];
	uint8_t *body;
	size_t len, nfam;
	int rc;

	ag->s.collected++;
	if (!snap) {
		ag->s.failed_collect++;
		fprintf(stderr, "pcpustat push: reading the segments failed: %s\n", res.msg);
		return;
	}
	e.now_ns = now_real_ns();
	e.now_ms = (int64_t)(e.now_ns / 1000000u);
	e.max_bytes = res.len; /* what the collection left of --max-bytes */
	nfam = snap->nfamilies;
	if (ag->delta) {
		/* A request not yet acknowledged is superseded: the new one's
		 * deltas are taken from the same acknowledged base, so they
		 * cover everything it carried (sending both would count it
		 * twice). */
		while (ag->qn) {
			dequeue(ag);
			ag->s.superseded++;
		}
		delta_discard(ag->delta);
		e.delta = ag->delta;
		if (delta_begin(ag->delta, snap, e.now_ns) < 0) {
			ag->s.failed_collect++;
			fprintf(stderr, "pcpustat push: out of memory for the delta baseline\n");
			scrape_release(hold);
			return;
		}
	}
	rc = a->http.proto == PUSH_REMOTE_WRITE ? rw_encode(snap, &e, &ag->arena, &body, &len, err, sizeof err)
						: otlp_encode(snap, &e, &ag->arena, &body, &len, err, sizeof err);
	if (ag->delta && rc == 0 && delta_end(ag->delta) < 0) {
		free(body);
		snprintf(err, sizeof err, "out of memory for the delta baseline");
		rc = -1;
	}
	if (ag->delta && rc == 0 && a->delta_state && delta_mark_needed(ag->delta) &&
	    delta_mark(ag->delta, a->delta_state, err, sizeof err) < 0) {
		/* The running file must list a start time before a series of
		 * it is sent (push_delta.c): not sent until it can be written
		 * (the baseline stays, so nothing is lost meanwhile). */
		free(body);
		fprintf(stderr, "pcpustat push: --delta-state: %s\n", err);
		snprintf(err, sizeof err, "--delta-state cannot be written: this collection is not sent (the "
			 "next covers it)");
		rc = -1;
	}
	if (ag->delta && rc < 0)
		delta_discard(ag->delta);
	arena_reset(&ag->arena);
	scrape_release(hold);
	if (rc < 0) {
		ag->s.failed_collect++;
		fprintf(stderr, "pcpustat push: %s\n", err);
		return;
	}
	if (a->http.gzip) {
		size_t zlen;
		uint8_t *z = (uint8_t *)gzip_body(body, len, 1, &zlen);

		free(body);
		if (!z) {
			ag->s.failed_collect++;
			fprintf(stderr, "pcpustat push: out of memory compressing a request\n");
			return;
		}
		if (a->verbose)
			fprintf(stderr, "pcpustat push: %zu bytes gzipped to %zu\n", len, zlen);
		body = z;
		len = zlen;
	}
	if (a->verbose)
		fprintf(stderr, "pcpustat push: %zu families, %zu bytes to send\n", nfam, len);
	enqueue(ag, body, len);
}

/* What a 401 or 403 asks of the user: the credentials configured, or that
 * none are. */
static const char *denied_hint(const struct push_args *a)
{
	if (a->http.basic_password_file)
		return "the next push reads the password file again and carries the same cumulative values";
	if (a->http.bearer_token_file)
		return "the next push reads the token file again and carries the same cumulative values";
	if (a->http.nheaders)
		return "no password or token file is configured: check the headers of "
		       "OTEL_EXPORTER_OTLP_[METRICS_]HEADERS (Authorization, an API key)";
	return "no credentials are configured: give --basic-auth-user with --basic-auth-password-file, "
	       "or --bearer-token-file";
}

/* Sends the queue, oldest first, until it is empty or a request must wait
 * (retry later: after the answer's Retry-After, else the backoff, which
 * doubles). `final`: draining before exit, until the monotonic time
 * `deadline` (drain()). */
static void deliver(struct agent *ag, double now, int final, double deadline)
{
	const struct push_args *a = ag->a;
	char why[400];

	while (ag->qn && now >= ag->retry_at && (final || !stop_signal)) {
		struct queued *q = &ag->q[ag->qhead];
		struct push_answer ans;
		enum push_outcome o;
		double delay;

		if (q->tries)
			ag->s.retried++;
		o = push_http_post(ag->http, q->body, q->len, why, sizeof why, &ans);
		if (o == PUSH_RETRY) {
			q->tries++;
			ag->s.failed++;
			ag->backoff = ag->backoff ? fmin(ag->backoff * 2, a->max_backoff) : a->min_backoff;
			delay = ans.retry_after >= 0 ? ans.retry_after : ag->backoff;
			ag->retry_at = now_mono() + delay;
			if (final && ag->retry_at > deadline)
				fprintf(stderr, "pcpustat push: %s: %s; not delivered before exit (%zu queued; "
					"--drain %g s%s)\n", a->http.url, why, ag->qn, a->drain,
					ans.retry_after >= 0 ? ", shorter than its Retry-After" : "");
			else if (final)
				fprintf(stderr, "pcpustat push: %s: %s; retrying in %.3g s%s before exit (%zu queued, "
					"--drain %g s)\n", a->http.url, why, delay,
					ans.retry_after >= 0 ? " (Retry-After)" : "", ag->qn, a->drain);
			else if (!ag->failing || a->verbose)
				fprintf(stderr, "pcpustat push: %s: %s; retrying in %.3g s%s (%zu queued, at most %zu)\n",
					a->http.url, why, delay, ans.retry_after >= 0 ? " (Retry-After)" : "", ag->qn,
					a->queue_max);
			ag->failing = 1;
			return;
		}
		if (ag->delta) /* the baseline advances only on a 2xx */
			o == PUSH_SENT ? delta_acked(ag->delta) : delta_discard(ag->delta);
		if (o == PUSH_DENIED) {
			ag->s.dropped++;
			ag->s.denied++;
			fprintf(stderr, "pcpustat push: %s: the receiver refused the credentials (%s); dropped, not "
				"retried (%s)\n", a->http.url, why, denied_hint(a));
		} else if (o == PUSH_DROP) {
			ag->s.dropped++;
			fprintf(stderr, "pcpustat push: %s: %s; dropped, not retried (a status %s does not retry: "
				"the receiver refuses this request itself; the next carries the same cumulative "
				"values)\n", a->http.url, why,
				a->http.grpc ? "OTLP/gRPC" : a->http.proto == PUSH_OTLP ? "OTLP" : "remote write");
		} else {
			ag->s.sent++;
			if (ans.rejected)
				fprintf(stderr, "pcpustat push: %s: partial success: the receiver rejected %lld data "
					"point(s)%s%s%s\n", a->http.url, (long long)ans.rejected,
					ans.rejected_why[0] ? ": " : "", ans.rejected_why,
					ag->delta ? " (not sent again: the request was acknowledged, so the delta "
						    "baseline advanced; the rejected increases are lost)" : "");
			if (ag->failing)
				fprintf(stderr, "pcpustat push: %s: delivering again (%lu failed attempts so far)\n",
					a->http.url, ag->s.failed);
			else if (a->verbose)
				fprintf(stderr, "pcpustat push: %s: %s\n", a->http.url, why);
		}
		ag->failing = 0;
		ag->backoff = 0;
		ag->retry_at = 0;
		dequeue(ag);
		now = now_mono();
	}
}

/* Sleeps until `until` (monotonic seconds) or a signal beyond the
 * `seen` first ones: a signal that came before the wait left a byte in the
 * pipe, so none is missed. */
static void wait_until(double until, sig_atomic_t seen)
{
	struct pollfd p = { wake[0], POLLIN, 0 };
	char buf[16];
	double d;

	while ((d = until - now_mono()) > 0 && nsignals == seen)
		if (poll(&p, 1, (int)ceil(d * 1000)) > 0)
			while (read(wake[0], buf, sizeof buf) > 0)
				;
}

/*
 * Before exit (--count done, or SIGINT or SIGTERM): what is queued is
 * delivered, retried with the usual backoff (and Retry-After) for at most
 * --drain seconds. A request whose next try would fall after that is given
 * up (said, and counted undelivered: exit 1); so is everything after a
 * second signal, which ends the drain at once. --drain 0: one try each.
 */
static void drain(struct agent *ag)
{
	const struct push_args *a = ag->a;
	double deadline = now_mono() + a->drain;
	sig_atomic_t seen = nsignals;

	ag->retry_at = 0; /* the first try at once, whatever the backoff was */
	while (ag->qn) {
		deliver(ag, now_mono(), 1, deadline);
		if (!ag->qn || ag->retry_at > deadline)
			break;
		wait_until(ag->retry_at, seen);
		if (nsignals != seen) {
			fprintf(stderr, "pcpustat push: %s: a second signal: %zu request(s) not delivered\n",
				a->http.url, ag->qn);
			break;
		}
	}
}

static int run(struct agent *ag)
{
	const struct push_args *a = ag->a;
	double next = now_mono();

	while (!stop_signal) {
		double now = now_mono();

		if (now >= next) {
			collect(ag);
			next += a->interval;
			if (next <= now) /* behind (a slow receiver): the next tick to come */
				next = now + a->interval - fmod(now - next, a->interval);
			if (a->count && ag->s.collected >= a->count)
				break;
		}
		deliver(ag, now_mono(), 0, 0);
		wait_until(ag->qn && ag->retry_at < next ? ag->retry_at : next, 0);
	}
	if (stop_signal)
		collect(ag); /* the last values before stopping */
	drain(ag);
	fprintf(stderr, "pcpustat push: %lu collected, %lu sent, %lu failed attempts, %lu retries (requests "
		"sent again), %lu dropped (%lu for refused credentials), %lu superseded in the queue, %lu "
		"collections failed, %zu undelivered\n",
		ag->s.collected, ag->s.sent, ag->s.failed, ag->s.retried, ag->s.dropped, ag->s.denied,
		ag->s.superseded, ag->s.failed_collect, ag->qn);
	return ag->qn || ag->s.dropped || ag->s.failed_collect ? 1 : 0;
}

/* --delta-state at start (push_delta.c says the file's two forms): the
 * previous agent's baseline, or the start times of one that did not exit
 * cleanly, or nothing (no agent sent anything yet: every series goes
 * whole); then the file is replaced by this agent's running form, so that
 * if it dies the next knows what it may have sent. A file that is not a
 * state file is said and replaced: the agent starts over (its first
 * collection sends no point). 0, or -1 (the file cannot be written). */
static int load_state(struct agent *ag)
{
	const char *path = ag->a->delta_state;
	char err[300];
	int rc = delta_load(ag->delta, path, err, sizeof err);

	if (rc < 0)
		fprintf(stderr, "pcpustat push: --delta-state: %s; starting over (the counts made before the "
			"first collection are not sent)\n", err);
	else if (rc == 0)
		delta_no_priming(ag->delta);
	if (rc == 2)
		fprintf(stderr, "pcpustat push: --delta-state: %s was left by an agent that did not exit cleanly: "
			"the series of segments it had seen are taken up from their first collection (what was "
			"counted after its last acknowledged push is not sent); other segments are sent whole\n",
			path);
	else if (rc == 1 && ag->a->verbose)
		fprintf(stderr, "pcpustat push: continuing from the delta baseline of %zu series in %s\n",
			delta_series_kept(ag->delta), path);
	else if (rc == 0 && ag->a->verbose)
		fprintf(stderr, "pcpustat push: no %s yet: every series is sent whole\n", path);
	if (delta_mark(ag->delta, path, err, sizeof err) < 0) {
		fprintf(stderr, "pcpustat push: --delta-state: %s\n", err);
		return -1;
	}
	return 0;
}

int push_main(int argc, char **argv, const struct pcpu_reader_options *ropt)
{
	struct push_args a;
	struct agent ag;
	struct sigaction sa;
	char err[200];
	int rc;

	memset(&a, 0, sizeof a);
	memset(&ag, 0, sizeof ag);
	a.cf.ropt = *ropt;
	if ((rc = parse_args(argc, argv, &a)) >= 0)
		goto out;
	ag.a = &a;
	ag.start_ns = now_real_ns();
	ag.q = calloc(a.queue_max, sizeof *ag.q);
	if (a.delta && !(ag.delta = delta_new())) {
		fprintf(stderr, "pcpustat push: out of memory\n");
		rc = 1;
		goto out;
	}
	if (a.delta_state && load_state(&ag) < 0) {
		rc = 1;
		goto out;
	}
	if (!ag.q || !(ag.http = push_http_new(&a.http, err, sizeof err))) {
		fprintf(stderr, "pcpustat push: %s\n", ag.q ? err : "out of memory");
		rc = 1;
		goto out;
	}
	if (a.verbose)
		fprintf(stderr, "pcpustat push: to %s every %g s (%s)%s\n", a.http.url, a.interval, a.interval_from,
			a.count ? "" : " until SIGINT or SIGTERM");
	scrape_memory_setup();
	if (pipe2(wake, O_NONBLOCK | O_CLOEXEC) < 0) {
		fprintf(stderr, "pcpustat push: pipe: %s\n", strerror(errno));
		rc = 1;
		goto out;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART; /* a request in flight goes on; the wait ends by the pipe */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = run(&ag);
	if (a.delta_state) {
		/* The acknowledged baseline, for the next agent (the pending one
		 * of a request not delivered is not: its counts go again). */
		if (delta_save(ag.delta, a.delta_state, err, sizeof err) < 0) {
			fprintf(stderr, "pcpustat push: --delta-state: %s; the next agent starts over\n", err);
			rc = 1;
		} else if (a.verbose) {
			fprintf(stderr, "pcpustat push: delta baseline of %zu series saved in %s\n",
				delta_series_kept(ag.delta), a.delta_state);
		}
	}
out:
	if (wake[0] >= 0) {
		close(wake[0]);
		close(wake[1]);
	}
	while (ag.q && ag.qn)
		dequeue(&ag);
	free(ag.q);
	push_http_free(ag.http);
	delta_free(ag.delta);
	arena_free(&ag.arena);
	scrape_state_free(&ag.st);
	free(a.labels);
	otel_env_free(&a.env);
	return rc;
}
