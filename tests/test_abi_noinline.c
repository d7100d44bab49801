/* A program of the stable tier only (PCPU_NO_INLINE): it must reference no
 * pcpu__ symbol and need no PCPU_LAYOUT_<n> node (checked with nm in
 * tests/CMakeLists.txt), and still count exactly. */
#define PCPU_NO_INLINE 1
#include "check.h"
#include <pcpu/counter.h>

void noinline_ops(pcpu_counter_t a, size_t n, long rounds);

int main(void)
{
	pcpu_counter_t a = pcpu_counter_alloc_array(4);

	CHECK(a != NULL);
	noinline_ops(a, 4, 1000);
	pcpu_counter_add(a, 1);
	CHECK_EQ_U64(pcpu_counter_fetch(a), 3001);
	CHECK_EQ_U64(pcpu_counter_fetch(pcpu_counter_at(a, 3)), 5000);
	printf("stable tier only: exact\n");
	return 0;
}
