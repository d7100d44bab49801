/*
 * The registry: validation with messages, get-or-create, conflicts and name
 * clashes, lookups, removal, statistics structs; then registration, removal,
 * updates and export all running concurrently, with exact values at the end
 * (ASan/LSan builds also check for leaks and use-after-free).
 */
#include "../check.h"
#include "segment_text.h"
#include <pcpu/pcpu.h>
#include <pcpu/stats.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stats_check.h"

static struct pcpu_family_desc desc(const char *name, enum pcpu_metric_type t, unsigned nl,
				    const char *const *labels)
{
	struct pcpu_family_desc d;

	memset(&d, 0, sizeof d);
	d.name = name;
	d.help = "help";
	d.type = t;
	d.nlabels = nl;
	d.label_names = labels;
	return d;
}

static void test_validation(void)
{
	static const char *const good[] = { "method" };
	static const char *const reserved[] = { "__name__" };
	static const char *const le[] = { "le" };
	static const char *const dup[] = { "a", "a" };
	static const char *const bad[] = { "1abc" };
	static const int64_t bounds[] = { 1, 2 };
	static const struct pcpu_histogram_layout hl = { PCPU_HISTOGRAM_EXPLICIT, bounds, 2, 0, 0, 0, 0, 0, 0 };
	pcpu_registry_t *reg = pcpu_registry_create();
	struct pcpu_family_desc d;
	char longname[PCPU_STATS_NAME_MAX + 2];
	pcpu_family_t *f;

	CHECK(reg);
	CHECK(pcpu_stats_check_metric_name("http_requests_total") == 0);
	CHECK(pcpu_stats_check_metric_name("a:b_c:") == 0);
	CHECK(pcpu_stats_check_metric_name("_x9") == 0);
	CHECK_ERR(pcpu_stats_check_metric_name("9x") == 0, EINVAL, "character '9' at offset 0");
	CHECK_ERR(pcpu_stats_check_metric_name("a b") == 0, EINVAL, "character ' ' at offset 1");
	CHECK_ERR(pcpu_stats_check_metric_name("a\nb") == 0, EINVAL, "\\x0a at offset 1");
	CHECK_ERR(pcpu_stats_check_metric_name("") == 0, EINVAL, "empty");
	CHECK_ERR(pcpu_stats_check_metric_name(NULL) == 0, EINVAL, "NULL");
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	CHECK_ERR(pcpu_stats_check_metric_name(longname) == 0, EINVAL, "longer than 200");
	CHECK(pcpu_stats_check_label_name("code") == 0);
	CHECK_ERR(pcpu_stats_check_label_name("a:b") == 0, EINVAL, "character ':'");
	CHECK_ERR(pcpu_stats_check_label_name("__x") == 0, EINVAL, "reserved");
	CHECK(pcpu_stats_check_label_value("") == 0);
	CHECK(pcpu_stats_check_label_value("\"\\\n\xf0\x9f\x9a\x80") == 0);
	CHECK_ERR(pcpu_stats_check_label_value("ok\xe2\x82") == 0, EINVAL, "at offset 2");
	CHECK_ERR(pcpu_stats_check_label_value("\xf4\x90\x80\x80") == 0, EINVAL, "not valid UTF-8");

	d = desc("9lives", PCPU_METRIC_COUNTER, 0, NULL);
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "must start with a letter");
	d = desc("ok_total", PCPU_METRIC_COUNTER, 1, reserved);
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "reserved");
	d = desc("ok_seconds", PCPU_METRIC_HISTOGRAM, 1, le);
	d.histogram = &hl;
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "\"le\" is reserved");
	d = desc("ok", PCPU_METRIC_GAUGE, 2, dup);
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "appears twice");
	d = desc("ok", PCPU_METRIC_GAUGE, 1, bad);
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "label name \"1abc\"");
	d = desc("ok", PCPU_METRIC_GAUGE, 0, NULL);
	d.unit = "seconds";
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "must end in \"_seconds\"");
	d.unit = NULL;
	d.help = "bad \xff help";
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "help text");
	d = desc("ok", PCPU_METRIC_GAUGE, 0, NULL);
	d.histogram = &hl;
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "only for histograms");
	d = desc("ok", PCPU_METRIC_HISTOGRAM, 0, NULL);
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "layout is NULL");
	{
		/* Distinct as integers, one double: the exposition would repeat
		 * an `le`, so the registry refuses it as the writers would. */
		static const int64_t close_bounds[] = { (int64_t)1 << 60, ((int64_t)1 << 60) + 1 };
		static const struct pcpu_histogram_layout cl = { PCPU_HISTOGRAM_EXPLICIT, close_bounds, 2,
								 0, 0, 0, 0, 0, 0 };
		d.histogram = &cl;
		CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "equal once scaled");
	}
	d = desc("ok", (enum pcpu_metric_type)0, 0, NULL);
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "unknown metric type");
	d = desc("ok", PCPU_METRIC_GAUGE, 0, NULL);
	d.scale_exp10 = -23;
	CHECK_ERR(pcpu_registry_family(reg, &d), EINVAL, "scale_exp10");
	CHECK(pcpu_registry_generation(reg) == 0); /* nothing was registered */

	/* Label values. */
	d = desc("requests", PCPU_METRIC_COUNTER, 1, good);
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	{
		const char *v[] = { "G\xc3" }, *nullv[] = { NULL };
		CHECK_ERR(pcpu_family_counter(f, v), EINVAL, "not valid UTF-8");
		CHECK_ERR(pcpu_family_counter(f, nullv), EINVAL, "NULL");
		CHECK_ERR(pcpu_family_counter(f, NULL), EINVAL, "label values are NULL");
		CHECK_ERR(pcpu_family_gauge(f, v), EINVAL, "not a gauge family");
	}
	pcpu_registry_destroy(reg);
}

