/* SPDX-License-Identifier: MIT */
/*
 * objcache.c: per-CPU object caches (pcpu/objcache.h) -- the slow paths,
 * the depot, the backing store, collecting, creation and destruction. The
 * fast paths (one rseq section on the slot's cache) are inline in the
 * header.
 *
 * Where an object can be, exactly one of:
 *   held       by a thread, between its get and its put;
 *   slot s     in ptr[0 .. count) of slot s's copy (rseq: changed only by
 *              sections that commit on slot s while its mode word is 0);
 *   locked s   in slot s's mirror copy (pcpu/zone.h), changed only under
 *              locks[s]: threads that cannot run the sections;
 *   depot      in depot[0 .. depot_n), under depot_lock;
 *   in flight  in a thread's private buffer, between leaving one of those
 *              places (a committed section, or under a lock) and entering
 *              another;
 * and every object in existence (nobjects, the OBJECTS counter) is in one.
 * The sections' commit is the count's store, so a section that aborts moved
 * nothing; an object copied out of a slot by a section is the caller's only
 * once the section commits.
 *
 * Collecting a slot that other threads' sections may commit on: set the
 * slot's mode word (every slot's copy), then membarrier(PRIVATE_EXPEDITED_
 * RSEQ) (src/core/percpu_sync.c explains what it guarantees): afterwards no section
 * commits on any slot (each compares the mode inside the section), so
 * ptr[] and count are ours until the mode is cleared. One collector at a
 * time (collect_lock), as a second would clear the modes under the first.
 * If membarrier stopped working since the creation, the barrier is the CPU
 * walk of src/core/percpu_sync.c, and the collector leaves the mode words set for good:
 * the cache is locked from then on (`locked`), so later collections need no
 * barrier. If the walk fails too, the slots are left alone (their objects
 * stay cached for their slots' gets) and drain says so (errno).
 * pcpu_objcache_destroy() needs no barrier at all: its caller guarantees
 * that no other thread uses the cache, so no section can be in flight.
 *
 * Locks, in the order they nest: caches_lock (the list of caches, for
 * fork) -> collect_lock -> locks[s] -> depot_lock. No other pcpu lock is
 * taken while one of these is held (counter adds are lock-free), so the
 * fork handlers may run at any rank.
 */
#include <stdint.h>
#include <pcpu/objcache.h>

#include "core.h"
#include "percpu_sync_internal.h"
#include "rseq_internal.h"
#include "slot_walk.h"
#include "zone_internal.h"
#include "zone_mirror.h"

#include <pthread.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A slot is a per-CPU stack (pcpu/objcache.h): the same layout. */
_Static_assert(sizeof(struct pcpu__objcache_slot) == sizeof(struct pcpu_rseq_stack), "slot size");
_Static_assert(offsetof(struct pcpu__objcache_slot, mode) ==
		       offsetof(struct pcpu_rseq_stack, gate), "gate");
_Static_assert(offsetof(struct pcpu__objcache_slot, count) ==
		       offsetof(struct pcpu_rseq_stack, count), "count");
_Static_assert(offsetof(struct pcpu__objcache_slot, cap) ==
		       offsetof(struct pcpu_rseq_stack, cap), "cap");
_Static_assert(offsetof(struct pcpu__objcache_slot, stats) ==
		       offsetof(struct pcpu_rseq_stack, user), "user words");

#define DEFAULT_CAPACITY 64
#define MAX_CAPACITY 1024
#define DEFAULT_ALIGN 16
#define MAX_ALIGN 4096
/* The largest object: 1 TiB, or on a 32-bit target half its address space. */
#if SIZE_MAX > 0xffffffffu
#define MAX_SIZE ((size_t)1 << 40)
#else
#define MAX_SIZE ((size_t)1 << 31)
#endif
#define MAX_BATCH (MAX_CAPACITY / 2)

struct slot_lock {
	pthread_mutex_t m;
} __attribute__((aligned(64)));

