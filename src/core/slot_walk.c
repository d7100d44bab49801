/* SPDX-License-Identifier: MIT */
/*
 * Which slots a fetch reads.
 *
 * A zone has a slot per possible CPU (pcpu_nslots()), but a slot is written
 * only by a thread whose index is that slot, and the index is always
 *  - a CPU number (rseq cpu_id): an online CPU, so a present one;
 *  - an mm_cid: below the number of CPUs the process may run on, so below
 *    the number of present CPUs;
 *  - a fallback slot (a thread without rseq: pcpu_fallback_slot_assign()),
 *    which pcpu takes from this same list;
 *  - slot 0: the counters' reset offsets live in slot 0's mirror word, and
 *    an unregistered thread of glibc's area reads mm_cid 0.
 * A virtual machine started with many possible CPUs and few present ones
 * (qemu -smp 16,maxcpus=256, or possible_cpus=256: 16 present, 256
 * possible) then reads 16 slots per fetch instead of 256, and leaves the
 * other slots' pages untouched: no page-table pages for them (the emulated
 * machines' footprint run, scripts/vm/run-all.sh, measures it).
 *
 * The same list says which slots need memory where memory is reserved
 * ahead of writes: a published segment's file (src/segment/backing.c)
 * allocates pages only in the regions of these slots and their mirrors
 * (pcpu__slot_needs_memory()), so a possible CPU that is not present costs
 * nothing, and readers of shared memory read only these slots (a read of a
 * hole of a tmpfs mapping allocates a page).
 *
 * The list is made once, from /sys/devices/system/cpu/present. CPUs taken
 * offline and online again stay in it (they are present throughout). A CPU
 * hot-added later (made present after pcpu started) is not in it: a thread
 * that then runs there writes a slot that fetches of this process do not
 * read, and in a published segment pages the file allocates as they are
 * written (SIGBUS if the file system is full then). That is a documented
 * limit (README, "Guarantees"): no slow path runs between a thread's move
 * to a new CPU and its next add, so nothing could reserve first. A process
 * that expects CPUs to be hot-added sets PCPU_SLOT_WALK=all, read once at
 * start-up, which walks every slot and reserves them all; so does a value
 * not understood (refused: pcpu_environment_error()).
 */
#include "slot_walk.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rseq_internal.h" /* PCPU__SLOT_MAX */

#define SLOT_MAX PCPU__SLOT_MAX

PCPU_HIDDEN uint16_t pcpu_walk_slots[SLOT_MAX];
PCPU_HIDDEN uint32_t pcpu_walk_count;
PCPU_HIDDEN uint32_t pcpu_walk_cpu_count;
PCPU_HIDDEN int pcpu_walk_all;
PCPU_HIDDEN uint16_t pcpu_walk_pos[SLOT_MAX];
PCPU_HIDDEN int pcpu_commit_strict;

/* Whether the kernel charges commit for every writable private mapping
 * (vm.overcommit_memory = 2, "never overcommit"): MAP_NORESERVE is then
 * ignored. 0 when it cannot tell. Async-signal-safe (open, read, close). */
static int overcommit_never(void)
{
	char c = 0;
	int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (read(fd, &c, 1) != 1)
		c = 0;
	close(fd);
	return c == '2';
}

/* PCPU_COMMIT: "strict" (always keep commit to what is written), "auto"
 * or unset (strict when the kernel never overcommits). Anything else is
 * refused, and taken as "auto". */
static void commit_init(void)
{
	const char *v = getenv("PCPU_COMMIT");

	if (v && strcmp(v, "strict") == 0) {
		pcpu_commit_strict = 1;
		return;
	}
	if (v && *v && strcmp(v, "auto") != 0)
		pcpu__environment_refuse("PCPU_COMMIT: neither strict nor auto; auto (strict where "
					 "vm.overcommit_memory is 2)");
	pcpu_commit_strict = overcommit_never();
}

/* Marks every CPU of a list such as "0-3,8,10-11" below nslots in `set`;
 * returns how many CPUs the list names (below or above nslots), 0 if it
 * does not parse. */
static uint32_t mark_list(const char *s, uint8_t *set, uint32_t nslots)
{
	uint32_t count = 0;

	while (*s && *s != '\n') {
		uint32_t a = 0, b;
		int digits = 0;

		while (*s >= '0' && *s <= '9' && digits < 8) {
			a = a * 10 + (uint32_t)(*s++ - '0');
			digits++;
		}
		if (!digits)
			return 0;
		b = a;
		if (*s == '-') {
			s++;
			b = 0;
			digits = 0;
			while (*s >= '0' && *s <= '9' && digits < 8) {
				b = b * 10 + (uint32_t)(*s++ - '0');
				digits++;
			}
			if (!digits || b < a)
				return 0;
		}
		for (uint32_t c = a; c <= b; c++) {
			if (c < nslots)
				set[c] = 1;
			count++;
		}
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return 0;
	}
	return count;
}

void pcpu_slot_walk_init(uint32_t nslots)
{
	static uint8_t set[SLOT_MAX];
	char buf[4096];
	const char *env = getenv("PCPU_SLOT_WALK");
	ssize_t len = -1;
	uint32_t present = 0, n = 0;
	int fd, every = env && !strcmp(env, "all");

	commit_init();
	/* "present" (or empty, or unset): the list below. A value not
	 * understood walks every slot -- slower, never short of a slot (a
	 * process that asked for "all" against a hot-added CPU must not get
	 * the list by a typo) -- and is refused. */
	if (!every && env && *env && strcmp(env, "present") != 0) {
		every = 1;
		pcpu__environment_refuse("PCPU_SLOT_WALK: neither all nor present; every slot is walked");
	}
	if (nslots >= SLOT_MAX) {
		/* No room for owned slots (pcpu_init() gives none). */
		pcpu_walk_all = 1;
		pcpu_walk_cpu_count = nslots;
		__atomic_store_n(&pcpu_walk_count, nslots, __ATOMIC_RELEASE);
		return;
	}
	memset(set, 0, nslots);
	if (!every) {
		fd = open("/sys/devices/system/cpu/present", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			len = read(fd, buf, sizeof(buf) - 1);
			close(fd);
		}
		if (len > 0) {
			buf[len] = '\0';
			present = mark_list(buf, set, nslots);
		}
	}
	if (present == 0) {
		memset(set, 1, nslots); /* unknown: every slot */
	} else {
		set[0] = 1;
		for (uint32_t c = 0; c < present && c < nslots; c++)
			set[c] = 1; /* mm_cid's range */
	}
	for (uint32_t s = 0; s < nslots; s++)
		if (set[s]) {
			pcpu_walk_pos[s] = (uint16_t)n;
			pcpu_walk_slots[n++] = (uint16_t)s;
		}
	for (uint32_t s = 0; s < nslots; s++)
		if (!set[s])
			pcpu_walk_pos[s] = (uint16_t)(s % n);
	pcpu_walk_cpu_count = n;
	__atomic_store_n(&pcpu_walk_count, n, __ATOMIC_RELEASE);
}

void pcpu_slot_walk_add(uint32_t slot)
{
	uint32_t n = __atomic_load_n(&pcpu_walk_count, __ATOMIC_RELAXED);

	if (pcpu_walk_all || n >= SLOT_MAX)
		return; /* every slot is walked already */
	pcpu_walk_slots[n] = (uint16_t)slot;
	__atomic_store_n(&pcpu_walk_count, n + 1, __ATOMIC_RELEASE);
}
