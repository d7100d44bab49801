/* SPDX-License-Identifier: MIT */
/*
 * backing.c: the segment's file as the backing of a registry's zone
 * (src/core/core.h). The zone knows chunks, objects and that its memory
 * may be shared; this file knows that the memory is a file on a tmpfs that
 * anyone may fill.
 *
 * Mapping: chunk i is the file at file_base + i * span, MAP_SHARED, so
 * another process can read it; the file is grown (ftruncate) to hold a new
 * chunk before it is mapped. Growing a file past RLIMIT_FSIZE raises
 * SIGXFSZ, which kills by default: refused with EFBIG instead. Only the
 * pages written become file pages: tmpfs files are sparse, and the zone
 * asks for the file's data extents (SEEK_DATA, SEEK_HOLE) and reads it
 * with pread() where a read fault through the mapping would allocate a
 * page of a hole.
 *
 * Reserving (what a published segment uses): writing a page of a tmpfs file
 * through a mapping allocates it, and a full file system answers with
 * SIGBUS -- in the hot path, on the first add of a slot to a new page. So
 * before an object is handed out, the zone has its backing reserve the
 * pages under it in every region a thread can write, slots and mirrors
 * alike: an add, a fallback add, a reset or a gauge set can then never
 * fault for lack of space. Regions no thread can write are left alone: a
 * possible CPU that is not present, an owned slot never claimed
 * (region_needed()). When the file system refuses, the pages just allocated are given
 * back (nothing lives there yet), the segment is told (on_nospace: it
 * counts and flags it for readers), and the allocation fails with ENOSPC.
 *
 * How pages are allocated: every mapping is MADV_NOHUGEPAGE (zone.c says
 * why), and a write fault through such a mapping allocates small pages
 * also on a shmem/tmpfs that hands out huge ones (shmem_enabled, huge=).
 * fallocate() asks the file system without a mapping, and such a tmpfs
 * then hands out 2 MiB for every page asked, in each region. So the pages
 * are faulted in through the zone's own mapping (MADV_POPULATE_WRITE,
 * Linux 5.14), and fallocate() is the fallback only where that is not
 * supported, or fails (fallocate() then says why: ENOSPC).
 */
#include "backing.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcpu/worker.h> /* pcpu_worker_max() */

#include "../core/core.h"
#include "format.h"

/* Segment files are sparse and large: offsets past 2 GiB (CMakeLists.txt's
 * _FILE_OFFSET_BITS=64 on 32-bit targets). */
_Static_assert(sizeof(off_t) == 8, "pcpu's segment code needs a 64-bit off_t: build with -D_FILE_OFFSET_BITS=64");

struct file_backing {
	int fd;
	int keep; /* PCPU_FILE_RESERVE_SHARED: never give pages back (see file_reserve) */
	uint64_t file_base; /* chunk i at file_base + i * span */
	uint64_t span;
	pcpu_file_chunk_fn *on_chunk;
	pcpu_file_nospace_fn *on_nospace;
	void *ctx;
	pthread_mutex_t *grow_lock; /* pcpu__file_grow()'s (NULL: none) */
};

static uint64_t chunk_off(const struct file_backing *b, unsigned no)
{
	return b->file_base + (uint64_t)no * b->span;
}

/* Allocates `len` bytes of file `fd` at `off` without writing them
 * (fallocate, keeping the size; zeros written where fallocate is not
 * supported). 0, or -1 with errno (ENOSPC, ENOMEM, EFBIG...). */
static int pcpu_file_allocate(int fd, uint64_t off, uint64_t len)
{
	static const char zeros[4096];
	int rc;

	/* Unwritten tmpfs pages read as zero and are holes to SEEK_DATA;
	 * where fallocate is not supported, zeros are written instead: the
	 * range holds no data yet. */
	do
		rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
	while (rc != 0 && errno == EINTR);
	if (rc == 0 || (errno != EOPNOTSUPP && errno != ENOSYS))
		return rc;
	while (len > 0) {
		size_t n = len < sizeof zeros ? (size_t)len : sizeof zeros;
		ssize_t w = pwrite(fd, zeros, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			return -1;
		}
		off += (uint64_t)w;
		len -= (uint64_t)w;
	}
	return 0;
}

/* Write-faults the pages in through the mapping at p (see the top); else
 * -- a kernel before 5.14 or one that refuses (EINVAL, EPERM), or a fault
 * that would have raised SIGBUS (EFAULT: the file system is full) --
 * fallocate(), which allocates what it can and says what is wrong. */
int pcpu_file_allocate_mapped(int fd, char *p, uint64_t off, size_t len)
{
#ifdef MADV_POPULATE_WRITE
	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return 0;
#else
	(void)p;
#endif
	return pcpu_file_allocate(fd, off, len);
}

