/* SPDX-License-Identifier: MIT */
/*
 * fork.c: one fork() mechanism for every layer of pcpu.
 *
 * A child of a multi-threaded process has one thread, the one that called
 * fork(). Any mutex another thread held at that instant stays held in the
 * child for ever, and whatever it guarded may be half-changed. The cure is
 * the usual one: take every lock before fork() and release it after, in the
 * parent and in the child (pthread_atfork). What this file adds is order:
 *
 *   layer (rank)      locks (taken in prepare, outermost first)
 *   SYSCTL   (5)      counter(9) sysctl records -> calls into registries
 *   SEGMENT  (4)      list of published segments
 *   REGISTRY (3)      default registry, list of registries, every reg->lock
 *   STATS    (2)      stats zone, gauge set locks, list of groups
 *   COUNTER  (1)      counter reset stripes
 *   ZONE     (0)      zones list, every zone's lock, chunk table
 *   LATE     (6)      none: the zone's last child step (see below)
 *
 * A layer's code may take a lower layer's locks while holding its own
 * (a registry allocates from its zone under its lock), never the reverse,
 * so prepare runs the handlers from the highest rank down and parent/child
 * run them from the lowest up. A child handler may use what the lower
 * layers' child handlers set up for it until the LATE rank's handler, the
 * child's last, takes it down (the zone's views of a shared file as the
 * parent sees it: zone_shared.c). Within one rank, in registration order
 * (prepare in reverse). A lower layer never knows a higher one: each
 * subsystem registers its own handlers here.
 *
 * The one pthread_atfork() is made at load time, before any thread of the
 * program can fork; a process that never uses pcpu pays a lock and an
 * unlock per fork. Made lazily, by the first registration under `lock`, it
 * left a window: a fork() by another thread before the pthread_atfork()
 * call took effect ran no handler, and the child inherited `lock` held by a
 * thread it does not have (tests/stats/test_default_fork.c hung there).
 * Registering a subsystem's handlers is lazy (the first zone, the first
 * registry, the first reset...). It takes `lock`, which prepare holds until
 * parent/child, so a subsystem that registers while another thread forks
 * waits for the fork to end; once registered, every later fork runs its
 * handlers. A subsystem therefore registers before it first takes a lock
 * of its own, and never while holding a pcpu lock (prepare, holding
 * `lock`, waits for those locks).
 */
#include "core.h"

#include <pthread.h>

#include <errno.h>

#define MAX_HANDLERS 16

struct handler {
	enum pcpu_fork_rank rank;
	void (*prepare)(void);
	void (*parent)(void);
	void (*child)(void);
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct handler handlers[MAX_HANDLERS]; /* sorted by rank, stable */
static int nhandlers;
static int atfork_made;

static void run_prepare(void);
static void run_parent(void);
static void run_child(void);

/* Priority 101, as rseq.c's pcpu_load_init: before a statically linked
 * program's own constructors, which may allocate counters (counter(9)'s
 * COUNTER_U64_DEFINE_EARLY). At the default priority a program linked with
 * libpcpu.a ran its constructors first (link order), the zone's fork
 * registration failed (ENOMEM, atfork_made still 0) and an early counter's
 * M_WAITOK allocation retried for ever before main() (found by
 * tests/vm/vm_stress.c, static, on every machine; tests/test_counter9_static.c). */
__attribute__((constructor(101))) static void fork_load_init(void)
{
	/* Fails only for lack of memory; registrations then fail (ENOMEM)
	 * rather than leave a subsystem without fork handlers. */
	if (pthread_atfork(run_prepare, run_parent, run_child) == 0)
		atfork_made = 1;
}

static void run_prepare(void)
{
	int i;

	pthread_mutex_lock(&lock);
	for (i = nhandlers - 1; i >= 0; i--)
		if (handlers[i].prepare)
			handlers[i].prepare();
}

static void run_parent(void)
{
	int i;

	for (i = 0; i < nhandlers; i++)
		if (handlers[i].parent)
			handlers[i].parent();
	pthread_mutex_unlock(&lock);
}

static void run_child(void)
{
	int i;

	for (i = 0; i < nhandlers; i++)
		if (handlers[i].child)
			handlers[i].child();
	/* A plain mutex, locked by this very thread in prepare: the child's
	 * only thread may release it. */
	pthread_mutex_unlock(&lock);
}

int pcpu__fork_register(int *once, enum pcpu_fork_rank rank, void (*prepare)(void),
		       void (*parent)(void), void (*child)(void))
{
	int i, rc = 0;

	if (__atomic_load_n(once, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&lock);
	if (*once)
		goto out;
	if (nhandlers == MAX_HANDLERS) {
		rc = -1; /* cannot happen: pcpu has fewer subsystems */
		errno = ENOMEM;
		goto out;
	}
	if (!atfork_made) {
		rc = -1; /* pthread_atfork() failed at load time */
		errno = ENOMEM;
		goto out;
	}
	for (i = nhandlers; i > 0 && handlers[i - 1].rank > rank; i--)
		handlers[i] = handlers[i - 1];
	handlers[i].rank = rank;
	handlers[i].prepare = prepare;
	handlers[i].parent = parent;
	handlers[i].child = child;
	nhandlers++;
	__atomic_store_n(once, 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&lock);
	return rc;
}
