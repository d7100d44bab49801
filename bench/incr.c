/* SPDX-License-Identifier: MIT */
/*
 * Section "incr": what one increment costs (rseq slides 16-18), and what
 * learning the current CPU number costs (slides 20-21).
 *
 * Every variant increments "one counter" shared by all threads, by the means
 * it names, for a fixed time; each thread counts its own increments, so the
 * final value of the counter can be checked exactly (and the racy `+=`
 * reports how much it lost).
 *
 * Unit: nanoseconds of CPU time per increment, summed over threads, divided
 * by the increments done (CLOCK_THREAD_CPUTIME_ID). With threads <= CPUs this
 * is the per-thread ns/increment of the slides; with more threads than CPUs
 * it stays comparable: a scalable variant stays flat instead of growing with
 * the oversubscription factor, and time a thread spends spinning on a lock is
 * still counted. Time a thread sleeps (the mutex) is not CPU time, so the
 * aggregate throughput, Mops/s of wall time, is reported beside it.
 * Oversubscribed threads are never pinned: the scheduler moves them freely.
 *
 * pcpu's slot index (rseq cpu_id or mm_cid) is chosen per process (Core v2,
 * environment PCPU_INDEX=cpu|mm_cid), so one process measures one index: the
 * section measures its own process's index, then runs this program again with
 * the other index (`--incr-child`: pcpu-related rows only) and collects that
 * process's target figures through a pipe. In each process, pcpu's add is
 * compared with the "ideal rseq add" on the same index field: a hand-written
 * minimal critical section on a static padded array, every constant hoisted
 * (see IDEAL_ADD).
 */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* SKETCH_ADD, RESERVED_ADD, LIMIT_ADD: in the paired comparison only, not
 * rows of the table */
enum { K_SKETCH = K_N, K_RESERVED, K_LIMIT };

static const struct {
	const char *name;    /* table row */
	const char *csv;     /* CSV key */
	const char *slide17; /* slide 17's closest row, x86-64 E5-2630 v3: 1 thread / 8 threads */
} incr_variants[K_N] = {
	[K_PRIVATE] = { "thread-private plain `+=` (floor)", "private", "2.3 / n/a (global volatile inc)" },
	[K_RACY] = { "shared plain `+=` (racy)", "racy", "—" },
	[K_ATOMIC] = { "shared atomic add", "atomic", "6.2 / 134.0 (global LOCK; inc)" },
	[K_CAS] = { "shared CAS loop", "cas", "10.0 / 356.0 (global LOCK; cmpxchg)" },
	[K_MUTEX] = { "shared pthread mutex", "mutex", "19.2 / 993.3 (global pthread mutex)" },
	[K_SPIN] = { "shared spinlock", "spinlock", "—" },
	[K_PERCPU_LOCK] = { "per-CPU slot, `lock add` (rseq cpu_id)", "percpu_lock_add", "6.2 / 6.9 (percpu LOCK; inc)" },
	[K_TLS] = { "per-thread TLS slot, relaxed store", "tls", "—" },
	[K_IDEAL_CPU] = { "ideal rseq add (hand-written, cpu_id)", "ideal_cpu", "2.1 / 2.6 (percpu rseq inc)" },
	[K_IDEAL_MMCID] = { "ideal rseq add (hand-written, mm_cid)", "ideal_mm_cid", "2.1 / 2.6 (percpu rseq inc)" },
	[K_PCPU] = { "pcpu_counter_add", "pcpu", "2.1 / 2.6 (percpu rseq inc)" },
	[K_PCPU_FALLBACK] = { "pcpu_counter_add_atomic (fallback forced)", "pcpu_fallback", "6.2 / 6.9 (percpu LOCK; inc)" },
	[K_OWNED] = { "pcpu_counter_add_owned (owned slot)", "pcpu_owned", "—" },
};

/* Increments between two looks at the stop flag. Small enough that a lock
 * variant under oversubscription does not overrun its time much, large
 * enough that the look costs nothing measurable. */
#define INCR_BATCH 32
/* Untimed increments first: faults pages in, registers rseq, warms caches. */
#define INCR_WARMUP 2048

/* State shared by the threads of one timed run. Each written word has its
 * own cache line, so variants do not disturb each other's lines. */
struct incr_shared {
	int64_t racy BENCH_ALIGNED;
	int64_t atomic BENCH_ALIGNED;
	int64_t cas BENCH_ALIGNED;
	struct {
		pthread_mutex_t lock;
		int64_t value;
	} mutex BENCH_ALIGNED;
	struct {
		int lock;
		int64_t value;
	} spin BENCH_ALIGNED;
	int stop BENCH_ALIGNED;
	/* read-only during the run: */
	struct percpu_slot *percpu BENCH_ALIGNED;
	unsigned nslots;
	pcpu_counter_t pc;
	pthread_barrier_t start;
};

struct percpu_slot {
	int64_t value;
} BENCH_ALIGNED;

struct incr_thread {
	int64_t priv BENCH_ALIGNED; /* K_PRIVATE's counter, alone on its line */
	struct incr_shared *sh BENCH_ALIGNED;
	int kind;
	uint64_t ops;      /* timed increments */
	uint64_t cpu_ns;   /* thread CPU time of the timed part */
	uint64_t end_ns;   /* when the thread saw the stop flag */
	int64_t tls_total; /* K_TLS: the thread's slot at the end */
};

/* Per-thread slot of K_TLS: static TLS, reached %fs-relative. */
static __thread int64_t tls_slot BENCH_ALIGNED;

/* ---- the ideal rseq add ------------------------------------------------------ */

/* The ideal rows' counter: a static array, one 64-byte line per slot. Its
 * size bounds the index (checked against pcpu_nslots() before use). */
#define IDEAL_MAXSLOT 1024
static struct {
	int64_t v;
	char pad[56];
} ideal_arr[IDEAL_MAXSLOT] BENCH_ALIGNED;

/* RESERVED_ADD's per-slot headers: word 0 of line i is slot i's "reserved
 * up to" offset, set to RESV_UPTO before each run, above resv_off (the
 * counter's offset, a variable so that it is a register, as a counter's
 * offset would be). resv_miss counts the adds that found their offset
 * unreserved: none, by construction. */
#define RESV_UPTO ((int64_t)1 << 20)
static struct {
	int64_t upto;
	char pad[56];
} resv_hdr[IDEAL_MAXSLOT] BENCH_ALIGNED;
static int64_t resv_off = 4096;
static uint64_t resv_miss BENCH_ALIGNED;
/* LIMIT_ADD's process-wide bound: the slots below it have memory. On a
 * line of its own, read by every add, written never here (set to the
 * slots before each run). Its misses count into resv_miss. */
static struct {
	uint32_t below;
	char pad[60];
} slot_limit BENCH_ALIGNED;

#if defined(__x86_64__)
/*
 * The ideal per-CPU add, written by hand: every constant hoisted (the rseq
 * area pointer is computed once per thread, outside the loop; the offset of
 * the index field, OFF, is an assembler constant; the array base is a
 * register the compiler keeps across the loop). The sequence is the
 * shortest correct one:
 *
 *   0: read the index;  arm rseq_cs;
 *   1: compare the index with what was read (it may have changed before
 *      the section was armed);  addq to arr[index]  (the commit);
 *   2: on abort (preemption, migration, signal inside [1, 2)), retry from 0.
 *
 * The descriptor and the abort handler are bench.h's (BENCH_RSEQ_CS,
 * BENCH_RSEQ_ABORT_RETRY), shared with the data plane's ideal rows.
 */
#define IDEAL_ADD(area_, OFF_, v_)                                               \
	__asm__ volatile(BENCH_RSEQ_CS                                           \
			 "0:\n\t"                                                \
			 "movl %c[off](%[a]), %%eax\n\t"                         \
			 "leaq 3b(%%rip), %%rcx\n\t"                             \
			 "movq %%rcx, %c[cs](%[a])\n\t"                          \
			 "1:\n\t"                                                \
			 "cmpl %c[off](%[a]), %%eax\n\t"                         \
			 "jnz 4f\n\t"                                            \
			 "shlq $6, %%rax\n\t"                                    \
			 "addq %[v], (%[arr], %%rax)\n\t"                        \
			 "2:\n\t"                                                \
			 BENCH_RSEQ_ABORT_RETRY("0b")                            \
			 :                                                       \
			 : [a] "r"(area_), [arr] "r"(ideal_arr), [off] "i"(OFF_), \
			   [cs] "i"(PCPU__RSEQ_OFF_CS), [v] "er"(v_)             \
			 : "memory", "cc", "rax", "rcx")
