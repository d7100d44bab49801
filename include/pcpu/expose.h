/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/expose.h
 * Snapshots of statistics as plain data, and the writers that turn them into
 * Prometheus text format 0.0.4, OpenMetrics 1.0 text, or JSON.
 *
 * A snapshot is a tree of plain C structs: families (name, help, unit, type,
 * label names, bucket bounds) holding series (label values and a value).
 * pcpu_registry_snapshot() (pcpu/stats.h) builds one from a registry, but
 * anyone may build one by hand -- a reader of another process's statistics,
 * a test, a fuzzer -- and hand it to the same writers. So the writers trust
 * nothing in it: every name, label and bucket layout is checked before the
 * first byte is written.
 *
 * What a writer guarantees: it produces the whole exposition in a buffer it
 * allocates, or an error and no output at all -- never a partial exposition.
 * Floating-point numbers are printed in their shortest form that reads back
 * as the same double (no loss of precision); integers are printed exactly.
 *
 * Values are integers. A family's `scale_exp10` says how to expose them: the
 * exposed value is value * 10^scale_exp10, so a latency recorded in
 * nanoseconds is exposed in seconds with scale_exp10 = -9 (the name then
 * ends in `_seconds`). Scaling divides or multiplies by an exact power of
 * ten, so the exposed double is the one nearest the true decimal value
 * (5000000 ns is exposed as 0.005, not 0.005000000000000001).
 */
#ifndef PCPU_EXPOSE_H
#define PCPU_EXPOSE_H

#include <stddef.h>
#include <stdint.h>
#include <pcpu/defs.h>

PCPU_BEGIN_DECLS

/** The kind of a metric family, as in the Prometheus data model. */
enum pcpu_metric_type {
	PCPU_METRIC_COUNTER = 1,   /**< only ever goes up (until a reset) */
	PCPU_METRIC_GAUGE = 2,     /**< goes up and down, may be set */
	PCPU_METRIC_HISTOGRAM = 3, /**< buckets of observations, sum, count */
};

/** Exposition formats. */
enum pcpu_format {
	PCPU_FORMAT_PROMETHEUS = 1,  /**< Prometheus text format 0.0.4 */
	PCPU_FORMAT_OPENMETRICS = 2, /**< OpenMetrics 1.0 text, ends in "# EOF" */
	PCPU_FORMAT_JSON = 3,        /**< JSON, schema in pcpu_snapshot_write() */
	/** Prometheus protobuf exposition: length-delimited
	 * io.prometheus.client.MetricFamily messages. Only where the library
	 * was built with protobuf-c (pcpu_format_supported() says);
	 * pcpu_snapshot_write() fails with ENOTSUP otherwise. */
	PCPU_FORMAT_PROTOBUF = 4,
};

/* Limits on what a family may hold. They keep one family's metadata small
 * and bounded, so that a directory entry of fixed size can describe it
 * (the shared statistics segment), and they bound a writer's work. */
#define PCPU_STATS_NAME_MAX 200         /**< metric and family names, bytes */
#define PCPU_STATS_LABEL_NAME_MAX 100   /**< label names, bytes */
#define PCPU_STATS_LABEL_VALUE_MAX 2048 /**< label values, bytes (UTF-8) */
#define PCPU_STATS_HELP_MAX 2048        /**< help text, bytes (UTF-8) */
#define PCPU_STATS_UNIT_MAX 64          /**< unit, bytes */
#define PCPU_STATS_LABELS_MAX 32        /**< labels per family */
#define PCPU_STATS_SCALE_MAX 22         /**< |scale_exp10|: 10^22 is exact */

