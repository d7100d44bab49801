/* SPDX-License-Identifier: MIT */
/*
 * Parsing a copy of a segment's directory: each entry's blob (names, help,
 * unit, label names and values, bucket bounds) read from the strings copy
 * and validated by the statistics layer's own rules, families sorted by id
 * and series linked to them.
 *
 * Validation is strict, but an invalid entry is only marked here: whether
 * it is corruption (an error naming the entry) or an entry changed while
 * it was copied is decided once the read is over (reader_snapshot.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/expose.h>

#include "../stats/stats.h"
#include "reader_internal.h"

/* Marks a parsed entry invalid; the message is used only if the entry turns
 * out not to have changed during the read (else it was in flux). */
static void set_bad(int *bad, char *msg, size_t cap, const char *text)
{
	*bad = 1;
	snprintf(msg, cap, "%s", text);
}
#define BAD(x, text) set_bad(&(x)->bad, (x)->msg, sizeof (x)->msg, (text))

/* The same for a series, whose message is allocated (struct ser): 0, or -1
 * when the budget or memory is exhausted (the parse fails, as for any other
 * allocation). */
static int ser_bad(struct parse *p, struct ser *s, const char *text)
{
	size_t n = strlen(text) + 1;
	char *m = pcpu__rd_alloc(p->b, n);

	s->bad = 1;
	if (!m)
		return -1;
	memcpy(m, text, n);
	free(s->msg);
	s->msg = m;
	return 0;
}

/* Next NUL-terminated string of the blob: s, or NULL if not terminated. */
static const char *blob_str(const char *blob, uint32_t len, uint32_t *pos)
{
	const char *s, *nul;

	if (*pos >= len)
		return NULL;
	s = blob + *pos;
	nul = memchr(s, '\0', len - *pos);
	if (!nul)
		return NULL;
	*pos += (uint32_t)(nul - s) + 1;
	return s;
}

const char *pcpu__rd_entry_blob(const struct parse *p, const struct pcpu__seg_entry *e)
{
	uint64_t end;

	if (e->blob_len > PCPU__SEG_BLOB_MAX ||
	    __builtin_add_overflow(e->blob_off, (uint64_t)e->blob_len, &end) || end > p->slen)
		return NULL;
	return p->S + e->blob_off;
}

/* Room for a family's exported bucket indices, charged to the budget. */
static int alloc_exported(struct parse *p, struct fam *f, uint32_t n)
{
	if (pcpu__rd_charge(p->b, (uint64_t)n * sizeof *f->exported) < 0)
		return -1;
	f->exported = malloc((size_t)n * sizeof *f->exported);
	if (!f->exported)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	return 0;
}

/* The size of a value of family entry fe's type (checked: a type the
 * table describes), in one slot: where the type keeps its value. */
static uint64_t value_size(const struct pcpu__seg_entry *fe)
{
	enum pcpu_value_kind v = pcpu_metric_type_info((enum pcpu_metric_type)fe->type)->value;

	if (v == PCPU_VALUE_BUCKETS && (fe->u32a & PCPU__SEG_HIST_SPARSE)) /* 2.10: its table */
		return 8 * (PCPU__SEG_SPARSE_GROUPS(fe->nbuckets) + !!(fe->u32a & PCPU__SEG_HIST_WIDE));
	if (v == PCPU_VALUE_BUCKETS)
		return fe->u32a & PCPU__SEG_HIST_WIDE    ? PCPU__SEG_HISTOGRAM_WIDE_SIZE(fe->nbuckets)
		       : fe->u32a & PCPU__SEG_HIST_PAIRS ? PCPU__SEG_HISTOGRAM_PAIRS_SIZE(fe->nbuckets)
							 : PCPU__SEG_HISTOGRAM_SIZE(fe->nbuckets);
	if (fe->flags & PCPU__SEG_E_NANOS)
		return PCPU__SEG_FRACTION_SIZE; /* 2.8; a 2.7 writer's 16 bytes: link_series() */
	return v == PCPU_VALUE_UNSIGNED ? PCPU__SEG_COUNTER_SIZE : PCPU__SEG_GAUGE_SIZE;
}

/* ---- families ------------------------------------------------------------------ */

