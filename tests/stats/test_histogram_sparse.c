/*
 * Histograms whose buckets take memory as they are used
 * (PCPU_HISTOGRAM_SPARSE, PCPU_FAMILY_SPARSE; issue 61, item 2).
 *
 * --unit: a sparse histogram reads what a dense one of the same layout
 * reads after the same records (four layouts, random log-uniform values,
 * record, record_n, observe, merge, zero, quantiles), and makes only the
 * groups of the buckets it was given; the flag's errors; a registry
 * family's series sparse in a private registry and a published one; a group that cannot be made (the address space limited, in a
 * child) counted by pcpu_histogram_lost() and in no bucket.
 *
 * --stress: threads that migrate between CPUs and take signals
 * (tests/stress_harness.h) record into fresh sparse histograms, round
 * after round, so that many first records of a group race (two threads
 * making one group: one of the two objects must win, and no record may
 * land in the loser's); a reader reads meanwhile. Every bucket's count and
 * every histogram's sum must be exact at each round's end, in every rseq
 * mode (--expect-mode glibc|own|fallback). With --published they are
 * series of a published registry's sparse family (segment format 2.10),
 * removed and made again each round, so that their tables' blobs are
 * reused: an outside reader snapshots the segment meanwhile (never
 * refused), and at each round's end reads byte for byte what the writer
 * exposes.
 *
 * Usage: test_histogram_sparse --unit | --stress [--published] [--expect-mode M] [--rounds N]
 */
#include "../check.h"
#include "../stress_harness.h"
#include <pcpu/pcpu.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* The groups a sparse histogram has made (its record path's array). */
static size_t groups_made(const pcpu_histogram_t *h)
{
	size_t k, n = (pcpu_histogram_nbuckets(h) + PCPU_HISTOGRAM_GROUP_BUCKETS - 1) /
		      PCPU_HISTOGRAM_GROUP_BUCKETS, made = 0;

	for (k = 0; k < n; k++)
		made += __atomic_load_n(&h->pcpu__groups[k], __ATOMIC_ACQUIRE) != NULL;
	return made;
}

/* A log-uniform value in [1, 10^10) (nanoseconds: 1 ns to 10 s), negative
 * one time in 64. */
static int64_t some_value(uint64_t *rng)
{
	uint64_t r = check_xorshift(rng);
	double v = pow(10.0, (double)(r % 1000000) / 100000.0);

	return (r >> 40) % 64 == 0 ? -(int64_t)v : (int64_t)v;
}

static void read_both(const pcpu_histogram_t *d, const pcpu_histogram_t *s, const char *what)
{
	size_t n = pcpu_histogram_nbuckets(d), b;
	uint64_t *cd = calloc(n, sizeof *cd), *cs = calloc(n, sizeof *cs), td, ts;
	int64_t sd, ss;

	CHECK(cd && cs && pcpu_histogram_nbuckets(s) == n);
	CHECK(pcpu_histogram_read(d, cd, n, &td, &sd) == 0);
	CHECK(pcpu_histogram_read(s, cs, n, &ts, &ss) == 0);
	for (b = 0; b < n; b++)
		if (cd[b] != cs[b]) {
			fprintf(stderr, "%s: bucket %zu: dense %llu, sparse %llu\n", what, b,
				(unsigned long long)cd[b], (unsigned long long)cs[b]);
			exit(1);
		}
	if (td != ts || sd != ss) {
		fprintf(stderr, "%s: dense count %llu sum %lld, sparse %llu %lld\n", what,
			(unsigned long long)td, (long long)sd, (unsigned long long)ts, (long long)ss);
		exit(1);
	}
	if (td) {
		static const double qs[] = { 0, 0.5, 0.9, 0.99, 1 };

		for (b = 0; b < sizeof qs / sizeof qs[0]; b++)
			CHECK(pcpu_histogram_quantile(d, cd, n, qs[b]) == pcpu_histogram_quantile(s, cs, n, qs[b]));
	}
	free(cd);
	free(cs);
}

