/* SPDX-License-Identifier: MIT */
/*
 * percpu_ops_librseq: pcpu's public per-CPU operations (pcpu/percpu_ops.h)
 * beside librseq's same operations (github.com/compudj/librseq,
 * rseq/rseq.h), in one run, in the same loops, on the same memory.
 *
 * Not part of the CMake build: librseq is not a Debian package (bookworm),
 * so bench/percpu_ops_librseq.sh builds this file against a librseq
 * checkout given on its command line (librseq's src/rseq.c and src/smp.c
 * compiled in a scratch folder), and the build's libpcpu. See
 * bench/percpu_ops.md for the command and the figures.
 *
 * The operations, each in a loop that reads the index, forms the slot's
 * address, runs the sequence and retries on an abort (the loop a user
 * writes):
 *   load_add_store        pcpu_rseq_load_add_store()  / rseq_load_add_store__ptr()
 *   this_load_add_store   pcpu_rseq_this_load_add_store() (the index read
 *                         inside the sequence) / librseq's load_add_store
 *                         loop again (librseq has no such form)
 *   load_cbne_store       pcpu_rseq_load_cbne_store() / rseq_load_cbne_store__ptr():
 *                         read the slot's word v, store v + 1 if it still is v
 *   load_cbne_store_store pcpu_rseq_load_cbne_store_store() /
 *                         rseq_load_cbne_store_store__ptr(): a ring's push: the
 *                         element into ring[head % 16], then head + 1 (the commit)
 * Both libraries use the same rseq area: glibc's (glibc >= 2.35 registers
 * it; librseq then takes glibc's __rseq_offset and registers nothing, pcpu
 * runs in its "glibc" mode). The program refuses to run otherwise. Both use
 * the index pcpu uses (pcpu_zone_index(NULL): mm_cid or the CPU number):
 * librseq's RSEQ_PERCPU_MM_CID or RSEQ_PERCPU_CPU_ID, its index read with
 * rseq_current_mm_cid() or rseq_cpu_start(). The memory is one pcpu zone
 * object (its slots PCPU_SLOT_STRIDE apart), addressed by pcpu_slot_ptr()
 * in both loops.
 *
 * Time: CPU time of the threads (CLOCK_THREAD_CPUTIME_ID) over a fixed
 * number of operations per thread, so a preemption on a loaded machine
 * does not count. Each round runs every variant once, in an order that
 * rotates with the round; the table gives the median over rounds of ns per
 * operation, and the median over rounds of the ratio pcpu / librseq taken
 * within each round. Every run checks that the slots' words add up to the
 * operations done. Options: --rounds N (11), --ops M per thread and run
 * (2000000), --threads LIST (1,2).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bench.h"
#include <pcpu/pcpu.h>
#include <pcpu/percpu_ops.h>
#include <rseq/rseq.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 16
#define MAX_ROUNDS 101
#define RING 16

/* One slot's copy of the object: the operations' words, a line apart. */
struct slot {
	int64_t add;           /* load_add_store, this_load_add_store */
	int64_t pad0[7];
	intptr_t word;         /* load_cbne_store */
	int64_t pad1[7];
	intptr_t head;         /* load_cbne_store_store: the commit */
	intptr_t ring[RING];   /* ... and the second store */
};

enum var {
	P_ADD, L_ADD, P_THIS_ADD, L_ADD2, P_CAS, L_CAS, P_CAS2, L_CAS2, N_VARS
};

static const char *const var_name[N_VARS] = {
	"pcpu_rseq_load_add_store",         "rseq_load_add_store__ptr",
	"pcpu_rseq_this_load_add_store",    "rseq_load_add_store__ptr",
	"pcpu_rseq_load_cbne_store",        "rseq_load_cbne_store__ptr",
	"pcpu_rseq_load_cbne_store_store",  "rseq_load_cbne_store_store__ptr",
};

