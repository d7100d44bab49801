/* SPDX-License-Identifier: MIT */
/*
 * A test writer for the Go reader's cross-check (go/segment/crosscheck_test.go):
 * publishes, through libpcpu's public API, the kinds of values that
 * tests/segment/segment_fixture does not: counters and gauges with
 * fractions (family flag 16), consistent groups, an info family, an
 * exponential histogram with its own export rule, many slots' worth of
 * adds from several threads; or a segment shared by a process tree whose
 * forked children add into the same series.
 *
 *   segwriter kinds NAME      one process
 *   segwriter sparse NAME     sparse histograms (PCPU_FAMILY_SPARSE, format
 *                             2.10): a few groups of each series made, in
 *                             several slots, one series with none; with
 *                             fractions too
 *   segwriter tree NAME N [HOLD]  PCPU_INDEX=cpu: the publisher and N children;
 *                             with HOLD, a file, the children stay while it
 *                             exists, even after the publisher is gone; a
 *                             sparse histogram whose groups the children make
 *   segwriter many NAME N     N series of a server's mix, as bench/push_bench.c
 *                             makes them (for go/collector's benchmark):
 *                             counters 70%, gauges 29%, histograms 1% (explicit
 *                             60%, log-linear 30%, exponential 10%)
 *
 * Prints "ready PATH" once every value is in place (and, for a tree, once
 * every child has added and waits), then waits for end of file on standard
 * input, unpublishes and exits 0 (a tree's children exit with it).
 * Values never change after "ready", so a Go snapshot and a pcpustat
 * snapshot taken then must agree exactly.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/flows.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

static void die(const char *what)
{
	fprintf(stderr, "segwriter: %s: %s %s\n", what, pcpu_segment_error(), pcpu_stats_error());
	exit(1);
}

static pcpu_counter_t hits;

static void *adder(void *arg)
{
	long k = (long)arg, i;

	for (i = 0; i < 10000 * (k + 1); i++)
		pcpu_counter_inc(hits);
	return NULL;
}

static void kinds(pcpu_registry_t *reg)
{
	static const char *const ln[] = { "path" };
	static const char *const a[] = { "/a" }, *const b[] = { "/b\xc3\xa9" };
	static const int64_t bounds[] = { -10, 0, 100, 1000 };
	struct pcpu_histogram_layout expl = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = bounds, .nbounds = 4 };
	struct pcpu_histogram_layout nat = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3,
					     .export_per_octave = 2, .export_min = 4 };
	struct pcpu_histogram_layout ll = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 3,
					    .max_value = 1 << 16, .export_per_octave = 2, .export_min = 16 };
	struct pcpu_family_desc d, g[2];
	pcpu_family_t *f;
	pcpu_group_family_t *gf;
	pcpu_group_t *grp;
	pcpu_histogram_t *h;
	pthread_t t[3];
	long k;
	int i;

	memset(&d, 0, sizeof d);
	d.name = "w_seconds_total";
	d.help = "Time, with fractions.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = ln;
	if (!(f = pcpu_registry_family_nanos(reg, &d, 0, NULL, NULL)))
		die("nanos counter");
	pcpu_counter_add(pcpu_family_counter(f, a), 3);
	pcpu_counter_add(pcpu_counter_at(pcpu_family_counter(f, a), 1), 2750000000); /* +2.75 */
	pcpu_counter_add(pcpu_family_counter(f, b), 1);
	pcpu_counter_add(pcpu_counter_at(pcpu_family_counter(f, b), 1), -250000000); /* -0.25 */

	memset(&d, 0, sizeof d);
	d.name = "w_ratio";
	d.help = "A gauge with fractions.";
	d.type = PCPU_METRIC_GAUGE;
	if (!(f = pcpu_registry_family_nanos(reg, &d, 0, NULL, NULL)))
		die("nanos gauge");
	pcpu_gauge_set(pcpu_family_gauge(f, NULL), -2);
	pcpu_gauge_add((pcpu_gauge_t)pcpu_counter_at((pcpu_counter_t)pcpu_family_gauge(f, NULL), 1), 125000000);

	if (!(hits = pcpu_registry_counter(reg, "w_hits_total", "Added by three threads.")))
		die("counter");
	for (k = 0; k < 3; k++)
		pthread_create(&t[k], NULL, adder, (void *)k);
	for (k = 0; k < 3; k++)
		pthread_join(t[k], NULL);
	pcpu_counter_add_atomic(hits, 5); /* the mirror's word */

	if (!pcpu_registry_gauge(reg, "w_level", "A plain gauge."))
		die("gauge");
	pcpu_gauge_set(pcpu_registry_gauge(reg, "w_level", "A plain gauge."), -7);

	memset(&d, 0, sizeof d);
	d.name = "w_latency_us";
	d.help = "Explicit bounds, negative ones too.";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.histogram = &expl;
	if (!(f = pcpu_registry_family(reg, &d)) || !(h = pcpu_family_histogram(f, NULL)))
		die("explicit histogram");
	for (i = -20; i < 2000; i += 7)
		pcpu_histogram_record(h, i);

	memset(&d, 0, sizeof d);
	d.name = "w_size_bytes";
	d.help = "Log-linear, 2 bounds per octave from 16.";
	d.unit = "bytes";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.histogram = &ll;
	if (!(f = pcpu_registry_family(reg, &d)) || !(h = pcpu_family_histogram(f, NULL)))
		die("log-linear histogram");
	for (i = 0; i < 3000; i++)
		pcpu_histogram_record(h, (i * 37) % 70000);

	memset(&d, 0, sizeof d);
	d.name = "w_wait_seconds";
	d.help = "Exponential, schema 3, nanoseconds exposed in seconds.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -9;
	d.histogram = &nat;
	if (!(f = pcpu_registry_family(reg, &d)) || !(h = pcpu_family_histogram(f, NULL)))
		die("exponential histogram");
	for (i = 0; i < 500; i++)
		pcpu_histogram_record(h, (int64_t)i * i * 1000);

	memset(g, 0, sizeof g);
	g[0].name = "w_flow_packets_total";
	g[0].help = "Packets of a flow.";
	g[0].type = PCPU_METRIC_COUNTER;
	g[0].nlabels = 1;
	g[0].label_names = ln;
	g[1] = g[0];
	g[1].name = "w_flow_bytes_total";
	g[1].help = "Bytes of a flow.";
	if (!(gf = pcpu_registry_group(reg, g, 2)) || !(grp = pcpu_group_family_series(gf, a)))
		die("group");
	for (i = 0; i < 10; i++)
		pcpu_group_add2(grp, 0, 1, 1500);
	if (!(grp = pcpu_group_family_series(gf, b)))
		die("group series");
	pcpu_group_add2(grp, 0, 2, 80);

	/* 2.8: values beyond the integer words (a residue), a histogram with
	 * fractions (a per-slot double sum), several label sets of a name. */
	{
		static const char *const kn[] = { "k" }, *const pn[] = { "path" },
					 *const mc[] = { "method", "code" };
		static const char *const kv[][1] = { { "big" },	 { "tiny" }, { "huge" }, { "inf" },
						    { "ninf" }, { "nan" },  { "tenth" }, { "third" },
						    { "negzero" } };
		struct pcpu_histogram_layout l62 = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 3,
						     .max_value = (int64_t)1 << 62 };
		pcpu_gauge_t g;

		memset(&d, 0, sizeof d);
		d.name = "w_mem_bytes";
		d.help = "Beyond the words.";
		d.unit = "bytes";
		d.type = PCPU_METRIC_GAUGE;
		d.nlabels = 1;
		d.label_names = kn;
		if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL)))
			die("residue gauge");
		pcpu_gauge_set_double(pcpu_family_gauge(f, kv[0]), 16e9);
		pcpu_gauge_set_double(pcpu_family_gauge(f, kv[1]), 1e-12);
		pcpu_gauge_set_double(pcpu_family_gauge(f, kv[2]), 1e300);
		pcpu_gauge_set_double(pcpu_family_gauge(f, kv[3]), 1.0 / 0.0);
		pcpu_gauge_add_double(pcpu_family_gauge(f, kv[4]), -1.0 / 0.0);
		pcpu_gauge_set_double(pcpu_family_gauge(f, kv[5]), 0.0 / 0.0);
		g = pcpu_family_gauge(f, kv[6]);
		for (i = 0; i < 10; i++)
			pcpu_gauge_add_double(g, 0.1);
		pcpu_gauge_set_double(pcpu_family_gauge(f, kv[7]), 1.0 / 3);
		pcpu_gauge_set_double(pcpu_family_gauge(f, kv[8]), -0.0);

		memset(&d, 0, sizeof d);
		d.name = "w_transfer_bytes";
		d.help = "Observed as doubles, in billionths.";
		d.unit = "bytes";
		d.type = PCPU_METRIC_HISTOGRAM;
		d.scale_exp10 = -9;
		d.histogram = &l62;
		if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL)) ||
		    !(h = pcpu_family_histogram(f, NULL)))
			die("histogram with fractions");
		for (i = 0; i < 100000; i++)
			pcpu_histogram_observe(h, 5e9);
		pcpu_histogram_observe(h, 0.1);
		pcpu_histogram_observe(h, 1e-12);

		memset(&d, 0, sizeof d);
		d.name = "w_requests_total";
		d.help = "Label sets of one name.";
		d.type = PCPU_METRIC_COUNTER;
		if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_LABELSET, 0, NULL, NULL)))
			die("label set {}");
		pcpu_counter_add(pcpu_family_counter(f, NULL), 3);
		d.nlabels = 1;
		d.label_names = pn;
		if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_LABELSET, 0, NULL, NULL)))
			die("label set {path}");
		pcpu_counter_add(pcpu_family_counter(f, a), 5);
		d.nlabels = 2;
		d.label_names = mc;
		if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_LABELSET, 0, NULL, NULL)))
			die("label set {method, code}");
		pcpu_counter_add(pcpu_family_counter(f, (const char *[]){ "GET", "200" }), 7);
	}

	{
		static const char *const iln[] = { "version" }, *const iv[] = { "1.2.3" };
		if (pcpu_registry_info(reg, "w_build_info", "Build.", 1, iln, iv) < 0)
			die("info");
	}
	if (pcpu_registry_collect(reg) < 0) /* the groups' copies in the segment */
		die("collect");
}

