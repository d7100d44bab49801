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
 *    exceed the limit in any period, with 8x more threads than CPUs;
 *  - SYSCTL_COUNTER_U64(_ARRAY) at file scope, attached to a registry and
 *    exposed;
 *  - zpcpu_get_cpu()/zpcpu_get()/zpcpu_replace() on a counter;
 *  - sys/netinet/ip_id.c's per-CPU IP id: CPU_FOREACH() (<sys/smp.h>) seeds
 *    every slot's word through zpcpu_get_cpu(), packets take ids from
 *    zpcpu_get() after counter_u64_add(), and the walk's sum is the fetch;
 *  - ported code's own #defines of kernel names (ticks, hz, curcpu, ...)
 *    before the includes: test_counter9_port_names.c.
 * The mode (glibc, own registration, fallback) comes from the environment,
 * as for test_stress (tests/CMakeLists.txt runs all three).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep under -std=c11 */
#include "check.h"
#include "present_cpus.h"

#include <sys/counter.h>
#include <sys/smp.h>
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

/* sys/netinet/ip_id.c's non-random IP ids, ported: a per-CPU counter whose
 * every CPU's word is seeded at SYSINIT, one packet's id taken from the
 * current CPU's word after an add. */
static counter_u64_t ip_id;
static uint64_t ip_id_seed(int cpu)
{
	return ((uint64_t)(cpu + 1) << 32) | (0x9e37u * (unsigned)(cpu + 1));
}

static void ipid_sysinit(void)
{
	int i;

	ip_id = counter_u64_alloc(M_WAITOK);
	CPU_FOREACH(i)
		*zpcpu_get_cpu(ip_id, i) = ip_id_seed(i); /* arc4rand() there */
}

static uint16_t ip_fillid(void)
{
	counter_u64_add(ip_id, 1);
	return (uint16_t)(*(uint64_t *)zpcpu_get(ip_id) & 0xffff);
}

#define IDS_PER_THREAD 100000
static void *ip_output_thread(void *arg)
{
	uint16_t first = ip_fillid();
	int same = 0;

	for (int i = 1; i < IDS_PER_THREAD; i++)
		same += ip_fillid() == first;
	/* The ids advance with the slot's word (in fallback mode the adds go
	 * to mirror words, and the ids stay the seeds'). */
	CHECK(same < IDS_PER_THREAD / 100 || pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK);
	return arg;
}

static void test_ip_id_cpu_foreach(void)
{
	/* The CPU slots: the owned slots after them are not CPUs. */
	unsigned nslots = pcpu_nslots() - pcpu_worker_max(), walked = 0, present = 0;
	uint64_t seeds = 0, sum = 0, words = 0;
	static unsigned char in_walk[4096];
	unsigned u;
	int i, next;
	pthread_t t[4];

	/* FreeBSD's definitions, on slots: ids 0 .. mp_maxid, those no
	 * thread can write absent (slot 0, the present CPUs and mm_cid's
	 * range are not: tests/present_cpus.h; with PCPU_NSLOTS=64, ctest
	 * counter9_port_absent, 62 of them are). */
	CHECK(nslots <= sizeof in_walk);
	(void)mark_walked_cpu_slots(in_walk, nslots);
	for (u = 0; u < nslots; u++)
		present += in_walk[u];
	CHECK(mp_maxid == nslots - 1);
	CHECK(mp_ncpus == (int)present);
	CHECK(CPU_FIRST() == 0);
	CHECK(!CPU_ABSENT(0) && CPU_ABSENT(mp_maxid + 1));
	for (u = 0; u < nslots; u++)
		CHECK(CPU_ABSENT(u) == !in_walk[u]);
	next = CPU_FIRST();
	for (u = 0; u < nslots; u++) {
		if (!in_walk[u])
			continue;
		CHECK(next == (int)u);
		next = CPU_NEXT(next);
	}
	CHECK(next == 0); /* wraps after the last */
	CPU_FOREACH(u) { /* an unsigned id, as some code declares it */
		CHECK(in_walk[u]);
		walked++;
	}
	CHECK(walked == present);

	/* Every slot that is not absent seeded (an absent one's word, which
	 * no fetch reads, is not written): read back per slot, independently
	 * of the walk. */
	ipid_sysinit();
	for (u = 0; u < nslots; u++) {
		uint64_t want = in_walk[u] ? ip_id_seed((int)u) : 0;

		CHECK_EQ_U64(pcpu_counter_fetch_slot((pcpu_counter_t)(void *)ip_id, u), want);
		CHECK_EQ_U64(*(uint64_t *)pcpu_slot_ptr(ip_id, u), want);
		seeds += want;
	}
	CHECK_EQ_U64(counter_u64_fetch(ip_id), seeds);

	for (i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, ip_output_thread, NULL) == 0);
	for (i = 0; i < 4; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CPU_FOREACH(i)
		sum += *zpcpu_get_cpu(ip_id, i);
	for (u = 0; u < nslots; u++)
		words += *(uint64_t *)pcpu_slot_ptr(ip_id, u);
	CHECK_EQ_U64(sum, words); /* the walk read every slot */
	CHECK_EQ_U64(counter_u64_fetch(ip_id), seeds + 4ull * IDS_PER_THREAD);
	if (pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK)
		CHECK_EQ_U64(sum, counter_u64_fetch(ip_id));
	else /* the adds are in the mirror words (pcpu/counter9.h) */
		CHECK_EQ_U64(sum, seeds);
	counter_u64_free(ip_id);
}

int counter9_port_names(void); /* test_counter9_port_names.c */

/* test_counter9_port [counters | rate]: the counters' part, the rate
 * limiter's part (wall-clock periods of a second: 5.5 s, so ctest runs it
 * as a test of its own, labelled stress), or, with no argument, both. */
int main(int argc, char **argv)
{
	const char *part = argc > 1 ? argv[1] : "all";
	int counters = strcmp(part, "counters") == 0, rate = strcmp(part, "rate") == 0;

	if (strcmp(part, "all") == 0)
		counters = rate = 1;
	if (argc > 2 || !(counters || rate)) {
		fprintf(stderr, "usage: test_counter9_port [counters | rate]\n");
		return 2;
	}
	if (counters)
		test_ipstat();
	if (rate) {
		test_rate_api();
		test_rate_periods();
		test_ratecheck_oversubscribed();
	}
	if (counters) {
		test_sysctl_and_zpcpu();
		test_ip_id_cpu_foreach();
		CHECK(counter9_port_names() == 1);
	}
	printf("test_counter9_port %s: ok (mode %s)\n", part,
	       pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
