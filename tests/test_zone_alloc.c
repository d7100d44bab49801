/*
 * The zone allocator's contract at its edges, through the public API only.
 *
 *  - Misuse is refused and changes nothing: a double free, a foreign pointer
 *    (malloc'd, on the stack, another zone's object), an interior pointer
 *    (element 1 of a counter array, obj + 8, obj + 1), a granule of a chunk
 *    that was never allocated, the chunk header, a pointer into another
 *    slot's or a mirror region: each free returns -1 with errno EINVAL, and
 *    afterwards every live object (the witnesses) still holds its value and
 *    its size, later allocations never overlap it (checked by writing and
 *    reading back), and its own free still succeeds.
 *  - Sizes are rounded up to the 8-byte granule; the default alignment is 8;
 *    alignments up to 4096 are honoured, also when the space comes from
 *    freed holes; bad arguments fail with EINVAL or E2BIG (also sizes whose
 *    rounding or n * 8 would overflow).
 *  - Reuse: memory freed after every slot (and, for counters, the mirror
 *    words: fallback adds and reset offsets) was written reads zero in every
 *    slot when it is handed out again.
 *  - With --aligned-scaling (a ctest of its own): aligned allocations that
 *    leave gaps stay amortised O(1).
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#define MAX_WITNESS 8

/* A live object whose contents and size must survive every misuse. */
struct witness {
	pcpu_zone_t *zone;
	unsigned char *obj;
	size_t size;     /* pcpu_zone_object_size() when it was allocated */
	int counters;    /* number of counters (0: raw bytes with a pattern) */
	uint64_t seed;
};

static struct witness witnesses[MAX_WITNESS];
static int nwitness;
static unsigned nslots;
/* The last slot a program may write: the slot walk's last (pcpu/zone.h,
 * pcpu_slot_walked()). With absent CPUs under strict commit accounting
 * (PCPU_COMMIT=strict) the others are read-only, and a write faults. */
static unsigned last_slot;

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static uint64_t pattern_word(uint64_t seed, size_t i, unsigned slot)
{
	return seed * 0x9e3779b97f4a7c15ull + i * 0x100000001b3ull + slot + 1;
}

/* Raw object: a pattern in slot 0 and in the last slot written. */
static void fill(unsigned char *o, size_t size, uint64_t seed)
{
	unsigned slots[2] = {0, last_slot};

	for (int k = 0; k < 2; k++) {
		uint64_t *p = pcpu_slot_ptr(o, slots[k]);
		for (size_t i = 0; i < size / 8; i++)
			p[i] = pattern_word(seed, i, slots[k]);
	}
}

static int intact(const unsigned char *o, size_t size, uint64_t seed)
{
	unsigned slots[2] = {0, last_slot};

	for (int k = 0; k < 2; k++) {
		const uint64_t *p = pcpu_slot_ptr(o, slots[k]);
		for (size_t i = 0; i < size / 8; i++)
			if (p[i] != pattern_word(seed, i, slots[k]))
				return 0;
	}
	return 1;
}

static void add_witness(pcpu_zone_t *z, size_t size, int counters, uint64_t seed)
{
	struct witness *w = &witnesses[nwitness++];

	CHECK(nwitness <= MAX_WITNESS);
	w->zone = z;
	w->counters = counters;
	w->seed = seed;
	if (counters) {
		pcpu_counter_t c = pcpu_counter_alloc_in(z, (size_t)counters);
		CHECK(c != NULL);
		for (int i = 0; i < counters; i++) {
			pcpu_counter_add(c + i, (int64_t)(seed + (uint64_t)i));
			pcpu_counter_add_atomic(c + i, 1000); /* a mirror word too */
		}
		w->obj = (unsigned char *)c;
	} else {
		w->obj = pcpu_zone_alloc(z, size, 0);
		CHECK(w->obj != NULL);
		fill(w->obj, round8(size), seed);
	}
	w->size = pcpu_zone_object_size(z, w->obj);
	CHECK(w->size == (counters ? (size_t)counters * sizeof(struct pcpu_counter) : round8(size)));
}

