/* SPDX-License-Identifier: MIT */
/*
 * Section "incr": what one increment costs (rseq slides 16-18), and what
 * learning the current CPU number costs (slides 20-21).
 *
 * Every variant increments "one counter" shared by all threads, by the means
 * it names, for a fixed time; each thread counts its own increments, so the
 * final value of the counter can be checked exactly (and the racy `+=`
 * reports how much it lost).
 *
 * Unit: nanoseconds of CPU time per increment, summed over threads, divided
 * by the increments done (CLOCK_THREAD_CPUTIME_ID). With threads <= CPUs this
 * is the per-thread ns/increment of the slides; with more threads than CPUs
 * it stays comparable: a scalable variant stays flat instead of growing with
 * the oversubscription factor, and time a thread spends spinning on a lock is
 * still counted. Time a thread sleeps (the mutex) is not CPU time, so the
 * aggregate throughput, Mops/s of wall time, is reported beside it.
 * Oversubscribed threads are never pinned: the scheduler moves them freely.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum incr_kind {
	K_PRIVATE,      /* thread-private plain increment: the floor */
	K_RACY,         /* shared plain `+=`: loses updates */
	K_ATOMIC,       /* shared `lock add` */
	K_CAS,          /* shared compare-and-swap loop */
	K_MUTEX,        /* shared pthread mutex */
	K_SPIN,         /* shared spinlock */
	K_PERCPU_LOCK,  /* per-CPU slot (rseq cpu_id), `lock add` */
	K_TLS,          /* per-thread TLS slot, relaxed store (DPDK "per core") */
	K_PCPU_CPU,     /* pcpu_counter_add, CPU-indexed zone */
	K_PCPU_MMCID,   /* pcpu_counter_add, mm_cid-indexed zone */
	K_PCPU_FALLBACK,/* pcpu_counter_add_atomic: the fallback path, forced */
	K_N
};

static const struct {
	const char *name;    /* table row */
	const char *csv;     /* CSV key */
	const char *slide17; /* slide 17's closest row, x86-64 E5-2630 v3: 1 thread / 8 threads */
} incr_variants[K_N] = {
	[K_PRIVATE] = { "thread-private plain `+=` (floor)", "private", "2.3 / n/a (global volatile inc)" },
	[K_RACY] = { "shared plain `+=` (racy)", "racy", "—" },
	[K_ATOMIC] = { "shared atomic add", "atomic", "6.2 / 134.0 (global LOCK; inc)" },
	[K_CAS] = { "shared CAS loop", "cas", "10.0 / 356.0 (global LOCK; cmpxchg)" },
	[K_MUTEX] = { "shared pthread mutex", "mutex", "19.2 / 993.3 (global pthread mutex)" },
	[K_SPIN] = { "shared spinlock", "spinlock", "—" },
	[K_PERCPU_LOCK] = { "per-CPU slot, `lock add` (rseq cpu_id)", "percpu_lock_add", "6.2 / 6.9 (percpu LOCK; inc)" },
	[K_TLS] = { "per-thread TLS slot, relaxed store", "tls", "—" },
	[K_PCPU_CPU] = { "pcpu add (rseq, CPU index)", "pcpu_cpu", "2.1 / 2.6 (percpu rseq inc)" },
	[K_PCPU_MMCID] = { "pcpu add (rseq, mm_cid index)", "pcpu_mmcid", "2.1 / 2.6 (percpu rseq inc)" },
	[K_PCPU_FALLBACK] = { "pcpu add (fallback forced)", "pcpu_fallback", "6.2 / 6.9 (percpu LOCK; inc)" },
};

/* Increments between two looks at the stop flag. Small enough that a lock
 * variant under oversubscription does not overrun its time much, large
 * enough that the look costs nothing measurable. */
#define INCR_BATCH 32
/* Untimed increments first: faults pages in, registers rseq, warms caches. */
#define INCR_WARMUP 2048

/* State shared by the threads of one timed run. Each written word has its
 * own cache line, so variants do not disturb each other's lines. */
