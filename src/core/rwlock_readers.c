/* SPDX-License-Identifier: MIT */
/*
 * rwlock_readers.c: the registry of reader records of pcpu_rwlock (the read
 * side at liburcu's cost; src/core/rwlock.c's file comment has the protocol and
 * why it is exact).
 *
 * Each thread has one record: the thread-local word pcpu__rwlock_rec (the
 * header's inline read side uses it) and, here, its extra holds (depth) and
 * list links. A thread registers at its first pcpu_rwlock_rdlock() (the slow
 * path: the record starts as PCPU__RW_REC_UNREG, which the fast path never
 * takes; not at a tryrdlock, which may run in a signal handler, and
 * pthread_setspecific() is not async-signal-safe)
 * and leaves the list at its exit (a pthread key's destructor). Writers
 * read every record in the list.
 *
 * The list has one lock, a futex word (Drepper's mutex: 0 free, 1 held,
 * 2 held with sleepers). Registration only tries it, so a read lock never
 * waits for writers' scans or for other threads' exits. A thread that
 * cannot register now counts its read lock in the per-CPU or atomic words,
 * which writers always add, and tries again at its next rdlock. Writers,
 * thread exit and fork wait for it (sleeping).
 *
 * A thread that exits holding read locks through its record (or whose
 * hold another thread released: any thread may release a read lock) moves
 * them to the lock's atomic count, so the sum is unchanged; the lock then
 * stays read-locked for good, as it did before records. fork(): the child
 * has only the forking thread, so every other thread's record is folded
 * the same way and dropped from the child's list (the child's glibc reuses
 * those threads' TLS): their read locks stay held in the child, as
 * pcpu/rwlock.h documents, and the list is the child's threads.
 */
#include "rwlock_internal.h"
#include "core.h"
#include "percpu_sync_internal.h"

#include <errno.h>
#include <pthread.h>

/* The record (pcpu/rwlock.h). Initial value: not registered. */
PCPU_API __thread uintptr_t pcpu__rwlock_rec __attribute__((tls_model("initial-exec"))) =
	PCPU__RW_REC_UNREG;

enum { NODE_NEW = 0, NODE_LISTED = 1, NODE_EXITED = 2 };

struct rd_node {
	uintptr_t *rec;  /* the thread's pcpu__rwlock_rec */
	uintptr_t depth; /* holds beyond the first, while *rec is tagged */
	struct rd_node *next, *prev;
	int state;
};

static __thread struct rd_node self __attribute__((tls_model("initial-exec")));

static struct rd_node head = { NULL, 0, &head, &head, NODE_LISTED };
static uint32_t list_lock; /* 0 free, 1 held, 2 held and someone sleeps */
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_made;
static int fork_registered;