/** Flags of a snapshot family. */
enum {
	/** Ignored (kept for source compatibility; segment format 2.2 stopped
	 * recording it). It
	 * wrote only the buckets that held observations, so a bucket filling
	 * mid-window appeared as a new series already holding a large
	 * cumulative count and broke rate() and histogram_quantile(). Bound
	 * the exposed buckets with `export_buckets` instead. */
	PCPU_SNAPSHOT_SPARSE_BUCKETS = 1u << 0,
	/** Histograms: the buckets are Prometheus native (exponential)
	 * buckets: bucket 0 is the zero bucket, bucket b >= 1 has native index
	 * native_index + b - 1 of schema native_schema; the last is +Inf and
	 * empty. The protobuf writer then writes them as a native histogram
	 * too. */
	PCPU_SNAPSHOT_NATIVE = 1u << 1,
	/** A gauge family that is an info metric (pcpu_registry_info()):
	 * its name ends in `_info`, it has no unit and scale_exp10 0, and
	 * every series is 1. OpenMetrics writes it as type `info`: `# TYPE x
	 * info` for family `x_info`, samples `x_info{...} 1`. Prometheus
	 * 0.0.4 (which has no info type), protobuf (as client_golang) and
	 * JSON write it as a gauge. */
	PCPU_SNAPSHOT_INFO = 1u << 2,
	/** A family with fractions (pcpu_registry_family_nanos(),
	 * pcpu_registry_family_ex(), pcpu/stats.h; pcpu/fraction.h). A
	 * counter or gauge series holds its whole units in `value.counter`
	 * or `value.gauge`, billionths of a unit in `value.fixed.nanos`
	 * beside them and what those cannot hold in `value.fixed.residue`,
	 * so the value is whole + nanos * 10^-9 + residue (nanos may be any
	 * int64: 2500000000 adds 2.5 units), as pcpu_fraction_value()
	 * computes it. The writers expose it as pcpu_snapshot_value() says.
	 * Code that ignores the flag reads the whole units. On a histogram
	 * family (segment format 2.8) the flag says its series were recorded
	 * with pcpu_histogram_observe(); its sums' residue is in
	 * `value.histogram.residue`, as any histogram's. */
	PCPU_SNAPSHOT_NANOS = 1u << 3,
	/** The library's mark: this family's structure (name, help, unit,
	 * labels, series' label values, buckets) passed every check of
	 * pcpu_snapshot_write() in the snapshot that holds it.
	 * pcpu_reader_snapshot() sets it on the families of a snapshot read
	 * from a directory it keeps between snapshots (the structure was
	 * checked once, when the directory was read; later snapshots bring
	 * new values only), and pcpu_registry_snapshot() on every family
	 * (checked at registration). pcpu_snapshot_write() and
	 * pcpu_snapshot_merge_add() then check only what changes with the
	 * values (histogram counts, info values) and what lies between
	 * families (two families that would write one sample), not each
	 * name and label value again: a scrape of an unchanged segment costs
	 * no validation per series (issue 51). The mark is ignored where
	 * families are compared. A program that changes a marked family's
	 * names, labels or series clears it; one that sets it on a family of
	 * its own vouches for that family, and an invalid one so marked is
	 * written as it is. */
	PCPU_SNAPSHOT_CHECKED = 1u << 4,
};

/** One series of a snapshot family: label values and a value. */
struct pcpu_snapshot_series {
	/** family->nlabels values, each NUL-terminated UTF-8 (may be ""). */
	const char *const *label_values;
	union {
		uint64_t counter; /**< PCPU_METRIC_COUNTER (modulo 2^64) */
		int64_t gauge;    /**< PCPU_METRIC_GAUGE */
		struct {
			/** family->nbuckets counts, per bucket (not cumulative). */
			const uint64_t *counts;
			/** sum of the observations (modulo 2^64), in units of
			 * 10^scale_exp10. */
			int64_t sum;
			/** What the integer sum could not hold (values out of
			 * its range, +-Inf, NaN: pcpu_histogram_observe()), in
			 * exposed units: the exposed sum is sum *
			 * 10^scale_exp10 + residue. 0 for most histograms. */
			double residue;
		} histogram;
		/** PCPU_SNAPSHOT_NANOS families: `whole` is `counter` (or
		 * `gauge`, as int64), `nanos` the billionths beside it,
		 * `residue` what neither can hold (pcpu/fraction.h). */
		struct {
			uint64_t whole;
			int64_t nanos;
			double residue;
		} fixed;
	} value;
};

/** One metric family of a snapshot. */
struct pcpu_snapshot_family {
	/** Family name, valid per the Prometheus rules. For counters, without
	 * the `_total` suffix the writers add. */
	const char *name;
	const char *help;          /**< UTF-8, may be NULL (no help) */
	const char *unit;          /**< NULL or "", or the name's last component */
	enum pcpu_metric_type type;
	int scale_exp10;           /**< exposed value = value * 10^scale_exp10 */
	unsigned flags;            /**< PCPU_SNAPSHOT_* */
	unsigned nlabels;          /**< number of label names */
	const char *const *label_names; /**< nlabels valid label names */
	/** Histograms: number of buckets, including the last (+Inf) one. */
	size_t nbuckets;
	/** Histograms: inclusive upper bound of buckets 0..nbuckets-2,
	 * strictly increasing (the last bucket has no bound: +Inf). */
	const int64_t *bucket_upper;
	size_t nseries;
	const struct pcpu_snapshot_series *series;
	/** Histograms: the buckets whose upper bound the writers expose as an
	 * `le`, as `nexport` strictly increasing indices below nbuckets - 1
	 * (the +Inf bucket is always exposed); the counts of the buckets in
	 * between are folded into the next exposed one, as a cumulative count
	 * does. NULL: every bucket. The same set is exposed for every series
	 * at every scrape, empty buckets included (a log-linear or
	 * exponential histogram's set comes from its layout's
	 * export_per_octave and export_min). */
	const uint32_t *export_buckets;
	size_t nexport;
	/** With PCPU_SNAPSHOT_NATIVE: the schema (-4..8) and the native index
	 * of bucket 1; the zero bucket holds values up to
	 * 2^((native_index - 1) * 2^-native_schema). */
	int native_schema;
	int32_t native_index;
};

/** A snapshot: a list of families. */
struct pcpu_snapshot {
	size_t nfamilies;
	const struct pcpu_snapshot_family *families;
};

