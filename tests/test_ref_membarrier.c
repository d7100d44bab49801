/*
 * Refs, locks and object caches when membarrier(2) is refused AFTER they
 * were created per-CPU (issue 23, item 2): a seccomp filter installed by
 * the program itself, or by a sandbox it enters, once objects exist.
 * pcpu/ref.h promises:
 *  - pcpu_sync_percpu_error() reports the refusal at once, and every ref,
 *    lock and cache created afterwards is atomic (locked) from the start,
 *    and works;
 *  - the per-CPU ones still switch, by running the switching thread on
 *    every CPU in turn: a kill releases (at once, or at the last put, with
 *    the count exact), a write lock excludes the reader inside and turns
 *    the lock atomic for good, a drain collects every slot's cache and
 *    turns the cache locked;
 *  - if sched_setaffinity(2) is refused too, kill and wrlock fail with
 *    membarrier's errno and leave the object working as it was (kill may
 *    be tried again), drain frees what it can reach and sets errno, and
 *    destroy frees everything (its caller guarantees no thread uses the
 *    object, so it needs no barrier).
 * Each scenario runs in a child process, since filters cannot be removed:
 * membarrier refused with EPERM, with ENOSYS, and with sched_setaffinity
 * refused too. --expect-percpu 0|1 as in test_ref.c; in the atomic modes
 * (no rseq, no membarrier from the start, ThreadSanitizer) the same
 * scenarios check that nothing needs a barrier.
 */
#include "check.h"
#include "seccomp_deny.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define HELD_PER_THREAD 1000
#define OBJS_PER_THREAD 40

static int percpu; /* the objects made before the filter are per-CPU */
static int releases;
static long ctors, dtors;

static void on_release(void *arg)
{
	(void)arg;
	__atomic_fetch_add(&releases, 1, __ATOMIC_SEQ_CST);
}

static int ctor(void *obj, void *arg)
{
	(void)obj;
	(void)arg;
	__atomic_fetch_add(&ctors, 1, __ATOMIC_RELAXED);
	return 0;
}

static void dtor(void *obj, void *arg)
{
	(void)obj;
	(void)arg;
	__atomic_fetch_add(&dtors, 1, __ATOMIC_RELAXED);
	errno = ENOENT; /* as a close() or unlink() in a destructor would */
}

static pcpu_ref_t *held_ref;
static pcpu_objcache_t *cache;

/* Takes HELD_PER_THREAD references (per-CPU while the ref is), and gets
 * and puts objects so that its slot's cache holds some. */
static void *taker(void *arg)
{
	void *objs[OBJS_PER_THREAD];

	(void)arg;
	for (int i = 0; i < HELD_PER_THREAD; i++)
		pcpu_ref_get(held_ref);
	for (int i = 0; i < OBJS_PER_THREAD; i++)
		CHECK((objs[i] = pcpu_objcache_get(cache)) != NULL);
	for (int i = 0; i < OBJS_PER_THREAD; i++)
		pcpu_objcache_put(cache, objs[i]);
	return NULL;
}

/* Drops HELD_PER_THREAD references taken by a taker. */
static void *dropper(void *arg)
{
	(void)arg;
	for (int i = 0; i < HELD_PER_THREAD; i++)
		pcpu_ref_put(held_ref);
	return NULL;
}

static void run_threads(void *(*fn)(void *))
{
	pthread_t t[THREADS];

	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, fn, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
}

static pcpu_objcache_t *make_cache(void)
{
	struct pcpu_objcache_desc d;
	pcpu_objcache_t *c;

	memset(&d, 0, sizeof(d));
	d.size = 64;
	d.capacity = 16;
	d.ctor = ctor;
	d.dtor = dtor;
	c = pcpu_objcache_create(&d);
	CHECK(c != NULL);
	return c;
}

