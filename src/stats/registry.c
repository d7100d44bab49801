/* SPDX-License-Identifier: MIT */
/*
 * The statistics registry: families of named series whose values live in
 * the registry's own per-CPU zone.
 *
 *     pcpu_registry
 *       lock ─ one mutex for the directory (families, series, structs)
 *       zone ─ every counter, gauge, histogram and struct of the registry
 *       fams[] ─ pcpu_family ─ name, help, unit, type, labels, layout
 *       │                   └ tab[] ─ pcpu__series ─ label values, handle
 *       names{} ─ every sample name a family reserves -> family
 *       structs ─ registered statistics structs (their series point into them)
 *
 * Why one mutex: the directory changes rarely (a flow appears, an interface
 * goes away) and is read in bulk (a scrape); updates -- the hot path -- never
 * touch the directory at all, because a caller keeps the handle a lookup
 * returned and updates it with the inline counter/gauge/histogram path. A
 * lock-free directory would make registration and export more complex to
 * save nothing that matters. A snapshot holds the lock only while it copies
 * metadata and reads values; formatting happens outside.
 *
 * Why `names`: OpenMetrics reserves, for each family, its name plus its
 * type's suffixes (a counter `x` owns x, x_total, x_created; a histogram
 * owns x_bucket, x_count, x_sum...). A strict parser rejects an exposition
 * where two families own one name, so the registry refuses the second
 * family at registration with EEXIST instead. The same table finds a family
 * by name, counters also by their `_total` name.
 *
 * Series are also kept in a list in creation order, which is the order
 * snapshots and expositions list them in: deterministic, stable from one
 * scrape to the next (new series come last), and free -- sorting 10^5
 * label sets by value cost more than everything else in an export.
 *
 * Why a fixed label-name list per family: it is what Prometheus clients do,
 * it makes a series' key just its values (hashed with FNV-1a, values
 * separated by 0xff, a byte UTF-8 never contains), and it keeps each
 * family's metadata fixed-size -- the shape a shared-memory directory needs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "../fork.h"
#include "objcache_stats.h"

#define FNV_OFFSET PCPU__FNV_OFFSET
#define FNV_PRIME 1099511628211ull
#define fnv pcpu__fnv1a /* internal.h: shared with merge.c */

