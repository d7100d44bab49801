/* SPDX-License-Identifier: MIT */
/*
 * The segment reader's parts (pcpu/reader.h), one subject a file:
 *
 *   reader_input.c     every byte taken from a segment (pread or a memory
 *                      copy) and the memory budget it is charged to
 *   reader_header.c    the header: validation, and reading it again
 *   reader_scan.c      finding segment files in the directories, the
 *                      owners the options accept
 *   reader_open.c      opening and trust checks (owner, writer, header)
 *   reader_list.c      pcpu_segment_list(), pcpu_segment_prune()
 *   reader_parse.c     parsing and validating a copy of the directory
 *   reader_values.c    reading and summing the values of the series
 *   reader_result.c    assembling the public snapshot
 *   reader_snapshot.c  the read protocol: copies, retries, what is kept
 *
 * The reader uses only libc, this header, segment/segment_internal.h and the
 * statistics layer's validators (stats/validate.h, stats/histogram_layout.h
 * and pcpu/expose.h): the fuzz target builds it without the core.
 * Nothing here is exported.
 */
#ifndef PCPU_SEGMENT_READER_INTERNAL_H
#define PCPU_SEGMENT_READER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <pcpu/reader.h>

#include "segment_internal.h"

/* max_bytes 0: 4 GiB, or SIZE_MAX where size_t is 32 bits -- there
 * (size_t)4 << 30 was 0, a budget of nothing, and every snapshot of a
 * reader opened with the defaults failed with EFBIG (found on ARMv7 by
 * tests/vm/vm_stress.c --workload tree). */
#if SIZE_MAX > 0xffffffffu
#define PCPU__RD_DEFAULT_MAX_BYTES ((size_t)4 << 30)
#else
#define PCPU__RD_DEFAULT_MAX_BYTES SIZE_MAX
#endif

struct pcpu_reader {
	int fd; /* -1: memory source (tests, fuzzing) */
	const unsigned char *mem;
	size_t mem_len;
	/* tests: runs before each read (its number, offset and length) */
	void (*read_hook)(void *ctx, unsigned n, uint64_t off, size_t len);
	void *read_hook_ctx;
	/* Counted by every snapshot, which may run at once (atomic). */
	unsigned nreads;
	uint64_t nsyscalls; /* preads and lseeks on the file (tests) */
	uint64_t nentries;  /* directory entries copied, every copy (tests) */
	unsigned flags;
	int check_proc;
	uid_t file_owner;
	size_t max_bytes;
	struct pcpu__seg_header h; /* as validated at open */
	char name[PCPU__SEG_NAME_MAX + 1];
	/* The directory of the last stable snapshot, while it may serve the
	 * next (reader_snapshot.c); NULL when none. pcpu_reader_close() frees
	 * it with cache_free, which reader_snapshot.c sets: reader_open.c
	 * calls nothing of the file that calls it (layer_check). */
	struct pcpu__rd_cache *cache;
	void (*cache_free)(struct pcpu__rd_cache *c);
};

/* Internal entry points for tests and the fuzzer (not exported). */
PCPU_HIDDEN pcpu_reader_t *pcpu__reader_open_mem(const void *buf, size_t len, size_t max_bytes);
PCPU_HIDDEN uint64_t pcpu__reader_syscalls(const pcpu_reader_t *r);
PCPU_HIDDEN uint64_t pcpu__reader_entries_copied(const pcpu_reader_t *r);
PCPU_HIDDEN void pcpu__reader_set_read_hook(pcpu_reader_t *r,
					    void (*fn)(void *ctx, unsigned n, uint64_t off, size_t len),
					    void *ctx);

/* ---- reader_input.c ---- */

/* len bytes at off exactly (a memory source is copied likewise), or -1
 * with errno and a message: EBADMSG for a short read ("truncated"). */
PCPU_HIDDEN int pcpu__rd_read_exact(struct pcpu_reader *r, void *buf, size_t len, uint64_t off,
				    const char *what);

/* The source's size: 0 with *size set, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__rd_size(struct pcpu_reader *r, uint64_t *size);

/* What one snapshot may still allocate and read (max_bytes). */
struct pcpu__rd_budget {
	size_t left;
	const char *name;
};

