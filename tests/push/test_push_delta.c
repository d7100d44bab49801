/*
 * The delta baseline (tools/push_delta.c) on hand-made snapshots, each
 * answer checked exactly: the first collection only records; the base
 * moves only on delta_acked(); a counter below its base (reset, 2^64
 * wrap-around), a counter with fractions whose billionths went down, a
 * histogram bucket that went down are resets; a restarted writer (another
 * publication time) is a new series; series in another order are found;
 * a missing series keeps its base through 10 acknowledged pushes, then is
 * forgotten; a baseline saved and loaded goes on where it was, a truncated
 * file is refused; the state file's forms: none yet (every series whole),
 * the running form a dead agent leaves (its start times taken up without
 * a point, others whole), a baseline carrying a lost agent's start times,
 * an earlier version refused (1-3, said as such); residues (issue 50)
 * through the base and a saved and loaded file.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "push.h"

static int failures;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                      \
		}                                                                        \
	} while (0)

static const char *const lnames[] = { "id", "pcpu_segment", "pcpu_pid" };
static const char *const lv[4][3] = { { "a", "app", "1" }, { "b", "app", "1" }, { "c", "app", "1" },
				      { "d", "app", "1" } };
static const int64_t bounds[] = { 10, 100 };

/* One collection: a counter family (n series, ids in `order`), a counter
 * family with fractions (one series), a histogram (one series, 3 buckets),
 * a gauge (ignored by the baseline). */
struct coll {
	struct pcpu_snapshot_series cs[4], fs[1], hs[1], gs[1];
	struct pcpu_snapshot_family fam[4];
	struct pcpu_snapshot snap;
	uint64_t counts[3];
};

static void make(struct coll *c, size_t n, const int *order, const uint64_t *values, uint64_t whole, int64_t nanos,
		 const uint64_t *counts, int64_t sum)
{
	size_t i;

	memset(c, 0, sizeof *c);
	for (i = 0; i < n; i++) {
		c->cs[i].label_values = lv[order[i]];
		c->cs[i].value.counter = values[order[i]];
	}
	c->fs[0].label_values = lv[0];
	c->fs[0].value.fixed.whole = whole;
	c->fs[0].value.fixed.nanos = nanos;
	memcpy(c->counts, counts, sizeof c->counts);
	c->hs[0].label_values = lv[0];
	c->hs[0].value.histogram.counts = c->counts;
	c->hs[0].value.histogram.sum = sum;
	c->gs[0].label_values = lv[0];
	c->gs[0].value.gauge = -5;
	c->fam[0] = (struct pcpu_snapshot_family){ .name = "reqs", .type = PCPU_METRIC_COUNTER, .nlabels = 3,
						   .label_names = lnames, .nseries = n, .series = c->cs };
	c->fam[1] = (struct pcpu_snapshot_family){ .name = "secs", .type = PCPU_METRIC_COUNTER, .nlabels = 3,
						   .flags = PCPU_SNAPSHOT_NANOS, .label_names = lnames, .nseries = 1,
						   .series = c->fs };
	c->fam[2] = (struct pcpu_snapshot_family){ .name = "lat", .type = PCPU_METRIC_HISTOGRAM, .nlabels = 3,
						   .label_names = lnames, .nbuckets = 3, .bucket_upper = bounds,
						   .nseries = 1, .series = c->hs };
	c->fam[3] = (struct pcpu_snapshot_family){ .name = "depth", .type = PCPU_METRIC_GAUGE, .nlabels = 3,
						   .label_names = lnames, .nseries = 1, .series = c->gs };
	c->snap.nfamilies = 4;
	c->snap.families = c->fam;
}

/* The answers of one collection at time `now` (created: the segment's
 * publication): pts[0..n) the counters in snapshot order, pts[4] the
 * fractions, pts[5] the histogram. */
static void collect(struct push_delta *d, struct coll *c, uint64_t now, uint64_t created, struct delta_point *pts)
{
	size_t i;

	CHECK(delta_begin(d, &c->snap, now) == 0);
	for (i = 0; i < c->fam[0].nseries; i++)
		CHECK(delta_series(d, &c->fam[0], &c->cs[i], created, &pts[i]) == 0);
	CHECK(delta_series(d, &c->fam[1], &c->fs[0], created, &pts[4]) == 0);
	CHECK(delta_series(d, &c->fam[2], &c->hs[0], created, &pts[5]) == 0);
	CHECK(delta_end(d) == 0);
}

