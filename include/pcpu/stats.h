/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/stats.h
 * The statistics registry: named metrics grouped in families, as in the
 * Prometheus data model (`http_requests_total{method="GET",code="200"}`),
 * whose values are pcpu counters, gauges and histograms.
 *
 * A registry holds families. A family has a name, help text, a unit, a type
 * (counter, gauge, histogram), a fixed list of label names, a scale, and for
 * histograms a bucket layout. Its series are the label-value combinations in
 * use, each with its own counter, gauge or histogram, allocated in the
 * registry's own per-CPU zone:
 *
 *     registry ── family "http_requests" (counter; labels method, code)
 *                   ├── {GET, 200}  -> pcpu_counter_t
 *                   └── {POST, 500} -> pcpu_counter_t
 *              ── family "queue_depth" (gauge) ── {} -> pcpu_gauge_t
 *
 * Names and labels are checked against the Prometheus rules when a family or
 * series is created; a refused one fails with EINVAL and pcpu_stats_error()
 * says what is wrong.
 *
 * Concurrency: creating, looking up and removing families and series, taking
 * snapshots and writing expositions may all run concurrently from any
 * thread; they take the registry's mutex, briefly. Updating a metric never
 * does: a series' handle is an ordinary counter, gauge or histogram, updated
 * through its inline fast path, with no lookup and no lock. Keep the handle.
 *
 * Iteration: pcpu_registry_snapshot() returns every family and series with
 * its metadata and value as plain data (pcpu/expose.h), to walk or to write.
 *
 * Lifetime: a handle stays valid until its series (or family, or registry)
 * is removed. Removal frees the storage at once, so the caller guarantees no
 * thread still updates a series it removes, as for free().
 *
 * Static definition, for a data plane's global statistics: declare a struct
 * of `struct pcpu_counter` / `struct pcpu_gauge` fields, describe its fields
 * once, and register it; the hot path then adds to a field directly:
 *
 *     struct ep_stats { struct pcpu_counter pkts, bytes; struct pcpu_gauge flows; };
 *     static const struct pcpu_stats_field ep_fields[] = {
 *         PCPU_STATS_COUNTER(struct ep_stats, pkts, "ep_packets", "Packets seen."),
 *         PCPU_STATS_COUNTER(struct ep_stats, bytes, "ep_bytes", "Bytes seen."),
 *         PCPU_STATS_GAUGE(struct ep_stats, flows, "ep_flows", "Flows open."),
 *     };
 *     struct ep_stats *ep = pcpu_registry_struct(reg, sizeof *ep, ep_fields,
 *                                               3, 0, NULL, NULL);
 *     ...
 *     pcpu_counter_add(&ep->pkts, 1);     // one rseq add, no lookup
 *
 * The registry's data model is deliberately flat -- fixed metadata per
 * family and per series, values that are counters in one zone -- so that a
 * directory of it can be written to a shared mapping for other processes.
 */
#ifndef PCPU_STATS_H
#define PCPU_STATS_H

#include <stddef.h>
#include <pcpu/common.h>
#include <pcpu/zone.h>
#include <pcpu/counter.h>
#include <pcpu/gauge.h>
#include <pcpu/histogram.h>
#include <pcpu/fraction.h>
#include <pcpu/group.h>
#include <pcpu/expose.h>

struct pcpu_hcounter; /* pcpu/hcounter.h */

PCPU_BEGIN_DECLS

typedef struct pcpu_registry pcpu_registry_t;
typedef struct pcpu_family pcpu_family_t;

/** Describes a family; copied at registration. */
struct pcpu_family_desc {
	/** Family name (`[a-zA-Z_:][a-zA-Z0-9_:]*`). A counter's name may end in
	 * `_total`; it is stripped, and the writers add it back. */
	const char *name;
	/** Help text, UTF-8; NULL means none. */
	const char *help;
	/** Unit (OpenMetrics), e.g. "seconds" or "bytes"; the name must then
	 * end in "_<unit>". NULL or "" for none. */
	const char *unit;
	enum pcpu_metric_type type;
	/** Label names of every series of the family (may be 0 and NULL). */
	unsigned nlabels;
	const char *const *label_names;
	/** Exposed value = value * 10^scale_exp10 (|scale_exp10| <= 22), e.g.
	 * -9 to record nanoseconds and expose seconds. */
	int scale_exp10;
	/** Histograms: the bucket layout shared by every series. */
	const struct pcpu_histogram_layout *histogram;
};

/**
 * Creates an empty registry with its own per-CPU zone (PCPU_INDEX_DEFAULT).
 * NULL with errno ENOMEM. Thread-safe; not async-signal-safe.
 * Cost: a zone creation (an mmap of address space, nothing resident).
 */
PCPU_API pcpu_registry_t *pcpu_registry_create(void);