static pcpu_zone_t *zone;
static struct slot *obj;   /* slot 0's copy */
static int use_mm_cid;     /* pcpu's index is mm_cid: librseq uses it too */
static long nops = 2000000;
static pthread_barrier_t start;

static void die(const char *what)
{
	fprintf(stderr, "percpu_ops_librseq: %s\n", what);
	exit(1);
}

static struct slot *slot_of(int64_t idx)
{
	return (struct slot *)pcpu_slot_ptr(obj, (unsigned)idx);
}

/*
 * The loops. Each returns the aborts it retried after. noinline so that
 * each is one function, compiled once, whose instructions
 * bench/loop_insns.py can count.
 */
__attribute__((noinline)) long pcpu_add_loop(long n)
{
	long aborts = 0;

	for (long i = 0; i < n; i++)
		for (;;) {
			int64_t idx = pcpu_rseq_index();

			if (PCPU_LIKELY(pcpu_rseq_load_add_store(idx, &slot_of(idx)->add, 1) ==
					PCPU_RSEQ_COMMITTED))
				break;
			aborts++;
		}
	return aborts;
}

__attribute__((noinline)) long pcpu_this_add_loop(long n)
{
	long aborts = 0;

	for (long i = 0; i < n; i++)
		while (PCPU_UNLIKELY(pcpu_rseq_this_load_add_store(&obj->add, 1) !=
				     PCPU_RSEQ_COMMITTED))
			aborts++;
	return aborts;
}

__attribute__((noinline)) long pcpu_cas_loop(long n)
{
	long aborts = 0;

	for (long i = 0; i < n; i++)
		for (;;) {
			int64_t idx = pcpu_rseq_index();
			intptr_t *w = &slot_of(idx)->word;
			intptr_t v = __atomic_load_n(w, __ATOMIC_RELAXED);

			if (PCPU_LIKELY(pcpu_rseq_load_cbne_store(idx, w, v, v + 1) ==
					PCPU_RSEQ_COMMITTED))
				break;
			aborts++;
		}
	return aborts;
}

__attribute__((noinline)) long pcpu_cas2_loop(long n)
{
	long aborts = 0;

	for (long i = 0; i < n; i++)
		for (;;) {
			int64_t idx = pcpu_rseq_index();
			struct slot *s = slot_of(idx);
			intptr_t h = __atomic_load_n(&s->head, __ATOMIC_RELAXED);

			if (PCPU_LIKELY(pcpu_rseq_load_cbne_store_store(idx, &s->head, h,
									&s->ring[h % RING],
									(intptr_t)i, h + 1) ==
					PCPU_RSEQ_COMMITTED))
				break;
			aborts++;
		}
	return aborts;
}

/* librseq's loops, one per index kind (its mode must be a constant for its
 * dispatch to fold away). */
#define LRSEQ_LOOPS(suffix, MODE, READ_INDEX)                                                      \
	__attribute__((noinline)) long lrseq_add_loop_##suffix(long n)                             \
	{                                                                                          \
		long aborts = 0;                                                                   \
                                                                                                   \
		for (long i = 0; i < n; i++)                                                       \
			for (;;) {                                                                 \
				int idx = (int)READ_INDEX();                                       \
                                                                                                   \
				if (rseq_likely(!rseq_load_add_store__ptr(                         \
					    RSEQ_MO_RELAXED, MODE,                                 \
					    (intptr_t *)&slot_of(idx)->add, 1, idx)))              \
					break;                                                     \
				aborts++;                                                          \
			}                                                                          \
		return aborts;                                                                     \
	}                                                                                          \
	__attribute__((noinline)) long lrseq_cas_loop_##suffix(long n)                             \
	{                                                                                          \
		long aborts = 0;                                                                   \
                                                                                                   \
		for (long i = 0; i < n; i++)                                                       \
			for (;;) {                                                                 \
				int idx = (int)READ_INDEX();                                       \
				intptr_t *w = &slot_of(idx)->word;                                 \
				intptr_t v = __atomic_load_n(w, __ATOMIC_RELAXED);                 \
                                                                                                   \
				if (rseq_likely(!rseq_load_cbne_store__ptr(                        \
					    RSEQ_MO_RELAXED, MODE, w, v, v + 1, idx)))             \
					break;                                                     \
				aborts++;                                                          \
			}                                                                          \
		return aborts;                                                                     \
	}                                                                                          \
	__attribute__((noinline)) long lrseq_cas2_loop_##suffix(long n)                            \
	{                                                                                          \
		long aborts = 0;                                                                   \
                                                                                                   \
		for (long i = 0; i < n; i++)                                                       \
			for (;;) {                                                                 \
				int idx = (int)READ_INDEX();                                       \
				struct slot *s = slot_of(idx);                                     \
				intptr_t h = __atomic_load_n(&s->head, __ATOMIC_RELAXED);          \
                                                                                                   \
				if (rseq_likely(!rseq_load_cbne_store_store__ptr(                  \
					    RSEQ_MO_RELAXED, MODE, &s->head, h,                    \
					    &s->ring[h % RING], (intptr_t)i, h + 1, idx)))         \
					break;                                                     \
				aborts++;                                                          \
			}                                                                          \
		return aborts;                                                                     \
	}

