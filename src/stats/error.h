/* SPDX-License-Identifier: MIT */
/*
 * The calling thread's last error message, for every layer of
 * libpcpu-stats that explains its failures in words (error.c): one
 * implementation of the per-thread buffers behind pcpu_stats_error() (the
 * statistics layer's domain) and pcpu_segment_error() /
 * pcpu_reader_error() (the segment's). Each domain keeps its own message,
 * so a failure of one layer never replaces the message another layer's
 * getter returns. libpcpu has no message of its own (its errors are
 * errno values alone): this is libpcpu-stats' (src/stats/stats.h offers it
 * to the segment). Uses libc only: the fuzz targets build it with the
 * parsers alone. Nothing here is exported.
 */
#ifndef PCPU_ERROR_H
#define PCPU_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "../core/core.h"

/* The largest capacity of a domain's buffer. */
#define PCPU_ERROR_MAX 512

enum pcpu_error_domain {
	PCPU_ERROR_STATS = 0,   /* pcpu_stats_error() */
	PCPU_ERROR_SEGMENT = 1, /* pcpu_segment_error(), pcpu_reader_error() */
};

/* The calling thread's message buffer of `domain` (NUL-terminated, "" until
 * a failure), and its capacity in *cap when cap is not NULL. Never NULL.
 * Async-signal-safe: static TLS, no allocation. */
PCPU_HIDDEN char *pcpu__error_buffer(enum pcpu_error_domain domain, size_t *cap);

/* Sets the message of `domain` (printf-style, truncated to the buffer) and
 * errno to err; returns -1, for `return pcpu__error_set(...)`. Not
 * async-signal-safe (vsnprintf): the stats validators, which must be,
 * build their message in the buffer directly. */
PCPU_HIDDEN int pcpu__error_vset(enum pcpu_error_domain domain, int err, const char *fmt,
				 va_list ap);
PCPU_HIDDEN int pcpu__error_set(enum pcpu_error_domain domain, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* PCPU_ERROR_H */
