/*
 * Builds small statistics segments in memory, byte by byte as the format
 * (src/segment/format.h) says, for the hostile-input test and the fuzz
 * corpus. A real writer always uses 32 MiB slot strides; the format allows
 * any power of two from 16 bytes, which keeps these segments a few KiB.
 * Format 2: a chunk is nslots slot regions, then their nslots mirrors.
 */
#ifndef PCPU_TEST_SEG_BUILDER_H
#define PCPU_TEST_SEG_BUILDER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

struct sb {
	unsigned char *buf;
	size_t len;
	struct pcpu__seg_header *h;
	uint64_t nentries, strings_used;
};

static inline struct pcpu__seg_entry *sb_entry(struct sb *b, uint64_t i)
{
	return (struct pcpu__seg_entry *)(b->buf + b->h->entries_offset + i * PCPU__SEG_ENTRY_SIZE);
}

/* A segment with `nslots` slots (and as many mirrors) of `stride` bytes,
 * `nchunks` chunks, room for `ecap` entries and `scap` bytes of strings. */
static inline void sb_init(struct sb *b, unsigned nslots, uint64_t stride, unsigned nchunks,
			   unsigned ecap, unsigned scap)
{
	uint64_t entries = 256, strings = entries + (uint64_t)ecap * PCPU__SEG_ENTRY_SIZE;
	uint64_t data = strings + scap;

	memset(b, 0, sizeof *b);
	b->len = (size_t)(data + (uint64_t)nchunks * 2 * nslots * stride);
	b->buf = calloc(1, b->len);
	b->h = (struct pcpu__seg_header *)b->buf;
	memcpy(b->h->magic, PCPU__SEG_MAGIC, 8);
	b->h->version_major = PCPU__SEG_VERSION_MAJOR;
	b->h->version_minor = PCPU__SEG_VERSION_MINOR;
	b->h->header_size = sizeof *b->h;
	b->h->byte_order = PCPU__SEG_BYTE_ORDER;
	b->h->writer_pid = 4242;
	b->h->writer_uid = 1000;
	b->h->writer_start = 777;
	b->h->nslots = nslots;
	b->h->slot_index = 2;
	b->h->slot_stride = stride;
	b->h->chunk_span = 2 * (uint64_t)nslots * stride;
	b->h->data_offset = data;
	b->h->nchunks = nchunks;
	b->h->entries_offset = entries;
	b->h->entries_capacity = ecap;
	b->h->entry_size = PCPU__SEG_ENTRY_SIZE;
	b->h->strings_offset = strings;
	b->h->strings_capacity = scap;
	b->h->generation = 2;
	strcpy(b->h->name, "built");
}

static inline uint64_t sb_blob(struct sb *b, const void *data, size_t len)
{
	uint64_t off = (b->strings_used + 7) & ~(uint64_t)7;

	memcpy(b->buf + b->h->strings_offset + off, data, len);
	b->strings_used = off + len;
	b->h->strings_used = b->strings_used;
	return off;
}

static inline uint64_t sb_add(struct sb *b, const struct pcpu__seg_entry *e)
{
	uint64_t i = b->nentries++;

	*sb_entry(b, i) = *e;
	b->h->entries_used = b->nentries;
	return i;
}

/* A family; for histograms pass the bounds (explicit, scheme 1; also
 * exponential, scheme 3, with p = schema + PCPU__SEG_SCHEMA_BIAS) or
 * precision and bucket count (log-linear, scheme 2). */
