/* SPDX-License-Identifier: MIT */
/*
 * PCPU_HIDDEN: the visibility of pcpu's internal cross-file symbols
 * (pcpu__*, and the older unprefixed pcpu_* internals): hidden, so that only
 * the pcpu_ names of src/pcpu.map are exported. Every internal header uses it.
 */
#ifndef PCPU_VISIBILITY_H
#define PCPU_VISIBILITY_H

#define PCPU_HIDDEN __attribute__((visibility("hidden")))

#endif /* PCPU_VISIBILITY_H */
