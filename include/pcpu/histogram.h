/* SPDX-License-Identifier: MIT */
/**
 * @file pcpu/histogram.h
 * Per-CPU histograms: recording a value is a branch-free bucket lookup and
 * one rseq critical section that adds to the bucket's count and sum at once
 * (measured cost: bench/README.md section 5).
 *
 * A histogram is one per-CPU array of 16-byte aligned pairs, one per
 * bucket: word 2b holds the count of bucket b, word 2b + 1 the sum of the
 * values recorded into it. Recording finds the bucket and adds (1, v) to
 * its pair on the calling thread's slot with one 16-byte store as the
 * commit, so a preemption or signal never leaves one add without the
 * other. Nothing is merged until a read sums the slots.
 *
 *     slot s: [ count 0 | sum 0 | count 1 | sum 1 | ... | count n-1 | sum n-1 ]
 *                                                         (+Inf bucket)
 *
 * The histogram's sum is the sum of the buckets' sums, and its count the
 * sum of their counts.
 * The count is not stored apart: a read's count always equals the sum of
 * its buckets, and once recorders stop it equals the number of values
 * recorded.
 *
 * Two bucket schemes, both over int64 values (record nanoseconds, bytes...;
 * a registry family's scale_exp10 exposes them in seconds or other units):
 *  - Explicit (Prometheus style): strictly increasing inclusive upper bounds
 *    b0 < b1 < ... < bk-1; bucket i holds values v with b(i-1) < v <= b(i),
 *    and bucket k (+Inf) holds v > b(k-1).
 *  - Log-linear (HdrHistogram style) with precision p bits: values below
 *    2^(p+1) have a bucket each; above, every power-of-two range
 *    [2^e, 2^(e+1)) is cut into 2^p equal buckets, so a bucket is never wider
 *    than 2^-p of its lower bound (p = 7: 0.8%). Values above max_value
 *    (rounded up to a power of two, minus one) go to the +Inf bucket;
 *    negative values are recorded as 0. With p = 7 and a max of ten minutes
 *    in nanoseconds that is 4353 buckets, 68 KiB per slot used (only the
 *    pages a slot writes become resident).
 *
 * What a read guarantees: each bucket and the sum as pcpu_counter_fetch()
 * (exact once recorders stop, not a point-in-time snapshot). During
 * concurrent recording the sum may include values the counts do not, or
 * the reverse (a reader loads a pair's two words one by one).
 */
#ifndef PCPU_HISTOGRAM_H
#define PCPU_HISTOGRAM_H

#include <pcpu/common.h>
#include <pcpu/zone.h>
#include <pcpu/counter.h>

PCPU_BEGIN_DECLS

/** Bucket schemes. */
enum pcpu_histogram_scheme {
	PCPU_HISTOGRAM_EXPLICIT = 1,   /**< given upper bounds, plus +Inf */
	PCPU_HISTOGRAM_LOG_LINEAR = 2, /**< relative precision 2^-p */
	/** Prometheus native / OpenTelemetry exponential buckets: bucket i
	 * holds (base^(i-1), base^i], base = 2^(2^-schema), in exposed units.
	 * The last of them ends at INT64_MAX, so the +Inf bucket after it
	 * never counts a value (pcpu_histogram_bucket_range() reads it as
	 * [INT64_MAX, INT64_MAX], the last value of the bucket before it). */
	PCPU_HISTOGRAM_EXPONENTIAL = 3,
};

/** Schemas of exponential histograms (Prometheus native histograms'). */
#define PCPU_HISTOGRAM_SCHEMA_MIN (-4)
#define PCPU_HISTOGRAM_SCHEMA_MAX 8

/** Largest precision of a log-linear histogram (2^14 buckets per octave). */
#define PCPU_HISTOGRAM_MAX_BITS 14
/** Largest number of explicit bounds. */
#define PCPU_HISTOGRAM_MAX_BOUNDS 4096

