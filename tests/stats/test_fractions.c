/*
 * Counters and gauges with fractions (pcpu_registry_family_nanos()): whole
 * units and billionths in two words, as double-valued APIs (the
 * prometheus-cpp layer, tests/cxx/test_promcpp_segment.cpp) keep them.
 * Checks registration and its refusals, what every writer and the value
 * helpers make of whole + nanos (folding, signs, exact integers), exact
 * sums from many threads, the published segment read back by the reader
 * (another process's view), and a shared registry whose processes disagree
 * on a family's fractions (refused: its series' storage would differ in
 * size).
 */
#include "../check.h"
#include "segment_text.h"
#include <pcpu/pcpu.h>
#include <pcpu/stats.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats_check.h"

#define CHECK_HAS(text, line)                                                               \
	do {                                                                                \
		if (!strstr((text), (line))) {                                              \
			fprintf(stderr, "%s:%d: missing [%s] in:\n%s\n", __FILE__, __LINE__, \
				(line), (text));                                            \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

static struct pcpu_family_desc desc(const char *name, enum pcpu_metric_type t, unsigned nl,
				    const char *const *labels)
{
	struct pcpu_family_desc d;

	memset(&d, 0, sizeof d);
	d.name = name;
	d.type = t;
	d.nlabels = nl;
	d.label_names = labels;
	return d;
}

static char *write_all(pcpu_registry_t *reg, enum pcpu_format fmt)
{
	char *out;
	size_t len;

	CHECK(pcpu_registry_write(reg, fmt, &out, &len) == 0);
	return out;
}

static void check_registration(pcpu_registry_t *reg)
{
	static const char *const kn[] = { "k" }, *const kv[] = { "v" };
	struct pcpu_family_desc d = desc("frac_things_total", PCPU_METRIC_COUNTER, 0, NULL);
	struct pcpu_family_desc h = desc("frac_latency", PCPU_METRIC_HISTOGRAM, 0, NULL);
	static const int64_t bounds[] = { 1, 2 };
	struct pcpu_histogram_layout lay;
	pcpu_family_t *f;

	memset(&lay, 0, sizeof lay);
	lay.scheme = PCPU_HISTOGRAM_EXPLICIT;
	lay.bounds = bounds;
	lay.nbounds = 2;
	h.histogram = &lay;
	/* A histogram with fractions (segment format 2.8): any scale. */
	h.scale_exp10 = -3;
	CHECK(pcpu_registry_family_nanos(reg, &h, 0, NULL, NULL) != NULL);
	d.scale_exp10 = -3;
	CHECK_ERR(pcpu_registry_family_nanos(reg, &d, 0, NULL, NULL), EINVAL, "scale_exp10 0");
	d.scale_exp10 = 0;
	CHECK_ERR(pcpu_registry_family_nanos(NULL, &d, 0, NULL, NULL), EINVAL, "NULL");
	f = pcpu_registry_family_nanos(reg, &d, 0, NULL, NULL);
	CHECK(f != NULL);
	CHECK(pcpu_registry_family_nanos(reg, &d, 0, NULL, NULL) == f); /* get-or-create */
	/* The same description without fractions is another family. */
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "fractions");
	d.name = "frac_plain_total";
	CHECK(pcpu_registry_family(reg, &d) != NULL);
	CHECK_ERR(pcpu_registry_family_nanos(reg, &d, 0, NULL, NULL), EEXIST, "fractions");
	/* Constant labels, checked as pcpu_registry_family_const()'s. */
	d.name = "frac_const";
	d.type = PCPU_METRIC_GAUGE;
	CHECK_ERR(pcpu_registry_family_nanos(reg, &d, 1, kn, NULL), EINVAL, "constant labels");
	CHECK(pcpu_registry_family_nanos(reg, &d, 1, kn, kv) != NULL);
}

/* What the writers and the value helpers make of (whole, nanos). */
static void check_values(pcpu_registry_t *reg)
{
	static const char *const ln[] = { "case" };
	struct pcpu_family_desc c = desc("frac_seconds_total", PCPU_METRIC_COUNTER, 1, ln);
	struct pcpu_family_desc g = desc("frac_level", PCPU_METRIC_GAUGE, 1, ln);
	pcpu_family_t *fc = pcpu_registry_family_nanos(reg, &c, 0, NULL, NULL);
	pcpu_family_t *fg = pcpu_registry_family_nanos(reg, &g, 0, NULL, NULL);
	pcpu_counter_t a, b, z;
	pcpu_gauge_t n, m;
	char *t;

	CHECK(fc && fg);
	a = pcpu_family_counter(fc, (const char *[]){ "carry" });
	b = pcpu_family_counter(fc, (const char *[]){ "whole" });
	z = pcpu_family_counter(fc, (const char *[]){ "zero" });
	n = pcpu_family_gauge(fg, (const char *[]){ "neg" });
	m = pcpu_family_gauge(fg, (const char *[]){ "down" });
	CHECK(a && b && z && n && m);
	/* 5 units and 2.75 units of billionths: 7.75. */
	pcpu_counter_add(a, 5);
	pcpu_counter_add(pcpu_counter_at(a, 1), 2750000000);
	/* Billionths that make whole units only: an exact integer. */
	pcpu_counter_add(b, 1);
	pcpu_counter_add(pcpu_counter_at(b, 1), 3000000000);
	/* -3 + 0.5 = -2.5; 2 - 0.25 = 1.75. */
	pcpu_gauge_add(n, -3);
	pcpu_gauge_add((pcpu_gauge_t)pcpu_counter_at((pcpu_counter_t)n, 1), 500000000);
	pcpu_gauge_add(m, 2);
	pcpu_gauge_add((pcpu_gauge_t)pcpu_counter_at((pcpu_counter_t)m, 1), -250000000);

	t = write_all(reg, PCPU_FORMAT_PROMETHEUS);
	CHECK_HAS(t, "frac_seconds_total{case=\"carry\"} 7.75\n");
	CHECK_HAS(t, "frac_seconds_total{case=\"whole\"} 4\n");
	CHECK_HAS(t, "frac_seconds_total{case=\"zero\"} 0\n");
	CHECK_HAS(t, "frac_level{case=\"neg\"} -2.5\n");
	CHECK_HAS(t, "frac_level{case=\"down\"} 1.75\n");
	free(t);
	t = write_all(reg, PCPU_FORMAT_OPENMETRICS);
	CHECK_HAS(t, "frac_seconds_total{case=\"carry\"} 7.75\n");
	CHECK_HAS(t, "frac_level{case=\"neg\"} -2.5\n");
	free(t);
	t = write_all(reg, PCPU_FORMAT_JSON);
	CHECK_HAS(t, "{\"labels\":{\"case\":\"carry\"},\"value\":7.75}");
	CHECK_HAS(t, "{\"labels\":{\"case\":\"whole\"},\"value\":4}");
	CHECK_HAS(t, "{\"labels\":{\"case\":\"down\"},\"value\":1.75}");
	free(t);
	if (pcpu_format_supported(PCPU_FORMAT_PROTOBUF)) {
		/* The values are doubles there: their bytes are in the message. */
		double want[] = { 7.75, 4, -2.5, 1.75 };
		size_t len;

		CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROTOBUF, &t, &len) == 0);
		for (size_t k = 0; k < sizeof want / sizeof *want; k++)
			CHECK(memmem(t, len, &want[k], sizeof want[k]) != NULL);
		free(t);
	}

	{
		struct pcpu_snapshot *s = pcpu_registry_snapshot(reg);
		const struct pcpu_snapshot_family *sf = NULL;
		char num[PCPU_FORMAT_NUMBER_MAX];
		size_t k;

		CHECK(s != NULL);
		for (k = 0; k < s->nfamilies; k++)
			if (strcmp(s->families[k].name, "frac_seconds") == 0)
				sf = &s->families[k];
		CHECK(sf && (sf->flags & PCPU_SNAPSHOT_NANOS) && sf->nseries == 3);
		/* Code unaware of the flag reads the whole units. */
		CHECK_EQ_U64(sf->series[0].value.counter, 5);
		CHECK(sf->series[0].value.fixed.nanos == 2750000000);
		CHECK(pcpu_snapshot_value(sf, &sf->series[0]) == 7.75);
		CHECK(pcpu_snapshot_format_value(num, sizeof num, sf, &sf->series[0]) == 4 &&
		      strcmp(num, "7.75") == 0);
		CHECK(pcpu_snapshot_format_value(num, 4, sf, &sf->series[0]) == -1 && errno == ERANGE);
		errno = 0;
		CHECK(isnan(pcpu_snapshot_value(NULL, &sf->series[0])) && errno == EINVAL);
		CHECK(pcpu_snapshot_format_value(num, sizeof num, sf, NULL) == -1 && errno == EINVAL);
		{
			/* A histogram family has no single value. */
			struct pcpu_snapshot_family hf = *sf;

			hf.type = PCPU_METRIC_HISTOGRAM;
			errno = 0;
			CHECK(isnan(pcpu_snapshot_value(&hf, &sf->series[0])) && errno == EINVAL);
			CHECK(pcpu_snapshot_format_value(num, sizeof num, &hf, &sf->series[0]) == -1 &&
			      errno == EINVAL);
		}
		{
			/* The writers trust no snapshot: fractions on an info
			 * family are refused, not ignored (on a histogram,
			 * since 2.8, they say it was observed as doubles). */
			static const uint64_t counts[1] = { 0 };
			struct pcpu_snapshot_series hs;
			struct pcpu_snapshot_family hf;
			struct pcpu_snapshot one = { 1, &hf };
			char *out;
			size_t len;

			memset(&hs, 0, sizeof hs);
			hs.value.histogram.counts = counts;
			memset(&hf, 0, sizeof hf);
			hf.name = "frac_hist";
			hf.type = PCPU_METRIC_HISTOGRAM;
			hf.nbuckets = 1;
			hf.nseries = 1;
			hf.series = &hs;
			CHECK(pcpu_snapshot_write(&one, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
			free(out);
			hf.flags = PCPU_SNAPSHOT_NANOS;
			CHECK(pcpu_snapshot_write(&one, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
			free(out);
			hf.flags = PCPU_SNAPSHOT_NANOS | PCPU_SNAPSHOT_INFO;
			hf.type = PCPU_METRIC_GAUGE;
			hf.name = "frac_info";
			hs.value.gauge = 1;
			CHECK_ERR(pcpu_snapshot_write(&one, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0,
				  EINVAL, "PCPU_SNAPSHOT_NANOS");
		}
		pcpu_snapshot_free(s);
	}
}

/* Many threads add 1.25 at a time (a unit and 250000000 billionths),
 * migrating as the scheduler likes: the sum is exact. */
#define THREADS 4
#define ADDS 200000
static pcpu_counter_t shared_counter;

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ADDS; i++) {
		pcpu_counter_add(shared_counter, 1);
		pcpu_counter_add(pcpu_counter_at(shared_counter, 1), 250000000);
	}
	return NULL;
}

static void check_threads(pcpu_registry_t *reg)
{
	struct pcpu_family_desc d = desc("frac_busy_seconds_total", PCPU_METRIC_COUNTER, 0, NULL);
	pcpu_family_t *f = pcpu_registry_family_nanos(reg, &d, 0, NULL, NULL);
	pthread_t th[THREADS];
	char *t;

	CHECK(f);
	shared_counter = pcpu_family_counter(f, NULL);
	CHECK(shared_counter);
	for (int k = 0; k < THREADS; k++)
		CHECK(pthread_create(&th[k], NULL, adder, NULL) == 0);
	for (int k = 0; k < THREADS; k++)
		CHECK(pthread_join(th[k], NULL) == 0);
	t = write_all(reg, PCPU_FORMAT_PROMETHEUS);
	/* 4 * 200000 * 1.25 = 1000000 exactly. */
	CHECK_HAS(t, "frac_busy_seconds_total 1000000\n");
	free(t);
}

/* The published segment, read back as another process reads it. */
static void check_segment(pcpu_segment_t *seg)
{
	char *t = segment_text(pcpu_segment_path(seg));

	CHECK_HAS(t, "frac_seconds_total{case=\"carry\"} 7.75\n");
	CHECK_HAS(t, "frac_seconds_total{case=\"whole\"} 4\n");
	CHECK_HAS(t, "frac_level{case=\"neg\"} -2.5\n");
	CHECK_HAS(t, "frac_level{case=\"down\"} 1.75\n");
	CHECK_HAS(t, "frac_busy_seconds_total 1000000\n");
	free(t);
}

/* A shared registry: a process of the tree registers a family without
 * fractions after the fork; another then asks for it with fractions
 * (and the other way round): refused, where adopting the other's series
 * would write a second word past a one-word value. */
static void check_tree(const char *dir)
{
	struct pcpu_segment_options o;
	pcpu_registry_t *reg = pcpu_registry_create();
	struct pcpu_family_desc plain = desc("late_plain_total", PCPU_METRIC_COUNTER, 0, NULL);
	struct pcpu_family_desc frac = desc("late_frac", PCPU_METRIC_GAUGE, 0, NULL);
	pcpu_segment_t *seg;
	pcpu_family_t *f;
	pid_t pid;
	int st;

	CHECK(reg);
	memset(&o, 0, sizeof o);
	o.dir = dir;
	o.flags = PCPU_SEGMENT_SHARED_TREE;
	seg = pcpu_segment_publish(reg, "fractree", &o);
	if (!seg)
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
	CHECK(seg != NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		pcpu_family_t *p = pcpu_registry_family(reg, &plain);
		pcpu_family_t *q = pcpu_registry_family_nanos(reg, &frac, 0, NULL, NULL);
		pcpu_gauge_t g;

		if (!p || !q || !pcpu_family_counter(p, NULL) || !(g = pcpu_family_gauge(q, NULL)))
			_exit(1);
		pcpu_gauge_add((pcpu_gauge_t)pcpu_counter_at((pcpu_counter_t)g, 1), 500000000);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_ERR(pcpu_registry_family_nanos(reg, &plain, 0, NULL, NULL), EEXIST,
		  "another process of the tree");
	CHECK_ERR(pcpu_registry_family(reg, &frac), EEXIST, "another process of the tree");
	/* Registered as the tree has it: the child's value, fraction included. */
	f = pcpu_registry_family_nanos(reg, &frac, 0, NULL, NULL);
	CHECK(f != NULL);
	{
		char *t = segment_text(pcpu_segment_path(seg));

		CHECK_HAS(t, "late_frac 0.5\n");
		free(t);
	}
	CHECK(pcpu_segment_unpublish(seg) == 0);
	pcpu_registry_destroy(reg);
}

int main(void)
{
	char dir[] = "/tmp/pcpu-fractions-XXXXXX";
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	reg = pcpu_registry_create();
	CHECK(reg != NULL);
	seg = pcpu_segment_publish(reg, "fractions", NULL);
	CHECK(seg != NULL);
	check_registration(reg);
	check_values(reg);
	check_threads(reg);
	check_segment(seg);
	CHECK(pcpu_segment_unpublish(seg) == 0);
	pcpu_registry_destroy(reg);
	check_tree(dir);
	rmdir(dir);
	puts("ok");
	return 0;
}
