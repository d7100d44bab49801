/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/counter9.h
 * FreeBSD counter(9) for user space: code written against <sys/counter.h>
 * compiles and runs unchanged (ported network stacks, statistics structs).
 * `#include <sys/counter.h>` works with the compile flags of pkg-config's
 * `pcpu-counter9` (or CMake's pcpu::counter9), which add pcpu's compat
 * directory (include/pcpu/compat) to the include path.
 *
 * Mapping: counter_u64_t is `uint64_t *`, as in FreeBSD: the address of
 * slot 0's 8-byte word of a pcpu counter (pcpu/counter.h), so `*zpcpu_get(c)`
 * and `*zpcpu_get_cpu(c, cpu)` read a slot's word and sysctl-style
 * `CTASSERT(sizeof(uint64_t) == sizeof(**(ptr)))` holds. Every operation is
 * the pcpu one with counter(9)'s name, so pcpu's guarantees hold (lossless
 * adds without atomics on the fast path; a fetch is not a point-in-time
 * snapshot; 64-bit wraparound is not protected against).
 *
 *  - counter_u64_alloc(M_WAITOK) never returns NULL: like malloc(9) with
 *    M_WAITOK it waits (retries, sleeping, never aborts) until memory is
 *    available. M_NOWAIT may return NULL (errno ENOMEM). M_ZERO is accepted;
 *    counters are always zero when allocated.
 *  - Early counters: COUNTER_U64_DEFINE_EARLY(c) defines c = EARLY_COUNTER
 *    (NULL) and a constructor that allocates it before main(). An add to an
 *    early counter before that (another constructor that ran first), or
 *    after counter_u64_sysuninit(), does not crash: it is counted in one
 *    process-wide total, pcpu_counter9_early_adds(), not in the counter
 *    (FreeBSD sends such adds to a dummy per-CPU word). This costs
 *    counter_u64_add() one compare with NULL; pcpu_counter_add() has none.
 *  - counter_enter()/counter_exit() bracket counter_u64_add_protected() in
 *    the kernel to save critical_enter() pairs on some architectures. In user
 *    space each add is already its own restartable sequence, so they are
 *    no-ops kept for source compatibility.
 *  - counter_ratecheck() and the counter_rate_* functions count in
 *    milliseconds of CLOCK_MONOTONIC: hz = 1000 (pcpu_counter9_ticks()).
 *    Deviations, so that the limit holds in every period
 *    (tests/test_counter9_port.c): a thread preempted between reading the
 *    time and testing it cannot reopen a period another thread already
 *    opened (a signed difference; FreeBSD's unsigned one lets such threads
 *    through), and events that arrive while another thread resets the
 *    period are refused (-1) rather than admitted uncounted.
 *  - COUNTER_ARRAY_FETCH_AND_ZERO(): the sysctl handler's copy-then-zero
 *    without its window: each element's value is reported exactly once.
 *  - Binding counters to names (FreeBSD's SYSCTL_COUNTER_U64): see
 *    pcpu/counter9_sysctl.h, part of the statistics layer.
 *
 *  - Walking every CPU's copy (FreeBSD's CPU_FOREACH(), mp_maxid, mp_ncpus):
 *    <sys/smp.h> of the same compat directory; a "CPU" is a slot.
 *
 * Only pcpu_-prefixed symbols are exported: every unprefixed name here is a
 * macro, a type or a static inline function. Define
 * PCPU_COUNTER9_NO_COMPAT_NAMES to get none of the unprefixed names (then use
 * the pcpu_counter9_ spellings).
 *
 * Every parameter and local variable in these headers is named pcpu__*:
 * ported code and its kernel shims #define short kernel names (ticks, hz,
 * curcpu, curthread, mp_ncpus...) before including this header, and such a
 * macro would rewrite a declaration that used the name
 * (tests/test_counter9_port_names.c).
 */
#ifndef PCPU_COUNTER9_H
#define PCPU_COUNTER9_H

