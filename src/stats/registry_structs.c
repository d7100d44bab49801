/* SPDX-License-Identifier: MIT */
/*
 * Statistics structs (pcpu_registry_struct()): a caller's struct of
 * counters and gauges, allocated in the registry's zone, whose every field
 * is a series of its own family. The caller updates the fields in place;
 * the registry reads them as series.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* ---- statistics structs ---- */

static size_t field_size(enum pcpu_metric_type t)
{
	return t == PCPU_METRIC_COUNTER ? sizeof(struct pcpu_counter) : sizeof(struct pcpu_gauge);
}

static int fields_check(size_t size, const struct pcpu_stats_field *fields, size_t n)
{
	size_t k, j;

	if (!fields || n == 0 || n > 4096)
		return pcpu__reg_fail(EINVAL, "struct: needs 1 to 4096 fields");
	if (size > PCPU_ZONE_MAX_OBJECT)
		return pcpu__reg_fail(E2BIG, "struct: larger than one zone object");
	for (k = 0; k < n; k++) {
		const struct pcpu_stats_field *f = &fields[k];

		if (f->type != PCPU_METRIC_COUNTER && f->type != PCPU_METRIC_GAUGE)
			return pcpu__reg_fail(EINVAL, "struct: a field must be a counter or a gauge");
		if (f->offset % 8 || f->offset > size || size - f->offset < field_size(f->type))
			return pcpu__reg_fail(EINVAL, "struct: a field is misaligned or outside the struct");
		for (j = 0; j < k; j++) {
			const struct pcpu_stats_field *g = &fields[j];

			if (f->offset < g->offset + field_size(g->type) &&
			    g->offset < f->offset + field_size(f->type))
				return pcpu__reg_fail(EINVAL, "struct: two fields overlap");
			if (f->name && g->name && strcmp(f->name, g->name) == 0)
				return pcpu__reg_fail(EINVAL, "struct: two fields have the same name");
		}
	}
	return 0;
}

/* The description of field f's family (d's labels already set). */
static void field_desc(struct pcpu_family_desc *d, const struct pcpu_stats_field *f)
{
	d->name = f->name;
	d->help = f->help;
	d->unit = f->unit;
	d->type = f->type;
	d->scale_exp10 = f->scale_exp10;
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
		pcpu__reg_fail(EINVAL, "registry is NULL");
		return NULL;
	}
	if (pcpu__reg_tree_refuses(reg, "has no registered structs yet: use its families"))
		return NULL;
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
		field_desc(&d, &fields[k]);
		if (pcpu__desc_check(&d, base[k]) < 0) {
			err = errno;
			goto fail_nolock;
		}
	}
	pthread_mutex_lock(&reg->lock);
	for (k = 0; k < nfields; k++) {
		field_desc(&d, &fields[k]);
		ss->fams[k] = pcpu__family_get_locked(reg, &d, base[k], &created[k], NULL, 0, &pcpu__no_extra);
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
	if (pcpu__values_check(ss->fams[0], label_values, full, &label_values) < 0) {
		err = errno;
		goto fail_locked;
	}
	h = pcpu__series_hash(label_values, ss->fams[0]->nlabels);
	for (k = 0; k < nfields; k++) {
		if (pcpu__series_find(ss->fams[k], label_values, h)) {
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
		ss->series[made] = pcpu__series_new(ss->fams[made], label_values, h,
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
		pcpu__series_unlink(ss->fams[made], ss->series[made]);
	}
	if (ss->obj)
		pcpu_zone_free(reg->zone, ss->obj);
	for (k = nfields; k > 0; k--)
		if (created[k - 1] && ss->fams[k - 1] && ss->fams[k - 1]->nseries == 0)
			pcpu__family_destroy_locked(reg, ss->fams[k - 1]);
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
		return pcpu__reg_fail(EINVAL, "NULL registry or struct");
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
			pcpu__series_unlink(ss->fams[k], ss->series[k]);
		pcpu_zone_free(reg->zone, ss->obj);
		pcpu__reg_bump(reg);
	}
	pthread_mutex_unlock(&reg->lock);
	if (!ss)
		return pcpu__reg_fail(EINVAL, "not a struct registered in this registry");
	free(ss->fams);
	free(ss->series);
	free(ss);
	return 0;
}

