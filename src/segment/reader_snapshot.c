/* SPDX-License-Identifier: MIT */
/*
 * The statistics segment, reader side (pcpu/reader.h): snapshotting another
 * process's segment, which is untrusted input. This file holds the read
 * protocol; reader_internal.h lists the other parts (input, header, opening,
 * scanning, listing, parsing, values, the result).
 *
 * A snapshot, step by step (`attempt` loop, at most MAX_ATTEMPTS times):
 *
 *   H1 = header                    validate; generation g1
 *   E1 = entries [0, used)         one pread
 *   S  = strings [0, used)         one pread; blobs are parsed from this copy
 *   parse and validate E1          families, series, links, value ranges
 *   values                         per chunk, the extents of data (SEEK_DATA,
 *                                  SEEK_HOLE), and per run of nearby values
 *                                  one pread per region an extent meets
 *   E2, H2 = entries, header       again, in this order
 *
 * An entry is kept only if E1 and E2 hold the same 64 bytes and an even
 * sequence number: the writer changes an entry's sequence before touching
 * the entry, its blob or (on removal) its storage, and never reuses either
 * before that, so an unchanged entry's blob and values were read while they
 * belonged to it (see writer.c). Entries that changed are series or
 * families being added or removed during the read; they are left out and
 * counted. If g1 == g2 (even), nothing changed at all: the snapshot is
 * "stable", and then anything that does not fit -- a series without its
 * family, say -- is corruption. Otherwise the read is retried a bounded
 * number of times, and the last attempt keeps what is consistent.
 *
 * Why H2 after E2 (a seqlock reader's second load of the sequence comes
 * after its data loads): a copy of the directory is not atomic. A change
 * that begins while E2 is being copied can leave it torn -- a family
 * removal frees the series' entries, then the family's, so a copy can hold
 * a series (copied before it was freed) and not its family (copied after).
 * E1 and E2 then agree on the series and not on the family. Read before E2,
 * H2 would still show g1 and call that stable: corruption that is not
 * there (issue 10: 65 false errors in 99,650 snapshots). Read after E2, it
 * shows the change.
 *
 * Ordering: the copies are separate system calls, made in program order; a
 * C11 fence after each orders them as seen by this thread, and the writer
 * publishes with release stores. (On x86 the kernel's copies are ordered
 * anyway.)
 *
 * Validation is strict: an entry that did not change during the read and is
 * invalid in any way (an offset past the end, a count beyond the format's
 * limits, a string without its NUL, a name that breaks the Prometheus rules,
 * value ranges that overlap) fails the whole snapshot with EBADMSG and a
 * message naming the entry -- never a partial result that hides it.
 * Sizes come from the header and are checked against the file's size with
 * overflow-checked arithmetic before anything is allocated or read; every
 * allocation and read of a snapshot, and every system call on the values,
 * is charged against max_bytes (reader_values.c).
 *
 * Two shortcuts, for the common case of a directory that does not change
 * while it is read (issue 51: a scrape of a published segment cost 15x
 * the writer's own exposition, half of it copying and faulting in the
 * directory on every snapshot):
 *
 *  - No second copy when nothing changed: a header read right after the
 *    values that shows g1 (even) again proves that nothing of the
 *    directory changed since H1 -- E1, the strings and the values were all
 *    read inside one even generation, a seqlock's read. E2 (and H2 after
 *    it) is only copied when the generation moved. Not with groups: a
 *    group's values are rewritten under its entry's sequence alone, not
 *    the generation, so only E2 shows such a rewrite.
 *  - The directory of a stable snapshot is kept with the reader (struct
 *    pcpu__rd_cache: the parsed copy and the snapshot built from it); the
 *    next snapshot whose H1 shows the same generation (even) and the same
 *    sizes reads the values alone into it, and is kept only if the header
 *    read after them still shows that generation -- the same seqlock
 *    read, over a directory read and validated before. The new snapshot
 *    shares the names, labels and bounds of the one kept (a reference
 *    count). Nothing is trusted more: the copy is the one validated, the
 *    header is checked against the file's size on every snapshot (a
 *    truncated file still reads short: EBADMSG), every read is charged to
 *    the budget. Not with groups (as above) or PCPU_READER_PER_SLOT.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "reader_internal.h"

#define MAX_ATTEMPTS 4

/* One attempt's copies and decisions. */
struct attempt {
	struct pcpu_reader *r;
	struct pcpu__seg_header h1, hb, h2; /* before E1, after E1, after the values or E2 */
	struct pcpu__rd_budget b;
	struct parse p;
	unsigned char *E1, *E2;       /* the directory, twice */
	char *S;                      /* the strings, once */
	uint64_t elen;                /* bytes of E1 and E2 */
	unsigned char *kept_fam, *kept_ser;
	uint64_t changed;             /* entries left out: changed during the read */
	int stable;
	int groups;                   /* group members among the series */
};

