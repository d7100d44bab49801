/* Prints sizeof, and each field's offsetof and sizeof, of the public
 * structs the Python binding declares with ctypes (python/src/pcpu/_lib.py),
 * for test_layout.py: "STRUCT size N" and "STRUCT FIELD offset N size M"
 * lines, FIELD a dotted path into a union or a nested struct. Every field
 * of every struct the binding declares is listed: test_layout.py fails on a
 * field declared on one side only. */
#include <pcpu/pcpu.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(s) printf("%s size %zu\n", #s, sizeof(struct s))
#define OFF(s, f)                                                                    \
	printf("%s %s offset %zu size %zu\n", #s, #f, offsetof(struct s, f),         \
	       sizeof(((struct s *)0)->f))

int main(void)
{
	SIZE(pcpu_reader_options);
	OFF(pcpu_reader_options, dir);
	OFF(pcpu_reader_options, flags);
	OFF(pcpu_reader_options, owner);
	OFF(pcpu_reader_options, max_bytes);
	SIZE(pcpu_segment_info);
	OFF(pcpu_segment_info, name);
	OFF(pcpu_segment_info, file);
	OFF(pcpu_segment_info, pid);
	OFF(pcpu_segment_info, owner);
	OFF(pcpu_segment_info, error);
	OFF(pcpu_segment_info, state);
	OFF(pcpu_segment_info, nfamilies);
	OFF(pcpu_segment_info, nseries);
	OFF(pcpu_segment_info, created_ns);
	OFF(pcpu_segment_info, nslots);
	OFF(pcpu_segment_info, state_errno);
	OFF(pcpu_segment_info, flags);
	SIZE(pcpu_snapshot_series);
	OFF(pcpu_snapshot_series, label_values);
	OFF(pcpu_snapshot_series, value);
	OFF(pcpu_snapshot_series, value.counter);
	OFF(pcpu_snapshot_series, value.gauge);
	OFF(pcpu_snapshot_series, value.histogram);
	OFF(pcpu_snapshot_series, value.histogram.counts);
	OFF(pcpu_snapshot_series, value.histogram.sum);
	OFF(pcpu_snapshot_series, value.histogram.residue);
	OFF(pcpu_snapshot_series, value.fixed);
	OFF(pcpu_snapshot_series, value.fixed.whole);
	OFF(pcpu_snapshot_series, value.fixed.nanos);
	OFF(pcpu_snapshot_series, value.fixed.residue);
	SIZE(pcpu_snapshot_family);
	OFF(pcpu_snapshot_family, name);
	OFF(pcpu_snapshot_family, help);
	OFF(pcpu_snapshot_family, unit);
	OFF(pcpu_snapshot_family, type);
	OFF(pcpu_snapshot_family, scale_exp10);
	OFF(pcpu_snapshot_family, flags);
	OFF(pcpu_snapshot_family, nlabels);
	OFF(pcpu_snapshot_family, label_names);
	OFF(pcpu_snapshot_family, nbuckets);
	OFF(pcpu_snapshot_family, bucket_upper);
	OFF(pcpu_snapshot_family, nseries);
	OFF(pcpu_snapshot_family, series);
	OFF(pcpu_snapshot_family, export_buckets);
	OFF(pcpu_snapshot_family, nexport);
	OFF(pcpu_snapshot_family, native_schema);
	OFF(pcpu_snapshot_family, native_index);
	SIZE(pcpu_snapshot);
	OFF(pcpu_snapshot, nfamilies);
	OFF(pcpu_snapshot, families);
	SIZE(pcpu_reader_flows);
	OFF(pcpu_reader_flows, name);
	OFF(pcpu_reader_flows, help);
	OFF(pcpu_reader_flows, nflows);
	OFF(pcpu_reader_flows, ncounters);
	OFF(pcpu_reader_flows, counter_names);
	OFF(pcpu_reader_flows, pcpu__entry);
	OFF(pcpu_reader_flows, pcpu__seq);
	OFF(pcpu_reader_flows, pcpu__id);
	OFF(pcpu_reader_flows, pcpu__off);
	SIZE(pcpu_reader_snapshot);
	OFF(pcpu_reader_snapshot, snapshot);
	OFF(pcpu_reader_snapshot, snapshot.nfamilies);
	OFF(pcpu_reader_snapshot, snapshot.families);
	OFF(pcpu_reader_snapshot, generation);
	OFF(pcpu_reader_snapshot, changed);
	OFF(pcpu_reader_snapshot, stable);
	OFF(pcpu_reader_snapshot, incomplete);
	OFF(pcpu_reader_snapshot, state);
	OFF(pcpu_reader_snapshot, nslots);
	OFF(pcpu_reader_snapshot, nospace);
	SIZE(pcpu_metric_type_info);
	OFF(pcpu_metric_type_info, type);
	OFF(pcpu_metric_type_info, name);
	OFF(pcpu_metric_type_info, text_type);
	OFF(pcpu_metric_type_info, openmetrics_type);
	OFF(pcpu_metric_type_info, sample_suffix);
	OFF(pcpu_metric_type_info, suffixes);
	OFF(pcpu_metric_type_info, nsuffixes);
	OFF(pcpu_metric_type_info, bucket_suffix);
	OFF(pcpu_metric_type_info, sum_suffix);
	OFF(pcpu_metric_type_info, count_suffix);
	OFF(pcpu_metric_type_info, bucket_label);
	OFF(pcpu_metric_type_info, value);
	OFF(pcpu_metric_type_info, flags);
	OFF(pcpu_metric_type_info, prom);
	OFF(pcpu_metric_type_info, otlp);
	/* Constants the binding hard-codes. */
	printf("const PCPU_READER_OWNER %u\n", (unsigned)PCPU_READER_OWNER);
	printf("const PCPU_READER_ANY_OWNER %u\n", (unsigned)PCPU_READER_ANY_OWNER);
	printf("const PCPU_READER_ALLOW_STALE %u\n", (unsigned)PCPU_READER_ALLOW_STALE);
	printf("const PCPU_READER_PER_SLOT %u\n", (unsigned)PCPU_READER_PER_SLOT);
	printf("const PCPU_SNAPSHOT_SPARSE_BUCKETS %u\n", (unsigned)PCPU_SNAPSHOT_SPARSE_BUCKETS);
	printf("const PCPU_METRIC_COUNTER %d\n", PCPU_METRIC_COUNTER);
	printf("const PCPU_METRIC_GAUGE %d\n", PCPU_METRIC_GAUGE);
	printf("const PCPU_METRIC_HISTOGRAM %d\n", PCPU_METRIC_HISTOGRAM);
	printf("const PCPU_VALUE_UNSIGNED %d\n", PCPU_VALUE_UNSIGNED);
	printf("const PCPU_VALUE_SIGNED %d\n", PCPU_VALUE_SIGNED);
	printf("const PCPU_VALUE_BUCKETS %d\n", PCPU_VALUE_BUCKETS);
	printf("const PCPU_PROM_COUNTER %d\n", PCPU_PROM_COUNTER);
	printf("const PCPU_PROM_GAUGE %d\n", PCPU_PROM_GAUGE);
	printf("const PCPU_PROM_HISTOGRAM %d\n", PCPU_PROM_HISTOGRAM);
	printf("const PCPU_SEGMENT_LIVE %d\n", PCPU_SEGMENT_LIVE);
	printf("const PCPU_SEGMENT_CLOSED %d\n", PCPU_SEGMENT_CLOSED);
	printf("const PCPU_SEGMENT_GONE %d\n", PCPU_SEGMENT_GONE);
	printf("const PCPU_FORMAT_PROMETHEUS %d\n", PCPU_FORMAT_PROMETHEUS);
	printf("const PCPU_FORMAT_OPENMETRICS %d\n", PCPU_FORMAT_OPENMETRICS);
	printf("const PCPU_FORMAT_JSON %d\n", PCPU_FORMAT_JSON);
	printf("const PCPU_FORMAT_NUMBER_MAX %d\n", PCPU_FORMAT_NUMBER_MAX);
	return 0;
}
