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
	uint64_t len = 0, after;
	int64_t fidx, idx;
	unsigned l;

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
	if (pcpu__directory_relabel_write(seg, (uint64_t)idx, &e, v, fv.nlabels) < 0)
		return -1;
	after = __atomic_add_fetch(&seg->tree->relabels, 1, __ATOMIC_RELEASE);
	/* This process's own rewrite, the tree's lock held since
	 * pcpu__tree_enter() brought its index up to date: the index follows
	 * in place, and the registry, which renamed its series, has nothing
	 * stale -- so that relabelling n series costs n updates here, not n
	 * rebuilds of the index (O(entries) each). Another process's
	 * relabelling still makes this one index anew, once. */
	if (seg->tree_index_relabels == after - 1) {
		pcpu__tree_index_rewritten(seg, (uint64_t)idx, &old, &e);
		seg->tree_index_relabels = after;
	}
	if (seg->tree_reg_relabels == after - 1)
		seg->tree_reg_relabels = after;
	return 0;
}

int pcpu__tree_relabel(void *ctx, enum pcpu__relabel_op op, struct pcpu_family *f,
		       struct pcpu__series *se, const char *const *v)
{
	struct pcpu_segment *seg = ctx;
	struct pcpu__seg_entry e;
	uint64_t idx;
	int r = 0;

	if (!seg->tree || seg->detached) {
		if (op == PCPU__RELABEL_CHANGED || op == PCPU__RELABEL_STALE || op == PCPU__RELABEL_SEEN)
			return 0;
		return pcpu__error_set(PCPU_ERROR_STATS, ENOTSUP,
				       "only a shared registry's series are relabelled");
	}
	if (op == PCPU__RELABEL_CHANGED)
		return __atomic_load_n(&seg->tree->relabels, __ATOMIC_ACQUIRE) != seg->tree_reg_relabels;
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
		r = !pcpu__tree_live_series(seg, idx, &e) ||
		    !entry_carries(seg, &e, (const char *const *)sv.values, fv.nlabels);
		break;
	}
	case PCPU__RELABEL_SEEN:
		seg->tree_reg_relabels = __atomic_load_n(&seg->tree->relabels, __ATOMIC_ACQUIRE);
		seg->tree_reg_walks++;
		break;
	default:
		r = relabel_entry(seg, op, f, se, v);
	}
	pcpu__tree_leave(seg);
	return r;
}
