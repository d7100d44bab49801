/* SPDX-License-Identifier: MIT */
/*
 * Registry snapshots: the registry's directory and values copied into the
 * plain-data tree of pcpu/expose.h, which the writers format.
 *
 * Why copy: the writers must not run under the registry's mutex (formatting
 * 10^5 series takes milliseconds; registration should not wait that long),
 * and a series removed after the mutex is released must not leave the
 * snapshot pointing at freed strings. So under the mutex we copy the
 * metadata and read every value, into one arena (a list of large blocks, no
 * per-string malloc); after it, we sort the families by name. Series come
 * in creation order (the registry keeps them in a list): deterministic for
 * golden files and diffs between scrapes, and linear -- sorting 10^5 label
 * sets by value took longer than copying and formatting them together.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/fraction.h>

#include "registry.h"
#include "validate.h"

struct snapshot_impl {
	struct pcpu_snapshot pub; /* first: the public pointer is this one */
	struct pcpu__arena arena;
};

static void *arena_alloc(struct snapshot_impl *s, size_t n)
{
	return pcpu__arena_alloc(&s->arena, n);
}

static const char *arena_str(struct snapshot_impl *s, const char *str)
{
	size_t n;
	char *p;

	if (!str)
		return NULL;
	n = strlen(str) + 1;
	p = arena_alloc(s, n);
	if (p)
		memcpy(p, str, n);
	return p;
}

/* Reads a series' value into a snapshot series; counts has nbuckets
 * entries for histograms. Called with the registry lock held. */
static void pcpu__series_read(const struct pcpu_family *f, const struct pcpu__series *se,
		       struct pcpu_snapshot_series *out, uint64_t *counts)
{
	if (f->gfam) {
		/* The group's read of this snapshot (pcpu__groups_read_locked). */
		int64_t v = ((const struct pcpu__gseries *)se->handle)->vals[f->gmember];

		if (f->type == PCPU_METRIC_COUNTER)
			out->value.counter = (uint64_t)v;
		else
			out->value.gauge = v;
		return;
	}
	if ((f->flags & PCPU_SNAPSHOT_NANOS) && f->type != PCPU_METRIC_HISTOGRAM) {
		/* The three words in one walk of the slots: the residue's
		 * bits are slot 0's mirror word, every other copy 0
		 * (pcpu/fraction.h). */
		uint64_t w[PCPU_FRACTION_WORDS];

		(void)pcpu_counter_fetch_array((pcpu_counter_t)se->handle, PCPU_FRACTION_WORDS, w);
		out->value.fixed.whole = w[0];
		out->value.fixed.nanos = (int64_t)w[1];
		memcpy(&out->value.fixed.residue, &w[2], sizeof(double));
		return;
	}
	switch (f->type) {
	case PCPU_METRIC_COUNTER:
		out->value.counter = pcpu_counter_fetch((pcpu_counter_t)se->handle);
		break;
	case PCPU_METRIC_GAUGE:
		/* An info series is 1 (pcpu_registry_info() set it so): the
		 * OpenMetrics writer relies on it, so a handle changed through
		 * pcpu_family_lookup() cannot spoil the exposition. */
		out->value.gauge = f->flags & PCPU_SNAPSHOT_INFO
					   ? 1
					   : pcpu_gauge_read((pcpu_gauge_t)se->handle);
		break;
	case PCPU_METRIC_HISTOGRAM: {
		int64_t sum = 0;

		pcpu_histogram_read((const pcpu_histogram_t *)se->handle, counts, f->nbuckets,
				    NULL, &sum);
		out->value.histogram.counts = counts;
		out->value.histogram.sum = sum;
		out->value.histogram.residue =
			pcpu__histogram_read_residue((const pcpu_histogram_t *)se->handle);
		break;
	}
	}
}

static int copy_family(struct snapshot_impl *s, const struct pcpu_family *f,
		       struct pcpu_snapshot_family *out)
{
	struct pcpu_snapshot_series *series;
	const char **names = NULL;
	size_t j = 0;
	unsigned l;

