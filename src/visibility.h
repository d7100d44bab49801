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
 * PCPU_PRIVATE_<n> of src/pcpu.map, which no header a user includes
 * declares. libpcpu-stats records that node in its version needs, so a
 * libpcpu-stats built against another private interface fails to load,
 * clearly ("version `PCPU_PRIVATE_1' not found"), instead of calling a
 * function whose meaning changed. Change <n> here and in src/pcpu.map
 * (CMakeLists.txt checks they agree) whenever one of them changes.
 */
#ifndef PCPU_VISIBILITY_H
#define PCPU_VISIBILITY_H

#define PCPU_HIDDEN __attribute__((visibility("hidden")))
#define PCPU_PRIVATE __attribute__((visibility("default")))

#endif /* PCPU_VISIBILITY_H */