static void check_witnesses(const char *after)
{
	for (int k = 0; k < nwitness; k++) {
		struct witness *w = &witnesses[k];
		int ok = 1;

		if (!w->obj)
			continue;
		if (pcpu_zone_object_size(w->zone, w->obj) != w->size)
			ok = 0;
		if (w->counters) {
			for (int i = 0; i < w->counters; i++)
				if (pcpu_counter_fetch((pcpu_counter_t)w->obj + i) !=
				    w->seed + (uint64_t)i + 1000)
					ok = 0;
		} else if (!intact(w->obj, w->size, w->seed)) {
			ok = 0;
		}
		if (!ok) {
			fprintf(stderr, "witness %d (%p, %zu bytes) changed after %s\n", k,
				(void *)w->obj, w->size, after);
			exit(1);
		}
	}
}

static int overlaps(const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
	return a < b + bn && b < a + an;
}

/* New allocations in every witness's zone must land outside every live
 * witness, read zero, and writing them must not change any witness. */
static void probe_allocations(const char *after)
{
	static const size_t sizes[] = {8, 16, 24, 40, 64, 128, 256};
	unsigned char *probe[MAX_WITNESS][sizeof(sizes) / sizeof(sizes[0]) + 1];
	size_t psize[MAX_WITNESS][sizeof(sizes) / sizeof(sizes[0]) + 1];
	int np[MAX_WITNESS] = {0};

	for (int k = 0; k < nwitness; k++) {
		struct witness *w = &witnesses[k];

		if (!w->obj)
			continue;
		for (size_t j = 0; j <= sizeof(sizes) / sizeof(sizes[0]); j++) {
			size_t sz = j < sizeof(sizes) / sizeof(sizes[0]) ? sizes[j] : w->size;
			unsigned char *p = pcpu_zone_alloc(w->zone, sz, 0);

			CHECK(p != NULL);
			for (int m = 0; m < nwitness; m++) {
				if (witnesses[m].obj &&
				    overlaps(p, sz, witnesses[m].obj, witnesses[m].size)) {
					fprintf(stderr, "after %s: allocation %p (%zu bytes) overlaps live witness %d (%p, %zu bytes)\n",
						after, (void *)p, sz, m, (void *)witnesses[m].obj,
						witnesses[m].size);
					exit(1);
				}
			}
			for (size_t i = 0; i < sz; i++)
				CHECK(p[i] == 0);
			fill(p, sz, 0xdead0000u + (uint64_t)j);
			probe[k][j] = p;
			psize[k][j] = sz;
			np[k]++;
		}
	}
	check_witnesses(after);
	for (int k = 0; k < nwitness; k++)
		for (int j = 0; j < np[k]; j++) {
			CHECK(intact(probe[k][j], psize[k][j], 0xdead0000u + (uint64_t)j));
			CHECK(pcpu_zone_free(witnesses[k].zone, probe[k][j]) == 0);
		}
	check_witnesses(after);
}

/* One misuse: the free must fail with EINVAL and leave everything as it was. */
static void refused_zone_free(pcpu_zone_t *z, void *p, const char *what)
{
	int rc;

	errno = 0;
	rc = pcpu_zone_free(z, p);
	if (rc != -1 || errno != EINVAL) {
		fprintf(stderr, "pcpu_zone_free(%s) returned %d, errno %d (%s): expected -1, EINVAL\n",
			what, rc, errno, strerror(errno));
		exit(1);
	}
	errno = 0;
	CHECK(pcpu_zone_object_size(z, p) == 0 && errno == EINVAL);
	check_witnesses(what);
	probe_allocations(what);
}

static void refused_counter_free(void *p, const char *what)
{
	int rc;

	errno = 0;
	rc = pcpu_counter_free((pcpu_counter_t)p);
	if (rc != -1 || errno != EINVAL) {
		fprintf(stderr, "pcpu_counter_free(%s) returned %d, errno %d (%s): expected -1, EINVAL\n",
			what, rc, errno, strerror(errno));
		exit(1);
	}
	check_witnesses(what);
	probe_allocations(what);
}

