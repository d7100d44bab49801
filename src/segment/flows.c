/* SPDX-License-Identifier: MIT */
/*
 * Flows tables in the segment (pcpu_segment_flows_create(), format 2.9):
 * a pcpu_flows_t (pcpu/flows.h) whose shared words are pages of the
 * segment's file, described by a FLOWS directory entry, so that readers in
 * other processes read them (pcpu_reader_flows_read(), `pcpustat flows`).
 *
 * Where the words live. Not in the registry's zone: a zone object has a
 * copy in every slot region, reserved in each (16 bytes per word per
 * present CPU), where a table needs one word per key, whatever the
 * slots. They lie past the zone's chunks, from PCPU__SEG_TABLES_BASE up
 * (format.h; backing.c never grows a chunk that far), each table in pages
 * of its own, mapped MAP_SHARED by the writer. The file is sparse: the
 * offset costs nothing but apparent size.
 *
 * Out of space: every page of a table's words is allocated when the table
 * is made (pcpu_file_allocate_mapped(), as the zone's pages are), so that
 * no add, drain or flush can fault on a full tmpfs (SIGBUS); a file system
 * that has no room refuses the table (ENOSPC, counted in `nospace` and
 * flagged as for series). The cost is the table's whole size in the file
 * at once (8 bytes per key), where a private table's words take memory as
 * keys are first written.
 *
 * What readers see, and when: the words alone (the slots' buffers are the
 * writer's private memory). The writer flushes every table at every
 * collection of its registry (the registry's COLLECTING event:
 * pcpu_registry_collect(), pcpu_registry_snapshot(), pcpu_registry_write(),
 * so also every in-process scrape), so a reader sees every add that
 * returned before the writer's last collection began, plus those that
 * reached the words since (a slot's buffer drains when full, and adds that
 * cannot buffer go to the words directly): the delay is bounded by the
 * writer's collection interval, and the words are exact right after a
 * flush (docs/segment-format.md, Flows tables).
 *
 * Life: pcpu_flows_destroy() calls back here (core's release hook) to free
 * the entry -- before the words are unmapped and their pages punched out
 * and kept for reuse. A table may outlive its segment (the registry
 * destroyed first): the segment then forgets it (pcpu__flows_detach()), and
 * destroying it later unmaps its words only. A fork() child gets private
 * copies of the words (flows.c in core) and forgets the parent's tables.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pcpu/expose.h>
#include <pcpu/flows.h>
#include <pcpu/segment.h>

#include "../core/core.h"
#include "backing.h"
#include "segment_internal.h"
#include "writer.h"

static uint64_t round_page(uint64_t x)
{
	return (x + 4095) & ~(uint64_t)4095;
}

/* Where a table of `len` bytes goes: a freed range at least as long (first
 * fit, its length kept with it), else the end. */
static uint64_t place(struct pcpu_segment *seg, uint64_t *len)
{
	struct u64vec *v = &seg->free_tables;
	uint64_t off;

	for (size_t i = 0; i + 1 < v->n; i += 2)
		if (v->v[i + 1] >= *len) {
			off = v->v[i];
			*len = v->v[i + 1];
			v->v[i] = v->v[v->n - 2];
			v->v[i + 1] = v->v[v->n - 1];
			v->n -= 2;
			return off;
		}
	if (seg->tables_end < PCPU__SEG_TABLES_BASE)
		seg->tables_end = PCPU__SEG_TABLES_BASE;
	off = seg->tables_end;
	seg->tables_end += *len;
	return off;
}

/* Gives a range back for the next table (out of memory: leaked, the file's
 * apparent size grows by the next table instead). */
static void unplace(struct pcpu_segment *seg, uint64_t off, uint64_t len)
{
	struct u64vec *v = &seg->free_tables;

	if (off + len == seg->tables_end) {
		seg->tables_end = off;
		return;
	}
	/* (off, len) pairs: both pushed, or neither. */
	if (u64vec_push(v, off) < 0)
		return;
	if (u64vec_push(v, len) < 0)
		v->n--;
}

