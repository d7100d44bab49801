/* SPDX-License-Identifier: MIT */
/*
 * OTLP delta temporality (`pcpustat push --temporality delta`): the
 * baseline each counter and histogram series' next delta is taken from.
 *
 * The segments hold cumulative values; a delta point carries the increase
 * since the last point the receiver ACKNOWLEDGED (a 2xx), and its
 * StartTimeUnixNano is that point's time. So the agent keeps two
 * baselines:
 *
 *   base     what the receiver has: per series, the values and the time of
 *            the last acknowledged point that carried it;
 *   pending  what the request being delivered will have given it once
 *            acknowledged: built while that request is encoded (the
 *            current cumulative values, the time of this push).
 *
 * delta_acked() makes pending the base; delta_discard() drops it (the
 * request failed, was refused, or was superseded by a newer collection),
 * and the next request's deltas are taken from the same base again: they
 * cover the whole gap, so no failed or dropped push loses a count.
 *
 * Identity. A series is known by a key: its segment's publication time,
 * its family's name, type and bucket count, and its label names and values
 * (pcpu_segment and pcpu_pid among them). A restarted writer -- another
 * pid, or the same pid (a container's pid 1) with a new segment -- has
 * another publication time, so its series are new series, never a
 * decrease of the old ones.
 *
 * Lookup without a hash table (the project keeps one, in the library).
 * The merged snapshot lists families by name, segments by name and pid,
 * and each segment's series in creation order (docs/segment-format.md: the
 * order is the writer's own, a series keeps its place, new series come
 * after): from one push to the next the series come in the same order but
 * for those added or removed. The base is kept in that order, and each
 * series is first compared with the entry after the previous match; only
 * on a mismatch is it looked up by binary search in an index of the base
 * sorted by key, built once per base when the first mismatch asks for it.
 * A steady state costs one key comparison per series; a push where series
 * came or went, one sort of the base.
 *
 * Decreases. A value below its base (a counter reset by the application,
 * pcpu_counter_fetch_and_zero(); a histogram bucket lower than before;
 * 2^64 wrap-around) is a reset: the delta is the current value (what was
 * counted since the reset), over [base's time, now]. The counts between the
 * last acknowledged point and the reset are lost, as they are for a
 * cumulative consumer; a delta is never negative or wrapped.
 *
 * Series that disappear (a segment not read this time: down, over the
 * byte budget, changing during the read) keep their base through
 * DELTA_ABSENT_MAX acknowledged pushes: when they come back, their delta
 * covers the time they were missing. Past that they are forgotten, and a
 * series that comes back then is a new one (its whole value is sent).
 *
 * New series (no base): the whole value, starting at the segment's
 * publication. Except at the first collection of an agent without a state
 * file: it does not know what an earlier agent sent, so every series
 * present then is only recorded as the base (no point is sent for it): the
 * counts made before that collection are not sent, and nothing is sent
 * twice. Series and segments appearing afterwards are sent whole.
 *
 * With a state file (--delta-state) the agent knows what was sent. The
 * file always exists once an agent used it, in one of two forms:
 *
 *   baseline  written by delta_save() when the agent exits: the
 *             acknowledged baseline. The next agent (delta_load())
 *             continues from it: its first deltas start where the old
 *             one's acknowledged points ended (nothing lost, nothing
 *             twice); a series it does not hold was never sent (or was
 *             forgotten, as above): it is sent whole.
 *   running   written by delta_mark() while an agent runs, before any
 *             request carrying a series of a new start time (a segment's
 *             publication) is sent: the start times whose series it may
 *             have sent. An agent that finds this form was preceded by
 *             one that did not exit cleanly (killed, crashed) and whose
 *             baseline is lost: a series of a start time listed there is
 *             recorded at first sight without a point (its counts up to
 *             then may have been sent: sending them again would count
 *             them twice; what was counted after the last acknowledged
 *             push of the lost agent is not sent); a series of any other
 *             start time was never sent: it is sent whole.
 *
 * No file at all: no agent ever sent anything for this file, so every
 * series is sent whole, the counts made before the first agent included.
 * Start times are carried over as long as one of their series is held, or
 * (those of a lost agent not seen again) through DELTA_ABSENT_MAX
 * acknowledged pushes, as a missing series' base is.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcpu/fraction.h>

#include "push.h"

/* Acknowledged pushes a missing series keeps its base through. */
#define DELTA_ABSENT_MAX 10

