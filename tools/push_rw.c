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
 * --native-histograms an exponential family (PCPU_SNAPSHOT_NATIVE) is also
 * sent as `<name>` holding a native histogram (the Histogram message: its
 * schema, zero bucket, one span over the positive buckets from the first
 * non-empty to the last, counts as deltas), which Prometheus stores where
 * native histograms are enabled. Every sample carries one timestamp: the
 * push's.
 *
 * Labels: the series' own (pcpu_segment and pcpu_pid among them), then the
 * external labels (--label) where the series has no label of that name --
 * as Prometheus' external_labels -- and __name__, sorted by name as the
 * protocol asks; a label with an empty value is left out (to Prometheus it
 * is the same series). Per family the sorted order is computed once; a
 * series' Label messages are shared by its buckets, the external and le
 * labels by the whole family (protobuf-c packs from pointers).
 */
#include <errno.h>
#include <math.h>
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

/* Where a family's k-th label (in name order) comes from. */
enum slot_kind { SLOT_SERIES, SLOT_FIXED, SLOT_LE };
struct slot {
	const char *name;
	enum slot_kind kind;
	unsigned idx;       /* SLOT_SERIES: the series' label index */
	const Label *fixed; /* SLOT_FIXED: __name__ or an external label */
};

/* One push's encoding state. */
struct rw {
	const struct push_encode *e;
	struct arena *a;
	TimeSeries **ts;
	size_t nts, capts;
	MetricMetadata **md;
	size_t nmd;
	/* the family being encoded */
	struct slot *slots;
	size_t nslots;
	Label *name_label; /* its __name__'s, changed per sample name */
	char *err;
	size_t errcap;
};

static int cmp_slot(const void *x, const void *y)
{
	return strcmp(((const struct slot *)x)->name, ((const struct slot *)y)->name);
}

static Label *new_label(struct arena *a, const char *name, const char *value)
{
	Label *l = arena_alloc(a, sizeof *l);

	if (l) {
		pcpustat__rw__label__init(l);
		l->name = (char *)name;
		l->value = (char *)value;
	}
	return l;
}

/* The family's label order: its own labels, le (histograms), __name__, and
 * the external labels it does not have itself, sorted by name. */
static int family_slots(struct rw *w, const struct pcpu_snapshot_family *f)
{
	const struct push_encode *e = w->e;
	size_t n = 0, j;
	unsigned k;

	w->slots = arena_array(w->a, f->nlabels + e->nlabels + 2, sizeof *w->slots);
	w->name_label = new_label(w->a, "__name__", "");
	if (!w->slots || !w->name_label)
		return -1;
	for (k = 0; k < f->nlabels; k++)
		w->slots[n++] = (struct slot){ f->label_names[k], SLOT_SERIES, k, NULL };
	if (f->type == PCPU_METRIC_HISTOGRAM)
		w->slots[n++] = (struct slot){ "le", SLOT_LE, 0, NULL };
	w->slots[n++] = (struct slot){ "__name__", SLOT_FIXED, 0, w->name_label };
	for (j = 0; j < e->nlabels; j++) {
		size_t m;
		Label *l;

		for (m = 0; m < n && strcmp(w->slots[m].name, e->labels[j].name) != 0; m++)
			;
		if (m < n || !*e->labels[j].value)
			continue; /* the series' own label wins */
		if (!(l = new_label(w->a, e->labels[j].name, e->labels[j].value)))
			return -1;
		w->slots[n++] = (struct slot){ e->labels[j].name, SLOT_FIXED, 0, l };
	}
	qsort(w->slots, n, sizeof *w->slots, cmp_slot);
	w->nslots = n;
	return 0;
}

/* A series' own labels as Label messages (shared by its samples). */
static Label *series_labels(struct rw *w, const struct pcpu_snapshot_family *f,
			    const struct pcpu_snapshot_series *se)
{
	Label *l = arena_array(w->a, f->nlabels ? f->nlabels : 1, sizeof *l);
	unsigned k;

	for (k = 0; l && k < f->nlabels; k++) {
		pcpustat__rw__label__init(&l[k]);
		l[k].name = (char *)f->label_names[k];
		l[k].value = (char *)se->label_values[k];
	}
	return l;
}

