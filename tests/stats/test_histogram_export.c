/*
 * The classic (`le`) exposition of exponential (native) histograms:
 * export_per_octave bounds per power of two (capped at the schema's
 * 2^schema buckets), from export_min, always the same set from the
 * family's creation on, empty buckets included -- for a few (schema,
 * export_per_octave) pairs. The set is checked from the written text, not
 * from the rule the library uses: exposed bounds are the zero bucket's,
 * then powers of 2^(1/m) for m = the effective bounds per power of two,
 * so two consecutive ones differ by that factor (within the integer
 * rounding of bounds in nanoseconds), and the powers of two are there.
 *
 * Through a published segment (what pcpustat and its exporter read), an
 * exponential family's set is the layout's too (format 2.4 carries the
 * rule; 2.2-2.3 writers' families get the default, 4 per power of two):
 * the same bounds and cumulative counts as the in-process exposition,
 * fixed from creation on. The same segment carries an info family, which
 * another process must see as OpenMetrics type info with value 1.
 */
#include "../check.h"
#include "segment_text.h"
#include <pcpu/pcpu.h>
#include <pcpu/stats.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXLE 4096

struct le_set {
	size_t n;
	char le[MAXLE][40];
	uint64_t count[MAXLE];
};

/* The `le` values and cumulative counts of `name`'s series `series` (the
 * value of its one label) in 0.0.4 text. */
static void le_set_of(const char *text, const char *name, const char *series, struct le_set *s)
{
	char prefix[256];
	const char *p = text;
	size_t pl;

	pl = (size_t)snprintf(prefix, sizeof prefix, "\n%s_bucket{op=\"%s\",le=\"", name, series);
	s->n = 0;
	while ((p = strstr(p, prefix)) != NULL) {
		size_t k;

		p += pl;
		k = strcspn(p, "\"");
		CHECK(k < 40 && s->n < MAXLE);
		memcpy(s->le[s->n], p, k);
		s->le[s->n][k] = '\0';
		CHECK(p[k + 1] == '}' && p[k + 2] == ' ');
		s->count[s->n] = strtoull(p + k + 3, NULL, 10);
		s->n++;
	}
	CHECK(s->n >= 1 && strcmp(s->le[s->n - 1], "+Inf") == 0);
}

static int same_les(const struct le_set *a, const struct le_set *b)
{
	size_t i;

	if (a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->le[i], b->le[i]) != 0)
			return 0;
	return 1;
}

/*
 * Checks the exposed bounds of an exponential histogram exposed in
 * seconds from nanoseconds: le[0] the zero bucket's bound (unless
 * export_min left it out), then consecutive bounds a factor 2^(1/per) apart
 * (each bound is the largest integer number of ns not above the true one,
 * so within 1 ns; the last may be INT64_MAX ns instead), the powers of two 2^-20 .. 2^20 s exposed exactly
 * ("1.0", "2.0", "0.5"...), nothing below `min_s` but the first.
 */
static void check_grid(const struct le_set *s, unsigned per, int zero_first, double min_s)
{
	double f = pow(2.0, 1.0 / per), prev = 0;
	size_t i, first = zero_first ? 1 : 0, n = s->n - 1; /* finite bounds */
	int k, pow2 = 0;

	CHECK(n > first + 1);
	if (!zero_first)
		CHECK(strtod(s->le[0], NULL) >= min_s);
	for (i = first; i < n; i++) {
		double x = strtod(s->le[i], NULL);

		if (i > first && x < 9.2e9) { /* the last bucket may end at INT64_MAX ns */
			double want = prev * f;

			if (fabs(x - want) > 2e-9 + 1e-12 * want) {
				fprintf(stderr, "per %u: le %s after %s, want about %.9g\n", per, s->le[i],
					s->le[i - 1], want);
				CHECK(0);
			}
		}
		prev = x;
	}
	for (k = -20; k <= 20; k++) {
		double p2 = ldexp(1.0, k);

		if (p2 < min_s || p2 > strtod(s->le[n - 1], NULL))
			continue;
		for (i = first; i < n; i++)
			if (strtod(s->le[i], NULL) == floor(p2 * 1e9) / 1e9)
				break;
		if (i == n) {
			fprintf(stderr, "per %u: 2^%d s not exposed\n", per, k);
			CHECK(0);
		}
		pow2++;
	}
	CHECK(pow2 > 10);
}

