/*
 * Exposition: a registry with every metric type and hostile label values
 * (quotes, backslashes, newlines, UTF-8) written in the three formats and
 * compared byte for byte with golden files; and the writers' refusals of
 * invalid snapshots (whole output or nothing).
 *
 *   test_expose --golden DIR          compare with DIR/expose.{prom,om,json}
 *   test_expose --golden DIR --update rewrite the golden files
 *   test_expose --out DIR             write the files (for promtool and the
 *                                     OpenMetrics parser checks)
 */
#include "../check.h"
#include <pcpu/pcpu.h>
#include <pcpu/stats.h>
#include <errno.h>
#include <string.h>

#define HOSTILE "a \"quoted\" \\back\\slash\\\nnew line\t tab \xc3\xbc \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80 }{=,"

struct ep_stats {
	struct pcpu_counter pkts;
	struct pcpu_counter bytes;
	struct pcpu_gauge flows;
};

static const struct pcpu_stats_field ep_fields[] = {
	PCPU_STATS_COUNTER(struct ep_stats, pkts, "ep_packets_total", "Packets processed."),
	PCPU_STATS_COUNTER(struct ep_stats, bytes, "ep_bytes", "Bytes processed."),
	PCPU_STATS_GAUGE(struct ep_stats, flows, "ep_flows", "Flows open."),
};

