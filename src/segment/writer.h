/* SPDX-License-Identifier: MIT */
/*
 * The segment writer's state (struct pcpu_segment), shared by writer.c
 * (publication, fork, life cycle) and directory.c (the directory entries
 * and blobs written per registry event). Not installed.
 */
#ifndef PCPU_SEGMENT_WRITER_H
#define PCPU_SEGMENT_WRITER_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include <pcpu/segment.h>

#include "../stats/stats.h"
#include "../core/core.h"
#include "backing.h"
#include "format.h"

/* Blob size classes: 2^6 .. 2^17 bytes. Every blob is given a whole class
 * from where the previous one ended, so a blob of `len` bytes has the
 * room of its class at an offset that is a multiple of 2^6: a tree's
 * freed blobs (tree_blobs.c) are reused by that rule alone, the format
 * unchanged. */
#define BLOB_MIN_SHIFT 6
#define BLOB_CLASSES (17 - BLOB_MIN_SHIFT + 1)

/* The size class of a blob of `len` (1..2^17) bytes. */
static inline unsigned pcpu__blob_class(size_t len)
{
	unsigned c = 0;

	while (((size_t)1 << (BLOB_MIN_SHIFT + c)) < len)
		c++;
	return c;
}

/* The string room one relabelling of many entries counted on
 * (pcpu__directory_relabel_room()): freed blobs of each class, and bytes
 * to append, whose pages are allocated. */
struct pcpu__blob_claims {
	uint64_t fresh;
	uint32_t taken[BLOB_CLASSES];
};

struct u64vec {
	uint64_t *v;
	size_t n, cap;
};

/* Maps of the directory's objects (families, series, groups) to entry
 * numbers: the library's hash table keyed by address (directory.c). */
static inline int seg_map_key_is(const struct pcpu__hslot *s, const void *key)
{
	return s->key == (uintptr_t)key;
}

/* key -> val, replacing an older val; 0, or -1 out of memory. */
static inline int seg_map_put(struct pcpu__htab *m, const void *key, uint32_t val)
{
	int added;
	struct pcpu__hslot *s = pcpu__htab_find_or_add(m, pcpu__hash_ptr(key), seg_map_key_is, key,
						       (uintptr_t)key, val, &added);

	if (!s)
		return -1;
	s->val = val; /* an object seen again: its new entry */
	return 0;
}

/* key's val: 0, or -1 if it has none. */
static inline int seg_map_get(struct pcpu__htab *m, const void *key, uint32_t *val)
{
	struct pcpu__hslot *s = pcpu__htab_find_key(m, pcpu__hash_ptr(key), (uintptr_t)key);

	if (!s)
		return -1;
	*val = s->val;
	return 0;
}

static inline void seg_map_del(struct pcpu__htab *m, const void *key)
{
	struct pcpu__hslot *s = pcpu__htab_find_key(m, pcpu__hash_ptr(key), (uintptr_t)key);

	if (s)
		pcpu__htab_remove(m, s);
}

/* Appends x, growing by doubling; 0, or -1 out of memory (v unchanged). */
static inline int u64vec_push(struct u64vec *v, uint64_t x)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		uint64_t *p = (uint64_t *)realloc(v->v, cap * sizeof *p);

		if (!p)
			return -1;
		v->v = p;
		v->cap = cap;
	}
	v->v[v->n++] = x;
	return 0;
}

/* A segment shared by a process tree (PCPU_SEGMENT_SHARED_TREE): the
 * writers' common state, in the header's page at PCPU__SEG_TREE_OFFSET.
 * Everything here, and every change of the directory, is under the zone
 * tree's lock (src/core/core.h), which every process of the tree takes. */
