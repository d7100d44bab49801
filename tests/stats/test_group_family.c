/*
 * Consistent groups as registry families (pcpu_registry_group).
 *
 * API: members are ordinary families for exposition and lookups, but their
 * series come and go only through the group family; refusals; removal; a
 * published registry's segment holds each group's last consistent read.
 *
 * Stress: writer threads (more than CPUs, yielding, with SIGUSR1 handlers
 * that update the same groups) add (1 packet, 1500 bytes) to the groups of
 * a two-member family of a published registry; readers take registry
 * snapshots (each refreshes the segment's copies of the groups) and one
 * reads the segment as another process would; every series must have
 * bytes == 1500 * packets (never torn) and never go backwards; at the end
 * the values are exact, in the registry and in the segment. ctest runs it with
 * glibc's rseq, pcpu's own registration, and without rseq (--expect-mode).
 */
#include "../check.h"
#include "segment_text.h"
#include <pcpu/pcpu.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NFLOWS 4
#define MAX_WRITERS 64

static const char *const flow_label[] = { "flow" };
static const char *const flows[NFLOWS][1] = { { "a" }, { "b" }, { "c" }, { "d" } };

static struct pcpu_family_desc member(const char *name, enum pcpu_metric_type t)
{
	struct pcpu_family_desc d;

	memset(&d, 0, sizeof d);
	d.name = name;
	d.help = "Group member.";
	d.type = t;
	d.nlabels = 1;
	d.label_names = flow_label;
	return d;
}

