/*
 * Statistics-layer microbenchmarks, for the benchmark suite's three
 * statistics comparisons (the figures in the statistics issue):
 *
 *   1. histogram record vs counter add (and a private increment, a gauge
 *      add, two counter adds) -- ns per operation, one thread and one
 *      thread per CPU; each histogram fed a predictable ramp and random
 *      values (log-uniform in 1 ms - 20 s, in ns: a server's latencies,
 *      which a branch predictor cannot learn), and prometheus-cpp's
 *      Histogram::Observe of the same random values where it is installed;
 *   2. consistent-group update (2 members) vs two plain counter adds
 *      (target: <= 2x) and vs pcpu_counter_add_many() of two;
 *   3. exposition time for 10^5 series of a server's mix (export_mix()):
 *      snapshot, then each format, and each format's time over 0.0.4's.
 * Beside 1, "ideal" rows run the record's memory operations in sections
 * written by hand (IDEAL_ADD_AT, IDEAL_PAIR_AT): the floor under a record
 * that pcpu's code does not set. Two of them bound what any record on the
 * histogram's layout (16-byte count-and-sum pairs) can cost: the leanest
 * log-linear record (precision a compile-time constant), and the pair
 * commit on one hot bucket. Three more (IDEAL_PARITY_AT) run the same on
 * the layout a record could use instead, one 8-byte commit with two sums
 * picked by the count's parity, so that the two layouts are compared in
 * one run.
 *
 * Method as in bench/: every variant of a comparison runs in the same
 * process, interleaved (round r runs each variant once, starting from a
 * different one), results are medians over rounds with min and max, and
 * every run checks its final total. Times are the thread's CPU time, so
 * other work on the machine is not charged to the operation measured.
 *
 * Two targets are printed with PASS/MISS: the consistent pair (group add2
 * <= 2x two counter adds) and the histogram record against its floor on
 * the same layout (pcpu's log-linear record <= 1.15x the same record built
 * on the hand-written pair commit: record_vs_floor(), runs of the two
 * paired in time, the median of the pairs' ratios; it also prints that
 * ratio split into the code and the memory, with the hand-written record
 * run on a histogram's own zone memory).
 *
 * `--quick` is the demonstration's run (seconds); `--smoke` a fixed, small
 * amount of work that checks every variant runs and counts right (ctest
 * runs it: no calibration against a clock, so it takes the same work on a
 * loaded machine); `--rounds N --ms M --series S` scale a run;
 * `--export-only` runs only the exposition; `--heap` only the heap a
 * process pays per exponential histogram series (bench_heap(); 10^4
 * series, or `--series S`).
 *
 * Each measured function (bench_*) takes a per-thread context and an
 * iteration count, so bench/ can call the same bodies.
 */
#include "../tests/check.h"
#include "bench.h" /* BENCH_RSEQ_CS, BENCH_RSEQ_ABORT_RETRY: the ideal rows' sections */
#include <pcpu/pcpu.h>
#include <pcpu/stats.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the measured operations ---- */

static pcpu_counter_t c_a, c_b, c_pair; /* c_pair: array of two */
static pcpu_gauge_t g_a;
static pcpu_histogram_t *h_explicit, *h_explicit16, *h_loglin, *h_native;
/* h_loglin's layout again: the memory the zone floor commits into
 * (bench_ideal_record_loglin_zone_rand), so h_loglin keeps pcpu's records. */
static pcpu_histogram_t *h_floor;
/* Sparse histograms (PCPU_HISTOGRAM_SPARSE, issue 61) of h_loglin's and
 * h_native's layouts: the same records, one load more. Left out where the
 * library has no sparse histograms (a build of an older commit), so this
 * file measures both. */
static pcpu_histogram_t *h_loglin_sparse, *h_native_sparse;

/* Random inputs: log-uniform in 1 ms - 20 s (ns), 2^16 of them (512 KiB,
 * read in order: the prefetcher hides the loads; far too many for a branch
 * predictor to learn their order). */
#define NRAND 65536
static int64_t rand_ns[NRAND];
static double rand_s[NRAND]; /* the same in seconds, for prometheus-cpp */

static void rand_init(void)
{
	uint64_t x = 0x2545f4914f6cdd1dull;
	size_t i;

	for (i = 0; i < NRAND; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		rand_ns[i] = (int64_t)(1e6 * exp((double)(x >> 11) * 0x1p-53 * log(20000.0)));
		rand_s[i] = (double)rand_ns[i] * 1e-9;
	}
}

#ifdef PCPU_BENCH_PROMCPP
void *promcpp_histogram_new(const double *bounds, size_t n);
uint64_t promcpp_observe_loop(void *h, const double *vals, size_t mask, uint64_t n);
static void *promcpp_h;
#endif
static pcpu_group_t *grp;
static uint64_t sink; /* keeps results alive; written with relaxed atomics */

/* The calling thread's CPU time: on a machine shared with other work, the
 * time others hold the CPU is not charged to the operation measured. */
static uint64_t thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define NOINLINE __attribute__((noinline))

static NOINLINE void bench_private(uint64_t n)
{
	uint64_t x = 0, i;
	for (i = 0; i < n; i++) {
		x++;
		__asm__ volatile("" : "+r"(x)); /* one increment per iteration, kept */
	}
	__atomic_store_n(&sink, x, __ATOMIC_RELAXED);
}

static NOINLINE void bench_counter_add(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_counter_add(c_a, 1);
}

static NOINLINE void bench_gauge_add(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_gauge_add(g_a, 1);
}

static NOINLINE void bench_hist_explicit(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_histogram_record(h_explicit, (int64_t)(i & 1023) * 1000000);
}

/* h_loglin's precision, a constant the leanest ideal record compiles in. */
#define LOGLIN_P 7

static NOINLINE void bench_hist_loglin(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_histogram_record(h_loglin, (int64_t)((i * 2654435761u) & 0xffffff));
}

static NOINLINE void bench_hist_explicit_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_histogram_record(h_explicit, rand_ns[i & (NRAND - 1)]);
}

static NOINLINE void bench_hist_explicit16_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_histogram_record(h_explicit16, rand_ns[i & (NRAND - 1)]);
}

static NOINLINE void bench_hist_loglin_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_histogram_record(h_loglin, rand_ns[i & (NRAND - 1)]);
}

static NOINLINE void bench_hist_native_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_histogram_record(h_native, rand_ns[i & (NRAND - 1)]);
}

#ifdef PCPU_HISTOGRAM_GROUP_BUCKETS
/* The record as inline layout 3 wrote it, before sparse histograms: the
 * pair at the array, no test of it (the dense record's added cost, in
 * one run). *hp is loaded at every record, as the rows above load their
 * global histogram. */
static inline __attribute__((always_inline)) void layout3_records(pcpu_histogram_t *const *hp, uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++) {
		int64_t v = rand_ns[i & (NRAND - 1)];
		size_t b = pcpu__histogram_locate(*hp, &v);

		pcpu__histogram_add_pair((*hp)->pcpu__c + 2 * b, 1, v);
	}
}

