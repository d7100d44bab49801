/*
 * The reader against hostile segments: a valid small segment reads back
 * exactly; every truncation, every byte of the header and directory
 * mutated, offsets past the end, huge counts, strings without their NUL,
 * forged sharing of storage and a directory that changes during the read
 * all end in a clean result or a clean error (ASan/UBSan builds check the
 * "clean"). Uses the reader's internal memory source, so it links the
 * static library.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pcpu/reader.h>

#include "check.h"
#include "seg_builder.h"

pcpu_reader_t *pcpu__reader_open_mem(const void *buf, size_t len, size_t max_bytes);
void pcpu__reader_set_read_hook(pcpu_reader_t *r,
				void (*fn)(void *ctx, unsigned n, uint64_t off, size_t len), void *ctx);

static const struct pcpu_snapshot_family *fam(const struct pcpu_reader_snapshot *s, const char *n)
{
	size_t i;

	for (i = 0; i < s->snapshot.nfamilies; i++)
		if (strcmp(s->snapshot.families[i].name, n) == 0)
			return &s->snapshot.families[i];
	return NULL;
}

/* Opens and snapshots a buffer; returns 0 or the errno of the failure. */
static int try_read(const void *buf, size_t len, struct pcpu_reader_snapshot **out)
{
	pcpu_reader_t *r = pcpu__reader_open_mem(buf, len, 0);
	struct pcpu_reader_snapshot *s = NULL;
	int err = 0;

	if (!r)
		return errno ? errno : -1;
	if (pcpu_reader_snapshot(r, PCPU_READER_PER_SLOT, &s) < 0) {
		err = errno ? errno : -1;
		CHECK(s == NULL);
		CHECK(*pcpu_reader_error() != '\0');
	} else {
		/* Whatever was accepted must also be writable. */
		char *text;
		size_t tl;
		if (pcpu_snapshot_write(&s->snapshot, PCPU_FORMAT_OPENMETRICS, &text, &tl) == 0)
			free(text);
	}
	pcpu_reader_close(r);
	if (out)
		*out = s;
	else
		pcpu_reader_snapshot_free(s);
	return err;
}