struct objcache_impl {
	pcpu_objcache_t *handle;
	size_t size, align, off; /* off: bytes before the object (its header) */
	int64_t cap, batch;
	size_t limit;
	pcpu_objcache_ctor_fn *ctor;
	pcpu_objcache_dtor_fn *dtor;
	pcpu_objcache_moved_fn *moved;
	void *arg;
	int percpu;
	int locked;  /* per-CPU no more: every mode word set for good */
	uint32_t nslots;
	struct pcpu_counter *stats;
	struct pcpu_registry *reg; /* stats registered there, or NULL */
	const struct pcpu__objcache_stats_ops *stats_ops; /* reg's (core.h) */
	struct slot_lock *locks;   /* nslots: the locked caches */
	struct objcache_impl *next, *prev; /* all caches (fork) */
	pthread_mutex_t collect_lock;
	/* The depot and the limit, on their own line: every miss takes it. */
	pthread_mutex_t depot_lock __attribute__((aligned(64)));
	void **depot;
	size_t depot_n, depot_cap;
	size_t nobjects; /* in existence: constructed and not yet destructed */
};

static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static struct objcache_impl *caches;
static int fork_registered;

static struct objcache_impl *impl_of(pcpu_objcache_t *c)
{
	return (struct objcache_impl *)c->pcpu__s.impl;
}

static void count(struct objcache_impl *o, enum pcpu_objcache_stat which, int64_t v)
{
	pcpu_counter_add(o->stats + which, v);
}

/* One event, by a thread of a locked cache or not: the locked caches'
 * threads cannot run rseq sections, so theirs go to the counter's atomic
 * path at once, not after a failed attempt. */
static void count_one(struct objcache_impl *o, enum pcpu_objcache_stat which, int locked)
{
	if (locked)
		pcpu_counter_add_atomic(o->stats + which, 1);
	else
		pcpu_counter_add(o->stats + which, 1);
}

/* Slot s's locked cache: its copy in the mirror region. */
static struct pcpu__objcache_slot *locked_slot(struct objcache_impl *o, unsigned s)
{
	return (struct pcpu__objcache_slot *)pcpu__mirror_ptr(o->handle, o->nslots, s);
}

/* ---- fork: every cache's locks held across fork() --------------------------- */

/* The walked CPU slots' locks only: no other slot's lock is ever taken
 * (a locked get or put uses pcpu_fallback_slot(), a walked slot), and
 * ThreadSanitizer's deadlock detector holds at most 64 locks per thread,
 * which a cache's 258 locks at PCPU_NSLOTS=256 overflowed. */
static void fork_prepare(void)
{
	struct objcache_impl *o;
	uint32_t s;

	pthread_mutex_lock(&caches_lock);
	for (o = caches; o; o = o->next) {
		pthread_mutex_lock(&o->collect_lock);
		PCPU_CPU_SLOT_WALK(i, s)
			pthread_mutex_lock(&o->locks[s].m);
		pthread_mutex_lock(&o->depot_lock);
	}
}

static void fork_release(void)
{
	struct objcache_impl *o;
	uint32_t s;

	for (o = caches; o; o = o->next) {
		pthread_mutex_unlock(&o->depot_lock);
		PCPU_CPU_SLOT_WALK(i, s)
			pthread_mutex_unlock(&o->locks[s].m);
		pthread_mutex_unlock(&o->collect_lock);
	}
	pthread_mutex_unlock(&caches_lock);
}

/* ---- the backing store ------------------------------------------------------ */