/*
 * A sketch, for the paired comparison only: pcpu's add as it was until
 * c8a60ee, kept so that every machine measures what a sign test costs.
 * pcpu's operands -- the index and rseq_cs fields reached %fs-relative
 * through pcpu's own offsets (pcpu__g), the index sign-extended -- and the
 * sign test on the flags of the shift (a negative index, an unregistered
 * area, sets SF: `js` leaves without adding). It measured 1.02-1.05x the
 * ideal add on a Zen 4 and 1.22-1.24x on a Zen 5, where pcpu's add now
 * reads the index as 16 bits and needs no sign test (bench/README.md,
 * "Core: the sign test's branch on a Zen 5"). It adds to ideal_arr, like
 * the ideal add.
 */
#define SKETCH_ADD(v_)                                                           \
	__asm__ volatile(BENCH_RSEQ_CS                                           \
			 "0:\n\t"                                                \
			 "movslq %%fs:(%[idx]), %%rax\n\t"                       \
			 "leaq 3b(%%rip), %%rcx\n\t"                             \
			 "movq %%rcx, %%fs:(%[cs])\n\t"                          \
			 "1:\n\t"                                                \
			 "cmpl %%fs:(%[idx]), %%eax\n\t"                         \
			 "jnz 4f\n\t"                                            \
			 "shlq $6, %%rax\n\t"                                    \
			 "js 2f\n\t"                                             \
			 "addq %[v], (%[arr], %%rax)\n\t"                        \
			 "2:\n\t"                                                \
			 BENCH_RSEQ_ABORT_RETRY("0b")                            \
			 :                                                       \
			 : [idx] "r"(pcpu__g.index_tpoff), [cs] "r"(pcpu__g.cs_tpoff), \
			   [arr] "r"(ideal_arr), [v] "er"(v_)                    \
			 : "memory", "cc", "rax", "rcx")
/*
 * A second sketch, for the paired comparison only: the add that memory
 * reserved on first write would take. Today every present CPU's page is
 * reserved for every object up front, so an add never faults on a full
 * tmpfs; to let memory follow the CPUs that write, the add would check,
 * inside the section, that its counter's offset lies below the slot's
 * "reserved up to" word, and leave for a slow path (reserve, retry) if not.
 * This is today's pcpu add (include/pcpu/arch/x86_64.h,
 * rseq_idx16_cmpeq_addv_indexed: movzwl, arm, cmpl, jnz, shlq, addq) with
 * that compare and branch before the commit:
 *
 *   cmpq %[off], (%[hdr], %rdx);  jbe 5f;  addq %[v], (%[arr], %rdx)
 *
 * Where the word lives: in a header at a fixed offset from the slot's base,
 * so its address is the same shifted index plus a second base register
 * (the region's, where the counter's base is region + offset), no extra
 * arithmetic. It is on a line of its own, not the counter's: a slot's
 * header is one word for all of the slot's counters, which sit anywhere in
 * the slot's pages, so only the first few could share its line. Every add
 * on the CPU reads it, so it stays in L1, as resv_hdr's line does here.
 * The miss path (label 5) is out of line, as the slow path would be; here
 * it counts the miss (resv_miss) and skips the add, and the words are set
 * so it never runs: incr_pair_run counts a run exact only if resv_miss
 * stayed 0 and the adds made up the total.
 */
/* The sketches' slow path (label 5), out of line as a real one would be:
 * it counts the miss (resv_miss, operand [miss]) and goes on past the
 * commit (label 2) without adding. */
#define INCR_MISS_PATH                                                           \
	".pushsection __rseq_failure, \"ax\"\n\t"                               \
	"5:\n\t"                                                                \
	"lock incq %[miss]\n\t"                                                 \
	"jmp 2b\n\t"                                                            \
	".popsection\n\t"
#define RESERVED_ADD(v_)                                                         \
	__asm__ volatile(BENCH_RSEQ_CS                                           \
			 "0:\n\t"                                                \
			 "movzwl %%fs:(%[idx]), %%edx\n\t"                       \
			 "leaq 3b(%%rip), %%rcx\n\t"                             \
			 "movq %%rcx, %%fs:(%[cs])\n\t"                          \
			 "1:\n\t"                                                \
			 "cmpl %%edx, %%fs:(%[idx])\n\t"                         \
			 "jnz 4f\n\t"                                            \
			 "shlq $6, %%rdx\n\t"                                    \
			 "cmpq %[off], (%[hdr], %%rdx)\n\t"                      \
			 "jbe 5f\n\t"                                            \
			 "addq %[v], (%[arr], %%rdx)\n\t"                        \
			 "2:\n\t"                                                \
			 INCR_MISS_PATH                                          \
			 BENCH_RSEQ_ABORT_RETRY("0b")                            \
			 : [miss] "+m"(resv_miss)                                \
			 : [idx] "r"(pcpu__g.index_tpoff), [cs] "r"(pcpu__g.cs_tpoff), \
			   [arr] "r"(ideal_arr), [hdr] "r"(resv_hdr), [off] "r"(resv_off), \
			   [v] "er"(v_)                                          \
			 : "memory", "cc", "rdx", "rcx")
/*
 * A third sketch, for the paired comparison only: memory reserved per slot
 * on first write with no third branch. The index is read inside the
 * section, after arming (a migration after that read aborts the section;
 * one before it is seen by the read), so the compare that today's add
 * spends on "is the index still the one read before arming" is spent on
 * "is the index below the process's slot limit" instead -- one process-wide
 * word, the slots below it having their pages in every published zone:
 *
 *   arm;  1: movzwl index, %edx;  cmpl limit, %edx;  jae 5f;
 *   shlq;  addq %[v], (%[arr], %rdx)
 *
 * An unregistered area's index (-1, -2) reads 0xffff or 0xfffe, above any
 * limit: the same jae leaves for the slow path, as today's compare does.
 * With mm_cid, whose values are dense from 0 and bounded by the threads
 * that run at once, the limit follows the threads that write; a thread
 * whose index is not below it takes the slow path (label 5, out of line),
 * which would reserve its slot's pages and raise the limit. Here it counts
 * the miss and skips the add, and the limit is set so it never runs.
 */
#define LIMIT_ADD(v_)                                                            \
	__asm__ volatile(BENCH_RSEQ_CS                                           \
			 "0:\n\t"                                                \
			 "leaq 3b(%%rip), %%rcx\n\t"                             \
			 "movq %%rcx, %%fs:(%[cs])\n\t"                          \
			 "1:\n\t"                                                \
			 "movzwl %%fs:(%[idx]), %%edx\n\t"                       \
			 "cmpl %[lim], %%edx\n\t"                                \
			 "jae 5f\n\t"                                            \
			 "shlq $6, %%rdx\n\t"                                    \
			 "addq %[v], (%[arr], %%rdx)\n\t"                        \
			 "2:\n\t"                                                \
			 INCR_MISS_PATH                                          \
			 BENCH_RSEQ_ABORT_RETRY("0b")                            \
			 : [miss] "+m"(resv_miss)                                \
			 : [idx] "r"(pcpu__g.index_tpoff), [cs] "r"(pcpu__g.cs_tpoff), \
			   [arr] "r"(ideal_arr), [lim] "m"(slot_limit.below),   \
			   [v] "er"(v_)                                          \
			 : "memory", "cc", "rdx", "rcx")
#define IDEAL_AVAILABLE 1
#else
#define SKETCH_ADD(v_) ((void)(v_))
#define RESERVED_ADD(v_) ((void)(v_))
#define LIMIT_ADD(v_) ((void)(v_))
#define IDEAL_ADD(area_, OFF_, v_) ((void)(area_), (void)(v_))
#define IDEAL_AVAILABLE 0
#endif

