/* SPDX-License-Identifier: MIT */
/*
 * The directories segments live in: the one the caller names (or
 * $PCPU_SEGMENT_DIR), else the per-user directories in /dev/shm, made by a
 * publisher and listed by a reader, each checked to be what it claims.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcpu/segment_dir.h>

#include "segment_internal.h"

const char *pcpu__seg_dir(const char *dir)
{
	const char *env;

	if (dir && *dir)
		return dir;
	/* secure_getenv: a set-user-ID program must not let its caller pick
	 * the directory it creates files in. */
	env = secure_getenv(PCPU_SEGMENT_DIR_ENV);
	return env && *env ? env : NULL;
}

/* ---- per-user directories ------------------------------------------------------ */

/* "pcpu-<uid>" or "pcpu-<uid>.<letters and digits>": 0 and *uid, or -1. */
static int parse_user_dir(const char *n, uid_t *uid)
{
	const char *p = n + sizeof PCPU__SEG_USER_DIR_PREFIX - 1;
	unsigned long long v = 0;
	size_t digits = 0;

	if (strncmp(n, PCPU__SEG_USER_DIR_PREFIX, sizeof PCPU__SEG_USER_DIR_PREFIX - 1) != 0)
		return -1;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (digits > 10 || v > 0xffffffffull)
			return -1;
	}
	if (digits == 0 || (digits > 1 && n[sizeof PCPU__SEG_USER_DIR_PREFIX - 1] == '0'))
		return -1;
	if (*p == '.') {
		if (!*++p)
			return -1;
		for (; *p; p++)
			if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
			      (*p >= 'A' && *p <= 'Z')))
				return -1;
	} else if (*p) {
		return -1;
	}
	*uid = (uid_t)v;
	return 0;
}

/* Whether the open directory `fd` is a safe per-user directory of `uid`:
 * owned by it and writable by no one else. */
