/*
 * The segment end to end, with real files in a private directory:
 *  - what a reader sees equals what the writing process exposes itself
 *    (the same bytes from the exposition writers, all formats), per-slot
 *    values add up, and registration and removal show immediately;
 *  - publish refuses what it must (series already there, bad names, unsafe
 *    directories, an existing file or symlink) and creates 0600 / 0640;
 *  - the reader refuses symlinks, foreign owners, other format versions,
 *    and tells a dead writer (pid + start time) and a closed segment apart;
 *  - several processes with one name, pruning, a full directory, fork().
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "format.h"

static char dir[256];
static struct pcpu_segment_options wopt;
static struct pcpu_reader_options ropt;

static void setup_dir(void)
{
	strcpy(dir, "/tmp/pcpu-seg-test.XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	memset(&wopt, 0, sizeof wopt);
	memset(&ropt, 0, sizeof ropt);
	wopt.dir = dir;
	ropt.dir = dir;
}

static void rm_rf(const char *d)
{
	char cmd[600];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
	CHECK(system(cmd) == 0);
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* ---- round trip ------------------------------------------------------------------ */

struct ep_stats {
	struct pcpu_counter pkts, bytes;
	struct pcpu_gauge flows;
};

static const struct pcpu_stats_field ep_fields[] = {
	PCPU_STATS_COUNTER(struct ep_stats, pkts, "ep_packets", "Packets seen."),
	PCPU_STATS_COUNTER(struct ep_stats, bytes, "ep_bytes", "Bytes seen."),
	PCPU_STATS_GAUGE(struct ep_stats, flows, "ep_flows", "Flows open."),
};

struct adder {
	pcpu_counter_t c;
	pcpu_histogram_t *h;
	int n;
};

static void *add_thread(void *arg)
{
	struct adder *a = arg;
	int i;

	for (i = 0; i < a->n; i++) {
		pcpu_counter_add(a->c, 3);
		pcpu_histogram_record(a->h, i % 2000);
	}
	return NULL;
}

static void same_output(pcpu_registry_t *reg, const struct pcpu_reader_snapshot *s)
{
	static const enum pcpu_format fmts[] = { PCPU_FORMAT_PROMETHEUS, PCPU_FORMAT_OPENMETRICS,
						 PCPU_FORMAT_JSON };
	size_t i;

	for (i = 0; i < 3; i++) {
		char *a, *b;
		size_t al, bl;

		CHECK(pcpu_registry_write(reg, fmts[i], &a, &al) == 0);
		CHECK(pcpu_snapshot_write(&s->snapshot, fmts[i], &b, &bl) == 0);
		if (al != bl || memcmp(a, b, al) != 0) {
			fprintf(stderr, "format %d differs:\n--- writer ---\n%s\n--- reader ---\n%s\n",
				(int)fmts[i], a, b);
			exit(1);
		}
		free(a);
		free(b);
	}
}

