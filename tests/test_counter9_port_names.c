/*
 * counter(9) fidelity: ported code's own kernel names. FreeBSD code, and the
 * shims it is ported with, #define short kernel names -- ticks, hz,
 * curthread, curcpu, mp_ncpus, ... -- before it includes <sys/counter.h>.
 * None of them may rewrite a declaration of pcpu's headers: a parameter
 * named `ticks` became `int *(port_ticks())`, a pointer to a function, and
 * the inline counter_ratecheck() then passed it an `int *` (an
 * incompatible-pointer-types error). Compiled with
 * -Werror=incompatible-pointer-types and -Wall -Wextra -Werror
 * (tests/CMakeLists.txt), linked into test_counter9_port, which calls
 * counter9_port_names().
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>

/* The shim's kernel: object-like macros, as ported code writes them. */
static int port_clock;
static int port_ticks(void) { return ++port_clock; }
static void *port_curthread(void) { return &port_clock; }
#define ticks (port_ticks())
#define tick 1000
#define hz (1000)
#define curthread (port_curthread())
#define curproc (port_curthread())
#define curcpu (0)
#define cpuid (0)
#define curvnet (0)
#define mp_ncpus 1
#define mp_maxid 0
#define mp_maxcpus 1
#define MAXCPU 1
#define bootverbose 0
#define time_uptime (port_clock)
#define time_second (port_clock)

#include <sys/counter.h>
#include <sys/smp.h>
#include <pcpu/counter9_sysctl.h>

#include "check.h"

int counter9_port_names(void);

int counter9_port_names(void)
{
	struct counter_rate cr = {0};
	counter_u64_t c[3];
	uint64_t v[3];
	int i, visited = 0;

	/* The rate check with the shim's clock in the struct, as ported code
	 * initialises it: the declarations above were not rewritten. */
	cr.cr_rate = counter_u64_alloc(M_WAITOK);
	cr.cr_ticks = ticks;
	CHECK(counter_ratecheck(&cr, 2) == 0);
	CHECK(counter_ratecheck(&cr, 2) == 0);
	CHECK(counter_ratecheck(&cr, 2) == -1);
	CHECK_EQ_U64(counter_u64_fetch(cr.cr_rate), 3);
	counter_u64_free(cr.cr_rate);

	COUNTER_ARRAY_ALLOC(c, 3, M_WAITOK);
	counter_u64_add(c[1], hz);
	CHECK(COUNTER_ARRAY_FETCH_AND_ZERO(c, v, 3) == 0);
	CHECK_EQ_U64(v[1], 1000);
	COUNTER_ARRAY_FREE(c, 3);

	/* The shim's own mp_maxid stays in force: <sys/smp.h> defined none. */
	CPU_FOREACH(i)
		visited++;
	CHECK(visited == 1 && mp_ncpus == 1);
	return (int)(curthread != NULL) + curcpu + bootverbose;
}
