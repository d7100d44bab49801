/* SPDX-License-Identifier: MIT */
/*
 * pcpu_environment_error() (pcpu/rseq.h): a PCPU_* variable the library
 * does not understand is refused -- named by pcpu_environment_error() --
 * and the library does the safe thing its header states, never a silent
 * other number. Run by ctest with one environment each:
 *   test_environment none      every variable set to a value it knows
 *   test_environment VARIABLE  VARIABLE (the first one read) holds a value
 *                              the library does not know, or is a PCPU_*
 *                              name no part of pcpu reads
 * and the behaviour checked from the variables' values.
 */
#include "check.h"
#include "present_cpus.h"
#include <errno.h>
#include <pcpu/pcpu.h>
#include <pcpu/worker.h>
#include <string.h>

/* ThreadSanitizer builds have no rseq (gcc and clang say so differently). */
#if defined(__SANITIZE_THREAD__)
#define TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_BUILD 1
#endif
#endif

static int env_is(const char *name, const char *value)
{
	const char *v = getenv(name);

	return v && !strcmp(v, value);
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "none";
	const char *refused = pcpu_environment_error();
	unsigned cpu_slots = pcpu_nslots() - pcpu_worker_max();
	unsigned possible = read_cpu_list("/sys/devices/system/cpu/possible", NULL, 0);
	pcpu_worker_t w;
	pcpu_counter_t c = pcpu_counter_alloc();

	CHECK(possible > 0);
	printf("refused: %s\n", refused ? refused : "(none)");
	if (!strcmp(want, "none")) {
		CHECK(refused == NULL);
	} else {
		size_t n = strlen(want);

		CHECK(refused != NULL);
		CHECK(!strncmp(refused, want, n) && refused[n] == ':');
		CHECK(pcpu_environment_error() == refused); /* the first, for good */
	}

	/* A misspelt name is named with the variable it probably meant. */
	if (getenv("PCPU_INDX") && !strcmp(want, "PCPU_INDX"))
		CHECK(strstr(refused, "not a variable pcpu reads (PCPU_INDEX?)") != NULL);
	if (getenv("PCPU_SLOTWALK") && !strcmp(want, "PCPU_SLOTWALK"))
		CHECK(strstr(refused, "(PCPU_SLOT_WALK?)") != NULL);

	/* What each value does. */
	if (env_is("PCPU_RSEQ", "off") || env_is("PCPU_RSEQ", "1")) {
		/* Not understood, or 1: rseq stays on (ThreadSanitizer builds
		 * have none). */
#ifndef TSAN_BUILD
		CHECK(pcpu_rseq_error() != ECANCELED);
#endif
	}
	if (env_is("PCPU_INDEX", "cid"))
		CHECK(pcpu_zone_index(NULL) == (pcpu_rseq_has_mm_cid() ? PCPU_INDEX_MM_CID : PCPU_INDEX_CPU));
	if (env_is("PCPU_INDEX", "cpu"))
		CHECK(pcpu_zone_index(NULL) == PCPU_INDEX_CPU);
	if (env_is("PCPU_NSLOTS", "64x"))
		CHECK(cpu_slots == possible);
	if (env_is("PCPU_NSLOTS", "64"))
		CHECK(cpu_slots == (possible > 64 ? possible : 64));
	if (env_is("PCPU_OWNED_SLOTS", "3x")) {
		CHECK(pcpu_worker_max() == 0);
		errno = 0;
		CHECK(pcpu_worker_claim(&w) == -1 && errno == EINVAL);
	}
	if (env_is("PCPU_OWNED_SLOTS", "4")) {
		CHECK(pcpu_worker_max() == 4);
		CHECK(pcpu_worker_claim(&w) == 0);
		CHECK(pcpu_worker_release() == 0);
	}

	/* Whatever was refused, counting stays exact. */
	CHECK(c);
	for (int i = 0; i < 1000; i++)
		pcpu_counter_add(c, i);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 999 * 1000 / 2);
	CHECK(pcpu_counter_free(c) == 0);
	return 0;
}
