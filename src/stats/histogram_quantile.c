/* SPDX-License-Identifier: MIT */
/*
 * Quantiles from histogram reads: pcpu_histogram_quantile() over a live
 * histogram's counts, pcpu_snapshot_quantile() over a snapshot family's,
 * both Prometheus' histogram_quantile() rule (pcpu/histogram.h).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>

#include <pcpu/histogram.h>
#include <pcpu/expose.h>

#include "stats_internal.h"
#include "metrics.h"

/*
 * The rank rule both quantile functions share, Prometheus'
 * histogram_quantile() over the same buckets: rank = q * count, the bucket
 * is the first non-empty one whose cumulative count reaches the rank, and
 * the estimate interpolates linearly between the bucket's bounds. Gives
 * the bucket (nbuckets - 1 for +Inf) and the fraction of it below the
 * rank, or -1 with EINVAL (q outside [0, 1], no observations).
 */
static int quantile_locate(const uint64_t *counts, size_t nbuckets, double q, size_t *bucket,
			   double *frac)
{
	uint64_t total = 0, cum = 0;
	double rank;
	size_t b;

	if (!counts || nbuckets < 1 || !(q >= 0.0 && q <= 1.0)) {
		errno = EINVAL;
		return -1;
	}
	for (b = 0; b < nbuckets; b++)
		total += counts[b];
	if (!total) {
		errno = EINVAL;
		return -1;
	}
	rank = q * (double)total;
	for (b = 0; b + 1 < nbuckets; b++) {
		if (counts[b] && (double)(cum + counts[b]) >= rank)
			break;
		cum += counts[b];
	}
	*bucket = b;
	*frac = b + 1 < nbuckets ? (rank - (double)cum) / (double)counts[b] : 1.0;
	if (*frac < 0)
		*frac = 0; /* q = 0: the first non-empty bucket's lower bound */
	return 0;
}

/* Bucket b's interpolation interval from the upper bounds `hi` of b and
 * `prev` of b - 1: Prometheus starts the first bucket at 0 when its bound
 * is positive, and returns a bound <= 0 as it is. */
static double interpolate(size_t b, double prev, double hi, double frac)
{
	double lo = b == 0 ? (hi > 0 ? 0.0 : hi) : prev;

	return lo + (hi - lo) * frac;
}

double pcpu_histogram_quantile(const pcpu_histogram_t *h, const uint64_t *counts,
			       size_t nbuckets, double q)
{
	int64_t prev = 0, hi;
	size_t b;
	double frac;

	if (!h || nbuckets != h->pcpu__nbuckets || nbuckets < 2) {
		errno = EINVAL;
		return NAN;
	}
	if (quantile_locate(counts, nbuckets, q, &b, &frac) < 0)
		return NAN;
	if (b + 1 == nbuckets) { /* +Inf: all we know is the largest finite bound */
		b = nbuckets - 2;
		frac = 1.0;
	}
	pcpu_histogram_bucket_range(h, b, NULL, &hi);
	if (b)
		pcpu_histogram_bucket_range(h, b - 1, NULL, &prev);
	return interpolate(b, (double)prev, (double)hi, frac);
}

double pcpu_snapshot_quantile(const struct pcpu_snapshot_family *f, const uint64_t *counts,
			      double q)
{
	size_t b;
	double frac, prev;

	if (!f || !pcpu__has_buckets(f->type) || f->nbuckets < 2 || !f->bucket_upper) {
		errno = EINVAL;
		return NAN;
	}
	if (quantile_locate(counts, f->nbuckets, q, &b, &frac) < 0)
		return NAN;
	if (b + 1 == f->nbuckets) {
		b = f->nbuckets - 2;
		frac = 1.0;
	}
	prev = b ? pcpu__scale_i64(f->bucket_upper[b - 1], f->scale_exp10) : 0.0;
	return interpolate(b, prev, pcpu__scale_i64(f->bucket_upper[b], f->scale_exp10), frac);
}
