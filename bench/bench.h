/* SPDX-License-Identifier: MIT */
/**
 * @file bench/bench.h
 * The pcpu benchmark suite: what its files share.
 *
 * One program, pcpu_bench, reproduces the three comparisons the project's
 * seed documents publish, with pcpu beside them:
 *   incr       cost per increment, 1..4x ncpu threads (rseq slides 16-18),
 *              and the cost of learning the CPU number (slides 20-21);
 *   thesis     the lost-update table of the counter(9) thesis (figs 2.6, 2.7);
 *   dataplane  DPDK's statistics "Performance Comparison" (cycles per update);
 *   read       fetch and snapshot cost, resident memory per counter.
 *
 * Method, common to every section: all variants of one comparison run in the
 * same process, interleaved (round r runs every variant once, starting from
 * a different variant each round), so slow drift of a noisy machine (turbo,
 * neighbours, thermal) hits every variant alike; results are medians over
 * rounds with their min and max. Every run checks its final total.
 *
 * Files: pcpu_bench.c (options, machine description, targets), util.c (clocks,
 * statistics, tables, CSV), incr.c, thesis.c, dataplane.c, readside.c,
 * demo.c (--demo: the demonstration's one table) and demo_verdict.c (its
 * verdict, computed from the table's figures; demo_verdict.h).
 */
#ifndef PCPU_BENCH_H
#define PCPU_BENCH_H

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <pcpu/pcpu.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define BENCH_CACHELINE 64
#define BENCH_ALIGNED __attribute__((aligned(BENCH_CACHELINE)))
#define BENCH_INLINE static inline __attribute__((always_inline))
#define BENCH_MAX_THREADS 256
#define BENCH_MAX_LIST 16

/* ---- hand-written rseq sections (incr's and dataplane's "ideal" rows) ---- */

#if defined(__x86_64__)
/* The descriptor (struct rseq_cs: version, flags, start_ip,
 * post_commit_offset, abort_ip) of a section [1, 2) whose abort handler is
 * label 4, in section __rseq_cs, 32-byte aligned, at local label 3. */
#define BENCH_RSEQ_CS                                                            \
	".pushsection __rseq_cs, \"aw\"\n\t"                                     \
	".balign 32\n\t"                                                         \
	"3:\n\t"                                                                 \
	".long 0x0, 0x0\n\t"                                                     \
	".quad 1f, (2f - 1f), 4f\n\t"                                            \
	".popsection\n\t"
/* Its abort handler, label 4, out of line: the signature 0x53053053 as the
 * displacement of a `ud1` (glibc's and pcpu's convention on x86-64), then
 * `before` (instructions, may be "") and a jump to `retry` (e.g. "0b"). */
#define BENCH_RSEQ_ABORT_DO(before, retry)                                       \
	".pushsection __rseq_failure, \"ax\"\n\t"                                \
	".byte 0x0f, 0xb9, 0x3d\n\t"                                             \
	".long 0x53053053\n\t"                                                   \
	"4:\n\t"                                                                 \
	before                                                                   \
	"jmp " retry "\n\t"                                                      \
	".popsection\n\t"
#define BENCH_RSEQ_ABORT_RETRY(retry) BENCH_RSEQ_ABORT_DO("", retry)
/* Arms the section whose descriptor BENCH_RSEQ_CS just emitted (scratch
 * %rcx), then, inside it, leaves for the abort handler unless the index
 * field still holds %eax. Operands: [a] the rseq area, [ai] its index field
 * (cpu_id or mm_cid), [cs] the immediate PCPU__RSEQ_OFF_CS. The commit
 * follows, then label 2. */
#define BENCH_RSEQ_ARM_CMP_EAX                                                   \
	"leaq 3b(%%rip), %%rcx\n\t"                                               \
	"movq %%rcx, %c[cs](%[a])\n\t"                                            \
	"1:\n\t"                                                                 \
	"cmpl (%[ai]), %%eax\n\t"                                                 \
	"jnz 4f\n\t"
#endif

/* ---- options (pcpu_bench.c) ---------------------------------------------- */

enum bench_section {
	SEC_INCR = 1 << 0,
	SEC_GETCPU = 1 << 1,
	SEC_THESIS = 1 << 2,
	SEC_DATAPLANE = 1 << 3,
	SEC_READ = 1 << 4,
	SEC_ALL = (1 << 5) - 1,
};

