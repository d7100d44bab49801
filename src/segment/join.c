/* SPDX-License-Identifier: MIT */
/*
 * Joining and leaving a shared registry's tree from outside it
 * (pcpu_segment_join(), pcpu_segment_leave(); pcpu/segment.h).
 *
 * Why: a pre-fork server's tree is one registry for the master and every
 * process forked from it (tree.c). A binary upgrade breaks the line: the
 * old master fork()s and exec()s the new binary, whose new master starts
 * with nothing mapped. Published afresh, its counts would start from zero
 * beside the old tree's, which ends when the old master quits: a reader
 * summing both sees counts go back then, and the old and new workers count
 * the same traffic in two places meanwhile. Joined, the new master is one
 * more process of the old tree: its families and series are the tree's
 * (registering one finds the tree's storage, as in any process of the
 * tree), its workers fork from it and write the same file, and the tree
 * lives on after the old master and its workers leave. One file, one
 * writer_pid (the first publisher's, so readers' labels stay the same),
 * counts that neither go back nor double.
 *
 * What a joiner needs, and what is checked before anything is mapped:
 *  - the same file the tree writes, opened safely (a safe directory, a
 *    regular file of our own user, no symlink);
 *  - the same layout: the format version this library writes, the same
 *    slots (CPU numbers, as many as pcpu_nslots(), the same owned slots
 *    and stride), sizes that agree with each other and the file;
 *  - a tree (header flag 8, the tree's magic in the header's page) that is
 *    not closed.
 * Then the zone is made one of the tree's over chunk 0 as it is
 * (zone_join.c), and the directory taken as the tree's processes left it:
 * every count is read from the file under the tree's lock (tree.c), and
 * what a process indexes of the directory it indexes lazily (directory.c).
 *
 * Leaving: the tree lives while any process holds its member lock, an OFD
 * read lock on byte 0 of the file (format.h). A master that exits after
 * its workers drops its own; if no other process holds one, it is the
 * tree's last and removes the name (with the closed flag set first). The
 * test is a write lock on the same byte: granted only when no other open
 * file description holds a read lock, so of two masters leaving at once
 * exactly one finds itself last, and a joiner racing a last leaver either
 * gets its read lock before (the leaver then stays) or finds the closed
 * flag after (the join fails).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcpu/segment.h>
#include <pcpu/worker.h>

#include "../core/core.h"
#include "segment_internal.h"
#include "writer.h"

static uint64_t round_page(uint64_t x)
{
	return (x + 4095) & ~(uint64_t)4095;
}

/* The segment's directory and file, opened safely: the directory as
 * pcpu_segment_publish() would accept it, the file a regular file of our
 * user (checked before it is opened for writing), read-write. */
static int join_open(struct pcpu_segment *seg, const char *path)
{
	char dir[PATH_MAX], name[PCPU__SEG_NAME_MAX + 1], fdpath[64];
	const char *slash = strrchr(path, '/');
	struct stat st;
	pid_t pid;
	int ro;

	if (!slash || slash == path) {
		/* "/pcpu.1.x" (the root) is no place for a segment either. */
		return pcpu__seg_fail(EINVAL, "\"%.300s\": a segment's path, \"DIR/pcpu.PID.NAME\"",
				      path);
	}
	if ((size_t)(slash - path) >= sizeof dir || strlen(slash + 1) >= sizeof seg->file)
		return pcpu__seg_fail(ENAMETOOLONG, "\"%.300s\": path too long", path);
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	if (pcpu__seg_parse_file_name(slash + 1, &pid, name) < 0)
		return pcpu__seg_fail(EINVAL, "\"%.300s\": not a segment file name (pcpu.PID.NAME)",
				      path);
	strcpy(seg->file, slash + 1);
	seg->path = strdup(path);
	if (!seg->path)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	seg->dirfd = pcpu__seg_open_dir(dir);
	if (seg->dirfd < 0)
		return -1;
	ro = pcpu__seg_open_regular(seg->dirfd, seg->file);
	if (ro < 0)
		return pcpu__seg_fail(errno, "\"%.300s\": %s", path, strerror(errno));
	if (fstat(ro, &st) != 0 || st.st_uid != geteuid()) {
		close(ro);
		return pcpu__seg_fail(EPERM, "\"%.300s\": not a file of this user (uid %u)", path,
				      (unsigned)geteuid());
	}
	/* The same file, for writing, without a second lookup of its name. */
	snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", ro);
	seg->fd = open(fdpath, O_RDWR | O_CLOEXEC);
	close(ro);
	if (seg->fd < 0)
		return pcpu__seg_fail(errno, "\"%.300s\": %s", path, strerror(errno));
	return 0;
}

