/*
 * A shared registry's relabelled series reuse the string table's room
 * (tree_blobs.c: the blob an entry named before is freed to its size
 * class's list, in the tree's shared state, and taken by the next blob of
 * that class), so that a tree relabelled for months stops growing.
 *
 *   bounded     one series, then a family of 8, relabelled 10,000 times
 *               each way among label values of 1..300 bytes (four size
 *               classes): strings_used grows by at most (series + 1)
 *               blobs of each class used, whatever the count of
 *               relabellings; the directory walk finds no two blobs that
 *               share bytes
 *   concurrent  a writer relabels 8 series among 64 label sets (values
 *               of 1..300 bytes) 20,000 times, adding a value signed by
 *               the label set after each; two reader processes snapshot
 *               meanwhile (pcpu_reader_*): every value shown under label
 *               set k is k's signature times 0..3, a label value is
 *               exactly what set k writes, a snapshot never fails
 *   twoproc     two processes (fork) relabel their own series in one
 *               tree at once: at the end no two entries, and no entry
 *               and a free blob, share a byte
 *   crash       a relabelling killed (SIGKILL, the tree's lock held) at
 *               each step of the lists' updates (pcpu__test_blob_pause):
 *               the next taker repairs, relabellings go on, no blob is
 *               shared; then 40 kills at random times in a loop of
 *               relabellings, the same
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
#include <time.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "tree_child.h"
#include "segment/writer.h"

extern void (*pcpu__test_blob_pause)(int step);

static char dir[256];
static pcpu_registry_t *reg;
static pcpu_segment_t *seg;
static pcpu_family_t *fam; /* a counter family, one label "id" */

static struct pcpu_segment *seg_of(void)
{
	return (struct pcpu_segment *)seg;
}

static void publish(void)
{
	strcpy(dir, "/tmp/pcpu-reuse.XXXXXX");
	seg = publish_requests_tree(dir, 0, &reg, &fam);
}

static void cleanup(void)
{
	remove_tree(seg, reg, dir);
}

static uint64_t strings_used(void)
{
	return __atomic_load_n(&seg_of()->hdr->strings_used, __ATOMIC_ACQUIRE);
}

/* Label set k (of process p): "p<p>k<k>-" then (k * 37) % 300 + 1 times
 * the letter 'a' + k % 26, so that the sets span four size classes. */
static void label_set(char *buf, size_t n, int p, int k)
{
	int len = snprintf(buf, n, "p%dk%d-", p, k), pad = (k * 37) % 300 + 1;

	CHECK(len > 0 && (size_t)(len + pad) < n);
	memset(buf + len, 'a' + k % 26, (size_t)pad);
	buf[len + pad] = 0;
}

/* Label set k's signature: what the writer adds to a series it gave k. */
static uint64_t signature(int k)
{
	return ((uint64_t)(k + 1) << 32) | 1;
}

/* Whether `id` is exactly one of process p's label sets; its k. */
static int label_set_of(const char *id, int p, int *k)
{
	char want[400];
	int q;

	if (sscanf(id, "p%dk%d-", &q, k) != 2 || q != p || *k < 0 || *k >= 100000)
		return 0;
	label_set(want, sizeof want, p, *k);
	return strcmp(id, want) == 0;
}

static int relabel(const char *from, const char *to)
{
	const char *o[1] = {from}, *n[1] = {to};
	int r = pcpu_family_relabel(fam, o, n);

	if (r != 0 && errno != EEXIST)
		fprintf(stderr, "relabel %.20s -> %.20s: %s\n", from, to, strerror(errno));
	return r;
}

/* ---- the directory walk ------------------------------------------------------ */

struct range {
	uint64_t off, end;
};

