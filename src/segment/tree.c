/* SPDX-License-Identifier: MIT */
/*
 * A segment shared by a process tree (PCPU_SEGMENT_SHARED_TREE,
 * pcpu/segment.h): the registry of a pre-fork server, which its master
 * publishes before it forks and every worker writes.
 *
 * What is shared, and how:
 *  - the values: the registry's zone is a tree zone (src/core/zone_tree.c), so a
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
 *    process may hold its handle), and a process's leftovers are dropped.
 *    Entries are only appended, each written whole before the count of
 *    entries says it exists, and never written again -- but for GROUP
 *    entries' copies of their group's values, which collections rewrite,
 *    and for a series entry relabelled (pcpu_family_relabel()): rewritten
 *    in place under the tree's lock, its sequence odd meanwhile, the new
 *    label values appended to the strings, the tree's count of relabels
 *    bumped. At its next registration, lookup or collection, each process
 *    seeing that count change indexes the directory anew (tree_index.c)
 *    and drops the series it holds whose entry no longer carries their
 *    labels (registry_series.c), so that a lookup finds what the tree has
 *    now;
 *  - identity: a family or series a process registers that another one
 *    already wrote is *adopted*: the family is mapped to its entry, the
 *    series gets the existing storage (pcpu__tree_adopt_series, called by
 *    the registry before it would allocate) -- one series for the tree. So
 *    a registration the directory cannot record is refused (ENOSPC), before
 *    anything is allocated: made anyway, a second process would make it a
 *    second time;
 *  - collections (pcpu__tree_collect): every process's collection rewrites
 *    the GROUP entries' copies from the groups' lanes, under a second
 *    lock, the *collect lock*, taken with a try: a collection never waits
 *    for a registration, nor for another collection (which refreshes the
 *    same copies). Reads of the tree never take the tree's lock.
 *
 * A process killed while it holds the tree's lock: the next taker repairs
 * what it left half done (repair(), below) before going on. The entry it
 * was writing lies past the published count, its sequence odd: it is made
 * a free entry with an even sequence, so that the next entry written there
 * is whole (left odd, the next writer's entry would have stayed odd, unseen
 * by every process and reader). The header's generation, odd while a change
 * is in progress, is made even. A registration that never completed is
 * thereby forgotten (its storage, if any, leaks). A collector killed while
 * it holds the collect lock leaves a GROUP entry odd; the next collection
 * rewrites it.
 *
 * Trust: every process of the tree reads what every other wrote, and a
 * buggy one may have written anything. Counts and indexes read from the
 * shared header and entries are bounded by the capacities this process
 * knows (the file's layout, fixed at publication) before they index
 * anything, as the outside reader bounds them: a corrupt directory may
 * cost statistics, never a crash.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../core/core.h"
#include "backing.h"
#include "segment_internal.h"
#include "writer.h"

/* The entries a dead holder of the tree's lock may have left odd, from the
 * published count on, read with pread(): past the count, pages may be
 * holes of the file, which a read through the mapping would allocate. */
static void repair_unpublished(struct pcpu_segment *seg, uint64_t used)
{
	uint64_t i;

	for (i = used; i < seg->entries_cap; i++) {
		uint64_t s;
		off_t at = (off_t)(PCPU__SEG_HEADER_REGION + i * PCPU__SEG_ENTRY_SIZE);

		if (pread(seg->fd, &s, sizeof s, at) != (ssize_t)sizeof s || s == 0)
			break; /* never written: nothing further was */
		if (s & 1) {
			struct pcpu__seg_entry z;

			memset(&z, 0, sizeof z);
			memcpy((char *)&seg->entries[i] + sizeof z.seq, (char *)&z + sizeof z.seq,
			       sizeof z - sizeof z.seq);
			__atomic_store_n(&seg->entries[i].seq, s + 1, __ATOMIC_RELEASE);
		}
	}
}

