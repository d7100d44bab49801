/*
 * Values beyond the integer words under stress (issue 50): threads that
 * migrate between CPUs and take signals (tests/stress_harness.h), whose
 * handlers update the same series, add to gauges of a family with
 * fractions through the words (0.25), through the residue (2^70 and
 * 2^-40: its compare-and-swap) and observe into a histogram with fractions
 * in range (0.5 s: the integer pair), beyond it (5e9: the per-slot double
 * sums' rseq compare-and-store) and until the integer sums' guard sends
 * values to the doubles; two setters meanwhile set one gauge to values
 * that need the residue. Every total is exact once the threads stop (each
 * is a sum of doubles that adds exactly), in every rseq mode (run under
 * glibc's, pcpu's own and none: --expect-mode), and the set gauge reads
 * exactly one of its values (two sets never mix).
 *
 * Usage: test_fraction_stress [--expect-mode glibc|own|fallback] [--adds N]
 */
#include "../check.h"
#include "../stress_harness.h"
#include <pcpu/pcpu.h>
#include <pcpu/fraction.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 16

static pcpu_gauge_t words_g, big_g, tiny_g, set_g;
static pcpu_histogram_t *lat_h, *guard_h;
static double guard_v;
static long adds = 200000;
static int stop;
static uint64_t handled; /* signals handled (atomic) */

static const double set_values[] = { 1e300, 0.1, -3.5, 1.0 / 3, 16e9, 1e-12, -0.0, 7 };
#define NSET (sizeof set_values / sizeof *set_values)

/* What a handler adds, alongside the code it interrupted (which may be in
 * the middle of an update of the same series). */
static void on_signal(int sig)
{
	(void)sig;
	pcpu_gauge_add_double(words_g, 0.25);
	pcpu_gauge_add_double(big_g, 0x1p70);
	pcpu_histogram_observe(lat_h, 5e9);
	__atomic_add_fetch(&handled, 1, __ATOMIC_RELAXED);
}

struct arg {
	struct stress_harness *h;
	unsigned slot;
};

static void *adder(void *p)
{
	struct arg *a = p;
	long i;

	stress_enter(a->h, a->slot);
	for (i = 0; i < adds; i++) {
		pcpu_gauge_add_double(words_g, 0.25);
		pcpu_gauge_add_double(big_g, 0x1p70);
		pcpu_gauge_add_double(tiny_g, 0x1p-40);
		pcpu_histogram_observe(lat_h, 0.5);
		pcpu_histogram_observe(lat_h, 5e9);
		pcpu_histogram_observe(guard_h, guard_v);
	}
	stress_leave(a->h, a->slot);
	return NULL;
}

/* Two setters set the gauge at the same moment, round after round: after
 * each round it reads one of the two values, never a mix of their words. */
static pthread_barrier_t round_barrier;
static long mixed;
static int go;

static void *setter(void *p)
{
	unsigned me = (unsigned)(uintptr_t)p, r;

	for (r = 0;; r++) {
		double a = set_values[r % NSET], b = set_values[(r + 3) % NSET], v;

		if (me == 0) /* one decision for both, read after the barrier */
			go = !__atomic_load_n(&stop, __ATOMIC_RELAXED);
		pthread_barrier_wait(&round_barrier);
		if (!go)
			break;
		CHECK(pcpu_gauge_set_double(set_g, me ? b : a) == 0);
		pthread_barrier_wait(&round_barrier);
		if (me == 0) {
			v = pcpu_gauge_read_double(set_g);
			if (memcmp(&v, &a, sizeof v) != 0 && memcmp(&v, &b, sizeof v) != 0) {
				fprintf(stderr, "round %u: %.17g after sets of %.17g and %.17g\n", r, v, a, b);
				__atomic_add_fetch(&mixed, 1, __ATOMIC_RELAXED);
			}
		}
		pthread_barrier_wait(&round_barrier);
	}
	return NULL;
}

static pcpu_family_t *family(pcpu_registry_t *reg, const char *name, enum pcpu_metric_type t, int scale,
			     const struct pcpu_histogram_layout *l)
{
	struct pcpu_family_desc d;
	pcpu_family_t *f;

	memset(&d, 0, sizeof d);
	d.name = name;
	d.type = t;
	d.scale_exp10 = scale;
	d.histogram = l;
	f = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL);
	CHECK(f != NULL);
	return f;
}

static double hist_sum(pcpu_registry_t *reg, const char *name, uint64_t *count)
{
	struct pcpu_snapshot *s = pcpu_registry_snapshot(reg);
	double sum = NAN;
	size_t k, b;

	CHECK(s != NULL);
	for (k = 0; k < s->nfamilies; k++)
		if (strcmp(s->families[k].name, name) == 0) {
			const struct pcpu_snapshot_family *f = &s->families[k];

			sum = pcpu_snapshot_sum(f, &f->series[0]);
			*count = 0;
			for (b = 0; b < f->nbuckets; b++)
				*count += f->series[0].value.histogram.counts[b];
		}
	pcpu_snapshot_free(s);
	return sum;
}

