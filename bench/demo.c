/* SPDX-License-Identifier: MIT */
/*
 * The demonstration (`pcpu_bench --demo`, what scripts/demo.sh shows): one
 * counter that every thread increments, kept the ways a program would keep
 * it -- pcpu_counter_add, a shared atomic, a mutex, a plain shared `+=`,
 * per-thread counters -- then a short verdict in words.
 *
 * Only what a busy machine cannot fake: each figure is the threads' own CPU
 * time per increment (CLOCK_THREAD_CPUTIME_ID: time another program holds
 * the CPU is charged to nobody), the median of interleaved rounds (every
 * variant once per round, a different one first), and whether the final
 * count holds every increment, which no load changes. Wall-clock rates,
 * the data-plane simulation and the hand-written floors are the full
 * suite's (bench/run.sh --quick), where their method is explained.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The demonstration's rows, in the order printed. */
static const struct {
	int kind;
	const char *name;
} demo_rows[] = {
	{ K_PCPU, "pcpu_counter_add" },
	{ K_ATOMIC, "shared atomic add" },
	{ K_MUTEX, "shared counter under a mutex" },
	{ K_RACY, "shared plain `+=` (no lock)" },
	{ K_TLS, "per-thread counters, summed at the end" },
};
#define DEMO_NROWS (sizeof(demo_rows) / sizeof(demo_rows[0]))
enum { R_PCPU, R_ATOMIC, R_MUTEX, R_RACY, R_TLS };

struct demo_cell {
	double ns;      /* median CPU ns per increment over the rounds */
	double lost;    /* the largest share of increments lost in a round, % */
	unsigned inexact; /* rounds whose final count missed increments */
};

/* "2.61" or "2.61-2.70": a figure over the thread counts. */
static const char *demo_range(char *buf, size_t len, double lo, double hi, const char *unit)
{
	if (fabs(hi - lo) < 0.005 * (hi > 0 ? hi : 1))
		snprintf(buf, len, "%.2f%s", lo, unit);
	else
		snprintf(buf, len, "%.2f-%.2f%s", lo, hi, unit);
	return buf;
}

/* The smallest and largest of row's figure / pcpu's over the thread counts. */
static void demo_ratio(const struct demo_cell *c, unsigned nt, unsigned row, double *lo, double *hi)
{
	unsigned ti;

	*lo = INFINITY;
	*hi = -INFINITY;
	for (ti = 0; ti < nt; ti++) {
		double r = c[row * nt + ti].ns / c[R_PCPU * nt + ti].ns;

		*lo = r < *lo ? r : *lo;
		*hi = r > *hi ? r : *hi;
	}
}

static void demo_verdict(const struct demo_cell *c, unsigned nt, unsigned nr)
{
	const unsigned *th = bench_opt.threads;
	double lo, hi, plo = INFINITY, phi = 0, lost = 0;
	unsigned ti, row, exact_rows = 0;
	char a[64], b[64];

	for (ti = 0; ti < nt; ti++) {
		plo = c[R_PCPU * nt + ti].ns < plo ? c[R_PCPU * nt + ti].ns : plo;
		phi = c[R_PCPU * nt + ti].ns > phi ? c[R_PCPU * nt + ti].ns : phi;
		lost = c[R_RACY * nt + ti].lost > lost ? c[R_RACY * nt + ti].lost : lost;
	}
	for (row = 0; row < DEMO_NROWS; row++) {
		unsigned bad = 0;

		for (ti = 0; ti < nt; ti++)
			bad += c[row * nt + ti].inexact;
		exact_rows += row != R_RACY && bad == 0;
	}
	printf("## Verdict\n\n");
	if (c[R_PCPU * nt].inexact || exact_rows < DEMO_NROWS - 1)
		printf("- **An exact variant lost increments** in this run: that is a bug, please "
		       "report it with this output.\n");
	printf("- **Exact.** pcpu_counter_add kept every increment in all %u runs, from %u to %u "
	       "threads on %u CPUs, as did the atomic, the mutex and the per-thread counters. ",
	       nr * nt, th[0], th[nt - 1], bench_ncpu);
	if (lost > 0)
		printf("The plain shared `+=` lost up to %.1f %% of its increments.\n", lost);
	else
		printf("The plain shared `+=` lost none in this run (its threads never collided), "
		       "but nothing stops it from losing them.\n");
	printf("- **Cheap.** pcpu_counter_add cost %s of CPU time per increment, ",
	       demo_range(a, sizeof(a), plo, phi, " ns"));
	printf("with 1 thread as with %u.\n", th[nt - 1]);
	demo_ratio(c, nt, R_ATOMIC, &lo, &hi);
	printf("- A shared atomic add cost %s pcpu's, ", demo_range(a, sizeof(a), lo, hi, "×"));
	demo_ratio(c, nt, R_MUTEX, &lo, &hi);
	printf("a mutex %s. Both get slower with every core that shares the counter "
	       "(bench/16-cores.md: 337 ns for an atomic add at 16 threads on 16 cores); pcpu's add "
	       "touches only the current CPU's copy.\n", demo_range(b, sizeof(b), lo, hi, "×"));
	demo_ratio(c, nt, R_TLS, &lo, &hi);
	printf("- Per-thread counters cost %s pcpu's. They are cheaper to add to, but a "
	       "reader must find and sum every thread's copy, a thread's counts must be kept when it "
	       "exits, and their memory grows with the threads; pcpu does that for you, with one "
	       "copy per CPU.\n", demo_range(a, sizeof(a), lo, hi, "×"));
	printf("- These are CPU times, so other programs on the machine are not charged to any "
	       "row. A busy machine still moves the shared rows most (their cost depends on how "
	       "many threads run at once, hence their wide ranges); it never changes which rows "
	       "are exact. `bash bench/run.sh --quick` runs the whole benchmark (pcpu's add "
	       "against a hand-written rseq add, memory, reads, a data-plane simulation); "
	       "bench/README.md explains each figure.\n");
}