int pcpu__file_grow(int fd, uint64_t end, pthread_mutex_t *lock)
{
	struct stat st;
	struct rlimit rl;
	int rc = 0, err = 0;

	if (lock)
		pthread_mutex_lock(lock);
	if (fstat(fd, &st) != 0)
		rc = -1;
	else if ((uint64_t)st.st_size >= end)
		rc = 0;
	else if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		 (uint64_t)rl.rlim_cur < end) {
		errno = EFBIG; /* not SIGXFSZ (see the top) */
		rc = -1;
	} else
		rc = ftruncate(fd, (off_t)end);
	err = errno;
	if (lock)
		pthread_mutex_unlock(lock);
	errno = err;
	return rc;
}

/* Grows the file to hold chunk `no`, if it does not yet. */
static int size_for_chunk(const struct file_backing *b, unsigned no)
{
	uint64_t end = chunk_off(b, no) + b->span;

	/* 2.9: flows tables' words lie from PCPU__SEG_TABLES_BASE up
	 * (src/segment/flows.c): no chunk reaches them. */
	if (end > PCPU__SEG_TABLES_BASE) {
		errno = EFBIG;
		return -1;
	}
	return pcpu__file_grow(b->fd, end, b->grow_lock);
}

static void *file_map(void *ctx, unsigned no, void *at, size_t span, enum pcpu_zone_map how)
{
	struct file_backing *b = ctx;
	void *p;

	switch (how) {
	case PCPU_ZONE_MAP_SHARED:
		if (size_for_chunk(b, no) != 0)
			return NULL;
		p = mmap(at, span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, b->fd,
			 (off_t)chunk_off(b, no));
		break;
	case PCPU_ZONE_MAP_VIEW:
		p = mmap(NULL, span, PROT_READ, MAP_SHARED, b->fd, (off_t)chunk_off(b, no));
		return p == MAP_FAILED ? NULL : p; /* read only: nothing written sparsely */
	case PCPU_ZONE_MAP_PRIVATE:
		/* Read-only: the zone makes writable what it writes (a
		 * writable private mapping of the whole span would be charged
		 * commit for all of it where the kernel never overcommits). */
		p = mmap(at, span, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, b->fd,
			 (off_t)chunk_off(b, no));
		break;
	default:
		errno = EINVAL;
		return NULL;
	}
	if (p == MAP_FAILED)
		return NULL;
	pcpu__seg_no_huge_pages(p, span);
	return p;
}

void pcpu__seg_no_huge_pages(void *p, size_t len)
{
	int saved_errno = errno;

	(void)madvise(p, len, MADV_NOHUGEPAGE);
	errno = saved_errno;
}

/* Whether region r (of 2 * nslots) is ever written or read: the region and
 * the mirror of a CPU slot a thread can be on (slot 0, the present CPUs,
 * mm_cid's range: pcpu__slot_needs_memory()), and those of an owned slot
 * that was claimed. (No
 * one writes an owned slot's mirror, but fetches read it once the slot is
 * in their walk, and a read fault on a hole of a shared tmpfs mapping
 * allocates a page: SIGBUS on a full file system.) */
static int region_needed(uint32_t r, uint32_t nregions)
{
	uint32_t nslots = nregions / 2;

	return pcpu__slot_needs_memory(r >= nslots ? r - nslots : r);
}

/* Allocates the file's pages under [from, upto) of every region of chunk
 * `no` that is ever written; on failure gives back what it allocated and
 * tells the segment. */
static int file_reserve(void *ctx, unsigned no, char *base, size_t span, size_t from, size_t upto)
{
	struct file_backing *b = ctx;
	uint64_t off = chunk_off(b, no);
	uint32_t r, q, nregions = (uint32_t)(span >> PCPU_SLOT_STRIDE_SHIFT);

	for (r = 0; r < nregions; r++) {
		uint64_t at = off + ((uint64_t)r << PCPU_SLOT_STRIDE_SHIFT) + from;
		char *p = base + ((size_t)r << PCPU_SLOT_STRIDE_SHIFT) + from;

		if (!region_needed(r, nregions))
			continue;
		if (pcpu_file_allocate_mapped(b->fd, p, at, upto - from) != 0) {
			int err = errno;

			/* Nothing of this process lives past `from`: give the
			 * pages back to a file system that is short of them.
			 * Not in a file shared by a process tree: `from` is
			 * what this process reserved, and another process may
			 * have reserved, and filled, pages above it since
			 * (issue 37: a refused worker zeroed the master's
			 * counters, which then faulted). There the pages stay,
			 * for the tree's next registration. */
			for (q = 0; q <= r && !b->keep; q++)
				(void)fallocate(b->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						(off_t)(off + ((uint64_t)q << PCPU_SLOT_STRIDE_SHIFT) + from),
						(off_t)(upto - from));
			if (b->on_nospace)
				b->on_nospace(b->ctx, err);
			errno = err;
			return -1;
		}
	}
	return 0;
}

