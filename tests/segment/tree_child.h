/* SPDX-License-Identifier: MIT */
/*
 * What the shared-tree tests (test_shared_registry.c, test_tree_hardening.c,
 * test_tree_relabel.c) do around their processes: wait for a child that
 * must exit 0, and open or read the tree's segment ("tree" in `dir`) as an
 * outside reader does.
 */
#ifndef PCPU_TEST_TREE_CHILD_H
#define PCPU_TEST_TREE_CHILD_H

#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <pcpu/reader.h>

#include "check.h"

/* Waits for child `pid`; it must have exited with status 0 (else says how
 * it ended and fails). */
static inline void wait_ok(pid_t pid)
{
	int st;

	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fprintf(stderr, "child %d: %s %d\n", (int)pid, WIFSIGNALED(st) ? "killed by signal" : "exit",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The segment "tree" in directory `dir`, opened as pcpustat opens it
 * (the caller closes it). */
static inline pcpu_reader_t *open_tree_segment(const char *dir)
{
	struct pcpu_reader_options ro;
	pcpu_reader_t *r;

	memset(&ro, 0, sizeof ro);
	ro.dir = dir;
	r = pcpu_reader_open("tree", &ro);
	if (!r)
		fprintf(stderr, "reader: %s\n", pcpu_reader_error());
	CHECK(r);
	return r;
}

/* A snapshot of the segment "tree" in directory `dir`, as pcpustat reads
 * it (the caller frees it). */
static inline struct pcpu_reader_snapshot *read_tree_segment(const char *dir)
{
	struct pcpu_reader_snapshot *s = NULL;
	pcpu_reader_t *r = open_tree_segment(dir);

	if (pcpu_reader_snapshot(r, 0, &s) != 0)
		fprintf(stderr, "snapshot: %s\n", pcpu_reader_error());
	CHECK(s);
	pcpu_reader_close(r);
	return s;
}

#endif
