/*
 * A program of libpcpu-stats for seam_mismatch_test.sh: says it reached
 * main, then makes and writes a registry (which calls into libpcpu, but
 * never pcpu__zone_tree_adopt, the private function the test renames: a
 * mismatched pair must be refused at load, not at some first call).
 */
#include <stdio.h>

#include <pcpu/stats.h>

int main(void)
{
	pcpu_registry_t *reg;
	pcpu_counter_t c;

	printf("seam_probe: main reached\n");
	fflush(stdout);
	reg = pcpu_registry_create();
	c = reg ? pcpu_registry_counter(reg, "seam_probe_runs", "Runs.") : NULL;
	if (!c)
		return 1;
	pcpu_counter_inc(c);
	pcpu_registry_destroy(reg);
	printf("seam_probe: ok\n");
	return 0;
}
