/*
 * A full file system must not kill the application (issue 10, item 1): a
 * tmpfs that fills up used to raise SIGBUS in registration and in
 * pcpu_counter_add(), when a slot touched a page of the segment for the
 * first time.
 *
 * In a child process (the "application"), on a small tmpfs of its own:
 * publish, register counters and gauges, fill the file system to the last
 * byte with another file, then
 *  - keep registering until it fails: it must fail cleanly, with ENOSPC,
 *    and pcpu_segment_nospace() must count it;
 *  - write every slot word and every mirror word of every series (what the
 *    hot path, fallback adds, resets and gauge sets may write), and the
 *    words of the owned slot claimed before most series were registered
 *    (pcpu/worker.h) -- a page not allocated in the file would raise
 *    SIGBUS here; a new owned slot's first claim must fail with ENOSPC or
 *    find its pages;
 *  - add from threads, add atomically, reset, set gauges: every value must
 *    be exact, in the process and as a reader sees it, and the reader must
 *    see the segment marked out of space (and incomplete);
 *  - a series removed frees room that the next registration reuses.
 * The parent reports a child killed by a signal.
 *
 * The small tmpfs: mounted by the test in a private mount namespace (as
 * root), else in a user namespace. Where neither is allowed (some CI
 * containers), the test says so and runs the same checks with fallocate()
 * failing with ENOSPC once the "file system" is full (this executable
 * interposes fallocate for the library linked into it): that checks the
 * degradation and exactness, not the absence of SIGBUS, and says so.
 * RLIMIT_FSIZE is no substitute: it limits a file's size, and the segment's
 * size is set when it is published; its pages are allocated later. But a
 * limit below that size must not kill either (SIGXFSZ, when the file is
 * sized): checked too, publishing must fail with EFBIG.
 *
 * Usage: test_segment_nospace [mount|userns|inject]   (default: the first
 *        that works; RLIMIT_FSIZE always)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/counter.h>
#include <pcpu/gauge.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <pcpu/zone.h>

#include "check.h"
#include "present_cpus.h"
#include "small_fs.h"

#define MAXC 20000

/* ---- the injected full file system ------------------------------------------- */

static int injected_full;

/* Interposes glibc's fallocate for the library linked into this program:
 * the real call, unless the test declared the file system full. */
int fallocate(int fd, int mode, off_t off, off_t len)
{
	if (__atomic_load_n(&injected_full, __ATOMIC_RELAXED) && !(mode & FALLOC_FL_PUNCH_HOLE)) {
		errno = ENOSPC;
		return -1;
	}
	return (int)syscall(SYS_fallocate, fd, mode, off, len);
}

/* ---- the application ------------------------------------------------------------ */

static pcpu_counter_t cs[MAXC];
static unsigned ncs;

static void *adder(void *arg)
{
	unsigned cpu = (unsigned)(uintptr_t)arg, i;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)sched_setaffinity(0, sizeof set, &set); /* CPU-indexed slots: each CPU's */
	for (i = 0; i < ncs; i++)
		pcpu_counter_add(cs[i], 1);
	return NULL;
}

/* Whether word k of 2 * nslots (slots, then mirrors) can be written: a CPU
 * slot's word or mirror, or the word of the owned slot `owned` holds. */
/* The CPU slots a thread's index or a fallback add can name (slot 0, the
 * present CPUs, mm_cid's range: tests/present_cpus.h); a possible CPU that
 * is not present (PCPU_NSLOTS=64 here: tests/segment/CMakeLists.txt) has
 * no pages in the file, and nothing writes there. */
static unsigned char walked[4096];

static int word_written(unsigned k, unsigned nslots, pcpu_worker_t owned)
{
	unsigned cpu_slots = nslots - pcpu_worker_max();

	if (!walked[0])
		(void)mark_walked_cpu_slots(walked, cpu_slots < sizeof walked ? cpu_slots : sizeof walked);
	if (k >= nslots)
		return k - nslots < cpu_slots && walked[k - nslots];
	return (k < cpu_slots && walked[k]) || (int)k == pcpu_worker_slot(owned);
}

