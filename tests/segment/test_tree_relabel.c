/*
 * pcpu_family_relabel() in a shared registry (PCPU_SEGMENT_SHARED_TREE):
 * a series given new labels, from zero, over its storage and entry, seen
 * by every process of the tree and by readers.
 *
 *   workers   a master and two forked workers A and B that both used the
 *             series "old": B drops its handle and says so (a pipe), A
 *             relabels it "new" and adds to it; B then looks "old" up (a
 *             new series, from 0, not the reused storage) and "new" up
 *             (the relabelled storage, with A's adds); the master's
 *             lookups and collection, the C reader and an exec()ed
 *             pcpustat (argv[2]) show the new labels, each series once,
 *             the values from zero
 *   errors    ENOENT, EEXIST, EINVAL, ENOTSUP (a private registry), and
 *             ENOSPC once new series filled the string table
 *   kinds     a gauge and a histogram relabelled read 0 (their adds since
 *             in another process too); an info series relabelled reads 1
 *   loop      1,000 relabellings of a set of 4 series, each followed by
 *             adds: the directory's entries stay as they were, its
 *             strings grow by one blob (then the blobs the relabellings
 *             free serve the next ones); a reader meanwhile never shows a series' old
 *             values under its new labels, nor a label twice; the
 *             relabelling process's index of the directory followed its
 *             own rewrites in place (never emptied for them) and finds
 *             the new labels, not the old ones; its registry never walked
 *             its series for stale ones
 *   lockdeath a process killed while it holds the tree's lock in
 *             mid-relabel (the entry's sequence odd): the next taker
 *             repairs it (the entry made free, tree.c), every process
 *             drops the series, and a lookup of its labels makes it anew
 *
 * Run with PCPU_INDEX=cpu (ctest does).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "tree_child.h"
#include "segment/writer.h"

static char dir[256];
static pcpu_registry_t *reg;
static pcpu_segment_t *seg;
static pcpu_family_t *fam; /* a counter family, one label "id" */

static struct pcpu_segment *seg_of(void)
{
	return (struct pcpu_segment *)seg;
}

static void publish(size_t max_string_bytes)
{
	strcpy(dir, "/tmp/pcpu-relabel.XXXXXX");
	seg = publish_requests_tree(dir, max_string_bytes, &reg, &fam);
}

static void cleanup(void)
{
	remove_tree(seg, reg, dir);
}

static pcpu_counter_t counter(const char *id)
{
	const char *v[1] = {id};

	return pcpu_family_counter(fam, v);
}

static int relabel(const char *from, const char *to)
{
	const char *o[1] = {from}, *n[1] = {to};

	return pcpu_family_relabel(fam, o, n);
}

/* How many series of "requests" snapshot s has with label value id, and
 * the value of the last one. */
static int in_snapshot(const struct pcpu_snapshot *s, const char *id, uint64_t *value)
{
	int n = 0;

	for (size_t f = 0; f < s->nfamilies; f++) {
		const struct pcpu_snapshot_family *fm = &s->families[f];

		if (strcmp(fm->name, "requests") != 0)
			continue;
		for (size_t i = 0; i < fm->nseries; i++)
			if (fm->nlabels >= 1 && !strcmp(fm->series[i].label_values[0], id)) {
				*value = fm->series[i].value.counter;
				n++;
			}
	}
	return n;
}

/* The reader's view: n series id, the last one's value v. */
static void reader_shows(const char *id, int n, uint64_t v)
{
	struct pcpu_reader_snapshot *r = read_tree_segment(dir);
	uint64_t got = 0;
	int k = in_snapshot(&r->snapshot, id, &got);

	if (k != n || (n && got != v))
		fprintf(stderr, "reader: %d series id=\"%s\" (value %" PRIu64 "), expected %d (value %" PRIu64
				")\n", k, id, got, n, v);
	CHECK(k == n && (!n || got == v));
	pcpu_reader_snapshot_free(r);
}

/* ---- workers ----------------------------------------------------------------- */

