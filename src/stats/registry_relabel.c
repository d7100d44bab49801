/* SPDX-License-Identifier: MIT */
/*
 * A shared registry's series given other label values in place
 * (pcpu_family_relabel(), pcpu_families_relabel(): pcpu/stats.h), the
 * registry's half: the values checked, this process's series renamed and
 * zeroed, and the segment asked to rewrite their directory entries
 * (registry_observer.h's relabel ops; tree_relabel.c the segment's half).
 *
 * Why many families at once: a server that keeps several families per key
 * (the PostgreSQL extension keeps 39 series per statement) relabels them
 * together when a new key takes an expired key's series. One by one, each
 * took the registry's mutex and the tree's lock, looked for other
 * processes' relabellings and wrote a record into the tree's relabel log;
 * together, that is done once, nothing moves unless everything can (no
 * half-relabelled key left when the string table fills), and the log takes
 * a record per run of adjacent entries, so that the other processes follow
 * the relabelling entry by entry instead of indexing the whole directory
 * anew when its ring would have overflowed (tree_relog.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/fraction.h>

#include "registry.h"

/* Every value of the series with handle h of f, from zero, word by word
 * by offset (the adders' words are never stored into). */
static void series_zero(const struct pcpu_family *f, void *h)
{
	switch (f->type) {
	case PCPU_METRIC_COUNTER:
	case PCPU_METRIC_GAUGE: {
		/* With fractions, the words beside the whole units'. */
		size_t i, n = f->flags & PCPU_SNAPSHOT_NANOS ? PCPU_FRACTION_WORDS : 1;

		for (i = 0; i < n; i++)
			pcpu_counter_zero((pcpu_counter_t)h + i);
		break;
	}
	case PCPU_METRIC_HISTOGRAM:
		(void)pcpu_histogram_zero((pcpu_histogram_t *)h);
		break;
	}
}

/* The series of a shared registry's f with values v (the whole key),
 * adopted from the tree if this process has none; NULL: the tree has none
 * (errno ENOENT) or it cannot be used here. Registry and tree locked. */
static struct pcpu__series *tree_series_existing(struct pcpu_family *f, const char *const *v,
						 uint64_t h)
{
	struct pcpu__series *se = pcpu__series_find(f, v, h);
	void *at = NULL, *handle;

	if (se)
		return se;
	if (f->reg->adopt(f->reg->hook_ctx, f, v, &at) != 0 && at == NULL &&
	    errno != ENOSPC && errno != E2BIG)
		return NULL; /* the tree's entry cannot be used here: its message */
	if (!at) {
		pcpu__reg_fail(ENOENT, "no series with these label values");
		return NULL;
	}
	handle = f->type == PCPU_METRIC_HISTOGRAM
			 ? (void *)pcpu__family_histogram(f, at)
			 : at;
	if (!handle)
		return NULL;
	se = pcpu__series_new(f, v, h, handle, NULL);
	if (!se) {
		int err = errno;

		pcpu__storage_free(f, handle);
		errno = err;
	}
	return se;
}

/* One family's part of a relabelling: its keys, old and new (the whole
 * keys, constant labels included), their hashes, the series, and the new
 * values' copy the series takes. */
struct relabel_part {
	struct pcpu_family *f;
	const char *obuf[PCPU_STATS_LABELS_MAX], *nbuf[PCPU_STATS_LABELS_MAX];
	const char *const *ov, *const *nv;
	uint64_t oh, nh;
	struct pcpu__series *se;
	char **values;
};

/* Gives se the values nv (the whole key, a pcpu__values_copy()) and hash h in
 * f's table; its place in the creation order stays. Cannot fail: the slot
 * it leaves is the one it takes, so the table never grows. */
static void series_rename(struct pcpu_family *f, struct pcpu__series *se, char **nv, uint64_t h)
{
	struct pcpu__hslot *s = pcpu__htab_find_key(&f->series, se->hash, (uintptr_t)se);

	if (s)
		pcpu__htab_remove(&f->series, s);
	free(se->values);
	se->values = nv;
	se->hash = h;
	(void)pcpu__htab_add(&f->series, h, (uintptr_t)se, 0);
}

/* Part p can be relabelled: 0, or -1 with errno and the message. Registry
 * and tree locked, the relabelling BEGUN. */
static int part_check(struct relabel_part *p)
{
	struct pcpu_family *f = p->f;

	if (pcpu__series_find(f, p->nv, p->nh))
		return pcpu__reg_fail(EEXIST, "a series with the new label values exists");
	p->se = tree_series_existing(f, p->ov, p->oh);
	if (!p->se)
		return -1; /* ENOENT, or the tree's series unusable here: errno set */
	if (p->se->owner)
		return pcpu__reg_fail(ENOTSUP, "the series is a field of a registered struct");
	if (pcpu__labelset_series_clash(f, p->nv) < 0 ||
	    f->reg->relabel(f->reg->hook_ctx, PCPU__RELABEL_CHECK, f, p->se, p->nv, NULL) != 0)
		return -1;
	p->values = pcpu__values_copy(p->nv, f->nlabels);
	if (!p->values)
		return pcpu__reg_fail(ENOMEM, "out of memory for the new label values");
	return 0;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;

	return x < y ? -1 : x > y;
}

/* Whether a family is named twice among the n (sorted copies: O(n log n)):
 * 1, 0, or -1 when memory is short. */
