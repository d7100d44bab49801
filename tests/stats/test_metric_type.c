/*
 * The metric type table (pcpu_metric_type_info()) and the native form
 * (pcpu_snapshot_native()):
 *
 *  - every value of enum pcpu_metric_type is described, nothing else is;
 *  - the words are the specifications': a Prometheus text format 0.0.4
 *    type (counter, gauge, histogram, summary, untyped), an OpenMetrics 1.0
 *    type (counter, gauge, histogram, gaugehistogram, stateset, info,
 *    summary, unknown), and each type's the one those documents give it;
 *  - the table agrees with what the writers write: for one family of each
 *    type, the `# TYPE` lines of 0.0.4 and OpenMetrics, JSON's "type", and
 *    every sample name (family name + a suffix of the table, every one in
 *    the type's clash set);
 *  - the older views of it (pcpu_metric_type_name(),
 *    pcpu_stats_sample_suffix(), pcpu_stats_type_suffixes()) say the same;
 *  - pcpu_snapshot_native(): span, offset, deltas, zero bucket, count, an
 *    empty histogram, a short `cap`, and its errors.
 */
#include "../check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NTYPES 3 /* PCPU_METRIC_COUNTER .. PCPU_METRIC_HISTOGRAM */

static int in_list(const char *w, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(w, *list) == 0)
			return 1;
	return 0;
}

static int has_suffix(const struct pcpu_metric_type_info *t, const char *s)
{
	size_t k;

	for (k = 0; k < t->nsuffixes; k++)
		if (strcmp(t->suffixes[k], s) == 0)
			return 1;
	return 0;
}

/* The words of the specifications, and each type's. */
static void check_words(void)
{
	static const char *const text[] = { "counter", "gauge", "histogram", "summary", "untyped", NULL };
	static const char *const om[] = { "counter", "gauge", "histogram", "gaugehistogram", "stateset",
					  "info", "summary", "unknown", NULL };
	static const struct {
		enum pcpu_metric_type type;
		const char *word, *sample;
		enum pcpu_value_kind value;
		unsigned flags;
		enum pcpu_prom_kind prom;
		enum pcpu_otlp_kind otlp;
	} want[NTYPES] = {
		{ PCPU_METRIC_COUNTER, "counter", "_total", PCPU_VALUE_UNSIGNED,
		  PCPU_TYPE_MONOTONIC | PCPU_TYPE_FRACTIONS, PCPU_PROM_COUNTER, PCPU_OTLP_SUM },
		{ PCPU_METRIC_GAUGE, "gauge", "", PCPU_VALUE_SIGNED, PCPU_TYPE_FRACTIONS | PCPU_TYPE_INFO,
		  PCPU_PROM_GAUGE, PCPU_OTLP_GAUGE },
		{ PCPU_METRIC_HISTOGRAM, "histogram", "", PCPU_VALUE_BUCKETS,
		  PCPU_TYPE_MONOTONIC | PCPU_TYPE_FRACTIONS, PCPU_PROM_HISTOGRAM, PCPU_OTLP_HISTOGRAM },
	};
	const char *const *suf;
	int i;

	for (i = 0; i < NTYPES; i++) {
		const struct pcpu_metric_type_info *t = pcpu_metric_type_info(want[i].type);

		CHECK(t && t->type == want[i].type);
		CHECK(in_list(t->text_type, text) && in_list(t->openmetrics_type, om));
		CHECK(strcmp(t->name, want[i].word) == 0 && strcmp(t->text_type, want[i].word) == 0 &&
		      strcmp(t->openmetrics_type, want[i].word) == 0);
		CHECK(strcmp(t->sample_suffix, want[i].sample) == 0);
		CHECK(t->value == want[i].value && t->flags == want[i].flags);
		CHECK(t->prom == want[i].prom && t->otlp == want[i].otlp);
		/* The clash set: the family's own name first, then every
		 * sample name it writes (and _created for what OpenMetrics
		 * gives a start time). */
		CHECK(t->nsuffixes >= 1 && strcmp(t->suffixes[0], "") == 0);
		CHECK(has_suffix(t, t->sample_suffix));
		if (t->value == PCPU_VALUE_BUCKETS) {
			CHECK(strcmp(t->bucket_suffix, "_bucket") == 0 && strcmp(t->sum_suffix, "_sum") == 0 &&
			      strcmp(t->count_suffix, "_count") == 0 && strcmp(t->bucket_label, "le") == 0);
			CHECK(has_suffix(t, t->bucket_suffix) && has_suffix(t, t->sum_suffix) &&
			      has_suffix(t, t->count_suffix));
		} else {
			CHECK(!t->bucket_suffix && !t->sum_suffix && !t->count_suffix && !t->bucket_label);
		}
		CHECK(has_suffix(t, "_created") == ((t->flags & PCPU_TYPE_MONOTONIC) != 0));
		/* The older functions are views of the table. */
		CHECK(pcpu_metric_type_name(t->type) == t->name);
		CHECK(pcpu_stats_sample_suffix(t->type) == t->sample_suffix);
		CHECK(pcpu_stats_type_suffixes(t->type, &suf) == t->nsuffixes && suf == t->suffixes);
	}
	/* Nothing else is a type. */
	for (i = -2; i < 64; i++) {
		if (i >= PCPU_METRIC_COUNTER && i <= PCPU_METRIC_HISTOGRAM)
			continue;
		errno = 0;
		CHECK(pcpu_metric_type_info((enum pcpu_metric_type)i) == NULL && errno == EINVAL);
		CHECK(pcpu_metric_type_name((enum pcpu_metric_type)i) == NULL);
		CHECK(pcpu_stats_sample_suffix((enum pcpu_metric_type)i) == NULL);
		CHECK(pcpu_stats_type_suffixes((enum pcpu_metric_type)i, &suf) == 0 && !suf);
	}
}