/* The groups of the buckets `values` fall in. */
static size_t groups_of(const pcpu_histogram_t *h, const int64_t *values, size_t n)
{
	size_t ng = (pcpu_histogram_nbuckets(h) + PCPU_HISTOGRAM_GROUP_BUCKETS - 1) / PCPU_HISTOGRAM_GROUP_BUCKETS;
	char *seen = calloc(ng, 1);
	size_t i, k = 0;

	CHECK(seen != NULL);
	for (i = 0; i < n; i++) {
		size_t g = pcpu_histogram_bucket_of(h, values[i]) / PCPU_HISTOGRAM_GROUP_BUCKETS;

		k += !seen[g];
		seen[g] = 1;
	}
	free(seen);
	return k;
}

static void same_as_dense(const struct pcpu_histogram_layout *l, const char *what)
{
	pcpu_histogram_t *d = pcpu_histogram_create_ex(NULL, l, 0);
	pcpu_histogram_t *s = pcpu_histogram_create_ex(NULL, l, PCPU_HISTOGRAM_SPARSE);
	pcpu_histogram_t *m = pcpu_histogram_create_ex(NULL, l, PCPU_HISTOGRAM_SPARSE);
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int64_t few[3], all[4000];
	size_t n, i;
	uint64_t *counts;
	int64_t sum;

	CHECK(d && s && m);
	n = pcpu_histogram_nbuckets(d);
	CHECK(d->pcpu__c != NULL && s->pcpu__c == NULL && s->pcpu__groups != NULL);
	CHECK(groups_made(s) == 0);
	/* A narrow range first: only its groups are made. */
	few[0] = 1500000;
	few[1] = 1700000;
	few[2] = 1900000;
	for (i = 0; i < 3; i++) {
		pcpu_histogram_record(d, few[i]);
		pcpu_histogram_record(s, few[i]);
	}
	read_both(d, s, what);
	CHECK(groups_made(s) == groups_of(s, few, 3));
	CHECK(groups_made(s) <= 2);
	/* Then everywhere: record, record_n, owned by nobody (the zero claim). */
	for (i = 0; i < sizeof all / sizeof all[0]; i++) {
		all[i] = some_value(&rng);
		if (i % 3 == 0) {
			pcpu_histogram_record_n(d, all[i], i % 7);
			pcpu_histogram_record_n(s, all[i], i % 7);
		} else if (i % 3 == 1) {
			pcpu_worker_t none = { 0 };

			pcpu_histogram_record_owned(none, d, all[i]);
			pcpu_histogram_record_owned(none, s, all[i]);
		} else {
			pcpu_histogram_record(d, all[i]);
			pcpu_histogram_record(s, all[i]);
		}
	}
	read_both(d, s, what);
	CHECK(groups_made(s) <= groups_of(s, all, sizeof all / sizeof all[0]) + 2);
	/* A read merged into another sparse histogram: the same read. */
	counts = calloc(n, sizeof *counts);
	CHECK(counts != NULL);
	CHECK(pcpu_histogram_read(s, counts, n, NULL, &sum) == 0);
	CHECK(pcpu_histogram_merge(m, counts, n, sum) == 0);
	read_both(d, m, what);
	/* A merge of a sum alone lands in bucket 0's group. */
	memset(counts, 0, n * sizeof *counts);
	CHECK(pcpu_histogram_merge(m, counts, n, 5) == 0);
	CHECK(pcpu_histogram_merge(d, counts, n, 5) == 0);
	read_both(d, m, what);
	/* Reset by offset: both read 0, then count again. */
	CHECK(pcpu_histogram_zero(d) == 0 && pcpu_histogram_zero(s) == 0);
	read_both(d, s, what);
	CHECK(pcpu_histogram_read(s, counts, n, &rng, &sum) == 0 && rng == 0 && sum == 0);
	pcpu_histogram_record(d, 42);
	pcpu_histogram_record(s, 42);
	read_both(d, s, what);
	CHECK(pcpu_histogram_lost(s) == 0 && pcpu_histogram_lost(d) == 0);
	free(counts);
	pcpu_histogram_destroy(d);
	pcpu_histogram_destroy(s);
	pcpu_histogram_destroy(m);
}

