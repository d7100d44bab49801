/* SPDX-License-Identifier: MIT */
/*
 * The statistics segment, writer side: a registry's zone and directory in a
 * shared file that other processes read (pcpu/segment.h; the format is in
 * format.h and docs/segment-format.md).
 *
 *   file:  [ header | entries ............ | strings ........ | chunk 0 | chunk 1 ... | 8 TiB: tables
 *            page 0   fixed 64-byte slots    blobs, by size     the registry's zone,    flows tables'
 *                     (sparse)               class (sparse)      MAP_SHARED              words (flows.c)
 *
 * The counters: pcpu__file_backing_attach() (backing.c) moves the
 * registry's (still empty) zone onto the file, so every chunk the zone has or grows is a MAP_SHARED
 * mapping of the file at data_offset + chunk * chunk_span (a chunk: nslots
 * slot regions, then their nslots mirror regions). Counter updates
 * are untouched -- the same inline rseq add, into memory that happens to be
 * a tmpfs page. pcpu__segment_on_chunk() tells us where each chunk lives so a series'
 * value can be described as (chunk, offset).
 *
 * The directory (directory.c): the registry tells pcpu__segment_hook(), its
 * observer (stats/registry_observer.h), of every change under its lock,
 * and the directory rewrites a few fixed-size entries per change.
 *
 * fork(): the child leaves the segment. The zone's fork handler (zone_shared.c)
 * has already given the child private copies of the counters; this file's
 * child handler then detaches every segment of the process: the directory
 * mapping is replaced by private zeros, the file descriptors are closed,
 * and the segment is marked detached -- no longer published, never writing
 * the parent's file or removing its name. The parent's segment is
 * unchanged: readers see the parent's values only. The child's registry
 * goes on working (registrations, updates, snapshots, expositions), unseen
 * from outside; a child that wants its statistics read publishes a registry
 * of its own (a registry with series cannot be published).
 *
 * Out of space: the file lives on a tmpfs anyone may fill, and writing a
 * page of it through a mapping when the file system is full raises SIGBUS
 * -- in a registration, or in the hot path on a slot's first add to a page
 * (issue 10). So no page of the file is written before it is allocated
 * (fallocate): the header's page at publication, each page of entries and
 * strings before the first entry or blob in it, and -- by the zone, which
 * was attached "reserved" -- the pages under every new object in every
 * slot and mirror region before the object is handed out. When the file
 * system refuses, the registration fails with ENOSPC (the zone's
 * allocation), or the directory change is dropped (counted, incomplete);
 * either way the header gets PCPU__SEG_F_NOSPACE and `nospace` counts it.
 * Updates to existing series never fail and stay exact. The cost is memory:
 * each page of slot 0 holding values costs a page in the region and the
 * mirror of every CPU slot a thread can be on (the slot walk: slot 0, the
 * present CPUs, mm_cid's range), not of every possible CPU
 * (docs/segment-format.md, Life cycle).
 */
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/segment.h>

#include "../core/core.h"
#include "backing.h"
#include "segment_internal.h"
#include "writer.h"

#define DEFAULT_MAX_ENTRIES ((size_t)1 << 20)
#define DEFAULT_MAX_STRINGS ((size_t)128 << 20)
#define LIMIT_MAX_ENTRIES ((size_t)1 << 28)
/* 16 GiB of strings where size_t can say it; 32-bit targets: 2 GiB. */
#if SIZE_MAX > 0xffffffffu
#define LIMIT_MAX_STRINGS ((size_t)1 << 34)
#else
#define LIMIT_MAX_STRINGS ((size_t)1 << 31)
#endif

/* ---- fork ------------------------------------------------------------------------ */

static pthread_mutex_t segments_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pcpu_segment *segments;
static int fork_registered;

void pcpu__segment_link(struct pcpu_segment *seg)
{
	pthread_mutex_lock(&segments_lock);
	seg->prev_seg = NULL;
	seg->next_seg = segments;
	if (segments)
		segments->prev_seg = seg;
	segments = seg;
	pthread_mutex_unlock(&segments_lock);
}

static void segments_unlink(struct pcpu_segment *seg)
{
	pthread_mutex_lock(&segments_lock);
	if (seg->prev_seg)
		seg->prev_seg->next_seg = seg->next_seg;
	else if (segments == seg)
		segments = seg->next_seg;
	if (seg->next_seg)
		seg->next_seg->prev_seg = seg->prev_seg;
	seg->next_seg = seg->prev_seg = NULL;
	pthread_mutex_unlock(&segments_lock);
}

