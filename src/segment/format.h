/* SPDX-License-Identifier: MIT */
/*
 * The statistics segment's file format, version 2 (docs/segment-format.md
 * is the prose version of this file; keep the two in step).
 *
 *   offset 0            header (struct pcpu__seg_header), in a 4 KiB page
 *   entries_offset      entries_capacity fixed-size entries (64 bytes each)
 *   strings_offset      string table: one blob per entry, strings_capacity bytes
 *   data_offset         chunk 0 of the registry's per-CPU zone, then chunk 1...
 *                       a chunk is 2 * nslots regions of slot_stride bytes:
 *                       chunk c, slot s:        data_offset + c*chunk_span + s*slot_stride
 *                       chunk c, mirror of s:   data_offset + c*chunk_span + (nslots+s)*slot_stride
 *   2^43 (8 TiB)        2.9: flows tables' words, each table in pages of its own
 *                       (PCPU__SEG_TABLES_BASE; a FLOWS entry gives its offset)
 *
 * Everything is in the writer's byte order (byte_order says which) and at
 * natural alignment. Nothing in the file is a pointer: every reference is
 * an offset from a base the header gives, and every count is checked
 * against the file's size by the reader. The regions before data_offset are
 * sparse: only the pages the writer fills take memory.
 *
 * Concurrency: the writer changes one entry at a time under its registry's
 * lock. Every entry has a sequence number that is odd while the entry is
 * being written and grows with every change (also across free and reuse);
 * the header's generation is odd while any change is in progress and grows
 * by two per change. A reader copies the entries, then the blobs and values
 * they name, then the entries again, and keeps an entry only if both copies
 * are identical and its sequence even (src/segment/reader_snapshot.c).
 *
 * Internal to pcpu: the writer, the reader, the tests and the fuzz corpus
 * generator include it; nothing else should.
 */
#ifndef PCPU_SEGMENT_FORMAT_H
#define PCPU_SEGMENT_FORMAT_H

#include <stdint.h>

#define PCPU__SEG_MAGIC "PCPUSEG"          /* 7 chars + NUL = 8 bytes */
#define PCPU__SEG_VERSION_MAJOR 2          /* incompatible changes (2: mirror region) */
#define PCPU__SEG_VERSION_MINOR 10         /* compatible additions (1: pid namespace, no space;
					    * 2: exported `le` bounds of log-linear histograms;
					    * 3: consistent groups;
					    * 4: histograms as (count, sum) pairs, info
					    * families, exponential export rules;
					    * 5: segments shared by a process tree;
					    * 6: owned_slots, the owned slots' number;
					    * 7: counters and gauges with fractions;
					    * 8: their residue, histograms with fractions,
					    * several label sets of one name, the largest
					    * `le` bound of exponential histograms;
					    * 9: flows tables, entry kind FLOWS;
					    * 10: sparse histograms, scheme bit 0x400) */
#define PCPU__SEG_BYTE_ORDER 0x01020304u   /* as the writer stored it */
#define PCPU__SEG_HEADER_REGION 4096       /* the header's page */
#define PCPU__SEG_NAME_MAX 64              /* segment name, NUL excluded */
#define PCPU__SEG_FILE_PREFIX "pcpu."      /* file name: pcpu.<pid>.<name> */

/* Header flags. */
#define PCPU__SEG_F_CLOSED 1u     /* the writer unpublished or destroyed it */
#define PCPU__SEG_F_INCOMPLETE 2u /* the directory was full: some series missing */
#define PCPU__SEG_F_NOSPACE 4u    /* 2.1: the file system ran out of space (or memory):
				   * series were refused or left out (nospace counts) */
#define PCPU__SEG_F_TREE 8u       /* 2.5: written by every process forked from the writer
				   * (a shared registry, PCPU_SEGMENT_SHARED_TREE): bytes
				   * PCPU__SEG_TREE_OFFSET.. of the header's page are the
				   * writers' shared state, which readers ignore */
#define PCPU__SEG_TREE_OFFSET 2048
#define PCPU__SEG_F_TREE_WRLOCK 16u /* the tree's members hold member bytes (below) */
/* 2.6: every process of a tree holds an open file description with a read
 * lock (an OFD lock, F_OFD_SETLK) on this byte of the file: the
 * publisher's, which every fork() child inherits with the descriptor, and a
 * joiner's own (join.c), so the lock lasts while any of them lives. A
 * reader that finds a lock there (F_OFD_GETLK for a write lock) knows the
 * tree lives, whatever became of writer_pid; a leaver that can take a write
 * lock there is the last (join.c).
 * With header flag PCPU__SEG_F_TREE_WRLOCK each such open file description
 * also holds a write lock on one byte of [PCPU__SEG_TREE_MEMBERS_AT,
 * + PCPU__SEG_TREE_MEMBERS) -- the publisher's taken before the file has a
 * name -- and readers decide by those alone (F_OFD_GETLK for a read lock
 * over the range: only a write lock answers). Only a process that may write
 * the file can hold a write lock, so one that can merely read it cannot
 * keep a dead tree "live" with a read lock of its own, on byte 0 or here.
 * Without the flag (writers of 2.6 to 2.8 that predate it) readers look
 * at byte 0, and any reader of the file can fake a member there. */