struct pcpu__seg_tree {
	char magic[8];                  /* "PCPUTREE" */
	uint64_t next_family_id, next_serial;
	uint64_t repairs;               /* directory changes a dead writer left half done */
	/* Held while a collection rewrites the GROUP entries' copies (not
	 * the tree's lock: tree.c). Process-shared, robust, error-checking. */
	pthread_mutex_t collect_lock;
	struct pcpu_zone_tree zone;     /* the frontier and the lock */
	/* Series entries rewritten in place (pcpu_family_relabel(), or made
	 * free by repair()), under the tree's lock: each process, seeing it
	 * change, indexes the directory anew and drops the series it holds
	 * whose entry no longer carries their labels. Last, so that the
	 * fields before keep their places. */
	uint64_t relabels;
	/* The string table's free blobs, a list per size class (tree_blobs.c):
	 * the blobs relabelled series entries named before. Head: the first
	 * blob's offset + 1, 0 for none; each free blob's first 8 bytes hold
	 * the next one's the same way. A library build before these fields
	 * (a process joining the tree, pcpu_segment_join()) finds them zero
	 * (the page was) and leaves them alone: it frees nothing and only
	 * appends. Then how many blobs went in and out of the lists. */
	uint64_t free_blobs[BLOB_CLASSES];
	uint64_t blobs_freed, blobs_reused;
	/* The relabel log (tree_relog.c): a ring of the series entries
	 * rewritten in place, each appended (under the tree's lock) before
	 * its rewrite and before `relabels` counts it, so that a process
	 * follows the tree's relabellings entry by entry instead of indexing
	 * the directory anew and walking its series at each. relog_off: the
	 * ring's offset in the string table + 1 (0: none: a tree made by a
	 * library before the log, or whose pages could not be had);
	 * relog_cap: its slots (uint32_t: an entry number, or a run's two
	 * slots, PCPU__SEG_TREE_RELOG_RUN), a power of two, with
	 * PCPU__SEG_TREE_RELOG_RUNS where runs may be written; relog_head:
	 * slots ever appended. */
	uint64_t relog_off, relog_cap, relog_head;
};
#define PCPU__SEG_TREE_MAGIC "PCPUTREE"

struct pcpu_segment {
	struct pcpu_registry *reg;
	pid_t pid;
	int fd, dirfd;
	char file[96];
	char *path;
	int published;
	int detached; /* in a fork() child: the file is the parent's (see top) */
	struct pcpu_segment *next_seg, *prev_seg; /* every segment of the process */

	char *map; /* [0, data_offset): header, entries, strings; RW shared */
	size_t map_len;
	struct pcpu__seg_header *hdr;
	struct pcpu__seg_entry *entries;
	char *strings;
	uint64_t entries_cap, strings_cap, data_offset, chunk_span;

	/* Chunks of the zone: chunk_base[no] (0 until known). Written by
	 * on_chunk() under the zone's lock, read by the hook. */
	pthread_mutex_t chunk_lock;
	uintptr_t *chunk_base;
	/* Held around every growth of the file (pcpu__file_grow(), backing.h):
	 * the zone's chunks and the flows tables (flows.c) grow it from
	 * different locks, and neither may cut the other's end off. */
	pthread_mutex_t grow_lock;
	size_t nchunks, chunk_cap;

	/* Directory bookkeeping, under the registry's lock. */
	uint64_t entries_used, strings_used;
	uint64_t entries_backed, strings_backed; /* bytes allocated in the file (pages) */
	struct u64vec free_entries;
	struct u64vec free_blobs[BLOB_CLASSES];
	struct pcpu__htab families, series; /* object -> its entry (map_*() below) */
	/* 2.3 groups: gseries -> its GROUP entry, and -> how many member
	 * series entries still refer to it */
	struct pcpu__htab groups, group_refs;
	uint64_t next_family_id, next_serial;
	uint64_t nfamilies, nseries;

