/*
 * A small file system for the tests of a full disk (test_segment_nospace.c,
 * test_tree_hardening.c): a private tmpfs of a given size mounted over a
 * directory, in a private mount namespace (as root) or a user namespace,
 * and a filler that takes its last byte.
 */
#ifndef PCPU_TEST_SMALL_FS_H
#define PCPU_TEST_SMALL_FS_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "check.h"

static inline int small_fs_write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

/* In a process of its own (it leaves the caller's mount namespace): a
 * private tmpfs of `size` bytes on `dir`, mounted as `how` says ("mount":
 * a mount namespace, which needs CAP_SYS_ADMIN; "userns": a user
 * namespace). 0, or -1 with the reason in why[cap]. */
static inline int small_tmpfs(const char *how, const char *dir, size_t size, char *why, size_t cap)
{
	char opts[128];

	if (strcmp(how, "userns") == 0) {
		char map[64];
		uid_t uid = geteuid();
		gid_t gid = getegid();

		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
			snprintf(why, cap, "unshare(CLONE_NEWUSER): %s", strerror(errno));
			return -1;
		}
		snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
		if (small_fs_write_file("/proc/self/setgroups", "deny") != 0 ||
		    small_fs_write_file("/proc/self/uid_map", map) != 0) {
			snprintf(why, cap, "uid_map: %s", strerror(errno));
			return -1;
		}
		snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
		if (small_fs_write_file("/proc/self/gid_map", map) != 0) {
			snprintf(why, cap, "gid_map: %s", strerror(errno));
			return -1;
		}
	} else if (unshare(CLONE_NEWNS) != 0) {
		snprintf(why, cap, "unshare(CLONE_NEWNS): %s", strerror(errno));
		return -1;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		snprintf(why, cap, "making / private: %s", strerror(errno));
		return -1;
	}
	snprintf(opts, sizeof opts, "size=%zu,mode=0700", size);
	if (mount("pcpu-nospace", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
		snprintf(why, cap, "mount tmpfs: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Fills the file system holding `dir` to the last byte. */
static inline void fill(const char *dir)
{
	static char block[65536];
	char path[600];
	size_t sz;
	int fd;

	snprintf(path, sizeof path, "%s/filler", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	memset(block, 0x5a, sizeof block);
	for (sz = sizeof block; sz >= 512; sz /= 2)
		while (write(fd, block, sz) == (ssize_t)sz)
			;
	close(fd);
}

#endif
