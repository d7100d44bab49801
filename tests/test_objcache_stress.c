/*
 * Per-CPU object caches under stress: no object is ever handed out twice,
 * put while cached, or lost, and every count is exact.
 *
 * Threads (--threads-per-cpu per online CPU: oversubscribed) get and put
 * objects of one cache for --seconds, holding up to 8 each, and pass a
 * quarter of what they get to other threads through mailboxes (so puts
 * stray to other slots). Every object carries an owner tag:
 *  - get:  exchange(tag, HELD) must return FREE (else handed out twice);
 *          its stamp must be 0 (its last holder cleared it), and is set
 *          to a value derived from its address;
 *  - put:  the stamp must still hold that value (nobody wrote the object
 *          while held), and is cleared;
 *  - put:  exchange(tag, FREE) must return HELD (else put twice);
 *  - the destructor: the tag must be FREE (never destructs a held object),
 *    and the constructor/destructor counts are exact.
 * Meanwhile: a drainer thread collects every slot's cache and frees it
 * (pcpu_objcache_drain: membarrier, racing every get and put); threads
 * move themselves between CPUs (sched_setaffinity); a sender signals them
 * (the sections restart). At the end: the gets and puts the threads counted
 * equal the cache's counters; OBJECTS = constructed - destructed; drain
 * then frees everything (constructed = destructed), and destroy succeeds.
 * With --limit L: objects in existence never exceed L (checked in the
 * constructor, where it would first show), and gets fail only with EAGAIN.
 * With --mixed 1 (pcpu's own rseq registration): the second half of the
 * threads is created under a seccomp filter that refuses rseq, so one
 * per-CPU cache serves threads that run its sections and threads that use
 * its locked caches at once (and the drains collect both).
 *
 * Built twice: plain, and with PCPU_TEST_INJECT (test_objcache_inject:
 * the inline sections spin between arming and commit, and sometimes yield
 * or raise a signal before a section, and each worker has a timer of its
 * own that signals it every 20 us, which interrupts it wherever it runs
 * however seldom a loaded machine runs it, so the abort paths run a lot;
 * at least --min-aborts sections must have aborted in the rseq modes).
 *
 * A run lasts --seconds, and then goes on until it has seen what the checks
 * at the end need (a drain, a stray put, --min-ops gets and puts,
 * --min-aborts aborted sections):
 * how much CPU the test gets changes how long it runs, not whether it
 * passes. --max-seconds (20 minutes) only bounds a run that cannot get
 * there.
 *
 * Usage: test_objcache_stress --expect-percpu 0|1 [--seconds S]
 *        [--threads-per-cpu N] [--limit L] [--capacity C] [--min-aborts N]
 *        [--max-seconds S] [--min-ops N] [--mixed 1]
 * PCPU_TEST_SCALE multiplies --seconds.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int percpu_cache; /* membarrier registered */
static unsigned long running_aborts; /* the injection build publishes its aborts here */

#ifdef PCPU_TEST_INJECT
#include <linux/membarrier.h>
#ifndef sigev_notify_thread_id /* not named by older glibc (2.36) */
#define sigev_notify_thread_id _sigev_un._tid
#endif
unsigned pcpu__test_inject_spin = 300;
__thread unsigned long pcpu__test_inject_aborts;
static __thread unsigned long inject_calls;
static unsigned long total_aborts;
/* Before some sections: yield, raise a signal, or restart the sections of
 * every other running thread (membarrier, registered by the cache). */
void pcpu__test_inject_before(void)
{
	unsigned long n = ++inject_calls;

	if (n % 4099 == 0)
		sched_yield();
	else if (n % 1999 == 0)
		raise(SIGUSR1);
	else if (n % 16 == 0 && percpu_cache)
		(void)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
}
#endif

#define FREE 0x46524545u
#define HELD 0x48454c44u
#define HOLD 8
#define MAX_THREADS 256
#define MAILBOXES 64
#define STAMP(o) ((uint64_t)(uintptr_t)(o) ^ 0x5a5a5a5a5a5a5a5aull)

struct obj {
	uint32_t tag;
	uint32_t pad;
	uint64_t stamp; /* 0 while cached, STAMP(o) while held */
	char data[48];
};

