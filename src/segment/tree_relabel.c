/* SPDX-License-Identifier: MIT */
/*
 * A shared tree's series given other label values (pcpu_family_relabel(),
 * pcpu/stats.h): what the registry asks its segment through its relabel
 * callback (registry_observer.h's ops), under the tree's lock.
 *
 * The series' directory entry is rewritten in place (directory.c:
 * pcpu__directory_relabel_room() before, _write() after the registry
 * zeroed the values), and the tree's count of rewritten entries bumped.
 * Every process compares that count with what it last saw: a change makes
 * it index the directory anew (tree_index.c) and drop the series it holds
 * whose entry no longer carries their labels (STALE, registry_series.c),
 * so that a lookup finds what the tree has now. Split from directory.c,
 * which keeps the entry and blob writes.
 *
 * The blob a relabelled entry named before is freed (tree_blobs.c), so
 * that a tree whose series are relabelled for months does not fill its
 * string table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core.h"
#include "segment_internal.h"
#include "writer.h"

/* Whether live series entry e carries label values v (n of them). */
static int entry_carries(struct pcpu_segment *seg, const struct pcpu__seg_entry *e,
			 const char *const *v, unsigned n)
{
	const char *p = seg->strings + e->blob_off, *end = p + e->blob_len;
	unsigned l;

	if (e->nlabels != n)
		return 0;
	for (l = 0; l < n; l++) {
		size_t len = strlen(v[l]) + 1;

		if ((size_t)(end - p) < len || memcmp(p, v[l], len) != 0)
			return 0;
		p += len;
	}
	return p == end;
}

/* CHECK and COMMIT: se's entry, rewritten with values v. */
static int relabel_entry(struct pcpu_segment *seg, enum pcpu__relabel_op op, struct pcpu_family *f,
			 struct pcpu__series *se, const char *const *v)
{
	struct pcpu__family_view fv;
	struct pcpu__seg_entry e, old;
	uint64_t len = 0, after, head;
	int64_t fidx, idx;
	unsigned l;
	int logged;

	pcpu__family_view(f, &fv);
	fidx = pcpu__directory_family_entry(seg, f);
	idx = pcpu__directory_series_entry(seg, se);
	if (idx < 0 || fidx < 0 || (uint64_t)idx >= seg->entries_used ||
	    !pcpu__tree_live_series(seg, (uint64_t)idx, &e))
		return pcpu__error_set(PCPU_ERROR_STATS, ENOENT,
				       "family \"%.64s\": the series has no entry in the shared "
				       "registry's directory", fv.name);
	if (e.kind != PCPU__SEG_SERIES)
		return pcpu__error_set(PCPU_ERROR_STATS, ENOTSUP,
				       "family \"%.64s\": a group member's series is not relabelled",
				       fv.name);
	if (op == PCPU__RELABEL_CHECK) {
		if (pcpu__directory_find_series(seg, (uint64_t)fidx, v, fv.nlabels) >= 0)
			return pcpu__error_set(PCPU_ERROR_STATS, EEXIST,
					       "family \"%.64s\": a series with the new label values "
					       "exists in the shared registry", fv.name);
		for (l = 0; l < fv.nlabels; l++)
			len += strlen(v[l]) + 1;
		return pcpu__directory_relabel_room(seg, len);
	}
	old = e;
	/* Into the log first (tree_relog.c): killed from here on, the
	 * relabelling leaves the log ahead of the count, and every process
	 * indexes anew. */
	logged = pcpu__tree_relog_append(seg, (uint64_t)idx, &head);
	if (pcpu__directory_relabel_write(seg, (uint64_t)idx, &e, v, fv.nlabels) < 0)
		return -1; /* the log names an entry unchanged: followed for nothing */
	after = __atomic_add_fetch(&seg->tree->relabels, 1, __ATOMIC_RELEASE);
	/* This process's own rewrite, the tree's lock held since
	 * pcpu__tree_enter() brought its index up to date: the index follows
	 * in place, and the registry, which renamed its series, has nothing
	 * stale -- so that relabelling n series costs n updates here, not n
	 * rebuilds of the index (O(entries) each). Another process's
	 * relabelling still makes this one index anew, once. */
	if (seg->tree_index_relabels == after - 1 && (!logged || seg->relog_index_seen == head)) {
		pcpu__tree_index_rewritten(seg, (uint64_t)idx, &old, &e);
		seg->tree_index_relabels = after;
		seg->relog_index_seen += (uint64_t)logged;
	}
	if (seg->tree_reg_relabels == after - 1 && (!logged || seg->relog_reg_seen == head)) {
		seg->tree_reg_relabels = after;
		seg->relog_reg_seen += (uint64_t)logged;
	}
	return 0;
}

/* CHANGED, without the tree's lock: whether the registry must walk its
 * series for stale ones. Not if the relabellings since it last did are in
 * the log and none of them names an entry this process's series are on:
 * then its marks move past them here. */