struct bench_opts {
	const char *mode;        /* "demo", "quick", "default" or "full" */
	unsigned threads[BENCH_MAX_LIST]; /* thread / worker counts (incr, dataplane) */
	unsigned nthreads;
	unsigned duration_ms;    /* one timed run of incr and dataplane */
	uint64_t iterations;     /* thesis fig. 2.7: increments per thread */
	uint64_t getcpu_calls;   /* calls per timed run of the CPU-number getters */
	unsigned rounds;
	unsigned mem_passes;     /* passes over 10^6 counters in the memory test */
	unsigned max_snapshot;   /* largest snapshot: 10^4, 10^5 or 10^6 counters */
	const char *csv_dir;     /* NULL: no CSV files */
	unsigned sections;       /* enum bench_section bits */
	int no_reader;           /* dataplane without its reader (diagnostic) */
	unsigned dp_work;        /* dataplane: dummy work per packet, TSC cycles (DPDK: 1000) */
	unsigned pair_rounds;    /* incr: rounds of the paired pcpu / ideal comparison */
	int one_index;           /* incr: do not run the second process (other index) */
	int incr_child;          /* this is the second process: incr only, figures to fd 3 */
	int memory_child;        /* this is a memory-test process: figures to fd 3 */
	int argc;                /* the command line, to start those processes */
	char **argv;
};

extern struct bench_opts bench_opt;
extern unsigned bench_ncpu;     /* sysconf(_SC_NPROCESSORS_ONLN) */
extern double bench_tsc_ghz;    /* TSC ticks per nanosecond, calibrated */

/* ---- one timed run of an increment variant (incr.c; demo.c uses it too) --- */

/* The variants: every one adds 1 to one counter from every thread. */
enum bench_incr_kind {
	K_PRIVATE,      /* thread-private plain increment: the floor */
	K_RACY,         /* shared plain `+=`: loses updates */
	K_ATOMIC,       /* shared `lock add` */
	K_CAS,          /* shared compare-and-swap loop */
	K_MUTEX,        /* shared pthread mutex */
	K_SPIN,         /* shared spinlock */
	K_PERCPU_LOCK,  /* per-CPU slot (rseq cpu_id), `lock add`: the fallback's floor */
	K_TLS,          /* per-thread TLS slot, relaxed store (DPDK "per core") */
	K_IDEAL_CPU,    /* ideal rseq add, index rseq cpu_id (process index cpu) */
	K_IDEAL_MMCID,  /* ideal rseq add, index rseq mm_cid (process index mm_cid) */
	K_PCPU,         /* pcpu_counter_add (the process's index) */
	K_PCPU_FALLBACK,/* pcpu_counter_add_atomic: the fallback path, forced */
	K_OWNED,        /* pcpu_counter_add_owned: the thread's owned slot (pcpu/worker.h) */
	K_N
};
/* One run of `kind` on `nthreads` unpinned threads for bench_opt.duration_ms:
 * the threads' CPU time per increment (CLOCK_THREAD_CPUTIME_ID summed over
 * the threads / increments), increments per microsecond of wall time, and
 * whether the final value holds every increment. */
struct bench_incr_result {
	double ns_per_op; /* CPU ns per increment */
	double mops;      /* increments per microsecond of wall time */
	double lost_pct;  /* updates missing from the final value */
	int exact;
};
struct bench_incr_result bench_incr_run(int kind, unsigned nthreads);

/* ---- results the target summary needs (filled by the sections) ----------- */

/* The incr section's figures for one process (one slot index). Plain data, no
 * pointers: a second process (the other index) sends its copy through a pipe. */
struct bench_incr_targets {
	int have;
	int index;                          /* enum pcpu_index of the process */
	unsigned nslots;
	unsigned nt;
	unsigned threads[BENCH_MAX_LIST];
	/* medians over rounds of per-round ratios, per thread count (NAN: none) */
	double vs_ideal[BENCH_MAX_LIST];    /* pcpu add / ideal rseq add, same index field */
	double vs_private[BENCH_MAX_LIST];  /* pcpu add / thread-private `+=` */
	double ideal_vs_private[BENCH_MAX_LIST]; /* ideal rseq add / thread-private `+=` */
	unsigned pcpu_runs, pcpu_inexact;   /* pcpu_counter_add's runs, and those not exact */
	double racy_lost_max;               /* the racy `+=`'s worst run, % of its increments */
	double owned_vs_private[BENCH_MAX_LIST]; /* owned add / thread-private `+=` */
	double fb_vs_lock[BENCH_MAX_LIST];  /* pcpu_counter_add_atomic / bare per-slot lock add */
	double fb_flat;                     /* worst fallback(T) / fallback(1 thread) */
	unsigned fb_flat_threads;
	/* pcpu add / ideal rseq add paired in time (the two alternate within one
	 * run; incr.c, incr_pair): pair_med is the average over code placements
	 * (geometric), pair_best each loop at its fastest placement; min and max
	 * over all rounds' ratios */
	unsigned pair_rounds;
	double pair_med[BENCH_MAX_LIST], pair_best[BENCH_MAX_LIST];
	double pair_min[BENCH_MAX_LIST], pair_max[BENCH_MAX_LIST];
};

