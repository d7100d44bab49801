/* SPDX-License-Identifier: MIT */
/*
 * Numbers for people: pcpustat's rates and counts with SI prefixes. A
 * presentation of the tools, not of the library (issue 39: it was
 * pcpu_format_si() in libpcpu's ABI with no user but pcpustat).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "si.h"

/*
 * Three significant digits of a finite, non-zero |v| (rounded as printf
 * rounds): d[0..3) and the
 * decimal exponent of d[0], after rounding (999.6 gives "100", 3).
 */
static void three_digits(double v, char d[3], int *exp10)
{
	char tmp[48];
	const char *p, *e;
	int n = 0;
	/* Whatever LC_NUMERIC says: only the digits and the exponent are
	 * read back, never the decimal separator. */
	snprintf(tmp, sizeof tmp, "%.2e", v);
	e = strchr(tmp, 'e');
	for (p = tmp; p < e && n < 3; p++)
		if (*p >= '0' && *p <= '9')
			d[n++] = *p;
	*exp10 = atoi(e + 1);
}

int si_format(char *out, size_t cap, double v, const char *unit)
{
	static const char prefixes[] = "kMGTPEZY";
	char num[SI_FORMAT_MAX + 8], d[3];
	const char *prefix = "";
	size_t k = 0, ul, need;
	int x, point, i;

	if (!out) {
		errno = EINVAL;
		return -1;
	}
	unit = unit ? unit : "";
	if (isnan(v) || isinf(v) || v == 0) {
		strcpy(num, isnan(v) ? "NaN" : isinf(v) ? (v > 0 ? "+Inf" : "-Inf") : "0");
		k = strlen(num);
	} else {
		if (v < 0) {
			num[k++] = '-';
			v = -v;
		}
		three_digits(v, d, &x);
		if (x < -3 || x >= 3 * (int)(sizeof prefixes - 1) + 3) {
			/* Past the prefixes: d.dde+XX, as printf("%.2e"). */
			num[k++] = d[0];
			num[k++] = '.';
			num[k++] = d[1];
			num[k++] = d[2];
			k += (size_t)snprintf(num + k, sizeof num - k, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
		} else if (x < 0) {
			/* 0.250, 0.0250, 0.00250: no milli for a rate ("m/s"). */
			num[k++] = '0';
			num[k++] = '.';
			for (i = -1; i > x; i--)
				num[k++] = '0';
			for (i = 0; i < 3; i++)
				num[k++] = d[i];
		} else {
			if (x >= 3)
				prefix = &prefixes[x / 3 - 1];
			point = x % 3 + 1; /* digits before the point: 1, 2 or 3 */
			for (i = 0; i < 3; i++) {
				if (i == point)
					num[k++] = '.';
				num[k++] = d[i];
			}
		}
		num[k] = '\0';
	}
	/* "2.30 G/s", "12.0 /s", "0.250": the unit after a space, the prefix
	 * one letter of it, as SI writes them. */
	ul = strlen(unit);
	need = k + (*prefix || ul ? 1 + (*prefix != 0) + ul : 0) + 1;
	if (need > cap) {
		if (cap)
			out[0] = '\0';
		errno = ERANGE;
		return -1;
	}
	memcpy(out, num, k);
	if (*prefix || ul) {
		out[k++] = ' ';
		if (*prefix)
			out[k++] = *prefix;
		memcpy(out + k, unit, ul);
		k += ul;
	}
	out[k] = '\0';
	return (int)k;
}
