/* SPDX-License-Identifier: MIT */
/*
 * The benchmarks' option values, and their exit on a bad one: one parser of
 * numbers and of lists of thread or worker counts for every benchmark
 * program that links it (bench.h).
 */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

unsigned long bench_parse_num(const char *opt, const char *s, unsigned long min, unsigned long max)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(s, &end); /* accepts 1e8 */
	if (errno || end == s || *end || d < (double)min || d > (double)max || d != floor(d))
		bench_die("%s: expected a whole number in [%lu, %lu], got '%s'", opt, min, max, s);
	return (unsigned long)d;
}

unsigned bench_parse_counts(const char *opt, const char *s, unsigned *out, unsigned max_n,
			    unsigned long max)
{
	char *copy = strdup(s), *tok, *save = NULL;
	unsigned n = 0;

	if (!copy)
		bench_die("out of memory");
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max_n)
			bench_die("%s: at most %u counts", opt, max_n);
		out[n++] = (unsigned)bench_parse_num(opt, tok, 1, max);
	}
	if (n == 0)
		bench_die("%s: empty list", opt);
	free(copy);
	return n;
}
