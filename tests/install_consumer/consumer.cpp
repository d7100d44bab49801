#include <pcpu/pcpu.h>
#include <cstdio>

int main()
{
	pcpu_counter_t c = pcpu_counter_alloc();
	if (!c)
		return 1;
	for (int i = 0; i < 1000; i++)
		pcpu_counter_add(c, 1);
	std::printf("consumer (C++): %llu\n", (unsigned long long)pcpu_counter_fetch(c));
	return pcpu_counter_fetch(c) == 1000 ? 0 : 1;
}
