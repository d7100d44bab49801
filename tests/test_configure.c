/* SPDX-License-Identifier: MIT */
/*
 * pcpu_configure() (pcpu/rseq.h): a program chooses the slot index and the
 * owned slots itself. One case per run, since the choice is made once per
 * process:
 *   first      CPU index and 3 owned slots, before anything else: taken
 *   again      the same call twice (a reloaded server module): 0 both times
 *   busy       another index or count once pcpu runs: EBUSY, nothing changed
 *   invalid    NULL, short size, bad index, bad counts: EINVAL, nothing changed
 *   owned      owned_slots -1 keeps the default; 0 gives none
 *   index_env  run with PCPU_INDEX=mm_cid: the program's CPU index wins, and
 *              pcpu_environment_error() names the overridden variable
 *   owned_env  run with PCPU_OWNED_SLOTS=5: the program's 2 win, likewise
 *   after_use  a counter made first: only the index it runs with succeeds
 * Every case then counts from threads, exactly.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include "check.h"
#include <sched.h>
#include <errno.h>
#include <pcpu/pcpu.h>
#include <pcpu/worker.h>
#include <pthread.h>
#include <string.h>

static pcpu_counter_t counter;

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100000; i++)
		pcpu_counter_inc(counter);
	return NULL;
}

static void count_exactly(void)
{
	pthread_t t[4];

	counter = pcpu_counter_alloc();
	CHECK(counter);
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, adder, NULL) == 0);
	for (int i = 0; i < 4; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK_EQ_U64(pcpu_counter_fetch(counter), 400000);
	CHECK(pcpu_counter_free(counter) == 0);
}

/* Where the calling thread's adds land: pinned to the highest CPU it may
 * use, one add, and the slot that holds it. -1 where that says nothing
 * (the fallback path, or a single CPU 0). */
static int slot_of_an_add(int *cpu)
{
	cpu_set_t set, one;
	pcpu_counter_t c;
	int found = -1;

	CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
	*cpu = -1;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			*cpu = i;
	if (*cpu <= 0 || pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK)
		return -1;
	CPU_ZERO(&one);
	CPU_SET(*cpu, &one);
	CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
	c = pcpu_counter_alloc();
	CHECK(c);
	pcpu_counter_inc(c);
	for (unsigned s = 0; s < pcpu_nslots(); s++)
		if (*(volatile uint64_t *)pcpu_slot_ptr(c, s) == 1)
			found = (int)s;
	CHECK(pcpu_counter_free(c) == 0);
	CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
	return found;
}

/* The adds of a process that chose the CPU index land in the CPU's slot. */
static void check_cpu_slots(void)
{
	int cpu, slot = slot_of_an_add(&cpu);

	if (slot >= 0)
		CHECK(slot == cpu);
}

static int configure(enum pcpu_index index, int owned)
{
	struct pcpu_config cfg = PCPU_CONFIG_INIT;

	cfg.index = index;
	cfg.owned_slots = owned;
	return pcpu_configure(&cfg);
}

static void expect_errno(int rc, int err)
{
	CHECK(rc == -1);
	CHECK(errno == err);
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "first";
	/* The other index than the CPU number, where the kernel has one. */
	enum pcpu_index other = pcpu_rseq_has_mm_cid() ? PCPU_INDEX_MM_CID : PCPU_INDEX_CPU;

	if (!strcmp(c, "first")) {
		CHECK(configure(PCPU_INDEX_CPU, 3) == 0);
		CHECK(pcpu_zone_index(NULL) == PCPU_INDEX_CPU);
		CHECK(pcpu_worker_max() == 3);
		CHECK(pcpu_environment_error() == NULL);
		check_cpu_slots();
	} else if (!strcmp(c, "again")) {
		CHECK(configure(PCPU_INDEX_CPU, 2) == 0);
		CHECK(configure(PCPU_INDEX_CPU, 2) == 0);
		CHECK(configure(PCPU_INDEX_DEFAULT, -1) == 0); /* asks for nothing */
		CHECK(pcpu_zone_index(NULL) == PCPU_INDEX_CPU);
		CHECK(pcpu_worker_max() == 2);
	} else if (!strcmp(c, "busy")) {
		CHECK(configure(PCPU_INDEX_CPU, 2) == 0);
		if (other != PCPU_INDEX_CPU)
			expect_errno(configure(other, -1), EBUSY);
		expect_errno(configure(PCPU_INDEX_CPU, 7), EBUSY);
		CHECK(pcpu_zone_index(NULL) == PCPU_INDEX_CPU);
		CHECK(pcpu_worker_max() == 2);
	} else if (!strcmp(c, "invalid")) {
		struct pcpu_config cfg = PCPU_CONFIG_INIT;

		expect_errno(pcpu_configure(NULL), EINVAL);
		cfg.size = sizeof(size_t);
		expect_errno(pcpu_configure(&cfg), EINVAL);
		cfg.size = sizeof cfg;
		cfg.index = (enum pcpu_index)7;
		expect_errno(pcpu_configure(&cfg), EINVAL);
		expect_errno(configure(PCPU_INDEX_CPU, -2), EINVAL);
		expect_errno(configure(PCPU_INDEX_CPU, PCPU_OWNED_MAX + 1), EINVAL);
		/* Nothing was changed: the next valid call still chooses. */
		CHECK(configure(PCPU_INDEX_CPU, 1) == 0);
		CHECK(pcpu_worker_max() == 1);
	} else if (!strcmp(c, "owned")) {
		pcpu_worker_t w;

		CHECK(configure(PCPU_INDEX_DEFAULT, 0) == 0);
		CHECK(pcpu_worker_max() == 0);
		CHECK(pcpu_worker_claim(&w) == -1);
		CHECK(pcpu_zone_index(NULL) == other); /* the default index */
	} else if (!strcmp(c, "index_env")) {
		const char *e;

		CHECK(configure(PCPU_INDEX_CPU, -1) == 0);
		CHECK(pcpu_zone_index(NULL) == PCPU_INDEX_CPU);
		e = pcpu_environment_error();
		CHECK(e && !strncmp(e, "PCPU_INDEX: the program chose", 29));
		check_cpu_slots();
	} else if (!strcmp(c, "owned_env")) {
		const char *e;

		CHECK(configure(PCPU_INDEX_DEFAULT, 2) == 0);
		CHECK(pcpu_worker_max() == 2);
		e = pcpu_environment_error();
		CHECK(e && !strncmp(e, "PCPU_OWNED_SLOTS: the program chose", 35));
	} else if (!strcmp(c, "after_use")) {
		pcpu_counter_t early = pcpu_counter_alloc(); /* pcpu runs now */

		CHECK(early);
		CHECK(configure(other, -1) == 0); /* what it runs with */
		if (other != PCPU_INDEX_CPU)
			expect_errno(configure(PCPU_INDEX_CPU, -1), EBUSY);
		CHECK(pcpu_zone_index(NULL) == other);
		CHECK(pcpu_counter_free(early) == 0);
	} else {
		fprintf(stderr, "unknown case %s\n", c);
		return 2;
	}
	count_exactly();
	printf("configure %s: ok\n", c);
	return 0;
}