static pcpu_counter_t *late_cs;
static unsigned late_ncs;
static int late_claim_err;

/* Claims the next owned slot on the full file system; if that works, its
 * pages are there: its adds must not fault. */
static void *late_claimer(void *arg)
{
	pcpu_worker_t w;

	(void)arg;
	if (pcpu_worker_claim(&w) != 0) {
		late_claim_err = errno;
		return NULL;
	}
	for (unsigned i = 0; i < late_ncs; i++)
		pcpu_counter_add_owned(w, late_cs[i], 1);
	return NULL;
}

static int application(const char *dir, int inject)
{
	static const char *const idl[] = { "id" };
	struct pcpu_segment_options o;
	struct pcpu_reader_options ro;
	struct pcpu_family_desc d;
	struct pcpu_reader_snapshot *s;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_family_t *fam;
	pcpu_gauge_t g;
	pcpu_worker_t owned = { 0 };
	pcpu_reader_t *r;
	unsigned nslots = pcpu_nslots(), i, k, before, ncpu;
	uint64_t expect[MAXC], reset = 0, extra = 0;
	pthread_t t[64];
	int err = 0;

	memset(&o, 0, sizeof o);
	o.dir = dir;
	CHECK((reg = pcpu_registry_create()) != NULL);
	seg = pcpu_segment_publish(reg, "nospace", &o);
	if (!seg) {
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
		return 1;
	}
	memset(&d, 0, sizeof d);
	d.name = "c_total";
	d.help = "Counts.";
	d.type = PCPU_METRIC_COUNTER;
	d.nlabels = 1;
	d.label_names = idl;
	CHECK((fam = pcpu_registry_family(reg, &d)) != NULL);
	CHECK((g = pcpu_registry_gauge(reg, "level", "A gauge.")) != NULL);
	/* A pinned worker's owned slot (pcpu/worker.h), claimed while there
	 * is room, before most series: its region and mirror are reserved
	 * under every object from now on, the pages of the series below by
	 * the registrations themselves. */
	CHECK(pcpu_worker_max() == 0 || pcpu_worker_claim(&owned) == 0);
	/* Some series while there is room: 600 counters, two pages of slot 0. */
	for (ncs = 0; ncs < 600; ncs++) {
		char id[16];
		const char *v[1] = { id };

		snprintf(id, sizeof id, "%u", ncs);
		CHECK((cs[ncs] = pcpu_family_counter(fam, v)) != NULL);
		pcpu_counter_add(cs[ncs], 1);
	}
	before = ncs;

	/* Someone fills the file system. */
	if (inject)
		__atomic_store_n(&injected_full, 1, __ATOMIC_RELAXED);
	else
		fill(dir);

	/* Registration fails cleanly (once the reserved pages are used up). */
	while (ncs < MAXC) {
		char id[16];
		const char *v[1] = { id };

		snprintf(id, sizeof id, "%u", ncs);
		errno = 0;
		cs[ncs] = pcpu_family_counter(fam, v);
		if (!cs[ncs]) {
			err = errno;
			break;
		}
		pcpu_counter_add(cs[ncs], 1);
		ncs++;
	}
	if (ncs == MAXC || err != ENOSPC) {
		fprintf(stderr, "registration on a full file system: %u series, errno %d (%s)\n", ncs,
			err, strerror(err));
		return 1;
	}
	CHECK(pcpu_segment_nospace(seg) >= 1);
	printf("  registration refused with ENOSPC after %u series (%u before the file system "
	       "filled up), pcpu_segment_nospace() = %llu\n",
	       ncs, before, (unsigned long long)pcpu_segment_nospace(seg));

	/* Every word any path may write: slot words (the rseq add), mirror
	 * words (fallback adds, resets, gauge sets), of every CPU slot a
	 * thread can be on, and
	 * the claimed owned slot's words (its owner's adds; unclaimed owned
	 * slots and owned slots' mirrors are written by no one). A page the
	 * file did not allocate raises SIGBUS here. */
	for (i = 0; i < ncs; i++)
		for (k = 0; k < 2 * nslots; k++)
			if (word_written(k, nslots, owned))
				__atomic_fetch_add((int64_t *)pcpu_slot_ptr(cs[i], k), 0,
						   __ATOMIC_RELAXED);
	for (k = 0; k < 2 * nslots; k++)
		if (word_written(k, nslots, owned))
			__atomic_fetch_add((int64_t *)pcpu_slot_ptr(g, k), 0, __ATOMIC_RELAXED);
	for (i = 0; i < ncs; i++)
		pcpu_counter_add_owned(owned, cs[i], 1); /* the zero claim: an ordinary add */
	extra = 1;
	late_cs = cs;
	late_ncs = ncs;
	/* Another slot's first claim, now: refused (ENOSPC), or its pages
	 * were found (the injected fullness lets the mapping's populate
	 * through): then its adds must not fault. */
	if (pcpu_worker_max() >= 2) {
		CHECK(pthread_create(&t[0], NULL, late_claimer, NULL) == 0);
		CHECK(pthread_join(t[0], NULL) == 0);
		printf("  a claim of a new owned slot on the full file system: %s\n",
		       late_claim_err ? strerror(late_claim_err) : "its pages were there");
		CHECK(late_claim_err == 0 || late_claim_err == ENOSPC);
		extra += late_claim_err == 0;
	}

	/* Updates: from a thread on every CPU (up to 64), atomically, resets,
	 * gauge sets. */
	ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu > 64)
		ncpu = 64;
	for (k = 0; k < ncpu; k++)
		CHECK(pthread_create(&t[k], NULL, adder, (void *)(uintptr_t)k) == 0);
	for (k = 0; k < ncpu; k++)
		pthread_join(t[k], NULL);
	for (i = 0; i < ncs; i++) {
		pcpu_counter_add_atomic(cs[i], (int64_t)i);
		expect[i] = 1 + ncpu + i + extra;
		if (i % 7 == 0) {
			reset += pcpu_counter_fetch_and_zero(cs[i]);
			pcpu_counter_add(cs[i], 3);
			expect[i] = 3;
		}
	}
	CHECK(pcpu_gauge_set(g, -12345) == 0);
	for (i = 0; i < ncs; i++)
		CHECK_EQ_U64(pcpu_counter_fetch(cs[i]), expect[i]);
	CHECK(pcpu_gauge_read(g) == -12345);

	/* What a reader sees: exact values for every series in the directory,
	 * and the segment marked out of space. */
	memset(&ro, 0, sizeof ro);
	ro.dir = dir;
	CHECK((r = pcpu_reader_open("nospace", &ro)) != NULL);
	CHECK(pcpu_reader_snapshot(r, PCPU_READER_PER_SLOT, &s) == 0);
	CHECK(s->nospace && s->incomplete);
	{
		size_t f, n = 0;

		for (f = 0; f < s->snapshot.nfamilies; f++) {
			const struct pcpu_snapshot_family *fm = &s->snapshot.families[f];

			if (strcmp(fm->name, "level") == 0) {
				CHECK(fm->series[0].value.gauge == -12345);
				continue;
			}
			for (i = 0; i < fm->nseries; i++) {
				unsigned id = (unsigned)atoi(fm->series[i].label_values[0]);

				CHECK(id < ncs);
				CHECK_EQ_U64(fm->series[i].value.counter, expect[id]);
				n++;
			}
		}
		printf("  %u series updated from %u CPUs, atomically, reset and set: exact; the reader "
		       "sees %zu of them (%llu directory changes dropped), marked out of space\n",
		       ncs, ncpu, n, (unsigned long long)pcpu_segment_dropped(seg));
		CHECK(n + pcpu_segment_dropped(seg) >= ncs);
	}
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);

	/* Room freed by a removal is reused: its pages stay allocated. */
	{
		const char *v[1] = { "0" };
		const char *w[1] = { "reused" };

		CHECK(pcpu_family_remove(fam, v) == 0);
		CHECK(pcpu_family_counter(fam, w) != NULL);
	}
	(void)reset;
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	return 0;
}

