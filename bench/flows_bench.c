/* SPDX-License-Identifier: MIT */
/*
 * pcpu_bench_flows: counters for millions of flows (pcpu/flows.h, issue 61)
 * in DPDK's data-plane benchmark (seed 004, "Performance Comparison"),
 * scaled from 1,024 to 10^6 flows, beside the seed's patterns, in one run.
 *
 * The simulated application: W workers (--workers, default the online
 * CPUs), unpinned; each packet updates the 2 counters (packets, bytes) of
 * one flow, and with --globals also 2 global counters (total packets and
 * bytes). Flow affinity: worker w serves the flows f with f mod W == w and
 * picks one of them at random per packet; 1 packet in 100 goes to a flow
 * chosen among all (mostly another worker's: a migration). No dummy work
 * per packet (the seed's 1000 cycles hide every pattern below the noise of
 * a shared virtual machine, bench/dataplane.md): the loop is the random
 * draw, the flow and length computation, and the updates.
 *
 * Variants (the same flows, counters and draws):
 *   none          the loop without statistics: the reference;
 *   pcpu_flows    pcpu_flows_add() x 2 (globals: pcpu_counter_add() x 2);
 *   pcpu_counter  pcpu_counter_add() x 2 on a counter array of 2 x flows
 *                 (pcpu_counter_alloc_array()): 16 MB per writing CPU slot;
 *   per_core      the seed's Per Core: a thread-private array of 2 x flows
 *                 words per worker, relaxed load and store (16 MB each);
 *   buffered      the seed's Shared Buffered: a thread-private buffer of
 *                 (address, value) pairs, 32 packets' worth, applied to one
 *                 shared array under one spinlock when full;
 *   atomic        a shared array, one atomic add per update.
 * Round r runs every variant once, starting from variant r (drift hits them
 * alike); each run is --packets P packets per worker after a barrier. A
 * run's figure is the workers' CPU time (CLOCK_THREAD_CPUTIME_ID) per
 * packet; ns per update = (variant - none) / updates per packet. Medians
 * over --rounds, and per-round ratios pcpu_flows / pcpu_counter. Every run
 * checks its totals (the sum of every packet and byte counter).
 *
 * Memory (--memory): each variant in a fresh process per slot count
 * (PCPU_NSLOTS=2, 64, 256: more possible CPUs than the machine has, with
 * its present ones; PCPU_INDEX=cpu, worker w pinned to the w-th CPU, so
 * that W workers write min(W, CPUs) slots), which runs the workers once
 * without statistics, creates its counters, runs them once with, and
 * reports the growth of its resident memory (Rss of
 * /proc/self/smaps_rollup) in between. With --published, pcpu_flows' table
 * is published (pcpu_segment_flows_create(): its words in a segment's
 * file, in $PCPU_SEGMENT_DIR or the per-user directory of /dev/shm), and
 * the file's allocated bytes (st_blocks) are reported beside the Rss
 * growth (the file's pages the process maps count in both).
 *
 * Options: --flows N (10^6), --workers W, --packets P (4 x 10^6), --rounds
 * R (7), --buffer B (pcpu_flows' entries per slot, 0: default), --globals,
 * --blocked (worker w's flows are one block, w x N / W onwards, instead of
 * every W-th flow), --flusher-us U (a thread flushes pcpu_flows every U
 * us while its workers run: the drains move there; its CPU is printed
 * apart), --memory, --published, --only VARIANT, --quick (3 rounds of 10^6 packets,
 * memory at 10^6 packets).
 */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>

#include <pcpu/segment.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct bench_opts bench_opt;
unsigned bench_ncpu;
double bench_tsc_ghz;

enum variant { V_NONE, V_FLOWS, V_COUNTER, V_PERCORE, V_BUFFERED, V_ATOMIC, V_N };
static const char *const vname[V_N] = { "none", "pcpu_flows", "pcpu_counter", "per_core",
					 "buffered", "atomic" };
static const char *const vdesc[V_N] = {
	"no statistics (the reference loop)",
	"pcpu_flows_add() x 2",
	"pcpu_counter_add() x 2, a counter array of 2 x flows",
	"Per Core: thread-private array per worker",
	"Shared Buffered: 32 packets per thread, applied under a spinlock",
	"shared atomic add",
};

