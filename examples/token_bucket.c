/* SPDX-License-Identifier: MIT */
/*
 * A token bucket: admission control at --rate requests a second with
 * bursts of up to --burst, with a hierarchical counter (pcpu/hcounter.h) as
 * the tokens taken and not yet refilled.
 *
 * take() is pcpu_hcounter_limited_add(taken, 1, burst): a request is
 * admitted while fewer than `burst` tokens are out. A refill thread gives
 * back rate x elapsed tokens every 10 ms, never more than are out
 * (pcpu_hcounter_sum(): the one thread that lowers the count reads it
 * exactly, 100 times a second). Request threads (--threads) ask as fast as
 * they can; admissions cost an rseq add while the bucket has room.
 *
 * The program checks that no more than burst + rate x seconds requests were
 * admitted, prints the admitted rate, and publishes a statistics segment
 * named token_bucket with the tokens out (approximation and bounds) as
 * gauges (pcpustat token_bucket).
 *
 * Usage: pcpu_example_token_bucket [--rate R] [--burst B] [--threads N]
 *        [--seconds S]
 * Exit 0 when the bucket held, 1 otherwise.
 */
#include <pcpu/pcpu.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pcpu_hcounter_t *taken;
static int64_t rate = 100000, burst = 1000;
static pcpu_counter_t admitted, denied;
static int stop;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int take(void)
{
	return pcpu_hcounter_limited_add(taken, 1, burst);
}

static void *refill(void *arg)
{
	double last = now(), owed = 0;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		double t;
		int64_t give, out;

		usleep(10000);
		t = now();
		owed += (t - last) * (double)rate;
		last = t;
		out = pcpu_hcounter_sum(taken);
		give = (int64_t)owed < out ? (int64_t)owed : out;
		if (give > 0)
			pcpu_hcounter_add(taken, -give);
		/* Whole tokens only; what a full bucket cannot hold is lost. */
		owed = give < out ? owed - (double)(int64_t)owed : 0;
	}
	return NULL;
}

static void *requester(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if (take())
			pcpu_counter_inc(admitted);
		else
			pcpu_counter_inc(denied);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = 4;
	double seconds = 3, start, elapsed;
	pthread_t th[256], rf;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	uint64_t n;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--rate"))
			rate = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--burst"))
			burst = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--threads"))
			nthreads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
	}
	if (rate < 1 || burst < 1 || nthreads < 1 || nthreads > 256) {
		fprintf(stderr, "usage: %s [--rate R] [--burst B] [--threads 1-256] [--seconds S]\n",
			argv[0]);
		return 2;
	}
	taken = pcpu_hcounter_create(64);
	reg = pcpu_registry_create();
	/* Published first, before any series (pcpustat token_bucket). */
	seg = reg ? pcpu_segment_publish(reg, "token_bucket", NULL) : NULL;
	if (reg && !seg)
		fprintf(stderr, "no segment: %s\n", pcpu_segment_error());
	if (!taken || !reg ||
	    !pcpu_registry_hcounter(reg, "tokens_out", "Tokens taken and not yet refilled.", taken) ||
	    !(admitted = pcpu_registry_counter(reg, "requests_admitted_total", "Requests admitted.")) ||
	    !(denied = pcpu_registry_counter(reg, "requests_denied_total", "Requests over the rate."))) {
		perror("pcpu");
		return 1;
	}
	start = now();
	pthread_create(&rf, NULL, refill, NULL);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, requester, NULL);
	for (int s = 0; s < (int)(seconds * 10); s++) {
		usleep(100000);
		if (seg && s % 10 == 0)
			(void)pcpu_registry_collect(reg);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	pthread_join(rf, NULL);
	elapsed = now() - start;
	n = pcpu_counter_fetch(admitted);
	printf("rate %lld/s, burst %lld: %llu admitted in %.2f s (%.0f/s), %llu denied\n",
	       (long long)rate, (long long)burst, (unsigned long long)n, elapsed, (double)n / elapsed,
	       (unsigned long long)pcpu_counter_fetch(denied));
	if ((double)n > (double)burst + (double)rate * elapsed + 1) {
		printf("FAIL: more admitted than the bucket allows\n");
		return 1;
	}
	printf("never more than burst + rate x time admitted\n");
	if (seg)
		pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	pcpu_hcounter_destroy(taken);
	return 0;
}
