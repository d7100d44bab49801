/* SPDX-License-Identifier: MIT */
/*
 * The one description of each metric type (pcpu_metric_type_info(),
 * pcpu/expose.h). Every encoder -- the text, OpenMetrics, JSON and protobuf
 * writers here, pcpustat and its remote-write and OTLP push in tools/ --
 * reads its words, suffixes and kinds from this table rather than switching
 * on the type itself, so that a new type is one entry here plus the code
 * that stores and reads its values (registry, snapshot, segment).
 *
 * The words are the specifications': Prometheus text format 0.0.4 knows
 * counter, gauge, histogram, summary and untyped; OpenMetrics 1.0 counter,
 * gauge, histogram, gaugehistogram, stateset, info, summary and unknown.
 * tests/stats/test_metric_type.c checks them against those lists and the
 * writers' output.
 *
 * libc only (no core): the fuzz targets build this file with validate.c,
 * format.c and expose.c alone.
 */
#include <errno.h>

#include "stats_internal.h"

/* OpenMetrics reserves these names for a family, whether it writes them or
 * not (its parser refuses a clash with _created too). */
static const char *const counter_suffixes[] = { "", "_total", "_created" };
static const char *const gauge_suffixes[] = { "" };
static const char *const histogram_suffixes[] = { "", "_bucket", "_count", "_sum", "_created" };

#define NSUF(a) (sizeof(a) / sizeof((a)[0]))

/* Indexed by enum pcpu_metric_type (1-based: entry 0 is no type). */
static const struct pcpu_metric_type_info types[] = {
	[PCPU_METRIC_COUNTER] = {
		.type = PCPU_METRIC_COUNTER,
		.name = "counter",
		.text_type = "counter",
		.openmetrics_type = "counter",
		/* OpenMetrics names a counter's sample <family>_total; the
		 * 0.0.4 writer does the same, as Prometheus' own clients do. */
		.sample_suffix = "_total",
		.suffixes = counter_suffixes,
		.nsuffixes = NSUF(counter_suffixes),
		.value = PCPU_VALUE_UNSIGNED,
		.flags = PCPU_TYPE_MONOTONIC | PCPU_TYPE_FRACTIONS,
		.prom = PCPU_PROM_COUNTER,
		.otlp = PCPU_OTLP_SUM,
	},
	[PCPU_METRIC_GAUGE] = {
		.type = PCPU_METRIC_GAUGE,
		.name = "gauge",
		.text_type = "gauge",
		.openmetrics_type = "gauge",
		.sample_suffix = "",
		.suffixes = gauge_suffixes,
		.nsuffixes = NSUF(gauge_suffixes),
		.value = PCPU_VALUE_SIGNED,
		.flags = PCPU_TYPE_FRACTIONS | PCPU_TYPE_INFO,
		.prom = PCPU_PROM_GAUGE,
		.otlp = PCPU_OTLP_GAUGE,
	},
	[PCPU_METRIC_HISTOGRAM] = {
		.type = PCPU_METRIC_HISTOGRAM,
		.name = "histogram",
		.text_type = "histogram",
		.openmetrics_type = "histogram",
		.sample_suffix = "",
		.suffixes = histogram_suffixes,
		.nsuffixes = NSUF(histogram_suffixes),
		.bucket_suffix = "_bucket",
		.sum_suffix = "_sum",
		.count_suffix = "_count",
		.bucket_label = "le",
		.value = PCPU_VALUE_BUCKETS,
		/* Cumulative buckets, sum and count only grow (the sum of
		 * negative observations aside, as in Prometheus). With
		 * fractions: observed as doubles, the sum's residue. */
		.flags = PCPU_TYPE_MONOTONIC | PCPU_TYPE_FRACTIONS,
		.prom = PCPU_PROM_HISTOGRAM,
		.otlp = PCPU_OTLP_HISTOGRAM,
	},
};

const struct pcpu_metric_type_info *pcpu__type_info(enum pcpu_metric_type type)
{
	/* Compared as unsigned: a negative value read from a hand-built
	 * snapshot or a segment is out of range too. */
	if ((unsigned)type >= NSUF(types) || !types[type].name)
		return NULL;
	return &types[type];
}

const struct pcpu_metric_type_info *pcpu_metric_type_info(enum pcpu_metric_type type)
{
	const struct pcpu_metric_type_info *t = pcpu__type_info(type);

	if (!t)
		errno = EINVAL;
	return t;
}
