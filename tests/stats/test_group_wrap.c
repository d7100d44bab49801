/*
 * Values that are documented to wrap modulo 2^64 do, without undefined
 * behaviour: group members (the rseq path, the fallback lanes, and the
 * reader's sum over lanes), counters and gauges of a registry, and their
 * exposition. The ASan+UBSan build (-fno-sanitize-recover) aborts on a
 * signed overflow, so a signed add anywhere on these paths fails this test
 * there; the plain build checks the wrapped values.
 *
 * ctest runs it with rseq and with PCPU_RSEQ=0 (fallback lanes only).
 */
#include "../check.h"
#include <pcpu/pcpu.h>
#include <pcpu/group.h>
#include <pcpu/stats.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static pcpu_group_t *g, *g2; /* three members; two (for add2) */

/* One thread per CPU adds INT64_MAX to every member: with two CPUs the
 * reader sums two lanes that each hold INT64_MAX; with one, the second add
 * overflows the lane itself. */
static void *adder(void *arg)
{
	long cpu = (long)arg;
	cpu_set_t set;
	int64_t d[3] = { INT64_MAX, INT64_MAX, INT64_MIN };

	CPU_ZERO(&set);
	CPU_SET((int)cpu, &set);
	(void)sched_setaffinity(0, sizeof set, &set); /* best effort */
	pcpu_group_add(g, 1, d);
	pcpu_group_add2(g2, 1, INT64_MAX, 1);
	return NULL;
}

static void check_group(void)
{
	int64_t out[3];
	pthread_t th[2];
	long k;

	g = pcpu_group_alloc(3, 2);
	g2 = pcpu_group_alloc(2, 2);
	CHECK(g != NULL && g2 != NULL);
	/* Same lane, one thread: the add itself wraps. */
	{
		int64_t d[3] = { INT64_MAX, INT64_MAX, INT64_MIN };

		pcpu_group_add(g, 0, d);
		pcpu_group_add(g, 0, d);
	}
	CHECK(pcpu_group_read(g, 0, out) == 0);
	CHECK_EQ_U64(out[0], (uint64_t)INT64_MAX * 2);
	CHECK_EQ_U64(out[1], (uint64_t)INT64_MAX * 2);
	CHECK_EQ_U64(out[2], 0); /* INT64_MIN + INT64_MIN wraps to 0 */
	/* add2, the member count known to the compiler. */
	pcpu_group_add2(g2, 0, INT64_MAX, INT64_MIN);
	pcpu_group_add2(g2, 0, INT64_MAX, INT64_MIN);
	pcpu_group_add2(g2, 0, 2, 5);
	CHECK(pcpu_group_read(g2, 0, out) == 0);
	CHECK_EQ_U64(out[0], 0); /* 2^64 - 2 + 2 */
	CHECK_EQ_U64(out[1], 5);
	/* Lanes of two threads, on two CPUs where there are two. */
	for (k = 0; k < 2; k++)
		CHECK(pthread_create(&th[k], NULL, adder, (void *)(k % sysconf(_SC_NPROCESSORS_ONLN))) == 0);
	for (k = 0; k < 2; k++)
		CHECK(pthread_join(th[k], NULL) == 0);
	CHECK(pcpu_group_read(g, 1, out) == 0);
	CHECK_EQ_U64(out[0], (uint64_t)INT64_MAX * 2);
	CHECK_EQ_U64(out[1], (uint64_t)INT64_MAX * 2);
	CHECK_EQ_U64(out[2], 0);
	CHECK(pcpu_group_read(g2, 1, out) == 0);
	CHECK_EQ_U64(out[0], (uint64_t)INT64_MAX * 2);
	CHECK_EQ_U64(out[1], 2);
	pcpu_group_free(g);
	pcpu_group_free(g2);
}

static void check_registry(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_counter_t c;
	pcpu_gauge_t ga;
	char *text;
	size_t len;

	CHECK(reg != NULL);
	c = pcpu_registry_counter(reg, "wrap_total", "Wraps.");
	ga = pcpu_registry_gauge(reg, "wrap_gauge", "Wraps too.");
	CHECK(c && ga);
	pcpu_counter_add(c, INT64_MAX);
	pcpu_counter_add(c, INT64_MAX);
	pcpu_counter_add(c, 3); /* 2^64 - 2 + 3 = 1 */
	CHECK_EQ_U64(pcpu_counter_fetch(c), 1);
	pcpu_gauge_add(ga, INT64_MAX);
	pcpu_gauge_add(ga, INT64_MAX);
	CHECK(pcpu_gauge_read(ga) == -2);
	pcpu_gauge_sub(ga, INT64_MIN); /* -2 - INT64_MIN wraps to INT64_MAX - 1 */
	CHECK(pcpu_gauge_read(ga) == INT64_MAX - 1);
	CHECK(pcpu_gauge_set(ga, INT64_MIN) == 0);
	pcpu_gauge_add(ga, -1);
	CHECK(pcpu_gauge_read(ga) == INT64_MAX);
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	CHECK(strstr(text, "\nwrap_total 1\n") != NULL);
	CHECK(strstr(text, "\nwrap_gauge 9223372036854775807\n") != NULL);
	free(text);
	pcpu_registry_destroy(reg);
}

int main(void)
{
	check_group();
	check_registry();
	puts("group_wrap: ok");
	return 0;
}
