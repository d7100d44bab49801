/*
 * Hierarchical counters (pcpu/hcounter.h), counted.
 *
 * 1. One thread: creation's errors, the range's formula for the tree's
 *    shape (run with PCPU_NSLOTS=64 and 1024 too: one and two levels of
 *    items), adds and carries exact, the bounds at quiescent points,
 *    compare() below, inside and above the bounds, reset, and a limited
 *    add that admits exactly `limit` units against a limit far below the
 *    range (the precise mode), then per-CPU again after releases.
 * 2. Exactness: 2 threads per CPU (at least 4), moved between CPUs and
 *    signalled (stress_harness.h), add random values, small (within a
 *    slot's window) and large (carrying), negative too; the SIGUSR1
 *    handler adds as well. At the end the precise sum equals what they
 *    added, the bounds contain it, compare() agrees with it, and a reset
 *    reads back 0.
 * 3. Bounds during adds: the same threads add only v > 0, while a reader
 *    takes sum(), approx(), sum() again: each approx's min must not pass
 *    the later sum, its max must not fall below the earlier one (the
 *    precise sum at the approx's instant lies between them), and compare()
 *    of a value below the earlier sum must say "above".
 * 4. The limit: every thread makes N limited adds of 1 against a limit of
 *    half the attempts (the handler makes some too): exactly `limit` are
 *    admitted, and the precise sum is the limit. Then again with releases:
 *    each thread holds at most a few units and gives them back (add -1);
 *    a shared count of the units held, raised after each admission and
 *    lowered before each release, must never pass the limit.
 * 5. Switching: rounds in which every thread takes units until refused and
 *    then gives all back, against a limit a few ranges wide, so that the
 *    counter enters its precise mode and leaves it every round while other
 *    threads add (PCPU_TEST_INJECT's spin widens every section, its hook
 *    yields): the count of units held never passes the limit, and at each
 *    round's end the precise sum is 0. (Without the fence of the switch to
 *    precise mode, a section that read an open gate commits after the
 *    slots were summed, and this phase admits one unit too many.)
 *
 * Usage: test_hcounter --expect-mode glibc|own|fallback [--seconds S]
 * In fallback (no rseq) the counters are atomic: every check still holds.
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
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256

/* PCPU_TEST_INJECT's hooks (pcpu/arch/common.h). */
unsigned pcpu__test_inject_spin;
__thread unsigned long pcpu__test_inject_aborts;
static __thread unsigned long before_calls;

void pcpu__test_inject_before(void)
{
	if (++before_calls % 997 == 0)
		sched_yield();
}

static int stop, mode_mismatch, nthreads;
static const char *expect_mode;
static int live_tids[MAX_THREADS];
static struct stress_harness harness = { .tids = live_tids, .stop = &stop, .signal_us = 50 };
static pcpu_hcounter_t *h;
static int phase; /* 2 exactness, 3 monotonic, 4 limit, 5 limit with releases, 6 switching */
static pthread_barrier_t round_barrier;
static int64_t rounds;
static int64_t limit;
static int64_t held; /* phase 5: units held, raised after admission, lowered before release */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check_bounds(const char *where, int64_t precise)
{
	struct pcpu_hcounter_approx a = pcpu_hcounter_approx(h);

	if (a.min > precise || a.max < precise || a.min > a.value || a.value > a.max) {
		fprintf(stderr, "FAIL: %s: bounds [%" PRId64 ", %" PRId64 "] value %" PRId64
			" do not contain the precise sum %" PRId64 "\n",
			where, a.min, a.max, a.value, precise);
		exit(1);
	}
	CHECK(pcpu_hcounter_compare(h, precise) == 0);
	CHECK(pcpu_hcounter_compare(h, precise - 1) > 0);
	CHECK(pcpu_hcounter_compare(h, precise + 1) < 0);
	CHECK(pcpu_hcounter_compare(h, a.min - 1) > 0);
	CHECK(pcpu_hcounter_compare(h, a.max + 1) < 0);
}

/* ---- 1. one thread ------------------------------------------------------------ */

static int64_t expected_range(int64_t batch, int64_t n)
{
	int64_t range = n * (batch - 1), items = n, b = batch;

	while (items > 16) {
		items = (items + 7) / 8;
		range += items * (b * 8 - b);
		b *= 8;
	}
	return range;
}