#include <pcpu/counter.h>

PCPU_BEGIN_DECLS

/* malloc(9) wait flags, as counter_u64_alloc() takes them. */
#define PCPU_M_NOWAIT 0x0001
#define PCPU_M_WAITOK 0x0002
#define PCPU_M_ZERO 0x0100

/** The clock of the rate functions: ticks per second. */
#define PCPU_COUNTER9_HZ 1000

/**
 * Allocates a counter: with PCPU_M_WAITOK retries until it succeeds (never
 * NULL), else NULL with errno on failure. Thread-safe; not
 * async-signal-safe. Cost: pcpu_counter_alloc(), and sleeps while memory
 * is short with PCPU_M_WAITOK.
 */
PCPU_API pcpu_counter_t pcpu_counter9_alloc(int pcpu__flags);

/**
 * The kernel's `ticks`: milliseconds of CLOCK_MONOTONIC, wrapping like an
 * int (differences stay right across the wrap); PCPU_COUNTER9_HZ per second.
 * Thread-safe; async-signal-safe. Cost: clock_gettime() (vDSO).
 */
PCPU_API int pcpu_counter9_ticks(void);

/**
 * Adds to the process-wide total of adds made to early counters that had no
 * storage yet (see the file comment). Thread-safe; async-signal-safe.
 * Cost: one atomic add on a shared word -- only for such adds.
 */
PCPU_API void pcpu_counter9_early_add(int64_t pcpu__v);

/** The total of pcpu_counter9_early_add(). Thread-safe; async-signal-safe.
 * Cost: one relaxed load. */
PCPU_API uint64_t pcpu_counter9_early_adds(void);

/**
 * Rate limiting over a period (counter(9)'s counter_ratecheck()), on the
 * fields of a rate state, which callers keep in their own struct:
 *   pcpu__rate    a live counter: events in the current period;
 *   pcpu__lock    serialises the reset at a period's end (0 when free);
 *   pcpu__ticks   start of the current period, in pcpu_counter9_ticks();
 *   pcpu__over    -1 once the limit was passed in the current period;
 *   pcpu__period  the period in seconds (0 means 1).
 * Counts one event and returns
 *   0   the limit is not reached in the current period,
 *   -1  the limit is reached (drop, log less, ...),
 *   >0  the limit was reached in the previous period, which just ended:
 *       the number of events counted in it.
 * The fields must start zeroed (ticks 0 is a period long ago). Thread-safe:
 * many threads may check one state at once; the reset at a period's end is
 * done by one of them (try-lock); the others get -1 during it, uncounted,
 * and so does a call that a reset overlaps after its add (counted: it may
 * be in either period); never more than `limit` events return 0 in one
 * period.
 * Not async-signal-safe (fetch_and_zero takes a mutex).
 * Cost: a counter add and a fetch (one load per slot).
 */
PCPU_API int64_t pcpu_counter9_ratecheck_fields(pcpu_counter_t pcpu__rate,
						volatile int *pcpu__lock, int *pcpu__ticks,
						int *pcpu__over, int pcpu__period,
						int64_t pcpu__limit);

/** counter(9)'s struct counter_rate, with public fields as older FreeBSD
 * code initialises them (zeroed, cr_rate a live counter; cr_period 0 is one
 * second). */
struct pcpu_counter9_rate {
	pcpu_counter_t cr_rate;  /* events in the current period */
	volatile int cr_lock;    /* serialises the reset at a period's end */
	int cr_ticks;            /* start of the current period, in ticks */
	int cr_over;             /* -1 once the limit was passed */
	int cr_period;           /* seconds; 0 means 1 */
};

/** pcpu_counter9_ratecheck_fields() on a struct pcpu_counter9_rate: the same
 * results, thread safety and cost. */
PCPU_API int64_t pcpu_counter9_ratecheck(struct pcpu_counter9_rate *pcpu__cr, int64_t pcpu__limit);