	/* A shared registry's segment (tree.c): its shared state (NULL:
	 * an ordinary segment, which a fork() child leaves), and the series
	 * pcpu__tree_adopt_series() found last (its value's place and its
	 * entry), which the next SERIES_ADDED maps instead of writing a new
	 * entry. */
	struct pcpu__seg_tree *tree;
	int tree_wrlock; /* this process took the tree's member lock (a write lock) */
	/* Every live family and series entry below tree_indexed, by name or
	 * by family and label values (key: entry + 1): a tree never frees an
	 * entry, so what another process wrote is indexed once, as this one
	 * first looks past it (directory.c). */
	struct pcpu__htab tree_index;
	uint64_t tree_indexed;
	/* t->relabels when tree_index was last emptied, and when the
	 * registry last dropped its stale series (RELABEL_SEEN). */
	uint64_t tree_index_relabels, tree_reg_relabels;
	/* Times tree_index was emptied for another process's relabelling
	 * (this process's own follow in place): lets a test count them. */
	uint64_t tree_index_rebuilds;
	/* Directory entries this process's index looked at (indexed or
	 * skipped), its inherited ones included: lets a test see that a
	 * fork() child starts from its parent's index, not from entry 0. */
	uint64_t tree_index_scanned;
	/* The relabel log's head when the index, and the registry's series,
	 * last followed it (with tree_index_relabels, tree_reg_relabels);
	 * slots of the index left behind by relabelled entries (lookups
	 * compare the entry, so they never match: dropped at the next
	 * rebuild); times the index and the registry followed the log. */
	uint64_t relog_index_seen, relog_reg_seen;
	uint64_t tree_index_stale;
	uint64_t tree_index_follows, tree_reg_skips, tree_reg_lists;
	/* The entries this process's series are mapped to (a tree's), and how
	 * many of its series each (key: entry + 1, value: the count): whether
	 * a relabelled entry concerns this process. series_entries_lost: an
	 * update failed (out of memory): every relabelling then does. */
	struct pcpu__htab series_entries;
	int series_entries_lost;
	/* The stale series a registry walk is handed one by one
	 * (PCPU__RELABEL_STALE_NEXT), found from the log under the lock. */
	struct pcpu__series **stale;
	size_t nstale, stale_at, stale_cap;
	/* A relabelling under way (PCPU__RELABEL_BEGIN to _END, the tree's
	 * lock held): the entries its CHECKs passed (relabel_checked), of
	 * which its COMMITs named the first nrelabel, rewritten at END, and
	 * the string room the CHECKs counted on. */
	struct pcpu__relabel_item {
		struct pcpu_family *f;
		struct pcpu__series *se;
		const char *const *v;       /* its new values, from COMMIT */
		uint64_t idx;               /* its entry, and the entry's copy */
		struct pcpu__seg_entry e;
		unsigned nlabels;
	} *relabel_items;
	size_t nrelabel, relabel_checked, relabel_cap;
	struct pcpu__blob_claims relabel_room;
	/* Times the registry walked its series for stale ones (RELABEL_SEEN
	 * after a walk): another process's relabelling, not this one's. */
	uint64_t tree_reg_walks;
	/* The GROUP entries below tree_groups_scanned, which a collection
	 * refreshes (directory.c): entries never move in a tree. */
	struct u64vec tree_groups;
	uint64_t tree_groups_scanned;
	int adopted;               /* adopted_* below are set */
	uint32_t adopted_chunk;
	uint64_t adopted_off, adopted_idx;

	/* 2.9: the flows tables published in the file (flows.c), under the
	 * registry's lock: the live ones, where the next one goes (from
	 * PCPU__SEG_TABLES_BASE up), and the freed ranges (offset, length
	 * pairs) a new table may reuse. */
	struct pcpu__seg_table *tables;
	uint64_t tables_end;
	struct u64vec free_tables;
};

/* A flows table published in a segment (flows.c). */
struct pcpu__seg_table {
	struct pcpu_segment *seg;
	struct pcpu_flows *f;
	uint64_t idx;       /* its FLOWS entry */
	uint64_t off, len;  /* its words' pages in the file */
	struct pcpu__seg_table *next, *prev;
};

/* ---- directory.c: the directory, written per registry event ---- */

/* Around every change: the header's generation odd while changing. */
PCPU_HIDDEN void pcpu__directory_begin(struct pcpu_segment *seg);
PCPU_HIDDEN void pcpu__directory_end(struct pcpu_segment *seg);
/* The zone's no-space callback (ctx: the segment): counted and marked. */
PCPU_HIDDEN void pcpu__directory_on_nospace(void *ctx, int err);
/* The registry's events (registry_observer.h), under its lock. */
/* FAMILY_ADDED and SERIES_ADDED: 0, or -1 with errno and the registry's
 * message when a tree's directory cannot record the change (the
 * registration is then undone: registry_observer.h); an ordinary segment
 * counts what it cannot record as dropped and returns 0. */
PCPU_HIDDEN int pcpu__directory_family_added(struct pcpu_segment *seg, struct pcpu_family *f);
PCPU_HIDDEN void pcpu__directory_family_removing(struct pcpu_segment *seg, struct pcpu_family *f);
PCPU_HIDDEN int pcpu__directory_series_added(struct pcpu_segment *seg, struct pcpu_family *f,
					     struct pcpu__series *se);
