/* SPDX-License-Identifier: MIT */
/*
 * pcpu_bench_ref: per-CPU reference counts and the big-reader lock
 * (pcpu/ref.h, issue 15) beside what they replace, in one run.
 *
 *  1. Cost of one operation, 1 .. 4x ncpu threads, every thread doing it
 *     on ONE shared object:
 *       pcpu_counter_add                     the unit of the targets
 *       pcpu_ref get + put                   target <= 2x an add, flat
 *       pcpu_ref tryget + put                target <= 1.2x liburcu (issue 29)
 *       pcpu_ref get + put after the kill    (atomic mode: one shared count)
 *       pcpu_rwlock read lock + unlock       target <= 3x an add, flat, and
 *                                            <= 1.0x liburcu (issue 29)
 *       the same with the read side of before issue 29 (per-CPU words),
 *       as programs built with the older header still run it
 *       pthread_rwlock rdlock + unlock
 *       shared atomic refcount, get + put    (lock xadd twice)
 *       liburcu (memb flavour) read lock + unlock, inlined (_LGPL_SOURCE:
 *       pcpu is MIT, which liburcu's README names as the condition)
 *     Unit: ns of CPU time per operation (a pair counts as one operation),
 *     summed over threads and divided by the operations done
 *     (CLOCK_THREAD_CPUTIME_ID), as bench/incr.c: with more threads than
 *     CPUs, a scalable operation stays flat. Ratios are medians of the
 *     per-round ratios to pcpu_counter_add at the same thread count, and
 *     in a second table to liburcu's read side.
 *  2. Latency (µs): pcpu_ref_kill -> release() with no outstanding
 *     reference; pcpu_rwlock_wrlock with idle readers (threads that have
 *     read-locked before and now sleep), and with busy ones for contrast;
 *     pthread_rwlock_wrlock beside them.
 *
 * Method as in bench/: all variants run in the same process, interleaved
 * (round r runs each variant once, starting from a different one), medians
 * over rounds with min and max; every run checks its final count.
 * Options: --rounds N (5), --ms M per timed run (100), --threads a,b,c
 * (default 1, ncpu, 2 ncpu, 4 ncpu), --latency N samples (500), --quick.
 */
#define _LGPL_SOURCE 1 /* liburcu's read side inlined, as it is meant to be used */
#include <urcu/urcu-memb.h>

#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ALIGNED __attribute__((aligned(64)))
#define MAX_THREADS 256
#define MAX_LIST 8
#define MAX_ROUNDS 64
#define BATCH 32
#define WARMUP 4096

enum kind { K_ADD, K_REF, K_REF_TRY, K_REF_KILLED, K_RWLOCK, K_RWLOCK_WORDS, K_PTHREAD, K_ATOMIC,
	    K_URCU, K_N };

static const char *const names[K_N] = {
	[K_ADD] = "pcpu_counter_add (the unit)",
	[K_REF] = "pcpu_ref get + put",
	[K_REF_TRY] = "pcpu_ref tryget + put",
	[K_REF_KILLED] = "pcpu_ref get + put, after kill (atomic)",
	[K_RWLOCK] = "pcpu_rwlock read lock + unlock",
	[K_RWLOCK_WORDS] = "pcpu_rwlock, per-CPU words (before 29)",
	[K_PTHREAD] = "pthread_rwlock rdlock + unlock",
	[K_ATOMIC] = "shared atomic refcount get + put",
	[K_URCU] = "liburcu-memb read lock + unlock",
};

static struct {
	int stop ALIGNED;
	int64_t atomic_ref ALIGNED;
	pthread_rwlock_t prw ALIGNED;
	/* read-only during a run: */
	pcpu_counter_t counter ALIGNED;
	pcpu_ref_t *ref, *killed_ref;
	pcpu_rwlock_t *rw;
	pthread_barrier_t start;
} sh;

struct thr {
	int kind;
	uint64_t ops, cpu_ns;
} ALIGNED;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "pcpu_bench_ref: %s\n", what);
	exit(1);
}

