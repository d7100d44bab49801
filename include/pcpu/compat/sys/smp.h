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
 * possible CPU, and none is ever absent (a slot no thread wrote reads
 * zero). The owned slots of pinned workers that follow them (pcpu/worker.h)
 * are not CPUs: no walk here visits them, and a fetch reads them only once
 * claimed, so code that seeds "every CPU's" word seeds what fetches read.
 * (A walk that sums therefore misses owned adds: counter(9) code has none;
 * a program that mixes them sums with counter_u64_fetch().) So:
 *  - mp_maxid (u_int, as in FreeBSD) is the CPU slots - 1, the highest id;
 *  - mp_ncpus (int) is the CPU slots (pcpu_nslots() - pcpu_worker_max()):
 *    the ids CPU_FOREACH() visits, which
 *    may be more than the CPUs online (FreeBSD counts the CPUs present);
 *  - CPU_ABSENT(id) is true only for an id above mp_maxid;
 *  - CPU_FOREACH(i) sets i to 0, 1, ... mp_maxid: every slot, in order;
 *  - CPU_FIRST() is 0; CPU_NEXT(i) is i + 1, or 0 after mp_maxid.
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
#include <pcpu/worker.h> /* pcpu_worker_max() */

#ifndef mp_maxid
#define mp_maxid (pcpu_nslots() - pcpu_worker_max() - 1u)
#endif

#ifndef mp_ncpus
#define mp_ncpus ((int)(pcpu_nslots() - pcpu_worker_max()))
#endif

/* Functions rather than expressions in the macros: with a constant id, or
 * a shim's constant mp_maxid, the comparison would be a constant one
 * (-Wtype-limits). */
#ifndef CPU_ABSENT
static inline int pcpu__cpu_absent(unsigned pcpu__id)
{
	return pcpu__id > mp_maxid;
}
#define CPU_ABSENT(x_cpu) pcpu__cpu_absent((unsigned)(x_cpu))
#endif

#ifndef CPU_FOREACH
#define CPU_FOREACH(i) for ((i) = 0; (i) <= (__typeof__(i))mp_maxid; (i)++)
#endif

#ifndef CPU_FIRST
#define CPU_FIRST() 0
#endif

#ifndef CPU_NEXT
static inline int pcpu__cpu_next(int pcpu__i)
{
	unsigned pcpu__next = (unsigned)pcpu__i + 1u;

	return pcpu__next > mp_maxid ? 0 : (int)pcpu__next;
}
#define CPU_NEXT(i) pcpu__cpu_next((i))
#endif

#endif /* PCPU_COMPAT_SYS_SMP_H */
