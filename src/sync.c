/* SPDX-License-Identifier: MIT */
/*
 * sync.c: what pcpu_ref and pcpu_rwlock (src/ref.c, src/rwlock.c) share --
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
 */
#include "sync.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
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

int pcpu_sync_percpu_check(void)
{
	int err;

	if (pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK) {
		err = pcpu_rseq_error();
		return err ? err : ENOSYS;
	}
	pthread_once(&mb_once, mb_register);
	return mb_error;
}

int pcpu_sync_percpu_error(void)
{
	return pcpu_sync_percpu_check();
}

int pcpu_sync_barrier(void)
{
	int saved = errno;

	if (sys_membarrier(PCPU_MB_CMD_PRIVATE_EXPEDITED_RSEQ) == 0)
		return 0;
	if (errno == EPERM) {
		/* Not registered: the registration is per process (mm), so a
		 * fork() child that inherited no registration registers now.
		 * EPERM again: a seccomp filter, reported. */
		if (sys_membarrier(PCPU_MB_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ) == 0 &&
		    sys_membarrier(PCPU_MB_CMD_PRIVATE_EXPEDITED_RSEQ) == 0) {
			errno = saved;
			return 0;
		}
	}
	return -1;
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
	uint32_t s, n = pcpu_slot_count;

	for (s = 0; s < n; s++) {
		struct pcpu__sync_slot *c = (struct pcpu__sync_slot *)pcpu_slot_ptr(obj, s);

		__atomic_store_n(&c->mode, mode, __ATOMIC_RELEASE);
	}
}
