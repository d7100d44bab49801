/*
 * Values beyond the integer words (issue 50, segment format 2.8): counters,
 * gauges and histogram sums of families with fractions cover what a double
 * covers -- 16e9, 1e-12, 1e300, +-Inf, NaN -- and stay exact where the
 * words are (0.1 added ten times reads 1; 16e9 reads 16000000000). Checks
 * every writer (Prometheus text, OpenMetrics, JSON, protobuf), snapshots,
 * the read functions, sets (bit for bit, -0.0 included), a byte
 * histogram's sum past 2^63 billionths, the integer sums' guard (a sum
 * that would wrap goes to the doubles), and a published segment read back
 * by the reader: its exposition equals the registry's own, byte for byte.
 */
#include "../check.h"
#include "segment_text.h"
#include <pcpu/pcpu.h>
#include <pcpu/fraction.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
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
#define CHECK_LACKS(text, line)                                                             \
	do {                                                                                \
		if (strstr((text), (line))) {                                               \
			fprintf(stderr, "%s:%d: unexpected [%s] in:\n%s\n", __FILE__, __LINE__, \
				(line), (text));                                            \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

static int same_bits(double a, double b)
{
	return memcmp(&a, &b, sizeof a) == 0;
}

static char *write_all(pcpu_registry_t *reg, enum pcpu_format fmt, size_t *len)
{
	char *out;
	size_t n;

	CHECK(pcpu_registry_write(reg, fmt, &out, &n) == 0);
	if (len)
		*len = n;
	return out;
}

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

static const char *const kn[] = { "k" };
#define KV(s) ((const char *const[]){ (s) })

/* The gauges and counters of the issue, set and added. */
static void fill(pcpu_registry_t *reg)
{
	struct pcpu_family_desc g = desc("bw_mem_bytes", PCPU_METRIC_GAUGE, 1, kn);
	struct pcpu_family_desc c = desc("bw_busy_seconds_total", PCPU_METRIC_COUNTER, 1, kn);
	pcpu_family_t *fg, *fc;
	pcpu_gauge_t x;
	pcpu_counter_t y;
	int i;

	g.unit = "bytes";
	CHECK((fg = pcpu_registry_family_ex(reg, &g, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL)) != NULL);
	CHECK((fc = pcpu_registry_family_ex(reg, &c, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL)) != NULL);
	CHECK(pcpu_gauge_set_double(pcpu_family_gauge(fg, KV("big")), 16e9) == 0);
	CHECK(pcpu_gauge_set_double(pcpu_family_gauge(fg, KV("tiny")), 1e-12) == 0);
	CHECK(pcpu_gauge_set_double(pcpu_family_gauge(fg, KV("huge")), 1e300) == 0);
	CHECK(pcpu_gauge_set_double(pcpu_family_gauge(fg, KV("inf")), INFINITY) == 0);
	pcpu_gauge_add_double(pcpu_family_gauge(fg, KV("ninf")), -INFINITY);
	CHECK(pcpu_gauge_set_double(pcpu_family_gauge(fg, KV("nan")), NAN) == 0);
	x = pcpu_family_gauge(fg, KV("tenth"));
	for (i = 0; i < 10; i++)
		pcpu_gauge_add_double(x, 0.1);
	CHECK(pcpu_gauge_set_double(pcpu_family_gauge(fg, KV("third")), 1.0 / 3) == 0);
	CHECK(pcpu_gauge_set_double(pcpu_family_gauge(fg, KV("negzero")), -0.0) == 0);
	/* Adds beyond the words, then back: the residue's sum. */
	x = pcpu_family_gauge(fg, KV("down"));
	pcpu_gauge_add_double(x, 1e300);
	pcpu_gauge_add_double(x, 7.5);
	pcpu_gauge_add_double(x, -1e300);
	/* A set after adds of every kind: exactly the set value. */
	x = pcpu_family_gauge(fg, KV("reset"));
	pcpu_gauge_add_double(x, 3e19);
	pcpu_gauge_add_double(x, 0.25);
	pcpu_gauge_add_double(x, NAN);
	CHECK(pcpu_gauge_set_double(x, 2.5) == 0);
	/* A counter: integers exact, billionths exact, tiny adds kept. */
	y = pcpu_family_counter(fc, KV("a"));
	pcpu_counter_add_double(y, 16e9);
	pcpu_counter_add_double(y, 0.125);
	y = pcpu_family_counter(fc, KV("tiny"));
	for (i = 0; i < 1024; i++)
		pcpu_counter_add_double(y, 0x1p-40); /* 9.1e-13: below a billionth */
	y = pcpu_family_counter(fc, KV("beyond"));
	pcpu_counter_add_double(y, 0x1p70);
	pcpu_counter_add_double(y, 1);
	CHECK(pcpu_counter_set_double(pcpu_family_counter(fc, KV("set")), 1e20) == 0);
}

static const struct {
	const char *k;
	double v;
	const char *text, *json;
} want[] = {
	{ "big", 16e9, "16000000000", "16000000000" },
	{ "tiny", 1e-12, "1e-12", "1e-12" },
	{ "huge", 1e300, "1e+300", "1e+300" },
	{ "inf", INFINITY, "+Inf", "\"+Inf\"" },
	{ "ninf", -INFINITY, "-Inf", "\"-Inf\"" },
	{ "tenth", 1, "1", "1" },
	{ "third", 1.0 / 3, "0.3333333333333333", "0.3333333333333333" },
	{ "down", 7.5, "7.5", "7.5" },
	{ "reset", 2.5, "2.5", "2.5" },
};

static void check_text(const char *t, int json)
{
	char line[128];
	size_t k;

	for (k = 0; k < sizeof want / sizeof *want; k++) {
		if (json)
			snprintf(line, sizeof line, "{\"labels\":{\"k\":\"%s\"},\"value\":%s}", want[k].k,
				 want[k].json);
		else
			snprintf(line, sizeof line, "bw_mem_bytes{k=\"%s\"} %s\n", want[k].k, want[k].text);
		CHECK_HAS(t, line);
	}
	CHECK_HAS(t, json ? "\"value\":\"NaN\"" : "bw_mem_bytes{k=\"nan\"} NaN\n");
	CHECK_HAS(t, json ? "{\"labels\":{\"k\":\"a\"},\"value\":1.6000000000125e+10}"
			  : "bw_busy_seconds_total{k=\"a\"} 1.6000000000125e+10\n");
	CHECK_HAS(t, json ? "{\"labels\":{\"k\":\"tiny\"},\"value\":9.313225746154785e-10}"
			  : "bw_busy_seconds_total{k=\"tiny\"} 9.313225746154785e-10\n");
	CHECK_HAS(t, json ? "{\"labels\":{\"k\":\"beyond\"},\"value\":1.1805916207174113e+21}"
			  : "bw_busy_seconds_total{k=\"beyond\"} 1.1805916207174113e+21\n");
	CHECK_HAS(t, json ? "{\"labels\":{\"k\":\"set\"},\"value\":1e+20}"
			  : "bw_busy_seconds_total{k=\"set\"} 1e+20\n");
}

/* The value every reader computes, and the read functions. */
static void check_snapshot(pcpu_registry_t *reg)
{
	struct pcpu_snapshot *s = pcpu_registry_snapshot(reg);
	const struct pcpu_snapshot_family *f = NULL;
	size_t i, k;

	CHECK(s != NULL);
	for (i = 0; i < s->nfamilies; i++)
		if (strcmp(s->families[i].name, "bw_mem_bytes") == 0)
			f = &s->families[i];
	CHECK(f && (f->flags & PCPU_SNAPSHOT_NANOS));
	for (i = 0; i < f->nseries; i++) {
		const char *key = f->series[i].label_values[0];
		double v = pcpu_snapshot_value(f, &f->series[i]);

		for (k = 0; k < sizeof want / sizeof *want; k++)
			if (strcmp(key, want[k].k) == 0)
				CHECK(same_bits(v, want[k].v));
		if (strcmp(key, "nan") == 0)
			CHECK(isnan(v));
		if (strcmp(key, "negzero") == 0)
			CHECK(v == 0 && signbit(v));
		if (strcmp(key, "big") == 0) /* exact in the words, no residue */
			CHECK(f->series[i].value.fixed.whole == 16000000000ull &&
			      f->series[i].value.fixed.residue == 0.0);
	}
	pcpu_snapshot_free(s);
	{
		pcpu_family_t *fam = pcpu_registry_find(reg, "bw_mem_bytes");

		CHECK(same_bits(pcpu_gauge_read_double(pcpu_family_lookup(fam, KV("third"))), 1.0 / 3));
		CHECK(isinf(pcpu_gauge_read_double(pcpu_family_lookup(fam, KV("inf")))));
		CHECK(pcpu_gauge_read_double(pcpu_family_lookup(fam, KV("big"))) == 16e9);
		errno = 0;
		CHECK(isnan(pcpu_gauge_read_double(NULL)) && errno == EINVAL);
		CHECK(pcpu_gauge_set_double(NULL, 1) == -1 && errno == EINVAL);
	}
}

/* pcpu_fraction_split() then pcpu_fraction_value(): every double back. */
static void check_split(void)
{
	static const double vs[] = { 0.0, -0.0, 1.0 / 3, -2.0 / 3, 0.1, 1e-12, 4.9e-10, 5e-10, 1.000000000001,
				     16e9, 9.2e18, 0x1p62, -0x1p62, 1e300, -1e-300, 123456789.987654321,
				     INFINITY, -INFINITY, 5e-324 };
	size_t i;
	int s;

	for (s = 0; s < 2; s++)
		for (i = 0; i < sizeof vs / sizeof *vs; i++) {
			int64_t w, n;
			double r;

			CHECK(pcpu_fraction_split(vs[i], s, &w, &n, &r) == 0);
			CHECK(same_bits(pcpu_fraction_value((uint64_t)w, n, r, s), vs[i]));
			if (fabs(vs[i]) < 0x1p62 && (s || vs[i] >= 0))
				CHECK(llabs(n) <= 1000000000);
		}
	{
		int64_t w, n;
		double r;

		CHECK(pcpu_fraction_split(NAN, 1, &w, &n, &r) == 0 && w == 0 && n == 0 && isnan(r));
		CHECK(pcpu_fraction_split(16e9, 1, &w, &n, &r) == 0 && w == 16000000000 && n == 0 && r == 0);
		CHECK(pcpu_fraction_split(1, 1, NULL, &n, &r) == -1 && errno == EINVAL);
	}
}

static pcpu_histogram_t *histogram(pcpu_registry_t *reg, const char *name, const char *unit,
				   int scale, const struct pcpu_histogram_layout *l, const char *v)
{
	struct pcpu_family_desc d = desc(name, PCPU_METRIC_HISTOGRAM, 1, kn);
	pcpu_family_t *f;

	d.unit = unit;
	d.scale_exp10 = scale;
	d.histogram = l;
	CHECK((f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL)) != NULL);
	return pcpu_family_histogram(f, KV(v));
}

/* Histogram sums: a byte histogram in billionths (as the Rust recorder
 * records) past 2^63 billionths, exact decimals in range, +-Inf and NaN. */
static void fill_histograms(pcpu_registry_t *reg)
{
	static const int64_t secs[] = { 5000000, 10000000, 100000000, 1000000000, 10000000000 };
	struct pcpu_histogram_layout ll = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 3,
					    .max_value = (int64_t)1 << 62 };
	struct pcpu_histogram_layout ex = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = secs, .nbounds = 5 };
	pcpu_histogram_t *h;
	int i;

	h = histogram(reg, "bw_transfer_bytes", "bytes", -9, &ll, "big");
	for (i = 0; i < 1000000; i++)
		pcpu_histogram_observe(h, 5e9);
	h = histogram(reg, "bw_transfer_bytes", "bytes", -9, &ll, "tiny");
	pcpu_histogram_observe(h, 1e-12);
	pcpu_histogram_observe(h, 2e-12);
	h = histogram(reg, "bw_wait_seconds", "seconds", -9, &ex, "tenth");
	for (i = 0; i < 10; i++)
		pcpu_histogram_observe(h, 0.1);
	pcpu_histogram_observe(h, 0.005);
	h = histogram(reg, "bw_wait_seconds", "seconds", -9, &ex, "inf");
	pcpu_histogram_observe(h, 2);
	pcpu_histogram_observe(h, INFINITY);
	h = histogram(reg, "bw_wait_seconds", "seconds", -9, &ex, "nan");
	pcpu_histogram_observe(h, 2);
	pcpu_histogram_observe(h, NAN);
	h = histogram(reg, "bw_wait_seconds", "seconds", -9, &ex, "neg");
	pcpu_histogram_observe(h, -1e20); /* explicit: the first bucket, the sum negative */
}