static pcpu_registry_t *build_registry(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	static const char *const req_labels[] = { "method", "path" };
	static const char *const queue_label[] = { "queue" };
	static const char *const handler_label[] = { "handler" };
	static const char *const iface_label[] = { "iface" };
	static const int64_t dur_bounds[] = { 5000000,   10000000,   25000000,  50000000,
					      100000000, 250000000,  500000000, 1000000000,
					      2500000000, 5000000000, 10000000000 };
	static const struct pcpu_histogram_layout dur_layout = { PCPU_HISTOGRAM_EXPLICIT, dur_bounds,
								 11, 0, 0, 0, 0, 0, 0 };
	static const struct pcpu_histogram_layout size_layout = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0,
								  2, 1000000, 0, 0, 0, 0 };
	struct pcpu_family_desc d;
	pcpu_family_t *f;
	pcpu_counter_t c;
	pcpu_gauge_t g;
	pcpu_histogram_t *h;
	struct ep_stats *ep0, *ep1;
	int i;

	CHECK(reg);

	memset(&d, 0, sizeof d);
	d.name = "http_requests_total";
	d.help = "HTTP requests served.";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 2;
	d.label_names = req_labels;
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	{
		const char *v1[] = { "GET", "/" }, *v2[] = { "POST", HOSTILE },
			   *v3[] = { "GET", "\xc3\xbc/\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e/\xf0\x9f\x9a\x80" },
			   *v4[] = { "", "" };
		c = pcpu_family_counter(f, v1);
		CHECK(c);
		pcpu_counter_add(c, 1027);
		c = pcpu_family_counter(f, v2);
		CHECK(c);
		pcpu_counter_add(c, 3);
		c = pcpu_family_counter(f, v3);
		CHECK(c);
		pcpu_counter_add(c, 7);
		CHECK(pcpu_family_counter(f, v4));
	}

	memset(&d, 0, sizeof d);
	d.name = "queue_depth";
	d.help = "Help with \\backslash, \"quotes\" and a\nnewline \xe2\x80\x94 \xc3\xbc.";
	d.type = PCPU_METRIC_GAUGE;
	d.nlabels = 1;
	d.label_names = queue_label;
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	{
		const char *v1[] = { "rx" }, *v2[] = { "tx\"\\\n" };
		g = pcpu_family_gauge(f, v1);
		CHECK(g);
		pcpu_gauge_sub(g, 5);
		g = pcpu_family_gauge(f, v2);
		CHECK(g);
		CHECK(pcpu_gauge_set(g, 12) == 0);
	}

	memset(&d, 0, sizeof d);
	d.name = "request_duration_seconds";
	d.help = "Request latency.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.nlabels = 1;
	d.label_names = handler_label;
	d.scale_exp10 = -9; /* recorded in ns */
	d.histogram = &dur_layout;
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	{
		const char *v1[] = { "/api" }, *v2[] = { HOSTILE };
		h = pcpu_family_histogram(f, v1);
		CHECK(h);
		pcpu_histogram_record(h, 3000000);     /* 3 ms */
		pcpu_histogram_record(h, 5000000);     /* exactly 5 ms: le 0.005 */
		pcpu_histogram_record(h, 5000001);
		pcpu_histogram_record(h, 120000000);   /* 120 ms */
		pcpu_histogram_record(h, 20000000000); /* 20 s: +Inf */
		h = pcpu_family_histogram(f, v2);
		CHECK(h);
		pcpu_histogram_record_n(h, 1000000000, 3);
	}

	memset(&d, 0, sizeof d);
	d.name = "payload_bytes";
	d.help = "Payload sizes (log-linear, 2 bits).";
	d.unit = "bytes";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.histogram = &size_layout;
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	h = pcpu_family_histogram(f, NULL);
	CHECK(h);
	for (i = 0; i < 20; i++)
		pcpu_histogram_record(h, (int64_t)1 << i);
	pcpu_histogram_record(h, 1500);
	pcpu_histogram_record(h, 1500);
	pcpu_histogram_record(h, 5000000); /* above max: +Inf */

	{
		/* Native (exponential) buckets, schema 0: one per power of two. */
		static const struct pcpu_histogram_layout native = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL,
								     .schema = 0 };
		static const char *const op_label[] = { "op" };
		static const char *const rd[] = { "read" }, *const wr[] = { "write" };

		memset(&d, 0, sizeof d);
		d.name = "io_size_bytes";
		d.help = "I/O sizes (native histogram, schema 0).";
		d.unit = "bytes";
		d.type = PCPU_METRIC_HISTOGRAM;
		d.nlabels = 1;
		d.label_names = op_label;
		d.histogram = &native;
		f = pcpu_registry_family(reg, &d);
		CHECK(f);
		h = pcpu_family_histogram(f, rd);
		CHECK(h && pcpu_family_histogram(f, wr)); /* "write": no observations */
		for (i = 0; i < 40; i++)
			pcpu_histogram_record(h, (int64_t)1 << (i % 13));
		pcpu_histogram_record(h, 0);
		pcpu_histogram_record(h, -7); /* recorded as 0 */
		pcpu_histogram_record(h, 3000);
	}

	memset(&d, 0, sizeof d);
	d.name = "process_cpu_seconds";
	d.help = "CPU time, counted in nanoseconds.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_COUNTER;
	d.scale_exp10 = -9;
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	c = pcpu_family_counter(f, NULL);
	CHECK(c);
	pcpu_counter_add(c, 1234567891);

	memset(&d, 0, sizeof d);
	d.name = "temperature_celsius";
	d.help = "Scaled gauge, negative: tenths of a degree.";
	d.unit = "celsius";
	d.type = PCPU_METRIC_GAUGE;
	d.scale_exp10 = -1;
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	g = pcpu_family_gauge(f, NULL);
	CHECK(g);
	CHECK(pcpu_gauge_set(g, -2735) == 0);
	memset(&d, 0, sizeof d);
	d.name = "big_scale_ratio";
	d.help = "A gauge exposed times 10^6.";
	d.type = PCPU_METRIC_GAUGE;
	d.scale_exp10 = 6;
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	g = pcpu_family_gauge(f, NULL);
	CHECK(g);
	pcpu_gauge_add(g, 15);

	memset(&d, 0, sizeof d);
	d.name = "idle_workers";
	d.help = "A family with no series yet.";
	d.type = PCPU_METRIC_GAUGE;
	CHECK(pcpu_registry_family(reg, &d));

	{
		const char *e0[] = { "eth0" }, *e1[] = { "eth1" };
		ep0 = pcpu_registry_struct(reg, sizeof *ep0, ep_fields, 3, 1, iface_label, e0);
		ep1 = pcpu_registry_struct(reg, sizeof *ep1, ep_fields, 3, 1, iface_label, e1);
		CHECK(ep0 && ep1);
		for (i = 0; i < 10; i++) {
			pcpu_counter_add(&ep0->pkts, 1);
			pcpu_counter_add(&ep0->bytes, 1500);
		}
		pcpu_counter_add(&ep1->pkts, 2);
		pcpu_counter_add(&ep1->bytes, 128);
		pcpu_gauge_add(&ep0->flows, 4);
		pcpu_gauge_set(&ep1->flows, 9);
	}
	memset(&d, 0, sizeof d);
	d.name = "small_ratio";
	d.help = "A gauge in units of 10^-5.";
	d.type = PCPU_METRIC_GAUGE;
	d.scale_exp10 = -5;
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	g = pcpu_family_gauge(f, NULL);
	CHECK(g);
	pcpu_gauge_inc(g);
	c = pcpu_registry_counter(reg, "plain_events_total", "An unlabelled counter.");
	CHECK(c);
	pcpu_counter_add(c, 18446744073709551615ull); /* 2^64 - 1: printed exactly */
	{
		/* An info metric: OpenMetrics type `info` (family app_build,
		 * sample app_build_info), a gauge in 0.0.4 and JSON. */
		static const char *const bn[] = { "version", "revision" };
		static const char *const bv[] = { "1.2.3", HOSTILE }, *const bv2[] = { "1.2.4", "def" };

		CHECK(pcpu_registry_info(reg, "app_build_info", "Build information.", 2, bn, bv) == 0);
		CHECK(pcpu_registry_info(reg, "app_build_info", "Build information.", 2, bn, bv2) == 0);
	}
	return reg;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	CHECK(buf);
	CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void write_file(const char *path, const char *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	CHECK(f);
	CHECK(fwrite(buf, 1, len, f) == len);
	CHECK(fclose(f) == 0);
}