struct incr_shared {
	int64_t racy BENCH_ALIGNED;
	int64_t atomic BENCH_ALIGNED;
	int64_t cas BENCH_ALIGNED;
	struct {
		pthread_mutex_t lock;
		int64_t value;
	} mutex BENCH_ALIGNED;
	struct {
		int lock;
		int64_t value;
	} spin BENCH_ALIGNED;
	int stop BENCH_ALIGNED;
	/* read-only during the run: */
	struct percpu_slot *percpu BENCH_ALIGNED;
	unsigned nslots;
	pcpu_counter_t pc;
	pthread_barrier_t start;
};

struct percpu_slot {
	int64_t value;
} BENCH_ALIGNED;

struct incr_thread {
	int64_t priv BENCH_ALIGNED; /* K_PRIVATE's counter, alone on its line */
	struct incr_shared *sh BENCH_ALIGNED;
	int kind;
	uint64_t ops;      /* timed increments */
	uint64_t cpu_ns;   /* thread CPU time of the timed part */
	uint64_t end_ns;   /* when the thread saw the stop flag */
	int64_t tls_total; /* K_TLS: the thread's slot at the end */
};

/* Per-thread slot of K_TLS: static TLS, reached %fs-relative. */
static __thread int64_t tls_slot BENCH_ALIGNED;

/* One increment by the means of `kind` (a constant where this is inlined). */
BENCH_INLINE void incr_op(const int kind, struct incr_shared *sh, int64_t *priv,
			  pcpu_counter_t pc, const char *area, unsigned nslots)
{
	switch (kind) {
	case K_PRIVATE:
		*(volatile int64_t *)priv += 1;
		break;
	case K_RACY:
		*(volatile int64_t *)&sh->racy += 1;
		break;
	case K_ATOMIC:
		__atomic_fetch_add(&sh->atomic, 1, __ATOMIC_RELAXED);
		break;
	case K_CAS: {
		int64_t old = __atomic_load_n(&sh->cas, __ATOMIC_RELAXED);

		while (!__atomic_compare_exchange_n(&sh->cas, &old, old + 1, 1,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		break;
	}
	case K_MUTEX:
		pthread_mutex_lock(&sh->mutex.lock);
		sh->mutex.value++;
		pthread_mutex_unlock(&sh->mutex.lock);
		break;
	case K_SPIN:
		bench_spin_lock(&sh->spin.lock);
		sh->spin.value++;
		bench_spin_unlock(&sh->spin.lock);
		break;
	case K_PERCPU_LOCK:
		/* The CPU may change right after the read: the `lock` keeps the
		 * add exact anyway, which is what rseq saves. */
		__atomic_fetch_add(&sh->percpu[bench_cpu_of(area, nslots)].value, 1,
				   __ATOMIC_RELAXED);
		break;
	case K_TLS:
		/* One writer per slot: a relaxed store is enough for a reader
		 * on another thread to never see a torn value. */
		__atomic_store_n(&tls_slot, tls_slot + 1, __ATOMIC_RELAXED);
		break;
	case K_PCPU_CPU:
	case K_PCPU_MMCID:
		pcpu_counter_add(pc, 1);
		break;
	case K_PCPU_FALLBACK:
		pcpu_counter_add_atomic(pc, 1);
		break;
	}
}

BENCH_INLINE void incr_loop(struct incr_thread *t, const int kind)
{
	struct incr_shared *sh = t->sh;
	const char *area = bench_rseq_area(); /* registers the thread for pcpu */
	unsigned nslots = sh->nslots;
	pcpu_counter_t pc = sh->pc;
	uint64_t n = 0, cpu0;
	unsigned i;

	for (i = 0; i < INCR_WARMUP; i++)
		incr_op(kind, sh, &t->priv, pc, area, nslots);
	pthread_barrier_wait(&sh->start);
	cpu0 = bench_thread_cpu_ns();
	do {
		for (i = 0; i < INCR_BATCH; i++)
			incr_op(kind, sh, &t->priv, pc, area, nslots);
		n += INCR_BATCH;
	} while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED));
	t->cpu_ns = bench_thread_cpu_ns() - cpu0;
	t->end_ns = bench_now_ns();
	t->ops = n;
	t->tls_total = tls_slot;
}

