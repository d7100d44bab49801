/*
 * pcpu loaded late, in pcpu's own rseq mode (GLIBC_TUNABLES=
 * glibc.pthread.rseq=0): the program makes 40 thread-specific keys, then
 * dlopen()s libpcpu, so pcpu's thread-exit key is above glibc's first 32,
 * and setting it at a thread's registration may allocate (src/core/rseq.c,
 * exit_key_signal_safe). Then an update, which may run in a signal handler,
 * must not register the thread:
 *  - a thread that only adds runs in the fallback mode;
 *  - a thread whose first add is in its signal handler: the same;
 *  - a thread that calls pcpu_thread_init() is registered (--expect-init:
 *    own, or fallback in a ThreadSanitizer build);
 * and every add counts. The program does not link pcpu: it calls the stable
 * tier through dlsym().
 *
 * Usage: test_late_key LIBPCPU.so --expect-init own|fallback
 */
#include "check.h"
#include <pcpu/rseq.h> /* the enum only: nothing here links pcpu */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#define NKEYS 40
#define ADDS 100000

static void *(*p_alloc)(void);
static void (*p_add)(void *, int64_t);
static uint64_t (*p_fetch)(void *);
static int (*p_mode)(void);
static int (*p_init)(void);
static const char *(*p_name)(int);

static void *counter;
static int init_mode;        /* what pcpu_thread_init() returned in the init thread */
static int modes[3];         /* each thread's pcpu_rseq_mode() after its adds */
static volatile int handled; /* the handler thread's handler ran */

static void handler(int sig)
{
	(void)sig;
	p_add(counter, 1); /* the thread's first update */
	handled = 1;
}

static void *adder(void *arg)
{
	long kind = (long)arg; /* 0 plain, 1 first add in a handler, 2 init first */

	if (kind == 1) {
		CHECK(pthread_kill(pthread_self(), SIGUSR1) == 0);
		CHECK(handled);
	}
	if (kind == 2)
		init_mode = p_init();
	for (long i = 0; i < ADDS - (kind == 1); i++)
		p_add(counter, 1);
	modes[kind] = p_mode();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_key_t keys[NKEYS];
	const char *expect_init;
	void *lib;
	pthread_t t[3];

	if (argc != 4 || strcmp(argv[2], "--expect-init") != 0) {
		fprintf(stderr, "usage: %s LIBPCPU.so --expect-init own|fallback\n", argv[0]);
		return 2;
	}
	expect_init = argv[3];
	for (int i = 0; i < NKEYS; i++)
		CHECK(pthread_key_create(&keys[i], NULL) == 0);
	lib = dlopen(argv[1], RTLD_NOW);
	if (!lib)
		fprintf(stderr, "dlopen: %s\n", dlerror());
	CHECK(lib);
	CHECK((p_alloc = (void *(*)(void))dlsym(lib, "pcpu_counter_alloc")));
	CHECK((p_add = (void (*)(void *, int64_t))dlsym(lib, "pcpu_counter_add")));
	CHECK((p_fetch = (uint64_t (*)(void *))dlsym(lib, "pcpu_counter_fetch")));
	CHECK((p_mode = (int (*)(void))dlsym(lib, "pcpu_rseq_mode")));
	CHECK((p_init = (int (*)(void))dlsym(lib, "pcpu_thread_init")));
	CHECK((p_name = (const char *(*)(int))dlsym(lib, "pcpu_rseq_mode_name")));
	CHECK(signal(SIGUSR1, handler) != SIG_ERR);
	CHECK((counter = p_alloc()));
	for (long k = 0; k < 3; k++)
		CHECK(pthread_create(&t[k], NULL, adder, (void *)k) == 0);
	for (int k = 0; k < 3; k++)
		CHECK(pthread_join(t[k], NULL) == 0);
	printf("late key: adds only: %s; first add in a handler: %s; pcpu_thread_init(): %s\n",
	       p_name(modes[0]), p_name(modes[1]), p_name(init_mode));
	CHECK(modes[0] == PCPU_RSEQ_FALLBACK && modes[1] == PCPU_RSEQ_FALLBACK);
	CHECK(strcmp(p_name(init_mode), expect_init) == 0 && modes[2] == init_mode);
	CHECK(p_fetch(counter) == 3 * ADDS);
	printf("late key: %d adds exact\n", 3 * ADDS);
	return 0;
}