static void one_thread(int percpu)
{
	pcpu_hcounter_t *c;
	int64_t n = 0, admitted = 0, r;

	errno = 0;
	CHECK(pcpu_hcounter_create(0) == NULL && errno == EINVAL);
	CHECK(pcpu_hcounter_create(1) == NULL && errno == EINVAL);
	CHECK(pcpu_hcounter_create(48) == NULL && errno == EINVAL);
	CHECK(pcpu_hcounter_create((int64_t)1 << 31) == NULL && errno == EINVAL);
	CHECK(pcpu_hcounter_create_in(NULL, 32) == NULL && errno == EINVAL);
	CHECK(pcpu_hcounter_sum(NULL) == 0 && errno == EINVAL);
	CHECK(pcpu_hcounter_reset(NULL) == -1 && errno == EINVAL);
	pcpu_hcounter_destroy(NULL);

	c = pcpu_hcounter_create(32);
	CHECK(c);
	CHECK(pcpu_hcounter_is_percpu(c) == percpu);
	r = pcpu_hcounter_range(c);
	{
		/* The CPU slots: pcpu_nslots() less the owned ones. */
		int64_t cpus = (int64_t)pcpu_nslots() - (int64_t)pcpu_worker_max();

		CHECK(r == (percpu ? expected_range(32, cpus) : 0));
		printf("one thread: %" PRId64 " CPU slots, range %" PRId64 " (%s)\n", cpus, r,
		       percpu ? "per-CPU" : "atomic");
	}
	h = c;
	check_bounds("new", 0);
	for (int i = 0; i < 100000; i++) {
		int64_t v = (i % 7 == 0) ? 1000 - (i % 2000) : (i % 3) - 1;

		pcpu_hcounter_add(c, v);
		n += v;
		if (i % 9973 == 0) {
			CHECK(pcpu_hcounter_sum(c) == n);
			check_bounds("adds", n);
		}
	}
	CHECK(pcpu_hcounter_sum(c) == n);
	check_bounds("after adds", n);
	CHECK(pcpu_hcounter_reset(c) == 0);
	CHECK(pcpu_hcounter_sum(c) == 0);
	check_bounds("reset", 0);
	pcpu_hcounter_add(c, 5);
	CHECK(pcpu_hcounter_sum(c) == 5);
	CHECK(pcpu_hcounter_reset(c) == 0);

	/* A limit far below the range: exact from the first unit. */
	for (int i = 0; i < 100; i++)
		admitted += pcpu_hcounter_limited_add(c, 1, 10);
	CHECK(admitted == 10);
	CHECK(pcpu_hcounter_sum(c) == 10);
	check_bounds("at the limit", 10);
	CHECK(!pcpu_hcounter_limited_add(c, 1, 10));
	CHECK(pcpu_hcounter_limited_add(c, -4, 10)); /* a release */
	CHECK(pcpu_hcounter_limited_add(c, 3, 10) && !pcpu_hcounter_limited_add(c, 2, 10));
	CHECK(pcpu_hcounter_limited_add(c, 1, 10) && pcpu_hcounter_sum(c) == 10);
	/* Far below a high limit again: back to the fast path, still exact. */
	pcpu_hcounter_add(c, -10);
	for (int i = 0; i < 10000; i++)
		CHECK(pcpu_hcounter_limited_add(c, 1, 10 * r + 1000000));
	CHECK(pcpu_hcounter_sum(c) == 10000);
	check_bounds("after the limit", 10000);
	CHECK(pcpu_hcounter_reset(c) == 0 && pcpu_hcounter_sum(c) == 0);
	pcpu_hcounter_destroy(c);
}

/* ---- 2-5. threads ------------------------------------------------------------ */

struct result {
	int64_t added, admitted;
};
static struct result results[MAX_THREADS];
static __thread int64_t sig_added, sig_admitted;
static __thread int in_work;

static void handler(int sig)
{
	int saved = errno;

	(void)sig;
	if (!in_work)
		goto out;
	switch (__atomic_load_n(&phase, __ATOMIC_RELAXED)) {
	case 2:
		pcpu_hcounter_add(h, -3);
		sig_added -= 3;
		break;
	case 3:
		pcpu_hcounter_add(h, 2);
		sig_added += 2;
		break;
	case 4:
		sig_admitted += pcpu_hcounter_limited_add(h, 1, limit);
		break;
	case 5:
		if (pcpu_hcounter_limited_add(h, 1, limit)) {
			if (__atomic_add_fetch(&held, 1, __ATOMIC_SEQ_CST) > limit) {
				fprintf(stderr, "FAIL: more than %" PRId64 " units held at once\n", limit);
				_exit(1);
			}
			__atomic_sub_fetch(&held, 1, __ATOMIC_SEQ_CST);
			pcpu_hcounter_add(h, -1);
		}
		break;
	}
out:
	errno = saved;
}