/* One increment by the means of `kind` (a constant where this is inlined). */
BENCH_INLINE void incr_op(const int kind, struct incr_shared *sh, int64_t *priv,
			  pcpu_counter_t pc, char *area, unsigned nslots, pcpu_worker_t ow)
{
	switch (kind) {
	case K_PRIVATE:
		*(volatile int64_t *)priv += 1;
		break;
	case K_RACY:
		*(volatile int64_t *)&sh->racy += 1;
		break;
	case K_ATOMIC:
		__atomic_fetch_add(&sh->atomic, 1, __ATOMIC_RELAXED);
		break;
	case K_CAS: {
		int64_t old = __atomic_load_n(&sh->cas, __ATOMIC_RELAXED);

		while (!__atomic_compare_exchange_n(&sh->cas, &old, old + 1, 1,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		break;
	}
	case K_MUTEX:
		pthread_mutex_lock(&sh->mutex.lock);
		sh->mutex.value++;
		pthread_mutex_unlock(&sh->mutex.lock);
		break;
	case K_SPIN:
		bench_spin_lock(&sh->spin.lock);
		sh->spin.value++;
		bench_spin_unlock(&sh->spin.lock);
		break;
	case K_PERCPU_LOCK:
		/* The CPU may change right after the read: the `lock` keeps the
		 * add exact anyway, which is what rseq saves. */
		__atomic_fetch_add(&sh->percpu[bench_cpu_of(area, nslots)].value, 1,
				   __ATOMIC_RELAXED);
		break;
	case K_TLS:
		/* One writer per slot: a relaxed store is enough for a reader
		 * on another thread to never see a torn value. */
		__atomic_store_n(&tls_slot, tls_slot + 1, __ATOMIC_RELAXED);
		break;
	case K_IDEAL_CPU:
		IDEAL_ADD(area, PCPU__RSEQ_OFF_CPU_ID, 1);
		break;
	case K_IDEAL_MMCID:
		IDEAL_ADD(area, PCPU__RSEQ_OFF_MM_CID, 1);
		break;
	case K_PCPU:
		pcpu_counter_add(pc, 1);
		break;
	case K_PCPU_FALLBACK:
		pcpu_counter_add_atomic(pc, 1);
		break;
	case K_OWNED:
		pcpu_counter_add_owned(ow, pc, 1);
		break;
	case K_SKETCH:
		SKETCH_ADD(1);
		break;
	case K_RESERVED:
		RESERVED_ADD(1);
		break;
	case K_LIMIT:
		LIMIT_ADD(1);
		break;
	}
}

BENCH_INLINE void incr_loop(struct incr_thread *t, const int kind)
{
	struct incr_shared *sh = t->sh;
	char *area = bench_rseq_area(); /* registers the thread for pcpu */
	unsigned nslots = sh->nslots;
	pcpu_counter_t pc = sh->pc;
	uint64_t n = 0, cpu0;
	unsigned i;
	pcpu_worker_t claimed = { 0 };

	/* A claim that fails (more threads than owned slots) leaves the zero
	 * claim: ordinary adds, exact still. */
	if (kind == K_OWNED && pcpu_worker_claim(&claimed) != 0)
		fprintf(stderr, "incr: no owned slot for a thread (PCPU_OWNED_SLOTS)\n");
	/* A copy whose address is never taken: the compiler keeps it in a
	 * register across the adds (pcpu/worker.h). */
	const pcpu_worker_t ow = claimed;
	for (i = 0; i < INCR_WARMUP; i++)
		incr_op(kind, sh, &t->priv, pc, area, nslots, ow);
	pthread_barrier_wait(&sh->start);
	cpu0 = bench_thread_cpu_ns();
	do {
		for (i = 0; i < INCR_BATCH; i++)
			incr_op(kind, sh, &t->priv, pc, area, nslots, ow);
		n += INCR_BATCH;
	} while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED));
	t->cpu_ns = bench_thread_cpu_ns() - cpu0;
	t->end_ns = bench_now_ns();
	t->ops = n;
	t->tls_total = tls_slot;
	if (ow.pcpu__off)
		pcpu_worker_release();
}

/* One loop per kind, each with its operation inlined: an indirect call per
 * increment would cost more than some of the increments measured. */
#define INCR_LOOP_FN(k) \
	static __attribute__((noinline)) void incr_loop_##k(struct incr_thread *t) { incr_loop(t, k); }
INCR_LOOP_FN(K_PRIVATE)
INCR_LOOP_FN(K_RACY)
INCR_LOOP_FN(K_ATOMIC)
INCR_LOOP_FN(K_CAS)
INCR_LOOP_FN(K_MUTEX)
INCR_LOOP_FN(K_SPIN)
INCR_LOOP_FN(K_PERCPU_LOCK)
INCR_LOOP_FN(K_TLS)
INCR_LOOP_FN(K_IDEAL_CPU)
INCR_LOOP_FN(K_IDEAL_MMCID)
INCR_LOOP_FN(K_PCPU)
INCR_LOOP_FN(K_PCPU_FALLBACK)
INCR_LOOP_FN(K_OWNED)

static void (*const incr_loops[K_N])(struct incr_thread *) = {
	incr_loop_K_PRIVATE, incr_loop_K_RACY, incr_loop_K_ATOMIC, incr_loop_K_CAS,
	incr_loop_K_MUTEX, incr_loop_K_SPIN, incr_loop_K_PERCPU_LOCK, incr_loop_K_TLS,
	incr_loop_K_IDEAL_CPU, incr_loop_K_IDEAL_MMCID, incr_loop_K_PCPU,
	incr_loop_K_PCPU_FALLBACK, incr_loop_K_OWNED,
};

static void *incr_thread_main(void *arg)
{
	struct incr_thread *t = arg;

	incr_loops[t->kind](t);
	return NULL;
}

struct bench_incr_result bench_incr_run(int kind, unsigned nthreads)
{
	struct incr_shared *sh = bench_xmalloc(sizeof(*sh));
	struct incr_thread *t = bench_xmalloc(nthreads * sizeof(*t));
	pthread_t *tid = bench_xmalloc(nthreads * sizeof(*tid));
	struct bench_incr_result res;
	uint64_t start, end = 0, ops = 0, cpu_ns = 0, expected, final = 0;
	unsigned i;

	sh->nslots = pcpu_nslots();
	sh->percpu = bench_xmalloc(sh->nslots * sizeof(*sh->percpu));
	pthread_mutex_init(&sh->mutex.lock, NULL);
	pthread_barrier_init(&sh->start, NULL, nthreads + 1);
	if (kind == K_PCPU || kind == K_PCPU_FALLBACK || kind == K_OWNED) {
		sh->pc = pcpu_counter_alloc();
		if (!sh->pc)
			bench_die("pcpu_counter_alloc failed");
	}
	if (kind == K_IDEAL_CPU || kind == K_IDEAL_MMCID)
		memset(ideal_arr, 0, sizeof(ideal_arr));

	for (i = 0; i < nthreads; i++) {
		t[i].sh = sh;
		t[i].kind = kind;
		tid[i] = bench_thread_start(incr_thread_main, &t[i], -1);
	}
	pthread_barrier_wait(&sh->start);
	start = bench_now_ns();
	bench_sleep_ns((uint64_t)bench_opt.duration_ms * 1000000u);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		ops += t[i].ops;
		cpu_ns += t[i].cpu_ns;
		if (t[i].end_ns > end)
			end = t[i].end_ns;
	}
	expected = ops + (uint64_t)nthreads * INCR_WARMUP;

	switch (kind) {
	case K_PRIVATE:
		for (i = 0; i < nthreads; i++)
			final += (uint64_t)t[i].priv;
		break;
	case K_RACY: final = (uint64_t)sh->racy; break;
	case K_ATOMIC: final = (uint64_t)sh->atomic; break;
	case K_CAS: final = (uint64_t)sh->cas; break;
	case K_MUTEX: final = (uint64_t)sh->mutex.value; break;
	case K_SPIN: final = (uint64_t)sh->spin.value; break;
	case K_PERCPU_LOCK:
		for (i = 0; i < sh->nslots; i++)
			final += (uint64_t)sh->percpu[i].value;
		break;
	case K_TLS:
		for (i = 0; i < nthreads; i++)
			final += (uint64_t)t[i].tls_total;
		break;
	case K_IDEAL_CPU:
	case K_IDEAL_MMCID:
		for (i = 0; i < IDEAL_MAXSLOT; i++)
			final += (uint64_t)ideal_arr[i].v;
		break;
	default:
		final = pcpu_counter_fetch(sh->pc);
		pcpu_counter_free(sh->pc);
		break;
	}

	res.ns_per_op = (double)cpu_ns / (double)ops;
	res.mops = (double)ops / ((double)(end - start) / 1e3);
	res.exact = final == expected;
	res.lost_pct = 100.0 * ((double)expected - (double)final) / (double)expected;

	pthread_barrier_destroy(&sh->start);
	pthread_mutex_destroy(&sh->mutex.lock);
	free(sh->percpu);
	free(sh);
	free(t);
	free(tid);
	return res;
}

/* ---- pcpu add vs the ideal add, paired in time ------------------------------ */