/**
 * Destroys a registry with all its families, series and registered structs.
 * The caller guarantees no other thread uses it or any of its handles.
 * NULL is a no-op. The default registry cannot be destroyed (no-op).
 * Not thread-safe against other uses of `reg` (by contract there are none);
 * not async-signal-safe. Cost: linear in the series, plus a munmap.
 */
PCPU_API void pcpu_registry_destroy(pcpu_registry_t *reg);

/**
 * The process-wide registry, created on first call and never destroyed.
 * NULL with errno ENOMEM if it cannot be created (a later call retries).
 * Thread-safe; not async-signal-safe. Cost: a load once created.
 */
PCPU_API pcpu_registry_t *pcpu_registry_default(void);

/**
 * The per-CPU zone every value of `reg` lives in. Thread-safe;
 * async-signal-safe. Cost: a load.
 */
PCPU_API pcpu_zone_t *pcpu_registry_zone(pcpu_registry_t *reg);

/**
 * A number that changes whenever a family, series or struct is added to or
 * removed from the registry (not on value updates). Thread-safe; lock-free.
 * Cost: an atomic load.
 */
PCPU_API uint64_t pcpu_registry_generation(pcpu_registry_t *reg);

/**
 * Returns the family described by `desc`, creating it if the registry has
 * none of that name. An existing family of that name is returned only if it
 * has the same type, help, unit, labels, scale and layout; otherwise EEXIST.
 * Returns NULL with errno: EINVAL (invalid name, label name, unit, help,
 * scale or layout; reserved label `le` in a histogram), EEXIST (a family of
 * that name differs, or one of the sample names the family would write --
 * `<name>_total`, `<name>_bucket`, ... -- belongs to another family),
 * ENOSPC (a shared registry's directory cannot record it: pcpu/segment.h,
 * PCPU_SEGMENT_SHARED_TREE), ENOMEM. pcpu_stats_error() says what is wrong.
 * Thread-safe; not async-signal-safe. Cost: a mutex and a hash lookup.
 */
PCPU_API pcpu_family_t *pcpu_registry_family(pcpu_registry_t *reg,
					     const struct pcpu_family_desc *desc);

/**
 * The family named `name` (a counter also by its `_total` name), or NULL
 * with errno ENOENT. In a shared registry (PCPU_SEGMENT_SHARED_TREE) only
 * the families this process registered or inherited at fork(): one another
 * process of the tree made is found by registering it with the same
 * description. Thread-safe; not async-signal-safe (takes the registry's
 * mutex). Cost: a hash lookup of the name.
 */
PCPU_API pcpu_family_t *pcpu_registry_find(pcpu_registry_t *reg, const char *name);

/**
 * Removes a family with all its series and frees them. Series that belong
 * to a registered struct make it fail with EBUSY (remove the struct first).
 * Returns 0 or -1 with errno EINVAL (not a family of `reg`) or EBUSY.
 * The caller guarantees no thread still uses the family or its handles.
 * Thread-safe; not async-signal-safe. Cost: linear in the family's series
 * (each freed in the registry's zone).
 */
PCPU_API int pcpu_registry_remove_family(pcpu_registry_t *reg, pcpu_family_t *fam);

/** Name of a family (for counters, without `_total`). Thread-safe;
 * async-signal-safe; cost: a load. Valid while the family exists. */
PCPU_API const char *pcpu_family_name(const pcpu_family_t *fam);

/**
 * The label names a family's series take values for, in the order
 * pcpu_family_counter() and the others want the values (the family's and
 * registry's constant labels are not among them). Stores their number in
 * `*n` (when `n` is not NULL) and returns the array, valid as long as the
 * family; NULL with `*n` = 0 for a family without labels or a NULL family.
 * Thread-safe (the names never change); async-signal-safe; cost: loads.
 * Since PCPU_0.2.
 */
PCPU_API const char *const *pcpu_family_label_names(const pcpu_family_t *fam, unsigned *n);

/** Type of a family. Thread-safe; async-signal-safe; cost: a load. */
PCPU_API enum pcpu_metric_type pcpu_family_type(const pcpu_family_t *fam);

/** Number of series a family has now. Thread-safe; not async-signal-safe
 * (takes the registry's mutex). Cost: the mutex and a load. */
PCPU_API size_t pcpu_family_size(pcpu_family_t *fam);

/**
 * The counter of a counter family's series with these label values (one per
 * label name; NULL when the family has no labels), created (zero) if absent.
 * Returns NULL with errno: EINVAL (not a counter family, NULL value, value
 * not UTF-8 or too long), ENOSPC (the registry is published and its
 * segment's file system has no room for the new series' values -- series
 * made before keep counting exactly -- or, in a shared registry, its
 * directory cannot record the series; EIO there: its entry of the series
 * is corrupt), EFBIG (a published registry's file would pass
 * RLIMIT_FSIZE), ENOMEM; pcpu_stats_error() says which.
 * Thread-safe; not async-signal-safe.
 * Cost: a mutex and a hash lookup -- call it once, keep the handle.
 */