/* Charges n bytes: 0, or -1 with errno EFBIG and a message. */
PCPU_HIDDEN int pcpu__rd_charge(struct pcpu__rd_budget *b, uint64_t n);

/* n zeroed bytes, charged: NULL with errno EFBIG or ENOMEM and a message. */
PCPU_HIDDEN void *pcpu__rd_alloc(struct pcpu__rd_budget *b, uint64_t n);

/*
 * Torn copies (src/core/core.h): on a target whose kernel may copy a 64-bit
 * word 32 bits at a time (PCPU__TORN64), a word of a copy may be half of
 * one store and half of another. `buf` holds a copy of len bytes at off
 * (8-byte aligned words); this copies them twice more into b2 and b3, and
 * keeps each word in buf from the middle copy when the three settle on it
 * (pcpu__settled(): high halves equal, the middle between the others),
 * reading it again alone while they do not,
 * PCPU__SETTLE_MAX more times at most. A word that never settles fails the
 * read: -1 with errno EAGAIN and a message (before, the last copy was kept:
 * issue 51, 3 of 1,006 segment reads torn in the ARMv7 machine). Each read
 * is charged to b (NULL: to nothing). 0, or -1 with errno. Used by the
 * snapshot's values (reader_values.c) and flows tables' words
 * (reader_flows.c) where PCPU__TORN64 is 1; defined on every target.
 */
PCPU_HIDDEN int pcpu__rd_settle(struct pcpu_reader *r, struct pcpu__rd_budget *b,
				unsigned char *buf, unsigned char *b2, unsigned char *b3, size_t len,
				uint64_t off);

/* ---- reader_header.c ---- */

/* Checks the fields that never change after publication. 0, or -1 with
 * errno (EAGAIN while being created, EBADMSG, EPROTONOSUPPORT) and a
 * message naming `what`. */
PCPU_HIDDEN int pcpu__rd_check_header_static(const struct pcpu__seg_header *h, const char *what);

/* The fields that change, against the static ones and the file's size. */
PCPU_HIDDEN int pcpu__rd_check_header_dynamic(const struct pcpu__seg_header *h, uint64_t size,
					      const char *what);

/* The header again, checked against the one validated at open. 0 with *h
 * and the file's *size, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__rd_read_header(struct pcpu_reader *r, struct pcpu__seg_header *h,
				     uint64_t *size);

/* ---- reader_scan.c ---- */

/* A segment file found in one of the directories. */
struct pcpu__rd_candidate {
	char file[96];
	char name[PCPU__SEG_NAME_MAX + 1];
	pid_t pid;
	size_t dir;    /* index in the pcpu__seg_dirs */
	uid_t owner;   /* of the file (lstat at the scan) */
	int owner_ok;  /* a regular file of an owner the caller accepts */
	int too_small; /* such a file, shorter than a header (lstat at the scan) */
};

/* The owner the options accept (PCPU_READER_OWNER, else the caller). */
PCPU_HIDDEN uid_t pcpu__rd_expected_owner(const struct pcpu_reader_options *o);

/* Opens the reader's directories: the one named, or the per-user ones of
 * the owners the options accept. 0, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__rd_dirs_open(const struct pcpu_reader_options *o, struct pcpu__seg_dirs *ds);

/* The segment files of the directories that match a file name (`file`),
 * or a name and/or pid (NULL, 0: any). *out is malloc'ed (free it), *n
 * its length. 0, or -1 with errno and a message. */
PCPU_HIDDEN int pcpu__rd_scan_dirs(const struct pcpu__seg_dirs *ds,
				   const struct pcpu_reader_options *o, const char *file,
				   const char *name, pid_t pid, struct pcpu__rd_candidate **out,
				   size_t *n);

/* Whether candidate c may have a live writer: only a closed segment or one
 * whose writer is gone on positive evidence is not one. */
PCPU_HIDDEN int pcpu__rd_maybe_live(const struct pcpu__seg_dirs *ds,
				    const struct pcpu__rd_candidate *c);

/* ---- reader_open.c ---- */

/* The writer's state (enum pcpu_segment_state): CLOSED by the header's
 * flags, else what /proc says -- GONE only on positive evidence, UNKNOWN
 * (with errno and a message) when it cannot tell. */
PCPU_HIDDEN int pcpu__rd_writer_state(struct pcpu_reader *r, uint32_t flags);

