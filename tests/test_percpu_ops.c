/*
 * The public per-CPU operations (pcpu/percpu_ops.h), as a program that
 * builds its own per-CPU structures on zone memory uses them.
 *
 * 1. What each operation returns and writes, one thread: committed, a
 *    compare that differs, a stale index (the compare inside the sequence
 *    refuses it, nothing written), a full or empty stack, a closed gate; in
 *    the fallback mode, that every one aborts and writes nothing.
 * 2. Under stress, counted: 2 threads per CPU (at least 4), moved between
 *    CPUs and signalled (stress_harness.h; the SIGUSR1 handler runs
 *    operations too, on the slot the interrupted code may be in the middle
 *    of), and each section widened by PCPU_TEST_INJECT's spin and hook
 *    (yields, raised signals), use every operation, each with its own
 *    structure and its own slow path (atomics on words no sequence writes):
 *     - adds, by load_add_store and this_load_add_store: the sum is exact;
 *     - increments by compare-and-store (load_cbne_store) of a per-slot
 *       word: none lost, none doubled;
 *     - a per-slot append-only log written by load_cbne_store_store (the
 *       element, then the head's commit): every value appended exactly once;
 *     - gated adds (this_load_cbne_load_add_store) while a switcher closes
 *       every slot's gate, calls pcpu_rseq_fence() and folds the slots'
 *       words into a central one, then reopens: the total is exact (an add
 *       that committed after the fence would be zeroed by the fold, or
 *       counted twice);
 *     - a per-CPU free list of tokens on the stacks (pop, push, push_many,
 *       pop_many into a locked pool when full or empty) while a collector
 *       closes the gates, fences and drains every slot's stack into the pool:
 *       no token is ever held by two threads at once, and at the end each
 *       is in the stacks or the pool exactly once.
 *    In the rseq modes the run goes on until at least --min-aborts sections
 *    have aborted (so the abort paths ran), --max-seconds only bounding a
 *    run that cannot get there.
 *
 * Usage: test_percpu_ops --expect-mode glibc|own|fallback [--seconds S]
 *        [--min-aborts N] [--max-seconds S]
 * Built with PCPU_TEST_INJECT; tests/CMakeLists.txt also builds it with
 * PCPU_TEST_SPLIT_BLOCKS and PCPU_TEST_BROKEN_SECTION for
 * tests/check_rseq_sections.py (every operation's section checked, and
 * every one found broken in the broken build).
 */
#define PCPU_TEST_INJECT 1
#include "check.h"
#include "stress_harness.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The hooks of PCPU_TEST_INJECT (pcpu/arch/common.h). */
unsigned pcpu__test_inject_spin;
__thread unsigned long pcpu__test_inject_aborts;
static __thread unsigned long before_calls;
static __thread int in_handler, is_worker;

void pcpu__test_inject_before(void)
{
	unsigned long n = ++before_calls;

	if (in_handler || !is_worker)
		return;
	if (n % 1021 == 0)
		sched_yield();
	else if (n % 1531 == 0)
		raise(SIGUSR1);
}

#define MAX_THREADS 128 /* a thread number fits above an append's 24 bits */
#define TRIES 4
#define LOG_CAP 65536   /* appends one slot's log holds */
#define STACK_CAP 32    /* pointers per slot's stack */
#define NTOKENS 2048
#define BATCH 8

static int stop, nthreads, mode_mismatch;
static const char *expect_mode;
static int live_tids[MAX_THREADS];
static struct stress_harness harness = { .tids = live_tids, .stop = &stop, .signal_us = 40 };
static unsigned long total_aborts;
static unsigned long worker_aborts[MAX_THREADS]; /* published as they go */

/* ---- the structures, each a zone object with its slow path's word ---------- */