static int changed(struct pcpu_segment *seg)
{
	uint64_t r = __atomic_load_n(&seg->tree->relabels, __ATOMIC_ACQUIRE), h, k, h2;

	if (r == seg->tree_reg_relabels)
		return 0;
	h = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_ACQUIRE);
	if (!pcpu__tree_relog_covers(seg, seg->tree_reg_relabels, seg->relog_reg_seen, r, h))
		return 1;
	for (k = seg->relog_reg_seen; k < h; k++)
		if (pcpu__tree_mapped(seg, pcpu__tree_relog_at(seg, k)))
			return 1;
	/* The ring's slots read were not overwritten meanwhile. */
	h2 = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_ACQUIRE);
	if (h2 - seg->relog_reg_seen > seg->tree->relog_cap)
		return 1;
	seg->tree_reg_relabels = r;
	seg->relog_reg_seen = h;
	seg->tree_reg_skips++;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* LIST, the tree's lock held: seg->stale gets this process's series on
 * the entries the log names since SEEN, each once. 1, or 0 where the log
 * does not hold them all (or names an entry past the directory, or memory
 * is short): the registry then asks about every series. */
static int list_stale(struct pcpu_segment *seg)
{
	uint64_t r = __atomic_load_n(&seg->tree->relabels, __ATOMIC_ACQUIRE);
	uint64_t h = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_ACQUIRE);
	uint64_t *ids, k, n = 0, i;
	int ok = 1;

	seg->nstale = seg->stale_at = 0;
	if (seg->series_entries_lost ||
	    !pcpu__tree_relog_covers(seg, seg->tree_reg_relabels, seg->relog_reg_seen, r, h))
		return 0;
	ids = malloc((size_t)(h - seg->relog_reg_seen + 1) * sizeof *ids);
	if (!ids)
		return 0;
	for (k = seg->relog_reg_seen; k < h; k++) {
		uint64_t idx = pcpu__tree_relog_at(seg, k);

		if (idx >= seg->entries_used) {
			ok = 0; /* a scribbled slot hides the entry it named */
			break;
		}
		ids[n++] = idx;
	}
	/* Each entry once: a series dropped for the first would be freed
	 * memory at the second. */
	qsort(ids, (size_t)n, sizeof *ids, cmp_u64);
	for (i = 0; ok && i < n; i++) {
		size_t m;

		if (i > 0 && ids[i] == ids[i - 1])
			continue;
		m = pcpu__tree_mapped_list(seg, ids[i], NULL, 0);
		if (seg->nstale + m > seg->stale_cap) {
			size_t cap = (seg->nstale + m) * 2 + 16;
			struct pcpu__series **p = realloc(seg->stale, cap * sizeof *p);

			if (!p) {
				ok = 0;
				break;
			}
			seg->stale = p;
			seg->stale_cap = cap;
		}
		seg->nstale += pcpu__tree_mapped_list(seg, ids[i], seg->stale + seg->nstale, m);
	}
	free(ids);
	if (!ok)
		seg->nstale = 0;
	return ok;
}

int pcpu__tree_relabel(void *ctx, enum pcpu__relabel_op op, struct pcpu_family *f,
		       struct pcpu__series *se, const char *const *v, struct pcpu__series **out)
{
	struct pcpu_segment *seg = ctx;
	struct pcpu__seg_entry e;
	uint64_t idx;
	int r = 0;

	if (!seg->tree || seg->detached) {
		if (op == PCPU__RELABEL_CHANGED || op == PCPU__RELABEL_STALE || op == PCPU__RELABEL_SEEN ||
		    op == PCPU__RELABEL_LIST || op == PCPU__RELABEL_STALE_NEXT)
			return 0;
		return pcpu__error_set(PCPU_ERROR_STATS, ENOTSUP,
				       "only a shared registry's series are relabelled");
	}
	if (op == PCPU__RELABEL_CHANGED)
		return changed(seg);
	if (pcpu__tree_enter(seg) != 0)
		return pcpu__error_set(PCPU_ERROR_STATS, errno, "the shared registry's lock: %s",
				       strerror(errno));
	switch (op) {
	case PCPU__RELABEL_STALE: {
		struct pcpu__series_view sv;
		struct pcpu__family_view fv;
		int64_t i = pcpu__directory_series_entry(seg, se);

		if (i < 0 || (uint64_t)i >= seg->entries_used)
			break; /* not in the directory: nothing to go stale */
		idx = (uint64_t)i;
		pcpu__family_view(f, &fv);
		pcpu__series_view(f, se, &sv);
		/* 1: the registry drops se, and its SERIES_REMOVING takes it
		 * out of the series map and its reverse (directory.c). */
		r = !pcpu__tree_live_series(seg, idx, &e) ||
		    !entry_carries(seg, &e, (const char *const *)sv.values, fv.nlabels);
		break;
	}
	case PCPU__RELABEL_LIST:
		r = list_stale(seg);
		seg->tree_reg_lists += (uint64_t)r;
		break;
	case PCPU__RELABEL_STALE_NEXT:
		if (seg->stale_at < seg->nstale) {
			*out = seg->stale[seg->stale_at++];
			r = 1;
		}
		break;
	case PCPU__RELABEL_SEEN:
		seg->nstale = seg->stale_at = 0;
		/* The lock held: no relabelling is under way. */
		seg->tree_reg_relabels = __atomic_load_n(&seg->tree->relabels, __ATOMIC_ACQUIRE);
		seg->relog_reg_seen = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_ACQUIRE);
		seg->tree_reg_walks++;
		break;
	default:
		r = relabel_entry(seg, op, f, se, v);
	}
	pcpu__tree_leave(seg);
	return r;
}
