/*
 * Collectors (pcpu_family_callback): values computed at read time, and the
 * lock and re-entry contract of pcpu_callback_fn.
 *
 *  - values: a gauge and a scaled counter computed by callbacks appear in
 *    snapshots and expositions with the callbacks' current values;
 *  - failure: a failing callback leaves only its series out, the exposition
 *    stays valid, pcpu_registry_collect() counts it and the error names the
 *    family; the series comes back when the callback works again;
 *  - re-entry: a callback that snapshots, writes, collects, or removes a
 *    callback series of its own registry gets EDEADLK, never a deadlock; it
 *    may register and update series and remove plain ones;
 *  - blocking: while a callback is held in its call, registration and
 *    updates complete (timed by nothing: they would never return if they
 *    waited for it); a second snapshot waits for the first; removing the
 *    sleeping callback's series waits until it returned, and the callback
 *    is never called after that;
 *  - fork(): a child forked while another thread's callback sleeps can take
 *    snapshots (the collection it inherited is over in the child);
 *  - segments: another process's reader sees the value of the last
 *    collection;
 *  - the process collector: the six process_* series, with plausible values.
 * A deadlock fails the test through alarm(), not by hanging (5 minutes:
 * only a deadlock takes that long, however loaded the machine).
 */
#include "../check.h"
#include "segment_text.h"
#include <pcpu/pcpu.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static pcpu_family_t *family(pcpu_registry_t *reg, const char *name, enum pcpu_metric_type t,
			     int scale, unsigned nlabels, const char *const *labels)
{
	struct pcpu_family_desc d;
	pcpu_family_t *f;

	memset(&d, 0, sizeof d);
	d.name = name;
	d.help = "Test.";
	d.type = t;
	d.scale_exp10 = scale;
	d.nlabels = nlabels;
	d.label_names = labels;
	f = pcpu_registry_family(reg, &d);
	CHECK(f != NULL);
	return f;
}

/* ---- values and failure ---- */

static int64_t depth = 17;
static int fail_now;

static int get_depth(void *arg, int64_t *v)
{
	*v = *(int64_t *)arg;
	return 0;
}

static int flaky(void *arg, int64_t *v)
{
	(void)arg;
	if (fail_now) {
		errno = EIO;
		return -1;
	}
	*v = 2500; /* ms, exposed as seconds */
	return 0;
}

static void test_values_and_failure(void)
{
	static const char *const qn[] = { "queue" };
	static const char *const q0[] = { "rx" }, *const q1[] = { "tx" };
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_family_t *fq, *fc;
	char *t;

	CHECK(reg != NULL);
	fq = family(reg, "queue_depth", PCPU_METRIC_GAUGE, 0, 1, qn);
	fc = family(reg, "busy_seconds_total", PCPU_METRIC_COUNTER, -3, 0, NULL);
	CHECK(pcpu_family_callback(fq, q0, get_depth, &depth) == 0);
	CHECK(pcpu_gauge_set(pcpu_family_gauge(fq, q1), 4) == 0); /* a plain series beside it */
	CHECK(pcpu_family_callback(fc, NULL, flaky, NULL) == 0);
	/* Refusals. */
	CHECK(pcpu_family_callback(fq, q0, get_depth, &depth) == -1 && errno == EEXIST);
	CHECK(pcpu_family_callback(fq, q1, get_depth, &depth) == -1 && errno == EEXIST);
	CHECK(pcpu_family_callback(fq, q0, NULL, NULL) == -1 && errno == EINVAL);
	{
		static const int64_t b[] = { 1 };
		struct pcpu_histogram_layout lay = { 0 };
		struct pcpu_family_desc d;
		pcpu_family_t *fh;

		lay.scheme = PCPU_HISTOGRAM_EXPLICIT;
		lay.bounds = b;
		lay.nbounds = 1;
		memset(&d, 0, sizeof d);
		d.name = "lat";
		d.type = PCPU_METRIC_HISTOGRAM;
		d.histogram = &lay;
		fh = pcpu_registry_family(reg, &d);
		CHECK(fh != NULL);
		CHECK(pcpu_family_callback(fh, NULL, get_depth, &depth) == -1 && errno == EINVAL);
	}
	t = registry_text(reg);
	CHECK(text_has_line(t, "queue_depth{queue=\"rx\"} 17"));
	CHECK(text_has_line(t, "queue_depth{queue=\"tx\"} 4"));
	CHECK(text_has_line(t, "busy_seconds_total 2.5"));
	free(t);
	depth = -3;
	t = registry_text(reg);
	CHECK(text_has_line(t, "queue_depth{queue=\"rx\"} -3"));
	free(t);
	/* A failing callback: its series only is left out. */
	fail_now = 1;
	CHECK(pcpu_registry_collect(reg) == 1);
	CHECK(strstr(pcpu_stats_error(), "busy_seconds") != NULL);
	t = registry_text(reg);
	CHECK(strstr(t, "\nbusy_seconds_total ") == NULL);
	CHECK(strstr(t, "# TYPE busy_seconds_total counter") != NULL); /* the family stays */
	CHECK(text_has_line(t, "queue_depth{queue=\"rx\"} -3"));
	free(t);
	{
		struct pcpu_snapshot *s = pcpu_registry_snapshot(reg);
		size_t k;

		CHECK(s != NULL);
		for (k = 0; k < s->nfamilies; k++)
			if (strcmp(s->families[k].name, "busy_seconds") == 0)
				CHECK(s->families[k].nseries == 0);
		pcpu_snapshot_free(s);
	}
	fail_now = 0;
	CHECK(pcpu_registry_collect(reg) == 0);
	t = registry_text(reg);
	CHECK(text_has_line(t, "busy_seconds_total 2.5"));
	free(t);
	/* Removal: the series and its callback go. */
	CHECK(pcpu_family_remove(fq, q0) == 0);
	CHECK(pcpu_family_callback(fq, q0, get_depth, &depth) == 0); /* again */
	CHECK(pcpu_registry_remove_family(reg, fq) == 0);
	t = registry_text(reg);
	CHECK(strstr(t, "queue_depth") == NULL);
	free(t);
	pcpu_registry_destroy(reg);
}