struct pair {
	int schema;
	unsigned export_per_octave; /* as given */
	unsigned per;               /* bounds per power of two exposed */
};

static void test_pairs(void)
{
	static const struct pair pairs[] = {
		{ 3, 0, 4 }, /* the default */
		{ 3, 1, 1 }, { 3, 2, 2 }, { 3, 8, 8 },
		{ 3, 64, 8 }, /* capped at 2^schema: every bucket */
		{ 5, 16, 16 }, { 2, 1, 1 },
		{ 0, 4, 1 }, { 0, 0, 1 }, /* one bucket per power of two: all */
	};
	static const char *const op[] = { "op" }, *const rd[] = { "read" }, *const wr[] = { "write" };
	size_t k;

	for (k = 0; k < sizeof pairs / sizeof *pairs; k++) {
		struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL,
						   .schema = pairs[k].schema,
						   .export_per_octave = pairs[k].export_per_octave };
		struct pcpu_family_desc d = { .name = "io_seconds", .unit = "seconds",
					      .type = PCPU_METRIC_HISTOGRAM, .scale_exp10 = -9,
					      .nlabels = 1, .label_names = op, .histogram = &l };
		pcpu_registry_t *reg = pcpu_registry_create();
		static struct le_set before, after, later;
		pcpu_family_t *f;
		pcpu_histogram_t *h;
		char *text;
		size_t len, i;
		uint64_t total = 0;

		CHECK(reg && (f = pcpu_registry_family(reg, &d)) && (h = pcpu_family_histogram(f, rd)));
		CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
		le_set_of(text, "io_seconds", "read", &before);
		free(text);
		check_grid(&before, pairs[k].per, 1, 0);
		/* 1 us .. 100 s, log-uniform-ish; and a zero. */
		for (i = 0; i < 5000; i++) {
			pcpu_histogram_record(h, (int64_t)pow(10.0, 3.0 + 8.0 * (double)(i * 7919 % 5000) / 5000));
			total++;
		}
		pcpu_histogram_record(h, 0);
		total++;
		CHECK(pcpu_family_histogram(f, wr)); /* a series made later */
		CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
		le_set_of(text, "io_seconds", "read", &after);
		le_set_of(text, "io_seconds", "write", &later);
		free(text);
		CHECK(same_les(&before, &after) && same_les(&before, &later));
		CHECK(after.count[0] == 1);                 /* the zero */
		CHECK(after.count[after.n - 1] == total);   /* +Inf */
		for (i = 1; i < after.n; i++)
			CHECK(after.count[i] >= after.count[i - 1]);
		/* Another export rule is another layout (EEXIST), the same one
		 * the same family. */
		l.export_per_octave = pairs[k].per == 1 ? 2 : 1;
		if (pairs[k].schema > 0)
			CHECK(pcpu_registry_family(reg, &d) == NULL && errno == EEXIST);
		l.export_per_octave = pairs[k].export_per_octave;
		CHECK(pcpu_registry_family(reg, &d) == f);
		if (pairs[k].export_per_octave > pairs[k].per && pairs[k].schema > 0) {
			/* Capped: the same rule as 2^schema itself. */
			l.export_per_octave = pairs[k].per;
			CHECK(pcpu_registry_family(reg, &d) == f);
			l.export_per_octave = pairs[k].export_per_octave;
		}
		pcpu_registry_destroy(reg);
	}
}

