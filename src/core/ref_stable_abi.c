/* SPDX-License-Identifier: MIT */
/*
 * ref_stable_abi.c: the stable tier of pcpu/ref.h -- its inline operations
 * also exported as functions with the same semantics, for programs that
 * define PCPU_NO_INLINE (src/core/counter_stable_abi.c explains the two tiers). Each
 * function is the inline operation itself, compiled here.
 */
#define PCPU_NO_INLINE 1
#include <pcpu/ref.h>

void pcpu_ref_get(pcpu_ref_t *ref)
{
	pcpu__pcpu_ref_get_inline(ref);
}

int pcpu_ref_tryget(pcpu_ref_t *ref)
{
	return pcpu__pcpu_ref_tryget_inline(ref);
}

void pcpu_ref_put(pcpu_ref_t *ref)
{
	pcpu__pcpu_ref_put_inline(ref);
}