static void test_misuse(void)
{
	pcpu_zone_t *z1 = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	pcpu_zone_t *z2 = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	unsigned char *a, *b, *chunk;
	pcpu_counter_t c, s;
	char on_stack[64];
	void *heap = malloc(64);

	CHECK(z1 && z2 && heap);
	memset(heap, 0, 64);
	memset(on_stack, 0, sizeof(on_stack));
	nwitness = 0;
	/* In a fresh zone: a is its first object, nothing lies 4096 bytes on. */
	add_witness(z1, 64, 0, 1);
	a = witnesses[0].obj;
	add_witness(z1, 0, 3, 100);
	c = (pcpu_counter_t)witnesses[1].obj;
	add_witness(z2, 40, 0, 2);
	b = witnesses[2].obj;
	add_witness(z2, 0, 1, 7); /* s: a single counter */
	s = (pcpu_counter_t)witnesses[3].obj;
	chunk = (unsigned char *)((uintptr_t)a & ~(uintptr_t)(PCPU_SLOT_STRIDE - 1));
	check_witnesses("setup");

	/* Granules that were never allocated (before any probe ran). */
	refused_zone_free(z1, a + 4096, "obj + 4096, never allocated");
	refused_zone_free(z1, a + 64 * 1024 + 8, "obj + 64 KiB + 8, never allocated");
	refused_zone_free(z1, chunk + PCPU_SLOT_STRIDE - 8, "last granule of slot 0's region");
	refused_counter_free(a + 4096, "counter: obj + 4096, never allocated");

	/* Interior pointers. */
	refused_zone_free(z1, a + 8, "obj + 8");
	refused_zone_free(z1, a + 1, "obj + 1");
	refused_zone_free(z1, a + 56, "the last granule of obj");
	refused_counter_free(c + 1, "element 1 of a counter array");
	refused_counter_free(c + 2, "element 2 of a counter array");
	refused_zone_free(z1, c + 1, "zone free of element 1 of a counter array");
	refused_counter_free((char *)c + 4, "counter array + 4");

	/* Other regions of the chunk: slots, mirrors, the header. */
	refused_zone_free(z1, pcpu_slot_ptr(a, 1), "pcpu_slot_ptr(obj, 1)");
	refused_zone_free(z1, pcpu_slot_ptr(a, nslots - 1), "pcpu_slot_ptr(obj, nslots - 1)");
	refused_zone_free(z1, pcpu_slot_ptr(a, nslots), "slot 0's mirror of obj");
	refused_zone_free(z1, pcpu_slot_ptr(a, 2 * nslots - 1), "the last mirror of obj");
	refused_counter_free(pcpu_slot_ptr(c, 1), "counter: pcpu_slot_ptr(c, 1)");
	refused_counter_free(pcpu_slot_ptr(c, nslots), "counter: slot 0's mirror of c");
	refused_zone_free(z1, chunk, "the chunk header");
	refused_zone_free(z1, chunk + 8, "chunk header + 8");
	refused_zone_free(z1, chunk + 120, "chunk header + 120");
	refused_counter_free(chunk, "counter: the chunk header");

	/* Foreign pointers. */
	refused_zone_free(z1, heap, "a malloc'd pointer");
	refused_counter_free(heap, "counter: a malloc'd pointer");
	refused_zone_free(z1, on_stack, "a stack pointer");
	refused_counter_free(on_stack, "counter: a stack pointer");
	refused_zone_free(z1, b, "another zone's object");
	refused_zone_free(z2, a, "another zone's object (the other way)");
	refused_zone_free(z1, s, "another zone's counter");
	refused_zone_free(z2, c, "another zone's counter array");
	errno = 0;
	CHECK(pcpu_zone_free(NULL, a) == -1 && errno == EINVAL);
	check_witnesses("free with a NULL zone");
	CHECK(pcpu_zone_free(z1, NULL) == 0);
	CHECK(pcpu_counter_free(NULL) == 0);
	errno = 0;
	CHECK(pcpu_zone_object_size(z2, a) == 0 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_zone_object_size(NULL, a) == 0 && errno == EINVAL);

	/* Double free, of a raw object and of a counter array, with live
	 * neighbours on both sides. */
	{
		unsigned char *d = pcpu_zone_alloc(z1, 40, 0);
		unsigned char *after = pcpu_zone_alloc(z1, 40, 0);
		pcpu_counter_t e = pcpu_counter_alloc_in(z1, 2);

		CHECK(d && after && e);
		fill(d, 40, 9);
		fill(after, 40, 10);
		pcpu_counter_add(e, 5);
		CHECK(pcpu_zone_free(z1, d) == 0);
		refused_zone_free(z1, d, "double free");
		CHECK(pcpu_counter_free(e) == 0);
		refused_counter_free(e, "double free of a counter array");
		refused_zone_free(z1, e, "zone free of a freed counter array");
		CHECK(intact(after, 40, 10));

		/* Two allocations of the freed size are two objects. */
		unsigned char *x = pcpu_zone_alloc(z1, 40, 0);
		unsigned char *y = pcpu_zone_alloc(z1, 40, 0);
		CHECK(x && y && !overlaps(x, 40, y, 40));
		CHECK(!overlaps(x, 40, after, 40) && !overlaps(y, 40, after, 40));
		fill(x, 40, 11);
		fill(y, 40, 12);
		CHECK(intact(x, 40, 11) && intact(y, 40, 12) && intact(after, 40, 10));
		check_witnesses("two allocations after a double free");
		CHECK(pcpu_zone_free(z1, x) == 0);
		CHECK(pcpu_zone_free(z1, y) == 0);
		CHECK(pcpu_zone_free(z1, after) == 0);
		refused_zone_free(z1, after, "double free of the neighbour");
	}

	/* The witnesses' own frees succeed, once. */
	for (int k = 0; k < nwitness; k++) {
		struct witness *w = &witnesses[k];
		void *o = w->obj;

		w->obj = NULL; /* no longer a witness */
		if (w->counters)
			CHECK(pcpu_counter_free((pcpu_counter_t)o) == 0);
		else
			CHECK(pcpu_zone_free(w->zone, o) == 0);
		check_witnesses("a valid free");
		if (w->counters)
			refused_counter_free(o, "double free of a witness counter");
		else
			refused_zone_free(w->zone, o, "double free of a witness");
	}
	nwitness = 0;
	free(heap);
	pcpu_zone_destroy(z1);
	pcpu_zone_destroy(z2);
	printf("misuse: every bad free refused with EINVAL, nothing changed\n");
}

