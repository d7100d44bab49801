/* SPDX-License-Identifier: MIT */
/*
 * Section "dataplane": DPDK's statistics "Performance Comparison" (seed 004),
 * with pcpu added.
 *
 * The simulated application, as the guide describes its benchmark:
 *  - each worker spends ~1000 TSC cycles of dummy domain logic per packet,
 *    pure register arithmetic (no memory traffic), calibrated at start-up
 *    (--dp-work CYCLES changes the 1000; see "Work per packet" below);
 *  - per packet it updates 2 global counters (total_pkts, total_bytes) and
 *    the 2 counters (pkts, bytes) of one of 1024 flows;
 *  - flows have worker affinity: worker w serves flows f with
 *    (f - epoch) mod W == w; the control thread increments `epoch` every
 *    DP_MIGRATE_MS ms, moving every flow to the next worker (rare migrations,
 *    and for a moment two workers may update one flow's counters);
 *  - the control thread (reader) reads every counter once a millisecond,
 *    taking whatever lock or sequence count the pattern asks readers to take,
 *    per counter group (a flow's pair, the global pair), as an accessor
 *    function of the guide's examples does.
 * Every run measures its own baseline: it alternates phases with the pattern
 * and phases of the same loop without statistics (see dp_loop), and the
 * overhead of the pattern is
 *     (TSC cycles per packet with - without) / 4 updates,
 * reported as the median over rounds. Cycles per packet: worker CPU time
 * (CLOCK_THREAD_CPUTIME_ID) converted to TSC cycles, divided by the packets:
 * it excludes the time the reader or other workers hold the CPU, which on a
 * machine with few cores would otherwise swamp the difference. The variant
 * D_NONE runs the reference loop in both phases: its result is the noise
 * floor of the method. Workers are not pinned.
 *
 * Work per packet. With DPDK's 1000 cycles, the cheap patterns' overhead
 * (a few cycles per update) is the difference of two ~4000-cycle figures per
 * packet, and on a small shared virtual machine the noise row spans tens of
 * cycles per update: pcpu and Per Core cannot be told apart. --dp-work 0
 * keeps everything else (flows, worker affinity, migrations, counters,
 * access pattern, the reader and its protocol) and drops the dummy work:
 * one multiply-add per packet still draws the next packet, so the reference
 * loop is the flow and length computation alone (a few cycles) and the
 * difference is the statistics code itself, far above the noise. What it
 * then measures is the updates' instructions and the misses they take, no
 * longer hidden behind 1000 cycles of independent work by out-of-order
 * execution; and since the reader still reads once a millisecond, its misses
 * are spread over ~100x more packets. Small values (10-50) show how fast
 * the work hides each pattern's instructions. Per-round ratios pcpu / Per Core (both overheads of the
 * same round) are printed beside the table with the noise row.
 *
 * Beside DPDK's patterns and pcpu's two rows, two "ideal" rows run the
 * fewest instructions an exact rseq update needs, written by hand (see
 * DP_IDEAL_SECTION below): pcpu / ideal is how far pcpu is from that
 * floor, ideal / Per Core what the floor itself costs against a
 * thread-private add.
 *
 * The guide's numbers are core cycles at a fixed 2.3 GHz (turbo off), which
 * equals its TSC rate; here the core may run faster than the TSC, so one
 * TSC cycle may hold more than one core cycle.
 */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DP_NFLOWS 1024          /* power of two: flow index is masked */
#define DP_BATCH 32             /* packets per batch (buffered flush, stop check) */
#define DP_WARMUP_BATCHES 64    /* untimed: faults, registration, caches */
#define DP_MIGRATE_MS 20        /* all flows move to the next worker this often */
#define DP_NVALS (2 + 2 * DP_NFLOWS)

enum dp_kind {
	D_NONE,
	D_SHARED_NOSYNC,
	D_SHARED_SPIN,
	D_SHARED_ATOMIC,
	D_SHARED_BUFFERED,
	D_PERCORE,
	D_PERCORE_SPIN,
	D_PERCORE_SEQ,
	D_PCPU_MANY,
	D_PCPU_ADD4,
	D_OWNED_MANY,
	D_OWNED_ADD4,
	D_OWNED_ARRAY,
	D_IDEAL_MANY,
	D_IDEAL_ADD4,
	D_PERCORE_WIDE,
	D_N
};

static const struct {
	const char *name, *csv;
	double dpdk4, dpdk20; /* the guide's Cascade Lake Xeon figures, cycles/update */
} dp_variants[D_N] = {
	[D_NONE] = { "No statistics (noise floor)", "none", NAN, NAN },
	[D_SHARED_NOSYNC] = { "Shared No Sync", "shared_nosync", 27, 273 },
	[D_SHARED_SPIN] = { "Shared Spinlock", "shared_spinlock", 436, 8236 },
	[D_SHARED_ATOMIC] = { "Shared Atomics", "shared_atomics", 56, 626 },
	[D_SHARED_BUFFERED] = { "Shared Buffered (flush per 32 pkts)", "shared_buffered", 18, 18 },
	[D_PERCORE] = { "Per Core (relaxed store)", "per_core", 5, 4 },
	[D_PERCORE_SPIN] = { "Per Core Spinlock", "per_core_spinlock", 7, 7 },
	[D_PERCORE_SEQ] = { "Per Core Seqcount", "per_core_seqcount", 4, 4 },
	[D_PCPU_MANY] = { "pcpu (pcpu_counter_add_many of 4)", "pcpu_add_many", NAN, NAN },
	[D_PCPU_ADD4] = { "pcpu (4 × pcpu_counter_add)", "pcpu_add4", NAN, NAN },
	[D_OWNED_MANY] = { "pcpu owned slot (pcpu_counter_add_many_owned of 4)", "owned_add_many", NAN, NAN },
	[D_OWNED_ADD4] = { "pcpu owned slot (4 × pcpu_counter_add_owned)", "owned_add4", NAN, NAN },
	[D_OWNED_ARRAY] = { "pcpu owned slot (4 × pcpu_owned_array_add)", "owned_array", NAN, NAN },
	[D_IDEAL_MANY] = { "ideal rseq: one index read, 4 sections (hand-written)", "ideal_many", NAN, NAN },
	[D_IDEAL_ADD4] = { "ideal rseq: 4 × ideal add (hand-written)", "ideal_add4", NAN, NAN },
	[D_PERCORE_WIDE] = { "diagnostic: Per Core with 16 B per counter (pcpu's slot before Core v2)", "per_core_16b", NAN, NAN },
};

struct dp_flow {
	int64_t pkts, bytes;
};

struct dp_stats {
	int64_t total_pkts, total_bytes;
	struct dp_flow flows[DP_NFLOWS];
};

/* The diagnostic row's counters: 8 bytes used of every 16, the footprint a
 * pcpu counter had per slot before Core v2 (its rseq word and its fallback
 * word side by side). Since Core v2 a counter is 8 bytes per slot, the
 * footprint of plain Per Core, and the fallback words live in a separate
 * mirror region: the row now shows what that change saves (Per Core 16 B vs
 * Per Core), i.e. what the old layout cost with Per Core's code. */
struct dp_wide {
	int64_t v, unused;
};

struct dp_stats_wide {
	struct dp_wide total_pkts, total_bytes;
	struct {
		struct dp_wide pkts, bytes;
	} flows[DP_NFLOWS];
};

/* The rows whose workers claim an owned slot. */
static int dp_is_owned(int kind)
{
	return kind == D_OWNED_MANY || kind == D_OWNED_ADD4 || kind == D_OWNED_ARRAY;
}

