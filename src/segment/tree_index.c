/* SPDX-License-Identifier: MIT */
/*
 * A tree segment's index of its shared directory (2.5; PCPU_SEGMENT_SHARED_TREE):
 * the live family and series entries any process of the tree wrote, hashed
 * (a family by its name, a series by its family's id and label values) so
 * that a process registering a family or series finds the tree's in
 * constant time, and, for several label sets of one name (2.8), whether an
 * entry is another label set of the metric a registration describes.
 * Entries are read under the tree's lock (directory.c, tree.c say when).
 * Split from directory.c, which calls these.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "segment_internal.h"
#include "writer.h"

/* Entry i, if it is live and of `kind`, its blob below `strings`: a copy
 * (another process may be writing it only while it holds the tree lock,
 * which the caller holds -- but for pcpu__tree_index_prefork(), which
 * checks what it copied -- and for a GROUP entry's sequence and copy of
 * values, which collections rewrite under their own lock: not for kind
 * GROUP). */
static int live_entry_below(struct pcpu_segment *seg, uint64_t i, unsigned kind,
			    struct pcpu__seg_entry *e, uint64_t strings)
{
	*e = seg->entries[i];
	return e->kind == kind && !(e->seq & 1) && e->blob_off <= strings &&
	       e->blob_len <= strings - e->blob_off;
}

static int live_entry(struct pcpu_segment *seg, uint64_t i, unsigned kind,
		      struct pcpu__seg_entry *e)
{
	return live_entry_below(seg, i, kind, e, seg->strings_used);
}

int pcpu__tree_live_series(struct pcpu_segment *seg, uint64_t i, struct pcpu__seg_entry *e)
{
	return live_entry(seg, i, PCPU__SEG_SERIES, e) || live_entry(seg, i, PCPU__SEG_GROUP_SERIES, e);
}

/* The index's hashes: a family by its name, a series by its family's id
 * and its blob (the label values, each with its NUL). */
static uint64_t family_hash(const char *name)
{
	return pcpu__hash_str(PCPU__HASH_INIT ^ PCPU__SEG_FAMILY, name);
}

static uint64_t series_hash_start(uint64_t family_id)
{
	return pcpu__hash_bytes(PCPU__HASH_INIT ^ PCPU__SEG_SERIES, &family_id, sizeof family_id);
}

/* Indexes entries [seg->tree_indexed, used), their blobs below `strings`.
 * Out of memory: the scan stops, the entries from there stay unindexed,
 * and the finds below scan the directory for them. Under the tree's lock (careful 0) every entry below the
 * count is whole and its blob below the count of strings, so an entry
 * that is not a live family or series is one to skip. Without it (careful
 * 1: pcpu__tree_index_prefork()) an entry may be mid-rewrite (its sequence
 * odd, or its copy torn: then the tree's count of relabels moves, and the
 * index is rebuilt at the next pcpu__tree_enter()), or its blob may lie
 * past the count read before it: the scan stops at the first entry it
 * cannot tell, for the locked path to go on from there -- skipped, a live
 * entry would never be indexed, and its labels registered a second time. */
static void index_upto(struct pcpu_segment *seg, uint64_t used, uint64_t strings, int careful)
{
	struct pcpu__seg_entry e;
	uint64_t i;

	for (i = seg->tree_indexed; i < used; i++) {
		uint64_t h;

		seg->tree_index_scanned++;
		if (live_entry_below(seg, i, PCPU__SEG_FAMILY, &e, strings))
			h = family_hash(seg->strings + e.blob_off);
		else if (live_entry_below(seg, i, PCPU__SEG_SERIES, &e, strings) ||
			 live_entry_below(seg, i, PCPU__SEG_GROUP_SERIES, &e, strings))
			h = pcpu__hash_bytes(series_hash_start(e.family_id), seg->strings + e.blob_off,
					     e.blob_len);
		else if (careful && ((e.seq & 1) || e.kind == PCPU__SEG_FAMILY ||
				     e.kind == PCPU__SEG_SERIES || e.kind == PCPU__SEG_GROUP_SERIES))
			break; /* mid-rewrite, or its blob past `strings` */
		else
			continue;
		if (pcpu__htab_reserve(&seg->tree_index, 1) < 0)
			break;
		(void)pcpu__htab_add(&seg->tree_index, h, (uintptr_t)i + 1, 0);
	}
	seg->tree_indexed = i;
}