/*
 * The functions below mark f bad and return 0 for an invalid entry (the
 * caller stops at f->bad), and return -1 only when the budget or memory
 * runs out.
 */

/* The family's strings: name, help, unit, label names; the info flag. */
static int parse_family_strings(struct parse *p, struct fam *f, const char *blob, uint32_t *pos)
{
	const struct pcpu__seg_entry *e = f->e;
	/* The type was checked (parse_family()): the table's rules apply, as
	 * the registry and pcpu_snapshot_write() apply them. */
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info((enum pcpu_metric_type)e->type);
	uint32_t l;

	f->value = t->value;
	f->name = blob_str(blob, e->blob_len, pos);
	if (e->flags & PCPU__SEG_E_HAS_HELP)
		f->help = blob_str(blob, e->blob_len, pos);
	f->unit = blob_str(blob, e->blob_len, pos);
	if (!f->name || !f->unit || ((e->flags & PCPU__SEG_E_HAS_HELP) && !f->help))
		return BAD(f, "string not terminated"), 0;
	if (pcpu_stats_check_metric_name(f->name) < 0)
		return BAD(f, pcpu_stats_error()), 0;
	if (f->help && pcpu__check_help(f->help) < 0)
		return BAD(f, pcpu_stats_error()), 0;
	if (*f->unit && pcpu__check_unit(f->name, f->unit) < 0)
		return BAD(f, pcpu_stats_error()), 0;
	if (!*f->unit)
		f->unit = NULL;
	if (e->nlabels) {
		f->label_names = pcpu__rd_alloc(p->b, (uint64_t)e->nlabels * sizeof *f->label_names);
		if (!f->label_names)
			return -1;
	}
	for (l = 0; l < e->nlabels; l++) {
		uint32_t k;

		f->label_names[l] = blob_str(blob, e->blob_len, pos);
		if (!f->label_names[l])
			return BAD(f, "label name not terminated"), 0;
		if (pcpu_stats_check_label_name(f->label_names[l]) < 0)
			return BAD(f, pcpu_stats_error()), 0;
		if (t->bucket_label && strcmp(f->label_names[l], t->bucket_label) == 0)
			return BAD(f, "label \"le\" in a histogram"), 0;
		for (k = 0; k < l; k++)
			if (strcmp(f->label_names[k], f->label_names[l]) == 0)
				return BAD(f, "label name twice"), 0;
	}
	if (e->flags & PCPU__SEG_E_INFO) { /* 2.4: a gauge x_info, no unit or scale */
		if (!(t->flags & PCPU_TYPE_INFO) || f->unit || e->scale_exp10 != 0 ||
		    !pcpu__info_name_len(f->name, PCPU_SNAPSHOT_INFO))
			return BAD(f, "info flag on a family that is not a gauge x_info"), 0;
		f->info = 1;
	}
	if (e->flags & PCPU__SEG_E_NANOS) { /* 2.7: values with billionths */
		if (!(t->flags & PCPU_TYPE_FRACTIONS) || t->value == PCPU_VALUE_BUCKETS ||
		    e->scale_exp10 != 0 || f->info)
			return BAD(f, "fraction flag on a family that is not a counter or gauge of "
				      "scale 0"), 0;
		f->nanos = 1;
	}
	return 0;
}

/* Explicit and exponential layouts: the bounds, stored after the strings
 * (8-byte aligned); an exponential one's native layout and exposed set. */
