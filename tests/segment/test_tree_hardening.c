/*
 * A shared registry (PCPU_SEGMENT_SHARED_TREE) against what a pre-fork tree
 * meets in real use (issue 37): each mode below is one defect an outside
 * tester found, played deterministically.
 *
 *   fulldisk    a worker forked early whose registration is refused on a
 *               full file system must not give back the pages holding the
 *               master's live counters: every value stays exact, and every
 *               add still lands (a page given back faults: SIGBUS)
 *   fulldir     a directory with no room for one more entry: a registration
 *               that the tree's directory cannot record is refused in every
 *               process (ENOSPC and a message), never made twice with two
 *               storages for one name and labels
 *   killwindow  a writer killed after writing an entry (its sequence odd)
 *               and before publishing the count of entries: the next entry
 *               written there is whole, and two processes registering the
 *               same labels after it share one series
 *   stopped     a worker stopped (SIGSTOP) holding the tree's lock, or in
 *               mid-update of a consistent group: the master's collection,
 *               resets, gauge sets, snapshots and group reads return, and
 *               the other workers' updates go on
 *   collectkill a collection killed in mid-copy of a GROUP entry (left
 *               odd): another process registering that group finds it,
 *               never makes a second one
 *   corrupt [N [FIRST]]
 *               a buggy worker scribbles on the shared header and entries:
 *               the master's collections, snapshots and registrations may
 *               fail, never crash; trees FIRST .. N-1 of one sequence of
 *               random flips (default 0 .. 299: the fast tier runs 0 .. 29,
 *               the stress tier 30 .. 299)
 *   liveness    the master killed, a worker alive: readers say the segment
 *               is live and pcpustat --prune keeps it; the last member
 *               gone, it is pruned. A foreign locker -- a process that can
 *               read the file and takes read locks on byte 0 and on the
 *               member bytes, OFD locks or POSIX ones -- cannot take the
 *               member bytes while the tree lives (a member's write
 *               lock), and once it holds them all (the last member gone)
 *               it does not keep the tree "live": the readers say gone,
 *               --prune removes the file
 *
 * fulldisk needs a small tmpfs: a private mount namespace (as root), else a
 * user namespace; with neither the test fails and says why. Run with
 * PCPU_INDEX=cpu (ctest does).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "tree_child.h"
#include "small_fs.h"
#include "segment/writer.h"

static char dir[256];
static pcpu_registry_t *reg;
static pcpu_segment_t *seg;
static pcpu_family_t *fam;           /* a counter family, one label "id" */
static pcpu_group_family_t *gfam;    /* packets, bytes: (1, v) per update */

static struct pcpu_segment *seg_of(void)
{
	return (struct pcpu_segment *)seg;
}

/* A tree in `dir` (made if empty), with fam and gfam; max_entries 0: the
 * default. */
static void publish(size_t max_entries)
{
	struct pcpu_segment_options o;
	struct pcpu_family_desc d, m[2];
	static const char *const ln[1] = {"id"};

	if (!dir[0]) {
		strcpy(dir, "/tmp/pcpu-tree-hard.XXXXXX");
		CHECK(mkdtemp(dir) != NULL);
	}
	reg = pcpu_registry_create();
	CHECK(reg);
	memset(&d, 0, sizeof d);
	d.name = "requests";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = ln;
	fam = pcpu_registry_family(reg, &d);
	CHECK(fam);
	memset(m, 0, sizeof m);
	m[0].name = "flow_packets";
	m[1].name = "flow_bytes";
	for (int k = 0; k < 2; k++) {
		m[k].type = PCPU_METRIC_COUNTER;
		m[k].nlabels = 1;
		m[k].label_names = ln;
	}
	gfam = pcpu_registry_group(reg, m, 2);
	CHECK(gfam);
	memset(&o, 0, sizeof o);
	o.dir = dir;
	o.flags = PCPU_SEGMENT_SHARED_TREE;
	o.max_entries = max_entries;
	seg = pcpu_segment_publish(reg, "tree", &o);
	if (!seg)
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
	CHECK(seg);
}

static pcpu_counter_t counter(const char *id)
{
	const char *v[1] = {id};

	return pcpu_family_counter(fam, v);
}

static void on_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
}

/* How many series of `family` the segment shows with label value `id`,
 * and the value of the last one. */
static int in_segment(const struct pcpu_reader_snapshot *s, const char *family, const char *id,
		      uint64_t *value)
{
	int n = 0;

	for (size_t f = 0; f < s->snapshot.nfamilies; f++) {
		const struct pcpu_snapshot_family *fm = &s->snapshot.families[f];

		if (strcmp(fm->name, family) != 0)
			continue;
		for (size_t i = 0; i < fm->nseries; i++)
			if (fm->nlabels >= 1 && !strcmp(fm->series[i].label_values[0], id)) {
				*value = fm->series[i].value.counter;
				n++;
			}
	}
	return n;
}