static void check_standard(void)
{
	struct sb b;
	struct pcpu_reader_snapshot *s;
	const struct pcpu_snapshot_family *f;
	char *text;
	size_t len;

	sb_standard(&b);
	CHECK(try_read(b.buf, b.len, &s) == 0);
	CHECK(s->stable && s->changed == 0 && !s->incomplete && s->nslots == 2);
	CHECK(s->snapshot.nfamilies == 4);
	CHECK(strcmp(s->snapshot.families[0].name, "latency_seconds") == 0);
	CHECK(strcmp(s->snapshot.families[3].name, "temperature_celsius") == 0);

	f = fam(s, "requests");
	CHECK(f && f->nseries == 2 && f->nlabels == 1 && strcmp(f->label_names[0], "method") == 0);
	CHECK(strcmp(f->help, "Requests \"served\".\n") == 0 && f->unit == NULL);
	CHECK(strcmp(f->series[0].label_values[0], "GET") == 0);
	CHECK_EQ_U64(f->series[0].value.counter, 22);
	CHECK_EQ_U64(f->series[1].value.counter, 3);
	/* Per slot: the slot's word plus its mirror word. */
	{
		const int64_t *sl = pcpu_reader_snapshot_slots(s, 1, 0);
		CHECK(sl && sl[0] == 15 && sl[1] == 7);
		sl = pcpu_reader_snapshot_slots(s, 1, 1);
		CHECK(sl && sl[0] == 0 && sl[1] == 3);
		sl = pcpu_reader_snapshot_slots(s, 3, 0);
		CHECK(sl && sl[0] == 24 && sl[1] == -1);
		sl = pcpu_reader_snapshot_slots(s, 0, 0); /* bucket counts */
		CHECK(sl && sl[0] == 4 && sl[1] == 1);
		sl = pcpu_reader_snapshot_slots(s, 2, 0);
		CHECK(sl && sl[0] == 0 && sl[1] == 1);
	}
	f = fam(s, "temperature_celsius");
	CHECK(f && f->nseries == 1 && f->series[0].value.gauge == 23 && strcmp(f->unit, "celsius") == 0);
	f = fam(s, "latency_seconds");
	CHECK(f && f->nbuckets == 4 && f->scale_exp10 == -3 && f->bucket_upper[2] == 1000);
	CHECK(f->series[0].value.histogram.sum == 2500);
	CHECK(f->series[0].value.histogram.counts[0] == 1 && f->series[0].value.histogram.counts[1] == 3 &&
	      f->series[0].value.histogram.counts[2] == 0 && f->series[0].value.histogram.counts[3] == 1);
	f = fam(s, "size_bytes");
	CHECK(f && f->nbuckets == 9 && f->flags == 0);
	/* p = 1: buckets 0..3 hold 0..3, then [4,5] [6,7] [8,11] [12,15], +Inf. */
	CHECK(f->bucket_upper[0] == 0 && f->bucket_upper[3] == 3 && f->bucket_upper[4] == 5 &&
	      f->bucket_upper[6] == 11 && f->bucket_upper[7] == 15);
	CHECK(f->series[0].value.histogram.counts[3] == 1 && f->series[0].value.histogram.sum == 5);
	/* 2.2's export rule, one `le` per power of two: bounds u with u + 1 a
	 * power of two, 0 1 3 7 15, empty buckets included. */
	CHECK(f->export_buckets && f->nexport == 5 && f->export_buckets[0] == 0 &&
	      f->export_buckets[1] == 1 && f->export_buckets[2] == 3 && f->export_buckets[3] == 5 &&
	      f->export_buckets[4] == 7);

	CHECK(pcpu_snapshot_write(&s->snapshot, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	CHECK(strstr(text, "requests_total{method=\"GET\"} 22\n"));
	CHECK(strstr(text, "# HELP requests_total Requests \"served\".\\n\n"));
	CHECK(strstr(text, "latency_seconds_bucket{le=\"0.1\"} 4\n"));
	CHECK(strstr(text, "latency_seconds_sum 2.5\n"));
	/* Empty buckets exposed; buckets between exposed bounds folded. */
	CHECK(strstr(text, "size_bytes_bucket{le=\"0.0\"} 0\nsize_bytes_bucket{le=\"1.0\"} 0\n"
			   "size_bytes_bucket{le=\"3.0\"} 1\nsize_bytes_bucket{le=\"7.0\"} 1\n"
			   "size_bytes_bucket{le=\"15.0\"} 1\nsize_bytes_bucket{le=\"+Inf\"} 1\n"));
	free(text);
	pcpu_reader_snapshot_free(s);
	free(b.buf);
	printf("  standard segment reads back exactly\n");
}

static void check_truncations(void)
{
	struct sb b;
	size_t len, ok = 0;

	sb_standard(&b);
	for (len = 0; len < b.len; len++) {
		unsigned char *copy = malloc(len ? len : 1);
		int err;

		memcpy(copy, b.buf, len);
		err = try_read(copy, len, NULL);
		if (err == 0)
			ok++;
		else
			CHECK(err == EBADMSG || err == EAGAIN);
		free(copy);
	}
	CHECK(ok == 0);
	free(b.buf);
	printf("  all %zu truncations rejected\n", b.len);
}

static void check_mutations(void)
{
	static const unsigned char vals[] = { 0x00, 0xff, 0x80, 0x7f, 0x01, 0x41 };
	struct sb b;
	size_t off, v, errors = 0, oks = 0;

	sb_standard(&b);
	/* Every byte of header, directory and strings; the data region is
	 * plain numbers (any value is a valid value). */
	for (off = 0; off < b.h->data_offset; off++) {
		for (v = 0; v < sizeof vals; v++) {
			unsigned char *copy = malloc(b.len);

			memcpy(copy, b.buf, b.len);
			copy[off] = vals[v];
			if (try_read(copy, b.len, NULL))
				errors++;
			else
				oks++;
			free(copy);
		}
	}
	CHECK(errors > 0 && oks > 0);
	free(b.buf);
	printf("  %zu single-byte mutations: %zu read, %zu rejected, none crashed\n", errors + oks, oks,
	       errors);
}

/* Builds a segment with `build`, applies `mutate` and expects error `want`. */
static void expect_built(void (*build)(struct sb *), const char *what, void (*mutate)(struct sb *),
			 int want)
{
	struct sb b;
	int err;

	build(&b);
	mutate(&b);
	err = try_read(b.buf, b.len, NULL);
	if (err != want) {
		fprintf(stderr, "%s: got errno %d (%s), want %d; message: %s\n", what, err, strerror(err),
			want, pcpu_reader_error());
		exit(1);
	}
	printf("  %-40s -> %s\n", what, want ? pcpu_reader_error() : "ok");
	free(b.buf);
}

/* The standard segment, mutated. */
static void expect(const char *what, void (*mutate)(struct sb *), int want)
{
	expect_built(sb_standard, what, mutate, want);
}

/* The same, and the reader's message says `says`: which entry, and why
 * (a series keeps its own copy of the why, the label checker's included). */
static void expect_says(const char *what, void (*mutate)(struct sb *), int want, const char *says)
{
	expect(what, mutate, want);
	if (!strstr(pcpu_reader_error(), says)) {
		fprintf(stderr, "%s: the message does not say \"%s\": %s\n", what, says, pcpu_reader_error());
		exit(1);
	}
}

/* ---- 2.8: values beyond the integer words, label sets of one name ---- */

static void check_v28(void)
{
	struct sb b;
	struct pcpu_reader_snapshot *s;
	const struct pcpu_snapshot_family *f;
	size_t i, jobs = 0;
	char *text;
	size_t len;

	sb_v28(&b);
	CHECK(try_read(b.buf, b.len, &s) == 0);
	f = fam(s, "mem_bytes");
	CHECK(f && (f->flags & PCPU_SNAPSHOT_NANOS) && f->series[0].value.fixed.residue == 0.25);
	CHECK(pcpu_snapshot_value(f, &f->series[0]) == 16.75);
	f = fam(s, "xfer_seconds");
	CHECK(f && (f->flags & PCPU_SNAPSHOT_NANOS) && f->series[0].value.histogram.residue == 3e10);
	CHECK(pcpu_snapshot_sum(f, &f->series[0]) == 30000000050.0);
	CHECK(f->series[0].value.histogram.counts[0] == 1 && f->series[0].value.histogram.counts[1] == 2);
	for (i = 0; i < s->snapshot.nfamilies; i++)
		if (strcmp(s->snapshot.families[i].name, "jobs") == 0)
			CHECK(s->snapshot.families[i].nlabels == jobs++); /* by label names: 0, 1, 2 */
	CHECK(jobs == 3);
	CHECK(pcpu_snapshot_write(&s->snapshot, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	CHECK(strstr(text, "mem_bytes 16.75\n"));
	CHECK(strstr(text, "xfer_seconds_sum 30000000050\n") || strstr(text, "xfer_seconds_sum 3.000000005e+10\n"));
	CHECK(strstr(text, "# HELP jobs_total Jobs.\n# TYPE jobs_total counter\njobs_total 3\n"
			   "jobs_total{queue=\"q1\"} 4\njobs_total{queue=\"q1\",prio=\"hi\"} 5\n"));
	free(text);
	pcpu_reader_snapshot_free(s);
	free(b.buf);
	printf("  2.8 segment reads back exactly\n");
}

static void expect28(const char *what, void (*mutate)(struct sb *), int want)
{
	expect_built(sb_v28, what, mutate, want);
}

static void m28_none(struct sb *b) { (void)b; }
static void m28_nanos_size_32(struct sb *b) { sb_entry(b, 10)->u32b = 32; }
static void m28_nanos_size_16(struct sb *b) { sb_entry(b, 10)->u32b = 16; } /* a 2.7 writer's */
static void m28_residue_nan(struct sb *b)
{
	double d = __builtin_nan("");
	int64_t bits;

	memcpy(&bits, &d, 8);
	sb_mirror64(b, 0, 0, 184, bits);
}
static void m28_wide_no_pairs(struct sb *b) { sb_entry(b, 11)->u32a &= ~PCPU__SEG_HIST_PAIRS; }
static void m28_wide_size(struct sb *b) { sb_entry(b, 12)->u32b = 32; } /* pairs only, no double sum */
static void m28_unknown_scheme_bit(struct sb *b) { sb_entry(b, 11)->u32a |= 0x800; }
static void m28_labelset_help(struct sb *b)
{
	static const char *const x[] = { "x" };
	sb_family(b, 10, 1, "jobs", "Other.", NULL, 1, x, 0, 0, 0, NULL);
}
static void m28_labelset_type(struct sb *b)
{
	static const char *const x[] = { "x" };
	sb_family(b, 10, 2, "jobs", "Jobs.", NULL, 1, x, 0, 0, 0, NULL);
}
static void m28_labelset_permuted(struct sb *b)
{
	static const char *const pq[] = { "prio", "queue" };
	sb_family(b, 10, 1, "jobs", "Jobs.", NULL, 2, pq, 0, 0, 0, NULL);
}
static void m28_labelset_new(struct sb *b)
{
	static const char *const x[] = { "x" };
	sb_family(b, 10, 1, "jobs", "Jobs.", NULL, 1, x, 0, 0, 0, NULL);
}
static void m28_labelset_same_series(struct sb *b)
{
	/* {queue=""} of the {queue} set is {} of the {} set to Prometheus: the
	 * reader keeps both (each is valid in its family), the writers refuse
	 * to write them (pcpu_snapshot_write(): EINVAL). */
	static const char *const e[] = { "" };
	sb_series(b, 8, 1, 1, e, 0, 264, 8);
}

/* ---- 2.10: sparse histograms ---- */

static uint64_t ta, tf; /* sb_v210()'s tables */

static void build210(struct sb *b)
{
	sb_v210(b, &ta, &tf);
}

static void check_v210(void)
{
	struct sb b;
	struct pcpu_reader_snapshot *s;
	const struct pcpu_snapshot_family *f;
	const struct pcpu_snapshot_series *a = NULL, *t = NULL;
	size_t i;

	build210(&b);
	CHECK(try_read(b.buf, b.len, &s) == 0);
	f = fam(s, "lat_seconds");
	CHECK(f && f->nseries == 2);
	for (i = 0; i < f->nseries; i++)
		if (strcmp(f->series[i].label_values[0], "a") == 0)
			a = &f->series[i];
		else
			t = &f->series[i];
	CHECK(a && t);
	for (i = 0; i < 21; i++)
		CHECK(a->value.histogram.counts[i] == (i == 1 ? 2 : i == 5 ? 1 : i == 17 ? 4 : 0));
	CHECK(a->value.histogram.sum == 83);
	for (i = 0; i < 21; i++) /* a word half stored reads as not made */
		CHECK(t->value.histogram.counts[i] == 0);
	f = fam(s, "fr_seconds");
	CHECK(f && f->nseries == 1 && f->series[0].value.histogram.counts[0] == 1);
	CHECK(pcpu_snapshot_sum(f, &f->series[0]) == 5e-9 + 0.5);
	pcpu_reader_snapshot_free(s);
	free(b.buf);
	printf("  2.10 segment reads back exactly\n");
}

static void expect210(const char *what, void (*mutate)(struct sb *), int want)
{
	expect_built(build210, what, mutate, want);
}

static uint64_t *word(struct sb *b, uint64_t table, unsigned k)
{
	return (uint64_t *)(void *)(b->buf + b->h->strings_offset + table + 8 * k);
}

static void m210_none(struct sb *b) { (void)b; }
static void m210_no_pairs(struct sb *b) { sb_entry(b, 0)->u32a &= ~PCPU__SEG_HIST_PAIRS; }
static void m210_even_half(struct sb *b) { *word(b, ta, 1) = ((uint64_t)2 << 32) | 1024 | 1; }
static void m210_misaligned(struct sb *b) { *word(b, ta, 1) = ((uint64_t)1 << 32) | 1032 | 1; }
static void m210_past_stride(struct sb *b) { *word(b, ta, 1) = ((uint64_t)1 << 32) | 1984 | 1; }
static void m210_later_chunk(struct sb *b) { *word(b, ta, 1) = ((uint64_t)3 << 32) | 1024 | 1; }
static void m210_overlap(struct sb *b) { *word(b, ta, 1) = ((uint64_t)1 << 32) | 576 | 1; }
static void m210_table_size(struct sb *b) { sb_entry(b, 1)->u32b = 16; }
static void m210_table_outside(struct sb *b) { sb_entry(b, 1)->value_off = b->h->strings_used; }
static void m210_table_chunk(struct sb *b) { sb_entry(b, 1)->u32a = 1; }
static void m210_pair_past_stride(struct sb *b) { *word(b, tf, 1) = ((uint64_t)1 << 32) | 2040 | 1; }

static void check_v210_hostile(void)
{
	expect210("2.10 as built", m210_none, 0);
	expect210("sparse bit without pairs", m210_no_pairs, EBADMSG);
	expect210("table word, a half even", m210_even_half, EBADMSG);
	expect210("table word, group misaligned", m210_misaligned, EBADMSG);
	expect210("table word, group past the slot", m210_past_stride, EBADMSG);
	expect210("table word, a chunk not counted yet", m210_later_chunk, 0);
	expect210("table word, groups overlap", m210_overlap, EBADMSG);
	expect210("table of the wrong size", m210_table_size, EBADMSG);
	expect210("table outside the strings", m210_table_outside, EBADMSG);
	expect210("sparse series with a chunk", m210_table_chunk, EBADMSG);
	expect210("double sum's pair past the slot", m210_pair_past_stride, EBADMSG);
}

static void check_v28_hostile(void)
{
	expect28("2.8 as built", m28_none, 0);
	expect28("fraction value of 32 bytes", m28_nanos_size_32, EBADMSG);
	expect28("fraction value of 16 bytes (2.7 writer)", m28_nanos_size_16, 0);
	expect28("residue NaN", m28_residue_nan, 0);
	expect28("double-sum bit without pairs", m28_wide_no_pairs, EBADMSG);
	expect28("histogram with fractions, pairs' size", m28_wide_size, EBADMSG);
	expect28("scheme bit 0x800", m28_unknown_scheme_bit, EBADMSG);
	expect28("label set with other help", m28_labelset_help, EBADMSG);
	expect28("label set of another type", m28_labelset_type, EBADMSG);
	expect28("label set permuted", m28_labelset_permuted, EBADMSG);
	expect28("a fourth label set", m28_labelset_new, 0);
	expect28("a series two label sets share", m28_labelset_same_series, 0);
	{
		struct sb b;
		struct pcpu_reader_snapshot *s;
		char *text;
		size_t len;

		sb_v28(&b);
		m28_labelset_same_series(&b);
		CHECK(try_read(b.buf, b.len, &s) == 0);
		CHECK(pcpu_snapshot_write(&s->snapshot, PCPU_FORMAT_PROMETHEUS, &text, &len) == -1 &&
		      errno == EINVAL);
		pcpu_reader_snapshot_free(s);
		free(b.buf);
	}
}

static void m_blob_overflow(struct sb *b) { sb_entry(b, 1)->blob_off = UINT64_MAX - 2; }
static void m_blob_past_end(struct sb *b) { sb_entry(b, 0)->blob_off = b->strings_used; }
static void m_used_past_cap(struct sb *b) { b->h->entries_used = b->h->entries_capacity + 1; }
static void m_strings_past_cap(struct sb *b) { b->h->strings_used = UINT64_MAX; }
static void m_huge_nlabels(struct sb *b) { sb_entry(b, 1)->nlabels = 65535; }
static void m_huge_nbuckets(struct sb *b) { sb_entry(b, 5)->nbuckets = 0xffffffffu; }
static void m_huge_capacity(struct sb *b) { b->h->entries_capacity = UINT64_MAX / 8; }
static void m_not_terminated(struct sb *b) { sb_entry(b, 0)->blob_len = 3; }
static void m_value_not_terminated(struct sb *b) { sb_entry(b, 1)->blob_len = 3; }
static void m_share(struct sb *b) { sb_entry(b, 2)->value_off = 16; }
static void m_chunk(struct sb *b) { sb_entry(b, 2)->u32a = 5; }
static void m_value_past_slot(struct sb *b) { sb_entry(b, 2)->value_off = 512 - 16 + 16; }
static void m_orphan(struct sb *b) { sb_entry(b, 2)->family_id = 99; }
static void m_dup_family(struct sb *b)
{
	sb_family(b, 7, 1, "requests", NULL, NULL, 0, NULL, 0, 0, 0, NULL);
}
static void m_dup_id(struct sb *b) { sb_entry(b, 3)->family_id = 1; }
static void m_dup_series(struct sb *b)
{
	static const char *const get[] = { "GET" };
	sb_series(b, 1, 1, 1, get, 0, 400, 8);
}
static void m_bad_utf8(struct sb *b)
{
	b->buf[b->h->strings_offset + sb_entry(b, 1)->blob_off] = 0xff;
}
static void m_bad_name(struct sb *b) { b->buf[b->h->strings_offset + sb_entry(b, 0)->blob_off] = '2'; }
static void m_bad_magic(struct sb *b) { b->h->magic[0] = 'X'; }
static void m_zero_magic(struct sb *b) { memset(b->h->magic, 0, 8); }
static void m_version(struct sb *b) { b->h->version_major = 3; }
static void m_version0(struct sb *b) { b->h->version_major = 0; }
static void m_minor(struct sb *b) { b->h->version_minor = 9; }
static void m_byte_order(struct sb *b) { b->h->byte_order = 0x04030201u; }
static void m_nslots0(struct sb *b) { b->h->nslots = 0; }
/* 2.6: every slot owned, none a CPU slot. */
static void m_owned_all(struct sb *b) { b->h->owned_slots = b->h->nslots; }
static void m_stride(struct sb *b) { b->h->slot_stride = 1000; }
static void m_span(struct sb *b) { b->h->chunk_span += 512; }
/* Version 2 in the header but 1.x's chunk span: no room for the mirrors. */
static void m_span_v1(struct sb *b) { b->h->chunk_span = (uint64_t)b->h->nslots * b->h->slot_stride; }
static void m_value_align(struct sb *b) { sb_entry(b, 2)->value_off = 500; }
static void m_old_value_size(struct sb *b) { sb_entry(b, 1)->u32b = 16; }
static void m_nchunks(struct sb *b) { b->h->nchunks = 1000000; }
static void m_name(struct sb *b) { memset(b->h->name, 'a', sizeof b->h->name); }
static void m_bounds(struct sb *b)
{
	int64_t x = 5;
	struct pcpu__seg_entry *e = sb_entry(b, 5);
	memcpy(b->buf + b->h->strings_offset + e->blob_off + e->blob_len - 8, &x, 8);
}
static void m_loglinear(struct sb *b) { sb_entry(b, 7)->nbuckets = 10; }
static void m_export_lg(struct sb *b) { sb_entry(b, 7)->value_off = 8; }
static void m_export_finer(struct sb *b) { sb_entry(b, 7)->value_off = 3; /* p = 1 */ }
static const int64_t native_bounds[] = { 0, 1, 2, 4 };
static void m_native_ok(struct sb *b)
{
	sb_family(b, 9, 3, "nat", NULL, NULL, 0, NULL, 3, PCPU__SEG_SCHEMA_BIAS + 0, 5, native_bounds);
}
static void m_native_export(struct sb *b) /* 2.4: one `le` per power of two */
{
	struct pcpu__seg_entry *e = sb_entry(b, sb_family(b, 9, 3, "nat", NULL, NULL, 0, NULL, 3,
							  PCPU__SEG_SCHEMA_BIAS + 0, 5, native_bounds));
	e->flags |= 1u << PCPU__SEG_E_EXPORT_SHIFT;
	e->serial = 1;
}
static void m_native_export_min(struct sb *b)
{
	struct pcpu__seg_entry *e = sb_entry(b, sb_family(b, 9, 3, "nat", NULL, NULL, 0, NULL, 3,
							  PCPU__SEG_SCHEMA_BIAS + 0, 5, native_bounds));
	e->flags |= 1u << PCPU__SEG_E_EXPORT_SHIFT;
	e->serial = (uint64_t)1 << 63;
}
static void m_info_counter(struct sb *b) { sb_entry(b, 0)->flags |= PCPU__SEG_E_INFO; }
static void m_info_gauge_name(struct sb *b) { sb_entry(b, 3)->flags |= PCPU__SEG_E_INFO; }
/* 2.7: fractions on a histogram; on a counter whose values are one word. */
static void m_nanos_histogram(struct sb *b) { sb_entry(b, 5)->flags |= PCPU__SEG_E_NANOS; }
static void m_nanos_one_word(struct sb *b) { sb_entry(b, 0)->flags |= PCPU__SEG_E_NANOS; }
static void m_native_schema(struct sb *b)
{
	sb_family(b, 9, 3, "nat", NULL, NULL, 0, NULL, 3, PCPU__SEG_SCHEMA_BIAS + 9, 5, native_bounds);
}
static void m_native_index(struct sb *b)
{
	uint64_t i = sb_family(b, 9, 3, "nat", NULL, NULL, 0, NULL, 3, PCPU__SEG_SCHEMA_BIAS, 5,
			       native_bounds);
	sb_entry(b, i)->value_off = (uint64_t)INT32_MAX;
}
static void m_native_negative(struct sb *b)
{
	static const int64_t neg[] = { -1, 1, 2, 4 };
	sb_family(b, 9, 3, "nat", NULL, NULL, 0, NULL, 3, PCPU__SEG_SCHEMA_BIAS, 5, neg);
}
static void m_type_mismatch(struct sb *b) { sb_entry(b, 3)->type = 1; }
static void m_le(struct sb *b)
{
	static const char *const le[] = { "le" };
	static const int64_t bounds[] = { 1 };
	sb_family(b, 8, 3, "h2", NULL, NULL, 1, le, 1, 0, 2, bounds);
}

static void check_hostile(void)
{
	expect("blob offset overflowing", m_blob_overflow, EBADMSG);
	expect("blob past the string table", m_blob_past_end, EBADMSG);
	expect("entries_used past capacity", m_used_past_cap, EBADMSG);
	expect("strings_used past capacity", m_strings_past_cap, EBADMSG);
	expect("huge entries_capacity", m_huge_capacity, EBADMSG);
	expect("65535 labels", m_huge_nlabels, EBADMSG);
	expect("2^32-1 buckets", m_huge_nbuckets, EBADMSG);
	expect("family name not terminated", m_not_terminated, EBADMSG);
	expect_says("label value not terminated", m_value_not_terminated, EBADMSG,
		    "entry 1 (series): label value not terminated");
	expect("two series sharing storage", m_share, EBADMSG);
	expect("chunk past the end", m_chunk, EBADMSG);
	expect("value past its slot", m_value_past_slot, EBADMSG);
	expect("series without family (stable)", m_orphan, EBADMSG);
	expect("two families of one name", m_dup_family, EBADMSG);
	expect("two series of one label set", m_dup_series, EBADMSG);
	expect("two families of one id", m_dup_id, EBADMSG);
	expect_says("label value not UTF-8", m_bad_utf8, EBADMSG,
		    "entry 1 (series): label value \"\\xffET\" is not valid UTF-8 (byte \\xff at offset 0)");
	expect("metric name not valid", m_bad_name, EBADMSG);
	expect("bounds not increasing", m_bounds, EBADMSG);
	expect("log-linear bucket count", m_loglinear, EBADMSG);
	expect("exported bounds per octave > 64", m_export_lg, EBADMSG);
	expect("exported bounds finer than buckets", m_export_finer, EBADMSG);
	expect("native histogram family (2.2)", m_native_ok, 0);
	expect("native export rule (2.4)", m_native_export, 0);
	expect("native export_min past INT64_MAX", m_native_export_min, EBADMSG);
	expect("info flag on a counter", m_info_counter, EBADMSG);
	expect("info flag on a gauge not named _info", m_info_gauge_name, EBADMSG);
	expect("fraction flag on a histogram (2.7)", m_nanos_histogram, EBADMSG);
	expect("fraction flag on one-word values (2.7)", m_nanos_one_word, EBADMSG);
	expect("native schema 9", m_native_schema, EBADMSG);
	expect("native index out of range", m_native_index, EBADMSG);
	expect("native zero bucket below 0", m_native_negative, EBADMSG);
	expect_says("series type differs from family", m_type_mismatch, EBADMSG,
		    "entry 4 (series): type or labels differ from the family's");
	expect("label \"le\" in a histogram", m_le, EBADMSG);
	expect("bad magic", m_bad_magic, EBADMSG);
	expect("no magic yet", m_zero_magic, EAGAIN);
	expect("format version 3", m_version, EPROTONOSUPPORT);
	expect("format version 0", m_version0, EPROTONOSUPPORT);
	expect("newer minor version", m_minor, 0);
	expect("other byte order", m_byte_order, EPROTONOSUPPORT);
	expect("zero slots", m_nslots0, EBADMSG);
	expect("every slot owned", m_owned_all, EBADMSG);
	expect("stride not a power of two", m_stride, EBADMSG);
	expect("chunk span mismatch", m_span, EBADMSG);
	expect("chunk span of 1.x (nslots * stride)", m_span_v1, EBADMSG);
	expect("value not 8-byte aligned", m_value_align, EBADMSG);
	expect("1.x counter size (16)", m_old_value_size, EBADMSG);
	expect("chunks past the end of file", m_nchunks, EBADMSG);
	expect("name not terminated", m_name, EBADMSG);
}

/*
 * A segment written by pcpu 1.x: the same header and directory layout, but
 * 16-byte counters (rseq_sum, atomic_sum), no mirror regions (chunk_span =
 * nslots * stride). It must be refused as such -- EPROTONOSUPPORT and a
 * message naming both versions -- not as a corrupted file, and never read
 * with the version 2 layout.
 */
static void check_version1(void)
{
	static const char *const get[] = { "GET" };
	static const char *const method[] = { "method" };
	struct sb b;
	int err;

	sb_init(&b, 2, 512, 1, 16, 1024);
	b.h->version_major = 1;
	b.h->version_minor = 0;
	b.h->chunk_span = 2 * 512; /* 1.x: nslots * stride */
	sb_family(&b, 1, 1, "requests", NULL, NULL, 1, method, 0, 0, 0, NULL);
	sb_series(&b, 1, 1, 1, get, 0, 16, 16);
	sb_put_region64(&b, 0, 0, 16, 10);
	sb_put_region64(&b, 0, 0, 24, 5);
	err = try_read(b.buf, b.len, NULL);
	if (err != EPROTONOSUPPORT ||
	    !strstr(pcpu_reader_error(),
		    "segment format 1.0 is not supported by this reader (it reads 2.x)")) {
		fprintf(stderr, "version 1.0 file: got errno %d (%s); message: %s\n", err,
			strerror(err), pcpu_reader_error());
		exit(1);
	}
	printf("  %-40s -> %s\n", "a version 1.0 segment", pcpu_reader_error());

	/* A later 1.x minor: still 1.x. */
	b.h->version_minor = 3;
	CHECK(try_read(b.buf, b.len, NULL) == EPROTONOSUPPORT);
	CHECK(strstr(pcpu_reader_error(), "format 1.3 is not supported"));
	/* Through the real open path too (a file, not the memory source). */
	{
		char path[] = "/tmp/pcpu-seg-v1.XXXXXX";
		int fd = mkstemp(path);
		struct pcpu_reader_options o;

		CHECK(fd >= 0);
		CHECK(write(fd, b.buf, b.len) == (ssize_t)b.len);
		memset(&o, 0, sizeof o);
		o.flags = PCPU_READER_ANY_OWNER;
		errno = 0;
		CHECK(pcpu_reader_open(path, &o) == NULL);
		/* The header's writer uid may differ from ours: the version
		 * is checked first, whatever else is wrong. */
		CHECK(errno == EPROTONOSUPPORT);
		CHECK(strstr(pcpu_reader_error(), "is not supported by this reader (it reads 2.x)"));
		close(fd);
		unlink(path);
	}
	free(b.buf);
}

/*
 * 2.4 histograms: the scheme carries PCPU__SEG_HIST_PAIRS and the value is a
 * (count, sum) pair per bucket. Two slots, word and mirror regions; the
 * histogram's sum is the sum of the pairs' sums, its per-slot value the
 * slot's counts. Then bits the reader does not know in the scheme.
 */
static void check_pairs(void)
{
	static const int64_t bounds[] = { 10, 100 };
	struct sb b;
	struct pcpu_reader_snapshot *s;
	const struct pcpu_snapshot_family *f;
	const int64_t *sl;
	uint64_t fam_idx;

	sb_init(&b, 2, 256, 1, 16, 1024);
	fam_idx = sb_family(&b, 1, 3, "h", NULL, NULL, 0, NULL, 1, 0, 3, bounds);
	sb_entry(&b, fam_idx)->u32a |= PCPU__SEG_HIST_PAIRS;
	sb_series(&b, 1, 3, 0, NULL, 0, 64, 16 * 3);
	sb_put64(&b, 0, 0, 64, 2);            /* bucket 0: 2 values ... */
	sb_put64(&b, 0, 0, 72, 7);            /* ... summing to 7 */
	sb_put64(&b, 0, 1, 80, 1);            /* bucket 1, slot 1: one value of 50 */
	sb_put64(&b, 0, 1, 88, 50);
	sb_mirror64(&b, 0, 0, 96, 1);         /* +Inf, slot 0's mirror: 1000 */
	sb_mirror64(&b, 0, 0, 104, 1000);
	CHECK(try_read(b.buf, b.len, &s) == 0);
	f = fam(s, "h");
	CHECK(f && f->nseries == 1 && f->nbuckets == 3);
	CHECK(f->series[0].value.histogram.counts[0] == 2 && f->series[0].value.histogram.counts[1] == 1 &&
	      f->series[0].value.histogram.counts[2] == 1);
	CHECK(f->series[0].value.histogram.sum == 7 + 50 + 1000);
	sl = pcpu_reader_snapshot_slots(s, 0, 0);
	CHECK(sl && sl[0] == 3 && sl[1] == 1);
	pcpu_reader_snapshot_free(s);

	/* The 2.3 size for a 2.4 histogram: refused, not read short. */
	sb_entry(&b, fam_idx + 1)->u32b = 8 * 4;
	CHECK(try_read(b.buf, b.len, NULL) == EBADMSG);
	sb_entry(&b, fam_idx + 1)->u32b = 16 * 3;
	/* A scheme bit this reader does not know. */
	sb_entry(&b, fam_idx)->u32a |= 0x200;
	CHECK(try_read(b.buf, b.len, NULL) == EBADMSG);
	free(b.buf);
}

/*
 * Mirror words count: a value lying only in mirror regions, in several
 * chunks and slots, with holes around, reads back whole -- for every type,
 * and per slot as word + mirror.
 */
static void check_mirrors(void)
{
	struct sb b;
	struct pcpu_reader_snapshot *s;
	const struct pcpu_snapshot_family *f;
	const int64_t *sl;
	static const int64_t bounds[] = { 10 };
	unsigned slot;

	sb_init(&b, 4, 256, 2, 16, 1024);
	sb_family(&b, 1, 1, "m", NULL, NULL, 0, NULL, 0, 0, 0, NULL);
	sb_series(&b, 1, 1, 0, NULL, 1, 128, 8);
	sb_family(&b, 2, 2, "g", NULL, NULL, 0, NULL, 0, 0, 0, NULL);
	sb_series(&b, 2, 2, 0, NULL, 0, 248, 8); /* the last word of the region */
	sb_family(&b, 3, 3, "h", NULL, NULL, 0, NULL, 1, 0, 2, bounds);
	sb_series(&b, 3, 3, 0, NULL, 1, 200, 24);
	for (slot = 0; slot < 4; slot++) {
		sb_mirror64(&b, 1, slot, 128, 100 + slot);           /* counter: mirror only */
		sb_put64(&b, 0, slot, 248, 1);                       /* gauge: words ... */
		sb_mirror64(&b, 0, slot, 248, -10);                  /* ... and mirrors */
		sb_mirror64(&b, 1, slot, 200 + 16, slot);            /* h: +Inf, mirror */
	}
	sb_put64(&b, 1, 3, 200, 7);                                  /* h: sum, word */
	sb_mirror64(&b, 1, 3, 200, 8);                               /* h: sum, mirror */
	sb_put64(&b, 1, 2, 208, 5);                                  /* h: bucket 0, word */
	CHECK(try_read(b.buf, b.len, &s) == 0);
	f = fam(s, "m");
	CHECK(f && f->nseries == 1);
	CHECK_EQ_U64(f->series[0].value.counter, 100 + 101 + 102 + 103);
	sl = pcpu_reader_snapshot_slots(s, 2, 0);
	CHECK(sl && sl[0] == 100 && sl[1] == 101 && sl[2] == 102 && sl[3] == 103);
	f = fam(s, "g");
	CHECK(f && f->series[0].value.gauge == 4 * (1 - 10));
	sl = pcpu_reader_snapshot_slots(s, 0, 0);
	CHECK(sl && sl[0] == -9 && sl[3] == -9);
	f = fam(s, "h");
	CHECK(f && f->series[0].value.histogram.sum == 15);
	CHECK(f->series[0].value.histogram.counts[0] == 5 &&
	      f->series[0].value.histogram.counts[1] == 0 + 1 + 2 + 3);
	sl = pcpu_reader_snapshot_slots(s, 1, 0);
	CHECK(sl && sl[0] == 0 && sl[1] == 1 && sl[2] == 2 + 5 && sl[3] == 3);
	pcpu_reader_snapshot_free(s);

	/* Modulo 2^64, as the core's fetch: word + mirror wraps. */
	sb_put64(&b, 1, 0, 128, INT64_MAX);
	sb_mirror64(&b, 1, 0, 128, INT64_MAX);
	CHECK(try_read(b.buf, b.len, &s) == 0);
	f = fam(s, "m");
	CHECK_EQ_U64(f->series[0].value.counter,
		     (uint64_t)INT64_MAX * 2 + 101 + 102 + 103);
	pcpu_reader_snapshot_free(s);
	free(b.buf);
	printf("  mirror words counted (every type, per slot, modulo 2^64)\n");
}

/* pcpu_reader_reason(): each errno the reader documents has its word, and
 * anything else is "error" (a bounded label vocabulary, never NULL). */
static void check_reasons(void)
{
	static const struct { int e; const char *w; } map[] = {
		{ ENOENT, "missing" }, { ENOTUNIQ, "ambiguous" }, { EACCES, "permission" },
		{ EPERM, "permission" }, { ELOOP, "permission" }, { EPROTONOSUPPORT, "incompatible" },
		{ EBADMSG, "corrupt" }, { ESRCH, "writer_gone" }, { EAGAIN, "not_ready" },
		{ EFBIG, "too_large" }, { ENOMEM, "error" }, { 0, "error" }, { -1, "error" },
		{ 100000, "error" },
	};
	size_t i;

	for (i = 0; i < sizeof map / sizeof map[0]; i++)
		CHECK(strcmp(pcpu_reader_reason(map[i].e), map[i].w) == 0);
	printf("  reader errno -> reason words\n");
}

static void check_budget(void)
{
	struct sb b;
	pcpu_reader_t *r;
	struct pcpu_reader_snapshot *s;

	sb_standard(&b);
	r = pcpu__reader_open_mem(b.buf, b.len, 512);
	CHECK(r);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == -1 && errno == EFBIG && s == NULL);
	pcpu_reader_close(r);
	/* Every budget from too small to enough: each read either succeeds or
	 * fails with EFBIG, wherever the budget runs out (the attempt once
	 * crashed when it ran out after counting the entries and before
	 * allocating their arrays). */
	{
		size_t max, ok = 0, refused = 0;

		for (max = 1; max <= ((size_t)1 << 22); max += max < 65536 ? 8 : max / 8) {
			r = pcpu__reader_open_mem(b.buf, b.len, max);
			CHECK(r);
			if (pcpu_reader_snapshot(r, 0, &s) == 0) {
				ok++;
				pcpu_reader_snapshot_free(s);
			} else {
				CHECK(errno == EFBIG && s == NULL);
				refused++;
			}
			pcpu_reader_close(r);
		}
		CHECK(ok > 0 && refused > 0);
	}
	free(b.buf);
	printf("  max_bytes exceeded -> EFBIG, at every budget\n");
}

/* The directory changes during every read: the generation moves and the
 * POST series' entry is rewritten between the two looks. */
struct churn {
	struct sb *b;
};

static void churn_hook(void *ctx, unsigned n, uint64_t off, size_t len)
{
	struct churn *c = ctx;

	c->b->h->generation += 2;
	sb_entry(c->b, 2)->seq += 2;
	(void)n;
	(void)off;
	(void)len;
}

static void check_changed_mid_read(void)
{
	struct sb b;
	struct churn c = { &b };
	pcpu_reader_t *r;
	struct pcpu_reader_snapshot *s;
	const struct pcpu_snapshot_family *f;

	sb_standard(&b);
	r = pcpu__reader_open_mem(b.buf, b.len, 0);
	CHECK(r);
	pcpu__reader_set_read_hook(r, churn_hook, &c);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0);
	CHECK(!s->stable && s->changed >= 1);
	f = fam(s, "requests");
	CHECK(f && f->nseries == 1 && strcmp(f->series[0].label_values[0], "GET") == 0);
	CHECK_EQ_U64(f->series[0].value.counter, 22);
	CHECK(fam(s, "latency_seconds") && fam(s, "size_bytes") && fam(s, "temperature_celsius"));
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);

	/* A writer that died in mid-update: odd generation, odd entry. */
	b.h->generation = 5;
	sb_entry(&b, 1)->seq = 7;
	CHECK(try_read(b.buf, b.len, &s) == 0);
	f = fam(s, "requests");
	CHECK(f && f->nseries == 1 && strcmp(f->series[0].label_values[0], "POST") == 0);
	CHECK(s->changed >= 1 && !s->stable);
	pcpu_reader_snapshot_free(s);
	free(b.buf);
	printf("  directory changed mid-read: changing entries left out, the rest exact\n");
}

static void expect_groups(const char *what, void (*mutate)(struct sb *), int want)
{
	expect_built(sb_groups, what, mutate, want);
}

static void g_member(struct sb *b) { sb_entry(b, 13)->u32a = 2; }
static void g_member_huge(struct sb *b) { sb_entry(b, 13)->u32a = 0xffffffffu; }
static void g_not_group(struct sb *b) { sb_entry(b, 13)->value_off = 1; }
static void g_past_used(struct sb *b) { sb_entry(b, 13)->value_off = 1000; }
static void g_blob_len(struct sb *b) { sb_entry(b, 11)->blob_len = 8; }
static void g_nmembers(struct sb *b) { sb_entry(b, 11)->u32a = 17; sb_entry(b, 11)->blob_len = 136; }
static void g_size(struct sb *b) { sb_entry(b, 12)->u32b = 16; }
static void g_histogram(struct sb *b) { sb_entry(b, 12)->type = 3; }
static void g_group_freed(struct sb *b) { sb_entry(b, 11)->kind = PCPU__SEG_FREE; }
static void g_odd_group(struct sb *b) { sb_entry(b, 11)->seq = 3; }

/* The writer rewrites G's values in place while the reader copies the
 * string table: every attempt copies them torn (packets new, bytes old),
 * and the rewrite is complete before the second look at the directory. */
struct rewrite {
	struct sb *b;
	int pending;
};

static void rewrite_hook(void *ctx, unsigned n, uint64_t off, size_t len)
{
	struct rewrite *w = ctx;
	struct pcpu__seg_entry *g = sb_entry(w->b, 11);
	unsigned char *vals = w->b->buf + w->b->h->strings_offset + g->blob_off;
	int64_t v;

	(void)n;
	(void)len;
	if (off == w->b->h->entries_offset && w->pending) {
		memcpy(&v, vals + 8, 8);
		v += 1500;
		memcpy(vals + 8, &v, 8);
		g->seq++; /* even again: s + 2 */
		w->b->h->generation++;
		w->pending = 0;
	} else if (off == w->b->h->strings_offset && !w->pending) {
		w->b->h->generation++;
		g->seq++; /* odd: being written */
		memcpy(&v, vals, 8);
		v += 1;
		memcpy(vals, &v, 8);
		w->pending = 1;
	}
}

static void check_groups(void)
{
	struct sb b;
	struct pcpu_reader_snapshot *s;
	const struct pcpu_snapshot_family *p, *by;
	struct rewrite w = { &b, 0 };
	pcpu_reader_t *r;

	sb_groups(&b);
	CHECK(try_read(b.buf, b.len, &s) == 0);
	p = fam(s, "flow_packets");
	by = fam(s, "flow_bytes");
	CHECK(p && by && p->nseries == 1 && by->nseries == 1);
	CHECK_EQ_U64(p->series[0].value.counter, 4);
	CHECK_EQ_U64(by->series[0].value.counter, 6000);
	CHECK(strcmp(p->series[0].label_values[0], "a") == 0);
	CHECK(pcpu_reader_snapshot_slots(s, 0, 0) == NULL || 1); /* no per-slot split */
	pcpu_reader_snapshot_free(s);
	printf("  consistent group members read back exactly\n");

	r = pcpu__reader_open_mem(b.buf, b.len, 0);
	CHECK(r);
	pcpu__reader_set_read_hook(r, rewrite_hook, &w);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0);
	p = fam(s, "flow_packets");
	by = fam(s, "flow_bytes");
	CHECK(p && by);
	if (p->nseries || by->nseries) {
		fprintf(stderr, "group being rewritten was read: packets %llu bytes %llu\n",
			p->nseries ? (unsigned long long)p->series[0].value.counter : 0ull,
			by->nseries ? (unsigned long long)by->series[0].value.counter : 0ull);
		exit(1);
	}
	CHECK(!s->stable && s->changed >= 2);
	CHECK(fam(s, "requests") && fam(s, "requests")->nseries == 2); /* the rest is there */
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	free(b.buf);
	printf("  a group rewritten during every read is left out, never torn\n");

	expect_groups("group member index past nmembers", g_member, EBADMSG);
	expect_groups("group member index huge", g_member_huge, EBADMSG);
	expect_groups("group member of a family entry", g_not_group, EBADMSG);
	expect_groups("group entry past entries_used", g_past_used, EBADMSG);
	expect_groups("group blob shorter than its members", g_blob_len, EBADMSG);
	expect_groups("group of 17 members", g_nmembers, EBADMSG);
	expect_groups("group member size 16", g_size, EBADMSG);
	expect_groups("group member of a histogram", g_histogram, EBADMSG);
	expect_groups("group member of a freed group (stable)", g_group_freed, EBADMSG);
	expect_groups("group entry odd (stable)", g_odd_group, EBADMSG);
}

int main(void)
{
	printf("test_segment_hostile:\n");
	check_standard();
	check_truncations();
	check_hostile();
	check_v28();
	check_v28_hostile();
	check_v210();
	check_v210_hostile();
	check_version1();
	check_mirrors();
	check_pairs();
	check_reasons();
	check_budget();
	check_changed_mid_read();
	check_groups();
	check_mutations();
	printf("test_segment_hostile: ok\n");
	return 0;
}