PCPU_HIDDEN void pcpu__directory_series_removing(struct pcpu_segment *seg,
						 const struct pcpu_family *f,
						 struct pcpu__series *se);
PCPU_HIDDEN void pcpu__directory_groups_read(struct pcpu_segment *seg);
/* Tree segments, under the collect lock (not the tree's): every GROUP
 * entry's copy rewritten from its group's lanes, whichever process made
 * it. Reads the shared directory without the tree's lock. */
PCPU_HIDDEN void pcpu__directory_tree_groups_read(struct pcpu_segment *seg);

/* Entries of kinds the registry does not know (flows tables, flows.c),
 * under the registry's lock and between begin and end: a new entry and
 * blob_len bytes of string table (0, or -1 with errno: ENOSPC, E2BIG,
 * nothing taken); an entry written (the strings' count published before
 * it, the entries' after); an entry
 * freed (its seq grows, kind FREE; its blob back to the free lists); a new
 * unique id (family ids' sequence). */
PCPU_HIDDEN int pcpu__directory_entry_new(struct pcpu_segment *seg, size_t blob_len, uint64_t *idx,
					  uint64_t *blob_off);
PCPU_HIDDEN void pcpu__directory_entry_set(struct pcpu_segment *seg, uint64_t idx,
					   const struct pcpu__seg_entry *e);
PCPU_HIDDEN void pcpu__directory_entry_free(struct pcpu_segment *seg, uint64_t idx);
PCPU_HIDDEN uint64_t pcpu__directory_new_id(struct pcpu_segment *seg);

/* ---- flows.c: flows tables in the file ---- */

/* A collection of the registry (PCPU__REG_COLLECTING), under its lock:
 * every table flushed into its words. */
PCPU_HIDDEN void pcpu__segment_tables_flush(struct pcpu_segment *seg);
/* The segment is being freed (or left by a fork() child): its tables
 * forget it -- destroying one later unmaps its words and nothing else. */
PCPU_HIDDEN void pcpu__segment_tables_forget(struct pcpu_segment *seg, int detach);

/* ---- tree_index.c: a tree segment's index of its shared directory ---- */

/* Entry i, if it is a live series (a group member's included): 1 with a
 * copy in *e, else 0. */
PCPU_HIDDEN int pcpu__tree_live_series(struct pcpu_segment *seg, uint64_t i, struct pcpu__seg_entry *e);
/* Tree segments: the live entry of the family named `name` with these
 * label names (nlabels UINT_MAX: with any), or -1. */
PCPU_HIDDEN int64_t pcpu__directory_find_family(struct pcpu_segment *seg, const char *name,
						unsigned nlabels, char *const *labels);
/* Tree segments: whether family entry `i` describes what the view does
 * but for its label names (another label set of the name). */
PCPU_HIDDEN int pcpu__directory_same_metric(struct pcpu_segment *seg, uint64_t i,
					    const struct pcpu__family_view *v);
/* Tree segments, before a new series of the family `fv` with label values
 * `v` is allocated: whether the directory can record it (its entries and
 * blobs fit, their pages allocated in the file). 0, or -1 with errno
 * ENOSPC (or E2BIG) and the registry's message. */
PCPU_HIDDEN int pcpu__directory_series_room(struct pcpu_segment *seg,
					    const struct pcpu__family_view *fv, const char *const *v);
/* Tree segments, the tree's lock held: series entry `idx` was rewritten
 * in place by this process from `old` to `now` (a relabelling); its index
 * follows in place, so that a process relabelling many series indexes
 * the directory once, not once per series. */
PCPU_HIDDEN void pcpu__tree_index_rewritten(struct pcpu_segment *seg, uint64_t idx,
					    const struct pcpu__seg_entry *old,
					    const struct pcpu__seg_entry *now);
/* Tree segments, from the registries' fork() prepare handler (the
 * registry's lock held, not the tree's): the index brought up to the
 * directory as it is, so that the child inherits it instead of indexing,
 * at its first registration, every entry the tree's other processes wrote
 * since this one last looked -- O(entries) in every child of a parent
 * that does not register (a pre-fork server's master). */