/* ---- fulldisk -------------------------------------------------------------- */

#define NMASTER 4096

/* In a process of its own, on a small tmpfs. */
static int fulldisk_run(void)
{
	static pcpu_counter_t cs[NMASTER];
	int go[2], st;
	unsigned n = 0;
	pid_t late;

	publish(0);
	/* A worker forked now: it knows the file as it is now. */
	CHECK(pipe(go) == 0);
	late = fork();
	CHECK(late >= 0);
	if (late == 0) {
		char c, id[32];
		unsigned k;

		close(go[1]);
		CHECK(read(go[0], &c, 1) == 1);
		/* The file system is full: registrations fail once the pages
		 * reserved by others are used up. */
		for (k = 0; k < 100000; k++) {
			snprintf(id, sizeof id, "late%u", k);
			errno = 0;
			if (!counter(id))
				break;
		}
		if (k == 100000 || errno != ENOSPC) {
			fprintf(stderr, "late worker: %u registrations, errno %d\n", k, errno);
			_exit(1);
		}
		if (!pcpu_stats_error()[0]) {
			fprintf(stderr, "late worker: ENOSPC without a message\n");
			_exit(1);
		}
		printf("fulldisk: the late worker's registration %u refused: %s\n", k, pcpu_stats_error());
		fflush(stdout);
		_exit(0);
	}
	close(go[0]);
	/* The master's counters, up to a page boundary of the values: the
	 * next object needs a page no process reserved yet. Added on CPU 0:
	 * slot 0's region, the first a refused reservation gives back. */
	on_cpu0();
	for (;;) {
		char id[32];

		snprintf(id, sizeof id, "m%u", n);
		CHECK(n < NMASTER);
		cs[n] = counter(id);
		CHECK(cs[n]);
		pcpu_counter_add(cs[n], (int64_t)n + 1);
		n++;
		if (n >= 1000 && ((seg_of()->tree->zone.frontier << 3) & 4095) == 0)
			break;
	}
	fill(dir);
	CHECK(write(go[1], "g", 1) == 1);
	CHECK(waitpid(late, &st, 0) == late);
	if (WIFSIGNALED(st))
		fprintf(stderr, "late worker killed by signal %d\n", WTERMSIG(st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	{
		unsigned wrong = 0, first = n;

		for (unsigned i = 0; i < n; i++)
			if (pcpu_counter_fetch(cs[i]) != (uint64_t)i + 1) {
				wrong++;
				if (first == n)
					first = i;
			}
		if (wrong)
			fprintf(stderr, "fulldisk: %u of the master's %u counters wrong, the first m%u\n",
				wrong, n, first);
		CHECK(wrong == 0);
	}
	/* Every add still lands: a page given back would fault here. */
	for (unsigned i = 0; i < n; i++) {
		pcpu_counter_add(cs[i], 1);
		pcpu_counter_add_atomic(cs[i], 1);
	}
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ_U64(pcpu_counter_fetch(cs[i]), (uint64_t)i + 3);
	{
		struct pcpu_reader_snapshot *s = read_tree_segment(dir);
		uint64_t v;
		char id[32];

		CHECK(s->nospace);
		for (unsigned i = 0; i < n; i++) {
			snprintf(id, sizeof id, "m%u", i);
			CHECK(in_segment(s, "requests", id, &v) == 1);
			CHECK_EQ_U64(v, (uint64_t)i + 3);
		}
		pcpu_reader_snapshot_free(s);
	}
	CHECK(pcpu_segment_nospace(seg) >= 1);
	printf("fulldisk: %u counters of the master exact after the refusal, and updated again\n", n);
	return 0;
}

static void fulldisk(void)
{
	static const char *const hows[] = {"mount", "userns"};
	char why[256] = "";
	int st;

	strcpy(dir, "/tmp/pcpu-tree-full.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	for (int h = 0; h < 2; h++) {
		int pfd[2];
		pid_t c;
		ssize_t got;

		CHECK(pipe(pfd) == 0);
		c = fork();
		CHECK(c >= 0);
		if (c == 0) {
			close(pfd[0]);
			if (small_tmpfs(hows[h], dir, (size_t)8 << 20, why, sizeof why) != 0) {
				if (write(pfd[1], why, strlen(why)) < 0)
					_exit(3);
				_exit(2);
			}
			close(pfd[1]);
			st = fulldisk_run();
			fflush(stdout);
			_exit(st);
		}
		close(pfd[1]);
		got = read(pfd[0], why, sizeof why - 1);
		why[got > 0 ? got : 0] = '\0';
		close(pfd[0]);
		CHECK(waitpid(c, &st, 0) == c);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 2) {
			printf("fulldisk: no small tmpfs by %s: %s\n", hows[h], why);
			continue;
		}
		if (WIFSIGNALED(st))
			fprintf(stderr, "fulldisk: the master was killed by signal %d\n", WTERMSIG(st));
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		return;
	}
	fprintf(stderr, "fulldisk: no way to mount a small tmpfs here (see above)\n");
	exit(1);
}

/* ---- fulldir --------------------------------------------------------------- */

/* Registers "x<k>" for k < 6 in a child; reports per label 1 (a handle)
 * or 0 (refused with ENOSPC and a message), and adds 1 to each it got. */
static void fulldir_child(int out)
{
	char id[16], got[6];

	for (int k = 0; k < 6; k++) {
		pcpu_counter_t c;

		snprintf(id, sizeof id, "x%d", k);
		errno = 0;
		c = counter(id);
		if (c) {
			pcpu_counter_inc(c);
			got[k] = 1;
		} else {
			if (errno != ENOSPC || !pcpu_stats_error()[0]) {
				fprintf(stderr, "x%d: errno %d, message \"%s\"\n", k, errno, pcpu_stats_error());
				_exit(1);
			}
			got[k] = 0;
		}
	}
	{
		/* A family the full directory cannot take either. */
		struct pcpu_family_desc d;

		memset(&d, 0, sizeof d);
		d.name = "late_family";
		d.type = PCPU_METRIC_GAUGE;
		errno = 0;
		if (pcpu_registry_family(reg, &d) != NULL || errno != ENOSPC) {
			fprintf(stderr, "a family on a full directory: not refused (errno %d)\n", errno);
			_exit(1);
		}
	}
	CHECK(write(out, got, sizeof got) == sizeof got);
	_exit(0);
}

static void fulldir(void)
{
	char got[2][6];
	int p[2];
	unsigned made = 0;

	/* Room for the families, the master's series and 3 more. */
	publish(32);
	while (seg_of()->hdr->entries_used < 29) {
		char id[16];

		snprintf(id, sizeof id, "s%u", made++);
		CHECK(counter(id));
	}
	CHECK(pipe(p) == 0);
	for (int w = 0; w < 2; w++) {
		pid_t c = fork();

		CHECK(c >= 0);
		if (c == 0)
			fulldir_child(p[1]);
		wait_ok(c);
		CHECK(read(p[0], got[w], 6) == 6);
	}
	{
		struct pcpu_reader_snapshot *s = read_tree_segment(dir);
		int refused = 0;

		for (int k = 0; k < 6; k++) {
			char id[16];
			uint64_t v = 0;
			int n;

			snprintf(id, sizeof id, "x%d", k);
			n = in_segment(s, "requests", id, &v);
			/* Made by both, one series counting both adds; or
			 * refused by both. */
			if (got[0][k] != got[1][k] || n != got[0][k] || (n && v != 2)) {
				fprintf(stderr, "x%d: worker A %s, worker B %s, %d series in the segment "
						"(value %" PRIu64 ")\n",
					k, got[0][k] ? "made it" : "refused", got[1][k] ? "made it" : "refused",
					n, v);
				CHECK(0);
			}
			refused += !got[0][k];
		}
		CHECK(refused >= 1);
		pcpu_reader_snapshot_free(s);
		printf("fulldir: %d of 6 registrations refused in both workers (ENOSPC), the others one "
		       "series each\n", refused);
	}
}

/* ---- killwindow ------------------------------------------------------------ */

static void killwindow(void)
{
	struct pcpu_segment *s;
	int fds[2], st;
	pid_t pid;
	char c;

	publish(0);
	s = seg_of();
	CHECK(counter("before"));
	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* A writer that wrote an entry (its sequence odd: in mid-write)
		 * past the published count, and is killed before publishing. */
		CHECK(pcpu__tree_enter(s) == 0);
		pcpu__directory_begin(s);
		__atomic_store_n(&s->entries[s->entries_used].seq, 1, __ATOMIC_RELEASE);
		CHECK(write(fds[1], "x", 1) == 1);
		pause();
		_exit(1);
	}
	CHECK(read(fds[0], &c, 1) == 1);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	alarm(60); /* a lock left held fails the test instead of hanging it */
	for (int w = 0; w < 2; w++) {
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			pcpu_counter_t x = counter("after-death");

			CHECK(x);
			pcpu_counter_inc(x);
			_exit(0);
		}
		wait_ok(pid);
	}
	alarm(0);
	{
		struct pcpu_reader_snapshot *r = read_tree_segment(dir);
		uint64_t v = 0;
		int n = in_segment(r, "requests", "after-death", &v);

		if (n != 1 || v != 2)
			fprintf(stderr, "killwindow: %d series \"after-death\" in the segment, value %" PRIu64
					" (two workers added 1 each)\n", n, v);
		CHECK(n == 1 && v == 2);
		CHECK((s->hdr->generation & 1) == 0);
		pcpu_reader_snapshot_free(r);
	}
	printf("killwindow: an entry left odd past the published count is repaired; two workers "
	       "share the series made after it\n");
}

