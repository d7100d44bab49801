/* SPDX-License-Identifier: MIT */
/*
 * A shared tree's directory (format 2.5, tree.c): the room a series of the
 * tree needs, made sure of before its storage is allocated, and a series'
 * entry rewritten in place with other label values (tree_relabel.c).
 * The entries and blobs themselves are directory.c's.
 */
#include <errno.h>
#include <string.h>

#include "segment_internal.h"
#include "writer.h"

/* Bytes a blob of `len` appended to a tree's strings takes: its class's. */
static uint64_t tree_blob_bytes(size_t len)
{
	return len ? (uint64_t)1 << (BLOB_MIN_SHIFT + pcpu__blob_class(len)) : 0;
}

int pcpu__directory_series_room(struct pcpu_segment *seg, const struct pcpu__family_view *fv,
				const char *const *v)
{
	uint64_t nentries = 1, bytes, label_bytes = 0;
	unsigned l;

	for (l = 0; l < fv->nlabels; l++)
		label_bytes += strlen(v[l]) + 1;
	if (label_bytes > PCPU__SEG_BLOB_MAX) {
		errno = E2BIG;
		return pcpu__directory_cannot_record(seg);
	}
	bytes = tree_blob_bytes((size_t)label_bytes);
	if (fv->sparse) /* 2.10: its table of groups, a blob of its own */
		bytes += tree_blob_bytes(pcpu__seg_sparse_table_size(fv));
	if (fv->group_members) {
		/* A group: its GROUP entry and one series entry a member. */
		nentries = 1 + (uint64_t)fv->group_members;
		bytes = tree_blob_bytes(8 * (size_t)fv->group_members) + fv->group_members * bytes;
	}
	if (seg->entries_cap - seg->entries_used < nentries ||
	    seg->strings_cap - seg->strings_used < bytes) {
		errno = ENOSPC;
		return pcpu__directory_cannot_record(seg);
	}
	/* Their pages now, so that the SERIES_ADDED after the allocation
	 * cannot be refused for want of space. */
	if (pcpu__directory_reserve(seg, PCPU__SEG_HEADER_REGION, &seg->entries_backed,
				    (seg->entries_used + nentries) * PCPU__SEG_ENTRY_SIZE) < 0 ||
	    pcpu__directory_reserve(seg, (uint64_t)(seg->strings - seg->map), &seg->strings_backed,
				    seg->strings_used + bytes) < 0) {
		errno = ENOSPC;
		return pcpu__directory_cannot_record(seg);
	}
	return 0;
}

int64_t pcpu__directory_family_entry(struct pcpu_segment *seg, const struct pcpu_family *f)
{
	uint32_t idx;

	return seg_map_get(&seg->families, f, &idx) == 0 ? (int64_t)idx : -1;
}

/* ---- a tree's series entry rewritten with other labels (tree_relabel.c) ---- */

int64_t pcpu__directory_series_entry(struct pcpu_segment *seg, const struct pcpu__series *se)
{
	uint32_t idx;

	return seg_map_get(&seg->series, se, &idx) == 0 ? (int64_t)idx : -1;
}

int pcpu__directory_relabel_room(struct pcpu_segment *seg, uint64_t len, struct pcpu__blob_claims *cl)
{
	uint64_t more = cl->fresh + tree_blob_bytes((size_t)len);

	if (len > PCPU__SEG_BLOB_MAX) {
		errno = E2BIG;
		return pcpu__directory_cannot_record(seg);
	}
	if (pcpu__tree_blob_claim(seg, (size_t)len, cl))
		return 0; /* a freed blob; else the pages now: no _write() fails */
	if (seg->strings_cap - seg->strings_used < more ||
	    pcpu__directory_reserve(seg, (uint64_t)(seg->strings - seg->map), &seg->strings_backed,
				    seg->strings_used + more) < 0) {
		errno = ENOSPC;
		return pcpu__directory_cannot_record(seg);
	}
	cl->fresh = more;
	return 0;
}

int pcpu__directory_relabel_write(struct pcpu_segment *seg, uint64_t idx, struct pcpu__seg_entry *e,
				  const char *const *v, unsigned n)
{
	uint64_t len = 0, off, old_off = e->blob_off, old_len = e->blob_len;
	size_t pos = 0;
	unsigned l;

	for (l = 0; l < n; l++)
		len += strlen(v[l]) + 1;
	pcpu__directory_begin(seg);
	/* A blob no entry names (freed, or appended:
	 * pcpu__directory_blob_alloc()), so that a reader never sees it
	 * change under an entry it keeps. */
	if (pcpu__directory_blob_alloc(seg, (size_t)len, &off) < 0) {
		pcpu__directory_end(seg);
		return pcpu__directory_cannot_record(seg); /* the room was made: not reached */
	}
	for (l = 0; l < n; l++)
		pcpu__directory_put_str(seg->strings + off, &pos, v[l]);
	e->blob_off = off;
	e->blob_len = (uint32_t)len;
	/* The blob before the entry that names it; the entry under its
	 * sequence, odd while written: a reader that read the values around
	 * it sees the sequence change and keeps neither. */
	__atomic_store_n(&seg->hdr->strings_used, seg->strings_used, __ATOMIC_RELEASE);
	pcpu__directory_entry_write(seg, idx, e);
	/* Only now, the entry changed, may the old blob be overwritten: a
	 * reader that copied the entry before sees its sequence change. */
	pcpu__tree_blob_give(seg, old_off, old_len);
	pcpu__directory_end(seg);
	return 0;
}
