/*
 * Transparent huge pages: a zone's memory is small pages, whatever the
 * system's THP setting. A chunk's regions are 2 MiB-aligned and written
 * sparsely; under THP `always` (Debian's and RHEL's kernel default) the
 * first write into a region faulted a 2 MiB page: the first counter of a
 * process made 2 MiB resident, and 1,000 counters on 2 slots cost 4 kB each
 * instead of 16 bytes.
 *
 *  - What the zone asks of the kernel, checked whatever the setting: every
 *    mapping of a private zone's chunk, of a shared zone's (a memfd, as a
 *    statistics segment's file on tmpfs) and of a shared chunk a fork()
 *    child moved into private memory is MADV_NOHUGEPAGE ("nh" in the
 *    VmFlags of /proc/self/smaps).
 *  - What it costs: a child process (this program run with --measure)
 *    allocates 1,000 counters in the default zone -- its first counters,
 *    as in the issue -- and in two zones on memfds (shmem), one reserving
 *    its file's pages as a segment's zone does; two threads on two CPUs
 *    add to all of them. For each zone, the pages resident in the whole
 *    chunk (mincore(): a huge page shows as 512 of them) must not exceed
 *    the small pages that cover the objects, in the regions written;
 *    for the memfds the file's allocated bytes (st_blocks) too. That is
 *    <= 17 B per counter at 2 slots.
 *  - Where the machine allows it (root, /sys/kernel/mm/transparent_hugepage
 *    writable, PCPU_TEST_THP_SWITCH not 0), the measurement runs again
 *    with `enabled` and `shmem_enabled` set to `always`, and the settings
 *    are restored afterwards (also on SIGINT, SIGTERM, SIGHUP). Runs of
 *    this test from several build trees at once serialise on an flock of
 *    /tmp/pcpu-test-thp.lock; within a ctest run, the tests that measure
 *    resident memory share a RESOURCE_LOCK with it (tests/CMakeLists.txt),
 *    so none of them runs while the setting is switched.
 * Without THP in the kernel (no /sys/kernel/mm/transparent_hugepage) there
 * is nothing to ask for: only the costs are checked.
 */
#include "check.h"
#include "segment/backing.h"
#include <pcpu/pcpu.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define NCOUNTERS 1000

static size_t ps;

/* ---- what the zone asked: VmFlags ------------------------------------------------ */

/* Checks that every mapping overlapping [lo, hi) carries "nh". */
static void check_no_huge_advice(uintptr_t lo, uintptr_t hi, const char *what)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	unsigned long vma_lo = 0, vma_hi = 0;
	int in = 0, found = 0;

	CHECK(f != NULL);
	while (fgets(line, sizeof line, f)) {
		unsigned long a, b;
		char dash;

		if (sscanf(line, "%lx%c%lx ", &a, &dash, &b) == 3 && dash == '-') {
			vma_lo = a;
			vma_hi = b;
			in = a < hi && b > lo;
			found += in;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			char flags[sizeof line], *tok, *save = NULL;
			int nh = 0;

			memcpy(flags, line + 8, sizeof line - 8);
			for (tok = strtok_r(line + 8, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
				nh |= strcmp(tok, "nh") == 0;
			if (!nh) {
				fprintf(stderr, "%s: mapping %lx-%lx is not MADV_NOHUGEPAGE, VmFlags:%s", what,
					vma_lo, vma_hi, flags);
				exit(1);
			}
		}
	}
	fclose(f);
	CHECK(found > 0);
	printf("advice: %s: %d mapping(s) of the chunk, all MADV_NOHUGEPAGE\n", what, found);
}

/* Checks that every mapping of the file at `path` carries "nh": a
 * published segment maps its header and directory itself, and its zone
 * maps the chunks. The mappings name the file as it was created (a
 * temporary name, since replaced), so they are found by inode. */
static void check_no_huge_advice_file(const char *path, const char *what)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[1024];
	int in = 0, found = 0;
	struct stat st;

	CHECK(f != NULL && stat(path, &st) == 0);
	while (fgets(line, sizeof line, f)) {
		unsigned long a, b, off, ino;
		char dash, perms[8], dev[16];

		if (sscanf(line, "%lx%c%lx %7s %lx %15s %lu", &a, &dash, &b, perms, &off, dev, &ino) == 7 &&
		    dash == '-') {
			in = ino == (unsigned long)st.st_ino && ino != 0;
			found += in;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0 && !strstr(line, " nh")) {
			fprintf(stderr, "%s: a mapping of %s is not MADV_NOHUGEPAGE, VmFlags:%s", what,
				path, line + 8);
			exit(1);
		}
	}
	fclose(f);
	CHECK(found >= 2);
	printf("advice: %s: %d mapping(s) of %s, all MADV_NOHUGEPAGE\n", what, found, path);
}

