/* SPDX-License-Identifier: MIT */
/*
 * Assembling a reader snapshot (struct pcpu_reader_snapshot) from the
 * entries a read kept: families sorted by name, each family's series in
 * creation order, as the writing process's own snapshot has them. Every
 * allocation of the result is kept on one list and freed at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../stats/stats.h"
#include "reader_internal.h"

struct snap_impl {
	struct pcpu_reader_snapshot pub; /* first: the public pointer is this */
	struct pcpu_snapshot_family *fams;
	const int64_t ***slots; /* [family][series] -> nslots values, or NULL */
	int per_slot;
	uint32_t nslots;
	/* everything else: one list of allocations */
	void **allocs;
	size_t nallocs, capallocs;
	/* Holders beyond the first (atomic): the reader's cache keeps the
	 * snapshot its directory was built into, and snapshots derived from
	 * it (pcpu__rd_derive()) share its names and labels. */
	unsigned long holds;
	struct snap_impl *base; /* a derived snapshot's, held */
};

static void *keep(struct snap_impl *s, void *p)
{
	if (!p)
		return NULL;
	if (s->nallocs == s->capallocs) {
		size_t cap = s->capallocs ? s->capallocs * 2 : 64;
		void **a = realloc(s->allocs, cap * sizeof *a);
		if (!a) {
			free(p);
			return NULL;
		}
		s->allocs = a;
		s->capallocs = cap;
	}
	s->allocs[s->nallocs++] = p;
	return p;
}

void pcpu__rd_snapshot_hold(struct pcpu_reader_snapshot *pub)
{
	__atomic_add_fetch(&((struct snap_impl *)pub)->holds, 1, __ATOMIC_RELAXED);
}