/*
 * The table's rows are separate runs of 50-100 ms, and a round runs a dozen
 * of them: the pcpu and ideal runs of one round may be a second apart, and on
 * a shared virtual machine the speed of a core drifts by several percent in
 * that time, as much as the 5 % the target allows. Here both run in the same
 * run on the same threads, in alternating phases (bench_phase_tick): odd
 * phases run pcpu_counter_add, even phases the ideal add (on the process's
 * index field). A round is one such run; its ratio is (CPU ns per pcpu add) /
 * (CPU ns per ideal add).
 *
 * Code placement. Loops of 9-11 instructions run at a speed that depends on
 * where they sit relative to the core's 64-byte fetch windows: the same two
 * loops, moved by a change elsewhere in this file, measured pcpu / ideal
 * 1.01-1.03 in one build and 1.18-1.20 in the next (bench/README.md). So each
 * side's loop is a function of its own (a batch of INCR_PAIR_BATCH adds) in
 * INCR_PAIR_PLACES copies: each copy starts on a 64-byte boundary followed by
 * 16 * copy bytes of no-ops (run once per batch), so its loop sits 16 bytes
 * further on than the previous copy's. Round r runs pcpu's copy r mod 4 and
 * the ideal's copy (r / 4) mod 4: 16 rounds cover every combination. With
 * the rounds' log ratios averaged per combination (the best and worst
 * figures are differences of extremes, so noisier than the average), the
 * figures are
 *  - the placement average: the geometric mean over all combinations, i.e.
 *    the ratio of the two loops' costs averaged over where a program happens
 *    to put each (what the target reads);
 *  - best / best: each loop at its fastest placement (the instructions
 *    alone, fetch windows aside); worst / worst likewise;
 *  - each side's cost by placement, relative to its own average.
 * A control pairs the ideal add with itself in the same way: its placement
 * average is 1 by construction plus the method's noise.
 */
/* Adds per batch, between two looks at the clock: the look (rdtsc, the stop
 * flag) and the call then cost < 0.5 % of a batch, on both sides alike. */
#define INCR_PAIR_BATCH 4096
#define INCR_PAIR_PLACES 4
#define INCR_PAIR_CELLS (INCR_PAIR_PLACES * INCR_PAIR_PLACES)

typedef void (*incr_batch_fn)(struct incr_shared *sh, pcpu_counter_t pc, char *area);

#define INCR_BATCH_FN(k, place)                                                           \
	static __attribute__((noinline, aligned(64))) void incr_batch_##k##_##place(         \
		struct incr_shared *sh, pcpu_counter_t pc, char *area)                       \
	{                                                                                    \
		unsigned i;                                                                  \
                                                                                             \
		__asm__ volatile(".skip 16 * " #place ", 0x90");                             \
		for (i = 0; i < INCR_PAIR_BATCH; i++)                                        \
			incr_op(k, sh, NULL, pc, area, 0, (pcpu_worker_t){ 0 });             \
	}
#define INCR_BATCH_FNS(k)                                                                 \
	INCR_BATCH_FN(k, 0)                                                               \
	INCR_BATCH_FN(k, 1)                                                               \
	INCR_BATCH_FN(k, 2)                                                               \
	INCR_BATCH_FN(k, 3)
INCR_BATCH_FNS(K_PCPU)
INCR_BATCH_FNS(K_IDEAL_CPU)
INCR_BATCH_FNS(K_IDEAL_MMCID)
INCR_BATCH_FNS(K_SKETCH)
INCR_BATCH_FNS(K_RESERVED)
INCR_BATCH_FNS(K_LIMIT)
#define INCR_BATCH_ROW(k) \
	{ incr_batch_##k##_0, incr_batch_##k##_1, incr_batch_##k##_2, incr_batch_##k##_3 }

/* [0] pcpu, [1] ideal cpu_id, [2] ideal mm_cid, [3] the sign-test sketch,
 * [4] the reserved-compare sketch, [5] the slot-limit sketch */
static const incr_batch_fn incr_batches[6][INCR_PAIR_PLACES] = {
	INCR_BATCH_ROW(K_PCPU), INCR_BATCH_ROW(K_IDEAL_CPU), INCR_BATCH_ROW(K_IDEAL_MMCID),
	INCR_BATCH_ROW(K_SKETCH), INCR_BATCH_ROW(K_RESERVED), INCR_BATCH_ROW(K_LIMIT),
};

struct incr_pair_thread {
	struct incr_shared *sh BENCH_ALIGNED;
	incr_batch_fn odd, even; /* the two sides, at their placements */
	struct bench_phases ph;  /* timed adds and CPU time of each side */
};

static void *incr_pair_main(void *arg)
{
	struct incr_pair_thread *t = arg;
	struct incr_shared *sh = t->sh;
	char *area = bench_rseq_area();
	pcpu_counter_t pc = sh->pc;
	uint64_t n = 0;

	t->odd(sh, pc, area); /* warm-up: one batch each, untimed */
	t->even(sh, pc, area);
	pthread_barrier_wait(&sh->start);
	bench_phase_start(&t->ph, n);
	do {
		if (bench_phase_tick(&t->ph, n))
			t->odd(sh, pc, area);
		else
			t->even(sh, pc, area);
		n += INCR_PAIR_BATCH;
	} while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED));
	bench_phase_end(&t->ph, n);
	return NULL;
}

struct incr_pair_result {
	double ratio; /* CPU ns per add, odd side / even side */
	double odd_ns, even_ns;
	int exact;    /* the totals right */
	uint64_t misses; /* reserved-compare sketch: adds that found no reservation */
};

/* One run: `odd` against `even` (rows of incr_batches) at placements po, pe. */
static struct incr_pair_result incr_pair_run(int odd, unsigned po, int even, unsigned pe,
					     unsigned nthreads)
{
	struct incr_shared *sh = bench_xmalloc(sizeof(*sh));
	struct incr_pair_thread *t = bench_xmalloc(nthreads * sizeof(*t));
	pthread_t *tid = bench_xmalloc(nthreads * sizeof(*tid));
	uint64_t ops[2] = { 0, 0 }, cpu[2] = { 0, 0 }, ideal_total = 0, warm;
	struct incr_pair_result res;
	unsigned i;

	sh->pc = pcpu_counter_alloc();
	if (!sh->pc)
		bench_die("pcpu_counter_alloc failed");
	memset(ideal_arr, 0, sizeof(ideal_arr));
	for (i = 0; i < IDEAL_MAXSLOT; i++)
		resv_hdr[i].upto = RESV_UPTO;
	slot_limit.below = pcpu_nslots(); /* every slot has memory: no miss */
	resv_miss = 0;
	pthread_barrier_init(&sh->start, NULL, nthreads + 1);
	for (i = 0; i < nthreads; i++) {
		t[i].sh = sh;
		t[i].odd = incr_batches[odd][po];
		t[i].even = incr_batches[even][pe];
		tid[i] = bench_thread_start(incr_pair_main, &t[i], -1);
	}
	pthread_barrier_wait(&sh->start);
	bench_sleep_ns((uint64_t)bench_opt.duration_ms * 1000000u);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		ops[0] += t[i].ph.n[0];
		ops[1] += t[i].ph.n[1];
		cpu[0] += t[i].ph.cpu_ns[0];
		cpu[1] += t[i].ph.cpu_ns[1];
	}
	for (i = 0; i < IDEAL_MAXSLOT; i++)
		ideal_total += (uint64_t)ideal_arr[i].v;
	warm = (uint64_t)nthreads * INCR_PAIR_BATCH;
	/* row 0 (pcpu) adds to the counter, every other row to ideal_arr; a
	 * reserved-compare miss skips its add, and must not happen */
	{
		uint64_t want_ideal = 0, want_pcpu = 0;

		*(odd ? &want_ideal : &want_pcpu) += ops[1] + warm;
		*(even ? &want_ideal : &want_pcpu) += ops[0] + warm;
		res.misses = resv_miss;
		res.exact = resv_miss == 0 && ideal_total == want_ideal &&
			    pcpu_counter_fetch(sh->pc) == want_pcpu;
	}
	res.even_ns = (double)cpu[0] / (double)ops[0];
	res.odd_ns = (double)cpu[1] / (double)ops[1];
	res.ratio = res.odd_ns / res.even_ns;
	pcpu_counter_free(sh->pc);
	pthread_barrier_destroy(&sh->start);
	free(sh);
	free(t);
	free(tid);
	return res;
}

/* What the rounds of one pair at one thread count say about placements:
 * from the mean log ratio of each combination (odd side's placement p, even
 * side's q), lr[p][q] = a_p - b_q up to noise. */
struct incr_place_fit {
	double avg;                   /* exp(mean of all cells): the placement average */
	double best, worst;           /* exp(min a - min b), exp(max a - max b) */
	double odd_rel[INCR_PAIR_PLACES], even_rel[INCR_PAIR_PLACES]; /* exp(a_p - mean a) ... */
};

static struct incr_place_fit incr_place_fit(const struct incr_pair_result *x, unsigned nr)
{
	double cell[INCR_PAIR_CELLS] = { 0 }, rowm[INCR_PAIR_PLACES], colm[INCR_PAIR_PLACES];
	unsigned cnt[INCR_PAIR_CELLS] = { 0 }, r, p, q;
	double all = 0, amin = INFINITY, amax = -INFINITY, bmin = INFINITY, bmax = -INFINITY;
	struct incr_place_fit f;

