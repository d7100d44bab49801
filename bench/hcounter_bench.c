/* SPDX-License-Identifier: MIT */
/*
 * pcpu_bench_hcounter: hierarchical counters (pcpu/hcounter.h, issue 54)
 * beside what a program uses instead, in one run.
 *
 *  1. Reads, one thread, while the other CPUs' threads (ncpu - 1 of them,
 *     at least 1) add to the counters read: ns per read of
 *       pcpu_hcounter_approx()  (O(1): one cache line)
 *       pcpu_hcounter_sum()     (every CPU slot's word)
 *       pcpu_counter_fetch()    (a plain per-CPU counter's read)
 *       a shared atomic's load  (the unit)
 *  2. Adds of 1, 1 / 2 / 2 x ncpu threads: ns of CPU time per add
 *     (CLOCK_THREAD_CPUTIME_ID, summed over the threads) of
 *       pcpu_hcounter_add()     (batch 32: a carry every 32 adds on a slot)
 *       pcpu_hcounter_add() of +1 and -1 in turn (never a carry: the add
 *                               alone, what the 1.3x target is on)
 *       pcpu_counter_add()      (the unit)
 *       a shared atomic add
 *  3. A limiter: each thread takes one unit and gives it back (limited add
 *     of 1, add of -1), against a limit far above what is held, so that a
 *     hierarchical counter stays per-CPU: ns of CPU time per take + give of
 *       pcpu_hcounter_limited_add() + pcpu_hcounter_add(-1)
 *       a CAS loop on a shared word (the unit)
 *       a mutex around a shared count
 *  4. The bounds: after section 2's adds, the width of approx()'s bounds
 *     and how far its value was from the precise sum, beside the range the
 *     header's formula gives (pcpu_hcounter_range()).
 *  5. The inaccuracy, 1 / 2 / 4 adding threads, each adding random deltas
 *     (xorshift, uniform), against the formula's range R: the distribution
 *     (median, p99, max) of |precise sum - approx().value| and how often
 *     the precise sum lay outside approx()'s [min, max]. Three cases:
 *       quiescent: deltas in [-64, 64], the adders stopped at a barrier
 *         after a random number of adds each; at each stop the reader
 *         takes approx() and then pcpu_hcounter_sum(), both exact points
 *         (the header: min <= sum <= max at every quiescent point);
 *       during adds, growing: deltas in [1, 64], never stopped; the
 *         reader, at S moments spread over 10 x --ms (sleeping between
 *         them), takes s0 = sum(), a = approx(), s1 = sum(). For a
 *         counter that only grows, sum() is never below the precise sum
 *         when it began nor above it when it returned, so the precise sum
 *         at the instant of approx() lies in [s0, s1]. |sum - value| is
 *         |s1 - a.value| (the sum right after, as a program would check
 *         it); "outside" counts the samples whose [s0, s1] lies wholly
 *         outside [min, max] (the bounds certainly missed: the header
 *         says they hold here, so any is a bug), "maybe" those where
 *         [s0, s1] is not wholly inside (the adds between the reads may
 *         explain it);
 *       during adds, mixed: deltas in [-64, 64], as above; the header
 *         promises no bounds here (carries of both signs in flight), and
 *         the bracket argument needs a monotonic sum: the figures say how
 *         loose the bounds are in practice, no more.
 *
 * Every variant of a comparison runs in the same process, interleaved
 * (round r starts from variant r), and the tables give medians over rounds
 * and ratios to the unit at the same thread count. Every run checks its
 * total. Options: --rounds N (5), --ms M per timed run (100), --samples S
 * for section 5 (20000 during adds, S / 10 stops), --threads a,b,c the
 * thread counts of sections 2 and 3 (1, 2 and 2 x the online CPUs; up to
 * 6 counts, each 1..64), --quick (3 rounds of 30 ms, 4000 samples).
 * Exits 1 if the bounds missed a precise sum that the header says they
 * contain (sections 4 and 5).
 */
