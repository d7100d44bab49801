/* SPDX-License-Identifier: MIT */
/*
 * Histograms: one per-CPU array of (count, sum) pairs per histogram, a pair
 * per bucket, so recording is one critical section on the caller's slot
 * that adds to both words of one pair with one store, and nothing is merged
 * until a read walks the slots (pcpu/histogram.h has the layout and the
 * recording path; this file creates, reads and resets them: sparse groups in
 * histogram_sparse.c, quantiles in histogram_quantile.c).
 *
 * Why a sum per bucket rather than one sum word: a bucket's count and a
 * single sum word are apart in memory, so they would need two commits (two
 * critical sections, measured at 2.3-2.4 times one counter add before any
 * bucket search); a pair is adjacent and one 16-byte store commits both.
 * The cost is 8 more bytes per bucket per slot that records.
 *
 * Why no separate count word: count = sum of buckets makes "count equals the
 * number of values recorded" true of every read, not only of quiescent ones.
 *
 * Log-linear buckets: the arithmetic is histogram_layout.c's, shared with
 * the segment reader.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/histogram.h>
#include <pcpu/fraction.h>

#include "hashtab.h"
#include "histogram_layout.h"
#include "stats_internal.h"
#include "metrics.h"
#include "../core/core.h"

_Static_assert(PCPU__LOGLINEAR_MAX_BITS == PCPU_HISTOGRAM_MAX_BITS,
	       "histogram_layout.h and pcpu/histogram.h disagree on the largest precision");

static int layout_error(const char *msg)
{
	pcpu__set_error(msg);
	errno = EINVAL;
	return -1;
}

unsigned pcpu__histogram_export_lg(const struct pcpu_histogram_layout *l)
{
	unsigned m = l->export_per_octave ? l->export_per_octave : PCPU_HISTOGRAM_EXPORT_DEFAULT;
	unsigned lg = (unsigned)__builtin_ctz(m);
	/* No more than the buckets per power of two: 2^p, or 2^schema. */
	unsigned max = l->scheme == PCPU_HISTOGRAM_EXPONENTIAL ? (l->schema > 0 ? (unsigned)l->schema : 0)
							       : l->precision_bits;

	return lg < max ? lg : max;
}

static int export_per_octave_valid(const struct pcpu_histogram_layout *l)
{
	return l->export_per_octave <= PCPU_HISTOGRAM_EXPORT_MAX &&
	       !(l->export_per_octave & (l->export_per_octave - 1));
}

/* ---- exponential (native) buckets ---- */

/* sqrt(x) for x in [1, 2] by Newton's method: the library needs only libc. */
static double sqrt12(double x)
{
	double y = 1.25;
	int i;

	for (i = 0; i < 8; i++)
		y = 0.5 * (y + x / y);
	return y;
}

/* 2^e for -1022 <= e <= 1023, exactly. */
static double pow2i(int e)
{
	union {
		double d;
		uint64_t u;
	} x;

	x.u = (uint64_t)(1023 + e) << 52;
	return x.d;
}

/* The native bucket boundaries base^i = 2^(i * 2^-schema), to a few ulps:
 * 2^floor times a product of at most 8 nested square roots of 2. */
struct expo {
	int schema;
	double root[8]; /* root[j] = 2^(2^j / 2^schema), j < schema */
	double p10;     /* 10^|scale| */
	int scale;
};

static void expo_init(struct expo *x, int schema, int scale)
{
	int j, k;

	x->schema = schema;
	x->scale = scale;
	for (j = 0; j < schema; j++) {
		double r = 2.0;

		for (k = 0; k < schema - j; k++)
			r = sqrt12(r);
		x->root[j] = r;
	}
	x->p10 = 1;
	for (k = 0; k < (scale < 0 ? -scale : scale); k++)
		x->p10 *= 10; /* exact up to 10^22 */
}

/* The largest integer v with v * 10^scale <= base^i; INT64_MAX when every
 * int64 is. */
static double expo_base(const struct expo *x, int64_t i)
{
	double b;

	if (x->schema <= 0) {
		b = pow2i((int)(i * ((int64_t)1 << -x->schema)));
	} else {
		int64_t per = (int64_t)1 << x->schema;
		int64_t e = i >= 0 ? i / per : -((-i + per - 1) / per); /* floor(i / per) */
		unsigned k = (unsigned)(i - e * per), j;

		b = pow2i((int)e);
		for (j = 0; k; j++, k >>= 1)
			if (k & 1)
				b *= x->root[j];
	}
	return b;
}