PCPU_API pcpu_counter_t pcpu_family_counter(pcpu_family_t *fam, const char *const *label_values);

/** pcpu_family_counter() for a gauge family; same errors (EINVAL if the
 * family is not a gauge family, or is an info family: pcpu_registry_info()
 * makes those series), thread safety and cost. */
PCPU_API pcpu_gauge_t pcpu_family_gauge(pcpu_family_t *fam, const char *const *label_values);

/** pcpu_family_counter() for a histogram family; same errors (EINVAL if
 * the family is not a histogram family), thread safety and cost, plus the
 * allocation of the histogram's buckets. */
PCPU_API pcpu_histogram_t *pcpu_family_histogram(pcpu_family_t *fam,
						 const char *const *label_values);

/**
 * Looks a series up without creating it: its handle (pcpu_counter_t,
 * pcpu_gauge_t or pcpu_histogram_t *, by the family's type), or NULL with
 * errno ENOENT. In a shared registry, the series this process registered or
 * inherited at fork(); registering one another process made
 * (pcpu_family_counter()...) returns that series' storage. Thread-safe; not
 * async-signal-safe (takes the registry's mutex). Cost: checking the label
 * values and a hash lookup of them.
 */
PCPU_API void *pcpu_family_lookup(pcpu_family_t *fam, const char *const *label_values);

/**
 * Removes a series and frees its storage. Returns 0, or -1 with errno ENOENT
 * (no such series) or EBUSY (it is a field of a registered struct). The
 * caller guarantees no thread still updates it. Thread-safe; not
 * async-signal-safe. Cost: a hash lookup and a zone free (waits for a
 * running collection when the series has a callback).
 */
PCPU_API int pcpu_family_remove(pcpu_family_t *fam, const char *const *label_values);

/**
 * Relabels a series of a shared registry (PCPU_SEGMENT_SHARED_TREE,
 * pcpu/segment.h), which never removes one: the series of `fam` with
 * label values old_values becomes the series with label values
 * new_values, every value from zero (an info series, pcpu_registry_info(),
 * keeps its 1), over the same storage and directory entry -- so a
 * pre-fork server can let a new key reuse an expired key's series instead
 * of growing until its directory is full. Every process of
 * the tree sees it at its next registration or lookup in the registry:
 * the series it holds under old_values is dropped (a later lookup of
 * old_values makes a new series, from zero) and new_values finds the
 * relabelled one. Readers show the new labels, never the old values under
 * them.
 *
 * Precondition (as for free()): no thread of any process of the tree
 * updates the old series during the call or uses a handle to it after;
 * the caller's own protocol ensures it (say, each worker acknowledges an
 * epoch after which it no longer uses the old key).
 *
 * Returns 0, or -1 with errno: EINVAL (fam NULL, label values NULL,
 * invalid or of the wrong count: as pcpu_family_counter()), ENOENT (the
 * tree has no series old_values), EEXIST (a series new_values exists, in
 * this family or in another label set of its name), ENOSPC or E2BIG (the
 * directory's string table cannot take the new values: the old ones'
 * room is reused by the next values of their size class, and a full
 * table whose class has no freed room refuses), ENOTSUP (a private
 * registry or one published by one process only -- there, remove the
 * series and make the new one --, a consistent group family, a field of
 * a registered struct), ENOMEM. Thread-safe; not
 * async-signal-safe (the registry's mutex, the tree's lock). Cost: two
 * hash lookups and an entry rewrite; then, in every process of the tree,
 * once, an update of its index of the directory and a look at its series
 * on the relabelled entry (the tree's relabel log) -- or, where the log
 * does not hold it (more than 8,192 relabellings since the process last
 * looked, a process killed mid-relabel, a library build without the log
 * in the tree), a rebuild of the index and a walk of its series
 * (O(entries)); a process that forks does it before fork(), so that its
 * later children start from it.
 */
PCPU_API int pcpu_family_relabel(pcpu_family_t *fam, const char *const *old_values,
				 const char *const *new_values);

/**
 * pcpu_family_relabel() for the series of one key in several families at
 * once: in each of the n families `fams` (of one shared registry, each
 * named once), the series with label values old_values becomes the series
 * with label values new_values -- all of them or none. For a server that
 * keeps several families per key (requests, bytes, a latency histogram...)
 * and gives an expired key's series to a new key: one call instead of n,
 * and no key left half relabelled when one of them cannot be (its room in
 * the string table, say).
 *
 * The label values are each family's own (as in pcpu_family_counter()):
 * every family takes the same number of them. Readers see the entries
 * change in the order of `fams` (list last the family by which a reader
 * tells a key is whole). The other processes of the tree follow the whole
 * relabelling as one (the tree's relabel log holds it as a run of adjacent
 * directory entries, or a few).
 *
 * Precondition: as pcpu_family_relabel()'s, for every series named.
 * A process killed during the call (between two entries' rewrites) can
 * leave some of them relabelled and the others not: each series is then
 * under one of the two label sets, whole, as a relabelling killed
 * mid-entry leaves it (the next taker of the tree's lock repairs that).
 *
 * Returns 0, or -1 with errno, and nothing relabelled: EINVAL (fams NULL,
 * n 0, a family NULL, named twice or of another registry, label values as
 * pcpu_family_relabel() refuses them), and pcpu_family_relabel()'s errors
 * for any one family (the message names it when n > 1): ENOENT, EEXIST,
 * ENOSPC or E2BIG (the string table cannot take all of the new values),
 * ENOTSUP, ENOMEM. Thread-safe; not async-signal-safe (the registry's
 * mutex, the tree's lock, once). Cost: pcpu_family_relabel()'s hash
 * lookups and entry rewrite per family, under one taking of the locks;
 * then, in every process of the tree, once, an update of its index per
 * entry and a look at its series on them.
 */
