/* SPDX-License-Identifier: MIT */
/*
 * The demonstration's verdict (pcpu_bench --demo), apart from the runs that
 * measure it: every sentence is computed from the figures it is given, so
 * bench/demo_verdict_test.c can give it figures of either order and read
 * what it says. demo.c measures the table and calls demo_verdict().
 */
#ifndef PCPU_BENCH_DEMO_VERDICT_H
#define PCPU_BENCH_DEMO_VERDICT_H

#include <stdio.h>

/* The demonstration's rows, in the order printed (demo.c names them). */
enum demo_row { DEMO_PCPU, DEMO_ATOMIC, DEMO_MUTEX, DEMO_RACY, DEMO_TLS, DEMO_NROWS };

/* One cell of the table: a row at a thread count. */
struct demo_cell {
	double ns;        /* median CPU ns per increment over the rounds */
	double lost;      /* the largest share of increments lost in a round, % */
	unsigned inexact; /* rounds whose final count missed increments */
};

/* A run of the demonstration, as the verdict reads it. */
struct demo_run {
	const struct demo_cell *cell; /* [row * nthreads + thread index] */
	const unsigned *threads;      /* the thread counts, ascending */
	unsigned nthreads;            /* >= 1 */
	unsigned rounds;              /* runs per cell */
	unsigned ncpu;                /* CPUs online */
};

/* Writes the "## Verdict" section of `run` to f. */
void demo_verdict(FILE *f, const struct demo_run *run);

#endif
