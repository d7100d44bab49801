/*
 * A fetch reads only the slots a thread can have written (src/core/slot_walk.c):
 * slot 0, the present CPUs and 0 .. npresent-1, not every possible CPU.
 * Run with PCPU_NSLOTS=64 (as if on a machine with 64 possible CPUs of
 * which this one's are present), in the rseq modes and with PCPU_RSEQ=0
 * (fallback adds, which go to the mirror words of walked slots only).
 *
 * Counters are added to (singly, atomically, and reset, so the mirror
 * words are in use), fetched one by one and with pcpu_counter_fetch_array(),
 * and every total checked; then mincore(2) tells which pages of each
 * slot's region -- the counters' words and their mirror words -- are
 * mapped: none of a slot outside the walk may be, and the written slots'
 * must be (or mincore could not see a touched page, and this test could
 * not fail). With --expect-touched (ctest slot_walk_all: PCPU_SLOT_WALK=all,
 * which walks every slot) the absent slots' pages must be mapped: the check
 * sees a walk of every slot.
 */
#include "check.h"
#include "present_cpus.h"
#include <pcpu/pcpu.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { N = 2048 }; /* counters: 16 kB per slot, four pages */

static unsigned char in_walk[4096];

/* Pages of [p, p + len) that are mapped. */
static unsigned mapped_pages(const void *p, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
	size_t n = ((uintptr_t)p + len - start + (size_t)page - 1) / (size_t)page;
	unsigned char vec[64];
	unsigned m = 0;

	CHECK(n <= sizeof(vec));
	CHECK(mincore((void *)start, n * (size_t)page, vec) == 0);
	for (size_t i = 0; i < n; i++)
		m += vec[i] & 1;
	return m;
}

int main(int argc, char **argv)
{
	int expect_touched = argc > 1 && !strcmp(argv[1], "--expect-touched");
	unsigned nslots = pcpu_nslots(), absent = 0, touched = 0;
	unsigned present = mark_walked_cpu_slots(in_walk, sizeof(in_walk));
	unsigned written = 0, owned_touched = 0;
	/* Owned slots (pcpu/worker.h) follow the CPU slots; none is claimed
	 * here, so none may be read, whatever PCPU_SLOT_WALK says. */
	unsigned cpu_slots = nslots - pcpu_worker_max();
	pcpu_counter_t a = pcpu_counter_alloc_array(N);
	uint64_t *out = calloc(N, sizeof(*out));

	const char *walk = getenv("PCPU_SLOT_WALK"), *refused = pcpu_environment_error();

	/* A value other than all or present is refused, and walks every slot
	 * (ctest slot_walk_unknown, with --expect-touched). */
	if (walk && *walk && strcmp(walk, "all") != 0 && strcmp(walk, "present") != 0)
		CHECK(refused && !strncmp(refused, "PCPU_SLOT_WALK:", 15));
	else
		CHECK(refused == NULL);
	CHECK(a && out);
	for (size_t i = 0; i < N; i++) {
		pcpu_counter_add(pcpu_counter_at(a, i), (int64_t)i);
		if (i % 3 == 0)
			pcpu_counter_add_atomic(pcpu_counter_at(a, i), 5);
	}
	CHECK_EQ_U64(pcpu_counter_fetch_and_zero(pcpu_counter_at(a, 7)), 7);
	pcpu_counter_add(pcpu_counter_at(a, 7), 7);
	for (size_t i = 0; i < N; i++)
		CHECK_EQ_U64(pcpu_counter_fetch(pcpu_counter_at(a, i)), i + (i % 3 == 0 ? 5 : 0));
	CHECK(pcpu_counter_fetch_array(a, N, out) == 0);
	for (size_t i = 0; i < N; i++)
		CHECK_EQ_U64(out[i], i + (i % 3 == 0 ? 5 : 0));

	for (unsigned s = 0; s < nslots; s++) {
		const char *words = (const char *)a + (size_t)s * PCPU_SLOT_STRIDE;
		const char *mirror = (const char *)a + (size_t)(nslots + s) * PCPU_SLOT_STRIDE;
		unsigned m = mapped_pages(words, N * 8) + mapped_pages(mirror, N * 8);

		if (s >= cpu_slots) {
			owned_touched += m > 0;
			continue;
		}
		if (s < sizeof(in_walk) && in_walk[s]) {
			written += m > 0;
			continue;
		}
		absent++;
		if (m) {
			touched++;
			if (!expect_touched)
				fprintf(stderr, "slot %u of %u touched (%u pages mapped), not present\n", s,
					nslots, m);
		}
	}
	printf("mode %s, %u slots (%u owned), %u present, %u slots outside the walk, %u of them touched, %u walked slots mapped, %u owned slots touched\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), nslots, nslots - cpu_slots, present, absent,
	       touched, written, owned_touched);
	CHECK(owned_touched == 0);
	CHECK(written > 0); /* mincore sees what was written */
	CHECK(absent > 0);  /* run with PCPU_NSLOTS above the present CPUs */
	if (expect_touched)
		CHECK(touched == absent);
	else
		CHECK(touched == 0);
	CHECK(pcpu_counter_free(a) == 0);
	free(out);
	return 0;
}
