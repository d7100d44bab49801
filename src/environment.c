/* SPDX-License-Identifier: MIT */
/*
 * What the PCPU_* environment asked for and was refused.
 *
 * The core reads its variables once per process (PCPU_RSEQ and PCPU_INDEX
 * at load time, PCPU_NSLOTS, PCPU_OWNED_SLOTS and PCPU_SLOT_WALK in
 * pcpu_init()). A library may neither print nor exit, so a value it does
 * not understand cannot be complained about where it is read; each reader
 * takes the safe choice its comment names and records the refusal here,
 * and pcpu_environment_error() (src/rseq.c, once pcpu_init() read every
 * variable) hands the first one to the program or tool, whose business
 * messages are. A leaf: the readers call it, it calls none of them.
 */
#include "rseq_internal.h"

/* The first refusal: a string constant, set once (compare-and-swap from
 * NULL, as two once-initialisations may each refuse a variable). */
static const char *first_refusal;

void pcpu__environment_refuse(const char *what)
{
	const char *none = NULL;

	__atomic_compare_exchange_n(&first_refusal, &none, what, 0, __ATOMIC_RELEASE,
				    __ATOMIC_RELAXED);
}

const char *pcpu__environment_first_refusal(void)
{
	return __atomic_load_n(&first_refusal, __ATOMIC_ACQUIRE);
}