/* A stable snapshot's directory, kept for the next (the file's comment). */
struct pcpu__rd_cache {
	struct pcpu__seg_header h;    /* H1 of the read: generation and sizes */
	struct parse p;               /* the parse of E, its series' places */
	unsigned char *E;             /* the directory copy p points into */
	struct pcpu_reader_snapshot *snap; /* built from p: names, labels (held) */
	struct ser **order;           /* p's series in snap's order */
};

static void cache_free(struct pcpu__rd_cache *c)
{
	if (!c)
		return;
	pcpu__rd_parse_free(&c->p);
	free(c->E);
	free(c->order);
	pcpu_reader_snapshot_free(c->snap);
	free(c);
}

/* Snapshots of one reader may run in several threads at once: the cache
 * is taken whole by one of them (an atomic exchange: the others read the
 * whole directory), and put back, or replaced, the same way. */
static struct pcpu__rd_cache *cache_take(struct pcpu_reader *r)
{
	return __atomic_exchange_n(&r->cache, NULL, __ATOMIC_ACQUIRE);
}

static void cache_put(struct pcpu_reader *r, struct pcpu__rd_cache *c)
{
	/* For pcpu_reader_close(); every snapshot stores the same. */
	__atomic_store_n(&r->cache_free, cache_free, __ATOMIC_RELAXED);
	cache_free(__atomic_exchange_n(&r->cache, c, __ATOMIC_ACQ_REL));
}

/* The writer's state for this snapshot, or -1 with ESRCH for a closed or
 * gone writer's segment unless stale ones are allowed. Once per snapshot,
 * not per attempt: a read of /proc/<pid>/stat costs more than a small
 * snapshot. Unknown is not gone: the file is read. */
static int check_writer(struct pcpu_reader *r, const struct pcpu__seg_header *h1, int *statep)
{
	int state;

	if (*statep < 0 || (h1->flags & PCPU__SEG_F_CLOSED))
		*statep = pcpu__rd_writer_state(r, h1->flags);
	state = *statep;
	if ((state == PCPU_SEGMENT_CLOSED || state == PCPU_SEGMENT_GONE) &&
	    !(r->flags & PCPU_READER_ALLOW_STALE)) {
		if (state == PCPU_SEGMENT_CLOSED)
			return pcpu__seg_fail(ESRCH, "segment %s: closed by its writer (pid %d)", r->name,
					      (int)h1->writer_pid);
		return pcpu__seg_fail(ESRCH, "segment %s: writer (pid %d) is gone: it exited without "
					     "unpublishing",
				      r->name, (int)h1->writer_pid);
	}
	return state;
}

