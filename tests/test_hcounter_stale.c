/*
 * A limited add checked before a precise period must not commit after it
 * (pcpu/hcounter.h: "never lets it pass").
 *
 * Thread T makes a limited add of 500 (a carrying add: the batch is 64) and
 * is held, by the library's test hook pcpu__test_hcounter_checked(),
 * between its check and its section, its room reserved. Meanwhile the main
 * thread takes units until refused (the counter goes precise and admits up
 * to the limit exactly), gives most back, and makes one more limited add,
 * after which the counter may leave its precise mode. Then T goes on. The
 * precise sum must never pass the limit: either the counter stayed precise
 * while T's reservation was held (T's section finds the gate closed and its
 * add is checked again, exactly), or it left with room for it.
 *
 * Before the fix the counter left the precise mode with the sum at 1,108,
 * T's section found the gate open again and committed: 1,608 of a limit of
 * 1,528. Both threads run on one CPU with the CPU number as the index, so
 * that T's section runs on the slot it was checked for.
 */
#define _GNU_SOURCE
#include "check.h"
#include <pcpu/pcpu.h>
#include <pthread.h>
#include <sched.h>

extern void (*pcpu__test_hcounter_checked)(pcpu_hcounter_t *h);

static pcpu_hcounter_t *h;
/* 1528 with 2 CPU slots (the counter's range, pcpu_hcounter_range(), is
 * then 126). The range grows with the slots, and the limit must grow with
 * it for T's add to be a carrying one that parks and for the precise mode
 * to be left where it was (a limit of 2 x range and the carries' room
 * below): at PCPU_NSLOTS=64 the counter was precise from the start, T
 * never parked, and the test waited for ever. `m`, 3 x the range's growth,
 * covers both; the scenario's other figures move with it. */
static int64_t m;
static int64_t limit;
static int parked, go, held_once;
static int t_admitted = -1;

static void park(pcpu_hcounter_t *c)
{
	(void)c;
	if (__atomic_exchange_n(&held_once, 1, __ATOMIC_SEQ_CST))
		return;
	__atomic_store_n(&parked, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&go, __ATOMIC_SEQ_CST))
		sched_yield();
}

/* Both threads on one CPU: the first the process may run on (a container
 * may not allow CPU 0). */
static int the_cpu = -1;

static void pin_one_cpu(void)
{
	cpu_set_t s;

	if (the_cpu < 0) {
		CHECK(sched_getaffinity(0, sizeof s, &s) == 0);
		for (the_cpu = 0; the_cpu < CPU_SETSIZE && !CPU_ISSET(the_cpu, &s); the_cpu++)
			;
		CHECK(the_cpu < CPU_SETSIZE);
	}
	CPU_ZERO(&s);
	CPU_SET(the_cpu, &s);
	CHECK(sched_setaffinity(0, sizeof s, &s) == 0);
}

static void *t_main(void *arg)
{
	(void)arg;
	pin_one_cpu();
	__atomic_store_n(&t_admitted, pcpu_hcounter_limited_add(h, 500, limit), __ATOMIC_SEQ_CST);
	return NULL;
}

int main(void)
{
	pthread_t t;
	int64_t took = 0, sum;

	pin_one_cpu();
	h = pcpu_hcounter_create(64);
	CHECK(h);
	m = pcpu_hcounter_range(h) > 126 ? 3 * (pcpu_hcounter_range(h) - 126) : 0;
	limit = 1528 + m;
	if (!pcpu_hcounter_is_percpu(h) || PCPU__HC_MODE(h->pcpu__h.state) != PCPU__HC_PERCPU) {
		printf("test_hcounter_stale: the counter is atomic here (no rseq or membarrier): "
		       "nothing to race\n");
		return 0;
	}
	pcpu__test_hcounter_checked = park;
	CHECK(pthread_create(&t, NULL, t_main, NULL) == 0);
	while (!__atomic_load_n(&parked, __ATOMIC_SEQ_CST)) {
		if (__atomic_load_n(&t_admitted, __ATOMIC_SEQ_CST) >= 0) {
			fprintf(stderr, "FAIL: T's add of 500 (limit %" PRId64 ", range %" PRId64
				") did not park: not a carrying add\n", limit, pcpu_hcounter_range(h));
			return 1;
		}
		sched_yield();
	}
	/* T holds its checked, reserved add; the counter goes precise. */
	while (pcpu_hcounter_limited_add(h, 8, limit))
		took += 8;
	CHECK(pcpu_hcounter_sum(h) == took && took <= limit);
	pcpu_hcounter_add(h, -(took - (1100 + m)));
	CHECK(pcpu_hcounter_limited_add(h, 8, limit)); /* may leave the precise mode */
	__atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
	CHECK(pthread_join(t, NULL) == 0);
	pcpu__test_hcounter_checked = NULL;
	sum = pcpu_hcounter_sum(h);
	printf("main took %" PRId64 " (then held %" PRId64 "), T's 500 %s: sum %" PRId64 " of a limit of %" PRId64 "\n",
	       took, 1108 + m, t_admitted ? "admitted" : "refused", sum, limit);
	if (sum > limit) {
		fprintf(stderr, "FAIL: a limited add checked before the precise mode committed after it: "
			"%" PRId64 " > %" PRId64 "\n", sum, limit);
		return 1;
	}
	CHECK(sum == 1108 + m + (t_admitted ? 500 : 0));
	pcpu_hcounter_destroy(h);
	printf("test_hcounter_stale: ok\n");
	return 0;
}
