/* SPDX-License-Identifier: MIT */
/*
 * Pre-fork servers: a shared registry (PCPU_SEGMENT_SHARED_TREE, issue 26)
 * against the same operations in one process.
 *
 *   speed   (issue 26's first target: a worker's add / record <= 1.05x the
 *           same in a single process with the CPU index). For each count
 *           W (default 1, 2, 4, 16) and each operation (counter add of a
 *           random amount to one of 16 labelled series picked at random;
 *           histogram record of a random latency, log-uniform 1 ms - 20 s,
 *           into one of the 16 series' histograms, Prometheus' default
 *           buckets), three variants run the same compiled loop on the same
 *           inputs:
 *             threads  one process, W threads, an ordinary registry (not
 *                      published): the reference;
 *             tree     W worker processes fork()ed from the master of a
 *                      shared registry, each registering its series after
 *                      fork() (the first worker makes them, the others find
 *                      them), then adding;
 *             pub      one process, W threads, an ordinary registry
 *                      published as an ordinary segment (the same file
 *                      memory as the tree, no tree): separates "values in a
 *                      file mapping" from "shared by processes".
 *           Every worker (thread or process) registers and warms up, waits
 *           for a common start, then times its loop in its own CPU time
 *           (CLOCK_THREAD_CPUTIME_ID: the machine is shared); a variant's
 *           figure is the sum of its workers' CPU time over the sum of
 *           their operations. Round r runs every variant once, starting
 *           from a different one; results are medians over rounds, and the
 *           ratios tree / threads and pub / threads are medians of the
 *           per-round ratios. After every run the master reads the totals
 *           (its own handles; for the tree, series it finds after the
 *           workers made them) and checks them against what the workers
 *           added.
 *           A fourth variant pairs the two sides in time, which a shared
 *           machine's drift cannot tell apart: W worker processes of the
 *           tree each alternate, on TSC phases of about 0.2 ms that every
 *           worker switches on at once (bench.h, bench_phase_tick), the
 *           same loop on the tree's series and on a private ordinary
 *           registry's series made in that worker; its ratio is tree /
 *           private per round, median over rounds.
 *   memory  (the second target: 64 workers on 2 CPUs use no more counter
 *           memory than 2). A fresh master publishes a shared registry,
 *           forks W workers (2, then 64) that each register and add to the
 *           same N counters (10^4) in their own random order; the segment
 *           file's allocated size (st_blocks * 512 of the tmpfs file)
 *           before the workers and after, per counter. Beside it, one
 *           process publishing an ordinary segment with the same counters.
 *           The master checks every counter equals W and the reader sees N
 *           series, not more. Each worker's CPU time per registration is
 *           printed beside (a series another process made is found in the
 *           file's directory).
 *   groups  a consistent group's update (pcpu_group_add2: packets 1, bytes
 *           random, one of 16 labelled groups picked at random) in one
 *           process: a shared registry's group (its tid-tagged lanes) against
 *           an ordinary published registry's (the rseq lane), the same
 *           compiled loop, rounds alternating, thread CPU time per update,
 *           medians and the median of per-round ratios; totals checked.
 *   --anchor W   bench/prefork_anchor.py's pcpu side: publishes a shared
 *           registry (--dir, --name), forks W workers that each make
 *           --ops increments of a counter of 8 labelled series (handles
 *           kept; then looked up at each increment, as
 *           `c.labels(path).inc()` does) and --ops histogram records,
 *           prints their CPU time per operation, and keeps the segment
 *           published until its standard input closes (so the script can
 *           scrape it), then unpublishes.
 *
 * The program runs itself again with PCPU_INDEX=cpu when that is not in its
 * environment (a shared registry needs CPU-number slots).
 *
 * Options: --quick (seconds), --smoke (tiny, checks every path), --rounds N,
 * --ops N (operations per variant in all, split between its workers),
 * --workers 1,2,4,16, --series N (memory), --mem-workers 2,64,
 * --speed-only, --memory-only.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

/* util.c's globals (pcpu_bench.c defines them for pcpu_bench). */
struct bench_opts bench_opt;
unsigned bench_ncpu;
double bench_tsc_ghz;

#define NSERIES 16
#define NANCHOR 8     /* the anchor's "few labelled series" */
#define NRAND 65536   /* random inputs, read in order from a random start */
#define MAX_ROUNDS 64
#define MEM_MAX 4
#define MEM_WORKERS_MAX 256

enum { OP_ADD, OP_RECORD, NOP };
enum { V_THREADS, V_TREE, V_PUB, NV, V_PAIR = NV, NKIND };
static const char *const op_name[NOP] = {"counter add", "histogram record"};
static const char *const v_name[NKIND] = {"threads", "tree", "pub", "tree/private pairs"};

static struct {
	unsigned rounds;
	uint64_t ops;                 /* per variant, all workers together */
	unsigned workers[BENCH_MAX_LIST], nworkers;
	unsigned series;              /* memory: counters every worker touches */
	unsigned mem_workers[MEM_MAX], nmem;
	int speed, memory, groups;
	unsigned anchor;              /* --anchor W: 0 = not that mode */
	const char *dir, *name;
} opt = {
	.rounds = 11, .ops = 1u << 23, .workers = {1, 2, 4, 16}, .nworkers = 4,
	.series = 10000, .mem_workers = {2, 64}, .nmem = 2, .speed = 1, .memory = 1, .groups = 1,
	.name = "prefork",
};

/* ---- inputs ------------------------------------------------------------------ */

static uint8_t in_idx[NRAND];    /* which series */
static int64_t in_add[NRAND];    /* a counter add: bytes, uniform 1 .. 65536 */
static int64_t in_ns[NRAND];     /* a latency, ns, log-uniform 1 ms .. 20 s */
static char label[NSERIES][48];  /* path label values, random */