static int64_t attempts_per_thread;

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct result r = {0};
	int64_t mine = 0; /* phase 5: units this thread holds */
	sigset_t all;

	stress_rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)me << 20) ^ (uint64_t)time(NULL);
	(void)pcpu_thread_init();
	stress_check_mode(expect_mode, &mode_mismatch);
	stress_enter(&harness, (unsigned)me);
	in_work = 1;
	for (int64_t i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
		uint64_t x = stress_rand();
		int64_t v;

		switch (phase) {
		case 2:
			v = (x & 7) == 0 ? (int64_t)(x >> 8) % 4001 - 2000 : (int64_t)(x >> 8) % 21 - 10;
			pcpu_hcounter_add(h, v);
			r.added += v;
			break;
		case 3:
			v = (x & 7) == 0 ? (int64_t)(x >> 8) % 3000 : (int64_t)(x >> 8) % 4;
			pcpu_hcounter_add(h, v);
			r.added += v;
			break;
		case 4:
			if (i >= attempts_per_thread)
				goto done;
			r.admitted += pcpu_hcounter_limited_add(h, 1, limit);
			break;
		case 6:
			/* A round: take until refused, give all back, meet. */
			if (i >= rounds)
				goto done;
			while (pcpu_hcounter_limited_add(h, 1, limit)) {
				if (__atomic_add_fetch(&held, 1, __ATOMIC_SEQ_CST) > limit) {
					fprintf(stderr, "FAIL: switching: more than %" PRId64
						" units held at once\n", limit);
					exit(1);
				}
				mine++;
			}
			pthread_barrier_wait(&round_barrier);
			while (mine > 0) {
				__atomic_sub_fetch(&held, 1, __ATOMIC_SEQ_CST);
				pcpu_hcounter_add(h, -1);
				mine--;
			}
			if (pthread_barrier_wait(&round_barrier) == PTHREAD_BARRIER_SERIAL_THREAD)
				CHECK(pcpu_hcounter_sum(h) == 0);
			pthread_barrier_wait(&round_barrier);
			break;
		case 5:
			if (mine < 3 && (x & 1)) {
				if (pcpu_hcounter_limited_add(h, 1, limit)) {
					if (__atomic_add_fetch(&held, 1, __ATOMIC_SEQ_CST) > limit) {
						fprintf(stderr, "FAIL: more than %" PRId64
							" units held at once\n", limit);
						exit(1);
					}
					mine++;
				}
			} else if (mine > 0) {
				__atomic_sub_fetch(&held, 1, __ATOMIC_SEQ_CST);
				pcpu_hcounter_add(h, -1);
				mine--;
			}
			break;
		}
	}
done:
	in_work = 0;
	while (mine > 0) {
		__atomic_sub_fetch(&held, 1, __ATOMIC_SEQ_CST);
		pcpu_hcounter_add(h, -1);
		mine--;
	}
	stress_leave(&harness, (unsigned)me);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	r.added += sig_added;
	r.admitted += sig_admitted;
	results[me] = r;
	return NULL;
}

static unsigned long monotonic_checks;

static void *reader(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int64_t s1 = pcpu_hcounter_sum(h);
		struct pcpu_hcounter_approx a = pcpu_hcounter_approx(h);
		int64_t s2 = pcpu_hcounter_sum(h);

		if (a.min > s2 || a.max < s1) {
			fprintf(stderr, "FAIL: growing counter: approx [%" PRId64 ", %" PRId64
				"] outside the sums %" PRId64 " .. %" PRId64 " around it\n",
				a.min, a.max, s1, s2);
			exit(1);
		}
		CHECK(pcpu_hcounter_compare(h, s1 - 1) > 0);
		monotonic_checks++;
	}
	return NULL;
}

static void run_phase(int ph, double seconds)
{
	pthread_t th[MAX_THREADS], rd;

	phase = ph;
	__atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
	memset(results, 0, sizeof(results));
	stress_start(&harness);
	if (ph == 3)
		CHECK(pthread_create(&rd, NULL, reader, NULL) == 0);
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
	if (ph == 4 || ph == 6) {
		/* Until every thread made its attempts, or its rounds. */
		for (int i = 0; i < nthreads; i++)
			CHECK(pthread_join(th[i], NULL) == 0);
		__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	} else {
		double end = now_s() + seconds;

		while (now_s() < end)
			usleep(50000);
		__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
		for (int i = 0; i < nthreads; i++)
			CHECK(pthread_join(th[i], NULL) == 0);
	}
	if (ph == 3)
		CHECK(pthread_join(rd, NULL) == 0);
	stress_join(&harness);
}

