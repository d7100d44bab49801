/*
 * Exactness under stress: the claim "never loses an update", counted.
 *
 * 4x more adder threads than CPUs add random values (negative too) to
 * counters of several zones (indexed by CPU or by mm_cid, as the process
 * is: ctest runs both), singly and with
 * pcpu_counter_add_many(); a migrator thread moves them between CPUs with
 * sched_setaffinity(); a signaller sends SIGUSR1 to random adders while
 * ITIMER_REAL raises SIGALRM, and both handlers add to the same counters;
 * adder threads exit after a random number of adds and are replaced, so
 * threads are created and exit during the whole run. Every adder keeps its
 * own expected totals; at the end each counter must equal their sum exactly.
 *
 * Run by ctest in three modes (see tests/CMakeLists.txt): glibc's rseq,
 * pcpu's own registration (GLIBC_TUNABLES=glibc.pthread.rseq=0), and rseq
 * refused by a seccomp filter (fallback). --expect-mode and --expect-index
 * make the test fail if the mode or slot index is not the one the run is
 * meant to exercise.
 */

#include "check.h"
#include "stress_harness.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { NCOUNTERS = 4 }; /* default zone, cpu zone, mm_cid zone, array[0] */
#define MAX_LIVE 256

static pcpu_counter_t counters[NCOUNTERS];
static pcpu_counter_t array; /* 4 counters, updated with add_many */
static int64_t expected[NCOUNTERS + 4];
static int64_t signal_adds;
static int stop; /* read with __atomic: TSan-clean */
static int live_tids[MAX_LIVE];
/* The migrator and the signaller (stress_harness.h); ntids set in main(). */
static struct stress_harness harness = { .tids = live_tids, .stop = &stop, .signal_us = 50 };
static int nlive_target;
static const char *expect_mode;
static int mode_mismatch;
static long threads_started;

static __thread int64_t sig_expected; /* written only by this thread's handler */

static void handler(int sig)
{
	int saved = errno;
	(void)sig;
	/* Both handlers block each other (sa_mask), so sig_expected has one
	 * writer at a time. */
	pcpu_counter_add(counters[0], 3);
	pcpu_counter_add(counters[2], -1);
	sig_expected += 1;
	errno = saved;
}

/* Folds this thread's handler-side expectations into the totals, at the
 * thread's end. Signals stay blocked from here on: a handler that ran after
 * the fold would add to the counters without being counted. */
static void publish_signal_adds(void)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	__atomic_fetch_add(&signal_adds, sig_expected, __ATOMIC_RELAXED);
	sig_expected = 0;
}

