/* SPDX-License-Identifier: MIT */
/*
 * The buckets a histogram family exposes, as the writers expose them: which
 * bounds become an `le` (export_buckets, the +Inf bucket always), their
 * cumulative counts, and each `le` as text. Public so that a reader of
 * snapshots in another language (the Python package's prometheus_client
 * collector) exposes the same buckets with the same strings as
 * pcpu_snapshot_write(), instead of deriving them again.
 */
#include <errno.h>
#include <math.h>

#include <pcpu/expose.h>

#include "stats_internal.h"

size_t pcpu_snapshot_histogram_buckets(const struct pcpu_snapshot_family *f, const uint64_t *counts,
				       size_t *index, uint64_t *cumulative, size_t cap)
{
	size_t b, n = 0, x = 0; /* x: the next of export_buckets */
	uint64_t cum = 0;

	if (!f || !pcpu__has_buckets(f->type) || f->nbuckets == 0 || (cap && cumulative && !counts)) {
		errno = EINVAL;
		return 0;
	}
	for (b = 0; b < f->nbuckets; b++) {
		if (counts)
			cum += counts[b]; /* modulo 2^64, as the writers sum */
		if (!pcpu__bucket_exposed(f, b, &x))
			continue;
		if (n < cap) {
			if (index)
				index[n] = b;
			if (cumulative)
				cumulative[n] = cum;
		}
		n++;
	}
	return n;
}

int pcpu_snapshot_bucket_le(const struct pcpu_snapshot_family *f, size_t b, char *out, size_t cap)
{
	double v;

	if (!f || !out || !pcpu__has_buckets(f->type) || b >= f->nbuckets ||
	    (b + 1 < f->nbuckets && !f->bucket_upper) || f->scale_exp10 > PCPU_STATS_SCALE_MAX ||
	    f->scale_exp10 < -PCPU_STATS_SCALE_MAX) {
		errno = EINVAL;
		return -1;
	}
	/* What the writers' `le` is (pcpu__fmt_bound(), a faster path to the
	 * same digits): the bound scaled, canonical; "+Inf" for the last. */
	v = b + 1 == f->nbuckets ? INFINITY
				 : pcpu_stats_scale((double)f->bucket_upper[b], f->scale_exp10);
	return pcpu_format_double(out, cap, v, PCPU_FORMAT_NUMBER_CANONICAL);
}
