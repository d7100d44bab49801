/*
 * Resets of one counter are serialised: the reset lock, checked by stopping
 * a reset between reading the sum and subtracting it.
 *
 * pcpu_counter_fetch_and_zero() calls the library's test hook
 * pcpu__test_reset_pause(counter), when set, between the two. Resetter A is
 * held there (on a semaphore) while resetter B resets the same counter: with
 * the lock, B cannot even read the sum until A has subtracted it, so B has
 * not returned 50 ms later, and once A is released A returns 1000 and B 0.
 * Without the lock B reads the same 1000 and reports it a second time.
 *
 * Then ~1 s of adders (positive amounts only) and two resetters whose hook
 * sometimes yields, widening the same window: every reset returns a value
 * >= 0 as int64 (two overlapping resets would subtract the same sum twice
 * and leave the counter negative), and the resets' values plus the final
 * fetch add up to what was added, exactly.
 *
 * Links the static library: the hook is a hidden symbol of src/core/counter.c.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <time.h>
#include <unistd.h>

extern void (*pcpu__test_reset_pause)(void *counter);

static pcpu_counter_t c;
static sem_t a_paused, release_a;
static int pause_armed; /* the next hook call pauses (once) */
static int hook_calls;
static int b_done;
static uint64_t result_a, result_b;

static void pause_once(void *counter)
{
	__atomic_fetch_add(&hook_calls, 1, __ATOMIC_RELAXED);
	if (counter == (void *)c && __atomic_exchange_n(&pause_armed, 0, __ATOMIC_ACQ_REL)) {
		sem_post(&a_paused);
		while (sem_wait(&release_a) != 0)
			CHECK(errno == EINTR);
	}
}

static void *resetter_a(void *arg)
{
	(void)arg;
	result_a = pcpu_counter_fetch_and_zero(c);
	return NULL;
}

static void *resetter_b(void *arg)
{
	(void)arg;
	result_b = pcpu_counter_fetch_and_zero(c);
	__atomic_store_n(&b_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_paused_reset(void)
{
	pthread_t a, b;
	struct timespec deadline;

	c = pcpu_counter_alloc();
	CHECK(c != NULL);
	CHECK(sem_init(&a_paused, 0, 0) == 0 && sem_init(&release_a, 0, 0) == 0);
	for (int i = 0; i < 1000; i++)
		pcpu_counter_inc(c);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 1000);

	pause_armed = 1;
	pcpu__test_reset_pause = pause_once;
	CHECK(pthread_create(&a, NULL, resetter_a, NULL) == 0);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 120; /* only a hook never called takes that long */
	if (sem_timedwait(&a_paused, &deadline) != 0) {
		fprintf(stderr, "resetter A never reached pcpu__test_reset_pause (%d hook calls): is the hook called by pcpu_counter_fetch_and_zero?\n",
			__atomic_load_n(&hook_calls, __ATOMIC_RELAXED));
		exit(1);
	}
	/* A has read the sum (1000) and not yet subtracted it. */
	CHECK(pthread_create(&b, NULL, resetter_b, NULL) == 0);
	usleep(50 * 1000);
	int b_returned_early = __atomic_load_n(&b_done, __ATOMIC_ACQUIRE);
	sem_post(&release_a);
	CHECK(pthread_join(a, NULL) == 0);
	CHECK(pthread_join(b, NULL) == 0);
	pcpu__test_reset_pause = NULL;
	printf("paused reset: B %s while A was paused; A returned %llu, B %llu\n",
	       b_returned_early ? "RETURNED" : "waited", (unsigned long long)result_a,
	       (unsigned long long)result_b);
	if (b_returned_early) {
		fprintf(stderr, "a second reset of the same counter ran while the first was between its read and its subtraction: no reset lock\n");
		exit(1);
	}
	CHECK_EQ_U64(result_a, 1000);
	CHECK_EQ_U64(result_b, 0);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 0);
	CHECK_EQ_U64(pcpu_counter_fetch_and_zero(c), 0);
	pcpu_counter_add(c, 7);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 7);
	CHECK(pcpu_counter_free(c) == 0);
	sem_destroy(&a_paused);
	sem_destroy(&release_a);
}

/* ---- concurrent adders and resetters ------------------------------------- */

#define ADDERS 3
#define RESETTERS 2

