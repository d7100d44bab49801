/* The stable tier: the same operations as test_abi.c's inline ones,
 * through the library's exported functions (PCPU_NO_INLINE). */
#define PCPU_NO_INLINE 1
#include <pcpu/counter.h>
#include <pcpu/zone.h>

void noinline_ops(pcpu_counter_t a, size_t n, long rounds)
{
	for (long r = 0; r < rounds; r++) {
		pcpu_counter_add(pcpu_counter_at(a, 0), 3);
		pcpu_counter_inc(pcpu_counter_at(a, 1));
		pcpu_counter_t cs[2] = { pcpu_counter_at(a, 2), pcpu_counter_at(a, n - 1) };
		int64_t vs[2] = { -1, 5 };
		pcpu_counter_add_many(cs, vs, 2);
	}
}

void *noinline_slot_ptr(void *obj, unsigned slot)
{
	return pcpu_slot_ptr(obj, slot);
}
