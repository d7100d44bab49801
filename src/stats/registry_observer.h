/* SPDX-License-Identifier: MIT */
/*
 * The registry's directory as an observer above the statistics layer sees
 * it: the shared statistics segment (src/segment/writer.c) keeps a mirror
 * of it in a file. The observer is told of every change to the directory,
 * in order, under the registry's lock, walks the families and series that
 * exist when it starts, and reads what it mirrors through views -- never
 * the registry's private structures (registry.h), which may change without
 * the segment knowing. Families and series are opaque handles here, stable
 * from their ADDED event to their REMOVING event (they serve as map keys).
 * Defined in registry_observe.c. Internal: nothing here is exported.
 */
#ifndef PCPU_STATS_REGISTRY_OBSERVER_H
#define PCPU_STATS_REGISTRY_OBSERVER_H

#include <stdint.h>

#include <pcpu/stats.h>

#include "stats_internal.h"

struct pcpu_family;
struct pcpu__series;

/*
 * Directory events. The observer runs under the registry's lock, so it sees
 * changes in order and the family and series it is given are stable while
 * it runs:
 *  - FAMILY_ADDED after a family is linked;
 *  - FAMILY_REMOVING before a family is unlinked and its series and their
 *    storage freed (the observer walks the family's series itself, with
 *    pcpu__family_series_next(): no SERIES_REMOVING is sent for them);
 *  - SERIES_ADDED after a series is linked, its storage allocated;
 *  - SERIES_REMOVING before a series is unlinked and its storage freed;
 *  - DESTROYED once, from pcpu_registry_destroy(), after every family was
 *    removed and the zone destroyed; f and se are NULL. The last call.
 *  - GROUPS_READ after a snapshot or a collection read every group of the
 *    group families (pcpu__registry_groups_each_locked() sees fresh
 *    reads); f and se are NULL.
 *  - COLLECTING at every snapshot and collection (pcpu_registry_snapshot(),
 *    pcpu_registry_write(), pcpu_registry_collect()), before GROUPS_READ,
 *    whether or not the registry has groups: the segment flushes its flows
 *    tables into the file then (src/segment/flows.c); f and se are NULL.
 *  - FORK_PREPARE from the registries' fork() prepare handler, every
 *    registry's lock held by the forking thread, before fork(): the
 *    observer may bring what it keeps privately up to date for the child
 *    to inherit (a shared registry's segment: its index of the tree's
 *    directory). No directory change; it must take no lock (other
 *    processes may hold the tree's); f and se are NULL.
 *
 * The observer returns 0, or refuses a FAMILY_ADDED or SERIES_ADDED with
 * -1, errno set and pcpu_stats_error()'s message written: the registry then
 * undoes the addition (unlinks and frees the family or the series, with no
 * REMOVING event; a series' storage is freed as a failed registration's)
 * and the registration fails with that errno. An ordinary segment never
 * refuses: what it cannot record it counts as dropped and the registration
 * stands. A shared registry's segment must refuse what its directory cannot
 * record, since there the directory is what makes a series one for the
 * whole tree (another process would make a second one). The return of the
 * other events is ignored.
 */
enum pcpu__registry_event {
	PCPU__REG_FAMILY_ADDED = 1,
	PCPU__REG_FAMILY_REMOVING,
	PCPU__REG_SERIES_ADDED,
	PCPU__REG_SERIES_REMOVING,
	PCPU__REG_DESTROYED,
	PCPU__REG_GROUPS_READ,
	PCPU__REG_COLLECTING,
	PCPU__REG_FORK_PREPARE,
};
typedef int (*pcpu__registry_hook_fn)(void *ctx, enum pcpu__registry_event ev,
				      struct pcpu_family *f, struct pcpu__series *se);