static int by_off(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Under the tree's lock: every live entry's blob and every free blob (its
 * class's room), in the table, none sharing a byte with another. Returns
 * the bytes of the table in no blob (leaked, or never used: the slack). */
static uint64_t walk(const char *when)
{
	struct pcpu_segment *s = seg_of();
	struct range *r;
	size_t n = 0, cap = 4096, i;
	uint64_t in = 0, used, e;
	unsigned c;

	CHECK(pcpu__tree_enter(s) == 0);
	used = s->strings_used;
	r = calloc(cap, sizeof *r);
	CHECK(r);
	for (e = 0; e < s->entries_used; e++) {
		const struct pcpu__seg_entry *x = &s->entries[e];

		if (x->kind == PCPU__SEG_FREE || x->blob_len == 0)
			continue;
		CHECK(!(x->seq & 1));
		CHECK(n < cap);
		r[n].off = x->blob_off;
		r[n++].end = x->blob_off + ((uint64_t)1 << (BLOB_MIN_SHIFT + pcpu__blob_class(x->blob_len)));
	}
	for (c = 0; c < BLOB_CLASSES; c++) {
		uint64_t h = s->tree->free_blobs[c];

		while (h) {
			CHECK(n < cap);
			CHECK(h - 1 < used);
			r[n].off = h - 1;
			r[n++].end = h - 1 + ((uint64_t)1 << (BLOB_MIN_SHIFT + c));
			memcpy(&h, s->strings + h - 1, sizeof h);
		}
	}
	qsort(r, n, sizeof *r, by_off);
	for (i = 0; i < n; i++) {
		if (r[i].end > used || (i && r[i].off < r[i - 1].end))
			fprintf(stderr, "%s: blob [%" PRIu64 ", %" PRIu64 ") %s\n", when, r[i].off, r[i].end,
				r[i].end > used ? "past strings_used" : "shares bytes with the one before");
		CHECK(r[i].end <= used && (i == 0 || r[i].off >= r[i - 1].end));
		in += r[i].end - r[i].off;
	}
	pcpu__tree_leave(s);
	free(r);
	return used - in;
}

/* ---- bounded ----------------------------------------------------------------- */

/* nser series relabelled 10,000 times each among label sets of 1..300
 * bytes: the table's growth stays within (nser + 1) blobs per class. */
static void bounded_run(int nser)
{
	char cur[8][400], to[400];
	uint64_t base, bound = 0, grown;
	int i, k = 0;
	unsigned c;

	publish();
	for (i = 0; i < nser; i++) {
		label_set(cur[i], sizeof cur[i], 0, k++);
		CHECK(pcpu_family_counter(fam, (const char *[]){cur[i]}));
	}
	base = strings_used();
	for (i = 0; i < 10000 * nser; i++) {
		pcpu_counter_t x;

		label_set(to, sizeof to, 0, k++ % 1000 + nser);
		if (relabel(cur[i % nser], to) != 0) {
			/* A label set another series holds now: the next. */
			CHECK(errno == EEXIST);
			continue;
		}
		strcpy(cur[i % nser], to);
		x = pcpu_family_counter(fam, (const char *[]){to});
		CHECK(x);
		pcpu_counter_add(x, 1);
	}
	/* Label values of 5..312 bytes + NUL: classes 64..512. */
	for (c = 0; c < 4; c++)
		bound += (uint64_t)(nser + 1) << (BLOB_MIN_SHIFT + c);
	grown = strings_used() - base;
	printf("bounded: %d series, %d relabellings: strings_used %" PRIu64 " -> %" PRIu64
	       " (+%" PRIu64 ", %.3f bytes per relabelling; bound %" PRIu64 "); %" PRIu64
	       " blobs freed, %" PRIu64 " reused; %" PRIu64 " bytes in no blob\n",
	       nser, 10000 * nser, base, strings_used(), grown, (double)grown / (10000.0 * nser), bound,
	       seg_of()->tree->blobs_freed, seg_of()->tree->blobs_reused, walk("bounded"));
	CHECK(grown <= bound);
	cleanup();
}

static void bounded(void)
{
	bounded_run(1);
	bounded_run(8);
}

/* ---- concurrent -------------------------------------------------------------- */

/* A reader process: snapshots until `stop` is readable; exits 1 on a
 * value not signed by its label set, a label value no set has, or a
 * snapshot that fails. */
static void reader_proc(int stop)
{
	pcpu_reader_t *r = open_tree_segment(dir);
	unsigned long snaps = 0, shown = 0, changed = 0;
	char c;

	CHECK(fcntl(stop, F_SETFL, O_NONBLOCK) == 0);
	while (read(stop, &c, 1) < 0 && errno == EAGAIN) {
		struct pcpu_reader_snapshot *s = NULL;

		if (pcpu_reader_snapshot(r, 0, &s) != 0) {
			fprintf(stderr, "reader: snapshot failed: %s\n", pcpu_reader_error());
			_exit(1);
		}
		for (size_t f = 0; f < s->snapshot.nfamilies; f++) {
			const struct pcpu_snapshot_family *fm = &s->snapshot.families[f];

			if (strcmp(fm->name, "requests") != 0)
				continue;
			for (size_t i = 0; i < fm->nseries; i++) {
				const char *id = fm->series[i].label_values[0];
				uint64_t v = fm->series[i].value.counter;
				int k;

				if (!label_set_of(id, 0, &k)) {
					fprintf(stderr, "reader: label value \"%.40s\" of no set\n", id);
					_exit(1);
				}
				if (v % signature(k) != 0 || v / signature(k) > 3) {
					fprintf(stderr, "reader: set %d shows %#" PRIx64 ", not its signature %#" PRIx64
							" times 0..3\n", k, v, signature(k));
					_exit(1);
				}
				shown++;
			}
		}
		changed += s->changed;
		pcpu_reader_snapshot_free(s);
		snaps++;
	}
	pcpu_reader_close(r);
	printf("concurrent: a reader took %lu snapshots, %lu series shown, %lu entries in flux left out\n",
	       snaps, shown, changed);
	fflush(stdout);
	_exit(0);
}

static void concurrent(void)
{
	enum { NSER = 8, NSETS = 64, NREADERS = 2 };
	int cur[NSER], held[NSETS] = {0}, i, stop[2];
	pid_t rd[NREADERS];
	uint64_t base;
	char a[400], b[400];

	publish();
	for (i = 0; i < NSER; i++) {
		pcpu_counter_t x;

		cur[i] = i;
		held[i] = 1;
		label_set(a, sizeof a, 0, i);
		x = pcpu_family_counter(fam, (const char *[]){a});
		CHECK(x);
		pcpu_counter_add(x, signature(i));
	}
	base = strings_used();
	CHECK(pipe(stop) == 0);
	for (i = 0; i < NREADERS; i++) {
		rd[i] = fork();
		CHECK(rd[i] >= 0);
		if (rd[i] == 0) {
			close(stop[1]);
			reader_proc(stop[0]);
		}
	}
	close(stop[0]);
	srand(7);
	for (i = 0; i < 20000; i++) {
		int s = i % NSER, k, n, j;
		pcpu_counter_t x;

		do
			k = rand() % NSETS;
		while (held[k]);
		label_set(a, sizeof a, 0, cur[s]);
		label_set(b, sizeof b, 0, k);
		CHECK(relabel(a, b) == 0);
		held[cur[s]] = 0;
		held[k] = 1;
		cur[s] = k;
		x = pcpu_family_counter(fam, (const char *[]){b});
		CHECK(x);
		n = 1 + rand() % 3;
		for (j = 0; j < n; j++)
			pcpu_counter_add(x, signature(k));
	}
	close(stop[1]);
	for (i = 0; i < NREADERS; i++)
		wait_ok(rd[i]);
	printf("concurrent: 20000 relabellings, strings_used +%" PRIu64 "\n", strings_used() - base);
	walk("concurrent");
	cleanup();
}

/* ---- twoproc ----------------------------------------------------------------- */

/* Process p's loop: 4 series of its own, relabelled n times. */
static void relabel_loop(int p, int n, unsigned seed)
{
	char cur[4][400], to[400];
	int i, k = 0;

	for (i = 0; i < 4; i++) {
		label_set(cur[i], sizeof cur[i], p, k++);
		CHECK(pcpu_family_counter(fam, (const char *[]){cur[i]}));
	}
	srand(seed);
	for (i = 0; i < n; i++) {
		label_set(to, sizeof to, p, 4 + k++ % 500);
		CHECK(relabel(cur[i % 4], to) == 0);
		strcpy(cur[i % 4], to);
	}
}

static void twoproc(void)
{
	pid_t pid[2];
	uint64_t base;
	int p;

	publish();
	base = strings_used();
	for (p = 0; p < 2; p++) {
		pid[p] = fork();
		CHECK(pid[p] >= 0);
		if (pid[p] == 0) {
			relabel_loop(p + 1, 5000, (unsigned)p);
			_exit(0);
		}
	}
	for (p = 0; p < 2; p++)
		wait_ok(pid[p]);
	printf("twoproc: 2 x 5000 relabellings, strings_used +%" PRIu64 ", %" PRIu64 " bytes in no blob; "
	       "%" PRIu64 " blobs freed, %" PRIu64 " reused\n",
	       strings_used() - base, walk("twoproc"), seg_of()->tree->blobs_freed,
	       seg_of()->tree->blobs_reused);
	cleanup();
}

/* ---- crash ------------------------------------------------------------------- */

static int pause_at, pause_fd;

static void stop_here(int step)
{
	if (step != pause_at)
		return;
	CHECK(write(pause_fd, "x", 1) == 1);
	pause();
}

/* A child relabelling in a loop, killed at step `at` of the lists'
 * updates (0: at a random time); then this process relabels, and the walk
 * finds no blob shared. */
static void kill_one(int at, int round)
{
	int fds[2];
	pid_t pid;
	char c;

	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		pause_at = at;
		pause_fd = fds[1];
		pcpu__test_blob_pause = stop_here;
		if (!at)
			CHECK(write(fds[1], "x", 1) == 1);
		relabel_loop(10 + round, 1000000, (unsigned)round);
		_exit(1);
	}
	close(fds[1]);
	CHECK(read(fds[0], &c, 1) == 1);
	close(fds[0]);
	if (!at)
		usleep((useconds_t)(rand() % 3000));
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, NULL, 0) == pid);
	/* The next taker: this process's relabellings (it repairs first). */
	relabel_loop(500 + round, 200, (unsigned)round);
	walk("crash");
}

static void crash(void)
{
	uint64_t repairs;
	int at, i;

	publish();
	alarm(120); /* a lock left held fails the test instead of hanging it */
	repairs = seg_of()->tree->repairs;
	for (at = 1; at <= 4; at++)
		kill_one(at, at);
	CHECK(seg_of()->tree->repairs == repairs + 4);
	srand(1);
	for (i = 0; i < 40; i++)
		kill_one(0, 10 + i);
	printf("crash: relabellings killed at each step of the free lists' updates and 40 times at "
	       "random: %" PRIu64 " repairs, no blob shared, %" PRIu64 " bytes in no blob\n",
	       seg_of()->tree->repairs - repairs, walk("crash"));
	alarm(0);
	cleanup();
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "bounded"))
		bounded();
	else if (argc >= 2 && !strcmp(argv[1], "concurrent"))
		concurrent();
	else if (argc >= 2 && !strcmp(argv[1], "twoproc"))
		twoproc();
	else if (argc >= 2 && !strcmp(argv[1], "crash"))
		crash();
	else {
		fprintf(stderr, "usage: test_tree_relabel_reuse bounded | concurrent | twoproc | crash\n");
		return 2;
	}
	return 0;
}
