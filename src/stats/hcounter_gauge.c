/* SPDX-License-Identifier: MIT */
/*
 * hcounter_gauge.c: a hierarchical counter's approximation and bounds as
 * gauges of a registry (pcpu_family_hcounter(), pcpu_registry_hcounter() in
 * pcpu/stats.h), so that pcpustat and the exporters show what a limit is
 * checked against. Three callback series (pcpu_family_callback()) per
 * counter, labelled bound="value", "min" and "max", each an O(1) read of the
 * counter's header (pcpu_hcounter_approx()); the statistics layer calls down
 * to the counter, never the reverse.
 */
#include <pcpu/stats.h>
#include <pcpu/hcounter.h>

#include "stats_internal.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

static int hc_value(void *arg, int64_t *value)
{
	*value = pcpu_hcounter_approx((const pcpu_hcounter_t *)arg).value;
	return 0;
}

static int hc_min(void *arg, int64_t *value)
{
	*value = pcpu_hcounter_approx((const pcpu_hcounter_t *)arg).min;
	return 0;
}

static int hc_max(void *arg, int64_t *value)
{
	*value = pcpu_hcounter_approx((const pcpu_hcounter_t *)arg).max;
	return 0;
}

#define MAX_LABELS 32

int pcpu_family_hcounter(pcpu_family_t *fam, const char *const *label_values,
			 const pcpu_hcounter_t *h)
{
	static const char *const bounds[3] = {"value", "min", "max"};
	static const pcpu_callback_fn fns[3] = {hc_value, hc_min, hc_max};
	const char *values[MAX_LABELS];
	const char *const *names;
	unsigned n = 0;

	if (!fam || !h) {
		pcpu__set_error("family or counter is NULL");
		errno = EINVAL;
		return -1;
	}
	names = pcpu_family_label_names(fam, &n);
	if (pcpu_family_type(fam) != PCPU_METRIC_GAUGE || n == 0 || n > MAX_LABELS ||
	    strcmp(names[n - 1], "bound") != 0) {
		pcpu__set_error("a counter's bounds need a gauge family whose last label is "
				"\"bound\"");
		errno = EINVAL;
		return -1;
	}
	if (n > 1 && !label_values) {
		pcpu__set_error("label values are NULL");
		errno = EINVAL;
		return -1;
	}
	for (unsigned i = 0; i + 1 < n; i++)
		values[i] = label_values[i];
	for (int k = 0; k < 3; k++) {
		values[n - 1] = bounds[k];
		if (pcpu_family_callback(fam, values, fns[k], (void *)(uintptr_t)h) != 0) {
			int err = errno;

			/* All three or none. */
			while (k-- > 0) {
				values[n - 1] = bounds[k];
				(void)pcpu_family_remove(fam, values);
			}
			errno = err;
			return -1;
		}
	}
	return 0;
}

pcpu_family_t *pcpu_registry_hcounter(pcpu_registry_t *reg, const char *name, const char *help,
				      const pcpu_hcounter_t *h)
{
	static const char *const label[1] = {"bound"};
	struct pcpu_family_desc d;
	pcpu_family_t *fam;

	if (!reg || !h) {
		pcpu__set_error("registry or counter is NULL");
		errno = EINVAL;
		return NULL;
	}
	memset(&d, 0, sizeof d);
	d.name = name;
	d.help = help;
	d.type = PCPU_METRIC_GAUGE;
	d.nlabels = 1;
	d.label_names = label;
	fam = pcpu_registry_family(reg, &d);
	if (!fam || pcpu_family_hcounter(fam, NULL, h) != 0)
		return NULL;
	return fam;
}