static void rd(int fd)
{
	char c;

	CHECK(read(fd, &c, 1) == 1);
}

static void wr(int fd)
{
	CHECK(write(fd, "x", 1) == 1);
}

static void workers(const char *pcpustat)
{
	int b_dropped[2], a_done[2];
	pcpu_counter_t master_old;
	pid_t a, b;

	publish(0);
	master_old = counter("old");
	CHECK(master_old);
	pcpu_counter_add(master_old, 100);
	CHECK(pipe(b_dropped) == 0 && pipe(a_done) == 0);
	a = fork();
	CHECK(a >= 0);
	if (a == 0) {
		pcpu_counter_t c = counter("old"), n;

		alarm(60);
		CHECK(c);
		pcpu_counter_add(c, 3);
		rd(b_dropped[0]); /* B no longer uses "old" */
		if (relabel("old", "new") != 0)
			fprintf(stderr, "relabel: %s\n", pcpu_stats_error());
		n = counter("new");
		CHECK(n == c); /* the same storage, under its new labels */
		CHECK_EQ_U64(pcpu_counter_fetch(n), 0);
		pcpu_counter_add(n, 2);
		wr(a_done[1]);
		_exit(0);
	}
	b = fork();
	CHECK(b >= 0);
	if (b == 0) {
		pcpu_counter_t c = counter("old"), o, n;

		alarm(60); /* A failed: fail too, instead of waiting */
		CHECK(c);
		pcpu_counter_add(c, 4);
		/* A registration: B's index of the directory now holds "old"'s
		 * entry under its old labels (which the relabelling must make
		 * it forget). */
		CHECK(counter("b-other"));
		c = NULL; /* dropped */
		wr(b_dropped[1]);
		rd(a_done[0]);
		o = counter("old");
		CHECK(o);
		/* A new series, not the storage "new" now has. */
		CHECK_EQ_U64(pcpu_counter_fetch(o), 0);
		pcpu_counter_add(o, 1);
		n = counter("new");
		CHECK(n && n != o);
		CHECK_EQ_U64(pcpu_counter_fetch(n), 2); /* A's adds after the relabel */
		pcpu_counter_add(n, 10);
		_exit(0);
	}
	wait_ok(a);
	wait_ok(b);
	/* The master: its "old" is gone (its lookup finds none in this
	 * process until it registers it), "new" adopted. */
	{
		const char *v[1] = {"old"};
		pcpu_counter_t n, o;
		uint64_t got = 0;
		struct pcpu_snapshot *s;

		errno = 0;
		CHECK(pcpu_family_lookup(fam, v) == NULL && errno == ENOENT);
		n = counter("new");
		CHECK(n);
		CHECK_EQ_U64(pcpu_counter_fetch(n), 12);
		o = counter("old");
		CHECK(o && o != n);
		CHECK_EQ_U64(pcpu_counter_fetch(o), 1);
		s = pcpu_registry_snapshot(reg);
		CHECK(s);
		CHECK(in_snapshot(s, "new", &got) == 1 && got == 12);
		CHECK(in_snapshot(s, "old", &got) == 1 && got == 1);
		pcpu_snapshot_free(s);
	}
	reader_shows("new", 1, 12);
	reader_shows("old", 1, 1);
	if (pcpustat && *pcpustat) {
		char cmd[800], line[512];
		int news = 0, olds = 0;
		FILE *p;

		snprintf(cmd, sizeof cmd, "PCPU_SEGMENT_DIR=%s %s tree 2>&1", dir, pcpustat);
		p = popen(cmd, "r");
		CHECK(p);
		while (fgets(line, sizeof line, p)) {
			if (strstr(line, "id=\"new\"")) {
				news++;
				if (!strstr(line, " 12"))
					fprintf(stderr, "pcpustat: %s", line);
				CHECK(strstr(line, " 12"));
			}
			if (strstr(line, "id=\"old\"")) {
				olds++;
				CHECK(strstr(line, " 1"));
			}
		}
		CHECK(pclose(p) == 0);
		if (news != 1 || olds != 1)
			fprintf(stderr, "pcpustat: %d lines id=\"new\", %d id=\"old\"\n", news, olds);
		CHECK(news == 1 && olds == 1);
	}
	cleanup();
	printf("workers: A relabelled \"old\" to \"new\"; B's \"old\" is a new series from 0, its \"new\" "
	       "has A's adds; master, reader%s agree\n", pcpustat && *pcpustat ? " and pcpustat" : "");
}