static uint64_t hash_values(const char *const *v, unsigned n)
{
	uint64_t h = FNV_OFFSET;
	unsigned i;

	for (i = 0; i < n; i++)
		h = (fnv(h, v[i]) ^ 0xff) * FNV_PRIME;
	return h;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int str_eq(const char *a, const char *b)
{
	/* NULL and "" both mean "none". */
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static void bump_generation(struct pcpu_registry *reg)
{
	__atomic_add_fetch(&reg->generation, 1, __ATOMIC_RELEASE);
}

static void notify(struct pcpu_registry *reg, enum pcpu__registry_event ev, struct pcpu_family *f,
		   struct pcpu__series *se)
{
	if (reg->hook)
		reg->hook(reg->hook_ctx, ev, f, se);
}

static int fail(int err, const char *msg)
{
	if (msg)
		pcpu__set_error(msg);
	errno = err;
	return -1;
}

/* ---- the sample-name table ---- */

static uint64_t sname_hash(const char *base, const char *suffix)
{
	return fnv(fnv(FNV_OFFSET, base), suffix);
}

static struct pcpu__sname *sname_find(struct pcpu_registry *reg, const char *base,
				      const char *suffix)
{
	uint64_t h = sname_hash(base, suffix);
	size_t bl = strlen(base);
	struct pcpu__sname *n;

	if (!reg->namesize)
		return NULL;
	for (n = reg->names[h & (reg->namesize - 1)]; n; n = n->hnext)
		if (n->hash == h && strncmp(n->name, base, bl) == 0 &&
		    strcmp(n->name + bl, suffix) == 0)
			return n;
	return NULL;
}

static int sname_grow(struct pcpu_registry *reg)
{
	size_t ns = reg->namesize ? reg->namesize * 2 : 64, i;
	struct pcpu__sname **t = calloc(ns, sizeof *t);

	if (!t)
		return -1;
	for (i = 0; i < reg->namesize; i++) {
		struct pcpu__sname *n = reg->names[i], *next;
		for (; n; n = next) {
			next = n->hnext;
			n->hnext = t[n->hash & (ns - 1)];
			t[n->hash & (ns - 1)] = n;
		}
	}
	free(reg->names);
	reg->names = t;
	reg->namesize = ns;
	return 0;
}

/* Reserves base + suffix for family f. */
static int sname_add(struct pcpu_registry *reg, struct pcpu_family *f, const char *base,
		     const char *suffix)
{
	size_t bl = strlen(base), sl = strlen(suffix);
	struct pcpu__sname *n;

	if (reg->nnames >= reg->namesize && sname_grow(reg) < 0)
		return -1;
	n = malloc(sizeof *n + bl + sl + 1);
	if (!n)
		return -1;
	memcpy(n->name, base, bl);
	memcpy(n->name + bl, suffix, sl + 1);
	n->hash = sname_hash(base, suffix);
	n->fam = f;
	n->hnext = reg->names[n->hash & (reg->namesize - 1)];
	reg->names[n->hash & (reg->namesize - 1)] = n;
	reg->nnames++;
	return 0;
}

/*
 * An info family (PCPU_SNAPSHOT_INFO) `x_info` also owns `x`: OpenMetrics
 * writes it as family `x` of type info (`# TYPE x info`, sample x_info),
 * and a strict parser refuses a second family `x`. Writes that name to
 * `out` and returns 1 for an info family, else 0.
 */
static int info_family_name(const char *name, unsigned flags, char out[PCPU_STATS_NAME_MAX + 1])
{
	size_t n = pcpu__info_name_len(name, flags);

	if (!n)
		return 0;
	memcpy(out, name, n);
	out[n] = '\0';
	return 1;
}

static void sname_remove_family(struct pcpu_registry *reg, struct pcpu_family *f)
{
	const char *const *suf;
	size_t k, ns = pcpu__type_suffixes(f->type, &suf);
	char om[PCPU_STATS_NAME_MAX + 1];
	int info = info_family_name(f->name, f->flags, om);

	for (k = 0; k < ns + (size_t)info; k++) {
		uint64_t h = k < ns ? sname_hash(f->name, suf[k]) : sname_hash(om, "");
		struct pcpu__sname **pp;

		if (!reg->namesize)
			return;
		for (pp = &reg->names[h & (reg->namesize - 1)]; *pp; pp = &(*pp)->hnext) {
			if ((*pp)->fam == f && (*pp)->hash == h) {
				struct pcpu__sname *n = *pp;
				*pp = n->hnext;
				free(n);
				reg->nnames--;
				break;
			}
		}
	}
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
static int desc_check(const struct pcpu_family_desc *d, char base[PCPU_STATS_NAME_MAX + 1])
{
	size_t len;
	unsigned l, k;

	if (!d)
		return fail(EINVAL, "family description is NULL");
	if (pcpu_stats_check_metric_name(d->name) < 0)
		return -1;
	if (!pcpu__type_name(d->type))
		return fail(EINVAL, "unknown metric type");
	len = strlen(d->name);
	memcpy(base, d->name, len + 1);
	if (d->type == PCPU_METRIC_COUNTER && len > 6 && strcmp(d->name + len - 6, "_total") == 0)
		base[len - 6] = '\0';
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
		if (d->type == PCPU_METRIC_HISTOGRAM && strcmp(d->label_names[l], "le") == 0) {
			pcpu__set_error("label name \"le\" is reserved in histograms (bucket bounds)");
			goto context;
		}
		for (k = 0; k < l; k++)
			if (strcmp(d->label_names[k], d->label_names[l]) == 0) {
				pcpu__set_error("a label name appears twice");
				goto context;
			}
	}
	if (d->type == PCPU_METRIC_HISTOGRAM) {
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

static int layout_equal(const struct pcpu_histogram_layout *a, const struct pcpu_histogram_layout *b)
{
	if (a->scheme != b->scheme)
		return 0;
	if (a->scheme == PCPU_HISTOGRAM_EXPLICIT)
		return a->nbounds == b->nbounds &&
		       memcmp(a->bounds, b->bounds, a->nbounds * sizeof *a->bounds) == 0;
	if (a->scheme == PCPU_HISTOGRAM_EXPONENTIAL && a->schema != b->schema)
		return 0; /* the scale is the family's */
	if (a->scheme == PCPU_HISTOGRAM_LOG_LINEAR &&
	    (a->precision_bits != b->precision_bits || a->max_value != b->max_value))
		return 0;
	return pcpu__histogram_export_lg(a) == pcpu__histogram_export_lg(b) &&
	       (a->export_min > 0 ? a->export_min : 0) == (b->export_min > 0 ? b->export_min : 0);
}

/* What a family has beyond its description: PCPU_SNAPSHOT_INFO, and its
 * own constant labels (pcpu_registry_family_const()). */
struct fam_extra {
	unsigned flags;
	unsigned nconst;
	const char *const *names, *const *values;
};

static const struct fam_extra no_extra;

static int desc_equal(const struct pcpu_family *f, const struct pcpu_family_desc *d,
		      const struct fam_extra *x)
{
	unsigned l;

	if (f->type != d->type || !str_eq(f->help, d->help) || !str_eq(f->unit, d->unit) ||
	    f->scale_exp10 != d->scale_exp10 || f->nlabels - f->nconst != d->nlabels ||
	    f->nfconst != x->nconst || (f->flags & PCPU_SNAPSHOT_INFO) != (x->flags & PCPU_SNAPSHOT_INFO))
		return 0;
	for (l = 0; l < d->nlabels; l++)
		if (strcmp(f->label_names[l], d->label_names[l]) != 0)
			return 0;
	for (l = 0; l < x->nconst; l++)
		if (strcmp(f->label_names[d->nlabels + l], x->names[l]) != 0 ||
		    strcmp(f->const_values[l], x->values[l]) != 0)
			return 0;
	return f->type != PCPU_METRIC_HISTOGRAM || layout_equal(&f->layout, d->histogram);
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
	free(f->tab);
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
		f->bounds = malloc(l->nbounds * sizeof *f->bounds);
		if (!f->bounds)
			return -1;
		memcpy(f->bounds, l->bounds, l->nbounds * sizeof *f->bounds);
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
			f->nexport = pcpu__native_export_rule(f->bucket_upper, f->native_index, nb - 1,
							      l->schema, pcpu__histogram_export_lg(l),
							      l->export_min, f->export_buckets);
	}
	return 0;
}

/* Creates and links a family; registry locked; desc already checked. */
static struct pcpu_family *family_create_locked(struct pcpu_registry *reg,
						const struct pcpu_family_desc *d, const char *base,
						struct pcpu__gfamily *gf, unsigned member,
						const struct fam_extra *x)
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
	if (d->type == PCPU_METRIC_HISTOGRAM && family_set_layout(f, d->histogram) < 0)
		goto nomem;
	if (reg->nfams == reg->capfams) {
		size_t cap = reg->capfams ? reg->capfams * 2 : 16;
		struct pcpu_family **a = realloc(reg->fams, cap * sizeof *a);
		if (!a)
			goto nomem;
		reg->fams = a;
		reg->capfams = cap;
	}
	ns = pcpu__type_suffixes(f->type, &suf);
	for (k = 0; k < ns; k++) {
		if (sname_add(reg, f, f->name, suf[k]) < 0) {
			sname_remove_family(reg, f);
			goto nomem;
		}
	}
	if (info_family_name(f->name, f->flags, om) && sname_add(reg, f, om, "") < 0) {
		sname_remove_family(reg, f);
		goto nomem;
	}
	f->index = reg->nfams;
	reg->fams[reg->nfams++] = f;
	bump_generation(reg);
	notify(reg, PCPU__REG_FAMILY_ADDED, f, NULL);
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
			     const struct fam_extra *x)
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
static struct pcpu_family *family_get_locked(struct pcpu_registry *reg,
					     const struct pcpu_family_desc *d, const char *base,
					     int *created, struct pcpu__gfamily *gf, unsigned member,
					     const struct fam_extra *x)
{
	const char *const *suf;
	size_t k, ns = pcpu__type_suffixes(d->type, &suf);
	char om[PCPU_STATS_NAME_MAX + 1];
	int info = info_family_name(base, x->flags, om);
	struct pcpu__sname *n;

	*created = 0;
	if (const_label_clash(reg, d, x) < 0)
		return NULL;
	n = sname_find(reg, base, "");
	if (n && strcmp(n->fam->name, base) == 0) {
		if (desc_equal(n->fam, d, x) && !gf && !n->fam->gfam)
			return n->fam;
		pcpu__set_error("a family of this name exists with another type, help, unit, "
				"labels, constant labels, scale or bucket layout (or is, or is not, "
				"an info metric)");
		pcpu__msg_prefix("family", d->name);
		errno = EEXIST;
		return NULL;
	}
	for (k = 0; k < ns + (size_t)info; k++) {
		n = k < ns ? sname_find(reg, base, suf[k]) : sname_find(reg, om, "");
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
	return family_create_locked(reg, d, base, gf, member, x);
}

/* ---- series ---- */

static void *storage_alloc(struct pcpu_family *f)
{
	switch (f->type) {
	case PCPU_METRIC_COUNTER:
		return pcpu_counter_alloc_in(f->reg->zone, 1);
	case PCPU_METRIC_GAUGE:
		return pcpu_gauge_alloc_in(f->reg->zone);
	case PCPU_METRIC_HISTOGRAM:
		return pcpu_histogram_create_in(f->reg->zone, &f->layout);
	}
	errno = EINVAL;
	return NULL;
}

static void storage_free(const struct pcpu_family *f, void *h)
{
	if (f->gfam) {
		/* One gseries for all members: member 0's series owns it. */
		if (f->gmember == 0) {
			pcpu_group_free(((struct pcpu__gseries *)h)->g);
			free(h);
		}
		return;
	}
	switch (f->type) {
	case PCPU_METRIC_COUNTER:
		pcpu_counter_free((pcpu_counter_t)h);
		break;
	case PCPU_METRIC_GAUGE:
		pcpu_gauge_free((pcpu_gauge_t)h);
		break;
	case PCPU_METRIC_HISTOGRAM:
		pcpu_histogram_destroy((pcpu_histogram_t *)h);
		break;
	}
}

/* Checks the caller's label values of a series of f and sets *out to the
 * series' whole key: those values, then the registry's constant label
 * values (in `buf`, PCPU_STATS_LABELS_MAX entries, when there are some). */
static int values_check(const struct pcpu_family *f, const char *const *v, const char **buf,
			const char *const **out)
{
	unsigned l, own = f->nlabels - f->nconst;

	if (own && !v) {
		pcpu__set_error("label values are NULL but the family has labels");
		goto context;
	}
	for (l = 0; l < own; l++)
		if (pcpu_stats_check_label_value(v[l]) < 0)
			goto context;
	*out = v;
	if (f->nconst) {
		for (l = 0; l < own; l++)
			buf[l] = v[l];
		for (l = 0; l < f->nconst; l++)
			buf[own + l] = f->const_values[l];
		*out = buf;
	}
	return 0;
context:
	pcpu__msg_prefix("family", f->name);
	errno = EINVAL;
	return -1;
}

static struct pcpu__series *series_find(const struct pcpu_family *f, const char *const *v,
					uint64_t h)
{
	struct pcpu__series *se;
	unsigned l;

	if (!f->tabsize)
		return NULL;
	for (se = f->tab[h & (f->tabsize - 1)]; se; se = se->hnext) {
		if (se->hash != h)
			continue;
		for (l = 0; l < f->nlabels; l++)
			if (strcmp(se->values[l], v[l]) != 0)
				break;
		if (l == f->nlabels)
			return se;
	}
	return NULL;
}

static int series_tab_grow(struct pcpu_family *f)
{
	size_t ns = f->tabsize ? f->tabsize * 2 : 8, i;
	struct pcpu__series **t = calloc(ns, sizeof *t);

	if (!t)
		return -1;
	for (i = 0; i < f->tabsize; i++) {
		struct pcpu__series *se = f->tab[i], *next;
		for (; se; se = next) {
			next = se->hnext;
			se->hnext = t[se->hash & (ns - 1)];
			t[se->hash & (ns - 1)] = se;
		}
	}
	free(f->tab);
	f->tab = t;
	f->tabsize = ns;
	return 0;
}

/* Links a new series with the given handle; registry locked. */
static struct pcpu__series *series_new(struct pcpu_family *f, const char *const *v, uint64_t h,
				       void *handle, struct pcpu__sstruct *owner)
{
	struct pcpu__series *se;
	size_t bytes = 0;
	unsigned l;
	char *p;

	if (f->nseries >= f->tabsize && series_tab_grow(f) < 0)
		goto nomem;
	se = calloc(1, sizeof *se);
	if (!se)
		goto nomem;
	if (f->nlabels) {
		for (l = 0; l < f->nlabels; l++)
			bytes += strlen(v[l]) + 1;
		se->values = malloc(f->nlabels * sizeof(char *) + bytes);
		if (!se->values) {
			free(se);
			goto nomem;
		}
		p = (char *)(se->values + f->nlabels);
		for (l = 0; l < f->nlabels; l++) {
			size_t n = strlen(v[l]) + 1;
			memcpy(p, v[l], n);
			se->values[l] = p;
			p += n;
		}
	}
	se->hash = h;
	se->handle = handle;
	se->owner = owner;
	se->hnext = f->tab[h & (f->tabsize - 1)];
	f->tab[h & (f->tabsize - 1)] = se;
	se->lprev = f->llast;
	if (f->llast)
		f->llast->lnext = se;
	else
		f->lfirst = se;
	f->llast = se;
	f->nseries++;
	bump_generation(f->reg);
	notify(f->reg, PCPU__REG_SERIES_ADDED, f, se);
	return se;
nomem:
	errno = ENOMEM;
	return NULL;
}

/* Unlinks and frees a series, not its storage (which the caller frees
 * after); registry locked. */
static void series_unlink(struct pcpu_family *f, struct pcpu__series *se)
{
	struct pcpu__series **pp = &f->tab[se->hash & (f->tabsize - 1)];

	notify(f->reg, PCPU__REG_SERIES_REMOVING, f, se);
	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == se) {
			*pp = se->hnext;
			if (se->lprev)
				se->lprev->lnext = se->lnext;
			else
				f->lfirst = se->lnext;
			if (se->lnext)
				se->lnext->lprev = se->lprev;
			else
				f->llast = se->lprev;
			f->nseries--;
			bump_generation(f->reg);
			break;
		}
	}
	pcpu__callback_forget_locked(f->reg, se);
	free(se->values);
	free(se);
}

/* The series of f with label values v, created if absent. `info`: the
 * caller is pcpu_registry_info(), the only maker of an info family's
 * series (each is 1; a series made as a plain gauge would be 0). */
static void *series_get(pcpu_family_t *f, const char *const *v, enum pcpu_metric_type type,
			int info)
{
	const char *buf[PCPU_STATS_LABELS_MAX];
	struct pcpu__series *se;
	void *handle = NULL;
	uint64_t h;

	if (!f) {
		fail(EINVAL, "family is NULL");
		return NULL;
	}
	if ((f->flags & PCPU_SNAPSHOT_INFO) && !info) {
		fail(EINVAL, "an info family's series are made by pcpu_registry_info()");
		pcpu__msg_prefix("family", f->name);
		return NULL;
	}
	if (f->gfam) {
		fail(EINVAL, "a member of a consistent group family: use pcpu_group_family_series()");
		return NULL;
	}
	if (f->type != type) {
		pcpu__set_error(type == PCPU_METRIC_COUNTER ? "not a counter family"
				: type == PCPU_METRIC_GAUGE ? "not a gauge family"
							    : "not a histogram family");
		pcpu__msg_prefix("family", f->name);
		errno = EINVAL;
		return NULL;
	}
	if (values_check(f, v, buf, &v) < 0)
		return NULL;
	h = hash_values(v, f->nlabels);
	pthread_mutex_lock(&f->reg->lock);
	se = series_find(f, v, h);
	if (se) {
		handle = se->handle;
	} else {
		handle = storage_alloc(f);
		if (handle && !series_new(f, v, h, handle, NULL)) {
			storage_free(f, handle);
			handle = NULL;
		}
	}
	pthread_mutex_unlock(&f->reg->lock);
	return handle;
}

int pcpu__series_add_callback(struct pcpu_family *f, const char *const *v,
			      struct pcpu__callback *cb)
{
	const char *buf[PCPU_STATS_LABELS_MAX];
	struct pcpu__series *se;
	void *handle;
	uint64_t h;
	int r = 0;

	if (f->gfam) {
		fail(EINVAL, "a member of a consistent group family has no callback series");
		return -1;
	}
	if (values_check(f, v, buf, &v) < 0)
		return -1;
	h = hash_values(v, f->nlabels);
	pthread_mutex_lock(&f->reg->lock);
	if (series_find(f, v, h)) {
		pcpu__set_error("a series with these label values exists already");
		pcpu__msg_prefix("family", f->name);
		errno = EEXIST;
		r = -1;
	} else if (!(handle = storage_alloc(f))) {
		r = -1;
	} else {
		/* Linked before the hook sees the series, so a mirror of the
		 * directory could tell it is computed. */
		cb->fam = f;
		se = series_new(f, v, h, handle, NULL);
		if (!se) {
			storage_free(f, handle);
			r = -1;
		} else {
			se->cb = cb;
			cb->se = se;
			cb->next = NULL;
			cb->prev = f->reg->callbacks_last;
			if (cb->prev)
				cb->prev->next = cb;
			else
				f->reg->callbacks = cb;
			f->reg->callbacks_last = cb;
			f->reg->ncallbacks++;
		}
	}
	pthread_mutex_unlock(&f->reg->lock);
	return r;
}

pcpu_counter_t pcpu_family_counter(pcpu_family_t *fam, const char *const *label_values)
{
	return (pcpu_counter_t)series_get(fam, label_values, PCPU_METRIC_COUNTER, 0);
}

pcpu_gauge_t pcpu_family_gauge(pcpu_family_t *fam, const char *const *label_values)
{
	return (pcpu_gauge_t)series_get(fam, label_values, PCPU_METRIC_GAUGE, 0);
}

pcpu_histogram_t *pcpu_family_histogram(pcpu_family_t *fam, const char *const *label_values)
{
	return (pcpu_histogram_t *)series_get(fam, label_values, PCPU_METRIC_HISTOGRAM, 0);
}

void *pcpu_family_lookup(pcpu_family_t *f, const char *const *v)
{
	const char *buf[PCPU_STATS_LABELS_MAX];
	struct pcpu__series *se;
	void *handle = NULL;

	if (!f || values_check(f, v, buf, &v) < 0) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&f->reg->lock);
	se = series_find(f, v, hash_values(v, f->nlabels));
	if (se)
		handle = f->gfam ? (void *)((struct pcpu__gseries *)se->handle)->g : se->handle;
	pthread_mutex_unlock(&f->reg->lock);
	if (!handle)
		errno = ENOENT;
	return handle;
}

