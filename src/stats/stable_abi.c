/* SPDX-License-Identifier: MIT */
/*
 * stable_abi.c: the stable tier of the statistics layer -- the inline
 * operations of pcpu/gauge.h, pcpu/fraction.h, pcpu/histogram.h and
 * pcpu/group.h also
 * exported as functions with the same semantics, for programs that define
 * PCPU_NO_INLINE (src/core/counter_stable_abi.c explains the two tiers). Each
 * function is the inline operation itself, compiled here.
 */
#define PCPU_NO_INLINE 1
#include <pcpu/gauge.h>
#include <pcpu/fraction.h>
#include <pcpu/group.h>
#include <pcpu/histogram.h>

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

void pcpu_histogram_record_owned(pcpu_worker_t w, const pcpu_histogram_t *h, int64_t v)
{
	pcpu__pcpu_histogram_record_owned_inline(w, h, v);
}

void pcpu_histogram_observe(const pcpu_histogram_t *h, double v)
{
	pcpu__pcpu_histogram_observe_inline(h, v);
}

void pcpu_counter_add_double(pcpu_counter_t c, double v)
{
	pcpu__pcpu_counter_add_double_inline(c, v);
}

void pcpu_gauge_add_double(pcpu_gauge_t g, double v)
{
	pcpu__pcpu_gauge_add_double_inline(g, v);
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
