/* SPDX-License-Identifier: MIT */
/*
 * The zone's backing interface: how a zone's chunks can live in memory that
 * is shared with other processes, without the zone knowing what that memory
 * is. Nothing here is exported.
 *
 * A zone starts private (anonymous memory). A layer above it that wants
 * the zone's objects readable from outside (the statistics segment: a tmpfs
 * file, src/segment/backing.c) attaches a backing to a zone that has no
 * live object: from then on every chunk the zone has or grows is mapped by
 * the backing, and -- if the backing reserves -- the backing is asked to
 * make the memory under every new object safe to write before the object
 * is handed out, so that no write can ever fault for lack of space. What
 * happens when there is no space (counting, flags for readers) is the
 * backing's business: the zone only fails the allocation with the errno
 * the backing gave.
 *
 * Offsets are bytes from the start of a chunk: a chunk is `span` bytes,
 * 2 * nslots regions of PCPU_SLOT_STRIDE (every slot, then every slot's
 * mirror; pcpu/zone.h). Every operation is called under the zone's lock
 * (or before the chunk is visible, or in the zone's fork() handlers) and
 * must not call back into the zone.
 */
#ifndef PCPU_ZONE_BACKING_H
#define PCPU_ZONE_BACKING_H

#include <pcpu/zone.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "visibility.h"

/* How map() maps chunk `no`. */
enum pcpu_zone_map {
	/* Read-write and shared, over the chunk at `at` (MAP_FIXED): the
	 * zone's own mapping of an attached chunk. */
	PCPU_ZONE_MAP_SHARED = 0,
	/* Read-only and shared, anywhere (`at` NULL): in a fork() child,
	 * a view of the parent's live values (pcpu__zone_fork_parent_view). */
	PCPU_ZONE_MAP_VIEW = 1,
	/* Read-only and private, over the chunk at `at`, MAP_NORESERVE: a
	 * fork() child's last resort when it has no memory for a private
	 * copy. The zone makes writable what it writes (read-only, it is
	 * charged no commit where the kernel never overcommits). */
	PCPU_ZONE_MAP_PRIVATE = 2,
};

struct pcpu_zone_backing {
	/* Maps chunk `no` (`span` bytes) as `how` says; for SHARED, sizes
	 * the backing first if needed. Marks the mapping not to be backed by
	 * transparent huge pages (pcpu__no_huge_pages()). Returns the mapping,
	 * or NULL with errno (EFBIG, ENOSPC, ENOMEM...). */
	void *(*map)(void *ctx, unsigned no, void *at, size_t span, enum pcpu_zone_map how);

	/* NULL: the backing reserves nothing (its memory is allocated on
	 * first write, and a freed object's whole pages are given back).
	 * Else: makes [from, upto) of every region of chunk `no`, mapped at
	 * `base`, safe to write (no fault for lack of space), and keeps it
	 * so (the zone then zeroes freed objects without giving pages back).
	 * On failure the backing has done what it does when out of space
	 * (a process's own file gives back what it took of [from, upto); a
	 * file shared by a process tree keeps it, since `from` is this
	 * process's mark and another may live above it), and -1 with errno
	 * (ENOSPC, ENOMEM, EFBIG...). */
	int (*reserve)(void *ctx, unsigned no, char *base, size_t span, size_t from, size_t upto);

	/* With `reserve`: makes [0, upto) of region `region` of chunk `no`,
	 * mapped at `base`, safe to write, as `reserve` does for every
	 * region -- for an owned slot's region and its mirror, reserved when
	 * the slot is first claimed (pcpu/worker.h; `reserve` leaves
	 * unclaimed owned slots out). -1 with errno on failure. */
	int (*reserve_region)(void *ctx, unsigned no, char *base, uint32_t region, size_t upto);

	/* Chunk `no` is in use at `base` (mapped, header written): once per
	 * chunk when attached and when the zone grows. May be NULL. */
	void (*chunk_added)(void *ctx, unsigned no, char *base);

	/* The backing is sparse: the first extent at or after `off` of chunk
	 * `no` that may hold data, as [*data, *hole) (offsets in the chunk,
	 * *hole <= span). Returns 1 with the extent, 0 if nothing after
	 * `off` holds data (it all reads zero), -1 if it cannot tell (the
	 * caller then treats everything from `off` as data). */
	int (*extent)(void *ctx, unsigned no, size_t off, size_t span, size_t *data, size_t *hole);

	/* Reads `len` bytes at `off` of chunk `no` without allocating
	 * backing memory (a read fault on a hole of a shared mapping may).
	 * 0, or -1 if it could not read them all. */
	int (*read)(void *ctx, unsigned no, size_t off, void *buf, size_t len);

	/* The zone is done with `ctx` (destroyed, or the attach failed
	 * after it took it). May be NULL. */
	void (*release)(void *ctx);
};

/* Attaches `backing` (with its `ctx`) to a zone that has no live object:
 * every chunk it has is mapped by the backing (and its first page
 * reserved, if the backing reserves) and starts afresh from the backing's
 * zeros; every chunk it grows likewise. Returns 0 (the zone calls
 * backing->release(ctx) when destroyed), or -1 with errno EBUSY (live
 * objects, or a backing already attached), EINVAL, or the backing's; on
 * failure the zone stays private and usable and ctx is the caller's. A
 * fork() child leaves the backing: zone_shared.c's fork handlers give it a private
 * copy of every chunk at the same addresses. Thread-safe. */
