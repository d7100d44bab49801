/* SPDX-License-Identifier: MIT */
/*
 * Internal structures of the statistics registry (registry.c, snapshot.c)
 * and helpers the other statistics files share. Not installed.
 */
#ifndef PCPU_STATS_REGISTRY_H
#define PCPU_STATS_REGISTRY_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include <pcpu/stats.h>

#include "internal.h"
#include "hashtab.h"
#include "registry_observer.h"

/* ---- stats_zone.c ---- */

/* The zone of standalone gauges, histograms and groups; NULL + ENOMEM. */
PCPU_HIDDEN pcpu_zone_t *pcpu__stats_zone(void);

/* ---- group.c ---- */

/* pcpu_group_free() of a group allocated in `zone`, which the caller holds
 * (a registry): no search for the zone by address. */
PCPU_HIDDEN void pcpu__group_free_in(pcpu_zone_t *zone, pcpu_group_t *g);

/* ---- histogram.c ---- */

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

/* ---- registry.c ---- */

struct pcpu__sstruct;

/* One series: label values and the storage of its value. */
struct pcpu__series {
	struct pcpu__series *lnext, *lprev; /* family's list, in creation order */
	uint64_t hash;                /* of values: its key in the family's table */
	char **values;                /* nlabels strings, one allocation */
	void *handle;                 /* pcpu_counter_t, pcpu_gauge_t, pcpu_histogram_t * */
	struct pcpu__sstruct *owner;  /* registered struct holding the value, or NULL */
	struct pcpu__callback *cb;    /* its collector callback (collector.c), or NULL */
};

struct pcpu_family {
	struct pcpu_registry *reg;
	char *name;                   /* base name (counters without _total) */
	char *help;                   /* NULL: none */
	char *unit;                   /* NULL: none */
	enum pcpu_metric_type type;
	int scale_exp10;
	unsigned nlabels;             /* the caller's, then nconst constant ones */
	char **label_names;
	unsigned nconst;              /* constant labels, last: the family's own
				       * (pcpu_registry_family_const()), then the registry's */
	unsigned nfconst;             /* of which the family's own */
	char **const_values;          /* nconst values: the family's own (owned), then
				       * the registry's (the registry's strings) */
	/* histograms */
	struct pcpu_histogram_layout layout; /* .bounds points to bounds below */
	int64_t *bounds;
	size_t nbuckets;
	int64_t *bucket_upper;        /* nbuckets - 1 inclusive upper bounds */
	uint32_t *export_buckets;     /* the exposed ones (NULL: all), see pcpu/expose.h */
	size_t nexport;
	int native_schema;            /* exponential: PCPU_SNAPSHOT_NATIVE's fields */
	int32_t native_index;
	unsigned flags;               /* PCPU_SNAPSHOT_* */
	struct pcpu__htab series;     /* struct pcpu__series *, by label values */
	size_t nseries;
	/* the same series in creation order: snapshots list them so */
	struct pcpu__series *lfirst, *llast;
	size_t index;                 /* position in reg->fams */
	/* a member of a consistent group family: series handles are its
	 * struct pcpu__gseries, shared by the members */
	struct pcpu__gfamily *gfam;
	unsigned gmember;             /* which member */
};

/* A consistent group family (pcpu_registry_group()): nmembers counter or
 * gauge families whose series, one per label set, share one pcpu_group_t. */
struct pcpu__gfamily {
	struct pcpu__gfamily *next;   /* reg->gfams */
	unsigned nmembers;
	struct pcpu_family *fams[PCPU_GROUP_MAX_MEMBERS];
};

/* A sample name a family reserves (OpenMetrics clash set), in a hash table
 * of the registry: finds families by name and detects clashes. */
struct pcpu__sname {
	struct pcpu_family *fam;
	char name[];
};

/* A struct registered with pcpu_registry_struct(). */
struct pcpu__sstruct {
	struct pcpu__sstruct *next;
	void *obj;
	size_t nfields;
	struct pcpu_family **fams;    /* family of field k */
	struct pcpu__series **series; /* series of field k */
};

/* Directory events and the observer (the segment): registry_observer.h. */