#include "bench.h"
#include <pcpu/pcpu.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ALIGNED __attribute__((aligned(64)))
#define MAX_THREADS 64
#define MAX_ROUNDS 64
#define BATCH 32
#define LIMIT ((int64_t)1 << 40)

static struct {
	int stop ALIGNED;
	int64_t atomic ALIGNED; /* the shared atomic / CAS word */
	pthread_mutex_t lock ALIGNED;
	int64_t locked; /* under lock */
	pcpu_hcounter_t *hc ALIGNED;
	pcpu_counter_t c;
	pthread_barrier_t start;
} sh;

static int rounds = 5, run_ms = 100;

static void die(const char *what)
{
	fprintf(stderr, "pcpu_bench_hcounter: %s\n", what);
	exit(1);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- timed runs: each thread loops until stop, counting its operations -- */

enum op { ADD_HC, ADD_HC_NOCARRY, ADD_COUNTER, ADD_ATOMIC, LIM_HC, LIM_CAS, LIM_MUTEX, N_OPS };

struct worker {
	enum op op;
	uint64_t ops, cpu_ns;
	pthread_t t;
} ALIGNED;

static int cas_take(void)
{
	int64_t v = __atomic_load_n(&sh.atomic, __ATOMIC_RELAXED);

	do {
		if (v + 1 > LIMIT)
			return 0;
	} while (!__atomic_compare_exchange_n(&sh.atomic, &v, v + 1, 1, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	return 1;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t n = 0, t0;

	pthread_barrier_wait(&sh.start);
	t0 = bench_thread_cpu_ns();
	while (!__atomic_load_n(&sh.stop, __ATOMIC_RELAXED)) {
		for (int i = 0; i < 256; i++) {
			switch (w->op) {
			case ADD_HC:
				pcpu_hcounter_add(sh.hc, 1);
				break;
			case ADD_HC_NOCARRY: /* +1, -1: the slot stays inside its batch */
				pcpu_hcounter_add(sh.hc, (i & 1) ? -1 : 1);
				break;
			case ADD_COUNTER:
				pcpu_counter_add(sh.c, 1);
				break;
			case ADD_ATOMIC:
				__atomic_fetch_add(&sh.atomic, 1, __ATOMIC_RELAXED);
				break;
			case LIM_HC:
				if (!pcpu_hcounter_limited_add(sh.hc, 1, LIMIT))
					die("limited add refused far below the limit");
				pcpu_hcounter_add(sh.hc, -1);
				break;
			case LIM_CAS:
				if (!cas_take())
					die("CAS limiter refused far below the limit");
				__atomic_fetch_sub(&sh.atomic, 1, __ATOMIC_RELEASE);
				break;
			case LIM_MUTEX:
				pthread_mutex_lock(&sh.lock);
				if (sh.locked + 1 > LIMIT)
					die("mutex limiter refused far below the limit");
				sh.locked++;
				pthread_mutex_unlock(&sh.lock);
				pthread_mutex_lock(&sh.lock);
				sh.locked--;
				pthread_mutex_unlock(&sh.lock);
				break;
			default:
				break;
			}
		}
		n += 256;
	}
	w->cpu_ns = bench_thread_cpu_ns() - t0;
	w->ops = n;
	return NULL;
}

/* One timed run of op with nthr threads: ns of CPU time per operation. */
static double timed(enum op op, int nthr)
{
	struct worker w[MAX_THREADS];
	uint64_t ops = 0, ns = 0;
	int64_t total;

	sh.stop = 0;
	sh.atomic = 0;
	sh.locked = 0;
	if (pcpu_hcounter_reset(sh.hc) != 0)
		die("pcpu_hcounter_reset failed");
	(void)pcpu_counter_fetch_and_zero(sh.c);
	if (pthread_barrier_init(&sh.start, NULL, (unsigned)nthr + 1) != 0)
		die("barrier");
	for (int i = 0; i < nthr; i++) {
		w[i].op = op;
		if (pthread_create(&w[i].t, NULL, work, &w[i]) != 0)
			die("pthread_create");
	}
	pthread_barrier_wait(&sh.start);
	usleep((useconds_t)run_ms * 1000);
	__atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthr; i++) {
		pthread_join(w[i].t, NULL);
		ops += w[i].ops;
		ns += w[i].cpu_ns;
	}
	pthread_barrier_destroy(&sh.start);
	/* Every run's total, checked. */
	switch (op) {
	case ADD_HC:
		total = pcpu_hcounter_sum(sh.hc);
		break;
	case ADD_HC_NOCARRY: /* as many -1 as +1 */
		if (pcpu_hcounter_sum(sh.hc) != 0)
			die("the +1/-1 adds did not end at 0");
		total = (int64_t)ops;
		break;
	case ADD_COUNTER:
		total = (int64_t)pcpu_counter_fetch(sh.c);
		break;
	case ADD_ATOMIC:
		total = sh.atomic;
		break;
	default: /* the limiters give back what they take */
		total = (int64_t)ops;
		if (pcpu_hcounter_sum(sh.hc) != 0 || sh.atomic != 0 || sh.locked != 0)
			die("a limiter did not end at 0");
	}
	if (total != (int64_t)ops)
		die("a run's total is wrong");
	return (double)ns / (double)ops;
}

static void table(const char *title, const enum op *ops, const char *const *names, int nops,
		  const unsigned *threads, int nt)
{
	printf("\n%s\n", title);
	printf("%-48s", "variant (ns per op, median; ratio to the last row)");
	for (int t = 0; t < nt; t++)
		printf("  %3u thr        ", threads[t]);
	printf("\n");
	{
		double med[8][8];

		for (int t = 0; t < nt; t++) {
			double v[8][MAX_ROUNDS];

			for (int r = 0; r < rounds; r++)
				for (int k = 0; k < nops; k++) {
					int o = (r + k) % nops;

					v[o][r] = timed(ops[o], threads[t]);
				}
			for (int o = 0; o < nops; o++)
				med[o][t] = median(v[o], rounds);
		}
		for (int o = 0; o < nops; o++) {
			printf("%-48s", names[o]);
			for (int t = 0; t < nt; t++)
				printf("  %6.2f (%5.2fx)", med[o][t], med[o][t] / med[nops - 1][t]);
			printf("\n");
		}
	}
}

/* ---- 1. reads while others add -------------------------------------------- */

static void *bg_adder(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&sh.stop, __ATOMIC_RELAXED))
		for (int i = 0; i < 256; i++) {
			pcpu_hcounter_add(sh.hc, 1);
			pcpu_counter_add(sh.c, 1);
			__atomic_fetch_add(&sh.atomic, 1, __ATOMIC_RELAXED);
		}
	return NULL;
}

