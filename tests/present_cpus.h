/* SPDX-License-Identifier: MIT */
/*
 * The machine's CPU lists as tests need them: one parser of the kernel's
 * list files ("0-3,8,10-11": /sys/devices/system/cpu/present, possible),
 * and the CPU slots a fetch walks -- the present CPUs (the file
 * src/core/slot_walk.c reads), with slot 0 and 0 .. present - 1 (as
 * pcpu_slot_walk_init() adds them). Test code only.
 */
#ifndef PCPU_TEST_PRESENT_CPUS_H
#define PCPU_TEST_PRESENT_CPUS_H

#include "check.h"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* How many CPUs the list file `path` names (0 when it cannot be read), and
 * set[c] = 1 for each of them below `size` (`set` may be NULL, size 0). */
static inline unsigned read_cpu_list(const char *path, unsigned char *set, size_t size)
{
	char buf[4096], *s = buf;
	unsigned n = 0;
	ssize_t len;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
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

/* Sets set[s] for every CPU slot s below `size` that a fetch walks (slot
 * 0, every present CPU, 0 .. present - 1); returns how many CPUs are
 * present (those at or above `size` counted too). CHECK fails on an
 * unreadable file. */
static inline unsigned mark_walked_cpu_slots(unsigned char *set, size_t size)
{
	unsigned n = read_cpu_list("/sys/devices/system/cpu/present", set, size);

	CHECK(n > 0);
	set[0] = 1;
	for (unsigned c = 0; c < n && c < size; c++)
		set[c] = 1; /* mm_cid's range */
	return n;
}

#endif /* PCPU_TEST_PRESENT_CPUS_H */
