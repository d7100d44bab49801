/* SPDX-License-Identifier: MIT */
/*
 * The demonstration (`pcpu_bench --demo`, what scripts/demo.sh shows): one
 * counter that every thread increments, kept the ways a program would keep
 * it -- pcpu_counter_add, a shared atomic, a mutex, a plain shared `+=`,
 * per-thread counters -- then a short verdict in words (demo_verdict.c).
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
#include "demo_verdict.h"

#include <stdlib.h>
#include <string.h>

/* The demonstration's rows, in the order printed (enum demo_row). */
static const struct {
	int kind;
	const char *name;
} demo_rows[] = {
	[DEMO_PCPU] = { K_PCPU, "pcpu_counter_add" },
	[DEMO_ATOMIC] = { K_ATOMIC, "shared atomic add" },
	[DEMO_MUTEX] = { K_MUTEX, "shared counter under a mutex" },
	[DEMO_RACY] = { K_RACY, "shared plain `+=` (no lock)" },
	[DEMO_TLS] = { K_TLS, "per-thread counters, summed at the end" },
};
_Static_assert(sizeof(demo_rows) / sizeof(demo_rows[0]) == DEMO_NROWS, "a row per enum demo_row");

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
	demo_verdict(stdout, &(struct demo_run){ .cell = cell, .threads = bench_opt.threads,
						 .nthreads = nt, .rounds = nr, .ncpu = bench_ncpu });
	if (csv)
		fclose(csv);
	free(ns);
	free(cell);
}