static volatile int64_t sink;

static double read_ns(int which)
{
	const int n = 100000;
	uint64_t t0 = mono_ns();
	int64_t s = 0;

	for (int i = 0; i < n; i++) {
		switch (which) {
		case 0: {
			struct pcpu_hcounter_approx a = pcpu_hcounter_approx(sh.hc);

			s += a.value + a.max;
			break;
		}
		case 1:
			s += pcpu_hcounter_sum(sh.hc);
			break;
		case 2:
			s += (int64_t)pcpu_counter_fetch(sh.c);
			break;
		default:
			s += __atomic_load_n(&sh.atomic, __ATOMIC_RELAXED);
		}
	}
	sink = s;
	return (double)(mono_ns() - t0) / n;
}

static void reads(long ncpu)
{
	static const char *const names[4] = {"pcpu_hcounter_approx()", "pcpu_hcounter_sum()",
					     "pcpu_counter_fetch()", "a shared atomic's load (the unit)"};
	int nbg = ncpu > 1 ? (int)ncpu - 1 : 1;
	pthread_t bg[MAX_THREADS];
	double v[4][MAX_ROUNDS];

	sh.stop = 0;
	for (int i = 0; i < nbg; i++)
		if (pthread_create(&bg[i], NULL, bg_adder, NULL) != 0)
			die("pthread_create");
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < 4; k++)
			v[(r + k) % 4][r] = read_ns((r + k) % 4);
	__atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nbg; i++)
		pthread_join(bg[i], NULL);
	printf("\n1. Reads, one thread, while %d thread(s) add (ns per read, median of %d rounds)\n",
	       nbg, rounds);
	for (int k = 0; k < 4; k++) {
		double m = median(v[k], rounds);

		v[k][0] = m;
		printf("%-48s  %7.2f\n", names[k], m);
	}
	printf("%-48s  %7.2fx\n", "approx / atomic load", v[0][0] / v[3][0]);
	printf("%-48s  %7.2fx\n", "counter fetch / approx", v[2][0] / v[0][0]);
}

