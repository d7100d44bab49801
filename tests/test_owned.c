/* SPDX-License-Identifier: MIT */
/*
 * Owned slots (pcpu/worker.h), in whatever rseq mode the process runs
 * (ctest runs it with glibc's rseq, pcpu's own registration, PCPU_RSEQ=0
 * and rseq refused by seccomp; --expect-mode says which):
 *
 *   test_owned unit     claims, the zero claim, slots, reads, resets,
 *                       release and reuse, add_many and histograms
 *   test_owned exclusive   with PCPU_OWNED_SLOTS=1: a held slot cannot be
 *                       claimed again; after its holder exits or releases,
 *                       the next claim gets it and adds on from its value
 *   test_owned fork     the child keeps its calling thread's claim and
 *                       frees the others (a new child thread gets them);
 *                       parent and child each count exactly
 *   test_owned segment  in a published segment: the file's pages of an owned
 *                       slot are allocated at its first claim, not before,
 *                       and an outside reader sees the owned adds
 *   test_owned env      PCPU_OWNED_SLOTS: for each of a list of values, runs
 *                       itself with it (the variable is read once per
 *                       process): a decimal 0..1024 gives that many slots,
 *                       unset or empty the default, and anything else
 *                       (1025, -1, abc, 3x, " 3", +3...) no slots and
 *                       claims that fail with EINVAL, never the default
 *   test_owned stress [ROUNDS]   claimers (more than the slots: some get
 *                       EBUSY and use the zero claim) and ordinary threads
 *                       add to the same counters and histogram with random
 *                       values, while a thread moves them between CPUs and
 *                       signals them (handlers add too), a resetter takes
 *                       fetch_and_zero, a reader checks a counter never
 *                       goes back, claimers exit and new ones take their
 *                       slots, and forked children count exactly on their
 *                       copies. Totals exact.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/counter.h>
#include <pcpu/histogram.h>
#include <pcpu/reader.h>
#include <pcpu/rseq.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <pcpu/worker.h>

#include "check.h"

static const char *expect_mode;

static void check_mode(void)
{
	const char *m = pcpu_rseq_mode_name(pcpu_rseq_mode());

	if (expect_mode && strcmp(m, expect_mode) != 0) {
		fprintf(stderr, "rseq mode %s, expected %s\n", m, expect_mode);
		exit(1);
	}
}

/* ---- unit ------------------------------------------------------------------ */