int pcpu_family_remove(pcpu_family_t *f, const char *const *v)
{
	const char *buf[PCPU_STATS_LABELS_MAX];
	struct pcpu__series *se;
	int r = 0;

	if (!f || values_check(f, v, buf, &v) < 0)
		return fail(EINVAL, NULL);
	pthread_mutex_lock(&f->reg->lock);
	se = series_find(f, v, hash_values(v, f->nlabels));
	if (se && se->cb) {
		/* Its callback may be running: wait, then look again. */
		if (pcpu__collect_wait_locked(f->reg) < 0) {
			pthread_mutex_unlock(&f->reg->lock);
			return -1;
		}
		se = series_find(f, v, hash_values(v, f->nlabels));
	}
	if (!se) {
		r = fail(ENOENT, "no series with these label values");
	} else if (f->gfam) {
		r = fail(EBUSY, "the series is a group's: remove it with pcpu_group_family_remove()");
	} else if (se->owner) {
		r = fail(EBUSY, "the series is a field of a registered struct");
	} else {
		void *handle = se->handle;

		series_unlink(f, se); /* before the storage goes: see registry.h */
		storage_free(f, handle);
	}
	pthread_mutex_unlock(&f->reg->lock);
	return r;
}

const char *pcpu_family_name(const pcpu_family_t *fam)
{
	return fam ? fam->name : NULL;
}

