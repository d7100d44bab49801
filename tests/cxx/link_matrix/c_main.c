/* SPDX-License-Identifier: MIT */
/* The C shapes of shapes_c.h from two units (c_a.c, c_b.c), from 3
 * threads, under the injection (inject.h): exact, and aborted in the rseq
 * modes. This unit holds the C99 external definition of c99_add and the
 * GNU89 out-of-line gnu_add. Usage: link_matrix_c [ROUNDS] */
#include "shapes_c.h"
#include "inject.h"

#include <pthread.h>

extern inline void c99_add(pcpu_counter_t c, int64_t v);

/* gnu_inline's out-of-line twin (GNU89 extern inline emits none). */
void gnu_add(pcpu_counter_t c, int64_t v)
{
	pcpu_counter_add(c, v);
}

static pcpu_counter_t counter;
static long rounds = 20000;
static unsigned long aborts;

static void *thread_main(void *arg)
{
	(void)arg;
	inject_arm(30);
	c_rounds_a(counter, rounds);
	c_rounds_b(counter, rounds);
	__atomic_add_fetch(&aborts, pcpu__test_inject_aborts, __ATOMIC_RELAXED);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[3];
	long n;
	int ok, rseq;

	if (argc > 1)
		rounds = atol(argv[1]);
	counter = pcpu_counter_alloc();
	if (!counter)
		return 1;
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, thread_main, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	n = 2 * rounds * 3;
	ok = pcpu_counter_fetch(counter) == (uint64_t)(6 * n);
	rseq = pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK;
	printf("%s: %ld rounds, counter %llu (want %ld), %lu sections aborted (mode %s)\n",
	       ok && (aborts > 0 || !rseq) ? "ok" : "FAILED", n,
	       (unsigned long long)pcpu_counter_fetch(counter), 6 * n, aborts,
	       pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return ok && (aborts > 0 || !rseq) ? 0 : 1;
}