static void unit(void)
{
	static const int64_t bounds[] = { 10, 100, 1000 };
	struct pcpu_histogram_layout lay = { .scheme = PCPU_HISTOGRAM_EXPLICIT,
					     .bounds = bounds, .nbounds = 3 };
	pcpu_counter_t c = pcpu_counter_alloc_array(4);
	pcpu_histogram_t *h = pcpu_histogram_create(&lay);
	pcpu_worker_t w, zero = { 0 }, again;
	unsigned nslots = pcpu_nslots(), max = pcpu_worker_max();
	uint64_t counts[4], count;
	int64_t sum;
	int slot;

	CHECK(c && h);
	CHECK(max >= 1 && max < nslots);
	/* No claim yet: the zero claim, whose updates are ordinary ones. */
	CHECK(pcpu_worker_self().pcpu__off == 0 && pcpu_worker_slot(zero) == -1);
	errno = 0;
	CHECK(pcpu_worker_release() == -1 && errno == EINVAL);
	pcpu_counter_add_owned(zero, c, 5);
	pcpu_counter_add_owned(pcpu_worker_self(), c, 6);
	CHECK(pcpu_counter_fetch(c) == 11);

	CHECK(pcpu_worker_claim(&w) == 0);
	slot = pcpu_worker_slot(w);
	/* The first owned slot: after every CPU slot. */
	CHECK(slot == (int)(nslots - max));
	CHECK(pcpu_worker_self().pcpu__off == w.pcpu__off);
	CHECK(pcpu_worker_claim(&again) == 0 && again.pcpu__off == w.pcpu__off);
	CHECK(pcpu_worker_claim(NULL) == 0);

	pcpu_counter_add_owned(w, c, 7);
	pcpu_counter_add_owned(w, pcpu_counter_at(c, 1), -3);
	/* Exactly the owned slot's word changed: no mirror, no other slot. */
	CHECK(pcpu_counter_fetch_slot(c, (unsigned)slot) == 7);
	CHECK(*(int64_t *)pcpu_slot_ptr(c, (unsigned)slot) == 7);
	CHECK(*(int64_t *)pcpu_slot_ptr(pcpu_counter_at(c, 1), (unsigned)slot) == -3);
	CHECK(pcpu_counter_fetch(c) == 18);
	CHECK((int64_t)pcpu_counter_fetch(pcpu_counter_at(c, 1)) == -3);
	{
		uint64_t out[4];

		CHECK(pcpu_counter_fetch_array(c, 4, out) == 0);
		CHECK(out[0] == 18 && (int64_t)out[1] == -3 && out[2] == 0 && out[3] == 0);
	}
	/* add_many: the four counters at once. */
	{
		pcpu_counter_t cs[4] = { c, pcpu_counter_at(c, 1), pcpu_counter_at(c, 2),
					 pcpu_counter_at(c, 3) };
		int64_t vs[4] = { 1, 2, 3, 4 };

		pcpu_counter_add_many_owned(w, cs, vs, 4);
		pcpu_counter_add_many_owned(zero, cs, vs, 4);
		CHECK(pcpu_counter_fetch(cs[0]) == 20 && (int64_t)pcpu_counter_fetch(cs[1]) == 1 &&
		      pcpu_counter_fetch(cs[2]) == 6 && pcpu_counter_fetch(cs[3]) == 8);
		CHECK(*(int64_t *)pcpu_slot_ptr(cs[3], (unsigned)slot) == 4);
	}
	/* A reset: by offset in slot 0's mirror; the owned word is the
	 * owner's alone and keeps its value. */
	CHECK(pcpu_counter_fetch_and_zero(c) == 20);
	CHECK(pcpu_counter_fetch(c) == 0);
	CHECK(*(int64_t *)pcpu_slot_ptr(c, (unsigned)slot) == 8);
	pcpu_counter_add_owned(w, c, 2);
	CHECK(pcpu_counter_fetch(c) == 2);

	/* Histograms: count and sum in the owned slot. */
	pcpu_histogram_record_owned(w, h, 5);
	pcpu_histogram_record_owned(w, h, 50);
	pcpu_histogram_record_owned(w, h, 5000);
	pcpu_histogram_record_owned(zero, h, 7);
	pcpu_histogram_record(h, 500);
	CHECK(pcpu_histogram_read(h, counts, 4, &count, &sum) == 0);
	CHECK(counts[0] == 2 && counts[1] == 1 && counts[2] == 1 && counts[3] == 1);
	CHECK(count == 5 && sum == 5 + 50 + 5000 + 7 + 500);

	/* Release: the values stay; a new claim gets the same slot back. */
	CHECK(pcpu_worker_release() == 0);
	CHECK(pcpu_worker_self().pcpu__off == 0);
	CHECK(pcpu_counter_fetch(c) == 2);
	pcpu_counter_add_owned(pcpu_worker_self(), c, 1); /* ordinary now */
	CHECK(*(int64_t *)pcpu_slot_ptr(c, (unsigned)slot) == 10);
	CHECK(pcpu_worker_claim(&w) == 0 && pcpu_worker_slot(w) == slot);
	pcpu_counter_add_owned(w, c, 1);
	CHECK(*(int64_t *)pcpu_slot_ptr(c, (unsigned)slot) == 11);
	CHECK(pcpu_counter_fetch(c) == 4);
	/* The array view: the same words as the `_owned` adds, refused
	 * without the thread's claim. */
	{
		pcpu_owned_array_t a;

		errno = 0;
		CHECK(pcpu_counter_owned_array(zero, c, &a) == -1 && errno == EINVAL &&
		      a.pcpu__words == NULL);
		errno = 0;
		CHECK(pcpu_counter_owned_array(w, NULL, &a) == -1 && errno == EINVAL);
		errno = 0;
		CHECK(pcpu_counter_owned_array(w, c, NULL) == -1 && errno == EINVAL);
		CHECK(pcpu_counter_owned_array(w, c, &a) == 0);
		pcpu_owned_array_add(a, 0, 3);
		pcpu_owned_array_add(a, 3, -5);
		CHECK(*(int64_t *)pcpu_slot_ptr(c, (unsigned)slot) == 14);
		CHECK(*(int64_t *)pcpu_slot_ptr(pcpu_counter_at(c, 3), (unsigned)slot) == -1);
		CHECK(pcpu_counter_fetch(c) == 7);
		CHECK(pcpu_counter_fetch(pcpu_counter_at(c, 3)) == 3);
		CHECK(pcpu_worker_release() == 0);
		errno = 0;
		CHECK(pcpu_counter_owned_array(w, c, &a) == -1 && errno == EINVAL);
	}
	pcpu_histogram_destroy(h);
	CHECK(pcpu_counter_free(c) == 0);
	printf("unit: %u owned slots of %u, the first is slot %d: claims, reads, resets, reuse\n",
	       max, nslots, slot);
}

