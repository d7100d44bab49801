/* SPDX-License-Identifier: MIT */
/*
 * OTLP/HTTP: a merged snapshot as one ExportMetricsServiceRequest
 * (proto/otlp_metrics.proto), POSTed to /v1/metrics as
 * application/x-protobuf (push_http.c).
 *
 * One resource (its attributes: --label, --job as service.name, --instance
 * as service.instance.id), one scope (pcpustat and its version), one Metric
 * per family, every data point attributed with the series' labels
 * (pcpu_segment and pcpu_pid among them; empty values left out):
 *
 *   counter      Sum, monotonic, cumulative; named without `_total` (an
 *                OTLP-to-Prometheus translation adds it back)
 *   gauge        Gauge (pcpu_segment_up and pcpu_segments_omitted too)
 *   histogram    explicit and log-linear: Histogram, cumulative, with the
 *                buckets the text exposition exposes (explicit_bounds its
 *                `le` values but +Inf, bucket_counts per bucket);
 *                exponential (PCPU_SNAPSHOT_NATIVE): ExponentialHistogram
 *
 * The exponential scheme is OTLP's: pcpu's schema s is OTLP's scale s (base
 * 2^(2^-s) in both), but the index conventions differ by one. pcpu (as
 * Prometheus) puts (base^(i-1), base^i] in bucket i, OTLP puts (base^i,
 * base^(i+1)] in bucket i: the same range is OTLP index i - 1. So the
 * positive buckets' offset is (native index of the first bucket sent) - 1,
 * and zero_threshold is base^(native_index - 1), the zero bucket's bound,
 * as in the remote-write and protobuf expositions.
 *
 * Values are integers scaled by 10^scale_exp10: a counter or gauge of scale
 * 0 goes as as_int (a counter above INT64_MAX as as_double), a scaled one
 * as as_double; sums as doubles. Start time (cumulative points of every
 * Sum, monotonic or not, and Histogram): the
 * segment's publication time, from its reader however it was named
 * (pcpu_reader_created_ns()), so that an agent's restart does not look
 * like a reset; the agent's start only for series without their segment's
 * labels. A counter reset by the application
 * (pcpu_counter_fetch_and_zero) keeps its start time: the agent keeps no
 * per-series history, and receivers read the decrease as a reset, as
 * Prometheus does.
 *
 * Delta temporality (e->delta, `--temporality delta`): counters and
 * histograms (Sum, Histogram, ExponentialHistogram) are sent as
 * AGGREGATION_TEMPORALITY_DELTA, each point the increase since the last
 * acknowledged one, starting at that point's time (push_delta.c keeps the
 * baseline); gauges stay gauges. A family whose every point is skipped
 * (the agent's first collection) is left out of the request.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_metrics.pb-c.h"
#include "push.h"

typedef Pcpustat__Otlp__KeyValue KeyValue;
typedef Pcpustat__Otlp__AnyValue AnyValue;
typedef Pcpustat__Otlp__Metric Metric;
typedef Pcpustat__Otlp__NumberDataPoint NumberDataPoint;
typedef Pcpustat__Otlp__HistogramDataPoint HistogramDataPoint;
typedef Pcpustat__Otlp__ExponentialHistogramDataPoint ExpoDataPoint;
typedef Pcpustat__Otlp__ExponentialHistogramDataPoint__Buckets ExpoBuckets;

const char *otlp_unit(const char *unit)
{
	static const char *const map[][2] = {
		{ "seconds", "s" }, { "milliseconds", "ms" }, { "microseconds", "us" },
		{ "nanoseconds", "ns" }, { "bytes", "By" }, { "ratio", "1" },
		{ "celsius", "Cel" }, { "hertz", "Hz" }, { "volts", "V" },
		{ "amperes", "A" }, { "joules", "J" }, { "grams", "g" },
		{ "meters", "m" },
	};
	size_t i;

	if (!unit)
		return "";
	for (i = 0; i < sizeof map / sizeof map[0]; i++)
		if (strcmp(unit, map[i][0]) == 0)
			return map[i][1];
	return unit;
}

/* One push's encoding state. */
struct otlp {
	const struct push_encode *e;
	struct arena *a;
	/* the start-time cache: the last segment looked up */
	const char *seg, *pid;
	uint64_t start;
	/* label k of the last series, packed: pack_kv() */
	struct kept {
		const char *value;
		uint8_t *buf;
		size_t len, cap;
	} kept[PCPU_STATS_LABELS_MAX];
};