/* Runs the application in a child with mechanism `how`: 0 passed, 1
 * failed, 2 the mechanism is not available here (reason printed). */
static int run(const char *how)
{
	char dir[] = "/tmp/pcpu-nospace.XXXXXX", why[256] = "";
	int pfd[2], st;
	ssize_t n;
	pid_t c;
	/* Room for the directory and a few pages of values in every region. */
	size_t size = (size_t)4096 * (2 * pcpu_nslots() * 4 + 64);

	CHECK(mkdtemp(dir) != NULL);
	CHECK(pipe(pfd) == 0);
	c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		int inject = strcmp(how, "inject") == 0;

		close(pfd[0]);
		if (!inject && small_tmpfs(how, dir, size, why, sizeof why) != 0) {
			if (write(pfd[1], why, strlen(why)) < 0)
				_exit(3);
			_exit(2);
		}
		close(pfd[1]);
		st = application(dir, inject);
		fflush(stdout);
		_exit(st);
	}
	close(pfd[1]);
	n = read(pfd[0], why, sizeof why - 1);
	why[n > 0 ? n : 0] = '\0';
	close(pfd[0]);
	CHECK(waitpid(c, &st, 0) == c);
	{
		char cmd[600];

		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "test_segment_nospace (%s): the application was killed by %s\n", how,
			strsignal(WTERMSIG(st)));
		return 1;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 2) {
		printf("test_segment_nospace: cannot use %s here: %s\n", how, why);
		return 2;
	}
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