static void check_round_trip(void)
{
	static const char *const ln[] = { "method", "path" };
	static const char *const hostile[] = { "GET", "a\"b\\c\nd \xc3\xa9\xe2\x82\xac" };
	static const char *const plain[] = { "POST", "/" };
	static const char *const ifname[] = { "ifname" };
	static const char *const eth0[] = { "eth0" }, *const eth1[] = { "eth1" };
	static const int64_t bounds[] = { 1000, 5000, 25000, 100000 };
	struct pcpu_histogram_layout exp = { PCPU_HISTOGRAM_EXPLICIT, bounds, 4, 0, 0, 0, 0, 0, 0 };
	struct pcpu_histogram_layout ll = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0, 3, 1000000, 0, 0, 0, 0 };
	struct pcpu_family_desc d;
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg;
	pcpu_family_t *req, *lat, *sz, *empty;
	pcpu_counter_t c1, c2;
	pcpu_gauge_t g;
	pcpu_histogram_t *h1, *h2;
	struct ep_stats *e0, *e1;
	pcpu_reader_t *r;
	struct pcpu_reader_snapshot *s;
	struct adder ad[4];
	pthread_t t[4];
	struct stat st;
	size_t i, f;
	int k;

	CHECK(reg);
	memset(&d, 0, sizeof d);
	d.name = "empty_total";
	d.help = "Declared before publication, never used.";
	d.type = PCPU_METRIC_COUNTER;
	CHECK((empty = pcpu_registry_family(reg, &d)) != NULL);

	seg = pcpu_segment_publish(reg, "roundtrip", &wopt);
	if (!seg) {
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
		exit(1);
	}
	CHECK(strncmp(pcpu_segment_path(seg), dir, strlen(dir)) == 0);
	CHECK(stat(pcpu_segment_path(seg), &st) == 0 && (st.st_mode & 07777) == 0600);
	CHECK(st.st_uid == geteuid());

	memset(&d, 0, sizeof d);
	d.name = "http_requests_total";
	d.help = "Requests, by \\method\\ and \"path\".\nSecond line.";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 2;
	d.label_names = ln;
	CHECK((req = pcpu_registry_family(reg, &d)) != NULL);
	CHECK((c1 = pcpu_family_counter(req, hostile)) != NULL);
	CHECK((c2 = pcpu_family_counter(req, plain)) != NULL);

	memset(&d, 0, sizeof d);
	d.name = "rpc_latency_seconds";
	d.help = "RPC latency.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.scale_exp10 = -6;
	d.histogram = &exp;
	CHECK((lat = pcpu_registry_family(reg, &d)) != NULL);
	CHECK((h1 = pcpu_family_histogram(lat, NULL)) != NULL);

	memset(&d, 0, sizeof d);
	d.name = "message_size_bytes";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.unit = "bytes";
	d.histogram = &ll;
	CHECK((sz = pcpu_registry_family(reg, &d)) != NULL);
	CHECK((h2 = pcpu_family_histogram(sz, NULL)) != NULL);

	CHECK((g = pcpu_registry_gauge(reg, "queue_depth", "Queue depth.")) != NULL);
	CHECK((e0 = pcpu_registry_struct(reg, sizeof *e0, ep_fields, 3, 1, ifname, eth0)) != NULL);
	CHECK((e1 = pcpu_registry_struct(reg, sizeof *e1, ep_fields, 3, 1, ifname, eth1)) != NULL);

	for (k = 0; k < 4; k++) {
		ad[k].c = c1;
		ad[k].h = h1;
		ad[k].n = 20000;
		CHECK(pthread_create(&t[k], NULL, add_thread, &ad[k]) == 0);
	}
	for (k = 0; k < 4; k++)
		pthread_join(t[k], NULL);
	pcpu_counter_add(c2, 5);
	pcpu_gauge_set(g, 100);
	pcpu_gauge_add(g, -7);
	for (k = 0; k < 100; k++)
		pcpu_histogram_record(h2, (int64_t)k * k * 37);
	pcpu_histogram_record(h2, 1 << 30); /* +Inf */
	pcpu_counter_add(&e0->pkts, 10);
	pcpu_counter_add(&e0->bytes, 15000);
	pcpu_gauge_inc(&e1->flows);

	r = pcpu_reader_open("roundtrip", &ropt);
	if (!r) {
		fprintf(stderr, "open: %s\n", pcpu_reader_error());
		exit(1);
	}
	CHECK(strcmp(pcpu_reader_name(r), "roundtrip") == 0 && pcpu_reader_pid(r) == getpid());
	CHECK(pcpu_reader_nslots(r) == pcpu_nslots());
	/* 2.6: the last pcpu_worker_max() slots are owned slots. */
	CHECK(pcpu_reader_owned_slots(r) == pcpu_worker_max() && pcpu_worker_max() < pcpu_nslots());
	CHECK(pcpu_reader_owned_slots(NULL) == 0);
	CHECK(pcpu_reader_state(r) == PCPU_SEGMENT_LIVE);
	CHECK(pcpu_reader_snapshot(r, PCPU_READER_PER_SLOT, &s) == 0);
	CHECK(s->stable && s->changed == 0 && !s->incomplete && s->state == PCPU_SEGMENT_LIVE);
	same_output(reg, s);

	/* Per slot: the parts add up to the value. */
	for (f = 0; f < s->snapshot.nfamilies; f++) {
		const struct pcpu_snapshot_family *fam = &s->snapshot.families[f];

		for (i = 0; i < fam->nseries; i++) {
			const int64_t *sl = pcpu_reader_snapshot_slots(s, f, i);
			uint64_t sum = 0, want = 0;
			unsigned k2;

			CHECK(sl != NULL);
			for (k2 = 0; k2 < s->nslots; k2++)
				sum += (uint64_t)sl[k2];
			if (fam->type == PCPU_METRIC_COUNTER)
				want = fam->series[i].value.counter;
			else if (fam->type == PCPU_METRIC_GAUGE)
				want = (uint64_t)fam->series[i].value.gauge;
			else
				for (k2 = 0; k2 < fam->nbuckets; k2++)
					want += fam->series[i].value.histogram.counts[k2];
			CHECK_EQ_U64(sum, want);
		}
	}
	CHECK(pcpu_reader_snapshot_slots(s, 99, 0) == NULL && errno == EINVAL);
	pcpu_reader_snapshot_free(s);
	printf("  reader output == writer output (3 formats), per-slot sums exact\n");

	/* Removal and re-registration show at once; values start from zero. */
	CHECK(pcpu_family_remove(req, plain) == 0);
	CHECK(pcpu_registry_struct_remove(reg, e0) == 0);
	CHECK(pcpu_registry_remove_family(reg, sz) == 0);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0);
	same_output(reg, s);
	pcpu_reader_snapshot_free(s);
	CHECK((c2 = pcpu_family_counter(req, plain)) != NULL);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0);
	same_output(reg, s);
	pcpu_reader_snapshot_free(s);
	printf("  removals and re-registration visible at once\n");

	/* Unpublish: the name goes, an open reader says "closed". */
	CHECK(pcpu_segment_unpublish(seg) == 0);
	CHECK(pcpu_segment_unpublish(seg) == 0);
	CHECK(!exists(pcpu_segment_path(seg)));
	CHECK(pcpu_reader_state(r) == PCPU_SEGMENT_CLOSED);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == -1 && errno == ESRCH);
	CHECK(strstr(pcpu_reader_error(), "closed"));
	pcpu_reader_close(r);
	(void)empty;
	pcpu_registry_destroy(reg); /* frees the segment too (ASan: no leak) */
	printf("  unpublish removes the file; readers see \"closed\"\n");
}

