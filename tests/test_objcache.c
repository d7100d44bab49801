/*
 * Per-CPU object caches (pcpu/objcache.h): what the header promises, one
 * thread (or a few) at a time, in whichever mode the run is registered in.
 *  - arguments refused with EINVAL; objects are aligned, distinct while
 *    held, and keep their contents from put to get (no constructor then);
 *  - the constructor runs once per object entering the backing store, the
 *    destructor once per object leaving it; at every quiet point the
 *    OBJECTS counter = constructed - destructed, and at destroy zero;
 *  - drain returns every cached object, also those cached on slots of
 *    threads that have exited; destroy refuses while objects are held;
 *  - the limit: never more objects than it, EAGAIN at it, and a get at the
 *    limit finds objects cached on other slots (collects them);
 *  - a failing constructor fails the get with its error, nothing counted;
 *  - strays: a put on another slot counts one, and the next get of the
 *    object on that slot calls the moved hook (from, to);
 *  - the counters are in the registry's exposition, and in its published
 *    segment as another process's reader sees them;
 *  - fork() with objects held, by the forking thread and another thread:
 *    the child uses the cache, puts the forking thread's objects back,
 *    drains, and cannot destroy (EBUSY) while the other thread's objects
 *    count as held; the parent is unaffected. And 30 forks while other
 *    threads get, put and drain: no child inherits a held cache lock.
 * Usage: test_objcache --expect-percpu 0|1
 */
#include "check.h"
#include "fork_gate.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct item {
	uint64_t magic;
	uint64_t payload;
	char bytes[48];
};
#define MAGIC 0x6f626a6361636865ull

static long ctors, dtors, moves;
static unsigned moved_from, moved_to;
static int ctor_fail; /* errno value the constructor returns, 0: succeeds */

static int ctor(void *obj, void *arg)
{
	struct item *it = obj;

	CHECK(arg == &ctors);
	if (ctor_fail)
		return ctor_fail;
	it->magic = MAGIC;
	it->payload = 0;
	__atomic_fetch_add(&ctors, 1, __ATOMIC_RELAXED);
	return 0;
}

static void dtor(void *obj, void *arg)
{
	struct item *it = obj;

	CHECK(arg == &ctors);
	CHECK(it->magic == MAGIC);
	it->magic = 0;
	__atomic_fetch_add(&dtors, 1, __ATOMIC_RELAXED);
}

static void moved(void *obj, unsigned from, unsigned to, void *arg)
{
	(void)obj;
	CHECK(arg == &ctors);
	/* Relaxed atomics: the fork test's busy threads call the hook
	 * concurrently (ThreadSanitizer); the strays test reads them after
	 * its threads are joined. */
	__atomic_store_n(&moved_from, from, __ATOMIC_RELAXED);
	__atomic_store_n(&moved_to, to, __ATOMIC_RELAXED);
	__atomic_fetch_add(&moves, 1, __ATOMIC_RELAXED);
}

static pcpu_objcache_t *make(size_t limit, unsigned cap, struct pcpu_registry *reg,
			     const char *name)
{
	struct pcpu_objcache_desc d;
	pcpu_objcache_t *c;

	memset(&d, 0, sizeof(d));
	d.size = sizeof(struct item);
	d.align = 64;
	d.capacity = cap;
	d.limit = limit;
	d.ctor = ctor;
	d.dtor = dtor;
	d.moved = moved;
	d.arg = &ctors;
	d.registry = reg;
	d.name = name;
	c = pcpu_objcache_create(&d);
	CHECK(c != NULL);
	return c;
}

static uint64_t stat(pcpu_objcache_t *c, enum pcpu_objcache_stat s)
{
	return pcpu_counter_fetch(pcpu_objcache_counter(c, s));
}

/* Constructed - destructed == the OBJECTS counter (a quiet point). */
static void check_objects(pcpu_objcache_t *c)
{
	CHECK_EQ_U64(stat(c, PCPU_OBJCACHE_OBJECTS), (uint64_t)(ctors - dtors));
}

