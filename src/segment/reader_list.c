/* SPDX-License-Identifier: MIT */
/*
 * Listing and pruning the segments of the directories
 * (pcpu_segment_list(), pcpu_segment_prune()).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader_internal.h"

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
	struct pcpu__rd_candidate *c = NULL;
	size_t n = 0, i;

	if (!out || !count)
		return pcpu__seg_fail(EINVAL, "NULL output");
	*out = NULL;
	*count = 0;
	memset(&o, 0, sizeof o);
	if (opts)
		o = *opts;
	if (pcpu__rd_dirs_open(&o, &ds) < 0)
		return -1;
	if (pcpu__rd_scan_dirs(&ds, &o, NULL, NULL, 0, &c, &n) < 0) {
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
		r = pcpu__rd_open_candidate(&ds, &c[i], &o);
		if (!r) {
			in->error = errno;
			continue;
		}
		in->state = (enum pcpu_segment_state)pcpu__rd_writer_state(r, __atomic_load_n(&r->h.flags,
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
	struct pcpu__rd_candidate *c = NULL;
	size_t n = 0, i, k = 0;

	memset(&o, 0, sizeof o);
	if (opts)
		o = *opts;
	if (removed)
		*removed = 0;
	if (pcpu__rd_dirs_open(&o, &ds) < 0)
		return -1;
	if (pcpu__rd_scan_dirs(&ds, &o, NULL, NULL, 0, &c, &n) < 0) {
		pcpu__seg_dirs_close(&ds);
		return -1;
	}
	for (i = 0; i < n; i++) {
		pcpu_reader_t *r;
		struct stat a, b;
		int dfd, state;

		if (!c[i].owner_ok)
			continue;
		r = pcpu__rd_open_candidate(&ds, &c[i], &o);
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
