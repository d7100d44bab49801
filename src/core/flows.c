/* SPDX-License-Identifier: MIT */
/*
 * flows.c: counters for millions of flows (pcpu/flows.h) -- the add's slow
 * path, drains, flush, reads (creation, destruction and fork: flows_life.c).
 *
 * The memory. One shared uint64_t word per key (flow x ncounters + counter;
 * an anonymous mapping, resident as keys are written), and one zone object
 * whose copy in slot s is slot s's buffer: a per-CPU stack
 * (struct pcpu_rseq_stack, pcpu/percpu_ops.h) of entries, each
 * (key + 1) << 32 | delta in one pointer-size word (two words, key + 1 and
 * delta, on 32-bit targets). The stack's header carries the slot's gate and
 * count; its first user word is the slot's drain sequence (even: no drain
 * runs; odd: one runs). Only the present CPUs' slots (the walk of
 * src/core/slot_walk.h, which is where a thread's rseq index can be) get a
 * capacity; any other slot has cap 0, and an add there goes to the shared
 * word directly.
 *
 * Who writes a slot's buffer. Entries and the count: the push sections on
 * that slot while its gate is 0 (each compares the gate inside the section),
 * and the one thread that owns the slot's drain while the gate is not 0. The
 * gate has three values: 0 open; 1 (GATE_OWNER) closed by a thread running
 * on the slot; 2 (GATE_FLUSH) closed by a flusher from anywhere.
 *
 * Exactly one drainer per closed gate. Two ways to close:
 *  - The owner (an add that found the buffer full) runs
 *    pcpu_rseq_load_cbne_store(idx, &gate, 0, 1) on slot idx. It needs no
 *    fence: a section of another thread on that slot that read gate 0 was
 *    preempted by this one (two threads never run on one slot at once), so
 *    it restarts and reads 1.
 *  - A flusher (one at a time: op_lock) compare-and-swaps 0 -> 2, then
 *    calls pcpu_rseq_fence(), then reads the gate again. The only race is
 *    with an owner's close whose section read 0 before the CAS and stores 1
 *    after it (a plain store over the 2: the CAS is atomic, the section's
 *    load and store are not, against another CPU). The fence settles it:
 *    when it returns, that section has committed, its 1 visible to the
 *    flusher, or will restart and read 2 (DIFFERS). So if the flusher reads
 *    2 after the fence, no owner's close can land any more: it owns the
 *    drain. If it reads anything else, an owner took the slot after the
 *    CAS; the flusher waits for the gate to open and tries again, so that
 *    it always drains the slot itself, under its own closed gate, after
 *    every add that returned before the flush committed.
 * Nobody else writes the gate: a closed gate is reopened only by its
 * drainer (a release store of 0), and both closes need it open.
 *
 * A drain (gate closed: no section commits on the slot): sequence to odd,
 * release fence; the entries added to the shared words, one atomic add per
 * entry, or, where keys repeat in the slot's buffers, first summed by key
 * in a small table (a key's repeated adds become one atomic add; see
 * drain() for the choice); each word prefetched well before its add; the
 * entries zeroed, count 0 (release); sequence to even (release); gate 0
 * (release).
 *
 * Reads. The shared word plus the buffered deltas of the key in every
 * walked slot, between two reads of every slot's sequence (a seqlock
 * reader: acquire loads, the data, an acquire fence, the sequences again).
 * If no sequence changed (and none was odd), no drain moved a delta from a
 * buffer to a word while the read ran, so each delta was seen once: in a
 * buffer or in the word. The sequences are compared as a sum (each only
 * grows, so the sum is unchanged only if each is; on 32-bit targets a
 * sequence wraps after 2^31 drains, which could in theory fake equality).
 * Why the entries are zeroed: on a weakly ordered CPU a reader may see a
 * push's count before its entry (the commit is a plain store after the
 * entry's). It then sees the zero the last drain stored there (ordered
 * before the gate's reopening, which the push's section read: a dependency
 * the CPU keeps) or the new entry, never an entry an earlier drain already
 * added to the word.
 *
 * Holding drains off (bulk reads, a read that retried too often, fork):
 * under op_lock, store `hold` = 1, fence, and wait until every walked
 * slot's gate is 0. An owner checks `hold` after its close and a full
 * fence, and reopens at once if set: with the two fences, either the owner
 * sees `hold` or the holder sees the owner's closed gate and waits for its
 * drain to end (Dekker's pattern). Adds meanwhile still buffer until their
 * buffer is full, then add to the shared words directly.
 *
 * fork(): the prepare handler holds every object's drains off (no buffer
 * is copied half-drained); an owner may have closed a gate and not yet
 * reopened it after seeing `hold` -- it touched nothing else -- so the
 * child opens every gate.
 *
 * Signals: the add is async-signal-safe: a handler whose add meets its own
 * thread's drain finds that slot's gate closed and adds to the shared word;
 * a handler may drain another slot (no lock is taken). Flush and the reads
 * are not (op_lock; waiting for a drain the handler may have interrupted).
 */
