/*
 * Several label sets under one name (PCPU_FAMILY_LABELSET, issue 50):
 * `requests_total`, `requests_total{path="/x"}` and
 * `requests_total{method="GET",code="200"}` are one metric. Checks the
 * registry's contract (plain registration still EEXIST, what may join a
 * name and what may not, series that Prometheus would take for one,
 * removal), every writer (one HELP/TYPE in the text formats, one JSON
 * family, one protobuf MetricFamily), the writers' checks of hand-built
 * snapshots, the published segment read back (the same bytes; the listing
 * counts one metric), a merge of two processes' snapshots, and a shared
 * registry (pre-fork tree) whose processes register different label sets.
 */
#include "../check.h"
#include "segment_text.h"
#include <pcpu/pcpu.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats_check.h"

#define CHECK_STREQ(a, b)                                                                 \
	do {                                                                              \
		if (strcmp((a), (b)) != 0) {                                              \
			fprintf(stderr, "%s:%d: got\n%s\nwanted\n%s\n", __FILE__, __LINE__, \
				(a), (b));                                                \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

static const char *const no_labels[] = { NULL };
static const char *const path[] = { "path" };
static const char *const method_code[] = { "method", "code" };
static const char *const code_method[] = { "code", "method" };

static struct pcpu_family_desc req(unsigned n, const char *const *labels)
{
	struct pcpu_family_desc d;

	memset(&d, 0, sizeof d);
	d.name = "requests_total";
	d.help = "Requests.";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = n;
	d.label_names = n ? labels : NULL;
	return d;
}

static pcpu_family_t *labelset(pcpu_registry_t *reg, struct pcpu_family_desc d)
{
	return pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_LABELSET, 0, NULL, NULL);
}

static char *write_all(pcpu_registry_t *reg, enum pcpu_format fmt)
{
	char *out;
	size_t len;

	CHECK(pcpu_registry_write(reg, fmt, &out, &len) == 0);
	return out;
}

static const char want_text[] = "# HELP requests_total Requests.\n"
				"# TYPE requests_total counter\n"
				"requests_total 3\n"
				"requests_total{path=\"/x\"} 5\n"
				"requests_total{method=\"GET\",code=\"200\"} 7\n";
static const char want_om[] = "# TYPE requests counter\n"
			      "# HELP requests Requests.\n"
			      "requests_total 3\n"
			      "requests_total{path=\"/x\"} 5\n"
			      "requests_total{method=\"GET\",code=\"200\"} 7\n"
			      "# EOF\n";
static const char want_json[] = "{\"families\":[\n"
				"{\"name\":\"requests\",\"type\":\"counter\",\"help\":\"Requests.\",\"unit\":\"\","
				"\"metrics\":[\n"
				"{\"labels\":{},\"value\":3},\n"
				"{\"labels\":{\"path\":\"/x\"},\"value\":5},\n"
				"{\"labels\":{\"method\":\"GET\",\"code\":\"200\"},\"value\":7}]}\n"
				"]}\n";

/* The registry's contract. Leaves requests_total with three label sets:
 * {} 3, {path="/x"} 5, {method="GET",code="200"} 7. */
static void check_registry(pcpu_registry_t *reg)
{
	struct pcpu_family_desc d = req(0, no_labels);
	pcpu_family_t *a, *b, *c, *b2;

	CHECK((a = pcpu_registry_family(reg, &d)) != NULL); /* a plain first family */
	pcpu_counter_add(pcpu_family_counter(a, NULL), 3);
	/* Plain registration keeps its contract: other labels, EEXIST. */
	d = req(1, path);
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "exists with another");
	CHECK((b = labelset(reg, d)) != NULL && b != a);
	CHECK(labelset(reg, d) == b);                  /* found again */
	CHECK(pcpu_registry_family(reg, &d) == b);     /* by plain registration too: its description */
	CHECK(pcpu_registry_find(reg, "requests_total") == a); /* the name's first */
	pcpu_counter_add(pcpu_family_counter(b, (const char *[]){ "/x" }), 5);
	/* {path=""} is {} to Prometheus: refused; the other way round too. */
	CHECK_ERR(pcpu_family_counter(b, (const char *[]){ "" }), EEXIST, "empty label value");
	d = req(2, method_code);
	CHECK((c = labelset(reg, d)) != NULL);
	pcpu_counter_add(pcpu_family_counter(c, (const char *[]){ "GET", "200" }), 7);
	CHECK_ERR(pcpu_family_counter(c, (const char *[]){ "", "" }), EEXIST, "empty label value");
	CHECK_ERR(pcpu_family_counter(c, (const char *[]){ "", "" }), EEXIST, "another label set");
	/* {method="GET",code=""} is no other set's series: fine. */
	CHECK(pcpu_family_counter(c, (const char *[]){ "GET", "" }) != NULL);
	CHECK(pcpu_family_remove(c, (const char *[]){ "GET", "" }) == 0);
	/* The same names in another order: the same label set, refused. */
	d = req(2, code_method);
	CHECK_ERR(labelset(reg, d), EEXIST, "another order");
	/* Anything but the label names must match. */
	d = req(1, (const char *[]){ "user" });
	d.help = "Other.";
	CHECK_ERR(labelset(reg, d), EEXIST, "type, help, unit");
	d.help = "Requests.";
	d.type = PCPU_METRIC_GAUGE;
	d.name = "requests";
	CHECK_ERR(labelset(reg, d), EEXIST, "type, help, unit");
	d.type = PCPU_METRIC_COUNTER;
	CHECK_ERR(pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_LABELSET | PCPU_FAMILY_FRACTIONS, 0, NULL,
					  NULL),
		  EEXIST, "fractions");
	CHECK_ERR(pcpu_registry_family_ex(reg, &d, 1u << 7, 0, NULL, NULL), EINVAL, "flag");
	/* A name reserved by the first family stays reserved. */
	d = req(0, no_labels);
	d.name = "requests_created";
	d.type = PCPU_METRIC_GAUGE;
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "sample name");
	/* Removing the first label set hands the names to the next. */
	d = req(1, (const char *[]){ "shard" });
	CHECK((b2 = labelset(reg, d)) != NULL);
	{
		pcpu_registry_t *r2 = pcpu_registry_create();
		struct pcpu_family_desc e = req(0, no_labels);
		pcpu_family_t *x, *y;

		CHECK(r2 && (x = pcpu_registry_family(r2, &e)) != NULL);
		e = req(1, path);
		CHECK((y = labelset(r2, e)) != NULL);
		CHECK(pcpu_registry_remove_family(r2, x) == 0);
		CHECK(pcpu_registry_find(r2, "requests") == y);
		e = req(0, no_labels);
		e.type = PCPU_METRIC_GAUGE;
		e.name = "requests_total";
		CHECK_ERR(pcpu_registry_family(r2, &e), EEXIST, "sample name");
		CHECK(pcpu_registry_remove_family(r2, y) == 0);
		CHECK(pcpu_registry_family(r2, &e) != NULL); /* the name is free now */
		pcpu_registry_destroy(r2);
	}
	CHECK(pcpu_registry_remove_family(reg, b2) == 0);
}

