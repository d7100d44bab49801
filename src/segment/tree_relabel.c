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

/* se's entry in the directory (a live series entry): its number, with its
 * copy in *e; -1 with errno ENOENT or ENOTSUP and the message. */
static int64_t series_entry(struct pcpu_segment *seg, const struct pcpu__family_view *fv,
			    struct pcpu__series *se, struct pcpu__seg_entry *e)
{
	int64_t idx = pcpu__directory_series_entry(seg, se);

	if (idx < 0 || (uint64_t)idx >= seg->entries_used || !pcpu__tree_live_series(seg, (uint64_t)idx, e))
		return pcpu__error_set(PCPU_ERROR_STATS, ENOENT,
				       "family \"%.64s\": the series has no entry in the shared "
				       "registry's directory", fv->name);
	if (e->kind != PCPU__SEG_SERIES)
		return pcpu__error_set(PCPU_ERROR_STATS, ENOTSUP,
				       "family \"%.64s\": a group member's series is not relabelled",
				       fv->name);
	return idx;
}

/* CHECK: whether se's entry can be rewritten with values v, the string
 * room counted on top of the relabelling's (BEGIN); a place kept for its
 * COMMIT, which then cannot fail. */
static int check_entry(struct pcpu_segment *seg, struct pcpu_family *f, struct pcpu__series *se,
		       const char *const *v)
{
	struct pcpu__family_view fv;
	struct pcpu__relabel_item *it;
	struct pcpu__seg_entry e;
	int64_t fidx, idx;
	uint64_t len = 0;
	unsigned l;

	pcpu__family_view(f, &fv);
	fidx = pcpu__directory_family_entry(seg, f);
	idx = series_entry(seg, &fv, se, &e);
	if (idx < 0)
		return -1;
	if (fidx < 0)
		return pcpu__error_set(PCPU_ERROR_STATS, ENOENT,
				       "family \"%.64s\": no entry in the shared registry's directory",
				       fv.name);
	if (pcpu__directory_find_series(seg, (uint64_t)fidx, v, fv.nlabels) >= 0)
		return pcpu__error_set(PCPU_ERROR_STATS, EEXIST,
				       "family \"%.64s\": a series with the new label values "
				       "exists in the shared registry", fv.name);
	for (l = 0; l < fv.nlabels; l++)
		len += strlen(v[l]) + 1;
	if (seg->relabel_checked + 1 > seg->relabel_cap) {
		size_t cap = seg->relabel_cap * 2 + 8;
		struct pcpu__relabel_item *p = realloc(seg->relabel_items, cap * sizeof *p);

		if (!p)
			return pcpu__error_set(PCPU_ERROR_STATS, ENOMEM, "out of memory");
		seg->relabel_items = p;
		seg->relabel_cap = cap;
	}
	if (pcpu__directory_relabel_room(seg, len, &seg->relabel_room) < 0)
		return -1;
	/* What END needs, found once: the entry and its copy (nothing else
	 * writes it while the tree's lock is held). */
	it = &seg->relabel_items[seg->relabel_checked++];
	it->f = f;
	it->se = se;
	it->v = NULL;
	it->idx = (uint64_t)idx;
	it->nlabels = fv.nlabels;
	it->e = e;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* END: the entries the COMMITs named rewritten, in their order (a reader
 * sees the relabelling's entries change in the order the registry gave:
 * a family it lists entries by, last). Their numbers go into the log
 * first, as runs of adjacent entries (made together, a label set's are
 * mostly adjacent): killed from there on, the relabelling leaves the log
 * ahead of the count, and every process indexes anew. */
static int commit_entries(struct pcpu_segment *seg)
{
	struct pcpu__relabel_item *it = seg->relabel_items;
	uint64_t before = __atomic_load_n(&seg->tree->relabels, __ATOMIC_RELAXED);
	uint64_t head0 = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_RELAXED);
	uint64_t *ids, bump, logged = 0, head, i, j;
	size_t n = seg->nrelabel;
	int r = 0, index_ok, reg_ok;

	seg->nrelabel = 0;
	if (n == 0)
		return 0;
	/* Whether this process's index, and its registry's marks, were up to
	 * date (pcpu__tree_enter() brought the index so): then they follow
	 * this process's own rewrites in place -- the registry renamed its
	 * series --, so that relabelling n series costs n updates here, not a
	 * rebuild of the index (O(entries)). Another process's relabelling
	 * still makes this one follow the log, once. */
	index_ok = seg->tree_index_relabels == before && seg->relog_index_seen == head0;
	reg_ok = seg->tree_reg_relabels == before && seg->relog_reg_seen == head0;
	ids = malloc(n * sizeof *ids);
	if (ids) {
		for (i = 0; i < n; i++)
			ids[i] = it[i].idx;
		qsort(ids, n, sizeof *ids, cmp_u64);
	}
	for (i = 0; i < n; i = j) {
		/* Out of memory: a record per entry. */
		j = i + 1;
		while (ids && j < n && ids[j] == ids[j - 1] + 1)
			j++;
		logged += pcpu__tree_relog_append(seg, ids ? ids[i] : it[i].idx, j - i, &head);
	}
	free(ids);
	for (i = 0; i < n; i++) {
		struct pcpu__seg_entry e = it[i].e, old = it[i].e;

		if (pcpu__directory_relabel_write(seg, it[i].idx, &e, it[i].v, it[i].nlabels) < 0) {
			r = -1; /* the log names an entry unchanged: followed for nothing */
			continue;
		}
		if (index_ok)
			pcpu__tree_index_rewritten(seg, it[i].idx, &old, &e);
	}
	/* As much as the head moved (pcpu__tree_relog_covers()); without a
	 * log, any move sends the others to a rebuild. */
	bump = logged ? logged : n;
	(void)__atomic_add_fetch(&seg->tree->relabels, bump, __ATOMIC_RELEASE);
	if (index_ok) {
		seg->tree_index_relabels = before + bump;
		seg->relog_index_seen = head0 + logged;
	}
	if (reg_ok) {
		seg->tree_reg_relabels = before + bump;
		seg->relog_reg_seen = head0 + logged;
	}
	return r;
}

