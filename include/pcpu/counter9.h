/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/counter9.h
 * FreeBSD counter(9) for user space: code written against <sys/counter.h>
 * compiles and runs unchanged (ported network stacks, statistics structs).
 *
 * Mapping: counter_u64_t is a pcpu_counter_t; every operation is the pcpu one
 * with counter(9)'s name, so the guarantees of pcpu/counter.h hold (lossless
 * adds without atomics on the fast path; a fetch is not a point-in-time
 * snapshot; 64-bit wraparound is not protected against).
 *
 *  - counter_u64_alloc(M_WAITOK) never returns NULL: like malloc(9) with
 *    M_WAITOK it waits (retries, sleeping, never aborts) until memory is
 *    available. M_NOWAIT may return NULL (errno ENOMEM). M_ZERO is accepted;
 *    counters are always zero when allocated.
 *  - counter_enter()/counter_exit() bracket counter_u64_add_protected() in
 *    the kernel to save critical_enter() pairs on some architectures. In user
 *    space each add is already its own restartable sequence, so they are
 *    no-ops kept for source compatibility.
 *  - counter_ratecheck() counts in seconds of CLOCK_MONOTONIC (the kernel's
 *    `ticks`/`hz`).
 *
 * Only pcpu_-prefixed symbols are exported: every name here is a macro or a
 * static inline function. Define PCPU_COUNTER9_NO_COMPAT_NAMES to get none of
 * the unprefixed names (then use the pcpu_counter9_ spellings).
 */
#ifndef PCPU_COUNTER9_H
#define PCPU_COUNTER9_H

#include <pcpu/counter.h>

PCPU_BEGIN_DECLS

/* malloc(9) wait flags, as counter_u64_alloc() takes them. */
#define PCPU_M_NOWAIT 0x0001
#define PCPU_M_WAITOK 0x0002
#define PCPU_M_ZERO 0x0100

/**
 * Allocates a counter: with PCPU_M_WAITOK retries until it succeeds (never
 * NULL), else NULL with errno on failure. Thread-safe; not
 * async-signal-safe.
 */
PCPU_API pcpu_counter_t pcpu_counter9_alloc(int flags);

/** State of counter_ratecheck(), as in FreeBSD's struct counter_rate. */
struct pcpu_counter9_rate {
	pcpu_counter_t cr_rate; /* events in the current second */
	volatile int cr_lock;   /* serialises the once-a-second reset */
	int cr_ticks;           /* start of the current second, in ms */
	int cr_over;            /* -1 once the limit was passed this second */
};

/**
 * Multiprocessor-friendly rate limit (ppsratecheck(9) on a counter): counts
 * one event and returns
 *   0   the limit is not reached in the current second,
 *   -1  the limit is reached (drop, log less, ...),
 *   >0  the limit was reached in the previous second, which just ended:
 *       the number of events counted in it.
 * `cr` must be zero-initialised with cr_rate a live counter.
 * Thread-safe: many threads may check one counter_rate at once; the reset
 * at a second's boundary is done by one of them (try-lock), the others skip
 * counting during it, as FreeBSD's does. Not async-signal-safe.
 */
PCPU_API int64_t pcpu_counter9_ratecheck(struct pcpu_counter9_rate *cr, int64_t limit);

#ifndef PCPU_COUNTER9_NO_COMPAT_NAMES

typedef pcpu_counter_t counter_u64_t;
#define counter_rate pcpu_counter9_rate

#ifndef M_NOWAIT
#define M_NOWAIT PCPU_M_NOWAIT
#endif
#ifndef M_WAITOK
#define M_WAITOK PCPU_M_WAITOK
#endif
#ifndef M_ZERO
#define M_ZERO PCPU_M_ZERO
#endif

static inline counter_u64_t counter_u64_alloc(int wait)
{
	return pcpu_counter9_alloc(wait);
}

static inline void counter_u64_free(counter_u64_t c)
{
	(void)pcpu_counter_free(c);
}

static inline void counter_u64_add(counter_u64_t c, int64_t inc)
{
	pcpu_counter_add(c, inc);
}

static inline uint64_t counter_u64_fetch(counter_u64_t c)
{
	return pcpu_counter_fetch(c);
}

static inline void counter_u64_zero(counter_u64_t c)
{
	pcpu_counter_zero(c);
}

#define counter_enter() do { } while (0)
#define counter_exit() do { } while (0)
#define counter_u64_add_protected(c, inc) pcpu_counter_add((c), (inc))

static inline int64_t counter_ratecheck(struct counter_rate *cr, int64_t limit)
{
	return pcpu_counter9_ratecheck(cr, limit);
}

/**
 * COUNTER_U64_DEFINE_EARLY(name): a global counter_u64_t allocated before
 * main() (a constructor in the including program, M_WAITOK), usable from the
 * first line of main. Costs one allocation at load time of the program that
 * uses it -- and only that program.
 */
#define COUNTER_U64_DEFINE_EARLY(c)                                           \
	counter_u64_t c;                                                      \
	__attribute__((constructor)) static void pcpu__early_init_##c(void)   \
	{                                                                     \
		c = counter_u64_alloc(M_WAITOK);                               \
	}                                                                     \
	counter_u64_t c

/* Arrays of counters, as sys/counter.h defines them. */
#define COUNTER_ARRAY_ALLOC(a, n, wait)                                       \
	do {                                                                  \
		for (size_t _i = 0; _i < (size_t)(n); ++_i)                               \
			(a)[_i] = counter_u64_alloc(wait);                     \
	} while (0)

#define COUNTER_ARRAY_FREE(a, n)                                              \
	do {                                                                  \
		for (size_t _i = 0; _i < (size_t)(n); ++_i)                               \
			counter_u64_free((a)[_i]);                             \
	} while (0)

#define COUNTER_ARRAY_COPY(a, dstp, n)                                        \
	do {                                                                  \
		for (size_t _i = 0; _i < (size_t)(n); ++_i)                               \
			((uint64_t *)(dstp))[_i] = counter_u64_fetch((a)[_i]); \
	} while (0)

#define COUNTER_ARRAY_ZERO(a, n)                                              \
	do {                                                                  \
		for (size_t _i = 0; _i < (size_t)(n); ++_i)                               \
			counter_u64_zero((a)[_i]);                             \
	} while (0)

#endif /* PCPU_COUNTER9_NO_COMPAT_NAMES */

PCPU_END_DECLS

#endif /* PCPU_COUNTER9_H */
