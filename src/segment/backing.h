/* SPDX-License-Identifier: MIT */
/*
 * The statistics segment's file as a zone's backing (backing.c): the
 * file-specific policy the zone does not know -- sizing and mapping the
 * file, allocating its pages before they are written (a full tmpfs answers
 * a write fault with SIGBUS), telling the segment when there is no space.
 * Nothing here is exported.
 */
#ifndef PCPU_SEGMENT_BACKING_H
#define PCPU_SEGMENT_BACKING_H

#include <pcpu/zone.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"

/* Advises the kernel not to back [p, p + len) with transparent huge pages:
 * the segment's mappings (its header and directory, the zone's chunks) are
 * written sparsely, and a huge page would allocate 2 MiB of the file for a
 * few words. errno kept; a kernel without THP refuses the advice (EINVAL),
 * and then there is nothing to avoid. (The zone advises its own private
 * chunks the same way, src/core/zone_shared.c.) */
PCPU_HIDDEN void pcpu__seg_no_huge_pages(void *p, size_t len);

/* Called for every chunk the zone has and gets: its number, its address,
 * and its offset in the file. Under the zone's lock. */
typedef void pcpu_file_chunk_fn(void *ctx, unsigned chunk_no, char *base, uint64_t file_off);

/* Told (under the zone's lock) when a reserved zone could not allocate its
 * file's pages for an object or a chunk: err is ENOSPC, ENOMEM, EFBIG...
 * The allocation then fails with that errno. */
typedef void pcpu_file_nospace_fn(void *ctx, int err);

/* What a backing does about the file's pages (pcpu__file_backing_attach). */
enum pcpu_file_reserve {
	/* Nothing: pages are allocated as they are first written (a full
	 * file system answers that write with SIGBUS). */
	PCPU_FILE_SPARSE = 0,
	/* Allocated under every object before it is handed out; a refused
	 * allocation gives back what it took. */
	PCPU_FILE_RESERVE = 1,
	/* The same, for a file that a process tree shares
	 * (PCPU_SEGMENT_SHARED_TREE): a refused allocation gives nothing
	 * back, since another process may live above what this one
	 * reserved. */
	PCPU_FILE_RESERVE_SHARED = 2,
};

/* Moves a zone with no live object into file `fd`: chunk i becomes a
 * MAP_SHARED mapping of the file at file_base + i * chunk span, now and
 * for every chunk it grows (the file is sized as needed). With `reserve`
 * not PCPU_FILE_SPARSE,
 * the file's pages under every object are allocated (through the mapping,
 * else fallocate) in every region, slots and mirrors, before the object is
 * handed out, so that no write through the mapping can fault for lack of
 * space: allocation then fails cleanly with ENOSPC (on_nospace(ctx, err) is
 * called), and freed memory stays allocated in the file for reuse. Cost: a
 * page in each of the 2 * nslots regions per page of slot 0 holding
 * objects. The fd stays the caller's (open for as long as the zone is
 * shared). Returns 0, or -1 with errno EBUSY (live objects, or already
 * shared), EINVAL, ENOMEM, or what ftruncate/mmap/fallocate said; on
 * failure the zone stays private and usable. A fork() child leaves the
 * file (zone.c). The file is grown under `grow_lock` (pcpu__file_grow();
 * NULL: no other grower). Thread-safe. */
PCPU_HIDDEN int pcpu__file_backing_attach(pcpu_zone_t *zone, int fd, uint64_t file_base,
					  pcpu_file_chunk_fn *on_chunk,
					  pcpu_file_nospace_fn *on_nospace, void *ctx,
					  enum pcpu_file_reserve reserve,
					  pthread_mutex_t *grow_lock);

/* Grows file `fd` to `end` bytes if it is shorter, never shrinking it:
 * checking the size and truncating are two calls, so every grower of one
 * file holds `lock` around them (the zone's chunks, backing.c; flows
 * tables, flows.c: without it a chunk's growth that read the size before
 * a table's could cut the table off, and its next add raise SIGBUS).
 * NULL: the caller is the file's only grower. RLIMIT_FSIZE is checked
 * first (EFBIG, never SIGXFSZ). 0, or -1 with errno. The lock is a leaf:
 * nothing is taken under it. */
PCPU_HIDDEN int pcpu__file_grow(int fd, uint64_t end, pthread_mutex_t *lock);

/* pcpu__file_backing_attach() with PCPU_FILE_RESERVE_SHARED for a new zone
 * joining the process tree that shares file `fd` (pcpu_segment_join()):
 * the file's chunk 0, as it is, becomes the zone's, and `tree` (the
 * tree's shared zone state, in the file) its allocator; `repair` as for
 * pcpu__zone_make_tree() (src/core/core.h, pcpu__zone_join_tree). 0, or -1
 * with errno (EBUSY, EINVAL, ENOMEM, the mapping's); on failure the zone
 * stays private and usable. Thread-safe. */
PCPU_HIDDEN int pcpu__file_backing_join(pcpu_zone_t *zone, int fd, uint64_t file_base,
					pcpu_file_chunk_fn *on_chunk,
					pcpu_file_nospace_fn *on_nospace, void *ctx,
					struct pcpu_zone_tree *tree, void (*repair)(void *ctx),
					void *repair_ctx);

/* Allocates `len` bytes of file `fd` at `off`, mapped (MAP_SHARED) at p,
 * without changing their contents: write-faults them in through the
 * mapping where the kernel can (MADV_POPULATE_WRITE), so that the mapping's
 * MADV_NOHUGEPAGE holds on a tmpfs that hands out huge pages; else
 * fallocate(), keeping the size (zeros written where fallocate is not
 * supported). 0, or -1 with errno (ENOSPC, ENOMEM, EFBIG...). */
PCPU_HIDDEN int pcpu_file_allocate_mapped(int fd, char *p, uint64_t off, size_t len);

#endif /* PCPU_SEGMENT_BACKING_H */