/* One worker's statistics in the Per Core patterns: its own cache lines. */
struct dp_core {
	int lock;     /* Per Core Spinlock: a writer only contends with the reader */
	uint32_t seq; /* Per Core Seqcount: odd while the worker updates */
	union {
		struct dp_stats s;
		struct dp_stats_wide sw; /* D_PERCORE_WIDE */
	};
} BENCH_ALIGNED;

/* Shared Buffered: the worker's write buffer, applied under the shared lock. */
struct dp_wb {
	unsigned n;
	struct {
		int64_t *p;
		int64_t v;
	} e[DP_BATCH * 4];
};

struct dp_shared {
	int shared_lock BENCH_ALIGNED; /* Shared Spinlock, Shared Buffered */
	uint32_t epoch BENCH_ALIGNED;  /* flow-to-worker mapping; reader bumps it */
	int stop BENCH_ALIGNED;
	/* read-only during the run: */
	struct dp_stats *shared BENCH_ALIGNED;
	struct dp_core **cores;
	pcpu_counter_t pc_global; /* [0] total_pkts, [1] total_bytes */
	pcpu_counter_t pc_flows;  /* [2f] pkts, [2f+1] bytes of flow f */
	char *ideal;              /* ideal rows: slot s's struct dp_stats at ideal + (s << DP_IDEAL_SHIFT) */
	unsigned ideal_nslots;
	unsigned nworkers, work_iters;
	int kind;
	pthread_barrier_t start;
	/* the reader's results, away from the lines workers read */
	uint64_t reader_passes BENCH_ALIGNED;
	uint64_t reader_decreases;
	int64_t vals[DP_NVALS];
};

struct dp_worker {
	struct dp_shared *sh;
	unsigned id;
	uint64_t pkts, bytes;    /* what the pattern counted, warm-up included: expected totals */
	struct bench_phases ph;  /* [0] reference phases, [1] measuring phases */
	char *area;              /* the thread's rseq area (ideal rows) */
	char *aidx;              /* its index field: cpu_id or mm_cid, the process's index */
	int owned_claimed;       /* owned rows: pcpu_worker_claim() succeeded */
	struct dp_wb wb;
} BENCH_ALIGNED;

/* ~bench_opt.dp_work cycles of "domain logic": a dependent chain of
 * multiplies and adds in one register, which the compiler may neither fold
 * nor vectorise. Its value also draws the packet (flow and length). */
