/* SPDX-License-Identifier: MIT */
/*
 * Families of the registry: their descriptions checked, created, found
 * again (same description: the same family) and destroyed with their
 * series, and the shortcuts that make a family with one series
 * (pcpu_registry_counter(), pcpu_registry_gauge(), pcpu_registry_info()).
 *
 * Why a fixed label-name list per family: it is what Prometheus clients do,
 * it makes a series' key just its values (registry_series.c), and it keeps
 * each family's metadata fixed-size -- the shape a shared-memory directory
 * needs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* ---- families ---- */

/* EINVAL with the message (if any) put in the context of family `name`. */
static int family_invalid(const char *name, const char *msg)
{
	if (msg)
		pcpu__set_error(msg);
	pcpu__msg_prefix("family", name);
	errno = EINVAL;
	return -1;
}

/* Validates a description; writes the family's base name into `base`. */
int pcpu__desc_check(const struct pcpu_family_desc *d, char base[PCPU_STATS_NAME_MAX + 1])
{
	const struct pcpu_metric_type_info *t;
	size_t len, ns;
	unsigned l, k;

	if (!d)
		return pcpu__reg_fail(EINVAL, "family description is NULL");
	if (pcpu_stats_check_metric_name(d->name) < 0)
		return -1;
	if (!(t = pcpu__type_info(d->type)))
		return pcpu__reg_fail(EINVAL, "unknown metric type");
	len = strlen(d->name);
	memcpy(base, d->name, len + 1);
	/* "x_total" registers counter x: the name without the type's sample
	 * suffix, which the writers add back. */
	ns = strlen(t->sample_suffix);
	if (ns && len > ns && strcmp(d->name + len - ns, t->sample_suffix) == 0)
		base[len - ns] = '\0';
	if (pcpu__check_help(d->help) < 0 || pcpu__check_unit(base, d->unit) < 0)
		goto context;
	if (d->scale_exp10 > PCPU_STATS_SCALE_MAX || d->scale_exp10 < -PCPU_STATS_SCALE_MAX) {
		pcpu__set_error("scale_exp10 must be in [-22, 22]");
		goto context;
	}
	if (d->nlabels > PCPU_STATS_LABELS_MAX || (d->nlabels && !d->label_names)) {
		pcpu__set_error("at most 32 label names, and label_names must not be NULL");
		goto context;
	}
	for (l = 0; l < d->nlabels; l++) {
		if (pcpu_stats_check_label_name(d->label_names[l]) < 0)
			goto context;
		if (t->bucket_label && strcmp(d->label_names[l], t->bucket_label) == 0) {
			pcpu__set_error("label name \"le\" is reserved in histograms (bucket bounds)");
			goto context;
		}
		for (k = 0; k < l; k++)
			if (strcmp(d->label_names[k], d->label_names[l]) == 0) {
				pcpu__set_error("a label name appears twice");
				goto context;
			}
	}
	if (t->value == PCPU_VALUE_BUCKETS) {
		size_t nb;
		uint64_t limit;

		struct pcpu_histogram_layout l;

		if (!d->histogram) {
			pcpu__set_error("histogram layout is NULL");
			goto context;
		}
		l = *d->histogram;
		l.scale_exp10 = d->scale_exp10; /* exponential bounds: in exposed units */
		if (pcpu__histogram_layout_check(&l, &nb, &limit) < 0)
			goto context;
		/* What the writers check of every snapshot, checked once here
		 * (log-linear bounds are always far apart). */
		if (d->histogram->scheme == PCPU_HISTOGRAM_EXPLICIT &&
		    pcpu__check_bounds(d->histogram->bounds, d->histogram->nbounds, d->scale_exp10) < 0)
			goto context;
		if (nb + 1 > PCPU_ZONE_MAX_OBJECT / sizeof(struct pcpu_counter)) {
			pcpu__set_error("histogram: too many buckets for one zone object");
			pcpu__msg_prefix("family", d->name);
			errno = E2BIG;
			return -1;
		}
	} else if (d->histogram) {
		pcpu__set_error("a bucket layout is only for histograms");
		goto context;
	}
	return 0;
context:
	return family_invalid(d->name, NULL);
}

