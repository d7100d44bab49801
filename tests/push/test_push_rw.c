/*
 * The remote write encoder's bytes (tools/push_rw.c), checked without a
 * receiver: rw_encode() writes each TimeSeries and Sample itself (its hot
 * path) around Labels and Histograms packed by protobuf-c. Here the
 * request is uncompressed (snappy), decoded by protobuf-c
 * (pcpustat__rw__write_request__unpack) and packed again by protobuf-c
 * from the decoded messages: the two byte strings must be identical -- a
 * wrong tag, length, field order or a zero field written where protobuf-c
 * leaves it out all show -- and the decoded request must say what the
 * registry holds:
 *   - labels sorted by name, no empty value, __name__ and external labels
 *     (a series' own label wins over an external one of the same name);
 *   - counters as _total, gauges (0 and negative, scaled), the classic
 *     buckets cumulative with their le, _sum, _count;
 *   - the native histogram: schema, zero bucket, one span whose offset is
 *     the native index of the first non-empty bucket, deltas;
 *   - every sample at the push's timestamp; one metadata per family.
 */
#include <math.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/pcpu.h>

#include "push.h"
#include "remote_write.pb-c.h"

static int failures;

#define EXPECT(c, ...)                                                        \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
			failures++;                                           \
		}                                                             \
	} while (0)

static const char *label(const Pcpustat__Rw__TimeSeries *t, const char *name)
{
	size_t i;

	for (i = 0; i < t->n_labels; i++)
		if (strcmp(t->labels[i]->name, name) == 0)
			return t->labels[i]->value;
	return NULL;
}

/* How many series are named `name`. */
static size_t count_named(const Pcpustat__Rw__WriteRequest *r, const char *name)
{
	size_t i, n = 0;

	for (i = 0; i < r->n_timeseries; i++) {
		const char *nm = label(r->timeseries[i], "__name__");

		n += nm && strcmp(nm, name) == 0;
	}
	return n;
}

/* The one series named `name` with label k=v (k NULL: any). */
static const Pcpustat__Rw__TimeSeries *find(const Pcpustat__Rw__WriteRequest *r, const char *name, const char *k,
					    const char *v)
{
	const Pcpustat__Rw__TimeSeries *found = NULL;
	size_t i;

	for (i = 0; i < r->n_timeseries; i++) {
		const char *n = label(r->timeseries[i], "__name__"), *lv = k ? label(r->timeseries[i], k) : NULL;

		if (n && strcmp(n, name) == 0 && (!k || (lv && strcmp(lv, v) == 0))) {
			EXPECT(!found, "two series %s %s=%s", name, k ? k : "", v ? v : "");
			found = r->timeseries[i];
		}
	}
	EXPECT(found, "no series %s %s=%s", name, k ? k : "", v ? v : "");
	return found;
}

static double value_of(const Pcpustat__Rw__TimeSeries *t)
{
	return t && t->n_samples == 1 ? t->samples[0]->value : NAN;
}

static pcpu_registry_t *fill(void)
{
	static const char *const ln[] = { "method", "region" };
	static const char *const get[] = { "GET", "" }, *const put[] = { "PUT", "eu" };
	static const int64_t bounds[] = { 1000, 10000 };
	struct pcpu_histogram_layout ex = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = bounds, .nbounds = 2 };
	struct pcpu_histogram_layout xp = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 2 };
	pcpu_registry_t *reg = pcpu_registry_create();
	struct pcpu_family_desc d;
	pcpu_family_t *f;
	pcpu_histogram_t *h;

	memset(&d, 0, sizeof d);
	d.name = "req";
	d.help = "Requests.";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 2;
	d.label_names = ln;
	f = pcpu_registry_family(reg, &d);
	pcpu_counter_add(pcpu_family_counter(f, get), 12345678901ull);
	pcpu_counter_add(pcpu_family_counter(f, put), 0);
	pcpu_gauge_set(pcpu_registry_gauge(reg, "depth", "Depth."), -7);
	pcpu_gauge_set(pcpu_registry_gauge(reg, "zero", "Zero."), 0);
	memset(&d, 0, sizeof d);
	d.name = "lat_seconds";
	d.help = "Latency.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -6;
	d.histogram = &ex;
	h = pcpu_family_histogram(pcpu_registry_family(reg, &d), NULL);
	pcpu_histogram_record(h, 500);
	pcpu_histogram_record(h, 5000);
	pcpu_histogram_record(h, 50000);
	d.name = "nat_seconds";
	d.histogram = &xp;
	h = pcpu_family_histogram(pcpu_registry_family(reg, &d), NULL);
	pcpu_histogram_record(h, 0);
	pcpu_histogram_record(h, 3000);
	pcpu_histogram_record(h, 3100);
	pcpu_histogram_record(h, 90000);
	return reg;
}