static void test_api(void)
{
	static const char *const lab[] = { "code" };
	static const int64_t bounds[] = { 10, 100 };
	static const int64_t bounds2[] = { 10, 200 };
	static const struct pcpu_histogram_layout hl = { PCPU_HISTOGRAM_EXPLICIT, bounds, 2, 0, 0, 0, 0, 0, 0 };
	static const struct pcpu_histogram_layout hl2 = { PCPU_HISTOGRAM_EXPLICIT, bounds2, 2, 0, 0, 0, 0, 0, 0 };
	pcpu_registry_t *reg = pcpu_registry_create();
	struct pcpu_family_desc d;
	pcpu_family_t *f, *f2, *h;
	pcpu_counter_t c1, c2;
	const char *v200[] = { "200" }, *v500[] = { "500" };
	uint64_t gen;

	CHECK(reg);
	d = desc("http_requests_total", PCPU_METRIC_COUNTER, 1, lab);
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	CHECK(strcmp(pcpu_family_name(f), "http_requests") == 0);
	CHECK(pcpu_family_type(f) == PCPU_METRIC_COUNTER);
	/* Same description (with or without _total): the same family. */
	CHECK(pcpu_registry_family(reg, &d) == f);
	d.name = "http_requests";
	CHECK(pcpu_registry_family(reg, &d) == f);
	CHECK(pcpu_registry_find(reg, "http_requests") == f);
	CHECK(pcpu_registry_find(reg, "http_requests_total") == f);
	CHECK(pcpu_registry_find(reg, "http_requests_created") == NULL && errno == ENOENT);
	CHECK(pcpu_registry_find(reg, "nope") == NULL && errno == ENOENT);
	/* A different description: EEXIST. */
	d.help = "other help";
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "exists with another");
	d = desc("http_requests", PCPU_METRIC_GAUGE, 1, lab);
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "exists with another");
	/* Clashes with the counter's sample names. */
	d = desc("http_requests_total", PCPU_METRIC_GAUGE, 0, NULL);
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "already written by family");
	d = desc("http_requests_created", PCPU_METRIC_GAUGE, 0, NULL);
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "already written by family");
	/* A histogram owns _bucket, _count, _sum. */
	d = desc("latency", PCPU_METRIC_HISTOGRAM, 0, NULL);
	d.histogram = &hl;
	h = pcpu_registry_family(reg, &d);
	CHECK(h);
	d.histogram = &hl2;
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "bucket layout");
	d = desc("latency_count", PCPU_METRIC_COUNTER, 0, NULL);
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "already written by family \"latency\"");
	d = desc("latency_sum", PCPU_METRIC_GAUGE, 0, NULL);
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "already written");
	/* ... and a gauge "x_bucket" prevents a histogram "x". */
	d = desc("x_bucket", PCPU_METRIC_GAUGE, 0, NULL);
	CHECK(pcpu_registry_family(reg, &d));
	d = desc("x", PCPU_METRIC_HISTOGRAM, 0, NULL);
	d.histogram = &hl;
	CHECK_ERR(pcpu_registry_family(reg, &d), EEXIST, "already written by family \"x_bucket\"");

	/* Series: get-or-create returns one handle per label set. */
	gen = pcpu_registry_generation(reg);
	c1 = pcpu_family_counter(f, v200);
	c2 = pcpu_family_counter(f, v500);
	CHECK(c1 && c2 && c1 != c2);
	CHECK(pcpu_family_counter(f, v200) == c1);
	CHECK(pcpu_registry_generation(reg) == gen + 2);
	CHECK(pcpu_family_lookup(f, v500) == c2);
	CHECK(pcpu_family_size(f) == 2);
	pcpu_counter_add(c1, 5);
	CHECK(pcpu_counter_fetch(pcpu_family_counter(f, v200)) == 5);
	CHECK(pcpu_family_histogram(h, NULL));
	CHECK(pcpu_family_remove(f, v500) == 0);
	CHECK(pcpu_family_lookup(f, v500) == NULL && errno == ENOENT);
	CHECK(pcpu_family_remove(f, v500) < 0 && errno == ENOENT);
	CHECK(pcpu_family_size(f) == 1);

	/* Removing a family frees its names. */
	CHECK(pcpu_registry_remove_family(reg, h) == 0);
	d = desc("latency_count", PCPU_METRIC_COUNTER, 0, NULL);
	f2 = pcpu_registry_family(reg, &d);
	CHECK(f2);
	CHECK(pcpu_registry_remove_family(reg, f2) == 0);

	/* Convenience helpers. */
	CHECK(pcpu_registry_counter(reg, "events_total", "Events.") ==
	      pcpu_registry_counter(reg, "events", "Events."));
	CHECK(pcpu_registry_gauge(reg, "level", "Level."));
	CHECK(pcpu_registry_gauge(reg, "events", "x") == NULL && errno == EEXIST);
	{
		pcpu_registry_t *other = pcpu_registry_create();
		CHECK(other);
		CHECK(pcpu_registry_remove_family(other, f) < 0 && errno == EINVAL);
		pcpu_registry_destroy(other);
	}
	CHECK(pcpu_registry_default() && pcpu_registry_default() == pcpu_registry_default());
	pcpu_registry_destroy(pcpu_registry_default()); /* a no-op */
	CHECK(pcpu_registry_counter(pcpu_registry_default(), "default_ok", "x"));
	pcpu_registry_destroy(reg);
}