#include "flows_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Reads that meet a drain this many times in a row hold drains off. */
#define READ_TRIES 8
/* The drain's table of keys being summed: 64 cells, 1 KiB of stack (a
 * drain may run in a signal handler). */
#define CELL_BITS 6

static uintptr_t seq_load(struct pcpu_rseq_stack *s, int order)
{
	return (uintptr_t)__atomic_load_n(&s->user[0], order);
}

static void seq_store(struct pcpu_rseq_stack *s, uintptr_t v, int order)
{
	__atomic_store_n(&s->user[0], (void *)v, order);
}

/* Entry i of a buffer (relaxed loads: pushes and drains write meanwhile). */
static inline void entry_load(void **p, int64_t i, uint32_t *key, uint32_t *delta)
{
#if WORDS == 1
	uintptr_t e = (uintptr_t)__atomic_load_n(&p[i], __ATOMIC_RELAXED);

	*key = (uint32_t)(e >> 32);
	*delta = (uint32_t)e;
#else
	*key = (uint32_t)(uintptr_t)__atomic_load_n(&p[2 * i], __ATOMIC_RELAXED);
	*delta = (uint32_t)(uintptr_t)__atomic_load_n(&p[2 * i + 1], __ATOMIC_RELAXED);
#endif
}

static void relax(unsigned *spins)
{
	if (++*spins < 64) {
		pcpu__arch_cpu_relax(); /* the arch header's spin-wait hint */
		return;
	}
	*spins = 0;
	sched_yield();
}

/* ---- drains ----------------------------------------------------------------- */

#ifdef PCPU_TEST_FLOWS_DROP
/* A test build that loses a delta now and then: the stress test must see it. */
static unsigned long test_drained;
#endif

struct cell {
	uint64_t sum;
	uint32_t key;
};

/* The sums on their way to the shared words: each waits RING_LEN more
 * before its atomic add, so that the prefetch issued when its key entered
 * the table has brought the word in (an atomic add waits for its line;
 * measured here, 16 in flight halved the cost of adds to 10^6 random
 * words). */
#define RING_LEN 16
struct ring {
	struct cell c[RING_LEN];
	unsigned n;
};

static void add_word(struct flows_impl *o, uint32_t key, uint64_t sum)
{
	__atomic_fetch_add(&o->pub.pcpu__words[key - 1], sum, __ATOMIC_RELAXED);
}

static inline void ring_put(struct flows_impl *o, struct ring *r, struct cell c)
{
	struct cell *slot = &r->c[r->n++ % RING_LEN];

	if (r->n > RING_LEN)
		add_word(o, slot->key, slot->sum);
	*slot = c;
}

static void ring_drain(struct flows_impl *o, struct ring *r)
{
	unsigned first = r->n > RING_LEN ? r->n - RING_LEN : 0;

	for (unsigned i = first; i < r->n; i++)
		add_word(o, r->c[i % RING_LEN].key, r->c[i % RING_LEN].sum);
}

