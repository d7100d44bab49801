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

#endif /* PCPU_COUNTER_INTERNAL_H */
