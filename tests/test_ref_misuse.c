/*
 * A get or put on a released pcpu_ref (issue 23, item 6). It used to run
 * release() a second time (get, then put) and leave pcpu_ref_read() at -1
 * (put). pcpu/ref.h ("Misuse") now says: the library sees the released
 * count and undoes the add, so release() runs once, read() stays 0, and
 * tryget keeps failing -- in every mode (the released ref is atomic, so
 * every get and put of it runs the library's checked paths). Compiled
 * without PCPU_DEBUG on purpose: test_debug_misuse.c checks that with it,
 * the same calls abort with a message.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <string.h>

static int releases;

static void on_release(void *arg)
{
	(void)arg;
	releases++;
}

int main(int argc, char **argv)
{
	pcpu_ref_t *r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			i++; /* any mode: the checks are on the atomic paths */
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1]\n", argv[0]);
			return 2;
		}
	}

	/* Released by the kill. */
	r = pcpu_ref_create(on_release, NULL);
	CHECK(r != NULL);
	CHECK(pcpu_ref_kill(r) == 0);
	CHECK(releases == 1 && pcpu_ref_read(r) == 0);

	/* A get, then its put: release() does not run again. */
	pcpu_ref_get(r);
	CHECK(pcpu_ref_read(r) == 0);
	pcpu_ref_put(r);
	CHECK(releases == 1);
	CHECK(pcpu_ref_read(r) == 0);

	/* A put alone: read() stays 0, tryget still fails, and a get-put
	 * pair after it still does not release. */
	pcpu_ref_put(r);
	pcpu_ref_put(r);
	CHECK(pcpu_ref_read(r) == 0);
	CHECK(!pcpu_ref_tryget(r));
	pcpu_ref_get(r);
	pcpu_ref_put(r);
	CHECK(releases == 1);
	pcpu_ref_destroy(r);

	/* Released by the last put after the kill. */
	releases = 0;
	r = pcpu_ref_create(on_release, NULL);
	CHECK(r != NULL);
	pcpu_ref_get(r);
	CHECK(pcpu_ref_kill(r) == 0);
	pcpu_ref_put(r);
	CHECK(releases == 1);
	pcpu_ref_get(r);
	pcpu_ref_put(r);
	pcpu_ref_put(r);
	CHECK(releases == 1 && pcpu_ref_read(r) == 0);
	pcpu_ref_destroy(r);

	printf("test_ref_misuse: ok\n");
	return 0;
}