/* A family's series, sparse in a private registry and when published
 * (format 2.10: tests/segment/test_segment_sparse_histogram.c reads it
 * from outside); with fractions, observe() reads as the dense one's. */
static void families(void)
{
	static const char *lv[] = { "a" };
	struct pcpu_histogram_layout ex = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3, .scale_exp10 = -9 };
	struct pcpu_family_desc hd = { .name = "sp_seconds", .help = "h", .type = PCPU_METRIC_HISTOGRAM,
				       .scale_exp10 = -9, .nlabels = 1, .label_names = (const char *[]){ "k" },
				       .histogram = &ex };
	struct pcpu_family_desc dd = hd, cd = { .name = "sp_total", .type = PCPU_METRIC_COUNTER };
	pcpu_registry_t *reg = pcpu_registry_create(), *pub = pcpu_registry_create();
	pcpu_family_t *fs, *fd, *fp;
	pcpu_histogram_t *s, *d, *p;
	static const double obs[] = { 0.5, 1e-3, 2.5e-7, 7e10, -1, 1e300, 0.125 };
	char path[] = "/tmp/pcpu-sparse-XXXXXX";
	struct pcpu_segment_options o = { 0 };
	size_t i;

	CHECK(reg && pub);
	dd.name = "dn_seconds";
	errno = 0;
	CHECK(pcpu_registry_family_ex(reg, &cd, PCPU_FAMILY_SPARSE, 0, NULL, NULL) == NULL && errno == EINVAL);
	CHECK(strstr(pcpu_stats_error(), "PCPU_FAMILY_SPARSE") != NULL);
	fs = pcpu_registry_family_ex(reg, &hd, PCPU_FAMILY_SPARSE | PCPU_FAMILY_FRACTIONS, 0, NULL, NULL);
	fd = pcpu_registry_family_ex(reg, &dd, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL);
	CHECK(fs && fd);
	s = pcpu_family_histogram(fs, lv);
	d = pcpu_family_histogram(fd, lv);
	CHECK(s && d && s->pcpu__c == NULL && d->pcpu__c != NULL);
	for (i = 0; i < sizeof obs / sizeof obs[0]; i++) {
		pcpu_histogram_observe(s, obs[i]);
		pcpu_histogram_observe(d, obs[i]);
	}
	read_both(d, s, "family with fractions");
	CHECK(groups_made(s) <= 6);
	/* The same registration again: the family as it is. */
	CHECK(pcpu_registry_family_ex(reg, &hd, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL) == fs);

	/* Published: sparse too (its readers find the groups by its table). */
	CHECK(mkdtemp(path) != NULL);
	o.dir = path;
	CHECK(pcpu_registry_family_ex(pub, &hd, PCPU_FAMILY_SPARSE, 0, NULL, NULL) != NULL);
	CHECK(pcpu_segment_publish(pub, "sparse", &o) != NULL);
	fp = pcpu_registry_find(pub, "sp_seconds");
	CHECK(fp != NULL);
	p = pcpu_family_histogram(fp, lv);
	CHECK(p && p->pcpu__c == NULL);
	pcpu_histogram_record(p, 1000);
	CHECK(groups_made(p) == 1);
	pcpu_registry_destroy(pub);
	CHECK(rmdir(path) == 0);
	pcpu_registry_destroy(reg);
}

/* A group the zone cannot give (the address space limited below what a
 * new chunk maps): the record is counted in lost and in no bucket, and
 * once memory is back records count again. In a child: the limit is the
 * process's. Sanitizers map shadow memory as they go, so this part runs
 * in the plain build only. */
