/*
 * The CPU walk under stress (issue 23, item 2): locks and object caches
 * created per-CPU, then membarrier(2) refused by a seccomp filter, then
 * switched while threads use them. Each round k has its own lock and its
 * own cache, created before the filter; reader threads (2 per CPU) loop on
 * round k's: read-lock it, raise `readers_in`, check `writer_in` is 0,
 * sometimes yield inside, check again, lower, unlock; and get an object of
 * round k's cache, check it is not held by anyone else (a tag exchanged
 * atomically), put it back. The main thread, filtered, then:
 *  - write-locks round k's lock while readers are inside or entering: its
 *    barrier must be the CPU walk (src/core/percpu_sync.c); it checks no reader is
 *    inside for the whole write section, and that the lock is atomic
 *    afterwards;
 *  - drains round k's cache while the readers get and put: the walk again;
 *    no object is handed out twice, none is lost, the cache is locked
 *    afterwards, and the counters are exact at the end.
 * Built with PCPU_TEST_INJECT: every read-lock and cache section is widened
 * between its mode compare and its commit, so the walk lands inside
 * sections. Without the walk (a barrier that does nothing) a reader gets in
 * beside the writer within a few rounds.
 *
 * Usage: test_ref_membarrier_stress --expect-percpu 0|1 [--rounds N]
 * (default 2000; PCPU_TEST_SCALE multiplies it). Rounds, not seconds: a
 * loaded machine makes it slower, not weaker.
 */
#define PCPU_TEST_INJECT 1
#include "check.h"
#include "seccomp_deny.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

unsigned pcpu__test_inject_spin = 3000;
__thread unsigned long pcpu__test_inject_aborts;
static __thread unsigned inject_calls;

void pcpu__test_inject_before(void)
{
	if ((++inject_calls & 0x3ff) == 0)
		sched_yield();
}

#define MAX_ROUNDS 4096
#define MAX_THREADS 256
#define FREE 0x46524545u
#define HELD 0x48454c44u

struct obj {
	uint32_t tag;
	uint32_t pad;
};

static pcpu_rwlock_t *locks[MAX_ROUNDS];
static pcpu_objcache_t *caches[MAX_ROUNDS];
static int cur;          /* the round (atomic) */
static int stop;         /* atomic */
/* Atomic canaries, as in test_rwlock_stress.c, one pair per round (a
 * reader may still be on an earlier round's lock). */
static int writer_in[MAX_ROUNDS], readers_in[MAX_ROUNDS];
static long ctors, dtors;
static uint64_t gets[MAX_ROUNDS], reads; /* atomic */
static uint64_t aborts;  /* atomic */

static void fail(const char *what, int round)
{
	fprintf(stderr, "test_ref_membarrier_stress: FAILED: %s (round %d)\n", what, round);
	_exit(1);
}

static int ctor(void *p, void *arg)
{
	(void)arg;
	((struct obj *)p)->tag = FREE;
	__atomic_fetch_add(&ctors, 1, __ATOMIC_RELAXED);
	return 0;
}

static void dtor(void *p, void *arg)
{
	(void)arg;
	if (((struct obj *)p)->tag != FREE)
		fail("destructed while held", -1);
	__atomic_fetch_add(&dtors, 1, __ATOMIC_RELAXED);
}

static void *reader(void *arg)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)((intptr_t)arg + 1), n = 0;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int k = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
		pcpu_rwlock_t *l = locks[k];
		pcpu_objcache_t *c = caches[k];
		struct obj *o[2];

		pcpu_rwlock_rdlock(l);
		__atomic_fetch_add(&readers_in[k], 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&writer_in[k], __ATOMIC_SEQ_CST))
			fail("a reader entered while the writer is inside", k);
		if ((check_xorshift(&rng) & 15) == 0)
			sched_yield();
		if (__atomic_load_n(&writer_in[k], __ATOMIC_SEQ_CST))
			fail("the writer entered while a reader is inside", k);
		__atomic_fetch_sub(&readers_in[k], 1, __ATOMIC_SEQ_CST);
		pcpu_rwlock_rdunlock(l);
		for (int i = 0; i < 2; i++) {
			o[i] = pcpu_objcache_get(c);
			if (!o[i])
				fail("get failed", k);
			if (__atomic_exchange_n(&o[i]->tag, HELD, __ATOMIC_ACQ_REL) != FREE)
				fail("an object handed out twice", k);
		}
		for (int i = 0; i < 2; i++) {
			if (__atomic_exchange_n(&o[i]->tag, FREE, __ATOMIC_ACQ_REL) != HELD)
				fail("an object put while not held", k);
			pcpu_objcache_put(c, o[i]);
		}
		__atomic_fetch_add(&gets[k], 2, __ATOMIC_RELAXED);
		n++;
	}
	__atomic_fetch_add(&reads, n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&aborts, pcpu__test_inject_aborts, __ATOMIC_RELAXED);
	return NULL;
}

