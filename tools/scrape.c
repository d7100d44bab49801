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
 * itself is only that segment's failure: read_all()). What is remembered
 * between scrapes (the last message per segment, so stderr says each
 * change once, at most NOTES_PER_SCRAPE lines) is rebuilt from each
 * scrape's segments: segments that went away are forgotten.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pcpustat.h"

/* The labels of every segment's series; pcpu_segment_up adds the reason
 * (empty when up). */
static const char *const EXTRA_LABELS[] = { "pcpu_segment", "pcpu_pid" };
static const char *const UP_LABELS[] = { "pcpu_segment", "pcpu_pid", "reason" };
static const char *const OMITTED_LABELS[] = { "uid" };
/* Lines on stderr per scrape: whoever can create files named like segments
 * must not be able to flood the log (or block the exporter on a full pipe). */
#define NOTES_PER_SCRAPE 20

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
	int known_down, omitted;
	const struct seg *first; /* a duplicate's: the one served instead */
	const char *reason; /* not ok: a word of pcpu_reader_reason()'s vocabulary */
	int err;       /* errno of a failure that may fail the whole scrape */
	char msg[320];
};

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
static void notes_update(struct scrape_state *st, const struct seg *segs, size_t n)
{
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
				fprintf(stderr, "pcpustat serve: %s: %s\n", g->key, msg);
			else
				fprintf(stderr, "pcpustat serve: %s: readable again\n", g->key);
		}
		if (now)
			now[k++] = want;
	}
	if (said > NOTES_PER_SCRAPE)
		fprintf(stderr, "pcpustat serve: ... and %zu more segments changed (pcpu_segment_up says which)\n",
			said - NOTES_PER_SCRAPE);
	if (now)
		qsort(now, k, sizeof *now, cmp_note);
	free(st->notes);
	st->notes = now;
	st->nnotes = now ? k : 0;
}

void scrape_state_free(struct scrape_state *st)
{
	free(st->notes);
	st->notes = NULL;
	st->nnotes = 0;
}

/* ---- the byte budget ------------------------------------------------------------- */

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
			     (fa->type == PCPU_METRIC_HISTOGRAM ? fa->nbuckets * sizeof(uint64_t) : 0);
			for (l = 0; l < fa->nlabels; l++)
				b += strlen(fa->series[i].label_values[l]) + 1;
		}
	}
	return b;
}

static int charge(size_t *left, size_t bytes)
{
	if (bytes > *left)
		return -1;
	*left -= bytes;
	return 0;
}

/* ---- reading ---------------------------------------------------------------------- */

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
static int read_all(const struct scrape_config *cf, struct seg *segs, size_t n, size_t *left_out, int *err)
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

/* The /metrics exposition of every served segment. */
void scrape_all(const struct scrape_config *cf, struct scrape_state *st, enum pcpu_format fmt,
		struct scrape_result *res)
{
	struct pcpu_segment_info *info = NULL;
	struct pcpu_snapshot_family fams[2], *up = &fams[0], *om = &fams[1];
	struct pcpu_snapshot_series *ups = NULL, *oms = NULL;
	struct pcpu_snapshot upsnap;
	const struct pcpu_snapshot *all;
	pcpu_snapshot_merge_t *m = NULL;
	struct seg *segs = NULL, **ix = NULL;
	struct owner *owners = NULL;
	const char **omlabels = NULL;
	unsigned char *keep = NULL; /* listed: 0 omitted, 1 to read, 2 known down and reported */
	size_t n = 0, nseg, i, k, nix = 0, nup = 0, nom = 0, nowners = 0, left = cf->max_bytes;
	int err = 0;

