/*
 * fork() in the sanitizer builds: keep other threads out of malloc.
 *
 * GCC 12's AddressSanitizer and ThreadSanitizer runtimes replace malloc and
 * take none of their allocator's locks around fork() (glibc's malloc does).
 * A child forked while another thread held such a lock -- a size-class
 * region lock, taken when a thread's cache refills -- blocks for ever in
 * its own next malloc. Seen in gdb in CI and here under load: the child
 * waiting in SizeClassAllocator64::GetFromAllocator(), once in about 20
 * TSan runs of stats_default_fork and once in 6 ASan runs of
 * fork_every_layer. It is the runtime's bug, not pcpu's; pcpu cannot take
 * the runtime's locks.
 *
 * So in those builds a test's threads pass through this gate around the
 * parts of their loop that allocate, and the forking thread closes it
 * across fork(): it waits for the threads inside to leave. In the plain
 * build both are no-ops and the threads race fork() freely: that build
 * runs each fork scenario whole, with pcpu's locks held by other threads
 * at the fork; the sanitizer builds check memory and ordering on the same
 * code.
 *
 * A thread's start and exit allocate and free too (the runtime's own
 * thread set-up: seen in gdb, a child's thread stuck in free() called by
 * pthread_getattr_np() from AsanThread::Init). So in those builds a gated
 * test's threads also start before the first fork and end after the last:
 * fork_gate_started() first thing in a thread and fork_gate_await(n) before
 * the first fork; fork_gate_linger() last thing in a thread and
 * fork_gate_open_all() after the last fork.
 */
#ifndef PCPU_TEST_FORK_GATE_H
#define PCPU_TEST_FORK_GATE_H

#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#include <sched.h>
#define FORK_GATE 1
/* A writers-first gate from two sequentially consistent counters: a
 * thread enters only while no fork is waiting, and the fork waits for the
 * threads inside to leave. */
static int fork_gate_closing, fork_gate_inside;

static inline void fork_gate_enter(void)
{
	for (;;) {
		while (__atomic_load_n(&fork_gate_closing, __ATOMIC_SEQ_CST))
			sched_yield();
		__atomic_add_fetch(&fork_gate_inside, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&fork_gate_closing, __ATOMIC_SEQ_CST))
			return;
		__atomic_sub_fetch(&fork_gate_inside, 1, __ATOMIC_SEQ_CST);
	}
}

static inline void fork_gate_leave(void)
{
	__atomic_sub_fetch(&fork_gate_inside, 1, __ATOMIC_SEQ_CST);
}

/* fork() while no gated thread is inside its gate. */
static inline pid_t fork_gated(void)
{
	pid_t pid;

	__atomic_store_n(&fork_gate_closing, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&fork_gate_inside, __ATOMIC_SEQ_CST))
		sched_yield();
	pid = fork();
	__atomic_store_n(&fork_gate_closing, 0, __ATOMIC_SEQ_CST);
	return pid;
}

static int fork_gate_forks_over, fork_gate_threads;

/* First thing in a gated thread: its start-up is over. */
static inline void fork_gate_started(void)
{
	__atomic_add_fetch(&fork_gate_threads, 1, __ATOMIC_SEQ_CST);
}

/* Before the first fork_gated(): waits until n threads have started. */
static inline void fork_gate_await(int n)
{
	while (__atomic_load_n(&fork_gate_threads, __ATOMIC_SEQ_CST) < n)
		usleep(100);
}

/* At a thread's end: waits until fork_gate_open_all(). */
static inline void fork_gate_linger(void)
{
	while (!__atomic_load_n(&fork_gate_forks_over, __ATOMIC_SEQ_CST))
		usleep(1000);
}

/* After the last fork_gated(): lets lingering threads end. */
static inline void fork_gate_open_all(void)
{
	__atomic_store_n(&fork_gate_forks_over, 1, __ATOMIC_SEQ_CST);
}

/* After the threads of one round joined: the next round starts afresh. */
static inline void fork_gate_reset(void)
{
	__atomic_store_n(&fork_gate_threads, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&fork_gate_forks_over, 0, __ATOMIC_SEQ_CST);
}
#else
#define FORK_GATE 0
static inline void fork_gate_enter(void) {}
static inline void fork_gate_leave(void) {}
static inline pid_t fork_gated(void)
{
	return fork();
}
static inline void fork_gate_started(void) {}
static inline void fork_gate_await(int n) { (void)n; }
static inline void fork_gate_linger(void) {}
static inline void fork_gate_open_all(void) {}
static inline void fork_gate_reset(void) {}
#endif

#endif