/* ---- re-entry ---- */

struct reentry {
	pcpu_registry_t *reg;
	pcpu_family_t *fam;       /* has callback series "self" and plain "plain" */
	int snap_errno, write_errno, collect_errno, remove_cb_errno, remove_family_errno;
	int snap_null, write_r, collect_r, remove_cb_r, remove_family_r;
	int remove_plain_r, register_ok;
	int calls;
};

static int reentering(void *arg, int64_t *v)
{
	struct reentry *e = arg;
	static const char *const self[] = { "self" }, *const plain[] = { "plain" };
	char *text;
	size_t len;
	pcpu_counter_t c;

	e->calls++;
	if (e->calls > 1) { /* only the first collection re-enters */
		*v = 1;
		return 0;
	}
	errno = 0;
	e->snap_null = pcpu_registry_snapshot(e->reg) == NULL;
	e->snap_errno = errno;
	errno = 0;
	e->write_r = pcpu_registry_write(e->reg, PCPU_FORMAT_OPENMETRICS, &text, &len);
	e->write_errno = errno;
	errno = 0;
	e->collect_r = pcpu_registry_collect(e->reg);
	e->collect_errno = errno;
	errno = 0;
	e->remove_cb_r = pcpu_family_remove(e->fam, self);
	e->remove_cb_errno = errno;
	errno = 0;
	e->remove_family_r = pcpu_registry_remove_family(e->reg, e->fam);
	e->remove_family_errno = errno;
	/* What works: no registry lock is held. */
	e->remove_plain_r = pcpu_family_remove(e->fam, plain);
	c = pcpu_registry_counter(e->reg, "made_in_callback_total", "Registered by a callback.");
	if (c)
		pcpu_counter_add(c, 5);
	e->register_ok = c != NULL;
	*v = 42;
	return 0;
}

static void test_reentry(void)
{
	static const char *const ln[] = { "who" };
	static const char *const self[] = { "self" }, *const plain[] = { "plain" };
	struct reentry e;
	struct pcpu_snapshot *s;
	char *t;

	memset(&e, 0, sizeof e);
	e.reg = pcpu_registry_create();
	CHECK(e.reg != NULL);
	e.fam = family(e.reg, "reentry", PCPU_METRIC_GAUGE, 0, 1, ln);
	CHECK(pcpu_family_callback(e.fam, self, reentering, &e) == 0);
	CHECK(pcpu_family_gauge(e.fam, plain) != NULL);
	alarm(300); /* a deadlock fails here */
	s = pcpu_registry_snapshot(e.reg);
	alarm(0);
	CHECK(s != NULL);
	pcpu_snapshot_free(s);
	CHECK(e.calls == 1);
	CHECK(e.snap_null && e.snap_errno == EDEADLK);
	CHECK(e.write_r == -1 && e.write_errno == EDEADLK);
	CHECK(e.collect_r == -1 && e.collect_errno == EDEADLK);
	CHECK(e.remove_cb_r == -1 && e.remove_cb_errno == EDEADLK);
	CHECK(e.remove_family_r == -1 && e.remove_family_errno == EDEADLK);
	CHECK(e.remove_plain_r == 0);
	CHECK(e.register_ok);
	t = registry_text(e.reg);
	CHECK(text_has_line(t, "reentry{who=\"self\"} 1"));
	CHECK(strstr(t, "plain") == NULL);
	CHECK(text_has_line(t, "made_in_callback_total 5"));
	free(t);
	/* Outside a callback the same calls work. */
	CHECK(pcpu_family_remove(e.fam, self) == 0);
	pcpu_registry_destroy(e.reg);
}

