/*
 * The segment against hostile neighbours and exhausted descriptors (issue
 * 10, items 2, 3 and 6):
 *
 *  liveness  With only k free descriptors (RLIMIT_NOFILE), for every k from
 *            0 to 12: listing never calls a live writer "gone", pruning never
 *            removes its file, pcpu_reader_state() never says GONE, and a
 *            second publisher of the same name never deletes it (before the
 *            fix, a failed open of /proc/PID/stat meant "dead"). With a
 *            pcpustat path: `ulimit -n k; pcpustat --prune` keeps it too.
 *  squat     As root: a victim user publishes with the default directory
 *            while another user (nobody) has created the victim's file name
 *            in /dev/shm, the victim's per-user directory name, and a
 *            symlink in its place. Publishing must work, readers of the
 *            victim (and root) find the segment by name and pid, and the
 *            other user can create nothing in the victim's directory.
 *            Needs root (a second uid); exits 77 with the reason otherwise.
 *  special   A FIFO and a device under segment names are never opened: a
 *            writer blocked opening the FIFO stays blocked (the reader used
 *            O_PATH and fstat), and the error is "not a regular file".
 *
 * Usage: test_segment_neighbours liveness|squat|special [PCPUSTAT]
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"

#define SKIP 77

static void rm_rf(const char *d)
{
	char cmd[600];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", d);
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* A child that publishes `name` (in `dir`, NULL: the default) as `uid`
 * ((uid_t)-1: as we are) once start_writer() lets it go, and then lives
 * until stop_writer(). Its pid is known before it publishes. */
struct writer {
	pid_t pid;
	int gate, up, down;
};

static void fork_writer(struct writer *w, const char *dir, const char *name, uid_t uid,
			unsigned flags)
{
	int gate[2], up[2], down[2];

	CHECK(pipe(gate) == 0 && pipe(up) == 0 && pipe(down) == 0);
	w->pid = fork();
	CHECK(w->pid >= 0);
	if (w->pid == 0) {
		struct pcpu_segment_options o;
		pcpu_registry_t *reg;
		pcpu_segment_t *seg;
		char c, msg[512];

		close(gate[1]);
		close(up[0]);
		close(down[1]);
		if (uid != (uid_t)-1 && (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0))
			_exit(3);
		if (read(gate[0], &c, 1) != 1)
			_exit(6);
		memset(&o, 0, sizeof o);
		o.dir = dir;
		o.flags = flags;
		o.group = getegid();
		reg = pcpu_registry_create();
		seg = reg ? pcpu_segment_publish(reg, name, &o) : NULL;
		if (!seg) {
			snprintf(msg, sizeof msg, "!publish failed: %s (%s)", strerror(errno),
				 pcpu_segment_error());
		} else {
			pcpu_counter_add(pcpu_registry_counter(reg, "alive_total", "Alive."), 42);
			snprintf(msg, sizeof msg, "%s", pcpu_segment_path(seg));
		}
		if (write(up[1], msg, strlen(msg)) < 0)
			_exit(4);
		close(up[1]);
		if (read(down[0], &c, 1) < 0)
			_exit(5);
		if (seg)
			pcpu_segment_unpublish(seg);
		_exit(seg ? 0 : 1);
	}
	close(gate[0]);
	close(up[1]);
	close(down[0]);
	w->gate = gate[1];
	w->up = up[0];
	w->down = down[1];
}

/* Lets the writer publish; its segment's path (or "!why") in `path`. */
static void start_writer(struct writer *w, char *path, size_t cap)
{
	ssize_t n;

	CHECK(write(w->gate, "g", 1) == 1);
	close(w->gate);
	n = read(w->up, path, cap - 1);
	close(w->up);
	CHECK(n > 0);
	path[n] = '\0';
}

static void stop_writer(struct writer *w)
{
	int st;

	close(w->down);
	CHECK(waitpid(w->pid, &st, 0) == w->pid);
}

/* Leaves exactly k descriptors free below RLIMIT_NOFILE: every lower one
 * is taken (by /dev/null). */