/* Prometheus' (and prometheus_client's) default buckets, in ns. */
static const int64_t bounds_ns[] = {
	5000000, 10000000, 25000000, 50000000, 75000000, 100000000, 250000000,
	500000000, 750000000, 1000000000, 2500000000, 5000000000, 7500000000, 10000000000,
};
static const struct pcpu_histogram_layout layout = {
	.scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = bounds_ns,
	.nbounds = sizeof(bounds_ns) / sizeof(bounds_ns[0]),
};

static void inputs_init(void)
{
	uint64_t x = 0x2545f4914f6cdd1dull;

	for (unsigned i = 0; i < NRAND; i++) {
		in_idx[i] = (uint8_t)(bench_xorshift(&x) % NSERIES);
		in_add[i] = (int64_t)(bench_xorshift(&x) % 65536) + 1;
		in_ns[i] = (int64_t)(1e6 * exp((double)(bench_xorshift(&x) >> 11) * 0x1p-53 * log(20000.0)));
	}
	for (unsigned s = 0; s < NSERIES; s++)
		snprintf(label[s], sizeof label[s], "/api/v%u/%08" PRIx64, s % 3,
			 bench_xorshift(&x) & 0xffffffffu);
}

/* ---- the registries ---------------------------------------------------------- */

struct fams {
	pcpu_family_t *req, *bytes, *lat;
};

static void make_families(pcpu_registry_t *reg, struct fams *f)
{
	static const char *const lnames[] = {"path"};
	struct pcpu_family_desc d;

	memset(&d, 0, sizeof d);
	d.nlabels = 1;
	d.label_names = lnames;
	d.type = PCPU_METRIC_COUNTER;
	d.name = "http_requests";
	d.help = "Requests served.";
	f->req = pcpu_registry_family(reg, &d);
	d.name = "http_response_bytes";
	d.help = "Bytes sent.";
	f->bytes = pcpu_registry_family(reg, &d);
	d.name = "http_request_duration_seconds";
	d.help = "Request latency.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -9;
	d.histogram = &layout;
	f->lat = pcpu_registry_family(reg, &d);
	if (!f->req || !f->bytes || !f->lat)
		bench_die("families: %s", pcpu_stats_error());
}

/* A segment directory of its own, on tmpfs (where a server's would be). */
static void make_dir(char *buf, size_t len)
{
	snprintf(buf, len, "/dev/shm/pcpu-prefork-bench.XXXXXX");
	if (!mkdtemp(buf))
		bench_die("mkdtemp %s: %s", buf, strerror(errno));
}

