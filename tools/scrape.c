/* SPDX-License-Identifier: MIT */
/*
 * What `pcpustat serve` answers a scrape with: the served segments read
 * afresh, merged into one exposition by the library (pcpu_snapshot_merge_*),
 * each series labelled pcpu_segment="NAME", pcpu_pid="PID", plus
 * pcpu_segment_up{pcpu_segment, pcpu_pid, reason} per segment: 1 with an
 * empty reason (the same series as no reason label, to Prometheus), or 0
 * with a word saying why (pcpu_reader_reason()'s fixed vocabulary, plus
 * "conflict" and "duplicate", so the label's values stay bounded; the
 * details go to stderr once per change).
 *
 * Isolation: every scrape opens each segment with the exporter's own
 * credentials and the reader's owner checks, so a segment its user cannot
 * read is never exposed. A segment that fails -- unreadable, corrupted,
 * writer gone, larger than --max-bytes by itself, clashing with another
 * segment's metric names -- is left out whole and reported as up 0; never
 * a partial segment, never a failed scrape.
 *
 * Deterministic winners: segments are merged in the order of (name, pid,
 * readable first, file name or target). Of two whose families clash, the
 * first is served (the other: reason "conflict"); of several that are one
 * segment (name and pid: named twice on the command line, or the same file
 * name in two users' directories), the first is served and the others are
 * duplicates. Their pcpu_segment_up series would be identical, and an
 * exposition with a duplicate series is invalid -- one planted file would
 * fail every scrape -- so all of them share one series, reason "duplicate".
 *
 * Bounds: the bytes a scrape reads and allocates (snapshots, labelled
 * copies, the output) are charged to one budget (--max-bytes); a scrape
 * whose segments together are past it, or one that meets ENOMEM, fails
 * alone (503) and the next is served as usual (one segment past it by
 * itself is only that segment's failure: read_all() in scrape_read.c).
 * What is remembered between scrapes (the last message per segment, so
 * stderr says each change once, at most NOTES_PER_SCRAPE lines) is rebuilt
 * from each scrape's segments: segments that went away are forgotten.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "scrape.h"

/* The labels of every segment's series; pcpu_segment_up adds the reason
 * (empty when up). */
static const char *const EXTRA_LABELS[] = { "pcpu_segment", "pcpu_pid" };
static const char *const UP_LABELS[] = { "pcpu_segment", "pcpu_pid", "reason" };
static const char *const OMITTED_LABELS[] = { "uid" };
/* Lines on stderr per scrape: whoever can create files named like segments
 * must not be able to flood the log (or block the exporter on a full pipe). */
#define NOTES_PER_SCRAPE 20

/* ---- messages on stderr, once per change ---------------------------------------- */

/* A string as 64 bits: zlib's CRC-32 and the length. A collision costs at
 * most one log line said or not said, never a wrong exposition. */
static uint64_t fingerprint(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return s ? (uint64_t)crc32(0, (const Bytef *)s, (uInt)n) << 32 | (uint32_t)(n + 1) : 0;
}

