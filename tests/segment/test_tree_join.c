/*
 * pcpu_segment_join() and pcpu_segment_leave(): a process exec()ed by a
 * shared registry's tree joins it, as a server's new binary does in a
 * binary upgrade, and the tree's processes leave it.
 *
 *   test_tree_join upgrade WORKERS ADDS   the upgrade, counted (below)
 *   test_tree_join refusals               every refusal, with its errno
 *
 * upgrade: an old master publishes a tree, counts a little itself, forks
 * WORKERS workers that each add ADDS times to a series they share and to
 * one of their own, and meanwhile fork()s and exec()s the new master (this
 * program again). The new master joins the tree by path, finds the old
 * master's value, forks WORKERS workers of its own that count the same way
 * at the same time, into the same series. The old master then leaves (0:
 * the new one holds the tree) and exits; the new master counts once more
 * after it is gone, reads the tree back as pcpustat does -- one segment,
 * the first publisher's pid, every value exactly what was added -- and
 * leaves last (1: the name is removed). Run in every rseq mode.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/pcpu.h>

#include "check.h"

static const struct pcpu_histogram_layout lat_layout = {
	.scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 2, .export_per_octave = 1};

struct fams {
	pcpu_family_t *jobs, *lat;
};

static void configure(void)
{
	struct pcpu_config cfg = PCPU_CONFIG_INIT;

	cfg.index = PCPU_INDEX_CPU; /* no PCPU_INDEX=cpu needed: the program chooses */
	CHECK(pcpu_configure(&cfg) == 0);
}

static pcpu_registry_t *registry(struct fams *f)
{
	pcpu_registry_t *reg = pcpu_registry_create();

	CHECK(reg);
	f->jobs = pcpu_registry_family(reg, &(struct pcpu_family_desc){
		.name = "jobs", .help = "Jobs done", .type = PCPU_METRIC_COUNTER, .nlabels = 1,
		.label_names = (const char *[]){"who"}});
	f->lat = pcpu_registry_family(reg, &(struct pcpu_family_desc){
		.name = "job_seconds", .help = "Job time", .type = PCPU_METRIC_HISTOGRAM,
		.nlabels = 1, .label_names = (const char *[]){"who"}, .scale_exp10 = -6,
		.histogram = &lat_layout});
	CHECK(f->jobs && f->lat);
	return reg;
}

static pcpu_counter_t series(struct fams *f, const char *who)
{
	pcpu_counter_t c = pcpu_family_counter(f->jobs, (const char *[]){who});

	if (!c)
		fprintf(stderr, "series %s: %s\n", who, pcpu_stats_error());
	CHECK(c);
	return c;
}

/* A worker: ADDS adds to "shared" and to its own series, each with a
 * histogram record, registering as it goes. */
static void worker(struct fams *f, const char *gen, int i, long adds)
{
	char own[32];
	pcpu_counter_t shared = series(f, "shared"), mine;
	pcpu_histogram_t *h = pcpu_family_histogram(f->lat, (const char *[]){"shared"});

	snprintf(own, sizeof own, "%s-%d", gen, i);
	mine = series(f, own);
	CHECK(h);
	for (long n = 0; n < adds; n++) {
		pcpu_counter_inc(shared);
		pcpu_counter_inc(mine);
		pcpu_histogram_record(h, 1000 + n % 5000);
	}
	_exit(0);
}