/* Indexes the entries other processes (or this one) wrote since the last
 * look, the tree's lock held. */
static void index_catch_up(struct pcpu_segment *seg)
{
	index_upto(seg, seg->entries_used, seg->strings_used, 0);
}

/* Entry idx's hash added again, as it is now (relabelled since it was
 * indexed): its old slot stays, stale -- a lookup compares the entry, so
 * it never matches -- until the next rebuild. */
static void index_again(struct pcpu_segment *seg, uint64_t idx, uint64_t strings)
{
	struct pcpu__seg_entry e;

	if (idx >= seg->tree_indexed)
		return; /* indexed as it is when the scan gets there */
	if (!live_entry_below(seg, idx, PCPU__SEG_SERIES, &e, strings) &&
	    !live_entry_below(seg, idx, PCPU__SEG_GROUP_SERIES, &e, strings))
		return; /* made free (a repair), or mid-rewrite: a later relabelling's */
	if (pcpu__htab_reserve(&seg->tree_index, 1) < 0) {
		seg->tree_indexed = idx; /* indexed again from there at the next look */
		return;
	}
	(void)pcpu__htab_add(&seg->tree_index,
			     pcpu__hash_bytes(series_hash_start(e.family_id), seg->strings + e.blob_off,
					      e.blob_len),
			     (uintptr_t)idx + 1, 0);
	seg->tree_index_stale++;
}

/* The index follows the relabellings between its marks and (r, h), the
 * tree's relabels and log head: 1 if the log covered them, 0 if it must
 * be made anew. `careful`: without the tree's lock. */
static int index_follow(struct pcpu_segment *seg, uint64_t r, uint64_t h, int careful)
{
	uint64_t start = seg->relog_index_seen, strings, k = start, first, count, i, looked = 0;
	int got;

	if (!pcpu__tree_relog_covers(seg, seg->tree_index_relabels, start, r, h))
		return 0;
	strings = careful ? pcpu__tree_count(&seg->hdr->strings_used, seg->strings_cap)
			  : seg->strings_used;
	while ((got = pcpu__tree_relog_next(seg, &k, h, &first, &count)) == 1) {
		/* More entries to follow than the directory holds (the same
		 * ones again and again, or a scribbled run): made anew. */
		if (count > seg->entries_cap - looked)
			return 0;
		looked += count;
		for (i = 0; i < count; i++)
			index_again(seg, first + i, strings);
	}
	if (got < 0)
		return 0; /* a record that names no entry: made anew */
	/* Without the lock, relabellings meanwhile may have overwritten the
	 * ring's slots before they were read: then it did not cover them. */
	if (careful && __atomic_load_n(&seg->tree->relog_head, __ATOMIC_ACQUIRE) - start >
			       pcpu__tree_relog_capacity(seg))
		return 0;
	seg->tree_index_relabels = r;
	seg->relog_index_seen = h;
	seg->tree_index_follows++;
	/* Stale slots past the live ones: a rebuild drops them. */
	return seg->tree_index_stale <= seg->tree_index.used / 2 + 64;
}

void pcpu__tree_index_sync(struct pcpu_segment *seg, uint64_t r, uint64_t h, int careful)
{
	if ((r == seg->tree_index_relabels && h == seg->relog_index_seen) ||
	    index_follow(seg, r, h, careful))
		return;
	pcpu__htab_free(&seg->tree_index);
	seg->tree_indexed = 0;
	seg->tree_index_relabels = r;
	seg->relog_index_seen = h;
	seg->tree_index_stale = 0;
	seg->tree_index_rebuilds++;
}

void pcpu__tree_index_prefork(struct pcpu_segment *seg)
{
	uint64_t r, h, used, strings;

	/* The relabels and the log's head first: a relabelling that overlaps
	 * the scan below moves them after these loads, and the next
	 * pcpu__tree_enter() of this process or the child then follows it
	 * (or indexes anew). */
	r = __atomic_load_n(&seg->tree->relabels, __ATOMIC_ACQUIRE);
	h = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_ACQUIRE);
	/* Entries, then strings: an entry is written, its blob first, before
	 * the count of entries says it exists. */
	used = pcpu__tree_count(&seg->hdr->entries_used, seg->entries_cap);
	strings = pcpu__tree_count(&seg->hdr->strings_used, seg->strings_cap);
	pcpu__tree_index_sync(seg, r, h, 1);
	if (seg->tree_indexed > used)
		seg->tree_indexed = used;
	index_upto(seg, used, strings, 1);
	/* Room for the child's own registrations: without it, the child's
	 * first add could grow the table, copying every slot it inherited
	 * (and touching every page of it, copy-on-write). */
	(void)pcpu__htab_reserve(&seg->tree_index, seg->tree_index.used / 4 + 64);
}

