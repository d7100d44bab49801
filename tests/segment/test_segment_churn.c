/*
 * Registration and removal while readers read.
 *
 * "mixed": writer threads add and remove series (and whole families, and
 * registered structs) as fast as they can, series churn_value_total{id="K"}
 * only ever holding 0 or 7*K, while the main thread snapshots the segment
 * in a loop. Every snapshot must be valid and every value it shows must
 * belong to its series (a value of a removed series reused by another would
 * show as 7*M under id K). Once the writers stop, a snapshot is stable and
 * equals the writer's own exposition.
 *
 * "families": one writer creates and removes small families (with their
 * series) in a tight loop while the main thread snapshots a directory of a
 * few entries as fast as it can: the most snapshots per second, and the
 * most of them overlapping a family's removal -- the case where a reader
 * that read the generation before its second copy of the directory reported
 * "series of a family that does not exist" (issue 10: 65 false errors in
 * 99,650 snapshots). No snapshot may fail: the test counts the failures and
 * fails if there is any.
 *
 * First, deterministically, "torn": the second copy of the directory is
 * made while the writer removes a family (its series' entry copied before
 * the removal, the family's after it), which a reader must see as a change,
 * not as corruption.
 *
 * Usage: test_segment_churn [mixed|families] [SECONDS] [SNAPSHOTS]
 *        test_segment_churn SECONDS            (mixed)
 * Runs until SECONDS have passed or SNAPSHOTS snapshots were taken, and in
 * any case until the run has what it checks (more than 10 snapshots, more
 * than 1000 registry changes): a loaded machine takes longer to get there,
 * it does not fail. 10 minutes only bound a run that never gets there.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "seg_builder.h"

pcpu_reader_t *pcpu__reader_open_mem(const void *buf, size_t len, size_t max_bytes);
void pcpu__reader_set_read_hook(pcpu_reader_t *r,
				void (*fn)(void *ctx, unsigned n, uint64_t off, size_t len), void *ctx);

#define WRITERS 3
#define GAP 4096

static pcpu_registry_t *reg;
static pcpu_family_t *fam;
static int stop_flag;
static long live_ops; /* the writers' registry changes so far */
#define MIN_OPS 1000   /* a run makes more than this many */
#define MIN_SNAPS 10   /* and takes more than this many snapshots */

struct two {
	struct pcpu_counter a, b;
};
static const struct pcpu_stats_field two_fields[] = {
	PCPU_STATS_COUNTER(struct two, a, "churn_struct_a", "Field a."),
	PCPU_STATS_COUNTER(struct two, b, "churn_struct_b", "Field b."),
};

static void *writer(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	int base = (int)(uintptr_t)arg * 100000;
	static const char *const ln[] = { "w" };
	char wl[16];
	const char *wv[1] = { wl };
	long ops = 0;

	snprintf(wl, sizeof wl, "%d", (int)(uintptr_t)arg);
	while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
		char id[16];
		const char *v[1] = { id };
		int k = base + (int)(rand_r(&seed) % 300), op = (int)(rand_r(&seed) % 100);

		snprintf(id, sizeof id, "%d", k);
		if (op < 45) {
			pcpu_counter_t c = pcpu_family_counter(fam, v);
			CHECK(c != NULL);
			if (pcpu_counter_fetch(c) == 0)
				pcpu_counter_add(c, 7 * (int64_t)k);
		} else if (op < 90) {
			pcpu_family_remove(fam, v);
		} else if (op < 95) {
			/* A whole family of this writer comes and goes. */
			char name[32];
			struct pcpu_family_desc d;
			pcpu_family_t *f;

			snprintf(name, sizeof name, "churn_family_%d", (int)(uintptr_t)arg);
			memset(&d, 0, sizeof d);
			d.name = name;
			d.type = PCPU_METRIC_GAUGE;
			f = pcpu_registry_find(reg, name);
			if (f) {
				CHECK(pcpu_registry_remove_family(reg, f) == 0);
			} else {
				CHECK((f = pcpu_registry_family(reg, &d)) != NULL);
				pcpu_gauge_set(pcpu_family_gauge(f, NULL), 11);
			}
		} else {
			struct two *s = pcpu_registry_struct(reg, sizeof *s, two_fields, 2, 1, ln, wv);

			if (s) {
				pcpu_counter_add(&s->a, 5);
				pcpu_counter_add(&s->b, 6);
				CHECK(pcpu_registry_struct_remove(reg, s) == 0);
			}
		}
		ops++;
		__atomic_fetch_add(&live_ops, 1, __ATOMIC_RELAXED);
	}
	return (void *)ops;
}

