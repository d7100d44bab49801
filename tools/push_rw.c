/* SPDX-License-Identifier: MIT */
/*
 * Prometheus remote write 1.0: a merged snapshot as one
 * prometheus.WriteRequest (proto/remote_write.proto), compressed with
 * snappy's block format -- what Prometheus, Mimir, Cortex, Thanos,
 * VictoriaMetrics and Grafana Alloy accept with Content-Encoding: snappy
 * and X-Prometheus-Remote-Write-Version: 0.1.0 (push_http.c).
 *
 * The series are the text exposition's, with the same names and values:
 * a counter as `<name>_total`, a gauge as `<name>`, a histogram as its
 * exposed classic buckets `<name>_bucket{le}` (cumulative, +Inf last),
 * `<name>_sum` and `<name>_count`; values scaled by 10^scale_exp10. With
 * --native-histograms an exponential family (PCPU_SNAPSHOT_NATIVE) is sent
 * instead as `<name>` holding a native histogram (the Histogram message:
 * its schema, zero bucket, one span over the positive buckets from the
 * first non-empty to the last, counts as deltas), which Prometheus stores
 * where native histograms are enabled -- only that: what the user asked
 * for, as Prometheus keeps a scraped native histogram without its classic
 * series unless told otherwise (where it sent 125 classic `le` series
 * besides, 140 series where 15 were asked for). Other histograms keep
 * their classic series. Every sample carries one timestamp: the
 * push's. Each family's type, help and unit go as MetricMetadata.
 *
 * Labels: the series' own (pcpu_segment and pcpu_pid among them), then the
 * external labels (--label) where the series has no label of that name --
 * as Prometheus' external_labels -- and __name__, sorted by name as the
 * protocol asks; a label with an empty value is left out (to Prometheus it
 * is the same series). Per family the sorted order is computed once.
 *
 * Encoding, streamed: every message is packed by protobuf-c, but a time
 * series is packed as soon as it is built, from one reused TimeSeries on
 * the stack, and appended to the output behind its tag and length (a
 * WriteRequest is its `repeated TimeSeries timeseries = 1` one after the
 * other, then its metadata). Labels are packed once and reused: a series'
 * own labels by its buckets, the external labels, __name__ and le by the
 * whole family -- protobuf-c packs each Label message into a "packed
 * label" (its length first), and a TimeSeries carries its labels as one
 * protobuf-c unknown field of tag 1, which protobuf_c_message_pack() writes
 * after the tag as it is: the packed labels one after the other, each but
 * the first behind its own tag byte -- the bytes of `repeated Label labels
 * = 1`, each Label encoded by protobuf-c only once (emit()). Building every series' messages first
 * and packing the request whole cost three times the text exposition of
 * 10^5 series and 88 MB of scratch (bench/push_bench.c); streamed, the
 * scratch is the output and a family's labels.
 */
#include <errno.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "push.h"
#include "remote_write.pb-c.h"

typedef Pcpustat__Rw__TimeSeries TimeSeries;
typedef Pcpustat__Rw__Label Label;
typedef Pcpustat__Rw__Sample Sample;
typedef Pcpustat__Rw__Histogram Histogram;
typedef Pcpustat__Rw__BucketSpan BucketSpan;
typedef Pcpustat__Rw__MetricMetadata MetricMetadata;

/* A label packed by protobuf-c, its length first; data NULL: left out (an
 * empty value). */
struct plabel {
	uint8_t *data;
	size_t len;
};

/* Where a family's k-th label (in name order) comes from. */
enum slot_kind { SLOT_SERIES, SLOT_FIXED, SLOT_NAME, SLOT_LE };
struct slot {
	const char *name;
	enum slot_kind kind;
	unsigned idx;        /* SLOT_SERIES: the series' label index */
	struct plabel fixed; /* SLOT_FIXED: an external label */
};

/* One push's encoding state. */
struct rw {
	const struct push_encode *e;
	struct arena *a;   /* a family's packed labels; reset per family */
	uint8_t *out;      /* the packed WriteRequest so far */
	size_t len, cap;
	int toobig;
	struct slot *slots; /* the family being encoded: its label order */
	size_t nslots;
	/* Label k of the last series, packed: series_labels(). */
	struct kept {
		const char *value;
		struct plabel pl;
		uint8_t *buf;
		size_t cap;
	} kept[PCPU_STATS_LABELS_MAX];
};

static int cmp_slot(const void *x, const void *y)
{
	return strcmp(((const struct slot *)x)->name, ((const struct slot *)y)->name);
}

