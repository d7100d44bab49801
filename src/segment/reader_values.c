/* SPDX-License-Identifier: MIT */
/*
 * Reading the values of a segment's series: each value is the sum over
 * every slot of the slot's words plus its mirror's (the zone's mirror
 * layout, zone_mirror.h: the chunks of a segment file are a zone's), read
 * with as few system calls as the file's data allows, each charged to the
 * snapshot's budget.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/core.h"
#include "reader_internal.h"

/* Values closer than this are read with one pread per slot. */
#define RUN_GAP 65536
/* What a system call on the values (pread, lseek) counts against the
 * budget, and what visiting a region of data does: a snapshot's work is
 * bounded by max_bytes, not only its reads and allocations. */
#define SYSCALL_CHARGE 4096
#define REGION_CHARGE 64

int pcpu__rd_cmp_ser_loc(const void *a, const void *b)
{
	const struct ser *x = *(const struct ser *const *)a, *y = *(const struct ser *const *)b;

	return (x->loc > y->loc) - (x->loc < y->loc);
}

/* Pairs (count, sum) of buckets [first, first + n) at v into w's
 * accumulators: a dense histogram's whole value (2.4), or one group of a
 * sparse one's (2.10). Returns the bucket counts added. */
static uint64_t add_pairs(struct ser *w, uint32_t first, uint32_t n, const unsigned char *v)
{
	uint64_t part = 0;
	uint32_t b;

	for (b = 0; b < n; b++) {
		uint64_t c = pcpu__rd_ld64(v + 16 * (size_t)b);

		w->counts[first + b] += c;
		w->acc0 += pcpu__rd_ld64(v + 16 * (size_t)b + 8);
		part += c;
	}
	return part;
}

/* 2.8: the pair after a histogram's buckets (a double per slot, then the
 * residue) at v into w's accumulators. */
static void add_double_pair(struct ser *w, const unsigned char *v, unsigned slot)
{
	uint64_t bits = pcpu__rd_ld64(v);
	double d;

	memcpy(&d, &bits, sizeof d);
	w->dslots[slot] += d; /* the slot's word, then its mirror's */
	w->acc2 += pcpu__rd_ld64(v + 8);
}

/* 2.10: a part of a sparse histogram (one group, or the double sum's
 * pair) into its whole; returns the bucket counts it added. */
static uint64_t accumulate_part(const struct ser *s, const unsigned char *v, unsigned slot)
{
	uint32_t n = s->fam->e->nbuckets - s->first;

	if (s->first == PCPU__RD_SUM_PAIR) {
		add_double_pair(s->whole, v, slot);
		return 0;
	}
	return add_pairs(s->whole, s->first, n < PCPU__SEG_SPARSE_GROUP ? n : PCPU__SEG_SPARSE_GROUP, v);
}

/* Adds one region's words of the series' value (at v) to its accumulators:
 * slot `slot`'s own words or its mirror's, both count the same. */
static void accumulate(struct ser *s, const unsigned char *v, unsigned slot, int per_slot)
{
	uint64_t part = 0;

	if (s->whole) {
		part = accumulate_part(s, v, slot);
		if (per_slot)
			s->whole->slots[slot] = (int64_t)pcpu__slot_sum((uint64_t)s->whole->slots[slot], part);
		return;
	}
	switch (s->fam->value) {
	case PCPU_VALUE_UNSIGNED:
	case PCPU_VALUE_SIGNED:
		part = pcpu__rd_ld64(v); /* a slot's value: its whole units */
		s->acc0 += part;
		if (s->fam->nanos)
			s->acc1 += pcpu__rd_ld64(v + 8);
		if (s->size == PCPU__SEG_FRACTION_SIZE) /* 2.8: the residue's bits */
			s->acc2 += pcpu__rd_ld64(v + 16);
		break;
	case PCPU_VALUE_BUCKETS: {
		uint32_t b, nb = s->fam->e->nbuckets;

		if (s->fam->pairs) { /* 2.4: (count, sum) per bucket */
			part = add_pairs(s, 0, nb, v);
			if (s->fam->wide) /* 2.8: a double per slot, then the residue */
				add_double_pair(s, v + 16 * (size_t)nb, slot);
			break;
		}
		s->acc0 += pcpu__rd_ld64(v); /* 2.0-2.3: [sum, bucket 0, ...] */
		for (b = 0; b < nb; b++) {
			uint64_t c = pcpu__rd_ld64(v + 8 * (1 + (size_t)b));
			s->counts[b] += c;
			part += c;
		}
		break;
	}
	}
	if (per_slot) /* a slot's value: its words plus its mirror's, modulo 2^64 */
		s->slots[slot] = (int64_t)pcpu__slot_sum((uint64_t)s->slots[slot], part);
}