/* A shared registry's (a zone shared by a process tree, src/core/core.h):
 * in *at, the storage of the series of f with label values v (the whole
 * key, constant labels included) that another process registered, in this
 * process (the address of its value: a counter's or gauge's handle, a
 * histogram's bucket pairs; a group family's member 0: its group's lanes),
 * or NULL if none did and the directory has room for a new one. Returns 0,
 * or -1 with errno and pcpu_stats_error()'s message when there is none and
 * the directory could not record a new one (ENOSPC: full, or its file
 * system is): the registration fails before anything is allocated. Called
 * under the registry's lock and the zone tree's, before the registry would
 * allocate a new series' storage; the SERIES_ADDED of the series made over
 * it (or of the new one) follows under the same locks, and the observer
 * then maps the series to the existing entry instead of writing another. */
typedef int (*pcpu__registry_adopt_fn)(void *ctx, struct pcpu_family *f, const char *const *v,
				       void **at);

/* A shared registry's relabelling (pcpu_family_relabel(), tree.c): what
 * the registry asks its segment, under the registry's lock and the zone
 * tree's, by `op`:
 *  - CHANGED: whether a series entry was rewritten (relabelled, or made
 *    free by a repair) since SEEN last said so, in a way that may concern
 *    this process's series (no lock needed): 1 or 0. f, se, v unused;
 *  - LIST: whether the segment can name the series of this process on
 *    the entries rewritten since SEEN (its relabel log, tree_relog.c): 1,
 *    and STALE_NEXT then hands them one per call in *out (1; 0 when none
 *    is left), each a series of this process, for the registry to ask
 *    STALE of; 0: the registry must ask STALE of every series it holds;
 *  - STALE: whether se, a series of f this process mapped, no longer has
 *    an entry carrying its label values (another process relabelled it):
 *    1 or 0;
 *  - SEEN: the rewrites so far are this process's registry's to forget
 *    (it dropped its stale series): 0;
 *  - BEGIN: a relabelling of one or more series starts (pcpu_family_relabel(),
 *    pcpu_families_relabel()): the CHECKs and COMMITs up to END are its; 0;
 *  - CHECK: whether se (mapped, values v its new ones) can be relabelled
 *    besides the series the relabelling CHECKed before it: 0, or -1 with
 *    errno and the message (ENOENT: no entry of its own; EEXIST: the
 *    directory has a series of values v; ENOTSUP: a group member; ENOSPC,
 *    E2BIG: the strings area cannot take v besides the others' values;
 *    ENOMEM). Makes sure of the pages END writes;
 *  - COMMIT: after every CHECK passed, with the values zeroed: se's entry
 *    to be rewritten with v (which stays valid up to END); 0;
 *  - END: the COMMITs' entries rewritten, in their order (seq odd while
 *    each is written), logged for the other processes as one relabelling;
 *    0. */
enum pcpu__relabel_op {
	PCPU__RELABEL_CHANGED = 1,
	PCPU__RELABEL_STALE,
	PCPU__RELABEL_SEEN,
	PCPU__RELABEL_CHECK,
	PCPU__RELABEL_COMMIT,
	PCPU__RELABEL_LIST,
	PCPU__RELABEL_STALE_NEXT,
	PCPU__RELABEL_BEGIN,
	PCPU__RELABEL_END,
};
typedef int (*pcpu__registry_relabel_fn)(void *ctx, enum pcpu__relabel_op op, struct pcpu_family *f,
					 struct pcpu__series *se, const char *const *v,
					 struct pcpu__series **out);

/* The shared handle of a consistent group family's series (one per label
 * set, shared by the members): the group, and its last consistent read. */
struct pcpu__gseries {
	pcpu_group_t *g;              /* one group of nmembers values */
	int64_t vals[PCPU_GROUP_MAX_MEMBERS]; /* read under the registry lock */
	int ok;                       /* vals holds a consistent read */
};

/* What an observer reads of a family; valid while the registry is locked
 * and the family exists. */