struct ep_stats {
	struct pcpu_counter pkts;
	struct pcpu_counter bytes;
	struct pcpu_gauge flows;
};

static void test_structs(void)
{
	static const struct pcpu_stats_field fields[] = {
		PCPU_STATS_COUNTER(struct ep_stats, pkts, "ep_packets_total", "Packets."),
		PCPU_STATS_COUNTER(struct ep_stats, bytes, "ep_bytes", "Bytes."),
		PCPU_STATS_GAUGE(struct ep_stats, flows, "ep_flows", "Flows."),
	};
	static const struct pcpu_stats_field same_family[] = {
		PCPU_STATS_COUNTER(struct ep_stats, pkts, "dup", "x"),
		PCPU_STATS_COUNTER(struct ep_stats, bytes, "dup_total", "x"),
	};
	static const struct pcpu_stats_field misaligned[] = {
		{ "m", "x", NULL, PCPU_METRIC_COUNTER, 4, 0 },
	};
	static const struct pcpu_stats_field clash[] = {
		PCPU_STATS_COUNTER(struct ep_stats, pkts, "fresh_family", "x"),
		PCPU_STATS_GAUGE(struct ep_stats, flows, "ep_packets_total", "x"),
	};
	static const char *const lab[] = { "iface" };
	const char *e0[] = { "eth0" }, *e1[] = { "eth1" };
	pcpu_registry_t *reg = pcpu_registry_create();
	struct ep_stats *s0, *s1;
	pcpu_family_t *pk;
	size_t len;
	char *out;

	CHECK(reg);
	s0 = pcpu_registry_struct(reg, sizeof *s0, fields, 3, 1, lab, e0);
	s1 = pcpu_registry_struct(reg, sizeof *s1, fields, 3, 1, lab, e1);
	CHECK(s0 && s1);
	pcpu_counter_add(&s0->pkts, 3);
	pcpu_counter_add(&s0->bytes, 4500);
	pcpu_gauge_set(&s1->flows, 7);
	pk = pcpu_registry_find(reg, "ep_packets");
	CHECK(pk && pcpu_family_lookup(pk, e0) == &s0->pkts);
	CHECK(pcpu_family_counter(pk, e1) == &s1->pkts);
	CHECK(pcpu_counter_fetch(pcpu_family_lookup(pk, e0)) == 3);
	/* Same labels again: EEXIST, nothing registered. */
	CHECK_ERR(pcpu_registry_struct(reg, sizeof *s0, fields, 3, 1, lab, e0), EEXIST, "exists already");
	CHECK_ERR(pcpu_registry_struct(reg, sizeof *s0, same_family, 2, 0, NULL, NULL), EINVAL,
		  "same family");
	CHECK(pcpu_registry_find(reg, "dup") == NULL); /* rolled back */
	CHECK_ERR(pcpu_registry_struct(reg, sizeof *s0, misaligned, 1, 0, NULL, NULL), EINVAL,
		  "misaligned");
	CHECK_ERR(pcpu_registry_struct(reg, sizeof *s0, clash, 2, 1, lab, e0), EEXIST,
		  "already written by family \"ep_packets\"");
	CHECK(pcpu_registry_find(reg, "fresh_family") == NULL); /* rolled back */
	CHECK_ERR(pcpu_registry_struct(reg, 8, fields, 3, 1, lab, e0), EINVAL, "outside the struct");
	/* Struct series cannot be removed one by one, nor their family. */
	CHECK(pcpu_family_remove(pk, e0) < 0 && errno == EBUSY);
	CHECK(pcpu_registry_remove_family(reg, pk) < 0 && errno == EBUSY);
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
	CHECK(strstr(out, "ep_packets_total{iface=\"eth0\"} 3\n"));
	CHECK(strstr(out, "ep_bytes_total{iface=\"eth0\"} 4500\n"));
	CHECK(strstr(out, "ep_flows{iface=\"eth1\"} 7\n"));
	free(out);
	CHECK(pcpu_registry_struct_remove(reg, s0) == 0);
	CHECK(pcpu_registry_struct_remove(reg, s0) < 0 && errno == EINVAL);
	CHECK(pcpu_family_lookup(pk, e0) == NULL);
	CHECK(pcpu_family_size(pk) == 1);
	/* eth0 can be registered again, from zero. */
	s0 = pcpu_registry_struct(reg, sizeof *s0, fields, 3, 1, lab, e0);
	CHECK(s0 && pcpu_counter_fetch(&s0->pkts) == 0);
	pcpu_registry_destroy(reg); /* frees the structs too (LSan checks) */
}

