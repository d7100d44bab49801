/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus protobuf exposition (PCPU_FORMAT_PROTOBUF): one
 * io.prometheus.client.MetricFamily message per family, each preceded by
 * its length as a varint ("encoding=delimited"), encoded by protobuf-c from
 * the schema in proto/metrics.proto. Built only where protobuf-c is
 * installed (src/stats/sources.cmake); expose.c validates the snapshot and
 * owns the output buffer, this file only fills it.
 *
 * Values as the text formats expose them: scaled by 10^scale_exp10, a
 * counter's family named `<name>_total` (as Prometheus' own clients name
 * it in this format), a histogram's classic buckets the exported ones
 * (pcpu_snapshot_family.export_buckets) with cumulative counts, the +Inf
 * bucket left out (the format's sample_count is its count).
 *
 * Per family, the messages are built in arrays sized by its series (one
 * allocation each, freed once the family is packed; not zeroed: every
 * element protobuf-c reads is initialised): protobuf-c packs from
 * pointers, so nothing is copied twice.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"
#include "metrics.pb-c.h"

typedef Pcpu__Pb__MetricFamily MetricFamily;
typedef Pcpu__Pb__Metric Metric;
typedef Pcpu__Pb__LabelPair LabelPair;
typedef Pcpu__Pb__Counter Counter;
typedef Pcpu__Pb__Gauge Gauge;
typedef Pcpu__Pb__Histogram Histogram;
typedef Pcpu__Pb__Bucket Bucket;
typedef Pcpu__Pb__BucketSpan BucketSpan;

/* What one family's messages need, allocated together. */
struct family_msgs {
	Metric *metrics;
	Metric **metric_ptrs;
	LabelPair *labels;
	LabelPair **label_ptrs;
	Counter *counters;
	Gauge *gauges;
	Histogram *hists;
	Bucket *buckets;
	Bucket **bucket_ptrs;
	/* native histograms: one span and a delta per bucket, per series */
	BucketSpan *spans;
	BucketSpan **span_ptrs;
	int64_t *deltas;
	size_t *sizes; /* each Metric's packed size */
};

static void msgs_free(struct family_msgs *m)
{
	free(m->metrics);
	free(m->metric_ptrs);
	free(m->labels);
	free(m->label_ptrs);
	free(m->counters);
	free(m->gauges);
	free(m->hists);
	free(m->buckets);
	free(m->bucket_ptrs);
	free(m->spans);
	free(m->span_ptrs);
	free(m->deltas);
	free(m->sizes);
}

/* The finite buckets a histogram family exposes (protobuf has no +Inf
 * bucket: the sample count is its cumulative count). */
static size_t exported_count(const struct pcpu_snapshot_family *f)
{
	return pcpu_snapshot_histogram_buckets(f, NULL, NULL, NULL, 0) - 1;
}

static int msgs_alloc(struct family_msgs *m, const struct pcpu_snapshot_family *f,
		      enum pcpu_prom_kind kind)
{
	size_t n = f->nseries ? f->nseries : 1, nl = n * (f->nlabels ? f->nlabels : 1);

	memset(m, 0, sizeof *m);
	m->metrics = malloc(n * sizeof *m->metrics);
	m->metric_ptrs = malloc(n * sizeof *m->metric_ptrs);
	m->labels = malloc(nl * sizeof *m->labels);
	m->label_ptrs = malloc(nl * sizeof *m->label_ptrs);
	m->sizes = malloc(n * sizeof *m->sizes);
	if (!m->metrics || !m->metric_ptrs || !m->labels || !m->label_ptrs || !m->sizes)
		return -1;
	if (kind == PCPU_PROM_COUNTER && !(m->counters = malloc(n * sizeof *m->counters)))
		return -1;
	if (kind == PCPU_PROM_GAUGE && !(m->gauges = malloc(n * sizeof *m->gauges)))
		return -1;
	if (kind == PCPU_PROM_HISTOGRAM) {
		size_t nb = n * (exported_count(f) ? exported_count(f) : 1);

		m->hists = malloc(n * sizeof *m->hists);
		m->buckets = malloc(nb * sizeof *m->buckets);
		m->bucket_ptrs = malloc(nb * sizeof *m->bucket_ptrs);
		if (!m->hists || !m->buckets || !m->bucket_ptrs)
			return -1;
		if (f->flags & PCPU_SNAPSHOT_NATIVE) {
			m->spans = malloc(n * sizeof *m->spans);
			m->span_ptrs = malloc(n * sizeof *m->span_ptrs);
			m->deltas = malloc(n * f->nbuckets * sizeof *m->deltas);
			if (!m->spans || !m->span_ptrs || !m->deltas)
				return -1;
		}
	}
	return 0;
}

/*
 * The native form of the same counts (pcpu_snapshot_native(): schema, the
 * zero bucket, one span over the positive buckets with the counts as
 * deltas). A histogram without observations gets the no-op span the
 * format asks for, so that it still reads as native.
 */
static void fill_native(Histogram *h, BucketSpan *span, BucketSpan **sp, int64_t *deltas,
			const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se)
{
	struct pcpu_snapshot_native nat;

	/* Cannot fail: a validated native family (check_histogram()). */
	pcpu_snapshot_native(f, se, &nat, deltas, f->nbuckets);
	h->has_schema = 1;
	h->schema = nat.schema;
	h->has_zero_threshold = 1;
	h->zero_threshold = nat.zero_threshold;
	h->has_zero_count = 1;
	h->zero_count = nat.zero_count;
	pcpu__pb__bucket_span__init(span);
	span->has_offset = span->has_length = 1;
	span->offset = nat.offset;
	span->length = nat.length;
	*sp = span;
	h->n_positive_span = 1;
	h->positive_span = sp;
	h->n_positive_delta = nat.length;
	h->positive_delta = deltas;
}

static void fill_histogram(Histogram *h, Bucket *bk, Bucket **bp,
			   const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se)
{
	const uint64_t *c = se->value.histogram.counts;
	size_t k = 0, b, x = 0; /* x: the next of export_buckets */
	uint64_t cum = 0;

	pcpu__pb__histogram__init(h);
	for (b = 0; b < f->nbuckets; b++) {
		cum += c[b];
		if (b + 1 == f->nbuckets || !pcpu__bucket_exposed(f, b, &x))
			continue; /* +Inf: the sample count */
		pcpu__pb__bucket__init(&bk[k]);
		bk[k].has_cumulative_count = 1;
		bk[k].cumulative_count = cum;
		bk[k].has_upper_bound = 1;
		bk[k].upper_bound = pcpu__scale_i64(f->bucket_upper[b], f->scale_exp10);
		bp[k] = &bk[k];
		k++;
	}
	h->n_bucket = k;
	h->bucket = bp;
	h->has_sample_count = 1;
	h->sample_count = cum;
	h->has_sample_sum = 1;
	h->sample_sum = pcpu_snapshot_sum(f, se);
}

static size_t put_varint(uint8_t *p, uint64_t x)
{
	size_t n = 0;

	do {
		p[n++] = (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
		x >>= 7;
	} while (x);
	return n;
}

static size_t varint_len(uint64_t x)
{
	uint8_t v[10];

	return put_varint(v, x);
}

/*
 * Appends `mf` delimited: the bytes pcpu__pb__metric_family__pack() writes,
 * with less work. Packing a message, protobuf-c sizes each sub-message
 * again to write its length, so one pack of a family sized every Metric
 * twice (and every LabelPair three times). Here each Metric is sized once
 * and packed on its own, between the family's fields before it (name,
 * help, type) and after it (unit), each also packed by protobuf-c: protobuf
 * writes a message's fields in field-number order (protobuf-c does), and a
 * message is the concatenation of its fields, so the bytes are the same.
 * Each Metric is framed as protobuf-c frames it: tag, length, message.
 * With the arrays allocated without zeroing, this took the protobuf
 * exposition of bench/stats_bench.c's mix from 270 to 248 million
 * instructions (callgrind); what is left is mostly protobuf-c's per-field
 * work. The same split one level down (each LabelPair sized once) saved
 * 1% more and was not kept.
 */
#define FAMILY_METRIC_TAG ((4u << 3) | 2u) /* MetricFamily.metric: length-delimited */

static int pack_family(struct pcpu__buf *out, const MetricFamily *mf, size_t *sizes)
{
	MetricFamily head = *mf, tail;
	size_t i, len, pos;
	uint8_t *p, v[10];

	head.n_metric = 0;
	head.metric = NULL;
	head.unit = NULL;
	pcpu__pb__metric_family__init(&tail);
	tail.unit = mf->unit;
	len = pcpu__pb__metric_family__get_packed_size(&head) +
	      pcpu__pb__metric_family__get_packed_size(&tail);
	for (i = 0; i < mf->n_metric; i++) {
		sizes[i] = pcpu__pb__metric__get_packed_size(mf->metric[i]);
		len += 1 + varint_len(sizes[i]) + sizes[i];
	}
	pcpu__buf_put(out, (const char *)v, put_varint(v, len));
	pcpu__buf_reserve(out, len + 1);
	if (out->failed)
		return -1;
	p = (uint8_t *)out->p + out->len;
	pos = pcpu__pb__metric_family__pack(&head, p);
	for (i = 0; i < mf->n_metric; i++) {
		p[pos++] = FAMILY_METRIC_TAG;
		pos += put_varint(p + pos, sizes[i]);
		pos += pcpu__pb__metric__pack(mf->metric[i], p + pos);
	}
	pos += pcpu__pb__metric_family__pack(&tail, p + pos);
	if (pos != len) /* cannot happen: sized as packed */
		return -1;
	out->len += len;
	out->p[out->len] = '\0';
	return 0;
}

/* The type table's kind as io.prometheus.client.MetricType: the one place
 * this writer maps it. */
static Pcpu__Pb__MetricType pb_type(enum pcpu_prom_kind k)
{
	switch (k) {
	case PCPU_PROM_COUNTER:
		return PCPU__PB__METRIC_TYPE__COUNTER;
	case PCPU_PROM_GAUGE:
		return PCPU__PB__METRIC_TYPE__GAUGE;
	case PCPU_PROM_HISTOGRAM:
		break;
	}
	return PCPU__PB__METRIC_TYPE__HISTOGRAM;
}

/* Fills m's messages for family f's series (m allocated for f). */
static void fill_metrics(struct family_msgs *m, const struct pcpu_snapshot_family *f,
			 const struct pcpu_metric_type_info *t)
{
	size_t i, ne = t->prom == PCPU_PROM_HISTOGRAM ? exported_count(f) : 0;
	unsigned l;

	for (i = 0; i < f->nseries; i++) {
		const struct pcpu_snapshot_series *se = &f->series[i];
		Metric *mt = &m->metrics[i];

		pcpu__pb__metric__init(mt);
		for (l = 0; l < f->nlabels; l++) {
			LabelPair *lp = &m->labels[i * f->nlabels + l];

			pcpu__pb__label_pair__init(lp);
			lp->name = (char *)f->label_names[l];
			lp->value = (char *)se->label_values[l];
			m->label_ptrs[i * f->nlabels + l] = lp;
		}
		mt->n_label = f->nlabels;
		mt->label = f->nlabels ? &m->label_ptrs[i * f->nlabels] : NULL;
		switch (t->prom) {
		case PCPU_PROM_COUNTER:
			pcpu__pb__counter__init(&m->counters[i]);
			m->counters[i].has_value = 1;
			m->counters[i].value = pcpu_snapshot_value(f, se);
			mt->counter = &m->counters[i];
			break;
		case PCPU_PROM_GAUGE:
			pcpu__pb__gauge__init(&m->gauges[i]);
			m->gauges[i].has_value = 1;
			m->gauges[i].value = pcpu_snapshot_value(f, se);
			mt->gauge = &m->gauges[i];
			break;
		case PCPU_PROM_HISTOGRAM:
			fill_histogram(&m->hists[i], m->buckets + i * ne, m->bucket_ptrs + i * ne, f, se);
			if (f->flags & PCPU_SNAPSHOT_NATIVE)
				fill_native(&m->hists[i], &m->spans[i], &m->span_ptrs[i],
					    m->deltas + i * f->nbuckets, f, se);
			mt->histogram = &m->hists[i];
			break;
		}
		m->metric_ptrs[i] = mt;
	}
}

/* Appends one delimited MetricFamily message for the n families fams[0..n)
 * of one name (several label sets of one metric, PCPU_FAMILY_LABELSET: one
 * message, their series one after the other; validated alike but for
 * their label names). */
static int write_family(struct pcpu__buf *out, const struct pcpu_snapshot_family *fams, size_t n)
{
	const struct pcpu_snapshot_family *f = &fams[0];
	/* Validated: a type the table describes. */
	const struct pcpu_metric_type_info *t = pcpu__type_info(f->type);
	struct family_msgs *m = calloc(n, sizeof *m);
	Metric **all = NULL;
	size_t *sizes = NULL, k, total = 0, at = 0;
	MetricFamily mf;
	char *name = NULL;
	int r = -1;

	if (!m)
		return -1;
	for (k = 0; k < n; k++) {
		if (msgs_alloc(&m[k], &fams[k], t->prom) < 0)
			goto out;
		fill_metrics(&m[k], &fams[k], t);
		total += fams[k].nseries;
	}
	if (n > 1) {
		all = malloc((total ? total : 1) * sizeof *all);
		sizes = malloc((total ? total : 1) * sizeof *sizes);
		if (!all || !sizes)
			goto out;
		for (k = 0; k < n; k++) {
			if (fams[k].nseries)
				memcpy(all + at, m[k].metric_ptrs, fams[k].nseries * sizeof *all);
			at += fams[k].nseries;
		}
	}
	pcpu__pb__metric_family__init(&mf);
	if (*t->sample_suffix) { /* named as its value sample: `<name>_total` */
		size_t nl = strlen(f->name), ns = strlen(t->sample_suffix);

		if (!(name = malloc(nl + ns + 1)))
			goto out;
		memcpy(name, f->name, nl);
		memcpy(name + nl, t->sample_suffix, ns + 1);
	}
	mf.name = name ? name : (char *)f->name;
	mf.help = (char *)f->help;
	if (f->unit && *f->unit)
		mf.unit = (char *)f->unit;
	mf.has_type = 1;
	mf.type = pb_type(t->prom);
	mf.n_metric = total;
	mf.metric = n > 1 ? all : m[0].metric_ptrs;
	if (pack_family(out, &mf, n > 1 ? sizes : m[0].sizes) < 0)
		goto out;
	r = 0;
out:
	free(name);
	free(all);
	free(sizes);
	for (k = 0; k < n; k++)
		msgs_free(&m[k]);
	free(m);
	return r;
}

int pcpu__write_protobuf(const struct pcpu_snapshot *s, struct pcpu__buf *b)
{
	size_t i, j;

	for (i = 0; i < s->nfamilies; i = j) {
		/* A name's label sets, next to each other (validated). */
		for (j = i + 1; j < s->nfamilies && strcmp(s->families[j].name, s->families[i].name) == 0;
		     j++)
			;
		if (write_family(b, &s->families[i], j - i) < 0)
			return -1;
	}
	return 0;
}
