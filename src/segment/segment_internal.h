/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces of the statistics segment, shared by the writer
 * (writer.c) and the reader (reader_*.c, see reader_internal.h). Nothing
 * here is exported. Every file but the writer uses only libc, this header
 * and the statistics validators: the fuzz target builds them without the
 * core.
 */
#ifndef PCPU_SEGMENT_INTERNAL_H
#define PCPU_SEGMENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "format.h"

#include "../core/core.h"  /* PCPU_HIDDEN */
#include "../stats/stats.h" /* the error messages */

/* ---- error.c ---- */

/* Sets the thread's segment/reader error message (printf-style, truncated)
 * and errno; returns -1 for `return pcpu__seg_fail(EINVAL, "...")`: the
 * segment's domain of libpcpu-stats' messages (src/stats/error.h). */
#define pcpu__seg_fail(err, ...) pcpu__error_set(PCPU_ERROR_SEGMENT, (err), __VA_ARGS__)
/* The calling thread's last segment message (pcpu_segment_error() and
 * pcpu_reader_error() return it). */
PCPU_HIDDEN const char *pcpu__seg_message(void);

/* ---- names.c ---- */

/* Checks a segment name: 1..64 bytes of [A-Za-z0-9_.-], not starting with
 * '.' or '-'. 0, or -1 with errno EINVAL and a message. */
PCPU_HIDDEN int pcpu__seg_check_name(const char *name);

/* Splits "pcpu.<pid>.<name>" into pid and name (name buffer of 65 bytes).
 * 0 if it is such a file name, -1 if not. */
PCPU_HIDDEN int pcpu__seg_parse_file_name(const char *file, pid_t *pid, char *name);

/* ---- dirs.c ---- */

/* The directory the caller named: `dir`, else $PCPU_SEGMENT_DIR
 * (secure_getenv); NULL if neither: the per-user directories. */
PCPU_HIDDEN const char *pcpu__seg_dir(const char *dir);

/* Per-user directories: /dev/shm/pcpu-<uid>, mode 0700 (0755 once a segment
 * was shared with a group), owned by <uid>, writable by no one else. If that
 * name is taken by someone else, /dev/shm/pcpu-<uid>.<16 random hex digits>:
 * no one can block a publisher by creating the name first. */
#define PCPU__SEG_USER_DIR_PREFIX "pcpu-"

/* The caller's per-user directory, made if need be (`share`: readable and
 * searchable by all, for PCPU_SEGMENT_GROUP_READ). Returns its descriptor
 * and its path in `path`, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__seg_open_user_dir(int share, char *path, size_t cap);

/* The directories a reader looks in. */
struct pcpu__seg_dir {
	char name[64];   /* in /dev/shm; "" for the caller's directory */
	uid_t uid;       /* whose per-user directory */
	dev_t dev;
	ino_t ino;
	char path[320];  /* for messages */
};
struct pcpu__seg_dirs {
	int base;                  /* /dev/shm, or the caller's directory */
	struct pcpu__seg_dir *d;
	size_t n, cap;
	char desc[320];            /* where, for messages */
};

/* The caller's `dir` (or $PCPU_SEGMENT_DIR), checked by pcpu__seg_open_dir_of;
 * else every safe per-user directory of `owner` (of any user if `any`).
 * 0, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__seg_dirs_open(const char *dir, int any, uid_t owner,
				    struct pcpu__seg_dirs *out);

/* A new descriptor of directory i (checked again: the same directory as
 * listed), or -1 with errno. */
PCPU_HIDDEN int pcpu__seg_dirs_fd(const struct pcpu__seg_dirs *ds, size_t i);

PCPU_HIDDEN void pcpu__seg_dirs_close(struct pcpu__seg_dirs *d);

/* ---- safe_open.c ---- */

/* Opens a segment directory (O_DIRECTORY) and checks it is safe: owned by
 * the caller or root, and sticky if writable by group or others. Returns
 * the descriptor, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__seg_open_dir(const char *dir);

/* The same for a reader of `owner`'s segments (of anyone's if `any`): a
 * directory `owner` owns is accepted too (any owner's if `any`). */
PCPU_HIDDEN int pcpu__seg_open_dir_of(const char *dir, int any, uid_t owner);

/* Opens `file` (relative to dirfd, or AT_FDCWD) for reading only if it is
 * a regular file, checked before it is opened for reading: O_PATH, fstat,
 * then a reopen through /proc/self/fd (a device is never opened, a FIFO
 * never touched). The descriptor is O_RDONLY|O_NONBLOCK|O_CLOEXEC. -1 with
 * errno: ELOOP (a symlink), EPERM (not a regular file), EAGAIN (replaced
 * while opening), or what openat said (ENOENT, EACCES, EMFILE...). */
PCPU_HIDDEN int pcpu__seg_open_regular(int dirfd, const char *file);

/* ---- liveness.c ---- */

/* Start time of process `pid` (field 22 of /proc/<pid>/stat, clock ticks
 * since boot). 0, or -1 with errno ESRCH only on positive evidence that
 * there is no such process (or it is a zombie); any other errno (EMFILE,
 * ENFILE, ENOMEM, EACCES, EIO, ENOENT for a /proc that does not show it
 * although it exists) means "cannot tell". */
PCPU_HIDDEN int pcpu__seg_proc_start(pid_t pid, uint64_t *start);

/* Inode of the caller's pid namespace (/proc/self/ns/pid), 0 if unknown. */
PCPU_HIDDEN uint64_t pcpu__seg_pidns(void);

/* Writer liveness, as enum pcpu_segment_state without CLOSED. */
enum { PCPU__SEG_LIVE = 1, PCPU__SEG_GONE = 3, PCPU__SEG_UNKNOWN = 4 };

/* Whether the writer of the segment open at `fd` whose header `h` is (its
 * pid, start time, pid namespace inode or 0, flags) still runs:
 * PCPU__SEG_LIVE; PCPU__SEG_GONE only on positive evidence (no such
 * process, another start time, a zombie); else PCPU__SEG_UNKNOWN with
 * errno saying why (EMFILE..., EXDEV: another pid namespace). A segment
 * shared by a process tree (flag PCPU__SEG_F_TREE) lives while any of its
 * processes does, its publisher or not: live whenever one holds the
 * tree's member lock (PCPU__SEG_TREE_MEMBER_LOCK; fd -1: not looked at).
 * The closed flag is the caller's to check. Never deletes or changes
 * anything. */
PCPU_HIDDEN int pcpu__seg_writer_state(int fd, const struct pcpu__seg_header *h);

/* Makes the open file description of fd a member of its tree: a read lock
 * on byte 0 and a write lock on a member byte (format.h), which last while
 * any process holding the description (every fork() child) lives. 0, or -1
 * with errno, nothing held (EINVAL: a kernel before 3.15, no OFD locks;
 * EAGAIN or EACCES: a leaver holds byte 0; EBUSY: no member byte free).
 * Cost: two fcntl() calls, one more per member byte taken already. */
PCPU_HIDDEN int pcpu__seg_tree_member_join(int fd);
/* Gives up the membership pcpu__seg_tree_member_join() took on fd (its
 * read lock on byte 0 and its member byte). errno untouched. */
PCPU_HIDDEN void pcpu__seg_tree_member_drop(int fd);

/* Owner (uid) of process `pid`, from /proc/<pid>. 0 or -1 (errno). */
PCPU_HIDDEN int pcpu__seg_proc_uid(pid_t pid, uid_t *uid);

#endif /* PCPU_SEGMENT_INTERNAL_H */