static void remove_dir(const char *dir)
{
	char cmd[300];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static pcpu_segment_t *publish(pcpu_registry_t *reg, const char *dir, const char *name,
			       unsigned flags)
{
	struct pcpu_segment_options o;
	pcpu_segment_t *seg;

	memset(&o, 0, sizeof o);
	o.dir = dir;
	o.flags = flags;
	seg = pcpu_segment_publish(reg, name, &o);
	if (!seg)
		bench_die("publish %s: %s", name, pcpu_segment_error());
	return seg;
}

/* ---- the measured loops: the same code for threads and processes ------------- */

struct handles {
	pcpu_counter_t c[NSERIES];
	pcpu_histogram_t *h[NSERIES];
};

static __attribute__((noinline)) void loop_add(const struct handles *hd, uint64_t n, unsigned off)
{
	for (uint64_t i = 0; i < n; i++) {
		unsigned j = (off + (unsigned)i) & (NRAND - 1);

		pcpu_counter_add(hd->c[in_idx[j]], in_add[j]);
	}
}

static __attribute__((noinline)) void loop_record(const struct handles *hd, uint64_t n,
						 unsigned off)
{
	for (uint64_t i = 0; i < n; i++) {
		unsigned j = (off + (unsigned)i) & (NRAND - 1);

		pcpu_histogram_record(hd->h[in_idx[j]], in_ns[j]);
	}
}

/* What loop_add / loop_record added, computed outside the timed loop. */
static int64_t inputs_sum(int op, uint64_t n, unsigned off)
{
	int64_t s = 0;

	for (uint64_t i = 0; i < n; i++) {
		unsigned j = (off + (unsigned)i) & (NRAND - 1);

		s += op == OP_ADD ? in_add[j] : in_ns[j];
	}
	return s;
}

static int resolve(const struct fams *f, int op, struct handles *hd)
{
	for (unsigned s = 0; s < NSERIES; s++) {
		const char *v[1] = {label[s]};

		if (op == OP_ADD) {
			hd->c[s] = pcpu_family_counter(f->bytes, v);
			if (!hd->c[s])
				return -1;
		} else {
			hd->h[s] = pcpu_family_histogram(f->lat, v);
			if (!hd->h[s])
				return -1;
		}
	}
	return 0;
}

/* ---- one variant: W workers, a common start ------------------------------------ */

struct wres {
	uint64_t cpu_ns, ops, count;
	int64_t sum;
	int ok;
	/* paired runs: the private registry's side */
	uint64_t cpu2_ns, ops2;
} BENCH_ALIGNED;

struct shm {
	unsigned ready;
	struct wres r[BENCH_MAX_THREADS];
	/* memory section: one configuration's result */
	double mem_b0, mem_b1, mem_size;
	unsigned mem_nslots, mem_nseries;
	int mem_ok;
	double mem_reg_ns[MEM_WORKERS_MAX]; /* each worker's CPU ns per registration */
	double mem_priv_b[MEM_WORKERS_MAX]; /* its private memory's growth, per series */
};
static struct shm *sh;

struct job {
	const struct fams *f;
	int op, go_fd;
	uint64_t n;
	unsigned off;
	struct wres *out;
	int pair;
};

static void loop_op(int op, const struct handles *hd, uint64_t n, unsigned off)
{
	if (op == OP_ADD)
		loop_add(hd, n, off);
	else
		loop_record(hd, n, off);
}

#define PAIR_BATCH 256

/*
 * A paired run in a worker of the shared tree: odd phases of the TSC (about
 * 0.2 ms, bench_phase_tick) run the loop on the tree's series, even phases
 * the same loop on a private ordinary registry's series made in this
 * process, each side reading its own stretch of the inputs; every worker
 * switches at the same instants. Slow drift of a shared machine hits both
 * sides alike. The private side's totals are checked here.
 */
static void job_pair(const struct job *jb, const struct handles *tree, uint64_t *tree_ops)
{
	struct handles priv, mine;
	struct fams pf;
	struct bench_phases ph;
	pcpu_registry_t *reg = pcpu_registry_create();
	unsigned pos[2] = {jb->off + 777777u, jb->off};
	const struct handles *hd[2] = {&priv, tree};
	uint64_t done = 0;
	int64_t got = 0, want;

	memset(&ph, 0, sizeof ph);
	if (!reg)
		return;
	make_families(reg, &pf);
	if (resolve(&pf, jb->op, &priv) != 0 || resolve(&pf, jb->op, &mine) != 0)
		return;
	loop_op(jb->op, &priv, jb->n / 8 + 1, pos[0]);
	pos[0] += (unsigned)(jb->n / 8 + 1);
	bench_phase_start(&ph, 0);
	while (done < 2 * jb->n) {
		unsigned side = bench_phase_tick(&ph, done);

		loop_op(jb->op, hd[side], PAIR_BATCH, pos[side]);
		pos[side] += PAIR_BATCH;
		done += PAIR_BATCH;
	}
	bench_phase_end(&ph, done);
	jb->out->cpu_ns = ph.cpu_ns[1];
	jb->out->ops = ph.n[1];
	jb->out->cpu2_ns = ph.cpu_ns[0];
	jb->out->ops2 = ph.n[0];
	*tree_ops = ph.n[1];
	want = inputs_sum(jb->op, (pos[0] - jb->off - 777777u) & 0xffffffffu, jb->off + 777777u);
	for (unsigned s = 0; s < NSERIES; s++) {
		if (jb->op == OP_ADD) {
			got += (int64_t)pcpu_counter_fetch(mine.c[s]);
		} else {
			uint64_t counts[32], c;
			int64_t hs;

			pcpu_histogram_read(mine.h[s], counts, pcpu_histogram_nbuckets(mine.h[s]), &c, &hs);
			got += hs;
		}
	}
	jb->out->ok = got == want ? 2 : 0;
	if (!jb->out->ok)
		fprintf(stderr, "paired worker: private registry holds %" PRId64 ", want %" PRId64 "\n",
			got, want);
}

static void job_run(const struct job *jb)
{
	struct handles hd;
	uint64_t warm = jb->n / 8 + 1, t0, t1;
	char c;

	memset(&hd, 0, sizeof hd);
	jb->out->ok = 0;
	if (resolve(jb->f, jb->op, &hd) != 0) {
		fprintf(stderr, "worker: registering: %s\n", pcpu_stats_error());
		__atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELEASE);
		return;
	}
	/* Warm: pages and caches touched, code paged in, before the clock. */
	loop_op(jb->op, &hd, warm, jb->off + 12345);
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELEASE);
	while (read(jb->go_fd, &c, 1) < 0 && errno == EINTR)
		; /* end of file: the master closed the pipe, everyone goes */
	if (jb->pair) {
		uint64_t n = 0;

		job_pair(jb, &hd, &n);
		if (jb->out->ok != 2)
			return;
		jb->out->count = n + warm;
		jb->out->sum = inputs_sum(jb->op, n, jb->off) + inputs_sum(jb->op, warm, jb->off + 12345);
		jb->out->ok = 1;
		return;
	}
	t0 = bench_thread_cpu_ns();
	loop_op(jb->op, &hd, jb->n, jb->off);
	t1 = bench_thread_cpu_ns();
	jb->out->cpu_ns = t1 - t0;
	jb->out->ops = jb->n;
	jb->out->count = jb->n + warm;
	jb->out->sum = inputs_sum(jb->op, jb->n, jb->off) + inputs_sum(jb->op, warm, jb->off + 12345);
	jb->out->ok = 1;
}

static void *job_thread(void *arg)
{
	job_run(arg);
	return NULL;
}

/* Waits until `n` workers are ready, then starts them all at once. */
static void release(int go[2], unsigned n)
{
	uint64_t deadline = bench_now_ns() + 300ull * 1000000000u;

	while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < n) {
		if (bench_now_ns() > deadline)
			bench_die("workers not ready after 300 s (%u of %u)", sh->ready, n);
		bench_sleep_ns(200 * 1000);
	}
	close(go[1]);
}