PCPU_PRIVATE int pcpu__zone_attach_backing(pcpu_zone_t *zone,
					  const struct pcpu_zone_backing *backing, void *ctx);

/*
 * Zones shared by a process tree (a shared registry's: pcpu/segment.h,
 * PCPU_SEGMENT_SHARED_TREE). A backed zone normally belongs to one
 * process, and a fork() child leaves it. A tree zone stays with every
 * child: all the processes forked from its creator write the same chunks,
 * and all of them allocate from it. Their allocations are one bump
 * frontier in shared memory, under one process-shared lock, and are never
 * freed before the zone's creator destroys it: another process may hold
 * any object's address (its own mapping of the same chunk), so no process
 * can know an object is unused. Chunks made by one process are mapped by
 * the others when they first need them (an allocation, an adopted object).
 *
 * The lock is robust: a process killed while holding it leaves it to the
 * next taker, which runs the backing's repair callback before going on.
 */
struct pcpu_zone_tree {
	pthread_mutex_t lock; /* process-shared, robust, recursive */
	uint64_t nchunks;     /* chunks made (by any process) */
	uint64_t frontier;    /* granules handed out in chunk nchunks - 1 */
	uint64_t deaths;      /* lock holders that died holding it */
};

/* Initialises a process-shared, robust mutex of `type` at m (in shared
 * memory). 0, or an error number (a libc without robust process-shared
 * mutexes). */
PCPU_PRIVATE int pcpu__shared_mutex_init(pthread_mutex_t *m, int type);

/* Sets up `tree` in shared memory (zeroed): its lock. 0, or -1 with errno
 * (what pthread_mutexattr_* said: a libc without robust process-shared
 * mutexes). */
PCPU_PRIVATE int pcpu__zone_tree_init(struct pcpu_zone_tree *tree);

/* Makes a zone with a backing (pcpu__zone_attach_backing) and no live
 * object a tree zone over `tree` (which must outlive it, and whose
 * chunk 0 is the zone's first chunk). `repair(ctx)`, called with the lock
 * held when a taker finds its holder died, makes the backing's own shared
 * state consistent (the zone's is: it bumps the frontier before it hands
 * an object out, so a death leaks at most that object). 0, or -1 with
 * errno EBUSY (live objects, or a tree zone already, or a thread holds an
 * owned slot: pcpu/worker.h) or EINVAL (no backing). Thread-safe. */
PCPU_PRIVATE int pcpu__zone_make_tree(pcpu_zone_t *zone, struct pcpu_zone_tree *tree,
				     void (*repair)(void *ctx), void *ctx);

/* Makes a new zone (no object, no backing: what pcpu_zone_create() or a
 * new registry gives) a tree zone of a tree it was not forked from: the
 * zone of a program exec()ed by one of the tree's processes, joining it
 * (src/core/zone_join.c says why this is not attach then make_tree). Its chunk
 * 0 becomes the tree's chunk 0 through `backing` (with its `ctx`), mapped
 * as it is -- header and objects untouched -- and `tree` (in the backing's
 * shared memory, outliving the zone) its shared state; the backing's
 * `repair(repair_ctx)` as for pcpu__zone_make_tree(). The zone then
 * allocates from the tree's frontier and adopts the tree's objects
 * (pcpu__zone_tree_adopt) like any process of the tree. 0 (the zone calls
 * backing->release(ctx) when destroyed), or -1 with errno: EBUSY (objects,
 * chunks or a backing already, or a thread holds an owned slot:
 * pcpu/worker.h), EINVAL (NULL arguments, or the backing's chunk 0 is not
 * a chunk: no header there), or the mapping's; on failure the zone stays
 * private and usable and ctx is the caller's. Thread-safe. */
PCPU_PRIVATE int pcpu__zone_join_tree(pcpu_zone_t *zone, const struct pcpu_zone_backing *backing,
				     void *ctx, struct pcpu_zone_tree *tree,
				     void (*repair)(void *ctx), void *repair_ctx);

/* Whether `zone` is a tree zone (NULL: no). */
PCPU_PRIVATE int pcpu__zone_is_tree(const pcpu_zone_t *zone);

/* Takes the tree's lock (recursive: a holder may take it again); for a zone
 * that is not a tree zone, or NULL, does nothing. Lock order: the tree
 * lock before any zone lock (pcpu_zone_alloc takes it first too). 0, or -1
 * with errno (ENOTRECOVERABLE: a repair failed before; EAGAIN: too many
 * recursive holds). */
PCPU_PRIVATE int pcpu__zone_tree_lock(pcpu_zone_t *zone);
PCPU_PRIVATE void pcpu__zone_tree_unlock(pcpu_zone_t *zone);

/* A tree zone's object that another process of the tree allocated: its
 * address in this process (chunk `no` mapped here if it was not), known to
 * this process's books as live (`size` bytes) from now on. NULL with errno
 * EINVAL (no such chunk, or past the frontier) or the mapping's
 * (ENOMEM...). Under the tree lock. */
PCPU_PRIVATE void *pcpu__zone_tree_adopt(pcpu_zone_t *zone, unsigned no, uint64_t off,
					 size_t size);

/* Advises the kernel not to back [p, p + len) with transparent huge pages
 * (memory pcpu writes sparsely); errno kept, failure ignored (a kernel
 * without THP). */
PCPU_PRIVATE void pcpu__no_huge_pages(void *p, size_t len);

#endif /* PCPU_ZONE_BACKING_H */