/** What a histogram's buckets are. Copied at creation. */
struct pcpu_histogram_layout {
	enum pcpu_histogram_scheme scheme;
	/** Explicit: `nbounds` (1..PCPU_HISTOGRAM_MAX_BOUNDS) strictly
	 * increasing inclusive upper bounds; the +Inf bucket is added. */
	const int64_t *bounds;
	size_t nbounds;
	/** Log-linear: precision in bits, 0..PCPU_HISTOGRAM_MAX_BITS. */
	unsigned precision_bits;
	/** Log-linear: largest value that must get a finite bucket (>= 1).
	 * Exponential: 0, or the largest `le` bound the text expositions
	 * write (export_per_octave's bounds above it are left out: their
	 * observations count in +Inf; reads, quantiles and the native
	 * buckets keep every bucket), in recorded units: e.g. 60 * 10^9 for
	 * nanoseconds exposed in seconds, so that a latency histogram has a
	 * classic set of about 20 `le` lines at 1 per power of two from
	 * export_min = 10^5 (100 us). Negative: EINVAL. Segments: 2.8. */
	int64_t max_value;
	/** Log-linear and exponential: how many bucket bounds per power of
	 * two the writers expose as classic `le` buckets (1, 2, 4 ... 64;
	 * capped at the buckets per power of two, 2^precision_bits or
	 * 2^schema); 0: PCPU_HISTOGRAM_EXPORT_DEFAULT. Log-linear: the bucket
	 * upper bounds u with u + 1 = 2^e * (1 + k / per_octave): for 4, 1.25,
	 * 1.5, 1.75 and 2 times a power of two (minus one, as bounds are
	 * inclusive integers). Exponential: the zero bucket's bound and the
	 * bounds base^i with i a multiple of 2^schema / per_octave: for 4,
	 * 2^(k/4) times a power of two. Prometheus sees the same `le` set from
	 * creation on, empty buckets included, so rate() over buckets stays
	 * monotone in `le`; reads, quantiles and the native (protobuf) buckets
	 * keep every bucket. A published segment carries both (format 2.4:
	 * log-linear families in value_off and serial, exponential ones in
	 * flag bits 8-10 and serial), so its readers expose the same set. */
	unsigned export_per_octave;
	/** Log-linear and exponential: smallest bound exposed (bounds below it
	 * are folded into the first exposed one, e.g. 1000 to start at 1 us
	 * for nanoseconds); 0 or less: from the first bucket (le = 0, or the
	 * zero bucket's bound). Segments: as export_per_octave. */
	int64_t export_min;
	/** Exponential: PCPU_HISTOGRAM_SCHEMA_MIN..MAX; the base is
	 * 2^(2^-schema) (schema 3: 8 buckets per power of two, each at most
	 * 9.05% wide). The buckets cover every positive int64; negative values
	 * are recorded as 0. Values up to the largest whose bucket would hold
	 * no other integer share the zero bucket (Prometheus' zero_threshold);
	 * the rest get a bucket each base^i. Fails with EINVAL where that
	 * makes more than PCPU_HISTOGRAM_MAX_BOUNDS buckets (schema 8 with
	 * nanoseconds, say). */
	int schema;
	/** Exponential: the bounds are powers of the base in value *
	 * 10^scale_exp10 (-22..22), the unit they are exposed in. A registry
	 * family uses its own scale_exp10 instead. */
	int scale_exp10;
};

/** Default `le` bounds per power of two of a log-linear or exponential histogram. */
#define PCPU_HISTOGRAM_EXPORT_DEFAULT 4
/** Largest `le` bounds per power of two. */
#define PCPU_HISTOGRAM_EXPORT_MAX 64

/* Read-only after creation but for a sparse histogram's groups; fields
 * private to pcpu, visible for the inline recording path. */
struct pcpu_histogram {
	pcpu_counter_t pcpu__c;       /* [2b] count of bucket b, [2b + 1] its sum;
				       * 16-byte aligned */
	const int64_t *pcpu__bounds;  /* explicit, exponential: the bounds (at least
				       * PCPU__HISTOGRAM_SMALL, padded with INT64_MAX;
				       * exponential: then the lookup table), read-only
				       * and shared by every histogram of the layout */
	uint32_t pcpu__nbounds;       /* explicit: number of bounds */
	uint32_t pcpu__nbuckets;      /* buckets, +Inf included */
	uint32_t pcpu__scheme;        /* enum pcpu_histogram_scheme */
	uint32_t pcpu__bits;          /* log-linear: p; exponential: the table's
				       * fine precision, 0 for none (histogram.c) */
	uint64_t pcpu__limit;         /* log-linear: values >= limit are +Inf */
	/* pcpu_histogram_observe() (histogram.c: pcpu__histogram_set_double()) */
	double pcpu__mult;            /* units per exposed unit: 10^-scale_exp10 */
	double pcpu__cap;             /* |value in units| below this: the integer sum */
	uint64_t pcpu__sat;           /* a slot's sum word past this: the double sum */
	uint32_t pcpu__wide;          /* 1: the pair after the buckets holds the
				       * double sum (per slot) and the residue */
	uint32_t pcpu__reserved;
	/* Sparse (PCPU_HISTOGRAM_SPARSE; pcpu__c is then NULL): group g's
	 * pairs, buckets g * PCPU__HISTOGRAM_GROUP and on, a zone object
	 * made at its first record (NULL until then; set once, with release
	 * order); entry ngroups: the double sum's pair, made at creation. */
	pcpu_counter_t *pcpu__groups;
};

typedef struct pcpu_histogram pcpu_histogram_t;

#ifdef PCPU_NO_INLINE
/* The stable tier (src/stats/stable_abi.c): the same operations as exported functions,
 * documented below with their inline versions. */
