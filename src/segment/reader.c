/* SPDX-License-Identifier: MIT */
/*
 * The statistics segment, reader side (pcpu/reader.h): opening, listing and
 * snapshotting another process's segment, which is untrusted input.
 *
 * Why pread(2) and no mapping: a mapping of a file that another process can
 * truncate raises SIGBUS on the first access past the new end, and a library
 * may not install signal handlers. Copying with pread turns a truncation
 * into a short read, i.e. an error code. It also gives the "copy, then
 * validate, then use" discipline for free: nothing is ever read twice from
 * the shared file and trusted the second time.
 *
 * A snapshot, step by step (`attempt` loop, at most MAX_ATTEMPTS times):
 *
 *   H1 = header                    validate; generation g1
 *   E1 = entries [0, used)         one pread
 *   S  = strings [0, used)         one pread; blobs are parsed from this copy
 *   parse and validate E1          families, series, links, value ranges
 *   values                         per chunk, the extents of data (SEEK_DATA,
 *                                  SEEK_HOLE), and per run of nearby values
 *                                  one pread per region an extent meets
 *   E2, H2 = entries, header       again, in this order
 *
 * An entry is kept only if E1 and E2 hold the same 64 bytes and an even
 * sequence number: the writer changes an entry's sequence before touching
 * the entry, its blob or (on removal) its storage, and never reuses either
 * before that, so an unchanged entry's blob and values were read while they
 * belonged to it (see writer.c). Entries that changed are series or
 * families being added or removed during the read; they are left out and
 * counted. If g1 == g2 (even), nothing changed at all: the snapshot is
 * "stable", and then anything that does not fit -- a series without its
 * family, say -- is corruption. Otherwise the read is retried a bounded
 * number of times, and the last attempt keeps what is consistent.
 *
 * Why H2 after E2 (a seqlock reader's second load of the sequence comes
 * after its data loads): a copy of the directory is not atomic. A change
 * that begins while E2 is being copied can leave it torn -- a family
 * removal frees the series' entries, then the family's, so a copy can hold
 * a series (copied before it was freed) and not its family (copied after).
 * E1 and E2 then agree on the series and not on the family. Read before E2,
 * H2 would still show g1 and call that stable: corruption that is not
 * there (issue 10: 65 false errors in 99,650 snapshots). Read after E2, it
 * shows the change.
 *
 * Ordering: the copies are separate system calls, made in program order; a
 * C11 fence after each orders them as seen by this thread, and the writer
 * publishes with release stores. (On x86 the kernel's copies are ordered
 * anyway.)
 *
 * Validation is strict: an entry that did not change during the read and is
 * invalid in any way (an offset past the end, a count beyond the format's
 * limits, a string without its NUL, a name that breaks the Prometheus rules,
 * value ranges that overlap) fails the whole snapshot with EBADMSG and a
 * message naming the entry -- never a partial result that hides it.
 * Sizes come from the header and are checked against the file's size with
 * overflow-checked arithmetic before anything is allocated or read; every
 * allocation and read of a snapshot, and every system call on the values,
 * is charged against max_bytes (read_chunk()).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/reader.h>

#include "../stats/internal.h"
#include "internal.h"

#define DEFAULT_MAX_BYTES ((size_t)4 << 30)
#define MAX_ATTEMPTS 4
/* Values closer than this are read with one pread per slot. */
#define RUN_GAP 65536
/* What a system call on the values (pread, lseek) counts against the
 * budget, and what visiting a region of data does: a snapshot's work is
 * bounded by max_bytes, not only its reads and allocations. */
#define SYSCALL_CHARGE 4096
#define REGION_CHARGE 64
#define MAX_NSLOTS 65536
#define MAX_STRIDE_SHIFT 40

struct pcpu_reader {
	int fd; /* -1: memory source (tests, fuzzing) */
	const unsigned char *mem;
	size_t mem_len;
	/* tests: runs before each read (its number, offset and length) */
	void (*read_hook)(void *ctx, unsigned n, uint64_t off, size_t len);
	void *read_hook_ctx;
	unsigned nreads;
	uint64_t nsyscalls; /* preads and lseeks on the file (tests) */
	unsigned flags;
	int check_proc;
	uid_t file_owner;
	size_t max_bytes;
	struct pcpu__seg_header h; /* as validated at open */
	char name[PCPU__SEG_NAME_MAX + 1];
};

/* Internal entry points for tests and the fuzzer (not exported). */
PCPU_HIDDEN pcpu_reader_t *pcpu__reader_open_mem(const void *buf, size_t len, size_t max_bytes);
PCPU_HIDDEN uint64_t pcpu__reader_syscalls(const pcpu_reader_t *r);
PCPU_HIDDEN void pcpu__reader_set_read_hook(pcpu_reader_t *r,
					    void (*fn)(void *ctx, unsigned n, uint64_t off, size_t len),
					    void *ctx);

/* ---- input ------------------------------------------------------------------------ */

static ssize_t rd_pread(struct pcpu_reader *r, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	if (r->read_hook)
		r->read_hook(r->read_hook_ctx, r->nreads++, off, len);
	r->nsyscalls++;
	if (r->fd < 0) {
		if (off >= r->mem_len)
			return 0;
		if (len > r->mem_len - off)
			len = (size_t)(r->mem_len - off);
		memcpy(buf, r->mem + off, len);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		return (ssize_t)len;
	}
	if (off > (uint64_t)INT64_MAX - len)
		return 0;
	while (done < len) {
		ssize_t n = pread(r->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return (ssize_t)done;
}

static int read_exact(struct pcpu_reader *r, void *buf, size_t len, uint64_t off, const char *what)
{
	ssize_t n = rd_pread(r, buf, len, off);

	if (n < 0)
		return pcpu__seg_fail(errno, "segment %s: reading %s: %s", r->name, what, strerror(errno));
	if ((size_t)n != len)
		return pcpu__seg_fail(EBADMSG, "segment %s: truncated (%s at offset %llu)", r->name,
				      what, (unsigned long long)off);
	return 0;
}

/* 0 with *size set, or -1. The -1 is returned here, not passed on from
 * pcpu__seg_fail() (another file): callers read *size after a test for -1,
 * and the compiler must see that no other value leaves it unset. */
static int rd_size(struct pcpu_reader *r, uint64_t *size)
{
	struct stat st;

	if (r->fd < 0) {
		*size = r->mem_len;
		return 0;
	}
	if (fstat(r->fd, &st) != 0) {
		pcpu__seg_fail(errno, "segment %s: fstat: %s", r->name, strerror(errno));
		return -1;
	}
	*size = st.st_size < 0 ? 0 : (uint64_t)st.st_size;
	return 0;
}

/* ---- the memory budget ------------------------------------------------------------ */

struct budget {
	size_t left;
	const char *name;
};

static int charge(struct budget *b, uint64_t n)
{
	if (n > b->left)
		return pcpu__seg_fail(EFBIG, "segment %s: reading it needs more than the %s limit",
				      b->name, "max_bytes");
	b->left -= (size_t)n;
	return 0;
}

static void *balloc(struct budget *b, uint64_t n)
{
	void *p;

	if (charge(b, n) < 0)
		return NULL;
	p = calloc(1, n ? (size_t)n : 1);
	if (!p)
		pcpu__seg_fail(ENOMEM, "out of memory");
	return p;
}

/* ---- the header ------------------------------------------------------------------ */

static int is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/* Checks the fields that never change after publication. */
static int check_header_static(const struct pcpu__seg_header *h, const char *what)
{
	uint64_t ent_end, str_end, span;
	size_t i;

	if (memcmp(h->magic, PCPU__SEG_MAGIC, 8) != 0) {
		static const char zero[8];
		if (memcmp(h->magic, zero, 8) == 0)
			return pcpu__seg_fail(EAGAIN, "%s: the segment is still being created", what);
		return pcpu__seg_fail(EBADMSG, "%s: not a pcpu statistics segment (bad magic)", what);
	}
	if (h->byte_order != PCPU__SEG_BYTE_ORDER)
		return pcpu__seg_fail(EPROTONOSUPPORT, "%s: written with another byte order", what);
	/* Before any other field: another major version lays them out, or
	 * gives them a meaning, differently (1.x had no mirror regions). */
	if (h->version_major != PCPU__SEG_VERSION_MAJOR)
		return pcpu__seg_fail(EPROTONOSUPPORT,
				      "%s: segment format %u.%u is not supported by this reader "
				      "(it reads %u.x)",
				      what, h->version_major, h->version_minor, PCPU__SEG_VERSION_MAJOR);
	if (h->header_size < sizeof *h || h->header_size > PCPU__SEG_HEADER_REGION)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (header_size %u)", what,
				      h->header_size);
	if (h->nslots == 0 || h->nslots > MAX_NSLOTS)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (nslots %u)", what, h->nslots);
	if (h->slot_index != 1 && h->slot_index != 2)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (slot_index %u)", what,
				      h->slot_index);
	if (!is_pow2(h->slot_stride) || h->slot_stride < 16 ||
	    h->slot_stride > ((uint64_t)1 << MAX_STRIDE_SHIFT))
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (slot_stride %llu)", what,
				      (unsigned long long)h->slot_stride);
	/* nslots slot regions and their nslots mirrors: <= 2^57, no overflow. */
	span = 2 * (uint64_t)h->nslots * h->slot_stride;
	if (h->chunk_span != span)
		return pcpu__seg_fail(EBADMSG,
				      "%s: corrupted header (chunk_span %llu, not 2 * nslots * "
				      "slot_stride = %llu)",
				      what, (unsigned long long)h->chunk_span, (unsigned long long)span);
	if (h->entry_size < PCPU__SEG_ENTRY_SIZE || h->entry_size > 4096 || h->entry_size % 8)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (entry_size %u)", what,
				      h->entry_size);
	if (h->entries_offset < h->header_size ||
	    __builtin_mul_overflow(h->entries_capacity, (uint64_t)h->entry_size, &ent_end) ||
	    __builtin_add_overflow(ent_end, h->entries_offset, &ent_end) ||
	    ent_end > h->strings_offset ||
	    __builtin_add_overflow(h->strings_offset, h->strings_capacity, &str_end) ||
	    str_end > h->data_offset || h->data_offset > (uint64_t)INT64_MAX)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (regions overlap or overflow)",
				      what);
	if (h->writer_pid <= 0)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (writer pid)", what);
	for (i = 0; i < sizeof h->name && h->name[i]; i++)
		;
	if (i == 0 || i == sizeof h->name)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (name not terminated)", what);
	{
		char n[PCPU__SEG_NAME_MAX + 1];
		memcpy(n, h->name, i);
		n[i] = '\0';
		if (pcpu__seg_check_name(n) < 0)
			return pcpu__seg_fail(EBADMSG, "%s: corrupted header (invalid name)", what);
	}
	return 0;
}