static void lost_when_no_memory(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	printf("lost: left out under a sanitizer (its shadow mappings need the address space)\n");
#else
	struct pcpu_histogram_layout ex = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3 };
	pid_t pid;

	fflush(stdout);
	pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0) {
		/* A zone whose first chunk one object fills but for 4 KiB:
		 * 32 groups fit there, the next one needs a new chunk. */
		pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
		void *big = z ? pcpu_zone_alloc(z, PCPU_ZONE_MAX_OBJECT, 16) : NULL;
		pcpu_histogram_t *h[2];
		struct rlimit old, lim;
		uint64_t c[600], n, got = 0, lost = 0, tried = 0;
		size_t k, b, nb = 0, again = SIZE_MAX;
		int64_t lo_again;
		int e;

		h[0] = big ? pcpu_histogram_create_ex(z, &ex, PCPU_HISTOGRAM_SPARSE) : NULL;
		h[1] = h[0] ? pcpu_histogram_create_ex(z, &ex, PCPU_HISTOGRAM_SPARSE) : NULL;
		if (!h[1] || (nb = pcpu_histogram_nbuckets(h[0])) > 600 || getrlimit(RLIMIT_AS, &old) != 0)
			_exit(10);
		pcpu_histogram_record(h[0], 1); /* thread set-up, before the limit */
		lim = old;
		lim.rlim_cur = 1; /* every new mapping fails */
		if (setrlimit(RLIMIT_AS, &lim) != 0)
			_exit(11);
		errno = 1234;
		for (k = 0; k < 2; k++)
			for (b = 0; b < nb; b += PCPU_HISTOGRAM_GROUP_BUCKETS) {
				int64_t lo;

				(void)pcpu_histogram_bucket_range(h[k], b, &lo, NULL);
				pcpu_histogram_record(h[k], lo < 0 ? 0 : lo);
				tried++;
			}
		e = errno;
		if (setrlimit(RLIMIT_AS, &old) != 0)
			_exit(12);
		/* Every record in a bucket or in lost; some in lost. */
		for (k = 0; k < 2; k++) {
			if (pcpu_histogram_read(h[k], c, nb, &n, NULL) != 0)
				_exit(13);
			got += n;
			lost += pcpu_histogram_lost(h[k]);
		}
		if (e != 1234 || lost == 0 || got + lost != tried + 1)
			_exit(14);
		/* Memory back: a lost group's bucket counts again. */
		for (b = 0; b < nb && again == SIZE_MAX; b += PCPU_HISTOGRAM_GROUP_BUCKETS)
			if (!h[1]->pcpu__groups[b / PCPU_HISTOGRAM_GROUP_BUCKETS])
				again = b;
		if (again == SIZE_MAX)
			_exit(15);
		(void)pcpu_histogram_bucket_range(h[1], again, &lo_again, NULL);
		pcpu_histogram_record(h[1], lo_again);
		if (pcpu_histogram_read(h[1], c, nb, &n, NULL) != 0 || c[again] != 1)
			_exit(16);
		printf("lost: %llu of %llu records while no chunk could be mapped\n", (unsigned long long)lost,
		       (unsigned long long)tried);
		fflush(stdout);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "lost: child status %d (exit %d)\n", st, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		exit(1);
	}
#endif
}

static int unit(void)
{
	static int64_t b11[] = { 1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000, 10000000, 50000000, 100000000 };
	static int64_t b247[247];
	struct pcpu_histogram_layout el = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = b11, .nbounds = 11 };
	struct pcpu_histogram_layout wide = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = b247, .nbounds = 247 };
	struct pcpu_histogram_layout ll = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 3,
					    .max_value = 10000000000 };
	struct pcpu_histogram_layout ex = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3, .scale_exp10 = -9 };
	size_t i;

	for (i = 0; i < 247; i++)
		b247[i] = (int64_t)(1000 * pow(1.08, (double)i)); /* nginx-like: 1 us to 10^8 us */
	errno = 0;
	CHECK(pcpu_histogram_create_ex(NULL, &el, 2) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_histogram_create_ex(NULL, NULL, PCPU_HISTOGRAM_SPARSE) == NULL && errno == EINVAL);
	CHECK(pcpu_histogram_lost(NULL) == 0);
	same_as_dense(&el, "explicit 11");
	same_as_dense(&wide, "explicit 247");
	same_as_dense(&ll, "log-linear p3");
	same_as_dense(&ex, "exponential schema 3");
	families();
	lost_when_no_memory();
	printf("ok: unit\n");
	return 0;
}