static void expect_alloc_error(pcpu_zone_t *z, size_t size, size_t align, int err, const char *what)
{
	void *p;

	errno = 0;
	p = pcpu_zone_alloc(z, size, align);
	if (p != NULL || errno != err) {
		fprintf(stderr, "pcpu_zone_alloc(%s: size %zu, align %zu) = %p, errno %d: expected NULL, errno %d\n",
			what, size, align, p, errno, err);
		exit(1);
	}
}

static void expect_counter_error(pcpu_zone_t *z, size_t n, int err, const char *what)
{
	pcpu_counter_t c;

	errno = 0;
	c = z ? pcpu_counter_alloc_in(z, n) : pcpu_counter_alloc_array(n);
	if (c != NULL || errno != err) {
		fprintf(stderr, "counter allocation (%s: n %zu) = %p, errno %d: expected NULL, errno %d\n",
			what, n, (void *)c, errno, err);
		exit(1);
	}
}

struct obj {
	unsigned char *p;
	size_t size;
};

static int cmp_obj(const void *a, const void *b)
{
	const struct obj *x = a, *y = b;

	return x->p < y->p ? -1 : x->p > y->p;
}

/* Every object has the size it reports and none overlaps another: fill
 * each with its own byte, then check them all. */
static void check_disjoint(struct obj *o, size_t n)
{
	qsort(o, n, sizeof(*o), cmp_obj);
	for (size_t i = 0; i + 1 < n; i++)
		if (o[i].p + o[i].size > o[i + 1].p) {
			fprintf(stderr, "objects overlap: %p + %zu > %p\n", (void *)o[i].p,
				o[i].size, (void *)o[i + 1].p);
			exit(1);
		}
	for (size_t i = 0; i < n; i++)
		memset(o[i].p, (int)(i % 251) + 1, o[i].size);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < o[i].size; j++)
			CHECK(o[i].p[j] == (unsigned char)((i % 251) + 1));
}

