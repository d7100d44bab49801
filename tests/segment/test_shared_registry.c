/*
 * A shared registry (PCPU_SEGMENT_SHARED_TREE) under a pre-fork server's
 * life: a master publishes it, forks workers (8 times more processes than
 * CPUs) that add, record, set and update a consistent group, and discover
 * label values lazily (new series after fork); the master resets counters and reads the segment
 * while it SIGKILLs workers at random instants and respawns them. At the end
 * every value read from the segment equals what the workers say they did.
 *
 * How a worker says what it did, exactly, although it may die at any
 * instant: in shared memory that only it writes (its struct wstate), it
 * notes the operation it is about to make (pending, seq = n), makes it,
 * adds it to its tallies, then marks it done (done = n). A killed worker
 * with seq != done may or may not have made that one operation; the
 * master records it as ambiguous, and a value must equal the tallies plus
 * some subset of the ambiguous operations on that series (values are
 * random and large: one subset at most fits). A pipe would have the same
 * gap between the add and the report.
 *
 *   test_shared_registry prefork WORKERS OPS KILLS   the whole scenario:
 *       phase 1 until OPS operations and KILLS kills, master resetting;
 *       phase 2 (no kills) until OPS more, workers resetting too: every
 *       reset exactly once across processes
 *   test_shared_registry prefork-full WORKERS OPS KILLS   the same on a
 *       small tmpfs that fills up as the workers register (issue 37):
 *       registrations refused with ENOSPC, every value still exact, no
 *       SIGBUS, one series per label set
 *   test_shared_registry lockdeath   a worker killed holding the tree lock
 *       in the middle of a directory change: the others go on (bounded by
 *       alarm()), the change repaired
 *   test_shared_registry groupdeath  a worker killed in mid-update of a
 *       group, holding a lane lock: undone by the next writer, or by a
 *       reader; values exact
 *   test_shared_registry multichunk  storage past the first chunk: made by
 *       one worker, mapped and allocated in by another
 *   test_shared_registry owned       owned slots (pcpu/worker.h) and trees
 *                                    exclude each other: EBUSY, ENOTSUP
 *   test_shared_registry wrongindex  with mm_cid slots, publishing a shared
 *       registry is refused (EINVAL, a message naming PCPU_INDEX=cpu)
 *
 * Run with PCPU_INDEX=cpu (but wrongindex); ctest runs it in every mode.
 */
#include <errno.h>
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

#include <pcpu/hcounter.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "small_fs.h"
#include "tree_child.h"
#include "segment/writer.h"

#define NPATHS 48
#define MAXW 64
#define MAXAMB 4096

enum { OP_ADD = 1, OP_RECORD, OP_GAUGE, OP_GROUP };

struct wstate {
	volatile uint64_t seq, done; /* operation started, and completed */
	int pend_op, pend_path;
	int64_t pend_v;
	int64_t cnt[NPATHS], hcount[NPATHS], hsum[NPATHS], gauge[NPATHS], resets[NPATHS];
	int64_t gpackets[NPATHS], gbytes[NPATHS]; /* group updates: (1, v, -v) */
	uint8_t used[NPATHS];
	volatile uint64_t ops;
	uint64_t refused; /* prefork-full: registrations refused (ENOSPC) */
	pid_t pid;
};

struct amb {
	int op, path;
	int64_t v;
};

struct shared {
	volatile int stop, phase;
	struct wstate w[MAXW];
	int64_t master_resets[NPATHS];
	struct amb amb[MAXAMB];
	int namb;
	int negative_resets;
	int torn_groups; /* group reads with flow_bytes != -flow_debt */
	int group_reads;
};

static struct shared *sh;

/* counter.c's test hook, between a reset's read and its subtraction: a
 * yield there makes resets of one counter from two processes overlap, as
 * they would if the tree's lock did not order them. */
extern void (*pcpu__test_reset_pause)(void *counter);

static void reset_pause(void *counter)
{
	(void)counter;
	sched_yield();
}
static char dir[256];
/* prefork-full: the segment's directory is a small tmpfs (mounted on dir
 * in this process's own mount namespace) that fills up: registrations may
 * fail with ENOSPC. */
static int full;
static unsigned full_pages = 12; /* PCPU_TEST_FULL_PAGES: of values, per region */
static pcpu_registry_t *reg;
static pcpu_family_t *f_req, *f_lat, *f_inflight;
static pcpu_group_family_t *gf_flow; /* flow_packets, flow_bytes, flow_debt */
static pcpu_segment_t *seg;

/* group.c's test hook: a shared registry's group writer, its lane odd and
 * its first member written, the others not. */
extern void (*pcpu__test_group_tree_pause)(void *lane);

static void path_name(int p, char *buf)
{
	snprintf(buf, 32, "/api/v%d/item%d", p % 3, p);
}

