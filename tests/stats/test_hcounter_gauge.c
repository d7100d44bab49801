/*
 * A hierarchical counter's approximation and bounds as gauges
 * (pcpu_registry_hcounter(), pcpu_family_hcounter()): the three series in
 * an exposition with the counter's values, after adds that carry and in its
 * precise mode; in a published segment, as another process's reader (and
 * so pcpustat) sees it; a family with another label; and the errors.
 */
#include "../check.h"
#include "segment_text.h"
#include <pcpu/pcpu.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

/* The three lines of counter h in `text`, family `name`, labels `pre`
 * (e.g. "tenant=\"a\","), as its approx says now. */
static void check_lines(const char *text, const char *name, const char *pre,
			const pcpu_hcounter_t *h)
{
	struct pcpu_hcounter_approx a = pcpu_hcounter_approx(h);
	char line[256];

	snprintf(line, sizeof line, "%s{%sbound=\"value\"} %" PRId64, name, pre, a.value);
	CHECK(text_has_line(text, line));
	snprintf(line, sizeof line, "%s{%sbound=\"min\"} %" PRId64, name, pre, a.min);
	CHECK(text_has_line(text, line));
	snprintf(line, sizeof line, "%s{%sbound=\"max\"} %" PRId64, name, pre, a.max);
	CHECK(text_has_line(text, line));
}

int main(void)
{
	static const char *const two[2] = {"tenant", "bound"};
	static const char *const one_other[1] = {"tenant"};
	static const char *const va[1] = {"a"}, *const vb[1] = {"b"};
	char dir[] = "/tmp/pcpu-hcgauge-XXXXXX";
	pcpu_registry_t *reg;
	pcpu_hcounter_t *h, *ha, *hb;
	pcpu_segment_t *seg;
	pcpu_family_t *f, *quota;
	struct pcpu_family_desc d;
	char *t;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	reg = pcpu_registry_create();
	CHECK(reg != NULL);
	seg = pcpu_segment_publish(reg, "hcgauge", NULL);
	CHECK(seg != NULL);
	h = pcpu_hcounter_create(16);
	CHECK(h != NULL);

	f = pcpu_registry_hcounter(reg, "connections", "Connections open.", h);
	CHECK(f != NULL);
	t = registry_text(reg);
	CHECK(text_has_line(t, "connections{bound=\"value\"} 0"));
	CHECK(text_has_line(t, "connections{bound=\"min\"} 0"));
	check_lines(t, "connections", "", h);
	free(t);
	for (int i = 0; i < 1000; i++)
		pcpu_hcounter_add(h, 7); /* carries */
	t = registry_text(reg);
	check_lines(t, "connections", "", h);
	free(t);
	/* Precise mode: value, min and max are one exact number. */
	CHECK(pcpu_hcounter_limited_add(h, 1, 7001) || pcpu_hcounter_sum(h) == 7000);
	CHECK(!pcpu_hcounter_limited_add(h, 1, 7001) || pcpu_hcounter_sum(h) <= 7001);
	t = registry_text(reg);
	check_lines(t, "connections", "", h);
	if (pcpu_hcounter_is_percpu(h)) {
		char line[64];

		snprintf(line, sizeof line, "connections{bound=\"max\"} %" PRId64, pcpu_hcounter_sum(h));
		CHECK(text_has_line(t, line)); /* exact near the limit */
	}
	free(t);

	/* What another process (pcpustat) reads: the last collection's. */
	CHECK(pcpu_registry_collect(reg) == 0);
	t = segment_text(pcpu_segment_path(seg));
	check_lines(t, "connections", "", h);
	free(t);

	/* A family of the program's, one counter per tenant. */
	memset(&d, 0, sizeof d);
	d.name = "quota_bytes";
	d.help = "Bytes allocated against each tenant's quota.";
	d.type = PCPU_METRIC_GAUGE;
	d.nlabels = 2;
	d.label_names = two;
	quota = pcpu_registry_family(reg, &d);
	CHECK(quota != NULL);
	ha = pcpu_hcounter_create(1024);
	hb = pcpu_hcounter_create(1024);
	CHECK(ha && hb);
	pcpu_hcounter_add(ha, 123456);
	pcpu_hcounter_add(hb, 42);
	CHECK(pcpu_family_hcounter(quota, va, ha) == 0);
	CHECK(pcpu_family_hcounter(quota, vb, hb) == 0);
	t = registry_text(reg);
	check_lines(t, "quota_bytes", "tenant=\"a\",", ha);
	check_lines(t, "quota_bytes", "tenant=\"b\",", hb);
	free(t);

	/* Errors: all three series or none. */
	errno = 0;
	CHECK(pcpu_family_hcounter(quota, va, ha) == -1 && errno == EEXIST);
	CHECK(pcpu_family_hcounter(quota, NULL, ha) == -1 && errno == EINVAL);
	CHECK(pcpu_family_hcounter(NULL, va, ha) == -1 && errno == EINVAL);
	CHECK(pcpu_family_hcounter(quota, va, NULL) == -1 && errno == EINVAL);
	CHECK(pcpu_registry_hcounter(NULL, "x", NULL, h) == NULL && errno == EINVAL);
	CHECK(pcpu_registry_hcounter(reg, "connections", "Connections open.", h) == NULL);
	d.name = "no_bound";
	d.nlabels = 1;
	d.label_names = one_other;
	f = pcpu_registry_family(reg, &d);
	CHECK(f != NULL);
	CHECK(pcpu_family_hcounter(f, va, h) == -1 && errno == EINVAL);
	d.name = "a_counter";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 2;
	d.label_names = two;
	f = pcpu_registry_family(reg, &d);
	CHECK(f != NULL);
	CHECK(pcpu_family_hcounter(f, va, h) == -1 && errno == EINVAL);
	t = registry_text(reg);
	CHECK(strstr(t, "no_bound{") == NULL && strstr(t, "a_counter_total{") == NULL);
	free(t);

	/* The series go before the counters do. */
	CHECK(pcpu_registry_remove_family(reg, quota) == 0);
	pcpu_hcounter_destroy(ha);
	pcpu_hcounter_destroy(hb);
	pcpu_registry_destroy(reg);
	pcpu_hcounter_destroy(h);
	CHECK(rmdir(dir) == 0);
	printf("hcounter gauges: value, min, max in expositions and segments\n");
	return 0;
}
