/*
 * With PCPU_DEBUG defined, adding to a freed or NULL counter is caught: the
 * process stops with a message naming the function and the handle (as
 * assert() would). So are a get or a put on a released pcpu_ref (which
 * would otherwise be ignored: test_ref_misuse.c), and the read side of a
 * destroyed pcpu_rwlock. Each misuse runs in a child; the parent checks it
 * died by SIGABRT with the message on stderr.
 */
#define PCPU_DEBUG 1
#include "check.h"
#include <pcpu/pcpu.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The misuse, in a child: it must die by SIGABRT, having said "pcpu:
 * FUNC" and `needle` on stderr. */
static void expect_caught_in(void (*misuse)(void), const char *func, const char *needle)
{
	int pipefd[2], status;
	char buf[8192] = {0};
	ssize_t n, got = 0;
	pid_t pid;

	CHECK(pipe(pipefd) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(pipefd[1], 2);
		misuse();
		_exit(0); /* not caught: the parent sees exit 0 and fails */
	}
	close(pipefd[1]);
	/* Everything the child wrote (a sanitizer may add its own lines). */
	while ((n = read(pipefd[0], buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += n;
	n = got;
	close(pipefd[0]);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(n > 0);
	fprintf(stderr, "child said: %s", buf);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	CHECK(strstr(buf, "pcpu: ") != NULL && strstr(buf, func) != NULL);
	CHECK(strstr(buf, needle) != NULL);
}

static void expect_caught(void (*misuse)(void), const char *needle)
{
	expect_caught_in(misuse, "pcpu_counter_add", needle);
}

static void no_release(void *arg)
{
	(void)arg;
}

static pcpu_ref_t *released_ref(void)
{
	pcpu_ref_t *r = pcpu_ref_create(no_release, NULL);

	CHECK(r != NULL && pcpu_ref_kill(r) == 0); /* released */
	CHECK(!pcpu_ref_tryget(r));                /* fine: tryget may be tried */
	return r;
}

static void get_released_ref(void)
{
	pcpu_ref_get(released_ref());
}

static void put_released_ref(void)
{
	pcpu_ref_put(released_ref());
}

static void rdlock_destroyed_lock(void)
{
	pcpu_rwlock_t *l = pcpu_rwlock_create();

	CHECK(l != NULL && pcpu_rwlock_destroy(l) == 0);
	pcpu_rwlock_rdlock(l);
}

static void add_to_freed(void)
{
	pcpu_counter_t c = pcpu_counter_alloc();
	pcpu_counter_free(c);
	pcpu_counter_add(c, 1);
}

static void add_to_null(void)
{
	pcpu_counter_add(NULL, 1);
}

int main(void)
{
	/* A live counter, and an element of a live array, pass the check. */
	pcpu_counter_t c = pcpu_counter_alloc_array(4);
	pcpu_counter_add(c, 1);
	pcpu_counter_add(pcpu_counter_at(c, 3), 1);
	CHECK_EQ_U64(pcpu_counter_fetch(pcpu_counter_at(c, 3)), 1);

	expect_caught(add_to_freed, "not a live pcpu allocation");
	expect_caught(add_to_null, "is NULL");

	/* Refs: a held reference passes, a released ref does not. */
	{
		pcpu_ref_t *r = pcpu_ref_create(no_release, NULL);

		CHECK(r != NULL);
		pcpu_ref_get(r);
		CHECK(pcpu_ref_kill(r) == 0);
		pcpu_ref_get(r); /* killed, not released: fine */
		pcpu_ref_put(r);
		pcpu_ref_put(r); /* the last one */
		pcpu_ref_destroy(r);
	}
	expect_caught_in(get_released_ref, "pcpu_ref_get", "was released");
	expect_caught_in(put_released_ref, "pcpu_ref_put", "was released");
	expect_caught_in(rdlock_destroyed_lock, "pcpu_rwlock_rdlock", "not a live pcpu allocation");
	printf("test_debug_misuse: ok\n");
	return 0;
}