static void leave_free_fds(unsigned k)
{
	const int limit = 64;
	struct rlimit rl;
	int fd;

	while ((fd = open("/dev/null", O_RDONLY)) >= 0 && fd < limit - (int)k)
		;
	CHECK(fd >= limit - (int)k);
	close(fd);
	rl.rlim_cur = (rlim_t)limit;
	rl.rlim_max = (rlim_t)limit;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
}

/* ---- liveness ------------------------------------------------------------------ */

/* In a child with k free descriptors: every way the library judges the
 * writer's liveness. Exit status: 0 fine, 10 + what went wrong. */
static int short_of_fds(const char *dir, const char *path, pid_t writer, unsigned k)
{
	struct pcpu_reader_options ro;
	struct pcpu_segment_options wo;
	struct pcpu_segment_info *info;
	pcpu_registry_t *reg;
	pcpu_reader_t *r;
	size_t n, i, removed;
	char pidstr[16];

	leave_free_fds(k);
	memset(&ro, 0, sizeof ro);
	ro.dir = dir;
	if (pcpu_segment_list(&ro, &info, &n) == 0) {
		for (i = 0; i < n; i++)
			if (info[i].pid == writer && info[i].error == 0 &&
			    info[i].state == PCPU_SEGMENT_GONE)
				return 10; /* listed as gone */
		free(info);
	}
	snprintf(pidstr, sizeof pidstr, "%d", (int)writer);
	r = pcpu_reader_open(pidstr, &ro);
	if (r) {
		if (pcpu_reader_state(r) == PCPU_SEGMENT_GONE)
			return 11;
		pcpu_reader_close(r);
	}
	if (pcpu_segment_prune(&ro, &removed) == 0 && removed != 0)
		return 12;
	if (!exists(path))
		return 12;
	/* A second publisher of the same name, as short of descriptors. */
	memset(&wo, 0, sizeof wo);
	wo.dir = dir;
	reg = pcpu_registry_create();
	if (reg)
		pcpu_segment_unpublish(pcpu_segment_publish(reg, "live", &wo));
	if (!exists(path))
		return 13;
	return 0;
}

static int check_liveness(const char *pcpustat)
{
	static const char *const what[] = { "listed as gone", "pcpu_reader_state() said GONE",
					    "pruned", "deleted by a second publisher" };
	char dir[] = "/tmp/pcpu-live.XXXXXX", path[600];
	struct pcpu_reader_options ro;
	struct pcpu_segment_info *info;
	unsigned k, bad = 0, runs = 0;
	struct writer w;
	size_t n;

	CHECK(mkdtemp(dir) != NULL);
	fork_writer(&w, dir, "live", (uid_t)-1, 0);
	start_writer(&w, path, sizeof path);
	CHECK(path[0] == '/' && exists(path));
	for (k = 0; k <= 12; k++) {
		int st;
		pid_t c = fork();

		CHECK(c >= 0);
		if (c == 0)
			_exit(short_of_fds(dir, path, w.pid, k));
		CHECK(waitpid(c, &st, 0) == c);
		runs++;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;

			fprintf(stderr, "with %u free descriptors: live writer %s\n", k,
				code >= 10 && code <= 13 ? what[code - 10] : "(child crashed)");
			bad++;
		}
		if (!exists(path)) {
			fprintf(stderr, "with %u free descriptors: the live segment was deleted\n", k);
			bad++;
			break;
		}
	}
	if (pcpustat && *pcpustat && exists(path)) {
		for (k = 3; k <= 12; k++) {
			char cmd[1024];

			snprintf(cmd, sizeof cmd,
				 "exec >/dev/null 2>&1; ulimit -n %u && exec '%s' -d '%s' --prune", k,
				 pcpustat, dir);
			CHECK(system(cmd) != -1);
			runs++;
			if (!exists(path)) {
				fprintf(stderr, "ulimit -n %u; pcpustat --prune deleted the live segment\n", k);
				bad++;
				break;
			}
		}
	}
	/* Enough descriptors: live, and the one file there. */
	memset(&ro, 0, sizeof ro);
	ro.dir = dir;
	if (exists(path)) {
		size_t i, live = 0;

		CHECK(pcpu_segment_list(&ro, &info, &n) == 0);
		for (i = 0; i < n; i++)
			live += info[i].pid == w.pid && info[i].state == PCPU_SEGMENT_LIVE;
		CHECK(live == 1);
		free(info);
	}
	stop_writer(&w);
	rm_rf(dir);
	printf("test_segment_neighbours liveness: %u runs short of descriptors, %u wrong verdicts\n", runs,
	       bad);
	return bad ? 1 : 0;
}

