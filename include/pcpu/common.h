/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/common.h
 * Definitions shared by every pcpu header: export macros, the slot stride,
 * the per-thread rseq area, and the process-wide mode query.
 *
 * Everything named `pcpu__` (two underscores) is visible only so that the
 * inline fast paths can use it. It is not API: it may change in any release.
 */
#ifndef PCPU_COMMON_H
#define PCPU_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define PCPU_BEGIN_DECLS extern "C" {
#define PCPU_END_DECLS }
#else
#define PCPU_BEGIN_DECLS
#define PCPU_END_DECLS
#endif

#define PCPU_API __attribute__((visibility("default")))
#define PCPU_LIKELY(x) __builtin_expect(!!(x), 1)
#define PCPU_UNLIKELY(x) __builtin_expect(!!(x), 0)


/**
 * Distance in bytes between the copies of one object for consecutive slots.
 *
 * Every zone uses the same stride, as FreeBSD's UMA_ZONE_PCPU does, so the
 * copy of an object for slot i is always `obj + i * PCPU_SLOT_STRIDE` and the
 * hot path needs no per-zone lookup for it (a shift, not a multiply).
 * Zones reserve address space in chunks of `2 * nslots * PCPU_SLOT_STRIDE`
 * (each slot's words, then each slot's mirror words: pcpu/zone.h) with
 * MAP_NORESERVE; only pages that are written ever become resident. It also bounds
 * one object (an array of counters) to PCPU_ZONE_MAX_OBJECT bytes.
 */
#define PCPU_SLOT_STRIDE_SHIFT 25
#define PCPU_SLOT_STRIDE ((size_t)1 << PCPU_SLOT_STRIDE_SHIFT)

/* Byte offsets of the fields of the kernel's struct rseq (linux/rseq.h).
 * They are ABI: fixed by the kernel, the same on every architecture. */
#define PCPU__RSEQ_OFF_CPU_ID 4
#define PCPU__RSEQ_OFF_CS 8
#define PCPU__RSEQ_OFF_MM_CID 24

PCPU_BEGIN_DECLS

/**
 * Process-wide values the inline fast paths read. Set once, by pcpu's
 * constructor (or by the first pcpu call, whichever comes first), before any
 * zone or counter can exist, and never changed afterwards -- fork() children
 * inherit them unchanged, since the TLS layout does not change.
 *  - index_tpoff: offset, from the thread pointer, of the index field
 *    (cpu_id or mm_cid) of the calling thread's struct rseq. The index is
 *    chosen per process, so the hot path needs no per-object lookup.
 *  - cs_tpoff: offset, from the thread pointer, of its rseq_cs field.
 * Both areas pcpu may use (glibc's, pcpu's own) live in static TLS, so the
 * offsets are the same in every thread.
 *
 * Programs see the struct as const: it is, for as long as any pcpu object
 * exists, and it lets the compiler keep these values in registers across
 * critical sections (whose "memory" clobber would otherwise force a reload
 * per add). The library itself writes it once, in src/rseq.c.
 */
struct pcpu__globals {
	/* Full width: the sections use them as address registers, and a
	 * 32-bit field would cost a sign extension per add where the compiler
	 * does not keep the extended value in a register. */
	int64_t index_tpoff;
	int64_t cs_tpoff;
};
#ifdef PCPU_BUILDING_LIBRARY
extern PCPU_API struct pcpu__globals pcpu__g;
#else
extern PCPU_API const struct pcpu__globals pcpu__g;
#endif

/**
 * How the calling thread updates per-CPU data.
 */
enum pcpu_rseq_mode {
	PCPU_RSEQ_GLIBC = 1,    /**< rseq area registered by glibc (>= 2.35) */
	PCPU_RSEQ_OWN = 2,      /**< rseq area registered by pcpu for this thread */
	PCPU_RSEQ_FALLBACK = 3, /**< no rseq: exact atomic adds on per-slot words */
};

/**
 * Reports how the calling thread updates counters, registering it first if
 * pcpu registers rseq areas itself and this thread has not yet done so.
 *
 * Fallback happens when the kernel refuses rseq (ENOSYS, EPERM from a seccomp
 * filter, valgrind, gVisor), when another library already registered an area
 * pcpu does not know (the kernel answers EINVAL), when the environment
 * variable PCPU_RSEQ=0 is set,
 * or when pcpu was built with ThreadSanitizer. pcpu_rseq_error() says which.
 *
 * Thread-safe; async-signal-safe; cost: a few loads once registered.
 */
PCPU_API enum pcpu_rseq_mode pcpu_rseq_mode(void);

