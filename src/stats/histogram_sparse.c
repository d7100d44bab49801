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
#include <unistd.h>

#include <pcpu/histogram.h>

#include "../core/core.h"
#include "metrics.h"

struct sparse {
	pcpu_zone_t *zone;            /* where the groups come from */
	uint64_t lost;                /* atomic: pcpu_histogram_lost() */
	size_t ngroups;
	/* Published (pcpu__histogram_sparse_publish()): the segment's table
	 * of the groups' places, which outside readers go by, and the
	 * header's generation, moved by 2 after each word stored. NULL: the
	 * groups are this process's alone. */
	uint64_t *table, *changes;
	pid_t owner;                  /* who writes the table (not a tree) */
	/* A tree zone's: every process of the tree has its own struct
	 * sparse for the series, and the table is the truth -- g[] is this
	 * process's cache of it, filled under the tree's lock. */
	int tree;
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

#define GROUP_SIZE (2 * PCPU__HISTOGRAM_GROUP * sizeof(struct pcpu_counter))
#define PAIR_SIZE (2 * sizeof(struct pcpu_counter))

/* Word k's size: a group, or (past the groups) the double sum's pair. */
static size_t word_size(const struct sparse *sp, size_t k)
{
	return k < sp->ngroups ? GROUP_SIZE : PAIR_SIZE;
}

/* Stores word k of the table: where object g lies, for the readers; then
 * the generation moves, so that a reader's cached directory is read
 * again. Only ever a 0 made the place (segment format 2.10). */
static void table_store(struct sparse *sp, size_t k, pcpu_counter_t g)
{
	unsigned no;
	uint64_t off;

	if (pcpu__zone_locate(sp->zone, g, &no, &off) != 0)
		return; /* not the zone's: cannot happen; readers see none */
	__atomic_store_n(&sp->table[k], pcpu__sparse_word(no, (uint32_t)off), __ATOMIC_RELEASE);
	if (sp->changes) /* NULL only for a tree's series adopted, before its SERIES_ADDED */
		__atomic_add_fetch(sp->changes, 2, __ATOMIC_RELEASE);
}

/* A tree's word k as this process's address (its chunk mapped if need
 * be), or NULL: none yet, or a word no writer stores. Without the tree's
 * lock the zone reads its shared state atomically (core.h). */
static pcpu_counter_t table_load(struct sparse *sp, size_t k)
{
	uint64_t w = __atomic_load_n(&sp->table[k], __ATOMIC_ACQUIRE);
	uint32_t hi = (uint32_t)(w >> 32), lo = (uint32_t)w;

	if (!(hi & lo & 1))
		return NULL;
	return pcpu__zone_tree_adopt(sp->zone, hi >> 1, lo & ~1u, word_size(sp, k));
}

/* g[k] set to g unless a thread of this process set it first: the one
 * kept. */
static pcpu_counter_t cache(struct sparse *sp, size_t k, pcpu_counter_t g)
{
	pcpu_counter_t none = NULL;

	if (!__atomic_compare_exchange_n(&sp->g[k], &none, g, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
		return none; /* the same place: both came from the table */
	return g;
}

/* A tree's group k: the table's, else made here and stored there, under
 * the tree's lock so that the tree makes it once. */
static pcpu_counter_t tree_group(struct sparse *sp, size_t k)
{
	pcpu_counter_t g;

	if (pcpu__zone_tree_lock(sp->zone) != 0)
		return NULL;
	g = table_load(sp, k);
	if (!g && !__atomic_load_n(&sp->table[k], __ATOMIC_RELAXED) &&
	    (g = pcpu_zone_alloc(sp->zone, word_size(sp, k), PAIR_SIZE)))
		table_store(sp, k, g);
	pcpu__zone_tree_unlock(sp->zone);
	return g ? cache(sp, k, g) : NULL;
}

/* Group k of a sparse histogram, made if it is not yet: a zone object of
 * zeroed pairs (the zone zeroes what it frees, so its words are zero in
 * every slot), published with a compare-and-swap so that two first
 * records make one; the loser frees its own. A published one's place
 * goes to the table after -- by the owner only: a fork() child's zone is
 * a private copy, whose places mean nothing in the file, and its segment
 * has put private zeros where the table was (or unmapped it, if that
 * failed: src/segment/writer.c). A tree's: see
 * tree_group(). NULL (counted in lost) when the zone cannot grow; errno
 * is left as it was: a record sets none. */
static pcpu_counter_t group_made(const pcpu_histogram_t *h, size_t k)
{
	struct sparse *sp = sparse_of(h);
	pcpu_counter_t g = __atomic_load_n(&sp->g[k], __ATOMIC_ACQUIRE), fresh;
	int err = errno;

	if (g)
		return g;
	if (sp->table && sp->tree) {
		fresh = tree_group(sp, k);
	} else if ((fresh = pcpu_zone_alloc(sp->zone, GROUP_SIZE, PAIR_SIZE))) {
		if (!__atomic_compare_exchange_n(&sp->g[k], &g, fresh, 0, __ATOMIC_RELEASE,
						 __ATOMIC_ACQUIRE)) {
			(void)pcpu_zone_free(sp->zone, fresh); /* g: the winner's */
			fresh = g;
		} else if (sp->table && getpid() == sp->owner) {
			table_store(sp, k, fresh);
		}
	}
	if (!fresh)
		__atomic_add_fetch(&sp->lost, 1, __ATOMIC_RELAXED);
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
	struct sparse *sp;
	size_t k = b / PCPU__HISTOGRAM_GROUP;
	pcpu_counter_t g;

	if (h->pcpu__c)
		return h->pcpu__c + 2 * b;
	/* The group's words were zeroed before its address was stored
	 * (release): hence the acquire. A tree's group another process made
	 * is read where the table says (this process's reads too: every
	 * process of a tree reads the same values). */
	sp = sparse_of(h);
	g = __atomic_load_n(&sp->g[k], __ATOMIC_ACQUIRE);
	if (!g && sp->table && sp->tree && (g = table_load(sp, k)))
		g = cache(sp, k, g);
	return g ? g + 2 * (b % PCPU__HISTOGRAM_GROUP) : NULL;
}

uint64_t pcpu_histogram_lost(const pcpu_histogram_t *h)
{
	return h && !h->pcpu__c ? __atomic_load_n(&sparse_of(h)->lost, __ATOMIC_RELAXED) : 0;
}

/* metrics.h */
int pcpu__histogram_sparse_init(pcpu_histogram_t *h, pcpu_zone_t *zone, size_t nbuckets, int wide,
				uint64_t *table)
{
	size_t n = ngroups_of(nbuckets);
	struct sparse *sp = calloc(1, sizeof *sp + (n + 1) * sizeof(pcpu_counter_t));

	if (!sp)
		return -1;
	sp->zone = zone;
	sp->ngroups = n;
	if (table) {
		/* Another process's series of a tree: its groups are where
		 * the table says; the double sum's pair was made with it. */
		sp->table = table;
		sp->tree = 1;
		if (wide && !(sp->g[n] = table_load(sp, n))) {
			free(sp);
			errno = EINVAL;
			return -1;
		}
	} else if (wide && !(sp->g[n] = pcpu_zone_alloc(zone, PAIR_SIZE, PAIR_SIZE))) {
		free(sp);
		return -1;
	}
	h->pcpu__groups = sp->g;
	return 0;
}

/* metrics.h */
int pcpu__histogram_sparse_publish(pcpu_histogram_t *h, uint64_t *table, uint64_t *changes)
{
	struct sparse *sp;
	size_t k;

	if (h->pcpu__c) {
		errno = EINVAL;
		return -1;
	}
	sp = sparse_of(h);
	if (sp->table && sp->table != table) {
		errno = EBUSY;
		return -1;
	}
	sp->table = table;
	sp->changes = changes;
	sp->owner = getpid();
	sp->tree = pcpu__zone_is_tree(sp->zone);
	/* What was made before (the double sum's pair, with its series),
	 * where no word says it yet. */
	for (k = 0; k < sp->ngroups + (h->pcpu__wide != 0); k++)
		if (sp->g[k] && !__atomic_load_n(&table[k], __ATOMIC_ACQUIRE))
			table_store(sp, k, sp->g[k]);
	return 0;
}

/* metrics.h */
const uint64_t *pcpu__histogram_sparse_table(const pcpu_histogram_t *h)
{
	return h->pcpu__c ? NULL : sparse_of(h)->table;
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
