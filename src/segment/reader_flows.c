/* SPDX-License-Identifier: MIT */
/*
 * reader_flows.c: the flows tables of a segment (format 2.9, FLOWS entries:
 * format.h), listed and read from outside (pcpu_reader_flows_list(),
 * pcpu_reader_flows_read()).
 *
 * Separate from the snapshot (reader_snapshot.c): a table of 10^6 flows is
 * 16 MB of words, which a snapshot -- every scrape -- must not read. A
 * table is listed (its entry and names, validated as untrusted input), then
 * read by ranges of flows.
 *
 * The protocol, per entry: copy the entry, the blob (or the words), the
 * entry again; keep what was read only if both copies are the same bytes
 * with an even seq. The writer changes a FLOWS entry only when the table is
 * made (before, the entry is free or another's) and freed (seq odd, then
 * kind FREE), and frees it before it gives the words' pages back or reuses
 * them, so an unchanged entry means the words read were that table's.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/expose.h>

#include "../core/core.h" /* PCPU__TORN64 */
#include "reader_internal.h"

#define BATCH 1024 /* entries copied per pread while listing */

/* One FLOWS entry's fields, checked against the header and the file's
 * size. */
static int entry_ok(const struct pcpu__seg_entry *e, const struct pcpu__seg_header *h,
		    uint64_t size)
{
	uint64_t keys, bytes;

	if (e->kind != PCPU__SEG_FLOWS || (e->seq & 1) || e->u32b != 8 || e->u32a == 0 ||
	    e->u32a > PCPU__SEG_FLOWS_MAX_COUNTERS || e->serial == 0 ||
	    (e->flags & ~(uint16_t)PCPU__SEG_E_HAS_HELP) != 0)
		return 0;
	if (e->serial > PCPU__SEG_FLOWS_MAX_KEYS / e->u32a)
		return 0;
	keys = e->serial * e->u32a;
	bytes = keys * 8;
	if (e->value_off < PCPU__SEG_TABLES_BASE || e->value_off % 4096 != 0 ||
	    e->value_off > size || bytes > size - e->value_off)
		return 0;
	if (e->blob_len == 0 || e->blob_len > PCPU__SEG_BLOB_MAX || e->blob_off > h->strings_used ||
	    e->blob_len > h->strings_used - e->blob_off)
		return 0;
	return 1;
}

/* The strings of a blob: name, help (with HAS_HELP), ncounters counter
 * names, exactly filling it; valid and distinct. Fills t's pointers into
 * `blob` (and `names`). 0, or -1 when invalid. */
static int blob_parse(const struct pcpu__seg_entry *e, char *blob, const char **names,
		      struct pcpu_reader_flows *t)
{
	size_t pos = 0, len = e->blob_len;
	const char *s[2 + PCPU__SEG_FLOWS_MAX_COUNTERS];
	unsigned want = 1 + ((e->flags & PCPU__SEG_E_HAS_HELP) ? 1 : 0) + e->u32a;

	for (unsigned i = 0; i < want; i++) {
		const char *z = memchr(blob + pos, 0, len - pos);

		if (pos >= len || !z)
			return -1;
		s[i] = blob + pos;
		pos = (size_t)(z - blob) + 1;
	}
	if (pos != len)
		return -1; /* bytes left over */
	t->name = s[0];
	if (pcpu_stats_check_metric_name(t->name) != 0)
		return -1;
	t->help = (e->flags & PCPU__SEG_E_HAS_HELP) ? s[1] : NULL;
	if (t->help && pcpu_stats_check_label_value(t->help) != 0)
		return -1;
	for (unsigned c = 0; c < e->u32a; c++) {
		names[c] = s[want - e->u32a + c];
		if (pcpu_stats_check_label_name(names[c]) != 0)
			return -1;
		for (unsigned d = 0; d < c; d++)
			if (strcmp(names[c], names[d]) == 0)
				return -1;
	}
	t->counter_names = names;
	t->nflows = (size_t)e->serial;
	t->ncounters = e->u32a;
	return 0;
}

/* Entry i as a table: 1 and *t filled (its names in one allocation, freed
 * through t->counter_names), 0 if it is none (or changing, or invalid), -1
 * with errno on a read or memory error. */
static int take_table(struct pcpu_reader *r, const struct pcpu__seg_header *h, uint64_t size,
		      uint64_t i, const struct pcpu__seg_entry *e1, struct pcpu_reader_flows *t)
{
	struct pcpu__seg_entry e2;
	const char **names;
	char *blob;
	size_t at;

	if (!entry_ok(e1, h, size))
		return 0;
	/* The names' array, then the blob copy (plus a NUL: never read past). */
	at = e1->u32a * sizeof(char *);
	names = malloc(at + e1->blob_len + 1);
	if (!names)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	blob = (char *)names + at;
	blob[e1->blob_len] = 0;
	if (pcpu__rd_read_exact(r, blob, e1->blob_len, h->strings_offset + e1->blob_off,
				"a flows table's names") < 0 ||
	    pcpu__rd_read_exact(r, &e2, sizeof e2, h->entries_offset + i * h->entry_size,
				"a flows table's entry") < 0) {
		free(names);
		return -1;
	}
	if (memcmp(e1, &e2, sizeof e2) != 0 || blob_parse(e1, blob, names, t) != 0) {
		free(names);
		return 0; /* changed meanwhile, or invalid: left out */
	}
	t->pcpu__entry = i;
	t->pcpu__seq = e1->seq;
	t->pcpu__id = e1->family_id;
	t->pcpu__off = e1->value_off;
	return 1;
}

