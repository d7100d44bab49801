/* SPDX-License-Identifier: MIT */
/*
 * The segment's error message: one per thread, set by the writer and the
 * reader alike through pcpu__seg_fail(); the writer reads it back with
 * pcpu_segment_error() (writer.c), the reader with pcpu_reader_error()
 * (reader_open.c).
 */
#include <errno.h>
#include <stdio.h>

#include "segment_internal.h"

const char *pcpu__seg_message(void)
{
	return pcpu__error_buffer(PCPU_ERROR_SEGMENT, NULL);
}