static NOINLINE void bench_hist_loglin_layout3_rand(uint64_t n)
{
	layout3_records(&h_loglin, n);
}

static NOINLINE void bench_hist_explicit_layout3_rand(uint64_t n)
{
	layout3_records(&h_explicit, n);
}

static NOINLINE void bench_hist_native_layout3_rand(uint64_t n)
{
	layout3_records(&h_native, n);
}

static NOINLINE void bench_hist_loglin_sparse_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_histogram_record(h_loglin_sparse, rand_ns[i & (NRAND - 1)]);
}

static NOINLINE void bench_hist_native_sparse_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_histogram_record(h_native_sparse, rand_ns[i & (NRAND - 1)]);
}
#endif

/* Where a record's time goes: the bucket lookup alone (its result kept),
 * and the pair add alone on one fixed bucket (pcpu/histogram.h's private
 * pcpu__histogram_add_pair(), the record's critical section), each over
 * the same random values. */
static NOINLINE void bench_lookup_loglin_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++) {
		size_t b = pcpu_histogram_bucket_of(h_loglin, rand_ns[i & (NRAND - 1)]);
		__asm__ volatile("" : : "r"(b));
	}
}

static NOINLINE void bench_lookup_explicit16_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++) {
		size_t b = pcpu_histogram_bucket_of(h_explicit16, rand_ns[i & (NRAND - 1)]);
		__asm__ volatile("" : : "r"(b));
	}
}

/* The same values' log-linear buckets, computed once (rand_init_buckets()):
 * the record's add without its lookup, on the buckets the record touches. */
static uint16_t rand_bucket[NRAND];

static NOINLINE void bench_pair_add_rand_bucket(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu__histogram_add_pair(h_loglin->pcpu__c + 2 * (size_t)rand_bucket[i & (NRAND - 1)], 1,
					 rand_ns[i & (NRAND - 1)]);
}

/* A plain counter add on the same words (each bucket's count): what a
 * single 8-byte add costs with the record's memory footprint. */
static NOINLINE void bench_counter_add_rand_bucket(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_counter_add(h_loglin->pcpu__c + 2 * (size_t)rand_bucket[i & (NRAND - 1)],
				 rand_ns[i & (NRAND - 1)]);
}

static NOINLINE void bench_pair_add_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu__histogram_add_pair(h_loglin->pcpu__c + 2 * 5, 1, rand_ns[i & (NRAND - 1)]);
}

/*
 * The ideal rows: the same memory operations written by hand as bench/'s
 * "ideal rseq add" (incr.c): the rseq area and its index field in
 * registers, the slot stride a shift, on a plain per-slot array laid out as
 * the log-linear histogram's pairs (16 bytes per bucket). They measure the
 * floor under a record that is not pcpu's code: an add of the record's
 * values to one fixed word (the denominator's floor), to the record's
 * random buckets, and the 16-byte pair commit there. x86-64 with rseq
 * only (ideal_ready()); elsewhere they are not run.
 */
#define IDEAL_SHIFT 17 /* 128 KiB per slot: the log-linear histogram's pairs */
static char *ideal_arr;  /* slot s at ideal_arr + (s << IDEAL_SHIFT) */
#define IDEAL_PAR_SHIFT 18 /* the 8-byte-commit layout's rows: 32 bytes per bucket */
static char *ideal_par;    /* slot s at ideal_par + (s << IDEAL_PAR_SHIFT) */

#if defined(__x86_64__) && PCPU_ARCH_HAVE_RSEQ /* not in a ThreadSanitizer build: no sections */
typedef long long ideal_v2 __attribute__((vector_size(16)));

/* Adds v to the word at byte `off` of the thread's slot of ideal_arr; area_
 * and ai_: bench_rseq_area() and bench_rseq_index_field() of the thread. */
#define IDEAL_ADD_AT(area_, ai_, off_, v_)                                      \
	__asm__ volatile(BENCH_RSEQ_CS                                          \
			 "0:\n\t"                                               \
			 "movl (%[ai]), %%eax\n\t"                              \
			 BENCH_RSEQ_ARM_CMP_EAX                                 \
			 "shlq %[shift], %%rax\n\t"                             \
			 "addq %[v], (%[p], %%rax)\n\t"                         \
			 "2:\n\t"                                               \
			 BENCH_RSEQ_ABORT_RETRY("0b")                           \
			 :                                                      \
			 : [ai] "r"(ai_), [a] "r"(area_),                       \
			   [p] "r"(ideal_arr + (off_)), [v] "r"(v_),            \
			   [cs] "i"(PCPU__RSEQ_OFF_CS), [shift] "i"(IDEAL_SHIFT) \
			 : "memory", "cc", "rax", "rcx")

static NOINLINE void bench_ideal_add_rand(uint64_t n)
{
	char *area = bench_rseq_area(), *ai = bench_rseq_index_field(area);
	uint64_t i;

	for (i = 0; i < n; i++)
		IDEAL_ADD_AT(area, ai, 16 * 5, rand_ns[i & (NRAND - 1)]);
}

static NOINLINE void bench_ideal_add_rand_bucket(uint64_t n)
{
	char *area = bench_rseq_area(), *ai = bench_rseq_index_field(area);
	uint64_t i;

	for (i = 0; i < n; i++)
		IDEAL_ADD_AT(area, ai, 16 * (size_t)rand_bucket[i & (NRAND - 1)], rand_ns[i & (NRAND - 1)]);
}

/* (1, v) added to the pair at byte `off_` of the thread's slot of the
 * per-slot array at `base_` (slot s at base_ + (s << shift_)), one 16-byte
 * commit; the vector is built before the section, so a retry re-adds it. */
#define IDEAL_PAIR_IN(base_, shift_, area_, ai_, off_, v_)                      \
	do {                                                                    \
		ideal_v2 add_ = { 1, (v_) };                                    \
		__asm__ volatile(BENCH_RSEQ_CS                                  \
				 "0:\n\t"                                       \
				 "movl (%[ai]), %%eax\n\t"                      \
				 BENCH_RSEQ_ARM_CMP_EAX                         \
				 "shlq %[shift], %%rax\n\t"                     \
				 "movdqa %[add], %%xmm15\n\t"                   \
				 "paddq (%[p], %%rax), %%xmm15\n\t"             \
				 "movdqa %%xmm15, (%[p], %%rax)\n\t"            \
				 "2:\n\t"                                       \
				 BENCH_RSEQ_ABORT_RETRY("0b")                   \
				 :                                              \
				 : [ai] "r"(ai_), [a] "r"(area_),               \
				   [p] "r"((base_) + (off_)), [add] "x"(add_),  \
				   [cs] "i"(PCPU__RSEQ_OFF_CS), [shift] "i"(shift_) \
				 : "memory", "cc", "rax", "rcx", "xmm15");      \
	} while (0)
/* The same on the bench's own array (IDEAL_SHIFT). */
#define IDEAL_PAIR_AT(area_, ai_, off_, v_) IDEAL_PAIR_IN(ideal_arr, IDEAL_SHIFT, area_, ai_, off_, v_)