/* One protobuf MetricFamily for the name: the delimited messages counted. */
static size_t protobuf_messages(const unsigned char *p, size_t len)
{
	size_t n = 0, i = 0;

	while (i < len) {
		uint64_t m = 0;
		unsigned sh = 0;

		while (i < len && (p[i] & 0x80)) {
			m |= (uint64_t)(p[i++] & 0x7f) << sh;
			sh += 7;
		}
		CHECK(i < len);
		m |= (uint64_t)p[i++] << sh;
		CHECK(m <= len - i);
		i += (size_t)m;
		n++;
	}
	return n;
}

/* Hand-built snapshots: what the writers refuse. */
static void check_writers_refuse(void)
{
	static const char *const v0[] = { NULL }, *const vx[] = { "/x" }, *const ve[] = { "" };
	struct pcpu_snapshot_series s0 = { v0, { .counter = 1 } }, sx = { vx, { .counter = 2 } },
				    se = { ve, { .counter = 3 } };
	struct pcpu_snapshot_family f[3];
	struct pcpu_snapshot s = { 2, f };
	char *out;
	size_t len;

	memset(f, 0, sizeof f);
	f[0].name = "req";
	f[0].type = PCPU_METRIC_COUNTER;
	f[0].nseries = 1;
	f[0].series = &s0;
	f[1] = f[0];
	f[1].nlabels = 1;
	f[1].label_names = path;
	f[1].series = &sx;
	CHECK(pcpu_snapshot_write(&s, PCPU_FORMAT_OPENMETRICS, &out, &len) == 0);
	CHECK_STREQ(out, "# TYPE req counter\nreq_total 1\nreq_total{path=\"/x\"} 2\n# EOF\n");
	free(out);
	f[1].series = &se; /* {path=""} is {} */
	CHECK_ERR(pcpu_snapshot_write(&s, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0, EINVAL,
		  "same series");
	f[1].series = &sx;
	f[1].help = "Other help.";
	CHECK_ERR(pcpu_snapshot_write(&s, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0, EINVAL,
		  "written by two families");
	f[1].help = NULL;
	f[1].nlabels = 0; /* the same label set twice */
	f[1].series = &s0;
	CHECK_ERR(pcpu_snapshot_write(&s, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0, EINVAL,
		  "written by two families");
	/* Apart (another family between): a clash of sample names. */
	f[1].name = "req2";
	f[2] = f[0];
	f[2].nlabels = 1;
	f[2].label_names = path;
	f[2].series = &sx;
	s.nfamilies = 3;
	CHECK_ERR(pcpu_snapshot_write(&s, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0, EINVAL,
		  "written by two families");
}

/* Two inputs, each valid, whose label sets of one name give one series to
 * Prometheus: {path="/x"} and {path="/x",user=""}. Each input's families
 * were checked when it was added; the clash is between inputs, and both
 * writes of the merge refuse it. */
static void check_merge_clash(void)
{
	pcpu_registry_t *a = pcpu_registry_create(), *b = pcpu_registry_create();
	pcpu_snapshot_merge_t *m = pcpu_snapshot_merge_new();
	struct pcpu_snapshot *sa, *sb;
	char *out;
	size_t len;

	struct pcpu_family_desc da = req(1, (const char *[]){ "path" });
	struct pcpu_family_desc db = req(2, (const char *[]){ "path", "user" });

	CHECK(a && b && m);
	CHECK(pcpu_family_counter(pcpu_registry_family(a, &da), (const char *[]){ "/x" }));
	CHECK(pcpu_family_counter(pcpu_registry_family(b, &db), (const char *[]){ "/x", "" }));
	CHECK((sa = pcpu_registry_snapshot(a)) && (sb = pcpu_registry_snapshot(b)));
	CHECK(pcpu_snapshot_merge_add(m, sa, 0, NULL, NULL) == 0);
	CHECK(pcpu_snapshot_merge_add(m, sb, 0, NULL, NULL) == 0);
	CHECK_ERR(pcpu_snapshot_merge_write(m, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0, EINVAL,
		  "the same series");
	CHECK_ERR(pcpu_snapshot_write(pcpu_snapshot_merge_result(m), PCPU_FORMAT_PROMETHEUS, &out, &len) == 0,
		  EINVAL, "the same series");
	pcpu_snapshot_merge_free(m);
	pcpu_snapshot_free(sa);
	pcpu_snapshot_free(sb);
	pcpu_registry_destroy(a);
	pcpu_registry_destroy(b);
}

/* A merge and the writers agree on what makes two families of one name
 * label sets of one metric: an input whose family differs from the one
 * merged before only where the writers look (help absent or empty, the
 * exposed buckets, a native histogram's schema) is refused when it is
 * added, not merged and then refused at the write. */
static void check_merge_same_metric(void)
{
	static const char *const vx[] = { "/x" }, *const vu[] = { "u" };
	static const char *const user[] = { "user" };
	static const int64_t upper[] = { 10, 20 };
	static const uint64_t counts[] = { 1, 2, 3 };
	static const uint32_t exp0[] = { 0 }, exp1[] = { 1 };
	struct pcpu_snapshot_series sx = { vx, { .counter = 1 } }, su = { vu, { .counter = 2 } };
	struct pcpu_snapshot_family fa, fb;
	struct pcpu_snapshot sa = { 1, &fa }, sb = { 1, &fb };
	int round;

	for (round = 0; round < 3; round++) {
		pcpu_snapshot_merge_t *m = pcpu_snapshot_merge_new();
		struct pcpu_snapshot_family both[2];
		struct pcpu_snapshot s2 = { 2, both };
		char *out;
		size_t len;

		CHECK(m != NULL);
		memset(&fa, 0, sizeof fa);
		fa.name = "req";
		fa.type = PCPU_METRIC_COUNTER;
		fa.nlabels = 1;
		fa.label_names = path;
		fa.nseries = 1;
		fa.series = &sx;
		if (round > 0) {
			sx.value.histogram.counts = counts;
			sx.value.histogram.sum = 7;
			fa.type = PCPU_METRIC_HISTOGRAM;
			fa.nbuckets = 3;
			fa.bucket_upper = upper;
		}
		fb = fa;
		fb.label_names = user;
		fb.series = &su;
		su.value = sx.value;
		if (round == 0) {
			fb.help = ""; /* a HELP line, empty; fa writes none */
		} else if (round == 1) {
			fa.export_buckets = exp0; /* le="10" and le="20" apart */
			fb.export_buckets = exp1;
			fa.nexport = fb.nexport = 1;
		} else {
			fa.flags = fb.flags = PCPU_SNAPSHOT_NATIVE;
			fb.native_index = 1;
		}
		both[0] = fa;
		both[1] = fb;
		CHECK_ERR(pcpu_snapshot_write(&s2, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0, EINVAL,
			  "not two label sets of one metric");
		CHECK(pcpu_snapshot_merge_add(m, &sa, 0, NULL, NULL) == 0);
		CHECK_ERR(pcpu_snapshot_merge_add(m, &sb, 0, NULL, NULL) == 0, EINVAL, "differs");
		/* The merge as it was: fa's series alone. */
		CHECK(pcpu_snapshot_merge_write(m, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
		CHECK(strstr(out, "path=\"/x\"") && !strstr(out, "user="));
		free(out);
		pcpu_snapshot_merge_free(m);
	}
}

/* Two processes' snapshots merged: one header, each process's series. */
static void check_merge(pcpu_registry_t *reg, const char *path_)
{
	struct pcpu_snapshot *mine = pcpu_registry_snapshot(reg);
	struct pcpu_reader_options ro;
	struct pcpu_reader_snapshot *rs;
	pcpu_reader_t *r;
	pcpu_snapshot_merge_t *m = pcpu_snapshot_merge_new();
	static const char *const ln[] = { "pid" };
	char *out;
	size_t len;

	memset(&ro, 0, sizeof ro);
	CHECK(mine && m && (r = pcpu_reader_open(path_, &ro)) != NULL);
	CHECK(pcpu_reader_snapshot(r, 0, &rs) == 0);
	CHECK(pcpu_snapshot_merge_add(m, mine, 1, ln, (const char *[]){ "1" }) == 0);
	CHECK(pcpu_snapshot_merge_add(m, &rs->snapshot, 1, ln, (const char *[]){ "2" }) == 0);
	CHECK(pcpu_snapshot_write(pcpu_snapshot_merge_result(m), PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
	CHECK_STREQ(out, "# HELP requests_total Requests.\n"
			 "# TYPE requests_total counter\n"
			 "requests_total{pid=\"1\"} 3\n"
			 "requests_total{pid=\"2\"} 3\n"
			 "requests_total{path=\"/x\",pid=\"1\"} 5\n"
			 "requests_total{path=\"/x\",pid=\"2\"} 5\n"
			 "requests_total{method=\"GET\",code=\"200\",pid=\"1\"} 7\n"
			 "requests_total{method=\"GET\",code=\"200\",pid=\"2\"} 7\n");
	free(out);
	/* Another process's label set of the name with other help: refused,
	 * the merge as it was. */
	{
		pcpu_registry_t *r3 = pcpu_registry_create();
		struct pcpu_family_desc d = req(1, (const char *[]){ "user" });
		struct pcpu_snapshot *s3;

		d.help = "Other.";
		CHECK(r3 && pcpu_registry_family(r3, &d) && pcpu_family_counter(pcpu_registry_find(r3, "requests"),
										 (const char *[]){ "u" }));
		CHECK((s3 = pcpu_registry_snapshot(r3)) != NULL);
		CHECK_ERR(pcpu_snapshot_merge_add(m, s3, 1, ln, (const char *[]){ "3" }) == 0, EINVAL,
			  "differs");
		/* and the same help: another label set, merged */
		pcpu_snapshot_free(s3);
		pcpu_registry_destroy(r3);
		r3 = pcpu_registry_create();
		d.help = "Requests.";
		CHECK(r3 && pcpu_registry_family(r3, &d) && pcpu_family_counter(pcpu_registry_find(r3, "requests"),
										 (const char *[]){ "u" }));
		CHECK((s3 = pcpu_registry_snapshot(r3)) != NULL);
		CHECK(pcpu_snapshot_merge_add(m, s3, 1, ln, (const char *[]){ "3" }) == 0);
		CHECK(pcpu_snapshot_write(pcpu_snapshot_merge_result(m), PCPU_FORMAT_OPENMETRICS, &out, &len) == 0);
		CHECK_STREQ(out, "# TYPE requests counter\n"
				 "# HELP requests Requests.\n"
				 "requests_total{pid=\"1\"} 3\n"
				 "requests_total{pid=\"2\"} 3\n"
				 "requests_total{path=\"/x\",pid=\"1\"} 5\n"
				 "requests_total{path=\"/x\",pid=\"2\"} 5\n"
				 "requests_total{user=\"u\",pid=\"3\"} 0\n"
				 "requests_total{method=\"GET\",code=\"200\",pid=\"1\"} 7\n"
				 "requests_total{method=\"GET\",code=\"200\",pid=\"2\"} 7\n"
				 "# EOF\n");
		/* The exporter's write (issue 51) writes the same. */
		{
			char *out2;
			size_t len2;

			CHECK(pcpu_snapshot_merge_write(m, PCPU_FORMAT_OPENMETRICS, &out2, &len2) == 0);
			CHECK(len2 == len && memcmp(out, out2, len) == 0);
			free(out2);
		}
		free(out);
		pcpu_snapshot_merge_free(m);
		pcpu_snapshot_free(s3);
		pcpu_registry_destroy(r3);
	}
	pcpu_reader_snapshot_free(rs);
	pcpu_reader_close(r);
	pcpu_snapshot_free(mine);
	check_merge_clash();
}

/* A shared registry: label sets registered by different processes of the
 * tree are one metric; a process adopts another's label set. */
static void check_tree(const char *dir)
{
	struct pcpu_segment_options o;
	pcpu_registry_t *reg = pcpu_registry_create();
	struct pcpu_family_desc d = req(0, no_labels);
	pcpu_segment_t *seg;
	pcpu_family_t *f;
	pid_t pid;
	int st;
	char *t;

	CHECK(reg);
	memset(&o, 0, sizeof o);
	o.dir = dir;
	o.flags = PCPU_SEGMENT_SHARED_TREE;
	seg = pcpu_segment_publish(reg, "lstree", &o);
	if (!seg)
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
	CHECK(seg != NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* The child's own first family of the name: {path}. */
		struct pcpu_family_desc e = req(1, path);
		pcpu_family_t *g = labelset(reg, e);

		if (!g)
			_exit(1);
		pcpu_counter_add(pcpu_family_counter(g, (const char *[]){ "/x" }), 5);
		e.name = "other_total";
		if (!labelset(reg, e))
			_exit(2);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* Without PCPU_FAMILY_LABELSET the tree's other label set refuses
	 * this one, as a name of other labels always was. */
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "other labels");
	CHECK((f = labelset(reg, d)) != NULL);
	pcpu_counter_add(pcpu_family_counter(f, NULL), 3);
	/* The child's label set, adopted: its series' value. */
	d = req(1, path);
	CHECK((f = labelset(reg, d)) != NULL);
	pcpu_counter_add(pcpu_family_counter(f, (const char *[]){ "/x" }), 10);
	/* Another help than the child's label set of a name this process
	 * does not know: the tree refuses it. */
	d = req(2, method_code);
	d.name = "other_total";
	d.help = "Other.";
	CHECK_ERR(labelset(reg, d), EEXIST, "another type, help");
	d.help = "Requests.";
	CHECK(labelset(reg, d) != NULL);
	t = segment_text(pcpu_segment_path(seg));
	CHECK_STREQ(t, "# HELP other_total Requests.\n"
		       "# TYPE other_total counter\n"
		       "# HELP requests_total Requests.\n"
		       "# TYPE requests_total counter\n"
		       "requests_total 3\n"
		       "requests_total{path=\"/x\"} 15\n");
	free(t);
	CHECK(pcpu_segment_unpublish(seg) == 0);
	pcpu_registry_destroy(reg);
}

int main(void)
{
	char dir[] = "/tmp/pcpu-labelsets-XXXXXX";
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	char *t;
	int fmt;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	check_writers_refuse();
	check_merge_same_metric();
	reg = pcpu_registry_create();
	CHECK(reg != NULL);
	seg = pcpu_segment_publish(reg, "labelsets", NULL);
	CHECK(seg != NULL);
	check_registry(reg);
	t = write_all(reg, PCPU_FORMAT_PROMETHEUS);
	CHECK_STREQ(t, want_text);
	free(t);
	t = write_all(reg, PCPU_FORMAT_OPENMETRICS);
	CHECK_STREQ(t, want_om);
	free(t);
	t = write_all(reg, PCPU_FORMAT_JSON);
	CHECK_STREQ(t, want_json);
	free(t);
	if (pcpu_format_supported(PCPU_FORMAT_PROTOBUF)) {
		char *out;
		size_t len;

		CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROTOBUF, &out, &len) == 0);
		CHECK(protobuf_messages((const unsigned char *)out, len) == 1);
		free(out);
	}
	/* Another process's view: the same bytes, one metric in the listing. */
	for (fmt = PCPU_FORMAT_PROMETHEUS; fmt <= PCPU_FORMAT_JSON; fmt++) {
		char *u = segment_text_as(pcpu_segment_path(seg), (enum pcpu_format)fmt);

		t = write_all(reg, (enum pcpu_format)fmt);
		CHECK_STREQ(u, t);
		free(t);
		free(u);
	}
	{
		struct pcpu_reader_options ro;
		struct pcpu_segment_info *info;
		size_t n, k, seen = 0;

		memset(&ro, 0, sizeof ro);
		CHECK(pcpu_segment_list(&ro, &info, &n) == 0);
		for (k = 0; k < n; k++)
			if (strcmp(info[k].name, "labelsets") == 0) {
				CHECK(info[k].nfamilies == 1 && info[k].nseries == 3);
				seen++;
			}
		CHECK(seen == 1);
		free(info);
	}
	check_merge(reg, pcpu_segment_path(seg));
	CHECK(pcpu_segment_unpublish(seg) == 0);
	pcpu_registry_destroy(reg);
	check_tree(dir);
	rmdir(dir);
	puts("ok");
	return 0;
}