/* Objects made after the filter: atomic, and everything works. */
static void check_new_objects(int err)
{
	pcpu_ref_t *r;
	pcpu_rwlock_t *l;
	pcpu_objcache_t *c;
	void *o;
	int before = releases;

	CHECK(pcpu_sync_percpu_error() == err);
	r = pcpu_ref_create(on_release, NULL);
	l = pcpu_rwlock_create();
	c = make_cache();
	CHECK(r && l);
	CHECK(!pcpu_ref_is_percpu(r) && !pcpu_rwlock_is_percpu(l) && !pcpu_objcache_is_percpu(c));
	pcpu_ref_get(r);
	CHECK(pcpu_ref_kill(r) == 0);
	CHECK(releases == before);
	pcpu_ref_put(r);
	CHECK(releases == before + 1);
	pcpu_ref_destroy(r);
	pcpu_rwlock_rdlock(l);
	pcpu_rwlock_rdunlock(l);
	CHECK(pcpu_rwlock_wrlock(l) == 0);
	CHECK(pcpu_rwlock_wrunlock(l) == 0);
	CHECK(pcpu_rwlock_destroy(l) == 0);
	CHECK((o = pcpu_objcache_get(c)) != NULL);
	pcpu_objcache_put(c, o);
	errno = 0;
	CHECK(pcpu_objcache_drain(c) >= 1 && errno == 0);
	CHECK(pcpu_objcache_destroy(c) == 0);
}

/*
 * The scenario, in a child. `deny_affinity`: sched_setaffinity refused
 * too, so per-CPU objects cannot switch.
 */
