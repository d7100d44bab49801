/* SPDX-License-Identifier: MIT */
/*
 * Sparse histograms (PCPU_HISTOGRAM_SPARSE, pcpu/histogram.h): the bucket
 * pairs in groups made at their first record. histogram.c creates, reads
 * and resets every histogram through the functions here (metrics.h); the
 * inline record of pcpu/histogram.h (pcpu__histogram_sparse_add()) calls
 * pcpu__histogram_sparse_record() where a bucket's group is not made yet.
 *
 * The record path indexes h->pcpu__groups (pcpu/histogram.h); that array
 * is the tail of this block, so the library finds the rest from it. Why
 * groups of 8 buckets rather than one pair each: the values of a series
 * fall in a run of adjacent buckets, so 8 cost about one allocation and
 * one pointer where a bucket each costs eight, while a value in a new
 * group wastes at most 7 pairs (112 bytes) per slot that records. */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include <pcpu/histogram.h>

#include "metrics.h"

struct sparse {
	pcpu_zone_t *zone;            /* where the groups come from */
	uint64_t lost;                /* atomic: pcpu_histogram_lost() */
	size_t ngroups;
	pcpu_counter_t g[];           /* ngroups groups, then the double sum's pair */
};

static struct sparse *sparse_of(const pcpu_histogram_t *h)
{
	return (struct sparse *)(void *)((char *)h->pcpu__groups - offsetof(struct sparse, g));
}

static size_t ngroups_of(size_t nbuckets)
{
	return (nbuckets + PCPU__HISTOGRAM_GROUP - 1) / PCPU__HISTOGRAM_GROUP;
}

/* Group k of a sparse histogram, made if it is not yet: a zone object of
 * zeroed pairs (the zone zeroes what it frees, so its words are zero in
 * every slot), published with a compare-and-swap so that two first
 * records make one; the loser frees its own. NULL (counted in lost) when
 * the zone cannot grow; errno is left as it was: a record sets none. */
static pcpu_counter_t group_made(const pcpu_histogram_t *h, size_t k)
{
	struct sparse *sp = sparse_of(h);
	pcpu_counter_t g = __atomic_load_n(&sp->g[k], __ATOMIC_ACQUIRE), fresh;
	int err = errno;

	if (g)
		return g;
	fresh = pcpu_zone_alloc(sp->zone, 2 * PCPU__HISTOGRAM_GROUP * sizeof(struct pcpu_counter),
				2 * sizeof(struct pcpu_counter));
	if (!fresh) {
		__atomic_add_fetch(&sp->lost, 1, __ATOMIC_RELAXED);
		errno = err;
		return NULL;
	}
	if (!__atomic_compare_exchange_n(&sp->g[k], &g, fresh, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
		(void)pcpu_zone_free(sp->zone, fresh); /* g: the winner's */
		fresh = g;
	}
	errno = err;
	return fresh;
}

/* metrics.h */
pcpu_counter_t pcpu__histogram_pair_made(const pcpu_histogram_t *h, size_t b)
{
	pcpu_counter_t g;

	if (h->pcpu__c)
		return h->pcpu__c + 2 * b;
	g = group_made(h, b / PCPU__HISTOGRAM_GROUP);
	return g ? g + 2 * (b % PCPU__HISTOGRAM_GROUP) : NULL;
}

void pcpu__histogram_sparse_record(const pcpu_histogram_t *h, int64_t v, uint64_t n)
{
	size_t b = pcpu__histogram_locate(h, &v);
	pcpu_counter_t pair = pcpu__histogram_pair_made(h, b);

	if (pair)
		pcpu__histogram_add_pair(pair, (int64_t)n, (int64_t)((uint64_t)v * n));
}

pcpu_counter_t pcpu__histogram_pair_of(const pcpu_histogram_t *h, size_t b)
{
	pcpu_counter_t g;

	if (h->pcpu__c)
		return h->pcpu__c + 2 * b;
	/* The group's words were zeroed before its address was stored
	 * (release): hence the acquire. */
	g = __atomic_load_n(&h->pcpu__groups[b / PCPU__HISTOGRAM_GROUP], __ATOMIC_ACQUIRE);
	return g ? g + 2 * (b % PCPU__HISTOGRAM_GROUP) : NULL;
}

uint64_t pcpu_histogram_lost(const pcpu_histogram_t *h)
{
	return h && !h->pcpu__c ? __atomic_load_n(&sparse_of(h)->lost, __ATOMIC_RELAXED) : 0;
}

/* metrics.h */
int pcpu__histogram_sparse_init(pcpu_histogram_t *h, pcpu_zone_t *zone, size_t nbuckets, int wide)
{
	size_t n = ngroups_of(nbuckets);
	struct sparse *sp = calloc(1, sizeof *sp + (n + 1) * sizeof(pcpu_counter_t));

	if (!sp)
		return -1;
	sp->zone = zone;
	sp->ngroups = n;
	if (wide && !(sp->g[n] = pcpu_zone_alloc(zone, 2 * sizeof(struct pcpu_counter),
						 2 * sizeof(struct pcpu_counter)))) {
		free(sp);
		return -1;
	}
	h->pcpu__groups = sp->g;
	return 0;
}

/* metrics.h */
void pcpu__histogram_sparse_free(pcpu_histogram_t *h)
{
	struct sparse *sp = sparse_of(h);
	size_t k;

	for (k = 0; k <= sp->ngroups; k++)
		if (sp->g[k])
			(void)pcpu_zone_free(sp->zone, sp->g[k]);
	free(sp);
}

pcpu_counter_t pcpu__histogram_sparse_sum_pair(const pcpu_histogram_t *h)
{
	return sparse_of(h)->g[sparse_of(h)->ngroups];
}