static pcpu_zone_t *zone;
static int64_t *adds;            /* load_add_store's words */
static int64_t *this_adds;       /* this_load_add_store's */
static int64_t adds_slow, this_adds_slow, adds_expected, this_adds_expected;
static intptr_t *incs;           /* load_cbne_store's */
static int64_t incs_slow, incs_expected;
struct plog {                    /* load_cbne_store_store's append-only log */
	intptr_t head;
	intptr_t v[LOG_CAP];
};
static struct plog *logs;
static pthread_mutex_t overflow_lock = PTHREAD_MUTEX_INITIALIZER;
static intptr_t *overflow;       /* appends that could not use a slot's log */
static size_t noverflow, overflow_cap;
struct gated {                   /* this_load_cbne_load_add_store's */
	int64_t count;
	intptr_t gate;
	int64_t pad;
};
static struct gated *gated;
static int64_t gated_central, gated_expected;
static unsigned long gated_folds;
static struct pcpu_rseq_stack *stacks; /* the free list of tokens */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void *pool[NTOKENS];
static size_t npool;
static int token_holder[NTOKENS]; /* 0, or the holder's number (atomic) */
static char tokens[NTOKENS];       /* a token is &tokens[i] */
static unsigned long collections;

static void *slot_of(void *obj, int64_t idx)
{
	return pcpu_slot_ptr(obj, (unsigned)idx);
}

/* ---- 1. what each operation returns and writes -------------------------------- */

/* The objects of part 1: zone memory, as a program's own structures. */
static int64_t *sw;
static intptr_t *siw;
static struct gated *sg;
static struct pcpu_rseq_stack *sst;
static void *many[4] = {&tokens[0], &tokens[1], &tokens[2], &tokens[3]};

/* Each check in a function of its own: on 32-bit Arm, GCC places a
 * function's literal pool as if each inline asm goto were one instruction
 * (bench/instructions.md), so a function with dozens of sections can leave
 * its constants out of reach. */
__attribute__((noinline)) static void semantics_fallback(void)
{
	void *out = NULL, *back[4];
	int64_t *w = sw, idx;
	intptr_t *iw = siw;
	struct gated *g = sg;
	struct pcpu_rseq_stack *st = sst;

	/* No sequence ever commits: every operation says so. */
	idx = pcpu_rseq_index();
	CHECK(idx < 0);
	CHECK(pcpu_rseq_load_add_store(0, w, 1) == PCPU_RSEQ_ABORTED);
	CHECK(pcpu_rseq_this_load_add_store(w, 1) == PCPU_RSEQ_ABORTED);
	CHECK(pcpu_rseq_load_cbne_store(0, iw, 0, 1) == PCPU_RSEQ_ABORTED);
	CHECK(pcpu_rseq_load_cbne_store_store(0, iw, 0, iw + 1, 2, 1) == PCPU_RSEQ_ABORTED);
	CHECK(pcpu_rseq_this_load_cbne_load_add_store(g, offsetof(struct gated, gate), 0, 1) ==
	      PCPU_RSEQ_NO_INDEX);
	CHECK(pcpu_rseq_stack_push(0, st, &tokens[0]) == PCPU_RSEQ_ABORTED);
	CHECK(pcpu_rseq_stack_pop(0, st, &out) == PCPU_RSEQ_ABORTED);
	CHECK(pcpu_rseq_stack_push_many(0, st, many, 2) == PCPU_RSEQ_ABORTED);
	CHECK(pcpu_rseq_stack_pop_many(0, st, back, 1) == PCPU_RSEQ_ABORTED);
	CHECK(*w == 0 && iw[0] == 0 && iw[1] == 0 && g->count == 0 && st->count == 0);
}

__attribute__((noinline)) static void semantics_stale_index(void)
{
	int64_t *w = sw, idx, stale;
	intptr_t *iw = siw;
	struct pcpu_rseq_stack *st = sst;

	/* On one CPU, so that the index stays put (a migration would only
	 * make the checks below retry). */
	for (int tries = 0;; tries++) {
		CHECK(tries < 1000);
		idx = pcpu_rseq_index();
		CHECK(idx >= 0 && idx < (int64_t)pcpu_nslots());
		/* An index that is not the thread's: the sequence's compare
		 * refuses it, nothing written (one no thread can hold, so that
		 * a migration cannot make it right meanwhile). */
		stale = idx + (int64_t)pcpu_nslots();
		CHECK(pcpu_rseq_load_add_store(stale, slot_of(w, idx), 5) == PCPU_RSEQ_ABORTED);
		CHECK(pcpu_rseq_load_cbne_store(stale, slot_of(iw, idx), 0, 7) == PCPU_RSEQ_ABORTED);
		CHECK(pcpu_rseq_load_cbne_store_store(stale, slot_of(iw, idx), 0,
						      (intptr_t *)slot_of(iw, idx) + 1, 9, 7) ==
		      PCPU_RSEQ_ABORTED);
		CHECK(pcpu_rseq_stack_push(stale, slot_of(st, idx), &tokens[0]) == PCPU_RSEQ_ABORTED);
		CHECK(*(int64_t *)slot_of(w, idx) == 0);
		CHECK(((intptr_t *)slot_of(iw, idx))[0] == 0 && ((intptr_t *)slot_of(iw, idx))[1] == 0);
		CHECK(((struct pcpu_rseq_stack *)slot_of(st, idx))->count == 0);
		/* Committed, on the thread's slot. */
		if (pcpu_rseq_load_add_store(idx, slot_of(w, idx), 5) != PCPU_RSEQ_COMMITTED)
			continue; /* moved or preempted: again */
		CHECK(*(int64_t *)slot_of(w, idx) == 5);
		*(int64_t *)slot_of(w, idx) = 0;
		break;
	}
}