	for (r = 0; r < nr; r++) {
		cell[r % INCR_PAIR_CELLS] += log(x[r].ratio);
		cnt[r % INCR_PAIR_CELLS]++;
	}
	for (p = 0; p < INCR_PAIR_CELLS; p++)
		cell[p] = cnt[p] ? cell[p] / cnt[p] : NAN; /* < 16 rounds: NAN throughout */
	for (p = 0; p < INCR_PAIR_PLACES; p++)
		rowm[p] = colm[p] = 0;
	/* cell index r mod 16 = p + 4 q: odd side at p, even side at q */
	for (p = 0; p < INCR_PAIR_PLACES; p++)
		for (q = 0; q < INCR_PAIR_PLACES; q++) {
			double c = cell[p + INCR_PAIR_PLACES * q];

			rowm[p] += c / INCR_PAIR_PLACES; /* a_p - mean b */
			colm[q] += c / INCR_PAIR_PLACES; /* mean a - b_q */
			all += c / INCR_PAIR_CELLS;      /* mean a - mean b */
		}
	for (p = 0; p < INCR_PAIR_PLACES; p++) {
		double a = rowm[p] - all, b = all - colm[p]; /* a_p - mean a, b_p - mean b */

		f.odd_rel[p] = exp(a);
		f.even_rel[p] = exp(b);
		amin = fmin(amin, a);
		amax = fmax(amax, a);
		bmin = fmin(bmin, b);
		bmax = fmax(bmax, b);
	}
	f.avg = exp(all);
	f.best = exp(all + amin - bmin);
	f.worst = exp(all + amax - bmax);
	return f;
}

static const char *incr_fmt_places(char *buf, size_t len, const double *rel)
{
	unsigned p;

	buf[0] = 0;
	for (p = 0; p < INCR_PAIR_PLACES; p++)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%.3f", p ? "/" : "", rel[p]);
	return buf;
}

/* Runs the paired comparison and its control at every thread count, the two
 * interleaved, prints their table and fills tg->pair_*. */
static void incr_pair(int index, struct bench_incr_targets *tg)
{
	const unsigned nt = bench_opt.nthreads, nr = bench_opt.pair_rounds;
	const int ideal = index == PCPU_INDEX_CPU ? 1 : 2; /* row of incr_batches */
	/* res[pair][thread count][round]; pairs: pcpu / ideal, ideal / ideal
	 * (the control), sketch / ideal, reserved / pcpu, reserved / ideal,
	 * limit / pcpu, limit / ideal; sides are rows of incr_batches */
	enum { NPAIR = 7 };
	static const int odd_row[NPAIR] = { 0, -1, 3, 4, 4, 5, 5 }; /* -1: the ideal row */
	static const int even_row[NPAIR] = { -1, -1, -1, 0, -1, 0, -1 };
	static const char *const pair_csv[NPAIR] = { "pcpu_vs_ideal", "ideal_vs_ideal",
						     "sketch_vs_ideal", "reserved_vs_pcpu",
						     "reserved_vs_ideal", "limit_vs_pcpu",
						     "limit_vs_ideal" };
	struct incr_pair_result *res = bench_xmalloc(NPAIR * nt * nr * sizeof(*res));
	double *v = bench_xmalloc(nr * sizeof(double));
	unsigned r, ti, j, exact = 0;
	uint64_t *misses = bench_xmalloc(nt * sizeof(*misses)); /* zeroed */
	struct tbl tb, tr, tl;
	char buf[96], buf2[96];
	FILE *csv;
	char csvname[64];
#define PRES(j, ti, r) res[((j) * nt + (ti)) * nr + (r)]

	for (r = 0; r < nr; r++) {
		unsigned po = r % INCR_PAIR_PLACES, pe = r / INCR_PAIR_PLACES % INCR_PAIR_PLACES;

		bench_progress("incr (%s): paired round %u/%u", bench_index_name(index), r + 1, nr);
		for (ti = 0; ti < nt; ti++)
			for (j = 0; j < NPAIR; j++) {
				unsigned p = (j + r) % NPAIR; /* a different pair leads each round */

				PRES(p, ti, r) = incr_pair_run(odd_row[p] < 0 ? ideal : odd_row[p], po,
							       even_row[p] < 0 ? ideal : even_row[p],
							       pe, bench_opt.threads[ti]);
				exact += PRES(p, ti, r).exact;
				misses[ti] += PRES(p, ti, r).misses;
			}
	}
	printf("pcpu_counter_add and the ideal rseq add (%s) **paired in time**: in each run of "
	       "%u ms the threads alternate the two every %.0f µs (all threads together, from the "
	       "TSC), charging CPU time to each side; a round's ratio is pcpu's CPU ns per add / "
	       "the ideal's, in that run. Each side's loop is in 4 copies 16 B apart; the %u "
	       "rounds go through the 16 combinations (incr.c). Placement average: geometric "
	       "mean over the combinations (the target's figure); best / best: each loop at its "
	       "fastest placement; by placement: each side's cost at +0/+16/+32/+48 B relative "
	       "to its average. All rounds: median (min–max) [95 %% confidence interval of the "
	       "median] of the rounds' ratios, placements mixed. The control pairs the ideal add "
	       "with itself. The sketch is pcpu's add as it was with a sign test (a js in the section) "
	       "(incr.c, SKETCH_ADD), against the same ideal add. The reserved-compare sketch is "
	       "today's pcpu add with one more compare in the section, of the counter's offset "
	       "with its slot's \"reserved up to\" word (incr.c, RESERVED_ADD), paired against "
	       "pcpu_counter_add and against the ideal add. The slot-limit sketch reads the "
	       "index inside the section and compares it with one process-wide limit instead "
	       "of with the index read before arming (incr.c, LIMIT_ADD): no third branch. "
	       "Totals exact in %u of %u runs (misses: the two sketches' slow paths, "
	       "none by construction).\n\n",
	       bench_index_name(index), bench_opt.duration_ms,
	       (double)(1ull << BENCH_PHASE_SHIFT) / bench_tsc_ghz / 1e3, nr, exact, NPAIR * nt * nr);
	snprintf(csvname, sizeof(csvname), "incr_%s_paired.csv", bench_index_name(index));
	csv = bench_csv_open(csvname, "pair,threads,round,odd_placement,even_placement,odd_ns,"
				      "even_ns,ratio,exact");
	tbl_init(&tb, 10);
	tbl_headers(&tb, "threads", "pcpu / ideal: placement average", "best / best",
		    "worst / worst", "pcpu by placement", "ideal by placement", "all rounds",
		    "control: placement average", "control: all rounds",
		    "sketch / ideal: placement average", NULL);
	/* the reserved-compare sketch's own table, printed after: the first
	 * has all the columns a table takes */
	tbl_init(&tr, 6);
	tbl_headers(&tr, "threads", "reserved-compare sketch / pcpu add: placement average",
		    "best / best", "all rounds", "reserved-compare sketch / ideal: placement average",
		    "misses", NULL);
	tbl_init(&tl, 5);
	tbl_headers(&tl, "threads", "slot-limit sketch / pcpu add: placement average",
		    "best / best", "all rounds", "slot-limit sketch / ideal: placement average",
		    NULL);
	tg->pair_rounds = nr;
	for (ti = 0; ti < nt; ti++) {
		struct incr_place_fit f[NPAIR];
		struct bench_stat s[NPAIR];

		for (j = 0; j < NPAIR; j++) {
			for (r = 0; r < nr; r++) {
				const struct incr_pair_result *x = &PRES(j, ti, r);

				v[r] = x->ratio;
				if (csv)
					fprintf(csv, "%s,%u,%u,%u,%u,%.4f,%.4f,%.4f,%d\n",
						pair_csv[j],
						bench_opt.threads[ti], r, r % INCR_PAIR_PLACES,
						r / INCR_PAIR_PLACES % INCR_PAIR_PLACES, x->odd_ns,
						x->even_ns, x->ratio, x->exact);
			}
			s[j] = bench_stat_of(v, nr);
			f[j] = incr_place_fit(&PRES(j, ti, 0), nr);
		}
		tg->pair_med[ti] = f[0].avg;
		tg->pair_best[ti] = f[0].best;
		tg->pair_min[ti] = s[0].min;
		tg->pair_max[ti] = s[0].max;
		tbl_cell(&tb, "%u", bench_opt.threads[ti]);
		tbl_cell(&tb, "**%.3f×**", f[0].avg);
		tbl_cell(&tb, "%.3f×", f[0].best);
		tbl_cell(&tb, "%.3f×", f[0].worst);
		tbl_cell(&tb, "%s", incr_fmt_places(buf, sizeof(buf), f[0].odd_rel));
		tbl_cell(&tb, "%s", incr_fmt_places(buf2, sizeof(buf2), f[0].even_rel));
		tbl_cell(&tb, "%s", bench_fmt_ratio(buf, sizeof(buf), s[0], 3));
		tbl_cell(&tb, "%.3f×", f[1].avg);
		tbl_cell(&tb, "%s", bench_fmt_ratio(buf, sizeof(buf), s[1], 3));
		tbl_cell(&tb, "%.3f×", f[2].avg);
		tbl_cell(&tr, "%u", bench_opt.threads[ti]);
		tbl_cell(&tr, "**%.3f×**", f[3].avg);
		tbl_cell(&tr, "%.3f×", f[3].best);
		tbl_cell(&tr, "%s", bench_fmt_ratio(buf, sizeof(buf), s[3], 3));
		tbl_cell(&tr, "%.3f×", f[4].avg);
		tbl_cell(&tr, "%llu", (unsigned long long)misses[ti]);
		tbl_cell(&tl, "%u", bench_opt.threads[ti]);
		tbl_cell(&tl, "**%.3f×**", f[5].avg);
		tbl_cell(&tl, "%.3f×", f[5].best);
		tbl_cell(&tl, "%s", bench_fmt_ratio(buf, sizeof(buf), s[5], 3));
		tbl_cell(&tl, "%.3f×", f[6].avg);
	}
	tbl_print(&tb);
	printf("\n");
	tbl_print(&tr);
	printf("\n");
	tbl_print(&tl);
	if (csv)
		fclose(csv);
	free(res);
	free(v);
	free(misses);
#undef PRES
}