/* RLIMIT_FSIZE smaller than the segment's (sparse) size: publishing fails
 * with EFBIG, nothing is killed by SIGXFSZ. */
static int check_fsize(void)
{
	char dir[] = "/tmp/pcpu-fsize.XXXXXX";
	int st;
	pid_t c;

	CHECK(mkdtemp(dir) != NULL);
	c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		struct pcpu_segment_options o;
		struct rlimit rl = { (rlim_t)64 << 20, (rlim_t)64 << 20 };
		pcpu_registry_t *reg;

		CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
		memset(&o, 0, sizeof o);
		o.dir = dir;
		CHECK((reg = pcpu_registry_create()) != NULL);
		if (pcpu_segment_publish(reg, "fsize", &o) != NULL || errno != EFBIG) {
			fprintf(stderr, "RLIMIT_FSIZE 64 MiB: publish did not fail with EFBIG\n");
			_exit(1);
		}
		printf("  RLIMIT_FSIZE 64 MiB: publish fails cleanly: %s\n", pcpu_segment_error());
		fflush(stdout);
		_exit(0);
	}
	CHECK(waitpid(c, &st, 0) == c);
	rmdir(dir);
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "test_segment_nospace: RLIMIT_FSIZE: killed by %s\n", strsignal(WTERMSIG(st)));
		return 1;
	}
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const char *const hows[] = { "mount", "userns", "inject" };
	size_t i;
	int rc;

	for (i = 0; i < 3; i++) {
		if (argc > 1 && strcmp(argv[1], hows[i]) != 0)
			continue;
		printf("test_segment_nospace: %s\n",
		       i == 0 ? "a small tmpfs, mounted in a private mount namespace"
		       : i == 1 ? "a small tmpfs, mounted in a user namespace"
			      : "INJECTED: fallocate fails with ENOSPC once \"full\" (no small tmpfs "
				"could be mounted here): degradation and exactness are checked, the "
				"absence of SIGBUS is not");
		fflush(stdout);
		rc = run(hows[i]);
		if (rc == 2)
			continue;
		if (rc == 0)
			rc = check_fsize();
		printf("test_segment_nospace: %s\n", rc ? "FAILED" : "ok");
		return rc;
	}
	fprintf(stderr, "test_segment_nospace: no mechanism available\n");
	return 1;
}
