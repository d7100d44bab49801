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

#include "../stats/hashtab.h"
#include "../stats/registry_observer.h"
#include "format.h"

/* Blob size classes: 2^6 .. 2^17 bytes. */
#define BLOB_MIN_SHIFT 6
#define BLOB_CLASSES (17 - BLOB_MIN_SHIFT + 1)

struct u64vec {
	uint64_t *v;
	size_t n, cap;
};

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
};

/* ---- directory.c: the directory, written per registry event ---- */

/* Around every change: the header's generation odd while changing. */
PCPU_HIDDEN void pcpu__directory_begin(struct pcpu_segment *seg);
PCPU_HIDDEN void pcpu__directory_end(struct pcpu_segment *seg);
/* The zone's no-space callback (ctx: the segment): counted and marked. */
PCPU_HIDDEN void pcpu__directory_on_nospace(void *ctx, int err);
/* The registry's events (registry_observer.h), under its lock. */
PCPU_HIDDEN void pcpu__directory_family_added(struct pcpu_segment *seg, struct pcpu_family *f);
PCPU_HIDDEN void pcpu__directory_family_removing(struct pcpu_segment *seg, struct pcpu_family *f);
PCPU_HIDDEN void pcpu__directory_series_added(struct pcpu_segment *seg, struct pcpu_family *f,
					      struct pcpu__series *se);
PCPU_HIDDEN void pcpu__directory_series_removing(struct pcpu_segment *seg,
						 const struct pcpu_family *f,
						 struct pcpu__series *se);
PCPU_HIDDEN void pcpu__directory_groups_read(struct pcpu_segment *seg);

#endif /* PCPU_SEGMENT_WRITER_H */
