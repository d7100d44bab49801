/*
 * A test application for `pcpustat push` (tests/push/): publishes a
 * segment and changes its statistics on command, one line on stdin each,
 * answering "ok" when the change is in place:
 *
 *   add K          push_requests_total{method="GET"} += K
 *   post K         push_requests_total{method="POST"} += K
 *   reset          push_requests_total{method="GET"} back to 0
 *                  (pcpu_counter_fetch_and_zero: a counter reset)
 *   gauge V        push_queue_depth = V
 *   temp V         push_temperature_celsius = V / 10 (scale_exp10 -1)
 *   observe US     records US microseconds into the three histograms,
 *                  exposed in seconds: push_latency_seconds (explicit,
 *                  bounds 1 ms, 10 ms, 100 ms), push_latency_ll_seconds
 *                  (log-linear, p = 2), push_latency_native_seconds
 *                  (exponential, schema 3)
 *   many N         push_many_total{id="0".."N-1"}, series id counted id + 1
 *
 *   push_fixture [NAME]    (default "pushfix"; segment in $PCPU_SEGMENT_DIR)
 *
 * Prints "ready PATH" once published; exits 0 at end of input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/segment.h>
#include <pcpu/stats.h>

static void die(const char *what)
{
	fprintf(stderr, "push_fixture: %s: %s\n", what, pcpu_stats_error());
	exit(1);
}

static pcpu_family_t *family(pcpu_registry_t *reg, const char *name, const char *help, enum pcpu_metric_type t,
			     int scale, const char *unit, const struct pcpu_histogram_layout *l, unsigned nl,
			     const char *const *ln)
{
	struct pcpu_family_desc d;
	pcpu_family_t *f;

	memset(&d, 0, sizeof d);
	d.name = name;
	d.help = help;
	d.type = t;
	d.scale_exp10 = scale;
	d.unit = unit;
	d.histogram = l;
	d.nlabels = nl;
	d.label_names = ln;
	if (!(f = pcpu_registry_family(reg, &d)))
		die(name);
	return f;
}

static void many(pcpu_registry_t *reg, long n)
{
	static const char *const ln[] = { "id" };
	pcpu_family_t *f = family(reg, "push_many", "Many series.", PCPU_METRIC_COUNTER, 0, NULL, NULL, 1, ln);
	char buf[32];
	const char *lv[1] = { buf };
	long i;

	for (i = 0; i < n; i++) {
		pcpu_counter_t c;

		snprintf(buf, sizeof buf, "%ld", i);
		if (!(c = pcpu_family_counter(f, lv)))
			die("many");
		pcpu_counter_add(c, (uint64_t)i + 1);
	}
}

int main(int argc, char **argv)
{
	static const char *const mln[] = { "method" };
	static const char *const get[] = { "GET" }, *const post[] = { "POST" };
	static const int64_t bounds[] = { 1000, 10000, 100000 };
	struct pcpu_histogram_layout ex = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = bounds, .nbounds = 3 };
	struct pcpu_histogram_layout ll = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 2,
					    .max_value = 100000000 };
	struct pcpu_histogram_layout nat = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3 };
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg;
	pcpu_family_t *req;
	pcpu_counter_t cget, cpost;
	pcpu_gauge_t depth, temp;
	pcpu_histogram_t *h[3];
	char line[128];

	if (!reg)
		die("registry");
	if (!(seg = pcpu_segment_publish(reg, argc > 1 ? argv[1] : "pushfix", NULL))) {
		fprintf(stderr, "push_fixture: publish: %s\n", pcpu_segment_error());
		return 1;
	}
	req = family(reg, "push_requests", "Requests, by method.", PCPU_METRIC_COUNTER, 0, NULL, NULL, 1, mln);
	cget = pcpu_family_counter(req, get);
	cpost = pcpu_family_counter(req, post);
	depth = pcpu_family_gauge(family(reg, "push_queue_depth", "Requests waiting.", PCPU_METRIC_GAUGE, 0, NULL,
					 NULL, 0, NULL), NULL);
	temp = pcpu_family_gauge(family(reg, "push_temperature_celsius", "Room temperature.", PCPU_METRIC_GAUGE,
					-1, "celsius", NULL, 0, NULL), NULL);
	h[0] = pcpu_family_histogram(family(reg, "push_latency_seconds", "Latency, explicit buckets.",
					    PCPU_METRIC_HISTOGRAM, -6, "seconds", &ex, 0, NULL), NULL);
	h[1] = pcpu_family_histogram(family(reg, "push_latency_ll_seconds", "Latency, log-linear buckets.",
					    PCPU_METRIC_HISTOGRAM, -6, "seconds", &ll, 0, NULL), NULL);
	h[2] = pcpu_family_histogram(family(reg, "push_latency_native_seconds", "Latency, exponential buckets.",
					    PCPU_METRIC_HISTOGRAM, -6, "seconds", &nat, 0, NULL), NULL);
	if (!cget || !cpost || !depth || !temp || !h[0] || !h[1] || !h[2])
		die("series");
	printf("ready %s\n", pcpu_segment_path(seg));
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		long long v = 0;
		char cmd[16];

		if (sscanf(line, "%15s %lld", cmd, &v) < 1)
			continue;
		if (strcmp(cmd, "add") == 0)
			pcpu_counter_add(cget, (uint64_t)v);
		else if (strcmp(cmd, "post") == 0)
			pcpu_counter_add(cpost, (uint64_t)v);
		else if (strcmp(cmd, "reset") == 0)
			pcpu_counter_fetch_and_zero(cget);
		else if (strcmp(cmd, "gauge") == 0)
			pcpu_gauge_set(depth, v);
		else if (strcmp(cmd, "temp") == 0)
			pcpu_gauge_set(temp, v);
		else if (strcmp(cmd, "observe") == 0)
			for (int k = 0; k < 3; k++)
				pcpu_histogram_record(h[k], v);
		else if (strcmp(cmd, "many") == 0)
			many(reg, v);
		else {
			fprintf(stderr, "push_fixture: unknown command %s\n", cmd);
			return 2;
		}
		puts("ok");
		fflush(stdout);
	}
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	return 0;
}
