/*
 * With PCPU_DEBUG defined, adding to a freed or NULL counter is caught: the
 * process stops with a message naming the function and the handle (as
 * assert() would). Each misuse runs in a child; the parent checks it died
 * by SIGABRT with the message on stderr.
 */
#define PCPU_DEBUG 1
#include "check.h"
#include <pcpu/pcpu.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void expect_caught(void (*misuse)(void), const char *needle)
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
	CHECK(strstr(buf, "pcpu: pcpu_counter_add") != NULL);
	CHECK(strstr(buf, needle) != NULL);
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
	printf("test_debug_misuse: ok\n");
	return 0;
}