PCPU_API size_t pcpu_histogram_bucket_of(const pcpu_histogram_t *h, int64_t v);
PCPU_API void pcpu_histogram_record(const pcpu_histogram_t *h, int64_t v);
PCPU_API void pcpu_histogram_record_n(const pcpu_histogram_t *h, int64_t v, uint64_t n);
PCPU_API void pcpu_histogram_observe(const pcpu_histogram_t *h, double v);
PCPU_API void pcpu_histogram_record_owned(pcpu_worker_t w, const pcpu_histogram_t *h, int64_t v);
PCPU_API size_t pcpu_histogram_nbuckets(const pcpu_histogram_t *h);
#endif

/** pcpu_histogram_create_ex() flags. */
enum {
	/**
	 * Buckets that take memory as they are used: the (count, sum) pairs
	 * come in groups of PCPU_HISTOGRAM_GROUP_BUCKETS adjacent buckets,
	 * each a zone object of its own made at the first record into one of
	 * its buckets, so a histogram whose values fall in k buckets takes
	 * about k pairs per slot that records (rounded up to whole groups)
	 * rather than the layout's full width: for wide layouts (hundreds of
	 * log-linear or exponential buckets) where each series sees a narrow
	 * range (private registry, 247 buckets, written once: 752 bytes of
	 * memory against 4,352 dense; bench/memory.md). The price: a record
	 * loads the group's address before its section (one dependent load:
	 * 1.09-1.14 times a dense record, bench/stats.md, "Sparse
	 * histograms: the record"), and **the first record into a group
	 * allocates** -- a zone allocation (a mutex section), so it is not
	 * async-signal-safe, nor lock-free; every later record is. Should
	 * that allocation fail (ENOMEM: the zone cannot grow), the record is
	 * counted by pcpu_histogram_lost() and nothing else changes: never a
	 * wrong bucket. Reads, pcpu_histogram_zero() and
	 * pcpu_histogram_merge() work alike (a merge makes the groups it
	 * adds to). A registry family asks for it with PCPU_FAMILY_SPARSE
	 * (pcpu/stats.h), private or published. In a shared tree
	 * (PCPU_SEGMENT_SHARED_TREE) a process's first record into, or
	 * first read of, a group another process of the tree made maps it
	 * (a mutex section, once per group and process): such reads are not
	 * async-signal-safe either. Since PCPU_0.2 (inline layout 4).
	 */
	PCPU_HISTOGRAM_SPARSE = 1u << 0,
};

/** Buckets per group of a sparse histogram (PCPU_HISTOGRAM_SPARSE):
 * 8 (count, sum) pairs, 128 bytes per slot. */
#define PCPU_HISTOGRAM_GROUP_BUCKETS 8
#define PCPU__HISTOGRAM_GROUP PCPU_HISTOGRAM_GROUP_BUCKETS

/* Explicit layouts of at most this many bounds store them padded to it
 * with INT64_MAX, for pcpu__histogram_search16(). */
#define PCPU__HISTOGRAM_SMALL 16

/* Index of the first bound >= v among up to 16 sorted bounds padded with
 * INT64_MAX (the count of bounds < v; padding never is). Two levels of
 * independent compares -- which group of four, then which bound in it --
 * with no branch and a dependency chain of two loads, where a binary search
 * has four (measured 3.1 against 5.0 ns a search with random values). */
__attribute__((always_inline)) static inline size_t pcpu__histogram_search16(const int64_t *b, int64_t v)
{
	size_t k = (size_t)(b[3] < v) + (size_t)(b[7] < v) + (size_t)(b[11] < v);
	const int64_t *g = b + 4 * k;

	return 4 * k + (size_t)(g[0] < v) + (size_t)(g[1] < v) + (size_t)(g[2] < v) +
	       (size_t)(g[3] < v);
}

/* Index of the first bound >= v among n >= 1 sorted bounds (n if none: the
 * +Inf bucket). A binary search of log2(n) steps whatever v is, each a
 * compare and a conditional move, so its cost does not depend on how
 * predictable the values are. gcc 12 turns the C ternary of this step into
 * a conditional branch (which mispredicts half the time on random values),
 * hence the arch layer's step (pcpu__arch_search_step: cmov in asm on
 * x86-64, a mask elsewhere). */
__attribute__((always_inline)) static inline size_t pcpu__histogram_search(const int64_t *bounds, size_t n, int64_t v)
{
	const int64_t *base = bounds;

	while (n > 1) {
		size_t half = n / 2;

		base = pcpu__arch_search_step(base, half, v);
		n -= half;
	}
	return (size_t)(base - bounds) + (size_t)(*base < v);
}