/* The exposition of s in fmt, into *out (the caller's: returning a
 * local's value here sets off GCC's -Wdangling-pointer). */
static void write_fmt(const struct pcpu_snapshot *s, enum pcpu_format fmt, char **out)
{
	size_t len;

	if (pcpu_snapshot_write(s, fmt, out, &len) != 0) {
		fprintf(stderr, "write: %s\n", pcpu_stats_error());
		exit(1);
	}
}

/* Every sample line of a text exposition [text, stop) names family `name`
 * + one of the type's suffixes; returns how many lines there were. */
static int check_sample_names(const char *text, const char *stop, const char *name,
			      const struct pcpu_metric_type_info *t)
{
	const char *p = text;
	size_t n = strlen(name);
	int lines = 0;

	while (p < stop) {
		const char *e = strchr(p, '\n'), *end;
		char suffix[64];

		CHECK(e);
		if (*p != '#') {
			CHECK(strncmp(p, name, n) == 0);
			end = p + n + strcspn(p + n, "{ ");
			CHECK((size_t)(end - p - n) < sizeof suffix);
			memcpy(suffix, p + n, (size_t)(end - p - n));
			suffix[end - p - n] = '\0';
			CHECK(has_suffix(t, suffix));
			CHECK(t->value == PCPU_VALUE_BUCKETS ? strcmp(suffix, t->bucket_suffix) == 0 ||
								 strcmp(suffix, t->sum_suffix) == 0 ||
								 strcmp(suffix, t->count_suffix) == 0
							      : strcmp(suffix, t->sample_suffix) == 0);
			lines++;
		}
		p = e + 1;
	}
	return lines;
}

/* One family of each type through the writers: their words are the
 * table's. */
static void check_writers(void)
{
	static const int64_t upper[] = { 10, 20 };
	static const uint64_t counts[] = { 1, 2, 3 };
	int i;

	for (i = PCPU_METRIC_COUNTER; i <= PCPU_METRIC_HISTOGRAM; i++) {
		const struct pcpu_metric_type_info *t = pcpu_metric_type_info((enum pcpu_metric_type)i);
		struct pcpu_snapshot_series se;
		struct pcpu_snapshot_family f;
		struct pcpu_snapshot s = { 1, &f };
		char want[256], *text, *om, *json;
		const char *eof;

		memset(&se, 0, sizeof se);
		memset(&f, 0, sizeof f);
		f.name = "thing";
		f.help = "A thing.";
		f.type = (enum pcpu_metric_type)i;
		f.nseries = 1;
		f.series = &se;
		if (t->value == PCPU_VALUE_BUCKETS) {
			f.nbuckets = 3;
			f.bucket_upper = upper;
			se.value.histogram.counts = counts;
			se.value.histogram.sum = 40;
		} else {
			se.value.counter = 7;
		}
		write_fmt(&s, PCPU_FORMAT_PROMETHEUS, &text);
		snprintf(want, sizeof want, "# TYPE thing%s %s\n", t->sample_suffix, t->text_type);
		CHECK(strstr(text, want));
		snprintf(want, sizeof want, "# HELP thing%s A thing.\n", t->sample_suffix);
		CHECK(strstr(text, want));
		CHECK(check_sample_names(text, text + strlen(text), "thing", t) == (t->value == PCPU_VALUE_BUCKETS ? 5 : 1));
		if (t->bucket_label) {
			snprintf(want, sizeof want, "thing%s{%s=\"+Inf\"} 6\n", t->bucket_suffix, t->bucket_label);
			CHECK(strstr(text, want));
			snprintf(want, sizeof want, "thing%s 40\nthing%s 6\n", t->sum_suffix, t->count_suffix);
			CHECK(strstr(text, want));
		}
		write_fmt(&s, PCPU_FORMAT_OPENMETRICS, &om);
		snprintf(want, sizeof want, "# TYPE thing %s\n", t->openmetrics_type);
		CHECK(strncmp(om, want, strlen(want)) == 0);
		eof = strstr(om, "# EOF\n");
		CHECK(eof && !eof[6]);
		CHECK(check_sample_names(om, eof, "thing", t) == (t->value == PCPU_VALUE_BUCKETS ? 5 : 1));
		write_fmt(&s, PCPU_FORMAT_JSON, &json);
		snprintf(want, sizeof want, "\"type\":\"%s\"", t->name);
		CHECK(strstr(json, want));
		free(text);
		free(om);
		free(json);
	}
}