static void test_args(void)
{
	struct pcpu_objcache_desc d;

	memset(&d, 0, sizeof(d));
	errno = 0;
	CHECK(pcpu_objcache_create(NULL) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_objcache_create(&d) == NULL && errno == EINVAL); /* size 0 */
	d.size = 8;
	d.align = 24;
	errno = 0;
	CHECK(pcpu_objcache_create(&d) == NULL && errno == EINVAL);
	d.align = 0;
	d.capacity = 1;
	errno = 0;
	CHECK(pcpu_objcache_create(&d) == NULL && errno == EINVAL);
	d.capacity = 0;
	d.registry = pcpu_registry_create();
	CHECK(d.registry != NULL);
	errno = 0;
	CHECK(pcpu_objcache_create(&d) == NULL && errno == EINVAL); /* no name */
	pcpu_registry_destroy(d.registry);
	errno = 0;
	CHECK(pcpu_objcache_counter(NULL, PCPU_OBJCACHE_GETS) == NULL && errno == EINVAL);
	CHECK(pcpu_objcache_destroy(NULL) == 0);
}

#define MANY 2000

static void test_basic(int expect_percpu)
{
	pcpu_objcache_t *c = make(0, 16, NULL, NULL);
	static struct item *held[MANY];
	struct pcpu_objcache_stats st;
	long c0 = ctors, live;
	size_t freed;

	CHECK(pcpu_objcache_is_percpu(c) == expect_percpu);
	for (int i = 0; i < MANY; i++) {
		held[i] = pcpu_objcache_get(c);
		CHECK(held[i] != NULL);
		CHECK(((uintptr_t)held[i] & 63) == 0);
		CHECK(held[i]->magic == MAGIC && held[i]->payload == 0);
		held[i]->payload = (uint64_t)i + 1; /* distinct: each keeps its own */
	}
	for (int i = 0; i < MANY; i++)
		CHECK(held[i]->payload == (uint64_t)i + 1);
	/* Batches of capacity / 2 = 8: at most one batch constructed ahead. */
	CHECK(ctors - c0 >= MANY && ctors - c0 <= MANY + 8);
	check_objects(c);
	for (int i = 0; i < MANY; i++)
		pcpu_objcache_put(c, held[i]);
	/* Round trips never construct: objects keep what the put left. */
	c0 = ctors;
	for (int r = 0; r < 1000; r++) {
		struct item *a = pcpu_objcache_get(c), *b = pcpu_objcache_get(c);

		CHECK(a && b && a != b && a->magic == MAGIC && b->magic == MAGIC);
		CHECK(a->payload >= 1 && a->payload <= MANY);
		pcpu_objcache_put(c, b);
		pcpu_objcache_put(c, a);
	}
	CHECK(ctors == c0);
	CHECK(pcpu_objcache_stats(c, &st) == 0);
	CHECK_EQ_U64(st.gets, MANY + 2000);
	CHECK_EQ_U64(st.puts, MANY + 2000);
	CHECK(st.get_misses >= MANY / 8 && st.get_misses <= st.gets);
	CHECK_EQ_U64(st.local_hits, st.gets - st.get_misses);
	CHECK(st.put_misses > 0 && st.depot_xfers > 0);
	CHECK_EQ_U64((uint64_t)st.objects, st.cached); /* nothing held */
	check_objects(c);
	/* Drain returns everything; the cache works on afterwards. */
	live = ctors - dtors;
	freed = pcpu_objcache_drain(c);
	CHECK_EQ_U64(freed, (uint64_t)live);
	CHECK_EQ_U64(stat(c, PCPU_OBJCACHE_OBJECTS), 0);
	CHECK_EQ_U64(ctors, dtors);
	held[0] = pcpu_objcache_get(c);
	CHECK(held[0] && held[0]->magic == MAGIC && held[0]->payload == 0);
	/* Destroy refuses while an object is held, nothing freed... */
	errno = 0;
	CHECK(pcpu_objcache_destroy(c) == -1 && errno == EBUSY);
	CHECK(held[0]->magic == MAGIC);
	pcpu_objcache_put(c, held[0]);
	/* ...and destructs everything once none is. */
	CHECK(pcpu_objcache_destroy(c) == 0);
	CHECK_EQ_U64(ctors, dtors);
}

