/*
 * pcpu_ref under stress: release exactly once, never early, with kills
 * racing gets, signals and CPU migration.
 *
 * A killer thread publishes object after object: it creates a ref for the
 * next object of a pool, makes it current, and kills the previous one, at
 * random short intervals. 4x more reader threads than CPUs loop: tryget the
 * current object (it may be being killed right then), check its canary,
 * do a few get/put pairs on it, checking the canary while they hold a
 * reference, sometimes yield while holding it, put. Each object's release()
 * poisons the canary, checks that no reader has declared it holds the
 * object (`holders`, raised after a successful tryget and lowered before
 * the put), and counts itself: a second release of one object fails the
 * test at once. At the end every object must have been released exactly
 * once and read zero references. Readers exit after a random number of
 * iterations and are replaced (threads register and unregister rseq all
 * the time); a migrator moves them between CPUs; a signaller sends SIGUSR1
 * whose handler does a tryget/get/put/put of its own on the current object.
 *
 * Built with PCPU_TEST_INJECT: every inline rseq section is widened between
 * its mode compare and its commit (pcpu__test_inject_spin, varied during
 * the run), and the hook before each section yields now and then, so kills
 * land inside sections and sections abort millions of times.
 *
 * What this catches (each seen to fail, see the report of issue 15): a kill
 * without the membarrier, a mode check outside the critical section, a
 * fold that misses words, release at the wrong count.
 *
 * Pairs: --pairs N (default 2.5e7, times PCPU_TEST_SCALE if set) get/put
 * pairs per run, counted over trygets and gets, signal handlers included.
 * ctest runs it in 5 modes, so one plain build alone makes >= 1.25e8 pairs.
 *
 * --lose-membarrier N (issue 23): the first N objects' refs are created
 * before the killer starts, and the killer then refuses itself membarrier
 * (a seccomp filter): their kills get the barrier from the CPU walk
 * (src/core/percpu_sync.c) while readers hammer them, and the refs it creates after
 * them must be atomic. Breaking the walk (no walk at all) fails this.
 */
#define PCPU_TEST_INJECT 1
#include "check.h"
#include "seccomp_deny.h"
#include "stress_harness.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ALIVE 0x600dcafe600dcafeull
#define DEAD 0xdeadbeefdeadbeefull
#define MAX_OBJS (1 << 16)
#define MAX_READERS 256
#define INNER 6

/* ---- injection hooks (pcpu/arch/x86_64.h, PCPU_TEST_INJECT) ---------------- */
unsigned pcpu__test_inject_spin;
__thread unsigned long pcpu__test_inject_aborts;
static __thread unsigned inject_calls;

void pcpu__test_inject_before(void)
{
	if ((++inject_calls & 0x1fff) == 0)
		sched_yield(); /* preempted right before a section */
}

struct obj {
	pcpu_ref_t *ref;
	volatile uint64_t canary; /* plain: ThreadSanitizer checks the order */
	int releases;             /* atomic */
	int holders;              /* atomic: readers that declared a hold;
				   * relaxed, so that only the ref orders the
				   * canary for ThreadSanitizer */
	int created;
};

static struct obj pool[MAX_OBJS];
static int cur;      /* index of the current object (atomic) */
static int nobjs;    /* objects created (atomic) */
static int stop;     /* atomic */
static int failed;   /* atomic: first failure message printed */
static uint64_t pairs_done;  /* atomic */
static uint64_t pairs_target;
static uint64_t tryget_fails; /* atomic */
static uint64_t signal_pairs; /* atomic */
static uint64_t total_aborts; /* atomic */
static int live_tids[MAX_READERS];
/* The migrator and the signaller (stress_harness.h); ntids set in main(). */
static struct stress_harness harness = { .tids = live_tids, .stop = &stop, .signal_us = 50 };
static int nreaders;
static int expect_percpu = -1;
static int percpu_seen;
static int lose_membarrier;  /* objects created before membarrier is refused */
static int membarrier_lost;  /* atomic: the killer refused it */
static uint64_t walk_kills;  /* kills of per-CPU refs after that */


static void fail(const char *what, int obj)
{
	if (!__atomic_exchange_n(&failed, 1, __ATOMIC_SEQ_CST))
		fprintf(stderr, "test_ref_stress: FAILED: %s (object %d)\n", what, obj);
	_exit(1);
}