/**
 * Allocates a zeroed rate state with its counter (the current man page's
 * counter_rate_alloc(flags, period)): period in seconds, >= 1. NULL with
 * errno EINVAL (period < 1) or ENOMEM (M_NOWAIT only: M_WAITOK waits).
 * Thread-safe; not async-signal-safe. Cost: a malloc() and a counter
 * allocation (a mutex section in the default zone).
 */
PCPU_API struct pcpu_counter9_rate *pcpu_counter9_rate_alloc(int pcpu__flags, int pcpu__period);

/** Events counted in the current period of a rate state (counter_rate_get).
 * NULL: 0 with errno EINVAL. Thread-safe; async-signal-safe.
 * Cost: a counter fetch (one load per slot ever written). */
PCPU_API uint64_t pcpu_counter9_rate_get(struct pcpu_counter9_rate *pcpu__cr);

/** Frees a state from pcpu_counter9_rate_alloc(); NULL is a no-op. The
 * caller guarantees no thread still uses it (then thread-safe towards other
 * states). Not async-signal-safe. Cost: a counter free (a mutex section)
 * and a free(). */
PCPU_API void pcpu_counter9_rate_free(struct pcpu_counter9_rate *pcpu__cr);

/**
 * Copies n counters' values into dst[0..n-1] and subtracts them, each
 * element's value reported exactly once (pcpu_counter_fetch_and_zero() per
 * element), unlike copying then zeroing, which loses the adds in between.
 * NULL elements (early counters without storage) read 0. Returns 0, or -1
 * with errno EINVAL (a or dst NULL with n > 0). Thread-safe; not
 * async-signal-safe. Cost: a fetch_and_zero per element.
 */
PCPU_API int pcpu_counter9_array_fetch_and_zero(uint64_t *const *pcpu__a, uint64_t *pcpu__dst,
						 size_t pcpu__n);

#ifndef PCPU_COUNTER9_NO_COMPAT_NAMES

typedef uint64_t *counter_u64_t;

/* The rate state: a real struct name (no macro renaming the caller's
 * identifiers); the same fields as struct pcpu_counter9_rate. */
struct counter_rate {
	counter_u64_t cr_rate;
	volatile int cr_lock;
	int cr_ticks;
	int cr_over;
	int cr_period;
};

#ifndef M_NOWAIT
#define M_NOWAIT PCPU_M_NOWAIT
#endif
#ifndef M_WAITOK
#define M_WAITOK PCPU_M_WAITOK
#endif
#ifndef M_ZERO
#define M_ZERO PCPU_M_ZERO
#endif

/** counter_u64_t of an early counter without storage yet. */
#define EARLY_COUNTER ((counter_u64_t)0)

static inline pcpu_counter_t pcpu__counter9_handle(counter_u64_t pcpu__c)
{
	return (pcpu_counter_t)(void *)pcpu__c;
}

/*
 * The counter(9) names. Each is the pcpu function it calls, with that
 * function's contract (man counter(9) for the FreeBSD semantics):
 */

/** counter_u64_alloc(M_WAITOK | M_NOWAIT | M_ZERO): as pcpu_counter9_alloc(). */
static inline counter_u64_t counter_u64_alloc(int pcpu__wait)
{
	return (counter_u64_t)(void *)pcpu_counter9_alloc(pcpu__wait);
}

/** counter_u64_free(c): as pcpu_counter_free(); EARLY_COUNTER is a no-op. */
static inline void counter_u64_free(counter_u64_t pcpu__c)
{
	(void)pcpu_counter_free(pcpu__counter9_handle(pcpu__c));
}

/** counter_u64_add(c, v): as pcpu_counter_add(); on EARLY_COUNTER as
 * pcpu_counter9_early_add() (one atomic add). */
static inline void counter_u64_add(counter_u64_t pcpu__c, int64_t pcpu__inc)
{
	if (PCPU_UNLIKELY(pcpu__c == EARLY_COUNTER)) {
		pcpu_counter9_early_add(pcpu__inc);
		return;
	}
	pcpu_counter_add(pcpu__counter9_handle(pcpu__c), pcpu__inc);
}

