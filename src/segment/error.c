/* SPDX-License-Identifier: MIT */
/*
 * The segment's error message: one per thread, set by the writer and the
 * reader alike through pcpu__seg_fail(); the writer reads it back with
 * pcpu_segment_error() (writer.c), the reader with pcpu_reader_error()
 * (reader_open.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "segment_internal.h"
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

const char *pcpu__seg_message(void)
{
	return pcpu__error_buffer(PCPU_ERROR_SEGMENT, NULL);
}