static int cmp_note(const void *a, const void *b)
{
	const struct scrape_note *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

/* Reports what changed since the previous scrape and keeps only this
 * scrape's segments, as fingerprints in one sorted array (binary search;
 * no string per segment, which 20,000 junk names would scatter over the
 * heap): bounded by the segments that exist now. Best effort: without
 * memory it stays quiet. */
static void notes_update(const struct scrape_config *cf, struct scrape_state *st, const struct seg *segs,
			 size_t n)
{
	const char *who = cf->who ? cf->who : "pcpustat serve";
	struct scrape_note *now = malloc((n ? n : 1) * sizeof *now);
	size_t i, k = 0, said = 0;

	for (i = 0; i < n; i++) {
		const struct seg *g = &segs[i];
		const char *msg = g->ok ? NULL : g->msg;
		struct scrape_note want = { fingerprint(g->key), fingerprint(msg) }, *old;

		if (g->omitted)
			continue; /* pcpu_segments_omitted counts it */

		old = st->notes ? bsearch(&want, st->notes, st->nnotes, sizeof want, cmp_note) : NULL;
		if ((old ? old->msg != want.msg : msg != NULL) && said++ < NOTES_PER_SCRAPE) {
			if (msg)
				fprintf(stderr, "%s: %s: %s\n", who, g->key, msg);
			else
				fprintf(stderr, "%s: %s: readable again\n", who, g->key);
		}
		if (now)
			now[k++] = want;
	}
	if (said > NOTES_PER_SCRAPE)
		fprintf(stderr, "%s: ... and %zu more segments changed (pcpu_segment_up says which)\n", who,
			said - NOTES_PER_SCRAPE);
	if (now)
		qsort(now, k, sizeof *now, cmp_note);
	free(st->notes);
	st->notes = now;
	st->nnotes = now ? k : 0;
}

void scrape_state_free(struct scrape_state *st)
{
	kept_free(st);
	free(st->notes);
	st->notes = NULL;
	st->nnotes = 0;
}

/* ---- the segments served ---------------------------------------------------------- */

/* A segment name, pid or file name; never a path (HTTP clients choose it). */
int valid_target(const char *t)
{
	size_t i;

	if (!*t || strlen(t) > 100 || t[0] == '.' || t[0] == '-')
		return 0;
	for (i = 0; t[i]; i++)
		if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
		      (t[i] >= '0' && t[i] <= '9') || t[i] == '_' || t[i] == '.' || t[i] == '-'))
			return 0;
	return 1;
}

/* The order segments are merged in, and their winners: (name, pid, readable
 * first, key); the file's comment says why. */
static int cmp_seg(const void *a, const void *b)
{
	const struct seg *x = *(const struct seg *const *)a, *y = *(const struct seg *const *)b;
	int c = strcmp(x->name, y->name);

	if (!c)
		c = strcmp(x->pid, y->pid);
	if (!c)
		c = y->ok - x->ok; /* the readable one first */
	if (!c)
		c = strcmp(x->key, y->key);
	return c;
}

/* Name and pid of a segment never opened: from its file name as the
 * library parses it (pcpu_segment_list), else the key. */
static void name_from_listing(struct seg *g, const struct pcpu_segment_info *info)
{
	if (g->name[0])
		return;
	if (info) {
		snprintf(g->name, sizeof g->name, "%s", info->name);
		snprintf(g->pid, sizeof g->pid, "%d", (int)info->pid);
	} else {
		snprintf(g->name, sizeof g->name, "%.64s", g->key);
	}
}

static void fail_with(struct scrape_result *res, int status, const char *msg)
{
	res->status = status;
	snprintf(res->msg, sizeof res->msg, "%s", msg);
}

/* ---- what one user's junk may cost ------------------------------------------------- */

/* Down segments of one owner (a listed file's), for --max-down. */
struct owner {
	uid_t uid;
	size_t down, omitted;
	char label[16]; /* the uid, as pcpu_segments_omitted's label value */
};

static int cmp_owner(const void *a, const void *b)
{
	uid_t x = ((const struct owner *)a)->uid, y = ((const struct owner *)b)->uid;

	return (x > y) - (x < y);
}

/* The distinct owners of the listed segments, sorted: how many. */
static size_t owners_make(struct owner *o, const struct pcpu_segment_info *info, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		o[i].uid = info[i].owner;
	qsort(o, n, sizeof *o, cmp_owner);
	for (i = 0; i < n; i++)
		if (!k || o[k - 1].uid != o[i].uid)
			o[k++] = o[i];
	for (i = 0; i < k; i++)
		snprintf(o[i].label, sizeof o[i].label, "%u", (unsigned)o[i].uid);
	return k;
}

/* Counts a down segment of `uid` against --max-down: 1 if it is reported
 * (its own pcpu_segment_up), 0 if it is omitted (counted in
 * pcpu_segments_omitted). */