/* ---- stopped --------------------------------------------------------------- */

extern void (*pcpu__test_group_tree_pause)(void *lane);

static void stop_self(void *lane)
{
	(void)lane;
	raise(SIGSTOP);
}

static void wait_stopped(pid_t pid)
{
	int st;

	CHECK(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
}

/* A worker on CPU 0 stopped in mid-update of group gr (its lane odd, the
 * first member written): its pid. */
static pid_t stopped_in_group_update(pcpu_group_t *gr)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		on_cpu0();
		pcpu__test_group_tree_pause = stop_self;
		pcpu_group_add2(gr, 0, 1, 1000000);
		_exit(0);
	}
	wait_stopped(pid);
	return pid;
}

/* What the master and the other workers do while a worker is stopped;
 * every call must return (alarm() bounds the wait). */
static void reads_and_updates(pcpu_counter_t c, pcpu_gauge_t g, pcpu_group_t *gr, int64_t gpackets,
			      int64_t gbytes)
{
	struct pcpu_snapshot *snap;
	int64_t out[2];
	pid_t pid;

	CHECK(pcpu_registry_collect(reg) == 0);
	CHECK((snap = pcpu_registry_snapshot(reg)) != NULL);
	pcpu_snapshot_free(snap);
	pcpu_counter_add(c, 5);
	CHECK(pcpu_counter_fetch_and_zero(c) >= 5);
	CHECK(pcpu_gauge_set(g, 42) == 0);
	CHECK(pcpu_group_read(gr, 0, out) == 0);
	if (out[0] != gpackets || out[1] != gbytes)
		fprintf(stderr, "group read (%" PRId64 ", %" PRId64 "), want (%" PRId64 ", %" PRId64 ")\n",
			out[0], out[1], gpackets, gbytes);
	CHECK(out[0] == gpackets && out[1] == gbytes);
	/* Another worker: updates, resets, a group update on the stopped
	 * one's CPU, a series it already has. */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		on_cpu0();
		for (int k = 0; k < 1000; k++) {
			pcpu_counter_inc(c);
			pcpu_group_add2(gr, 0, 1, 10);
		}
		CHECK(pcpu_counter_fetch_and_zero(c) >= 1000);
		CHECK(pcpu_gauge_set(g, 7) == 0);
		_exit(0);
	}
	wait_ok(pid);
}