/**
 * Writes snapshot `s` in format `fmt` into a new buffer.
 *
 * On success *out points to `*len` bytes of exposition followed by a NUL
 * (not counted in *len); release it with free(). Families and series are
 * written in the order of the snapshot (a registry snapshot lists families
 * by name and series in creation order, so its output is deterministic).
 *
 * Prometheus 0.0.4: `# HELP` (backslash and newline escaped), `# TYPE`, then
 * samples; counters are written as `<name>_total`. OpenMetrics 1.0: `# TYPE`,
 * `# UNIT` (when set), `# HELP`; counters as `<name>_total`; histograms as
 * `_bucket` with canonical `le` values ("0.005", "1.0", "+Inf"), `_count`
 * and `_sum` (both left out for a histogram with a negative bucket bound or
 * a negative sum, which OpenMetrics forbids); an info family
 * (PCPU_SNAPSHOT_INFO) `x_info` as `# TYPE x info` with samples
 * `x_info{...} 1`; ends with "# EOF". Label values
 * escape backslash, double quote and newline in both.
 * JSON: {"families":[{"name":..., "type":"counter"|"gauge"|"histogram",
 * "help":..., "unit":..., "metrics":[{"labels":{...}, "value":N} or
 * {"labels":{...}, "count":N, "sum":X, "buckets":[{"le":X, "count":N}, ...,
 * {"le":"+Inf", "count":N}]}]}]} with cumulative bucket counts.
 * Protobuf (where built with protobuf-c, see pcpu_format_supported()):
 * length-delimited io.prometheus.client.MetricFamily messages with the
 * text formats' values as doubles; counters named `<name>_total`; a
 * histogram's exported classic buckets with cumulative counts (+Inf left
 * out: its count is sample_count). The output holds NUL bytes: use *len.
 *
 * Errors (-1, errno, nothing allocated; pcpu_stats_error() says what is
 * wrong, naming the family): EINVAL for an invalid snapshot: a NULL
 * argument, an unknown format or type, an invalid metric or label name, a
 * reserved label name (`__` prefix; `le` in a histogram), a unit that is not
 * the last component of the name, help or label value that is not UTF-8 or
 * too long, two families or two series of one family that would write the
 * same sample (or, OpenMetrics, an info family `x_info` and a family `x`),
 * bucket bounds not strictly increasing (also once scaled to doubles),
 * bucket counts whose sum overflows, PCPU_SNAPSHOT_INFO on a family that is
 * not an info metric as that flag describes, PCPU_SNAPSHOT_NANOS on an
 * info family; ENOMEM.
 *
 * Thread-safe (reads `s` only); not async-signal-safe (allocates).
 * Cost: linear in the size of the output, plus a hash table of the
 * sample names and one of each family's label sets to detect duplicates
 * (of the families marked PCPU_SNAPSHOT_CHECKED, checked when they were
 * read: only their values and the sample names).
 */
PCPU_API int pcpu_snapshot_write(const struct pcpu_snapshot *s, enum pcpu_format fmt,
				 char **out, size_t *len);

/**
 * Estimates quantile `q` (0 <= q <= 1) of histogram family `f` from
 * `counts` (f->nbuckets per-bucket counts: a series' value.histogram.counts,
 * or the difference of two snapshots' counts for the quantile of what was
 * recorded in between), in exposed units (scaled by 10^scale_exp10).
 * Every bucket counts, also those a writer does not expose (export_buckets).
 * Rule -- Prometheus' histogram_quantile() over the same buckets: rank =
 * q * count; the bucket is the first non-empty one whose cumulative count
 * reaches the rank; the estimate interpolates linearly from the previous
 * bucket's bound (0 for a first bucket with a positive bound) to this
 * bucket's bound; the +Inf bucket gives the largest finite bound.
 * Precision: within the width of the bucket that holds the rank-th value
 * (2^-p relative for a log-linear histogram of precision p); PromQL over
 * the exposed (coarser) buckets agrees within the exposed bucket's width.
 * Returns NaN with errno EINVAL: NULL, not a histogram family, q outside
 * [0, 1], no observations. Thread-safe; async-signal-safe. Cost: linear
 * in the buckets.
 */
PCPU_API double pcpu_snapshot_quantile(const struct pcpu_snapshot_family *f, const uint64_t *counts,
				       double q);

/**
 * The buckets the writers expose for one series of histogram family `f`
 * (pcpu_snapshot_write()): every bucket when f->export_buckets is NULL,
 * else those it lists, and the +Inf bucket always, in order. For the k-th
 * exposed bucket (k < cap) writes its index among the f->nbuckets buckets
 * to index[k] and, from `counts` (the series' f->nbuckets per-bucket
 * counts, value.histogram.counts), the cumulative count of it and every
 * bucket below -- exposed or not -- to cumulative[k] (modulo 2^64, as the
 * writers sum). `index` or `cumulative` may be NULL; `counts` may be NULL
 * when `cumulative` is. The count of the last (+Inf) entry is the series'
 * count. Returns how many buckets are exposed (at least 1), also when that
 * is more than `cap` (f->nbuckets entries are always enough); 0 with errno
 * EINVAL for a NULL or non-histogram family, or `cumulative` without
 * `counts`. Thread-safe (reads its arguments only); async-signal-safe.
 * Cost: linear in f->nbuckets.
 */