	memset(res, 0, sizeof *res);
	if (cf->ntargets) {
		n = cf->ntargets;
	} else if (pcpu_segment_list(&cf->ropt, &info, &n) < 0) {
		res->status = 503;
		snprintf(res->msg, sizeof res->msg, "listing segments: %s", pcpu_reader_error());
		return;
	}
	nseg = n;
	/* Listed segments the listing found unservable (not a segment,
	 * unreadable, writer gone) count against their owner's --max-down
	 * in the listing's order (name, pid) before anything is read: past
	 * it they are not opened again and get no memory, no series and no
	 * log line -- another user's junk costs this scrape its listing (an
	 * lstat per file when empty: pcpu_segment_list()) and one counter.
	 * Those within it are read again, for the message. */
	if (!cf->ntargets) {
		owners = calloc(n ? n : 1, sizeof *owners);
		keep = calloc(n ? n : 1, 1);
		if (!owners || !keep || charge(&left, n * (sizeof *owners + 1)) < 0) {
			fail_with(res, 503, owners && keep ? "scrape over --max-bytes" : "out of memory");
			goto out;
		}
		nowners = owners_make(owners, info, n);
		for (i = 0, nseg = 0; i < n; i++) {
			if (info[i].error == 0 && !(info[i].state == PCPU_SEGMENT_GONE &&
						    !(cf->ropt.flags & PCPU_READER_ALLOW_STALE)))
				keep[i] = 1;
			else
				keep[i] = report_down(cf, owners, nowners, info[i].owner) ? 2 : 0;
			nseg += keep[i] != 0;
		}
	}
	segs = calloc(nseg ? nseg : 1, sizeof *segs);
	ix = calloc(nseg ? nseg : 1, sizeof *ix);
	ups = calloc(nseg ? nseg : 1, sizeof *ups);
	oms = calloc(nowners ? nowners : 1, sizeof *oms);
	omlabels = calloc(nowners ? nowners : 1, sizeof *omlabels);
	m = pcpu_snapshot_merge_new();
	if (!segs || !ix || !ups || !oms || !omlabels || !m ||
	    charge(&left, nseg * (sizeof *segs + sizeof *ix + sizeof *ups) +
				  nowners * (sizeof *oms + sizeof *omlabels)) < 0) {
		fail_with(res, 503, segs && ix && ups && oms && omlabels && m ? "scrape over --max-bytes"
									      : "out of memory");
		goto out;
	}
	for (i = 0, k = 0; i < n; i++) {
		if (keep && !keep[i])
			continue;
		snprintf(segs[k].key, sizeof segs[k].key, "%s", cf->ntargets ? cf->targets[i] : info[i].file);
		segs[k].info = info ? &info[i] : NULL;
		segs[k].known_down = keep && keep[i] == 2;
		k++;
	}
	if (read_all(cf, segs, nseg, &left, &err) < 0) {
		fail_with(res, 503, err == ENOMEM ? "out of memory" : "scrape over --max-bytes");
		goto out;
	}
	/* Then those that failed only when read, in the same order. */
	for (k = 0; k < nseg; k++)
		if (segs[k].info && !segs[k].ok && !segs[k].known_down &&
		    !report_down(cf, owners, nowners, segs[k].info->owner))
			segs[k].omitted = 1;
	for (k = 0; k < nseg; k++) {
		name_from_listing(&segs[k], segs[k].info);
		if (!segs[k].omitted)
			ix[nix++] = &segs[k];
	}