static int parse_stored_bounds(struct parse *p, struct fam *f, const char *blob, uint32_t pos,
			       uint32_t scheme)
{
	const struct pcpu__seg_entry *e = f->e;
	uint64_t need, b, nexportable = 0;

	pos = (pos + 7) & ~7u;
	if (e->nbuckets - 1 > PCPU__SEG_MAX_BOUNDS)
		return BAD(f, "too many bounds"), 0;
	need = (uint64_t)pos + (uint64_t)(e->nbuckets - 1) * 8;
	if (need != e->blob_len)
		return BAD(f, "bounds do not fill the blob"), 0;
	memcpy(f->upper, blob + pos, (size_t)(e->nbuckets - 1) * 8);
	for (b = 1; b + 1 < e->nbuckets; b++)
		if (f->upper[b] <= f->upper[b - 1])
			return BAD(f, "bounds not increasing"), 0;
	if (scheme != PCPU__SEG_HIST_EXPONENTIAL)
		return 0;
	{
		int64_t first = (int64_t)e->value_off;
		uint32_t schema = e->u32b & ((1u << PCPU__SEG_EXPORT_LIMIT_SHIFT) - 1);
		uint32_t limit1 = e->u32b >> PCPU__SEG_EXPORT_LIMIT_SHIFT;

		if (schema > PCPU__SEG_SCHEMA_BIAS + 8 || f->upper[0] < 0 ||
		    first < -(INT32_MAX / 2) || first > INT32_MAX / 2 ||
		    limit1 > e->nbuckets) /* 1 + at most the finite buckets */
			return BAD(f, "bad native histogram layout"), 0;
		f->native = 1;
		f->schema = (int)schema - PCPU__SEG_SCHEMA_BIAS;
		f->native_index = (int32_t)first;
		nexportable = limit1 ? limit1 - 1 : e->nbuckets - 1;
	}
	if (alloc_exported(p, f, e->nbuckets - 1) < 0)
		return -1;
	if (e->flags & PCPU__SEG_E_EXPORT_MASK) { /* 2.4: its own rule */
		unsigned lg1 = (e->flags & PCPU__SEG_E_EXPORT_MASK) >> PCPU__SEG_E_EXPORT_SHIFT;

		if (lg1 > PCPU__SEG_MAX_EXPORT_LG1 || e->serial > (uint64_t)INT64_MAX)
			return BAD(f, "bad exported bounds of a native histogram"), 0;
		f->nexport = pcpu__native_export_rule(f->upper, f->native_index, nexportable,
						      f->schema, lg1 - 1, (int64_t)e->serial,
						      f->exported);
	} else {
		f->nexport = pcpu__native_export_list(f->native_index, nexportable, f->schema,
						      f->exported);
	}
	return 0;
}

/* A log-linear layout: the bounds rebuilt from the precision (u32b), and
 * the exposed set from the 2.2 export rule (value_off, serial). */
static int parse_loglinear(struct parse *p, struct fam *f, uint32_t pos)
{
	const struct pcpu__seg_entry *e = f->e;
	uint64_t b;

	if (!pcpu__loglinear_valid(e->u32b, e->nbuckets))
		return BAD(f, "bad log-linear layout"), 0;
	if (pos != e->blob_len)
		return BAD(f, "trailing bytes in blob"), 0;
	for (b = 0; b + 1 < e->nbuckets; b++)
		f->upper[b] = pcpu__loglinear_upper(e->u32b, b);
	if (!e->value_off)
		return 0;
	if (e->value_off > PCPU__SEG_MAX_EXPORT_LG1 || e->value_off - 1 > e->u32b)
		return BAD(f, "bad exported bounds per power of two"), 0;
	if (alloc_exported(p, f, e->nbuckets - 1) < 0)
		return -1;
	f->nexport = pcpu__export_list(f->upper, e->nbuckets - 1, (unsigned)e->value_off - 1,
				       (int64_t)e->serial, f->exported);
	return 0;
}

/* A histogram family's bucket layout, from the blob past its strings. */
static int parse_histogram(struct parse *p, struct fam *f, const char *blob, uint32_t pos)
{
	const struct pcpu__seg_entry *e = f->e;
	uint32_t scheme;

	if ((e->u32a & ~(PCPU__SEG_HIST_PAIRS | PCPU__SEG_HIST_WIDE | PCPU__SEG_HIST_SPARSE | 0xffu)) ||
	    ((e->u32a & (PCPU__SEG_HIST_WIDE | PCPU__SEG_HIST_SPARSE)) && !(e->u32a & PCPU__SEG_HIST_PAIRS)))
		return BAD(f, "unknown histogram scheme"), 0;
	f->pairs = (e->u32a & PCPU__SEG_HIST_PAIRS) != 0;
	f->sparse = (e->u32a & PCPU__SEG_HIST_SPARSE) != 0; /* 2.10 */
	f->wide = f->nanos = (e->u32a & PCPU__SEG_HIST_WIDE) != 0; /* 2.8: with fractions */
	scheme = e->u32a & 0xffu;
	if (e->nbuckets < 2 || value_size(e) > p->h->slot_stride)
		return BAD(f, "bad bucket count"), 0;
	if (pcpu__rd_charge(p->b, (uint64_t)(e->nbuckets - 1) * 8) < 0)
		return -1;
	f->upper = malloc((size_t)(e->nbuckets - 1) * sizeof *f->upper);
	if (!f->upper)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	if (scheme == PCPU__SEG_HIST_LOG_LINEAR)
		return parse_loglinear(p, f, pos);
	if (scheme == PCPU__SEG_HIST_EXPLICIT || scheme == PCPU__SEG_HIST_EXPONENTIAL)
		return parse_stored_bounds(p, f, blob, pos, scheme);
	return BAD(f, "unknown histogram scheme"), 0;
}

