/* SPDX-License-Identifier: MIT */
/*
 * pcpustat's users: a user named by name or uid on the command line, and
 * the name shown for a segment's owner.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>

#include "pcpustat.h"

int parse_user(const char *s, unsigned *uid)
{
	struct passwd *pw;
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s && !*end && errno == 0 && v < 0xffffffffu) {
		*uid = (unsigned)v;
		return 0;
	}
	pw = getpwnam(s);
	if (!pw)
		return -1;
	*uid = (unsigned)pw->pw_uid;
	return 0;
}

const char *user_name(unsigned uid, char *buf, size_t cap)
{
	struct passwd *pw = getpwuid((uid_t)uid);

	if (pw)
		snprintf(buf, cap, "%s", pw->pw_name);
	else
		snprintf(buf, cap, "%u", uid);
	return buf;
}