/* ---- publish: refusals and modes -------------------------------------------------- */

static void check_publish_errors(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg;
	char path[512], sub[512];
	struct stat st;
	int fd;

	CHECK(pcpu_registry_counter(reg, "early_total", "Too early.") != NULL);
	errno = 0;
	CHECK(pcpu_segment_publish(reg, "busy", &wopt) == NULL && errno == EBUSY);
	CHECK(strstr(pcpu_segment_error(), "right after"));
	snprintf(path, sizeof path, "%s/pcpu.%d.busy", dir, (int)getpid());
	CHECK(!exists(path)); /* nothing left behind */
	pcpu_registry_destroy(reg);

	reg = pcpu_registry_create();
	CHECK(pcpu_segment_publish(NULL, "x", &wopt) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_publish(reg, "", &wopt) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_publish(reg, "a/b", &wopt) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_publish(reg, ".hidden", &wopt) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_publish(reg, "-opt", &wopt) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_publish(reg,
				   "x123456789012345678901234567890123456789012345678901234567890123456",
				   &wopt) == NULL &&
	      errno == EINVAL);

	/* Unsafe directories. */
	snprintf(sub, sizeof sub, "%s/open", dir);
	CHECK(mkdir(sub, 0700) == 0 && chmod(sub, 0777) == 0);
	{
		struct pcpu_segment_options o = wopt;
		o.dir = sub;
		CHECK(pcpu_segment_publish(reg, "x", &o) == NULL && errno == EPERM);
		CHECK(strstr(pcpu_segment_error(), "not sticky"));
		CHECK(chmod(sub, 01777) == 0); /* sticky: fine */
		CHECK((seg = pcpu_segment_publish(reg, "x", &o)) != NULL);
		pcpu_segment_unpublish(seg);
		pcpu_registry_destroy(reg);
		reg = pcpu_registry_create();
		if (geteuid() == 0) {
			CHECK(chmod(sub, 0755) == 0 && chown(sub, 65534, 65534) == 0);
			CHECK(pcpu_segment_publish(reg, "x", &o) == NULL && errno == EPERM);
			CHECK(strstr(pcpu_segment_error(), "owned by another user"));
			/* A reader names that user's directory: refused unless it
			 * reads that user's segments (a member of a server's
			 * group reading the folder the server made), or anyone's. */
			{
				struct pcpu_reader_options ro = { 0 };
				struct pcpu_segment_info *list = NULL;
				size_t n = 1;

				ro.dir = sub;
				CHECK(pcpu_segment_list(&ro, &list, &n) == -1 && errno == EPERM);
				CHECK(strstr(pcpu_reader_error(), "owned by another user"));
				ro.flags = PCPU_READER_OWNER;
				ro.owner = 65534;
				CHECK(pcpu_segment_list(&ro, &list, &n) == 0 && n == 0);
				free(list);
				ro.flags = PCPU_READER_ANY_OWNER;
				CHECK(pcpu_segment_list(&ro, &list, &n) == 0 && n == 0);
				free(list);
				ro.owner = 0;
				ro.flags = PCPU_READER_OWNER; /* another owner: no */
				CHECK(pcpu_segment_list(&ro, &list, &n) == -1 && errno == EPERM);
				/* Writable by others, not sticky: refused whoever owns it. */
				CHECK(chmod(sub, 0777) == 0);
				ro.flags = PCPU_READER_ANY_OWNER;
				CHECK(pcpu_segment_list(&ro, &list, &n) == -1 && errno == EPERM);
				CHECK(strstr(pcpu_reader_error(), "not sticky"));
			}
		}
	}

	/* An existing file or symlink under our name: O_EXCL|O_NOFOLLOW. */
	snprintf(path, sizeof path, "%s/pcpu.%d.taken", dir, (int)getpid());
	CHECK((fd = open(path, O_CREAT | O_WRONLY, 0600)) >= 0);
	close(fd);
	CHECK(pcpu_segment_publish(reg, "taken", &wopt) == NULL && errno == EEXIST);
	CHECK(unlink(path) == 0);
	snprintf(sub, sizeof sub, "%s/victim", dir);
	CHECK((fd = open(sub, O_CREAT | O_WRONLY, 0600)) >= 0);
	close(fd);
	CHECK(symlink(sub, path) == 0);
	CHECK(pcpu_segment_publish(reg, "taken", &wopt) == NULL && errno == EEXIST);
	CHECK(stat(sub, &st) == 0 && st.st_size == 0); /* the target untouched */
	CHECK(unlink(path) == 0);

	/* Twice. */
	CHECK((seg = pcpu_segment_publish(reg, "twice", &wopt)) != NULL);
	CHECK(pcpu_segment_publish(reg, "twice2", &wopt) == NULL && errno == EBUSY);
	pcpu_registry_destroy(reg); /* removes the file */
	snprintf(path, sizeof path, "%s/pcpu.%d.twice", dir, (int)getpid());
	CHECK(!exists(path));

	/* Group read. */
	reg = pcpu_registry_create();
	{
		struct pcpu_segment_options o = wopt;
		o.flags = PCPU_SEGMENT_GROUP_READ;
		o.group = getegid();
		CHECK((seg = pcpu_segment_publish(reg, "grouped", &o)) != NULL);
		CHECK(stat(pcpu_segment_path(seg), &st) == 0 && (st.st_mode & 07777) == 0640 &&
		      st.st_gid == getegid());
	}
	pcpu_registry_destroy(reg);
	printf("  publish refuses: series present, bad names, unsafe dirs, existing file/symlink\n");
}

