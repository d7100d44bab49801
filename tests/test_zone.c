/*
 * The zone allocator: concurrent allocs/frees hand out distinct, zeroed
 * objects in every slot; and memory no slot writes never becomes resident,
 * also across free and reuse.
 */

#include "check.h"
#include <pcpu/pcpu.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 20000
#define KEEP 64

static pcpu_zone_t *zone;

static void check_zero_everywhere(const unsigned char *o, size_t size)
{
	for (unsigned s = 0; s < pcpu_nslots(); s++) {
		const unsigned char *p = pcpu_slot_ptr(o, s);
		for (size_t i = 0; i < size; i++)
			CHECK(p[i] == 0);
	}
}

static void *churn(void *arg)
{
	unsigned char *live[KEEP] = {0};
	size_t sizes[KEEP] = {0};
	unsigned char tag = (unsigned char)(uintptr_t)arg + 1;
	unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;

	for (int r = 0; r < ROUNDS; r++) {
		int k = (int)(rand_r(&seed) % KEEP);

		if (live[k]) {
			/* Our pattern must be intact in every slot: no other
			 * allocation overlapped it. */
			for (unsigned s = 0; s < pcpu_nslots(); s++) {
				unsigned char *p = pcpu_slot_ptr(live[k], s);
				unsigned char want = pcpu_slot_walked(s) ? tag : 0;
				for (size_t i = 0; i < sizes[k]; i++)
					CHECK(p[i] == want);
			}
			CHECK(pcpu_zone_free(zone, live[k]) == 0);
			live[k] = NULL;
		} else {
			size_t size = 16 * (1 + rand_r(&seed) % 32);
			if (rand_r(&seed) % 64 == 0)
				size = 4096 + 16 * (rand_r(&seed) % 512); /* large path */
			live[k] = pcpu_zone_alloc(zone, size, 0);
			CHECK(live[k] != NULL);
			sizes[k] = size;
			check_zero_everywhere(live[k], size);
			/* Only the slots a program may write (pcpu_slot_walked():
			 * under PCPU_COMMIT=strict with absent CPUs the others
			 * are read-only, and a write faults). */
			for (unsigned s = 0; s < pcpu_nslots(); s++)
				if (pcpu_slot_walked(s))
					memset(pcpu_slot_ptr(live[k], s), tag, size);
		}
	}
	for (int k = 0; k < KEEP; k++)
		if (live[k])
			CHECK(pcpu_zone_free(zone, live[k]) == 0);
	return NULL;
}

static long rss_anon_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld kB", &kb) == 1)
			break;
	fclose(f);
	CHECK(kb >= 0);
	return kb;
}

static size_t resident_pages(void *p, size_t len)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE), n = 0;
	size_t pages = (len + ps - 1) / ps;
	unsigned char *vec = malloc(pages);

	CHECK(vec != NULL);
	CHECK(mincore(p, len, vec) == 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	return n;
}

/* Sanitizer runtimes map shadow memory for what the program touches, which
 * RssAnon counts too: there only the per-page mincore() checks apply. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_IS_OURS 0
#else
#define RSS_IS_OURS 1
#endif

static void test_resident(void)
{
	const size_t size = 8u << 20; /* 8 MiB per slot */
	pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	unsigned n = pcpu_nslots();
	long before, written, freed, reused;
	unsigned char *o;

	CHECK(z != NULL);
	o = pcpu_zone_alloc(z, size, 4096);
	CHECK(o != NULL);
	for (unsigned s = 0; s < n; s++)
		CHECK(resident_pages(pcpu_slot_ptr(o, s), size) == 0);

	before = rss_anon_kb();
	memset(pcpu_slot_ptr(o, 0), 0xab, size); /* only slot 0 writes */
	written = rss_anon_kb();
	printf("resident: +%ld kB after writing slot 0 of %u (8192 kB per slot)\n",
	       written - before, n);
	if (RSS_IS_OURS) {
		CHECK(written - before >= 8192 * 9 / 10);
		CHECK(written - before <= 8192 * 11 / 10); /* not n * 8 MiB */
	}
	CHECK(resident_pages(pcpu_slot_ptr(o, 0), size) == size / (size_t)sysconf(_SC_PAGESIZE));
	for (unsigned s = 1; s < n; s++)
		CHECK(resident_pages(pcpu_slot_ptr(o, s), size) == 0);

	CHECK(pcpu_zone_free(z, o) == 0); /* zeroes: drops slot 0's pages */
	freed = rss_anon_kb();
	CHECK(!RSS_IS_OURS || freed - before <= 8192 / 10);
	CHECK(resident_pages(pcpu_slot_ptr(o, 0), size) == 0); /* handed back */
	for (unsigned s = 1; s < n; s++)
		CHECK(resident_pages(pcpu_slot_ptr(o, s), size) == 0);

	/* Reuse: same memory, reads zero in every slot, still not resident. */
	unsigned char *o2 = pcpu_zone_alloc(z, size, 4096);
	CHECK(o2 == o);
	check_zero_everywhere(o2, size);
	reused = rss_anon_kb();
	CHECK(!RSS_IS_OURS || reused - before <= 8192 / 10);
	printf("resident: +%ld kB after free, +%ld kB after reuse and reading all slots\n",
	       freed - before, reused - before);

	/* A small object with neighbours: zeroing on free must not dirty the
	 * untouched slots' pages. */
	pcpu_counter_t a = pcpu_counter_alloc_in(z, 3);
	pcpu_counter_t b = pcpu_counter_alloc_in(z, 3);
	CHECK(a && b);
	pcpu_counter_add(a, 5);
	pcpu_counter_add(b + 1, 7);
	CHECK(pcpu_counter_free(a) == 0);
	CHECK_EQ_U64(pcpu_counter_fetch(b + 1), 7); /* the neighbour survives */
	pcpu_counter_t a2 = pcpu_counter_alloc_in(z, 3);
	CHECK(a2 == a);
	CHECK_EQ_U64(pcpu_counter_fetch(a2), 0);
	pcpu_zone_destroy(z);
}

int main(void)
{
	pthread_t t[THREADS];

	zone = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	CHECK(zone != NULL);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)i) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	pcpu_zone_destroy(zone);
	test_resident();
	printf("test_zone: ok\n");
	return 0;
}
