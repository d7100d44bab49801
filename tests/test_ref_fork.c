/*
 * fork() with live references and held read locks: the behaviour pcpu/ref.h
 * documents, checked.
 *  - A ref is copied in the state it had: the child counts every reference
 *    held at the fork. The forking thread's references work in the child;
 *    a reference another parent thread held is never put there, so the
 *    child's kill does not release (and must not crash or wait). A ref with
 *    no reference but the owner's releases in the child at its kill (the
 *    child's membarrier works) and, independently, in the parent.
 *  - A read lock the forking thread held may be released in the child, and
 *    the lock then works fully there. One another parent thread held stays
 *    held in the child: trywrlock fails with EBUSY, readers still get in.
 *  - The parent is unaffected by anything the child does.
 * Also forks while other threads get/put and lock/unlock: the child can use
 * both, and the parent stays exact.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int releases; /* per process: the child has its own copy */

static void on_release(void *arg)
{
	(void)arg;
	__atomic_fetch_add(&releases, 1, __ATOMIC_SEQ_CST);
}

static pcpu_ref_t *held_by_other, *only_owner, *busy_ref;
static pcpu_rwlock_t *lock_mine, *lock_other, *busy_lock;
static int go_release, helper_ready, stop;

/* Holds a reference and a read lock until told to drop them. */
static void *helper(void *arg)
{
	(void)arg;
	pcpu_ref_get(held_by_other);
	pcpu_rwlock_rdlock(lock_other);
	__atomic_store_n(&helper_ready, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&go_release, __ATOMIC_SEQ_CST))
		usleep(1000);
	pcpu_rwlock_rdunlock(lock_other);
	pcpu_ref_put(held_by_other);
	return NULL;
}

static long busy_pairs[2];

static void *busy(void *arg)
{
	long *n = arg;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		pcpu_ref_get(busy_ref);
		pcpu_ref_put(busy_ref);
		pcpu_rwlock_rdlock(busy_lock);
		pcpu_rwlock_rdunlock(busy_lock);
		(*n)++;
	}
	return NULL;
}

static int child(void)
{
	/* held_by_other: owner + the helper's + main's. */
	CHECK_EQ_U64(pcpu_ref_read(held_by_other), 3);
	pcpu_ref_get(held_by_other);
	CHECK(pcpu_ref_tryget(held_by_other));
	pcpu_ref_put(held_by_other);
	pcpu_ref_put(held_by_other);
	pcpu_ref_put(held_by_other); /* main's own reference, taken before the fork */
	CHECK(pcpu_ref_kill(held_by_other) == 0);
	CHECK(releases == 0); /* the helper's reference is never put here */
	CHECK_EQ_U64(pcpu_ref_read(held_by_other), 1);
	CHECK(!pcpu_ref_tryget(held_by_other));

	/* only_owner: releases at the kill, in the child. */
	CHECK_EQ_U64(pcpu_ref_read(only_owner), 1);
	CHECK(pcpu_ref_kill(only_owner) == 0);
	CHECK(releases == 1);

	/* The forking thread's read lock: released here, then the lock works. */
	CHECK(!pcpu_rwlock_trywrlock(lock_mine));
	pcpu_rwlock_rdunlock(lock_mine);
	CHECK(pcpu_rwlock_trywrlock(lock_mine));
	pcpu_rwlock_wrunlock(lock_mine);
	CHECK(pcpu_rwlock_wrlock(lock_mine) == 0);
	pcpu_rwlock_wrunlock(lock_mine);

	/* The helper's read lock stays held: no writer, readers still in. */
	errno = 0;
	CHECK(!pcpu_rwlock_trywrlock(lock_other) && errno == EBUSY);
	CHECK(pcpu_rwlock_tryrdlock(lock_other));
	pcpu_rwlock_rdunlock(lock_other);
	pcpu_rwlock_rdlock(lock_other);
	pcpu_rwlock_rdunlock(lock_other);
	return 0;
}

