/* SPDX-License-Identifier: MIT */
/*
 * Reading consistent groups (pcpu_group_read(), the reads of a shared
 * registry's groups), and the repair of a tree lane whose holder died,
 * which readers do as they find one (and writers that find every fallback
 * lane held). The protocols are explained at the top of group.c; the lanes'
 * layout is in group_lanes.h.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/group.h>

#include "stats_internal.h"
#include "metrics.h"
#include "../core/core.h"
#include "group_lanes.h"

/* ---- a tree lane's holders (group.c's top) ---- */

/* The calling thread's tag, (tid << 1) | 1: what seq holds while it holds a
 * lane. Cached per thread (initial-exec: a handler's first use must not
 * allocate), forgotten in a fork() child, whose thread has another id. */
static __thread uint32_t my_tag __attribute__((tls_model("initial-exec")));

uint64_t pcpu__group_tree_tag(void)
{
	if (PCPU_UNLIKELY(my_tag == 0))
		my_tag = ((uint32_t)syscall(SYS_gettid) << 1) | 1u;
	return my_tag;
}

void pcpu__group_tree_tag_forget(void)
{
	my_tag = 0;
}

/* Whether the thread whose tag is in the low half of `held` still runs: a
 * lane it holds is then its own, however long it takes (preempted,
 * stopped, traced). Only ESRCH is death: EPERM is a live thread of another
 * user (a worker that dropped privileges). kill() of a thread id reaches
 * its process; the tree's processes share one pid namespace. */
static int tree_holder_lives(uint64_t held)
{
	pid_t tid = (pid_t)((uint32_t)held >> 1);

	return tid > 0 && (kill(tid, 0) == 0 || errno != ESRCH);
}

/* A lane whose holder died in mid-update is made free again: its values
 * back from undo if the update had begun, seq even. Repairers exclude each
 * other through `repairer` (their tag), a dead repairer's taken over: the
 * repair is idempotent. Nobody else writes a held lane. */
