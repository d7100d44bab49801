/* SPDX-License-Identifier: MIT */
/*
 * The seam between libpcpu and libpcpu-stats: everything of the core that
 * src/stats/ and src/segment/ may use, declared here and nowhere else.
 *
 * This header is the interface itself, not an index of the core's private
 * headers: it includes no header of src/core/, and every function of it
 * is defined in src/core/ and exported by libpcpu.so in the private version
 * node PCPU_PRIVATE_<release> (src/core/pcpu.map) alone. Three lists say
 * the same, and tests/check_layers.py (ctest layer_check) holds them to it:
 * the functions declared here, the names of that node, and the private
 * symbols libpcpu-stats.so imports (its undefined symbols of that node).
 * A declaration nobody exports, an export nobody declares, a declaration
 * libpcpu-stats does not use and an import of anything not declared here
 * each fail the test. A need libpcpu-stats can meet through the public
 * API or libc alone is met there, not here.
 *
 * Whoever implements a function of the seam includes this header (so the
 * compiler holds the definition to the declaration); whoever uses it
 * includes this header and no other of src/core/ (tests/check_layers.py
 * refuses any other, and this one outside src/stats/ and src/segment/).
 * It sits with the lowest layer of the core (it includes only libc and
 * <pcpu/arch.h>, and names the core's types by their struct tags), so
 * that every layer of the core can include it.
 *
 * The seam, by subject:
 *   markers            PCPU_HIDDEN, PCPU_PRIVATE
 *   fork               one pthread_atfork for every layer, by rank
 *   fork views         a fork() child's view of the parent's values
 *   zone backings      a zone's chunks in shared memory (the segment's file)
 *   tree zones         zones a process tree shares, and joins
 *   owned slots        what a backing reserves; claims held
 *   counter words      a counter's set; words holding doubles
 *   mirror arithmetic  on words copied from a segment file
 *   torn copies        reading back a copy made 32 bits at a time
 *   object caches      how an object cache's counters reach a registry
 *
 * Nothing here is exported to users; no public header includes it. The
 * error messages of the statistics and segment layers are theirs
 * (src/stats/error.h), and so is their memory advice (madvise()).
 */
#ifndef PCPU_CORE_H
#define PCPU_CORE_H

#include <pcpu/arch.h> /* PCPU__TORN64: the target's, from its arch header */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct pcpu_zone;     /* pcpu_zone_t, pcpu/zone.h */
struct pcpu_counter;  /* pcpu_counter_t is a struct pcpu_counter *, pcpu/counter.h */
struct pcpu_registry; /* pcpu/stats.h */

/* ---- markers ------------------------------------------------------------ */

/* PCPU_HIDDEN: internal to one shared object (pcpu__* names, and the older
 * unprefixed pcpu_* internals): hidden, so that only the names of the
 * library's version script are exported.
 *
 * PCPU_PRIVATE: a function of this seam. It leaves libpcpu.so, but only in
 * the version node PCPU_PRIVATE_<release> of src/core/pcpu.map (the project
 * version, filled in by CMake), which no header a user includes declares.
 * libpcpu-stats records that node in its version needs, so a libpcpu-stats
 * of another release fails to load, clearly ("version
 * `PCPU_PRIVATE_0.2.0' not found"), instead of calling a function whose
 * meaning changed; and it is linked with -z now, so one built against a
 * private function this libpcpu lacks (renamed or removed under the same
 * version number) fails to load too ("undefined symbol: pcpu__...,
 * version PCPU_PRIVATE_0.2.0"), never at its first call. Nothing to
 * renumber by hand (ctest seam_mismatch_refused). */
#define PCPU_HIDDEN __attribute__((visibility("hidden")))
#define PCPU_PRIVATE __attribute__((visibility("default")))

/* ---- fork: one pthread_atfork for every layer (fork.c) ------------------ */

/* Layers, lowest first: a layer may take a lower layer's locks while holding
 * its own, never the reverse. prepare handlers run from the highest rank
 * down, parent and child handlers from the lowest up (fork.c). */