static double now_s(void);
static double pace_ns = 20000;

/* "families": small families come and go with their series. Family cf_F
 * has series id = 10*F + j (j < 4), each 0 or 7*id. */
#define NFAM 4
static void *families_writer(void *arg)
{
	static const char *const ln[] = { "id" };
	unsigned seed = 12345;
	long ops = 0;

	(void)arg;
	while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
		int fno = (int)(rand_r(&seed) % NFAM), op = (int)(rand_r(&seed) % 8), j;
		char name[32], id[16];
		const char *v[1] = { id };
		struct pcpu_family_desc d;
		pcpu_family_t *f;

		snprintf(name, sizeof name, "cf_%d_total", fno);
		f = pcpu_registry_find(reg, name);
		if (!f) {
			memset(&d, 0, sizeof d);
			d.name = name;
			d.help = "0, or 7 times the id.";
			d.type = PCPU_METRIC_COUNTER;
			d.nlabels = 1;
			d.label_names = ln;
			CHECK((f = pcpu_registry_family(reg, &d)) != NULL);
			for (j = 0; j < 1 + fno % 3; j++) {
				pcpu_counter_t c;

				snprintf(id, sizeof id, "%d", 10 * fno + j);
				CHECK((c = pcpu_family_counter(f, v)) != NULL);
				pcpu_counter_add(c, 7 * (10 * fno + j));
			}
		} else if (op < 3) {
			CHECK(pcpu_registry_remove_family(reg, f) == 0);
		} else {
			j = op % 4;
			snprintf(id, sizeof id, "%d", 10 * fno + j);
			if (op < 6) {
				pcpu_counter_t c = pcpu_family_counter(f, v);

				CHECK(c != NULL);
				if (pcpu_counter_fetch(c) == 0)
					pcpu_counter_add(c, 7 * (10 * fno + j));
			} else {
				pcpu_family_remove(f, v);
			}
		}
		ops++;
		__atomic_fetch_add(&live_ops, 1, __ATOMIC_RELAXED);
		/* A pause of 0 to ~pace_ns: many snapshots see no change at all
		 * (stable), and some see one begin during their second look. */
		{
			double until = now_s() + (rand_r(&seed) % 1000) * pace_ns * 1e-12;

			while (now_s() < until)
				;
		}
	}
	return (void *)ops;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void check_snapshot(const struct pcpu_reader_snapshot *s, size_t *nseries)
{
	size_t f, i;

	for (f = 0; f < s->snapshot.nfamilies; f++) {
		const struct pcpu_snapshot_family *fm = &s->snapshot.families[f];

		if (strcmp(fm->name, "churn_value") == 0) {
			for (i = 0; i < fm->nseries; i++) {
				long k = atol(fm->series[i].label_values[0]);
				uint64_t v = fm->series[i].value.counter;

				if (v != 0 && v != (uint64_t)(7 * k)) {
					fprintf(stderr, "churn_value{id=\"%ld\"} = %llu: not 0 or %ld\n", k,
						(unsigned long long)v, 7 * k);
					exit(1);
				}
			}
			*nseries += fm->nseries;
		} else if (strncmp(fm->name, "cf_", 3) == 0) {
			for (i = 0; i < fm->nseries; i++) {
				long k = atol(fm->series[i].label_values[0]);
				uint64_t v = fm->series[i].value.counter;

				if (v != 0 && v != (uint64_t)(7 * k)) {
					fprintf(stderr, "%s{id=\"%ld\"} = %llu: not 0 or %ld\n", fm->name, k,
						(unsigned long long)v, 7 * k);
					exit(1);
				}
			}
			*nseries += fm->nseries;
		} else if (strncmp(fm->name, "churn_family_", 13) == 0) {
			CHECK(fm->nseries <= 1);
			/* Set to 11 right after creation: 0 or 11. */
			CHECK(fm->nseries == 0 || fm->series[0].value.gauge == 0 ||
			      fm->series[0].value.gauge == 11);
		} else if (strcmp(fm->name, "churn_struct_a") == 0) {
			for (i = 0; i < fm->nseries; i++)
				CHECK(fm->series[i].value.counter == 0 || fm->series[i].value.counter == 5);
		} else if (strcmp(fm->name, "churn_struct_b") == 0) {
			for (i = 0; i < fm->nseries; i++)
				CHECK(fm->series[i].value.counter == 0 || fm->series[i].value.counter == 6);
		}
	}
}