static void check_histogram_text(const char *t, int om)
{
	CHECK_HAS(t, "bw_transfer_bytes_sum{k=\"big\"} 5e+15\n");
	CHECK_HAS(t, "bw_transfer_bytes_count{k=\"big\"} 1000000\n");
	CHECK_HAS(t, "bw_transfer_bytes_sum{k=\"tiny\"} 3e-12\n");
	CHECK_HAS(t, "bw_wait_seconds_sum{k=\"tenth\"} 1.005\n");
	CHECK_HAS(t, "bw_wait_seconds_bucket{k=\"tenth\",le=\"0.005\"} 1\n");
	CHECK_HAS(t, "bw_wait_seconds_bucket{k=\"inf\",le=\"+Inf\"} 2\n");
	CHECK_HAS(t, "bw_wait_seconds_sum{k=\"inf\"} +Inf\n");
	CHECK_HAS(t, "bw_wait_seconds_bucket{k=\"nan\",le=\"+Inf\"} 2\n");
	CHECK_HAS(t, "bw_wait_seconds_bucket{k=\"neg\",le=\"0.005\"} 1\n");
	if (om) { /* OpenMetrics has neither a NaN nor a negative sum: both left out */
		CHECK_LACKS(t, "bw_wait_seconds_sum{k=\"nan\"}");
		CHECK_LACKS(t, "bw_wait_seconds_count{k=\"nan\"}");
		CHECK_LACKS(t, "bw_wait_seconds_sum{k=\"neg\"}");
	} else {
		CHECK_HAS(t, "bw_wait_seconds_sum{k=\"nan\"} NaN\n");
		CHECK_HAS(t, "bw_wait_seconds_sum{k=\"neg\"} -1e+20\n");
	}
}

