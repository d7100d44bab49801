/* SPDX-License-Identifier: MIT */
/*
 * percpu_sync.c: what pcpu_ref, pcpu_rwlock and pcpu_objcache (src/core/ref.c,
 * src/core/rwlock.c, src/core/objcache.c) share --
 * the membarrier that switches them out of per-CPU mode, and futexes.
 *
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) (Linux >= 5.10) sends an
 * IPI to every CPU that runs a thread of the calling process; the handler
 * issues a full memory barrier and marks the interrupted thread so that, if
 * it was inside an rseq critical section, the section is restarted at its
 * abort handler before it runs on. So when the call returns:
 *   - a section that committed before the IPI reached its CPU is visible;
 *   - one that was between its start and its commit never commits (it
 *     restarts, and reads the mode word again);
 *   - one that starts later sees every store the caller made before the
 *     call (the IPI's barrier, or the scheduler's for threads switched in).
 * Threads not running at the time were preempted, which restarts their
 * sections too. The command needs a registration per process
 * (MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ), done here once, at the
 * first ref or lock the process creates: it may wait for a scheduler grace
 * period, so not at load time.
 *
 * Why not something lighter: without the restart, a thread that read the old
 * mode could commit its add after the switching thread folded the per-CPU
 * sums -- a reference counted nowhere. Polling every slot cannot tell an
 * add that is about to commit from one that never will.
 *
 * When membarrier stops working after objects exist (a seccomp filter
 * installed since: issue 23). The refusal is recorded for good
 * (membarrier_lost), so pcpu_sync_percpu_error() reports it and every
 * object created afterwards is atomic from the start. It is known from the
 * first switch that meets it, or before, from pcpu_sync_percpu_error(),
 * which asks the kernel (MEMBARRIER_CMD_QUERY). Creation does not ask: the
 * system call would double the cost of a create, and an object created
 * per-CPU meanwhile still switches correctly, as follows.
 *
 * The objects that are per-CPU already still have to switch, and the kernel
 * has a second way of restarting the sections: rseq restarts a thread's
 * section whenever the thread is preempted (or migrated, which preempts
 * it). So the switching thread runs itself on every CPU in turn
 * (sched_setaffinity() to that CPU alone): to run on CPU c, the kernel has
 * to switch out whatever thread ran there, and a section that thread was
 * inside restarts when it runs again. When the walk has been everywhere:
 *   - a section that started before it on CPU c either committed before the
 *     walk reached c (the commit, before the context switch, is ordered
 *     before the walk's next steps by c's runqueue lock) or restarts;
 *   - a section that starts on c after the walk left c runs after a context
 *     switch on c that followed the walk's visit, so it reads the new mode.
 * This is what the kernel's own grace periods rely on (a context switch on
 * every CPU), at the price of 2 system calls and a migration per CPU
 * (microseconds each on an idle machine, a scheduling delay each on a busy
 * one) and of the calling thread's affinity being changed meanwhile (it is
 * restored). CPUs that refuse the calling thread with EINVAL are offline or
 * outside the process's cpuset: no thread of the process runs there. If
 * the walk fails too (a filter that also refuses sched_setaffinity()), the
 * switch fails with membarrier's errno and the caller leaves the object as
 * it was. Without the walk, tests/test_ref_membarrier_stress.c and
 * test_ref_stress --lose-membarrier fail every run, within a few hundred
 * switches; with a walk that skips CPU 1 of 2 (harmless whenever the
 * switching thread happens to start there), test_ref_stress still fails
 * most runs.
 */
#include "rseq_internal.h" /* pcpu_slot_count */
#include "percpu_sync_internal.h"
#include "slot_walk.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_membarrier
#define __NR_membarrier 324 /* x86-64 */
#endif
/* linux/membarrier.h's values (ABI), for older headers. */
#define PCPU_MB_CMD_QUERY 0
#define PCPU_MB_CMD_PRIVATE_EXPEDITED_RSEQ (1 << 7)
#define PCPU_MB_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ (1 << 8)