static size_t put_varint(uint8_t *p, uint64_t x)
{
	size_t k = 0;

	for (; x > 0x7f; x >>= 7)
		p[k++] = (uint8_t)(x | 0x80);
	p[k++] = (uint8_t)x;
	return k;
}

/* Room for n more bytes of output: 0, or -1 (ENOMEM, or over max_bytes). */
static int reserve(struct rw *w, size_t n)
{
	size_t cap = w->cap ? w->cap : w->e->size_hint && *w->e->size_hint ? *w->e->size_hint + (1 << 16) : 1 << 20;
	uint8_t *p;

	if (n <= w->cap - w->len)
		return 0;
	if (n > w->e->max_bytes || w->len > w->e->max_bytes - n) {
		w->toobig = 1;
		errno = EFBIG;
		return -1;
	}
	while (cap - w->len < n)
		cap *= 2;
	if (!(p = realloc(w->out, cap)))
		return -1;
	w->out = p;
	w->cap = cap;
	return 0;
}

/* Appends message m as field `tag` (length-delimited) of the request. */
static int append(struct rw *w, unsigned tag, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);

	if (reserve(w, n + 11) < 0)
		return -1;
	w->out[w->len++] = (uint8_t)(tag << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
	w->len += put_varint(w->out + w->len, n);
	w->len += protobuf_c_message_pack(m, w->out + w->len);
	return 0;
}

/* name="value" packed by protobuf-c behind its length, at p (room for
 * packed_label_size()); its length. */
static size_t packed_label_size(const char *name, const char *value)
{
	return strlen(name) + strlen(value) + 4 + 2 * 10;
}

static size_t pack_label_at(uint8_t *p, const char *name, const char *value)
{
	Label l = PCPUSTAT__RW__LABEL__INIT;
	size_t k;

	l.name = (char *)name;
	l.value = (char *)value;
	k = put_varint(p, pcpustat__rw__label__get_packed_size(&l));
	return k + pcpustat__rw__label__pack(&l, p + k);
}

/* The same in the family's arena: 0, or -1. An empty value is left out. */
static int pack_label(struct arena *a, const char *name, const char *value, struct plabel *out)
{
	out->data = NULL;
	out->len = 0;
	if (!*value)
		return 0;
	if (!(out->data = arena_alloc(a, packed_label_size(name, value))))
		return -1;
	out->len = pack_label_at(out->data, name, value);
	return 0;
}

/* The family's label order: its own labels, its type's bucket label (le,
 * histograms), __name__, and the external labels it does not have itself,
 * sorted by name. */
static int family_slots(struct rw *w, const struct pcpu_snapshot_family *f, const struct pcpu_metric_type_info *t)
{
	const struct push_encode *e = w->e;
	size_t n = 0, j, m;
	unsigned k;

	w->slots = arena_array(w->a, f->nlabels + e->nlabels + 2, sizeof *w->slots);
	if (!w->slots || f->nlabels > PCPU_STATS_LABELS_MAX)
		return -1;
	for (k = 0; k < f->nlabels; k++)
		w->slots[n++] = (struct slot){ f->label_names[k], SLOT_SERIES, k, { NULL, 0 } };
	if (t->bucket_label)
		w->slots[n++] = (struct slot){ t->bucket_label, SLOT_LE, 0, { NULL, 0 } };
	w->slots[n++] = (struct slot){ "__name__", SLOT_NAME, 0, { NULL, 0 } };
	for (j = 0; j < e->nlabels; j++) {
		for (m = 0; m < n && strcmp(w->slots[m].name, e->labels[j].name) != 0; m++)
			;
		if (m < n)
			continue; /* the series' own label wins */
		w->slots[n] = (struct slot){ e->labels[j].name, SLOT_FIXED, 0, { NULL, 0 } };
		if (pack_label(w->a, e->labels[j].name, e->labels[j].value, &w->slots[n].fixed) < 0)
			return -1;
		n++;
	}
	qsort(w->slots, n, sizeof *w->slots, cmp_slot);
	w->nslots = n;
	return 0;
}

/*
 * A series' own labels, packed: own[k] for each. Label k of the previous
 * series is kept packed (w->kept[k]) and reused while the value is the
 * same string -- the merge's pcpu_segment and pcpu_pid values are one
 * string for every series of a segment -- else packed again in its place.
 */
static int series_labels(struct rw *w, const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
			 struct plabel *own)
{
	unsigned k;