/* One loop per kind, each with its operation inlined: an indirect call per
 * increment would cost more than some of the increments measured. */
#define INCR_LOOP_FN(k) \
	static __attribute__((noinline)) void incr_loop_##k(struct incr_thread *t) { incr_loop(t, k); }
INCR_LOOP_FN(K_PRIVATE)
INCR_LOOP_FN(K_RACY)
INCR_LOOP_FN(K_ATOMIC)
INCR_LOOP_FN(K_CAS)
INCR_LOOP_FN(K_MUTEX)
INCR_LOOP_FN(K_SPIN)
INCR_LOOP_FN(K_PERCPU_LOCK)
INCR_LOOP_FN(K_TLS)
INCR_LOOP_FN(K_PCPU_CPU)
INCR_LOOP_FN(K_PCPU_MMCID)
INCR_LOOP_FN(K_PCPU_FALLBACK)

static void (*const incr_loops[K_N])(struct incr_thread *) = {
	incr_loop_K_PRIVATE, incr_loop_K_RACY, incr_loop_K_ATOMIC, incr_loop_K_CAS,
	incr_loop_K_MUTEX, incr_loop_K_SPIN, incr_loop_K_PERCPU_LOCK, incr_loop_K_TLS,
	incr_loop_K_PCPU_CPU, incr_loop_K_PCPU_MMCID, incr_loop_K_PCPU_FALLBACK,
};

static void *incr_thread_main(void *arg)
{
	struct incr_thread *t = arg;

	incr_loops[t->kind](t);
	return NULL;
}

struct incr_result {
	double ns_per_op; /* CPU ns per increment */
	double mops;      /* increments per microsecond of wall time */
	double lost_pct;  /* updates missing from the final value */
	int exact;
};

static pcpu_zone_t *zone_cpu, *zone_mmcid;

static struct incr_result incr_run(int kind, unsigned nthreads)
{
	struct incr_shared *sh = bench_xmalloc(sizeof(*sh));
	struct incr_thread *t = bench_xmalloc(nthreads * sizeof(*t));
	pthread_t *tid = bench_xmalloc(nthreads * sizeof(*tid));
	struct incr_result res;
	uint64_t start, end = 0, ops = 0, cpu_ns = 0, expected, final = 0;
	unsigned i;

	sh->nslots = pcpu_nslots();
	sh->percpu = bench_xmalloc(sh->nslots * sizeof(*sh->percpu));
	pthread_mutex_init(&sh->mutex.lock, NULL);
	pthread_barrier_init(&sh->start, NULL, nthreads + 1);
	if (kind == K_PCPU_CPU)
		sh->pc = pcpu_counter_alloc_in(zone_cpu, 1);
	else if (kind == K_PCPU_MMCID)
		sh->pc = pcpu_counter_alloc_in(zone_mmcid, 1);
	else if (kind == K_PCPU_FALLBACK)
		sh->pc = pcpu_counter_alloc();
	if ((kind == K_PCPU_CPU || kind == K_PCPU_MMCID || kind == K_PCPU_FALLBACK) && !sh->pc)
		bench_die("pcpu counter allocation failed");