/* ---- squatting ----------------------------------------------------------------- */

static int as_user(uid_t uid, const char *script)
{
	pid_t c = fork();
	int st;

	CHECK(c >= 0);
	if (c == 0) {
		if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0)
			_exit(3);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(c, &st, 0) == c);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* What the victim's own reader sees. Exit status 0 if it finds the segment
 * by name and by pid, live. */
static int victim_reads(uid_t victim, pid_t wpid)
{
	pid_t c = fork();
	int st;

	CHECK(c >= 0);
	if (c == 0) {
		struct pcpu_reader_snapshot *s;
		struct pcpu_segment_info *info;
		pcpu_reader_t *r;
		char pidstr[16];
		size_t n, i;
		int found = 0;

		if (setgroups(0, NULL) != 0 || setgid(victim) != 0 || setuid(victim) != 0)
			_exit(3);
		r = pcpu_reader_open("squat", NULL);
		if (!r) {
			fprintf(stderr, "victim: open by name: %s\n", pcpu_reader_error());
			_exit(20);
		}
		if (pcpu_reader_snapshot(r, 0, &s) != 0 || s->state != PCPU_SEGMENT_LIVE ||
		    s->snapshot.nfamilies != 1 || s->snapshot.families[0].series[0].value.counter != 42) {
			fprintf(stderr, "victim: snapshot: %s\n", pcpu_reader_error());
			_exit(21);
		}
		pcpu_reader_snapshot_free(s);
		pcpu_reader_close(r);
		snprintf(pidstr, sizeof pidstr, "%d", (int)wpid);
		r = pcpu_reader_open(pidstr, NULL);
		if (!r) {
			fprintf(stderr, "victim: open by pid: %s\n", pcpu_reader_error());
			_exit(22);
		}
		pcpu_reader_close(r);
		if (pcpu_segment_list(NULL, &info, &n) != 0)
			_exit(23);
		for (i = 0; i < n; i++)
			found += info[i].pid == wpid && info[i].error == 0 &&
				 info[i].state == PCPU_SEGMENT_LIVE;
		free(info);
		_exit(found == 1 ? 0 : 24);
	}
	CHECK(waitpid(c, &st, 0) == c);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int check_squat(void)
{
	const uid_t nobody = 65534;
	uid_t victim = 40000 + (uid_t)(getpid() % 20000);
	char path[600], script[2048], pidstr[16];
	struct pcpu_reader_options ro;
	struct pcpu_segment_info *info;
	pcpu_reader_t *r;
	struct stat st;
	size_t n, i;
	int rc = 0, found = 0;
	struct writer wr;
	pid_t w, probe;

	if (geteuid() != 0) {
		printf("SKIP test_segment_neighbours squat: needs root, to act as a second user "
		       "(setuid to uid %u and to nobody)\n", (unsigned)victim);
		return SKIP;
	}
	if (stat(PCPU_SEGMENT_DEFAULT_DIR, &st) != 0 || !(st.st_mode & S_ISVTX)) {
		printf("SKIP test_segment_neighbours squat: no sticky " PCPU_SEGMENT_DEFAULT_DIR "\n");
		return SKIP;
	}
	probe = fork();
	CHECK(probe >= 0);
	if (probe == 0)
		_exit(setuid(nobody) == 0 ? 0 : 1);
	CHECK(waitpid(probe, &rc, 0) == probe);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
		printf("SKIP test_segment_neighbours squat: cannot setuid to nobody here\n");
		return SKIP;
	}
	rc = 0;
	unsetenv(PCPU_SEGMENT_DIR_ENV);

	/* The victim's pid is known before it publishes: the squatter takes
	 * its file name in /dev/shm (and, for good measure, the next 100), the
	 * name of its per-user directory, and a fallback-looking name as a
	 * symlink. */
	fork_writer(&wr, NULL, "squat", victim, 0);
	w = wr.pid;
	snprintf(script, sizeof script,
		 "cd " PCPU_SEGMENT_DEFAULT_DIR " || exit 1; "
		 "p=%d; while [ $p -lt %d ]; do : > pcpu.$p.squat; p=$((p+1)); done; "
		 "mkdir -m 777 pcpu-%u && ln -s /tmp pcpu-%u.squatted && exit 0; exit 2",
		 (int)w, (int)w + 100, (unsigned)victim, (unsigned)victim);
	CHECK(as_user(nobody, script) == 0);
	start_writer(&wr, path, sizeof path);
	if (path[0] == '!') {
		fprintf(stderr, "squat: the victim (uid %u) could not publish: %s\n", (unsigned)victim,
			path + 1);
		rc = 1;
		stop_writer(&wr);
		goto out;
	}
	snprintf(pidstr, sizeof pidstr, "%d", (int)w);
	printf("  victim published %s despite the squatted names\n", path);
	/* Its directory: its own, 0700, and nobody can create a name in it. */
	{
		char d[600], *slash;

		snprintf(d, sizeof d, "%s", path);
		slash = strrchr(d, '/');
		CHECK(slash);
		*slash = '\0';
		CHECK(stat(d, &st) == 0 && st.st_uid == victim && (st.st_mode & 07777) == 0700);
		snprintf(script, sizeof script, "touch '%s/pcpu.%d.squat2' 2>/dev/null && exit 1; exit 0", d,
			 (int)w);
		if (as_user(nobody, script) != 0) {
			fprintf(stderr, "squat: nobody could create a file in %s\n", d);
			rc = 1;
		}
	}
	/* The victim's readers find it by name and pid. */
	if (victim_reads(victim, w) != 0) {
		fprintf(stderr, "squat: the victim's reader does not find its segment\n");
		rc = 1;
	}
	/* Root (any owner) lists and opens it too; the squatter's directory
	 * is not taken for the victim's. */
	memset(&ro, 0, sizeof ro);
	ro.flags = PCPU_READER_ANY_OWNER;
	CHECK(pcpu_segment_list(&ro, &info, &n) == 0);
	for (i = 0; i < n; i++)
		if (info[i].pid == w)
			found += info[i].error == 0 && info[i].state == PCPU_SEGMENT_LIVE &&
				 info[i].owner == victim;
	free(info);
	if (found != 1) {
		fprintf(stderr, "squat: root lists the victim's segment %d times\n", found);
		rc = 1;
	}
	r = pcpu_reader_open(pidstr, &ro);
	if (!r) {
		fprintf(stderr, "squat: root cannot open it by pid: %s\n", pcpu_reader_error());
		rc = 1;
	}
	pcpu_reader_close(r);
	/* Shared with a group: the directory opens to readers (0755), the
	 * file is 0640, and still no one else can create a name there. */
	{
		struct writer w2;
		char path2[600], d[600], *slash;

		fork_writer(&w2, NULL, "shared", victim, PCPU_SEGMENT_GROUP_READ);
		start_writer(&w2, path2, sizeof path2);
		if (path2[0] == '!') {
			fprintf(stderr, "squat: shared: %s\n", path2 + 1);
			rc = 1;
		} else {
			snprintf(d, sizeof d, "%s", path2);
			slash = strrchr(d, '/');
			*slash = '\0';
			CHECK(stat(path2, &st) == 0 && (st.st_mode & 07777) == 0640);
			CHECK(stat(d, &st) == 0 && st.st_uid == victim && (st.st_mode & 07777) == 0755);
			snprintf(script, sizeof script,
				 "touch '%s/pcpu.1.planted' 2>/dev/null && exit 1; exit 0", d);
			if (as_user(nobody, script) != 0) {
				fprintf(stderr, "squat: nobody could create a file in %s\n", d);
				rc = 1;
			}
		}
		stop_writer(&w2);
	}
	stop_writer(&wr);
out:
	snprintf(script, sizeof script,
		 "cd " PCPU_SEGMENT_DEFAULT_DIR " && rm -rf pcpu-%u pcpu-%u.* && "
		 "find . -maxdepth 1 -name 'pcpu.*.squat' -user %u -delete",
		 (unsigned)victim, (unsigned)victim, (unsigned)nobody);
	if (system(script) != 0)
		fprintf(stderr, "cleanup of " PCPU_SEGMENT_DEFAULT_DIR " failed\n");
	printf("test_segment_neighbours squat: %s\n", rc ? "FAILED" : "ok");
	return rc;
}