/* Is entry key k one a drain applies? (0: none, never below the count.) */
static inline int drained_key(const struct flows_impl *o, uint32_t k)
{
#ifdef PCPU_TEST_FLOWS_DROP
	if (k && __atomic_add_fetch(&test_drained, 1, __ATOMIC_RELAXED) % 1024 == 0)
		return 0;
#endif
	return k != 0 && k <= o->nkeys;
}

/* The entries summed by key first: a 64-cell table, each sum then waiting
 * in the ring for its word's prefetch. Returns the atomic adds made. */
static int64_t apply_summed(struct flows_impl *o, void **p, int64_t n)
{
	struct cell cells[1u << CELL_BITS];
	struct ring ring;

	memset(cells, 0, sizeof(cells));
	ring.n = 0;
	for (int64_t i = 0; i < n; i++) {
		uint32_t key, delta, h;

		entry_load(p, i, &key, &delta);
		if (!drained_key(o, key))
			continue;
		h = (key * 2654435761u) >> (32 - CELL_BITS);
		if (cells[h].key == key) {
			cells[h].sum += delta;
			continue;
		}
		if (cells[h].key)
			ring_put(o, &ring, cells[h]);
		cells[h].key = key;
		cells[h].sum = delta;
		__builtin_prefetch(&o->pub.pcpu__words[key - 1], 1);
	}
	for (unsigned h = 0; h < (1u << CELL_BITS); h++)
		if (cells[h].key)
			ring_put(o, &ring, cells[h]);
	ring_drain(o, &ring);
	return ring.n;
}

/* Each entry as it is: an atomic add per entry, the word of the entry
 * RING_LEN further prefetched meanwhile. No stores between the atomic adds
 * (each waits for the stores before it): with keys that seldom repeat,
 * cheaper than summing them first (bench/flows.md, "Summing by key"). */
static void apply_each(struct flows_impl *o, void **p, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t key, delta;

		if (i + RING_LEN < n) {
			entry_load(p, i + RING_LEN, &key, &delta);
			if (key != 0 && key <= o->nkeys)
				__builtin_prefetch(&o->pub.pcpu__words[key - 1], 1);
		}
		entry_load(p, i, &key, &delta);
		if (drained_key(o, key))
			add_word(o, key, delta);
	}
}

/* Summing pays where keys repeat in a buffer (a busy flow, a burst) and
 * costs where they do not: a slot sums its drain when its last summed
 * drain merged at least a quarter of its entries (or it never summed
 * one), and tries again every SUM_RETRY drains otherwise. The slot's
 * second user word keeps that: bit 0 "it did not pay", the rest the drains
 * since. Only the slot's drainer reads or writes it. */
#define SUM_RETRY 16

/* Drains slot buffer s, whose gate the caller closed (and owns): see the
 * file comment. Reopens the gate. Async-signal-safe (1.3 KiB of stack). */
