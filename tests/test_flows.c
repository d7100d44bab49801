/*
 * Counters for millions of flows (pcpu/flows.h): what the header promises,
 * one thread (or a few) at a time, in whichever mode the run is in.
 *  1. Arguments: creation refuses what it must (EINVAL, E2BIG) and takes
 *     a larger attribute struct whose unknown tail is zero; an add, a read
 *     or a bulk read out of range fails with EINVAL and changes nothing.
 *  2. One thread, exact without a flush: random adds over 1000 flows x 3
 *     counters (values 0, small, and 2^32 and more, which go to the shared
 *     word), every read and the bulk read equal what was added, before and
 *     after a flush.
 *  3. Full buffers drain: 10^4 adds to one key with 4-entry buffers leave
 *     at most 4 entries per slot buffered, and the read is exact.
 *  4. Flush: a thread pinned to each CPU adds and exits, its entries left
 *     in its CPU's buffer (rseq modes: pending() counts them); a flush from
 *     the main thread drains every slot (pending() 0) and the values stay
 *     exact. Where no thread uses rseq, nothing is ever buffered.
 *  5. The bulk read of ranges equals the reads of their keys.
 *  6. fork(): the child reads the parent's values (buffers included), adds,
 *     flushes, and the parent never sees the child's adds. Then 20 forks
 *     while another thread adds into 8-entry buffers (drains all the time):
 *     each child reads at least every add that returned before the fork and
 *     at most those begun, and its flush and reads return (an alarm kills a
 *     child that hangs on a drain copied half-done).
 *  7. Create and destroy 200 objects (the sanitizer builds see leaks).
 * Usage: test_flows --expect-mode glibc|own|fallback
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *expect_mode;
static int buffered; /* 1 when adds can buffer: the thread runs rseq sections */

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	return check_xorshift(&rng);
}

static struct pcpu_flows_attr attr_of(uint32_t buffer)
{
	struct pcpu_flows_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.buffer = buffer;
	return a;
}

/* Every key of f equals want[] (nflows x ncounters), by reads and by the
 * bulk read. */
static void check_all(pcpu_flows_t *f, const uint64_t *want)
{
	size_t nf = pcpu_flows_nflows(f);
	unsigned nc = pcpu_flows_ncounters(f);
	uint64_t *got = calloc(nf * nc, sizeof(*got));

	CHECK(got);
	for (size_t fl = 0; fl < nf; fl++)
		for (unsigned c = 0; c < nc; c++)
			CHECK_EQ_U64(pcpu_flows_read(f, fl, c), want[fl * nc + c]);
	CHECK(pcpu_flows_read_array(f, 0, nf, got) == 0);
	for (size_t k = 0; k < nf * nc; k++)
		CHECK_EQ_U64(got[k], want[k]);
	free(got);
}