double pcpu__native_bound(int schema, int32_t i)
{
	struct expo x;

	expo_init(&x, schema, 0);
	return expo_base(&x, i);
}

/*
 * The native form: the protobuf exposition (expose_protobuf.c) and
 * pcpustat push's remote write and OTLP encoders (tools/push_rw.c,
 * push_otlp.c) all send it, and all must agree on the span and threshold
 * -- a scrape and a push of the same histogram are the same histogram to
 * the receiver -- so it is computed here only, beside the bucket boundaries. One span from the first
 * non-empty positive bucket to the last: pcpu's buckets are contiguous
 * native indices, so the empty buckets in between cost a zero delta each,
 * cheaper to encode than a span boundary per gap for the dense histograms
 * a latency records.
 */
int pcpu_snapshot_native(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s,
			 struct pcpu_snapshot_native *out, int64_t *deltas, size_t cap)
{
	const uint64_t *c;
	size_t lo = 1, hi, b; /* [lo, hi): the span, in f's buckets */
	uint64_t n = 0;
	int64_t prev = 0;

	if (!f || !s || !out || !pcpu__has_buckets(f->type) || !(f->flags & PCPU_SNAPSHOT_NATIVE) ||
	    f->nbuckets < 2 || !(c = s->value.histogram.counts)) {
		errno = EINVAL;
		return -1;
	}
	hi = f->nbuckets - 1; /* +Inf: always empty, never in the span */
	for (b = 0; b < f->nbuckets; b++)
		n += c[b];
	while (lo < hi && !c[lo])
		lo++;
	while (hi > lo && !c[hi - 1])
		hi--;
	out->schema = f->native_schema;
	out->zero_threshold = pcpu__native_bound(f->native_schema, f->native_index - 1);
	out->zero_count = c[0];
	out->count = n;
	out->first = lo < hi ? lo : 0;
	out->offset = lo < hi ? f->native_index + (int32_t)(lo - 1) : 0;
	out->length = (uint32_t)(hi - lo);
	for (b = lo; deltas && b < hi && b - lo < cap; b++) {
		deltas[b - lo] = (int64_t)(c[b] - (uint64_t)prev);
		prev = (int64_t)c[b];
	}
	return 0;
}

static int64_t expo_upper(const struct expo *x, int64_t i)
{
	double b = expo_base(x, i), v;

	v = x->scale < 0 ? b * x->p10 : b / x->p10;
	return v >= 0x1p63 ? INT64_MAX : (int64_t)v;
}

/*
 * An exponential layout's bounds: out[0] the zero bucket's (values up to
 * it), then one per native bucket, strictly increasing, the last INT64_MAX.
 * Native bucket indices whose range holds no integer (or only the previous
 * bucket's) are folded into the zero bucket, so the zero bucket ends at
 * base^zi and *first = zi + 1 is the native index of out[1]. With out NULL
 * only counts. Returns the number of bounds, 0 if more than `max`.
 */
size_t pcpu__exponential_bounds(int schema, int scale, int64_t *out, size_t max, int32_t *first)
{
	struct expo x;
	double per = schema >= 0 ? (double)(1 << schema) : 1.0 / (double)(1 << -schema);
	/* Below here, base^i * 10^-scale < 1 (log2(10) = 3.3219...). */
	int64_t i = (int64_t)((double)scale * 3.3219280948873623 * per) - 2, zi, hi;
	int64_t prev = -1, u;

	expo_init(&x, schema, scale);
	zi = i;
	for (;; i++) {
		u = expo_upper(&x, i);
		if (u <= prev || u == 0)
			zi = i; /* no integer of its own: the zero bucket's */
		prev = u;
		if (u == INT64_MAX)
			break;
	}
	hi = i;
	if ((uint64_t)(hi - zi + 1) > max)
		return 0;
	if (first)
		*first = (int32_t)(zi + 1);
	if (out)
		for (i = zi; i <= hi; i++)
			out[i - zi] = expo_upper(&x, i);
	return (size_t)(hi - zi + 1);
}

/*
 * The lookup table of an exponential histogram, after its padded bounds
 * (pcpu/histogram.h, pcpu_histogram_bucket_of()): the values are cut into
 * log-linear fine buckets of precision p (a count-leading-zeros away), and
 * for each fine bucket the table holds the bucket of its smallest value
 * and that bucket's bound -- one compare then decides between it and the
 * next. That needs at most one bound inside each fine bucket: p starts
 * finer than the native buckets (schema + 2) and grows until it holds,
 * up to 8 (at most 14 KiB... 150 KiB per layout); past that, no table
 * (0) and the bucket is found by the binary search. expo_table_bits()
 * finds p, expo_fill_table() writes the table at `tb`.
 */
