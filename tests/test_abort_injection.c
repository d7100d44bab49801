/*
 * The rseq abort and retry paths, forced to run a lot, still count exactly.
 *
 * Built with PCPU_TEST_INJECT, so pcpu's inline critical sections (in this
 * program; the library's own out-of-line retries are not widened) spin
 * pcpu__test_inject_spin iterations between arming and committing, call
 * pcpu__test_inject_before() before each section, and count every abort in
 * pcpu__test_inject_aborts (per thread). 2 threads per CPU add random
 * amounts (negative too) to counters of the default zone, singly and with
 * pcpu_counter_add_many(). Sections are made to abort by:
 *  - a sender thread that signals the adders (tgkill) as fast as it can;
 *    the handler adds to the same counters;
 *  - membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ), called by the sender
 *    and by each adder before one section in --kick-every, which restarts
 *    the section of every other thread of the process running then;
 *  - preemption: the hook sometimes yields, and raises a signal itself;
 *  - a timer of each adder's own (CLOCK_MONOTONIC, every --timer-us,
 *    delivered to that thread): it interrupts the thread wherever it runs,
 *    most of the time inside the widened section.
 * At the end every counter must equal what the threads and the handlers
 * added, exactly; in the rseq modes at least --min-aborts sections must
 * have aborted: the run goes on (at least --seconds) until they have, and
 * --max-seconds (20 minutes) only bounds a run that cannot get there (a
 * hang, or an abort path that no longer aborts). --max-cpu-seconds bounds it
 * by the process's CPU time instead, which a loaded machine does not use up
 * faster: an abort path that no longer aborts spends it and fails, a run
 * that gets little CPU only takes longer (a hang is ctest's TIMEOUT's). How
 * much CPU the test gets
 * changes how long it takes, not whether it passes: the sender's signals
 * and the membarrier kicks abort sections only while the threads run at
 * once on different CPUs, which a loaded machine seldom lets them do (a
 * 2-CPU machine at load 40 aborted ~120 sections a second), while each
 * adder's timer aborts a section about every --timer-us of the CPU time
 * that adder gets (with two CPU-bound processes per CPU beside it: ~10^4
 * aborts a second, 3-4 times as many as without the timers).
 *
 * Nothing can starve a thread: the sender signals a thread again only once
 * it has made progress since its last signal (a periodic signal faster than
 * a slow machine, or a sanitizer, runs the handler would starve it and the
 * test would never end); a timer keeps at most one signal pending however
 * late its thread runs, and its period is several times a section's length
 * (the spin is ~1-3 us); and an add whose section keeps aborting takes the
 * fallback path.
 *
 * Usage: test_abort_injection --expect-mode glibc|own|fallback
 *        [--min-aborts N] [--seconds S] [--max-seconds S]
 *        [--max-cpu-seconds S] [--spin N]
 *        [--yield-every N] [--raise-every N] [--kick-every N] [--timer-us N]
 *        [--no-membarrier]
 */
