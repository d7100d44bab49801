/* SPDX-License-Identifier: MIT */
/*
 * counter9.c: the counter(9) functions that are more than a rename:
 * M_WAITOK allocation, early adds, the rate checks and the array
 * fetch-and-zero. See include/pcpu/counter9.h.
 */
#include "rseq_internal.h"
#include <pcpu/counter9.h>

#include <errno.h>
#include <stdlib.h>
#include <time.h>

pcpu_counter_t pcpu_counter9_alloc(int flags)
{
	struct timespec pause = {0, 1000000}; /* 1 ms, doubling to 1 s */
	pcpu_counter_t c;

	while (!(c = pcpu_counter_alloc()) && (flags & PCPU_M_WAITOK) && errno == ENOMEM) {
		/* Like malloc(9) M_WAITOK: wait for memory instead of failing. */
		nanosleep(&pause, NULL);
		if (pause.tv_nsec < 500000000)
			pause.tv_nsec *= 2;
	}
	return c;
}

int pcpu_counter9_ticks(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int)(unsigned)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

static uint64_t early_adds;

void pcpu_counter9_early_add(int64_t v)
{
	__atomic_fetch_add(&early_adds, (uint64_t)v, __ATOMIC_RELAXED);
}

uint64_t pcpu_counter9_early_adds(void)
{
	return __atomic_load_n(&early_adds, __ATOMIC_RELAXED);
}

/* Whether the period that started at `start` (0: none yet) is over at
 * `now`. The difference is signed: a thread that read `now` and was
 * preempted while another opened a new period sees a small negative
 * difference, not a huge unsigned one, so it cannot open a second period
 * in the same period (FreeBSD's unsigned test allows that: a burst through
 * the limit). A difference below -60 s cannot come from such a delay: the
 * state sat idle for longer than the int clock's half-range (24.8 days)
 * and wrapped, so a new period starts. */
static int period_over(int now, int start, int len)
{
	int d = (int)((unsigned)now - (unsigned)start);

	return start == 0 || d >= len || d < -60 * PCPU_COUNTER9_HZ;
}

/* Test hook (tests/test_ratecheck_race.c): when set, called by the rate
 * check between its add and its fetch, so a test can reset the period
 * there, as a preempted thread meets another thread's reset. */
PCPU_HIDDEN void (*pcpu__test_ratecheck_counted)(volatile int *lock, int *ticks);

int64_t pcpu_counter9_ratecheck_fields(pcpu_counter_t rate, volatile int *lock, int *ticks,
				       int *over, int period, int64_t limit)
{
	int64_t val = __atomic_load_n(over, __ATOMIC_RELAXED);
	int now = pcpu_counter9_ticks();
	int start = __atomic_load_n(ticks, __ATOMIC_ACQUIRE);
	int len = (period > 0 ? period : 1) * PCPU_COUNTER9_HZ;
	uint64_t count;

	if (period_over(now, start, len)) {
		int unlocked = 0;

		/* A new period: one thread resets, the others do not count
		 * while it does (their adds could be zeroed away) -- and are
		 * refused, where FreeBSD's admit them uncounted: a resetter
		 * preempted here would otherwise let a whole time slice of
		 * events through the limit. */
		if (__atomic_load_n(lock, __ATOMIC_RELAXED) != 0 ||
		    !__atomic_compare_exchange_n((int *)lock, &unlocked, 1, 0, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			return -1;
		/* The lock before the zeroing, for every thread that reads
		 * what the zeroing wrote (the check after the fetch below). */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		/* Re-read under the lock: another thread may have opened the
		 * period between our test and the lock. */
		now = pcpu_counter9_ticks();
		if (period_over(now, __atomic_load_n(ticks, __ATOMIC_RELAXED), len)) {
			val = (int64_t)pcpu_counter_fetch_and_zero(rate);
			__atomic_store_n(over, 0, __ATOMIC_RELAXED);
			/* 0 means "never opened": skip it. */
			__atomic_store_n(ticks, now ? now : 1, __ATOMIC_RELAXED);
			if (val <= limit)
				val = 0;
		}
		start = __atomic_load_n(ticks, __ATOMIC_RELAXED);
		__atomic_store_n((int *)lock, 0, __ATOMIC_RELEASE);
	}
	pcpu_counter_add(rate, 1);
	if (__atomic_load_n(over, __ATOMIC_RELAXED) != 0)
		return -1;
	if (PCPU_UNLIKELY(pcpu__test_ratecheck_counted != NULL))
		pcpu__test_ratecheck_counted(lock, ticks);
	count = pcpu_counter_fetch(rate);
	/* A reset during this call -- between the period test and the add,
	 * or while the fetch walked the slots -- makes the count a mix of
	 * two periods, too small: an event the ended period already counted
	 * would be admitted beyond its limit. The fetch saw the zeroing's
	 * offset only if the resetter's lock shows now (the fence above and
	 * this one), and a finished reset has moved the period's start. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(lock, __ATOMIC_ACQUIRE) != 0 ||
	    __atomic_load_n(ticks, __ATOMIC_RELAXED) != start)
		return -1;
	if ((int64_t)count > limit) {
		__atomic_store_n(over, -1, __ATOMIC_RELAXED);
		val = -1;
	}
	return val;
}

int64_t pcpu_counter9_ratecheck(struct pcpu_counter9_rate *cr, int64_t limit)
{
	return pcpu_counter9_ratecheck_fields(cr->cr_rate, &cr->cr_lock, &cr->cr_ticks,
					      &cr->cr_over, cr->cr_period, limit);
}

struct pcpu_counter9_rate *pcpu_counter9_rate_alloc(int flags, int period)
{
	struct pcpu_counter9_rate *cr;

	if (period < 1) {
		errno = EINVAL;
		return NULL;
	}
	cr = calloc(1, sizeof(*cr));
	if (!cr) {
		errno = ENOMEM;
		return NULL;
	}
	cr->cr_rate = pcpu_counter9_alloc(flags);
	if (!cr->cr_rate) {
		free(cr);
		return NULL;
	}
	cr->cr_period = period;
	return cr;
}

uint64_t pcpu_counter9_rate_get(struct pcpu_counter9_rate *cr)
{
	if (!cr) {
		errno = EINVAL;
		return 0;
	}
	return pcpu_counter_fetch(cr->cr_rate);
}

void pcpu_counter9_rate_free(struct pcpu_counter9_rate *cr)
{
	if (!cr)
		return;
	(void)pcpu_counter_free(cr->cr_rate);
	free(cr);
}

int pcpu_counter9_array_fetch_and_zero(uint64_t *const *a, uint64_t *dst, size_t n)
{
	size_t i;

	if (n && (!a || !dst)) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < n; i++)
		dst[i] = a[i] ? pcpu_counter_fetch_and_zero((pcpu_counter_t)(void *)a[i]) : 0;
	return 0;
}