PCPU_API int pcpu_families_relabel(pcpu_family_t *const *fams, size_t n,
				   const char *const *old_values, const char *const *new_values);

/**
 * Convenience: the unlabelled counter `name` (family created as needed with
 * `help`). Same errors as pcpu_registry_family() and pcpu_family_counter().
 * Thread-safe; not async-signal-safe. Cost: two mutex sections; keep the
 * handle.
 */
PCPU_API pcpu_counter_t pcpu_registry_counter(pcpu_registry_t *reg, const char *name,
					      const char *help);

/** Convenience: the unlabelled gauge `name`; as pcpu_registry_counter(). */
PCPU_API pcpu_gauge_t pcpu_registry_gauge(pcpu_registry_t *reg, const char *name,
					  const char *help);

/** Describes one field of a statistics struct (see the file comment). */
struct pcpu_stats_field {
	const char *name;          /**< family name */
	const char *help;          /**< help text, may be NULL */
	const char *unit;          /**< unit, may be NULL */
	enum pcpu_metric_type type;   /**< counter or gauge */
	size_t offset;             /**< offsetof(struct, field) */
	int scale_exp10;           /**< as in pcpu_family_desc */
};

/** Field descriptor of a `struct pcpu_counter` member. */
#define PCPU_STATS_COUNTER(type, field, name, help) \
	{ (name), (help), NULL, PCPU_METRIC_COUNTER, offsetof(type, field), 0 }
/** Field descriptor of a `struct pcpu_gauge` member. */
#define PCPU_STATS_GAUGE(type, field, name, help) \
	{ (name), (help), NULL, PCPU_METRIC_GAUGE, offsetof(type, field), 0 }

/**
 * Allocates a statistics struct of `size` bytes in the registry's zone (all
 * zero) and registers each field as a series: family `fields[k].name`
 * (created as by pcpu_registry_family() with the given label names), label
 * values `label_values`. Several instances of one struct (one per
 * interface, say) differ by their label values. The fields must be
 * `struct pcpu_counter` (counter) or `struct pcpu_gauge` (gauge) members at
 * 8-byte-aligned offsets inside `size`.
 * Returns the struct (slot 0's copy: add to `&s->field` with
 * pcpu_counter_add() / pcpu_gauge_add()), or NULL with errno: EINVAL (bad
 * field, name or label), EEXIST (a series with these labels already exists
 * in one of the families, or a family conflicts), E2BIG, ENOMEM. All or
 * nothing: on failure nothing stays registered.
 * Thread-safe; not async-signal-safe. Cost: per field, a family
 * registration (a hash lookup of its names) and a series; one zone
 * allocation for the struct.
 */
PCPU_API void *pcpu_registry_struct(pcpu_registry_t *reg, size_t size,
				    const struct pcpu_stats_field *fields, size_t nfields,
				    unsigned nlabels, const char *const *label_names,
				    const char *const *label_values);

/**
 * Unregisters a struct from pcpu_registry_struct() (its series) and frees
 * it. Families it created stay (possibly empty). Returns 0 or -1 with errno
 * EINVAL (not a struct of `reg`). The caller guarantees no thread still
 * updates it. Thread-safe; not async-signal-safe. Cost: linear in the
 * registered structs (found by address) plus one series removal per field.
 */
PCPU_API int pcpu_registry_struct_remove(pcpu_registry_t *reg, void *s);

/**
 * Takes a snapshot of every family and series of `reg`: metadata copied,
 * values read (each as its type's read guarantees), families sorted by name,
 * series of a family in the order they were created. The registry's mutex is held only while
 * copying; formatting happens outside it. Free with pcpu_snapshot_free().
 * NULL with errno ENOMEM. Thread-safe; not async-signal-safe.
 * Cost: every value read once, plus sorting.
 * Its families are marked PCPU_SNAPSHOT_CHECKED (pcpu/expose.h): their
 * names and labels were checked at registration, so pcpu_snapshot_write()
 * and pcpu_snapshot_merge_add() do not check them again.
 */
PCPU_API struct pcpu_snapshot *pcpu_registry_snapshot(pcpu_registry_t *reg);