/* ---- errors ------------------------------------------------------------------ */

static void errors(void)
{
	const char *one[1] = {"a"}, *bad[1] = {NULL};
	pcpu_registry_t *priv;
	pcpu_family_t *pf;
	struct pcpu_family_desc d;
	static const char *const ln[1] = {"id"};
	int n, r;

	publish(4096);
	CHECK(counter("a") && counter("b"));
	errno = 0;
	CHECK(relabel("absent", "c") == -1 && errno == ENOENT);
	errno = 0;
	CHECK(relabel("a", "b") == -1 && errno == EEXIST);
	{
		/* "e", which another process made: this one's table has no
		 * "e", the directory has. */
		pid_t pid = fork();

		CHECK(pid >= 0);
		if (pid == 0)
			_exit(counter("e") ? 0 : 1);
		wait_ok(pid);
	}
	errno = 0;
	CHECK(relabel("a", "e") == -1 && errno == EEXIST);
	errno = 0;
	CHECK(pcpu_family_relabel(fam, one, NULL) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_family_relabel(fam, one, bad) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_family_relabel(NULL, one, one) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(relabel("a", "bad\xff") == -1 && errno == EINVAL);
	/* The refusals changed nothing. */
	CHECK(relabel("a", "c") == 0);
	errno = 0;
	CHECK(relabel("a", "d") == -1 && errno == ENOENT);
	/* The string table fills (relabelling no longer fills it: each
	 * one frees the blob it leaves, test_tree_relabel_reuse.c), with new
	 * series; then a relabelling, which needs a blob before it frees
	 * one, is ENOSPC, and nothing changes. */
	for (n = 0, r = 0; n < 10000; n++) {
		char id[32];

		snprintf(id, sizeof id, "f%d", n);
		errno = 0;
		if (!counter(id))
			break;
	}
	CHECK(errno == ENOSPC);
	CHECK(n > 10 && n < 10000);
	errno = 0;
	r = relabel("c", "c2");
	CHECK(r == -1 && errno == ENOSPC);
	{
		uint64_t got = 0;
		struct pcpu_reader_snapshot *rs;

		CHECK(counter("c"));
		reader_shows("c", 1, 0);
		rs = read_tree_segment(dir);
		CHECK(in_snapshot(&rs->snapshot, "c2", &got) == 0);
		pcpu_reader_snapshot_free(rs);
	}
	/* A private registry: ENOTSUP. */
	priv = pcpu_registry_create();
	CHECK(priv);
	memset(&d, 0, sizeof d);
	d.name = "p";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = ln;
	pf = pcpu_registry_family(priv, &d);
	CHECK(pf && pcpu_family_counter(pf, one));
	errno = 0;
	CHECK(pcpu_family_relabel(pf, one, (const char *const[]){"z"}) == -1 && errno == ENOTSUP);
	pcpu_registry_destroy(priv);
	cleanup();
	printf("errors: ENOENT, EEXIST, EINVAL, ENOTSUP, ENOSPC once %d more series filled the strings\n", n);
}

/* ---- kinds ------------------------------------------------------------------- */

/* Gauges and histograms (counters: the other modes) from zero after a
 * relabelling, in the relabelling process and in another one. */
/* The reader's series of info family build_info with label version v:
 * how many, and the last one's value. */
static int info_shows(const char *v, int64_t *value)
{
	struct pcpu_reader_snapshot *r = read_tree_segment(dir);
	int n = 0;

	for (size_t f = 0; f < r->snapshot.nfamilies; f++) {
		const struct pcpu_snapshot_family *fm = &r->snapshot.families[f];

		if (strncmp(fm->name, "build", 5) != 0)
			continue;
		for (size_t i = 0; i < fm->nseries; i++)
			if (fm->nlabels >= 1 && !strcmp(fm->series[i].label_values[0], v)) {
				*value = fm->series[i].value.gauge;
				n++;
			}
	}
	pcpu_reader_snapshot_free(r);
	return n;
}

static void kinds(void)
{
	static const char *const ln[1] = {"id"};
	static const struct pcpu_histogram_layout lay = {
		.scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 2, .max_value = 1 << 24};
	const char *a[1] = {"a"}, *b[1] = {"b"};
	struct pcpu_family_desc d;
	pcpu_family_t *gf, *hf;
	pcpu_gauge_t g;
	pcpu_histogram_t *h;
	uint64_t count = 1, counts[512];
	size_t nb;
	pid_t pid;

	publish(0);
	memset(&d, 0, sizeof d);
	d.name = "level";
	d.type = PCPU_METRIC_GAUGE;
	d.nlabels = 1;
	d.label_names = ln;
	gf = pcpu_registry_family(reg, &d);
	d.name = "latency";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.histogram = &lay;
	hf = pcpu_registry_family(reg, &d);
	CHECK(gf && hf);
	g = pcpu_family_gauge(gf, a);
	h = pcpu_family_histogram(hf, a);
	CHECK(g && h);
	pcpu_gauge_set(g, 5);
	pcpu_histogram_record(h, 3);
	pcpu_histogram_record(h, 1000);
	CHECK(pcpu_registry_info(reg, "build_info", NULL, 1, (const char *const[]){"version"},
				 (const char *const[]){"1.0"}) == 0);
	CHECK(pcpu_family_relabel(gf, a, b) == 0);
	CHECK(pcpu_family_relabel(hf, a, b) == 0);
	/* An info series keeps its 1: a reader never sees the new labels at
	 * 0, which says the info does not hold. */
	CHECK(pcpu_family_relabel(pcpu_registry_find(reg, "build_info"), (const char *const[]){"1.0"},
				  (const char *const[]){"1.1"}) == 0);
	CHECK(pcpu_family_gauge(gf, b) == g && pcpu_family_histogram(hf, b) == h);
	CHECK(pcpu_gauge_read(g) == 0);
	nb = pcpu_histogram_nbuckets(h);
	CHECK(nb <= 512);
	CHECK(pcpu_histogram_read(h, counts, nb, &count, NULL) == 0 && count == 0);
	pcpu_gauge_add(g, 2);
	pcpu_histogram_record(h, 7);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* Another process adopts them under "b", with only the adds
		 * made since. */
		pcpu_gauge_t g2 = pcpu_family_gauge(gf, b);
		pcpu_histogram_t *h2 = pcpu_family_histogram(hf, b);

		CHECK(g2 && h2);
		CHECK(pcpu_gauge_read(g2) == 2);
		CHECK(pcpu_histogram_read(h2, counts, nb, &count, NULL) == 0 && count == 1);
		_exit(0);
	}
	wait_ok(pid);
	{
		int64_t info = 0;

		CHECK(info_shows("1.0", &info) == 0);
		CHECK(info_shows("1.1", &info) == 1);
		if (info != 1)
			fprintf(stderr, "the relabelled info series reads %" PRId64 ", want 1\n", info);
		CHECK(info == 1);
		/* Its storage too, as pcpu_family_lookup() hands it out. */
		info = pcpu_gauge_read(pcpu_family_lookup(pcpu_registry_find(reg, "build_info"),
							  (const char *const[]){"1.1"}));
		if (info != 1)
			fprintf(stderr, "the relabelled info series' gauge reads %" PRId64 ", want 1\n", info);
		CHECK(info == 1);
	}
	cleanup();
	printf("kinds: a gauge and a histogram relabelled read 0, then their new adds; an info series 1\n");
}