static void test_segment_advice(void)
{
	char dir[] = "/tmp/pcpu-thp-XXXXXX";
	struct pcpu_segment_options o;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;

	CHECK(mkdtemp(dir) != NULL);
	memset(&o, 0, sizeof o);
	o.dir = dir;
	CHECK((reg = pcpu_registry_create()) != NULL);
	CHECK((seg = pcpu_segment_publish(reg, "thp", &o)) != NULL);
	pcpu_counter_add(pcpu_registry_counter(reg, "thp_total", NULL), 1);
	check_no_huge_advice_file(pcpu_segment_path(seg), "published segment");
	pcpu_registry_destroy(reg);
	rmdir(dir);
}

static uintptr_t chunk_of(const void *obj)
{
	return (uintptr_t)obj & ~(uintptr_t)(PCPU_SLOT_STRIDE - 1);
}

static size_t chunk_span(void)
{
	return 2 * (size_t)pcpu_nslots() * PCPU_SLOT_STRIDE;
}

static void test_advice(void)
{
	pcpu_counter_t c = pcpu_counter_alloc();
	pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	int fd = memfd_create("pcpu-thp", MFD_CLOEXEC);
	pcpu_counter_t s;
	pid_t pid;
	int st;

	CHECK(c != NULL && z != NULL && fd >= 0);
	check_no_huge_advice(chunk_of(c), chunk_of(c) + chunk_span(), "default zone");
	CHECK(pcpu__file_backing_attach(z, fd, 0, NULL, NULL, NULL, 1, NULL) == 0);
	s = pcpu_counter_alloc_in(z, 1);
	CHECK(s != NULL);
	pcpu_counter_add(s, 1);
	check_no_huge_advice(chunk_of(s), chunk_of(s) + chunk_span(), "shared zone (memfd)");
	/* A fork() child gets a private copy moved over the shared chunk. */
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		check_no_huge_advice(chunk_of(s), chunk_of(s) + chunk_span(),
				     "shared zone, private in a fork() child");
		fflush(stdout);
		_exit(pcpu_counter_fetch(s) == 1 ? 0 : 1);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	pcpu_zone_destroy(z);
	close(fd);
	CHECK(pcpu_counter_free(c) == 0);
}

/* ---- what it costs: the --measure child ------------------------------------------ */

static pthread_barrier_t start;
static pcpu_counter_t *sets[3];

static void *adder(void *arg)
{
	int cpu = (int)(intptr_t)arg;

	if (cpu >= 0) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
	}
	pthread_barrier_wait(&start); /* both threads alive: two slots */
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < NCOUNTERS; i++)
			pcpu_counter_add(sets[k][i], 1);
	return NULL;
}

/* Resident pages of a zone's chunk, and the bound: in every region with a
 * resident page, the small pages from the region's start to the end of
 * the last object. Nothing is read from the chunk before (a read of an
 * untouched page would map the zero page, which mincore() counts). */