/** Frees a snapshot from pcpu_registry_snapshot() (and only those; NULL is
 * a no-op). Thread-safe for distinct snapshots; not async-signal-safe.
 * Cost: freeing its arena's blocks. */
PCPU_API void pcpu_snapshot_free(struct pcpu_snapshot *s);

/**
 * Snapshot and write in one call: on success *out holds the whole
 * exposition (free() it), see pcpu_snapshot_write(). Returns 0, or -1 with
 * errno (ENOMEM, or EINVAL for NULL arguments or an unknown format) and
 * nothing allocated. Thread-safe; not async-signal-safe. Cost: a
 * pcpu_registry_snapshot() and a pcpu_snapshot_write().
 */
PCPU_API int pcpu_registry_write(pcpu_registry_t *reg, enum pcpu_format fmt, char **out,
				 size_t *len);

/* ---- consistent groups as families ---- */

typedef struct pcpu__gfamily pcpu_group_family_t;

/**
 * Registers a consistent group family: `nmembers` (1 to
 * PCPU_GROUP_MAX_MEMBERS) new counter or gauge families, members[k]
 * described as for pcpu_registry_family() and all with the same label
 * names, whose series -- one per label set in every member -- are the
 * members of one pcpu_group_t (pcpu/group.h), updated together with
 * pcpu_group_add():
 *
 *     flow_packets_total{flow="a"} and flow_bytes_total{flow="a"}
 *       = members 0 and 1 of pcpu_group_family_series(gf, {"a"})
 *
 * Every snapshot and exposition reads each group once, consistently, and
 * shows that read in every member: an update is wholly in it or wholly
 * absent (bytes == 1500 * packets if every update adds (1, 1500)). A group
 * that stays in mid-update past PCPU_GROUP_READ_TIMEOUT_NS (its writer
 * preempted that long, under the registry's lock) is left out of that
 * snapshot in every member. The members are ordinary families for lookups
 * by name and for exposition, but their series are made and removed only
 * through the group family (EINVAL / EBUSY otherwise).
 *
 * In a published segment (format 2.3) each group holds its last read:
 * readers in other processes see the members of a group from one
 * consistent read, as fresh as the writer's last collection (every
 * snapshot, write or pcpu_registry_collect() in this process; a publisher
 * not scraped in-process calls pcpu_registry_collect() on a timer).
 * Returns the group family (valid until the registry is destroyed), or
 * NULL with errno: EINVAL (a member not a counter or gauge, labels that
 * differ, invalid description), EEXIST (a member's name or sample name is
 * taken), ENOMEM. All or nothing. Thread-safe; not async-signal-safe.
 * Cost: one family registration per member.
 */
PCPU_API pcpu_group_family_t *pcpu_registry_group(pcpu_registry_t *reg,
						  const struct pcpu_family_desc *members,
						  unsigned nmembers);

/**
 * The group of the series with these label values (one per label name of
 * the members), created (zero) if absent: update it with
 * pcpu_group_add(g, 0, d) or pcpu_group_add2(g, 0, d0, d1) -- group 0 of a
 * one-group object -- with member k of d going to members[k]. Returns NULL
 * with errno EINVAL (bad label values) or ENOMEM. Thread-safe; not
 * async-signal-safe. Cost: a mutex and a hash lookup; keep the handle.
 */
PCPU_API pcpu_group_t *pcpu_group_family_series(pcpu_group_family_t *gf,
						const char *const *label_values);

/**
 * Removes the series with these label values from every member and frees
 * its group. The caller guarantees no thread still updates it. Returns 0
 * or -1 with errno EINVAL or ENOENT. Thread-safe; not async-signal-safe.
 * Cost: one hash lookup and unlink per member, and a group free.
 */
PCPU_API int pcpu_group_family_remove(pcpu_group_family_t *gf, const char *const *label_values);

/* ---- constant labels and info metrics (build information) ---- */

/**
 * Gives every family of `reg` the constant labels names[k]="values[k]"
 * (an instance, a region, a build: what Prometheus clients call const
 * labels). They come after each family's own labels in every series of
 * every family -- in snapshots, every exposition format and published
 * segments alike -- and the caller never passes them: handles are still
 * looked up with the family's own label values only.
 * Precondition: call it once, right after pcpu_registry_create(), before
 * the first family (EBUSY otherwise): a family's label set is fixed.
 * A family may then not use these names itself, and its own labels plus
 * these are at most PCPU_STATS_LABELS_MAX (EINVAL at registration).
 * Returns 0 or -1 with errno EINVAL (NULL, n not 1..32, an invalid or
 * repeated name, `le`, a value not UTF-8), EBUSY, ENOMEM. Thread-safe;
 * not async-signal-safe. Cost: copies the strings.
 */
PCPU_API int pcpu_registry_const_labels(pcpu_registry_t *reg, unsigned n,
					const char *const *names, const char *const *values);