/* Records of one sparse_* series, made from its own thread (another slot). */
struct sparse_job {
	pcpu_histogram_t *h;
	const int64_t *v;
	int n;
	double d; /* observed too where not 0 (a family with fractions) */
};

static void *sparse_recorder(void *arg)
{
	const struct sparse_job *j = arg;
	int i;

	for (i = 0; i < j->n; i++)
		pcpu_histogram_record(j->h, j->v[i]);
	if (j->d != 0)
		pcpu_histogram_observe(j->h, j->d);
	return NULL;
}

/* 2.10: histograms whose buckets are made in groups of 8 at their first
 * record, read by the Go reader and pcpustat alike: groups made in a few
 * slots (threads) and out of order, the last group of a bucket count that
 * is not a multiple of 8, a series with no group, an exponential layout
 * (few of its many buckets used), and fractions (the wide pair). */
static void sparse(pcpu_registry_t *reg)
{
	static const char *const ln[] = { "path" };
	static const char *const a[] = { "/a" }, *const b[] = { "/b" }, *const c[] = { "/c" };
	/* 21 bounds: 22 buckets, 3 groups, the last of 6 buckets. */
	static const int64_t bounds[] = { 1,	  2,	  5,	   10,	    20,	     50,     100,
					  200,	  500,	  1000,	   2000,    5000,    10000,  20000,
					  50000, 100000, 200000, 500000, 1000000, 2000000, 5000000 };
	static const int64_t va[] = { 0, 3, 3, 7000, 4, 1 }, vb[] = { 6000000, 10000000, 4000000 },
			     vc[] = { 150, 150, 160 }, vn[] = { 1000, 1100, 1000000, 1100000 };
	struct pcpu_histogram_layout expl = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = bounds, .nbounds = 21 };
	struct pcpu_histogram_layout nat = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3 };
	struct pcpu_histogram_layout l62 = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 3,
					     .max_value = (int64_t)1 << 62 };
	struct {
		struct sparse_job j;
		pthread_t t;
	} runs[5];
	struct pcpu_family_desc d;
	pcpu_family_t *f, *fw, *fn;
	int i;

	memset(&d, 0, sizeof d);
	d.name = "sp_latency_us";
	d.help = "Explicit bounds, sparse.";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.nlabels = 1;
	d.label_names = ln;
	d.histogram = &expl;
	if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_SPARSE, 0, NULL, NULL)))
		die("sparse explicit histogram");

	memset(&d, 0, sizeof d);
	d.name = "sp_wait_seconds";
	d.help = "Exponential, schema 3, sparse.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -9;
	d.histogram = &nat;
	if (!(fn = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_SPARSE, 0, NULL, NULL)))
		die("sparse exponential histogram");

	memset(&d, 0, sizeof d);
	d.name = "sp_transfer_bytes";
	d.help = "Observed as doubles, sparse.";
	d.unit = "bytes";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -9;
	d.nlabels = 1;
	d.label_names = ln;
	d.histogram = &l62;
	if (!(fw = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_SPARSE | PCPU_FAMILY_FRACTIONS, 0, NULL, NULL)))
		die("sparse histogram with fractions");

	/* /c of sp_latency_us first: a series made before the others' groups,
	 * that gets none. */
	if (!pcpu_family_histogram(f, c))
		die("sparse series");
	runs[0].j = (struct sparse_job){ pcpu_family_histogram(f, a), va, 6, 0 };
	runs[1].j = (struct sparse_job){ pcpu_family_histogram(f, b), vb, 3, 0 };
	runs[2].j = (struct sparse_job){ pcpu_family_histogram(f, a), vc, 3, 0 };
	runs[3].j = (struct sparse_job){ pcpu_family_histogram(fn, NULL), vn, 4, 0 };
	runs[4].j = (struct sparse_job){ pcpu_family_histogram(fw, a), vn, 2, 0.1 };
	for (i = 0; i < 5; i++)
		if (!runs[i].j.h)
			die("sparse series");
	for (i = 0; i < 5; i++)
		pthread_create(&runs[i].t, NULL, sparse_recorder, &runs[i].j);
	for (i = 0; i < 5; i++)
		pthread_join(runs[i].t, NULL);
	/* And from this thread: another slot's part of the same groups. */
	pcpu_histogram_record(runs[0].j.h, 7000);
	pcpu_histogram_observe(runs[4].j.h, 5e9);
	pcpu_histogram_observe(runs[4].j.h, 1.0 / 0.0); /* the residue */
	pcpu_histogram_observe(pcpu_family_histogram(fw, b), 1e-12);

	memset(&d, 0, sizeof d);
	d.name = "sp_requests_total";
	d.help = "A dense value beside the groups.";
	d.type = PCPU_METRIC_COUNTER;
	if (!(f = pcpu_registry_family(reg, &d)))
		die("counter");
	pcpu_counter_add(pcpu_family_counter(f, NULL), 11);
}