/* The first look: E1, the header again (hb), then the strings. */
static int copy_directory(struct attempt *a)
{
	struct pcpu_reader *r = a->r;
	uint64_t size;

	a->p.used = a->h1.entries_used;
	a->elen = a->p.used * a->h1.entry_size; /* used <= capacity: checked, no overflow */
	/* E2's room is charged now, though it is copied only if the
	 * generation moves: what a snapshot may cost does not depend on
	 * what the writer does meanwhile. */
	a->E1 = pcpu__rd_alloc(&a->b, a->elen);
	if (!a->E1 || pcpu__rd_charge(&a->b, a->elen) < 0)
		return -1;
	if (pcpu__rd_read_exact(r, a->E1, (size_t)a->elen, a->h1.entries_offset, "directory") < 0)
		return -1;
	__atomic_add_fetch(&r->nentries, a->p.used, __ATOMIC_RELAXED);
	/* The header again: an entry copied into E1 may be newer than h1, and
	 * its blob and chunk were published before it, so strings_used and
	 * nchunks must be read after E1 (entries_used had to be read before). */
	if (pcpu__rd_read_header(r, &a->hb, &size) < 0)
		return -1;
	a->p.h = &a->hb;
	if (pcpu__rd_charge(&a->b, a->hb.strings_used + 1) < 0)
		return -1;
	a->S = calloc(1, (size_t)a->hb.strings_used + 1); /* +1: a NUL after the last blob */
	if (!a->S)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	if (pcpu__rd_read_exact(r, a->S, (size_t)a->hb.strings_used, a->hb.strings_offset,
				"strings") < 0)
		return -1;
	a->p.E = a->E1;
	a->p.S = a->S;
	a->p.slen = a->hb.strings_used;
	return 0;
}

/* Whether directory entry idx is the same in E1 and E2 (no E2: nothing
 * changed, the generation says). */
static int same(const struct attempt *a, uint64_t idx)
{
	uint64_t off = idx * a->h1.entry_size;

	return !a->E2 || memcmp(a->E1 + off, a->E2 + off, a->h1.entry_size) == 0;
}

/* A group member's value: its GROUP entry's copy in S, as stable as the
 * entry (the writer rewrites the values under the entry's seq). 1 when
 * set, 0 when the member is left out (in flux), -1 on corruption. */
static int group_member_value(struct attempt *a, struct ser *s)
{
	const struct pcpu__seg_entry *g = ENTRY_AT(&a->p, s->e->value_off);
	const char *blob;

	if (!same(a, s->e->value_off)) {
		a->changed++;
		return 0;
	}
	blob = pcpu__rd_entry_blob(&a->p, g);
	if ((g->seq & 1) || g->kind != PCPU__SEG_GROUP || g->u32a == 0 ||
	    g->u32a > PCPU__SEG_GROUP_MAX || g->blob_len != 8 * g->u32a || !blob ||
	    s->e->u32a >= g->u32a) {
		if (!a->stable) {
			a->changed++; /* a reused entry in flux */
			return 0;
		}
		return pcpu__seg_fail(EBADMSG,
				      "segment %s: corrupted directory entry %u: group member "
				      "without a valid group entry %u",
				      a->r->name, s->idx, (unsigned)s->e->value_off);
	}
	s->acc0 = pcpu__rd_ld64((const unsigned char *)blob + 8 * (size_t)s->e->u32a);
	return 1;
}

/* Which families and series are kept: those whose entries E1 and E2 agree
 * on. An invalid entry that did not change is corruption (EBADMSG naming
 * it); so is, in a stable read, a series whose family does not exist. */
