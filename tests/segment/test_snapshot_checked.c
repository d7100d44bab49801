/*
 * PCPU_SNAPSHOT_CHECKED (issue 51): a reader checks the families of a
 * directory it keeps once, marks them, and the writers and the merge then
 * check only what the mark does not cover.
 *  - a kept directory's snapshots are marked, the first and the next ones
 *    (the cache's), and write what the writing process writes; a per-slot
 *    snapshot (never kept) is not marked; a registry's own snapshot is
 *    marked (checked at registration) and merges with extra labels;
 *  - what changes with the values is still checked on a marked family:
 *    bucket counts whose sum overflows, an info family's value;
 *  - what lies between families is still checked: two marked families
 *    that write one sample;
 *  - the merge still refuses, for marked families, what their own check
 *    would have: "le" added to a histogram, an extra label given twice;
 *    and the mark does not part two label sets of one metric;
 *  - an unmarked family is checked whole (an invalid label value refused),
 *    and a family marked by the program is taken as vouched for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"

static char dir[256];

static const struct pcpu_snapshot_family *family(const struct pcpu_snapshot *s, const char *name)
{
	size_t f;

	for (f = 0; f < s->nfamilies; f++)
		if (strcmp(s->families[f].name, name) == 0)
			return &s->families[f];
	fprintf(stderr, "no family %s\n", name);
	exit(1);
}

static int all_marked(const struct pcpu_snapshot *s)
{
	size_t f;

	for (f = 0; f < s->nfamilies; f++)
		if (!(s->families[f].flags & PCPU_SNAPSHOT_CHECKED))
			return 0;
	return s->nfamilies > 0;
}

/* pcpu_snapshot_write() of one family alone: 0 or -1 (errno). */
static int write_one(const struct pcpu_snapshot_family *f)
{
	struct pcpu_snapshot s = { 1, f };
	char *out;
	size_t len;
	int rc = pcpu_snapshot_write(&s, PCPU_FORMAT_PROMETHEUS, &out, &len);

	if (rc == 0)
		free(out);
	return rc;
}

static void same_text(pcpu_registry_t *reg, const struct pcpu_snapshot *s)
{
	char *a, *b;
	size_t al, bl;

	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_OPENMETRICS, &a, &al) == 0);
	CHECK(pcpu_snapshot_write(s, PCPU_FORMAT_OPENMETRICS, &b, &bl) == 0);
	if (al != bl || memcmp(a, b, al) != 0) {
		fprintf(stderr, "writer:\n%s\nreader:\n%s\n", a, b);
		exit(1);
	}
	free(a);
	free(b);
}