/* A new object, constructed, or NULL with *err set. */
static void *backing_alloc(struct objcache_impl *o, int *err)
{
	void *mem, *obj;
	int rc;

	if (posix_memalign(&mem, o->off, o->off + o->size) != 0) {
		*err = ENOMEM;
		return NULL;
	}
	obj = (char *)mem + o->off;
	pcpu__objcache_hdr_of(obj)->slot = PCPU__OBJCACHE_NO_SLOT;
	pcpu__objcache_hdr_of(obj)->reserved = 0;
	if (o->ctor) {
		int saved = errno;

		errno = 0;
		rc = o->ctor(obj, o->arg);
		if (rc != 0) {
			/* An errno value; or, read POSIX-style, -1 (any
			 * negative value) with errno set (pcpu/objcache.h). */
			*err = rc > 0 ? rc : errno > 0 ? errno : ECANCELED;
			free(mem);
			return NULL;
		}
		errno = saved;
	}
	return obj;
}

/* Destructs and frees n objects that left every place (in flight). */
static void backing_free(struct objcache_impl *o, void *const *objs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (o->dtor)
			o->dtor(objs[i], o->arg);
		free((char *)objs[i] - o->off);
	}
	if (n) {
		pthread_mutex_lock(&o->depot_lock);
		o->nobjects -= n;
		pthread_mutex_unlock(&o->depot_lock);
		count(o, PCPU_OBJCACHE_OBJECTS, -(int64_t)n);
	}
}

/* ---- the depot ---------------------------------------------------------------- */

/* Room for n more objects in the depot; under depot_lock. */
static int depot_reserve(struct objcache_impl *o, size_t n)
{
	size_t cap;
	void **d;

	if (o->depot_n + n <= o->depot_cap)
		return 0;
	cap = o->depot_cap ? o->depot_cap * 2 : 256;
	while (cap < o->depot_n + n)
		cap *= 2;
	d = realloc(o->depot, cap * sizeof(*d));
	if (!d)
		return -1;
	o->depot = d;
	o->depot_cap = cap;
	return 0;
}

/* n objects in flight into the depot; if it cannot grow (out of memory),
 * back to the backing store instead: a put never fails. */
static void depot_put(struct objcache_impl *o, void *const *objs, size_t n)
{
	if (!n)
		return;
	pthread_mutex_lock(&o->depot_lock);
	if (depot_reserve(o, n) == 0) {
		memcpy(o->depot + o->depot_n, objs, n * sizeof(*objs));
		o->depot_n += n;
		n = 0;
	}
	pthread_mutex_unlock(&o->depot_lock);
	backing_free(o, objs, n);
}

static int collect(struct objcache_impl *o, int quiescent);

/* Up to `want` objects for a get that found its cache empty: a batch from
 * the depot, else new ones within the limit, else (at the limit) whatever
 * collecting every slot's cache yields. Returns how many (>= 1), or 0 with
 * errno: EAGAIN (limit), ENOMEM or the constructor's error. */
static size_t depot_take(struct objcache_impl *o, void **buf, size_t want)
{
	int collected = 0, err = 0;
	size_t k, made;

	for (;;) {
		pthread_mutex_lock(&o->depot_lock);
		if (o->depot_n) {
			k = o->depot_n < want ? o->depot_n : want;
			o->depot_n -= k;
			memcpy(buf, o->depot + o->depot_n, k * sizeof(*buf));
			pthread_mutex_unlock(&o->depot_lock);
			count(o, PCPU_OBJCACHE_DEPOT_XFERS, 1);
			return k;
		}
		k = want;
		if (o->limit && o->limit - o->nobjects < k)
			k = o->limit - o->nobjects;
		o->nobjects += k; /* reserved: the limit holds under races */
		pthread_mutex_unlock(&o->depot_lock);
		if (k || collected)
			break;
		(void)collect(o, 0);
		collected = 1;
	}
	if (!k) {
		errno = EAGAIN;
		return 0;
	}
	for (made = 0; made < k; made++)
		if (!(buf[made] = backing_alloc(o, &err)))
			break;
	if (made < k) {
		pthread_mutex_lock(&o->depot_lock);
		o->nobjects -= k - made;
		pthread_mutex_unlock(&o->depot_lock);
	}
	if (made)
		count(o, PCPU_OBJCACHE_OBJECTS, (int64_t)made);
	else
		errno = err;
	return made;
}