	for (i = 0; i < nthreads; i++) {
		t[i].sh = sh;
		t[i].kind = kind;
		tid[i] = bench_thread_start(incr_thread_main, &t[i], -1);
	}
	pthread_barrier_wait(&sh->start);
	start = bench_now_ns();
	bench_sleep_ns((uint64_t)bench_opt.duration_ms * 1000000u);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		ops += t[i].ops;
		cpu_ns += t[i].cpu_ns;
		if (t[i].end_ns > end)
			end = t[i].end_ns;
	}
	expected = ops + (uint64_t)nthreads * INCR_WARMUP;

	switch (kind) {
	case K_PRIVATE:
		for (i = 0; i < nthreads; i++)
			final += (uint64_t)t[i].priv;
		break;
	case K_RACY: final = (uint64_t)sh->racy; break;
	case K_ATOMIC: final = (uint64_t)sh->atomic; break;
	case K_CAS: final = (uint64_t)sh->cas; break;
	case K_MUTEX: final = (uint64_t)sh->mutex.value; break;
	case K_SPIN: final = (uint64_t)sh->spin.value; break;
	case K_PERCPU_LOCK:
		for (i = 0; i < sh->nslots; i++)
			final += (uint64_t)sh->percpu[i].value;
		break;
	case K_TLS:
		for (i = 0; i < nthreads; i++)
			final += (uint64_t)t[i].tls_total;
		break;
	default:
		final = pcpu_counter_fetch(sh->pc);
		pcpu_counter_free(sh->pc);
		break;
	}

	res.ns_per_op = (double)cpu_ns / (double)ops;
	res.mops = (double)ops / ((double)(end - start) / 1e3);
	res.exact = final == expected;
	res.lost_pct = 100.0 * ((double)expected - (double)final) / (double)expected;

	pthread_barrier_destroy(&sh->start);
	pthread_mutex_destroy(&sh->mutex.lock);
	free(sh->percpu);
	free(sh);
	free(t);
	free(tid);
	return res;
}

/* Median over rounds of a / b, the two measured in the same round: a paired
 * ratio cancels what the rounds do not share. */
static double paired_ratio(const double *a, const double *b, unsigned n)
{
	double *r = malloc(n * sizeof(*r));
	double m;
	unsigned i;

	for (i = 0; i < n; i++)
		r[i] = a[i] / b[i];
	m = bench_median(r, n);
	free(r);
	return m;
}