static int report_down(const struct scrape_config *cf, struct owner *o, size_t no, uid_t uid)
{
	struct owner key, *oc;

	key.uid = uid;
	oc = bsearch(&key, o, no, sizeof *o, cmp_owner);
	if (!oc)
		return 1;
	if (oc->down < cf->max_down) {
		oc->down++;
		return 1;
	}
	oc->omitted++;
	return 0;
}

/* ---- one /metrics scrape, step by step ------------------------------------------------ */

/* A /metrics scrape's working state, from the listing to the exposition.
 * What it allocates is charged to `left` (--max-bytes) and freed by
 * scrape_free(); each step below fails the scrape alone (res: 503, or 500
 * when the exposition cannot be written). */
struct scrape {
	size_t budget, left; /* the byte budget, and what is left of it */
	struct scrape_state *st; /* what is kept between scrapes (readers) */
	/* What is served: the targets (cf->targets), or the listing. */
	struct pcpu_segment_info *info; /* listed; NULL with targets */
	size_t n;
	/* Listed: per file, 0 omitted, 1 to read, 2 known down and reported;
	 * and the files' distinct owners, for --max-down. */
	unsigned char *keep;
	struct owner *owners;
	size_t nowners;
	/* The segments read or reported (nseg), and those exposed, in the
	 * order they are merged (nix). */
	struct seg *segs, **ix;
	size_t nseg, nix;
	/* pcpu_segment_up (fams[0]: ups) and pcpu_segments_omitted (fams[1]:
	 * oms, labelled omlabels), reserved first (without series: out of the
	 * exposition unless they get some), then merged with their series. */
	struct pcpu_snapshot_family fams[2];
	struct pcpu_snapshot upsnap;
	struct pcpu_snapshot_series *ups, *oms;
	const char **omlabels;
	size_t nup, nom;
	pcpu_snapshot_merge_t *m;
};

/* The command line's targets, or every segment listed: 0, or -1 with res
 * set (a listing that fails fails the scrape). */
static int scrape_list(const struct scrape_config *cf, struct scrape *sc, struct scrape_result *res)
{
	if (cf->ntargets) {
		sc->n = cf->ntargets;
	} else if (pcpu_segment_list(&cf->ropt, &sc->info, &sc->n) < 0) {
		res->status = 503;
		snprintf(res->msg, sizeof res->msg, "listing segments: %s", pcpu_reader_error());
		return -1;
	}
	sc->nseg = sc->n;
	return 0;
}

/*
 * Listed segments the listing found unservable (not a segment, unreadable,
 * writer gone) count against their owner's --max-down in the listing's
 * order (name, pid) before anything is read: past it they are not opened
 * again and get no memory, no series and no log line -- another user's junk
 * costs this scrape its listing (an lstat per file when empty:
 * pcpu_segment_list()) and one counter. Those within it are read again, for
 * the message. Sets keep, owners and nseg; 0, or -1 with res set.
 */
static int scrape_triage(const struct scrape_config *cf, struct scrape *sc, struct scrape_result *res)
{
	const struct pcpu_segment_info *info = sc->info;
	size_t i, n = sc->n;

	if (cf->ntargets)
		return 0; /* named on the command line: each is read */
	sc->owners = calloc(n ? n : 1, sizeof *sc->owners);
	sc->keep = calloc(n ? n : 1, 1);
	if (!sc->owners || !sc->keep || charge(&sc->left, n * (sizeof *sc->owners + 1)) < 0) {
		fail_with(res, 503, sc->owners && sc->keep ? "scrape over --max-bytes" : "out of memory");
		return -1;
	}
	sc->nowners = owners_make(sc->owners, info, n);
	for (i = 0, sc->nseg = 0; i < n; i++) {
		if (info[i].error == 0 &&
		    !(info[i].state == PCPU_SEGMENT_GONE && !(cf->ropt.flags & PCPU_READER_ALLOW_STALE)))
			sc->keep[i] = 1;
		else
			sc->keep[i] = report_down(cf, sc->owners, sc->nowners, info[i].owner) ? 2 : 0;
		sc->nseg += sc->keep[i] != 0;
	}
	return 0;
}

