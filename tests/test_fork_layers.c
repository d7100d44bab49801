/*
 * fork() while other threads use every layer: a registry of 20,000 series
 * published as a segment, one thread taking snapshots in a loop, one adding
 * and removing series, one setting gauges, resetting counters, updating a
 * consistent group and creating histograms. The main thread forks
 * PCPU_TEST_FORKS times (default 1000); each child, bounded by a deadline,
 * registers a series in the inherited registry (this hung in 16 of 20
 * children when the registry's mutex was inherited held), updates, resets,
 * reads the group, and every 25th child also snapshots the whole registry,
 * writes its exposition and publishes a registry of its own. 0 hangs, 0
 * failures.
 */
#include "check.h"
#include "fork_gate.h"
#include <pcpu/pcpu.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SERIES 20000
#define CHILD_DEADLINE_MS 20000 /* a child that takes longer has hung */

static pcpu_registry_t *reg;
static pcpu_family_t *fam;
static pcpu_counter_t hits;
static pcpu_gauge_t level;
static pcpu_group_t *grp;
static volatile int stop;
static char dir[64];

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *snapshotter(void *arg)
{
	fork_gate_started();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct pcpu_snapshot *s;

		fork_gate_enter();
		s = pcpu_registry_snapshot(reg);
		CHECK(s != NULL);
		pcpu_snapshot_free(s);
		fork_gate_leave();
	}
	return arg;
}

static void *churner(void *arg)
{
	unsigned long i = 0;
	char v[32];
	const char *vals[1] = { v };

	fork_gate_started();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		snprintf(v, sizeof v, "churn%lu", i++ % 64);
		fork_gate_enter();
		CHECK(pcpu_family_counter(fam, vals) != NULL);
		CHECK(pcpu_family_remove(fam, vals) == 0);
		fork_gate_leave();
	}
	return arg;
}

static void *updater(void *arg)
{
	static const struct pcpu_histogram_layout lay = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR,
							  .precision_bits = 2, .max_value = 1000 };
	const int64_t d[2] = { 1, 2 };
	unsigned long i = 0;

	pcpu_counter_add(hits, 0); /* the thread's lazy set-up, before any fork */
	fork_gate_started();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		pcpu_counter_add(hits, 1);
		CHECK(pcpu_gauge_set(level, (int64_t)i) == 0);
		(void)pcpu_counter_fetch_and_zero(hits);
		pcpu_group_add(grp, 0, d);
		if (i++ % 16 == 0) {
			pcpu_histogram_t *h;

			fork_gate_enter();
			h = pcpu_histogram_create(&lay);
			CHECK(h != NULL);
			pcpu_histogram_record(h, 3);
			pcpu_histogram_destroy(h);
			fork_gate_leave();
		}
	}
	return arg;
}

static int child(int full)
{
	pcpu_counter_t y = pcpu_registry_counter(reg, "y", "child");
	int64_t out[2], before[2];

	CHECK(y != NULL);
	pcpu_counter_add(y, 7);
	CHECK_EQ_U64(pcpu_counter_fetch(y), 7);
	CHECK(pcpu_gauge_set(level, -3) == 0 && pcpu_gauge_read(level) == -3);
	(void)pcpu_counter_fetch_and_zero(hits);
	/* No lane is left held (the read would time out); an update of the
	 * parent concurrent with fork() may be partly in the child's copy, so
	 * only the child's own update is checked whole. */
	CHECK(pcpu_group_read_timeout(grp, 0, before, 100000000) == 0);
	pcpu_group_add(grp, 0, (const int64_t[2]){ 1, 2 });
	CHECK(pcpu_group_read_timeout(grp, 0, out, 100000000) == 0);
	CHECK(out[0] == before[0] + 1 && out[1] == before[1] + 2);
	if (full) {
		struct pcpu_segment_options o = { .dir = dir };
		struct pcpu_snapshot *s = pcpu_registry_snapshot(reg);
		pcpu_registry_t *mine = pcpu_registry_create();
		pcpu_segment_t *seg;
		char *text;
		size_t len;

		CHECK(s != NULL);
		pcpu_snapshot_free(s);
		CHECK(pcpu_registry_write(reg, PCPU_FORMAT_OPENMETRICS, &text, &len) == 0);
		CHECK(len > SERIES * 10 && strstr(text, "y_total 7") != NULL);
		free(text);
		CHECK(mine != NULL);
		CHECK((seg = pcpu_segment_publish(mine, "forkchild", &o)) != NULL);
		pcpu_counter_add(pcpu_registry_counter(mine, "z", NULL), 1);
		pcpu_registry_destroy(mine); /* removes the file */
	}
	return 0;
}

int main(void)
{
	const char *const lname[1] = { "id" };
	struct pcpu_family_desc fd = { .name = "series", .type = PCPU_METRIC_COUNTER,
				       .nlabels = 1, .label_names = lname };
	struct pcpu_segment_options o;
	const char *env = getenv("PCPU_TEST_FORKS");
	int forks = env ? atoi(env) : 1000, hangs = 0, failed = 0, i;
	pthread_t th[3];
	pcpu_segment_t *seg;
	uint64_t t0 = now_ms();

	snprintf(dir, sizeof dir, "/dev/shm/pcpu-fork-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	memset(&o, 0, sizeof o);
	o.dir = dir;
	CHECK((reg = pcpu_registry_create()) != NULL);
	CHECK((seg = pcpu_segment_publish(reg, "forkparent", &o)) != NULL);
	CHECK((fam = pcpu_registry_family(reg, &fd)) != NULL);
	for (i = 0; i < SERIES; i++) {
		char v[16];
		const char *vals[1] = { v };

		snprintf(v, sizeof v, "%d", i);
		pcpu_counter_add(pcpu_family_counter(fam, vals), 1);
	}
	CHECK((hits = pcpu_registry_counter(reg, "hits", NULL)) != NULL);
	CHECK((level = pcpu_registry_gauge(reg, "level", NULL)) != NULL);
	CHECK((grp = pcpu_group_alloc(2, 1)) != NULL);
	CHECK(pthread_create(&th[0], NULL, snapshotter, NULL) == 0);
	CHECK(pthread_create(&th[1], NULL, churner, NULL) == 0);
	CHECK(pthread_create(&th[2], NULL, updater, NULL) == 0);
	fork_gate_await(3);

	for (i = 0; i < forks; i++) {
		uint64_t deadline;
		int st = 0;
		pid_t pid, w;

		usleep(200); /* let the threads get into their locks */
		pid = fork_gated();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(child(i % 25 == 0));
		deadline = now_ms() + CHILD_DEADLINE_MS;
		while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
			usleep(500);
		if (w == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			hangs++;
			fprintf(stderr, "child %d hung (killed after %d ms)\n", i, CHILD_DEADLINE_MS);
		} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			failed++;
			fprintf(stderr, "child %d failed (status 0x%x)\n", i, st);
		}
		if (hangs + failed >= 3)
			break;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	printf("%d forks in %.1f s: %d hangs, %d failures\n", forks, (now_ms() - t0) / 1000.0,
	       hangs, failed);
	CHECK(hangs == 0 && failed == 0);
	/* The parent's registry never saw the children's "y". */
	CHECK(pcpu_registry_find(reg, "y") == NULL);
	pcpu_group_free(grp);
	pcpu_registry_destroy(reg);
	rmdir(dir);
	return 0;
}