static void test_api(void)
{
	char dir[] = "/tmp/pcpu-gfam-XXXXXX";
	struct pcpu_family_desc m[3];
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_group_family_t *gf;
	pcpu_family_t *pk;
	pcpu_group_t *g;
	int64_t d[3] = { 1, 1500, -1 };
	char *t;
	size_t len;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	reg = pcpu_registry_create();
	CHECK(reg != NULL);
	seg = pcpu_segment_publish(reg, "gfam", NULL);
	CHECK(seg != NULL);
	m[0] = member("flow_packets_total", PCPU_METRIC_COUNTER);
	m[1] = member("flow_bytes_total", PCPU_METRIC_COUNTER);
	m[2] = member("flow_window", PCPU_METRIC_GAUGE);
	gf = pcpu_registry_group(reg, m, 3);
	CHECK(gf != NULL);
	g = pcpu_group_family_series(gf, flows[0]);
	CHECK(g != NULL && pcpu_group_members(g) == 3 && pcpu_group_count(g) == 1);
	CHECK(pcpu_group_family_series(gf, flows[0]) == g);
	pcpu_group_add(g, 0, d);
	pcpu_group_add(g, 0, d);
	pcpu_counter_add(pcpu_registry_counter(reg, "plain_total", "Beside."), 2);

	/* Members are families: found by name, exposed with every label set. */
	pk = pcpu_registry_find(reg, "flow_packets_total");
	CHECK(pk != NULL && pcpu_family_size(pk) == 1);
	CHECK(pcpu_family_lookup(pk, flows[0]) == g);
	CHECK(pcpu_family_counter(pk, flows[1]) == NULL && errno == EINVAL);
	CHECK(pcpu_family_remove(pk, flows[0]) == -1 && errno == EBUSY);
	CHECK(pcpu_registry_remove_family(reg, pk) == -1 && errno == EBUSY);
	/* Refusals: names taken, histogram members, labels that differ. */
	CHECK(pcpu_registry_group(reg, m, 3) == NULL && errno == EEXIST);
	CHECK(pcpu_registry_family(reg, &m[0]) == NULL && errno == EEXIST);
	{
		struct pcpu_family_desc x[2];
		static const char *const other[] = { "other" };

		x[0] = member("x_total", PCPU_METRIC_COUNTER);
		x[1] = member("y_total", PCPU_METRIC_COUNTER);
		x[1].label_names = other;
		CHECK(pcpu_registry_group(reg, x, 2) == NULL && errno == EINVAL);
		x[1] = member("y", PCPU_METRIC_HISTOGRAM);
		CHECK(pcpu_registry_group(reg, x, 2) == NULL && errno == EINVAL);
		CHECK(pcpu_registry_group(reg, x, 0) == NULL && errno == EINVAL);
		/* All or nothing: y's name is taken, so x is not left behind. */
		x[1] = member("plain", PCPU_METRIC_COUNTER);
		CHECK(pcpu_registry_group(reg, x, 2) == NULL && errno == EEXIST);
		CHECK(pcpu_registry_find(reg, "x_total") == NULL);
	}

	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &t, &len) == 0);
	CHECK(strstr(t, "\nflow_packets_total{flow=\"a\"} 2\n"));
	CHECK(strstr(t, "\nflow_bytes_total{flow=\"a\"} 3000\n"));
	CHECK(strstr(t, "\nflow_window{flow=\"a\"} -2\n"));
	free(t);
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_OPENMETRICS, &t, &len) == 0);
	CHECK(strstr(t, "\nflow_bytes_total{flow=\"a\"} 3000\n"));
	free(t);

	/* The segment holds each group's last read (the writes above read
	 * them): another process sees the same consistent values. */
	t = segment_text(pcpu_segment_path(seg));
	CHECK(strstr(t, "plain_total 2\n"));
	CHECK(strstr(t, "\nflow_packets_total{flow=\"a\"} 2\n"));
	CHECK(strstr(t, "\nflow_bytes_total{flow=\"a\"} 3000\n"));
	CHECK(strstr(t, "\nflow_window{flow=\"a\"} -2\n"));
	free(t);
	pcpu_group_add(g, 0, d); /* not read yet: the segment still says 2 */
	t = segment_text(pcpu_segment_path(seg));
	CHECK(strstr(t, "\nflow_packets_total{flow=\"a\"} 2\n"));
	free(t);
	CHECK(pcpu_registry_collect(reg) == 0); /* what a publisher does on a timer */
	t = segment_text(pcpu_segment_path(seg));
	CHECK(strstr(t, "\nflow_packets_total{flow=\"a\"} 3\n"));
	CHECK(strstr(t, "\nflow_bytes_total{flow=\"a\"} 4500\n"));
	free(t);

	CHECK(pcpu_group_family_remove(gf, flows[0]) == 0);
	CHECK(pcpu_group_family_remove(gf, flows[0]) == -1 && errno == ENOENT);
	CHECK(pcpu_family_size(pk) == 0);
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &t, &len) == 0);
	CHECK(!strstr(t, "flow=\"a\""));
	free(t);
	t = segment_text(pcpu_segment_path(seg));
	CHECK(!strstr(t, "flow=\"a\""));
	free(t);
	g = pcpu_group_family_series(gf, flows[1]); /* freed with the registry */
	CHECK(g != NULL);
	pcpu_group_add(g, 0, d);
	pcpu_registry_destroy(reg);
	CHECK(rmdir(dir) == 0);
}

/* ---- stress ---- */

static pcpu_registry_t *sreg;
static pcpu_group_t *sg[NFLOWS];
static int stop;
static int64_t added[NFLOWS]; /* summed at writer exit */
static uint64_t snapshots, seg_snapshots, violations;
static uint64_t live_snapshots, live_seg_snapshots; /* counted as the readers go */
#define MIN_SNAPSHOTS 10 /* a run takes more than this many of each */
static __thread int64_t my_sig_adds[NFLOWS];
static __thread uint64_t rng;

static void handler(int sig)
{
	(void)sig;
	/* May interrupt this thread's own update of flow 0. */
	pcpu_group_add2(sg[0], 0, 1, 1500);
	my_sig_adds[0]++;
}