const struct pcpu__fam_extra pcpu__no_extra;

static int desc_equal(const struct pcpu_family *f, const struct pcpu_family_desc *d,
		      const struct pcpu__fam_extra *x)
{
	unsigned l;

	if (f->nlabels - f->nconst != d->nlabels || !pcpu__family_meta_equal(f, d, x))
		return 0;
	for (l = 0; l < d->nlabels; l++)
		if (strcmp(f->label_names[l], d->label_names[l]) != 0)
			return 0;
	return 1;
}

static void family_free_meta(struct pcpu_family *f)
{
	unsigned l;

	if (f->label_names)
		for (l = 0; l < f->nlabels; l++)
			free(f->label_names[l]);
	free(f->label_names);
	if (f->const_values)
		for (l = 0; l < f->nfconst; l++)
			free(f->const_values[l]);
	free(f->const_values);
	free(f->name);
	free(f->help);
	free(f->unit);
	free(f->bounds);
	free(f->bucket_upper);
	free(f->export_buckets);
	pcpu__htab_free(&f->series);
	free(f);
}

/* Builds the bucket bounds a snapshot carries from a layout. */
static int family_set_layout(struct pcpu_family *f, const struct pcpu_histogram_layout *l)
{
	pcpu_histogram_t tmp;
	size_t nb, b;
	uint64_t limit;

	f->layout = *l;
	f->layout.scale_exp10 = f->scale_exp10;
	l = &f->layout;
	if (pcpu__histogram_layout_check(l, &nb, &limit) < 0)
		return -1;
	if (l->scheme == PCPU_HISTOGRAM_EXPONENTIAL) {
		f->bounds = malloc((nb - 1) * sizeof *f->bounds);
		if (!f->bounds)
			return -1;
		pcpu__exponential_bounds(l->schema, l->scale_exp10, f->bounds, nb - 1, &f->native_index);
		f->native_schema = l->schema;
		f->flags |= PCPU_SNAPSHOT_NATIVE;
		f->layout.nbounds = nb - 1;
		f->layout.bounds = NULL; /* computed again by each histogram */
	} else if (l->scheme == PCPU_HISTOGRAM_EXPLICIT) {
		/* Padded as a histogram's search needs: every series of the
		 * family uses this copy (pcpu__histogram_create_at()). */
		size_t i, cap = l->nbounds < PCPU__HISTOGRAM_SMALL ? PCPU__HISTOGRAM_SMALL : l->nbounds;

		f->bounds = malloc(cap * sizeof *f->bounds);
		if (!f->bounds)
			return -1;
		memcpy(f->bounds, l->bounds, l->nbounds * sizeof *f->bounds);
		for (i = l->nbounds; i < cap; i++)
			f->bounds[i] = INT64_MAX;
		f->layout.bounds = f->bounds;
	} else {
		f->layout.bounds = NULL;
		f->layout.nbounds = 0;
	}
	f->nbuckets = nb;
	f->bucket_upper = malloc((nb > 1 ? nb - 1 : 1) * sizeof *f->bucket_upper);
	if (!f->bucket_upper)
		return -1;
	/* A handle without storage, to reuse pcpu_histogram_bucket_range(). */
	memset(&tmp, 0, sizeof tmp);
	tmp.pcpu__bounds = f->bounds;
	tmp.pcpu__nbounds = (uint32_t)f->layout.nbounds;
	tmp.pcpu__nbuckets = (uint32_t)nb;
	tmp.pcpu__scheme = (uint32_t)l->scheme;
	tmp.pcpu__bits = l->precision_bits;
	tmp.pcpu__limit = limit;
	for (b = 0; b + 1 < nb; b++)
		pcpu_histogram_bucket_range(&tmp, b, NULL, &f->bucket_upper[b]);
	if (l->scheme != PCPU_HISTOGRAM_EXPLICIT) {
		/* Hundreds or thousands of buckets: expose a fixed, bounded subset. */
		f->export_buckets = malloc((nb > 1 ? nb - 1 : 1) * sizeof *f->export_buckets);
		if (!f->export_buckets)
			return -1;
		if (l->scheme == PCPU_HISTOGRAM_LOG_LINEAR)
			f->nexport = pcpu__export_list(f->bucket_upper, nb - 1,
						       pcpu__histogram_export_lg(l), l->export_min,
						       f->export_buckets);
		else
			f->nexport = pcpu__native_export_rule(
				f->bucket_upper, f->native_index,
				pcpu__native_export_limit(f->bucket_upper, nb - 1, l->max_value),
				l->schema, pcpu__histogram_export_lg(l), l->export_min,
				f->export_buckets);
	}
	return 0;
}