static void run_workers(int kind, const struct fams *f, int op, unsigned nw, uint64_t n,
			const unsigned *offs)
{
	struct job jobs[BENCH_MAX_THREADS];
	pthread_t tid[BENCH_MAX_THREADS];
	pid_t pid[BENCH_MAX_THREADS];
	int go[2];

	if (pipe(go) != 0)
		bench_die("pipe: %s", strerror(errno));
	sh->ready = 0;
	for (unsigned i = 0; i < nw; i++) {
		jobs[i] = (struct job){f, op, go[0], n, offs[i], &sh->r[i], kind == V_PAIR};
		memset(&sh->r[i], 0, sizeof sh->r[i]);
		if (kind != V_TREE && kind != V_PAIR) {
			tid[i] = bench_thread_start(job_thread, &jobs[i], -1);
			continue;
		}
		fflush(stdout);
		pid[i] = fork();
		if (pid[i] < 0)
			bench_die("fork: %s", strerror(errno));
		if (pid[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(go[1]);
			job_run(&jobs[i]);
			_exit(jobs[i].out->ok ? 0 : 1);
		}
	}
	release(go, nw);
	for (unsigned i = 0; i < nw; i++) {
		int st;

		if (kind != V_TREE && kind != V_PAIR) {
			pthread_join(tid[i], NULL);
			continue;
		}
		if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bench_die("%s worker %u did not exit 0 (status %#x)", v_name[kind], i, st);
	}
	close(go[0]);
}

/* ---- the speed section ---------------------------------------------------------- */

struct variant {
	pcpu_registry_t *reg;
	struct fams f;
	struct handles mine; /* the master's own handles, for the check */
	int have_mine;
	int64_t want_sum[NOP];
	uint64_t want_count;
};
static struct variant var[NV];

/* The totals the master reads equal what the workers added. */
static void check_totals(int kind, int op)
{
	struct variant *v = &var[kind];
	int64_t sum = 0;
	uint64_t count = 0;

	if (!v->have_mine) {
		/* For the tree: series the workers made, found by the master. */
		if (resolve(&v->f, OP_ADD, &v->mine) || resolve(&v->f, OP_RECORD, &v->mine))
			bench_die("master: registering: %s", pcpu_stats_error());
		v->have_mine = 1;
	}
	for (unsigned s = 0; s < NSERIES; s++) {
		if (op == OP_ADD) {
			sum += (int64_t)pcpu_counter_fetch(v->mine.c[s]);
		} else {
			uint64_t counts[32], c;
			int64_t hs;

			if (pcpu_histogram_read(v->mine.h[s], counts,
						pcpu_histogram_nbuckets(v->mine.h[s]), &c, &hs) != 0)
				bench_die("pcpu_histogram_read: %s", strerror(errno));
			sum += hs;
			count += c;
		}
	}
	if (sum != v->want_sum[op] || (op == OP_RECORD && count != v->want_count))
		bench_die("%s, %s: the master reads sum %" PRId64 " count %" PRIu64
			  ", the workers added %" PRId64 " in %" PRIu64,
			  v_name[kind], op_name[op], sum, count, v->want_sum[op], v->want_count);
}

/* One run of one variant; returns CPU ns per operation (paired runs: the
 * tree's side, and *priv the private registry's). */
static double run_variant(int kind, int op, unsigned nw, const unsigned *offs, double *priv)
{
	int v = kind == V_PAIR ? V_TREE : kind;
	uint64_t n = opt.ops / nw, cpu = 0, ops = 0, cpu2 = 0, ops2 = 0;

	run_workers(kind, &var[v].f, op, nw, n, offs);
	for (unsigned i = 0; i < nw; i++) {
		if (!sh->r[i].ok)
			bench_die("%s worker %u failed", v_name[kind], i);
		cpu += sh->r[i].cpu_ns;
		ops += sh->r[i].ops;
		cpu2 += sh->r[i].cpu2_ns;
		ops2 += sh->r[i].ops2;
		var[v].want_sum[op] += sh->r[i].sum;
		if (op == OP_RECORD)
			var[v].want_count += sh->r[i].count;
	}
	check_totals(v, op);
	if (priv)
		*priv = ops2 ? (double)cpu2 / (double)ops2 : NAN;
	return (double)cpu / (double)ops;
}

static void speed_setup(char *dir, size_t len)
{
	make_dir(dir, len);
	for (int k = 0; k < NV; k++) {
		var[k].reg = pcpu_registry_create();
		if (!var[k].reg)
			bench_die("pcpu_registry_create: %s", strerror(errno));
		make_families(var[k].reg, &var[k].f);
	}
	publish(var[V_TREE].reg, dir, "prefork-tree", PCPU_SEGMENT_SHARED_TREE);
	publish(var[V_PUB].reg, dir, "prefork-pub", 0);
	/* The ordinary registries: the master's handles now (the threads find
	 * the same series). The tree's come after its workers made them. */
	for (int k = 0; k < NV; k++)
		if (k != V_TREE) {
			if (resolve(&var[k].f, OP_ADD, &var[k].mine) ||
			    resolve(&var[k].f, OP_RECORD, &var[k].mine))
				bench_die("registering: %s", pcpu_stats_error());
			var[k].have_mine = 1;
		}
}

static void speed_print(double (*t)[NOP][NKIND][MAX_ROUNDS])
{
	struct tbl tb;
	char b[4][96];
	int pass = 1;

	printf("CPU ns per operation per worker (median over %u rounds, (min–max)); ratios: median "
	       "of the per-round ratios (min–max) [95%% CI of the median]\n\n", opt.rounds);
	tbl_init(&tb, 6);
	tbl_headers(&tb, "operation", "W", "1 process, W threads", "W processes, shared tree",
		    "tree / threads", "published ordinary / threads", NULL);
	for (int op = 0; op < NOP; op++)
		for (unsigned w = 0; w < opt.nworkers; w++) {
			double r1[MAX_ROUNDS], r2[MAX_ROUNDS];
			struct bench_stat s1, s2;

			for (unsigned r = 0; r < opt.rounds; r++) {
				r1[r] = t[w][op][V_TREE][r] / t[w][op][V_THREADS][r];
				r2[r] = t[w][op][V_PUB][r] / t[w][op][V_THREADS][r];
			}
			s1 = bench_stat_of(r1, opt.rounds);
			s2 = bench_stat_of(r2, opt.rounds);
			if (!(s1.med <= 1.05))
				pass = 0;
			tbl_cell(&tb, "%s", op_name[op]);
			tbl_cell(&tb, "%u", opt.workers[w]);
			tbl_cell(&tb, "%s", bench_fmt_stat(b[0], sizeof b[0],
						  bench_stat_of(t[w][op][V_THREADS], opt.rounds)));
			tbl_cell(&tb, "%s", bench_fmt_stat(b[1], sizeof b[1],
						  bench_stat_of(t[w][op][V_TREE], opt.rounds)));
			tbl_cell(&tb, "%s", bench_fmt_ratio(b[2], sizeof b[2], s1, 3));
			tbl_cell(&tb, "%s", bench_fmt_ratio(b[3], sizeof b[3], s2, 3));
		}
	tbl_print(&tb);
	printf("\nTarget: add/record in a worker of a shared registry <= 1.05x the same in a single "
	       "process with the CPU index (median ratio, every W): %s\n\n", pass ? "PASS" : "MISS");
}

static void pair_print(double (*t)[NOP][NKIND][MAX_ROUNDS], double (*pp)[NOP][MAX_ROUNDS])
{
	struct tbl tb;
	char b[3][96];
	int pass = 1;

	printf("Paired in time, in each of W worker processes of the shared tree: the same loop "
	       "on the tree's series (odd TSC phases, ~0.2 ms) and on a private ordinary "
	       "registry's series made in the worker (even phases); CPU ns per operation, "
	       "median over rounds; ratio: median of the per-round ratios\n\n");
	tbl_init(&tb, 5);
	tbl_headers(&tb, "operation", "W", "private registry (same process)", "shared tree",
		    "tree / private", NULL);
	for (int op = 0; op < NOP; op++)
		for (unsigned w = 0; w < opt.nworkers; w++) {
			double rr[MAX_ROUNDS];
			struct bench_stat st;

			for (unsigned r = 0; r < opt.rounds; r++)
				rr[r] = t[w][op][V_PAIR][r] / pp[w][op][r];
			st = bench_stat_of(rr, opt.rounds);
			if (!(st.med <= 1.05))
				pass = 0;
			tbl_cell(&tb, "%s", op_name[op]);
			tbl_cell(&tb, "%u", opt.workers[w]);
			tbl_cell(&tb, "%s", bench_fmt_stat(b[0], sizeof b[0],
						  bench_stat_of(pp[w][op], opt.rounds)));
			tbl_cell(&tb, "%s", bench_fmt_stat(b[1], sizeof b[1],
						  bench_stat_of(t[w][op][V_PAIR], opt.rounds)));
			tbl_cell(&tb, "%s", bench_fmt_ratio(b[2], sizeof b[2], st, 3));
		}
	tbl_print(&tb);
	printf("\nTarget, paired: the same operation on the tree <= 1.05x on a private registry, "
	       "in the same worker (median ratio, every W): %s\n\n", pass ? "PASS" : "MISS");
}

static void speed(void)
{
	static double t[BENCH_MAX_LIST][NOP][NKIND][MAX_ROUNDS];
	static double pp[BENCH_MAX_LIST][NOP][MAX_ROUNDS]; /* paired: private side */
	struct bench_usage u;
	char dir[64];
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	speed_setup(dir, sizeof dir);
	printf("## Speed: a worker of a shared registry against threads of one process\n\n");
	printf("%" PRIu64 " operations per variant (split between its W workers), %u rounds, "
	       "%d labelled series, random series and values; slots: %s, %u\n\n",
	       opt.ops, opt.rounds, NSERIES, bench_index_name(bench_process_index()), pcpu_nslots());
	bench_machine_usage(&u);
	for (unsigned r = 0; r < opt.rounds; r++)
		for (unsigned w = 0; w < opt.nworkers; w++)
			for (int op = 0; op < NOP; op++) {
				unsigned offs[BENCH_MAX_THREADS], nw = opt.workers[w];

				/* The same random inputs for the four variants. */
				for (unsigned i = 0; i < nw; i++)
					offs[i] = (unsigned)bench_xorshift(&rng) & (NRAND - 1);
				for (int k = 0; k < NKIND; k++) {
					int kind = (int)((r + (unsigned)k + w + (unsigned)op) % NKIND);

					t[w][op][kind][r] = run_variant(kind, op, nw, offs,
									kind == V_PAIR ? &pp[w][op][r] : NULL);
				}
			}
	speed_print(t);
	pair_print(t, pp);
	bench_print_usage("speed section", &u);
	pcpu_registry_destroy(var[V_TREE].reg);
	pcpu_registry_destroy(var[V_PUB].reg);
	pcpu_registry_destroy(var[V_THREADS].reg);
	remove_dir(dir);
}

/* ---- the groups section -------------------------------------------------------- */

static __attribute__((noinline)) void loop_group(pcpu_group_t *const *g, uint64_t n, unsigned off)
{
	for (uint64_t i = 0; i < n; i++) {
		unsigned j = (off + (unsigned)i) & (NRAND - 1);

		pcpu_group_add2(g[in_idx[j]], 0, 1, in_add[j]);
	}
}

static void groups(void)
{
	static double t[2][MAX_ROUNDS], ratio[MAX_ROUNDS];
	static const char *const lnames[] = {"path"};
	static const char *const kname[2] = {"ordinary registry (rseq lane)",
					     "shared registry (tagged lanes)"};
	pcpu_group_t *g[2][NSERIES];
	int64_t want[2][2] = {{0, 0}, {0, 0}};
	uint64_t rng = 0x2545f4914f6cdd1dull, n = opt.ops;
	char dir[2][64];

	for (int k = 0; k < 2; k++) {
		pcpu_registry_t *reg = pcpu_registry_create();
		struct pcpu_family_desc m[2];
		pcpu_group_family_t *gf;

		make_dir(dir[k], sizeof dir[k]);
		if (!reg || !publish(reg, dir[k], "groups", k ? PCPU_SEGMENT_SHARED_TREE : 0))
			bench_die("groups: registry %d", k);
		memset(m, 0, sizeof m);
		m[0].name = "flow_packets";
		m[1].name = "flow_bytes";
		for (int i = 0; i < 2; i++) {
			m[i].type = PCPU_METRIC_COUNTER;
			m[i].nlabels = 1;
			m[i].label_names = lnames;
		}
		gf = pcpu_registry_group(reg, m, 2);
		for (unsigned s = 0; gf && s < NSERIES; s++) {
			const char *v[1] = {label[s]};

			g[k][s] = pcpu_group_family_series(gf, v);
			if (!g[k][s])
				gf = NULL;
		}
		if (!gf)
			bench_die("groups: %s", pcpu_stats_error());
	}
	printf("\n## Groups: a consistent pair's update, shared registry against ordinary\n\n"
	       "%" PRIu64 " updates per variant and round, %u rounds, one process\n\n", n, opt.rounds);
	for (unsigned r = 0; r < opt.rounds; r++) {
		unsigned off = (unsigned)bench_xorshift(&rng) & (NRAND - 1);

		for (int i = 0; i < 2; i++) {
			int k = (int)((r + (unsigned)i) % 2);
			uint64_t t0;

			loop_group(g[k], 1024, off); /* warm */
			want[k][0] += 1024;
			want[k][1] += inputs_sum(OP_ADD, 1024, off);
			t0 = bench_thread_cpu_ns();
			loop_group(g[k], n, off);
			t[k][r] = (double)(bench_thread_cpu_ns() - t0) / (double)n;
			want[k][0] += (int64_t)n;
			want[k][1] += inputs_sum(OP_ADD, n, off);
		}
		ratio[r] = t[1][r] / t[0][r];
	}
	for (int k = 0; k < 2; k++) {
		int64_t got[2] = {0, 0}, v[2];

		for (unsigned s = 0; s < NSERIES; s++) {
			if (pcpu_group_read(g[k][s], 0, v) != 0)
				bench_die("groups: read: %s", strerror(errno));
			got[0] += v[0];
			got[1] += v[1];
		}
		if (got[0] != want[k][0] || got[1] != want[k][1])
			bench_die("groups: %s: totals %" PRId64 "/%" PRId64 ", want %" PRId64 "/%" PRId64,
				  kname[k], got[0], got[1], want[k][0], want[k][1]);
		printf("%-32s %8.2f ns per update (median of %u rounds)\n", kname[k],
		       bench_median(t[k], opt.rounds), opt.rounds);
	}
	printf("shared / ordinary: %.2fx (median of per-round ratios); totals exact\n",
	       bench_median(ratio, opt.rounds));
	for (int k = 0; k < 2; k++)
		remove_dir(dir[k]);
}

/* ---- the memory section ------------------------------------------------------- */

static double file_bytes(const char *path, double *size)
{
	struct stat st;

	if (stat(path, &st) != 0)
		bench_die("stat %s: %s", path, strerror(errno));
	if (size)
		*size = (double)st.st_size;
	return (double)st.st_blocks * 512.0;
}

/* Private_Dirty of this process (/proc/self/smaps_rollup), bytes: its own
 * memory, copies on write of its parent's pages included; -1 if unknown. */
static double private_dirty(void)
{
	char line[256];
	double kb = -1;
	FILE *f = fopen("/proc/self/smaps_rollup", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "Private_Dirty:", 14))
			kb = strtod(line + 14, NULL);
	fclose(f);
	return kb * 1024;
}

