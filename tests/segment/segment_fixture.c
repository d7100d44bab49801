/*
 * A test application that publishes a statistics segment (in
 * $PCPU_SEGMENT_DIR) for the pcpustat, exporter and Prometheus tests.
 *
 *   segment_fixture golden [NAME]     fixed statistics of every kind
 *   segment_fixture count N [NAME]    test_events_total counted to N by 4 threads
 *   segment_fixture churn [NAME]      threads add and remove series all the time:
 *                                     churn_value{id="K"} is always 0 or 7*K
 *   segment_fixture beyond [NAME]     2.8: test_mem_bytes{k} gauges beyond the integer
 *                                     words (16e9, 1e-12, 1e300, +Inf, NaN, 0.1 x 10,
 *                                     1/3), test_transfer_bytes (a histogram with
 *                                     fractions in billionths: 1000 x 5e9 and 0.5),
 *                                     test_jobs_total with three label sets: {} 3,
 *                                     {queue="q1"} 4, {queue="q1",prio="hi"} 5
 *   segment_fixture die [NAME]        publishes, then exits without unpublishing
 *   segment_fixture owned [NAME]      test_packets_total: 7 added through owned slot 0
 *                                     (the main thread's claim), 5 through owned
 *                                     slot 1 (a thread's, released at its exit), 3 by
 *                                     an ordinary add (a CPU slot); and
 *                                     test_owned_latency_seconds: 2 observations in
 *                                     owned slot 0 (run it with PCPU_OWNED_SLOTS=2)
 *   segment_fixture clash [NAME]      test_events_total = 5 with another help text: clashes
 *                                     with count's counter of that name when merged
 *   segment_fixture latency [NAME]    a thread records random latencies, log-uniform from
 *                                     1 ms to a bound doubling every second up to 20 s,
 *                                     into test_latency_seconds (log-linear,
 *                                     p = 7, ns exposed in seconds); a line "stop" on
 *                                     stdin stops it and prints "count N" and
 *                                     "quantile Q V" for a few Q: the library's
 *                                     pcpu_snapshot_quantile() of the final counts;
 *                                     the same values go to test_latency_native_seconds
 *                                     (exponential, schema 3): "native Q V"
 *
 * Prints "ready PATH" once the statistics are in place, then runs until its
 * standard input reaches end of file (or 30 minutes pass), unpublishes and
 * exits 0. The bound keeps a forgotten fixture from outliving its test; it
 * is longer than any test's ctest timeout, so that a test slowed down by a
 * loaded machine never loses its fixture midway.
 */
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/flows.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

static pcpu_registry_t *reg;
static volatile int stop_flag;

static void die(const char *what)
{
	fprintf(stderr, "segment_fixture: %s: %s\n", what, *pcpu_segment_error() ? pcpu_segment_error() : pcpu_stats_error());
	exit(1);
}

static void golden(void)
{
	static const char *const ln[] = { "method", "code" };
	static const char *const get[] = { "GET", "200" }, *const post[] = { "POST", "500" };
	static const char *const hostile[] = { "a\"b\\c\nd\x1b[31m", "\xc3\xa9" };
	static const int64_t bounds[] = { 1000, 10000, 100000 };
	struct pcpu_histogram_layout exp = { PCPU_HISTOGRAM_EXPLICIT, bounds, 3, 0, 0, 0, 0, 0, 0 };
	struct pcpu_histogram_layout ll = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0, 2, 1 << 20, 0, 0, 0, 0 };
	struct pcpu_family_desc d;
	pcpu_family_t *f;
	pcpu_histogram_t *h;
	pcpu_gauge_t g;
	int i;

	memset(&d, 0, sizeof d);
	d.name = "app_requests_total";
	d.help = "Requests served, by method and status code.";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 2;
	d.label_names = ln;
	if (!(f = pcpu_registry_family(reg, &d)))
		die("family");
	pcpu_counter_add(pcpu_family_counter(f, get), 1234);
	pcpu_counter_add(pcpu_family_counter(f, post), 7);
	pcpu_counter_add(pcpu_family_counter(f, hostile), 1);

	if (!(g = pcpu_registry_gauge(reg, "app_queue_depth", "Requests waiting.")))
		die("gauge");
	pcpu_gauge_set(g, 42);

	memset(&d, 0, sizeof d);
	d.name = "app_temperature_celsius";
	d.help = "Temperature of the machine room.";
	d.unit = "celsius";
	d.type = PCPU_METRIC_GAUGE;
	d.scale_exp10 = -1;
	if (!(f = pcpu_registry_family(reg, &d)))
		die("family");
	pcpu_gauge_set(pcpu_family_gauge(f, NULL), 215);

	memset(&d, 0, sizeof d);
	d.name = "app_latency_seconds";
	d.help = "Request latency.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -6;
	d.histogram = &exp;
	if (!(f = pcpu_registry_family(reg, &d)) || !(h = pcpu_family_histogram(f, NULL)))
		die("histogram");
	for (i = 0; i < 100; i++)
		pcpu_histogram_record(h, i < 50 ? 500 : i < 90 ? 5000 : i < 99 ? 50000 : 500000);

	memset(&d, 0, sizeof d);
	d.name = "app_message_size_bytes";
	d.help = "Message sizes.";
	d.unit = "bytes";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.histogram = &ll;
	if (!(f = pcpu_registry_family(reg, &d)) || !(h = pcpu_family_histogram(f, NULL)))
		die("histogram");
	for (i = 0; i < 64; i++)
		pcpu_histogram_record(h, 100 + i * 10);

	if (!pcpu_registry_counter(reg, "app_unused_total", "Never counted."))
		die("counter");
}