static int parse_family(struct parse *p, struct fam *f)
{
	const struct pcpu__seg_entry *e = f->e;
	const char *blob;
	uint32_t pos = 0;

	if (!pcpu_metric_type_info((enum pcpu_metric_type)e->type))
		return BAD(f, "unknown metric type"), 0;
	if (e->scale_exp10 > PCPU_STATS_SCALE_MAX || e->scale_exp10 < -PCPU_STATS_SCALE_MAX)
		return BAD(f, "scale out of range"), 0;
	if (e->nlabels > PCPU_STATS_LABELS_MAX)
		return BAD(f, "too many labels"), 0;
	if (e->family_id == 0)
		return BAD(f, "family id 0"), 0;
	blob = pcpu__rd_entry_blob(p, e);
	if (!blob)
		return BAD(f, "blob outside the string table"), 0;
	if (parse_family_strings(p, f, blob, &pos) < 0)
		return -1;
	if (f->bad)
		return 0;
	if (pcpu_metric_type_info((enum pcpu_metric_type)e->type)->value == PCPU_VALUE_BUCKETS)
		return parse_histogram(p, f, blob, pos);
	if (pos != e->blob_len)
		return BAD(f, "trailing bytes in blob"), 0;
	return 0;
}

/* ---- series and links ------------------------------------------------------------ */

static int cmp_fam_id(const void *a, const void *b)
{
	uint64_t x = ((const struct fam *)a)->e->family_id, y = ((const struct fam *)b)->e->family_id;
	return x < y ? -1 : x > y;
}