static void on_alarm(int sig)
{
	static const char msg[] = "test_ref_membarrier_stress: FAILED: no round done in 60 s: "
				  "a lost wake-up (or a deadlock)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	const char *scale = getenv("PCPU_TEST_SCALE");
	int expect_percpu = -1, rounds = 2000, nthreads;
	uint64_t drained = 0;
	pthread_t th[MAX_THREADS];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1] [--rounds N]\n", argv[0]);
			return 2;
		}
	}
	if (scale && atof(scale) > 0)
		rounds = (int)(rounds * atof(scale));
	if (rounds < 1)
		rounds = 1;
	if (rounds > MAX_ROUNDS - 1)
		rounds = MAX_ROUNDS - 1;
	nthreads = (int)(2 * ncpu);
	if (nthreads < 4)
		nthreads = 4;
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;

	/* Every round's objects, before membarrier is refused (one more lock
	 * and cache for the readers to move on to after the last round). */
	for (int k = 0; k <= rounds; k++) {
		struct pcpu_objcache_desc d;

		memset(&d, 0, sizeof(d));
		d.size = sizeof(struct obj);
		d.capacity = 8;
		d.ctor = ctor;
		d.dtor = dtor;
		locks[k] = pcpu_rwlock_create();
		caches[k] = pcpu_objcache_create(&d);
		CHECK(locks[k] && caches[k]);
		if (expect_percpu >= 0)
			CHECK(pcpu_rwlock_is_percpu(locks[k]) == expect_percpu &&
			      pcpu_objcache_is_percpu(caches[k]) == expect_percpu);
	}
	signal(SIGALRM, on_alarm);
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_create(&th[i], NULL, reader, (void *)(intptr_t)i) == 0);

	/* This thread only: readers keep membarrier, which changes nothing
	 * for them (they never call it). */
	seccomp_deny_membarrier(EPERM);
	if (expect_percpu == 1)
		CHECK(pcpu_sync_percpu_error() == EPERM);

	for (int k = 0; k < rounds; k++) {
		struct pcpu_objcache_stats st;
		size_t n;

		/* A watchdog, not a time limit: a writer that misses a reader's
		 * unlock (no barrier) sleeps for ever. */
		alarm(60);
		/* Let the readers reach this round's lock and cache. */
		sleep_us(50 + (k % 5) * 30);
		CHECK(pcpu_rwlock_wrlock(locks[k]) == 0);
		__atomic_store_n(&writer_in[k], 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&readers_in[k], __ATOMIC_SEQ_CST))
			fail("the writer entered while a reader is inside", k);
		sched_yield();
		if (__atomic_load_n(&readers_in[k], __ATOMIC_SEQ_CST))
			fail("a reader entered while the writer is inside", k);
		__atomic_store_n(&writer_in[k], 0, __ATOMIC_SEQ_CST);
		CHECK(pcpu_rwlock_wrunlock(locks[k]) == 0);
		CHECK(!pcpu_rwlock_is_percpu(locks[k])); /* atomic for good */

		errno = 0;
		n = pcpu_objcache_drain(caches[k]);
		CHECK(errno == 0);
		drained += n;
		CHECK(!pcpu_objcache_is_percpu(caches[k])); /* locked for good */
		CHECK(pcpu_objcache_stats(caches[k], &st) == 0);
		__atomic_store_n(&cur, k + 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
	alarm(0);

	/* Exact counts; every object accounted for and freed by destroy. */
	for (int k = 0; k <= rounds; k++) {
		struct pcpu_objcache_stats st;

		CHECK(pcpu_objcache_stats(caches[k], &st) == 0);
		CHECK_EQ_U64(st.gets, gets[k]);
		CHECK_EQ_U64(st.puts, gets[k]);
		CHECK_EQ_U64(st.cached, (uint64_t)st.objects);
		CHECK(pcpu_objcache_destroy(caches[k]) == 0);
		CHECK(pcpu_rwlock_destroy(locks[k]) == 0);
	}
	CHECK_EQ_U64(ctors, dtors);
	printf("test_ref_membarrier_stress: %s, %d rounds (lock and cache switched by the %s), "
	       "%d threads, %llu reads, %llu objects drained, %llu sections aborted\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), rounds,
	       expect_percpu == 1 ? "CPU walk" : "atomic mode: no barrier needed", nthreads,
	       (unsigned long long)reads, (unsigned long long)drained,
	       (unsigned long long)aborts);
	CHECK(reads > (uint64_t)rounds);
	return 0;
}