/* The integer sums' guard: a value in range, recorded until the integer
 * sum would pass 2^63 units (it wraps without the guard), reads exactly.
 * The slot's sum word fills up to its share and the rest goes to the
 * double sums; the total is exact (every value and partial sum is an
 * integer below 2^53 units, so the doubles add exactly). */
static void check_guard(pcpu_registry_t *reg)
{
	static const int64_t bound[] = { (int64_t)1 << 62 };
	struct pcpu_histogram_layout one = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = bound, .nbounds = 1 };
	pcpu_histogram_t *h = histogram(reg, "bw_guard_bytes", "bytes", 0, &one, "a");
	/* In range, a whole number of units, and a power of two: every
	 * partial sum is then a multiple of v below 2^12 v, which a double
	 * holds exactly whatever the cap (it shrinks as slots grow: with
	 * PCPU_NSLOTS=64 half of it is not a power of two, and sums of it
	 * past 2^53 round). */
	double v = ldexp(1.0, ilogb(h->pcpu__cap / 2));
	uint64_t n = (uint64_t)(0x1p63 / v * 1.5), i;
	struct pcpu_snapshot *s;
	size_t k;

	CHECK(v >= 1e6);
	for (i = 0; i < n; i++)
		pcpu_histogram_observe(h, v);
	s = pcpu_registry_snapshot(reg);
	CHECK(s != NULL);
	for (k = 0; k < s->nfamilies; k++) {
		const struct pcpu_snapshot_family *f = &s->families[k];

		if (strcmp(f->name, "bw_guard_bytes") != 0)
			continue;
		CHECK(f->nseries == 1);
		/* exact: n * v < 2^63 * 1.5, a multiple of v < 2^12 v */
		CHECK(pcpu_snapshot_sum(f, &f->series[0]) == (double)n * v);
		CHECK(f->series[0].value.histogram.counts[0] == n);
		/* the integer sum holds what it can, never a wrapped value */
		CHECK(f->series[0].value.histogram.sum > 0 && f->series[0].value.histogram.residue > 0);
	}
	pcpu_snapshot_free(s);
}