PCPU_API size_t pcpu_snapshot_histogram_buckets(const struct pcpu_snapshot_family *f,
						const uint64_t *counts, size_t *index,
						uint64_t *cumulative, size_t cap);

/**
 * The `le` label value the writers give bucket `b` of histogram family `f`:
 * "+Inf" for the last bucket, else its upper bound scaled by
 * 10^scale_exp10 as pcpu_format_double() writes it with
 * PCPU_FORMAT_NUMBER_CANONICAL ("0.005", "1.0", "1e+06"). Writes a
 * NUL-terminated string into out[0..cap) and returns its length, or -1
 * with errno EINVAL (NULL `f` or `out`, not a histogram, b >= f->nbuckets,
 * scale out of range) or ERANGE (cap too small; out is then "" if cap >
 * 0). PCPU_FORMAT_NUMBER_MAX bytes are always enough. Thread-safe; not
 * async-signal-safe (snprintf, strtod). Cost: pcpu_format_double()'s.
 */
PCPU_API int pcpu_snapshot_bucket_le(const struct pcpu_snapshot_family *f, size_t b, char *out,
				     size_t cap);

/**
 * The HTTP Content-Type of a format: "text/plain; version=0.0.4;
 * charset=utf-8", "application/openmetrics-text; version=1.0.0;
 * charset=utf-8", "application/json" or "application/vnd.google.protobuf;
 * proto=io.prometheus.client.MetricFamily; encoding=delimited". NULL for an
 * unknown format. Thread-safe; async-signal-safe. Cost: constant (a static
 * string).
 */
PCPU_API const char *pcpu_format_content_type(enum pcpu_format fmt);

/**
 * 1 if pcpu_snapshot_write() can write format `fmt` in this build of the
 * library, 0 if not (PCPU_FORMAT_PROTOBUF without protobuf-c, an unknown
 * value). Thread-safe; async-signal-safe. Cost: constant.
 */
PCPU_API int pcpu_format_supported(enum pcpu_format fmt);

/** Room the number formatters need: the longest number they write
 * ("-2.2250738585072014e-308"), NUL included. */
#define PCPU_FORMAT_NUMBER_MAX 40

/** pcpu_format_double() flag: an integral value without an exponent gets
 * ".0" ("1.0"), the canonical form OpenMetrics wants in `le` labels. */
#define PCPU_FORMAT_NUMBER_CANONICAL 1u

/**
 * Writes v as the exposition writers do: the shortest decimal that reads
 * back as the same double, laid out as Go's strconv.FormatFloat(v, 'g', -1,
 * 64) -- what Prometheus' own clients print -- ("0.005", "1", "1e+06",
 * "1.234567e+06", "1.5e-05"; "NaN", "+Inf", "-Inf"). Independent of the
 * locale: the decimal point is always '.', whatever LC_NUMERIC says.
 * `flags`: 0 or PCPU_FORMAT_NUMBER_CANONICAL. Writes a NUL-terminated
 * string into out[0..cap) and returns its length, or -1 with errno EINVAL
 * (NULL out, unknown flag) or ERANGE (cap too small; out is then "" if cap
 * > 0). PCPU_FORMAT_NUMBER_MAX bytes are always enough. Thread-safe; not
 * async-signal-safe (snprintf, strtod). Cost: about five snprintf/strtod
 * round trips.
 */
PCPU_API int pcpu_format_double(char *out, size_t cap, double v, unsigned flags);

/**
 * Writes an integer value as the writers expose it with scale_exp10 (see
 * pcpu_family_desc): the exact integer when scale_exp10 is 0, otherwise
 * pcpu_format_double() of pcpu_stats_scale(v, scale_exp10). Counter values
 * (modulo 2^64) go through pcpu_format_u64(), gauges and histogram sums
 * through pcpu_format_i64(). Returns the length, or -1 with errno EINVAL
 * (NULL out, |scale_exp10| > PCPU_STATS_SCALE_MAX) or ERANGE (as
 * pcpu_format_double()). Thread-safe; async-signal-safe when scale_exp10
 * is 0. Cost: a division per digit, or pcpu_format_double()'s.
 */
PCPU_API int pcpu_format_i64(char *out, size_t cap, int64_t v, int scale_exp10);
/** pcpu_format_i64() for an unsigned value (a counter's); same errors,
 * thread safety and cost. */
PCPU_API int pcpu_format_u64(char *out, size_t cap, uint64_t v, int scale_exp10);

