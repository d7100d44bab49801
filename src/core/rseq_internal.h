/* SPDX-License-Identifier: MIT */
/*
 * rseq.c's internals: process initialisation, the process-wide rseq mode,
 * index and slot count, and the slot a thread's fallback adds use. The
 * lowest layer: it includes only the public rseq and arch headers and the
 * seam's markers (core.h). Nothing here is exported.
 */
#ifndef PCPU_RSEQ_INTERNAL_H
#define PCPU_RSEQ_INTERNAL_H

#include <pcpu/arch.h>
#include <pcpu/rseq.h>
#include <stdint.h>

#include "core.h"

/* Process-wide way of using rseq, decided once by pcpu_init(). */
enum pcpu_process_mode {
	PCPU_PROCESS_GLIBC = 1, /* glibc registered every thread's area */
	PCPU_PROCESS_OWN = 2,   /* pcpu registers its own area per thread */
	PCPU_PROCESS_NONE = 3,  /* rseq disabled: fallback everywhere */
};

/* Initialises everything once: pcpu__g (normally already done at load
 * time), the mode, and pcpu_slot_count. Safe to call from any thread, any
 * number of times; async-signal-safe. */
PCPU_HIDDEN void pcpu_init(void);

/* Number of slots (pcpu_nslots()), valid once pcpu_init() ran -- always the
 * case where a zone exists: the CPU slots (pcpu_cpu_slot_count: every index
 * rseq or a fallback add can use), then the owned slots (src/core/worker.c). */
PCPU_HIDDEN extern uint32_t pcpu_slot_count;
PCPU_HIDDEN extern uint32_t pcpu_cpu_slot_count;
PCPU_HIDDEN extern uint32_t pcpu_owned_slot_count; /* src/core/worker.c's */
/* 1 when PCPU_OWNED_SLOTS held something other than a number 0 ..
 * PCPU_OWNED_MAX: pcpu_owned_slot_count is then 0 and claims fail with
 * EINVAL. Set once by pcpu_init(). */
PCPU_HIDDEN extern int pcpu_owned_env_invalid;

/* Records that a PCPU_* variable was not understood (src/core/environment.c):
 * `what`, a string constant, names it and the choice made instead; the
 * first one is pcpu_environment_error()'s answer. */
PCPU_HIDDEN void pcpu__environment_refuse(const char *what);
/* The first refusal recorded so far, or NULL. */
PCPU_HIDDEN const char *pcpu__environment_first_refusal(void);
/* Refuses the first PCPU_* name in the environment that no part of pcpu
 * reads (a misspelling), naming the variable it probably meant. Called
 * once, by pcpu_init(), after every variable was read. */
PCPU_HIDDEN void pcpu__environment_check_names(void);

/* The most slots a zone has (PCPU_NSLOTS and PCPU_OWNED_SLOTS together):
 * a chunk's address space stays sane, and the slot walk's list is 16-bit. */
#define PCPU__SLOT_MAX 4096

/* Owned slots by default: one per possible CPU, at most this many. */
#define PCPU_OWNED_DEFAULT_MAX 128


/* The index every zone of this process uses (never PCPU_INDEX_DEFAULT). */
PCPU_HIDDEN enum pcpu_index pcpu_process_index(void);

/* The slot assigned to the calling thread for its fallback adds, plus one
 * (0: none yet); and the call that assigns one, round-robin. */
PCPU_HIDDEN extern __thread uint32_t pcpu_t_fallback_slot_plus1
	__attribute__((tls_model("initial-exec")));
PCPU_HIDDEN uint32_t pcpu_fallback_slot_assign(void);

/* Slot the calling thread uses on the fallback path: its current CPU/mm_cid
 * when its area is registered (locality), else the slot assigned to the
 * thread on its first fallback add. Inline: it is on the fallback add's
 * path, which the benchmark compares with a bare `lock add`. */
static inline char *pcpu_thread_pointer(void)
{
	return pcpu__arch_thread_pointer(); /* pcpu/arch.h, every target */
}

static inline uint32_t pcpu_fallback_slot(void)
{
	char *tp = pcpu_thread_pointer();
	int32_t idx = __atomic_load_n((int32_t *)(tp + pcpu__g.index_tpoff), __ATOMIC_RELAXED);
	uint32_t plus1;

	if (PCPU_LIKELY((uint32_t)idx < pcpu_slot_count))
		return (uint32_t)idx;
	plus1 = pcpu_t_fallback_slot_plus1;
	if (PCPU_LIKELY(plus1 != 0))
		return plus1 - 1;
	return pcpu_fallback_slot_assign();
}

#endif /* PCPU_RSEQ_INTERNAL_H */