static void drain(struct flows_impl *o, struct pcpu_rseq_stack *s)
{
	void **p = pcpu_rseq_stack_ptrs(s);
	uintptr_t seq = seq_load(s, __ATOMIC_RELAXED);
	uintptr_t sum = (uintptr_t)__atomic_load_n(&s->user[1], __ATOMIC_RELAXED);
	int64_t n = __atomic_load_n(&s->count, __ATOMIC_RELAXED) / WORDS;

	seq_store(s, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	if (!(sum & 1) || (sum >> 1) >= SUM_RETRY) {
		int64_t adds = apply_summed(o, p, n);

		sum = adds > n - n / 4;
	} else {
		apply_each(o, p, n);
		sum += 2;
	}
	__atomic_store_n(&s->user[1], (void *)sum, __ATOMIC_RELAXED);
	for (int64_t i = 0; i < n * WORDS; i++)
		__atomic_store_n(&p[i], NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&s->count, 0, __ATOMIC_RELEASE);
	seq_store(s, seq + 2, __ATOMIC_RELEASE);
	__atomic_store_n(&s->gate, GATE_OPEN, __ATOMIC_RELEASE);
}

#if PCPU_ARCH_HAVE_RSEQ
/* An add found slot idx's buffer s full: close its gate from the slot and
 * drain it. PCPU_RSEQ_COMMITTED: drained; ABORTED: the close did not run
 * (retry); DIFFERS: the gate was closed already, or drains are held off
 * (add to the shared word). Async-signal-safe. */
static int owner_drain(struct flows_impl *o, int64_t idx, struct pcpu_rseq_stack *s)
{
	int rc;

	if (__atomic_load_n(&o->hold, __ATOMIC_RELAXED))
		return PCPU_RSEQ_DIFFERS;
	rc = pcpu_rseq_load_cbne_store(idx, &s->gate, GATE_OPEN, GATE_OWNER);
	if (rc != PCPU_RSEQ_COMMITTED)
		return rc;
	/* Dekker's pattern with pcpu__flows_hold_drains(): our close, then their hold. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&o->hold, __ATOMIC_RELAXED)) {
		__atomic_store_n(&s->gate, GATE_OPEN, __ATOMIC_RELEASE);
		return PCPU_RSEQ_DIFFERS;
	}
	drain(o, s);
	return PCPU_RSEQ_COMMITTED;
}
#endif

int pcpu__flows_add_slow(pcpu_flows_t *f, size_t flow, unsigned counter, uint64_t value)
{
	size_t key;

	if (!f || flow >= f->pcpu__nflows || counter >= f->pcpu__ncounters) {
		errno = EINVAL;
		return -1;
	}
	key = flow * f->pcpu__ncounters + counter + 1;
#if PCPU_ARCH_HAVE_RSEQ
	if (value <= 0xffffffffu && pcpu__thread_prepare() == 0) {
		struct flows_impl *o = impl_of(f);
		int drained = 0;

		for (int tries = 0; tries < PCPU_RSEQ_MAX_TRIES; tries++) {
			int64_t idx = pcpu_rseq_index();
			struct pcpu_rseq_stack *s;
			int rc;

			if (idx < 0)
				break;
			s = stack_of(o, (uint32_t)idx);
			rc = pcpu__flows_push(idx, s, (uintptr_t)key, value);
			if (rc == PCPU_RSEQ_COMMITTED)
				return 0;
			if (rc == PCPU_RSEQ_ABORTED)
				continue;
			/* DIFFERS: a drain of this slot runs; UNFIT again after
			 * our drain: others filled it meanwhile; or no buffer
			 * on this slot. The shared word, then. */
			if (rc != PCPU_RSEQ_UNFIT || drained ||
			    __atomic_load_n(&s->cap, __ATOMIC_RELAXED) == 0)
				break;
			rc = owner_drain(o, idx, s);
			if (rc == PCPU_RSEQ_DIFFERS)
				break;
			drained = rc == PCPU_RSEQ_COMMITTED;
		}
	}
#endif
	__atomic_fetch_add(&f->pcpu__words[key - 1], value, __ATOMIC_RELAXED);
	return 0;
}

/* ---- holding drains off ----------------------------------------------------- */