static void expo_fine_range(size_t f, unsigned p, uint64_t *lo, uint64_t *hi)
{
	uint64_t g = f >> p, j = f & (((uint64_t)1 << p) - 1);

	if (g == 0) {
		*lo = *hi = j;
	} else {
		*lo = (((uint64_t)1 << p) + j) << (g - 1);
		*hi = *lo + ((uint64_t)1 << (g - 1)) - 1;
	}
	if (*hi > (uint64_t)INT64_MAX)
		*hi = (uint64_t)INT64_MAX;
}

static unsigned expo_table_bits(const int64_t *bounds, size_t nb, int schema)
{
	unsigned p;

	for (p = schema > 0 ? (unsigned)schema + 2 : 2; p <= 8; p++) {
		size_t nfine = (size_t)(64 - p) << p, f;

		for (f = 0; f < nfine; f++) {
			uint64_t lo, hi;
			size_t b;

			expo_fine_range(f, p, &lo, &hi);
			b = pcpu__histogram_search(bounds, nb, (int64_t)lo);
			if (b + 1 < nb && (int64_t)hi > bounds[b + 1])
				break; /* two bounds inside: finer */
		}
		if (f == nfine)
			return p;
	}
	return 0;
}

static void expo_fill_table(const int64_t *bounds, size_t nb, unsigned p, int64_t *tb)
{
	size_t nfine = (size_t)(64 - p) << p, f;
	uint16_t *ti = (uint16_t *)(tb + nfine);

	for (f = 0; f < nfine; f++) {
		uint64_t lo, hi;
		size_t b;

		expo_fine_range(f, p, &lo, &hi);
		b = pcpu__histogram_search(bounds, nb, (int64_t)lo);
		ti[f] = (uint16_t)b;
		tb[f] = b < nb ? bounds[b] : INT64_MAX;
	}
}

/*
 * A layout's read-only tables, one copy per process for all the
 * histograms of that layout: an explicit layout's bounds, padded as the
 * search needs, or an exponential layout's bounds and lookup table. They
 * depend on the layout alone (an explicit layout's bounds; an exponential
 * one's schema and scale), not on the histogram, and an exponential
 * layout's take up to 150 KiB: copied per histogram, they were most of the
 * heap a histogram series cost (22.8 KB for schema 3 in nanoseconds, 82
 * bytes once shared: bench/stats_bench.c --heap, bench/stats.md). A
 * histogram's pcpu__bounds points into its layout's `words`, so the
 * inline record path reads them as it read a private copy.
 *
 * Kept in the library's one hash table (hashtab.h), keyed by the layout,
 * under `tables_lock`, with a count of the histograms that use each: the
 * last histogram's destruction frees it. The lock is a leaf: nothing else
 * is taken under it, and it is taken under a registry's lock and a tree
 * zone's (a series made by pcpu__histogram_create_at()). Building a
 * table (up to 150 KiB of searches) happens outside it; two threads that
 * build the same layout at once keep the first and free the second.
 * fork(): the lock is held across it (fork.c), and the child keeps the
 * tables its histograms point to.
 */
struct layout_tables {
	uint64_t hash;
	size_t users;          /* histograms pointing here; under tables_lock */
	int scheme, schema, scale;
	uint32_t nbounds, bits; /* bits: the exponential table's p, 0 for none */
	/* The bounds, padded with INT64_MAX to at least PCPU__HISTOGRAM_SMALL,
	 * then the lookup table. From a cache line of their own: `users`
	 * changes as histograms come and go, on any CPU, and every record
	 * reads these; and the 16 bounds a small explicit layout searches
	 * span two lines, not three. */
	_Alignas(64) int64_t words[];
};

/* A layout as tables are keyed: the scheme's parameters that the tables
 * depend on. */
struct layout_key {
	int scheme, schema, scale;
	size_t nbounds;
	const int64_t *bounds; /* explicit */
};

static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pcpu__htab tables; /* struct layout_tables *, by layout */
static int tables_fork_registered;

static void tables_fork_prepare(void)
{
	pthread_mutex_lock(&tables_lock);
}

