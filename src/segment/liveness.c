/* SPDX-License-Identifier: MIT */
/*
 * Whether a segment's writer still runs, from /proc.
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
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segment_internal.h"

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

/* A lock of `type` on `len` bytes of the file from `at`. */
static struct flock lock_at(short type, off_t at, off_t len)
{
	struct flock fl;

	memset(&fl, 0, sizeof fl);
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = at;
	fl.l_len = len;
	return fl;
}

int pcpu__seg_tree_member_join(int fd)
{
	struct flock fl = lock_at(F_RDLCK, PCPU__SEG_TREE_MEMBER_LOCK, 1);
	int b, e;

	if (fcntl(fd, F_OFD_SETLK, &fl) != 0)
		return -1; /* EINVAL: no OFD locks; EAGAIN, EACCES: a leaver's write lock */
	/* A member byte: the first no other open file description locks (a
	 * process that only reads the file may hold read locks there). */
	for (b = 0; b < PCPU__SEG_TREE_MEMBERS; b++) {
		fl = lock_at(F_WRLCK, PCPU__SEG_TREE_MEMBERS_AT + b, 1);
		if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
			return 0;
		if (errno != EAGAIN && errno != EACCES)
			break;
	}
	e = b < PCPU__SEG_TREE_MEMBERS ? errno : EBUSY;
	pcpu__seg_tree_member_drop(fd);
	errno = e;
	return -1;
}

void pcpu__seg_tree_member_drop(int fd)
{
	struct flock fl = lock_at(F_UNLCK, PCPU__SEG_TREE_MEMBERS_AT, PCPU__SEG_TREE_MEMBERS);
	int saved = errno;

	(void)fcntl(fd, F_OFD_SETLK, &fl);
	fl = lock_at(F_UNLCK, PCPU__SEG_TREE_MEMBER_LOCK, 1);
	(void)fcntl(fd, F_OFD_SETLK, &fl);
	errno = saved;
}

/* Whether a process of a tree holds its member lock, of the segment open at
 * fd: 1, 0, or -1 if it cannot tell (a kernel before 3.15 has no OFD
 * locks). `bytes` (header flag PCPU__SEG_F_TREE_WRLOCK): members hold write
 * locks on member bytes, and only a write lock there counts -- a read
 * lock's probe finds no other; a process that can only read the file can
 * take nothing else (format.h). Without it (older writers), any lock on
 * byte 0 counts: such a tree can be kept "live" by any reader of the file,
 * a limit of those versions. */
static int tree_member_lives(int fd, int bytes)
{
	struct flock fl = bytes ? lock_at(F_RDLCK, PCPU__SEG_TREE_MEMBERS_AT, PCPU__SEG_TREE_MEMBERS)
				: lock_at(F_WRLCK, PCPU__SEG_TREE_MEMBER_LOCK, 1);

	if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
		return -1;
	return fl.l_type != F_UNLCK;
}

int pcpu__seg_writer_state(int fd, const struct pcpu__seg_header *h)
{
	int members = fd >= 0 && (h->flags & PCPU__SEG_F_TREE)
			      ? tree_member_lives(fd, (h->flags & PCPU__SEG_F_TREE_WRLOCK) != 0) : 0, st;
	uint64_t start, ns;

	if (members == 1)
		return PCPU__SEG_LIVE;
	if (h->writer_pidns) {
		/* pids of another pid namespace name other processes here. */
		ns = pcpu__seg_pidns();
		if (ns != h->writer_pidns) {
			errno = ns ? EXDEV : errno;
			return PCPU__SEG_UNKNOWN;
		}
	}
	if (pcpu__seg_proc_start((pid_t)h->writer_pid, &start) == 0)
		st = start == h->writer_start ? PCPU__SEG_LIVE : PCPU__SEG_GONE;
	else
		st = errno == ESRCH ? PCPU__SEG_GONE : PCPU__SEG_UNKNOWN;
	/* A tree whose publisher is gone lives on in its other processes:
	 * their lock (above) is the evidence; without OFD locks there is
	 * none either way. */
	if (st == PCPU__SEG_GONE && members < 0) {
		errno = EOPNOTSUPP;
		st = PCPU__SEG_UNKNOWN;
	}
	return st;
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