PCPU_HIDDEN void pcpu__tree_index_prefork(struct pcpu_segment *seg);
/* ---- tree_relog.c: the relabel log ---- */

/* Its ring: 8,192 slots, 32 KiB. A record names one entry (one slot: its
 * number, below 2^31) or a run of entries (two slots: RUN | count - 1,
 * then the first), so that a relabelling of a label set in many families
 * (pcpu_families_relabel(): entries made together, mostly adjacent) takes
 * a record or a few, not one per entry -- the ring then holds some 4,000
 * PostgreSQL statements' relabellings between two looks of a process, not
 * 200. A tree's string table is made that much larger at publication, so
 * the ring takes nothing of max_string_bytes. */
#define PCPU__SEG_TREE_RELOG_CAP 8192u
#define PCPU__SEG_TREE_RELOG_BYTES ((uint64_t)PCPU__SEG_TREE_RELOG_CAP * sizeof(uint32_t))
#define PCPU__SEG_TREE_RELOG_RUN 0x80000000u
/* In the tree's relog_cap: the log may hold runs. A library before runs
 * finds no log there (the capacity not a power of two): it follows every
 * relabelling by a rebuild, never misreading a run as an entry; a tree
 * such a library made has no flag, and its runs are written one entry a
 * slot. */
#define PCPU__SEG_TREE_RELOG_RUNS ((uint64_t)1 << 62)

/* Tree segments, at publication: the log's ring carved out of the string
 * table; without room or pages the tree goes without one (relabellings are
 * then followed by a rebuild, as by a library before the log). */
PCPU_HIDDEN void pcpu__tree_relog_setup(struct pcpu_segment *seg);
/* The log's slots, 0 for none (or a log that cannot be one). */
PCPU_HIDDEN uint64_t pcpu__tree_relog_capacity(struct pcpu_segment *seg);
/* The tree's lock held: entries [first, first + count) are about to be
 * rewritten in place. Appends their record; *head gets the head before.
 * The slots appended (2 for a run; count where the log holds no runs), or
 * 0 if the tree has no log. */
PCPU_HIDDEN uint64_t pcpu__tree_relog_append(struct pcpu_segment *seg, uint64_t first, uint64_t count,
					     uint64_t *head);
/* Whether the log holds every relabelling between (relabels0, head0),
 * this process's marks, and (r, h), the tree's now: the two moved
 * together and the ring still holds the slots from head0. */
PCPU_HIDDEN int pcpu__tree_relog_covers(struct pcpu_segment *seg, uint64_t relabels0, uint64_t head0,
					uint64_t r, uint64_t h);
/* The record at slot *k (head0 <= *k < h after pcpu__tree_relog_covers()):
 * its entries [*first, *first + *count), *k moved past it; 1. 0 at h. -1
 * for a record that cannot be one (past h, or past the directory: written
 * by anyone): the caller treats the log as not covering. */
PCPU_HIDDEN int pcpu__tree_relog_next(struct pcpu_segment *seg, uint64_t *k, uint64_t h, uint64_t *first,
				      uint64_t *count);
/* The series map's reverse (series_entries): series se of this process
 * mapped to entry idx, or no longer; whether any series is (1 also when
 * the map was lost to a failed allocation, and for idx UINT64_MAX); and
 * up to cap of them in found[] (how many there are, returned). */
PCPU_HIDDEN void pcpu__tree_mapped_add(struct pcpu_segment *seg, uint64_t idx,
				       const struct pcpu__series *se);
PCPU_HIDDEN void pcpu__tree_mapped_drop(struct pcpu_segment *seg, uint64_t idx,
					const struct pcpu__series *se);
PCPU_HIDDEN int pcpu__tree_mapped(struct pcpu_segment *seg, uint64_t idx);
PCPU_HIDDEN size_t pcpu__tree_mapped_list(struct pcpu_segment *seg, uint64_t idx,
					  struct pcpu__series **found, size_t cap);
/* The index brought past the relabellings between its marks and (r, h),
 * the tree's relabels and log head (tree_index.c): followed entry by entry
 * where the log holds them, else emptied, to be made anew from entry 0.
 * `careful`: without the tree's lock (the fork() prepare handler). */
PCPU_HIDDEN void pcpu__tree_index_sync(struct pcpu_segment *seg, uint64_t r, uint64_t h, int careful);