#define MAX_WORKERS 64
#define MAX_ROUNDS 64
#define BUF_PAIRS 64 /* Shared Buffered: 32 packets x 2 updates */

static struct {
	size_t nflows;
	unsigned workers;
	uint64_t packets;
	unsigned rounds;
	unsigned buffer;
	int globals;
	int blocked; /* worker w's flows: w x nflows / W onwards (else f mod W == w) */
	unsigned flusher_us; /* nonzero: a thread flushes pcpu_flows this often */
	int memory;
	int only; /* -1: all */
	const char *mem_child; /* variant name: this process measures its memory */
	int published; /* --published: pcpu_flows' table in a segment */
} opt = { 1000000, 0, 4000000, 7, 0, 0, 0, 0, 0, -1, NULL, 0 };

/* --published: the registry and segment that hold pcpu_flows' table, and
 * how long making the table took (its pages allocated in the file). */
static pcpu_registry_t *pub_reg;
static pcpu_segment_t *pub_seg;
static uint64_t pub_create_ns;

/* The counters of every variant. */
static pcpu_flows_t *flows;
static pcpu_counter_t carr;          /* 2 x nflows counters */
static pcpu_counter_t cglob;         /* 2 global counters (pcpu variants) */
static uint64_t *percore[MAX_WORKERS]; /* per worker: 2 x nflows + 2 words */
static uint64_t *shared[V_N];        /* buffered's and atomic's: 2 x nflows + 2 words */
static int shared_lock;

struct bufpair {
	uint64_t *addr;
	uint64_t v;
};

struct worker {
	pthread_t t;
	unsigned w;
	uint64_t seed;
	uint64_t cpu_ns;
	uint64_t pkts, bytes; /* what it added, for the check */
	struct bufpair buf[BUF_PAIRS];
	unsigned nbuf;
} BENCH_ALIGNED;

static struct worker workers[MAX_WORKERS];
static pthread_barrier_t start_barrier, end_barrier;
static int run_variant = -1; /* what the workers run next; V_N: exit */
static double flusher_ns_per_packet[MAX_ROUNDS]; /* the flusher's CPU, per run */
static unsigned flusher_runs;

BENCH_INLINE void buffered_flush(struct worker *wk)
{
	bench_spin_lock(&shared_lock);
	for (unsigned i = 0; i < wk->nbuf; i++)
		*wk->buf[i].addr += wk->buf[i].v;
	bench_spin_unlock(&shared_lock);
	wk->nbuf = 0;
}

BENCH_INLINE void buffered_add(struct worker *wk, uint64_t *addr, uint64_t v)
{
	wk->buf[wk->nbuf].addr = addr;
	wk->buf[wk->nbuf].v = v;
	if (++wk->nbuf == BUF_PAIRS)
		buffered_flush(wk);
}