/** counter_u64_fetch(c): as pcpu_counter_fetch(); 0 on EARLY_COUNTER. */
static inline uint64_t counter_u64_fetch(counter_u64_t pcpu__c)
{
	return pcpu__c == EARLY_COUNTER ? 0 : pcpu_counter_fetch(pcpu__counter9_handle(pcpu__c));
}

/** counter_u64_zero(c): as pcpu_counter_zero(); EARLY_COUNTER is a no-op. */
static inline void counter_u64_zero(counter_u64_t pcpu__c)
{
	if (pcpu__c != EARLY_COUNTER)
		pcpu_counter_zero(pcpu__counter9_handle(pcpu__c));
}

#define counter_enter() do { } while (0)
#define counter_exit() do { } while (0)
#define counter_u64_add_protected(c, inc) counter_u64_add((c), (inc))

/** counter_u64_sysinit(&c): allocates an early counter (M_WAITOK), as
 * pcpu_counter9_alloc(); not thread-safe for one `c` (a constructor runs
 * it once). */
static inline void counter_u64_sysinit(void *pcpu__arg)
{
	counter_u64_t *pcpu__c = (counter_u64_t *)pcpu__arg;

	if (*pcpu__c == EARLY_COUNTER)
		*pcpu__c = counter_u64_alloc(M_WAITOK);
}

/** counter_u64_sysuninit(&c): frees it; later adds count as early adds.
 * The caller guarantees no thread is adding to it meanwhile (a plugin's
 * fini, say): not thread-safe for one `c`. Cost: as pcpu_counter_free(). */
static inline void counter_u64_sysuninit(void *pcpu__arg)
{
	counter_u64_t *pcpu__c = (counter_u64_t *)pcpu__arg;
	counter_u64_t pcpu__old = *pcpu__c;

	*pcpu__c = EARLY_COUNTER;
	counter_u64_free(pcpu__old);
}

/**
 * COUNTER_U64_SYSINIT(c): allocates the early counter c before main() (a
 * constructor of the including program). Nothing frees it at exit: other
 * exit-time code may still add to it; call counter_u64_sysuninit(&c) where
 * FreeBSD would run the SYSUNINIT (a plugin's teardown).
 * COUNTER_U64_DEFINE_EARLY(c): defines c = EARLY_COUNTER and its SYSINIT.
 * Both may be preceded by `static` and end in a declaration, so the
 * caller's `;` completes them, in C and C++.
 */
#define COUNTER_U64_SYSINIT(c)                                                \
	__attribute__((constructor)) static void pcpu__counter9_sysinit_##c(void) \
	{                                                                     \
		counter_u64_sysinit(&(c));                                    \
	}                                                                     \
	struct pcpu__counter9_sysinit_##c##_end

#define COUNTER_U64_DEFINE_EARLY(c)                                           \
	counter_u64_t c = EARLY_COUNTER;                                      \
	COUNTER_U64_SYSINIT(c)

/** counter_ratecheck(cr, limit): as pcpu_counter9_ratecheck_fields() on the
 * fields of cr. */
static inline int64_t counter_ratecheck(struct counter_rate *pcpu__cr, int64_t pcpu__limit)
{
	return pcpu_counter9_ratecheck_fields(pcpu__counter9_handle(pcpu__cr->cr_rate),
					      &pcpu__cr->cr_lock, &pcpu__cr->cr_ticks,
					      &pcpu__cr->cr_over, pcpu__cr->cr_period, pcpu__limit);
}

/** counter_rate_alloc(flags, period): as pcpu_counter9_rate_alloc(). */
static inline struct counter_rate *counter_rate_alloc(int pcpu__flags, int pcpu__period)
{
	return (struct counter_rate *)(void *)pcpu_counter9_rate_alloc(pcpu__flags, pcpu__period);
}