/* export_min: bounds below it fold into the first exposed one. */
static void test_export_min(void)
{
	struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3,
					   .export_per_octave = 2, .export_min = 1000000 };
	static const char *const op[] = { "op" }, *const rd[] = { "read" };
	struct pcpu_family_desc d = { .name = "io_seconds", .unit = "seconds",
				      .type = PCPU_METRIC_HISTOGRAM, .scale_exp10 = -9,
				      .nlabels = 1, .label_names = op, .histogram = &l };
	pcpu_registry_t *reg = pcpu_registry_create();
	static struct le_set s;
	pcpu_histogram_t *h;
	char *text;
	size_t len;

	CHECK(reg && (h = pcpu_family_histogram(pcpu_registry_family(reg, &d), rd)));
	pcpu_histogram_record(h, 0);
	pcpu_histogram_record(h, 5000);    /* 5 us */
	pcpu_histogram_record(h, 999999);  /* just under 1 ms */
	pcpu_histogram_record(h, 1500000); /* 1.5 ms */
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	le_set_of(text, "io_seconds", "read", &s);
	free(text);
	/* From 2^-10 s = 976562.5 ns (below 1 ms): the first bound at or above
	 * 10^6 ns on the grid of 2 per power of two is 2^-9.5 s. */
	check_grid(&s, 2, 0, 0.001);
	CHECK(strcmp(s.le[0], "0.001381067") == 0 && s.count[0] == 3);
	CHECK(strcmp(s.le[1], "0.001953125") == 0 && s.count[1] == 4);
	pcpu_registry_destroy(reg);
}

/*
 * max_value, the largest bound exposed: a latency histogram in
 * nanoseconds exposed in seconds, 1 per power of two from 100 us to 60 s,
 * writes a small classic set (Prometheus' default has 11), the same in
 * process and through a published segment (2.8), with every observation
 * above the last bound in +Inf; the native buckets keep them all.
 */
static void test_export_max(void)
{
	static char dir[] = "/tmp/pcpu-expo-max-XXXXXX";
	struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3,
					   .export_per_octave = 1, .export_min = 100000,
					   .max_value = 60000000000 };
	static const char *const op[] = { "op" }, *const rd[] = { "read" };
	struct pcpu_family_desc d = { .name = "req_seconds", .unit = "seconds",
				      .type = PCPU_METRIC_HISTOGRAM, .scale_exp10 = -9,
				      .nlabels = 1, .label_names = op, .histogram = &l };
	static struct le_set inproc, seg;
	pcpu_registry_t *reg;
	pcpu_segment_t *sg;
	pcpu_histogram_t *h;
	char *text, path[512];
	size_t len, i;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	reg = pcpu_registry_create();
	CHECK(reg && (sg = pcpu_segment_publish(reg, "expomax", NULL)) != NULL);
	snprintf(path, sizeof path, "%s", pcpu_segment_path(sg));
	CHECK((h = pcpu_family_histogram(pcpu_registry_family(reg, &d), rd)) != NULL);
	pcpu_histogram_record(h, 50000);           /* 50 us: folded into the first */
	pcpu_histogram_record(h, 3000000);         /* 3 ms */
	pcpu_histogram_record(h, 59000000000);     /* 59 s: in the last finite bound */
	pcpu_histogram_record(h, 61000000000);     /* 61 s: +Inf only */
	pcpu_histogram_record(h, 4000000000000LL); /* 4000 s: +Inf only */
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	le_set_of(text, "req_seconds", "read", &inproc);
	free(text);
	text = segment_text(path);
	le_set_of(text, "req_seconds", "read", &seg);
	free(text);
	/* 2^-13 s (122 us) .. 2^5 s (32 s) and +Inf: 20 lines. */
	check_grid(&inproc, 1, 0, 0.0001);
	CHECK(inproc.n == 20);
	CHECK(strcmp(inproc.le[0], "0.00012207") == 0 && inproc.count[0] == 1);
	CHECK(strcmp(inproc.le[inproc.n - 2], "32.0") == 0 && inproc.count[inproc.n - 2] == 2);
	CHECK(strcmp(inproc.le[inproc.n - 1], "+Inf") == 0 && inproc.count[inproc.n - 1] == 5);
	CHECK(same_les(&inproc, &seg));
	for (i = 0; i < inproc.n; i++)
		CHECK(seg.count[i] == inproc.count[i]);
	/* A family of that name with another limit is another layout. */
	l.max_value = 0;
	CHECK(pcpu_registry_family(reg, &d) == NULL && errno == EEXIST);
	CHECK(pcpu_segment_unpublish(sg) == 0);
	pcpu_registry_destroy(reg);
	CHECK(rmdir(dir) == 0);
}