/* ---- collecting every slot's cache into the depot ------------------------------ */

static void set_modes(struct objcache_impl *o, intptr_t mode)
{
	uint32_t s;

	PCPU_CPU_SLOT_WALK(i, s)
		__atomic_store_n(&pcpu__objcache_slot(o->handle, s)->mode, mode, __ATOMIC_RELEASE);
}

static int is_locked(struct objcache_impl *o)
{
	return __atomic_load_n(&o->locked, __ATOMIC_RELAXED);
}

/* Every cached object into the depot. `quiescent`: the caller guarantees
 * that no other thread uses the cache (destroy), so no section is in
 * flight and none needs stopping. 0, or the errno of a barrier that could
 * not be had (the slots' caches were left alone). */
static int collect(struct objcache_impl *o, int quiescent)
{
	uint32_t s;
	int err = 0;

	pthread_mutex_lock(&o->collect_lock);
	if (o->percpu) {
		/* Once locked, the mode words stay set: no section commits. */
		int stop = !quiescent && !o->locked;

		if (stop) {
			set_modes(o, 1);
			/* Without the barrier a section in flight could still
			 * commit: leave the rseq slots alone then. */
			if (pcpu_sync_barrier() != 0)
				err = errno;
		}
		PCPU_CPU_SLOT_WALK(i, s) {
			struct pcpu__objcache_slot *sl = pcpu__objcache_slot(o->handle, s);

			if (err)
				break;
			int64_t n = __atomic_load_n(&sl->count, __ATOMIC_ACQUIRE);

			depot_put(o, pcpu__objcache_ptrs(sl), (size_t)n);
			__atomic_store_n(&sl->count, 0, __ATOMIC_RELEASE);
		}
		if (stop) {
			if (!err && pcpu_sync_percpu_lost())
				__atomic_store_n(&o->locked, 1, __ATOMIC_RELAXED); /* modes stay */
			else
				set_modes(o, 0);
		}
	}
	PCPU_CPU_SLOT_WALK(i, s) {
		struct pcpu__objcache_slot *ml = locked_slot(o, s);

		pthread_mutex_lock(&o->locks[s].m);
		depot_put(o, pcpu__objcache_ptrs(ml), (size_t)ml->count);
		ml->count = 0;
		pthread_mutex_unlock(&o->locks[s].m);
	}
	pthread_mutex_unlock(&o->collect_lock);
	return err;
}

/* ---- gets and puts ------------------------------------------------------------ */

void pcpu__objcache_handed_out(pcpu_objcache_t *c, void *obj, unsigned slot)
{
	struct objcache_impl *o = impl_of(c);
	struct pcpu__objcache_hdr *h = pcpu__objcache_hdr_of(obj);

	if (h->slot != PCPU__OBJCACHE_NO_SLOT && o->moved)
		o->moved(obj, h->slot, slot, o->arg);
	h->slot = slot;
}

/* What every slow get does once it has the object, got on `slot`
 * (`locked`: by a locked cache). */
static void *got(struct objcache_impl *o, void *obj, unsigned slot, int locked)
{
	count_one(o, PCPU_OBJCACHE_GETS, locked);
	if (pcpu__objcache_hdr_of(obj)->slot != slot)
		pcpu__objcache_handed_out(o->handle, obj, slot);
	return obj;
}

static void put_done(struct objcache_impl *o, uint32_t got_on, unsigned slot, int locked)
{
	count_one(o, PCPU_OBJCACHE_PUTS, locked);
	if (got_on != slot)
		count_one(o, PCPU_OBJCACHE_STRAYS, locked);
}

/* The locked caches: threads that cannot run the sections, and every
 * thread of a cache in locked mode. */