/* ---- loop -------------------------------------------------------------------- */

/* A reader while loop() relabels: every series "sK" it shows holds 0 or
 * K - 3 (what loop() adds after making it), never the value of the series
 * it was before (K - 7) under its new labels; each label once. Writes a
 * byte to `took` after each snapshot (loop() waits for one every 100
 * relabellings: snapshots interleave with them whatever the speeds); runs
 * until `stop` reads end of file; exits 1 on a violation. */
static void loop_reader(int stop, int took)
{
	unsigned long snapshots = 0;
	char c;

	CHECK(fcntl(stop, F_SETFL, O_NONBLOCK) == 0);
	CHECK(fcntl(took, F_SETFL, O_NONBLOCK) == 0); /* a full pipe: enough said */
	while (read(stop, &c, 1) < 0 && errno == EAGAIN) {
		struct pcpu_reader_snapshot *r = read_tree_segment(dir);

		for (size_t f = 0; f < r->snapshot.nfamilies; f++) {
			const struct pcpu_snapshot_family *fm = &r->snapshot.families[f];

			if (strcmp(fm->name, "requests") != 0)
				continue;
			for (size_t i = 0; i < fm->nseries; i++) {
				const char *id = fm->series[i].label_values[0];
				uint64_t k = strtoull(id + 1, NULL, 10), v = fm->series[i].value.counter;
				uint64_t dup = 0;

				if (v != 0 && (k < 4 || v != k - 3)) {
					fprintf(stderr, "reader: %s = %" PRIu64 " (0 or %" PRIu64 " expected)\n",
						id, v, k < 4 ? 0 : k - 3);
					_exit(1);
				}
				CHECK(in_snapshot(&r->snapshot, id, &dup) == 1);
			}
		}
		pcpu_reader_snapshot_free(r);
		snapshots++;
		(void)!write(took, "x", 1);
	}
	printf("loop: the reader took %lu snapshots during the relabellings\n", snapshots);
	fflush(stdout);
	_exit(0);
}

