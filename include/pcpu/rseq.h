/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/rseq.h
 * pcpu's use of restartable sequences (rseq): the per-thread rseq area the
 * inline fast paths read, the process-wide index (CPU number or mm_cid) and
 * slot count, and how the calling thread updates per-CPU data (its rseq
 * mode, registering it early, unloading code that ran inline updates).
 *
 * Everything named `pcpu__` (two underscores) is visible only so that the
 * inline fast paths can use it. It is not API: it may change in any release.
 */
#ifndef PCPU_RSEQ_H
#define PCPU_RSEQ_H

#include <pcpu/defs.h>

/* Byte offsets of the fields of the kernel's struct rseq (linux/rseq.h).
 * They are ABI: fixed by the kernel, the same on every architecture. */
#define PCPU__RSEQ_OFF_CPU_ID 4
#define PCPU__RSEQ_OFF_CS 8
#define PCPU__RSEQ_OFF_MM_CID 24

PCPU_BEGIN_DECLS

/** Which per-thread number selects an object's slot (one per process). */
enum pcpu_index {
	PCPU_INDEX_DEFAULT = 0, /**< the process's index (mm_cid where available) */
	PCPU_INDEX_CPU = 1,     /**< rseq cpu_id: the CPU the thread runs on */
	PCPU_INDEX_MM_CID = 2,  /**< rseq mm_cid: dense concurrency id */
};

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
 * per add). The library itself writes it once, in src/core/rseq.c.
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
 *
 * Needed in one case: in PCPU_RSEQ_OWN mode, where pcpu was loaded
 * (dlopen()) into a process that had created 32 thread-specific keys
 * already, the thread-exit hook pcpu sets at registration may allocate
 * memory, which an update (perhaps in a signal handler) must not do. There
 * only this function registers a thread, and threads that never call it
 * use the fallback path (exact; an atomic add per update).
 *
 * Thread-safe; async-signal-safe (signals are blocked while registering),
 * except for its first call in a thread of the case above.
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

/** Short name of a mode: "glibc", "own", "fallback" (never NULL).
 * Thread-safe; async-signal-safe. Cost: a table lookup. */
PCPU_API const char *pcpu_rseq_mode_name(enum pcpu_rseq_mode mode);

/**
 * The errno value that sent the calling thread to the fallback path
 * (ENOSYS, EPERM, EINVAL: another area registered...), ECANCELED when
 * fallback was asked for (PCPU_RSEQ=0, ThreadSanitizer), or 0 when the
 * thread uses rseq. Thread-safe; async-signal-safe. Cost: what
 * pcpu_rseq_mode() costs.
 */
PCPU_API int pcpu_rseq_error(void);

/**
 * Whether the kernel fills rseq's mm_cid field (Linux >= 6.3), decided from
 * getauxval(AT_RSEQ_FEATURE_SIZE), not from glibc's __rseq_size. When it
 * returns 0 the process indexes by CPU number even if PCPU_INDEX=mm_cid
 * asked for mm_cid (pcpu_zone_index(NULL) then reports PCPU_INDEX_CPU).
 * Thread-safe. Cost: a load once pcpu is initialised.
 */
PCPU_API int pcpu_rseq_has_mm_cid(void);

/**
 * Number of slots every zone has: the CPU slots -- the possible CPUs of the
 * machine (/sys/devices/system/cpu/possible, not the online count), which
 * also bounds rseq's cpu_id and mm_cid, so a registered thread's index is
 * always below it -- then pcpu_worker_max() owned slots for pinned workers
 * (pcpu/worker.h), which only their claimers write. The environment
 * variable PCPU_NSLOTS=N, read once, raises the CPU slots to N (to simulate
 * a bigger machine: tests, benchmarks); a value below the possible CPUs is
 * ignored. Initialises pcpu if needed; never 0.
 * Thread-safe; async-signal-safe once initialised. Cost: a load once
 * initialised.
 */
PCPU_API unsigned pcpu_nslots(void);

/**
 * Whether slot `slot` can hold a value: whether pcpu_counter_fetch() reads
 * it. The walked slots are slot 0, the CPUs present when pcpu started
 * (/sys/devices/system/cpu/present), mm_cid's range 0 .. present - 1, and
 * the owned slots once first claimed; with PCPU_SLOT_WALK=all, every CPU
 * slot. Only a walked slot's copies are ever written or read by pcpu, and
 * only they have memory: a published segment reserves none for the others,
 * and under strict commit accounting (PCPU_COMMIT, vm.overcommit_memory=2)
 * their copies are read-only zeros in private zones, so a write there
 * faults (SIGSEGV). Code that walks "every CPU" by hand (counter(9)'s
 * CPU_FOREACH, a seeding loop over pcpu_slot_ptr()) skips the slots this
 * returns 0 for, as FreeBSD's CPU_FOREACH skips CPU_ABSENT ones.
 * Returns 1 or 0 (0 for slot >= pcpu_nslots()). Initialises pcpu if
 * needed. Thread-safe; async-signal-safe once initialised. Cost: a load
 * for a CPU slot, a scan of the claimed owned slots for an owned one.
 * Since PCPU_0.2.
 */
