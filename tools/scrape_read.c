/* SPDX-License-Identifier: MIT */
/*
 * Reading the segments of a /metrics scrape within its byte budget
 * (--max-bytes): each is opened afresh with the exporter's credentials and
 * the reader's owner checks (pcpu_reader_open()), and its snapshot charged
 * to the budget. The budget bounds the scrape's memory whatever the
 * segments are; how a segment too large by itself is told from segments
 * too large together is read_all()'s comment.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scrape.h"

/* Bytes a snapshot tree holds, as charged to the budget. */
static size_t snapshot_bytes(const struct pcpu_snapshot *s)
{
	size_t b = sizeof *s, f, i;
	unsigned l;

	for (f = 0; f < s->nfamilies; f++) {
		const struct pcpu_snapshot_family *fa = &s->families[f];

		b += sizeof *fa + strlen(fa->name) + (fa->help ? strlen(fa->help) : 0) +
		     fa->nlabels * (sizeof(char *) + PCPU_STATS_LABEL_NAME_MAX / 8) +
		     fa->nbuckets * sizeof(int64_t);
		for (i = 0; i < fa->nseries; i++) {
			b += sizeof fa->series[i] + (fa->nlabels + 2) * sizeof(char *) +
			     (pcpu_metric_type_info(fa->type)->value == PCPU_VALUE_BUCKETS
				      ? fa->nbuckets * sizeof(uint64_t) : 0);
			for (l = 0; l < fa->nlabels; l++)
				b += strlen(fa->series[i].label_values[l]) + 1;
		}
	}
	return b;
}

static void seg_fail(struct seg *g, const char *reason, const char *msg)
{
	g->ok = 0;
	g->reason = reason;
	snprintf(g->msg, sizeof g->msg, "%s", msg);
}

/* Reads one segment into g within the budget: ok, or reason and msg (and
 * err when the failure may be the scrape's, not the segment's: ENOMEM, the
 * budget). */
static void read_segment(const struct scrape_config *cf, struct seg *g, size_t *left)
{
	struct pcpu_reader_options ro = cf->ropt;
	pcpu_reader_t *r;
	size_t bytes;

	ro.max_bytes = *left ? *left : 1;
	r = pcpu_reader_open(g->key, &ro);
	if (!r) {
		if (errno == ENOMEM)
			g->err = ENOMEM;
		seg_fail(g, pcpu_reader_reason(errno), pcpu_reader_error());
		return;
	}
	snprintf(g->name, sizeof g->name, "%s", pcpu_reader_name(r));
	snprintf(g->pid, sizeof g->pid, "%d", (int)pcpu_reader_pid(r));
	g->created_ns = pcpu_reader_created_ns(r); /* listed or named alike */
	if (pcpu_reader_snapshot(r, 0, &g->snap) < 0) {
		if (errno == ENOMEM || errno == EFBIG)
			g->err = errno;
		seg_fail(g, pcpu_reader_reason(errno), pcpu_reader_error());
		g->snap = NULL;
		pcpu_reader_close(r);
		return;
	}
	pcpu_reader_close(r);
	bytes = 2 * snapshot_bytes(&g->snap->snapshot);
	if (charge(left, bytes) < 0) {
		pcpu_reader_snapshot_free(g->snap);
		g->snap = NULL;
		g->err = EFBIG;
		seg_fail(g, "too_large", "over the scrape's byte limit");
		return;
	}
	g->ok = 1;
}

/* Forgets what read_segment() found, keeping what the listing said. */
static void seg_reset(struct seg *g)
{
	struct seg keep = *g;

	pcpu_reader_snapshot_free(g->snap);
	memset(g, 0, sizeof *g);
	memcpy(g->key, keep.key, sizeof keep.key);
	g->info = keep.info;
	g->known_down = keep.known_down;
}

/*
 * Reads every segment within `budget` bytes: 0, or -1 with *err (ENOMEM,
 * or EFBIG: together they are over the budget). A segment over the budget
 * by itself is that segment's failure (too_large), not the scrape's: one
 * planted huge segment must not fail every scrape. Whether it is over by
 * itself does not depend on the order of reading: when a read fails with
 * part of the budget spent, the others are let go and it is read alone;
 * if it fits, the scrape is over the budget (EFBIG); if not, it is left
 * out and the others are read again. Memory never exceeds the budget;
 * each segment too large costs at most one more pass.
 */
int read_all(const struct scrape_config *cf, struct seg *segs, size_t n, size_t *left_out, int *err)
{
	size_t i, j, left, budget = *left_out, passes = 0;

again:
	/* Each pass but the last finds one more segment too large; a
	 * segment that keeps changing size cannot make it loop. */
	if (passes++ > n) {
		*err = EFBIG;
		return -1;
	}
	left = budget;
	for (i = 0; i < n; i++) {
		struct seg *g = &segs[i];
		int alone = left == budget;

		if (g->too_large)
			continue;
		seg_reset(g);
		read_segment(cf, g, &left);
		if (g->err == ENOMEM) {
			*err = ENOMEM;
			return -1;
		}
		if (g->err == EFBIG && !alone) {
			for (j = 0; j < n; j++)
				if (!segs[j].too_large)
					seg_reset(&segs[j]);
			left = budget;
			read_segment(cf, g, &left);
			if (g->ok || g->err == ENOMEM) {
				*err = g->ok ? EFBIG : ENOMEM;
				return -1;
			}
			if (g->err != EFBIG)
				goto again; /* it changed meanwhile: read all again */
		}
		if (g->err == EFBIG) {
			g->too_large = 1;
			g->err = 0;
			snprintf(g->msg, sizeof g->msg, "larger than --max-bytes (%zu bytes) by itself",
				 cf->max_bytes);
			if (!alone)
				goto again;
		}
	}
	*left_out = left;
	return 0;
}
