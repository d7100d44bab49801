/* SPDX-License-Identifier: MIT */
/*
 * The demonstration's verdict in words (demo_verdict.h). Every claim is
 * computed from the figures it is given: which rows kept every increment,
 * how pcpu's cost moves with the threads, and whether each other row cost
 * more or less than pcpu's. An order is judged on the ratios as printed
 * (two decimals), so the words never contradict the figures beside them.
 */
#include "demo_verdict.h"

#include <ctype.h>
#include <math.h>

/* "2.61" or "2.61-2.70": a figure over the thread counts. */
static const char *demo_range(char *buf, size_t len, double lo, double hi, const char *unit)
{
	if (fabs(hi - lo) < 0.005 * (hi > 0 ? hi : 1))
		snprintf(buf, len, "%.2f%s", lo, unit);
	else
		snprintf(buf, len, "%.2f-%.2f%s", lo, hi, unit);
	return buf;
}

/* The smallest and largest of a row's figure / pcpu's over the thread counts. */
static void demo_ratio(const struct demo_run *run, unsigned row, double *lo, double *hi)
{
	const struct demo_cell *c = run->cell;
	unsigned ti, nt = run->nthreads;

	*lo = INFINITY;
	*hi = -INFINITY;
	for (ti = 0; ti < nt; ti++) {
		double r = c[row * nt + ti].ns / c[DEMO_PCPU * nt + ti].ns;

		*lo = r < *lo ? r : *lo;
		*hi = r > *hi ? r : *hi;
	}
}

/* How a row's cost compares with pcpu's over the thread counts, on its
 * ratio range as printed. */
enum demo_order { ORDER_LESS, ORDER_MORE, ORDER_SAME, ORDER_LESS_OR_SAME, ORDER_MORE_OR_SAME, ORDER_MIXED };

static enum demo_order demo_order(double lo, double hi)
{
	long l = lround(lo * 100), h = lround(hi * 100);

	if (h < 100)
		return ORDER_LESS;
	if (l > 100)
		return ORDER_MORE;
	if (l == 100 && h == 100)
		return ORDER_SAME;
	if (h == 100)
		return ORDER_LESS_OR_SAME;
	if (l == 100)
		return ORDER_MORE_OR_SAME;
	return ORDER_MIXED;
}

/* The order in words, after a ratio: "2.96-3.14× pcpu's (more at every
 * thread count)". */
static const char *demo_order_words(enum demo_order o)
{
	switch (o) {
	case ORDER_LESS:
		return "less at every thread count";
	case ORDER_MORE:
		return "more at every thread count";
	case ORDER_SAME:
		return "the same at every thread count";
	case ORDER_LESS_OR_SAME:
		return "less or the same";
	case ORDER_MORE_OR_SAME:
		return "more or the same";
	default:
		return "less at some thread counts, more at others";
	}
}

static const char *const demo_names[DEMO_NROWS] = {
	[DEMO_PCPU] = "pcpu_counter_add",
	[DEMO_ATOMIC] = "the shared atomic add",
	[DEMO_MUTEX] = "the mutex",
	[DEMO_RACY] = "the plain shared `+=`",
	[DEMO_TLS] = "the per-thread counters",
};

static unsigned demo_inexact(const struct demo_run *run, unsigned row)
{
	unsigned ti, bad = 0;

	for (ti = 0; ti < run->nthreads; ti++)
		bad += run->cell[row * run->nthreads + ti].inexact;
	return bad;
}

/* Whether the exactness bullet names row among those that kept every
 * increment. */
static int demo_exact_other(const struct demo_run *run, unsigned row)
{
	return row != DEMO_PCPU && row != DEMO_RACY && demo_inexact(run, row) == 0;
}

static void demo_exactness(FILE *f, const struct demo_run *run)
{
	const unsigned nt = run->nthreads, runs = run->rounds * nt;
	unsigned row, n = 0, k = 0, ti;
	double lost = 0;

	/* A variant that must be exact and was not: first, before anything else. */
	for (row = 0; row < DEMO_NROWS; row++)
		if (row != DEMO_RACY && demo_inexact(run, row))
			fprintf(f, "- **%c%s lost increments in %u of %u runs**: it must not; that is "
				"a bug, please report it with this output.\n",
				row == DEMO_PCPU ? demo_names[row][0] : toupper(demo_names[row][0]),
				demo_names[row] + 1, demo_inexact(run, row), runs);
	if (demo_inexact(run, DEMO_PCPU) == 0) {
		fprintf(f, "- **Exact.** pcpu_counter_add kept every increment in all %u runs, from %u to "
			"%u threads on %u CPUs", runs, run->threads[0], run->threads[nt - 1], run->ncpu);
		for (row = 0; row < DEMO_NROWS; row++)
			n += demo_exact_other(run, row);
		for (row = 0; row < DEMO_NROWS; row++) {
			if (!demo_exact_other(run, row))
				continue;
			fprintf(f, "%s%s", k == 0 ? ", as did " : k + 1 == n ? " and " : ", ",
				demo_names[row]);
			k++;
		}
		fprintf(f, ". ");
	} else {
		fprintf(f, "- ");
	}
	for (ti = 0; ti < nt; ti++) {
		double l = run->cell[DEMO_RACY * nt + ti].lost;

		lost = l > lost ? l : lost;
	}
	if (demo_inexact(run, DEMO_RACY))
		fprintf(f, "The plain shared `+=` lost increments in %u of %u runs, up to %.1f %% of "
			"them.\n", demo_inexact(run, DEMO_RACY), runs, lost);
	else
		fprintf(f, "The plain shared `+=` lost none in this run (its threads never collided), "
			"but nothing stops it from losing them.\n");
}

