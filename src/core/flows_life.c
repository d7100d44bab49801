/* SPDX-License-Identifier: MIT */
/*
 * flows_life.c: counters for millions of flows (pcpu/flows.h) -- creation,
 * destruction, fork(), and the tables whose shared words a published
 * segment holds (pcpu__flows_create_shared(), src/segment/flows.c). The
 * design is at the top of flows.c.
 */
#include "flows_internal.h"
#include "percpu_sync_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct flows_impl *all;
static int fork_registered;

/* ---- fork ------------------------------------------------------------------- */

static void fork_prepare(void)
{
	pthread_mutex_lock(&all_lock);
	for (struct flows_impl *o = all; o; o = o->next) {
		pthread_mutex_lock(&o->op_lock);
		pcpu__flows_hold_drains(o);
	}
}

static void fork_parent(void)
{
	for (struct flows_impl *o = all; o; o = o->next) {
		pcpu__flows_release_drains(o);
		pthread_mutex_unlock(&o->op_lock);
	}
	pthread_mutex_unlock(&all_lock);
}

/* The fork child's copy of words the parent shares with a file (a
 * published table): the same address, private memory holding the values
 * of the moment, so that the child's adds stay in the child (pcpu/flows.h:
 * nothing is shared after fork()) and never reach the parent's file. The
 * copy is made aside and moved over the shared mapping in one mremap();
 * where there is no memory aside for it, piece by piece through a static
 * buffer (the child has one thread), each piece's anonymous mapping
 * placed over the shared one (adjacent pieces merge into one mapping). */
static void words_make_private(struct flows_impl *o)
{
	static uint64_t piece[8192]; /* 64 KiB */
	char *w = (char *)o->pub.pcpu__words;
	void *copy = mmap(NULL, o->words_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);

	o->shared_words = 0;
	o->release = NULL; /* the table's directory entry is the parent's */
	if (copy != MAP_FAILED) {
		memcpy(copy, w, o->words_len);
		if (mremap(copy, o->words_len, o->words_len, MREMAP_MAYMOVE | MREMAP_FIXED, w) !=
		    MAP_FAILED)
			return;
		munmap(copy, o->words_len);
	}
	for (size_t at = 0; at < o->words_len; at += sizeof piece) {
		size_t n = o->words_len - at < sizeof piece ? o->words_len - at : sizeof piece;

		memcpy(piece, w + at, n);
		if (mmap(w + at, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) == MAP_FAILED)
			return; /* out of mappings: the rest stays the file's */
		memcpy(w + at, piece, n);
	}
}

static void fork_child(void)
{
	for (struct flows_impl *o = all; o; o = o->next) {
		uint32_t n = walk_count();

		/* Every drain had ended; a gate still closed is an owner's that
		 * saw `hold` and had not reopened yet (nothing else touched). */
		for (uint32_t i = 0; i < n; i++)
			__atomic_store_n(&stack_of(o, walk_slot(i))->gate, GATE_OPEN, __ATOMIC_RELAXED);
		if (o->shared_words)
			words_make_private(o);
		pcpu__flows_release_drains(o);
		pthread_mutex_unlock(&o->op_lock);
	}
	pthread_mutex_unlock(&all_lock);
}

/* ---- creation, destruction ---------------------------------------------------- */

/* The attributes a caller passed, checked, into *a. 0 or EINVAL. */
static int take_attr(const struct pcpu_flows_attr *attr, struct pcpu_flows_attr *a)
{
	memset(a, 0, sizeof(*a));
	if (!attr)
		return 0;
	if (attr->size < sizeof(*a))
		return EINVAL; /* smaller than the first release's */
	/* A later release's larger struct: what this one does not know must
	 * be zero (it would mean something this release cannot do). */
	for (size_t i = sizeof(*a); i < attr->size; i++)
		if (((const unsigned char *)attr)[i] != 0)
			return EINVAL;
	memcpy(a, attr, sizeof(*a));
	if (a->flags != 0 || a->buffer > PCPU_FLOWS_MAX_BUFFER)
		return EINVAL;
	for (size_t i = 0; i < sizeof(a->reserved) / sizeof(a->reserved[0]); i++)
		if (a->reserved[i] != NULL)
			return EINVAL;
	return 0;
}

/* The checks of a creation: 0, or an errno (EINVAL, E2BIG). */
static int create_check(size_t nflows, unsigned ncounters, const struct pcpu_flows_attr *attr,
			struct pcpu_flows_attr *a)
{
	int err = take_attr(attr, a);

	if (err == 0 && (nflows == 0 || ncounters == 0))
		err = EINVAL;
	if (err)
		return err;
	if (nflows > PCPU_FLOWS_MAX_KEYS / ncounters ||
	    nflows * ncounters > SIZE_MAX / sizeof(uint64_t))
		return E2BIG;
	return 0;
}

/* A new object over the shared words at `words` (words_len bytes of a
 * mapping, zero, which the object owns from then on: destroy unmaps it);
 * NULL with errno, the mapping then still the caller's. */
