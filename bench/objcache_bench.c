/* SPDX-License-Identifier: MIT */
/*
 * pcpu_bench_objcache: per-CPU object caches (pcpu/objcache.h, issue 16)
 * beside what they replace, in one run.
 *
 *  1. Cost of a get + put pair of a 64-byte object, 1 .. 4x ncpu threads:
 *       pcpu_objcache get + put
 *       glibc malloc + free of the same size (its tcache: the target's unit)
 *       a free list under one pthread mutex
 *       a lock-free stack (Treiber) with an ABA tag (64-bit CAS on
 *         index | tag)
 *       a per-thread cache of 64 objects with a global list under a mutex,
 *         moving 32 at a time (tcache-like)
 *     Unit: ns of CPU time per pair (CLOCK_THREAD_CPUTIME_ID, summed over
 *     threads), so with more threads than CPUs a scalable variant stays
 *     flat; ratios to malloc + free at the same thread count, medians over
 *     rounds (variants interleaved: round r starts from variant r).
 *  2. Objects cached with 64 threads on the machine's CPUs: each thread
 *     gets 32 objects, waits until all hold theirs, puts them back, and
 *     stays alive; then the objects
 *     held in per-thread or per-slot caches (reclaimable only by their
 *     owner, or by a drain) and in the shared list or depot.
 *  3. Data plane: 2 workers pinned to 2 CPUs; per packet a worker gets a
 *     buffer, spends ~1000 TSC cycles on it, and frees it itself or (half
 *     the time) hands it to the other worker through a ring, which frees
 *     it (unless that worker's ring is full: then it frees it itself).
 *     Cycles (TSC) per get + put pair, measured around the calls, buffers
 *     handed over, and the cache's stray count; malloc + free beside it.
 *
 * Options: --rounds N (5), --ms M per timed run (100), --quick.
 */
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define ALIGNED __attribute__((aligned(64)))
#define OBJ_SIZE 64
#define MAX_THREADS 256
#define MAX_ROUNDS 64
#define BATCH 32
#define NODES (1u << 20)
#define TC_CAP 64

enum kind { K_OBJCACHE, K_MALLOC, K_MUTEX, K_LFSTACK, K_TCACHE, K_N };

static const char *const names[K_N] = {
	[K_OBJCACHE] = "pcpu_objcache get + put",
	[K_MALLOC] = "glibc malloc + free (the unit)",
	[K_MUTEX] = "free list under a mutex",
	[K_LFSTACK] = "lock-free stack, ABA tag",
	[K_TCACHE] = "per-thread cache + global list",
};

struct node {
	struct node *next;
	uint32_t next_idx;
	char pad[OBJ_SIZE - sizeof(struct node *) - sizeof(uint32_t)];
};

static struct {
	int stop ALIGNED;
	pthread_mutex_t list_lock ALIGNED;
	struct node *list; /* the mutex-protected free list */
	size_t list_n;
	uint64_t lf_head ALIGNED; /* index + 1 (0: empty) | tag << 32 */
	pthread_mutex_t tc_lock ALIGNED;
	struct node *tc_global;
	size_t tc_global_n;
	pcpu_objcache_t *cache ALIGNED;
	struct node *nodes; /* the lock-free stack's nodes, by index */
	pthread_barrier_t start;
} sh;

/* The tcache-like variant's per-thread part. */
static __thread struct node *tc_local[TC_CAP];
static __thread unsigned tc_n;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "pcpu_bench_objcache: %s\n", what);
	exit(1);
}

/* ---- the comparisons ----------------------------------------------------- */

static void *list_get(void)
{
	struct node *n;

	pthread_mutex_lock(&sh.list_lock);
	n = sh.list;
	if (n)
		sh.list = n->next;
	else
		n = malloc(OBJ_SIZE);
	pthread_mutex_unlock(&sh.list_lock);
	return n;
}

static void list_put(void *p)
{
	struct node *n = p;

	pthread_mutex_lock(&sh.list_lock);
	n->next = sh.list;
	sh.list = n;
	pthread_mutex_unlock(&sh.list_lock);
}

