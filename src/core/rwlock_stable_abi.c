/* SPDX-License-Identifier: MIT */
/*
 * rwlock_stable_abi.c: the stable tier of pcpu/rwlock.h -- its inline read
 * side also exported as functions with the same semantics, for programs
 * that define PCPU_NO_INLINE (src/core/counter_stable_abi.c explains the two
 * tiers). Each function is the inline operation itself, compiled here.
 */
#define PCPU_NO_INLINE 1
#include <pcpu/rwlock.h>

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
