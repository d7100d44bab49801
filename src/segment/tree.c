/* SPDX-License-Identifier: MIT */
/*
 * A segment shared by a process tree (PCPU_SEGMENT_SHARED_TREE,
 * pcpu/segment.h): the registry of a pre-fork server, which its master
 * publishes before it forks and every worker writes.
 *
 * What is shared, and how:
 *  - the values: the registry's zone is a tree zone (src/zone_tree.c), so a
 *    fork() child keeps the file's mappings instead of leaving them, and
 *    every process allocates from one frontier. Slots are CPU numbers
 *    (publication refuses mm_cid, which is per process), so one running
 *    thread owns a slot whatever its process, and the rseq add is exact
 *    across processes with no atomic instruction;
 *  - the directory: every process writes it, each change under the tree's
 *    lock (robust, in the header's page), with the directory's high-water
 *    marks and ids read from the file on entry (pcpu__tree_enter) and
 *    written back on leaving, so the processes' private copies of the
 *    writer's bookkeeping never disagree. Free lists stay private and
 *    unused: a shared registry never removes a family or a series (another
 *    process may hold its handle), and a process's leftovers are dropped;
 *  - identity: a family or series a process registers that another one
 *    already wrote is *adopted*: the family is mapped to its entry, the
 *    series gets the existing storage (pcpu__tree_adopt_series, called by
 *    the registry before it would allocate) -- one series for the tree.
 *
 * A process killed while it holds the lock: the next taker repairs what it
 * left half done (repair(), below) before going on. An entry being written
 * has an odd sequence number: it is cleared (a registration that never
 * completed; its storage, if any, leaks). The header's generation, odd
 * while a change is in progress, is made even.
 */
#include <errno.h>
#include <string.h>

#include "segment_internal.h"
#include "writer.h"

/* The tree's lock holder died: its change is undone or completed. */
static void repair(void *ctx)
{
	struct pcpu_segment *seg = ctx;
	uint64_t used = __atomic_load_n(&seg->hdr->entries_used, __ATOMIC_ACQUIRE), i;
	uint64_t g = __atomic_load_n(&seg->hdr->generation, __ATOMIC_RELAXED);

	for (i = 0; i < used && i < seg->entries_cap; i++) {
		struct pcpu__seg_entry *e = &seg->entries[i];
		uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

		if (s & 1) {
			struct pcpu__seg_entry z;

			memset(&z, 0, sizeof z);
			z.seq = s + 1; /* even: a free entry, its sequence grown */
			memcpy((char *)e + sizeof z.seq, (char *)&z + sizeof z.seq,
			       sizeof z - sizeof z.seq);
			__atomic_store_n(&e->seq, z.seq, __ATOMIC_RELEASE);
		}
	}
	if (g & 1)
		__atomic_store_n(&seg->hdr->generation, g + 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&seg->tree->repairs, 1, __ATOMIC_RELAXED);
}

int pcpu__tree_setup(struct pcpu_segment *seg)
{
	struct pcpu__seg_tree *t = (struct pcpu__seg_tree *)(seg->map + PCPU__SEG_TREE_OFFSET);

	_Static_assert(PCPU__SEG_TREE_OFFSET >= sizeof(struct pcpu__seg_header) &&
			       PCPU__SEG_TREE_OFFSET + sizeof(struct pcpu__seg_tree) <=
				       PCPU__SEG_HEADER_REGION,
		       "the tree's state lies in the header's page, after the header");
	if (pcpu__zone_tree_init(&t->zone) != 0)
		return pcpu__seg_fail(errno, "process-shared robust mutexes: %s", strerror(errno));
	t->next_family_id = seg->next_family_id;
	t->next_serial = seg->next_serial;
	t->repairs = 0;
	if (pcpu__zone_make_tree(pcpu_registry_zone(seg->reg), &t->zone, repair, seg) != 0)
		return pcpu__seg_fail(errno, "sharing the registry's zone: %s", strerror(errno));
	memcpy(t->magic, PCPU__SEG_TREE_MAGIC, sizeof t->magic);
	seg->tree = t;
	__atomic_or_fetch(&seg->hdr->flags, PCPU__SEG_F_TREE, __ATOMIC_RELEASE);
	return 0;
}

int pcpu__tree_enter(struct pcpu_segment *seg)
{
	struct pcpu__seg_tree *t = seg->tree;
	unsigned c;

	if (pcpu__zone_tree_lock(pcpu_registry_zone(seg->reg)) != 0)
		return -1;
	seg->entries_used = __atomic_load_n(&seg->hdr->entries_used, __ATOMIC_ACQUIRE);
	seg->strings_used = __atomic_load_n(&seg->hdr->strings_used, __ATOMIC_ACQUIRE);
	seg->nfamilies = __atomic_load_n(&seg->hdr->nfamilies, __ATOMIC_RELAXED);
	seg->nseries = __atomic_load_n(&seg->hdr->nseries, __ATOMIC_RELAXED);
	seg->next_family_id = t->next_family_id;
	seg->next_serial = t->next_serial;
	/* Never reused here: another process may have taken them meanwhile
	 * (the lists were copied by fork()). */
	seg->free_entries.n = 0;
	for (c = 0; c < BLOB_CLASSES; c++)
		seg->free_blobs[c].n = 0;
	return 0;
}

void pcpu__tree_leave(struct pcpu_segment *seg)
{
	struct pcpu__seg_tree *t = seg->tree;

	/* The high-water marks are in the header already (the directory
	 * publishes them as it writes). */
	t->next_family_id = seg->next_family_id;
	t->next_serial = seg->next_serial;
	pcpu__zone_tree_unlock(pcpu_registry_zone(seg->reg));
}

void *pcpu__tree_adopt_series(void *ctx, struct pcpu_family *f, const char *const *v)
{
	struct pcpu_segment *seg = ctx;
	struct pcpu__family_view fv;
	struct pcpu__seg_entry e;
	int64_t fidx, idx;
	void *obj;

	seg->adopted = 0;
	if (!seg->tree || seg->detached)
		return NULL;
	pcpu__family_view(f, &fv);
	if (pcpu__tree_enter(seg) != 0)
		return NULL;
	fidx = pcpu__directory_family_entry(seg, f);
	idx = fidx < 0 ? -1 : pcpu__directory_find_series(seg, (uint64_t)fidx, v, fv.nlabels);
	obj = NULL;
	if (idx >= 0 && seg->entries[idx].kind == PCPU__SEG_GROUP_SERIES) {
		/* A group member: the group's lanes, where its GROUP entry
		 * says (the members' entries are matched as they are added:
		 * directory.c). */
		e = seg->entries[idx];
		if (e.value_off < seg->entries_used) {
			struct pcpu__seg_entry ge = seg->entries[e.value_off];

			if (ge.kind == PCPU__SEG_GROUP && !(ge.seq & 1) && ge.value_off != 0 &&
			    ge.u32a == fv.group_members)
				obj = pcpu__zone_tree_adopt(pcpu_registry_zone(seg->reg), ge.u32b,
							    ge.value_off,
							    pcpu__registry_tree_group_size(seg->reg, ge.u32a));
		}
	} else if (idx >= 0) {
		e = seg->entries[idx];
		obj = pcpu__zone_tree_adopt(pcpu_registry_zone(seg->reg), e.u32a, e.value_off, e.u32b);
		if (obj) {
			seg->adopted = 1;
			seg->adopted_chunk = e.u32a;
			seg->adopted_off = e.value_off;
			seg->adopted_idx = (uint64_t)idx;
		}
	}
	pcpu__tree_leave(seg);
	return obj;
}
