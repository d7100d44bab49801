/* SPDX-License-Identifier: MIT */
/*
 * counter.c's internals for the layers above it. Nothing here is exported.
 */
#ifndef PCPU_COUNTER_INTERNAL_H
#define PCPU_COUNTER_INTERNAL_H

#include <pcpu/counter.h>
#include <stdint.h>

#include "visibility.h"

/* Makes counter c read `v` (modulo 2^64) and returns the value it read
 * before: an offset, added atomically to slot 0's mirror word, not a store
 * into the slots, which their threads write without atomics (counter.c).
 * Serialised with every other set and reset of c (a striped lock), so that
 * two sets cannot both apply. Adders are never blocked; an add concurrent
 * with the set may land before or after it. pcpu_counter_fetch_and_zero()
 * is pcpu__counter_set(c, 0); a gauge's set is this on its counter.
 * Thread-safe; not async-signal-safe. */
PCPU_PRIVATE uint64_t pcpu__counter_set(pcpu_counter_t c, uint64_t v);

/* ---- counter_double.c: counter words holding doubles (the statistics
 * layer's values with fractions; that file says how) ---- */

/* Adds v to the double in slot 0's mirror word of `w` (compare-and-swap).
 * Thread-safe; async-signal-safe. */
PCPU_PRIVATE void pcpu__counter_double_add_shared(pcpu_counter_t w, double v);
/* Stores v there, returns the double it held. Thread-safe;
 * async-signal-safe. */
PCPU_PRIVATE double pcpu__counter_double_exchange(pcpu_counter_t w, double v);
/* Adds v to the calling thread's slot's double of `w` (an rseq
 * compare-and-store, else a compare-and-swap on the mirror word of its
 * fallback slot). Thread-safe; async-signal-safe. */
PCPU_PRIVATE void pcpu__counter_double_add(pcpu_counter_t w, double v);
/* The per-slot doubles of `w` summed, each slot's word and mirror word
 * first. Thread-safe; async-signal-safe. Cost: a walk of the slots. */
PCPU_PRIVATE double pcpu__counter_double_sum(pcpu_counter_t w);
/* Makes every finite slot's double of `w` read 0 (an offset in its mirror
 * word). Thread-safe; async-signal-safe. */
PCPU_PRIVATE void pcpu__counter_double_reset(pcpu_counter_t w);
/* Sets a value with fractions, words c[0], c[1] (by offsets, as
 * pcpu__counter_set()) and c[2]'s residue (stored), under one striped
 * lock: two sets never mix. Thread-safe; not async-signal-safe. */
PCPU_PRIVATE void pcpu__counter_set_fraction(pcpu_counter_t c, uint64_t whole, uint64_t nanos,
					     double residue);
/* A histogram pair's add (n to pair[0], v to pair[1]) that refuses, with
 * 1, where the sum word it would add to (the calling thread's slot's, or
 * its fallback slot's mirror) already holds more than `bound` in
 * magnitude; 0 once added. Thread-safe; async-signal-safe. */
PCPU_PRIVATE int pcpu__counter_add_pair_bounded(pcpu_counter_t pair, int64_t n, int64_t v,
						uint64_t bound);

#endif /* PCPU_COUNTER_INTERNAL_H */