static int list_trylock(void)
{
	uint32_t zero = 0;

	return __atomic_compare_exchange_n(&list_lock, &zero, 1, 0, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

static void list_lock_wait(void)
{
	if (list_trylock())
		return;
	while (__atomic_exchange_n(&list_lock, 2, __ATOMIC_ACQUIRE) != 0)
		pcpu_futex_wait(&list_lock, 2);
}

static void list_unlock(void)
{
	if (__atomic_exchange_n(&list_lock, 0, __ATOMIC_RELEASE) == 2)
		pcpu_futex_wake(&list_lock, 1);
}

static void link_node(struct rd_node *n)
{
	n->next = &head;
	n->prev = head.prev;
	head.prev->next = n;
	head.prev = n;
}

static void unlink_node(struct rd_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

/* Read locks a record holds, and of which lock (NULL: none). */
static const pcpu_rwlock_t *rec_holds(const struct rd_node *n, int64_t *holds)
{
	uintptr_t r = __atomic_load_n(n->rec, __ATOMIC_ACQUIRE);

	if (r == 0 || r == PCPU__RW_REC_UNREG || (r & PCPU__RW_REC_WITHDRAWN))
		return NULL;
	*holds = 1 + ((r & 1) ? (int64_t)__atomic_load_n(&n->depth, __ATOMIC_RELAXED) : 0);
	return (const pcpu_rwlock_t *)(r & ~(uintptr_t)1);
}

/* Moves the record's holds to its lock's atomic count and marks the record
 * unregistered. Caller holds the list lock; the record's thread is the
 * caller, or gone (fork child). Adding before clearing, under the lock
 * writers scan with, keeps every writer's sum from dropping below the
 * truth (it may count the holds twice, and is woken to count again). */
static void fold(struct rd_node *n)
{
	int64_t holds = 0;
	const pcpu_rwlock_t *lock = rec_holds(n, &holds);
	struct rwlock_impl *l;

	if (lock) {
		l = pcpu_rwlock_impl(lock);
		__atomic_fetch_add(&l->slow_readers, holds, __ATOMIC_SEQ_CST);
	}
	__atomic_store_n(n->rec, PCPU__RW_REC_UNREG, __ATOMIC_SEQ_CST);
	__atomic_store_n(&n->depth, 0, __ATOMIC_RELAXED);
	if (lock && (__atomic_load_n(&l->state, __ATOMIC_SEQ_CST) & PCPU__RW_WRITER))
		pcpu_rwlock_wake_writer(l);
}

static void on_thread_exit(void *arg)
{
	struct rd_node *n = arg;

	list_lock_wait();
	n->state = NODE_EXITED; /* never registers again (later destructors) */
	fold(n);
	unlink_node(n);
	list_unlock();
}

static void fork_prepare(void)
{
	list_lock_wait();
}

static void fork_parent(void)
{
	list_unlock();
}

static void fork_child(void)
{
	struct rd_node *n, *next;

	for (n = head.next; n != &head; n = next) {
		next = n->next;
		if (n == &self)
			continue;
		fold(n);
		unlink_node(n);
	}
	__atomic_store_n(&list_lock, 0, __ATOMIC_RELEASE);
}

static void make_key(void)
{
	key_made = pthread_key_create(&exit_key, on_thread_exit) == 0;
}

int pcpu_rwlock_readers_init(void)
{
	if (pcpu__fork_register(&fork_registered, PCPU_FORK_COUNTER, fork_prepare, fork_parent,
			       fork_child) != 0)
		return -1;
	pthread_once(&key_once, make_key);
	if (!__atomic_load_n(&key_made, __ATOMIC_ACQUIRE)) {
		errno = EAGAIN;
		return -1;
	}
	return 0;
}

int pcpu_rwlock_register_self(void)
{
	int saved = errno;

	if (self.state != NODE_NEW)
		return self.state == NODE_LISTED ? 0 : -1;
	if (!__atomic_load_n(&key_made, __ATOMIC_ACQUIRE) || !list_trylock())
		return -1;
	/* A signal handler may have registered us between the check above
	 * and the lock. */
	if (self.state == NODE_NEW) {
		self.rec = &pcpu__rwlock_rec;
		self.depth = 0;
		if (pthread_setspecific(exit_key, &self) == 0) {
			link_node(&self);
			self.state = NODE_LISTED;
			__atomic_store_n(&pcpu__rwlock_rec, 0, __ATOMIC_SEQ_CST);
		}
	}
	list_unlock();
	errno = saved;
	return self.state == NODE_LISTED ? 0 : -1;
}

uintptr_t *pcpu_rwlock_rec_depth(void)
{
	return &self.depth;
}

int64_t pcpu_rwlock_records_count(const pcpu_rwlock_t *lock)
{
	const struct rd_node *n;
	int64_t sum = 0;

	list_lock_wait();
	for (n = head.next; n != &head; n = n->next) {
		int64_t holds = 0;

		if (rec_holds(n, &holds) == lock)
			sum += holds;
	}
	list_unlock();
	return sum;
}

void pcpu_rwlock_records_forget(const pcpu_rwlock_t *lock)
{
	struct rd_node *n;

	list_lock_wait();
	for (n = head.next; n != &head; n = n->next) {
		int64_t holds = 0;
		uintptr_t r = __atomic_load_n(n->rec, __ATOMIC_ACQUIRE);

		/* Its thread writes neither word while the record names a
		 * lock other than the one it locks or unlocks, and no thread
		 * uses this one. The depth first: once the record is 0, the
		 * thread may take another lock through it. */
		if (rec_holds(n, &holds) != lock)
			continue;
		__atomic_store_n(&n->depth, 0, __ATOMIC_RELAXED);
		(void)__atomic_compare_exchange_n(n->rec, &r, 0, 0, __ATOMIC_SEQ_CST,
						  __ATOMIC_RELAXED);
	}
	list_unlock();
}
