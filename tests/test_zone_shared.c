/*
 * A zone moved into a file (what a statistics segment does): adds through
 * the ordinary fast path land in the file, where a second, read-only mapping
 * (another process's view) sees them; freed objects are zeroed in the file
 * too; a zone with live objects refuses to move (EBUSY); a backing that
 * fails leaves the zone private and as new, ready for another.
 * Uses the library's internal pcpu__file_backing_attach()
 * (src/segment/backing.c), so it links the static library.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include "segment/backing.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

struct seen {
	unsigned chunks;
	char *base[8];
	uint64_t off[8];
};

static void on_chunk(void *ctx, unsigned no, char *base, uint64_t off)
{
	struct seen *s = ctx;

	CHECK(no < 8);
	s->base[no] = base;
	s->off[no] = off;
	if (no + 1 > s->chunks)
		s->chunks = no + 1;
}

int main(void)
{
	struct seen seen = {0};
	int fd = memfd_create("pcpu-test", MFD_CLOEXEC);
	pcpu_zone_t *busy = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	unsigned nslots = pcpu_nslots();
	/* A chunk: every slot's region, then every slot's mirror region. */
	size_t span = 2 * (size_t)nslots * PCPU_SLOT_STRIDE;

	CHECK(fd >= 0 && busy && z);
	CHECK(pcpu_counter_alloc_in(busy, 1) != NULL);
	errno = 0;
	CHECK(pcpu__file_backing_attach(busy, fd, 0, NULL, NULL, NULL, 0, NULL) == -1 && errno == EBUSY);

	CHECK(pcpu__file_backing_attach(z, fd, 4096, on_chunk, NULL, &seen, 0, NULL) == 0);
	CHECK(seen.chunks == 1 && seen.off[0] == 4096);
	errno = 0;
	CHECK(pcpu__file_backing_attach(z, fd, 4096, NULL, NULL, NULL, 0, NULL) == -1 && errno == EBUSY);

	pcpu_counter_t c = pcpu_counter_alloc_in(z, 4);
	CHECK(c != NULL);
	for (int i = 0; i < 1000; i++)
		pcpu_counter_add(c + 2, 3);
	pcpu_counter_add_atomic(c + 2, 5);

	/* The reader's view: the file, read-only, at an address of its own. */
	char *view = mmap(NULL, span, PROT_READ, MAP_SHARED, fd, 4096);
	CHECK(view != MAP_FAILED);
	const struct pcpu__chunk_hdr *hdr = (const void *)view;
	CHECK(hdr->magic == PCPU__CHUNK_MAGIC);
	size_t obj_off = (size_t)((char *)(c + 2) - seen.base[0]);
	int64_t sum = 0, mirror_sum = 0;
	for (unsigned s = 0; s < nslots; s++) {
		sum += *(const int64_t *)(view + obj_off + (size_t)s * PCPU_SLOT_STRIDE);
		mirror_sum += *(const int64_t *)(view + obj_off + (size_t)(nslots + s) * PCPU_SLOT_STRIDE);
	}
	/* rseq adds in the slot words, the atomic add in a mirror word (every
	 * add, without rseq), and the chunk marked as having mirror words. */
	CHECK(hdr->flags & PCPU__CHUNK_MIRROR_USED);
	CHECK(mirror_sum == (pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK ? 3005 : 5));
	CHECK(sum + mirror_sum == 3005);
	CHECK_EQ_U64(pcpu_counter_fetch(c + 2), 3005);

	/* Freed: zero in the file as well, and the memory is reused zeroed. */
	CHECK(pcpu_counter_free(c) == 0);
	for (unsigned s = 0; s < 2 * nslots; s++)
		CHECK(*(const int64_t *)(view + obj_off + (size_t)s * PCPU_SLOT_STRIDE) == 0);

	/* Freeing a small object written from one slot only must not make
	 * the other slots' pages of the file resident (zeroing checks them
	 * with pread, which reads a hole without allocating it). */
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
	/* On a page of its own: the reads above faulted in the first ones. */
	pcpu_counter_t d = pcpu_zone_alloc(z, sizeof(struct pcpu_counter), 4096);
	CHECK(d != NULL);
	pcpu_counter_add(d, 1); /* one slot only: one thread, pinned to CPU 0 */
	CHECK(pcpu_counter_free(d) == 0);
	size_t d_off = (size_t)((char *)d - seen.base[0]);
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	unsigned written = pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK ? nslots : 0;
	for (unsigned s = 0; s < 2 * nslots; s++) {
		unsigned char vec;
		char *page = view + ((d_off + (size_t)s * PCPU_SLOT_STRIDE) & ~(ps - 1));
		if (s == written) /* the slot (or, without rseq, the mirror) the add wrote */
			continue;
		CHECK(mincore(page, ps, &vec) == 0);
		CHECK((vec & 1) == 0);
	}

	/* Growing: a second chunk lands in the file after the first. */
	void *big1 = pcpu_zone_alloc(z, PCPU_ZONE_MAX_OBJECT, 0);
	void *big2 = pcpu_zone_alloc(z, PCPU_ZONE_MAX_OBJECT, 0);
	CHECK(big1 && big2);
	CHECK(seen.chunks >= 2 && seen.off[1] == 4096 + span);
	munmap(view, span);

	/* A backing that fails (the file cannot be mapped for writing) leaves
	 * the zone as usable as a new one: its chunk in private memory again,
	 * its header written again there, so that a later backing starts
	 * from a valid header (a joiner checks the file's magic). */
	pcpu_zone_t *again = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	CHECK(again != NULL);
	pcpu_counter_t e = pcpu_counter_alloc_in(again, 1);
	CHECK(e != NULL);
	const struct pcpu__chunk_hdr *ehdr =
		(const void *)((uintptr_t)e & ~(uintptr_t)(PCPU_SLOT_STRIDE - 1));
	CHECK(pcpu_counter_free(e) == 0); /* no live object: it may move */
	int fd2 = memfd_create("pcpu-test-2", MFD_CLOEXEC);
	char ro_path[64];
	CHECK(fd2 >= 0);
	snprintf(ro_path, sizeof ro_path, "/proc/self/fd/%d", fd2);
	int ro = open(ro_path, O_RDONLY | O_CLOEXEC);
	CHECK(ro >= 0);
	errno = 0;
	CHECK(pcpu__file_backing_attach(again, ro, 0, NULL, NULL, NULL, 0, NULL) == -1 && errno != 0);
	CHECK(ehdr->magic == PCPU__CHUNK_MAGIC);
	e = pcpu_counter_alloc_in(again, 1);
	CHECK(e != NULL);
	pcpu_counter_add(e, 7);
	CHECK_EQ_U64(pcpu_counter_fetch(e), 7);
	CHECK(pcpu_counter_free(e) == 0);
	CHECK(pcpu__file_backing_attach(again, fd2, 0, NULL, NULL, NULL, 0, NULL) == 0);
	view = mmap(NULL, span, PROT_READ, MAP_SHARED, fd2, 0);
	CHECK(view != MAP_FAILED);
	CHECK(((const struct pcpu__chunk_hdr *)view)->magic == PCPU__CHUNK_MAGIC);
	munmap(view, span);
	pcpu_zone_destroy(again);
	close(ro);
	close(fd2);

	pcpu_zone_destroy(z);
	pcpu_zone_destroy(busy);
	close(fd);
	printf("test_zone_shared: ok\n");
	return 0;
}