__attribute__((noinline)) static void semantics_this_add(void)
{
	int64_t *w = sw;

	/* this_load_add_store: adds on whatever slot the thread is on. */
	while (pcpu_rseq_this_load_add_store(w, 3) != PCPU_RSEQ_COMMITTED)
		;
	{
		int64_t sum = 0;

		for (unsigned s = 0; s < pcpu_nslots(); s++)
			sum += *(int64_t *)pcpu_slot_ptr(w, s);
		CHECK(sum == 3);
	}
}

__attribute__((noinline)) static void semantics_compare(void)
{
	intptr_t *iw = siw;
	int64_t idx;

	/* load_cbne_store and load_cbne_store_store: the compare decides.
	 * Any abort (the thread moved) starts the block again. */
	for (;;) {
		intptr_t *p;

		for (unsigned s = 0; s < pcpu_nslots(); s++)
			memset(pcpu_slot_ptr(iw, s), 0, 2 * sizeof(intptr_t));
		idx = pcpu_rseq_index();
		p = slot_of(iw, idx);
		int r1 = pcpu_rseq_load_cbne_store(idx, p, 1, 7);
		if (r1 == PCPU_RSEQ_ABORTED)
			continue;
		CHECK(r1 == PCPU_RSEQ_DIFFERS && p[0] == 0);
		int r2 = pcpu_rseq_load_cbne_store_store(idx, p, 1, p + 1, 9, 7);
		if (r2 == PCPU_RSEQ_ABORTED)
			continue;
		CHECK(r2 == PCPU_RSEQ_DIFFERS && p[0] == 0 && p[1] == 0); /* no second store */
		int r3 = pcpu_rseq_load_cbne_store(idx, p, 0, 7);
		if (r3 == PCPU_RSEQ_ABORTED)
			continue;
		CHECK(r3 == PCPU_RSEQ_COMMITTED && p[0] == 7);
		int r4 = pcpu_rseq_load_cbne_store_store(idx, p, 7, p + 1, 9, 8);
		if (r4 == PCPU_RSEQ_ABORTED)
			continue;
		CHECK(r4 == PCPU_RSEQ_COMMITTED && p[0] == 8 && p[1] == 9);
		break;
	}
}

__attribute__((noinline)) static void semantics_gate(void)
{
	struct gated *g = sg;

	/* The gated add: open, then closed. */
	for (;;) {
		int rc = pcpu_rseq_this_load_cbne_load_add_store(g, offsetof(struct gated, gate), 0, 2);

		if (rc == PCPU_RSEQ_ABORTED)
			continue;
		CHECK(rc == PCPU_RSEQ_COMMITTED);
		break;
	}
	for (unsigned s = 0; s < pcpu_nslots(); s++)
		((struct gated *)pcpu_slot_ptr(g, s))->gate = 1;
	for (int k = 0; k < 100; k++) {
		int rc = pcpu_rseq_this_load_cbne_load_add_store(g, offsetof(struct gated, gate), 0, 2);

		CHECK(rc == PCPU_RSEQ_DIFFERS || rc == PCPU_RSEQ_ABORTED);
	}
	{
		int64_t sum = 0;

		for (unsigned s = 0; s < pcpu_nslots(); s++)
			sum += ((struct gated *)pcpu_slot_ptr(g, s))->count;
		CHECK(sum == 2);
	}
}

/* The stack operations, out of line for semantics_stack() (the same
 * sections; see above for why). */