#define PCPU_TEST_INJECT 1
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id /* not named by older glibc (2.36) */
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* The hooks the program provides (include/pcpu/arch/common.h; the spin is
 * each arch header's PCPU__INJECT_ASM). Also built with
 * PCPU_TEST_SPLIT_BLOCKS and with PCPU_TEST_BROKEN_SECTION
 * (tests/CMakeLists.txt). */
unsigned pcpu__test_inject_spin;
__thread unsigned long pcpu__test_inject_aborts;
static unsigned yield_every = 997, raise_every = 1499, kick_every = 8, timer_us = 20;
static int have_membarrier; /* MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ registered */
static __thread unsigned long before_calls, kicks;
static __thread int in_handler;
static __thread int is_adder;

/* Restarts the rseq critical section of every other thread of the process
 * running at this moment (an IPI to their CPUs). */
static void kick_others(void)
{
	if (have_membarrier) {
		CHECK(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0);
		kicks++;
	}
}

void pcpu__test_inject_before(void)
{
	unsigned long n = ++before_calls;

	if (in_handler || !is_adder)
		return;
	if (yield_every && n % yield_every == 0) {
		sched_yield();
	} else if (raise_every && n % raise_every == 0) {
		raise(SIGUSR1);
	} else if (kick_every && n % kick_every == 0) {
		kick_others();
	}
}

#define MAX_THREADS 256
enum { NSINGLE = 3, NARRAY = 4, NCOUNTERS = NSINGLE + NARRAY };

static pcpu_counter_t single[NSINGLE]; /* 2 in the default zone, 1 in an array */
static pcpu_counter_t array;           /* 4 counters, updated with add_many */
static int64_t expected[NCOUNTERS];
static int64_t handler_runs;
static unsigned long total_aborts, total_before, signals_sent, total_kicks;
static int stop, stop_sender, nthreads;
static const char *expect_mode;
static int mode_mismatch;

/* What the sender needs of each adder, a cache line each. */
static struct {
	int tid;
	unsigned long progress; /* adds done by the thread's main flow */
	char pad[64 - sizeof(int) - sizeof(unsigned long)];
} adders[MAX_THREADS] __attribute__((aligned(64)));

static __thread int64_t my_handler_runs; /* written only by this thread's handler */
static void handler(int sig)
{
	int saved = errno;

	(void)sig;
	in_handler = 1;
	pcpu_counter_add(single[0], 3);
	pcpu_counter_add(single[2], -2);
	{
		pcpu_counter_t cs[2] = {array + 1, array + 3};
		int64_t vs[2] = {5, -7};

		pcpu_counter_add_many(cs, vs, 2);
	}
	my_handler_runs++;
	in_handler = 0;
	errno = saved;
}

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void check_mode(void)
{
	const char *m = pcpu_rseq_mode_name(pcpu_rseq_mode());

	if (strcmp(m, expect_mode) != 0 && !__atomic_exchange_n(&mode_mismatch, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "thread in mode %s (error %d: %s), expected %s\n", m,
			pcpu_rseq_error(), strerror(pcpu_rseq_error()), expect_mode);
}

static void *adder(void *arg)
{
	int me = (int)(intptr_t)arg;
	int64_t local[NCOUNTERS] = {0};
	uint64_t rng = 0x9e3779b97f4a7c15ull * ((uint64_t)me + 1);
	unsigned long published = 0, i = 0;
	sigset_t all;

	timer_t timer;
	struct sigevent sev;

	check_mode();
	is_adder = 1;
	__atomic_store_n(&adders[me].tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	if (timer_us) {
		struct itimerspec every = { { 0, (long)timer_us * 1000 }, { 0, (long)timer_us * 1000 } };

		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGUSR1;
		sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
		CHECK(timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0);
		CHECK(timer_settime(timer, 0, &every, NULL) == 0);
	}
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t r = next_rand(&rng);
		int64_t v = (int64_t)(r % 2001) - 1000;
		int k = (int)((r >> 16) % 4);

		if (k < NSINGLE) {
			pcpu_counter_add(single[k], v);
			local[k] += v;
		} else {
			pcpu_counter_t cs[NARRAY] = {array, array + 1, array + 2, array + 3};
			int64_t vs[NARRAY] = {1, v, -v / 3, 1000};

			pcpu_counter_add_many(cs, vs, NARRAY);
			for (int j = 0; j < NARRAY; j++)
				local[NSINGLE + j] += vs[j];
		}
		__atomic_store_n(&adders[me].progress, ++i, __ATOMIC_RELAXED);
		if ((i & 1023) == 0) {
			unsigned long a = pcpu__test_inject_aborts;

			__atomic_fetch_add(&total_aborts, a - published, __ATOMIC_RELAXED);
			published = a;
		}
	}
	/* No handler may run after its adds are folded into the totals. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (timer_us)
		CHECK(timer_delete(timer) == 0);
	is_adder = 0;
	__atomic_fetch_add(&total_kicks, kicks, __ATOMIC_RELAXED);
	for (int j = 0; j < NCOUNTERS; j++)
		__atomic_fetch_add(&expected[j], local[j], __ATOMIC_RELAXED);
	__atomic_fetch_add(&handler_runs, my_handler_runs, __ATOMIC_RELAXED);
	__atomic_fetch_add(&total_aborts, pcpu__test_inject_aborts - published, __ATOMIC_RELAXED);
	__atomic_fetch_add(&total_before, before_calls, __ATOMIC_RELAXED);
	return NULL;
}

/* Signals every adder that made progress since its last signal. */
static void *sender(void *arg)
{
	static unsigned long seen[MAX_THREADS];
	unsigned long sent = 0;
	pid_t pid = getpid();

	(void)arg;
	while (!__atomic_load_n(&stop_sender, __ATOMIC_RELAXED)) {
		int any = 0;

		kick_others();

		for (int i = 0; i < nthreads; i++) {
			int tid = __atomic_load_n(&adders[i].tid, __ATOMIC_ACQUIRE);
			unsigned long p = __atomic_load_n(&adders[i].progress, __ATOMIC_RELAXED);

			if (tid && p != seen[i]) {
				seen[i] = p;
				CHECK(syscall(SYS_tgkill, pid, tid, SIGUSR1) == 0);
				sent++;
				any = 1;
			}
		}
		if (!any) /* not sched_yield(): that would give up the slice */
			for (volatile int k = 0; k < 100; k++)
				;
	}
	__atomic_fetch_add(&signals_sent, sent, __ATOMIC_RELAXED);
	__atomic_fetch_add(&total_kicks, kicks, __ATOMIC_RELAXED);
	return NULL;
}

/* The CPU time all the process's threads used, in seconds. */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = 1, max_seconds = 1200, max_cpu_seconds = 0, t0, elapsed;
	unsigned long min_aborts = 100000;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t t[MAX_THREADS], snd;
	struct sigaction sa;
	sigset_t usr1;

	pcpu__test_inject_spin = 3000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-mode") && i + 1 < argc)
			expect_mode = argv[++i];
		else if (!strcmp(argv[i], "--min-aborts") && i + 1 < argc)
			min_aborts = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc)
			max_seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--max-cpu-seconds") && i + 1 < argc)
			max_cpu_seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--spin") && i + 1 < argc)
			pcpu__test_inject_spin = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--yield-every") && i + 1 < argc)
			yield_every = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--raise-every") && i + 1 < argc)
			raise_every = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--kick-every") && i + 1 < argc)
			kick_every = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--timer-us") && i + 1 < argc)
			timer_us = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--no-membarrier"))
			have_membarrier = -1;
		else {
			fprintf(stderr, "usage: %s --expect-mode glibc|own|fallback [--min-aborts N] [--seconds S] [--max-seconds S] [--max-cpu-seconds S] [--spin N] [--yield-every N] [--raise-every N] [--kick-every N] [--timer-us N] [--no-membarrier]\n",
				argv[0]);
			return 2;
		}
	}
	if (!expect_mode) {
		fprintf(stderr, "--expect-mode is required\n");
		return 2;
	}
	CHECK(timer_us < 1000000);
	if (!strcmp(expect_mode, "fallback"))
		min_aborts = 0; /* no critical section ever runs */
	nthreads = (int)(2 * ncpu);
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	if (nthreads < 2)
		nthreads = 2;

	single[0] = pcpu_counter_alloc();
	single[1] = pcpu_counter_alloc();
	single[2] = pcpu_counter_alloc_array(3);
	array = pcpu_counter_alloc_array(NARRAY);
	CHECK(single[0] && single[1] && single[2] && array);
	single[2] += 1; /* element 1 of an array */

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	check_mode();
	if (have_membarrier == 0 &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0)
		have_membarrier = 1;
	else
		have_membarrier = 0; /* before Linux 5.10: signals only */

	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_create(&t[i], NULL, adder, (void *)(intptr_t)i) == 0);
	/* Only the adders take the signal (tgkill and raise() name them). */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	CHECK(pthread_sigmask(SIG_BLOCK, &usr1, NULL) == 0);
	CHECK(pthread_create(&snd, NULL, sender, NULL) == 0);
	t0 = now_s();
	for (;;) {
		usleep(20000);
		elapsed = now_s() - t0;
		if (max_cpu_seconds > 0 ? cpu_s() >= max_cpu_seconds : elapsed >= max_seconds)
			break;
		if (elapsed >= seconds && __atomic_load_n(&total_aborts, __ATOMIC_RELAXED) >= min_aborts)
			break;
	}
	/* The sender first: it must not signal a thread that has exited. */
	__atomic_store_n(&stop_sender, 1, __ATOMIC_RELAXED);
	CHECK(pthread_join(snd, NULL) == 0);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_join(t[i], NULL) == 0);

	printf("mode %s, %d threads, spin %u, %.1f s: %lu sections entered, %lu aborted; %lu signals sent, %lld handler runs, %lu membarrier kicks\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), nthreads, pcpu__test_inject_spin,
	       elapsed, total_before, total_aborts, signals_sent, (long long)handler_runs,
	       total_kicks);
	CHECK(!mode_mismatch);
	CHECK(handler_runs > 0);
	CHECK_EQ_U64(pcpu_counter_fetch(single[0]), expected[0] + 3 * handler_runs);
	CHECK_EQ_U64(pcpu_counter_fetch(single[1]), expected[1]);
	CHECK_EQ_U64(pcpu_counter_fetch(single[2]), expected[2] - 2 * handler_runs);
	CHECK_EQ_U64(pcpu_counter_fetch(array), expected[3]);
	CHECK_EQ_U64(pcpu_counter_fetch(array + 1), expected[4] + 5 * handler_runs);
	CHECK_EQ_U64(pcpu_counter_fetch(array + 2), expected[5]);
	CHECK_EQ_U64(pcpu_counter_fetch(array + 3), expected[6] - 7 * handler_runs);
	if (total_aborts < min_aborts) {
		fprintf(stderr, "only %lu critical sections aborted in %.1f s, %.1f s of CPU (need %lu): the abort path was not exercised enough\n",
			total_aborts, elapsed, cpu_s(), min_aborts);
		exit(1);
	}
	printf("test_abort_injection: exact\n");
	return 0;
}