/* A reader kept open reads a directory it knows from its cache (issue
 * 51): values read again, residues and the histograms' doubles too --
 * never the residue of the read before added in. */
static void check_kept_reader(pcpu_registry_t *reg, pcpu_segment_t *seg)
{
	struct pcpu_family_desc g = desc("bw_mem_bytes", PCPU_METRIC_GAUGE, 1, kn);
	struct pcpu_reader_options ro;
	struct pcpu_reader_snapshot *rs;
	pcpu_reader_t *r;
	pcpu_family_t *fg;
	pcpu_histogram_t *h;
	char *t, *u;
	size_t len;
	int round;

	g.unit = "bytes";
	CHECK((fg = pcpu_registry_family_ex(reg, &g, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL)) != NULL);
	h = histogram(reg, "bw_transfer_bytes", "bytes", -9,
		      &(struct pcpu_histogram_layout){ .scheme = PCPU_HISTOGRAM_LOG_LINEAR,
						       .precision_bits = 3,
						       .max_value = (int64_t)1 << 62 },
		      "big");
	memset(&ro, 0, sizeof ro);
	CHECK((r = pcpu_reader_open(pcpu_segment_path(seg), &ro)) != NULL);
	for (round = 0; round < 3; round++) {
		CHECK(pcpu_reader_snapshot(r, 0, &rs) == 0);
		CHECK(pcpu_snapshot_write(&rs->snapshot, PCPU_FORMAT_PROMETHEUS, &u, &len) == 0);
		pcpu_reader_snapshot_free(rs);
		t = write_all(reg, PCPU_FORMAT_PROMETHEUS, NULL);
		if (strcmp(t, u) != 0) {
			fprintf(stderr, "kept reader, round %d: registry\n%s\nsegment\n%s\n", round, t, u);
			exit(1);
		}
		free(t);
		free(u);
		/* Residues that change, the directory the same. */
		CHECK(pcpu_gauge_set_double(pcpu_family_gauge(fg, KV("huge")), round ? -1e300 : 3e300) == 0);
		pcpu_gauge_add_double(pcpu_family_gauge(fg, KV("tiny")), 1e-12);
		pcpu_histogram_observe(h, 1e30);
	}
	pcpu_reader_close(r);
}

