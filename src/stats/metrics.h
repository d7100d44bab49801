/* SPDX-License-Identifier: MIT */
/*
 * The metrics' internal interface (stats_zone.c, group.c, histogram.c),
 * for each other and for the registry above them: the zone of standalone
 * metrics, freeing a group in a known zone, histogram layouts. Not
 * installed; nothing here is exported.
 */
#ifndef PCPU_STATS_METRICS_H
#define PCPU_STATS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <pcpu/group.h>
#include <pcpu/histogram.h>
#include <pcpu/zone.h>

#include "../core/core.h"

/* ---- stats_zone.c ---- */

/* The zone of standalone gauges, histograms and groups; NULL + ENOMEM. */
PCPU_HIDDEN pcpu_zone_t *pcpu__stats_zone(void);

/* ---- group.c ---- */

/* pcpu_group_free() of a group allocated in `zone`, which the caller holds
 * (a registry): no search for the zone by address. */
PCPU_HIDDEN void pcpu__group_free_in(pcpu_zone_t *zone, pcpu_group_t *g);

/* Registers the groups' fork() handlers (once; every allocation does it
 * too). A caller that will allocate groups under a lock of its own calls it
 * first: the registration takes the fork handlers' lock, which their
 * prepare step holds while it takes that caller's lock (a registry's). */
PCPU_HIDDEN void pcpu__group_fork_register(void);

/* pcpu_group_alloc_in() of one group over lanes `at` of a tree zone
 * (src/core/core.h: a shared registry's series another process made, its
 * size pcpu__group_tree_size()); at NULL: new lanes. */
PCPU_HIDDEN pcpu_group_t *pcpu__group_create_at(pcpu_zone_t *zone, unsigned members, void *at);

/* Bytes of the lanes of one group of `members` in tree zone `zone`. */
PCPU_HIDDEN size_t pcpu__group_tree_size(const pcpu_zone_t *zone, unsigned members);

/* pcpu_group_read() of the one group whose lanes are at `at` in tree zone
 * `zone` (a shared registry's, made by any process of the tree). */
PCPU_HIDDEN int pcpu__group_tree_read(pcpu_zone_t *zone, unsigned members, void *at, int64_t *out);


/* ---- histogram.c ---- */

/* Registers the fork() handlers of the histograms' shared layout tables
 * (histogram.c), once: called where a histogram may later be made under a
 * pcpu lock (pcpu_registry_create()) or is made now under none
 * (pcpu_histogram_create_in()), never under a pcpu lock (fork.c). */
PCPU_HIDDEN void pcpu__histogram_tables_fork_register(void);

/* pcpu_histogram_destroy() of a histogram allocated in `zone`, which the
 * caller holds (a registry): no search for the zone by address. Its
 * layout's shared tables lose a user unless its bounds are `shared` (the
 * family's: see below). */
PCPU_HIDDEN void pcpu__histogram_destroy_in(pcpu_zone_t *zone, pcpu_histogram_t *h,
					    const int64_t *shared);

/* pcpu_histogram_create_in(), over storage `at` of that zone (a shared
 * registry's series another process made, its size the layout's) instead
 * of a new allocation; at NULL: a new one. `shared`: for an explicit
 * layout, the bounds padded as the search needs (at least
 * PCPU__HISTOGRAM_SMALL, INT64_MAX after the last), owned by the caller
 * and used instead of the layout's shared tables (a registry family's, for
 * all its series); NULL: the layout's shared tables (histogram.c), one
 * copy per process for every histogram of that layout. */
PCPU_HIDDEN pcpu_histogram_t *pcpu__histogram_create_at(pcpu_zone_t *zone,
							const struct pcpu_histogram_layout *layout,
							void *at, const int64_t *shared,
							int scale_exp10, unsigned opts);
/* ... `scale_exp10`: the exposed unit's (pcpu_histogram_observe() scales
 * by it); `opts`: PCPU__HISTOGRAM_WIDE, a histogram of a family with
 * fractions, one more pair after the buckets' (a per-slot double sum and
 * a residue); PCPU__HISTOGRAM_OPT_SPARSE, buckets made as used
 * (PCPU_HISTOGRAM_SPARSE; `at` is then a tree's table of their places,
 * src/segment/format.h 2.10, and `zone` a tree zone, else EINVAL). */