static void check_chunk_cost(const char *what, pcpu_counter_t *cs, int fd)
{
	uintptr_t base = chunk_of(cs[0]), end = 0;
	size_t span = chunk_span(), npages = span / ps, pages_per_region, resident = 0, bound;
	unsigned char *vec = malloc(npages);
	unsigned nregions = 2 * pcpu_nslots(), written = 0;

	CHECK(vec != NULL);
	for (int i = 0; i < NCOUNTERS; i++) {
		CHECK(chunk_of(cs[i]) == base); /* one chunk */
		if ((uintptr_t)cs[i] + 8 > end)
			end = (uintptr_t)cs[i] + 8;
	}
	pages_per_region = (end - base + ps - 1) / ps;
	CHECK(mincore((void *)base, span, vec) == 0);
	for (unsigned r = 0; r < nregions; r++) {
		size_t n = 0;

		for (size_t p = 0; p < PCPU_SLOT_STRIDE / ps; p++)
			n += vec[r * (PCPU_SLOT_STRIDE / ps) + p] & 1;
		resident += n;
		written += n > 0;
	}
	free(vec);
	bound = written * pages_per_region;
	printf("cost: %s: %u of %u regions resident, %zu kB = %.2f B per counter (small-page bound "
	       "%zu kB)", what, written, nregions, resident * ps / 1024,
	       (double)(resident * ps) / NCOUNTERS, bound * ps / 1024);
	if (fd >= 0) {
		struct stat st;

		CHECK(fstat(fd, &st) == 0);
		printf("; file: %lld kB allocated", (long long)st.st_blocks * 512 / 1024);
		if ((uint64_t)st.st_blocks * 512 > (uint64_t)nregions * pages_per_region * ps) {
			printf("\n");
			fprintf(stderr, "%s: the file holds %lld kB, more than %zu kB of small pages\n",
				what, (long long)st.st_blocks * 512 / 1024,
				nregions * pages_per_region * ps / 1024);
			exit(1);
		}
	}
	printf("\n");
	if (resident > bound) {
		fprintf(stderr, "%s: %zu kB resident in the chunk, more than the %zu kB of small "
			"pages under its objects: huge pages\n", what, resident * ps / 1024,
			bound * ps / 1024);
		exit(1);
	}
}

static int measure(void)
{
	pcpu_zone_t *zshared = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	pcpu_zone_t *zreserved = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	int fd_shared = memfd_create("pcpu-thp-shared", MFD_CLOEXEC);
	int fd_reserved = memfd_create("pcpu-thp-reserved", MFD_CLOEXEC);
	int cpus[2] = {-1, -1}, ncpus = 0;
	pthread_t t[2];
	cpu_set_t set;

	ps = (size_t)sysconf(_SC_PAGESIZE);
	for (int k = 0; k < 3; k++) {
		sets[k] = calloc(NCOUNTERS, sizeof(pcpu_counter_t));
		CHECK(sets[k] != NULL);
	}
	/* The process's first counters: the default zone's first chunk. */
	for (int i = 0; i < NCOUNTERS; i++)
		CHECK((sets[0][i] = pcpu_counter_alloc()) != NULL);
	CHECK(zshared && zreserved && fd_shared >= 0 && fd_reserved >= 0);
	CHECK(pcpu__file_backing_attach(zshared, fd_shared, 0, NULL, NULL, NULL, 0, NULL) == 0);
	CHECK(pcpu__file_backing_attach(zreserved, fd_reserved, 0, NULL, NULL, NULL, 1, NULL) == 0);
	for (int i = 0; i < NCOUNTERS; i++) {
		CHECK((sets[1][i] = pcpu_counter_alloc_in(zshared, 1)) != NULL);
		CHECK((sets[2][i] = pcpu_counter_alloc_in(zreserved, 1)) != NULL);
	}
	/* Two threads on two CPUs, as the per-counter target counts them. */
	CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
	for (int c = 0; c < CPU_SETSIZE && ncpus < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[ncpus++] = c;
	CHECK(pthread_barrier_init(&start, NULL, 2) == 0);
	for (int k = 0; k < 2; k++)
		CHECK(pthread_create(&t[k], NULL, adder, (void *)(intptr_t)cpus[k]) == 0);
	for (int k = 0; k < 2; k++)
		CHECK(pthread_join(t[k], NULL) == 0);

	check_chunk_cost("default zone (private)", sets[0], -1);
	check_chunk_cost("shared zone (memfd)", sets[1], fd_shared);
	check_chunk_cost("reserved shared zone (memfd, as a segment's)", sets[2], fd_reserved);
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < NCOUNTERS; i += 97)
			CHECK_EQ_U64(pcpu_counter_fetch(sets[k][i]), 2);
	return 0;
}

static void run_measure(const char *setting)
{
	pid_t pid;
	int st;

	printf("-- %s\n", setting);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execl("/proc/self/exe", "test_zone_thp", "--measure", (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "the measurement under %s failed\n", setting);
		exit(1);
	}
}

/* ---- switching the setting ------------------------------------------------------- */

