/* SPDX-License-Identifier: MIT */
/*
 * Histogram bucket layouts as pure arithmetic: where the buckets of a
 * log-linear layout begin and end, and which bucket bounds a layout exposes
 * as `le`. One module for the statistics layer (histogram.c, registry.c)
 * and the segment reader, which rebuilds a writer's bounds from the layout
 * it reads and must derive exactly the writer's numbers.
 *
 * Libc only, no state: the segment reader's fuzz target builds it alone.
 * Nothing here is exported from the shared library.
 */
#ifndef PCPU_STATS_HISTOGRAM_LAYOUT_H
#define PCPU_STATS_HISTOGRAM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"

/* The largest log-linear precision (PCPU_HISTOGRAM_MAX_BITS; histogram.c
 * checks the two agree). */
#define PCPU__LOGLINEAR_MAX_BITS 14

/*
 * Log-linear buckets of precision p: with g = b >> p and j = b & (2^p - 1),
 *     g = 0:  the single value j                       (values < 2^p)
 *     g >= 1: [(2^p + j) << (g-1), ((2^p + j + 1) << (g-1)) - 1]
 * so group 1 is [2^p, 2^(p+1)) one value per bucket, and every later group
 * spans one power of two cut into 2^p buckets of width 2^(g-1).
 * pcpu_histogram_bucket_of() (pcpu/histogram.h) inverts this with one
 * count-leading-zeros. Finite bucket b's inclusive bounds; b must be below
 * the layout's bucket count minus one (the +Inf bucket is the caller's).
 */
PCPU_HIDDEN void pcpu__loglinear_range(unsigned p, uint64_t b, int64_t *lo, int64_t *hi);

/* Finite bucket b's inclusive upper bound: pcpu__loglinear_range()'s hi. */
PCPU_HIDDEN int64_t pcpu__loglinear_upper(unsigned p, uint64_t b);

/* The bucket count (+Inf included) of a log-linear layout of precision p
 * (<= PCPU__LOGLINEAR_MAX_BITS) covering 0..max_value (>= 1), and in
 * *limit the first value that goes to +Inf. */
PCPU_HIDDEN size_t pcpu__loglinear_nbuckets(unsigned p, int64_t max_value, uint64_t *limit);

/* Whether nbuckets is a bucket count pcpu__loglinear_nbuckets() gives for
 * precision p: (k << p) + 1 with k >= 2, and every bound below 2^63. What a
 * segment reader checks before it rebuilds the bounds of untrusted input. */
PCPU_HIDDEN int pcpu__loglinear_valid(unsigned p, uint64_t nbuckets);

/*
 * The `le` bounds a log-linear histogram exposes (pcpu/histogram.h,
 * export_per_octave): bucket upper bound u is exposed when u >= min and
 * u + 1 has at most lg + 1 significant bits, i.e. u + 1 = 2^e * (1 + k /
 * 2^lg). A function of the bound alone, so the registry and a segment
 * reader (which rebuilds the bounds from the precision) derive the same
 * set. Writes the indices of the exposed bounds among upper[0..n) to out
 * (n entries at most) and returns how many.
 */
static inline size_t pcpu__export_list(const int64_t *upper, size_t n, unsigned lg, int64_t min,
				       uint32_t *out)
{
	size_t b, k = 0;

	for (b = 0; b < n; b++) {
		uint64_t v = (uint64_t)upper[b] + 1;
		unsigned top;

		if (upper[b] < min || upper[b] < 0)
			continue;
		top = 63u - (unsigned)__builtin_clzll(v);
		if (top <= lg || (v & (((uint64_t)1 << (top - lg)) - 1)) == 0)
			out[k++] = (uint32_t)b;
	}
	return k;
}

/*
 * The `le` bounds an exponential (native) histogram exposes
 * (pcpu/histogram.h, export_per_octave and export_min): of the buckets
 * whose upper bound u >= min (all of them for min <= 0), the zero bucket's
 * and those of native indices that are multiples of 2^(schema - lg): 2^lg
 * per power of two, every one for schema <= lg. A function of the layout
 * alone, so it is the same set from creation on. Bucket b >= 1 has native
 * index first + b - 1; n finite buckets with bounds upper[0..n) (read
 * only when min > 0).
 */
static inline size_t pcpu__native_export_rule(const int64_t *upper, int32_t first, size_t n,
					      int schema, unsigned lg, int64_t min, uint32_t *out)
{
	int64_t step = schema > (int)lg ? (int64_t)1 << (schema - (int)lg) : 1;
	size_t b, k = 0;

	for (b = 0; b < n; b++) {
		if (min > 0 && upper[b] < min)
			continue;
		if (b == 0 || ((int64_t)first + (int64_t)b - 1) % step == 0)
			out[k++] = (uint32_t)b;
	}
	return k;
}

/* How many of the n finite buckets (upper bounds upper[0..n), increasing)
 * an exponential layout's export rule considers: those whose bound is at
 * most max (pcpu/histogram.h, max_value), all of them for max <= 0. */
static inline size_t pcpu__native_export_limit(const int64_t *upper, size_t n, int64_t max)
{
	size_t b = 0;

	if (max <= 0)
		return n;
	while (b < n && upper[b] <= max)
		b++;
	return b;
}

/* The default rule (4 per power of two, from the zero bucket): what a
 * segment reader derives from the schema alone (docs/segment-format.md). */
static inline size_t pcpu__native_export_list(int32_t first, size_t n, int schema, uint32_t *out)
{
	return pcpu__native_export_rule(NULL, first, n, schema, 2, 0, out);
}

#endif /* PCPU_STATS_HISTOGRAM_LAYOUT_H */