#define PCPU__HISTOGRAM_WIDE 1u
#define PCPU__HISTOGRAM_OPT_SPARSE 2u

/* histogram_sparse.c: a sparse histogram's (PCPU_HISTOGRAM_SPARSE) groups.
 * _init: its groups array (none made) in h->pcpu__groups, and the double
 * sum's pair when `wide` -- with `table`, a tree's series that another
 * process made: its groups where the table says; 0, or -1 with errno. _free: its groups back to
 * its zone, and the array. _pair_made: bucket b's pair of any histogram,
 * a sparse group made if need be; NULL when it cannot be (counted by
 * pcpu_histogram_lost(); errno unchanged). _pair_of: the same, but NULL
 * for a group not made (none is made). _sum_pair: the double sum's pair
 * (NULL without fractions). */
PCPU_HIDDEN int pcpu__histogram_sparse_init(pcpu_histogram_t *h, pcpu_zone_t *zone, size_t nbuckets,
					    int wide, uint64_t *table);
PCPU_HIDDEN void pcpu__histogram_sparse_free(pcpu_histogram_t *h);
PCPU_HIDDEN pcpu_counter_t pcpu__histogram_pair_made(const pcpu_histogram_t *h, size_t b);
PCPU_HIDDEN pcpu_counter_t pcpu__histogram_pair_of(const pcpu_histogram_t *h, size_t b);
PCPU_HIDDEN pcpu_counter_t pcpu__histogram_sparse_sum_pair(const pcpu_histogram_t *h);

/*
 * A sparse histogram's groups (PCPU_FAMILY_SPARSE, histogram_sparse.c) in
 * a published segment (format 2.10, src/segment/format.h): the segment
 * gives each such series a table, ngroups words (+1 with fractions) in
 * memory its readers read, and the histogram stores there, once, where
 * each group it makes lies -- pcpu__sparse_word() of the group's chunk
 * and offset in the chunk's slot region -- then adds 2 to *changes (the
 * header's generation). In a tree zone the table is every process's:
 * a group is made once for the tree, under the tree's lock, and each
 * process reads the others' where the table says.
 *
 * _publish: at the series' SERIES_ADDED, under the registry's lock (and
 * the tree's), before any record; stores the words of what is made
 * already (the double sum's pair). 0, or -1 with errno EINVAL (a dense
 * histogram) or EBUSY (another table). _table: the table given (NULL for
 * none, or a dense histogram).
 */
PCPU_HIDDEN int pcpu__histogram_sparse_publish(pcpu_histogram_t *h, uint64_t *table,
					       uint64_t *changes);
PCPU_HIDDEN const uint64_t *pcpu__histogram_sparse_table(const pcpu_histogram_t *h);

/* A table word: high half 2 * chunk + 1, low half offset | 1 (offsets are
 * multiples of 16), so that a copy made 32 bits at a time shows a word
 * being stored as a half 0 (src/segment/format.h, pcpu__seg_sparse_place()). */
static inline uint64_t pcpu__sparse_word(uint32_t chunk, uint32_t off)
{
	return ((uint64_t)(2 * chunk + 1) << 32) | off | 1u;
}

/* What a histogram of a family with fractions holds beyond its integer
 * sum: its double sum and its residue, in exposed units (0 without). */
PCPU_HIDDEN double pcpu__histogram_read_residue(const pcpu_histogram_t *h);

/* Validates a layout; gives the bucket count (+Inf included) and, for
 * log-linear layouts, the first value that goes to +Inf. */
PCPU_HIDDEN int pcpu__histogram_layout_check(const struct pcpu_histogram_layout *l,
					     size_t *nbuckets, uint64_t *limit);

/* log2 of the `le` bounds a log-linear or exponential layout exposes per
 * power of two (export_per_octave, defaulted, and capped at the buckets per
 * power of two: 2^precision_bits, or 2^schema). */
PCPU_HIDDEN unsigned pcpu__histogram_export_lg(const struct pcpu_histogram_layout *l);

/* An exponential layout's bounds (see histogram.c): returns how many (0 if
 * more than max), writes them to out unless NULL, and the native index of
 * out[1] to *first unless NULL. */
PCPU_HIDDEN size_t pcpu__exponential_bounds(int schema, int scale, int64_t *out, size_t max,
					    int32_t *first);

#endif /* PCPU_STATS_METRICS_H */
