/* The migrations pcpu's stress tests inflict on their threads. */
#ifndef PCPU_TEST_STRESS_MOVE_H
#define PCPU_TEST_STRESS_MOVE_H

#include <sched.h>

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

#endif