/* A whole log-linear record with the ideal section: pcpu's lookup (the
 * inline code the record runs), then the hand-written pair commit. */
static NOINLINE void bench_ideal_record_loglin_rand(uint64_t n)
{
	char *area = bench_rseq_area(), *ai = bench_rseq_index_field(area);
	uint64_t i;

	for (i = 0; i < n; i++) {
		int64_t v = rand_ns[i & (NRAND - 1)];

		IDEAL_PAIR_AT(area, ai, 16 * pcpu_histogram_bucket_of(h_loglin, v), v);
	}
}

/* The same record committing into a histogram's own memory: a second
 * log-linear histogram's pairs in pcpu's zone, whose slots lie
 * 2^PCPU_SLOT_STRIDE_SHIFT bytes apart (the bench's array: 2^IDEAL_SHIFT).
 * The ratio of the two floors is what the memory costs the record apart
 * from its code (record_vs_floor()). */
static NOINLINE void bench_ideal_record_loglin_zone_rand(uint64_t n)
{
	char *area = bench_rseq_area(), *ai = bench_rseq_index_field(area);
	uint64_t i;

	for (i = 0; i < n; i++) {
		int64_t v = rand_ns[i & (NRAND - 1)];

		IDEAL_PAIR_IN((char *)h_floor->pcpu__c, PCPU_SLOT_STRIDE_SHIFT, area, ai,
			      16 * pcpu_histogram_bucket_of(h_loglin, v), v);
	}
}

/*
 * The three loops each layout's commit runs (COMMIT(area, ai, off, v), a
 * bucket every `stride` bytes), generated once for both:
 *  - bench_ideal_<layout>_rand_bucket: the record's random buckets;
 *  - bench_ideal_<layout>_one_bucket: one fixed bucket, where each commit
 *    waits for the previous one's store (store-to-load forwarding), the
 *    chain a record runs where the values stay in one bucket (the ramp);
 *  - bench_ideal_record_fixed_p_<layout>: the leanest log-linear record
 *    the layout allows: the precision a compile-time constant (LOGLIN_P),
 *    the limit in a register, no scheme to dispatch on, then the commit.
 */
#define IDEAL_LOOPS(layout, COMMIT, stride)                                      \
	static NOINLINE void bench_ideal_##layout##_rand_bucket(uint64_t n)      \
	{                                                                        \
		char *area = bench_rseq_area(), *ai = bench_rseq_index_field(area); \
		uint64_t i;                                                      \
		for (i = 0; i < n; i++)                                          \
			COMMIT(area, ai, (stride) * (size_t)rand_bucket[i & (NRAND - 1)], \
			       rand_ns[i & (NRAND - 1)]);                        \
	}                                                                        \
	static NOINLINE void bench_ideal_##layout##_one_bucket(uint64_t n)       \
	{                                                                        \
		char *area = bench_rseq_area(), *ai = bench_rseq_index_field(area); \
		uint64_t i;                                                      \
		for (i = 0; i < n; i++)                                          \
			COMMIT(area, ai, (stride) * 5, rand_ns[i & (NRAND - 1)]); \
	}                                                                        \
	static NOINLINE void bench_ideal_record_fixed_p_##layout(uint64_t n)     \
	{                                                                        \
		char *area = bench_rseq_area(), *ai = bench_rseq_index_field(area); \
		uint64_t limit = h_loglin->pcpu__limit, inf = h_loglin->pcpu__nbuckets - 1; \
		uint64_t i;                                                      \
		for (i = 0; i < n; i++) {                                        \
			int64_t v = rand_ns[i & (NRAND - 1)];                    \
			uint64_t u = v < 0 ? 0 : (uint64_t)v;                    \
			size_t b = u >= limit ? inf : pcpu__histogram_loglin(u, LOGLIN_P); \
			COMMIT(area, ai, (stride) * b, (int64_t)u);              \
		}                                                                \
	}

IDEAL_LOOPS(pair, IDEAL_PAIR_AT, 16)

/*
 * The other layout a record could commit with: 8-byte stores only, so the
 * hot bucket's chain is plain store-to-load forwarding, not a 16-byte one.
 * A bucket is [count, sum0, sum1, pad] (32 bytes); the live sum is
 * sum[count & 1]. The section reads the count and the live sum, writes
 * live + v into the other sum word (not yet visible: a retry after an
 * abort rewrites it from the same count and sum, so it is idempotent) and
 * commits count + 1, which makes that word the live one. A reader reads
 * count, sum[count & 1], count again and retries if the count moved.
 */
#define IDEAL_PARITY_AT(area_, ai_, off_, v_)                                   \
	__asm__ volatile(BENCH_RSEQ_CS                                          \
			 "0:\n\t"                                               \
			 "movl (%[ai]), %%eax\n\t"                              \
			 BENCH_RSEQ_ARM_CMP_EAX                                 \
			 "shlq %[shift], %%rax\n\t"                             \
			 "addq %[p], %%rax\n\t"                                 \
			 "movq (%%rax), %%rcx\n\t"                              \
			 "movl %%ecx, %%edx\n\t"                                \
			 "andl $1, %%edx\n\t"                                   \
			 "movq 8(%%rax, %%rdx, 8), %%rsi\n\t"                   \
			 "addq %[v], %%rsi\n\t"                                 \
			 "xorl $1, %%edx\n\t"                                   \
			 "movq %%rsi, 8(%%rax, %%rdx, 8)\n\t"                   \
			 "addq $1, %%rcx\n\t"                                   \
			 "movq %%rcx, (%%rax)\n\t"                              \
			 "2:\n\t"                                               \
			 BENCH_RSEQ_ABORT_RETRY("0b")                           \
			 :                                                      \
			 : [ai] "r"(ai_), [a] "r"(area_),                       \
			   [p] "r"(ideal_par + (off_)), [v] "r"(v_),            \
			   [cs] "i"(PCPU__RSEQ_OFF_CS), [shift] "i"(IDEAL_PAR_SHIFT) \
			 : "memory", "cc", "rax", "rcx", "rdx", "rsi")

IDEAL_LOOPS(parity, IDEAL_PARITY_AT, 32)
#define IDEAL_AVAILABLE 1
#else
#define bench_ideal_parity_rand_bucket NULL
#define bench_ideal_parity_one_bucket NULL
#define bench_ideal_record_fixed_p_parity NULL
#define bench_ideal_pair_one_bucket NULL
#define bench_ideal_record_fixed_p_pair NULL
#define bench_ideal_add_rand NULL
#define bench_ideal_add_rand_bucket NULL
#define bench_ideal_pair_rand_bucket NULL
#define bench_ideal_record_loglin_rand NULL
#define bench_ideal_record_loglin_zone_rand NULL
#define IDEAL_AVAILABLE 0
#endif

/* Sets up the ideal rows; 0 where they cannot run (no rseq, not x86-64, or
 * a histogram larger than a slot). The array has pcpu_nslots() slots: it
 * holds every index. */