/* Tree segments: the live series entry of family entry `fidx` with label
 * values `v` (n of them), or -1. */
PCPU_HIDDEN int64_t pcpu__directory_find_series(struct pcpu_segment *seg, uint64_t fidx,
						const char *const *v, unsigned n);
/* directory.c's primitives, for directory_tree.c: _reserve allocates the
 * file's pages of [region + *backed, region + upto) (-1, marked, if
 * refused); _entry_write writes entry idx under its sequence; _blob_alloc
 * takes `len` bytes of string table; _put_str appends s and its NUL at
 * blob + *pos; _cannot_record says what a change the directory could not
 * record costs (an ordinary segment: dropped, 0; a tree's: -1, refused,
 * with errno and the message). */
PCPU_HIDDEN int pcpu__directory_reserve(struct pcpu_segment *seg, uint64_t region, uint64_t *backed,
					uint64_t upto);
PCPU_HIDDEN void pcpu__directory_entry_write(struct pcpu_segment *seg, uint64_t idx,
					     const struct pcpu__seg_entry *v);
PCPU_HIDDEN int pcpu__directory_blob_alloc(struct pcpu_segment *seg, size_t len, uint64_t *off);
PCPU_HIDDEN void pcpu__directory_put_str(char *blob, size_t *pos, const char *s);
PCPU_HIDDEN int pcpu__directory_cannot_record(struct pcpu_segment *seg);

/* Bytes per slot region of a value of family f in the directory (format.h:
 * a counter's or gauge's word, two with fractions, a histogram's pairs). */
PCPU_HIDDEN uint32_t pcpu__seg_value_size(const struct pcpu__family_view *f);
/* 2.10: bytes of a sparse histogram series' table of groups (format.h). */
PCPU_HIDDEN uint32_t pcpu__seg_sparse_table_size(const struct pcpu__family_view *f);
/* The entry of f in seg->families, or -1. */
PCPU_HIDDEN int64_t pcpu__directory_family_entry(struct pcpu_segment *seg,
						 const struct pcpu_family *f);
/* The entry of series se in seg->series, or -1 (tree_relabel.c). */
PCPU_HIDDEN int64_t pcpu__directory_series_entry(struct pcpu_segment *seg,
						 const struct pcpu__series *se);
/* Tree segments: room for a series entry's new label blob of `len` bytes,
 * on top of the room `cl` holds for the entries of the same relabelling
 * before it (a freed blob of its class none of them counted on, else its
 * pages allocated now, so that their _write()s cannot fail): 0 with cl
 * updated, or -1 with errno E2BIG or ENOSPC and the segment's message. */
PCPU_HIDDEN int pcpu__directory_relabel_room(struct pcpu_segment *seg, uint64_t len,
					     struct pcpu__blob_claims *cl);
/* Tree segments, after _room(): entry idx (its copy e, updated) rewritten
 * with label values v (n of them) in another blob (a freed one of its class,
 * else appended), under its sequence and the header's generation; then the
 * old blob, which no entry names any more, is freed for reuse. 0. */
PCPU_HIDDEN int pcpu__directory_relabel_write(struct pcpu_segment *seg, uint64_t idx,
					      struct pcpu__seg_entry *e, const char *const *v,
					      unsigned n);

/* ---- tree_blobs.c: the tree's free blobs (writer.h: struct pcpu__seg_tree) ---- */

/* Whether a freed blob of the class of `len` bytes waits in the tree's
 * lists (1) or not (0: an ordinary segment, len 0, an empty list). Under
 * the tree's lock. O(1). */
PCPU_HIDDEN int pcpu__tree_blob_ready(struct pcpu_segment *seg, size_t len);
/* Whether the class of `len` bytes has a freed blob besides the cl->taken[]
 * of it a relabelling counted on already: 1 (counted now too) or 0. Under
 * the tree's lock. O(blobs counted). */
PCPU_HIDDEN int pcpu__tree_blob_claim(struct pcpu_segment *seg, size_t len, struct pcpu__blob_claims *cl);
/* A freed blob for `len` bytes, taken off its class's list: 0 with *off set,
 * or -1 if none. Under the tree's lock. O(1). */