/* ---- exclusive (PCPU_OWNED_SLOTS=1) ----------------------------------------- */

static pcpu_counter_t ex_c;
static pthread_barrier_t ex_bar;
static pcpu_worker_t ex_w; /* the holder's claim, for another thread to misuse */

static void *ex_holder(void *arg)
{
	pcpu_worker_t w;

	(void)arg;
	CHECK(pcpu_worker_claim(&w) == 0);
	ex_w = w;
	pcpu_counter_add_owned(w, ex_c, 100);
	pthread_barrier_wait(&ex_bar); /* claimed */
	pthread_barrier_wait(&ex_bar); /* the other thread tried */
	return NULL;                   /* the exit releases the slot */
}

static void *ex_other(void *arg)
{
	pcpu_worker_t w;
	pcpu_owned_array_t a;
	int slot = *(int *)arg;

	errno = 0;
	CHECK(pcpu_worker_claim(&w) == -1 && errno == EBUSY && w.pcpu__off == 0);
	/* Another thread's claim gives no view of its slot. */
	errno = 0;
	CHECK(pcpu_counter_owned_array(ex_w, ex_c, &a) == -1 && errno == EINVAL);
	pcpu_counter_add_owned(w, ex_c, 1); /* the zero claim: ordinary */
	CHECK(*(int64_t *)pcpu_slot_ptr(ex_c, (unsigned)slot) == 100);
	return NULL;
}

static void exclusive(void)
{
	pthread_t a, b;
	pcpu_worker_t w;
	int slot;

	CHECK(pcpu_worker_max() == 1);
	ex_c = pcpu_counter_alloc();
	CHECK(ex_c);
	pthread_barrier_init(&ex_bar, NULL, 2);
	CHECK(pthread_create(&a, NULL, ex_holder, NULL) == 0);
	pthread_barrier_wait(&ex_bar);
	slot = (int)pcpu_nslots() - 1;
	errno = 0;
	CHECK(pcpu_worker_claim(&w) == -1 && errno == EBUSY);
	CHECK(pthread_create(&b, NULL, ex_other, &slot) == 0);
	CHECK(pthread_join(b, NULL) == 0);
	pthread_barrier_wait(&ex_bar);
	CHECK(pthread_join(a, NULL) == 0);
	/* The holder exited: its slot is free, with its value. */
	CHECK(pcpu_worker_claim(&w) == 0 && pcpu_worker_slot(w) == slot);
	pcpu_counter_add_owned(w, ex_c, 10);
	CHECK(*(int64_t *)pcpu_slot_ptr(ex_c, (unsigned)slot) == 110);
	CHECK(pcpu_counter_fetch(ex_c) == 111);
	CHECK(pcpu_worker_release() == 0);
	CHECK(pthread_create(&b, NULL, ex_holder, NULL) == 0); /* claims after a release */
	pthread_barrier_wait(&ex_bar);
	pthread_barrier_wait(&ex_bar);
	CHECK(pthread_join(b, NULL) == 0);
	CHECK(*(int64_t *)pcpu_slot_ptr(ex_c, (unsigned)slot) == 210);
	CHECK(pcpu_counter_fetch(ex_c) == 211);
	printf("exclusive: one owned slot: EBUSY while held; after exit and release the next "
	       "claimer adds on from its value\n");
}

/* ---- fork ------------------------------------------------------------------ */

static pcpu_counter_t fk_c;
static pthread_barrier_t fk_bar;
static int fk_other_slot;

static void *fk_holder(void *arg)
{
	pcpu_worker_t w;

	(void)arg;
	CHECK(pcpu_worker_claim(&w) == 0);
	fk_other_slot = pcpu_worker_slot(w);
	pcpu_counter_add_owned(w, fk_c, 5);
	pthread_barrier_wait(&fk_bar); /* claimed and added */
	pthread_barrier_wait(&fk_bar); /* the parent forked */
	pcpu_counter_add_owned(w, fk_c, 1000);
	return NULL;
}