/* ---- 5. inaccuracy during concurrent adds -------------------------------- */

#define DMAX (2 * BATCH) /* the deltas' magnitude: up to two batches */

enum icase { Q_MIXED, D_GROW, D_MIXED, N_ICASES };

static int samples = 20000;

static struct {
	enum icase c;
	int stops; /* quiescent case: how many stops the reader makes */
	pthread_barrier_t stop, go;
} ic;

/* A random delta: [1, DMAX] for the growing case, else [-DMAX, DMAX]
 * without 0. */
static int64_t delta(uint64_t *x, int grow)
{
	uint64_t r = bench_xorshift(x);

	if (grow)
		return 1 + (int64_t)(r % DMAX);
	return (r & 1 ? 1 : -1) * (1 + (int64_t)((r >> 1) % DMAX));
}

static void *inacc_adder(void *arg)
{
	uint64_t x = 0x9e3779b97f4a7c15u * (uint64_t)(uintptr_t)arg + 1;

	if (ic.c == Q_MIXED) {
		for (int s = 0; s < ic.stops; s++) {
			/* A random number of adds, so that the slots stop at
			 * every remainder; then the reader's exact point. */
			for (uint64_t k = bench_xorshift(&x) % 2000; k > 0; k--)
				pcpu_hcounter_add(sh.hc, delta(&x, 0));
			pthread_barrier_wait(&ic.stop);
			pthread_barrier_wait(&ic.go);
		}
		return NULL;
	}
	pthread_barrier_wait(&ic.go); /* every adder runs before the first sample */
	while (!__atomic_load_n(&sh.stop, __ATOMIC_RELAXED))
		for (int i = 0; i < 64; i++)
			pcpu_hcounter_add(sh.hc, delta(&x, ic.c == D_GROW));
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* One case with nthr adders: prints its row; returns the samples whose
 * bounds certainly missed a precise sum the header says they contain. */
static long inaccuracy(enum icase c, int nthr, int64_t range)
{
	static const char *const names[N_ICASES] = {"quiescent, deltas +-1..64",
						    "during adds, deltas 1..64",
						    "during adds, deltas +-1..64"};
	int n = c == Q_MIXED ? (samples / 10 > 0 ? samples / 10 : 1) : samples;
	int64_t *err = malloc((size_t)n * sizeof(int64_t));
	int64_t *drift = malloc((size_t)n * sizeof(int64_t));
	pthread_t t[MAX_THREADS];
	long outside = 0, maybe = 0;
	int64_t width = 0;
	uint64_t t0;

	if (!err || !drift)
		die("malloc");
	if (pcpu_hcounter_reset(sh.hc) != 0)
		die("pcpu_hcounter_reset failed");
	ic.c = c;
	ic.stops = n;
	sh.stop = 0;
	if (pthread_barrier_init(&ic.stop, NULL, (unsigned)nthr + 1) != 0 ||
	    pthread_barrier_init(&ic.go, NULL, (unsigned)nthr + 1) != 0)
		die("barrier");
	for (int i = 0; i < nthr; i++)
		if (pthread_create(&t[i], NULL, inacc_adder, (void *)(uintptr_t)(i + 1)) != 0)
			die("pthread_create");
	/* During adds, the samples are spread over 10 x --ms (1 s), the reader
	 * sleeping between them (as a program that checks a limit now and
	 * then): on a machine with few CPUs a spinning reader would take the
	 * adders' CPU, and finish before they ran. */
	if (c != Q_MIXED)
		pthread_barrier_wait(&ic.go);
	t0 = mono_ns();
	for (int i = 0; i < n; i++) {
		struct pcpu_hcounter_approx a;
		int64_t s0, s1;

		if (c != Q_MIXED) {
			uint64_t at = t0 + (uint64_t)i * 10u * 1000000u * (uint64_t)run_ms / (uint64_t)n;
			struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};

			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
		if (c == Q_MIXED) {
			pthread_barrier_wait(&ic.stop);
			a = pcpu_hcounter_approx(sh.hc);
			s0 = s1 = pcpu_hcounter_sum(sh.hc);
			pthread_barrier_wait(&ic.go);
		} else {
			s0 = pcpu_hcounter_sum(sh.hc);
			a = pcpu_hcounter_approx(sh.hc);
			s1 = pcpu_hcounter_sum(sh.hc);
		}
		err[i] = s1 > a.value ? s1 - a.value : a.value - s1;
		drift[i] = s1 > s0 ? s1 - s0 : s0 - s1;
		if (a.max - a.min > width)
			width = a.max - a.min;
		if (c != D_MIXED && (a.max < s0 || a.min > s1))
			outside++;
		else if (c == D_MIXED && a.max < (s0 < s1 ? s0 : s1))
			outside++;
		else if (c == D_MIXED && a.min > (s0 > s1 ? s0 : s1))
			outside++;
		else if (s0 < a.min || s1 > a.max || s1 < a.min || s0 > a.max)
			maybe++;
	}
	__atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthr; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&ic.stop);
	pthread_barrier_destroy(&ic.go);
	qsort(err, (size_t)n, sizeof(*err), cmp_i64);
	qsort(drift, (size_t)n, sizeof(*drift), cmp_i64);
	printf("%3d  %-28s %6d  %6" PRId64 " %6" PRId64 " %6" PRId64 " (%5.2fR)  %6" PRId64
	       "  %5" PRId64 " %6" PRId64 "  %6ld %6ld%s\n",
	       nthr, names[c], n, err[n / 2], err[(int)((int64_t)n * 99 / 100)], err[n - 1],
	       range ? (double)err[n - 1] / (double)range : 0.0, width, drift[n / 2], drift[n - 1],
	       outside, maybe,
	       c != D_MIXED && outside ? "  BOUNDS MISSED" : "");
	free(err);
	free(drift);
	return c == D_MIXED ? 0 : outside;
}