static void stopped(void)
{
	pcpu_counter_t c;
	pcpu_gauge_t g;
	pcpu_group_t *gr;
	int64_t out[2];
	pid_t pid;
	struct pcpu_family_desc d;

	publish(0);
	c = counter("c");
	memset(&d, 0, sizeof d);
	d.name = "level";
	d.type = PCPU_METRIC_GAUGE;
	g = pcpu_family_gauge(pcpu_registry_family(reg, &d), NULL);
	gr = pcpu_group_family_series(gfam, (const char *[]){"flow"});
	CHECK(c && g && gr);
	pcpu_group_add2(gr, 0, 1, 100);
	alarm(120); /* a wait on the stopped worker fails the test (SIGALRM) */

	/* 1. Stopped holding the tree's lock, in a registration. */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK(pcpu__tree_enter(seg_of()) == 0);
		raise(SIGSTOP);
		pcpu__tree_leave(seg_of());
		_exit(0);
	}
	wait_stopped(pid);
	reads_and_updates(c, g, gr, 1, 100);
	CHECK(kill(pid, SIGCONT) == 0);
	wait_ok(pid);
	printf("stopped: a worker stopped holding the tree's lock: the master's collection, "
	       "snapshot, resets, gauge sets and group reads returned; another worker updated\n");

	/* 2. Stopped in mid-update of the group, on CPU 0: its lane odd, the
	 * first member written. */
	CHECK(pcpu_group_read(gr, 0, out) == 0);
	pid = stopped_in_group_update(gr);
	/* The stopped update is wholly absent from every read meanwhile. */
	reads_and_updates(c, g, gr, out[0], out[1]);
	CHECK(pcpu_group_read(gr, 0, out) == 0);
	CHECK(kill(pid, SIGCONT) == 0);
	wait_ok(pid);
	{
		int64_t now[2];

		CHECK(pcpu_group_read(gr, 0, now) == 0);
		CHECK(now[0] == out[0] + 1 && now[1] == out[1] + 1000000);
	}
	/* 3. Killed there instead: its update never appears, and the lane
	 * serves again. */
	CHECK(pcpu_group_read(gr, 0, out) == 0);
	pid = stopped_in_group_update(gr);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, NULL, 0) == pid);
	reads_and_updates(c, g, gr, out[0], out[1]);
	{
		int64_t now[2];

		CHECK(pcpu_group_read(gr, 0, now) == 0);
		CHECK(now[0] == out[0] + 1000 && now[1] == out[1] + 10000);
	}
	alarm(0);
	printf("stopped: a group writer stopped in mid-update: reads show the group without its "
	       "update and never wait; killed there, its update never appears\n");
}

