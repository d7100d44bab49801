/* SPDX-License-Identifier: MIT */
/*
 * pcpu_exporter_error(): what the last failed call of this library met, in
 * the calling thread. One buffer per thread, as errno: a message is never
 * another thread's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "exporter_internal.h"

static __thread char message[512];

int pcpu__exp_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	errno = err;
	return -1;
}

void pcpu__exp_clear(void)
{
	message[0] = '\0';
}

const char *pcpu_exporter_error(void)
{
	return message;
}
