/* The README's example: threads count events on one pcpu counter. */
#include <pcpu/pcpu.h>
#include <pthread.h>
#include <stdio.h>

#define THREADS 8
#define EVENTS 1000000

static pcpu_counter_t requests;

static void *worker(void *arg)
{
	for (int i = 0; i < EVENTS; i++)
		pcpu_counter_inc(requests); /* an rseq add on this CPU's slot */
	return arg;
}

int main(void)
{
	pthread_t t[THREADS];

	requests = pcpu_counter_alloc();
	if (!requests) {
		perror("pcpu_counter_alloc");
		return 1;
	}
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("requests = %llu (expected %d), mode %s, %u slots\n",
	       (unsigned long long)pcpu_counter_fetch(requests), THREADS * EVENTS,
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), pcpu_nslots());
	pcpu_counter_free(requests);
	return 0;
}