	out->name = arena_str(s, f->name);
	out->help = arena_str(s, f->help);
	out->unit = arena_str(s, f->unit);
	out->type = f->type;
	out->scale_exp10 = f->scale_exp10;
	/* Checked at registration, piece by piece (pcpu_registry_write()
	 * skips the check for that reason): marked, so that a merge or a
	 * write of this snapshot does not check every name and label again. */
	out->flags = f->flags | PCPU_SNAPSHOT_CHECKED;
	out->nlabels = f->nlabels;
	if (f->nlabels) {
		names = arena_alloc(s, f->nlabels * sizeof *names);
		if (!names)
			return -1;
		for (l = 0; l < f->nlabels; l++)
			names[l] = arena_str(s, f->label_names[l]);
	}
	out->label_names = names;
	out->nbuckets = f->nbuckets;
	if (pcpu__type_info(f->type)->value == PCPU_VALUE_BUCKETS) {
		int64_t *ub = arena_alloc(s, (f->nbuckets ? f->nbuckets : 1) * sizeof *ub);
		if (!ub)
			return -1;
		if (f->nbuckets > 1)
			memcpy(ub, f->bucket_upper, (f->nbuckets - 1) * sizeof *ub);
		out->bucket_upper = ub;
		out->native_schema = f->native_schema;
		out->native_index = f->native_index;
		if (f->export_buckets) {
			uint32_t *ex = arena_alloc(s, (f->nexport ? f->nexport : 1) * sizeof *ex);
			if (!ex)
				return -1;
			memcpy(ex, f->export_buckets, f->nexport * sizeof *ex);
			out->export_buckets = ex;
			out->nexport = f->nexport;
		}
	}
	series = f->nseries ? arena_alloc(s, f->nseries * sizeof *series) : NULL;
	if (f->nseries && !series)
		return -1;
	{
		const struct pcpu__series *se;

		for (se = f->lfirst; se; se = se->lnext) {
			uint64_t *counts = NULL;
			const char **vals = NULL;

			if (se->cb && se->cb->failed)
				continue; /* its callback failed: left out (pcpu_callback_fn) */
			if (f->gfam && !((const struct pcpu__gseries *)se->handle)->ok)
				continue; /* no consistent read in time: every member leaves it out */
			if (f->nlabels) {
				vals = arena_alloc(s, f->nlabels * sizeof *vals);
				if (!vals)
					return -1;
				for (l = 0; l < f->nlabels; l++)
					vals[l] = arena_str(s, se->values[l]);
			}
			if (pcpu__type_info(f->type)->value == PCPU_VALUE_BUCKETS) {
				counts = arena_alloc(s, f->nbuckets * sizeof *counts);
				if (!counts)
					return -1;
			}
			series[j].label_values = vals;
			pcpu__series_read(f, se, &series[j], counts);
			j++;
		}
	}
	out->series = series;
	out->nseries = j;
	return s->arena.failed ? -1 : 0;
}

/* By name, a name's label sets by their label names: the order a segment
 * reader and a merge give too (validate.h). */
static int cmp_family(const void *a, const void *b)
{
	const struct pcpu_snapshot_family *x = a, *y = b;

	return pcpu__cmp_family_order(x->name, x->nlabels, x->label_names, y->name, y->nlabels,
				      y->label_names);
}

void pcpu_snapshot_free(struct pcpu_snapshot *pub)
{
	struct snapshot_impl *s = (struct snapshot_impl *)pub;

	if (!s)
		return;
	pcpu__arena_free(&s->arena);
	free(s);
}

struct pcpu_snapshot *pcpu_registry_snapshot(pcpu_registry_t *reg)
{
	struct snapshot_impl *s;
	struct pcpu_snapshot_family *fams = NULL;
	size_t i;

	if (!reg) {
		errno = EINVAL;
		return NULL;
	}
	/* Callbacks first, without the registry's lock (see pcpu_callback_fn). */
	if (pcpu__registry_collect(reg) < 0)
		return NULL;
	s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	pthread_mutex_lock(&reg->lock);
	pcpu__groups_read_locked(reg);
	if (reg->nfams) {
		fams = arena_alloc(s, reg->nfams * sizeof *fams);
		if (fams) {
			memset(fams, 0, reg->nfams * sizeof *fams);
			for (i = 0; i < reg->nfams; i++)
				if (copy_family(s, reg->fams[i], &fams[i]) < 0)
					break;
		}
	}
	s->pub.nfamilies = reg->nfams;
	pthread_mutex_unlock(&reg->lock);
	if (s->arena.failed) {
		pcpu_snapshot_free(&s->pub);
		errno = ENOMEM;
		return NULL;
	}
	qsort(fams, s->pub.nfamilies, sizeof *fams, cmp_family);
	s->pub.families = fams;
	return &s->pub;
}

int pcpu_registry_write(pcpu_registry_t *reg, enum pcpu_format fmt, char **out, size_t *len)
{
	struct pcpu_snapshot *s;
	int r, e;

	if (!reg || !out || !len || !pcpu_format_content_type(fmt)) {
		pcpu__set_error("pcpu_registry_write: NULL argument or unknown format");
		errno = EINVAL;
		return -1;
	}
	s = pcpu_registry_snapshot(reg);
	if (!s)
		return -1;
	/* Every name, label, text and layout in it was validated when it was
	 * registered, and the registry keeps families and series unique. */
	r = pcpu__snapshot_write(s, fmt, out, len, 0);
	e = errno;
	pcpu_snapshot_free(s);
	errno = e;
	return r;
}
