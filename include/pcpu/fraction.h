/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/fraction.h
 * Values with fractions: double-valued counters and gauges (a `metrics`
 * gauge's set(16e9), prometheus-cpp's Increment(0.5)) on per-CPU integer
 * words, covering every double -- the whole finite range, values as small
 * as 1e-12, and for gauges +-Inf and NaN -- while staying exact where
 * integers are: integers to 2^63 and decimal fractions to 10^-9 (0.1 added
 * ten times reads exactly 1; 16e9 reads 16000000000).
 *
 * A series of a family with fractions (pcpu_registry_family_nanos(), or
 * pcpu_registry_family_ex() with PCPU_FAMILY_FRACTIONS; pcpu/stats.h) is
 * PCPU_FRACTION_WORDS words of the registry's zone, its handle the first:
 *
 *     word 0   whole units: a counter word (a gauge's read as int64)
 *     word 1   billionths of a unit: a counter word, any int64
 *     word 2   the residue: a double in slot 0's mirror word, what the two
 *              words cannot hold
 *
 *     value = whole + billionths * 10^-9 + residue
 *
 * computed as pcpu_fraction_value() says (the integer part first, so 0.1 +
 * 0.2 reads 0.3). An add of v with |v| < 2^62 is per-CPU rseq adds:
 * trunc(v) to word 0 (when not 0) and the fraction, rounded to the nearest
 * 10^-9, to word 1 (when not 0) -- an integer add is one counter add,
 * exact. What the words cannot hold goes to the residue with an atomic
 * compare-and-swap on one shared word: |v| >= 2^62, infinities and NaN,
 * and a v that would round to 0 (0 < |v| < 5e-10). A set stores v exactly:
 * the words by offset (pcpu_gauge_set()'s way, so no concurrent add is
 * lost) and the residue v - (what the words then read), under one striped
 * lock, so a read right after a set gives v bit for bit.
 *
 * Every reader sees the same value: snapshots and every exposition format,
 * published segments (format 2.8) and their readers (pcpustat, the Go and
 * Python readers).
 *
 * The words may also be a caller's own: pcpu_counter_alloc_array(
 * PCPU_FRACTION_WORDS) (then freed with pcpu_counter_free()).
 */
#ifndef PCPU_FRACTION_H
#define PCPU_FRACTION_H

#include <stdint.h>
#include <pcpu/common.h>
#include <pcpu/counter.h>
#include <pcpu/gauge.h>

PCPU_BEGIN_DECLS

/** Words of a value with fractions: whole units, billionths, residue. */
#define PCPU_FRACTION_WORDS 3

/** Largest magnitude an add puts in the integer words (2^62); beyond it,
 * the residue. */
#define PCPU_FRACTION_LIMIT 4611686018427387904.0

/* The residue's add: out of line (a compare-and-swap loop on slot 0's
 * mirror word of word 2). */
PCPU_API void pcpu__fraction_add_slow(pcpu_counter_t c, double v);

#ifdef PCPU_NO_INLINE
/** The stable tier (src/stats/stable_abi.c): the operations below as
 * exported functions, with the same contracts. */
PCPU_API void pcpu_counter_add_double(pcpu_counter_t c, double v);
PCPU_API void pcpu_gauge_add_double(pcpu_gauge_t g, double v);
#endif

/* The add of both: v split into whole units and billionths, rounded half
 * away from zero (an integer goes to word 0 alone); the residue for the
 * rest. No libm: (int64_t)v truncates. */
__attribute__((always_inline)) static inline void pcpu__fraction_add(pcpu_counter_t c, double v)
{
	if (PCPU_LIKELY(__builtin_fabs(v) < PCPU_FRACTION_LIMIT)) {
		int64_t whole = (int64_t)v;
		double f = (v - (double)whole) * 1e9;
		int64_t nanos = (int64_t)(f + (f < 0 ? -0.5 : 0.5));

		if (whole)
			pcpu_counter_add(c, whole);
		if (nanos) {
			pcpu_counter_add(pcpu_counter_at(c, 1), nanos);
			return;
		}
		if (whole || v == 0)
			return;
		/* 0 < |v| < 5e-10: it would round to nothing. */
	}
	pcpu__fraction_add_slow(c, v);
}