static void check_labels(const Pcpustat__Rw__WriteRequest *r, int64_t ts)
{
	size_t i, j;

	for (i = 0; i < r->n_timeseries; i++) {
		const Pcpustat__Rw__TimeSeries *t = r->timeseries[i];

		for (j = 0; j < t->n_labels; j++) {
			EXPECT(*t->labels[j]->value, "empty label %s", t->labels[j]->name);
			EXPECT(!j || strcmp(t->labels[j - 1]->name, t->labels[j]->name) < 0, "labels not sorted: %s, %s",
			       t->labels[j - 1]->name, t->labels[j]->name);
		}
		EXPECT(label(t, "job") && !strcmp(label(t, "job"), "test"), "external job");
		EXPECT(label(t, "pcpu_segment") && !strcmp(label(t, "pcpu_segment"), "seg"), "merge label");
		for (j = 0; j < t->n_samples; j++)
			EXPECT(t->samples[j]->timestamp == ts, "timestamp %lld", (long long)t->samples[j]->timestamp);
		for (j = 0; j < t->n_histograms; j++)
			EXPECT(t->histograms[j]->timestamp == ts, "histogram timestamp");
	}
}

static void check_values(const Pcpustat__Rw__WriteRequest *r)
{
	const Pcpustat__Rw__TimeSeries *t;
	const Pcpustat__Rw__Histogram *h;
	int64_t c = 0;
	size_t i;

	t = find(r, "req_total", "method", "GET");
	EXPECT(value_of(t) == 12345678901.0 && !label(t, "region"), "GET %g", value_of(t));
	EXPECT(!strcmp(label(t, "method"), "GET"), "the series' own method wins over the external one");
	EXPECT(value_of(find(r, "req_total", "region", "eu")) == 0, "PUT");
	EXPECT(value_of(find(r, "depth", NULL, NULL)) == -7, "depth");
	EXPECT(value_of(find(r, "zero", NULL, NULL)) == 0, "zero");
	EXPECT(value_of(find(r, "lat_seconds_bucket", "le", "0.001")) == 1, "le 0.001");
	EXPECT(value_of(find(r, "lat_seconds_bucket", "le", "0.01")) == 2, "le 0.01");
	EXPECT(value_of(find(r, "lat_seconds_bucket", "le", "+Inf")) == 3, "le +Inf");
	EXPECT(value_of(find(r, "lat_seconds_count", NULL, NULL)) == 3, "count");
	EXPECT(fabs(value_of(find(r, "lat_seconds_sum", NULL, NULL)) - 0.0555) < 1e-15, "sum");
	/* --native-histograms: an exponential family as its native histogram
	 * alone (the classic family keeps its series, above). */
	EXPECT(!count_named(r, "nat_seconds_count") && !count_named(r, "nat_seconds_bucket") &&
		       !count_named(r, "nat_seconds_sum"),
	       "a native family's classic series sent with --native-histograms");
	t = find(r, "nat_seconds", NULL, NULL);
	if (!t || t->n_histograms != 1 || t->n_samples)
		return;
	h = t->histograms[0];
	EXPECT(h->count_case == PCPUSTAT__RW__HISTOGRAM__COUNT_COUNT_INT && h->count_int == 4, "count");
	EXPECT(fabs(h->sum - 0.0961) < 1e-15, "sum %.17g", h->sum);
	EXPECT(h->schema == 2 && h->zero_count_int == 1, "schema %d zero %llu", h->schema,
	       (unsigned long long)h->zero_count_int);
	EXPECT(h->zero_threshold > 0 && h->zero_threshold < 0.003, "zero threshold %g", h->zero_threshold);
	EXPECT(h->n_positive_spans == 1, "spans");
	if (h->n_positive_spans != 1)
		return;
	/* 0.003 s: base 2^(1/4), index ceil(log(0.003)/log(base)) = ceil(-33.5) = -33; 0.09: -13. */
	EXPECT(h->positive_spans[0]->offset == -33, "offset %d", h->positive_spans[0]->offset);
	EXPECT(h->positive_spans[0]->length == 21 && h->n_positive_deltas == 21, "length %u",
	       h->positive_spans[0]->length);
	for (i = 0; i < h->n_positive_deltas; i++) {
		c += h->positive_deltas[i];
		EXPECT(c == (i == 0 ? 2 : i == 20 ? 1 : 0), "bucket %zu holds %lld", i, (long long)c);
	}
	EXPECT(r->n_metadata == 5, "metadata %zu", r->n_metadata);
}