static inline uint64_t sb_family(struct sb *b, uint64_t id, unsigned type, const char *name,
				 const char *help, const char *unit, unsigned nlabels,
				 const char *const *label_names, unsigned scheme, unsigned p,
				 unsigned nbuckets, const int64_t *bounds)
{
	char blob[4096];
	size_t pos = 0, n;
	unsigned l;
	struct pcpu__seg_entry e;

	memset(&e, 0, sizeof e);
#define SB_PUT(s) (n = strlen(s) + 1, memcpy(blob + pos, (s), n), pos += n)
	SB_PUT(name);
	if (help)
		SB_PUT(help);
	SB_PUT(unit ? unit : "");
	for (l = 0; l < nlabels; l++)
		SB_PUT(label_names[l]);
#undef SB_PUT
	if (type == 3 && scheme != 2) { /* explicit, exponential: bounds */
		while (pos & 7)
			blob[pos++] = 0;
		memcpy(blob + pos, bounds, (nbuckets - 1) * 8);
		pos += (nbuckets - 1) * 8;
	}
	e.seq = 2;
	e.kind = PCPU__SEG_FAMILY;
	e.type = (uint8_t)type;
	e.nlabels = (uint16_t)nlabels;
	e.flags = help ? PCPU__SEG_E_HAS_HELP : 0;
	e.family_id = id;
	e.blob_off = sb_blob(b, blob, pos);
	e.blob_len = (uint32_t)pos;
	if (type == 3) {
		e.nbuckets = nbuckets;
		e.u32a = scheme;
		e.u32b = p;
		if (scheme == 2)
			e.value_off = 1; /* 2.2: one `le` per power of two, from 0 */
	}
	return sb_add(b, &e);
}

static inline uint64_t sb_series(struct sb *b, uint64_t family_id, unsigned type, unsigned nlabels,
				 const char *const *values, unsigned chunk, uint64_t off,
				 uint32_t size)
{
	char blob[4096];
	size_t pos = 0, n;
	unsigned l;
	struct pcpu__seg_entry e;

	memset(&e, 0, sizeof e);
	for (l = 0; l < nlabels; l++) {
		n = strlen(values[l]) + 1;
		memcpy(blob + pos, values[l], n);
		pos += n;
	}
	e.seq = 2;
	e.kind = PCPU__SEG_SERIES;
	e.type = (uint8_t)type;
	e.nlabels = (uint16_t)nlabels;
	e.family_id = family_id;
	e.blob_off = pos ? sb_blob(b, blob, pos) : 0;
	e.blob_len = (uint32_t)pos;
	e.u32a = chunk;
	e.u32b = size;
	e.value_off = off;
	e.serial = b->nentries + 1; /* creation order = entry order here */
	return sb_add(b, &e);
}

/* 2.3: a GROUP entry holding `n` member values; its entry index. */
static inline uint64_t sb_group(struct sb *b, unsigned n, const int64_t *vals)
{
	struct pcpu__seg_entry e;

	memset(&e, 0, sizeof e);
	e.seq = 2;
	e.kind = PCPU__SEG_GROUP;
	e.u32a = n;
	e.blob_off = sb_blob(b, vals, 8 * (size_t)n);
	e.blob_len = 8 * n;
	e.serial = b->nentries + 1;
	return sb_add(b, &e);
}

/* 2.3: a series whose value is member `member` of GROUP entry `group`. */
static inline uint64_t sb_group_series(struct sb *b, uint64_t family_id, unsigned type,
				       unsigned nlabels, const char *const *values, uint64_t group,
				       unsigned member)
{
	uint64_t i = sb_series(b, family_id, type, nlabels, values, member, group, 8);

	sb_entry(b, i)->kind = PCPU__SEG_GROUP_SERIES;
	return i;
}

/* Stores an int64 at byte `off` of region `region` of chunk `chunk`:
 * region s < nslots is slot s, region nslots + s its mirror. */
static inline void sb_put_region64(struct sb *b, unsigned chunk, uint64_t region, uint64_t off,
				   int64_t v)
{
	memcpy(b->buf + b->h->data_offset + chunk * b->h->chunk_span + region * b->h->slot_stride +
		       off,
	       &v, 8);
}

/* Slot `slot`'s own (rseq) word at byte `off` of chunk `chunk`. */
static inline void sb_put64(struct sb *b, unsigned chunk, unsigned slot, uint64_t off, int64_t v)
{
	sb_put_region64(b, chunk, slot, off, v);
}