int pcpu_reader_flows_list(pcpu_reader_t *r, struct pcpu_reader_flows **out, size_t *n)
{
	struct pcpu__seg_header h;
	unsigned char *batch;
	struct pcpu_reader_flows *v = NULL;
	size_t nv = 0, cap = 0;
	uint64_t size, used, i;
	int err;

	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (!r || !out || !n)
		return pcpu__seg_fail(EINVAL, "pcpu_reader_flows_list: NULL argument");
	if (pcpu__rd_read_header(r, &h, &size) < 0)
		return -1;
	used = h.entries_used;
	/* entry_size: 64 here, longer in a later minor (checked: 64..4096);
	 * the first 64 bytes keep their meaning. */
	batch = malloc((size_t)BATCH * h.entry_size);
	if (!batch)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	for (i = 0; i < used; i += BATCH) {
		uint64_t k = used - i < BATCH ? used - i : BATCH;

		if (pcpu__rd_read_exact(r, batch, (size_t)(k * h.entry_size),
					h.entries_offset + i * h.entry_size, "directory") < 0)
			goto fail;
		for (uint64_t j = 0; j < k; j++) {
			struct pcpu__seg_entry e;
			int got;

			memcpy(&e, batch + j * h.entry_size, sizeof e);
			if (e.kind != PCPU__SEG_FLOWS)
				continue;
			if (nv == cap) {
				size_t c = cap ? 2 * cap : 8;
				struct pcpu_reader_flows *p = realloc(v, c * sizeof *p);

				if (!p) {
					pcpu__seg_fail(ENOMEM, "out of memory");
					goto fail;
				}
				v = p;
				cap = c;
			}
			memset(&v[nv], 0, sizeof v[nv]);
			got = take_table(r, &h, size, i + j, &e, &v[nv]);
			if (got < 0)
				goto fail;
			nv += (size_t)got;
		}
	}
	free(batch);
	if (nv == 0) {
		free(v);
		v = NULL;
	}
	*out = v;
	*n = nv;
	return 0;
fail:
	err = errno;
	free(batch);
	pcpu_reader_flows_free(v, nv);
	errno = err;
	return -1;
}

void pcpu_reader_flows_free(struct pcpu_reader_flows *tables, size_t n)
{
	if (!tables)
		return;
	for (size_t i = 0; i < n; i++)
		free((void *)tables[i].counter_names);
	free(tables);
}

/* The table's entry now, unchanged since it was listed: 0, or -1 with
 * errno (ESTALE, or a read's). */
static int still_there(struct pcpu_reader *r, const struct pcpu__seg_header *h,
		       const struct pcpu_reader_flows *t)
{
	struct pcpu__seg_entry e;

	if (t->pcpu__entry >= h->entries_used)
		return pcpu__seg_fail(ESTALE, "segment %s: flows table %s is gone", r->name, t->name);
	if (pcpu__rd_read_exact(r, &e, sizeof e, h->entries_offset + t->pcpu__entry * h->entry_size,
				"a flows table's entry") < 0)
		return -1;
	if (e.kind != PCPU__SEG_FLOWS || e.seq != t->pcpu__seq || e.family_id != t->pcpu__id ||
	    e.value_off != t->pcpu__off || e.serial != t->nflows || e.u32a != t->ncounters)
		return pcpu__seg_fail(ESTALE, "segment %s: flows table %s was destroyed or replaced",
				      r->name, t->name);
	return 0;
}

int pcpu_reader_flows_read(pcpu_reader_t *r, const struct pcpu_reader_flows *t, size_t first,
			   size_t n, uint64_t *out)
{
	struct pcpu__seg_header h;
	uint64_t size, bytes;

	if (!r || !t || !out || n == 0 || first >= t->nflows || n > t->nflows - first ||
	    t->ncounters == 0 || t->ncounters > PCPU__SEG_FLOWS_MAX_COUNTERS)
		return pcpu__seg_fail(EINVAL, "pcpu_reader_flows_read: invalid arguments");
	if (pcpu__rd_read_header(r, &h, &size) < 0 || still_there(r, &h, t) < 0)
		return -1;
	bytes = (uint64_t)n * t->ncounters * 8;
	if (bytes > SIZE_MAX / 3) /* 32-bit targets: more than out can hold (and 3 copies) */
		return pcpu__seg_fail(EINVAL, "pcpu_reader_flows_read: %llu bytes at once",
				      (unsigned long long)bytes);
	if (t->pcpu__off > size || (uint64_t)t->nflows * t->ncounters * 8 > size - t->pcpu__off)
		return pcpu__seg_fail(EBADMSG, "segment %s: flows table %s is past the end of the file",
				      r->name, t->name);
	if (pcpu__rd_read_exact(r, out, (size_t)bytes,
				t->pcpu__off + (uint64_t)first * t->ncounters * 8,
				"a flows table's words") < 0)
		return -1;
#if PCPU__TORN64
	{
		/* A copy made 32 bits at a time may be torn: settled
		 * (pcpu__rd_settle(); a word that never settles: EAGAIN). */
		unsigned char *more = malloc(2 * (size_t)bytes);
		int rc;

		if (!more)
			return pcpu__seg_fail(ENOMEM, "out of memory");
		rc = pcpu__rd_settle(r, NULL, (unsigned char *)out, more, more + bytes, (size_t)bytes,
				     t->pcpu__off + (uint64_t)first * t->ncounters * 8);
		free(more);
		if (rc < 0)
			return -1;
	}
#endif
	/* After the words: unchanged means they were this table's throughout. */
	return still_there(r, &h, t);
}
