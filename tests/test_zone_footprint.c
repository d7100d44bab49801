/*
 * What the allocator costs in memory.
 *
 *  - Residency: allocating, writing (slot 0 only), freeing and reallocating
 *    thousands of objects of mixed sizes never makes a page of another
 *    slot's region, or of any mirror region, resident; counters added to by
 *    one pinned thread touch one region besides slot 0's, and freeing them
 *    touches no other.
 *  - Bookkeeping: 10^6 counters allocated one by one and written from one
 *    thread grow the process's resident memory (/proc/self/statm) by at most
 *    12 MB: 8 MB of counters, and well under a byte of bookkeeping per
 *    object (a per-object hash entry, or a 16-byte granule, would not fit).
 *
 * "Resident" is what mincore() reports, as in test_zone.c, minus pages that
 * merely map the kernel's shared zero page: reading an untouched private
 * page (which the allocator may do to see whether it needs clearing) maps
 * that page, which mincore() reports but which costs no memory. Such pages
 * are told apart with /proc/self/pagemap (present, but neither exclusively
 * mapped nor file-backed); without pagemap every mincore page counts.
 *
 * Run with PCPU_NSLOTS=64 too (tests/CMakeLists.txt): 62 untouched slots.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_IS_OURS 0 /* shadow memory grows with what the program touches */
#else
#define RSS_IS_OURS 1
#endif

static size_t ps;
static unsigned nslots;
static int pagemap_fd = -1;

/* Pages of [p, p + len) that hold memory of their own. */
static size_t resident_pages(const void *p, size_t len)
{
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)(ps - 1);
	size_t pages = ((uintptr_t)p + len - start + ps - 1) / ps, n = 0;
	unsigned char *vec = malloc(pages);

	CHECK(vec != NULL);
	CHECK(mincore((void *)start, pages * ps, vec) == 0);
	for (size_t i = 0; i < pages; i++) {
		uint64_t e;

		if (!(vec[i] & 1))
			continue;
		if (pagemap_fd >= 0 &&
		    pread(pagemap_fd, &e, sizeof(e), (off_t)((start / ps + i) * sizeof(e))) == sizeof(e) &&
		    (e >> 63 & 1) && !(e >> 56 & 1) && !(e >> 61 & 1))
			continue; /* present, not exclusive, not file: the zero page */
		n++;
	}
	free(vec);
	return n;
}

static long statm_resident_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size, res;

	CHECK(f != NULL);
	CHECK(fscanf(f, "%ld %ld", &size, &res) == 2);
	fclose(f);
	return res * (long)(ps / 1024);
}

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void pin_to_one_cpu(void)
{
	cpu_set_t set;

	CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set)) {
			CPU_ZERO(&set);
			CPU_SET(c, &set);
			CHECK(sched_setaffinity(0, sizeof(set), &set) == 0);
			return;
		}
	CHECK(0);
}

/* Region r of the chunk at `chunk` (r < nslots: slot r; else a mirror). */
static size_t region_resident(const unsigned char *chunk, unsigned r, size_t span)
{
	return resident_pages(chunk + ((size_t)r << PCPU_SLOT_STRIDE_SHIFT), span);
}

#define NOBJ (RSS_IS_OURS ? 6000 : 2000) /* sanitizers: slower, same checks */

