/*
 * counter(9) fidelity: statistics code written the way FreeBSD's network
 * stack writes it (our own code, in that idiom), compiled with
 * -std=c11 -Wpedantic -Werror, counting exactly under oversubscription:
 *
 *  - <sys/counter.h> from pcpu's overlay, counter_u64_t as uint64_t *;
 *  - a `struct ipstat` of uint64_t mirrored by an array of counters, with
 *    IPSTAT_INC/IPSTAT_ADD per-field macros and a sysctl-style CTASSERT;
 *  - static early counters (COUNTER_U64_DEFINE_EARLY), one added to by a
 *    constructor that runs before their allocation;
 *  - a sysctl-like reader thread that fetches and zeroes the array while
 *    packets are counted: every add reported exactly once;
 *  - a rate-limited log path (counter_ratecheck) whose admissions never
 *    exceed the limit in any period, with 4x more threads than CPUs;
 *  - SYSCTL_COUNTER_U64(_ARRAY) at file scope, attached to a registry and
 *    exposed;
 *  - zpcpu_get_cpu()/zpcpu_get()/zpcpu_replace() on a counter.
 * The mode (glibc, own registration, fallback) comes from the environment,
 * as for test_stress (tests/CMakeLists.txt runs all three).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep under -std=c11 */
#include "check.h"

#include <sys/counter.h>
#include <pcpu/counter9_sysctl.h>

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ipstat {
	uint64_t ips_total;
	uint64_t ips_badsum;
	uint64_t ips_delivered;
	uint64_t ips_forward;
	uint64_t ips_odropped;
};
#define IPSTAT_NCOUNTERS (sizeof(struct ipstat) / sizeof(uint64_t))
static counter_u64_t ipstat[IPSTAT_NCOUNTERS];
#define IPSTAT_ADD(name, val) \
	counter_u64_add(ipstat[offsetof(struct ipstat, name) / sizeof(uint64_t)], (val))
#define IPSTAT_INC(name) IPSTAT_ADD(name, 1)

/* sysctl.h's check that a counter is one 64-bit word per CPU. */
#define CTASSERT(x) _Static_assert(x, #x)
CTASSERT(sizeof(uint64_t) == sizeof(**(ipstat)));

static COUNTER_U64_DEFINE_EARLY(ip_early_static);
COUNTER_U64_DEFINE_EARLY(ip_early_global);

SYSCTL_COUNTER_U64_ARRAY(_net_inet_ip, OID_AUTO, stats, CTLFLAG_RW, ipstat,
			 IPSTAT_NCOUNTERS, "IP statistics (struct ipstat)");
SYSCTL_COUNTER_U64(_net_inet_ip, OID_AUTO, early, CTLFLAG_RD, &ip_early_global,
		   "Packets counted by an early counter");

/* Runs before the default-priority constructors that allocate the early
 * counters: its adds meet EARLY_COUNTER and must neither crash nor count. */
__attribute__((constructor(150))) static void before_sysinit(void)
{
	counter_u64_add(ip_early_static, 7);
	counter_u64_add(ip_early_global, 7);
}

enum { RATE_LIMIT = 200 };
static int stop;

static void ip_input(int bad)
{
	IPSTAT_INC(ips_total);
	if (bad) {
		IPSTAT_INC(ips_badsum);
		return;
	}
	counter_enter();
	counter_u64_add_protected(ipstat[2], 1);
	counter_u64_add_protected(ipstat[3], 1);
	counter_exit();
	counter_u64_add(ip_early_static, 1);
	counter_u64_add(ip_early_global, 1);
}

#define PACKETS 200000
static void *rx_thread(void *arg)
{
	for (int i = 0; i < PACKETS; i++)
		ip_input(i % 10 == 0);
	return arg;
}

/* The sysctl handler: fetch and zero, accumulate. */
static struct ipstat reported;
static void *sysctl_reader(void *arg)
{
	struct timespec pause = {0, 200000};

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		struct ipstat snap;
		uint64_t *r = (uint64_t *)&reported, *s = (uint64_t *)&snap;

		CHECK(COUNTER_ARRAY_FETCH_AND_ZERO(ipstat, &snap, IPSTAT_NCOUNTERS) == 0);
		for (size_t i = 0; i < IPSTAT_NCOUNTERS; i++)
			r[i] += s[i];
		nanosleep(&pause, NULL);
	}
	return arg;
}