static pcpu_objcache_t *cache;
static long ctors, dtors, alive, live_max;
static size_t limit;
static int stop, stop_helpers, nthreads, ncpus;
static void *mailbox[MAILBOXES];
static uint64_t total_gets, total_puts, total_eagain, drains, drained;
static unsigned long signals_sent;
static int tids[MAX_THREADS], fallback_threads;

static int ctor(void *p, void *arg)
{
	struct obj *o = p;
	long a;

	(void)arg;
	o->tag = FREE;
	o->stamp = 0;
	__atomic_fetch_add(&ctors, 1, __ATOMIC_RELAXED);
	/* The cache counts an object in existence before constructing it and
	 * until after destructing it, so `alive` never exceeds its count. */
	a = __atomic_add_fetch(&alive, 1, __ATOMIC_SEQ_CST);
	if (limit && a > (long)limit) {
		fprintf(stderr, "%ld objects alive, limit %zu\n", a, limit);
		exit(1);
	}
	if (a > __atomic_load_n(&live_max, __ATOMIC_RELAXED))
		__atomic_store_n(&live_max, a, __ATOMIC_RELAXED);
	return 0;
}

static void dtor(void *p, void *arg)
{
	struct obj *o = p;

	(void)arg;
	CHECK(o->tag == FREE); /* never a held object */
	o->tag = 0;
	__atomic_fetch_sub(&alive, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&dtors, 1, __ATOMIC_SEQ_CST);
}

static void on_signal(int sig)
{
	(void)sig;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void take(struct obj *o, uint64_t *gets)
{
	uint32_t was = __atomic_exchange_n(&o->tag, HELD, __ATOMIC_ACQ_REL);

	if (was != FREE) {
		fprintf(stderr, "object %p handed out while %s\n", (void *)o,
			was == HELD ? "held" : "not an object");
		exit(1);
	}
	CHECK(o->stamp == 0);
	o->stamp = STAMP(o);
	(*gets)++;
}

static void give(struct obj *o, uint64_t me, uint64_t *puts)
{
	(void)me;
	CHECK(o->stamp == STAMP(o));
	o->stamp = 0;
	if (__atomic_exchange_n(&o->tag, FREE, __ATOMIC_ACQ_REL) != HELD) {
		fprintf(stderr, "object %p put while not held\n", (void *)o);
		exit(1);
	}
	pcpu_objcache_put(cache, o);
	(*puts)++;
}

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1), gets = 0, puts = 0, eagain = 0;
	struct obj *held[HOLD];
	int n = 0;
	unsigned long i = 0;

	__atomic_store_n(&tids[me], (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	if (pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK)
		__atomic_fetch_add(&fallback_threads, 1, __ATOMIC_RELAXED);
#ifdef PCPU_TEST_INJECT
	timer_t timer;
	{
		struct itimerspec every = { { 0, 20000 }, { 0, 20000 } };
		struct sigevent sev;

		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGUSR1;
		sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
		CHECK(timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0);
		CHECK(timer_settime(timer, 0, &every, NULL) == 0);
	}
#endif
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t r = rnd(&rng);

#ifdef PCPU_TEST_INJECT
		if ((i & 1023) == 0) {
			static __thread unsigned long published;

			__atomic_fetch_add(&running_aborts, pcpu__test_inject_aborts - published,
					   __ATOMIC_RELAXED);
			published = pcpu__test_inject_aborts;
		}
#endif
		if ((++i & 4095) == 0 && ncpus > 1) {
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET((int)(r >> 40) % ncpus, &set);
			(void)sched_setaffinity(0, sizeof(set), &set);
		}
		if (n < HOLD && (n == 0 || (r & 1))) {
			struct obj *o = pcpu_objcache_get(cache);

			if (!o) {
				CHECK(limit && errno == EAGAIN);
				eagain++;
				if (n)
					give(held[--n], (uint64_t)me, &puts);
				continue;
			}
			take(o, &gets);
			held[n++] = o;
			continue;
		}
		if ((r & 6) == 0) {
			/* Hand it to another thread via a mailbox; take what
			 * was there (a held object changes owner). */
			struct obj *o = held[--n];
			void *prev = __atomic_exchange_n(&mailbox[(r >> 8) % MAILBOXES], o,
							 __ATOMIC_ACQ_REL);
			if (prev)
				held[n++] = prev;
			continue;
		}
		give(held[--n], (uint64_t)me, &puts);
	}
	while (n)
		give(held[--n], (uint64_t)me, &puts);
#ifdef PCPU_TEST_INJECT
	CHECK(timer_delete(timer) == 0);
#endif
	__atomic_fetch_add(&total_gets, gets, __ATOMIC_RELAXED);
	__atomic_fetch_add(&total_puts, puts, __ATOMIC_RELAXED);
	__atomic_fetch_add(&total_eagain, eagain, __ATOMIC_RELAXED);
#ifdef PCPU_TEST_INJECT
	__atomic_fetch_add(&total_aborts, pcpu__test_inject_aborts, __ATOMIC_RELAXED);
#endif
	return NULL;
}