/* Median over rounds of a / b, the two measured in the same round: a paired
 * ratio cancels what the rounds do not share. */
static double paired_ratio(const double *a, const double *b, unsigned n)
{
	double *r = malloc(n * sizeof(*r));
	double m;
	unsigned i;

	for (i = 0; i < n; i++)
		r[i] = a[i] / b[i];
	m = bench_median(r, n);
	free(r);
	return m;
}

/* Runs the incr section again in a second process whose slot index is
 * `index`; its tables go to our stdout, its target figures into `out`. */
static void incr_second_process(int index, struct bench_incr_targets *out)
{
	char *args[64];
	char env_index[32];
	const char *env[2] = { env_index, NULL };
	unsigned n = 0;
	int i;
	long got;

	for (i = 1; i < bench_opt.argc && n < 56; i++)
		args[n++] = bench_opt.argv[i];
	args[n++] = "--only";
	args[n++] = "incr";
	args[n++] = "--incr-child";
	args[n] = NULL;
	snprintf(env_index, sizeof(env_index), "PCPU_INDEX=%s", bench_index_name(index));
	got = bench_run_self(args, env, out, sizeof(*out));
	if (got != (long)sizeof(*out)) {
		memset(out, 0, sizeof(*out));
		printf("(the second process, %s, failed: no figures for index %s)\n\n", env_index,
		       bench_index_name(index));
	}
}