static void *fk_child_claimer(void *arg)
{
	pcpu_worker_t w;

	(void)arg;
	CHECK(pcpu_worker_claim(&w) == 0);
	/* The parent's other holder does not exist here: its slot is free. */
	CHECK(pcpu_worker_slot(w) == fk_other_slot);
	pcpu_counter_add_owned(w, fk_c, 7);
	CHECK(*(int64_t *)pcpu_slot_ptr(fk_c, (unsigned)fk_other_slot) == 12);
	return NULL;
}

static void forked(void)
{
	pthread_t a, b;
	pcpu_worker_t w;
	pcpu_owned_array_t view;
	pid_t pid;
	int st, mine;

	CHECK(pcpu_worker_max() >= 2);
	fk_c = pcpu_counter_alloc();
	CHECK(fk_c);
	pthread_barrier_init(&fk_bar, NULL, 2);
	CHECK(pcpu_worker_claim(&w) == 0);
	mine = pcpu_worker_slot(w);
	pcpu_counter_add_owned(w, fk_c, 1);
	CHECK(pcpu_counter_owned_array(w, fk_c, &view) == 0);
	CHECK(pthread_create(&a, NULL, fk_holder, NULL) == 0);
	pthread_barrier_wait(&fk_bar);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* The calling thread keeps its claim, on the child's copy. */
		CHECK(pcpu_worker_self().pcpu__off == w.pcpu__off);
		pcpu_counter_add_owned(w, fk_c, 15);
		/* So does a view it took before fork(). */
		pcpu_owned_array_add(view, 0, 5);
		CHECK(*(int64_t *)pcpu_slot_ptr(fk_c, (unsigned)mine) == 21);
		{
			/* A stack of its own: the new thread's id (at its
			 * stack's top) then differs from the parent's holder,
			 * which ThreadSanitizer still knows ("dup thread"). */
			pthread_attr_t at;
			size_t size = 1 << 20;
			void *stack = aligned_alloc(4096, size);

			CHECK(stack && pthread_attr_init(&at) == 0);
			CHECK(pthread_attr_setstack(&at, stack, size) == 0);
			CHECK(pthread_create(&b, &at, fk_child_claimer, NULL) == 0);
			pthread_attr_destroy(&at);
		}
		CHECK(pthread_join(b, NULL) == 0);
		pcpu_counter_add(fk_c, 300);
		CHECK(pcpu_counter_fetch(fk_c) == 1 + 5 + 20 + 7 + 300);
		_exit(0);
	}
	pthread_barrier_wait(&fk_bar);
	CHECK(pthread_join(a, NULL) == 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The parent never saw the child's adds. */
	CHECK(pcpu_counter_fetch(fk_c) == 1 + 5 + 1000);
	CHECK(*(int64_t *)pcpu_slot_ptr(fk_c, (unsigned)mine) == 1);
	CHECK(pcpu_worker_release() == 0);
	printf("fork: the child keeps its caller's claim and frees the others; both count exactly\n");
}

/* ---- segment --------------------------------------------------------------- */

static long long allocated_blocks(const char *path)
{
	struct stat st;

	CHECK(stat(path, &st) == 0);
	return (long long)st.st_blocks;
}

static void segment(void)
{
	char dir[] = "/tmp/pcpu-owned-test.XXXXXX";
	struct pcpu_segment_options o = { 0 };
	struct pcpu_reader_options ro = { 0 };
	struct pcpu_reader_snapshot *snap = NULL;
	struct pcpu_family_desc d;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_family_t *f;
	pcpu_counter_t c;
	pcpu_reader_t *r;
	pcpu_worker_t w;
	long long before, after;
	int seen = 0;

	CHECK(mkdtemp(dir) != NULL);
	reg = pcpu_registry_create();
	CHECK(reg);
	o.dir = dir;
	seg = pcpu_segment_publish(reg, "owned", &o);
	CHECK(seg);
	memset(&d, 0, sizeof d);
	d.name = "owned_events";
	d.type = PCPU_METRIC_COUNTER;
	f = pcpu_registry_family(reg, &d);
	CHECK(f);
	c = pcpu_family_counter(f, NULL);
	CHECK(c);
	pcpu_counter_add(c, 1);
	/* Unclaimed owned slots cost the file nothing; the first claim
	 * allocates the slot's pages under every object there is. */
	before = allocated_blocks(pcpu_segment_path(seg));
	CHECK(pcpu_worker_claim(&w) == 0);
	after = allocated_blocks(pcpu_segment_path(seg));
	CHECK(after >= before + sysconf(_SC_PAGESIZE) / 512);
	pcpu_counter_add_owned(w, c, 41);
	CHECK(pcpu_counter_fetch(c) == 42);
	/* A second claim of the same slot allocates nothing more. */
	CHECK(pcpu_worker_release() == 0);
	CHECK(pcpu_worker_claim(&w) == 0);
	CHECK(allocated_blocks(pcpu_segment_path(seg)) == after);
	ro.dir = dir;
	r = pcpu_reader_open("owned", &ro);
	CHECK(r);
	CHECK(pcpu_reader_snapshot(r, 0, &snap) == 0 && snap);
	for (size_t fi = 0; fi < snap->snapshot.nfamilies; fi++)
		if (!strcmp(snap->snapshot.families[fi].name, "owned_events")) {
			CHECK(snap->snapshot.families[fi].nseries == 1);
			CHECK(snap->snapshot.families[fi].series[0].value.counter == 42);
			seen = 1;
		}
	CHECK(seen);
	pcpu_reader_snapshot_free(snap);
	pcpu_reader_close(r);
	CHECK(pcpu_worker_release() == 0);
	pcpu_registry_destroy(reg);
	CHECK(rmdir(dir) == 0);
	printf("segment: the claim allocated %lld blocks of the file (%lld before); an outside "
	       "reader sees the owned adds\n", after - before, before);
}