/* ---- everything at once ---- */

enum { UPDATERS = 4, CHURNERS = 3, EXPORTERS = 2, LOOKUPS = 2, UPDATES = 100000 };
static pcpu_registry_t *creg;
static pcpu_counter_t shared_counter;
static pcpu_gauge_t shared_gauge;
static pcpu_histogram_t *shared_hist;
static int stop;

static void *updater(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < UPDATES; i++) {
		pcpu_counter_inc(shared_counter);
		pcpu_gauge_add(shared_gauge, 2);
		pcpu_histogram_record(shared_hist, i % 1000);
	}
	return NULL;
}

/* Registers families and series of its own, updates them, checks them,
 * removes them again; also adds series to a shared family. */
static void *churner(void *arg)
{
	int t = (int)(intptr_t)arg, round = 0;
	static const char *const lab[] = { "worker", "n" };

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		char name[64], n[16], w[16];
		struct pcpu_family_desc d;
		pcpu_family_t *f, *sh;
		const char *v[2];
		pcpu_counter_t c;
		int k;

		snprintf(name, sizeof name, "churn_%d_%d_total", t, round % 4);
		snprintf(w, sizeof w, "%d", t);
		d = desc(name, PCPU_METRIC_COUNTER, 2, lab);
		f = pcpu_registry_family(creg, &d);
		CHECK(f);
		for (k = 0; k < 20; k++) {
			snprintf(n, sizeof n, "%d", k);
			v[0] = w;
			v[1] = n;
			c = pcpu_family_counter(f, v);
			CHECK(c);
			pcpu_counter_add(c, k);
			CHECK(pcpu_counter_fetch(c) == (uint64_t)k);
		}
		d = desc("shared_series", PCPU_METRIC_COUNTER, 2, lab);
		sh = pcpu_registry_family(creg, &d);
		CHECK(sh);
		snprintf(n, sizeof n, "%d", round);
		v[0] = w;
		v[1] = n;
		CHECK(pcpu_family_counter(sh, v));
		if (round % 3 == 0)
			CHECK(pcpu_family_remove(sh, v) == 0);
		if (round % 2) {
			/* Some series one by one, the rest with the family. */
			v[0] = w;
			for (k = 0; k < 20; k += 2) {
				snprintf(n, sizeof n, "%d", k);
				v[1] = n;
				CHECK(pcpu_family_remove(f, v) == 0);
			}
			CHECK(pcpu_family_size(f) == 10);
		}
		CHECK(pcpu_registry_remove_family(creg, f) == 0);
		round++;
	}
	return NULL;
}

static void *exporter(void *arg)
{
	int fmt = PCPU_FORMAT_PROMETHEUS;
	uint64_t last = 0;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		char *out, *p;
		size_t len;

		CHECK(pcpu_registry_write(creg, (enum pcpu_format)fmt, &out, &len) == 0);
		CHECK(strlen(out) == len);
		if (fmt == PCPU_FORMAT_OPENMETRICS)
			CHECK(len >= 6 && strcmp(out + len - 6, "# EOF\n") == 0);
		if (fmt == PCPU_FORMAT_PROMETHEUS) {
			uint64_t v;
			p = strstr(out, "\nshared_ops_total ");
			CHECK(p);
			v = strtoull(p + 18, NULL, 10);
			CHECK(v >= last); /* a counter never goes back */
			last = v;
		}
		free(out);
		fmt = fmt == PCPU_FORMAT_JSON ? PCPU_FORMAT_PROMETHEUS : fmt + 1;
	}
	return NULL;
}