static void *lf_get(void)
{
	uint64_t old = __atomic_load_n(&sh.lf_head, __ATOMIC_ACQUIRE), nw;
	uint32_t idx;

	do {
		idx = (uint32_t)old;
		if (!idx)
			die("lock-free stack empty");
		nw = (uint64_t)sh.nodes[idx - 1].next_idx | (((old >> 32) + 1) << 32);
	} while (!__atomic_compare_exchange_n(&sh.lf_head, &old, nw, 1, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	return &sh.nodes[idx - 1];
}

static void lf_put(void *p)
{
	struct node *n = p;
	uint32_t idx = (uint32_t)(n - sh.nodes) + 1;
	uint64_t old = __atomic_load_n(&sh.lf_head, __ATOMIC_RELAXED), nw;

	do {
		n->next_idx = (uint32_t)old;
		nw = (uint64_t)idx | (((old >> 32) + 1) << 32);
	} while (!__atomic_compare_exchange_n(&sh.lf_head, &old, nw, 1, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
}

static void *tc_get(void)
{
	if (!tc_n) {
		pthread_mutex_lock(&sh.tc_lock);
		while (tc_n < TC_CAP / 2 && sh.tc_global) {
			tc_local[tc_n++] = sh.tc_global;
			sh.tc_global = sh.tc_global->next;
			sh.tc_global_n--;
		}
		pthread_mutex_unlock(&sh.tc_lock);
		if (!tc_n)
			return malloc(OBJ_SIZE);
	}
	return tc_local[--tc_n];
}

static void tc_put(void *p)
{
	if (tc_n == TC_CAP) {
		pthread_mutex_lock(&sh.tc_lock);
		while (tc_n > TC_CAP / 2) {
			struct node *n = tc_local[--tc_n];

			n->next = sh.tc_global;
			sh.tc_global = n;
			sh.tc_global_n++;
		}
		pthread_mutex_unlock(&sh.tc_lock);
	}
	tc_local[tc_n++] = p;
}

/* ---- 1: cost per pair ------------------------------------------------------ */

struct thr {
	int kind;
	uint64_t ops, cpu_ns;
} ALIGNED;

static inline __attribute__((always_inline)) void pair(const int kind, pcpu_objcache_t *c)
{
	void *p;

	switch (kind) {
	case K_OBJCACHE:
		p = pcpu_objcache_get(c);
		__asm__ __volatile__("" : : "r"(p) : "memory");
		pcpu_objcache_put(c, p);
		break;
	case K_MALLOC:
		p = malloc(OBJ_SIZE);
		__asm__ __volatile__("" : : "r"(p) : "memory");
		free(p);
		break;
	case K_MUTEX:
		list_put(list_get());
		break;
	case K_LFSTACK:
		lf_put(lf_get());
		break;
	case K_TCACHE:
		tc_put(tc_get());
		break;
	}
}

static inline __attribute__((always_inline)) void loop(struct thr *t, const int kind)
{
	pcpu_objcache_t *c = sh.cache;
	uint64_t n = 0, c0;

	for (unsigned i = 0; i < 4096; i++)
		pair(kind, c);
	pthread_barrier_wait(&sh.start);
	c0 = thread_cpu_ns();
	do {
		for (unsigned i = 0; i < BATCH; i++)
			pair(kind, c);
		n += BATCH;
	} while (!__atomic_load_n(&sh.stop, __ATOMIC_RELAXED));
	t->cpu_ns = thread_cpu_ns() - c0;
	t->ops = n;
}

#define LOOP_FN(k) \
	static __attribute__((noinline)) void loop_##k(struct thr *t) { loop(t, k); }
LOOP_FN(K_OBJCACHE)
LOOP_FN(K_MALLOC)
LOOP_FN(K_MUTEX)
LOOP_FN(K_LFSTACK)
LOOP_FN(K_TCACHE)
static void (*const loops[K_N])(struct thr *) = {
	loop_K_OBJCACHE, loop_K_MALLOC, loop_K_MUTEX, loop_K_LFSTACK, loop_K_TCACHE,
};

static void *thread_main(void *arg)
{
	struct thr *t = arg;

	loops[t->kind](t);
	return NULL;
}

static double run(int kind, unsigned n, unsigned ms)
{
	static struct thr thr[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	struct timespec d = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	uint64_t ops = 0, ns = 0;

	sh.stop = 0;
	pthread_barrier_init(&sh.start, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		thr[i].kind = kind;
		if (pthread_create(&th[i], NULL, thread_main, &thr[i]) != 0)
			die("pthread_create");
	}
	pthread_barrier_wait(&sh.start);
	nanosleep(&d, NULL);
	__atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		ops += thr[i].ops;
		ns += thr[i].cpu_ns;
	}
	pthread_barrier_destroy(&sh.start);
	return (double)ns / (double)ops;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- 2: objects cached with many threads ---------------------------------- */

static pthread_barrier_t all_got, held_done, may_exit;

static void *hold_thread(void *arg)
{
	int kind = (int)(intptr_t)arg;
	void *objs[32];

	for (int i = 0; i < 32; i++) {
		switch (kind) {
		case K_OBJCACHE: objs[i] = pcpu_objcache_get(sh.cache); break;
		case K_MUTEX: objs[i] = list_get(); break;
		case K_LFSTACK: objs[i] = lf_get(); break;
		default: objs[i] = lf_get(); break;
		}
	}
	pthread_barrier_wait(&all_got); /* 64 x 32 objects held at once */
	for (int i = 0; i < 32; i++) {
		switch (kind) {
		case K_OBJCACHE: pcpu_objcache_put(sh.cache, objs[i]); break;
		case K_MUTEX: list_put(objs[i]); break;
		case K_LFSTACK: lf_put(objs[i]); break;
		default: lf_put(objs[i]); break;
		}
	}
	pthread_barrier_wait(&held_done);
	pthread_barrier_wait(&may_exit); /* alive while counted */
	return NULL;
}

static unsigned tc_local_total;
static void *tc_hold_thread(void *arg)
{
	void *objs[32];

	(void)arg;
	for (int i = 0; i < 32; i++)
		objs[i] = tc_get();
	pthread_barrier_wait(&all_got);
	for (int i = 0; i < 32; i++)
		tc_put(objs[i]);
	__atomic_fetch_add(&tc_local_total, tc_n, __ATOMIC_RELAXED);
	pthread_barrier_wait(&held_done);
	pthread_barrier_wait(&may_exit);
	return NULL;
}

static void memory_section(void)
{
	enum { T = 64 };
	pthread_t th[T];
	struct pcpu_objcache_stats st;

	printf("\n2. Objects cached with %d threads on %ld CPUs (each got 32, all held at once, then put back)\n", T,
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("%-34s %14s %14s\n", "variant", "local caches", "shared list");
	for (int kind = 0; kind < K_N; kind++) {
		if (kind == K_MALLOC)
			continue;
		pthread_barrier_init(&all_got, NULL, T);
		pthread_barrier_init(&held_done, NULL, T + 1);
		pthread_barrier_init(&may_exit, NULL, T + 1);
		tc_local_total = 0;
		if (kind == K_OBJCACHE)
			(void)pcpu_objcache_drain(sh.cache);
		for (int i = 0; i < T; i++)
			pthread_create(&th[i], NULL, kind == K_TCACHE ? tc_hold_thread : hold_thread,
				       (void *)(intptr_t)kind);
		pthread_barrier_wait(&held_done);
		if (kind == K_OBJCACHE) {
			pcpu_objcache_stats(sh.cache, &st);
			printf("%-34s %14llu %14llu   (capacity 64 per slot, %u slots)\n", names[kind],
			       (unsigned long long)(st.cached - st.in_depot),
			       (unsigned long long)st.in_depot, pcpu_nslots());
		} else if (kind == K_TCACHE) {
			printf("%-34s %14u %14zu   (capacity %d per thread)\n", names[kind],
			       tc_local_total, sh.tc_global_n, TC_CAP);
		} else {
			printf("%-34s %14d %14s\n", names[kind], 0, "all");
		}
		pthread_barrier_wait(&may_exit);
		for (int i = 0; i < T; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&all_got);
		pthread_barrier_destroy(&held_done);
		pthread_barrier_destroy(&may_exit);
	}
	printf("%-34s %14s %14s   (glibc's tcache: up to 7 per size per thread)\n", names[K_MALLOC],
	       "n/a", "n/a");
}

/* ---- 3: the data plane ----------------------------------------------------- */

#define RING 1024
struct ring {
	void *slot[RING];
	uint64_t head ALIGNED; /* written by the producer */
	uint64_t tail ALIGNED; /* written by the consumer */
};
static struct ring rings[2]; /* rings[w]: into worker w */
static int dp_use_cache, dp_stop;
static uint64_t dp_cycles[2], dp_pairs[2], dp_handed[2];

static void *dp_get(void)
{
	return dp_use_cache ? pcpu_objcache_get(sh.cache) : malloc(OBJ_SIZE);
}

static void dp_put(void *p)
{
	if (dp_use_cache)
		pcpu_objcache_put(sh.cache, p);
	else
		free(p);
}

static void *dp_worker(void *arg)
{
	int w = (int)(intptr_t)arg, other = 1 - w;
	cpu_set_t set;
	uint64_t rng = 88172645463325252ull + (uint64_t)w, cyc = 0, n = 0, handed = 0;
	struct ring *in = &rings[w], *out = &rings[other];

	CPU_ZERO(&set);
	CPU_SET(w % sysconf(_SC_NPROCESSORS_ONLN), &set);
	sched_setaffinity(0, sizeof(set), &set);
	while (!__atomic_load_n(&dp_stop, __ATOMIC_RELAXED)) {
		uint64_t t0, t1, end;
		char *buf;

		/* Free what the other worker handed over. */
		while (in->tail != __atomic_load_n(&in->head, __ATOMIC_ACQUIRE)) {
			void *p = in->slot[in->tail % RING];

			t0 = __rdtsc();
			dp_put(p);
			cyc += __rdtsc() - t0;
			__atomic_store_n(&in->tail, in->tail + 1, __ATOMIC_RELEASE);
		}
		t0 = __rdtsc();
		buf = dp_get();
		t1 = __rdtsc();
		cyc += t1 - t0;
		buf[0] = (char)n; /* the packet's work: ~1000 cycles */
		for (end = t1 + 1000; __rdtsc() < end;)
			__asm__ __volatile__("pause");
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		if ((rng & 1) && out->head - __atomic_load_n(&out->tail, __ATOMIC_ACQUIRE) < RING) {
			out->slot[out->head % RING] = buf;
			__atomic_store_n(&out->head, out->head + 1, __ATOMIC_RELEASE);
			handed++;
		} else {
			t0 = __rdtsc();
			dp_put(buf);
			cyc += __rdtsc() - t0;
		}
		n++;
	}
	dp_cycles[w] = cyc;
	dp_pairs[w] = n;
	dp_handed[w] = handed;
	return NULL;
}

static void dataplane_section(unsigned ms)
{
	printf("\n3. Data plane: 2 workers, ~1000 cycles per packet, half the buffers freed by the "
	       "other worker\n");
	printf("%-34s %16s %12s %12s %12s\n", "variant", "cycles per pair", "pairs", "handed over",
	       "strays");
	for (int v = 0; v < 2; v++) {
		pthread_t th[2];
		uint64_t s0 = pcpu_counter_fetch(pcpu_objcache_counter(sh.cache, PCPU_OBJCACHE_STRAYS));
		struct timespec d = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

		dp_use_cache = v == 0;
		dp_stop = 0;
		memset(rings, 0, sizeof(rings));
		for (int w = 0; w < 2; w++)
			pthread_create(&th[w], NULL, dp_worker, (void *)(intptr_t)w);
		nanosleep(&d, NULL);
		__atomic_store_n(&dp_stop, 1, __ATOMIC_RELAXED);
		for (int w = 0; w < 2; w++)
			pthread_join(th[w], NULL);
		for (int w = 0; w < 2; w++) /* what is left in the rings */
			while (rings[w].tail != rings[w].head)
				dp_put(rings[w].slot[rings[w].tail++ % RING]);
		if (v == 0)
			printf("%-34s %16.1f %12llu %12llu %12llu\n", names[K_OBJCACHE],
			       (double)(dp_cycles[0] + dp_cycles[1]) / (double)(dp_pairs[0] + dp_pairs[1]),
			       (unsigned long long)(dp_pairs[0] + dp_pairs[1]),
			       (unsigned long long)(dp_handed[0] + dp_handed[1]),
			       (unsigned long long)(pcpu_counter_fetch(pcpu_objcache_counter(
							    sh.cache, PCPU_OBJCACHE_STRAYS)) - s0));
		else
			printf("%-34s %16.1f %12llu %12llu %12s\n", names[K_MALLOC],
			       (double)(dp_cycles[0] + dp_cycles[1]) / (double)(dp_pairs[0] + dp_pairs[1]),
			       (unsigned long long)(dp_pairs[0] + dp_pairs[1]),
			       (unsigned long long)(dp_handed[0] + dp_handed[1]), "n/a");
	}
}

int main(int argc, char **argv)
{
	unsigned rounds = 5, ms = 100, nthr[4], nt;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	static double v[K_N][4][MAX_ROUNDS];
	struct pcpu_objcache_desc d;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc)
			ms = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--quick") == 0)
			rounds = 3, ms = 30;
		else
			die("usage: pcpu_bench_objcache [--rounds N] [--ms M] [--quick]");
	}
	if (rounds < 1 || rounds > MAX_ROUNDS)
		die("--rounds: 1..64");
	nthr[0] = 1;
	nthr[1] = (unsigned)ncpu;
	nthr[2] = 2 * (unsigned)ncpu;
	nthr[3] = 4 * (unsigned)ncpu;
	nt = 4;

	memset(&d, 0, sizeof(d));
	d.size = OBJ_SIZE;
	d.capacity = 64;
	sh.cache = pcpu_objcache_create(&d);
	if (!sh.cache)
		die("pcpu_objcache_create");
	pthread_mutex_init(&sh.list_lock, NULL);
	pthread_mutex_init(&sh.tc_lock, NULL);
	sh.nodes = calloc(NODES, sizeof(struct node));
	if (!sh.nodes)
		die("calloc");
	for (uint32_t i = NODES; i > 0; i--)
		lf_put(&sh.nodes[i - 1]);

	printf("pcpu_bench_objcache: %ld CPUs, rseq mode %s, cache %s, %u rounds x %u ms\n", ncpu,
	       pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       pcpu_objcache_is_percpu(sh.cache) ? "per-CPU" : "locked", rounds, ms);
	for (unsigned r = 0; r < rounds; r++)
		for (unsigned ti = 0; ti < nt; ti++)
			for (int k0 = 0; k0 < K_N; k0++) {
				int k = (k0 + (int)r) % K_N;

				v[k][ti][r] = run(k, nthr[ti], ms);
			}
	printf("\n1. ns of CPU time per get + put pair (median of %u rounds), ratio to malloc + free\n",
	       rounds);
	printf("%-34s", "variant");
	for (unsigned ti = 0; ti < nt; ti++)
		printf("  %5u thr        ", nthr[ti]);
	printf("\n");
	for (int k = 0; k < K_N; k++) {
		printf("%-34s", names[k]);
		for (unsigned ti = 0; ti < nt; ti++) {
			double ratio[MAX_ROUNDS], ns[MAX_ROUNDS];

			for (unsigned r = 0; r < rounds; r++) {
				ratio[r] = v[k][ti][r] / v[K_MALLOC][ti][r];
				ns[r] = v[k][ti][r];
			}
			printf("  %6.2f (%5.2fx)", median(ns, (int)rounds), median(ratio, (int)rounds));
		}
		printf("\n");
	}
	memory_section();
	dataplane_section(ms * rounds);
	return 0;
}