void bench_demo(void)
{
	const unsigned nt = bench_opt.nthreads, nr = bench_opt.rounds;
	double *ns = bench_xmalloc((size_t)DEMO_NROWS * nt * nr * sizeof(double));
	struct demo_cell *cell = bench_xmalloc(DEMO_NROWS * nt * sizeof(*cell));
	FILE *csv = bench_csv_open("demo.csv", "variant,threads,cpu_ns_median,cpu_ns_min,cpu_ns_max,"
				   "rounds,inexact_rounds,max_lost_pct");
	unsigned r, k, ti, row;
	struct tbl tb;
	char buf[96];

	memset(cell, 0, DEMO_NROWS * nt * sizeof(*cell));
	printf("## One counter, incremented by every thread\n\n");
	printf("CPU time per increment, in ns: each thread's own CPU time (time other programs "
	       "hold the CPU is charged to nobody) summed over the threads and divided by the "
	       "increments. Median (min–max) of %u rounds of %u ms runs; a round runs every "
	       "variant once, a different one first. Threads not pinned. \"exact\": the final count "
	       "holds every increment.\n\n", nr, bench_opt.duration_ms);
	for (r = 0; r < nr; r++)
		for (k = 0; k < DEMO_NROWS * nt; k++) {
			unsigned idx = (k + r * nt) % (DEMO_NROWS * nt); /* a different one first */
			struct bench_incr_result res;

			row = idx / nt;
			ti = idx % nt;
			res = bench_incr_run(demo_rows[row].kind, bench_opt.threads[ti]);
			ns[(row * nt + ti) * nr + r] = res.ns_per_op;
			if (!res.exact) {
				cell[row * nt + ti].inexact++;
				if (res.lost_pct > cell[row * nt + ti].lost)
					cell[row * nt + ti].lost = res.lost_pct;
			}
		}
	tbl_init(&tb, 2 + nt);
	tbl_cell(&tb, "counter");
	for (ti = 0; ti < nt; ti++)
		tbl_cell(&tb, "%u thread%s", bench_opt.threads[ti], bench_opt.threads[ti] == 1 ? "" : "s");
	tbl_headers(&tb, "exact", NULL);
	for (row = 0; row < DEMO_NROWS; row++) {
		unsigned bad = 0;
		double lost = 0;

		tbl_cell(&tb, "%s", demo_rows[row].name);
		for (ti = 0; ti < nt; ti++) {
			struct demo_cell *c = &cell[row * nt + ti];
			struct bench_stat st = bench_stat_of(&ns[(row * nt + ti) * nr], nr);

			c->ns = st.med;
			bad += c->inexact;
			lost = c->lost > lost ? c->lost : lost;
			tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), st));
			if (csv)
				fprintf(csv, "\"%s\",%u,%.4f,%.4f,%.4f,%u,%u,%.3f\n", demo_rows[row].name,
					bench_opt.threads[ti], st.med, st.min, st.max, nr, c->inexact,
					c->lost);
		}
		if (!bad)
			tbl_cell(&tb, "yes");
		else
			tbl_cell(&tb, "**no**: lost up to %.1f %% in %u of %u runs", lost, bad, nr * nt);
	}
	tbl_print(&tb);
	demo_verdict(cell, nt, nr);
	if (csv)
		fclose(csv);
	free(ns);
	free(cell);
}