static void tables_fork_release(void)
{
	pthread_mutex_unlock(&tables_lock);
}

void pcpu__histogram_tables_fork_register(void)
{
	/* On failure (no pthread_atfork at load time) the tables still
	 * work; a fork() while another thread holds the lock would leave it
	 * held in the child, as the stats zone's (stats_zone.c). */
	(void)pcpu__fork_register(&tables_fork_registered, PCPU_FORK_STATS, tables_fork_prepare,
				  tables_fork_release, tables_fork_release);
}

static uint64_t key_hash(const struct layout_key *k)
{
	uint64_t h = PCPU__HASH_INIT;

	h = pcpu__hash_bytes(h, &k->scheme, sizeof k->scheme);
	if (k->scheme == PCPU_HISTOGRAM_EXPLICIT)
		return pcpu__hash_bytes(h, k->bounds, k->nbounds * sizeof *k->bounds);
	h = pcpu__hash_bytes(h, &k->schema, sizeof k->schema);
	return pcpu__hash_bytes(h, &k->scale, sizeof k->scale);
}

static int key_eq(const struct pcpu__hslot *s, const void *ctx)
{
	const struct layout_tables *t = (const struct layout_tables *)s->key;
	const struct layout_key *k = ctx;

	if (t->scheme != k->scheme)
		return 0;
	if (k->scheme == PCPU_HISTOGRAM_EXPLICIT)
		return t->nbounds == k->nbounds &&
		       !memcmp(t->words, k->bounds, k->nbounds * sizeof *k->bounds);
	return t->schema == k->schema && t->scale == k->scale;
}

/* New tables for layout k of nb bounds (its users 0), or NULL (ENOMEM). */
static struct layout_tables *tables_build(const struct layout_key *k, size_t nb, uint64_t hash)
{
	size_t cap = nb < PCPU__HISTOGRAM_SMALL ? PCPU__HISTOGRAM_SMALL : nb, i, size;
	int64_t *bounds = malloc(cap * sizeof *bounds);
	struct layout_tables *t;
	void *mem;
	unsigned bits = 0;

	if (!bounds)
		return NULL;
	if (k->scheme == PCPU_HISTOGRAM_EXPLICIT)
		memcpy(bounds, k->bounds, nb * sizeof *bounds);
	else
		pcpu__exponential_bounds(k->schema, k->scale, bounds, nb, NULL);
	for (i = nb; i < cap; i++)
		bounds[i] = INT64_MAX; /* pcpu__histogram_search16() counts none */
	size = sizeof *t + cap * sizeof *bounds;
	if (k->scheme == PCPU_HISTOGRAM_EXPONENTIAL && (bits = expo_table_bits(bounds, nb, k->schema)))
		size += ((size_t)(64 - bits) << bits) * (sizeof(int64_t) + sizeof(uint16_t));
	if (posix_memalign(&mem, _Alignof(struct layout_tables), size) != 0) {
		free(bounds);
		return NULL;
	}
	t = mem;
	t->hash = hash;
	t->users = 0;
	t->scheme = k->scheme;
	t->schema = k->schema;
	t->scale = k->scale;
	t->nbounds = (uint32_t)nb;
	t->bits = bits;
	memcpy(t->words, bounds, cap * sizeof *bounds);
	free(bounds);
	if (bits)
		expo_fill_table(t->words, nb, bits, t->words + cap);
	return t;
}

/* The tables of layout l (nb bounds), shared: one more user. NULL with
 * errno ENOMEM. */
static struct layout_tables *tables_get(const struct pcpu_histogram_layout *l, size_t nb)
{
	struct layout_key k = { .scheme = (int)l->scheme, .nbounds = nb };
	struct layout_tables *t, *mine;
	struct pcpu__hslot *s;
	uint64_t hash;
	int added;

	if (l->scheme == PCPU_HISTOGRAM_EXPLICIT) {
		k.bounds = l->bounds;
	} else {
		k.schema = l->schema;
		k.scale = l->scale_exp10;
	}
	hash = key_hash(&k);
	pthread_mutex_lock(&tables_lock);
	s = pcpu__htab_find(&tables, hash, key_eq, &k);
	if (s) {
		t = (struct layout_tables *)s->key;
		t->users++;
		pthread_mutex_unlock(&tables_lock);
		return t;
	}
	pthread_mutex_unlock(&tables_lock);
	if (!(mine = tables_build(&k, nb, hash))) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&tables_lock);
	s = pcpu__htab_find_or_add(&tables, hash, key_eq, &k, (uintptr_t)mine, 0, &added);
	t = s ? (struct layout_tables *)s->key : NULL;
	if (t)
		t->users++;
	pthread_mutex_unlock(&tables_lock);
	if (t != mine)
		free(mine); /* another thread's came first, or no room */
	if (!t)
		errno = ENOMEM;
	return t;
}