#define PCPU__SEG_TREE_MEMBER_LOCK 0
#define PCPU__SEG_TREE_MEMBERS_AT 1
#define PCPU__SEG_TREE_MEMBERS 1024

/* The header. Fields marked (atomic) change while readers read; the others
 * are written once, before the magic, which is written last. */
struct pcpu__seg_header {
	char magic[8];               /*   0: "PCPUSEG\0", written last */
	uint16_t version_major;      /*   8 */
	uint16_t version_minor;      /*  10 */
	uint32_t header_size;        /*  12: bytes of header the writer wrote */
	uint32_t byte_order;         /*  16: PCPU__SEG_BYTE_ORDER */
	uint32_t flags;              /*  20: PCPU__SEG_F_* (atomic) */
	uint64_t generation;         /*  24: odd while the directory changes (atomic) */
	int32_t writer_pid;          /*  32 */
	uint32_t writer_uid;         /*  36: effective uid of the writer */
	uint64_t writer_start;       /*  40: start time, /proc/<pid>/stat field 22 */
	uint64_t created_ns;         /*  48: CLOCK_REALTIME at publication */
	uint32_t nslots;             /*  56: slots of every value (each has a mirror) */
	uint32_t slot_index;         /*  60: 1 = CPU number, 2 = rseq mm_cid */
	uint64_t slot_stride;        /*  64: bytes between two regions (slot or mirror) */
	uint64_t chunk_span;         /*  72: 2 * nslots * slot_stride (slots + mirrors) */
	uint64_t data_offset;        /*  80: file offset of chunk 0 */
	uint64_t nchunks;            /*  88: chunks in the file (atomic, grows) */
	uint64_t entries_offset;     /*  96 */
	uint64_t entries_capacity;   /* 104 */
	uint64_t entries_used;       /* 112: high-water mark (atomic, grows) */
	uint32_t entry_size;         /* 120: 64 in version 2.0 */
	uint32_t owned_slots;        /* 124: 2.6: the last owned_slots of the nslots are
				      * pinned workers' owned slots (pcpu/worker.h), the
				      * others CPU slots; < nslots. 0: none, or a writer
				      * before 2.6 (reserved, 0) */
	uint64_t strings_offset;     /* 128 */
	uint64_t strings_capacity;   /* 136 */
	uint64_t strings_used;       /* 144: high-water mark (atomic, grows) */
	uint64_t nfamilies;          /* 152: live families (atomic, informative) */
	uint64_t nseries;            /* 160: live series (atomic, informative) */
	uint64_t dropped;            /* 168: changes that did not fit (atomic) */
	char name[PCPU__SEG_NAME_MAX]; /* 176: segment name, NUL-padded */
	uint64_t writer_pidns;       /* 240: 2.1: inode of the writer's pid namespace, 0 unknown */
	uint64_t nospace;            /* 248: 2.1: registrations and directory changes refused
				      * for lack of space in the file system (atomic) */
};                               /* 256 */

/* Entry kinds. */
#define PCPU__SEG_FREE 0
#define PCPU__SEG_FAMILY 1
#define PCPU__SEG_SERIES 2
#define PCPU__SEG_GROUP 3         /* 2.3: a consistent group's values */
#define PCPU__SEG_GROUP_SERIES 4  /* 2.3: a series whose value is a group member */
#define PCPU__SEG_GROUP_MAX 16    /* members of a group (PCPU_GROUP_MAX_MEMBERS) */
#define PCPU__SEG_FLOWS 5         /* 2.9: a flows table's shared words (below) */

/* Entry flags. */
#define PCPU__SEG_E_HAS_HELP 1u       /* family: help text present (may be "") */
#define PCPU__SEG_E_SPARSE 2u         /* family: written by 2.0-2.1, ignored since 2.2 */
#define PCPU__SEG_E_INFO 4u           /* 2.4 family: an info metric (a gauge x_info whose
				       * series are 1; OpenMetrics type info) */