enum pcpu_fork_rank {
	PCPU_FORK_ZONE = 0,     /* zone_shared.c */
	PCPU_FORK_COUNTER = 1,  /* counter.c */
	PCPU_FORK_STATS = 2,    /* stats zone, gauges, groups */
	PCPU_FORK_REGISTRY = 3, /* registries */
	PCPU_FORK_SEGMENT = 4,  /* the segment writer */
	PCPU_FORK_SYSCTL = 5,   /* counter(9) sysctl records */
	PCPU_FORK_LATE = 6,     /* zone_shared.c: the child's last step (parent views) */
};

/* Registers a subsystem's fork handlers (any may be NULL) once: `*once` is
 * the subsystem's flag, set when registered (a later call is one load).
 * Call it before the subsystem first takes a lock of its own, and never
 * while holding any pcpu lock. Returns 0, or -1 with errno ENOMEM
 * (pthread_atfork failed). Thread-safe; not async-signal-safe. */
PCPU_PRIVATE int pcpu__fork_register(int *once, enum pcpu_fork_rank rank, void (*prepare)(void),
				     void (*parent)(void), void (*child)(void));

/* For the fork() child handlers of the layers above the zone (they run
 * after the zone's): `obj`'s address in a read-only mapping of the
 * parent's live file, if obj is an object of a zone that was shared until
 * this fork() and is now the child's private copy; NULL otherwise (a
 * private zone, outside those handlers, or the mapping failed). What the
 * view shows goes on changing: the parent's threads write it. Valid until
 * the last child handler (rank PCPU_FORK_LATE) unmaps it. Reading a page of
 * the view that is a hole in the file would allocate it: read only where
 * the child's copy holds data. (zone_shared.c) */
PCPU_PRIVATE const void *pcpu__zone_fork_parent_view(const void *obj);

/* ---- zone backings (zone_shared.c) -------------------------------------- */

/*
 * How a zone's chunks can live in memory that is shared with other
 * processes, without the zone knowing what that memory is.
 *
 * A zone starts private (anonymous memory). A layer above it that wants
 * the zone's objects readable from outside (the statistics segment: a tmpfs
 * file, src/segment/backing.c) attaches a backing to a zone that has no
 * live object: from then on every chunk the zone has or grows is mapped by
 * the backing, and -- if the backing reserves -- the backing is asked to
 * make the memory under every new object safe to write before the object
 * is handed out, so that no write can ever fault for lack of space. What
 * happens when there is no space (counting, flags for readers) is the
 * backing's business: the zone only fails the allocation with the errno
 * the backing gave.
 *
 * Offsets are bytes from the start of a chunk: a chunk is `span` bytes,
 * 2 * nslots regions of PCPU_SLOT_STRIDE (every slot, then every slot's
 * mirror; pcpu/zone.h). Every operation is called under the zone's lock
 * (or before the chunk is visible, or in the zone's fork() handlers) and
 * must not call back into the zone.
 */

/* How map() maps chunk `no`. */
enum pcpu_zone_map {
	/* Read-write and shared, over the chunk at `at` (MAP_FIXED): the
	 * zone's own mapping of an attached chunk. */
	PCPU_ZONE_MAP_SHARED = 0,
	/* Read-only and shared, anywhere (`at` NULL): in a fork() child,
	 * a view of the parent's live values (pcpu__zone_fork_parent_view). */
	PCPU_ZONE_MAP_VIEW = 1,
	/* Read-only and private, over the chunk at `at`, MAP_NORESERVE: a
	 * fork() child's last resort when it has no memory for a private
	 * copy. The zone makes writable what it writes (read-only, it is
	 * charged no commit where the kernel never overcommits). */
	PCPU_ZONE_MAP_PRIVATE = 2,
};

struct pcpu_zone_backing {
	/* Maps chunk `no` (`span` bytes) as `how` says; for SHARED, sizes
	 * the backing first if needed. Marks the mapping not to be backed by
	 * transparent huge pages (madvise MADV_NOHUGEPAGE: the zone writes
	 * it sparsely). Returns the mapping, or NULL with errno (EFBIG,
	 * ENOSPC, ENOMEM...). */
	void *(*map)(void *ctx, unsigned no, void *at, size_t span, enum pcpu_zone_map how);