/**
 * The value the writers expose for a counter or gauge series `s` of family
 * `f`, as a double: the integer value times 10^scale_exp10 as
 * pcpu_stats_scale() computes it, plus, in a PCPU_SNAPSHOT_NANOS family,
 * the billionths (the whole units and nanos / 10^9 added as integers
 * first, the rest of nanos then as a fraction, so that 0.1 + 0.2 reads
 * 0.3) and then the residue (the residue alone where the rest is 0:
 * pcpu_fraction_value() in pcpu/fraction.h). NaN (errno EINVAL) for NULL
 * arguments or a histogram family. Thread-safe; async-signal-safe.
 * Cost: constant.
 */
PCPU_API double pcpu_snapshot_value(const struct pcpu_snapshot_family *f,
				    const struct pcpu_snapshot_series *s);

/**
 * The sum the writers expose for a histogram series `s` of family `f`, as
 * a double: value.histogram.sum times 10^scale_exp10 (pcpu_stats_scale())
 * plus value.histogram.residue. NaN (errno EINVAL) for NULL arguments or a
 * family that is not a histogram. Thread-safe; async-signal-safe. Cost:
 * constant. Since PCPU_0.2.
 */
PCPU_API double pcpu_snapshot_sum(const struct pcpu_snapshot_family *f,
				  const struct pcpu_snapshot_series *s);

/**
 * Writes the value of counter or gauge series `s` of family `f` as the
 * writers expose it: pcpu_format_u64() (counters) or pcpu_format_i64()
 * (gauges) of the integer value -- exact -- unless a PCPU_SNAPSHOT_NANOS
 * family's billionths leave a fraction or its residue is not 0, then
 * pcpu_format_double() of pcpu_snapshot_value() ("NaN", "+Inf" and "-Inf"
 * included). Returns the length, or -1 with errno EINVAL (NULL
 * arguments, a histogram family, a scale out of range) or ERANGE (as
 * pcpu_format_double()). PCPU_FORMAT_NUMBER_MAX bytes are always enough.
 * Thread-safe; not async-signal-safe where a fraction or scale is printed
 * (snprintf). Cost: pcpu_format_double()'s at most.
 */
PCPU_API int pcpu_snapshot_format_value(char *out, size_t cap, const struct pcpu_snapshot_family *f,
					const struct pcpu_snapshot_series *s);

/**
 * v * 10^scale_exp10 as the writers compute it: one correctly rounded
 * multiplication or division by an exact power of ten, so an integer v
 * with |v| <= 2^53 gives the double nearest the true decimal value
 * (5000000 with -9 gives 0.005). |scale_exp10| is clamped to
 * PCPU_STATS_SCALE_MAX. Thread-safe; async-signal-safe. Cost: constant (one
 * multiplication or division).
 */
PCPU_API double pcpu_stats_scale(double v, int scale_exp10);

/**
 * The sample-name suffixes a family of `type` owns (the OpenMetrics clash
 * set: "" first, then e.g. "_total" and "_created" for a counter; "_bucket",
 * "_count", "_sum", "_created" for a histogram). Two families, or a family
 * and another's sample, must not share a name built from these: a registry
 * refuses the second family (EEXIST), and a strict parser refuses such an
 * exposition. Sets *suffixes (if not NULL) to static strings and returns
 * their number; 0 and NULL for an unknown type. Thread-safe;
 * async-signal-safe. Cost: constant.
 */
PCPU_API size_t pcpu_stats_type_suffixes(enum pcpu_metric_type type, const char *const **suffixes);

/**
 * The suffix the text writers append to a family's name to name its value
 * sample: "_total" for a counter, "" for a gauge and a histogram (whose
 * samples are `_bucket`, `_count` and `_sum`); NULL for an unknown type.
 * Thread-safe; async-signal-safe. Cost: constant.
 */
PCPU_API const char *pcpu_stats_sample_suffix(enum pcpu_metric_type type);

/** "counter", "gauge" or "histogram" (the `# TYPE` word); NULL for an
 * unknown type. Thread-safe; async-signal-safe. Cost: constant. */
PCPU_API const char *pcpu_metric_type_name(enum pcpu_metric_type type);

/** How a series of a type holds its value in struct pcpu_snapshot_series. */
enum pcpu_value_kind {
	/** value.counter: a count, unsigned, modulo 2^64 (with
	 * PCPU_SNAPSHOT_NANOS: value.fixed, whole units and billionths). */
	PCPU_VALUE_UNSIGNED = 1,
	/** value.gauge: a level, signed (with PCPU_SNAPSHOT_NANOS:
	 * value.fixed, whole units as int64 and billionths). */
	PCPU_VALUE_SIGNED = 2,
	/** value.histogram: a count per bucket and the sum. */
	PCPU_VALUE_BUCKETS = 3,
};

/** What a type is in the Prometheus data model's binary protocols: the
 * protobuf exposition's io.prometheus.client.MetricType and remote write's
 * MetricMetadata.MetricType (where an info family, PCPU_SNAPSHOT_INFO, is
 * INFO). Plain values: each encoder maps them to its generated enum. */
enum pcpu_prom_kind {
	PCPU_PROM_COUNTER = 1,
	PCPU_PROM_GAUGE = 2,
	PCPU_PROM_HISTOGRAM = 3,
};