/* Creates and links a family; registry locked; desc already checked. */
static struct pcpu_family *family_create_locked(struct pcpu_registry *reg,
						const struct pcpu_family_desc *d, const char *base,
						struct pcpu__gfamily *gf, unsigned member,
						const struct pcpu__fam_extra *x,
						struct pcpu_family *head)
{
	struct pcpu_family *f = calloc(1, sizeof *f);
	char om[PCPU_STATS_NAME_MAX + 1];
	const char *const *suf;
	size_t k, ns;
	unsigned l;

	if (!f)
		return NULL;
	f->reg = reg;
	f->flags = x->flags;
	f->labelset = x->labelset;
	f->sparse = x->sparse;
	f->gfam = gf;
	f->gmember = member;
	f->type = d->type;
	f->scale_exp10 = d->scale_exp10;
	f->name = strdup(base);
	f->help = dup_or_null(d->help);
	f->unit = d->unit && *d->unit ? strdup(d->unit) : NULL;
	if (!f->name || (d->help && !f->help) || (d->unit && *d->unit && !f->unit))
		goto nomem;
	/* The caller's label names, then the family's constant ones, then the
	 * registry's. */
	f->nfconst = x->nconst;
	f->nconst = x->nconst + reg->nconst;
	f->nlabels = d->nlabels + f->nconst;
	if (f->nlabels) {
		f->label_names = calloc(f->nlabels, sizeof *f->label_names);
		if (!f->label_names)
			goto nomem;
		for (l = 0; l < f->nlabels; l++)
			if (!(f->label_names[l] = strdup(l < d->nlabels ? d->label_names[l]
							 : l < d->nlabels + x->nconst
								 ? x->names[l - d->nlabels]
								 : reg->const_names[l - d->nlabels - x->nconst])))
				goto nomem;
	}
	if (f->nconst) {
		f->const_values = calloc(f->nconst, sizeof *f->const_values);
		if (!f->const_values)
			goto nomem;
		for (l = 0; l < f->nconst; l++)
			f->const_values[l] = l < x->nconst ? strdup(x->values[l])
							   : reg->const_values[l - x->nconst];
		for (l = 0; l < x->nconst; l++)
			if (!f->const_values[l])
				goto nomem;
	}
	if (pcpu__type_info(d->type)->value == PCPU_VALUE_BUCKETS && family_set_layout(f, d->histogram) < 0)
		goto nomem;
	if (reg->nfams == reg->capfams) {
		size_t cap = reg->capfams ? reg->capfams * 2 : 16;
		struct pcpu_family **a = realloc(reg->fams, cap * sizeof *a);
		if (!a)
			goto nomem;
		reg->fams = a;
		reg->capfams = cap;
	}
	/* Another label set of a name: the name's first family holds the
	 * sample names (registry_labelsets.c). */
	ns = head ? 0 : pcpu__type_suffixes(f->type, &suf);
	for (k = 0; k < ns; k++) {
		if (pcpu__sname_add(reg, f, f->name, suf[k]) < 0) {
			pcpu__sname_remove_family(reg, f);
			goto nomem;
		}
	}
	if (!head && pcpu__info_family_name(f->name, f->flags, om) &&
	    pcpu__sname_add(reg, f, om, "") < 0) {
		pcpu__sname_remove_family(reg, f);
		goto nomem;
	}
	f->index = reg->nfams;
	reg->fams[reg->nfams++] = f;
	if (head)
		pcpu__labelset_link(head, f);
	pcpu__reg_bump(reg);
	if (pcpu__reg_notify(reg, PCPU__REG_FAMILY_ADDED, f, NULL) != 0) {
		/* The directory mirror refused it (a shared registry's full
		 * directory): undone, its errno and message kept. */
		int err = errno;

		reg->nfams--;
		if (head)
			pcpu__labelset_unlink(reg, f);
		else
			pcpu__sname_remove_family(reg, f);
		pcpu__reg_bump(reg);
		family_free_meta(f);
		errno = err;
		return NULL;
	}
	return f;
nomem:
	family_free_meta(f);
	errno = ENOMEM;
	return NULL;
}