/* ---- collectkill ----------------------------------------------------------- */

/* A collection rewrites the GROUP entries' copies under the collect lock,
 * not the tree's: a registration may look at a GROUP entry in mid-copy, or
 * at one a collector killed in mid-copy left odd. It must still find the
 * group (the entry's place and size never change), or a second process
 * makes a second group for the same labels, and the segment shows one of
 * them (the TSan suite saw 5032 of 83635 updates missing once). */
/* Registers the group "flow" in a process of its own (forked now, so it
 * has none: it adopts what the tree has, or makes it) and adds (1, v). */
static void group_in_child(int64_t v)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		pcpu_group_t *g = pcpu_group_family_series(gfam, (const char *[]){"flow"});

		CHECK(g);
		pcpu_group_add2(g, 0, 1, v);
		_exit(0);
	}
	wait_ok(pid);
}

static void collectkill(void)
{
	struct pcpu_segment *s;
	pcpu_group_t *gr;
	int64_t out[2];
	uint64_t v = 0, i;
	int found = 0;

	publish(0);
	s = seg_of();
	group_in_child(100); /* a worker makes the group */
	CHECK(pcpu_registry_collect(reg) == 0);
	/* A collector killed while it copied the group: its entry odd. */
	for (i = 0; i < s->hdr->entries_used; i++)
		if (s->entries[i].kind == PCPU__SEG_GROUP) {
			__atomic_add_fetch(&s->entries[i].seq, 1, __ATOMIC_RELEASE);
			found++;
		}
	CHECK(found == 1);
	/* Another worker, then the master, register the same group. */
	group_in_child(1000);
	gr = pcpu_group_family_series(gfam, (const char *[]){"flow"});
	CHECK(gr);
	CHECK(pcpu_group_read(gr, 0, out) == 0);
	if (out[0] != 2 || out[1] != 1100)
		fprintf(stderr, "collectkill: the master's group reads (%" PRId64 ", %" PRId64
				"), want (2, 1100): a process made a group of its own\n",
			out[0], out[1]);
	CHECK(out[0] == 2 && out[1] == 1100);
	/* And the segment, once collected (the odd copy rewritten). */
	CHECK(pcpu_registry_collect(reg) == 0);
	{
		struct pcpu_reader_snapshot *r = read_tree_segment(dir);

		CHECK(in_segment(r, "flow_bytes", "flow", &v) == 1 && v == 1100);
		CHECK(in_segment(r, "flow_packets", "flow", &v) == 1 && v == 2);
		pcpu_reader_snapshot_free(r);
	}
	printf("collectkill: a GROUP entry left odd by a collector: the other processes still find "
	       "the group, and the next collection rewrites the copy\n");
}

/* ---- corrupt --------------------------------------------------------------- */

/* The master's calls on a tree whose shared memory a worker corrupted:
 * any may fail, none may crash or hang. */
static void master_calls(int round)
{
	struct pcpu_snapshot *snap;
	struct pcpu_reader_snapshot *rs = NULL;
	struct pcpu_reader_options ro;
	pcpu_reader_t *r;
	int64_t out[2];
	char id[32];

	(void)pcpu_registry_collect(reg);
	snap = pcpu_registry_snapshot(reg);
	pcpu_snapshot_free(snap);
	snprintf(id, sizeof id, "new%d", round);
	(void)counter(id);
	(void)counter("s1");
	{
		pcpu_group_t *gr = pcpu_group_family_series(gfam, (const char *[]){id});

		if (gr)
			(void)pcpu_group_read(gr, 0, out);
	}
	memset(&ro, 0, sizeof ro);
	ro.dir = dir;
	r = pcpu_reader_open("tree", &ro);
	if (r) {
		if (pcpu_reader_snapshot(r, 0, &rs) == 0)
			pcpu_reader_snapshot_free(rs);
		pcpu_reader_close(r);
	}
}

