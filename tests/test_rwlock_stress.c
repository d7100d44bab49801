/*
 * pcpu_rwlock under stress: a writer's critical section never overlaps a
 * reader's, and no wake-up is lost, with more threads than CPUs, signals
 * and CPU migration.
 *
 * Shared data: 8 plain words (ThreadSanitizer checks the lock orders them)
 * that writers set to a new value one by one, yielding half-way sometimes,
 * and readers check are all equal; plus two atomic canaries, `writer_in`
 * and `readers_in`, that each side raises while inside and the other side
 * checks is zero, at entry and at exit of its section. 4x more reader
 * threads than CPUs, 2 writers that pause between writes (the lock is for
 * data written rarely); readers take the lock with tryrdlock and, when a
 * writer is around, rdlock (they then sleep), so both paths run; a SIGUSR1
 * handler reads under tryrdlock; a migrator moves threads between CPUs.
 * Built with PCPU_TEST_INJECT: read-lock sections are widened between the
 * writer-flag compare and the commit.
 *
 * Lost wake-ups: a watchdog fails the test if readers or writers make no
 * progress for 10 s (a sleeper nobody woke), well inside ctest's timeout.
 * What this catches (each seen to fail, see the report of issue 15): a
 * writer without the membarrier, a flag check outside the section, a
 * writer unlock or reader unlock that does not wake.
 */
#define PCPU_TEST_INJECT 1
#include "check.h"
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

#define MAX_READERS 256
#define WORDS 8

unsigned pcpu__test_inject_spin;
__thread unsigned long pcpu__test_inject_aborts;
static __thread unsigned inject_calls;

void pcpu__test_inject_before(void)
{
	if ((++inject_calls & 0xfff) == 0)
		sched_yield();
}

static pcpu_rwlock_t *lock;
static uint64_t data[WORDS]; /* plain: protected by the lock */
static int writer_in;        /* atomic canaries; relaxed, so that only the
			      * lock orders `data` for ThreadSanitizer */
static int readers_in;
static int stop;
static uint64_t reads, writes, blocked_reads, signal_reads, trywrite_ok; /* atomic */
static int live_tids[MAX_READERS];
/* The migrator and the signaller (stress_harness.h); ntids set in main(). */
static struct stress_harness harness = { .tids = live_tids, .stop = &stop, .signal_us = 100 };
static int nreaders;


static void fail(const char *what)
{
	fprintf(stderr, "test_rwlock_stress: FAILED: %s\n", what);
	_exit(1);
}

static void read_section(int yield)
{
	uint64_t v;

	__atomic_fetch_add(&readers_in, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&writer_in, __ATOMIC_RELAXED))
		fail("a reader entered while a writer is inside");
	v = ((volatile uint64_t *)data)[0];
	if (yield)
		sched_yield();
	for (int i = 1; i < WORDS; i++)
		if (((volatile uint64_t *)data)[i] != v)
			fail("a reader saw a half-written value");
	if (__atomic_load_n(&writer_in, __ATOMIC_RELAXED))
		fail("a writer entered while a reader is inside");
	__atomic_fetch_sub(&readers_in, 1, __ATOMIC_RELAXED);
}

static void handler(int sig)
{
	int saved = errno;

	(void)sig;
	if (pcpu_rwlock_tryrdlock(lock)) { /* never rdlock in a handler */
		read_section(0);
		pcpu_rwlock_rdunlock(lock);
		__atomic_fetch_add(&signal_reads, 1, __ATOMIC_RELAXED);
	}
	errno = saved;
}

static void *reader(void *arg)
{
	int slot = (int)(intptr_t)arg;
	long iters;
	uint64_t n = 0, nb = 0;
	sigset_t all, usr1, old;

	stress_rng = (uint64_t)(uintptr_t)&n ^ ((uint64_t)slot << 40) ^ (uint64_t)time(NULL) ^ 0x9e3779b97f4a7c15ull;
	stress_enter(&harness, (unsigned)slot);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	iters = 2000 + (long)(stress_rand() % 30000);
	while (iters-- > 0 && !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t r = stress_rand();

		if (!pcpu_rwlock_tryrdlock(lock)) {
			nb++; /* a writer is around: sleep until it leaves */
			if (slot & 1) {
				/* Half the readers sleep with SIGUSR1 blocked: a
				 * signal would end the futex wait and hide a lost
				 * wake-up. */
				pthread_sigmask(SIG_BLOCK, &usr1, &old);
				pcpu_rwlock_rdlock(lock);
				pthread_sigmask(SIG_SETMASK, &old, NULL);
			} else {
				pcpu_rwlock_rdlock(lock);
			}
		}
		read_section((r & 127) == 0);
		pcpu_rwlock_rdunlock(lock);
		if ((++n & 255) == 0) {
			__atomic_fetch_add(&reads, 256, __ATOMIC_RELAXED);
		}
	}
	__atomic_fetch_add(&reads, n & 255, __ATOMIC_RELAXED);
	__atomic_fetch_add(&blocked_reads, nb, __ATOMIC_RELAXED);
	stress_leave(&harness, (unsigned)slot);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	return NULL;
}

static void write_section(uint64_t v)
{
	__atomic_store_n(&writer_in, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&readers_in, __ATOMIC_RELAXED))
		fail("a writer entered while a reader is inside");
	for (int i = 0; i < WORDS; i++) {
		((volatile uint64_t *)data)[i] = v;
		if (i == WORDS / 2 && (v & 3) == 0)
			sched_yield();
	}
	if (__atomic_load_n(&readers_in, __ATOMIC_RELAXED))
		fail("a reader entered while a writer is inside");
	__atomic_store_n(&writer_in, 0, __ATOMIC_RELAXED);
}