/* ---- env: PCPU_OWNED_SLOTS ---------------------------------------------------- */

/* In a process started with PCPU_OWNED_SLOTS set by env(): `want` is
 * "refused", "default" or the number of owned slots expected. */
static void env_child(const char *want)
{
	pcpu_counter_t c = pcpu_counter_alloc();
	unsigned nslots = pcpu_nslots(), max = pcpu_worker_max();
	pcpu_worker_t w;
	int rc;

	CHECK(c);
	errno = 0;
	rc = pcpu_worker_claim(&w);
	if (!strcmp(want, "refused")) {
		/* No owned slot, a claim says why, and updates through the
		 * zero claim are the ordinary ones. */
		CHECK(max == 0);
		CHECK(rc == -1 && errno == EINVAL && w.pcpu__off == 0);
		CHECK(pcpu_worker_self().pcpu__off == 0);
		pcpu_counter_add_owned(w, c, 5);
		CHECK(pcpu_counter_fetch(c) == 5);
		return;
	}
	if (!strcmp(want, "default")) {
		/* One per possible CPU (the CPU slots: PCPU_NSLOTS is unset),
		 * at most 128. */
		unsigned cpus = nslots - max;

		CHECK(max == (cpus < 128 ? cpus : 128));
	} else {
		CHECK(max == (unsigned)atoi(want));
	}
	if (max == 0) {
		CHECK(rc == -1 && errno == EBUSY);
		return;
	}
	CHECK(rc == 0 && pcpu_worker_slot(w) == (int)(nslots - max));
	pcpu_counter_add_owned(w, c, 5);
	CHECK(pcpu_counter_fetch_slot(c, (unsigned)pcpu_worker_slot(w)) == 5);
	CHECK(pcpu_worker_release() == 0);
}

static void env(void)
{
	static const struct {
		const char *value; /* NULL: unset */
		const char *want;
	} cases[] = {
		{ "1025", "refused" }, { "-1", "refused" }, { "abc", "refused" }, { "3x", "refused" },
		{ " 3", "refused" }, { "3 ", "refused" }, { "+3", "refused" }, { "0x3", "refused" },
		{ "1e3", "refused" }, { "99999999999999999999", "refused" }, { "-0", "refused" },
		{ "3", "3" }, { "0", "0" }, { "1", "1" }, { "007", "7" }, { "1024", "1024" },
		{ NULL, "default" }, { "", "default" },
	};
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		pid_t pid = fork();
		int st;

		CHECK(pid >= 0);
		if (pid == 0) {
			unsetenv("PCPU_NSLOTS");
			if (cases[i].value)
				setenv("PCPU_OWNED_SLOTS", cases[i].value, 1);
			else
				unsetenv("PCPU_OWNED_SLOTS");
			execl("/proc/self/exe", "test_owned", "env-child", cases[i].want, (char *)NULL);
			_exit(127);
		}
		CHECK(waitpid(pid, &st, 0) == pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "PCPU_OWNED_SLOTS=%s%s%s: expected %s, the child failed\n",
				cases[i].value ? "\"" : "(unset)", cases[i].value ? cases[i].value : "",
				cases[i].value ? "\"" : "", cases[i].want);
			exit(1);
		}
	}
	printf("PCPU_OWNED_SLOTS: %zu values, each as expected\n", i);
}

