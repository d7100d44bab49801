/* SPDX-License-Identifier: MIT */
/*
 * The statistics layer's index for the segment: the one header of
 * src/stats/ that a file outside it includes (tests/check_layers.py refuses
 * any other, and refuses it to everything but src/segment/). The rest of
 * src/stats/ is private to the folder.
 *
 *   hashtab.h            the one hash table of the library
 *   registry_observer.h  a registry's walks and views, for a mirror of its
 *                        directory (the segment's writer), instead of the
 *                        registry's structs
 *   validate.h           the rules a segment reader applies to untrusted
 *                        names and labels, exactly as the registry does
 *   histogram_layout.h   log-linear bucket arithmetic and the exposed `le`
 *                        sets, which the reader recomputes
 *   metrics.h            the metrics' internals: a sparse histogram's table
 *                        of groups in a published segment (format 2.10)
 *   error.h              the per-thread error messages, the segment's
 *                        domain beside the statistics layer's
 *
 * Nothing here is exported to users; no public header includes it.
 */
#ifndef PCPU_STATS_INDEX_H
#define PCPU_STATS_INDEX_H

#include "hashtab.h"
#include "registry_observer.h"
#include "validate.h"
#include "histogram_layout.h"
#include "metrics.h"
#include "error.h"

#endif /* PCPU_STATS_INDEX_H */
