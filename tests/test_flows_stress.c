/*
 * Counters for millions of flows (pcpu/flows.h) under stress, counted.
 *
 * Two adder threads per CPU (at least 4), moved between CPUs and signalled
 * (stress_harness.h), each make --adds N adds (default 2,000,000; times
 * PCPU_TEST_SCALE): half to 16 hot flows (their keys repeat in a buffer:
 * the drains sum them), half to any of 2,000 flows x 2 counters, values 1 to
 * 1,000 and one in a hundred 2^32 or more (the shared word's path). Every
 * slot's buffer holds 32 entries, so it drains every few dozen adds. The
 * SIGUSR1 handler adds 1 to a key of its own. The sections the test inlines
 * are widened (PCPU_TEST_INJECT: a spin before the commit, a yield now and
 * then before the section), so the kernel aborts them often.
 * Beside them, while they add:
 *  - a flusher flushes in a loop;
 *  - a reader reads 64 random keys at a time and, every 32nd round, the
 *    whole array (pcpu_flows_read_array()), and checks that no value ever
 *    decreases (each read is exact, so a key's successive values only
 *    grow: a delta counted twice and then once, or missed once, shows);
 *    it also notes whether it ever saw entries pending.
 * At the end, before any flush: every key's read and the bulk read equal
 * the sum of what the threads and handlers added; after a flush, again,
 * with nothing pending. In the modes where threads run rseq, the reader
 * must have seen buffered entries (else the test tested the shared words
 * only).
 *
 * Work, not time, bounds the run. A test build of the library's
 * src/core/flows.c that drops one drained entry in 1,024
 * (PCPU_TEST_FLOWS_DROP) must fail it (ctest flows_stress_drop_fails).
 *
 * Usage: test_flows_stress --expect-mode glibc|own|fallback [--adds N]
 */
#define PCPU_TEST_INJECT 1
#include "check.h"
#include "stress_harness.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 256
#define NFLOWS 2000
#define NCOUNTERS 2
#define NKEYS (NFLOWS * NCOUNTERS)
#define HOT 16

/* PCPU_TEST_INJECT's hooks (pcpu/arch/common.h). */
unsigned pcpu__test_inject_spin = 200;
__thread unsigned long pcpu__test_inject_aborts;
static __thread unsigned long before_calls;

void pcpu__test_inject_before(void)
{
	if (++before_calls % 997 == 0)
		sched_yield();
}

static pcpu_flows_t *f;
static int stop, adders_left, mode_mismatch;
static const char *expect_mode;
static int live_tids[MAX_THREADS];
static struct stress_harness harness = { .tids = live_tids, .stop = &stop, .signal_us = 100 };
static long adds_per_thread = 2000000;

struct adder {
	pthread_t t;
	unsigned slot;
	uint64_t want[NKEYS];     /* the thread's own adds */
	uint64_t sig_want[NKEYS]; /* its handler's adds (only the handler writes) */
	uint64_t sig_rng;
};
static struct adder *adders;
static __thread struct adder *self;

static void on_signal(int sig)
{
	struct adder *a = self;
	int saved = errno;
	size_t k;

	(void)sig;
	if (!a)
		return;
	k = check_xorshift(&a->sig_rng) % NKEYS;
	CHECK(pcpu_flows_add(f, k / NCOUNTERS, (unsigned)(k % NCOUNTERS), 1) == 0);
	a->sig_want[k]++;
	errno = saved;
}

static void *adder_main(void *arg)
{
	struct adder *a = arg;

	stress_rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)a->slot * 7919 + 1);
	a->sig_rng = 0x2545f4914f6cdd1dull + a->slot;
	stress_check_mode(expect_mode, &mode_mismatch);
	self = a;
	stress_enter(&harness, a->slot);
	for (long i = 0; i < adds_per_thread; i++) {
		uint64_t r = stress_rand();
		size_t flow = (r & 1) ? (r >> 8) % HOT : (r >> 8) % NFLOWS;
		unsigned c = (unsigned)(r >> 4) & 1;
		uint64_t v = (r >> 40) % 100 == 0 ? ((uint64_t)1 << 32) + (r >> 48) : 1 + (r >> 20) % 1000;

		CHECK(pcpu_flows_add(f, flow, c, v) == 0);
		a->want[flow * NCOUNTERS + c] += v;
	}
	stress_leave(&harness, a->slot);
	__atomic_fetch_sub(&adders_left, 1, __ATOMIC_RELEASE);
	return NULL;
}

static long flushes;

static void *flusher_main(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&adders_left, __ATOMIC_ACQUIRE) > 0) {
		CHECK(pcpu_flows_flush(f) == 0);
		flushes++;
	}
	return NULL;
}

static long reads, array_reads, saw_pending;

