/* SPDX-License-Identifier: MIT */
/*
 * Opening a segment (pcpu_reader_open(), pcpu_reader_open_fd()) and the
 * trust checks made before anything of it is believed: a regular file,
 * owned by the user the caller expects, who must be the writer's user (and
 * whom the writer process runs as), with a valid header naming the process
 * and segment its file name names. Also the open reader's accessors.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "reader_internal.h"

/* The writer's state: CLOSED by the flag, else what /proc says -- GONE
 * only on positive evidence, UNKNOWN (with a message) when it cannot tell. */
int pcpu__rd_writer_state(struct pcpu_reader *r, uint32_t flags)
{
	struct pcpu__seg_header h = r->h;
	int st;

	if (flags & PCPU__SEG_F_CLOSED)
		return PCPU_SEGMENT_CLOSED;
	if (!r->check_proc)
		return PCPU_SEGMENT_LIVE;
	h.flags = flags; /* as read now */
	st = pcpu__seg_writer_state(r->fd, &h);
	if (st == PCPU__SEG_UNKNOWN) {
		if (errno == EXDEV)
			pcpu__seg_fail(EXDEV, "segment %s: cannot tell whether its writer (pid %d) runs: "
					      "it is in another pid namespace", r->name, (int)r->h.writer_pid);
		else
			pcpu__seg_fail(errno, "segment %s: cannot tell whether its writer (pid %d) runs: %s",
				       r->name, (int)r->h.writer_pid, strerror(errno));
		return PCPU_SEGMENT_UNKNOWN;
	}
	return st == PCPU__SEG_LIVE ? PCPU_SEGMENT_LIVE : PCPU_SEGMENT_GONE;
}

static pcpu_reader_t *reader_new(void)
{
	struct pcpu_reader *r = calloc(1, sizeof *r);

	if (!r) {
		pcpu__seg_fail(ENOMEM, "out of memory");
		return NULL;
	}
	r->fd = -1;
	strcpy(r->name, "?");
	return r;
}

/* Validates the header of r (fd or memory set) and fills the rest. */
static int reader_init(struct pcpu_reader *r, const char *what)
{
	uint64_t size;

	if (pcpu__rd_read_exact(r, &r->h, sizeof r->h, 0, "header") < 0) {
		if (errno == EBADMSG)
			pcpu__seg_fail(EBADMSG, "%s: not a pcpu statistics segment (too short)", what);
		return -1;
	}
	if (pcpu__rd_check_header_static(&r->h, what) < 0)
		return -1;
	memcpy(r->name, r->h.name, sizeof r->h.name);
	r->name[PCPU__SEG_NAME_MAX] = '\0';
	if (pcpu__rd_size(r, &size) < 0)
		return -1;
	return pcpu__rd_check_header_dynamic(&r->h, size, what);
}

/* Takes ownership of fd. `what` names the file in messages. */
static pcpu_reader_t *open_fd_checked(int fd, const struct pcpu_reader_options *o, const char *what,
				      pid_t name_pid, const char *name)
{
	struct pcpu_reader *r;
	struct stat st;

	if (fstat(fd, &st) != 0) {
		pcpu__seg_fail(errno, "%s: %s", what, strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		pcpu__seg_fail(EPERM, "%s: not a regular file", what);
		close(fd);
		return NULL;
	}
	if (!(o->flags & PCPU_READER_ANY_OWNER) && st.st_uid != pcpu__rd_expected_owner(o)) {
		pcpu__seg_fail(EPERM, "%s: owned by uid %u, expected uid %u (see --owner / --any-owner)",
			       what, (unsigned)st.st_uid, (unsigned)pcpu__rd_expected_owner(o));
		close(fd);
		return NULL;
	}
	r = reader_new();
	if (!r) {
		close(fd);
		return NULL;
	}
	r->fd = fd;
	r->flags = o->flags;
	r->check_proc = 1;
	r->file_owner = st.st_uid;
	r->max_bytes = o->max_bytes ? o->max_bytes : PCPU__RD_DEFAULT_MAX_BYTES;
	{
		/* A segment being created (a file system without O_TMPFILE)
		 * gets its header within microseconds: wait up to 100 ms. */
		int tries = 0, rc;
		struct timespec ms = { 0, 1000000 };

		while ((rc = reader_init(r, what)) < 0 && errno == EAGAIN && ++tries < 100)
			nanosleep(&ms, NULL);
		if (rc < 0)
			goto fail;
	}
	if (r->h.writer_uid != (uint32_t)st.st_uid) {
		pcpu__seg_fail(EPERM, "%s: file owner (uid %u) is not the writer's user (uid %u)", what,
			       (unsigned)st.st_uid, (unsigned)r->h.writer_uid);
		goto fail;
	}
	if (name && (r->h.writer_pid != name_pid || strcmp(r->name, name) != 0)) {
		pcpu__seg_fail(EBADMSG, "%s: the header names another process or segment", what);
		goto fail;
	}
	if (o->flags & PCPU_READER_ANY_OWNER) {
		/* Any owner, but it must be whom the writer process runs as: a
		 * file cannot speak for another user's process. */
		uid_t puid;
		uint64_t start;

		if (pcpu__seg_proc_start(r->h.writer_pid, &start) == 0 && start == r->h.writer_start &&
		    pcpu__seg_proc_uid(r->h.writer_pid, &puid) == 0 && puid != st.st_uid) {
			pcpu__seg_fail(EPERM, "%s: owned by uid %u but process %d runs as uid %u", what,
				       (unsigned)st.st_uid, (int)r->h.writer_pid, (unsigned)puid);
			goto fail;
		}
	}
	return r;
fail:
	{
		int e = errno;
		pcpu_reader_close(r);
		errno = e;
	}
	return NULL;
}

static int open_file_at(int dirfd, const char *file, const char *path_for_msg)
{
	/* The type is checked before the file is opened for reading: a device
	 * is never opened (no ENXIO, no side effect), a FIFO never touched. */
	int fd = pcpu__seg_open_regular(dirfd, file);

	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			return pcpu__seg_fail(ELOOP, "%s: is a symbolic link (refused)", path_for_msg);
		if (e == EPERM)
			return pcpu__seg_fail(EPERM, "%s: not a regular file", path_for_msg);
		if (e == EACCES)
			return pcpu__seg_fail(EACCES, "%s: permission denied", path_for_msg);
		return pcpu__seg_fail(e, "%s: %s", path_for_msg, strerror(e));
	}
	return fd;
}