static void test_sizes(void)
{
	pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	struct obj objs[2048];
	size_t n = 0, not16 = 0;

	CHECK(z != NULL);
	/* Rounding to the 8-byte granule. */
	for (size_t size = 1; size <= 300; size++) {
		unsigned char *p = pcpu_zone_alloc(z, size, 0);

		CHECK(p != NULL);
		CHECK(((uintptr_t)p & 7) == 0);
		if (pcpu_zone_object_size(z, p) != round8(size)) {
			fprintf(stderr, "size %zu: object size %zu, expected %zu\n", size,
				pcpu_zone_object_size(z, p), round8(size));
			exit(1);
		}
		objs[n].p = p;
		objs[n++].size = round8(size);
	}
	static const size_t odd[] = {4095, 4096, 4097, 4104, 65535, 100001};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		unsigned char *p = pcpu_zone_alloc(z, odd[i], 0);

		CHECK(p != NULL);
		CHECK(pcpu_zone_object_size(z, p) == round8(odd[i]));
		objs[n].p = p;
		objs[n++].size = round8(odd[i]);
	}
	for (size_t i = 1; i <= 20; i++) {
		pcpu_counter_t c = pcpu_counter_alloc_in(z, i);

		CHECK(c != NULL);
		CHECK(pcpu_zone_object_size(z, c) == i * sizeof(struct pcpu_counter));
		objs[n].p = (unsigned char *)c;
		objs[n++].size = i * sizeof(struct pcpu_counter);
	}
	CHECK(sizeof(struct pcpu_counter) == 8);
	check_disjoint(objs, n);

	/* The default alignment is the granule, 8, not 16: a run of 8-byte
	 * objects is packed. */
	for (int i = 0; i < 64; i++) {
		unsigned char *p = pcpu_zone_alloc(z, 8, 0);

		CHECK(p != NULL && ((uintptr_t)p & 7) == 0);
		not16 += ((uintptr_t)p & 15) != 0;
		objs[n].p = p;
		objs[n++].size = 8;
	}
	if (not16 == 0) {
		fprintf(stderr, "64 8-byte objects with the default alignment were all 16-aligned: the default is not 8\n");
		exit(1);
	}

	/* Alignments 1 .. 4096, after a misaligning 8-byte object each time. */
	for (size_t align = 1; align <= 4096; align *= 2) {
		for (int r = 0; r < 4; r++) {
			unsigned char *mis = pcpu_zone_alloc(z, 8, 0);
			size_t size = 8 * (size_t)(1 + r * 3);
			unsigned char *p = pcpu_zone_alloc(z, size, align);

			CHECK(mis && p);
			if ((uintptr_t)p % (align < 8 ? 8 : align) != 0) {
				fprintf(stderr, "alignment %zu not honoured: %p\n", align, (void *)p);
				exit(1);
			}
			objs[n].p = mis;
			objs[n++].size = 8;
			objs[n].p = p;
			objs[n++].size = size;
		}
	}
	check_disjoint(objs, n);

	/* From freed holes: free every other object, then ask for aligned
	 * objects again (the holes are 8-aligned at best). */
	{
		size_t kept = 0;

		for (size_t i = 0; i < n; i++) {
			if (i % 2)
				CHECK(pcpu_zone_free(z, objs[i].p) == 0);
			else
				objs[kept++] = objs[i];
		}
		n = kept;
		for (size_t align = 8; align <= 4096; align *= 2) {
			for (int r = 0; r < 8; r++) {
				size_t size = 8 * (size_t)(1 + (r % 4));
				unsigned char *p = pcpu_zone_alloc(z, size, align);

				CHECK(p != NULL);
				if ((uintptr_t)p % align != 0) {
					fprintf(stderr, "alignment %zu not honoured (reuse): %p\n", align, (void *)p);
					exit(1);
				}
				for (size_t i = 0; i < size; i++)
					CHECK(p[i] == 0);
				objs[n].p = p;
				objs[n++].size = size;
			}
		}
		check_disjoint(objs, n);
	}
	/* Large aligned objects. */
	for (int i = 0; i < 3; i++) {
		unsigned char *p = pcpu_zone_alloc(z, 3 * 4096 + 8, 4096);

		CHECK(p != NULL && ((uintptr_t)p & 4095) == 0);
		CHECK(pcpu_zone_object_size(z, p) == 3 * 4096 + 8);
		objs[n].p = p;
		objs[n++].size = 3 * 4096 + 8;
	}
	check_disjoint(objs, n);
	CHECK(n <= sizeof(objs) / sizeof(objs[0]));

	/* The largest object, and sizes that round up to it. */
	{
		unsigned char *big = pcpu_zone_alloc(z, PCPU_ZONE_MAX_OBJECT - 7, 0);

		CHECK(big != NULL);
		CHECK(pcpu_zone_object_size(z, big) == PCPU_ZONE_MAX_OBJECT);
		big[PCPU_ZONE_MAX_OBJECT - 1] = 1;
		CHECK(pcpu_zone_free(z, big) == 0);
		big = pcpu_zone_alloc(z, PCPU_ZONE_MAX_OBJECT, 4096);
		CHECK(big != NULL && ((uintptr_t)big & 4095) == 0);
		CHECK(big[PCPU_ZONE_MAX_OBJECT - 1] == 0);
		CHECK(pcpu_zone_free(z, big) == 0);
	}

	/* Bad arguments. */
	expect_alloc_error(NULL, 8, 0, EINVAL, "NULL zone");
	expect_alloc_error(z, 0, 0, EINVAL, "size 0");
	expect_alloc_error(z, 8, 3, EINVAL, "alignment 3");
	expect_alloc_error(z, 8, 24, EINVAL, "alignment 24");
	expect_alloc_error(z, 8, 8192, EINVAL, "alignment 8192");
	expect_alloc_error(z, 8, (size_t)1 << (sizeof(size_t) > 4 ? 40 : 31), EINVAL, "alignment 2^40 (2^31 on 32-bit targets)");
	expect_alloc_error(z, 8, SIZE_MAX, EINVAL, "alignment SIZE_MAX");
	expect_alloc_error(z, PCPU_ZONE_MAX_OBJECT + 1, 0, E2BIG, "PCPU_ZONE_MAX_OBJECT + 1");
	expect_alloc_error(z, PCPU_ZONE_MAX_OBJECT + 8, 8, E2BIG, "PCPU_ZONE_MAX_OBJECT + 8");
	expect_alloc_error(z, PCPU_SLOT_STRIDE, 0, E2BIG, "PCPU_SLOT_STRIDE");
	expect_alloc_error(z, SIZE_MAX, 0, E2BIG, "SIZE_MAX");
	expect_alloc_error(z, SIZE_MAX - 6, 0, E2BIG, "SIZE_MAX - 6 (rounds to 0)");
	expect_alloc_error(z, SIZE_MAX - 15, 16, E2BIG, "SIZE_MAX - 15");
	expect_counter_error(NULL, 0, EINVAL, "array of 0");
	expect_counter_error(z, 0, EINVAL, "in zone, 0");
	errno = 0;
	CHECK(pcpu_counter_alloc_in(NULL, 1) == NULL && errno == EINVAL);
	expect_counter_error(NULL, PCPU_ZONE_MAX_OBJECT / sizeof(struct pcpu_counter) + 1, E2BIG,
			     "array over PCPU_ZONE_MAX_OBJECT");
	expect_counter_error(z, PCPU_ZONE_MAX_OBJECT / sizeof(struct pcpu_counter) + 1, E2BIG,
			     "in zone, over PCPU_ZONE_MAX_OBJECT");
	expect_counter_error(NULL, SIZE_MAX / sizeof(struct pcpu_counter) + 1, E2BIG,
			     "n * 8 wraps to 0");
	expect_counter_error(z, SIZE_MAX / sizeof(struct pcpu_counter) + 2, E2BIG,
			     "n * 8 wraps to 8");
	expect_counter_error(NULL, SIZE_MAX, E2BIG, "SIZE_MAX counters");
	{
		pcpu_counter_t big = pcpu_counter_alloc_in(z, PCPU_ZONE_MAX_OBJECT / sizeof(struct pcpu_counter));

		CHECK(big != NULL);
		pcpu_counter_add(big + PCPU_ZONE_MAX_OBJECT / sizeof(struct pcpu_counter) - 1, 3);
		CHECK_EQ_U64(pcpu_counter_fetch(big + PCPU_ZONE_MAX_OBJECT / sizeof(struct pcpu_counter) - 1), 3);
		CHECK(pcpu_counter_free(big) == 0);
	}
	/* The zone still works and the survivors are intact. */
	check_disjoint(objs, n);
	for (size_t i = 0; i < n; i++)
		CHECK(pcpu_zone_free(z, objs[i].p) == 0);
	pcpu_zone_destroy(z);
	printf("sizes: rounded to 8, alignments up to 4096 honoured, bad arguments refused\n");
}