static int ideal_ready(size_t nbuckets)
{
	size_t bytes = (size_t)pcpu_nslots() << IDEAL_SHIFT;
	size_t par_bytes = (size_t)pcpu_nslots() << IDEAL_PAR_SHIFT;

	if (!IDEAL_AVAILABLE || pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK ||
	    16 * nbuckets > ((size_t)1 << IDEAL_SHIFT) || 32 * nbuckets > ((size_t)1 << IDEAL_PAR_SHIFT))
		return 0;
	ideal_arr = aligned_alloc(4096, bytes);
	ideal_par = aligned_alloc(4096, par_bytes);
	if (!ideal_arr || !ideal_par) {
		free(ideal_arr);
		free(ideal_par);
		return 0;
	}
	memset(ideal_arr, 0, bytes);
	memset(ideal_par, 0, par_bytes);
	return 1;
}

/* The baseline of the random variants: a counter add of the same loaded
 * value (the load is part of both). */
static NOINLINE void bench_counter_add_rand(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_counter_add(c_b, rand_ns[i & (NRAND - 1)]);
}

#ifdef PCPU_BENCH_PROMCPP
static NOINLINE void bench_promcpp_rand(uint64_t n)
{
	__atomic_store_n(&sink, promcpp_observe_loop(promcpp_h, rand_s, NRAND - 1, n),
			 __ATOMIC_RELAXED);
}
#endif

static NOINLINE void bench_two_adds(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++) {
		pcpu_counter_add(c_a, 1);
		pcpu_counter_add(c_b, 1500);
	}
}

static NOINLINE void bench_add_many2(uint64_t n)
{
	pcpu_counter_t cs[2] = { pcpu_counter_at(c_pair, 0), pcpu_counter_at(c_pair, 1) };
	int64_t vs[2] = { 1, 1500 };
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_counter_add_many(cs, vs, 2);
}

static NOINLINE void bench_group_add2(uint64_t n)
{
	uint64_t i;
	for (i = 0; i < n; i++)
		pcpu_group_add2(grp, 0, 1, 1500);
}

/* prometheus-cpp's Observe takes a mutex and costs ~50x a counter add:
 * its threaded run makes 1/128 of the others' operations, for a run of
 * about the same length. */
#ifdef PCPU_BENCH_PROMCPP
#define MT_SLOW bench_promcpp_rand
#else
#define MT_SLOW NULL
#endif

struct variant {
	const char *name;
	void (*fn)(uint64_t);
	int ideal;               /* a hand-written row: run only where have_ideal */
	double ns[64];           /* per round, one thread */
	double ns_mt[64];        /* per round, one thread per CPU */
};

static struct variant variants[] = {
	{ .name = "private increment", .fn = bench_private },
	{ .name = "counter add", .fn = bench_counter_add },
	{ .name = "gauge add", .fn = bench_gauge_add },
	{ .name = "histogram record (11 explicit bounds)", .fn = bench_hist_explicit },
	{ .name = "histogram record (log-linear, p=7)", .fn = bench_hist_loglin },
	{ .name = "two counter adds", .fn = bench_two_adds },
	{ .name = "counter add_many(2)", .fn = bench_add_many2 },
	{ .name = "group add2 (consistent pair)", .fn = bench_group_add2 },
	{ .name = "counter add (random value)", .fn = bench_counter_add_rand },
	{ .name = "histogram record (11 explicit, random)", .fn = bench_hist_explicit_rand },
	{ .name = "histogram record (16 explicit, random)", .fn = bench_hist_explicit16_rand },
	{ .name = "histogram record (log-linear, random)", .fn = bench_hist_loglin_rand },
	{ .name = "histogram record (exponential s=3, random)", .fn = bench_hist_native_rand },
#ifdef PCPU_HISTOGRAM_GROUP_BUCKETS
	{ .name = "histogram record, layout 3's path (11 explicit, random)", .fn = bench_hist_explicit_layout3_rand },
	{ .name = "histogram record, layout 3's path (log-linear, random)", .fn = bench_hist_loglin_layout3_rand },
	{ .name = "histogram record, layout 3's path (exponential s=3, random)", .fn = bench_hist_native_layout3_rand },
	{ .name = "histogram record (log-linear sparse, random)", .fn = bench_hist_loglin_sparse_rand },
	{ .name = "histogram record (exponential s=3 sparse, random)", .fn = bench_hist_native_sparse_rand },
#endif
	{ .name = "  lookup only (log-linear, random)", .fn = bench_lookup_loglin_rand },
	{ .name = "  lookup only (16 explicit, random)", .fn = bench_lookup_explicit16_rand },
	{ .name = "  pair add only (random value)", .fn = bench_pair_add_rand },
	{ .name = "  pair add, random bucket (log-linear)", .fn = bench_pair_add_rand_bucket },
	{ .name = "  counter add, random bucket (same words)", .fn = bench_counter_add_rand_bucket },
	{ .name = "  ideal rseq add, one counter (random value)", .fn = bench_ideal_add_rand, .ideal = 1 },
	{ .name = "  ideal rseq add, random bucket", .fn = bench_ideal_add_rand_bucket, .ideal = 1 },
	{ .name = "  ideal rseq pair add, random bucket", .fn = bench_ideal_pair_rand_bucket, .ideal = 1 },
	{ .name = "  ideal record (lookup + ideal pair)", .fn = bench_ideal_record_loglin_rand, .ideal = 1 },
	{ .name = "  ideal record, the zone's memory", .fn = bench_ideal_record_loglin_zone_rand, .ideal = 1 },
	{ .name = "  ideal record, p fixed at compile time", .fn = bench_ideal_record_fixed_p_pair, .ideal = 1 },
	{ .name = "  ideal rseq pair add, one bucket", .fn = bench_ideal_pair_one_bucket, .ideal = 1 },
	{ .name = "  ideal 8-byte commit (count-parity sums), random bucket", .fn = bench_ideal_parity_rand_bucket, .ideal = 1 },
	{ .name = "  ideal 8-byte commit, one bucket", .fn = bench_ideal_parity_one_bucket, .ideal = 1 },
	{ .name = "  ideal record, p fixed, 8-byte commit", .fn = bench_ideal_record_fixed_p_parity, .ideal = 1 },
#ifdef PCPU_BENCH_PROMCPP
	/* One prometheus::Histogram, shared by the threads as pcpu's rows
	 * share theirs (its Observe takes a mutex). */
	{ .name = "prometheus-cpp Observe (11, random)", .fn = bench_promcpp_rand },
#endif
};
#define NVAR (sizeof variants / sizeof variants[0])

static struct variant *variant_of(void (*fn)(uint64_t))
{
	size_t i;

	for (i = 0; i < NVAR; i++)
		if (variants[i].fn == fn)
			return &variants[i];
	abort();
}

static void stats3(double *v, unsigned n, double *med, double *min, double *max);

/* The median over `rounds` rounds of a variant's single-thread ns per op. */
static double median_of(void (*fn)(uint64_t), unsigned rounds)
{
	double med, mn, mx;

	stats3(variant_of(fn)->ns, rounds, &med, &mn, &mx);
	return med;
}

struct mt_arg {
	void (*fn)(uint64_t);
	uint64_t n;
	pthread_barrier_t *bar;
	uint64_t ns;
};