void bench_incr(void)
{
	const unsigned nt = bench_opt.nthreads, nr = bench_opt.rounds;
	/* res[kind][thread-count index][round] */
	struct incr_result *res = bench_xmalloc(K_N * nt * nr * sizeof(*res));
	double *v = bench_xmalloc(nr * sizeof(double));
	FILE *csv, *raw;
	pcpu_zone_t *zdef;
	int pcpu_kind;
	unsigned r, ti, j, k;
	int t1 = -1, tn = -1, no_rseq = pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK;
	struct tbl tb;
	char buf[96];
#define RES(k, ti, r) res[((k) * nt + (ti)) * nr + (r)]

	zone_cpu = pcpu_zone_create(PCPU_INDEX_CPU);
	zone_mmcid = pcpu_zone_create(PCPU_INDEX_MM_CID);
	zdef = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	if (!zone_cpu || !zone_mmcid || !zdef)
		bench_die("pcpu_zone_create failed");
	pcpu_kind = pcpu_zone_index(zdef) == PCPU_INDEX_CPU ? K_PCPU_CPU : K_PCPU_MMCID;
	pcpu_zone_destroy(zdef);

	printf("## 1. Cost per increment (rseq slides 16-18)\n\n");
	printf("CPU ns per increment per thread (CLOCK_THREAD_CPUTIME_ID summed over threads / "
	       "increments), median (min–max) of %u rounds of %u ms; threads not pinned. "
	       "The mm_cid zone %s mm_cid (%s).\n\n",
	       nr, bench_opt.duration_ms,
	       pcpu_zone_index(zone_mmcid) == PCPU_INDEX_MM_CID ? "uses" : "falls back to cpu_id, no",
	       pcpu_rseq_has_mm_cid() ? "kernel fills mm_cid" : "kernel lacks mm_cid");

	for (r = 0; r < nr; r++) {
		fprintf(stderr, "incr: round %u/%u\n", r + 1, nr);
		for (ti = 0; ti < nt; ti++)
			for (j = 0; j < K_N; j++) {
				k = (j + r) % K_N; /* a different variant leads each round */
				RES(k, ti, r) = incr_run((int)k, bench_opt.threads[ti]);
			}
	}

	csv = bench_csv_open("incr.csv",
			     "variant,threads,ns_per_op_median,ns_per_op_min,ns_per_op_max,"
			     "ns_per_op_q1,ns_per_op_q3,mops_median,lost_pct_median,exact_runs,runs");
	raw = bench_csv_open("incr_rounds.csv", "variant,threads,round,ns_per_op,mops,lost_pct,exact");

	tbl_init(&tb, 3 + nt);
	tbl_cell(&tb, "variant");
	for (ti = 0; ti < nt; ti++)
		tbl_cell(&tb, "%u thr", bench_opt.threads[ti]);
	tbl_headers(&tb, "exact (lost % per thread count)", "slide 17: 1 / 8 thr", NULL);

	for (k = 0; k < K_N; k++) {
		unsigned inexact = 0, runs = 0;
		char lost[128] = "";

		if ((k == K_PCPU_CPU || k == K_PCPU_MMCID) && no_rseq)
			tbl_cell(&tb, "%s — no rseq in this process: fallback", incr_variants[k].name);
		else
			tbl_cell(&tb, "%s", incr_variants[k].name);
		for (ti = 0; ti < nt; ti++) {
			struct bench_stat s;
			double mops, lostmed;
			unsigned ex = 0;

			for (r = 0; r < nr; r++)
				v[r] = RES(k, ti, r).ns_per_op;
			s = bench_stat_of(v, nr);
			tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), s));
			for (r = 0; r < nr; r++)
				v[r] = RES(k, ti, r).mops;
			mops = bench_median(v, nr);
			for (r = 0; r < nr; r++) {
				v[r] = RES(k, ti, r).lost_pct;
				ex += RES(k, ti, r).exact;
				if (raw)
					fprintf(raw, "%s,%u,%u,%.4f,%.3f,%.4f,%d\n", incr_variants[k].csv,
						bench_opt.threads[ti], r, RES(k, ti, r).ns_per_op,
						RES(k, ti, r).mops, RES(k, ti, r).lost_pct,
						RES(k, ti, r).exact);
			}
			lostmed = bench_median(v, nr);
			inexact += nr - ex;
			runs += nr;
			snprintf(lost + strlen(lost), sizeof(lost) - strlen(lost), "%s%.1f",
				 ti ? "/" : "", lostmed);
			if (csv)
				fprintf(csv, "%s,%u,%.4f,%.4f,%.4f,%.4f,%.4f,%.3f,%.4f,%u,%u\n",
					incr_variants[k].csv, bench_opt.threads[ti], s.med, s.min,
					s.max, s.q1, s.q3, mops, lostmed, ex, nr);
		}
		if (k == K_RACY)
			tbl_cell(&tb, "no: lost %s %%", lost);
		else if (inexact == 0)
			tbl_cell(&tb, "yes (%u/%u runs)", runs, runs);
		else
			tbl_cell(&tb, "**NO**: %u of %u runs wrong (lost %s %%)", inexact, runs, lost);
		tbl_cell(&tb, "%s", incr_variants[k].slide17);
	}
	tbl_print(&tb);

	/* Throughput: what the machine as a whole gets done. */
	printf("Aggregate throughput, million increments per second of wall time (median):\n\n");
	tbl_init(&tb, 1 + nt);
	tbl_cell(&tb, "variant");
	for (ti = 0; ti < nt; ti++)
		tbl_cell(&tb, "%u thr", bench_opt.threads[ti]);
	for (k = 0; k < K_N; k++) {
		tbl_cell(&tb, "%s", incr_variants[k].name);
		for (ti = 0; ti < nt; ti++) {
			for (r = 0; r < nr; r++)
				v[r] = RES(k, ti, r).mops;
			tbl_cell(&tb, "%s", bench_fmt_num(buf, sizeof(buf), bench_median(v, nr)));
		}
	}
	tbl_print(&tb);

	printf("Slide 17 rows with no counterpart here (E5-2630 v3, ns, 1 / 8 threads): "
	       "percpu rseq rlock cmpxchg 3.0 / 3.4; percpu rseq spinlock 4.9 / 5.2; "
	       "percpu LOCK; cmpxchg 10.0 / 11.6.\n\n");

	/* Figures for the target summary. */
	for (ti = 0; ti < nt; ti++) {
		if (bench_opt.threads[ti] == 1 && t1 < 0)
			t1 = (int)ti;
		if (bench_opt.threads[ti] == bench_ncpu && tn < 0)
			tn = (int)ti;
	}
	bench_targets.have_incr = 1;
	bench_targets.pcpu_index_name = pcpu_kind == K_PCPU_CPU ? "CPU index" : "mm_cid index";
	bench_targets.pcpu_1t_vs_private = NAN;
	bench_targets.pcpu_ncpu_vs_1t = NAN;
	bench_targets.atomic_ncpu_vs_1t = NAN;
	bench_targets.fallback_vs_rseq_1t = NAN;
	bench_targets.fallback_flat = NAN;
	if (t1 >= 0) {
		double a[64], b[64], fb1;
		unsigned n = nr < 64 ? nr : 64;

		for (r = 0; r < n; r++) {
			a[r] = RES(pcpu_kind, t1, r).ns_per_op;
			b[r] = RES(K_PRIVATE, t1, r).ns_per_op;
		}
		bench_targets.pcpu_1t_vs_private = paired_ratio(a, b, n);
		for (r = 0; r < n; r++)
			b[r] = RES(K_PCPU_FALLBACK, t1, r).ns_per_op;
		bench_targets.fallback_vs_rseq_1t = paired_ratio(b, a, n);
		fb1 = bench_median(b, n);
		bench_targets.fallback_flat = 0;
		for (ti = 0; ti < nt; ti++) {
			double m;

			for (r = 0; r < n; r++)
				v[r] = RES(K_PCPU_FALLBACK, ti, r).ns_per_op;
			m = bench_median(v, nr) / fb1;
			if (m > bench_targets.fallback_flat) {
				bench_targets.fallback_flat = m;
				bench_targets.fallback_flat_threads = bench_opt.threads[ti];
			}
		}
		if (tn >= 0) {
			for (r = 0; r < n; r++) {
				a[r] = RES(pcpu_kind, tn, r).ns_per_op;
				b[r] = RES(pcpu_kind, t1, r).ns_per_op;
			}
			bench_targets.pcpu_ncpu_vs_1t = paired_ratio(a, b, n);
			for (r = 0; r < n; r++) {
				a[r] = RES(K_ATOMIC, tn, r).ns_per_op;
				b[r] = RES(K_ATOMIC, t1, r).ns_per_op;
			}
			bench_targets.atomic_ncpu_vs_1t = paired_ratio(a, b, n);
		}
	}

	if (csv)
		fclose(csv);
	if (raw)
		fclose(raw);
	pcpu_zone_destroy(zone_cpu);
	pcpu_zone_destroy(zone_mmcid);
	free(res);
	free(v);