/* Everything written before the free reads zero after the next alloc. */
static void test_reuse(void)
{
	static const struct {
		size_t size, align;
		int n;
	} cases[] = {
		{8, 0, 64}, {24, 0, 64}, {64, 0, 32}, {256, 8, 32}, {4104, 0, 8},
		{3 * 4096, 4096, 4}, {100000, 0, 3}, {8, 4096, 4},
	};
	pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	unsigned char *objs[64], *old[64];

	CHECK(z != NULL);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		size_t size = cases[k].size;
		int n = cases[k].n, reused = 0;

		for (int i = 0; i < n; i++) {
			objs[i] = pcpu_zone_alloc(z, size, cases[k].align);
			CHECK(objs[i] != NULL);
			for (unsigned s = 0; s < nslots; s++)
				if (pcpu_slot_walked(s))
					memset(pcpu_slot_ptr(objs[i], s), 0xa5, size);
		}
		for (int i = 0; i < n; i++) {
			CHECK(pcpu_zone_free(z, objs[i]) == 0);
			old[i] = objs[i];
		}
		for (int i = 0; i < n; i++) {
			unsigned char *p = pcpu_zone_alloc(z, size, cases[k].align);

			CHECK(p != NULL);
			for (int j = 0; j < n; j++) /* old[j]: freed, not read */
				reused += overlaps(p, size, old[j], size);
			for (unsigned s = 0; s < nslots; s++) {
				const unsigned char *q = pcpu_slot_ptr(p, s);
				for (size_t b = 0; b < size; b++)
					if (q[b] != 0) {
						fprintf(stderr, "reuse (size %zu): slot %u byte %zu reads %#x\n",
							size, s, b, q[b]);
						exit(1);
					}
			}
			objs[i] = p;
		}
		if (!reused) {
			fprintf(stderr, "size %zu: no new object overlaps a freed one; the zeroing is untested\n", size);
			exit(1);
		}
		for (int i = 0; i < n; i++)
			CHECK(pcpu_zone_free(z, objs[i]) == 0);
	}

	/* Counters: the rseq words, the mirror words (fallback adds) and a
	 * reset's offset (in slot 0's mirror) all read zero after reuse. */
	for (int round = 0; round < 3; round++) {
		pcpu_counter_t cs[16];
		int reused = 0;

		for (int i = 0; i < 16; i++) {
			cs[i] = pcpu_counter_alloc_in(z, 3);
			CHECK(cs[i] != NULL);
			for (int e = 0; e < 3; e++) {
				pcpu_counter_add(cs[i] + e, 1000 + e);
				pcpu_counter_add_atomic(cs[i] + e, 77);
			}
			if (round == 1)
				CHECK_EQ_U64(pcpu_counter_fetch_and_zero(cs[i]), 1077);
			if (round == 2) {
				pcpu_counter_zero(cs[i] + 1);
				pcpu_counter_add(cs[i] + 1, 5);
				CHECK_EQ_U64(pcpu_counter_fetch(cs[i] + 1), 5);
			}
		}
		pcpu_counter_t old[16];
		memcpy(old, cs, sizeof(old));
		for (int i = 0; i < 16; i++)
			CHECK(pcpu_counter_free(cs[i]) == 0);
		for (int i = 0; i < 16; i++) {
			cs[i] = pcpu_counter_alloc_in(z, 3);
			CHECK(cs[i] != NULL);
			for (int j = 0; j < 16; j++)
				reused += overlaps((unsigned char *)cs[i], 3 * sizeof(struct pcpu_counter),
						   (unsigned char *)old[j], 3 * sizeof(struct pcpu_counter));
			for (int e = 0; e < 3; e++) {
				CHECK_EQ_U64(pcpu_counter_fetch(cs[i] + e), 0);
				for (unsigned s = 0; s < nslots; s++)
					CHECK_EQ_U64(pcpu_counter_fetch_slot(cs[i] + e, s), 0);
			}
		}
		CHECK(reused > 0);
		/* Raw reuse of counter memory also reads zero. */
		for (int i = 0; i < 16; i++)
			CHECK(pcpu_counter_free(cs[i]) == 0);
		for (int i = 0; i < 16; i++) {
			unsigned char *p = pcpu_zone_alloc(z, 3 * sizeof(struct pcpu_counter), 0);
			CHECK(p != NULL);
			for (unsigned s = 0; s < nslots; s++)
				for (size_t b = 0; b < 3 * sizeof(struct pcpu_counter); b++)
					CHECK(((unsigned char *)pcpu_slot_ptr(p, s))[b] == 0);
			objs[i] = p;
		}
		for (int i = 0; i < 16; i++)
			CHECK(pcpu_zone_free(z, objs[i]) == 0);
	}
	pcpu_zone_destroy(z);
	printf("reuse: freed memory reads zero in every slot and mirror\n");
}

