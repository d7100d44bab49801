/* SPDX-License-Identifier: MIT */
/*
 * What group.c (creation, updates, fork()) and group_read.c (reading, and
 * the repair of a tree lane whose holder died) share: where a group's lanes
 * are, a tree lane's layout, a reader's time bound. group.c's top comment
 * explains the lanes and the protocols. Private to src/stats/; nothing here
 * is exported.
 */
#ifndef PCPU_STATS_GROUP_LANES_H
#define PCPU_STATS_GROUP_LANES_H

#include <stddef.h>
#include <stdint.h>

#include <pcpu/group.h>
#include <pcpu/worker.h>

#include "../core/core.h"

static inline void cpu_relax(void)
{
	pcpu__arch_cpu_relax(); /* the arch header's spin-wait hint */
}

/* A reader's time bound (group_read.c). */
struct deadline {
	uint64_t timeout_ns;
	uint64_t end_ns; /* 0 until the first wait */
	unsigned waits;
};

/* Fallback lanes per slot: two, so that a CPU's threads have a second lane
 * when one of them is preempted holding the first. */
#define FB_PER_SLOT 2

/* The CPU slots whose lanes are used: those a thread's index or a
 * fallback add can name (the core's slot walk: slot 0, the present CPUs,
 * mm_cid's range; pcpu__cpu_slots_walked()). Lanes of the other slots are
 * never written nor read: a published group's file has no pages there
 * (a possible CPU that is not present costs nothing), and the owned slots'
 * regions (pcpu/worker.h) are not the groups' at all. */
static inline size_t walked_slots(void)
{
	const uint16_t *list;

	return pcpu__cpu_slots_walked(&list);
}

/* The k-th of them (k < walked_slots()). */
static inline size_t walked_slot(size_t k)
{
	const uint16_t *list;

	(void)pcpu__cpu_slots_walked(&list);
	return list ? list[k] : k;
}

/* Fallback lanes per group: fb_per_slot in each walked slot's region. */
static inline size_t lanes_total(const pcpu_group_t *g)
{
	return walked_slots() * g->pcpu__fb_per_slot;
}

/* Where a thread on CPU `cpu` (sched_getcpu(), -1 if unknown) starts
 * looking for a free fallback lane: its own slot's lanes when that slot is
 * walked, so lanes stay warm in the CPU's cache. */
static inline size_t fallback_start(const pcpu_group_t *g, int cpu)
{
	return cpu < 0 ? 0 : ((size_t)cpu % walked_slots()) * g->pcpu__fb_per_slot;
}

/* Fallback lane `l` (0..lanes_total-1) of group i. */
static inline intptr_t *fallback_lane(const pcpu_group_t *g, size_t i, size_t l)
{
	size_t slot = walked_slot(l / g->pcpu__fb_per_slot), k = l % g->pcpu__fb_per_slot;

	return (intptr_t *)(g->pcpu__fallback + (slot << PCPU_SLOT_STRIDE_SHIFT) +
			    (i * g->pcpu__fb_per_slot + k) * g->pcpu__lane_size);
}

static inline intptr_t *primary_lane(const pcpu_group_t *g, size_t i, size_t slot)
{
	return (intptr_t *)(g->pcpu__primary + (slot << PCPU_SLOT_STRIDE_SHIFT) +
			    i * g->pcpu__lane_size);
}

/* ---- shared by a process tree (group.c's top) ---- */

/* A tree lane: [seq | undo_seq | repairer | value[n] | undo[n]]. */
enum { TREE_SEQ = 0, TREE_UNDO_SEQ = 1, TREE_REPAIRER = 2, TREE_HEAD = 3 };
#define TREE_GEN ((uint64_t)1 << 32) /* seq's generation unit (group.c's top) */

static inline size_t tree_lane_size(unsigned members)
{
	return (TREE_HEAD + 2 * (size_t)members) * sizeof(int64_t);
}

/* The calling thread's tag, (tid << 1) | 1: what a tree lane's seq holds
 * while the thread holds it. Async-signal-safe (cached per thread; the
 * first call makes one gettid system call). */
PCPU_HIDDEN uint64_t pcpu__group_tree_tag(void);

/* Forgets the calling thread's tag: in a fork() child, whose thread has
 * another id. */
PCPU_HIDDEN void pcpu__group_tree_tag_forget(void);

/* A tree lane whose holder died in mid-update is made free again (values
 * back from undo if the update had begun, seq even); nothing if its holder
 * lives or another repairer is at work. Async-signal-safe. */
PCPU_HIDDEN void pcpu__group_tree_lane_repair(int64_t *lane, unsigned n);

/* Reads a lane whole (the seqcount protocol, bounded by `dl`): its values
 * into out[0..n-1] and its seq into *seq_out. 0, or -1 once time is up. */
PCPU_HIDDEN int pcpu__group_read_lane_whole(const intptr_t *seqp, unsigned n, int64_t *out,
					   intptr_t *seq_out, struct deadline *dl);

#endif /* PCPU_STATS_GROUP_LANES_H */
