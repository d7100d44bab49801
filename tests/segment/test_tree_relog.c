/*
 * A tree's relabel log (src/segment/tree_relog.c): a process follows
 * another's relabellings entry by entry -- its index of the directory
 * takes the relabelled entries' new labels, its registry drops only the
 * series on them -- instead of indexing the directory anew and walking all
 * of its series at each one.
 *
 *   follow    worker B holds 2,000 series; worker A relabels 100 series of
 *             its own, then one of B's. After the first, B's next
 *             registration rebuilds no index and walks no series (none of
 *             its own was relabelled), and finds the relabelled series
 *             under their new labels only; after the second, it drops
 *             that one series (a lookup of its old labels makes a new one,
 *             from 0; its new labels find A's adds), still without a
 *             rebuild, and its other series keep their values; A then
 *             relabels that entry again: B asks about the series it holds
 *             there now, not the one it dropped (freed)
 *   overflow  A relabels more series than the log's ring holds (8,192):
 *             B indexes anew and walks all its series once, as without
 *             the log, and finds everything where it is
 *
 * Run with PCPU_INDEX=cpu (ctest does).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static pcpu_counter_t counterf(const char *fmt, int i)
{
	char id[32];

	snprintf(id, sizeof id, fmt, i);
	return counter(id);
}

static void relabel(const char *from, const char *to)
{
	const char *o[1] = {from}, *n[1] = {to};

	if (pcpu_family_relabel(fam, o, n) != 0) {
		fprintf(stderr, "relabel %s -> %s: %s\n", from, to, pcpu_stats_error());
		CHECK(0);
	}
}

static void relabelf(const char *from_fmt, const char *to_fmt, int i)
{
	char a[32], b[32];
	const char *o[1] = {a}, *n[1] = {b};

	snprintf(a, sizeof a, from_fmt, i);
	snprintf(b, sizeof b, to_fmt, i);
	if (pcpu_family_relabel(fam, o, n) != 0) {
		fprintf(stderr, "relabel %s -> %s: %s\n", a, b, pcpu_stats_error());
		CHECK(0);
	}
}

static void wr(int fd)
{
	CHECK(write(fd, "x", 1) == 1);
}

static void rd(int fd)
{
	char c;

	CHECK(read(fd, &c, 1) == 1);
}

struct marks {
	uint64_t rebuilds, walks, follows, skips, lists;
};

static struct marks marks(void)
{
	struct marks m = {seg_of()->tree_index_rebuilds, seg_of()->tree_reg_walks,
			  seg_of()->tree_index_follows, seg_of()->tree_reg_skips,
			  seg_of()->tree_reg_lists};

	return m;
}

static void test(int nrelabel, int overflow)
{
	int to_a[2], to_b[2];
	pid_t a, b;

	CHECK(pipe(to_a) == 0 && pipe(to_b) == 0);
	b = fork();
	CHECK(b >= 0);
	if (b == 0) {
		struct marks m0, m1;

		alarm(120);
		for (int i = 0; i < 2000; i++)
			pcpu_counter_add(counterf("a%d", i), (uint64_t)i + 1);
		wr(to_a[1]); /* B holds its series */
		rd(to_b[0]); /* A relabelled its own */
		m0 = marks();
		pcpu_counter_add(counter("b-new"), 1); /* a registration: B looks */
		m1 = marks();
		if (overflow) {
			/* More than the ring: indexed anew, every series asked. */
			CHECK_EQ_U64(m1.rebuilds, m0.rebuilds + 1);
			CHECK_EQ_U64(m1.walks, m0.walks + 1);
			CHECK_EQ_U64(m1.lists, m0.lists);
		} else {
			CHECK_EQ_U64(m1.rebuilds, m0.rebuilds);
			CHECK_EQ_U64(m1.walks, m0.walks);
			CHECK(m1.follows > m0.follows);
			CHECK(m1.skips > m0.skips);
		}
		/* The relabelled series under their new labels (A's 5 adds
		 * after the relabelling), their old labels new from 0. */
		CHECK_EQ_U64(pcpu_counter_fetch(counterf("y%d", 5)), 5);
		CHECK_EQ_U64(pcpu_counter_fetch(counterf("x%d", 5)), 0);
		wr(to_a[1]);
		rd(to_b[0]); /* A relabelled a7, one of B's */
		m0 = marks();
		pcpu_counter_add(counter("b-new2"), 1);
		m1 = marks();
		CHECK_EQ_U64(m1.rebuilds, m0.rebuilds);
		CHECK_EQ_U64(m1.walks, m0.walks + 1);
		CHECK_EQ_U64(m1.lists, m0.lists + 1); /* the series on a7's entry, not all 2,000 */
		CHECK_EQ_U64(pcpu_counter_fetch(counter("a7")), 0);  /* dropped: a new one */
		CHECK_EQ_U64(pcpu_counter_fetch(counter("z7")), 9);  /* A's, after the relabel */
		for (int i = 0; i < 2000; i++)
			if (i != 7)
				CHECK_EQ_U64(pcpu_counter_fetch(counterf("a%d", i)), (uint64_t)i + 1);
		wr(to_a[1]);
		rd(to_b[0]); /* A relabelled z7 again, which B holds now */
		m0 = marks();
		pcpu_counter_add(counter("b-new3"), 1);
		m1 = marks();
		/* Only the series B holds on the entry now (not the one it
		 * dropped before, freed: ASan's builds would say so). */
		CHECK_EQ_U64(m1.lists, m0.lists + 1);
		CHECK_EQ_U64(pcpu_counter_fetch(counter("z7")), 0);
		CHECK_EQ_U64(pcpu_counter_fetch(counter("w7")), 0);
		_exit(0);
	}
	a = fork();
	CHECK(a >= 0);
	if (a == 0) {
		alarm(120);
		for (int i = 0; i < nrelabel; i++)
			pcpu_counter_add(counterf("x%d", i), 100);
		rd(to_a[0]);
		for (int i = 0; i < nrelabel; i++) {
			relabelf("x%d", "y%d", i);
			pcpu_counter_add(counterf("y%d", i), 5);
		}
		wr(to_b[1]);
		rd(to_a[0]);
		relabel("a7", "z7");
		pcpu_counter_add(counter("z7"), 9);
		wr(to_b[1]);
		rd(to_a[0]);
		relabel("z7", "w7");
		wr(to_b[1]);
		_exit(0);
	}
	wait_ok(b);
	wait_ok(a);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	strcpy(dir, "/tmp/pcpu-relog.XXXXXX");
	seg = publish_requests_tree(dir, 0, &reg, &fam);
	if (!strcmp(mode, "follow"))
		test(100, 0);
	else if (!strcmp(mode, "overflow"))
		test(9000, 1);
	else {
		fprintf(stderr, "usage: %s follow|overflow\n", argv[0]);
		remove_tree(seg, reg, dir);
		return 2;
	}
	remove_tree(seg, reg, dir);
	printf("tree_relog %s: ok\n", mode);
	return 0;
}