void bench_incr(void)
{
	const unsigned nt = bench_opt.nthreads, nr = bench_opt.rounds;
	/* res[kind][thread-count index][round] */
	struct bench_incr_result *res = bench_xmalloc(K_N * nt * nr * sizeof(*res));
	double *v = bench_xmalloc(nr * sizeof(double));
	double *a = bench_xmalloc(nr * sizeof(double)), *b = bench_xmalloc(nr * sizeof(double));
	struct bench_incr_targets *tg = &bench_targets.incr[0];
	char csvname[64], rawname[64];
	FILE *csv, *raw;
	int usable[K_N], order[K_N], nuse = 0;
	int index = bench_process_index(), ideal, child = bench_opt.incr_child;
	unsigned r, ti, j, k;
	int t1 = -1, no_rseq = pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK;
	struct tbl tb;
	char buf[96];
#define RES(k, ti, r) res[((k) * nt + (ti)) * nr + (r)]

	ideal = index == PCPU_INDEX_CPU ? K_IDEAL_CPU : K_IDEAL_MMCID;
	for (k = 0; k < K_N; k++)
		usable[k] = !child || k == K_PRIVATE || k == K_TLS || k == K_PERCPU_LOCK ||
			    k == K_IDEAL_CPU || k == K_IDEAL_MMCID || k == K_PCPU ||
			    k == K_PCPU_FALLBACK || k == K_OWNED;
	/* The ideal row of this process's index only; it needs rseq, and its
	 * array must hold every index. */
	usable[K_IDEAL_CPU] = usable[K_IDEAL_MMCID] = 0;
	if (IDEAL_AVAILABLE && !no_rseq && pcpu_nslots() <= IDEAL_MAXSLOT &&
	    (ideal == K_IDEAL_CPU || pcpu_rseq_has_mm_cid()))
		usable[ideal] = 1;
	for (k = 0; k < K_N; k++)
		if (usable[k])
			order[nuse++] = (int)k;

	if (child) {
		const char *want = getenv("PCPU_INDEX");

		printf("### 1, second process: PCPU_INDEX=%s\n\n", want ? want : "(unset)");
		if (want && strcmp(want, bench_index_name(index)) != 0) {
			/* A core without a per-process index: nothing new to
			 * measure here; the parent says so. */
			memset(tg, 0, sizeof(*tg));
			tg->have = 1;
			tg->index = index;
			free(res);
			free(v);
			free(a);
			free(b);
			return;
		}
	}
	else
		printf("## 1. Cost per increment (rseq slides 16-18)\n\n");
	printf("This process: pcpu slot index **%s** (%u slots, rseq mode %s, kernel %s mm_cid). "
	       "CPU ns per increment per thread (CLOCK_THREAD_CPUTIME_ID summed over threads / "
	       "increments), median (min–max) of %u rounds of %u ms; threads not pinned; the "
	       "rows run interleaved, a different row leading each round.%s\n\n",
	       bench_index_name(index), pcpu_nslots(), pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       pcpu_rseq_has_mm_cid() ? "fills" : "does not fill", nr, bench_opt.duration_ms,
	       child ? " Only the rows that depend on the index (and the floors) run here." : "");

	for (r = 0; r < nr; r++) {
		bench_progress("incr (%s): round %u/%u", bench_index_name(index), r + 1, nr);
		for (ti = 0; ti < nt; ti++)
			for (j = 0; j < (unsigned)nuse; j++) {
				k = (unsigned)order[(j + r) % (unsigned)nuse]; /* a different variant leads each round */
				RES(k, ti, r) = bench_incr_run((int)k, bench_opt.threads[ti]);
			}
	}

	snprintf(csvname, sizeof(csvname), "incr_%s.csv", bench_index_name(index));
	snprintf(rawname, sizeof(rawname), "incr_%s_rounds.csv", bench_index_name(index));
	csv = bench_csv_open(csvname,
			     "variant,threads,ns_per_op_median,ns_per_op_min,ns_per_op_max,"
			     "ns_per_op_q1,ns_per_op_q3,mops_median,lost_pct_median,exact_runs,runs");
	raw = bench_csv_open(rawname, "variant,threads,round,ns_per_op,mops,lost_pct,exact");

	tbl_init(&tb, 3 + nt);
	tbl_cell(&tb, "variant");
	for (ti = 0; ti < nt; ti++)
		tbl_cell(&tb, "%u thr", bench_opt.threads[ti]);
	tbl_headers(&tb, "exact (lost % per thread count)", "slide 17: 1 / 8 thr", NULL);

	for (k = 0; k < K_N; k++) {
		unsigned inexact = 0, runs = 0;
		char lost[128] = "";

		if (!usable[k])
			continue;
		if (k == K_PCPU && no_rseq)
			tbl_cell(&tb, "%s — no rseq in this process: fallback", incr_variants[k].name);
		else if (k == K_PCPU)
			tbl_cell(&tb, "%s (%s index)", incr_variants[k].name, bench_index_name(index));
		else
			tbl_cell(&tb, "%s", incr_variants[k].name);
		for (ti = 0; ti < nt; ti++) {
			struct bench_stat s;
			double mops, lostmed;
			unsigned ex = 0;

			for (r = 0; r < nr; r++)
				v[r] = RES(k, ti, r).ns_per_op;
			s = bench_stat_of(v, nr);
			tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), s));
			for (r = 0; r < nr; r++)
				v[r] = RES(k, ti, r).mops;
			mops = bench_median(v, nr);
			for (r = 0; r < nr; r++) {
				v[r] = RES(k, ti, r).lost_pct;
				ex += RES(k, ti, r).exact;
				if (raw)
					fprintf(raw, "%s,%u,%u,%.4f,%.3f,%.4f,%d\n", incr_variants[k].csv,
						bench_opt.threads[ti], r, RES(k, ti, r).ns_per_op,
						RES(k, ti, r).mops, RES(k, ti, r).lost_pct,
						RES(k, ti, r).exact);
			}
			lostmed = bench_median(v, nr);
			inexact += nr - ex;
			runs += nr;
			snprintf(lost + strlen(lost), sizeof(lost) - strlen(lost), "%s%.1f",
				 ti ? "/" : "", lostmed);
			if (csv)
				fprintf(csv, "%s,%u,%.4f,%.4f,%.4f,%.4f,%.4f,%.3f,%.4f,%u,%u\n",
					incr_variants[k].csv, bench_opt.threads[ti], s.med, s.min,
					s.max, s.q1, s.q3, mops, lostmed, ex, nr);
		}
		if (k == K_RACY)
			tbl_cell(&tb, "no: lost %s %%", lost);
		else if (inexact == 0)
			tbl_cell(&tb, "yes (%u/%u runs)", runs, runs);
		else
			tbl_cell(&tb, "**NO**: %u of %u runs wrong (lost %s %%)", inexact, runs, lost);
		tbl_cell(&tb, "%s", incr_variants[k].slide17);
	}
	tbl_print(&tb);

	if (!child) {
		/* Throughput: what the machine as a whole gets done. */
		printf("Aggregate throughput, million increments per second of wall time (median):\n\n");
		tbl_init(&tb, 1 + nt);
		tbl_cell(&tb, "variant");
		for (ti = 0; ti < nt; ti++)
			tbl_cell(&tb, "%u thr", bench_opt.threads[ti]);
		for (k = 0; k < K_N; k++) {
			if (!usable[k])
				continue;
			tbl_cell(&tb, "%s", incr_variants[k].name);
			for (ti = 0; ti < nt; ti++) {
				for (r = 0; r < nr; r++)
					v[r] = RES(k, ti, r).mops;
				tbl_cell(&tb, "%s", bench_fmt_num(buf, sizeof(buf), bench_median(v, nr)));
			}
		}
		tbl_print(&tb);
		printf("Slide 17 rows with no counterpart here (E5-2630 v3, ns, 1 / 8 threads): "
		       "percpu rseq rlock cmpxchg 3.0 / 3.4; percpu rseq spinlock 4.9 / 5.2; "
		       "percpu LOCK; cmpxchg 10.0 / 11.6.\n\n");
	}

	/* Figures for the target summary: ratios of rows measured in the same
	 * round, median over rounds, per thread count. */
	memset(tg, 0, sizeof(*tg));
	tg->have = 1;
	tg->index = index;
	tg->nslots = pcpu_nslots();
	tg->nt = nt;
	tg->fb_flat = NAN;
	for (ti = 0; ti < nt; ti++) {
		tg->threads[ti] = bench_opt.threads[ti];
		if (bench_opt.threads[ti] == 1 && t1 < 0)
			t1 = (int)ti;
		for (r = 0; r < nr; r++) {
			a[r] = RES(K_PCPU, ti, r).ns_per_op;
			b[r] = RES(ideal, ti, r).ns_per_op;
		}
		tg->vs_ideal[ti] = usable[ideal] ? paired_ratio(a, b, nr) : NAN;
		for (r = 0; r < nr; r++)
			b[r] = RES(K_PRIVATE, ti, r).ns_per_op;
		tg->vs_private[ti] = paired_ratio(a, b, nr);
		for (r = 0; r < nr; r++) {
			tg->pcpu_runs++;
			tg->pcpu_inexact += !RES(K_PCPU, ti, r).exact;
			if (RES(K_RACY, ti, r).lost_pct > tg->racy_lost_max)
				tg->racy_lost_max = RES(K_RACY, ti, r).lost_pct;
		}
		for (r = 0; r < nr; r++)
			a[r] = RES(ideal, ti, r).ns_per_op;
		tg->ideal_vs_private[ti] = usable[ideal] ? paired_ratio(a, b, nr) : NAN;
		for (r = 0; r < nr; r++)
			a[r] = RES(K_OWNED, ti, r).ns_per_op;
		tg->owned_vs_private[ti] = paired_ratio(a, b, nr);
		for (r = 0; r < nr; r++) {
			a[r] = RES(K_PCPU_FALLBACK, ti, r).ns_per_op;
			b[r] = RES(K_PERCPU_LOCK, ti, r).ns_per_op;
		}
		tg->fb_vs_lock[ti] = paired_ratio(a, b, nr);
	}
	if (t1 >= 0) {
		double fb1;

		for (r = 0; r < nr; r++)
			v[r] = RES(K_PCPU_FALLBACK, t1, r).ns_per_op;
		fb1 = bench_median(v, nr);
		tg->fb_flat = 0;
		for (ti = 0; ti < nt; ti++) {
			double m;

			for (r = 0; r < nr; r++)
				v[r] = RES(K_PCPU_FALLBACK, ti, r).ns_per_op;
			m = bench_median(v, nr) / fb1;
			if (m > tg->fb_flat) {
				tg->fb_flat = m;
				tg->fb_flat_threads = bench_opt.threads[ti];
			}
		}
	}

	/* pcpu against the ideal add is not read from these separate runs: on
	 * a shared machine two runs a second apart drift by as much as the two
	 * differ (one disturbed run printed the "ideal" 1.6x slower than the
	 * add it bounds). The paired measurement (incr_pair, below) runs both
	 * in the same run. The ideal add against `+=` says what any rseq add
	 * costs beside a thread-private increment. */
	printf("Ratios of rows of the same round (median over rounds), index %s. pcpu against "
	       "the hand-written ideal rseq add is measured paired in time, in the table after "
	       "this one.\n\n", bench_index_name(index));
	tbl_init(&tb, 1 + nt);
	tbl_cell(&tb, "ratio");
	for (ti = 0; ti < nt; ti++)
		tbl_cell(&tb, "%u thr", bench_opt.threads[ti]);
	tbl_cell(&tb, "pcpu_counter_add / thread-private `+=`");
	for (ti = 0; ti < nt; ti++)
		tbl_cell(&tb, "%.3f×", tg->vs_private[ti]);
	if (usable[ideal]) {
		tbl_cell(&tb, "ideal rseq add (%s) / thread-private `+=`", bench_index_name(index));
		for (ti = 0; ti < nt; ti++)
			tbl_cell(&tb, "%.3f×", tg->ideal_vs_private[ti]);
	}
	tbl_cell(&tb, "pcpu_counter_add_owned / thread-private `+=`");
	for (ti = 0; ti < nt; ti++)
		tbl_cell(&tb, "%.3f×", tg->owned_vs_private[ti]);
	tbl_cell(&tb, "pcpu_counter_add_atomic / per-CPU slot `lock add`");
	for (ti = 0; ti < nt; ti++)
		tbl_cell(&tb, "%.3f×", tg->fb_vs_lock[ti]);
	tbl_print(&tb);
	if (csv) {
		fclose(csv);
		csv = NULL;
	}
	snprintf(csvname, sizeof(csvname), "incr_%s_ratios.csv", bench_index_name(index));
	csv = bench_csv_open(csvname, "ratio,threads,value");
	if (csv) {
		for (ti = 0; ti < nt; ti++)
			fprintf(csv, "pcpu_vs_ideal,%u,%.4f\npcpu_vs_private,%u,%.4f\n"
				"fallback_vs_lock_add,%u,%.4f\nowned_vs_private,%u,%.4f\n",
				tg->threads[ti], tg->vs_ideal[ti], tg->threads[ti],
				tg->vs_private[ti], tg->threads[ti], tg->fb_vs_lock[ti],
				tg->threads[ti], tg->owned_vs_private[ti]);
		fclose(csv);
	}
	if (raw)
		fclose(raw);
	free(res);
	free(v);
	free(a);
	free(b);
#undef RES
	for (ti = 0; ti < nt; ti++)
		tg->pair_med[ti] = NAN;
	if (usable[ideal])
		incr_pair(index, tg);

	/* The other index, in a process of its own. */
	if (!child && !bench_opt.one_index) {
		int other = index == PCPU_INDEX_CPU ? PCPU_INDEX_MM_CID : PCPU_INDEX_CPU;

		if (other == PCPU_INDEX_MM_CID && !pcpu_rseq_has_mm_cid()) {
			printf("(no second process: the kernel does not fill mm_cid)\n\n");
		} else {
			incr_second_process(other, &bench_targets.incr[1]);
			if (bench_targets.incr[1].have && bench_targets.incr[1].index != other) {
				printf("(the second process asked for PCPU_INDEX=%s but runs index %s: "
				       "this core ignores PCPU_INDEX; its figures are left out)\n\n",
				       bench_index_name(other),
				       bench_index_name(bench_targets.incr[1].index));
				bench_targets.incr[1].have = 0;
			}
		}
	}
}

/* ---- the cost of learning the CPU number (slides 20-21) -------------------- */

