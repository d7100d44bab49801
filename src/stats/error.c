/* SPDX-License-Identifier: MIT */
/*
 * error.c: the per-thread error messages (error.h). The capacities are
 * those each domain had before they shared this file: the statistics
 * layer's messages quote at most a few names (320 bytes), the segment's a
 * path (512).
 */
#include "error.h"

#include <errno.h>
#include <stdio.h>

#define STATS_CAP 320
#define SEGMENT_CAP 512
_Static_assert(STATS_CAP <= PCPU_ERROR_MAX && SEGMENT_CAP <= PCPU_ERROR_MAX,
	       "PCPU_ERROR_MAX bounds every domain");

static __thread struct {
	char stats[STATS_CAP];
	char segment[SEGMENT_CAP];
} messages;

char *pcpu__error_buffer(enum pcpu_error_domain domain, size_t *cap)
{
	if (domain == PCPU_ERROR_SEGMENT) {
		if (cap)
			*cap = SEGMENT_CAP;
		return messages.segment;
	}
	if (cap)
		*cap = STATS_CAP;
	return messages.stats;
}

int pcpu__error_vset(enum pcpu_error_domain domain, int err, const char *fmt, va_list ap)
{
	size_t cap;
	char *buf = pcpu__error_buffer(domain, &cap);

	vsnprintf(buf, cap, fmt, ap);
	errno = err;
	return -1;
}

int pcpu__error_set(enum pcpu_error_domain domain, int err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = pcpu__error_vset(domain, err, fmt, ap);
	va_end(ap);
	return rc;
}
