/* SPDX-License-Identifier: MIT */
/*
 * What the PCPU_* environment asked for and was refused.
 *
 * The core reads its variables once per process (PCPU_RSEQ and PCPU_INDEX
 * at load time, PCPU_NSLOTS, PCPU_OWNED_SLOTS and PCPU_SLOT_WALK in
 * pcpu_init()). A library may neither print nor exit, so a value it does
 * not understand cannot be complained about where it is read; each reader
 * takes the safe choice its comment names and records the refusal here,
 * and pcpu_environment_error() (src/core/rseq.c, once pcpu_init() read every
 * variable) hands the first one to the program or tool, whose business
 * messages are. A leaf: the readers call it, it calls none of them.
 *
 * A misspelt name (PCPU_INDX, PCPU_SLOTWALK) is as silent as a bad value
 * would be: nothing reads it. So pcpu_init() also looks at every PCPU_*
 * name in the environment, and refuses one that no part of pcpu reads,
 * naming the variable it probably meant.
 */
#include "rseq_internal.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h> /* environ */

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

/* Every PCPU_* variable some part of pcpu reads: the core library, the
 * statistics layer (PCPU_SEGMENT_DIR), the Python reader (PCPU_LIBRARY).
 * The first six are the core's, the candidates a misspelling is matched
 * against. Keep pcpu(3)'s ENVIRONMENT section in step. */
static const char *const known_names[] = {
	"PCPU_RSEQ", "PCPU_INDEX", "PCPU_NSLOTS", "PCPU_OWNED_SLOTS", "PCPU_SLOT_WALK",
	"PCPU_COMMIT", "PCPU_SEGMENT_DIR", "PCPU_LIBRARY",
};
#define CORE_NAMES 6

/* Names of pcpu's own test, benchmark and build scripts (never read by the
 * libraries): a variable that starts with one of these is theirs. */
static const char *const development_prefixes[] = {
	"PCPU_TEST_", "PCPU_BENCH", "PCPU_BUILD_", "PCPU_FUZZ_", "PCPU_GO_", "PCPU_VM_",
	"PCPU_SYS_", "PCPU_PROMCPP_", "PCPU_FIXTURE", "PCPU_PCPUSTAT", "PCPU_FORWARDER",
	"PCPU_PREFORK", "PCPU_LAYOUT_PROBE", "PCPU_PROJECT_VERSION", "PCPU_CHURN_OPS",
	"PCPU_RWREC_THREADS",
};

/* Edit distance between a and b (each at most 31 bytes), ignoring case and
 * underscores, capped at 3: small is "probably meant". */
static unsigned distance(const char *a, size_t la, const char *b)
{
	char x[32], y[32];
	size_t nx = 0, ny = 0;
	unsigned row[33];

	for (size_t i = 0; i < la && nx < sizeof x; i++)
		if (a[i] != '_')
			x[nx++] = (char)(a[i] >= 'a' && a[i] <= 'z' ? a[i] - 32 : a[i]);
	for (; *b && ny < sizeof y; b++)
		if (*b != '_')
			y[ny++] = *b;
	for (size_t j = 0; j <= ny; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= nx; i++) {
		unsigned diag = row[0], best;

		row[0] = (unsigned)i;
		best = row[0];
		for (size_t j = 1; j <= ny; j++) {
			unsigned up = row[j], v = diag + (x[i - 1] != y[j - 1]);

			if (up + 1 < v)
				v = up + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			diag = up;
			row[j] = v;
			if (v < best)
				best = v;
		}
		if (best >= 3)
			return 3;
	}
	return row[ny] < 3 ? row[ny] : 3;
}

/* The refusal of an unknown name, formatted once (pcpu_init() runs once
 * per process): it outlives every caller of pcpu_environment_error(). */
static char unknown_refusal[160];

void pcpu__environment_check_names(void)
{
	for (char **e = environ; e && *e; e++) {
		const char *v = *e, *eq = strchr(v, '='), *meant = NULL;
		size_t len = eq ? (size_t)(eq - v) : strlen(v), k;
		unsigned best = 3;

		if (len < 5 || strncmp(v, "PCPU_", 5) != 0)
			continue;
		for (k = 0; k < sizeof known_names / sizeof known_names[0]; k++)
			if (strlen(known_names[k]) == len && !strncmp(v, known_names[k], len))
				break;
		if (k < sizeof known_names / sizeof known_names[0])
			continue;
		for (k = 0; k < sizeof development_prefixes / sizeof development_prefixes[0]; k++)
			if (!strncmp(v, development_prefixes[k], strlen(development_prefixes[k])))
				break;
		if (k < sizeof development_prefixes / sizeof development_prefixes[0])
			continue;
		for (k = 0; k < CORE_NAMES; k++) {
			unsigned d = distance(v + 5, len - 5, known_names[k] + 5);

			if (d < best) {
				best = d;
				meant = known_names[k];
			}
		}
		if (pcpu__environment_first_refusal())
			return; /* only the first refusal is ever reported */
		if (meant)
			snprintf(unknown_refusal, sizeof unknown_refusal,
				 "%.*s: not a variable pcpu reads (%s?); it is ignored",
				 (int)(len > 64 ? 64 : len), v, meant);
		else
			snprintf(unknown_refusal, sizeof unknown_refusal,
				 "%.*s: not a variable pcpu reads; it is ignored",
				 (int)(len > 64 ? 64 : len), v);
		pcpu__environment_refuse(unknown_refusal);
		return;
	}
}