#undef RES
}

/* ---- the cost of learning the CPU number (slides 20-21) -------------------- */

enum getcpu_kind {
	G_EMPTY,   /* the loop alone */
	G_RSEQ,    /* a load of cpu_id from the rseq area */
	G_SCHED,   /* glibc sched_getcpu() */
	G_GETCPU,  /* glibc getcpu(): the vDSO */
	G_SYSCALL, /* syscall(SYS_getcpu) */
	G_RDPID,   /* x86 rdpid instruction (TSC_AUX = node << 12 | cpu) */
	G_LSL,     /* x86 lsl of the per-CPU GDT segment, as the vDSO did */
	G_N
};

/* slide21: the slide's x86-64 figure for the same method, ns (NAN: none). */
static const struct {
	const char *name, *csv;
	double slide21;
	const char *slide21_note;
} getcpu_variants[G_N] = {
	[G_EMPTY] = { "empty loop (baseline)", "empty", 0.8, "" },
	[G_RSEQ] = { "rseq area cpu_id load", "rseq", 0.8, "" },
	[G_SCHED] = { "sched_getcpu() (glibc)", "sched_getcpu", 16.6, " (glibc 2.19 getcpu: vDSO)" },
	[G_GETCPU] = { "getcpu() (glibc → vDSO)", "getcpu_vdso", 16.6, " (glibc 2.19 getcpu)" },
	[G_SYSCALL] = { "syscall(SYS_getcpu)", "syscall", 53.9, "" },
	[G_RDPID] = { "rdpid instruction", "rdpid", NAN, "" },
	[G_LSL] = { "lsl instruction", "lsl", 13.0, " (\"lsl\" inline assembly)" },
};