static void loop(void)
{
	char names[4][32];
	uint64_t entries, strings, rebuilds, walks;
	int i, stop[2], took[2];
	pid_t reader;

	publish(0);
	for (i = 0; i < 4; i++) {
		snprintf(names[i], sizeof names[i], "s%d", i);
		CHECK(counter(names[i]));
	}
	entries = __atomic_load_n(&seg_of()->hdr->entries_used, __ATOMIC_RELAXED);
	strings = __atomic_load_n(&seg_of()->hdr->strings_used, __ATOMIC_RELAXED);
	rebuilds = seg_of()->tree_index_rebuilds;
	walks = seg_of()->tree_reg_walks;
	CHECK(pipe(stop) == 0 && pipe(took) == 0);
	reader = fork();
	CHECK(reader >= 0);
	if (reader == 0) {
		close(stop[1]);
		close(took[0]);
		loop_reader(stop[0], took[1]);
	}
	close(stop[0]);
	close(took[1]);
	for (i = 0; i < 1000; i++) {
		char to[32];
		pcpu_counter_t c;

		if (i % 100 == 0)
			rd(took[0]); /* the reader took one more snapshot */
		snprintf(to, sizeof to, "s%d", i + 4);
		CHECK(relabel(names[i % 4], to) == 0);
		strcpy(names[i % 4], to);
		c = counter(to);
		CHECK(c);
		CHECK_EQ_U64(pcpu_counter_fetch(c), 0);
		pcpu_counter_add(c, (uint64_t)i + 1);
	}
	close(stop[1]);
	wait_ok(reader);
	CHECK_EQ_U64(__atomic_load_n(&seg_of()->hdr->entries_used, __ATOMIC_RELAXED), entries);
	/* One blob appended (the first relabelling's), every later one
	 * taking the blob the one before freed. */
	CHECK_EQ_U64(__atomic_load_n(&seg_of()->hdr->strings_used, __ATOMIC_RELAXED), strings + 64);
	/* This process's index: never emptied for its own rewrites (1,000
	 * rebuilds of O(entries) each otherwise), and right -- the current
	 * labels found at their entries, old ones not at all. */
	CHECK_EQ_U64(seg_of()->tree_index_rebuilds, rebuilds);
	/* Nor did its registry walk its series for stale ones: it renamed
	 * the one it relabelled. */
	CHECK_EQ_U64(seg_of()->tree_reg_walks, walks);
	CHECK(pcpu__tree_enter(seg_of()) == 0);
	{
		int64_t fidx = pcpu__directory_family_entry(seg_of(), fam);
		const char *old[1] = {"s500"};

		CHECK(fidx >= 0);
		for (i = 0; i < 4; i++) {
			const char *v[1] = {names[i]};

			CHECK(pcpu__directory_find_series(seg_of(), (uint64_t)fidx, v, 1) >= 0);
		}
		CHECK(pcpu__directory_find_series(seg_of(), (uint64_t)fidx, old, 1) < 0);
	}
	pcpu__tree_leave(seg_of());
	for (i = 0; i < 4; i++)
		reader_shows(names[i], 1, (uint64_t)(996 + i) + 1);
	reader_shows("s0", 0, 0);
	cleanup();
	printf("loop: 1000 relabellings, %" PRIu64 " entries throughout\n", entries);
}