/**
 * Adds `v` to counter `c`, a series of a counter family with fractions
 * (or PCPU_FRACTION_WORDS words of one's own). A counter only goes up:
 * the caller adds v >= 0 (prometheus-cpp's Increment() ignores a negative
 * one; pcpu adds whatever it is given). Precision: |v| < 2^62 goes to the
 * words, off by at most 5e-10 (its fraction rounded to 10^-9; exact for
 * integers and for decimals of 9 digits or fewer); the rest to the
 * residue, as a double. Thread-safe; async-signal-safe where v goes to the
 * words (the residue's compare-and-swap is too). Cost: one counter add for
 * an integer, two with a fraction; a compare-and-swap on a shared word
 * for the residue.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_counter_add_double)(pcpu_counter_t c,
											   double v)
{
	pcpu__fraction_add(c, v);
}

/**
 * Adds `v` (negative allowed; +-Inf and NaN go to the residue) to gauge
 * `g`, a series of a gauge family with fractions. As
 * pcpu_counter_add_double(): thread-safe, async-signal-safe, one or two
 * counter adds.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_gauge_add_double)(pcpu_gauge_t g,
											 double v)
{
	pcpu__fraction_add((pcpu_counter_t)g, v);
}

/**
 * Sets gauge `g` (of a family with fractions) to `v`, any double: a read
 * right after gives v bit for bit (-0.0, infinities and NaN included),
 * later adds add to it. The words by offset, as pcpu_gauge_set() does
 * (a concurrent add lands before or after the set, never lost), the
 * residue stored, all three under one striped lock (two sets never mix).
 * Returns 0, or -1 with errno EINVAL for a NULL gauge.
 * Thread-safe; not async-signal-safe (a mutex). In a shared registry
 * (PCPU_SEGMENT_SHARED_TREE) sets are lock-free per word: two processes
 * setting one gauge at once may leave words of both. Cost: a fetch of the
 * two words and an uncontended mutex.
 */
PCPU_API int pcpu_gauge_set_double(pcpu_gauge_t g, double v);

/**
 * Sets counter `c` (of a family with fractions) to `v`: what a reset to a
 * value is (prometheus-cpp's Counter::Reset() sets 0). As
 * pcpu_gauge_set_double(); a negative v is held by the residue (the whole
 * units of a counter are unsigned). Returns 0, or -1 with errno EINVAL.
 */
PCPU_API int pcpu_counter_set_double(pcpu_counter_t c, double v);

/**
 * The value of gauge `g` (of a family with fractions), as
 * pcpu_fraction_value() computes it from a fetch of its words: not a
 * point-in-time read across slots, exact once updates stop. NaN with
 * errno EINVAL for NULL. Thread-safe; async-signal-safe; lock-free. Cost:
 * a fetch of three words.
 */
PCPU_API double pcpu_gauge_read_double(pcpu_gauge_t g);

/** The value of counter `c` of a family with fractions; as
 * pcpu_gauge_read_double(), its whole units read unsigned. */
PCPU_API double pcpu_counter_read_double(pcpu_counter_t c);

/* pcpu_fraction_value() and pcpu_fraction_split(), inline for callers on
 * a hot path (the prometheus-cpp layer's Set()); the functions are these. */
static inline double pcpu__fraction_value(uint64_t whole, int64_t nanos, double residue, int is_signed)
{
	uint64_t u = whole + (uint64_t)(nanos / 1000000000);
	int64_t r = nanos % 1000000000;
	double v;

	if (u == 0 && r == 0)
		return residue;
	v = is_signed ? (double)(int64_t)u : (double)u;
	if (r)
		v += (double)r / 1e9;
	return v + residue;
}

