/* SPDX-License-Identifier: MIT */
/*
 * Every read sums every walked slot's word and mirror word, whatever shape
 * the summing code takes: src/core/slot_walk.h's pcpu_slot_walk_sum() (four
 * slots a step, then the rest) for pcpu_counter_fetch(), and
 * pcpu_counter_fetch_array()'s passes of four slots (then the rest) over
 * the array.
 *
 * Owned slots are claimed by threads holding them at once, 6, then 7, 8
 * and 9 (they stay in the walk once released), so the walk takes four
 * consecutive lengths, every remainder of the four-at-a-time loops, after
 * at least one whole step. After each, every
 * walked slot's word of each counter is stored a distinct value (a
 * test may write a slot's word directly: nothing else runs), mirror words
 * are written by atomic adds, and a reset moves slot 0's mirror word; the
 * totals are known. Arrays of lengths 1 .. 19, 63 .. 65, 511 .. 513 and
 * 1000, starting at word offsets 0 .. 7 of their cache line, are read with
 * pcpu_counter_fetch_array() and pcpu_counter_fetch(), and every value
 * compared with its known total. The slots a walk must visit are found as
 * the library defines them (slot 0, the present CPUs, 0 .. present - 1, the
 * claimed owned slots); with --all (ctest fetch_sums_all: PCPU_NSLOTS=4096,
 * more slots than the walk's list holds, so it takes its other branch and
 * visits every slot, and there are no owned slots to claim) every slot.
 */
#include "check.h"
#include "present_cpus.h"
#include <pcpu/pcpu.h>
#include <pthread.h>
#include <string.h>

enum { MAX_CLAIMS = 9, MAXN = 1000, SPAN = MAXN + 8 };

static unsigned char in_walk[8192];
static pthread_barrier_t held, done;
static int claimed_slot[MAX_CLAIMS];

/* Claims an owned slot and holds it until every claimer has one, so the
 * claims are distinct; released at the end, they stay in the walk. */
static void *claimer(void *arg)
{
	pcpu_worker_t w;

	CHECK(pcpu_worker_claim(&w) == 0);
	claimed_slot[(intptr_t)arg] = pcpu_worker_slot(w);
	pthread_barrier_wait(&held);
	pthread_barrier_wait(&done);
	CHECK(pcpu_worker_release() == 0);
	return NULL;
}

/* m threads hold an owned slot each at once; their slots join the walk. */
static void claim_at_once(unsigned m)
{
	pthread_t t[MAX_CLAIMS];

	CHECK(pthread_barrier_init(&held, NULL, m + 1) == 0);
	CHECK(pthread_barrier_init(&done, NULL, m + 1) == 0);
	for (intptr_t k = 0; k < (intptr_t)m; k++)
		CHECK(pthread_create(&t[k], NULL, claimer, (void *)k) == 0);
	pthread_barrier_wait(&held);
	pthread_barrier_wait(&done);
	for (unsigned k = 0; k < m; k++) {
		CHECK(pthread_join(t[k], NULL) == 0);
		CHECK(claimed_slot[k] > 0 && (unsigned)claimed_slot[k] < pcpu_nslots());
		in_walk[claimed_slot[k]] = 1;
	}
	CHECK(pthread_barrier_destroy(&held) == 0);
	CHECK(pthread_barrier_destroy(&done) == 0);
}

/* The value stored in slot s's word of counter i. */
static uint64_t word_value(size_t i, unsigned s, unsigned round)
{
	return (uint64_t)(i + 1) * 1000003u + (uint64_t)s * 7919u + ((i * 31u + s + round) & 0xff);
}

/* Fills an array's walked words and mirror words, reads it back every
 * way, checks every value; returns how many were checked. */
static unsigned check_reads(unsigned round)
{
	static const size_t lengths[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
					  17, 18, 19, 63, 64, 65, 511, 512, 513, MAXN };
	unsigned nslots = pcpu_nslots(), checked = 0;
	pcpu_counter_t a = pcpu_counter_alloc_array(SPAN);
	uint64_t *want = calloc(SPAN, sizeof(*want)), *out = calloc(SPAN, sizeof(*out));

	CHECK(a && want && out);
	for (size_t i = 0; i < SPAN; i++) {
		pcpu_counter_t c = pcpu_counter_at(a, i);

		for (unsigned s = 0; s < nslots; s++)
			if (in_walk[s]) {
				*(uint64_t *)pcpu_slot_ptr(c, s) = word_value(i, s, round);
				want[i] += word_value(i, s, round);
			}
		/* Mirror words: atomic adds land in a walked slot's mirror. */
		if (i % 3 == 0) {
			pcpu_counter_add_atomic(c, (int64_t)(i + 11));
			want[i] += i + 11;
		}
	}
	/* A reset moves slot 0's mirror word by minus the total. */
	CHECK_EQ_U64(pcpu_counter_fetch_and_zero(pcpu_counter_at(a, 5)), want[5]);
	pcpu_counter_add_atomic(pcpu_counter_at(a, 5), 3);
	want[5] = 3;

	for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++)
		for (size_t first = 0; first < 8; first++) {
			size_t n = lengths[li];

			memset(out, 0xa5, SPAN * sizeof(*out));
			CHECK(pcpu_counter_fetch_array(pcpu_counter_at(a, first), n, out) == 0);
			for (size_t i = 0; i < n; i++) {
				if (out[i] != want[first + i])
					fprintf(stderr, "fetch_array(%zu + %zu words)[%zu]: %llu, want %llu\n",
						first, n, i, (unsigned long long)out[i],
						(unsigned long long)want[first + i]);
				CHECK_EQ_U64(out[i], want[first + i]);
				checked++;
			}
			/* Nothing past n written. */
			CHECK_EQ_U64(out[n], 0xa5a5a5a5a5a5a5a5ull);
		}
	for (size_t i = 0; i < SPAN; i++) {
		CHECK_EQ_U64(pcpu_counter_fetch(pcpu_counter_at(a, i)), want[i]);
		checked++;
	}
	CHECK(pcpu_counter_free(a) == 0);
	free(want);
	free(out);
	return checked;
}

static unsigned walked(void)
{
	unsigned n = 0;

	for (unsigned s = 0; s < pcpu_nslots(); s++)
		n += in_walk[s];
	return n;
}

int main(int argc, char **argv)
{
	unsigned nslots = pcpu_nslots(), checked;

	CHECK(nslots < sizeof(in_walk));
	if (argc > 1 && !strcmp(argv[1], "--all")) {
		CHECK(nslots >= 4096); /* run with PCPU_NSLOTS=4096 */
		memset(in_walk, 1, nslots);
		checked = check_reads(0);
		printf("%u of %u slots walked (every slot), %u values checked\n", walked(), nslots,
		       checked);
		return 0;
	}
	CHECK(pcpu_worker_max() >= MAX_CLAIMS); /* run with PCPU_OWNED_SLOTS >= 9 */
	(void)mark_walked_cpu_slots(in_walk, sizeof(in_walk));
	for (unsigned m = MAX_CLAIMS - 3; m <= MAX_CLAIMS; m++) {
		claim_at_once(m);
		checked = check_reads(m);
		printf("%u of %u slots walked (present CPUs, %u owned slots), %u values checked\n",
		       walked(), nslots, m, checked);
	}
	return 0;
}
