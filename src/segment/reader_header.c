/* SPDX-License-Identifier: MIT */
/*
 * The segment reader's header checks: a header is untrusted input, so its
 * sizes are checked against the format's limits and the file's size with
 * overflow-checked arithmetic before anything is allocated or read, and its
 * fixed fields must stay what they were at open.
 */
#include <errno.h>
#include <string.h>

#include "reader_internal.h"

#define MAX_NSLOTS 65536
#define MAX_STRIDE_SHIFT 40

static int is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/* Checks the fields that never change after publication. */
int pcpu__rd_check_header_static(const struct pcpu__seg_header *h, const char *what)
{
	uint64_t ent_end, str_end, span;
	size_t i;

	if (memcmp(h->magic, PCPU__SEG_MAGIC, 8) != 0) {
		static const char zero[8];
		if (memcmp(h->magic, zero, 8) == 0)
			return pcpu__seg_fail(EAGAIN, "%s: the segment is still being created", what);
		return pcpu__seg_fail(EBADMSG, "%s: not a pcpu statistics segment (bad magic)", what);
	}
	if (h->byte_order != PCPU__SEG_BYTE_ORDER)
		return pcpu__seg_fail(EPROTONOSUPPORT, "%s: written with another byte order", what);
	/* Before any other field: another major version lays them out, or
	 * gives them a meaning, differently (1.x had no mirror regions). */
	if (h->version_major != PCPU__SEG_VERSION_MAJOR)
		return pcpu__seg_fail(EPROTONOSUPPORT,
				      "%s: segment format %u.%u is not supported by this reader "
				      "(it reads %u.x)",
				      what, h->version_major, h->version_minor, PCPU__SEG_VERSION_MAJOR);
	if (h->header_size < sizeof *h || h->header_size > PCPU__SEG_HEADER_REGION)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (header_size %u)", what,
				      h->header_size);
	if (h->nslots == 0 || h->nslots > MAX_NSLOTS)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (nslots %u)", what, h->nslots);
	/* 2.6: at least one CPU slot; older writers left the field 0. */
	if (h->owned_slots >= h->nslots)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (owned_slots %u of nslots %u)",
				      what, h->owned_slots, h->nslots);
	if (h->slot_index != 1 && h->slot_index != 2)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (slot_index %u)", what,
				      h->slot_index);
	if (!is_pow2(h->slot_stride) || h->slot_stride < 16 ||
	    h->slot_stride > ((uint64_t)1 << MAX_STRIDE_SHIFT))
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (slot_stride %llu)", what,
				      (unsigned long long)h->slot_stride);
	/* nslots slot regions and their nslots mirrors: <= 2^57, no overflow. */
	span = 2 * (uint64_t)h->nslots * h->slot_stride;
	if (h->chunk_span != span)
		return pcpu__seg_fail(EBADMSG,
				      "%s: corrupted header (chunk_span %llu, not 2 * nslots * "
				      "slot_stride = %llu)",
				      what, (unsigned long long)h->chunk_span, (unsigned long long)span);
	if (h->entry_size < PCPU__SEG_ENTRY_SIZE || h->entry_size > 4096 || h->entry_size % 8)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (entry_size %u)", what,
				      h->entry_size);
	if (h->entries_offset < h->header_size ||
	    __builtin_mul_overflow(h->entries_capacity, (uint64_t)h->entry_size, &ent_end) ||
	    __builtin_add_overflow(ent_end, h->entries_offset, &ent_end) ||
	    ent_end > h->strings_offset ||
	    __builtin_add_overflow(h->strings_offset, h->strings_capacity, &str_end) ||
	    str_end > h->data_offset || h->data_offset > (uint64_t)INT64_MAX)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (regions overlap or overflow)",
				      what);
	if (h->writer_pid <= 0)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (writer pid)", what);
	for (i = 0; i < sizeof h->name && h->name[i]; i++)
		;
	if (i == 0 || i == sizeof h->name)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (name not terminated)", what);
	{
		char n[PCPU__SEG_NAME_MAX + 1];
		memcpy(n, h->name, i);
		n[i] = '\0';
		if (pcpu__seg_check_name(n) < 0)
			return pcpu__seg_fail(EBADMSG, "%s: corrupted header (invalid name)", what);
	}
	return 0;
}

/* Dynamic fields, against the static ones and the file's size. */
int pcpu__rd_check_header_dynamic(const struct pcpu__seg_header *h, uint64_t size, const char *what)
{
	uint64_t chunks_max;

	if (h->entries_used > h->entries_capacity || h->strings_used > h->strings_capacity)
		return pcpu__seg_fail(EBADMSG, "%s: corrupted header (directory counts)", what);
	if (size < h->data_offset)
		return pcpu__seg_fail(EBADMSG, "%s: truncated (file of %llu bytes, data at %llu)",
				      what, (unsigned long long)size,
				      (unsigned long long)h->data_offset);
	chunks_max = (size - h->data_offset) / h->chunk_span;
	if (h->nchunks > chunks_max)
		return pcpu__seg_fail(EBADMSG, "%s: truncated (%llu chunks declared, %llu in the file)",
				      what, (unsigned long long)h->nchunks,
				      (unsigned long long)chunks_max);
	return 0;
}

static int same_static(const struct pcpu__seg_header *a, const struct pcpu__seg_header *b)
{
	return memcmp(a->magic, b->magic, 8) == 0 && a->version_major == b->version_major &&
	       a->header_size == b->header_size && a->writer_pid == b->writer_pid &&
	       a->writer_uid == b->writer_uid && a->writer_start == b->writer_start &&
	       a->nslots == b->nslots && a->owned_slots == b->owned_slots &&
	       a->slot_stride == b->slot_stride &&
	       a->chunk_span == b->chunk_span && a->data_offset == b->data_offset &&
	       a->entries_offset == b->entries_offset && a->entries_capacity == b->entries_capacity &&
	       a->entry_size == b->entry_size && a->strings_offset == b->strings_offset &&
	       a->strings_capacity == b->strings_capacity && memcmp(a->name, b->name, sizeof a->name) == 0;
}

int pcpu__rd_read_header(struct pcpu_reader *r, struct pcpu__seg_header *h, uint64_t *size)
{
	if (pcpu__rd_read_exact(r, h, sizeof *h, 0, "header") < 0)
		return -1;
	if (!same_static(h, &r->h))
		return pcpu__seg_fail(EBADMSG, "segment %s: corrupted (header changed)", r->name);
	if (pcpu__rd_size(r, size) < 0)
		return -1;
	return pcpu__rd_check_header_dynamic(h, *size, r->name);
}