static void test_residency(void)
{
	pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	static unsigned char *objs[NOBJ];
	static size_t sizes[NOBJ];
	uint64_t rng = 42;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	const unsigned char *chunk;
	size_t span;

	CHECK(z != NULL);
	/* Round 1: allocate and write slot 0 only. */
	for (int i = 0; i < NOBJ; i++) {
		uint64_t r = next_rand(&rng);
		size_t size = r % 8 == 0 ? 4096 + (size_t)(r >> 8) % 8192 : 8 + (size_t)(r >> 8) % 505;

		objs[i] = pcpu_zone_alloc(z, size, r % 5 == 0 ? 64 : 0);
		CHECK(objs[i] != NULL);
		sizes[i] = size;
		memset(objs[i], 0x5a, size);
	}
	/* Round 2: free two thirds, allocate other sizes into the holes,
	 * write them; then free everything. */
	for (int i = 0; i < NOBJ; i++)
		if (i % 3) {
			CHECK(pcpu_zone_free(z, objs[i]) == 0);
			objs[i] = NULL;
		}
	for (int i = 0; i < NOBJ; i++)
		if (!objs[i]) {
			uint64_t r = next_rand(&rng);
			size_t size = 8 + (size_t)r % 1017;

			objs[i] = pcpu_zone_alloc(z, size, 0);
			CHECK(objs[i] != NULL);
			sizes[i] = size;
			for (size_t b = 0; b < size; b++)
				CHECK(objs[i][b] == 0);
			memset(objs[i], 0xa5, size);
		}
	for (int i = 0; i < NOBJ; i++) {
		if ((uintptr_t)objs[i] < lo)
			lo = (uintptr_t)objs[i];
		if ((uintptr_t)objs[i] + sizes[i] > hi)
			hi = (uintptr_t)objs[i] + sizes[i];
	}
	for (int i = 0; i < NOBJ; i++)
		CHECK(pcpu_zone_free(z, objs[i]) == 0);

	chunk = (const unsigned char *)(lo & ~(uintptr_t)(PCPU_SLOT_STRIDE - 1));
	CHECK((hi - 1) - (uintptr_t)chunk < PCPU_SLOT_STRIDE); /* one chunk */
	span = hi - (uintptr_t)chunk;
	printf("residency: %d objects in %zu kB of slot 0; resident kB per region after freeing them all:",
	       NOBJ, span / 1024);
	for (unsigned r = 0; r < 2 * nslots && r < 8; r++)
		printf(" %zu", region_resident(chunk, r, span) * ps / 1024);
	printf("%s\n", 2 * nslots > 8 ? " ..." : "");
	for (unsigned r = 1; r < 2 * nslots; r++) {
		size_t n = region_resident(chunk, r, span);

		if (n) {
			fprintf(stderr, "%s %u: %zu pages resident, none written\n",
				r < nslots ? "slot" : "mirror of slot", r < nslots ? r : r - nslots, n);
			exit(1);
		}
	}

	/* Counters from one pinned thread: one region is written (its slot,
	 * or a mirror on the fallback path); after freeing, still only that one. */
	{
		pcpu_counter_t cs[2000];
		unsigned written = 0, which = 0;

		pin_to_one_cpu();
		for (int i = 0; i < 2000; i++) {
			cs[i] = pcpu_counter_alloc_in(z, 1 + (size_t)i % 7);
			CHECK(cs[i] != NULL);
			pcpu_counter_add(cs[i] + i % 7, i);
			if ((uintptr_t)cs[i] + 64 > hi)
				hi = (uintptr_t)cs[i] + 64;
		}
		span = hi - (uintptr_t)chunk;
		for (int i = 0; i < 2000; i++)
			CHECK(pcpu_counter_free(cs[i]) == 0);
		for (unsigned r = 1; r < 2 * nslots; r++)
			if (region_resident(chunk, r, span)) {
				written++;
				which = r;
			}
		printf("residency: counters added to from one thread, then freed: %u region(s) besides slot 0's resident (region %u)\n",
		       written, which);
		CHECK(written <= 1);
	}
	pcpu_zone_destroy(z);
}

/* Under a sanitizer the bound is not checked (its shadow memory counts as
 * resident): fewer counters, for the allocator's correctness only. */
#define NCOUNTERS (RSS_IS_OURS ? 1000000 : 200000)

static void test_bookkeeping(void)
{
	static pcpu_counter_t cs[NCOUNTERS];
	long before, after;
	pcpu_zone_t *z;

	pin_to_one_cpu(); /* one slot (or one mirror) written */
	/* The handles themselves (8 MB) are the test's memory, not the
	 * allocator's: resident before the measurement starts. */
	memset(cs, 0xff, sizeof(cs));
	before = statm_resident_kb();
	z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	CHECK(z != NULL);
	for (long i = 0; i < NCOUNTERS; i++) {
		cs[i] = pcpu_counter_alloc_in(z, 1);
		CHECK(cs[i] != NULL);
	}
	for (long i = 0; i < NCOUNTERS; i++)
		pcpu_counter_add(cs[i], i + 1);
	after = statm_resident_kb();
	for (long i = 0; i < NCOUNTERS; i += 9973)
		CHECK_EQ_U64(pcpu_counter_fetch(cs[i]), i + 1);
	printf("bookkeeping: %d counters allocated one by one and written: +%ld kB resident (bound 12 MB%s)\n",
	       NCOUNTERS, after - before, RSS_IS_OURS ? "" : ", not checked under a sanitizer");
	if (RSS_IS_OURS && after - before > 12 * 1024) {
		fprintf(stderr, "resident memory grew by %ld kB for %d counters (8 MB of data): over 12 MB\n",
			after - before, NCOUNTERS);
		exit(1);
	}
	pcpu_zone_destroy(z);
}

int main(void)
{
	ps = (size_t)sysconf(_SC_PAGESIZE);
	nslots = pcpu_nslots();
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY);
	printf("%u slots, mode %s, pagemap %s\n", nslots, pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       pagemap_fd >= 0 ? "readable" : "unreadable (every mincore page counts)");
	test_residency();
	test_bookkeeping();
	printf("test_zone_footprint: ok\n");
	return 0;
}
