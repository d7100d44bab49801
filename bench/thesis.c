/* SPDX-License-Identifier: MIT */
/*
 * Section "thesis": the lost-update table of the counter(9) thesis
 * (seed 001, figs. 2.6 and 2.7), in user space.
 *
 * The thesis forks one process per CPU, pins each to its own CPU, and has
 * each make system calls into a kernel module that adds to one counter:
 *  - fig. 2.6: 10^7 calls of 10 additions each per process (the kernel entry
 *    dominates; the counter is a small part of the work);
 *  - fig. 2.7: one call doing 10^9 additions (the counter is all the work).
 * It reports the final value, the share of updates lost, and the wall time of
 * the whole run, for `+=`, atomic(9) and counter(9).
 *
 * Here: one thread per CPU (ncpu threads), each pinned to its own CPU, adding
 * to one counter by `+=`, an atomic add, or pcpu_counter_add. Fig. 2.6's
 * kernel entry becomes a real system call (getppid) before every 10 adds.
 * K, the adds per thread of fig. 2.7, is --iterations; fig. 2.6 does K/10
 * adds per thread (the thesis's 10^8 : 10^9). Time: wall time from the
 * first thread's release from the start barrier to the end of the last
 * (each thread reads the clock itself, after the barrier and at its end).
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

enum th_kind { T_RACY, T_ATOMIC, T_PCPU, T_N };
enum th_test { TEST_SYSCALL, TEST_TIGHT, TEST_N }; /* fig. 2.6, fig. 2.7 */

static const char *const th_kind_name[T_N] = { "`+=`", "atomic add", "pcpu_counter_add" };
static const char *const th_kind_csv[T_N] = { "plain", "atomic", "pcpu" };

/* The thesis's own figures (Xeon E5620, 4 processes on 4 cores). */
static const struct {
	const char *value;
	double lost_pct, time_s;
} th_published[TEST_N][T_N] = {
	[TEST_SYSCALL] = { { "348314008", 12.9, 4.24 }, { "4*10^8", 0, 7.02 }, { "4*10^8", 0, 3.52 } },
	[TEST_TIGHT] = { { "1000662364", 74.9, 3.65 }, { "4*10^9", 0, 58.74 }, { "4*10^9", 0, 2.5 } },
};

struct th_shared {
	int64_t racy BENCH_ALIGNED;
	int64_t atomic BENCH_ALIGNED;
	pcpu_counter_t pc BENCH_ALIGNED;
	uint64_t adds; /* per thread */
	pthread_barrier_t start;
};

struct th_thread {
	struct th_shared *sh;
	int kind, test;
	uint64_t start_ns, end_ns; /* this thread's release from the barrier, its end */
} BENCH_ALIGNED;

BENCH_INLINE void th_add(const int kind, struct th_shared *sh, pcpu_counter_t pc)
{
	switch (kind) {
	case T_RACY:
		*(volatile int64_t *)&sh->racy += 1;
		break;
	case T_ATOMIC:
		__atomic_fetch_add(&sh->atomic, 1, __ATOMIC_RELAXED);
		break;
	case T_PCPU:
		pcpu_counter_add(pc, 1);
		break;
	}
}

BENCH_INLINE void th_loop(struct th_thread *t, const int kind, const int test)
{
	struct th_shared *sh = t->sh;
	pcpu_counter_t pc = sh->pc;
	uint64_t i, n = sh->adds;
	int j;

	(void)bench_rseq_area(); /* registration is not part of the timing */
	pthread_barrier_wait(&sh->start);
	t->start_ns = bench_now_ns();
	if (test == TEST_SYSCALL) {
		for (i = 0; i < n / 10; i++) {
			syscall(SYS_getppid);
			for (j = 0; j < 10; j++)
				th_add(kind, sh, pc);
		}
	} else {
		for (i = 0; i < n; i++)
			th_add(kind, sh, pc);
	}
	t->end_ns = bench_now_ns();
}

#define TH_LOOP_FN(k, s) \
	static __attribute__((noinline)) void th_loop_##k##_##s(struct th_thread *t) { th_loop(t, k, s); }