static void *looker(void *arg)
{
	static const char *const lab[] = { "k" };
	const char *v[] = { "same" };
	struct pcpu_family_desc d = desc("looked_up", PCPU_METRIC_GAUGE, 1, lab);

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		pcpu_family_t *f = pcpu_registry_family(creg, &d);
		pcpu_gauge_t g;

		CHECK(f);
		g = pcpu_family_gauge(f, v);
		CHECK(g && pcpu_family_lookup(f, v) == g);
		pcpu_gauge_inc(g);
		CHECK(pcpu_registry_find(creg, "shared_ops_total"));
	}
	return NULL;
}

static void test_concurrent(void)
{
	static const struct pcpu_histogram_layout hl = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0, 4, 1000, 0, 0, 0, 0 };
	pthread_t up[UPDATERS], ch[CHURNERS], ex[EXPORTERS], lk[LOOKUPS];
	struct pcpu_family_desc d;
	uint64_t counts[1024], count;
	int64_t sum;
	int i;
	char *out;
	size_t len;

	creg = pcpu_registry_create();
	CHECK(creg);
	shared_counter = pcpu_registry_counter(creg, "shared_ops_total", "Ops.");
	shared_gauge = pcpu_registry_gauge(creg, "shared_level", "Level.");
	d = desc("shared_values", PCPU_METRIC_HISTOGRAM, 0, NULL);
	d.histogram = &hl;
	shared_hist = pcpu_family_histogram(pcpu_registry_family(creg, &d), NULL);
	CHECK(shared_counter && shared_gauge && shared_hist);
	for (i = 0; i < CHURNERS; i++)
		CHECK(pthread_create(&ch[i], NULL, churner, (void *)(intptr_t)i) == 0);
	for (i = 0; i < EXPORTERS; i++)
		CHECK(pthread_create(&ex[i], NULL, exporter, NULL) == 0);
	for (i = 0; i < LOOKUPS; i++)
		CHECK(pthread_create(&lk[i], NULL, looker, NULL) == 0);
	for (i = 0; i < UPDATERS; i++)
		CHECK(pthread_create(&up[i], NULL, updater, NULL) == 0);
	for (i = 0; i < UPDATERS; i++)
		CHECK(pthread_join(up[i], NULL) == 0);
	{
		struct timespec ts = { 0, 300000000 };
		nanosleep(&ts, NULL); /* let the others run a while longer */
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < CHURNERS; i++)
		CHECK(pthread_join(ch[i], NULL) == 0);
	for (i = 0; i < EXPORTERS; i++)
		CHECK(pthread_join(ex[i], NULL) == 0);
	for (i = 0; i < LOOKUPS; i++)
		CHECK(pthread_join(lk[i], NULL) == 0);

	CHECK_EQ_U64(pcpu_counter_fetch(shared_counter), (uint64_t)UPDATERS * UPDATES);
	CHECK(pcpu_gauge_read(shared_gauge) == (int64_t)UPDATERS * UPDATES * 2);
	CHECK(pcpu_histogram_nbuckets(shared_hist) <= 1024);
	CHECK(pcpu_histogram_read(shared_hist, counts, pcpu_histogram_nbuckets(shared_hist), &count,
				  &sum) == 0);
	CHECK_EQ_U64(count, (uint64_t)UPDATERS * UPDATES);
	CHECK_EQ_U64(sum, (uint64_t)UPDATERS * (UPDATES / 1000) * 499500);
	CHECK(pcpu_registry_write(creg, PCPU_FORMAT_OPENMETRICS, &out, &len) == 0);
	{
		char want[128];
		snprintf(want, sizeof want, "\nshared_ops_total %d\n", UPDATERS * UPDATES);
		CHECK(strstr(out, want));
		snprintf(want, sizeof want, "\nshared_values_count %d\n", UPDATERS * UPDATES);
		CHECK(strstr(out, want));
	}
	free(out);
	pcpu_registry_destroy(creg);
}

/* The public clash set is the registry's: a family whose name is another
 * family's name plus one of that family's suffixes is refused. */