static void *writer(void *arg)
{
	int64_t mine[NFLOWS] = { 0 };
	unsigned i;
	uint64_t n;

	rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)arg;
	for (n = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); n++) {
		unsigned f = (unsigned)(check_xorshift(&rng) % NFLOWS);

		pcpu_group_add2(sg[f], 0, 1, 1500);
		mine[f]++;
		if (n % 4096 == 0)
			sched_yield();
	}
	/* No handler may run once its adds are folded in: a signal sent just
	 * before `stop` could otherwise add after the fold (a ThreadSanitizer
	 * run saw 2 such adds). Blocked, a pending one is never delivered. */
	{
		sigset_t usr1;

		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		CHECK(pthread_sigmask(SIG_BLOCK, &usr1, NULL) == 0);
	}
	for (i = 0; i < NFLOWS; i++)
		__atomic_add_fetch(&added[i], mine[i] + my_sig_adds[i], __ATOMIC_RELAXED);
	return NULL;
}

/* Checks one snapshot; returns the packets of each flow. */
static void check_snapshot(const struct pcpu_snapshot *s, int64_t *pk, int64_t *by)
{
	size_t f, i;

	for (i = 0; i < NFLOWS; i++)
		pk[i] = by[i] = -1;
	for (f = 0; f < s->nfamilies; f++) {
		const struct pcpu_snapshot_family *fam = &s->families[f];
		int bytes = strcmp(fam->name, "st_bytes") == 0;

		if (!bytes && strcmp(fam->name, "st_packets") != 0)
			continue;
		for (i = 0; i < fam->nseries; i++) {
			unsigned k = (unsigned)(fam->series[i].label_values[0][0] - 'a');

			CHECK(k < NFLOWS);
			(bytes ? by : pk)[k] = (int64_t)fam->series[i].value.counter;
		}
	}
}

/* arg NULL: registry snapshots in this process; else the path of the
 * published segment, read as another process would. */
static void *reader(void *arg)
{
	int64_t last[NFLOWS] = { 0 }, pk[NFLOWS], by[NFLOWS];
	uint64_t n = 0, bad = 0;
	unsigned i;
	pcpu_reader_t *r = NULL;
	struct pcpu_reader_options ro;

	if (arg) {
		memset(&ro, 0, sizeof ro);
		r = pcpu_reader_open(arg, &ro);
		CHECK(r != NULL);
	}
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct pcpu_reader_snapshot *rs = NULL;
		struct pcpu_snapshot *s;

		if (r) {
			CHECK(pcpu_reader_snapshot(r, 0, &rs) == 0);
			s = &rs->snapshot;
		} else {
			s = pcpu_registry_snapshot(sreg);
		}
		CHECK(s != NULL);
		check_snapshot(s, pk, by);
		for (i = 0; i < NFLOWS; i++) {
			/* Left out only together (a group that timed out). */
			if (pk[i] < 0 && by[i] < 0)
				continue;
			if (by[i] != 1500 * pk[i] || pk[i] < last[i]) {
				fprintf(stderr, "flow %u: packets %lld bytes %lld (last packets %lld)\n", i,
					(long long)pk[i], (long long)by[i], (long long)last[i]);
				bad++;
			}
			last[i] = pk[i];
		}
		if (r)
			pcpu_reader_snapshot_free(rs);
		else
			pcpu_snapshot_free(s);
		n++;
		__atomic_add_fetch(r ? &live_seg_snapshots : &live_snapshots, 1, __ATOMIC_RELAXED);
	}
	if (r)
		pcpu_reader_close(r);
	__atomic_add_fetch(r ? &seg_snapshots : &snapshots, n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&violations, bad, __ATOMIC_RELAXED);
	return NULL;
}