/* ---- reader: refusals --------------------------------------------------------------- */

static void copy_file(const char *from, const char *to, size_t n, void (*patch)(void *))
{
	char *buf = malloc(n);
	int in = open(from, O_RDONLY), out = open(to, O_CREAT | O_EXCL | O_WRONLY, 0600);

	CHECK(buf && in >= 0 && out >= 0);
	CHECK(pread(in, buf, n, 0) == (ssize_t)n);
	if (patch)
		patch(buf);
	CHECK(write(out, buf, n) == (ssize_t)n);
	close(in);
	close(out);
	free(buf);
}

static void patch_version(void *buf)
{
	((struct pcpu__seg_header *)buf)->version_major = 7;
	((struct pcpu__seg_header *)buf)->version_minor = 0;
}

static void check_reader_errors(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg = pcpu_segment_publish(reg, "victim", &wopt);
	char path[512], other[700], sub[512];
	struct pcpu_reader_options o;
	pcpu_reader_t *r;
	struct stat st;

	CHECK(seg);
	CHECK(pcpu_registry_counter(reg, "c_total", "A counter.") != NULL);
	errno = 0;
	CHECK(pcpu_reader_open("nosuch", &ropt) == NULL && errno == ENOENT);
	CHECK(pcpu_reader_open("999999", &ropt) == NULL && errno == ENOENT);
	CHECK(pcpu_reader_open("bad name!", &ropt) == NULL && errno == EINVAL);

	/* A symlink posing as a segment. */
	snprintf(path, sizeof path, "%s/pcpu.%d.link", dir, (int)getpid());
	CHECK(symlink(pcpu_segment_path(seg), path) == 0);
	CHECK(pcpu_reader_open("link", &ropt) == NULL && errno == ELOOP);
	CHECK(pcpu_reader_open(path, &ropt) == NULL && errno == ELOOP);
	unlink(path);

	/* Another format version, in a directory of its own. */
	snprintf(sub, sizeof sub, "%s/v", dir);
	CHECK(mkdir(sub, 0700) == 0);
	snprintf(other, sizeof other, "%s/pcpu.%d.victim", sub, (int)getpid());
	CHECK(stat(pcpu_segment_path(seg), &st) == 0);
	copy_file(pcpu_segment_path(seg), other, 4096, patch_version);
	CHECK(truncate(other, st.st_size) == 0);
	o = ropt;
	o.dir = sub;
	CHECK(pcpu_reader_open("victim", &o) == NULL && errno == EPROTONOSUPPORT);
	CHECK(strstr(pcpu_reader_error(),
		     "segment format 7.0 is not supported by this reader (it reads 2.x)"));

	/* Not a segment at all. */
	unlink(other);
	copy_file("/proc/self/exe", other, 512, NULL);
	CHECK(pcpu_reader_open("victim", &o) == NULL && errno == EBADMSG);

	/* Owned by someone else. */
	if (geteuid() == 0) {
		CHECK(chown(pcpu_segment_path(seg), 65534, 65534) == 0);
		CHECK(pcpu_reader_open("victim", &ropt) == NULL && errno == EPERM);
		o = ropt;
		o.flags = PCPU_READER_OWNER;
		o.owner = 65534;
		/* The expected owner, but not the user the writer runs as. */
		CHECK(pcpu_reader_open("victim", &o) == NULL && errno == EPERM);
		o.flags = PCPU_READER_ANY_OWNER;
		CHECK(pcpu_reader_open("victim", &o) == NULL && errno == EPERM);
		CHECK(chown(pcpu_segment_path(seg), 0, 0) == 0);
	}
	o = ropt;
	o.flags = PCPU_READER_ANY_OWNER;
	CHECK((r = pcpu_reader_open("victim", &o)) != NULL);
	pcpu_reader_close(r);

	/* By fd, pid and file name. */
	{
		int fd = open(pcpu_segment_path(seg), O_RDONLY);
		char pid[32];

		CHECK(fd >= 0 && (r = pcpu_reader_open_fd(fd, &ropt)) != NULL);
		pcpu_reader_close(r);
		close(fd);
		snprintf(pid, sizeof pid, "%d", (int)getpid());
		CHECK((r = pcpu_reader_open(pid, &ropt)) != NULL);
		pcpu_reader_close(r);
		snprintf(pid, sizeof pid, "pcpu.%d.victim", (int)getpid());
		CHECK((r = pcpu_reader_open(pid, &ropt)) != NULL);
		pcpu_reader_close(r);
	}
	pcpu_registry_destroy(reg);
	printf("  reader refuses: symlinks, other owners, other versions, non-segments\n");
}