void demo_verdict(FILE *f, const struct demo_run *run)
{
	const unsigned nt = run->nthreads, *th = run->threads;
	const struct demo_cell *c = run->cell;
	double lo, hi, plo = INFINITY, phi = 0;
	enum demo_order atomic, mutex, tls;
	unsigned ti;
	char a[64], b[64];

	fprintf(f, "## Verdict\n\n");
	demo_exactness(f, run);

	for (ti = 0; ti < nt; ti++) {
		plo = c[DEMO_PCPU * nt + ti].ns < plo ? c[DEMO_PCPU * nt + ti].ns : plo;
		phi = c[DEMO_PCPU * nt + ti].ns > phi ? c[DEMO_PCPU * nt + ti].ns : phi;
	}
	demo_ratio(run, DEMO_ATOMIC, &lo, &hi);
	atomic = demo_order(lo, hi);
	demo_ratio(run, DEMO_MUTEX, &lo, &hi);
	mutex = demo_order(lo, hi);
	/* "Cheap" only where both shared exact counters cost more at every
	 * thread count. */
	fprintf(f, "- **%s** pcpu_counter_add cost %s of CPU time per increment",
		atomic == ORDER_MORE && mutex == ORDER_MORE ? "Cheap." : "Cost.",
		demo_range(a, sizeof(a), plo, phi, " ns"));
	if (nt == 1)
		fprintf(f, " with %u thread%s.\n", th[0], th[0] == 1 ? "" : "s");
	else if (phi <= 1.10 * plo)
		fprintf(f, ", about the same with %u thread%s as with %u (within 10 %%).\n", th[0],
			th[0] == 1 ? "" : "s", th[nt - 1]);
	else
		fprintf(f, ": %.2f ns with %u thread%s, %.2f ns with %u.\n", c[DEMO_PCPU * nt].ns, th[0],
			th[0] == 1 ? "" : "s", c[DEMO_PCPU * nt + nt - 1].ns, th[nt - 1]);

	demo_ratio(run, DEMO_ATOMIC, &lo, &hi);
	fprintf(f, "- A shared atomic add cost %s pcpu's (%s), ", demo_range(a, sizeof(a), lo, hi, "×"),
		demo_order_words(atomic));
	demo_ratio(run, DEMO_MUTEX, &lo, &hi);
	fprintf(f, "a mutex %s (%s). A shared counter's cost grows with the cores that share it "
		"(bench/16-cores.md: an atomic add took 337 ns at 16 threads on 16 cores); pcpu's "
		"add touches only the current CPU's copy.\n", demo_range(b, sizeof(b), lo, hi, "×"),
		demo_order_words(mutex));

	demo_ratio(run, DEMO_TLS, &lo, &hi);
	tls = demo_order(lo, hi);
	fprintf(f, "- Per-thread counters cost %s pcpu's (%s). ", demo_range(a, sizeof(a), lo, hi, "×"),
		demo_order_words(tls));
	if (tls == ORDER_LESS)
		fprintf(f, "They are cheaper to add to, but a reader must find and sum every "
			"thread's copy");
	else if (tls == ORDER_MORE)
		fprintf(f, "Their add costs more than pcpu's here, and a reader must still find "
			"and sum every thread's copy");
	else
		fprintf(f, "They are not cheaper to add to at every thread count, and a reader must "
			"still find and sum every thread's copy");
	fprintf(f, ", a thread's counts must be kept when it exits, and their memory grows with "
		"the threads; pcpu does that for you, with one copy per CPU.\n");

	fprintf(f, "- These are CPU times, so other programs on the machine are not charged to any "
		"row. A busy machine can still move them, the shared rows most, whose cost depends "
		"on how many threads run at once; it never changes which rows are exact. `bash "
		"bench/run.sh --quick` runs the whole benchmark (pcpu's add against a hand-written "
		"rseq add, memory, reads, a data-plane simulation); bench/README.md explains each "
		"figure.\n");
}
