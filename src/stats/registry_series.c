/* SPDX-License-Identifier: MIT */
/*
 * Series of a family: label values checked, hashed and found in the
 * family's table, the storage of a new series allocated in the registry's
 * zone, series linked and unlinked (the directory events a mirror sees,
 * registry.h), and the public lookups of a family's series.
 *
 * A series' key is its label values (the family fixes the names), hashed
 * with values separated by 0xff, a byte UTF-8 never contains. Series are
 * also kept in a list in creation order, which is the order snapshots and
 * expositions list them in: deterministic, stable from one scrape to the
 * next (new series come last), and free -- sorting 10^5 label sets by value
 * cost more than everything else in an export.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/fraction.h>

#include "registry.h"

uint64_t pcpu__series_hash(const char *const *v, unsigned n)
{
	return pcpu__hash_values(PCPU__HASH_INIT, v, n);
}

/* ---- series ---- */

/* A new series' value in the registry's zone; NULL with errno and a
 * message: the zone's ENOMEM, or a published segment's ENOSPC (its file
 * system is full) or EFBIG (RLIMIT_FSIZE). */
static void *storage_alloc(struct pcpu_family *f)
{
	void *h = NULL;

	switch (f->type) {
	case PCPU_METRIC_COUNTER:
	case PCPU_METRIC_GAUGE:
		/* With fractions, the billionths' word and the residue's
		 * beside the whole units' (a gauge is one counter word:
		 * pcpu/gauge.h; pcpu/fraction.h). */
		h = pcpu_counter_alloc_in(f->reg->zone,
					  f->flags & PCPU_SNAPSHOT_NANOS ? PCPU_FRACTION_WORDS : 1);
		break;
	case PCPU_METRIC_HISTOGRAM:
		h = pcpu__family_histogram(f, NULL);
		break;
	default:
		errno = EINVAL;
	}
	if (!h)
		pcpu__storage_failed(f);
	return h;
}

pcpu_histogram_t *pcpu__family_histogram(const struct pcpu_family *f, void *at)
{
	/* An explicit layout's bounds are the family's (one copy for all
	 * its series, padded for the search). Sparse in a published
	 * registry too: its segment gives each series a table of its groups'
	 * places (format 2.10). */
	return pcpu__histogram_create_at(f->reg->zone, &f->layout, at,
					 f->layout.scheme == PCPU_HISTOGRAM_EXPLICIT ? f->bounds : NULL,
					 f->scale_exp10,
					 (f->flags & PCPU_SNAPSHOT_NANOS ? PCPU__HISTOGRAM_WIDE : 0) |
						 (f->sparse ? PCPU__HISTOGRAM_OPT_SPARSE : 0));
}

void pcpu__storage_failed(const struct pcpu_family *f)
{
	int err = errno;

	pcpu__set_error(err == ENOSPC ? "no space for the series' values: the file system of the "
					"registry's published segment is full (pcpu_segment_nospace())"
			: err == EFBIG ? "no space for the series' values: the published segment's "
					 "file would pass RLIMIT_FSIZE"
			: err == ENOMEM ? "out of memory for the series' values"
					: "the series' values could not be allocated");
	pcpu__msg_prefix("family", f->name);
	errno = err;
}

void pcpu__storage_free(const struct pcpu_family *f, void *h)
{
	if (f->gfam) {
		/* One gseries for all members: member 0's series owns it. */
		if (f->gmember == 0) {
			pcpu__group_free_in(f->reg->zone, ((struct pcpu__gseries *)h)->g);
			free(h);
		}
		return;
	}
	switch (f->type) {
	case PCPU_METRIC_COUNTER:
	case PCPU_METRIC_GAUGE:
		/* The registry's zone holds it: freed there, without the
		 * search by address pcpu_counter_free() and
		 * pcpu_gauge_free() make for a handle of unknown origin. */
		(void)pcpu_zone_free(f->reg->zone, h);
		break;
	case PCPU_METRIC_HISTOGRAM:
		pcpu__histogram_destroy_in(f->reg->zone, (pcpu_histogram_t *)h, f->bounds);
		break;
	}
}

