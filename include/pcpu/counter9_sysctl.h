/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/counter9_sysctl.h
 * FreeBSD's SYSCTL_COUNTER_U64 for user space: counter(9) counters and
 * arrays of them (a `struct ipstat` of counters) bound to names in a pcpu
 * statistics registry, so they are exposed (Prometheus, OpenMetrics, JSON),
 * snapshotted and published in a shared segment like any metric.
 *
 * Part of the statistics layer (it builds on pcpu/stats.h and
 * pcpu/counter9.h). Two ways in:
 *
 *  - pcpu_counter9_bind(reg, name, help, ctrs, n, fields): binds n counters
 *    now, as family `name` (with a label `field` when n > 1 or fields are
 *    given).
 *  - SYSCTL_COUNTER_U64(parent, nbr, name, access, ptr, descr) and
 *    SYSCTL_COUNTER_U64_ARRAY(parent, nbr, name, access, ptr, len, descr)
 *    at file scope, as FreeBSD code writes them, record the binding (a
 *    constructor); pcpu_counter9_sysctl_attach(reg) later binds every
 *    recorded one, named `<parent>_<name>` with the parent's leading
 *    underscore dropped: SYSCTL_COUNTER_U64(_net_inet_ip, OID_AUTO,
 *    forwarded, ...) becomes `net_inet_ip_forwarded`. nbr and access are
 *    not evaluated (no CTLFLAG_* or OID_AUTO needs to exist); array
 *    elements get `field` labels "0", "1", ...
 *
 * What binding does: a registry's series live in the registry's own zone
 * (so that a published segment holds them), so binding MOVES each counter:
 * it allocates the series' counter, transfers the old counter's value
 * (fetch-and-zero, then add), stores the new counter_u64_t into the
 * caller's variable or array element, and frees the old counter. A NULL
 * (early, not yet allocated) element simply gets the new counter.
 * Precondition: no other thread updates or reads those counters during the
 * call -- bind at initialisation, as sysctl nodes are registered at SYSINIT
 * time. Afterwards the counters are used exactly as before.
 */
#ifndef PCPU_COUNTER9_SYSCTL_H
#define PCPU_COUNTER9_SYSCTL_H

#include <pcpu/counter9.h>
#include <pcpu/stats.h>

PCPU_BEGIN_DECLS

/**
 * Binds ctrs[0..n-1] to family `name` of `reg` (see the file comment for
 * what moves; the parameters are named pcpu__ctrs, pcpu__n... for the
 * reason pcpu/counter9.h gives). Labels: none when n == 1 and fields is
 * NULL; else one label `field` whose values are fields[i] (or the decimal
 * index when fields is NULL). Returns 0, or -1 with errno: EINVAL (NULL
 * reg/name/ctrs, n == 0, an invalid name or label value:
 * pcpu_stats_error() says which), EEXIST (the family exists with another
 * shape, or a series exists already), ENOMEM. On failure nothing is moved. Thread-safe with other
 * registry calls; not with other users of ctrs (see the precondition).
 * Not async-signal-safe. Cost: a registry registration per counter.
 */
PCPU_API int pcpu_counter9_bind(pcpu_registry_t *pcpu__reg, const char *pcpu__name,
				const char *pcpu__help, uint64_t **pcpu__ctrs, size_t pcpu__n,
				const char *const *pcpu__fields);

/** A binding recorded by SYSCTL_COUNTER_U64(_ARRAY) (fields private). */
struct pcpu_counter9_sysctl {
	const char *pcpu__parent;
	const char *pcpu__name;
	uint64_t **pcpu__ctrs;
	size_t pcpu__n;
	const char *pcpu__descr;
	struct pcpu_counter9_sysctl *pcpu__next;
};

/** Records a binding for pcpu_counter9_sysctl_attach() (the SYSCTL_*
 * macros call it from a constructor). Thread-safe. Cost: a lock and a list
 * insertion. */
PCPU_API void pcpu_counter9_sysctl_add(struct pcpu_counter9_sysctl *pcpu__s);

/**
 * Binds every recorded binding not yet attached to `reg` (each one is
 * attached at most once; record order). Returns the number attached, or -1
 * with errno as pcpu_counter9_bind() for the first that failed (those
 * before it stay attached; it and the rest can be attached by a later
 * call). Same precondition and thread safety as pcpu_counter9_bind().
 */
PCPU_API int pcpu_counter9_sysctl_attach(pcpu_registry_t *pcpu__reg);

#define PCPU__COUNTER9_SYSCTL(parent, name, ptr, len, descr)                  \
	static struct pcpu_counter9_sysctl pcpu__sysctl_##parent##_##name = {     \
		#parent, #name, (uint64_t **)(ptr), (len), (descr), 0};          \
	__attribute__((constructor)) static void                                 \
	pcpu__sysctl_ctor_##parent##_##name(void)                                \
	{                                                                        \
		pcpu_counter9_sysctl_add(&pcpu__sysctl_##parent##_##name);       \
	}                                                                        \
	struct pcpu__sysctl_end_##parent##_##name

#ifndef PCPU_COUNTER9_NO_COMPAT_NAMES
#define SYSCTL_COUNTER_U64(parent, nbr, name, access, ptr, descr)             \
	PCPU__COUNTER9_SYSCTL(parent, name, ptr, 1, descr)
#define SYSCTL_COUNTER_U64_ARRAY(parent, nbr, name, access, ptr, len, descr)  \
	PCPU__COUNTER9_SYSCTL(parent, name, ptr, len, descr)
#endif

PCPU_END_DECLS

#endif /* PCPU_COUNTER9_SYSCTL_H */