static void test_arguments(void)
{
	struct pcpu_flows_attr a = attr_of(0);
	struct {
		struct pcpu_flows_attr a;
		uint64_t later; /* a later release's field */
	} big;
	pcpu_flows_t *f;
	uint64_t out[4];

	errno = 0;
	CHECK(pcpu_flows_create(0, 2, NULL) == NULL && errno == EINVAL);
	CHECK(pcpu_flows_create(10, 0, NULL) == NULL && errno == EINVAL);
	CHECK(pcpu_flows_create(PCPU_FLOWS_MAX_KEYS / 2 + 1, 2, NULL) == NULL && errno == E2BIG);
	CHECK(pcpu_flows_create(SIZE_MAX, 1, NULL) == NULL && errno == E2BIG);
	CHECK(pcpu_flows_create((size_t)PCPU_FLOWS_MAX_KEYS + 1, 1, NULL) == NULL && errno == E2BIG);
	a.size = sizeof(a) - 1;
	CHECK(pcpu_flows_create(10, 2, &a) == NULL && errno == EINVAL);
	a = attr_of(PCPU_FLOWS_MAX_BUFFER + 1);
	CHECK(pcpu_flows_create(10, 2, &a) == NULL && errno == EINVAL);
	a = attr_of(0);
	a.flags = 1;
	CHECK(pcpu_flows_create(10, 2, &a) == NULL && errno == EINVAL);
	a = attr_of(0);
	a.reserved[3] = &a;
	CHECK(pcpu_flows_create(10, 2, &a) == NULL && errno == EINVAL);
	memset(&big, 0, sizeof(big));
	big.a.size = sizeof(big);
	big.later = 1;
	CHECK(pcpu_flows_create(10, 2, &big.a) == NULL && errno == EINVAL);
	big.later = 0;
	f = pcpu_flows_create(10, 2, &big.a);
	CHECK(f);
	pcpu_flows_destroy(f);
	a = attr_of(PCPU_FLOWS_MAX_BUFFER);
	f = pcpu_flows_create(10, 2, &a);
	CHECK(f);
	pcpu_flows_destroy(f);

	errno = 0;
	f = pcpu_flows_create(3, 2, NULL);
	CHECK(f && errno == 0);
	CHECK(pcpu_flows_nflows(f) == 3 && pcpu_flows_ncounters(f) == 2);
	CHECK(pcpu_flows_add(f, 2, 1, 7) == 0);
	/* Out of range: refused, and nothing lands on another key (flow 2's
	 * counter 2 would be flow 3's counter 0 = one past the end, counter
	 * 0 of flow 3 past the end too). */
	errno = 0;
	CHECK(pcpu_flows_add(f, 3, 0, 1) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_flows_add(f, 1, 2, 1) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_flows_add(f, SIZE_MAX, 0, (uint64_t)1 << 40) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_flows_read(f, 3, 0) == 0 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_flows_read(f, 0, 2) == 0 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_flows_read(NULL, 0, 0) == 0 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_flows_read(f, 2, 1) == 7 && errno == 0);
	CHECK(pcpu_flows_read(f, 2, 0) == 0 && pcpu_flows_read(f, 1, 1) == 0);
	CHECK(pcpu_flows_read_array(f, 0, 0, out) == -1 && errno == EINVAL);
	CHECK(pcpu_flows_read_array(f, 0, 4, out) == -1 && errno == EINVAL);
	CHECK(pcpu_flows_read_array(f, 3, 1, out) == -1 && errno == EINVAL);
	CHECK(pcpu_flows_read_array(f, 2, SIZE_MAX, out) == -1 && errno == EINVAL);
	CHECK(pcpu_flows_read_array(f, 0, 1, NULL) == -1 && errno == EINVAL);
	CHECK(pcpu_flows_read_array(NULL, 0, 1, out) == -1 && errno == EINVAL);
	CHECK(pcpu_flows_read_array(f, 2, 1, out) == 0 && out[0] == 0 && out[1] == 7);
	CHECK(pcpu_flows_flush(NULL) == -1 && errno == EINVAL);
	CHECK(pcpu_flows_pending(NULL) == 0 && errno == EINVAL);
	CHECK(pcpu_flows_nflows(NULL) == 0 && pcpu_flows_ncounters(NULL) == 0);
	errno = 0;
	CHECK(pcpu_flows_flush(f) == 0 && errno == 0);
	CHECK(pcpu_flows_read(f, 2, 1) == 7);
	pcpu_flows_destroy(f);
	pcpu_flows_destroy(NULL);
}

static void test_exact(void)
{
	enum { NF = 1000, NC = 3 };
	uint64_t *want = calloc(NF * NC, sizeof(*want));
	pcpu_flows_t *f = pcpu_flows_create(NF, NC, NULL);

	CHECK(f && want);
	for (int i = 0; i < 200000; i++) {
		size_t fl = rnd() % NF;
		unsigned c = (unsigned)(rnd() % NC);
		uint64_t r = rnd(), v;

		switch (r % 16) {
		case 0:
			v = 0;
			break;
		case 1:
			v = ((uint64_t)1 << 32) + (r >> 40); /* too wide for an entry */
			break;
		case 2:
			v = 0xffffffffu; /* the widest an entry holds */
			break;
		default:
			v = 1 + (r >> 50);
		}
		CHECK(pcpu_flows_add(f, fl, c, v) == 0);
		want[fl * NC + c] += v;
	}
	if (buffered)
		CHECK(pcpu_flows_pending(f) > 0);
	else
		CHECK(pcpu_flows_pending(f) == 0);
	check_all(f, want);
	CHECK(pcpu_flows_flush(f) == 0);
	CHECK(pcpu_flows_pending(f) == 0);
	check_all(f, want);
	pcpu_flows_destroy(f);
	free(want);
}

static void test_full_buffers(void)
{
	struct pcpu_flows_attr a = attr_of(4);
	pcpu_flows_t *f = pcpu_flows_create(5, 2, &a);

	CHECK(f);
	for (int i = 0; i < 10000; i++)
		CHECK(pcpu_flows_add(f, 4, 1, 3) == 0);
	CHECK(pcpu_flows_pending(f) <= 4 * (size_t)pcpu_nslots());
	CHECK_EQ_U64(pcpu_flows_read(f, 4, 1), 30000);
	CHECK_EQ_U64(pcpu_flows_read(f, 4, 0), 0);
	CHECK_EQ_U64(pcpu_flows_read(f, 3, 1), 0);
	pcpu_flows_destroy(f);
}

