/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/flows.h
 * Counters for millions of flows: DPDK's "shared counters with per core
 * buffering" (seed 004), exact and lock-free with rseq.
 *
 * Why: a per-CPU counter costs a word per counter in every CPU slot that
 * writes it. For 10^6 flows x 2 counters that is 16 MB per writing CPU
 * (256 MB with 16 CPUs), and every read walks them all. Here each
 * (flow, counter) has ONE shared 64-bit word, and each CPU slot has a small
 * buffer of recent deltas in front of them:
 *
 *     slot s:  gate | count | cap | seq | entry[0] ... entry[cap-1]
 *              entry = key (flow x ncounters + counter + 1, 32 bits)
 *                      | delta (32 bits)
 *     shared:  word[flow x ncounters + counter]    (8 bytes each)
 *
 * An add is one rseq section on the calling thread's slot: it appends the
 * entry (a per-CPU stack push, pcpu/percpu_ops.h) -- no atomic
 * instruction, no shared cache line. When the slot's buffer is full, the
 * thread that found it full drains it: it closes the slot's gate (no add
 * commits there meanwhile), adds the entries to their shared words with
 * atomic adds (where keys repeat in the buffer, summed by key first: one
 * atomic add per key), empties the buffer and opens the gate. Adds that cannot buffer (no rseq for the thread, a gate closed by a
 * drain, a value of 2^32 or more, an index without a buffer) add to the
 * shared word atomically: exact too.
 *
 * Reads are exact without a flush: pcpu_flows_read() is the shared word
 * plus every slot's buffered deltas of that key, checked against each
 * slot's drain sequence (a drain moving a delta from a buffer to the word
 * while the read runs makes it retry), so a delta is counted once, never
 * twice nor zero times. pcpu_flows_flush() drains every slot's buffer into
 * the shared words, for readers that read the words alone.
 *
 * Memory: 8 bytes per (flow, counter), plus (64 + 8 x buffer) bytes per CPU
 * slot that adds (2,112 bytes with the default 256 entries), in pcpu's
 * default zone: 10^6 flows x 2 counters take 16 MB and 2 KB per writing
 * CPU, whatever the number of possible CPUs (bench/flows.md measures it).
 * A slot's buffer is set up for the slots pcpu's reads walk (the present
 * CPUs, src/core/slot_walk.c); a thread on any other slot (a CPU hot-added
 * after start-up) adds to the shared words directly.
 *
 * Not a consistent snapshot: each read is exact for its key, and the two
 * counters of a flow may be read at different moments (as
 * pcpu_counter_fetch() reads). Values wrap modulo 2^64.
 *
 * fork(): the child gets a copy, buffers included; nothing is shared
 * afterwards (tests/test_flows.c checks it). The fork handlers wait for
 * drains in progress (a few microseconds) so that no buffer is copied
 * half-drained.
 *
 * Two tiers, as for counters (pcpu/counter.h): the add is inline by default
 * (tied to the layout version PCPU_LAYOUT_<n>); a program that defines
 * PCPU_NO_INLINE gets an exported function instead.
 */
#ifndef PCPU_FLOWS_H
#define PCPU_FLOWS_H

#include <pcpu/defs.h>
#include <pcpu/rseq.h>
#include <pcpu/zone.h>
#include <pcpu/percpu_ops.h>
#include <pcpu/counter.h> /* PCPU__INLINE_OP */

#include <stddef.h>
#include <stdint.h>

PCPU_BEGIN_DECLS

/** Entries per slot's buffer when the attributes do not say. */
#define PCPU_FLOWS_DEFAULT_BUFFER 256
/** The largest buffer: 65,536 entries (512 KiB per slot). */
#define PCPU_FLOWS_MAX_BUFFER 65536
/** The most keys (flows x counters) one object holds: 2^32 - 2 (a key is
 * 32 bits in a buffer entry, and 0 is none). */
#define PCPU_FLOWS_MAX_KEYS 0xfffffffeu