static int corrupt_trials = 300, corrupt_first; /* corrupt's optional arguments */

static void corrupt(void)
{
	static const uint64_t bad_used[] = {0, 1, 33, 1u << 20, (1u << 20) + 1, 1ull << 40, UINT64_MAX};
	uint64_t rng = 0x2545f4914f6cdd1dull;
	int st;

	publish(0);
	for (int k = 0; k < 40; k++) {
		char id[16];

		snprintf(id, sizeof id, "s%d", k);
		CHECK(counter(id));
		CHECK(pcpu_group_family_series(gfam, (const char *[]){id}));
	}
	alarm(300 + 2 * (unsigned)corrupt_trials); /* a hang; ctest's TIMEOUT is longer */
	/* 0. A series entry pointing nowhere: a process registering that series
	 * is refused (EIO), never given a second storage for it. */
	{
		struct pcpu_segment *sg = seg_of();
		uint64_t i, good_off = 0;
		int64_t at = -1;
		pid_t pid;

		/* Made by a worker: the master and the next worker have none. */
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(counter("late7") ? 0 : 1);
		wait_ok(pid);
		for (i = 0; i < sg->hdr->entries_used; i++)
			if (sg->entries[i].kind == PCPU__SEG_SERIES &&
			    !strcmp(sg->strings + sg->entries[i].blob_off, "late7")) {
				at = (int64_t)i;
				good_off = sg->entries[i].value_off;
				sg->entries[i].value_off = (uint64_t)1 << 40;
			}
		CHECK(at >= 0);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			errno = 0;
			if (counter("late7") != NULL || errno != EIO) {
				fprintf(stderr, "a series whose entry points nowhere: not refused (errno %d)\n",
					errno);
				_exit(1);
			}
			_exit(0);
		}
		wait_ok(pid);
		sg->entries[at].value_off = good_off;
	}
	printf("corrupt: a series entry pointing nowhere: its registration refused (EIO)\n");
	/* 1. entries_used (offset 116 in the report) raised, then
	 * put back; the master goes on. */
	for (size_t b = 0; b < sizeof bad_used / sizeof bad_used[0]; b++) {
		uint64_t good = __atomic_load_n(&seg_of()->hdr->entries_used, __ATOMIC_ACQUIRE);

		__atomic_store_n(&seg_of()->hdr->entries_used, bad_used[b], __ATOMIC_RELEASE);
		master_calls((int)b);
		__atomic_store_n(&seg_of()->hdr->entries_used,
				 bad_used[b] > good && bad_used[b] < 64 ? bad_used[b] : good,
				 __ATOMIC_RELEASE);
	}
	printf("corrupt: entries_used set to 0 .. 2^64-1 under the master: no crash\n");
	/* 2. Random flips of the header's and the entries' bytes, each in a
	 * tree of its own, in a process of its own (as the master). */
	for (int trial = 0; trial < corrupt_trials; trial++) {
		uint64_t r = check_xorshift(&rng);
		pid_t pid;

		if (trial < corrupt_first)
			continue; /* the same sequence of flips whatever FIRST is */
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			struct pcpu_segment *s;
			size_t span, off;
			unsigned char *p;

			pcpu_segment_unpublish(seg);
			dir[0] = '\0';
			publish(0);
			s = seg_of();
			for (int k = 0; k < 20; k++) {
				char id[16];

				snprintf(id, sizeof id, "s%d", k);
				CHECK(counter(id));
				CHECK(pcpu_group_family_series(gfam, (const char *[]){id}));
			}
			/* Header (its first 2048 bytes: the tree's locks after
			 * them are not the reader's business) or entries. */
			span = (r & 1) ? 2048 : (size_t)s->hdr->entries_used * PCPU__SEG_ENTRY_SIZE;
			off = (size_t)((r >> 8) % span);
			p = (unsigned char *)((r & 1) ? (char *)s->hdr : (char *)s->entries) + off;
			for (int f = 0; f < 1 + (int)((r >> 40) % 4); f++)
				p[f % 8] ^= (unsigned char)(1u << ((r >> (48 + f)) & 7));
			for (int k = 0; k < 4; k++)
				master_calls(k);
			pcpu_registry_destroy(reg);
			rmdir(dir);
			_exit(0);
		}
		CHECK(waitpid(pid, &st, 0) == pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "corrupt: trial %d (flip seed %" PRIx64 ") %s %d\n", trial, r,
				WIFSIGNALED(st) ? "killed by signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st)
											  : WEXITSTATUS(st));
			CHECK(0);
		}
	}
	alarm(0);
	printf("corrupt: trees %d .. %d with random flips in the header or the entries: no crash\n",
	       corrupt_first, corrupt_trials - 1);
}

