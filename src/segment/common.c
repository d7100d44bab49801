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
 *
 * Liveness is decided only on positive evidence, because "dead" lets
 * readers and publishers delete the file: a writer is gone only when the
 * kernel says there is no such process (kill(pid, 0) fails with ESRCH after
 * /proc/<pid> was not found, or reading it says ESRCH), when the process
 * with that pid started at another time, or when it is a zombie. Any other
 * failure -- EMFILE, ENFILE, ENOMEM, EACCES, a /proc that is not mounted or
 * belongs to another pid namespace -- means "cannot tell", never "dead"
 * (issue 10: with `ulimit -n 5`, a failed open of /proc/<pid>/stat made a
 * live writer "gone", and pruning deleted its file).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>

#include "internal.h"
#include "../error.h"

/* The segment's domain of the library's per-thread messages (src/error.c),
 * shared by the writer and the reader. */
int pcpu__seg_fail(int err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = pcpu__error_vset(PCPU_ERROR_SEGMENT, err, fmt, ap);
	va_end(ap);
	return rc;
}

const char *pcpu_segment_error(void)
{
	return pcpu__error_buffer(PCPU_ERROR_SEGMENT, NULL);
}

const char *pcpu_reader_error(void)
{
	return pcpu__error_buffer(PCPU_ERROR_SEGMENT, NULL);
}

const char *pcpu_reader_reason(int errnum)
{
	switch (errnum) {
	case ENOENT:
		return "missing";
	case ENOTUNIQ:
		return "ambiguous";
	case EACCES:
	case EPERM:
	case ELOOP:
		return "permission";
	case EPROTONOSUPPORT:
		return "incompatible";
	case EBADMSG:
		return "corrupt";
	case ESRCH:
		return "writer_gone";
	case EAGAIN:
		return "not_ready";
	case EFBIG:
		return "too_large";
	default:
		return "error";
	}
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
		/* One directory, named by the caller: checked as such. */
		out->base = pcpu__seg_open_dir(dir);
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

int pcpu__seg_parse_file_name(const char *file, pid_t *pid, char *name)
{
	const char *p = file + sizeof PCPU__SEG_FILE_PREFIX - 1;
	unsigned long long v = 0;
	size_t digits = 0;

	if (strncmp(file, PCPU__SEG_FILE_PREFIX, sizeof PCPU__SEG_FILE_PREFIX - 1) != 0)
		return -1;
	/* Canonical only: one file name per (pid, name). With leading zeros,
	 * anyone could plant pcpu.0<PID>.<NAME>, a second file that parses as
	 * another process's segment. */
	if (*p == '0')
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

/* No /proc/<pid>: the process does not exist if the kernel agrees (our
 * /proc may not be mounted, or show another pid namespace). */
static int no_proc_entry(pid_t pid)
{
	if (kill(pid, 0) != 0 && errno == ESRCH) {
		errno = ESRCH;
		return -1;
	}
	errno = ENOENT; /* it exists, or cannot tell: not evidence */
	return -1;
}

int pcpu__seg_proc_start(pid_t pid, uint64_t *start)
{
	char path[64], buf[1024];
	const char *p;
	ssize_t n;
	int fd, field, e;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (e == ENOENT || e == ESRCH)
			return no_proc_entry(pid);
		errno = e; /* EMFILE, ENFILE, ENOMEM, EACCES...: cannot tell */
		return -1;
	}
	do
		n = read(fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	e = errno;
	close(fd);
	if (n < 0) {
		errno = e; /* ESRCH: it exited (and was reaped) since the open */
		return -1;
	}
	if (n == 0) {
		errno = EIO;
		return -1;
	}
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	 * so fields are counted from the last ')'. It is field 2; the state is
	 * field 3 and starttime field 22. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2]) {
		errno = EIO;
		return -1;
	}
	if (p[2] == 'Z' || p[2] == 'X') {
		errno = ESRCH; /* exited, not yet reaped: it publishes nothing more */
		return -1;
	}
	for (field = 2; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	if (field != 22) {
		errno = EIO;
		return -1;
	}
	*start = strtoull(p, NULL, 10);
	return 0;
}

uint64_t pcpu__seg_pidns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

int pcpu__seg_writer_state(pid_t pid, uint64_t writer_start, uint64_t writer_pidns)
{
	uint64_t start, ns;

	if (writer_pidns) {
		/* pids of another pid namespace name other processes here. */
		ns = pcpu__seg_pidns();
		if (ns != writer_pidns) {
			errno = ns ? EXDEV : errno;
			return PCPU__SEG_UNKNOWN;
		}
	}
	if (pcpu__seg_proc_start(pid, &start) == 0)
		return start == writer_start ? PCPU__SEG_LIVE : PCPU__SEG_GONE;
	return errno == ESRCH ? PCPU__SEG_GONE : PCPU__SEG_UNKNOWN;
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
