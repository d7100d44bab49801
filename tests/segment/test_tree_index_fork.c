/*
 * A fork() child of a shared registry's process starts from its parent's
 * index of the tree's directory (tree_index.c, pcpu__tree_index_prefork()),
 * not from entry 0: a pre-fork server's master registers nothing after
 * it forks its first workers, so before this every later child indexed,
 * at its first registration, every entry the workers had written since --
 * 2,000 PostgreSQL statements (74,000 series) cost each new connection
 * 27 ms of CPU (bench/postgresql.md, "New connections").
 *
 *   inherit     worker A registers 5,000 series and exits; the master
 *               (which never looked) forks B: B adopts one of A's series
 *               (A's value, no second entry) and makes a new one, looking
 *               at no more than a few entries of the directory itself
 *   relabel     worker A relabels one of its series; the master forks B:
 *               B's index was made anew in the parent (B rebuilds nothing)
 *               and finds the series under its new labels only
 *   concurrent  a worker registers 3,000 series, relabelling every tenth,
 *               while the master forks 150 children, each adding 1 to a
 *               series the worker had finished before the fork (under the
 *               labels it had then): the index the parent brought up to
 *               date without the tree's lock, racing the worker, never
 *               made a child miss a series (a second series of a label
 *               value) or add to another; every value exact
 *
 * Run with PCPU_INDEX=cpu (ctest does).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
static pcpu_family_t *fam; /* "requests", one label "id" */

static struct pcpu_segment *seg_of(void)
{
	return (struct pcpu_segment *)seg;
}

static pcpu_counter_t counter(const char *id)
{
	return tree_series(fam, id);
}

/* How many series of "requests" the outside reader shows with label value
 * id, and the sum of their values in *value. */
static int series_of(const struct pcpu_snapshot *s, const char *id, uint64_t *value)
{
	int n = 0;

	*value = 0;
	for (size_t f = 0; f < s->nfamilies; f++) {
		const struct pcpu_snapshot_family *fm = &s->families[f];

		if (strcmp(fm->name, "requests") != 0)
			continue;
		for (size_t i = 0; i < fm->nseries; i++)
			if (fm->nlabels >= 1 && !strcmp(fm->series[i].label_values[0], id)) {
				*value += fm->series[i].value.counter;
				n++;
			}
	}
	return n;
}

/* The reader shows exactly one series id, of value v. */
static void shows_once(const struct pcpu_snapshot *s, const char *id, uint64_t v)
{
	uint64_t got;
	int n = series_of(s, id, &got);

	if (n != 1 || got != v)
		fprintf(stderr, "id=%s: %d series, value %" PRIu64 " (want 1 series, %" PRIu64 ")\n", id,
			n, got, v);
	CHECK(n == 1 && got == v);
}

/* Worker A: n series a0..a(n-1), each added i + 1. */
static void worker_registers(int n)
{
	char id[32];

	for (int i = 0; i < n; i++) {
		pcpu_counter_t c;

		snprintf(id, sizeof id, "a%d", i);
		c = counter(id);
		CHECK(c);
		pcpu_counter_add(c, (uint64_t)i + 1);
	}
}

static void run_child(void (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	wait_ok(pid);
}

static void a_registers(void *arg)
{
	worker_registers(*(int *)arg);
}

static void b_inherits(void *arg)
{
	uint64_t scanned = seg_of()->tree_index_scanned;
	pcpu_counter_t c;

	(void)arg;
	/* One of A's: adopted, not made anew. */
	c = counter("a4321");
	CHECK(c);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 4322);
	pcpu_counter_add(c, 1000);
	c = counter("b-new");
	CHECK(c);
	pcpu_counter_add(c, 7);
	/* The parent indexed A's 5,000 entries before fork(): here at most
	 * the child's own new entry. */
	if (seg_of()->tree_index_scanned - scanned > 4)
		fprintf(stderr, "the child looked at %" PRIu64 " directory entries itself\n",
			seg_of()->tree_index_scanned - scanned);
	CHECK(seg_of()->tree_index_scanned - scanned <= 4);
}

static void test_inherit(void)
{
	int n = 5000;
	struct pcpu_reader_snapshot *r;

	run_child(a_registers, &n);
	run_child(b_inherits, NULL);
	r = read_tree_segment(dir);
	shows_once(&r->snapshot, "a4321", 4322 + 1000);
	shows_once(&r->snapshot, "a0", 1);
	shows_once(&r->snapshot, "b-new", 7);
	pcpu_reader_snapshot_free(r);
}