/* One configuration of the memory test, measured in a fresh process. */
struct bench_mem_result {
	int ok;
	int index;                 /* enum pcpu_index */
	unsigned nslots, threads, slots_resident;
	double rss_b;              /* process Rss delta (smaps_rollup) / counters */
	double floor_b;            /* the same for plain 8 B x threads arrays */
	double slot_b, mirror_b;   /* mincore over the handles' span, all slots / all mirrors */
	double span_b;             /* address span of the handles in slot 0 / counters */
	double alloc_ns;           /* per pcpu_counter_alloc() */
	int exact;
	char slots[96];            /* which slots hold resident pages, e.g. "0,1", "0-9" */
	char env[64];              /* what the parent asked: "PCPU_INDEX=cpu PCPU_NSLOTS=64" */
	char err[160];
};
#define BENCH_MEM_CONFIGS 4

struct bench_target_data {
	struct bench_incr_targets incr[2]; /* [0] this process, [1] the second process */

	int have_dataplane;
	unsigned dp_workers;           /* worker count the target is read at */
	double dp_pcpu_cycles;         /* pcpu (add_many) cycles per update */
	double dp_pcpu4_cycles;        /* pcpu (4 adds) cycles per update */
	double dp_percore_cycles;      /* Per Core pattern cycles per update */
	double dp_noise_cycles;        /* |no-statistics row|: the method's noise */
	unsigned dp_work;              /* dummy work per packet of that run, TSC cycles */
	unsigned dp_rounds;
	double dp_owned_cycles;        /* pcpu owned array (4 adds) cycles per update */
	/* per-round ratios pcpu / Per Core (overheads of the same round):
	 * [0] add_many, [1] 4 adds, [2] 4 owned array adds (issue 29's
	 * target); median, min, max over the rounds */
	double dp_ratio_med[3], dp_ratio_min[3], dp_ratio_max[3];
	/* [0] ideal one-read, [1] ideal 4 x add, each / Per Core, median of the
	 * per-round ratios: the floor of an rseq update (NAN: no ideal rows). */
	double dp_floor_med[2];
	double dp_ideal_cycles[2];     /* those ideal rows' cycles per update (NAN: none) */

	int have_snapshot;
	double snapshot_1e6_ms;        /* pcpu_counter_fetch_array, 10^6 counters */
	double snapshot_floor_ms;      /* plain-array memory floor, same rounds */
	double snapshot_vs_floor;      /* median of per-round ratios */
	unsigned snapshot_slots;       /* the slots a fetch walks (and the floor reads) */
	unsigned snapshot_nslots;      /* of pcpu_nslots() */

	unsigned nmem;
	struct bench_mem_result mem[BENCH_MEM_CONFIGS];
};
extern struct bench_target_data bench_targets;

/* ---- clocks (util.c) ------------------------------------------------------ */

uint64_t bench_now_ns(void);        /* CLOCK_MONOTONIC */
/* CLOCK_THREAD_CPUTIME_ID; inline, so that a benchmark built without
 * util.c (pcpu_bench_hcounter, bench/percpu_ops_librseq.c) has it too. */
static inline uint64_t bench_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64: a cheap, reproducible pseudo-random sequence for a
 * benchmark's inputs (*s must not be 0). Inline, as above. */
static inline uint64_t bench_xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}
void bench_sleep_ns(uint64_t ns);
/* Measures bench_ticks() against CLOCK_MONOTONIC; sets bench_tsc_ghz. */
void bench_calibrate_ticks(void);

/* A cycle-rate timestamp: the TSC on x86 (constant rate on any CPU with
 * constant_tsc, which every x86 of the last 15 years has), the virtual
 * counter on aarch64, CLOCK_MONOTONIC in ns elsewhere. */
BENCH_INLINE uint64_t bench_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return bench_now_ns();
#endif
}

/* Tells a spinning CPU it is spinning (frees the sibling hyperthread). */
BENCH_INLINE void bench_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#else
	__asm__ volatile("" ::: "memory");
#endif
}

