/* SPDX-License-Identifier: MIT */
/*
 * The visibility of pcpu's internal cross-file symbols.
 *
 * PCPU_HIDDEN: internal to one shared object (pcpu__* names, and the older
 * unprefixed pcpu_* internals): hidden, so that only the names of the
 * library's version script are exported.
 *
 * PCPU_PRIVATE: the seam between libpcpu and libpcpu-stats. The statistics
 * library is built on the core's zone, fork, error and tree internals; these
 * few functions leave libpcpu.so, but only in the version node
 * PCPU_PRIVATE_<release> of src/core/pcpu.map (the project version, filled in by
 * CMake), which no header a user includes declares. libpcpu-stats records
 * that node in its version needs, so a libpcpu-stats of another release
 * fails to load, clearly ("version `PCPU_PRIVATE_0.2.0' not found"),
 * instead of calling a function whose meaning changed; and it is linked
 * with -z now, so one built against a private function this libpcpu lacks
 * (renamed or removed under the same version number) fails to load too
 * ("undefined symbol: pcpu__..., version PCPU_PRIVATE_0.2.0"), never at its
 * first call. Nothing to renumber by hand (ctest seam_mismatch_refused).
 */
#ifndef PCPU_VISIBILITY_H
#define PCPU_VISIBILITY_H

#define PCPU_HIDDEN __attribute__((visibility("hidden")))
#define PCPU_PRIVATE __attribute__((visibility("default")))

#endif /* PCPU_VISIBILITY_H */
