/* SPDX-License-Identifier: MIT */
/*
 * hcounter_stable_abi.c: the stable tier of pcpu/hcounter.h -- its inline
 * operations also exported as functions with the same semantics, for
 * programs that define PCPU_NO_INLINE (src/core/counter_stable_abi.c explains
 * the two tiers). Each function is the inline operation itself, compiled
 * here.
 */
#define PCPU_NO_INLINE 1
#include <pcpu/hcounter.h>

void pcpu_hcounter_add(pcpu_hcounter_t *h, int64_t v)
{
	pcpu__hcounter_add_inline(h, v);
}

bool pcpu_hcounter_limited_add(pcpu_hcounter_t *h, int64_t v, int64_t limit)
{
	return pcpu__hcounter_limited_add_inline(h, v, limit);
}

struct pcpu_hcounter_approx pcpu_hcounter_approx(const pcpu_hcounter_t *h)
{
	return pcpu__hcounter_approx_inline(h);
}
