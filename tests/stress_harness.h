/*
 * The disturbance pcpu's stress tests put their threads through, in one
 * place (test_stress, test_ref_stress, test_rwlock_stress, stats/test_group):
 * a migrator that moves the test's live threads between CPUs, a signaller
 * that sends them SIGUSR1, the table of live thread ids both pick from, and
 * the random numbers they (and the tests) draw.
 *
 * A test fills a struct stress_harness, has each of its worker threads
 * publish itself with stress_enter() and withdraw with stress_leave()
 * (threads come and go, so the table has holes: a 0 is skipped), installs
 * its own SIGUSR1 handler (what a handler does is the test's business),
 * calls stress_start(), sets *stop when done, and stress_join(). The
 * migrator wakes every 200 us and pins a random live thread to a random
 * CPU, or lets it run on every CPU again one time in four; the signaller
 * signals a random live thread every `signal_us`. Moving a thread between
 * a section's index read and its commit, and signalling it there, is what
 * makes the kernel abort sections; a section that commits on a stale slot
 * or a handler's update that is lost shows as a wrong total.
 */
#ifndef PCPU_TEST_STRESS_HARNESS_H
#define PCPU_TEST_STRESS_HARNESS_H

#include "check.h"
#include <pcpu/rseq.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Whether the calling thread updates in the rseq mode `expect`
 * (pcpu_rseq_mode_name(); NULL: any): the stress tests' --expect-mode. The
 * first mismatch in the process sets *mismatch and is reported on stderr,
 * with the reason rseq is not in use; the test fails on *mismatch at its
 * end. Call it from each worker thread, after its first update. */
static inline void stress_check_mode(const char *expect, int *mismatch)
{
	const char *m = pcpu_rseq_mode_name(pcpu_rseq_mode());

	if (expect && strcmp(m, expect) != 0 && !__atomic_exchange_n(mismatch, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "thread in mode %s (error %d: %s), expected %s\n", m,
			pcpu_rseq_error(), strerror(pcpu_rseq_error()), expect);
}

/* Each thread's state of check.h's xorshift64; a thread seeds it (nonzero)
 * before its first stress_rand(). */
static __thread uint64_t stress_rng;

static inline uint64_t stress_rand(void)
{
	return check_xorshift(&stress_rng);
}

/* Pins thread `tid` (a Linux thread id) to CPU r2 % ncpu, or, when r1 % 4
 * is 0, lets it run on every CPU again. r1 and r2 are random numbers of the
 * caller's generator. A thread that just exited (ESRCH) is ignored. */
static inline void stress_move_thread(int tid, long ncpu, unsigned r1, unsigned r2)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (r1 % 4 == 0) {
		for (long c = 0; c < ncpu; c++)
			CPU_SET(c, &set);
	} else {
		CPU_SET(r2 % (unsigned)ncpu, &set);
	}
	(void)sched_setaffinity(tid, sizeof(set), &set);
}

struct stress_harness {
	int *tids;             /* tids[i]: a live thread's id, 0 for none (atomic) */
	unsigned ntids;        /* entries of tids the helpers pick from (>= 1) */
	const int *stop;       /* nonzero (atomic): the helpers return */
	unsigned signal_us;    /* the signaller's pause between two signals */
	void (*at_exit)(void); /* each helper runs it before returning; NULL: none */
	pthread_t migrator, signaller;
};

/* The calling thread takes entry `slot` of the table (it may now be moved
 * and signalled), or gives it up. */
static inline void stress_enter(struct stress_harness *h, unsigned slot)
{
	__atomic_store_n(&h->tids[slot], (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
}

static inline void stress_leave(struct stress_harness *h, unsigned slot)
{
	__atomic_store_n(&h->tids[slot], 0, __ATOMIC_RELEASE);
}

/* A random entry of the table: a live thread's id, or 0. */
static inline int stress_pick(const struct stress_harness *h)
{
	return __atomic_load_n(&h->tids[stress_rand() % h->ntids], __ATOMIC_ACQUIRE);
}

static inline void *stress_migrator_main(void *arg)
{
	struct stress_harness *h = (struct stress_harness *)arg;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	stress_rng = 12345;
	while (!__atomic_load_n(h->stop, __ATOMIC_RELAXED)) {
		int tid = stress_pick(h);

		if (tid)
			stress_move_thread(tid, ncpu, (unsigned)stress_rand(), (unsigned)stress_rand());
		usleep(200);
	}
	if (h->at_exit)
		h->at_exit();
	return NULL;
}

static inline void *stress_signaller_main(void *arg)
{
	struct stress_harness *h = (struct stress_harness *)arg;

	stress_rng = 777;
	while (!__atomic_load_n(h->stop, __ATOMIC_RELAXED)) {
		int tid = stress_pick(h);

		if (tid)
			syscall(SYS_tgkill, getpid(), tid, SIGUSR1);
		usleep(h->signal_us);
	}
	if (h->at_exit)
		h->at_exit();
	return NULL;
}

/* Starts the migrator and the signaller; the SIGUSR1 handler must be
 * installed first. */
static inline void stress_start(struct stress_harness *h)
{
	CHECK(h->ntids >= 1);
	CHECK(pthread_create(&h->migrator, NULL, stress_migrator_main, h) == 0);
	CHECK(pthread_create(&h->signaller, NULL, stress_signaller_main, h) == 0);
}

/* Waits for both, once *stop is set. */
static inline void stress_join(struct stress_harness *h)
{
	CHECK(pthread_join(h->migrator, NULL) == 0);
	CHECK(pthread_join(h->signaller, NULL) == 0);
}

#endif
