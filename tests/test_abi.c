/*
 * Both tiers give the same results: the same sequence of operations, from
 * several threads, through the inline operations (this file) and through
 * the exported functions (abi_noinline.c, built with PCPU_NO_INLINE), on
 * two counter arrays; and pcpu_slot_ptr() agrees. With --noinline-only the
 * program uses the stable tier alone (test_abi_noinline: no pcpu__ symbol).
 */
#include "check.h"
#include <pcpu/counter.h>
#include <pcpu/zone.h>
#include <pthread.h>
#include <string.h>

#define N 8
#define THREADS 4
#define ROUNDS 200000

void noinline_ops(pcpu_counter_t a, size_t n, long rounds);
void *noinline_slot_ptr(void *obj, unsigned slot);

static pcpu_counter_t ai, an;

static void inline_ops(pcpu_counter_t a, size_t n, long rounds)
{
	for (long r = 0; r < rounds; r++) {
		pcpu_counter_add(pcpu_counter_at(a, 0), 3);
		pcpu_counter_inc(pcpu_counter_at(a, 1));
		pcpu_counter_t cs[2] = { pcpu_counter_at(a, 2), pcpu_counter_at(a, n - 1) };
		int64_t vs[2] = { -1, 5 };
		pcpu_counter_add_many(cs, vs, 2);
	}
}

static void *worker(void *arg)
{
	inline_ops(ai, N, ROUNDS);
	noinline_ops(an, N, ROUNDS);
	return arg;
}

int main(void)
{
	pthread_t t[THREADS];
	uint64_t vi[N], vn[N];
	int i;

	CHECK((ai = pcpu_counter_alloc_array(N)) != NULL);
	CHECK((an = pcpu_counter_alloc_array(N)) != NULL);
	for (i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(pcpu_counter_fetch_array(ai, N, vi) == 0);
	CHECK(pcpu_counter_fetch_array(an, N, vn) == 0);
	CHECK(memcmp(vi, vn, sizeof vi) == 0);
	CHECK_EQ_U64(vn[0], 3ull * THREADS * ROUNDS);
	CHECK_EQ_U64(vn[1], 1ull * THREADS * ROUNDS);
	CHECK_EQ_U64((int64_t)vn[2], -1ll * THREADS * ROUNDS);
	CHECK_EQ_U64(vn[N - 1], 5ull * THREADS * ROUNDS);
	CHECK(noinline_slot_ptr(an, 3) == pcpu_slot_ptr(an, 3));
	printf("inline and exported operations agree (%s mode)\n", pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