/* Registers (or finds) counters id 0..n-1 in a random order, adds 1 to each. */
static int touch_all(pcpu_family_t *f, unsigned n, uint64_t seed)
{
	unsigned *perm = bench_xmalloc(n * sizeof *perm);

	for (unsigned i = 0; i < n; i++)
		perm[i] = i;
	for (unsigned i = n; i > 1; i--) {
		unsigned j = (unsigned)(bench_xorshift(&seed) % i), x = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = x;
	}
	for (unsigned i = 0; i < n; i++) {
		char id[16];
		const char *v[1] = {id};
		pcpu_counter_t c;

		snprintf(id, sizeof id, "%u", perm[i]);
		c = pcpu_family_counter(f, v);
		if (!c)
			return -1;
		pcpu_counter_add(c, 1);
	}
	free(perm);
	return 0;
}

/* The counters' values and the series the reader sees. */
static int mem_verify(pcpu_family_t *f, const char *dir, const char *name, unsigned n,
		      uint64_t want)
{
	struct pcpu_reader_options ro;
	struct pcpu_reader_snapshot *s = NULL;
	pcpu_reader_t *r;
	int ok = 1;

	for (unsigned i = 0; i < n; i++) {
		char id[16];
		const char *v[1] = {id};
		pcpu_counter_t c;

		snprintf(id, sizeof id, "%u", i);
		c = pcpu_family_counter(f, v);
		if (!c || pcpu_counter_fetch(c) != want) {
			fprintf(stderr, "counter %u: %" PRIu64 ", want %" PRIu64 "\n", i,
				c ? pcpu_counter_fetch(c) : 0, want);
			ok = 0;
			break;
		}
	}
	memset(&ro, 0, sizeof ro);
	ro.dir = dir;
	r = pcpu_reader_open(name, &ro);
	if (!r || pcpu_reader_snapshot(r, 0, &s) != 0)
		bench_die("reader: %s", pcpu_reader_error());
	sh->mem_nslots = pcpu_reader_nslots(r);
	sh->mem_nseries = 0;
	for (size_t fi = 0; fi < s->snapshot.nfamilies; fi++)
		sh->mem_nseries += (unsigned)s->snapshot.families[fi].nseries;
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	return ok && sh->mem_nseries == n;
}