/** The data an OTLP Metric holds for a type (its `data` oneof); a
 * PCPU_SNAPSHOT_NATIVE histogram family is an ExponentialHistogram. */
enum pcpu_otlp_kind {
	PCPU_OTLP_SUM = 1, /**< Sum; is_monotonic from PCPU_TYPE_MONOTONIC */
	PCPU_OTLP_GAUGE = 2,
	PCPU_OTLP_HISTOGRAM = 3,
};

/** Flags of a metric type (pcpu_metric_type_info.flags). */
enum {
	/** Only goes up until a reset: Prometheus' rate() applies, OTLP
	 * sends it as a monotonic Sum with a start time, and delta
	 * temporality sends its increase (a non-monotonic type stays a
	 * level). */
	PCPU_TYPE_MONOTONIC = 1u << 0,
	/** Its families may carry PCPU_SNAPSHOT_NANOS (fractions): counters
	 * and gauges, and since segment format 2.8 histograms. */
	PCPU_TYPE_FRACTIONS = 1u << 1,
	/** Its families may be info metrics (PCPU_SNAPSHOT_INFO). */
	PCPU_TYPE_INFO = 1u << 2,
};

/**
 * Everything an encoder needs to know about a metric type: the one
 * description of each type that the writers (Prometheus 0.0.4, OpenMetrics,
 * JSON, protobuf), pcpustat and its push agent (remote write, OTLP) read
 * instead of switching on the type themselves. A new type is a new entry.
 * Returned by pcpu_metric_type_info(); static, never freed. Fields may be
 * appended in later versions: use it through the pointer, never copy it.
 */
struct pcpu_metric_type_info {
	enum pcpu_metric_type type;
	/** pcpu_metric_type_name(): "counter", "gauge", "histogram"; JSON's
	 * "type". */
	const char *name;
	/** The `# TYPE` word of Prometheus text format 0.0.4. */
	const char *text_type;
	/** The `# TYPE` word of OpenMetrics 1.0 (an info family writes
	 * "info" instead). */
	const char *openmetrics_type;
	/** pcpu_stats_sample_suffix(): appended to a family's name to name
	 * its value sample, and the family itself in Prometheus 0.0.4's
	 * `# HELP` and `# TYPE`, the protobuf exposition and remote write's
	 * metadata ("_total" for a counter, "" otherwise). */
	const char *sample_suffix;
	/** pcpu_stats_type_suffixes(): the names the family owns (the
	 * OpenMetrics clash set), nsuffixes of them, "" first. */
	const char *const *suffixes;
	size_t nsuffixes;
	/** Buckets only (PCPU_VALUE_BUCKETS; NULL otherwise): the samples
	 * "_bucket" (labelled with bucket_label, "le"), "_sum", "_count". */
	const char *bucket_suffix;
	const char *sum_suffix;
	const char *count_suffix;
	/** The label that names a bucket's upper bound, reserved in the
	 * type's families ("le"); NULL without buckets. */
	const char *bucket_label;
	enum pcpu_value_kind value; /**< where a series' value is */
	unsigned flags;             /**< PCPU_TYPE_* */
	enum pcpu_prom_kind prom;   /**< protobuf exposition, remote write */
	enum pcpu_otlp_kind otlp;   /**< OTLP */
};

/**
 * The description of metric type `type` (struct pcpu_metric_type_info), or
 * NULL with errno EINVAL for a value that is no type. The pointer is to
 * static data: valid for the life of the process. Thread-safe;
 * async-signal-safe. Cost: constant (an array index).
 */
PCPU_API const struct pcpu_metric_type_info *pcpu_metric_type_info(enum pcpu_metric_type type);

/**
 * The native (exponential) form of one series `s` of a histogram family
 * `f` with PCPU_SNAPSHOT_NATIVE, as Prometheus' native histograms and
 * OTLP's exponential ones carry it: the zero bucket (bucket 0), and one
 * span over the positive buckets from the first non-empty one to the last
 * non-empty one (the +Inf bucket is always empty). The one computation of
 * it, which the protobuf exposition and pcpustat push's remote write and
 * OTLP encoders share.
 */
struct pcpu_snapshot_native {
	int schema;            /**< f->native_schema (OTLP's scale) */
	double zero_threshold; /**< the zero bucket's upper bound, base^(native_index - 1) */
	uint64_t zero_count;   /**< observations in the zero bucket */
	uint64_t count;        /**< all observations (modulo 2^64) */
	/** The span's first bucket: f's bucket `first`, native index
	 * `offset` (Prometheus' convention, (base^(i-1), base^i]; OTLP's index
	 * of the same bucket is offset - 1). Both 0 when length is 0. */
	size_t first;
	int32_t offset;
	/** Buckets in the span, f's first..first+length-1; 0: no observation
	 * above the zero bucket. */
	uint32_t length;
};

