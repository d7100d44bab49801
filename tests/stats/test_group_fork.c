/*
 * fork() while threads update a consistent group: the child's read is
 * whole or refused, never torn and reported as consistent (issue 23.1).
 *
 * Adder threads (more than CPUs) add {1, v, 2v} with v random to group 0 of
 * a three-member group; the main thread forks again and again, and each
 * child reads the group once. group.h promises all-or-nothing: m2 == 2 * m1
 * in every successful read. Then the child adds {1, 5, 10} 1000 times and
 * reads again: its own adds must be there exactly, on top of what it read
 * first, and the group still consistent. The child reports through its exit
 * status; the parent counts and fails on any torn, inexact or failed read.
 *
 * Two places for the group: a stand-alone group (private anonymous memory:
 * the kernel's copy-on-write gives the child an instant's memory, where a
 * lane an adder held at fork() is odd) and a group family of a published
 * registry (a shared file: the zone copies it word by word in fork()'s
 * prepare handler while the adders run, so a lane can also be copied half
 * updated with an even sequence count). ctest runs it in every rseq mode.
 *
 * Usage: test_group_fork [--expect-mode glibc|own|fallback] [--forks N]
 */
#include "../check.h"
#include "../fork_gate.h"
#include <pcpu/pcpu.h>
#include <pcpu/segment.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ADDERS 8
#define CHILD_ADDS 1000

enum child_status { CHILD_OK = 0, CHILD_TORN = 10, CHILD_FAILED = 11, CHILD_INEXACT = 12 };

static pcpu_group_t *grp;
static int stop;

static void *adder(void *arg)
{
	uint64_t rnd = 0x9e3779b97f4a7c15ull ^ (uintptr_t)arg;

	pcpu_group_add(grp, 0, (const int64_t[3]){ 0, 0, 0 }); /* lazy set-up */
	fork_gate_started();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int64_t v = (int64_t)(check_xorshift(&rnd) % 1000) + 1;
		int k;

		for (k = 0; k < 64; k++)
			pcpu_group_add(grp, 0, (const int64_t[3]){ 1, v, 2 * v });
	}
	fork_gate_linger();
	return NULL;
}

static int child(void)
{
	int64_t first[3], after[3];
	int k;

	if (pcpu_group_read(grp, 0, first) != 0)
		return CHILD_FAILED;
	if (first[2] != 2 * first[1] || first[1] < first[0])
		return CHILD_TORN;
	for (k = 0; k < CHILD_ADDS; k++)
		pcpu_group_add(grp, 0, (const int64_t[3]){ 1, 5, 10 });
	if (pcpu_group_read(grp, 0, after) != 0)
		return CHILD_FAILED;
	if (after[0] != first[0] + CHILD_ADDS || after[1] != first[1] + 5 * CHILD_ADDS ||
	    after[2] != first[2] + 10 * CHILD_ADDS)
		return CHILD_INEXACT;
	return CHILD_OK;
}

/* Forks `forks` children while the adders run; returns the failures. */
static int run(const char *what, int forks)
{
	pthread_t th[ADDERS];
	int counts[4] = { 0, 0, 0, 0 }, i, bad;
	int64_t total[3];

	stop = 0;
	for (i = 0; i < ADDERS; i++)
		CHECK(pthread_create(&th[i], NULL, adder, (void *)(uintptr_t)(i + 1)) == 0);
	fork_gate_await(ADDERS);
	for (i = 0; i < forks; i++) {
		int st;
		pid_t pid;

		/* Let the adders run between forks (on 2 CPUs the forking
		 * thread would otherwise fork again at once). */
		if (i % 4 == 0)
			sched_yield();
		pid = fork_gated();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(child());
		CHECK(waitpid(pid, &st, 0) == pid);
		CHECK(WIFEXITED(st));
		switch (WEXITSTATUS(st)) {
		case CHILD_OK: counts[0]++; break;
		case CHILD_TORN: counts[1]++; break;
		case CHILD_FAILED: counts[2]++; break;
		case CHILD_INEXACT: counts[3]++; break;
		default: CHECK(!"unexpected child status");
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	fork_gate_open_all();
	for (i = 0; i < ADDERS; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
	fork_gate_reset();
	/* The parent's own group is exact and consistent. */
	CHECK(pcpu_group_read(grp, 0, total) == 0);
	CHECK(total[2] == 2 * total[1]);
	bad = counts[1] + counts[2] + counts[3];
	printf("%s: %d forks: %d whole, %d torn, %d read failed, %d inexact after\n", what,
	       forks, counts[0], counts[1], counts[2], counts[3]);
	return bad;
}

int main(int argc, char **argv)
{
	static const char *const label_names[] = { "flow" }, *const flow[] = { "a" };
	const char *expect_mode = NULL;
	char dir[] = "/tmp/pcpu-gfork-XXXXXX";
	struct pcpu_family_desc m[3];
	pcpu_registry_t *reg;
	pcpu_group_family_t *gf;
	int forks = 250, bad = 0, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-mode") && i + 1 < argc)
			expect_mode = argv[++i];
		else if (!strcmp(argv[i], "--forks") && i + 1 < argc)
			forks = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--expect-mode glibc|own|fallback] [--forks N]\n",
				argv[0]);
			return 2;
		}
	}
	CHECK((grp = pcpu_group_alloc(3, 1)) != NULL);
	if (expect_mode && strcmp(pcpu_rseq_mode_name(pcpu_rseq_mode()), expect_mode) != 0) {
		fprintf(stderr, "mode is %s, expected %s\n", pcpu_rseq_mode_name(pcpu_rseq_mode()),
			expect_mode);
		return 1;
	}
	bad += run("stand-alone group", forks);
	pcpu_group_free(grp);

	/* A group family of a published registry: its lanes are in the
	 * segment's shared file. */
	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	CHECK((reg = pcpu_registry_create()) != NULL);
	CHECK(pcpu_segment_publish(reg, "gfork", NULL) != NULL);
	for (i = 0; i < 3; i++) {
		static const char *const names[] = { "gf_packets_total", "gf_bytes_total",
						     "gf_twice_total" };

		memset(&m[i], 0, sizeof m[i]);
		m[i].name = names[i];
		m[i].help = "Group member.";
		m[i].type = PCPU_METRIC_COUNTER;
		m[i].nlabels = 1;
		m[i].label_names = label_names;
	}
	CHECK((gf = pcpu_registry_group(reg, m, 3)) != NULL);
	CHECK((grp = pcpu_group_family_series(gf, flow)) != NULL);
	bad += run("group family of a published registry", forks);
	pcpu_registry_destroy(reg);
	rmdir(dir);
	CHECK(bad == 0);
	return 0;
}
