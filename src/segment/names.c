/* SPDX-License-Identifier: MIT */
/*
 * Segment names ([A-Za-z0-9_.-], 1..64 bytes) and segment file names
 * ("pcpu.<pid>.<name>", canonical: one file name per pid and name).
 */
#include <errno.h>
#include <string.h>

#include "segment_internal.h"

static int name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

int pcpu__seg_check_name(const char *name)
{
	size_t i;

	if (!name || !*name)
		return pcpu__seg_fail(EINVAL, "segment name is empty");
	if (name[0] == '.' || name[0] == '-')
		return pcpu__seg_fail(EINVAL, "segment name must not start with '.' or '-'");
	for (i = 0; name[i]; i++) {
		if (i >= PCPU__SEG_NAME_MAX)
			return pcpu__seg_fail(EINVAL, "segment name longer than %d bytes",
					      PCPU__SEG_NAME_MAX);
		if (!name_char((unsigned char)name[i]))
			return pcpu__seg_fail(EINVAL,
					      "segment name: byte 0x%02x at offset %zu not allowed "
					      "(letters, digits, '_', '.', '-')",
					      (unsigned char)name[i], i);
	}
	return 0;
}

int pcpu__seg_parse_file_name(const char *file, pid_t *pid, char *name)
{
	const char *p = file + sizeof PCPU__SEG_FILE_PREFIX - 1;
	unsigned long long v = 0;
	size_t digits = 0;

	if (strncmp(file, PCPU__SEG_FILE_PREFIX, sizeof PCPU__SEG_FILE_PREFIX - 1) != 0)
		return -1;
	/* Canonical only: one file name per (pid, name). With leading zeros,
	 * anyone could plant pcpu.0<PID>.<NAME>, a second file that parses as
	 * another process's segment. */
	if (*p == '0')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (digits > 9)
			return -1;
	}
	if (digits == 0 || *p != '.' || v == 0 || v > 0x7fffffff)
		return -1;
	p++;
	if (strlen(p) > PCPU__SEG_NAME_MAX)
		return -1;
	{
		/* Keep the thread's message: a file name that is not ours is
		 * not an error. */
		size_t i;
		if (!*p || p[0] == '.' || p[0] == '-')
			return -1;
		for (i = 0; p[i]; i++)
			if (!name_char((unsigned char)p[i]))
				return -1;
	}
	*pid = (pid_t)v;
	strcpy(name, p);
	return 0;
}