/* ---- stress ---- */

#define MAX_THREADS 16
#define NHIST 32

static struct pcpu_histogram_layout stress_layout = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3 };
static pcpu_histogram_t *hs[NHIST];
static uint64_t *expect_counts; /* [NHIST][nbuckets], atomic */
static int64_t expect_sums[NHIST]; /* atomic, modulo 2^64 */
static size_t nb;
static long per_round = 20000;
static int stop, reading, mode_mismatch;
static pthread_rwlock_t hs_lock = PTHREAD_RWLOCK_INITIALIZER; /* the reader's, against replacing hs */
static unsigned hs_gen;
static const char *expect_mode;
static pthread_barrier_t start_round, end_round;
/* --published: the histograms are series of a sparse family of a
 * published registry (segment format 2.10), removed and made again every
 * round (their tables' blobs are reused), and read from outside too. */
static int published;
static pcpu_registry_t *pub_reg;
static pcpu_family_t *pub_fam;
static pcpu_reader_t *pub_rd;
static char pub_dir[] = "/tmp/pcpu-sparse-stress-XXXXXX";

static pcpu_histogram_t *stress_hist(unsigned k)
{
	char key[16];
	const char *v[1] = { key };
	pcpu_histogram_t *h;

	if (!published)
		return pcpu_histogram_create_ex(NULL, &stress_layout, PCPU_HISTOGRAM_SPARSE);
	snprintf(key, sizeof key, "h%u", k);
	h = pcpu_family_histogram(pub_fam, v);
	if (!h)
		fprintf(stderr, "series: %s\n", pcpu_stats_error());
	return h;
}

static void stress_hist_done(unsigned k)
{
	char key[16];
	const char *v[1] = { key };

	if (!published) {
		pcpu_histogram_destroy(hs[k]);
		return;
	}
	snprintf(key, sizeof key, "h%u", k);
	CHECK(pcpu_family_remove(pub_fam, v) == 0);
}

static void publish_stress(void)
{
	static const char *const ln[] = { "k" };
	struct pcpu_family_desc d = { .name = "stress_seconds", .type = PCPU_METRIC_HISTOGRAM,
				      .nlabels = 1, .label_names = ln, .histogram = &stress_layout };
	struct pcpu_segment_options o = { 0 };
	struct pcpu_reader_options ro = { 0 };

	CHECK(mkdtemp(pub_dir) != NULL);
	CHECK((pub_reg = pcpu_registry_create()) != NULL);
	CHECK((pub_fam = pcpu_registry_family_ex(pub_reg, &d, PCPU_FAMILY_SPARSE, 0, NULL, NULL)) != NULL);
	o.dir = pub_dir;
	CHECK(pcpu_segment_publish(pub_reg, "stress", &o) != NULL);
	ro.dir = pub_dir;
	CHECK((pub_rd = pcpu_reader_open("stress", &ro)) != NULL);
}

/* The outside reader's exposition is the writer's, byte for byte. */
static int outside_same(void)
{
	struct pcpu_reader_snapshot *rs = NULL;
	char *a, *b;
	size_t al, bl;
	int same;

	if (pcpu_reader_snapshot(pub_rd, 0, &rs) != 0) {
		fprintf(stderr, "outside snapshot: %s\n", pcpu_segment_error());
		return 0;
	}
	CHECK(pcpu_registry_write(pub_reg, PCPU_FORMAT_PROMETHEUS, &a, &al) == 0);
	CHECK(pcpu_snapshot_write(&rs->snapshot, PCPU_FORMAT_PROMETHEUS, &b, &bl) == 0);
	same = al == bl && memcmp(a, b, al) == 0;
	if (!same)
		fprintf(stderr, "the outside reader differs from the writer\n");
	free(a);
	free(b);
	pcpu_reader_snapshot_free(rs);
	return same;
}

static void on_signal(int sig)
{
	(void)sig; /* interrupts sections; records nothing (a first record allocates) */
}

struct worker {
	struct stress_harness *h;
	unsigned slot, rounds;
};

