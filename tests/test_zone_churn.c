/*
 * Allocator churn: 4 threads allocate and free 10^6 objects in total on one
 * zone (raw objects of 8..256 bytes, some with an alignment, and counter
 * arrays), each keeping a random set of live objects. Every live raw object
 * carries a tag (thread, serial, word index) in slot 0, every live counter
 * array a known value in each counter; both are checked before the object
 * is freed, so an object handed out twice while live, or zeroed or written
 * by someone else, is caught. A new object must read zero (counters: fetch
 * 0, so the mirror words were cleared too). A few objects are handed to
 * another thread, which checks and frees them. Every free must return 0.
 *
 * Usage: test_zone_churn [--ops N]   (or PCPU_CHURN_OPS=N; at least 10^5)
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <pthread.h>
#include <string.h>

#define THREADS 4
#define KEEP 192
#define MAILBOX 64

enum kind { RAW, COUNTERS };

struct live {
	void *p;
	size_t size;    /* bytes (raw) or number of counters */
	enum kind kind;
	uint64_t tag;
};

static pcpu_zone_t *zone;
static long ops_per_thread;
static long total_allocs, total_frees, handed_over;

/* Objects in transit between threads. */
static pthread_mutex_t mbox_lock = PTHREAD_MUTEX_INITIALIZER;
static struct live mbox[MAILBOX];
static int mbox_n;

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t word_tag(uint64_t tag, size_t i)
{
	return tag ^ (i * 0x9e3779b97f4a7c15ull);
}

static void check_and_free(struct live *l)
{
	if (l->kind == RAW) {
		const uint64_t *w = l->p;
		size_t n = (l->size + 7) / 8;

		for (size_t i = 0; i < n; i++)
			if (w[i] != word_tag(l->tag, i)) {
				fprintf(stderr, "object %p (%zu bytes, tag %#llx): word %zu is %#llx: handed out twice or overwritten\n",
					l->p, l->size, (unsigned long long)l->tag, i,
					(unsigned long long)w[i]);
				exit(1);
			}
		CHECK(pcpu_zone_free(zone, l->p) == 0);
	} else {
		pcpu_counter_t c = l->p;

		for (size_t i = 0; i < l->size; i++) {
			uint64_t v = pcpu_counter_fetch(c + i);
			if (v != word_tag(l->tag, i)) {
				fprintf(stderr, "counter array %p (%zu counters): counter %zu reads %#llx, expected %#llx\n",
					l->p, l->size, i, (unsigned long long)v,
					(unsigned long long)word_tag(l->tag, i));
				exit(1);
			}
		}
		CHECK(pcpu_counter_free(c) == 0);
	}
	l->p = NULL;
}

static void alloc_one(struct live *l, uint64_t *rng, uint64_t tag)
{
	uint64_t r = next_rand(rng);

	l->tag = tag;
	if (r % 8 != 0) {
		static const size_t aligns[8] = {0, 0, 0, 0, 8, 16, 64, 256};
		size_t size = 8 + (size_t)((r >> 8) % 249); /* 8..256 */
		size_t align = aligns[(r >> 20) % 8];
		uint64_t *w = pcpu_zone_alloc(zone, size, align);
		size_t n = (size + 7) / 8;

		CHECK(w != NULL);
		CHECK(align == 0 || ((uintptr_t)w & (align - 1)) == 0);
		if ((r >> 24) % 16 == 0)
			CHECK(pcpu_zone_object_size(zone, w) == n * 8);
		for (size_t i = 0; i < n; i++) {
			if (w[i] != 0) {
				fprintf(stderr, "new object %p (%zu bytes): word %zu is %#llx, not zero\n",
					(void *)w, size, i, (unsigned long long)w[i]);
				exit(1);
			}
			w[i] = word_tag(tag, i);
		}
		l->p = w;
		l->size = size;
		l->kind = RAW;
	} else {
		size_t n = (r >> 8) % 16 == 0 ? 64 + (size_t)((r >> 12) % 448) : 1 + (size_t)((r >> 12) % 16);
		pcpu_counter_t c = pcpu_counter_alloc_in(zone, n);

		CHECK(c != NULL);
		for (size_t i = 0; i < n; i++) {
			CHECK_EQ_U64(pcpu_counter_fetch(c + i), 0);
			/* Half through the rseq word, half through the mirror. */
			if (i % 2)
				pcpu_counter_add(c + i, (int64_t)word_tag(tag, i));
			else
				pcpu_counter_add_atomic(c + i, (int64_t)word_tag(tag, i));
		}
		l->p = c;
		l->size = n;
		l->kind = COUNTERS;
	}
}

static void *churn(void *arg)
{
	uint64_t me = (uint64_t)(uintptr_t)arg;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (me + 1) ^ 0x1234567;
	struct live live[KEEP];
	long allocs = 0, frees = 0, serial = 0, given = 0;

	memset(live, 0, sizeof(live));
	while (allocs < ops_per_thread) {
		struct live *l = &live[next_rand(&rng) % KEEP];
		uint64_t r = next_rand(&rng);

		if (l->p) {
			if (r % 64 == 0) { /* hand it to whichever thread comes next */
				pthread_mutex_lock(&mbox_lock);
				if (mbox_n < MAILBOX) {
					mbox[mbox_n++] = *l;
					l->p = NULL;
					given++;
				}
				pthread_mutex_unlock(&mbox_lock);
			}
			if (l->p) {
				check_and_free(l);
				frees++;
			}
		} else {
			alloc_one(l, &rng, (me + 1) << 56 | (uint64_t)++serial << 8);
			allocs++;
		}
		if (r % 64 == 1) { /* free one object another thread allocated */
			struct live other = {0};

			pthread_mutex_lock(&mbox_lock);
			if (mbox_n > 0)
				other = mbox[--mbox_n];
			pthread_mutex_unlock(&mbox_lock);
			if (other.p) {
				check_and_free(&other);
				frees++;
			}
		}
	}
	for (int k = 0; k < KEEP; k++)
		if (live[k].p) {
			check_and_free(&live[k]);
			frees++;
		}
	__atomic_fetch_add(&total_allocs, allocs, __ATOMIC_RELAXED);
	__atomic_fetch_add(&total_frees, frees, __ATOMIC_RELAXED);
	__atomic_fetch_add(&handed_over, given, __ATOMIC_RELAXED);
	return NULL;
}

int main(int argc, char **argv)
{
	long ops = 1000000;
	const char *env = getenv("PCPU_CHURN_OPS");
	pthread_t t[THREADS];

	if (env)
		ops = atol(env);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ops") && i + 1 < argc) {
			ops = atol(argv[++i]);
		} else {
			fprintf(stderr, "usage: %s [--ops N (>= 100000)]\n", argv[0]);
			return 2;
		}
	}
	if (ops < 100000)
		ops = 100000;
	ops_per_thread = ops / THREADS;

	zone = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	CHECK(zone != NULL);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)i) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	for (int i = 0; i < mbox_n; i++) { /* left in transit */
		check_and_free(&mbox[i]);
		total_frees++;
	}
	printf("%ld allocations, %ld frees (%ld handed to another thread), %u slots, mode %s\n",
	       total_allocs, total_frees, handed_over, pcpu_nslots(),
	       pcpu_rseq_mode_name(pcpu_rseq_mode()));
	CHECK(total_allocs == ops_per_thread * THREADS);
	CHECK(total_frees == total_allocs);
	CHECK(handed_over > 0);
	pcpu_zone_destroy(zone);
	printf("test_zone_churn: ok\n");
	return 0;
}