/* ---- torn: a removal during the second copy of the directory ------------- */

struct torn {
	struct sb *b;
	unsigned entry_reads; /* reads of the directory so far */
	unsigned header_reads;
	int state;            /* 0 before, 1 removal in progress, 2 done */
};

/* Plays the writer at the reader's read boundaries. Before the second copy
 * of the directory, the writer is in the middle of removing family cf_f
 * (entry 2) and its series (entry 1): that copy shows the series still there
 * (copied before it was freed) and the family gone (copied after). The next
 * read sees the removal finished. */
static void torn_hook(void *ctx, unsigned n, uint64_t off, size_t len)
{
	struct torn *t = ctx;
	struct pcpu__seg_entry *series = sb_entry(t->b, 1), *family = sb_entry(t->b, 2);

	(void)n;
	(void)len;
	if (t->state == 1) {
		memset((char *)series + 8, 0, sizeof *series - 8);
		series->seq += 2;
		t->b->h->generation += 1; /* even again: the change is over */
		t->state = 2;
	}
	/* The reader copies the directory a second time only when the
	 * generation moved during the first look (its third header read,
	 * after the values): another change, finished by then, moves it. */
	if (t->state == 0 && off == 0 && ++t->header_reads == 3)
		t->b->h->generation += 2;
	if (t->state == 0 && off == t->b->h->entries_offset && ++t->entry_reads == 2) {
		t->b->h->generation += 1; /* odd: a change in progress */
		memset((char *)family + 8, 0, sizeof *family - 8);
		family->seq += 2;
		t->state = 1;
	}
}

static void check_torn_second_copy(void)
{
	static const char *const idl[] = { "id" };
	struct pcpu_reader_snapshot *s;
	struct torn t;
	pcpu_reader_t *r;
	struct sb b;

	sb_init(&b, 2, 512, 1, 16, 1024);
	sb_family(&b, 1, 1, "keep", "Stays.", NULL, 0, NULL, 0, 0, 0, NULL); /* entry 0 */
	sb_series(&b, 2, 1, 1, idl, 0, 24, 8);                                  /* entry 1 */
	/* entry 2 (ids are the writer's: the series names its family by id) */
	sb_family(&b, 2, 1, "cf_f", "Goes.", NULL, 1, idl, 0, 0, 0, NULL);
	sb_series(&b, 1, 1, 0, NULL, 0, 16, 8);                                 /* entry 3 */
	memset(&t, 0, sizeof t);
	t.b = &b;
	CHECK((r = pcpu__reader_open_mem(b.buf, b.len, 0)) != NULL);
	pcpu__reader_set_read_hook(r, torn_hook, &t);
	if (pcpu_reader_snapshot(r, 0, &s) != 0) {
		fprintf(stderr, "torn second copy: %s\n", pcpu_reader_error());
		exit(1);
	}
	CHECK(t.state == 2);
	CHECK(s->snapshot.nfamilies == 1 && strcmp(s->snapshot.families[0].name, "keep") == 0);
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	free(b.buf);
	printf("test_segment_churn: a removal during the second copy of the directory is a "
	       "change, not corruption\n");
}