static void test_ipstat(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int nrx = (int)(4 * (ncpu > 0 ? ncpu : 1));
	pthread_t t[64], reader;
	struct ipstat last;

	if (nrx > 64)
		nrx = 64;
	/* Before the first allocation: the constructor's adds were early. */
	CHECK(ip_early_static != EARLY_COUNTER && ip_early_global != EARLY_COUNTER);
	CHECK_EQ_U64(pcpu_counter9_early_adds(), 14);
	CHECK_EQ_U64(counter_u64_fetch(ip_early_static), 0);

	COUNTER_ARRAY_ALLOC(ipstat, IPSTAT_NCOUNTERS, M_WAITOK);
	for (size_t i = 0; i < IPSTAT_NCOUNTERS; i++)
		CHECK(ipstat[i] != NULL);
	CHECK(pthread_create(&reader, NULL, sysctl_reader, NULL) == 0);
	for (int i = 0; i < nrx; i++)
		CHECK(pthread_create(&t[i], NULL, rx_thread, NULL) == 0);
	for (int i = 0; i < nrx; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	CHECK(pthread_join(reader, NULL) == 0);
	COUNTER_ARRAY_COPY(ipstat, &last, IPSTAT_NCOUNTERS);
	/* Fetch-and-zero reported every add exactly once: the reports plus
	 * what is left equal what was added. */
	CHECK_EQ_U64(reported.ips_total + last.ips_total, (uint64_t)nrx * PACKETS);
	CHECK_EQ_U64(reported.ips_badsum + last.ips_badsum, (uint64_t)nrx * PACKETS / 10);
	CHECK_EQ_U64(reported.ips_delivered + last.ips_delivered, (uint64_t)nrx * PACKETS * 9 / 10);
	CHECK_EQ_U64(reported.ips_forward + last.ips_forward, (uint64_t)nrx * PACKETS * 9 / 10);
	CHECK_EQ_U64(counter_u64_fetch(ip_early_static), (uint64_t)nrx * PACKETS * 9 / 10);
	CHECK_EQ_U64(counter_u64_fetch(ip_early_global), (uint64_t)nrx * PACKETS * 9 / 10);
	CHECK_EQ_U64(pcpu_counter9_early_adds(), 14);
}

/* Admission log of the rate test: per thread, the period each admission
 * certainly belonged to (the period did not change during the call). */
#define MAX_ADMIT 4096
struct rate_log {
	int period[MAX_ADMIT];
	int n, uncertain;
	int seen[64]; /* period starts this thread saw */
	int nseen;
};
static struct counter_rate rate_old_style; /* zeroed, as older code has it */

static void *rate_thread(void *arg)
{
	struct rate_log *log = arg;
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		int before = __atomic_load_n(&rate_old_style.cr_ticks, __ATOMIC_RELAXED), after;
		int64_t r = counter_ratecheck(&rate_old_style, RATE_LIMIT);

		after = __atomic_load_n(&rate_old_style.cr_ticks, __ATOMIC_RELAXED);
		if (r == 0) {
			if (before == after && log->n < MAX_ADMIT)
				log->period[log->n++] = after;
			else
				log->uncertain++;
		}
		if (log->nseen == 0 || log->seen[log->nseen - 1] != after) {
			if (log->nseen < 64)
				log->seen[log->nseen++] = after;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 3300);
	return NULL;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* counter_ratecheck under 8x oversubscription: never more than the limit
 * admitted in one period, and periods start at least a second apart
 * (a preempted thread must not reopen the period another one opened). */
static void test_ratecheck_oversubscribed(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int n = (int)(8 * (ncpu > 0 ? ncpu : 1)), total = 0, uncertain = 0, np = 0;
	static struct rate_log logs[64];
	static int starts[64 * 64];
	pthread_t t[64];

	if (n > 64)
		n = 64;
	rate_old_style.cr_rate = counter_u64_alloc(M_WAITOK);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, rate_thread, &logs[i]) == 0);
	for (int i = 0; i < n; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	/* Period starts, in order: strictly increasing, >= 1 s apart. */
	for (int i = 0; i < n; i++)
		for (int k = 0; k < logs[i].nseen; k++)
			if (logs[i].seen[k] != 0)
				starts[np++] = logs[i].seen[k];
	qsort(starts, (size_t)np, sizeof(int), cmp_int);
	for (int k = 1; k < np; k++)
		CHECK(starts[k] == starts[k - 1] || starts[k] - starts[k - 1] >= PCPU_COUNTER9_HZ);
	/* Admissions per period. */
	for (int k = 0; k < np; k++) {
		int count = 0;

		if (k > 0 && starts[k] == starts[k - 1])
			continue;
		for (int i = 0; i < n; i++)
			for (int j = 0; j < logs[i].n; j++)
				count += logs[i].period[j] == starts[k];
		if (count > RATE_LIMIT)
			fprintf(stderr, "period at %d ms: %d admitted, limit %d\n", starts[k], count,
				RATE_LIMIT);
		CHECK(count <= RATE_LIMIT);
		total += count;
	}
	for (int i = 0; i < n; i++)
		uncertain += logs[i].uncertain;
	/* The test saw real periods: most admissions are attributable. */
	CHECK(total >= RATE_LIMIT * 2);
	CHECK(uncertain <= total / 10 + 10);
	counter_u64_free(rate_old_style.cr_rate);
}

/* The current man page's API: an opaque state with a period. */
static void test_rate_api(void)
{
	struct counter_rate *cr = counter_rate_alloc(M_WAITOK, 2);
	int admitted = 0;

	CHECK(cr != NULL);
	for (int i = 0; i < 150; i++)
		admitted += counter_ratecheck(cr, 100) == 0;
	CHECK(admitted == 100);
	CHECK_EQ_U64(counter_rate_get(cr), 150);
	counter_rate_free(cr);
	counter_rate_free(NULL);
	errno = 0;
	CHECK(counter_rate_alloc(M_NOWAIT, 0) == NULL && errno == EINVAL);
}

/* Older code's struct counter_rate, zero-initialised: the period's count is
 * reported once, by the first check of the next period, when it was over
 * the limit, and 0 otherwise. */
static void test_rate_periods(void)
{
	struct counter_rate cr;
	struct timespec next_second = {1, 100000000};

	memset(&cr, 0, sizeof(cr));
	cr.cr_rate = counter_u64_alloc(M_WAITOK);
	for (int i = 1; i <= 100; i++) /* the first call opens a period */
		CHECK(counter_ratecheck(&cr, 100) == 0);
	for (int i = 0; i < 50; i++) /* over the limit: -1 */
		CHECK(counter_ratecheck(&cr, 100) == -1);
	nanosleep(&next_second, NULL);
	CHECK(counter_ratecheck(&cr, 100) == 150);
	CHECK(counter_ratecheck(&cr, 100) == 0);
	nanosleep(&next_second, NULL);
	CHECK(counter_ratecheck(&cr, 100) == 0); /* under the limit: 0 */
	counter_u64_free(cr.cr_rate);
}

static void test_sysctl_and_zpcpu(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	counter_u64_t c;
	uint64_t sum = 0;
	char *text;
	size_t len;

	CHECK(reg);
	/* Every recorded SYSCTL_COUNTER_U64* is bound, the values moved. */
	COUNTER_ARRAY_ZERO(ipstat, IPSTAT_NCOUNTERS);
	IPSTAT_ADD(ips_odropped, 42);
	CHECK(pcpu_counter9_sysctl_attach(reg) == 2);
	CHECK(pcpu_counter9_sysctl_attach(reg) == 0); /* each once */
	IPSTAT_INC(ips_odropped);
	CHECK_EQ_U64(counter_u64_fetch(ipstat[4]), 43);
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	CHECK(strstr(text, "net_inet_ip_stats_total{field=\"4\"} 43\n") != NULL);
	CHECK(strstr(text, "# HELP net_inet_ip_early_total Packets counted by an early counter\n"));
	free(text);

	/* zpcpu_get_cpu() reads a slot's 8-byte word; a single thread's rseq
	 * adds all land in slot words. */
	c = counter_u64_alloc(M_WAITOK);
	counter_u64_add(c, 10);
	for (unsigned s = 0; s < pcpu_nslots(); s++)
		sum += *zpcpu_get_cpu(c, s);
	if (pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK) {
		CHECK_EQ_U64(sum, 10);
		/* zpcpu_replace(): the current slot's word, exchanged. */
		CHECK(*zpcpu_get(c) == 10 || *zpcpu_get(c) == 0); /* 0 if we moved */
	} else {
		CHECK_EQ_U64(sum, 0); /* fallback adds live in mirror words */
	}
	{
		uint64_t old = zpcpu_replace(c, 5);
		uint64_t after = counter_u64_fetch(c);

		CHECK(after == 10 - old + 5);
	}
	counter_u64_free(c);
	pcpu_registry_destroy(reg);
}

int main(void)
{
	test_ipstat();
	test_rate_api();
	test_rate_periods();
	test_ratecheck_oversubscribed();
	test_sysctl_and_zpcpu();
	printf("test_counter9_port: ok (mode %s)\n", pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
