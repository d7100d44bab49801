/* SPDX-License-Identifier: MIT */
/*
 * The exposition helpers for exporters: content negotiation
 * (pcpu_format_negotiate, pcpu_format_gzip_acceptable) and merging
 * snapshots of several processes (pcpu_snapshot_merge_*): labels added,
 * families joined by name, clashes refused all or nothing, result sorted,
 * and a merge of many families linear (counted by a deadline far above
 * the linear cost and far below the quadratic one).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/expose.h>
#include "../check.h"

static void negotiation(void)
{
	static const struct {
		const char *accept;
		enum pcpu_format want;
	} t[] = {
		{ NULL, PCPU_FORMAT_PROMETHEUS },
		{ "", PCPU_FORMAT_PROMETHEUS },
		{ "text/plain", PCPU_FORMAT_PROMETHEUS },
		{ "*/*", PCPU_FORMAT_PROMETHEUS },
		{ "application/openmetrics-text", PCPU_FORMAT_OPENMETRICS },
		{ "APPLICATION/OpenMetrics-Text; Version=1.0.0", PCPU_FORMAT_OPENMETRICS },
		{ "application/openmetrics-text;version=\"1.0.0\";q=0.9, text/plain;q=0.8",
		  PCPU_FORMAT_OPENMETRICS },
		{ "application/openmetrics-text;q=0.2, text/plain;q=0.9", PCPU_FORMAT_PROMETHEUS },
		{ "application/openmetrics-text;version=2.0.0, text/plain;q=0.1", PCPU_FORMAT_PROMETHEUS },
		{ "application/openmetrics-text;q=0", PCPU_FORMAT_PROMETHEUS },
		{ "application/openmetrics-text;q=abc", PCPU_FORMAT_PROMETHEUS },
		{ "application/openmetrics-text;q=1.5", PCPU_FORMAT_PROMETHEUS },
		{ "application/openmetrics-text;q=0.001", PCPU_FORMAT_OPENMETRICS },
		{ "text/plain;version=0.0.4;q=0.5,application/openmetrics-text;q=0.5", PCPU_FORMAT_OPENMETRICS },
		/* Prometheus 2.x's default scrape Accept */
		{ "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
		  "text/plain;version=0.0.4;q=0.5,*/*;q=0.1", PCPU_FORMAT_OPENMETRICS },
		/* a quoted comma does not split the list */
		{ "text/plain;x=\"a,application/openmetrics-text\"", PCPU_FORMAT_PROMETHEUS },
	};
	/* Prometheus with native histograms asks for protobuf first. */
	const char *pb = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
			 "encoding=delimited;q=0.7,application/openmetrics-text;version=1.0.0;q=0.5,"
			 "text/plain;version=0.0.4;q=0.3";
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		enum pcpu_format got = pcpu_format_negotiate(t[i].accept);
		if (got != t[i].want) {
			fprintf(stderr, "Accept %s: got %d, want %d\n", t[i].accept ? t[i].accept : "(none)",
				got, t[i].want);
			exit(1);
		}
	}
	CHECK(pcpu_format_negotiate(pb) ==
	      (pcpu_format_supported(PCPU_FORMAT_PROTOBUF) ? PCPU_FORMAT_PROTOBUF : PCPU_FORMAT_OPENMETRICS));
	/* Another encoding or message is not what we write. */
	CHECK(pcpu_format_negotiate("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
				    "encoding=text") == PCPU_FORMAT_PROMETHEUS);

	CHECK(pcpu_format_gzip_acceptable("gzip") == 1);
	CHECK(pcpu_format_gzip_acceptable("deflate, GZIP;q=0.5") == 1);
	CHECK(pcpu_format_gzip_acceptable("x-gzip") == 1);
	CHECK(pcpu_format_gzip_acceptable("*") == 1);
	CHECK(pcpu_format_gzip_acceptable(NULL) == 0);
	CHECK(pcpu_format_gzip_acceptable("") == 0);
	CHECK(pcpu_format_gzip_acceptable("identity") == 0);
	CHECK(pcpu_format_gzip_acceptable("gzip;q=0") == 0);
	CHECK(pcpu_format_gzip_acceptable("*, gzip;q=0") == 0);
	CHECK(pcpu_format_gzip_acceptable("*;q=0") == 0);
	CHECK(pcpu_format_gzip_acceptable("gzipx") == 0);
}