/* ---- writers that die, several processes, pruning ---------------------------------- */

/* A child process that publishes `name`, counts 42, says "ready" on fd 3,
 * then waits for a byte on fd 4 (or dies without unpublishing if `die`).
 * It runs as a fresh image of this program (fork + exec), so that it does
 * not create zones in a forked copy of a multi-threaded parent. */
static int child_main(const char *segdir, const char *name, int die)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	struct pcpu_segment_options o;
	pcpu_segment_t *seg;
	char c = 'r';

	memset(&o, 0, sizeof o);
	o.dir = segdir;
	seg = pcpu_segment_publish(reg, name, &o);
	if (!seg)
		return 3;
	pcpu_counter_add(pcpu_registry_counter(reg, "answer_total", "The answer."), 42);
	if (write(3, &c, 1) != 1)
		return 4;
	if (die)
		_exit(0); /* no unpublish: the file stays behind */
	if (read(4, &c, 1) < 0)
		return 5;
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	return 0;
}

static pid_t child_writer(const char *name, int die, int *ready_fd, int *go_fd)
{
	int rp[2], gp[2];
	pid_t pid;

	CHECK(pipe(rp) == 0 && pipe(gp) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (dup2(rp[1], 3) < 0 || dup2(gp[0], 4) < 0)
			_exit(6);
		execl("/proc/self/exe", "test_segment", "--child", dir, name, die ? "die" : "wait",
		      (char *)NULL);
		_exit(7);
	}
	close(rp[1]);
	close(gp[0]);
	{
		char c;
		CHECK(read(rp[0], &c, 1) == 1);
	}
	close(rp[0]);
	*ready_fd = -1;
	*go_fd = gp[1];
	return pid;
}