/* The arrays sized by the segments and owners, and the merge, charged to
 * the budget before anything is read: 0, or -1 with res set. */
static int scrape_alloc(struct scrape *sc, struct scrape_result *res)
{
	size_t nseg = sc->nseg ? sc->nseg : 1, nowners = sc->nowners ? sc->nowners : 1;

	sc->segs = calloc(nseg, sizeof *sc->segs);
	sc->ix = calloc(nseg, sizeof *sc->ix);
	sc->ups = calloc(nseg, sizeof *sc->ups);
	sc->oms = calloc(nowners, sizeof *sc->oms);
	sc->omlabels = calloc(nowners, sizeof *sc->omlabels);
	sc->m = pcpu_snapshot_merge_new();
	if (!sc->segs || !sc->ix || !sc->ups || !sc->oms || !sc->omlabels || !sc->m) {
		fail_with(res, 503, "out of memory");
		return -1;
	}
	if (charge(&sc->left, sc->nseg * (sizeof *sc->segs + sizeof *sc->ix + sizeof *sc->ups) +
				      sc->nowners * (sizeof *sc->oms + sizeof *sc->omlabels)) < 0) {
		fail_with(res, 503, "scrape over --max-bytes");
		return -1;
	}
	return 0;
}

/* Reads the segments kept (read_all()); those that fail only now count
 * against --max-down too, in the same order; the others not omitted go to
 * ix, named. 0, or -1 with res set (the scrape over its budget, ENOMEM). */
static int scrape_read(const struct scrape_config *cf, struct scrape *sc, struct scrape_result *res)
{
	struct seg *segs = sc->segs;
	size_t i, k;
	int err = 0;

	for (i = 0, k = 0; i < sc->n; i++) {
		if (sc->keep && !sc->keep[i])
			continue;
		snprintf(segs[k].key, sizeof segs[k].key, "%s", cf->ntargets ? cf->targets[i] : sc->info[i].file);
		segs[k].info = sc->info ? &sc->info[i] : NULL;
		segs[k].known_down = sc->keep && sc->keep[i] == 2;
		k++;
	}
	if (read_all(cf, sc->st, segs, sc->nseg, &sc->left, &err) < 0) {
		fail_with(res, 503, err == ENOMEM ? "out of memory" : "scrape over --max-bytes");
		return -1;
	}
	for (k = 0; k < sc->nseg; k++)
		if (segs[k].info && !segs[k].ok && !segs[k].known_down &&
		    !report_down(cf, sc->owners, sc->nowners, segs[k].info->owner))
			segs[k].omitted = 1;
	for (k = 0; k < sc->nseg; k++) {
		name_from_listing(&segs[k], segs[k].info);
		if (!segs[k].omitted)
			sc->ix[sc->nix++] = &segs[k];
	}
	return 0;
}

/* pcpu_segment_up and pcpu_segments_omitted, without series yet. */
static void up_families(struct scrape *sc)
{
	struct pcpu_snapshot_family *up = &sc->fams[0], *om = &sc->fams[1];

	memset(sc->fams, 0, sizeof sc->fams);
	up->name = "pcpu_segment_up";
	up->help = "1 if pcpustat read and exposed the segment, else 0 and the reason.";
	up->type = PCPU_METRIC_GAUGE;
	up->nlabels = 3;
	up->label_names = UP_LABELS;
	om->name = "pcpu_segments_omitted";
	om->help = "Segments of the user that could not be served and have no pcpu_segment_up series "
		   "(past --max-down of theirs).";
	om->type = PCPU_METRIC_GAUGE;
	om->nlabels = 1;
	om->label_names = OMITTED_LABELS;
	sc->upsnap.nfamilies = 2;
	sc->upsnap.families = sc->fams;
}

