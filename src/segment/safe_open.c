/* SPDX-License-Identifier: MIT */
/*
 * Opening segment directories and files safely.
 *
 * Why a safety check on the directory: the segment lives in a directory
 * other users may write to (/dev/shm is mode 1777). Without the sticky bit
 * anyone could rename or replace our file; a directory owned by another
 * user could be changed under us at any time. So, as OpenSSH does for its
 * key files, we accept a directory only if it is owned by us or root and,
 * when group or others may write to it, has the sticky bit. A reader
 * accepts the directory of the user whose segments it reads too (what it
 * reads there is that user's anyway, and checked as such). The check is
 * made on the opened directory (fstat of its descriptor) and every file is
 * then opened relative to that descriptor, so the directory cannot be
 * swapped between the check and the use.
 *
 * Files are opened likewise: their type is checked before they are opened
 * for reading (pcpu__seg_open_regular()), so a device or a FIFO planted
 * under a segment's name is never opened.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segment_internal.h"

int pcpu__seg_open_dir(const char *dir)
{
	return pcpu__seg_open_dir_of(dir, 0, geteuid());
}

int pcpu__seg_open_dir_of(const char *dir, int any, uid_t owner)
{
	struct stat st;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return pcpu__seg_fail(errno, "segment directory \"%.200s\": %s", dir, strerror(errno));
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return pcpu__seg_fail(e, "segment directory \"%.200s\": %s", dir, strerror(e));
	}
	/* A reader trusts the directory of the user whose segments it reads
	 * (the segments are that user's to write anyway), or any user's with
	 * `any`: a group member reading a server's segments from the folder
	 * the server made. */
	if (st.st_uid != geteuid() && st.st_uid != 0 && !any && st.st_uid != owner) {
		close(fd);
		return pcpu__seg_fail(EPERM,
				      "segment directory \"%.200s\" is owned by another user (uid %u)",
				      dir, (unsigned)st.st_uid);
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		close(fd);
		return pcpu__seg_fail(EPERM,
				      "segment directory \"%.200s\" is writable by %s and not sticky "
				      "(chmod +t or o-w)",
				      dir, (st.st_mode & S_IWOTH) ? "others" : "its group");
	}
	return fd;
}

int pcpu__seg_open_regular(int dirfd, const char *file)
{
	struct stat st, st2;
	char proc[64];
	int pfd, fd, e;

	/* O_PATH opens nothing: no device driver, no FIFO end, no side effect.
	 * With O_NOFOLLOW a symlink is opened as itself, and refused below. */
	pfd = openat(dirfd, file, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (fstat(pfd, &st) != 0) {
		e = errno;
		close(pfd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		close(pfd);
		errno = S_ISLNK(st.st_mode) ? ELOOP : EPERM;
		return -1;
	}
	/* Reopened through /proc for reading: the same inode, whatever
	 * happens to the name meanwhile. Without /proc: by name, and the
	 * inode must be the one checked. */
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		fd = openat(dirfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	e = errno;
	close(pfd);
	if (fd < 0) {
		errno = e;
		return -1;
	}
	if (fstat(fd, &st2) != 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino ||
	    !S_ISREG(st2.st_mode)) {
		close(fd);
		errno = EAGAIN; /* replaced while we opened it */
		return -1;
	}
	return fd;
}