/* A new time series named `name` (the __name__ label's value is set per
 * series: name_label is shared, so every series of one name shares it --
 * a family's series of one sample name are added together). */
static TimeSeries *new_series(struct rw *w, const Label *own, const Label *name, const Label *le)
{
	TimeSeries *t = arena_alloc(w->a, sizeof *t);
	Label **lp = arena_array(w->a, w->nslots, sizeof *lp);
	size_t k, n = 0;

	if (!t || !lp || w->nts == w->capts)
		return NULL;
	pcpustat__rw__time_series__init(t);
	for (k = 0; k < w->nslots; k++) {
		const struct slot *s = &w->slots[k];
		const Label *l = s->kind == SLOT_SERIES ? &own[s->idx] : s->kind == SLOT_LE ? le : s->fixed;

		if (s->kind == SLOT_FIXED && s->fixed == w->name_label)
			l = name;
		if (l && *l->value)
			lp[n++] = (Label *)l;
	}
	t->n_labels = n;
	t->labels = lp;
	w->ts[w->nts++] = t;
	return t;
}

static int add_sample(struct rw *w, TimeSeries *t, double v)
{
	Sample *s = arena_alloc(w->a, sizeof *s);
	Sample **sp = arena_alloc(w->a, sizeof *sp);

	if (!t || !s || !sp)
		return -1;
	pcpustat__rw__sample__init(s);
	s->value = v;
	s->timestamp = w->e->now_ms;
	*sp = s;
	t->n_samples = 1;
	t->samples = sp;
	return 0;
}

/* "<base><suffix>" in the arena, as a __name__ Label. */
static Label *name_with(struct rw *w, const char *base, const char *suffix)
{
	size_t nb = strlen(base), ns = strlen(suffix);
	char *s = arena_alloc(w->a, nb + ns + 1);

	if (!s)
		return NULL;
	memcpy(s, base, nb);
	memcpy(s + nb, suffix, ns + 1);
	return new_label(w->a, "__name__", s);
}

/* base^i = 2^(i * 2^-schema): native bucket i's upper bound in exposed
 * units (bucket 0 of a pcpu exponential histogram ends at base^(index-1)). */
double native_bound(int schema, int32_t i)
{
	return exp2(ldexp((double)i, -schema));
}

/* The native histogram of one series: schema, zero bucket, one span from
 * the first non-empty positive bucket to the last, deltas (pcpu's bucket b
 * >= 1 is native index native_index + b - 1; the last, +Inf, is empty). */
static int add_native(struct rw *w, TimeSeries *t, const struct pcpu_snapshot_family *f,
		      const struct pcpu_snapshot_series *se)
{
	const uint64_t *c = se->value.histogram.counts;
	Histogram *h = arena_alloc(w->a, sizeof *h);
	Histogram **hp = arena_alloc(w->a, sizeof *hp);
	BucketSpan *sp = arena_alloc(w->a, sizeof *sp);
	BucketSpan **spp = arena_alloc(w->a, sizeof *spp);
	int64_t *d = arena_array(w->a, f->nbuckets, sizeof *d), prev = 0;
	size_t lo = 1, hi = f->nbuckets - 1, b;
	uint64_t n = 0;

	if (!t || !h || !hp || !sp || !spp || !d)
		return -1;
	for (b = 0; b < f->nbuckets; b++)
		n += c[b];
	pcpustat__rw__histogram__init(h);
	h->count_case = PCPUSTAT__RW__HISTOGRAM__COUNT_COUNT_INT;
	h->count_int = n;
	h->sum = pcpu_stats_scale((double)se->value.histogram.sum, f->scale_exp10);
	h->schema = f->native_schema;
	h->zero_threshold = native_bound(f->native_schema, f->native_index - 1);
	h->zero_count_case = PCPUSTAT__RW__HISTOGRAM__ZERO_COUNT_ZERO_COUNT_INT;
	h->zero_count_int = c[0];
	while (lo < hi && !c[lo])
		lo++;
	while (hi > lo && !c[hi - 1])
		hi--;
	if (lo < hi) {
		pcpustat__rw__bucket_span__init(sp);
		sp->offset = f->native_index + (int32_t)(lo - 1);
		sp->length = (uint32_t)(hi - lo);
		for (b = lo; b < hi; b++) {
			d[b - lo] = (int64_t)c[b] - prev;
			prev = (int64_t)c[b];
		}
		*spp = sp;
		h->n_positive_spans = 1;
		h->positive_spans = spp;
		h->n_positive_deltas = hi - lo;
		h->positive_deltas = d;
	}
	h->timestamp = w->e->now_ms;
	*hp = h;
	t->n_histograms = 1;
	t->histograms = hp;
	return 0;
}