static void stress(double seconds, const char *expect_mode)
{
	struct pcpu_family_desc m[2];
	pcpu_group_family_t *gf;
	pthread_t w[MAX_WRITERS], rd[3];
	pcpu_segment_t *seg;
	char dir[] = "/tmp/pcpu-gfam-stress-XXXXXX";
	struct sigaction sa;
	struct pcpu_snapshot *s;
	int64_t pk[NFLOWS], by[NFLOWS];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int nw = (int)(ncpu * 3 + 1), i;
	struct timespec ts;
	double t0, t;

	if (expect_mode && strcmp(expect_mode, pcpu_rseq_mode_name(pcpu_rseq_mode())) != 0) {
		fprintf(stderr, "rseq mode is %s, expected %s\n", pcpu_rseq_mode_name(pcpu_rseq_mode()),
			expect_mode);
		exit(1);
	}
	if (nw > MAX_WRITERS)
		nw = MAX_WRITERS;
	sreg = pcpu_registry_create();
	CHECK(sreg != NULL);
	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	seg = pcpu_segment_publish(sreg, "gfam_stress", NULL);
	CHECK(seg != NULL);
	m[0] = member("st_packets", PCPU_METRIC_COUNTER);
	m[1] = member("st_bytes", PCPU_METRIC_COUNTER);
	gf = pcpu_registry_group(sreg, m, 2);
	CHECK(gf != NULL);
	for (i = 0; i < NFLOWS; i++)
		CHECK((sg[i] = pcpu_group_family_series(gf, flows[i])) != NULL);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	for (i = 0; i < nw; i++)
		CHECK(pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)(i + 1)) == 0);
	for (i = 0; i < 2; i++)
		CHECK(pthread_create(&rd[i], NULL, reader, NULL) == 0);
	CHECK(pthread_create(&rd[2], NULL, reader, (void *)pcpu_segment_path(seg)) == 0);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	/* `seconds`, and until the readers have taken the snapshots the checks
	 * below need (a loaded machine gets there later); 10 minutes only bound
	 * a run that never gets there. */
	do {
		usleep(2000);
		pthread_kill(w[rand() % nw], SIGUSR1);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	} while (t - t0 < 600 &&
		 (t - t0 < seconds ||
		  __atomic_load_n(&live_snapshots, __ATOMIC_RELAXED) <= MIN_SNAPSHOTS ||
		  __atomic_load_n(&live_seg_snapshots, __ATOMIC_RELAXED) <= MIN_SNAPSHOTS));
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nw; i++)
		CHECK(pthread_join(w[i], NULL) == 0);
	for (i = 0; i < 3; i++)
		CHECK(pthread_join(rd[i], NULL) == 0);
	/* Exact once writers stopped. */
	s = pcpu_registry_snapshot(sreg);
	CHECK(s != NULL);
	check_snapshot(s, pk, by);
	for (i = 0; i < NFLOWS; i++) {
		CHECK_EQ_U64(pk[i], added[i]);
		CHECK_EQ_U64(by[i], 1500 * added[i]);
	}
	pcpu_snapshot_free(s);
	/* The segment holds that last read too: exact as well. */
	{
		struct pcpu_reader_options ro;
		struct pcpu_reader_snapshot *rs;
		pcpu_reader_t *r;

		memset(&ro, 0, sizeof ro);
		r = pcpu_reader_open(pcpu_segment_path(seg), &ro);
		CHECK(r != NULL);
		CHECK(pcpu_reader_snapshot(r, 0, &rs) == 0);
		check_snapshot(&rs->snapshot, pk, by);
		for (i = 0; i < NFLOWS; i++) {
			CHECK_EQ_U64(pk[i], added[i]);
			CHECK_EQ_U64(by[i], 1500 * added[i]);
		}
		pcpu_reader_snapshot_free(rs);
		pcpu_reader_close(r);
	}
	printf("group family stress (%s, %d writers): %llu snapshots, %llu through the segment, "
	       "%llu torn; flow a %lld packets\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), nw, (unsigned long long)snapshots,
	       (unsigned long long)seg_snapshots, (unsigned long long)violations, (long long)added[0]);
	CHECK(violations == 0);
	CHECK(snapshots > MIN_SNAPSHOTS && seg_snapshots > MIN_SNAPSHOTS);
	pcpu_registry_destroy(sreg);
	CHECK(rmdir(dir) == 0);
}

int main(int argc, char **argv)
{
	const char *expect = NULL;
	double seconds = 1.5;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-mode") && i + 1 < argc)
			expect = argv[++i];
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
	}
	test_api();
	stress(seconds, expect);
	return 0;
}
