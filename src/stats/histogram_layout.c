/* SPDX-License-Identifier: MIT */
/*
 * Log-linear bucket arithmetic (histogram_layout.h): the one place that
 * turns a precision into bucket counts and bounds, for the histograms, the
 * registry's exposed bounds and the segment reader alike.
 */
#include "histogram_layout.h"

void pcpu__loglinear_range(unsigned p, uint64_t b, int64_t *lo, int64_t *hi)
{
	uint64_t g = b >> p, j = b & (((uint64_t)1 << p) - 1), l;

	if (g == 0) {
		*lo = *hi = (int64_t)j;
		return;
	}
	l = (((uint64_t)1 << p) + j) << (g - 1);
	*lo = (int64_t)l;
	*hi = (int64_t)(l + ((uint64_t)1 << (g - 1)) - 1);
}

int64_t pcpu__loglinear_upper(unsigned p, uint64_t b)
{
	int64_t lo, hi;

	pcpu__loglinear_range(p, b, &lo, &hi);
	return hi;
}

size_t pcpu__loglinear_nbuckets(unsigned p, int64_t max_value, uint64_t *limit)
{
	unsigned e = 63u - (unsigned)__builtin_clzll((uint64_t)max_value);

	if (e < p)
		e = p; /* at least groups 0 and 1 */
	*limit = (uint64_t)1 << (e + 1);
	return ((size_t)(e - p + 2) << p) + 1;
}

int pcpu__loglinear_valid(unsigned p, uint64_t nbuckets)
{
	uint64_t k;

	if (p > PCPU__LOGLINEAR_MAX_BITS || nbuckets < 2)
		return 0;
	if ((nbuckets - 1) & (((uint64_t)1 << p) - 1))
		return 0;
	k = (nbuckets - 1) >> p;
	/* k = e - p + 2 groups with e, the top bit of max_value, <= 62: the
	 * largest finite bound is below 2^63. */
	return k >= 2 && k <= 64 - (uint64_t)p;
}