static const char *const LN[] = { "pcpu_pid" };

static struct pcpu_snapshot_family counter(const char *name, const struct pcpu_snapshot_series *s, size_t n)
{
	struct pcpu_snapshot_family f;

	memset(&f, 0, sizeof f);
	f.name = name;
	f.help = "Things.";
	f.type = PCPU_METRIC_COUNTER;
	f.series = s;
	f.nseries = n;
	return f;
}

static char *write_result(pcpu_snapshot_merge_t *m)
{
	const struct pcpu_snapshot *r = pcpu_snapshot_merge_result(m);
	char *text;
	size_t len;

	CHECK(r != NULL);
	CHECK(pcpu_snapshot_write(r, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	return text;
}

static void merging(void)
{
	struct pcpu_snapshot_series one = { .value.counter = 1 }, two = { .value.counter = 2 };
	struct pcpu_snapshot_family a1[2], a2[1], bad[2], clash[1], other[1];
	struct pcpu_snapshot s1 = { 2, a1 }, s2 = { 1, a2 }, sbad = { 2, bad }, sclash = { 1, clash };
	struct pcpu_snapshot sother = { 1, other };
	const char *p1[] = { "1" }, *p2[] = { "2" };
	pcpu_snapshot_merge_t *m = pcpu_snapshot_merge_new();
	char *text;

	CHECK(m != NULL);
	a1[0] = counter("b_jobs", &one, 1);
	a1[1] = counter("a_jobs", &two, 1);
	a2[0] = counter("b_jobs", &two, 1);
	CHECK(pcpu_snapshot_merge_add(m, &s1, 1, LN, p1) == 0);
	CHECK(pcpu_snapshot_merge_add(m, &s2, 1, LN, p2) == 0);
	text = write_result(m);
	CHECK(strcmp(text, "# HELP a_jobs_total Things.\n# TYPE a_jobs_total counter\n"
			   "a_jobs_total{pcpu_pid=\"1\"} 2\n"
			   "# HELP b_jobs_total Things.\n# TYPE b_jobs_total counter\n"
			   "b_jobs_total{pcpu_pid=\"1\"} 1\nb_jobs_total{pcpu_pid=\"2\"} 2\n") == 0);
	free(text);

	/* All or nothing: a good family beside one that clashes (a gauge
	 * named like counter a_jobs' sample) adds neither. */
	bad[0] = counter("c_jobs", &one, 1);
	bad[1] = counter("a_jobs_total", NULL, 0);
	bad[1].type = PCPU_METRIC_GAUGE;
	CHECK(pcpu_snapshot_merge_add(m, &sbad, 1, LN, p2) == -1 && errno == EINVAL);
	CHECK(strstr(pcpu_stats_error(), "a_jobs_total") != NULL);
	/* Same name, other metadata. */
	clash[0] = counter("b_jobs", &one, 1);
	clash[0].help = "Other things.";
	CHECK(pcpu_snapshot_merge_add(m, &sclash, 1, LN, p2) == -1 && errno == EINVAL);
	/* A family that has the extra label already. */
	other[0] = counter("d_jobs", &one, 1);
	other[0].nlabels = 1;
	other[0].label_names = LN;
	one.label_values = p1;
	CHECK(pcpu_snapshot_merge_add(m, &sother, 1, LN, p2) == -1 && errno == EINVAL);
	/* An invalid extra label. */
	CHECK(pcpu_snapshot_merge_add(m, &s2, 1, (const char *const[]){ "__x" }, p2) == -1);
	/* An info family x_info is OpenMetrics family x: it clashes with a
	 * family x merged before (counter a_jobs), and the other way round. */
	{
		struct pcpu_snapshot_series yes = { .value.gauge = 1 };
		struct pcpu_snapshot_family info[1], plain[1];
		struct pcpu_snapshot sinfo = { 1, info }, splain = { 1, plain };

		info[0] = counter("a_jobs_info", &yes, 1);
		info[0].type = PCPU_METRIC_GAUGE;
		info[0].flags = PCPU_SNAPSHOT_INFO;
		CHECK(pcpu_snapshot_merge_add(m, &sinfo, 1, LN, p2) == -1 && errno == EINVAL);
		CHECK(strstr(pcpu_stats_error(), "a_jobs_info") != NULL);
		info[0].name = "e_build_info";
		CHECK(pcpu_snapshot_merge_add(m, &sinfo, 1, LN, p2) == 0);
		plain[0] = counter("e_build", &one, 1);
		CHECK(pcpu_snapshot_merge_add(m, &splain, 1, LN, p2) == -1 && errno == EINVAL);
		CHECK(strstr(pcpu_stats_error(), "e_build") != NULL);
		text = write_result(m);
		CHECK(strstr(text, "\ne_build_info{pcpu_pid=\"2\"} 1\n") != NULL);
		free(text);
	}
	text = write_result(m);
	CHECK(strstr(text, "c_jobs") == NULL && strstr(text, "Other") == NULL && strstr(text, "d_jobs") == NULL);
	free(text);
	pcpu_snapshot_merge_free(m);
	pcpu_snapshot_merge_free(NULL);
}

/* The merge's test hook (src/stats/merge.c; the static library). */
void pcpu__snapshot_merge_probes(const pcpu_snapshot_merge_t *m, size_t *lookups, size_t *probes);

/*
 * Hashing makes a merge linear in its families: each name is found in a
 * table at most half full in a slot or two, where the exporter's earlier
 * list search compared every name with every other (20,000^2 * 9 strcmp:
 * seconds). Asserted on what the hash table did, not on a time, so no
 * machine's speed or load can fail it: 20,000 families merged one by one,
 * the table slots visited per lookup must stay below 4 (linear probing in
 * a half-full table averages about 1.5 for a name present, 2.5 for one
 * absent). Checked by making every name hash alike: thousands per lookup.
 * (A growth-in-time check stood here: 8x the families took 9-12x the time
 * on one machine, but 19-27x on another, near its 24x bound.)
 */
static void many(void)
{
	enum { N = 20000 };
	struct pcpu_snapshot_series *series = calloc(N, sizeof *series);
	struct pcpu_snapshot_family *fams = calloc(N, sizeof *fams);
	char (*names)[32] = calloc(N, sizeof *names);
	pcpu_snapshot_merge_t *m = pcpu_snapshot_merge_new();
	const struct pcpu_snapshot *r;
	const char *pid[] = { "7" };
	size_t i, lookups, probes;

	CHECK(series && fams && names && m);
	for (i = 0; i < N; i++) {
		struct pcpu_snapshot s = { 1, &fams[i] };

		snprintf(names[i], sizeof names[i], "fam_%05zu", N - 1 - i);
		series[i].value.counter = i;
		fams[i] = counter(names[i], &series[i], 1);
		CHECK(pcpu_snapshot_merge_add(m, &s, 1, LN, pid) == 0);
	}
	r = pcpu_snapshot_merge_result(m);
	CHECK(r && r->nfamilies == N);
	for (i = 1; i < N; i++)
		CHECK(strcmp(r->families[i - 1].name, r->families[i].name) < 0);
	pcpu__snapshot_merge_probes(m, &lookups, &probes);
	printf("merged %d families: %zu lookups visited %zu table slots, %.2f each\n", N, lookups,
	       probes, (double)probes / (double)lookups);
	CHECK(lookups >= N && probes < 4 * lookups);
	pcpu_snapshot_merge_free(m);
	free(series);
	free(fams);
	free(names);
}

int main(void)
{
	negotiation();
	merging();
	many();
	printf("test_merge: ok\n");
	return 0;
}
