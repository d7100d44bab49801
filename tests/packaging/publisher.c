/* Built against the installed packages by deb_test.sh: publishes segment
 * NAME with debtest_events_total = 4242 and debtest_depth = -5, prints
 * "ready", and unpublishes when its standard input reaches end of file. */
#include <pcpu/pcpu.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_counter_t events;
	pcpu_gauge_t depth;
	char buf[16];

	if (!reg || !pcpu_segment_publish(reg, argc > 1 ? argv[1] : "debtest", NULL)) {
		fprintf(stderr, "publisher: %s\n", pcpu_segment_error());
		return 1;
	}
	events = pcpu_registry_counter(reg, "debtest_events_total", "Events.");
	depth = pcpu_registry_gauge(reg, "debtest_depth", "Depth.");
	if (!events || !depth) {
		fprintf(stderr, "publisher: %s\n", pcpu_stats_error());
		return 1;
	}
	pcpu_counter_add(events, 4242);
	pcpu_gauge_set(depth, -5);
	printf("ready\n");
	fflush(stdout);
	while (fgets(buf, sizeof buf, stdin))
		;
	pcpu_registry_destroy(reg);
	return 0;
}