__attribute__((noinline)) static int st_pop(int64_t idx, struct pcpu_rseq_stack *s, void **out)
{
	return pcpu_rseq_stack_pop(idx, s, out);
}

__attribute__((noinline)) static int st_push(int64_t idx, struct pcpu_rseq_stack *s, void *p)
{
	return pcpu_rseq_stack_push(idx, s, p);
}

__attribute__((noinline)) static int st_push_many(int64_t idx, struct pcpu_rseq_stack *s,
						   void *const *src, int64_t k)
{
	return pcpu_rseq_stack_push_many(idx, s, src, k);
}

__attribute__((noinline)) static int st_pop_many(int64_t idx, struct pcpu_rseq_stack *s,
						  void **dst, int64_t k)
{
	return pcpu_rseq_stack_pop_many(idx, s, dst, k);
}

__attribute__((noinline)) static void semantics_stack(void)
{
	struct pcpu_rseq_stack *st = sst;
	void *out = NULL, *back[4];
	int64_t idx;

	/* The stack: empty, LIFO, full, many, gated. */
	for (;;) {
		struct pcpu_rseq_stack *s;
		int rc;

		for (unsigned k = 0; k < pcpu_nslots(); k++) {
			s = pcpu_slot_ptr(st, k);
			s->count = 0, s->gate = 0;
		}
		idx = pcpu_rseq_index();
		s = slot_of(st, idx);
		rc = st_pop(idx, s, &out);
		if (rc == PCPU_RSEQ_ABORTED)
			continue;
		CHECK(rc == PCPU_RSEQ_UNFIT);
		if (st_push(idx, s, &tokens[0]) != PCPU_RSEQ_COMMITTED ||
		    st_push_many(idx, s, many + 1, 2) != PCPU_RSEQ_COMMITTED)
			continue;
		CHECK(s->count == 3 && pcpu_rseq_stack_ptrs(s)[2] == &tokens[2]);
		rc = st_push_many(idx, s, many, 2); /* room for 1 */
		if (rc == PCPU_RSEQ_ABORTED)
			continue;
		CHECK(rc == PCPU_RSEQ_UNFIT && s->count == 3);
		if (st_push(idx, s, &tokens[3]) != PCPU_RSEQ_COMMITTED)
			continue;
		rc = st_push(idx, s, &tokens[0]);
		if (rc == PCPU_RSEQ_ABORTED)
			continue;
		CHECK(rc == PCPU_RSEQ_UNFIT && s->count == 4);
		if (st_pop(idx, s, &out) != PCPU_RSEQ_COMMITTED)
			continue;
		CHECK(out == &tokens[3] && s->count == 3);
		if (st_pop_many(idx, s, back, 3) != PCPU_RSEQ_COMMITTED)
			continue;
		CHECK(s->count == 0 && back[0] == &tokens[0] && back[2] == &tokens[2]);
		rc = st_pop_many(idx, s, back, 1);
		if (rc == PCPU_RSEQ_ABORTED)
			continue;
		CHECK(rc == PCPU_RSEQ_UNFIT);
		s->gate = 1;
		rc = st_push(idx, s, &tokens[0]);
		if (rc == PCPU_RSEQ_ABORTED) {
			s->gate = 0;
			continue;
		}
		CHECK(rc == PCPU_RSEQ_DIFFERS && s->count == 0);
		s->gate = 0;
		break;
	}
}

static void check_semantics(int rseq)
{
	sw = pcpu_zone_alloc(zone, 8, 8);
	siw = pcpu_zone_alloc(zone, 2 * sizeof(intptr_t), 8);
	sg = pcpu_zone_alloc(zone, sizeof(struct gated), 8);
	sst = pcpu_zone_alloc(zone, sizeof(struct pcpu_rseq_stack) + 4 * sizeof(void *), 64);
	CHECK(sw && siw && sg && sst);
	for (unsigned s = 0; s < pcpu_nslots(); s++)
		((struct pcpu_rseq_stack *)pcpu_slot_ptr(sst, s))->cap = 4;
	if (!rseq) {
		semantics_fallback();
	} else {
		semantics_stale_index();
		semantics_this_add();
		semantics_compare();
		semantics_gate();
		semantics_stack();
	}
	CHECK(pcpu_zone_free(zone, sw) == 0 && pcpu_zone_free(zone, siw) == 0);
	CHECK(pcpu_zone_free(zone, sg) == 0 && pcpu_zone_free(zone, sst) == 0);
	printf("semantics: %s\n", rseq ? "every operation's returns and writes as stated"
				       : "every operation aborts, nothing written (fallback)");
}

