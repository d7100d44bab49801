/* SPDX-License-Identifier: MIT */
/*
 * counter_stable_abi.c: the stable tier of the counters and the zone --
 * every inline operation of pcpu/counter.h and pcpu/zone.h also exported
 * (and pcpu/worker.h's) also exported
 * as a function with the same semantics (userspace-rcu's two tiers).
 * Programs that define PCPU_NO_INLINE get these declarations instead of
 * the inline definitions: a call more per update, and nothing of
 * the hot path's layout compiled into them (no pcpu__ symbol, no
 * PCPU_LAYOUT_<n> version node needed), for other languages' bindings and
 * for programs that must run with any later library. Each function is the
 * inline operation itself, compiled here. The other layers have their own:
 * src/core/ref_stable_abi.c, src/core/rwlock_stable_abi.c, src/core/objcache_stable_abi.c
 * and src/stats/stable_abi.c (gauges, histograms, groups).
 */
#define PCPU_NO_INLINE 1
#include <pcpu/counter.h>
#include <pcpu/zone.h>

#ifdef PCPU_DEBUG_LIBRARY
#define CHECK(c, f) pcpu__debug_check((c), (f))
#else
#define CHECK(c, f) ((void)0)
#endif

void pcpu_counter_add(pcpu_counter_t c, int64_t v)
{
	CHECK(c, __func__);
	pcpu__counter_add_inline(c, v);
}

void pcpu_counter_inc(pcpu_counter_t c)
{
	CHECK(c, __func__);
	pcpu__counter_add_inline(c, 1);
}

void pcpu_counter_add_many(const pcpu_counter_t *cs, const int64_t *vs, size_t n)
{
	pcpu__pcpu_counter_add_many_inline(cs, vs, n);
}

void pcpu_counter_add_atomic(pcpu_counter_t c, int64_t v)
{
	CHECK(c, __func__);
	pcpu__counter_add_atomic_inline(c, v);
}

pcpu_counter_t pcpu_counter_at(pcpu_counter_t array, size_t i)
{
	return pcpu__pcpu_counter_at_inline(array, i);
}

void pcpu_counter_add_owned(pcpu_worker_t w, pcpu_counter_t c, int64_t v)
{
	CHECK(c, __func__);
	pcpu__pcpu_counter_add_owned_inline(w, c, v);
}

void pcpu_counter_add_many_owned(pcpu_worker_t w, const pcpu_counter_t *cs, const int64_t *vs,
				 size_t n)
{
	pcpu__pcpu_counter_add_many_owned_inline(w, cs, vs, n);
}

void pcpu_owned_array_add(pcpu_owned_array_t a, size_t i, int64_t v)
{
	pcpu__pcpu_owned_array_add_inline(a, i, v);
}

pcpu_worker_t pcpu_worker_self(void)
{
	return pcpu__worker_self_inline();
}

void *pcpu_slot_ptr(const void *obj, unsigned slot)
{
	return pcpu__slot_ptr_inline(obj, slot);
}
