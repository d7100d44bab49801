/* SPDX-License-Identifier: MIT */
/*
 * The segment writer's state (struct pcpu_segment), shared by writer.c
 * (publication, fork, life cycle) and directory.c (the directory entries
 * and blobs written per registry event). Not installed.
 */
#ifndef PCPU_SEGMENT_WRITER_H
#define PCPU_SEGMENT_WRITER_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <pcpu/segment.h>

#include "../stats/stats.h"
#include "../core/core.h"
#include "backing.h"
#include "format.h"

/* Blob size classes: 2^6 .. 2^17 bytes. */
#define BLOB_MIN_SHIFT 6
#define BLOB_CLASSES (17 - BLOB_MIN_SHIFT + 1)

struct u64vec {
	uint64_t *v;
	size_t n, cap;
};

/* A segment shared by a process tree (PCPU_SEGMENT_SHARED_TREE): the
 * writers' common state, in the header's page at PCPU__SEG_TREE_OFFSET.
 * Everything here, and every change of the directory, is under the zone
 * tree's lock (src/core/core.h), which every process of the tree takes. */
struct pcpu__seg_tree {
	char magic[8];                  /* "PCPUTREE" */
	uint64_t next_family_id, next_serial;
	uint64_t repairs;               /* directory changes a dead writer left half done */
	/* Held while a collection rewrites the GROUP entries' copies (not
	 * the tree's lock: tree.c). Process-shared, robust, error-checking. */
	pthread_mutex_t collect_lock;
	struct pcpu_zone_tree zone;     /* the frontier and the lock */
};
#define PCPU__SEG_TREE_MAGIC "PCPUTREE"

struct pcpu_segment {
	struct pcpu_registry *reg;
	pid_t pid;
	int fd, dirfd;
	char file[96];
	char *path;
	int published;
	int detached; /* in a fork() child: the file is the parent's (see top) */
	struct pcpu_segment *next_seg, *prev_seg; /* every segment of the process */

	char *map; /* [0, data_offset): header, entries, strings; RW shared */
	size_t map_len;
	struct pcpu__seg_header *hdr;
	struct pcpu__seg_entry *entries;
	char *strings;
	uint64_t entries_cap, strings_cap, data_offset, chunk_span;

	/* Chunks of the zone: chunk_base[no] (0 until known). Written by
	 * on_chunk() under the zone's lock, read by the hook. */
	pthread_mutex_t chunk_lock;
	uintptr_t *chunk_base;
	size_t nchunks, chunk_cap;

	/* Directory bookkeeping, under the registry's lock. */
	uint64_t entries_used, strings_used;
	uint64_t entries_backed, strings_backed; /* bytes allocated in the file (pages) */
	struct u64vec free_entries;
	struct u64vec free_blobs[BLOB_CLASSES];
	struct pcpu__htab families, series; /* object -> its entry (map_*() below) */
	/* 2.3 groups: gseries -> its GROUP entry, and -> how many member
	 * series entries still refer to it */
	struct pcpu__htab groups, group_refs;
	uint64_t next_family_id, next_serial;
	uint64_t nfamilies, nseries;

	/* A shared registry's segment (tree.c): its shared state (NULL:
	 * an ordinary segment, which a fork() child leaves), and the series
	 * pcpu__tree_adopt_series() found last (its value's place and its
	 * entry), which the next SERIES_ADDED maps instead of writing a new
	 * entry. */
	struct pcpu__seg_tree *tree;
	int tree_wrlock; /* this process took the tree's member lock (a write lock) */
	/* Every live family and series entry below tree_indexed, by name or
	 * by family and label values (key: entry + 1): a tree never frees an
	 * entry, so what another process wrote is indexed once, as this one
	 * first looks past it (directory.c). */
	struct pcpu__htab tree_index;
	uint64_t tree_indexed;
	/* The GROUP entries below tree_groups_scanned, which a collection
	 * refreshes (directory.c): entries never move in a tree. */
	struct u64vec tree_groups;
	uint64_t tree_groups_scanned;
	int adopted;               /* adopted_* below are set */
	uint32_t adopted_chunk;
	uint64_t adopted_off, adopted_idx;
};

/* ---- directory.c: the directory, written per registry event ---- */

/* Around every change: the header's generation odd while changing. */
PCPU_HIDDEN void pcpu__directory_begin(struct pcpu_segment *seg);
PCPU_HIDDEN void pcpu__directory_end(struct pcpu_segment *seg);
/* The zone's no-space callback (ctx: the segment): counted and marked. */
PCPU_HIDDEN void pcpu__directory_on_nospace(void *ctx, int err);
/* The registry's events (registry_observer.h), under its lock. */
/* FAMILY_ADDED and SERIES_ADDED: 0, or -1 with errno and the registry's
 * message when a tree's directory cannot record the change (the
 * registration is then undone: registry_observer.h); an ordinary segment
 * counts what it cannot record as dropped and returns 0. */
PCPU_HIDDEN int pcpu__directory_family_added(struct pcpu_segment *seg, struct pcpu_family *f);
PCPU_HIDDEN void pcpu__directory_family_removing(struct pcpu_segment *seg, struct pcpu_family *f);
PCPU_HIDDEN int pcpu__directory_series_added(struct pcpu_segment *seg, struct pcpu_family *f,
					     struct pcpu__series *se);
PCPU_HIDDEN void pcpu__directory_series_removing(struct pcpu_segment *seg,
						 const struct pcpu_family *f,
						 struct pcpu__series *se);
PCPU_HIDDEN void pcpu__directory_groups_read(struct pcpu_segment *seg);
/* Tree segments, under the collect lock (not the tree's): every GROUP
 * entry's copy rewritten from its group's lanes, whichever process made
 * it. Reads the shared directory without the tree's lock. */