enum pcpu_metric_type pcpu_family_type(const pcpu_family_t *fam)
{
	return fam ? fam->type : (enum pcpu_metric_type)0;
}

size_t pcpu_family_size(pcpu_family_t *f)
{
	size_t n;

	if (!f)
		return 0;
	pthread_mutex_lock(&f->reg->lock);
	n = f->nseries;
	pthread_mutex_unlock(&f->reg->lock);
	return n;
}

/* ---- registry ---- */

/* fork(): every registry's lock is taken around fork() (fork.c), so a child
 * never inherits one held by a snapshot or a registration of another
 * thread. Order: default_lock (held while creating the default registry),
 * then the list, then each registry's lock. */
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pcpu_registry *default_reg;
static pthread_mutex_t registries_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pcpu_registry *registries;
static int fork_registered;

static void registries_fork_prepare(void)
{
	struct pcpu_registry *r;

	pthread_mutex_lock(&default_lock);
	pthread_mutex_lock(&registries_lock);
	for (r = registries; r; r = r->next)
		pthread_mutex_lock(&r->lock);
}

static void registries_fork_release(void)
{
	struct pcpu_registry *r;

	for (r = registries; r; r = r->next)
		pthread_mutex_unlock(&r->lock);
	pthread_mutex_unlock(&registries_lock);
	pthread_mutex_unlock(&default_lock);
}

