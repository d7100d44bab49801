/* SPDX-License-Identifier: MIT */
/*
 * A tree's relabel log (PCPU_SEGMENT_SHARED_TREE): which series entries
 * were rewritten in place (pcpu_family_relabel()), so that every process
 * of the tree follows a relabelling entry by entry.
 *
 * Without it a process that saw the tree's count of relabels move could
 * only index the whole directory anew and walk all of its series for
 * stale ones: O(entries + its series) per relabelling elsewhere. A server
 * that relabels as it runs (the PostgreSQL extension gives an evicted
 * statement's series to the next new statement: 38 relabellings per new
 * statement) paid that in every backend at every new statement: 2.4 ms of
 * CPU per transaction with 1,000 entries and 3,000 distinct statements
 * (bench/postgresql.md, "Eviction churn").
 *
 * The log: a ring of relog_cap slots (uint32_t) at the start of the string
 * table, and relog_head, the slots ever appended (struct pcpu__seg_tree).
 * A record is one slot, an entry's number, or two, a run of entries (the
 * RUN bit and the count less one, then the first entry: writer.h). A
 * relabelling appends its records, under the tree's lock, before it
 * rewrites the entries and before it bumps `relabels` by the slots. A process
 * keeps both counts as they were when it last followed them; it follows
 * the log from its head mark when the two moved by the same amount and the
 * ring still holds that far back (pcpu__tree_relog_covers()). Anything
 * else -- a relabelling killed between its append and its count (or its
 * rewrite), a repair that freed an entry no append named, a process of a
 * library before the log (it counts without appending), more relabellings
 * than the ring holds -- makes the two differ or the ring too short, and
 * the process indexes anew and walks as before. (A relabelling killed
 * after its append and a later one by a library without the log could
 * cancel out; a tree's processes run one library.)
 *
 * Trust: the ring's entries are bounded by the directory's count before
 * use; a scribbled entry number only makes a process look at an entry for
 * nothing.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../core/core.h"
#include "backing.h"
#include "segment_internal.h"
#include "writer.h"

static uint32_t *ring(struct pcpu_segment *seg)
{
	return (uint32_t *)(seg->strings + (seg->tree->relog_off - 1));
}

/* The log's geometry as the file says it, checked against the string
 * table: 0 if there is no usable log. */
uint64_t pcpu__tree_relog_capacity(struct pcpu_segment *seg)
{
	uint64_t off = __atomic_load_n(&seg->tree->relog_off, __ATOMIC_ACQUIRE);
	uint64_t cap = seg->tree->relog_cap & ~PCPU__SEG_TREE_RELOG_RUNS;

	if (off == 0 || cap == 0 || (cap & (cap - 1)) || cap > ((uint64_t)1 << 24) ||
	    off - 1 > seg->strings_cap || cap * sizeof(uint32_t) > seg->strings_cap - (off - 1) ||
	    (off - 1) % sizeof(uint32_t))
		return 0;
	return cap;
}

void pcpu__tree_relog_setup(struct pcpu_segment *seg)
{
	uint64_t bytes = PCPU__SEG_TREE_RELOG_BYTES;
	uint64_t region = (uint64_t)(seg->strings - seg->map);

	/* The string table's first pages, before any blob, allocated now:
	 * an append never faults a page in (a full file system: no log). */
	if (seg->strings_used != 0 || seg->strings_backed != 0 || seg->strings_cap < bytes ||
	    pcpu_file_allocate_mapped(seg->fd, seg->strings, region, (size_t)bytes) != 0)
		return; /* no log: relabellings are followed by rebuilds */
	seg->strings_backed = bytes;
	seg->strings_used = bytes;
	__atomic_store_n(&seg->hdr->strings_used, seg->strings_used, __ATOMIC_RELEASE);
	seg->tree->relog_cap = PCPU__SEG_TREE_RELOG_CAP | PCPU__SEG_TREE_RELOG_RUNS;
	seg->tree->relog_head = 0;
	__atomic_store_n(&seg->tree->relog_off, 1, __ATOMIC_RELEASE); /* offset 0, + 1 */
}