/* A family may not name a constant label (its own or the registry's)
 * itself, nor have more labels than a family can with them. Registry
 * locked; x's names checked and distinct. */
static int const_label_clash(const struct pcpu_registry *reg, const struct pcpu_family_desc *d,
			     const struct pcpu__fam_extra *x)
{
	unsigned l, k;

	if (d->nlabels + x->nconst + reg->nconst > PCPU_STATS_LABELS_MAX)
		return family_invalid(d->name, "too many labels with the constant labels");
	for (l = 0; l < d->nlabels + x->nconst; l++) {
		const char *name = l < d->nlabels ? d->label_names[l] : x->names[l - d->nlabels];

		for (k = 0; k < reg->nconst; k++)
			if (strcmp(name, reg->const_names[k]) == 0)
				return family_invalid(d->name,
						      "a label name is a constant label of the registry");
		for (k = 0; k < x->nconst && l < d->nlabels; k++)
			if (strcmp(name, x->names[k]) == 0)
				return family_invalid(d->name,
						      "a label name is a constant label of the family");
	}
	return 0;
}

/* Finds or creates; registry locked; desc checked; *created set. `x`: the
 * new family's PCPU_SNAPSHOT_INFO and constant labels, which an existing
 * one must match. */
struct pcpu_family *pcpu__family_get_locked(struct pcpu_registry *reg,
					     const struct pcpu_family_desc *d, const char *base,
					     int *created, struct pcpu__gfamily *gf, unsigned member,
					     const struct pcpu__fam_extra *x)
{
	const char *const *suf;
	size_t k, ns = pcpu__type_suffixes(d->type, &suf);
	char om[PCPU_STATS_NAME_MAX + 1];
	int info = pcpu__info_family_name(base, x->flags, om);
	struct pcpu__sname *n;

	*created = 0;
	if (const_label_clash(reg, d, x) < 0)
		return NULL;
	n = pcpu__sname_find(reg, base, "");
	if (n && strcmp(n->fam->name, base) == 0) {
		struct pcpu_family *g;

		/* Any of the name's label sets described so. */
		for (g = n->fam; g && !gf && !g->gfam; g = g->lsnext)
			if (desc_equal(g, d, x))
				return g;
		if (x->labelset && !gf && !n->fam->gfam) {
			if (pcpu__labelset_check(n->fam, d, x) < 0)
				return NULL;
			*created = 1;
			return family_create_locked(reg, d, base, gf, member, x, n->fam);
		}
		pcpu__set_error("a family of this name exists with another type, help, unit, "
				"labels, constant labels, scale or bucket layout (or is, or is not, "
				"an info metric or a family with fractions)");
		pcpu__msg_prefix("family", d->name);
		errno = EEXIST;
		return NULL;
	}
	for (k = 0; k < ns + (size_t)info; k++) {
		n = k < ns ? pcpu__sname_find(reg, base, suf[k]) : pcpu__sname_find(reg, om, "");
		if (n) {
			struct pcpu__msg m = pcpu__msg_begin();

			pcpu__msg_str(&m, "family ");
			pcpu__msg_quoted(&m, d->name, 64);
			pcpu__msg_str(&m, ": sample name ");
			pcpu__msg_quoted(&m, k < ns ? base : om, 64);
			pcpu__msg_str(&m, " + \"");
			pcpu__msg_str(&m, k < ns ? suf[k] : "");
			pcpu__msg_str(&m, "\" is already written by family ");
			pcpu__msg_quoted(&m, n->fam->name, 64);
			errno = EEXIST;
			return NULL;
		}
	}
	*created = 1;
	return family_create_locked(reg, d, base, gf, member, x, NULL);
}

