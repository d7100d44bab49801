/*
 * A thread that moves to another CPU after reading its slot index, before
 * its critical section commits, never adds to the slot it left.
 *
 * The inline add reads the index, then arms its section and compares the
 * index again inside it: that compare is what keeps a stale index from
 * being used. Stress tests can only catch its absence by luck (two CPUs
 * must run an unlocked add on the same word at the same instant). This
 * test makes the move deterministic: built with PCPU_TEST_INJECT, the hook
 * pcpu__test_inject_before(), which the inline sections call after the
 * index is read and before arming, pins the thread to the other CPU
 * (sched_setaffinity on itself migrates at once). With the process's index
 * the CPU number (PCPU_INDEX=cpu, set by ctest), every add must then land
 * in the slot of the CPU the thread moved to, counted per slot with
 * pcpu_counter_fetch_slot(), and every such section must have aborted.
 * The single add, pcpu_counter_add_many() (one index read for several
 * sections) and a histogram record (one section on a (count, sum) pair,
 * pcpu/histogram.h) are checked.
 *
 * Needs 2 online CPUs the process may use; with fewer it says so and exits
 * 77 (ctest: skipped) -- CI's machines have 2.
 */
#define PCPU_TEST_INJECT 1
#include "check.h"
#include <pcpu/pcpu.h>
#include <pcpu/histogram.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 2000
#define MANY 4

unsigned pcpu__test_inject_spin; /* no widening: the move is what matters */
__thread unsigned long pcpu__test_inject_aborts;

static int cpus[2];        /* the two CPUs the thread moves between */
static int move_to = -1;   /* the hook's next target CPU, -1: stay */

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	CHECK(sched_setaffinity(0, sizeof(set), &set) == 0);
}

void pcpu__test_inject_before(void)
{
	if (move_to >= 0) {
		int cpu = move_to;

		move_to = -1; /* once: the retry in the library must not move */
		pin(cpu);
	}
}

/* Every one of the ROUNDS moves must have aborted its section. A busy
 * machine may abort a few more (a preemption or a signal inside a section
 * also aborts it; one extra in a ctest run under load), so the count is at
 * least ROUNDS; a stale index that committed would leave it far below. */
static void check_aborts(unsigned long aborts, const char *what)
{
	if (aborts < ROUNDS)
		fprintf(stderr, "%s: %lu aborts, fewer than the %d moves\n", what, aborts, ROUNDS);
	CHECK(aborts >= ROUNDS);
	if (aborts > ROUNDS)
		printf("%s: %lu aborts for %d moves (%lu by the machine)\n", what, aborts, ROUNDS,
		       aborts - ROUNDS);
}

int main(void)
{
	cpu_set_t allowed;
	uint64_t expect_single[2] = {0, 0}, expect_many[2] = {0, 0};
	pcpu_counter_t single, many[MANY];
	unsigned long aborts_before;
	int n = 0;

	CHECK(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &allowed))
			cpus[n++] = c;
	if (n < 2) {
		printf("SKIP: needs 2 CPUs this process may run on\n");
		return 77;
	}
	if (pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK) {
		fprintf(stderr, "rseq unavailable here (%s): this test needs it\n",
			strerror(pcpu_rseq_error()));
		return 1;
	}
	single = pcpu_counter_alloc();
	CHECK(single);
	for (int i = 0; i < MANY; i++)
		CHECK((many[i] = pcpu_counter_alloc()));
	/* The index must be the CPU number, so slots name CPUs. */
	CHECK(pcpu_zone_index(pcpu_zone_of(single)) == PCPU_INDEX_CPU);

	pin(cpus[0]);
	aborts_before = pcpu__test_inject_aborts;
	for (int r = 0; r < ROUNDS; r++) {
		int to = r & 1 ? 0 : 1; /* alternate: 0 -> 1 -> 0 ... */

		move_to = cpus[to];
		pcpu_counter_inc(single);
		expect_single[to]++;
		CHECK(sched_getcpu() == cpus[to]);
	}
	/* Each add read the index on one CPU and was moved before arming:
	 * each must have failed its compare (counted as an abort). */
	check_aborts(pcpu__test_inject_aborts - aborts_before, "add");
	CHECK_EQ_U64(pcpu_counter_fetch_slot(single, (unsigned)cpus[0]), expect_single[0]);
	CHECK_EQ_U64(pcpu_counter_fetch_slot(single, (unsigned)cpus[1]), expect_single[1]);
	CHECK_EQ_U64(pcpu_counter_fetch(single), ROUNDS);

	/* add_many reads the index once and runs a section per counter; the
	 * move comes before the first section, which must abort (once per
	 * call: the retry and the later sections run on the new CPU). The
	 * values differ by direction: with equal ones, adds landing in the
	 * slot just left would give each slot the same totals as adds in the
	 * right one (the moves alternate), and only the abort count would
	 * tell. */
	aborts_before = pcpu__test_inject_aborts;
	for (int r = 0; r < ROUNDS; r++) {
		int to = r & 1 ? 0 : 1;
		static const int64_t vals[2][MANY] = { {1, 1, 1, 1}, {3, 3, 3, 3} };

		move_to = cpus[to];
		pcpu_counter_add_many(many, vals[to], MANY);
		expect_many[to] += (uint64_t)vals[to][0];
	}
	check_aborts(pcpu__test_inject_aborts - aborts_before, "add_many");
	for (int i = 0; i < MANY; i++) {
		CHECK_EQ_U64(pcpu_counter_fetch_slot(many[i], (unsigned)cpus[0]), expect_many[0]);
		CHECK_EQ_U64(pcpu_counter_fetch_slot(many[i], (unsigned)cpus[1]), expect_many[1]);
		CHECK(pcpu_counter_free(many[i]) == 0);
	}

	/* A histogram record: the pair of bucket 1 (values 11..100) takes
	 * (1, 42) on the CPU the thread moved to; white-box, through the
	 * histogram's pair array (word 2b count, 2b + 1 sum). */
	{
		static const int64_t bounds[] = { 10, 100 };
		struct pcpu_histogram_layout lay = { PCPU_HISTOGRAM_EXPLICIT, bounds, 2, 0, 0, 0, 0, 0, 0 };
		pcpu_histogram_t *h = pcpu_histogram_create_in(pcpu_zone_of(single), &lay);
		uint64_t expect_rec[2] = {0, 0};

		CHECK(h);
		aborts_before = pcpu__test_inject_aborts;
		for (int r = 0; r < ROUNDS; r++) {
			int to = r & 1 ? 0 : 1;

			move_to = cpus[to];
			pcpu_histogram_record(h, 42);
			expect_rec[to]++;
		}
		check_aborts(pcpu__test_inject_aborts - aborts_before, "histogram record");
		for (int k = 0; k < 2; k++) {
			CHECK_EQ_U64(pcpu_counter_fetch_slot(h->pcpu__c + 2, (unsigned)cpus[k]), expect_rec[k]);
			CHECK_EQ_U64(pcpu_counter_fetch_slot(h->pcpu__c + 3, (unsigned)cpus[k]),
				     42 * expect_rec[k]);
		}
		pcpu_histogram_destroy(h);
	}
	CHECK(pcpu_counter_free(single) == 0);
	printf("%d moves between CPU %d and %d after the index load: every add in the new CPU's slot\n",
	       2 * ROUNDS, cpus[0], cpus[1]);
	return 0;
}