	for (k = 0; k < f->nlabels; k++) {
		struct kept *c = &w->kept[k];
		const char *v = se->label_values[k];
		size_t need;

		if (v != c->value) {
			c->value = v;
			c->pl.data = NULL;
			c->pl.len = 0;
			if (*v) {
				need = packed_label_size(f->label_names[k], v);
				if (need > c->cap) {
					uint8_t *p = realloc(c->buf, need);

					if (!p) {
						c->value = NULL;
						return -1;
					}
					c->buf = p;
					c->cap = need;
				}
				c->pl.data = c->buf;
				c->pl.len = pack_label_at(c->buf, f->label_names[k], v);
			}
		}
		own[k] = c->pl;
	}
	return 0;
}

/* Forgets the kept labels (a new family: other label names). */
static void kept_clear(struct rw *w)
{
	unsigned k;

	for (k = 0; k < PCPU_STATS_LABELS_MAX; k++)
		w->kept[k].value = NULL;
}

/* A Sample's bytes as protobuf-c packs them (proto3: a field holding its
 * zero value -- all bits zero -- is left out): into p, their count. */
static size_t put_sample(uint8_t *p, double v, int64_t ts)
{
	uint64_t bits;
	size_t k = 0;

	memcpy(&bits, &v, sizeof bits);
	if (bits) {
		p[k++] = 1 << 3 | PROTOBUF_C_WIRE_TYPE_64BIT; /* value = 1 */
		for (int i = 0; i < 8; i++)
			p[k++] = (uint8_t)(bits >> (8 * i));
	}
	if (ts) {
		p[k++] = 2 << 3 | PROTOBUF_C_WIRE_TYPE_VARINT; /* timestamp = 2 */
		k += put_varint(p + k, (uint64_t)ts);
	}
	return k;
}

/*
 * Appends one time series -- the labels in the family's order (own, the
 * sample's __name__, its le or none), and a sample or a histogram -- as
 * WriteRequest field 1. The hot path, once per series and bucket: the
 * TimeSeries around them and its Sample are written here, field by field
 * as protobuf-c writes them (labels = 1, samples = 2, histograms = 4, in
 * that order; the test push_rw_bytes compares the whole request with
 * protobuf-c's packing of the same messages, byte for byte). protobuf-c's
 * generic packer, sizing each message twice through its descriptors, cost
 * more than the text exposition of the same series; the Labels are still
 * packed by protobuf-c (pack_label_at()), the native Histogram too.
 */
static int emit(struct rw *w, const struct plabel *own, const struct plabel *name, const struct plabel *le,
		const double *value, const Histogram *h)
{
	uint8_t body[24], v[10];
	size_t k, need = 0, nbody, inner;
	const struct plabel *l;

	for (k = 0; k < w->nslots; k++) {
		const struct slot *sl = &w->slots[k];

		l = sl->kind == SLOT_SERIES ? &own[sl->idx] : sl->kind == SLOT_NAME ? name
		    : sl->kind == SLOT_LE ? le : &sl->fixed;
		if (l && l->data)
			need += 1 + l->len;
	}
	nbody = value ? put_sample(body, *value, w->e->now_ms) : pcpustat__rw__histogram__get_packed_size(h);
	inner = need + 1 + put_varint(v, nbody) + nbody;
	if (reserve(w, inner + 11) < 0)
		return -1;
	w->out[w->len++] = 1 << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED; /* WriteRequest.timeseries = 1 */
	w->len += put_varint(w->out + w->len, inner);
	for (k = 0; k < w->nslots; k++) {
		const struct slot *sl = &w->slots[k];

		l = sl->kind == SLOT_SERIES ? &own[sl->idx] : sl->kind == SLOT_NAME ? name
		    : sl->kind == SLOT_LE ? le : &sl->fixed;
		if (!l || !l->data)
			continue;
		w->out[w->len++] = 1 << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED; /* labels = 1 */
		memcpy(w->out + w->len, l->data, l->len);
		w->len += l->len;
	}
	w->out[w->len++] = (value ? 2 : 4) << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED; /* samples / histograms */
	w->len += put_varint(w->out + w->len, nbody);
	if (value)
		memcpy(w->out + w->len, body, nbody);
	else
		pcpustat__rw__histogram__pack(h, w->out + w->len);
	w->len += nbody;
	return 0;
}