static void *drainer(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop_helpers, __ATOMIC_RELAXED)) {
		drained += pcpu_objcache_drain(cache);
		__atomic_store_n(&drains, drains + 1, __ATOMIC_RELAXED);
		if (limit)
			CHECK(pcpu_counter_fetch(pcpu_objcache_counter(cache, PCPU_OBJCACHE_OBJECTS)) <=
			      limit);
		usleep(2000);
	}
	return NULL;
}

static void *sender(void *arg)
{
	pid_t pid = getpid();

	(void)arg;
	while (!__atomic_load_n(&stop_helpers, __ATOMIC_RELAXED)) {
		for (int i = 0; i < nthreads; i++) {
			int tid = __atomic_load_n(&tids[i], __ATOMIC_ACQUIRE);

			if (tid && syscall(SYS_tgkill, pid, tid, SIGUSR1) == 0)
				signals_sent++;
		}
		usleep(200);
	}
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether the run has seen what the checks at the end need: a drain, a put
 * that strayed to another slot (with more than one thread), min_ops gets
 * and puts, and in the injection build min_aborts aborted sections. */
static int enough(unsigned long min_aborts, uint64_t min_ops)
{
	uint64_t ops = pcpu_counter_fetch(pcpu_objcache_counter(cache, PCPU_OBJCACHE_GETS)) +
		       pcpu_counter_fetch(pcpu_objcache_counter(cache, PCPU_OBJCACHE_PUTS));

	return __atomic_load_n(&drains, __ATOMIC_RELAXED) > 0 &&
	       (nthreads == 1 ||
		pcpu_counter_fetch(pcpu_objcache_counter(cache, PCPU_OBJCACHE_STRAYS)) > 0) &&
	       ops >= min_ops && __atomic_load_n(&running_aborts, __ATOMIC_RELAXED) >= min_aborts;
}

/* From now on, rseq() fails with EPERM in this thread and the threads it
 * creates (a seccomp filter; threads created before keep working). */
static void deny_rseq_from_now_on(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rseq, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};

	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
}