/** counter_rate_get(cr): as pcpu_counter9_rate_get(). */
static inline uint64_t counter_rate_get(struct counter_rate *pcpu__cr)
{
	return pcpu_counter9_rate_get((struct pcpu_counter9_rate *)(void *)pcpu__cr);
}

/** counter_rate_free(cr): as pcpu_counter9_rate_free(). */
static inline void counter_rate_free(struct counter_rate *pcpu__cr)
{
	pcpu_counter9_rate_free((struct pcpu_counter9_rate *)(void *)pcpu__cr);
}

/* Per-CPU memory accessors of FreeBSD's sys/pcpu.h, on pcpu zone objects:
 * zpcpu_get_cpu(c, i) is slot i's word of counter c (the type of c, as in
 * FreeBSD), zpcpu_get(c) the calling thread's. Seeding every slot's word
 * with CPU_FOREACH() (<sys/smp.h>), as ip_id.c does, works in every mode,
 * and so does summing them -- with one difference from FreeBSD: adds that
 * could not use rseq (fallback mode) and resets (counter_u64_zero(),
 * fetch-and-zero) are kept in mirror words (pcpu/counter.h) that these
 * accessors do not reach, so the sum over CPU_FOREACH() of
 * *zpcpu_get_cpu(c, i) equals counter_u64_fetch(c) only for a counter that
 * had neither; counter_u64_fetch() always includes both. */
#define zpcpu_get_cpu(base, cpu) \
	((__typeof__(base))pcpu_slot_ptr((base), (unsigned)(cpu)))
#define zpcpu_get(base) zpcpu_get_cpu((base), pcpu_current_slot())
#define zpcpu_replace(base, val) pcpu_slot_replace((base), (uint64_t)(val))

/* Arrays of counters, as sys/counter.h defines them. */
#define COUNTER_ARRAY_ALLOC(a, n, wait)                                       \
	do {                                                                  \
		for (size_t pcpu__i = 0; pcpu__i < (size_t)(n); ++pcpu__i)    \
			(a)[pcpu__i] = counter_u64_alloc(wait);               \
	} while (0)

#define COUNTER_ARRAY_FREE(a, n)                                              \
	do {                                                                  \
		for (size_t pcpu__i = 0; pcpu__i < (size_t)(n); ++pcpu__i)    \
			counter_u64_free((a)[pcpu__i]);                       \
	} while (0)

#define COUNTER_ARRAY_COPY(a, dstp, n)                                        \
	do {                                                                  \
		for (size_t pcpu__i = 0; pcpu__i < (size_t)(n); ++pcpu__i)    \
			((uint64_t *)(dstp))[pcpu__i] =                       \
				counter_u64_fetch((a)[pcpu__i]);              \
	} while (0)

#define COUNTER_ARRAY_ZERO(a, n)                                              \
	do {                                                                  \
		for (size_t pcpu__i = 0; pcpu__i < (size_t)(n); ++pcpu__i)    \
			counter_u64_zero((a)[pcpu__i]);                       \
	} while (0)

/* The kernel's clock, for ported code that writes `cr.cr_ticks = ticks` or
 * compares with `hz`: opt-in (define PCPU_COUNTER9_KERNEL_CLOCK before
 * including), since names this short collide with ordinary identifiers.
 * A port that defines its own (a macro) keeps it. */
#ifdef PCPU_COUNTER9_KERNEL_CLOCK
#ifndef ticks
#define ticks (pcpu_counter9_ticks())
#endif
#ifndef hz
#define hz PCPU_COUNTER9_HZ
#endif
#endif

/* pcpu's addition: copy and zero, each add reported exactly once. */
#define COUNTER_ARRAY_FETCH_AND_ZERO(a, dstp, n)                              \
	pcpu_counter9_array_fetch_and_zero((a), (uint64_t *)(dstp), (size_t)(n))

#endif /* PCPU_COUNTER9_NO_COMPAT_NAMES */

PCPU_END_DECLS

#endif /* PCPU_COUNTER9_H */