/**
 * pcpu_registry_family() for a family whose every series also carries the
 * constant labels names[k]="values[k]" (1 to 32 of them; a subsystem, a
 * shard, the version of one component): after the family's own labels and
 * before the registry's (pcpu_registry_const_labels()), in snapshots, every
 * exposition format and published segments. Handles are looked up with the
 * family's own label values only, as with the registry's constant labels.
 * An existing family of that name is returned only if it has the same
 * description and the same constant labels, names and values, in the same
 * order (a family from pcpu_registry_family() has none); otherwise EEXIST.
 * Errors: those of pcpu_registry_family(), plus EINVAL for n not 1 to 32,
 * NULL names or values, an invalid or repeated name, `le`, a value that is
 * not UTF-8, a name the family's own labels or the registry's constant
 * labels use, or more than PCPU_STATS_LABELS_MAX labels in all.
 * Thread-safe; not async-signal-safe. Cost: pcpu_registry_family()'s, plus
 * copying the strings when the family is created.
 */
PCPU_API pcpu_family_t *pcpu_registry_family_const(pcpu_registry_t *reg,
						   const struct pcpu_family_desc *desc, unsigned n,
						   const char *const *names,
						   const char *const *values);

/** pcpu_registry_family_ex() flags. */
enum {
	/**
	 * A family with fractions (pcpu/fraction.h): its values are doubles.
	 * A counter or gauge (scale_exp10 0) series is PCPU_FRACTION_WORDS
	 * words -- whole units, billionths, a residue -- updated with
	 * pcpu_counter_add_double(), pcpu_gauge_add_double(),
	 * pcpu_gauge_set_double(); a histogram (any scale) has a double sum
	 * and a residue beside its buckets, for pcpu_histogram_observe().
	 * Every reader shows the values whole (PCPU_SNAPSHOT_NANOS).
	 */
	PCPU_FAMILY_FRACTIONS = 1u << 0,
	/**
	 * Another label set of a name: where a family of desc's name exists
	 * with other label names, but the same type, help, unit, scale,
	 * bucket layout, fractions and constant labels, a family with desc's
	 * label names is made (or found) beside it, whose series are series
	 * of the same metric -- `requests_total{path="/x"}` beside
	 * `requests_total{method="GET"}`, as Prometheus, OpenMetrics,
	 * protobuf and OTLP allow. Every writer puts a name's label sets
	 * under one HELP and TYPE; published segments (format 2.8) record
	 * them and every reader shows one metric. Refused with EEXIST: the
	 * description differs in anything but the label names, or has the
	 * label names of one of the name's sets in another order (pass them
	 * in that family's order, pcpu_family_label_names()), or -- later, at
	 * pcpu_family_counter() and the others -- a series equal to one of
	 * another label set, an empty label value being an absent label.
	 * Each label set is a pcpu_family_t of its own: removed on its own
	 * (pcpu_registry_remove_family()); pcpu_registry_find() gives the
	 * name's first. Not for a member of a consistent group family.
	 */
	PCPU_FAMILY_LABELSET = 1u << 1,
	/**
	 * A histogram family whose series' buckets take memory as they are
	 * used (PCPU_HISTOGRAM_SPARSE, pcpu/histogram.h: what a record then
	 * costs, and that a group's first record allocates). A storage
	 * choice, not part of the description: the family's first
	 * registration makes it, a later one of the same description gets the
	 * family as it is. Published too (pcpu/segment.h): readers find each
	 * series' groups by a table in the segment (format 2.10; readers
	 * before it refuse such a family, never show a wrong number). In a
	 * shared tree a group is made once for the tree, under the tree's
	 * lock, and every process of the tree must register the family alike:
	 * one that registers it without the flag where another registered it
	 * with (or the reverse) gets EEXIST. EINVAL for a counter or gauge
	 * family. Since PCPU_0.2.
	 */
	PCPU_FAMILY_SPARSE = 1u << 2,
};

/**
 * pcpu_registry_family_const() with options: `flags`, any of
 * PCPU_FAMILY_FRACTIONS, PCPU_FAMILY_LABELSET and PCPU_FAMILY_SPARSE; `n` constant labels
 * (0: none, `names` and `values` may then be NULL). With no flag it is
 * pcpu_registry_family_const() (or pcpu_registry_family() for n = 0): an
 * existing family of desc's name is returned only if it is described the
 * same, else EEXIST; a name may have several label sets, and each is
 * returned to the description that matches it.
 * Returns the family or NULL with errno: as pcpu_registry_family_const();
 * EINVAL for an unknown flag, a counter or gauge with fractions and a
 * nonzero scale; EEXIST as PCPU_FAMILY_LABELSET says. Thread-safe; not
 * async-signal-safe. Cost: pcpu_registry_family()'s, plus a walk of the
 * name's label sets. Since PCPU_0.2.
 */
