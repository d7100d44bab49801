/* SPDX-License-Identifier: MIT */
/*
 * counter9.c: the two counter(9) functions that are more than a rename:
 * M_WAITOK allocation and counter_ratecheck(). See include/pcpu/counter9.h.
 */
#include "internal.h"
#include <pcpu/counter9.h>

#include <errno.h>
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

/* The kernel's `ticks` with hz = 1000: milliseconds of CLOCK_MONOTONIC,
 * wrapping like an int does (differences stay right across the wrap). */
static int now_ticks(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int)(unsigned)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

int64_t pcpu_counter9_ratecheck(struct pcpu_counter9_rate *cr, int64_t limit)
{
	const unsigned hz = 1000;
	int64_t val = __atomic_load_n(&cr->cr_over, __ATOMIC_RELAXED);
	int now = now_ticks();

	if ((unsigned)(now - __atomic_load_n(&cr->cr_ticks, __ATOMIC_RELAXED)) >= hz) {
		int unlocked = 0;

		/* A new second: one thread resets, the others do not count
		 * while it does (their adds could be zeroed away). */
		if (__atomic_load_n(&cr->cr_lock, __ATOMIC_RELAXED) != 0 ||
		    !__atomic_compare_exchange_n(&cr->cr_lock, &unlocked, 1, 0,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return val;
		if ((unsigned)(now - cr->cr_ticks) >= hz) {
			val = (int64_t)pcpu_counter_fetch_and_zero(cr->cr_rate);
			__atomic_store_n(&cr->cr_over, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&cr->cr_ticks, now, __ATOMIC_RELAXED);
			if (val <= limit)
				val = 0;
		}
		__atomic_store_n(&cr->cr_lock, 0, __ATOMIC_RELEASE);
	}
	pcpu_counter_add(cr->cr_rate, 1);
	if (__atomic_load_n(&cr->cr_over, __ATOMIC_RELAXED) != 0)
		return -1;
	if ((int64_t)pcpu_counter_fetch(cr->cr_rate) > limit) {
		__atomic_store_n(&cr->cr_over, -1, __ATOMIC_RELAXED);
		val = -1;
	}
	return val;
}