int main(void)
{
	char dir[] = "/tmp/pcpu-beyond-XXXXXX";
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	char *t, *u;
	size_t len;
	int fmt;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	check_split();
	reg = pcpu_registry_create();
	CHECK(reg != NULL);
	seg = pcpu_segment_publish(reg, "beyond", NULL);
	CHECK(seg != NULL);
	fill(reg);
	fill_histograms(reg);
	t = write_all(reg, PCPU_FORMAT_PROMETHEUS, NULL);
	check_text(t, 0);
	check_histogram_text(t, 0);
	free(t);
	t = write_all(reg, PCPU_FORMAT_OPENMETRICS, NULL);
	check_text(t, 0);
	check_histogram_text(t, 1);
	free(t);
	t = write_all(reg, PCPU_FORMAT_JSON, NULL);
	check_text(t, 1);
	CHECK_HAS(t, "\"count\":1000000,\"sum\":5e+15,");
	CHECK_HAS(t, "\"count\":2,\"sum\":\"NaN\",");
	CHECK_HAS(t, "\"count\":2,\"sum\":\"+Inf\",");
	free(t);
	if (pcpu_format_supported(PCPU_FORMAT_PROTOBUF)) {
		/* doubles in the messages: their bytes are there */
		const double pb[] = { 16e9, 1e-12, 1e300, INFINITY, -INFINITY, 1, 1.0 / 3, 5e15, 1.005 };
		size_t k;

		t = write_all(reg, PCPU_FORMAT_PROTOBUF, &len);
		for (k = 0; k < sizeof pb / sizeof *pb; k++)
			CHECK(memmem(t, len, &pb[k], sizeof pb[k]) != NULL);
		free(t);
	}
	check_snapshot(reg);
	/* Another process's view: the segment's exposition is the registry's
	 * own, byte for byte, in every text format. */
	for (fmt = PCPU_FORMAT_PROMETHEUS; fmt <= PCPU_FORMAT_JSON; fmt++) {
		t = write_all(reg, (enum pcpu_format)fmt, NULL);
		u = segment_text_as(pcpu_segment_path(seg), (enum pcpu_format)fmt);
		if (strcmp(t, u) != 0) {
			fprintf(stderr, "format %d: registry\n%s\nsegment\n%s\n", fmt, t, u);
			return 1;
		}
		free(t);
		free(u);
	}
	check_kept_reader(reg, seg);
	check_guard(reg);
	CHECK(pcpu_segment_unpublish(seg) == 0);
	pcpu_registry_destroy(reg);
	rmdir(dir);
	puts("ok");
	return 0;
}