/* One user fewer of the tables whose words are at `words`: the last one
 * frees them. */
static void tables_put(const int64_t *words)
{
	struct layout_tables *t =
		(struct layout_tables *)((char *)(uintptr_t)words - offsetof(struct layout_tables, words));
	int last;

	pthread_mutex_lock(&tables_lock);
	last = --t->users == 0;
	if (last) {
		pcpu__htab_remove(&tables, pcpu__htab_find_key(&tables, t->hash, (uintptr_t)t));
		if (!tables.used)
			pcpu__htab_free(&tables); /* no slots kept by a process without histograms */
	}
	pthread_mutex_unlock(&tables_lock);
	if (last)
		free(t);
}

int pcpu__histogram_layout_check(const struct pcpu_histogram_layout *l, size_t *nbuckets,
				 uint64_t *limit)
{
	size_t i;

	if (!l)
		return layout_error("histogram layout is NULL");
	if (l->scheme == PCPU_HISTOGRAM_EXPLICIT) {
		if (!l->bounds || l->nbounds == 0 || l->nbounds > PCPU_HISTOGRAM_MAX_BOUNDS)
			return layout_error("explicit histogram: needs 1 to 4096 bounds");
		for (i = 1; i < l->nbounds; i++)
			if (l->bounds[i] <= l->bounds[i - 1])
				return layout_error("explicit histogram: bounds must be strictly increasing");
		/* INT64_MAX as a bound would make the +Inf bucket unreachable,
		 * and an `le` equal to the largest value is still fine. */
		*nbuckets = l->nbounds + 1;
		*limit = 0;
		return 0;
	}
	if (l->scheme == PCPU_HISTOGRAM_LOG_LINEAR) {
		unsigned p = l->precision_bits;

		if (p > PCPU_HISTOGRAM_MAX_BITS)
			return layout_error("log-linear histogram: precision_bits must be 0..14");
		if (l->max_value < 1)
			return layout_error("log-linear histogram: max_value must be >= 1");
		if (!export_per_octave_valid(l))
			return layout_error("log-linear histogram: export_per_octave must be 0 or a power of two up to 64");
		*nbuckets = pcpu__loglinear_nbuckets(p, l->max_value, limit);
		return 0;
	}
	if (l->scheme == PCPU_HISTOGRAM_EXPONENTIAL) {
		size_t n;

		if (l->schema < PCPU_HISTOGRAM_SCHEMA_MIN || l->schema > PCPU_HISTOGRAM_SCHEMA_MAX)
			return layout_error("exponential histogram: schema must be -4..8");
		if (l->scale_exp10 < -PCPU_STATS_SCALE_MAX || l->scale_exp10 > PCPU_STATS_SCALE_MAX)
			return layout_error("exponential histogram: scale_exp10 must be -22..22");
		if (!export_per_octave_valid(l))
			return layout_error("exponential histogram: export_per_octave must be 0 or a power of two up to 64");
		if (l->max_value < 0)
			return layout_error("exponential histogram: max_value (the largest `le` bound exposed) must be 0 or more");
		n = pcpu__exponential_bounds(l->schema, l->scale_exp10, NULL, PCPU_HISTOGRAM_MAX_BOUNDS, NULL);
		if (!n)
			return layout_error("exponential histogram: more than 4096 buckets (a smaller schema)");
		*nbuckets = n + 1;
		*limit = 0;
		return 0;
	}
	return layout_error("unknown histogram scheme");
}

pcpu_histogram_t *pcpu_histogram_create_ex(pcpu_zone_t *zone,
					   const struct pcpu_histogram_layout *layout, unsigned flags)
{
	if (flags & ~(unsigned)PCPU_HISTOGRAM_SPARSE) {
		pcpu__set_error("histogram: unknown flag");
		errno = EINVAL;
		return NULL;
	}
	if (!zone && !(zone = pcpu__stats_zone()))
		return NULL;
	/* Before the tables' lock is first taken, under no pcpu lock (fork.c). */
	pcpu__histogram_tables_fork_register();
	return pcpu__histogram_create_at(zone, layout, NULL, NULL,
					 layout && layout->scheme == PCPU_HISTOGRAM_EXPONENTIAL
						 ? layout->scale_exp10
						 : 0,
					 flags & PCPU_HISTOGRAM_SPARSE ? PCPU__HISTOGRAM_OPT_SPARSE : 0);
}