/* The header says the file is a live tree this process can write: the
 * same format and slots, sizes that agree. */
static int join_check(struct pcpu_segment *seg, const struct pcpu__seg_header *h)
{
	struct stat st;
	uint64_t entries_end;

	if (memcmp(h->magic, PCPU__SEG_MAGIC, sizeof h->magic) != 0 ||
	    h->byte_order != PCPU__SEG_BYTE_ORDER)
		return pcpu__seg_fail(EBADMSG, "\"%.300s\": not a segment", seg->path);
	if (h->version_major != PCPU__SEG_VERSION_MAJOR ||
	    h->version_minor != PCPU__SEG_VERSION_MINOR)
		return pcpu__seg_fail(EPROTONOSUPPORT,
				      "\"%.300s\": segment format %u.%u, this library writes %u.%u: "
				      "only a process of the same format joins a tree",
				      seg->path, h->version_major, h->version_minor,
				      PCPU__SEG_VERSION_MAJOR, PCPU__SEG_VERSION_MINOR);
	if (!(h->flags & PCPU__SEG_F_TREE))
		return pcpu__seg_fail(EINVAL, "\"%.300s\": not a shared registry "
					      "(PCPU_SEGMENT_SHARED_TREE)", seg->path);
	if (h->flags & PCPU__SEG_F_CLOSED)
		return pcpu__seg_fail(ESRCH, "\"%.300s\": the tree was closed", seg->path);
	if (h->slot_index != 1 || h->nslots != pcpu_nslots() ||
	    h->owned_slots != pcpu_worker_max() || h->slot_stride != PCPU_SLOT_STRIDE ||
	    h->chunk_span != 2 * (uint64_t)h->nslots * PCPU_SLOT_STRIDE)
		return pcpu__seg_fail(EINVAL,
				      "\"%.300s\": slots differ (file: %u slots, %u owned, index %u; "
				      "this process: %u slots, %u owned, CPU numbers)",
				      seg->path, h->nslots, h->owned_slots, h->slot_index, pcpu_nslots(),
				      pcpu_worker_max());
	entries_end = round_page(PCPU__SEG_HEADER_REGION +
				 h->entries_capacity * (uint64_t)PCPU__SEG_ENTRY_SIZE);
	if (h->header_size != sizeof *h || h->entry_size != PCPU__SEG_ENTRY_SIZE ||
	    h->entries_offset != PCPU__SEG_HEADER_REGION || h->entries_capacity == 0 ||
	    h->entries_capacity > ((uint64_t)1 << 28) || h->strings_offset != entries_end ||
	    h->strings_capacity == 0 || h->strings_capacity % 4096 != 0 ||
	    h->strings_capacity > ((uint64_t)1 << 34) ||
	    h->data_offset != entries_end + h->strings_capacity || fstat(seg->fd, &st) != 0 ||
	    (uint64_t)st.st_size < h->data_offset + h->chunk_span)
		return pcpu__seg_fail(EBADMSG, "\"%.300s\": inconsistent header", seg->path);
	seg->entries_cap = h->entries_capacity;
	seg->strings_cap = h->strings_capacity;
	seg->data_offset = h->data_offset;
	seg->chunk_span = h->chunk_span;
	seg->map_len = (size_t)h->data_offset;
	return 0;
}

/* Maps header and directory; takes the member lock and checks, under it,
 * that the tree was not closed meanwhile. */
