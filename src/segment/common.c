/* SPDX-License-Identifier: MIT */
/*
 * What the segment writer and reader share: the error message, segment
 * names and file names, the directory and its safety check, the writer
 * liveness check, and the log-linear bucket bounds.
 *
 * Why a safety check on the directory: the segment lives in a directory
 * other users may write to (/dev/shm is mode 1777). Without the sticky bit
 * anyone could rename or replace our file; a directory owned by another
 * user could be changed under us at any time. So, as OpenSSH does for its
 * key files, we accept a directory only if it is owned by us or root and,
 * when group or others may write to it, has the sticky bit. The check is
 * made on the opened directory (fstat of its descriptor) and every file is
 * then opened relative to that descriptor, so the directory cannot be
 * swapped between the check and the use.
 *
 * Why pid + start time for liveness: a pid alone is reused. The kernel's
 * start time of a process (clock ticks since boot, /proc/<pid>/stat field
 * 22) does not change while the process runs, and a new process with the
 * same pid has a later one. A segment never outlives a boot (tmpfs).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>

#include "internal.h"

#define MSG_CAP 512

static __thread char tls_msg[MSG_CAP];

int pcpu__seg_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
	va_end(ap);
	errno = err;
	return -1;
}

const char *pcpu_segment_error(void)
{
	return tls_msg;
}

const char *pcpu_reader_error(void)
{
	return tls_msg;
}

static int name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

int pcpu__seg_check_name(const char *name)
{
	size_t i;

	if (!name || !*name)
		return pcpu__seg_fail(EINVAL, "segment name is empty");
	if (name[0] == '.' || name[0] == '-')
		return pcpu__seg_fail(EINVAL, "segment name must not start with '.' or '-'");
	for (i = 0; name[i]; i++) {
		if (i >= PCPU__SEG_NAME_MAX)
			return pcpu__seg_fail(EINVAL, "segment name longer than %d bytes",
					      PCPU__SEG_NAME_MAX);
		if (!name_char((unsigned char)name[i]))
			return pcpu__seg_fail(EINVAL,
					      "segment name: byte 0x%02x at offset %zu not allowed "
					      "(letters, digits, '_', '.', '-')",
					      (unsigned char)name[i], i);
	}
	return 0;
}

const char *pcpu__seg_dir(const char *dir)
{
	const char *env;

	if (dir && *dir)
		return dir;
	/* secure_getenv: a set-user-ID program must not let its caller pick
	 * the directory it creates files in. */
	env = secure_getenv(PCPU_SEGMENT_DIR_ENV);
	return env && *env ? env : PCPU_SEGMENT_DEFAULT_DIR;
}

int pcpu__seg_open_dir(const char *dir)
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
	if (st.st_uid != geteuid() && st.st_uid != 0) {
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

int pcpu__seg_parse_file_name(const char *file, pid_t *pid, char *name)
{
	const char *p = file + sizeof PCPU__SEG_FILE_PREFIX - 1;
	unsigned long long v = 0;
	size_t digits = 0;

	if (strncmp(file, PCPU__SEG_FILE_PREFIX, sizeof PCPU__SEG_FILE_PREFIX - 1) != 0)
		return -1;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (digits > 9)
			return -1;
	}
	if (digits == 0 || *p != '.' || v == 0 || v > 0x7fffffff)
		return -1;
	p++;
	if (strlen(p) > PCPU__SEG_NAME_MAX)
		return -1;
	{
		/* Keep the thread's message: a file name that is not ours is
		 * not an error. */
		size_t i;
		if (!*p || p[0] == '.' || p[0] == '-')
			return -1;
		for (i = 0; p[i]; i++)
			if (!name_char((unsigned char)p[i]))
				return -1;
	}
	*pid = (pid_t)v;
	strcpy(name, p);
	return 0;
}

int pcpu__seg_proc_start(pid_t pid, uint64_t *start)
{
	char path[64], buf[1024];
	const char *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		errno = ESRCH;
		return -1;
	}
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0) {
		errno = ESRCH;
		return -1;
	}
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	 * so fields are counted from the last ')'. It is field 2; starttime is
	 * field 22. */
	p = strrchr(buf, ')');
	if (!p) {
		errno = ESRCH;
		return -1;
	}
	for (field = 2; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	if (field != 22) {
		errno = ESRCH;
		return -1;
	}
	*start = strtoull(p, NULL, 10);
	return 0;
}

int pcpu__seg_proc_uid(pid_t pid, uid_t *uid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	if (stat(path, &st) != 0) {
		errno = ESRCH;
		return -1;
	}
	*uid = st.st_uid;
	return 0;
}

int64_t pcpu__seg_loglinear_upper(unsigned p, uint64_t b)
{
	uint64_t g = b >> p, j = b & (((uint64_t)1 << p) - 1);
	uint64_t lo;

	if (g == 0)
		return (int64_t)j;
	lo = (((uint64_t)1 << p) + j) << (g - 1);
	return (int64_t)(lo + ((uint64_t)1 << (g - 1)) - 1);
}

int pcpu__seg_loglinear_valid(unsigned p, uint64_t nbuckets)
{
	uint64_t k;

	if (p > 14 || nbuckets < 2)
		return 0;
	if ((nbuckets - 1) & (((uint64_t)1 << p) - 1))
		return 0;
	k = (nbuckets - 1) >> p;
	/* k = e - p + 2 groups with e, the top bit of max_value, <= 62: the
	 * largest finite bound is below 2^63. */
	return k >= 2 && k <= 64 - (uint64_t)p;
}