PCPU_HIDDEN void pcpu__directory_tree_groups_read(struct pcpu_segment *seg);

/* ---- tree_index.c: a tree segment's index of its shared directory ---- */

/* Entry i, if it is a live series (a group member's included): 1 with a
 * copy in *e, else 0. */
PCPU_HIDDEN int pcpu__tree_live_series(struct pcpu_segment *seg, uint64_t i, struct pcpu__seg_entry *e);
/* Tree segments: the live entry of the family named `name` with these
 * label names (nlabels UINT_MAX: with any), or -1. */
PCPU_HIDDEN int64_t pcpu__directory_find_family(struct pcpu_segment *seg, const char *name,
						unsigned nlabels, char *const *labels);
/* Tree segments: whether family entry `i` describes what the view does
 * but for its label names (another label set of the name). */
PCPU_HIDDEN int pcpu__directory_same_metric(struct pcpu_segment *seg, uint64_t i,
					    const struct pcpu__family_view *v);
/* Tree segments, before a new series of the family `fv` with label values
 * `v` is allocated: whether the directory can record it (its entries and
 * blobs fit, their pages allocated in the file). 0, or -1 with errno
 * ENOSPC (or E2BIG) and the registry's message. */
PCPU_HIDDEN int pcpu__directory_series_room(struct pcpu_segment *seg,
					    const struct pcpu__family_view *fv, const char *const *v);
/* Tree segments: the live series entry of family entry `fidx` with label
 * values `v` (n of them), or -1. */
PCPU_HIDDEN int64_t pcpu__directory_find_series(struct pcpu_segment *seg, uint64_t fidx,
						const char *const *v, unsigned n);
/* Bytes per slot region of a value of family f in the directory (format.h:
 * a counter's or gauge's word, two with fractions, a histogram's pairs). */
PCPU_HIDDEN uint32_t pcpu__seg_value_size(const struct pcpu__family_view *f);
/* The entry of f in seg->families, or -1. */
PCPU_HIDDEN int64_t pcpu__directory_family_entry(struct pcpu_segment *seg,
						 const struct pcpu_family *f);

/* ---- writer.c, for join.c: a segment's life in this process ---- */

/* The registry observer of a published segment (registry_observer.h). */
PCPU_HIDDEN int pcpu__segment_hook(void *ctx, enum pcpu__registry_event ev, struct pcpu_family *f,
				   struct pcpu__series *se);
/* The zone's report of each chunk it has and gets (backing.h). */
PCPU_HIDDEN void pcpu__segment_on_chunk(void *ctx, unsigned no, char *base, uint64_t file_off);
/* Registers the fork() handlers of every segment of the process (once). 0,
 * or -1 with errno ENOMEM. */
PCPU_HIDDEN int pcpu__segment_fork_register(void);
/* Adds a new segment to the process's list (fork() handlers) / frees one
 * that never got there or was taken off it (its maps, descriptors, books). */
PCPU_HIDDEN void pcpu__segment_link(struct pcpu_segment *seg);
PCPU_HIDDEN void pcpu__segment_free(struct pcpu_segment *seg);
/* Removes the segment's file name if it is still this segment's file. */
PCPU_HIDDEN void pcpu__segment_unlink_if_ours(struct pcpu_segment *seg);

/* ---- tree.c: a segment shared by a process tree ---- */

/* A count of the shared header (entries_used, strings_used) as a process
 * of the tree may use it: bounded by the capacity it knows, fixed at
 * publication (tree.c, "Trust"). */
static inline uint64_t pcpu__tree_count(const uint64_t *shared, uint64_t cap)
{
	uint64_t v = __atomic_load_n(shared, __ATOMIC_ACQUIRE);

	return v < cap ? v : cap;
}

/* At publication with PCPU_SEGMENT_SHARED_TREE, under the registry's lock,
 * the zone attached: sets up the shared state and makes the zone a tree
 * zone. 0, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__tree_setup(struct pcpu_segment *seg);
/* At publication with PCPU_SEGMENT_SHARED_TREE, before the file is named:
 * takes the tree's member lock (format.h). 0 (also where the kernel has no
 * OFD locks: seg->tree_wrlock stays 0), or -1 with errno (EBUSY: another
 * process holds a lock on the file) and a message. */
PCPU_HIDDEN int pcpu__tree_member_lock(struct pcpu_segment *seg);
/* Around every directory change of a tree segment: takes the tree's lock
 * and reads the directory's shared bookkeeping into seg; pcpu__tree_leave
 * writes it back and unlocks. Enter: 0, or -1 with errno (the lock). */
PCPU_HIDDEN int pcpu__tree_enter(struct pcpu_segment *seg);
PCPU_HIDDEN void pcpu__tree_leave(struct pcpu_segment *seg);
/* pcpu_segment_join() (join.c), under the registry's lock, the segment's
 * header and directory mapped: the zone made one of the tree's over the
 * file (its chunks reported to on_chunk), seg->tree set. 0, or -1 with
 * errno and a message. */
PCPU_HIDDEN int pcpu__tree_join(struct pcpu_segment *seg, pcpu_file_chunk_fn *on_chunk);
/* The registry's adopt callback (registry_observer.h). */
PCPU_HIDDEN int pcpu__tree_adopt_series(void *ctx, struct pcpu_family *f, const char *const *v,
					void **at);
/* A collection's GROUPS_READ: the GROUP entries' copies refreshed under
 * the collect lock, if no other collection holds it (never waits). */
PCPU_HIDDEN void pcpu__tree_collect(struct pcpu_segment *seg);

#endif /* PCPU_SEGMENT_WRITER_H */