static int inaccuracies(void)
{
	static const int nthr[3] = {1, 2, 4};
	int64_t range = pcpu_hcounter_range(sh.hc);
	long missed = 0;

	printf("\n5. Inaccuracy, random deltas, against the formula's range R = %" PRId64
	       " (batch %d, %u CPU slots)\n",
	       range, BATCH, pcpu_nslots());
	printf("     |sum - approx.value|: the sum at the stop (quiescent), else the sum right after\n"
	       "     approx(); width: the widest max - min seen (R + carries in flight); drift:\n"
	       "     |the sum after approx() - the sum before it|; outside: the precise sum certainly\n"
	       "     outside [min, max]; maybe: possibly outside (the file comment defines both)\n");
	printf("thr  %-28s %6s  %6s %6s %6s %8s  %6s  %12s  %6s %6s\n", "case", "samples",
	       "median", "p99", "max", "", "width", "drift med/max", "outside", "maybe");
	for (int k = 0; k < 3; k++)
		for (int c = 0; c < N_ICASES; c++)
			missed += inaccuracy((enum icase)c, nthr[k], range);
	return missed ? 1 : 0;
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned threads[6];
	int nt = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ms") && i + 1 < argc)
			run_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--samples") && i + 1 < argc)
			samples = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nt = (int)bench_parse_counts("--threads", argv[++i], threads, 6, MAX_THREADS);
		else if (!strcmp(argv[i], "--quick"))
			rounds = 3, run_ms = 30, samples = 4000;
		else {
			fprintf(stderr, "usage: pcpu_bench_hcounter [--rounds N] [--ms M] [--samples S] "
					"[--threads a,b,c] [--quick]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || run_ms < 1 || samples < 1)
		die("--rounds 1..64, --ms >= 1, --samples >= 1");
	if (ncpu < 1)
		ncpu = 1;
	sh.hc = pcpu_hcounter_create(BATCH);
	sh.c = pcpu_counter_alloc();
	if (!sh.hc || !sh.c)
		die("allocation failed");
	pthread_mutex_init(&sh.lock, NULL);
	if (!nt) {
		threads[nt++] = 1;
		if (ncpu >= 2)
			threads[nt++] = 2;
		threads[nt++] = (unsigned)(2 * ncpu > MAX_THREADS ? MAX_THREADS : 2 * ncpu);
	}
	printf("pcpu_bench_hcounter: %ld CPUs online, %u CPU slots, rseq mode %s, batch %d, "
	       "range %" PRId64 "\n",
	       ncpu, pcpu_nslots(), pcpu_rseq_mode_name(pcpu_rseq_mode()), BATCH,
	       pcpu_hcounter_range(sh.hc));
	reads(ncpu);
	{
		static const enum op ops[4] = {ADD_HC, ADD_HC_NOCARRY, ADD_ATOMIC, ADD_COUNTER};
		static const char *const names[4] = {"pcpu_hcounter_add(1)", "hcounter add +1/-1 (no carry)",
						     "shared atomic add", "pcpu_counter_add(1) (the unit)"};

		table("2. Adds (ns of CPU time per add, summed over threads)", ops, names, 4, threads, nt);
	}
	{
		static const enum op ops[3] = {LIM_HC, LIM_MUTEX, LIM_CAS};
		static const char *const names[3] = {"hcounter limited_add(1) + add(-1)",
						     "mutex: take + give", "CAS loop: take + give (the unit)"};

		table("3. A limiter, far from its limit (ns of CPU time per take + give)", ops, names, 3,
		      threads, nt);
	}
	{
		/* 4. After adds from every thread: the bounds' width and the
		 * approximation's distance from the precise sum. */
		struct pcpu_hcounter_approx a;
		int64_t s;

		(void)timed(ADD_HC, threads[nt - 1]);
		a = pcpu_hcounter_approx(sh.hc);
		s = pcpu_hcounter_sum(sh.hc);
		printf("\n4. Bounds after %u threads' adds: sum %" PRId64 ", approx %" PRId64
		       " [%" PRId64 ", %" PRId64 "]: width %" PRId64 ", |sum - approx| %" PRId64
		       "; the formula's range %" PRId64 "%s\n",
		       threads[nt - 1], s, a.value, a.min, a.max, a.max - a.min,
		       s > a.value ? s - a.value : a.value - s, pcpu_hcounter_range(sh.hc),
		       a.min <= s && s <= a.max ? "" : "  OUTSIDE THE BOUNDS");
		if (a.min > s || s > a.max)
			return 1;
	}
	if (inaccuracies() != 0)
		return 1;
	pcpu_hcounter_destroy(sh.hc);
	pcpu_counter_free(sh.c);
	return 0;
}