#if PCPU__TORN64
/* The run copied twice more and settled (pcpu__rd_settle(), reader_input.c:
 * a copy made 32 bits at a time may be torn). buf holds 3 * len bytes. */
static int settle_run(struct parse *p, unsigned char *buf, size_t len, uint64_t off)
{
	int rc = pcpu__rd_settle(p->r, p->b, buf, buf + len, buf + 2 * len, len, off);

	if (rc < 0 && errno == EAGAIN)
		p->unsettled = 1;
	return rc;
}
#define RUN_COPIES 3
#else
#define RUN_COPIES 1
#endif

/* A run: values of one chunk closer than RUN_GAP to the next, read with one
 * pread per region that holds data there. Series v[first, last). */
struct run {
	uint64_t lo, hi;
	size_t first, last;
	size_t sum_at; /* where its words' sums begin in read_chunk()'s sum[] */
	int wide;      /* a series of a family with a double per slot among them */
};

/* First run of runs[from, n) that ends after x (runs are sorted and
 * disjoint), or n. */
static size_t run_after(const struct run *runs, size_t from, size_t n, uint64_t x)
{
	size_t lo = from, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (runs[mid].hi <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The values of one chunk's runs (sorted, disjoint), in every region that
 * holds data where they lie.
 *
 * Why not one SEEK_DATA per run per region, as before: a file may declare
 * 65,536 slots (131,072 regions per chunk) and hold a few pages; that made a
 * snapshot cost runs x 131,072 system calls, unbounded by max_bytes (issue
 * 10: 2,000 series took 41 s). Instead the chunk's data is found extent by
 * extent with SEEK_DATA and SEEK_HOLE, jumping over every region without
 * data in the window [lo of the first run, hi of the last) in one call, and
 * each run is read once per region where an extent meets it. The calls are
 * then a few per extent of real data, not per region, and every one of
 * them (and every region an extent covers) is charged to the budget, so a
 * snapshot's work is bounded by max_bytes whatever the file claims.
 *
 * With `sum` (no per-slot values asked for): the words of every region are
 * added into sum[] (each run's words at its sum_at, zeroed: as many words
 * as the runs hold, the gaps between them left out), and each series
 * reads its value from there once, after
 * the last region -- a series' words are sums modulo 2^64 over the
 * regions, so adding the words first gives the same value, for one pass
 * per series instead of one per region (issue 51: reading the values was
 * 40 % of a scrape of one segment of 10^5 series). A family with a double
 * per slot (`wide`) is the exception: its doubles are added per slot, so
 * such a series is still visited in every region. */
static int read_chunk(struct parse *p, struct ser **v, uint32_t chunk, const struct run *runs,
		      size_t nruns, unsigned char *buf, uint64_t *sum)
{
	const struct pcpu__seg_header *h = p->h;
	struct pcpu_reader *r = p->r;
	int per_slot = (p->flags & PCPU_READER_PER_SLOT) != 0;
	/* chunk < nchunks and data_offset + nchunks * chunk_span <= file size
	 * were checked, chunk_span = 2 * nslots * slot_stride and every run's
	 * hi <= slot_stride: no overflow below, and every region read, slot or
	 * mirror, lies inside the file. */
	uint64_t base = h->data_offset + (uint64_t)chunk * h->chunk_span;
	uint64_t end = base + h->chunk_span, stride = h->slot_stride;
	uint64_t wlo = runs[0].lo, whi = runs[nruns - 1].hi, pos = base + wlo;
	uint64_t nregions = 2 * (uint64_t)h->nslots, cur = UINT64_MAX;
	size_t next = 0;

	while (pos < end) {
		uint64_t d, hole, rg, rel;

		if (r->fd < 0) {
			d = pos; /* memory: all data */
			hole = end;
		} else {
			off_t x;

			if (pcpu__rd_charge(p->b, SYSCALL_CHARGE) < 0)
				return -1;
			__atomic_add_fetch(&r->nsyscalls, 1, __ATOMIC_RELAXED);
			x = lseek(r->fd, (off_t)pos, SEEK_DATA);
			if (x < 0 && errno == ENXIO)
				break; /* only holes from pos on */
			d = x < 0 ? pos : (uint64_t)x; /* cannot tell: read it */
			if (d >= end)
				break;
			hole = 0;
		}
		rg = (d - base) / stride;
		rel = (d - base) % stride;
		if (rel < wlo) { /* data before the window: look in the window */
			pos = base + rg * stride + wlo;
			continue;
		}
		if (rel >= whi) { /* after it: the next region's window */
			if (rg + 1 >= nregions)
				break;
			pos = base + (rg + 1) * stride + wlo;
			continue;
		}
		if (!hole) {
			off_t x;

			if (pcpu__rd_charge(p->b, SYSCALL_CHARGE) < 0)
				return -1;
			__atomic_add_fetch(&r->nsyscalls, 1, __ATOMIC_RELAXED);
			x = lseek(r->fd, (off_t)d, SEEK_HOLE);
			hole = x < 0 || (uint64_t)x > end ? end : (uint64_t)x;
			if (hole <= d)
				hole = d + 1; /* changed under us: at least progress */
		}
		/* The extent [d, hole): every region it meets, in order. */
		for (; rg < nregions && base + rg * stride < hole; rg++) {
			uint64_t rs = base + rg * stride;
			uint64_t x = (d > rs ? d : rs) - rs;
			uint64_t y = (hole < rs + stride ? hole : rs + stride) - rs;
			/* Regions nslots.. are the mirrors of slots 0..: same slot. */
			unsigned slot = pcpu__mirror_region_slot(rg, h->nslots);

			if (pcpu__rd_charge(p->b, REGION_CHARGE) < 0)
				return -1;
			if (rg != cur) {
				cur = rg;
				next = 0;
			}
			/* Runs wholly in a hole before x read as zero: skipped.
			 * Runs already read in this region: skipped too. */
			next = run_after(runs, next, nruns, x);
			for (; next < nruns && runs[next].lo < y; next++) {
				const struct run *u = &runs[next];
				size_t k;

				if (pcpu__rd_charge(p->b, u->hi - u->lo) < 0 || pcpu__rd_charge(p->b, SYSCALL_CHARGE) < 0 ||
				    pcpu__rd_read_exact(r, buf, (size_t)(u->hi - u->lo), rs + u->lo, "values") < 0)
					return -1;
#if PCPU__TORN64
				if (settle_run(p, buf, (size_t)(u->hi - u->lo), rs + u->lo) < 0)
					return -1;
#endif
				if (sum) { /* the words summed; the series at the end */
					uint64_t *t = sum + u->sum_at;
					size_t w, nw = (size_t)(u->hi - u->lo) / 8;

					for (w = 0; w < nw; w++)
						t[w] += pcpu__rd_ld64(buf + 8 * w);
					for (k = u->first; u->wide && k < u->last; k++)
						if (v[k]->fam->wide)
							accumulate(v[k], buf + (pcpu__rd_ser_off(v[k]) - u->lo), slot, 0);
					continue;
				}
				for (k = u->first; k < u->last; k++)
					accumulate(v[k], buf + (pcpu__rd_ser_off(v[k]) - u->lo), slot, per_slot);
			}
		}
		pos = hole;
	}
	if (sum) {
		size_t i, k;

		for (i = 0; i < nruns; i++)
			for (k = runs[i].first; k < runs[i].last; k++)
				if (!runs[i].wide || !v[k]->fam->wide) {
					v[k]->acc0 = v[k]->acc1 = v[k]->acc2 = 0;
					accumulate(v[k],
						   (const unsigned char *)(sum + runs[i].sum_at +
									   (pcpu__rd_ser_off(v[k]) - runs[i].lo) / 8),
						   0, 0);
				}
	}
	return 0;
}

/* What pcpu__rd_read_values() works out of a parse before it reads: the
 * series with storage in storage order, and their runs, chunk by chunk. It
 * depends on the parse alone, so it is kept with it (pcpu__rd_parse_free()
 * frees it): a kept directory read again (reader_snapshot.c's cache) then
 * reads only the values. Before, each read walked every series four times
 * to find the same runs again: most of a /metrics/SEGMENT scrape's reading
 * at 10^5 series, cache misses all. */
struct pcpu__rd_plan {
	struct ser **v;          /* the series read, sorted by location */
	size_t n;
	struct ser **wholes;     /* 2.10: sparse histograms (their parts are in v) */
	size_t nwholes;
	struct run *runs;        /* each chunk's, one chunk after the other */
	struct plan_chunk {
		uint32_t chunk;
		size_t first, nruns; /* its runs in runs[] */
		size_t words;        /* 8-byte words its runs hold */
	} *chunks;
	size_t nchunks;
	size_t bufcap;           /* the longest run's bytes */
	size_t sumcap;           /* the most words of one chunk */
	/* A series needs more than its sums zeroed before each read: a
	 * histogram's counts, a family's doubles, per-slot values. */
	int setup;
};

void pcpu__rd_plan_free(struct pcpu__rd_plan *pl)
{
	if (!pl)
		return;
	free(pl->v);
	free(pl->wholes);
	free(pl->runs);
	free(pl->chunks);
	free(pl);
}

/* Works out p->plan (charged to the budget once). 0, or -1 with no plan. */
static int make_plan(struct parse *p)
{
	struct pcpu__rd_plan *pl;
	struct ser **v;
	size_t n = 0, i, j, k, nruns = 0;
	int per_slot = (p->flags & PCPU_READER_PER_SLOT) != 0;

	pl = pcpu__rd_alloc(p->b, sizeof *pl);
	if (!pl)
		return -1;
	pl->setup = per_slot;
	pl->v = v = pcpu__rd_alloc(p->b, (uint64_t)(p->nsers + p->nparts + 1) * sizeof *v);
	pl->wholes = pcpu__rd_alloc(p->b, (uint64_t)(p->nsers ? p->nsers : 1) * sizeof *pl->wholes);
	if (!v || !pl->wholes)
		goto fail;
	for (i = 0; i < p->nsers; i++) {
		struct ser *s = &p->sers[i];

		if (!pcpu__rd_usable(s) || s->group)
			continue;
		if (s->fam->value == PCPU_VALUE_BUCKETS || s->fam->wide)
			pl->setup = 1;
		if (s->sparse)
			pl->wholes[pl->nwholes++] = s;
		else
			v[n++] = s;
	}
	for (i = 0; i < p->nparts; i++)
		if (pcpu__rd_usable(&p->parts[i]))
			v[n++] = &p->parts[i];
	pl->n = n;
	/* Storage is handed out in creation order, and so are entries, most
	 * of the time: a sorted list is not sorted again (n log n compares,
	 * most of a snapshot of an unchanged directory otherwise). */
	for (i = 1; i < n && pcpu__rd_cmp_ser_loc(&v[i - 1], &v[i]) <= 0; i++)
		;
	if (i < n)
		qsort(v, n, sizeof *v, pcpu__rd_cmp_ser_loc);
	pl->runs = pcpu__rd_alloc(p->b, (uint64_t)(n ? n : 1) * sizeof *pl->runs);
	pl->chunks = pcpu__rd_alloc(p->b, (uint64_t)(n ? n : 1) * sizeof *pl->chunks);
	if (!pl->runs || !pl->chunks)
		goto fail;
	for (i = 0; i < n; i = j) {
		struct plan_chunk *c = &pl->chunks[pl->nchunks++];

		c->chunk = pcpu__rd_ser_chunk(v[i]);
		c->first = nruns;
		/* The chunk's runs: values closer than RUN_GAP to the next. */
		for (j = i; j < n && pcpu__rd_ser_chunk(v[j]) == c->chunk; j = k) {
			uint64_t lo = pcpu__rd_ser_off(v[j]), hi = lo + v[j]->size;
			int wide = v[j]->fam->wide;
			struct run *u = &pl->runs[nruns++];

			for (k = j + 1; k < n && pcpu__rd_ser_chunk(v[k]) == c->chunk &&
				    pcpu__rd_ser_off(v[k]) <= hi + RUN_GAP;
			     k++) {
				if (pcpu__rd_ser_off(v[k]) + v[k]->size > hi)
					hi = pcpu__rd_ser_off(v[k]) + v[k]->size;
				wide |= v[k]->fam->wide;
			}
			u->lo = lo;
			u->hi = hi;
			u->first = j;
			u->last = k;
			u->wide = wide;
			u->sum_at = c->words;
			c->words += (size_t)(hi - lo) / 8; /* values are 8-byte words */
			if (hi - lo > pl->bufcap)
				pl->bufcap = (size_t)(hi - lo);
		}
		c->nruns = nruns - c->first;
		if (c->words > pl->sumcap)
			pl->sumcap = c->words;
	}
	p->plan = pl;
	return 0;
fail:
	pcpu__rd_plan_free(pl);
	return -1;
}

/* A series' accumulators, before its values are read. 0, or -1. */
static int setup(struct parse *p, struct ser *s)
{
	const struct pcpu__seg_header *h = p->h;

	if (s->whole)
		return 0;
	s->acc0 = 0; /* a parse read again (reader_snapshot.c's cache) */
	s->acc1 = 0;
	s->acc2 = 0;
	if (s->fam->value == PCPU_VALUE_BUCKETS) {
		s->counts = pcpu__rd_alloc(p->b, (uint64_t)s->fam->e->nbuckets * 8);
		if (!s->counts)
			return -1;
	}
	if (s->fam->wide && s->dslots) { /* the series' own, read again */
		if (pcpu__rd_charge(p->b, (uint64_t)h->nslots * sizeof *s->dslots) < 0)
			return -1;
		memset(s->dslots, 0, (size_t)h->nslots * sizeof *s->dslots);
	} else if (s->fam->wide) {
		s->dslots = pcpu__rd_alloc(p->b, (uint64_t)h->nslots * sizeof *s->dslots);
		if (!s->dslots)
			return -1;
	}
	if (p->flags & PCPU_READER_PER_SLOT) {
		s->slots = pcpu__rd_alloc(p->b, (uint64_t)h->nslots * 8);
		if (!s->slots)
			return -1;
	}
	return 0;
}

int pcpu__rd_read_values(struct parse *p)
{
	struct pcpu__rd_plan *pl;
	unsigned char *buf = NULL;
	uint64_t *sum = NULL;
	size_t i;
	int per_slot = (p->flags & PCPU_READER_PER_SLOT) != 0, rc = -1;

	if (!p->plan && make_plan(p) < 0)
		return -1;
	pl = p->plan;
	/* Without setup, each series' sums are zeroed where they are read
	 * (read_chunk()): a pass over every series fewer. A sparse
	 * histogram's parts are summed into it: it is set up, they are not. */
	for (i = 0; pl->setup && i < pl->n + pl->nwholes; i++)
		if (setup(p, i < pl->n ? pl->v[i] : pl->wholes[i - pl->n]) < 0)
			goto out;
	if (!pl->n)
		return 0;
	/* RUN_COPIES of a run (settle_run()), and the sums of a chunk's
	 * runs' words (read_chunk()). */
	if (pcpu__rd_charge(p->b, RUN_COPIES * (uint64_t)pl->bufcap) < 0 ||
	    (!per_slot && pcpu__rd_charge(p->b, (uint64_t)pl->sumcap * 8) < 0))
		goto out;
	buf = malloc(RUN_COPIES * pl->bufcap);
	if (!per_slot)
		sum = malloc(pl->sumcap * 8);
	if (!buf || (!per_slot && !sum)) {
		pcpu__seg_fail(ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < pl->nchunks; i++) {
		const struct plan_chunk *c = &pl->chunks[i];

		if (sum)
			memset(sum, 0, c->words * 8);
		if (read_chunk(p, pl->v, c->chunk, pl->runs + c->first, c->nruns, buf, sum) < 0)
			goto out;
	}
	rc = 0;
out:
	free(sum);
	free(buf);
	return rc;
}