/* ---- stress ---------------------------------------------------------------- */

#define ST_NC 16        /* counters */
#define ST_OPS 1000000  /* updates per thread life */
#define ST_LIVES 3      /* each claimer position is run by this many threads in turn */
#define ST_MAX_THREADS 64

static pcpu_counter_t st_c;      /* ST_NC counters, random adds; resets */
static pcpu_counter_t st_mono;   /* +1 only, never reset: the reader's */
static pcpu_counter_t st_sig;    /* handlers' adds */
static pcpu_histogram_t *st_h;
static int64_t st_expect[ST_NC]; /* summed by threads at their end */
static uint64_t st_expect_mono, st_expect_sig, st_expect_hcount;
static int64_t st_expect_hsum;
static uint64_t st_reset_total[ST_NC];
static int st_stop, st_claims_ok, st_claims_busy, st_forks, st_moves, st_signals;
static uint64_t st_reader_passes;
static pthread_t st_tids[ST_MAX_THREADS];
static int st_nthreads;
static pthread_mutex_t st_tid_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_barrier_t st_claimed;  /* a round's threads have all tried to claim */
static __thread int st_owner;          /* holds a claim */
static __thread uint64_t st_sig_count; /* this thread's handler's adds */

static void st_handler(int sig)
{
	(void)sig;
#if PCPU_OWNED_ADD_SIGNAL_SAFE
	/* The interrupted code may be in the middle of an owned add to this
	 * very counter: one instruction, so nothing is lost. */
	pcpu_counter_add_owned(pcpu_worker_self(), st_sig, 1);
	pcpu_counter_add_owned(pcpu_worker_self(), st_c, 1);
#else
	pcpu_counter_add(st_sig, 1);
	pcpu_counter_add(st_c, 1);
#endif
	st_sig_count++;
}

static void st_register(void)
{
	pthread_mutex_lock(&st_tid_lock);
	st_tids[st_nthreads % ST_MAX_THREADS] = pthread_self();
	st_nthreads++;
	pthread_mutex_unlock(&st_tid_lock);
}

static void st_unregister(void)
{
	pthread_mutex_lock(&st_tid_lock);
	for (int i = 0; i < ST_MAX_THREADS && i < st_nthreads; i++)
		if (pthread_equal(st_tids[i], pthread_self()))
			st_tids[i] = 0;
	pthread_mutex_unlock(&st_tid_lock);
}

/* A forked child: counts on its own copy, claims, and checks exactly. */
static void st_child(void)
{
	pcpu_counter_t c = pcpu_counter_alloc();
	pcpu_worker_t w;

	if (!c)
		_exit(3);
	if (pcpu_worker_claim(&w) != 0 && errno != EBUSY)
		_exit(4);
	for (int i = 0; i < 10000; i++) {
		pcpu_counter_add_owned(w, c, 3);
		pcpu_counter_add(c, 1);
	}
	_exit(pcpu_counter_fetch(c) == 40000 ? 0 : 5);
}