PCPU_HIDDEN int pcpu__tree_blob_take(struct pcpu_segment *seg, size_t len, uint64_t *off);
/* The blob [off, off + len) put on its class's list: only once the entry
 * that named it names another one (its sequence changed). One that cannot
 * be a blob of this writer's (a place or length out of the rules) is left
 * alone. Under the tree's lock. O(1). */
PCPU_HIDDEN void pcpu__tree_blob_give(struct pcpu_segment *seg, uint64_t off, uint64_t len);

/* ---- writer.c, for join.c: a segment's life in this process ---- */

/* The registry observer of a published segment (registry_observer.h). */
PCPU_HIDDEN int pcpu__segment_hook(void *ctx, enum pcpu__registry_event ev, struct pcpu_family *f,
				   struct pcpu__series *se);
/* The zone's report of each chunk it has and gets (backing.h). */
PCPU_HIDDEN void pcpu__segment_on_chunk(void *ctx, unsigned no, char *base, uint64_t file_off);
/* Registers the fork() handlers of every segment of the process (once). 0,
 * or -1 with errno ENOMEM. */
PCPU_HIDDEN int pcpu__segment_fork_register(void);
/* Adds a new segment to the process's list (fork() handlers) / frees one
 * that never got there or was taken off it (its maps, descriptors, books). */
PCPU_HIDDEN void pcpu__segment_link(struct pcpu_segment *seg);
PCPU_HIDDEN void pcpu__segment_free(struct pcpu_segment *seg);
/* Removes the segment's file name if it is still this segment's file. */
PCPU_HIDDEN void pcpu__segment_unlink_if_ours(struct pcpu_segment *seg);

/* ---- tree.c: a segment shared by a process tree ---- */

/* A count of the shared header (entries_used, strings_used) as a process
 * of the tree may use it: bounded by the capacity it knows, fixed at
 * publication (tree.c, "Trust"). */
static inline uint64_t pcpu__tree_count(const uint64_t *shared, uint64_t cap)
{
	uint64_t v = __atomic_load_n(shared, __ATOMIC_ACQUIRE);

	return v < cap ? v : cap;
}

/* At publication with PCPU_SEGMENT_SHARED_TREE, under the registry's lock,
 * the zone attached: sets up the shared state and makes the zone a tree
 * zone. 0, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__tree_setup(struct pcpu_segment *seg);
/* At publication with PCPU_SEGMENT_SHARED_TREE, before the file is named:
 * takes the tree's member lock (format.h). 0 (also where the kernel has no
 * OFD locks: seg->tree_wrlock stays 0), or -1 with errno (EBUSY: another
 * process holds a lock on the file) and a message. */
PCPU_HIDDEN int pcpu__tree_member_lock(struct pcpu_segment *seg);
/* Around every directory change of a tree segment: takes the tree's lock
 * and reads the directory's shared bookkeeping into seg; pcpu__tree_leave
 * writes it back and unlocks. Enter: 0, or -1 with errno (the lock). */
PCPU_HIDDEN int pcpu__tree_enter(struct pcpu_segment *seg);
PCPU_HIDDEN void pcpu__tree_leave(struct pcpu_segment *seg);
/* pcpu_segment_join() (join.c), under the registry's lock, the segment's
 * header and directory mapped: the zone made one of the tree's over the
 * file (its chunks reported to on_chunk), seg->tree set. 0, or -1 with
 * errno and a message. */
PCPU_HIDDEN int pcpu__tree_join(struct pcpu_segment *seg, pcpu_file_chunk_fn *on_chunk);
/* The registry's relabel callback (registry_observer.h; directory.c). */
PCPU_HIDDEN int pcpu__tree_relabel(void *ctx, enum pcpu__relabel_op op, struct pcpu_family *f,
				   struct pcpu__series *se, const char *const *v,
				   struct pcpu__series **out);
/* The registry's adopt callback (registry_observer.h). */
PCPU_HIDDEN int pcpu__tree_adopt_series(void *ctx, struct pcpu_family *f, const char *const *v,
					void **at);
/* A collection's GROUPS_READ: the GROUP entries' copies refreshed under
 * the collect lock, if no other collection holds it (never waits). */
PCPU_HIDDEN void pcpu__tree_collect(struct pcpu_segment *seg);

#endif /* PCPU_SEGMENT_WRITER_H */