int main(void)
{
	static const int fwd[] = { 0, 1, 2, 3 }, rev[] = { 3, 2, 1, 0 }, skip_b[] = { 0, 2, 3 };
	struct push_delta *d = delta_new();
	struct delta_point p[6];
	struct coll c;
	uint64_t v[4] = { 10, 20, 30, 40 }, h[3] = { 1, 2, 3 };
	int k;

	CHECK(d != NULL);
	/* 1. the first collection records and sends nothing */
	make(&c, 4, fwd, v, 5, 500000000, h, 77);
	collect(d, &c, 1000, 100, p);
	CHECK(p[0].skip && p[3].skip && p[4].skip && p[5].skip);
	CHECK(delta_series_kept(d) == 6);

	/* 2. increases from the recorded base, starting at its time */
	v[0] = 15;
	h[1] = 4;
	make(&c, 4, fwd, v, 6, 0, h, 90);
	collect(d, &c, 2000, 100, p);
	CHECK(!p[0].skip && p[0].base && p[0].whole == 10 && p[0].start_ns == 1000);
	CHECK(p[3].base && p[3].whole == 40);
	CHECK(p[4].base && p[4].whole == 5 && p[4].nanos == 500000000); /* 5.5 -> 6.0: up */
	CHECK(p[5].base && p[5].whole == 77 && p[5].counts && p[5].counts[1] == 2);
	/* 3. not acknowledged: the next is taken from the same base */
	delta_discard(d);
	v[0] = 16;
	make(&c, 4, fwd, v, 6, 0, h, 90);
	collect(d, &c, 3000, 100, p);
	CHECK(p[0].base && p[0].whole == 10 && p[0].start_ns == 1000);
	/* 4. acknowledged: the base is that request's */
	delta_acked(d);
	make(&c, 4, fwd, v, 6, 0, h, 90);
	collect(d, &c, 4000, 100, p);
	CHECK(p[0].base && p[0].whole == 16 && p[0].start_ns == 3000);
	CHECK(p[5].base && p[5].counts[1] == 4 && p[5].whole == 90);
	delta_acked(d);

	/* 5. resets: a counter lower (the application reset it), one past
	 * 2^64 (wrapped), fractions lower, a bucket lower */
	v[1] = 3;
	v[2] = UINT64_MAX - 1;
	make(&c, 4, fwd, v, 5, 999999999, h, 90); /* 6.0 -> 5.999999999 */
	collect(d, &c, 5000, 100, p);
	CHECK(!p[1].base && !p[1].skip && p[1].start_ns == 4000); /* whole value over [4000, 5000] */
	CHECK(p[2].base && p[2].whole == 30);
	CHECK(!p[4].base && p[4].start_ns == 4000);
	delta_acked(d);
	v[2] = 1; /* wrapped: below UINT64_MAX - 1 */
	h[0] = 0; /* a bucket lower */
	make(&c, 4, fwd, v, 7, 0, h, 95);
	collect(d, &c, 6000, 100, p);
	CHECK(!p[2].base && p[2].start_ns == 5000);
	CHECK(!p[5].base && p[5].start_ns == 5000);
	CHECK(p[4].base && p[4].whole == 5 && p[4].nanos == 999999999);
	delta_acked(d);

	/* 6. another order: every series found (binary search) */
	make(&c, 4, rev, v, 7, 0, h, 95);
	collect(d, &c, 7000, 100, p);
	CHECK(p[0].base && p[0].whole == v[3] && p[3].base && p[3].whole == v[0]);
	CHECK(p[1].base && p[1].whole == v[2] && p[2].base && p[2].whole == v[1]);
	delta_acked(d);

	/* 7. a restarted writer: another publication time, new series */
	make(&c, 4, fwd, v, 7, 0, h, 95);
	collect(d, &c, 8000, 200, p);
	CHECK(!p[0].base && !p[0].skip && p[0].start_ns == 200 && !p[5].base);
	delta_acked(d);

	/* 8. "b" missing through 10 acknowledged pushes comes back with its
	 * base; missing through 11, it is new */
	for (k = 0; k < 10; k++) {
		make(&c, 3, skip_b, v, 7, 0, h, 95);
		collect(d, &c, 9000 + (uint64_t)k, 200, p);
		delta_acked(d);
	}
	make(&c, 4, fwd, v, 7, 0, h, 95);
	collect(d, &c, 10000, 200, p);
	CHECK(p[1].base && p[1].whole == v[1] && p[1].start_ns == 8000);
	delta_acked(d);
	for (k = 0; k < 11; k++) {
		make(&c, 3, skip_b, v, 7, 0, h, 95);
		collect(d, &c, 11000 + (uint64_t)k, 200, p);
		delta_acked(d);
	}
	make(&c, 4, fwd, v, 7, 0, h, 95);
	collect(d, &c, 12000, 200, p);
	CHECK(!p[1].base && p[1].start_ns == 200);
	CHECK(p[0].base && p[0].start_ns == 11010);
	delta_acked(d);

	/* 9. saved, loaded by another agent: it continues from there; a
	 * truncated file is refused and changes nothing; none: 0 */
	{
		char path[] = "/tmp/test_push_delta.XXXXXX", err[300];
		int fd = mkstemp(path);
		struct push_delta *d2 = delta_new();
		struct stat st;

		CHECK(fd >= 0 && d2);
		close(fd);
		CHECK(delta_save(d, path, err, sizeof err) == 0);
		CHECK(delta_load(d2, path, err, sizeof err) == 1);
		CHECK(delta_series_kept(d2) == delta_series_kept(d));
		make(&c, 4, fwd, v, 7, 0, h, 95);
		collect(d2, &c, 13000, 200, p);
		CHECK(!p[0].skip && p[0].base && p[0].whole == v[0] && p[0].start_ns == 12000);
		CHECK(p[1].base && p[1].whole == v[1] && p[1].start_ns == 12000);
		CHECK(p[5].base && p[5].counts[2] == h[2] && p[5].whole == 95);
		delta_acked(d2);
		CHECK(stat(path, &st) == 0 && truncate(path, st.st_size - 1) == 0);
		CHECK(delta_load(d2, path, err, sizeof err) == -1 && strstr(err, "not a state file"));
		collect(d2, &c, 14000, 200, p);
		CHECK(p[0].base && p[0].start_ns == 13000); /* unchanged by the refused file */
		unlink(path);
		CHECK(delta_load(d2, path, err, sizeof err) == 0);
		delta_free(d2);
	}
	delta_free(d);

	/* 9b. values beyond the integer words (issue 50): a counter's and a
	 * histogram sum's residues are the base's, and go through a saved
	 * and loaded state file (version 4) bit for bit */
	{
		char path[] = "/tmp/test_push_delta.XXXXXX", err[300];
		int fd = mkstemp(path);
		struct push_delta *d3 = delta_new(), *d4 = delta_new();

		CHECK(fd >= 0 && d3 && d4);
		close(fd);
		make(&c, 4, fwd, v, 7, 0, h, 95);
		c.fs[0].value.fixed.residue = 1e300;
		c.hs[0].value.histogram.residue = 5.1e22;
		collect(d3, &c, 20000, 300, p);
		CHECK(p[4].skip && p[5].skip);
		delta_acked(d3);
		CHECK(delta_save(d3, path, err, sizeof err) == 0);
		CHECK(delta_load(d4, path, err, sizeof err) == 1);
		make(&c, 4, fwd, v, 7, 0, h, 95);
		c.fs[0].value.fixed.residue = 2e300;
		c.hs[0].value.histogram.residue = 6e22;
		collect(d4, &c, 21000, 300, p);
		CHECK(!p[4].skip && p[4].base && p[4].whole == 7 && p[4].residue == 1e300 && p[4].start_ns == 20000);
		CHECK(!p[5].skip && p[5].base && p[5].whole == 95 && p[5].residue == 5.1e22);
		delta_acked(d4);
		/* a residue that went down is a reset, as billionths that did */
		make(&c, 4, fwd, v, 7, 0, h, 95);
		c.fs[0].value.fixed.residue = 1e299;
		c.hs[0].value.histogram.residue = 6e22;
		collect(d4, &c, 22000, 300, p);
		CHECK(!p[4].base && p[5].base && p[5].residue == 6e22);
		unlink(path);
		delta_free(d3);
		delta_free(d4);
	}

	/* 10. the state file's forms (push_delta.c): none yet, every series
	 * whole; the running form an agent leaves when it dies, whose start
	 * times are taken up without a point and others sent whole; a
	 * baseline carrying the start times it holds no series of; version 1 */
	{
		char path[] = "/tmp/test_push_delta.XXXXXX", err[300];
		int fd = mkstemp(path);
		struct push_delta *a = delta_new(), *b = delta_new(), *e = delta_new(), *f = delta_new();

		CHECK(fd >= 0 && a && b && e && f);
		close(fd);
		unlink(path);
		/* none yet: whole, from the segment's publication */
		CHECK(delta_load(a, path, err, sizeof err) == 0);
		delta_no_priming(a);
		CHECK(delta_mark(a, path, err, sizeof err) == 0); /* the agent's running form, empty */
		make(&c, 4, fwd, v, 7, 0, h, 95);
		collect(a, &c, 20000, 100, p);
		CHECK(!p[0].skip && !p[0].base && p[0].start_ns == 100 && !p[5].skip && !p[5].base);
		CHECK(delta_mark_needed(a)); /* start time 100 is not in the file */
		CHECK(delta_mark(a, path, err, sizeof err) == 0 && !delta_mark_needed(a));
		delta_acked(a);
		collect(a, &c, 21000, 100, p);
		CHECK(!delta_mark_needed(a)); /* one compare: listed */
		collect(a, &c, 21500, 150, p);
		CHECK(delta_mark_needed(a)); /* a new segment: listed before it is sent */
		CHECK(delta_mark(a, path, err, sizeof err) == 0);
		/* the agent dies here: its running form lists 100 and 150 */
		CHECK(delta_load(b, path, err, sizeof err) == 2);
		collect(b, &c, 22000, 100, p);
		CHECK(p[0].skip && p[3].skip && p[4].skip && p[5].skip); /* may have been sent */
		delta_discard(b);
		collect(b, &c, 22100, 300, p);
		CHECK(!p[0].skip && !p[0].base && p[0].start_ns == 300); /* never sent: whole */
		delta_discard(b);
		collect(b, &c, 22200, 100, p);
		CHECK(p[0].skip);
		delta_acked(b); /* 100's series now in the base; 150 unseen once */
		v[0] += 5;
		make(&c, 4, fwd, v, 7, 0, h, 95);
		collect(b, &c, 23000, 100, p);
		CHECK(!p[0].skip && p[0].base && p[0].whole == v[0] - 5 && p[0].start_ns == 22200);
		delta_acked(b);
		/* b exits: its baseline carries 150 (no series held) */
		CHECK(delta_save(b, path, err, sizeof err) == 0);
		CHECK(delta_load(e, path, err, sizeof err) == 1);
		collect(e, &c, 24000, 150, p);
		CHECK(p[0].skip); /* the lost agent's, still unseen */
		delta_discard(e);
		collect(e, &c, 24100, 100, p);
		CHECK(p[0].base && p[0].whole == v[0] && p[0].start_ns == 23000);
		delta_discard(e);
		/* an inherited start time not seen through 10 acknowledged pushes
		 * is forgotten, as a missing series' base is */
		for (k = 0; k < 11; k++) {
			collect(e, &c, 25000 + (uint64_t)k, 100, p);
			delta_acked(e);
		}
		collect(e, &c, 26000, 150, p);
		CHECK(!p[0].skip && !p[0].base && p[0].start_ns == 150);
		delta_discard(e);
		/* a file of an earlier version (1; 2: residues, no start times;
		 * 3: start times, no residues) is refused as such, whole or
		 * cut after its magic; another magic is not a state file */
		{
			static const char *const magic[] = { "PCPUDLT\1", "PCPUDLT\2", "PCPUDLT\3" };
			char buf[64];
			unsigned v, whole;

			for (v = 0; v < 3; v++)
				for (whole = 0; whole < 2; whole++) {
					FILE *fp = fopen(path, "wb");

					memset(buf, 0, sizeof buf);
					memcpy(buf, magic[v], 8);
					CHECK(fp && fwrite(buf, 1, whole ? sizeof buf : 8, fp) == (whole ? sizeof buf : 8));
					fclose(fp);
					snprintf(buf, sizeof buf, "earlier pcpustat (version %u; this one reads version 4)",
						 v + 1);
					CHECK(delta_load(f, path, err, sizeof err) == -1 && errno == EBADMSG &&
					      strstr(err, buf));
				}
			{
				FILE *fp = fopen(path, "wb");

				CHECK(fp && fwrite("PCPUDLT\5", 1, 8, fp) == 8);
				fclose(fp);
				CHECK(delta_load(f, path, err, sizeof err) == -1 && strstr(err, "not a state file"));
			}
		}
		unlink(path);
		delta_free(a);
		delta_free(b);
		delta_free(e);
		delta_free(f);
	}
	if (failures)
		fprintf(stderr, "test_push_delta: %d failures\n", failures);
	else
		printf("test_push_delta: ok\n");
	return failures ? 1 : 0;
}
