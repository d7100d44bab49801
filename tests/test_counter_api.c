/* Counter and zone API: values, arrays, multi-adds, resets, and every error
 * path (EINVAL, E2BIG, double free) -- single-threaded, deterministic. */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void test_basic(void)
{
	pcpu_counter_t c = pcpu_counter_alloc();

	CHECK(c != NULL);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 0);
	pcpu_counter_add(c, 5);
	pcpu_counter_inc(c);
	pcpu_counter_add(c, -2);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 4);
	pcpu_counter_add(c, -10); /* a gauge going negative */
	CHECK((int64_t)pcpu_counter_fetch(c) == -6);
	pcpu_counter_add_atomic(c, 6);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 0);

	/* Per-slot values add up to the total. */
	pcpu_counter_add(c, 1000);
	uint64_t sum = 0;
	for (unsigned s = 0; s < pcpu_nslots(); s++)
		sum += pcpu_counter_fetch_slot(c, s);
	CHECK_EQ_U64(sum, 1000);
	errno = 0;
	CHECK_EQ_U64(pcpu_counter_fetch_slot(c, pcpu_nslots()), 0);
	CHECK(errno == EINVAL);

	CHECK_EQ_U64(pcpu_counter_fetch_and_zero(c), 1000);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 0);
	pcpu_counter_add(c, 7);
	pcpu_counter_zero(c);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 0);
	pcpu_counter_add(c, 3);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 3);

	CHECK(pcpu_counter_free(c) == 0);
	errno = 0;
	CHECK(pcpu_counter_free(c) == -1 && errno == EINVAL); /* double free refused */
	CHECK(pcpu_counter_free(NULL) == 0);
	int on_stack;
	errno = 0;
	CHECK(pcpu_counter_free((pcpu_counter_t)&on_stack) == -1 && errno == EINVAL);
}

static void test_arrays(void)
{
	enum { N = 1000 };
	pcpu_counter_t a = pcpu_counter_alloc_array(N);
	uint64_t out[N];
	pcpu_counter_t cs[3];
	int64_t vs[3] = {1, 1500, -1};

	CHECK(a != NULL);
	for (size_t i = 0; i < N; i++)
		pcpu_counter_add(pcpu_counter_at(a, i), (int64_t)i);
	CHECK(pcpu_counter_fetch_array(a, N, out) == 0);
	for (size_t i = 0; i < N; i++)
		CHECK_EQ_U64(out[i], i);
	CHECK_EQ_U64(pcpu_counter_fetch(pcpu_counter_at(a, 999)), 999);

	cs[0] = pcpu_counter_at(a, 1);
	cs[1] = pcpu_counter_at(a, 2);
	cs[2] = pcpu_counter_at(a, 3);
	for (int k = 0; k < 100; k++)
		pcpu_counter_add_many(cs, vs, 3);
	CHECK_EQ_U64(pcpu_counter_fetch(cs[0]), 1 + 100);
	CHECK_EQ_U64(pcpu_counter_fetch(cs[1]), 2 + 150000);
	CHECK_EQ_U64(pcpu_counter_fetch(cs[2]), 3 - 100);

	/* Freeing an element (not the allocation) is refused. */
	errno = 0;
	CHECK(pcpu_counter_free(pcpu_counter_at(a, 1)) == -1 && errno == EINVAL);
	CHECK(pcpu_counter_free(a) == 0);

	/* A reused allocation reads zero again, in every slot. */
	pcpu_counter_t b = pcpu_counter_alloc_array(N);
	CHECK(b != NULL);
	CHECK(pcpu_counter_fetch_array(b, N, out) == 0);
	for (size_t i = 0; i < N; i++)
		CHECK_EQ_U64(out[i], 0);
	for (unsigned s = 0; s < pcpu_nslots(); s++)
		CHECK_EQ_U64(pcpu_counter_fetch_slot(pcpu_counter_at(b, 500), s), 0);
	pcpu_counter_free(b);
}