static void *mt_main(void *p)
{
	struct mt_arg *a = p;
	uint64_t t0;

	pthread_barrier_wait(a->bar);
	t0 = thread_ns();
	a->fn(a->n);
	a->ns = thread_ns() - t0;
	return NULL;
}

/* Runs fn in `threads` threads, n iterations each; mean ns per op per
 * thread (each thread's own CPU time, averaged). */
static double run_mt(void (*fn)(uint64_t), unsigned threads, uint64_t n)
{
	pthread_t th[256];
	struct mt_arg a[256];
	pthread_barrier_t bar;
	double total = 0;
	unsigned t;

	pthread_barrier_init(&bar, NULL, threads);
	for (t = 0; t < threads; t++) {
		a[t].fn = fn;
		a[t].n = n;
		a[t].bar = &bar;
		CHECK(pthread_create(&th[t], NULL, mt_main, &a[t]) == 0);
	}
	for (t = 0; t < threads; t++) {
		CHECK(pthread_join(th[t], NULL) == 0);
		total += (double)a[t].ns / (double)n;
	}
	pthread_barrier_destroy(&bar);
	return total / threads;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void stats3(double *v, unsigned n, double *med, double *min, double *max)
{
	double tmp[257];

	CHECK(n >= 1 && n <= 257);
	memcpy(tmp, v, n * sizeof *v);
	qsort(tmp, n, sizeof *tmp, cmp_double);
	*min = tmp[0];
	*max = tmp[n - 1];
	*med = n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* ---- the histogram target: the record against its floor ---- */

/* The target: pcpu's log-linear record at most this many times the same
 * record on the hand-written pair commit. */
#define RECORD_FLOOR_TARGET 1.15

/*
 * pcpu's log-linear record of random values (bench_hist_loglin_rand)
 * against the record built on the hand-written section
 * (bench_ideal_record_loglin_rand: pcpu's inline lookup, then IDEAL_PAIR_AT
 * on the same 16-byte count-and-sum layout), paired in time: `pairs` times,
 * one run of each over the same n values, each timed by the thread's CPU
 * time; the ratio of the two runs of a pair, median (and min, max) over the
 * pairs, in *t. Two runs next to each other see the same machine, so the
 * ratio does not move with other work on it the way two separately taken
 * medians can. Each pair also runs the floor on a histogram's own zone
 * memory (bench_ideal_record_loglin_zone_rand), the three in a rotating
 * order, to split the ratio: *code, pcpu's record over that floor (the
 * same memory: what pcpu's code costs over the hand-written one), and
 * *mem, that floor over the target's (the same code: what the zone's
 * memory costs over the bench's array). NaN where the ideal rows cannot
 * run (no rseq, not x86-64).
 */
struct ratio3 {
	double med, min, max;
};

static void record_vs_floor(unsigned pairs, uint64_t n, struct ratio3 *t, struct ratio3 *code,
			    struct ratio3 *mem)
{
	void (*fns[3])(uint64_t) = { bench_hist_loglin_rand, bench_ideal_record_loglin_rand,
				     bench_ideal_record_loglin_zone_rand };
	double rt[257], rc[257], rm[257];
	unsigned p, k;

	t->med = t->min = t->max = NAN;
	*code = *mem = *t;
	if (!fns[1] || pairs == 0) /* NULL without the ideal rows */
		return;

	if (pairs > 257)
		pairs = 257;
	for (p = 0; p < pairs; p++) {
		uint64_t ns[3];

		for (k = 0; k < 3; k++) {
			unsigned f = (p + k) % 3;
			uint64_t t0 = thread_ns();

			fns[f](n);
			ns[f] = thread_ns() - t0;
		}
		for (k = 0; k < 3; k++)
			if (!ns[k])
				ns[k] = 1;
		rt[p] = (double)ns[0] / (double)ns[1];
		rc[p] = (double)ns[0] / (double)ns[2];
		rm[p] = (double)ns[2] / (double)ns[1];
	}
	stats3(rt, pairs, &t->med, &t->min, &t->max);
	stats3(rc, pairs, &code->med, &code->min, &code->max);
	stats3(rm, pairs, &mem->med, &mem->min, &mem->max);
}

/* ---- exposition of 10^5 series ---- */

/*
 * The registry exposed: a server's mix of `nseries` series (10^5 by
 * default), in parts of nseries / 100:
 *   50  flow_packets_total{flow}                counter, 1 label
 *   20  http_requests_total{method,code,handler} counter, 3 labels
 *   20  queue_depth{queue}                       gauge, 1 label
 *    9  cache_fill_ratio{cache}                  gauge scaled by 10^-3, 1 label
 *    1  histograms, each series with observations, exposed in seconds:
 *       60% rpc_duration_seconds{method}, 11 explicit bounds;
 *       30% db_query_duration_seconds{table}, log-linear p = 7 (4 `le`
 *           per power of two: 33 exposed);
 *       10% request_duration_seconds{route}, exponential schema 3 (native
 *           in protobuf, 4 `le` per power of two in the text formats).
 * Counters and gauges hold varied values; histogram series 32 random
 * latencies each (their sums are doubles to format).
 */
struct mix_family {
	const char *name, *help;
	enum pcpu_metric_type type;
	unsigned nlabels;
	const char *labels[3];
	unsigned percent;
	int scale;
	const struct pcpu_histogram_layout *layout;
};

static void export_mix(pcpu_registry_t *reg, unsigned nseries)
{
	static const int64_t b11[] = { 5000000,   10000000,  25000000,   50000000,
				       100000000, 250000000, 500000000,  1000000000,
				       2500000000, 5000000000, 10000000000 };
	static const struct pcpu_histogram_layout explicit = { .scheme = PCPU_HISTOGRAM_EXPLICIT,
							       .bounds = b11, .nbounds = 11 };
	static const struct pcpu_histogram_layout loglin = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR,
							     .precision_bits = 7,
							     .max_value = (int64_t)60 * 1000000000 };
	static const struct pcpu_histogram_layout expo = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL,
							   .schema = 3 };
	static const char *const methods[] = { "GET", "POST", "PUT", "DELETE" };
	static const char *const codes[] = { "200", "201", "204", "301", "404", "500", "503" };
	const struct mix_family fams[] = {
		{ "flow_packets_total", "Packets per flow.", PCPU_METRIC_COUNTER, 1, { "flow" }, 50, 0, NULL },
		{ "http_requests_total", "HTTP requests by method, status code and handler.",
		  PCPU_METRIC_COUNTER, 3, { "method", "code", "handler" }, 20, 0, NULL },
		{ "queue_depth", "Items waiting in each queue.", PCPU_METRIC_GAUGE, 1, { "queue" }, 20, 0, NULL },
		{ "cache_fill_ratio", "Fraction of each cache in use.", PCPU_METRIC_GAUGE, 1, { "cache" }, 9, -3, NULL },
	};
	const struct mix_family hists[] = {
		{ "rpc_duration_seconds", "RPC latency.", PCPU_METRIC_HISTOGRAM, 1, { "method" }, 60, -9, &explicit },
		{ "db_query_duration_seconds", "Query latency.", PCPU_METRIC_HISTOGRAM, 1, { "table" }, 30, -9, &loglin },
		{ "request_duration_seconds", "Request latency.", PCPU_METRIC_HISTOGRAM, 1, { "route" }, 10, -9, &expo },
	};
	unsigned part = nseries / 100, k, i, j, r = 0;

	for (k = 0; k < 4 + 3; k++) {
		const struct mix_family *m = k < 4 ? &fams[k] : &hists[k - 4];
		unsigned n = k < 4 ? m->percent * part : m->percent * part / 100;
		struct pcpu_family_desc d;
		pcpu_family_t *f;

		memset(&d, 0, sizeof d);
		d.name = m->name;
		d.help = m->help;
		d.type = m->type;
		d.nlabels = m->nlabels;
		d.label_names = m->labels;
		d.scale_exp10 = m->scale;
		d.histogram = m->layout;
		if (m->type == PCPU_METRIC_HISTOGRAM)
			d.unit = "seconds";
		CHECK((f = pcpu_registry_family(reg, &d)));
		for (i = 0; i < n; i++) {
			char v0[48], v2[48];
			const char *vals[3] = { v0, codes[i % 7], v2 };

			if (m->nlabels == 3) {
				vals[0] = methods[i % 4];
				snprintf(v2, sizeof v2, "/api/v1/resource%u", i / 28);
			} else if (k == 0) {
				snprintf(v0, sizeof v0, "10.0.%u.%u:%u", (i >> 8) & 255, i & 255, 1024 + i % 50000);
			} else {
				snprintf(v0, sizeof v0, "%s_%u", m->labels[0], i);
			}
			if (m->type == PCPU_METRIC_COUNTER) {
				pcpu_counter_t c = pcpu_family_counter(f, vals);

				CHECK(c);
				pcpu_counter_add(c, (int64_t)i * 7919 % 1000003);
			} else if (m->type == PCPU_METRIC_GAUGE) {
				pcpu_gauge_t g = pcpu_family_gauge(f, vals);

				CHECK(g);
				pcpu_gauge_set(g, (int64_t)(i * 37u % 1001u));
			} else {
				pcpu_histogram_t *h = pcpu_family_histogram(f, vals);

				CHECK(h);
				for (j = 0; j < 32; j++)
					pcpu_histogram_record(h, rand_ns[r++ % NRAND]);
			}
		}
	}
}