/* g is the same segment (name and pid) as prev, sorted before it: marked a
 * duplicate of the first of them, 1; else 0. */
static int mark_duplicate(struct seg *g, const struct seg *prev)
{
	if (!prev || strcmp(g->name, prev->name) != 0 || strcmp(g->pid, prev->pid) != 0)
		return 0;
	g->dup = 1;
	g->first = prev->dup ? prev->first : prev;
	snprintf(g->msg, sizeof g->msg, "segment %.64s of pid %s again (as %.100s): reported once, as that",
		 g->name, g->pid, g->first->key);
	g->ok = 0;
	g->reason = "duplicate";
	g->labels[2] = g->reason;
	return 1;
}

/*
 * Merges the segments in the order of (name, pid, readable first, key): of
 * two segments whose families clash, the first wins; of several that are
 * one segment (name and pid), the first is served and the others are
 * duplicates -- one pcpu_segment_up{reason="duplicate"} 0 for them all, so
 * that the series stay distinct. pcpu_segment_up and pcpu_segments_omitted
 * are reserved first (pcpu_snapshot_merge_reserve()): their names are then
 * taken, and a segment's family of either name is refused like any clash. Each segment gets its
 * pcpu_segment_up series. 0, or -1 with res set (ENOMEM).
 */
static int scrape_merge(struct scrape *sc, struct scrape_result *res)
{
	size_t i;

	qsort(sc->ix, sc->nix, sizeof *sc->ix, cmp_seg);
	up_families(sc);
	if (pcpu_snapshot_merge_reserve(sc->m, &sc->upsnap) < 0) {
		fail_with(res, 503, "out of memory");
		return -1;
	}
	for (i = 0; i < sc->nix; i++) {
		struct seg *g = sc->ix[i], *prev = i ? sc->ix[i - 1] : NULL;

		g->labels[0] = g->name;
		g->labels[1] = g->pid;
		if (mark_duplicate(g, prev)) {
			if (!prev->dup) { /* the first duplicate speaks for all */
				sc->ups[sc->nup].label_values = g->labels;
				sc->ups[sc->nup].value.gauge = 0;
				sc->nup++;
			}
			continue;
		}
		if (g->ok && pcpu_snapshot_merge_add(sc->m, &g->snap->snapshot, 2, EXTRA_LABELS, g->labels) < 0) {
			if (errno == ENOMEM) {
				fail_with(res, 503, "out of memory");
				return -1;
			}
			snprintf(g->msg, sizeof g->msg, "cannot be exposed: %s", pcpu_stats_error());
			g->ok = 0;
			g->reason = "conflict";
		}
		g->labels[2] = g->ok ? "" : g->reason ? g->reason : "error";
		sc->ups[sc->nup].label_values = g->labels;
		sc->ups[sc->nup].value.gauge = g->ok;
		sc->nup++;
	}
	return 0;
}

/* The pcpu_segments_omitted series: one per owner with segments omitted. */
static void omitted_series(struct scrape *sc)
{
	size_t i;

	for (i = 0; i < sc->nowners; i++)
		if (sc->owners[i].omitted) {
			sc->omlabels[sc->nom] = sc->owners[i].label;
			sc->oms[sc->nom].label_values = &sc->omlabels[sc->nom];
			sc->oms[sc->nom].value.gauge = (int64_t)sc->owners[i].omitted;
			sc->nom++;
		}
}

/* The merged snapshot, its up and omitted series added last; stderr told
 * what changed (notes_update()). NULL with res saying why. */
static const struct pcpu_snapshot *scrape_final(const struct scrape_config *cf, struct scrape_state *st,
						struct scrape *sc, struct scrape_result *res)
{
	const struct pcpu_snapshot *all;

