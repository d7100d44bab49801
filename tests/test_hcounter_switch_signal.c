/* SPDX-License-Identifier: MIT */
/*
 * A signal handler whose limited add interrupts its own thread's switch of
 * a hierarchical counter (pcpu/hcounter.h) must refuse, never wait: the
 * switch it would wait for cannot end until the handler returns (commit
 * cf33fa6; found as a 6-minute hang of hcounter_own under signals, once in
 * many runs). Here the library's test hook pcpu__test_hcounter_switching()
 * raises the signal exactly while the counter is in the switching state,
 * so every run takes that path:
 *  - a limited add near the limit switches the counter to its precise mode;
 *    the handler's limited add on the same counter, and on a second counter
 *    in the per-CPU mode, answer at once;
 *  - a reset switches it too; the handler's limited add answers at once.
 * A hang fails the test after 20 s (alarm), with a message, rather than at
 * ctest's timeout. Without the `in_switch` check in
 * pcpu__hcounter_limited_add_slow() the first case hangs (checked by
 * removing it).
 * Needs rseq (the per-CPU mode has switches; the atomic fallback has none):
 * run in the glibc and own modes, refused with a message in the fallback.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <pcpu/hcounter.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void (*pcpu__test_hcounter_switching)(pcpu_hcounter_t *h);

static pcpu_hcounter_t *target;  /* the handler's counter */
static int64_t target_limit;
static volatile sig_atomic_t armed, handled, answer;
static int hook_calls;

static void on_usr1(int sig)
{
	(void)sig;
	answer = pcpu_hcounter_limited_add(target, 1, target_limit) ? 1 : 0;
	handled++;
}

static void on_alarm(int sig)
{
	static const char msg[] = "test_hcounter_switch_signal: a handler's limited add waited for "
				  "its own thread's switch (hung 20 s)\n";
	(void)sig;
	if (write(2, msg, sizeof msg - 1) < 0) {
	}
	_exit(1);
}

static void raise_once(pcpu_hcounter_t *h)
{
	(void)h;
	hook_calls++;
	if (armed) {
		armed = 0;
		raise(SIGUSR1);
	}
}

/* Adds 1 at a time until a limited add must switch (the bounds straddle
 * the limit), with the signal armed for that switch. */
static void switch_near_limit(pcpu_hcounter_t *h, int64_t limit)
{
	int before = hook_calls;

	armed = 1;
	for (int64_t i = 0; i <= limit && hook_calls == before; i++)
		CHECK(pcpu_hcounter_limited_add(h, 1, limit));
	CHECK(hook_calls > before); /* it switched before the limit */
	CHECK(!armed);
}

int main(void)
{
	struct sigaction sa;
	pcpu_hcounter_t *a, *b;
	/* Far enough that the counter starts per-CPU: its error bound grows
	 * with the slots (PCPU_NSLOTS=64 put 1000 within it, and case 2's
	 * counter started precise, with no switch for the reset to make). */
	const int64_t limit = 1000 * (int64_t)pcpu_nslots();

	if (pcpu_rseq_mode() == PCPU_RSEQ_FALLBACK) {
		fprintf(stderr, "test_hcounter_switch_signal: no rseq (mode %s): the counters have "
				"no per-CPU mode to switch from; run it where rseq works\n",
			pcpu_rseq_mode_name(pcpu_rseq_mode()));
		return 1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	signal(SIGALRM, on_alarm);
	alarm(20);
	pcpu__test_hcounter_switching = raise_once;

	/* 1. The switch to the precise mode near the limit; the handler adds
	 * to the same counter: refused (its precise sum is not known yet). */
	CHECK((a = pcpu_hcounter_create(32)) != NULL);
	target = a, target_limit = limit;
	switch_near_limit(a, limit);
	CHECK(handled == 1 && answer == 0);
	CHECK(pcpu_hcounter_sum(a) <= limit);
	pcpu_hcounter_destroy(a);

	/* ... to another counter, in its per-CPU mode far from its limit: no
	 * switch of its own runs, so the handler's add is made. */
	CHECK((a = pcpu_hcounter_create(32)) != NULL);
	CHECK((b = pcpu_hcounter_create(32)) != NULL);
	target = b, target_limit = 1000000;
	switch_near_limit(a, limit);
	CHECK(handled == 2 && answer == 1);
	CHECK(pcpu_hcounter_sum(b) == 1);
	pcpu_hcounter_destroy(a);

	/* 2. A reset switches a per-CPU counter too: the handler's add to it
	 * refuses rather than wait. */
	pcpu__test_hcounter_switching = NULL;
	CHECK((a = pcpu_hcounter_create(32)) != NULL);
	CHECK(pcpu_hcounter_limited_add(a, 5, limit));
	target = a, target_limit = limit;
	armed = 1;
	pcpu__test_hcounter_switching = raise_once;
	CHECK(pcpu_hcounter_reset(a) == 0);
	CHECK(!armed);
	CHECK(handled == 3 && answer == 0);
	CHECK(pcpu_hcounter_sum(a) == 0);

	alarm(0);
	pcpu__test_hcounter_switching = NULL;
	pcpu_hcounter_destroy(a);
	pcpu_hcounter_destroy(b);
	printf("test_hcounter_switch_signal: mode %s: %d switches, 3 handlers answered at once\n",
	       pcpu_rseq_mode_name(pcpu_rseq_mode()), hook_calls);
	return 0;
}