static void publish(void)
{
	static const struct pcpu_histogram_layout lay = {
		.scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 2, .max_value = 1 << 24};
	struct pcpu_segment_options o = {0};
	struct pcpu_family_desc d;

	strcpy(dir, "/tmp/pcpu-tree-test.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	if (full) {
		/* Room for the header, the directory's first pages and a few
		 * pages of values in every region (a CPU slot's and its
		 * mirror): the workers' series fill it up as they go. */
		size_t size = (size_t)4096 * (16 + 2 * (pcpu_nslots() - pcpu_worker_max()) * full_pages);
		char why[256];

		if (small_tmpfs("mount", dir, size, why, sizeof why) != 0 &&
		    small_tmpfs("userns", dir, size, why, sizeof why) != 0) {
			fprintf(stderr, "prefork-full: no small tmpfs here: %s\n", why);
			exit(1);
		}
	}
	reg = pcpu_registry_create();
	CHECK(reg);
	memset(&d, 0, sizeof d);
	d.name = "http_requests";
	d.help = "requests served";
	d.type = PCPU_METRIC_COUNTER;
	d.label_names = (const char *[]){"path"};
	d.nlabels = 1;
	f_req = pcpu_registry_family(reg, &d);
	d.name = "http_latency_us";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.histogram = &lay;
	f_lat = pcpu_registry_family(reg, &d);
	CHECK(f_req && f_lat);
	o.dir = dir;
	o.flags = PCPU_SEGMENT_SHARED_TREE;
	seg = pcpu_segment_publish(reg, "tree", &o);
	if (!seg)
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
	CHECK(seg);
	/* A family registered after publication, before fork(). */
	d.name = "http_inflight";
	d.type = PCPU_METRIC_GAUGE;
	d.histogram = NULL;
	f_inflight = pcpu_registry_family(reg, &d);
	CHECK(f_inflight);
	{
		/* A consistent group family: every update adds (1, v, -v),
		 * so every consistent read has flow_bytes == -flow_debt. */
		struct pcpu_family_desc m[3];
		const char *ln[1] = {"path"};

		memset(m, 0, sizeof m);
		m[0].name = "flow_packets";
		m[0].type = PCPU_METRIC_COUNTER;
		m[1].name = "flow_bytes";
		m[1].type = PCPU_METRIC_COUNTER;
		m[2].name = "flow_debt";
		m[2].type = PCPU_METRIC_GAUGE;
		for (int k = 0; k < 3; k++) {
			m[k].label_names = ln;
			m[k].nlabels = 1;
		}
		gf_flow = pcpu_registry_group(reg, m, 3);
		if (!gf_flow)
			fprintf(stderr, "group family: %s\n", pcpu_stats_error());
		CHECK(gf_flow);
	}
	{
		/* One series made before fork(): every worker inherits it. */
		char p[32];
		const char *v[1] = {p};

		path_name(0, p);
		CHECK(pcpu_family_counter(f_req, v));
	}
}

/* A reset's return: never negative, as every add is. Two resets that both
 * read the same value and both subtracted it (not ordered across
 * processes) would leave the counter below zero, and the next reset would
 * return a negative amount -- while the sum of every return and the final
 * value would still add up. */
static int64_t note_reset(uint64_t got)
{
	if ((int64_t)got < 0)
		__atomic_fetch_add(&sh->negative_resets, 1, __ATOMIC_RELAXED);
	return (int64_t)got;
}

/* A worker's registration: its handle (0), or (prefork-full only) a
 * refusal for want of space, counted (1). */
static int registered(struct wstate *w, int p, const void *handle)
{
	if (handle) {
		w->used[p] = 1;
		return 0;
	}
	if (!full || errno != ENOSPC)
		fprintf(stderr, "registration: %s\n", pcpu_stats_error());
	CHECK(full && errno == ENOSPC && pcpu_stats_error()[0]);
	w->refused++;
	return 1;
}