static void *st_worker(void *arg)
{
	long id = (long)arg;
	int claim = id % 2 == 0; /* even: claimers; odd: ordinary threads */
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
	int64_t mine[ST_NC] = { 0 };
	uint64_t mono = 0, hcount = 0;
	int64_t hsum = 0;
	pcpu_worker_t w = { 0 };
	pcpu_owned_array_t ac = { 0 }, am = { 0 }; /* views of st_c and st_mono */
	sigset_t set;

	st_register();
	if (claim) {
		if (pcpu_worker_claim(&w) == 0) {
			CHECK(pcpu_counter_owned_array(w, st_c, &ac) == 0);
			CHECK(pcpu_counter_owned_array(w, st_mono, &am) == 0);
			st_owner = 1;
			__atomic_fetch_add(&st_claims_ok, 1, __ATOMIC_RELAXED);
		} else {
			CHECK(errno == EBUSY);
			__atomic_fetch_add(&st_claims_busy, 1, __ATOMIC_RELAXED);
		}
	}
	/* Every claim of the round is made while the others are held: the
	 * claimers are one more than the slots, so exactly one gets EBUSY. */
	pthread_barrier_wait(&st_claimed);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	/* Thread 0 goes on until a signal has interrupted it: handlers that
	 * add are part of what this checks, whatever the machine's speed. */
	for (int i = 0; i < ST_OPS || (id == 0 && st_sig_count == 0); i++) {
		uint64_t r = check_xorshift(&seed);
		unsigned k = (unsigned)(r % ST_NC);
		int64_t v = (int64_t)(r >> 40) - (1 << 23);

		if (claim) {
			pcpu_counter_add_owned(w, pcpu_counter_at(st_c, k), v);
			pcpu_counter_add_owned(w, st_mono, 1);
			if (i % 8 == 0) {
				int64_t hv = (int64_t)(r >> 54);

				pcpu_histogram_record_owned(w, st_h, hv);
				hcount++;
				hsum += hv;
			}
			if (i % 16 == 0) {
				pcpu_counter_t cs[2] = { pcpu_counter_at(st_c, k), st_mono };
				int64_t vs[2] = { v, 1 };

				pcpu_counter_add_many_owned(w, cs, vs, 2);
				mine[k] += v;
				mono++;
			}
			if (i % 16 == 8 && st_owner) {
				pcpu_owned_array_add(ac, k, v);
				pcpu_owned_array_add(am, 0, 1);
				mine[k] += v;
				mono++;
			}
		} else {
			pcpu_counter_add(pcpu_counter_at(st_c, k), v);
			pcpu_counter_add(st_mono, 1);
			if (i % 8 == 0) {
				int64_t hv = (int64_t)(r >> 54);

				pcpu_histogram_record(st_h, hv);
				hcount++;
				hsum += hv;
			}
		}
		mine[k] += v;
		mono++;
	}
	/* Signals stop before the tallies are read. */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	st_unregister();
	for (unsigned k = 0; k < ST_NC; k++)
		__atomic_fetch_add(&st_expect[k], mine[k], __ATOMIC_RELAXED);
	__atomic_fetch_add(&st_expect[0], (int64_t)st_sig_count, __ATOMIC_RELAXED);
	__atomic_fetch_add(&st_expect_sig, st_sig_count, __ATOMIC_RELAXED);
	__atomic_fetch_add(&st_expect_mono, mono, __ATOMIC_RELAXED);
	__atomic_fetch_add(&st_expect_hcount, hcount, __ATOMIC_RELAXED);
	__atomic_fetch_add(&st_expect_hsum, hsum, __ATOMIC_RELAXED);
	/* A claimer's exit releases its slot for the next life's claimer;
	 * some let the exit do it, some release first. */
	if (st_owner && id % 4 == 0)
		CHECK(pcpu_worker_release() == 0);
	return NULL;
}

/* Moves workers between CPUs and signals them; forks children. */
static void *st_chaos(void *arg)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t seed = 12345;
	int n = 0;

	(void)arg;
	while (!__atomic_load_n(&st_stop, __ATOMIC_RELAXED)) {
		pthread_t t;

		pthread_mutex_lock(&st_tid_lock);
		t = st_tids[check_xorshift(&seed) % ST_MAX_THREADS];
		if (t) {
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET((int)(check_xorshift(&seed) % (uint64_t)ncpu), &set);
			if (pthread_setaffinity_np(t, sizeof(set), &set) == 0)
				st_moves++;
			if (pthread_kill(t, SIGUSR1) == 0)
				st_signals++;
		}
		pthread_mutex_unlock(&st_tid_lock);
		if (++n % 500 == 0) {
			pid_t pid = fork();
			int st;

			CHECK(pid >= 0);
			if (pid == 0)
				st_child();
			CHECK(waitpid(pid, &st, 0) == pid);
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
			__atomic_fetch_add(&st_forks, 1, __ATOMIC_RELAXED);
		}
		usleep(50);
	}
	return NULL;
}

static void *st_resetter(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&st_stop, __ATOMIC_RELAXED)) {
		for (unsigned k = 0; k < ST_NC; k++)
			st_reset_total[k] += pcpu_counter_fetch_and_zero(pcpu_counter_at(st_c, k));
		usleep(200);
	}
	return NULL;
}