/* One series' baseline. */
struct delta_ent {
	size_t key_off;      /* its key in keys[] */
	uint32_t key_len;
	uint32_t absent;     /* acknowledged pushes it was missing from */
	uint64_t time_ns;    /* the time of its last point: the next delta's start */
	uint64_t whole;      /* counter: the value (whole units); histogram: the sum */
	int64_t nanos;       /* counter with fractions: the billionths */
	double residue;      /* counter with fractions, histogram: the residue */
	size_t counts_off;   /* histogram: nbuckets counts in counts[] */
	uint32_t nbuckets;   /* 0: a counter */
	uint32_t seen;       /* base: the collection that matched it last */
};

struct delta_set {
	struct delta_ent *ent;
	size_t n, cap;
	uint8_t *keys;
	size_t nkeys, capkeys;
	uint64_t *counts;
	size_t ncounts, capcounts;
	uint32_t *sorted; /* base: entries by key, or NULL until needed */
};

/* A start time the previous agent may have sent series of (a running
 * file's, or a baseline's start times none of whose series it holds). */
struct delta_start {
	uint64_t t;
	uint32_t absent; /* acknowledged pushes none of its series was in */
	uint32_t seen;   /* the collection that saw one last */
};

struct push_delta {
	struct delta_set base, pending;
	/* inherited start times, sorted (delta_load()) */
	struct delta_start *inh;
	size_t ninh;
	/* the start times the last running file listed, sorted; whether this
	 * collection has one it does not (delta_mark_needed()) */
	uint64_t *marked;
	size_t nmarked;
	int mark_needed;
	uint64_t last_checked; /* the last start time found in marked[] */
	int has_pending;
	int primed;       /* the first collection is done */
	int priming;      /* this collection only records the base */
	uint32_t gen;     /* collections so far */
	size_t cursor;    /* base entry after the last match */
	uint64_t now_ns;
	uint8_t *key;     /* the current series' key */
	size_t keycap;
	/* statistics for the log and the tests */
	unsigned long resets, news;
};

static void set_free(struct delta_set *s)
{
	free(s->ent);
	free(s->keys);
	free(s->counts);
	free(s->sorted);
	memset(s, 0, sizeof *s);
}

struct push_delta *delta_new(void)
{
	return calloc(1, sizeof(struct push_delta));
}

void delta_free(struct push_delta *d)
{
	if (!d)
		return;
	set_free(&d->base);
	set_free(&d->pending);
	free(d->inh);
	free(d->marked);
	free(d->key);
	free(d);
}

/* Sent as an increase: a type that only goes up (the type table's
 * PCPU_TYPE_MONOTONIC); a level (gauge) stays a level. */
static int delta_kind(const struct pcpu_snapshot_family *f)
{
	const struct pcpu_metric_type_info *t = pcpu_metric_type_info(f->type);

	return t && (t->flags & PCPU_TYPE_MONOTONIC);
}

/* Whether f's series hold bucket counts (f of a delta_kind() type). */
static int has_buckets(const struct pcpu_snapshot_family *f)
{
	return pcpu_metric_type_info(f->type)->value == PCPU_VALUE_BUCKETS;
}

/* The key's length: 8 (publication) + 1 (type) + 4 (nbuckets) + the name
 * and every label name and value, each NUL-terminated. */
static size_t key_len(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se)
{
	size_t n = 13 + strlen(f->name) + 1;
	unsigned k;

	for (k = 0; k < f->nlabels; k++)
		n += strlen(f->label_names[k]) + 1 + strlen(se->label_values[k]) + 1;
	return n;
}

