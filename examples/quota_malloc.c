/* SPDX-License-Identifier: MIT */
/*
 * A memory quota: malloc() and free() wrapped so that the bytes in use
 * never pass a quota -- a cache's used_memory against its maxmemory -- with
 * a hierarchical counter (pcpu/hcounter.h) as the bytes in use.
 *
 * quota_malloc(n) admits n bytes with pcpu_hcounter_limited_add(used, n,
 * quota) before calling malloc() (and fails with ENOMEM when they do not
 * fit); quota_free() gives them back. While the quota is far, an admission
 * is one rseq add on the calling thread's CPU and a read of one cache line;
 * near it, the counter counts exactly. Deciding whether to start evicting
 * is pcpu_hcounter_compare(used, high_water): from the bounds alone unless
 * they straddle the mark.
 *
 * Worker threads allocate buffers of 64 B to 64 KiB, keep up to 64 each and
 * free them in random order; the program checks that the bytes it holds
 * never passed the quota, and publishes a statistics segment named
 * quota_malloc with the bytes in use (approximation and bounds) as gauges
 * (pcpustat quota_malloc).
 *
 * Usage: pcpu_example_quota_malloc [--quota BYTES] [--threads N] [--seconds S]
 * Exit 0 when the quota held, 1 otherwise.
 */
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pcpu_hcounter_t *used;
static int64_t quota = 8 << 20;
static pcpu_counter_t refused, above_mark;
static int64_t held_bytes, violated; /* the example's own check */
static int stop;

/* What each allocation carries in front of it: its size. */
struct hdr {
	size_t size;
	size_t pad; /* malloc's alignment for what follows */
};

void *quota_malloc(size_t n)
{
	struct hdr *h;

	if (n > (size_t)quota || !pcpu_hcounter_limited_add(used, (int64_t)n, quota)) {
		pcpu_counter_inc(refused);
		errno = ENOMEM;
		return NULL;
	}
	h = malloc(sizeof *h + n);
	if (!h) {
		pcpu_hcounter_add(used, -(int64_t)n);
		return NULL;
	}
	h->size = n;
	return h + 1;
}

void quota_free(void *p)
{
	struct hdr *h;

	if (!p)
		return;
	h = (struct hdr *)p - 1;
	pcpu_hcounter_add(used, -(int64_t)h->size);
	free(h);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	void *held[64] = {0};
	size_t sizes[64] = {0};
	int64_t mark = quota / 10 * 9;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int k = rand_r(&seed) % 64;

		if (held[k]) {
			__atomic_sub_fetch(&held_bytes, (int64_t)sizes[k], __ATOMIC_SEQ_CST);
			quota_free(held[k]);
			held[k] = NULL;
			continue;
		}
		sizes[k] = 64 + (size_t)(rand_r(&seed) % 65472);
		held[k] = quota_malloc(sizes[k]);
		if (held[k]) {
			memset(held[k], 0xab, 64);
			if (__atomic_add_fetch(&held_bytes, (int64_t)sizes[k], __ATOMIC_SEQ_CST) > quota)
				__atomic_store_n(&violated, 1, __ATOMIC_RELAXED);
		}
		/* A cache would start evicting above its high-water mark. */
		if ((k & 15) == 0 && pcpu_hcounter_compare(used, mark) > 0)
			pcpu_counter_inc(above_mark);
	}
	for (int k = 0; k < 64; k++)
		if (held[k]) {
			__atomic_sub_fetch(&held_bytes, (int64_t)sizes[k], __ATOMIC_SEQ_CST);
			quota_free(held[k]);
		}
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = 8;
	double seconds = 3;
	pthread_t th[256];
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	struct pcpu_hcounter_approx a;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--quota"))
			quota = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--threads"))
			nthreads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
	}
	if (quota < 65536 || nthreads < 1 || nthreads > 256) {
		fprintf(stderr, "usage: %s [--quota BYTES >= 65536] [--threads 1-256] [--seconds S]\n",
			argv[0]);
		return 2;
	}
	used = pcpu_hcounter_create(4096); /* bytes: a wide batch, few carries */
	reg = pcpu_registry_create();
	/* Published first, before any series (pcpustat quota_malloc). */
	seg = reg ? pcpu_segment_publish(reg, "quota_malloc", NULL) : NULL;
	if (reg && !seg)
		fprintf(stderr, "no segment: %s\n", pcpu_segment_error());
	if (!used || !reg ||
	    !pcpu_registry_hcounter(reg, "memory_used_bytes", "Bytes allocated against the quota.", used) ||
	    !(refused = pcpu_registry_counter(reg, "allocations_refused_total",
					      "Allocations over the quota.")) ||
	    !(above_mark = pcpu_registry_counter(reg, "above_high_water_total",
						 "Checks that found the use above 90% of the quota."))) {
		perror("pcpu");
		return 1;
	}
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	for (int s = 0; s < (int)(seconds * 10); s++) {
		usleep(100000);
		if (seg && s % 10 == 0)
			(void)pcpu_registry_collect(reg);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	a = pcpu_hcounter_approx(used);
	printf("quota %lld bytes: %llu allocations refused, %llu checks above 90%%; "
	       "in use now %lld (approx %lld in [%lld, %lld], range %lld)\n",
	       (long long)quota, (unsigned long long)pcpu_counter_fetch(refused),
	       (unsigned long long)pcpu_counter_fetch(above_mark), (long long)pcpu_hcounter_sum(used),
	       (long long)a.value, (long long)a.min, (long long)a.max,
	       (long long)pcpu_hcounter_range(used));
	if (violated || pcpu_hcounter_sum(used) != 0) {
		printf("FAIL: the bytes held passed the quota\n");
		return 1;
	}
	printf("the bytes held never passed the quota\n");
	if (seg)
		pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	pcpu_hcounter_destroy(used);
	return 0;
}
