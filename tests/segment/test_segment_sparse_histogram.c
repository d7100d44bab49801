/*
 * Sparse histograms in a published segment (format 2.10, issue 61 item 2):
 * PCPU_FAMILY_SPARSE families' series whose groups of buckets are made at
 * their first record, found by outside readers through each series' table.
 *
 * ordinary: a published registry with sparse families of four layouts (log-
 *   linear, exponential, 247 explicit bounds, and fractions), each beside a
 *   dense twin fed the same random values: the reader's expositions are
 *   byte for byte the writer's; groups made only where values fell (the
 *   file's data). A reader that keeps its directory between snapshots sees
 *   a group made after its first snapshot (the generation moves). A fork()
 *   child's groups never reach the parent's file: the parent's next group,
 *   made where the child's was, is read once.
 * tree: a shared tree; four children record concurrently into one sparse
 *   series (so they race to make its groups) and each into a series of its
 *   own; every process's own reads and the outside reader's equal the dense
 *   twin's. A family registered sparse by one process and dense by another
 *   is refused (EEXIST), never read over.
 *
 * Usage: test_segment_sparse_histogram ordinary|tree
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/histogram.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "tree_child.h"

#define NLAYOUTS 4
#define NCHILDREN 4

static const char *const ln[] = { "k" };
static int64_t b247[247];
static struct pcpu_histogram_layout layouts[NLAYOUTS] = {
	{ .scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 3, .max_value = 10000000000 },
	{ .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3, .scale_exp10 = -9 },
	{ .scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = b247, .nbounds = 247 },
	{ .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 2, .scale_exp10 = -9 }, /* fractions */
};
static pcpu_family_t *sparse_f[NLAYOUTS], *dense_f[NLAYOUTS];

static uint64_t rng = 88172645463325252ull;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A log-uniform value in [1, 2^30): most buckets of every layout, a few
 * groups per series as real latencies are. */
static int64_t random_value(void)
{
	return (int64_t)((next_random() % (1u << 20)) + 1) << (next_random() % 10);
}

static void families(pcpu_registry_t *reg)
{
	size_t i;

	for (i = 0; i < 247; i++)
		b247[i] = (int64_t)(i + 1) * 4000;
	for (i = 0; i < NLAYOUTS; i++) {
		struct pcpu_family_desc d = { .type = PCPU_METRIC_HISTOGRAM, .nlabels = 1,
					      .label_names = ln, .histogram = &layouts[i],
					      .scale_exp10 = layouts[i].scale_exp10 };
		char sname[32], dname[32];
		unsigned fr = i == 3 ? PCPU_FAMILY_FRACTIONS : 0;

		snprintf(sname, sizeof sname, "sparse%zu_seconds", i);
		snprintf(dname, sizeof dname, "dense%zu_seconds", i);
		d.name = sname;
		sparse_f[i] = pcpu_registry_family_ex(reg, &d, PCPU_FAMILY_SPARSE | fr, 0, NULL, NULL);
		d.name = dname;
		dense_f[i] = pcpu_registry_family_ex(reg, &d, fr, 0, NULL, NULL);
		if (!sparse_f[i] || !dense_f[i])
			fprintf(stderr, "family %zu: %s\n", i, pcpu_stats_error());
		CHECK(sparse_f[i] && dense_f[i]);
	}
}

static pcpu_histogram_t *series(pcpu_family_t *f, const char *k)
{
	const char *v[1] = { k };
	pcpu_histogram_t *h = pcpu_family_histogram(f, v);

	if (!h)
		fprintf(stderr, "series %s: %s\n", k, pcpu_stats_error());
	CHECK(h != NULL);
	return h;
}

/* n random records into layout i's series k, sparse and dense alike. */
static void record(size_t i, const char *k, int n)
{
	pcpu_histogram_t *s = series(sparse_f[i], k), *d = series(dense_f[i], k);

	while (n-- > 0) {
		int64_t v = random_value();

		if (i == 3) { /* fractions: a double, sometimes not whole */
			double x = (double)v * 1e-9 + (n % 3 == 0 ? 0.25e-9 : 0);

			pcpu_histogram_observe(s, x);
			pcpu_histogram_observe(d, x);
		} else {
			pcpu_histogram_record(s, v);
			pcpu_histogram_record(d, v);
		}
	}
}

/* Layout i's series k reads the same, sparse and dense, in this process. */
static void same_here(size_t i, const char *k)
{
	pcpu_histogram_t *s = series(sparse_f[i], k), *d = series(dense_f[i], k);
	size_t n = pcpu_histogram_nbuckets(s), b;
	uint64_t *cs = calloc(n, 8), *cd = calloc(n, 8), ns, nd;
	int64_t ss, sd;

	CHECK(cs && cd && n == pcpu_histogram_nbuckets(d));
	CHECK(pcpu_histogram_read(s, cs, n, &ns, &ss) == 0);
	CHECK(pcpu_histogram_read(d, cd, n, &nd, &sd) == 0);
	for (b = 0; b < n; b++)
		if (cs[b] != cd[b]) {
			fprintf(stderr, "layout %zu series %s bucket %zu: sparse %llu, dense %llu\n", i, k,
				b, (unsigned long long)cs[b], (unsigned long long)cd[b]);
			exit(1);
		}
	CHECK(ns == nd && ss == sd);
	free(cs);
	free(cd);
}