/* The handles a loop uses, copied into locals first (as bench/incr.c does):
 * in a program the handle sits in a register, and a global would be
 * reloaded after every section (the sections clobber "memory"). */
struct handles {
	pcpu_counter_t counter;
	pcpu_ref_t *ref, *killed_ref;
	pcpu_rwlock_t *rw;
};

/* One operation of `kind` (a constant where inlined). */
static inline __attribute__((always_inline)) void op(const int kind, const struct handles *h)
{
	switch (kind) {
	case K_ADD:
		pcpu_counter_add(h->counter, 1);
		break;
	case K_REF:
		pcpu_ref_get(h->ref);
		pcpu_ref_put(h->ref);
		break;
	case K_REF_TRY:
		if (!pcpu_ref_tryget(h->ref))
			die("pcpu_ref_tryget failed on a live ref");
		pcpu_ref_put(h->ref);
		break;
	case K_REF_KILLED:
		pcpu_ref_get(h->killed_ref);
		pcpu_ref_put(h->killed_ref);
		break;
	case K_RWLOCK:
		pcpu_rwlock_rdlock(h->rw);
		pcpu_rwlock_rdunlock(h->rw);
		break;
	case K_RWLOCK_WORDS:
		/* The read side the header had before issue 29 (one rseq
		 * section each on the thread's slot of the handle), as
		 * programs built then still run it: the library's writers
		 * count both. */
		if (PCPU_UNLIKELY(pcpu__sync_add_if_zero(&h->rw->pcpu__s, 1) != 0))
			pcpu__rwlock_rdlock_slow(h->rw);
		if (PCPU_UNLIKELY(pcpu__sync_add_if_zero(&h->rw->pcpu__s, -1) != 0))
			pcpu__rwlock_rdunlock_slow(h->rw);
		break;
	case K_PTHREAD:
		pthread_rwlock_rdlock(&sh.prw);
		pthread_rwlock_unlock(&sh.prw);
		break;
	case K_ATOMIC:
		__atomic_fetch_add(&sh.atomic_ref, 1, __ATOMIC_RELAXED);
		if (__atomic_sub_fetch(&sh.atomic_ref, 1, __ATOMIC_ACQ_REL) == -1)
			die("atomic refcount below zero"); /* a put's zero test */
		break;
	case K_URCU:
		urcu_memb_read_lock();
		urcu_memb_read_unlock();
		break;
	}
}

static inline __attribute__((always_inline)) void loop(struct thr *t, const int kind)
{
	const struct handles h = {sh.counter, sh.ref, sh.killed_ref, sh.rw};
	uint64_t n = 0, c0;
	unsigned i;

	if (kind == K_URCU)
		urcu_memb_register_thread();
	for (i = 0; i < WARMUP; i++)
		op(kind, &h);
	pthread_barrier_wait(&sh.start);
	c0 = thread_cpu_ns();
	do {
		for (i = 0; i < BATCH; i++)
			op(kind, &h);
		n += BATCH;
	} while (!__atomic_load_n(&sh.stop, __ATOMIC_RELAXED));
	t->cpu_ns = thread_cpu_ns() - c0;
	t->ops = n + WARMUP; /* the counter check counts the warm-up too */
	if (kind == K_URCU)
		urcu_memb_unregister_thread();
}

#define LOOP_FN(k) \
	static __attribute__((noinline)) void loop_##k(struct thr *t) { loop(t, k); }
LOOP_FN(K_ADD)
LOOP_FN(K_REF)
LOOP_FN(K_REF_TRY)
LOOP_FN(K_REF_KILLED)
LOOP_FN(K_RWLOCK)
LOOP_FN(K_RWLOCK_WORDS)
LOOP_FN(K_PTHREAD)
LOOP_FN(K_ATOMIC)
LOOP_FN(K_URCU)
static void (*const loops[K_N])(struct thr *) = {
	loop_K_ADD, loop_K_REF, loop_K_REF_TRY, loop_K_REF_KILLED, loop_K_RWLOCK,
	loop_K_RWLOCK_WORDS, loop_K_PTHREAD, loop_K_ATOMIC, loop_K_URCU,
};