static void test_errors(void)
{
	errno = 0;
	CHECK(pcpu_counter_alloc_array(0) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_counter_alloc_array((size_t)1 << (sizeof(size_t) > 4 ? 40 : 31)) == NULL && errno == E2BIG);
	errno = 0;
	CHECK(pcpu_counter_alloc_in(NULL, 1) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_counter_fetch(NULL) == 0 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_counter_fetch_and_zero(NULL) == 0 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_counter_fetch_array(NULL, 1, NULL) == -1 && errno == EINVAL);

	errno = 0;
	CHECK(pcpu_zone_create((enum pcpu_index)42) == NULL && errno == EINVAL);
	/* One index per process: asking for it works, asking for the other
	 * one is refused rather than silently substituted. */
	enum pcpu_index mine = pcpu_zone_index(NULL);
	enum pcpu_index other = mine == PCPU_INDEX_CPU ? PCPU_INDEX_MM_CID : PCPU_INDEX_CPU;
	CHECK(mine == PCPU_INDEX_CPU || mine == PCPU_INDEX_MM_CID);
	errno = 0;
	CHECK(pcpu_zone_create(other) == NULL && errno == EINVAL);
	pcpu_zone_t *z = pcpu_zone_create(mine);
	CHECK(z != NULL);
	CHECK(pcpu_zone_index(z) == mine);
	errno = 0;
	CHECK(pcpu_zone_alloc(z, 0, 0) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_zone_alloc(z, 16, 3) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_zone_alloc(z, 16, 8192) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_zone_alloc(z, PCPU_ZONE_MAX_OBJECT + 1, 0) == NULL && errno == E2BIG);
	errno = 0;
	CHECK(pcpu_zone_alloc(NULL, 16, 0) == NULL && errno == EINVAL);

	void *o = pcpu_zone_alloc(z, 100, 64);
	CHECK(o != NULL && ((uintptr_t)o & 63) == 0);
	CHECK(pcpu_zone_of(o) == z);
	CHECK(pcpu_zone_object_size(z, o) == 104); /* rounded up to 8 */
	CHECK(pcpu_zone_free(z, o) == 0);
	errno = 0;
	CHECK(pcpu_zone_free(z, o) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_zone_object_size(z, o) == 0 && errno == EINVAL);

	/* Largest object: fits, and a second one grows the zone by a chunk. */
	void *big1 = pcpu_zone_alloc(z, PCPU_ZONE_MAX_OBJECT, 0);
	void *big2 = pcpu_zone_alloc(z, PCPU_ZONE_MAX_OBJECT, 0);
	CHECK(big1 && big2 && big1 != big2);
	CHECK(pcpu_zone_of(big2) == z);
	pcpu_zone_destroy(z);
	pcpu_zone_destroy(NULL);
}

static void test_mode(void)
{
	enum pcpu_rseq_mode m = pcpu_rseq_mode();

	CHECK(m == PCPU_RSEQ_GLIBC || m == PCPU_RSEQ_OWN || m == PCPU_RSEQ_FALLBACK);
	CHECK(strcmp(pcpu_rseq_mode_name(PCPU_RSEQ_OWN), "own") == 0);
	CHECK((m == PCPU_RSEQ_FALLBACK) == (pcpu_rseq_error() != 0));
	CHECK(pcpu_nslots() >= 1);
	/* Zones use mm_cid exactly when the kernel provides it, unless
	 * PCPU_INDEX=cpu says otherwise. */
	const char *want = getenv("PCPU_INDEX");
	pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	CHECK(z != NULL);
	if (want && strcmp(want, "cpu") == 0)
		CHECK(pcpu_zone_index(z) == PCPU_INDEX_CPU);
	else
		CHECK(pcpu_zone_index(z) == (pcpu_rseq_has_mm_cid() ? PCPU_INDEX_MM_CID : PCPU_INDEX_CPU));
	pcpu_zone_destroy(z);
	printf("mode %s, %u slots, mm_cid %d\n", pcpu_rseq_mode_name(m), pcpu_nslots(),
	       pcpu_rseq_has_mm_cid());
}

int main(void)
{
	test_basic();
	test_arrays();
	test_errors();
	test_mode();
	printf("test_counter_api: ok\n");
	return 0;
}