#define PCPU__SEG_E_NANOS 16u         /* 2.7 counter or gauge family with fractions
				       * (PCPU_SNAPSHOT_NANOS): each value is two elements,
				       * whole units then billionths of a unit, and (2.8) a
				       * third, the residue (a double); readers of 2.0-2.6
				       * (2.7: of a 2.8 file) see a value size that does not
				       * match the type and refuse the segment (never a
				       * wrong number) */
/* 2.4 exponential family: 1 + log2 of its exposed `le` bounds per power of
 * two in these bits (0: the default rule of 2.2, 4 per power of two), and
 * in `serial` its smallest exposed bound (export_min; 0 for none). */
#define PCPU__SEG_E_EXPORT_SHIFT 8
#define PCPU__SEG_E_EXPORT_MASK (7u << PCPU__SEG_E_EXPORT_SHIFT)

/* Histogram schemes, as enum pcpu_histogram_scheme. */
#define PCPU__SEG_HIST_EXPLICIT 1
#define PCPU__SEG_HIST_LOG_LINEAR 2
#define PCPU__SEG_HIST_EXPONENTIAL 3 /* 2.2: native buckets, bounds stored as explicit */
#define PCPU__SEG_SCHEMA_BIAS 4      /* exponential: u32b = schema + 4 (0..12) */
/* 2.8 exponential family: in u32b's high 16 bits, 1 + how many of its
 * finite buckets (from the first) the `le` export rule considers, those
 * with a bound at most the layout's max_value (0: every bucket). Readers
 * of 2.4-2.7 see a bad schema and refuse the family (never a wrong
 * number). */
#define PCPU__SEG_EXPORT_LIMIT_SHIFT 16
/* 2.4: the scheme ORed with this: the value is nbuckets (count, sum) pairs,
 * 16 bytes per bucket ([2b] count of bucket b, [2b + 1] the sum of the
 * values recorded into it; the histogram's sum is the sum of those), where
 * 2.0-2.3 stored [sum, bucket 0, ..., bucket n-1]. Writers since 2.4 set it
 * on every histogram; readers of 2.0-2.3 see an unknown scheme and refuse
 * the family (never a wrong number), readers since 2.4 read both. */
#define PCPU__SEG_HIST_PAIRS 0x100u
/* 2.8: with PAIRS, a histogram family with fractions (pcpu_histogram_observe()):
 * one more pair after the buckets' -- element 2 * nbuckets a double per slot
 * (the sum of observations the integer sums could not hold; the value is the
 * sum over the slots of word + mirror word, each read as a double, added slot
 * by slot), element 2 * nbuckets + 1 the residue (a double: +-Inf and NaN
 * observations), summed as any element. Readers before 2.8 see an unknown
 * scheme bit and refuse the segment (never a wrong number). */
#define PCPU__SEG_HIST_WIDE 0x200u
/* 2.10: with PAIRS, a family of sparse histograms (PCPU_FAMILY_SPARSE): a
 * series' buckets lie in groups of PCPU__SEG_SPARSE_GROUP, each made at its
 * first record wherever the zone had room, and its entry names a table of
 * where they are instead of a value:
 *   series entry: u32a (chunk) 0; u32b = 8 * (ngroups + wide), the
 *                 table's bytes, ngroups = ceil(nbuckets / 8), wide 1 with
 *                 PCPU__SEG_HIST_WIDE; value_off = the table's offset in
 *                 the STRING TABLE (a multiple of 8, inside strings_used;
 *                 never moved nor reused while the entry lives).
 *   table word k < ngroups: 0 while group k is not made; else its place,
 *                 high half 2 * chunk + 1, low half offset | 1 (offset in
 *                 the chunk's slot region, a multiple of 16): 128 bytes
 *                 there in every region of the chunk, slot and mirror, are
 *                 buckets 8k..8k+7's (count, sum) pairs as a dense
 *                 histogram's (pairs past nbuckets read as zero).
 *   table word ngroups (wide): the place of a 16-byte pair, element 0 the
 *                 double per slot, element 1 the residue (PCPU__SEG_HIST_WIDE).
 * A word goes from 0 to its place once, never back, while its entry lives;
 * the writer stores it (release) after the group's words are zero, then
 * adds 2 to the header's generation (no odd phase: the entry is unchanged),
 * so that a reader's cached directory is read again. A word with one half
 * 0 is being stored (a copy made 32 bits at a time): read as 0; so is one
 * naming a chunk at or past nchunks (made after the header was read).
 * Readers before 2.10 see an unknown scheme bit and refuse the family
 * (never a wrong number). */