static pthread_once_t mb_once = PTHREAD_ONCE_INIT;
static int mb_error; /* 0: registered; else why not. Set once. */
/* 0, or the errno with which membarrier failed after it had worked (the
 * registration succeeded): for good, as seccomp filters are. */
static int membarrier_lost;

static long sys_membarrier(int cmd)
{
	return syscall(__NR_membarrier, cmd, 0, 0);
}

static void mb_register(void)
{
	long mask = sys_membarrier(PCPU_MB_CMD_QUERY);

	if (mask < 0)
		mb_error = errno ? errno : ENOSYS;
	else if (!(mask & PCPU_MB_CMD_PRIVATE_EXPEDITED_RSEQ))
		mb_error = EOPNOTSUPP; /* CONFIG_RSEQ off, or Linux < 5.10 */
	else if (sys_membarrier(PCPU_MB_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ) != 0)
		mb_error = errno ? errno : EPERM;
	else
		mb_error = 0;
}

static void record_lost(int err)
{
	int zero = 0;

	(void)__atomic_compare_exchange_n(&membarrier_lost, &zero, err ? err : EPERM, 0,
					  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

int pcpu_sync_percpu_lost(void)
{
	return __atomic_load_n(&membarrier_lost, __ATOMIC_SEQ_CST);
}

int pcpu_sync_percpu_check(void)
{
	int err;

	if (pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK) {
		err = pcpu_rseq_error();
		return err ? err : ENOSYS;
	}
	pthread_once(&mb_once, mb_register);
	return mb_error ? mb_error : pcpu_sync_percpu_lost();
}

int pcpu_sync_percpu_error(void)
{
	int err = pcpu_sync_percpu_check(), saved;
	long mask;

	if (err)
		return err;
	/* Still allowed? A filter refuses QUERY as it refuses the barrier
	 * (by system call number); one that refuses only the barrier's
	 * command is noticed at the first switch instead. */
	saved = errno;
	mask = sys_membarrier(PCPU_MB_CMD_QUERY);
	if (mask < 0 || !(mask & PCPU_MB_CMD_PRIVATE_EXPEDITED_RSEQ))
		record_lost(mask < 0 ? errno : EOPNOTSUPP);
	errno = saved;
	return pcpu_sync_percpu_lost();
}

#if PCPU_ARCH_HAVE_RSEQ
/* The walk's CPU masks are on the stack (the barrier is async-signal-safe,
 * maybe on a small signal stack), as long as the slots are many: one bit
 * per possible CPU is what the kernel needs. */
#define WALK_MAX_CPUS 8192 /* Linux's NR_CPUS is at most 8192 */
#define BITS_PER_WORD (8 * sizeof(unsigned long))

static int pin_to(const unsigned long *mask, size_t words)
{
	return (int)syscall(SYS_sched_setaffinity, 0, words * sizeof(unsigned long), mask);
}

/* The fallback grace period (file comment): the calling thread runs on
 * every CPU in turn. 0, or -1 with errno (its affinity restored). */
static int run_on_every_cpu(void)
{
	uint32_t n = pcpu_slot_count, cpu; /* >= the possible CPUs */
	size_t words;
	int visited = 0, err = 0;

	if (n > WALK_MAX_CPUS)
		n = WALK_MAX_CPUS;
	words = (n + BITS_PER_WORD - 1) / BITS_PER_WORD;
	{
		unsigned long saved[words], one[words];

		memset(saved, 0, sizeof(saved));
		if (syscall(SYS_sched_getaffinity, 0, sizeof(saved), saved) < 0)
			return -1;
		/* The mode stores before any context switch the walk causes. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		for (cpu = 0; cpu < n && !err; cpu++) {
			unsigned int on = ~0u;
			int tries;

			memset(one, 0, sizeof(one));
			one[cpu / BITS_PER_WORD] = 1ul << (cpu % BITS_PER_WORD);
			if (pin_to(one, words) != 0) {
				if (errno != EINVAL)
					err = errno;
				continue; /* EINVAL: offline, or outside our cpuset */
			}
			/* Pinned to cpu alone, the kernel has moved this thread
			 * there before returning; make sure of it, as
			 * everything rests on it. */
			for (tries = 0; tries < 100; tries++) {
				if (syscall(SYS_getcpu, &on, NULL, NULL) == 0 && on == cpu)
					break;
				sched_yield();
			}
			if (on != cpu)
				err = EAGAIN;
			else
				visited++;
		}
		(void)pin_to(saved, words);
	}
	/* The sections that committed before the walk reached their CPU are
	 * ordered before the caller's reads of the slots. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!err && !visited)
		err = EAGAIN; /* not even on the CPU we run on: impossible */
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}
#else
/* No rseq sections, so no per-CPU object to switch: never called. (The
 * ThreadSanitizer builds, which do not model the fences above.) */