static int user_dir_ok(int fd, uid_t uid, struct stat *st)
{
	return fstat(fd, st) == 0 && S_ISDIR(st->st_mode) && st->st_uid == uid &&
	       !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Opens base/name as a per-user directory of uid: -1 unless safe. */
static int open_user_dir_at(int base, const char *name, uid_t uid, struct stat *st)
{
	int fd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0 && !user_dir_ok(fd, uid, st)) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

static int open_base(void)
{
	return pcpu__seg_open_dir(PCPU_SEGMENT_DEFAULT_DIR);
}

int pcpu__seg_open_user_dir(int share, char *path, size_t cap)
{
	char name[64];
	uid_t me = geteuid();
	struct stat st;
	DIR *d;
	struct dirent *de;
	int base, fd, i, e, dfd;

	base = open_base();
	if (base < 0)
		return -1;
	/* 1. The usual name. mkdir fails if anything has it already. */
	snprintf(name, sizeof name, PCPU__SEG_USER_DIR_PREFIX "%u", (unsigned)me);
	if (mkdirat(base, name, 0700) == 0) {
		fd = open_user_dir_at(base, name, me, &st);
		if (fd >= 0 && fchmod(fd, 0700) != 0) { /* whatever the umask */
			close(fd);
			fd = -1;
		}
	} else {
		fd = open_user_dir_at(base, name, me, &st);
	}
	/* 2. Someone else holds that name (or it is unsafe): an earlier
	 * fallback directory of ours, else a new one with a name no one can
	 * guess. Readers find them all by their prefix and owner. */
	if (fd < 0 && (dfd = fcntl(base, F_DUPFD_CLOEXEC, 0)) >= 0) {
		d = fdopendir(dfd);
		if (!d)
			close(dfd);
		while (d && fd < 0 && (de = readdir(d)) != NULL) {
			uid_t u;

			if (parse_user_dir(de->d_name, &u) == 0 && u == me && strchr(de->d_name, '.') &&
			    strlen(de->d_name) < sizeof name) {
				fd = open_user_dir_at(base, de->d_name, me, &st);
				if (fd >= 0)
					strcpy(name, de->d_name);
			}
		}
		if (d)
			closedir(d);
	}
	for (i = 0; fd < 0 && i < 16; i++) {
		unsigned char rnd[8];
		char hex[17];
		int k;

		if (getentropy(rnd, sizeof rnd) != 0)
			break;
		for (k = 0; k < 8; k++)
			snprintf(hex + 2 * k, 3, "%02x", rnd[k]);
		snprintf(name, sizeof name, PCPU__SEG_USER_DIR_PREFIX "%u.%s", (unsigned)me, hex);
		if (mkdirat(base, name, 0700) != 0)
			continue;
		fd = open_user_dir_at(base, name, me, &st);
		if (fd >= 0 && fchmod(fd, 0700) != 0) {
			close(fd);
			fd = -1;
		}
	}
	e = errno;
	close(base);
	if (fd < 0)
		return pcpu__seg_fail(e ? e : EPERM,
				      "no safe per-user directory " PCPU_SEGMENT_DEFAULT_DIR
				      "/" PCPU__SEG_USER_DIR_PREFIX "%u[.*] could be made: %s",
				      (unsigned)me, strerror(e ? e : EPERM));
	/* Readers of a shared segment must list and search the directory;
	 * nobody but us may write to it either way. */
	if (share && (st.st_mode & 0055) != 0055 && fchmod(fd, (st.st_mode & 07777) | 0055) != 0) {
		e = errno;
		close(fd);
		return pcpu__seg_fail(e, "cannot open " PCPU_SEGMENT_DEFAULT_DIR "/%s to readers: %s",
				      name, strerror(e));
	}
	snprintf(path, cap, PCPU_SEGMENT_DEFAULT_DIR "/%s", name);
	return fd;
}

int pcpu__seg_dirs_open(const char *dir, int any, uid_t owner, struct pcpu__seg_dirs *out)
{
	DIR *d;
	struct dirent *de;
	int dfd;

	memset(out, 0, sizeof *out);
	out->base = -1;
	dir = pcpu__seg_dir(dir);
	if (dir) {
		/* One directory, named by the caller: checked as such, the
		 * expected owner's accepted too. */
		out->base = pcpu__seg_open_dir_of(dir, any, owner);
		if (out->base < 0)
			return -1;
		out->d = calloc(1, sizeof *out->d);
		if (!out->d) {
			pcpu__seg_dirs_close(out);
			return pcpu__seg_fail(ENOMEM, "out of memory");
		}
		out->n = 1;
		snprintf(out->d[0].path, sizeof out->d[0].path, "%s", dir);
		snprintf(out->desc, sizeof out->desc, "%.250s", dir);
		return 0;
	}
	if (any)
		snprintf(out->desc, sizeof out->desc,
			 PCPU_SEGMENT_DEFAULT_DIR "/" PCPU__SEG_USER_DIR_PREFIX "*");
	else
		snprintf(out->desc, sizeof out->desc,
			 PCPU_SEGMENT_DEFAULT_DIR "/" PCPU__SEG_USER_DIR_PREFIX "%u", (unsigned)owner);
	out->base = open_base();
	if (out->base < 0)
		return -1;
	dfd = fcntl(out->base, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0 || !(d = fdopendir(dfd))) {
		int e = errno;
		if (dfd >= 0)
			close(dfd);
		pcpu__seg_dirs_close(out);
		return pcpu__seg_fail(e, PCPU_SEGMENT_DEFAULT_DIR ": %s", strerror(e));
	}
	while ((de = readdir(d)) != NULL) {
		struct pcpu__seg_dir one;
		struct stat st;
		uid_t u;
		int fd;

		if (parse_user_dir(de->d_name, &u) < 0 || (!any && u != owner) ||
		    strlen(de->d_name) >= sizeof one.name)
			continue;
		/* Only directories their user owns and no one else can write:
		 * another user's "pcpu-<uid>" is not that uid's. */
		fd = open_user_dir_at(out->base, de->d_name, u, &st);
		if (fd < 0)
			continue;
		close(fd);
		memset(&one, 0, sizeof one);
		strcpy(one.name, de->d_name);
		one.uid = u;
		one.dev = st.st_dev;
		one.ino = st.st_ino;
		snprintf(one.path, sizeof one.path, PCPU_SEGMENT_DEFAULT_DIR "/%s", de->d_name);
		if (out->n == out->cap) {
			size_t cap = out->cap ? 2 * out->cap : 4;
			struct pcpu__seg_dir *p = realloc(out->d, cap * sizeof *p);

			if (!p) {
				closedir(d);
				pcpu__seg_dirs_close(out);
				return pcpu__seg_fail(ENOMEM, "out of memory");
			}
			out->d = p;
			out->cap = cap;
		}
		out->d[out->n++] = one;
	}
	closedir(d);
	return 0;
}

int pcpu__seg_dirs_fd(const struct pcpu__seg_dirs *ds, size_t i)
{
	const struct pcpu__seg_dir *d = &ds->d[i];
	struct stat st;
	int fd;

	if (!d->name[0]) /* the caller's directory, checked at open */
		return fcntl(ds->base, F_DUPFD_CLOEXEC, 0);
	fd = open_user_dir_at(ds->base, d->name, d->uid, &st);
	if (fd >= 0 && (st.st_dev != d->dev || st.st_ino != d->ino)) {
		close(fd);
		errno = EAGAIN; /* replaced since the listing */
		return -1;
	}
	return fd;
}

void pcpu__seg_dirs_close(struct pcpu__seg_dirs *d)
{
	if (d->base >= 0)
		close(d->base);
	free(d->d);
	memset(d, 0, sizeof *d);
	d->base = -1;
}