pcpu_histogram_t *pcpu_histogram_create_in(pcpu_zone_t *zone,
					   const struct pcpu_histogram_layout *layout)
{
	if (!zone) {
		errno = EINVAL;
		return NULL;
	}
	return pcpu_histogram_create_ex(zone, layout, 0);
}

/* 10^e, exactly for |e| <= 22. */
static double pow10i(int e)
{
	double r = 1.0;
	int k = e < 0 ? -e : e;

	while (k--)
		r *= 10.0;
	return e < 0 ? 1.0 / r : r;
}

/* pcpu_histogram_observe()'s parameters (pcpu/histogram.h): a slot's sum
 * word of one bucket may hold sat in magnitude, so the words of every
 * slot, mirror and bucket together hold at most 2^61 and their sum,
 * modulo 2^64 as every reader takes it, is the true one; a value that
 * goes to them is below cap, 1/16 of that share (a record that lands on
 * another slot than the one it checked, after a migration, overshoots by
 * less than that) and below 2^53 (converted exactly). */
static void set_observe(pcpu_histogram_t *h, size_t nbuckets, int scale_exp10, int wide)
{
	uint64_t words = 2 * (uint64_t)pcpu_nslots() * nbuckets;
	uint64_t sat = ((uint64_t)1 << 61) / (words ? words : 1);
	double cap = (double)(sat / 16);

	h->pcpu__mult = 1.0 / pow10i(scale_exp10);
	if (scale_exp10 < 0)
		h->pcpu__mult = pow10i(-scale_exp10); /* exact: 1e9, not 1 / 1e-9 */
	h->pcpu__sat = sat;
	h->pcpu__cap = cap < 0x1p53 ? cap : 0x1p53;
	h->pcpu__wide = (uint32_t)wide;
}

pcpu_histogram_t *pcpu__histogram_create_at(pcpu_zone_t *zone,
					    const struct pcpu_histogram_layout *layout, void *at,
					    const int64_t *shared, int scale_exp10, unsigned opts)
{
	int wide = !!(opts & PCPU__HISTOGRAM_WIDE), sparse = !!(opts & PCPU__HISTOGRAM_OPT_SPARSE);
	pcpu_histogram_t *h;
	size_t nbuckets;
	uint64_t limit;
	struct layout_tables *t = NULL;

	if (!zone) {
		errno = EINVAL;
		return NULL;
	}
	if (sparse && at && !pcpu__zone_is_tree(zone)) {
		errno = EINVAL; /* a table of groups is a tree's: the process's own are made here */
		return NULL;
	}
	if (pcpu__histogram_layout_check(layout, &nbuckets, &limit) < 0)
		return NULL;
	if (!sparse && nbuckets + !!wide > PCPU_ZONE_MAX_OBJECT / (2 * sizeof(struct pcpu_counter))) {
		pcpu__set_error("histogram: too many buckets for one zone object");
		errno = E2BIG;
		return NULL;
	}
	h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	if (layout->scheme == PCPU_HISTOGRAM_EXPLICIT && shared) {
		h->pcpu__bounds = shared; /* never released here: see pcpu__histogram_destroy_in() */
		h->pcpu__nbounds = (uint32_t)(nbuckets - 1);
	} else if (layout->scheme != PCPU_HISTOGRAM_LOG_LINEAR) {
		if (!(t = tables_get(layout, nbuckets - 1))) {
			free(h);
			return NULL;
		}
		h->pcpu__bounds = t->words;
		h->pcpu__nbounds = t->nbounds;
		h->pcpu__bits = t->bits;
	}
	/* A (count, sum) pair per bucket, 16-byte aligned for the record's
	 * one-store commit (pcpu/histogram.h); zeroed, as a counter array.
	 * With fractions one more pair: the per-slot double sum, the residue. */
	if (sparse ? pcpu__histogram_sparse_init(h, zone, nbuckets, wide, (uint64_t *)at) < 0
		   : !(h->pcpu__c = at ? at
				       : pcpu_zone_alloc(zone,
							 2 * (nbuckets + !!wide) * sizeof(struct pcpu_counter),
							 2 * sizeof(struct pcpu_counter)))) {
		int e = errno;
		if (t)
			tables_put(t->words);
		free(h);
		errno = e;
		return NULL;
	}
	h->pcpu__nbuckets = (uint32_t)nbuckets;
	h->pcpu__scheme = (uint32_t)layout->scheme;
	if (layout->scheme == PCPU_HISTOGRAM_LOG_LINEAR)
		h->pcpu__bits = layout->precision_bits;
	h->pcpu__limit = limit;
	set_observe(h, nbuckets, scale_exp10, wide);
	return h;
}