uint64_t pcpu__tree_relog_append(struct pcpu_segment *seg, uint64_t first, uint64_t count,
				 uint64_t *head)
{
	uint64_t cap = pcpu__tree_relog_capacity(seg);
	uint64_t h = __atomic_load_n(&seg->tree->relog_head, __ATOMIC_RELAXED);
	uint64_t slots = 0, i;

	*head = h;
	if (cap == 0)
		return 0;
	if (count > 1 && (seg->tree->relog_cap & PCPU__SEG_TREE_RELOG_RUNS)) {
		__atomic_store_n(&ring(seg)[h & (cap - 1)],
				 PCPU__SEG_TREE_RELOG_RUN | (uint32_t)(count - 1), __ATOMIC_RELAXED);
		__atomic_store_n(&ring(seg)[(h + 1) & (cap - 1)], (uint32_t)first, __ATOMIC_RELAXED);
		slots = 2;
	} else {
		/* A log whose tree a library before runs made: its writers
		 * read one entry a slot (they join the tree too). */
		for (i = 0; i < count; i++)
			__atomic_store_n(&ring(seg)[(h + i) & (cap - 1)], (uint32_t)(first + i),
					 __ATOMIC_RELAXED);
		slots = count;
	}
	/* The slots before the head that names them (lock-free readers:
	 * pcpu__tree_relog_next() after pcpu__tree_relog_covers()). */
	__atomic_store_n(&seg->tree->relog_head, h + slots, __ATOMIC_RELEASE);
	return slots;
}

int pcpu__tree_relog_covers(struct pcpu_segment *seg, uint64_t relabels0, uint64_t head0, uint64_t r,
			    uint64_t h)
{
	uint64_t cap = pcpu__tree_relog_capacity(seg);

	return cap != 0 && h - head0 == r - relabels0 && h - head0 <= cap;
}

int pcpu__tree_relog_next(struct pcpu_segment *seg, uint64_t *k, uint64_t h, uint64_t *first,
			  uint64_t *count)
{
	uint64_t cap = pcpu__tree_relog_capacity(seg);
	uint32_t s;

	if (*k >= h)
		return 0;
	if (cap == 0)
		return -1;
	s = __atomic_load_n(&ring(seg)[*k & (cap - 1)], __ATOMIC_RELAXED);
	*count = 1;
	if (s & PCPU__SEG_TREE_RELOG_RUN) {
		if (h - *k < 2)
			return -1; /* a run's head without its first entry */
		*count = (uint64_t)(s & ~PCPU__SEG_TREE_RELOG_RUN) + 1;
		s = __atomic_load_n(&ring(seg)[(*k + 1) & (cap - 1)], __ATOMIC_RELAXED);
	}
	*k += *count > 1 ? 2 : 1;
	*first = s;
	/* Bounded by the directory: a scribbled slot names no entry past it. */
	return *first < seg->entries_cap && *count <= seg->entries_cap - *first ? 1 : -1;
}

/* ---- the series map's reverse: which of this process's series are on an entry ---- */

static uint64_t idx_hash(uint64_t idx)
{
	return pcpu__hash_bytes(PCPU__HASH_INIT, &idx, sizeof idx);
}

void pcpu__tree_mapped_add(struct pcpu_segment *seg, uint64_t idx, const struct pcpu__series *se)
{
	if (seg->tree && !seg->series_entries_lost &&
	    pcpu__htab_add(&seg->series_entries, idx_hash(idx), (uintptr_t)se, (uint32_t)idx) != 0)
		seg->series_entries_lost = 1; /* from now on, every relabelling concerns us */
}

void pcpu__tree_mapped_drop(struct pcpu_segment *seg, uint64_t idx, const struct pcpu__series *se)
{
	struct pcpu__hslot *s;

	if (!seg->tree || seg->series_entries_lost)
		return;
	s = pcpu__htab_find_key(&seg->series_entries, idx_hash(idx), (uintptr_t)se);
	if (s)
		pcpu__htab_remove(&seg->series_entries, s);
}

struct on_entry {
	uint64_t idx;
	int collect;                 /* 0: the first one only */
	struct pcpu__series **found; /* collect: up to cap of them */
	size_t n, cap;
};

/* Matches the first series on the entry, or, collecting, none: every one
 * on it is then in found[], the probe going on to the run's end. */
static int on_entry_eq(const struct pcpu__hslot *s, const void *ctx)
{
	struct on_entry *q = (struct on_entry *)ctx;

	if (s->val != (uint32_t)q->idx)
		return 0;
	if (!q->collect)
		return 1;
	if (q->n < q->cap)
		q->found[q->n] = (struct pcpu__series *)s->key;
	q->n++;
	return 0;
}

int pcpu__tree_mapped(struct pcpu_segment *seg, uint64_t idx)
{
	struct on_entry q = {idx, 0, NULL, 0, 0};

	return seg->series_entries_lost || idx == UINT64_MAX ||
	       pcpu__htab_find(&seg->series_entries, idx_hash(idx), on_entry_eq, &q) != NULL;
}

size_t pcpu__tree_mapped_list(struct pcpu_segment *seg, uint64_t idx, struct pcpu__series **found,
			      size_t cap)
{
	struct on_entry q = {idx, 1, found, 0, cap};

	(void)pcpu__htab_find(&seg->series_entries, idx_hash(idx), on_entry_eq, &q);
	return q.n;
}