struct pcpu__family_view {
	const char *name;             /* base name (counters without _total) */
	const char *help, *unit;      /* NULL: none */
	enum pcpu_metric_type type;
	int scale_exp10;
	unsigned flags;               /* PCPU_SNAPSHOT_* */
	unsigned nlabels;             /* constant labels included, last */
	char *const *label_names;
	/* histograms */
	const struct pcpu_histogram_layout *layout;
	unsigned export_lg;           /* log2 of the `le` bounds exposed per octave */
	size_t nbuckets;
	const int64_t *bucket_upper;  /* nbuckets - 1 */
	int native_schema;            /* exponential layouts */
	int32_t native_index;
	/* a member of a consistent group family: how many members it has (0:
	 * not a member), and which one it is */
	unsigned group_members, group_member;
	/* registered with PCPU_FAMILY_LABELSET: may be another label set of a
	 * name another process of a tree registered */
	int labelset;
	/* PCPU_FAMILY_SPARSE: a histogram family whose series' buckets are
	 * made as used (pcpu__histogram_sparse_publish()) */
	int sparse;
	/* how many label sets its name has (PCPU_FAMILY_LABELSET; 1 for most
	 * names), and whether it is the name's first, which holds its sample
	 * names: a segment counts a name's metric once */
	unsigned name_sets;
	int name_first;
};

/* What an observer reads of a series. */
struct pcpu__series_view {
	char *const *values;          /* the family's nlabels label values */
	void *storage;                /* pcpu_counter_t, pcpu_gauge_t, pcpu_histogram_t *;
				       * NULL for a group family's member */
	const struct pcpu__gseries *group; /* a group family's member: its group */
};

PCPU_HIDDEN void pcpu__registry_lock(pcpu_registry_t *reg);
PCPU_HIDDEN void pcpu__registry_unlock(pcpu_registry_t *reg);

/* Registry locked: whether an observer is set (there is one at most). */
PCPU_HIDDEN int pcpu__registry_observed_locked(const pcpu_registry_t *reg);
/* Registry locked: sets the observer (fn NULL: none), with its adopt
 * callback for a shared registry (NULL: an ordinary observer). */
PCPU_HIDDEN void pcpu__registry_observe_locked(pcpu_registry_t *reg, pcpu__registry_hook_fn fn,
					       pcpu__registry_adopt_fn adopt, void *ctx);
/* Registry locked, after pcpu__registry_observe_locked() with an adopt
 * callback: the shared registry's relabelling (NULL: none). */
PCPU_HIDDEN void pcpu__registry_relabel_locked(pcpu_registry_t *reg, pcpu__registry_relabel_fn fn);

/* Registry locked: the family after f (f NULL: the first), or NULL. */
PCPU_HIDDEN struct pcpu_family *pcpu__registry_family_next(const pcpu_registry_t *reg,
							   const struct pcpu_family *f);
/* Registry locked: the series of f after se (se NULL: the first), in
 * creation order, or NULL. */
PCPU_HIDDEN struct pcpu__series *pcpu__family_series_next(const struct pcpu_family *f,
							  const struct pcpu__series *se);
/* Registry locked: calls fn for the group of every series of every
 * consistent group family (once a group). */
PCPU_HIDDEN void pcpu__registry_groups_each_locked(const pcpu_registry_t *reg,
						   void (*fn)(void *ctx,
							      const struct pcpu__gseries *gs),
						   void *ctx);

/* A shared registry's groups, for the segment, which adopts and reads
 * groups that other processes of the tree made: the bytes of one group's
 * lanes of `members` in the registry's (tree) zone, and pcpu_group_read()
 * of the one group whose lanes are at `at` there. */
PCPU_HIDDEN size_t pcpu__registry_tree_group_size(const pcpu_registry_t *reg, unsigned members);
PCPU_HIDDEN int pcpu__registry_tree_group_read(pcpu_registry_t *reg, unsigned members, void *at,
					       int64_t *out);

/* Registry locked: the views of a family and of one of its series. */
PCPU_HIDDEN void pcpu__family_view(const struct pcpu_family *f, struct pcpu__family_view *v);
PCPU_HIDDEN void pcpu__series_view(const struct pcpu_family *f, const struct pcpu__series *se,
				   struct pcpu__series_view *v);

#endif /* PCPU_STATS_REGISTRY_OBSERVER_H */