static pcpu_counter_t events;
static long per_thread;

static void *count_thread(void *arg)
{
	long i;

	(void)arg;
	for (i = 0; i < per_thread; i++)
		pcpu_counter_inc(events);
	return NULL;
}

static void count(long n)
{
	pthread_t t[4];
	int k;

	if (!(events = pcpu_registry_counter(reg, "test_events_total", "Events the test counted.")))
		die("counter");
	per_thread = n / 4;
	for (k = 0; k < 4; k++)
		pthread_create(&t[k], NULL, count_thread, NULL);
	for (k = 0; k < 4; k++)
		pthread_join(t[k], NULL);
	pcpu_counter_add(events, n - 4 * per_thread);
}

static pcpu_family_t *churn_fam;

static void *churn_thread(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	int base = (int)(uintptr_t)arg * 1000;

	while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
		char id[16];
		const char *v[1] = { id };
		int k = base + (int)(rand_r(&seed) % 200);
		pcpu_counter_t c;

		snprintf(id, sizeof id, "%d", k);
		if (rand_r(&seed) % 2) {
			c = pcpu_family_counter(churn_fam, v);
			if (c && pcpu_counter_fetch(c) == 0)
				pcpu_counter_add(c, 7 * (int64_t)k);
		} else {
			pcpu_family_remove(churn_fam, v);
		}
	}
	return NULL;
}

static pcpu_histogram_t *latency, *latency_native;
static volatile int latency_stop;

/* Unpredictable values, as a server's latencies are: log-uniform from 1 ms
 * up to a bound that doubles every second until 20 s, so that buckets keep
 * filling for the first time between two scrapes (what made a sparse
 * exposition's series appear mid-window). */
static void *latency_thread(void *arg)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct timespec t0, t;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!__atomic_load_n(&latency_stop, __ATOMIC_RELAXED)) {
		double span;
		int i;

		clock_gettime(CLOCK_MONOTONIC, &t);
		span = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
		span = span * log(2.0) < log(20000.0) ? span * log(2.0) : log(20000.0);
		for (i = 0; i < 500; i++) {
			double u;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			u = (double)(x >> 11) * 0x1p-53;
			int64_t v = (int64_t)(1e6 * exp(u * span));

			pcpu_histogram_record(latency, v);
			pcpu_histogram_record(latency_native, v);
		}
		usleep(10000);
	}
	return NULL;
}

static void latency_report(void)
{
	static const double qs[] = { 0.1, 0.5, 0.9, 0.99 };
	struct pcpu_snapshot *s = pcpu_registry_snapshot(reg);
	uint64_t n = 0;
	size_t b, k, i;

	if (!s || s->nfamilies != 2)
		die("snapshot");
	for (b = 0; b < s->families[0].nbuckets; b++)
		n += s->families[0].series[0].value.histogram.counts[b];
	printf("count %llu\n", (unsigned long long)n);
	/* Families by name: test_latency_native_seconds, test_latency_seconds. */
	for (i = 2; i-- > 0;) {
		const struct pcpu_snapshot_family *f = &s->families[i];

		for (k = 0; k < sizeof qs / sizeof qs[0]; k++)
			printf("%s %g %.17g\n", i ? "quantile" : "native", qs[k],
			       pcpu_snapshot_quantile(f, f->series[0].value.histogram.counts, qs[k]));
	}
	fflush(stdout);
	pcpu_snapshot_free(s);
}

