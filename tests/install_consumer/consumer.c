#include <pcpu/pcpu.h>
#include <pcpu/counter9.h>
#include <stdio.h>

int main(void)
{
	pcpu_counter_t c = pcpu_counter_alloc();
	counter_u64_t k = counter_u64_alloc(M_WAITOK);

	if (!c || !k)
		return 1;
	for (int i = 0; i < 1000; i++) {
		pcpu_counter_inc(c);
		counter_u64_add(k, 2);
	}
	printf("consumer: %llu %llu\n", (unsigned long long)pcpu_counter_fetch(c),
	       (unsigned long long)counter_u64_fetch(k));
	return pcpu_counter_fetch(c) == 1000 && counter_u64_fetch(k) == 2000 ? 0 : 1;
}
