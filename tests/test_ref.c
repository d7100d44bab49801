/*
 * pcpu_ref, one behaviour at a time (pcpu/ref.h): the owner's reference,
 * release exactly once (at the kill or at the last put, in whichever thread),
 * tryget before and after the kill, errors, exact reads, destroy from
 * release(). Run by ctest in every mode; --expect-percpu 0|1 makes it fail
 * if the mode (per-CPU or atomic from the start) is not the one meant.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

static int releases;
static void *released_arg;

static void on_release(void *arg)
{
	__atomic_fetch_add(&releases, 1, __ATOMIC_SEQ_CST);
	released_arg = arg;
}

static pcpu_ref_t *self_destroying;

static void destroy_self(void *arg)
{
	(void)arg;
	__atomic_fetch_add(&releases, 1, __ATOMIC_SEQ_CST);
	pcpu_ref_destroy(self_destroying);
}

#define THREADS 4
#define PER_THREAD 200000

static pcpu_ref_t *shared;

/* Takes 2n references and drops n of them: n stay held. */
static void *getter(void *arg)
{
	long n = (long)(intptr_t)arg;

	for (long i = 0; i < n; i++) {
		pcpu_ref_get(shared);
		CHECK(pcpu_ref_tryget(shared));
		pcpu_ref_put(shared);
	}
	return NULL;
}

/* Drops n references (taken by another thread). */
static void *putter(void *arg)
{
	long n = (long)(intptr_t)arg;

	for (long i = 0; i < n; i++)
		pcpu_ref_put(shared);
	return NULL;
}

int main(int argc, char **argv)
{
	int expect_percpu = -1;
	int err = pcpu_sync_percpu_error();
	pcpu_ref_t *r;
	int x;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1]\n", argv[0]);
			return 2;
		}
	}
	printf("rseq mode %s; per-CPU refs: %s (%s)\n", pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       err ? "no" : "yes", err ? strerror(err) : "membarrier registered");

	/* Errors. */
	errno = 0;
	CHECK(pcpu_ref_create(NULL, NULL) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_ref_kill(NULL) == -1 && errno == EINVAL);
	pcpu_ref_destroy(NULL);
	CHECK(!pcpu_ref_is_percpu(NULL) && !pcpu_ref_is_killed(NULL));

	/* Kill with no reference but the owner's: release inside kill. */
	r = pcpu_ref_create(on_release, &x);
	CHECK(r != NULL);
	if (expect_percpu >= 0)
		CHECK(pcpu_ref_is_percpu(r) == expect_percpu);
	CHECK(pcpu_ref_is_percpu(r) == (err == 0));
	CHECK(pcpu_ref_read(r) == 1);
	CHECK(!pcpu_ref_is_killed(r));
	CHECK(pcpu_ref_kill(r) == 0);
	CHECK(releases == 1 && released_arg == &x);
	CHECK(pcpu_ref_is_killed(r) && !pcpu_ref_is_percpu(r));
	CHECK(pcpu_ref_read(r) == 0);
	CHECK(!pcpu_ref_tryget(r)); /* released: never revived */
	errno = 0;
	CHECK(pcpu_ref_kill(r) == -1 && errno == EINVAL); /* twice: refused */
	CHECK(releases == 1);
	pcpu_ref_destroy(r);

	/* References held at the kill: release at the last put, not before. */
	releases = 0;
	r = pcpu_ref_create(on_release, NULL);
	CHECK(r != NULL);
	pcpu_ref_get(r);
	CHECK(pcpu_ref_tryget(r));
	pcpu_ref_get(r);
	CHECK(pcpu_ref_read(r) == 4);
	pcpu_ref_put(r);
	CHECK(pcpu_ref_read(r) == 3);
	CHECK(pcpu_ref_kill(r) == 0);
	CHECK(releases == 0);
	CHECK(pcpu_ref_read(r) == 2);
	CHECK(!pcpu_ref_tryget(r)); /* killed: fails although references exist */
	pcpu_ref_get(r);            /* get still works for a holder */
	pcpu_ref_put(r);
	pcpu_ref_put(r);
	CHECK(releases == 0);
	pcpu_ref_put(r);
	CHECK(releases == 1);
	pcpu_ref_destroy(r);

	/* Many threads, per-CPU adds on several slots; references taken by
	 * some threads are dropped by others, after the kill. */
	releases = 0;
	shared = pcpu_ref_create(on_release, NULL);
	CHECK(shared != NULL);
	{
		pthread_t t[THREADS];

		for (int i = 0; i < THREADS; i++)
			CHECK(pthread_create(&t[i], NULL, getter, (void *)(intptr_t)PER_THREAD) == 0);
		for (int i = 0; i < THREADS; i++)
			CHECK(pthread_join(t[i], NULL) == 0);
		CHECK_EQ_U64(pcpu_ref_read(shared), 1 + (int64_t)THREADS * PER_THREAD);
		CHECK(pcpu_ref_kill(shared) == 0);
		CHECK_EQ_U64(pcpu_ref_read(shared), (int64_t)THREADS * PER_THREAD);
		for (int i = 0; i < THREADS; i++)
			CHECK(pthread_create(&t[i], NULL, putter, (void *)(intptr_t)PER_THREAD) == 0);
		for (int i = 0; i < THREADS; i++)
			CHECK(pthread_join(t[i], NULL) == 0);
		CHECK(releases == 1);
		CHECK(pcpu_ref_read(shared) == 0);
		pcpu_ref_destroy(shared);
	}

	/* release() may destroy the ref it is called for. */
	releases = 0;
	self_destroying = pcpu_ref_create(destroy_self, NULL);
	CHECK(self_destroying != NULL);
	pcpu_ref_get(self_destroying);
	CHECK(pcpu_ref_kill(self_destroying) == 0);
	CHECK(releases == 0);
	pcpu_ref_put(self_destroying); /* frees it: ASan checks nothing follows */
	CHECK(releases == 1);

	printf("test_ref: ok\n");
	return 0;
}
