/*
 * Registration and removal while readers read: writer threads add and
 * remove series (and whole families, and registered structs) as fast as
 * they can, series churn_value_total{id="K"} only ever holding 0 or 7*K,
 * while the main thread snapshots the segment in a loop. Every snapshot
 * must be valid and every value it shows must belong to its series (a
 * value of a removed series reused by another would show as 7*M under id
 * K). Once the writers stop, a snapshot is stable and equals the writer's
 * own exposition.
 *
 * Usage: test_segment_churn [SECONDS]
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

#define WRITERS 3

static pcpu_registry_t *reg;
static pcpu_family_t *fam;
static int stop_flag;

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

int main(int argc, char **argv)
{
	static const char *const ln[] = { "id" };
	double seconds = argc > 1 ? atof(argv[1]) : 1.5, end;
	struct pcpu_segment_options o;
	struct pcpu_reader_options ro;
	struct pcpu_family_desc d;
	struct pcpu_reader_snapshot *s;
	pthread_t t[WRITERS];
	pcpu_reader_t *r;
	char dir[] = "/tmp/pcpu-churn.XXXXXX";
	size_t snaps = 0, unstable = 0, changed = 0, seen = 0;
	long ops = 0;
	int k;

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
	CHECK((r = pcpu_reader_open("churn", &ro)) != NULL);

	for (k = 0; k < WRITERS; k++)
		CHECK(pthread_create(&t[k], NULL, writer, (void *)(uintptr_t)(k + 1)) == 0);
	end = now_s() + seconds;
	while (now_s() < end) {
		if (pcpu_reader_snapshot(r, snaps % 4 == 0 ? PCPU_READER_PER_SLOT : 0, &s) != 0) {
			fprintf(stderr, "snapshot %zu: %s\n", snaps, pcpu_reader_error());
			exit(1);
		}
		check_snapshot(s, &seen);
		unstable += !s->stable;
		changed += s->changed;
		pcpu_reader_snapshot_free(s);
		snaps++;
	}
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
	for (k = 0; k < WRITERS; k++) {
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
	CHECK(snaps > 10 && ops > 1000);
	printf("test_segment_churn: %ld registry changes, %zu snapshots (%zu retried to the bound, "
	       "%zu entries left out as changing, %zu series checked): ok\n",
	       ops, snaps, unstable, changed, seen);
	return 0;
}
