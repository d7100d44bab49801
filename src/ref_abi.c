/* SPDX-License-Identifier: MIT */
/*
 * ref_abi.c: the stable tier of pcpu/ref.h -- its inline operations also
 * exported as functions with the same semantics, for programs that define
 * PCPU_NO_INLINE (see src/abi.c, which does the same for counters). Each
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

void pcpu_rwlock_rdlock(pcpu_rwlock_t *lock)
{
	pcpu__pcpu_rwlock_rdlock_inline(lock);
}

int pcpu_rwlock_tryrdlock(pcpu_rwlock_t *lock)
{
	return pcpu__pcpu_rwlock_tryrdlock_inline(lock);
}

void pcpu_rwlock_rdunlock(pcpu_rwlock_t *lock)
{
	pcpu__pcpu_rwlock_rdunlock_inline(lock);
}