static int run_on_every_cpu(void)
{
	errno = ENOSYS;
	return -1;
}
#endif

int pcpu_sync_barrier(void)
{
	int saved = errno, err;

	if (!pcpu_sync_percpu_lost()) {
		if (sys_membarrier(PCPU_MB_CMD_PRIVATE_EXPEDITED_RSEQ) == 0)
			return 0;
		if (errno == EPERM) {
			/* Not registered: the registration is per process (mm),
			 * so a fork() child that inherited no registration
			 * registers now. EPERM again: a seccomp filter. */
			if (sys_membarrier(PCPU_MB_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ) == 0 &&
			    sys_membarrier(PCPU_MB_CMD_PRIVATE_EXPEDITED_RSEQ) == 0) {
				errno = saved;
				return 0;
			}
		}
		record_lost(errno);
	}
	if (run_on_every_cpu() == 0) {
		errno = saved;
		return 0;
	}
	err = pcpu_sync_percpu_lost();
	errno = err;
	return -1;
}

/* The public form (pcpu/percpu_ops.h): a program's own gates. */
int pcpu_rseq_fence(void)
{
	return pcpu_sync_barrier();
}

void pcpu_futex_wait(uint32_t *word, uint32_t val)
{
	int saved = errno;

	/* EAGAIN (changed already), EINTR (a signal): the caller re-checks. */
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
	errno = saved;
}

void pcpu_futex_wake(uint32_t *word, int n)
{
	int saved = errno;

	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
	errno = saved;
}

_Static_assert(sizeof(struct pcpu__sync_slot) == 3 * sizeof(struct pcpu_counter),
	       "a sync object is three counter words per slot");

struct pcpu__sync_slot *pcpu_sync_obj_alloc(void *impl, intptr_t mode)
{
	struct pcpu__sync_slot *obj =
		(struct pcpu__sync_slot *)(void *)pcpu_counter_alloc_array(3);

	if (!obj) {
		errno = ENOMEM;
		return NULL;
	}
	__atomic_store_n(&obj->impl, impl, __ATOMIC_RELEASE);
	if (mode != 0)
		pcpu_sync_obj_set_mode(obj, mode);
	return obj;
}

void pcpu_sync_obj_free(struct pcpu__sync_slot *obj)
{
	/* The allocator zeroes every slot's copy for the next user. */
	pcpu_counter_free((pcpu_counter_t)(void *)obj);
}

void pcpu_sync_obj_set_mode(struct pcpu__sync_slot *obj, intptr_t mode)
{
	uint32_t s;

	/* The walked CPU slots only (slot_walk.c): no other slot's index
	 * reaches a section (owned slots never run one), and their copies have no memory of their own (a page
	 * per possible CPU and object otherwise; read-only under strict
	 * commit accounting). */
	PCPU_CPU_SLOT_WALK(i, s) {
		struct pcpu__sync_slot *c = (struct pcpu__sync_slot *)pcpu_slot_ptr(obj, s);

		__atomic_store_n(&c->mode, mode, __ATOMIC_RELEASE);
	}
}
