/* SPDX-License-Identifier: MIT */
/*
 * Owned slots (pcpu/worker.h): who holds which, and the thread-local claim
 * the `_owned` updates read.
 *
 * The slots are [pcpu_cpu_slot_count, + pcpu_owned_slot_count): numbered
 * after the CPU slots (pcpu_init() sizes both), so
 * no rseq index, fallback add or reset ever writes one: the table below is
 * the only thing that decides who may. It is process-private, and so are
 * the claims: a process of a shared-registry tree may not claim (the
 * memory there is the whole tree's), and a tree is not made while a claim
 * is held (pcpu__worker_block_claims(), from zone_tree.c).
 *
 * Why a thread-local offset and not a slot number: the update adds it to
 * the counter's address as it is, the Per Core pattern's `base + lcore *
 * size` with the multiplication done once at the claim.
 */
#include <pcpu/worker.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "rseq_internal.h"
#include "slot_walk.h"
#include "worker_internal.h"

PCPU_API __thread uintptr_t pcpu__worker_off __attribute__((tls_model("initial-exec")));

static pthread_mutex_t claims_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t owner[PCPU_OWNED_MAX];
static uint8_t held[PCPU_OWNED_MAX];
/* wanted: reserving backings reserve the slot's region (set before the
 * hook runs, so that allocations meanwhile reserve it too; never cleared).
 * ready: a claim of the slot succeeded once, so the hook reserved it under
 * every object there was and the slot is in the fetches' walk (never
 * undone; a claim that failed after the hook runs the hook again). */
static uint8_t wanted[PCPU_OWNED_MAX], ready[PCPU_OWNED_MAX];
static int (*reserve_hook)(uint32_t slot);
static uint32_t nheld;
static int claims_blocked;             /* a shared-registry tree exists */
static int fork_once;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static int exit_key_err;

/* The slot index of the calling thread's claim, -1 for none. */
static int64_t held_index(void)
{
	uintptr_t off = pcpu__worker_off;

	if (!off)
		return -1;
	return (int64_t)(off >> PCPU_SLOT_STRIDE_SHIFT) - pcpu_cpu_slot_count;
}

static void release_locked(int64_t k)
{
	held[k] = 0;
	nheld--;
}

/* Thread exit: the claim goes back; its words keep their values. */
static void on_thread_exit(void *unused)
{
	int64_t k = held_index();

	(void)unused;
	if (k < 0)
		return;
	pthread_mutex_lock(&claims_lock);
	release_locked(k);
	pthread_mutex_unlock(&claims_lock);
	pcpu__worker_off = 0;
}

static void make_exit_key(void)
{
	exit_key_err = pthread_key_create(&exit_key, on_thread_exit);
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&claims_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&claims_lock);
}

/* The child has one thread: every claim but its own is released (their
 * holders do not exist here), with the values those slots hold. */
static void fork_child(void)
{
	int64_t mine = held_index();

	for (uint32_t k = 0; k < pcpu_owned_slot_count; k++)
		if (held[k] && (int64_t)k != mine)
			release_locked(k);
	/* Unlocked, as the parent does: the child's thread is the one that
	 * took it in prepare. (Initialised again instead, ThreadSanitizer saw
	 * the child's next claim lock a mutex its thread still held.) */
	pthread_mutex_unlock(&claims_lock);
}