/* The tree's lock holder died: its change is undone or completed. */
static void repair(void *ctx)
{
	struct pcpu_segment *seg = ctx;
	uint64_t used = __atomic_load_n(&seg->hdr->entries_used, __ATOMIC_ACQUIRE), i;
	uint64_t g = __atomic_load_n(&seg->hdr->generation, __ATOMIC_RELAXED);
	int freed = 0;

	if (used > seg->entries_cap)
		used = seg->entries_cap;
	repair_unpublished(seg, used);
	/* Below the count an entry is odd only if its writer published it
	 * before it was whole, which this writer never does, if a
	 * relabelling (pcpu_family_relabel()) was killed while it rewrote
	 * the entry, or if a worker scribbled there: made free, so readers of the tree see a stable
	 * directory. GROUP entries are the collect lock's (see the top). */
	for (i = 0; i < used; i++) {
		struct pcpu__seg_entry *e = &seg->entries[i];
		uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

		if ((s & 1) && e->kind != PCPU__SEG_GROUP) {
			freed = 1;
			struct pcpu__seg_entry z;

			memset(&z, 0, sizeof z);
			memcpy((char *)e + sizeof z.seq, (char *)&z + sizeof z.seq,
			       sizeof z - sizeof z.seq);
			__atomic_store_n(&e->seq, s + 1, __ATOMIC_RELEASE);
		}
	}
	if (g & 1)
		__atomic_store_n(&seg->hdr->generation, g + 1, __ATOMIC_RELEASE);
	/* A published entry made free (a relabelling killed mid-write,
	 * pcpu_family_relabel()): the processes that hold its series drop it,
	 * as after a relabelling. */
	if (freed)
		__atomic_add_fetch(&seg->tree->relabels, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&seg->tree->repairs, 1, __ATOMIC_RELAXED);
}

int pcpu__tree_member_lock(struct pcpu_segment *seg)
{
	/* The tree lives while any of its processes does: each holds these
	 * locks through the descriptor every fork() child inherits
	 * (format.h): a read lock on byte 0 and a write lock on a member
	 * byte, taken before the file has a name where the file system has
	 * O_TMPFILE. */
	if (pcpu__seg_tree_member_join(seg->fd) == 0) {
		seg->tree_wrlock = 1;
		return 0;
	}
	/* Without OFD locks (Linux before 3.15) readers judge by the
	 * publisher's pid alone, and say they cannot tell once it is gone. */
	if (errno == EINVAL)
		return 0;
	/* Held by another process (a file system without O_TMPFILE names
	 * the file at once): readers could not tell the tree from it. */
	return pcpu__seg_fail(errno == EAGAIN || errno == EACCES ? EBUSY : errno,
			      "the shared registry's member lock on \"%.300s\": %s", seg->path,
			      errno == EAGAIN || errno == EACCES ? "held by another process" : strerror(errno));
}

int pcpu__tree_setup(struct pcpu_segment *seg)
{
	struct pcpu__seg_tree *t = (struct pcpu__seg_tree *)(seg->map + PCPU__SEG_TREE_OFFSET);
	int err;

	_Static_assert(PCPU__SEG_TREE_OFFSET >= sizeof(struct pcpu__seg_header) &&
			       PCPU__SEG_TREE_OFFSET + sizeof(struct pcpu__seg_tree) <=
				       PCPU__SEG_HEADER_REGION,
		       "the tree's state lies in the header's page, after the header");
	if (pcpu__zone_tree_init(&t->zone) != 0)
		return pcpu__seg_fail(errno, "process-shared robust mutexes: %s", strerror(errno));
	if ((err = pcpu__shared_mutex_init(&t->collect_lock, PTHREAD_MUTEX_ERRORCHECK)) != 0)
		return pcpu__seg_fail(err, "process-shared robust mutexes: %s", strerror(err));
	t->next_family_id = seg->next_family_id;
	t->next_serial = seg->next_serial;
	t->repairs = 0;
	if (pcpu__zone_make_tree(pcpu_registry_zone(seg->reg), &t->zone, repair, seg) != 0)
		return pcpu__seg_fail(errno, "sharing the registry's zone: %s", strerror(errno));
	memcpy(t->magic, PCPU__SEG_TREE_MAGIC, sizeof t->magic);
	seg->tree = t;
	pcpu__tree_relog_setup(seg);
	/* The member lock (pcpu__tree_member_lock()) is held already when
	 * seg->tree_wrlock says so. */
	__atomic_or_fetch(&seg->hdr->flags, PCPU__SEG_F_TREE | (seg->tree_wrlock ? PCPU__SEG_F_TREE_WRLOCK : 0),
			  __ATOMIC_RELEASE);
	return 0;
}