void pcpu__flows_hold_drains(struct flows_impl *o)
{
	uint32_t n = walk_count();

	__atomic_store_n(&o->hold, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (uint32_t i = 0; i < n; i++) {
		struct pcpu_rseq_stack *s = stack_of(o, walk_slot(i));
		unsigned spins = 0;

		while (__atomic_load_n(&s->gate, __ATOMIC_ACQUIRE) != GATE_OPEN)
			relax(&spins);
	}
}

void pcpu__flows_release_drains(struct flows_impl *o)
{
	__atomic_store_n(&o->hold, 0, __ATOMIC_RELEASE);
}

/* ---- flush ------------------------------------------------------------------ */

enum { F_DONE = 0, F_PENDING = 1, F_CLOSED = 2 };

/* Under op_lock. 0, or -1 with errno (the fence was refused). */
static int flush_locked(struct flows_impl *o)
{
	uint32_t n = walk_count();
	uint8_t state[PCPU__SLOT_MAX]; /* per walked slot (at most that many) */
	unsigned spins = 0;
	int left;

	memset(state, F_PENDING, n);
	do {
		int closed = 0;

		left = 0;
		for (uint32_t i = 0; i < n; i++) {
			struct pcpu_rseq_stack *s = stack_of(o, walk_slot(i));
			intptr_t open = GATE_OPEN;

			if (state[i] != F_PENDING)
				continue;
			if (__atomic_load_n(&s->gate, __ATOMIC_ACQUIRE) != GATE_OPEN) {
				left++; /* its owner drains it: then ours */
				continue;
			}
			/* Empty with the gate open: every add that returned
			 * before is in the words (the count's 0 is released
			 * after the drain's adds). */
			if (__atomic_load_n(&s->count, __ATOMIC_ACQUIRE) == 0) {
				state[i] = F_DONE;
				continue;
			}
			if (__atomic_compare_exchange_n(&s->gate, &open, GATE_FLUSH, 0, __ATOMIC_SEQ_CST,
							__ATOMIC_RELAXED)) {
				state[i] = F_CLOSED;
				closed++;
			} else {
				left++;
			}
		}
		if (closed) {
			if (pcpu_rseq_fence() != 0) {
				int err = errno;

				for (uint32_t i = 0; i < n; i++) {
					intptr_t mine = GATE_FLUSH;

					if (state[i] == F_CLOSED)
						(void)__atomic_compare_exchange_n(
							&stack_of(o, walk_slot(i))->gate, &mine, GATE_OPEN, 0,
							__ATOMIC_RELEASE, __ATOMIC_RELAXED);
				}
				errno = err;
				return -1;
			}
			for (uint32_t i = 0; i < n; i++) {
				struct pcpu_rseq_stack *s;

				if (state[i] != F_CLOSED)
					continue;
				s = stack_of(o, walk_slot(i));
				if (__atomic_load_n(&s->gate, __ATOMIC_ACQUIRE) == GATE_FLUSH) {
					drain(o, s);
					state[i] = F_DONE;
				} else {
					state[i] = F_PENDING; /* an owner closed it first */
					left++;
				}
			}
		}
		if (left && !closed)
			relax(&spins);
	} while (left);
	return 0;
}

int pcpu_flows_flush(pcpu_flows_t *f)
{
	struct flows_impl *o;
	int rc, saved = errno;

	if (!f) {
		errno = EINVAL;
		return -1;
	}
	o = impl_of(f);
	pthread_mutex_lock(&o->op_lock);
	rc = flush_locked(o);
	pthread_mutex_unlock(&o->op_lock);
	if (rc == 0)
		errno = saved;
	return rc;
}

/* ---- reads ------------------------------------------------------------------ */

/* Key k's buffered deltas in slot buffer s. */
static uint64_t scan_key(struct pcpu_rseq_stack *s, uint32_t k)
{
	void **p = pcpu_rseq_stack_ptrs(s);
	int64_t n = __atomic_load_n(&s->count, __ATOMIC_ACQUIRE) / WORDS;
	uint64_t v = 0;

	for (int64_t i = 0; i < n; i++) {
		uint32_t key, delta;

		entry_load(p, i, &key, &delta);
		if (key == k)
			v += delta;
	}
	return v;
}

/* One try of an exact read of key k without holding drains off: 1 and the
 * value in *out, or 0 if a drain ran meanwhile. */
static int read_try(struct flows_impl *o, uint32_t k, uint64_t *out)
{
	uint32_t n = walk_count();
	uint64_t seqs = 0, v;

	for (uint32_t i = 0; i < n; i++) {
		uintptr_t q = seq_load(stack_of(o, walk_slot(i)), __ATOMIC_ACQUIRE);

		if (q & 1)
			return 0;
		seqs += q;
	}
	v = __atomic_load_n(&o->pub.pcpu__words[k - 1], __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < n; i++)
		v += scan_key(stack_of(o, walk_slot(i)), k);
#ifndef PCPU_TEST_FLOWS_NO_RECHECK
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		seqs -= seq_load(stack_of(o, walk_slot(i)), __ATOMIC_RELAXED);
	if (seqs != 0)
		return 0;
#endif
	*out = v;
	return 1;
}

uint64_t pcpu_flows_read(pcpu_flows_t *f, size_t flow, unsigned counter)
{
	struct flows_impl *o;
	uint32_t k, n;
	uint64_t v;
	unsigned spins = 0;

	if (!f || flow >= f->pcpu__nflows || counter >= f->pcpu__ncounters) {
		errno = EINVAL;
		return 0;
	}
	o = impl_of(f);
	k = (uint32_t)(flow * f->pcpu__ncounters + counter + 1);
	for (int tries = 0; tries < READ_TRIES; tries++) {
		if (read_try(o, k, &v))
			return v;
		relax(&spins);
	}
	/* Drains keep coming: hold them off for one read. */
	pthread_mutex_lock(&o->op_lock);
	pcpu__flows_hold_drains(o);
	n = walk_count();
	v = __atomic_load_n(&o->pub.pcpu__words[k - 1], __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < n; i++)
		v += scan_key(stack_of(o, walk_slot(i)), k);
	pcpu__flows_release_drains(o);
	pthread_mutex_unlock(&o->op_lock);
	return v;
}

int pcpu_flows_read_array(pcpu_flows_t *f, size_t first, size_t n, uint64_t *out)
{
	struct flows_impl *o;
	size_t k0, nk;
	uint32_t ns;

	if (!f || !out || n == 0 || first >= f->pcpu__nflows || n > f->pcpu__nflows - first) {
		errno = EINVAL;
		return -1;
	}
	o = impl_of(f);
	k0 = first * f->pcpu__ncounters;
	nk = n * f->pcpu__ncounters;
	pthread_mutex_lock(&o->op_lock);
	pcpu__flows_hold_drains(o);
	for (size_t k = 0; k < nk; k++)
		out[k] = __atomic_load_n(&o->pub.pcpu__words[k0 + k], __ATOMIC_RELAXED);
	ns = walk_count();
	for (uint32_t i = 0; i < ns; i++) {
		struct pcpu_rseq_stack *s = stack_of(o, walk_slot(i));
		void **p = pcpu_rseq_stack_ptrs(s);
		int64_t c = __atomic_load_n(&s->count, __ATOMIC_ACQUIRE) / WORDS;

		for (int64_t e = 0; e < c; e++) {
			uint32_t key, delta;

			entry_load(p, e, &key, &delta);
			/* key - 1 - k0 < nk, unsigned: also refuses key 0 */
			if ((size_t)key - 1 - k0 < nk)
				out[(size_t)key - 1 - k0] += delta;
		}
	}
	pcpu__flows_release_drains(o);
	pthread_mutex_unlock(&o->op_lock);
	return 0;
}

size_t pcpu_flows_pending(pcpu_flows_t *f)
{
	struct flows_impl *o;
	uint32_t n;
	size_t sum = 0;

	if (!f) {
		errno = EINVAL;
		return 0;
	}
	o = impl_of(f);
	n = walk_count();
	for (uint32_t i = 0; i < n; i++)
		sum += (size_t)__atomic_load_n(&stack_of(o, walk_slot(i))->count, __ATOMIC_RELAXED) /
		       WORDS;
	return sum;
}

size_t pcpu_flows_nflows(const pcpu_flows_t *f)
{
	return f ? f->pcpu__nflows : 0;
}

unsigned pcpu_flows_ncounters(const pcpu_flows_t *f)
{
	return f ? f->pcpu__ncounters : 0;
}