TH_LOOP_FN(T_RACY, TEST_SYSCALL)
TH_LOOP_FN(T_ATOMIC, TEST_SYSCALL)
TH_LOOP_FN(T_PCPU, TEST_SYSCALL)
TH_LOOP_FN(T_RACY, TEST_TIGHT)
TH_LOOP_FN(T_ATOMIC, TEST_TIGHT)
TH_LOOP_FN(T_PCPU, TEST_TIGHT)

static void (*const th_loops[TEST_N][T_N])(struct th_thread *) = {
	{ th_loop_T_RACY_TEST_SYSCALL, th_loop_T_ATOMIC_TEST_SYSCALL, th_loop_T_PCPU_TEST_SYSCALL },
	{ th_loop_T_RACY_TEST_TIGHT, th_loop_T_ATOMIC_TEST_TIGHT, th_loop_T_PCPU_TEST_TIGHT },
};

static void *th_thread_main(void *arg)
{
	struct th_thread *t = arg;

	th_loops[t->test][t->kind](t);
	return NULL;
}

struct th_result {
	uint64_t value, expected;
	double time_s;
};

static struct th_result th_run(int test, int kind, unsigned nthreads, uint64_t adds)
{
	struct th_shared *sh = bench_xmalloc(sizeof(*sh));
	struct th_thread *t = bench_xmalloc(nthreads * sizeof(*t));
	pthread_t *tid = bench_xmalloc(nthreads * sizeof(*tid));
	struct th_result res;
	uint64_t start = UINT64_MAX, end = 0;
	unsigned i;

	sh->adds = test == TEST_SYSCALL ? adds / 10 * 10 : adds;
	pthread_barrier_init(&sh->start, NULL, nthreads + 1);
	if (kind == T_PCPU && !(sh->pc = pcpu_counter_alloc()))
		bench_die("pcpu_counter_alloc failed");
	for (i = 0; i < nthreads; i++) {
		int cpu = bench_allowed_cpu(i);

		t[i].sh = sh;
		t[i].kind = kind;
		t[i].test = test;
		/* The thesis pins each process to its own CPU; so do we. */
		tid[i] = bench_thread_start(th_thread_main, &t[i], cpu);
	}
	pthread_barrier_wait(&sh->start);
	/* The threads read the clock themselves: this thread may be scheduled
	 * again only after they ended (a clock read here, after the barrier,
	 * came after their end in 1 of 3 rounds on a 2-CPU machine, and the
	 * unsigned end - start wrapped to 1.8e10 s). */
	for (i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		if (t[i].start_ns < start)
			start = t[i].start_ns;
		if (t[i].end_ns > end)
			end = t[i].end_ns;
	}
	res.expected = sh->adds * nthreads;
	res.time_s = (double)(end - start) / 1e9;
	switch (kind) {
	case T_RACY: res.value = (uint64_t)sh->racy; break;
	case T_ATOMIC: res.value = (uint64_t)sh->atomic; break;
	default:
		res.value = pcpu_counter_fetch(sh->pc);
		pcpu_counter_free(sh->pc);
	}
	pthread_barrier_destroy(&sh->start);
	free(sh);
	free(t);
	free(tid);
	return res;
}

