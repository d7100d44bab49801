/* SPDX-License-Identifier: MIT */
/**
 * @file sys/smp.h (pcpu's counter(9) overlay)
 * The part of FreeBSD's <sys/smp.h> that per-CPU counter code uses: walking
 * every CPU's copy of a counter, as sys/netinet/ip_id.c seeds its per-CPU
 * IP id counter,
 *
 *     CPU_FOREACH(i)
 *             arc4rand(zpcpu_get_cpu(V_ip_id, i), sizeof(uint64_t), 0);
 *
 * On the include path with pcpu's <sys/counter.h> (pkg-config's
 * `pcpu-counter9`, CMake's pcpu::counter9); zpcpu_get_cpu() comes from
 * there (pcpu/counter9.h).
 *
 * In pcpu a CPU id is a slot (pcpu/zone.h): every zone has a slot per
 * possible CPU. A slot no thread can write -- a possible CPU that was not
 * present when pcpu started -- is absent, as FreeBSD's CPU_ABSENT() CPUs
 * are: fetches do not read it (pcpu_slot_walked(), pcpu/rseq.h), it has no
 * memory of its own (none in a published segment; read-only under strict
 * commit accounting, PCPU_COMMIT), so a walk that seeded it would seed a
 * word no fetch reads. The owned slots of pinned workers that follow the
 * CPU slots (pcpu/worker.h) are not CPUs: no walk here visits them, and a
 * fetch reads them only once claimed, so code that seeds "every CPU's"
 * word seeds what fetches read. (A walk that sums therefore misses owned
 * adds: counter(9) code has none; a program that mixes them sums with
 * counter_u64_fetch().) So:
 *  - mp_maxid (u_int, as in FreeBSD) is the CPU slots - 1, the highest id;
 *  - mp_ncpus (int) is the CPUs that are not absent (FreeBSD counts the
 *    CPUs present), the ids CPU_FOREACH() visits;
 *  - CPU_ABSENT(id) is true for an id above mp_maxid or not walked;
 *  - CPU_FOREACH(i) sets i to 0, 1, ... mp_maxid, skipping absent ids,
 *    in order, as FreeBSD's does;
 *  - CPU_FIRST() is 0 (slot 0 is never absent); CPU_NEXT(i) is the next id
 *    that is not absent, or 0 after the last.
 * mp_maxid and mp_ncpus are expressions, not variables (pcpu exports only
 * pcpu_-prefixed symbols): reading them costs two calls, and
 * `&mp_ncpus` does not compile.
 *
 * Each name is defined only if the including code has not defined it
 * already: a kernel shim's own `#define mp_maxid 0` stays in force.
 *
 * CPU_FOREACH(i) compares i with mp_maxid converted to i's type, so an
 * `int i`, as FreeBSD code declares it, compiles without a signed/unsigned
 * comparison warning (FreeBSD compares it with the u_int directly); for
 * the ids a loop can reach, the two compare the same.
 */
#ifndef PCPU_COMPAT_SYS_SMP_H
#define PCPU_COMPAT_SYS_SMP_H

#include <pcpu/common.h>
#include <pcpu/rseq.h> /* pcpu_slot_walked() */
#include <pcpu/worker.h> /* pcpu_worker_max() */

#ifndef mp_maxid
#define mp_maxid (pcpu_nslots() - pcpu_worker_max() - 1u)
#endif

#ifndef mp_ncpus
static inline int pcpu__cpu_count(void)
{
	unsigned pcpu__n = pcpu_nslots() - pcpu_worker_max(), pcpu__c = 0;

	for (unsigned pcpu__s = 0; pcpu__s < pcpu__n; pcpu__s++)
		pcpu__c += pcpu_slot_walked(pcpu__s) != 0;
	return (int)pcpu__c;
}
#define mp_ncpus pcpu__cpu_count()
#endif

/* Functions rather than expressions in the macros: with a constant id, or
 * a shim's constant mp_maxid, the comparison would be a constant one
 * (-Wtype-limits). */
#ifndef CPU_ABSENT
static inline int pcpu__cpu_absent(unsigned pcpu__id)
{
	return pcpu__id > mp_maxid || !pcpu_slot_walked(pcpu__id);
}
#define CPU_ABSENT(x_cpu) pcpu__cpu_absent((unsigned)(x_cpu))
#endif

#ifndef CPU_FOREACH
#define CPU_FOREACH(i)                                                        \
	for ((i) = 0; (i) <= (__typeof__(i))mp_maxid; (i)++)                  \
		if (!CPU_ABSENT((i)))
#endif

#ifndef CPU_FIRST
#define CPU_FIRST() 0
#endif

#ifndef CPU_NEXT
static inline int pcpu__cpu_next(int pcpu__i)
{
	unsigned pcpu__next = (unsigned)pcpu__i + 1u;

	while (pcpu__next <= mp_maxid && CPU_ABSENT(pcpu__next))
		pcpu__next++;
	return pcpu__next > mp_maxid ? 0 : (int)pcpu__next;
}
#define CPU_NEXT(i) pcpu__cpu_next((i))
#endif

#endif /* PCPU_COMPAT_SYS_SMP_H */
