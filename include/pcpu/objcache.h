/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/objcache.h
 * Per-CPU object caches: DragonFly's objcache (what its lwbuf uses), FreeBSD
 * UMA's per-CPU buckets, Solaris's magazines, DPDK's per-lcore mempool
 * caches, tcmalloc's rseq per-CPU caches -- in user space, for any objects.
 *
 * Why: short-lived objects (buffers, requests, descriptors) taken and given
 * back millions of times a second. A free list under a lock, or a lock-free
 * stack, makes every get and put write one shared cache line; malloc's
 * per-thread caches keep threads x capacity objects and lose them to other
 * threads when objects move. Here each slot (CPU, or mm_cid: pcpu/zone.h)
 * has a small cache, an array of object pointers in that slot's copy of a
 * per-CPU object, and a get or put is one rseq critical section on it: no
 * lock, no atomic instruction, no shared line. Memory held in caches is
 * bounded by slots x capacity, whatever the number of threads.
 *
 *     slot s:  mode | count | cap | ... | ptr[0] ... ptr[cap-1]
 *     get:     n = count; if n == 0: slow; obj = ptr[n-1]; commit count = n-1
 *     put:     n = count; if n == cap: slow; ptr[n] = obj; commit count = n+1
 *
 * Behind the slots, a depot (one mutex) holds objects that no slot caches;
 * a slot that is empty takes a batch (half its capacity) from it, one that
 * is full gives it a batch, in one critical section each (a copy, then the
 * count's commit). Behind the depot, the backing store: objects are
 * allocated (malloc) and constructed when the depot has none, destructed
 * and freed only by pcpu_objcache_drain() and pcpu_objcache_destroy(). So
 * the constructor runs when an object enters the cache's backing store and
 * the destructor when it leaves it, not on every get and put (objcache's
 * contract): a got object is in the state its last put left it in.
 *
 * Straying objects. Each object remembers the slot it was last handed out
 * on (a word just before it). A put on another slot counts a stray
 * (PCPU_OBJCACHE_STRAYS), and a get that hands an object out on another
 * slot than its last calls the cache's `moved` hook first, for objects that
 * keep CPU-local state (lwbuf's "sanity check and TLB invalidation if the
 * lwbuf strays"). The slot is the index pcpu uses (pcpu_current_slot());
 * threads that cannot use rseq use their fallback slot, so for them a stray
 * means "another fallback slot", which says little.
 *
 * Modes, decided when the cache is created, as for pcpu_ref (pcpu/ref.h):
 *  - per-CPU: the creating thread uses rseq and membarrier's
 *    PRIVATE_EXPEDITED_RSEQ command works. Threads that cannot run the
 *    sections (not registered, or PCPU_RSEQ_MAX_TRIES aborts in a row) use
 *    the locked slots below; both kinds of slot coexist.
 *  - locked: no rseq (PCPU_RSEQ=0, seccomp, valgrind, ThreadSanitizer
 *    builds) or no membarrier. Every get and put is a call and a mutex on
 *    the thread's fallback slot (assigned round-robin): correct, and
 *    scalable as long as threads spread over slots, but several times the
 *    per-CPU cost (bench/README.md: 2.5-2.9x malloc + free, vs 0.4x).
 *  - membarrier refused after the cache was created (a seccomp filter
 *    installed since): caches created from then on are locked; a per-CPU
 *    one turns locked at its next collection, which gets the membarrier's
 *    guarantee by running the collecting thread on every CPU in turn
 *    (pcpu/ref.h explains that fallback and its costs). If that fails too
 *    (sched_setaffinity() refused as well), the slots' caches are left as
 *    they are and keep serving their slots (see pcpu_objcache_drain()).
 *  pcpu_objcache_is_percpu() says which.
 *
 * Collecting (pcpu_objcache_drain(), and a get at the limit): a thread sets
 * every slot's copy of the mode word, calls membarrier (rseq restarts the
 * sections in flight, which then read the new mode), moves every slot's
 * objects to the depot, and clears the mode words; then it empties the
 * locked caches under their mutexes. Gets and puts meanwhile use the locked
 * caches. No object is lost or handed out twice (the tests count).
 *
 * Statistics: pcpu counters (pcpu_objcache_counter(), read with
 * pcpu_counter_fetch()), registered in a registry when the description
 * names one (families pcpu_objcache_*, label `cache`), so that they are
 * exported and published like any metric. The cache itself knows nothing
 * of registries: the statistics layer, which creates them, registers the
 * counters for it (src/stats/objcache_stats.c), so a program that names
 * no registry uses the cache without the statistics layer.
 *
 * Signals: get and put are not async-signal-safe (their slow paths take
 * mutexes); a signal that interrupts one is harmless (the section
 * restarts).
 *
 * fork(): the child gets a copy of the cache as it was at the fork (fork
 * handlers take the cache's locks, so no lock is held in the child). The
 * child may get and put at once, and may put the objects its thread held.
 * Objects that other parent threads held stay "in existence" and held in
 * the child, so pcpu_objcache_destroy() there fails with EBUSY unless the
 * child puts them back (it has the memory: the same addresses); drain works.
 * Parent and child share nothing afterwards; tests/test_objcache.c checks it.
 *
 * Two tiers, as for counters (pcpu/counter.h): get and put are inline by
 * default (tied to the layout version PCPU_LAYOUT_<n>); a program that
 * defines PCPU_NO_INLINE gets exported functions instead.
 */
#ifndef PCPU_OBJCACHE_H
#define PCPU_OBJCACHE_H

#include <pcpu/defs.h>
#include <pcpu/rseq.h>
#include <pcpu/counter.h>
#include <pcpu/percpu_ops.h>

PCPU_BEGIN_DECLS

struct pcpu_registry; /* pcpu/stats.h */

/** The statistics of a cache, each a pcpu counter (pcpu_objcache_counter). */
enum pcpu_objcache_stat {
	PCPU_OBJCACHE_GETS = 0,        /**< successful gets */
	PCPU_OBJCACHE_PUTS = 1,        /**< puts */
	PCPU_OBJCACHE_GET_MISSES = 2,  /**< gets the slot's cache could not serve
					    (gets - misses = local hits) */
	PCPU_OBJCACHE_PUT_MISSES = 3,  /**< puts that found the slot's cache full */
	PCPU_OBJCACHE_DEPOT_XFERS = 4, /**< batches moved between a slot and the depot */
	PCPU_OBJCACHE_STRAYS = 5,      /**< puts on another slot than the get's */
	PCPU_OBJCACHE_OBJECTS = 6,     /**< objects in existence: constructed - destructed */
	PCPU_OBJCACHE_NSTATS = 7
};

/* One slot's copy of a cache (private to pcpu): the handle is slot 0's
 * copy of a per-CPU object, slot s's is at handle + s * PCPU_SLOT_STRIDE,
 * and the copy in the mirror region (pcpu/zone.h) is slot s's locked cache.
 * The fast paths read only their own slot's copy. It is a per-CPU stack of
 * pointers (pcpu/percpu_ops.h): the same layout as struct pcpu_rseq_stack
 * (src/core/objcache.c checks it), its two user words holding the counters and
 * the shared part, so that get and put are the public stack operations. */
struct pcpu__objcache_slot {
	intptr_t mode;               /* 0: sections may commit here */
	int64_t count;               /* objects in ptr[] */
	int64_t cap;                 /* capacity of ptr[] (every slot alike) */
	struct pcpu_counter *stats;  /* the cache's counters (every slot alike) */
	void *impl;                  /* the shared part (every slot alike) */
	int64_t reserved[3];
	/* then cap object pointers: pcpu__objcache_ptrs() */
};

/* A slot as the per-CPU stack it is. */
static inline struct pcpu_rseq_stack *pcpu__objcache_stack(struct pcpu__objcache_slot *s)
{
	return (struct pcpu_rseq_stack *)(void *)s;
}

/** A cache. Create with pcpu_objcache_create(). */
struct pcpu_objcache {
	struct pcpu__objcache_slot pcpu__s;
};
typedef struct pcpu_objcache pcpu_objcache_t;

/** Constructs an object entering the backing store: returns 0, or an errno
 * value (> 0) that the get then fails with. A negative value is read
 * POSIX-style, as -1 with errno set: the get fails with the errno the
 * constructor left, or ECANCELED if it left none (errno is 0 when the
 * constructor is called). */
typedef int pcpu_objcache_ctor_fn(void *obj, void *arg);
/** Destructs an object leaving the backing store (drain, destroy). */
typedef void pcpu_objcache_dtor_fn(void *obj, void *arg);
/** Called by a get that hands `obj` out on slot `to`, when it was last
 * handed out on slot `from` (lwbuf's stray check). */
typedef void pcpu_objcache_moved_fn(void *obj, unsigned from, unsigned to, void *arg);

/** What pcpu_objcache_create() makes. Zero-initialise, then set. */
struct pcpu_objcache_desc {
	size_t size;                 /**< object size in bytes (> 0) */
	size_t align;                /**< power of two <= 4096; 0: 16 */
	unsigned capacity;           /**< objects per slot's cache, 2..1024; 0: 64 */
	size_t limit;                /**< most objects in existence; 0: no limit */
	pcpu_objcache_ctor_fn *ctor; /**< may be NULL */
	pcpu_objcache_dtor_fn *dtor; /**< may be NULL */
	pcpu_objcache_moved_fn *moved; /**< stray hook, may be NULL */
	void *arg;                   /**< passed to ctor, dtor and moved */
	struct pcpu_registry *registry; /**< where to register the counters (by
					     the statistics layer: pcpu/stats.h),
					     or NULL; must outlive the cache */
	const char *name;            /**< label `cache` in the registry (needed with one) */
};

/** The statistics at once (pcpu_objcache_stats()). Not a snapshot: each
 * value is read as pcpu_counter_fetch() reads. */
struct pcpu_objcache_stats {
	uint64_t gets, puts, get_misses, put_misses, depot_xfers, strays;
	uint64_t local_hits; /**< gets - get_misses */
	int64_t objects;     /**< in existence */
	uint64_t cached;     /**< in slots' caches and the depot (collects nothing) */
	uint64_t in_depot;   /**< of which in the depot */
};

/* Where a cache keeps the slot an object was last handed out on: the 8
 * bytes before the object. UINT32_MAX: never handed out. */
struct pcpu__objcache_hdr {
	uint32_t slot;
	uint32_t reserved;
};
#define PCPU__OBJCACHE_NO_SLOT UINT32_MAX

static inline struct pcpu__objcache_hdr *pcpu__objcache_hdr_of(void *obj)
{
	return (struct pcpu__objcache_hdr *)obj - 1;
}

/* A slot's array of cached object pointers, just after its header. */
static inline void **pcpu__objcache_ptrs(struct pcpu__objcache_slot *s)
{
	return (void **)(s + 1);
}

static inline struct pcpu__objcache_slot *pcpu__objcache_slot(pcpu_objcache_t *c, size_t idx)
{
	return (struct pcpu__objcache_slot *)((char *)c + (idx << PCPU_SLOT_STRIDE_SHIFT));
}

/* Out-of-line rest of get and put when the inline attempt did not commit
 * (empty or full cache, collecting, locked mode, not registered, aborted),
 * and the rest of a get that hands an object out on a new slot. */
PCPU_API __attribute__((cold)) void *pcpu__objcache_get_slow(pcpu_objcache_t *c);
PCPU_API __attribute__((cold)) void pcpu__objcache_put_slow(pcpu_objcache_t *c, void *obj);
PCPU_API void pcpu__objcache_handed_out(pcpu_objcache_t *c, void *obj, unsigned slot);

/* Adds 1 to counter c on slot idx, the slot the caller's section just
 * committed on (no second index load); the counter's slow path if the
 * thread has moved since, or the add aborts. */
__attribute__((always_inline)) static inline void pcpu__objcache_count(struct pcpu_counter *c,
									int64_t idx)
{
	if (PCPU_UNLIKELY(pcpu_rseq_load_add_store(idx, &pcpu__counter_slot(c, (size_t)idx)->pcpu__word,
						 1) != 0))
		pcpu__counter_add_slow(c, 1);
}

#ifdef PCPU_NO_INLINE
/* The stable tier (src/core/objcache_stable_abi.c), documented below. */
PCPU_API void *pcpu_objcache_get(pcpu_objcache_t *c);
PCPU_API void pcpu_objcache_put(pcpu_objcache_t *c, void *obj);
#endif

/**
 * Creates a cache (see the file comment). Nothing is allocated for objects
 * until the first get.
 *
 * Returns NULL with errno: EINVAL (desc NULL, size 0, bad align or
 * capacity, a registry without a name), what pcpu_registry_struct() says
 * (EINVAL: name not a valid label value; EEXIST: a cache of that name is
 * registered already), ENOMEM.
 * Memory: (64 + 8 x capacity) bytes per slot that uses the cache, per kind
 * of slot (rseq, locked), in pcpu's default zone; 7 counters; a mutex per
 * slot. Thread-safe; not async-signal-safe. Cost: allocations, a store
 * into every slot's copy; the first per-CPU object of a process also
 * registers membarrier (one system call).
 */
PCPU_API pcpu_objcache_t *pcpu_objcache_create(const struct pcpu_objcache_desc *desc);

/**
 * Takes an object: from the calling thread's slot's cache, else a batch
 * from the depot, else newly allocated and constructed objects. Its memory
 * is `size` bytes aligned to `align`, in the state the last put left it
 * (or the constructor, for a new one). If the object was last handed out on
 * another slot, the `moved` hook runs first, in this thread.
 *
 * Returns NULL with errno ENOMEM (allocation failed), EAGAIN (the limit is
 * reached and no object is free, after collecting every slot's cache), or
 * the constructor's error (pcpu_objcache_ctor_fn: > 0).
 * Thread-safe; not async-signal-safe. Cost, per-CPU mode, object cached on
 * the slot: two rseq sections (the pop, the `gets` counter's add), no atomic
 * instruction (bench/README.md, pcpu_bench_objcache).
 */
__attribute__((always_inline)) static inline void *PCPU__INLINE_OP(pcpu_objcache_get)(pcpu_objcache_t *c)
{
	int64_t idx;
	struct pcpu__objcache_slot *s;
	void *obj;

#ifdef PCPU_DEBUG
	pcpu__debug_check(c, "pcpu_objcache_get");
#endif
	idx = pcpu__rseq_load_index();

	if (PCPU_UNLIKELY(idx < 0))
		return pcpu__objcache_get_slow(c);
	s = pcpu__objcache_slot(c, (size_t)idx);
	if (PCPU_UNLIKELY(pcpu_rseq_stack_pop(idx, pcpu__objcache_stack(s), &obj) != 0))
		return pcpu__objcache_get_slow(c);
	pcpu__objcache_count(s->stats + PCPU_OBJCACHE_GETS, idx);
	if (PCPU_UNLIKELY(pcpu__objcache_hdr_of(obj)->slot != (uint32_t)idx))
		pcpu__objcache_handed_out(c, obj, (unsigned)idx);
	return obj;
}

/**
 * Gives back an object got from `c` (by any thread, on any slot): into the
 * calling thread's slot's cache, else (full) a batch of it goes to the
 * depot first. Never fails. Counts a stray if the slot is not the one the
 * object was got on. Undefined, and not detected: an object put twice, or
 * one not got from `c` (it corrupts the cache). Undefined for get and put:
 * a destroyed cache (compiled with PCPU_DEBUG, both check that the handle
 * is a live pcpu allocation and abort with a message if not).
 * Thread-safe; not async-signal-safe. Cost, per-CPU mode, room in the
 * slot's cache: two rseq sections (the push, the `puts` counter's add), a
 * third for a stray.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_objcache_put)(pcpu_objcache_t *c,
										      void *obj)
{
	uint32_t got;
	int64_t idx;
	struct pcpu__objcache_slot *s;

#ifdef PCPU_DEBUG
	pcpu__debug_check(c, "pcpu_objcache_put");
#endif
	got = pcpu__objcache_hdr_of(obj)->slot;
	idx = pcpu__rseq_load_index();

	if (PCPU_UNLIKELY(idx < 0)) {
		pcpu__objcache_put_slow(c, obj);
		return;
	}
	s = pcpu__objcache_slot(c, (size_t)idx);
	if (PCPU_UNLIKELY(pcpu_rseq_stack_push(idx, pcpu__objcache_stack(s), obj) != 0)) {
		pcpu__objcache_put_slow(c, obj);
		return;
	}
	pcpu__objcache_count(s->stats + PCPU_OBJCACHE_PUTS, idx);
	if (PCPU_UNLIKELY(got != (uint32_t)idx))
		pcpu__objcache_count(s->stats + PCPU_OBJCACHE_STRAYS, idx);
}

/**
 * Returns every cached object (every slot's cache and the depot) to the
 * backing store: destructed and freed. Objects held by threads are not
 * affected. Returns the number freed. Gets and puts may run meanwhile (they
 * use the depot while the slots are collected), so a busy cache may hold
 * objects again by the time this returns.
 * NULL: 0 with errno EINVAL. If membarrier worked at creation, is refused
 * now, and the fallback (running on every CPU in turn) failed too, the
 * per-CPU slots' caches cannot be reached safely: they are left as they
 * are (their objects stay cached, for their slots' gets, and
 * pcpu_objcache_destroy() frees them), everything else is freed and
 * counted, and errno is set to membarrier's error (EPERM, ENOSYS).
 * Otherwise errno is left as it was: to tell, set it to 0 before the call.
 * Thread-safe; not async-signal-safe. Cost: a membarrier() system call
 * (per-CPU mode), a mutex per slot, the destructor and free() per object.
 */
PCPU_API size_t pcpu_objcache_drain(pcpu_objcache_t *c);

/**
 * Destroys the cache: destructs and frees every cached object, frees the
 * cache and unregisters its counters. Returns 0, or -1 with errno EBUSY
 * when objects are still held (in existence but not cached): the cached
 * ones have been drained then, and the cache stays usable (see the file
 * comment for fork()). NULL is a no-op returning 0. The caller guarantees
 * no other thread uses the cache meanwhile or afterwards, and that its
 * registry, if any, still exists; so no get or put can be in flight, and
 * destroy needs no membarrier (it works whatever seccomp allows). Not
 * thread-safe (see above); not async-signal-safe. Cost: a drain, then
 * freeing the slots' memory and the counters.
 */
PCPU_API int pcpu_objcache_destroy(pcpu_objcache_t *c);

/**
 * One statistic's counter (read it with pcpu_counter_fetch(); it belongs
 * to the cache: never free or reset it). NULL with errno EINVAL for a NULL
 * cache or an unknown statistic. Thread-safe; async-signal-safe. Cost: a
 * load.
 */
PCPU_API pcpu_counter_t pcpu_objcache_counter(pcpu_objcache_t *c, enum pcpu_objcache_stat which);

/**
 * Fills *out with every statistic, and the objects cached now. Returns 0,
 * or -1 with errno EINVAL (NULL argument). Exact once gets and puts have
 * stopped. Thread-safe; not async-signal-safe (takes the depot's mutex).
 * Cost: a counter fetch per statistic and a read of every slot's count.
 */
PCPU_API int pcpu_objcache_stats(pcpu_objcache_t *c, struct pcpu_objcache_stats *out);

/** 1 if the cache is in per-CPU mode, 0 if locked (from the start, or
 * turned locked: see the file comment) and for NULL. Thread-safe;
 * async-signal-safe. Cost: a load. */
PCPU_API int pcpu_objcache_is_percpu(const pcpu_objcache_t *c);

PCPU_END_DECLS

#endif /* PCPU_OBJCACHE_H */