/* One configuration in a fresh process: nw workers of a shared registry, or
 * (nw == 0) one process and an ordinary published registry. */
static void mem_config(unsigned nw, unsigned n)
{
	static const char *const lnames[] = {"id"};
	struct pcpu_family_desc d;
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg;
	pcpu_family_t *f;
	char dir[64];
	const char *path;

	make_dir(dir, sizeof dir);
	memset(&d, 0, sizeof d);
	d.name = "items";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = lnames;
	if (!reg || !(f = pcpu_registry_family(reg, &d)))
		bench_die("registry: %s", pcpu_stats_error());
	seg = publish(reg, dir, "prefork-mem", nw ? PCPU_SEGMENT_SHARED_TREE : 0);
	path = pcpu_segment_path(seg);
	sh->mem_b0 = file_bytes(path, NULL);
	if (nw == 0) {
		uint64_t t0 = bench_thread_cpu_ns();
		double p0 = private_dirty();

		if (touch_all(f, n, 1) != 0)
			bench_die("registering: %s", pcpu_stats_error());
		sh->mem_reg_ns[0] = (double)(bench_thread_cpu_ns() - t0) / n;
		sh->mem_priv_b[0] = (private_dirty() - p0) / n;
	}
	for (unsigned i = 0; i < nw; i++) {
		pid_t pid = fork();

		if (pid < 0)
			bench_die("fork: %s", strerror(errno));
		if (pid == 0) {
			uint64_t t0 = bench_thread_cpu_ns();
			double p0 = private_dirty();
			int rc;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			rc = touch_all(f, n, 1000 + i);
			sh->mem_reg_ns[i] = (double)(bench_thread_cpu_ns() - t0) / n;
			sh->mem_priv_b[i] = (private_dirty() - p0) / n;
			_exit(rc == 0 ? 0 : 1);
		}
	}
	for (unsigned i = 0; i < nw; i++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bench_die("memory worker failed (status %#x)", st);
	}
	sh->mem_b1 = file_bytes(path, &sh->mem_size);
	sh->mem_ok = mem_verify(f, dir, "prefork-mem", n, nw ? nw : 1);
	pcpu_registry_destroy(reg);
	remove_dir(dir);
}

