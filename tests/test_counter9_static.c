/*
 * counter(9)'s early counters in a program linked with the static library
 * (libpcpu.a): COUNTER_U64_DEFINE_EARLY's constructor allocates before
 * main(), and in a static link the program's constructors run before the
 * library's ones of the same priority (link order). pcpu's own load-time
 * constructors have priority 101 so that they run first; fork.c's did not,
 * its fork handlers were missing at the first allocation, which failed with
 * ENOMEM, and M_WAITOK retried it for ever: this program never reached
 * main() (ctest's timeout fails it). Found by tests/vm/vm_stress.c, which
 * the emulated machines run statically linked.
 */
#include <pcpu/pcpu.h>
#include <pcpu/counter9.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>

static COUNTER_U64_DEFINE_EARLY(early);

/* A plain constructor's allocation too (no retry: it must work at once). */
static pcpu_counter_t from_ctor;
__attribute__((constructor)) static void ctor(void)
{
	from_ctor = pcpu_counter_alloc();
}

int main(void)
{
	pid_t pid;
	int st;

	if (early == EARLY_COUNTER || !from_ctor) {
		printf("FAIL: allocation in a constructor: %p %p\n", (void *)early, (void *)from_ctor);
		return 1;
	}
	counter_u64_add(early, 5);
	pcpu_counter_add(from_ctor, 7);
	/* The fork handlers are there: a child counts in its own copy. */
	pid = fork();
	if (pid == 0) {
		counter_u64_add(early, 1);
		_exit(counter_u64_fetch(early) == 6 ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL: the fork child's copy\n");
		return 1;
	}
	if (counter_u64_fetch(early) != 5 || pcpu_counter_fetch(from_ctor) != 7 ||
	    pcpu_counter9_early_adds() != 0) {
		printf("FAIL: values %llu %llu, early adds %llu\n",
		       (unsigned long long)counter_u64_fetch(early),
		       (unsigned long long)pcpu_counter_fetch(from_ctor),
		       (unsigned long long)pcpu_counter9_early_adds());
		return 1;
	}
	printf("ok: early counter and constructor allocation in a static link\n");
	return 0;
}