static void *recorder(void *p)
{
	struct worker *w = p;
	unsigned r;

	stress_rng = 0x1234567ull + w->slot * 0x9e3779b97f4a7c15ull;
	stress_enter(w->h, w->slot);
	for (r = 0; r < w->rounds; r++) {
		long i;

		pthread_barrier_wait(&start_round);
		for (i = 0; i < per_round; i++) {
			uint64_t x = stress_rand();
			unsigned k = (unsigned)(x % NHIST);
			int64_t v = some_value(&stress_rng);
			int64_t vv = v;
			size_t b = pcpu_histogram_bucket_of(hs[k], v);

			if (vv < 0)
				vv = 0; /* recorded as 0 */
			pcpu_histogram_record(hs[k], v);
			__atomic_add_fetch(&expect_counts[k * nb + b], 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&expect_sums[k], vv, __ATOMIC_RELAXED);
		}
		if (r == 0)
			stress_check_mode(expect_mode, &mode_mismatch);
		pthread_barrier_wait(&end_round);
		pthread_barrier_wait(&end_round); /* the main thread checked and made new ones */
	}
	stress_leave(w->h, w->slot);
	return NULL;
}

/* Reads while groups are being made: a histogram's total count never goes
 * down between two reads of the same histograms. */
static void *reader(void *p)
{
	uint64_t *c = malloc(nb * sizeof *c), last[NHIST] = { 0 };
	unsigned gen = 0;
	long bad = 0;

	(void)p;
	CHECK(c != NULL);
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		unsigned k;

		if (!__atomic_load_n(&reading, __ATOMIC_ACQUIRE)) {
			sched_yield();
			continue;
		}
		CHECK(pthread_rwlock_rdlock(&hs_lock) == 0);
		if (gen != hs_gen) {
			gen = hs_gen;
			memset(last, 0, sizeof last);
		}
		for (k = 0; k < NHIST; k++) {
			uint64_t n;

			if (pcpu_histogram_read(hs[k], c, nb, &n, NULL) != 0 || n < last[k])
				bad++;
			else
				last[k] = n;
		}
		CHECK(pthread_rwlock_unlock(&hs_lock) == 0);
		if (published) { /* from outside, while groups are made: never refused */
			struct pcpu_reader_snapshot *rs = NULL;

			if (pcpu_reader_snapshot(pub_rd, 0, &rs) != 0 && errno == EBADMSG) {
				fprintf(stderr, "outside snapshot: %s\n", pcpu_segment_error());
				bad++;
			}
			pcpu_reader_snapshot_free(rs);
		}
	}
	free(c);
	return (void *)bad;
}