static void many(pcpu_registry_t *reg, unsigned n)
{
	static const char *const fl[] = { "flow" }, *const ql[] = { "queue" }, *const hl[] = { "handler" };
	static const int64_t bounds[] = { 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000 };
	struct pcpu_histogram_layout ex = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = bounds, .nbounds = 11 };
	struct pcpu_histogram_layout ll = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 7,
					    .max_value = (int64_t)60 * 1000000000 };
	struct pcpu_histogram_layout nat = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3 };
	struct pcpu_family_desc d[5];
	pcpu_family_t *f[5];
	uint64_t x = 88172645463325252ull;
	unsigned i, k, j;
	char v[64];
	const char *vals[] = { v };

	memset(d, 0, sizeof d);
	d[0] = (struct pcpu_family_desc){ .name = "flow_packets_total", .help = "Packets by flow.",
					  .type = PCPU_METRIC_COUNTER, .nlabels = 1, .label_names = fl };
	d[1] = (struct pcpu_family_desc){ .name = "queue_depth", .help = "Queue depth.", .type = PCPU_METRIC_GAUGE,
					  .nlabels = 1, .label_names = ql };
	d[2] = (struct pcpu_family_desc){ .name = "rpc_duration_seconds", .help = "RPC latency.", .unit = "seconds",
					  .type = PCPU_METRIC_HISTOGRAM, .nlabels = 1, .label_names = hl,
					  .scale_exp10 = -9, .histogram = &ex };
	d[3] = d[2];
	d[3].name = "db_query_duration_seconds";
	d[3].histogram = &ll;
	d[4] = d[2];
	d[4].name = "request_duration_seconds";
	d[4].histogram = &nat;
	for (k = 0; k < 5; k++)
		if (!(f[k] = pcpu_registry_family(reg, &d[k])))
			die("family");
	for (i = 0; i < n; i++) {
		unsigned m = i % 100;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		snprintf(v, sizeof v, "s%u", i);
		if (m < 70) {
			pcpu_counter_add(pcpu_family_counter(f[0], vals), (int64_t)(x % 100000000));
		} else if (m < 99) {
			pcpu_gauge_set(pcpu_family_gauge(f[1], vals), (int64_t)(x % 1001));
		} else {
			unsigned h = (i / 100) % 10;
			pcpu_histogram_t *hist = pcpu_family_histogram(f[h < 6 ? 2 : h < 9 ? 3 : 4], vals);

			if (!hist)
				die("histogram");
			for (j = 0; j < 32; j++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				pcpu_histogram_record(hist, (int64_t)(1000 + x % 100000000));
			}
		}
	}
}

