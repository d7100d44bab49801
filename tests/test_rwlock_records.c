/*
 * pcpu_rwlock's read side through thread-local records (issue 29): what the
 * record design must keep of the lock's guarantees (pcpu/rwlock.h).
 *  - unregistered: a thread whose first pcpu call is a read lock (registered
 *    lazily) keeps writers out: trywrlock fails, a wrlock waits for it.
 *  - exit: a thread that exits holding a read lock leaves it held (as
 *    before records); any thread may release it, and the lock works again.
 *  - nesting and a second lock: a thread holding two locks, one of them
 *    twice, keeps the writers of both out until each hold is released, in
 *    any order; a lock released by another thread than its taker.
 *  - signal: a writer that arrives while a reader's signal handler holds the
 *    read lock (nested in the interrupted code's hold, and a second lock)
 *    waits for both; a handler's tryrdlock fails while a writer waits.
 *  - signal stress: readers take the lock in their code and in handlers of
 *    signals sent at random points (so handlers interrupt every step of the
 *    fast and slow paths), writers check that no reader is inside, until
 *    --pairs writes and handler reads happened.
 *  - churn: --threads threads (10^5 by default) start, read-lock (the
 *    first registers), and exit, a few at a time, while a writer checks
 *    exclusion; the registry must survive every exit (a record left in the
 *    list after its thread's TLS is reused corrupts it).
 *  - fork: a child forked while threads hold and churn read locks has only
 *    its own threads in the registry (new threads there reuse the dead
 *    ones' TLS), keeps the dead threads' holds, and its writers work.
 * --expect-percpu 0|1 as in test_ref.c. No timing: every loop runs until it
 * has its events.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Sanitizer builds create no thread in a fork child: ThreadSanitizer
 * refuses it, and AddressSanitizer's allocator (GCC 12) may have been
 * locked by another parent thread at the fork (the child then hangs in
 * malloc). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SANITIZER_BUILD 1
#endif
#endif
#ifndef SANITIZER_BUILD
#define SANITIZER_BUILD 0
#endif

static pcpu_rwlock_t *lock, *lock2;
static int step;

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static void set_step(int v)
{
	__atomic_store_n(&step, v, __ATOMIC_SEQ_CST);
}

static int get_step(void)
{
	return __atomic_load_n(&step, __ATOMIC_SEQ_CST);
}

static void wait_step(int want)
{
	while (get_step() != want)
		sleep_us(200);
}

/* ---- unregistered ---------------------------------------------------------- */

static void *fresh_reader(void *arg)
{
	(void)arg;
	pcpu_rwlock_rdlock(lock); /* this thread's first pcpu call */
	set_step(1);
	wait_step(2);
	pcpu_rwlock_rdunlock(lock);
	return NULL;
}

static void *writer_waits(void *arg)
{
	(void)arg;
	set_step(3);
	CHECK(pcpu_rwlock_wrlock(lock) == 0);
	set_step(4);
	CHECK(pcpu_rwlock_wrunlock(lock) == 0);
	return NULL;
}

static void test_unregistered(void)
{
	pthread_t r, w;

	set_step(0);
	CHECK(pthread_create(&r, NULL, fresh_reader, NULL) == 0);
	wait_step(1);
	errno = 0;
	CHECK(!pcpu_rwlock_trywrlock(lock) && errno == EBUSY);
	set_step(2);
	CHECK(pthread_join(r, NULL) == 0);
	CHECK(pcpu_rwlock_trywrlock(lock));
	CHECK(pcpu_rwlock_wrunlock(lock) == 0);

	/* A wrlock waits for a reader that registered lazily. */
	set_step(0);
	CHECK(pthread_create(&r, NULL, fresh_reader, NULL) == 0);
	wait_step(1);
	CHECK(pthread_create(&w, NULL, writer_waits, NULL) == 0);
	wait_step(3);
	sleep_us(20000);
	CHECK(get_step() == 3); /* still waiting for the reader */
	set_step(2);
	CHECK(pthread_join(r, NULL) == 0);
	CHECK(pthread_join(w, NULL) == 0);
	CHECK(get_step() == 4);
	printf("unregistered: ok\n");
}