LRSEQ_LOOPS(cpu, RSEQ_PERCPU_CPU_ID, rseq_cpu_start)
LRSEQ_LOOPS(cid, RSEQ_PERCPU_MM_CID, rseq_current_mm_cid)

static long run_loop(enum var v, long n)
{
	switch (v) {
	case P_ADD:
		return pcpu_add_loop(n);
	case P_THIS_ADD:
		return pcpu_this_add_loop(n);
	case P_CAS:
		return pcpu_cas_loop(n);
	case P_CAS2:
		return pcpu_cas2_loop(n);
	case L_ADD:
	case L_ADD2:
		return use_mm_cid ? lrseq_add_loop_cid(n) : lrseq_add_loop_cpu(n);
	case L_CAS:
		return use_mm_cid ? lrseq_cas_loop_cid(n) : lrseq_cas_loop_cpu(n);
	case L_CAS2:
		return use_mm_cid ? lrseq_cas2_loop_cid(n) : lrseq_cas2_loop_cpu(n);
	default:
		return 0;
	}
}

struct worker {
	enum var v;
	uint64_t cpu_ns;
	long aborts;
	pthread_t t;
} __attribute__((aligned(64)));

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t t0;

	/* Both libraries' thread setup: with glibc's registration, neither
	 * makes a system call here. */
	if (pcpu_thread_init() != PCPU_RSEQ_GLIBC || rseq_register_current_thread() != 0)
		die("a thread has no rseq area (glibc's registration expected)");
	pthread_barrier_wait(&start);
	t0 = bench_thread_cpu_ns();
	w->aborts = run_loop(w->v, nops);
	w->cpu_ns = bench_thread_cpu_ns() - t0;
	return NULL;
}

/* The slots' total of the words variant v writes. */
static int64_t total(enum var v)
{
	int64_t t = 0;

	for (unsigned s = 0; s < pcpu_nslots(); s++) {
		struct slot *p = slot_of(s);

		t += v <= L_ADD2 ? p->add : v <= L_CAS ? (int64_t)p->word : (int64_t)p->head;
	}
	return t;
}

static void zero(void)
{
	for (unsigned s = 0; s < pcpu_nslots(); s++)
		memset(slot_of(s), 0, sizeof(struct slot));
}