/* Slot `slot`'s mirror (atomic) word at byte `off` of chunk `chunk`. */
static inline void sb_mirror64(struct sb *b, unsigned chunk, unsigned slot, uint64_t off, int64_t v)
{
	sb_put_region64(b, chunk, (uint64_t)b->h->nslots + slot, off, v);
}

/*
 * The standard test segment: 2 slots (and 2 mirrors) of 512 bytes, 1 chunk.
 *   requests_total{method="GET"}   @16 = 10 + 5 (slot 0 word + mirror) + 7 (slot 1) = 22
 *   requests_total{method="POST"}  @24 = 3 (slot 1's mirror only)
 *   temperature_celsius (gauge, unit celsius) @32 = adds 4 - 1 + set offset 20
 *       (slot 0's mirror) = 23
 *   latency_seconds (explicit histogram, bounds 10,100,1000; scale -3) @40
 *       buckets 1,2,0,1 (slot 0) + 0,1,0,0 (slot 1's mirror); sum 2500
 *   size_bytes (log-linear, p = 1, 9 buckets: k = 4) @80, one observation in
 *       bucket 3 (slot 1), sum 5 (2 in slot 0, 3 in slot 0's mirror)
 * Per slot (word + mirror): GET 15, 7; POST 0, 3; temperature 24, -1;
 * latency (bucket counts) 4, 1; size_bytes 0, 1.
 */
static inline void sb_standard_in(struct sb *b, unsigned entries, unsigned strings);

static inline void sb_standard(struct sb *b)
{
	sb_standard_in(b, 16, 1024);
}

/* The same with room for `entries` entries and `strings` bytes of strings. */
static inline void sb_standard_in(struct sb *b, unsigned entries, unsigned strings)
{
	static const char *const method[] = { "method" };
	static const char *const get[] = { "GET" }, *const post[] = { "POST" };
	static const int64_t bounds[] = { 10, 100, 1000 };
	struct pcpu__seg_entry *e;

	sb_init(b, 2, 512, 1, entries, strings);
	sb_family(b, 1, 1, "requests", "Requests \"served\".\n", NULL, 1, method, 0, 0, 0, NULL);
	sb_series(b, 1, 1, 1, get, 0, 16, 8);
	sb_series(b, 1, 1, 1, post, 0, 24, 8);
	sb_family(b, 2, 2, "temperature_celsius", "Temperature.", "celsius", 0, NULL, 0, 0, 0, NULL);
	sb_series(b, 2, 2, 0, NULL, 0, 32, 8);
	e = sb_entry(b, sb_family(b, 3, 3, "latency_seconds", "Latency.", "seconds", 0, NULL, 1, 0, 4,
				  bounds));
	e->scale_exp10 = -3;
	sb_series(b, 3, 3, 0, NULL, 0, 40, 8 * 5);
	sb_family(b, 4, 3, "size_bytes", NULL, "bytes", 0, NULL, 2, 1, 9, NULL);
	sb_series(b, 4, 3, 0, NULL, 0, 80, 8 * 10);

	sb_put64(b, 0, 0, 16, 10);
	sb_mirror64(b, 0, 0, 16, 5);
	sb_put64(b, 0, 1, 16, 7);
	sb_mirror64(b, 0, 1, 24, 3);
	sb_put64(b, 0, 0, 32, 4);
	sb_put64(b, 0, 1, 32, -1);
	sb_mirror64(b, 0, 0, 32, 20);       /* pcpu_gauge_set()'s offset */
	sb_put64(b, 0, 0, 40, 2500);        /* sum */
	sb_put64(b, 0, 0, 48, 1);           /* bucket 0 */
	sb_put64(b, 0, 0, 56, 2);           /* bucket 1 */
	sb_mirror64(b, 0, 1, 56, 1);        /* bucket 1, slot 1 (mirror word) */
	sb_put64(b, 0, 0, 72, 1);           /* bucket 3 (+Inf) */
	sb_put64(b, 0, 0, 80, 2);           /* log-linear sum */
	sb_mirror64(b, 0, 0, 80, 3);
	sb_put64(b, 0, 1, 80 + 8 * 4, 1);   /* bucket 3 */
}