static const char *const exts[] = { NULL, "prom", "om", "json" };

static int golden(pcpu_registry_t *reg, const char *dir, int update, const char *outdir)
{
	int fmt, bad = 0;

	for (fmt = PCPU_FORMAT_PROMETHEUS; fmt <= PCPU_FORMAT_JSON; fmt++) {
		char path[4096], *out, *want;
		size_t len, wlen;

		CHECK(pcpu_registry_write(reg, (enum pcpu_format)fmt, &out, &len) == 0);
		CHECK(strlen(out) == len);
		{
			/* The validating path (any snapshot) writes the same. */
			struct pcpu_snapshot *s = pcpu_registry_snapshot(reg);
			char *out2;
			size_t len2;

			CHECK(s);
			CHECK(pcpu_snapshot_write(s, (enum pcpu_format)fmt, &out2, &len2) == 0);
			CHECK(len2 == len && memcmp(out, out2, len) == 0);
			free(out2);
			pcpu_snapshot_free(s);
		}
		if (outdir) {
			snprintf(path, sizeof path, "%s/expose.%s", outdir, exts[fmt]);
			write_file(path, out, len);
		}
		if (dir) {
			snprintf(path, sizeof path, "%s/expose.%s", dir, exts[fmt]);
			if (update) {
				write_file(path, out, len);
				printf("updated %s\n", path);
			} else {
				want = read_file(path, &wlen);
				if (!want) {
					fprintf(stderr, "cannot read golden file %s\n", path);
					bad = 1;
				} else if (wlen != len || memcmp(want, out, len) != 0) {
					fprintf(stderr, "output differs from %s; got:\n%s\n", path, out);
					bad = 1;
				}
				free(want);
			}
		}
		free(out);
	}
	if (outdir && pcpu_format_supported(PCPU_FORMAT_PROTOBUF)) {
		/* For check_protobuf.py's independent decoder. */
		char path[4096], *out;
		size_t len;

		CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROTOBUF, &out, &len) == 0);
		snprintf(path, sizeof path, "%s/expose.pb", outdir);
		write_file(path, out, len);
		free(out);
	}
	return bad;
}

/* ---- the writers' refusals ---- */

static void expect_refused(const struct pcpu_snapshot *s, const char *why)
{
	int fmt;

	for (fmt = PCPU_FORMAT_PROMETHEUS; fmt <= PCPU_FORMAT_JSON; fmt++) {
		char *out = (char *)"untouched";
		size_t len = 12345;

		errno = 0;
		if (pcpu_snapshot_write(s, (enum pcpu_format)fmt, &out, &len) != -1 || errno != EINVAL ||
		    strcmp(out, "untouched") != 0 || len != 12345) {
			fprintf(stderr, "snapshot with %s was not refused\n", why);
			exit(1);
		}
		if (!strstr(pcpu_stats_error(), why)) {
			fprintf(stderr, "message \"%s\" does not mention \"%s\"\n", pcpu_stats_error(), why);
			exit(1);
		}
	}
}

