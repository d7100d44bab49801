/* SPDX-License-Identifier: MIT */
/*
 * The present CPUs, as tests that check which slots a fetch walks need
 * them: read from /sys/devices/system/cpu/present ("0-3,8,10-11"), the
 * file src/slot_walk.c reads. Test code only (CHECK fails on an unreadable
 * file).
 */
#ifndef PCPU_TEST_PRESENT_CPUS_H
#define PCPU_TEST_PRESENT_CPUS_H

#include "check.h"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* Sets set[c] for every present CPU c below `size`; returns how many CPUs
 * are present (those at or above `size` counted too). */
static inline unsigned mark_present_cpus(unsigned char *set, size_t size)
{
	char buf[4096], *s = buf;
	unsigned n = 0;
	ssize_t len;
	int fd = open("/sys/devices/system/cpu/present", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(len > 0);
	buf[len] = 0;
	while (*s >= '0' && *s <= '9') {
		unsigned a = (unsigned)strtoul(s, &s, 10), b = a;

		if (*s == '-')
			b = (unsigned)strtoul(s + 1, &s, 10);
		for (unsigned c = a; c <= b; c++, n++)
			if (c < size)
				set[c] = 1;
		if (*s == ',')
			s++;
	}
	return n;
}

#endif /* PCPU_TEST_PRESENT_CPUS_H */
