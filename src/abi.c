/* SPDX-License-Identifier: MIT */
/*
 * abi.c: the stable tier -- every inline update operation of the headers
 * also exported as a function with the same semantics (userspace-rcu's two
 * tiers). Programs that define PCPU_NO_INLINE get these declarations
 * instead of the inline definitions: a call more per update, and nothing of
 * the hot path's layout compiled into them (no pcpu__ symbol, no
 * PCPU_LAYOUT_<n> version node needed), for other languages' bindings and
 * for programs that must run with any later library. Each function is the
 * inline operation itself, compiled here.
 */
#define PCPU_NO_INLINE 1
#include <pcpu/counter.h>
#include <pcpu/gauge.h>
#include <pcpu/group.h>
#include <pcpu/histogram.h>

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

void *pcpu_slot_ptr(const void *obj, unsigned slot)
{
	return pcpu__slot_ptr_inline(obj, slot);
}

void pcpu_gauge_add(pcpu_gauge_t g, int64_t v)
{
	pcpu__pcpu_gauge_add_inline(g, v);
}

void pcpu_gauge_sub(pcpu_gauge_t g, int64_t v)
{
	pcpu__pcpu_gauge_sub_inline(g, v);
}

void pcpu_gauge_inc(pcpu_gauge_t g)
{
	pcpu__pcpu_gauge_inc_inline(g);
}

void pcpu_gauge_dec(pcpu_gauge_t g)
{
	pcpu__pcpu_gauge_dec_inline(g);
}

size_t pcpu_histogram_bucket_of(const pcpu_histogram_t *h, int64_t v)
{
	return pcpu__pcpu_histogram_bucket_of_inline(h, v);
}

void pcpu_histogram_record(const pcpu_histogram_t *h, int64_t v)
{
	pcpu__pcpu_histogram_record_inline(h, v);
}

void pcpu_histogram_record_n(const pcpu_histogram_t *h, int64_t v, uint64_t n)
{
	pcpu__pcpu_histogram_record_n_inline(h, v, n);
}

size_t pcpu_histogram_nbuckets(const pcpu_histogram_t *h)
{
	return pcpu__pcpu_histogram_nbuckets_inline(h);
}

void pcpu_group_add(const pcpu_group_t *g, size_t i, const int64_t *d)
{
	pcpu__pcpu_group_add_inline(g, i, d);
}

void pcpu_group_add2(const pcpu_group_t *g, size_t i, int64_t d0, int64_t d1)
{
	pcpu__pcpu_group_add2_inline(g, i, d0, d1);
}

unsigned pcpu_group_members(const pcpu_group_t *g)
{
	return pcpu__pcpu_group_members_inline(g);
}

size_t pcpu_group_count(const pcpu_group_t *g)
{
	return pcpu__pcpu_group_count_inline(g);
}