int pcpu_worker_claim(pcpu_worker_t *w)
{
	uint32_t k;
	int err = 0;

	if (w)
		w->pcpu__off = 0;
	pcpu_init();
	if (pcpu__worker_off) {
		if (w)
			w->pcpu__off = pcpu__worker_off;
		return 0;
	}
	if (pcpu_owned_env_invalid) {
		errno = EINVAL; /* PCPU_OWNED_SLOTS refused: no owned slots (rseq.c) */
		return -1;
	}
	if (pcpu__fork_register(&fork_once, PCPU_FORK_COUNTER, fork_prepare, fork_parent,
			       fork_child) != 0)
		return -1;
	pthread_once(&exit_key_once, make_exit_key);
	if (exit_key_err) {
		errno = ENOMEM;
		return -1;
	}
	pthread_mutex_lock(&claims_lock);
	if (claims_blocked) {
		err = ENOTSUP;
		goto out;
	}
	for (k = 0; k < pcpu_owned_slot_count && held[k]; k++)
		;
	if (k == pcpu_owned_slot_count) {
		err = EBUSY;
		goto out;
	}
	/* Published segments' files hold the slot's words: their pages must
	 * be allocated before the first owned add can fault on them. */
	__atomic_store_n(&wanted[k], 1, __ATOMIC_RELEASE);
	if (!ready[k] && reserve_hook && reserve_hook(pcpu_cpu_slot_count + k) != 0) {
		err = errno;
		goto out;
	}
	/* Any non-NULL value makes the destructor run at exit. */
	if (pthread_setspecific(exit_key, &owner[k]) != 0) {
		err = ENOMEM;
		goto out;
	}
	held[k] = 1;
	nheld++;
	owner[k] = pthread_self();
	if (!ready[k]) {
		/* Before the first write: fetches must visit the slot. */
		pcpu_slot_walk_add(pcpu_cpu_slot_count + k);
		ready[k] = 1;
	}
	pcpu__worker_off = (uintptr_t)(pcpu_cpu_slot_count + k) << PCPU_SLOT_STRIDE_SHIFT;
	if (w)
		w->pcpu__off = pcpu__worker_off;
out:
	pthread_mutex_unlock(&claims_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

int pcpu_worker_release(void)
{
	int64_t k = held_index();

	if (k < 0) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&claims_lock);
	release_locked(k);
	pthread_mutex_unlock(&claims_lock);
	pcpu__worker_off = 0;
	pthread_setspecific(exit_key, NULL);
	return 0;
}

unsigned pcpu_worker_max(void)
{
	pcpu_init();
	return pcpu_owned_slot_count;
}

int pcpu_worker_slot(pcpu_worker_t w)
{
	return w.pcpu__off ? (int)(w.pcpu__off >> PCPU_SLOT_STRIDE_SHIFT) : -1;
}

void pcpu__worker_debug_check(pcpu_worker_t w, const char *func)
{
	if (w.pcpu__off == 0 || w.pcpu__off == pcpu__worker_off)
		return;
	fprintf(stderr, "pcpu: %s: the owned-slot claim %d is not the calling thread's "
		"(released, or another thread's); the thread holds %d\n",
		func, pcpu_worker_slot(w), pcpu_worker_slot(pcpu__worker_self_inline()));
	abort();
}

int pcpu__worker_block_claims(void)
{
	int rc = 0;

	pthread_mutex_lock(&claims_lock);
	if (nheld) {
		errno = EBUSY;
		rc = -1;
	} else {
		claims_blocked = 1;
	}
	pthread_mutex_unlock(&claims_lock);
	return rc;
}

int pcpu__slot_needs_memory(uint32_t slot)
{
	uint32_t k;

	if (slot < pcpu_cpu_slot_count)
		return pcpu_slot_walk_has_cpu(slot);
	k = slot - pcpu_cpu_slot_count;
	return k < pcpu_owned_slot_count && __atomic_load_n(&wanted[k], __ATOMIC_ACQUIRE);
}

uint32_t pcpu__cpu_slots_walked(const uint16_t **list)
{
	*list = pcpu_walk_all ? NULL : pcpu_walk_slots;
	return pcpu_walk_cpu_count;
}

void pcpu__worker_set_reserve_hook(int (*hook)(uint32_t slot))
{
	pthread_mutex_lock(&claims_lock);
	reserve_hook = hook;
	pthread_mutex_unlock(&claims_lock);
}

uint32_t pcpu__worker_claims_held(void)
{
	uint32_t n;

	pthread_mutex_lock(&claims_lock);
	n = nheld;
	pthread_mutex_unlock(&claims_lock);
	return n;
}