int main(int argc, char **argv)
{
	struct pcpu_objcache_desc d;
	struct pcpu_objcache_stats st;
	double seconds = 2, max_seconds = 1200, t0, scale = 1;
	int per_cpu = 4, expect_percpu = -1, mixed = 0;
	unsigned capacity = 16;
	unsigned long min_aborts = 0;
	uint64_t min_ops = 0;
	pthread_t th[MAX_THREADS], drain_th, send_th;
	struct sigaction sa;
	const char *env = getenv("PCPU_TEST_SCALE");

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--expect-percpu") == 0)
			expect_percpu = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--seconds") == 0)
			seconds = atof(argv[i + 1]);
		else if (strcmp(argv[i], "--threads-per-cpu") == 0)
			per_cpu = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--limit") == 0)
			limit = (size_t)atol(argv[i + 1]);
		else if (strcmp(argv[i], "--capacity") == 0)
			capacity = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--min-aborts") == 0)
			min_aborts = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--mixed") == 0)
			mixed = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--max-seconds") == 0)
			max_seconds = atof(argv[i + 1]);
		else if (strcmp(argv[i], "--min-ops") == 0)
			min_ops = strtoull(argv[i + 1], NULL, 10);
		else
			CHECK(!"unknown option");
	}
	CHECK(expect_percpu == 0 || expect_percpu == 1);
	if (env && atof(env) > 0)
		scale = atof(env);
	seconds *= scale;
	ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	nthreads = ncpus * per_cpu;
	CHECK(nthreads >= 1 && nthreads <= MAX_THREADS);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);

	memset(&d, 0, sizeof(d));
	d.size = sizeof(struct obj);
	d.capacity = capacity;
	d.limit = limit;
	d.ctor = ctor;
	d.dtor = dtor;
	cache = pcpu_objcache_create(&d);
	CHECK(cache != NULL);
	CHECK(pcpu_objcache_is_percpu(cache) == expect_percpu);
	percpu_cache = expect_percpu;

	t0 = now();
	for (int i = 0; i < nthreads; i++) {
		if (mixed && i == nthreads / 2)
			deny_rseq_from_now_on();
		CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
	}
	CHECK(pthread_create(&drain_th, NULL, drainer, NULL) == 0);
	CHECK(pthread_create(&send_th, NULL, sender, NULL) == 0);
	/* --seconds, then until the run has what the checks below need (a
	 * loaded machine gets there later), up to --max-seconds. */
	while (now() - t0 < seconds || (!enough(min_aborts, min_ops) && now() - t0 < max_seconds))
		usleep(10000);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
	__atomic_store_n(&stop_helpers, 1, __ATOMIC_RELAXED);
	CHECK(pthread_join(drain_th, NULL) == 0);
	CHECK(pthread_join(send_th, NULL) == 0);
	/* Objects left in mailboxes are held: put them. */
	for (int i = 0; i < MAILBOXES; i++)
		if (mailbox[i]) {
			uint64_t dummy = 0;

			give(mailbox[i], 0, &dummy);
			total_puts++;
		}

	CHECK(pcpu_objcache_stats(cache, &st) == 0);
	printf("%d threads on %d CPUs, %.1f s, %s: %" PRIu64 " gets + %" PRIu64
	       " puts (%.1f M ops/s), %" PRIu64 " local hits, %" PRIu64 " depot transfers, %" PRIu64
	       " strays, %" PRIu64 " drains (%" PRIu64 " freed), %lu signals, %" PRIu64
	       " EAGAIN, %ld constructed, at most %ld alive\n",
	       nthreads, ncpus, now() - t0, pcpu_rseq_mode_name(pcpu_rseq_mode()), total_gets,
	       total_puts, (double)(total_gets + total_puts) / (now() - t0) / 1e6, st.local_hits,
	       st.depot_xfers, st.strays, drains, drained, signals_sent, total_eagain, ctors,
	       live_max);
	CHECK_EQ_U64(st.gets, total_gets);
	CHECK_EQ_U64(st.puts, total_puts);
	CHECK_EQ_U64(total_gets, total_puts);
	CHECK(st.strays > 0 || nthreads == 1);
	CHECK_EQ_U64((uint64_t)st.objects, (uint64_t)(ctors - dtors));
	CHECK_EQ_U64(st.cached, (uint64_t)st.objects); /* none held, none lost */
	if (limit)
		CHECK((uint64_t)st.objects <= limit && live_max <= (long)limit);
	CHECK(drains > 0);
	if (mixed) {
		/* Half the threads ran the sections, half the locked caches,
		 * on one per-CPU cache. */
		printf("%d of %d threads without rseq\n", fallback_threads, nthreads);
		CHECK(fallback_threads == nthreads - nthreads / 2);
	}
	CHECK(total_gets + total_puts >= min_ops);
#ifdef PCPU_TEST_INJECT
	printf("aborted sections: %lu\n", total_aborts);
	CHECK(total_aborts >= min_aborts);
#else
	(void)min_aborts;
#endif
	CHECK_EQ_U64(pcpu_objcache_drain(cache), (uint64_t)st.objects);
	CHECK_EQ_U64(ctors, dtors);
	CHECK(pcpu_objcache_destroy(cache) == 0);
	printf("ok\n");
	return 0;
}