pcpu_reader_t *pcpu_reader_open_fd(int fd, const struct pcpu_reader_options *opts)
{
	struct pcpu_reader_options o;
	int dfd;

	memset(&o, 0, sizeof o);
	if (opts)
		o = *opts;
	if (fd < 0) {
		pcpu__seg_fail(EBADF, "bad file descriptor");
		return NULL;
	}
	dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0) {
		pcpu__seg_fail(errno, "dup: %s", strerror(errno));
		return NULL;
	}
	return open_fd_checked(dfd, &o, "segment", 0, NULL);
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* Opens candidate c with the reader's checks. */
pcpu_reader_t *pcpu__rd_open_candidate(const struct pcpu__seg_dirs *ds, const struct pcpu__rd_candidate *c,
				     const struct pcpu_reader_options *o)
{
	char path[512];
	pcpu_reader_t *r = NULL;
	int dfd, fd;

	snprintf(path, sizeof path, "%.320s/%s", ds->d[c->dir].path, c->file);
	dfd = pcpu__seg_dirs_fd(ds, c->dir);
	if (dfd < 0) {
		pcpu__seg_fail(errno, "%s: %s", ds->d[c->dir].path, strerror(errno));
		return NULL;
	}
	fd = open_file_at(dfd, c->file, path);
	if (fd >= 0)
		r = open_fd_checked(fd, o, path, c->pid, c->name);
	else if (errno == ENOENT)
		pcpu__seg_fail(ENOENT, "no segment file %s", path);
	{
		int e = errno;
		close(dfd);
		errno = e;
	}
	return r;
}