/* ---- lockdeath --------------------------------------------------------------- */

static void lockdeath(void)
{
	struct pcpu_segment *s;
	int fds[2], st;
	uint64_t repairs;
	pcpu_counter_t x;
	pid_t pid;

	publish(0);
	s = seg_of();
	x = counter("x");
	CHECK(x);
	pcpu_counter_add(x, 5);
	repairs = s->tree->repairs;
	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* A relabelling in mid-rewrite of "x"'s entry: the tree's lock
		 * held, the generation and the entry's sequence odd. */
		const char *v[1] = {"x"};
		int64_t fidx, idx;

		CHECK(pcpu__tree_enter(s) == 0);
		fidx = pcpu__directory_family_entry(s, fam);
		CHECK(fidx >= 0);
		idx = pcpu__directory_find_series(s, (uint64_t)fidx, v, 1);
		CHECK(idx >= 0);
		pcpu__directory_begin(s);
		__atomic_add_fetch(&s->entries[idx].seq, 1, __ATOMIC_RELEASE);
		wr(fds[1]);
		pause();
		_exit(1);
	}
	rd(fds[0]);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	alarm(60); /* a lock left held fails the test instead of hanging it */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* The next taker of the lock (a registration) repairs; then
		 * "x", whose entry the repair freed, is made anew, from 0. */
		pcpu_counter_t y;

		CHECK(counter("other"));
		y = counter("x");

		CHECK(y);
		CHECK_EQ_U64(pcpu_counter_fetch(y), 0);
		pcpu_counter_add(y, 7);
		_exit(0);
	}
	wait_ok(pid);
	CHECK(s->tree->repairs == repairs + 1);
	CHECK((s->hdr->generation & 1) == 0);
	/* The master drops its "x" (its entry is gone) and adopts the new. */
	x = counter("x");
	CHECK(x);
	CHECK_EQ_U64(pcpu_counter_fetch(x), 7);
	alarm(0);
	reader_shows("x", 1, 7);
	cleanup();
	printf("lockdeath: a relabelling killed in mid-rewrite is repaired by the next taker\n");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "workers"))
		workers(argc >= 3 ? argv[2] : NULL);
	else if (argc >= 2 && !strcmp(argv[1], "errors"))
		errors();
	else if (argc >= 2 && !strcmp(argv[1], "kinds"))
		kinds();
	else if (argc >= 2 && !strcmp(argv[1], "loop"))
		loop();
	else if (argc >= 2 && !strcmp(argv[1], "lockdeath"))
		lockdeath();
	else {
		fprintf(stderr, "usage: test_tree_relabel workers [PCPUSTAT] | errors | kinds | loop | lockdeath\n");
		return 2;
	}
	return 0;
}
