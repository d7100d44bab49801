/*
 * The first pcpu_registry_default() of a process, racing fork(): neither
 * may wait for the other for good.
 *
 * The first call creates the default registry, whose zone registers pcpu's
 * fork handlers (fork.c's lock); fork()'s prepare takes that lock, then the
 * registries' locks. pcpu_registry_default() once held its own lock while
 * creating the registry: the opposite order, a deadlock when the two met.
 * The plain build runs the race itself, many times in fresh child
 * processes, and a deadlock is caught by the alarm. The sanitizer builds
 * keep the first call and the forks apart (fork_gate.h: their allocators
 * hang a child forked mid-calloc), but ThreadSanitizer reports an order
 * inversion whenever both orders are merely taken: its build fails
 * deterministically on the old order.
 */
#include "../check.h"
#include "../fork_gate.h"
#include <pcpu/pcpu.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUNS 40

static void *first_default(void *arg)
{
	(void)arg;
	fork_gate_started();
	fork_gate_enter();
	CHECK(pcpu_registry_default() != NULL);
	fork_gate_leave();
	fork_gate_linger();
	return NULL;
}

/* In a process that never used pcpu: one thread makes the default
 * registry while this one forks. */
static int one_run(void)
{
	pthread_t t;
	pid_t pid;
	int st;

	alarm(300); /* a deadlock ends the run with SIGALRM (only a deadlock takes 5 minutes) */
	CHECK(pthread_create(&t, NULL, first_default, NULL) == 0);
	fork_gate_await(1);
	for (int i = 0; i < 20; i++) {
		pid = fork_gated();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(pcpu_registry_default() ? 0 : 1); /* the child works too */
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	fork_gate_open_all();
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
	printf("%d runs: first pcpu_registry_default() raced 20 forks each%s, no deadlock\n",
	       RUNS, FORK_GATE ? " (gated: fork_gate.h)" : "");
	return 0;
}
