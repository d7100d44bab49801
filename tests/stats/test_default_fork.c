/*
 * The first pcpu_registry_default() of a process, racing fork(): neither
 * may wait for the other for good.
 *
 * The first call creates the default registry, whose zone registers pcpu's
 * fork handlers (fork.c's lock); fork()'s prepare takes that lock, then the
 * registries' locks. pcpu_registry_default() once held its own lock while
 * creating the registry: the opposite order, a deadlock when the two met.
 * ThreadSanitizer reports such an order inversion whenever both orders are
 * merely taken, so its build takes them one after the other: the first
 * call, finished, then the forks (it fails deterministically on the old
 * order). The plain build runs the race itself, many times in fresh child
 * processes, and a deadlock is caught by the alarm.
 *
 * The sanitizer builds must not race: their runtimes' allocators (GCC 12's
 * TSan and ASan) take no lock around fork(), so a child forked while the
 * other thread was inside calloc() hangs in its own first calloc() (seen in
 * gdb: the child blocked in SizeClassAllocator64::GetFromAllocator, called
 * from pcpu_registry_create(); about one TSan run of this test in 20 under
 * load). glibc's malloc locks its arenas around fork().
 */
#include "../check.h"
#include <pcpu/pcpu.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUNS 40

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define RACE 0 /* see the file comment */
#else
#define RACE 1
#endif

static void *first_default(void *arg)
{
	(void)arg;
	CHECK(pcpu_registry_default() != NULL);
	return NULL;
}

/* In a process that never used pcpu: one thread makes the default
 * registry while this one forks. */
static int one_run(void)
{
	pthread_t t;
	pid_t pid;
	int st;

	alarm(20); /* a deadlock ends the run with SIGALRM */
	CHECK(pthread_create(&t, NULL, first_default, NULL) == 0);
	if (!RACE)
		CHECK(pthread_join(t, NULL) == 0);
	for (int i = 0; i < 20; i++) {
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(pcpu_registry_default() ? 0 : 1); /* the child works too */
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	if (RACE)
		CHECK(pthread_join(t, NULL) == 0);
	return 0;
}

int main(void)
{
	/* Each run needs a process where pcpu has not registered anything
	 * yet: a child of this one, which has not touched pcpu. */
	for (int r = 0; r < RUNS; r++) {
		pid_t pid = fork();
		int st;

		CHECK(pid >= 0);
		if (pid == 0)
			_exit(one_run());
		CHECK(waitpid(pid, &st, 0) == pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "run %d: %s %d\n", r,
				WIFSIGNALED(st) ? "killed by signal" : "exit status",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			return 1;
		}
	}
	printf("%d runs: first pcpu_registry_default() %s 20 forks each, no deadlock\n", RUNS,
	       RACE ? "raced" : "then");
	return 0;
}