/* One run of variant v by nthr threads: ns of CPU time per operation. */
static double timed(enum var v, int nthr, long *aborts)
{
	struct worker w[MAX_THREADS];
	uint64_t ns = 0;

	zero();
	if (pthread_barrier_init(&start, NULL, (unsigned)nthr) != 0)
		die("barrier");
	for (int i = 0; i < nthr; i++) {
		w[i].v = v;
		if (pthread_create(&w[i].t, NULL, work, &w[i]) != 0)
			die("pthread_create");
	}
	for (int i = 0; i < nthr; i++) {
		pthread_join(w[i].t, NULL);
		ns += w[i].cpu_ns;
		*aborts += w[i].aborts;
	}
	pthread_barrier_destroy(&start);
	if (total(v) != (int64_t)nthr * nops)
		die("a run's total is wrong");
	return (double)ns / ((double)nthr * (double)nops);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAX_ROUNDS];

	memcpy(s, v, (size_t)n * sizeof(*v));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	int rounds = 11, threads[8] = {1, 2}, nt = 2;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			nops = atol(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			char *p = argv[++i];

			for (nt = 0; nt < 8 && *p; nt++) {
				threads[nt] = (int)strtol(p, &p, 10);
				if (threads[nt] < 1 || threads[nt] > MAX_THREADS)
					die("--threads: 1..16, comma-separated");
				if (*p == ',')
					p++;
			}
		} else {
			fprintf(stderr, "usage: percpu_ops_librseq [--rounds N] [--ops M] "
					"[--threads 1,2]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || nops < 1 || nt < 1)
		die("--rounds 1..101, --ops >= 1");

	if (pcpu_thread_init() != PCPU_RSEQ_GLIBC)
		die("pcpu is not in its glibc mode (PCPU_RSEQ? glibc.pthread.rseq=0?): the two "
		    "libraries would not share one rseq area");
	if (rseq_register_current_thread() != 0 || !rseq_available(RSEQ_AVAILABLE_QUERY_LIBC))
		die("librseq does not use glibc's rseq registration");
	use_mm_cid = pcpu_zone_index(NULL) == PCPU_INDEX_MM_CID;
	if (use_mm_cid && !rseq_mm_cid_available())
		die("pcpu indexes by mm_cid but librseq sees no mm_cid field");
	zone = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	obj = zone ? (struct slot *)pcpu_zone_alloc(zone, sizeof(struct slot), 64) : NULL;
	if (!obj)
		die("pcpu_zone_alloc failed");

	printf("percpu_ops_librseq: %u CPU slots, pcpu rseq mode %s, index %s (librseq "
	       "RSEQ_PERCPU_%s), rseq area shared (glibc's), %d rounds of %ld ops per thread\n",
	       pcpu_nslots(), pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       use_mm_cid ? "mm_cid" : "cpu", use_mm_cid ? "MM_CID" : "CPU_ID", rounds, nops);

	for (int t = 0; t < nt; t++) {
		static double ns[N_VARS][MAX_ROUNDS], ratio[N_VARS / 2][MAX_ROUNDS];
		long aborts[N_VARS] = {0};

		for (int r = 0; r < rounds; r++) {
			for (int k = 0; k < N_VARS; k++) {
				int v = (r + k) % N_VARS;

				ns[v][r] = timed((enum var)v, threads[t], &aborts[v]);
			}
			for (int p = 0; p < N_VARS / 2; p++)
				ratio[p][r] = ns[2 * p][r] / ns[2 * p + 1][r];
		}
		printf("\n%d thread(s): ns of CPU time per operation, median of %d rounds\n",
		       threads[t], rounds);
		printf("%-34s %8s   %-34s %8s   %s\n", "pcpu", "ns", "librseq", "ns",
		       "pcpu / librseq (median of rounds' ratios; ratio of medians)");
		for (int p = 0; p < N_VARS / 2; p++) {
			double a = median(ns[2 * p], rounds), b = median(ns[2 * p + 1], rounds);

			printf("%-34s %8.2f   %-34s %8.2f   %5.2fx; %5.2fx\n", var_name[2 * p], a,
			       var_name[2 * p + 1], b, median(ratio[p], rounds), a / b);
		}
		printf("aborts retried:");
		for (int v = 0; v < N_VARS; v++)
			printf(" %ld", aborts[v]);
		printf(" (per variant, in the table's order, all rounds)\n");
	}
	pcpu_zone_destroy(zone);
	return 0;
}
