/*
 * pcpustat prints every value exactly as the library's exposition writes
 * it: one number formatter (pcpu_format_double() and friends), not two.
 *
 * The values are chosen where a printf-based formatter and the writers'
 * (Go's layout, shortest round trip, exact power-of-ten scaling) disagree:
 * 1234567 prints "1234567" with "%.7g" but "1.234567e+06" in Go's layout;
 * -123456789.01 likewise; counters past INT64_MAX; exact scaling of
 * nanoseconds to seconds. The process formats under a locale whose decimal
 * point is a comma (de_DE.UTF-8 when installed: scripts/install-deps.sh
 * builds it) and runs pcpustat under the same locale, so a formatter that
 * followed LC_NUMERIC would print "0,005" and fail.
 *
 * Usage: test_tool_numbers PCPUSTAT
 */
#include "../check.h"
#include <pcpu/pcpu.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct value {
	const char *name;
	enum pcpu_metric_type type;
	int scale;
	int64_t v; /* counters: added (wraps modulo 2^64) */
	int adds;  /* counters: how many times */
};

static const struct value values[] = {
	{ "n_ms_total", PCPU_METRIC_COUNTER, -3, 1234567000, 1 },
	{ "n_wrap_total", PCPU_METRIC_COUNTER, 0, INT64_MAX, 2 },
	{ "n_big_seconds_total", PCPU_METRIC_COUNTER, -9, INT64_MAX, 2 },
	{ "n_cents", PCPU_METRIC_GAUGE, -2, -12345678901, 0 },
	{ "n_latency_seconds", PCPU_METRIC_GAUGE, -9, 5000000, 0 },
	{ "n_tenths", PCPU_METRIC_GAUGE, -1, 10000000, 0 },
	{ "n_kilo", PCPU_METRIC_GAUGE, 3, 7, 0 },
	{ "n_min", PCPU_METRIC_GAUGE, 0, INT64_MIN, 0 },
	{ "n_tiny", PCPU_METRIC_GAUGE, -22, 15, 0 },
	{ "n_third", PCPU_METRIC_GAUGE, -1, 1, 0 },
};
#define NVALUES (sizeof values / sizeof values[0])

/* The value after `name` and spaces on a line starting with it (after
 * leading spaces), copied into out; 0 if no line has it. */
