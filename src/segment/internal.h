/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces of the statistics segment (writer.c, reader.c,
 * common.c). Nothing here is exported. common.c and reader.c use only libc,
 * this header and pcpu/expose.h (plus the stats validators): the fuzz target
 * builds them without the core.
 */
#ifndef PCPU_SEGMENT_INTERNAL_H
#define PCPU_SEGMENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format.h"

#define PCPU_HIDDEN __attribute__((visibility("hidden")))

/* ---- common.c ---- */

/* Sets the thread's segment/reader error message (printf-style, truncated)
 * and errno; returns -1 for `return pcpu__seg_fail(EINVAL, "...")`. */
PCPU_HIDDEN int pcpu__seg_fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Checks a segment name: 1..64 bytes of [A-Za-z0-9_.-], not starting with
 * '.' or '-'. 0, or -1 with errno EINVAL and a message. */
PCPU_HIDDEN int pcpu__seg_check_name(const char *name);

/* The directory to use: `dir`, else $PCPU_SEGMENT_DIR (secure_getenv), else
 * /dev/shm. */
PCPU_HIDDEN const char *pcpu__seg_dir(const char *dir);

/* Opens a segment directory (O_DIRECTORY) and checks it is safe: owned by
 * the caller or root, and sticky if writable by group or others. Returns
 * the descriptor, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__seg_open_dir(const char *dir);

/* Splits "pcpu.<pid>.<name>" into pid and name (name buffer of 65 bytes).
 * 0 if it is such a file name, -1 if not. */
PCPU_HIDDEN int pcpu__seg_parse_file_name(const char *file, pid_t *pid, char *name);

/* Start time of process `pid` (field 22 of /proc/<pid>/stat, clock ticks
 * since boot). 0, or -1 with errno ESRCH if there is no such process. */
PCPU_HIDDEN int pcpu__seg_proc_start(pid_t pid, uint64_t *start);

/* Owner (uid) of process `pid`, from /proc/<pid>. 0 or -1 (errno). */
PCPU_HIDDEN int pcpu__seg_proc_uid(pid_t pid, uid_t *uid);

/* Bucket upper bounds of a log-linear histogram with precision p: bucket b
 * (b < nbuckets - 1) holds values up to the returned (inclusive) bound. The
 * same formula as pcpu_histogram_bucket_range(). */
PCPU_HIDDEN int64_t pcpu__seg_loglinear_upper(unsigned p, uint64_t b);

/* Whether nbuckets is a valid log-linear bucket count for precision p
 * ((k << p) + 1 with k >= 2, and every bound representable). */
PCPU_HIDDEN int pcpu__seg_loglinear_valid(unsigned p, uint64_t nbuckets);

#endif /* PCPU_SEGMENT_INTERNAL_H */
