/* A program that only counts (issue 39): counters, counter(9), a reference
 * count and the read-mostly lock, linked with libpcpu alone (pkg-config
 * pcpu, CMake pcpu::pcpu). run.sh checks that it needs neither
 * libpcpu-stats nor protobuf-c. */
#include <pcpu/counter.h>
#include <pcpu/counter9.h>
#include <pcpu/ref.h>
#include <pcpu/rwlock.h>
#include <stdio.h>

static int released;

static void release(void *arg)
{
	(void)arg;
	released = 1;
}

int main(void)
{
	pcpu_counter_t c = pcpu_counter_alloc();
	counter_u64_t k = counter_u64_alloc(M_WAITOK);
	pcpu_ref_t *ref = pcpu_ref_create(release, NULL);
	pcpu_rwlock_t *lock = pcpu_rwlock_create();

	if (!c || !k || !ref || !lock)
		return 1;
	for (int i = 0; i < 1000; i++) {
		pcpu_rwlock_rdlock(lock);
		pcpu_counter_inc(c);
		counter_u64_add(k, 2);
		pcpu_rwlock_rdunlock(lock);
	}
	pcpu_ref_kill(ref);
	printf("consumer (counting only): %llu %llu released %d\n",
	       (unsigned long long)pcpu_counter_fetch(c), (unsigned long long)counter_u64_fetch(k), released);
	return pcpu_counter_fetch(c) == 1000 && counter_u64_fetch(k) == 2000 && released ? 0 : 1;
}