	omitted_series(sc);
	sc->fams[0].series = sc->ups;
	sc->fams[0].nseries = sc->nup;
	sc->fams[1].series = sc->oms;
	sc->fams[1].nseries = sc->nom;
	if (pcpu_snapshot_merge_add(sc->m, &sc->upsnap, 0, NULL, NULL) < 0 ||
	    !(all = pcpu_snapshot_merge_result(sc->m))) {
		fail_with(res, 503, errno == ENOMEM ? "out of memory" : pcpu_stats_error());
		return NULL;
	}
	notes_update(cf, st, sc->segs, sc->nseg);
	return all;
}

/* The merged exposition in res (200); else res says why. */
static void scrape_expose(const struct scrape_config *cf, struct scrape_state *st, struct scrape *sc,
			  enum pcpu_format fmt, struct scrape_result *res)
{
	const struct pcpu_snapshot *all = scrape_final(cf, st, sc, res);

	if (!all)
		return;
	/* Written from the merge: its inputs were checked when added. */
	if (pcpu_snapshot_merge_write(sc->m, fmt, &res->body, &res->len) < 0) {
		res->body = NULL;
		fail_with(res, errno == ENOMEM ? 503 : 500, pcpu_stats_error());
		return;
	}
	if (charge(&sc->left, res->len) < 0) {
		free(res->body);
		res->body = NULL;
		fail_with(res, 503, "scrape over --max-bytes");
		return;
	}
	res->status = 200;
}

static void scrape_free(struct scrape *sc)
{
	size_t k;

	pcpu_snapshot_merge_free(sc->m);
	for (k = 0; sc->segs && k < sc->nseg; k++)
		pcpu_reader_snapshot_free(sc->segs[k].snap);
	free(sc->segs);
	free(sc->ix);
	free(sc->ups);
	free(sc->owners);
	free(sc->keep);
	free(sc->oms);
	free(sc->omlabels);
	free(sc->info);
	if (sc->st)
		kept_sweep(sc->st); /* the readers of segments gone: closed */
	/* A scrape's memory is freed at once, but glibc keeps freed heap:
	 * give it back when scrapes shrank, so that the daemon's footprint
	 * follows the segments that exist now, not the most there ever were
	 * (large blocks are unmapped when freed: scrape_memory_setup()).
	 * Not after every scrape: the next one, as large, would fault all of
	 * it in again (issue 51: page faults were a quarter of a scrape). */
	if (sc->st) {
		size_t used = sc->budget - sc->left;

		if (used < sc->st->used_max / 4) {
			malloc_trim(0);
			sc->st->used_max = used;
		} else if (used > sc->st->used_max) {
			sc->st->used_max = used;
		}
	} else {
		malloc_trim(0);
	}
}

/* The /metrics exposition of every served segment: the steps above, each
 * of which may end the scrape (a failed listing has nothing to free). */
void scrape_all(const struct scrape_config *cf, struct scrape_state *st, enum pcpu_format fmt,
		struct scrape_result *res)
{
	struct scrape sc;

	memset(res, 0, sizeof *res);
	memset(&sc, 0, sizeof sc);
	sc.budget = sc.left = cf->max_bytes;
	sc.st = st;
	if (scrape_list(cf, &sc, res) < 0)
		return;
	if (scrape_triage(cf, &sc, res) == 0 && scrape_alloc(&sc, res) == 0 && scrape_read(cf, &sc, res) == 0 &&
	    scrape_merge(&sc, res) == 0)
		scrape_expose(cf, st, &sc, fmt, res);
	scrape_free(&sc);
}

/* What scrape_collect() keeps alive for the snapshot it returns. */
struct scrape_hold {
	struct scrape sc;
};

const struct pcpu_snapshot *scrape_collect(const struct scrape_config *cf, struct scrape_state *st,
					   struct scrape_hold **hold, struct scrape_result *res)
{
	struct scrape_hold *h = calloc(1, sizeof *h);
	const struct pcpu_snapshot *all = NULL;