struct pcpu_registry {
	pthread_mutex_t lock;         /* guards everything below but generation */
	pcpu__registry_hook_fn hook;  /* NULL, or the directory mirror's (registry_observer.h) */
	void *hook_ctx;
	pcpu_zone_t *zone;
	struct pcpu_family **fams;
	size_t nfams, capfams;
	struct pcpu__htab names;     /* struct pcpu__sname *, registry_names.c */
	struct pcpu__sstruct *structs;
	uint64_t generation;          /* atomic */
	int is_default;
	struct pcpu_registry *next;   /* list of live registries (fork handlers) */
	/* collectors (registry_callbacks.c, collector.c), guarded by lock */
	pthread_cond_t collect_cv;    /* broadcast when a collection ends */
	int collect_busy;             /* a collection's callbacks are running */
	struct pcpu__callback *callbacks; /* every callback series, in order */
	struct pcpu__callback *callbacks_last;
	size_t ncallbacks;
	/* constant labels of every family (pcpu_registry_const_labels()),
	 * fixed before the first family; freed with the registry */
	unsigned nconst;
	char **const_names, **const_values;
	struct pcpu__gfamily *gfams;  /* consistent group families */
};

/* ---- helpers every registry_*.c file shares ---- */

/* Sets errno to err and, if msg, the error message; returns -1. */
static inline int pcpu__reg_fail(int err, const char *msg)
{
	if (msg)
		pcpu__set_error(msg);
	errno = err;
	return -1;
}

/* The directory changed: pcpu_registry_generation() moves on. */
static inline void pcpu__reg_bump(struct pcpu_registry *reg)
{
	__atomic_add_fetch(&reg->generation, 1, __ATOMIC_RELEASE);
}

/* Tells the directory mirror, if any (see enum pcpu__registry_event). */
static inline void pcpu__reg_notify(struct pcpu_registry *reg, enum pcpu__registry_event ev,
				    struct pcpu_family *f, struct pcpu__series *se)
{
	if (reg->hook)
		reg->hook(reg->hook_ctx, ev, f, se);
}

/* ---- registry_names.c: the sample-name table ---- */

/* The entry of sample name base + suffix, or NULL; registry locked. */
PCPU_HIDDEN struct pcpu__sname *pcpu__sname_find(struct pcpu_registry *reg, const char *base,
						 const char *suffix);
/* Reserves base + suffix for family f; -1 without memory. */
PCPU_HIDDEN int pcpu__sname_add(struct pcpu_registry *reg, struct pcpu_family *f,
				const char *base, const char *suffix);
/* Releases every name family f reserved. */
PCPU_HIDDEN void pcpu__sname_remove_family(struct pcpu_registry *reg, struct pcpu_family *f);
/* An info family `x_info` also owns `x`: writes it to out, returns 1 (0
 * for other families). */
PCPU_HIDDEN int pcpu__info_family_name(const char *name, unsigned flags,
				       char out[PCPU_STATS_NAME_MAX + 1]);

/* ---- registry_families.c ---- */

/* What a family has beyond its description: PCPU_SNAPSHOT_INFO, and its
 * own constant labels (pcpu_registry_family_const()). */
struct pcpu__fam_extra {
	unsigned flags;
	unsigned nconst;
	const char *const *names, *const *values;
};
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
/* Links a new series with the given handle; registry locked; NULL + ENOMEM. */
PCPU_HIDDEN struct pcpu__series *pcpu__series_new(struct pcpu_family *f, const char *const *v,
						  uint64_t h, void *handle,
						  struct pcpu__sstruct *owner);
/* Unlinks and frees a series, not its storage (which the caller frees
 * after); registry locked. */
PCPU_HIDDEN void pcpu__series_unlink(struct pcpu_family *f, struct pcpu__series *se);
/* Frees a series' storage (a group family's: member 0 owns it). */
PCPU_HIDDEN void pcpu__storage_free(const struct pcpu_family *f, void *h);
/* The series of f with label values v, created if absent; `info`: the
 * caller is pcpu_registry_info(). Takes the registry lock. */
PCPU_HIDDEN void *pcpu__series_get(pcpu_family_t *f, const char *const *v,
				   enum pcpu_metric_type type, int info);

/* Reads a series' value into a snapshot series; counts has nbuckets
 * entries for histograms. Called with the registry lock held. */
PCPU_HIDDEN void pcpu__series_read(const struct pcpu_family *f, const struct pcpu__series *se,
				   struct pcpu_snapshot_series *out, uint64_t *counts);

/* Reads every group of reg's group families into its gseries; registry
 * locked (snapshot.c calls it before copying). */
PCPU_HIDDEN void pcpu__groups_read_locked(struct pcpu_registry *reg);

/* ---- registry_callbacks.c: the registry's side of collectors ---- */

/* A series whose value a callback computes (pcpu_family_callback()). */
struct pcpu__callback {
	struct pcpu__callback *next, *prev; /* reg->callbacks */
	struct pcpu_family *fam;
	struct pcpu__series *se;
	pcpu_callback_fn fn;
	void *arg;
	int failed;                   /* the last collection's call failed */
};

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

#endif /* PCPU_STATS_REGISTRY_H */