int main(int argc, char **argv)
{
	static const char *const ln[] = { "id" };
	const char *mode = "mixed";
	double seconds = 1.5, end, bound;
	unsigned long max_snaps = 0;
	struct pcpu_segment_options o;
	struct pcpu_reader_options ro;
	struct pcpu_family_desc d;
	struct pcpu_reader_snapshot *s;
	pthread_t t[WRITERS];
	pcpu_reader_t *r;
	char dir[] = "/tmp/pcpu-churn.XXXXXX";
	size_t snaps = 0, unstable = 0, changed = 0, seen = 0, failed = 0;
	int nwriters, k, a = 1;
	long ops = 0;

	if (argc > a && (strcmp(argv[a], "mixed") == 0 || strcmp(argv[a], "families") == 0 ||
			 strcmp(argv[a], "families-gap") == 0))
		mode = argv[a++];
	if (argc > a)
		seconds = atof(argv[a++]);
	if (argc > a)
		max_snaps = strtoul(argv[a++], NULL, 10);
	nwriters = strcmp(mode, "mixed") == 0 ? WRITERS : 1;
	check_torn_second_copy();

	CHECK(mkdtemp(dir) != NULL);
	memset(&o, 0, sizeof o);
	memset(&ro, 0, sizeof ro);
	o.dir = ro.dir = dir;
	CHECK((reg = pcpu_registry_create()) != NULL);
	CHECK(pcpu_segment_publish(reg, "churn", &o) != NULL);
	memset(&d, 0, sizeof d);
	d.name = "churn_value_total";
	d.help = "0, or 7 times the id.";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = ln;
	CHECK((fam = pcpu_registry_family(reg, &d)) != NULL);
	if (strcmp(mode, "families-gap") == 0) {
		/* GAP entries used once and freed in index order: the directory
		 * copies stay long (free entries cost a copy, not a parse), and
		 * the free list hands out the highest index first, so a family
		 * lies after its series in the directory -- the order in which a
		 * copy can see a removal's series still there and its family gone. */
		char id[16];
		const char *v[1] = { id };

		for (k = 0; k < GAP; k++) {
			snprintf(id, sizeof id, "%d", 1000000 + k);
			CHECK(pcpu_family_counter(fam, v) != NULL);
		}
		for (k = 0; k < GAP; k++) {
			snprintf(id, sizeof id, "%d", 1000000 + k);
			CHECK(pcpu_family_remove(fam, v) == 0);
		}
	}
	CHECK((r = pcpu_reader_open("churn", &ro)) != NULL);

	for (k = 0; k < nwriters; k++)
		CHECK(pthread_create(&t[k], NULL, nwriters == 1 ? families_writer : writer,
				     (void *)(uintptr_t)(k + 1)) == 0);
	end = now_s() + seconds;
	bound = now_s() + 600;
	for (;;) {
		if (snaps % 64 == 0) {
			double t = now_s();
			int done = (max_snaps && snaps >= max_snaps) || t >= end;
			int enough = snaps > MIN_SNAPS &&
				     __atomic_load_n(&live_ops, __ATOMIC_RELAXED) > MIN_OPS;

			if ((done && enough) || t >= bound)
				break;
		}
		if (pcpu_reader_snapshot(r, snaps % 4 == 0 ? PCPU_READER_PER_SLOT : 0, &s) != 0) {
			/* Counted, not fatal: the figure is the point. */
			if (failed++ < 5)
				fprintf(stderr, "snapshot %zu failed: %s\n", snaps, pcpu_reader_error());
			snaps++;
			continue;
		}
		check_snapshot(s, &seen);
		unstable += !s->stable;
		changed += s->changed;
		pcpu_reader_snapshot_free(s);
		snaps++;
	}
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
	for (k = 0; k < nwriters; k++) {
		void *n;
		pthread_join(t[k], &n);
		ops += (long)n;
	}

	/* Quiet now: stable, and the same as the writer's own view. */
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0);
	CHECK(s->stable && s->changed == 0);
	{
		char *a, *b;
		size_t al, bl;

		CHECK(pcpu_registry_write(reg, PCPU_FORMAT_OPENMETRICS, &a, &al) == 0);
		CHECK(pcpu_snapshot_write(&s->snapshot, PCPU_FORMAT_OPENMETRICS, &b, &bl) == 0);
		if (al != bl || memcmp(a, b, al) != 0) {
			FILE *f = fopen("/tmp/churn-writer.txt", "w");
			fwrite(a, 1, al, f);
			fclose(f);
			f = fopen("/tmp/churn-reader.txt", "w");
			fwrite(b, 1, bl, f);
			fclose(f);
			fprintf(stderr, "final snapshot differs from the writer's exposition "
					"(/tmp/churn-writer.txt, /tmp/churn-reader.txt)\n");
			exit(1);
		}
		free(a);
		free(b);
	}
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	pcpu_registry_destroy(reg);
	rmdir(dir);
	printf("test_segment_churn %s: %ld registry changes, %zu snapshots, %zu failed (%zu retried "
	       "to the bound, %zu entries left out as changing, %zu series checked)\n",
	       mode, ops, snaps, failed, unstable, changed, seen);
	CHECK(failed == 0);
	CHECK(snaps > MIN_SNAPS && ops > MIN_OPS);
	return 0;
}
