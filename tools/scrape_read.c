/* SPDX-License-Identifier: MIT */
/*
 * Reading the segments of a /metrics scrape within its byte budget
 * (--max-bytes): each is opened afresh with the exporter's credentials and
 * the reader's owner checks (pcpu_reader_open()), and its snapshot charged
 * to the budget. The budget bounds the scrape's memory whatever the
 * segments are; how a segment too large by itself is told from segments
 * too large together is read_all()'s comment.
 *
 * Readers kept open (cf->keep_readers, `pcpustat serve`): a reader's next
 * snapshot of a directory that did not change reads only the values, not
 * the whole directory again (issue 51: a scrape cost 15x the writer's own
 * exposition). A kept reader is the listed file it was opened for: a file
 * listed under the same name with another publication time (created_ns)
 * is another segment, opened anew; a reader whose writer is gone or
 * unpublished (ESRCH) is opened anew once, for a named target that now
 * names another process's segment. The trust checks are made at open, on
 * the descriptor the reader keeps; every snapshot still checks the header
 * against the file and its writer.
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

/* ---- readers kept between scrapes ---------------------------------------------------- */

/* Sweeps a kept reader may go unused before it is closed: /metrics and
 * /metrics/SEGMENT keep readers under different keys (a file name, a
 * target), and one endpoint scraped less often than the other must not
 * lose its readers (a full read each time) to the other's sweeps. */
#define KEPT_GRACE 8

struct scrape_kept {
	char key[128];
	pcpu_reader_t *r;
	unsigned long used; /* the sweep count when it was last used */
};

static struct scrape_kept *kept_find(struct scrape_state *st, const char *key)
{
	size_t i;

	for (i = 0; st && i < st->nkept; i++)
		if (strcmp(st->kept[i].key, key) == 0)
			return &st->kept[i];
	return NULL;
}

static void kept_forget(struct scrape_state *st, struct scrape_kept *k)
{
	pcpu_reader_close(k->r);
	*k = st->kept[--st->nkept];
}

/* Keeps r (opened by key) if there is room: 1 if kept, else 0. */
static int kept_add(const struct scrape_config *cf, struct scrape_state *st, const char *key, pcpu_reader_t *r)
{
	struct scrape_kept *k;

	if (!st || st->nkept >= cf->keep_readers)
		return 0;
	if (!st->kept) {
		st->kept = calloc(cf->keep_readers, sizeof *st->kept);
		if (!st->kept)
			return 0;
	}
	k = &st->kept[st->nkept++];
	snprintf(k->key, sizeof k->key, "%s", key);
	k->r = r;
	k->used = st->sweeps;
	return 1;
}

void kept_sweep(struct scrape_state *st)
{
	size_t i = 0;

	if (!st)
		return;
	st->sweeps++;
	while (i < st->nkept) {
		if (st->sweeps - st->kept[i].used > KEPT_GRACE) {
			kept_forget(st, &st->kept[i]);
			continue;
		}
		i++;
	}
}

void kept_free(struct scrape_state *st)
{
	while (st->nkept)
		kept_forget(st, &st->kept[st->nkept - 1]);
	free(st->kept);
	st->kept = NULL;
}

/* The reader for g: a kept one (*kept set) if it is still g's segment,
 * else one opened now. NULL with errno and pcpu_reader_error() set. */
static pcpu_reader_t *reader_for(const struct scrape_config *cf, struct scrape_state *st, struct seg *g,
				 size_t left, struct scrape_kept **kept)
{
	struct pcpu_reader_options ro = cf->ropt;
	struct scrape_kept *k = cf->keep_readers ? kept_find(st, g->key) : NULL;

	*kept = NULL;
	if (k && g->info && g->info->created_ns != pcpu_reader_created_ns(k->r))
		kept_forget(st, k); /* another file under the name: another segment */
	else if (k) {
		k->used = st->sweeps;
		pcpu_reader_set_max_bytes(k->r, left);
		*kept = k;
		return k->r;
	}
	ro.max_bytes = left;
	return pcpu_reader_open(g->key, &ro);
}

/* Reads one segment into g within the budget: ok, or reason and msg (and
 * err when the failure may be the scrape's, not the segment's: ENOMEM, the
 * budget). */
void read_segment(const struct scrape_config *cf, struct scrape_state *st, struct seg *g, size_t *left)
{
	struct scrape_kept *kept;
	pcpu_reader_t *r;
	size_t bytes;
	int rc;

	r = reader_for(cf, st, g, *left ? *left : 1, &kept);
	if (!r) {
		if (errno == ENOMEM)
			g->err = ENOMEM;
		seg_fail(g, pcpu_reader_reason(errno), pcpu_reader_error());
		return;
	}
	rc = pcpu_reader_snapshot(r, 0, &g->snap);
	if (rc < 0 && kept && errno == ESRCH) {
		/* The kept reader's writer is gone: the name may be another's
		 * now (a named target). Once, opened anew. */
		kept_forget(st, kept);
		r = reader_for(cf, st, g, *left ? *left : 1, &kept);
		if (!r) {
			if (errno == ENOMEM)
				g->err = ENOMEM;
			seg_fail(g, pcpu_reader_reason(errno), pcpu_reader_error());
			return;
		}
		rc = pcpu_reader_snapshot(r, 0, &g->snap);
	}
	snprintf(g->name, sizeof g->name, "%s", pcpu_reader_name(r));
	snprintf(g->pid, sizeof g->pid, "%d", (int)pcpu_reader_pid(r));
	g->created_ns = pcpu_reader_created_ns(r); /* listed or named alike */
	if (rc < 0) {
		if (errno == ENOMEM || errno == EFBIG)
			g->err = errno;
		seg_fail(g, pcpu_reader_reason(errno), pcpu_reader_error());
		g->snap = NULL;
		if (kept)
			kept_forget(st, kept); /* read anew next time */
		else
			pcpu_reader_close(r);
		return;
	}
	if (!kept && !kept_add(cf, st, g->key, r))
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
int read_all(const struct scrape_config *cf, struct scrape_state *st, struct seg *segs, size_t n, size_t *left_out,
	     int *err)
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
		read_segment(cf, st, g, &left);
		if (g->err == ENOMEM) {
			*err = ENOMEM;
			return -1;
		}
		if (g->err == EFBIG && !alone) {
			for (j = 0; j < n; j++)
				if (!segs[j].too_large)
					seg_reset(&segs[j]);
			left = budget;
			read_segment(cf, st, g, &left);
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