/* Opens candidate c with the reader's checks. */
PCPU_HIDDEN pcpu_reader_t *pcpu__rd_open_candidate(const struct pcpu__seg_dirs *ds,
						   const struct pcpu__rd_candidate *c,
						   const struct pcpu_reader_options *o);

/* ---- reader_parse.c ---- */

/* A family entry of the directory copy, parsed. */
struct fam {
	uint32_t idx;
	const struct pcpu__seg_entry *e; /* in E1 */
	const char *name, *help, *unit;
	const char **label_names;
	int64_t *upper; /* nbuckets - 1 bounds (histograms) */
	uint32_t *exported; /* the exposed ones (NULL: all) */
	size_t nexport;
	int native, schema; /* exponential: PCPU_SNAPSHOT_NATIVE's fields */
	int pairs;          /* 2.4 histogram: (count, sum) per bucket */
	int info;           /* 2.4: an info family (PCPU_SNAPSHOT_INFO) */
	int nanos;          /* 2.7: values with billionths (PCPU_SNAPSHOT_NANOS); 2.8:
			     * a histogram with fractions too (scheme bit 0x200) */
	int wide;           /* 2.8: a histogram's double sum and residue pair */
	int sparse;         /* 2.10: its series' buckets in groups, a table each */
	/* Where a series of its type keeps its value (the type table's
	 * pcpu_metric_type_info()->value), read once: summing slots asks. */
	enum pcpu_value_kind value;
	int32_t native_index;
	size_t first, count; /* its kept series in the result's sorted array */
	int bad;        /* invalid: message in msg */
	char msg[160];
};

/* A series entry (or a group member) of the directory copy, parsed, and
 * its values once read. */
struct ser {
	uint32_t idx;
	uint32_t size;        /* its value's bytes (e->u32b) */
	const struct pcpu__seg_entry *e;
	uint64_t loc, serial; /* sort keys, copied out of *e: (chunk << 40) + offset */
	const char **values;
	struct fam *fam;
	int bad;
	/* values */
	uint64_t acc0;      /* counter or gauge value, histogram sum */
	uint64_t acc1;      /* 2.7: a PCPU_SNAPSHOT_NANOS value's billionths */
	uint64_t acc2;      /* 2.8: its residue's bits (a histogram's too) */
	double *dslots;     /* 2.8: a histogram's double sum, per slot */
	uint64_t *counts;   /* histogram buckets */
	int64_t *slots;     /* per-slot (word + mirror), on request */
	int group;          /* 2.3 GROUP_SERIES: the value is a GROUP entry's member */
	/* 2.10: a sparse histogram's series has no storage of its own (loc
	 * UINT64_MAX): its groups are parts (p->parts), whose values are
	 * summed into it (`whole`), from bucket `first` (PCPU__RD_SUM_PAIR:
	 * the double sum's pair). */
	int sparse;
	struct ser *whole;
	uint32_t first;
	/* Why it is bad: a copy charged to the budget, NULL while it is not.
	 * A pointer, not a family's buffer: reading the values walks every
	 * series, and without a 160-byte buffer a series is 120 bytes, not
	 * 272 (a /metrics/SEGMENT scrape of 10^5 series cost 10-30 % more). */
	char *msg;
};

/* One attempt's copies and what was parsed of them. */
struct parse {
	struct pcpu_reader *r;
	struct pcpu__rd_budget *b;
	const struct pcpu__seg_header *h;
	const unsigned char *E; /* entries copy */
	uint64_t used;          /* entries in E */
	const char *S;          /* strings copy */
	uint64_t slen;
	struct fam *fams;       /* sorted by family id */
	size_t nfams;
	struct ser *sers;
	size_t nsers;
	struct ser *parts;      /* 2.10: sparse series' groups (struct ser) */
	size_t nparts, partcap;
	unsigned flags;
	int unsettled;          /* a word's halves kept changing (reader_values.c) */
	struct pcpu__rd_plan *plan; /* how its values are read (reader_values.c) */
};

#define ENTRY_AT(p, i) ((const struct pcpu__seg_entry *)((p)->E + (uint64_t)(i) * (p)->h->entry_size))

/* Parses every entry of p->E that is not being changed (even seq): the
 * families (sorted by id), the series linked to them. An invalid entry is
 * marked bad, not an error: it may be one in flux. -1 only on budget or
 * memory exhaustion (errno and a message). */