static void *locked_get(struct objcache_impl *o)
{
	unsigned s = pcpu_fallback_slot();
	struct pcpu__objcache_slot *ml = locked_slot(o, s);
	void *buf[MAX_BATCH], *obj = NULL;
	size_t k;

	pthread_mutex_lock(&o->locks[s].m);
	if (ml->count > 0)
		obj = pcpu__objcache_ptrs(ml)[--ml->count];
	pthread_mutex_unlock(&o->locks[s].m);
	if (obj)
		return got(o, obj, s, 1);
	/* Not under the slot's lock: a get at the limit collects, which
	 * takes every slot's lock. */
	count(o, PCPU_OBJCACHE_GET_MISSES, 1);
	k = depot_take(o, buf, (size_t)o->batch);
	if (!k)
		return NULL;
	obj = buf[--k];
	if (k) {
		pthread_mutex_lock(&o->locks[s].m);
		if (ml->count + (int64_t)k <= o->cap) {
			memcpy(pcpu__objcache_ptrs(ml) + ml->count, buf, k * sizeof(*buf));
			ml->count += (int64_t)k;
			k = 0;
		}
		pthread_mutex_unlock(&o->locks[s].m);
		depot_put(o, buf, k);
	}
	return got(o, obj, s, 1);
}

static void locked_put(struct objcache_impl *o, void *obj, uint32_t got_on)
{
	unsigned s = pcpu_fallback_slot();
	struct pcpu__objcache_slot *ml = locked_slot(o, s);
	void *buf[MAX_BATCH];
	size_t k = 0;

	pthread_mutex_lock(&o->locks[s].m);
	if (ml->count >= o->cap) {
		k = (size_t)o->batch;
		ml->count -= (int64_t)k;
		memcpy(buf, pcpu__objcache_ptrs(ml) + ml->count, k * sizeof(*buf));
	}
	pcpu__objcache_ptrs(ml)[ml->count++] = obj;
	pthread_mutex_unlock(&o->locks[s].m);
	if (k) {
		count(o, PCPU_OBJCACHE_PUT_MISSES, 1);
		depot_put(o, buf, k);
		count(o, PCPU_OBJCACHE_DEPOT_XFERS, 1);
	}
	put_done(o, got_on, s, 1);
}

#if PCPU_ARCH_HAVE_RSEQ
/* A get whose slot's cache was empty: a batch from the depot (or new
 * objects); one for the caller, the rest into the slot's cache if it still
 * has room (else back to the depot). */
static void *refill_get(struct objcache_impl *o)
{
	void *buf[MAX_BATCH], *obj;
	size_t k;
	int64_t idx = -1;

	count(o, PCPU_OBJCACHE_GET_MISSES, 1);
	k = depot_take(o, buf, (size_t)o->batch);
	if (!k)
		return NULL;
	obj = buf[--k];
	for (int tries = 0; k && tries < PCPU_RSEQ_MAX_TRIES; tries++) {
		struct pcpu__objcache_slot *sl;
		int rc;

		idx = pcpu__rseq_load_index();
		if (idx < 0)
			break;
		sl = pcpu__objcache_slot(o->handle, (size_t)idx);
		rc = pcpu_rseq_stack_push_many(idx, pcpu__objcache_stack(sl), buf, (int64_t)k);
		if (rc == PCPU_RSEQ_COMMITTED)
			k = 0;
		else if (rc != PCPU_RSEQ_ABORTED)
			break; /* collecting, or no room: the depot keeps them */
	}
	depot_put(o, buf, k);
	if (idx < 0)
		idx = pcpu__rseq_load_index();
	return got(o, obj, idx < 0 ? pcpu_fallback_slot() : (unsigned)idx, 0);
}
#endif