static void test_suffixes(void)
{
	static const enum pcpu_metric_type types[] = { PCPU_METRIC_COUNTER, PCPU_METRIC_GAUGE,
							PCPU_METRIC_HISTOGRAM };
	static const int64_t bounds[] = { 1, 2 };
	struct pcpu_histogram_layout lay = { 0 };
	pcpu_registry_t *reg = pcpu_registry_create();
	const char *const *suf;
	size_t t, k, n;

	CHECK(reg != NULL);
	lay.scheme = PCPU_HISTOGRAM_EXPLICIT;
	lay.bounds = bounds;
	lay.nbounds = 2;
	CHECK(pcpu_stats_type_suffixes((enum pcpu_metric_type)99, &suf) == 0 && suf == NULL);
	CHECK(pcpu_metric_type_name((enum pcpu_metric_type)99) == NULL);
	CHECK(pcpu_stats_sample_suffix((enum pcpu_metric_type)99) == NULL);
	CHECK(strcmp(pcpu_stats_sample_suffix(PCPU_METRIC_COUNTER), "_total") == 0);
	CHECK(strcmp(pcpu_stats_sample_suffix(PCPU_METRIC_GAUGE), "") == 0);
	CHECK(strcmp(pcpu_metric_type_name(PCPU_METRIC_HISTOGRAM), "histogram") == 0);
	for (t = 0; t < 3; t++) {
		struct pcpu_family_desc d;
		char base[32], clash[64];

		memset(&d, 0, sizeof d);
		snprintf(base, sizeof base, "sfx%zu", t);
		d.name = base;
		d.type = types[t];
		d.histogram = types[t] == PCPU_METRIC_HISTOGRAM ? &lay : NULL;
		CHECK(pcpu_registry_family(reg, &d) != NULL);
		n = pcpu_stats_type_suffixes(types[t], &suf);
		CHECK(n >= 1 && strcmp(suf[0], "") == 0);
		for (k = 1; k < n; k++) {
			struct pcpu_family_desc g;

			memset(&g, 0, sizeof g);
			snprintf(clash, sizeof clash, "%s%s", base, suf[k]);
			g.name = clash;
			g.type = PCPU_METRIC_GAUGE;
			errno = 0;
			CHECK(pcpu_registry_family(reg, &g) == NULL && errno == EEXIST);
		}
	}
	pcpu_registry_destroy(reg);
}

static char *written(pcpu_registry_t *reg, enum pcpu_format fmt)
{
	char *t;
	size_t len;

	CHECK(pcpu_registry_write(reg, fmt, &t, &len) == 0);
	return t;
}

static int ret_five(void *arg, int64_t *v)
{
	(void)arg;
	*v = 5;
	return 0;
}

/* Constant labels reach every series of every family, in every format and
 * in a published segment; handles are looked up without them. */