/*
 * 2.3 consistent groups: the standard segment plus flow_packets_total and
 * flow_bytes_total{flow="a"}, members 0 and 1 of GROUP entry G = (4, 6000).
 * Entries: 0-8 standard, 9, 10 the families, 11 G, 12, 13 the members.
 */
static inline void sb_groups(struct sb *b)
{
	static const char *const fl[] = { "flow" }, *const a[] = { "a" };
	static const int64_t v[2] = { 4, 6000 };
	uint64_t g;

	sb_standard(b);
	sb_family(b, 20, 1, "flow_packets", "Packets.", NULL, 1, fl, 0, 0, 0, NULL);
	sb_family(b, 21, 1, "flow_bytes", "Bytes.", NULL, 1, fl, 0, 0, 0, NULL);
	g = sb_group(b, 2, v); /* entry 11 */
	sb_group_series(b, 20, 1, 1, a, g, 0);
	sb_group_series(b, 21, 1, 1, a, g, 1);
}

/*
 * 2.8: the standard segment plus values beyond the integer words and label
 * sets of one name. Entries 9-17:
 *   mem_bytes (gauge with fractions, flag 16) @168, 24 bytes: whole 16,
 *       billionths 500000000, residue 0.25 (slot 0's mirror word of element
 *       2) = 16.75
 *   xfer_seconds (explicit histogram with fractions, scheme 1|0x100|0x200,
 *       bound 100, scale -9) @192, 48 bytes: bucket 0 count 1 sum 5e10
 *       units, bucket 1 count 2; the per-slot doubles 1e10 (slot 0) and
 *       2e10 (slot 1), its residue 0: sum 50 + 3e10 = 30000000050
 *   jobs_total {} @240 = 3, {queue} {"q1"} @248 = 4, {queue, prio}
 *       {"q1", "hi"} @256 = 5: three label sets of one name
 */
static inline void sb_v28(struct sb *b)
{
	static const char *const queue[] = { "queue" }, *const qp[] = { "queue", "prio" };
	static const char *const q1[] = { "q1" }, *const q1hi[] = { "q1", "hi" };
	static const int64_t bound[] = { 100000000000 };
	double d;
	int64_t bits;
	uint64_t i;

	sb_standard_in(b, 32, 2048);
	i = sb_family(b, 5, 2, "mem_bytes", "Memory.", "bytes", 0, NULL, 0, 0, 0, NULL);
	sb_entry(b, i)->flags |= PCPU__SEG_E_NANOS;
	sb_series(b, 5, 2, 0, NULL, 0, 168, 24);
	sb_put64(b, 0, 0, 168, 16);
	sb_put64(b, 0, 1, 176, 500000000);
	d = 0.25;
	memcpy(&bits, &d, 8);
	sb_mirror64(b, 0, 0, 184, bits);
	i = sb_family(b, 6, 3, "xfer_seconds", "Transfers.", "seconds", 0, NULL, 1, 0, 2, bound);
	sb_entry(b, i)->u32a |= PCPU__SEG_HIST_PAIRS | PCPU__SEG_HIST_WIDE;
	sb_entry(b, i)->scale_exp10 = -9;
	sb_series(b, 6, 3, 0, NULL, 0, 192, 48);
	sb_put64(b, 0, 0, 192, 1);
	sb_put64(b, 0, 0, 200, 50000000000);
	sb_put64(b, 0, 1, 208, 2);
	d = 1e10;
	memcpy(&bits, &d, 8);
	sb_put64(b, 0, 0, 224, bits);
	d = 2e10;
	memcpy(&bits, &d, 8);
	sb_mirror64(b, 0, 1, 224, bits);
	sb_family(b, 7, 1, "jobs", "Jobs.", NULL, 0, NULL, 0, 0, 0, NULL);
	sb_series(b, 7, 1, 0, NULL, 0, 240, 8);
	sb_family(b, 8, 1, "jobs", "Jobs.", NULL, 1, queue, 0, 0, 0, NULL);
	sb_series(b, 8, 1, 1, q1, 0, 248, 8);
	sb_family(b, 9, 1, "jobs", "Jobs.", NULL, 2, qp, 0, 0, 0, NULL);
	sb_series(b, 9, 1, 2, q1hi, 0, 256, 8);
	sb_put64(b, 0, 0, 240, 3);
	sb_put64(b, 0, 1, 248, 4);
	sb_mirror64(b, 0, 0, 256, 5);
}