static void on_release(void *arg)
{
	struct obj *o = arg;
	int i = (int)(o - pool);

	if (__atomic_load_n(&o->holders, __ATOMIC_RELAXED) != 0)
		fail("released while a reader holds a reference", i);
	if (o->canary != ALIVE)
		fail("released twice (canary already poisoned)", i);
	o->canary = DEAD;
	if (__atomic_fetch_add(&o->releases, 1, __ATOMIC_SEQ_CST) != 0)
		fail("released twice", i);
}

static void check_alive(struct obj *o)
{
	if (o->canary != ALIVE)
		fail("canary poisoned while a reference is held: released early", (int)(o - pool));
}

/* One round on the current object: tryget, inner get/put pairs, put.
 * Returns the pairs done (0 if the tryget failed). */
static unsigned use_current(int hold_long)
{
	int i = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	struct obj *o = &pool[i];
	unsigned n;

	if (!pcpu_ref_tryget(o->ref)) {
		__atomic_fetch_add(&tryget_fails, 1, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_fetch_add(&o->holders, 1, __ATOMIC_RELAXED);
	check_alive(o);
	for (n = 0; n < INNER; n++) {
		pcpu_ref_get(o->ref);
		check_alive(o);
		pcpu_ref_put(o->ref);
	}
	if (hold_long)
		sched_yield(); /* hold it across a reschedule, maybe a kill */
	check_alive(o);
	__atomic_fetch_sub(&o->holders, 1, __ATOMIC_RELAXED);
	pcpu_ref_put(o->ref);
	return INNER + 1;
}

static void handler(int sig)
{
	int saved = errno;
	unsigned n;

	(void)sig;
	n = use_current(0);
	__atomic_fetch_add(&signal_pairs, n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&pairs_done, n, __ATOMIC_RELAXED);
	errno = saved;
}

static void *reader(void *arg)
{
	int slot = (int)(intptr_t)arg;
	long iters;
	uint64_t local = 0;
	sigset_t all;

	stress_rng = (uint64_t)(uintptr_t)&local ^ ((uint64_t)slot << 40) ^ (uint64_t)time(NULL) ^
	      0x9e3779b97f4a7c15ull;
	stress_enter(&harness, (unsigned)slot);
	iters = 2000 + (long)(stress_rand() % 50000);
	while (iters-- > 0 && !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		local += use_current((stress_rand() & 255) == 0);
		if ((iters & 63) == 0) {
			__atomic_fetch_add(&pairs_done, local, __ATOMIC_RELAXED);
			local = 0;
		}
	}
	__atomic_fetch_add(&pairs_done, local, __ATOMIC_RELAXED);
	stress_leave(&harness, (unsigned)slot);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* no handler after the tally */
	__atomic_fetch_add(&total_aborts, pcpu__test_inject_aborts, __ATOMIC_RELAXED);
	return NULL;
}

static void create_obj(int i)
{
	struct obj *o = &pool[i];

	o->canary = ALIVE;
	o->ref = pcpu_ref_create(on_release, o);
	CHECK(o->ref != NULL);
	if (pcpu_ref_is_percpu(o->ref))
		__atomic_store_n(&percpu_seen, 1, __ATOMIC_RELAXED);
	if (expect_percpu >= 0 && pcpu_ref_is_percpu(o->ref) !=
					  (__atomic_load_n(&membarrier_lost, __ATOMIC_RELAXED) ? 0 : expect_percpu))
		fail("ref not in the expected mode", i);
	o->created = 1;
}

/* The killer, from now on: membarrier refused (EPERM). */
static void refuse_membarrier(void)
{
	seccomp_deny_membarrier(EPERM);
	if (expect_percpu == 1 && pcpu_sync_percpu_error() != EPERM)
		fail("membarrier refused, but pcpu_sync_percpu_error() does not say so", 0);
	__atomic_store_n(&membarrier_lost, 1, __ATOMIC_RELAXED);
}

static void *killer(void *arg)
{
	static const unsigned spins[] = {0, 0, 8, 64, 300};
	int i = 0;

	(void)arg;
	stress_rng = 4242;
	if (lose_membarrier)
		refuse_membarrier();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct timespec ts = {0, (long)(stress_rand() % 100000)};

		if (i + 1 < MAX_OBJS) {
			if (!pool[i + 1].created)
				create_obj(i + 1);
			__atomic_store_n(&nobjs, i + 2, __ATOMIC_RELEASE);
			__atomic_store_n(&cur, i + 1, __ATOMIC_RELEASE);
			/* Readers are on object i right now: kill it. */
			if (membarrier_lost && pcpu_ref_is_percpu(pool[i].ref))
				walk_kills++;
			CHECK(pcpu_ref_kill(pool[i].ref) == 0);
			i++;
		}
		if ((i & 15) == 0)
			__atomic_store_n(&pcpu__test_inject_spin,
					 spins[stress_rand() % (sizeof(spins) / sizeof(spins[0]))],
					 __ATOMIC_RELAXED);
		if (stress_rand() & 1)
			nanosleep(&ts, NULL);
		else
			sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double pairs = 2.5e7;
	const char *scale = getenv("PCPU_TEST_SCALE");
	pthread_t readers[MAX_READERS], kil;
	struct sigaction sa;
	long started = 0;
	struct timespec t0, t1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
			pairs = atof(argv[++i]);
		else if (!strcmp(argv[i], "--lose-membarrier") && i + 1 < argc)
			lose_membarrier = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1] [--pairs N] [--lose-membarrier N]\n",
				argv[0]);
			return 2;
		}
	}
	if (scale && atof(scale) > 0)
		pairs *= atof(scale);
	pairs_target = (uint64_t)pairs;
	nreaders = (int)(4 * ncpu);
	if (nreaders > MAX_READERS)
		nreaders = MAX_READERS;
	if (nreaders < 4)
		nreaders = 4;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	create_obj(0);
	for (int i = 1; i < lose_membarrier && i < MAX_OBJS; i++)
		create_obj(i);
	nobjs = 1;
	for (int i = 0; i < nreaders; i++) {
		CHECK(pthread_create(&readers[i], NULL, reader, (void *)(intptr_t)i) == 0);
		started++;
	}
	CHECK(pthread_create(&kil, NULL, killer, NULL) == 0);
	harness.ntids = (unsigned)nreaders;
	stress_start(&harness);

	/* Replace readers as they exit, until enough pairs are done. */
	while (__atomic_load_n(&pairs_done, __ATOMIC_RELAXED) < pairs_target) {
		for (int i = 0; i < nreaders; i++) {
			if (pthread_tryjoin_np(readers[i], NULL) == 0) {
				CHECK(pthread_create(&readers[i], NULL, reader, (void *)(intptr_t)i) == 0);
				started++;
			}
		}
		usleep(2000);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nreaders; i++)
		CHECK(pthread_join(readers[i], NULL) == 0);
	CHECK(pthread_join(kil, NULL) == 0);
	stress_join(&harness);

	/* The last object is still live: its only reference is the owner's. */
	{
		int last = nobjs - 1;

		CHECK(pool[last].releases == 0);
		CHECK_EQ_U64(pcpu_ref_read(pool[last].ref), 1);
		CHECK(pcpu_ref_kill(pool[last].ref) == 0);
	}
	for (int i = 0; i < nobjs; i++) {
		if (pool[i].releases != 1) {
			fprintf(stderr, "object %d of %d: released %d times, %lld references left\n", i,
				nobjs, pool[i].releases, (long long)pcpu_ref_read(pool[i].ref));
			return 1;
		}
		CHECK(pool[i].canary == DEAD);
		CHECK(pcpu_ref_read(pool[i].ref) == 0);
		pcpu_ref_destroy(pool[i].ref);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("test_ref_stress: mode %s, refs %s; %d readers (%ld started), %d objects killed, "
	       "%llu get/put pairs (%llu in signal handlers), %llu trygets refused, "
	       "%llu sections aborted; %.1f s\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), percpu_seen ? "per-CPU" : "atomic", nreaders,
	       started, nobjs, (unsigned long long)pairs_done, (unsigned long long)signal_pairs,
	       (unsigned long long)tryget_fails, (unsigned long long)total_aborts,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	/* Refs made ahead (--lose-membarrier) that the killer never reached:
	 * the owner's reference only, never published. */
	for (int i = nobjs; i < lose_membarrier && i < MAX_OBJS; i++) {
		CHECK(pool[i].created && pool[i].releases == 0);
		CHECK(pcpu_ref_read(pool[i].ref) == 1);
		pcpu_ref_destroy(pool[i].ref);
	}
	if (lose_membarrier) {
		printf("test_ref_stress: %d refs created before membarrier was refused, %llu of "
		       "them killed by the CPU walk\n",
		       lose_membarrier, (unsigned long long)walk_kills);
		if (expect_percpu == 1)
			CHECK(walk_kills > 0);
	}
	CHECK(started > nreaders);  /* threads came and went */
	CHECK(signal_pairs > 0);    /* handlers ran */
	CHECK(tryget_fails > 0);    /* kills raced trygets */
	CHECK(nobjs > 10);
	return 0;
}