/* ---- 2. the stress ----------------------------------------------------------- */

/* The slow paths: atomics on words no sequence writes. */
static void add_slow(int64_t *word, int64_t v)
{
	__atomic_fetch_add(word, v, __ATOMIC_RELAXED);
}

/* Not inlined: each operation in a function of its own, as a program's
 * would have it (and 32-bit Arm's literal pools stay in reach). */
__attribute__((noinline)) static void do_add(int64_t v)
{
	for (int t = 0; t < TRIES; t++) {
		int64_t idx = pcpu_rseq_index();

		if (idx < 0)
			break;
		if (pcpu_rseq_load_add_store(idx, slot_of(adds, idx), v) == PCPU_RSEQ_COMMITTED)
			return;
	}
	add_slow(&adds_slow, v);
}

__attribute__((noinline)) static void do_this_add(int64_t v)
{
	for (int t = 0; t < TRIES; t++)
		if (pcpu_rseq_this_load_add_store(this_adds, v) == PCPU_RSEQ_COMMITTED)
			return;
	add_slow(&this_adds_slow, v);
}

__attribute__((noinline)) static void do_inc(void)
{
	for (int t = 0; t < TRIES; t++) {
		int64_t idx = pcpu_rseq_index();
		intptr_t *p, old;

		if (idx < 0)
			break;
		p = slot_of(incs, idx);
		old = __atomic_load_n(p, __ATOMIC_RELAXED);
		if (pcpu_rseq_load_cbne_store(idx, p, old, old + 1) == PCPU_RSEQ_COMMITTED)
			return;
	}
	add_slow(&incs_slow, 1);
}

__attribute__((noinline)) static void do_append(intptr_t value)
{
	for (int t = 0; t < 4 * TRIES; t++) {
		int64_t idx = pcpu_rseq_index();
		struct plog *l;
		intptr_t h;

		if (idx < 0)
			break;
		l = slot_of(logs, idx);
		h = __atomic_load_n(&l->head, __ATOMIC_RELAXED);
		if (h >= LOG_CAP)
			break;
		if (pcpu_rseq_load_cbne_store_store(idx, &l->head, h, &l->v[h], value, h + 1) ==
		    PCPU_RSEQ_COMMITTED)
			return;
	}
	pthread_mutex_lock(&overflow_lock);
	CHECK(noverflow < overflow_cap);
	overflow[noverflow++] = value;
	pthread_mutex_unlock(&overflow_lock);
}

__attribute__((noinline)) static void do_gated_add(int64_t v)
{
	for (int t = 0; t < TRIES; t++) {
		int rc = pcpu_rseq_this_load_cbne_load_add_store(gated, offsetof(struct gated, gate), 0, v);

		if (rc == PCPU_RSEQ_COMMITTED)
			return;
		if (rc != PCPU_RSEQ_ABORTED)
			break; /* gate closed, or no index */
	}
	add_slow(&gated_central, v);
}

/* The free list: a token from the thread's slot's stack, else the pool. */
__attribute__((noinline)) static void *token_get(void)
{
	for (int t = 0; t < TRIES; t++) {
		int64_t idx = pcpu_rseq_index();
		void *tok;
		int rc;

		if (idx < 0)
			break;
		rc = pcpu_rseq_stack_pop(idx, slot_of(stacks, idx), &tok);
		if (rc == PCPU_RSEQ_COMMITTED)
			return tok;
		if (rc != PCPU_RSEQ_ABORTED)
			break; /* empty, or collecting */
	}
	pthread_mutex_lock(&pool_lock);
	void *tok = npool ? pool[--npool] : NULL;
	pthread_mutex_unlock(&pool_lock);
	return tok;
}