void bench_thesis(void)
{
	const unsigned nr = bench_opt.rounds;
	unsigned nthreads = bench_ncpu, r, j, k, s;
	struct th_result *res = bench_xmalloc(TEST_N * T_N * nr * sizeof(*res));
	double *v = bench_xmalloc(nr * sizeof(double));
	struct tbl tb;
	FILE *csv;
	char buf[96], b2[32];
#define RES(s, k, r) res[((s) * T_N + (k)) * nr + (r)]

	while (nthreads > 1 && bench_allowed_cpu(nthreads - 1) < 0)
		nthreads--; /* fewer CPUs allowed than online */

	printf("## 2. The thesis's lost-update table (counter(9) thesis, figs. 2.6 and 2.7)\n\n");
	printf("%u threads, each pinned to its own CPU, all adding 1 to one counter; "
	       "median (min–max) of %u rounds.\n\n", nthreads, nr);

	for (r = 0; r < nr; r++) {
		bench_progress("thesis: round %u/%u", r + 1, nr);
		for (s = 0; s < TEST_N; s++)
			for (j = 0; j < T_N; j++) {
				uint64_t adds = s == TEST_SYSCALL ? bench_opt.iterations / 10
								  : bench_opt.iterations;

				k = (j + r) % T_N;
				RES(s, k, r) = th_run((int)s, (int)k, nthreads, adds);
			}
	}

	csv = bench_csv_open("thesis.csv",
			     "figure,counter,threads,adds_per_thread,value_median,expected,"
			     "lost_pct_median,lost_pct_min,lost_pct_max,time_s_median,time_s_min,"
			     "time_s_max,exact_runs,runs,thesis_value,thesis_lost_pct,thesis_time_s");
	for (s = 0; s < TEST_N; s++) {
		double pcpu_time;
		uint64_t adds = RES(s, 0, 0).expected / nthreads;

		for (r = 0; r < nr; r++)
			v[r] = RES(s, T_PCPU, r).time_s;
		pcpu_time = bench_median(v, nr);
		if (s == TEST_SYSCALL)
			printf("### Fig. 2.6 analogue: %" PRIu64 " system calls × 10 adds per thread "
			       "(thesis: 10^7 × 10 per process)\n\n", adds / 10);
		else
			printf("### Fig. 2.7 analogue: %" PRIu64 " adds per thread in a tight loop "
			       "(thesis: 10^9 per process)\n\n", adds);
		tbl_init(&tb, 9);
		tbl_headers(&tb, "counter", "final value (expected)", "lost %", "time, s",
			    "ns per add per thread", "time × pcpu", "thesis: value", "lost", "time, s (× counter(9))",
			    NULL);
		for (k = 0; k < T_N; k++) {
			struct bench_stat lost, tm;
			uint64_t vals_exact = 0;
			double vals[64];
			unsigned n = nr < 64 ? nr : 64;

			for (r = 0; r < nr; r++) {
				v[r] = 100.0 * ((double)RES(s, k, r).expected - (double)RES(s, k, r).value) /
				       (double)RES(s, k, r).expected;
				vals_exact += RES(s, k, r).value == RES(s, k, r).expected;
			}
			lost = bench_stat_of(v, nr);
			for (r = 0; r < n; r++)
				vals[r] = (double)RES(s, k, r).value;
			for (r = 0; r < nr; r++)
				v[r] = RES(s, k, r).time_s;
			tm = bench_stat_of(v, nr);

			tbl_cell(&tb, "%s", th_kind_name[k]);
			tbl_cell(&tb, "%.0f (%" PRIu64 ")%s", bench_median(vals, n),
				 RES(s, k, 0).expected,
				 k == T_RACY ? "" : vals_exact == nr ? " exact" : " **NOT EXACT**");
			tbl_cell(&tb, "%s", lost.max == 0 ? "0" : bench_fmt_stat(buf, sizeof(buf), lost));
			tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), tm));
			tbl_cell(&tb, "%s", bench_fmt_num(b2, sizeof(b2), tm.med * 1e9 / (double)adds));
			tbl_cell(&tb, "%.2f", tm.med / pcpu_time);
			tbl_cell(&tb, "%s", th_published[s][k].value);
			tbl_cell(&tb, "%.1f%%", th_published[s][k].lost_pct);
			tbl_cell(&tb, "%.2f (%.2f)", th_published[s][k].time_s,
				 th_published[s][k].time_s / th_published[s][T_PCPU].time_s);
			if (csv)
				fprintf(csv, "%s,%s,%u,%" PRIu64 ",%.0f,%" PRIu64 ",%.4f,%.4f,%.4f,%.6f,%.6f,"
					"%.6f,%" PRIu64 ",%u,%s,%.1f,%.2f\n",
					s == TEST_SYSCALL ? "2.6" : "2.7", th_kind_csv[k], nthreads, adds,
					bench_median(vals, n), RES(s, k, 0).expected, lost.med, lost.min,
					lost.max, tm.med, tm.min, tm.max, vals_exact, nr,
					th_published[s][k].value, th_published[s][k].lost_pct,
					th_published[s][k].time_s);
		}
		tbl_print(&tb);
	}
	printf("Thesis machine: Xeon E5620 (4 cores, 2 SMT each), 4 processes on even CPUs, "
	       "FreeBSD kernel module; its counter(9) is the kernel's `addq %%gs:` (no critical section).\n\n");
	if (csv)
		fclose(csv);
	free(res);
	free(v);
#undef RES
}
