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

#include "../core/core.h"
#include "metrics.h"

void pcpu__fraction_add_slow(pcpu_counter_t c, double v)
{
	pcpu__counter_double_add_shared(pcpu_counter_at(c, 2), v);
}

double pcpu_fraction_value(uint64_t whole, int64_t nanos, double residue, int is_signed)
{
	return pcpu__fraction_value(whole, nanos, residue, is_signed);
}

int pcpu_fraction_split(double v, int is_signed, int64_t *whole, int64_t *nanos, double *residue)
{
	if (!whole || !nanos || !residue) {
		errno = EINVAL;
		return -1;
	}
	pcpu__fraction_split(v, is_signed, whole, nanos, residue);
	return 0;
}

void pcpu_fraction_store_residue(pcpu_counter_t c, double residue)
{
	if (c)
		(void)pcpu__counter_double_exchange(pcpu_counter_at(c, 2), residue);
}

void pcpu_fraction_sum_add(pcpu_counter_t w, double v)
{
	/* Finite: the slot's double; +-Inf and NaN: the shared residue, which
	 * a reset can store (no offset cancels them in a slot). */
	if (__builtin_fabs(v) <= 0x1.fffffffffffffp1023)
		pcpu__counter_double_add(w, v);
	else
		pcpu__counter_double_add_shared(pcpu_counter_at(w, 1), v);
}

double pcpu_fraction_sum_read(pcpu_counter_t w)
{
	uint64_t bits;
	double r;

	(void)pcpu_counter_fetch_array(pcpu_counter_at(w, 1), 1, &bits);
	memcpy(&r, &bits, sizeof r);
	return pcpu__counter_double_sum(w) + r;
}

void pcpu_fraction_sum_reset(pcpu_counter_t w)
{
	pcpu__counter_double_reset(w);
	(void)pcpu__counter_double_exchange(pcpu_counter_at(w, 1), 0.0);
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
