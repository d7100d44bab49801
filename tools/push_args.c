/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat push`'s command line and environment: the options (with their
 * usage text), the OpenTelemetry variables they override, and the checks
 * made at start -- a receiver, label names, files that must be readable
 * (password, token, CA: refused at start, exit 2, never at the first push).
 * The agent that then runs is push.c.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

int push_parse_args(int argc, char **argv, struct push_args *a)
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
