/*
 * A segment that one worker keeps filling (issue 51: 10^5 registrations a
 * second made `pcpustat` take 1.5-14 s): a snapshot's work stays
 * proportional to what it returns. A directory that only grows while it is
 * read leaves nothing of what was there out, so reading it again -- once
 * per attempt, each larger -- shows nothing more; the reader must not.
 *
 * Work is counted, not timed: the directory entries the reader copies
 * (pcpu__reader_entries_copied(), every copy of every attempt) against
 * the families and series the snapshot returns. One read copies the
 * directory twice at most (E1, and E2 when the generation moved), so the
 * bound is 3 x what it returns; four attempts copied 8 x.
 *
 * Each round publishes a fresh segment, starts a worker registering series
 * as fast as it can (up to GROW_MAX), and snapshots it until the worker is
 * done; rounds go on until UNSTABLE snapshots were taken while it grew (a
 * loaded machine gets fewer per round: more rounds, never a failure).
 *
 * Usage: test_segment_grow
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pcpu/pcpu.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>

#include "check.h"

uint64_t pcpu__reader_entries_copied(const pcpu_reader_t *r);

#define GROW_MAX 200000
#define UNSTABLE 12
#define ROUNDS_MAX 200

struct worker {
	pcpu_family_t *fam;
	volatile int done;
	unsigned long made;
};

static void *grow(void *arg)
{
	struct worker *w = arg;
	unsigned long i;

	for (i = 0; i < GROW_MAX; i++) {
		char id[24];
		pcpu_counter_t c;

		snprintf(id, sizeof id, "%lu", i);
		c = pcpu_family_counter(w->fam, (const char *[]){ id });
		if (!c)
			break;
		pcpu_counter_inc(c);
	}
	w->made = i;
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* One round: the unstable snapshots it took, each checked. */
static unsigned round_once(const char *dir, unsigned *worst_ratio_x100)
{
	static const char *const idl[] = { "id" };
	struct pcpu_segment_options so;
	struct pcpu_reader_options ro;
	struct pcpu_family_desc d;
	struct pcpu_reader_snapshot *s;
	struct worker w;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_reader_t *r;
	pthread_t t;
	unsigned unstable = 0;

	memset(&so, 0, sizeof so);
	so.dir = dir;
	CHECK((reg = pcpu_registry_create()) != NULL);
	CHECK((seg = pcpu_segment_publish(reg, "grow", &so)) != NULL);
	memset(&d, 0, sizeof d);
	d.name = "grown";
	d.help = "Series a worker keeps registering.";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = idl;
	memset(&w, 0, sizeof w);
	CHECK((w.fam = pcpu_registry_family(reg, &d)) != NULL);
	memset(&ro, 0, sizeof ro);
	ro.dir = dir;
	CHECK((r = pcpu_reader_open("grow", &ro)) != NULL);
	CHECK(pthread_create(&t, NULL, grow, &w) == 0);
	while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) {
		uint64_t before = pcpu__reader_entries_copied(r), copied, returned;
		size_t f;

		if (pcpu_reader_snapshot(r, 0, &s) != 0) {
			fprintf(stderr, "snapshot: %s\n", pcpu_reader_error());
			exit(1);
		}
		copied = pcpu__reader_entries_copied(r) - before;
		returned = s->snapshot.nfamilies;
		for (f = 0; f < s->snapshot.nfamilies; f++)
			returned += s->snapshot.families[f].nseries;
		if (!s->stable) {
			unstable++;
			if (100 * copied / (returned + 64) > *worst_ratio_x100)
				*worst_ratio_x100 = (unsigned)(100 * copied / (returned + 64));
			if (copied > 3 * (returned + 64)) {
				fprintf(stderr,
					"a growing directory: %llu entries copied for %llu families and series "
					"returned (bound: 3 x (returned + 64))\n",
					(unsigned long long)copied, (unsigned long long)returned);
				exit(1);
			}
		}
		pcpu_reader_snapshot_free(s);
	}
	pthread_join(t, NULL);
	pcpu_reader_close(r);
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	return unstable;
}

int main(void)
{
	char dir[] = "/tmp/pcpu-grow.XXXXXX";
	unsigned unstable = 0, rounds = 0, worst = 0;

	CHECK(mkdtemp(dir) != NULL);
	while (unstable < UNSTABLE && rounds < ROUNDS_MAX) {
		unstable += round_once(dir, &worst);
		rounds++;
	}
	rmdir(dir);
	if (unstable < UNSTABLE) {
		/* The worker never overlapped a snapshot: nothing shown. */
		fprintf(stderr, "only %u snapshots of a growing directory in %u rounds\n", unstable, rounds);
		return 1;
	}
	printf("test_segment_grow: %u snapshots of a directory growing under them (%u rounds): at most "
	       "%u.%02u entries copied per family or series returned (bound 3)\n",
	       unstable, rounds, worst / 100, worst % 100);
	return 0;
}