PCPU_HIDDEN int pcpu__rd_parse_directory(struct parse *p);

/* Frees what parsing and reading the values allocated. */
PCPU_HIDDEN void pcpu__rd_parse_free(struct parse *p);

/* The blob of an entry, if it lies inside the strings copy, else NULL. */
PCPU_HIDDEN const char *pcpu__rd_entry_blob(const struct parse *p, const struct pcpu__seg_entry *e);

/* Where a series' value lies (parse_series() packed both in s->loc, so
 * that reading the values walks the series alone, not their entries). */
static inline uint32_t pcpu__rd_ser_chunk(const struct ser *s)
{
	return (uint32_t)(s->loc >> 40);
}

static inline uint64_t pcpu__rd_ser_off(const struct ser *s)
{
	return s->loc & ((UINT64_C(1) << 40) - 1);
}

/* Whether a series and its family parsed as valid (a part: its whole). */
static inline int pcpu__rd_usable(const struct ser *s)
{
	if (s->whole)
		s = s->whole;
	return !s->bad && s->fam && !s->fam->bad;
}

/* Whether a series has storage of its own to read: not a group member,
 * not a sparse histogram (whose parts have). */
static inline int pcpu__rd_stored(const struct ser *s)
{
	return !s->group && !s->sparse;
}

#define PCPU__RD_SUM_PAIR UINT32_MAX

/* ---- reader_values.c ---- */

/* Frees a parse's plan (NULL: nothing). */
PCPU_HIDDEN void pcpu__rd_plan_free(struct pcpu__rd_plan *pl);

/* Reads the values of every usable series with storage into its
 * accumulators (zeroed on every read: a parse may be read again; its arrays
 * are allocated anew, those of the last read taken by a snapshot by then),
 * working out p->plan on the first read of the parse. 0,
 * or -1 with errno and a message; on a 32-bit target -1 with EAGAIN and
 * p->unsettled set when a word's copies never agreed (the read may be
 * tried again: reader_snapshot.c). */
PCPU_HIDDEN int pcpu__rd_read_values(struct parse *p);

/* qsort() order of struct ser pointers by storage (chunk, offset). */
PCPU_HIDDEN int pcpu__rd_cmp_ser_loc(const void *a, const void *b);

/* An unaligned 64-bit word of a copy. */
static inline uint64_t pcpu__rd_ld64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* ---- reader_result.c ---- */

struct snap_impl;

/* The public snapshot of the entries kept (kept_fam[i], kept_ser[k]),
 * taking ownership of S_owned (the strings copy the names point into),
 * also on failure. NULL with errno EBADMSG (duplicates) or ENOMEM. With
 * `order` not NULL: *order gets the series in the snapshot's order (its
 * families', each family's series), malloc()ed, for pcpu__rd_derive(). */
PCPU_HIDDEN struct pcpu_reader_snapshot *pcpu__rd_build(struct parse *p, const char *S_owned,
							const unsigned char *kept_fam,
							const unsigned char *kept_ser, struct ser ***order);

/* A snapshot like `base` (a pcpu__rd_build() result, whose families,
 * names, labels and bounds it shares: base lives until both are freed),
 * with the values the parse's series hold now: order[] as *order gave
 * it. NULL with errno ENOMEM. */
PCPU_HIDDEN struct pcpu_reader_snapshot *pcpu__rd_derive(struct pcpu_reader_snapshot *base,
							 struct ser *const *order);

/* Checks snapshot s whole as pcpu_snapshot_write() would and, when it
 * passes, marks its families PCPU_SNAPSHOT_CHECKED: for a snapshot whose
 * directory the reader keeps, so that the snapshots derived from it (the
 * same families, new values) are written without checking every name and
 * label again. One that does not pass stays unmarked (its writes fail as
 * before); errno is kept. */
PCPU_HIDDEN void pcpu__rd_mark_checked(struct pcpu_reader_snapshot *s);

/* One more holder of snapshot s (pcpu_reader_snapshot_free() drops one). */
PCPU_HIDDEN void pcpu__rd_snapshot_hold(struct pcpu_reader_snapshot *s);



#endif /* PCPU_SEGMENT_READER_INTERNAL_H */