static inline void pcpu__fraction_split(double v, int is_signed, int64_t *whole, int64_t *nanos,
					double *residue)
{
	int64_t w = 0, n = 0;

	if (__builtin_fabs(v) < PCPU_FRACTION_LIMIT && (is_signed || v >= 0)) {
		double f;

		w = (int64_t)v;
		f = (v - (double)w) * 1e9;
		n = (int64_t)(f + (f < 0 ? -0.5 : 0.5));
	}
	*whole = w;
	*nanos = n;
	/* v minus what the words read, exactly (src/stats/fraction.c says
	 * why); the residue alone where they read 0. */
	*residue = w == 0 && n == 0 ? v : v - pcpu__fraction_value((uint64_t)w, n, 0.0, is_signed);
}

/**
 * The one rule that turns the words into a double, which every reader
 * applies (snapshots, the writers, the segment readers in C, Go and
 * Python): u = whole + billionths / 10^9 (integer division, modulo 2^64;
 * `whole` read as int64 when `is_signed`), r = billionths % 10^9, and
 * value = (double)u + r / 1e9 + residue -- or the residue alone where u
 * and r are 0 (so a set of -0.0 reads -0.0). Thread-safe;
 * async-signal-safe. Cost: constant.
 */
PCPU_API double pcpu_fraction_value(uint64_t whole, int64_t nanos, double residue, int is_signed);

/**
 * The words a set of `v` stores: *whole = trunc(v) and *nanos its fraction
 * in billionths, rounded half away from zero, where |v| < 2^62 (and, not
 * `is_signed`, v >= 0), else both 0; *residue = v minus what those words
 * read (exactly: pcpu_fraction_value(*whole, *nanos, *residue, is_signed)
 * is v bit for bit, every double). For callers that store the words
 * themselves (prometheus-cpp's Set() of a gauge nobody adds to: plain
 * stores). Returns 0, or -1 with errno EINVAL for a NULL pointer.
 * Thread-safe; async-signal-safe. Cost: constant.
 */
PCPU_API int pcpu_fraction_split(double v, int is_signed, int64_t *whole, int64_t *nanos,
				 double *residue);

/**
 * Stores `residue` as value `c`'s residue (word 2), as a set does, the
 * words untouched: for callers that store the words themselves with
 * pcpu_fraction_split()'s results. NULL: no-op. Thread-safe;
 * async-signal-safe. Cost: an atomic exchange on slot 0's mirror word.
 */
PCPU_API void pcpu_fraction_store_residue(pcpu_counter_t c, double residue);

/** Words of a double sum (pcpu_fraction_sum_add()): per-slot doubles, a
 * residue. */
#define PCPU_FRACTION_SUM_WORDS 2

/**
 * A double sum on per-CPU words: PCPU_FRACTION_SUM_WORDS words (the pair
 * after a histogram's buckets in a family with fractions), word 0 a
 * double per slot, word 1 a shared residue. pcpu_fraction_sum_add() adds
 * a finite v to the calling thread's slot's double (an rseq
 * compare-and-store: no atomic instruction, no shared cache line; a
 * compare-and-swap on its fallback slot's mirror word without rseq), and
 * +-Inf or NaN to the residue (a compare-and-swap). The sum is the slots'
 * doubles added slot by slot (each slot's word and mirror word first),
 * then the residue: what every reader computes, the segment readers too.
 * Thread-safe; async-signal-safe. Cost: a few loads, an add, a section.
 */
PCPU_API void pcpu_fraction_sum_add(pcpu_counter_t w, double v);

/** The sum of pcpu_fraction_sum_add()'s words at `w` (see there). Not a
 * point-in-time read. Thread-safe; async-signal-safe; lock-free. Cost: a
 * walk of the slots. */
PCPU_API double pcpu_fraction_sum_read(pcpu_counter_t w);

/** Makes the sum at `w` read 0: each slot's double by an offset in its
 * mirror word (exactly 0: x + -x), the residue stored; a slot that holds
 * an infinity keeps it (no offset cancels one). Adds racing it land before
 * (and are reset) or after. Thread-safe; async-signal-safe. Cost: a walk
 * of the slots with a compare-and-swap each. */
PCPU_API void pcpu_fraction_sum_reset(pcpu_counter_t w);

PCPU_END_DECLS

#endif /* PCPU_FRACTION_H */