static void memory(void)
{
	unsigned conf[MEM_MAX + 1], nconf = 0;
	struct tbl tb;
	char b[64];

	conf[nconf++] = 0;
	for (unsigned i = 0; i < opt.nmem; i++)
		conf[nconf++] = opt.mem_workers[i];
	printf("## Memory: the segment file's allocated size, %u counters every worker touches\n\n",
	       opt.series);
	tbl_init(&tb, 8);
	tbl_headers(&tb, "configuration", "slots", "series seen", "file allocated, bytes",
		    "bytes per counter", "file size (apparent)",
		    "CPU µs per registration + add, per worker: median (min–max)",
		    "worker's private memory per series, bytes: median", NULL);
	for (unsigned k = 0; k < nconf; k++) {
		pid_t pid;
		int st;

		fflush(stdout);
		pid = fork();
		if (pid < 0)
			bench_die("fork: %s", strerror(errno));
		if (pid == 0) {
			mem_config(conf[k], opt.series);
			_exit(0);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bench_die("memory configuration %u failed", conf[k]);
		if (!sh->mem_ok)
			bench_die("memory configuration %u: wrong values or %u series, not %u",
				  conf[k], sh->mem_nseries, opt.series);
		if (conf[k])
			tbl_cell(&tb, "shared tree, %u workers", conf[k]);
		else
			tbl_cell(&tb, "ordinary segment, 1 process");
		tbl_cell(&tb, "%u", sh->mem_nslots);
		tbl_cell(&tb, "%u", sh->mem_nseries);
		tbl_cell(&tb, "%s", bench_fmt_num(b, sizeof b, sh->mem_b1 - sh->mem_b0));
		tbl_cell(&tb, "%.0f", (sh->mem_b1 - sh->mem_b0) / opt.series);
		tbl_cell(&tb, "%s", bench_fmt_num(b, sizeof b, sh->mem_size));
		for (unsigned i = 0; i < (conf[k] ? conf[k] : 1); i++)
			sh->mem_reg_ns[i] /= 1000.0;
		tbl_cell(&tb, "%s", bench_fmt_stat(b, sizeof b,
					   bench_stat_of(sh->mem_reg_ns, conf[k] ? conf[k] : 1)));
		tbl_cell(&tb, "%.0f", bench_median(sh->mem_priv_b, conf[k] ? conf[k] : 1));
	}
	tbl_print(&tb);
	printf("\n(allocated: st_blocks * 512 after the workers exited, less the same right after "
	       "publication; every counter checked equal to the worker count. Of the bytes per "
	       "counter, 2 x slots x 8 are its values (a slot and a mirror copy per slot), the "
	       "rest its directory entry: name, label value. A worker's private memory: the "
	       "growth of its Private_Dirty (smaps_rollup) while it registers: its own tables "
	       "of the series it knows, and copies of its parent's pages it wrote)\n\n");
}

/* ---- --anchor: bench/prefork_anchor.py's pcpu side ----------------------------- */

struct anchor_res {
	uint64_t inc_ns, lookup_ns, rec_ns, n;
} BENCH_ALIGNED;

static void anchor_worker(const struct fams *f, uint64_t n, unsigned id, int go_fd,
			  struct anchor_res *out)
{
	pcpu_counter_t c[NANCHOR];
	pcpu_histogram_t *h[NANCHOR];
	unsigned off = (id * 7919u) & (NRAND - 1);
	uint64_t t0;
	char ch;

	for (unsigned s = 0; s < NANCHOR; s++) {
		const char *v[1] = {label[s]};

		c[s] = pcpu_family_counter(f->req, v);
		h[s] = pcpu_family_histogram(f->lat, v);
		if (!c[s] || !h[s]) {
			fprintf(stderr, "anchor worker: %s\n", pcpu_stats_error());
			__atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELEASE);
			_exit(1);
		}
	}
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELEASE);
	while (read(go_fd, &ch, 1) < 0 && errno == EINTR)
		;
	t0 = bench_thread_cpu_ns();
	for (uint64_t i = 0; i < n; i++)
		pcpu_counter_inc(c[in_idx[(off + i) & (NRAND - 1)] % NANCHOR]);
	out->inc_ns = bench_thread_cpu_ns() - t0;
	t0 = bench_thread_cpu_ns();
	for (uint64_t i = 0; i < n; i++) {
		const char *v[1] = {label[in_idx[(off + i) & (NRAND - 1)] % NANCHOR]};

		pcpu_counter_inc(pcpu_family_counter(f->req, v));
	}
	out->lookup_ns = bench_thread_cpu_ns() - t0;
	t0 = bench_thread_cpu_ns();
	for (uint64_t i = 0; i < n; i++) {
		unsigned j = (off + (unsigned)i) & (NRAND - 1);

		pcpu_histogram_record(h[in_idx[j] % NANCHOR], in_ns[j]);
	}
	out->rec_ns = bench_thread_cpu_ns() - t0;
	out->n = n;
	_exit(0);
}

