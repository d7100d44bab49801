/* SPDX-License-Identifier: MIT */
/*
 * What the shared-tree tests (test_shared_registry.c, test_tree_hardening.c,
 * test_tree_relabel.c, test_tree_relabel_reuse.c, test_tree_index_fork.c,
 * test_tree_relog.c) do around their
 * processes: make and remove a published tree, wait for a child that must
 * exit 0, and open or read the tree's segment ("tree" in `dir`) as an
 * outside reader does.
 */
#ifndef PCPU_TEST_TREE_CHILD_H
#define PCPU_TEST_TREE_CHILD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"

/* A registry with the counter family "requests" (one label, "id"),
 * published as the shared tree "tree" (its string table max_string_bytes,
 * 0 for the default) in a new folder made from the mkdtemp() template
 * `dir`, which becomes its name. */
static inline pcpu_segment_t *publish_requests_tree(char *dir, size_t max_string_bytes,
						    pcpu_registry_t **reg, pcpu_family_t **fam)
{
	static const char *const ln[1] = {"id"};
	struct pcpu_segment_options o;
	struct pcpu_family_desc d;
	pcpu_segment_t *seg;

	CHECK(mkdtemp(dir) != NULL);
	*reg = pcpu_registry_create();
	CHECK(*reg);
	memset(&d, 0, sizeof d);
	d.name = "requests";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = ln;
	*fam = pcpu_registry_family(*reg, &d);
	CHECK(*fam);
	memset(&o, 0, sizeof o);
	o.dir = dir;
	o.flags = PCPU_SEGMENT_SHARED_TREE;
	o.max_string_bytes = max_string_bytes;
	seg = pcpu_segment_publish(*reg, "tree", &o);
	if (!seg)
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
	CHECK(seg);
	return seg;
}

/* The series of family `fam` (one label) with label value id, registered
 * or adopted; a failure says why and fails. */
static inline pcpu_counter_t tree_series(pcpu_family_t *fam, const char *id)
{
	const char *v[1] = {id};
	pcpu_counter_t c = pcpu_family_counter(fam, v);

	if (!c)
		fprintf(stderr, "series id=%s: %s\n", id, pcpu_stats_error());
	CHECK(c);
	return c;
}

/* Unpublishes seg, destroys reg and removes folder dir. */
static inline void remove_tree(pcpu_segment_t *seg, pcpu_registry_t *reg, const char *dir)
{
	char cmd[300];

	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

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
