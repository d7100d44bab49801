/* SPDX-License-Identifier: MIT */
/*
 * flows_internal.h: what the two files of counters for millions of flows
 * (pcpu/flows.h) share -- flows.c (the add's slow path, drains, flush,
 * reads; its top comment is the design) and flows_life.c (creation,
 * destruction, fork, words a published segment shares). Private to them.
 */
#ifndef PCPU_CORE_FLOWS_INTERNAL_H
#define PCPU_CORE_FLOWS_INTERNAL_H

#include <pcpu/flows.h>

#include "core.h"
#include "rseq_internal.h"
#include "slot_walk.h"
#include "zone_internal.h"

#include <pthread.h>
#include <stdint.h>

#define GATE_OPEN 0
#define GATE_OWNER 1
#define GATE_FLUSH 2

/* Pointer-size words per entry. */
#if UINTPTR_MAX > 0xffffffffu
#define WORDS 1
#else
#define WORDS 2
#endif

struct flows_impl {
	struct pcpu_flows pub; /* the handle: first, alone on its line */
	/* What changes, on other lines. */
	int hold __attribute__((aligned(64))); /* nonzero: drains held off */
	pthread_mutex_t op_lock;               /* flush, bulk and held reads, fork */
	size_t nkeys;
	size_t words_len;                      /* the shared words' mapping */
	int64_t cap;                           /* pointer words per slot's buffer */
	struct flows_impl *next, *prev;        /* every object (fork) */
	/* Words in a caller's MAP_SHARED mapping (a published segment's
	 * file, pcpu__flows_create_shared()): the fork child copies them to
	 * private memory; `release` is told at destruction (under all_lock:
	 * pcpu__flows_detach() clears it). */
	int shared_words;
	void (*release)(void *ctx);
	void *release_ctx;
};

static inline struct flows_impl *impl_of(pcpu_flows_t *f)
{
	return (struct flows_impl *)(void *)f;
}

static inline struct pcpu_rseq_stack *stack_of(const struct flows_impl *o, uint32_t slot)
{
	return (struct pcpu_rseq_stack *)pcpu__slot_ptr_inline(o->pub.pcpu__buf, slot);
}

/* The walk's i-th slot (i below the count read once). */
static inline uint32_t walk_slot(uint32_t i)
{
	return pcpu_walk_all ? i : pcpu_walk_slots[i];
}

static inline uint32_t walk_count(void)
{
	return __atomic_load_n(&pcpu_walk_count, __ATOMIC_ACQUIRE);
}

/* Under op_lock (so no flush runs): no drain runs once this returns, and
 * none starts until pcpu__flows_release_drains() (flows.c). */
PCPU_HIDDEN void pcpu__flows_hold_drains(struct flows_impl *o);
PCPU_HIDDEN void pcpu__flows_release_drains(struct flows_impl *o);

#endif /* PCPU_CORE_FLOWS_INTERNAL_H */