static struct flows_impl *flows_new(size_t nflows, unsigned ncounters,
				    const struct pcpu_flows_attr *a, uint64_t *words,
				    size_t words_len)
{
	struct flows_impl *o;
	pcpu_zone_t *zone;
	int64_t entries = a->buffer ? (int64_t)a->buffer : PCPU_FLOWS_DEFAULT_BUFFER;
	int err;

	if (pcpu__fork_register(&fork_registered, PCPU_FORK_COUNTER, fork_prepare, fork_parent,
				fork_child) != 0)
		return NULL;
	if (posix_memalign((void **)&o, 64, sizeof(*o)) != 0) {
		errno = ENOMEM;
		return NULL;
	}
	memset(o, 0, sizeof(*o));
	o->nkeys = nflows * ncounters;
	o->cap = entries * WORDS;
	o->words_len = words_len;
	o->pub.pcpu__nflows = nflows;
	o->pub.pcpu__ncounters = ncounters;
	o->pub.pcpu__words = words;
	zone = pcpu_default_zone();
	o->pub.pcpu__buf = zone ? (struct pcpu_rseq_stack *)pcpu_zone_alloc(
				       zone, sizeof(struct pcpu_rseq_stack) + (size_t)o->cap * sizeof(void *), 64)
				 : NULL;
	if (!o->pub.pcpu__buf) {
		err = errno == E2BIG ? E2BIG : ENOMEM;
		free(o);
		errno = err;
		return NULL;
	}
	/* A buffer on the slots a thread's index can be (the walk); every
	 * other slot keeps cap 0 and its page untouched. */
	{
		uint32_t n = walk_count();

		for (uint32_t i = 0; i < n; i++)
			stack_of(o, walk_slot(i))->cap = o->cap;
	}
	pthread_mutex_init(&o->op_lock, NULL);
	return o;
}

/* Links a new object into the list of every object (fork). */
static void flows_link(struct flows_impl *o)
{
	pthread_mutex_lock(&all_lock);
	o->next = all;
	if (all)
		all->prev = o;
	all = o;
	pthread_mutex_unlock(&all_lock);
}

pcpu_flows_t *pcpu_flows_create(size_t nflows, unsigned ncounters,
				const struct pcpu_flows_attr *attr)
{
	struct pcpu_flows_attr a;
	struct flows_impl *o;
	uint64_t *words;
	size_t len;
	int err, saved = errno;

	err = create_check(nflows, ncounters, attr, &a);
	if (err) {
		errno = err;
		return NULL;
	}
	/* The process's membarrier registration now, as refs and locks do
	 * (it may wait for a scheduler grace period): not in the
	 * first flush or bulk read. Refused: the fence walks the CPUs. */
	(void)pcpu_sync_percpu_check();
	len = nflows * ncounters * sizeof(uint64_t);
	/* Zero pages until written: memory follows the keys in use. */
	words = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (words == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	o = flows_new(nflows, ncounters, &a, words, len);
	if (!o) {
		err = errno;
		munmap(words, len);
		errno = err;
		return NULL;
	}
	flows_link(o);
	errno = saved;
	return &o->pub;
}

int pcpu__flows_check(size_t nflows, unsigned ncounters, const struct pcpu_flows_attr *attr)
{
	struct pcpu_flows_attr a;
	int err = create_check(nflows, ncounters, attr, &a);

	if (err) {
		errno = err;
		return -1;
	}
	/* Done now, with no lock held, for the creation that follows under
	 * the registry's lock: the membarrier registration (as in
	 * pcpu_flows_create(): not in the first collection's flush, under
	 * that lock), and the fork handlers (pcpu__fork_register() must not
	 * be called holding a lock). */
	(void)pcpu_sync_percpu_check();
	return pcpu__fork_register(&fork_registered, PCPU_FORK_COUNTER, fork_prepare, fork_parent,
				   fork_child);
}

pcpu_flows_t *pcpu__flows_create_shared(size_t nflows, unsigned ncounters,
					const struct pcpu_flows_attr *attr, void *words,
					size_t words_len, void (*release)(void *ctx), void *ctx)
{
	struct pcpu_flows_attr a;
	struct flows_impl *o;
	int err = create_check(nflows, ncounters, attr, &a);

	if (err == 0 && (!words || words_len < nflows * ncounters * sizeof(uint64_t)))
		err = EINVAL;
	if (err) {
		errno = err;
		return NULL;
	}
	o = flows_new(nflows, ncounters, &a, words, words_len);
	if (!o)
		return NULL;
	o->shared_words = 1;
	o->release = release;
	o->release_ctx = ctx;
	flows_link(o);
	return &o->pub;
}

void pcpu__flows_detach(pcpu_flows_t *f)
{
	pthread_mutex_lock(&all_lock);
	impl_of(f)->release = NULL;
	pthread_mutex_unlock(&all_lock);
}

void pcpu_flows_destroy(pcpu_flows_t *f)
{
	struct flows_impl *o;
	void (*release)(void *ctx);

	if (!f)
		return;
	o = impl_of(f);
	pthread_mutex_lock(&all_lock);
	if (o->prev)
		o->prev->next = o->next;
	else
		all = o->next;
	if (o->next)
		o->next->prev = o->prev;
	release = o->release;
	o->release = NULL;
	pthread_mutex_unlock(&all_lock);
	/* A published table's entry leaves the directory before its words
	 * are unmapped (src/segment/flows.c). */
	if (release)
		release(o->release_ctx);
	(void)pcpu_zone_free(pcpu_default_zone(), o->pub.pcpu__buf);
	munmap(o->pub.pcpu__words, o->words_len);
	pthread_mutex_destroy(&o->op_lock);
	free(o);
}