static void bench_export(unsigned nseries, unsigned rounds)
{
	static const char *const names[] = { NULL, "Prometheus 0.0.4", "OpenMetrics 1.0", "JSON",
					     "protobuf delimited" };
	pcpu_registry_t *reg = pcpu_registry_create();
	double snap[64], fmt_ms[5][64], med0 = 0;
	size_t bytes[5] = { 0 }, total = 0, i;
	unsigned r, k;
	uint64_t t0, t_reg;

	CHECK(reg);
	t0 = now_ns();
	export_mix(reg, nseries);
	t_reg = now_ns() - t0;
	for (r = 0; r < rounds; r++) {
		struct pcpu_snapshot *s;

		t0 = thread_ns();
		s = pcpu_registry_snapshot(reg);
		snap[r] = (double)(thread_ns() - t0) / 1e6;
		CHECK(s);
		for (total = 0, i = 0; i < s->nfamilies; i++)
			total += s->families[i].nseries;
		/* The formats in a different order each round. */
		for (k = 0; k < 4; k++) {
			enum pcpu_format fmt = (enum pcpu_format)(1 + (k + r) % 4);
			char *out;
			size_t len;

			if (!pcpu_format_supported(fmt))
				continue;
			t0 = thread_ns();
			CHECK(pcpu_snapshot_write(s, fmt, &out, &len) == 0);
			fmt_ms[fmt][r] = (double)(thread_ns() - t0) / 1e6;
			CHECK(len > total * 10);
			bytes[fmt] = len;
			free(out);
		}
		pcpu_snapshot_free(s);
	}
	printf("\nexposition of %zu series (counters 70%%, gauges 29%%, histograms 1%%: see "
	       "export_mix()), %u slots, %u rounds, the thread's CPU time; registering them took %.1f ms\n",
	       total, pcpu_nslots(), rounds, (double)t_reg / 1e6);
	printf("  %-28s %10s %10s %10s %10s %12s\n", "step", "median ms", "min", "max", "bytes",
	       "/ 0.0.4");
	{
		double med, mn, mx;

		stats3(snap, rounds, &med, &mn, &mx);
		printf("  %-28s %10.2f %10.2f %10.2f %10s %12s\n", "snapshot (lock held)", med, mn, mx,
		       "-", "-");
		for (k = 1; k <= 4; k++) {
			char label[48];

			snprintf(label, sizeof label, "write %s", names[k]);
			if (!pcpu_format_supported((enum pcpu_format)k)) {
				printf("  %-28s (not built: no protobuf-c)\n", label);
				continue;
			}
			stats3(fmt_ms[k], rounds, &med, &mn, &mx);
			if (k == 1)
				med0 = med;
			printf("  %-28s %10.2f %10.2f %10.2f %10zu %12.2f\n", label, med, mn, mx,
			       bytes[k], med / med0);
		}
	}
	pcpu_registry_destroy(reg);
}

/* ---- heap per histogram series ---- */

/* Bytes of heap in use: the arena's chunks and its mmap()ed blocks. */
static size_t heap_bytes(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

/*
 * `--heap`: the heap a process pays per exponential histogram series
 * (schema 3, nanoseconds exposed in seconds): the growth of heap in use
 * over `n` series, divided by n, for standalone histograms
 * (pcpu_histogram_create()) and for the series of one family of a private
 * registry. The per-CPU buckets are the zone's, not the heap's, so they
 * are not counted here. Each series' bounds and lookup table are the
 * layout's, shared (histogram.c), so they count once over the n series.
 */
static void bench_heap(unsigned n)
{
	struct pcpu_histogram_layout nl = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3,
					    .scale_exp10 = -9 };
	static const char *const label_names[] = { "id" };
	struct pcpu_family_desc d = { .name = "heap_seconds", .type = PCPU_METRIC_HISTOGRAM,
				      .nlabels = 1, .label_names = label_names,
				      .scale_exp10 = -9, .histogram = &nl };
	pcpu_histogram_t **hs = calloc(n, sizeof *hs);
	pcpu_registry_t *reg;
	pcpu_family_t *f;
	size_t h0;
	unsigned i;

	CHECK(hs != NULL);
	printf("heap per exponential histogram series (schema 3, %u series, mallinfo2)\n", n);
	h0 = heap_bytes();
	for (i = 0; i < n; i++)
		CHECK((hs[i] = pcpu_histogram_create(&nl)) != NULL);
	printf("  %-36s %10.1f B\n", "pcpu_histogram_create()", (double)(heap_bytes() - h0) / n);
	for (i = 0; i < n; i++)
		pcpu_histogram_destroy(hs[i]);
	free(hs);
	CHECK((reg = pcpu_registry_create()) != NULL);
	CHECK((f = pcpu_registry_family(reg, &d)) != NULL);
	h0 = heap_bytes();
	for (i = 0; i < n; i++) {
		char v[16];
		const char *vv[1] = { v };

		snprintf(v, sizeof v, "%u", i);
		CHECK(pcpu_family_histogram(f, vv) != NULL);
	}
	printf("  %-36s %10.1f B\n", "registry family series", (double)(heap_bytes() - h0) / n);
	pcpu_registry_destroy(reg);
}