/* ---- blocking, concurrent snapshots, removal, fork ---- */

static int sleeping, sleeper_calls, called_after_removal, removal_returned;
static int hold; /* while set, a sleeping callback does not return */

static int sleeper(void *arg, int64_t *v)
{
	(void)arg;
	if (__atomic_load_n(&removal_returned, __ATOMIC_SEQ_CST))
		called_after_removal = 1;
	__atomic_add_fetch(&sleeper_calls, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&sleeping, 1, __ATOMIC_SEQ_CST);
	usleep(300000);
	while (__atomic_load_n(&hold, __ATOMIC_SEQ_CST))
		usleep(1000);
	__atomic_store_n(&sleeping, 0, __ATOMIC_SEQ_CST);
	*v = 7;
	return 0;
}

static void *snapshotter(void *arg)
{
	struct pcpu_snapshot *s = pcpu_registry_snapshot(arg);

	CHECK(s != NULL);
	pcpu_snapshot_free(s);
	return NULL;
}

static void wait_sleeping(void)
{
	while (!__atomic_load_n(&sleeping, __ATOMIC_SEQ_CST))
		usleep(1000);
}

static void test_blocking(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_family_t *f;
	pcpu_counter_t c;
	pthread_t a, b;
	double t0, dt;
	pid_t pid;
	int st;

	CHECK(reg != NULL);
	f = family(reg, "slow", PCPU_METRIC_GAUGE, 0, 0, NULL);
	CHECK(pcpu_family_callback(f, NULL, sleeper, NULL) == 0);
	alarm(300);

	/* Registration and updates while the callback sleeps: it is held
	 * until they are done, so a registration that waited for the
	 * collection would never return (the alarm ends the test). No
	 * timing is asserted: a loaded machine may take long. */
	__atomic_store_n(&hold, 1, __ATOMIC_SEQ_CST);
	CHECK(pthread_create(&a, NULL, snapshotter, reg) == 0);
	wait_sleeping();
	t0 = now();
	c = pcpu_registry_counter(reg, "during_total", "Registered during a collection.");
	CHECK(c != NULL);
	pcpu_counter_add(c, 1);
	CHECK(pcpu_family_size(f) == 1);
	dt = now() - t0;
	CHECK(__atomic_load_n(&sleeping, __ATOMIC_SEQ_CST)); /* still in the callback */
	__atomic_store_n(&hold, 0, __ATOMIC_SEQ_CST);
	printf("registration during a held callback took %.3f ms\n", dt * 1e3);
	/* A second snapshot waits for the first collection, then runs its own. */
	t0 = now();
	CHECK(pthread_create(&b, NULL, snapshotter, reg) == 0);
	CHECK(pthread_join(a, NULL) == 0);
	CHECK(pthread_join(b, NULL) == 0);
	CHECK(sleeper_calls == 2);
	CHECK(now() - t0 >= 0.3); /* b's own collection ran after a's */

	/* fork() while another thread's callback sleeps: the child's
	 * registry is usable. */
	CHECK(pthread_create(&a, NULL, snapshotter, reg) == 0);
	wait_sleeping();
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct pcpu_snapshot *s;

		alarm(300);
		s = pcpu_registry_snapshot(reg); /* collects: the sleeper runs here */
		_exit(s && pcpu_registry_counter(reg, "child_total", NULL) ? 0 : 1);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(pthread_join(a, NULL) == 0);

	/* Removal waits for the running callback; it is not called after. */
	CHECK(pthread_create(&a, NULL, snapshotter, reg) == 0);
	wait_sleeping();
	CHECK(pcpu_family_remove(f, NULL) == 0);
	__atomic_store_n(&removal_returned, 1, __ATOMIC_SEQ_CST);
	CHECK(!__atomic_load_n(&sleeping, __ATOMIC_SEQ_CST));
	CHECK(pthread_join(a, NULL) == 0);
	snapshotter(reg);
	CHECK(!called_after_removal);
	alarm(0);
	pcpu_registry_destroy(reg);
}