/* The table's pages given back to the file system (zeros again). */
static void punch(struct pcpu_segment *seg, uint64_t off, uint64_t len)
{
	int err = errno;

	(void)fallocate(seg->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
	errno = err;
}

static void table_unlink(struct pcpu__seg_table *t)
{
	struct pcpu_segment *seg = t->seg;

	if (t->prev)
		t->prev->next = t->next;
	else
		seg->tables = t->next;
	if (t->next)
		t->next->prev = t->prev;
}

/* pcpu_flows_destroy() of a published table (core's release hook), before
 * its words are unmapped: the entry freed first (readers that find it
 * changed drop what they read), then the pages. */
static void table_release(void *ctx)
{
	struct pcpu__seg_table *t = ctx;
	struct pcpu_segment *seg = t->seg;

	pcpu__registry_lock(seg->reg);
	pcpu__directory_begin(seg);
	pcpu__directory_entry_free(seg, t->idx);
	pcpu__directory_end(seg);
	punch(seg, t->off, t->len);
	unplace(seg, t->off, t->len);
	table_unlink(t);
	pcpu__registry_unlock(seg->reg);
	free(t);
}

/* The arguments a table needs, checked: 0, or -1 with errno and a message. */
static int check_args(pcpu_segment_t *seg, const char *name, const char *help, size_t nflows,
		      unsigned ncounters, const char *const *counter_names,
		      const struct pcpu_flows_attr *attr, size_t *blob_len)
{
	size_t len;

	if (!seg || !name || !counter_names)
		return pcpu__seg_fail(EINVAL, "pcpu_segment_flows_create: NULL argument");
	if (seg->detached || getpid() != seg->pid)
		return pcpu__seg_fail(EINVAL, "pcpu_segment_flows_create: the segment is a fork() "
					      "parent's (a child publishes a registry of its own)");
	if (seg->tree)
		return pcpu__seg_fail(EINVAL, "pcpu_segment_flows_create: a shared registry's segment "
					      "holds no flows tables (a table's buffers are one "
					      "process's)");
	if (pcpu_stats_check_metric_name(name) != 0)
		return pcpu__seg_fail(EINVAL, "flows table name \"%.200s\" is not a valid metric name",
				      name);
	if (help && pcpu_stats_check_label_value(help) != 0)
		return pcpu__seg_fail(EINVAL, "flows table help is not UTF-8 text of at most 2048 "
					      "bytes");
	if (ncounters == 0 || ncounters > PCPU__SEG_FLOWS_MAX_COUNTERS)
		return pcpu__seg_fail(EINVAL, "a published flows table has 1 to %d counters",
				      PCPU__SEG_FLOWS_MAX_COUNTERS);
	len = strlen(name) + 1 + (help ? strlen(help) + 1 : 0);
	for (unsigned c = 0; c < ncounters; c++) {
		if (!counter_names[c] || pcpu_stats_check_label_name(counter_names[c]) != 0)
			return pcpu__seg_fail(EINVAL, "counter name %u is not a valid label name", c);
		for (unsigned d = 0; d < c; d++)
			if (strcmp(counter_names[c], counter_names[d]) == 0)
				return pcpu__seg_fail(EINVAL, "counter name \"%s\" given twice",
						      counter_names[c]);
		len += strlen(counter_names[c]) + 1;
	}
	/* Before the registry's lock: it registers the flows' fork handlers. */
	if (pcpu__flows_check(nflows, ncounters, attr) != 0)
		return pcpu__seg_fail(errno, "pcpu_segment_flows_create: %s",
				      errno == E2BIG	? "more keys (nflows x ncounters) than "
							  "PCPU_FLOWS_MAX_KEYS"
				      : errno == ENOMEM ? "out of memory"
							: "nflows 0, or invalid attributes");
	if (len > PCPU__SEG_BLOB_MAX)
		return pcpu__seg_fail(E2BIG, "the table's names are longer than %d bytes",
				      PCPU__SEG_BLOB_MAX);
	*blob_len = len;
	return 0;
}

/* The table's words: mapped, every page allocated in the file. NULL with
 * errno and a message; the range then given back. */
static void *words_map(struct pcpu_segment *seg, uint64_t off, uint64_t len)
{
	void *p;
	int err;

	if (pcpu__file_grow(seg->fd, off + len, &seg->grow_lock) != 0) {
		err = errno;
		pcpu__seg_fail(err, "sizing \"%.300s\" for a flows table: %s", seg->path,
				      strerror(err));
		return NULL;
	}
	p = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, (off_t)off);
	if (p == MAP_FAILED) {
		err = errno;
		pcpu__seg_fail(err, "mapping a flows table of \"%.300s\": %s", seg->path,
				      strerror(err));
		return NULL;
	}
	pcpu__seg_no_huge_pages(p, (size_t)len);
	/* Allocated before anything can write it: a full tmpfs refuses the
	 * table here, never an add with SIGBUS. */
	if (pcpu_file_allocate_mapped(seg->fd, p, off, (size_t)len) != 0) {
		err = errno;
		munmap(p, (size_t)len);
		punch(seg, off, len);
		pcpu__directory_on_nospace(seg, err);
		pcpu__seg_fail(err, "no room for a flows table of %llu bytes in \"%.300s\": %s",
				      (unsigned long long)len, seg->path, strerror(err));
		return NULL;
	}
	return p;
}