/**
 * Prepares the calling thread for counter updates now, rather than on its
 * first update (the default, which stays lazy): decides pcpu's process-wide
 * state if not yet done, registers the thread's rseq area where pcpu
 * registers areas itself (PCPU_RSEQ_OWN), and, for a thread that will use
 * the fallback path, picks its fallback slot. Then the thread's first add
 * costs what every add costs. Calling it again is cheap and harmless; not
 * calling it is fine too.
 *
 * Returns the thread's mode (a positive enum pcpu_rseq_mode value, as
 * pcpu_rseq_mode() reports it; PCPU_RSEQ_FALLBACK is not an error:
 * pcpu_rseq_error() says why), or -1 with errno ESRCH when called from a
 * thread-specific-data destructor after pcpu's own exit destructor ran
 * (the thread is exiting: it keeps using the fallback path).
 *
 * Nothing to undo: a registration pcpu made is undone at thread exit.
 * Thread-safe; async-signal-safe (signals are blocked while registering).
 * Cost: one rseq() system call the first time in PCPU_RSEQ_OWN mode, a few
 * loads otherwise.
 */
PCPU_API int pcpu_thread_init(void);

/**
 * Forgets the calling thread's last rseq critical section, so that code
 * holding critical sections can be unmapped (librseq's
 * rseq_prepare_unload()).
 *
 * Why: pcpu's inline updates (pcpu_counter_add() and the other inline
 * operations) put their critical-section descriptors into the object that
 * calls them, and leave the thread's rseq_cs pointing at the last one. When
 * the thread is next preempted, migrated or signalled, the kernel reads that
 * descriptor; if its object (a plugin) was dlclose()d meanwhile, the read
 * fails and the kernel kills the thread's process with SIGSEGV.
 *
 * When: before dlclose() of an object whose code ran inline pcpu updates,
 * every thread that ran one of them calls this after its last such update
 * (e.g. as the plugin's worker threads finish, or in a function the plugin
 * runs on each thread before it is unloaded), and the unload happens after
 * all those calls. A thread that never ran the object's updates need not
 * call it. Updates made through the library's out-of-line functions
 * (pcpu_counter_add_atomic(), fetches, resets) leave no descriptor in the
 * caller: only inline updates need it.
 *
 * Thread-safe (acts on the calling thread only); async-signal-safe.
 * Cost: one store.
 */
PCPU_API void pcpu_prepare_unload(void);

/**
 * The library's version at run time, MAJOR * 10000 + MINOR * 100 + PATCH:
 * compare with PCPU_VERSION, the headers' (pcpu/version.h, generated by the
 * build and included by pcpu/pcpu.h). Both come from the CMake project
 * version. Thread-safe; async-signal-safe; a load.
 */
PCPU_API unsigned pcpu_version(void);

/** The library's version as "MAJOR.MINOR.PATCH" (static, never NULL).
 * Thread-safe; async-signal-safe. */
PCPU_API const char *pcpu_version_string(void);

/** Short name of a mode: "glibc", "own", "fallback" (never NULL). */
PCPU_API const char *pcpu_rseq_mode_name(enum pcpu_rseq_mode mode);

/**
 * The errno value that sent the calling thread to the fallback path
 * (ENOSYS, EPERM, EINVAL: another area registered...), ECANCELED when fallback was asked for
 * (PCPU_RSEQ=0, ThreadSanitizer), or 0 when the thread uses rseq.
 * Thread-safe; async-signal-safe.
 */
PCPU_API int pcpu_rseq_error(void);

/**
 * Whether the kernel fills rseq's mm_cid field (Linux >= 6.3), decided from
 * getauxval(AT_RSEQ_FEATURE_SIZE), not from glibc's __rseq_size. When it
 * returns 0 the process indexes by CPU number even if PCPU_INDEX=mm_cid
 * asked for mm_cid (pcpu_zone_index(NULL) then reports PCPU_INDEX_CPU).
 * Thread-safe.
 */
PCPU_API int pcpu_rseq_has_mm_cid(void);

/**
 * Number of slots every zone has: the possible CPUs of the machine
 * (/sys/devices/system/cpu/possible, not the online count), which also
 * bounds rseq's cpu_id and mm_cid, so a registered thread's index is always
 * below it. The environment variable PCPU_NSLOTS=N, read once, raises it to
 * N (to simulate a bigger machine: tests, benchmarks); a value below the
 * possible CPUs is ignored. Initialises pcpu if needed; never 0.
 * Thread-safe; async-signal-safe once initialised.
 */
PCPU_API unsigned pcpu_nslots(void);

/* Slow path of every rseq fast path: initialises pcpu and registers the
 * calling thread if needed. Returns 0 if the caller may retry rseq, -1 if
 * this thread must use the fallback path. Async-signal-safe. */
PCPU_API int pcpu__thread_prepare(void);

/* Debug-build handle check (PCPU_DEBUG): prints what is wrong with `obj`
 * to stderr and aborts if it is not a live allocation; else returns. */
PCPU_API void pcpu__debug_check(const void *obj, const char *func);

PCPU_END_DECLS

#endif /* PCPU_COMMON_H */