int main(int argc, char **argv)
{
	double seconds = 2;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct sigaction sa;
	int percpu;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-mode") && i + 1 < argc)
			expect_mode = argv[++i];
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else {
			fprintf(stderr, "usage: %s --expect-mode glibc|own|fallback [--seconds S]\n",
				argv[0]);
			return 2;
		}
	}
	stress_check_mode(expect_mode, &mode_mismatch);
	percpu = pcpu_sync_percpu_error() == 0;
	one_thread(percpu);

	nthreads = (int)(2 * ncpu < 4 ? 4 : 2 * ncpu);
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	harness.ntids = (unsigned)nthreads;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

	/* 2. Exactness, batch 16 so that carries are frequent. */
	h = pcpu_hcounter_create(16);
	CHECK(h);
	run_phase(2, seconds);
	{
		int64_t want = 0;

		for (int i = 0; i < nthreads; i++)
			want += results[i].added;
		CHECK_EQ_U64(pcpu_hcounter_sum(h), want);
		check_bounds("after the threads", want);
		CHECK(pcpu_hcounter_reset(h) == 0);
		CHECK(pcpu_hcounter_sum(h) == 0);
		check_bounds("reset after the threads", 0);
		printf("exactness: %d threads, %" PRId64 " added: exact, bounds hold\n", nthreads, want);
	}

	/* 3. Bounds while a counter grows. */
	run_phase(3, seconds);
	{
		int64_t want = 0;

		for (int i = 0; i < nthreads; i++)
			want += results[i].added;
		CHECK_EQ_U64(pcpu_hcounter_sum(h), want);
		check_bounds("grown", want);
		printf("growing: %lu reads during adds, bounds hold\n", monotonic_checks);
		CHECK(monotonic_checks > 0);
	}
	pcpu_hcounter_destroy(h);

	/* 4. The limit: exactly `limit` admitted of twice as many attempts. */
	h = pcpu_hcounter_create(16);
	CHECK(h);
	attempts_per_thread = 100000;
	limit = (int64_t)nthreads * attempts_per_thread / 2;
	run_phase(4, 0);
	{
		int64_t admitted = 0;

		for (int i = 0; i < nthreads; i++)
			admitted += results[i].admitted;
		CHECK_EQ_U64(admitted, limit);
		CHECK_EQ_U64(pcpu_hcounter_sum(h), limit);
		check_bounds("at the limit", limit);
		printf("limit: %d threads x %" PRId64 " attempts: %" PRId64 " admitted, exactly the limit\n",
		       nthreads, attempts_per_thread, admitted);
	}

	/* 5. Near the limit, with releases: never more held than the limit. */
	CHECK(pcpu_hcounter_reset(h) == 0);
	limit = nthreads; /* each holds at most 3: the limit is always in play */
	run_phase(5, seconds);
	CHECK_EQ_U64(pcpu_hcounter_sum(h), 0);
	CHECK(__atomic_load_n(&held, __ATOMIC_RELAXED) == 0);
	check_bounds("released", 0);
	printf("limit with releases: never more than %" PRId64 " held\n", limit);

	/* 6. Switching in and out of the precise mode, every round. */
	if (percpu) {
		int64_t gen0 = __atomic_load_n(&h->pcpu__h.state, __ATOMIC_RELAXED) >> 2;

		limit = 4 * pcpu_hcounter_range(h) + 1000;
		rounds = 300;
		pcpu__test_inject_spin = 100;
		CHECK(pthread_barrier_init(&round_barrier, NULL, (unsigned)nthreads) == 0);
		run_phase(6, 0);
		pcpu__test_inject_spin = 0;
		CHECK_EQ_U64(pcpu_hcounter_sum(h), 0);
		printf("switching: %" PRId64 " rounds, %" PRId64 " switches, never more than %" PRId64
		       " held\n", rounds,
		       (__atomic_load_n(&h->pcpu__h.state, __ATOMIC_RELAXED) >> 2) - gen0, limit);
	}
	pcpu_hcounter_destroy(h);

	CHECK(!mode_mismatch);
	printf("hcounter: mode %s: exact\n", pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