/**
 * Fills *out with the native form of series `s` of family `f` (struct
 * pcpu_snapshot_native) and, when `deltas` is not NULL, writes the first
 * min(length, cap) counts of the span as deltas -- each bucket's count
 * minus the previous one's, the first minus 0 -- as Prometheus' native
 * histograms encode them (the span's plain counts are
 * s->value.histogram.counts[first ..]). f->nbuckets entries are always
 * enough. Returns 0, or -1 with errno EINVAL: NULL `f`, `s` or `out`, a
 * family that is not a histogram with PCPU_SNAPSHOT_NATIVE and at least 2
 * buckets, a series without counts. The family is not otherwise validated
 * (pcpu_snapshot_write() does that). Thread-safe (reads its arguments
 * only); async-signal-safe. Cost: linear in f->nbuckets.
 */
PCPU_API int pcpu_snapshot_native(const struct pcpu_snapshot_family *f,
				  const struct pcpu_snapshot_series *s,
				  struct pcpu_snapshot_native *out, int64_t *deltas, size_t cap);

/**
 * The format to answer an HTTP request with, from its Accept header (NULL:
 * none sent), as Prometheus clients negotiate: the media range with the
 * highest q among
 *   application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;
 *     encoding=delimited         -> PCPU_FORMAT_PROTOBUF, only where
 *                                   pcpu_format_supported() says 1
 *   application/openmetrics-text (version 1.0.0, 0.0.1 or none)
 *                                -> PCPU_FORMAT_OPENMETRICS
 *   text/plain (version 0.0.4 or none), text/<star>, <star>/<star>
 *                                -> PCPU_FORMAT_PROMETHEUS
 * Ties go to protobuf, then OpenMetrics. q=0, unknown versions and
 * malformed elements count as not acceptable; when nothing is acceptable
 * the answer is PCPU_FORMAT_PROMETHEUS (what Prometheus' own clients do,
 * rather than 406). Never PCPU_FORMAT_JSON. Never fails.
 * Thread-safe; async-signal-safe (no allocation); cost: linear in the
 * header's length.
 */
PCPU_API enum pcpu_format pcpu_format_negotiate(const char *accept);

/**
 * pcpu_format_negotiate() among the formats a caller writes: `formats` is
 * a set of (1u << PCPU_FORMAT_...) bits (PCPU_FORMAT_PROMETHEUS is always
 * in it, whatever is passed: the answer when nothing else is acceptable;
 * PCPU_FORMAT_PROTOBUF counts only where pcpu_format_supported() says 1;
 * JSON never). For a program that writes the text format alone, or text
 * and OpenMetrics, say: the client's preference among those, never a
 * format it cannot write. pcpu_format_negotiate(a) is
 * pcpu_format_negotiate_among(a, all three). Never fails. Thread-safe;
 * async-signal-safe; cost: linear in the header's length.
 */
PCPU_API enum pcpu_format pcpu_format_negotiate_among(const char *accept, unsigned formats);

/**
 * 1 if an HTTP Accept-Encoding header (NULL: none sent) accepts gzip
 * ("gzip" or "x-gzip" with q > 0, or "*" with q > 0 and no gzip entry),
 * else 0. Prometheus asks for gzip on every scrape. Never fails.
 * Thread-safe; async-signal-safe; cost: linear in the header's length.
 */
PCPU_API int pcpu_format_gzip_acceptable(const char *accept_encoding);

/** Several snapshots merged into one exposition (pcpu_snapshot_merge_new()). */
typedef struct pcpu_snapshot_merge pcpu_snapshot_merge_t;

/**
 * A new, empty merge: what an exporter of several processes' statistics
 * builds its exposition with. Returns NULL with errno ENOMEM.
 * Thread-safe; a merge itself is used by one thread at a time. Not
 * async-signal-safe (allocates). Cost: one small allocation.
 */
PCPU_API pcpu_snapshot_merge_t *pcpu_snapshot_merge_new(void);

/**
 * Adds every family of snapshot `s` to merge `m`, each series given the
 * `nlabels` extra labels `label_names[i]="label_values[i]"` after its own
 * (e.g. the process it came from). All or nothing: on failure `m` is as
 * before, so one bad input never spoils the others.
 *
 * A family whose name is already merged must have the same type, help
 * (an absent help is not an empty one: one writes no HELP line, the
 * other an empty one), unit, scale, flags and bucket bounds, with the
 * same buckets exposed (export_buckets, a native histogram's schema and
 * offset), and the same label names: its series are appended. Or other
 * label names, not the same set in another order: another label set of
 * the metric (PCPU_FAMILY_LABELSET), merged beside it. A new family must not write a sample name another family
 * writes (`foo_total` of counter foo against gauge foo_total). `s` must be
 * valid on its own once labelled (pcpu_snapshot_write()'s checks), and the
 * extra labels must make its series distinct from those already merged
 * (the caller's job: e.g. a pid label; pcpu_snapshot_write() of the result
 * fails on duplicates).
 *
 * `s` and the strings and arrays it points to, and the extra names and
 * values, are referenced, not copied: they must outlive `m`.
 *
 * Errors (-1, errno, pcpu_stats_error() says which family and why): EINVAL
 * for a NULL argument, an invalid extra label, a family that already has
 * one of the extra label names, a snapshot invalid once labelled, a
 * conflict with a family merged before; ENOMEM.
 * Not thread-safe on one merge: one thread at a time per `m` (distinct
 * merges are independent). Not async-signal-safe (allocates).
 * Cost: linear in the size of `s` (families found by a hash of their
 * sample names; `s` is validated once).
 */