/* Log-linear index of u (0 <= u < 2^63) at precision p <= 14: with e the
 * top bit of t = u | 2^p (so e >= p) and k = e - p, the group is k and the
 * bucket in it u >> k; that is (k << p) + (u >> k), which for u < 2^(p+1)
 * is u itself (one value per bucket), with no branch on the size.
 *
 * e comes from the arch layer (pcpu__arch_loglin_exponent): the top bit's
 * index, one lzcnt or clz, or on x86-64 without LZCNT the exponent of
 * (double)t, which above 2^53 may be e + 1. The formula is still exact
 * then: rounding up needs t > 2^(e+1) - 2^(e-52) (one unit in the last
 * place), and p <= 52, so u >> k is its largest value 2^(p+1) - 1 and
 * u >> (k+1) is 2^p - 1: ((k+1) << p) + 2^p - 1 = (k << p) + 2^(p+1) - 1,
 * the same bucket (test_histogram checks the
 * ends of every bucket up to INT64_MAX). */
__attribute__((always_inline)) static inline size_t pcpu__histogram_loglin(uint64_t u, unsigned p)
{
	uint64_t t = u | ((uint64_t)1 << p);
	unsigned k = pcpu__arch_loglin_exponent(t) - p;

	return ((size_t)k << p) + (size_t)(u >> k);
}

/* The bucket of v, and in *v the value its sum takes: v itself, or 0 for a
 * negative v where the scheme records negatives as 0 (all but explicit).
 * Each scheme's branch clamps once, where its lookup needs it anyway. */
__attribute__((always_inline)) static inline size_t pcpu__histogram_locate(const pcpu_histogram_t *h,
									    int64_t *v)
{
	if (h->pcpu__scheme == PCPU_HISTOGRAM_LOG_LINEAR) {
		uint64_t u = *v < 0 ? 0 : (uint64_t)*v;

		*v = (int64_t)u;
		if (PCPU_UNLIKELY(u >= h->pcpu__limit))
			return h->pcpu__nbuckets - 1;
		return pcpu__histogram_loglin(u, h->pcpu__bits);
	}
	if (h->pcpu__scheme == PCPU_HISTOGRAM_EXPONENTIAL) {
		uint64_t u = *v < 0 ? 0 : (uint64_t)*v;

		*v = (int64_t)u;
		if (PCPU_LIKELY(h->pcpu__bits != 0)) {
			/* The fine log-linear index of v, then one compare
			 * against the table's bound for it (histogram.c,
			 * expo_add_table()). */
			unsigned p = h->pcpu__bits;
			size_t f = pcpu__histogram_loglin(u, p);
			size_t n = h->pcpu__nbounds;
			const int64_t *tb = h->pcpu__bounds + (n < PCPU__HISTOGRAM_SMALL ? PCPU__HISTOGRAM_SMALL : n);
			const uint16_t *ti = (const uint16_t *)(tb + ((size_t)(64 - p) << p));

			return (size_t)ti[f] + (size_t)((int64_t)u > tb[f]);
		}
		return pcpu__histogram_search(h->pcpu__bounds, h->pcpu__nbounds, (int64_t)u);
	}
	if (PCPU_LIKELY(h->pcpu__nbounds <= PCPU__HISTOGRAM_SMALL))
		return pcpu__histogram_search16(h->pcpu__bounds, *v);
	return pcpu__histogram_search(h->pcpu__bounds, h->pcpu__nbounds, *v);
}

/**
 * Bucket a value falls in, 0..pcpu_histogram_nbuckets(h)-1.
 * Thread-safe; async-signal-safe. Cost, branch-free but for the scheme and
 * a log-linear value beyond max_value: a bit scan, shifts and adds
 * (log-linear; exponential adds two table loads and a compare), or
 * log2(nbounds) compare-and-conditional-moves (explicit; two levels of
 * independent compares up to 16 bounds).
 */
__attribute__((always_inline)) static inline size_t PCPU__INLINE_OP(pcpu_histogram_bucket_of)(const pcpu_histogram_t *h, int64_t v)
{
	return pcpu__histogram_locate(h, &v);
}

/* The pair's slow path, when the section does not commit (fallback mode, a
 * migration or signal): two counter slow-path adds, each exact (a reader
 * may then see one before the other, as it may anyway). One call out of
 * line, not two inline: with two, `pair` and `v` must survive the first
 * call, so a loop of records keeps them in callee-saved registers, and gcc
 * 12 then had none left for the section's offsets from pcpu__g and loaded
 * both again before every record; with one call both die at it, and
 * pcpu__g.cs_tpoff stays in a register across the loop (bench/README.md,
 * "The record against its floor"). Declared inline as well, so that a
 * program that never records emits no copy: at -O0 a plain static function
 * was emitted into every program, stable-tier ones too, with a reference
 * to the layout-versioned pcpu__counter_add_slow (the ASan build's
 * *_noinline_no_layout_symbols tests failed). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattributes" /* inline and noinline, on purpose */