struct pinned {
	pcpu_flows_t *f;
	int cpu;
	uint64_t *want; /* this thread's adds */
};

static void *pinned_main(void *arg)
{
	struct pinned *p = arg;
	cpu_set_t set;
	uint64_t r = 1234567 + (uint64_t)p->cpu;

	CPU_ZERO(&set);
	CPU_SET(p->cpu, &set);
	CHECK(pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0);
	for (int i = 0; i < 100; i++) {
		size_t fl = check_xorshift(&r) % 50;

		CHECK(pcpu_flows_add(p->f, fl, 0, 2) == 0);
		p->want[fl * 2] += 2;
	}
	return NULL;
}

static void test_flush(void)
{
	enum { NF = 50 };
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	/* Room for every thread's adds in one buffer (with mm_cid as the
	 * index, the threads may all get the same slot). */
	struct pcpu_flows_attr a = attr_of(ncpu * 100 > 256 ? (uint32_t)ncpu * 100 : 256);
	pcpu_flows_t *f = pcpu_flows_create(NF, 2, &a);
	uint64_t want[NF * 2];
	struct pinned *p = calloc((size_t)ncpu, sizeof(*p));
	pthread_t *t = calloc((size_t)ncpu, sizeof(*t));

	CHECK(f && p && t);
	memset(want, 0, sizeof(want));
	for (long c = 0; c < ncpu; c++) {
		p[c].f = f;
		p[c].cpu = (int)c;
		p[c].want = calloc(NF * 2, sizeof(uint64_t));
		CHECK(p[c].want);
		CHECK(pthread_create(&t[c], NULL, pinned_main, &p[c]) == 0);
		CHECK(pthread_join(t[c], NULL) == 0);
		for (int k = 0; k < NF * 2; k++)
			want[k] += p[c].want[k];
		free(p[c].want);
	}
	/* Each thread's 100 entries stay in its slot's buffer: nobody drains
	 * them but a flush. */
	if (buffered)
		CHECK_EQ_U64(pcpu_flows_pending(f), 100 * (uint64_t)ncpu);
	else
		CHECK(pcpu_flows_pending(f) == 0);
	check_all(f, want);
	CHECK(pcpu_flows_flush(f) == 0);
	CHECK_EQ_U64(pcpu_flows_pending(f), 0);
	check_all(f, want);
	/* Again with nothing buffered. */
	CHECK(pcpu_flows_flush(f) == 0);
	check_all(f, want);
	pcpu_flows_destroy(f);
	free(p);
	free(t);
}

static void test_ranges(void)
{
	enum { NF = 300, NC = 2 };
	struct pcpu_flows_attr a = attr_of(16);
	pcpu_flows_t *f = pcpu_flows_create(NF, NC, &a);
	uint64_t got[NF * NC];

	CHECK(f);
	for (int i = 0; i < 5000; i++)
		CHECK(pcpu_flows_add(f, rnd() % NF, (unsigned)(rnd() % NC), 1 + rnd() % 100) == 0);
	for (size_t first = 0; first < NF; first += 37) {
		size_t n = 1 + rnd() % (NF - first);

		CHECK(pcpu_flows_read_array(f, first, n, got) == 0);
		for (size_t fl = 0; fl < n; fl++)
			for (unsigned c = 0; c < NC; c++)
				CHECK_EQ_U64(got[fl * NC + c], pcpu_flows_read(f, first + fl, c));
	}
	pcpu_flows_destroy(f);
}

/* ---- fork ------------------------------------------------------------------ */

static void test_fork_simple(void)
{
	enum { NF = 100 };
	pcpu_flows_t *f = pcpu_flows_create(NF, 2, NULL);
	uint64_t want[NF * 2];
	pid_t pid;
	int st;

	CHECK(f);
	memset(want, 0, sizeof(want));
	for (int i = 0; i < 150; i++) {
		size_t fl = rnd() % NF;

		CHECK(pcpu_flows_add(f, fl, 1, 10) == 0);
		want[fl * 2 + 1] += 10;
	}
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		alarm(60);
		check_all(f, want);
		for (size_t fl = 0; fl < NF; fl++) {
			CHECK(pcpu_flows_add(f, fl, 0, 5) == 0);
			want[fl * 2] += 5;
		}
		CHECK(pcpu_flows_flush(f) == 0);
		CHECK(pcpu_flows_pending(f) == 0);
		check_all(f, want);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	check_all(f, want); /* the child's adds are its own */
	pcpu_flows_destroy(f);
}

