/* SPDX-License-Identifier: MIT */
/*
 * The registry's observer interface (registry_observer.h): the walks and
 * views a mirror of the directory (the statistics segment) reads, so that
 * it never reaches into the registry's private structures.
 */
#include "registry.h"

void pcpu__registry_lock(pcpu_registry_t *reg)
{
	pthread_mutex_lock(&reg->lock);
}

void pcpu__registry_unlock(pcpu_registry_t *reg)
{
	pthread_mutex_unlock(&reg->lock);
}

int pcpu__registry_observed_locked(const pcpu_registry_t *reg)
{
	return reg->hook != NULL;
}

void pcpu__registry_observe_locked(pcpu_registry_t *reg, pcpu__registry_hook_fn fn,
				   pcpu__registry_adopt_fn adopt, void *ctx)
{
	reg->hook_ctx = ctx;
	reg->hook = fn;
	reg->adopt = fn ? adopt : NULL;
	if (!reg->adopt)
		reg->relabel = NULL;
}

void pcpu__registry_relabel_locked(pcpu_registry_t *reg, pcpu__registry_relabel_fn fn)
{
	reg->relabel = fn;
}

struct pcpu_family *pcpu__registry_family_next(const pcpu_registry_t *reg,
					       const struct pcpu_family *f)
{
	size_t i = f ? f->index + 1 : 0;

	return i < reg->nfams ? reg->fams[i] : NULL;
}

struct pcpu__series *pcpu__family_series_next(const struct pcpu_family *f,
					      const struct pcpu__series *se)
{
	return se ? se->lnext : f->lfirst;
}

void pcpu__registry_groups_each_locked(const pcpu_registry_t *reg,
				       void (*fn)(void *ctx, const struct pcpu__gseries *gs),
				       void *ctx)
{
	const struct pcpu__gfamily *gf;
	const struct pcpu__series *se;

	/* Member 0's series: one per group. */
	for (gf = reg->gfams; gf; gf = gf->next)
		for (se = gf->fams[0]->lfirst; se; se = se->lnext)
			fn(ctx, se->handle);
}

void pcpu__family_view(const struct pcpu_family *f, struct pcpu__family_view *v)
{
	v->name = f->name;
	v->help = f->help;
	v->unit = f->unit;
	v->type = f->type;
	v->scale_exp10 = f->scale_exp10;
	v->flags = f->flags;
	v->nlabels = f->nlabels;
	v->label_names = f->label_names;
	v->layout = &f->layout;
	v->export_lg = pcpu__type_info(f->type)->value == PCPU_VALUE_BUCKETS ? pcpu__histogram_export_lg(&f->layout)
									       : 0;
	v->nbuckets = f->nbuckets;
	v->bucket_upper = f->bucket_upper;
	v->native_schema = f->native_schema;
	v->native_index = f->native_index;
	v->group_members = f->gfam ? f->gfam->nmembers : 0;
	v->group_member = f->gmember;
	v->labelset = f->labelset;
	v->sparse = f->sparse;
	{
		struct pcpu__sname *n = pcpu__sname_find(f->reg, f->name, "");
		const struct pcpu_family *g;

		v->name_first = !n || n->fam == f;
		v->name_sets = 0;
		for (g = n ? n->fam : f; g; g = g->lsnext)
			v->name_sets++;
	}
}

void pcpu__series_view(const struct pcpu_family *f, const struct pcpu__series *se,
		       struct pcpu__series_view *v)
{
	v->values = se->values;
	v->storage = f->gfam ? NULL : se->handle;
	v->group = f->gfam ? se->handle : NULL;
}