/* ---- exit, nesting, a second lock ---------------------------------------------- */

static void *exit_holding(void *arg)
{
	(void)arg;
	pcpu_rwlock_rdlock(lock);
	CHECK(pcpu_rwlock_tryrdlock(lock)); /* twice: nested in the record */
	return NULL;                         /* exits holding both */
}

static void *take_for_other(void *arg)
{
	(void)arg;
	pcpu_rwlock_rdlock(lock2);
	return NULL; /* released by the main thread */
}

static void test_exit_nesting(void)
{
	pthread_t t;

	CHECK(pthread_create(&t, NULL, exit_holding, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	/* Its thread is gone; both holds stay. */
	errno = 0;
	CHECK(!pcpu_rwlock_trywrlock(lock) && errno == EBUSY);
	pcpu_rwlock_rdunlock(lock); /* any thread may release */
	CHECK(!pcpu_rwlock_trywrlock(lock));
	pcpu_rwlock_rdunlock(lock);
	CHECK(pcpu_rwlock_trywrlock(lock));
	CHECK(pcpu_rwlock_wrunlock(lock) == 0);

	/* Two locks, the first twice, released in every order. */
	for (int order = 0; order < 3; order++) {
		pcpu_rwlock_rdlock(lock);
		pcpu_rwlock_rdlock(lock2); /* the record holds `lock` */
		CHECK(pcpu_rwlock_tryrdlock(lock));
		CHECK(!pcpu_rwlock_trywrlock(lock) && !pcpu_rwlock_trywrlock(lock2));
		if (order == 0) {
			pcpu_rwlock_rdunlock(lock);
			pcpu_rwlock_rdunlock(lock2);
			CHECK(!pcpu_rwlock_trywrlock(lock));
			CHECK(pcpu_rwlock_trywrlock(lock2));
			CHECK(pcpu_rwlock_wrunlock(lock2) == 0);
			pcpu_rwlock_rdunlock(lock);
		} else if (order == 1) {
			pcpu_rwlock_rdunlock(lock2);
			pcpu_rwlock_rdunlock(lock);
			CHECK(!pcpu_rwlock_trywrlock(lock));
			pcpu_rwlock_rdunlock(lock);
		} else {
			pcpu_rwlock_rdunlock(lock);
			pcpu_rwlock_rdunlock(lock);
			CHECK(pcpu_rwlock_trywrlock(lock));
			CHECK(pcpu_rwlock_wrunlock(lock) == 0);
			/* The record is free: lock2, held in the words, now
			 * taken again through the record, released twice. */
			pcpu_rwlock_rdlock(lock2);
			pcpu_rwlock_rdunlock(lock2);
			CHECK(!pcpu_rwlock_trywrlock(lock2));
			pcpu_rwlock_rdunlock(lock2);
		}
		CHECK(pcpu_rwlock_trywrlock(lock) && pcpu_rwlock_wrunlock(lock) == 0);
		CHECK(pcpu_rwlock_trywrlock(lock2) && pcpu_rwlock_wrunlock(lock2) == 0);
	}

	/* Taken by one thread, released by another. */
	CHECK(pthread_create(&t, NULL, take_for_other, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(!pcpu_rwlock_trywrlock(lock2));
	pcpu_rwlock_rdunlock(lock2);
	CHECK(pcpu_rwlock_wrlock(lock2) == 0);
	CHECK(pcpu_rwlock_wrunlock(lock2) == 0);
	printf("exit and nesting: ok\n");
}

/* ---- a writer during a reader's signal handler ---------------------------------- */

static int handler_got, handler_got2, handler_release, handler_armed;

static void on_usr1(int sig)
{
	(void)sig;
	/* One run of the body per signal_until_handled(): the signals it
	 * sends after the first may arrive once the body has run. */
	if (!__atomic_exchange_n(&handler_armed, 0, __ATOMIC_SEQ_CST))
		return;
	handler_got = pcpu_rwlock_tryrdlock(lock);
	handler_got2 = pcpu_rwlock_tryrdlock(lock2);
	set_step(11);
	while (!__atomic_load_n(&handler_release, __ATOMIC_SEQ_CST))
		sleep_us(200);
	if (handler_got2)
		pcpu_rwlock_rdunlock(lock2);
	if (handler_got)
		pcpu_rwlock_rdunlock(lock);
}

static void *signalled_reader(void *arg)
{
	(void)arg;
	pcpu_rwlock_rdlock(lock);
	set_step(10);
	while (get_step() < 13) /* the handler runs meanwhile */
		sleep_us(200);
	pcpu_rwlock_rdunlock(lock);
	return NULL;
}

static int w1_in, w2_in;

/* Runs on_usr1's body once in thread r, and returns when it set step 11.
 * A signal sent once should do, but GCC 12's ThreadSanitizer runtime loses
 * one that arrives while the thread allocates its signal state, which it
 * does lazily in the thread's first intercepted blocking call (here r's
 * first nanosleep): the interrupted allocation stores its pointer over the
 * one the signal's handler allocated and queued the signal in (no
 * compare-and-swap), so the signal is never run, and waiting for step 11
 * hung until ctest's timeout. So the signal is sent again while the
 * handler has not run; the body still runs once, so what is checked is
 * unchanged. r is joined before SIGUSR1's handler is reset: a signal
 * still pending for it then goes with it. */
static long resent;

static void signal_until_handled(pthread_t r)
{
	__atomic_store_n(&handler_armed, 1, __ATOMIC_SEQ_CST);
	for (int sent = 0; get_step() != 11; sent++) {
		resent += sent > 0;
		CHECK(pthread_kill(r, SIGUSR1) == 0);
		for (int i = 0; i < 250 && get_step() != 11; i++)
			sleep_us(200);
	}
}

static void *writer_of(void *arg)
{
	pcpu_rwlock_t *l = arg;

	CHECK(pcpu_rwlock_wrlock(l) == 0);
	__atomic_store_n(l == lock ? &w1_in : &w2_in, 1, __ATOMIC_SEQ_CST);
	CHECK(pcpu_rwlock_wrunlock(l) == 0);
	return NULL;
}

static void test_signal_writer(void)
{
	struct sigaction sa;
	pthread_t r, w1, w2;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	set_step(0);
	handler_release = 0;
	CHECK(pthread_create(&r, NULL, signalled_reader, NULL) == 0);
	wait_step(10);
	signal_until_handled(r);
	CHECK(handler_got && handler_got2);
	/* The writers come while the handler holds both. */
	CHECK(pthread_create(&w1, NULL, writer_of, lock) == 0);
	CHECK(pthread_create(&w2, NULL, writer_of, lock2) == 0);
	sleep_us(20000);
	CHECK(!__atomic_load_n(&w1_in, __ATOMIC_SEQ_CST) && !__atomic_load_n(&w2_in, __ATOMIC_SEQ_CST));
	__atomic_store_n(&handler_release, 1, __ATOMIC_SEQ_CST);
	CHECK(pthread_join(w2, NULL) == 0); /* lock2: only the handler held it */
	CHECK(__atomic_load_n(&w2_in, __ATOMIC_SEQ_CST));
	set_step(12);
	sleep_us(20000);
	CHECK(!__atomic_load_n(&w1_in, __ATOMIC_SEQ_CST)); /* the interrupted hold */
	set_step(13);
	CHECK(pthread_join(r, NULL) == 0);
	CHECK(pthread_join(w1, NULL) == 0);
	CHECK(__atomic_load_n(&w1_in, __ATOMIC_SEQ_CST));

	/* A handler's tryrdlock fails while a writer waits for the
	 * interrupted code's hold. */
	w1_in = 0;
	handler_release = 1;
	set_step(0);
	CHECK(pthread_create(&r, NULL, signalled_reader, NULL) == 0);
	wait_step(10);
	CHECK(pthread_create(&w1, NULL, writer_of, lock) == 0);
	/* The writer waits for the reader once a tryrdlock here fails. */
	while (pcpu_rwlock_tryrdlock(lock)) {
		pcpu_rwlock_rdunlock(lock);
		sleep_us(200);
	}
	CHECK(!__atomic_load_n(&w1_in, __ATOMIC_SEQ_CST));
	signal_until_handled(r);
	CHECK(!handler_got);
	set_step(12);
	set_step(13);
	CHECK(pthread_join(r, NULL) == 0);
	CHECK(pthread_join(w1, NULL) == 0);
	CHECK(__atomic_load_n(&w1_in, __ATOMIC_SEQ_CST));
	signal(SIGUSR1, SIG_DFL);
	printf("writer during a signal handler: ok (%ld signals sent again)\n", resent);
}

/* ---- signal stress -------------------------------------------------------------- */

#define SREADERS 3
static int inside[2];  /* readers inside lock, lock2 (atomics) */
static int wr_inside[2];
static long handler_reads, writes, stop_all;

static void read_section(int which, pcpu_rwlock_t *l)
{
	__atomic_fetch_add(&inside[which], 1, __ATOMIC_SEQ_CST);
	CHECK(!__atomic_load_n(&wr_inside[which], __ATOMIC_SEQ_CST));
	__atomic_fetch_sub(&inside[which], 1, __ATOMIC_SEQ_CST);
	(void)l;
}

static void on_usr2(int sig)
{
	int saved = errno;

	(void)sig;
	/* Nested in whatever the interrupted code holds or is doing. */
	if (pcpu_rwlock_tryrdlock(lock)) {
		if (pcpu_rwlock_tryrdlock(lock2)) {
			read_section(1, lock2);
			pcpu_rwlock_rdunlock(lock2);
		}
		read_section(0, lock);
		pcpu_rwlock_rdunlock(lock);
		__atomic_fetch_add(&handler_reads, 1, __ATOMIC_RELAXED);
	}
	errno = saved;
}

static void *stress_reader(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;

	while (!__atomic_load_n(&stop_all, __ATOMIC_RELAXED)) {
		i++;
		pcpu_rwlock_rdlock(lock);
		if (i % 3 == 0) {
			pcpu_rwlock_rdlock(lock2); /* a second lock: the words */
			read_section(1, lock2);
			pcpu_rwlock_rdunlock(lock2);
		}
		read_section(0, lock);
		pcpu_rwlock_rdunlock(lock);
		if (i % 5 == 0) {
			pcpu_rwlock_rdlock(lock2); /* lock2 through the record */
			read_section(1, lock2);
			pcpu_rwlock_rdunlock(lock2);
		}
	}
	return NULL;
}

static void *stress_writer(void *arg)
{
	int which = (int)(uintptr_t)arg;
	pcpu_rwlock_t *l = which ? lock2 : lock;

	while (!__atomic_load_n(&stop_all, __ATOMIC_RELAXED)) {
		CHECK(pcpu_rwlock_wrlock(l) == 0);
		__atomic_store_n(&wr_inside[which], 1, __ATOMIC_SEQ_CST);
		CHECK(__atomic_load_n(&inside[which], __ATOMIC_SEQ_CST) == 0);
		sleep_us(50);
		CHECK(__atomic_load_n(&inside[which], __ATOMIC_SEQ_CST) == 0);
		__atomic_store_n(&wr_inside[which], 0, __ATOMIC_SEQ_CST);
		CHECK(pcpu_rwlock_wrunlock(l) == 0);
		__atomic_fetch_add(&writes, 1, __ATOMIC_RELAXED);
		sleep_us(100);
	}
	return NULL;
}

static void test_signal_stress(long want)
{
	struct sigaction sa;
	pthread_t r[SREADERS], w[2];
	uint64_t seed = 88172645463325252ull;
	long sent = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr2;
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
	for (int i = 0; i < SREADERS; i++)
		CHECK(pthread_create(&r[i], NULL, stress_reader, (void *)(uintptr_t)i) == 0);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&w[i], NULL, stress_writer, (void *)(uintptr_t)i) == 0);
	while (__atomic_load_n(&handler_reads, __ATOMIC_RELAXED) < want ||
	       __atomic_load_n(&writes, __ATOMIC_RELAXED) < want / 10) {
		CHECK(pthread_kill(r[check_xorshift(&seed) % SREADERS], SIGUSR2) == 0);
		sent++;
		if (check_xorshift(&seed) % 4 == 0)
			sleep_us((long)(check_xorshift(&seed) % 100));
	}
	__atomic_store_n(&stop_all, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < SREADERS; i++)
		CHECK(pthread_join(r[i], NULL) == 0);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_join(w[i], NULL) == 0);
	signal(SIGUSR2, SIG_IGN);
	/* Nothing left held. */
	CHECK(pcpu_rwlock_trywrlock(lock) && pcpu_rwlock_wrunlock(lock) == 0);
	CHECK(pcpu_rwlock_trywrlock(lock2) && pcpu_rwlock_wrunlock(lock2) == 0);
	printf("signal stress: %ld signals, %ld handler reads, %ld writes: ok\n", sent,
	       handler_reads, writes);
}

/* ---- churn ------------------------------------------------------------------ */

static long churn_reads;

/* arg: which lock (0: lock, 1: lock2). */
static void *churn_thread(void *arg)
{
	int which = (int)(uintptr_t)arg;
	pcpu_rwlock_t *l = which ? lock2 : lock;

	pcpu_rwlock_rdlock(l); /* registers */
	read_section(which, l);
	pcpu_rwlock_rdunlock(l);
	if (pcpu_rwlock_tryrdlock(l)) {
		read_section(which, l);
		pcpu_rwlock_rdunlock(l);
	}
	__atomic_fetch_add(&churn_reads, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void test_churn(long nthreads)
{
	pthread_t w, t[8];
	long done = 0;

	stop_all = 0;
	CHECK(pthread_create(&w, NULL, stress_writer, (void *)(uintptr_t)0) == 0);
	while (done < nthreads) {
		int k = 0;

		for (; k < 8 && done + k < nthreads; k++)
			CHECK(pthread_create(&t[k], NULL, churn_thread, NULL) == 0);
		for (int j = 0; j < k; j++)
			CHECK(pthread_join(t[j], NULL) == 0);
		done += k;
	}
	__atomic_store_n(&stop_all, 1, __ATOMIC_SEQ_CST);
	CHECK(pthread_join(w, NULL) == 0);
	CHECK(churn_reads == nthreads);
	CHECK(pcpu_rwlock_trywrlock(lock) && pcpu_rwlock_wrunlock(lock) == 0);
	printf("churn: %ld threads, %ld writes: ok\n", nthreads, writes);
}

/* ---- fork ----------------------------------------------------------------------- */

static void *hold_lock2(void *arg)
{
	(void)arg;
	pcpu_rwlock_rdlock(lock2);
	set_step(20);
	wait_step(21);
	pcpu_rwlock_rdunlock(lock2);
	return NULL;
}

static void test_fork(void)
{
	pthread_t h, w, t[8];
	int status;
	pid_t pid;

	set_step(0);
	CHECK(pthread_create(&h, NULL, hold_lock2, NULL) == 0);
	wait_step(20);
	stop_all = 0;
	CHECK(pthread_create(&w, NULL, stress_writer, (void *)(uintptr_t)0) == 0);
	for (int round = 0; round < 20; round++) {
		for (int k = 0; k < 8; k++)
			CHECK(pthread_create(&t[k], NULL, churn_thread, NULL) == 0);
		pid = fork(); /* while they register, lock, exit */
		CHECK(pid >= 0);
		if (pid == 0) {
			/* The parent's threads are gone: lock2 stays held
			 * (hold_lock2's record). `lock` may have been write-
			 * locked by the dead writer: not used here. */
			CHECK(!pcpu_rwlock_trywrlock(lock2));
			pcpu_rwlock_rdlock(lock2);
			pcpu_rwlock_rdunlock(lock2);
			/* New threads reuse the dead threads' TLS: the
			 * registry must not hold their records any more.
			 * (Not in sanitizer builds: SANITIZER_BUILD above.) */
			for (int n = 0; n < (SANITIZER_BUILD ? 0 : 64); n++) {
				pthread_t c[4];

				for (int k = 0; k < 4; k++)
					CHECK(pthread_create(&c[k], NULL, churn_thread,
							     (void *)(uintptr_t)1) == 0);
				for (int k = 0; k < 4; k++)
					CHECK(pthread_join(c[k], NULL) == 0);
			}
			CHECK(!pcpu_rwlock_trywrlock(lock2));
			pcpu_rwlock_rdunlock(lock2); /* the dead thread's hold */
			CHECK(pcpu_rwlock_wrlock(lock2) == 0);
			CHECK(pcpu_rwlock_wrunlock(lock2) == 0);
			_exit(0);
		}
		for (int k = 0; k < 8; k++)
			CHECK(pthread_join(t[k], NULL) == 0);
		CHECK(waitpid(pid, &status, 0) == pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	__atomic_store_n(&stop_all, 1, __ATOMIC_SEQ_CST);
	CHECK(pthread_join(w, NULL) == 0);
	set_step(21);
	CHECK(pthread_join(h, NULL) == 0);
	CHECK(pcpu_rwlock_trywrlock(lock2) && pcpu_rwlock_wrunlock(lock2) == 0);
	printf("fork: ok\n");
}

int main(int argc, char **argv)
{
	int expect_percpu = -1;
	long nthreads = 100000, pairs = 20000;
	const char *only = NULL;

	setvbuf(stdout, NULL, _IOLBF, 0); /* a hang shows the case it is in */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-percpu") && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nthreads = atol(argv[++i]);
		else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
			pairs = atol(argv[++i]);
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--expect-percpu 0|1] [--threads N] [--pairs N] "
					"[--only unregistered|exit|signal|stress|churn|fork]\n", argv[0]);
			return 2;
		}
	}
	if (getenv("PCPU_RWREC_THREADS")) /* sanitizer builds: fewer */
		nthreads = atol(getenv("PCPU_RWREC_THREADS"));
	lock = pcpu_rwlock_create();
	lock2 = pcpu_rwlock_create();
	CHECK(lock && lock2);
	printf("rseq mode %s; locks %s\n", pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       pcpu_rwlock_is_percpu(lock) ? "per-CPU" : "atomic");
	if (expect_percpu >= 0)
		CHECK(pcpu_rwlock_is_percpu(lock) == expect_percpu);
	if (!only || !strcmp(only, "unregistered"))
		test_unregistered();
	if (!only || !strcmp(only, "exit"))
		test_exit_nesting();
	if (!only || !strcmp(only, "signal"))
		test_signal_writer();
	if (!only || !strcmp(only, "stress"))
		test_signal_stress(pairs);
	if (!only || !strcmp(only, "churn"))
		test_churn(nthreads);
	if (!only || !strcmp(only, "fork"))
		test_fork();
	CHECK(pcpu_rwlock_destroy(lock) == 0);
	CHECK(pcpu_rwlock_destroy(lock2) == 0);
	printf("test_rwlock_records: ok\n");
	return 0;
}
