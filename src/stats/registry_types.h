/* SPDX-License-Identifier: MIT */
/*
 * The statistics registry's structures and the inline helpers its files
 * (registry*.c, snapshot.c, collector.c) share; their functions are
 * declared in registry.h, which includes this. Not installed.
 */
#ifndef PCPU_STATS_REGISTRY_TYPES_H
#define PCPU_STATS_REGISTRY_TYPES_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include <pcpu/stats.h>

#include "stats_internal.h"
#include "hashtab.h"
#include "registry_observer.h"
#include "../core/core.h"

struct pcpu__sstruct;

/* One series: label values and the storage of its value. */
struct pcpu__series {
	struct pcpu__series *lnext, *lprev; /* family's list, in creation order */
	uint64_t hash;                /* of values: its key in the family's table */
	char **values;                /* nlabels strings, one allocation */
	void *handle;                 /* pcpu_counter_t, pcpu_gauge_t, pcpu_histogram_t * */
	struct pcpu__sstruct *owner;  /* registered struct holding the value, or NULL */
	struct pcpu__callback *cb;    /* its collector callback (collector.c), or NULL */
	struct pcpu_family *fam;      /* its family: a series the segment names
				       * (a relabelled entry's) is dropped
				       * without a search of every family */
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
	/* Another label set of the same name (PCPU_FAMILY_LABELSET): the
	 * name's families in a list, its first one -- the one the sample
	 * names table holds (registry_names.c) -- at its head. */
	struct pcpu_family *lsnext;
	int labelset;                 /* registered with PCPU_FAMILY_LABELSET */
	/* PCPU_FAMILY_SPARSE (a histogram family): its series' buckets are
	 * made as used where the registry's storage allows (histogram.c) */
	int sparse;
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
	pcpu__registry_adopt_fn adopt; /* NULL, or a shared registry's mirror's */
	pcpu__registry_relabel_fn relabel; /* NULL, or a shared registry's mirror's */
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

/* ---- helpers every registry file shares ---- */

/* Sets errno to err and, if msg, the error message; returns -1. */
static inline int pcpu__reg_fail(int err, const char *msg)
{
	if (msg)
		pcpu__set_error(msg);
	errno = err;
	return -1;
}

/* A shared registry (published with PCPU_SEGMENT_SHARED_TREE: its zone is
 * a process tree's, src/core/core.h) refuses what cannot be shared: sets
 * errno EOPNOTSUPP and the message "a shared registry <what>" and returns
 * -1; 0 for any other registry. */
static inline int pcpu__reg_tree_refuses(struct pcpu_registry *reg, const char *what)
{
	char msg[160];

	if (!pcpu__zone_is_tree(reg->zone))
		return 0;
	snprintf(msg, sizeof msg, "a shared registry %s", what);
	return pcpu__reg_fail(EOPNOTSUPP, msg);
}

/* The directory changed: pcpu_registry_generation() moves on. */
static inline void pcpu__reg_bump(struct pcpu_registry *reg)
{
	__atomic_add_fetch(&reg->generation, 1, __ATOMIC_RELEASE);
}

/* Tells the directory mirror, if any (see enum pcpu__registry_event):
 * 0, or -1 with errno and a message when it refuses an addition. */
static inline int pcpu__reg_notify(struct pcpu_registry *reg, enum pcpu__registry_event ev,
				   struct pcpu_family *f, struct pcpu__series *se)
{
	return reg->hook ? reg->hook(reg->hook_ctx, ev, f, se) : 0;
}

/* What a family has beyond its description: PCPU_SNAPSHOT_INFO, and its
 * own constant labels (pcpu_registry_family_const()). */
struct pcpu__fam_extra {
	unsigned flags;
	unsigned nconst;
	const char *const *names, *const *values;
	/* PCPU_FAMILY_LABELSET: another label set of an existing name is
	 * another family of that name (registry_labelsets.c) */
	int labelset;
	/* PCPU_FAMILY_SPARSE: a histogram family's buckets made as used */
	int sparse;
};

/* A series whose value a callback computes (pcpu_family_callback()). */
struct pcpu__callback {
	struct pcpu__callback *next, *prev; /* reg->callbacks */
	struct pcpu_family *fam;
	struct pcpu__series *se;
	pcpu_callback_fn fn;
	void *arg;
	int failed;                   /* the last collection's call failed */
};

#endif /* PCPU_STATS_REGISTRY_TYPES_H */