static int have_rdpid(void)
{
#if defined(__x86_64__)
	unsigned a = 7, b, c = 0, d;

	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
	return (c >> 22) & 1;
#else
	return 0;
#endif
}

BENCH_INLINE unsigned getcpu_once(const int kind, const char *area)
{
	unsigned cpu = 0, node;

	switch (kind) {
	case G_EMPTY:
		__asm__ volatile("" ::: "memory");
		break;
	case G_RSEQ:
		cpu = (unsigned)*(volatile const int32_t *)(area + PCPU__RSEQ_OFF_CPU_ID);
		break;
	case G_SCHED:
		cpu = (unsigned)sched_getcpu();
		break;
	case G_GETCPU:
		getcpu(&cpu, &node);
		break;
	case G_SYSCALL:
		syscall(SYS_getcpu, &cpu, &node, NULL);
		break;
#if defined(__x86_64__)
	case G_RDPID: {
		uint64_t aux;

		__asm__ volatile("rdpid %0" : "=r"(aux));
		cpu = (unsigned)(aux & 0xfff);
		break;
	}
	case G_LSL: {
		/* Linux keeps cpu | node << 12 in the limit of GDT entry 15
		 * (selector 15 * 8 + 3), for this very purpose. */
		unsigned long p;

		__asm__ volatile("lsl %1, %0" : "=r"(p) : "r"(15ul * 8 + 3));
		cpu = (unsigned)(p & 0xfff);
		break;
	}
#endif
	}
	return cpu;
}

BENCH_INLINE double getcpu_loop(const int kind, const char *area, uint64_t n)
{
	uint64_t t0, t1, i;
	unsigned sink = 0;

	t0 = bench_ticks();
	for (i = 0; i < n; i++)
		sink += getcpu_once(kind, area);
	t1 = bench_ticks();
	__asm__ volatile("" : : "r"(sink));
	return (double)(t1 - t0) / bench_tsc_ghz / (double)n;
}

#define GETCPU_LOOP_FN(k) \
	static __attribute__((noinline)) double getcpu_loop_##k(const char *a, uint64_t n) \
	{ return getcpu_loop(k, a, n); }
GETCPU_LOOP_FN(G_EMPTY)
GETCPU_LOOP_FN(G_RSEQ)
GETCPU_LOOP_FN(G_SCHED)
GETCPU_LOOP_FN(G_GETCPU)
GETCPU_LOOP_FN(G_SYSCALL)
GETCPU_LOOP_FN(G_RDPID)
GETCPU_LOOP_FN(G_LSL)

static double (*const getcpu_loops[G_N])(const char *, uint64_t) = {
	getcpu_loop_G_EMPTY, getcpu_loop_G_RSEQ, getcpu_loop_G_SCHED, getcpu_loop_G_GETCPU,
	getcpu_loop_G_SYSCALL, getcpu_loop_G_RDPID, getcpu_loop_G_LSL,
};

/* Does getter `kind` name the CPU the rseq area names? Sampled where the
 * thread did not move in between (the area read before and after agree). */
