/*
 * pcpu_rwlock, one behaviour at a time (pcpu/rwlock.h): readers share, a
 * writer excludes readers and writers, a reader that meets a writer sleeps
 * until the writer leaves, a writer waits for the readers inside, try
 * variants fail instead of waiting, destroy refuses a held lock.
 * --expect-percpu 0|1 as in test_ref.c.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pcpu_rwlock_t *lock;
static int step; /* what the helper thread has done (seq_cst) */

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static void *reader_blocked(void *arg)
{
	(void)arg;
	__atomic_store_n(&step, 1, __ATOMIC_SEQ_CST);
	pcpu_rwlock_rdlock(lock); /* a writer holds it: sleeps */
	__atomic_store_n(&step, 2, __ATOMIC_SEQ_CST);
	pcpu_rwlock_rdunlock(lock);
	return NULL;
}

static void *writer_blocked(void *arg)
{
	(void)arg;
	__atomic_store_n(&step, 1, __ATOMIC_SEQ_CST);
	CHECK(pcpu_rwlock_wrlock(lock) == 0); /* a reader is inside: waits */
	__atomic_store_n(&step, 2, __ATOMIC_SEQ_CST);
	pcpu_rwlock_wrunlock(lock);
	return NULL;
}

static void *try_reader(void *arg)
{
	int *ok = arg;

	*ok = pcpu_rwlock_tryrdlock(lock);
	if (*ok)
		pcpu_rwlock_rdunlock(lock);
	return NULL;
}

static void wait_step(int want)
{
	for (int i = 0; i < 5000 && __atomic_load_n(&step, __ATOMIC_SEQ_CST) != want; i++)
		sleep_ms(1);
	CHECK(__atomic_load_n(&step, __ATOMIC_SEQ_CST) == want);
}

int main(int argc, char **argv)
{
	int expect_percpu = -1;
	pthread_t t;
	int ok;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1]\n", argv[0]);
			return 2;
		}
	}
	lock = pcpu_rwlock_create();
	CHECK(lock != NULL);
	printf("rseq mode %s; lock %s\n", pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       pcpu_rwlock_is_percpu(lock) ? "per-CPU" : "atomic");
	if (expect_percpu >= 0)
		CHECK(pcpu_rwlock_is_percpu(lock) == expect_percpu);
	errno = 0;
	CHECK(pcpu_rwlock_wrlock(NULL) == -1 && errno == EINVAL);
	CHECK(pcpu_rwlock_destroy(NULL) == 0);

	/* Readers share; a writer cannot enter while one is inside. */
	pcpu_rwlock_rdlock(lock);
	CHECK(pcpu_rwlock_tryrdlock(lock));
	errno = 0;
	CHECK(!pcpu_rwlock_trywrlock(lock) && errno == EBUSY);
	errno = 0;
	CHECK(pcpu_rwlock_destroy(lock) == -1 && errno == EBUSY);
	pcpu_rwlock_rdunlock(lock);
	pcpu_rwlock_rdunlock(lock);

	/* A writer excludes readers (tryrdlock fails, in this thread and in
	 * another) and other writers. */
	CHECK(pcpu_rwlock_trywrlock(lock));
	CHECK(!pcpu_rwlock_tryrdlock(lock));
	CHECK(pthread_create(&t, NULL, try_reader, &ok) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(!ok);
	CHECK(!pcpu_rwlock_trywrlock(lock));
	errno = 0;
	CHECK(pcpu_rwlock_destroy(lock) == -1 && errno == EBUSY);
	pcpu_rwlock_wrunlock(lock);
	CHECK(pthread_create(&t, NULL, try_reader, &ok) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(ok);

	/* A reader that meets a writer sleeps until the writer leaves. */
	CHECK(pcpu_rwlock_wrlock(lock) == 0);
	step = 0;
	CHECK(pthread_create(&t, NULL, reader_blocked, NULL) == 0);
	wait_step(1);
	sleep_ms(50);
	CHECK(__atomic_load_n(&step, __ATOMIC_SEQ_CST) == 1); /* still waiting */
	pcpu_rwlock_wrunlock(lock);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(step == 2);

	/* A writer waits until the reader inside leaves, and new readers
	 * cannot enter meanwhile (the flag stops them: no writer starvation). */
	pcpu_rwlock_rdlock(lock);
	step = 0;
	CHECK(pthread_create(&t, NULL, writer_blocked, NULL) == 0);
	wait_step(1);
	sleep_ms(50);
	CHECK(__atomic_load_n(&step, __ATOMIC_SEQ_CST) == 1);
	CHECK(!pcpu_rwlock_tryrdlock(lock)); /* the waiting writer stops it */
	pcpu_rwlock_rdunlock(lock);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(step == 2);

	/* Unlocked again: everything works, destroy succeeds. */
	pcpu_rwlock_rdlock(lock);
	pcpu_rwlock_rdunlock(lock);
	CHECK(pcpu_rwlock_wrlock(lock) == 0);
	pcpu_rwlock_wrunlock(lock);
	CHECK(pcpu_rwlock_destroy(lock) == 0);
	printf("test_rwlock: ok\n");
	return 0;
}