static struct fam *find_family(struct parse *p, uint64_t id)
{
	size_t lo = 0, hi = p->nfams;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t m = p->fams[mid].e->family_id;
		if (m == id)
			return &p->fams[mid];
		if (m < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int parse_series(struct parse *p, struct ser *s)
{
	const struct pcpu__seg_entry *e = s->e;
	const char *blob;
	uint32_t pos = 0, l;

	if (!pcpu_metric_type_info((enum pcpu_metric_type)e->type))
		return ser_bad(p, s, "unknown metric type");
	if (e->nlabels > PCPU_STATS_LABELS_MAX)
		return ser_bad(p, s, "too many labels");
	blob = pcpu__rd_entry_blob(p, e);
	if (!blob)
		return ser_bad(p, s, "blob outside the string table");
	if (e->nlabels) {
		s->values = pcpu__rd_alloc(p->b, (uint64_t)e->nlabels * sizeof *s->values);
		if (!s->values)
			return -1;
	}
	for (l = 0; l < e->nlabels; l++) {
		s->values[l] = blob_str(blob, e->blob_len, &pos);
		if (!s->values[l])
			return ser_bad(p, s, "label value not terminated");
		if (pcpu_stats_check_label_value(s->values[l]) < 0)
			return ser_bad(p, s, pcpu_stats_error());
	}
	if (pos != e->blob_len)
		return ser_bad(p, s, "trailing bytes in blob");
	if (e->kind == PCPU__SEG_GROUP_SERIES) {
		/* Checked against its GROUP entry once both are known stable. */
		if (pcpu_metric_type_info((enum pcpu_metric_type)e->type)->value == PCPU_VALUE_BUCKETS)
			return ser_bad(p, s, "a group member is a counter or a gauge");
		if (e->u32a >= PCPU__SEG_GROUP_MAX || e->u32b != 8 || e->value_off >= p->used)
			return ser_bad(p, s, "group member: bad member index, size or group entry");
		s->group = 1;
		s->loc = UINT64_MAX; /* no storage */
		s->serial = e->serial;
		return 0;
	}
	/* Where its value lies: checked by its family's kind (link_series()). */
	s->loc = UINT64_MAX;
	s->size = e->u32b;
	s->serial = e->serial;
	return 0;
}

/* A series' value in a chunk: checked, its place in s->loc. */
static int value_place(struct parse *p, struct ser *s)
{
	const struct pcpu__seg_entry *e = s->e;
	uint64_t end;

	if (e->u32a >= p->h->nchunks)
		return ser_bad(p, s, "chunk past the end");
	if (e->value_off % PCPU__SEG_VALUE_ALIGN)
		return ser_bad(p, s, "value not aligned to 8 bytes");
	if (__builtin_add_overflow(e->value_off, (uint64_t)e->u32b, &end) ||
	    end > p->h->slot_stride || e->u32b == 0)
		return ser_bad(p, s, "value outside its slot");
	/* slot_stride <= 2^40, so the offset fits below bit 40. */
	s->loc = ((uint64_t)e->u32a << 40) | e->value_off;
	return 0;
}

/* 2.10: a sparse histogram's table (format.h), in the strings copy: each
 * group made, and the double sum's pair, a part of the series (p->parts).
 * A word being stored (a half 0), or naming a chunk this read's header
 * did not count yet, is a group not made yet. */
static int sparse_parts(struct parse *p, struct ser *s)
{
	const struct pcpu__seg_entry *e = s->e;
	uint64_t ngroups = PCPU__SEG_SPARSE_GROUPS(s->fam->e->nbuckets), k, n = e->u32b / 8;
	size_t first = p->nparts;

	if (e->u32a != 0)
		return ser_bad(p, s, "sparse histogram: a chunk given (its table names the chunks)");
	if (e->value_off % 8 || e->value_off > p->slen || e->u32b > p->slen - e->value_off)
		return ser_bad(p, s, "sparse histogram: table outside the string table");
	s->sparse = 1;
	for (k = 0; k < n; k++) {
		uint64_t w = pcpu__rd_ld64((const unsigned char *)p->S + e->value_off + 8 * k), size;
		uint32_t chunk, off;
		int placed = pcpu__seg_sparse_place(w, &chunk, &off);
		struct ser *part;

		if (placed < 0)
			goto bad;
		if (placed == 0 || chunk >= p->h->nchunks)
			continue;
		size = k < ngroups ? PCPU__SEG_SPARSE_GROUP_SIZE : 16;
		if (off % 16 || off + size > p->h->slot_stride)
			goto bad;
		if (p->nparts == p->partcap) {
			size_t cap = p->partcap ? 2 * p->partcap : 64;
			struct ser *more;

			if (pcpu__rd_charge(p->b, (uint64_t)(cap - p->partcap) * sizeof *more) < 0)
				return -1;
			more = realloc(p->parts, cap * sizeof *more);
			if (!more)
				return pcpu__seg_fail(ENOMEM, "out of memory");
			p->parts = more;
			p->partcap = cap;
		}
		part = &p->parts[p->nparts++];
		memset(part, 0, sizeof *part);
		part->idx = s->idx;
		part->e = e;
		part->fam = s->fam;
		part->whole = s;
		part->first = k < ngroups ? (uint32_t)(k * PCPU__SEG_SPARSE_GROUP) : PCPU__RD_SUM_PAIR;
		part->loc = ((uint64_t)chunk << 40) | off;
		part->size = (uint32_t)size;
		part->serial = e->serial;
	}
	return 0;
bad:
	p->nparts = first; /* its parts so far: none of a bad series is read */
	return ser_bad(p, s, "sparse histogram: a bad place in its table of groups");
}

/* Links series to families (which must be sorted by id). */
static int link_series(struct parse *p, struct ser *s)
{
	struct fam *f;

	if (s->bad)
		return 0;
	f = find_family(p, s->e->family_id);
	if (!f)
		return 0; /* orphan: decided later (flux or corruption) */
	s->fam = f;
	if (f->bad)
		return 0;
	if (f->e->type != s->e->type || f->e->nlabels != s->e->nlabels)
		return ser_bad(p, s, "type or labels differ from the family's");
	if (value_size(f->e) != s->e->u32b &&
	    !(f->nanos && !f->wide && s->e->u32b == PCPU__SEG_NANOS_SIZE)) /* a 2.7 writer's */
		return ser_bad(p, s, "value size does not match the type");
	if (s->group)
		return 0;
	return f->sparse ? sparse_parts(p, s) : value_place(p, s);
}

/* ---- the directory --------------------------------------------------------------- */

/* Counts the entries that are not being changed, and allocates for them. */
static int alloc_entries(struct parse *p)
{
	uint64_t i;

	for (i = 0; i < p->used; i++) {
		const struct pcpu__seg_entry *e = ENTRY_AT(p, i);
		if (!(e->seq & 1) && e->kind == PCPU__SEG_FAMILY)
			p->nfams++;
		else if (!(e->seq & 1) &&
			 (e->kind == PCPU__SEG_SERIES || e->kind == PCPU__SEG_GROUP_SERIES))
			p->nsers++;
	}
	if (pcpu__rd_charge(p->b, p->nfams * sizeof *p->fams + p->nsers * sizeof *p->sers) < 0)
		return -1;
	p->fams = calloc(p->nfams ? p->nfams : 1, sizeof *p->fams);
	p->sers = calloc(p->nsers ? p->nsers : 1, sizeof *p->sers);
	if (!p->fams || !p->sers)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	return 0;
}

int pcpu__rd_parse_directory(struct parse *p)
{
	size_t fi = 0, si = 0;
	uint64_t i;

	/* Families first (series link to them by id). */
	if (alloc_entries(p) < 0)
		return -1;
	for (i = 0; i < p->used; i++) {
		const struct pcpu__seg_entry *e = ENTRY_AT(p, i);

		if (e->seq & 1)
			continue;
		if (e->kind == PCPU__SEG_FAMILY) {
			p->fams[fi].idx = (uint32_t)i;
			p->fams[fi].e = e;
			if (parse_family(p, &p->fams[fi++]) < 0)
				return -1;
		} else if (e->kind == PCPU__SEG_SERIES || e->kind == PCPU__SEG_GROUP_SERIES) {
			p->sers[si].idx = (uint32_t)i;
			p->sers[si].e = e;
			if (parse_series(p, &p->sers[si++]) < 0)
				return -1;
		}
	}
	qsort(p->fams, p->nfams, sizeof *p->fams, cmp_fam_id);
	/* Ids are never reused by a writer: two families with one id are a
	 * forged directory (series could not tell them apart). */
	for (i = 1; i < p->nfams; i++)
		if (p->fams[i].e->family_id == p->fams[i - 1].e->family_id) {
			BAD(&p->fams[i], "family id used twice");
			BAD(&p->fams[i - 1], "family id used twice");
		}
	for (i = 0; i < p->nsers; i++)
		if (link_series(p, &p->sers[i]) < 0)
			return -1;
	return 0;
}

void pcpu__rd_parse_free(struct parse *p)
{
	size_t i;

	/* nfams and nsers are counted before the arrays are allocated: an
	 * attempt that fails in between (budget, memory) has counts and no
	 * arrays. */
	for (i = 0; p->fams && i < p->nfams; i++) {
		free(p->fams[i].label_names);
		free(p->fams[i].upper);
		free(p->fams[i].exported);
	}
	for (i = 0; p->sers && i < p->nsers; i++) {
		free(p->sers[i].values);
		free(p->sers[i].counts);
		free(p->sers[i].slots);
		free(p->sers[i].dslots);
		free(p->sers[i].msg);
	}
	free(p->fams);
	free(p->sers);
	free(p->parts);
	pcpu__rd_plan_free(p->plan);
	p->fams = NULL;
	p->sers = NULL;
	p->parts = NULL;
	p->plan = NULL;
	p->nfams = p->nsers = p->nparts = p->partcap = 0;
}