void *pcpu__objcache_get_slow(pcpu_objcache_t *c)
{
	struct objcache_impl *o = impl_of(c);

#if PCPU_ARCH_HAVE_RSEQ
	if (o->percpu && !is_locked(o) && pcpu__thread_prepare() == 0) {
		for (int tries = 0; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
			int64_t idx = pcpu__rseq_load_index();
			struct pcpu__objcache_slot *sl;
			void *obj;
			int rc;

			if (idx < 0)
				break;
			sl = pcpu__objcache_slot(c, (size_t)idx);
			rc = pcpu_rseq_stack_pop(idx, pcpu__objcache_stack(sl), &obj);
			if (rc == PCPU_RSEQ_COMMITTED)
				return got(o, obj, (unsigned)idx, 0);
			if (rc == PCPU_RSEQ_UNFIT)
				return refill_get(o);
			if (rc == PCPU_RSEQ_DIFFERS)
				break; /* collecting: the locked caches meanwhile */
		}
	}
#endif
	return locked_get(o);
}

void pcpu__objcache_put_slow(pcpu_objcache_t *c, void *obj)
{
	struct objcache_impl *o = impl_of(c);
	uint32_t got_on = pcpu__objcache_hdr_of(obj)->slot; /* ours until the commit */

#if PCPU_ARCH_HAVE_RSEQ
	if (o->percpu && !is_locked(o) && pcpu__thread_prepare() == 0) {
		int missed = 0;

		for (int tries = 0; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
			int64_t idx = pcpu__rseq_load_index();
			struct pcpu__objcache_slot *sl;
			void *buf[MAX_BATCH];
			int rc;

			if (idx < 0)
				break;
			sl = pcpu__objcache_slot(c, (size_t)idx);
			rc = pcpu_rseq_stack_push(idx, pcpu__objcache_stack(sl), obj);
			if (rc == PCPU_RSEQ_COMMITTED) {
				put_done(o, got_on, (unsigned)idx, 0);
				return;
			}
			if (rc == PCPU_RSEQ_DIFFERS)
				break;
			if (rc != PCPU_RSEQ_UNFIT)
				continue;
			/* Full: half of it to the depot, then push again. */
			if (!missed++)
				count(o, PCPU_OBJCACHE_PUT_MISSES, 1);
			if (pcpu_rseq_stack_pop_many(idx, pcpu__objcache_stack(sl), buf, o->batch) == 0) {
				depot_put(o, buf, (size_t)o->batch);
				count(o, PCPU_OBJCACHE_DEPOT_XFERS, 1);
			}
		}
	}
#endif
	locked_put(o, obj, got_on);
}

/* ---- creation, statistics, drain, destruction -------------------------------------- */

/* A description naming a registry: the statistics layer's operations
 * (core.h), installed when the first registry was created. */
static const struct pcpu__objcache_stats_ops *stats_ops;

void pcpu__objcache_set_stats_ops(const struct pcpu__objcache_stats_ops *ops)
{
	__atomic_store_n(&stats_ops, ops, __ATOMIC_RELEASE);
}

static int valid_desc(const struct pcpu_objcache_desc *d)
{
	if (!d || d->size == 0 || d->size > MAX_SIZE)
		return 0;
	if (d->align && ((d->align & (d->align - 1)) || d->align > MAX_ALIGN))
		return 0;
	if (d->capacity && (d->capacity < 2 || d->capacity > MAX_CAPACITY))
		return 0;
	return !d->registry || d->name;
}

static void impl_free(struct objcache_impl *o)
{
	if (o->handle)
		(void)pcpu_zone_free(pcpu_default_zone(), o->handle);
	if (o->stats) {
		if (o->reg)
			(void)o->stats_ops->remove(o->reg, o->stats);
		else
			(void)pcpu_counter_free(o->stats);
	}
	if (o->locks)
		for (uint32_t s = 0; s < o->nslots; s++)
			pthread_mutex_destroy(&o->locks[s].m);
	free(o->locks);
	free(o->depot);
	pthread_mutex_destroy(&o->collect_lock);
	pthread_mutex_destroy(&o->depot_lock);
	free(o);
}