static int stress(unsigned rounds)
{
	int tids[MAX_THREADS + 2] = { 0 };
	struct stress_harness h;
	struct worker ws[MAX_THREADS];
	pthread_t th[MAX_THREADS], rd;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = (unsigned)(ncpu * 2 > MAX_THREADS ? MAX_THREADS : ncpu * 2 < 4 ? 4 : ncpu * 2), i, r;
	uint64_t *c;
	void *bad;
	size_t made = 0;

	if (expect_mode && strcmp(pcpu_rseq_mode_name(pcpu_rseq_mode()), expect_mode) != 0) {
		fprintf(stderr, "mode is %s, expected %s\n", pcpu_rseq_mode_name(pcpu_rseq_mode()), expect_mode);
		return 1;
	}
	if (published)
		publish_stress();
	for (i = 0; i < NHIST; i++)
		CHECK((hs[i] = stress_hist(i)) != NULL);
	nb = pcpu_histogram_nbuckets(hs[0]);
	expect_counts = calloc(NHIST * nb, sizeof *expect_counts);
	c = calloc(nb, sizeof *c);
	CHECK(expect_counts && c);
	CHECK(pthread_barrier_init(&start_round, NULL, n + 1) == 0);
	CHECK(pthread_barrier_init(&end_round, NULL, n + 1) == 0);
	memset(&h, 0, sizeof h);
	h.tids = tids;
	h.ntids = n;
	h.stop = &stop;
	h.signal_us = 50;
	CHECK(signal(SIGUSR1, on_signal) != SIG_ERR);
	stress_start(&h);
	CHECK(pthread_create(&rd, NULL, reader, NULL) == 0);
	for (i = 0; i < n; i++) {
		ws[i].h = &h;
		ws[i].slot = i;
		ws[i].rounds = rounds;
		CHECK(pthread_create(&th[i], NULL, recorder, &ws[i]) == 0);
	}
	for (r = 0; r < rounds; r++) {
		unsigned k;

		__atomic_store_n(&reading, 1, __ATOMIC_RELEASE);
		pthread_barrier_wait(&start_round);
		pthread_barrier_wait(&end_round);
		__atomic_store_n(&reading, 0, __ATOMIC_RELEASE);
		for (k = 0; k < NHIST; k++) {
			uint64_t total;
			int64_t sum;
			size_t b;

			CHECK(pcpu_histogram_read(hs[k], c, nb, &total, &sum) == 0);
			for (b = 0; b < nb; b++)
				if (c[b] != expect_counts[k * nb + b]) {
					fprintf(stderr, "round %u histogram %u bucket %zu: %llu, expected %llu\n", r, k,
						b, (unsigned long long)c[b],
						(unsigned long long)expect_counts[k * nb + b]);
					return 1;
				}
			if (sum != expect_sums[k]) {
				fprintf(stderr, "round %u histogram %u: sum %lld, expected %lld\n", r, k,
					(long long)sum, (long long)expect_sums[k]);
				return 1;
			}
			CHECK(pcpu_histogram_lost(hs[k]) == 0);
			made += groups_made(hs[k]);
		}
		if (published && !outside_same())
			return 1;
		/* New histograms: the next round's first records race again. */
		CHECK(pthread_rwlock_wrlock(&hs_lock) == 0);
		hs_gen++;
		for (k = 0; k < NHIST; k++) {
			stress_hist_done(k);
			CHECK((hs[k] = stress_hist(k)) != NULL);
			expect_sums[k] = 0;
		}
		memset(expect_counts, 0, NHIST * nb * sizeof *expect_counts);
		CHECK(pthread_rwlock_unlock(&hs_lock) == 0);
		pthread_barrier_wait(&end_round);
	}
	for (i = 0; i < n; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	CHECK(pthread_join(rd, &bad) == 0);
	stress_join(&h);
	if (bad) {
		fprintf(stderr, "the reader saw %ld failed or decreasing reads\n", (long)bad);
		return 1;
	}
	if (mode_mismatch)
		return 1;
	printf("ok: stress%s, mode %s, %u threads x %u rounds x %ld records, %zu groups made\n",
	       published ? " (published)" : "", pcpu_rseq_mode_name(pcpu_rseq_mode()), n, rounds,
	       per_round, made);
	for (i = 0; i < NHIST; i++)
		stress_hist_done(i);
	if (published) {
		pcpu_reader_close(pub_rd);
		pcpu_registry_destroy(pub_reg);
		CHECK(rmdir(pub_dir) == 0);
	}
	free(c);
	free(expect_counts);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned rounds = 40;
	int k, want_unit = 0, want_stress = 0;

	for (k = 1; k < argc; k++) {
		if (!strcmp(argv[k], "--unit"))
			want_unit = 1;
		else if (!strcmp(argv[k], "--stress"))
			want_stress = 1;
		else if (!strcmp(argv[k], "--expect-mode") && k + 1 < argc)
			expect_mode = argv[++k];
		else if (!strcmp(argv[k], "--published"))
			published = 1;
		else if (!strcmp(argv[k], "--rounds") && k + 1 < argc)
			rounds = (unsigned)atoi(argv[++k]);
		else {
			fprintf(stderr, "usage: %s --unit | --stress [--published] [--expect-mode M] [--rounds N]\n", argv[0]);
			return 2;
		}
	}
	if (want_unit == want_stress) {
		fprintf(stderr, "usage: %s --unit | --stress [--published] [--expect-mode M] [--rounds N]\n", argv[0]);
		return 2;
	}
	return want_unit ? unit() : stress(rounds);
}