static void pin(int cpu);

/* Gets n objects and puts them back, in another thread on CPU 1 (main
 * runs on CPU 0): they stay cached on that thread's slot. */
static void *get_put_n(void *arg)
{
	pcpu_objcache_t *c = arg;
	void *objs[32];

	pin(1);

	for (int i = 0; i < 32; i++)
		CHECK((objs[i] = pcpu_objcache_get(c)) != NULL);
	for (int i = 0; i < 32; i++)
		pcpu_objcache_put(c, objs[i]);
	return NULL;
}

static void test_limit(void)
{
	pcpu_objcache_t *c = make(32, 8, NULL, NULL);
	void *objs[33];
	cpu_set_t all;
	pthread_t t;

	CHECK(sched_getaffinity(0, sizeof(all), &all) == 0);
	pin(0);

	for (int i = 0; i < 32; i++)
		CHECK((objs[i] = pcpu_objcache_get(c)) != NULL);
	errno = 0;
	CHECK(pcpu_objcache_get(c) == NULL && errno == EAGAIN);
	CHECK_EQ_U64(stat(c, PCPU_OBJCACHE_OBJECTS), 32);
	pcpu_objcache_put(c, objs[31]);
	CHECK((objs[31] = pcpu_objcache_get(c)) != NULL);
	for (int i = 0; i < 32; i++)
		pcpu_objcache_put(c, objs[i]);
	/* All 32 cached on this slot; the other thread takes them and leaves
	 * them cached on its slot (CPU 1, or its fallback slot): this thread's
	 * gets at the limit must collect them. */
	CHECK(pthread_create(&t, NULL, get_put_n, c) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	for (int i = 0; i < 32; i++)
		CHECK((objs[i] = pcpu_objcache_get(c)) != NULL);
	CHECK_EQ_U64(stat(c, PCPU_OBJCACHE_OBJECTS), 32);
	errno = 0;
	CHECK(pcpu_objcache_get(c) == NULL && errno == EAGAIN);
	for (int i = 0; i < 32; i++)
		pcpu_objcache_put(c, objs[i]);
	check_objects(c);
	CHECK(pcpu_objcache_destroy(c) == 0);
	CHECK_EQ_U64(ctors, dtors);
	CHECK(sched_setaffinity(0, sizeof(all), &all) == 0);
}

static void test_ctor_failure(void)
{
	pcpu_objcache_t *c = make(0, 0, NULL, NULL);
	long c0 = ctors;

	ctor_fail = ENOSPC;
	errno = 0;
	CHECK(pcpu_objcache_get(c) == NULL && errno == ENOSPC);
	ctor_fail = 0;
	CHECK(ctors == c0);
	CHECK_EQ_U64(stat(c, PCPU_OBJCACHE_OBJECTS), 0);
	CHECK_EQ_U64(stat(c, PCPU_OBJCACHE_GETS), 0);
	CHECK(pcpu_objcache_destroy(c) == 0);
}

/* A constructor that fails POSIX-style: -1 with errno set (ctor_errno, or
 * none), or another negative value (issue 23: the get used to fail with
 * errno -1). */
static int ctor_errno, ctor_ret = -1;

static int ctor_posix(void *obj, void *arg)
{
	(void)obj;
	(void)arg;
	if (ctor_errno)
		errno = ctor_errno;
	return ctor_ret;
}

static void test_ctor_contract_and_capacity(void)
{
	struct pcpu_objcache_desc d;
	pcpu_objcache_t *c;

	memset(&d, 0, sizeof(d));
	d.size = 16;
	d.ctor = ctor_posix;
	c = pcpu_objcache_create(&d);
	CHECK(c != NULL);
	ctor_errno = ENOMEM; /* -1 with errno: that errno */
	errno = 0;
	CHECK(pcpu_objcache_get(c) == NULL && errno == ENOMEM);
	ctor_errno = 0; /* -1 without errno: ECANCELED, never -1 */
	errno = EBADF;  /* whatever it was before: not the constructor's */
	CHECK(pcpu_objcache_get(c) == NULL && errno == ECANCELED);
	ctor_ret = -22; /* any negative value reads the same */
	errno = 0;
	CHECK(pcpu_objcache_get(c) == NULL && errno == ECANCELED);
	CHECK_EQ_U64(stat(c, PCPU_OBJCACHE_OBJECTS), 0);
	CHECK(pcpu_objcache_destroy(c) == 0);

	/* Capacity 2..1024, as the header and the man page say. */
	d.ctor = NULL;
	d.capacity = 1024;
	CHECK((c = pcpu_objcache_create(&d)) != NULL);
	CHECK(pcpu_objcache_destroy(c) == 0);
	d.capacity = 1025;
	errno = 0;
	CHECK(pcpu_objcache_create(&d) == NULL && errno == EINVAL);
	d.capacity = 2;
	CHECK((c = pcpu_objcache_create(&d)) != NULL);
	CHECK(pcpu_objcache_destroy(c) == 0);
	CHECK(pcpu_objcache_is_percpu(NULL) == 0);
}

/* ---- strays: get on one slot, put on another ---- */

struct stray_ctx {
	pcpu_objcache_t *c;
	int cpu;
	void *obj;
	unsigned slot;
	int step;
};

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

static void *stray_get(void *arg)
{
	struct stray_ctx *x = arg;

	pin(x->cpu);
	x->slot = pcpu_current_slot();
	x->obj = pcpu_objcache_get(x->c);
	CHECK(x->obj != NULL);
	return NULL;
}

static void *stray_put_get(void *arg)
{
	struct stray_ctx *x = arg;

	pin(x->cpu);
	x->slot = pcpu_current_slot();
	pcpu_objcache_put(x->c, x->obj);
	x->obj = pcpu_objcache_get(x->c); /* the same: last in, first out */
	pcpu_objcache_put(x->c, x->obj);
	return NULL;
}

static void test_strays(void)
{
	pcpu_objcache_t *c = make(0, 0, NULL, NULL);
	struct stray_ctx a = {.c = c, .cpu = 0}, b = {.c = c, .cpu = 1};
	void *first;
	pthread_t t;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		printf("strays: one CPU, skipped\n");
		pcpu_objcache_destroy(c);
		return;
	}
	moves = 0;
	CHECK(pthread_create(&t, NULL, stray_get, &a) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	first = a.obj;
	b.obj = a.obj;
	CHECK(pthread_create(&t, NULL, stray_put_get, &b) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	if (a.slot == b.slot) {
		/* mm_cid of two threads that did not overlap may coincide. */
		printf("strays: both threads on slot %u, skipped\n", a.slot);
	} else {
		CHECK(b.obj == first);
		CHECK_EQ_U64(stat(c, PCPU_OBJCACHE_STRAYS), 1);
		CHECK(moves == 1 && moved_from == a.slot && moved_to == b.slot);
		printf("strays: got on slot %u, put and got again on slot %u: 1 stray, 1 move\n",
		       a.slot, b.slot);
	}
	CHECK(pcpu_objcache_destroy(c) == 0);
}

/* ---- the counters in the registry ---- */

static char segdir[] = "/tmp/pcpu-objcache-test.XXXXXX";

/* The counters are read from the registry's segment by another reader,
 * like any metric (what pcpustat and the exporter use). */
static void check_segment(pcpu_objcache_t *c)
{
	struct pcpu_reader_options ropt;
	struct pcpu_reader_snapshot *snap;
	pcpu_reader_t *r;
	char *text, want[128];
	size_t len;

	memset(&ropt, 0, sizeof(ropt));
	ropt.dir = segdir;
	r = pcpu_reader_open("objcache_test", &ropt);
	if (!r) {
		fprintf(stderr, "reader: %s\n", pcpu_reader_error());
		exit(1);
	}
	CHECK(pcpu_reader_snapshot(r, 0, &snap) == 0);
	CHECK(pcpu_snapshot_write(&snap->snapshot, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	snprintf(want, sizeof(want), "pcpu_objcache_gets_total{cache=\"buffers\"} %llu\n",
		 (unsigned long long)stat(c, PCPU_OBJCACHE_GETS));
	CHECK(strstr(text, want) != NULL);
	snprintf(want, sizeof(want), "pcpu_objcache_strays_total{cache=\"buffers\"} %llu\n",
		 (unsigned long long)stat(c, PCPU_OBJCACHE_STRAYS));
	CHECK(strstr(text, want) != NULL);
	free(text);
	pcpu_reader_snapshot_free(snap);
	pcpu_reader_close(r);
}

static void test_registry(void)
{
	struct pcpu_segment_options sopt;
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg;
	pcpu_objcache_t *c;
	char *text, want[128];
	size_t len;
	void *o;

	CHECK(reg != NULL);
	CHECK(mkdtemp(segdir) != NULL);
	memset(&sopt, 0, sizeof(sopt));
	sopt.dir = segdir;
	seg = pcpu_segment_publish(reg, "objcache_test", &sopt);
	if (!seg) {
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
		exit(1);
	}
	c = make(0, 0, reg, "buffers");
	for (int i = 0; i < 5; i++) {
		o = pcpu_objcache_get(c);
		pcpu_objcache_put(c, o);
	}
	/* A second cache of the same name is refused. */
	{
		struct pcpu_objcache_desc d;

		memset(&d, 0, sizeof(d));
		d.size = 8;
		d.registry = reg;
		d.name = "buffers";
		errno = 0;
		CHECK(pcpu_objcache_create(&d) == NULL && errno == EEXIST);
	}
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	snprintf(want, sizeof(want), "pcpu_objcache_gets_total{cache=\"buffers\"} 5\n");
	CHECK(strstr(text, want) != NULL);
	snprintf(want, sizeof(want), "pcpu_objcache_puts_total{cache=\"buffers\"} 5\n");
	CHECK(strstr(text, want) != NULL);
	snprintf(want, sizeof(want), "pcpu_objcache_objects{cache=\"buffers\"} %ld\n",
		 (long)stat(c, PCPU_OBJCACHE_OBJECTS));
	CHECK(strstr(text, want) != NULL);
	free(text);
	check_segment(c);
	CHECK(pcpu_objcache_destroy(c) == 0);
	/* Unregistered: the name is free again. */
	c = make(0, 0, reg, "buffers");
	CHECK(pcpu_objcache_destroy(c) == 0);
	CHECK(pcpu_segment_unpublish(seg) == 0);
	pcpu_registry_destroy(reg);
	CHECK(rmdir(segdir) == 0);
}

/* ---- fork with objects held ---- */

static pcpu_objcache_t *fork_cache;
static int helper_ready, helper_go;
static void *helper_objs[3];

static void *helper(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3; i++)
		CHECK((helper_objs[i] = pcpu_objcache_get(fork_cache)) != NULL);
	__atomic_store_n(&helper_ready, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&helper_go, __ATOMIC_SEQ_CST))
		usleep(1000);
	for (int i = 0; i < 3; i++)
		pcpu_objcache_put(fork_cache, helper_objs[i]);
	return NULL;
}

static void test_fork(void)
{
	struct item *mine[2];
	pthread_t t;
	pid_t pid;
	int status;

	fork_cache = make(0, 8, NULL, NULL);
	CHECK(pthread_create(&t, NULL, helper, NULL) == 0);
	while (!__atomic_load_n(&helper_ready, __ATOMIC_SEQ_CST))
		usleep(1000);
	for (int i = 0; i < 2; i++)
		CHECK((mine[i] = pcpu_objcache_get(fork_cache)) != NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct item *objs[100];
		int64_t before = (int64_t)stat(fork_cache, PCPU_OBJCACHE_OBJECTS);

		/* The child uses the cache: distinct objects, never one held. */
		for (int r = 0; r < 50; r++) {
			for (int i = 0; i < 100; i++) {
				objs[i] = pcpu_objcache_get(fork_cache);
				CHECK(objs[i] != NULL && objs[i] != mine[0] && objs[i] != mine[1]);
				for (int h = 0; h < 3; h++)
					CHECK((void *)objs[i] != helper_objs[h]);
				CHECK(objs[i]->payload == 0);
				objs[i]->payload = 1; /* held */
			}
			for (int i = 0; i < 100; i++) {
				objs[i]->payload = 0;
				pcpu_objcache_put(fork_cache, objs[i]);
			}
		}
		for (int i = 0; i < 2; i++)
			pcpu_objcache_put(fork_cache, mine[i]);
		CHECK(pcpu_objcache_drain(fork_cache) > 0);
		/* The helper's 3 objects are held for ever in the child. */
		CHECK_EQ_U64(stat(fork_cache, PCPU_OBJCACHE_OBJECTS), 3);
		CHECK(before >= 5);
		errno = 0;
		CHECK(pcpu_objcache_destroy(fork_cache) == -1 && errno == EBUSY);
		check_objects(fork_cache);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The parent: unaffected. */
	__atomic_store_n(&helper_go, 1, __ATOMIC_SEQ_CST);
	CHECK(pthread_join(t, NULL) == 0);
	for (int i = 0; i < 2; i++)
		pcpu_objcache_put(fork_cache, mine[i]);
	check_objects(fork_cache);
	CHECK(pcpu_objcache_destroy(fork_cache) == 0);
	CHECK_EQ_U64(ctors, dtors);
}

/* Forks while other threads get, put and drain, so that a cache lock is
 * often held at the fork: the child must get, put and drain without
 * hanging (an alarm kills a child that does). */
static int busy_stop;

static void *busy(void *arg)
{
	pcpu_objcache_t *c = arg;

	fork_gate_started();
	while (!__atomic_load_n(&busy_stop, __ATOMIC_RELAXED)) {
		void *a, *b;

		fork_gate_enter();
		a = pcpu_objcache_get(c);
		b = pcpu_objcache_get(c);
		CHECK(a && b);
		pcpu_objcache_put(c, a);
		pcpu_objcache_put(c, b);
		fork_gate_leave();
	}
	return NULL;
}

static void *busy_drain(void *arg)
{
	fork_gate_started();
	while (!__atomic_load_n(&busy_stop, __ATOMIC_RELAXED)) {
		fork_gate_enter();
		(void)pcpu_objcache_drain(arg);
		fork_gate_leave();
	}
	return NULL;
}

static void test_fork_busy(void)
{
	pcpu_objcache_t *c = make(0, 4, NULL, NULL);
	pthread_t t[3];
	int forks = 30;

	CHECK(pthread_create(&t[0], NULL, busy, c) == 0);
	CHECK(pthread_create(&t[1], NULL, busy, c) == 0);
	CHECK(pthread_create(&t[2], NULL, busy_drain, c) == 0);
	fork_gate_await(3);
	for (int i = 0; i < forks; i++) {
		pid_t pid;
		int status;

		usleep(2000);
		pid = fork_gated();
		CHECK(pid >= 0);
		if (pid == 0) {
			void *objs[20];

			alarm(300); /* only a hang: a loaded machine delays, never for minutes */
			for (int r = 0; r < 20; r++) {
				for (int k = 0; k < 20; k++)
					CHECK((objs[k] = pcpu_objcache_get(c)) != NULL);
				for (int k = 0; k < 20; k++)
					pcpu_objcache_put(c, objs[k]);
			}
			(void)pcpu_objcache_drain(c);
			_exit(0);
		}
		CHECK(waitpid(pid, &status, 0) == pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "fork %d: child %s %d\n", i,
				WIFSIGNALED(status) ? "killed by signal" : "exited",
				WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			exit(1);
		}
	}
	__atomic_store_n(&busy_stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 3; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(pcpu_objcache_destroy(c) == 0);
	CHECK_EQ_U64(ctors, dtors);
	printf("%d forks while 3 threads got, put and drained: every child ran\n", forks);
}

int main(int argc, char **argv)
{
	int expect_percpu = -1;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--expect-percpu") == 0 && i + 1 < argc)
			expect_percpu = atoi(argv[++i]);
	CHECK(expect_percpu == 0 || expect_percpu == 1);
	test_args();
	test_basic(expect_percpu);
	test_limit();
	test_ctor_failure();
	test_ctor_contract_and_capacity();
	test_strays();
	test_registry();
	test_fork();
	test_fork_busy();
	printf("objcache unit tests passed (%s mode, rseq %s)\n",
	       expect_percpu ? "per-CPU" : "locked", pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
