/*
 * Gauges: add/sub/inc/dec/set semantics; set stores only slot 0's base word
 * (never a word an adder writes); no add is lost to concurrent sets; sets
 * racing each other leave one of their values.
 */
#include "../check.h"
#include <pcpu/pcpu.h>
#include <pcpu/gauge.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

static void test_basics(void)
{
	pcpu_gauge_t g = pcpu_gauge_alloc();

	CHECK(g);
	CHECK(pcpu_gauge_read(g) == 0);
	pcpu_gauge_add(g, 10);
	pcpu_gauge_sub(g, 3);
	pcpu_gauge_inc(g);
	pcpu_gauge_dec(g);
	pcpu_gauge_dec(g);
	CHECK(pcpu_gauge_read(g) == 6);
	CHECK(pcpu_gauge_set(g, -42) == 0);
	CHECK(pcpu_gauge_read(g) == -42);
	pcpu_gauge_add(g, 2);
	CHECK(pcpu_gauge_read(g) == -40);
	CHECK(pcpu_gauge_set(g, INT64_MAX) == 0);
	CHECK(pcpu_gauge_read(g) == INT64_MAX);
	pcpu_gauge_sub(g, INT64_MIN); /* wraps, like any int64 arithmetic mod 2^64 */
	CHECK(pcpu_gauge_read(g) == -1);
	CHECK(pcpu_gauge_set(NULL, 1) < 0 && errno == EINVAL);
	CHECK(pcpu_gauge_free(g) == 0);
	CHECK(pcpu_gauge_free(NULL) == 0);
}

/* set() writes slot 0's mirror word and nothing else: no slot word (those
 * belong to the rseq adders), no other mirror word. */
static void test_set_touches_only_base(void)
{
	pcpu_gauge_t g = pcpu_gauge_alloc();
	unsigned s, n = pcpu_nslots();
	struct pcpu_gauge *before = calloc(2 * n, sizeof *before);

	CHECK(g && before);
	pcpu_gauge_add(g, 5);
	/* Slots 0..n-1, then their mirrors n..2n-1 (pcpu/zone.h). */
	for (s = 0; s < 2 * n; s++)
		memcpy(&before[s], pcpu_slot_ptr(g, s), sizeof before[s]);
	CHECK(pcpu_gauge_set(g, 1000) == 0);
	for (s = 0; s < 2 * n; s++) {
		struct pcpu_gauge now;

		memcpy(&now, pcpu_slot_ptr(g, s), sizeof now);
		if (s == n) /* slot 0's mirror word: the offset */
			CHECK(now.pcpu__adds.pcpu__word == before[s].pcpu__adds.pcpu__word + 995);
		else
			CHECK(memcmp(&now, &before[s], sizeof now) == 0);
	}
	CHECK(pcpu_gauge_read(g) == 1000);
	free(before);
	pcpu_gauge_free(g);
}

enum { ADDERS = 8, ADDS = 200000, SETTERS = 3 };
static pcpu_gauge_t shared;
static int adders_done;

static void *adder(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < ADDS; i++) {
		pcpu_gauge_add(shared, 3);
		pcpu_gauge_dec(shared);
	}
	return NULL;
}

static void *setter(void *arg)
{
	int64_t v = (int64_t)(intptr_t)arg;

	while (!__atomic_load_n(&adders_done, __ATOMIC_ACQUIRE)) {
		CHECK(pcpu_gauge_set(shared, v) == 0);
		(void)pcpu_gauge_read(shared);
	}
	return NULL;
}

/* Adds and sets concurrently: sets never lose an add (the adds' own sum is
 * exact), and after everyone stops the gauge reads one set's value plus
 * adds that came after it -- which a final quiet set/add pins down. */
static void test_concurrent(void)
{
	pthread_t a[ADDERS], s[SETTERS];
	int i;
	int64_t v;

	shared = pcpu_gauge_alloc();
	CHECK(shared);
	for (i = 0; i < SETTERS; i++)
		CHECK(pthread_create(&s[i], NULL, setter, (void *)(intptr_t)(1000000 * (i + 1))) == 0);
	for (i = 0; i < ADDERS; i++)
		CHECK(pthread_create(&a[i], NULL, adder, NULL) == 0);
	for (i = 0; i < ADDERS; i++)
		CHECK(pthread_join(a[i], NULL) == 0);
	__atomic_store_n(&adders_done, 1, __ATOMIC_RELEASE);
	for (i = 0; i < SETTERS; i++)
		CHECK(pthread_join(s[i], NULL) == 0);
	/* The value: some set's value plus at most every add. */
	v = pcpu_gauge_read(shared);
	CHECK(v >= 1000000 && v <= 3000000 + (int64_t)ADDERS * ADDS * 2);
	/* After all those sets, adds still all count: a quiet set, then the
	 * adders again (no set meanwhile) must land exactly. */
	CHECK(pcpu_gauge_set(shared, 7) == 0);
	for (i = 0; i < ADDERS; i++)
		CHECK(pthread_create(&a[i], NULL, adder, NULL) == 0);
	for (i = 0; i < ADDERS; i++)
		CHECK(pthread_join(a[i], NULL) == 0);
	CHECK(pcpu_gauge_read(shared) == 7 + (int64_t)ADDERS * ADDS * 2);
	CHECK(pcpu_gauge_set(shared, 7) == 0);
	pcpu_gauge_add(shared, 5);
	CHECK(pcpu_gauge_read(shared) == 12);
	pcpu_gauge_free(shared);
}

static pcpu_gauge_t racing;
static void *racer(void *arg)
{
	int i;

	for (i = 0; i < 20000; i++)
		CHECK(pcpu_gauge_set(racing, (int64_t)(intptr_t)arg) == 0);
	return NULL;
}

/* Sets alone: the result is one of the values set, never a mix. */
static void test_racing_sets(void)
{
	pthread_t t[4];
	int i;
	int64_t v;

	racing = pcpu_gauge_alloc();
	CHECK(racing);
	pcpu_gauge_add(racing, 12345);
	for (i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, racer, (void *)(intptr_t)(i + 1)) == 0);
	for (i = 0; i < 4; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	v = pcpu_gauge_read(racing);
	CHECK(v >= 1 && v <= 4);
	pcpu_gauge_free(racing);
}

int main(void)
{
	test_basics();
	test_set_touches_only_base();
	test_concurrent();
	test_racing_sets();
	printf("gauge tests passed (mode %s)\n", pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
