/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat push`'s cost beside the text exposition of the same registry
 * (issue 27's target: encoding and sending 10^5 series within 1.5x the
 * text exposition).
 *
 *   pcpu_bench_push [--series N] [--rounds R]
 *
 * The registry: N series (10^5 by default) of a server's mix -- counters
 * 70% (flow_packets_total{flow}, http_requests_total{method,code,handler}),
 * gauges 29% (queue_depth{queue}, cache_fill_ratio{cache} scaled 10^-3),
 * histograms 1% (rpc_duration_seconds 11 explicit bounds 60%,
 * db_query_duration_seconds log-linear p = 7 30%, request_duration_seconds
 * exponential schema 3 10%; 32 random log-uniform latencies each). Its
 * snapshot is merged with pcpu_segment and pcpu_pid labels, as serve and
 * push see a segment, and the same merged snapshot goes to every variant:
 *
 *   text         pcpu_snapshot_write(PROMETHEUS): what a scrape writes
 *   text+gzip    the same, gzip-compressed (zlib level 6): what serve sends
 *   remote write rw_encode() (protobuf, snappy) and the POST (libcurl) to a
 *                loopback sink that reads it and answers 204
 *   remote write+native  the same with --native-histograms
 *   OTLP         otlp_encode() and the POST
 *
 * Method: every round runs each variant once, in a rotated order; the
 * figure is the median over rounds of the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID: the agent's own work -- encoding, compression,
 * libcurl; the sink runs in another thread), with min and max, and the
 * wall time beside it. The ratio is each median over text's.
 */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/pcpu.h>

#include "push.h"

#define CHECK(x)                                                                                 \
	do {                                                                                     \
		if (!(x)) {                                                                      \
			fprintf(stderr, "pcpu_bench_push: %s:%d: %s failed: %s\n", __FILE__,    \
				__LINE__, #x, strerror(errno));                                  \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

static uint64_t clock_ns(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---- the loopback sink: reads each request whole, answers 204 ---- */

/* One connection: requests one after the other (keep-alive). */
static void *sink_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static __thread char buf[1 << 16];

	{
		for (;;) {
			size_t have = 0, want;
			char *end, *cl;
			ssize_t n;

			while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
				if (have == sizeof buf || (n = read(fd, buf + have, sizeof buf - have)) <= 0)
					goto closed;
				have += (size_t)n;
			}
			cl = memmem(buf, (size_t)(end - buf), "Content-Length: ", 16);
			want = cl ? strtoul(cl + 16, NULL, 10) : 0;
			have -= (size_t)(end + 4 - buf);
			while (have < want) {
				if ((n = read(fd, buf, sizeof buf)) <= 0)
					goto closed;
				have += (size_t)n;
			}
			if (write(fd, "HTTP/1.1 204 No Content\r\n\r\n", 27) != 27)
				break;
		}
closed:
		close(fd);
	}
	return NULL;
}

static void *sink(void *arg)
{
	int lfd = (int)(intptr_t)arg;

	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		pthread_t t;

		if (fd >= 0 && pthread_create(&t, NULL, sink_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else if (fd >= 0)
			close(fd);
	}
	return NULL;
}

static int start_sink(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	pthread_t t;

	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 8) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&a, &al) == 0);
	CHECK(pthread_create(&t, NULL, sink, (void *)(intptr_t)fd) == 0);
	return ntohs(a.sin_port);
}

/* ---- the registry ---- */

static uint64_t rng = 88172645463325252ull;

static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Log-uniform from 10 us to 10 s, in ns. */
static int64_t latency(void)
{
	double u = (double)(xorshift() >> 11) / 9007199254740992.0;

	return (int64_t)(10000.0 * pow(10, 6 * u));
}

struct mix {
	const char *name, *help;
	enum pcpu_metric_type type;
	unsigned nlabels;
	const char *labels[3];
	unsigned permille; /* of the series */
	int scale;
	const struct pcpu_histogram_layout *layout;
};

static void fill(pcpu_registry_t *reg, unsigned nseries)
{
	static const int64_t b11[] = { 5000000, 10000000, 25000000, 50000000, 100000000, 250000000,
				       500000000, 1000000000, 2500000000, 5000000000, 10000000000 };
	static const struct pcpu_histogram_layout ex = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = b11,
							 .nbounds = 11 };
	static const struct pcpu_histogram_layout ll = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 7,
							 .max_value = (int64_t)60 * 1000000000 };
	static const struct pcpu_histogram_layout xp = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3 };
	static const char *const methods[] = { "GET", "POST", "PUT", "DELETE" };
	static const char *const codes[] = { "200", "201", "204", "301", "404", "500", "503" };
	static const struct mix mix[] = {
		{ "flow_packets", "Packets per flow.", PCPU_METRIC_COUNTER, 1, { "flow" }, 500, 0, NULL },
		{ "http_requests", "HTTP requests.", PCPU_METRIC_COUNTER, 3, { "method", "code", "handler" }, 200, 0, NULL },
		{ "queue_depth", "Items waiting.", PCPU_METRIC_GAUGE, 1, { "queue" }, 200, 0, NULL },
		{ "cache_fill_ratio", "Cache in use.", PCPU_METRIC_GAUGE, 1, { "cache" }, 90, -3, NULL },
		{ "rpc_duration_seconds", "RPC latency.", PCPU_METRIC_HISTOGRAM, 1, { "method" }, 6, -9, &ex },
		{ "db_query_duration_seconds", "Query latency.", PCPU_METRIC_HISTOGRAM, 1, { "table" }, 3, -9, &ll },
		{ "request_duration_seconds", "Request latency.", PCPU_METRIC_HISTOGRAM, 1, { "route" }, 1, -9, &xp },
	};
	unsigned k, i, j;

	for (k = 0; k < sizeof mix / sizeof mix[0]; k++) {
		const struct mix *m = &mix[k];
		unsigned n = (unsigned)((uint64_t)nseries * m->permille / 1000);
		struct pcpu_family_desc d;
		pcpu_family_t *f;

		memset(&d, 0, sizeof d);
		d.name = m->name;
		d.help = m->help;
		d.type = m->type;
		d.nlabels = m->nlabels;
		d.label_names = m->labels;
		d.scale_exp10 = m->scale;
		d.histogram = m->layout;
		d.unit = m->type == PCPU_METRIC_HISTOGRAM ? "seconds" : NULL;
		CHECK((f = pcpu_registry_family(reg, &d)));
		for (i = 0; i < n; i++) {
			char v0[48], v2[48];
			const char *vals[3] = { v0, codes[i % 7], v2 };

			if (m->nlabels == 3) {
				vals[0] = methods[i % 4];
				snprintf(v2, sizeof v2, "/api/v1/resource%u", i / 28);
			} else if (k == 0) {
				snprintf(v0, sizeof v0, "10.0.%u.%u:%u", (i >> 8) & 255, i & 255, 1024 + i % 50000);
			} else {
				snprintf(v0, sizeof v0, "%s_%u", m->labels[0], i);
			}
			if (m->type == PCPU_METRIC_COUNTER) {
				pcpu_counter_t c = pcpu_family_counter(f, vals);

				CHECK(c);
				pcpu_counter_add(c, xorshift() % 100000000);
			} else if (m->type == PCPU_METRIC_GAUGE) {
				pcpu_gauge_t g = pcpu_family_gauge(f, vals);

				CHECK(g);
				pcpu_gauge_set(g, (int64_t)(xorshift() % 1001));
			} else {
				pcpu_histogram_t *h = pcpu_family_histogram(f, vals);

				CHECK(h);
				for (j = 0; j < 32; j++)
					pcpu_histogram_record(h, latency());
			}
		}
	}
}

/* ---- the variants ---- */

enum { V_TEXT, V_GZIP, V_RW, V_RW_NATIVE, V_OTLP, NV };
static const char *const vname[NV] = { "text 0.0.4", "text 0.0.4 + gzip", "remote write (+ send)",
				       "remote write native (+ send)", "OTLP (+ send)" };

struct ctx {
	const struct pcpu_snapshot *snap;
	struct push_http *rw, *otlp;
	struct arena arena;
	struct push_label labels[2];
	size_t size_hint; /* as the agent keeps it */
};

static size_t run_variant(struct ctx *c, int v)
{
	struct push_encode e = { c->labels, 2, v == V_RW_NATIVE, 0, 0, 0, NULL, NULL, SIZE_MAX, &c->size_hint, NULL };
	char err[200], why[400];
	struct push_answer ans;
	size_t len = 0;
	uint8_t *body;
	char *text;

	if (v == V_TEXT || v == V_GZIP) {
		CHECK(pcpu_snapshot_write(c->snap, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
		if (v == V_GZIP) {
			/* As a scraper accepting gzip gets it, at zlib's default
			 * level (the figures' reference; serve itself uses 1). */
			size_t zlen;
			char *z = gzip_body(text, len, 6, &zlen);

			CHECK(z != NULL);
			len = zlen;
			free(z);
		}
		free(text);
		return len;
	}
	e.now_ns = clock_ns(CLOCK_REALTIME);
	e.now_ms = (int64_t)(e.now_ns / 1000000);
	e.start_ns = e.now_ns;
	if (v == V_OTLP)
		CHECK(otlp_encode(c->snap, &e, &c->arena, &body, &len, err, sizeof err) == 0);
	else
		CHECK(rw_encode(c->snap, &e, &c->arena, &body, &len, err, sizeof err) == 0);
	arena_reset(&c->arena);
	if (push_http_post(v == V_OTLP ? c->otlp : c->rw, body, len, why, sizeof why, &ans) != PUSH_SENT) {
		fprintf(stderr, "pcpu_bench_push: the sink answered %s\n", why);
		exit(1);
	}
	free(body);
	return len;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const char *const extra[] = { "pcpu_segment", "pcpu_pid" };
	static const char *const extra_v[] = { "bench", "4242" };
	unsigned nseries = 100000, rounds = 11, r, v, i;
	int only = -1;
	double cpu[NV][64], wall[NV][64];
	size_t bytes[NV] = { 0 }, total = 0;
	struct push_http_config hrw = { .proto = PUSH_REMOTE_WRITE, .timeout = 30 };
	struct push_http_config hotlp = { .proto = PUSH_OTLP, .timeout = 30 };
	char url_rw[64], url_otlp[64], err[200];
	pcpu_snapshot_merge_t *m;
	struct pcpu_snapshot *s;
	struct ctx c;
	int port;

	for (i = 1; i < (unsigned)argc; i++) {
		if (!strcmp(argv[i], "--series") && i + 1 < (unsigned)argc)
			nseries = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < (unsigned)argc)
			rounds = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--only") && i + 1 < (unsigned)argc)
			only = atoi(argv[++i]); /* one variant (0..4), for a profiler */
		else {
			fputs("usage: pcpu_bench_push [--series N] [--rounds R (1..64)] [--only VARIANT]\n", stderr);
			return 2;
		}
	}
	if (rounds < 1 || rounds > 64 || nseries < 1000) {
		fputs("pcpu_bench_push: --rounds 1..64, --series >= 1000\n", stderr);
		return 2;
	}
	memset(&c, 0, sizeof c);
	c.labels[0] = (struct push_label){ "job", "pcpustat" };
	c.labels[1] = (struct push_label){ "instance", "bench-host" };
	{
		pcpu_registry_t *reg = pcpu_registry_create();

		CHECK(reg);
		fill(reg, nseries);
		CHECK((s = pcpu_registry_snapshot(reg)));
		CHECK((m = pcpu_snapshot_merge_new()));
		CHECK(pcpu_snapshot_merge_add(m, s, 2, extra, extra_v) == 0);
		CHECK((c.snap = pcpu_snapshot_merge_result(m)));
	}
	for (i = 0; i < c.snap->nfamilies; i++)
		total += c.snap->families[i].nseries;
	port = start_sink();
	snprintf(url_rw, sizeof url_rw, "http://127.0.0.1:%d/api/v1/write", port);
	snprintf(url_otlp, sizeof url_otlp, "http://127.0.0.1:%d/v1/metrics", port);
	hrw.url = url_rw;
	hotlp.url = url_otlp;
	CHECK((c.rw = push_http_new(&hrw, err, sizeof err)) && (c.otlp = push_http_new(&hotlp, err, sizeof err)));
	for (v = 0; v < NV; v++)
		run_variant(&c, (int)v); /* warm: pages, connections */
	for (r = 0; r < rounds; r++)
		for (i = 0; i < NV; i++) {
			uint64_t t0, w0;

			v = (r + i) % NV;
			if (only >= 0 && (int)v != only)
				continue;
			w0 = clock_ns(CLOCK_MONOTONIC);
			t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
			bytes[v] = run_variant(&c, (int)v);
			cpu[v][r] = (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e6;
			wall[v][r] = (double)(clock_ns(CLOCK_MONOTONIC) - w0) / 1e6;
		}
	printf("push of %zu series (%u families; counters 70%%, gauges 29%%, histograms 1%%), %u rounds, "
	       "medians of the thread's CPU time (wall beside it)\n", total, (unsigned)c.snap->nfamilies, rounds);
	printf("  %-30s %10s %8s %8s %10s %12s %10s\n", "variant", "median ms", "min", "max", "wall ms", "bytes",
	       "/ text");
	{
		double text_med = 0;

		for (v = 0; v < NV; v++) {
			double med, wmed;

			qsort(cpu[v], rounds, sizeof(double), cmp_double);
			qsort(wall[v], rounds, sizeof(double), cmp_double);
			med = cpu[v][rounds / 2];
			wmed = wall[v][rounds / 2];
			if (v == V_TEXT)
				text_med = med;
			printf("  %-30s %10.2f %8.2f %8.2f %10.2f %12zu %9.2fx\n", vname[v], med, cpu[v][0],
			       cpu[v][rounds - 1], wmed, bytes[v], med / text_med);
		}
	}
	push_http_free(c.rw);
	push_http_free(c.otlp);
	arena_free(&c.arena);
	pcpu_snapshot_merge_free(m);
	pcpu_snapshot_free(s);
	return 0;
}