/* The strings of family entry e's blob after its name: help (NULL
 * without), unit, then *labels at the label names; 0, or -1 where the
 * blob does not hold them (another process is being trusted: bounded). */
static int family_strings(struct pcpu_segment *seg, const struct pcpu__seg_entry *e,
			  const char **help, const char **unit, const char **labels)
{
	const char *p = seg->strings + e->blob_off, *end = p + e->blob_len, *str[3];
	int k;

	for (k = 0; k < 3; k++) {
		const char *nul;

		str[k] = NULL;
		if (k == 1 && !(e->flags & PCPU__SEG_E_HAS_HELP))
			continue;
		nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul)
			return -1;
		str[k] = p; /* name, help, unit */
		p = nul + 1;
	}
	*help = str[1];
	*unit = str[2];
	*labels = p;
	return 0;
}

static int family_is(struct pcpu_segment *seg, uint64_t i, const char *name, unsigned nlabels,
		     char *const *labels)
{
	size_t n = strlen(name) + 1;
	struct pcpu__seg_entry e;
	const char *help, *unit, *p, *end;
	unsigned l;

	if (!live_entry(seg, i, PCPU__SEG_FAMILY, &e) || e.blob_len < n ||
	    memcmp(seg->strings + e.blob_off, name, n) != 0)
		return 0;
	if (nlabels == UINT_MAX)
		return 1; /* any label set of the name */
	if (e.nlabels != nlabels || family_strings(seg, &e, &help, &unit, &p) < 0)
		return 0;
	end = seg->strings + e.blob_off + e.blob_len;
	for (l = 0; l < nlabels; l++) {
		size_t len = strlen(labels[l]) + 1;

		if ((size_t)(end - p) < len || memcmp(p, labels[l], len) != 0)
			return 0;
		p += len;
	}
	return 1;
}

/* Whether a family of type `type` keeps buckets: the type table says. */
static int buckets(enum pcpu_metric_type type)
{
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info(type);

	return t && t->value == PCPU_VALUE_BUCKETS;
}

int pcpu__directory_same_metric(struct pcpu_segment *seg, uint64_t i,
				const struct pcpu__family_view *v)
{
	struct pcpu__seg_entry e;
	const char *help, *unit, *labels;
	unsigned vflags = v->help ? PCPU__SEG_E_HAS_HELP : 0;

	if (!live_entry(seg, i, PCPU__SEG_FAMILY, &e) || family_strings(seg, &e, &help, &unit, &labels) < 0)
		return 0;
	if (e.type != (uint8_t)v->type || e.scale_exp10 != (int8_t)v->scale_exp10 ||
	    (e.flags & PCPU__SEG_E_HAS_HELP) != vflags ||
	    !(e.flags & PCPU__SEG_E_INFO) != !(v->flags & PCPU_SNAPSHOT_INFO) ||
	    !((e.flags & PCPU__SEG_E_NANOS) || (e.u32a & PCPU__SEG_HIST_WIDE)) !=
		    !(v->flags & PCPU_SNAPSHOT_NANOS) ||
	    (v->help && strcmp(help, v->help) != 0) || strcmp(unit, v->unit ? v->unit : "") != 0)
		return 0;
	if (buckets(v->type)) {
		/* One layout: the same entry fields, and the same bounds
		 * where the blob stores them (its last bytes). */
		size_t nb = v->layout->scheme == PCPU_HISTOGRAM_LOG_LINEAR ? 0 : v->nbuckets - 1;

		if (e.nbuckets != (uint32_t)v->nbuckets ||
		    (e.u32a & 0xffu) != (uint32_t)v->layout->scheme ||
		    (e.flags & PCPU__SEG_E_EXPORT_MASK) !=
			    (v->layout->scheme == PCPU_HISTOGRAM_EXPONENTIAL
				     ? (uint16_t)((1 + v->export_lg) << PCPU__SEG_E_EXPORT_SHIFT)
				     : 0) ||
		    (nb && (e.blob_len < nb * sizeof(int64_t) ||
			    memcmp(seg->strings + e.blob_off + e.blob_len - nb * sizeof(int64_t),
				   v->bucket_upper, nb * sizeof(int64_t)) != 0)))
			return 0;
	}
	return 1;
}