static KeyValue *new_kv(struct arena *a, const char *key, const char *value)
{
	KeyValue *kv = arena_alloc(a, sizeof *kv);
	AnyValue *v = arena_alloc(a, sizeof *v);

	if (!kv || !v)
		return NULL;
	pcpustat__otlp__any_value__init(v);
	v->value_case = PCPUSTAT__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
	v->string_value = (char *)value;
	pcpustat__otlp__key_value__init(kv);
	kv->key = (char *)key;
	kv->value = v;
	return kv;
}

/* Label k of the series as a KeyValue packed by protobuf-c, its length
 * first, in o->kept[k] -- kept from the previous series while the value is
 * the same string (the merge's pcpu_segment and pcpu_pid values are one
 * string per segment); len 0 for an empty value (left out). 0, or -1. */
static int pack_kv(struct otlp *o, unsigned k, const char *name, const char *value)
{
	struct kept *c = &o->kept[k];
	KeyValue kv = PCPUSTAT__OTLP__KEY_VALUE__INIT;
	AnyValue v = PCPUSTAT__OTLP__ANY_VALUE__INIT;
	size_t n, need;
	uint64_t x;

	if (value == c->value)
		return 0;
	c->value = NULL;
	c->len = 0;
	if (*value) {
		need = strlen(name) + strlen(value) + 3 * 11;
		if (need > c->cap) {
			uint8_t *p = realloc(c->buf, need);

			if (!p)
				return -1;
			c->buf = p;
			c->cap = need;
		}
		v.value_case = PCPUSTAT__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
		v.string_value = (char *)value;
		kv.key = (char *)name;
		kv.value = &v;
		n = pcpustat__otlp__key_value__get_packed_size(&kv);
		for (x = n; x > 0x7f; x >>= 7)
			c->buf[c->len++] = (uint8_t)(x | 0x80);
		c->buf[c->len++] = (uint8_t)x;
		c->len += pcpustat__otlp__key_value__pack(&kv, c->buf + c->len);
	}
	c->value = value;
	return 0;
}

/*
 * A series' labels as the data point's attributes (`repeated KeyValue
 * attributes = tag`; empty values left out). Each KeyValue is packed by
 * protobuf-c once, into one blob the data point carries as a protobuf-c
 * unknown field of that tag, which protobuf_c_message_pack() writes after
 * the tag as it is: the first KeyValue's length and bytes, then each next
 * one behind its own tag byte. As KeyValue messages in the tree, every
 * attribute of 10^5 points was sized once per level above it (point,
 * metric, scope, resource, request) and packed once. 0, or -1 (ENOMEM).
 */