	/* NULL: the backing reserves nothing (its memory is allocated on
	 * first write, and a freed object's whole pages are given back).
	 * Else: makes [from, upto) of every region of chunk `no`, mapped at
	 * `base`, safe to write (no fault for lack of space), and keeps it
	 * so (the zone then zeroes freed objects without giving pages back).
	 * On failure the backing has done what it does when out of space
	 * (a process's own file gives back what it took of [from, upto); a
	 * file shared by a process tree keeps it, since `from` is this
	 * process's mark and another may live above it), and -1 with errno
	 * (ENOSPC, ENOMEM, EFBIG...). */
	int (*reserve)(void *ctx, unsigned no, char *base, size_t span, size_t from, size_t upto);

	/* With `reserve`: makes [0, upto) of region `region` of chunk `no`,
	 * mapped at `base`, safe to write, as `reserve` does for every
	 * region -- for an owned slot's region and its mirror, reserved when
	 * the slot is first claimed (pcpu/worker.h; `reserve` leaves
	 * unclaimed owned slots out). -1 with errno on failure. */
	int (*reserve_region)(void *ctx, unsigned no, char *base, uint32_t region, size_t upto);

	/* Chunk `no` is in use at `base` (mapped, header written): once per
	 * chunk when attached and when the zone grows. May be NULL. */
	void (*chunk_added)(void *ctx, unsigned no, char *base);

	/* The backing is sparse: the first extent at or after `off` of chunk
	 * `no` that may hold data, as [*data, *hole) (offsets in the chunk,
	 * *hole <= span). Returns 1 with the extent, 0 if nothing after
	 * `off` holds data (it all reads zero), -1 if it cannot tell (the
	 * caller then treats everything from `off` as data). */
	int (*extent)(void *ctx, unsigned no, size_t off, size_t span, size_t *data, size_t *hole);

	/* Reads `len` bytes at `off` of chunk `no` without allocating
	 * backing memory (a read fault on a hole of a shared mapping may).
	 * 0, or -1 if it could not read them all. */
	int (*read)(void *ctx, unsigned no, size_t off, void *buf, size_t len);

	/* The zone is done with `ctx` (destroyed, or the attach failed
	 * after it took it). May be NULL. */
	void (*release)(void *ctx);
};

/* Attaches `backing` (with its `ctx`) to a zone that has no live object:
 * every chunk it has is mapped by the backing (and its first page
 * reserved, if the backing reserves) and starts afresh from the backing's
 * zeros; every chunk it grows likewise. Returns 0 (the zone calls
 * backing->release(ctx) when destroyed), or -1 with errno EBUSY (live
 * objects, or a backing already attached), EINVAL, or the backing's; on
 * failure the zone stays private and usable and ctx is the caller's. A
 * fork() child leaves the backing: zone_shared.c's fork handlers give it a
 * private copy of every chunk at the same addresses. Thread-safe. */
PCPU_PRIVATE int pcpu__zone_attach_backing(struct pcpu_zone *zone,
					   const struct pcpu_zone_backing *backing, void *ctx);

/* ---- tree zones (zone_tree.c, zone_join.c) ------------------------------ */

/*
 * Zones shared by a process tree (a shared registry's: pcpu/segment.h,
 * PCPU_SEGMENT_SHARED_TREE). A backed zone normally belongs to one
 * process, and a fork() child leaves it. A tree zone stays with every
 * child: all the processes forked from its creator write the same chunks,
 * and all of them allocate from it. Their allocations are one bump
 * frontier in shared memory, under one process-shared lock, and are never
 * freed before the zone's creator destroys it: another process may hold
 * any object's address (its own mapping of the same chunk), so no process
 * can know an object is unused. Chunks made by one process are mapped by
 * the others when they first need them (an allocation, an adopted object).
 *
 * The lock is robust: a process killed while holding it leaves it to the
 * next taker, which runs the backing's repair callback before going on.
 */