pcpu_flows_t *pcpu_segment_flows_create(pcpu_segment_t *seg, const char *name, const char *help,
					size_t nflows, unsigned ncounters,
					const char *const *counter_names,
					const struct pcpu_flows_attr *attr)
{
	struct pcpu__seg_table *t;
	struct pcpu__seg_entry e;
	uint64_t len, idx, boff;
	size_t blob_len = 0, pos = 0;
	void *words;
	int err;

	if (check_args(seg, name, help, nflows, ncounters, counter_names, attr, &blob_len) != 0)
		return NULL;
	t = calloc(1, sizeof *t);
	if (!t) {
		pcpu__seg_fail(ENOMEM, "out of memory");
		return NULL;
	}
	t->seg = seg;
	pcpu__registry_lock(seg->reg);
	len = round_page((uint64_t)nflows * ncounters * 8);
	t->off = place(seg, &len);
	t->len = len;
	words = words_map(seg, t->off, t->len);
	if (!words)
		goto fail_placed;
	t->f = pcpu__flows_create_shared(nflows, ncounters, attr, words, (size_t)t->len,
					 table_release, t);
	if (!t->f) {
		err = errno;
		munmap(words, (size_t)t->len);
		pcpu__seg_fail(err, "pcpu_segment_flows_create: %s", strerror(err));
		goto fail_placed;
	}
	/* The entry, last: readers see the table once its words exist. */
	pcpu__directory_begin(seg);
	if (pcpu__directory_entry_new(seg, blob_len, &idx, &boff) != 0) {
		err = errno;
		pcpu__directory_end(seg);
		pcpu__registry_unlock(seg->reg);
		pcpu__flows_detach(t->f);
		pcpu_flows_destroy(t->f); /* unmaps the words */
		pcpu__registry_lock(seg->reg);
		punch(seg, t->off, t->len);
		unplace(seg, t->off, t->len);
		pcpu__registry_unlock(seg->reg);
		free(t);
		pcpu__seg_fail(err == E2BIG ? E2BIG : ENOSPC,
			       "the segment's directory has no room for the flows table \"%.200s\"",
			       name);
		return NULL;
	}
	{
		char *blob = seg->strings + boff;

		memcpy(blob + pos, name, strlen(name) + 1);
		pos += strlen(name) + 1;
		if (help) {
			memcpy(blob + pos, help, strlen(help) + 1);
			pos += strlen(help) + 1;
		}
		for (unsigned c = 0; c < ncounters; c++) {
			memcpy(blob + pos, counter_names[c], strlen(counter_names[c]) + 1);
			pos += strlen(counter_names[c]) + 1;
		}
	}
	memset(&e, 0, sizeof e);
	e.kind = PCPU__SEG_FLOWS;
	e.flags = help ? PCPU__SEG_E_HAS_HELP : 0;
	e.family_id = pcpu__directory_new_id(seg);
	e.blob_off = boff;
	e.blob_len = (uint32_t)blob_len;
	e.u32a = ncounters;
	e.u32b = 8;
	e.value_off = t->off;
	e.serial = nflows;
	pcpu__directory_entry_set(seg, idx, &e);
	pcpu__directory_end(seg);
	t->idx = idx;
	t->next = seg->tables;
	if (seg->tables)
		seg->tables->prev = t;
	seg->tables = t;
	pcpu__registry_unlock(seg->reg);
	return t->f;

fail_placed:
	unplace(seg, t->off, t->len);
	pcpu__registry_unlock(seg->reg);
	free(t);
	return NULL;
}

void pcpu__segment_tables_flush(struct pcpu_segment *seg)
{
	int err = errno;

	/* A flush fails only where the fence does (EPERM, ENOSYS): the
	 * buffers stay as they were, and the next collection tries again. */
	for (struct pcpu__seg_table *t = seg->tables; t; t = t->next)
		(void)pcpu_flows_flush(t->f);
	errno = err;
}

void pcpu__segment_tables_forget(struct pcpu_segment *seg, int detach)
{
	struct pcpu__seg_table *t, *next;

	for (t = seg->tables; t; t = next) {
		next = t->next;
		if (detach)
			pcpu__flows_detach(t->f);
		free(t);
	}
	seg->tables = NULL;
}