static void wait_stdin(void)
{
	char buf[64];

	while (fgets(buf, sizeof buf, stdin))
		;
}

int main(int argc, char **argv)
{
	struct pcpu_segment_options o;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;

	if (argc < 3)
		return 2;
	memset(&o, 0, sizeof o);
	if (!(reg = pcpu_registry_create()))
		die("registry");
	if (strcmp(argv[1], "tree") == 0) {
		int n = argc > 3 ? atoi(argv[3]) : 2, k;
		pcpu_counter_t c;
		int ready[2], hold[2];
		char x;
		static const char *const ln[] = { "worker" };
		/* 24 bounds 1..24: 25 buckets, 4 groups (2.10). */
		static const int64_t tb[] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
					      13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24 };
		struct pcpu_histogram_layout tl = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = tb, .nbounds = 24 };
		struct pcpu_family_desc d;
		pcpu_family_t *f, *hf;
		pcpu_histogram_t *h;

		o.flags = PCPU_SEGMENT_SHARED_TREE;
		if (!(seg = pcpu_segment_publish(reg, argv[2], &o)))
			die("publish");
		if (!(c = pcpu_registry_counter(reg, "t_requests_total", "Requests of the tree.")))
			die("counter");
		memset(&d, 0, sizeof d);
		d.name = "t_served_total";
		d.help = "Requests by worker.";
		d.type = PCPU_METRIC_COUNTER;
		d.nlabels = 1;
		d.label_names = ln;
		if (!(f = pcpu_registry_family(reg, &d)))
			die("family");
		memset(&d, 0, sizeof d);
		d.name = "t_wait_us";
		d.help = "Sparse: group 0 the publisher's, the others the children's.";
		d.type = PCPU_METRIC_HISTOGRAM;
		d.histogram = &tl;
		if (!(hf = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_SPARSE, 0, NULL, NULL)) ||
		    !(h = pcpu_family_histogram(hf, NULL)))
			die("sparse histogram");
		pcpu_histogram_record(h, 1);
		pcpu_counter_add(c, 1);
		if (pipe(ready) < 0 || pipe(hold) < 0)
			die("pipe");
		for (k = 0; k < n; k++) {
			pid_t p = fork();

			if (p < 0)
				die("fork");
			if (p == 0) {
				char w[16];
				const char *v[] = { w };

				close(ready[0]);
				close(hold[1]);
				snprintf(w, sizeof w, "%d", k);
				/* A series the child registers after fork, and one
				 * every process of the tree adds to. */
				pcpu_counter_add(pcpu_family_counter(f, v), 100 + k);
				pcpu_counter_add(c, 1000 * (k + 1));
				/* Into the publisher's group, and into group
				 * k + 1 (the last: +Inf), made by this child. */
				pcpu_histogram_record(h, 1);
				pcpu_histogram_record(h, 8 * (k % 3 + 1) + 1);
				if (write(ready[1], "r", 1) != 1)
					_exit(1);
				/* Stays alive (a member of the tree) until the
				 * publisher closes the pipe, by exiting or dying,
				 * or with HOLD, while that file exists. */
				while (read(hold[0], &x, 1) > 0)
					;
				while (argc > 4 && access(argv[4], F_OK) == 0)
					usleep(20000);
				_exit(0);
			}
		}
		close(ready[1]);
		close(hold[0]);
		for (k = 0; k < n; k++)
			if (read(ready[0], &x, 1) != 1)
				die("child");
		printf("ready %s\n", pcpu_segment_path(seg));
		fflush(stdout);
		wait_stdin();
		signal(SIGCHLD, SIG_IGN);
		pcpu_registry_destroy(reg);
		return 0;
	}
	if (!(seg = pcpu_segment_publish(reg, argv[2], &o)))
		die("publish");
	if (strcmp(argv[1], "many") == 0)
		many(reg, argc > 3 ? (unsigned)atoi(argv[3]) : 100000);
	else if (strcmp(argv[1], "flows") == 0) {
		/* 2.9: a flows table beside a counter (its FLOWS entry is a
		 * kind the Go reader does not read: skipped). */
		static const char *const names[] = { "packets", "bytes" };
		pcpu_flows_t *f = pcpu_segment_flows_create(seg, "flow_traffic", "Per-flow traffic.",
							    1000, 2, names, NULL);
		pcpu_counter_t c = pcpu_registry_counter(reg, "requests", "Requests.");

		if (!f || !c)
			die("flows");
		pcpu_counter_add(c, 5);
		pcpu_flows_add(f, 7, 0, 3);
		pcpu_registry_collect(reg);
	} else if (strcmp(argv[1], "sparse") == 0)
		sparse(reg);
	else
		kinds(reg);
	printf("ready %s\n", pcpu_segment_path(seg));
	fflush(stdout);
	wait_stdin();
	pcpu_registry_destroy(reg);
	return 0;
}