PCPU_API int pcpu_snapshot_merge_add(pcpu_snapshot_merge_t *m, const struct pcpu_snapshot *s,
				     unsigned nlabels, const char *const *label_names,
				     const char *const *label_values);

/**
 * The merged snapshot: families sorted by name, series in the order they
 * were added. Valid until the next pcpu_snapshot_merge_add() or
 * pcpu_snapshot_merge_free() of `m`. Returns NULL with errno ENOMEM (or
 * EINVAL for a NULL `m`). Not thread-safe on one merge (as
 * pcpu_snapshot_merge_add()); not async-signal-safe. Cost: sorting the
 * family names.
 */
PCPU_API const struct pcpu_snapshot *pcpu_snapshot_merge_result(pcpu_snapshot_merge_t *m);

/**
 * Takes the names of the families of `s` (which have no series: EINVAL
 * otherwise), as pcpu_snapshot_merge_add() takes them -- a later input's
 * family of one of those names must have the same metadata, and no family
 * may write one of their sample names -- while leaving each out of the
 * result until pcpu_snapshot_merge_add() gives it series. For an exporter
 * that adds families of its own after the inputs (a per-input "up"
 * series, known only once the inputs are merged) and must refuse inputs
 * that would clash with them. Errors and cost as
 * pcpu_snapshot_merge_add(). Not thread-safe on one merge; not
 * async-signal-safe. Since PCPU_0.2.
 */
PCPU_API int pcpu_snapshot_merge_reserve(pcpu_snapshot_merge_t *m, const struct pcpu_snapshot *s);

/**
 * Writes the merged snapshot (pcpu_snapshot_merge_result()) in `fmt`, as
 * pcpu_snapshot_write() would, without checking again what was checked
 * when each input was added: only series of one family given by several
 * inputs are checked for equal label sets (EINVAL: the extra labels did
 * not make them distinct). Same output, same errors (EINVAL, ENOMEM,
 * ENOTSUP) and ownership of *out as pcpu_snapshot_write(); about half its
 * cost for a merge of one input. Not thread-safe on one merge; not
 * async-signal-safe. Cost: linear in the size of the merge. Since PCPU_0.2.
 */
PCPU_API int pcpu_snapshot_merge_write(pcpu_snapshot_merge_t *m, enum pcpu_format fmt, char **out,
				       size_t *len);

/** Frees a merge (not the snapshots added to it); NULL is a no-op. Not
 * thread-safe on one merge: no other thread may use `m`. Not
 * async-signal-safe. Cost: linear in the families merged (their arrays). */
PCPU_API void pcpu_snapshot_merge_free(pcpu_snapshot_merge_t *m);

/**
 * Checks a metric (family) name: `[a-zA-Z_:][a-zA-Z0-9_:]*`, 1 to
 * PCPU_STATS_NAME_MAX bytes. Returns 0, or -1 with errno EINVAL and a
 * message for pcpu_stats_error() saying what is wrong (which character,
 * where). Thread-safe; async-signal-safe; cost: linear in the length.
 */
PCPU_API int pcpu_stats_check_metric_name(const char *name);

/**
 * Checks a label name: `[a-zA-Z_][a-zA-Z0-9_]*`, 1 to
 * PCPU_STATS_LABEL_NAME_MAX bytes, not starting with `__` (reserved for
 * Prometheus' internal use). Returns 0, or -1 with errno EINVAL and a
 * message. Thread-safe; async-signal-safe. Cost: linear in the length.
 */
PCPU_API int pcpu_stats_check_label_name(const char *name);

/**
 * Checks a label value: well-formed UTF-8 (no overlong forms, surrogates or
 * code points past U+10FFFF), at most PCPU_STATS_LABEL_VALUE_MAX bytes. Any
 * character is allowed, quotes, backslashes and newlines included: the
 * writers escape them. Returns 0, or -1 with errno EINVAL and a message
 * giving the byte offset of the first bad byte. Thread-safe;
 * async-signal-safe. Cost: linear in the length.
 */
PCPU_API int pcpu_stats_check_label_value(const char *value);

/**
 * The message describing the last error a pcpu statistics function reported
 * in the calling thread (a validation failure, a conflicting registration),
 * e.g. `metric name "2xx": character '2' at offset 0 not allowed (must start
 * with a letter, '_' or ':')`. Never NULL; "" if none yet. The string stays
 * valid until the thread's next statistics call. Thread-safe (per thread);
 * async-signal-safe. Cost: constant (a thread-local read).
 */
PCPU_API const char *pcpu_stats_error(void);

PCPU_END_DECLS

#endif /* PCPU_EXPOSE_H */