static void worker(int i)
{
	struct wstate *w = &sh->w[i];
	pcpu_counter_t c[NPATHS] = {0};
	pcpu_histogram_t *h[NPATHS] = {0};
	pcpu_gauge_t g[NPATHS] = {0};
	pcpu_group_t *gr[NPATHS] = {0};
	uint64_t rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 20) ^ (uint64_t)i;
	uint64_t n = w->done;
	uint8_t refused[4][NPATHS] = {{0}}; /* prefork-full: not tried again */
	pcpu_family_t *late;
	char names[NPATHS][32];

	for (int p = 0; p < NPATHS; p++)
		path_name(p, names[p]);
	struct pcpu_family_desc d;

	/* A family this worker registers after fork() (one for the tree:
	 * the others registering it find it). */
	memset(&d, 0, sizeof d);
	d.name = "worker_starts";
	d.type = PCPU_METRIC_COUNTER;
	late = pcpu_registry_family(reg, &d);
	CHECK(late || (full && errno == ENOSPC));
	w->seq = n;
	pcpu__test_reset_pause = reset_pause;
	while (!sh->stop) {
		uint64_t r = check_xorshift(&rng);
		int p = (int)(r % NPATHS), k = (int)((r >> 8) % 10);
		const char *v[1] = {names[p]};
		int64_t val = (int64_t)((r >> 16) % 1000000) + 1;

		if (sh->phase == 2 && k == 9 && (r >> 40) % 2048 == 0) {
			/* A reset: no kill in phase 2, so no ambiguity. */
			if (!c[p] && !refused[1][p])
				refused[1][p] = registered(w, p, c[p] = pcpu_family_counter(f_req, v));
			if (c[p])
				w->resets[p] += note_reset(pcpu_counter_fetch_and_zero(c[p]));
			continue;
		}
		/* The series first (a registration is no operation of the
		 * tallies); on a full disk it may be refused: ENOSPC. */
		if (k == 5 && !gr[p] && !refused[0][p])
			refused[0][p] = registered(w, p, gr[p] = pcpu_group_family_series(gf_flow, v));
		else if (k < 5 && !c[p] && !refused[1][p])
			refused[1][p] = registered(w, p, c[p] = pcpu_family_counter(f_req, v));
		else if (k >= 6 && k < 8 && !h[p] && !refused[2][p])
			refused[2][p] = registered(w, p, h[p] = pcpu_family_histogram(f_lat, v));
		else if (k >= 8 && !g[p] && !refused[3][p])
			refused[3][p] = registered(w, p, g[p] = pcpu_family_gauge(f_inflight, v));
		if (k == 5 ? !gr[p] : k < 5 ? !c[p] : k < 8 ? !h[p] : !g[p])
			continue;
		w->pend_path = p;
		w->pend_v = val;
		w->pend_op = k < 5 ? OP_ADD : k < 6 ? OP_GROUP : k < 8 ? OP_RECORD : OP_GAUGE;
		__atomic_store_n(&w->seq, ++n, __ATOMIC_RELEASE);
		if (k == 5) {
			pcpu_group_add(gr[p], 0, (const int64_t[]){1, val, -val});
			w->gpackets[p] += 1;
			w->gbytes[p] += val;
		} else if (k < 6) {
			pcpu_counter_add(c[p], val);
			w->cnt[p] += val;
		} else if (k < 8) {
			pcpu_histogram_record(h[p], val);
			w->hcount[p] += 1;
			w->hsum[p] += val;
		} else {
			if (val & 1)
				val = -val;
			w->pend_v = val;
			pcpu_gauge_add(g[p], val);
			w->gauge[p] += val;
		}
		__atomic_store_n(&w->done, n, __ATOMIC_RELEASE);
		w->ops++;
	}
	if (late) {
		pcpu_counter_t started = pcpu_family_counter(late, NULL);

		CHECK(started || (full && errno == ENOSPC));
		if (started)
			pcpu_counter_inc(started);
	}
	_exit(0);
}

static pid_t spawn(int i)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		/* A master that fails a CHECK takes its workers with it. */
		CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0);
		if (getppid() == 1)
			_exit(1);
		worker(i);
	}
	sh->w[i].pid = pid;
	return pid;
}

/* Worker i was killed: its in-flight operation is ambiguous. */
static void note_killed(int i)
{
	struct wstate *w = &sh->w[i];

	if (w->seq != w->done) {
		CHECK(sh->namb < MAXAMB);
		sh->amb[sh->namb++] = (struct amb){w->pend_op, w->pend_path, w->pend_v};
		w->seq = w->done;
	}
}

static uint64_t total_ops(int nw)
{
	uint64_t t = 0;

	for (int i = 0; i < nw; i++)
		t += sh->w[i].ops;
	return t;
}

/* The master reads the whole tree through the segment, as pcpustat does. */
static struct pcpu_reader_snapshot *read_segment(void)
{
	struct pcpu_reader_snapshot *s = read_tree_segment(dir);

	/* A tree refuses what its directory cannot record: nothing is ever
	 * dropped; out of space (which readers also call incomplete) only
	 * where the file system filled up. */
	CHECK(pcpu_segment_dropped(seg) == 0);
	CHECK(full ? s->nospace || !s->incomplete : !s->incomplete && !s->nospace);
	return s;
}

/* Every group read whole: flow_bytes == -flow_debt for each path. */
static void check_groups(const struct pcpu_reader_snapshot *s)
{
	int64_t bytes[NPATHS], debt[NPATHS];
	int hb[NPATHS] = {0}, hd[NPATHS] = {0};

	for (size_t fi = 0; fi < s->snapshot.nfamilies; fi++) {
		const struct pcpu_snapshot_family *f = &s->snapshot.families[fi];
		int isb = !strcmp(f->name, "flow_bytes"), isd = !strcmp(f->name, "flow_debt");

		for (size_t si = 0; (isb || isd) && si < f->nseries; si++) {
			int p;

			for (p = 0; p < NPATHS; p++) {
				char name[32];

				path_name(p, name);
				if (!strcmp(name, f->series[si].label_values[0]))
					break;
			}
			CHECK(p < NPATHS);
			if (isb) {
				bytes[p] = (int64_t)f->series[si].value.counter;
				hb[p] = 1;
			} else {
				debt[p] = f->series[si].value.gauge;
				hd[p] = 1;
			}
		}
	}
	for (int p = 0; p < NPATHS; p++) {
		/* A group's members are kept or left out together. */
		CHECK(hb[p] == hd[p]);
		if (hb[p]) {
			sh->group_reads++;
			if (bytes[p] != -debt[p]) {
				fprintf(stderr, "group %d torn: bytes %" PRId64 " debt %" PRId64 "\n", p,
					bytes[p], debt[p]);
				sh->torn_groups++;
			}
		}
	}
}

/* Whether `actual` is `base` plus a subset of the ambiguous operations
 * `op` on path p (field: 0 the value, 1 a histogram's count). Counts (each
 * 1) fit any number between; values are random and large, and their
 * subsets are tried (a long run with many kills may leave a few dozen on
 * one path: up to 24, 2^24 sums). */