static void finish_child(pid_t pid, int go_fd)
{
	int st;

	if (go_fd >= 0) {
		CHECK(write(go_fd, "g", 1) == 1);
		close(go_fd);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void check_gone_and_many(void)
{
	struct pcpu_segment_info *info;
	struct pcpu_reader_options o;
	struct pcpu_reader_snapshot *s;
	pcpu_reader_t *r;
	size_t n, removed, i;
	pid_t a, b, ghost;
	int ra, ga, rb, gb, rg, gg;
	char pid[32];

	/* A writer that died. */
	ghost = child_writer("ghost", 1, &rg, &gg);
	finish_child(ghost, -1);
	close(gg);
	CHECK((r = pcpu_reader_open("ghost", &ropt)) != NULL);
	CHECK(pcpu_reader_state(r) == PCPU_SEGMENT_GONE);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == -1 && errno == ESRCH);
	CHECK(strstr(pcpu_reader_error(), "gone"));
	pcpu_reader_close(r);
	o = ropt;
	o.flags = PCPU_READER_ALLOW_STALE;
	CHECK((r = pcpu_reader_open("ghost", &o)) != NULL);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0 && s->state == PCPU_SEGMENT_GONE);
	CHECK(s->snapshot.nfamilies == 1 && s->snapshot.families[0].series[0].value.counter == 42);
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	printf("  a dead writer is detected (pid + start time); its last values stay readable\n");

	/* Two live writers of one name. */
	a = child_writer("twin", 0, &ra, &ga);
	b = child_writer("twin", 0, &rb, &gb);
	CHECK(pcpu_reader_open("twin", &ropt) == NULL && errno == ENOTUNIQ);
	snprintf(pid, sizeof pid, "%d", (int)b);
	CHECK((r = pcpu_reader_open(pid, &ropt)) != NULL && pcpu_reader_pid(r) == b);
	pcpu_reader_close(r);

	CHECK(pcpu_segment_list(&ropt, &info, &n) == 0);
	CHECK(n == 3);
	CHECK(strcmp(info[0].name, "ghost") == 0 && info[0].state == PCPU_SEGMENT_GONE);
	for (i = 1; i < 3; i++)
		CHECK(strcmp(info[i].name, "twin") == 0 && info[i].state == PCPU_SEGMENT_LIVE &&
		      info[i].error == 0 && info[i].nfamilies == 1 && info[i].nseries == 1);
	CHECK(info[1].pid < info[2].pid);
	free(info);

	/* One of them exits properly: the name is unique again. */
	finish_child(a, ga);
	CHECK((r = pcpu_reader_open("twin", &ropt)) != NULL && pcpu_reader_pid(r) == b);
	pcpu_reader_close(r);
	finish_child(b, gb);

	/* Pruning removes the dead writer's file only. */
	ghost = child_writer("ghost2", 1, &rg, &gg);
	finish_child(ghost, -1);
	close(gg);
	CHECK(pcpu_segment_prune(&ropt, &removed) == 0 && removed == 2);
	CHECK(pcpu_segment_list(&ropt, &info, &n) == 0 && n == 0);
	free(info);

	/* A new publisher of a name removes its dead predecessors. */
	ghost = child_writer("phoenix", 1, &rg, &gg);
	finish_child(ghost, -1);
	close(gg);
	{
		pcpu_registry_t *reg = pcpu_registry_create();
		pcpu_segment_t *seg = pcpu_segment_publish(reg, "phoenix", &wopt);

		CHECK(seg);
		CHECK(pcpu_segment_list(&ropt, &info, &n) == 0 && n == 1 && info[0].pid == getpid());
		free(info);
		pcpu_registry_destroy(reg);
	}
	printf("  several writers of a name (ENOTUNIQ, by pid), list, prune, stale removal\n");
}

