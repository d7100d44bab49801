/*
 * counter(9) compatibility, used the way FreeBSD kernel code uses it: a
 * statistics struct of counter_u64_t (like struct ipstat with VNET_PCPUSTAT),
 * COUNTER_ARRAY_* over it, counter_enter/add_protected/exit, an early
 * counter, M_NOWAIT/M_WAITOK allocation, and counter_ratecheck().
 */
#include "check.h"
#include <pcpu/counter9.h>
#include <pthread.h>
#include <time.h>

/* The kernel's pattern: a struct of uint64_t for export, and the same
 * layout as counters internally. */
struct ipstat {
	uint64_t ips_total;
	uint64_t ips_badsum;
	uint64_t ips_delivered;
	uint64_t ips_forward;
};
#define IPSTAT_NCOUNTERS (sizeof(struct ipstat) / sizeof(uint64_t))
static counter_u64_t ipstat[IPSTAT_NCOUNTERS];
#define IPSTAT_ADD(name, val) \
	counter_u64_add(ipstat[offsetof(struct ipstat, name) / sizeof(uint64_t)], (val))
#define IPSTAT_INC(name) IPSTAT_ADD(name, 1)

COUNTER_U64_DEFINE_EARLY(early_packets);

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
}

static void *rx_thread(void *arg)
{
	for (int i = 0; i < 100000; i++) {
		ip_input(i % 10 == 0);
		counter_u64_add(early_packets, 1);
	}
	return arg;
}

static void test_ipstat(void)
{
	pthread_t t[4];
	struct ipstat snap;

	COUNTER_ARRAY_ALLOC(ipstat, IPSTAT_NCOUNTERS, M_WAITOK);
	for (size_t i = 0; i < IPSTAT_NCOUNTERS; i++)
		CHECK(ipstat[i] != NULL);
	CHECK(early_packets != NULL); /* allocated before main */
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, rx_thread, NULL) == 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	COUNTER_ARRAY_COPY(ipstat, &snap, IPSTAT_NCOUNTERS);
	CHECK_EQ_U64(snap.ips_total, 400000);
	CHECK_EQ_U64(snap.ips_badsum, 40000);
	CHECK_EQ_U64(snap.ips_delivered, 360000);
	CHECK_EQ_U64(snap.ips_forward, 360000);
	CHECK_EQ_U64(counter_u64_fetch(early_packets), 400000);
	COUNTER_ARRAY_ZERO(ipstat, IPSTAT_NCOUNTERS);
	COUNTER_ARRAY_COPY(ipstat, &snap, IPSTAT_NCOUNTERS);
	CHECK_EQ_U64(snap.ips_total + snap.ips_badsum + snap.ips_delivered + snap.ips_forward, 0);
	COUNTER_ARRAY_FREE(ipstat, IPSTAT_NCOUNTERS);

	counter_u64_t c = counter_u64_alloc(M_NOWAIT | M_ZERO);
	CHECK(c != NULL);
	counter_u64_add(c, -5);
	counter_u64_add(c, 10);
	CHECK_EQ_U64(counter_u64_fetch(c), 5);
	counter_u64_zero(c);
	CHECK_EQ_U64(counter_u64_fetch(c), 0);
	counter_u64_free(c);
}

static void sleep_to_next_second(struct counter_rate *cr)
{
	struct timespec ts = {1, 100000000}; /* > hz ticks later */
	(void)cr;
	nanosleep(&ts, NULL);
}

static void test_ratecheck(void)
{
	struct counter_rate cr = {0};
	int64_t r;

	cr.cr_rate = counter_u64_alloc(M_WAITOK);
	/* First call opens a second (cr_ticks 0 is long ago). */
	for (int i = 1; i <= 100; i++)
		CHECK(counter_ratecheck(&cr, 100) == 0);
	for (int i = 0; i < 50; i++) /* over the limit: -1 */
		CHECK(counter_ratecheck(&cr, 100) == -1);
	sleep_to_next_second(&cr);
	/* The next second starts: the previous one's 150 events are reported. */
	r = counter_ratecheck(&cr, 100);
	CHECK(r == 150);
	CHECK(counter_ratecheck(&cr, 100) == 0);
	/* A second under the limit reports 0 at its end, not a count. */
	sleep_to_next_second(&cr);
	CHECK(counter_ratecheck(&cr, 100) == 0);
	counter_u64_free(cr.cr_rate);
}

int main(void)
{
	test_ipstat();
	test_ratecheck();
	printf("test_counter9: ok\n");
	return 0;
}
