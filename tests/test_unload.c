/*
 * dlclose() of a plugin whose code ran inline pcpu adds (its rseq
 * descriptors live in the plugin), under preemption: 3 threads per CPU run
 * the plugin's adds, each calls pcpu_prepare_unload() after its last one
 * and blocks; the main thread unloads the plugin and wakes them; they
 * sleep, wake and add again (through the program's own inline adds) many
 * times. With pcpu_prepare_unload() nothing happens; the counter is exact.
 *
 * --crash-without-prepare: first, in a forked child, the same without
 * pcpu_prepare_unload(): the kernel reads a blocked thread's rseq_cs when
 * it wakes, finds it unmapped and kills the process with SIGSEGV. The test
 * expects that death (only meaningful where rseq runs, in plain builds).
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <dlfcn.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 400
#define PER_ROUND 5000
#define AFTER 200

static pcpu_counter_t c;
static void (*plugin_add)(pcpu_counter_t, long);
static int (*plugin_add_inline)(pcpu_counter_t);
static int call_prepare = 1;
static int rseq_used;
/* Raw futex words, no mutex: nothing may wake a finished worker before the
 * unload, since a wake-up returns it to user space, where the kernel would
 * read (and clear) its rseq_cs while the plugin is still mapped. */
static int finished, unloaded;

static void *worker(void *arg)
{
	for (int r = 0; r < ROUNDS; r++)
		plugin_add(c, PER_ROUND);
	/* The last add committed inline in the plugin: rseq_cs points there. */
	if (rseq_used)
		while (!plugin_add_inline(c))
			;
	else
		plugin_add(c, 1);
	if (call_prepare)
		pcpu_prepare_unload();
	__atomic_add_fetch(&finished, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&unloaded, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &unloaded, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	/* The plugin is gone: block, wake, get preempted, add again. */
	for (int r = 0; r < AFTER; r++) {
		struct timespec ts = { 0, 100000 };

		nanosleep(&ts, NULL);
		pcpu_counter_add(c, 1);
	}
	return arg;
}

static void scenario(const char *plugin, int nthreads)
{
	pthread_t t[256];
	void *h;
	int i;

	CHECK((h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL)) != NULL);
	CHECK((*(void **)&plugin_add = dlsym(h, "plugin_add")) != NULL);
	CHECK((*(void **)&plugin_add_inline = dlsym(h, "plugin_add_inline")) != NULL);
	rseq_used = pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK;
	for (i = 0; i < nthreads; i++)
		CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
	while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < nthreads)
		usleep(1000);
	CHECK(dlclose(h) == 0);
	CHECK(dlopen(plugin, RTLD_NOW | RTLD_NOLOAD) == NULL); /* really unmapped */
	__atomic_store_n(&unloaded, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &unloaded, FUTEX_WAKE_PRIVATE, 1 << 30, NULL, NULL, 0);
	for (i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ_U64(pcpu_counter_fetch(c), (uint64_t)nthreads * (ROUNDS * PER_ROUND + 1 + AFTER));
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int nthreads = (int)(ncpu > 0 && ncpu < 64 ? 3 * ncpu : 8);
	const char *plugin;

	CHECK(argc >= 2);
	plugin = argv[1];
	CHECK((c = pcpu_counter_alloc()) != NULL);
	if (argc == 3 && strcmp(argv[2], "--crash-without-prepare") == 0) {
		int st;
		pid_t pid = fork(); /* before any thread: a clean child */

		CHECK(pid >= 0);
		if (pid == 0) {
			call_prepare = 0;
			scenario(plugin, nthreads);
			_exit(0);
		}
		CHECK(waitpid(pid, &st, 0) == pid);
		if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV))
			fprintf(stderr, "without pcpu_prepare_unload(): status 0x%x, not SIGSEGV\n", st);
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
		printf("without pcpu_prepare_unload(): killed by SIGSEGV, as expected\n");
	}
	scenario(plugin, nthreads);
	printf("%d threads (%s) added through a plugin, unloaded it, went on: no crash, exact\n",
	       nthreads, pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