/* owned: the second worker, owned slot 1 (the main thread holds slot 0). */
static void *owned_worker(void *arg)
{
	pcpu_worker_t w;

	if (pcpu_worker_claim(&w) != 0 || pcpu_worker_slot(w) != (int)(pcpu_nslots() - pcpu_worker_max() + 1))
		die("claim of owned slot 1");
	pcpu_counter_add_owned(w, *(pcpu_counter_t *)arg, 5);
	return NULL; /* released at exit; the value stays */
}

static void owned(void)
{
	static const int64_t bounds[] = { 1000 };
	struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = bounds, .nbounds = 1 };
	struct pcpu_family_desc d = { .name = "test_owned_latency_seconds", .help = "Recorded by a pinned worker.",
				      .unit = "seconds", .type = PCPU_METRIC_HISTOGRAM, .scale_exp10 = -9,
				      .histogram = &l };
	pcpu_counter_t c = pcpu_registry_counter(reg, "test_packets_total", "Packets, by workers and not.");
	pcpu_family_t *f = pcpu_registry_family(reg, &d);
	pcpu_histogram_t *h = f ? pcpu_family_histogram(f, NULL) : NULL;
	pcpu_worker_t w;
	pthread_t t;

	if (!c || !h)
		die("owned statistics");
	if (pcpu_worker_claim(&w) != 0 || pcpu_worker_slot(w) != (int)(pcpu_nslots() - pcpu_worker_max()))
		die("claim of owned slot 0");
	pcpu_counter_add_owned(w, c, 7);
	pcpu_histogram_record_owned(w, h, 500);
	pcpu_histogram_record_owned(w, h, 5000);
	if (pthread_create(&t, NULL, owned_worker, &c) != 0 || pthread_join(t, NULL) != 0)
		die("owned worker");
	pcpu_counter_add(c, 3);
}

