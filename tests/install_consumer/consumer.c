#include <pcpu/pcpu.h>
#include <pcpu/counter9.h>
#include <stdio.h>
#include <stdlib.h>

/* Writes a registry in every format the library has: with protobuf-c built
 * in, the protobuf writer, so that a static link needs what pcpu.pc's
 * Libs.private (and CMake's pcpu::pcpu_static) add for it. */
static int expose(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_counter_t c = reg ? pcpu_registry_counter(reg, "consumer_total", "Adds.") : NULL;
	enum pcpu_format fmts[] = {PCPU_FORMAT_PROMETHEUS, PCPU_FORMAT_PROTOBUF};
	char *out;
	size_t len;

	if (!c)
		return 1;
	pcpu_counter_add(c, 7);
	for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
		if (!pcpu_format_supported(fmts[i]))
			continue;
		if (pcpu_registry_write(reg, fmts[i], &out, &len) != 0 || len == 0)
			return 1;
		free(out);
	}
	pcpu_registry_destroy(reg);
	return 0;
}

int main(void)
{
	pcpu_counter_t c = pcpu_counter_alloc();
	counter_u64_t k = counter_u64_alloc(M_WAITOK);

	if (!c || !k || expose() != 0)
		return 1;
	for (int i = 0; i < 1000; i++) {
		pcpu_counter_inc(c);
		counter_u64_add(k, 2);
	}
	printf("consumer: %llu %llu\n", (unsigned long long)pcpu_counter_fetch(c),
	       (unsigned long long)counter_u64_fetch(k));
	return pcpu_counter_fetch(c) == 1000 && counter_u64_fetch(k) == 2000 ? 0 : 1;
}