/* Dynamic fields, against the static ones and the file's size. */
static int check_header_dynamic(const struct pcpu__seg_header *h, uint64_t size, const char *what)
{
	uint64_t chunks_max;

	if (h->entries_used > h->entries_capacity || h->strings_used > h->strings_capacity)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (directory counts)", what);
	if (size < h->data_offset)
		return pcpu__seg_fail(EBADMSG, "%s: truncated (file of %llu bytes, data at %llu)",
				      what, (unsigned long long)size,
				      (unsigned long long)h->data_offset);
	chunks_max = (size - h->data_offset) / h->chunk_span;
	if (h->nchunks > chunks_max)
		return pcpu__seg_fail(EBADMSG, "%s: truncated (%llu chunks declared, %llu in the file)",
				      what, (unsigned long long)h->nchunks,
				      (unsigned long long)chunks_max);
	return 0;
}

static int same_static(const struct pcpu__seg_header *a, const struct pcpu__seg_header *b)
{
	return memcmp(a->magic, b->magic, 8) == 0 && a->version_major == b->version_major &&
	       a->header_size == b->header_size && a->writer_pid == b->writer_pid &&
	       a->writer_uid == b->writer_uid && a->writer_start == b->writer_start &&
	       a->nslots == b->nslots && a->slot_stride == b->slot_stride &&
	       a->chunk_span == b->chunk_span && a->data_offset == b->data_offset &&
	       a->entries_offset == b->entries_offset && a->entries_capacity == b->entries_capacity &&
	       a->entry_size == b->entry_size && a->strings_offset == b->strings_offset &&
	       a->strings_capacity == b->strings_capacity && memcmp(a->name, b->name, sizeof a->name) == 0;
}

static int read_header(struct pcpu_reader *r, struct pcpu__seg_header *h, uint64_t *size)
{
	if (read_exact(r, h, sizeof *h, 0, "header") < 0)
		return -1;
	if (!same_static(h, &r->h))
		return pcpu__seg_fail(EBADMSG, "segment %s: corrupted (header changed)", r->name);
	if (rd_size(r, size) < 0)
		return -1;
	return check_header_dynamic(h, *size, r->name);
}

/* ---- opening --------------------------------------------------------------------- */

/* The writer's state: CLOSED by the flag, else what /proc says -- GONE
 * only on positive evidence, UNKNOWN (with a message) when it cannot tell. */
static int writer_state(struct pcpu_reader *r, uint32_t flags)
{
	int st;

	if (flags & PCPU__SEG_F_CLOSED)
		return PCPU_SEGMENT_CLOSED;
	if (!r->check_proc)
		return PCPU_SEGMENT_LIVE;
	st = pcpu__seg_writer_state(r->h.writer_pid, r->h.writer_start, r->h.writer_pidns);
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

	if (read_exact(r, &r->h, sizeof r->h, 0, "header") < 0) {
		if (errno == EBADMSG)
			pcpu__seg_fail(EBADMSG, "%s: not a pcpu statistics segment (too short)", what);
		return -1;
	}
	if (check_header_static(&r->h, what) < 0)
		return -1;
	memcpy(r->name, r->h.name, sizeof r->h.name);
	r->name[PCPU__SEG_NAME_MAX] = '\0';
	if (rd_size(r, &size) < 0)
		return -1;
	return check_header_dynamic(&r->h, size, what);
}

static uid_t expected_owner(const struct pcpu_reader_options *o)
{
	return (o->flags & PCPU_READER_OWNER) ? o->owner : geteuid();
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
	if (!(o->flags & PCPU_READER_ANY_OWNER) && st.st_uid != expected_owner(o)) {
		pcpu__seg_fail(EPERM, "%s: owned by uid %u, expected uid %u (see --owner / --any-owner)",
			       what, (unsigned)st.st_uid, (unsigned)expected_owner(o));
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
	r->max_bytes = o->max_bytes ? o->max_bytes : DEFAULT_MAX_BYTES;
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

struct candidate {
	char file[96];
	char name[PCPU__SEG_NAME_MAX + 1];
	pid_t pid;
	size_t dir;   /* index in the pcpu__seg_dirs */
	uid_t owner;  /* of the file (lstat at the scan) */
	int owner_ok; /* a regular file of an owner the caller accepts */
	int too_small; /* such a file, shorter than a header (lstat at the scan) */
};

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int owner_accepted(const struct pcpu_reader_options *o, uid_t uid)
{
	return (o->flags & PCPU_READER_ANY_OWNER) || uid == expected_owner(o);
}

/* Opens the reader's directories: the one named, or the per-user ones of
 * the owners the options accept. */
static int dirs_open(const struct pcpu_reader_options *o, struct pcpu__seg_dirs *ds)
{
	return pcpu__seg_dirs_open(o->dir, (o->flags & PCPU_READER_ANY_OWNER) != 0, expected_owner(o),
				   ds);
}

/* Adds directory k's entry `fname` to the candidates if it is a segment
 * file that matches (file name, or name and/or pid). 0, or -1 (ENOMEM). */
static int add_candidate(const struct pcpu_reader_options *o, int dfd, size_t k, const char *fname,
			 const char *file, const char *name, pid_t pid, struct candidate **c, size_t *n,
			 size_t *cap)
{
	struct candidate one;
	struct stat st;

	if (pcpu__seg_parse_file_name(fname, &one.pid, one.name) < 0)
		return 0;
	if ((file && strcmp(file, fname) != 0) || (name && strcmp(name, one.name) != 0) ||
	    (pid && pid != one.pid))
		return 0;
	if (strlen(fname) >= sizeof one.file)
		return 0;
	strcpy(one.file, fname);
	one.dir = k;
	one.owner = 0;
	one.owner_ok = 0;
	one.too_small = 0;
	if (fstatat(dfd, fname, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		one.owner = st.st_uid;
		one.owner_ok = S_ISREG(st.st_mode) && owner_accepted(o, st.st_uid);
		one.too_small = one.owner_ok && st.st_size < (off_t)sizeof(struct pcpu__seg_header);
	} else if (file) {
		return 0; /* looked up by name: not there */
	}
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct candidate *p = realloc(*c, nc * sizeof *p);
		if (!p)
			return pcpu__seg_fail(ENOMEM, "out of memory");
		*c = p;
		*cap = nc;
	}
	(*c)[(*n)++] = one;
	return 0;
}

/* Collects the segment files of the directories that match: a file name
 * (`file`), or a name and/or pid. A file name is looked up directly in
 * each directory, never by reading it whole: opening each of n listed
 * segments by its file name then costs O(n), not O(n^2) (20,000 junk
 * files made one scrape take minutes). */
static int scan_dirs(const struct pcpu__seg_dirs *ds, const struct pcpu_reader_options *o,
		     const char *file, const char *name, pid_t pid, struct candidate **out, size_t *n)
{
	struct candidate *c = NULL;
	size_t cap = 0, k;

	*n = 0;
	*out = NULL;
	for (k = 0; k < ds->n; k++) {
		struct dirent *de;
		DIR *d;
		int dfd = pcpu__seg_dirs_fd(ds, k), rc = 0;

		if (dfd < 0 && ds->d[k].name[0] &&
		    (errno == ENOENT || errno == EAGAIN || errno == EPERM || errno == ELOOP || errno == ENOTDIR))
			continue; /* a per-user directory that went away or changed */
		if (dfd >= 0 && file) {
			rc = add_candidate(o, dfd, k, file, file, name, pid, &c, n, &cap);
			close(dfd);
			if (rc < 0) {
				free(c);
				return -1;
			}
			continue;
		}
		d = dfd < 0 ? NULL : fdopendir(dfd);
		if (!d) {
			/* EMFILE and the like: an error, not an empty directory. */
			int e = errno;
			if (dfd >= 0)
				close(dfd);
			free(c);
			return pcpu__seg_fail(e, "%s: %s", ds->d[k].path, strerror(e));
		}
		while (rc == 0 && (de = readdir(d)) != NULL)
			rc = add_candidate(o, dirfd(d), k, de->d_name, file, name, pid, &c, n, &cap);
		closedir(d);
		if (rc < 0) {
			free(c);
			return -1;
		}
	}
	*out = c;
	return 0;
}

/* Whether the segment file may have a live writer: only a closed segment
 * or one whose writer is gone on positive evidence is not a candidate. */
static int maybe_live(const struct pcpu__seg_dirs *ds, const struct candidate *c)
{
	struct pcpu__seg_header h;
	int dfd, fd, st;

	dfd = pcpu__seg_dirs_fd(ds, c->dir);
	if (dfd < 0)
		return 1;
	fd = pcpu__seg_open_regular(dfd, c->file);
	close(dfd);
	if (fd < 0)
		return 1; /* unreadable: let the open say why */
	if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h.magic, PCPU__SEG_MAGIC, 8) != 0 ||
	    h.writer_pid != c->pid) {
		close(fd);
		return 1;
	}
	close(fd);
	if (h.flags & PCPU__SEG_F_CLOSED)
		return 0;
	st = pcpu__seg_writer_state(c->pid, h.writer_start, h.writer_pidns);
	return st != PCPU__SEG_GONE;
}