static const char *expect_index;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *adder(void *arg)
{
	int slot = (int)(intptr_t)arg;
	int64_t local[NCOUNTERS + 4] = {0};
	double deadline;
	long n;

	stress_rng = (uint64_t)(uintptr_t)&local ^ (uint64_t)time(NULL) ^ ((uint64_t)slot << 32) ^ 0x9e3779b97f4a7c15ull;
	stress_enter(&harness, (unsigned)slot);
	stress_check_mode(expect_mode, &mode_mismatch);
	/* Exit after a random number of adds or a random 10-110 ms, whichever
	 * comes first, so threads come and go even when the machine (or
	 * valgrind) is slow. */
	n = 20000 + (long)(stress_rand() % 200000);
	deadline = now_ms() + 10 + (double)(stress_rand() % 100);
	while (n-- > 0 && !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if ((n & 1023) == 0 && now_ms() > deadline)
			break;
		uint64_t r = stress_rand();
		int64_t v = (int64_t)(r % 2001) - 1000;
		int k = (int)((r >> 20) % (NCOUNTERS + 1));

		if (k < NCOUNTERS) {
			pcpu_counter_add(counters[k], v);
			local[k] += v;
		} else {
			pcpu_counter_t cs[4] = {array, array + 1, array + 2, array + 3};
			int64_t vs[4] = {1, v, -v / 2, 1500};

			pcpu_counter_add_many(cs, vs, 4);
			for (int i = 0; i < 4; i++)
				local[NCOUNTERS + i] += vs[i];
		}
		if ((r & 0xfff) == 0)
			sched_yield();
	}
	stress_leave(&harness, (unsigned)slot);
	for (int i = 0; i < NCOUNTERS + 4; i++)
		__atomic_fetch_add(&expected[i], local[i], __ATOMIC_RELAXED);
	publish_signal_adds();
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = 3;
	long per_cpu = 4;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t threads[MAX_LIVE];
	struct sigaction sa;
	struct itimerval it = {{0, 1000}, {0, 1000}};
	struct timespec t0, now;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-mode") && i + 1 < argc)
			expect_mode = argv[++i];
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--threads-per-cpu") && i + 1 < argc)
			per_cpu = atol(argv[++i]);
		else if (strcmp(argv[i], "--expect-index") == 0 && i + 1 < argc)
			expect_index = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--expect-mode glibc|own|fallback] [--expect-index cpu|mm_cid] [--seconds S] [--threads-per-cpu K]\n", argv[0]);
			return 2;
		}
	}
	if (expect_index) {
		const char *have = pcpu_zone_index(NULL) == PCPU_INDEX_CPU ? "cpu" : "mm_cid";

		if (strcmp(have, expect_index) != 0) {
			fprintf(stderr, "slot index %s, expected %s\n", have, expect_index);
			return 1;
		}
	}
	nlive_target = (int)(ncpu * per_cpu);
	if (nlive_target > MAX_LIVE)
		nlive_target = MAX_LIVE;
	if (nlive_target < 2)
		nlive_target = 2;

	/* The slot index is the process's (PCPU_INDEX=cpu|mm_cid: ctest runs
	 * both); several zones, arrays and array elements all the same. */
	pcpu_zone_t *za = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	pcpu_zone_t *zb = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	CHECK(za && zb);
	counters[0] = pcpu_counter_alloc();
	counters[1] = pcpu_counter_alloc_in(za, 1);
	counters[2] = pcpu_counter_alloc_in(zb, 1);
	counters[3] = pcpu_counter_alloc_in(za, 3) + 2; /* inside an array */
	array = pcpu_counter_alloc_in(zb, 4);
	CHECK(counters[0] && counters[1] && counters[2] && array);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	sigaddset(&sa.sa_mask, SIGALRM);
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	stress_check_mode(expect_mode, &mode_mismatch);

	for (int i = 0; i < nlive_target; i++) {
		CHECK(pthread_create(&threads[i], NULL, adder, (void *)(intptr_t)i) == 0);
		threads_started++;
	}
	harness.ntids = (unsigned)nlive_target;
	harness.at_exit = publish_signal_adds; /* SIGALRM may land on the helpers */
	stress_start(&harness);
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);

	/* Replace adders as they exit, until time is up. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 >= seconds)
			break;
		for (int i = 0; i < nlive_target; i++) {
			if (pthread_tryjoin_np(threads[i], NULL) == 0) {
				CHECK(pthread_create(&threads[i], NULL, adder, (void *)(intptr_t)i) == 0);
				threads_started++;
			}
		}
		usleep(2000);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nlive_target; i++)
		CHECK(pthread_join(threads[i], NULL) == 0);
	stress_join(&harness);
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	publish_signal_adds(); /* main's own handler runs */

	CHECK(!mode_mismatch);
	printf("mode %s, %d adders live, %ld started, %lld signal adds\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), nlive_target, threads_started,
	       (long long)signal_adds);
	CHECK(threads_started > nlive_target); /* churn happened */
	CHECK(signal_adds > 0);
	CHECK_EQ_U64(pcpu_counter_fetch(counters[0]), expected[0] + 3 * signal_adds);
	CHECK_EQ_U64(pcpu_counter_fetch(counters[1]), expected[1]);
	CHECK_EQ_U64(pcpu_counter_fetch(counters[2]), expected[2] - signal_adds);
	CHECK_EQ_U64(pcpu_counter_fetch(counters[3]), expected[3]);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_U64(pcpu_counter_fetch(array + i), expected[NCOUNTERS + i]);
	printf("test_stress: exact\n");
	return 0;
}