PCPU_API pcpu_family_t *pcpu_registry_family_ex(pcpu_registry_t *reg,
						const struct pcpu_family_desc *desc, unsigned flags,
						unsigned n, const char *const *names,
						const char *const *values);

/**
 * pcpu_registry_family_ex() with PCPU_FAMILY_FRACTIONS: a family whose
 * values are doubles (pcpu/fraction.h). A counter or gauge series is
 * PCPU_FRACTION_WORDS words of the registry's zone: whole units (the
 * handle, as any counter or gauge series), billionths of a unit beside
 * them (pcpu_counter_at(handle, 1), a counter's word) and the residue, a
 * double (word 2's slot 0 mirror). The exposed value is whole +
 * billionths * 10^-9 + residue: pcpu_counter_add_double(),
 * pcpu_gauge_add_double() and pcpu_gauge_set_double() keep it so for
 * every double (an add of 0.25 is 250000000 billionths; the billionths'
 * sum may pass 10^9 or go negative -- readers fold it into the whole
 * units, PCPU_SNAPSHOT_NANOS in pcpu/expose.h). A histogram family (any
 * scale) gets a double sum and a residue beside its buckets, for
 * pcpu_histogram_observe(). For double-valued APIs over pcpu
 * (prometheus-cpp's `Increment(0.5)`, `Set(0.75)`, a `metrics` gauge's
 * set(16e9)): every exposition, snapshot and published segment shows the
 * value whole. `n` may be 0 (no constant labels; `names` and `values`
 * may then be NULL). A counter's or gauge's scale_exp10 must be 0.
 * Returns the family or NULL with errno: as pcpu_registry_family_const(),
 * and EINVAL for a counter or gauge with a nonzero scale; EEXIST where a
 * family of that name exists without fractions (or one without is asked
 * for by pcpu_registry_family() where this made one). A reader of a
 * segment format before 2.8 refuses such a family's series (2.7 readers
 * the whole segment), never shows a wrong number. Thread-safe; not
 * async-signal-safe. Cost: pcpu_registry_family()'s; each counter or
 * gauge series takes three words of the zone, a histogram series one more
 * (count, sum) pair's room. Since PCPU_0.2.
 */
PCPU_API pcpu_family_t *pcpu_registry_family_nanos(pcpu_registry_t *reg,
						   const struct pcpu_family_desc *desc, unsigned n,
						   const char *const *names,
						   const char *const *values);

/**
 * Registers an info metric: the gauge family `name` (which must end in
 * `_info`, e.g. "myapp_build_info") with these label names, and its series
 * with these label values set to 1 -- the convention Prometheus uses for
 * build and version information (`myapp_build_info{version="1.2",
 * revision="abc"} 1`), joined to other series in queries with
 * `* on(instance) group_left(version)`. Call it again with other label
 * values to add series. OpenMetrics exposes it as an info metric (`# TYPE
 * myapp_build info`, samples `myapp_build_info{...} 1`); Prometheus 0.0.4,
 * protobuf and JSON as a gauge (PCPU_SNAPSHOT_INFO in pcpu/expose.h), and a
 * published segment as a gauge. The family reserves its OpenMetrics name
 * too: no other family may be named `myapp_build`. Its series are made
 * only here (pcpu_family_gauge() and pcpu_family_callback() refuse it with
 * EINVAL) and are exposed as 1 whatever a handle from pcpu_family_lookup()
 * is set to.
 * Returns 0, or -1 with errno: EINVAL (NULL registry, name without
 * `_info`, invalid name or labels), EEXIST (the series exists, the family
 * exists with other labels or help or as a plain gauge, or another family
 * is named `name` without `_info`), ENOMEM. Thread-safe; not
 * async-signal-safe. Cost: a family registration and a series creation.
 */
PCPU_API int pcpu_registry_info(pcpu_registry_t *reg, const char *name, const char *help,
				unsigned nlabels, const char *const *label_names,
				const char *const *label_values);

/* ---- collectors: series whose values a callback computes at read time ---- */

/**
 * A collector callback: computes the current value of one series (a queue's
 * depth, a pool's size, a value only the kernel knows) into *value -- in the
 * family's unit before scaling, modulo 2^64 for counters -- and returns 0;
 * or returns non-zero (errno may say why) when it cannot, and the series is
 * then left out of that snapshot.
 *
 * The contract (pcpu_family_callback() registers one):
 *  - When it runs: at the start of every pcpu_registry_snapshot(),
 *    pcpu_registry_write() and pcpu_registry_collect() of its registry, in
 *    the thread that called them, one collection at a time per registry (a
 *    second waits for the first), callbacks in registration order.
 *  - Locks: none of the registry's. The registry's mutex is not held while
 *    callbacks run, so one that blocks delays only the collection it runs
 *    in (and snapshots waiting for it): registration, lookups, updates and
 *    segment readers go on.
 *  - What it may call: anything, including the registry's own functions --
 *    registering families and series, looking up and updating handles --
 *    except those that would wait for the collection it runs in:
 *    pcpu_registry_snapshot(), pcpu_registry_write() and
 *    pcpu_registry_collect() of the same registry, and removing a series
 *    with a callback (or a family holding one) from it. Those fail at once
 *    with EDEADLK instead of deadlocking. pcpu_registry_destroy() of the
 *    same registry is forbidden (as from any thread still using it).
 *  - Failure: a non-zero return leaves that series out of the snapshot (the
 *    exposition stays valid, the other series are there);
 *    pcpu_registry_collect() returns the number of failures and
 *    pcpu_stats_error() names the family.
 *  - Removal: once pcpu_family_remove() (or removing its family) returns,
 *    the callback is neither running nor called again, so `arg` may be
 *    freed. Removal waits for a collection in progress to finish.
 */