pcpu_histogram_t *pcpu_histogram_create(const struct pcpu_histogram_layout *layout)
{
	pcpu_zone_t *z = pcpu__stats_zone();

	return z ? pcpu_histogram_create_in(z, layout) : NULL;
}

void pcpu_histogram_destroy(pcpu_histogram_t *h)
{
	if (!h)
		return;
	if (h->pcpu__c)
		pcpu_counter_free(h->pcpu__c);
	else
		pcpu__histogram_sparse_free(h);
	if (h->pcpu__scheme != PCPU_HISTOGRAM_LOG_LINEAR)
		tables_put(h->pcpu__bounds);
	free(h);
}

void pcpu__histogram_destroy_in(pcpu_zone_t *zone, pcpu_histogram_t *h, const int64_t *shared)
{
	/* The bucket counters come from `zone` (pcpu_histogram_create_in()). */
	if (h->pcpu__c)
		(void)pcpu_zone_free(zone, h->pcpu__c);
	else
		pcpu__histogram_sparse_free(h);
	if (h->pcpu__scheme != PCPU_HISTOGRAM_LOG_LINEAR && h->pcpu__bounds != shared)
		tables_put(h->pcpu__bounds);
	free(h);
}

int pcpu_histogram_bucket_range(const pcpu_histogram_t *h, size_t b, int64_t *lower,
				int64_t *upper)
{
	int64_t lo, hi;

	if (!h || b >= h->pcpu__nbuckets) {
		errno = EINVAL;
		return -1;
	}
	if (b + 1 == h->pcpu__nbuckets) {
		/* +Inf: everything above the last finite bucket. */
		if (h->pcpu__scheme == PCPU_HISTOGRAM_LOG_LINEAR)
			lo = h->pcpu__limit >= (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)h->pcpu__limit;
		else
			lo = h->pcpu__bounds[b - 1] == INT64_MAX ? INT64_MAX : h->pcpu__bounds[b - 1] + 1;
		hi = INT64_MAX;
	} else if (h->pcpu__scheme == PCPU_HISTOGRAM_LOG_LINEAR) {
		pcpu__loglinear_range(h->pcpu__bits, b, &lo, &hi);
	} else {
		lo = b == 0 ? INT64_MIN : h->pcpu__bounds[b - 1] + 1;
		hi = h->pcpu__bounds[b];
	}
	if (lower)
		*lower = lo;
	if (upper)
		*upper = hi;
	return 0;
}

int pcpu_histogram_read(const pcpu_histogram_t *h, uint64_t *counts, size_t nbuckets,
			uint64_t *count, int64_t *sum)
{
	/* Pairs fetched a block at a time into the stack (no allocation: the
	 * read is async-signal-safe), each block walked slot by slot. */
	enum { BLOCK = 128 };
	uint64_t pairs[2 * BLOCK], c = 0, s = 0;
	size_t b0, b, step;

	if (!h || !counts || nbuckets != h->pcpu__nbuckets) {
		errno = EINVAL;
		return -1;
	}
	/* Sparse: a block is a group; one not made yet reads 0. */
	step = h->pcpu__c ? BLOCK : PCPU__HISTOGRAM_GROUP;
	for (b0 = 0; b0 < nbuckets; b0 += step) {
		size_t n = step;
		pcpu_counter_t at = pcpu__histogram_pair_of(h, b0);

		if (n > nbuckets - b0)
			n = nbuckets - b0;
		if (!at)
			memset(pairs, 0, 2 * n * sizeof pairs[0]);
		else if (pcpu_counter_fetch_array(at, 2 * n, pairs) < 0)
			return -1;
		for (b = 0; b < n; b++) {
			counts[b0 + b] = pairs[2 * b];
			c += pairs[2 * b];
			s += pairs[2 * b + 1]; /* modulo 2^64, as each word */
		}
	}
	if (count)
		*count = c;
	if (sum)
		*sum = (int64_t)s;
	return 0;
}