struct pcpu_zone_tree {
	pthread_mutex_t lock; /* process-shared, robust, recursive */
	uint64_t nchunks;     /* chunks made (by any process) */
	uint64_t frontier;    /* granules handed out in chunk nchunks - 1 */
	uint64_t deaths;      /* lock holders that died holding it */
};

/* Initialises a process-shared, robust mutex of `type` at m (in shared
 * memory), as the tree's own lock is made. 0, or an error number (a libc
 * without robust process-shared mutexes). */
PCPU_PRIVATE int pcpu__shared_mutex_init(pthread_mutex_t *m, int type);

/* Sets up `tree` in shared memory (zeroed): its lock. 0, or -1 with errno
 * (what pthread_mutexattr_* said: a libc without robust process-shared
 * mutexes). */
PCPU_PRIVATE int pcpu__zone_tree_init(struct pcpu_zone_tree *tree);

/* Makes a zone with a backing (pcpu__zone_attach_backing) and no live
 * object a tree zone over `tree` (which must outlive it, and whose
 * chunk 0 is the zone's first chunk). `repair(ctx)`, called with the lock
 * held when a taker finds its holder died, makes the backing's own shared
 * state consistent (the zone's is: it bumps the frontier before it hands
 * an object out, so a death leaks at most that object). 0, or -1 with
 * errno EBUSY (live objects, or a tree zone already, or a thread holds an
 * owned slot: pcpu/worker.h) or EINVAL (no backing). Thread-safe. */
PCPU_PRIVATE int pcpu__zone_make_tree(struct pcpu_zone *zone, struct pcpu_zone_tree *tree,
				      void (*repair)(void *ctx), void *ctx);

/* Makes a new zone (no object, no backing: what pcpu_zone_create() or a
 * new registry gives) a tree zone of a tree it was not forked from: the
 * zone of a program exec()ed by one of the tree's processes, joining it
 * (src/core/zone_join.c says why this is not attach then make_tree). Its
 * chunk 0 becomes the tree's chunk 0 through `backing` (with its `ctx`),
 * mapped as it is -- header and objects untouched -- and `tree` (in the
 * backing's shared memory, outliving the zone) its shared state; the
 * backing's `repair(repair_ctx)` as for pcpu__zone_make_tree(). The zone
 * then allocates from the tree's frontier and adopts the tree's objects
 * (pcpu__zone_tree_adopt) like any process of the tree. 0 (the zone calls
 * backing->release(ctx) when destroyed), or -1 with errno: EBUSY (objects,
 * chunks or a backing already, or a thread holds an owned slot:
 * pcpu/worker.h), EINVAL (NULL arguments, or the backing's chunk 0 is not
 * a chunk: no header there), or the mapping's; on failure the zone stays
 * private and usable and ctx is the caller's. Thread-safe. */
PCPU_PRIVATE int pcpu__zone_join_tree(struct pcpu_zone *zone,
				      const struct pcpu_zone_backing *backing, void *ctx,
				      struct pcpu_zone_tree *tree, void (*repair)(void *ctx),
				      void *repair_ctx);

/* Whether `zone` is a tree zone (NULL: no). */
PCPU_PRIVATE int pcpu__zone_is_tree(const struct pcpu_zone *zone);

/* Takes the tree's lock (recursive: a holder may take it again); for a zone
 * that is not a tree zone, or NULL, does nothing. Lock order: the tree
 * lock before any zone lock (pcpu_zone_alloc takes it first too). 0, or -1
 * with errno (ENOTRECOVERABLE: a repair failed before; EAGAIN: too many
 * recursive holds). */
PCPU_PRIVATE int pcpu__zone_tree_lock(struct pcpu_zone *zone);
PCPU_PRIVATE void pcpu__zone_tree_unlock(struct pcpu_zone *zone);