__attribute__((noinline)) static void token_put(void *tok)
{
	for (int t = 0; t < TRIES; t++) {
		int64_t idx = pcpu_rseq_index();
		struct pcpu_rseq_stack *s;
		void *buf[BATCH];
		int rc;

		if (idx < 0)
			break;
		s = slot_of(stacks, idx);
		rc = pcpu_rseq_stack_push(idx, s, tok);
		if (rc == PCPU_RSEQ_COMMITTED)
			return;
		if (rc == PCPU_RSEQ_DIFFERS)
			break;
		if (rc == PCPU_RSEQ_UNFIT &&
		    pcpu_rseq_stack_pop_many(idx, s, buf, BATCH) == PCPU_RSEQ_COMMITTED) {
			pthread_mutex_lock(&pool_lock);
			for (int k = 0; k < BATCH; k++)
				pool[npool++] = buf[k];
			pthread_mutex_unlock(&pool_lock);
		}
	}
	pthread_mutex_lock(&pool_lock);
	pool[npool++] = tok;
	pthread_mutex_unlock(&pool_lock);
}

/* A batch from the pool into the thread's slot's stack, when it has room. */
__attribute__((noinline)) static void token_refill(void)
{
	void *buf[BATCH];
	size_t k = 0;
	int64_t idx;

	pthread_mutex_lock(&pool_lock);
	while (k < BATCH && npool)
		buf[k++] = pool[--npool];
	pthread_mutex_unlock(&pool_lock);
	idx = pcpu_rseq_index();
	if (k && idx >= 0 &&
	    pcpu_rseq_stack_push_many(idx, slot_of(stacks, idx), buf, (int64_t)k) == PCPU_RSEQ_COMMITTED)
		return;
	pthread_mutex_lock(&pool_lock);
	while (k)
		pool[npool++] = buf[--k];
	pthread_mutex_unlock(&pool_lock);
}

static void hold_token(int me)
{
	void *tok = token_get();
	size_t i;

	if (!tok) {
		token_refill();
		return;
	}
	i = (size_t)((char *)tok - tokens);
	CHECK(i < NTOKENS);
	if (__atomic_exchange_n(&token_holder[i], me, __ATOMIC_ACQ_REL) != 0) {
		fprintf(stderr, "FAIL: token %zu handed to two threads at once\n", i);
		exit(1);
	}
	__atomic_store_n(&token_holder[i], 0, __ATOMIC_RELEASE);
	token_put(tok);
}

static __thread int64_t sig_adds, sig_incs;

static void handler(int sig)
{
	int saved = errno;

	(void)sig;
	in_handler = 1;
	do_add(2);
	do_inc();
	sig_adds += 2;
	sig_incs += 1;
	in_handler = 0;
	errno = saved;
}

struct worker_result {
	int64_t adds, this_adds, incs, gated;
	intptr_t appended;
};
static struct worker_result results[MAX_THREADS];

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct worker_result r = {0};
	sigset_t all;

	stress_rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)me << 17) ^ (uint64_t)time(NULL);
	is_worker = 1;
	(void)pcpu_thread_init();
	stress_check_mode(expect_mode, &mode_mismatch);
	stress_enter(&harness, (unsigned)me);
	for (unsigned long it = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); it++) {
		uint64_t x = stress_rand();

		if ((it & 255) == 0)
			__atomic_store_n(&worker_aborts[me], pcpu__test_inject_aborts, __ATOMIC_RELAXED);
		int64_t v = (int64_t)(x % 201) - 100;

		switch ((x >> 16) % 6) {
		case 0: do_add(v); r.adds += v; break;
		case 1: do_this_add(v); r.this_adds += v; break;
		case 2: do_inc(); r.incs++; break;
		case 3:
			if (r.appended < LOG_CAP / 2) {
				do_append(((intptr_t)me << 24) | (r.appended + 1));
				r.appended++;
			}
			break;
		case 4: do_gated_add(v); r.gated += v; break;
		default: hold_token(me + 1); break;
		}
	}
	stress_leave(&harness, (unsigned)me);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	r.adds += sig_adds;
	r.incs += sig_incs;
	results[me] = r;
	__atomic_fetch_add(&total_aborts, pcpu__test_inject_aborts, __ATOMIC_RELAXED);
	return NULL;
}

/* Closes every slot's gate, fences, folds and reopens: the gated adds'
 * switcher, and the stacks' collector. */