static void *writer(void *arg)
{
	static const unsigned spins[] = {0, 64, 256, 1024};

	stress_rng = 99991 + (uint64_t)(intptr_t)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t r = stress_rand();
		struct timespec ts = {0, (long)(r % 300000)};

		if ((r >> 20) % 8 == 0) {
			if (pcpu_rwlock_trywrlock(lock)) {
				write_section(r | 1);
				pcpu_rwlock_wrunlock(lock);
				__atomic_fetch_add(&trywrite_ok, 1, __ATOMIC_RELAXED);
			}
		} else {
			CHECK(pcpu_rwlock_wrlock(lock) == 0);
			write_section(r);
			pcpu_rwlock_wrunlock(lock);
		}
		__atomic_fetch_add(&writes, 1, __ATOMIC_RELAXED);
		if ((r & 15) == 0)
			__atomic_store_n(&pcpu__test_inject_spin, spins[(r >> 8) % 4], __ATOMIC_RELAXED);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Bounds that only catch hangs (a loaded machine stalls a thread for
 * seconds, never for minutes); the ctest timeout is 600 s. */
#define STALL_S 120
#define SAFETY_S 300

static void on_alarm(int sig)
{
	static const char msg[] = "test_rwlock_stress: FAILED: threads still blocked 120 s after "
				  "the end: a lost wake-up (or a deadlock)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double seconds = 4, t0, last_progress;
	const char *scale = getenv("PCPU_TEST_SCALE");
	int expect_percpu = -1;
	pthread_t readers[MAX_READERS], wr[2];
	struct sigaction sa;
	long started = 0;
	uint64_t last_reads = 0, last_writes = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1] [--seconds S]\n", argv[0]);
			return 2;
		}
	}
	if (scale && atof(scale) > 0)
		seconds *= atof(scale);
	nreaders = (int)(4 * ncpu);
	if (nreaders > MAX_READERS)
		nreaders = MAX_READERS;
	if (nreaders < 4)
		nreaders = 4;
	lock = pcpu_rwlock_create();
	CHECK(lock != NULL);
	if (expect_percpu >= 0)
		CHECK(pcpu_rwlock_is_percpu(lock) == expect_percpu);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

	for (int i = 0; i < nreaders; i++) {
		CHECK(pthread_create(&readers[i], NULL, reader, (void *)(intptr_t)i) == 0);
		started++;
	}
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&wr[i], NULL, writer, (void *)(intptr_t)i) == 0);
	harness.ntids = (unsigned)nreaders;
	stress_start(&harness);

	/* Replace readers as they exit; watch that both sides progress. Runs
	 * `seconds` and then until each event the checks below need has been
	 * seen (a loaded machine only makes it longer); the stall bound and
	 * the safety bound are far beyond any scheduling delay and only catch
	 * a lost wake-up. */
	t0 = last_progress = now_s();
	while (now_s() - t0 < seconds ||
	       __atomic_load_n(&writes, __ATOMIC_RELAXED) < 100 ||
	       __atomic_load_n(&blocked_reads, __ATOMIC_RELAXED) == 0 ||
	       __atomic_load_n(&signal_reads, __ATOMIC_RELAXED) == 0) {
		if (now_s() - t0 > SAFETY_S)
			fail("the events needed were not seen in 300 s");
		uint64_t r = __atomic_load_n(&reads, __ATOMIC_RELAXED);
		uint64_t w = __atomic_load_n(&writes, __ATOMIC_RELAXED);

		for (int i = 0; i < nreaders; i++) {
			if (pthread_tryjoin_np(readers[i], NULL) == 0) {
				CHECK(pthread_create(&readers[i], NULL, reader, (void *)(intptr_t)i) == 0);
				started++;
			}
		}
		if (r != last_reads && w != last_writes) {
			last_reads = r;
			last_writes = w;
			last_progress = now_s();
		} else if (now_s() - last_progress > STALL_S) {
			fail("no progress for 120 s: a lost wake-up (or a deadlock)");
		}
		usleep(2000);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	/* Joining is bounded too: a sleeper nobody wakes never returns. */
	signal(SIGALRM, on_alarm);
	alarm(STALL_S);
	for (int i = 0; i < nreaders; i++)
		CHECK(pthread_join(readers[i], NULL) == 0);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_join(wr[i], NULL) == 0);
	stress_join(&harness);
	alarm(0);

	printf("test_rwlock_stress: lock %s; %d readers (%ld started), %llu reads "
	       "(%llu met a writer and slept, %llu in signal handlers), %llu writes "
	       "(%llu by trywrlock); %.1f s\n",
	       pcpu_rwlock_is_percpu(lock) ? "per-CPU" : "atomic", nreaders, started,
	       (unsigned long long)reads, (unsigned long long)blocked_reads,
	       (unsigned long long)signal_reads, (unsigned long long)writes,
	       (unsigned long long)trywrite_ok, now_s() - t0);
	CHECK(reads > 0 && writes > 0);
	CHECK(blocked_reads > 0); /* readers met writers and waited */
	CHECK(signal_reads > 0);
	CHECK(pcpu_rwlock_destroy(lock) == 0); /* nothing left held */
	return 0;
}