int main(void)
{
	static const char *const extra[] = { "pcpu_segment", "pcpu_pid" }, *const ev[] = { "seg", "42" };
	static const struct push_label ext[] = { { "job", "test" }, { "method", "NOT_THIS" } };
	pcpu_registry_t *reg = fill();
	struct pcpu_snapshot *s = pcpu_registry_snapshot(reg);
	pcpu_snapshot_merge_t *m = pcpu_snapshot_merge_new();
	const struct pcpu_snapshot *all;
	struct push_encode e = { ext, 2, 1, 1795599335768, 0, 0, NULL, NULL, (size_t)1 << 30, NULL, NULL };
	struct arena a = { 0 };
	Pcpustat__Rw__WriteRequest *r;
	uint8_t *z, *again;
	char err[200], *raw;
	size_t zlen, rawlen, n;

	if (!s || !m || pcpu_snapshot_merge_add(m, s, 2, extra, ev) < 0 || !(all = pcpu_snapshot_merge_result(m)) ||
	    rw_encode(all, &e, &a, &z, &zlen, err, sizeof err) < 0) {
		fprintf(stderr, "FAIL: encoding: %s\n", err);
		return 1;
	}
	if (snappy_uncompressed_length((char *)z, zlen, &rawlen) != SNAPPY_OK || !(raw = malloc(rawlen)) ||
	    snappy_uncompress((char *)z, zlen, raw, &rawlen) != SNAPPY_OK) {
		fputs("FAIL: not snappy's block format\n", stderr);
		return 1;
	}
	r = pcpustat__rw__write_request__unpack(NULL, rawlen, (uint8_t *)raw);
	if (!r) {
		fputs("FAIL: protobuf-c cannot decode the request\n", stderr);
		return 1;
	}
	n = pcpustat__rw__write_request__get_packed_size(r);
	again = malloc(n);
	pcpustat__rw__write_request__pack(r, again);
	EXPECT(n == rawlen && memcmp(again, raw, n) == 0, "the request is not protobuf-c's packing of itself "
	       "(%zu bytes, protobuf-c %zu)", rawlen, n);
	check_labels(r, e.now_ms);
	check_values(r);
	pcpustat__rw__write_request__free_unpacked(r, NULL);
	free(again);
	free(raw);
	free(z);
	arena_free(&a);
	pcpu_snapshot_merge_free(m);
	pcpu_snapshot_free(s);
	pcpu_registry_destroy(reg);
	if (failures)
		printf("test_push_rw: %d failures\n", failures);
	else
		printf("test_push_rw: ok (%zu bytes, byte-identical to protobuf-c's packing)\n",
		       rawlen);
	return failures != 0;
}