#endif
static inline __attribute__((noinline, cold)) void pcpu__histogram_add_pair_slow(pcpu_counter_t pair,
										  int64_t n, int64_t v)
{
	pcpu__counter_add_slow(pair, n);
	pcpu__counter_add_slow(pair + 1, v);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* A sparse histogram's record into a bucket group not made yet
 * (histogram_sparse.c): v recorded n times (n added to its bucket's count,
 * v * n to its sum), the group made first (pcpu_histogram_lost() counts
 * the record when it cannot be). */
PCPU_API void pcpu__histogram_sparse_record(const pcpu_histogram_t *h, int64_t v, uint64_t n);

/* Adds n to the count and v to the sum of the bucket pair at `pair` on the
 * calling thread's slot: one critical section whose commit stores both
 * words (rseq_idx16_cmpeq_add2v_indexed); if it does not commit,
 * pcpu__histogram_add_pair_slow(). */
__attribute__((always_inline)) static inline void pcpu__histogram_add_pair(pcpu_counter_t pair, int64_t n,
									    int64_t v)
{
	/* An unregistered area fails the section's compare (idx16). */
	if (PCPU_LIKELY(pcpu__rseq_this_add2(&pair->pcpu__word, n, v) == 0))
		return;
	pcpu__histogram_add_pair_slow(pair, n, v);
}

/* A sparse histogram's record (h->pcpu__c NULL): the bucket, its group's
 * address (NULL until made: the call above), the same section as a dense
 * record. The records test for a sparse histogram before anything else and
 * keep this apart: a dense record is then its code from before sparse
 * histograms plus that one test (1.03-1.047 times it: bench/stats.md,
 * "Sparse histograms: the record"), where a test of the pair's address
 * after the lookup cost it up to 1.065 times; and a sparse one stays
 * inline (a call for the whole record cost 2-3 times a dense record,
 * against 1.09-1.14 times).
 * The group's words were zeroed before its address was stored (release),
 * hence the acquire. */
__attribute__((always_inline)) static inline void pcpu__histogram_sparse_add(const pcpu_histogram_t *h,
									      int64_t v, uint64_t n)
{
	int64_t u = v;
	size_t b = pcpu__histogram_locate(h, &u);
	pcpu_counter_t g = __atomic_load_n(&h->pcpu__groups[b / PCPU__HISTOGRAM_GROUP], __ATOMIC_ACQUIRE);

	if (PCPU_UNLIKELY(g == NULL)) {
		pcpu__histogram_sparse_record(h, v, n);
		return;
	}
	pcpu__histogram_add_pair(g + 2 * (b % PCPU__HISTOGRAM_GROUP), (int64_t)n, (int64_t)((uint64_t)u * n));
}

/**
 * Records value `v` once: adds 1 to its bucket's count and v to its
 * bucket's sum (0 for a negative value in a log-linear or exponential
 * histogram). `h` must be a live histogram.
 * Thread-safe; async-signal-safe; lock-free (but a sparse histogram's
 * first record into a bucket group: see PCPU_HISTOGRAM_SPARSE). Cost:
 * finding the bucket (branch-free, see pcpu_histogram_bucket_of()) and one
 * rseq critical section on the bucket's pair. Measured with random values (log-uniform
 * in 1 ms - 20 s; bench/stats_bench.c) on quiet 2-vCPU EPYC guests, two
 * runs on each (bench/README.md section 5: "The floor of a record" on an
 * AMD Zen 4, "The 8-byte-commit layout" on a Zen 5), in counter adds of
 * the same values, Zen 4 and Zen 5: log-linear 3.6 and 3.8; 11 or 16
 * explicit bounds 4.9-5.0 and 5.8; exponential (schema 3) 4.6-4.7 and
 * 5.8-5.9; prometheus-cpp's Observe 36-37 and 58. Of that, the lookup
 * alone is 1.7 and 2.3 counter adds (log-linear), or 2.9 and 4.0 (16
 * explicit bounds). The leanest record the buckets' layout allows, written
 * by hand with the precision a compile-time constant: 2.45 and 3.1 counter
 * adds (2.7 built for x86-64-v3 on the Zen 5). Where records land in one
 * bucket again and again, each 16-byte commit waits for the last: 3.5-3.7
 * and 5.5 times a hand-written add to one counter, hand-written or not.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_histogram_record)(const pcpu_histogram_t *h, int64_t v)
{
	if (PCPU_LIKELY(h->pcpu__c != NULL)) {
		size_t b = pcpu__histogram_locate(h, &v);

		pcpu__histogram_add_pair(h->pcpu__c + 2 * b, 1, v);
	} else {
		pcpu__histogram_sparse_add(h, v, 1);
	}
}

/**
 * pcpu_histogram_record() in the owned slot of claim `w` (pcpu/worker.h):
 * an owned add of 1 to the bucket's count and of v to its sum, no rseq, no
 * atomic; the zero claim makes it pcpu_histogram_record(). A reader may
 * see the count before the sum (as between two records). Thread-safe (for
 * the thread that holds `w`); async-signal-safe as
 * pcpu_counter_add_owned(). Cost: finding the bucket and two adds to
 * memory.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_histogram_record_owned)(pcpu_worker_t w,
												const pcpu_histogram_t *h,
												int64_t v)
{
	size_t b;
	pcpu_counter_t pair;

#ifdef PCPU_DEBUG
	pcpu__worker_debug_check(w, "pcpu_histogram_record_owned");
#endif
	if (PCPU_UNLIKELY(h->pcpu__c == NULL)) {
		/* Sparse: a plain record (exact all the same: reads add
		 * every slot, the owned ones too). */
		pcpu__histogram_sparse_add(h, v, 1);
		return;
	}
	b = pcpu__histogram_locate(h, &v);
	pair = h->pcpu__c + 2 * b;
	if (PCPU_UNLIKELY(w.pcpu__off == 0)) {
		pcpu__histogram_add_pair(pair, 1, v);
		return;
	}
	pcpu__owned_add(pcpu__counter_owned_word(w, pair), 1);
	pcpu__owned_add(pcpu__counter_owned_word(w, pair + 1), v);
}

