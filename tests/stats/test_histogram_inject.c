/*
 * Histogram records still count exactly when their rseq sections abort.
 *
 * A record is one critical section on the bucket's (count, sum) pair whose
 * commit is one 16-byte store (pcpu/histogram.h, pcpu__histogram_add_pair());
 * one that does not commit takes two counter slow-path adds. Built with
 * PCPU_TEST_INJECT (see tests/test_abort_injection.c): every inline section
 * spins between loading the pair and committing it, and the hook before
 * each section now and then yields or raises a signal whose handler records
 * too, so sections abort, and threads migrate, while they hold a loaded
 * pair: a commit outside the section would then overwrite another thread's
 * adds. 2 threads per CPU record random values into a log-linear and an
 * explicit histogram; at the end every bucket and both sums equal what the
 * threads and the handlers recorded, tallied privately. In the rseq modes
 * some sections must have aborted: the run lasts --seconds, and then goes
 * on until one has (a loaded machine gets there later; 10 minutes only
 * bound a run that never gets there).
 *
 * Usage: test_histogram_inject --expect-mode glibc|own|fallback [--seconds S]
 */
#define PCPU_TEST_INJECT 1
#include "../check.h"
#include <pcpu/pcpu.h>
#include <pcpu/stats.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

unsigned pcpu__test_inject_spin = 2000;
__thread unsigned long pcpu__test_inject_aborts;
static __thread unsigned long before_calls;
static __thread int in_handler;

void pcpu__test_inject_before(void)
{
	unsigned long n = ++before_calls;

	if (in_handler)
		return;
	if (n % 389 == 0)
		sched_yield();
	else if (n % 701 == 0)
		raise(SIGUSR1);
}

enum { MAXB = 2048, MAXT = 64 };
static pcpu_histogram_t *hist[2];
static size_t nb[2];
static int stop;
static unsigned long total_aborts, live_aborts; /* live: published as they run */

/* Per thread: what it (and its signal handler) recorded. */
struct tally {
	uint64_t counts[2][MAXB];
	uint64_t sum[2]; /* modulo 2^64, as the histogram's */
	uint64_t seed;
};
static struct tally tallies[MAXT], handler_tallies[MAXT];
static __thread struct tally *mine_h; /* the handler's own: never torn */

static int64_t next_value(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (int64_t)(*x >> 20) - 1000; /* negatives too */
}

static void record(struct tally *t, int k, int64_t v)
{
	pcpu_histogram_record(hist[k], v);
	t->counts[k][pcpu_histogram_bucket_of(hist[k], v)]++;
	/* Log-linear records a negative value as 0 (sum included). */
	t->sum[k] += (uint64_t)(k == 0 && v < 0 ? 0 : v);
}

static void handler(int sig)
{
	(void)sig;
	in_handler = 1;
	if (mine_h)
		record(mine_h, 1, next_value(&mine_h->seed) & 0xffff);
	in_handler = 0;
}

static void *worker(void *arg)
{
	struct tally *t = arg;
	unsigned long i = 0;

	mine_h = &handler_tallies[t - tallies];
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int64_t v = next_value(&t->seed);

		record(t, (int)(i++ & 1), v);
		if ((i & 1023) == 0 && pcpu__test_inject_aborts && !live_aborts)
			__atomic_store_n(&live_aborts, pcpu__test_inject_aborts, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&total_aborts, pcpu__test_inject_aborts, __ATOMIC_RELAXED);
	return NULL;
}

int main(int argc, char **argv)
{
	static const int64_t bounds[] = { -500, 0, 100, 1000, 10000, 100000, 1000000, 10000000,
					  100000000, 1000000000, 10000000000, 100000000000 };
	struct pcpu_histogram_layout ll = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0, 4, (int64_t)1 << 40, 0, 0, 0, 0 };
	struct pcpu_histogram_layout ex = { PCPU_HISTOGRAM_EXPLICIT, bounds, 12, 0, 0, 0, 0, 0, 0 };
	const char *expect = NULL;
	double seconds = 1;
	pthread_t th[MAXT];
	struct sigaction sa;
	uint64_t counts[MAXB];
	int64_t sum;
	int nthreads, i, k;
	size_t b;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-mode") && i + 1 < argc)
			expect = argv[++i];
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
	}
	hist[0] = pcpu_histogram_create(&ll);
	hist[1] = pcpu_histogram_create(&ex);
	CHECK(hist[0] && hist[1]);
	nb[0] = pcpu_histogram_nbuckets(hist[0]);
	nb[1] = pcpu_histogram_nbuckets(hist[1]);
	CHECK(nb[0] <= MAXB && nb[1] <= MAXB);
	if (expect && strcmp(pcpu_rseq_mode_name(pcpu_rseq_mode()), expect) != 0) {
		fprintf(stderr, "rseq mode %s, expected %s\n", pcpu_rseq_mode_name(pcpu_rseq_mode()),
			expect);
		return 1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	nthreads = 2 * (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (nthreads > MAXT)
		nthreads = MAXT;
	for (i = 0; i < nthreads; i++) {
		tallies[i].seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		handler_tallies[i].seed = 0x632be59bd9b4e019ull * (uint64_t)(i + 1);
		CHECK(pthread_create(&th[i], NULL, worker, &tallies[i]) == 0);
	}
	{
		struct timespec t0, t;
		double elapsed;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			usleep(10000);
			clock_gettime(CLOCK_MONOTONIC, &t);
			elapsed = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
		} while (elapsed < 600 &&
			 (elapsed < seconds || (pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK &&
						!__atomic_load_n(&live_aborts, __ATOMIC_RELAXED))));
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	for (k = 0; k < 2; k++) {
		uint64_t n = 0, want_sum = 0;

		CHECK(pcpu_histogram_read(hist[k], counts, nb[k], NULL, &sum) == 0);
		for (b = 0; b < nb[k]; b++) {
			uint64_t want = 0;

			for (i = 0; i < nthreads; i++)
				want += tallies[i].counts[k][b] + handler_tallies[i].counts[k][b];
			if (counts[b] != want) {
				fprintf(stderr, "histogram %d bucket %zu: %llu, recorded %llu\n", k, b,
					(unsigned long long)counts[b], (unsigned long long)want);
				return 1;
			}
			n += want;
		}
		for (i = 0; i < nthreads; i++)
			want_sum += tallies[i].sum[k] + handler_tallies[i].sum[k];
		if ((uint64_t)sum != want_sum) {
			fprintf(stderr, "histogram %d sum: %lld, recorded %lld\n", k, (long long)sum,
				(long long)want_sum);
			return 1;
		}
		printf("histogram %d: %llu records exact, sum exact\n", k, (unsigned long long)n);
	}
	printf("mode %s, %d threads, %lu aborted sections\n", pcpu_rseq_mode_name(pcpu_rseq_mode()),
	       nthreads, total_aborts);
	if (pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK)
		CHECK(total_aborts > 0);
	pcpu_histogram_destroy(hist[0]);
	pcpu_histogram_destroy(hist[1]);
	return 0;
}