static int attributes(struct otlp *o, const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
		      ProtobufCMessage *point, unsigned tag)
{
	ProtobufCMessageUnknownField *uf;
	size_t need = 0, at = 0;
	uint8_t *blob;
	unsigned k;

	for (k = 0; k < f->nlabels; k++)
		if (pack_kv(o, k, f->label_names[k], se->label_values[k]) < 0)
			return -1;
		else
			need += 1 + o->kept[k].len;
	if (!need)
		return 0;
	if (!(blob = arena_alloc(o->a, need)) || !(uf = arena_alloc(o->a, sizeof *uf)))
		return -1;
	for (k = 0; k < f->nlabels; k++) {
		if (!o->kept[k].len)
			continue;
		if (at)
			blob[at++] = (uint8_t)(tag << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
		memcpy(blob + at, o->kept[k].buf, o->kept[k].len);
		at += o->kept[k].len;
	}
	if (!at)
		return 0;
	uf->tag = tag;
	uf->wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
	uf->len = at;
	uf->data = blob;
	point->n_unknown_fields = 1;
	point->unknown_fields = uf;
	return 0;
}

/* The start time of a series' cumulative values: its segment's
 * publication time (pcpu_segment, pcpu_pid: the merge's last two labels),
 * else the agent's start. */
static uint64_t start_of(struct otlp *o, const struct pcpu_snapshot_family *f,
			 const struct pcpu_snapshot_series *se)
{
	const char *seg, *pid;
	uint64_t t;

	if (f->nlabels < 2 || strcmp(f->label_names[f->nlabels - 2], "pcpu_segment") != 0 ||
	    strcmp(f->label_names[f->nlabels - 1], "pcpu_pid") != 0)
		return o->e->start_ns;
	seg = se->label_values[f->nlabels - 2];
	pid = se->label_values[f->nlabels - 1];
	if (!o->seg || strcmp(seg, o->seg) != 0 || strcmp(pid, o->pid) != 0) {
		t = o->e->created_ns ? o->e->created_ns(o->e->hold, seg, pid) : 0;
		o->seg = seg;
		o->pid = pid;
		o->start = t && t <= o->e->now_ns ? t : o->e->start_ns;
	}
	return o->start;
}

/*
 * The values a counter or histogram point carries: with delta temporality,
 * se's increase over its baseline in *out (a copy of se; histogram counts
 * in the arena) and its start in *start; *skip when no point is sent (the
 * agent's first collection). Cumulative: se itself and its segment's
 * start. 0, or -1 (ENOMEM).
 */
static int point_values(struct otlp *o, const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
			struct pcpu_snapshot_series *out, uint64_t *start, int *skip)
{
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info(f->type);
	struct delta_point dp;
	size_t b;

	*out = *se;
	*skip = 0;
	*start = 0;
	if (t->otlp == PCPU_OTLP_GAUGE)
		return 0; /* a level (gauge): no start time, no baseline */
	/* Every Sum and Histogram has one, an up-down Sum (not monotonic)
	 * too: OTLP's cumulative points start where their values do. */
	*start = start_of(o, f, se);
	if (!o->e->delta || !(t->flags & PCPU_TYPE_MONOTONIC))
		return 0; /* cumulative; an up-down Sum stays so under delta */
	if (delta_series(o->e->delta, f, se, *start, &dp) < 0)
		return -1;
	*skip = dp.skip;
	*start = dp.start_ns;
	if (dp.skip || !dp.base)
		return 0; /* nothing sent, or the whole value */
	if (t->value == PCPU_VALUE_BUCKETS) {
		uint64_t *c = arena_array(o->a, f->nbuckets, sizeof *c);

		if (!c)
			return -1;
		for (b = 0; b < f->nbuckets; b++)
			c[b] = se->value.histogram.counts[b] - dp.counts[b]; /* not below: push_delta.c */
		out->value.histogram.counts = c;
		out->value.histogram.sum = (int64_t)((uint64_t)se->value.histogram.sum - dp.whole);
		out->value.histogram.residue = se->value.histogram.residue - dp.residue;
	} else if (f->flags & PCPU_SNAPSHOT_NANOS) {
		__int128 d = ((__int128)se->value.fixed.whole - (__int128)dp.whole) * 1000000000 +
			     ((__int128)se->value.fixed.nanos - dp.nanos);

		out->value.fixed.whole = (uint64_t)(d / 1000000000);
		out->value.fixed.nanos = (int64_t)(d % 1000000000);
		out->value.fixed.residue = se->value.fixed.residue - dp.residue;
	} else {
		out->value.counter = se->value.counter - dp.whole;
	}
	return 0;
}

/* Counters and gauges: one NumberDataPoint per series (*n of them). */
static NumberDataPoint **number_points(struct otlp *o, const struct pcpu_snapshot_family *f, size_t *n)
{
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info(f->type);
	NumberDataPoint **pp = arena_array(o->a, f->nseries ? f->nseries : 1, sizeof *pp);
	NumberDataPoint *p = arena_array(o->a, f->nseries ? f->nseries : 1, sizeof *p);
	size_t i, j = 0;

	for (i = 0; pp && p && i < f->nseries; i++) {
		struct pcpu_snapshot_series v, *se = &v;
		uint64_t start;
		int skip;

		if (point_values(o, f, &f->series[i], &v, &start, &skip) < 0)
			return NULL;
		if (skip)
			continue;
		pcpustat__otlp__number_data_point__init(&p[j]);
		if (attributes(o, f, se, &p[j].base, 7) < 0) /* NumberDataPoint.attributes */
			return NULL;
		p[j].time_unix_nano = o->e->now_ns;
		if (t->otlp == PCPU_OTLP_SUM) /* a Sum's start; a gauge has none */
			p[j].start_time_unix_nano = start;
		/* Integers as integers (exact); a scale or a fraction
		 * (PCPU_SNAPSHOT_NANOS) as the double the writers expose. */
		if (f->scale_exp10 == 0 && !(f->flags & PCPU_SNAPSHOT_NANOS) &&
		    (t->value == PCPU_VALUE_SIGNED || se->value.counter <= (uint64_t)INT64_MAX)) {
			p[j].value_case = PCPUSTAT__OTLP__NUMBER_DATA_POINT__VALUE_AS_INT;
			p[j].as_int = t->value == PCPU_VALUE_UNSIGNED ? (int64_t)se->value.counter
								      : se->value.gauge;
		} else {
			p[j].value_case = PCPUSTAT__OTLP__NUMBER_DATA_POINT__VALUE_AS_DOUBLE;
			p[j].as_double = pcpu_snapshot_value(f, se);
		}
		pp[j] = &p[j];
		j++;
	}
	*n = j;
	return pp && p ? pp : NULL;
}

/* Explicit and log-linear histograms: the exposed buckets, per bucket (*n
 * points). */
static HistogramDataPoint **histogram_points(struct otlp *o, const struct pcpu_snapshot_family *f, size_t *n)
{
	size_t nexp = pcpu_snapshot_histogram_buckets(f, NULL, NULL, NULL, 0), i, j, k;
	size_t *idx = arena_array(o->a, f->nbuckets, sizeof *idx);
	uint64_t *cum = arena_array(o->a, f->nbuckets, sizeof *cum);
	double *bounds = arena_array(o->a, nexp, sizeof *bounds);
	HistogramDataPoint **pp = arena_array(o->a, f->nseries ? f->nseries : 1, sizeof *pp);
	HistogramDataPoint *p = arena_array(o->a, f->nseries ? f->nseries : 1, sizeof *p);

	if (!nexp || !idx || !cum || !bounds || !pp || !p)
		return NULL;
	pcpu_snapshot_histogram_buckets(f, NULL, idx, NULL, f->nbuckets);
	for (k = 0; k + 1 < nexp; k++)
		bounds[k] = pcpu_stats_scale((double)f->bucket_upper[idx[k]], f->scale_exp10);
	for (i = 0, j = 0; i < f->nseries; i++) {
		struct pcpu_snapshot_series v, *se = &v;
		uint64_t *bc = arena_array(o->a, nexp, sizeof *bc), start;
		int skip;

		if (!bc || point_values(o, f, &f->series[i], &v, &start, &skip) < 0)
			return NULL;
		if (skip)
			continue;
		pcpu_snapshot_histogram_buckets(f, se->value.histogram.counts, NULL, cum, f->nbuckets);
		for (k = 0; k < nexp; k++)
			bc[k] = cum[k] - (k ? cum[k - 1] : 0);
		pcpustat__otlp__histogram_data_point__init(&p[j]);
		if (attributes(o, f, se, &p[j].base, 9) < 0) /* HistogramDataPoint.attributes */
			return NULL;
		p[j].start_time_unix_nano = start;
		p[j].time_unix_nano = o->e->now_ns;
		p[j].count = cum[nexp - 1];
		p[j].sum__case = PCPUSTAT__OTLP__HISTOGRAM_DATA_POINT__SUM__SUM;
		p[j].sum = pcpu_snapshot_sum(f, se);
		p[j].n_bucket_counts = nexp;
		p[j].bucket_counts = bc;
		p[j].n_explicit_bounds = nexp - 1;
		p[j].explicit_bounds = bounds;
		pp[j] = &p[j];
		j++;
	}
	*n = j;
	return pp;
}

/* Exponential histograms: scale = schema, offset = native index - 1 (the
 * file's comment); *np points. */
static ExpoDataPoint **expo_points(struct otlp *o, const struct pcpu_snapshot_family *f, size_t *np)
{
	ExpoDataPoint **pp = arena_array(o->a, f->nseries ? f->nseries : 1, sizeof *pp);
	ExpoDataPoint *p = arena_array(o->a, f->nseries ? f->nseries : 1, sizeof *p);
	size_t i, j = 0, b;

	for (i = 0; pp && p && i < f->nseries; i++) {
		struct pcpu_snapshot_series v, *se = &v;
		struct pcpu_snapshot_native nat;
		ExpoBuckets *pos = arena_alloc(o->a, sizeof *pos);
		uint64_t *bc = arena_array(o->a, f->nbuckets, sizeof *bc), start;
		int skip;

		if (!pos || !bc || point_values(o, f, &f->series[i], &v, &start, &skip) < 0)
			return NULL;
		if (skip)
			continue;
		/* The span the other native encoders send, as plain counts. */
		if (pcpu_snapshot_native(f, se, &nat, NULL, 0) < 0)
			return NULL;
		pcpustat__otlp__exponential_histogram_data_point__buckets__init(pos);
		if (nat.length) {
			pos->offset = nat.offset - 1;
			for (b = 0; b < nat.length; b++)
				bc[b] = se->value.histogram.counts[nat.first + b];
			pos->n_bucket_counts = nat.length;
			pos->bucket_counts = bc;
		}
		pcpustat__otlp__exponential_histogram_data_point__init(&p[j]);
		if (attributes(o, f, se, &p[j].base, 1) < 0) /* ExponentialHistogramDataPoint.attributes */
			return NULL;
		p[j].start_time_unix_nano = start;
		p[j].time_unix_nano = o->e->now_ns;
		p[j].count = nat.count;
		p[j].sum__case = PCPUSTAT__OTLP__EXPONENTIAL_HISTOGRAM_DATA_POINT__SUM__SUM;
		p[j].sum = pcpu_snapshot_sum(f, se);
		p[j].scale = nat.schema;
		p[j].zero_count = nat.zero_count;
		p[j].zero_threshold = nat.zero_threshold;
		p[j].positive = pos;
		pp[j] = &p[j];
		j++;
	}
	*np = j;
	return pp && p ? pp : NULL;
}

static void kept_free(struct otlp *o)
{
	unsigned k;

	for (k = 0; k < PCPU_STATS_LABELS_MAX; k++)
		free(o->kept[k].buf);
}

/* Family f as Metric m: 0; 1 when it has no point to send (delta: the
 * agent's first collection), m left out; -1 (ENOMEM). */
static int add_metric(struct otlp *o, Metric *m, const struct pcpu_snapshot_family *f)
{
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info(f->type);
	/* Delta only where push_delta.c subtracts: a type that only goes up
	 * (OpenTelemetry's delta preference keeps an up-down sum cumulative
	 * too); gauges carry no temporality. */
	int temporality = o->e->delta && t && (t->flags & PCPU_TYPE_MONOTONIC)
				  ? PCPUSTAT__OTLP__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_DELTA
				  : PCPUSTAT__OTLP__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE;
	size_t n = 0;
	unsigned k;

	for (k = 0; k < PCPU_STATS_LABELS_MAX; k++)
		o->kept[k].value = NULL; /* other label names */
	if (f->nlabels > PCPU_STATS_LABELS_MAX || !t)
		return -1;
	pcpustat__otlp__metric__init(m);
	m->name = (char *)f->name;
	m->description = (char *)(f->help ? f->help : "");
	m->unit = (char *)otlp_unit(f->unit);
	/* The type table's OTLP kind: the one place this encoder maps it. */
	if (t->otlp == PCPU_OTLP_SUM || t->otlp == PCPU_OTLP_GAUGE) {
		NumberDataPoint **dp = number_points(o, f, &n);

		if (!dp)
			return -1;
		if (t->otlp == PCPU_OTLP_SUM) {
			Pcpustat__Otlp__Sum *s = arena_alloc(o->a, sizeof *s);

			if (!s)
				return -1;
			pcpustat__otlp__sum__init(s);
			s->aggregation_temporality = temporality;
			s->is_monotonic = (t->flags & PCPU_TYPE_MONOTONIC) != 0;
			s->n_data_points = n;
			s->data_points = dp;
			m->data_case = PCPUSTAT__OTLP__METRIC__DATA_SUM;
			m->sum = s;
		} else {
			Pcpustat__Otlp__Gauge *g = arena_alloc(o->a, sizeof *g);

			if (!g)
				return -1;
			pcpustat__otlp__gauge__init(g);
			g->n_data_points = n;
			g->data_points = dp;
			m->data_case = PCPUSTAT__OTLP__METRIC__DATA_GAUGE;
			m->gauge = g;
		}
	} else if (f->flags & PCPU_SNAPSHOT_NATIVE) {
		Pcpustat__Otlp__ExponentialHistogram *h = arena_alloc(o->a, sizeof *h);

		if (!h || !(h->data_points = (pcpustat__otlp__exponential_histogram__init(h), expo_points(o, f, &n))))
			return -1;
		h->aggregation_temporality = temporality;
		h->n_data_points = n;
		m->data_case = PCPUSTAT__OTLP__METRIC__DATA_EXPONENTIAL_HISTOGRAM;
		m->exponential_histogram = h;
	} else {
		Pcpustat__Otlp__Histogram *h = arena_alloc(o->a, sizeof *h);

		if (!h || !(h->data_points = (pcpustat__otlp__histogram__init(h), histogram_points(o, f, &n))))
			return -1;
		h->aggregation_temporality = temporality;
		h->n_data_points = n;
		m->data_case = PCPUSTAT__OTLP__METRIC__DATA_HISTOGRAM;
		m->histogram = h;
	}
	return !n && f->nseries && (t->flags & PCPU_TYPE_MONOTONIC) ? 1 : 0;
}

/* Concatenates two arrays of n and k pointers in the arena (NULL: out of
 * memory). */
static void *concat(struct arena *a, void *x, size_t n, void *y, size_t k)
{
	void **p = arena_array(a, n + k ? n + k : 1, sizeof *p);

	if (p) {
		memcpy(p, x, n * sizeof *p);
		memcpy(p + n, y, k * sizeof *p);
	}
	return p;
}

/* Another label set of m's name (PCPU_FAMILY_LABELSET): its points in m,
 * one Metric per name as OTLP has it. 0, or -1 (ENOMEM). */
static int merge_metric(struct otlp *o, Metric *m, const Metric *more)
{
	void *p = NULL;

	switch (m->data_case) {
	case PCPUSTAT__OTLP__METRIC__DATA_SUM:
		p = concat(o->a, m->sum->data_points, m->sum->n_data_points, more->sum->data_points,
			   more->sum->n_data_points);
		m->sum->data_points = p;
		m->sum->n_data_points += more->sum->n_data_points;
		break;
	case PCPUSTAT__OTLP__METRIC__DATA_GAUGE:
		p = concat(o->a, m->gauge->data_points, m->gauge->n_data_points,
			   more->gauge->data_points, more->gauge->n_data_points);
		m->gauge->data_points = p;
		m->gauge->n_data_points += more->gauge->n_data_points;
		break;
	case PCPUSTAT__OTLP__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
		p = concat(o->a, m->exponential_histogram->data_points,
			   m->exponential_histogram->n_data_points,
			   more->exponential_histogram->data_points,
			   more->exponential_histogram->n_data_points);
		m->exponential_histogram->data_points = p;
		m->exponential_histogram->n_data_points += more->exponential_histogram->n_data_points;
		break;
	case PCPUSTAT__OTLP__METRIC__DATA_HISTOGRAM:
		p = concat(o->a, m->histogram->data_points, m->histogram->n_data_points,
			   more->histogram->data_points, more->histogram->n_data_points);
		m->histogram->data_points = p;
		m->histogram->n_data_points += more->histogram->n_data_points;
		break;
	default:
		return 0;
	}
	return p ? 0 : -1;
}

int otlp_encode(const struct pcpu_snapshot *s, const struct push_encode *e, struct arena *a, uint8_t **out,
		size_t *len, char *err, size_t cap)
{
	Pcpustat__Otlp__ExportMetricsServiceRequest req = PCPUSTAT__OTLP__EXPORT_METRICS_SERVICE_REQUEST__INIT;
	Pcpustat__Otlp__ResourceMetrics rm = PCPUSTAT__OTLP__RESOURCE_METRICS__INIT, *rmp = &rm;
	Pcpustat__Otlp__Resource res = PCPUSTAT__OTLP__RESOURCE__INIT;
	Pcpustat__Otlp__ScopeMetrics sm = PCPUSTAT__OTLP__SCOPE_METRICS__INIT, *smp = &sm;
	Pcpustat__Otlp__InstrumentationScope scope = PCPUSTAT__OTLP__INSTRUMENTATION_SCOPE__INIT;
	struct otlp o = { .e = e, .a = a };
	Metric *m = arena_array(a, s->nfamilies ? s->nfamilies : 1, sizeof *m);
	Metric **mp = arena_array(a, s->nfamilies ? s->nfamilies : 1, sizeof *mp);
	KeyValue **rattr = arena_array(a, e->nlabels ? e->nlabels : 1, sizeof *rattr);
	size_t i, n, nm;

	*out = NULL;
	if (!m || !mp || !rattr)
		goto nomem;
	for (i = 0; i < e->nlabels; i++)
		if (!(rattr[i] = new_kv(a, e->labels[i].name, e->labels[i].value)))
			goto nomem;
	for (i = 0, nm = 0; i < s->nfamilies; i++) {
		int rc = add_metric(&o, &m[nm], &s->families[i]);

		if (rc < 0)
			goto nomem;
		if (rc == 0 && nm && strcmp(m[nm - 1].name, m[nm].name) == 0) {
			/* another label set of the name before: one Metric */
			if (merge_metric(&o, &m[nm - 1], &m[nm]) < 0)
				goto nomem;
		} else if (rc == 0) {
			mp[nm] = &m[nm];
			nm++;
		}
		if (a->bytes > e->max_bytes)
			goto toobig;
	}
	res.n_attributes = e->nlabels;
	res.attributes = rattr;
	scope.name = (char *)"pcpustat";
	scope.version = (char *)PCPUSTAT_VERSION;
	sm.scope = &scope;
	sm.n_metrics = nm;
	sm.metrics = mp;
	rm.resource = &res;
	rm.n_scope_metrics = 1;
	rm.scope_metrics = &smp;
	req.n_resource_metrics = 1;
	req.resource_metrics = &rmp;
	n = pcpustat__otlp__export_metrics_service_request__get_packed_size(&req);
	if (n > e->max_bytes)
		goto toobig;
	if (!(*out = malloc(n ? n : 1)))
		goto nomem;
	*len = pcpustat__otlp__export_metrics_service_request__pack(&req, *out);
	kept_free(&o);
	return 0;
nomem:
	snprintf(err, cap, "out of memory encoding the export request");
	errno = ENOMEM;
	kept_free(&o);
	return -1;
toobig:
	snprintf(err, cap, "the export request is over --max-bytes (%zu)", e->max_bytes);
	errno = EFBIG;
	kept_free(&o);
	return -1;
}

void otlp_partial_success(const uint8_t *answer, size_t len, int64_t *rejected, char *why, size_t cap)
{
	Pcpustat__Otlp__ExportMetricsServiceResponse *r =
		pcpustat__otlp__export_metrics_service_response__unpack(NULL, len, answer);
	size_t i;

	*rejected = 0;
	why[0] = 0;
	if (!r)
		return; /* not an OTLP answer (or cut at 4 KiB): nothing to say */
	if (r->partial_success) {
		*rejected = r->partial_success->rejected_data_points;
		snprintf(why, cap, "%s", r->partial_success->error_message ? r->partial_success->error_message : "");
		for (i = 0; why[i]; i++) /* printable, for the log */
			if ((unsigned char)why[i] < 0x20 || why[i] == 0x7f)
				why[i] = ' ';
	}
	pcpustat__otlp__export_metrics_service_response__free_unpacked(r, NULL);
}