/**
 * Records value `v` `n` times (a vector of packets of one size): adds n to
 * its bucket's count and v * n (modulo 2^64) to its sum. Same properties as
 * pcpu_histogram_record(): thread-safe, async-signal-safe, lock-free, the
 * same cost whatever n.
 */
static inline void PCPU__INLINE_OP(pcpu_histogram_record_n)(const pcpu_histogram_t *h, int64_t v, uint64_t n)
{
	size_t b;

	if (PCPU_UNLIKELY(h->pcpu__c == NULL)) {
		pcpu__histogram_sparse_add(h, v, n);
		return;
	}
	b = pcpu__histogram_locate(h, &v);
	pcpu__histogram_add_pair(h->pcpu__c + 2 * b, (int64_t)n, (int64_t)((uint64_t)v * n));
}

/* The rest of an observation the integer pair does not take (histogram.c):
 * out of range, not finite, a slot's sum word full, or a section that did
 * not commit. */
PCPU_API void pcpu__histogram_observe_slow(const pcpu_histogram_t *h, double v);

/**
 * Records a double `v`, in exposed units (seconds, bytes), into a
 * histogram of a family with fractions (pcpu_registry_family_ex() with
 * PCPU_FAMILY_FRACTIONS, pcpu/stats.h): the bucket of v, and a sum that
 * covers every double. A value that is a whole number of the family's
 * units (10^scale_exp10: billionths for -9) within the histogram's range
 * (a few thousand seconds in billionths, below 2^53 units) is recorded as
 * pcpu_histogram_record() does -- the same rseq section, the sum exact to
 * the unit -- as long as the calling slot's sum word for that bucket
 * holds less than its share of 2^62 (so the integer sum, added over every
 * slot and bucket, never wraps); a value rounded to a unit is off by at
 * most half a unit. Anything else -- larger values, values that round to
 * 0, a full slot -- is counted in its bucket and added, as a double, to a
 * per-slot double sum (an rseq compare-and-store: no shared cache line);
 * +-Inf and NaN count in the +Inf bucket (-Inf in the first) and go to a
 * shared residue (a compare-and-swap): the sum then reads +-Inf or NaN,
 * as Prometheus' clients have it. Readers add the three: integer sum x
 * 10^scale + double sum + residue (value.histogram.residue in a
 * snapshot). Negative values in a log-linear or exponential histogram
 * record 0, as pcpu_histogram_record(). On a histogram of a family without
 * fractions (no double sum) what the integer pair cannot take is counted
 * and its sum dropped. Thread-safe; async-signal-safe; lock-free (but a
 * sparse histogram's first record into a bucket group). Cost: in range, a multiplication, a rounding, the bucket lookup, a load of the
 * slot's sum word and pcpu_histogram_record()'s section; out of range, a
 * call: a pair add and a compare-and-store.
 */