	memset(res, 0, sizeof *res);
	*hold = NULL;
	if (!h) {
		fail_with(res, 503, "out of memory");
		return NULL;
	}
	h->sc.budget = h->sc.left = cf->max_bytes;
	h->sc.st = st;
	if (scrape_list(cf, &h->sc, res) == 0 && scrape_triage(cf, &h->sc, res) == 0 &&
	    scrape_alloc(&h->sc, res) == 0 && scrape_read(cf, &h->sc, res) == 0 && scrape_merge(&h->sc, res) == 0)
		all = scrape_final(cf, st, &h->sc, res);
	if (!all) {
		scrape_release(h);
		return NULL;
	}
	res->status = 200;
	res->len = h->sc.left; /* what is left of --max-bytes for the caller's encoding */
	*hold = h;
	return all;
}

uint64_t scrape_created_ns(const struct scrape_hold *h, const char *name, const char *pid)
{
	size_t i;

	for (i = 0; h && i < h->sc.nix; i++) {
		const struct seg *g = h->sc.ix[i];

		if (g->ok && strcmp(g->name, name) == 0 && strcmp(g->pid, pid) == 0)
			return g->created_ns; /* the reader's: named targets too */
	}
	return 0;
}

void scrape_release(struct scrape_hold *h)
{
	if (!h)
		return;
	scrape_free(&h->sc);
	free(h);
}

void scrape_memory_setup(void)
{
	/* glibc raises its mmap threshold (up to 32 MiB) after a large block
	 * is freed, and with it the free space it keeps at the top of a
	 * thread's heap (twice that), which malloc_trim() does not return
	 * for heaps other than the main one; scrapes run on libmicrohttpd's
	 * thread. Fixed thresholds: a scrape's large blocks (a megabyte:
	 * the exposition of 10^4 series and up) are mapped and unmapped
	 * whole; smaller ones are reused from scrape to scrape, at most 2 MiB
	 * of them kept free at the top of the heap. */
	mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 2 * 1024 * 1024);
}

/* /metrics/SEGMENT: one segment, as it is, read with a kept reader where
 * there is one (scrape_read.c). */
void scrape_one(const struct scrape_config *cf, struct scrape_state *st, const char *target, enum pcpu_format fmt,
		struct scrape_result *res)
{
	struct seg g;
	size_t i, left = cf->max_bytes;
	int allowed = cf->ntargets == 0;

	memset(res, 0, sizeof *res);
	for (i = 0; i < cf->ntargets; i++)
		if (strcmp(cf->targets[i], target) == 0)
			allowed = 1;
	if (!allowed || !valid_target(target)) {
		res->status = 404;
		snprintf(res->msg, sizeof res->msg, "not a served segment: %.100s", target);
		return;
	}
	if (st && st->nkept == cf->keep_readers)
		kept_sweep(st); /* full: those no scrape used lately go */
	memset(&g, 0, sizeof g);
	snprintf(g.key, sizeof g.key, "%s", target);
	read_segment(cf, st, &g, &left);
	if (!g.ok) {
		const char *why = g.reason ? g.reason : "error";

		res->status = strcmp(why, "missing") == 0 ? 404 : strcmp(why, "permission") == 0 ? 403 : 503;
		snprintf(res->msg, sizeof res->msg, "%s", g.msg);
		return;
	}
	if (pcpu_snapshot_write(&g.snap->snapshot, fmt, &res->body, &res->len) < 0) {
		res->status = 503;
		res->body = NULL;
		snprintf(res->msg, sizeof res->msg, "segment %.100s cannot be exposed: %s", target,
			 pcpu_stats_error());
	} else if (res->len > cf->max_bytes) {
		free(res->body);
		res->body = NULL;
		res->status = 503;
		snprintf(res->msg, sizeof res->msg, "scrape over --max-bytes");
	} else {
		res->status = 200;
	}
	pcpu_reader_snapshot_free(g.snap);
}
