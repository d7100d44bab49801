/* SPDX-License-Identifier: MIT */
/*
 * Finding segment files: the directories a reader looks in, the files in
 * them named like segments ("pcpu.<pid>.<name>") that match what the
 * caller asked for, and which of several may still have a live writer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader_internal.h"

uid_t pcpu__rd_expected_owner(const struct pcpu_reader_options *o)
{
	return (o->flags & PCPU_READER_OWNER) ? o->owner : geteuid();
}

static int owner_accepted(const struct pcpu_reader_options *o, uid_t uid)
{
	return (o->flags & PCPU_READER_ANY_OWNER) || uid == pcpu__rd_expected_owner(o);
}

/* Opens the reader's directories: the one named, or the per-user ones of
 * the owners the options accept. */
int pcpu__rd_dirs_open(const struct pcpu_reader_options *o, struct pcpu__seg_dirs *ds)
{
	return pcpu__seg_dirs_open(o->dir, (o->flags & PCPU_READER_ANY_OWNER) != 0, pcpu__rd_expected_owner(o),
				   ds);
}

/* Adds directory k's entry `fname` to the candidates if it is a segment
 * file that matches (file name, or name and/or pid). 0, or -1 (ENOMEM). */
static int add_candidate(const struct pcpu_reader_options *o, int dfd, size_t k, const char *fname,
			 const char *file, const char *name, pid_t pid, struct pcpu__rd_candidate **c, size_t *n,
			 size_t *cap)
{
	struct pcpu__rd_candidate one;
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
		struct pcpu__rd_candidate *p = realloc(*c, nc * sizeof *p);
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
int pcpu__rd_scan_dirs(const struct pcpu__seg_dirs *ds, const struct pcpu_reader_options *o,
		     const char *file, const char *name, pid_t pid, struct pcpu__rd_candidate **out, size_t *n)
{
	struct pcpu__rd_candidate *c = NULL;
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
int pcpu__rd_maybe_live(const struct pcpu__seg_dirs *ds, const struct pcpu__rd_candidate *c)
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
	st = h.flags & PCPU__SEG_F_CLOSED ? PCPU__SEG_GONE : pcpu__seg_writer_state(fd, &h);
	close(fd);
	return st != PCPU__SEG_GONE;
}
