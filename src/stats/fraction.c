/* SPDX-License-Identifier: MIT */
/*
 * Values with fractions (pcpu/fraction.h): the residue's add, sets, reads,
 * and the one rule that turns the words into a double.
 *
 * Why a set's residue is v minus what the words read, rather than only
 * what the words cannot hold at all: with it a set of any double reads
 * back bit for bit (1/3, 1.000000000001, 1e-12 alike), so a double-valued
 * API over pcpu (the prometheus-cpp layer's Value()) and pcpu's own
 * readers give the same number. That difference is exact: the words read
 * F with |v - F| <= 5e-10 plus F's rounding, so v and F are within a
 * factor of two (Sterbenz) or F is 0, and F + (v - F) is v again.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pcpu/fraction.h>

#include "../counter_internal.h"
#include "metrics.h"

void pcpu__fraction_add_slow(pcpu_counter_t c, double v)
{
	pcpu__counter_double_add_shared(pcpu_counter_at(c, 2), v);
}

double pcpu_fraction_value(uint64_t whole, int64_t nanos, double residue, int is_signed)
{
	uint64_t u = whole + (uint64_t)(nanos / 1000000000);
	int64_t r = nanos % 1000000000;
	double v;

	if (u == 0 && r == 0)
		return residue;
	v = is_signed ? (double)(int64_t)u : (double)u;
	if (r)
		v += (double)r / 1e9;
	return v + residue;
}

int pcpu_fraction_split(double v, int is_signed, int64_t *whole, int64_t *nanos, double *residue)
{
	int64_t w = 0, n = 0;

	if (!whole || !nanos || !residue) {
		errno = EINVAL;
		return -1;
	}
	if (__builtin_fabs(v) < PCPU_FRACTION_LIMIT && (is_signed || v >= 0)) {
		double f;

		w = (int64_t)v;
		f = (v - (double)w) * 1e9;
		n = (int64_t)(f + (f < 0 ? -0.5 : 0.5));
	}
	*whole = w;
	*nanos = n;
	/* v - F, exact (see the top); the residue alone where F is 0. */
	*residue = w == 0 && n == 0 ? v : v - pcpu_fraction_value((uint64_t)w, n, 0.0, is_signed);
	return 0;
}

static int set_double(pcpu_counter_t c, double v, int is_signed)
{
	int64_t whole, nanos;
	double residue;

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	(void)pcpu_fraction_split(v, is_signed, &whole, &nanos, &residue);
	pcpu__counter_set_fraction(c, (uint64_t)whole, (uint64_t)nanos, residue);
	return 0;
}

int pcpu_gauge_set_double(pcpu_gauge_t g, double v)
{
	return set_double((pcpu_counter_t)g, v, 1);
}

int pcpu_counter_set_double(pcpu_counter_t c, double v)
{
	return set_double(c, v, 0);
}

static double read_double(pcpu_counter_t c, int is_signed)
{
	uint64_t w[PCPU_FRACTION_WORDS];
	double residue;

	if (!c) {
		errno = EINVAL;
		return __builtin_nan("");
	}
	(void)pcpu_counter_fetch_array(c, PCPU_FRACTION_WORDS, w);
	memcpy(&residue, &w[2], sizeof residue);
	return pcpu_fraction_value(w[0], (int64_t)w[1], residue, is_signed);
}

double pcpu_gauge_read_double(pcpu_gauge_t g)
{
	return read_double((pcpu_counter_t)g, 1);
}

double pcpu_counter_read_double(pcpu_counter_t c)
{
	return read_double(c, 0);
}