static void *switcher(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		unsigned n = pcpu_nslots();

		usleep(500);
		for (unsigned s = 0; s < n; s++)
			__atomic_store_n(&((struct gated *)pcpu_slot_ptr(gated, s))->gate, 1,
					 __ATOMIC_RELAXED);
		if (pcpu_rseq_fence() == 0) {
			int64_t sum = 0;

			/* No sequence commits to a gated word now: they are ours. */
			for (unsigned s = 0; s < n; s++) {
				struct gated *g = pcpu_slot_ptr(gated, s);

				sum += g->count;
				g->count = 0;
			}
			add_slow(&gated_central, sum);
			gated_folds++;
		}
		for (unsigned s = 0; s < n; s++)
			__atomic_store_n(&((struct gated *)pcpu_slot_ptr(gated, s))->gate, 0,
					 __ATOMIC_RELAXED);

		usleep(500);
		for (unsigned s = 0; s < n; s++)
			__atomic_store_n(&((struct pcpu_rseq_stack *)pcpu_slot_ptr(stacks, s))->gate, 1,
					 __ATOMIC_RELAXED);
		if (pcpu_rseq_fence() == 0) {
			pthread_mutex_lock(&pool_lock);
			for (unsigned s = 0; s < n; s++) {
				struct pcpu_rseq_stack *st = pcpu_slot_ptr(stacks, s);

				for (int64_t k = 0; k < st->count; k++)
					pool[npool++] = pcpu_rseq_stack_ptrs(st)[k];
				st->count = 0;
			}
			pthread_mutex_unlock(&pool_lock);
			collections++;
		}
		for (unsigned s = 0; s < n; s++)
			__atomic_store_n(&((struct pcpu_rseq_stack *)pcpu_slot_ptr(stacks, s))->gate, 0,
					 __ATOMIC_RELAXED);
	}
	return NULL;
}