static void *st_reader(void *arg)
{
	uint64_t last = 0;

	(void)arg;
	while (!__atomic_load_n(&st_stop, __ATOMIC_RELAXED)) {
		uint64_t v = pcpu_counter_fetch(st_mono);

		CHECK(v >= last);
		last = v;
		__atomic_fetch_add(&st_reader_passes, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void stress(int rounds)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	/* Claimers (even ids): one more than the owned slots. */
	int nw = (int)(2 * pcpu_worker_max() + 1);
	static const int64_t bounds[] = { 16, 64, 256 };
	struct pcpu_histogram_layout lay = { .scheme = PCPU_HISTOGRAM_EXPLICIT,
					     .bounds = bounds, .nbounds = 3 };
	pthread_t chaos, resetter, reader, tw[ST_MAX_THREADS];
	struct sigaction sa;
	uint64_t counts[4], hcount;
	int64_t hsum;

	CHECK(pcpu_worker_max() >= 1 && nw <= ST_MAX_THREADS / 4);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = st_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	st_c = pcpu_counter_alloc_array(ST_NC);
	st_mono = pcpu_counter_alloc();
	st_sig = pcpu_counter_alloc();
	st_h = pcpu_histogram_create(&lay);
	CHECK(st_c && st_mono && st_sig && st_h);
	CHECK(pthread_create(&chaos, NULL, st_chaos, NULL) == 0);
	CHECK(pthread_create(&resetter, NULL, st_resetter, NULL) == 0);
	CHECK(pthread_create(&reader, NULL, st_reader, NULL) == 0);
	CHECK(pthread_barrier_init(&st_claimed, NULL, (unsigned)nw) == 0);
	for (int r = 0; r < rounds * ST_LIVES; r++) {
		for (long i = 0; i < nw; i++)
			CHECK(pthread_create(&tw[i], NULL, st_worker, (void *)i) == 0);
		for (long i = 0; i < nw; i++)
			CHECK(pthread_join(tw[i], NULL) == 0);
	}
	/* A fork and a read happened, however slow the machine. */
	while (!__atomic_load_n(&st_forks, __ATOMIC_RELAXED) ||
	       !__atomic_load_n(&st_reader_passes, __ATOMIC_RELAXED))
		usleep(1000);
	__atomic_store_n(&st_stop, 1, __ATOMIC_RELAXED);
	CHECK(pthread_join(chaos, NULL) == 0);
	CHECK(pthread_join(resetter, NULL) == 0);
	CHECK(pthread_join(reader, NULL) == 0);
	for (unsigned k = 0; k < ST_NC; k++)
		CHECK_EQ_U64(st_reset_total[k] + pcpu_counter_fetch(pcpu_counter_at(st_c, k)),
			     (uint64_t)st_expect[k]);
	CHECK_EQ_U64(pcpu_counter_fetch(st_mono), st_expect_mono);
	CHECK_EQ_U64(pcpu_counter_fetch(st_sig), st_expect_sig);
	CHECK(pcpu_histogram_read(st_h, counts, 4, &hcount, &hsum) == 0);
	CHECK_EQ_U64(hcount, st_expect_hcount);
	CHECK_EQ_U64((uint64_t)hsum, (uint64_t)st_expect_hsum);
	CHECK_EQ_U64(counts[0] + counts[1] + counts[2] + counts[3], st_expect_hcount);
	/* The conditions the run was for, not its speed. */
	CHECK(st_claims_ok == rounds * ST_LIVES * (int)pcpu_worker_max());
	CHECK(st_claims_busy == rounds * ST_LIVES);
	CHECK(st_expect_sig > 0 && st_forks > 0 && st_reader_passes > 0);
	printf("stress: %d threads x %d lives x %d updates, %d claims (%d EBUSY), %d moves, "
	       "%d signals (%llu handler adds), %d forks, %llu reads, %ld CPUs: exact\n",
	       nw, rounds * ST_LIVES, ST_OPS, st_claims_ok, st_claims_busy, st_moves, st_signals,
	       (unsigned long long)st_expect_sig, st_forks, (unsigned long long)st_reader_passes,
	       ncpu);
}

int main(int argc, char **argv)
{
	int i = 1;

	if (argc >= 3 && !strcmp(argv[1], "--expect-mode")) {
		expect_mode = argv[2];
		i = 3;
	}
	if (argc <= i) {
		fprintf(stderr, "usage: %s [--expect-mode M] unit|exclusive|fork|segment|env|stress [ROUNDS]\n",
			argv[0]);
		return 2;
	}
	if (!strcmp(argv[i], "unit"))
		unit();
	else if (!strcmp(argv[i], "exclusive"))
		exclusive();
	else if (!strcmp(argv[i], "fork"))
		forked();
	else if (!strcmp(argv[i], "segment"))
		segment();
	else if (!strcmp(argv[i], "env"))
		env();
	else if (!strcmp(argv[i], "env-child") && argc > i + 1) {
		env_child(argv[i + 1]);
		return 0;
	} else if (!strcmp(argv[i], "stress"))
		stress(argc > i + 1 ? atoi(argv[i + 1]) : 2);
	else
		return 2;
	/* The mode after the run: a thread has added by now. */
	check_mode();
	return 0;
}