static void key_write(uint8_t *p, const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
		      uint64_t created)
{
	uint32_t nb = (uint32_t)f->nbuckets;
	size_t l;
	unsigned k;

	memcpy(p, &created, 8);
	p[8] = (uint8_t)f->type;
	memcpy(p + 9, &nb, 4);
	p += 13;
	l = strlen(f->name) + 1;
	memcpy(p, f->name, l);
	p += l;
	for (k = 0; k < f->nlabels; k++) {
		l = strlen(f->label_names[k]) + 1;
		memcpy(p, f->label_names[k], l);
		p += l;
		l = strlen(se->label_values[k]) + 1;
		memcpy(p, se->label_values[k], l);
		p += l;
	}
}

static int key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? c : alen < blen ? -1 : alen > blen;
}

/* Room for n more entries, k more key bytes, c more counts: 0, or -1
 * (ENOMEM). Sized exactly by delta_begin() and delta_end(). */
static int reserve(struct delta_set *s, size_t n, size_t k, size_t c)
{
	if (s->n + n > s->cap) {
		struct delta_ent *e = realloc(s->ent, (s->n + n) * sizeof *e);

		if (!e)
			return -1;
		s->ent = e;
		s->cap = s->n + n;
	}
	if (s->nkeys + k > s->capkeys) {
		uint8_t *p = realloc(s->keys, s->nkeys + k);

		if (!p)
			return -1;
		s->keys = p;
		s->capkeys = s->nkeys + k;
	}
	if (s->ncounts + c > s->capcounts) {
		uint64_t *p = realloc(s->counts, (s->ncounts + c) * sizeof *p);

		if (!p)
			return -1;
		s->counts = p;
		s->capcounts = s->ncounts + c;
	}
	return 0;
}

int delta_begin(struct push_delta *d, const struct pcpu_snapshot *s, uint64_t now_ns)
{
	size_t n = 0, k = 0, c = 0, i, j;

	set_free(&d->pending);
	d->has_pending = 0;
	for (i = 0; i < s->nfamilies; i++) {
		const struct pcpu_snapshot_family *f = &s->families[i];

		if (!delta_kind(f))
			continue;
		n += f->nseries;
		for (j = 0; j < f->nseries; j++)
			k += key_len(f, &f->series[j]);
		if (has_buckets(f))
			c += f->nseries * f->nbuckets;
	}
	if (reserve(&d->pending, n, k, c) < 0) {
		errno = ENOMEM;
		return -1;
	}
	d->has_pending = 1;
	d->gen++;
	d->cursor = 0;
	d->now_ns = now_ns;
	d->priming = !d->primed;
	return 0;
}

static int cmp_sorted(const void *a, const void *b, void *arg)
{
	const struct delta_set *s = arg;
	const struct delta_ent *x = &s->ent[*(const uint32_t *)a], *y = &s->ent[*(const uint32_t *)b];

	return key_cmp(s->keys + x->key_off, x->key_len, s->keys + y->key_off, y->key_len);
}

/* The base entry with this key in *out (NULL: none): 0, or -1 (ENOMEM:
 * the index could not be built; the series must not read as new, which
 * would send its whole value again). */