/* ---- a full directory; fork ----------------------------------------------------------- */

static void check_full_and_fork(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	struct pcpu_segment_options o = wopt;
	struct pcpu_reader_snapshot *s;
	pcpu_segment_t *seg;
	pcpu_reader_t *r;
	pcpu_counter_t c;
	char name[32];
	int i, st;
	pid_t pid;

	o.max_entries = 4;
	CHECK((seg = pcpu_segment_publish(reg, "small", &o)) != NULL);
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof name, "c%d_total", i);
		CHECK(pcpu_registry_counter(reg, name, NULL) != NULL);
	}
	CHECK(pcpu_segment_dropped(seg) == 2); /* 6 entries wanted, 4 fit */
	CHECK((r = pcpu_reader_open("small", &ropt)) != NULL);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0 && s->incomplete == 1);
	CHECK(s->snapshot.nfamilies == 2); /* c2 did not fit: neither family nor series */
	pcpu_reader_snapshot_free(s);

	/* fork(): the child leaves the segment: its adds stay its own. */
	c = pcpu_registry_counter(reg, "c0_total", NULL);
	pcpu_counter_add(c, 1);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		pcpu_counter_add(c, 1000);
		CHECK_EQ_U64(pcpu_counter_fetch(c), 1001);
		CHECK(pcpu_segment_path(seg) == NULL);
		pcpu_segment_unpublish(seg); /* a child's unpublish does nothing */
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(exists(pcpu_segment_path(seg)));
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0);
	CHECK(strcmp(s->snapshot.families[0].name, "c0") == 0);
	CHECK_EQ_U64(s->snapshot.families[0].series[0].value.counter, 1);
	CHECK_EQ_U64(pcpu_counter_fetch(c), 1);
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	pcpu_registry_destroy(reg);
	printf("  a full directory is reported incomplete; fork()ed children leave the segment\n");
}

/* The GROUP entry of a segment file (the only one), read with pread as
 * any reader would: its seq and its two values. */
static void group_entry(const char *path, uint64_t *seq, int64_t v[2])
{
	struct pcpu__seg_header h;
	struct pcpu__seg_entry e;
	uint64_t i;
	int fd = open(path, O_RDONLY), found = 0;

	CHECK(fd >= 0);
	CHECK(pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h);
	for (i = 0; i < h.entries_used; i++) {
		CHECK(pread(fd, &e, sizeof e, (off_t)(h.entries_offset + i * h.entry_size)) ==
		      (ssize_t)sizeof e);
		if (e.kind != PCPU__SEG_GROUP)
			continue;
		CHECK(!found && e.u32a == 2 && e.blob_len == 16);
		CHECK(pread(fd, v, 16, (off_t)(h.strings_offset + e.blob_off)) == 16);
		*seq = e.seq;
		found = 1;
	}
	close(fd);
	CHECK(found);
}

