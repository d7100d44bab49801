/*
 * A published segment across fork(): the child leaves it.
 *
 * Before the fix the segment's counters were MAP_SHARED between parent and
 * child, and a parent thread and a child thread holding the same mm_cid
 * committed unlocked adds to one word (72,040,636 of 80,000,000 counted);
 * per-process reset locks let resets of the shared counter return negative
 * values. Here the parent publishes a registry, adds a known amount with no
 * other thread running, forks; then parent and child each add ADDS (default
 * 20M, PCPU_TEST_ADDS) from 2 threads to the same registry counter while a
 * third thread of each resets another counter the adders also add to.
 * Checked in each process: its counter is exactly inherited + its own adds;
 * no reset returned a negative value; resets + final value == inherited +
 * own adds. The parent also reads its segment as pcpustat does: the
 * parent's values, untouched by the child. Run in every rseq mode (the
 * test's --expect-mode says which one this process must be in).
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ADDERS 2
#define INHERITED 1234567u
#define INHERITED_R 7654321u
#define R_EVERY 8 /* adders add to the reset counter every 8th iteration */

static pcpu_counter_t c, r;
static uint64_t adds_per_thread;
static volatile int adders_done;
static int negative_resets;
static uint64_t reset_total;

static void *adder(void *arg)
{
	for (uint64_t i = 0; i < adds_per_thread; i++) {
		pcpu_counter_add(c, 1);
		if (i % R_EVERY == 0)
			pcpu_counter_add(r, 1);
	}
	return arg;
}

static void *resetter(void *arg)
{
	while (!__atomic_load_n(&adders_done, __ATOMIC_ACQUIRE)) {
		uint64_t v = pcpu_counter_fetch_and_zero(r);

		if ((int64_t)v < 0)
			negative_resets++;
		reset_total += v;
	}
	return arg;
}

/* Adds from ADDERS threads while one resets; checks this process's values. */
static void run_and_check(const char *who)
{
	pthread_t t[ADDERS], rt;
	uint64_t own = ADDERS * adds_per_thread;
	uint64_t own_r = ADDERS * ((adds_per_thread + R_EVERY - 1) / R_EVERY);
	int i;

	CHECK(pthread_create(&rt, NULL, resetter, NULL) == 0);
	for (i = 0; i < ADDERS; i++)
		CHECK(pthread_create(&t[i], NULL, adder, NULL) == 0);
	for (i = 0; i < ADDERS; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&adders_done, 1, __ATOMIC_RELEASE);
	pthread_join(rt, NULL);
	if (negative_resets || pcpu_counter_fetch(c) != INHERITED + own ||
	    reset_total + pcpu_counter_fetch(r) != INHERITED_R + own_r)
		fprintf(stderr, "%s: negative resets %d\n", who, negative_resets);
	CHECK(negative_resets == 0);
	CHECK_EQ_U64(pcpu_counter_fetch(c), INHERITED + own);
	CHECK_EQ_U64(reset_total + pcpu_counter_fetch(r), INHERITED_R + own_r);
}

static uint64_t segment_value(pcpu_reader_t *rd, const char *family)
{
	struct pcpu_reader_snapshot *s;
	uint64_t v = UINT64_MAX;
	size_t i;

	CHECK(pcpu_reader_snapshot(rd, 0, &s) == 0);
	for (i = 0; i < s->snapshot.nfamilies; i++)
		if (strcmp(s->snapshot.families[i].name, family) == 0)
			v = s->snapshot.families[i].series[0].value.counter;
	pcpu_reader_snapshot_free(s);
	return v;
}

int main(int argc, char **argv)
{
	const char *env = getenv("PCPU_TEST_ADDS");
	struct pcpu_segment_options wo;
	struct pcpu_reader_options ro;
	char dir[64] = "/dev/shm/pcpu-forkseg-XXXXXX";
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_reader_t *rd;
	int st;
	pid_t pid;

	adds_per_thread = (env ? strtoull(env, NULL, 10) : 20000000ull) / ADDERS;
	CHECK(mkdtemp(dir) != NULL);
	memset(&wo, 0, sizeof wo);
	memset(&ro, 0, sizeof ro);
	wo.dir = ro.dir = dir;
	CHECK((reg = pcpu_registry_create()) != NULL);
	CHECK((seg = pcpu_segment_publish(reg, "forkseg", &wo)) != NULL);
	CHECK((c = pcpu_registry_counter(reg, "shared", NULL)) != NULL);
	CHECK((r = pcpu_registry_counter(reg, "reset", NULL)) != NULL);
	if (argc == 3 && strcmp(argv[1], "--expect-mode") == 0)
		CHECK(strcmp(pcpu_rseq_mode_name(pcpu_rseq_mode()), argv[2]) == 0);
	/* The inherited part: no add is concurrent with fork(). */
	pcpu_counter_add(c, INHERITED);
	pcpu_counter_add(r, INHERITED_R);

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK(pcpu_segment_path(seg) == NULL); /* left the segment */
		if (argc == 3)
			CHECK(strcmp(pcpu_rseq_mode_name(pcpu_rseq_mode()), argv[2]) == 0);
		run_and_check("child");
		_exit(0);
	}
	run_and_check("parent");
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* What pcpustat sees: the parent's values only. */
	CHECK((rd = pcpu_reader_open("forkseg", &ro)) != NULL);
	CHECK_EQ_U64(segment_value(rd, "shared"), INHERITED + ADDERS * adds_per_thread);
	CHECK_EQ_U64(segment_value(rd, "reset"), pcpu_counter_fetch(r));
	pcpu_reader_close(rd);
	printf("parent and child each added %llu to a published counter after fork(): "
	       "both exact (%s mode), no negative reset\n",
	       (unsigned long long)(ADDERS * adds_per_thread),
	       pcpu_rseq_mode_name(pcpu_rseq_mode()));
	pcpu_registry_destroy(reg);
	rmdir(dir);
	return 0;
}