int main(int argc, char **argv)
{
	unsigned rounds = 7, ms = 200, nseries = 100000, pairs = 101, export_rounds = 0, ncpu, r, v, i;
	int namew;
	int export_only = 0, smoke = 0, heap = 0, have_ideal;
	unsigned heap_series = 10000;
	size_t ideal_nbuckets = 0;
	uint64_t n;
	static const int64_t bounds[] = { 5000000,   10000000,  25000000,   50000000,
					  100000000, 250000000, 500000000,  1000000000,
					  2500000000, 5000000000, 10000000000 };
	static const int64_t bounds16[] = { 1000000,    2000000,    5000000,    10000000,
					    20000000,   50000000,   100000000,  200000000,
					    500000000,  1000000000, 2000000000, 3000000000,
					    5000000000, 10000000000, 15000000000, 20000000000 };
	struct pcpu_histogram_layout le = { PCPU_HISTOGRAM_EXPLICIT, bounds, 11, 0, 0, 0, 0, 0, 0 };
	struct pcpu_histogram_layout le16 = { PCPU_HISTOGRAM_EXPLICIT, bounds16, 16, 0, 0, 0, 0, 0, 0 };
	struct pcpu_histogram_layout ll = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0, LOGLIN_P,
					    (int64_t)600 * 1000000000, 0, 0, 0, 0 };
	int64_t gv[2];
	double group_ratio;
	/* --quick (bench/run.sh --quick): the operations and the targets only;
	 * the diagnostic rows (indented: a record's parts alone, hand-written
	 * variants of other layouts) and the lines built on them are for the
	 * other modes, where bench/stats.md explains them. */
	int quick = 0;

	for (i = 1; i < (unsigned)argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			quick = 1;
			rounds = 5;
			ms = 5;
			nseries = 10000;
			pairs = 41;
			export_rounds = 2;
		} else if (!strcmp(argv[i], "--smoke")) {
			smoke = 1;
			rounds = 1;
			nseries = 1000;
			pairs = 3;
			export_rounds = 1;
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < (unsigned)argc) {
			rounds = (unsigned)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--ms") && i + 1 < (unsigned)argc) {
			ms = (unsigned)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--series") && i + 1 < (unsigned)argc) {
			nseries = (unsigned)atoi(argv[++i]);
			heap_series = nseries;
		} else if (!strcmp(argv[i], "--export-only")) {
			export_only = 1;
		} else if (!strcmp(argv[i], "--heap")) {
			heap = 1;
		} else {
			fprintf(stderr, "usage: %s [--quick | --smoke] [--rounds N] [--ms M] [--series S] "
				"[--export-only | --heap]\n", argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || rounds > 64)
		rounds = 7;
	if (!export_rounds)
		export_rounds = rounds;
	if (heap) {
		bench_heap(heap_series ? heap_series : 1);
		return 0;
	}
	ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu > 256)
		ncpu = 256;
	c_a = pcpu_counter_alloc();
	c_b = pcpu_counter_alloc();
	c_pair = pcpu_counter_alloc_array(2);
	g_a = pcpu_gauge_alloc();
	h_explicit = pcpu_histogram_create(&le);
	h_explicit16 = pcpu_histogram_create(&le16);
	h_loglin = pcpu_histogram_create(&ll);
	h_floor = pcpu_histogram_create(&ll);
	CHECK(h_loglin && h_floor);
	{
		struct pcpu_histogram_layout nl = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3,
						    .scale_exp10 = -9 };

		h_native = pcpu_histogram_create(&nl);
		CHECK(h_native);
#ifdef PCPU_HISTOGRAM_GROUP_BUCKETS
		h_native_sparse = pcpu_histogram_create_ex(NULL, &nl, PCPU_HISTOGRAM_SPARSE);
		h_loglin_sparse = pcpu_histogram_create_ex(NULL, &ll, PCPU_HISTOGRAM_SPARSE);
		CHECK(h_native_sparse && h_loglin_sparse);
#endif
	}
	grp = pcpu_group_alloc(2, 1);
	CHECK(c_a && c_b && c_pair && g_a && h_explicit && h_explicit16 && h_loglin && grp);
	rand_init();
	for (i = 0; i < NRAND; i++) {
		rand_bucket[i] = (uint16_t)pcpu_histogram_bucket_of(h_loglin, rand_ns[i]);
		if ((size_t)rand_bucket[i] + 1 > ideal_nbuckets)
			ideal_nbuckets = (size_t)rand_bucket[i] + 1;
	}
	have_ideal = ideal_ready(ideal_nbuckets);
	if (export_only) {
		bench_export(nseries, export_rounds);
		return 0;
	}
#ifdef PCPU_BENCH_PROMCPP
	{
		double sb[11];

		for (i = 0; i < 11; i++)
			sb[i] = (double)bounds[i] * 1e-9;
		promcpp_h = promcpp_histogram_new(sb, 11);
	}