void pcpu_reader_snapshot_free(struct pcpu_reader_snapshot *pub)
{
	struct snap_impl *s = (struct snap_impl *)pub;
	size_t i;

	if (!s)
		return;
	/* Not the last holder: another (the reader's cache, a derived
	 * snapshot) still reads it. The acquire orders its reads before the
	 * last holder's frees. */
	if (__atomic_load_n(&s->holds, __ATOMIC_ACQUIRE) != 0 &&
	    __atomic_fetch_sub(&s->holds, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	for (i = 0; i < s->nallocs; i++)
		free(s->allocs[i]);
	free(s->allocs);
	if (s->base)
		pcpu_reader_snapshot_free(&s->base->pub);
	free(s);
}

const int64_t *pcpu_reader_snapshot_slots(const struct pcpu_reader_snapshot *pub, size_t family,
					  size_t series)
{
	const struct snap_impl *s = (const struct snap_impl *)pub;

	if (!s || !s->per_slot || family >= s->pub.snapshot.nfamilies ||
	    series >= s->fams[family].nseries) {
		errno = EINVAL;
		return NULL;
	}
	if (!s->slots[family][series]) {
		/* A group member's value is read whole with its group (the
		 * lanes, not the slots, hold it): there is no per-slot split. */
		errno = ENODATA;
		return NULL;
	}
	return s->slots[family][series];
}

/* The writer's order (pcpu__cmp_family_order()): by name, then a name's
 * label sets by their label names. */
static int cmp_fam_name(const void *a, const void *b)
{
	const struct fam *x = *(const struct fam *const *)a, *y = *(const struct fam *const *)b;

	return pcpu__cmp_family_order(x->name, x->e->nlabels, x->label_names, y->name,
				      y->e->nlabels, y->label_names);
}

static int str_same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* 2.8: two families of one name are two label sets of one metric
 * (PCPU_FAMILY_LABELSET): everything but their label names alike, and
 * those not the same set. Anything else is a forged directory. */
static int same_metric(const struct fam *x, const struct fam *y)
{
	const struct pcpu__seg_entry *a = x->e, *b = y->e;

	if (a->type != b->type || a->scale_exp10 != b->scale_exp10 || x->info != y->info ||
	    x->nanos != y->nanos || x->native != y->native || !str_same(x->help, y->help) ||
	    !str_same(x->unit, y->unit) ||
	    pcpu__same_label_set(a->nlabels, x->label_names, b->nlabels, y->label_names))
		return 0;
	if (x->value != PCPU_VALUE_BUCKETS)
		return 1;
	return a->nbuckets == b->nbuckets && (a->u32a & 0xffu) == (b->u32a & 0xffu) &&
	       memcmp(x->upper, y->upper, (size_t)(a->nbuckets - 1) * sizeof *x->upper) == 0 &&
	       x->nexport == y->nexport && !x->exported == !y->exported &&
	       (!x->exported || memcmp(x->exported, y->exported, x->nexport * sizeof *x->exported) == 0) &&
	       x->schema == y->schema && x->native_index == y->native_index;
}

static int cmp_ser_labels(const void *a, const void *b)
{
	const struct ser *x = *(const struct ser *const *)a, *y = *(const struct ser *const *)b;
	unsigned l;

	for (l = 0; l < x->e->nlabels; l++) {
		int c = strcmp(x->values[l], y->values[l]);
		if (c)
			return c;
	}
	return 0;
}

static int cmp_ser_serial(const void *a, const void *b)
{
	const struct ser *x = *(const struct ser *const *)a, *y = *(const struct ser *const *)b;

	return (x->serial > y->serial) - (x->serial < y->serial);
}

/* By family, then label values: groups each family's series together and
 * puts duplicates side by side. */
static int cmp_ser_fam_labels(const void *a, const void *b)
{
	const struct ser *x = *(const struct ser *const *)a, *y = *(const struct ser *const *)b;

	if (x->fam != y->fam)
		return x->fam < y->fam ? -1 : 1;
	return cmp_ser_labels(a, b);
}

/* The kept families, sorted by name (fv has room for all). */
static size_t sort_families(struct parse *p, const unsigned char *kept_fam, struct fam **fv)
{
	size_t nf = 0, i;

	for (i = 0; i < p->nfams; i++)
		if (kept_fam[i])
			fv[nf++] = &p->fams[i];
	qsort(fv, nf, sizeof *fv, cmp_fam_name);
	return nf;
}

/* Every kept series, grouped by family: one sort, not one scan of all
 * series per family. Sets each family's first and count in sv. 0, or -1
 * with EBADMSG for two series of a family with the same labels. */
static int group_series(struct parse *p, const unsigned char *kept_ser, struct ser **sv)
{
	size_t ns = 0, k;

	for (k = 0; k < p->nsers; k++)
		if (kept_ser[k])
			sv[ns++] = &p->sers[k];
	qsort(sv, ns, sizeof *sv, cmp_ser_fam_labels);
	for (k = 0; k < ns; k++) {
		struct fam *f = sv[k]->fam;

		if (k == 0 || sv[k - 1]->fam != f) {
			f->first = k;
			f->count = 0;
		} else if (cmp_ser_labels(&sv[k], &sv[k - 1]) == 0) {
			return pcpu__seg_fail(EBADMSG,
					      "segment %s: corrupted (two series of %.100s with the same labels)",
					      p->r->name, f->name);
		}
		f->count++;
	}
	return 0;
}

/* Family f's public description, its allocations moved into s. 0, or -1
 * out of memory. */
static int build_family(struct snap_impl *s, struct fam *f, struct pcpu_snapshot_family *out)
{
	out->name = f->name;
	out->help = f->help;
	out->unit = f->unit;
	out->type = (enum pcpu_metric_type)f->e->type;
	out->scale_exp10 = f->e->scale_exp10;
	out->flags = (f->native ? PCPU_SNAPSHOT_NATIVE : 0) | (f->info ? PCPU_SNAPSHOT_INFO : 0) |
		     (f->nanos ? PCPU_SNAPSHOT_NANOS : 0);
	out->native_schema = f->schema;
	out->native_index = f->native_index;
	out->nlabels = f->e->nlabels;
	out->label_names = f->label_names;
	if (!keep(s, f->label_names) && f->label_names)
		return -1;
	f->label_names = NULL;
	if (f->value != PCPU_VALUE_BUCKETS)
		return 0;
	out->nbuckets = f->e->nbuckets;
	out->bucket_upper = keep(s, f->upper);
	if (!out->bucket_upper)
		return -1;
	f->upper = NULL;
	if (f->exported) {
		out->export_buckets = keep(s, f->exported);
		if (!out->export_buckets)
			return -1;
		out->nexport = f->nexport;
		f->exported = NULL;
	}
	return 0;
}

/* Series se's value as read (its accumulators) into out, its arrays moved
 * into s. 0, or -1 out of memory. */
static int series_value(struct snap_impl *s, const struct fam *f, struct ser *se,
			struct pcpu_snapshot_series *out)
{
	switch (f->value) {
	case PCPU_VALUE_UNSIGNED:
		out->value.counter = se->acc0;
		if (f->nanos) {
			out->value.fixed.nanos = (int64_t)se->acc1;
			memcpy(&out->value.fixed.residue, &se->acc2, sizeof(double));
		}
		break;
	case PCPU_VALUE_SIGNED:
		/* An info series is 1, as the writer's own snapshot has it,
		 * whatever its slots hold. */
		out->value.gauge = f->info ? 1 : (int64_t)se->acc0;
		if (f->nanos) {
			out->value.fixed.nanos = (int64_t)se->acc1;
			memcpy(&out->value.fixed.residue, &se->acc2, sizeof(double));
		}
		break;
	default:
		out->value.histogram.counts = se->counts;
		out->value.histogram.sum = (int64_t)se->acc0;
		if (f->wide) {
			/* The slots' doubles in slot order, then the residue:
			 * the writer's own read. */
			double sum = 0.0, r;
			uint32_t slot;

			for (slot = 0; slot < s->nslots; slot++)
				sum += se->dslots[slot];
			memcpy(&r, &se->acc2, sizeof r);
			out->value.histogram.residue = sum + r;
		}
		if (!keep(s, se->counts))
			return -1;
		se->counts = NULL;
	}
	return 0;
}

/* Family i's series fs[0..n), in creation order (as the writing process's
 * own snapshot), their allocations moved into s. 0, or -1 out of memory. */
static int build_series(struct snap_impl *s, size_t i, const struct fam *f, struct ser **fs,
			size_t n)
{
	struct pcpu_snapshot_family *out = &s->fams[i];
	struct pcpu_snapshot_series *series;
	size_t k;

	qsort(fs, n, sizeof *fs, cmp_ser_serial);
	series = keep(s, calloc(n ? n : 1, sizeof *series));
	s->slots[i] = keep(s, calloc(n ? n : 1, sizeof *s->slots[i]));
	if (!series || !s->slots[i])
		return -1;
	for (k = 0; k < n; k++) {
		struct ser *se = fs[k];

		series[k].label_values = se->values;
		if (se->values && !keep(s, se->values))
			return -1;
		se->values = NULL;
		if (series_value(s, f, se, &series[k]) < 0)
			return -1;
		s->slots[i][k] = se->slots;
		if (se->slots && !keep(s, se->slots))
			return -1;
		se->slots = NULL;
	}
	out->nseries = n;
	out->series = series;
	return 0;
}

struct pcpu_reader_snapshot *pcpu__rd_build(struct parse *p, const char *S_owned,
					    const unsigned char *kept_fam,
					    const unsigned char *kept_ser, struct ser ***order)
{
	struct snap_impl *s = calloc(1, sizeof *s);
	struct fam **fv = NULL;
	struct ser **sv = NULL;
	size_t nf, i;

	if (!s) {
		free((void *)S_owned);
		pcpu__seg_fail(ENOMEM, "out of memory");
		return NULL;
	}
	s->per_slot = (p->flags & PCPU_READER_PER_SLOT) != 0;
	s->nslots = p->h->nslots;
	if (!keep(s, (void *)S_owned))
		goto nomem;
	fv = malloc((p->nfams ? p->nfams : 1) * sizeof *fv);
	sv = malloc((p->nsers ? p->nsers : 1) * sizeof *sv);
	if (!fv || !sv)
		goto nomem;
	nf = sort_families(p, kept_fam, fv);
	if (group_series(p, kept_ser, sv) < 0)
		goto fail;
	for (i = 1; i < nf; i++)
		if (strcmp(fv[i]->name, fv[i - 1]->name) == 0 && !same_metric(fv[i], fv[i - 1])) {
			pcpu__seg_fail(EBADMSG,
				       "segment %s: corrupted (two families named %.100s that are not two "
				       "label sets of one metric)",
				       p->r->name, fv[i]->name);
			goto fail;
		}
	s->fams = keep(s, calloc(nf ? nf : 1, sizeof *s->fams));
	s->slots = keep(s, calloc(nf ? nf : 1, sizeof *s->slots));
	if (!s->fams || !s->slots)
		goto nomem;
	for (i = 0; i < nf; i++)
		if (build_family(s, fv[i], &s->fams[i]) < 0 ||
		    build_series(s, i, fv[i], sv + fv[i]->first, fv[i]->count) < 0)
			goto nomem;
	s->pub.snapshot.nfamilies = nf;
	s->pub.snapshot.families = s->fams;
	if (order) {
		/* The families' series, as build_series() left them: sorted
		 * by family name, each family's in creation order. */
		struct ser **o = malloc((p->nsers ? p->nsers : 1) * sizeof *o);
		size_t n = 0, k;

		if (!o)
			goto nomem;
		for (i = 0; i < nf; i++)
			for (k = 0; k < fv[i]->count; k++)
				o[n++] = sv[fv[i]->first + k];
		*order = o;
	}
	free(fv);
	free(sv);
	return &s->pub;
nomem:
	pcpu__seg_fail(ENOMEM, "out of memory");
fail:
	free(fv);
	free(sv);
	pcpu_reader_snapshot_free(&s->pub);
	return NULL;
}

void pcpu__rd_mark_checked(struct pcpu_reader_snapshot *pub)
{
	struct snap_impl *s = (struct snap_impl *)pub;
	int saved = errno;
	size_t i;

	if (pcpu__snapshot_check(&pub->snapshot) == 0)
		for (i = 0; i < pub->snapshot.nfamilies; i++)
			s->fams[i].flags |= PCPU_SNAPSHOT_CHECKED;
	errno = saved;
}

struct pcpu_reader_snapshot *pcpu__rd_derive(struct pcpu_reader_snapshot *base_pub, struct ser *const *order)
{
	struct snap_impl *base = (struct snap_impl *)base_pub, *s = calloc(1, sizeof *s);
	size_t nf = base->pub.snapshot.nfamilies, i, k, at = 0;

	if (!s)
		goto nomem;
	s->fams = keep(s, malloc((nf ? nf : 1) * sizeof *s->fams));
	s->slots = keep(s, calloc(nf ? nf : 1, sizeof *s->slots));
	if (!s->fams || !s->slots)
		goto nomem;
	memcpy(s->fams, base->fams, nf * sizeof *s->fams);
	s->nslots = base->nslots;
	/* Held from here on: freeing s on failure below lets it go. */
	pcpu__rd_snapshot_hold(&base->pub);
	s->base = base;
	for (i = 0; i < nf; i++) {
		struct pcpu_snapshot_family *f = &s->fams[i];
		struct pcpu_snapshot_series *series = keep(s, malloc((f->nseries ? f->nseries : 1) * sizeof *series));

		if (!series)
			goto nomem;
		memcpy(series, base->fams[i].series, f->nseries * sizeof *series);
		for (k = 0; k < f->nseries; k++) {
			struct ser *se = order[at++];

			if (series_value(s, se->fam, se, &series[k]) < 0)
				goto nomem;
		}
		f->series = series;
	}
	s->pub.snapshot.nfamilies = nf;
	s->pub.snapshot.families = s->fams;
	return &s->pub;
nomem:
	pcpu__seg_fail(ENOMEM, "out of memory");
	pcpu_reader_snapshot_free(s ? &s->pub : NULL);
	return NULL;
}