static void check_native(void)
{
	/* Schema 0, bucket 1 is native index 4: the zero bucket ends at
	 * 2^3. Buckets: zero, 0, 3, 0, 5, 0, +Inf. */
	static const int64_t upper[] = { 8, 16, 32, 64, 128, 256 };
	uint64_t counts[] = { 2, 0, 3, 0, 5, 0, 0 };
	struct pcpu_snapshot_series se;
	struct pcpu_snapshot_family f;
	struct pcpu_snapshot_native n;
	int64_t d[7];

	memset(&se, 0, sizeof se);
	memset(&f, 0, sizeof f);
	f.name = "nat";
	f.type = PCPU_METRIC_HISTOGRAM;
	f.flags = PCPU_SNAPSHOT_NATIVE;
	f.nbuckets = 7;
	f.bucket_upper = upper;
	f.native_schema = 0;
	f.native_index = 4;
	f.nseries = 1;
	f.series = &se;
	se.value.histogram.counts = counts;

	memset(d, 0x55, sizeof d);
	CHECK(pcpu_snapshot_native(&f, &se, &n, d, 7) == 0);
	CHECK(n.schema == 0 && n.zero_threshold == 8.0 && n.zero_count == 2 && n.count == 10);
	CHECK(n.first == 2 && n.offset == 5 && n.length == 3);
	CHECK(d[0] == 3 && d[1] == -3 && d[2] == 5 && d[3] == 0x5555555555555555);
	/* A short cap writes that many deltas, the rest untouched. */
	memset(d, 0x55, sizeof d);
	CHECK(pcpu_snapshot_native(&f, &se, &n, d, 1) == 0);
	CHECK(n.length == 3 && d[0] == 3 && d[1] == 0x5555555555555555);
	CHECK(pcpu_snapshot_native(&f, &se, &n, NULL, 0) == 0 && n.length == 3);
	/* Only the zero bucket: no span. */
	memset(counts, 0, sizeof counts);
	counts[0] = 4;
	CHECK(pcpu_snapshot_native(&f, &se, &n, d, 7) == 0);
	CHECK(n.length == 0 && n.offset == 0 && n.first == 0 && n.count == 4 && n.zero_count == 4);
	/* Schema 2, index -3: the zero bucket ends at 2^(-4/4) = 0.5. */
	f.native_schema = 2;
	f.native_index = -3;
	counts[6 - 1] = 1;
	CHECK(pcpu_snapshot_native(&f, &se, &n, d, 7) == 0);
	CHECK(n.zero_threshold == 0.5 && n.first == 5 && n.offset == 1 && n.length == 1 && d[0] == 1);
	/* Errors. */
	errno = 0;
	CHECK(pcpu_snapshot_native(NULL, &se, &n, d, 7) == -1 && errno == EINVAL);
	CHECK(pcpu_snapshot_native(&f, NULL, &n, d, 7) == -1 && errno == EINVAL);
	CHECK(pcpu_snapshot_native(&f, &se, NULL, d, 7) == -1 && errno == EINVAL);
	f.flags = 0; /* a classic histogram */
	errno = 0;
	CHECK(pcpu_snapshot_native(&f, &se, &n, d, 7) == -1 && errno == EINVAL);
	f.flags = PCPU_SNAPSHOT_NATIVE;
	f.type = PCPU_METRIC_GAUGE;
	errno = 0;
	CHECK(pcpu_snapshot_native(&f, &se, &n, d, 7) == -1 && errno == EINVAL);
	f.type = PCPU_METRIC_HISTOGRAM;
	f.nbuckets = 1;
	errno = 0;
	CHECK(pcpu_snapshot_native(&f, &se, &n, d, 7) == -1 && errno == EINVAL);
	f.nbuckets = 7;
	se.value.histogram.counts = NULL;
	errno = 0;
	CHECK(pcpu_snapshot_native(&f, &se, &n, d, 7) == -1 && errno == EINVAL);
}

int main(void)
{
	check_words();
	check_writers();
	check_native();
	printf("metric type table: %d types, words, writers and native form checked\n", NTYPES);
	return 0;
}
