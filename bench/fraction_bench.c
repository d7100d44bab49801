/* SPDX-License-Identifier: MIT */
/*
 * Values beyond the integer words (issue 50): what the paths cost, and
 * that the integer paths cost what they cost before.
 *
 *   pcpu_bench_fraction [--rounds R] [--ops N]
 *
 * Rows, each one thread's CPU time per operation, median of R rounds, the
 * rows of a round interleaved (so load on the machine hits them alike):
 *
 *   gauge_add              pcpu_gauge_add(g, 1): the integer add, unchanged
 *   add_double_whole       pcpu_gauge_add_double(g, 1.0): one counter add
 *   add_double_frac        pcpu_gauge_add_double(g, 0.25): one add (billionths)
 *   add_double_both        pcpu_gauge_add_double(g, 1.25): two adds
 *   add_double_residue     pcpu_gauge_add_double(g, 1e-12): the residue's CAS
 *   record                 pcpu_histogram_record(h, ns): unchanged
 *   record_converted       the same values as seconds (doubles), converted to
 *                          billionths and recorded: a double API before
 *   observe_in_range       pcpu_histogram_observe(h, s) of the same values
 *   observe_beyond         pcpu_histogram_observe(h, 5e9) in billionths:
 *                          a pair add and the per-slot double sum
 *
 * The integer rows are the same inline code as before the change (the
 * headers' pcpu_gauge_add() and pcpu_histogram_record() did not change);
 * built with -DPCPU_BENCH_BEFORE against the headers and libraries of
 * the commit before it (bench/fractions.md), this
 * program prints those two rows only, for a before/after comparison.
 */
#define _GNU_SOURCE
#include <pcpu/pcpu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define NRAND 4096

static pcpu_gauge_t g_int;
static pcpu_histogram_t *h_int;
static int64_t rand_ns[NRAND];
#ifndef PCPU_BENCH_BEFORE
static pcpu_gauge_t g_dbl;
static pcpu_histogram_t *h_dbl;
static double rand_s[NRAND];
#endif

static uint64_t thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static NOINLINE void b_gauge_add(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		pcpu_gauge_add(g_int, 1);
}

static NOINLINE void b_record(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		pcpu_histogram_record(h_int, rand_ns[i & (NRAND - 1)]);
}

#ifndef PCPU_BENCH_BEFORE
static NOINLINE void b_add_whole(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		pcpu_gauge_add_double(g_dbl, 1.0);
}

static NOINLINE void b_add_frac(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		pcpu_gauge_add_double(g_dbl, 0.25);
}

static NOINLINE void b_add_both(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		pcpu_gauge_add_double(g_dbl, 1.25);
}

static NOINLINE void b_add_residue(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		pcpu_gauge_add_double(g_dbl, 1e-12);
}

/* What a double-valued API did before: the value in billionths, rounded,
 * then the integer record (the Rust recorder's histogram). */
static NOINLINE void b_record_converted(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		double u = rand_s[i & (NRAND - 1)] * 1e9;

		pcpu_histogram_record(h_int, (int64_t)(u + (u < 0 ? -0.5 : 0.5)));
	}
}

static NOINLINE void b_observe(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		pcpu_histogram_observe(h_dbl, rand_s[i & (NRAND - 1)]);
}

static NOINLINE void b_observe_beyond(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		pcpu_histogram_observe(h_dbl, 5e9);
}
#endif

static const struct {
	const char *name;
	void (*fn)(uint64_t);
} rows[] = {
	{ "gauge_add", b_gauge_add },
#ifndef PCPU_BENCH_BEFORE
	{ "add_double_whole", b_add_whole },
	{ "add_double_frac", b_add_frac },
	{ "add_double_both", b_add_both },
	{ "add_double_residue", b_add_residue },
#endif
	{ "record", b_record },
#ifndef PCPU_BENCH_BEFORE
	{ "record_converted", b_record_converted },
	{ "observe_in_range", b_observe },
	{ "observe_beyond", b_observe_beyond },
#endif
};
#define NROWS (sizeof rows / sizeof *rows)

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	struct pcpu_histogram_layout ll = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 3,
					    .max_value = (int64_t)1 << 62 };
	struct pcpu_family_desc d;
	pcpu_registry_t *reg = pcpu_registry_create();
	unsigned rounds = 21, r, k;
	uint64_t ops = 2000000, x = 88172645463325252ull;
	double *t;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			ops = strtoull(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: %s [--rounds R] [--ops N]\n", argv[0]);
			return 2;
		}
	}
	if (!reg || !rounds)
		return 1;
	/* Latencies of 1 us to 16 ms, in nanoseconds and in seconds. */
	for (k = 0; k < NRAND; k++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		rand_ns[k] = 1000 + (int64_t)(x % 16000000);
#ifndef PCPU_BENCH_BEFORE
		rand_s[k] = (double)rand_ns[k] / 1e9;
#endif
	}
	memset(&d, 0, sizeof d);
	d.name = "b_int";
	d.type = PCPU_METRIC_GAUGE;
	g_int = pcpu_family_gauge(pcpu_registry_family(reg, &d), NULL);
	d.name = "b_ns";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -9;
	d.histogram = &ll;
	h_int = pcpu_family_histogram(pcpu_registry_family(reg, &d), NULL);
#ifndef PCPU_BENCH_BEFORE
	d.name = "b_seconds";
	h_dbl = pcpu_family_histogram(pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL), NULL);
	memset(&d, 0, sizeof d);
	d.name = "b_dbl";
	d.type = PCPU_METRIC_GAUGE;
	g_dbl = pcpu_family_gauge(pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_FRACTIONS, 0, NULL, NULL), NULL);
	if (!g_dbl || !h_dbl)
		return 1;
#endif
	if (!g_int || !h_int)
		return 1;
	t = calloc(NROWS * rounds, sizeof *t);
	if (!t)
		return 1;
	for (k = 0; k < NROWS; k++)
		rows[k].fn(ops / 10); /* warm: pages, branch predictors */
	for (r = 0; r < rounds; r++)
		for (k = 0; k < NROWS; k++) {
			uint64_t t0 = thread_ns();

			rows[k].fn(ops);
			t[k * rounds + r] = (double)(thread_ns() - t0) / (double)ops;
		}
	printf("%-20s %10s %10s %10s  (ns/op, thread CPU time; %u rounds of %llu ops; mode %s)\n", "row",
	       "median", "min", "vs row 1", rounds, (unsigned long long)ops,
	       pcpu_rseq_mode_name(pcpu_rseq_mode()));
	for (k = 0; k < NROWS; k++)
		qsort(t + k * rounds, rounds, sizeof *t, cmp_double);
	for (k = 0; k < NROWS; k++) {
		double med = t[k * rounds + rounds / 2], base = t[rounds / 2];

		printf("%-20s %10.2f %10.2f %9.2fx\n", rows[k].name, med, t[k * rounds], med / base);
	}
	free(t);
	return 0;
}