static int cmp_intptr(const void *a, const void *b)
{
	intptr_t x = *(const intptr_t *)a, y = *(const intptr_t *)b;

	return (x > y) - (x < y);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = 2, max_seconds = 600, start;
	unsigned long min_aborts = 1000;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t th[MAX_THREADS], sw;
	struct sigaction sa;
	int rseq;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-mode") && i + 1 < argc)
			expect_mode = argv[++i];
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc)
			max_seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--min-aborts") && i + 1 < argc)
			min_aborts = strtoul(argv[++i], NULL, 0);
		else {
			fprintf(stderr, "usage: %s --expect-mode glibc|own|fallback [--seconds S] "
				"[--min-aborts N] [--max-seconds S]\n", argv[0]);
			return 2;
		}
	}
	stress_check_mode(expect_mode, &mode_mismatch);
	rseq = pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK;
	if (!rseq)
		min_aborts = 0;
	zone = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	CHECK(zone);
	check_semantics(rseq);

	adds = pcpu_zone_alloc(zone, 8, 8);
	this_adds = pcpu_zone_alloc(zone, 8, 8);
	incs = pcpu_zone_alloc(zone, sizeof(intptr_t), 8);
	logs = pcpu_zone_alloc(zone, sizeof(struct plog), 64);
	gated = pcpu_zone_alloc(zone, sizeof(struct gated), 64);
	stacks = pcpu_zone_alloc(zone, sizeof(struct pcpu_rseq_stack) + STACK_CAP * sizeof(void *), 64);
	CHECK(adds && this_adds && incs && logs && gated && stacks);
	for (unsigned s = 0; s < pcpu_nslots(); s++)
		((struct pcpu_rseq_stack *)pcpu_slot_ptr(stacks, s))->cap = STACK_CAP;
	for (size_t i = 0; i < NTOKENS; i++)
		pool[npool++] = &tokens[i];

	nthreads = (int)(2 * ncpu < 4 ? 4 : 2 * ncpu);
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	overflow_cap = (size_t)nthreads * LOG_CAP;
	overflow = calloc(overflow_cap, sizeof(intptr_t));
	CHECK(overflow);
	harness.ntids = (unsigned)nthreads;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	pcpu__test_inject_spin = 200;
	stress_start(&harness);
	CHECK(pthread_create(&sw, NULL, switcher, NULL) == 0);
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
	start = now_s();
	/* At least `seconds`, and on until enough sections aborted. */
	for (;;) {
		unsigned long aborted = 0;
		double t;

		usleep(100000);
		t = now_s() - start;
		for (int i = 0; i < nthreads; i++)
			aborted += __atomic_load_n(&worker_aborts[i], __ATOMIC_RELAXED);
		if ((t >= seconds && aborted >= min_aborts) || t >= max_seconds)
			break;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
	CHECK(pthread_join(sw, NULL) == 0);
	stress_join(&harness);

	/* The totals. */
	for (int i = 0; i < nthreads; i++) {
		adds_expected += results[i].adds;
		this_adds_expected += results[i].this_adds;
		incs_expected += results[i].incs;
		gated_expected += results[i].gated;
	}
	{
		int64_t a = adds_slow, ta = this_adds_slow, in = incs_slow, g = gated_central;

		for (unsigned s = 0; s < pcpu_nslots(); s++) {
			a += *(int64_t *)pcpu_slot_ptr(adds, s);
			ta += *(int64_t *)pcpu_slot_ptr(this_adds, s);
			in += *(intptr_t *)pcpu_slot_ptr(incs, s);
			g += ((struct gated *)pcpu_slot_ptr(gated, s))->count;
		}
		CHECK_EQ_U64(a, adds_expected);
		CHECK_EQ_U64(ta, this_adds_expected);
		CHECK_EQ_U64(in, incs_expected);
		CHECK_EQ_U64(g, gated_expected);
	}
	/* Every appended value once. */
	{
		size_t n = noverflow, k = 0, want = 0;
		intptr_t *all;

		for (unsigned s = 0; s < pcpu_nslots(); s++)
			n += (size_t)((struct plog *)pcpu_slot_ptr(logs, s))->head;
		for (int i = 0; i < nthreads; i++)
			want += (size_t)results[i].appended;
		CHECK_EQ_U64(n, want);
		all = malloc((n ? n : 1) * sizeof(intptr_t));
		CHECK(all);
		for (unsigned s = 0; s < pcpu_nslots(); s++) {
			struct plog *l = pcpu_slot_ptr(logs, s);

			memcpy(all + k, l->v, (size_t)l->head * sizeof(intptr_t));
			k += (size_t)l->head;
		}
		memcpy(all + k, overflow, noverflow * sizeof(intptr_t));
		qsort(all, n, sizeof(intptr_t), cmp_intptr);
		k = 0;
		for (int i = 0; i < nthreads; i++)
			for (intptr_t j = 1; j <= results[i].appended; j++) {
				intptr_t v = ((intptr_t)i << 24) | j;
				intptr_t *f = bsearch(&v, all, n, sizeof(intptr_t), cmp_intptr);

				if (!f) {
					fprintf(stderr, "FAIL: appended value %#lx lost\n", (long)v);
					return 1;
				}
				k++;
			}
		for (size_t i = 1; i < n; i++)
			if (all[i] == all[i - 1]) {
				fprintf(stderr, "FAIL: value %#lx appended twice\n", (long)all[i]);
				return 1;
			}
		CHECK_EQ_U64(k, n);
		free(all);
	}
	/* Every token once, none held. */
	{
		static int seen[NTOKENS];
		size_t n = npool;

		for (size_t i = 0; i < npool; i++)
			seen[(char *)pool[i] - tokens]++;
		for (unsigned s = 0; s < pcpu_nslots(); s++) {
			struct pcpu_rseq_stack *st = pcpu_slot_ptr(stacks, s);

			for (int64_t k = 0; k < st->count; k++)
				seen[(char *)pcpu_rseq_stack_ptrs(st)[k] - tokens]++;
			n += (size_t)st->count;
		}
		for (size_t i = 0; i < NTOKENS; i++)
			if (seen[i] != 1 || token_holder[i] != 0) {
				fprintf(stderr, "FAIL: token %zu found %d times (holder %d)\n", i, seen[i],
					token_holder[i]);
				return 1;
			}
		CHECK_EQ_U64(n, NTOKENS);
	}
	printf("percpu_ops: mode %s, %d threads, %.1f s: adds %" PRId64 " / %" PRId64
	       ", increments %" PRId64 ", gated %" PRId64 " (%lu folds), %lu stack collections, "
	       "%lu aborts: exact\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), nthreads, now_s() - start, adds_expected,
	       this_adds_expected, incs_expected, gated_expected, gated_folds, collections,
	       total_aborts);
	CHECK(!mode_mismatch);
	if (total_aborts < min_aborts) {
		fprintf(stderr, "FAIL: only %lu sections aborted (wanted %lu): the abort paths did not run enough\n",
			total_aborts, min_aborts);
		return 1;
	}
	return 0;
}