__attribute__((always_inline)) static inline void PCPU__INLINE_OP(pcpu_histogram_observe)(const pcpu_histogram_t *h,
											  double v)
{
	double u = v * h->pcpu__mult;

	/* Sparse (pcpu__c NULL): all of it in the slow path, which makes
	 * groups. */
	if (PCPU_LIKELY(__builtin_fabs(u) < h->pcpu__cap && h->pcpu__c != NULL)) {
		int64_t iv = (int64_t)(u + (u < 0 ? -0.5 : 0.5));
		int64_t idx = pcpu__rseq_load_index16();

		if (PCPU_LIKELY(iv != 0 || v == 0)) {
			size_t b = pcpu__histogram_locate(h, &iv);
			pcpu_counter_t pair = h->pcpu__c + 2 * b;
			/* The slot's sum word must hold less than its share
			 * of 2^62. An unregistered thread's index (0xffff,
			 * 0xfffe) names no slot: its section fails, and the
			 * slow path checks the word it adds to. */
			uint64_t s = idx >= 0xfffe ? 0
						   : (uint64_t)__atomic_load_n(
							     &pcpu__counter_slot(pair + 1, (size_t)idx)->pcpu__word,
							     __ATOMIC_RELAXED);

			if (PCPU_LIKELY((s + h->pcpu__sat) <= 2 * h->pcpu__sat &&
					pcpu__rseq_this_add2(&pair->pcpu__word, 1, iv) == PCPU_RSEQ_COMMITTED))
				return;
		}
	}
	pcpu__histogram_observe_slow(h, v);
}

/**
 * Creates a histogram in the statistics layer's default zone (see
 * pcpu_gauge_alloc()). Returns NULL with errno:
 * EINVAL (NULL layout, unknown scheme, no bounds, bounds not strictly
 * increasing, precision > PCPU_HISTOGRAM_MAX_BITS, max_value < 1; the
 * message for pcpu_stats_error() says which), E2BIG (the buckets do not fit
 * one zone object), ENOMEM. Thread-safe; not async-signal-safe. Cost: a
 * zone allocation of nbuckets counters (a mutex section) and a malloc() of
 * the handle. Explicit and exponential layouts also take their bounds (and
 * exponential ones their lookup table) from one copy per process for all
 * histograms of the same layout: a hash of the layout and a mutex
 * section; the first histogram of a layout computes or copies them (a few
 * operations per bucket, and for exponential layouts a bucket search per
 * table entry). Heap per exponential histogram, schema 3 in nanoseconds:
 * 82 bytes on x86-64 (`pcpu_bench_stats --heap`; 22.8 KB when each
 * histogram copied its tables).
 */
PCPU_API pcpu_histogram_t *pcpu_histogram_create(const struct pcpu_histogram_layout *layout);

/** pcpu_histogram_create() in `zone` (EINVAL for a NULL zone); same errors,
 * thread safety and cost. */
PCPU_API pcpu_histogram_t *pcpu_histogram_create_in(pcpu_zone_t *zone,
						    const struct pcpu_histogram_layout *layout);

/**
 * pcpu_histogram_create_in() with options: `flags` 0 or
 * PCPU_HISTOGRAM_SPARSE (buckets that take memory as they are used; see
 * there for what its records cost and guarantee); `zone` NULL for the
 * statistics layer's default zone. Errors as pcpu_histogram_create_in(),
 * and EINVAL for an unknown flag. Sparse, E2BIG is never returned (no
 * object spans the buckets). Thread-safe; not async-signal-safe. Cost:
 * dense, pcpu_histogram_create_in()'s; sparse, a calloc() of one pointer
 * per group (8 bytes per 8 buckets) and a zone allocation of one pair
 * when the family has fractions, instead of the buckets' array. Since
 * PCPU_0.2 (inline layout 4).
 */
PCPU_API pcpu_histogram_t *pcpu_histogram_create_ex(pcpu_zone_t *zone,
						    const struct pcpu_histogram_layout *layout,
						    unsigned flags);

/**
 * How many records, merges' counts and observations a sparse histogram
 * (PCPU_HISTOGRAM_SPARSE) could not store because a bucket group could not
 * be made (the zone could not grow: ENOMEM). 0 for a dense histogram, and
 * for a sparse one while memory lasts. What it counts is in no read. NULL:
 * 0. Thread-safe; async-signal-safe. Cost: a load. Since PCPU_0.2.
 */
PCPU_API uint64_t pcpu_histogram_lost(const pcpu_histogram_t *h);

/**
 * Destroys a histogram. The caller guarantees no thread still records into
 * it. NULL is a no-op. Thread-safe; not async-signal-safe. Cost: a counter
 * array free (a search of the zone table and a mutex section), a free();
 * explicit and exponential layouts also a mutex section to release their
 * shared bounds, and the last histogram of a layout frees them.
 */
PCPU_API void pcpu_histogram_destroy(pcpu_histogram_t *h);

/** Number of buckets, the +Inf bucket included. Thread-safe;
 * async-signal-safe. Cost: a load. */
static inline size_t PCPU__INLINE_OP(pcpu_histogram_nbuckets)(const pcpu_histogram_t *h)
{
	return h->pcpu__nbuckets;
}

