/* SPDX-License-Identifier: MIT */
/*
 * The CPU slots a fetch walks, as tests that check the walk need them:
 * the present CPUs from /sys/devices/system/cpu/present ("0-3,8,10-11"),
 * the file src/slot_walk.c reads, with slot 0 and 0 .. present - 1 (as
 * pcpu_slot_walk_init() adds them). Test code only (CHECK fails on an
 * unreadable file).
 */
#ifndef PCPU_TEST_PRESENT_CPUS_H
#define PCPU_TEST_PRESENT_CPUS_H

#include "check.h"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* Sets set[s] for every CPU slot s below `size` that a fetch walks (slot
 * 0, every present CPU, 0 .. present - 1); returns how many CPUs are
 * present (those at or above `size` counted too). */
static inline unsigned mark_walked_cpu_slots(unsigned char *set, size_t size)
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
	set[0] = 1;
	for (unsigned c = 0; c < n && c < size; c++)
		set[c] = 1; /* mm_cid's range */
	return n;
}

#endif /* PCPU_TEST_PRESENT_CPUS_H */
