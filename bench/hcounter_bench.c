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
 *
 * Every variant of a comparison runs in the same process, interleaved
 * (round r starts from variant r), and the tables give medians over rounds
 * and ratios to the unit at the same thread count. Every run checks its
 * total. Options: --rounds N (5), --ms M per timed run (100), --quick
 * (3 rounds of 30 ms).
 */
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

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

enum op { ADD_HC, ADD_COUNTER, ADD_ATOMIC, LIM_HC, LIM_CAS, LIM_MUTEX, N_OPS };

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
	t0 = thread_cpu_ns();
	while (!__atomic_load_n(&sh.stop, __ATOMIC_RELAXED)) {
		for (int i = 0; i < 256; i++) {
			switch (w->op) {
			case ADD_HC:
				pcpu_hcounter_add(sh.hc, 1);
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
	w->cpu_ns = thread_cpu_ns() - t0;
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
		  const int *threads, int nt)
{
	printf("\n%s\n", title);
	printf("%-48s", "variant (ns per op, median; ratio to the last row)");
	for (int t = 0; t < nt; t++)
		printf("  %3d thr        ", threads[t]);
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

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int threads[3], nt = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ms") && i + 1 < argc)
			run_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--quick"))
			rounds = 3, run_ms = 30;
		else {
			fprintf(stderr, "usage: pcpu_bench_hcounter [--rounds N] [--ms M] [--quick]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || run_ms < 1)
		die("--rounds 1..64, --ms >= 1");
	if (ncpu < 1)
		ncpu = 1;
	sh.hc = pcpu_hcounter_create(BATCH);
	sh.c = pcpu_counter_alloc();
	if (!sh.hc || !sh.c)
		die("allocation failed");
	pthread_mutex_init(&sh.lock, NULL);
	threads[nt++] = 1;
	if (ncpu >= 2)
		threads[nt++] = 2;
	threads[nt++] = (int)(2 * ncpu > MAX_THREADS ? MAX_THREADS : 2 * ncpu);
	printf("pcpu_bench_hcounter: %ld CPUs online, %u CPU slots, rseq mode %s, batch %d, "
	       "range %" PRId64 "\n",
	       ncpu, pcpu_nslots(), pcpu_rseq_mode_name(pcpu_rseq_mode()), BATCH,
	       pcpu_hcounter_range(sh.hc));
	reads(ncpu);
	{
		static const enum op ops[3] = {ADD_HC, ADD_ATOMIC, ADD_COUNTER};
		static const char *const names[3] = {"pcpu_hcounter_add(1)", "shared atomic add",
						     "pcpu_counter_add(1) (the unit)"};

		table("2. Adds (ns of CPU time per add, summed over threads)", ops, names, 3, threads, nt);
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
		printf("\n4. Bounds after %d threads' adds: sum %" PRId64 ", approx %" PRId64
		       " [%" PRId64 ", %" PRId64 "]: width %" PRId64 ", |sum - approx| %" PRId64
		       "; the formula's range %" PRId64 "%s\n",
		       threads[nt - 1], s, a.value, a.min, a.max, a.max - a.min,
		       s > a.value ? s - a.value : a.value - s, pcpu_hcounter_range(sh.hc),
		       a.min <= s && s <= a.max ? "" : "  OUTSIDE THE BOUNDS");
		if (a.min > s || s > a.max)
			return 1;
	}
	pcpu_hcounter_destroy(sh.hc);
	pcpu_counter_free(sh.c);
	return 0;
}
