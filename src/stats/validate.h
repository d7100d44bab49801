/* SPDX-License-Identifier: MIT */
/*
 * The checks of validate.c that the layer above reuses: a segment reader
 * (src/segment) applies to untrusted input exactly the rules the registry
 * applies at registration, with these and the public pcpu_stats_check_*()
 * of pcpu/expose.h. Libc only; nothing here is exported.
 */
#ifndef PCPU_STATS_VALIDATE_H
#define PCPU_STATS_VALIDATE_H

#include <stddef.h>

#include "../core/core.h"

struct pcpu_snapshot;
struct pcpu_snapshot_family;

/* The first pass of pcpu_snapshot_write() (expose.c): the whole snapshot
 * valid (names, labels, texts, buckets, no duplicates or clashes), the
 * families marked PCPU_SNAPSHOT_CHECKED for their values and what lies
 * between families only. 0, or -1 with errno and the message. A segment
 * reader runs it once on a directory it keeps, and marks the families. */
PCPU_HIDDEN int pcpu__snapshot_check(const struct pcpu_snapshot *s);

/* Checks help text: UTF-8, at most PCPU_STATS_HELP_MAX bytes. NULL is ok.
 * 0, or -1 with errno EINVAL and a message for pcpu_stats_error(). */
PCPU_HIDDEN int pcpu__check_help(const char *help);

/* Checks a unit against the family name (must end in "_" unit). 0, or -1
 * with errno EINVAL and a message for pcpu_stats_error(). */
PCPU_HIDDEN int pcpu__check_unit(const char *name, const char *unit);

/* The length of an info family's OpenMetrics name (the family name without
 * its `_info`): OpenMetrics writes `# TYPE x info` and samples `x_info`.
 * 0 when `flags` has no PCPU_SNAPSHOT_INFO, or name is NULL or does not end
 * in `_info` after at least one character. */
PCPU_HIDDEN size_t pcpu__info_name_len(const char *name, unsigned flags);

/* The order of the families of a snapshot (the registry's, a segment
 * reader's, a merge's): by name, then -- several label sets of one name
 * (PCPU_FAMILY_LABELSET) -- by number of labels, then by the label names
 * in order. <0, 0, >0 as strcmp(). */
PCPU_HIDDEN int pcpu__cmp_family_order(const char *an, unsigned anl, const char *const *al,
				       const char *bn, unsigned bnl, const char *const *bl);

/* Whether the n label names `a` and the m label names `b` are the same set
 * (in any order). */
PCPU_HIDDEN int pcpu__same_label_set(unsigned n, const char *const *a, unsigned m,
				     const char *const *b);

/* Whether two families of one name are two label sets of one metric:
 * alike in everything the writers write once per name (type, help,
 * unit, scale, flags, buckets and which of them are exposed), so that
 * only their label names differ (PCPU_FAMILY_LABELSET). The one
 * definition: pcpu_snapshot_write() refuses a snapshot and
 * pcpu_snapshot_merge_add() an input by it. The PCPU_SNAPSHOT_CHECKED
 * mark is not compared. */
PCPU_HIDDEN int pcpu__same_metric(const struct pcpu_snapshot_family *a,
				  const struct pcpu_snapshot_family *b);

#endif /* PCPU_STATS_VALIDATE_H */