/* Checks a set of constant labels (the registry's or a family's). */
int pcpu__const_labels_check(unsigned n, const char *const *names, const char *const *values)
{
	unsigned l, k;

	if (n == 0 || n > PCPU_STATS_LABELS_MAX || !names || !values)
		return pcpu__reg_fail(EINVAL, "constant labels: NULL names or values, or not 1 to 32 labels");
	for (l = 0; l < n; l++) {
		if (pcpu_stats_check_label_name(names[l]) < 0 ||
		    pcpu_stats_check_label_value(values[l]) < 0) {
			pcpu__msg_prefix("constant label", names[l] ? names[l] : "(null)");
			errno = EINVAL;
			return -1;
		}
		/* Histograms reserve "le" for their buckets. */
		if (strcmp(names[l], "le") == 0)
			return pcpu__reg_fail(EINVAL, "constant labels: \"le\" is reserved (histogram buckets)");
		for (k = 0; k < l; k++)
			if (strcmp(names[k], names[l]) == 0)
				return pcpu__reg_fail(EINVAL, "constant labels: a label name appears twice");
	}
	return 0;
}

/* Finds or creates the family `d` describes, with `x`. */
static struct pcpu_family *family_register(pcpu_registry_t *reg, const struct pcpu_family_desc *d,
					   const struct pcpu__fam_extra *x)
{
	char base[PCPU_STATS_NAME_MAX + 1];
	struct pcpu_family *f;
	int created;

	if (!reg) {
		pcpu__reg_fail(EINVAL, "registry is NULL");
		return NULL;
	}
	if (pcpu__desc_check(d, base) < 0)
		return NULL;
	pthread_mutex_lock(&reg->lock);
	f = pcpu__family_get_locked(reg, d, base, &created, NULL, 0, x);
	pthread_mutex_unlock(&reg->lock);
	return f;
}

pcpu_family_t *pcpu_registry_family(pcpu_registry_t *reg, const struct pcpu_family_desc *d)
{
	return family_register(reg, d, &pcpu__no_extra);
}

pcpu_family_t *pcpu_registry_family_const(pcpu_registry_t *reg, const struct pcpu_family_desc *d,
					  unsigned n, const char *const *names,
					  const char *const *values)
{
	struct pcpu__fam_extra x = { 0, n, names, values, 0, 0 };

	if (pcpu__const_labels_check(n, names, values) < 0)
		return NULL;
	return family_register(reg, d, &x);
}