/**
 * What pcpu_flows_create() may be told; NULL takes every default.
 * Zero-initialise, set `size` to sizeof(struct pcpu_flows_attr), then set
 * what you need. A later release may add fields at the end: a program built
 * with this one passes its smaller `size` and gets their defaults; one
 * built with a later release passes a larger `size`, and this release
 * refuses it (EINVAL) unless the fields it does not know are zero.
 */
struct pcpu_flows_attr {
	size_t size;        /**< sizeof(struct pcpu_flows_attr) */
	uint32_t buffer;    /**< entries per slot's buffer, 1 ..
				 PCPU_FLOWS_MAX_BUFFER; 0: PCPU_FLOWS_DEFAULT_BUFFER.
				 Larger buffers drain less often and coalesce more
				 adds of a busy flow; reads scan every slot's. */
	uint32_t flags;     /**< 0: none is defined yet */
	void *reserved[4];  /**< NULL (room for later options). A table whose
				 words other processes read is made with
				 pcpu_segment_flows_create() (pcpu/segment.h). */
};

/* The object (private to pcpu): what the inline add reads, on one cache
 * line that only creation writes. The shared part follows it
 * (src/core/flows.c). */
struct pcpu_flows {
	size_t pcpu__nflows;
	uint32_t pcpu__ncounters;
	uint32_t pcpu__reserved;
	struct pcpu_rseq_stack *pcpu__buf; /* slot 0's buffer; slot s's at + s x stride */
	uint64_t *pcpu__words;             /* the shared words */
};
/** A set of flows' counters. Create with pcpu_flows_create(). */
typedef struct pcpu_flows pcpu_flows_t;

/* Out-of-line rest of an add the inline attempt did not commit (buffer
 * full, a drain in progress, no rseq, an argument out of range, a value of
 * 2^32 or more, aborted). Async-signal-safe. */
PCPU_API int pcpu__flows_add_slow(pcpu_flows_t *f, size_t flow, unsigned counter,
				  uint64_t value);

/* One buffer entry pushed on slot idx's buffer: one pointer-size word
 * (key << 32 | delta) where pointers are 64-bit, two (key, delta) where
 * they are 32-bit. Returns the stack operation's result. */
__attribute__((always_inline)) static inline int pcpu__flows_push(int64_t idx,
								   struct pcpu_rseq_stack *s,
								   uintptr_t key, uint64_t delta)
{
#if UINTPTR_MAX > 0xffffffffu
	return pcpu_rseq_stack_push(idx, s, (void *)((key << 32) | (uintptr_t)delta));
#else
	void *e[2];

	e[0] = (void *)key;
	e[1] = (void *)(uintptr_t)delta;
	return pcpu_rseq_stack_push_many(idx, s, e, 2);
#endif
}

/* The inline add, for both tiers (src/core/flows_stable_abi.c). */
__attribute__((always_inline)) static inline int pcpu__flows_add_inline(pcpu_flows_t *f,
									 size_t flow,
									 unsigned counter,
									 uint64_t value)
{
	if (PCPU_LIKELY(flow < f->pcpu__nflows && counter < f->pcpu__ncounters &&
			value <= 0xffffffffu)) {
		int64_t idx = pcpu_rseq_index();

		if (PCPU_LIKELY(idx >= 0)) {
			/* idx >= 0: the shift needs no cast to unsigned (and no
			 * mask of its bits after it). */
			struct pcpu_rseq_stack *s = (struct pcpu_rseq_stack *)(void *)(
				(char *)f->pcpu__buf + ((size_t)idx << PCPU_SLOT_STRIDE_SHIFT));
			uintptr_t key = (uintptr_t)(flow * f->pcpu__ncounters + counter + 1);

			if (PCPU_LIKELY(pcpu__flows_push(idx, s, key, value) == PCPU_RSEQ_COMMITTED))
				return 0;
		}
	}
	return pcpu__flows_add_slow(f, flow, counter, value);
}

#ifdef PCPU_NO_INLINE
/* The stable tier (src/core/flows_stable_abi.c), documented below. */
PCPU_API int pcpu_flows_add(pcpu_flows_t *f, size_t flow, unsigned counter, uint64_t value);
#endif