pcpu_objcache_t *pcpu_objcache_create(const struct pcpu_objcache_desc *desc)
{
	struct objcache_impl *o;
	uint32_t s;
	pcpu_zone_t *zone;
	int saved = errno, err = ENOMEM;

	if (!valid_desc(desc)) {
		errno = EINVAL;
		return NULL;
	}
	if (pcpu__fork_register(&fork_registered, PCPU_FORK_COUNTER, fork_prepare, fork_release,
			       fork_release) != 0)
		return NULL;
	if (posix_memalign((void **)&o, 64, sizeof(*o)) != 0) {
		errno = ENOMEM;
		return NULL;
	}
	memset(o, 0, sizeof(*o));
	pthread_mutex_init(&o->collect_lock, NULL);
	pthread_mutex_init(&o->depot_lock, NULL);
	o->size = desc->size;
	o->align = desc->align ? desc->align : DEFAULT_ALIGN;
	/* The header (8 bytes) just before the object, the object aligned. */
	o->off = o->align < sizeof(struct pcpu__objcache_hdr) ? sizeof(struct pcpu__objcache_hdr)
							      : o->align;
	o->cap = desc->capacity ? desc->capacity : DEFAULT_CAPACITY;
	o->batch = o->cap / 2;
	o->limit = desc->limit;
	o->ctor = desc->ctor;
	o->dtor = desc->dtor;
	o->moved = desc->moved;
	o->arg = desc->arg;
	o->nslots = pcpu_nslots();
	o->percpu = pcpu_sync_percpu_check() == 0;
	o->locks = calloc(o->nslots, sizeof(*o->locks));
	if (!o->locks)
		goto fail;
	for (uint32_t s = 0; s < o->nslots; s++)
		pthread_mutex_init(&o->locks[s].m, NULL);
	if (desc->registry) {
		/* Installed: the registry exists, so pcpu_registry_create() ran. */
		o->stats_ops = __atomic_load_n(&stats_ops, __ATOMIC_ACQUIRE);
		if (!o->stats_ops) {
			err = EINVAL; /* not a registry */
			goto fail;
		}
		o->stats = o->stats_ops->add(desc->registry, desc->name);
		if (!o->stats) {
			err = errno;
			goto fail;
		}
		o->reg = desc->registry;
	} else if (!(o->stats = pcpu_counter_alloc_array(PCPU_OBJCACHE_NSTATS))) {
		goto fail;
	}
	zone = pcpu_default_zone();
	o->handle = zone ? pcpu_zone_alloc(zone, sizeof(struct pcpu__objcache_slot) +
							 (size_t)o->cap * sizeof(void *), 64)
			 : NULL;
	if (!o->handle)
		goto fail;
	/* The locked caches live in the mirror region: marked used, so that
	 * the zone zeroes it when the object is freed and reused. */
	pcpu_mirror_mark(o->handle);
	/* Every walked slot's copy (slot_walk.c: the slots a thread's index
	 * or fallback can name) carries what its fast path reads, so a get or
	 * put reads nothing but its own slot's line. Other slots' copies are
	 * never touched: they cost no page (and have none that is writable
	 * under strict commit accounting). */
	PCPU_CPU_SLOT_WALK(i, s) {
		struct pcpu__objcache_slot *sl = pcpu__objcache_slot(o->handle, s);

		sl->mode = o->percpu ? 0 : 1; /* locked mode: no section commits */
		sl->cap = o->cap;
		sl->stats = o->stats;
		sl->impl = o;
	}
	pthread_mutex_lock(&caches_lock);
	o->next = caches;
	if (caches)
		caches->prev = o;
	caches = o;
	pthread_mutex_unlock(&caches_lock);
	errno = saved;
	return o->handle;
fail:
	impl_free(o);
	errno = err;
	return NULL;
}