static int decide_kept(struct attempt *a)
{
	struct parse *p = &a->p;
	uint64_t i;

	a->kept_fam = calloc(p->nfams ? p->nfams : 1, 1);
	a->kept_ser = calloc(p->nsers ? p->nsers : 1, 1);
	if (!a->kept_fam || !a->kept_ser)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	for (i = 0; i < p->used; i++) {
		const struct pcpu__seg_entry *e = ENTRY_AT(p, i);
		if (!same(a, i) || ((e->seq & 1) && e->kind != PCPU__SEG_FREE))
			a->changed++;
	}
	for (i = 0; i < p->nfams; i++) {
		struct fam *f = &p->fams[i];

		if (!same(a, f->idx))
			continue;
		if (f->bad)
			return pcpu__seg_fail(EBADMSG, "segment %s: corrupted directory entry %u (family): %s",
					      a->r->name, f->idx, f->msg);
		a->kept_fam[i] = 1;
	}
	for (i = 0; i < p->nsers; i++) {
		struct ser *s = &p->sers[i];
		int rc;

		if (!same(a, s->idx))
			continue;
		if (s->bad)
			return pcpu__seg_fail(EBADMSG, "segment %s: corrupted directory entry %u (series): %s",
					      a->r->name, s->idx, s->msg);
		if (!s->fam || !a->kept_fam[s->fam - p->fams]) {
			/* Its family is being added or removed, or missing. */
			if (a->stable)
				return pcpu__seg_fail(EBADMSG,
						      "segment %s: corrupted directory entry %u: series of a "
						      "family that does not exist",
						      a->r->name, s->idx);
			a->changed++;
			continue;
		}
		if (s->group && (rc = group_member_value(a, s)) <= 0) {
			if (rc < 0)
				return -1;
			continue;
		}
		a->kept_ser[i] = 1;
	}
	return 0;
}

/* Values of two series never overlap (the zone hands out disjoint
 * objects): overlapping ones are a forged directory (EBADMSG). */
static int check_storage(struct attempt *a)
{
	struct parse *p = &a->p;
	struct ser **v = malloc((p->nsers + p->nparts + 1) * sizeof *v);
	size_t n = 0, k;

	if (!v)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	for (k = 0; k < p->nsers; k++)
		if (a->kept_ser[k] && pcpu__rd_stored(&p->sers[k]))
			v[n++] = &p->sers[k];
	/* 2.10: a kept sparse histogram's groups (its parts, in order). */
	for (k = 0; k < p->nparts; k++)
		if (a->kept_ser[p->parts[k].whole - p->sers])
			v[n++] = &p->parts[k];
	/* Mostly in creation order already (pcpu__rd_read_values()). */
	for (k = 1; k < n && pcpu__rd_cmp_ser_loc(&v[k - 1], &v[k]) <= 0; k++)
		;
	if (k < n)
		qsort(v, n, sizeof *v, pcpu__rd_cmp_ser_loc);
	for (k = 1; k < n; k++)
		if (pcpu__rd_ser_chunk(v[k]) == pcpu__rd_ser_chunk(v[k - 1]) &&
		    pcpu__rd_ser_off(v[k]) < pcpu__rd_ser_off(v[k - 1]) + v[k - 1]->size) {
			pcpu__seg_fail(EBADMSG,
				       "segment %s: corrupted directory: entries %u and %u share "
				       "storage",
				       a->r->name, v[k - 1]->idx, v[k]->idx);
			free(v);
			return -1;
		}
	free(v);
	return 0;
}

/* What a snapshot says of its read besides the families. */
static void describe(struct pcpu_reader_snapshot *snap, const struct pcpu__seg_header *h1,
		     const struct pcpu__seg_header *h2, int state)
{
	snap->generation = h1->generation;
	snap->incomplete = (h2->flags & (PCPU__SEG_F_INCOMPLETE | PCPU__SEG_F_NOSPACE)) != 0;
	snap->nospace = (h2->flags & PCPU__SEG_F_NOSPACE) != 0;
	snap->state = (enum pcpu_segment_state)((h2->flags & PCPU__SEG_F_CLOSED) ? PCPU_SEGMENT_CLOSED : state);
	snap->nslots = h1->nslots;
}

/* Keeps a stable read's directory with the reader (the file's comment),
 * taking its parse and E1; best effort (without memory, nothing is kept). */
static void cache_keep(struct attempt *a, struct pcpu_reader_snapshot *snap, struct ser **order)
{
	struct pcpu__rd_cache *c = calloc(1, sizeof *c);

	if (!c) {
		free(order);
		return;
	}
	c->h = a->hb; /* the layout the parse was checked against; generation g1 */
	c->p = a->p;
	c->p.b = NULL; /* the attempt's: each snapshot brings its own */
	c->p.h = &c->h;
	c->E = a->E1;
	c->snap = snap;
	c->order = order;
	pcpu__rd_snapshot_hold(snap);
	memset(&a->p, 0, sizeof a->p); /* now the cache's */
	a->E1 = NULL;
	cache_put(a->r, c);
}