/* The histogram's double sum's word (per slot) and residue's (slot 0's
 * mirror), after the buckets' pairs. */
static pcpu_counter_t double_sum_word(const pcpu_histogram_t *h)
{
	if (!h->pcpu__c)
		return pcpu__histogram_sparse_sum_pair(h);
	return h->pcpu__c + 2 * (size_t)h->pcpu__nbuckets;
}

void pcpu__histogram_observe_slow(const pcpu_histogram_t *h, double v)
{
	double u = v * h->pcpu__mult;
	int64_t iv;
	size_t b;
	pcpu_counter_t pair;

	if (u != u) { /* NaN: no bucket holds it; +Inf counts it, as Prometheus' clients do */
		pcpu_counter_t inf = pcpu__histogram_pair_made(h, (size_t)h->pcpu__nbuckets - 1);

		if (inf)
			pcpu__histogram_add_pair(inf, 1, 0);
		if (h->pcpu__wide)
			pcpu_fraction_sum_add(double_sum_word(h), v);
		return;
	}
	/* The bucket of the value, clamped to what an int64 holds. */
	iv = u >= 0x1p63 ? INT64_MAX : u <= -0x1p63 ? INT64_MIN : (int64_t)(u + (u < 0 ? -0.5 : 0.5));
	b = pcpu__histogram_locate(h, &iv);
	if (!(pair = pcpu__histogram_pair_made(h, b)))
		return; /* a sparse group that cannot be made: counted */
	if (__builtin_fabs(u) < h->pcpu__cap && (iv != 0 || v == 0)) {
		/* In range: the integer pair, unless this slot's sum word is
		 * full (or the section did not commit and the retry finds it
		 * full). */
		if (pcpu__counter_add_pair_bounded(pair, 1, iv, h->pcpu__sat) == 0)
			return;
	}
	pcpu__histogram_add_pair(pair, 1, 0);
	/* A negative value a log-linear or exponential histogram records as
	 * 0 adds nothing; without fractions there is no double sum. */
	if (!h->pcpu__wide || (v < 0 && iv == 0 && h->pcpu__scheme != PCPU_HISTOGRAM_EXPLICIT))
		return;
	pcpu_fraction_sum_add(double_sum_word(h), v);
}

double pcpu__histogram_read_residue(const pcpu_histogram_t *h)
{
	return h->pcpu__wide ? pcpu_fraction_sum_read(double_sum_word(h)) : 0.0;
}

int pcpu_histogram_zero(const pcpu_histogram_t *h)
{
	size_t i, n;

	if (!h) {
		errno = EINVAL;
		return -1;
	}
	/* Word by word, each by offset (counter.c): a pair's count and sum
	 * may be reset a moment apart, as a read may load them. */
	n = h->pcpu__nbuckets;
	for (i = 0; i < n; i++) {
		/* Sparse: a group not made yet holds nothing to reset. */
		pcpu_counter_t pair = pcpu__histogram_pair_of(h, i);

		if (pair) {
			pcpu_counter_zero(pair);
			pcpu_counter_zero(pair + 1);
		}
	}
	if (h->pcpu__wide)
		pcpu_fraction_sum_reset(double_sum_word(h));
	return 0;
}

int pcpu_histogram_merge(const pcpu_histogram_t *h, const uint64_t *counts, size_t nbuckets, int64_t sum)
{
	size_t b;

	if (!h || !counts || nbuckets != h->pcpu__nbuckets) {
		errno = EINVAL;
		return -1;
	}
	/* The sum goes to the first bucket's sum word; sparse, to the first
	 * bucket with a count (its group is made anyway), bucket 0's only
	 * when no count is given. */
	if (sum != 0 && h->pcpu__c) {
		pcpu_counter_add(h->pcpu__c + 1, sum);
		sum = 0;
	}
	for (b = 0; b < nbuckets; b++) {
		pcpu_counter_t pair;

		if (counts[b] == 0)
			continue;
		if (!(pair = pcpu__histogram_pair_made(h, b)))
			continue; /* counted in pcpu_histogram_lost() */
		pcpu_counter_add(pair, (int64_t)counts[b]);
		if (sum != 0) {
			pcpu_counter_add(pair + 1, sum);
			sum = 0;
		}
	}
	if (sum != 0) {
		pcpu_counter_t pair = pcpu__histogram_pair_made(h, 0);

		if (pair)
			pcpu_counter_add(pair + 1, sum);
	}
	return 0;
}