#endif

	/* Calibrate n so one run of a counter add takes about `ms` of CPU
	 * time; the smoke run does a fixed amount of work instead. */
	n = 1000000;
	if (smoke) {
		n = 20000;
	} else {
		uint64_t t0 = thread_ns();
		bench_counter_add(n);
		n = (uint64_t)((double)n * ms * 1e6 / (double)(thread_ns() - t0 + 1));
		if (n < 1000)
			n = 1000;
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < NVAR; i++) {
			struct variant *x = &variants[(i + r) % NVAR];
			uint64_t t0;

			if (quick && x->name[0] == ' ') {
				x->ns[r] = x->ns_mt[r] = NAN;
				continue;
			}

			if (!have_ideal && x->ideal) {
				x->ns[r] = x->ns_mt[r] = NAN;
				continue;
			}
			t0 = thread_ns();

			x->fn(n);
			x->ns[r] = (double)(thread_ns() - t0) / (double)n;
			x->ns_mt[r] = run_mt(x->fn, ncpu, (x->fn == MT_SLOW ? n / 128 : n / 4) + 1);
		}
	}
	printf("pcpu statistics microbenchmarks: mode %s, %u CPUs, %u rounds of %llu ops\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), ncpu, rounds, (unsigned long long)n);
	{
		/* The name column as wide as its longest entry. */
		const char *head = "ns per operation (thread CPU time)";

		namew = (int)strlen(head);
		for (v = 0; v < NVAR; v++)
			if ((int)strlen(variants[v].name) > namew)
				namew = (int)strlen(variants[v].name);
		printf("  %-*s %8s %8s %8s   %8s (%u threads)\n", namew, head, "median", "min", "max",
		       "median", ncpu);
	}
	for (v = 0; v < NVAR; v++) {
		double med, mn, mx, mmt, a, b;
		stats3(variants[v].ns, rounds, &med, &mn, &mx);
		stats3(variants[v].ns_mt, rounds, &mmt, &a, &b);
		if (quick && variants[v].name[0] == ' ')
			continue;
		if (!have_ideal && variants[v].ideal) {
			printf("  %-*s not run: needs rseq on x86-64\n", namew, variants[v].name);
			continue;
		}
		printf("  %-*s %8.2f %8.2f %8.2f   %8.2f\n", namew, variants[v].name, med, mn, mx,
		       mmt);
	}
	{
		/* Medians of the single-thread rounds, by variant. */
#define med_of(fn) median_of(fn, rounds)
		double c = med_of(bench_counter_add), cr = med_of(bench_counter_add_rand);
		double h11r = med_of(bench_hist_explicit_rand), h16r = med_of(bench_hist_explicit16_rand);
		double llr = med_of(bench_hist_loglin_rand), pair = med_of(bench_pair_add_rand);
		double lkl = med_of(bench_lookup_loglin_rand), lk16 = med_of(bench_lookup_explicit16_rand);
		double prb = med_of(bench_pair_add_rand_bucket), crb = med_of(bench_counter_add_rand_bucket);

		group_ratio = med_of(bench_group_add2) / med_of(bench_two_adds);
		printf("  group add2 / two counter adds: %.2fx\n", group_ratio);
		printf("  histogram record / counter add: %.2fx explicit, %.2fx log-linear (ramp)\n",
		       med_of(bench_hist_explicit) / c, med_of(bench_hist_loglin) / c);
		printf("  histogram record / counter add (random): %.2fx 11 explicit, "
		       "%.2fx 16 explicit, %.2fx log-linear\n", h11r / cr, h16r / cr, llr / cr);
#ifdef PCPU_BENCH_PROMCPP
		printf("  exponential (native, schema 3, ns exposed in s) / counter add (random): %.2fx\n",
		       med_of(bench_hist_native_rand) / cr);
		printf("  prometheus-cpp Observe / pcpu record (11 explicit, random): %.2fx\n",
		       med_of(bench_promcpp_rand) / h11r);
#else
		printf("  prometheus-cpp: not built (Debian prometheus-cpp-dev not installed)\n");
#endif
		if (quick)
			goto decomposed;
		/* The parts measured alone do not add up to the record: in the
		 * record they overlap in the core (a line once printed "2.74 ns =
		 * 1.49 + 2.77"). Side by side, never as a sum. */
		printf("  log-linear record (random) %.2f ns; alone, its lookup %.2f ns and its pair "
		       "add %.2f ns (they overlap in the record: no sum); pair add / counter add "
		       "%.2fx\n", llr, lkl, pair, pair / cr);
		printf("  16-explicit record (random) %.2f ns; alone, its lookup %.2f ns and its pair "
		       "add %.2f ns\n", h16r, lk16, pair);
		printf("  on the record's random buckets: pair add %.2f ns, counter add %.2f ns "
		       "(%.2fx and %.2fx a counter add of one counter)\n",
		       prb, crb, prb / cr, crb / cr);
		if (have_ideal) {
			double ia = med_of(bench_ideal_add_rand), ib = med_of(bench_ideal_add_rand_bucket);
			double ip = med_of(bench_ideal_pair_rand_bucket);
			double ir = med_of(bench_ideal_record_loglin_rand);
			double ifx = med_of(bench_ideal_record_fixed_p_pair);
			double i1 = med_of(bench_ideal_pair_one_bucket);
			double qr = med_of(bench_ideal_parity_rand_bucket);
			double q1 = med_of(bench_ideal_parity_one_bucket);
			double qfx = med_of(bench_ideal_record_fixed_p_parity);

			printf("  ideal rseq (hand-written): one counter %.2f ns (pcpu counter add / it "
			       "%.2fx); random buckets: add %.2f ns (%.2fx one counter), pair %.2f ns\n",
			       ia, cr / ia, ib, ib / ia, ip);
			printf("  log-linear record with the ideal section (pcpu's lookup + ideal pair): "
			       "%.2f ns = %.2fx the ideal add of one counter, %.2fx pcpu's counter add "
			       "(random); pcpu record / it %.2fx\n", ir, ir / ia, ir / cr, llr / ir);
			printf("  leanest record on this layout (ideal record, p fixed at compile "
			       "time): %.2f ns = %.2fx the ideal add of one counter, %.2fx pcpu's counter "
			       "add (random)\n", ifx, ifx / ia, ifx / cr);
			printf("  one hot bucket (the ramp's case): ideal pair add %.2f ns = %.2fx the "
			       "ideal add of one counter (16-byte store-to-load forwarding); pcpu pair "
			       "add / it %.2fx\n", i1, i1 / ia, pair / i1);
			printf("  another layout, not a floor (the 8-byte commit: two sums picked by the "
			       "count's parity): random buckets %.2f ns (%.2fx the pair), one bucket "
			       "%.2f ns (%.2fx the pair); its record %.2f ns = %.2fx pcpu's counter add "
			       "(random)\n", qr, qr / ip, q1, q1 / i1, qfx, qfx / cr);
		}
decomposed:
#undef med_of
		;
	}
	/* The targets, with PASS/MISS (bench/demo.md and bench/stats.md state
	 * them and their figures). */
	{
		struct ratio3 t, code, mem;

		record_vs_floor(have_ideal ? pairs : 0, NRAND, &t, &code, &mem);
		printf("  targets:\n");
		printf("    group add2 <= 2x two counter adds: %.3fx  %s\n", group_ratio,
		       group_ratio <= 2.0 ? "PASS" : "MISS");
		if (isnan(t.med))
			printf("    histogram record <= %.2fx the hand-written record on the same layout: "
			       "not measured (needs rseq on x86-64)\n", RECORD_FLOOR_TARGET);
		else
			printf("    histogram record <= %.2fx the hand-written record on the same layout "
			       "(log-linear, random values; pcpu's record / pcpu's lookup + hand-written "
			       "pair commit, %u runs of %u records each paired in time, median (min-max) "
			       "of the pairs' ratios): %.3fx (%.2f-%.2f)  %s\n"
			       "      split: pcpu's record / the hand-written record on a histogram's own "
			       "zone memory %.2fx (%.2f-%.2f) (the code); that record / the target's "
			       "floor %.2fx (%.2f-%.2f) (the memory)\n",
			       RECORD_FLOOR_TARGET, pairs, NRAND, t.med, t.min, t.max,
			       t.med <= RECORD_FLOOR_TARGET ? "PASS" : "MISS", code.med, code.min,
			       code.max, mem.med, mem.min, mem.max);
	}
	/* Every run counted: the group holds exactly what was added. */
	CHECK(pcpu_group_read(grp, 0, gv) == 0);
	CHECK(gv[1] == 1500 * gv[0] && gv[0] > 0);
	bench_export(nseries, export_rounds);
	return 0;
}