/* CHANGED, without the tree's lock: whether the registry must walk its
 * series for stale ones. Not if the relabellings since it last did are in
 * the log and none of them names an entry this process's series are on:
 * then its marks move past them here. */
static int changed(struct pcpu_segment *seg)
{
	uint64_t r = __atomic_load_n(&seg->tree->relabels, __ATOMIC_ACQUIRE), h, k, h2, first, count, i;
	uint64_t looked = 0;
	int got;

	if (r == seg->tree_reg_relabels)
		return 0;
	h = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_ACQUIRE);
	if (!pcpu__tree_relog_covers(seg, seg->tree_reg_relabels, seg->relog_reg_seen, r, h))
		return 1;
	/* Past as many entries as the directory has (the same ones again and
	 * again, or a scribbled run), the locked LIST merges the runs. */
	k = seg->relog_reg_seen;
	while ((got = pcpu__tree_relog_next(seg, &k, h, &first, &count)) == 1) {
		if (count > seg->entries_used - looked)
			return 1;
		looked += count;
		for (i = 0; i < count; i++)
			if (pcpu__tree_mapped(seg, first + i))
				return 1;
	}
	if (got < 0)
		return 1;
	/* The ring's slots read were not overwritten meanwhile. */
	h2 = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_ACQUIRE);
	if (h2 - seg->relog_reg_seen > pcpu__tree_relog_capacity(seg))
		return 1;
	seg->tree_reg_relabels = r;
	seg->relog_reg_seen = h;
	seg->tree_reg_skips++;
	return 0;
}

struct run {
	uint64_t first, end;
};