static int anchor(unsigned nw)
{
	struct anchor_res *res = (struct anchor_res *)sh->r; /* fits: BENCH_MAX_THREADS */
	pcpu_registry_t *reg = pcpu_registry_create();
	struct fams f;
	pcpu_segment_t *seg;
	uint64_t n = opt.ops, inc = 0, lk = 0, rec = 0, total = 0, hcount = 0;
	int go[2];
	char buf[64];

	if (!reg || !opt.dir || nw == 0 || nw > BENCH_MAX_THREADS)
		bench_die("--anchor W needs --dir and 1 <= W <= %d", BENCH_MAX_THREADS);
	make_families(reg, &f);
	seg = publish(reg, opt.dir, opt.name, PCPU_SEGMENT_SHARED_TREE);
	if (pipe(go) != 0)
		bench_die("pipe: %s", strerror(errno));
	sh->ready = 0;
	for (unsigned i = 0; i < nw; i++) {
		pid_t pid = fork();

		if (pid < 0)
			bench_die("fork: %s", strerror(errno));
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(go[1]);
			anchor_worker(&f, n, i, go[0], &res[i]);
		}
	}
	release(go, nw);
	for (unsigned i = 0; i < nw; i++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bench_die("anchor worker failed (status %#x)", st);
	}
	for (unsigned i = 0; i < nw; i++) {
		inc += res[i].inc_ns;
		lk += res[i].lookup_ns;
		rec += res[i].rec_ns;
	}
	/* The master's read: every increment and record is there. */
	for (unsigned s = 0; s < NANCHOR; s++) {
		const char *v[1] = {label[s]};
		uint64_t counts[32], c;
		int64_t sum;
		pcpu_histogram_t *h = pcpu_family_histogram(f.lat, v);

		total += pcpu_counter_fetch(pcpu_family_counter(f.req, v));
		if (!h || pcpu_histogram_read(h, counts, pcpu_histogram_nbuckets(h), &c, &sum) != 0)
			bench_die("histogram read");
		hcount += c;
	}
	printf("anchor workers=%u ops=%" PRIu64 " inc_ns=%.2f lookup_inc_ns=%.2f observe_ns=%.2f "
	       "requests=%" PRIu64 " observations=%" PRIu64 " ok=%d segment=%s\n",
	       nw, n, (double)inc / (double)(n * nw), (double)lk / (double)(n * nw),
	       (double)rec / (double)(n * nw), total, hcount,
	       total == 2 * n * nw && hcount == n * nw, pcpu_segment_path(seg));
	fflush(stdout);
	/* Published until the script is done with it (stdin closed). */
	while (fgets(buf, sizeof buf, stdin))
		;
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	return total == 2 * n * nw && hcount == n * nw ? 0 : 1;
}

/* ---- options, main -------------------------------------------------------------- */

static void parse(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--quick")) {
			opt.rounds = 5;
			opt.ops = 1u << 21;
			opt.series = 2000;
		} else if (!strcmp(a, "--smoke")) {
			opt.rounds = 2;
			opt.ops = 1u << 14;
			opt.series = 200;
			opt.mem_workers[1] = 8;
		} else if (!strcmp(a, "--speed-only")) {
			opt.memory = opt.groups = 0;
		} else if (!strcmp(a, "--memory-only")) {
			opt.speed = opt.groups = 0;
		} else if (!strcmp(a, "--groups-only")) {
			opt.speed = opt.memory = 0;
		} else if (v && !strcmp(a, "--rounds")) {
			opt.rounds = (unsigned)atoi(v), i++;
		} else if (v && !strcmp(a, "--ops")) {
			opt.ops = strtoull(v, NULL, 0), i++;
		} else if (v && !strcmp(a, "--series")) {
			opt.series = (unsigned)atoi(v), i++;
		} else if (v && !strcmp(a, "--workers")) {
			opt.nworkers = bench_parse_counts(a, v, opt.workers, BENCH_MAX_LIST, BENCH_MAX_THREADS), i++;
		} else if (v && !strcmp(a, "--mem-workers")) {
			opt.nmem = bench_parse_counts(a, v, opt.mem_workers, MEM_MAX, BENCH_MAX_THREADS), i++;
		} else if (v && !strcmp(a, "--anchor")) {
			opt.anchor = (unsigned)atoi(v), i++;
		} else if (v && !strcmp(a, "--dir")) {
			opt.dir = v, i++;
		} else if (v && !strcmp(a, "--name")) {
			opt.name = v, i++;
		} else {
			fprintf(stderr, "usage: %s [--quick|--smoke] [--rounds N] [--ops N] "
					"[--workers 1,2,4,16] [--series N] [--mem-workers 2,64] "
					"[--speed-only|--memory-only|--groups-only]\n"
					"       %s --anchor W --dir DIR [--name NAME] [--ops N]\n",
				argv[0], argv[0]);
			exit(2);
		}
	}
	if (opt.rounds < 1 || opt.rounds > MAX_ROUNDS || opt.ops < 1 || opt.series < 1)
		bench_die("bad --rounds (1..%d), --ops or --series", MAX_ROUNDS);
}

int main(int argc, char **argv)
{
	const char *idx = getenv("PCPU_INDEX");

	if (!idx || strcmp(idx, "cpu") != 0) {
		/* A shared registry needs CPU-number slots: the process must
		 * start with them. */
		setenv("PCPU_INDEX", "cpu", 1);
		execv("/proc/self/exe", argv);
		bench_die("execv /proc/self/exe: %s", strerror(errno));
	}
	bench_opt.argc = argc;
	bench_opt.argv = argv;
	bench_ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	parse(argc, argv);
	inputs_init();
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	if (opt.anchor)
		return anchor(opt.anchor);
	printf("# pcpu_bench_prefork: a shared registry (PCPU_SEGMENT_SHARED_TREE) in pre-fork "
	       "workers\n\n%u CPUs online, rseq mode %s, slots %s x %u\n\n", bench_ncpu,
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), bench_index_name(bench_process_index()),
	       pcpu_nslots());
	if (opt.memory)
		memory(); /* first: its processes fork from a master with no tree */
	if (opt.speed)
		speed();
	if (opt.groups)
		groups();
	return 0;
}