/* Opens candidate c with the reader's checks. */
static pcpu_reader_t *open_candidate(const struct pcpu__seg_dirs *ds, const struct candidate *c,
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
	struct candidate *c = NULL, *pick = NULL;
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
	if (dirs_open(&o, &ds) < 0)
		return NULL;
	if (scan_dirs(&ds, &o, file, nm, file ? 0 : pid, &c, &n) < 0)
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
			if (c[i].owner_ok && maybe_live(&ds, &c[i])) {
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
	r = open_candidate(&ds, pick, &o);
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
	r->max_bytes = max_bytes ? max_bytes : DEFAULT_MAX_BYTES;
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
	return r->nsyscalls;
}

void pcpu_reader_close(pcpu_reader_t *r)
{
	if (!r)
		return;
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

unsigned pcpu_reader_slot_index(const pcpu_reader_t *r)
{
	return r ? r->h.slot_index : 0;
}

int pcpu_reader_state(pcpu_reader_t *r)
{
	struct pcpu__seg_header h;
	uint64_t size;

	if (!r)
		return pcpu__seg_fail(EINVAL, "reader is NULL");
	if (read_header(r, &h, &size) < 0)
		return -1;
	return writer_state(r, __atomic_load_n(&h.flags, __ATOMIC_RELAXED));
}

/* ---- snapshot: parsing the directory -------------------------------------------- */

struct fam {
	uint32_t idx;
	const struct pcpu__seg_entry *e; /* in E1 */
	const char *name, *help, *unit;
	const char **label_names;
	int64_t *upper; /* nbuckets - 1 bounds (histograms) */
	uint32_t *exported; /* the exposed ones (NULL: all) */
	size_t nexport;
	int native, schema; /* exponential: PCPU_SNAPSHOT_NATIVE's fields */
	int pairs;          /* 2.4 histogram: (count, sum) per bucket */
	int info;           /* 2.4: an info family (PCPU_SNAPSHOT_INFO) */
	int32_t native_index;
	size_t first, count; /* its kept series in build()'s sorted array */
	int bad;        /* invalid: message in msg */
	char msg[160];
};

struct ser {
	uint32_t idx;
	const struct pcpu__seg_entry *e;
	uint64_t loc, serial; /* sort keys, copied out of *e: (chunk << 40) + offset */
	const char **values;
	struct fam *fam;
	int bad;
	char msg[160];
	/* values */
	uint64_t acc0;      /* counter or gauge value, histogram sum */
	uint64_t *counts;   /* histogram buckets */
	int64_t *slots;     /* per-slot (word + mirror), on request */
	int group;          /* 2.3 GROUP_SERIES: the value is a GROUP entry's member */
};

struct parse {
	struct pcpu_reader *r;
	struct budget *b;
	const struct pcpu__seg_header *h;
	const unsigned char *E; /* entries copy */
	uint64_t used;          /* entries in E */
	const char *S;          /* strings copy */
	uint64_t slen;
	struct fam *fams;
	size_t nfams;
	struct ser *sers;
	size_t nsers;
	unsigned flags;
};

#define ENTRY_AT(p, i) ((const struct pcpu__seg_entry *)((p)->E + (uint64_t)(i) * (p)->h->entry_size))

/* Marks a parsed entry invalid; the message is used only if the entry turns
 * out not to have changed during the read (else it was in flux). */
static void set_bad(int *bad, char *msg, size_t cap, const char *text)
{
	*bad = 1;
	snprintf(msg, cap, "%s", text);
}
#define BAD(x, text) set_bad(&(x)->bad, (x)->msg, sizeof (x)->msg, (text))

/* Next NUL-terminated string of the blob: s, or NULL if not terminated. */
static const char *blob_str(const char *blob, uint32_t len, uint32_t *pos)
{
	const char *s, *nul;

	if (*pos >= len)
		return NULL;
	s = blob + *pos;
	nul = memchr(s, '\0', len - *pos);
	if (!nul)
		return NULL;
	*pos += (uint32_t)(nul - s) + 1;
	return s;
}

/* The blob of an entry, if it lies inside the strings copy. */
static const char *entry_blob(const struct parse *p, const struct pcpu__seg_entry *e)
{
	uint64_t end;

	if (e->blob_len > PCPU__SEG_BLOB_MAX ||
	    __builtin_add_overflow(e->blob_off, (uint64_t)e->blob_len, &end) || end > p->slen)
		return NULL;
	return p->S + e->blob_off;
}

/* Room for a family's exported bucket indices, charged to the budget. */
static int alloc_exported(struct parse *p, struct fam *f, uint32_t n)
{
	if (charge(p->b, (uint64_t)n * sizeof *f->exported) < 0)
		return -1;
	f->exported = malloc((size_t)n * sizeof *f->exported);
	if (!f->exported)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	return 0;
}

static uint64_t value_size(const struct pcpu__seg_entry *fe);

static int parse_family(struct parse *p, struct fam *f)
{
	const struct pcpu__seg_entry *e = f->e;
	const char *blob;
	uint32_t pos = 0, l, scheme;

	if (e->type < PCPU_METRIC_COUNTER || e->type > PCPU_METRIC_HISTOGRAM)
		return BAD(f, "unknown metric type"), 0;
	if (e->scale_exp10 > PCPU_STATS_SCALE_MAX || e->scale_exp10 < -PCPU_STATS_SCALE_MAX)
		return BAD(f, "scale out of range"), 0;
	if (e->nlabels > PCPU_STATS_LABELS_MAX)
		return BAD(f, "too many labels"), 0;
	if (e->family_id == 0)
		return BAD(f, "family id 0"), 0;
	blob = entry_blob(p, e);
	if (!blob)
		return BAD(f, "blob outside the string table"), 0;
	f->name = blob_str(blob, e->blob_len, &pos);
	if (e->flags & PCPU__SEG_E_HAS_HELP)
		f->help = blob_str(blob, e->blob_len, &pos);
	f->unit = blob_str(blob, e->blob_len, &pos);
	if (!f->name || !f->unit || ((e->flags & PCPU__SEG_E_HAS_HELP) && !f->help))
		return BAD(f, "string not terminated"), 0;
	if (pcpu_stats_check_metric_name(f->name) < 0)
		return BAD(f, pcpu_stats_error()), 0;
	if (f->help && pcpu__check_help(f->help) < 0)
		return BAD(f, pcpu_stats_error()), 0;
	if (*f->unit && pcpu__check_unit(f->name, f->unit) < 0)
		return BAD(f, pcpu_stats_error()), 0;
	if (!*f->unit)
		f->unit = NULL;
	if (e->nlabels) {
		f->label_names = balloc(p->b, (uint64_t)e->nlabels * sizeof *f->label_names);
		if (!f->label_names)
			return -1;
	}
	for (l = 0; l < e->nlabels; l++) {
		uint32_t k;

		f->label_names[l] = blob_str(blob, e->blob_len, &pos);
		if (!f->label_names[l])
			return BAD(f, "label name not terminated"), 0;
		if (pcpu_stats_check_label_name(f->label_names[l]) < 0)
			return BAD(f, pcpu_stats_error()), 0;
		if (e->type == PCPU_METRIC_HISTOGRAM && strcmp(f->label_names[l], "le") == 0)
			return BAD(f, "label \"le\" in a histogram"), 0;
		for (k = 0; k < l; k++)
			if (strcmp(f->label_names[k], f->label_names[l]) == 0)
				return BAD(f, "label name twice"), 0;
	}
	if (e->flags & PCPU__SEG_E_INFO) { /* 2.4: a gauge x_info, no unit or scale */
		if (e->type != PCPU_METRIC_GAUGE || f->unit || e->scale_exp10 != 0 ||
		    !pcpu__info_name_len(f->name, PCPU_SNAPSHOT_INFO))
			return BAD(f, "info flag on a family that is not a gauge x_info"), 0;
		f->info = 1;
	}
	if (e->type != PCPU_METRIC_HISTOGRAM) {
		if (pos != e->blob_len)
			return BAD(f, "trailing bytes in blob"), 0;
		return 0;
	}
	/* Histograms: the bucket layout. */
	if (e->u32a & ~(PCPU__SEG_HIST_PAIRS | 0xffu))
		return BAD(f, "unknown histogram scheme"), 0;
	f->pairs = (e->u32a & PCPU__SEG_HIST_PAIRS) != 0;
	scheme = e->u32a & 0xffu;
	if (e->nbuckets < 2 || value_size(e) > p->h->slot_stride)
		return BAD(f, "bad bucket count"), 0;
	if (charge(p->b, (uint64_t)(e->nbuckets - 1) * 8) < 0)
		return -1;
	f->upper = malloc((size_t)(e->nbuckets - 1) * sizeof *f->upper);
	if (!f->upper)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	if (scheme == PCPU__SEG_HIST_EXPLICIT || scheme == PCPU__SEG_HIST_EXPONENTIAL) {
		uint64_t need, b;

		pos = (pos + 7) & ~7u;
		if (e->nbuckets - 1 > PCPU__SEG_MAX_BOUNDS)
			return BAD(f, "too many bounds"), 0;
		need = (uint64_t)pos + (uint64_t)(e->nbuckets - 1) * 8;
		if (need != e->blob_len)
			return BAD(f, "bounds do not fill the blob"), 0;
		memcpy(f->upper, blob + pos, (size_t)(e->nbuckets - 1) * 8);
		for (b = 1; b + 1 < e->nbuckets; b++)
			if (f->upper[b] <= f->upper[b - 1])
				return BAD(f, "bounds not increasing"), 0;
		if (scheme == PCPU__SEG_HIST_EXPONENTIAL) {
			int64_t first = (int64_t)e->value_off;

			if (e->u32b > PCPU__SEG_SCHEMA_BIAS + 8 || f->upper[0] < 0 ||
			    first < -(INT32_MAX / 2) || first > INT32_MAX / 2)
				return BAD(f, "bad native histogram layout"), 0;
			f->native = 1;
			f->schema = (int)e->u32b - PCPU__SEG_SCHEMA_BIAS;
			f->native_index = (int32_t)first;
			if (alloc_exported(p, f, e->nbuckets - 1) < 0)
				return -1;
			if (e->flags & PCPU__SEG_E_EXPORT_MASK) { /* 2.4: its own rule */
				unsigned lg1 = (e->flags & PCPU__SEG_E_EXPORT_MASK) >> PCPU__SEG_E_EXPORT_SHIFT;

				if (lg1 > PCPU__SEG_MAX_EXPORT_LG1 || e->serial > (uint64_t)INT64_MAX)
					return BAD(f, "bad exported bounds of a native histogram"), 0;
				f->nexport = pcpu__native_export_rule(f->upper, f->native_index,
								      e->nbuckets - 1, f->schema, lg1 - 1,
								      (int64_t)e->serial, f->exported);
			} else {
				f->nexport = pcpu__native_export_list(f->native_index, e->nbuckets - 1,
								      f->schema, f->exported);
			}
		}
	} else if (scheme == PCPU__SEG_HIST_LOG_LINEAR) {
		uint64_t b;

		if (!pcpu__loglinear_valid(e->u32b, e->nbuckets))
			return BAD(f, "bad log-linear layout"), 0;
		if (pos != e->blob_len)
			return BAD(f, "trailing bytes in blob"), 0;
		for (b = 0; b + 1 < e->nbuckets; b++)
			f->upper[b] = pcpu__loglinear_upper(e->u32b, b);
		if (e->value_off) { /* 2.2: the export rule */
			if (e->value_off > PCPU__SEG_MAX_EXPORT_LG1 || e->value_off - 1 > e->u32b)
				return BAD(f, "bad exported bounds per power of two"), 0;
			if (alloc_exported(p, f, e->nbuckets - 1) < 0)
				return -1;
			f->nexport = pcpu__export_list(f->upper, e->nbuckets - 1,
						       (unsigned)e->value_off - 1, (int64_t)e->serial,
						       f->exported);
		}
	} else {
		return BAD(f, "unknown histogram scheme"), 0;
	}
	return 0;
}

static uint64_t value_size(const struct pcpu__seg_entry *fe)
{
	switch (fe->type) {
	case PCPU_METRIC_COUNTER:
		return PCPU__SEG_COUNTER_SIZE;
	case PCPU_METRIC_GAUGE:
		return PCPU__SEG_GAUGE_SIZE;
	default:
		return fe->u32a & PCPU__SEG_HIST_PAIRS ? PCPU__SEG_HISTOGRAM_PAIRS_SIZE(fe->nbuckets)
						       : PCPU__SEG_HISTOGRAM_SIZE(fe->nbuckets);
	}
}

static int cmp_fam_id(const void *a, const void *b)
{
	uint64_t x = ((const struct fam *)a)->e->family_id, y = ((const struct fam *)b)->e->family_id;
	return x < y ? -1 : x > y;
}

static struct fam *find_family(struct parse *p, uint64_t id)
{
	size_t lo = 0, hi = p->nfams;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t m = p->fams[mid].e->family_id;
		if (m == id)
			return &p->fams[mid];
		if (m < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int parse_series(struct parse *p, struct ser *s)
{
	const struct pcpu__seg_entry *e = s->e;
	const char *blob;
	uint32_t pos = 0, l;
	uint64_t end;

	if (e->type < PCPU_METRIC_COUNTER || e->type > PCPU_METRIC_HISTOGRAM)
		return BAD(s, "unknown metric type"), 0;
	if (e->nlabels > PCPU_STATS_LABELS_MAX)
		return BAD(s, "too many labels"), 0;
	blob = entry_blob(p, e);
	if (!blob)
		return BAD(s, "blob outside the string table"), 0;
	if (e->nlabels) {
		s->values = balloc(p->b, (uint64_t)e->nlabels * sizeof *s->values);
		if (!s->values)
			return -1;
	}
	for (l = 0; l < e->nlabels; l++) {
		s->values[l] = blob_str(blob, e->blob_len, &pos);
		if (!s->values[l])
			return BAD(s, "label value not terminated"), 0;
		if (pcpu_stats_check_label_value(s->values[l]) < 0)
			return BAD(s, pcpu_stats_error()), 0;
	}
	if (pos != e->blob_len)
		return BAD(s, "trailing bytes in blob"), 0;
	if (e->kind == PCPU__SEG_GROUP_SERIES) {
		/* Checked against its GROUP entry once both are known stable. */
		if (e->type == PCPU_METRIC_HISTOGRAM)
			return BAD(s, "a group member is a counter or a gauge"), 0;
		if (e->u32a >= PCPU__SEG_GROUP_MAX || e->u32b != 8 || e->value_off >= p->used)
			return BAD(s, "group member: bad member index, size or group entry"), 0;
		s->group = 1;
		s->loc = UINT64_MAX; /* no storage */
		s->serial = e->serial;
		return 0;
	}
	if (e->u32a >= p->h->nchunks)
		return BAD(s, "chunk past the end"), 0;
	if (e->value_off % PCPU__SEG_VALUE_ALIGN)
		return BAD(s, "value not aligned to 8 bytes"), 0;
	if (__builtin_add_overflow(e->value_off, (uint64_t)e->u32b, &end) ||
	    end > p->h->slot_stride || e->u32b == 0)
		return BAD(s, "value outside its slot"), 0;
	/* slot_stride <= 2^40, so the offset fits below bit 40. */
	s->loc = ((uint64_t)e->u32a << 40) | e->value_off;
	s->serial = e->serial;
	return 0;
}

/* Links series to families (which must be sorted by id). */
static void link_series(struct parse *p, struct ser *s)
{
	struct fam *f;

	if (s->bad)
		return;
	f = find_family(p, s->e->family_id);
	if (!f)
		return; /* orphan: decided later (flux or corruption) */
	s->fam = f;
	if (f->bad)
		return;
	if (f->e->type != s->e->type || f->e->nlabels != s->e->nlabels)
		BAD(s, "type or labels differ from the family's");
	else if (value_size(f->e) != s->e->u32b)
		BAD(s, "value size does not match the type");
}

static int usable(const struct ser *s)
{
	return !s->bad && s->fam && !s->fam->bad;
}

/* ---- snapshot: reading the values ------------------------------------------------- */

static int cmp_ser_loc(const void *a, const void *b)
{
	const struct ser *x = *(const struct ser *const *)a, *y = *(const struct ser *const *)b;

	return (x->loc > y->loc) - (x->loc < y->loc);
}

static uint64_t ld64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* Adds one region's words of the series' value (at v) to its accumulators:
 * slot `slot`'s own words or its mirror's, both count the same. */
static void accumulate(struct ser *s, const unsigned char *v, unsigned slot, int per_slot)
{
	uint64_t part = 0;

	switch (s->e->type) {
	case PCPU_METRIC_COUNTER:
	case PCPU_METRIC_GAUGE:
		part = ld64(v);
		s->acc0 += part;
		break;
	case PCPU_METRIC_HISTOGRAM: {
		uint32_t b, nb = s->fam->e->nbuckets;

		if (s->fam->pairs) { /* 2.4: (count, sum) per bucket */
			for (b = 0; b < nb; b++) {
				uint64_t c = ld64(v + 16 * (size_t)b);
				s->counts[b] += c;
				s->acc0 += ld64(v + 16 * (size_t)b + 8);
				part += c;
			}
			break;
		}
		s->acc0 += ld64(v); /* 2.0-2.3: [sum, bucket 0, ...] */
		for (b = 0; b < nb; b++) {
			uint64_t c = ld64(v + 8 * (1 + (size_t)b));
			s->counts[b] += c;
			part += c;
		}
		break;
	}
	}
	if (per_slot) /* modulo 2^64, as the value */
		s->slots[slot] = (int64_t)((uint64_t)s->slots[slot] + part);
}

/* A run: values of one chunk closer than RUN_GAP to the next, read with one
 * pread per region that holds data there. Series v[first, last). */
struct run {
	uint64_t lo, hi;
	size_t first, last;
};

/* First run of runs[from, n) that ends after x (runs are sorted and
 * disjoint), or n. */
static size_t run_after(const struct run *runs, size_t from, size_t n, uint64_t x)
{
	size_t lo = from, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (runs[mid].hi <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The values of one chunk's runs (sorted, disjoint), in every region that
 * holds data where they lie.
 *
 * Why not one SEEK_DATA per run per region, as before: a file may declare
 * 65,536 slots (131,072 regions per chunk) and hold a few pages; that made a
 * snapshot cost runs x 131,072 system calls, unbounded by max_bytes (issue
 * 10: 2,000 series took 41 s). Instead the chunk's data is found extent by
 * extent with SEEK_DATA and SEEK_HOLE, jumping over every region without
 * data in the window [lo of the first run, hi of the last) in one call, and
 * each run is read once per region where an extent meets it. The calls are
 * then a few per extent of real data, not per region, and every one of
 * them (and every region an extent covers) is charged to the budget, so a
 * snapshot's work is bounded by max_bytes whatever the file claims. */
static int read_chunk(struct parse *p, struct ser **v, uint32_t chunk, const struct run *runs,
		      size_t nruns, unsigned char *buf)
{
	const struct pcpu__seg_header *h = p->h;
	struct pcpu_reader *r = p->r;
	int per_slot = (p->flags & PCPU_READER_PER_SLOT) != 0;
	/* chunk < nchunks and data_offset + nchunks * chunk_span <= file size
	 * were checked, chunk_span = 2 * nslots * slot_stride and every run's
	 * hi <= slot_stride: no overflow below, and every region read, slot or
	 * mirror, lies inside the file. */
	uint64_t base = h->data_offset + (uint64_t)chunk * h->chunk_span;
	uint64_t end = base + h->chunk_span, stride = h->slot_stride;
	uint64_t wlo = runs[0].lo, whi = runs[nruns - 1].hi, pos = base + wlo;
	uint64_t nregions = 2 * (uint64_t)h->nslots, cur = UINT64_MAX;
	size_t next = 0;

	while (pos < end) {
		uint64_t d, hole, rg, rel;

		if (r->fd < 0) {
			d = pos; /* memory: all data */
			hole = end;
		} else {
			off_t x;

			if (charge(p->b, SYSCALL_CHARGE) < 0)
				return -1;
			r->nsyscalls++;
			x = lseek(r->fd, (off_t)pos, SEEK_DATA);
			if (x < 0 && errno == ENXIO)
				break; /* only holes from pos on */
			d = x < 0 ? pos : (uint64_t)x; /* cannot tell: read it */
			if (d >= end)
				break;
			hole = 0;
		}
		rg = (d - base) / stride;
		rel = (d - base) % stride;
		if (rel < wlo) { /* data before the window: look in the window */
			pos = base + rg * stride + wlo;
			continue;
		}
		if (rel >= whi) { /* after it: the next region's window */
			if (rg + 1 >= nregions)
				break;
			pos = base + (rg + 1) * stride + wlo;
			continue;
		}
		if (!hole) {
			off_t x;

			if (charge(p->b, SYSCALL_CHARGE) < 0)
				return -1;
			r->nsyscalls++;
			x = lseek(r->fd, (off_t)d, SEEK_HOLE);
			hole = x < 0 || (uint64_t)x > end ? end : (uint64_t)x;
			if (hole <= d)
				hole = d + 1; /* changed under us: at least progress */
		}
		/* The extent [d, hole): every region it meets, in order. */
		for (; rg < nregions && base + rg * stride < hole; rg++) {
			uint64_t rs = base + rg * stride;
			uint64_t x = (d > rs ? d : rs) - rs;
			uint64_t y = (hole < rs + stride ? hole : rs + stride) - rs;
			/* Regions nslots.. are the mirrors of slots 0..: same slot. */
			unsigned slot = (unsigned)(rg % h->nslots);

			if (charge(p->b, REGION_CHARGE) < 0)
				return -1;
			if (rg != cur) {
				cur = rg;
				next = 0;
			}
			/* Runs wholly in a hole before x read as zero: skipped.
			 * Runs already read in this region: skipped too. */
			next = run_after(runs, next, nruns, x);
			for (; next < nruns && runs[next].lo < y; next++) {
				const struct run *u = &runs[next];
				size_t k;

				if (charge(p->b, u->hi - u->lo) < 0 || charge(p->b, SYSCALL_CHARGE) < 0 ||
				    read_exact(r, buf, (size_t)(u->hi - u->lo), rs + u->lo, "values") < 0)
					return -1;
				for (k = u->first; k < u->last; k++)
					accumulate(v[k], buf + (v[k]->e->value_off - u->lo), slot, per_slot);
			}
		}
		pos = hole;
	}
	return 0;
}

static int read_values(struct parse *p)
{
	const struct pcpu__seg_header *h = p->h;
	struct ser **v;
	struct run *runs = NULL;
	unsigned char *buf = NULL;
	size_t n = 0, i, j, k, bufcap = 0;
	int per_slot = (p->flags & PCPU_READER_PER_SLOT) != 0, rc = -1;

	v = balloc(p->b, (uint64_t)(p->nsers ? p->nsers : 1) * sizeof *v);
	if (!v)
		return -1;
	for (i = 0; i < p->nsers; i++) {
		struct ser *s = &p->sers[i];

		if (!usable(s) || s->group)
			continue;
		if (s->e->type == PCPU_METRIC_HISTOGRAM) {
			s->counts = balloc(p->b, (uint64_t)s->fam->e->nbuckets * 8);
			if (!s->counts)
				goto out;
		}
		if (per_slot) {
			s->slots = balloc(p->b, (uint64_t)h->nslots * 8);
			if (!s->slots)
				goto out;
		}
		v[n++] = s;
	}
	qsort(v, n, sizeof *v, cmp_ser_loc);
	runs = balloc(p->b, (uint64_t)(n ? n : 1) * sizeof *runs);
	if (!runs)
		goto out;
	for (i = 0; i < n; i = j) {
		uint32_t chunk = v[i]->e->u32a;
		size_t nruns = 0;

		/* The chunk's runs: values closer than RUN_GAP to the next. */
		for (j = i; j < n && v[j]->e->u32a == chunk; j = k) {
			uint64_t lo = v[j]->e->value_off, hi = lo + v[j]->e->u32b;

			for (k = j + 1; k < n && v[k]->e->u32a == chunk && v[k]->e->value_off <= hi + RUN_GAP;
			     k++)
				if (v[k]->e->value_off + v[k]->e->u32b > hi)
					hi = v[k]->e->value_off + v[k]->e->u32b;
			runs[nruns].lo = lo;
			runs[nruns].hi = hi;
			runs[nruns].first = j;
			runs[nruns].last = k;
			nruns++;
			if (hi - lo > bufcap) {
				unsigned char *nb;

				if (charge(p->b, hi - lo) < 0)
					goto out;
				nb = realloc(buf, (size_t)(hi - lo));
				if (!nb) {
					pcpu__seg_fail(ENOMEM, "out of memory");
					goto out;
				}
				buf = nb;
				bufcap = (size_t)(hi - lo);
			}
		}
		if (read_chunk(p, v, chunk, runs, nruns, buf) < 0)
			goto out;
	}
	rc = 0;
out:
	free(runs);
	free(buf);
	free(v);
	return rc;
}

/* ---- snapshot: the result ------------------------------------------------------- */

struct snap_impl {
	struct pcpu_reader_snapshot pub; /* first: the public pointer is this */
	struct pcpu_snapshot_family *fams;
	const int64_t ***slots; /* [family][series] -> nslots values, or NULL */
	int per_slot;
	/* everything else: one list of allocations */
	void **allocs;
	size_t nallocs, capallocs;
};

static void *keep(struct snap_impl *s, void *p)
{
	if (!p)
		return NULL;
	if (s->nallocs == s->capallocs) {
		size_t cap = s->capallocs ? s->capallocs * 2 : 64;
		void **a = realloc(s->allocs, cap * sizeof *a);
		if (!a) {
			free(p);
			return NULL;
		}
		s->allocs = a;
		s->capallocs = cap;
	}
	s->allocs[s->nallocs++] = p;
	return p;
}

void pcpu_reader_snapshot_free(struct pcpu_reader_snapshot *pub)
{
	struct snap_impl *s = (struct snap_impl *)pub;
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->nallocs; i++)
		free(s->allocs[i]);
	free(s->allocs);
	free(s);
}

const int64_t *pcpu_reader_snapshot_slots(const struct pcpu_reader_snapshot *pub, size_t family,
					  size_t series)
{
	const struct snap_impl *s = (const struct snap_impl *)pub;

	if (!s || !s->per_slot || family >= s->pub.snapshot.nfamilies ||
	    series >= s->fams[family].nseries) {
		errno = EINVAL;
		return NULL;
	}
	if (!s->slots[family][series]) {
		/* A group member's value is read whole with its group (the
		 * lanes, not the slots, hold it): there is no per-slot split. */
		errno = ENODATA;
		return NULL;
	}
	return s->slots[family][series];
}

static int cmp_fam_name(const void *a, const void *b)
{
	const struct fam *x = *(const struct fam *const *)a, *y = *(const struct fam *const *)b;
	return strcmp(x->name, y->name);
}

static int cmp_ser_labels(const void *a, const void *b)
{
	const struct ser *x = *(const struct ser *const *)a, *y = *(const struct ser *const *)b;
	unsigned l;

	for (l = 0; l < x->e->nlabels; l++) {
		int c = strcmp(x->values[l], y->values[l]);
		if (c)
			return c;
	}
	return 0;
}

static int cmp_ser_serial(const void *a, const void *b)
{
	const struct ser *x = *(const struct ser *const *)a, *y = *(const struct ser *const *)b;

	return (x->serial > y->serial) - (x->serial < y->serial);
}

/* By family, then label values: groups each family's series together and
 * puts duplicates side by side. */
static int cmp_ser_fam_labels(const void *a, const void *b)
{
	const struct ser *x = *(const struct ser *const *)a, *y = *(const struct ser *const *)b;

	if (x->fam != y->fam)
		return x->fam < y->fam ? -1 : 1;
	return cmp_ser_labels(a, b);
}

/* Builds the result from the entries kept (keep[i] for entry i). */
static struct snap_impl *build(struct parse *p, const char *S_owned, unsigned char *kept_fam,
			       unsigned char *kept_ser)
{
	struct snap_impl *s = calloc(1, sizeof *s);
	struct fam **fv = NULL;
	struct ser **sv = NULL;
	size_t nf = 0, ns = 0, i, k;

	if (!s) {
		free((void *)S_owned);
		pcpu__seg_fail(ENOMEM, "out of memory");
		return NULL;
	}
	s->per_slot = (p->flags & PCPU_READER_PER_SLOT) != 0;
	if (!keep(s, (void *)S_owned))
		goto nomem;
	fv = malloc((p->nfams ? p->nfams : 1) * sizeof *fv);
	sv = malloc((p->nsers ? p->nsers : 1) * sizeof *sv);
	if (!fv || !sv)
		goto nomem;
	for (i = 0; i < p->nfams; i++)
		if (kept_fam[i])
			fv[nf++] = &p->fams[i];
	qsort(fv, nf, sizeof *fv, cmp_fam_name);
	/* Every kept series, grouped by family: one sort, not one scan of all
	 * series per family. */
	for (k = 0; k < p->nsers; k++)
		if (kept_ser[k])
			sv[ns++] = &p->sers[k];
	qsort(sv, ns, sizeof *sv, cmp_ser_fam_labels);
	for (k = 0; k < ns; k++) {
		struct fam *f = sv[k]->fam;

		if (k == 0 || sv[k - 1]->fam != f) {
			f->first = k;
			f->count = 0;
		} else if (cmp_ser_labels(&sv[k], &sv[k - 1]) == 0) {
			pcpu__seg_fail(EBADMSG,
				       "segment %s: corrupted (two series of %.100s with the same labels)",
				       p->r->name, f->name);
			goto fail;
		}
		f->count++;
	}
	for (i = 1; i < nf; i++)
		if (strcmp(fv[i]->name, fv[i - 1]->name) == 0) {
			pcpu__seg_fail(EBADMSG, "segment %s: corrupted (two families named %.100s)",
				       p->r->name, fv[i]->name);
			goto fail;
		}
	s->fams = keep(s, calloc(nf ? nf : 1, sizeof *s->fams));
	s->slots = keep(s, calloc(nf ? nf : 1, sizeof *s->slots));
	if (!s->fams || !s->slots)
		goto nomem;
	for (i = 0; i < nf; i++) {
		struct fam *f = fv[i];
		struct pcpu_snapshot_family *out = &s->fams[i];
		struct pcpu_snapshot_series *series;

		out->name = f->name;
		out->help = f->help;
		out->unit = f->unit;
		out->type = (enum pcpu_metric_type)f->e->type;
		out->scale_exp10 = f->e->scale_exp10;
		out->flags = (f->native ? PCPU_SNAPSHOT_NATIVE : 0) | (f->info ? PCPU_SNAPSHOT_INFO : 0);
		out->native_schema = f->schema;
		out->native_index = f->native_index;
		out->nlabels = f->e->nlabels;
		out->label_names = f->label_names;
		if (!keep(s, f->label_names) && f->label_names)
			goto nomem;
		f->label_names = NULL;
		if (f->e->type == PCPU_METRIC_HISTOGRAM) {
			out->nbuckets = f->e->nbuckets;
			out->bucket_upper = keep(s, f->upper);
			if (!out->bucket_upper)
				goto nomem;
			f->upper = NULL;
			if (f->exported) {
				out->export_buckets = keep(s, f->exported);
				if (!out->export_buckets)
					goto nomem;
				out->nexport = f->nexport;
				f->exported = NULL;
			}
		}
		struct ser **fs = sv + f->first;
		size_t n = f->count;

		/* Creation order, as the writing process's own snapshot. */
		qsort(fs, n, sizeof *fs, cmp_ser_serial);
		series = keep(s, calloc(n ? n : 1, sizeof *series));
		s->slots[i] = keep(s, calloc(n ? n : 1, sizeof *s->slots[i]));
		if (!series || !s->slots[i])
			goto nomem;
		for (k = 0; k < n; k++) {
			struct ser *se = fs[k];

			series[k].label_values = se->values;
			if (se->values && !keep(s, se->values))
				goto nomem;
			se->values = NULL;
			switch (se->e->type) {
			case PCPU_METRIC_COUNTER:
				series[k].value.counter = se->acc0;
				break;
			case PCPU_METRIC_GAUGE:
				/* An info series is 1, as the writer's own snapshot
				 * has it, whatever its slots hold. */
				series[k].value.gauge = f->info ? 1 : (int64_t)se->acc0;
				break;
			default:
				series[k].value.histogram.counts = se->counts;
				series[k].value.histogram.sum = (int64_t)se->acc0;
				if (!keep(s, se->counts))
					goto nomem;
				se->counts = NULL;
			}
			s->slots[i][k] = se->slots;
			if (se->slots && !keep(s, se->slots))
				goto nomem;
			se->slots = NULL;
		}
		out->nseries = n;
		out->series = series;
	}
	s->pub.snapshot.nfamilies = nf;
	s->pub.snapshot.families = s->fams;
	free(fv);
	free(sv);
	return s;
nomem:
	pcpu__seg_fail(ENOMEM, "out of memory");
fail:
	free(fv);
	free(sv);
	pcpu_reader_snapshot_free(&s->pub);
	return NULL;
}

static void parse_free(struct parse *p)
{
	size_t i;

	/* nfams and nsers are counted before the arrays are allocated: an
	 * attempt that fails in between (budget, memory) has counts and no
	 * arrays. */
	for (i = 0; p->fams && i < p->nfams; i++) {
		free(p->fams[i].label_names);
		free(p->fams[i].upper);
		free(p->fams[i].exported);
	}
	for (i = 0; p->sers && i < p->nsers; i++) {
		free(p->sers[i].values);
		free(p->sers[i].counts);
		free(p->sers[i].slots);
	}
	free(p->fams);
	free(p->sers);
	p->fams = NULL;
	p->sers = NULL;
	p->nfams = p->nsers = 0;
}

/* One attempt. Returns 1 with *out set, 0 to retry (unstable, attempts
 * left), -1 on error. */
static int attempt(struct pcpu_reader *r, unsigned flags, int last, int *statep,
		   struct pcpu_reader_snapshot **out)
{
	struct pcpu__seg_header h1, hb, h2;
	struct budget b = { r->max_bytes, r->name };
	struct parse p;
	unsigned char *E1 = NULL, *E2 = NULL, *kept_fam = NULL, *kept_ser = NULL;
	char *S = NULL;
	uint64_t size, elen, i, changed = 0;
	size_t fi = 0, si = 0;
	int stable, rc = -1, state;
	struct snap_impl *snap;

	memset(&p, 0, sizeof p);
	if (read_header(r, &h1, &size) < 0)
		return -1;
	/* Once per snapshot, not per attempt: a read of /proc/<pid>/stat costs
	 * more than a small snapshot. Unknown is not gone: the file is read. */
	if (*statep < 0 || (h1.flags & PCPU__SEG_F_CLOSED))
		*statep = writer_state(r, h1.flags);
	state = *statep;
	if ((state == PCPU_SEGMENT_CLOSED || state == PCPU_SEGMENT_GONE) &&
	    !(r->flags & PCPU_READER_ALLOW_STALE)) {
		if (state == PCPU_SEGMENT_CLOSED)
			return pcpu__seg_fail(ESRCH, "segment %s: closed by its writer (pid %d)", r->name,
					      (int)h1.writer_pid);
		return pcpu__seg_fail(ESRCH, "segment %s: writer (pid %d) is gone: it exited without "
					     "unpublishing",
				      r->name, (int)h1.writer_pid);
	}
	p.r = r;
	p.b = &b;
	p.h = &h1; /* until hb is read */
	p.flags = flags;
	p.used = h1.entries_used;
	elen = p.used * h1.entry_size; /* used <= capacity: checked, no overflow */
	E1 = balloc(&b, elen);
	E2 = balloc(&b, elen);
	if (!E1 || !E2)
		goto out;
	if (read_exact(r, E1, (size_t)elen, h1.entries_offset, "directory") < 0)
		goto out;
	/* The header again: an entry copied into E1 may be newer than h1, and
	 * its blob and chunk were published before it, so strings_used and
	 * nchunks must be read after E1 (entries_used had to be read before). */
	if (read_header(r, &hb, &size) < 0)
		goto out;
	p.h = &hb;
	if (charge(&b, hb.strings_used + 1) < 0)
		goto out;
	S = calloc(1, (size_t)hb.strings_used + 1); /* +1: a NUL after the last blob */
	if (!S) {
		pcpu__seg_fail(ENOMEM, "out of memory");
		goto out;
	}
	if (read_exact(r, S, (size_t)hb.strings_used, hb.strings_offset, "strings") < 0)
		goto out;
	p.E = E1;
	p.S = S;
	p.slen = hb.strings_used;

	/* Families first (series link to them by id). */
	for (i = 0; i < p.used; i++) {
		const struct pcpu__seg_entry *e = ENTRY_AT(&p, i);
		if (!(e->seq & 1) && e->kind == PCPU__SEG_FAMILY)
			p.nfams++;
		else if (!(e->seq & 1) &&
			 (e->kind == PCPU__SEG_SERIES || e->kind == PCPU__SEG_GROUP_SERIES))
			p.nsers++;
	}
	if (charge(&b, p.nfams * sizeof *p.fams + p.nsers * sizeof *p.sers) < 0)
		goto out;
	p.fams = calloc(p.nfams ? p.nfams : 1, sizeof *p.fams);
	p.sers = calloc(p.nsers ? p.nsers : 1, sizeof *p.sers);
	if (!p.fams || !p.sers) {
		pcpu__seg_fail(ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < p.used; i++) {
		const struct pcpu__seg_entry *e = ENTRY_AT(&p, i);

		if (e->seq & 1)
			continue;
		if (e->kind == PCPU__SEG_FAMILY) {
			p.fams[fi].idx = (uint32_t)i;
			p.fams[fi].e = e;
			if (parse_family(&p, &p.fams[fi++]) < 0)
				goto out;
		} else if (e->kind == PCPU__SEG_SERIES || e->kind == PCPU__SEG_GROUP_SERIES) {
			p.sers[si].idx = (uint32_t)i;
			p.sers[si].e = e;
			if (parse_series(&p, &p.sers[si++]) < 0)
				goto out;
		}
	}
	qsort(p.fams, p.nfams, sizeof *p.fams, cmp_fam_id);
	/* Ids are never reused by a writer: two families with one id are a
	 * forged directory (series could not tell them apart). */
	for (i = 1; i < p.nfams; i++)
		if (p.fams[i].e->family_id == p.fams[i - 1].e->family_id) {
			BAD(&p.fams[i], "family id used twice");
			BAD(&p.fams[i - 1], "family id used twice");
		}
	for (i = 0; i < p.nsers; i++)
		link_series(&p, &p.sers[i]);
	if (read_values(&p) < 0)
		goto out;

	/* The second look: the directory, then the header. A change that
	 * begins while E2 is copied can leave E2 torn (a removal's series
	 * copied before they were freed, their family after); only a
	 * generation read after the copy is sure to show it. */
	if (read_exact(r, E2, (size_t)elen, h1.entries_offset, "directory") < 0 ||
	    read_exact(r, &h2, sizeof h2, 0, "header") < 0)
		goto out;
	stable = h1.generation == h2.generation && !(h1.generation & 1);
	if (!stable && !last) {
		rc = 0;
		goto out;
	}
	kept_fam = calloc(p.nfams ? p.nfams : 1, 1);
	kept_ser = calloc(p.nsers ? p.nsers : 1, 1);
	if (!kept_fam || !kept_ser) {
		pcpu__seg_fail(ENOMEM, "out of memory");
		goto out;
	}
#define SAME(idx) (memcmp(E1 + (uint64_t)(idx) * h1.entry_size, E2 + (uint64_t)(idx) * h1.entry_size, \
			  h1.entry_size) == 0)
	for (i = 0; i < p.used; i++) {
		const struct pcpu__seg_entry *e = ENTRY_AT(&p, i);
		if (!SAME(i) || ((e->seq & 1) && e->kind != PCPU__SEG_FREE))
			changed++;
	}
	for (i = 0; i < p.nfams; i++) {
		struct fam *f = &p.fams[i];

		if (!SAME(f->idx))
			continue;
		if (f->bad) {
			pcpu__seg_fail(EBADMSG, "segment %s: corrupted directory entry %u (family): %s",
				       r->name, f->idx, f->msg);
			goto out;
		}
		kept_fam[i] = 1;
	}
	for (i = 0; i < p.nsers; i++) {
		struct ser *s = &p.sers[i];

		if (!SAME(s->idx))
			continue;
		if (s->bad) {
			pcpu__seg_fail(EBADMSG, "segment %s: corrupted directory entry %u (series): %s",
				       r->name, s->idx, s->msg);
			goto out;
		}
		if (!s->fam || !kept_fam[s->fam - p.fams]) {
			/* Its family is being added or removed, or missing. */
			if (stable) {
				pcpu__seg_fail(EBADMSG,
					       "segment %s: corrupted directory entry %u: series of a "
					       "family that does not exist",
					       r->name, s->idx);
				goto out;
			}
			changed++;
			continue;
		}
		if (s->group) {
			/* The member's value: its GROUP entry's copy in S, as
			 * stable as the entry (the writer rewrites the values
			 * under the entry's seq). */
			const struct pcpu__seg_entry *g = ENTRY_AT(&p, s->e->value_off);
			const char *blob;

			if (!SAME(s->e->value_off)) {
				changed++;
				continue;
			}
			blob = entry_blob(&p, g);
			if ((g->seq & 1) || g->kind != PCPU__SEG_GROUP || g->u32a == 0 ||
			    g->u32a > PCPU__SEG_GROUP_MAX || g->blob_len != 8 * g->u32a || !blob ||
			    s->e->u32a >= g->u32a) {
				if (!stable) {
					changed++; /* a reused entry in flux */
					continue;
				}
				pcpu__seg_fail(EBADMSG,
					       "segment %s: corrupted directory entry %u: group member "
					       "without a valid group entry %u",
					       r->name, s->idx, (unsigned)s->e->value_off);
				goto out;
			}
			s->acc0 = ld64((const unsigned char *)blob + 8 * (size_t)s->e->u32a);
		}
		kept_ser[i] = 1;
	}
#undef SAME
	/* Values of two series never overlap (the zone hands out disjoint
	 * objects): overlapping ones are a forged directory. */
	{
		struct ser **v = malloc((p.nsers ? p.nsers : 1) * sizeof *v);
		size_t n = 0, k;

		if (!v) {
			pcpu__seg_fail(ENOMEM, "out of memory");
			goto out;
		}
		for (k = 0; k < p.nsers; k++)
			if (kept_ser[k] && !p.sers[k].group)
				v[n++] = &p.sers[k];
		qsort(v, n, sizeof *v, cmp_ser_loc);
		for (k = 1; k < n; k++)
			if (v[k]->e->u32a == v[k - 1]->e->u32a &&
			    v[k]->e->value_off < v[k - 1]->e->value_off + v[k - 1]->e->u32b) {
				pcpu__seg_fail(EBADMSG,
					       "segment %s: corrupted directory: entries %u and %u share "
					       "storage",
					       r->name, v[k - 1]->idx, v[k]->idx);
				free(v);
				goto out;
			}
		free(v);
	}
	snap = build(&p, S, kept_fam, kept_ser);
	S = NULL; /* owned by the snapshot (or freed with it) */
	if (!snap)
		goto out;
	snap->pub.generation = h1.generation;
	snap->pub.changed = (size_t)changed;
	snap->pub.stable = stable;
	snap->pub.incomplete = (h2.flags & (PCPU__SEG_F_INCOMPLETE | PCPU__SEG_F_NOSPACE)) != 0;
	snap->pub.nospace = (h2.flags & PCPU__SEG_F_NOSPACE) != 0;
	snap->pub.state = (enum pcpu_segment_state)((h2.flags & PCPU__SEG_F_CLOSED) ? PCPU_SEGMENT_CLOSED
										   : state);
	snap->pub.nslots = h1.nslots;
	*out = &snap->pub;
	rc = 1;
out:
	parse_free(&p);
	free(E1);
	free(E2);
	free(S);
	free(kept_fam);
	free(kept_ser);
	return rc;
}

int pcpu_reader_snapshot(pcpu_reader_t *r, unsigned flags, struct pcpu_reader_snapshot **out)
{
	int a, state = -1;

	if (out)
		*out = NULL;
	if (!r || !out)
		return pcpu__seg_fail(EINVAL, "NULL reader or output");
	if (flags & ~(unsigned)PCPU_READER_PER_SLOT)
		return pcpu__seg_fail(EINVAL, "unknown snapshot flags 0x%x", flags);
	for (a = 0; a < MAX_ATTEMPTS; a++) {
		int rc = attempt(r, flags, a + 1 == MAX_ATTEMPTS, &state, out);

		if (rc != 0)
			return rc < 0 ? -1 : 0;
		sched_yield(); /* let the writer finish its change */
	}
	return pcpu__seg_fail(EAGAIN, "segment %s: kept changing", r->name); /* not reached */
}

/* ---- listing and pruning --------------------------------------------------------- */

static int cmp_info(const void *a, const void *b)
{
	const struct pcpu_segment_info *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

int pcpu_segment_list(const struct pcpu_reader_options *opts, struct pcpu_segment_info **out,
		      size_t *count)
{
	struct pcpu_reader_options o;
	struct pcpu_segment_info *info = NULL;
	struct pcpu__seg_dirs ds;
	struct candidate *c = NULL;
	size_t n = 0, i;

	if (!out || !count)
		return pcpu__seg_fail(EINVAL, "NULL output");
	*out = NULL;
	*count = 0;
	memset(&o, 0, sizeof o);
	if (opts)
		o = *opts;
	if (dirs_open(&o, &ds) < 0)
		return -1;
	if (scan_dirs(&ds, &o, NULL, NULL, 0, &c, &n) < 0) {
		pcpu__seg_dirs_close(&ds);
		return -1;
	}
	if (n) {
		info = calloc(n, sizeof *info);
		if (!info) {
			free(c);
			pcpu__seg_dirs_close(&ds);
			return pcpu__seg_fail(ENOMEM, "out of memory");
		}
	}
	for (i = 0; i < n; i++) {
		struct pcpu_segment_info *in = &info[i];
		pcpu_reader_t *r;

		strcpy(in->name, c[i].name);
		strcpy(in->file, c[i].file);
		in->pid = c[i].pid;
		in->owner = c[i].owner;
		/* Shorter than a header: what opening it would say, without
		 * opening it. Anyone may fill their own directory with empty
		 * files named like segments; each then costs a listing the
		 * scan's lstat only, not eleven system calls. */
		if (c[i].too_small) {
			in->error = EBADMSG;
			continue;
		}
		r = open_candidate(&ds, &c[i], &o);
		if (!r) {
			in->error = errno;
			continue;
		}
		in->state = (enum pcpu_segment_state)writer_state(r, __atomic_load_n(&r->h.flags,
										     __ATOMIC_RELAXED));
		if (in->state == PCPU_SEGMENT_UNKNOWN)
			in->state_errno = errno;
		in->nfamilies = r->h.nfamilies;
		in->nseries = r->h.nseries;
		in->created_ns = r->h.created_ns;
		in->nslots = r->h.nslots;
		in->flags = (r->h.flags & PCPU__SEG_F_INCOMPLETE ? PCPU_SEGMENT_INFO_INCOMPLETE : 0) |
			    (r->h.flags & PCPU__SEG_F_NOSPACE ? PCPU_SEGMENT_INFO_NOSPACE : 0);
		pcpu_reader_close(r);
	}
	free(c);
	pcpu__seg_dirs_close(&ds);
	if (n)
		qsort(info, n, sizeof *info, cmp_info);
	*out = info;
	*count = n;
	return 0;
}

int pcpu_segment_prune(const struct pcpu_reader_options *opts, size_t *removed)
{
	struct pcpu_reader_options o;
	struct pcpu__seg_dirs ds;
	struct candidate *c = NULL;
	size_t n = 0, i, k = 0;

	memset(&o, 0, sizeof o);
	if (opts)
		o = *opts;
	if (removed)
		*removed = 0;
	if (dirs_open(&o, &ds) < 0)
		return -1;
	if (scan_dirs(&ds, &o, NULL, NULL, 0, &c, &n) < 0) {
		pcpu__seg_dirs_close(&ds);
		return -1;
	}
	for (i = 0; i < n; i++) {
		pcpu_reader_t *r;
		struct stat a, b;
		int dfd, state;

		if (!c[i].owner_ok)
			continue;
		r = open_candidate(&ds, &c[i], &o);
		if (!r)
			continue;
		/* Removed only on positive evidence that its writer is gone (or
		 * closed it): "cannot tell" (EMFILE, another pid namespace...)
		 * keeps it. */
		state = pcpu_reader_state(r);
		dfd = pcpu__seg_dirs_fd(&ds, c[i].dir);
		if ((state == PCPU_SEGMENT_GONE || state == PCPU_SEGMENT_CLOSED) && dfd >= 0 &&
		    fstat(r->fd, &a) == 0 && fstatat(dfd, c[i].file, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino && unlinkat(dfd, c[i].file, 0) == 0)
			k++;
		if (dfd >= 0)
			close(dfd);
		pcpu_reader_close(r);
	}
	free(c);
	pcpu__seg_dirs_close(&ds);
	if (removed)
		*removed = k;
	return 0;
}