/* 2.3: the writer stores each group's read into its GROUP entry under the
 * entry's seqlock (odd while written: the seq grows by exactly 2 per
 * store), at every collection, and frees it with its last member. */
static void check_group_entries(void)
{
	static const char *const ln[] = { "flow" }, *const a[] = { "a" };
	struct pcpu_family_desc m[2];
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg;
	pcpu_group_family_t *gf;
	pcpu_group_t *g;
	uint64_t s1, s2;
	int64_t v[2];

	CHECK(reg != NULL);
	seg = pcpu_segment_publish(reg, "groups", &wopt);
	CHECK(seg != NULL);
	memset(m, 0, sizeof m);
	m[0].name = "g_packets_total";
	m[1].name = "g_bytes_total";
	m[0].type = m[1].type = PCPU_METRIC_COUNTER;
	m[0].nlabels = m[1].nlabels = 1;
	m[0].label_names = m[1].label_names = ln;
	gf = pcpu_registry_group(reg, m, 2);
	CHECK(gf != NULL);
	g = pcpu_group_family_series(gf, a);
	CHECK(g != NULL);
	pcpu_group_add2(g, 0, 3, 4500);
	group_entry(pcpu_segment_path(seg), &s1, v);
	CHECK(v[0] == 0 && v[1] == 0 && !(s1 & 1)); /* not collected yet */
	CHECK(pcpu_registry_collect(reg) == 0);
	group_entry(pcpu_segment_path(seg), &s2, v);
	CHECK(v[0] == 3 && v[1] == 4500);
	CHECK_EQ_U64(s2, s1 + 2);
	{
		/* A group member (a counter family is named without "_total") has
		 * no per-slot split: NULL with ENODATA,
		 * its value read whole. */
		pcpu_reader_t *r = pcpu_reader_open("groups", &ropt);
		struct pcpu_reader_snapshot *rs;
		size_t f, found = 0;

		CHECK(r != NULL);
		CHECK(pcpu_reader_snapshot(r, PCPU_READER_PER_SLOT, &rs) == 0);
		for (f = 0; f < rs->snapshot.nfamilies; f++) {
			if (strcmp(rs->snapshot.families[f].name, "g_packets") != 0)
				continue;
			CHECK(rs->snapshot.families[f].nseries == 1);
			CHECK_EQ_U64(rs->snapshot.families[f].series[0].value.counter, 3);
			errno = 0;
			CHECK(pcpu_reader_snapshot_slots(rs, f, 0) == NULL && errno == ENODATA);
			found++;
		}
		CHECK(found == 1);
		pcpu_reader_snapshot_free(rs);
		pcpu_reader_close(r);
	}
	CHECK(pcpu_group_family_remove(gf, a) == 0);
	{
		struct pcpu__seg_header h;
		struct pcpu__seg_entry e;
		uint64_t i;
		int fd = open(pcpu_segment_path(seg), O_RDONLY);

		CHECK(fd >= 0 && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h);
		for (i = 0; i < h.entries_used; i++) {
			CHECK(pread(fd, &e, sizeof e, (off_t)(h.entries_offset + i * h.entry_size)) ==
			      (ssize_t)sizeof e);
			CHECK(e.kind != PCPU__SEG_GROUP && e.kind != PCPU__SEG_GROUP_SERIES);
		}
		close(fd);
	}
	pcpu_registry_destroy(reg);
	printf("  group entries: stored under their seq at each collection, freed with the group\n");
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2], argv[3], strcmp(argv[4], "die") == 0);
	printf("test_segment:\n");
	setup_dir();
	check_round_trip();
	check_publish_errors();
	check_reader_errors();
	check_gone_and_many();
	check_full_and_fork();
	check_group_entries();
	rm_rf(dir);
	printf("test_segment: ok\n");
	return 0;
}