#define PCPU__SEG_HIST_SPARSE 0x400u
#define PCPU__SEG_SPARSE_GROUP 8 /* buckets per group (PCPU_HISTOGRAM_GROUP_BUCKETS) */
#define PCPU__SEG_SPARSE_GROUP_SIZE (16 * PCPU__SEG_SPARSE_GROUP)
#define PCPU__SEG_SPARSE_GROUPS(nbuckets) \
	(((uint64_t)(nbuckets) + PCPU__SEG_SPARSE_GROUP - 1) / PCPU__SEG_SPARSE_GROUP)
/* A table word's place: 1 with *chunk and *off, 0 for none (0, or one
 * half 0: being stored), -1 for a word no writer stores (a half even). The
 * writer's side is the statistics layer's pcpu__sparse_word(). */
static inline int pcpu__seg_sparse_place(uint64_t w, uint32_t *chunk, uint32_t *off)
{
	uint32_t hi = (uint32_t)(w >> 32), lo = (uint32_t)w;

	if (!hi || !lo)
		return 0;
	if (!(hi & 1) || !(lo & 1))
		return -1;
	*chunk = hi >> 1;
	*off = lo & ~1u;
	return 1;
}
/* A group's place (chunk, offset in its slot region) as a table word. */
static inline uint64_t pcpu__seg_sparse_word(uint32_t chunk, uint32_t off)
{
	return ((uint64_t)(2 * chunk + 1) << 32) | off | 1u;
}

/*
 * One directory entry: a family or a series.
 *
 * Family blob: NUL-terminated name, help (if HAS_HELP), unit ("" for none),
 * nlabels label names; then, for explicit and exponential histograms, zero
 * padding to a multiple of 8 and nbuckets - 1 int64 upper bounds.
 * Exponential (2.2): u32b = schema + PCPU__SEG_SCHEMA_BIAS, value_off the
 * native index of bucket 1 (int64); bucket 0 is the zero bucket. Log-linear histograms
 * store no bounds: bucket b's upper bound follows from precision_bits (see
 * docs/segment-format.md).
 * Series blob: nlabels NUL-terminated label values.
 *
 * A series' value: value_size bytes at offset value_off in every slot
 * region s < nslots of chunk `chunk` (the slot's rseq words) and the same
 * bytes at the same offset in its mirror region nslots + s (the slot's
 * atomic-only words: fallback adds, reset offsets, gauge set offsets).
 * Every element is one int64 word per region; an element's value is the sum
 * over s < nslots of word(s) + mirror(s), modulo 2^64:
 *   counter   8 bytes: one word
 *   gauge     8 bytes: one word, exactly a counter (value read as int64)
 *   counter or gauge of a PCPU__SEG_E_NANOS family (2.7): 16 bytes, element
 *             0 the whole units, element 1 the billionths (int64); the
 *             value is element 0 + element 1 * 10^-9; 2.8: 24 bytes,
 *             element 2 the residue (a double: only slot 0's mirror word
 *             is written), added to it (pcpu_fraction_value())
 *   histogram 8 * (1 + nbuckets): element 0 the sum of the observations,
 *             element 1 + b the count of bucket b, each a counter as above
 * Regions (or parts of them) never written read as zero (sparse file).
 */
struct pcpu__seg_entry {
	uint64_t seq;           /*  0: odd while written; grows with every change */
	uint16_t kind;          /*  8: PCPU__SEG_FREE / FAMILY / SERIES */
	uint8_t type;           /* 10: enum pcpu_metric_type */
	int8_t scale_exp10;     /* 11: family */
	uint16_t nlabels;       /* 12 */
	uint16_t flags;         /* 14: PCPU__SEG_E_* */
	uint64_t family_id;     /* 16: family: its id; series: its family's id */
	uint64_t blob_off;      /* 24: offset in the string table */
	uint32_t blob_len;      /* 32 */
	uint32_t nbuckets;      /* 36: family of histograms: buckets, +Inf included */
	uint32_t u32a;          /* 40: series: chunk;      family: histogram scheme */
	uint32_t u32b;          /* 44: series: value_size; family: precision_bits */
	uint64_t value_off;     /* 48: series: offset in the chunk's slot region;
				 * family (2.2), log-linear: 1 + log2 of the `le` bounds
				 * exposed per power of two, 0: every bucket (2.0-2.1) */
	uint64_t serial;        /* 56: series: creation number (the exposition's order);
				 * family (2.2), log-linear: smallest exposed bound (int64) */
};                          /* 64 */

#define PCPU__SEG_ENTRY_SIZE 64