/* The classic series of one histogram series: the exposed buckets with
 * cumulative counts (le labels shared by the family), _sum, _count. */
static int add_classic(struct rw *w, const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
		       const Label *own, Label *const *le, size_t nexp, size_t *idx, uint64_t *cum,
		       const Label *const names[3])
{
	size_t k;

	pcpu_snapshot_histogram_buckets(f, se->value.histogram.counts, idx, cum, f->nbuckets);
	for (k = 0; k < nexp; k++)
		if (add_sample(w, new_series(w, own, names[0], le[k]), (double)cum[k]) < 0)
			return -1;
	if (add_sample(w, new_series(w, own, names[1], NULL),
		       pcpu_stats_scale((double)se->value.histogram.sum, f->scale_exp10)) < 0 ||
	    add_sample(w, new_series(w, own, names[2], NULL), (double)cum[nexp - 1]) < 0)
		return -1;
	return 0;
}

/* A histogram family: its le labels once, then each series. */
static int add_histograms(struct rw *w, const struct pcpu_snapshot_family *f)
{
	size_t nexp = pcpu_snapshot_histogram_buckets(f, NULL, NULL, NULL, 0), i, k;
	size_t *idx = arena_array(w->a, f->nbuckets, sizeof *idx);
	uint64_t *cum = arena_array(w->a, f->nbuckets, sizeof *cum);
	Label **le = arena_array(w->a, nexp, sizeof *le);
	const Label *names[4] = { name_with(w, f->name, "_bucket"), name_with(w, f->name, "_sum"),
				  name_with(w, f->name, "_count"), new_label(w->a, "__name__", f->name) };
	int native = w->e->native && (f->flags & PCPU_SNAPSHOT_NATIVE);

	if (!nexp || !idx || !cum || !le || !names[0] || !names[1] || !names[2] || !names[3])
		return -1;
	pcpu_snapshot_histogram_buckets(f, NULL, idx, NULL, f->nbuckets);
	for (k = 0; k < nexp; k++) {
		char buf[PCPU_FORMAT_NUMBER_MAX], *v;

		if (pcpu_snapshot_bucket_le(f, idx[k], buf, sizeof buf) < 0 || !(v = arena_strdup(w->a, buf)) ||
		    !(le[k] = new_label(w->a, "le", v)))
			return -1;
	}
	for (i = 0; i < f->nseries; i++) {
		const struct pcpu_snapshot_series *se = &f->series[i];
		const Label *own = series_labels(w, f, se);

		if (!own || add_classic(w, f, se, own, le, nexp, idx, cum, names) < 0)
			return -1;
		if (native && add_native(w, new_series(w, own, names[3], NULL), f, se) < 0)
			return -1;
	}
	return 0;
}

static int add_metadata(struct rw *w, const struct pcpu_snapshot_family *f, const char *name)
{
	MetricMetadata *m = arena_alloc(w->a, sizeof *m);

	if (!m)
		return -1;
	pcpustat__rw__metric_metadata__init(m);
	m->type = f->type == PCPU_METRIC_COUNTER	 ? PCPUSTAT__RW__METRIC_METADATA__METRIC_TYPE__COUNTER
		  : f->type == PCPU_METRIC_HISTOGRAM ? PCPUSTAT__RW__METRIC_METADATA__METRIC_TYPE__HISTOGRAM
		  : (f->flags & PCPU_SNAPSHOT_INFO)  ? PCPUSTAT__RW__METRIC_METADATA__METRIC_TYPE__INFO
						     : PCPUSTAT__RW__METRIC_METADATA__METRIC_TYPE__GAUGE;
	m->metric_family_name = (char *)name;
	m->help = (char *)(f->help ? f->help : "");
	m->unit = (char *)(f->unit ? f->unit : "");
	w->md[w->nmd++] = m;
	return 0;
}