static void test_refused(void)
{
	struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3,
					   .export_per_octave = 3 };

	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	CHECK(strstr(pcpu_stats_error(), "export_per_octave"));
	l.export_per_octave = 128;
	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	l.export_per_octave = 1;
	l.max_value = -1;
	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	CHECK(strstr(pcpu_stats_error(), "max_value"));
}

/*
 * A published segment: the layout's set (and the default one's for a
 * default layout), fixed from creation on, with the in-process
 * exposition's counts; and an info family as the writer exposes it.
 */
static void test_segment(void)
{
	static char dir[] = "/tmp/pcpu-expo-export-XXXXXX";
	struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3,
					   .export_per_octave = 1 };
	struct pcpu_histogram_layout def = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3 };
	static const char *const op[] = { "op" }, *const rd[] = { "read" };
	static const char *const bn[] = { "version" }, *const bv[] = { "1.2.3" };
	struct pcpu_family_desc d = { .name = "io_seconds", .unit = "seconds",
				      .type = PCPU_METRIC_HISTOGRAM, .scale_exp10 = -9,
				      .nlabels = 1, .label_names = op, .histogram = &l };
	struct pcpu_family_desc d4 = d;
	static struct le_set seg0, seg1, inproc, dflt, segdflt;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_histogram_t *h, *h4;
	char *text, path[512];
	size_t len, i;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	reg = pcpu_registry_create();
	CHECK(reg && (seg = pcpu_segment_publish(reg, "expo", NULL)) != NULL);
	snprintf(path, sizeof path, "%s", pcpu_segment_path(seg));
	d4.name = "io_default_seconds";
	d4.histogram = &def;
	CHECK((h = pcpu_family_histogram(pcpu_registry_family(reg, &d), rd)) != NULL);
	CHECK((h4 = pcpu_family_histogram(pcpu_registry_family(reg, &d4), rd)) != NULL);
	CHECK(pcpu_registry_info(reg, "app_build_info", "Build information.", 1, bn, bv) == 0);
	text = segment_text(path);
	le_set_of(text, "io_seconds", "read", &seg0);
	free(text);
	for (i = 0; i < 3000; i++) {
		int64_t v = (int64_t)pow(10.0, 2.0 + 9.0 * (double)(i * 7919 % 3000) / 3000);

		pcpu_histogram_record(h, v);
		pcpu_histogram_record(h4, v);
	}
	text = segment_text(path);
	le_set_of(text, "io_seconds", "read", &seg1);
	le_set_of(text, "io_default_seconds", "read", &segdflt);
	free(text);
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	le_set_of(text, "io_seconds", "read", &inproc);
	le_set_of(text, "io_default_seconds", "read", &dflt);
	free(text);
	/* Fixed from creation on; the layout's 1 per power of two, as in
	 * process, with the same cumulative counts at each bound. */
	CHECK(same_les(&seg0, &seg1) && same_les(&seg1, &inproc));
	check_grid(&seg1, 1, 1, 0);
	for (i = 0; i < inproc.n; i++)
		CHECK(seg1.count[i] == inproc.count[i]);
	CHECK(seg1.count[seg1.n - 1] == 3000);
	/* The default layout: 4 per power of two on both sides. */
	CHECK(same_les(&segdflt, &dflt) && dflt.n > seg1.n);
	check_grid(&segdflt, 4, 1, 0);
	/* The info family, read from the segment, in OpenMetrics. */
	text = segment_text_as(path, PCPU_FORMAT_OPENMETRICS);
	CHECK(strstr(text, "# TYPE app_build info\n"));
	CHECK(strstr(text, "app_build_info{version=\"1.2.3\"} 1\n"));
	free(text);
	CHECK(pcpu_segment_unpublish(seg) == 0);
	pcpu_registry_destroy(reg);
	CHECK(rmdir(dir) == 0);
}

int main(void)
{
	test_pairs();
	test_export_min();
	test_export_max();
	test_refused();
	test_segment();
	printf("exponential export tests passed\n");
	return 0;
}