/* ---- segments ---- */

static void test_segment(void)
{
	char dir[] = "/tmp/pcpu-collector-XXXXXX";
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_family_t *f;
	char *text;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(setenv("PCPU_SEGMENT_DIR", dir, 1) == 0);
	reg = pcpu_registry_create();
	CHECK(reg != NULL);
	seg = pcpu_segment_publish(reg, "collector", NULL);
	CHECK(seg != NULL);
	f = family(reg, "queue_depth", PCPU_METRIC_GAUGE, 0, 0, NULL);
	depth = 11;
	CHECK(pcpu_family_callback(f, NULL, get_depth, &depth) == 0);
	CHECK(pcpu_registry_collect(reg) == 0);
	depth = 12; /* not collected yet: readers see 11 */
	text = segment_text(pcpu_segment_path(seg));
	CHECK(text_has_line(text, "queue_depth 11"));
	free(text);
	CHECK(pcpu_registry_collect(reg) == 0);
	text = segment_text(pcpu_segment_path(seg));
	CHECK(text_has_line(text, "queue_depth 12"));
	free(text);
	pcpu_registry_destroy(reg);
	CHECK(rmdir(dir) == 0);
}

/* ---- the process collector ---- */

static int64_t value_of(const struct pcpu_snapshot *s, const char *name)
{
	size_t k;

	for (k = 0; k < s->nfamilies; k++)
		if (strcmp(s->families[k].name, name) == 0) {
			CHECK(s->families[k].nseries == 1);
			return s->families[k].type == PCPU_METRIC_COUNTER
				       ? (int64_t)s->families[k].series[0].value.counter
				       : s->families[k].series[0].value.gauge;
		}
	fprintf(stderr, "no family %s\n", name);
	exit(1);
}

static void test_process(void)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	struct pcpu_snapshot *s;
	struct rlimit rl;
	volatile uint64_t x = 0;
	int64_t fds, start_ms;
	int extra[4], k;
	char *t;
	size_t len;

	CHECK(reg != NULL);
	CHECK(pcpu_registry_process_collector(reg) == 0);
	CHECK(pcpu_registry_process_collector(reg) == -1 && errno == EEXIST);
	/* Some CPU time to account: 60 ms of this process's CPU time, not
	 * 50 ms of wall time (on a loaded machine that gave less than the
	 * 40 ms checked below). */
	for (;;) {
		struct timespec cpu;

		CHECK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) == 0);
		if (cpu.tv_sec > 0 || cpu.tv_nsec >= 60000000)
			break;
		x++;
	}
	s = pcpu_registry_snapshot(reg);
	CHECK(s != NULL);
	CHECK(value_of(s, "process_cpu_seconds") >= 40000); /* microseconds */
	CHECK(value_of(s, "process_resident_memory_bytes") > 100000);
	CHECK(value_of(s, "process_virtual_memory_bytes") >= value_of(s, "process_resident_memory_bytes"));
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	CHECK(value_of(s, "process_max_fds") == (int64_t)rl.rlim_cur);
	fds = value_of(s, "process_open_fds");
	CHECK(fds >= 3);
	start_ms = value_of(s, "process_start_time_seconds");
	CHECK(start_ms <= (int64_t)time(NULL) * 1000 + 1000);
	CHECK(start_ms >= (int64_t)time(NULL) * 1000 - 600000); /* started < 10 min ago */
	pcpu_snapshot_free(s);
	for (k = 0; k < 4; k++)
		CHECK((extra[k] = dup(2)) >= 0);
	s = pcpu_registry_snapshot(reg);
	CHECK(s != NULL);
	CHECK(value_of(s, "process_open_fds") == fds + 4);
	pcpu_snapshot_free(s);
	for (k = 0; k < 4; k++)
		close(extra[k]);
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_OPENMETRICS, &t, &len) == 0);
	CHECK(strstr(t, "# TYPE process_cpu_seconds counter\n") != NULL);
	CHECK(strstr(t, "\nprocess_open_fds ") != NULL);
	free(t);
	pcpu_registry_destroy(reg);
}

int main(void)
{
	test_values_and_failure();
	test_reentry();
	test_blocking();
	test_segment();
	test_process();
	printf("collector tests passed (mode %s)\n", pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