static int fits(int64_t actual, int64_t base, int op, int p, int count)
{
	int64_t vals[24];
	int n = 0;

	for (int a = 0; a < sh->namb; a++)
		if (sh->amb[a].op == op && sh->amb[a].path == p) {
			if (count) {
				n++;
				continue;
			}
			CHECK(n < 24);
			vals[n++] = sh->amb[a].v;
		}
	if (count)
		return actual >= base && actual <= base + n;
	for (uint32_t m = 0; m < (UINT32_C(1) << n); m++) {
		int64_t t = base;

		for (int b = 0; b < n; b++)
			if (m & (UINT32_C(1) << b))
				t += vals[b];
		if (t == actual)
			return 1;
	}
	return 0;
}

static int path_of(const char *v)
{
	for (int p = 0; p < NPATHS; p++) {
		char name[32];

		path_name(p, name);
		if (!strcmp(name, v))
			return p;
	}
	return -1;
}

static void verify(int nw)
{
	struct pcpu_reader_snapshot *s = read_segment();
	int seen[6][NPATHS] = {{0}};
	int used[NPATHS] = {0}, bad = 0, starts = 0;

	for (int i = 0; i < nw; i++)
		for (int p = 0; p < NPATHS; p++)
			used[p] |= sh->w[i].used[p];
	for (size_t fi = 0; fi < s->snapshot.nfamilies; fi++) {
		const struct pcpu_snapshot_family *f = &s->snapshot.families[fi];
		int which = !strcmp(f->name, "http_requests")	 ? 0
			    : !strcmp(f->name, "http_latency_us") ? 1
			    : !strcmp(f->name, "http_inflight")	 ? 2
			    : !strcmp(f->name, "flow_packets")	 ? 3
			    : !strcmp(f->name, "flow_bytes")	 ? 4
			    : !strcmp(f->name, "flow_debt")	 ? 5
								 : -1;

		if (!strcmp(f->name, "worker_starts")) {
			CHECK(f->nseries == 1 || (full && f->nseries == 0));
			starts += (int)f->nseries;
			continue;
		}
		CHECK(which >= 0);
		for (size_t si = 0; si < f->nseries; si++) {
			const struct pcpu_snapshot_series *se = &f->series[si];
			int p = path_of(se->label_values[0]);
			int64_t want = 0, wsum = 0, resets = sh->master_resets[p < 0 ? 0 : p];

			CHECK(p >= 0);
			seen[which][p]++; /* one series per label value */
			for (int i = 0; i < nw; i++) {
				want += which == 0 ? sh->w[i].cnt[p] : which == 1 ? sh->w[i].hcount[p]
										   : sh->w[i].gauge[p];
				wsum += sh->w[i].hsum[p];
				if (which == 0)
					resets += sh->w[i].resets[p];
			}
			if (which == 0 && !fits((int64_t)se->value.counter + resets, want, OP_ADD, p, 0)) {
				fprintf(stderr, "counter %s: %" PRIu64 " + resets %" PRId64 " != %" PRId64 "\n",
					se->label_values[0], se->value.counter, resets, want);
				bad++;
			}
			if (which == 1) {
				int64_t count = 0;

				for (size_t b = 0; b < f->nbuckets; b++)
					count += (int64_t)se->value.histogram.counts[b];
				if (!fits(count, want, OP_RECORD, p, 1) ||
				    !fits(se->value.histogram.sum, wsum, OP_RECORD, p, 0)) {
					fprintf(stderr, "histogram %s: count %" PRId64 " sum %" PRId64
						" != %" PRId64 ", %" PRId64 "\n", se->label_values[0], count,
						se->value.histogram.sum, want, wsum);
					bad++;
				}
			}
			if (which >= 3) {
				int64_t gp = 0, gb = 0, actual = which == 3 ? (int64_t)se->value.counter
							   : which == 4 ? (int64_t)se->value.counter
									: -se->value.gauge;

				for (int i = 0; i < nw; i++) {
					gp += sh->w[i].gpackets[p];
					gb += sh->w[i].gbytes[p];
				}
				if (which == 3 ? !fits(actual, gp, OP_GROUP, p, 1)
					       : !fits(actual, gb, OP_GROUP, p, 0)) {
					fprintf(stderr, "group member %d %s: %" PRId64 " != %" PRId64 "\n",
						which, se->label_values[0], actual, which == 3 ? gp : gb);
					bad++;
				}
			}
			if (which == 2 && !fits(se->value.gauge, want, OP_GAUGE, p, 0)) {
				fprintf(stderr, "gauge %s: %" PRId64 " != %" PRId64 "\n", se->label_values[0],
					se->value.gauge, want);
				bad++;
			}
		}
	}
	for (int w = 0; w < 6; w++)
		for (int p = 0; p < NPATHS; p++)
			if (seen[w][p] > 1) {
				fprintf(stderr, "family %d path %d: %d series, not one\n", w, p, seen[w][p]);
				bad++;
			}
	/* Every path some worker used exists (in some family; the counter
	 * family has path 0 from the master too). */
	for (int p = 0; p < NPATHS; p++)
		if (used[p] && !seen[0][p] && !seen[1][p] && !seen[2][p] && !seen[3][p]) {
			fprintf(stderr, "path %d was used but has no series\n", p);
			bad++;
		}
	CHECK(starts == 1 || full);
	if (sh->negative_resets) {
		fprintf(stderr, "%d resets returned a negative amount: two resets subtracted one value\n",
			sh->negative_resets);
		bad++;
	}
	check_groups(s);
	if (sh->torn_groups) {
		fprintf(stderr, "%d of %d group reads torn\n", sh->torn_groups, sh->group_reads);
		bad++;
	}
	printf("verified %zu families, %d ambiguous operations, %d group reads whole, %d mismatches\n",
	       s->snapshot.nfamilies, sh->namb, sh->group_reads, bad);
	pcpu_reader_snapshot_free(s);
	CHECK(bad == 0);
}

