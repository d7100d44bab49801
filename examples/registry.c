/* The README's statistics example, complete: a labelled counter in a
 * registry, published for pcpustat, written as OpenMetrics. */
#include <pcpu/pcpu.h>
#include <pcpu/segment.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	if (!reg || !pcpu_segment_publish(reg, "readme", NULL)) {
		perror("pcpu");
		return 1;
	}
	struct pcpu_family_desc d = { .name = "http_requests", .help = "Requests served.",
				      .type = PCPU_METRIC_COUNTER, .nlabels = 1,
				      .label_names = (const char *[]){"method"} };
	pcpu_counter_t get = pcpu_family_counter(pcpu_registry_family(reg, &d), (const char *[]){"GET"});
	if (!get) {
		fprintf(stderr, "pcpu: %s\n", pcpu_stats_error());
		return 1;
	}
	pcpu_counter_inc(get);
	char *text;
	size_t len;
	if (pcpu_registry_write(reg, PCPU_FORMAT_OPENMETRICS, &text, &len) != 0) {
		perror("pcpu_registry_write");
		return 1;
	}
	fwrite(text, 1, len, stdout);
	free(text);
	pcpu_registry_destroy(reg);
	return 0;
}