/* Child of a fork taken while other threads hammer busy_ref/busy_lock. */
static int busy_child(void)
{
	for (int i = 0; i < 10000; i++) {
		pcpu_ref_get(busy_ref);
		CHECK(pcpu_ref_tryget(busy_ref));
		pcpu_ref_put(busy_ref);
		pcpu_ref_put(busy_ref);
		if (pcpu_rwlock_tryrdlock(busy_lock))
			pcpu_rwlock_rdunlock(busy_lock);
	}
	/* References the busy threads held at the fork are never put here:
	 * the kill works, release may or may not run, nothing waits. */
	CHECK(pcpu_ref_kill(busy_ref) == 0);
	CHECK(releases <= 1);
	return 0;
}

static void run_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0)
		_exit(fn());
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
	pthread_t h, b[2];
	int expect_percpu = -1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1]\n", argv[0]);
			return 2;
		}
	}
	held_by_other = pcpu_ref_create(on_release, NULL);
	only_owner = pcpu_ref_create(on_release, NULL);
	lock_mine = pcpu_rwlock_create();
	lock_other = pcpu_rwlock_create();
	CHECK(held_by_other && only_owner && lock_mine && lock_other);
	if (expect_percpu >= 0)
		CHECK(pcpu_ref_is_percpu(held_by_other) == expect_percpu &&
		      pcpu_rwlock_is_percpu(lock_mine) == expect_percpu);
	printf("refs %s, locks %s\n", pcpu_ref_is_percpu(held_by_other) ? "per-CPU" : "atomic",
	       pcpu_rwlock_is_percpu(lock_mine) ? "per-CPU" : "atomic");

	CHECK(pthread_create(&h, NULL, helper, NULL) == 0);
	while (!__atomic_load_n(&helper_ready, __ATOMIC_SEQ_CST))
		usleep(1000);
	pcpu_ref_get(held_by_other);
	pcpu_rwlock_rdlock(lock_mine);
	run_child(child);

	/* The parent's objects are as they were. */
	CHECK(releases == 0);
	CHECK_EQ_U64(pcpu_ref_read(held_by_other), 3);
	CHECK_EQ_U64(pcpu_ref_read(only_owner), 1);
	CHECK(!pcpu_rwlock_trywrlock(lock_mine)); /* still read-locked here */
	pcpu_rwlock_rdunlock(lock_mine);
	__atomic_store_n(&go_release, 1, __ATOMIC_SEQ_CST);
	CHECK(pthread_join(h, NULL) == 0);
	pcpu_ref_put(held_by_other);
	CHECK(pcpu_ref_kill(held_by_other) == 0);
	CHECK(releases == 1);
	CHECK(pcpu_ref_kill(only_owner) == 0);
	CHECK(releases == 2);
	CHECK(pcpu_rwlock_wrlock(lock_other) == 0);
	pcpu_rwlock_wrunlock(lock_other);
	CHECK(pcpu_rwlock_destroy(lock_mine) == 0);
	CHECK(pcpu_rwlock_destroy(lock_other) == 0);
	pcpu_ref_destroy(held_by_other);
	pcpu_ref_destroy(only_owner);

	/* Forks while two threads get/put and lock/unlock. */
	releases = 0;
	busy_ref = pcpu_ref_create(on_release, NULL);
	busy_lock = pcpu_rwlock_create();
	CHECK(busy_ref && busy_lock);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&b[i], NULL, busy, &busy_pairs[i]) == 0);
	for (int f = 0; f < 20; f++) {
		run_child(busy_child);
		usleep(2000);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_join(b[i], NULL) == 0);
	CHECK(releases == 0);
	CHECK_EQ_U64(pcpu_ref_read(busy_ref), 1);
	CHECK(pcpu_ref_kill(busy_ref) == 0);
	CHECK(releases == 1);
	CHECK(pcpu_rwlock_destroy(busy_lock) == 0);
	pcpu_ref_destroy(busy_ref);
	printf("test_ref_fork: ok (%ld get/put + lock/unlock pairs around 20 forks)\n",
	       busy_pairs[0] + busy_pairs[1]);
	return 0;
}