static void prefork(int nw, uint64_t ops, int kills)
{
	uint64_t rng = 88172645463325252ull ^ (uint64_t)getpid();
	int killed = 0, resets = 0, snaps = 0;
	pcpu_counter_t mc[NPATHS] = {0};

	CHECK(nw > 0 && nw <= MAXW);
	publish();
	for (int i = 0; i < nw; i++)
		spawn(i);
	/* Phase 1: kills, respawns, the master's resets and reads. */
	sh->phase = 1;
	while (total_ops(nw) < ops || killed < kills) {
		uint64_t r = check_xorshift(&rng);
		struct timespec ts = {0, (long)(1 + r % 20) * 1000000};
		int i = (int)((r >> 8) % (uint64_t)nw), p = (int)((r >> 16) % NPATHS), st;
		char name[32];
		const char *v[1] = {name};

		nanosleep(&ts, NULL);
		if (killed < kills || (r >> 30) % 4 == 0) {
			CHECK(kill(sh->w[i].pid, SIGKILL) == 0);
			CHECK(waitpid(sh->w[i].pid, &st, 0) == sh->w[i].pid);
			CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
			note_killed(i);
			killed++;
			spawn(i);
		}
		/* The master's own resets, on series it may not have made. */
		path_name(p, name);
		if (!mc[p])
			mc[p] = pcpu_family_counter(f_req, v);
		CHECK(mc[p] || (full && errno == ENOSPC));
		if (mc[p]) {
			sh->master_resets[p] += note_reset(pcpu_counter_fetch_and_zero(mc[p]));
			resets++;
		}
		if (killed % 4 == 0) {
			struct pcpu_reader_snapshot *rs;

			/* The master refreshes every group of the tree (the
			 * workers' too, dead holders' lanes repaired), as
			 * its collection timer would. */
			CHECK(pcpu_registry_collect(reg) == 0);
			rs = read_segment();
			check_groups(rs);
			pcpu_reader_snapshot_free(rs);
			snaps++;
		}
	}
	/* Phase 2: no kills; the workers reset too. */
	sh->phase = 2;
	{
		uint64_t until = total_ops(nw) + ops;

		while (total_ops(nw) < until) {
			uint64_t r = check_xorshift(&rng);
			int p = (int)((r >> 16) % NPATHS);
			char name[32];
			const char *v[1] = {name};
			struct timespec ts = {0, 2000000};

			nanosleep(&ts, NULL);
			path_name(p, name);
			if (!mc[p])
				mc[p] = pcpu_family_counter(f_req, v);
			if (mc[p]) {
				sh->master_resets[p] += note_reset(pcpu_counter_fetch_and_zero(mc[p]));
				resets++;
			}
		}
	}
	sh->stop = 1;
	for (int i = 0; i < nw; i++) {
		int st;

		CHECK(waitpid(sh->w[i].pid, &st, 0) == sh->w[i].pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	{
		uint64_t refused = 0;

		for (int i = 0; i < nw; i++)
			refused += sh->w[i].refused;
		printf("prefork: %d workers, %" PRIu64 " operations, %d kills, %d master resets, "
		       "%d reads while running, mode %s, %" PRIu64 " tree lock holders died, "
		       "%" PRIu64 " registrations refused%s\n",
		       nw, total_ops(nw), killed, resets, snaps, pcpu_rseq_mode_name(pcpu_rseq_mode()),
		       ((struct pcpu_segment *)seg)->tree->zone.deaths, refused,
		       full ? " on a full file system" : "");
	}
	CHECK(pcpu_registry_collect(reg) == 0);
	verify(nw);
}

/* A worker dies holding the tree's lock, its directory change half done. */
static void lockdeath(void)
{
	struct pcpu_segment *s;
	int fds[2], st;
	pid_t pid;
	char c;

	publish();
	s = (struct pcpu_segment *)seg;
	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK(pcpu__tree_enter(s) == 0);
		pcpu__directory_begin(s); /* generation odd: a change begun */
		/* An entry half written: its sequence odd. */
		__atomic_store_n(&s->entries[s->entries_used].seq, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&s->hdr->entries_used, s->entries_used + 1, __ATOMIC_RELEASE);
		CHECK(write(fds[1], "x", 1) == 1);
		pause();
		_exit(1);
	}
	CHECK(read(fds[0], &c, 1) == 1);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(s->tree->zone.deaths == 0);
	/* Another worker registers a series: it must get the lock, repaired. */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		const char *v[1] = {"/after-death"};

		alarm(60); /* a wedged lock fails the test instead of hanging it */
		CHECK(pcpu_family_counter(f_req, v) != NULL);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(s->tree->zone.deaths == 1 && s->tree->repairs == 1);
	CHECK((s->hdr->generation & 1) == 0);
	{
		/* And the lock stays usable (marked consistent, not
		 * unrecoverable after its first taker unlocked it). */
		const char *v[1] = {"/after-death-2"};

		CHECK(pcpu_family_counter(f_req, v) != NULL);
	}
	{
		struct pcpu_reader_snapshot *r = read_segment();
		int found = 0;

		CHECK(r->stable);
		for (size_t fi = 0; fi < r->snapshot.nfamilies; fi++)
			for (size_t si = 0; si < r->snapshot.families[fi].nseries; si++)
				found += !strcmp(r->snapshot.families[fi].series[si].label_values[0],
						 "/after-death");
		CHECK(found == 1);
		pcpu_reader_snapshot_free(r);
	}
	printf("lockdeath: the lock's holder was killed mid-change; the next taker repaired it\n");
}

static int death_fd = -1;

static void pause_forever(void *lane)
{
	(void)lane;
	CHECK(write(death_fd, "x", 1) == 1);
	pause();
}

static void on_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
}