/* 2.10: sparse histograms (format.h, PCPU__SEG_HIST_SPARSE): 2 slots of
 * 2,048 bytes, one chunk:
 *   lat_seconds, log-linear p = 1, 21 buckets (3 groups), scale -9,
 *       {k="a"}: groups 0 @512 and 2 @640 made,
 *       group 1 not: bucket 1 count 2 sum 3 (slot 0), bucket 5 count 1
 *       sum 10 (slot 1's mirror), bucket 17 count 4 sum 70 (slot 1);
 *       {k="torn"}: group 0's word half stored (its low half 0): reads 0
 *   fr_seconds, explicit, bound 100, with fractions (one group and the
 *       double sum's pair), {}: group 0 @768 (bucket 0 count 1 sum 5),
 *       pair @896 (slot 0's double 0.5): sum 5e-9 + 0.5
 * Returns the table offsets (strings) of {k="a"} and of fr_seconds' in
 * *ta and *tf. */
static inline void sb_v210(struct sb *b, uint64_t *ta, uint64_t *tf)
{
	static const char *const kl[] = { "k" }, *const a[] = { "a" }, *const torn[] = { "torn" };
	static const int64_t bound[] = { 100 };
	uint64_t i, w[3], tt;
	double d = 0.5;
	int64_t bits;

	sb_init(b, 2, 2048, 1, 32, 4096);
	i = sb_family(b, 20, 3, "lat_seconds", "Latency.", "seconds", 1, kl, 2, 1, 21, NULL);
	sb_entry(b, i)->u32a |= PCPU__SEG_HIST_PAIRS | PCPU__SEG_HIST_SPARSE;
	sb_entry(b, i)->scale_exp10 = -9;
	w[0] = ((uint64_t)1 << 32) | 512 | 1; /* chunk 0: high half 2 * 0 + 1 */
	w[1] = 0;
	w[2] = ((uint64_t)1 << 32) | 640 | 1;
	*ta = sb_blob(b, w, sizeof w);
	sb_series(b, 20, 3, 1, a, 0, *ta, 24);
	w[0] = (uint64_t)1 << 32; /* high half stored, low half not yet */
	w[2] = 0;
	tt = sb_blob(b, w, sizeof w);
	sb_series(b, 20, 3, 1, torn, 0, tt, 24);
	sb_put64(b, 0, 0, 512 + 16, 2); /* bucket 1 */
	sb_put64(b, 0, 0, 512 + 24, 3);
	sb_mirror64(b, 0, 1, 512 + 80, 1); /* bucket 5 */
	sb_mirror64(b, 0, 1, 512 + 88, 10);
	sb_put64(b, 0, 1, 640 + 16, 4); /* bucket 17 */
	sb_put64(b, 0, 1, 640 + 24, 70);
	i = sb_family(b, 21, 3, "fr_seconds", "Fractions.", "seconds", 0, NULL, 1, 0, 2, bound);
	sb_entry(b, i)->u32a |= PCPU__SEG_HIST_PAIRS | PCPU__SEG_HIST_WIDE | PCPU__SEG_HIST_SPARSE;
	sb_entry(b, i)->scale_exp10 = -9;
	w[0] = ((uint64_t)1 << 32) | 768 | 1;
	w[1] = ((uint64_t)1 << 32) | 896 | 1;
	*tf = sb_blob(b, w, 16);
	sb_series(b, 21, 3, 0, NULL, 0, *tf, 16);
	sb_put64(b, 0, 0, 768, 1);
	sb_put64(b, 0, 0, 776, 5);
	memcpy(&bits, &d, 8);
	sb_put64(b, 0, 0, 896, bits);
}

#endif