int main(void)
{
	static const char *const ln[] = { "path" };
	static const char *const lv[] = { "/x" };
	static const char *const bad[] = { "caf\xe9" }; /* not UTF-8 */
	struct pcpu_histogram_layout lay = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0, 2, 1000, 0, 0, 0, 0 };
	struct pcpu_segment_options wopt;
	struct pcpu_reader_options ropt;
	struct pcpu_family_desc d;
	struct pcpu_reader_snapshot *s1, *s2, *sp;
	struct pcpu_snapshot_family fams[2], hf, inf;
	struct pcpu_snapshot_series ser;
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_family_t *req, *lat;
	pcpu_counter_t c;
	pcpu_histogram_t *h;
	pcpu_segment_t *seg;
	pcpu_reader_t *r;
	pcpu_snapshot_merge_t *m;
	uint64_t *counts;
	size_t b;
	char *out;
	size_t len;

	strcpy(dir, "/tmp/pcpu-checked-test.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	CHECK(reg);
	memset(&wopt, 0, sizeof wopt);
	memset(&ropt, 0, sizeof ropt);
	wopt.dir = dir;
	ropt.dir = dir;
	seg = pcpu_segment_publish(reg, "checked", &wopt);
	if (!seg) {
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
		return 1;
	}
	memset(&d, 0, sizeof d);
	d.name = "requests";
	d.help = "Requests.";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = ln;
	CHECK((req = pcpu_registry_family(reg, &d)) != NULL);
	CHECK((c = pcpu_family_counter(req, lv)) != NULL);
	memset(&d, 0, sizeof d);
	d.name = "latency_seconds";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -6;
	d.histogram = &lay;
	CHECK((lat = pcpu_registry_family(reg, &d)) != NULL);
	CHECK((h = pcpu_family_histogram(lat, NULL)) != NULL);
	CHECK(pcpu_registry_info(reg, "build_info", "Build.", 1, ln, lv) == 0);
	pcpu_counter_add(c, 3);
	pcpu_histogram_record(h, 250);

	CHECK((r = pcpu_reader_open("checked", &ropt)) != NULL);

	/* The first snapshot of a stable directory: kept, checked, marked. */
	CHECK(pcpu_reader_snapshot(r, 0, &s1) == 0 && s1->stable);
	CHECK(all_marked(&s1->snapshot));
	same_text(reg, &s1->snapshot);
	/* The next, from the kept directory: marked, with the new values. */
	pcpu_counter_add(c, 4);
	CHECK(pcpu_reader_snapshot(r, 0, &s2) == 0);
	CHECK(all_marked(&s2->snapshot));
	CHECK_EQ_U64(family(&s2->snapshot, "requests")->series[0].value.counter, 7);
	same_text(reg, &s2->snapshot);
	/* Per slot: never kept, so not marked (and still written right). */
	CHECK(pcpu_reader_snapshot(r, PCPU_READER_PER_SLOT, &sp) == 0);
	CHECK(!(family(&sp->snapshot, "requests")->flags & PCPU_SNAPSHOT_CHECKED));
	same_text(reg, &sp->snapshot);
	printf("  a kept directory's snapshots are marked and written as the writer writes them\n");

	/* A registry's own snapshot: checked at registration, marked, and
	 * merged as pcpustat serve merges a segment (two more labels). */
	{
		static const char *const xn[] = { "pcpu_segment", "pcpu_pid" };
		static const char *const xv[] = { "checked", "1" };
		struct pcpu_snapshot *rs = pcpu_registry_snapshot(reg);
		pcpu_snapshot_merge_t *rm = pcpu_snapshot_merge_new();

		CHECK(rs && rm && all_marked(rs));
		CHECK(pcpu_snapshot_merge_add(rm, rs, 2, xn, xv) == 0);
		CHECK(pcpu_snapshot_merge_write(rm, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
		CHECK(strstr(out, "requests_total{path=\"/x\",pcpu_segment=\"checked\",pcpu_pid=\"1\"} 7\n") != NULL);
		free(out);
		pcpu_snapshot_merge_free(rm);
		pcpu_snapshot_free(rs);
	}
	printf("  a registry's snapshot is marked, and merges as a segment's does\n");

	/* Values are still checked on a marked family. */
	hf = *family(&s2->snapshot, "latency_seconds");
	CHECK(hf.flags & PCPU_SNAPSHOT_CHECKED);
	CHECK(write_one(&hf) == 0);
	ser = hf.series[0];
	CHECK((counts = calloc(hf.nbuckets, sizeof *counts)) != NULL);
	for (b = 0; b < hf.nbuckets; b++)
		counts[b] = UINT64_MAX / 2 + 1; /* their sum overflows */
	ser.value.histogram.counts = counts;
	hf.series = &ser;
	errno = 0;
	CHECK(write_one(&hf) == -1 && errno == EINVAL);
	CHECK(strstr(pcpu_stats_error(), "overflow") != NULL);
	ser.value.histogram.counts = NULL;
	CHECK(write_one(&hf) == -1 && errno == EINVAL);
	free(counts);
	inf = *family(&s2->snapshot, "build_info");
	CHECK((inf.flags & PCPU_SNAPSHOT_CHECKED) && (inf.flags & PCPU_SNAPSHOT_INFO));
	CHECK(write_one(&inf) == 0);
	ser = inf.series[0];
	ser.value.gauge = 2;
	inf.series = &ser;
	CHECK(write_one(&inf) == -1 && errno == EINVAL);
	printf("  a marked family's values: overflowing bucket counts and an info value of 2 refused\n");

	/* What lies between families is still checked. */
	fams[0] = fams[1] = *family(&s2->snapshot, "requests");
	{
		struct pcpu_snapshot two = { 2, fams };

		CHECK(pcpu_snapshot_write(&two, PCPU_FORMAT_PROMETHEUS, &out, &len) == -1 && errno == EINVAL);
	}
	printf("  two marked families writing one sample refused\n");

	/* An unmarked family is checked whole; a marked one is vouched for. */
	fams[0] = *family(&s2->snapshot, "requests");
	ser = fams[0].series[0];
	ser.label_values = bad;
	fams[0].series = &ser;
	fams[0].flags &= ~PCPU_SNAPSHOT_CHECKED;
	CHECK(write_one(&fams[0]) == -1 && errno == EINVAL);
	fams[0].flags |= PCPU_SNAPSHOT_CHECKED;
	CHECK(write_one(&fams[0]) == 0);
	printf("  an unmarked family's bad label value refused; a family the program marks is its word\n");

	/* The merge: what a marked family's own check would have refused. */
	CHECK((m = pcpu_snapshot_merge_new()) != NULL);
	{
		static const char *const le[] = { "le" }, *const x[] = { "x" };
		static const char *const twice[] = { "seg", "seg" }, *const xy[] = { "x", "y" };
		static const char *const segn[] = { "pcpu_segment" }, *const a[] = { "a" }, *const bb[] = { "b" };
		struct pcpu_snapshot one = { 1, &hf };
		struct pcpu_snapshot plain;
		struct pcpu_snapshot_family pf[8];
		size_t f;

		hf = *family(&s2->snapshot, "latency_seconds");
		CHECK(pcpu_snapshot_merge_add(m, &one, 1, le, x) == -1 && errno == EINVAL);
		CHECK(strstr(pcpu_stats_error(), "le") != NULL);
		CHECK(pcpu_snapshot_merge_add(m, &s2->snapshot, 2, twice, xy) == -1 && errno == EINVAL);
		pcpu_snapshot_merge_free(m);
		/* A marked input and the same families unmarked (another
		 * process's, say): one metric each, two series. */
		CHECK((m = pcpu_snapshot_merge_new()) != NULL);
		CHECK(s2->snapshot.nfamilies <= 8);
		for (f = 0; f < s2->snapshot.nfamilies; f++) {
			pf[f] = s2->snapshot.families[f];
			pf[f].flags &= ~PCPU_SNAPSHOT_CHECKED;
		}
		plain.nfamilies = s2->snapshot.nfamilies;
		plain.families = pf;
		CHECK(pcpu_snapshot_merge_add(m, &s2->snapshot, 1, segn, a) == 0);
		CHECK(pcpu_snapshot_merge_add(m, &plain, 1, segn, bb) == 0);
		CHECK(pcpu_snapshot_merge_write(m, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
		CHECK(strstr(out, "requests_total{path=\"/x\",pcpu_segment=\"a\"} 7\n") != NULL);
		CHECK(strstr(out, "requests_total{path=\"/x\",pcpu_segment=\"b\"} 7\n") != NULL);
		free(out);
		pcpu_snapshot_merge_free(m);
	}
	printf("  the merge refuses \"le\" on a marked histogram and an extra label twice; "
	       "marked and unmarked label sets merge\n");

	pcpu_reader_snapshot_free(s1);
	pcpu_reader_snapshot_free(s2);
	pcpu_reader_snapshot_free(sp);
	pcpu_reader_close(r);
	CHECK(pcpu_segment_unpublish(seg) == 0);
	pcpu_registry_destroy(reg);
	{
		char cmd[300];

		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		CHECK(system(cmd) == 0);
	}
	printf("test_snapshot_checked: ok\n");
	return 0;
}