/* A worker on CPU 0 killed in mid-update of group g: lane odd, its first
 * member written, its lane lock held. */
static void die_in_group_update(pcpu_group_t *g)
{
	int fds[2], st;
	pid_t pid;
	char c;

	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		on_cpu0();
		death_fd = fds[1];
		pcpu__test_group_tree_pause = pause_forever;
		pcpu_group_add(g, 0, (const int64_t[]){1, 100, -100});
		_exit(1);
	}
	CHECK(read(fds[0], &c, 1) == 1);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
	close(fds[0]);
	close(fds[1]);
}

static void check_group(pcpu_group_t *g, int64_t packets, int64_t bytes)
{
	int64_t out[3];

	if (pcpu_group_read(g, 0, out) != 0)
		fprintf(stderr, "group read: %s\n", strerror(errno));
	CHECK(pcpu_group_read(g, 0, out) == 0);
	if (out[0] != packets || out[1] != bytes || out[2] != -bytes)
		fprintf(stderr, "group: (%" PRId64 ", %" PRId64 ", %" PRId64 "), want (%" PRId64
			", %" PRId64 ", %" PRId64 ")\n", out[0], out[1], out[2], packets, bytes, -bytes);
	CHECK(out[0] == packets && out[1] == bytes && out[2] == -bytes);
}

/* Slot 0's lane of group g, held (odd) or free: its seq (group.c's tree
 * lane: [seq | undo_seq | repairer | values | undo]). */
static int64_t lane0_seq(const pcpu_group_t *g)
{
	return __atomic_load_n((const int64_t *)g->pcpu__primary, __ATOMIC_ACQUIRE);
}

/* A worker dies in mid-update of a group of the shared registry, holding
 * its CPU's lane: the dead update is wholly absent from every read, no
 * reader or writer waits for it, and the next read repairs the lane; a
 * writer on the same CPU meanwhile takes another lane. */
static void groupdeath(void)
{
	char name[32];
	const char *v[1] = {name};
	pcpu_group_t *g;
	int st;
	pid_t pid;

	publish();
	path_name(1, name);
	g = pcpu_group_family_series(gf_flow, v);
	CHECK(g);
	pcpu_group_add(g, 0, (const int64_t[]){1, 10, -10});
	alarm(120); /* a lane that stays odd for a writer fails the test, not hangs it */
	/* 1. A writer on the same CPU, while the dead one's lane is odd. */
	die_in_group_update(g);
	if (pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK)
		CHECK(lane0_seq(g) & 1); /* the rseq path took slot 0's lane */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		on_cpu0();
		pcpu_group_add(g, 0, (const int64_t[]){1, 5, -5});
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The read sees the lane's undo copy, and repairs it. */
	check_group(g, 2, 15);
	CHECK((lane0_seq(g) & 1) == 0);
	/* 2. A reader first. */
	die_in_group_update(g);
	check_group(g, 2, 15);
	CHECK((lane0_seq(g) & 1) == 0);
	/* 3. And the segment shows it, through the master's collection. */
	pcpu_group_add(g, 0, (const int64_t[]){1, 7, -7});
	CHECK(pcpu_registry_collect(reg) == 0);
	{
		struct pcpu_reader_snapshot *r = read_segment();
		int found = 0;

		check_groups(r);
		for (size_t fi = 0; fi < r->snapshot.nfamilies; fi++)
			if (!strcmp(r->snapshot.families[fi].name, "flow_bytes"))
				for (size_t si = 0; si < r->snapshot.families[fi].nseries; si++) {
					CHECK(r->snapshot.families[fi].series[si].value.counter == 22);
					found++;
				}
		CHECK(found == 1 && sh->torn_groups == 0);
		pcpu_reader_snapshot_free(r);
	}
	alarm(0);
	printf("groupdeath: two group writers killed holding a lane: their updates absent, the "
	       "lane repaired by the next read; values exact\n");
}