/* The result of a read that ended: assembled and described. */
static int finish(struct attempt *a, int state, struct pcpu_reader_snapshot **out)
{
	/* Only a stable read's directory may serve the next snapshot, and
	 * only where the next can read every value itself (above). */
	int cacheable = a->stable && !a->groups && !(a->p.flags & PCPU_READER_PER_SLOT);
	struct ser **order = NULL;
	struct pcpu_reader_snapshot *snap =
		pcpu__rd_build(&a->p, a->S, a->kept_fam, a->kept_ser, cacheable ? &order : NULL);

	a->S = NULL; /* owned by the snapshot (or freed with it) */
	if (!snap)
		return -1;
	describe(snap, &a->h1, &a->h2, state);
	snap->changed = (size_t)a->changed;
	snap->stable = a->stable;
	if (cacheable) {
		/* Checked once here, not by every write of every snapshot the
		 * kept directory serves (issue 51: a tenth of a scrape). */
		pcpu__rd_mark_checked(snap);
		cache_keep(a, snap, order);
	}
	*out = snap;
	return 1;
}

/* Whether any series of the parse is a group member (its value in its
 * GROUP entry's blob, rewritten without a new generation). */
static int has_groups(const struct parse *p)
{
	size_t i;

	for (i = 0; i < p->nsers; i++)
		if (p->sers[i].group)
			return 1;
	return 0;
}

/* The second look (the file's comment): the header alone when the
 * generation did not move and no group is read, else the directory and
 * then the header. */
static int second_look(struct attempt *a)
{
	struct pcpu_reader *r = a->r;

	a->groups = has_groups(&a->p);
	if (!a->groups) {
		if (pcpu__rd_read_exact(r, &a->h2, sizeof a->h2, 0, "header") < 0)
			return -1;
		if (a->h2.generation == a->h1.generation && !(a->h1.generation & 1))
			return 0; /* stable: E1 is the directory throughout */
	}
	/* A change that begins while E2 is copied can leave E2 torn (a
	 * removal's series copied before they were freed, their family
	 * after); only a generation read after the copy is sure to show it. */
	a->E2 = malloc(a->elen ? (size_t)a->elen : 1); /* charged with E1 */
	if (!a->E2)
		return pcpu__seg_fail(ENOMEM, "out of memory");
	if (pcpu__rd_read_exact(r, a->E2, (size_t)a->elen, a->h1.entries_offset, "directory") < 0 ||
	    pcpu__rd_read_exact(r, &a->h2, sizeof a->h2, 0, "header") < 0)
		return -1;
	__atomic_add_fetch(&r->nentries, a->p.used, __ATOMIC_RELAXED);
	return 0;
}

/* The next snapshot from the cached directory c (taken from the reader):
 * 1 with *out set, 0 when it does not serve (the directory changed), -1
 * on error. c is put back where it may serve again, else freed. */
static int from_cache(struct pcpu_reader *r, struct pcpu__rd_cache *c, struct pcpu_reader_snapshot **out)
{
	struct pcpu__seg_header h1, h2;
	struct pcpu__rd_budget b;
	struct pcpu_reader_snapshot *snap;
	uint64_t size;
	int state = -1;

	if (pcpu__rd_read_header(r, &h1, &size) < 0)
		goto fail;
	if (h1.generation != c->h.generation || (h1.generation & 1) || h1.entries_used != c->h.entries_used ||
	    h1.strings_used != c->h.strings_used || h1.nchunks != c->h.nchunks) {
		cache_free(c);
		return 0;
	}
	state = check_writer(r, &h1, &state);
	if (state < 0)
		goto fail;
	b.left = r->max_bytes;
	b.name = r->name;
	c->p.b = &b;
	c->p.h = &h1; /* the same layout: the static fields are checked equal */
	c->p.unsettled = 0;
	if (pcpu__rd_read_values(&c->p) < 0) {
		if (c->p.unsettled) { /* a word kept changing: the attempts' turn */
			cache_free(c);
			return 0;
		}
		goto fail;
	}
	if (pcpu__rd_read_exact(r, &h2, sizeof h2, 0, "header") < 0)
		goto fail;
	c->p.b = NULL;
	c->p.h = &c->h;
	if (h2.generation != h1.generation) {
		cache_free(c); /* changed while the values were read */
		return 0;
	}
	snap = pcpu__rd_derive(c->snap, c->order);
	if (!snap)
		goto fail;
	describe(snap, &h1, &h2, state);
	snap->changed = 0;
	snap->stable = 1;
	*out = snap;
	cache_put(r, c);
	return 1;
fail:
	cache_free(c); /* with what the failed read left in its series */
	return -1;
}