/* __name__="<base><suffix>", packed: 0, or -1. */
static int name_with(struct rw *w, const char *base, const char *suffix, struct plabel *out)
{
	size_t nb = strlen(base), ns = strlen(suffix);
	char *s = arena_alloc(w->a, nb + ns + 1);

	if (!s)
		return -1;
	memcpy(s, base, nb);
	memcpy(s + nb, suffix, ns + 1);
	return pack_label(w->a, "__name__", s, out);
}

/* The native histogram of one series, as libpcpu-stats computes it for its
 * own protobuf exposition (pcpu_snapshot_native(): schema, zero bucket, one
 * span from the first non-empty positive bucket to the last, deltas); no
 * span when no observation is above the zero bucket. */
static int emit_native(struct rw *w, const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
		       const struct plabel *own, const struct plabel *name, int64_t *d)
{
	Histogram h = PCPUSTAT__RW__HISTOGRAM__INIT;
	BucketSpan sp = PCPUSTAT__RW__BUCKET_SPAN__INIT, *spp = &sp;
	struct pcpu_snapshot_native nat;

	if (pcpu_snapshot_native(f, se, &nat, d, f->nbuckets) < 0)
		return -1;
	h.count_case = PCPUSTAT__RW__HISTOGRAM__COUNT_COUNT_INT;
	h.count_int = nat.count;
	h.sum = pcpu_snapshot_sum(f, se);
	h.schema = nat.schema;
	h.zero_threshold = nat.zero_threshold;
	h.zero_count_case = PCPUSTAT__RW__HISTOGRAM__ZERO_COUNT_ZERO_COUNT_INT;
	h.zero_count_int = nat.zero_count;
	if (nat.length) {
		sp.offset = nat.offset;
		sp.length = nat.length;
		h.n_positive_spans = 1;
		h.positive_spans = &spp;
		h.n_positive_deltas = nat.length;
		h.positive_deltas = d;
	}
	h.timestamp = w->e->now_ms;
	return emit(w, own, name, NULL, NULL, &h);
}

/* A histogram family: its names and le labels once; per series the
 * exposed buckets (cumulative), _sum and _count -- or, with
 * --native-histograms and an exponential family, the native histogram
 * alone. */
static int emit_histograms(struct rw *w, const struct pcpu_snapshot_family *f, const struct pcpu_metric_type_info *t,
			   struct plabel *own)
{
	size_t nexp = pcpu_snapshot_histogram_buckets(f, NULL, NULL, NULL, 0), i, k;
	size_t *idx = arena_array(w->a, f->nbuckets, sizeof *idx);
	uint64_t *cum = arena_array(w->a, f->nbuckets, sizeof *cum);
	int64_t *deltas = arena_array(w->a, f->nbuckets, sizeof *deltas);
	struct plabel *le = arena_array(w->a, nexp, sizeof *le), names[4];
	int native = w->e->native && (f->flags & PCPU_SNAPSHOT_NATIVE);

	if (!nexp || !idx || !cum || !deltas || !le || name_with(w, f->name, t->bucket_suffix, &names[0]) < 0 ||
	    name_with(w, f->name, t->sum_suffix, &names[1]) < 0 || name_with(w, f->name, t->count_suffix, &names[2]) < 0 ||
	    name_with(w, f->name, "", &names[3]) < 0)
		return -1;
	pcpu_snapshot_histogram_buckets(f, NULL, idx, NULL, f->nbuckets);
	for (k = 0; k < nexp; k++) {
		char buf[PCPU_FORMAT_NUMBER_MAX];

		if (pcpu_snapshot_bucket_le(f, idx[k], buf, sizeof buf) < 0 || pack_label(w->a, t->bucket_label, buf, &le[k]) < 0)
			return -1;
	}
	for (i = 0; i < f->nseries; i++) {
		const struct pcpu_snapshot_series *se = &f->series[i];
		double sum = pcpu_snapshot_sum(f, se), v;

		if (series_labels(w, f, se, own) < 0)
			return -1;
		if (native) {
			if (emit_native(w, f, se, own, &names[3], deltas) < 0)
				return -1;
			continue;
		}
		pcpu_snapshot_histogram_buckets(f, se->value.histogram.counts, NULL, cum, f->nbuckets);
		for (k = 0; k < nexp; k++) {
			v = (double)cum[k];
			if (emit(w, own, &names[0], &le[k], &v, NULL) < 0)
				return -1;
		}
		v = (double)cum[nexp - 1];
		if (emit(w, own, &names[1], NULL, &sum, NULL) < 0 || emit(w, own, &names[2], NULL, &v, NULL) < 0)
			return -1;
	}
	return 0;
}

