/* SPDX-License-Identifier: MIT */
/*
 * A shared tree's free blobs: the string table's room that relabelled
 * series entries (pcpu_family_relabel(), tree_relabel.c) named before,
 * one list per size class, whose heads are in the tree's shared state
 * (struct pcpu__seg_tree, writer.h), under the tree's lock. directory.c
 * frees a relabelled entry's old blob here once the entry names another,
 * and takes blobs from here before it appends one, so that a tree whose
 * series are relabelled for months does not fill its string table.
 *
 * docs/segment-format.md, "Reusing the strings", says why a reader never
 * sees a reused blob under the entry that named it before, and what a
 * writer killed in the middle leaves: each list changes by one store of
 * its head, so a blob is at worst leaked, never handed to two entries.
 * Shared by processes that may be buggy: a head or link that cannot be a
 * blob of its class cuts its list (blob_place_ok()).
 */
#include <string.h>

#include "../core/core.h"
#include "segment_internal.h"
#include "writer.h"

/* Tests only (test_tree_relabel_reuse.c): called at the steps of the
 * lists' updates, so that a test can kill a writer there. 1: a blob taken
 * (the head moved); 2: giving one, nothing written yet; 3: its link
 * written, the head not moved; 4: given. */
PCPU_HIDDEN void (*pcpu__test_blob_pause)(int step);
void (*pcpu__test_blob_pause)(int step);

static void test_pause(int step)
{
	if (PCPU_UNLIKELY(pcpu__test_blob_pause != NULL))
		pcpu__test_blob_pause(step);
}

static uint64_t class_bytes(unsigned c)
{
	return (uint64_t)1 << (BLOB_MIN_SHIFT + c);
}

/* Whether [off, off + a class c's room) can be a blob: where blob_alloc()
 * puts blobs (a multiple of the smallest class), below strings_used. A
 * list scribbled on is thereby cut, never followed out of the table. */
static int blob_place_ok(const struct pcpu_segment *seg, uint64_t off, unsigned c)
{
	return off % class_bytes(0) == 0 && off <= seg->strings_used &&
	       class_bytes(c) <= seg->strings_used - off;
}

/* Class c's head (an offset + 1, 0: none); a head out of the rules is
 * dropped, its blobs leaked. */
static uint64_t list_head(struct pcpu_segment *seg, unsigned c)
{
	uint64_t h = __atomic_load_n(&seg->tree->free_blobs[c], __ATOMIC_RELAXED);

	if (h && !blob_place_ok(seg, h - 1, c)) {
		__atomic_store_n(&seg->tree->free_blobs[c], 0, __ATOMIC_RELAXED);
		h = 0;
	}
	return h;
}

int pcpu__tree_blob_ready(struct pcpu_segment *seg, size_t len)
{
	if (!seg->tree || len == 0 || len > PCPU__SEG_BLOB_MAX)
		return 0;
	return list_head(seg, pcpu__blob_class(len)) != 0;
}

int pcpu__tree_blob_claim(struct pcpu_segment *seg, size_t len, struct pcpu__blob_claims *cl)
{
	unsigned c, n;
	uint64_t h;

	if (!pcpu__tree_blob_ready(seg, len))
		return 0;
	c = pcpu__blob_class(len);
	/* The list's blobs past those counted on, followed as _take() would
	 * (a link out of the rules ends it). */
	h = list_head(seg, c);
	for (n = 0; n < cl->taken[c] && h; n++) {
		memcpy(&h, seg->strings + h - 1, sizeof h);
		if (h && !blob_place_ok(seg, h - 1, c))
			h = 0;
	}
	if (!h)
		return 0;
	cl->taken[c]++;
	return 1;
}

int pcpu__tree_blob_take(struct pcpu_segment *seg, size_t len, uint64_t *off)
{
	unsigned c;
	uint64_t h, next;

	if (!pcpu__tree_blob_ready(seg, len))
		return -1;
	c = pcpu__blob_class(len);
	h = list_head(seg, c);
	memcpy(&next, seg->strings + h - 1, sizeof next);
	if (next && !blob_place_ok(seg, next - 1, c))
		next = 0; /* scribbled on: the rest of the list leaks */
	/* One store takes it: a writer killed before it leaves the list
	 * whole, after it leaves the blob out of every list and named by no
	 * entry (leaked), never in a list and named. */
	__atomic_store_n(&seg->tree->free_blobs[c], next, __ATOMIC_RELAXED);
	seg->tree->blobs_reused++;
	*off = h - 1;
	test_pause(1);
	return 0;
}

void pcpu__tree_blob_give(struct pcpu_segment *seg, uint64_t off, uint64_t len)
{
	unsigned c;
	uint64_t h;

	if (!seg->tree || len == 0 || len > PCPU__SEG_BLOB_MAX)
		return;
	c = pcpu__blob_class((size_t)len);
	if (!blob_place_ok(seg, off, c))
		return;
	h = list_head(seg, c);
	test_pause(2);
	/* The link overwrites the blob's first bytes: after the rewrite of
	 * the entry that named it (its sequence changed), as seen from any
	 * reader that copies that entry, then the strings, then it again. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(seg->strings + off, &h, sizeof h);
	test_pause(3);
	/* One store frees it: killed before it, the blob is leaked. */
	__atomic_store_n(&seg->tree->free_blobs[c], off + 1, __ATOMIC_RELEASE);
	seg->tree->blobs_freed++;
	test_pause(4);
}
