/* SPDX-License-Identifier: MIT */
/*
 * The statistics segment's directory, writer side: entries and blobs in the
 * shared file, written for each change of the registry (writer.c publishes
 * the file and forwards the registry's events here).
 *
 * The registry tells the segment, under its lock, whenever a family or
 * series is added (after) or removed (before its storage is
 * freed). Each event rewrites one or a few fixed-size entries, so the cost
 * of a change does not depend on the size of the registry (rewriting the
 * whole directory per change would make registering n series O(n^2)).
 * Entries are recycled through a free list; blobs (names, labels, help,
 * bounds) come from per-size-class free lists over a bump area, so the
 * string table never needs compaction and wastes at most half of a blob.
 *
 * Why per-entry sequence numbers and not only a directory-wide seqlock: a
 * reader copies the directory in O(size) while a busy writer (flows coming
 * and going) changes it every few microseconds; with one seqlock such a
 * reader would retry forever. With a sequence per entry, a reader keeps
 * every entry that did not change while it read, and only the series being
 * added or removed at that moment are left out. The header's generation is
 * still bumped around every change (odd while changing), so a reader can
 * tell whether its snapshot is stable, cache a directory, and retry a few
 * times for a stable one.
 *
 * Removal order matters: the entry is marked free *before* the registry
 * frees (zeroes) the storage and before it can be reused by another series,
 * so a reader that read a value and then finds the entry unchanged knows
 * the value belonged to that series.
 *
 * Allocation failures inside the hook do not fail the registration of an
 * ordinary segment (the registry keeps the series): the change is counted
 * in `dropped` and the header marked incomplete, which readers report. A
 * shared registry's directory is different: it is what makes a series one
 * for the whole tree, so what it cannot record is refused (the hook
 * returns -1, and the registry undoes the registration: ENOSPC), and a
 * series' room is made sure of before its storage is allocated
 * (pcpu__directory_series_room(), from tree.c).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core.h"
#include "backing.h"
#include "segment_internal.h"
#include "writer.h"

_Static_assert(PCPU__SEG_MAX_BOUNDS == PCPU_HISTOGRAM_MAX_BOUNDS, "format.h and histogram.h agree");
_Static_assert(((unsigned)1 << (PCPU__SEG_MAX_EXPORT_LG1 - 1)) == PCPU_HISTOGRAM_EXPORT_MAX,
	       "format.h and histogram.h agree");
_Static_assert(PCPU__SEG_COUNTER_SIZE == sizeof(struct pcpu_counter), "counter layout");
_Static_assert(PCPU__SEG_GAUGE_SIZE == sizeof(struct pcpu_gauge), "gauge layout");
_Static_assert(PCPU__SEG_HISTOGRAM_PAIRS_SIZE(1) == 2 * sizeof(struct pcpu_counter),
	       "a histogram bucket is a pair of counter words");

/* ---- directory writes ------------------------------------------------------------ */