static int emit_family(struct rw *w, const struct pcpu_snapshot_family *f)
{
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info(f->type);
	struct plabel own[PCPU_STATS_LABELS_MAX], name;
	size_t i;

	kept_clear(w);
	if (!t || family_slots(w, f, t) < 0)
		return -1;
	if (t->value == PCPU_VALUE_BUCKETS)
		return emit_histograms(w, f, t, own);
	if (name_with(w, f->name, t->sample_suffix, &name) < 0)
		return -1;
	for (i = 0; i < f->nseries; i++) {
		const struct pcpu_snapshot_series *se = &f->series[i];
		double v = pcpu_snapshot_value(f, se);

		if (series_labels(w, f, se, own) < 0 || emit(w, own, &name, NULL, &v, NULL) < 0)
			return -1;
	}
	return 0;
}

/* The type table's kind as MetricMetadata.MetricType: the one place this
 * encoder maps it. An info family is INFO (remote write has the type). */
static Pcpustat__Rw__MetricMetadata__MetricType rw_type(enum pcpu_prom_kind k, unsigned flags)
{
	if (flags & PCPU_SNAPSHOT_INFO)
		return PCPUSTAT__RW__METRIC_METADATA__METRIC_TYPE__INFO;
	switch (k) {
	case PCPU_PROM_COUNTER:
		return PCPUSTAT__RW__METRIC_METADATA__METRIC_TYPE__COUNTER;
	case PCPU_PROM_HISTOGRAM:
		return PCPUSTAT__RW__METRIC_METADATA__METRIC_TYPE__HISTOGRAM;
	case PCPU_PROM_GAUGE:
		break;
	}
	return PCPUSTAT__RW__METRIC_METADATA__METRIC_TYPE__GAUGE;
}

/* Each family's type, help and unit (WriteRequest.metadata, field 3). */
static int emit_metadata(struct rw *w, const struct pcpu_snapshot_family *f)
{
	MetricMetadata m = PCPUSTAT__RW__METRIC_METADATA__INIT;
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info(f->type);
	char *name = t ? arena_alloc(w->a, strlen(f->name) + strlen(t->sample_suffix) + 1) : NULL;

	if (!name)
		return -1;
	strcpy(name, f->name);
	strcat(name, t->sample_suffix);
	m.type = rw_type(t->prom, f->flags);
	m.metric_family_name = name;
	m.help = (char *)(f->help ? f->help : "");
	m.unit = (char *)(f->unit ? f->unit : "");
	return append(w, 3, &m.base);
}

int rw_encode(const struct pcpu_snapshot *s, const struct push_encode *e, struct arena *a, uint8_t **out,
	      size_t *len, char *err, size_t cap)
{
	struct rw w = { .e = e, .a = a };
	size_t i, zmax;
	char *z = NULL;

	*out = NULL;
	for (i = 0; i < s->nfamilies; i++) {
		if (emit_family(&w, &s->families[i]) < 0)
			goto fail;
		arena_reset(a); /* the family's labels are packed into the output */
	}
	for (i = 0; i < s->nfamilies; i++)
		if ((i == 0 || strcmp(s->families[i].name, s->families[i - 1].name) != 0) &&
		    emit_metadata(&w, &s->families[i]) < 0) /* a name's label sets: once */
			goto fail;
	if (e->size_hint)
		*e->size_hint = w.len;
	zmax = snappy_max_compressed_length(w.len);
	if (zmax > e->max_bytes || w.cap > e->max_bytes - zmax) {
		w.toobig = 1;
		goto fail;
	}
	if (!(z = malloc(zmax ? zmax : 1)))
		goto fail;
	if (snappy_compress((const char *)w.out, w.len, z, &zmax) != SNAPPY_OK) {
		snprintf(err, cap, "snappy could not compress %zu bytes", w.len);
		free(z);
		z = NULL;
		errno = EINVAL;
		goto out;
	}
	*out = (uint8_t *)z;
	*len = zmax;
	goto out;
fail:
	if (w.toobig) {
		snprintf(err, cap, "the write request is over --max-bytes (%zu)", e->max_bytes);
		errno = EFBIG;
	} else {
		snprintf(err, cap, "out of memory encoding the write request");
		errno = ENOMEM;
	}
out:
	for (i = 0; i < PCPU_STATS_LABELS_MAX; i++)
		free(w.kept[i].buf);
	free(w.out);
	return *out ? 0 : -1;
}
