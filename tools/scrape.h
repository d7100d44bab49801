/* SPDX-License-Identifier: MIT */
/*
 * What the exporter's scrape files share (scrape.c assembles the answer,
 * scrape_read.c reads the segments within the scrape's byte budget); the
 * rest of pcpustat sees only pcpustat.h's scrape_*().
 */
#ifndef PCPUSTAT_SCRAPE_H
#define PCPUSTAT_SCRAPE_H

#include <stddef.h>

#include "pcpustat.h"

/* One segment of a /metrics scrape: how it is opened, what reading it
 * gave, and how it is reported (pcpu_segment_up). */
struct seg {
	char key[128]; /* what it is opened by */
	char name[65];
	char pid[16];  /* "" when unknown */
	struct pcpu_reader_snapshot *snap;
	const char *labels[3]; /* pcpu_segment, pcpu_pid, and reason for pcpu_segment_up */
	int ok, dup, too_large;
	/* Listed (no targets): what the listing said, and whether it found
	 * the segment cannot be served; omitted: down, and left out of the
	 * exposition, counted in pcpu_segments_omitted (its owner has
	 * --max-down down segments reported already). */
	const struct pcpu_segment_info *info;
	uint64_t created_ns; /* publication time, from the reader (0: not read) */
	int known_down, omitted;
	const struct seg *first; /* a duplicate's: the one served instead */
	const char *reason; /* not ok: a word of pcpu_reader_reason()'s vocabulary */
	int err;       /* errno of a failure that may fail the whole scrape */
	char msg[320];
};

/* Takes `bytes` from the budget *left (--max-bytes): 0, or -1 when it does
 * not have them (then *left is unchanged). */
static inline int charge(size_t *left, size_t bytes)
{
	if (bytes > *left)
		return -1;
	*left -= bytes;
	return 0;
}

/* scrape_read.c: reads every segment of segs[0..n) (their key, info and
 * known_down set) within the budget *left: 0, each ok or failed with a
 * reason, and *left what remains; or -1 with *err ENOMEM, or EFBIG: the
 * segments together are over the budget, and the scrape fails. With
 * cf->keep_readers, the readers of st (NULL: none) are used and kept. */
int read_all(const struct scrape_config *cf, struct scrape_state *st, struct seg *segs, size_t n, size_t *left,
	     int *err);
/* Reads one segment (g's key and info set) into g within the budget *left,
 * with a kept reader where there is one: g->ok, or g->reason and g->msg
 * (and g->err: ENOMEM, EFBIG). */
void read_segment(const struct scrape_config *cf, struct scrape_state *st, struct seg *g, size_t *left);
/* Closes the kept readers no scrape used in the last few calls (segments
 * gone); one call after each /metrics scrape. */
void kept_sweep(struct scrape_state *st);
/* Closes every kept reader. */
void kept_free(struct scrape_state *st);

#endif /* PCPUSTAT_SCRAPE_H */