/* The calling thread's CPU time: what the allocations cost, not how much of
 * the machine the test got (a loaded machine stretches the wall time). */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* pcpu_zone_alloc() is amortised O(1) (pcpu/zone.h), also when alignment
 * leaves gaps: 8-byte objects aligned to 16 leave an 8-byte hole each, which
 * no later 16-aligned request fits; an allocator that rescans them all on
 * every call is quadratic (seconds here, where linear takes milliseconds).
 * A bound 1000 times what a linear allocator needs, in CPU time: not a
 * benchmark. */
static void test_aligned_scaling(void)
{
	static const struct {
		size_t size, align;
		long n;
	} runs[] = {{8, 16, 20000}, {8, 64, 20000}, {24, 4096, 2000}};
	double total = 0;

	for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
		pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
		double t0 = cpu_s(), dt;

		CHECK(z != NULL);
		for (long i = 0; i < runs[r].n; i++) {
			void *p = pcpu_zone_alloc(z, runs[r].size, runs[r].align);

			CHECK(p != NULL && ((uintptr_t)p & (runs[r].align - 1)) == 0);
			/* Unaligned neighbours fill some gaps, as real use does. */
			if (i % 4 == 0)
				CHECK(pcpu_zone_alloc(z, 8, 0) != NULL);
		}
		dt = cpu_s() - t0;
		total += dt;
		printf("aligned scaling: %ld objects of %zu bytes aligned %zu in %.3f s of CPU time\n",
		       runs[r].n, runs[r].size, runs[r].align, dt);
		pcpu_zone_destroy(z);
	}
	if (total > 2.0) {
		fprintf(stderr, "aligned allocations took %.1f s of CPU time in all (linear: milliseconds): not amortised O(1)\n",
			total);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	nslots = pcpu_nslots();
	CHECK(nslots >= 1);
	for (unsigned s = 0; s < nslots; s++)
		if (pcpu_slot_walked(s))
			last_slot = s;
	printf("%u slots, mode %s\n", nslots, pcpu_rseq_mode_name(pcpu_rseq_mode()));
	if (argc > 1 && !strcmp(argv[1], "--aligned-scaling")) {
		test_aligned_scaling();
		printf("test_zone_alloc --aligned-scaling: ok\n");
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "usage: %s [--aligned-scaling]\n", argv[0]);
		return 2;
	}
	test_misuse();
	test_sizes();
	test_reuse();
	printf("test_zone_alloc: ok\n");
	return 0;
}