/* A tree zone's object that another process of the tree allocated: its
 * address in this process (chunk `no` mapped here if it was not), known to
 * this process's books as live (`size` bytes) from now on. NULL with errno
 * EINVAL (no such chunk, or past the frontier) or the mapping's
 * (ENOMEM...). Under the tree lock. */
PCPU_PRIVATE void *pcpu__zone_tree_adopt(struct pcpu_zone *zone, unsigned no, uint64_t off,
					 size_t size);

/* Where an object of `zone` lies: its chunk's number (a backed zone's
 * chunk `no` is its backing's chunk `no`: a segment file's) and its offset
 * in the chunk's slot regions. 0, or -1 with errno EINVAL if `obj` is in
 * none of the zone's chunks. For a sparse histogram's groups in a
 * published segment (src/stats/histogram_sparse.c), whose readers find
 * them by place. Thread-safe (the zone's lock); O(chunks). */
PCPU_PRIVATE int pcpu__zone_locate(struct pcpu_zone *zone, const void *obj, unsigned *no,
				   uint64_t *off);

/* ---- owned slots (worker.c) --------------------------------------------- */

/* Whether a reserving backing (src/segment/backing.c) must make slot
 * `slot`'s region and its mirror safe to write and read: a CPU slot that a
 * thread's index or a fallback add can name (the slot walk's CPU slots,
 * src/core/slot_walk.c: slot 0, the present CPUs and mm_cid's range; every
 * CPU slot with PCPU_SLOT_WALK=all), or an owned slot some thread is
 * claiming or has claimed (never cleared). A possible CPU that is not
 * present, and an unclaimed owned slot, cost nothing.
 * Async-signal-safe (a load). */
PCPU_PRIVATE int pcpu__slot_needs_memory(uint32_t slot);

/* The CPU slots that can hold a value (the slot walk's, ascending): their
 * number, and in *list the slot numbers, or NULL when every CPU slot is
 * walked (then they are 0 .. n - 1). Fixed once pcpu_init() ran. Readers
 * of memory shared through a reserving backing read only these slots'
 * copies: the others' pages are holes of the file, which a read through
 * the mapping would allocate (and a full file system answer with SIGBUS).
 * Async-signal-safe (loads). */
PCPU_PRIVATE uint32_t pcpu__cpu_slots_walked(const uint16_t **list);

/* How many owned slots are held now (a hint: claims may come and go): a
 * shared registry is refused while any is, before anything changes.
 * Thread-safe; not async-signal-safe (a mutex). */
PCPU_PRIVATE uint32_t pcpu__worker_claims_held(void);

/* ---- flows tables published in a segment (flows.c) --------------------- */

struct pcpu_flows;
struct pcpu_flows_attr;

/* pcpu_flows_create()'s checks of its arguments alone, and the flows' fork()
 * handlers registered (call it holding no lock: pcpu__fork_register(); a
 * pcpu__flows_create_shared() under a lock then registers nothing): 0, or
 * -1 with errno EINVAL or E2BIG (pcpu/flows.h says when), ENOMEM.
 * Thread-safe; not async-signal-safe. */
PCPU_PRIVATE int pcpu__flows_check(size_t nflows, unsigned ncounters,
				   const struct pcpu_flows_attr *attr);

/* pcpu_flows_create() whose shared words are `words`: words_len bytes (at
 * least nflows x ncounters x 8) of a MAP_SHARED mapping of a file, zero,
 * whose pages are allocated (a published segment's, src/segment/flows.c).
 * The object owns the mapping from then on (pcpu_flows_destroy() unmaps
 * it); on failure (NULL with errno as pcpu_flows_create(), or EINVAL for
 * NULL words or a short length) it stays the caller's. pcpu_flows_destroy()
 * calls release(ctx) first, before it unmaps the words, unless
 * pcpu__flows_detach() came before. A fork() child makes the words a
 * private copy at the same address and never calls release: nothing the
 * child adds reaches the file. Thread-safe; not async-signal-safe. */
PCPU_PRIVATE struct pcpu_flows *pcpu__flows_create_shared(size_t nflows, unsigned ncounters,
							  const struct pcpu_flows_attr *attr,
							  void *words, size_t words_len,
							  void (*release)(void *ctx), void *ctx);