BENCH_INLINE void percore_add(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

/* One run of variant V by worker wk: the draw, then the updates. */
#define LOOP(V, UPDATE)                                                         \
	do {                                                                    \
		for (uint64_t i = 0; i < n; i++) {                              \
			uint64_t r = bench_xorshift(&rng);                      \
			size_t flow = r % 100 == 0 ? (size_t)((r >> 8) % nf)      \
						     : blocked ? w * own + (size_t)((r >> 8) % own) \
						     : (size_t)((r >> 8) % own) * W + w; \
			uint64_t len = 64 + ((r >> 44) & 1023);                 \
                                                                                \
			UPDATE;                                                 \
			pk++;                                                   \
			by += len;                                              \
		}                                                               \
	} while (0)

static void run_one(struct worker *wk, int v)
{
	uint64_t rng = wk->seed, n = opt.packets, pk = 0, by = 0;
	size_t nf = opt.nflows, W = opt.workers, w = wk->w, own = nf / W;
	int g = opt.globals, blocked = opt.blocked;
	uint64_t *pc = percore[w], *sb = shared[V_BUFFERED], *sa = shared[V_ATOMIC];
	uint64_t t0 = bench_thread_cpu_ns();

	switch (v) {
	case V_NONE:
		LOOP(V, __asm__ volatile("" : : "r"(flow), "r"(len)));
		break;
	case V_FLOWS:
		LOOP(V, {
			pcpu_flows_add(flows, flow, 0, 1);
			pcpu_flows_add(flows, flow, 1, len);
			if (g) {
				pcpu_counter_add(cglob, 1);
				pcpu_counter_add(cglob + 1, (int64_t)len);
			}
		});
		break;
	case V_COUNTER:
		LOOP(V, {
			pcpu_counter_add(carr + 2 * flow, 1);
			pcpu_counter_add(carr + 2 * flow + 1, (int64_t)len);
			if (g) {
				pcpu_counter_add(cglob, 1);
				pcpu_counter_add(cglob + 1, (int64_t)len);
			}
		});
		break;
	case V_PERCORE:
		LOOP(V, {
			percore_add(pc + 2 * flow, 1);
			percore_add(pc + 2 * flow + 1, len);
			if (g) {
				percore_add(pc + 2 * nf, 1);
				percore_add(pc + 2 * nf + 1, len);
			}
		});
		break;
	case V_BUFFERED:
		LOOP(V, {
			buffered_add(wk, sb + 2 * flow, 1);
			buffered_add(wk, sb + 2 * flow + 1, len);
			if (g) {
				buffered_add(wk, sb + 2 * nf, 1);
				buffered_add(wk, sb + 2 * nf + 1, len);
			}
		});
		if (wk->nbuf)
			buffered_flush(wk);
		break;
	case V_ATOMIC:
		LOOP(V, {
			__atomic_fetch_add(sa + 2 * flow, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(sa + 2 * flow + 1, len, __ATOMIC_RELAXED);
			if (g) {
				__atomic_fetch_add(sa + 2 * nf, 1, __ATOMIC_RELAXED);
				__atomic_fetch_add(sa + 2 * nf + 1, len, __ATOMIC_RELAXED);
			}
		});
		break;
	}
	wk->cpu_ns = bench_thread_cpu_ns() - t0;
	wk->seed = rng;
	wk->pkts += pk;
	wk->bytes += by;
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;

	for (;;) {
		int v;

		pthread_barrier_wait(&start_barrier);
		v = __atomic_load_n(&run_variant, __ATOMIC_ACQUIRE);
		if (v == V_N)
			return NULL;
		run_one(wk, v);
		pthread_barrier_wait(&end_barrier);
	}
}

static void alloc_variant(int v)
{
	size_t nf = opt.nflows;
	struct pcpu_flows_attr a;

	switch (v) {
	case V_FLOWS:
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.buffer = opt.buffer;
		if (opt.published) {
			static const char *const names[] = { "packets", "bytes" };

			pub_reg = pcpu_registry_create();
			pub_seg = pub_reg ? pcpu_segment_publish(pub_reg, "flows_bench", NULL) : NULL;
			if (!pub_seg)
				bench_die("pcpu_segment_publish: %s", pcpu_segment_error());
			pub_create_ns = bench_now_ns();
			flows = pcpu_segment_flows_create(pub_seg, "flow_traffic", "Per-flow traffic.", nf,
							  2, names, &a);
			pub_create_ns = bench_now_ns() - pub_create_ns;
			if (!flows)
				bench_die("pcpu_segment_flows_create: %s", pcpu_segment_error());
		} else
			flows = pcpu_flows_create(nf, 2, &a);
		if (!flows)
			bench_die("pcpu_flows_create: %s", strerror(errno));
		/* fall through: the globals */
		__attribute__((fallthrough));
	case V_COUNTER:
		if (!cglob && !(cglob = pcpu_counter_alloc_array(2)))
			bench_die("pcpu_counter_alloc_array: %s", strerror(errno));
		if (v == V_COUNTER && !(carr = pcpu_counter_alloc_array(2 * nf)))
			bench_die("pcpu_counter_alloc_array(%zu): %s", 2 * nf, strerror(errno));
		break;
	case V_PERCORE:
		for (unsigned w = 0; w < opt.workers; w++)
			if (!(percore[w] = calloc(2 * nf + 2, sizeof(uint64_t))))
				bench_die("out of memory");
		break;
	case V_BUFFERED:
	case V_ATOMIC:
		if (!(shared[v] = calloc(2 * nf + 2, sizeof(uint64_t))))
			bench_die("out of memory");
		break;
	}
}

/* The sum of every packet counter and every byte counter of variant v. */
static void totals(int v, uint64_t *pk, uint64_t *by)
{
	size_t nf = opt.nflows;
	uint64_t *tmp;

	*pk = *by = 0;
	switch (v) {
	case V_FLOWS:
		tmp = bench_xmalloc(2 * nf * sizeof(uint64_t));
		if (pcpu_flows_read_array(flows, 0, nf, tmp) != 0)
			bench_die("pcpu_flows_read_array: %s", strerror(errno));
		for (size_t f = 0; f < nf; f++) {
			*pk += tmp[2 * f];
			*by += tmp[2 * f + 1];
		}
		free(tmp);
		break;
	case V_COUNTER:
		tmp = bench_xmalloc(2 * nf * sizeof(uint64_t));
		pcpu_counter_fetch_array(carr, 2 * nf, tmp);
		for (size_t f = 0; f < nf; f++) {
			*pk += tmp[2 * f];
			*by += tmp[2 * f + 1];
		}
		free(tmp);
		break;
	case V_PERCORE:
		for (unsigned w = 0; w < opt.workers; w++)
			for (size_t f = 0; f < nf; f++) {
				*pk += percore[w][2 * f];
				*by += percore[w][2 * f + 1];
			}
		break;
	case V_BUFFERED:
	case V_ATOMIC:
		for (size_t f = 0; f < nf; f++) {
			*pk += shared[v][2 * f];
			*by += shared[v][2 * f + 1];
		}
		break;
	}
}

/* Runs variant v once on every worker: CPU ns per packet. */
/* --flusher-us: a control thread flushing pcpu_flows every so often while
 * its workers run, so that their buffers drain there, not on the workers. */
static int flusher_stop;
static uint64_t flusher_cpu_ns;

static void *flusher_main(void *arg)
{
	uint64_t t0 = bench_thread_cpu_ns();

	(void)arg;
	while (!__atomic_load_n(&flusher_stop, __ATOMIC_ACQUIRE)) {
		if (pcpu_flows_flush(flows) != 0)
			bench_die("pcpu_flows_flush: %s", strerror(errno));
		bench_sleep_ns((uint64_t)opt.flusher_us * 1000);
	}
	flusher_cpu_ns = bench_thread_cpu_ns() - t0;
	return NULL;
}

static double run_all(int v)
{
	uint64_t cpu = 0;
	pthread_t fl;
	int flush = v == V_FLOWS && opt.flusher_us;

	__atomic_store_n(&run_variant, v, __ATOMIC_RELEASE);
	if (flush) {
		flusher_stop = 0;
		fl = bench_thread_start(flusher_main, NULL, -1);
	}
	pthread_barrier_wait(&start_barrier);
	pthread_barrier_wait(&end_barrier);
	if (flush) {
		__atomic_store_n(&flusher_stop, 1, __ATOMIC_RELEASE);
		pthread_join(fl, NULL);
		flusher_ns_per_packet[flusher_runs++ % MAX_ROUNDS] =
			(double)flusher_cpu_ns / ((double)opt.packets * opt.workers);
	}
	for (unsigned w = 0; w < opt.workers; w++)
		cpu += workers[w].cpu_ns;
	return (double)cpu / ((double)opt.packets * opt.workers);
}

/* pin: worker w runs on the w-th allowed CPU (modulo their number), so
 * that the workers write distinct slots (the memory test). */
static void start_workers(int pin)
{
	unsigned ncpu = 0;

	while (pin && bench_allowed_cpu(ncpu) >= 0)
		ncpu++;
	pthread_barrier_init(&start_barrier, NULL, opt.workers + 1);
	pthread_barrier_init(&end_barrier, NULL, opt.workers + 1);
	for (unsigned w = 0; w < opt.workers; w++) {
		workers[w].w = w;
		workers[w].seed = 0x9e3779b97f4a7c15ull * (w + 1) | 1;
		workers[w].t = bench_thread_start(worker_main, &workers[w],
						  pin && ncpu ? bench_allowed_cpu(w % ncpu) : -1);
	}
}

static void stop_workers(void)
{
	__atomic_store_n(&run_variant, V_N, __ATOMIC_RELEASE);
	pthread_barrier_wait(&start_barrier);
	for (unsigned w = 0; w < opt.workers; w++)
		pthread_join(workers[w].t, NULL);
}

static int wanted(int v)
{
	return v == V_NONE || opt.only < 0 || opt.only == v;
}

/* Exact? Every variant's totals against what the workers added in its runs. */
static void check_totals(int v, uint64_t want_pk, uint64_t want_by)
{
	uint64_t pk, by;

	if (v == V_NONE)
		return;
	totals(v, &pk, &by);
	if (pk != want_pk || by != want_by)
		bench_die("%s: totals %" PRIu64 " packets, %" PRIu64 " bytes; added %" PRIu64 ", %" PRIu64,
			  vname[v], pk, by, want_pk, want_by);
}

/* The read side, the workers stopped, whatever their last runs left
 * buffered: a read of one key, the bulk read of every flow (beside the
 * counter array's pcpu_counter_fetch_array()), a flush. */
static void reads(void)
{
	size_t nf = opt.nflows, pending = pcpu_flows_pending(flows);
	uint64_t *out = bench_xmalloc(2 * nf * sizeof(uint64_t)), rng = 12345, sink = 0, t0;
	double one[MAX_ROUNDS], bulk[MAX_ROUNDS], cbulk[MAX_ROUNDS];
	char b1[96], b2[96], b3[96];
	unsigned nreads = 100000;

	for (unsigned r = 0; r < opt.rounds; r++) {
		t0 = bench_now_ns();
		for (unsigned i = 0; i < nreads; i++)
			sink += pcpu_flows_read(flows, (size_t)(bench_xorshift(&rng) % nf), 1);
		one[r] = (double)(bench_now_ns() - t0) / nreads;
		t0 = bench_now_ns();
		if (pcpu_flows_read_array(flows, 0, nf, out) != 0)
			bench_die("pcpu_flows_read_array: %s", strerror(errno));
		bulk[r] = (double)(bench_now_ns() - t0) / 1e6;
		sink += out[nf];
		cbulk[r] = NAN;
		if (carr) {
			t0 = bench_now_ns();
			pcpu_counter_fetch_array(carr, 2 * nf, out);
			cbulk[r] = (double)(bench_now_ns() - t0) / 1e6;
			sink += out[nf];
		}
	}
	t0 = bench_now_ns();
	if (pcpu_flows_flush(flows) != 0)
		bench_die("pcpu_flows_flush: %s", strerror(errno));
	printf("\nReads, workers stopped, %zu entries buffered over the slots: pcpu_flows_read() %s ns; "
	       "pcpu_flows_read_array() of every flow %s ms (pcpu_counter_fetch_array() of the counter array: %s ms); "
	       "then a flush of them %.1f us.%s\n",
	       pending, bench_fmt_stat(b1, sizeof(b1), bench_stat_of(one, opt.rounds)),
	       bench_fmt_stat(b2, sizeof(b2), bench_stat_of(bulk, opt.rounds)),
	       carr ? bench_fmt_stat(b3, sizeof(b3), bench_stat_of(cbulk, opt.rounds)) : "not run",
	       (double)(bench_now_ns() - t0) / 1e3, sink == 42 ? " " : "");
	free(out);
}

static void timing(void)
{
	static double ns[V_N][MAX_ROUNDS];
	uint64_t want_pk[V_N] = { 0 }, want_by[V_N] = { 0 };
	double ratio[MAX_ROUNDS], upd = opt.globals ? 4 : 2;
	struct bench_usage usage;
	struct tbl tb;
	char b1[96], b2[96];

	for (int v = 0; v < V_N; v++)
		if (wanted(v))
			alloc_variant(v);
	start_workers(0);
	/* Warm-up, untimed: every page each variant writes, faulted in. */
	for (int v = 0; v < V_N; v++) {
		if (!wanted(v))
			continue;
		for (unsigned w = 0; w < opt.workers; w++)
			workers[w].pkts = workers[w].bytes = 0;
		(void)run_all(v);
		for (unsigned w = 0; w < opt.workers; w++) {
			want_pk[v] += workers[w].pkts;
			want_by[v] += workers[w].bytes;
		}
	}
	bench_machine_usage(&usage);
	for (unsigned r = 0; r < opt.rounds; r++) {
		for (int i = 0; i < V_N; i++) {
			int v = (int)((r + (unsigned)i) % V_N);

			if (!wanted(v))
				continue;
			for (unsigned w = 0; w < opt.workers; w++)
				workers[w].pkts = workers[w].bytes = 0;
			ns[v][r] = run_all(v);
			for (unsigned w = 0; w < opt.workers; w++) {
				want_pk[v] += workers[w].pkts;
				want_by[v] += workers[w].bytes;
			}
		}
		bench_progress("round %u of %u", r + 1, opt.rounds);
	}
	stop_workers();
	for (int v = 0; v < V_N; v++)
		if (wanted(v))
			check_totals(v, want_pk[v], want_by[v]);

	printf("## Time: %zu flows x 2 counters%s, %u workers, %" PRIu64 " packets per worker per run, %u rounds\n\n",
	       opt.nflows, opt.globals ? " + 2 global counters" : "", opt.workers, opt.packets, opt.rounds);
	printf("pcpu %s, index %s, %u slots, pcpu_flows buffer %u entries per slot, flows %s; every run exact.\n\n",
	       pcpu_version_string(), pcpu_zone_index(NULL) == PCPU_INDEX_CPU ? "cpu" : "mm_cid", pcpu_nslots(),
	       opt.buffer ? opt.buffer : PCPU_FLOWS_DEFAULT_BUFFER,
	       opt.blocked ? "in a block per worker (--blocked)" : "f mod W == w per worker w");
	tbl_init(&tb, 4);
	tbl_headers(&tb, "variant", "ns per packet, median (min–max)",
		    opt.globals ? "ns per update over none (4 per packet)" : "ns per update over none (2 per packet)",
		    "", NULL);
	for (int v = 0; v < V_N; v++) {
		double over[MAX_ROUNDS];

		if (!wanted(v))
			continue;
		for (unsigned r = 0; r < opt.rounds; r++)
			over[r] = (ns[v][r] - ns[V_NONE][r]) / upd;
		tbl_cell(&tb, "%s: %s", vname[v], vdesc[v]);
		tbl_cell(&tb, "%s", bench_fmt_stat(b1, sizeof(b1), bench_stat_of(ns[v], opt.rounds)));
		tbl_cell(&tb, "%s", v == V_NONE ? "—" : bench_fmt_stat(b2, sizeof(b2), bench_stat_of(over, opt.rounds)));
		tbl_cell(&tb, "%s", "");
	}
	tbl_print(&tb);
	printf("\n");
	if (wanted(V_FLOWS) && wanted(V_COUNTER)) {
		struct bench_stat s;

		for (unsigned r = 0; r < opt.rounds; r++)
			ratio[r] = (ns[V_FLOWS][r] - ns[V_NONE][r]) / (ns[V_COUNTER][r] - ns[V_NONE][r]);
		s = bench_stat_of(ratio, opt.rounds);
		printf("pcpu_flows / pcpu_counter, per-round ratio of the updates' cost: %s (target <= 2x: %s)\n",
		       bench_fmt_ratio(b1, sizeof(b1), s, 2), s.med <= 2.0 ? "met" : "NOT met");
		for (int v = V_PERCORE; v < V_N; v++) {
			if (!wanted(v))
				continue;
			for (unsigned r = 0; r < opt.rounds; r++)
				ratio[r] = (ns[V_FLOWS][r] - ns[V_NONE][r]) / (ns[v][r] - ns[V_NONE][r]);
			printf("pcpu_flows / %s: %s\n", vname[v],
			       bench_fmt_ratio(b1, sizeof(b1), bench_stat_of(ratio, opt.rounds), 2));
		}
	}
	if (opt.flusher_us && wanted(V_FLOWS))
		printf("The flusher (every %u us) used %s ns of CPU per packet, beside the workers'.\n",
		       opt.flusher_us, bench_fmt_stat(b1, sizeof(b1),
						      bench_stat_of(flusher_ns_per_packet,
								    flusher_runs < opt.rounds ? flusher_runs : opt.rounds)));
	bench_print_usage("the timed rounds", &usage);
	if (wanted(V_FLOWS))
		reads();
}

/* ---- memory ------------------------------------------------------------------ */

struct mem_report {
	long rss_before, rss_after;
	unsigned nslots;
	long long file_bytes; /* --published: the segment file's allocated bytes */
	uint64_t create_ns, collect_ns; /* --published: making the table; a collection */
	uint64_t collect2_ns;           /* the next collection, after another run */
};

static void mem_child(void)
{
	struct mem_report m;
	int v = -1;

	for (int i = 0; i < V_N; i++)
		if (!strcmp(opt.mem_child, vname[i]))
			v = i;
	if (v < 0)
		bench_die("--memory-child: no variant %s", opt.mem_child);
	start_workers(1);
	(void)run_all(V_NONE); /* the threads' own pages, before */
	m.rss_before = bench_rss_bytes();
	alloc_variant(v);
	(void)run_all(v);
	m.file_bytes = 0;
	m.create_ns = m.collect_ns = 0;
	if (v == V_FLOWS && opt.published) {
		struct stat st;

		/* A collection, as a scrape makes: the table flushed into the
		 * file (the buffers as the run left them). */
		m.collect_ns = bench_now_ns();
		if (pcpu_registry_collect(pub_reg) < 0)
			bench_die("pcpu_registry_collect: %s", strerror(errno));
		m.collect_ns = bench_now_ns() - m.collect_ns;
		/* Another run, another collection: the first one's membarrier
		 * registration (pcpu_rseq_fence()) is not in this one. */
		(void)run_all(v);
		m.collect2_ns = bench_now_ns();
		if (pcpu_registry_collect(pub_reg) < 0)
			bench_die("pcpu_registry_collect: %s", strerror(errno));
		m.collect2_ns = bench_now_ns() - m.collect2_ns;
		m.create_ns = pub_create_ns;
		if (stat(pcpu_segment_path(pub_seg), &st) != 0)
			bench_die("the published table: %s", strerror(errno));
		m.file_bytes = (long long)st.st_blocks * 512;
	}
	if (v == V_FLOWS && pcpu_flows_flush(flows) != 0)
		bench_die("pcpu_flows_flush: %s", strerror(errno));
	m.rss_after = bench_rss_bytes();
	m.nslots = pcpu_nslots();
	stop_workers();
	if (pub_reg) {
		pcpu_flows_destroy(flows);
		pcpu_registry_destroy(pub_reg); /* removes the file */
	}
	if (write(3, &m, sizeof(m)) != (ssize_t)sizeof(m))
		bench_die("write: %s", strerror(errno));
}

static void memory(void)
{
	static const char *const slots[] = { "2", "64", "256" };
	struct tbl tb;
	char wbuf[16], pbuf[32], fbuf[32];

	snprintf(wbuf, sizeof(wbuf), "%u", opt.workers);
	snprintf(pbuf, sizeof(pbuf), "%" PRIu64, opt.packets);
	snprintf(fbuf, sizeof(fbuf), "%zu", opt.nflows);
	printf("## Memory: %zu flows x 2 counters, %u workers, %" PRIu64 " packets each\n\n",
	       opt.nflows, opt.workers, opt.packets);
	printf("Resident memory the counters added: Rss growth in a fresh process (PCPU_INDEX=cpu),\n"
	       "after one run of every worker, worker w pinned to the w-th CPU (%u writing CPU slots).\n\n",
	       opt.workers < bench_ncpu ? opt.workers : bench_ncpu);
	tbl_init(&tb, 4);
	tbl_headers(&tb, "variant", "PCPU_NSLOTS=2", "PCPU_NSLOTS=64", "PCPU_NSLOTS=256", NULL);
	for (int v = V_FLOWS; v < V_N; v++) {
		if (!wanted(v))
			continue;
		tbl_cell(&tb, "%s", vname[v]);
		for (unsigned s = 0; s < 3; s++) {
			char env[32];
			const char *envs[] = { env, "PCPU_INDEX=cpu", NULL };
			char *args[] = { "--memory-child", (char *)vname[v], "--workers", wbuf, "--packets", pbuf,
					 "--flows", fbuf, NULL, NULL, NULL, NULL };
			char bb[16];
			struct mem_report m;
			int k = 8;

			if (opt.published)
				args[k++] = "--published";
			if (opt.buffer) {
				snprintf(bb, sizeof(bb), "%u", opt.buffer);
				args[k++] = "--buffer";
				args[k++] = bb;
			}
			snprintf(env, sizeof(env), "PCPU_NSLOTS=%s", slots[s]);
			if (bench_run_self(args, envs, &m, sizeof(m)) != (long)sizeof(m))
				bench_die("memory child %s %s failed", vname[v], env);
			if (v == V_FLOWS && opt.published)
				tbl_cell(&tb, "file %.2f MB, Rss +%.2f MB (%u slots); made in %.2f ms, "
					 "collections %.0f us, then %.0f us",
					 (double)m.file_bytes / 1e6,
					 (double)(m.rss_after - m.rss_before) / 1e6, m.nslots,
					 (double)m.create_ns / 1e6, (double)m.collect_ns / 1e3,
					 (double)m.collect2_ns / 1e3);
			else
				tbl_cell(&tb, "%.2f MB (%u slots)", (double)(m.rss_after - m.rss_before) / 1e6,
					 m.nslots);
		}
	}
	tbl_print(&tb);
	printf("\n");
}

int main(int argc, char **argv)
{
	bench_opt.argc = argc;
	bench_opt.argv = argv;
	bench_ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--flows") && val) {
			opt.nflows = bench_parse_num(a, val, 1, 100000000);
			i++;
		} else if (!strcmp(a, "--workers") && val) {
			opt.workers = (unsigned)bench_parse_num(a, val, 1, MAX_WORKERS);
			i++;
		} else if (!strcmp(a, "--packets") && val) {
			opt.packets = bench_parse_num(a, val, 1000, 1000000000);
			i++;
		} else if (!strcmp(a, "--rounds") && val) {
			opt.rounds = (unsigned)bench_parse_num(a, val, 1, MAX_ROUNDS);
			i++;
		} else if (!strcmp(a, "--buffer") && val) {
			opt.buffer = (unsigned)bench_parse_num(a, val, 0, PCPU_FLOWS_MAX_BUFFER);
			i++;
		} else if (!strcmp(a, "--only") && val) {
			for (int v = 1; v < V_N; v++)
				if (!strcmp(val, vname[v]))
					opt.only = v;
			if (opt.only < 0)
				bench_die("--only: no variant %s", val);
			i++;
		} else if (!strcmp(a, "--globals")) {
			opt.globals = 1;
		} else if (!strcmp(a, "--flusher-us") && val) {
			opt.flusher_us = (unsigned)bench_parse_num(a, val, 1, 1000000);
			i++;
		} else if (!strcmp(a, "--blocked")) {
			opt.blocked = 1;
		} else if (!strcmp(a, "--memory")) {
			opt.memory = 1;
		} else if (!strcmp(a, "--published")) {
			opt.published = 1;
		} else if (!strcmp(a, "--memory-child") && val) {
			opt.mem_child = val;
			i++;
		} else if (!strcmp(a, "--quick")) {
			opt.rounds = 3;
			opt.packets = 1000000;
		} else {
			bench_die("usage: %s [--flows N] [--workers W] [--packets P] [--rounds R] [--buffer B] "
				  "[--globals] [--memory [--published]] [--only VARIANT] [--quick]", argv[0]);
		}
	}
	if (!opt.workers)
		opt.workers = bench_ncpu > MAX_WORKERS ? MAX_WORKERS : bench_ncpu;
	if (opt.nflows < opt.workers)
		bench_die("--flows must be at least the workers");
	if (opt.mem_child) {
		mem_child();
		return 0;
	}
	if (opt.memory)
		memory();
	else
		timing();
	return 0;
}