/* The text of the writer's snapshot of `reg` without the dense families'
 * names: what its sparse families' must read. */
static char *text(pcpu_registry_t *reg, const struct pcpu_snapshot *s)
{
	char *out;
	size_t len;

	if (reg)
		CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
	else
		CHECK(pcpu_snapshot_write(s, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
	return out;
}

static int cmp_lines(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The text's lines, sorted (in place: the text is cut). */
static char **sorted_lines(char *t, size_t *n)
{
	char **lines = NULL, *save = NULL, *l;

	*n = 0;
	for (l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		lines = realloc(lines, (*n + 1) * sizeof *lines);
		CHECK(lines);
		lines[(*n)++] = l;
	}
	qsort(lines, *n, sizeof *lines, cmp_lines);
	return lines;
}

/* The reader's exposition is the writer's, byte for byte (a tree's: line
 * for line -- the writer lists its series in the order it met them, the
 * reader in the tree's); and each sparse family's lines are its dense
 * twin's but for the name. */
static void reader_same(pcpu_registry_t *reg, pcpu_reader_t *r, int tree)
{
	struct pcpu_reader_snapshot *s = NULL;
	char *a, *b, *p;

	if (pcpu_reader_snapshot(r, 0, &s) != 0)
		fprintf(stderr, "snapshot: %s\n", pcpu_segment_error());
	CHECK(s != NULL);
	a = text(reg, NULL);
	b = text(NULL, &s->snapshot);
	if (tree) {
		char *a2 = strdup(a), **la, **lb;
		size_t na, nb, i;

		CHECK(a2);
		la = sorted_lines(a2, &na);
		lb = sorted_lines(b, &nb);
		CHECK(na == nb);
		for (i = 0; i < na; i++)
			if (strcmp(la[i], lb[i]) != 0) {
				fprintf(stderr, "writer: %s\nreader: %s\n", la[i], lb[i]);
				exit(1);
			}
		free(la);
		free(lb);
		free(a2);
	} else if (strcmp(a, b) != 0) {
		size_t i = 0, l = 0;

		while (a[i] == b[i])
			if (a[i++] == '\n')
				l = i;
		fprintf(stderr, "the reader differs from the writer at line:\n%.200s\n--- reader ---\n%.200s\n",
			a + l, b + l);
		exit(1);
	}
	/* sparseN -> denseN: then the lines of both kinds pair up. */
	for (p = a; (p = strstr(p, "sparse")); p += 5)
		memcpy(p, "dense", 5), memmove(p + 5, p + 6, strlen(p + 6) + 1);
	{
		size_t n;
		char **lines = sorted_lines(a, &n);

		/* Every line twice, once of each twin (the sort put them together). */
		CHECK(n % 2 == 0);
		for (size_t i = 0; i < n; i += 2)
			if (strcmp(lines[i], lines[i + 1]) != 0 && strncmp(lines[i], "# ", 2) != 0) {
				fprintf(stderr, "sparse and dense differ: %s | %s\n", lines[i], lines[i + 1]);
				exit(1);
			}
		free(lines);
	}
	free(a);
	free(b);
	pcpu_reader_snapshot_free(s);
}

/* Bytes of data the file holds (tmpfs: SEEK_DATA/SEEK_HOLE). */
static uint64_t file_data(const char *path)
{
	int fd = open(path, O_RDONLY);
	off_t pos = 0, end, d, h;
	uint64_t n = 0;

	CHECK(fd >= 0);
	end = lseek(fd, 0, SEEK_END);
	while (pos < end && (d = lseek(fd, pos, SEEK_DATA)) >= 0) {
		h = lseek(fd, d, SEEK_HOLE);
		n += (uint64_t)(h - d);
		pos = h;
	}
	close(fd);
	return n;
}

static pcpu_segment_t *publish(pcpu_registry_t *reg, char *dir, int tree)
{
	struct pcpu_segment_options o;
	pcpu_segment_t *seg;

	CHECK(mkdtemp(dir) != NULL);
	memset(&o, 0, sizeof o);
	o.dir = dir;
	o.flags = tree ? PCPU_SEGMENT_SHARED_TREE : 0;
	seg = pcpu_segment_publish(reg, "tree", &o); /* tree_child.h's name, either kind */
	if (!seg)
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
	CHECK(seg != NULL);
	return seg;
}

static void ordinary(void)
{
	char dir[] = "/dev/shm/pcpu-sparse-hist.XXXXXX";
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg;
	pcpu_reader_t *r;
	uint64_t before, after;
	pcpu_histogram_t *s;
	size_t i;
	pid_t pid;

	CHECK(reg);
	families(reg);
	seg = publish(reg, dir, 0);
	r = open_tree_segment(dir);
	for (i = 0; i < NLAYOUTS; i++) {
		record(i, "a", 2000);
		record(i, "b", 3);
		(void)series(sparse_f[i], "empty");
		(void)series(dense_f[i], "empty");
	}
	reader_same(reg, r, 0);
	for (i = 0; i < NLAYOUTS; i++)
		same_here(i, "a");

	/* A group made after the reader kept its directory (the second
	 * snapshot of an unchanged directory reads values alone). */
	reader_same(reg, r, 0);
	s = series(sparse_f[0], "b");
	for (i = 0; i < pcpu_histogram_nbuckets(s); i += 8) {
		int64_t lo, hi;

		CHECK(pcpu_histogram_bucket_range(s, i, &lo, &hi) == 0);
		pcpu_histogram_record(s, lo);
		pcpu_histogram_record(series(dense_f[0], "b"), lo);
	}
	reader_same(reg, r, 0);

	/* Sparse "empty" series hold no group: the file grows by the groups
	 * made, not by buckets (16 bytes x 89 buckets x regions when dense). */
	before = file_data(pcpu_segment_path(seg));
	record(0, "c", 1);
	after = file_data(pcpu_segment_path(seg));
	printf("ordinary: file data %llu bytes; one series, one record: +%llu\n",
	       (unsigned long long)before, (unsigned long long)(after - before));

	/* A fork() child makes groups in its private copy of the zone; the
	 * parent's next groups come from the same places. Were the child's
	 * places in the parent's file, two tables would name one group. */
	record(1, "forked", 1);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		rng += 12345; /* other values than the parent's next: other groups */
		record(1, "forked", 200); /* the parent's series, in the child */
		_exit(0);
	}
	wait_ok(pid);
	record(1, "forked", 200);
	record(1, "later", 200);
	reader_same(reg, r, 0);
	pcpu_reader_close(r);
	remove_tree(seg, reg, dir);
	printf("ordinary: ok\n");
}

static void tree(void)
{
	char dir[] = "/dev/shm/pcpu-sparse-tree.XXXXXX";
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg;
	pcpu_reader_t *r;
	pid_t pids[NCHILDREN];
	int i, j, go[2];
	char k[16];

	CHECK(reg);
	families(reg);
	seg = publish(reg, dir, 1);
	/* One series made before the fork(), one made by whichever child
	 * comes first: both are the tree's. */
	record(0, "shared", 10);
	CHECK(pipe(go) == 0);
	fflush(stdout);
	for (i = 0; i < NCHILDREN; i++) {
		pids[i] = fork();
		CHECK(pids[i] >= 0);
		if (pids[i] == 0) {
			char c;

			close(go[1]);
			CHECK(read(go[0], &c, 1) == 0); /* all start together */
			rng += (uint64_t)i * 7919;
			for (j = 0; j < NLAYOUTS; j++) {
				record((size_t)j, "shared", 500);
				record((size_t)j, "late", 300);
				snprintf(k, sizeof k, "own%d", i);
				record((size_t)j, k, 100);
			}
			/* Its own series, which no other process writes (the
			 * shared ones are compared once every child is done). */
			for (j = 0; j < NLAYOUTS; j++)
				same_here((size_t)j, k);
			_exit(0);
		}
	}
	close(go[0]);
	close(go[1]);
	for (i = 0; i < NCHILDREN; i++)
		wait_ok(pids[i]);
	/* This process's reads see the groups the children made. */
	for (j = 0; j < NLAYOUTS; j++) {
		same_here((size_t)j, "shared");
		same_here((size_t)j, "late");
		for (i = 0; i < NCHILDREN; i++) {
			snprintf(k, sizeof k, "own%d", i);
			same_here((size_t)j, k);
		}
	}
	r = open_tree_segment(dir);
	reader_same(reg, r, 1);

	/* A family sparse in one process and dense in another: refused. */
	fflush(stdout);
	for (i = 0; i < 2; i++) {
		pid_t pid = fork();

		CHECK(pid >= 0);
		if (pid == 0) {
			struct pcpu_family_desc d = { .name = "late_seconds", .type = PCPU_METRIC_HISTOGRAM,
						      .nlabels = 1, .label_names = ln,
						      .histogram = &layouts[0] };
			pcpu_family_t *f = pcpu_registry_family_ex(reg, &d, i == 0 ? PCPU_FAMILY_SPARSE : 0, 0, NULL, NULL);

			if (i == 0) {
				CHECK(f != NULL);
				pcpu_histogram_record(series(f, "x"), 7);
			} else {
				CHECK(f == NULL && errno == EEXIST);
				CHECK(strstr(pcpu_stats_error(), "PCPU_FAMILY_SPARSE") != NULL);
			}
			_exit(0);
		}
		wait_ok(pid);
	}
	pcpu_reader_close(r);
	remove_tree(seg, reg, dir);
	printf("tree: ok\n");
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "ordinary") != 0 && strcmp(argv[1], "tree") != 0)) {
		fprintf(stderr, "usage: %s ordinary|tree\n", argv[0]);
		return 2;
	}
	if (strcmp(argv[1], "tree") == 0)
		tree();
	else
		ordinary();
	return 0;
}