/**
 * Smallest and largest value bucket `b` holds (inclusive). The first bucket
 * of an explicit histogram starts at INT64_MIN; the +Inf bucket ends at
 * INT64_MAX. An exponential layout's +Inf bucket holds no value (its last
 * native bucket ends at INT64_MAX): it reads [INT64_MAX, INT64_MAX]. Returns 0, or -1 with errno EINVAL (b out of range).
 * Thread-safe; async-signal-safe. Cost: a few arithmetic operations
 * (log-linear) or two loads of the bounds (explicit, exponential).
 */
PCPU_API int pcpu_histogram_bucket_range(const pcpu_histogram_t *h, size_t b,
					 int64_t *lower, int64_t *upper);

/**
 * Reads the histogram: counts[b] for every bucket (nbuckets entries, not
 * cumulative), and optionally the total count and the sum (NULL to skip).
 * `nbuckets` must be pcpu_histogram_nbuckets(h). Returns 0, or -1 with errno
 * EINVAL. See the file comment for what a read guarantees.
 * Thread-safe; async-signal-safe; lock-free (a sparse histogram of a shared
 * tree: not on its first read of a group another process made, see
 * PCPU_HISTOGRAM_SPARSE). Cost: 2 * nbuckets counter
 * fetches (count and sum of each bucket), walked slot by slot, 128
 * buckets at a time through the stack.
 */
PCPU_API int pcpu_histogram_read(const pcpu_histogram_t *h, uint64_t *counts, size_t nbuckets,
				 uint64_t *count, int64_t *sum);

/**
 * Makes every bucket's count and sum, and the histogram's double sum (a
 * family with fractions), read 0 from now on, by offset: each word as
 * pcpu_counter_zero() (pcpu/counter.h) resets a counter, never a store into
 * a word that rseq recorders write, so no record is lost -- a record that
 * races the reset lands in a bucket before it (and is reset) or after it
 * (and stays); a read during the reset may see some buckets reset and
 * others not. In a shared tree, any process may reset (compare-and-swap
 * offsets, as pcpu_counter_zero()). Use: a statistics reset of one series
 * (PostgreSQL's pg_stat_statements_reset()), an entry reused.
 * Returns 0, or -1 with errno EINVAL (NULL).
 * Thread-safe; not async-signal-safe (as pcpu_counter_zero()). Cost: 2 x
 * nbuckets pcpu_counter_zero() calls (each a fetch and an atomic add or
 * compare-and-swap), plus a walk of the slots for the double sum.
 */
PCPU_API int pcpu_histogram_zero(const pcpu_histogram_t *h);

/**
 * Adds what pcpu_histogram_read() returned -- counts[b] for each of the
 * nbuckets buckets and a sum -- into histogram `h`: state saved across a
 * restart read back, or another histogram of the same layout merged into
 * this one. Afterwards a read of `h` counts counts[b] more in bucket b and
 * `sum` more in its sum (modulo 2^64, as records add). Bucket sums are
 * not kept apart by reads, so `sum` is added to the first bucket's sum
 * word (sparse: the first bucket with a count's, which needs its group
 * anyway); only the total is defined. The adds are counter adds, one per
 * non-zero count plus one: a concurrent read may see some and not others.
 * Returns 0, or -1 with errno EINVAL (NULL `h` or `counts`, `nbuckets` not
 * pcpu_histogram_nbuckets(h)).
 * Thread-safe; async-signal-safe; lock-free (sparse: not where it makes
 * a bucket group, see PCPU_HISTOGRAM_SPARSE). Cost: a counter add per
 * non-zero count, and one for the sum.
 */
PCPU_API int pcpu_histogram_merge(const pcpu_histogram_t *h, const uint64_t *counts, size_t nbuckets,
				  int64_t sum);

/**
 * Estimates quantile `q` (0 <= q <= 1) from counts read by
 * pcpu_histogram_read() (or the difference of two reads: the quantile of
 * what was recorded in between), in recorded units. The rule is
 * Prometheus' histogram_quantile() over the same buckets, so a value
 * computed here and one PromQL computes from the exposed buckets agree:
 * rank = q * count; the bucket is the first non-empty one whose cumulative
 * count reaches the rank; the estimate interpolates linearly from the
 * previous bucket's upper bound (0 for the first bucket if its bound is
 * positive) to this bucket's upper bound. The +Inf bucket returns the
 * largest finite bound. Precision: the true rank-th value lies in the same
 * bucket, so the error is below the bucket's width -- 2^-p of the value
 * for a log-linear histogram of precision p. pcpu_snapshot_quantile() is
 * the same over a snapshot (pcpu/expose.h).
 * Returns NaN with errno EINVAL for q outside [0, 1], nbuckets that is not
 * the histogram's, or no values. Thread-safe; async-signal-safe. Cost:
 * linear in the buckets.
 */
PCPU_API double pcpu_histogram_quantile(const pcpu_histogram_t *h, const uint64_t *counts,
					size_t nbuckets, double q);

PCPU_END_DECLS

#endif /* PCPU_HISTOGRAM_H */