/* ---- special files ------------------------------------------------------------- */

static int check_special(void)
{
	char dir[] = "/tmp/pcpu-special.XXXXXX", fifo[600], link[600];
	struct pcpu_reader_options ro;
	struct pcpu_segment_info *info;
	pcpu_reader_t *r;
	size_t n;
	int st, rc = 0;
	pid_t c;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(fifo, sizeof fifo, "%s/pcpu.1.fifo", dir);
	CHECK(mkfifo(fifo, 0600) == 0);
	/* A writer waiting for the FIFO's reader: it returns from open as soon
	 * as anyone opens the FIFO for reading, even for a moment. */
	c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		int fd = open(fifo, O_WRONLY);
		_exit(fd >= 0 ? 0 : 1);
	}
	{
		/* Until the writer waits in open() (its state is S, sleeping). */
		char stat_path[64], buf[256];
		int tries;

		snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", (int)c);
		for (tries = 0; tries < 200; tries++) {
			struct timespec t = { 0, 5 * 1000 * 1000 };
			FILE *f = fopen(stat_path, "r");
			char *p = NULL;

			if (f && fgets(buf, sizeof buf, f))
				p = strrchr(buf, ')');
			if (f)
				fclose(f);
			if (p && p[1] == ' ' && p[2] == 'S')
				break;
			nanosleep(&t, NULL);
		}
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	memset(&ro, 0, sizeof ro);
	ro.dir = dir;
	r = pcpu_reader_open(fifo, &ro);
	CHECK(r == NULL && errno == EPERM && strstr(pcpu_reader_error(), "not a regular file"));
	r = pcpu_reader_open("fifo", &ro);
	CHECK(r == NULL && errno == EPERM);
	r = pcpu_reader_open("pcpu.1.fifo", &ro);
	CHECK(r == NULL && errno == EPERM);
	CHECK(pcpu_segment_list(&ro, &info, &n) == 0 && n == 1 && info[0].error == EPERM);
	free(info);
	{
		struct timespec t = { 0, 300 * 1000 * 1000 };
		nanosleep(&t, NULL);
	}
	if (waitpid(c, &st, WNOHANG) != 0) {
		fprintf(stderr, "special: the FIFO was opened for reading\n");
		rc = 1;
	} else {
		kill(c, SIGKILL);
		CHECK(waitpid(c, &st, 0) == c);
	}
	/* A device: refused before any open (no ENXIO, no side effect). */
	r = pcpu_reader_open("/dev/null", &ro);
	CHECK(r == NULL && errno == EPERM && strstr(pcpu_reader_error(), "not a regular file"));
	if (access("/dev/tty", F_OK) == 0) {
		r = pcpu_reader_open("/dev/tty", &ro);
		if (!(r == NULL && errno == EPERM)) {
			fprintf(stderr, "special: /dev/tty: %s (%s), not 'not a regular file'\n",
				strerror(errno), pcpu_reader_error());
			rc = 1;
		}
	}
	/* A symlink: refused as such. */
	snprintf(link, sizeof link, "%s/pcpu.2.link", dir);
	CHECK(symlink("/etc/passwd", link) == 0);
	r = pcpu_reader_open(link, &ro);
	CHECK(r == NULL && errno == ELOOP);
	rm_rf(dir);
	printf("test_segment_neighbours special: %s\n", rc ? "FAILED" : "ok");
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_segment_neighbours liveness|squat|special [PCPUSTAT]\n");
		return 2;
	}
	if (strcmp(argv[1], "liveness") == 0)
		return check_liveness(argc > 2 ? argv[2] : NULL);
	if (strcmp(argv[1], "squat") == 0)
		return check_squat();
	if (strcmp(argv[1], "special") == 0)
		return check_special();
	fprintf(stderr, "unknown test %s\n", argv[1]);
	return 2;
}
