/* SPDX-License-Identifier: MIT */
/*
 * Internal functions of the statistics registry's files (registry*.c,
 * snapshot.c, collector.c), grouped by the file that defines them; the
 * registry's structures are in registry_types.h, what it calls of the
 * metrics in metrics.h. Not installed.
 */
#ifndef PCPU_STATS_REGISTRY_H
#define PCPU_STATS_REGISTRY_H

#include <pthread.h>
#include <stdint.h>

#include <pcpu/stats.h>

#include "stats_internal.h"
#include "metrics.h"
#include "registry_types.h"

/* ---- registry_names.c: the sample-name table ---- */

/* The entry of sample name base + suffix, or NULL; registry locked. */
PCPU_HIDDEN struct pcpu__sname *pcpu__sname_find(struct pcpu_registry *reg, const char *base,
						 const char *suffix);
/* Reserves base + suffix for family f; -1 without memory. */
PCPU_HIDDEN int pcpu__sname_add(struct pcpu_registry *reg, struct pcpu_family *f,
				const char *base, const char *suffix);
/* Releases every name family f reserved. */
PCPU_HIDDEN void pcpu__sname_remove_family(struct pcpu_registry *reg, struct pcpu_family *f);
/* Hands every name family `from` reserved to family `to` (another label
 * set of the same name). */
PCPU_HIDDEN void pcpu__sname_repoint(struct pcpu_registry *reg, struct pcpu_family *from,
				     struct pcpu_family *to);
/* An info family `x_info` also owns `x`: writes it to out, returns 1 (0
 * for other families). */
PCPU_HIDDEN int pcpu__info_family_name(const char *name, unsigned flags,
				       char out[PCPU_STATS_NAME_MAX + 1]);

/* ---- registry_families.c ---- */

PCPU_HIDDEN extern const struct pcpu__fam_extra pcpu__no_extra;

/* Validates a description; writes the family's base name into `base`. */
PCPU_HIDDEN int pcpu__desc_check(const struct pcpu_family_desc *d,
				 char base[PCPU_STATS_NAME_MAX + 1]);
/* Checks a set of constant labels (the registry's or a family's). */
PCPU_HIDDEN int pcpu__const_labels_check(unsigned n, const char *const *names,
					 const char *const *values);
/* Finds or creates; registry locked; desc checked; *created set. `x`: the
 * new family's PCPU_SNAPSHOT_INFO and constant labels, which an existing
 * one must match. gf, member: a member of a group family (else NULL, 0). */
PCPU_HIDDEN struct pcpu_family *pcpu__family_get_locked(struct pcpu_registry *reg,
							const struct pcpu_family_desc *d,
							const char *base, int *created,
							struct pcpu__gfamily *gf, unsigned member,
							const struct pcpu__fam_extra *x);
/* Frees a family and all its series' storage; registry locked; no series
 * may belong to a struct. */
PCPU_HIDDEN void pcpu__family_destroy_locked(struct pcpu_registry *reg, struct pcpu_family *f);
/* ---- registry_labelsets.c: several label sets of one name ---- */

/* Whether f is described as d and x say, its own label names aside. */
PCPU_HIDDEN int pcpu__family_meta_equal(const struct pcpu_family *f, const struct pcpu_family_desc *d,
					const struct pcpu__fam_extra *x);

/* Registry locked: 0 if d, x may be another label set of the name whose
 * first family is `head` (same description but for its own label names,
 * which are not those of a label set of the name in another order); else
 * -1 with errno EEXIST and a message. */
PCPU_HIDDEN int pcpu__labelset_check(const struct pcpu_family *head, const struct pcpu_family_desc *d,
				     const struct pcpu__fam_extra *x);
/* Registry locked: appends f to the label sets of head's name. */
PCPU_HIDDEN void pcpu__labelset_link(struct pcpu_family *head, struct pcpu_family *f);
/* Registry locked: takes f out of its name's label sets; the names it
 * holds, if it is the first, go to the next one, or are released. */
PCPU_HIDDEN void pcpu__labelset_unlink(struct pcpu_registry *reg, struct pcpu_family *f);


/* ---- registry_series.c ---- */

/* The key of a series: the hash of its label values. */
PCPU_HIDDEN uint64_t pcpu__series_hash(const char *const *v, unsigned n);
/* Checks the caller's label values of a series of f and sets *out to the
 * series' whole key: those values, then the constant label values (in
 * `buf`, PCPU_STATS_LABELS_MAX entries, when there are some). */
PCPU_HIDDEN int pcpu__values_check(const struct pcpu_family *f, const char *const *v,
				   const char **buf, const char *const **out);