/*
 * 2.3: consistent groups (pcpu_registry_group()). A group's members are
 * series of different families that must be read together; slot regions
 * cannot give that to a reader in another process (a seqcount over many
 * preads), so the writer stores each group's last consistent read in the
 * directory, where the entry seqlock protects it:
 *   GROUP entry: u32a = nmembers (1..16), blob = nmembers int64 values
 *                (blob_len = 8 * nmembers, unaligned: read with memcpy),
 *                rewritten in place under the entry's seq at every
 *                collection of the writer's registry; serial: the group's
 *                creation number. type, nlabels, family_id: 0.
 *   GROUP_SERIES entry: as a SERIES entry (type counter or gauge, family,
 *                labels), but its value is member u32a of the GROUP entry
 *                whose index is value_off; u32b = 8; no slot storage.
 * A group entry outlives its member series entries. Readers of 2.0-2.2
 * skip both kinds (unknown kinds): they see no group members.
 */

/*
 * 2.9: flows tables (pcpu_segment_flows_create(), pcpu/flows.h). A table
 * is nflows x ncounters 64-bit words, word[flow * ncounters + counter],
 * each the shared word of one (flow, counter): every add the writer's
 * slots buffered until its last drain or flush, and every add that went
 * to the word directly. The writer flushes its tables at every collection
 * of its registry, so a word holds every add that returned before the
 * writer's last collection began (docs/segment-format.md, Flows tables).
 *   FLOWS entry: flags HAS_HELP or 0; family_id a unique id (never a
 *                family's); u32a = ncounters (1..PCPU__SEG_FLOWS_MAX_COUNTERS);
 *                u32b = 8 (bytes per word); value_off = the FILE offset of
 *                word 0 (not in a chunk: at or above PCPU__SEG_TABLES_BASE,
 *                a multiple of 4096); serial = nflows; type, nlabels,
 *                nbuckets, scale: 0.
 *   blob: NUL-terminated name (a metric name), help (with HAS_HELP), then
 *         ncounters NUL-terminated counter names (label names, distinct).
 * The words lie outside every chunk: the writer's zone never grows a chunk
 * past PCPU__SEG_TABLES_BASE (backing.c), and tables are placed from there
 * up, each in pages of its own, all allocated when the table is made (a
 * full file system refuses the table: ENOSPC; nothing can SIGBUS). A
 * freed table's entry changes (seq odd, then kind FREE) before its pages
 * are given back, so a reader that finds the entry unchanged after reading
 * the words read that table's. Readers of 2.0-2.8 skip the kind.
 */
#define PCPU__SEG_TABLES_BASE ((uint64_t)1 << 43) /* 8 TiB (sparse) */
#define PCPU__SEG_FLOWS_MAX_COUNTERS 64
#define PCPU__SEG_FLOWS_MAX_KEYS 0xfffffffeu /* PCPU_FLOWS_MAX_KEYS */

/* Value sizes (bytes per slot region, and as many in its mirror region). */
#define PCPU__SEG_COUNTER_SIZE 8
#define PCPU__SEG_GAUGE_SIZE 8
#define PCPU__SEG_NANOS_SIZE 16 /* 2.7: PCPU__SEG_E_NANOS families' counters and gauges */
#define PCPU__SEG_FRACTION_SIZE 24 /* 2.8: the same with their residue */
#define PCPU__SEG_HISTOGRAM_SIZE(nbuckets) (8 * (1 + (uint64_t)(nbuckets))) /* 2.0-2.3 */
#define PCPU__SEG_HISTOGRAM_PAIRS_SIZE(nbuckets) (16 * (uint64_t)(nbuckets)) /* 2.4 */
#define PCPU__SEG_HISTOGRAM_WIDE_SIZE(nbuckets) (16 * ((uint64_t)(nbuckets) + 1)) /* 2.8 */

/* Alignment of value_off (the zone's allocation granule). */
#define PCPU__SEG_VALUE_ALIGN 8

/* Largest 1 + log2 of exposed bounds per power of two (PCPU_HISTOGRAM_EXPORT_MAX). */
#define PCPU__SEG_MAX_EXPORT_LG1 7

/* Most explicit bucket bounds (PCPU_HISTOGRAM_MAX_BOUNDS; writer.c checks
 * they agree). */
#define PCPU__SEG_MAX_BOUNDS 4096

/* Blob size limits (the statistics layer's limits, plus terminators). */
#define PCPU__SEG_BLOB_MAX (128 * 1024)

_Static_assert(sizeof(struct pcpu__seg_header) == 256, "header layout");
_Static_assert(sizeof(struct pcpu__seg_entry) == PCPU__SEG_ENTRY_SIZE, "entry layout");

#endif /* PCPU_SEGMENT_FORMAT_H */