pcpu_family_t *pcpu_registry_family_ex(pcpu_registry_t *reg, const struct pcpu_family_desc *d,
				       unsigned flags, unsigned n, const char *const *names,
				       const char *const *values)
{
	struct pcpu__fam_extra x = { 0, n, names, values, 0, 0 };
	const struct pcpu_metric_type_info *t = d ? pcpu__type_info(d->type) : NULL;

	if (flags & ~(unsigned)(PCPU_FAMILY_FRACTIONS | PCPU_FAMILY_LABELSET | PCPU_FAMILY_SPARSE)) {
		pcpu__reg_fail(EINVAL, "unknown PCPU_FAMILY_* flag");
		return NULL;
	}
	if ((flags & PCPU_FAMILY_SPARSE) && t && t->value != PCPU_VALUE_BUCKETS) {
		pcpu__set_error("PCPU_FAMILY_SPARSE is for histogram families");
		pcpu__msg_prefix("family", d->name ? d->name : "(null)");
		errno = EINVAL;
		return NULL;
	}
	x.sparse = !!(flags & PCPU_FAMILY_SPARSE);
	if (n && pcpu__const_labels_check(n, names, values) < 0)
		return NULL;
	x.labelset = !!(flags & PCPU_FAMILY_LABELSET);
	if (flags & PCPU_FAMILY_FRACTIONS) {
		x.flags = PCPU_SNAPSHOT_NANOS;
		/* An unknown type: family_register() refuses it. A counter's or
		 * gauge's billionths are of a unit: scale 0. A histogram's
		 * integer sum keeps the family's scale. */
		if (t && t->value != PCPU_VALUE_BUCKETS && d->scale_exp10 != 0) {
			pcpu__set_error("a counter or gauge family with fractions has scale_exp10 0");
			pcpu__msg_prefix("family", d->name ? d->name : "(null)");
			errno = EINVAL;
			return NULL;
		}
	}
	return family_register(reg, d, &x);
}

pcpu_family_t *pcpu_registry_family_nanos(pcpu_registry_t *reg, const struct pcpu_family_desc *d,
					  unsigned n, const char *const *names,
					  const char *const *values)
{
	return pcpu_registry_family_ex(reg, d, PCPU_FAMILY_FRACTIONS, n, names, values);
}

pcpu_family_t *pcpu_registry_find(pcpu_registry_t *reg, const char *name)
{
	struct pcpu__sname *n;
	struct pcpu_family *f = NULL;

	if (!reg || !name) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&reg->lock);
	n = pcpu__sname_find(reg, name, "");
	if (n) {
		/* The family's name, or its value sample's ("x_total"). */
		const char *suf = pcpu__type_info(n->fam->type)->sample_suffix;
		size_t fl = strlen(n->fam->name);

		if (strcmp(n->fam->name, name) == 0 ||
		    (*suf && strncmp(name, n->fam->name, fl) == 0 && strcmp(name + fl, suf) == 0))
			f = n->fam;
	}
	pthread_mutex_unlock(&reg->lock);
	if (!f)
		errno = ENOENT;
	return f;
}

/* Frees a family and all its series' storage; registry locked; no series
 * may belong to a struct. */
void pcpu__family_destroy_locked(struct pcpu_registry *reg, struct pcpu_family *f)
{
	struct pcpu__series *se, *next;

	pcpu__reg_notify(reg, PCPU__REG_FAMILY_REMOVING, f, NULL);
	for (se = f->lfirst; se; se = next) {
		next = se->lnext;
		/* Storage freed with the registry's zone at hand: no search
		 * for the zone that holds it. */
		if (!se->owner)
			pcpu__storage_free(f, se->handle);
		pcpu__callback_forget_locked(reg, se);
		free(se->values);
		free(se);
	}
	f->lfirst = f->llast = NULL;
	pcpu__labelset_unlink(reg, f); /* names handed to its next label set, if any */
	reg->fams[f->index] = reg->fams[reg->nfams - 1];
	reg->fams[f->index]->index = f->index;
	reg->nfams--;
	pcpu__reg_bump(reg);
	family_free_meta(f);
}

/* What keeps a family from going at once: fields of a registered struct
 * among its series (*owned), series with a callback (*computed). */