int main(int argc, char **argv)
{
	static const int64_t lat_bounds[] = { 1000000000, 10000000000 };
	static const int64_t one[] = { (int64_t)1 << 62 };
	struct pcpu_histogram_layout ll = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = lat_bounds, .nbounds = 2 };
	struct pcpu_histogram_layout gl = { .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = one, .nbounds = 1 };
	const char *expect_mode = NULL;
	int tids[MAX_THREADS + 2] = { 0 };
	struct stress_harness h;
	struct arg args[MAX_THREADS];
	pthread_t th[MAX_THREADS], st[2];
	pcpu_registry_t *reg;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = (unsigned)(ncpu * 2 > MAX_THREADS ? MAX_THREADS : ncpu * 2 < 4 ? 4 : ncpu * 2), i;
	double total, v;
	uint64_t count, sig;
	int k;

	for (k = 1; k < argc; k++) {
		if (!strcmp(argv[k], "--expect-mode") && k + 1 < argc)
			expect_mode = argv[++k];
		else if (!strcmp(argv[k], "--adds") && k + 1 < argc)
			adds = atol(argv[++k]);
		else {
			fprintf(stderr, "usage: %s [--expect-mode glibc|own|fallback] [--adds N]\n", argv[0]);
			return 2;
		}
	}
	reg = pcpu_registry_create();
	CHECK(reg != NULL);
	if (expect_mode && strcmp(pcpu_rseq_mode_name(pcpu_rseq_mode()), expect_mode) != 0) {
		fprintf(stderr, "mode is %s, expected %s\n", pcpu_rseq_mode_name(pcpu_rseq_mode()), expect_mode);
		return 1;
	}
	words_g = pcpu_family_gauge(family(reg, "st_words", PCPU_METRIC_GAUGE, 0, NULL), NULL);
	big_g = pcpu_family_gauge(family(reg, "st_big", PCPU_METRIC_GAUGE, 0, NULL), NULL);
	tiny_g = pcpu_family_gauge(family(reg, "st_tiny", PCPU_METRIC_GAUGE, 0, NULL), NULL);
	set_g = pcpu_family_gauge(family(reg, "st_set", PCPU_METRIC_GAUGE, 0, NULL), NULL);
	lat_h = pcpu_family_histogram(family(reg, "st_seconds", PCPU_METRIC_HISTOGRAM, -9, &ll), NULL);
	guard_h = pcpu_family_histogram(family(reg, "st_guard", PCPU_METRIC_HISTOGRAM, 0, &gl), NULL);
	CHECK(words_g && big_g && tiny_g && set_g && lat_h && guard_h);
	/* A power of two in range: its sums are exact as doubles, and the
	 * integer pair's guard fills within the run (2^63 units in all). */
	guard_v = exp2(floor(log2(guard_h->pcpu__cap / 2)));
	if (guard_v * (double)adds * n < 0x1p63)
		guard_v = exp2(ceil(log2(0x1p63 / ((double)adds * n)) + 1));
	CHECK(guard_v < guard_h->pcpu__cap);

	memset(&h, 0, sizeof h);
	h.tids = tids;
	h.ntids = n;
	h.stop = &stop;
	h.signal_us = 50;
	CHECK(signal(SIGUSR1, on_signal) != SIG_ERR);
	stress_start(&h);
	CHECK(pthread_barrier_init(&round_barrier, NULL, 2) == 0);
	for (i = 0; i < 2; i++)
		CHECK(pthread_create(&st[i], NULL, setter, (void *)(uintptr_t)i) == 0);
	for (i = 0; i < n; i++) {
		args[i].h = &h;
		args[i].slot = i;
		CHECK(pthread_create(&th[i], NULL, adder, &args[i]) == 0);
	}
	for (i = 0; i < n; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++)
		CHECK(pthread_join(st[i], NULL) == 0);
	CHECK(mixed == 0);
	stress_join(&h);
	sig = __atomic_load_n(&handled, __ATOMIC_RELAXED);
	total = (double)adds * n;

	CHECK(pcpu_gauge_read_double(words_g) == 0.25 * (total + (double)sig));
	CHECK(pcpu_gauge_read_double(big_g) == 0x1p70 * (total + (double)sig));
	CHECK(pcpu_gauge_read_double(tiny_g) == 0x1p-40 * total);
	v = pcpu_gauge_read_double(set_g);
	for (i = 0; i < NSET; i++)
		if (memcmp(&v, &set_values[i], sizeof v) == 0)
			break;
	if (i == NSET) {
		fprintf(stderr, "the set gauge reads %.17g: not one of its values (two sets mixed)\n", v);
		return 1;
	}
	CHECK(hist_sum(reg, "st_seconds", &count) == 0.5 * total + 5e9 * (total + (double)sig));
	CHECK(count == (uint64_t)(2 * total) + sig);
	CHECK(hist_sum(reg, "st_guard", &count) == guard_v * total && count == (uint64_t)total);
	printf("ok: mode %s, %u threads x %ld, %llu signals handled\n", pcpu_rseq_mode_name(pcpu_rseq_mode()), n,
	       adds, (unsigned long long)sig);
	pcpu_registry_destroy(reg);
	return 0;
}