/* One attempt. Returns 1 with *out set, 0 to retry (unstable, attempts
 * left), -1 on error. */
static int attempt(struct pcpu_reader *r, unsigned flags, int last, int *statep,
		   struct pcpu_reader_snapshot **out)
{
	struct attempt a;
	uint64_t size;
	int rc = -1, state;

	memset(&a, 0, sizeof a);
	a.r = r;
	a.b.left = r->max_bytes;
	a.b.name = r->name;
	if (pcpu__rd_read_header(r, &a.h1, &size) < 0)
		return -1;
	state = check_writer(r, &a.h1, statep);
	if (state < 0)
		return -1;
	a.p.r = r;
	a.p.b = &a.b;
	a.p.h = &a.h1; /* until hb is read */
	a.p.flags = flags;
	if (copy_directory(&a) < 0 || pcpu__rd_parse_directory(&a.p) < 0)
		goto out;
	if (pcpu__rd_read_values(&a.p) < 0) {
		/* A word whose halves kept changing (32-bit targets): try
		 * again while attempts are left, then fail with EAGAIN. */
		if (a.p.unsettled && !last)
			rc = 0;
		goto out;
	}
	if (second_look(&a) < 0)
		goto out;
	a.stable = a.h1.generation == a.h2.generation && !(a.h1.generation & 1);
	if (decide_kept(&a) < 0)
		goto out;
	/* Read again only for what this read left out: a directory that only
	 * grew meanwhile (new entries past the ones copied) left nothing out,
	 * and reading it again -- four times the work, each time larger --
	 * would not show more of what was there (issue 51: pcpustat took
	 * seconds on a segment a worker was filling). */
	if (!a.stable && a.changed && !last) {
		rc = 0;
		goto out;
	}
	if (check_storage(&a) < 0)
		goto out;
	rc = finish(&a, state, out);
out:
	pcpu__rd_parse_free(&a.p);
	free(a.E1);
	free(a.E2);
	free(a.S);
	free(a.kept_fam);
	free(a.kept_ser);
	return rc;
}

int pcpu_reader_snapshot(pcpu_reader_t *r, unsigned flags, struct pcpu_reader_snapshot **out)
{
	int a, state = -1;

	if (out)
		*out = NULL;
	if (!r || !out)
		return pcpu__seg_fail(EINVAL, "NULL reader or output");
	if (flags & ~(unsigned)PCPU_READER_PER_SLOT)
		return pcpu__seg_fail(EINVAL, "unknown snapshot flags 0x%x", flags);
	if (!flags) {
		struct pcpu__rd_cache *c = cache_take(r);
		int rc = c ? from_cache(r, c, out) : 0;

		if (rc != 0)
			return rc < 0 ? -1 : 0;
	}
	for (a = 0; a < MAX_ATTEMPTS; a++) {
		int rc = attempt(r, flags, a + 1 == MAX_ATTEMPTS, &state, out);

		if (rc != 0)
			return rc < 0 ? -1 : 0;
		sched_yield(); /* let the writer finish its change */
	}
	return pcpu__seg_fail(EAGAIN, "segment %s: kept changing", r->name); /* not reached */
}