static int cmp_run(const void *a, const void *b)
{
	const struct run *x = a, *y = b;

	return x->first < y->first ? -1 : x->first > y->first;
}

/* This process's series on entry idx appended to seg->stale: 0, or -1 when
 * memory is short. */
static int stale_on(struct pcpu_segment *seg, uint64_t idx)
{
	size_t m = pcpu__tree_mapped_list(seg, idx, NULL, 0);

	if (seg->nstale + m > seg->stale_cap) {
		size_t cap = (seg->nstale + m) * 2 + 16;
		struct pcpu__series **p = realloc(seg->stale, cap * sizeof *p);

		if (!p)
			return -1;
		seg->stale = p;
		seg->stale_cap = cap;
	}
	seg->nstale += pcpu__tree_mapped_list(seg, idx, seg->stale + seg->nstale, m);
	return 0;
}

/* LIST, the tree's lock held: seg->stale gets this process's series on
 * the entries the log names since SEEN, each once. 1, or 0 where the log
 * does not hold them all (or names an entry past the directory, or memory
 * is short): the registry then asks about every series. The log's records
 * (runs) are sorted and merged first: entries relabelled many times are
 * looked at once, so the work is bounded by the directory, whatever the
 * records say. */
static int list_stale(struct pcpu_segment *seg)
{
	uint64_t r = __atomic_load_n(&seg->tree->relabels, __ATOMIC_ACQUIRE);
	uint64_t h = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_ACQUIRE);
	uint64_t k, first, count, idx;
	struct run *runs;
	size_t n = 0, i, m = 0;
	int ok = 1, got;

	seg->nstale = seg->stale_at = 0;
	if (seg->series_entries_lost ||
	    !pcpu__tree_relog_covers(seg, seg->tree_reg_relabels, seg->relog_reg_seen, r, h))
		return 0;
	runs = malloc((size_t)(h - seg->relog_reg_seen + 1) * sizeof *runs);
	if (!runs)
		return 0;
	for (k = seg->relog_reg_seen; (got = pcpu__tree_relog_next(seg, &k, h, &first, &count)) == 1;) {
		runs[n].first = first;
		runs[n++].end = first + count;
	}
	if (got < 0) {
		free(runs); /* a record that names no entry hides the ones it did */
		return 0;
	}
	/* Merged: each entry once (a series dropped for the first would be
	 * freed memory at the second). */
	qsort(runs, n, sizeof *runs, cmp_run);
	for (i = 0; i < n; i++) {
		if (m > 0 && runs[i].first <= runs[m - 1].end) {
			if (runs[i].end > runs[m - 1].end)
				runs[m - 1].end = runs[i].end;
		} else {
			runs[m++] = runs[i];
		}
	}
	for (i = 0; ok && i < m; i++)
		for (idx = runs[i].first; ok && idx < runs[i].end; idx++)
			ok = idx < seg->entries_used && stale_on(seg, idx) == 0;
	free(runs);
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
	case PCPU__RELABEL_BEGIN:
		seg->nrelabel = seg->relabel_checked = 0;
		memset(&seg->relabel_room, 0, sizeof seg->relabel_room);
		break;
	case PCPU__RELABEL_CHECK:
		r = check_entry(seg, f, se, v);
		break;
	case PCPU__RELABEL_COMMIT:
		/* The COMMITs come in the CHECKs' order. */
		if (seg->nrelabel >= seg->relabel_checked || seg->relabel_items[seg->nrelabel].se != se) {
			r = pcpu__error_set(PCPU_ERROR_STATS, EINVAL, "a relabelling's series not checked");
			break;
		}
		seg->relabel_items[seg->nrelabel++].v = v;
		break;
	case PCPU__RELABEL_END:
		r = commit_entries(seg);
		break;
	default:
		r = pcpu__error_set(PCPU_ERROR_STATS, EINVAL, "unknown relabel step");
	}
	pcpu__tree_leave(seg);
	return r;
}