static int add_family(struct rw *w, const struct pcpu_snapshot_family *f)
{
	const Label *name;
	size_t i;

	if (family_slots(w, f) < 0)
		return -1;
	if (f->type == PCPU_METRIC_HISTOGRAM)
		return add_metadata(w, f, f->name) < 0 ? -1 : add_histograms(w, f);
	name = name_with(w, f->name, f->type == PCPU_METRIC_COUNTER ? "_total" : "");
	if (!name || add_metadata(w, f, name->value) < 0)
		return -1;
	for (i = 0; i < f->nseries; i++) {
		const struct pcpu_snapshot_series *se = &f->series[i];
		const Label *own = series_labels(w, f, se);
		double v = f->type == PCPU_METRIC_COUNTER ? pcpu_stats_scale((double)se->value.counter, f->scale_exp10)
							  : pcpu_stats_scale((double)se->value.gauge, f->scale_exp10);

		if (!own || add_sample(w, new_series(w, own, name, NULL), v) < 0)
			return -1;
	}
	return 0;
}

/* Time series the snapshot makes (counted first, so that one array holds
 * them): 0 when it would overflow. */
static size_t count_series(const struct pcpu_snapshot *s, int native)
{
	size_t n = 0, i, per;

	for (i = 0; i < s->nfamilies; i++) {
		const struct pcpu_snapshot_family *f = &s->families[i];

		per = 1;
		if (f->type == PCPU_METRIC_HISTOGRAM)
			per = pcpu_snapshot_histogram_buckets(f, NULL, NULL, NULL, 0) + 2 +
			      (native && (f->flags & PCPU_SNAPSHOT_NATIVE));
		if (f->nseries && per > (SIZE_MAX / 4 - n) / f->nseries)
			return 0;
		n += per * f->nseries;
	}
	return n;
}

int rw_encode(const struct pcpu_snapshot *s, const struct push_encode *e, struct arena *a, uint8_t **out,
	      size_t *len, char *err, size_t cap)
{
	Pcpustat__Rw__WriteRequest req = PCPUSTAT__RW__WRITE_REQUEST__INIT;
	struct rw w = { .e = e, .a = a, .err = err, .errcap = cap };
	size_t i, plen, zmax;
	uint8_t *pb;
	char *z;

	*out = NULL;
	w.capts = count_series(s, e->native);
	w.ts = arena_array(a, w.capts ? w.capts : 1, sizeof *w.ts);
	w.md = arena_array(a, s->nfamilies ? s->nfamilies : 1, sizeof *w.md);
	if (!w.ts || !w.md)
		goto nomem;
	for (i = 0; i < s->nfamilies; i++) {
		if (add_family(&w, &s->families[i]) < 0)
			goto nomem;
		if (a->bytes > e->max_bytes)
			goto toobig;
	}
	req.n_timeseries = w.nts;
	req.timeseries = w.ts;
	req.n_metadata = w.nmd;
	req.metadata = w.md;
	plen = pcpustat__rw__write_request__get_packed_size(&req);
	zmax = snappy_max_compressed_length(plen);
	if (plen > e->max_bytes || zmax > e->max_bytes - plen)
		goto toobig;
	pb = arena_alloc(a, plen ? plen : 1);
	z = malloc(zmax ? zmax : 1);
	if (!pb || !z) {
		free(z);
		goto nomem;
	}
	pcpustat__rw__write_request__pack(&req, pb);
	if (snappy_compress((const char *)pb, plen, z, &zmax) != SNAPPY_OK) {
		free(z);
		snprintf(err, cap, "snappy could not compress %zu bytes", plen);
		errno = EINVAL;
		return -1;
	}
	*out = (uint8_t *)z;
	*len = zmax;
	return 0;
nomem:
	snprintf(err, cap, "out of memory encoding the write request");
	errno = ENOMEM;
	return -1;
toobig:
	snprintf(err, cap, "the write request is over --max-bytes (%zu)", e->max_bytes);
	errno = EFBIG;
	return -1;
}