static void scenario(int err, int deny_affinity)
{
	const int64_t held = (int64_t)THREADS * HELD_PER_THREAD;
	pcpu_ref_t *idle_ref;
	pcpu_rwlock_t *lock;
	struct pcpu_objcache_stats st, st2;
	int switches = percpu && !deny_affinity; /* per-CPU objects can switch */
	size_t n;
	void *o;

	/* Before the filter: a ref with only the owner's reference, one with
	 * references held (taken per-CPU, on the slots the takers ran on), a
	 * lock read-locked per-CPU, a cache with objects in slots' caches. */
	idle_ref = pcpu_ref_create(on_release, NULL);
	held_ref = pcpu_ref_create(on_release, NULL);
	lock = pcpu_rwlock_create();
	cache = make_cache();
	CHECK(idle_ref && held_ref && lock);
	CHECK(pcpu_ref_is_percpu(held_ref) == percpu && pcpu_rwlock_is_percpu(lock) == percpu &&
	      pcpu_objcache_is_percpu(cache) == percpu);
	run_threads(taker);
	pcpu_rwlock_rdlock(lock);
	CHECK(pcpu_objcache_stats(cache, &st) == 0);
	CHECK(st.objects > 0 && st.cached == (uint64_t)st.objects);
	if (percpu)
		CHECK(st.cached > st.in_depot); /* some are in slots' caches */

	if (deny_affinity)
		seccomp_deny_membarrier_and_affinity();
	else
		seccomp_deny_membarrier(err);

	/* Reported at once, before any switch failed; new objects atomic. */
	check_new_objects(percpu ? err : pcpu_sync_percpu_error());

	/* The ref with only the owner's reference: released by the kill. */
	releases = 0;
	if (switches || !percpu) {
		CHECK(pcpu_ref_kill(idle_ref) == 0);
		CHECK(releases == 1 && pcpu_ref_is_killed(idle_ref));
	} else {
		errno = 0;
		CHECK(pcpu_ref_kill(idle_ref) == -1 && errno == EPERM);
		CHECK(releases == 0 && !pcpu_ref_is_killed(idle_ref) && pcpu_ref_is_percpu(idle_ref));
		CHECK(pcpu_ref_read(idle_ref) == 1);
	}
	pcpu_ref_destroy(idle_ref);

	/* The ref with references held. */
	releases = 0;
	CHECK_EQ_U64(pcpu_ref_read(held_ref), 1 + held);
	if (switches || !percpu) {
		/* Killed, count exact, released at the last put (by other
		 * threads, atomic now), not before. */
		CHECK(pcpu_ref_kill(held_ref) == 0);
		CHECK(releases == 0 && !pcpu_ref_is_percpu(held_ref));
		CHECK_EQ_U64(pcpu_ref_read(held_ref), held);
		CHECK(!pcpu_ref_tryget(held_ref));
		run_threads(dropper);
		CHECK(releases == 1);
		CHECK(pcpu_ref_read(held_ref) == 0);
	} else {
		/* Not killed, still per-CPU and working; kill fails again. */
		errno = 0;
		CHECK(pcpu_ref_kill(held_ref) == -1 && errno == EPERM);
		CHECK(!pcpu_ref_is_killed(held_ref) && pcpu_ref_is_percpu(held_ref));
		CHECK(pcpu_ref_tryget(held_ref));
		pcpu_ref_get(held_ref);
		CHECK_EQ_U64(pcpu_ref_read(held_ref), 3 + held);
		pcpu_ref_put(held_ref);
		pcpu_ref_put(held_ref);
		run_threads(dropper);
		CHECK(pcpu_ref_read(held_ref) == 1);
		errno = 0;
		CHECK(pcpu_ref_kill(held_ref) == -1 && errno == EPERM);
		CHECK(releases == 0);
	}
	pcpu_ref_destroy(held_ref); /* works either way (ASan: nothing leaks) */

	/* The lock, read-locked per-CPU by this thread. */
	if (switches || !percpu) {
		/* The writer's barrier is the CPU walk: it sees the reader
		 * inside (EBUSY), and the lock is atomic from then on. */
		errno = 0;
		CHECK(!pcpu_rwlock_trywrlock(lock) && errno == EBUSY);
		CHECK(!pcpu_rwlock_is_percpu(lock));
		pcpu_rwlock_rdunlock(lock);
		CHECK(pcpu_rwlock_wrlock(lock) == 0);
		CHECK(!pcpu_rwlock_tryrdlock(lock));
		CHECK(pcpu_rwlock_wrunlock(lock) == 0);
		CHECK(pcpu_rwlock_trywrlock(lock));
		CHECK(pcpu_rwlock_wrunlock(lock) == 0);
	} else {
		errno = 0;
		CHECK(pcpu_rwlock_wrlock(lock) == -1 && errno == EPERM);
		errno = 0;
		CHECK(!pcpu_rwlock_trywrlock(lock) && errno == EPERM);
		CHECK(pcpu_rwlock_is_percpu(lock)); /* readers unaffected */
		CHECK(pcpu_rwlock_tryrdlock(lock));
		pcpu_rwlock_rdunlock(lock);
		pcpu_rwlock_rdunlock(lock);
		errno = 0;
		CHECK(pcpu_rwlock_wrunlock(lock) == -1 && errno == EPERM); /* not taken */
	}
	pcpu_rwlock_rdlock(lock);
	pcpu_rwlock_rdunlock(lock);
	CHECK(pcpu_rwlock_destroy(lock) == 0);

	/* The cache. */
	errno = 0;
	n = pcpu_objcache_drain(cache);
	CHECK(pcpu_objcache_stats(cache, &st2) == 0);
	if (switches || !percpu) {
		/* Every slot's cache collected; locked from now on. */
		CHECK(errno == 0);
		CHECK_EQ_U64(n, st.cached);
		CHECK(st2.cached == 0 && st2.objects == 0);
		CHECK(!pcpu_objcache_is_percpu(cache));
	} else {
		/* The slots' caches out of reach: left as they are, the rest
		 * freed and counted, and errno says why. */
		CHECK(errno == EPERM);
		CHECK(st2.cached > 0);
		CHECK_EQ_U64(n + st2.cached, st.cached);
		CHECK(pcpu_objcache_is_percpu(cache));
	}
	CHECK((o = pcpu_objcache_get(cache)) != NULL);
	pcpu_objcache_put(cache, o);
	/* Destroy needs no barrier: every object destructed and freed. */
	CHECK(pcpu_objcache_destroy(cache) == 0);
	CHECK_EQ_U64(ctors, dtors);
}

static void in_child(int err, int deny_affinity, const char *what)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		scenario(err, deny_affinity);
		fflush(stdout);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "test_ref_membarrier: scenario '%s' failed (status 0x%x)\n", what,
			status);
		exit(1);
	}
	printf("  %s: ok\n", what);
}

int main(int argc, char **argv)
{
	int expect_percpu = -1, err = pcpu_sync_percpu_error();

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1]\n", argv[0]);
			return 2;
		}
	}
	percpu = err == 0;
	printf("rseq mode %s; per-CPU objects: %s (%s)\n", pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       percpu ? "yes" : "no", err ? strerror(err) : "membarrier registered");
	if (expect_percpu >= 0)
		CHECK(percpu == expect_percpu);
	in_child(EPERM, 0, "membarrier refused (EPERM): the CPU walk");
	in_child(ENOSYS, 0, "membarrier refused (ENOSYS): the CPU walk");
	in_child(EPERM, 1, "membarrier and sched_setaffinity refused: no switch");
	printf("test_ref_membarrier: ok\n");
	return 0;
}
