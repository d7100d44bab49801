/* SPDX-License-Identifier: MIT */
/* si.c: numbers with SI prefixes for pcpustat's watch mode. */
#ifndef PCPU_TOOLS_SI_H
#define PCPU_TOOLS_SI_H

#include <stddef.h>

/* The longest number si_format() writes, without its unit and NUL. */
#define SI_FORMAT_MAX 40

/*
 * Writes v for people to read, as rates and counts are shown: three
 * significant digits and an SI prefix for multiples of a thousand, then
 * `unit` (NULL: none) after a space: 2302049761.1 with "/s" gives
 * "2.30 G/s", 950400 gives "950 k/s", 12 gives "12.0 /s", 0.25 gives
 * "0.250 /s" (no submultiple prefix: "250 m/s" would read as metres), 0
 * gives "0 /s"; below 0.001 and from 10^27 up, "1.23e-05 /s"; "NaN",
 * "+Inf", "-Inf". Prefixes k M G T P E Z Y. Rounded to nearest, and the
 * prefix chosen after rounding (999.6 gives "1.00 k"). Writes a
 * NUL-terminated string into out[0..cap) and returns its length, or -1 with
 * errno EINVAL (NULL out) or ERANGE (cap too small; out is then "" if
 * cap > 0). SI_FORMAT_MAX + strlen(unit) + 3 bytes are always enough.
 * Thread-safe; not async-signal-safe (snprintf).
 */
int si_format(char *out, size_t cap, double v, const char *unit);

#endif