/* Forgets the release callback of such an object (its segment is being
 * freed first): pcpu_flows_destroy() then only unmaps. Thread-safe. */
PCPU_PRIVATE void pcpu__flows_detach(struct pcpu_flows *f);

/* ---- counter words (counter.c, counter_double.c) ------------------------ */

/* Makes counter c read `v` (modulo 2^64) and returns the value it read
 * before: an offset, added atomically to slot 0's mirror word, not a store
 * into the slots, which their threads write without atomics (counter.c).
 * Serialised with every other set and reset of c (a striped lock), so that
 * two sets cannot both apply. Adders are never blocked; an add concurrent
 * with the set may land before or after it. pcpu_counter_fetch_and_zero()
 * is pcpu__counter_set(c, 0); a gauge's set is this on its counter.
 * Thread-safe; not async-signal-safe. */
PCPU_PRIVATE uint64_t pcpu__counter_set(struct pcpu_counter *c, uint64_t v);

/* Counter words holding doubles: the statistics layer's values with
 * fractions (counter_double.c says how). */

/* Adds v to the double in slot 0's mirror word of `w` (compare-and-swap).
 * Thread-safe; async-signal-safe. */
PCPU_PRIVATE void pcpu__counter_double_add_shared(struct pcpu_counter *w, double v);
/* Stores v there, returns the double it held. Thread-safe;
 * async-signal-safe. */
PCPU_PRIVATE double pcpu__counter_double_exchange(struct pcpu_counter *w, double v);
/* Adds v to the calling thread's slot's double of `w` (an rseq
 * compare-and-store, else a compare-and-swap on the mirror word of its
 * fallback slot). Thread-safe; async-signal-safe. */
PCPU_PRIVATE void pcpu__counter_double_add(struct pcpu_counter *w, double v);
/* The per-slot doubles of `w` summed, each slot's word and mirror word
 * first. Thread-safe; async-signal-safe. Cost: a walk of the slots. */
PCPU_PRIVATE double pcpu__counter_double_sum(struct pcpu_counter *w);
/* Makes every finite slot's double of `w` read 0 (an offset in its mirror
 * word). Thread-safe; async-signal-safe. */
PCPU_PRIVATE void pcpu__counter_double_reset(struct pcpu_counter *w);
/* Sets a value with fractions, words c[0], c[1] (by offsets, as
 * pcpu__counter_set()) and c[2]'s residue (stored), under one striped
 * lock: two sets never mix. Thread-safe; not async-signal-safe. */
PCPU_PRIVATE void pcpu__counter_set_fraction(struct pcpu_counter *c, uint64_t whole,
					     uint64_t nanos, double residue);
/* A histogram pair's add (n to pair[0], v to pair[1]) that refuses, with
 * 1, where the sum word it would add to (the calling thread's slot's, or
 * its fallback slot's mirror) already holds more than `bound` in
 * magnitude; 0 once added. Thread-safe; async-signal-safe. */
PCPU_PRIVATE int pcpu__counter_add_pair_bounded(struct pcpu_counter *pair, int64_t n, int64_t v,
						uint64_t bound);

/* ---- mirror arithmetic, on words copied from a segment file ------------- */

/* Every 8-byte word of a zone object has, per slot, its own word and a
 * mirror word at the same offset in the slot's mirror region; regions
 * nslots .. 2*nslots-1 of a chunk are the mirrors of slots 0 ..
 * (src/core/zone_mirror.h has the live words' side). The segment reader
 * reads a segment file's chunks, which have the same layout, with these
 * two: pure arithmetic, usable on a copy. */

/* The slot whose value region `region` of a chunk holds. */
static inline uint32_t pcpu__mirror_region_slot(uint64_t region, uint32_t nslots)
{
	return (uint32_t)(region % nslots);
}

/* A slot's value from its word and its mirror word (0 where the mirror is
 * not in use): their sum, modulo 2^64, as every fetch defines it. */