static void segments_fork_prepare(void)
{
	pthread_mutex_lock(&segments_lock);
}

static void segments_fork_parent(void)
{
	pthread_mutex_unlock(&segments_lock);
}

/* The child's only thread, after zone_shared.c's handler made the counters
 * private. The registries' locks are free again (lower rank, released
 * first), and no other thread exists. */
static void segments_fork_child(void)
{
	int saved_errno = errno;
	struct pcpu_segment *seg;

	for (seg = segments; seg; seg = seg->next_seg) {
		if (seg->detached || seg->tree)
			continue; /* a shared registry's: the child writes it too (tree.c) */
		seg->detached = 1;
		seg->published = 0;
		/* The tables' words are the child's own copies now (core's
		 * flows.c), which never call back: forgotten, not detached (no
		 * lock is taken here). */
		pcpu__segment_tables_forget(seg, 0);
		/* Private zeros in place of the parent's directory: nothing of
		 * the child's can reach the parent's file through it. */
		if (seg->map && mmap(seg->map, seg->map_len, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
				     0) == MAP_FAILED) {
			munmap(seg->map, seg->map_len);
			seg->map = NULL;
			seg->hdr = NULL;
		}
		if (seg->fd >= 0)
			close(seg->fd);
		seg->fd = -1;
	}
	pthread_mutex_unlock(&segments_lock);
	errno = saved_errno;
}

int pcpu__segment_fork_register(void)
{
	return pcpu__fork_register(&fork_registered, PCPU_FORK_SEGMENT, segments_fork_prepare,
				   segments_fork_parent, segments_fork_child);
}

/* ---- life cycle ------------------------------------------------------------------ */

/* Removes the file name if it is still ours (the name may have been
 * removed and reused by someone else meanwhile). */