/*
 * Two sides of a comparison in one run, alternating in time (the data plane's
 * pattern and reference loops, incr's pcpu and ideal adds): time is cut into
 * phases of 2^BENCH_PHASE_SHIFT TSC ticks; odd phases run one side, even
 * phases the other. Every thread derives the phase from the TSC, which all
 * CPUs share, so all threads switch together. A thread calls
 * bench_phase_tick() between batches of work with its count of work done so
 * far: at a phase change it charges its CPU time and its work since the last
 * change to the side that ran, and it returns the side to run now (1: odd).
 * Drift of the machine's speed slower than a phase (~0.2 ms) hits both sides
 * alike.
 */
#define BENCH_PHASE_SHIFT 19
struct bench_phases {
	uint64_t phase, cpu_mark, n_mark;
	uint64_t cpu_ns[2], n[2]; /* [0] even phases, [1] odd phases */
};

BENCH_INLINE void bench_phase_start(struct bench_phases *p, uint64_t n)
{
	p->phase = bench_ticks() >> BENCH_PHASE_SHIFT;
	p->cpu_mark = bench_thread_cpu_ns();
	p->n_mark = n;
}

BENCH_INLINE void bench_phase_charge(struct bench_phases *p, uint64_t cpu, uint64_t n)
{
	p->cpu_ns[p->phase & 1] += cpu - p->cpu_mark;
	p->n[p->phase & 1] += n - p->n_mark;
	p->cpu_mark = cpu;
	p->n_mark = n;
}

BENCH_INLINE unsigned bench_phase_tick(struct bench_phases *p, uint64_t n)
{
	uint64_t now = bench_ticks() >> BENCH_PHASE_SHIFT;

	if (now != p->phase) {
		bench_phase_charge(p, bench_thread_cpu_ns(), n);
		p->phase = now;
	}
	return (unsigned)(p->phase & 1);
}

/* The last charge, when the thread stops. */
BENCH_INLINE void bench_phase_end(struct bench_phases *p, uint64_t n)
{
	bench_phase_charge(p, bench_thread_cpu_ns(), n);
}

/* CPU time of the whole machine, of this process, and stolen by the
 * hypervisor, so that a report can say whether it ran undisturbed. */
struct bench_usage {
	double wall_s, busy_s, steal_s, self_s;
};
void bench_machine_usage(struct bench_usage *u);
/* Prints how much CPU others used since `start`, flagging a busy machine. */
void bench_print_usage(const char *what, const struct bench_usage *start);
/* The share of the machine others used (and the hypervisor stole) since
 * `start`; above BENCH_DISTURBED a run's timings are not representative. */
double bench_usage_share(const struct bench_usage *start);
#define BENCH_DISTURBED 0.05

/* ---- small helpers (util.c) ----------------------------------------------- */

/* A test-and-test-and-set spinlock: the "spinlock" of the seeds. */
BENCH_INLINE void bench_spin_lock(int *l)
{
	while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(l, __ATOMIC_RELAXED))
			bench_cpu_relax();
}

