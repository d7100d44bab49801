/* SPDX-License-Identifier: MIT */
/*
 * flows_stable_abi.c: the stable tier of pcpu/flows.h -- the add also
 * exported as a function with the same semantics, for programs that define
 * PCPU_NO_INLINE (src/core/counter_stable_abi.c explains the two tiers). It
 * is the inline operation itself, compiled here.
 */
#define PCPU_NO_INLINE 1
#include <pcpu/flows.h>

int pcpu_flows_add(pcpu_flows_t *f, size_t flow, unsigned counter, uint64_t value)
{
	return pcpu__flows_add_inline(f, flow, counter, value);
}