/* pcpu_segment_join() (join.c): the tree's shared state as its processes
 * left it, the zone made one of the tree's over the file (zone_join.c). */
int pcpu__tree_join(struct pcpu_segment *seg, pcpu_file_chunk_fn *on_chunk)
{
	struct pcpu__seg_tree *t = (struct pcpu__seg_tree *)(seg->map + PCPU__SEG_TREE_OFFSET);

	if (memcmp(t->magic, PCPU__SEG_TREE_MAGIC, sizeof t->magic) != 0)
		return pcpu__seg_fail(EBADMSG, "\"%.300s\": no shared registry's state in it",
				      seg->path);
	if (pcpu__file_backing_join(pcpu_registry_zone(seg->reg), seg->fd, seg->data_offset, on_chunk,
				    pcpu__directory_on_nospace, seg, &t->zone, repair, seg) != 0)
		return pcpu__seg_fail(errno, "joining the shared registry \"%.300s\": %s", seg->path,
				      errno == EBUSY ? "the registry already has series (join right "
						       "after pcpu_registry_create())"
						     : strerror(errno));
	seg->tree = t;
	return 0;
}

int pcpu__tree_enter(struct pcpu_segment *seg)
{
	struct pcpu__seg_tree *t = seg->tree;
	uint64_t r, h;
	unsigned c;

	if (pcpu__zone_tree_lock(pcpu_registry_zone(seg->reg)) != 0)
		return -1;
	seg->entries_used = pcpu__tree_count(&seg->hdr->entries_used, seg->entries_cap);
	seg->strings_used = pcpu__tree_count(&seg->hdr->strings_used, seg->strings_cap);
	seg->nfamilies = __atomic_load_n(&seg->hdr->nfamilies, __ATOMIC_RELAXED);
	seg->nseries = __atomic_load_n(&seg->hdr->nseries, __ATOMIC_RELAXED);
	seg->next_family_id = t->next_family_id;
	seg->next_serial = t->next_serial;
	/* Never reused here: another process may have taken them meanwhile
	 * (the lists were copied by fork()). */
	seg->free_entries.n = 0;
	for (c = 0; c < BLOB_CLASSES; c++)
		seg->free_blobs[c].n = 0;
	/* What this process indexed may have been overwritten by a writer
	 * that trusted a lowered count: indexed again from there. */
	if (seg->tree_indexed > seg->entries_used)
		seg->tree_indexed = seg->entries_used;
	/* Series entries rewritten in place (relabelled, or freed by a
	 * repair) since this process indexed them: their old labels' hashes
	 * would miss their new labels. Followed entry by entry where the
	 * relabel log holds them all (tree_relog.c), else indexed anew, in
	 * O(entries), once per change. */
	r = __atomic_load_n(&t->relabels, __ATOMIC_ACQUIRE);
	h = __atomic_load_n(&t->relog_head, __ATOMIC_ACQUIRE);
	pcpu__tree_index_sync(seg, r, h, 0);
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

int pcpu__tree_adopt_series(void *ctx, struct pcpu_family *f, const char *const *v, void **at)
{
	struct pcpu_segment *seg = ctx;
	struct pcpu__family_view fv;
	struct pcpu__seg_entry e;
	int64_t fidx, idx;
	void *obj = NULL;
	int rc = 0;

	*at = NULL;
	seg->adopted = 0;
	if (!seg->tree || seg->detached)
		return 0;
	pcpu__family_view(f, &fv);
	if (pcpu__tree_enter(seg) != 0)
		return pcpu__error_set(PCPU_ERROR_STATS, errno,
				       "the shared registry's lock: %s", strerror(errno));
	fidx = pcpu__directory_family_entry(seg, f);
	if (fidx < 0) {
		/* Its family never made it into the directory: no process
		 * could find this series (the family's registration stood
		 * only where the directory was not the tree's). */
		rc = pcpu__error_set(PCPU_ERROR_STATS, ENOSPC,
				     "family \"%.64s\" is not in the shared registry's directory",
				     fv.name);
		goto out;
	}
	idx = pcpu__directory_find_series(seg, (uint64_t)fidx, v, fv.nlabels);
	if (idx >= 0 && seg->entries[idx].kind == PCPU__SEG_GROUP_SERIES) {
		/* A group member: the group's lanes, where its GROUP entry
		 * says (the members' entries are matched as they are added:
		 * directory.c). Its sequence is not looked at: a collection
		 * rewrites its copy of the values now and then, without the
		 * tree's lock, and leaves it odd if killed there; what is read
		 * here -- kind, size, where the lanes are -- never changes once
		 * the entry is published. (Requiring it even made a second
		 * group for the same labels in such a window.) */
		e = seg->entries[idx];
		if (e.value_off < seg->entries_used) {
			/* Field by field: seq and the copy are the collector's. */
			const struct pcpu__seg_entry *ge = &seg->entries[e.value_off];
			uint32_t members = ge->u32a, chunk = ge->u32b;
			uint64_t lanes = ge->value_off;

			if (ge->kind == PCPU__SEG_GROUP && lanes != 0 && members == fv.group_members)
				obj = pcpu__zone_tree_adopt(pcpu_registry_zone(seg->reg), chunk, lanes,
							    pcpu__registry_tree_group_size(seg->reg, members));
		}
	} else if (idx >= 0) {
		e = seg->entries[idx];
		if (fv.sparse) {
			/* 2.10: its table of groups, in the strings (format.h);
			 * the histogram finds the groups there. */
			if (e.u32a != 0 || e.u32b != pcpu__seg_sparse_table_size(&fv) ||
			    e.value_off % 8 || e.value_off > seg->strings_cap ||
			    e.u32b > seg->strings_cap - e.value_off)
				errno = EIO; /* scribbled on: never written over */
			else
				obj = seg->strings + e.value_off;
		} else if (pcpu_metric_type_info(fv.type)->value != PCPU_VALUE_BUCKETS &&
			   e.u32b != pcpu__seg_value_size(&fv))
			errno = EIO; /* not this family's size: never written over */
		else
			obj = pcpu__zone_tree_adopt(pcpu_registry_zone(seg->reg), e.u32a,
						    e.value_off, e.u32b);
		if (obj) {
			seg->adopted = 1;
			seg->adopted_chunk = e.u32a;
			seg->adopted_off = e.value_off;
			seg->adopted_idx = (uint64_t)idx;
		}
	}
	/* One the tree has but this process cannot use (its entry scribbled
	 * on, its chunk not mappable): refused, never made a second time. */
	if (!obj && idx >= 0)
		rc = pcpu__error_set(PCPU_ERROR_STATS, errno == ENOMEM ? ENOMEM : EIO,
				     "family \"%.64s\": the shared registry's entry of this series "
				     "cannot be used here (%s)", fv.name, strerror(errno));
	/* None: a new one, if the directory can record it. */
	else if (!obj)
		rc = pcpu__directory_series_room(seg, &fv, v);
out:
	pcpu__tree_leave(seg);
	*at = obj;
	return rc;
}

void pcpu__tree_collect(struct pcpu_segment *seg)
{
	pthread_mutex_t *m = &seg->tree->collect_lock;
	int err = pthread_mutex_trylock(m);

	/* EBUSY: another thread or process is rewriting the copies now; they
	 * are its to refresh (its read of the groups is as fresh as ours). */
	if (err == EOWNERDEAD && (err = pthread_mutex_consistent(m)) != 0)
		pthread_mutex_unlock(m); /* its odd copies: the next collection's */
	if (err != 0)
		return;
	pcpu__directory_tree_groups_read(seg);
	pthread_mutex_unlock(m);
}