static pcpu_flows_t *busy_f;
static uint64_t busy_done; /* adds of 1 that returned (atomic) */
static int busy_stop;

static void *busy_main(void *arg)
{
	uint64_t r = 99991;

	(void)arg;
	while (!__atomic_load_n(&busy_stop, __ATOMIC_RELAXED)) {
		CHECK(pcpu_flows_add(busy_f, check_xorshift(&r) % 64, 0, 1) == 0);
		__atomic_fetch_add(&busy_done, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void test_fork_busy(void)
{
	struct pcpu_flows_attr a = attr_of(8);
	uint64_t got[64 * 2];
	pthread_t t;

	busy_f = pcpu_flows_create(64, 2, &a);
	CHECK(busy_f);
	CHECK(pthread_create(&t, NULL, busy_main, NULL) == 0);
	while (__atomic_load_n(&busy_done, __ATOMIC_ACQUIRE) < 1000)
		sched_yield();
	for (int i = 0; i < 20; i++) {
		uint64_t before = __atomic_load_n(&busy_done, __ATOMIC_ACQUIRE);
		pid_t pid = fork();
		int st;

		CHECK(pid >= 0);
		if (pid == 0) {
			/* busy_done here: what the thread had counted at the
			 * fork; one more add may have returned uncounted. */
			uint64_t upto = busy_done + 1, sum = 0;

			alarm(60);
			CHECK(pcpu_flows_read_array(busy_f, 0, 64, got) == 0);
			for (int k = 0; k < 128; k++)
				sum += got[k];
			if (sum < before || sum > upto) {
				fprintf(stderr, "child: sum %" PRIu64 " not in [%" PRIu64 ", %" PRIu64 "]\n",
					sum, before, upto);
				_exit(1);
			}
			for (int k = 0; k < 64; k++)
				CHECK_EQ_U64(pcpu_flows_read(busy_f, (size_t)k, 0), got[2 * k]);
			CHECK(pcpu_flows_flush(busy_f) == 0);
			CHECK(pcpu_flows_pending(busy_f) == 0);
			for (int k = 0; k < 64; k++)
				CHECK_EQ_U64(pcpu_flows_read(busy_f, (size_t)k, 0), got[2 * k]);
			CHECK(pcpu_flows_add(busy_f, 0, 1, 3) == 0);
			CHECK_EQ_U64(pcpu_flows_read(busy_f, 0, 1), 3);
			_exit(0);
		}
		CHECK(waitpid(pid, &st, 0) == pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "fork %d: child %s %d\n", i,
				WIFSIGNALED(st) ? "killed by signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			exit(1);
		}
	}
	__atomic_store_n(&busy_stop, 1, __ATOMIC_RELAXED);
	CHECK(pthread_join(t, NULL) == 0);
	{
		uint64_t sum = 0;

		CHECK(pcpu_flows_read_array(busy_f, 0, 64, got) == 0);
		for (int k = 0; k < 128; k++)
			sum += got[k];
		CHECK_EQ_U64(sum, busy_done);
	}
	pcpu_flows_destroy(busy_f);
}

static void test_churn(void)
{
	for (int i = 0; i < 200; i++) {
		struct pcpu_flows_attr a = attr_of((uint32_t)(1 + i % 64));
		size_t nf = (size_t)(1 + i * 37);
		pcpu_flows_t *f = pcpu_flows_create(nf, 2, &a);
		uint64_t want = 0;

		CHECK(f);
		for (size_t j = 0; j < 100; j++) {
			CHECK(pcpu_flows_add(f, j % nf, (unsigned)j & 1, 1) == 0);
			want += j % nf == 0 && !(j & 1);
		}
		CHECK_EQ_U64(pcpu_flows_read(f, 0, 0), want);
		pcpu_flows_destroy(f);
	}
}

int main(int argc, char **argv)
{
	const char *m;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-mode") && i + 1 < argc) {
			expect_mode = argv[++i];
		} else {
			fprintf(stderr, "usage: %s --expect-mode glibc|own|fallback\n", argv[0]);
			return 2;
		}
	}
	m = pcpu_rseq_mode_name(pcpu_rseq_mode());
	if (expect_mode && strcmp(m, expect_mode) != 0) {
		fprintf(stderr, "mode %s, expected %s\n", m, expect_mode);
		return 1;
	}
	buffered = pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK && PCPU_ARCH_HAVE_RSEQ;
	test_arguments();
	test_exact();
	test_full_buffers();
	test_flush();
	test_ranges();
	test_fork_simple();
	test_fork_busy();
	test_churn();
	printf("flows: mode %s (%s): ok\n", m, buffered ? "buffered" : "shared words only");
	return 0;
}