static inline uint64_t pcpu__slot_sum(uint64_t word, uint64_t mirror_word)
{
	return word + mirror_word;
}

/* ---- torn copies ---------------------------------------------------------- */

/*
 * In memory a slot's word is never half-written (src/core/torn64.h): every
 * load of it is one single-copy atomic load. What can still tear is a copy
 * of the word made 32 bits at a time: a pread() of a segment file (the
 * kernel's copy) on a target where PCPU__TORN64 is 1 (the target's arch
 * header says, pcpu/arch/<arch>.h; pcpu/arch/generic.h for a target
 * without one), whose two halves may come from the two sides of a carry.
 * The segment reader therefore copies a run three times and keeps each
 * word from the middle copy when it is settled (pcpu__settled(): the
 * three copies' high halves agree, and the middle one lies between the
 * other two), reading it again while it is not (PCPU__SETTLE_MAX;
 * src/segment/reader_input.c). A word still changing after
 * PCPU__SETTLE_MAX more reads fails the snapshot's attempt (EAGAIN): a
 * value that may be torn is never returned. Where PCPU__TORN64 is 0 the
 * reader copies once.
 *
 * Why both conditions: equal high halves alone prove nothing about a word
 * that goes back and forth across a multiple of 2^32 (a gauge around 0, a
 * counter adding +1 and -1 at 2^32). Its middle copy can take its low half
 * from one side and its high half from the other, as 2^32 - 1 -> 2^32 ->
 * 2^32 - 1 copied low half first reads 0, while the first and third copies
 * (2^32 - 1) have the same high half as the torn one. Issue 51's rule let
 * exactly that through: the ARMv7 machine's carry workload read a counter
 * of 2^32 - 1 as 0 in 2 of 5 boots. A torn copy is 2^32 x k away from
 * the values the word held, so it also lies outside [first, third] unless
 * those copies are torn alike; what is kept is a value between two copies
 * (for a counter: between two values it held, never a reset or a spike).
 */

/* Reads a word whose high half changes at every read at most this many
 * times more; then the attempt fails (EAGAIN) and the snapshot tries
 * again (src/segment/reader_snapshot.c). */
#define PCPU__SETTLE_MAX 64

/* Three reads a, b, c of one word, in that order, settle on b: their high
 * halves agree and b lies between a and c, in the direction the word moved
 * from a to c (modulo 2^64: a gauge's -1 -> 0 moves by +1). */
static inline int pcpu__settled(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t moved = c - a;

	if (((a ^ b) | (b ^ c)) >> 32 != 0)
		return 0;
	return (int64_t)moved >= 0 ? b - a <= moved : a - b <= a - c;
}

/* ---- object caches (objcache.c) ----------------------------------------- */

/* How an object cache's counters get into a registry without objcache.c
 * knowing registries (objcache beside the counters, below the statistics
 * layer). pcpu_objcache_desc.registry names a registry; the statistics
 * layer, which owns registries, installs these operations
 * (src/stats/objcache_stats.c) when the first registry is created -- a
 * description can only name a registry that exists, so they are always
 * installed by the time one is used. objcache.c calls through them and
 * includes nothing of the statistics layer. */
struct pcpu__objcache_stats_ops {
	/* The cache's PCPU_OBJCACHE_NSTATS counters (indexed by enum
	 * pcpu_objcache_stat), allocated by `reg` and registered there with
	 * label cache=`name` (families pcpu_objcache_*). NULL with errno
	 * (EINVAL: name not a valid label value; EEXIST: that name is
	 * registered already; ENOMEM). */
	struct pcpu_counter *(*add)(struct pcpu_registry *reg, const char *name);
	/* Unregisters and frees what add() returned. */
	int (*remove)(struct pcpu_registry *reg, struct pcpu_counter *stats);
};

/* Installs the operations (the statistics layer; idempotent, thread-safe:
 * one atomic store of a pointer to constant operations). */
PCPU_PRIVATE void pcpu__objcache_set_stats_ops(const struct pcpu__objcache_stats_ops *ops);

#endif /* PCPU_CORE_H */
