/* SPDX-License-Identifier: MIT */
/*
 * objcache_stable_abi.c: the stable tier of pcpu/objcache.h -- get and put
 * also exported as functions with the same semantics, for programs that
 * define PCPU_NO_INLINE (src/core/counter_stable_abi.c explains the two tiers). Each function is the
 * inline operation itself, compiled here.
 */
#define PCPU_NO_INLINE 1
#include <pcpu/objcache.h>

void *pcpu_objcache_get(pcpu_objcache_t *c)
{
	return pcpu__pcpu_objcache_get_inline(c);
}

void pcpu_objcache_put(pcpu_objcache_t *c, void *obj)
{
	pcpu__pcpu_objcache_put_inline(c, obj);
}