/* A histogram's count and sum in the segment; -1 if there is no such series. */
static int hist_in_segment(const struct pcpu_reader_snapshot *r, const char *family,
			   const char *value, int64_t *count, int64_t *sum)
{
	for (size_t fi = 0; fi < r->snapshot.nfamilies; fi++) {
		const struct pcpu_snapshot_family *f = &r->snapshot.families[fi];

		if (strcmp(f->name, family) != 0)
			continue;
		for (size_t si = 0; si < f->nseries; si++)
			if (!strcmp(f->series[si].label_values[0], value)) {
				*count = 0;
				for (size_t b = 0; b < f->nbuckets; b++)
					*count += (int64_t)f->series[si].value.histogram.counts[b];
				*sum = f->series[si].value.histogram.sum;
				return 0;
			}
	}
	return -1;
}

/* The tree's storage past its first chunk (32 MiB per slot): a worker
 * registers big histograms until it makes chunk 1; a second worker, forked
 * from a master that never mapped it, adopts a series there (mapping the
 * chunk) and allocates a new one at the frontier in it; the segment shows
 * both workers' records. */
static void multichunk(void)
{
	static const struct pcpu_histogram_layout big = {
		.scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 10, .max_value = 1ll << 40};
	struct pcpu_family_desc d;
	struct pcpu_segment *s;
	pcpu_family_t *f_big;
	int fds[2], st, made = 0;
	pid_t pid;

	publish();
	s = (struct pcpu_segment *)seg;
	memset(&d, 0, sizeof d);
	d.name = "big_histogram";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.histogram = &big;
	d.label_names = (const char *[]){"n"};
	d.nlabels = 1;
	f_big = pcpu_registry_family(reg, &d);
	CHECK(f_big);
	CHECK(s->tree->zone.nchunks == 1);
	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		pcpu_histogram_t *h = NULL;
		char v[16];
		const char *lv[1] = {v};
		int n;

		for (n = 0; n < 4096 && s->tree->zone.nchunks < 2; n++) {
			snprintf(v, sizeof v, "big%d", n);
			h = pcpu_family_histogram(f_big, lv);
			CHECK(h);
		}
		CHECK(s->tree->zone.nchunks == 2);
		for (int k = 0; k < 3; k++)
			pcpu_histogram_record(h, 5);
		CHECK(write(fds[1], &n, sizeof n) == sizeof n);
		_exit(0);
	}
	CHECK(read(fds[0], &made, sizeof made) == sizeof made);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(made > 1);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char v[16];
		const char *lv[1] = {v};
		pcpu_histogram_t *h;

		snprintf(v, sizeof v, "big%d", made - 1); /* in chunk 1, made by the other worker */
		h = pcpu_family_histogram(f_big, lv);
		CHECK(h);
		pcpu_histogram_record(h, 7);
		h = pcpu_family_histogram(f_big, (const char *[]){"after"}); /* a new one, in chunk 1 */
		CHECK(h);
		pcpu_histogram_record(h, 11);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(s->tree->zone.nchunks == 2);
	{
		struct pcpu_reader_snapshot *r = read_segment();
		int64_t count, sum;
		char v[16];

		snprintf(v, sizeof v, "big%d", made - 1);
		CHECK(hist_in_segment(r, "big_histogram", v, &count, &sum) == 0);
		CHECK(count == 4 && sum == 22);
		CHECK(hist_in_segment(r, "big_histogram", "after", &count, &sum) == 0);
		CHECK(count == 1 && sum == 11);
		pcpu_reader_snapshot_free(r);
	}
	printf("multichunk: chunk 1 made by one worker after %d series, adopted and allocated in "
	       "by another; the segment shows both\n", made);
}

/* What a shared registry does not do is refused, never half done. */
static void refusals(void)
{
	const char *v[1] = {"/x"};
	struct pcpu_family_desc m[2];
	struct pcpu_stats_field fld = {.name = "s", .type = PCPU_METRIC_COUNTER, .offset = 0};

	publish();
	CHECK(pcpu_family_counter(f_req, v));
	errno = 0;
	CHECK(pcpu_family_remove(f_req, v) == -1 && errno == EOPNOTSUPP);
	CHECK(strstr(pcpu_stats_error(), "shared registry") != NULL);
	CHECK(pcpu_registry_remove_family(reg, f_req) == -1 && errno == EOPNOTSUPP);
	(void)m;
	CHECK(pcpu_group_family_series(gf_flow, v));
	errno = 0;
	CHECK(pcpu_group_family_remove(gf_flow, v) == -1 && errno == EOPNOTSUPP);
	CHECK(pcpu_group_family_series(gf_flow, v));
	errno = 0;
	CHECK(pcpu_registry_struct(reg, 8, &fld, 1, 0, NULL, NULL) == NULL && errno == EOPNOTSUPP);
	/* A hierarchical counter in the tree's zone (pcpu/hcounter.h: its
	 * switches need a fence over every process of the tree). */
	errno = 0;
	CHECK(pcpu_hcounter_create_in(pcpu_registry_zone(reg), 32) == NULL && errno == EOPNOTSUPP);
	/* The series is still there and counts. */
	pcpu_counter_add(pcpu_family_counter(f_req, v), 5);
	CHECK(pcpu_counter_fetch(pcpu_family_counter(f_req, v)) == 5);
	printf("refusals: removal (series, group series, family), structs and hierarchical counters "
	       "refused with EOPNOTSUPP\n");
}