static const char *const knobs[2] = {THP_DIR "/enabled", THP_DIR "/shmem_enabled"};
static char saved[2][32]; /* "" where the knob is absent */
static volatile sig_atomic_t switched_by; /* pid of the process that switched them, 0 */

/* The bracketed word of a knob ("always [madvise] never"), or "". */
static void read_knob(const char *path, char *out, size_t cap)
{
	char buf[256], *l, *r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

	out[0] = '\0';
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	l = strchr(buf, '[');
	r = l ? strchr(l, ']') : NULL;
	if (l && r && (size_t)(r - l - 1) < cap) {
		memcpy(out, l + 1, (size_t)(r - l - 1));
		out[r - l - 1] = '\0';
	}
}

/* Async-signal-safe (the restore runs from a signal handler too). */
static int write_knob(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, value, strlen(value));
	close(fd);
	return n == (ssize_t)strlen(value) ? 0 : -1;
}

/* Restores what the switching process saved: from the normal path, from
 * exit() on a failed CHECK (atexit), and from a signal handler. */
static void restore_knobs(void)
{
	if (switched_by != getpid())
		return;
	for (int k = 0; k < 2; k++)
		if (saved[k][0])
			(void)write_knob(knobs[k], saved[k]);
	switched_by = 0;
}

static void on_signal(int sig)
{
	restore_knobs();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void test_under_always(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	const char *env = getenv("PCPU_TEST_THP_SWITCH");
	struct sigaction sa, old[4];
	char now[32];
	int lock;

	if (env && strcmp(env, "0") == 0) {
		printf("THP `always` not tried: PCPU_TEST_THP_SWITCH=0\n");
		return;
	}
	{
		int fd = open(knobs[0], O_WRONLY | O_CLOEXEC);

		if (fd < 0) {
			printf("THP `always` not tried: %s is not writable here (%s): checked "
			       "under this machine's setting only\n", knobs[0], strerror(errno));
			return;
		}
		close(fd);
	}
	lock = open("/tmp/pcpu-test-thp.lock", O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(lock >= 0);
	CHECK(flock(lock, LOCK_EX) == 0);
	for (int k = 0; k < 2; k++)
		read_knob(knobs[k], saved[k], sizeof saved[k]);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	for (int k = 0; k < 4; k++)
		CHECK(sigaction(sigs[k], &sa, &old[k]) == 0);
	CHECK(atexit(restore_knobs) == 0);
	switched_by = getpid();
	if (write_knob(knobs[0], "always") != 0) {
		restore_knobs();
		fprintf(stderr, "%s: cannot write 'always': %s\n", knobs[0], strerror(errno));
		exit(1);
	}
	if (saved[1][0])
		(void)write_knob(knobs[1], "always");
	read_knob(knobs[0], now, sizeof now);
	CHECK(strcmp(now, "always") == 0);
	run_measure("THP enabled=always, shmem_enabled=always (switched; restored below)");
	restore_knobs();
	for (int k = 0; k < 4; k++)
		CHECK(sigaction(sigs[k], &old[k], NULL) == 0);
	for (int k = 0; k < 2; k++) {
		read_knob(knobs[k], now, sizeof now);
		CHECK(strcmp(now, saved[k]) == 0);
	}
	printf("restored: enabled=%s, shmem_enabled=%s\n", saved[0], saved[1][0] ? saved[1] : "-");
	flock(lock, LOCK_UN);
	close(lock);
}

int main(int argc, char **argv)
{
	char enabled[32], shmem[32];

	if (argc > 1 && strcmp(argv[1], "--measure") == 0)
		return measure();
	ps = (size_t)sysconf(_SC_PAGESIZE);
	if (access(THP_DIR, F_OK) == 0) {
		test_advice();
		test_segment_advice();
	} else
		printf("advice: no %s (a kernel without THP): nothing to ask for\n", THP_DIR);
	read_knob(knobs[0], enabled, sizeof enabled);
	read_knob(knobs[1], shmem, sizeof shmem);
	{
		char what[128];

		snprintf(what, sizeof what, "this machine's setting: enabled=%s, shmem_enabled=%s",
			 enabled[0] ? enabled : "-", shmem[0] ? shmem : "-");
		run_measure(what);
	}
	test_under_always();
	printf("test_zone_thp: ok\n");
	return 0;
}
