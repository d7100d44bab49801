/* A plugin for test_unload: inline pcpu adds, so its object holds rseq
 * critical-section descriptors that go away with dlclose(). */
#include <pcpu/pcpu.h>

__attribute__((visibility("default"))) void plugin_add(pcpu_counter_t c, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_counter_add(c, 1);
}

/* One inline attempt, no slow path: 1 once committed here, so the calling
 * thread's rseq_cs is left pointing at this object's descriptor. */
__attribute__((visibility("default"))) int plugin_add_inline(pcpu_counter_t c)
{
	return pcpu__counter_add_once(c, 1) == 0;
}