static pcpu_counter_t cs[2]; /* a single counter, and element 2 of an array */
static int stop;
static uint64_t added[2];
static uint64_t reported[RESETTERS][2];
static long resets[RESETTERS];
static long negative;
static __thread uint64_t hook_rng;

static void sometimes_yield(void *counter)
{
	(void)counter;
	if (!hook_rng)
		hook_rng = (uint64_t)(uintptr_t)&hook_rng | 1;
	hook_rng ^= hook_rng << 13;
	hook_rng ^= hook_rng >> 7;
	hook_rng ^= hook_rng << 17;
	if (hook_rng % 4 == 0)
		sched_yield();
	else if (hook_rng % 4 == 1)
		for (volatile int i = 0; i < 2000; i++)
			;
}

static void *adder(void *arg)
{
	uint64_t local[2] = {0, 0};
	long i = 0;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int k = (int)(i & 1);
		int64_t v = 1 + (i % 5) + (intptr_t)arg;

		if (i % 16 == 3)
			pcpu_counter_add_atomic(cs[k], v); /* mirror words too */
		else
			pcpu_counter_add(cs[k], v);
		local[k] += (uint64_t)v;
		i++;
	}
	__atomic_fetch_add(&added[0], local[0], __ATOMIC_RELAXED);
	__atomic_fetch_add(&added[1], local[1], __ATOMIC_RELAXED);
	return NULL;
}

static void *resetter(void *arg)
{
	int me = (int)(intptr_t)arg;
	long n = 0;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int k = (int)(n & 1);
		uint64_t v = pcpu_counter_fetch_and_zero(cs[k]);

		if ((int64_t)v < 0) {
			if (__atomic_fetch_add(&negative, 1, __ATOMIC_RELAXED) < 5)
				fprintf(stderr, "resetter %d: fetch_and_zero returned %lld with only positive adds\n",
					me, (long long)(int64_t)v);
		}
		reported[me][k] += v;
		n++;
		__atomic_store_n(&resets[me], n, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void test_concurrent(double seconds)
{
	pthread_t a[ADDERS], r[RESETTERS];
	pcpu_counter_t arr = pcpu_counter_alloc_array(3);

	cs[0] = pcpu_counter_alloc();
	CHECK(cs[0] && arr);
	cs[1] = arr + 2;
	pcpu__test_reset_pause = sometimes_yield;
	for (int i = 0; i < RESETTERS; i++)
		CHECK(pthread_create(&r[i], NULL, resetter, (void *)(intptr_t)i) == 0);
	for (int i = 0; i < ADDERS; i++)
		CHECK(pthread_create(&a[i], NULL, adder, (void *)(intptr_t)i) == 0);
	/* At least SECONDS, then until each resetter has reset more than 10
	 * times: a loaded machine may give them a few in 2 s (4 + 1 seen). */
	usleep((useconds_t)(seconds * 1e6));
	while (__atomic_load_n(&resets[0], __ATOMIC_RELAXED) <= 10 ||
	       __atomic_load_n(&resets[1], __ATOMIC_RELAXED) <= 10)
		usleep(10000);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < ADDERS; i++)
		CHECK(pthread_join(a[i], NULL) == 0);
	for (int i = 0; i < RESETTERS; i++)
		CHECK(pthread_join(r[i], NULL) == 0);
	pcpu__test_reset_pause = NULL;

	for (int k = 0; k < 2; k++) {
		uint64_t final = pcpu_counter_fetch(cs[k]);
		uint64_t sum = final;

		for (int i = 0; i < RESETTERS; i++)
			sum += reported[i][k];
		printf("counter %d: added %llu, resets reported %llu + %llu, final %llu\n", k,
		       (unsigned long long)added[k], (unsigned long long)reported[0][k],
		       (unsigned long long)reported[1][k], (unsigned long long)final);
		CHECK(reported[0][k] + reported[1][k] > 0);
		CHECK_EQ_U64(sum, added[k]);
	}
	printf("resets: %ld + %ld, negative results: %ld\n", resets[0], resets[1], negative);
	CHECK(resets[0] > 10 && resets[1] > 10);
	CHECK(negative == 0);
	CHECK(pcpu_counter_free(cs[0]) == 0);
	CHECK(pcpu_counter_free(arr) == 0);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1.0;

	printf("mode %s\n", pcpu_rseq_mode_name(pcpu_rseq_mode()));
	test_paused_reset();
	test_concurrent(seconds);
	printf("test_reset_interleaving: ok\n");
	return 0;
}