void pcpu__group_tree_lane_repair(int64_t *lane, unsigned n)
{
	uint64_t s = (uint64_t)__atomic_load_n(&lane[TREE_SEQ], __ATOMIC_ACQUIRE), r;
	int64_t *v = lane + TREE_HEAD, *undo = v + n;
	unsigned k;

	if (!(s & 1) || tree_holder_lives(s))
		return;
	r = (uint64_t)__atomic_load_n(&lane[TREE_REPAIRER], __ATOMIC_ACQUIRE);
	if ((r != 0 && tree_holder_lives(r)) ||
	    !__atomic_compare_exchange_n(&lane[TREE_REPAIRER], (int64_t *)&r, (int64_t)pcpu__group_tree_tag(), 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return; /* another repairer at work */
	if ((uint64_t)__atomic_load_n(&lane[TREE_SEQ], __ATOMIC_ACQUIRE) == s) {
		if ((uint64_t)__atomic_load_n(&lane[TREE_UNDO_SEQ], __ATOMIC_ACQUIRE) == s)
			for (k = 0; k < n; k++)
				__atomic_store_n(&v[k], __atomic_load_n(&undo[k], __ATOMIC_RELAXED),
						 __ATOMIC_RELEASE);
		__atomic_store_n(&lane[TREE_SEQ], (int64_t)((s & ~(TREE_GEN - 1)) + TREE_GEN),
				 __ATOMIC_RELEASE);
	}
	__atomic_store_n(&lane[TREE_REPAIRER], 0, __ATOMIC_RELEASE);
}

/* ---- reading ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Called when a lane is being written; returns -1 once time is up. */
static int wait_a_little(struct deadline *dl)
{
	if (!dl->timeout_ns)
		return -1;
	if (!dl->end_ns)
		dl->end_ns = now_ns() + dl->timeout_ns;
	dl->waits++;
	/* Spin briefly (an owner that runs is done in nanoseconds), then yield
	 * so that an owner preempted on our CPU can run; look at the clock
	 * only now and then, it is the costlier part. */
	if (dl->waits < 128) {
		cpu_relax();
		return 0;
	}
	sched_yield();
	if ((dl->waits & 15) == 0 && now_ns() >= dl->end_ns)
		return -1;
	return 0;
}

/* One look at a lane: 0 and its values and seq if it was whole, -1 if it
 * was being written. */
static int read_lane_once(const intptr_t *seqp, unsigned n, int64_t *out, intptr_t *seq_out)
{
	const int64_t *v = (const int64_t *)(const void *)((const char *)seqp + PCPU__GROUP_SEQ_SIZE);
	intptr_t s1 = __atomic_load_n(seqp, __ATOMIC_ACQUIRE);
	unsigned k;

	if (s1 & 1)
		return -1;
	/* Acquire loads: the second seq load cannot move before them, and a
	 * new value brings the odd seq with it. */
	for (k = 0; k < n; k++)
		out[k] = __atomic_load_n(&v[k], __ATOMIC_ACQUIRE);
	if (__atomic_load_n(seqp, __ATOMIC_RELAXED) != s1)
		return -1;
	*seq_out = s1;
	return 0;
}

int pcpu__group_read_lane_whole(const intptr_t *seqp, unsigned n, int64_t *out, intptr_t *seq_out,
				struct deadline *dl)
{
	while (read_lane_once(seqp, n, out, seq_out) != 0)
		if (wait_a_little(dl) < 0)
			return -1;
	return 0;
}

/* A tree group's lane, added to acc: its values, or -- held -- the values
 * from before its holder's update, which never changes while it is held
 * (see the top): a read never waits for a holder, preempted, stopped or
 * dead. It retries only when an update ended (or began its values) while it
 * read, bounded by `dl`. A lane whose holder is dead is repaired, so that
 * its CPU's writers get it back. */
static int read_tree_lane(intptr_t *lanep, unsigned n, int64_t *acc, struct deadline *dl)
{
	int64_t *lane = (int64_t *)lanep, tmp[PCPU_GROUP_MAX_MEMBERS];
	const int64_t *v = lane + TREE_HEAD;
	unsigned k;

	for (;;) {
		int64_t s1 = __atomic_load_n(&lane[TREE_SEQ], __ATOMIC_ACQUIRE);
		int64_t u1 = __atomic_load_n(&lane[TREE_UNDO_SEQ], __ATOMIC_ACQUIRE);
		const int64_t *src = (s1 & 1) && u1 == s1 ? v + n : v;

		/* Acquire: the checks below stay after these loads. */
		for (k = 0; k < n; k++)
			tmp[k] = __atomic_load_n(&src[k], __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&lane[TREE_UNDO_SEQ], __ATOMIC_ACQUIRE) == u1 &&
		    __atomic_load_n(&lane[TREE_SEQ], __ATOMIC_RELAXED) == s1) {
			if (s1 & 1)
				pcpu__group_tree_lane_repair(lane, n);
			break;
		}
		if (wait_a_little(dl) < 0)
			return -1;
	}
	for (k = 0; k < n; k++)
		acc[k] = pcpu__group_wrap_add(acc[k], tmp[k]);
	return 0;
}

static int read_lane(const intptr_t *seqp, unsigned n, int64_t *acc, struct deadline *dl)
{
	int64_t tmp[PCPU_GROUP_MAX_MEMBERS];
	intptr_t seq;
	unsigned k;

	if (pcpu__group_read_lane_whole(seqp, n, tmp, &seq, dl) < 0)
		return -1;
	for (k = 0; k < n; k++)
		acc[k] = pcpu__group_wrap_add(acc[k], tmp[k]);
	return 0;
}

int pcpu_group_read_timeout(const pcpu_group_t *g, size_t i, int64_t *out, uint64_t timeout_ns)
{
	struct deadline dl = { timeout_ns, 0, 0 };
	int64_t acc[PCPU_GROUP_MAX_MEMBERS];
	size_t s, l, nslots, nlanes;
	unsigned n;

	if (!g || !out || i >= g->pcpu__count) {
		errno = EINVAL;
		return -1;
	}
	nslots = walked_slots();
	nlanes = lanes_total(g);
	n = g->pcpu__members;
	memset(acc, 0, sizeof acc);
	if (g->pcpu__tree) {
		for (s = 0; s < nslots; s++)
			if (read_tree_lane(primary_lane(g, i, walked_slot(s)), n, acc, &dl) < 0)
				goto timedout;
		for (l = 0; l < nlanes; l++)
			if (read_tree_lane(fallback_lane(g, i, l), n, acc, &dl) < 0)
				goto timedout;
		memcpy(out, acc, n * sizeof *out);
		return 0;
	}
	for (s = 0; s < nslots; s++)
		if (read_lane(primary_lane(g, i, walked_slot(s)), n, acc, &dl) < 0)
			goto timedout;
	for (l = 0; l < nlanes; l++)
		if (read_lane(fallback_lane(g, i, l), n, acc, &dl) < 0)
			goto timedout;
	memcpy(out, acc, n * sizeof *out);
	return 0;
timedout:
	pcpu__set_error("group read: a copy stayed in mid-update past the timeout");
	errno = ETIMEDOUT;
	return -1;
}

int pcpu_group_read(const pcpu_group_t *g, size_t i, int64_t *out)
{
	return pcpu_group_read_timeout(g, i, out, PCPU_GROUP_READ_TIMEOUT_NS);
}

int pcpu__group_tree_read(pcpu_zone_t *zone, unsigned members, void *at, int64_t *out)
{
	pcpu_group_t g;

	memset(&g, 0, sizeof g);
	g.pcpu__count = 1;
	g.pcpu__members = members;
	g.pcpu__lane_size = (uint32_t)tree_lane_size(members);
	g.pcpu__fb_per_slot = FB_PER_SLOT;
	g.pcpu__tree = zone;
	g.pcpu__primary = at;
	g.pcpu__fallback = (char *)at + g.pcpu__lane_size; /* group_create(), one group */
	return pcpu_group_read(&g, 0, out);
}