static void test_const_labels(void)
{
	static const char *const cn[] = { "instance", "region" }, *const cv[] = { "a:1", "eu\"1" };
	static const char *const own[] = { "method" }, *const get[] = { "GET" };
	static const char *const bn[] = { "version", "revision" }, *const bv[] = { "1.2", "abc" };
	static const int64_t bounds[] = { 10 };
	struct pcpu_histogram_layout lay = { 0 };
	char dir[] = "/tmp/pcpu-const-XXXXXX";
	struct pcpu_family_desc d;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_family_t *f;
	pcpu_counter_t c;
	char *t, *many[PCPU_STATS_LABELS_MAX];
	unsigned k;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	reg = pcpu_registry_create();
	CHECK(reg != NULL);
	{
		static const char *const le[] = { "le" }, *const two[] = { "x", "x" }, *const v1[] = { "1" },
					  *const v2[] = { "1", "2" };

		CHECK_ERR(pcpu_registry_const_labels(reg, 1, le, v1) == 0, EINVAL, "reserved");
		CHECK_ERR(pcpu_registry_const_labels(reg, 2, two, v2) == 0, EINVAL, "twice");
		CHECK_ERR(pcpu_registry_const_labels(reg, 0, two, v2) == 0, EINVAL, "1 to");
	}
	CHECK(pcpu_registry_const_labels(reg, 2, cn, cv) == 0);
	CHECK_ERR(pcpu_registry_const_labels(reg, 2, cn, cv) == 0, EBUSY, "once");
	seg = pcpu_segment_publish(reg, "const", NULL);
	CHECK(seg != NULL);
	d = desc("http_requests_total", PCPU_METRIC_COUNTER, 1, own);
	f = pcpu_registry_family(reg, &d);
	CHECK(f != NULL);
	CHECK(pcpu_registry_family(reg, &d) == f); /* same description: the same family */
	c = pcpu_family_counter(f, get);
	CHECK(c != NULL);
	pcpu_counter_add(c, 3);
	CHECK(pcpu_family_lookup(f, get) == c);
	CHECK(pcpu_family_counter(f, get) == c);
	pcpu_counter_add(pcpu_registry_counter(reg, "plain_total", "No own labels."), 1);
	lay.scheme = PCPU_HISTOGRAM_EXPLICIT;
	lay.bounds = bounds;
	lay.nbounds = 1;
	d = desc("lat", PCPU_METRIC_HISTOGRAM, 0, NULL);
	d.histogram = &lay;
	pcpu_histogram_record(pcpu_family_histogram(pcpu_registry_family(reg, &d), NULL), 4);
	d = desc("computed", PCPU_METRIC_GAUGE, 0, NULL);
	CHECK(pcpu_family_callback(pcpu_registry_family(reg, &d), NULL, ret_five, NULL) == 0);
	{
		static const struct pcpu_stats_field sf[] = {
			PCPU_STATS_COUNTER(struct ep_stats, pkts, "st_packets_total", "Packets."),
			PCPU_STATS_GAUGE(struct ep_stats, flows, "st_flows", "Flows."),
		};
		static const char *const ifl[] = { "if" }, *const eth0[] = { "eth0" };
		struct ep_stats *st = pcpu_registry_struct(reg, sizeof *st, sf, 2, 1, ifl, eth0);

		CHECK(st != NULL);
		pcpu_counter_add(&st->pkts, 9);
		CHECK(pcpu_family_lookup(pcpu_registry_find(reg, "st_flows"), eth0) == &st->flows);
	}
	CHECK(pcpu_registry_info(reg, "app_build_info", "Build information.", 2, bn, bv) == 0);
	CHECK_ERR(pcpu_registry_info(reg, "app_build_info", "Build information.", 2, bn, bv) == 0,
		  EEXIST, "exists");
	CHECK_ERR(pcpu_registry_info(reg, "app_build", "Build.", 2, bn, bv) == 0, EINVAL, "_info");
	CHECK_ERR(pcpu_registry_info(reg, "_info", "Build.", 2, bn, bv) == 0, EINVAL, "_info");
	{
		/* A family's own constant labels: after its labels, before the
		 * registry's; part of what makes a family the same one. */
		static const char *const fcn[] = { "shard", "tier" }, *const fcv[] = { "7", "hot\"" },
					  *const fcv2[] = { "8", "hot\"" }, *const bad1[] = { "method" },
					  *const bad2[] = { "region" }, *const bad3[] = { "le" };
		pcpu_family_t *fs;

		d = desc("shard_ops_total", PCPU_METRIC_COUNTER, 1, own);
		fs = pcpu_registry_family_const(reg, &d, 2, fcn, fcv);
		CHECK(fs != NULL && pcpu_registry_family_const(reg, &d, 2, fcn, fcv) == fs);
		CHECK_ERR(pcpu_registry_family_const(reg, &d, 2, fcn, fcv2) != NULL, EEXIST, "constant labels");
		CHECK_ERR(pcpu_registry_family_const(reg, &d, 1, fcn, fcv) != NULL, EEXIST, "constant labels");
		CHECK_ERR(pcpu_registry_family(reg, &d) != NULL, EEXIST, "constant labels");
		CHECK_ERR(pcpu_registry_family_const(reg, &d, 1, bad1, fcv) != NULL, EINVAL,
			  "constant label of the family");
		CHECK_ERR(pcpu_registry_family_const(reg, &d, 1, bad2, fcv) != NULL, EINVAL,
			  "constant label of the registry");
		CHECK_ERR(pcpu_registry_family_const(reg, &d, 1, bad3, fcv) != NULL, EINVAL, "reserved");
		CHECK_ERR(pcpu_registry_family_const(reg, &d, 0, fcn, fcv) != NULL, EINVAL, "1 to 32");
		CHECK_ERR(pcpu_registry_family_const(NULL, &d, 2, fcn, fcv) != NULL, EINVAL, "NULL");
		pcpu_counter_add(pcpu_family_counter(fs, get), 4);
		CHECK(pcpu_family_lookup(fs, get) != NULL);
		/* A removed family's values are freed (ASan) and its name free. */
		d = desc("removed_total", PCPU_METRIC_COUNTER, 0, NULL);
		CHECK(pcpu_registry_remove_family(reg, pcpu_registry_family_const(reg, &d, 2, fcn, fcv)) == 0);
		CHECK(pcpu_registry_family(reg, &d) != NULL);
	}
	{
		/* An info family x_info is OpenMetrics family x: no other family
		 * may be x, nor x_info without being an info family; its series
		 * are made by pcpu_registry_info() only (at 1). */
		static const char *const bv2[] = { "1.3", "def" };
		pcpu_family_t *fi = pcpu_registry_find(reg, "app_build_info");

		CHECK(fi != NULL);
		d = desc("app_build", PCPU_METRIC_GAUGE, 0, NULL);
		CHECK_ERR(pcpu_registry_family(reg, &d) != NULL, EEXIST, "\"app_build\"");
		d = desc("app_build_total", PCPU_METRIC_COUNTER, 0, NULL);
		CHECK_ERR(pcpu_registry_family(reg, &d) != NULL, EEXIST, "already written");
		d = desc("app_build_info", PCPU_METRIC_GAUGE, 2, bn);
		d.help = "Build information.";
		CHECK_ERR(pcpu_registry_family(reg, &d) != NULL, EEXIST, "info metric");
		CHECK(pcpu_registry_find(reg, "app_build") == NULL && errno == ENOENT);
		CHECK_ERR(pcpu_family_gauge(fi, bv2) != NULL, EINVAL, "pcpu_registry_info");
		CHECK_ERR(pcpu_family_callback(fi, bv2, ret_five, NULL) == 0, EINVAL, "info");
		CHECK(pcpu_registry_info(reg, "app_build_info", "Build information.", 2, bn, bv2) == 0);
		CHECK(pcpu_family_size(fi) == 2);
		/* A handle changed behind its back still exposes 1. */
		CHECK(pcpu_gauge_set(pcpu_family_lookup(fi, bv2), 5) == 0);
		/* ... and the other way round: x first, then x_info. */
		d = desc("app_version", PCPU_METRIC_GAUGE, 0, NULL);
		CHECK(pcpu_registry_family(reg, &d) != NULL);
		CHECK_ERR(pcpu_registry_info(reg, "app_version_info", "V.", 2, bn, bv) == 0, EEXIST,
			  "already written");
		/* A removed info family gives its OpenMetrics name back. */
		d = desc("gone_info", PCPU_METRIC_GAUGE, 0, NULL);
		CHECK(pcpu_registry_info(reg, "gone_info", NULL, 0, NULL, NULL) == 0);
		CHECK(pcpu_registry_remove_family(reg, pcpu_registry_find(reg, "gone_info")) == 0);
		d = desc("gone", PCPU_METRIC_GAUGE, 0, NULL);
		CHECK(pcpu_registry_family(reg, &d) != NULL);
	}
	/* Refusals: a family's own label named like a constant one; too many. */
	{
		static const char *const clash[] = { "region" };

		d = desc("clash", PCPU_METRIC_GAUGE, 1, clash);
		CHECK_ERR(pcpu_registry_family(reg, &d) != NULL, EINVAL, "constant label");
		for (k = 0; k < PCPU_STATS_LABELS_MAX - 1; k++) {
			many[k] = malloc(8);
			snprintf(many[k], 8, "l%u", k);
		}
		d = desc("too_many", PCPU_METRIC_GAUGE, PCPU_STATS_LABELS_MAX - 1,
			 (const char *const *)many);
		CHECK_ERR(pcpu_registry_family(reg, &d) != NULL, EINVAL, "too many labels");
		for (k = 0; k < PCPU_STATS_LABELS_MAX - 1; k++)
			free(many[k]);
	}

	t = written(reg, PCPU_FORMAT_PROMETHEUS);
	CHECK(strstr(t, "\nhttp_requests_total{method=\"GET\",instance=\"a:1\",region=\"eu\\\"1\"} 3\n"));
	CHECK(strstr(t, "\nplain_total{instance=\"a:1\",region=\"eu\\\"1\"} 1\n"));
	CHECK(strstr(t, "\nlat_bucket{instance=\"a:1\",region=\"eu\\\"1\",le=\"10.0\"} 1\n"));
	CHECK(strstr(t, "\ncomputed{instance=\"a:1\",region=\"eu\\\"1\"} 5\n"));
	CHECK(strstr(t, "\nst_packets_total{if=\"eth0\",instance=\"a:1\",region=\"eu\\\"1\"} 9\n"));
	CHECK(strstr(t, "\napp_build_info{version=\"1.2\",revision=\"abc\",instance=\"a:1\",region=\"eu\\\"1\"} 1\n"));
	CHECK(strstr(t, "\nshard_ops_total{method=\"GET\",shard=\"7\",tier=\"hot\\\"\",instance=\"a:1\",region=\"eu\\\"1\"} 4\n"));
	free(t);
	t = written(reg, PCPU_FORMAT_OPENMETRICS);
	CHECK(strstr(t, "\nhttp_requests_total{method=\"GET\",instance=\"a:1\",region=\"eu\\\"1\"} 3\n"));
	CHECK(strstr(t, "# TYPE app_build info\n# HELP app_build Build information.\napp_build_info{"));
	CHECK(strstr(t, "\napp_build_info{version=\"1.3\",revision=\"def\",instance=\"a:1\",region=\"eu\\\"1\"} 1\n"));
	free(t);
	t = written(reg, PCPU_FORMAT_JSON);
	CHECK(strstr(t, "\"labels\":{\"method\":\"GET\",\"instance\":\"a:1\",\"region\":\"eu\\\"1\"}"));
	free(t);
	/* The published segment carries them too. */
	t = segment_text(pcpu_segment_path(seg));
	CHECK(strstr(t, "\nhttp_requests_total{method=\"GET\",instance=\"a:1\",region=\"eu\\\"1\"} 3\n"));
	CHECK(strstr(t, "\nshard_ops_total{method=\"GET\",shard=\"7\",tier=\"hot\\\"\",instance=\"a:1\",region=\"eu\\\"1\"} 4\n"));
	CHECK(strstr(t, "\napp_build_info{version=\"1.2\",revision=\"abc\",instance=\"a:1\",region=\"eu\\\"1\"} 1\n"));
	free(t);
	CHECK(pcpu_family_remove(f, get) == 0);
	CHECK(pcpu_family_lookup(f, get) == NULL && errno == ENOENT);
	pcpu_registry_destroy(reg);
	CHECK(rmdir(dir) == 0);
}

int main(void)
{
	test_const_labels();
	test_suffixes();
	test_validation();
	test_api();
	test_structs();
	test_concurrent();
	printf("registry tests passed (mode %s)\n", pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