static void a_relabels(void *arg)
{
	const char *o[1] = {"a17"}, *nw[1] = {"renamed"};

	(void)arg;
	CHECK(pcpu_family_relabel(fam, o, nw) == 0);
	pcpu_counter_add(counter("renamed"), 5);
}

static void b_after_relabel(void *arg)
{
	uint64_t rebuilds = seg_of()->tree_index_rebuilds;
	pcpu_counter_t c;

	(void)arg;
	c = counter("renamed");
	CHECK(c);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 5); /* relabelled from 0, then 5 */
	pcpu_counter_add(c, 1);
	/* The parent made the index anew for the relabelling before fork():
	 * not again here. */
	CHECK_EQ_U64(seg_of()->tree_index_rebuilds, rebuilds);
}

static void test_relabel(void)
{
	int n = 100;
	struct pcpu_reader_snapshot *r;
	uint64_t v;

	run_child(a_registers, &n);
	run_child(a_relabels, NULL);
	run_child(b_after_relabel, NULL);
	r = read_tree_segment(dir);
	shows_once(&r->snapshot, "renamed", 6);
	CHECK(series_of(&r->snapshot, "a17", &v) == 0);
	pcpu_reader_snapshot_free(r);
}

#define CONC_SERIES 3000
#define CONC_FORKS 150

/* Shared: the worker's progress (series below done[0] are registered, and
 * relabelled every tenth, for good), and the master's forks so far
 * (done[1]): the worker keeps at most 20 series ahead of them, so that
 * its writes interleave with the forks however the two are scheduled. */
static volatile int *done;

static void conc_name(int i, char *id, size_t n)
{
	snprintf(id, n, i % 10 == 0 ? "r%d" : "w%d", i);
}

static void conc_worker(void *arg)
{
	char id[32], w[32];

	(void)arg;
	for (int i = 0; i < CONC_SERIES; i++) {
		while (i > 20 * (__atomic_load_n(&done[1], __ATOMIC_ACQUIRE) + 1))
			usleep(50);
		snprintf(w, sizeof w, "w%d", i);
		pcpu_counter_add(counter(w), 1);
		if (i % 10 == 0) {
			const char *o[1] = {w}, *nw[1] = {id};

			conc_name(i, id, sizeof id);
			CHECK(pcpu_family_relabel(fam, o, nw) == 0);
			pcpu_counter_add(counter(id), 1); /* from 0 again */
		}
		__atomic_store_n(&done[0], i + 1, __ATOMIC_RELEASE);
	}
}

static int pick;

static void conc_child(void *arg)
{
	char id[32];

	(void)arg;
	conc_name(pick, id, sizeof id);
	pcpu_counter_add(counter(id), 1);
}

static void test_concurrent(void)
{
	static uint32_t hits[CONC_SERIES];
	struct pcpu_reader_snapshot *r;
	pid_t w;
	int k = 0;
	uint64_t seed = 88172645463325252ull;

	done = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(done != MAP_FAILED);
	done[0] = done[1] = 0;
	w = fork();
	CHECK(w >= 0);
	if (w == 0) {
		conc_worker(NULL);
		_exit(0);
	}
	while (k < CONC_FORKS) {
		int d = __atomic_load_n(&done[0], __ATOMIC_ACQUIRE);

		if (d == 0) {
			usleep(100);
			continue;
		}
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		/* Mostly the newest ones: the entries the parent's index
		 * catches up with as the worker writes them. */
		pick = (int)(seed % 4 == 0 ? seed % (uint64_t)d : (uint64_t)d - 1 - seed % 8 % (uint64_t)d);
		run_child(conc_child, NULL);
		hits[pick]++;
		k++;
		__atomic_store_n(&done[1], k, __ATOMIC_RELEASE);
	}
	wait_ok(w);
	r = read_tree_segment(dir);
	for (int i = 0; i < CONC_SERIES; i++) {
		char id[32];

		conc_name(i, id, sizeof id);
		shows_once(&r->snapshot, id, 1 + hits[i]);
	}
	pcpu_reader_snapshot_free(r);
	munmap((void *)done, 4096);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	strcpy(dir, "/tmp/pcpu-indexfork.XXXXXX");
	seg = publish_requests_tree(dir, 0, &reg, &fam);
	if (!strcmp(mode, "inherit"))
		test_inherit();
	else if (!strcmp(mode, "relabel"))
		test_relabel();
	else if (!strcmp(mode, "concurrent"))
		test_concurrent();
	else {
		fprintf(stderr, "usage: %s inherit|relabel|concurrent\n", argv[0]);
		remove_tree(seg, reg, dir);
		return 2;
	}
	remove_tree(seg, reg, dir);
	printf("tree_index_fork %s: ok\n", mode);
	return 0;
}