static int named_twice(pcpu_family_t *const *fams, size_t n)
{
	pcpu_family_t **sorted;
	size_t i;
	int r = 0;

	if (n < 2)
		return 0;
	sorted = malloc(n * sizeof *sorted);
	if (!sorted)
		return -1;
	memcpy(sorted, fams, n * sizeof *sorted);
	qsort(sorted, n, sizeof *sorted, cmp_ptr);
	for (i = 1; i < n && !r; i++)
		r = sorted[i] == sorted[i - 1];
	free(sorted);
	return r;
}

/* The parts checked (every family of a shared registry, each once, its
 * keys valid): 0, or -1 with errno and the message. */
static int parts_make(struct relabel_part *parts, pcpu_family_t *const *fams, size_t n,
		      const char *const *old_values, const char *const *new_values)
{
	size_t i;
	int twice = named_twice(fams, n);

	if (twice)
		return twice < 0 ? pcpu__reg_fail(ENOMEM, "out of memory")
				 : pcpu__reg_fail(EINVAL, "a family is named twice");
	for (i = 0; i < n; i++) {
		struct relabel_part *p = &parts[i];
		struct pcpu_family *f = fams[i];

		if (!f)
			return pcpu__reg_fail(EINVAL, "family is NULL");
		if (f->reg != fams[0]->reg)
			return pcpu__reg_fail(EINVAL, "the families are not of one registry");
		p->f = f;
		if (pcpu__values_check(f, old_values, p->obuf, &p->ov) < 0 ||
		    pcpu__values_check(f, new_values, p->nbuf, &p->nv) < 0)
			return -1; /* EINVAL, its message */
		if (!pcpu__zone_is_tree(f->reg->zone))
			return pcpu__reg_fail(ENOTSUP, "only a shared registry's series are relabelled "
						       "(a private registry removes and makes series)");
		if (f->gfam) {
			pcpu__reg_fail(ENOTSUP, "a consistent group family's series are not relabelled");
			pcpu__msg_prefix("family", f->name);
			return -1;
		}
		p->oh = pcpu__series_hash(p->ov, f->nlabels);
		p->nh = pcpu__series_hash(p->nv, f->nlabels);
	}
	return 0;
}

/* The relabelling itself, registry locked: every part checked (under the
 * tree's lock, with other processes' relabellings followed first), then
 * every series renamed and zeroed and its entry rewritten. */
static int parts_relabel(pcpu_registry_t *reg, struct relabel_part *parts, size_t n)
{
	size_t i;
	int r = 0;

	pcpu__registry_tree_sync_locked(reg);
	if (!reg->relabel)
		return pcpu__reg_fail(ENOTSUP, "the shared registry is not published");
	if (pcpu__zone_tree_lock(reg->zone) != 0)
		return -1;
	(void)reg->relabel(reg->hook_ctx, PCPU__RELABEL_BEGIN, NULL, NULL, NULL, NULL);
	for (i = 0; i < n && r == 0; i++) {
		r = part_check(&parts[i]);
		/* Which family, unless the segment's message says already. */
		if (r < 0 && n > 1 && strncmp(pcpu_stats_error(), "family \"", 8) != 0)
			pcpu__msg_prefix("family", parts[i].f->name);
	}
	if (r == 0) {
		for (i = 0; i < n; i++) {
			struct relabel_part *p = &parts[i];

			/* Zeroed before the entry names the new values (its
			 * seq store releases the zeroes): a reader sees the
			 * old values under the old labels, or zeroes, never
			 * the old values under the new labels. An info series'
			 * value is 1 under any labels: kept (readers show 1
			 * anyway; a handle from pcpu_family_lookup() reads
			 * it). */
			series_rename(p->f, p->se, p->values, p->nh);
			p->values = NULL;
			if (!(p->f->flags & PCPU_SNAPSHOT_INFO))
				series_zero(p->f, p->se->handle);
			(void)reg->relabel(reg->hook_ctx, PCPU__RELABEL_COMMIT, p->f, p->se, p->nv, NULL);
		}
		(void)reg->relabel(reg->hook_ctx, PCPU__RELABEL_END, NULL, NULL, NULL, NULL);
		pcpu__reg_bump(reg);
	}
	pcpu__zone_tree_unlock(reg->zone);
	return r;
}

int pcpu_families_relabel(pcpu_family_t *const *fams, size_t n, const char *const *old_values,
			  const char *const *new_values)
{
	struct relabel_part *parts;
	pcpu_registry_t *reg;
	size_t i;
	int r;

	if (!fams || n == 0)
		return pcpu__reg_fail(EINVAL, "no families");
	if (!fams[0])
		return pcpu__reg_fail(EINVAL, "family is NULL");
	if (n > SIZE_MAX / sizeof *parts)
		return pcpu__reg_fail(ENOMEM, "out of memory");
	parts = calloc(n, sizeof *parts);
	if (!parts)
		return pcpu__reg_fail(ENOMEM, "out of memory");
	reg = fams[0]->reg;
	r = parts_make(parts, fams, n, old_values, new_values);
	if (r == 0) {
		pthread_mutex_lock(&reg->lock);
		r = parts_relabel(reg, parts, n);
		pthread_mutex_unlock(&reg->lock);
	}
	for (i = 0; i < n; i++)
		free(parts[i].values); /* refused: not taken by a series */
	free(parts);
	return r;
}

int pcpu_family_relabel(pcpu_family_t *f, const char *const *old_values,
			const char *const *new_values)
{
	return pcpu_families_relabel(&f, 1, old_values, new_values);
}