static int find_value(const char *text, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	const char *p = text;

	while (p && *p) {
		const char *line = p + strspn(p, " ");
		const char *end = strchr(line, '\n');

		if (strncmp(line, name, nl) == 0 && line[nl] == ' ') {
			const char *v = line + nl + strspn(line + nl, " ");
			size_t n = end ? (size_t)(end - v) : strlen(v);

			CHECK(n < cap);
			memcpy(out, v, n);
			out[n] = '\0';
			return 1;
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/pcpu-numbers-XXXXXX", cmd[512], *expo, tool[8192], name[128];
	const char *loc = NULL;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	size_t len, k, n;
	FILE *p;
	int a;

	CHECK(argc == 2);
	if (setlocale(LC_ALL, "de_DE.UTF-8") && *localeconv()->decimal_point == ',')
		loc = "de_DE.UTF-8";
	else
		printf("no de_DE.UTF-8 locale (scripts/install-deps.sh builds it): formatting "
		       "compared in the C locale only\n");
	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	reg = pcpu_registry_create();
	CHECK(reg != NULL);
	seg = pcpu_segment_publish(reg, "numbers", NULL); /* before any series */
	CHECK(seg != NULL);
	for (k = 0; k < NVALUES; k++) {
		struct pcpu_family_desc d;
		pcpu_family_t *f;

		memset(&d, 0, sizeof d);
		d.name = values[k].name;
		d.type = values[k].type;
		d.scale_exp10 = values[k].scale;
		f = pcpu_registry_family(reg, &d);
		CHECK(f != NULL);
		if (d.type == PCPU_METRIC_COUNTER) {
			pcpu_counter_t c = pcpu_family_counter(f, NULL);

			CHECK(c != NULL);
			for (a = 0; a < values[k].adds; a++)
				pcpu_counter_add(c, values[k].v);
		} else {
			pcpu_gauge_t g = pcpu_family_gauge(f, NULL);

			CHECK(g != NULL);
			CHECK(pcpu_gauge_set(g, values[k].v) == 0);
		}
	}
	{
		/* A histogram: pcpustat prints its quantile estimates (four
		 * significant digits) with the library's formatter too, in
		 * its layout: 15000, where printf's %.4g wrote 1.5e+04. */
		static const int64_t bounds[] = { 10000, 20000, 40000 };
		struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPLICIT,
						   .bounds = bounds, .nbounds = 3 };
		struct pcpu_family_desc d = { .name = "n_size_bytes",
					      .type = PCPU_METRIC_HISTOGRAM, .histogram = &l };
		pcpu_family_t *f = pcpu_registry_family(reg, &d);
		pcpu_histogram_t *h = f ? pcpu_family_histogram(f, NULL) : NULL;

		CHECK(h != NULL);
		pcpu_histogram_record_n(h, 15000, 100);
	}
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &expo, &len) == 0);
	/* What the library formats under a comma locale: the Prometheus text
	 * format has no other decimal point. */
	CHECK(find_value(expo, "n_latency_seconds", name, sizeof name) && strcmp(name, "0.005") == 0);
	CHECK(find_value(expo, "n_ms_total", name, sizeof name) && strcmp(name, "1.234567e+06") == 0);

	snprintf(cmd, sizeof cmd, "%s%s %s numbers", loc ? "LC_ALL=" : "", loc ? loc : "", argv[1]);
	p = popen(cmd, "r");
	CHECK(p != NULL);
	n = fread(tool, 1, sizeof tool - 1, p);
	tool[n] = '\0';
	CHECK(pclose(p) == 0);
	for (k = 0; k < NVALUES; k++) {
		char lib_v[64], tool_v[64];

		CHECK(find_value(expo, values[k].name, lib_v, sizeof lib_v));
		if (!find_value(tool, values[k].name, tool_v, sizeof tool_v)) {
			fprintf(stderr, "pcpustat printed no %s:\n%s", values[k].name, tool);
			return 1;
		}
		if (strcmp(lib_v, tool_v) != 0) {
			fprintf(stderr, "%s: exposition says %s, pcpustat says %s\n", values[k].name,
				lib_v, tool_v);
			return 1;
		}
		printf("%-22s %s\n", values[k].name, lib_v);
	}
	/* Quantiles: "p50 15000" (Go's layout), not "1.5e+04" nor "1,5e+04". */
	CHECK(find_value(tool, "n_size_bytes", name, sizeof name));
	printf("%-22s %s\n", "n_size_bytes", name);
	if (!strstr(name, " p50 1") || strchr(name, ',') || strstr(name, "e+")) {
		fprintf(stderr, "n_size_bytes: pcpustat's quantiles are not the library's "
			"numbers: %s\n", name);
		return 1;
	}
	/* The public formatter is the writers' own. */
	CHECK(pcpu_format_u64(name, sizeof name, (uint64_t)INT64_MAX * 2, 0) == 20 &&
	      strcmp(name, "18446744073709551614") == 0);
	CHECK(pcpu_format_i64(name, sizeof name, -12345678901, -2) > 0 &&
	      strcmp(name, "-1.2345678901e+08") == 0);
	CHECK(pcpu_format_double(name, sizeof name, 1, PCPU_FORMAT_NUMBER_CANONICAL) == 3 &&
	      strcmp(name, "1.0") == 0);
	CHECK(pcpu_format_double(name, 4, 0.125, 0) == -1 && errno == ERANGE && name[0] == '\0');
	CHECK(pcpu_format_i64(name, sizeof name, 1, 23) == -1 && errno == EINVAL);
	CHECK(pcpu_stats_scale(5000000, -9) == 0.005);
	free(expo);
	CHECK(pcpu_segment_unpublish(seg) == 0);
	pcpu_registry_destroy(reg);
	CHECK(rmdir(dir) == 0);
	printf("pcpustat and the library agree%s%s\n", loc ? " under " : "", loc ? loc : "");
	return 0;
}
