/* SPDX-License-Identifier: MIT */
/*
 * Several label sets under one name (PCPU_FAMILY_LABELSET, pcpu/stats.h):
 * `requests_total{path="/x"}` beside `requests_total` and
 * `requests_total{method="GET",code="200"}`, which Prometheus, OpenMetrics,
 * protobuf and OTLP all allow for one metric.
 *
 * Each label set is a family of its own -- fixed label names, a series'
 * key its values, one entry in a segment -- so everything that works per
 * family (handles, snapshots, segments, removal) works unchanged. The
 * families of one name are a list whose first holds the name's sample
 * names (registry_names.c): a second family of the name is never a clash
 * with the first, only with other names. The writers and readers put the
 * families of one name together, under one HELP and TYPE (expose.c sorts
 * them next to each other by name, then by label names).
 *
 * What makes them one metric is checked here: the same type, help, unit,
 * scale, fractions, info flag, constant labels and bucket layout; label
 * names that are not another set's in another order (that would be the
 * same series under two keys); and no series equal to a series of another
 * set, an empty label value being an absent label (`x{a="1",b=""}` is
 * `x{a="1"}` to Prometheus).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static int str_eq(const char *a, const char *b)
{
	/* NULL and "" both mean "none". */
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static int layout_equal(const struct pcpu_histogram_layout *a, const struct pcpu_histogram_layout *b)
{
	if (a->scheme != b->scheme)
		return 0;
	if (a->scheme == PCPU_HISTOGRAM_EXPLICIT)
		return a->nbounds == b->nbounds &&
		       memcmp(a->bounds, b->bounds, a->nbounds * sizeof *a->bounds) == 0;
	if (a->scheme == PCPU_HISTOGRAM_EXPONENTIAL &&
	    (a->schema != b->schema || a->max_value != b->max_value))
		return 0; /* the scale is the family's */
	if (a->scheme == PCPU_HISTOGRAM_LOG_LINEAR &&
	    (a->precision_bits != b->precision_bits || a->max_value != b->max_value))
		return 0;
	return pcpu__histogram_export_lg(a) == pcpu__histogram_export_lg(b) &&
	       (a->export_min > 0 ? a->export_min : 0) == (b->export_min > 0 ? b->export_min : 0);
}

/* Whether f is described as d and x say, but for the caller's own label
 * names: what every label set of one name shares (type, help, unit,
 * scale, fractions, info, constant labels, bucket layout). */
int pcpu__family_meta_equal(const struct pcpu_family *f, const struct pcpu_family_desc *d,
			    const struct pcpu__fam_extra *x)
{
	unsigned l, own = f->nlabels - f->nconst;

	if (f->type != d->type || !str_eq(f->help, d->help) || !str_eq(f->unit, d->unit) ||
	    f->scale_exp10 != d->scale_exp10 || f->nfconst != x->nconst ||
	    (f->flags & (PCPU_SNAPSHOT_INFO | PCPU_SNAPSHOT_NANOS)) !=
		    (x->flags & (PCPU_SNAPSHOT_INFO | PCPU_SNAPSHOT_NANOS)))
		return 0;
	for (l = 0; l < x->nconst; l++)
		if (strcmp(f->label_names[own + l], x->names[l]) != 0 ||
		    strcmp(f->const_values[l], x->values[l]) != 0)
			return 0;
	return pcpu__type_info(f->type)->value != PCPU_VALUE_BUCKETS || layout_equal(&f->layout, d->histogram);
}

/* Whether the n names `a` are the names of f's own labels in some order. */
static int same_name_set(const struct pcpu_family *f, const char *const *a, unsigned n)
{
	unsigned own = f->nlabels - f->nconst, l, k;

	if (own != n)
		return 0;
	for (l = 0; l < n; l++) {
		for (k = 0; k < own; k++)
			if (strcmp(a[l], f->label_names[k]) == 0)
				break;
		if (k == own)
			return 0;
	}
	return 1;
}

int pcpu__labelset_check(const struct pcpu_family *head, const struct pcpu_family_desc *d,
			 const struct pcpu__fam_extra *x)
{
	const struct pcpu_family *g;

	if (!pcpu__family_meta_equal(head, d, x)) {
		pcpu__set_error("another label set of a name must have its type, help, unit, "
				"scale, constant labels, bucket layout and fractions");
		goto refused;
	}
	for (g = head; g; g = g->lsnext)
		if (same_name_set(g, d->label_names, d->nlabels)) {
			pcpu__set_error("a label set of this name has these label names in another "
					"order (give them in the family's order: "
					"pcpu_family_label_names())");
			goto refused;
		}
	return 0;
refused:
	pcpu__msg_prefix("family", d->name);
	errno = EEXIST;
	return -1;
}

void pcpu__labelset_link(struct pcpu_family *head, struct pcpu_family *f)
{
	while (head->lsnext)
		head = head->lsnext;
	head->lsnext = f;
	f->lsnext = NULL;
}

void pcpu__labelset_unlink(struct pcpu_registry *reg, struct pcpu_family *f)
{
	struct pcpu__sname *n = pcpu__sname_find(reg, f->name, "");
	struct pcpu_family *p;

	if (n && n->fam == f) {
		/* The first: its next label set takes the name, or nobody. */
		if (f->lsnext)
			pcpu__sname_repoint(reg, f, f->lsnext);
		else
			pcpu__sname_remove_family(reg, f);
		f->lsnext = NULL;
		return;
	}
	for (p = n ? n->fam : NULL; p; p = p->lsnext)
		if (p->lsnext == f) {
			p->lsnext = f->lsnext;
			break;
		}
	f->lsnext = NULL;
}