	/* Merged in the order of (name, pid, readable first, key): of two
	 * segments whose families clash, the first wins; of several that
	 * are one segment (name and pid), the first is served and the
	 * others are duplicates -- one pcpu_segment_up{reason="duplicate"} 0
	 * for them all, so that the series stay distinct. */
	qsort(ix, nix, sizeof *ix, cmp_seg);
	/* pcpu_segment_up and pcpu_segments_omitted first, without series:
	 * their names are then taken, and a segment's family of either name
	 * is refused like any clash. */
	memset(fams, 0, sizeof fams);
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
	upsnap.nfamilies = 2;
	upsnap.families = fams;
	if (pcpu_snapshot_merge_add(m, &upsnap, 0, NULL, NULL) < 0) {
		fail_with(res, 503, "out of memory");
		goto out;
	}
	for (i = 0; i < nix; i++) {
		struct seg *g = ix[i], *prev = i ? ix[i - 1] : NULL;

		g->labels[0] = g->name;
		g->labels[1] = g->pid;
		if (prev && strcmp(g->name, prev->name) == 0 && strcmp(g->pid, prev->pid) == 0) {
			g->dup = 1;
			g->first = prev->dup ? prev->first : prev;
			snprintf(g->msg, sizeof g->msg, "segment %.64s of pid %s again (as %.100s): reported once, "
				 "as that", g->name, g->pid, g->first->key);
			g->ok = 0;
			g->reason = "duplicate";
			g->labels[2] = g->reason;
			if (!prev->dup) { /* the first duplicate speaks for all */
				ups[nup].label_values = g->labels;
				ups[nup].value.gauge = 0;
				nup++;
			}
			continue;
		}
		if (g->ok && pcpu_snapshot_merge_add(m, &g->snap->snapshot, 2, EXTRA_LABELS, g->labels) < 0) {
			if (errno == ENOMEM) {
				fail_with(res, 503, "out of memory");
				goto out;
			}
			snprintf(g->msg, sizeof g->msg, "cannot be exposed: %s", pcpu_stats_error());
			g->ok = 0;
			g->reason = "conflict";
		}
		g->labels[2] = g->ok ? "" : g->reason ? g->reason : "error";
		ups[nup].label_values = g->labels;
		ups[nup].value.gauge = g->ok;
		nup++;
	}
	for (i = 0; i < nowners; i++)
		if (owners[i].omitted) {
			omlabels[nom] = owners[i].label;
			oms[nom].label_values = &omlabels[nom];
			oms[nom].value.gauge = (int64_t)owners[i].omitted;
			nom++;
		}
	up->series = ups;
	up->nseries = nup;
	om->series = oms;
	om->nseries = nom;
	if (pcpu_snapshot_merge_add(m, &upsnap, 0, NULL, NULL) < 0 || !(all = pcpu_snapshot_merge_result(m))) {
		fail_with(res, 503, errno == ENOMEM ? "out of memory" : pcpu_stats_error());
		goto out;
	}
	notes_update(st, segs, nseg);
	if (pcpu_snapshot_write(all, fmt, &res->body, &res->len) < 0) {
		res->body = NULL;
		fail_with(res, errno == ENOMEM ? 503 : 500, pcpu_stats_error());
		goto out;
	}
	if (charge(&left, res->len) < 0) {
		free(res->body);
		res->body = NULL;
		fail_with(res, 503, "scrape over --max-bytes");
		goto out;
	}
	res->status = 200;
out:
	pcpu_snapshot_merge_free(m);
	for (k = 0; segs && k < nseg; k++)
		pcpu_reader_snapshot_free(segs[k].snap);
	free(segs);
	free(ix);
	free(ups);
	free(owners);
	free(keep);
	free(oms);
	free(omlabels);
	free(info);
	/* A scrape's memory is freed at once, but glibc keeps freed heap:
	 * give it back, so that the daemon's footprint follows the segments
	 * that exist now, not the most there ever were (large blocks are
	 * unmapped when freed: scrape_memory_setup()). */
	malloc_trim(0);
}

void scrape_memory_setup(void)
{
	/* glibc raises its mmap threshold (up to 32 MiB) after a large block
	 * is freed, and with it the free space it keeps at the top of a
	 * thread's heap (twice that), which malloc_trim() does not return
	 * for heaps other than the main one; scrapes run on libmicrohttpd's
	 * thread. Fixed thresholds: a scrape's large blocks (listings,
	 * snapshots, the exposition) are mapped and unmapped whole. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	mallopt(M_TRIM_THRESHOLD, 128 * 1024);
}

/* /metrics/SEGMENT: one segment, as it is. */
void scrape_one(const struct scrape_config *cf, const char *target, enum pcpu_format fmt,
		struct scrape_result *res)
{
	struct pcpu_reader_options ro = cf->ropt;
	struct pcpu_reader_snapshot *s;
	pcpu_reader_t *r;
	size_t i;
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
	ro.max_bytes = cf->max_bytes;
	r = pcpu_reader_open(target, &ro);
	if (!r) {
		int e = errno;

		res->status = e == ENOENT ? 404 : (e == EACCES || e == EPERM || e == ELOOP) ? 403 : 503;
		snprintf(res->msg, sizeof res->msg, "%s", pcpu_reader_error());
		return;
	}
	if (pcpu_reader_snapshot(r, 0, &s) < 0) {
		res->status = 503;
		snprintf(res->msg, sizeof res->msg, "%s", pcpu_reader_error());
		pcpu_reader_close(r);
		return;
	}
	pcpu_reader_close(r);
	if (pcpu_snapshot_write(&s->snapshot, fmt, &res->body, &res->len) < 0) {
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
	pcpu_reader_snapshot_free(s);
}
