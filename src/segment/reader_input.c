/* SPDX-License-Identifier: MIT */
/*
 * The segment reader's input: every byte it takes from a segment, and the
 * memory budget (max_bytes) a snapshot's allocations, reads and system
 * calls are charged to.
 *
 * Why pread(2) and no mapping: a mapping of a file that another process can
 * truncate raises SIGBUS on the first access past the new end, and a library
 * may not install signal handlers. Copying with pread turns a truncation
 * into a short read, i.e. an error code. It also gives the "copy, then
 * validate, then use" discipline for free: nothing is ever read twice from
 * the shared file and trusted the second time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/core.h"
#include "reader_internal.h"

/* Segment files are sparse and large: offsets past 2 GiB (CMakeLists.txt's
 * _FILE_OFFSET_BITS=64 on 32-bit targets). */
_Static_assert(sizeof(off_t) == 8, "pcpu's segment code needs a 64-bit off_t: build with -D_FILE_OFFSET_BITS=64");

static ssize_t rd_pread(struct pcpu_reader *r, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	if (r->read_hook)
		r->read_hook(r->read_hook_ctx, __atomic_fetch_add(&r->nreads, 1, __ATOMIC_RELAXED), off,
			     len);
	__atomic_add_fetch(&r->nsyscalls, 1, __ATOMIC_RELAXED); /* snapshots may run at once */
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

int pcpu__rd_read_exact(struct pcpu_reader *r, void *buf, size_t len, uint64_t off, const char *what)
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
int pcpu__rd_size(struct pcpu_reader *r, uint64_t *size)
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

int pcpu__rd_charge(struct pcpu__rd_budget *b, uint64_t n)
{
	if (n > b->left)
		return pcpu__seg_fail(EFBIG, "segment %s: reading it needs more than the %s limit",
				      b->name, "max_bytes");
	b->left -= (size_t)n;
	return 0;
}

void *pcpu__rd_alloc(struct pcpu__rd_budget *b, uint64_t n)
{
	void *p;

	if (pcpu__rd_charge(b, n) < 0)
		return NULL;
	p = calloc(1, n ? (size_t)n : 1);
	if (!p)
		pcpu__seg_fail(ENOMEM, "out of memory");
	return p;
}

/* The charge of one read call against a budget (reader_values.c's too). */
#define SETTLE_CALL_CHARGE 4096

int pcpu__rd_settle(struct pcpu_reader *r, struct pcpu__rd_budget *b, unsigned char *buf,
		    unsigned char *b2, unsigned char *b3, size_t len, uint64_t off)
{
	size_t i;

	if ((b && pcpu__rd_charge(b, 2 * (len + SETTLE_CALL_CHARGE)) < 0) ||
	    pcpu__rd_read_exact(r, b2, len, off, "values") < 0 ||
	    pcpu__rd_read_exact(r, b3, len, off, "values") < 0)
		return -1;
	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t x = pcpu__rd_ld64(buf + i), y = pcpu__rd_ld64(b2 + i), z = pcpu__rd_ld64(b3 + i);
		unsigned n;

		for (n = 0; !pcpu__settled(x, y, z); n++) {
			if (n == PCPU__SETTLE_MAX)
				return pcpu__seg_fail(EAGAIN,
						      "segment %s: the value at offset %llu kept changing between "
						      "its two halves (%u reads)",
						      r->name, (unsigned long long)(off + i), PCPU__SETTLE_MAX + 3);
			x = y;
			y = z;
			if ((b && pcpu__rd_charge(b, SETTLE_CALL_CHARGE) < 0) ||
			    pcpu__rd_read_exact(r, &z, 8, off + i, "values") < 0)
				return -1;
		}
		memcpy(buf + i, &y, 8);
	}
	return 0;
}
