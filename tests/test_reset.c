/*
 * fetch_and_zero reports every add exactly once: adders add known amounts
 * while two resetters call pcpu_counter_fetch_and_zero() in a loop (and a
 * third thread fetches, which must not disturb anything). The resets'
 * returns plus the final fetch must equal the total added, exactly.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#define ADDERS 6
#define ADDS 400000

static pcpu_counter_t c;
static int adders_done;
static uint64_t reported[2];
static long resets[2];

static long resets_done(void)
{
	return __atomic_load_n(&resets[0], __ATOMIC_RELAXED) +
	       __atomic_load_n(&resets[1], __ATOMIC_RELAXED);
}

static void *adder(void *arg)
{
	for (long i = 0; i < ADDS; i++) {
		pcpu_counter_add(c, (int64_t)(i % 7) + 1 + (intptr_t)arg);
		if (i == ADDS / 2) {
			/* Half way, let two resets complete: the second one
			 * starts after our first half, so resets surely take
			 * counts away while adds go on, however the scheduler
			 * runs the threads of an oversubscribed machine. */
			long r0 = resets_done();

			while (resets_done() < r0 + 2)
				sched_yield();
		}
	}
	return NULL;
}

static void *resetter(void *arg)
{
	int me = (int)(intptr_t)arg;

	while (!__atomic_load_n(&adders_done, __ATOMIC_RELAXED)) {
		reported[me] += pcpu_counter_fetch_and_zero(c);
		__atomic_fetch_add(&resets[me], 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&adders_done, __ATOMIC_RELAXED))
		(void)pcpu_counter_fetch(c);
	return NULL;
}

int main(void)
{
	pthread_t a[ADDERS], r[2], rd;
	uint64_t expected = 0;

	c = pcpu_counter_alloc();
	CHECK(c != NULL);
	/* Resetters first, so both are running before the adds start. */
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&r[i], NULL, resetter, (void *)(intptr_t)i) == 0);
	while (!__atomic_load_n(&resets[0], __ATOMIC_RELAXED) ||
	       !__atomic_load_n(&resets[1], __ATOMIC_RELAXED))
		sched_yield();
	for (int i = 0; i < ADDERS; i++) {
		for (long k = 0; k < ADDS; k++)
			expected += (uint64_t)(k % 7) + 1 + (uint64_t)i;
		CHECK(pthread_create(&a[i], NULL, adder, (void *)(intptr_t)i) == 0);
	}
	CHECK(pthread_create(&rd, NULL, reader, NULL) == 0);
	for (int i = 0; i < ADDERS; i++)
		pthread_join(a[i], NULL);
	__atomic_store_n(&adders_done, 1, __ATOMIC_RELAXED);
	pthread_join(r[0], NULL);
	pthread_join(r[1], NULL);
	pthread_join(rd, NULL);

	uint64_t final = pcpu_counter_fetch(c);
	printf("resets %ld + %ld, reported %llu + %llu, final %llu, expected %llu\n",
	       resets[0], resets[1], (unsigned long long)reported[0],
	       (unsigned long long)reported[1], (unsigned long long)final,
	       (unsigned long long)expected);
	CHECK(resets[0] > 0 && resets[1] > 0);
	CHECK(reported[0] + reported[1] > 0); /* resets really took counts away */
	CHECK_EQ_U64(reported[0] + reported[1] + final, expected);
	/* After a last reset the counter reads zero and keeps counting. */
	CHECK_EQ_U64(pcpu_counter_fetch_and_zero(c), final);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 0);
	pcpu_counter_add(c, 42);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 42);
	printf("test_reset: exact\n");
	return 0;
}