/* The series of f with key v (hash h), or NULL; registry locked. */
PCPU_HIDDEN struct pcpu__series *pcpu__series_find(struct pcpu_family *f, const char *const *v,
						   uint64_t h);
/* 0, or -1 with errno EEXIST and the message: another label set of f's
 * name has the series of values v (an empty value an absent label);
 * registry locked. */
PCPU_HIDDEN int pcpu__labelset_series_clash(const struct pcpu_family *f, const char *const *v);
/* The n values v in one allocation (the pointers, then the strings), as a
 * series keeps them; NULL when memory is short. */
PCPU_HIDDEN char **pcpu__values_copy(const char *const *v, unsigned n);
/* Links a new series with the given handle; registry locked; NULL with
 * errno ENOMEM, or what the directory mirror refused it with
 * (registry_observer.h). */
PCPU_HIDDEN struct pcpu__series *pcpu__series_new(struct pcpu_family *f, const char *const *v,
						  uint64_t h, void *handle,
						  struct pcpu__sstruct *owner);
/* Unlinks and frees a series, not its storage (which the caller frees
 * after); registry locked. */
PCPU_HIDDEN void pcpu__series_unlink(struct pcpu_family *f, struct pcpu__series *se);
/* Frees a series' storage (a group family's: member 0 owns it). */
PCPU_HIDDEN void pcpu__storage_free(const struct pcpu_family *f, void *h);

/* A histogram series' storage for family f: new, or over `at` -- a
 * tree's series another process made (its bucket pairs; a sparse
 * family's: its table of groups, registry_observer.h). NULL with errno. */
PCPU_HIDDEN pcpu_histogram_t *pcpu__family_histogram(const struct pcpu_family *f, void *at);
/* A new series' storage (of family f) could not be allocated: the
 * message for errno (ENOSPC, EFBIG, ENOMEM...), which it keeps. */
PCPU_HIDDEN void pcpu__storage_failed(const struct pcpu_family *f);
/* The series of f with label values v, created if absent; `info`: the
 * caller is pcpu_registry_info(). Takes the registry lock. */
PCPU_HIDDEN void *pcpu__series_get(pcpu_family_t *f, const char *const *v,
				   enum pcpu_metric_type type, int info);

/* ---- registry_groups.c ---- */

/* Reads every group of reg's group families into its gseries; registry
 * locked (snapshot.c calls it before copying). */
PCPU_HIDDEN void pcpu__groups_read_locked(struct pcpu_registry *reg);

/* ---- registry_callbacks.c: the registry's side of collectors ---- */


/* Registry locked: waits (releasing the lock meanwhile, so the caller
 * looks its series up again after) until no collection of reg runs, then
 * returns 0; -1 with errno EDEADLK if the calling thread is running one. */
PCPU_HIDDEN int pcpu__collect_wait_locked(struct pcpu_registry *reg);
/* The calling thread starts (ends) running reg's callbacks, with
 * reg->collect_busy set: what would wait for that collection fails with
 * EDEADLK on this thread instead. */
PCPU_HIDDEN void pcpu__collect_begin(struct pcpu_registry *reg);
PCPU_HIDDEN void pcpu__collect_end(void);
/* Registry locked: appends cb (its series set) to reg's callbacks. */
PCPU_HIDDEN void pcpu__callback_link_locked(struct pcpu_registry *reg, struct pcpu__callback *cb);
/* Registry locked: unlinks and frees the callback of a series going away. */
PCPU_HIDDEN void pcpu__callback_forget_locked(struct pcpu_registry *reg, struct pcpu__series *se);
/* Child side of fork(), registry locked: a collection another thread was
 * running will never end in the child. */
PCPU_HIDDEN void pcpu__collect_fork_child(struct pcpu_registry *reg);

/* ---- registry_series.c, for collector.c ---- */

/* Creates series `v` of f (counter or gauge) for callback cb; EEXIST if it
 * exists. Takes the registry lock. */
PCPU_HIDDEN int pcpu__series_add_callback(struct pcpu_family *f, const char *const *v,
					  struct pcpu__callback *cb);

/* ---- collector.c ---- */

/* Runs the callbacks of reg and stores their values (not under reg->lock).
 * Returns the number that failed, or -1 with errno (EDEADLK, ENOMEM). */
PCPU_HIDDEN int pcpu__registry_collect(struct pcpu_registry *reg);

/* Registry locked: a shared registry's series that another process
 * relabelled (pcpu_family_relabel()) dropped from this process's tables
 * (registry_series.c). */
PCPU_HIDDEN void pcpu__registry_tree_sync_locked(pcpu_registry_t *reg);

#endif /* PCPU_STATS_REGISTRY_H */