static void *thread_main(void *arg)
{
	struct thr *t = arg;

	loops[t->kind](t);
	return NULL;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* One timed run: `n` threads doing `kind` for `ms`; returns CPU ns per op. */
static double run(int kind, unsigned n, unsigned ms)
{
	static struct thr t[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	uint64_t ops = 0, cpu = 0, before = pcpu_counter_fetch(sh.counter);

	__atomic_store_n(&sh.stop, 0, __ATOMIC_RELAXED);
	if (pthread_barrier_init(&sh.start, NULL, n + 1) != 0)
		die("pthread_barrier_init");
	for (unsigned i = 0; i < n; i++) {
		t[i].kind = kind;
		if (pthread_create(&tid[i], NULL, thread_main, &t[i]) != 0)
			die("pthread_create");
	}
	pthread_barrier_wait(&sh.start);
	sleep_ns((uint64_t)ms * 1000000u);
	__atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(tid[i], NULL);
		ops += t[i].ops;
		cpu += t[i].cpu_ns;
	}
	pthread_barrier_destroy(&sh.start);
	/* Every run checks what it did. */
	if (kind == K_ADD && pcpu_counter_fetch(sh.counter) - before != ops)
		die("counter total wrong");
	if ((kind == K_REF || kind == K_REF_TRY) && pcpu_ref_read(sh.ref) != 1)
		die("pcpu_ref count wrong after the run");
	if (kind == K_REF_KILLED && pcpu_ref_read(sh.killed_ref) != 1)
		die("killed pcpu_ref count wrong after the run");
	if (kind == K_ATOMIC && sh.atomic_ref != 0)
		die("atomic refcount wrong after the run");
	if (kind == K_RWLOCK || kind == K_RWLOCK_WORDS) {
		if (!pcpu_rwlock_trywrlock(sh.rw))
			die("pcpu_rwlock still read-locked after the run");
		pcpu_rwlock_wrunlock(sh.rw);
	}
	return (double)cpu / (double)(ops - (uint64_t)n * WARMUP);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct stat {
	double med, min, max, p90;
};

static struct stat stat_of(const double *v, unsigned n)
{
	double s[4096];
	struct stat r;

	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_double);
	r.min = s[0];
	r.max = s[n - 1];
	r.med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	r.p90 = s[(unsigned)((n - 1) * 0.9)];
	return r;
}

/* ---- latencies ---------------------------------------------------------------- */

static uint64_t released_at;

static void on_release(void *arg)
{
	(void)arg;
	released_at = now_ns();
}

static void noop_release(void *arg)
{
	(void)arg;
}

static int lat_stop, lat_mode; /* 0: readers idle (sleep), 1: busy */
static pthread_barrier_t lat_ready;

static void *lat_reader(void *arg)
{
	pcpu_rwlock_t *rw = arg;

	/* Read-lock once (registers rseq, touches the slot), then idle or
	 * keep reading. */
	pcpu_rwlock_rdlock(rw);
	pcpu_rwlock_rdunlock(rw);
	pthread_rwlock_rdlock(&sh.prw);
	pthread_rwlock_unlock(&sh.prw);
	pthread_barrier_wait(&lat_ready);
	while (!__atomic_load_n(&lat_stop, __ATOMIC_RELAXED)) {
		if (lat_mode) {
			pcpu_rwlock_rdlock(rw);
			pcpu_rwlock_rdunlock(rw);
		} else {
			sleep_ns(1000000);
		}
	}
	return NULL;
}

static void print_lat(const char *what, double *v, unsigned n)
{
	struct stat s = stat_of(v, n);

	printf("| %-58s | %8.2f | %8.2f | %8.2f | %8.2f |\n", what, s.med, s.p90, s.min, s.max);
}

static void latencies(unsigned samples, unsigned nreaders)
{
	static double v[4096];
	pthread_t tid[MAX_THREADS];
	unsigned i;

	if (samples > 4096)
		samples = 4096;
	printf("\n### Latency (µs), %u samples: median, 90th percentile, min, max\n\n", samples);
	printf("| %-58s | %8s | %8s | %8s | %8s |\n", "what", "median", "p90", "min", "max");
	printf("|%s|----------|----------|----------|----------|\n",
	       "------------------------------------------------------------");

	/* kill -> release, no outstanding reference (release runs inside
	 * kill): membarrier + one read per slot + one atomic. */
	for (i = 0; i < samples; i++) {
		pcpu_ref_t *r = pcpu_ref_create(on_release, NULL);
		uint64_t t0;

		if (!r)
			die("pcpu_ref_create");
		pcpu_ref_get(r);
		pcpu_ref_put(r);
		t0 = now_ns();
		if (pcpu_ref_kill(r) != 0)
			die("pcpu_ref_kill");
		v[i] = (double)(released_at - t0) / 1e3;
		pcpu_ref_destroy(r);
	}
	print_lat("pcpu_ref_kill -> release(), no reference held", v, samples);

	for (lat_mode = 0; lat_mode < 2; lat_mode++) {
		pcpu_rwlock_t *rw = pcpu_rwlock_create();
		unsigned nr = lat_mode ? nreaders : nreaders;
		char what[128];

		if (!rw)
			die("pcpu_rwlock_create");
		__atomic_store_n(&lat_stop, 0, __ATOMIC_RELAXED);
		pthread_barrier_init(&lat_ready, NULL, nr + 1);
		for (unsigned k = 0; k < nr; k++)
			if (pthread_create(&tid[k], NULL, lat_reader, rw) != 0)
				die("pthread_create");
		pthread_barrier_wait(&lat_ready);
		sleep_ns(5000000); /* let them go to sleep (or get going) */
		for (i = 0; i < samples; i++) {
			uint64_t t0 = now_ns();

			if (pcpu_rwlock_wrlock(rw) != 0)
				die("pcpu_rwlock_wrlock");
			v[i] = (double)(now_ns() - t0) / 1e3;
			pcpu_rwlock_wrunlock(rw);
			if (lat_mode)
				sleep_ns(20000); /* let readers run between writes */
		}
		snprintf(what, sizeof(what), "pcpu_rwlock_wrlock, %u %s readers", nr,
			 lat_mode ? "busy" : "idle");
		print_lat(what, v, samples);
		if (!lat_mode) {
			for (i = 0; i < samples; i++) {
				uint64_t t0 = now_ns();

				pthread_rwlock_wrlock(&sh.prw);
				v[i] = (double)(now_ns() - t0) / 1e3;
				pthread_rwlock_unlock(&sh.prw);
			}
			snprintf(what, sizeof(what), "pthread_rwlock_wrlock, %u idle readers", nr);
			print_lat(what, v, samples);
		}
		__atomic_store_n(&lat_stop, 1, __ATOMIC_RELAXED);
		for (unsigned k = 0; k < nr; k++)
			pthread_join(tid[k], NULL);
		pthread_barrier_destroy(&lat_ready);
		if (pcpu_rwlock_destroy(rw) != 0)
			die("pcpu_rwlock_destroy");
	}
}

/* Prints the median of the per-round ratios to liburcu's read side at each
 * thread count (ns: every run's ns per operation), and issue 29's targets. */
static void print_vs_urcu(double (*ns)[MAX_LIST][MAX_ROUNDS], const unsigned *threads,
			  unsigned nthr, unsigned rounds)
{
	static const int vs[] = { K_RWLOCK, K_RWLOCK_WORDS, K_REF_TRY, K_REF };
	static double vs_urcu[K_N][MAX_LIST][MAX_ROUNDS];
	double worst[4] = { 0, 0, 0, 0 };

	for (unsigned r = 0; r < rounds; r++)
		for (unsigned j = 0; j < nthr; j++)
			for (unsigned k = 0; k < K_N; k++)
				vs_urcu[k][j][r] = ns[k][j][r] / ns[K_URCU][j][r];

	printf("\n### Per-round ratio to liburcu-memb read lock + unlock, median (min-max)\n\n");
	printf("| %-41s |", "operation");
	for (unsigned j = 0; j < nthr; j++)
		printf(" %3u thread%s %10s |", threads[j], threads[j] > 1 ? "s" : " ", "");
	printf("\n|-------------------------------------------|");
	for (unsigned j = 0; j < nthr; j++)
		printf("---------------------------|");
	printf("\n");
	for (unsigned v = 0; v < 4; v++) {
		printf("| %-41s |", names[vs[v]]);
		for (unsigned j = 0; j < nthr; j++) {
			struct stat q = stat_of(vs_urcu[vs[v]][j], rounds);
			char cell[64];

			snprintf(cell, sizeof(cell), "%.2fx (%.2f-%.2f)", q.med, q.min, q.max);
			printf(" %-25s |", cell);
			if (q.med > worst[v])
				worst[v] = q.med;
		}
		printf("\n");
	}
	printf("\nTargets against liburcu-memb (worst thread count, issue 29):\n");
	printf("- pcpu_rwlock read lock+unlock: %.2fx (target <= 1.0x): %s; the per-CPU words "
	       "it replaced: %.2fx\n", worst[0], worst[0] <= 1.0 ? "met" : "MISSED", worst[1]);
	printf("- pcpu_ref tryget+put: %.2fx (target <= 1.2x, stretch 1.0x): %s; get+put %.2fx\n",
	       worst[2], worst[2] <= 1.2 ? "met" : "MISSED", worst[3]);
}

/* Releases what main() created for the runs. */
static void destroy_shared(void)
{
	pcpu_ref_put(sh.killed_ref); /* releases it */
	pcpu_ref_destroy(sh.killed_ref);
	if (pcpu_ref_kill(sh.ref) != 0)
		die("pcpu_ref_kill");
	pcpu_ref_destroy(sh.ref);
	pcpu_rwlock_destroy(sh.rw);
}

/* ---- main ------------------------------------------------------------------------ */

static unsigned parse_list(const char *s, unsigned *out)
{
	unsigned n = 0;

	while (*s && n < MAX_LIST) {
		out[n++] = (unsigned)strtoul(s, (char **)&s, 10);
		if (*s == ',')
			s++;
	}
	return n;
}

int main(int argc, char **argv)
{
	unsigned ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	unsigned rounds = 5, ms = 100, samples = 500, nthr = 0, threads[MAX_LIST];
	static double ns[K_N][MAX_LIST][MAX_ROUNDS], ratio[K_N][MAX_LIST][MAX_ROUNDS];
	double worst_ref = 0, worst_rw = 0, flat_ref = 0, flat_rw = 0;
	uint64_t t_start = now_ns();

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ms") && i + 1 < argc)
			ms = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nthr = parse_list(argv[++i], threads);
		else if (!strcmp(argv[i], "--latency") && i + 1 < argc)
			samples = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--quick")) {
			rounds = 3;
			ms = 30;
			samples = 100;
		} else {
			fprintf(stderr, "usage: %s [--rounds N] [--ms M] [--threads a,b,c] "
					"[--latency N] [--quick]\n", argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || samples < 1)
		die("--rounds 1..64, --latency >= 1");
	if (!nthr) {
		threads[nthr++] = 1;
		if (ncpu > 1)
			threads[nthr++] = ncpu;
		threads[nthr++] = 2 * ncpu;
		threads[nthr++] = 4 * ncpu;
	}
	for (unsigned j = 0; j < nthr; j++)
		if (threads[j] < 1 || threads[j] > MAX_THREADS)
			die("thread counts 1..256");

	sh.counter = pcpu_counter_alloc();
	sh.ref = pcpu_ref_create(noop_release, NULL);
	sh.killed_ref = pcpu_ref_create(noop_release, NULL);
	sh.rw = pcpu_rwlock_create();
	if (!sh.counter || !sh.ref || !sh.killed_ref || !sh.rw)
		die("allocation failed");
	pcpu_ref_get(sh.killed_ref); /* keeps it from releasing: */
	if (pcpu_ref_kill(sh.killed_ref) != 0)
		die("pcpu_ref_kill");
	pthread_rwlock_init(&sh.prw, NULL);

	printf("## pcpu_bench_ref: refs and the big-reader lock (pcpu/ref.h)\n\n");
	printf("%u CPUs online, %u slots, rseq mode %s, index %s; refs and locks %s",
	       ncpu, pcpu_nslots(), pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       pcpu_zone_index(NULL) == PCPU_INDEX_CPU ? "cpu" : "mm_cid",
	       pcpu_ref_is_percpu(sh.ref) ? "per-CPU" : "ATOMIC");
	if (pcpu_sync_percpu_error())
		printf(" (%s)", strerror(pcpu_sync_percpu_error()));
	printf("\n%u rounds x %u ms per run, variants interleaved.\n\n", rounds, ms);

	for (unsigned r = 0; r < rounds; r++)
		for (unsigned j = 0; j < nthr; j++)
			for (unsigned k0 = 0; k0 < K_N; k0++) {
				unsigned k = (k0 + r + j) % K_N;

				ns[k][j][r] = run((int)k, threads[j], ms);
			}
	for (unsigned r = 0; r < rounds; r++)
		for (unsigned j = 0; j < nthr; j++)
			for (unsigned k = 0; k < K_N; k++)
				ratio[k][j][r] = ns[k][j][r] / ns[K_ADD][j][r];

	printf("### ns of CPU time per operation, median (min-max) over rounds; "
	       "[x] = median ratio to pcpu_counter_add\n\n");
	printf("| %-41s |", "operation");
	for (unsigned j = 0; j < nthr; j++)
		printf(" %3u thread%s %12s |", threads[j], threads[j] > 1 ? "s" : " ", "");
	printf(" %u/%u thr |\n|-------------------------------------------|", threads[nthr - 1], threads[0]);
	for (unsigned j = 0; j < nthr; j++)
		printf("-----------------------------|");
	printf("----------|\n");
	for (unsigned k = 0; k < K_N; k++) {
		struct stat first = stat_of(ns[k][0], rounds);

		printf("| %-41s |", names[k]);
		for (unsigned j = 0; j < nthr; j++) {
			struct stat s = stat_of(ns[k][j], rounds);
			struct stat q = stat_of(ratio[k][j], rounds);
			char cell[64];

			snprintf(cell, sizeof(cell), "%.2f (%.2f-%.2f) [%.2fx]", s.med, s.min, s.max, q.med);
			printf(" %-27s |", cell);
			if (k == K_REF && q.med > worst_ref)
				worst_ref = q.med;
			if (k == K_RWLOCK && q.med > worst_rw)
				worst_rw = q.med;
			if (k == K_REF && s.med / first.med > flat_ref)
				flat_ref = s.med / first.med;
			if (k == K_RWLOCK && s.med / first.med > flat_rw)
				flat_rw = s.med / first.med;
		}
		printf(" %8.2f |\n", stat_of(ns[k][nthr - 1], rounds).med / first.med);
	}
	printf("\nTargets (worst thread count):\n");
	printf("- pcpu_ref get+put vs one pcpu_counter_add: %.2fx (target <= 2x): %s\n", worst_ref,
	       worst_ref <= 2.0 ? "met" : "MISSED");
	printf("- pcpu_rwlock read lock+unlock vs one add:  %.2fx (target <= 3x): %s\n", worst_rw,
	       worst_rw <= 3.0 ? "met" : "MISSED");
	printf("- flat: worst ns(T)/ns(1): get+put %.2f, read lock+unlock %.2f\n", flat_ref, flat_rw);

	print_vs_urcu(ns, threads, nthr, rounds);

	latencies(samples, 2 * ncpu);
	printf("\nTotal %.1f s.\n", (double)(now_ns() - t_start) / 1e9);

	destroy_shared();
	return 0;
}
