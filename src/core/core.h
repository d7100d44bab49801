/* SPDX-License-Identifier: MIT */
/*
 * libpcpu's index for libpcpu-stats: the one header of src/core/ that a file
 * outside it includes (tests/check_layers.py refuses any other, and refuses
 * it to everything but src/stats/ and src/segment/). The statistics library
 * is built on these internals of the core; their functions are exported in
 * libpcpu.so's private version node only (PCPU_PRIVATE, visibility.h), and
 * each header below says what it offers:
 *
 *   visibility.h          PCPU_HIDDEN, PCPU_PRIVATE: the seam's markers
 *   error.h               the per-thread error messages of every layer
 *   fork.h                one pthread_atfork for every layer, by rank
 *   zone_internal.h       the default zone, an object's zone, a fork child's
 *                         view of the parent's values
 *   zone_backing.h        a zone's chunks in shared memory (the segment's
 *                         file), process trees, joins
 *   zone_mirror.h         the mirror words every reader of a slot adds
 *   counter_internal.h    a counter's set (an offset), for gauges
 *   worker_internal.h     owned slots: tree creation, the slots a backing
 *                         reserves
 *   torn64.h              reading a word another CPU writes (32-bit targets)
 *   objcache_stats_hook.h how an object cache's counters reach a registry
 *
 * The rest of src/core/ is libpcpu's alone. Nothing here is exported to
 * users; no public header includes it.
 */
#ifndef PCPU_CORE_H
#define PCPU_CORE_H

#include "visibility.h"
#include "error.h"
#include "fork.h"
#include "zone_internal.h"
#include "zone_backing.h"
#include "zone_mirror.h"
#include "counter_internal.h"
#include "worker_internal.h"
#include "torn64.h"
#include "objcache_stats_hook.h"

#endif /* PCPU_CORE_H */