typedef int (*pcpu_callback_fn)(void *arg, int64_t *value);

/**
 * Adds to a counter or gauge family the series with these label values,
 * whose value `fn(arg, &value)` computes at each collection (see
 * pcpu_callback_fn for when it runs and what it may do). It is exposed,
 * snapshotted and published in a segment like any series of the family.
 * A published segment is read by other processes, which cannot run the
 * callback: it holds the value of the last collection in this process
 * (every snapshot or exposition collects; a publisher without scrapes of
 * its own calls pcpu_registry_collect() on a timer).
 * Returns 0, or -1 with errno: EINVAL (NULL fn, a histogram or info
 * family, bad label values), EEXIST (the series exists), ENOMEM. Thread-safe; not
 * async-signal-safe. Cost: a mutex, a hash lookup and one allocation.
 */
PCPU_API int pcpu_family_callback(pcpu_family_t *fam, const char *const *label_values,
				  pcpu_callback_fn fn, void *arg);

/**
 * Shows hierarchical counter `h` (pcpu/hcounter.h) in gauge family `fam`:
 * three callback series (pcpu_family_callback()) whose last label, which
 * must be named "bound", is "value", "min" and "max": the counter's
 * approximation and the bounds of its precise sum (pcpu_hcounter_approx()),
 * as of each collection. `label_values` gives the family's other labels'
 * values (NULL when "bound" is its only label). The counter must outlive
 * the series (remove them, or the family, before destroying it).
 * Returns 0, or -1 with errno: EINVAL (NULL family or counter, not a gauge
 * family, no last label "bound", bad label values), EEXIST (the series
 * exist), EOPNOTSUPP (a process tree's shared registry), ENOMEM; all three
 * series or none. Thread-safe; not async-signal-safe. Cost: three callback
 * registrations; each collection, three O(1) reads of the counter.
 */
PCPU_API int pcpu_family_hcounter(pcpu_family_t *fam, const char *const *label_values,
				  const struct pcpu_hcounter *h);

/**
 * Registers gauge family `name` (help text `help`, may be NULL) with the
 * one label "bound", and counter `h`'s three series in it
 * (pcpu_family_hcounter()): `name{bound="value"}`, `{bound="min"}`,
 * `{bound="max"}` in pcpustat and every exposition. Returns the family, or
 * NULL with errno as pcpu_registry_family() and pcpu_family_hcounter() set
 * it. Thread-safe; not async-signal-safe. Cost: a family registration and
 * three callback series.
 */
PCPU_API pcpu_family_t *pcpu_registry_hcounter(pcpu_registry_t *reg, const char *name,
					       const char *help, const struct pcpu_hcounter *h);

/**
 * Runs every callback of `reg` now and stores their values, and reads every
 * group of its group families into its published segment copy -- what each
 * snapshot does first; a publisher whose registry is not scraped in-process
 * calls it on a timer so that segment readers see fresh values. Returns the number of callbacks that failed (0 if
 * all worked; pcpu_stats_error() names the last failed family), or -1 with
 * errno EINVAL (NULL), EDEADLK (called from one of reg's callbacks),
 * ENOMEM. Thread-safe; not async-signal-safe. Cost: the callbacks', plus a
 * gauge set per callback.
 */
PCPU_API int pcpu_registry_collect(pcpu_registry_t *reg);

/**
 * Registers the standard process collector in `reg`, as the Prometheus
 * client libraries ship it, computed from /proc/self and getrusage() at
 * each collection: process_cpu_seconds_total (user + system CPU time),
 * process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds, process_max_fds (RLIMIT_NOFILE's soft limit) and
 * process_start_time_seconds (since the Unix epoch). Where /proc cannot be
 * read, those series are left out of snapshots (see pcpu_callback_fn).
 * Returns 0, or -1 with errno EEXIST (already registered, or a name taken),
 * ENOMEM; families registered before the failure stay. Thread-safe; not
 * async-signal-safe. Cost of a collection: a few small /proc reads and a
 * scan of /proc/self/fd.
 */
PCPU_API int pcpu_registry_process_collector(pcpu_registry_t *reg);

PCPU_END_DECLS

#endif /* PCPU_STATS_H */