static int file_reserve_region(void *ctx, unsigned no, char *base, uint32_t region, size_t upto)
{
	struct file_backing *b = ctx;
	uint64_t at = chunk_off(b, no) + ((uint64_t)region << PCPU_SLOT_STRIDE_SHIFT);

	/* A failure fails the claim (ENOSPC): the directory stays complete,
	 * so the segment is not marked out of space. What was allocated
	 * stays, for the claim's next try. */
	return pcpu_file_allocate_mapped(b->fd, base + ((size_t)region << PCPU_SLOT_STRIDE_SHIFT),
					 at, upto);
}

static void file_chunk_added(void *ctx, unsigned no, char *base)
{
	struct file_backing *b = ctx;

	if (b->on_chunk)
		b->on_chunk(b->ctx, no, base, chunk_off(b, no));
}

static int file_extent(void *ctx, unsigned no, size_t off, size_t span, size_t *data, size_t *hole)
{
	struct file_backing *b = ctx;
	off_t base = (off_t)chunk_off(b, no), end = base + (off_t)span, d, h;

	d = lseek(b->fd, base + (off_t)off, SEEK_DATA);
	if (d < 0 && errno == ENXIO)
		return 0; /* no data after off */
	if (d < 0)
		return -1;
	if (d >= end)
		return 0;
	h = lseek(b->fd, d, SEEK_HOLE);
	if (h < 0 || h > end)
		h = end;
	*data = (size_t)(d - base);
	*hole = (size_t)(h - base);
	return 1;
}

static int file_read(void *ctx, unsigned no, size_t off, void *buf, size_t len)
{
	struct file_backing *b = ctx;
	ssize_t got = pread(b->fd, buf, len, (off_t)(chunk_off(b, no) + off));

	return got == (ssize_t)len ? 0 : -1;
}

static void file_release(void *ctx)
{
	free(ctx);
}

static const struct pcpu_zone_backing file_backing = {
	.map = file_map,
	.chunk_added = file_chunk_added,
	.extent = file_extent,
	.read = file_read,
	.release = file_release,
};

static const struct pcpu_zone_backing file_backing_reserved = {
	.map = file_map,
	.reserve = file_reserve,
	.reserve_region = file_reserve_region,
	.chunk_added = file_chunk_added,
	.extent = file_extent,
	.read = file_read,
	.release = file_release,
};

/* The backing's state for file `fd`, or NULL (ENOMEM). */
static struct file_backing *backing_new(int fd, uint64_t file_base, pcpu_file_chunk_fn *on_chunk,
					pcpu_file_nospace_fn *on_nospace, void *ctx,
					enum pcpu_file_reserve reserve, pthread_mutex_t *grow_lock)
{
	struct file_backing *b = malloc(sizeof *b);

	if (!b) {
		errno = ENOMEM;
		return NULL;
	}
	b->fd = fd;
	b->keep = reserve == PCPU_FILE_RESERVE_SHARED;
	b->file_base = file_base;
	b->span = 2 * (uint64_t)pcpu_nslots() << PCPU_SLOT_STRIDE_SHIFT;
	b->on_chunk = on_chunk;
	b->on_nospace = on_nospace;
	b->ctx = ctx;
	b->grow_lock = grow_lock;
	return b;
}

int pcpu__file_backing_join(pcpu_zone_t *zone, int fd, uint64_t file_base,
			    pcpu_file_chunk_fn *on_chunk, pcpu_file_nospace_fn *on_nospace,
			    void *ctx, struct pcpu_zone_tree *tree, void (*repair)(void *ctx),
			    void *repair_ctx)
{
	struct file_backing *b;
	int err;

	if (!zone || fd < 0 || file_base % (uint64_t)sysconf(_SC_PAGESIZE) != 0) {
		errno = EINVAL;
		return -1;
	}
	b = backing_new(fd, file_base, on_chunk, on_nospace, ctx, PCPU_FILE_RESERVE_SHARED, NULL);
	if (!b)
		return -1;
	if (pcpu__zone_join_tree(zone, &file_backing_reserved, b, tree, repair, repair_ctx) == 0)
		return 0;
	err = errno;
	free(b);
	errno = err;
	return -1;
}

int pcpu__file_backing_attach(pcpu_zone_t *zone, int fd, uint64_t file_base,
			      pcpu_file_chunk_fn *on_chunk, pcpu_file_nospace_fn *on_nospace,
			      void *ctx, enum pcpu_file_reserve reserve, pthread_mutex_t *grow_lock)
{
	struct file_backing *b;
	int err;

	if (!zone || fd < 0 || file_base % (uint64_t)sysconf(_SC_PAGESIZE) != 0) {
		errno = EINVAL;
		return -1;
	}
	b = backing_new(fd, file_base, on_chunk, on_nospace, ctx, reserve, grow_lock);
	if (!b)
		return -1;
	if (pcpu__zone_attach_backing(zone, reserve != PCPU_FILE_SPARSE ? &file_backing_reserved
								     : &file_backing,
				       b) == 0)
		return 0;
	err = errno;
	free(b);
	errno = err;
	return -1;
}