static int getcpu_agrees(int kind, const char *area)
{
	int tries, agreed = 0, checked = 0;

	for (tries = 0; tries < 1000 && checked < 100; tries++) {
		unsigned before = getcpu_once(G_RSEQ, area);
		unsigned got = getcpu_once(kind, area);
		unsigned after = getcpu_once(G_RSEQ, area);

		if (before != after)
			continue;
		checked++;
		agreed += got == before;
	}
	return checked > 0 && agreed == checked;
}

void bench_getcpu(void)
{
	const unsigned nr = bench_opt.rounds;
	const char *area = bench_rseq_area();
	double *ns = bench_xmalloc(G_N * nr * sizeof(double));
	int usable[G_N], agrees[G_N];
	unsigned r, j, k;
	struct tbl tb;
	FILE *csv;
	double empty;
	char buf[96];

	printf("## 1b. Cost of learning the CPU number (rseq slides 20-21)\n\n");
	for (k = 0; k < G_N; k++)
		usable[k] = 1;
	usable[G_RSEQ] = area != NULL;
	usable[G_RDPID] = have_rdpid();
#if !defined(__x86_64__)
	usable[G_LSL] = 0;
#endif
	if (!area) {
		printf("(this thread has no rseq area: pcpu is in fallback mode; rseq rows skipped)\n\n");
		usable[G_RSEQ] = 0;
	}
	for (k = 0; k < G_N; k++)
		agrees[k] = usable[k] && (k == G_EMPTY || !area || getcpu_agrees((int)k, area));

	for (r = 0; r < nr; r++)
		for (j = 0; j < G_N; j++) {
			uint64_t n = bench_opt.getcpu_calls;

			k = (j + r) % G_N;
			if (!usable[k])
				continue;
			if (k == G_SYSCALL) /* a real kernel entry: ~100x the rest */
				n /= 32;
			ns[k * nr + r] = getcpu_loops[k](area, n);
		}

	printf("ns per call from a single thread (TSC, %" PRIu64 " calls per round, syscall "
	       "1/32 of that), median (min–max) of %u rounds; \"net\" subtracts the empty loop.\n\n",
	       bench_opt.getcpu_calls, nr);
	csv = bench_csv_open("getcpu.csv",
			     "method,ns_median,ns_min,ns_max,ns_net,agrees_with_rseq,slide21_ns");
	empty = bench_median(&ns[G_EMPTY * nr], nr);
	tbl_init(&tb, 5);
	tbl_headers(&tb, "method", "ns/call", "net ns", "agrees with rseq cpu_id",
		    "slide 21 (E5-2630 v3), ns", NULL);
	for (k = 0; k < G_N; k++) {
		struct bench_stat s;

		if (!usable[k])
			continue;
		s = bench_stat_of(&ns[k * nr], nr);
		tbl_cell(&tb, "%s", getcpu_variants[k].name);
		tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), s));
		tbl_cell(&tb, "%s", k == G_EMPTY ? "—" : bench_fmt_num(buf, sizeof(buf), s.med - empty));
		tbl_cell(&tb, "%s", k == G_EMPTY ? "—" : agrees[k] ? "yes" : "**NO**");
		if (isnan(getcpu_variants[k].slide21))
			tbl_cell(&tb, "—");
		else
			tbl_cell(&tb, "%.1f%s", getcpu_variants[k].slide21,
				 getcpu_variants[k].slide21_note);
		if (csv)
			fprintf(csv, "%s,%.4f,%.4f,%.4f,%.4f,%d,%.1f\n", getcpu_variants[k].csv, s.med,
				s.min, s.max, s.med - empty, agrees[k], getcpu_variants[k].slide21);
	}
	tbl_print(&tb);
	printf("Slide 21 also lists \"Read using gs segment selector: 0.8\" and \"rseq cpu_id "
	       "(lazy register): 0.8\". glibc >= 2.35 answers sched_getcpu() from the rseq area.\n\n");
	if (csv)
		fclose(csv);
	free(ns);
}