/* Objects cached now (a load of each count), and in the depot. */
static uint64_t cached_now(struct objcache_impl *o, uint64_t *in_depot)
{
	uint32_t s;
	uint64_t n;

	pthread_mutex_lock(&o->depot_lock);
	n = *in_depot = o->depot_n;
	pthread_mutex_unlock(&o->depot_lock);
	PCPU_CPU_SLOT_WALK(i, s) {
		n += (uint64_t)__atomic_load_n(&pcpu__objcache_slot(o->handle, s)->count,
					       __ATOMIC_RELAXED);
		n += (uint64_t)__atomic_load_n(&locked_slot(o, s)->count, __ATOMIC_RELAXED);
	}
	return n;
}

/* Collects, then destructs and frees the depot: the number freed, and in
 * *err what collect() said. */
static size_t drain(struct objcache_impl *o, int quiescent, int *err)
{
	void **all;
	size_t n;

	*err = collect(o, quiescent);
	pthread_mutex_lock(&o->depot_lock);
	all = o->depot;
	n = o->depot_n;
	o->depot = NULL;
	o->depot_n = o->depot_cap = 0;
	pthread_mutex_unlock(&o->depot_lock);
	backing_free(o, all, n);
	free(all);
	return n;
}

size_t pcpu_objcache_drain(pcpu_objcache_t *c)
{
	size_t n;
	int err, saved = errno;

	if (!c) {
		errno = EINVAL;
		return 0;
	}
	n = drain(impl_of(c), 0, &err);
	/* errno says whether the slots were reached (destructors may have
	 * changed it meanwhile). */
	errno = err ? err : saved;
	return n;
}

int pcpu_objcache_destroy(pcpu_objcache_t *c)
{
	struct objcache_impl *o;
	int err;

	if (!c)
		return 0;
	o = impl_of(c);
	(void)drain(o, 1, &err); /* no other thread: no barrier, no error */
	if (o->nobjects != 0) {
		errno = EBUSY; /* held by threads: nothing to free them into */
		return -1;
	}
	pthread_mutex_lock(&caches_lock);
	if (o->prev)
		o->prev->next = o->next;
	else
		caches = o->next;
	if (o->next)
		o->next->prev = o->prev;
	pthread_mutex_unlock(&caches_lock);
	impl_free(o);
	return 0;
}

pcpu_counter_t pcpu_objcache_counter(pcpu_objcache_t *c, enum pcpu_objcache_stat which)
{
	if (!c || (unsigned)which >= PCPU_OBJCACHE_NSTATS) {
		errno = EINVAL;
		return NULL;
	}
	return c->pcpu__s.stats + which;
}

int pcpu_objcache_stats(pcpu_objcache_t *c, struct pcpu_objcache_stats *out)
{
	struct objcache_impl *o;
	uint64_t v[PCPU_OBJCACHE_NSTATS];

	if (!c || !out) {
		errno = EINVAL;
		return -1;
	}
	o = impl_of(c);
	(void)pcpu_counter_fetch_array(o->stats, PCPU_OBJCACHE_NSTATS, v);
	out->gets = v[PCPU_OBJCACHE_GETS];
	out->puts = v[PCPU_OBJCACHE_PUTS];
	out->get_misses = v[PCPU_OBJCACHE_GET_MISSES];
	out->put_misses = v[PCPU_OBJCACHE_PUT_MISSES];
	out->depot_xfers = v[PCPU_OBJCACHE_DEPOT_XFERS];
	out->strays = v[PCPU_OBJCACHE_STRAYS];
	out->local_hits = out->gets - out->get_misses;
	out->objects = (int64_t)v[PCPU_OBJCACHE_OBJECTS];
	out->cached = cached_now(o, &out->in_depot);
	return 0;
}

int pcpu_objcache_is_percpu(const pcpu_objcache_t *c)
{
	struct objcache_impl *o;

	if (!c)
		return 0;
	o = (struct objcache_impl *)c->pcpu__s.impl;
	return o->percpu && !is_locked(o);
}