static void family_series_kinds(const struct pcpu_family *f, int *owned, int *computed)
{
	const struct pcpu__series *se;

	*owned = *computed = 0;
	for (se = f->lfirst; se; se = se->lnext) {
		*owned |= se->owner != NULL;
		*computed |= se->cb != NULL;
	}
}

int pcpu_registry_remove_family(pcpu_registry_t *reg, pcpu_family_t *f)
{
	int r = 0, owned = 0, computed = 0;

	if (!reg || !f)
		return pcpu__reg_fail(EINVAL, "NULL registry or family");
	if (pcpu__reg_tree_refuses(reg, "never removes a family: another process may hold its series"))
		return -1;
	pthread_mutex_lock(&reg->lock);
	if (f->reg == reg && f->index < reg->nfams && reg->fams[f->index] == f)
		family_series_kinds(f, &owned, &computed);
	if (f->reg != reg || f->index >= reg->nfams || reg->fams[f->index] != f)
		r = pcpu__reg_fail(EINVAL, "not a family of this registry");
	else if (owned)
		r = pcpu__reg_fail(EBUSY, "the family has fields of a registered struct; remove the struct first");
	else if (f->gfam)
		r = pcpu__reg_fail(EBUSY, "the family is a member of a consistent group family");
	else if (computed && pcpu__collect_wait_locked(reg) < 0)
		r = -1; /* EDEADLK: called from one of reg's callbacks */
	else
		pcpu__family_destroy_locked(reg, f);
	pthread_mutex_unlock(&reg->lock);
	return r;
}

int pcpu_registry_info(pcpu_registry_t *reg, const char *name, const char *help, unsigned nlabels,
		       const char *const *label_names, const char *const *label_values)
{
	static const struct pcpu__fam_extra info = { PCPU_SNAPSHOT_INFO, 0, NULL, NULL, 0, 0 };
	struct pcpu_family_desc d;
	pcpu_family_t *f;
	pcpu_gauge_t g;

	if (!pcpu__info_name_len(name, PCPU_SNAPSHOT_INFO))
		return pcpu__reg_fail(EINVAL, "an info metric's name ends in \"_info\"");
	memset(&d, 0, sizeof d);
	d.name = name;
	d.help = help;
	d.type = PCPU_METRIC_GAUGE;
	d.nlabels = nlabels;
	d.label_names = label_names;
	f = family_register(reg, &d, &info);
	if (!f)
		return -1;
	if (pcpu_family_lookup(f, label_values)) {
		pcpu__set_error("this info series exists already");
		pcpu__msg_prefix("family", name);
		errno = EEXIST;
		return -1;
	}
	g = pcpu__series_get(f, label_values, PCPU_METRIC_GAUGE, 1);
	return g ? pcpu_gauge_set(g, 1) : -1;
}

/* The family of pcpu_registry_counter() and pcpu_registry_gauge(): no
 * labels, one series. */
static pcpu_family_t *plain_family(pcpu_registry_t *reg, const char *name, const char *help,
				   enum pcpu_metric_type type)
{
	struct pcpu_family_desc d;

	memset(&d, 0, sizeof d);
	d.name = name;
	d.help = help;
	d.type = type;
	return pcpu_registry_family(reg, &d);
}

pcpu_counter_t pcpu_registry_counter(pcpu_registry_t *reg, const char *name, const char *help)
{
	pcpu_family_t *f = plain_family(reg, name, help, PCPU_METRIC_COUNTER);

	return f ? pcpu_family_counter(f, NULL) : NULL;
}

pcpu_gauge_t pcpu_registry_gauge(pcpu_registry_t *reg, const char *name, const char *help)
{
	pcpu_family_t *f = plain_family(reg, name, help, PCPU_METRIC_GAUGE);

	return f ? pcpu_family_gauge(f, NULL) : NULL;
}