/**
 * Creates the counters of `nflows` flows with `ncounters` counters each
 * (packets and bytes: 2), all 0. `attr` may be NULL (defaults).
 *
 * Returns the object, or NULL with errno: EINVAL (nflows or ncounters 0;
 * attr with a `size` below this struct's first release, with nonzero
 * fields this release does not know, a buffer above
 * PCPU_FLOWS_MAX_BUFFER, nonzero `flags` or `reserved`), E2BIG (nflows x
 * ncounters above PCPU_FLOWS_MAX_KEYS, or more bytes than the address
 * space has), ENOMEM.
 * Memory: nflows x ncounters x 8 bytes of anonymous memory, resident as
 * flows are added to; (64 + 8 x buffer) bytes per CPU slot in pcpu's
 * default zone (16 + 8 x buffer more on 32-bit targets: an entry is two
 * words there), resident for the present CPUs' slots' first page and for
 * slots that add.
 * Thread-safe; not async-signal-safe. Cost: an mmap, a zone allocation, a
 * store into every present CPU's slot; the process's first flows object
 * (or ref, or lock) registers it with membarrier, which may wait for a
 * scheduler grace period (milliseconds), so that flushes and bulk reads
 * do not.
 */
PCPU_API pcpu_flows_t *pcpu_flows_create(size_t nflows, unsigned ncounters,
					 const struct pcpu_flows_attr *attr);

/**
 * Frees everything. NULL is a no-op. The caller guarantees that no other
 * thread uses `f` meanwhile or afterwards. Not thread-safe (see above); not
 * async-signal-safe. Cost: a munmap and a zone free.
 */
PCPU_API void pcpu_flows_destroy(pcpu_flows_t *f);

/**
 * Adds `value` to counter `counter` of flow `flow`.
 *
 * Returns 0, or -1 with errno EINVAL when flow >= nflows or counter >=
 * ncounters (nothing is added: never a silent add to another key). `f`
 * must be a live object (undefined otherwise, as for a freed counter).
 * Exact in every mode: no add is ever lost or counted twice.
 *
 * Fast path: one rseq section on the calling thread's slot that appends
 * (key, value) to the slot's buffer -- no atomic instruction, no shared
 * cache line, no call. Once per `buffer` adds on a slot, the add that finds
 * the buffer full drains it: an rseq section that closes the slot's gate,
 * a fence, and one atomic add per distinct key buffered. Values of 2^32 or
 * more, threads without rseq (pcpu_rseq_mode() PCPU_RSEQ_FALLBACK, a
 * ThreadSanitizer build), and adds meeting a drain of their slot or a bulk
 * read in progress take an atomic add on the shared word instead.
 * Thread-safe; async-signal-safe (a handler that interrupts its thread's
 * drain finds the gate closed and adds atomically). Cost: the buffered add
 * is the bounds checks, the index load and one stack-push section; the
 * drains add about a shared atomic add per entry (bench/flows.md: at 10^6
 * flows an update cost 1.3-2.0x pcpu_counter_add() on a 10^6 x 2 counter
 * array on a 2-vCPU machine).
 */
__attribute__((always_inline)) static inline int PCPU__INLINE_OP(pcpu_flows_add)(pcpu_flows_t *f,
										  size_t flow,
										  unsigned counter,
										  uint64_t value)
{
#ifdef PCPU_DEBUG
	pcpu__debug_check(f->pcpu__buf, "pcpu_flows_add");
#endif
	return pcpu__flows_add_inline(f, flow, counter, value);
}