/* A new directory in `dir` and a registry with no series, and the options
 * that would publish it there as a shared registry. */
static pcpu_registry_t *unpublished_tree(struct pcpu_segment_options *o)
{
	pcpu_registry_t *r;

	strcpy(dir, "/tmp/pcpu-tree-test.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	r = pcpu_registry_create();
	CHECK(r);
	o->dir = dir;
	o->flags = PCPU_SEGMENT_SHARED_TREE;
	return r;
}

/* Owned slots (pcpu/worker.h) are a process's own; tree memory is the
 * tree's: a tree is not made while a thread holds a claim, and no claim is
 * made once there is one. */
static void owned(void)
{
	struct pcpu_segment_options o = {0};
	pcpu_registry_t *r;
	pcpu_worker_t w;
	pcpu_segment_t *seg;

	if (pcpu_worker_max() == 0) {
		printf("owned: PCPU_OWNED_SLOTS=0: nothing to claim\n");
		return;
	}
	r = unpublished_tree(&o);
	CHECK(pcpu_worker_claim(&w) == 0 && pcpu_worker_slot(w) >= 0);
	errno = 0;
	CHECK(pcpu_segment_publish(r, "tree", &o) == NULL && errno == EBUSY);
	printf("owned: a tree while a claim is held: refused: %s\n", pcpu_segment_error());
	CHECK(pcpu_worker_release() == 0);
	seg = pcpu_segment_publish(r, "tree", &o);
	if (!seg)
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
	CHECK(seg);
	errno = 0;
	CHECK(pcpu_worker_claim(&w) == -1 && errno == ENOTSUP && w.pcpu__off == 0);
	/* The zero claim's updates are ordinary ones, into the tree. */
	{
		struct pcpu_family_desc d;
		pcpu_family_t *f;
		pcpu_counter_t c;

		memset(&d, 0, sizeof d);
		d.name = "owned_requests";
		d.type = PCPU_METRIC_COUNTER;
		f = pcpu_registry_family(r, &d);
		CHECK(f);
		c = pcpu_family_counter(f, NULL);
		CHECK(c);
		pcpu_counter_add_owned(w, c, 3);
		pcpu_counter_add_owned(pcpu_worker_self(), c, 4);
		CHECK(pcpu_counter_fetch(c) == 7);
	}
	printf("owned: a claim in a tree's process: refused with ENOTSUP; unclaimed owned adds count\n");
	pcpu_registry_destroy(r); /* removes the file */
	CHECK(rmdir(dir) == 0);
}

static void wrongindex(void)
{
	struct pcpu_segment_options o = {0};
	pcpu_registry_t *r;

	if (pcpu_zone_index(NULL) == PCPU_INDEX_CPU) {
		/* The kernel has no mm_cid (or PCPU_INDEX=cpu is set): the
		 * wrong combination cannot be made here. */
		printf("wrongindex: this process indexes by CPU (kernel mm_cid: %d): nothing to refuse\n",
		       pcpu_rseq_has_mm_cid());
		return;
	}
	r = unpublished_tree(&o);
	errno = 0;
	CHECK(pcpu_segment_publish(r, "tree", &o) == NULL && errno == EINVAL);
	CHECK(strstr(pcpu_segment_error(), "PCPU_INDEX=cpu") != NULL);
	/* The registry stays usable, and publishes as an ordinary one. */
	o.flags = 0;
	CHECK(pcpu_segment_publish(r, "tree", &o) != NULL);
	printf("wrongindex: refused: %s\n", pcpu_segment_error());
	pcpu_registry_destroy(r);
}

int main(int argc, char **argv)
{
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	if (argc >= 2 && !strcmp(argv[1], "prefork-full")) {
		full = 1;
		if (getenv("PCPU_TEST_FULL_PAGES"))
			full_pages = (unsigned)atoi(getenv("PCPU_TEST_FULL_PAGES"));
	}
	if (argc >= 2 && (!strcmp(argv[1], "prefork") || full))
		prefork(argc > 2 ? atoi(argv[2]) : 16,
			argc > 3 ? strtoull(argv[3], NULL, 0) : 20000000ull,
			argc > 4 ? atoi(argv[4]) : 24);
	else if (argc >= 2 && !strcmp(argv[1], "lockdeath"))
		lockdeath();
	else if (argc >= 2 && !strcmp(argv[1], "multichunk"))
		multichunk();
	else if (argc >= 2 && !strcmp(argv[1], "groupdeath"))
		groupdeath();
	else if (argc >= 2 && !strcmp(argv[1], "refusals"))
		refusals();
	else if (argc >= 2 && !strcmp(argv[1], "wrongindex"))
		wrongindex();
	else if (argc >= 2 && !strcmp(argv[1], "owned"))
		owned();
	else {
		fprintf(stderr, "usage: test_shared_registry prefork|prefork-full [WORKERS OPS KILLS] | lockdeath | "
				"groupdeath | multichunk | refusals | wrongindex | owned\n");
		return 2;
	}
	if (dir[0]) {
		char cmd[300];

		if (full)
			(void)umount2(dir, MNT_DETACH);
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		(void)system(cmd);
	}
	return 0;
}