static void registries_fork_child(void)
{
	struct pcpu_registry *r;

	for (r = registries; r; r = r->next)
		pcpu__collect_fork_child(r);
	registries_fork_release();
}

pcpu_registry_t *pcpu_registry_create(void)
{
	struct pcpu_registry *reg;

	if (pcpu_fork_register(&fork_registered, PCPU_FORK_REGISTRY, registries_fork_prepare,
			       registries_fork_release, registries_fork_child) != 0)
		return NULL;
	reg = calloc(1, sizeof *reg);
	if (!reg)
		return NULL;
	reg->zone = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	if (!reg->zone) {
		free(reg);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&reg->lock, NULL);
	pthread_cond_init(&reg->collect_cv, NULL);
	pthread_mutex_lock(&registries_lock);
	reg->next = registries;
	registries = reg;
	pthread_mutex_unlock(&registries_lock);
	/* A cache may now name a registry. */
	pcpu__objcache_stats_install(pcpu_registry_struct, pcpu_registry_struct_remove);
	return reg;
}

pcpu_registry_t *pcpu_registry_default(void)
{
	struct pcpu_registry *r = __atomic_load_n(&default_reg, __ATOMIC_ACQUIRE);

	if (r)
		return r;
	if (pcpu_fork_register(&fork_registered, PCPU_FORK_REGISTRY, registries_fork_prepare,
			       registries_fork_release, registries_fork_child) != 0)
		return NULL;
	/* Created before default_lock is taken: creating one may register
	 * fork handlers (the zone's), which takes fork.c's lock, and fork()'s
	 * prepare takes that lock before default_lock -- the other order
	 * would deadlock a first call racing a fork(). Two first callers may
	 * both create one; the loser destroys its own. */
	struct pcpu_registry *mine = pcpu_registry_create();

	if (!mine)
		return NULL;
	pthread_mutex_lock(&default_lock);
	r = default_reg;
	if (!r) {
		r = mine;
		mine = NULL;
		r->is_default = 1;
		__atomic_store_n(&default_reg, r, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&default_lock);
	if (mine)
		pcpu_registry_destroy(mine);
	return r;
}

pcpu_zone_t *pcpu_registry_zone(pcpu_registry_t *reg)
{
	return reg ? reg->zone : NULL;
}

uint64_t pcpu_registry_generation(pcpu_registry_t *reg)
{
	return reg ? __atomic_load_n(&reg->generation, __ATOMIC_ACQUIRE) : 0;
}

/* Checks a set of constant labels (the registry's or a family's). */
static int const_labels_check(unsigned n, const char *const *names, const char *const *values)
{
	unsigned l, k;

	if (n == 0 || n > PCPU_STATS_LABELS_MAX || !names || !values)
		return fail(EINVAL, "constant labels: NULL names or values, or not 1 to 32 labels");
	for (l = 0; l < n; l++) {
		if (pcpu_stats_check_label_name(names[l]) < 0 ||
		    pcpu_stats_check_label_value(values[l]) < 0) {
			pcpu__msg_prefix("constant label", names[l] ? names[l] : "(null)");
			errno = EINVAL;
			return -1;
		}
		/* Histograms reserve "le" for their buckets. */
		if (strcmp(names[l], "le") == 0)
			return fail(EINVAL, "constant labels: \"le\" is reserved (histogram buckets)");
		for (k = 0; k < l; k++)
			if (strcmp(names[k], names[l]) == 0)
				return fail(EINVAL, "constant labels: a label name appears twice");
	}
	return 0;
}

/* Finds or creates the family `d` describes, with `x`. */
static struct pcpu_family *family_register(pcpu_registry_t *reg, const struct pcpu_family_desc *d,
					   const struct fam_extra *x)
{
	char base[PCPU_STATS_NAME_MAX + 1];
	struct pcpu_family *f;
	int created;

	if (!reg) {
		fail(EINVAL, "registry is NULL");
		return NULL;
	}
	if (desc_check(d, base) < 0)
		return NULL;
	pthread_mutex_lock(&reg->lock);
	f = family_get_locked(reg, d, base, &created, NULL, 0, x);
	pthread_mutex_unlock(&reg->lock);
	return f;
}

pcpu_family_t *pcpu_registry_family(pcpu_registry_t *reg, const struct pcpu_family_desc *d)
{
	return family_register(reg, d, &no_extra);
}

pcpu_family_t *pcpu_registry_family_const(pcpu_registry_t *reg, const struct pcpu_family_desc *d,
					  unsigned n, const char *const *names,
					  const char *const *values)
{
	struct fam_extra x = { 0, n, names, values };

	if (const_labels_check(n, names, values) < 0)
		return NULL;
	return family_register(reg, d, &x);
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
	n = sname_find(reg, name, "");
	if (n && (strcmp(n->fam->name, name) == 0 ||
		  (n->fam->type == PCPU_METRIC_COUNTER && strlen(name) == strlen(n->fam->name) + 6 &&
		   strcmp(name + strlen(n->fam->name), "_total") == 0)))
		f = n->fam;
	pthread_mutex_unlock(&reg->lock);
	if (!f)
		errno = ENOENT;
	return f;
}

/* Frees a family and all its series' storage; registry locked; no series
 * may belong to a struct. */
static void family_destroy_locked(struct pcpu_registry *reg, struct pcpu_family *f)
{
	size_t i;

	notify(reg, PCPU__REG_FAMILY_REMOVING, f, NULL);
	for (i = 0; i < f->tabsize; i++) {
		struct pcpu__series *se = f->tab[i], *next;
		for (; se; se = next) {
			next = se->hnext;
			if (!se->owner)
				storage_free(f, se->handle);
			pcpu__callback_forget_locked(reg, se);
			free(se->values);
			free(se);
		}
		f->tab[i] = NULL;
	}
	sname_remove_family(reg, f);
	reg->fams[f->index] = reg->fams[reg->nfams - 1];
	reg->fams[f->index]->index = f->index;
	reg->nfams--;
	bump_generation(reg);
	family_free_meta(f);
}

static int family_has_callbacks(const struct pcpu_family *f)
{
	const struct pcpu__series *se;

	for (se = f->lfirst; se; se = se->lnext)
		if (se->cb)
			return 1;
	return 0;
}

static int family_has_struct_series(const struct pcpu_family *f)
{
	size_t i;

	for (i = 0; i < f->tabsize; i++) {
		const struct pcpu__series *se;
		for (se = f->tab[i]; se; se = se->hnext)
			if (se->owner)
				return 1;
	}
	return 0;
}

int pcpu_registry_remove_family(pcpu_registry_t *reg, pcpu_family_t *f)
{
	int r = 0;

	if (!reg || !f)
		return fail(EINVAL, "NULL registry or family");
	pthread_mutex_lock(&reg->lock);
	if (f->reg != reg || f->index >= reg->nfams || reg->fams[f->index] != f)
		r = fail(EINVAL, "not a family of this registry");
	else if (family_has_struct_series(f))
		r = fail(EBUSY, "the family has fields of a registered struct; remove the struct first");
	else if (f->gfam)
		r = fail(EBUSY, "the family is a member of a consistent group family");
	else if (family_has_callbacks(f) && pcpu__collect_wait_locked(reg) < 0)
		r = -1; /* EDEADLK: called from one of reg's callbacks */
	else
		family_destroy_locked(reg, f);
	pthread_mutex_unlock(&reg->lock);
	return r;
}

static void free_strings(char **v, unsigned n)
{
	unsigned k;

	if (!v)
		return;
	for (k = 0; k < n; k++)
		free(v[k]);
	free(v);
}

static char **dup_strings(const char *const *v, unsigned n)
{
	char **out = calloc(n, sizeof *out);
	unsigned k;

	if (!out)
		return NULL;
	for (k = 0; k < n; k++)
		if (!(out[k] = strdup(v[k]))) {
			free_strings(out, k);
			errno = ENOMEM;
			return NULL;
		}
	return out;
}

int pcpu_registry_const_labels(pcpu_registry_t *reg, unsigned n, const char *const *names,
			       const char *const *values)
{
	char **cn = NULL, **cv = NULL;
	int r = 0;

	if (!reg)
		return fail(EINVAL, "constant labels: NULL registry");
	if (const_labels_check(n, names, values) < 0)
		return -1;
	if (!(cn = dup_strings(names, n)) || !(cv = dup_strings(values, n))) {
		free_strings(cn, n);
		return fail(ENOMEM, NULL);
	}
	pthread_mutex_lock(&reg->lock);
	if (reg->nfams || reg->nconst) {
		r = fail(EBUSY, "constant labels: set them once, before the first family");
	} else {
		reg->const_names = cn;
		reg->const_values = cv;
		reg->nconst = n;
		cn = cv = NULL;
	}
	pthread_mutex_unlock(&reg->lock);
	free_strings(cn, n);
	free_strings(cv, n);
	return r;
}

int pcpu_registry_info(pcpu_registry_t *reg, const char *name, const char *help, unsigned nlabels,
		       const char *const *label_names, const char *const *label_values)
{
	static const struct fam_extra info = { PCPU_SNAPSHOT_INFO, 0, NULL, NULL };
	struct pcpu_family_desc d;
	pcpu_family_t *f;
	pcpu_gauge_t g;

	if (!pcpu__info_name_len(name, PCPU_SNAPSHOT_INFO))
		return fail(EINVAL, "an info metric's name ends in \"_info\"");
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
	g = series_get(f, label_values, PCPU_METRIC_GAUGE, 1);
	return g ? pcpu_gauge_set(g, 1) : -1;
}

void pcpu_registry_destroy(pcpu_registry_t *reg)
{
	struct pcpu__sstruct *ss, *next;
	struct pcpu_registry **pp;

	if (!reg || reg->is_default)
		return;
	pthread_mutex_lock(&registries_lock);
	for (pp = &registries; *pp; pp = &(*pp)->next)
		if (*pp == reg) {
			*pp = reg->next;
			break;
		}
	pthread_mutex_unlock(&registries_lock);
	pthread_mutex_lock(&reg->lock);
	(void)pcpu__collect_wait_locked(reg); /* by contract none runs; be safe */
	for (ss = reg->structs; ss; ss = next) {
		next = ss->next;
		free(ss->fams);
		free(ss->series);
		free(ss);
	}
	reg->structs = NULL;
	while (reg->nfams)
		family_destroy_locked(reg, reg->fams[reg->nfams - 1]);
	pthread_mutex_unlock(&reg->lock);
	free(reg->fams);
	free(reg->names);
	while (reg->gfams) {
		struct pcpu__gfamily *gf = reg->gfams;

		reg->gfams = gf->next;
		free(gf);
	}
	free_strings(reg->const_names, reg->nconst);
	free_strings(reg->const_values, reg->nconst);
	/* Struct objects and any storage not freed above go with the zone. */
	pcpu_zone_destroy(reg->zone);
	notify(reg, PCPU__REG_DESTROYED, NULL, NULL);
	pthread_cond_destroy(&reg->collect_cv);
	pthread_mutex_destroy(&reg->lock);
	free(reg);
}

pcpu_counter_t pcpu_registry_counter(pcpu_registry_t *reg, const char *name, const char *help)
{
	struct pcpu_family_desc d;
	pcpu_family_t *f;

	memset(&d, 0, sizeof d);
	d.name = name;
	d.help = help;
	d.type = PCPU_METRIC_COUNTER;
	f = pcpu_registry_family(reg, &d);
	return f ? pcpu_family_counter(f, NULL) : NULL;
}

pcpu_gauge_t pcpu_registry_gauge(pcpu_registry_t *reg, const char *name, const char *help)
{
	struct pcpu_family_desc d;
	pcpu_family_t *f;

	memset(&d, 0, sizeof d);
	d.name = name;
	d.help = help;
	d.type = PCPU_METRIC_GAUGE;
	f = pcpu_registry_family(reg, &d);
	return f ? pcpu_family_gauge(f, NULL) : NULL;
}

/* ---- statistics structs ---- */

static size_t field_size(enum pcpu_metric_type t)
{
	return t == PCPU_METRIC_COUNTER ? sizeof(struct pcpu_counter) : sizeof(struct pcpu_gauge);
}

static int fields_check(size_t size, const struct pcpu_stats_field *fields, size_t n)
{
	size_t k, j;

	if (!fields || n == 0 || n > 4096)
		return fail(EINVAL, "struct: needs 1 to 4096 fields");
	if (size > PCPU_ZONE_MAX_OBJECT)
		return fail(E2BIG, "struct: larger than one zone object");
	for (k = 0; k < n; k++) {
		const struct pcpu_stats_field *f = &fields[k];

		if (f->type != PCPU_METRIC_COUNTER && f->type != PCPU_METRIC_GAUGE)
			return fail(EINVAL, "struct: a field must be a counter or a gauge");
		if (f->offset % 8 || f->offset > size || size - f->offset < field_size(f->type))
			return fail(EINVAL, "struct: a field is misaligned or outside the struct");
		for (j = 0; j < k; j++) {
			const struct pcpu_stats_field *g = &fields[j];

			if (f->offset < g->offset + field_size(g->type) &&
			    g->offset < f->offset + field_size(f->type))
				return fail(EINVAL, "struct: two fields overlap");
			if (f->name && g->name && strcmp(f->name, g->name) == 0)
				return fail(EINVAL, "struct: two fields have the same name");
		}
	}
	return 0;
}

void *pcpu_registry_struct(pcpu_registry_t *reg, size_t size, const struct pcpu_stats_field *fields,
			   size_t nfields, unsigned nlabels, const char *const *label_names,
			   const char *const *label_values)
{
	const char *full[PCPU_STATS_LABELS_MAX];
	struct pcpu_family_desc d;
	struct pcpu__sstruct *ss = NULL;
	char (*base)[PCPU_STATS_NAME_MAX + 1] = NULL;
	int *created = NULL;
	uint64_t h;
	size_t k, made = 0;
	int err = ENOMEM;

	if (!reg) {
		fail(EINVAL, "registry is NULL");
		return NULL;
	}
	if (fields_check(size, fields, nfields) < 0)
		return NULL;
	base = malloc(nfields * sizeof *base);
	created = calloc(nfields, sizeof *created);
	ss = calloc(1, sizeof *ss);
	if (!base || !created || !ss)
		goto fail_nolock;
	ss->fams = calloc(nfields, sizeof *ss->fams);
	ss->series = calloc(nfields, sizeof *ss->series);
	if (!ss->fams || !ss->series)
		goto fail_nolock;
	memset(&d, 0, sizeof d);
	d.nlabels = nlabels;
	d.label_names = label_names;
	for (k = 0; k < nfields; k++) {
		d.name = fields[k].name;
		d.help = fields[k].help;
		d.unit = fields[k].unit;
		d.type = fields[k].type;
		d.scale_exp10 = fields[k].scale_exp10;
		if (desc_check(&d, base[k]) < 0) {
			err = errno;
			goto fail_nolock;
		}
	}
	pthread_mutex_lock(&reg->lock);
	for (k = 0; k < nfields; k++) {
		d.name = fields[k].name;
		d.help = fields[k].help;
		d.unit = fields[k].unit;
		d.type = fields[k].type;
		d.scale_exp10 = fields[k].scale_exp10;
		ss->fams[k] = family_get_locked(reg, &d, base[k], &created[k], NULL, 0, &no_extra);
		if (!ss->fams[k]) {
			err = errno;
			goto fail_locked;
		}
	}
	for (k = 0; k < nfields; k++) {
		size_t j;

		/* "x" and "x_total" are one counter family. */
		for (j = 0; j < k; j++)
			if (ss->fams[j] == ss->fams[k]) {
				pcpu__set_error("struct: two fields name the same family");
				err = EINVAL;
				goto fail_locked;
			}
	}
	if (values_check(ss->fams[0], label_values, full, &label_values) < 0) {
		err = errno;
		goto fail_locked;
	}
	h = hash_values(label_values, ss->fams[0]->nlabels);
	for (k = 0; k < nfields; k++) {
		if (series_find(ss->fams[k], label_values, h)) {
			pcpu__set_error("a series with these label values exists already");
			pcpu__msg_prefix("family", ss->fams[k]->name);
			err = EEXIST;
			goto fail_locked;
		}
	}
	ss->obj = pcpu_zone_alloc(reg->zone, size, 8);
	if (!ss->obj) {
		err = errno;
		goto fail_locked;
	}
	ss->nfields = nfields;
	for (made = 0; made < nfields; made++) {
		ss->series[made] = series_new(ss->fams[made], label_values, h,
					      (char *)ss->obj + fields[made].offset, ss);
		if (!ss->series[made])
			goto fail_locked;
	}
	ss->next = reg->structs;
	reg->structs = ss;
	pthread_mutex_unlock(&reg->lock);
	free(base);
	free(created);
	return ss->obj;

fail_locked:
	while (made > 0) {
		made--;
		series_unlink(ss->fams[made], ss->series[made]);
	}
	if (ss->obj)
		pcpu_zone_free(reg->zone, ss->obj);
	for (k = nfields; k > 0; k--)
		if (created[k - 1] && ss->fams[k - 1] && ss->fams[k - 1]->nseries == 0)
			family_destroy_locked(reg, ss->fams[k - 1]);
	pthread_mutex_unlock(&reg->lock);
fail_nolock:
	if (ss) {
		free(ss->fams);
		free(ss->series);
		free(ss);
	}
	free(base);
	free(created);
	errno = err;
	return NULL;
}

int pcpu_registry_struct_remove(pcpu_registry_t *reg, void *s)
{
	struct pcpu__sstruct **pp, *ss = NULL;
	size_t k;

	if (!reg || !s)
		return fail(EINVAL, "NULL registry or struct");
	pthread_mutex_lock(&reg->lock);
	for (pp = &reg->structs; *pp; pp = &(*pp)->next) {
		if ((*pp)->obj == s) {
			ss = *pp;
			*pp = ss->next;
			break;
		}
	}
	if (ss) {
		for (k = 0; k < ss->nfields; k++)
			series_unlink(ss->fams[k], ss->series[k]);
		pcpu_zone_free(reg->zone, ss->obj);
		bump_generation(reg);
	}
	pthread_mutex_unlock(&reg->lock);
	if (!ss)
		return fail(EINVAL, "not a struct registered in this registry");
	free(ss->fams);
	free(ss->series);
	free(ss);
	return 0;
}

/* ---- consistent group families ---- */

pcpu_group_family_t *pcpu_registry_group(pcpu_registry_t *reg, const struct pcpu_family_desc *members,
					 unsigned nmembers)
{
	char (*base)[PCPU_STATS_NAME_MAX + 1] = NULL;
	struct pcpu__gfamily *gf;
	unsigned k, l, made = 0;
	int created, err = 0;

	if (!reg || !members || nmembers == 0 || nmembers > PCPU_GROUP_MAX_MEMBERS) {
		fail(EINVAL, "group family: NULL registry or members, or not 1 to 16 members");
		return NULL;
	}
	for (k = 0; k < nmembers; k++) {
		const struct pcpu_family_desc *d = &members[k];

		if (d->type != PCPU_METRIC_COUNTER && d->type != PCPU_METRIC_GAUGE) {
			fail(EINVAL, "group family: members are counters or gauges");
			return NULL;
		}
		/* One label set per group: every member has the same labels. */
		if (d->nlabels != members[0].nlabels) {
			fail(EINVAL, "group family: every member has the same label names");
			return NULL;
		}
		for (l = 0; l < d->nlabels; l++)
			if (!d->label_names || !members[0].label_names || !d->label_names[l] ||
			    !members[0].label_names[l] ||
			    strcmp(d->label_names[l], members[0].label_names[l]) != 0) {
				fail(EINVAL, "group family: every member has the same label names");
				return NULL;
			}
	}
	base = malloc(nmembers * sizeof *base);
	gf = calloc(1, sizeof *gf);
	if (!base || !gf) {
		free(base);
		free(gf);
		errno = ENOMEM;
		return NULL;
	}
	for (k = 0; k < nmembers; k++)
		if (desc_check(&members[k], base[k]) < 0) {
			free(base);
			free(gf);
			return NULL;
		}
	gf->nmembers = nmembers;
	pthread_mutex_lock(&reg->lock);
	for (made = 0; made < nmembers; made++) {
		gf->fams[made] = family_get_locked(reg, &members[made], base[made], &created, gf, made,
						   &no_extra);
		if (!gf->fams[made]) {
			err = errno;
			break;
		}
	}
	if (made < nmembers) {
		/* All or nothing; the families are new (created with gf). */
		while (made > 0)
			family_destroy_locked(reg, gf->fams[--made]);
	} else {
		gf->next = reg->gfams;
		reg->gfams = gf;
	}
	pthread_mutex_unlock(&reg->lock);
	free(base);
	if (err) {
		free(gf);
		errno = err;
		return NULL;
	}
	return gf;
}

pcpu_group_t *pcpu_group_family_series(pcpu_group_family_t *gf, const char *const *label_values)
{
	const char *buf[PCPU_STATS_LABELS_MAX];
	struct pcpu_registry *reg;
	struct pcpu__series *se;
	struct pcpu__gseries *gs = NULL;
	pcpu_group_t *g = NULL;
	const char *const *v;
	unsigned k, made;
	uint64_t h;

	if (!gf) {
		fail(EINVAL, "group family is NULL");
		return NULL;
	}
	if (values_check(gf->fams[0], label_values, buf, &v) < 0)
		return NULL;
	reg = gf->fams[0]->reg;
	h = hash_values(v, gf->fams[0]->nlabels);
	pthread_mutex_lock(&reg->lock);
	se = series_find(gf->fams[0], v, h);
	if (se) {
		g = ((struct pcpu__gseries *)se->handle)->g;
		goto out;
	}
	gs = calloc(1, sizeof *gs);
	if (!gs || !(gs->g = pcpu_group_alloc_in(reg->zone, gf->nmembers, 1)))
		goto nomem;
	for (made = 0; made < gf->nmembers; made++)
		if (!series_new(gf->fams[made], v, h, gs, NULL))
			break;
	if (made < gf->nmembers) {
		for (k = 0; k < made; k++)
			series_unlink(gf->fams[k], series_find(gf->fams[k], v, h));
		goto nomem;
	}
	g = gs->g;
	goto out;
nomem:
	if (gs && gs->g)
		pcpu_group_free(gs->g);
	free(gs);
	errno = ENOMEM;
out:
	pthread_mutex_unlock(&reg->lock);
	return g;
}

int pcpu_group_family_remove(pcpu_group_family_t *gf, const char *const *label_values)
{
	const char *buf[PCPU_STATS_LABELS_MAX];
	struct pcpu_registry *reg;
	struct pcpu__series *se;
	const char *const *v;
	void *gs;
	unsigned k;
	uint64_t h;

	if (!gf)
		return fail(EINVAL, "group family is NULL");
	if (values_check(gf->fams[0], label_values, buf, &v) < 0)
		return -1;
	reg = gf->fams[0]->reg;
	h = hash_values(v, gf->fams[0]->nlabels);
	pthread_mutex_lock(&reg->lock);
	se = series_find(gf->fams[0], v, h);
	if (!se) {
		pthread_mutex_unlock(&reg->lock);
		return fail(ENOENT, "no group with these label values");
	}
	gs = se->handle;
	for (k = 0; k < gf->nmembers; k++)
		series_unlink(gf->fams[k], series_find(gf->fams[k], v, h));
	storage_free(gf->fams[0], gs);
	pthread_mutex_unlock(&reg->lock);
	return 0;
}

void pcpu__groups_read_locked(struct pcpu_registry *reg)
{
	const struct pcpu__gfamily *gf;
	const struct pcpu__series *se;

	/* One consistent read per group, which every member's series then
	 * shows: reading per member family would mix two reads. */
	for (gf = reg->gfams; gf; gf = gf->next)
		for (se = gf->fams[0]->lfirst; se; se = se->lnext) {
			struct pcpu__gseries *gs = se->handle;

			gs->ok = pcpu_group_read(gs->g, 0, gs->vals) == 0;
		}
	if (reg->gfams)
		notify(reg, PCPU__REG_GROUPS_READ, NULL, NULL); /* the segment's copies */
}