enum getcpu_kind {
	G_EMPTY,   /* the loop alone */
	G_RSEQ,    /* a load of cpu_id from the rseq area */
	G_SCHED,   /* glibc sched_getcpu() */
	G_GETCPU,  /* glibc getcpu(): the vDSO */
	G_SYSCALL, /* syscall(SYS_getcpu) */
	G_RDPID,   /* x86 rdpid instruction (TSC_AUX = node << 12 | cpu) */
	G_LSL,     /* x86 lsl of the per-CPU GDT segment, as the vDSO did */
	G_N
};

/* slide21: the slide's x86-64 figure for the same method, ns (NAN: none). */
static const struct {
	const char *name, *csv;
	double slide21;
	const char *slide21_note;
} getcpu_variants[G_N] = {
	[G_EMPTY] = { "empty loop (baseline)", "empty", 0.8, "" },
	[G_RSEQ] = { "rseq area cpu_id load", "rseq", 0.8, "" },
	[G_SCHED] = { "sched_getcpu() (glibc)", "sched_getcpu", 16.6, " (glibc 2.19 getcpu: vDSO)" },
	[G_GETCPU] = { "getcpu() (glibc → vDSO)", "getcpu_vdso", 16.6, " (glibc 2.19 getcpu)" },
	[G_SYSCALL] = { "syscall(SYS_getcpu)", "syscall", 53.9, "" },
	[G_RDPID] = { "rdpid instruction", "rdpid", NAN, "" },
	[G_LSL] = { "lsl instruction", "lsl", 13.0, " (\"lsl\" inline assembly)" },
};

static int have_rdpid(void)
{
#if defined(__x86_64__)
	unsigned a = 7, b, c = 0, d;

	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
	return (c >> 22) & 1;
#else
	return 0;
#endif
}

BENCH_INLINE unsigned getcpu_once(const int kind, const char *area)
{
	unsigned cpu = 0, node;

	switch (kind) {
	case G_EMPTY:
		__asm__ volatile("" ::: "memory");
		break;
	case G_RSEQ:
		cpu = (unsigned)*(volatile const int32_t *)(area + PCPU__RSEQ_OFF_CPU_ID);
		break;
	case G_SCHED:
		cpu = (unsigned)sched_getcpu();
		break;
	case G_GETCPU:
		getcpu(&cpu, &node);
		break;
	case G_SYSCALL:
		syscall(SYS_getcpu, &cpu, &node, NULL);
		break;
#if defined(__x86_64__)
	case G_RDPID: {
		uint64_t aux;

		__asm__ volatile("rdpid %0" : "=r"(aux));
		cpu = (unsigned)(aux & 0xfff);
		break;
	}
	case G_LSL: {
		/* Linux keeps cpu | node << 12 in the limit of GDT entry 15
		 * (selector 15 * 8 + 3), for this very purpose. */
		unsigned long p;

		__asm__ volatile("lsl %1, %0" : "=r"(p) : "r"(15ul * 8 + 3));
		cpu = (unsigned)(p & 0xfff);
		break;
	}
#endif
	}
	return cpu;
}

BENCH_INLINE double getcpu_loop(const int kind, const char *area, uint64_t n)
{
	uint64_t t0, t1, i;
	unsigned sink = 0;

	t0 = bench_ticks();
	for (i = 0; i < n; i++)
		sink += getcpu_once(kind, area);
	t1 = bench_ticks();
	__asm__ volatile("" : : "r"(sink));
	return (double)(t1 - t0) / bench_tsc_ghz / (double)n;
}

#define GETCPU_LOOP_FN(k) \
	static __attribute__((noinline)) double getcpu_loop_##k(const char *a, uint64_t n) \
	{ return getcpu_loop(k, a, n); }
GETCPU_LOOP_FN(G_EMPTY)
GETCPU_LOOP_FN(G_RSEQ)
GETCPU_LOOP_FN(G_SCHED)
GETCPU_LOOP_FN(G_GETCPU)
GETCPU_LOOP_FN(G_SYSCALL)
GETCPU_LOOP_FN(G_RDPID)
GETCPU_LOOP_FN(G_LSL)

static double (*const getcpu_loops[G_N])(const char *, uint64_t) = {
	getcpu_loop_G_EMPTY, getcpu_loop_G_RSEQ, getcpu_loop_G_SCHED, getcpu_loop_G_GETCPU,
	getcpu_loop_G_SYSCALL, getcpu_loop_G_RDPID, getcpu_loop_G_LSL,
};

/* Does getter `kind` name the CPU the rseq area names? Sampled where the
 * thread did not move in between (the area read before and after agree). */
static int getcpu_agrees(int kind, const char *area)
{
	int tries, agreed = 0, checked = 0;

	for (tries = 0; tries < 1000 && checked < 100; tries++) {
		unsigned before = getcpu_once(G_RSEQ, area);
		unsigned got = getcpu_once(kind, area);
		unsigned after = getcpu_once(G_RSEQ, area);

		if (before != after)
			continue;
		checked++;
		agreed += got == before;
	}
	return checked > 0 && agreed == checked;
}

void bench_getcpu(void)
{
	const unsigned nr = bench_opt.rounds;
	const char *area = bench_rseq_area();
	double *ns = bench_xmalloc(G_N * nr * sizeof(double));
	int usable[G_N], agrees[G_N];
	unsigned r, j, k;
	struct tbl tb;
	FILE *csv;
	struct bench_stat empty_stat;
	double empty;
	char buf[96];

	printf("## 1b. Cost of learning the CPU number (rseq slides 20-21)\n\n");
	for (k = 0; k < G_N; k++)
		usable[k] = 1;
	usable[G_RSEQ] = area != NULL;
	usable[G_RDPID] = have_rdpid();
#if !defined(__x86_64__)
	usable[G_LSL] = 0;
#endif
	if (!area) {
		printf("(this thread has no rseq area: pcpu is in fallback mode; rseq rows skipped)\n\n");
		usable[G_RSEQ] = 0;
	}
	for (k = 0; k < G_N; k++)
		agrees[k] = usable[k] && (k == G_EMPTY || !area || getcpu_agrees((int)k, area));

	for (r = 0; r < nr; r++)
		for (j = 0; j < G_N; j++) {
			uint64_t n = bench_opt.getcpu_calls;

			k = (j + r) % G_N;
			if (!usable[k])
				continue;
			if (k == G_SYSCALL) /* a real kernel entry: ~100x the rest */
				n /= 32;
			ns[k * nr + r] = getcpu_loops[k](area, n);
		}

	printf("ns per call from a single thread (TSC, %" PRIu64 " calls per round, syscall "
	       "1/32 of that), median (min–max) of %u rounds; \"net\" subtracts the empty loop's "
	       "median where every round of the method was slower than every round of the empty "
	       "loop, and says \"not measurable\" where the two overlap (a load can even run "
	       "faster than the empty loop: the loops' code differs).\n\n",
	       bench_opt.getcpu_calls, nr);
	csv = bench_csv_open("getcpu.csv",
			     "method,ns_median,ns_min,ns_max,ns_net,agrees_with_rseq,slide21_ns,"
			     "net_measurable");
	empty_stat = bench_stat_of(&ns[G_EMPTY * nr], nr);
	empty = empty_stat.med;
	tbl_init(&tb, 5);
	tbl_headers(&tb, "method", "ns/call", "net ns", "agrees with rseq cpu_id",
		    "slide 21 (E5-2630 v3), ns", NULL);
	for (k = 0; k < G_N; k++) {
		struct bench_stat s;
		int measurable;

		if (!usable[k])
			continue;
		s = bench_stat_of(&ns[k * nr], nr);
		measurable = k != G_EMPTY && s.min > empty_stat.max;
		tbl_cell(&tb, "%s", getcpu_variants[k].name);
		tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), s));
		tbl_cell(&tb, "%s", k == G_EMPTY ? "—" : measurable ? bench_fmt_num(buf, sizeof(buf), s.med - empty)
								 : "not measurable");
		tbl_cell(&tb, "%s", k == G_EMPTY ? "—" : agrees[k] ? "yes" : "**NO**");
		if (isnan(getcpu_variants[k].slide21))
			tbl_cell(&tb, "—");
		else
			tbl_cell(&tb, "%.1f%s", getcpu_variants[k].slide21,
				 getcpu_variants[k].slide21_note);
		if (csv)
			fprintf(csv, "%s,%.4f,%.4f,%.4f,%.4f,%d,%.1f,%d\n", getcpu_variants[k].csv, s.med,
				s.min, s.max, s.med - empty, agrees[k], getcpu_variants[k].slide21,
				measurable);
	}
	tbl_print(&tb);
	printf("Slide 21 also lists \"Read using gs segment selector: 0.8\" and \"rseq cpu_id "
	       "(lazy register): 0.8\". glibc >= 2.35 answers sched_getcpu() from the rseq area.\n\n");
	if (csv)
		fclose(csv);
	free(ns);
}