/* Checks the caller's label values of a series of f and sets *out to the
 * series' whole key: those values, then the registry's constant label
 * values (in `buf`, PCPU_STATS_LABELS_MAX entries, when there are some). */
int pcpu__values_check(const struct pcpu_family *f, const char *const *v, const char **buf,
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

/* A series looked up: its whole key. */
struct values_key {
	const char *const *v;
	unsigned n;
};

static int values_eq(const struct pcpu__hslot *s, const void *ctx)
{
	const struct pcpu__series *se = (const struct pcpu__series *)s->key;
	const struct values_key *k = ctx;
	unsigned l;

	for (l = 0; l < k->n; l++)
		if (strcmp(se->values[l], k->v[l]) != 0)
			return 0;
	return 1;
}

struct pcpu__series *pcpu__series_find(struct pcpu_family *f, const char *const *v, uint64_t h)
{
	struct values_key k = { v, f->nlabels };
	struct pcpu__hslot *s = pcpu__htab_find(&f->series, h, values_eq, &k);

	return s ? (struct pcpu__series *)s->key : NULL;
}

/* ---- several label sets of one name (registry_labelsets.c) ---- */

/* The value of label `name` in f's series of values v, "" if f has no
 * such label. */
static const char *value_of(const struct pcpu_family *f, const char *const *v, const char *name)
{
	unsigned l;

	for (l = 0; l < f->nlabels; l++)
		if (strcmp(f->label_names[l], name) == 0)
			return v[l];
	return "";
}

int pcpu__labelset_series_clash(const struct pcpu_family *f, const char *const *v)
{
	struct pcpu__sname *n = pcpu__sname_find(f->reg, f->name, "");
	const struct pcpu_family *g;
	const char *w[PCPU_STATS_LABELS_MAX];

	if (!n || (n->fam == f && !f->lsnext))
		return 0; /* the only label set of its name */
	for (g = n->fam; g; g = g->lsnext) {
		unsigned l, nonempty = 0, found = 0;

		if (g == f)
			continue;
		/* The series of g that is this one: every non-empty label of
		 * v among g's, and g's others empty. */
		for (l = 0; l < f->nlabels; l++)
			nonempty += v[l][0] != '\0';
		for (l = 0; l < g->nlabels; l++) {
			w[l] = value_of(f, v, g->label_names[l]);
			found += w[l][0] != '\0';
		}
		if (found != nonempty)
			continue; /* a non-empty label of v that g has not */
		if (pcpu__series_find((struct pcpu_family *)g, w, pcpu__series_hash(w, g->nlabels))) {
			pcpu__set_error("another label set of this name has this series (an empty label "
					"value is an absent label)");
			pcpu__msg_prefix("family", f->name);
			errno = EEXIST;
			return -1;
		}
	}
	return 0;
}

/* Takes a linked series out of its family's table and list. */
static void series_unlink_quiet(struct pcpu_family *f, struct pcpu__series *se)
{
	struct pcpu__hslot *s = pcpu__htab_find_key(&f->series, se->hash, (uintptr_t)se);

	if (!s)
		return;
	pcpu__htab_remove(&f->series, s);
	if (se->lprev)
		se->lprev->lnext = se->lnext;
	else
		f->lfirst = se->lnext;
	if (se->lnext)
		se->lnext->lprev = se->lprev;
	else
		f->llast = se->lprev;
	f->nseries--;
	pcpu__reg_bump(f->reg);
}

char **pcpu__values_copy(const char *const *v, unsigned n)
{
	size_t bytes = 0;
	unsigned l;
	char **nv, *p;

	for (l = 0; l < n; l++)
		bytes += strlen(v[l]) + 1;
	nv = malloc(n * sizeof(char *) + bytes);
	if (!nv)
		return NULL;
	p = (char *)(nv + n);
	for (l = 0; l < n; l++) {
		size_t len = strlen(v[l]) + 1;

		memcpy(p, v[l], len);
		nv[l] = p;
		p += len;
	}
	return nv;
}

/* Links a new series with the given handle; registry locked. NULL with
 * errno: ENOMEM, or the directory mirror's refusal. */
struct pcpu__series *pcpu__series_new(struct pcpu_family *f, const char *const *v, uint64_t h,
				       void *handle, struct pcpu__sstruct *owner)
{
	struct pcpu__series *se;

	if (pcpu__labelset_series_clash(f, v) < 0)
		return NULL; /* EEXIST: another label set of the name has it */
	if (pcpu__htab_reserve(&f->series, 1) < 0)
		goto nomem;
	se = calloc(1, sizeof *se);
	if (!se)
		goto nomem;
	if (f->nlabels && !(se->values = pcpu__values_copy(v, f->nlabels))) {
		free(se);
		goto nomem;
	}
	se->fam = f;
	se->hash = h;
	se->handle = handle;
	se->owner = owner;
	(void)pcpu__htab_add(&f->series, h, (uintptr_t)se, 0); /* reserved above */
	se->lprev = f->llast;
	if (f->llast)
		f->llast->lnext = se;
	else
		f->lfirst = se;
	f->llast = se;
	f->nseries++;
	pcpu__reg_bump(f->reg);
	if (pcpu__reg_notify(f->reg, PCPU__REG_SERIES_ADDED, f, se) != 0) {
		/* The directory mirror refused it (registry_observer.h): the
		 * series goes, unseen; the caller frees its storage. */
		int err = errno;

		series_unlink_quiet(f, se);
		free(se->values);
		free(se);
		errno = err;
		return NULL;
	}
	return se;
nomem:
	errno = ENOMEM;
	return NULL;
}

/* Unlinks and frees a series, not its storage (which the caller frees
 * after); registry locked. */
void pcpu__series_unlink(struct pcpu_family *f, struct pcpu__series *se)
{
	pcpu__reg_notify(f->reg, PCPU__REG_SERIES_REMOVING, f, se);
	series_unlink_quiet(f, se);
	pcpu__callback_forget_locked(f->reg, se);
	free(se->values);
	free(se);
}

/* Series se of f dropped if the tree's entry no longer carries its values:
 * unlinked, its storage left to the tree (a tree zone never reuses it). */
static void drop_if_stale(pcpu_registry_t *reg, struct pcpu_family *f, struct pcpu__series *se)
{
	if (!se->owner && reg->relabel(reg->hook_ctx, PCPU__RELABEL_STALE, f, se, NULL, NULL) == 1) {
		void *handle = se->handle;

		pcpu__series_unlink(f, se);
		pcpu__storage_free(f, handle);
	}
}

/* A shared registry whose directory another process relabelled (or a
 * repair freed a series' entry of): the series this process holds whose
 * entry no longer carries their label values are dropped -- unlinked,
 * their storage left to the tree (a tree zone never reuses it) -- so that
 * a lookup of those values makes or adopts the series the tree has now.
 * Registry locked. O(1) (one load) when nothing changed, O(entries
 * rewritten) when the segment's relabel log names them, else O(series of
 * this process), once per change. */
void pcpu__registry_tree_sync_locked(pcpu_registry_t *reg)
{
	size_t i;

	if (!reg->relabel || !reg->relabel(reg->hook_ctx, PCPU__RELABEL_CHANGED, NULL, NULL, NULL, NULL))
		return;
	if (pcpu__zone_tree_lock(reg->zone) != 0)
		return; /* tried again at the next look */
	if (reg->relabel(reg->hook_ctx, PCPU__RELABEL_LIST, NULL, NULL, NULL, NULL) == 1) {
		/* The series on the rewritten entries only (the segment's
		 * relabel log): O(entries rewritten). */
		struct pcpu__series *se;

		while (reg->relabel(reg->hook_ctx, PCPU__RELABEL_STALE_NEXT, NULL, NULL, NULL, &se) == 1)
			if (!se->fam->gfam) /* never relabelled: the relabel refuses them */
				drop_if_stale(reg, se->fam, se);
	} else {
		for (i = 0; i < reg->nfams; i++) {
			struct pcpu_family *f = reg->fams[i];
			struct pcpu__series *se, *next;

			if (f->gfam)
				continue; /* never relabelled: the relabel refuses them */
			for (se = f->lfirst; se; se = next) {
				next = se->lnext;
				drop_if_stale(reg, f, se);
			}
		}
	}
	(void)reg->relabel(reg->hook_ctx, PCPU__RELABEL_SEEN, NULL, NULL, NULL, NULL);
	pcpu__zone_tree_unlock(reg->zone);
}

/* A new series of a shared registry (a tree zone): the series another
 * process of the tree made with these values, over its storage, else a
 * new one -- under the tree's lock, so two processes making the same
 * series make one. Registry locked. The handle, or NULL with errno. */
static void *tree_series_new(struct pcpu_family *f, const char *const *v, uint64_t h)
{
	void *at = NULL, *handle;

	if (pcpu__zone_tree_lock(f->reg->zone) != 0)
		return NULL;
	if (f->reg->adopt && f->reg->adopt(f->reg->hook_ctx, f, v, &at) != 0)
		handle = NULL; /* the tree's directory cannot take it: errno, message */
	else if (!at)
		handle = storage_alloc(f);
	else if (f->type == PCPU_METRIC_HISTOGRAM)
		handle = pcpu__family_histogram(f, at);
	else
		handle = at; /* a counter's or a gauge's handle is its value */
	if (handle && !pcpu__series_new(f, v, h, handle, NULL)) {
		int err = errno;

		pcpu__storage_free(f, handle); /* the zone keeps a tree's storage */
		handle = NULL;
		errno = err;
	}
	pcpu__zone_tree_unlock(f->reg->zone);
	return handle;
}

/* The series of f with label values v, created if absent. `info`: the
 * caller is pcpu_registry_info(), the only maker of an info family's
 * series (each is 1; a series made as a plain gauge would be 0). */
void *pcpu__series_get(pcpu_family_t *f, const char *const *v, enum pcpu_metric_type type,
			int info)
{
	const char *buf[PCPU_STATS_LABELS_MAX];
	struct pcpu__series *se;
	void *handle = NULL;
	uint64_t h;

	if (!f) {
		pcpu__reg_fail(EINVAL, "family is NULL");
		return NULL;
	}
	if ((f->flags & PCPU_SNAPSHOT_INFO) && !info) {
		pcpu__reg_fail(EINVAL, "an info family's series are made by pcpu_registry_info()");
		pcpu__msg_prefix("family", f->name);
		return NULL;
	}
	if (f->gfam) {
		pcpu__reg_fail(EINVAL, "a member of a consistent group family: use pcpu_group_family_series()");
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
	if (pcpu__values_check(f, v, buf, &v) < 0)
		return NULL;
	h = pcpu__series_hash(v, f->nlabels);
	pthread_mutex_lock(&f->reg->lock);
	pcpu__registry_tree_sync_locked(f->reg);
	se = pcpu__series_find(f, v, h);
	if (se)
		handle = se->handle;
	else if (pcpu__zone_is_tree(f->reg->zone))
		handle = tree_series_new(f, v, h);
	else if ((handle = storage_alloc(f)) && !pcpu__series_new(f, v, h, handle, NULL)) {
		int err = errno;

		pcpu__storage_free(f, handle);
		handle = NULL;
		errno = err;
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
		pcpu__reg_fail(EINVAL, "a member of a consistent group family has no callback series");
		return -1;
	}
	if (pcpu__reg_tree_refuses(f->reg, "has no callback series: each process would compute "
					   "its own value of one series"))
		return -1;
	if (pcpu__values_check(f, v, buf, &v) < 0)
		return -1;
	h = pcpu__series_hash(v, f->nlabels);
	pthread_mutex_lock(&f->reg->lock);
	if (pcpu__series_find(f, v, h)) {
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
		se = pcpu__series_new(f, v, h, handle, NULL);
		if (!se) {
			pcpu__storage_free(f, handle);
			r = -1;
		} else {
			se->cb = cb;
			cb->se = se;
			pcpu__callback_link_locked(f->reg, cb);
		}
	}
	pthread_mutex_unlock(&f->reg->lock);
	return r;
}

pcpu_counter_t pcpu_family_counter(pcpu_family_t *fam, const char *const *label_values)
{
	return (pcpu_counter_t)pcpu__series_get(fam, label_values, PCPU_METRIC_COUNTER, 0);
}

pcpu_gauge_t pcpu_family_gauge(pcpu_family_t *fam, const char *const *label_values)
{
	return (pcpu_gauge_t)pcpu__series_get(fam, label_values, PCPU_METRIC_GAUGE, 0);
}

pcpu_histogram_t *pcpu_family_histogram(pcpu_family_t *fam, const char *const *label_values)
{
	return (pcpu_histogram_t *)pcpu__series_get(fam, label_values, PCPU_METRIC_HISTOGRAM, 0);
}

void *pcpu_family_lookup(pcpu_family_t *f, const char *const *v)
{
	const char *buf[PCPU_STATS_LABELS_MAX];
	struct pcpu__series *se;
	void *handle = NULL;

	if (!f || pcpu__values_check(f, v, buf, &v) < 0) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&f->reg->lock);
	pcpu__registry_tree_sync_locked(f->reg);
	se = pcpu__series_find(f, v, pcpu__series_hash(v, f->nlabels));
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

	if (!f || pcpu__values_check(f, v, buf, &v) < 0)
		return pcpu__reg_fail(EINVAL, NULL);
	if (pcpu__reg_tree_refuses(f->reg, "never removes a series: another process may hold it"))
		return -1;
	pthread_mutex_lock(&f->reg->lock);
	se = pcpu__series_find(f, v, pcpu__series_hash(v, f->nlabels));
	if (se && se->cb) {
		/* Its callback may be running: wait, then look again. */
		if (pcpu__collect_wait_locked(f->reg) < 0) {
			pthread_mutex_unlock(&f->reg->lock);
			return -1;
		}
		se = pcpu__series_find(f, v, pcpu__series_hash(v, f->nlabels));
	}
	if (!se) {
		r = pcpu__reg_fail(ENOENT, "no series with these label values");
	} else if (f->gfam) {
		r = pcpu__reg_fail(EBUSY, "the series is a group's: remove it with pcpu_group_family_remove()");
	} else if (se->owner) {
		r = pcpu__reg_fail(EBUSY, "the series is a field of a registered struct");
	} else {
		void *handle = se->handle;

		pcpu__series_unlink(f, se); /* before the storage goes: see registry.h */
		pcpu__storage_free(f, handle);
	}
	pthread_mutex_unlock(&f->reg->lock);
	return r;
}

const char *pcpu_family_name(const pcpu_family_t *fam)
{
	return fam ? fam->name : NULL;
}

const char *const *pcpu_family_label_names(const pcpu_family_t *fam, unsigned *n)
{
	/* label_names holds the caller's names, then the constant labels'. */
	unsigned k = fam ? fam->nlabels - fam->nconst : 0;

	if (n)
		*n = k;
	return k ? (const char *const *)fam->label_names : NULL;
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