static void beyond(void)
{
	static const char *const k[] = { "k" }, *const queue[] = { "queue" },
				 *const qp[] = { "queue", "prio" };
	struct pcpu_histogram_layout ll = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 3,
					    .max_value = (int64_t)1 << 62 };
	struct pcpu_family_desc d;
	pcpu_family_t *f;
	pcpu_histogram_t *h;
	pcpu_gauge_t g;
	int i;

	memset(&d, 0, sizeof d);
	d.name = "test_mem_bytes";
	d.help = "Beyond the integer words.";
	d.unit = "bytes";
	d.type = PCPU_METRIC_GAUGE;
	d.nlabels = 1;
	d.label_names = k;
	if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL)))
		die("gauge with fractions");
	pcpu_gauge_set_double(pcpu_family_gauge(f, (const char *[]){ "big" }), 16e9);
	pcpu_gauge_set_double(pcpu_family_gauge(f, (const char *[]){ "tiny" }), 1e-12);
	pcpu_gauge_set_double(pcpu_family_gauge(f, (const char *[]){ "huge" }), 1e300);
	pcpu_gauge_set_double(pcpu_family_gauge(f, (const char *[]){ "inf" }), INFINITY);
	pcpu_gauge_set_double(pcpu_family_gauge(f, (const char *[]){ "nan" }), NAN);
	g = pcpu_family_gauge(f, (const char *[]){ "tenth" });
	for (i = 0; i < 10; i++)
		pcpu_gauge_add_double(g, 0.1);
	pcpu_gauge_set_double(pcpu_family_gauge(f, (const char *[]){ "third" }), 1.0 / 3);
	memset(&d, 0, sizeof d);
	d.name = "test_transfer_bytes";
	d.help = "Observed in billionths.";
	d.unit = "bytes";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -9;
	d.histogram = &ll;
	if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL)) ||
	    !(h = pcpu_family_histogram(f, NULL)))
		die("histogram with fractions");
	for (i = 0; i < 1000; i++)
		pcpu_histogram_observe(h, 5e9);
	pcpu_histogram_observe(h, 0.5);
	memset(&d, 0, sizeof d);
	d.name = "test_jobs_total";
	d.help = "Label sets of one name.";
	d.type = PCPU_METRIC_COUNTER;
	if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_LABELSET, 0, NULL, NULL)))
		die("label set");
	pcpu_counter_add(pcpu_family_counter(f, NULL), 3);
	d.nlabels = 1;
	d.label_names = queue;
	if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_LABELSET, 0, NULL, NULL)))
		die("label set");
	pcpu_counter_add(pcpu_family_counter(f, (const char *[]){ "q1" }), 4);
	d.nlabels = 2;
	d.label_names = qp;
	if (!(f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_LABELSET, 0, NULL, NULL)))
		die("label set");
	pcpu_counter_add(pcpu_family_counter(f, (const char *[]){ "q1", "hi" }), 5);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *name = "fixture";
	pcpu_segment_t *seg;
	pthread_t t[3];
	int threads = 0, k;

	if (strcmp(mode, "count") == 0 && argc > 3)
		name = argv[3];
	else if (strcmp(mode, "count") != 0 && argc > 2)
		name = argv[2];
	reg = pcpu_registry_create();
	if (!reg || !(seg = pcpu_segment_publish(reg, name, NULL)))
		die("publish");
	if (strcmp(mode, "golden") == 0) {
		golden();
	} else if (strcmp(mode, "beyond") == 0) {
		beyond();
	} else if (strcmp(mode, "count") == 0 && argc > 2) {
		count(atol(argv[2]));
	} else if (strcmp(mode, "churn") == 0) {
		static const char *const ln[] = { "id" };
		struct pcpu_family_desc d;

		memset(&d, 0, sizeof d);
		d.name = "churn_value_total";
		d.help = "0, or 7 times the id.";
		d.type = PCPU_METRIC_COUNTER;
		d.nlabels = 1;
		d.label_names = ln;
		if (!(churn_fam = pcpu_registry_family(reg, &d)))
			die("family");
		for (k = 0; k < 3; k++)
			pthread_create(&t[threads++], NULL, churn_thread, (void *)(uintptr_t)(k + 1));
	} else if (strcmp(mode, "latency") == 0) {
		struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR,
						   .precision_bits = 7,
						   .max_value = (int64_t)600 * 1000000000 };
		struct pcpu_family_desc d = { .name = "test_latency_seconds",
					      .help = "Random latencies, log-uniform from 1 ms to a growing bound.",
					      .unit = "seconds", .type = PCPU_METRIC_HISTOGRAM,
					      .scale_exp10 = -9, .histogram = &l };
		pcpu_family_t *f = pcpu_registry_family(reg, &d);

		static const struct pcpu_histogram_layout nl = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL,
								 .schema = 3 };
		struct pcpu_family_desc nd = d;
		pcpu_family_t *nf;

		nd.name = "test_latency_native_seconds";
		nd.histogram = &nl;
		if (!f || !(latency = pcpu_family_histogram(f, NULL)) ||
		    !(nf = pcpu_registry_family(reg, &nd)) ||
		    !(latency_native = pcpu_family_histogram(nf, NULL)))
			die("histogram");
		pthread_create(&t[threads++], NULL, latency_thread, NULL);
	} else if (strcmp(mode, "owned") == 0) {
		owned();
	} else if (strcmp(mode, "clash") == 0) {
		pcpu_counter_t c = pcpu_registry_counter(reg, "test_events_total", "Not the events count counts.");

		if (!c)
			die("counter");
		pcpu_counter_add(c, 5);
	} else if (strcmp(mode, "flows") == 0) {
		/* Format 2.9: a flows table beside a counter (readers that do
		 * not read tables skip its entry). */
		static const char *const cn[] = { "packets", "bytes" };
		pcpu_flows_t *f = pcpu_segment_flows_create(seg, "flow_traffic", "Per-flow traffic.", 1000,
							    2, cn, NULL);
		pcpu_counter_t c = pcpu_registry_counter(reg, "test_events_total", "Events.");

		if (!f || !c)
			die("flows");
		pcpu_counter_add(c, 5);
		pcpu_flows_add(f, 7, 1, 1500);
		pcpu_registry_collect(reg);
	} else if (strcmp(mode, "die") == 0) {
		pcpu_counter_add(pcpu_registry_counter(reg, "last_words_total", "Before dying."), 3);
		printf("ready %s\n", pcpu_segment_path(seg));
		fflush(stdout);
		_exit(0);
	} else {
		fputs("usage: segment_fixture golden|count N|churn|latency|owned|clash|beyond|flows|die [NAME]\n", stderr);
		return 2;
	}
	printf("ready %s\n", pcpu_segment_path(seg));
	fflush(stdout);
	{
		/* Until stdin closes, at most 30 minutes (of 100 ms polls). */
		struct pollfd p = { 0, POLLIN, 0 };
		char buf[64];
		int waited = 0;

		while (waited < 1800000) {
			int n = poll(&p, 1, 100);
			ssize_t r = n > 0 ? read(0, buf, sizeof buf) : 1;

			if (r <= 0)
				break;
			if (n > 0 && latency && buf[0] == 's' && !latency_stop) {
				__atomic_store_n(&latency_stop, 1, __ATOMIC_RELAXED);
				pthread_join(t[--threads], NULL);
				latency_report();
			}
			waited += 100;
		}
	}
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
	for (k = 0; k < threads; k++)
		pthread_join(t[k], NULL);
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	return 0;
}