static int lookup(struct push_delta *d, const uint8_t *key, size_t len, struct delta_ent **out)
{
	struct delta_set *b = &d->base;
	size_t lo = 0, hi, i;

	*out = NULL;
	if (d->cursor < b->n) {
		struct delta_ent *e = &b->ent[d->cursor];

		if (!key_cmp(b->keys + e->key_off, e->key_len, key, len)) {
			d->cursor++;
			*out = e;
			return 0;
		}
	}
	if (!b->n)
		return 0;
	if (!b->sorted) {
		if (!(b->sorted = malloc(b->n * sizeof *b->sorted)))
			return -1;
		for (i = 0; i < b->n; i++)
			b->sorted[i] = (uint32_t)i;
		qsort_r(b->sorted, b->n, sizeof *b->sorted, cmp_sorted, b);
	}
	hi = b->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct delta_ent *e = &b->ent[b->sorted[mid]];
		int c = key_cmp(b->keys + e->key_off, e->key_len, key, len);

		if (!c) {
			d->cursor = b->sorted[mid] + 1;
			*out = e;
			return 0;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The inherited start time t, or NULL. */
static struct delta_start *inherited(struct push_delta *d, uint64_t t)
{
	return d->ninh ? bsearch(&t, d->inh, d->ninh, sizeof *d->inh, cmp_u64) : NULL;
}

/* Notes whether start time t is in the last running file (one compare
 * for a series of the same segment as the one before). */
static void check_marked(struct push_delta *d, uint64_t t)
{
	if (t == d->last_checked && t)
		return;
	if (d->nmarked && bsearch(&t, d->marked, d->nmarked, sizeof *d->marked, cmp_u64)) {
		d->last_checked = t;
		return;
	}
	d->mark_needed = 1;
}

/* Whether the current values are below the base's: a reset. */
static int decreased(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
		     const struct delta_ent *e, const uint64_t *bc)
{
	size_t b;

	if (has_buckets(f)) {
		for (b = 0; b < f->nbuckets; b++)
			if (se->value.histogram.counts[b] < bc[b])
				return 1;
		return 0;
	}
	if (f->flags & PCPU_SNAPSHOT_NANOS) {
		__int128 now = (__int128)se->value.fixed.whole * 1000000000 + se->value.fixed.nanos;
		__int128 then = (__int128)e->whole * 1000000000 + e->nanos;

		if (se->value.fixed.residue != 0.0 || e->residue != 0.0) /* beyond the words */
			return pcpu_snapshot_value(f, se) <
			       pcpu_fraction_value(e->whole, e->nanos, e->residue, 0);
		return now < then;
	}
	return se->value.counter < e->whole;
}

int delta_series(struct push_delta *d, const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
		 uint64_t created, struct delta_point *out)
{
	struct delta_set *p = &d->pending;
	size_t len = key_len(f, se);
	struct delta_ent *b, *e;

	if (len > d->keycap) {
		uint8_t *k = realloc(d->key, len);

		if (!k)
			return -1;
		d->key = k;
		d->keycap = len;
	}
	key_write(d->key, f, se, created);
	if (lookup(d, d->key, len, &b) < 0)
		return -1;
	/* the pending entry: this push's values, at its time */
	e = &p->ent[p->n++];
	memset(e, 0, sizeof *e);
	e->key_off = p->nkeys;
	e->key_len = (uint32_t)len;
	memcpy(p->keys + p->nkeys, d->key, len);
	p->nkeys += len;
	e->time_ns = d->now_ns;
	if (has_buckets(f)) {
		e->nbuckets = (uint32_t)f->nbuckets;
		e->counts_off = p->ncounts;
		memcpy(p->counts + p->ncounts, se->value.histogram.counts, f->nbuckets * sizeof(uint64_t));
		p->ncounts += f->nbuckets;
		e->whole = (uint64_t)se->value.histogram.sum;
		e->residue = se->value.histogram.residue;
	} else if (f->flags & PCPU_SNAPSHOT_NANOS) {
		e->whole = se->value.fixed.whole;
		e->nanos = se->value.fixed.nanos;
		e->residue = se->value.fixed.residue;
	} else {
		e->whole = se->value.counter;
	}
	memset(out, 0, sizeof *out);
	check_marked(d, created);
	if (d->ninh) {
		struct delta_start *st = inherited(d, created);

		if (st)
			st->seen = d->gen;
		if (st && !b) {
			/* a lost agent's: recorded at first sight, not sent */
			out->skip = 1;
			return 0;
		}
	}
	if (d->priming) {
		out->skip = 1; /* recorded, not sent: the file comment */
		return 0;
	}
	out->start_ns = created;
	if (!b) {
		d->news++;
		return 0; /* new: the whole value */
	}
	b->seen = d->gen;
	out->start_ns = b->time_ns;
	if (decreased(f, se, b, d->base.counts + b->counts_off)) {
		d->resets++;
		return 0; /* a reset: what was counted since, over [base's time, now] */
	}
	out->base = 1;
	out->whole = b->whole;
	out->nanos = b->nanos;
	out->residue = b->residue;
	out->counts = has_buckets(f) ? d->base.counts + b->counts_off : NULL;
	return 0;
}

int delta_end(struct push_delta *d)
{
	struct delta_set *b = &d->base, *p = &d->pending;
	size_t m = 0, k = 0, c = 0, i;

	if (d->priming) {
		/* the first collection: its values are the base at once (the
		 * request carried no point for them) */
		set_free(b);
		*b = *p;
		memset(p, 0, sizeof *p);
		d->has_pending = 0;
		d->primed = 1;
		d->priming = 0;
		return 0;
	}
	/* the base entries this collection did not see, carried over */
	for (i = 0; i < b->n; i++)
		if (b->ent[i].seen != d->gen && b->ent[i].absent < DELTA_ABSENT_MAX) {
			m++;
			k += b->ent[i].key_len;
			c += b->ent[i].nbuckets;
		}
	if (!m)
		return 0;
	if (reserve(p, m, k, c) < 0) {
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < b->n; i++) {
		const struct delta_ent *o = &b->ent[i];
		struct delta_ent *e;

		if (o->seen == d->gen || o->absent >= DELTA_ABSENT_MAX)
			continue;
		e = &p->ent[p->n++];
		*e = *o;
		e->seen = 0;
		e->absent = o->absent + 1;
		e->key_off = p->nkeys;
		memcpy(p->keys + p->nkeys, b->keys + o->key_off, o->key_len);
		p->nkeys += o->key_len;
		e->counts_off = p->ncounts;
		memcpy(p->counts + p->ncounts, b->counts + o->counts_off, o->nbuckets * sizeof(uint64_t));
		p->ncounts += o->nbuckets;
	}
	return 0;
}

void delta_acked(struct push_delta *d)
{
	size_t i, k = 0;

	if (!d->has_pending)
		return;
	/* inherited start times none of whose series came back are forgotten
	 * as a missing series' base is */
	for (i = 0; i < d->ninh; i++) {
		if (d->inh[i].seen != d->gen)
			d->inh[i].absent++;
		if (d->inh[i].absent <= DELTA_ABSENT_MAX)
			d->inh[k++] = d->inh[i];
	}
	d->ninh = k;
	set_free(&d->base);
	d->base = d->pending;
	memset(&d->pending, 0, sizeof d->pending);
	d->has_pending = 0;
}

void delta_discard(struct push_delta *d)
{
	set_free(&d->pending);
	d->has_pending = 0;
}

size_t delta_series_kept(const struct push_delta *d)
{
	return d->base.n;
}

void delta_no_priming(struct push_delta *d)
{
	d->primed = 1;
}

int delta_mark_needed(const struct push_delta *d)
{
	return d->mark_needed;
}

/* A series' start time: the first 8 bytes of its key (key_write()). */
static uint64_t ent_start(const struct delta_set *s, const struct delta_ent *e)
{
	uint64_t t;

	memcpy(&t, s->keys + e->key_off, 8);
	return t;
}

/* The start times the agent may have sent series of, sorted and distinct,
 * in a malloc'd array (*n of them; NULL when 0): the inherited ones, the
 * base's and, with `pending`, the request in flight's. 0, or -1 (ENOMEM). */
static int known_starts(const struct push_delta *d, int pending, uint64_t **out, size_t *n)
{
	size_t cap = d->ninh + d->base.n + (pending ? d->pending.n : 0), k = 0, i, j;
	uint64_t *t = cap ? malloc(cap * sizeof *t) : NULL;

	*out = NULL;
	*n = 0;
	if (cap && !t)
		return -1;
	for (i = 0; i < d->ninh; i++)
		t[k++] = d->inh[i].t;
	for (i = 0; i < d->base.n; i++)
		t[k++] = ent_start(&d->base, &d->base.ent[i]);
	for (i = 0; pending && i < d->pending.n; i++)
		t[k++] = ent_start(&d->pending, &d->pending.ent[i]);
	if (k)
		qsort(t, k, sizeof *t, cmp_u64);
	for (i = j = 0; i < k; i++)
		if (!j || t[j - 1] != t[i])
			t[j++] = t[i];
	*out = t;
	*n = j;
	return 0;
}

/* The state file: this header, then the entries, the key bytes, the
 * counts as the agent holds them, and the start times (the same program
 * reads them back: native byte order and layout, checked by the sizes in
 * the header). Version 4: the start times and the running form (3 had
 * them) and each entry's residue, a value beyond the integer words (2 had
 * it, without the start times); a file of an earlier version is not read
 * (said as such, and the agent starts over). */
struct delta_file {
	char magic[8];            /* "PCPUDLT\4" */
	uint32_t ent_size;        /* sizeof(struct delta_ent) */
	uint32_t flags;           /* DELTA_FILE_RUNNING: the running form */
	uint64_t n, nkeys, ncounts;
	uint64_t nstarts;
};
#define DELTA_FILE_RUNNING 1u
#define DELTA_FILE_VERSION 4
static const char delta_magic[8] = { 'P', 'C', 'P', 'U', 'D', 'L', 'T', DELTA_FILE_VERSION };

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Writes a state file: the baseline b (NULL: none, the running form) and
 * the start times. */
static int write_state(const struct delta_set *b, uint32_t flags, const uint64_t *starts, size_t nstarts,
		       const char *path, char *err, size_t cap)
{
	static const struct delta_set none;
	struct delta_file h;
	char tmp[4096];
	int fd, saved;

	if (!b)
		b = &none;
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
		snprintf(err, cap, "%s: name too long", path);
		errno = ENAMETOOLONG;
		return -1;
	}
	memset(&h, 0, sizeof h);
	memcpy(h.magic, delta_magic, sizeof h.magic);
	h.ent_size = sizeof(struct delta_ent);
	h.flags = flags;
	h.n = b->n;
	h.nkeys = b->nkeys;
	h.ncounts = b->ncounts;
	h.nstarts = nstarts;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		goto fail;
	if (write_all(fd, &h, sizeof h) < 0 || write_all(fd, b->ent, b->n * sizeof *b->ent) < 0 ||
	    write_all(fd, b->keys, b->nkeys) < 0 || write_all(fd, b->counts, b->ncounts * sizeof *b->counts) < 0 ||
	    write_all(fd, starts, nstarts * sizeof *starts) < 0 || fsync(fd) < 0) {
		saved = errno;
		close(fd);
		unlink(tmp);
		errno = saved;
		goto fail;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		saved = errno;
		unlink(tmp);
		errno = saved;
		goto fail;
	}
	return 0;
fail:
	snprintf(err, cap, "%s: %s", path, strerror(errno));
	return -1;
}

int delta_save(const struct push_delta *d, const char *path, char *err, size_t cap)
{
	uint64_t *t;
	size_t n;
	int rc;

	/* the in-flight request's start times are not carried: as its
	 * values, they were not acknowledged (the file comment) */
	if (known_starts(d, 0, &t, &n) < 0) {
		snprintf(err, cap, "%s: out of memory", path);
		errno = ENOMEM;
		return -1;
	}
	rc = write_state(&d->base, 0, t, n, path, err, cap);
	free(t);
	return rc;
}

int delta_mark(struct push_delta *d, const char *path, char *err, size_t cap)
{
	uint64_t *t;
	size_t n;

	if (known_starts(d, 1, &t, &n) < 0) {
		snprintf(err, cap, "%s: out of memory", path);
		errno = ENOMEM;
		return -1;
	}
	if (write_state(NULL, DELTA_FILE_RUNNING, t, n, path, err, cap) < 0) {
		free(t);
		return -1;
	}
	free(d->marked);
	d->marked = t;
	d->nmarked = n;
	d->mark_needed = 0;
	d->last_checked = 0;
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

int delta_load(struct push_delta *d, const char *path, char *err, size_t cap)
{
	struct delta_set s;
	struct delta_file h;
	struct delta_start *inh = NULL;
	uint64_t *t = NULL, *bt = NULL, prev = 0;
	size_t i, k = 0;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, cap, "%s: %s", path, strerror(errno));
		return -1;
	}
	memset(&s, 0, sizeof s);
	memset(&h, 0, sizeof h);
	/* sizes checked against the file's before anything is allocated */
	if (fstat(fd, &st) < 0 || read_all(fd, h.magic, sizeof h.magic) < 0)
		goto corrupt;
	if (memcmp(h.magic, delta_magic, 7) == 0 && h.magic[7] >= 1 && h.magic[7] < DELTA_FILE_VERSION) {
		/* An earlier pcpustat's: its entries lack what this one keeps
		 * (start times before 3, residues before 4). */
		close(fd);
		snprintf(err, cap, "%s: a state file of an earlier pcpustat (version %d; this one reads version %d)",
			 path, h.magic[7], DELTA_FILE_VERSION);
		errno = EBADMSG;
		return -1;
	}
	if (memcmp(h.magic, delta_magic, 8) != 0 ||
	    read_all(fd, (char *)&h + sizeof h.magic, sizeof h - sizeof h.magic) < 0)
		goto corrupt;
	if (h.ent_size != sizeof(struct delta_ent) || (h.flags & ~DELTA_FILE_RUNNING) || h.n > UINT32_MAX ||
	    h.nkeys > (uint64_t)st.st_size || h.ncounts > (uint64_t)st.st_size / sizeof(uint64_t) ||
	    h.nstarts > (uint64_t)st.st_size / sizeof(uint64_t) ||
	    (uint64_t)st.st_size != sizeof h + h.n * sizeof(struct delta_ent) + h.nkeys + h.ncounts * sizeof(uint64_t) +
					    h.nstarts * sizeof(uint64_t))
		goto corrupt;
	if (reserve(&s, (size_t)h.n, (size_t)h.nkeys, (size_t)h.ncounts) < 0 ||
	    (h.nstarts && (!(t = malloc((size_t)h.nstarts * sizeof *t)) ||
			   !(inh = calloc((size_t)h.nstarts, sizeof *inh))))) {
		snprintf(err, cap, "%s: out of memory", path);
		close(fd);
		set_free(&s);
		free(t);
		free(inh);
		return -1;
	}
	if (read_all(fd, s.ent, (size_t)h.n * sizeof *s.ent) < 0 || read_all(fd, s.keys, (size_t)h.nkeys) < 0 ||
	    read_all(fd, s.counts, (size_t)h.ncounts * sizeof *s.counts) < 0 ||
	    read_all(fd, t, (size_t)h.nstarts * sizeof *t) < 0)
		goto corrupt;
	s.n = (size_t)h.n;
	s.nkeys = (size_t)h.nkeys;
	s.ncounts = (size_t)h.ncounts;
	for (i = 0; i < s.n; i++) {
		struct delta_ent *e = &s.ent[i];

		if (e->key_off > s.nkeys || e->key_len > s.nkeys - e->key_off || e->key_len < 13 ||
		    e->counts_off > s.ncounts || e->nbuckets > s.ncounts - e->counts_off)
			goto corrupt;
		e->seen = 0;
	}
	if ((h.flags & DELTA_FILE_RUNNING) && s.n)
		goto corrupt; /* the running form holds no baseline */
	/* Inherited: the start times none of whose series the baseline holds
	 * (the running form: all of them). Sorted and distinct, as written. */
	if (h.nstarts && s.n) {
		if (!(bt = malloc(s.n * sizeof *bt))) {
			snprintf(err, cap, "%s: out of memory", path);
			close(fd);
			set_free(&s);
			free(t);
			free(inh);
			return -1;
		}
		for (i = 0; i < s.n; i++)
			bt[i] = ent_start(&s, &s.ent[i]);
		qsort(bt, s.n, sizeof *bt, cmp_u64);
	}
	for (i = 0; i < (size_t)h.nstarts; i++) {
		if (i && t[i] <= prev)
			goto corrupt;
		prev = t[i];
		if (!bt || !bsearch(&t[i], bt, s.n, sizeof *bt, cmp_u64))
			inh[k++].t = t[i];
	}
	close(fd);
	free(t);
	free(bt);
	set_free(&d->base);
	d->base = s;
	free(d->inh);
	d->inh = inh;
	d->ninh = k;
	d->primed = 1; /* the previous agent's acknowledged points go on */
	return h.flags & DELTA_FILE_RUNNING ? 2 : 1;
corrupt:
	close(fd);
	set_free(&s);
	free(t);
	free(bt);
	free(inh);
	snprintf(err, cap, "%s: not a state file of this pcpustat (or truncated)", path);
	errno = EBADMSG;
	return -1;
}