static void wait_all(int n)
{
	for (int i = 0; i < n; i++) {
		int st;

		CHECK(wait(&st) > 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

/* The new master (exec()ed by the old one). */
static int new_master(const char *path, int workers, long adds, int go_fd)
{
	struct fams f;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	struct pcpu_reader_snapshot *s;
	pcpu_reader_t *r;
	char name[80], c;
	uint64_t want;
	int found = 0;

	configure();
	reg = registry(&f);
	seg = pcpu_segment_join(reg, path);
	if (!seg)
		fprintf(stderr, "join: %s\n", pcpu_segment_error());
	CHECK(seg);
	CHECK(!strcmp(pcpu_segment_path(seg), path));
	/* The old master's count, found, not restarted. */
	CHECK_EQ_U64(pcpu_counter_fetch(series(&f, "pre")), 5);
	for (int i = 0; i < workers; i++)
		if (fork() == 0)
			worker(&f, "new", i, adds);
	wait_all(workers);
	/* The old master quits (its workers are done): the tree is ours. */
	CHECK(read(go_fd, &c, 1) == 0);
	pcpu_counter_inc(series(&f, "pre"));
	pcpu_counter_add(series(&f, "after"), 7);

	/* Read back as pcpustat does: one segment, the publisher's pid. */
	snprintf(name, sizeof name, "%s", strrchr(path, '/') + 1);
	r = pcpu_reader_open(path, NULL);
	if (!r)
		fprintf(stderr, "reader: %s\n", pcpu_reader_error());
	CHECK(r);
	CHECK(pcpu_reader_pid(r) == (pid_t)atoi(strchr(name, '.') + 1));
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0);
	CHECK(s->state == PCPU_SEGMENT_LIVE); /* its publisher is gone; the tree lives */
	for (size_t i = 0; i < s->snapshot.nfamilies; i++) {
		const struct pcpu_snapshot_family *fam = &s->snapshot.families[i];

		for (size_t j = 0; j < fam->nseries; j++) {
			const char *who = fam->series[j].label_values[0];

			if (!strcmp(fam->name, "jobs")) {
				if (!strcmp(who, "shared"))
					want = 2 * (uint64_t)workers * (uint64_t)adds;
				else if (!strcmp(who, "pre"))
					want = 6;
				else if (!strcmp(who, "after"))
					want = 7;
				else
					want = (uint64_t)adds;
				if (fam->series[j].value.counter != want)
					fprintf(stderr, "jobs{who=%s} = %llu, want %llu\n", who,
						(unsigned long long)fam->series[j].value.counter,
						(unsigned long long)want);
				CHECK_EQ_U64(fam->series[j].value.counter, want);
				found++;
			} else if (!strcmp(fam->name, "job_seconds")) {
				uint64_t n = 0;

				for (size_t b = 0; b < fam->nbuckets; b++)
					n += fam->series[j].value.histogram.counts[b];
				CHECK_EQ_U64(n, 2 * (uint64_t)workers * (uint64_t)adds);
				found++;
			}
		}
	}
	/* shared, pre, after, old-0..W-1, new-0..W-1; one histogram. */
	CHECK_EQ_U64(found, 3 + 2 * workers + 1);
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	/* Last out: the name goes. */
	CHECK(pcpu_segment_leave(seg) == 1);
	CHECK(access(path, F_OK) != 0 && errno == ENOENT);
	CHECK(pcpu_segment_leave(seg) == 0); /* left already */
	pcpu_registry_destroy(reg);
	printf("test_tree_join: new master: every value exact, left last\n");
	return 0;
}

static int upgrade(int workers, long adds)
{
	char dir[] = "/tmp/pcpu-join-XXXXXX", arg_w[16], arg_n[32];
	int go[2], st;
	pid_t old, newm;

	CHECK(mkdtemp(dir));
	/* The new master outlives the old one: reaped here, as init would. */
	CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
	CHECK(pipe(go) == 0);
	old = fork();
	CHECK(old >= 0);
	if (old == 0) {
		struct pcpu_segment_options o = {.dir = dir, .flags = PCPU_SEGMENT_SHARED_TREE};
		struct fams f;
		pcpu_registry_t *reg;
		pcpu_segment_t *seg;

		configure();
		reg = registry(&f);
		seg = pcpu_segment_publish(reg, "upgrade", &o);
		CHECK(seg);
		pcpu_counter_add(series(&f, "pre"), 5);
		for (int i = 0; i < workers; i++)
			if (fork() == 0)
				worker(&f, "old", i, adds);
		/* The binary upgrade: fork() and exec() the new master. */
		snprintf(arg_w, sizeof arg_w, "%d", workers);
		snprintf(arg_n, sizeof arg_n, "%ld", adds);
		newm = fork();
		CHECK(newm >= 0);
		if (newm == 0) {
			/* The new master learns that the old tree's processes
			 * are gone from the pipe: read end as fd 3, no write
			 * end, so it reads EOF once they all exited. */
			CHECK(dup2(go[0], 3) == 3);
			close(go[0]);
			close(go[1]);
			execl("/proc/self/exe", "test_tree_join", "newmaster", pcpu_segment_path(seg),
			      arg_w, arg_n, (char *)NULL);
			_exit(127);
		}
		close(go[0]);
		wait_all(workers);
		/* Quitting: the new master holds the tree, so we are not last. */
		CHECK(pcpu_segment_leave(seg) == 0);
		{
			char p[512];

			snprintf(p, sizeof p, "%s", pcpu_segment_path(seg));
			pcpu_registry_destroy(reg); /* removes nothing now */
			CHECK(access(p, F_OK) == 0);
		}
		_exit(0);
	}
	close(go[1]);
	/* Every process but the new master drops the pipe's write end when
	 * it exits: the new master reads EOF once the old tree is gone. */
	CHECK(waitpid(old, &st, 0) == old);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The new master and its workers (reparented to us). */
	for (;;) {
		pid_t p = wait(&st);

		if (p < 0) {
			CHECK(errno == ECHILD);
			break;
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "process %d: status 0x%x\n", (int)p, st);
			return 1;
		}
	}
	rmdir(dir);
	printf("test_tree_join: upgrade of %d + %d workers, %ld adds each: exact\n", workers, workers,
	       adds);
	return 0;
}

static int refusals(void)
{
	char dir[] = "/tmp/pcpu-join-XXXXXX", path[512], link2[512];
	struct pcpu_segment_options tree = {.flags = PCPU_SEGMENT_SHARED_TREE};
	struct pcpu_segment_options plain = {0};
	struct fams f;
	pcpu_registry_t *a, *b, *c;
	pcpu_segment_t *sa, *sp;
	int fd;
	uint16_t minor;

	configure();
	CHECK(mkdtemp(dir));
	tree.dir = plain.dir = dir;
	a = registry(&f);
	sa = pcpu_segment_publish(a, "tree", &tree);
	CHECK(sa);
	snprintf(path, sizeof path, "%s", pcpu_segment_path(sa));

	/* No such file; not a segment's name; NULLs. */
	b = pcpu_registry_create();
	CHECK(!pcpu_segment_join(b, "/tmp/nonexistent-dir-xyz/pcpu.1.x") && errno == ENOENT);
	CHECK(!pcpu_segment_join(b, "/tmp/not-a-segment") && errno == EINVAL);
	CHECK(!pcpu_segment_join(NULL, path) && errno == EINVAL);
	CHECK(!pcpu_segment_join(b, NULL) && errno == EINVAL);
	/* A registry with series cannot join (its counters live elsewhere). */
	CHECK(pcpu_registry_counter(b, "x", NULL));
	CHECK(!pcpu_segment_join(b, path) && errno == EBUSY);
	pcpu_registry_destroy(b);
	/* A family the tree has with another type. */
	b = pcpu_registry_create();
	CHECK(pcpu_registry_family(b, &(struct pcpu_family_desc){.name = "jobs",
								  .type = PCPU_METRIC_GAUGE}));
	CHECK(!pcpu_segment_join(b, path) && errno == EEXIST);
	pcpu_registry_destroy(b);
	/* An ordinary segment is no tree. */
	c = pcpu_registry_create();
	sp = pcpu_segment_publish(c, "plain", &plain);
	CHECK(sp);
	b = pcpu_registry_create();
	CHECK(!pcpu_segment_join(b, pcpu_segment_path(sp)) && errno == EINVAL);
	CHECK(pcpu_segment_leave(sp) == -1 && errno == EINVAL);
	pcpu_registry_destroy(b);
	pcpu_registry_destroy(c);
	/* A tree of another format version. */
	c = pcpu_registry_create();
	sp = pcpu_segment_publish(c, "other", &tree);
	CHECK(sp);
	fd = open(pcpu_segment_path(sp), O_RDWR);
	CHECK(fd >= 0);
	CHECK(pread(fd, &minor, 2, 10) == 2);
	minor++;
	CHECK(pwrite(fd, &minor, 2, 10) == 2);
	close(fd);
	b = pcpu_registry_create();
	CHECK(!pcpu_segment_join(b, pcpu_segment_path(sp)) && errno == EPROTONOSUPPORT);
	pcpu_registry_destroy(b);
	pcpu_registry_destroy(c);
	/* Another user's file (as root: given away). */
	if (geteuid() == 0) {
		CHECK(chown(path, 65534, (gid_t)-1) == 0);
		b = pcpu_registry_create();
		CHECK(!pcpu_segment_join(b, path) && errno == EPERM);
		pcpu_registry_destroy(b);
		CHECK(chown(path, 0, (gid_t)-1) == 0);
	}
	/* It works, and joining twice does not. */
	b = registry(&f);
	{
		pcpu_segment_t *sb = pcpu_segment_join(b, path), *sc;

		CHECK(sb);
		c = registry(&f);
		CHECK(!pcpu_segment_join(b, path) && errno == EBUSY);
		/* A closed tree, seen through a second name of its file. */
		snprintf(link2, sizeof link2, "%s/pcpu.1.second", dir);
		CHECK(link(path, link2) == 0);
		/* The publisher leaves first: b holds the tree. */
		CHECK(pcpu_segment_leave(sa) == 0);
		CHECK(access(path, F_OK) == 0);
		sc = pcpu_segment_join(c, path);
		CHECK(sc);
		CHECK(pcpu_segment_leave(sb) == 0); /* c holds it */
		CHECK(pcpu_segment_leave(sc) == 1); /* last: closed, the name removed */
		CHECK(access(path, F_OK) != 0);
		pcpu_registry_destroy(b);
		pcpu_registry_destroy(c);
	}
	c = registry(&f);
	CHECK(!pcpu_segment_join(c, link2) && errno == ESRCH);
	pcpu_registry_destroy(c);
	unlink(link2);
	pcpu_registry_destroy(a);
	rmdir(dir);
	printf("test_tree_join: refusals as documented\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "upgrade"))
		return upgrade(atoi(argv[2]), atol(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "newmaster"))
		return new_master(argv[2], atoi(argv[3]), atol(argv[4]), 3);
	if (argc == 2 && !strcmp(argv[1], "refusals"))
		return refusals();
	fprintf(stderr, "usage: test_tree_join upgrade WORKERS ADDS | refusals\n");
	return 2;
}