/* ---- liveness -------------------------------------------------------------- */

static enum pcpu_segment_state segment_state(void)
{
	pcpu_reader_t *r = open_tree_segment(dir);
	enum pcpu_segment_state st;

	st = pcpu_reader_state(r);
	pcpu_reader_close(r);
	return st;
}

static size_t prune(void)
{
	struct pcpu_reader_options ro;
	size_t removed = 0;

	memset(&ro, 0, sizeof ro);
	ro.dir = dir;
	CHECK(pcpu_segment_prune(&ro, &removed) == 0);
	return removed;
}

/* A tree of a master and one worker in a new `dir`: their pids (the
 * worker outlives its master: reparented here, reaped here). */
static void tree_of_two(pid_t *master_out, pid_t *worker_out)
{
	int up[2];
	pid_t master, worker = 0;

	strcpy(dir, "/tmp/pcpu-tree-live.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
	CHECK(pipe(up) == 0);
	master = fork();
	CHECK(master >= 0);
	if (master == 0) {
		pid_t w;

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no master */
		publish(0);
		w = fork();
		CHECK(w >= 0);
		if (w == 0) {
			pcpu_counter_t c = counter("w");

			CHECK(c);
			for (int k = 0; k < 120000; k++) { /* bounded: nothing left behind */
				pcpu_counter_inc(c);
				usleep(1000);
			}
			_exit(0);
		}
		CHECK(write(up[1], &w, sizeof w) == sizeof w);
		for (int k = 0; k < 300; k++) /* until killed; bounded */
			sleep(1);
		_exit(0);
	}
	CHECK(read(up[0], &worker, sizeof worker) == sizeof worker);
	close(up[0]);
	close(up[1]);
	*master_out = master;
	*worker_out = worker;
}

/*
 * A process that can read the tree's file but is none of its members (a
 * monitoring agent, another user in the file's group, a mistake) takes a
 * read lock on byte 0 (granted: the members' there are read locks too) and
 * on the member bytes: `ofd` OFD locks, else POSIX ones. The member bytes
 * it cannot take while the tree lives (a member's write lock); it waits for
 * them (F_[OFD_]SETLKW) and holds every lock from the tree's death on: the
 * readers must say gone all the same, and --prune remove the file.
 */
static void liveness_foreign(int ofd)
{
	const char *kind = ofd ? "an OFD read lock" : "a POSIX read lock";
	char path[512];
	int rep[2];
	pid_t master, worker, locker;
	int early = 0, bad = 0;
	char got = 0;

	tree_of_two(&master, &worker);
	snprintf(path, sizeof path, "%s/pcpu.%d.tree", dir, (int)master);
	CHECK(pipe(rep) == 0);
	locker = fork();
	CHECK(locker >= 0);
	if (locker == 0) {
		int fd = open(path, O_RDONLY | O_CLOEXEC); /* reading is all it may do */
		struct flock fl;
		int rc;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		memset(&fl, 0, sizeof fl);
		fl.l_type = F_RDLCK;
		fl.l_whence = SEEK_SET;
		fl.l_start = 0;
		fl.l_len = 1;
		CHECK(fd >= 0);
		CHECK(fcntl(fd, ofd ? F_OFD_SETLK : F_SETLK, &fl) == 0); /* byte 0: shared */
		fl.l_start = PCPU__SEG_TREE_MEMBERS_AT;
		fl.l_len = PCPU__SEG_TREE_MEMBERS;
		rc = fcntl(fd, ofd ? F_OFD_SETLK : F_SETLK, &fl); /* the tree lives: refused */
		CHECK(write(rep[1], &rc, sizeof rc) == sizeof rc);
		if (rc != 0)
			CHECK(fcntl(fd, ofd ? F_OFD_SETLKW : F_SETLKW, &fl) == 0);
		CHECK(write(rep[1], "L", 1) == 1);
		for (int k = 0; k < 300; k++) /* holds it; bounded */
			sleep(1);
		_exit(0);
	}
	CHECK(read(rep[0], &early, sizeof early) == sizeof early);
	if (early == 0) {
		fprintf(stderr, "liveness: %s on the member bytes was taken while the tree lives\n", kind);
		bad = 1;
	}
	CHECK(segment_state() == PCPU_SEGMENT_LIVE);
	CHECK(kill(master, SIGKILL) == 0);
	CHECK(waitpid(master, NULL, 0) == master);
	CHECK(segment_state() == PCPU_SEGMENT_LIVE); /* the worker */
	CHECK(kill(worker, SIGKILL) == 0);
	CHECK(waitpid(worker, NULL, 0) == worker);
	/* The locker gets its lock once no member holds theirs. */
	CHECK(read(rep[0], &got, 1) == 1 && got == 'L');
	if (segment_state() != PCPU_SEGMENT_GONE) {
		fprintf(stderr, "liveness: every member gone, %s held by another process: the reader says %d "
			"(%d is gone)\n", kind, (int)segment_state(), (int)PCPU_SEGMENT_GONE);
		bad = 1;
	} else if (prune() != 1) {
		fprintf(stderr, "liveness: every member gone, %s held: --prune kept the file\n", kind);
		bad = 1;
	}
	CHECK(kill(locker, SIGKILL) == 0);
	CHECK(waitpid(locker, NULL, 0) == locker);
	CHECK(!bad);
	close(rep[0]);
	close(rep[1]);
	{
		char cmd[300];

		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		(void)system(cmd);
	}
	printf("liveness: %s of another process: refused while the tree lives, and once held, the "
	       "dead tree reads gone and is pruned\n", kind);
}

static void liveness(void)
{
	int up[2];
	pid_t master, worker = 0;

	liveness_foreign(1);
	liveness_foreign(0);
	strcpy(dir, "/tmp/pcpu-tree-live.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	/* The worker outlives its master: reparented here, reaped here. */
	CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
	CHECK(pipe(up) == 0);
	master = fork();
	CHECK(master >= 0);
	if (master == 0) {
		pid_t w;

		publish(0);
		w = fork();
		CHECK(w >= 0);
		if (w == 0) {
			pcpu_counter_t c = counter("w");

			CHECK(c);
			/* Bounded: a failed test leaves no process behind. */
			for (int k = 0; k < 120000; k++) {
				pcpu_counter_inc(c);
				usleep(1000);
			}
			_exit(0);
		}
		CHECK(write(up[1], &w, sizeof w) == sizeof w);
		pause();
		_exit(0);
	}
	CHECK(read(up[0], &worker, sizeof worker) == sizeof worker);
	CHECK(segment_state() == PCPU_SEGMENT_LIVE);
	CHECK(kill(master, SIGKILL) == 0);
	CHECK(waitpid(master, NULL, 0) == master);
	/* The master is gone; its worker still counts. */
	if (segment_state() != PCPU_SEGMENT_LIVE)
		fprintf(stderr, "liveness: master killed, a worker alive: the reader says %d\n",
			(int)segment_state());
	CHECK(segment_state() == PCPU_SEGMENT_LIVE);
	CHECK(prune() == 0);
	CHECK(segment_state() == PCPU_SEGMENT_LIVE);
	/* The last member gone: gone. */
	CHECK(kill(worker, SIGKILL) == 0);
	CHECK(waitpid(worker, NULL, 0) == worker);
	CHECK(segment_state() == PCPU_SEGMENT_GONE);
	CHECK(prune() == 1);
	printf("liveness: live while a worker lives after its master's death; pruned once all are gone\n");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0); /* nothing buffered for fork() to copy */

	static const struct {
		const char *name;
		void (*run)(void);
	} modes[] = {{"fulldisk", fulldisk}, {"fulldir", fulldir}, {"killwindow", killwindow},
		     {"stopped", stopped}, {"collectkill", collectkill}, {"corrupt", corrupt},
		     {"liveness", liveness}};
	size_t m;

	for (m = 0; m < sizeof modes / sizeof modes[0] && strcmp(mode, modes[m].name); m++)
		;
	if (m == sizeof modes / sizeof modes[0]) {
		fprintf(stderr, "usage: test_tree_hardening fulldisk | fulldir | killwindow | stopped | "
				"collectkill | corrupt | liveness\n");
		return 2;
	}
	if (argc > 2 && !strcmp(mode, "corrupt"))
		corrupt_trials = atoi(argv[2]);
	if (argc > 3 && !strcmp(mode, "corrupt"))
		corrupt_first = atoi(argv[3]);
	CHECK(corrupt_first >= 0 && corrupt_first < corrupt_trials);
	modes[m].run();
	if (dir[0]) {
		char cmd[300];

		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		(void)system(cmd);
	}
	return 0;
}