/**
 * Drains every slot's buffer into the shared words: every add that
 * returned before the call (happened before it) is then in its shared word,
 * whichever CPU buffered it. Adds keep running meanwhile (into buffers the
 * flush is not draining, or atomically). Flushes of one object run one at
 * a time.
 *
 * How: for each slot whose buffer holds entries, the flushing thread closes
 * the slot's gate (a compare-and-swap), then one pcpu_rseq_fence() for all
 * of them: sections that read an open gate have then committed or will
 * restart, so the buffers are the flusher's. A slot whose own thread is
 * draining it is waited for, then flushed. The delay of a delta buffered on
 * a slot is thus bounded by the next flush (or the slot's next drain, after
 * at most `buffer` adds there).
 *
 * Returns 0, or -1 with errno set to pcpu_rseq_fence()'s error (EPERM,
 * ENOSYS: membarrier refused and the CPU walk too): the buffers are then
 * as they were (reads stay exact: they read the buffers). NULL: -1 with
 * errno EINVAL.
 * Thread-safe; not async-signal-safe (it takes a mutex and may wait for a
 * drain). Cost: a mutex, a fence (one membarrier system call), and per
 * slot with entries a compare-and-swap, a drain and a read of its gate;
 * nothing where no slot buffered anything.
 */
PCPU_API int pcpu_flows_flush(pcpu_flows_t *f);

/**
 * The value of counter `counter` of flow `flow`: its shared word plus every
 * slot's buffered deltas of it.
 *
 * Exact: it includes every add that returned before the call, each once;
 * an add that runs meanwhile is in it or not. Successive reads by one
 * thread never decrease (modulo 2^64). A read that meets a drain (a delta
 * moving from a buffer to the word while it reads) retries; after a few
 * retries it holds drains off (adds meanwhile go to the shared words) and
 * reads once more, so it always returns.
 *
 * Out of range (flow >= nflows, counter >= ncounters) or NULL: 0 with errno
 * EINVAL; errno is left as it was otherwise (set it to 0 before the call to
 * tell a 0 from an error, or use pcpu_flows_read_array(), which returns
 * -1).
 * Thread-safe; not async-signal-safe (it may wait for a drain, which a
 * handler could be interrupting). Cost: a load of each walked slot's drain
 * sequence (twice) and count, a scan of every slot's buffered entries
 * (about 1 ns each: bench/flows.md measured 127-173 ns with 72-143
 * entries buffered over 2 slots), a load of the word; it grows with the
 * present CPUs and the buffer size.
 */
PCPU_API uint64_t pcpu_flows_read(pcpu_flows_t *f, size_t flow, unsigned counter);

/**
 * Every counter of flows first .. first + n - 1, into out[(flow - first) x
 * ncounters + counter]: the bulk read (pcpu_flows_read_array(f, 0,
 * nflows, out) reads everything), which reads each slot's buffer once for
 * all of them instead of once per key.
 *
 * Each value is exact as pcpu_flows_read()'s is; they are not one
 * snapshot. While it runs, drains are held off (a slot whose buffer fills
 * adds to the shared words directly), so it never retries.
 *
 * Returns 0, or -1 with errno EINVAL (NULL f or out, n 0, first + n above
 * nflows).
 * Thread-safe; not async-signal-safe (a mutex, and it waits for drains in
 * progress). Cost: a mutex, a fence, a copy of n x ncounters words, and a
 * scan of every slot's buffered entries (bench/flows.md: 2.0-2.6 ms for
 * 10^6 flows x 2 counters, 0.6x pcpu_counter_fetch_array() of 2 x 10^6
 * counters on 2 slots).
 */
PCPU_API int pcpu_flows_read_array(pcpu_flows_t *f, size_t first, size_t n, uint64_t *out);

/**
 * The number of entries buffered now, over every slot (not yet in the
 * shared words): 0 after a flush with no add since, and always where no
 * thread uses rseq. A hint: adds and drains change it meanwhile. NULL: 0
 * with errno EINVAL.
 * Thread-safe; async-signal-safe. Cost: a load per walked slot.
 */
PCPU_API size_t pcpu_flows_pending(pcpu_flows_t *f);

/** Number of flows and counters per flow, as created (0 for NULL).
 * Thread-safe; async-signal-safe. Cost: a load. */
PCPU_API size_t pcpu_flows_nflows(const pcpu_flows_t *f);
/** Counters per flow, as pcpu_flows_nflows(). */
PCPU_API unsigned pcpu_flows_ncounters(const pcpu_flows_t *f);

PCPU_END_DECLS

#endif /* PCPU_FLOWS_H */