BENCH_INLINE uint64_t dp_work(uint64_t x, unsigned iters)
{
	unsigned i;

	for (i = 0; i < iters; i++) {
		x = x * 0x5851f42d4c957f2dull + 0x14057b7ef767814full;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

static __attribute__((noinline)) uint64_t dp_work_call(uint64_t x, unsigned iters)
{
	return dp_work(x, iters);
}

/* Multiply-add steps per packet for bench_opt.dp_work TSC cycles; at least
 * one, the step that draws the next packet. */
static unsigned dp_calibrate_work(void)
{
	uint64_t best = UINT64_MAX, x = 1, t0, t1;
	unsigned i, iters;

	dp_work_call(x, 20 * 1000 * 1000); /* let the core reach its clock */
	for (i = 0; i < 300; i++) {
		t0 = bench_ticks();
		x = dp_work_call(x, 1000);
		t1 = bench_ticks();
		if (t1 - t0 < best)
			best = t1 - t0;
	}
	/* The fastest try is the one nothing interrupted. */
	iters = (unsigned)(bench_opt.dp_work * 1000.0 / (double)best + 0.5);
	return iters ? iters : 1;
}

/* A single-writer add: not an atomic read-modify-write, just a load and a
 * store that cannot tear (what Shared No Sync and Per Core do). */
BENCH_INLINE void dp_plain_add(int64_t *p, int64_t v)
{
	__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

BENCH_INLINE void dp_stats_add4(struct dp_stats *s, unsigned flow, int64_t len)
{
	dp_plain_add(&s->total_pkts, 1);
	dp_plain_add(&s->total_bytes, len);
	dp_plain_add(&s->flows[flow].pkts, 1);
	dp_plain_add(&s->flows[flow].bytes, len);
}

static void dp_wb_flush(struct dp_shared *sh, struct dp_wb *wb)
{
	unsigned i;

	bench_spin_lock(&sh->shared_lock);
	for (i = 0; i < wb->n; i++)
		*wb->e[i].p += wb->e[i].v;
	bench_spin_unlock(&sh->shared_lock);
	wb->n = 0;
}

BENCH_INLINE void dp_wb_add(struct dp_wb *wb, int64_t *p, int64_t v)
{
	wb->e[wb->n].p = p;
	wb->e[wb->n].v = v;
	wb->n++;
}

/*
 * The ideal rows: what the fewest instructions of an exact per-CPU update
 * cost in this loop, written by hand as the incr section's ideal add is
 * (every constant hoisted: the rseq area and its index field in registers,
 * the descriptor offset an immediate, the slot stride a shift), on a plain
 * per-slot array of struct dp_stats. They give pcpu's rows a floor measured
 * in the same run: an rseq update cannot do with less than an arming store,
 * a compare of the index and a branch beyond Per Core's add, and Per Core
 * needs none of those only because each worker owns its struct (here,
 * workers are not pinned: Per Core is a thread-private `+=`).
 *
 *  D_IDEAL_MANY (pcpu_counter_add_many's shape): the index read once per
 *    packet; 4 sections, each "arm, compare, add"; an abort re-reads the
 *    index and retries that section only (the ones before it committed).
 *  D_IDEAL_ADD4 (4 × pcpu_counter_add's shape): 4 of incr's ideal add, each
 *    reading the index itself.
 * x86-64 only; rows not run where there is no rseq (dp_usable()).
 */
#define DP_IDEAL_SHIFT 15 /* 32 KiB per slot: holds a struct dp_stats */
#if defined(__x86_64__) && PCPU_ARCH_HAVE_RSEQ
#define DP_IDEAL_AVAILABLE 1
/* rax: the index; rdx: the index times the slot stride. */
#define DP_IDEAL_READ                                                            \
	"movl (%[ai]), %%eax\n\t"                                                 \
	"movq %%rax, %%rdx\n\t"                                                   \
	"shlq %[shift], %%rdx\n\t"
#define DP_IDEAL_SECTION(v, addr)                                                \
	BENCH_RSEQ_CS                                                            \
	"0:\n\t"                                                                 \
	BENCH_RSEQ_ARM_CMP_EAX                                                   \
	"addq " v ", " addr "\n\t"                                                \
	"2:\n\t"                                                                 \
	BENCH_RSEQ_ABORT_DO(DP_IDEAL_READ, "0b")
#define DP_IDEAL_ADD(v, addr)                                                    \
	BENCH_RSEQ_CS                                                            \
	"0:\n\t"                                                                 \
	"movl (%[ai]), %%eax\n\t"                                                 \
	BENCH_RSEQ_ARM_CMP_EAX                                                    \
	"shlq %[shift], %%rax\n\t"                                                \
	"addq " v ", " addr "\n\t"                                                \
	"2:\n\t"                                                                 \
	BENCH_RSEQ_ABORT_RETRY("0b")
#define DP_IDEAL_OPERANDS(w, g, f, len)                                          \
	[ai] "r"((w)->aidx), [a] "r"((w)->area), [g] "r"(g), [f] "r"(f),          \
	[len] "r"(len), [cs] "i"(PCPU__RSEQ_OFF_CS), [shift] "i"(DP_IDEAL_SHIFT)
#else
#define DP_IDEAL_AVAILABLE 0
#endif

/* The statistics of one packet, by pattern `kind` (constant where inlined). */
BENCH_INLINE void dp_update(const int kind, struct dp_shared *sh, struct dp_worker *w,
			    struct dp_core *core, pcpu_worker_t ow, pcpu_counter_t pcb,
			    pcpu_owned_array_t oa, unsigned flow, int64_t len)
{
	struct dp_stats *s = sh->shared;

	switch (kind) {
	case D_NONE:
		/* The flow lookup is domain logic: keep it in the baseline too. */
		__asm__ volatile("" : : "r"(flow), "r"(len));
		break;
	case D_SHARED_NOSYNC:
		dp_stats_add4(s, flow, len);
		break;
	case D_SHARED_SPIN:
		bench_spin_lock(&sh->shared_lock);
		s->total_pkts += 1;
		s->total_bytes += len;
		s->flows[flow].pkts += 1;
		s->flows[flow].bytes += len;
		bench_spin_unlock(&sh->shared_lock);
		break;
	case D_SHARED_ATOMIC:
		__atomic_fetch_add(&s->total_pkts, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->total_bytes, len, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->flows[flow].pkts, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->flows[flow].bytes, len, __ATOMIC_RELAXED);
		break;
	case D_SHARED_BUFFERED:
		dp_wb_add(&w->wb, &s->total_pkts, 1);
		dp_wb_add(&w->wb, &s->total_bytes, len);
		dp_wb_add(&w->wb, &s->flows[flow].pkts, 1);
		dp_wb_add(&w->wb, &s->flows[flow].bytes, len);
		break;
	case D_PERCORE:
		dp_stats_add4(&core->s, flow, len);
		break;
	case D_PERCORE_SPIN:
		bench_spin_lock(&core->lock);
		dp_stats_add4(&core->s, flow, len);
		bench_spin_unlock(&core->lock);
		break;
	case D_PERCORE_SEQ: {
		/* The classic single-writer sequence count: odd while writing.
		 * On x86 (TSO) the fences are compiler barriers only. */
		uint32_t seq = core->seq;

		__atomic_store_n(&core->seq, seq + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		dp_stats_add4(&core->s, flow, len);
		__atomic_store_n(&core->seq, seq + 2, __ATOMIC_RELEASE);
		break;
	}
	case D_PCPU_MANY: {
		pcpu_counter_t cs[4] = {
			pcpu_counter_at(sh->pc_global, 0), pcpu_counter_at(sh->pc_global, 1),
			pcpu_counter_at(sh->pc_flows, 2 * flow), pcpu_counter_at(sh->pc_flows, 2 * flow + 1),
		};
		int64_t vs[4] = { 1, len, 1, len };

		pcpu_counter_add_many(cs, vs, 4);
		break;
	}
	case D_PERCORE_WIDE:
		dp_plain_add(&core->sw.total_pkts.v, 1);
		dp_plain_add(&core->sw.total_bytes.v, len);
		dp_plain_add(&core->sw.flows[flow].pkts.v, 1);
		dp_plain_add(&core->sw.flows[flow].bytes.v, len);
		break;
	case D_PCPU_ADD4: {
		/* The handles in locals, as the ideal rows take their addresses
		 * once per packet: each add's asm clobbers memory, so a handle
		 * read from *sh would be loaded again after every add. */
		const pcpu_counter_t g = sh->pc_global;
		const pcpu_counter_t f = pcpu_counter_at(sh->pc_flows, 2 * flow);

		pcpu_counter_add(pcpu_counter_at(g, 0), 1);
		pcpu_counter_add(pcpu_counter_at(g, 1), len);
		pcpu_counter_add(pcpu_counter_at(f, 0), 1);
		pcpu_counter_add(pcpu_counter_at(f, 1), len);
		break;
	}
	case D_OWNED_MANY: {
		pcpu_counter_t cs[4] = {
			pcpu_counter_at(pcb, 0), pcpu_counter_at(pcb, 1),
			pcpu_counter_at(pcb, 2 + 2 * flow), pcpu_counter_at(pcb, 3 + 2 * flow),
		};
		int64_t vs[4] = { 1, len, 1, len };

		pcpu_counter_add_many_owned(ow, cs, vs, 4);
		break;
	}
	case D_OWNED_ADD4: {
		/* The claim `ow` and the counters' base `pcb` are the worker's
		 * locals (dp_loop()), as Per Core's `core` is. */
		const pcpu_counter_t g = pcb;
		const pcpu_counter_t f = pcpu_counter_at(pcb, 2 + 2 * flow);

		pcpu_counter_add_owned(ow, pcpu_counter_at(g, 0), 1);
		pcpu_counter_add_owned(ow, pcpu_counter_at(g, 1), len);
		pcpu_counter_add_owned(ow, pcpu_counter_at(f, 0), 1);
		pcpu_counter_add_owned(ow, pcpu_counter_at(f, 1), len);
		break;
	}
	case D_OWNED_ARRAY:
		/* The view `oa` of the counters' array in the worker's owned
		 * slot is the loop's local (dp_loop()), as Per Core's `core`. */
		pcpu_owned_array_add(oa, 0, 1);
		pcpu_owned_array_add(oa, 1, len);
		pcpu_owned_array_add(oa, 2 + 2 * (size_t)flow, 1);
		pcpu_owned_array_add(oa, 3 + 2 * (size_t)flow, len);
		break;
#if DP_IDEAL_AVAILABLE
	/* Slot 0's addresses; the sections add the slot's offset (rdx, rax). */
	case D_IDEAL_MANY: {
		struct dp_stats *g = (struct dp_stats *)sh->ideal;
		struct dp_flow *f = &g->flows[flow];

		__asm__ volatile(DP_IDEAL_READ
				 DP_IDEAL_SECTION("$1", "(%[g], %%rdx)")
				 DP_IDEAL_SECTION("%[len]", "8(%[g], %%rdx)")
				 DP_IDEAL_SECTION("$1", "(%[f], %%rdx)")
				 DP_IDEAL_SECTION("%[len]", "8(%[f], %%rdx)")
				 :
				 : DP_IDEAL_OPERANDS(w, g, f, len)
				 : "memory", "cc", "rax", "rcx", "rdx");
		break;
	}
	case D_IDEAL_ADD4: {
		struct dp_stats *g = (struct dp_stats *)sh->ideal;
		struct dp_flow *f = &g->flows[flow];

		__asm__ volatile(DP_IDEAL_ADD("$1", "(%[g], %%rax)")
				 DP_IDEAL_ADD("%[len]", "8(%[g], %%rax)")
				 DP_IDEAL_ADD("$1", "(%[f], %%rax)")
				 DP_IDEAL_ADD("%[len]", "8(%[f], %%rax)")
				 :
				 : DP_IDEAL_OPERANDS(w, g, f, len)
				 : "memory", "cc", "rax", "rcx");
		break;
	}
#endif
	}
}

/* One batch of packets; `kind` D_NONE runs the same loop without statistics. */
BENCH_INLINE uint64_t dp_batch(const int kind, struct dp_shared *sh, struct dp_worker *w,
			       struct dp_core *core, pcpu_worker_t ow, pcpu_counter_t pcb,
			       pcpu_owned_array_t oa, uint64_t x, uint64_t per, uint64_t *bytes)
{
	const unsigned nw = sh->nworkers, iters = sh->work_iters;
	const uint32_t epoch = __atomic_load_n(&sh->epoch, __ATOMIC_RELAXED);
	unsigned i;

	for (i = 0; i < DP_BATCH; i++) {
		uint32_t k;
		unsigned flow;
		int64_t len;

		x = dp_work(x, iters);
		/* The packet: one of this worker's flows, 64..1500 bytes. */
		k = (uint32_t)(((x >> 32) * per) >> 32) * nw + w->id;
		if (k >= DP_NFLOWS)
			k -= nw;
		flow = (k + epoch) & (DP_NFLOWS - 1);
		len = 64 + (int64_t)((((x >> 16) & 0xffff) * 1437) >> 16);
		dp_update(kind, sh, w, core, ow, pcb, oa, flow, len);
		if (kind != D_NONE)
			*bytes += (uint64_t)len;
	}
	if (kind == D_SHARED_BUFFERED)
		dp_wb_flush(sh, &w->wb);
	return x;
}

/*
 * The worker. Time is cut into phases (bench_phase_tick); odd phases run the
 * pattern, even phases the same loop without statistics (the reference).
 * Every worker derives the phase from the TSC, which all CPUs share, so all
 * workers switch together: while measuring a pattern they all run it, and
 * contention is what it would be in a run of that pattern alone.
 * The worker's CPU time is read at each phase change and charged to the
 * phase's mode. Comparing the two modes of one run, a few hundred
 * microseconds apart, cancels the drift of the machine's speed (another
 * guest on the host, frequency changes), which from one run to the next
 * moves the cost of the dummy work by several percent, i.e. by more than
 * the overhead of the cheaper patterns.
 */
BENCH_INLINE void dp_loop(struct dp_worker *w, const int kind)
{
	struct dp_shared *sh = w->sh;
	/* flows per worker, rounded up; worker `id` takes every nw-th flow */
	const uint64_t per = (DP_NFLOWS + sh->nworkers - 1) / sh->nworkers;
	struct dp_core *core = sh->cores ? sh->cores[w->id] : NULL;
	uint64_t x = 0x9e3779b97f4a7c15ull * (w->id + 1);
	uint64_t pkts = 0;    /* all packets */
	uint64_t counted = 0; /* packets the pattern counted: its expected totals */
	uint64_t bytes = 0;
	unsigned batch;
	pcpu_worker_t ow = { 0 };
	/* pcpu's counters: the 2 globals, then 2 per flow, one array (as Per
	 * Core's struct); the owned rows keep its address in a register. */
	const pcpu_counter_t pcb = sh->pc_global;
	pcpu_owned_array_t oa = { 0 }; /* D_OWNED_ARRAY: pcb's words in the owned slot */

	/* The owned rows' workers claim a slot each, as DPDK's lcores are
	 * registered; a claim that fails leaves the zero claim (ordinary
	 * adds), which dp_run() reports. */
	if (dp_is_owned(kind)) {
		pcpu_worker_t claimed;

		w->owned_claimed = pcpu_worker_claim(&claimed) == 0;
		ow = claimed; /* ow's address is never taken: a register */
	}
	/* The array row's worker keeps the view of the counters in its slot
	 * (a claim that failed has none: no ordinary form to fall back to). */
	if (kind == D_OWNED_ARRAY && pcpu_counter_owned_array(ow, pcb, &oa) != 0)
		bench_die("dataplane: worker %u got no owned slot (%u of them: PCPU_OWNED_SLOTS)",
			  w->id, pcpu_worker_max());
	w->area = bench_rseq_area();
	w->aidx = bench_rseq_index_field(w->area);
	for (batch = 0; batch < DP_WARMUP_BATCHES; batch++) {
		x = dp_batch(kind, sh, w, core, ow, pcb, oa, x, per, &bytes);
		pkts += DP_BATCH;
		counted += DP_BATCH;
	}
	pthread_barrier_wait(&sh->start);
	bench_phase_start(&w->ph, pkts);
	do {
		if (bench_phase_tick(&w->ph, pkts)) {
			x = dp_batch(kind, sh, w, core, ow, pcb, oa, x, per, &bytes);
			counted += DP_BATCH;
		} else {
			x = dp_batch(D_NONE, sh, w, core, ow, pcb, oa, x, per, &bytes);
		}
		pkts += DP_BATCH;
	} while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED));
	bench_phase_end(&w->ph, pkts);
	if (w->owned_claimed)
		pcpu_worker_release();
	w->pkts = kind == D_NONE ? 0 : counted;
	w->bytes = bytes;
}

/* One noinline loop per kind, with `kind` a constant inside it, and the
 * table of them: one list of the kinds for both. */
#define DP_KINDS(X)                                                              \
	X(D_NONE) X(D_SHARED_NOSYNC) X(D_SHARED_SPIN) X(D_SHARED_ATOMIC)         \
	X(D_SHARED_BUFFERED) X(D_PERCORE) X(D_PERCORE_SPIN) X(D_PERCORE_SEQ)     \
	X(D_PCPU_MANY) X(D_PCPU_ADD4) X(D_OWNED_MANY) X(D_OWNED_ADD4)            \
	X(D_OWNED_ARRAY)                                                         \
	X(D_IDEAL_MANY) X(D_IDEAL_ADD4)                                          \
	X(D_PERCORE_WIDE)
#define DP_LOOP_FN(k) \
	static __attribute__((noinline)) void dp_loop_##k(struct dp_worker *w) { dp_loop(w, k); }
DP_KINDS(DP_LOOP_FN)
#define DP_LOOP_ENTRY(k) [k] = dp_loop_##k,
static void (*const dp_loops[D_N])(struct dp_worker *) = { DP_KINDS(DP_LOOP_ENTRY) };
#define DP_COUNT(k) +1
_Static_assert(0 DP_KINDS(DP_COUNT) == D_N, "DP_KINDS must list every enum dp_kind");

/* Whether row `kind` is one of the hand-written ideal rows. */
static int dp_is_ideal(int kind)
{
	return kind == D_IDEAL_MANY || kind == D_IDEAL_ADD4;
}

/* Whether row `kind` can run in this process: the ideal rows need rseq (a
 * registered area, on x86-64); their array has pcpu_nslots() slots, which
 * holds every index. */
static int dp_usable(int kind)
{
	if (!dp_is_ideal(kind))
		return 1;
	return DP_IDEAL_AVAILABLE && pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK;
}

static void *dp_worker_main(void *arg)
{
	struct dp_worker *w = arg;

	dp_loops[w->sh->kind](w);
	return NULL;
}

/* ---- the reader (control plane) --------------------------------------------- */

/* Reads a pair of counters under the pattern's reader protocol. */
static void dp_read_pair(int kind, struct dp_shared *sh, struct dp_core *core,
			 int64_t *pa, int64_t *pb, int64_t *out)
{
	int64_t a, b;

	switch (kind) {
	case D_SHARED_SPIN:
	case D_SHARED_BUFFERED:
		bench_spin_lock(&sh->shared_lock);
		a = *pa;
		b = *pb;
		bench_spin_unlock(&sh->shared_lock);
		break;
	case D_PERCORE_SPIN:
		bench_spin_lock(&core->lock);
		a = *pa;
		b = *pb;
		bench_spin_unlock(&core->lock);
		break;
	case D_PERCORE_SEQ: {
		uint32_t s0, s1;

		for (;;) {
			s0 = __atomic_load_n(&core->seq, __ATOMIC_ACQUIRE);
			if (s0 & 1) {
				bench_cpu_relax();
				continue;
			}
			a = __atomic_load_n(pa, __ATOMIC_RELAXED);
			b = __atomic_load_n(pb, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			s1 = __atomic_load_n(&core->seq, __ATOMIC_RELAXED);
			if (s0 == s1)
				break;
		}
		break;
	}
	default: /* No Sync, Atomics, Per Core: single atomic loads */
		a = __atomic_load_n(pa, __ATOMIC_RELAXED);
		b = __atomic_load_n(pb, __ATOMIC_RELAXED);
		break;
	}
	out[0] += a;
	out[1] += b;
}

/* Reads every counter: out[0..1] the globals, out[2 + 2f ..] flow f. */
static void dp_read_all(int kind, struct dp_shared *sh, int64_t *out)
{
	unsigned w, f, nsrc = 1;

	memset(out, 0, DP_NVALS * sizeof(*out));
	switch (kind) {
	case D_NONE:
		return;
	case D_PCPU_MANY:
	case D_PCPU_ADD4:
	case D_OWNED_MANY:
	case D_OWNED_ADD4:
	case D_OWNED_ARRAY:
		pcpu_counter_fetch_array(sh->pc_global, 2, (uint64_t *)out);
		pcpu_counter_fetch_array(sh->pc_flows, 2 * DP_NFLOWS, (uint64_t *)out + 2);
		return;
	case D_PERCORE_WIDE:
		for (w = 0; w < sh->nworkers; w++) {
			struct dp_stats_wide *sw = &sh->cores[w]->sw;

			dp_read_pair(kind, sh, NULL, &sw->total_pkts.v, &sw->total_bytes.v, out);
			for (f = 0; f < DP_NFLOWS; f++)
				dp_read_pair(kind, sh, NULL, &sw->flows[f].pkts.v,
					     &sw->flows[f].bytes.v, out + 2 + 2 * f);
		}
		return;
	case D_PERCORE:
	case D_PERCORE_SPIN:
	case D_PERCORE_SEQ:
		nsrc = sh->nworkers;
		break;
	case D_IDEAL_MANY:
	case D_IDEAL_ADD4:
		nsrc = sh->ideal_nslots;
		break;
	}
	for (w = 0; w < nsrc; w++) {
		struct dp_core *core = sh->cores ? sh->cores[w] : NULL;
		struct dp_stats *s = sh->ideal ? (struct dp_stats *)(sh->ideal + ((size_t)w << DP_IDEAL_SHIFT))
				     : core ? &core->s : sh->shared;

		dp_read_pair(kind, sh, core, &s->total_pkts, &s->total_bytes, out);
		for (f = 0; f < DP_NFLOWS; f++)
			dp_read_pair(kind, sh, core, &s->flows[f].pkts, &s->flows[f].bytes,
				     out + 2 + 2 * f);
	}
}

static void *dp_reader_main(void *arg)
{
	struct dp_shared *sh = arg;
	struct timespec next;
	int64_t last = 0;

	(void)bench_rseq_area();
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED)) {
		next.tv_nsec += 1000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		dp_read_all(sh->kind, sh, sh->vals);
		/* A counter only ever added to must never appear to go back. */
		if (sh->vals[0] < last)
			sh->reader_decreases++;
		last = sh->vals[0];
		if (++sh->reader_passes % DP_MIGRATE_MS == 0)
			__atomic_store_n(&sh->epoch, sh->epoch + 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* ---- one timed run -------------------------------------------------------------- */

struct dp_result {
	double cycles_per_pkt; /* TSC cycles of worker CPU time per packet, pattern phases */
	double ref_cycles_per_pkt; /* the same, reference (no statistics) phases */
	double overhead;       /* per counter update: (cycles_per_pkt - ref) / 4 */
	double lost_pct;       /* of the global packet count */
	int exact;             /* all four sums right */
	uint64_t reader_passes, reader_decreases;
};

static struct dp_result dp_run(int kind, unsigned nworkers, unsigned work_iters)
{
	struct dp_shared *sh = bench_xmalloc(sizeof(*sh));
	struct dp_worker *w = bench_xmalloc(nworkers * sizeof(*w));
	pthread_t *tid = bench_xmalloc(nworkers * sizeof(*tid)), reader = 0;
	uint64_t pkts = 0, bytes = 0, timed[2] = { 0, 0 }, cpu_ns[2] = { 0, 0 }, fp = 0, fb = 0;
	struct dp_result res;
	unsigned i, f;

	sh->kind = kind;
	sh->nworkers = nworkers;
	sh->work_iters = work_iters;
	sh->shared = bench_xmalloc(sizeof(*sh->shared));
	if (kind == D_PERCORE || kind == D_PERCORE_SPIN || kind == D_PERCORE_SEQ ||
	    kind == D_PERCORE_WIDE) {
		sh->cores = bench_xmalloc(nworkers * sizeof(*sh->cores));
		for (i = 0; i < nworkers; i++)
			sh->cores[i] = bench_xmalloc(sizeof(struct dp_core));
	}
	if (dp_is_ideal(kind)) {
		sh->ideal_nslots = pcpu_nslots();
		sh->ideal = aligned_alloc(4096, (size_t)sh->ideal_nslots << DP_IDEAL_SHIFT);
		if (!sh->ideal)
			bench_die("out of memory for the ideal rows' array");
		memset(sh->ideal, 0, (size_t)sh->ideal_nslots << DP_IDEAL_SHIFT);
	}
	if (kind == D_PCPU_MANY || kind == D_PCPU_ADD4 || dp_is_owned(kind)) {
		sh->pc_global = pcpu_counter_alloc_array(2 + 2 * DP_NFLOWS);
		if (!sh->pc_global)
			bench_die("pcpu_counter_alloc_array failed");
		sh->pc_flows = pcpu_counter_at(sh->pc_global, 2);
	}
	pthread_barrier_init(&sh->start, NULL, nworkers + 1);
	for (i = 0; i < nworkers; i++) {
		w[i].sh = sh;
		w[i].id = i;
		tid[i] = bench_thread_start(dp_worker_main, &w[i], -1);
	}
	pthread_barrier_wait(&sh->start);
	if (!bench_opt.no_reader)
		reader = bench_thread_start(dp_reader_main, sh, -1);
	bench_sleep_ns((uint64_t)bench_opt.duration_ms * 1000000u);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	if (!bench_opt.no_reader)
		pthread_join(reader, NULL);
	for (i = 0; i < nworkers; i++) {
		pthread_join(tid[i], NULL);
		if (dp_is_owned(kind) && !w[i].owned_claimed)
			fprintf(stderr, "dataplane: worker %u got no owned slot (%u of them: "
				"PCPU_OWNED_SLOTS): it made ordinary adds\n", i, pcpu_worker_max());
		pkts += w[i].pkts;
		bytes += w[i].bytes;
		timed[0] += w[i].ph.n[0];
		timed[1] += w[i].ph.n[1];
		cpu_ns[0] += w[i].ph.cpu_ns[0];
		cpu_ns[1] += w[i].ph.cpu_ns[1];
	}

	/* Final check: totals, and the per-flow counters sum to them. */
	dp_read_all(kind, sh, sh->vals);
	for (f = 0; f < DP_NFLOWS; f++) {
		fp += (uint64_t)sh->vals[2 + 2 * f];
		fb += (uint64_t)sh->vals[3 + 2 * f];
	}
	res.cycles_per_pkt = (double)cpu_ns[1] * bench_tsc_ghz / (double)timed[1];
	res.ref_cycles_per_pkt = (double)cpu_ns[0] * bench_tsc_ghz / (double)timed[0];
	res.overhead = (res.cycles_per_pkt - res.ref_cycles_per_pkt) / 4;
	if (kind == D_NONE) {
		res.exact = 1;
		res.lost_pct = 0;
	} else {
		res.exact = (uint64_t)sh->vals[0] == pkts && (uint64_t)sh->vals[1] == bytes &&
			    fp == pkts && fb == bytes;
		res.lost_pct = 100.0 * ((double)pkts - (double)sh->vals[0]) / (double)pkts;
	}
	res.reader_passes = sh->reader_passes;
	res.reader_decreases = sh->reader_decreases;

	if (sh->pc_global) {
		pcpu_counter_free(sh->pc_global); /* and pc_flows, the same array */
	}
	if (sh->cores) {
		for (i = 0; i < nworkers; i++)
			free(sh->cores[i]);
		free(sh->cores);
	}
	pthread_barrier_destroy(&sh->start);
	free(sh->ideal);
	free(sh->shared);
	free(sh);
	free(w);
	free(tid);
	return res;
}

#define DP_RES(res, nt, nr, k, ti, r) (res)[((k) * (nt) + (ti)) * (nr) + (r)]

/* The method's noise at worker count ti: the median over rounds of the
 * reference loop's |overhead| against itself. An overhead is a difference
 * of two ~1000-cycle figures per packet at DPDK's work: its median is
 * measurable only above twice the noise (the targets' rule), and a value
 * below zero (the pattern's phases faster than the reference loop's) is
 * noise, never a cost. */
static double dp_noise(const struct dp_result *res, unsigned nt, unsigned nr, unsigned ti)
{
	double *v = bench_xmalloc(nr * sizeof(double)), m;
	unsigned r;

	for (r = 0; r < nr; r++)
		v[r] = fabs(DP_RES(res, nt, nr, D_NONE, ti, r).overhead);
	m = bench_median(v, nr);
	free(v);
	return m;
}

static double dp_median_overhead(const struct dp_result *res, unsigned nt, unsigned nr, int k,
				 unsigned ti)
{
	double *v = bench_xmalloc(nr * sizeof(double)), m;
	unsigned r;

	for (r = 0; r < nr; r++)
		v[r] = DP_RES(res, nt, nr, k, ti, r).overhead;
	m = bench_median(v, nr);
	free(v);
	return m;
}

/* Whether row k's overhead was above zero in every round at worker count
 * ti: a round at or below zero measured the noise, not a cost. */
static int dp_all_positive(const struct dp_result *res, unsigned nt, unsigned nr, int k,
			   unsigned ti)
{
	unsigned r;

	for (r = 0; r < nr; r++)
		if (!(DP_RES(res, nt, nr, k, ti, r).overhead > 0))
			return 0;
	return 1;
}

/* Whether the ratio row k / row base at worker count ti means something:
 * the denominator's overhead above twice the noise, and both rows' above
 * zero in every round, so that no round's ratio is a quotient of noise (a
 * range such as "(<0–1.97)" said nothing). The targets' rule too
 * (pcpu_bench.c reads dp_ratio_min). */
static int dp_ratio_measurable(const struct dp_result *res, unsigned nt, unsigned nr, int k,
			       int base, unsigned ti)
{
	return dp_median_overhead(res, nt, nr, base, ti) > 2 * dp_noise(res, nt, nr, ti) &&
	       dp_all_positive(res, nt, nr, k, ti) && dp_all_positive(res, nt, nr, base, ti);
}

/* A value of a range that may fall below zero: "<0" there (a round whose
 * difference went negative is noise, not a negative cost). */
static const char *dp_fmt_low(char *buf, size_t len, double v, int digits)
{
	if (v < 0)
		snprintf(buf, len, "<0");
	else if (digits < 0)
		bench_fmt_num(buf, len, v);
	else
		snprintf(buf, len, "%.*f", digits, v);
	return buf;
}

/* An overhead cell: "within the noise" at or below twice the noise, or
 * where a round was at or below zero, otherwise median (min–max) of the
 * rounds. */
static const char *dp_fmt_overhead(char *buf, size_t len, struct bench_stat s, double noise)
{
	char a[32], b[32], c[32];

	if (!(s.med > 2 * noise) || !(s.min > 0))
		snprintf(buf, len, "within the noise");
	else
		snprintf(buf, len, "%s (%s–%s)", bench_fmt_num(a, sizeof(a), s.med),
			 dp_fmt_low(b, sizeof(b), s.min, -1), bench_fmt_num(c, sizeof(c), s.max));
	return buf;
}

/* A ratio of two overheads (bench_fmt_ratio()'s form), or "not measurable"
 * (dp_ratio_measurable()). */
static const char *dp_fmt_ratio(char *buf, size_t len, struct bench_stat s, int measurable)
{
	char lo[16], clo[16];

	if (!measurable)
		snprintf(buf, len, "not measurable");
	else if (isnan(s.ci_lo))
		snprintf(buf, len, "%.2f× (%s–%.2f)", s.med, dp_fmt_low(lo, sizeof(lo), s.min, 2),
			 s.max);
	else
		snprintf(buf, len, "%.2f× (%s–%.2f) [%s–%.2f]", s.med,
			 dp_fmt_low(lo, sizeof(lo), s.min, 2), s.max,
			 dp_fmt_low(clo, sizeof(clo), s.ci_lo, 2), s.ci_hi);
	return buf;
}

/* Row `k` / row `base`, the two overheads of round r: a paired ratio
 * cancels what the rounds do not share (the machine's speed, neighbours). */
static double dp_ratio(const struct dp_result *res, unsigned nt, unsigned nr, int k, int base,
		       unsigned ti, unsigned r)
{
	return DP_RES(res, nt, nr, k, ti, r).overhead / DP_RES(res, nt, nr, base, ti, r).overhead;
}

/* The target's comparison per worker count: pcpu / Per Core per round, with
 * Per Core's own overhead and the noise row beside it (a ratio of two
 * overheads means something only where Per Core's is well above the noise);
 * then the same rounds against the ideal rows: pcpu / its hand-written
 * floor, and that floor / Per Core. */
static const struct {
	int k, base;
	const char *head;
} dp_ratio_cols[] = {
	{ D_PCPU_MANY, D_PERCORE, "pcpu add_many / Per Core" },
	{ D_PCPU_ADD4, D_PERCORE, "pcpu 4 × add / Per Core" },
	{ D_OWNED_MANY, D_PERCORE, "owned add_many / Per Core" },
	{ D_OWNED_ADD4, D_PERCORE, "owned 4 × add / Per Core" },
	{ D_OWNED_ARRAY, D_PERCORE, "owned array / Per Core" },
	{ D_PCPU_MANY, D_IDEAL_MANY, "pcpu add_many / ideal one-read" },
	{ D_PCPU_ADD4, D_IDEAL_ADD4, "pcpu 4 × add / ideal 4 × add" },
	{ D_IDEAL_MANY, D_PERCORE, "ideal one-read / Per Core" },
	{ D_IDEAL_ADD4, D_PERCORE, "ideal 4 × add / Per Core" },
};
#define DP_NRATIO (sizeof(dp_ratio_cols) / sizeof(dp_ratio_cols[0]))
#define DP_NRATIO_PERCORE 5 /* the first table's columns: the rows / Per Core */

static void dp_print_ratios(const struct dp_result *res, unsigned nt, unsigned nr)
{
	double *v = bench_xmalloc(nr * sizeof(double));
	FILE *csv = bench_csv_open("dataplane_ratios.csv",
				   "ratio,workers,dp_work,median,min,max,q1,q3,ci_lo,ci_hi,rounds");
	unsigned ti, r, j, half;
	struct tbl tb;
	char buf[96];

	printf("Ratios of two rows' overheads in the same round; median (min–max) "
	       "[95 %% confidence interval of the median] of %u rounds; \"not measurable\" where "
	       "the second row's overhead is within the noise (median at most twice the noise "
	       "row's) or either row's was at or below zero in a round. "
	       "Beside the first table's, Per "
	       "Core's overhead and the noise row (|no statistics|, the reference loop against "
	       "itself), median (min–max), cycles per update; work %u TSC cycles per packet. The "
	       "second table compares pcpu with the hand-written ideal rseq rows (its floor) and "
	       "that floor with Per Core.\n\n",
	       nr, bench_opt.dp_work);
	for (half = 0; half < 2; half++) {
		unsigned from = half ? DP_NRATIO_PERCORE : 0, to = half ? DP_NRATIO : DP_NRATIO_PERCORE;

		if (half && !dp_usable(D_IDEAL_MANY)) {
			printf("(No ideal rows in this process: they need rseq on x86-64.)\n\n");
			break;
		}
		tbl_init(&tb, 1 + (to - from) + (half ? 0 : 2));
		tbl_cell(&tb, "workers");
		for (j = from; j < to; j++)
			tbl_cell(&tb, "%s", dp_ratio_cols[j].head);
		if (half)
			tbl_headers(&tb, NULL);
		else
			tbl_headers(&tb, "Per Core, cycles/update", "noise: abs(no statistics)", NULL);
		for (ti = 0; ti < nt; ti++) {
			tbl_cell(&tb, "%u", bench_opt.threads[ti]);
			for (j = from; j < to; j++) {
				struct bench_stat st;

				for (r = 0; r < nr; r++)
					v[r] = dp_ratio(res, nt, nr, dp_ratio_cols[j].k,
							dp_ratio_cols[j].base, ti, r);
				st = bench_stat_of(v, nr);
				tbl_cell(&tb, "%s", dp_fmt_ratio(buf, sizeof(buf), st,
					 dp_ratio_measurable(res, nt, nr, dp_ratio_cols[j].k,
							     dp_ratio_cols[j].base, ti)));
				if (csv)
					fprintf(csv, "%s_vs_%s,%u,%u,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%u\n",
						dp_variants[dp_ratio_cols[j].k].csv,
						dp_variants[dp_ratio_cols[j].base].csv,
						bench_opt.threads[ti], bench_opt.dp_work, st.med, st.min,
						st.max, st.q1, st.q3, st.ci_lo, st.ci_hi, nr);
			}
			if (half)
				continue;
			for (r = 0; r < nr; r++)
				v[r] = DP_RES(res, nt, nr, D_PERCORE, ti, r).overhead;
			tbl_cell(&tb, "%s", dp_fmt_overhead(buf, sizeof(buf), bench_stat_of(v, nr),
							    dp_noise(res, nt, nr, ti)));
			for (r = 0; r < nr; r++)
				v[r] = fabs(DP_RES(res, nt, nr, D_NONE, ti, r).overhead);
			tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), bench_stat_of(v, nr)));
		}
		tbl_print(&tb);
	}
	if (csv)
		fclose(csv);
	free(v);
}

void bench_dataplane(void)
{
	const unsigned nt = bench_opt.nthreads, nr = bench_opt.rounds;
	struct dp_result *res = bench_xmalloc(D_N * nt * nr * sizeof(*res));
	double *v = bench_xmalloc(nr * sizeof(double));
	unsigned iters, r, ti, j, k;
	int tn = -1;
	struct tbl tb;
	FILE *csv, *raw;
	char buf[96], work[160];
	const char *zname;
#define RES(k, ti, r) DP_RES(res, nt, nr, k, ti, r)
#define OVH(k, ti, r) (RES(k, ti, r).overhead)

	iters = dp_calibrate_work();
	zname = bench_index_name(bench_process_index());

	printf("## 3. Data-plane simulation (DPDK statistics guide, \"Performance Comparison\")\n\n");
	if (bench_opt.dp_work)
		snprintf(work, sizeof(work), "%u multiply-add steps of dummy work (calibrated to %u "
			 "TSC cycles%s)", iters, bench_opt.dp_work,
			 bench_opt.dp_work == 1000 ? ", DPDK's" : "; DPDK's is 1000");
	else
		snprintf(work, sizeof(work), "no dummy work (`--dp-work 0`; DPDK's is 1000 TSC "
			 "cycles): %u multiply-add step that draws the packet", iters);
	printf("Per packet: %s, "
	       "then 2 global + 2 per-flow counter updates (%u flows, worker affinity, all flows "
	       "move to the next worker every %u ms); a reader thread reads every counter each "
	       "millisecond%s. Each run alternates phases of %.0f µs with the pattern and without "
	       "statistics, all workers together; overhead = (cycles per packet with − without) / 4, "
	       "in TSC cycles (TSC %.3f GHz) of worker CPU time per counter update. Median (min–max) "
	       "of %u rounds of %u ms. The \"no statistics\" row runs the reference loop in both "
	       "phases: its |overhead| (± median (min–max)) is the noise floor; a row's overhead "
	       "at or below twice that reads \"within the noise\", and a round below zero (phases "
	       "with the pattern faster than without: noise) makes the cell \"within the noise\" too. Workers not pinned. pcpu rows use the default "
	       "zone (%s index, %zu B per counter per slot); the diagnostic row is Per Core with "
	       "16 B per counter, the footprint pcpu had before Core v2.\n\n",
	       work, DP_NFLOWS, DP_MIGRATE_MS,
	       bench_opt.no_reader ? " (**not in this run: --no-reader**)" : "",
	       (double)(1ull << BENCH_PHASE_SHIFT) / bench_tsc_ghz / 1e3, bench_tsc_ghz, nr,
	       bench_opt.duration_ms, zname, sizeof(struct pcpu_counter));

	for (r = 0; r < nr; r++) {
		bench_progress("dataplane: round %u/%u", r + 1, nr);
		for (ti = 0; ti < nt; ti++)
			for (j = 0; j < D_N; j++) {
				k = (j + r) % D_N;
				if (dp_usable((int)k))
					RES(k, ti, r) = dp_run((int)k, bench_opt.threads[ti], iters);
				else
					RES(k, ti, r) = (struct dp_result){ .cycles_per_pkt = NAN,
									  .ref_cycles_per_pkt = NAN,
									  .overhead = NAN };
			}
	}

	csv = bench_csv_open("dataplane.csv",
			     "variant,workers,cycles_per_update_median,cycles_per_update_min,"
			     "cycles_per_update_max,cycles_per_update_q1,cycles_per_update_q3,"
			     "cycles_per_packet_median,ref_cycles_per_packet_median,lost_pct_median,exact_runs,runs,"
			     "reader_passes_median,reader_decreases,dpdk_4_workers,dpdk_20_workers");
	raw = bench_csv_open("dataplane_rounds.csv",
			     "variant,workers,round,cycles_per_packet,ref_cycles_per_packet,cycles_per_update,lost_pct,exact,"
			     "reader_passes,reader_decreases");

	tbl_init(&tb, 4 + nt);
	tbl_cell(&tb, "pattern");
	for (ti = 0; ti < nt; ti++)
		tbl_cell(&tb, "%u worker%s", bench_opt.threads[ti], bench_opt.threads[ti] > 1 ? "s" : "");
	tbl_headers(&tb, "exact (lost % of total_pkts)", "DPDK Xeon 4 w", "DPDK Xeon 20 w", NULL);
	for (k = 0; k < D_N; k++) {
		unsigned inexact = 0, runs = 0;
		uint64_t decreases = 0;
		char lost[128] = "";

		tbl_cell(&tb, "%s", dp_variants[k].name);
		if (!dp_usable((int)k)) {
			for (ti = 0; ti < nt; ti++)
				tbl_cell(&tb, "—");
			tbl_cell(&tb, "not run: needs rseq (x86-64)");
			tbl_cell(&tb, "—");
			tbl_cell(&tb, "—");
			continue;
		}
		for (ti = 0; ti < nt; ti++) {
			struct bench_stat s;
			double cpp, ref, lostmed, passes;
			unsigned ex = 0;

			for (r = 0; r < nr; r++)
				v[r] = OVH(k, ti, r);
			s = bench_stat_of(v, nr);
			if (k == D_NONE) {
				struct bench_stat a;

				for (r = 0; r < nr; r++)
					v[r] = fabs(OVH(k, ti, r));
				a = bench_stat_of(v, nr);
				tbl_cell(&tb, "±%s", bench_fmt_stat(buf, sizeof(buf), a));
			} else {
				tbl_cell(&tb, "%s", dp_fmt_overhead(buf, sizeof(buf), s,
								    dp_noise(res, nt, nr, ti)));
			}
			for (r = 0; r < nr; r++)
				v[r] = RES(k, ti, r).cycles_per_pkt;
			cpp = bench_median(v, nr);
			for (r = 0; r < nr; r++)
				v[r] = RES(k, ti, r).ref_cycles_per_pkt;
			ref = bench_median(v, nr);
			for (r = 0; r < nr; r++)
				v[r] = (double)RES(k, ti, r).reader_passes;
			passes = bench_median(v, nr);
			for (r = 0; r < nr; r++) {
				struct dp_result *x = &RES(k, ti, r);

				v[r] = x->lost_pct;
				ex += x->exact;
				decreases += x->reader_decreases;
				if (raw)
					fprintf(raw, "%s,%u,%u,%.3f,%.3f,%.4f,%.4f,%d,%" PRIu64 ",%" PRIu64 "\n",
						dp_variants[k].csv, bench_opt.threads[ti], r,
						x->cycles_per_pkt, x->ref_cycles_per_pkt, OVH(k, ti, r),
						x->lost_pct, x->exact, x->reader_passes,
						x->reader_decreases);
			}
			lostmed = bench_median(v, nr);
			inexact += nr - ex;
			runs += nr;
			snprintf(lost + strlen(lost), sizeof(lost) - strlen(lost), "%s%.1f",
				 ti ? "/" : "", lostmed);
			if (csv)
				fprintf(csv, "%s,%u,%.4f,%.4f,%.4f,%.4f,%.4f,%.3f,%.3f,%.4f,%u,%u,%.0f,%" PRIu64
					",%.0f,%.0f\n",
					dp_variants[k].csv, bench_opt.threads[ti], s.med, s.min, s.max,
					s.q1, s.q3, cpp, ref, lostmed, ex, nr, passes,
					decreases, dp_variants[k].dpdk4, dp_variants[k].dpdk20);
		}
		if (k == D_NONE)
			tbl_cell(&tb, "—");
		else if (k == D_SHARED_NOSYNC)
			tbl_cell(&tb, "%s: lost %s %%", inexact ? "no" : "yes", lost);
		else if (inexact == 0)
			tbl_cell(&tb, "yes (%u/%u runs)%s", runs, runs,
				 decreases ? ", **reader saw a decrease**" : "");
		else
			tbl_cell(&tb, "**NO**: %u of %u runs wrong (lost %s %%)", inexact, runs, lost);
		if (isnan(dp_variants[k].dpdk4)) {
			tbl_cell(&tb, "—");
			tbl_cell(&tb, "—");
		} else {
			tbl_cell(&tb, "%.0f", dp_variants[k].dpdk4);
			tbl_cell(&tb, "%.0f", dp_variants[k].dpdk20);
		}
	}
	tbl_print(&tb);
	printf("Reference loop (no statistics), TSC cycles per packet, median per worker count:");
	for (ti = 0; ti < nt; ti++) {
		for (r = 0; r < nr; r++)
			v[r] = RES(D_NONE, ti, r).ref_cycles_per_pkt;
		printf("%s %u: %.0f", ti ? "," : "", bench_opt.threads[ti], bench_median(v, nr));
	}
	printf(".\n");
	printf("DPDK figures: Xeon Gold 6230N (Cascade Lake, 20 cores, 2.3 GHz fixed), DPDK 22.07, "
	       "GCC 10.3 -O3 -march=native; its Shared No Sync lost ~18%% of the global packet "
	       "count at 4 workers.\n\n");
	dp_print_ratios(res, nt, nr);

	for (ti = 0; ti < nt; ti++)
		if (bench_opt.threads[ti] == bench_ncpu && tn < 0)
			tn = (int)ti;
	if (tn < 0) /* no run at ncpu workers: take the largest run at most ncpu */
		for (ti = 0; ti < nt; ti++)
			if (bench_opt.threads[ti] <= bench_ncpu &&
			    (tn < 0 || bench_opt.threads[ti] > bench_opt.threads[tn]))
				tn = (int)ti;
	if (tn >= 0) {
		bench_targets.have_dataplane = 1;
		bench_targets.dp_workers = bench_opt.threads[tn];
		for (r = 0; r < nr; r++)
			v[r] = OVH(D_PCPU_MANY, tn, r);
		bench_targets.dp_pcpu_cycles = bench_median(v, nr);
		for (r = 0; r < nr; r++)
			v[r] = OVH(D_PCPU_ADD4, tn, r);
		bench_targets.dp_pcpu4_cycles = bench_median(v, nr);
		for (r = 0; r < nr; r++)
			v[r] = OVH(D_OWNED_ARRAY, tn, r);
		bench_targets.dp_owned_cycles = bench_median(v, nr);
		for (r = 0; r < nr; r++)
			v[r] = OVH(D_PERCORE, tn, r);
		bench_targets.dp_percore_cycles = bench_median(v, nr);
		bench_targets.dp_ideal_cycles[0] = dp_usable(D_IDEAL_MANY) ?
			dp_median_overhead(res, nt, nr, D_IDEAL_MANY, (unsigned)tn) : NAN;
		bench_targets.dp_ideal_cycles[1] = dp_usable(D_IDEAL_ADD4) ?
			dp_median_overhead(res, nt, nr, D_IDEAL_ADD4, (unsigned)tn) : NAN;
		/* The method's noise floor: the reference loop against itself. */
		for (r = 0; r < nr; r++)
			v[r] = fabs(OVH(D_NONE, tn, r));
		bench_targets.dp_noise_cycles = bench_median(v, nr);
		bench_targets.dp_work = bench_opt.dp_work;
		bench_targets.dp_rounds = nr;
		for (j = 0; j < 3; j++) {
			static const int rows[3] = { D_PCPU_MANY, D_PCPU_ADD4, D_OWNED_ARRAY };
			struct bench_stat s;

			for (r = 0; r < nr; r++)
				v[r] = dp_ratio(res, nt, nr, rows[j], D_PERCORE, tn, r);
			s = bench_stat_of(v, nr);
			bench_targets.dp_ratio_med[j] = s.med;
			bench_targets.dp_ratio_min[j] = s.min;
			bench_targets.dp_ratio_max[j] = s.max;
			if (j == 2)
				break;
			for (r = 0; r < nr; r++)
				v[r] = dp_ratio(res, nt, nr, j ? D_IDEAL_ADD4 : D_IDEAL_MANY, D_PERCORE,
						tn, r);
			bench_targets.dp_floor_med[j] = dp_usable(D_IDEAL_MANY) ? bench_median(v, nr) : NAN;
		}
	}
	if (csv)
		fclose(csv);
	if (raw)
		fclose(raw);
	free(res);
	free(v);
#undef OVH
#undef RES
}
