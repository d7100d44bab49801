/* SPDX-License-Identifier: MIT */
/*
 * The segment's error message: one per thread, set by the writer and the
 * reader alike (pcpu_segment_error(), pcpu_reader_error()), and the short
 * reason word an exporter shows for a reader's errno.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

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