static void *reader_main(void *arg)
{
	static uint64_t last[NKEYS], now[NKEYS];
	uint64_t r = 0x853c49e6748fea9bull;

	(void)arg;
	for (long round = 0; __atomic_load_n(&adders_left, __ATOMIC_ACQUIRE) > 0; round++) {
		if (pcpu_flows_pending(f) > 0)
			saw_pending++;
		if (round % 32 == 31) {
			CHECK(pcpu_flows_read_array(f, 0, NFLOWS, now) == 0);
			for (size_t k = 0; k < NKEYS; k++) {
				if (now[k] < last[k]) {
					fprintf(stderr, "FAIL: bulk read of key %zu went from %" PRIu64
						" to %" PRIu64 "\n", k, last[k], now[k]);
					exit(1);
				}
				last[k] = now[k];
			}
			array_reads++;
			continue;
		}
		for (int i = 0; i < 64; i++) {
			uint64_t x = check_xorshift(&r);
			/* Half the reads on the hot flows: their keys are in
			 * every buffer, and drained all the time. */
			size_t k = (x & 1) ? (x >> 8) % (HOT * NCOUNTERS) : (x >> 8) % NKEYS;
			uint64_t v = pcpu_flows_read(f, k / NCOUNTERS, (unsigned)(k % NCOUNTERS));

			if (v < last[k]) {
				fprintf(stderr, "FAIL: read of key %zu went from %" PRIu64 " to %" PRIu64
					" (a delta counted twice, or missed)\n", k, last[k], v);
				exit(1);
			}
			last[k] = v;
			reads++;
		}
	}
	return NULL;
}

static void check_final(const uint64_t *want, const char *when)
{
	static uint64_t got[NKEYS];

	for (size_t k = 0; k < NKEYS; k++) {
		uint64_t v = pcpu_flows_read(f, k / NCOUNTERS, (unsigned)(k % NCOUNTERS));

		if (v != want[k]) {
			fprintf(stderr, "FAIL: %s: key %zu reads %" PRIu64 ", added %" PRIu64
				" (diff %" PRId64 ")\n", when, k, v, want[k], (int64_t)(v - want[k]));
			exit(1);
		}
	}
	CHECK(pcpu_flows_read_array(f, 0, NFLOWS, got) == 0);
	for (size_t k = 0; k < NKEYS; k++)
		CHECK_EQ_U64(got[k], want[k]);
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int nthreads = ncpu * 2 < 4 ? 4 : (int)ncpu * 2;
	const char *scale = getenv("PCPU_TEST_SCALE");
	struct pcpu_flows_attr a;
	struct sigaction sa;
	pthread_t flusher, reader;
	static uint64_t want[NKEYS];
	int buffered;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-mode") && i + 1 < argc) {
			expect_mode = argv[++i];
		} else if (!strcmp(argv[i], "--adds") && i + 1 < argc) {
			adds_per_thread = atol(argv[++i]);
		} else {
			fprintf(stderr, "usage: %s --expect-mode glibc|own|fallback [--adds N]\n", argv[0]);
			return 2;
		}
	}
	if (scale && atof(scale) > 0)
		adds_per_thread = (long)((double)adds_per_thread * atof(scale));
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	stress_check_mode(expect_mode, &mode_mismatch);
	buffered = pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK && PCPU_ARCH_HAVE_RSEQ;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.buffer = 32;
	f = pcpu_flows_create(NFLOWS, NCOUNTERS, &a);
	CHECK(f);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

	adders = calloc((size_t)nthreads, sizeof(*adders));
	CHECK(adders);
	harness.ntids = (unsigned)nthreads;
	adders_left = nthreads;
	stress_start(&harness);
	for (int i = 0; i < nthreads; i++) {
		adders[i].slot = (unsigned)i;
		CHECK(pthread_create(&adders[i].t, NULL, adder_main, &adders[i]) == 0);
	}
	CHECK(pthread_create(&flusher, NULL, flusher_main, NULL) == 0);
	CHECK(pthread_create(&reader, NULL, reader_main, NULL) == 0);
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_join(adders[i].t, NULL) == 0);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	stress_join(&harness);
	CHECK(pthread_join(flusher, NULL) == 0);
	CHECK(pthread_join(reader, NULL) == 0);
	CHECK(!mode_mismatch);

	for (int i = 0; i < nthreads; i++)
		for (size_t k = 0; k < NKEYS; k++)
			want[k] += adders[i].want[k] + adders[i].sig_want[k];
	check_final(want, "before the last flush");
	CHECK(pcpu_flows_flush(f) == 0);
	CHECK_EQ_U64(pcpu_flows_pending(f), 0);
	check_final(want, "after the last flush");
	if (buffered && saw_pending == 0) {
		fprintf(stderr, "FAIL: no entry was ever seen buffered: only the shared words were tested\n");
		return 1;
	}
	printf("flows stress: mode %s, %d threads x %ld adds, %ld flushes, %ld reads, %ld bulk reads, "
	       "pending seen %ld times: exact, monotonic\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), nthreads, adds_per_thread, flushes, reads,
	       array_reads, saw_pending);
	pcpu_flows_destroy(f);
	free(adders);
	return 0;
}
