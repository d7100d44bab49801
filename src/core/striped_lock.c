/* SPDX-License-Identifier: MIT */
/*
 * striped_lock.c: the library's striped mutexes (striped_lock.h).
 *
 * 16 stripes, not more: fork() takes them all at once (fork.c), and tools
 * such as ThreadSanitizer cap how many locks one thread may hold (64);
 * resets and sets are rare enough that 16 stripes keep unrelated objects
 * apart. Objects 8 bytes apart (counters, gauges) fall on different
 * stripes: the address is folded before the modulo, so arrays and
 * per-struct layouts spread too.
 */
#include "striped_lock.h"

#include <stdint.h>

#include "core.h"

#define STRIPES 16

static pthread_mutex_t stripes[STRIPES] = {
	[0 ... STRIPES - 1] = PTHREAD_MUTEX_INITIALIZER,
};
static int fork_registered;

static void stripes_prepare(void)
{
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_lock(&stripes[i]);
}

static void stripes_release(void)
{
	for (int i = STRIPES - 1; i >= 0; i--)
		pthread_mutex_unlock(&stripes[i]);
}

void pcpu_stripes_register(void)
{
	/* Registration failure (ENOMEM) leaves the stripes usable: only a
	 * fork() racing a reset could then leave one held in the child. */
	(void)pcpu__fork_register(&fork_registered, PCPU_FORK_COUNTER, stripes_prepare,
				 stripes_release, stripes_release);
}

pthread_mutex_t *pcpu_stripe_lock(const void *addr)
{
	uintptr_t a = (uintptr_t)addr >> 3; /* objects are 8-byte words */
	pthread_mutex_t *m = &stripes[(a ^ (a >> 6) ^ (a >> 12)) % STRIPES];

	pcpu_stripes_register();
	pthread_mutex_lock(m);
	return m;
}