void pcpu__segment_unlink_if_ours(struct pcpu_segment *seg)
{
	struct stat a, b;

	if (fstat(seg->fd, &a) == 0 &&
	    fstatat(seg->dirfd, seg->file, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlinkat(seg->dirfd, seg->file, 0);
}

void pcpu__segment_free(struct pcpu_segment *seg)
{
	size_t c;

	segments_unlink(seg);
	/* Tables still alive outlive it: they forget it (flows.c). */
	pcpu__segment_tables_forget(seg, 1);
	free(seg->free_tables.v);
	if (seg->map)
		munmap(seg->map, seg->map_len);
	if (seg->fd >= 0)
		close(seg->fd);
	if (seg->dirfd >= 0)
		close(seg->dirfd);
	free(seg->path);
	free(seg->chunk_base);
	free(seg->free_entries.v);
	for (c = 0; c < BLOB_CLASSES; c++)
		free(seg->free_blobs[c].v);
	pcpu__htab_free(&seg->families);
	pcpu__htab_free(&seg->series);
	pcpu__htab_free(&seg->groups);
	pcpu__htab_free(&seg->group_refs);
	pcpu__htab_free(&seg->tree_index);
	pcpu__htab_free(&seg->series_entries);
	free(seg->stale);
	free(seg->relabel_items);
	free(seg->tree_groups.v);
	pthread_mutex_destroy(&seg->chunk_lock);
	pthread_mutex_destroy(&seg->grow_lock);
	free(seg);
}

int pcpu__segment_hook(void *ctx, enum pcpu__registry_event ev, struct pcpu_family *f,
		    struct pcpu__series *se)
{
	struct pcpu_segment *seg = ctx;
	int rc = 0;

	if (ev == PCPU__REG_DESTROYED) {
		/* The zone is gone; only the parent owns the file's name. */
		if (!seg->detached && getpid() == seg->pid && seg->published) {
			__atomic_or_fetch(&seg->hdr->flags, PCPU__SEG_F_CLOSED, __ATOMIC_RELEASE);
			pcpu__segment_unlink_if_ours(seg);
		}
		pcpu__segment_free(seg);
		return 0;
	}
	if (ev == PCPU__REG_FORK_PREPARE) {
		/* A tree's index of its directory, up to date in the child
		 * (tree_index.c); the tree's lock is not taken. */
		if (seg->tree && seg->hdr && !seg->detached)
			pcpu__tree_index_prefork(seg);
		return 0;
	}
	/* A fork()ed child has left the parent's file (see the top), but
	 * for a shared registry's, which every process of the tree writes,
	 * each change under the tree's lock -- and a collection's refresh of
	 * the groups' copies under the collect lock, never waiting (tree.c). */
	if (seg->detached || (!seg->tree && getpid() != seg->pid))
		return 0;
	if (ev == PCPU__REG_COLLECTING) {
		/* 2.9: the flows tables' buffers into their words, so that
		 * readers see every add that returned before this collection
		 * (flows.c). No directory change: readers' cached directories
		 * stay valid. */
		pcpu__segment_tables_flush(seg);
		return 0;
	}
	if (seg->tree && ev == PCPU__REG_GROUPS_READ) {
		pcpu__tree_collect(seg);
		return 0;
	}
	if (seg->tree && pcpu__tree_enter(seg) != 0)
		return pcpu__error_set(PCPU_ERROR_STATS, errno, "the shared registry's lock: %s",
				       strerror(errno));
	pcpu__directory_begin(seg);
	switch (ev) {
	case PCPU__REG_FAMILY_ADDED:
		rc = pcpu__directory_family_added(seg, f);
		break;
	case PCPU__REG_FAMILY_REMOVING:
		pcpu__directory_family_removing(seg, f);
		break;
	case PCPU__REG_SERIES_ADDED:
		rc = pcpu__directory_series_added(seg, f, se);
		break;
	case PCPU__REG_SERIES_REMOVING:
		pcpu__directory_series_removing(seg, f, se);
		break;
	case PCPU__REG_GROUPS_READ:
		pcpu__directory_groups_read(seg);
		break;
	default:
		break;
	}
	pcpu__directory_end(seg);
	if (seg->tree) {
		int err = errno;

		pcpu__tree_leave(seg);
		errno = err;
	}
	return rc;
}

/* Called by the zone, under its lock, for every chunk it has and gets. */
void pcpu__segment_on_chunk(void *ctx, unsigned no, char *base, uint64_t file_off)
{
	struct pcpu_segment *seg = ctx;

	pthread_mutex_lock(&seg->chunk_lock);
	if (file_off != seg->data_offset + (uint64_t)no * seg->chunk_span) {
		/* Cannot happen with this zone.c; if it did, readers would read
		 * the wrong place: leave the chunk unknown, its series dropped. */
		pthread_mutex_unlock(&seg->chunk_lock);
		return;
	}
	if (no >= seg->chunk_cap) {
		size_t cap = seg->chunk_cap ? seg->chunk_cap : 16;
		uintptr_t *p;

		while (cap <= no)
			cap *= 2;
		p = realloc(seg->chunk_base, cap * sizeof *p);
		if (!p) {
			pthread_mutex_unlock(&seg->chunk_lock);
			return; /* its series will be dropped, and counted */
		}
		memset(p + seg->chunk_cap, 0, (cap - seg->chunk_cap) * sizeof *p);
		seg->chunk_base = p;
		seg->chunk_cap = cap;
	}
	seg->chunk_base[no] = (uintptr_t)base;
	if (no + 1 > seg->nchunks)
		seg->nchunks = no + 1;
	/* The file already holds the chunk (the zone sized it before mapping).
	 * Only ever raised: in a shared registry's tree another process may
	 * have made and counted later chunks than those this one maps. */
	{
		uint64_t had = __atomic_load_n(&seg->hdr->nchunks, __ATOMIC_RELAXED);

		while (had < seg->nchunks &&
		       !__atomic_compare_exchange_n(&seg->hdr->nchunks, &had, (uint64_t)seg->nchunks, 0,
						    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
	}
	pthread_mutex_unlock(&seg->chunk_lock);
}

/* Removes leftovers of this segment name from dead processes of our user:
 * only on positive evidence that the writer is gone (pcpu__seg_writer_state
 * never says so on EMFILE, ENOMEM, another pid namespace...). A file whose
 * header never got written (no O_TMPFILE, its creator died) goes if its pid
 * is gone. */
static void remove_stale(int dirfd, const char *name)
{
	int dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d;
	struct dirent *de;

	if (dfd < 0)
		return;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		static const char zero[8];
		char n[PCPU__SEG_NAME_MAX + 1];
		struct pcpu__seg_header h;
		struct stat st, now;
		uint64_t start;
		pid_t pid;
		int fd, dead = 0;

		if (pcpu__seg_parse_file_name(de->d_name, &pid, n) < 0 || strcmp(n, name) != 0)
			continue;
		fd = pcpu__seg_open_regular(dirfd, de->d_name);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && st.st_uid == geteuid() &&
		    pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h) {
			if (memcmp(h.magic, PCPU__SEG_MAGIC, 8) == 0 && h.writer_pid == pid)
				dead = (h.flags & PCPU__SEG_F_CLOSED) ||
				       pcpu__seg_writer_state(fd, &h) == PCPU__SEG_GONE;
			else if (memcmp(h.magic, zero, 8) == 0)
				dead = pcpu__seg_proc_start(pid, &start) < 0 && errno == ESRCH;
		}
		/* Still the file we judged. */
		if (dead && fstatat(dirfd, de->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now.st_dev == st.st_dev && now.st_ino == st.st_ino)
			unlinkat(dirfd, de->d_name, 0);
		close(fd);
	}
	closedir(d);
}

static uint64_t round_page(uint64_t x)
{
	return (x + 4095) & ~(uint64_t)4095;
}

/* The caller's options, defaulted and checked; the directory's limits. */
static int publish_options(const struct pcpu_segment_options *opts, struct pcpu_segment_options *o,
			   uint64_t *max_e, uint64_t *max_s)
{
	memset(o, 0, sizeof *o);
	if (opts)
		*o = *opts;
	if (o->flags & ~(unsigned)(PCPU_SEGMENT_GROUP_READ | PCPU_SEGMENT_SHARED_TREE))
		return pcpu__seg_fail(EINVAL, "unknown segment option flags 0x%x", o->flags);
	/* mm_cid is a per-process number: two processes' threads would
	 * share a slot. CPU numbers are one running thread's, system-wide. */
	if ((o->flags & PCPU_SEGMENT_SHARED_TREE) && pcpu_zone_index(NULL) != PCPU_INDEX_CPU)
		return pcpu__seg_fail(EINVAL,
				      "a shared registry needs CPU-number slots: this process indexes "
				      "slots by mm_cid, which is per process; start it with "
				      "PCPU_INDEX=cpu (pcpu/zone.h)");
	/* Checked again, atomically, where the zone becomes the tree's
	 * (zone_tree.c): here so that a refusal leaves the registry as it was. */
	if ((o->flags & PCPU_SEGMENT_SHARED_TREE) && pcpu__worker_claims_held() != 0)
		return pcpu__seg_fail(EBUSY,
				      "a shared registry cannot be made while a thread holds an owned "
				      "slot (pcpu_worker_claim()): owned slots are one process's, "
				      "a shared registry's memory the whole tree's (pcpu/worker.h)");
	*max_e = o->max_entries ? o->max_entries : DEFAULT_MAX_ENTRIES;
	*max_s = o->max_string_bytes ? o->max_string_bytes : DEFAULT_MAX_STRINGS;
	if (*max_e > LIMIT_MAX_ENTRIES || *max_s > LIMIT_MAX_STRINGS)
		return pcpu__seg_fail(EINVAL,
				      "max_entries must be <= 2^28 and max_string_bytes <= 2^34");
	return 0;
}

/* The segment's directory and its file's name and path there (a stale
 * file of an earlier process of this name removed). */
static int segment_place(struct pcpu_segment *seg, const char *name,
			 const struct pcpu_segment_options *o)
{
	const char *dir = pcpu__seg_dir(o->dir);
	char dirpath[PATH_MAX];

	if (dir) {
		/* The caller's directory: it may be shared (sticky), as /dev/shm. */
		seg->dirfd = pcpu__seg_open_dir(dir);
	} else {
		/* Ours alone: no one else can create a name in it first. */
		seg->dirfd = pcpu__seg_open_user_dir((o->flags & PCPU_SEGMENT_GROUP_READ) != 0, dirpath,
						     sizeof dirpath);
		dir = dirpath;
	}
	if (seg->dirfd < 0)
		return -1;
	snprintf(seg->file, sizeof seg->file, "%s%d.%s", PCPU__SEG_FILE_PREFIX, (int)seg->pid, name);
	seg->path = malloc(strlen(dir) + 1 + strlen(seg->file) + 1);
	if (!seg->path)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	sprintf(seg->path, "%s/%s", dir, seg->file);
	remove_stale(seg->dirfd, name);
	return 0;
}

/* The segment's file, with its owner group and exact mode. */
static int file_create(struct pcpu_segment *seg, const struct pcpu_segment_options *o)
{
	mode_t mode = 0600;

	/* An unnamed file first, named once its header is complete
	 * (registry_attach()), so readers never see a half-initialised
	 * segment. Where the file system has no O_TMPFILE, the name is
	 * created at once with O_EXCL and readers wait out the few
	 * microseconds until the magic is written. */
	seg->fd = openat(seg->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (seg->fd < 0) {
		seg->fd = openat(seg->dirfd, seg->file,
				 O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (seg->fd < 0)
			return pcpu__seg_fail(errno, "creating \"%.300s\": %s", seg->path,
					      strerror(errno));
		seg->published = 1; /* from here on, failure removes the file */
	}
	if (o->flags & PCPU_SEGMENT_GROUP_READ) {
		if (fchown(seg->fd, (uid_t)-1, o->group) != 0)
			return pcpu__seg_fail(EPERM, "cannot give \"%.300s\" to group %u: %s",
					      seg->path, (unsigned)o->group, strerror(errno));
		mode = 0640;
	}
	/* Exactly this mode, whatever the umask. */
	if (fchmod(seg->fd, mode) != 0)
		return pcpu__seg_fail(errno, "chmod \"%.300s\": %s", seg->path, strerror(errno));
	return 0;
}

/* Sizes the file for the header, the directory and the zone's chunks, and
 * maps the header and directory. */
static int file_map(struct pcpu_segment *seg, uint64_t max_e, uint64_t max_s)
{
	struct rlimit rl;
	uint64_t need;

	seg->entries_cap = max_e;
	seg->strings_cap = round_page(max_s);
	/* A chunk of the zone is nslots slot regions and their nslots mirror
	 * regions (the zone maps exactly this much per chunk). */
	seg->chunk_span = 2 * (uint64_t)pcpu_nslots() * PCPU_SLOT_STRIDE;
	seg->data_offset = round_page(PCPU__SEG_HEADER_REGION + max_e * PCPU__SEG_ENTRY_SIZE) +
			   seg->strings_cap;
	seg->map_len = (size_t)seg->data_offset;
	/* Sizing the file past RLIMIT_FSIZE would raise SIGXFSZ (which kills
	 * by default): the header, the directory and chunk 0 must fit, or
	 * publishing fails. */
	need = seg->data_offset + seg->chunk_span;
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)rl.rlim_cur < need)
		return pcpu__seg_fail(EFBIG,
				      "the segment needs a file of %llu bytes (sparse), more than "
				      "RLIMIT_FSIZE (%llu): raise it, or lower max_entries and "
				      "max_string_bytes",
				      (unsigned long long)need, (unsigned long long)rl.rlim_cur);
	if (ftruncate(seg->fd, (off_t)seg->data_offset) != 0)
		return pcpu__seg_fail(errno, "sizing \"%.300s\": %s", seg->path, strerror(errno));
	seg->map = mmap(NULL, seg->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
	if (seg->map == MAP_FAILED) {
		seg->map = NULL;
		return pcpu__seg_fail(errno, "mapping \"%.300s\": %s", seg->path, strerror(errno));
	}
	/* Written sparsely, like the zone's chunks (zone.c: transparent huge
	 * pages would make a 2 MiB page of each page written). */
	pcpu__seg_no_huge_pages(seg->map, seg->map_len);
	/* The header's page is written below: allocated first, or a full
	 * file system fails the publication here instead of raising SIGBUS. */
	if (pcpu_file_allocate_mapped(seg->fd, seg->map, 0, PCPU__SEG_HEADER_REGION) != 0)
		return pcpu__seg_fail(errno, "\"%.300s\": %s", seg->path, strerror(errno));
	seg->hdr = (struct pcpu__seg_header *)seg->map;
	seg->entries = (struct pcpu__seg_entry *)(seg->map + PCPU__SEG_HEADER_REGION);
	seg->strings = seg->map + round_page(PCPU__SEG_HEADER_REGION + max_e * PCPU__SEG_ENTRY_SIZE);
	return 0;
}

/* Writes the header; its magic, last, makes it valid: an empty segment,
 * no chunks yet. */
static void header_init(struct pcpu_segment *seg, pcpu_registry_t *reg, const char *name,
			uint64_t start)
{
	struct pcpu__seg_header *h = seg->hdr;
	struct timespec ts;

	h->version_major = PCPU__SEG_VERSION_MAJOR;
	h->version_minor = PCPU__SEG_VERSION_MINOR;
	h->header_size = sizeof *h;
	h->byte_order = PCPU__SEG_BYTE_ORDER;
	h->writer_pid = (int32_t)seg->pid;
	h->writer_uid = (uint32_t)geteuid();
	h->writer_start = start;
	clock_gettime(CLOCK_REALTIME, &ts);
	h->created_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	h->nslots = pcpu_nslots();
	h->owned_slots = pcpu_worker_max(); /* 2.6: the last of the nslots */
	h->slot_index = pcpu_zone_index(pcpu_registry_zone(reg)) == PCPU_INDEX_CPU ? 1 : 2;
	h->slot_stride = PCPU_SLOT_STRIDE;
	h->chunk_span = seg->chunk_span;
	h->data_offset = seg->data_offset;
	h->entries_offset = PCPU__SEG_HEADER_REGION;
	h->entries_capacity = seg->entries_cap;
	h->entry_size = PCPU__SEG_ENTRY_SIZE;
	h->strings_offset = (uint64_t)(seg->strings - seg->map);
	h->strings_capacity = seg->strings_cap;
	h->writer_pidns = pcpu__seg_pidns();
	memcpy(h->name, name, strlen(name));
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, PCPU__SEG_MAGIC, sizeof h->magic);
}

/* Under the registry's lock: names the file, moves the registry's zone
 * into it, writes the families declared so far and becomes the registry's
 * observer, so no change of the directory is missed. */
static int registry_attach(struct pcpu_segment *seg, pcpu_registry_t *reg, int shared_tree)
{
	struct pcpu_family *f;
	int err;

	pcpu__registry_lock(reg);
	if (pcpu__registry_observed_locked(reg)) {
		pcpu__registry_unlock(reg);
		return pcpu__seg_fail(EBUSY, "the registry is already published");
	}
	if (shared_tree && pcpu__tree_member_lock(seg) != 0) {
		pcpu__registry_unlock(reg);
		return -1;
	}
	if (!seg->published) {
		/* linkat() creates the name exclusively and never follows a
		 * symlink there: the guarantees of O_CREAT|O_EXCL|O_NOFOLLOW. */
		char fdpath[64];

		snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", seg->fd);
		if (linkat(AT_FDCWD, fdpath, seg->dirfd, seg->file, AT_SYMLINK_FOLLOW) != 0) {
			err = errno;
			pcpu__registry_unlock(reg);
			return pcpu__seg_fail(err, "creating \"%.300s\": %s", seg->path, strerror(err));
		}
		seg->published = 1;
	}
	if (pcpu__file_backing_attach(pcpu_registry_zone(reg), seg->fd, seg->data_offset,
				      pcpu__segment_on_chunk,
				      pcpu__directory_on_nospace, seg,
				      shared_tree ? PCPU_FILE_RESERVE_SHARED : PCPU_FILE_RESERVE,
				      &seg->grow_lock) != 0) {
		err = errno;
		pcpu__registry_unlock(reg);
		if (err == EBUSY)
			return pcpu__seg_fail(EBUSY, "the registry already has series: publish it right "
						     "after pcpu_registry_create(), before creating any series");
		return pcpu__seg_fail(err, "moving the registry's zone into \"%.300s\": %s", seg->path,
				      strerror(err));
	}
	if (shared_tree && (pcpu__tree_setup(seg) != 0 || pcpu__tree_enter(seg) != 0)) {
		/* The zone is the file's now and stays so (ordinary, as an
		 * unshared segment's). */
		pcpu__registry_unlock(reg);
		return -1;
	}
	/* Families declared before publication (they have no series, the
	 * zone refused otherwise). */
	pcpu__directory_begin(seg);
	for (f = pcpu__registry_family_next(reg, NULL); f; f = pcpu__registry_family_next(reg, f))
		if (pcpu__directory_family_added(seg, f) != 0)
			break; /* a tree's directory too small for them (max_entries) */
	pcpu__directory_end(seg);
	if (f) {
		if (seg->tree)
			pcpu__tree_leave(seg);
		pcpu__registry_unlock(reg);
		return pcpu__seg_fail(ENOSPC, "the directory cannot hold the registry's families: "
					      "raise max_entries or max_string_bytes");
	}
	if (seg->tree)
		pcpu__tree_leave(seg);
	pcpu__registry_observe_locked(reg, pcpu__segment_hook,
				      shared_tree ? pcpu__tree_adopt_series : NULL, seg);
	pcpu__registry_relabel_locked(reg, shared_tree ? pcpu__tree_relabel : NULL);
	pcpu__registry_unlock(reg);
	return 0;
}

pcpu_segment_t *pcpu_segment_publish(pcpu_registry_t *reg, const char *name,
				     const struct pcpu_segment_options *opts)
{
	struct pcpu_segment_options o;
	struct pcpu_segment *seg;
	uint64_t start = 0, max_e = 0, max_s = 0;
	int err;

	if (!reg) {
		pcpu__seg_fail(EINVAL, "registry is NULL");
		return NULL;
	}
	if (pcpu__seg_check_name(name) < 0 || publish_options(opts, &o, &max_e, &max_s) < 0)
		return NULL;
	if (pcpu__seg_proc_start(getpid(), &start) < 0) {
		err = errno;
		pcpu__seg_fail(err, "cannot read /proc/self/stat (is /proc mounted?): %s", strerror(err));
		return NULL;
	}
	if (pcpu__segment_fork_register() != 0) {
		pcpu__seg_fail(ENOMEM, "out of memory");
		return NULL;
	}
	seg = calloc(1, sizeof *seg);
	if (!seg) {
		pcpu__seg_fail(ENOMEM, "out of memory");
		return NULL;
	}
	seg->fd = -1;
	seg->reg = reg;
	seg->pid = getpid();
	pthread_mutex_init(&seg->chunk_lock, NULL);
	pthread_mutex_init(&seg->grow_lock, NULL);
	/* A tree's relabel log lies at the start of its string table
	 * (tree_relog.c): room for it besides the strings asked for. */
	if ((o.flags & PCPU_SEGMENT_SHARED_TREE) && max_s <= LIMIT_MAX_STRINGS - PCPU__SEG_TREE_RELOG_BYTES)
		max_s += PCPU__SEG_TREE_RELOG_BYTES;
	if (segment_place(seg, name, &o) < 0 || file_create(seg, &o) < 0 ||
	    file_map(seg, max_e, max_s) < 0)
		goto fail;
	header_init(seg, reg, name, start);
	if (registry_attach(seg, reg, (o.flags & PCPU_SEGMENT_SHARED_TREE) != 0) < 0)
		goto fail;
	pcpu__segment_link(seg);
	return seg;

fail:
	err = errno;
	if (seg->published)
		pcpu__segment_unlink_if_ours(seg);
	pcpu__segment_free(seg);
	errno = err;
	return NULL;
}

int pcpu_segment_unpublish(pcpu_segment_t *seg)
{
	if (!seg)
		return pcpu__seg_fail(EINVAL, "segment is NULL");
	if (seg->detached || getpid() != seg->pid)
		return 0; /* a fork()ed child: the name is the parent's */
	pcpu__registry_lock(seg->reg);
	if (seg->published) {
		__atomic_or_fetch(&seg->hdr->flags, PCPU__SEG_F_CLOSED, __ATOMIC_RELEASE);
		pcpu__segment_unlink_if_ours(seg);
		seg->published = 0;
	}
	pcpu__registry_unlock(seg->reg);
	return 0;
}

const char *pcpu_segment_path(const pcpu_segment_t *seg)
{
	return seg && !seg->detached ? seg->path : NULL;
}

uint64_t pcpu_segment_dropped(const pcpu_segment_t *seg)
{
	return seg && seg->hdr ? __atomic_load_n(&seg->hdr->dropped, __ATOMIC_RELAXED) : 0;
}

uint64_t pcpu_segment_nospace(const pcpu_segment_t *seg)
{
	return seg ? __atomic_load_n(&seg->hdr->nospace, __ATOMIC_RELAXED) : 0;
}

/* The writer's view of the segment's per-thread message (error.c). */
const char *pcpu_segment_error(void)
{
	return pcpu__seg_message();
}
