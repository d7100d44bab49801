/* SPDX-License-Identifier: MIT */
/*
 * Consistent group families (pcpu_registry_group()): member families of
 * counters or gauges whose series, one per label set, share one
 * pcpu_group_t (group.c), so a snapshot shows one consistent read of the
 * group in every member.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* ---- consistent group families ---- */

pcpu_group_family_t *pcpu_registry_group(pcpu_registry_t *reg, const struct pcpu_family_desc *members,
					 unsigned nmembers)
{
	char (*base)[PCPU_STATS_NAME_MAX + 1] = NULL;
	struct pcpu__gfamily *gf;
	unsigned k, l, made = 0;
	int created, err = 0;

	if (!reg || !members || nmembers == 0 || nmembers > PCPU_GROUP_MAX_MEMBERS) {
		pcpu__reg_fail(EINVAL, "group family: NULL registry or members, or not 1 to 16 members");
		return NULL;
	}
	for (k = 0; k < nmembers; k++) {
		const struct pcpu_family_desc *d = &members[k];

		if (d->type != PCPU_METRIC_COUNTER && d->type != PCPU_METRIC_GAUGE) {
			pcpu__reg_fail(EINVAL, "group family: members are counters or gauges");
			return NULL;
		}
		/* One label set per group: every member has the same labels. */
		if (d->nlabels != members[0].nlabels) {
			pcpu__reg_fail(EINVAL, "group family: every member has the same label names");
			return NULL;
		}
		for (l = 0; l < d->nlabels; l++)
			if (!d->label_names || !members[0].label_names || !d->label_names[l] ||
			    !members[0].label_names[l] ||
			    strcmp(d->label_names[l], members[0].label_names[l]) != 0) {
				pcpu__reg_fail(EINVAL, "group family: every member has the same label names");
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
		if (pcpu__desc_check(&members[k], base[k]) < 0) {
			free(base);
			free(gf);
			return NULL;
		}
	gf->nmembers = nmembers;
	/* Its series allocate groups under the registry's lock: the fork
	 * handlers' lock before it, never inside (metrics.h). */
	pcpu__group_fork_register();
	pthread_mutex_lock(&reg->lock);
	for (made = 0; made < nmembers; made++) {
		gf->fams[made] = pcpu__family_get_locked(reg, &members[made], base[made], &created, gf, made,
						   &pcpu__no_extra);
		if (!gf->fams[made]) {
			err = errno;
			break;
		}
	}
	if (made < nmembers) {
		/* All or nothing; the families are new (created with gf). */
		while (made > 0)
			pcpu__family_destroy_locked(reg, gf->fams[--made]);
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
	int tree_locked = 0;
	void *at = NULL;
	uint64_t h;

	if (!gf) {
		pcpu__reg_fail(EINVAL, "group family is NULL");
		return NULL;
	}
	if (pcpu__values_check(gf->fams[0], label_values, buf, &v) < 0)
		return NULL;
	reg = gf->fams[0]->reg;
	h = pcpu__series_hash(v, gf->fams[0]->nlabels);
	pthread_mutex_lock(&reg->lock);
	se = pcpu__series_find(gf->fams[0], v, h);
	if (se) {
		g = ((struct pcpu__gseries *)se->handle)->g;
		goto out;
	}
	/* A shared registry's: the group another process of the tree made
	 * with these values, over its lanes, else a new one -- all members
	 * under the tree's lock, so that two processes make one group. */
	if (pcpu__zone_is_tree(reg->zone)) {
		if (pcpu__zone_tree_lock(reg->zone) != 0) {
			pthread_mutex_unlock(&reg->lock);
			return NULL;
		}
		tree_locked = 1;
		if (reg->adopt && reg->adopt(reg->hook_ctx, gf->fams[0], v, &at) != 0)
			goto out; /* the tree's directory cannot take it: errno, message */
	}
	gs = calloc(1, sizeof *gs);
	if (!gs) {
		errno = ENOMEM;
		goto fail;
	}
	if (!(gs->g = pcpu__group_create_at(reg->zone, gf->nmembers, at))) {
		pcpu__storage_failed(gf->fams[0]);
		goto fail;
	}
	for (made = 0; made < gf->nmembers; made++)
		if (!pcpu__series_new(gf->fams[made], v, h, gs, NULL))
			break;
	if (made < gf->nmembers) {
		int err = errno;

		for (k = 0; k < made; k++)
			pcpu__series_unlink(gf->fams[k], pcpu__series_find(gf->fams[k], v, h));
		errno = err;
		goto fail;
	}
	g = gs->g;
	goto out;
fail:
	if (gs && gs->g) {
		int err = errno;

		pcpu__group_free_in(reg->zone, gs->g);
		errno = err;
	}
	free(gs);
out:
	if (tree_locked)
		pcpu__zone_tree_unlock(reg->zone);
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
		return pcpu__reg_fail(EINVAL, "group family is NULL");
	if (pcpu__values_check(gf->fams[0], label_values, buf, &v) < 0)
		return -1;
	reg = gf->fams[0]->reg;
	if (pcpu__reg_tree_refuses(reg, "never removes a series: another process may hold it"))
		return -1;
	h = pcpu__series_hash(v, gf->fams[0]->nlabels);
	pthread_mutex_lock(&reg->lock);
	se = pcpu__series_find(gf->fams[0], v, h);
	if (!se) {
		pthread_mutex_unlock(&reg->lock);
		return pcpu__reg_fail(ENOENT, "no group with these label values");
	}
	gs = se->handle;
	for (k = 0; k < gf->nmembers; k++)
		pcpu__series_unlink(gf->fams[k], pcpu__series_find(gf->fams[k], v, h));
	pcpu__storage_free(gf->fams[0], gs);
	pthread_mutex_unlock(&reg->lock);
	return 0;
}

void pcpu__groups_read_locked(struct pcpu_registry *reg)
{
	const struct pcpu__gfamily *gf;
	const struct pcpu__series *se;

	/* A shared registry's series another process relabelled: dropped
	 * here before this collection lists them under their old labels. */
	pcpu__registry_tree_sync_locked(reg);
	/* Every collection, groups or not: an observer's own per-collection
	 * work (a segment's flows tables flushed into its file). */
	pcpu__reg_notify(reg, PCPU__REG_COLLECTING, NULL, NULL);
	/* One consistent read per group, which every member's series then
	 * shows: reading per member family would mix two reads. */
	for (gf = reg->gfams; gf; gf = gf->next)
		for (se = gf->fams[0]->lfirst; se; se = se->lnext) {
			struct pcpu__gseries *gs = se->handle;

			gs->ok = pcpu_group_read(gs->g, 0, gs->vals) == 0;
		}
	/* The segment's copies; a shared registry's refreshes every group of
	 * the tree, this process's or not. */
	if (reg->gfams || pcpu__zone_is_tree(reg->zone))
		pcpu__reg_notify(reg, PCPU__REG_GROUPS_READ, NULL, NULL);
}

size_t pcpu__registry_tree_group_size(const pcpu_registry_t *reg, unsigned members)
{
	return pcpu__group_tree_size(reg->zone, members);
}

int pcpu__registry_tree_group_read(pcpu_registry_t *reg, unsigned members, void *at, int64_t *out)
{
	return pcpu__group_tree_read(reg->zone, members, at, out);
}
