/*
 * Misuse of a pcpu_rwlock that used to corrupt it silently (issue 23, item
 * 6), and what pcpu/rwlock.h ("Misuse") now promises instead:
 *  - a read unlock without a read lock: writers fail with ENOTRECOVERABLE
 *    (they used to wait for ever), trywrlock too, every time; readers still
 *    work; destroy frees the lock;
 *  - wrunlock without holding the write lock -- never taken, twice, or by
 *    another thread than the holder: -1 EPERM and nothing changes (the
 *    holder's lock stays held);
 *  - a second wrlock by the holder: -1 EDEADLK (it used to deadlock);
 *  - NULL: wrunlock EINVAL, is_percpu 0.
 * The calls that used to hang run under alarm(): a regression fails the
 * test (SIGALRM) instead of hanging it. --expect-percpu 0|1 as in
 * test_ref.c: every mode, since the checks are in the shared paths.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static pcpu_rwlock_t *lock;
static int other_rc, other_errno;

static void *unlock_from_other_thread(void *arg)
{
	(void)arg;
	errno = 0;
	other_rc = pcpu_rwlock_wrunlock(lock);
	other_errno = errno;
	return NULL;
}

static void *read_lock_and_unlock(void *arg)
{
	(void)arg;
	pcpu_rwlock_rdlock(lock);
	pcpu_rwlock_rdunlock(lock);
	return NULL;
}

/* One read unlock too many, on a lock in whichever state `readers` read
 * locks left it. */
static void unbalanced_rdunlock(int readers)
{
	pthread_t t;

	lock = pcpu_rwlock_create();
	CHECK(lock != NULL);
	for (int i = 0; i < readers; i++)
		CHECK(pcpu_rwlock_tryrdlock(lock)); /* recursive: the try form */
	for (int i = 0; i <= readers; i++)
		pcpu_rwlock_rdunlock(lock);
	/* The count is below zero for good: writers are told, every time. */
	for (int i = 0; i < 2; i++) {
		errno = 0;
		CHECK(!pcpu_rwlock_trywrlock(lock) && errno == ENOTRECOVERABLE);
		alarm(10); /* it used to wait for ever here */
		errno = 0;
		CHECK(pcpu_rwlock_wrlock(lock) == -1 && errno == ENOTRECOVERABLE);
		alarm(0);
	}
	/* The failed writers left the lock open to readers, in this thread
	 * and in another (no reader sleeps behind a flag left up). */
	CHECK(pcpu_rwlock_tryrdlock(lock));
	pcpu_rwlock_rdunlock(lock);
	alarm(10);
	CHECK(pthread_create(&t, NULL, read_lock_and_unlock, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	alarm(0);
	CHECK(pcpu_rwlock_destroy(lock) == 0);
}

int main(int argc, char **argv)
{
	int expect_percpu = -1;
	pthread_t t;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1]\n", argv[0]);
			return 2;
		}
	}
	CHECK(pcpu_rwlock_is_percpu(NULL) == 0);
	errno = 0;
	CHECK(pcpu_rwlock_wrunlock(NULL) == -1 && errno == EINVAL);

	lock = pcpu_rwlock_create();
	CHECK(lock != NULL);
	printf("rseq mode %s; lock %s\n", pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       pcpu_rwlock_is_percpu(lock) ? "per-CPU" : "atomic");
	if (expect_percpu >= 0)
		CHECK(pcpu_rwlock_is_percpu(lock) == expect_percpu);

	/* wrunlock without the lock: refused, nothing changed. */
	errno = 0;
	CHECK(pcpu_rwlock_wrunlock(lock) == -1 && errno == EPERM);
	CHECK(pcpu_rwlock_tryrdlock(lock));
	pcpu_rwlock_rdunlock(lock);

	/* Twice: the second is refused. */
	CHECK(pcpu_rwlock_wrlock(lock) == 0);
	CHECK(pcpu_rwlock_wrunlock(lock) == 0);
	errno = 0;
	CHECK(pcpu_rwlock_wrunlock(lock) == -1 && errno == EPERM);

	/* By another thread than the holder: refused, the lock stays held. */
	CHECK(pcpu_rwlock_wrlock(lock) == 0);
	CHECK(pthread_create(&t, NULL, unlock_from_other_thread, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(other_rc == -1 && other_errno == EPERM);
	CHECK(!pcpu_rwlock_tryrdlock(lock)); /* still write-locked */

	/* A second wrlock by the holder: EDEADLK, still held; trywrlock
	 * EBUSY. */
	alarm(10); /* it used to deadlock here */
	errno = 0;
	CHECK(pcpu_rwlock_wrlock(lock) == -1 && errno == EDEADLK);
	alarm(0);
	errno = 0;
	CHECK(!pcpu_rwlock_trywrlock(lock) && errno == EBUSY);
	CHECK(!pcpu_rwlock_tryrdlock(lock));
	CHECK(pcpu_rwlock_wrunlock(lock) == 0);
	CHECK(pcpu_rwlock_tryrdlock(lock));
	pcpu_rwlock_rdunlock(lock);
	CHECK(pcpu_rwlock_destroy(lock) == 0);

	/* Unbalanced read unlocks, on an idle lock and on one with readers
	 * inside (their +1s and the extra -1s in different words). */
	unbalanced_rdunlock(0);
	unbalanced_rdunlock(3);

	printf("test_rwlock_misuse: ok\n");
	return 0;
}