static int join_map(struct pcpu_segment *seg)
{
	struct pcpu__seg_header h;

	if (pread(seg->fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
		return pcpu__seg_fail(EBADMSG, "\"%.300s\": no header", seg->path);
	if (join_check(seg, &h) < 0)
		return -1;
	/* A member from here on (while this open file description lives:
	 * this process and those it forks). A leaver holding the write lock
	 * is closing the tree; kernels without OFD locks (EINVAL) have no
	 * membership to take, as for publishers. */
	if (pcpu__seg_tree_member_join(seg->fd) != 0 && errno != EINVAL)
		return errno == EBUSY ? pcpu__seg_fail(EBUSY, "\"%.300s\": no member byte free (other processes "
							    "lock them all)", seg->path)
				      : pcpu__seg_fail(errno == EACCES ? EAGAIN : errno,
						       "\"%.300s\": the tree is being closed", seg->path);
	seg->map = mmap(NULL, seg->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
	if (seg->map == MAP_FAILED) {
		seg->map = NULL;
		return pcpu__seg_fail(errno, "mapping \"%.300s\": %s", seg->path, strerror(errno));
	}
	pcpu__seg_no_huge_pages(seg->map, seg->map_len);
	seg->hdr = (struct pcpu__seg_header *)seg->map;
	seg->entries = (struct pcpu__seg_entry *)(seg->map + PCPU__SEG_HEADER_REGION);
	seg->strings = seg->map + h.strings_offset;
	if (__atomic_load_n(&seg->hdr->flags, __ATOMIC_ACQUIRE) & PCPU__SEG_F_CLOSED)
		return pcpu__seg_fail(ESRCH, "\"%.300s\": the tree was closed", seg->path);
	seg->published = 1;
	return 0;
}

/* A join refused after the registry's zone became the tree's: the zone
 * maps and reserves the file through this segment's descriptor and
 * reports its chunks to it, so the segment must live as long as the
 * zone. It stays, detached (never written, never publishing), as the
 * registry's observer, so that pcpu_registry_destroy() frees it -- a
 * program that retries joins leaks nothing -- and the registry cannot be
 * published or joined again (EBUSY). Unlocks the registry. */
static void registry_keep_refused(struct pcpu_segment *seg, pcpu_registry_t *reg)
{
	seg->detached = 1;
	pcpu__registry_observe_locked(reg, pcpu__segment_hook, pcpu__tree_adopt_series, seg);
	pcpu__registry_relabel_locked(reg, pcpu__tree_relabel);
	pcpu__registry_unlock(reg);
}

/* Under the registry's lock: the zone made the tree's, the families
 * declared so far matched with (or added to) the tree's, then the
 * segment becomes the registry's observer, as publication does. */
static int registry_join(struct pcpu_segment *seg, pcpu_registry_t *reg)
{
	struct pcpu_family *f;

	pcpu__registry_lock(reg);
	if (pcpu__registry_observed_locked(reg)) {
		pcpu__registry_unlock(reg);
		return pcpu__seg_fail(EBUSY, "the registry is already published");
	}
	if (pcpu__tree_join(seg, pcpu__segment_on_chunk) != 0) {
		pcpu__registry_unlock(reg);
		return -1;
	}
	if (pcpu__tree_enter(seg) != 0) {
		int err = errno;

		registry_keep_refused(seg, reg);
		return pcpu__seg_fail(err, "the shared registry's lock: %s", strerror(err));
	}
	pcpu__directory_begin(seg);
	for (f = pcpu__registry_family_next(reg, NULL); f; f = pcpu__registry_family_next(reg, f))
		if (pcpu__directory_family_added(seg, f) != 0)
			break; /* the tree has it otherwise, or no room for it */
	pcpu__directory_end(seg);
	pcpu__tree_leave(seg);
	if (f) {
		int err = errno;

		registry_keep_refused(seg, reg);
		errno = err;
		return pcpu__seg_fail(errno, "family \"%.64s\": %s", pcpu_family_name(f),
				      pcpu_stats_error());
	}
	pcpu__registry_observe_locked(reg, pcpu__segment_hook, pcpu__tree_adopt_series, seg);
	pcpu__registry_relabel_locked(reg, pcpu__tree_relabel);
	pcpu__registry_unlock(reg);
	return 0;
}

pcpu_segment_t *pcpu_segment_join(pcpu_registry_t *reg, const char *path)
{
	struct pcpu_segment *seg;
	int err;

	if (!reg || !path) {
		pcpu__seg_fail(EINVAL, "registry or path is NULL");
		return NULL;
	}
	if (pcpu_zone_index(pcpu_registry_zone(reg)) != PCPU_INDEX_CPU) {
		pcpu__seg_fail(EINVAL, "a shared registry needs CPU-number slots: this process indexes "
				       "slots by mm_cid (pcpu_configure(), pcpu/rseq.h)");
		return NULL;
	}
	if (pcpu__worker_claims_held() != 0) {
		pcpu__seg_fail(EBUSY, "a shared registry cannot be joined while a thread holds an "
				      "owned slot (pcpu/worker.h)");
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
	seg->dirfd = -1;
	seg->reg = reg;
	seg->pid = getpid();
	pthread_mutex_init(&seg->chunk_lock, NULL);
	pthread_mutex_init(&seg->grow_lock, NULL);
	if (join_open(seg, path) < 0 || join_map(seg) < 0 || registry_join(seg, reg) < 0) {
		err = errno;
		seg->published = 0;
		/* Nothing of the tree's was changed. Before the zone became
		 * the tree's, only this process's mappings and descriptors go
		 * (and with the descriptor, the member lock it took). After,
		 * the zone maps and reserves the file through this segment's
		 * descriptor and reports to it: it stays, unseen (the
		 * registry works, its series in the file without entries),
		 * until the registry is destroyed (registry_keep_refused()). */
		if (!seg->tree) {
			pcpu__segment_free(seg);
		} else if (seg->fd >= 0) {
			/* Not a member: the tree must not live on for it. */
			pcpu__seg_tree_member_drop(seg->fd);
		}
		errno = err;
		return NULL;
	}
	pcpu__segment_link(seg);
	return seg;
}

int pcpu_segment_leave(pcpu_segment_t *seg)
{
	struct flock fl;
	int last = 0, err;

	if (!seg)
		return pcpu__seg_fail(EINVAL, "segment is NULL");
	if (!seg->tree)
		return pcpu__seg_fail(EINVAL, "not a shared registry's segment: unpublish it "
					      "(pcpu_segment_unpublish())");
	pcpu__registry_lock(seg->reg);
	if (seg->fd < 0 || !seg->published) {
		pcpu__registry_unlock(seg->reg);
		return 0; /* left already */
	}
	memset(&fl, 0, sizeof fl);
	fl.l_whence = SEEK_SET;
	fl.l_start = PCPU__SEG_TREE_MEMBER_LOCK;
	fl.l_len = 1;
	fl.l_type = F_UNLCK;
	pcpu__seg_tree_member_drop(seg->fd); /* the member byte, for readers */
	if (fcntl(seg->fd, F_OFD_SETLK, &fl) != 0) {
		err = errno;
		pcpu__registry_unlock(seg->reg);
		return pcpu__seg_fail(err == EINVAL ? ENOTSUP : err,
				      "\"%.300s\": no OFD locks (Linux >= 3.15): cannot tell whether "
				      "other processes hold the tree", seg->path);
	}
	fl.l_type = F_WRLCK;
	if (fcntl(seg->fd, F_OFD_SETLK, &fl) == 0) {
		/* No other process holds it: the tree ends with us. */
		__atomic_or_fetch(&seg->hdr->flags, PCPU__SEG_F_CLOSED, __ATOMIC_RELEASE);
		pcpu__segment_unlink_if_ours(seg);
		fl.l_type = F_UNLCK;
		(void)fcntl(seg->fd, F_OFD_SETLK, &fl);
		last = 1;
	} else if (errno != EAGAIN && errno != EACCES) {
		err = errno;
		pcpu__registry_unlock(seg->reg);
		return pcpu__seg_fail(err, "\"%.300s\": %s", seg->path, strerror(err));
	}
	/* The name is the tree's, no longer this process's to remove (not
	 * at pcpu_registry_destroy() either). */
	seg->published = 0;
	pcpu__registry_unlock(seg->reg);
	return last;
}