struct family_key {
	struct pcpu_segment *seg;
	const char *name;
	unsigned nlabels;
	char *const *labels;
};

static int family_eq(const struct pcpu__hslot *s, const void *ctx)
{
	const struct family_key *k = ctx;

	return family_is(k->seg, (uint64_t)s->key - 1, k->name, k->nlabels, k->labels);
}

int64_t pcpu__directory_find_family(struct pcpu_segment *seg, const char *name, unsigned nlabels,
				    char *const *labels)
{
	struct family_key k = {seg, name, nlabels, labels};
	struct pcpu__hslot *s;
	uint64_t i;

	index_catch_up(seg);
	s = pcpu__htab_find(&seg->tree_index, family_hash(name), family_eq, &k);
	if (s)
		return (int64_t)s->key - 1;
	if (seg->tree_indexed == seg->entries_used)
		return -1;
	for (i = 0; i < seg->entries_used; i++) /* the index is short of memory */
		if (family_is(seg, i, name, nlabels, labels))
			return (int64_t)i;
	return -1;
}

struct series_key {
	struct pcpu_segment *seg;
	uint64_t family_id;
	const char *const *v;
	unsigned n;
};

static int series_is(const struct series_key *k, uint64_t i)
{
	struct pcpu__seg_entry e;
	const char *p, *end;
	unsigned l;

	if (!pcpu__tree_live_series(k->seg, i, &e) || e.family_id != k->family_id ||
	    e.nlabels != k->n)
		return 0;
	p = k->seg->strings + e.blob_off;
	end = p + e.blob_len;
	for (l = 0; l < k->n; l++) {
		size_t len = strlen(k->v[l]) + 1;

		if ((size_t)(end - p) < len || memcmp(p, k->v[l], len) != 0)
			return 0;
		p += len;
	}
	return 1;
}

static int series_eq(const struct pcpu__hslot *s, const void *ctx)
{
	return series_is(ctx, (uint64_t)s->key - 1);
}

int64_t pcpu__directory_find_series(struct pcpu_segment *seg, uint64_t fidx, const char *const *v,
				    unsigned n)
{
	struct series_key k = {seg, seg->entries[fidx].family_id, v, n};
	uint64_t h = series_hash_start(k.family_id), i;
	struct pcpu__hslot *s;
	unsigned l;

	index_catch_up(seg);
	for (l = 0; l < n; l++)
		h = pcpu__hash_bytes(h, v[l], strlen(v[l]) + 1);
	s = pcpu__htab_find(&seg->tree_index, h, series_eq, &k);
	if (s)
		return (int64_t)s->key - 1;
	if (seg->tree_indexed == seg->entries_used)
		return -1;
	for (i = 0; i < seg->entries_used; i++) /* the index is short of memory */
		if (series_is(&k, i))
			return (int64_t)i;
	return -1;
}

void pcpu__tree_index_rewritten(struct pcpu_segment *seg, uint64_t idx,
				const struct pcpu__seg_entry *old, const struct pcpu__seg_entry *now)
{
	struct pcpu__hslot *s;

	if (idx >= seg->tree_indexed)
		return; /* not indexed yet: index_catch_up() reads it as it is */
	s = pcpu__htab_find_key(&seg->tree_index,
				pcpu__hash_bytes(series_hash_start(old->family_id),
						 seg->strings + old->blob_off, old->blob_len),
				(uintptr_t)idx + 1);
	if (s)
		pcpu__htab_remove(&seg->tree_index, s);
	if (pcpu__htab_reserve(&seg->tree_index, 1) == 0)
		(void)pcpu__htab_add(&seg->tree_index,
				     pcpu__hash_bytes(series_hash_start(now->family_id),
						      seg->strings + now->blob_off, now->blob_len),
				     (uintptr_t)idx + 1, 0);
	else
		seg->tree_indexed = idx; /* indexed again from there at the next look */
}