static void test_refusals(void)
{
	static const char *const lab[] = { "a" };
	static const char *const le[] = { "le" };
	static const char *const v1[] = { "x" };
	static const char *const vbad[] = { "\xff" };
	static const char *const vsurr[] = { "\xed\xa0\x80" };
	static const uint64_t counts[3] = { 1, 2, 3 };
	static const int64_t up_bad[2] = { 5, 5 };
	static const int64_t up_big[2] = { (int64_t)1 << 60, ((int64_t)1 << 60) + 1 };
	struct pcpu_snapshot_series se[2];
	struct pcpu_snapshot_family f[2];
	struct pcpu_snapshot s = { 1, f };
	char *out;
	size_t len;

	memset(se, 0, sizeof se);
	memset(f, 0, sizeof f);
	se[0].label_values = v1;
	se[1].label_values = v1;
	f[0].name = "ok_metric";
	f[0].type = PCPU_METRIC_GAUGE;
	f[0].nlabels = 1;
	f[0].label_names = lab;
	f[0].nseries = 1;
	f[0].series = se;
	CHECK(pcpu_snapshot_write(&s, PCPU_FORMAT_OPENMETRICS, &out, &len) == 0);
	CHECK(strcmp(out, "# TYPE ok_metric gauge\nok_metric{a=\"x\"} 0\n# EOF\n") == 0);
	free(out);

	f[0].name = "2xx";
	expect_refused(&s, "must start with a letter");
	f[0].name = "a-b";
	expect_refused(&s, "character '-' at offset 1");
	f[0].name = "";
	expect_refused(&s, "empty");
	f[0].name = "ok_metric";
	f[0].label_names = le;
	f[0].type = PCPU_METRIC_HISTOGRAM;
	f[0].nbuckets = 1;
	se[0].value.histogram.counts = counts;
	expect_refused(&s, "\"le\" is reserved");
	f[0].type = PCPU_METRIC_GAUGE;
	f[0].label_names = lab;
	se[0].label_values = vbad;
	expect_refused(&s, "not valid UTF-8");
	se[0].label_values = vsurr;
	expect_refused(&s, "not valid UTF-8");
	se[0].label_values = v1;
	f[0].nseries = 2;
	expect_refused(&s, "same label values");
	f[0].nseries = 1;
	f[0].unit = "bytes";
	expect_refused(&s, "must end in \"_bytes\"");
	f[0].unit = NULL;
	f[0].help = "bad \xc0\xaf overlong";
	expect_refused(&s, "not valid UTF-8");
	f[0].help = NULL;
	f[0].scale_exp10 = 23;
	expect_refused(&s, "scale_exp10");
	f[0].scale_exp10 = 0;
	f[0].type = (enum pcpu_metric_type)9;
	expect_refused(&s, "unknown metric type");

	/* Histograms. */
	f[0].type = PCPU_METRIC_HISTOGRAM;
	f[0].nbuckets = 3;
	f[0].bucket_upper = up_bad;
	se[0].value.histogram.counts = counts;
	expect_refused(&s, "strictly increasing");
	f[0].bucket_upper = up_big;
	f[0].scale_exp10 = 0;
	expect_refused(&s, "equal once scaled");
	f[0].nbuckets = 0;
	expect_refused(&s, "buckets");

	/* Two families writing one sample name. */
	f[0].type = PCPU_METRIC_COUNTER;
	f[0].name = "foo";
	f[1] = f[0];
	f[1].type = PCPU_METRIC_GAUGE;
	f[1].name = "foo_total";
	s.nfamilies = 2;
	expect_refused(&s, "written by two families");
	f[1].type = PCPU_METRIC_HISTOGRAM;
	f[1].name = "foo";
	f[1].nbuckets = 1;
	expect_refused(&s, "written by two families");

	/* Info families: OpenMetrics family `x` of x_info, so a family `x`
	 * clashes; the flag only on a gauge named *_info whose series are 1. */
	f[1].type = PCPU_METRIC_GAUGE;
	f[1].nbuckets = 0;
	f[1].name = "foo_info";
	f[1].flags = PCPU_SNAPSHOT_INFO;
	se[0].value.gauge = 1;
	expect_refused(&s, "written by two families");
	f[0].name = "foo_info_info"; /* the same series: the counter reads 1 too */
	CHECK(pcpu_snapshot_write(&s, PCPU_FORMAT_OPENMETRICS, &out, &len) == 0);
	CHECK(strcmp(out, "# TYPE foo_info_info counter\nfoo_info_info_total{a=\"x\"} 1\n"
			  "# TYPE foo info\nfoo_info{a=\"x\"} 1\n# EOF\n") == 0);
	free(out);
	CHECK(pcpu_snapshot_write(&s, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
	CHECK(strstr(out, "# TYPE foo_info gauge\nfoo_info{a=\"x\"} 1\n"));
	free(out);
	se[0].value.gauge = 2;
	expect_refused(&s, "series are 1");
	se[0].value.gauge = 1;
	f[1].name = "foo";
	expect_refused(&s, "named *_info");
	f[1].name = "_info";
	expect_refused(&s, "named *_info");
	f[1].name = "foo_info";
	f[1].type = PCPU_METRIC_COUNTER;
	expect_refused(&s, "named *_info");
	f[1].type = PCPU_METRIC_GAUGE;
	f[1].scale_exp10 = -3;
	expect_refused(&s, "without unit or scale");
	f[1].scale_exp10 = 0;
	f[1].flags = 0;

	/* Negative bounds: OpenMetrics output leaves out _sum and _count. */
	{
		static const int64_t neg[1] = { -1 };
		static const uint64_t c2[2] = { 1, 1 };
		struct pcpu_snapshot one = { 1, f };

		memset(f, 0, sizeof f);
		f[0].name = "temp_change";
		f[0].type = PCPU_METRIC_HISTOGRAM;
		f[0].nbuckets = 2;
		f[0].bucket_upper = neg;
		f[0].nseries = 1;
		f[0].series = se;
		se[0].label_values = NULL;
		se[0].value.histogram.counts = c2;
		se[0].value.histogram.sum = -3;
		CHECK(pcpu_snapshot_write(&one, PCPU_FORMAT_OPENMETRICS, &out, &len) == 0);
		CHECK(strcmp(out, "# TYPE temp_change histogram\n"
				  "temp_change_bucket{le=\"-1.0\"} 1\n"
				  "temp_change_bucket{le=\"+Inf\"} 2\n# EOF\n") == 0);
		free(out);
		CHECK(pcpu_snapshot_write(&one, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
		CHECK(strstr(out, "temp_change_sum -3\ntemp_change_count 2\n"));
		free(out);
	}

	/* Arguments. */
	CHECK(pcpu_snapshot_write(NULL, PCPU_FORMAT_JSON, &out, &len) < 0 && errno == EINVAL);
	CHECK(pcpu_snapshot_write(&s, (enum pcpu_format)0, &out, &len) < 0 && errno == EINVAL);
	CHECK(pcpu_format_content_type((enum pcpu_format)5) == NULL);
	CHECK(pcpu_format_supported(PCPU_FORMAT_OPENMETRICS) && !pcpu_format_supported((enum pcpu_format)5));
	if (!pcpu_format_supported(PCPU_FORMAT_PROTOBUF))
		CHECK(pcpu_snapshot_write(&s, PCPU_FORMAT_PROTOBUF, &out, &len) < 0 && errno == ENOTSUP);
	CHECK(strcmp(pcpu_format_content_type(PCPU_FORMAT_OPENMETRICS),
		     "application/openmetrics-text; version=1.0.0; charset=utf-8") == 0);
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *outdir = NULL;
	int update = 0, i, bad;
	pcpu_registry_t *reg;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--golden") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			outdir = argv[++i];
		else if (!strcmp(argv[i], "--update"))
			update = 1;
		else {
			fprintf(stderr, "usage: %s [--golden DIR [--update]] [--out DIR]\n", argv[0]);
			return 2;
		}
	}
	test_refusals();
	reg = build_registry();
	bad = golden(reg, dir, update, outdir);
	pcpu_registry_destroy(reg);
	if (!bad)
		printf("exposition tests passed\n");
	return bad;
}