BENCH_INLINE void bench_spin_unlock(int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

/* The slot index of this process (pcpu's default zone; Core v2: one per
 * process, PCPU_INDEX=cpu|mm_cid) and its short name, "cpu" or "mm_cid". */
enum pcpu_index bench_process_index(void);
const char *bench_index_name(int index);

/* Runs this program again with `args` (NULL-terminated, after argv[0]) and
 * the environment changes `env` (NULL-terminated "NAME=value" to set, "NAME"
 * to unset); its stdout is ours. Whatever it writes to its fd 3 is read into
 * buf (at most len bytes). Returns the bytes read, -1 if it did not exit 0. */
long bench_run_self(char *const args[], const char *const env[], void *buf, size_t len);

/* Resident bytes of the whole process: Rss of /proc/self/smaps_rollup (walks
 * the page tables: exact), else /proc/self/statm. -1 on failure. */
long bench_rss_bytes(void);
/* A "Key:   123 kB" line of /proc/self/smaps_rollup (Rss, Pss, Rss_Shmem,
 * Private_Dirty...), in kB; -1 if absent or unreadable. */
long bench_smaps_rollup_kb(const char *key);

/* This thread's struct rseq, after making sure pcpu registered the thread,
 * or NULL when the thread has none (fallback mode). Inline, not in util.c:
 * pcpu_bench_stats uses it without the suite's other files. */
static inline char *bench_rseq_area(void)
{
#if PCPU_ARCH_HAVE_RSEQ
	/* pcpu_rseq_mode() registers the thread first when pcpu registers its
	 * own areas; only then does the area hold a valid cpu_id. */
	if (pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK)
		return NULL;
	return pcpu__arch_thread_pointer() + pcpu__g.cs_tpoff - PCPU__RSEQ_OFF_CS;
#else
	return NULL;
#endif
}

/* The field of `area` (bench_rseq_area()) that holds the process's index,
 * cpu_id or mm_cid, as pcpu reads it; NULL for a NULL area. The ideal rows
 * compare against it. */
static inline char *bench_rseq_index_field(char *area)
{
	if (!area)
		return NULL;
	return area + (pcpu_zone_index(NULL) == PCPU_INDEX_CPU ? PCPU__RSEQ_OFF_CPU_ID
							       : PCPU__RSEQ_OFF_MM_CID);
}

/* The CPU the thread runs on: rseq cpu_id when `area` is not NULL, else
 * sched_getcpu(). Always < pcpu_nslots(). */
BENCH_INLINE unsigned bench_cpu_of(const char *area, unsigned nslots)
{
	int cpu;

	if (area)
		cpu = __atomic_load_n((const int32_t *)(area + PCPU__RSEQ_OFF_CPU_ID),
				      __ATOMIC_RELAXED);
	else
		cpu = sched_getcpu();
	return (unsigned)cpu < nslots ? (unsigned)cpu : 0;
}

void *bench_xmalloc(size_t size);         /* zeroed, cache-line aligned; exits on failure */
void bench_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Option values: a whole number in [min, max] (1e8 is one), or a list of
 * 1..max_n such numbers in [1, max] separated by commas (thread and worker
 * counts); anything else exits with a message naming `opt`. */
unsigned long bench_parse_num(const char *opt, const char *s, unsigned long min, unsigned long max);
unsigned bench_parse_counts(const char *opt, const char *s, unsigned *out, unsigned max_n,
			    unsigned long max);
/* A progress line on stderr, "progress: ..." (bench/run.sh keeps these out
 * of the terminal and the report: they go to progress.log). */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Creates a joinable thread; exits on failure. cpu >= 0 pins it there. */
pthread_t bench_thread_start(void *(*fn)(void *), void *arg, int cpu);
/* The n-th CPU this process may run on (for pinned runs). */
int bench_allowed_cpu(unsigned n);
/* Reads a "Key:   123 kB" line of /proc/self/status, in kB (-1 if absent). */
long bench_proc_status_kb(const char *key);

/* ---- statistics over rounds (util.c) ------------------------------------- */

struct bench_stat {
	double med, min, max, q1, q3;
	/* 95 % confidence interval of the median, distribution-free (order
	 * statistics of a binomial(n, 1/2)); NAN below 6 values */
	double ci_lo, ci_hi;
	unsigned n;
};
struct bench_stat bench_stat_of(const double *v, unsigned n);
double bench_median(const double *v, unsigned n);

/* ---- output (util.c) ------------------------------------------------------ */

/* A markdown table collected cell by cell, printed with aligned columns. */
#define TBL_MAX_COLS 12
#define TBL_MAX_ROWS 160
struct tbl {
	unsigned ncols, nrows, cur;
	char *cells[TBL_MAX_ROWS + 1][TBL_MAX_COLS]; /* row 0: header */
};
/* The first row added is the header. */
void tbl_init(struct tbl *t, unsigned ncols);
void tbl_headers(struct tbl *t, ...); /* NULL-terminated strings: a whole row */
void tbl_cell(struct tbl *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tbl_print(struct tbl *t);                                /* prints and frees */

/* "12.3 (11.9–13.0)": median and range with a precision that suits it. */
const char *bench_fmt_stat(char *buf, size_t len, struct bench_stat s);
/* A ratio over rounds: "1.02× (0.98–1.07) [1.00–1.03]": median (min–max)
 * [95 % confidence interval of the median, when there is one]. */
const char *bench_fmt_ratio(char *buf, size_t len, struct bench_stat s, int digits);
const char *bench_fmt_num(char *buf, size_t len, double v);

/* Opens `name` in the CSV folder and writes the header line; NULL (and no
 * file) when --csv was not given. */
FILE *bench_csv_open(const char *name, const char *header);

/* ---- sections --------------------------------------------------------------- */

void bench_incr(void);      /* incr.c */
void bench_getcpu(void);    /* incr.c */
void bench_thesis(void);    /* thesis.c */
void bench_dataplane(void); /* dataplane.c */
void bench_readside(void);  /* readside.c */
void bench_memory_child(void); /* readside.c: pcpu_bench --memory-child */
void bench_demo(void);      /* demo.c: pcpu_bench --demo, the demonstration */

#endif /* PCPU_BENCH_H */