PCPU_API int pcpu_slot_walked(unsigned slot);

/**
 * Whether the library understood its environment variables: NULL when
 * every PCPU_* variable it read (PCPU_RSEQ, PCPU_INDEX, PCPU_NSLOTS,
 * PCPU_OWNED_SLOTS, PCPU_SLOT_WALK, PCPU_COMMIT; unset or empty counts as
 * understood)
 * held a value it knows; else a constant string naming the first that did
 * not and what the library did instead, e.g. "PCPU_SLOT_WALK: neither all
 * nor present; every slot is walked". The library never prints: a program
 * or tool that wants the typo reported calls this at start-up and says it
 * (pcpustat does). What is done instead is always exact: PCPU_RSEQ and
 * PCPU_INDEX keep their defaults, PCPU_NSLOTS the possible CPUs' count,
 * PCPU_OWNED_SLOTS gives no owned slots (claims fail with EINVAL),
 * PCPU_SLOT_WALK walks every slot (slower fetches, no slot missed), and
 * PCPU_COMMIT is taken as auto.
 * Initialises pcpu if needed (the variables are read once per process).
 * Thread-safe; async-signal-safe once initialised. Cost: a load once
 * initialised.
 */
PCPU_API const char *pcpu_environment_error(void);

/**
 * The process-wide choices a program may make itself, instead of leaving
 * them to the environment (pcpu_configure()). Start from PCPU_CONFIG_INIT,
 * which keeps every default, and set what you need:
 *
 *     struct pcpu_config cfg = PCPU_CONFIG_INIT;
 *     cfg.index = PCPU_INDEX_CPU;   // a shared pre-fork registry needs it
 *     if (pcpu_configure(&cfg) != 0)
 *             err(1, "pcpu_configure");
 *
 * Fields added by a later release go at the end; `size` tells the library
 * which fields the program knows.
 */
struct pcpu_config {
	/** sizeof(struct pcpu_config) as the program was built: set by
	 * PCPU_CONFIG_INIT. */
	size_t size;
	/** The slot index: PCPU_INDEX_CPU or PCPU_INDEX_MM_CID, or
	 * PCPU_INDEX_DEFAULT to keep the environment's choice (PCPU_INDEX) or
	 * the default (mm_cid where the kernel has it). */
	enum pcpu_index index;
	/** Owned slots for pinned workers (pcpu/worker.h): 0 to PCPU_OWNED_MAX,
	 * or -1 to keep the environment's choice (PCPU_OWNED_SLOTS) or the
	 * default (one per possible CPU, at most 128). */
	int owned_slots;
};

/** A struct pcpu_config that keeps every default. */
#define PCPU_CONFIG_INIT { sizeof(struct pcpu_config), PCPU_INDEX_DEFAULT, -1 }

/**
 * Makes the process-wide choices `cfg` names, and initialises pcpu with
 * them. The program's choice wins over the environment's (PCPU_INDEX,
 * PCPU_OWNED_SLOTS): a program that shares a registry between processes
 * knows it needs CPU numbers whatever its environment says. An
 * environment variable so overridden is named by pcpu_environment_error().
 *
 * When: before anything else of pcpu runs -- before the first zone,
 * counter, registry or other object is made, before pcpu_nslots() or
 * pcpu_rseq_mode() -- typically first thing in main(), or in a server
 * module's set-up before it creates its registry. Calling it again, or
 * after pcpu started, succeeds if pcpu already runs with the same choices
 * (a reloaded server module calls it again), and fails otherwise.
 *
 * Returns 0, or -1 with errno: EINVAL (NULL, a `size` smaller than the
 * first release of this struct, an index that is not an enum pcpu_index
 * value, owned_slots below -1 or above PCPU_OWNED_MAX), ENOTSUP
 * (PCPU_INDEX_MM_CID on a kernel without mm_cid: pcpu_rseq_has_mm_cid()),
 * EBUSY (pcpu already runs with another choice: objects exist whose slots
 * were chosen by it). Nothing is changed on failure.
 * Thread-safe; not async-signal-safe. Cost: pcpu's initialisation (reading
 * /sys once) the first time, a few loads afterwards.
 */
PCPU_API int pcpu_configure(const struct pcpu_config *cfg);

/* Slow path of every rseq fast path: initialises pcpu and registers the
 * calling thread if needed. Returns 0 if the caller may retry rseq, -1 if
 * this thread must use the fallback path. Async-signal-safe. */
PCPU_API int pcpu__thread_prepare(void);

PCPU_END_DECLS

#endif /* PCPU_RSEQ_H */