void pcpu__directory_begin(struct pcpu_segment *seg)
{
	__atomic_add_fetch(&seg->hdr->generation, 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

void pcpu__directory_end(struct pcpu_segment *seg)
{
	__atomic_add_fetch(&seg->hdr->generation, 1, __ATOMIC_RELEASE);
}

/* The file system refused space (or memory): counted, and the header
 * marked, for readers and pcpu_segment_nospace(). */
static void mark_nospace(struct pcpu_segment *seg)
{
	__atomic_add_fetch(&seg->hdr->nospace, 1, __ATOMIC_RELAXED);
	__atomic_or_fetch(&seg->hdr->flags, PCPU__SEG_F_NOSPACE, __ATOMIC_RELEASE);
}

/* Called by the zone (under its lock) when it could not allocate the file's
 * pages for a new object: that registration fails with ENOSPC. */
void pcpu__directory_on_nospace(void *ctx, int err)
{
	(void)err;
	mark_nospace(ctx);
}

/* Allocates the file's pages of [region + *backed, region + upto) before
 * anything is written there; *backed grows. -1 (marked) if refused. */
int pcpu__directory_reserve(struct pcpu_segment *seg, uint64_t region, uint64_t *backed, uint64_t upto)
{
	upto = (upto + 4095) & ~(uint64_t)4095;
	if (upto <= *backed)
		return 0;
	if (pcpu_file_allocate_mapped(seg->fd, seg->map + region + *backed, region + *backed,
				      (size_t)(upto - *backed)) != 0) {
		mark_nospace(seg);
		return -1;
	}
	*backed = upto;
	return 0;
}

static void mark_dropped(struct pcpu_segment *seg)
{
	__atomic_add_fetch(&seg->hdr->dropped, 1, __ATOMIC_RELAXED);
	__atomic_or_fetch(&seg->hdr->flags, PCPU__SEG_F_INCOMPLETE, __ATOMIC_RELEASE);
}

/* Seqlock write of entry `idx`: odd, fields, even. A sequence left odd
 * (a tree's writer killed in mid-write, past the published entries: tree.c
 * repairs it too) is made even first, or the entry would stay odd -- unseen
 * by every reader and every process of the tree -- once written. */
void pcpu__directory_entry_write(struct pcpu_segment *seg, uint64_t idx, const struct pcpu__seg_entry *v)
{
	struct pcpu__seg_entry *e = &seg->entries[idx];
	uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

	s += s & 1;
	__atomic_store_n(&e->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy((char *)e + sizeof e->seq, (const char *)v + sizeof v->seq,
	       sizeof *e - sizeof e->seq);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

static int entry_alloc(struct pcpu_segment *seg, uint64_t *idx)
{
	if (seg->free_entries.n) {
		*idx = seg->free_entries.v[--seg->free_entries.n];
		return 0;
	}
	if (seg->entries_used >= seg->entries_cap) {
		errno = ENOSPC;
		return -1;
	}
	if (pcpu__directory_reserve(seg, PCPU__SEG_HEADER_REGION, &seg->entries_backed,
				    (seg->entries_used + 1) * PCPU__SEG_ENTRY_SIZE) < 0)
		return -1;
	*idx = seg->entries_used++;
	return 0;
}

/* Publishes the high-water mark after the entry is written, so a reader
 * never copies an entry index it could see half-initialised as valid. */
static void entries_publish_used(struct pcpu_segment *seg)
{
	__atomic_store_n(&seg->hdr->entries_used, seg->entries_used, __ATOMIC_RELEASE);
}

int pcpu__directory_blob_alloc(struct pcpu_segment *seg, size_t len, uint64_t *off)
{
	unsigned c;
	size_t sz;

	if (len == 0) {
		*off = 0;
		return 0;
	}
	if (len > PCPU__SEG_BLOB_MAX) {
		errno = E2BIG;
		return -1;
	}
	c = pcpu__blob_class(len);
	sz = (size_t)1 << (BLOB_MIN_SHIFT + c);
	/* A tree's: one that a relabelled series left (tree_blobs.c). */
	if (seg->tree && pcpu__tree_blob_take(seg, len, off) == 0)
		return 0;
	if (seg->free_blobs[c].n) {
		*off = seg->free_blobs[c].v[--seg->free_blobs[c].n];
		return 0;
	}
	if (seg->strings_cap - seg->strings_used < sz) {
		errno = ENOSPC;
		return -1;
	}
	if (pcpu__directory_reserve(seg, (uint64_t)(seg->strings - seg->map), &seg->strings_backed,
				    seg->strings_used + sz) < 0)
		return -1;
	*off = seg->strings_used;
	seg->strings_used += sz;
	return 0;
}

static void blob_free(struct pcpu_segment *seg, uint64_t off, size_t len)
{
	if (len == 0)
		return;
	/* Out of memory for the free list: the space is leaked, not reused. */
	(void)u64vec_push(&seg->free_blobs[pcpu__blob_class(len)], off);
}

static void entry_free(struct pcpu_segment *seg, uint64_t idx, int table)
{
	struct pcpu__seg_entry old = seg->entries[idx], z;

	memset(&z, 0, sizeof z);
	pcpu__directory_entry_write(seg, idx, &z); /* seq grows, kind FREE */
	blob_free(seg, old.blob_off, old.blob_len);
	if (table) /* 2.10: a sparse histogram's table, a blob of its own */
		blob_free(seg, old.value_off, old.u32b);
	(void)u64vec_push(&seg->free_entries, idx); /* else the entry is leaked */
}

/* Appends s and its NUL at blob + *pos. */
void pcpu__directory_put_str(char *blob, size_t *pos, const char *s)
{
	size_t n = strlen(s) + 1;

	memcpy(blob + *pos, s, n);
	*pos += n;
}

/* ---- entries of other kinds (flows tables: flows.c) ------------------------------ */

int pcpu__directory_entry_new(struct pcpu_segment *seg, size_t blob_len, uint64_t *idx,
			      uint64_t *blob_off)
{
	int err;

	if (entry_alloc(seg, idx) < 0)
		return -1;
	if (pcpu__directory_blob_alloc(seg, blob_len, blob_off) < 0) {
		err = errno;
		(void)u64vec_push(&seg->free_entries, *idx);
		errno = err;
		return -1;
	}
	return 0;
}

void pcpu__directory_entry_set(struct pcpu_segment *seg, uint64_t idx,
			       const struct pcpu__seg_entry *e)
{
	/* The blob is published before the entry that names it. */
	__atomic_store_n(&seg->hdr->strings_used, seg->strings_used, __ATOMIC_RELEASE);
	pcpu__directory_entry_write(seg, idx, e);
	entries_publish_used(seg);
}

void pcpu__directory_entry_free(struct pcpu_segment *seg, uint64_t idx)
{
	entry_free(seg, idx, 0);
}

uint64_t pcpu__directory_new_id(struct pcpu_segment *seg)
{
	return ++seg->next_family_id;
}

/* ---- events -------------------------------------------------------------------- */


/* A change the directory cannot record (errno: ENOSPC, the directory or
 * its file system is full; E2BIG, a blob too long; ENOMEM). An ordinary
 * segment counts it (dropped, incomplete) and the registration stands: 0.
 * A tree's refuses the registration (see the top): -1, with the errno and
 * the message the registry's caller reads (pcpu_stats_error()). */
int pcpu__directory_cannot_record(struct pcpu_segment *seg)
{
	int err = errno;

	if (!seg->tree) {
		mark_dropped(seg);
		return 0;
	}
	if (err == ENOMEM)
		return pcpu__error_set(PCPU_ERROR_STATS, ENOMEM,
				       "out of memory for the shared registry's directory");
	if (err == E2BIG)
		return pcpu__error_set(PCPU_ERROR_STATS, E2BIG,
				       "the labels are too long for the shared registry's directory");
	return pcpu__error_set(PCPU_ERROR_STATS, ENOSPC,
			       "the shared registry's directory has no room for it (%llu of %llu "
			       "entries, %llu of %llu string bytes used%s)",
			       (unsigned long long)seg->entries_used, (unsigned long long)seg->entries_cap,
			       (unsigned long long)seg->strings_used, (unsigned long long)seg->strings_cap,
			       __atomic_load_n(&seg->hdr->flags, __ATOMIC_RELAXED) & PCPU__SEG_F_NOSPACE
				       ? "; its file system is full"
				       : "");
}

/* Takes a directory entry and `len` bytes of string table for `key` and
 * records key -> entry in `map`; on any failure gives back what it took
 * and returns -1 with errno (the caller says what it costs:
 * pcpu__directory_cannot_record()). */
static int reserve_entry(struct pcpu_segment *seg, struct pcpu__htab *map, const void *key,
			 size_t len, uint64_t *idx, uint64_t *off)
{
	int err;

	if (entry_alloc(seg, idx) < 0)
		return -1;
	if (pcpu__directory_blob_alloc(seg, len, off) < 0)
		goto give_back_entry;
	if (seg_map_put(map, key, (uint32_t)*idx) < 0) {
		blob_free(seg, *off, len);
		errno = ENOMEM;
		goto give_back_entry;
	}
	return 0;
give_back_entry:
	err = errno;
	if (seg->tree && *idx + 1 == seg->entries_used)
		seg->entries_used--; /* a tree has no free list: the bump, undone */
	else
		(void)u64vec_push(&seg->free_entries, *idx);
	errno = err;
	return -1;
}

/* Whether a family of type `type` keeps buckets (a histogram's layout and
 * per-slot pairs) rather than one value: the type table says. */
static int buckets(enum pcpu_metric_type type)
{
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info(type);

	return t && t->value == PCPU_VALUE_BUCKETS;
}

int pcpu__directory_family_added(struct pcpu_segment *seg, struct pcpu_family *f)
{
	struct pcpu__family_view v;
	struct pcpu__seg_entry e;
	size_t len = 0, pos = 0, nbounds = 0;
	uint64_t idx, off;
	unsigned l;
	char *blob;

	pcpu__family_view(f, &v);
	if (seg->tree) {
		/* One family for the whole tree: another process may have
		 * written it (registered after the fork() that made this one). */
		int64_t found = pcpu__directory_find_family(seg, v.name, v.nlabels, v.label_names);
		int64_t any = found >= 0 ? found : pcpu__directory_find_family(seg, v.name, UINT_MAX, NULL);

		/* Another label set of a name the tree has: only where the
		 * registration asked for one (PCPU_FAMILY_LABELSET), and one
		 * metric with the others. */
		if (found < 0 && any >= 0 &&
		    (!v.labelset || !pcpu__directory_same_metric(seg, (uint64_t)any, &v)))
			return pcpu__error_set(PCPU_ERROR_STATS, EEXIST,
					       "family \"%.64s\": another process of the tree registered "
					       "it with other labels%s", v.name,
					       v.labelset ? " and another type, help, unit, scale, "
							    "layout or fractions" : "");
		if (found >= 0 && (seg->entries[found].type != (uint8_t)v.type ||
				   seg->entries[found].nlabels != (uint16_t)v.nlabels ||
				   !((seg->entries[found].flags & PCPU__SEG_E_NANOS) ||
				     (seg->entries[found].u32a & PCPU__SEG_HIST_WIDE)) !=
					   !(v.flags & PCPU_SNAPSHOT_NANOS) ||
				   (buckets(v.type) &&
				    !(seg->entries[found].u32a & PCPU__SEG_HIST_SPARSE) != !v.sparse)))
			/* Its series would map storage of another size: a
			 * counter with fractions over one word writes into
			 * whatever follows it; a dense histogram over a sparse
			 * one's table, into the strings. */
			return pcpu__error_set(PCPU_ERROR_STATS, EEXIST,
					       "family \"%.64s\": another process of the tree registered "
					       "it with another type, labels, fractions or bucket storage "
					       "(PCPU_FAMILY_SPARSE)", v.name);
		if (found >= 0) {
			if (seg_map_put(&seg->families, f, (uint32_t)found) < 0) {
				errno = ENOMEM;
				return pcpu__directory_cannot_record(seg);
			}
			return 0;
		}
	}
	len += strlen(v.name) + 1;
	if (v.help)
		len += strlen(v.help) + 1;
	len += (v.unit ? strlen(v.unit) : 0) + 1;
	for (l = 0; l < v.nlabels; l++)
		len += strlen(v.label_names[l]) + 1;
	if (buckets(v.type) && v.layout->scheme != PCPU_HISTOGRAM_LOG_LINEAR) {
		nbounds = v.nbuckets - 1;
		len = ((len + 7) & ~(size_t)7) + nbounds * sizeof(int64_t);
	}
	if (reserve_entry(seg, &seg->families, f, len, &idx, &off) < 0)
		return pcpu__directory_cannot_record(seg);
	blob = seg->strings + off;
	pcpu__directory_put_str(blob, &pos, v.name);
	if (v.help)
		pcpu__directory_put_str(blob, &pos, v.help);
	pcpu__directory_put_str(blob, &pos, v.unit ? v.unit : "");
	for (l = 0; l < v.nlabels; l++)
		pcpu__directory_put_str(blob, &pos, v.label_names[l]);
	if (nbounds) {
		while (pos & 7)
			blob[pos++] = '\0';
		memcpy(blob + pos, v.bucket_upper, nbounds * sizeof(int64_t));
	}
	__atomic_store_n(&seg->hdr->strings_used, seg->strings_used, __ATOMIC_RELEASE);

	memset(&e, 0, sizeof e);
	e.kind = PCPU__SEG_FAMILY;
	e.type = (uint8_t)v.type;
	e.scale_exp10 = (int8_t)v.scale_exp10;
	e.nlabels = (uint16_t)v.nlabels;
	e.flags = (uint16_t)((v.help ? PCPU__SEG_E_HAS_HELP : 0) |
			     (v.flags & PCPU_SNAPSHOT_INFO ? PCPU__SEG_E_INFO : 0) |
			     (v.flags & PCPU_SNAPSHOT_NANOS && !buckets(v.type) ? PCPU__SEG_E_NANOS : 0));
	e.family_id = ++seg->next_family_id;
	e.blob_off = off;
	e.blob_len = (uint32_t)len;
	if (buckets(v.type)) {
		e.nbuckets = (uint32_t)v.nbuckets;
		e.u32a = (uint32_t)v.layout->scheme | PCPU__SEG_HIST_PAIRS |
			 (v.flags & PCPU_SNAPSHOT_NANOS ? PCPU__SEG_HIST_WIDE : 0) |
			 (v.sparse ? PCPU__SEG_HIST_SPARSE : 0);
		e.u32b = v.layout->scheme == PCPU_HISTOGRAM_LOG_LINEAR ? v.layout->precision_bits : 0;
		if (v.layout->scheme == PCPU_HISTOGRAM_LOG_LINEAR) {
			/* The export rule, from which a reader derives the same
			 * `le` set the registry exposes (pcpu__export_list()). */
			e.value_off = 1 + v.export_lg;
			e.serial = (uint64_t)(v.layout->export_min > 0 ? v.layout->export_min : 0);
		} else if (v.layout->scheme == PCPU_HISTOGRAM_EXPONENTIAL) {
			/* Bounds in the blob as explicit ones; the native form. */
			e.u32b = (uint32_t)(v.native_schema + PCPU__SEG_SCHEMA_BIAS);
			/* 2.8: the largest `le` bound exposed, as 1 + the
			 * buckets the export rule considers (0: all). */
			if (v.layout->max_value > 0)
				e.u32b |= (uint32_t)(1 + pcpu__native_export_limit(
							      v.bucket_upper, v.nbuckets - 1,
							      v.layout->max_value))
					  << PCPU__SEG_EXPORT_LIMIT_SHIFT;
			e.value_off = (uint64_t)(int64_t)v.native_index;
			/* 2.4: its export rule (older readers use the default). */
			e.flags |= (uint16_t)((1 + v.export_lg)
					      << PCPU__SEG_E_EXPORT_SHIFT);
			e.serial = (uint64_t)(v.layout->export_min > 0 ? v.layout->export_min : 0);
		}
	}
	pcpu__directory_entry_write(seg, idx, &e);
	entries_publish_used(seg);
	/* Metrics, not families: another label set of a name is not another
	 * one (a tree's, where the tree has the name already). */
	if (seg->tree ? pcpu__directory_find_family(seg, v.name, UINT_MAX, NULL) == (int64_t)idx
		      : v.name_first)
		__atomic_store_n(&seg->hdr->nfamilies, ++seg->nfamilies, __ATOMIC_RELAXED);
	return 0;
}

uint32_t pcpu__seg_sparse_table_size(const struct pcpu__family_view *f)
{
	return (uint32_t)(8 * (PCPU__SEG_SPARSE_GROUPS(f->nbuckets) + !!(f->flags & PCPU_SNAPSHOT_NANOS)));
}

uint32_t pcpu__seg_value_size(const struct pcpu__family_view *f)
{
	/* The size follows where the type keeps a series' value (the type
	 * table, pcpu_metric_type_info()), not the type itself. */
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info(f->type);

	if (!t)
		return 0;
	if (t->value == PCPU_VALUE_BUCKETS)
		return (uint32_t)(f->flags & PCPU_SNAPSHOT_NANOS ? PCPU__SEG_HISTOGRAM_WIDE_SIZE(f->nbuckets)
								: PCPU__SEG_HISTOGRAM_PAIRS_SIZE(f->nbuckets));
	if (f->flags & PCPU_SNAPSHOT_NANOS)
		return PCPU__SEG_FRACTION_SIZE;
	return t->value == PCPU_VALUE_UNSIGNED ? PCPU__SEG_COUNTER_SIZE : PCPU__SEG_GAUGE_SIZE;
}

/* Where an address of the registry's zone lies: chunk, offset in the
 * chunk's slot region. 0, or -1 if in none of the segment's chunks. */
static int addr_location(struct pcpu_segment *seg, uintptr_t addr, uint32_t *chunk, uint64_t *off)
{
	uintptr_t base = addr & ~(uintptr_t)(PCPU_SLOT_STRIDE - 1);
	size_t i;
	int rc = -1;

	pthread_mutex_lock(&seg->chunk_lock);
	for (i = 0; i < seg->nchunks; i++) {
		if (seg->chunk_base[i] == base) {
			*chunk = (uint32_t)i;
			*off = addr - base;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&seg->chunk_lock);
	return rc;
}

/* Where a series' value lives: chunk, offset in the chunk's slot region,
 * bytes per slot. */
static int value_location(struct pcpu_segment *seg, const struct pcpu__family_view *f,
			  const struct pcpu__series_view *se, uint32_t *chunk, uint64_t *off,
			  uint32_t *size)
{
	uintptr_t addr;

	*size = pcpu__seg_value_size(f);
	if (!*size)
		return -1; /* no type */
	/* A counter's or gauge's storage is its value; a histogram's holds
	 * a pointer to its per-slot (count, sum) pairs. */
	if (buckets(f->type))
		addr = (uintptr_t)((const pcpu_histogram_t *)se->storage)->pcpu__c;
	else
		addr = (uintptr_t)se->storage;
	return addr_location(seg, addr, chunk, off);
}

/* ---- 2.3: consistent groups (format.h) ---- */

_Static_assert(PCPU__SEG_GROUP_MAX == PCPU_GROUP_MAX_MEMBERS, "group size limits agree");

/* Rewrites GROUP entry idx's values in place, under its seq: `vals`, a
 * consistent read of the group, as blob [off, off + len) of the entry
 * (checked by the caller; in a tree, against what this process knows of
 * the string table). A seq left odd (a tree's collector that died
 * rewriting it) is made even first. */
static void group_store(struct pcpu_segment *seg, uint64_t idx, uint64_t off, uint32_t len,
			const int64_t *vals)
{
	struct pcpu__seg_entry *e = &seg->entries[idx];
	uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

	s += s & 1;
	__atomic_store_n(&e->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(seg->strings + off, vals, len);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

/* The GROUP entry of a member series' group, made with the first member;
 * its reference count grows by one. -1 with errno if it cannot be. */
static int group_ref(struct pcpu_segment *seg, const struct pcpu__family_view *f,
		     const struct pcpu__gseries *gs, uint32_t *gidx)
{
	struct pcpu__seg_entry e;
	uint64_t idx, off;
	uint32_t refs;
	size_t len = 8 * (size_t)f->group_members;

	if (seg_map_get(&seg->groups, gs, gidx) == 0) {
		if (seg_map_get(&seg->group_refs, gs, &refs) < 0 ||
		    seg_map_put(&seg->group_refs, gs, refs + 1) < 0) {
			errno = ENOMEM;
			return -1;
		}
		return 0;
	}
	if (reserve_entry(seg, &seg->groups, gs, len, &idx, &off) < 0)
		return -1;
	if (seg_map_put(&seg->group_refs, gs, 1) < 0) {
		seg_map_del(&seg->groups, gs);
		blob_free(seg, off, len);
		if (seg->tree && idx + 1 == seg->entries_used)
			seg->entries_used--;
		else
			(void)u64vec_push(&seg->free_entries, idx);
		errno = ENOMEM;
		return -1;
	}
	memset(seg->strings + off, 0, len);
	memset(&e, 0, sizeof e);
	e.kind = PCPU__SEG_GROUP;
	e.blob_off = off;
	e.blob_len = (uint32_t)len;
	e.u32a = f->group_members;
	e.serial = ++seg->next_serial;
	/* 2.5: in a tree, where the group's lanes are, for the other
	 * processes (tree.c); readers ignore it. */
	if (seg->tree && addr_location(seg, (uintptr_t)gs->g->pcpu__primary, &e.u32b, &e.value_off) < 0)
		e.u32b = 0, e.value_off = 0;
	pcpu__directory_entry_write(seg, idx, &e);
	if (gs->ok)
		group_store(seg, idx, off, (uint32_t)len, gs->vals);
	entries_publish_used(seg);
	*gidx = (uint32_t)idx;
	return 0;
}

/* A member series entry is gone: its group's entry goes with the last. */
static void group_unref(struct pcpu_segment *seg, const struct pcpu__gseries *gs)
{
	uint32_t idx, refs;

	if (seg_map_get(&seg->groups, gs, &idx) < 0 || seg_map_get(&seg->group_refs, gs, &refs) < 0)
		return;
	if (refs > 1) {
		/* Fails only if the table cannot grow: the entry then stays,
		 * unreferenced, which readers ignore. */
		(void)seg_map_put(&seg->group_refs, gs, refs - 1);
		return;
	}
	seg_map_del(&seg->group_refs, gs);
	seg_map_del(&seg->groups, gs);
	if (!seg->tree) /* a tree's stays: see pcpu__directory_series_removing() */
		entry_free(seg, idx, 0);
}

/* Every group's entry gets the registry's fresh read. */
static void group_read(void *ctx, const struct pcpu__gseries *gs)
{
	struct pcpu_segment *seg = ctx;
	uint32_t idx;

	if (gs->ok && seg_map_get(&seg->groups, gs, &idx) == 0)
		group_store(seg, idx, seg->entries[idx].blob_off, seg->entries[idx].blob_len, gs->vals);
}

void pcpu__directory_tree_groups_read(struct pcpu_segment *seg)
{
	pcpu_zone_t *zone = pcpu_registry_zone(seg->reg);
	uint64_t used = pcpu__tree_count(&seg->hdr->entries_used, seg->entries_cap);
	uint64_t strings = pcpu__tree_count(&seg->hdr->strings_used, seg->strings_cap), i;
	int64_t vals[PCPU_GROUP_MAX_MEMBERS];
	size_t k;

	/* The GROUP entries written since the last look: an entry is whole
	 * before the count says it exists (acquired above), and its kind
	 * never changes. One never written (seq 0) ends the look: past it
	 * the count is not to be believed. */
	for (i = seg->tree_groups_scanned; i < used; i++) {
		if (__atomic_load_n(&seg->entries[i].seq, __ATOMIC_RELAXED) == 0)
			break;
		if (seg->entries[i].kind == PCPU__SEG_GROUP && u64vec_push(&seg->tree_groups, i) < 0)
			break; /* out of memory: looked at again next time */
	}
	seg->tree_groups_scanned = i;
	for (k = 0; k < seg->tree_groups.n; k++) {
		struct pcpu__seg_entry e;
		void *at;

		i = seg->tree_groups.v[k];
		if (i >= used)
			continue;
		e = seg->entries[i];
		if (e.kind != PCPU__SEG_GROUP || e.value_off == 0 || e.u32a == 0 ||
		    e.u32a > PCPU_GROUP_MAX_MEMBERS || e.blob_len != 8 * e.u32a || e.blob_off > strings ||
		    e.blob_len > strings - e.blob_off)
			continue; /* scribbled on: not ours to write */
		at = pcpu__zone_tree_adopt(zone, e.u32b, e.value_off,
					   pcpu__registry_tree_group_size(seg->reg, e.u32a));
		if (at && pcpu__registry_tree_group_read(seg->reg, e.u32a, at, vals) == 0)
			group_store(seg, i, e.blob_off, e.blob_len, vals);
	}
}

void pcpu__directory_groups_read(struct pcpu_segment *seg)
{
	pcpu__registry_groups_each_locked(seg->reg, group_read, seg);
}


/* A tree's group member series that another process of the tree wrote
 * (the group adopted: tree.c): this process's series and group are
 * mapped to its entries. 1 if mapped, 0 if there is none, -1 with errno
 * if this process could not keep the mapping
 * (pcpu__directory_cannot_record()). */
static int tree_group_member_adopt(struct pcpu_segment *seg, uint32_t fidx,
				   const struct pcpu__family_view *fv,
				   const struct pcpu__series_view *sv, struct pcpu__series *se)
{
	struct pcpu__seg_entry e;
	uint32_t gidx, refs = 0;
	int64_t idx = pcpu__directory_find_series(seg, fidx, (const char *const *)sv->values,
						  fv->nlabels);

	if (idx < 0 || !pcpu__tree_live_series(seg, (uint64_t)idx, &e) || e.kind != PCPU__SEG_GROUP_SERIES)
		return 0;
	if (seg_map_get(&seg->groups, sv->group, &gidx) == 0)
		(void)seg_map_get(&seg->group_refs, sv->group, &refs);
	else
		gidx = (uint32_t)e.value_off;
	if (seg_map_put(&seg->series, se, (uint32_t)idx) < 0 ||
	    seg_map_put(&seg->groups, sv->group, gidx) < 0 ||
	    seg_map_put(&seg->group_refs, sv->group, refs + 1) < 0) {
		errno = ENOMEM;
		return pcpu__directory_cannot_record(seg);
	}
	pcpu__tree_mapped_add(seg, (uint64_t)idx, se);
	return 1;
}

/* 2.10: a sparse histogram's table of groups (format.h), zeroed: `size`
 * bytes of string table at *off. 0, or -1 with errno. */
static int table_alloc(struct pcpu_segment *seg, uint32_t size, uint64_t *off)
{
	if (pcpu__directory_blob_alloc(seg, size, off) < 0)
		return -1;
	memset(seg->strings + *off, 0, size); /* a reused blob holds its last words */
	return 0;
}

/* A series another process of the tree wrote the entry of (tree.c's
 * adoption): this process's series is mapped to it. 0, or -1
 * (pcpu__directory_cannot_record()). */
static int adopted_series(struct pcpu_segment *seg, const struct pcpu__family_view *fv,
			  const struct pcpu__series_view *sv, struct pcpu__series *se)
{
	seg->adopted = 0;
	if (seg_map_put(&seg->series, se, (uint32_t)seg->adopted_idx) < 0) {
		errno = ENOMEM;
		return pcpu__directory_cannot_record(seg);
	}
	/* A sparse one's groups from now on in the tree's table (the
	 * histogram reads it already: pcpu__family_histogram()). */
	if (fv->sparse && pcpu__histogram_sparse_publish((pcpu_histogram_t *)sv->storage,
							 (uint64_t *)(void *)(seg->strings + seg->adopted_off),
							 &seg->hdr->generation) < 0) {
		seg_map_del(&seg->series, se);
		return pcpu__directory_cannot_record(seg);
	}
	pcpu__tree_mapped_add(seg, seg->adopted_idx, se);
	return 0;
}

int pcpu__directory_series_added(struct pcpu_segment *seg, struct pcpu_family *f, struct pcpu__series *se)
{
	struct pcpu__family_view fv;
	struct pcpu__series_view sv;
	struct pcpu__seg_entry e;
	uint32_t fidx, chunk = 0, size = 8, gidx = 0;
	uint64_t idx, off, voff = 0;
	size_t len = 0, pos = 0;
	unsigned l;
	int r, sparse;

	pcpu__family_view(f, &fv);
	pcpu__series_view(f, se, &sv);
	sparse = fv.sparse && !sv.group;
	if (seg->tree && sv.group && seg_map_get(&seg->families, f, &fidx) == 0 &&
	    (r = tree_group_member_adopt(seg, fidx, &fv, &sv, se)) != 0)
		return r < 0 ? -1 : 0;
	if (seg_map_get(&seg->families, f, &fidx) < 0) {
		errno = ENOSPC; /* the family has no entry: it was dropped */
		return pcpu__directory_cannot_record(seg);
	}
	if (sparse) {
		/* Another process of the tree wrote its entry (tree.c): the
		 * histogram was made over its table. */
		if (seg->adopted &&
		    pcpu__histogram_sparse_table((pcpu_histogram_t *)sv.storage) ==
			    (const uint64_t *)(const void *)(seg->strings + seg->adopted_off))
			return adopted_series(seg, &fv, &sv, se);
		/* Its value is its groups, wherever each is made: the entry
		 * names a table of their places instead (format.h, 2.10). */
		size = pcpu__seg_sparse_table_size(&fv);
		if (table_alloc(seg, size, &voff) < 0)
			return pcpu__directory_cannot_record(seg);
	} else if ((sv.group ? group_ref(seg, &fv, sv.group, &gidx)
			     : value_location(seg, &fv, &sv, &chunk, &voff, &size)) < 0) {
		if (!sv.group)
			errno = ENOMEM; /* its chunk unknown: on_chunk() had no memory */
		return pcpu__directory_cannot_record(seg);
	}
	if (sv.group) {
		chunk = fv.group_member;
		voff = gidx;
	}
	if (seg->adopted && !sv.group && !sparse && chunk == seg->adopted_chunk &&
	    voff == seg->adopted_off)
		return adopted_series(seg, &fv, &sv, se);
	for (l = 0; l < fv.nlabels; l++)
		len += strlen(sv.values[l]) + 1;
	if (reserve_entry(seg, &seg->series, se, len, &idx, &off) < 0) {
		int err = errno;

		if (sv.group)
			group_unref(seg, sv.group);
		if (sparse)
			blob_free(seg, voff, size); /* no entry names it: reused here */
		errno = err;
		return pcpu__directory_cannot_record(seg);
	}
	pcpu__tree_mapped_add(seg, idx, se);
	for (l = 0; l < fv.nlabels; l++)
		pcpu__directory_put_str(seg->strings + off, &pos, sv.values[l]);
	__atomic_store_n(&seg->hdr->strings_used, seg->strings_used, __ATOMIC_RELEASE);
	/* The places of what the histogram made already (the double sum's
	 * pair), before the entry: a reader that finds the entry finds them. */
	if (sparse)
		(void)pcpu__histogram_sparse_publish((pcpu_histogram_t *)sv.storage,
						     (uint64_t *)(void *)(seg->strings + voff),
						     &seg->hdr->generation);

	memset(&e, 0, sizeof e);
	e.kind = sv.group ? PCPU__SEG_GROUP_SERIES : PCPU__SEG_SERIES;
	e.type = (uint8_t)fv.type;
	e.nlabels = (uint16_t)fv.nlabels;
	e.family_id = seg->entries[fidx].family_id;
	e.blob_off = off;
	e.blob_len = (uint32_t)len;
	e.u32a = chunk;
	e.u32b = size;
	e.value_off = voff;
	/* Readers list a family's series in creation order, as the
	 * registry's own snapshot does. */
	e.serial = ++seg->next_serial;
	pcpu__directory_entry_write(seg, idx, &e);
	entries_publish_used(seg);
	__atomic_store_n(&seg->hdr->nseries, ++seg->nseries, __ATOMIC_RELAXED);
	return 0;
}

void pcpu__directory_series_removing(struct pcpu_segment *seg, const struct pcpu_family *f,
			    struct pcpu__series *se)
{
	struct pcpu__series_view sv;
	uint32_t idx;

	if (seg_map_get(&seg->series, se, &idx) < 0)
		return; /* dropped when added */
	seg_map_del(&seg->series, se);
	pcpu__tree_mapped_drop(seg, idx, se);
	pcpu__series_view(f, se, &sv);
	if (seg->tree) {
		/* A tree removes nothing (pcpu_family_remove() is refused):
		 * this is a registration undone in this process, whose
		 * entries another process may have mapped already. They
		 * stay; only this process forgets them. */
		if (sv.group && seg_map_get(&seg->groups, sv.group, &idx) == 0)
			group_unref(seg, sv.group);
		return;
	}
	{
		struct pcpu__family_view fv;

		pcpu__family_view(f, &fv);
		entry_free(seg, idx, fv.sparse && !sv.group);
	}
	if (sv.group)
		group_unref(seg, sv.group); /* after its member: see format.h */
	__atomic_store_n(&seg->hdr->nseries, --seg->nseries, __ATOMIC_RELAXED);
}

void pcpu__directory_family_removing(struct pcpu_segment *seg, struct pcpu_family *f)
{
	struct pcpu__series *se;
	uint32_t idx;

	/* Series first: a reader never sees a series without its family. */
	for (se = pcpu__family_series_next(f, NULL); se; se = pcpu__family_series_next(f, se))
		pcpu__directory_series_removing(seg, f, se);
	if (seg_map_get(&seg->families, f, &idx) < 0)
		return;
	seg_map_del(&seg->families, f);
	if (seg->tree)
		return; /* as for its series, above */
	entry_free(seg, idx, 0);
	{
		struct pcpu__family_view v;

		pcpu__family_view(f, &v);
		if (v.name_sets == 1) /* the name's last label set: one metric less */
			__atomic_store_n(&seg->hdr->nfamilies, --seg->nfamilies, __ATOMIC_RELAXED);
	}
}
