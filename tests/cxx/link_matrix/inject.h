/* SPDX-License-Identifier: MIT */
/* The abort injection the link matrix's programs run under (main.cpp,
 * c_main.c): built with PCPU_TEST_INJECT in every unit, each section
 * spins between arming and committing, and a timer of each thread's own
 * CPU time interrupts it there (an empty handler): the section aborts and
 * restarts, in whichever copy of the function ran. The hooks are the
 * program's (pcpu/arch/common.h); exported (-rdynamic) for the units the
 * shared-library variant puts in libraries. */
#ifndef PCPU_LINK_MATRIX_INJECT_H
#define PCPU_LINK_MATRIX_INJECT_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id /* not named by older glibc (2.36) */
#define sigev_notify_thread_id _sigev_un._tid
#endif

#ifdef __cplusplus
extern "C" {
#endif
__attribute__((used)) unsigned pcpu__test_inject_spin = 2000;
__attribute__((used)) __thread unsigned long pcpu__test_inject_aborts;
__attribute__((used)) void pcpu__test_inject_before(void) {}
#ifdef __cplusplus
}
#endif

static void inject_handler(int sig)
{
	(void)sig;
}

/* Arms the calling thread's timer: SIGUSR1 every `us` of its CPU time. */
static void inject_arm(long us)
{
	struct sigevent ev;
	struct itimerspec its;
	struct sigaction sa;
	timer_t t;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = inject_handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	memset(&ev, 0, sizeof ev);
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = SIGUSR1;
	ev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &t) != 0) {
		perror("timer_create");
		exit(1);
	}
	memset(&its, 0, sizeof its);
	its.it_value.tv_nsec = us * 1000;
	its.it_interval.tv_nsec = us * 1000;
	if (timer_settime(t, 0, &its, NULL) != 0) {
		perror("timer_settime");
		exit(1);
	}
}

#endif