pcpu_reader_t *pcpu_reader_open(const char *target, const struct pcpu_reader_options *opts)
{
	struct pcpu_reader_options o;
	struct pcpu__seg_dirs ds;
	struct pcpu__rd_candidate *c = NULL, *pick = NULL;
	char name[PCPU__SEG_NAME_MAX + 1];
	const char *file = NULL, *nm = NULL;
	pid_t pid = 0;
	size_t n = 0, i, nok = 0, nlive = 0;
	pcpu_reader_t *r = NULL;
	int fd;

	memset(&o, 0, sizeof o);
	if (opts)
		o = *opts;
	if (!target || !*target) {
		pcpu__seg_fail(EINVAL, "no segment given");
		return NULL;
	}
	if (strchr(target, '/')) {
		fd = open_file_at(AT_FDCWD, target, target);
		return fd < 0 ? NULL : open_fd_checked(fd, &o, target, 0, NULL);
	}
	if (pcpu__seg_parse_file_name(target, &pid, name) == 0) {
		file = target;
	} else if (all_digits(target)) {
		unsigned long v = strtoul(target, NULL, 10);
		/* Digits with a leading zero name no pid (canonical form). */
		if (v == 0 || v > 0x7fffffff || target[0] == '0' || strlen(target) > 10) {
			pcpu__seg_fail(ENOENT, "no segment of process %s", target);
			return NULL;
		}
		pid = (pid_t)v;
	} else {
		if (pcpu__seg_check_name(target) < 0)
			return NULL;
		nm = target;
	}
	if (pcpu__rd_dirs_open(&o, &ds) < 0)
		return NULL;
	if (pcpu__rd_scan_dirs(&ds, &o, file, nm, file ? 0 : pid, &c, &n) < 0)
		goto out;
	if (n == 0) {
		if (file)
			pcpu__seg_fail(ENOENT, "no segment file %s in %s", file, ds.desc);
		else if (pid)
			pcpu__seg_fail(ENOENT, "no segment of process %d in %s", (int)pid, ds.desc);
		else
			pcpu__seg_fail(ENOENT, "no segment named \"%s\" in %s", target, ds.desc);
		goto out;
	}
	/* Files of owners the caller does not accept cannot make a name
	 * ambiguous (in a directory others may write to, anyone could plant
	 * one); if there are only such files, opening one says why. */
	for (i = 0; i < n; i++)
		if (c[i].owner_ok) {
			nok++;
			pick = &c[i];
		}
	if (nok == 0) {
		pick = &c[0];
	} else if (nok > 1) {
		pick = NULL;
		for (i = 0; i < n; i++)
			if (c[i].owner_ok && pcpu__rd_maybe_live(&ds, &c[i])) {
				nlive++;
				pick = &c[i];
			}
		if (nlive != 1) {
			char list[256] = "";
			size_t len = 0;
			for (i = 0; i < n && len + 40 < sizeof list; i++)
				if (c[i].owner_ok)
					len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
								len ? ", " : "", c[i].file);
			pcpu__seg_fail(ENOTUNIQ, "\"%s\" matches %zu segments (%s)%s", target, nok, list,
				       file ? "" : ": give a pid or a file name");
			goto out;
		}
	}
	r = pcpu__rd_open_candidate(&ds, pick, &o);
out:
	{
		int e = errno;
		free(c);
		pcpu__seg_dirs_close(&ds);
		errno = e;
	}
	return r;
}

pcpu_reader_t *pcpu__reader_open_mem(const void *buf, size_t len, size_t max_bytes)
{
	struct pcpu_reader *r = reader_new();

	if (!r)
		return NULL;
	r->mem = buf;
	r->mem_len = len;
	r->flags = PCPU_READER_ANY_OWNER | PCPU_READER_ALLOW_STALE;
	r->max_bytes = max_bytes ? max_bytes : PCPU__RD_DEFAULT_MAX_BYTES;
	if (reader_init(r, "segment") < 0) {
		int e = errno;
		free(r);
		errno = e;
		return NULL;
	}
	return r;
}

void pcpu__reader_set_read_hook(pcpu_reader_t *r,
				void (*fn)(void *ctx, unsigned n, uint64_t off, size_t len), void *ctx)
{
	r->read_hook = fn;
	r->read_hook_ctx = ctx;
}

uint64_t pcpu__reader_syscalls(const pcpu_reader_t *r)
{
	return __atomic_load_n(&r->nsyscalls, __ATOMIC_RELAXED);
}

uint64_t pcpu__reader_entries_copied(const pcpu_reader_t *r)
{
	return __atomic_load_n(&r->nentries, __ATOMIC_RELAXED);
}

void pcpu_reader_close(pcpu_reader_t *r)
{
	if (!r)
		return;
	if (r->cache)
		r->cache_free(r->cache);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

const char *pcpu_reader_name(const pcpu_reader_t *r)
{
	return r ? r->name : "";
}

pid_t pcpu_reader_pid(const pcpu_reader_t *r)
{
	return r ? (pid_t)r->h.writer_pid : 0;
}

unsigned pcpu_reader_nslots(const pcpu_reader_t *r)
{
	return r ? r->h.nslots : 0;
}

unsigned pcpu_reader_owned_slots(const pcpu_reader_t *r)
{
	return r ? r->h.owned_slots : 0;
}

unsigned pcpu_reader_slot_index(const pcpu_reader_t *r)
{
	return r ? r->h.slot_index : 0;
}

int pcpu_reader_set_max_bytes(pcpu_reader_t *r, size_t max_bytes)
{
	if (!r)
		return pcpu__seg_fail(EINVAL, "reader is NULL");
	r->max_bytes = max_bytes ? max_bytes : PCPU__RD_DEFAULT_MAX_BYTES;
	return 0;
}

uint64_t pcpu_reader_created_ns(const pcpu_reader_t *r)
{
	return r ? r->h.created_ns : 0;
}

int pcpu_reader_state(pcpu_reader_t *r)
{
	struct pcpu__seg_header h;
	uint64_t size;

	if (!r)
		return pcpu__seg_fail(EINVAL, "reader is NULL");
	if (pcpu__rd_read_header(r, &h, &size) < 0)
		return -1;
	return pcpu__rd_writer_state(r, __atomic_load_n(&h.flags, __ATOMIC_RELAXED));
}

/* The reader's view of the segment's per-thread message (error.c). */
const char *pcpu_reader_error(void)
{
	return pcpu__seg_message();
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
