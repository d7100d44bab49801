/*
 * The emulated machines' test (scripts/vm/run.sh): a static program that
 * runs as /init of an initramfs under qemu-system-aarch64, -x86_64, -arm or
 * -riscv64, or as an ordinary program on the host. As init it mounts a
 * tmpfs on /dev/shm for --workload tree's segment.
 *
 * Threads (2 per online CPU, at least 4) drive the public API at once:
 * counter adds, add_many, histogram records, a consistent group's add2 (with
 * a reader checking every read it makes is consistent), ref get/put, a
 * big-reader lock (a writer changes two words that readers must always see
 * equal), an object cache (no object handed out twice), counter(9) adds
 * (pcpu/counter9.h: counter_u64_add, counter_u64_add_protected, fetched
 * exact at the end), a hierarchical counter's adds with carries up its tree
 * (pcpu/hcounter.h, batch 16: sum, bounds and compare exact at the end), a
 * second one as a limiter (limited adds of 1 against a limit a few times its
 * range, released in bulk: never more held than the limit), and a per-slot
 * log written by the public pcpu_rseq_load_cbne_store_store() (each slot's
 * head counts its commits). Each adder's own timer signal interrupts it, and
 * the handler adds to counters, the histogram, the group, the hierarchical
 * counter and an early counter(9) counter (COUNTER_U64_DEFINE_EARLY:
 * allocated by a constructor before main()) too. The main thread forks children now and then,
 * each of which checks its copy of a counter counts exactly; with
 * --hotplug N it also takes CPUs offline and online N times through
 * /sys/devices/system/cpu/cpuK/online while the threads run.
 *
 * Built with PCPU_TEST_INJECT (pcpu/arch/common.h) for the count of
 * aborted sections (spin 0 by default: the sections are the ordinary ones
 * but for the hook's branch), and by scripts/vm/run.sh also with
 * PCPU_TEST_SPLIT_BLOCKS (an emulator may interrupt a section after each of
 * its loads and adds) and with PCPU_TEST_SPLIT_BLOCKS +
 * PCPU_TEST_BROKEN_SECTION (the descriptors' ranges end before the commit),
 * which must lose updates: run.sh expects that build to FAIL.
 *
 * It runs until --adds N updates AND --aborts A aborted sections (rseq
 * modes) AND every hotplug switch are done -- not for a fixed time;
 * --max-seconds only bounds a run that cannot get there. Then every total
 * must be exact. One line is printed:
 *   VM_RESULT arch=... kernel=... mode=... index=... cpus=P/Q owned=O adds=N
 *             aborts=A forks=F hotplug=H seconds=S result=exact|FAILED
 * (owned: adders that claimed an owned slot and added through it too)
 * (and the reasons before it). As /init (pid 1) it mounts /proc and /sys
 * first and powers the machine off at the end (the kernel must never see
 * init exit).
 *
 * Modes (--mode): glibc (glibc's registration), own (pcpu's own:
 * GLIBC_TUNABLES=glibc.pthread.rseq=0), fallback (PCPU_RSEQ=0), seccomp
 * (rseq refused with EPERM by a seccomp filter). --index cpu|mm_cid sets
 * PCPU_INDEX; --expect-index cpu|mm_cid checks what the process then uses
 * (pcpu_zone_index(NULL)): mm_cid asked for on a kernel without it must
 * report cpu. The environment is set and the program execs itself once, so
 * that glibc and pcpu read it at start-up.
 *
 * --modes M1,M2,...: each mode (with :index, :expect=, :hotplug=N) in a
 * child of its own, one after the other; --rounds R runs a mode again
 * while it ends exact, R runs at most (the broken build's chances).
 *
 * --workload tree (a spec's :tree, e.g. --modes glibc:tree): instead of the
 * threads' stress, a pre-fork server's shared-tree registry (see "--workload
 * tree" below), PCPU_INDEX=cpu; --tree-adds N and --tree-aborts A replace
 * --adds and --aborts there. Its line is VM_RESULT ... workload=tree
 * workers=W threads=T ... hook_reads=R injected=I ...
 *
 * --workload carry (a spec's :carry): instead of the stress, readers racing
 * adds that carry past 2^32 (see "--workload carry" below); --carry-reads N
 * fetches (3 x 10^6).
 *
 * --footprint (or --mode footprint): instead of the stress, the memory and
 * fetch cost of 10^6 counters written from 2 slots (two threads pinned to
 * CPUs 0 and 1), as
 *   VM_FOOTPRINT ... bytes_per_counter=B vmpte_kb=+K vmsize_mb=+M fetch_ns=T
 * (resident memory, page tables and address space grown by the allocation,
 * the writes and the reads: a fetch_array of all, then 20000 timed fetches)
 * --mode footprint-all: the same with PCPU_SLOT_WALK=all, a fetch reading
 * every possible slot (as before src/core/slot_walk.c), for comparison.
 * --mode footprint-sparse: instead, the segment file's bytes per series of
 * published histograms, dense and sparse, at this machine's present CPUs
 * (see "--mode footprint-sparse" below), as VM_FOOTPRINT_SPARSE lines.
 *
 * --strict-commit (a spec's :strict, e.g. own:strict, footprint:strict,
 * own:tree:strict): the run under strict commit accounting: the machine's
 * vm.overcommit_memory is set to 2 before the mode's run (where the kernel
 * ignores MAP_NORESERVE and charges every writable private mapping; pcpu
 * must see it and keep its private zones' writable memory to what it
 * writes, src/core/zone_chunk.h) and back to 0 after it. The run must be
 * exact as any other; its line adds commit_kb=+C (Committed_AS grown by
 * the run) and commit_limit_kb=L before result=. Before issue 61, at 256 possible CPUs,
 * the first counter failed with ENOMEM (16 GiB charged per chunk).
 */
#define PCPU_TEST_INJECT 1
#include "../check.h"
#include "../present_cpus.h" /* read_cpu_list() */
#include "../seccomp_deny.h"
#include <pcpu/pcpu.h>
#include <pcpu/counter9.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#ifdef PCPU_ARCH_NAME /* the arch header's (pcpu/arch/<arch>.h) */
#define ARCH PCPU_ARCH_NAME
#else
#define ARCH "other"
#endif

#if defined(PCPU_TEST_BROKEN_SECTION)
#define VARIANT "broken-split"
#elif defined(PCPU_TEST_SPLIT_BLOCKS)
#define VARIANT "split"
#else
#define VARIANT "plain"
#endif

unsigned pcpu__test_inject_spin;
/* The core's choice of strict commit accounting (src/core/slot_walk.c). */
extern int pcpu_commit_strict;
__thread unsigned long pcpu__test_inject_aborts;
void pcpu__test_inject_before(void)
{
}

/* group.c's test hook (the library's, hidden; a static link reaches it):
 * a shared registry's group writer, its lane held and its first member
 * written, the others not. --workload tree reads the group there. */
extern void (*pcpu__test_group_tree_pause)(void *lane);
/* And on its rseq path, between its read of the lane's seq and the section
 * that takes the lane. */
extern void (*pcpu__test_group_tree_before_take)(void *lane);

static int is_init;
static int failures;

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("vm_stress: FAIL: ", stdout);
	vfprintf(stdout, fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
	va_end(ap);
	__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
}

/* The end: as init, power off (exiting would panic the kernel). */
static void finish(int rc)
{
	fflush(stdout);
	fflush(stderr);
	if (is_init) {
		sync();
		reboot(RB_POWER_OFF);
		for (;;)
			pause();
	}
	exit(rc);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int read_file(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' '))
		buf[--r] = 0;
	return 0;
}

static long file_kb(const char *file, const char *field)
{
	char buf[8192], *p;

	if (read_file(file, buf, sizeof(buf)) != 0 || !(p = strstr(buf, field)))
		return -1;
	return strtol(p + strlen(field) + 1, NULL, 10);
}

/* VmPTE and VmSize from /proc/self/status; resident memory from
 * smaps_rollup, which walks the page tables (status's VmRSS is kept per
 * thread and folded in late). */
static long status_kb(const char *field)
{
	if (!strcmp(field, "VmRSS:"))
		return file_kb("/proc/self/smaps_rollup", "Rss:");
	return file_kb("/proc/self/status", field);
}

/* ---- strict commit accounting (issue 61) -------------------------------------- */

/* MODE:strict (--strict-commit): the machine's vm.overcommit_memory set to
 * 2 ("never overcommit", where MAP_NORESERVE is ignored and every writable
 * private mapping is charged) before the mode's run, back to 0 after it
 * (run_modes); the run must go as any other, and reports the commit it
 * added (Committed_AS, /proc/meminfo) against the machine's CommitLimit. */
static int strict_commit;
static long commit0_kb;

static int set_overcommit(const char *mode)
{
	int fd = open("/proc/sys/vm/overcommit_memory", O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, mode, 1) == 1;
	close(fd);
	return ok ? 0 : -1;
}

/* " commit_kb=+N commit_limit_kb=L", or "" outside MODE:strict. */
static const char *commit_report(void)
{
	static char buf[96];

	buf[0] = '\0';
	if (strict_commit)
		snprintf(buf, sizeof buf, " commit_kb=+%ld commit_limit_kb=%ld",
			 file_kb("/proc/meminfo", "Committed_AS:") - commit0_kb,
			 file_kb("/proc/meminfo", "CommitLimit:"));
	return buf;
}

/* ---- the shared objects and what the threads added to them ------------------ */

enum { NSINGLE = 3, NMANY = 4, NCNT = NSINGLE + NMANY, MAX_THREADS = 128 };
static pcpu_counter_t single[NSINGLE], many;
static pcpu_histogram_t *hist;
static pcpu_group_t *group;
static pcpu_ref_t *ref;
static pcpu_rwlock_t *rw;
static pcpu_objcache_t *cache;
/* counter(9) (pcpu/counter9.h): two counters the adders add to (one through
 * counter_u64_add_protected), and an early one (allocated by its
 * constructor before main()) the handler adds to. */
static counter_u64_t c9[2];
static COUNTER_U64_DEFINE_EARLY(c9_early);
static int64_t exp_c9[2], exp_c9_early;
/* Hierarchical counters (pcpu/hcounter.h): hc added to (carries up the
 * tree), hl a limiter; hl_held what the adders hold (raised after an
 * admission, lowered before a release: never above hl's precise sum, so
 * never above the limit unless a limited add over-admitted). */
static pcpu_hcounter_t *hc, *hl;
static int64_t exp_hc, hl_limit, hl_held, hl_admitted, hl_refused, hl_over;
/* A per-slot log (pcpu_rseq_load_cbne_store_store): a commit stores an
 * entry, then advances the head from the value it read; the heads' sum is
 * the commits. */
struct vlog {
	intptr_t head;
	intptr_t entry[7];
};
static struct vlog *vlog;
static unsigned long vlog_commits;
static int released;
static int64_t expected[NCNT], exp_g0, exp_g1, exp_hsum;
static uint64_t *exp_hcount; /* per bucket */
static size_t nbuckets;
static unsigned long total_adds, total_aborts, bad_group_reads, group_reads, bad_rw_reads;
static unsigned long rw_writes, cache_ops, handed_twice;
static int owned_claims; /* adders that got an owned slot (odd ones try) */
static int stop, stop_reader, nthreads;
static const char *expect_mode;
static unsigned timer_us = 50;
static volatile uint64_t rw_a, rw_b; /* written under the write lock */

struct obj {
	int in_use;
	char pad[60];
};

static void release_fn(void *arg)
{
	(void)arg;
	__atomic_fetch_add(&released, 1, __ATOMIC_RELAXED);
}

/* What this thread's signal handler added (written only by the handler,
 * which the thread's own timer runs; folded in with signals blocked). The
 * thread reads the count while its handler may run, for --adds: relaxed
 * atomics, so that it is loaded afresh and never torn. */
static __thread int64_t h_runs;

/* Updates a handler's run makes (its counter, histogram, group and
 * hierarchical counter adds). */
enum { HANDLER_ADDS = 6 };

static void handler(int sig)
{
	int saved = errno;

	(void)sig;
	pcpu_counter_add(single[0], 3);
	pcpu_counter_add(single[2], -2);
	pcpu_histogram_record(hist, 7);
	pcpu_group_add2(group, 0, 1, 2);
	counter_u64_add(c9_early, 1);
	pcpu_hcounter_add(hc, 1);
	__atomic_store_n(&h_runs, h_runs + 1, __ATOMIC_RELAXED);
	errno = saved;
}

static void check_mode(void)
{
	const char *m = pcpu_rseq_mode_name(pcpu_rseq_mode());

	if (expect_mode && strcmp(m, expect_mode) != 0)
		fail("a thread runs in mode %s (error %d: %s), expected %s", m, pcpu_rseq_error(),
		     strerror(pcpu_rseq_error()), expect_mode);
}

static void *adder(void *arg)
{
	int me = (int)(intptr_t)arg;
	int64_t local[NCNT] = {0}, g0 = 0, g1 = 0, hsum = 0, c9l[2] = {0}, hcl = 0;
	int64_t held = 0, admitted = 0, refused = 0, hold_max = 2 * hl_limit / nthreads + 1;
	unsigned long vcommits = 0;
	uint64_t *hcount = calloc(nbuckets, sizeof(*hcount));
	uint64_t rng = 0x9e3779b97f4a7c15ull * ((uint64_t)me + 1);
	unsigned long i = 0, published_adds = 0, published_aborts = 0, ops = 0, loops = 0;
	struct sigevent sev;
	timer_t timer;
	sigset_t all;
	/* Odd adders claim an owned slot when one is free and then make half
	 * their counter adds through it (pcpu/worker.h): a plain add, or on
	 * aarch64 a load and store, beside the other threads' sections on the
	 * same counters. The handler keeps the ordinary adds (an owned add is
	 * not signal-safe on aarch64). */
	pcpu_worker_t claimed = {0};
	pcpu_owned_array_t view = {0};
	int owner = me % 2 == 1 && pcpu_worker_claim(&claimed) == 0;
	const pcpu_worker_t w = claimed;

	CHECK(hcount);
	if (owner) {
		CHECK(pcpu_counter_owned_array(w, many, &view) == 0);
		__atomic_fetch_add(&owned_claims, 1, __ATOMIC_RELAXED);
	}
	check_mode();
	if (timer_us) {
		struct itimerspec every = {{0, (long)timer_us * 1000}, {0, (long)timer_us * 1000}};

		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGUSR1;
		sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
		CHECK(timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0);
		CHECK(timer_settime(timer, 0, &every, NULL) == 0);
	}
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t r = check_xorshift(&rng);
		int64_t v = (int64_t)(r % 2001) - 1000;
		unsigned k = (unsigned)((r >> 16) % 16);

		if (k < 6) {
			if (owner && (r >> 40) & 1)
				pcpu_counter_add_owned(w, single[k % NSINGLE], v);
			else
				pcpu_counter_add(single[k % NSINGLE], v);
			local[k % NSINGLE] += v;
			i += 1;
		} else if (k < 8) {
			pcpu_counter_t cs[NMANY] = {many, many + 1, many + 2, many + 3};
			int64_t vs[NMANY] = {1, v, -v / 3, 1000};

			if (owner && (r >> 40) & 1)
				for (int j = 0; j < NMANY; j++)
					pcpu_owned_array_add(view, (size_t)j, vs[j]);
			else
				pcpu_counter_add_many(cs, vs, NMANY);
			for (int j = 0; j < NMANY; j++)
				local[NSINGLE + j] += vs[j];
			i += NMANY;
		} else if (k < 11) {
			int64_t hv = (int64_t)(r >> 40) % 100000;

			pcpu_histogram_record(hist, hv);
			hcount[pcpu_histogram_bucket_of(hist, hv)]++;
			hsum += hv;
			i += 1;
		} else if (k < 13) {
			int64_t d = (int64_t)((r >> 24) % 100) + 1;

			pcpu_group_add2(group, 0, d, 2 * d);
			g0 += d;
			g1 += 2 * d;
			i += 1;
		} else if (k < 14) {
			pcpu_ref_get(ref);
			pcpu_ref_put(ref);
			i += 2;
		} else if (k < 15) {
			pcpu_rwlock_rdlock(rw);
			if (rw_a != rw_b)
				__atomic_fetch_add(&bad_rw_reads, 1, __ATOMIC_RELAXED);
			pcpu_rwlock_rdunlock(rw);
			i += 2;
		} else {
			struct obj *o = pcpu_objcache_get(cache);

			if (!o) {
				fail("pcpu_objcache_get: %s", strerror(errno));
			} else {
				if (__atomic_exchange_n(&o->in_use, 1, __ATOMIC_RELAXED))
					__atomic_fetch_add(&handed_twice, 1, __ATOMIC_RELAXED);
				__atomic_store_n(&o->in_use, 0, __ATOMIC_RELAXED);
				pcpu_objcache_put(cache, o);
				ops++;
			}
		}
		if (((r >> 52) & 7) == 0) {
			/* counter(9): an eighth of the iterations. */
			unsigned j = (unsigned)(r >> 55) & 1;

			if (j) {
				counter_enter();
				counter_u64_add_protected(c9[1], v);
				counter_exit();
			} else {
				counter_u64_add(c9[0], v);
			}
			c9l[j] += v;
			i += 1;
		}
		if (((r >> 56) & 3) == 0) {
			/* The hierarchical counter: small adds, mostly up, so
			 * that a slot's word crosses its batch every few adds. */
			int64_t d = (int64_t)((r >> 44) % 9) - 3;

			pcpu_hcounter_add(hc, d);
			hcl += d;
			i += 1;
		} else if (((r >> 56) & 3) == 1) {
			/* The limiter: take one, or release all held (when
			 * refused, at hold_max, or now and then). */
			if (held < hold_max && ((r >> 58) & 63) != 0) {
				if (pcpu_hcounter_limited_add(hl, 1, hl_limit)) {
					if (__atomic_add_fetch(&hl_held, 1, __ATOMIC_RELAXED) > hl_limit)
						__atomic_fetch_add(&hl_over, 1, __ATOMIC_RELAXED);
					held++;
					admitted++;
				} else {
					refused++;
					held = -held; /* release below */
				}
			} else {
				held = -held;
			}
			if (held < 0) {
				__atomic_fetch_sub(&hl_held, -held, __ATOMIC_RELAXED);
				pcpu_hcounter_add(hl, held);
				held = 0;
			}
			i += 1;
		} else if (((r >> 56) & 3) == 2 && vlog) {
			/* The public compare-and-store with a second store: the
			 * entry, then the head (the commit). Aborted or
			 * differing: not counted, nothing to undo (the entry is
			 * past the head). */
			int64_t idx = pcpu_rseq_index();

			if (idx >= 0) {
				struct vlog *l = pcpu_slot_ptr(vlog, (unsigned)idx);
				intptr_t h = __atomic_load_n(&l->head, __ATOMIC_RELAXED);

				if (pcpu_rseq_load_cbne_store_store(idx, &l->head, h, &l->entry[h & 7],
								    (intptr_t)me, h + 1) ==
				    PCPU_RSEQ_COMMITTED) {
					vcommits++;
					i += 1;
				}
			}
		}
		if ((++loops & 255) == 0) {
			/* The handler's updates count toward --adds as they
			 * happen: under TCG they can outnumber the loop's
			 * (the 8-vCPU aarch64 fallback run went on to 9 times
			 * its --adds, 190 s, counting the loop's alone). */
			unsigned long done =
				i + HANDLER_ADDS * (unsigned long)__atomic_load_n(&h_runs, __ATOMIC_RELAXED);

			__atomic_fetch_add(&total_adds, done - published_adds, __ATOMIC_RELAXED);
			published_adds = done;
			__atomic_fetch_add(&total_aborts, pcpu__test_inject_aborts - published_aborts,
					   __ATOMIC_RELAXED);
			published_aborts = pcpu__test_inject_aborts;
		}
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (timer_us)
		CHECK(timer_delete(timer) == 0);
	for (int j = 0; j < NCNT; j++)
		__atomic_fetch_add(&expected[j], local[j], __ATOMIC_RELAXED);
	if (held) {
		__atomic_fetch_sub(&hl_held, held, __ATOMIC_RELAXED);
		pcpu_hcounter_add(hl, -held);
	}
	__atomic_fetch_add(&hl_admitted, admitted, __ATOMIC_RELAXED);
	__atomic_fetch_add(&hl_refused, refused, __ATOMIC_RELAXED);
	__atomic_fetch_add(&vlog_commits, vcommits, __ATOMIC_RELAXED);
	__atomic_fetch_add(&exp_hc, hcl + h_runs, __ATOMIC_RELAXED);
	/* The handler's adds */
	__atomic_fetch_add(&expected[0], 3 * h_runs, __ATOMIC_RELAXED);
	__atomic_fetch_add(&expected[2], -2 * h_runs, __ATOMIC_RELAXED);
	hcount[pcpu_histogram_bucket_of(hist, 7)] += (uint64_t)h_runs;
	hsum += 7 * h_runs;
	g0 += h_runs;
	g1 += 2 * h_runs;
	i += HANDLER_ADDS * (unsigned long)h_runs;
	for (int j = 0; j < 2; j++)
		__atomic_fetch_add(&exp_c9[j], c9l[j], __ATOMIC_RELAXED);
	__atomic_fetch_add(&exp_c9_early, h_runs, __ATOMIC_RELAXED);
	for (size_t b = 0; b < nbuckets; b++)
		__atomic_fetch_add(&exp_hcount[b], hcount[b], __ATOMIC_RELAXED);
	__atomic_fetch_add(&exp_hsum, hsum, __ATOMIC_RELAXED);
	__atomic_fetch_add(&exp_g0, g0, __ATOMIC_RELAXED);
	__atomic_fetch_add(&exp_g1, g1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&total_adds, i - published_adds, __ATOMIC_RELAXED);
	__atomic_fetch_add(&total_aborts, pcpu__test_inject_aborts - published_aborts, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cache_ops, ops, __ATOMIC_RELAXED);
	free(hcount);
	return NULL;
}

/* The write lock, or -1 once the readers' count shows a lost update. The
 * broken build (PCPU_TEST_BROKEN_SECTION) loses read lock and unlock
 * updates too: a lost unlock leaves a reader inside for ever, so there the
 * lock is polled with trywrlock, never waited for; a lost lock makes the
 * count negative, which wrlock reports as ENOTRECOVERABLE. Either is a
 * lost update found, reported as a failure of the rwlock, not a CHECK. */
static int rw_lost;

static int write_lock(void)
{
#ifdef PCPU_TEST_BROKEN_SECTION
	for (;;) {
		errno = 0;
		if (pcpu_rwlock_trywrlock(rw))
			return 0;
		if (errno != EBUSY)
			break;
		if (__atomic_load_n(&stop_reader, __ATOMIC_RELAXED))
			return -1;
		usleep(100);
	}
#else
	if (pcpu_rwlock_wrlock(rw) == 0)
		return 0;
#endif
	if (errno == ENOTRECOVERABLE)
		fail("rwlock: more read unlocks than read locks (a lost update)");
	else
		fail("pcpu_rwlock_wrlock: %s", strerror(errno));
	rw_lost = 1;
	return -1;
}

/* Reads the group (every read consistent: member 1 is twice member 0) and
 * takes the write lock now and then. */
static void *reader(void *arg)
{
	unsigned long n = 0, bad = 0, writes = 0;

	(void)arg;
	check_mode();
	while (!__atomic_load_n(&stop_reader, __ATOMIC_RELAXED)) {
		int64_t out[2];

		if (pcpu_group_read(group, 0, out) == 0) {
			n++;
			if (out[1] != 2 * out[0])
				bad++;
		}
		if ((n & 63) == 0 && !rw_lost) {
			if (write_lock() != 0)
				continue;
			rw_a = rw_a + 1;
			for (volatile int k = 0; k < 100; k++)
				;
			rw_b = rw_a;
			CHECK(pcpu_rwlock_wrunlock(rw) == 0);
			writes++;
		}
		usleep(200);
	}
	group_reads = n;
	bad_group_reads = bad;
	rw_writes = writes;
	return NULL;
}

/* A child of fork() counts exactly in its copy of a busy counter. */
static int fork_check(void)
{
	pid_t pid = fork();
	int st;

	if (pid < 0) {
		fail("fork: %s", strerror(errno));
		return 0;
	}
	if (pid == 0) {
		uint64_t v0 = pcpu_counter_fetch(single[1]);

		for (int k = 0; k < 100000; k++)
			pcpu_counter_add(single[1], k % 3 - 1 + 2); /* 1, 2, 3 */
		pcpu_histogram_record(hist, 1);
		_exit(pcpu_counter_fetch(single[1]) == v0 + 200000 - 1 ? 0 : 3);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			fail("waitpid: %s", strerror(errno));
			return 0;
		}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("fork child: its copy of the counter is not exact (status 0x%x)", st);
	return 1;
}

/* Takes CPU `cpu` offline or online; 0 if done. */
static int cpu_online(int cpu, int on)
{
	char path[64];
	int fd, ok;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ok = write(fd, on ? "1" : "0", 1) == 1;
	close(fd);
	return ok ? 0 : -1;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	CHECK(sched_setaffinity(0, sizeof(set), &set) == 0);
}

/* ---- --footprint ------------------------------------------------------------ */

enum { FP_N = 1000000 };
static pcpu_counter_t fp_arr;
static void *fp_writer(void *arg)
{
	pin((int)(intptr_t)arg);
	for (size_t i = 0; i < FP_N; i++)
		pcpu_counter_add(pcpu_counter_at(fp_arr, i), 1);
	return NULL;
}

static void footprint(const char *kernel, unsigned present, unsigned possible, const char *mode,
		      const char *spec)
{
	long rss0, pte0, vm0, rss1, pte1, vm1;
	pthread_t t[2];
	double t0, per;
	uint64_t sum = 0;
	int iters = 20000; /* every 50th counter: all the slot regions' pages */

	rss0 = status_kb("VmRSS:");
	pte0 = status_kb("VmPTE:");
	vm0 = status_kb("VmSize:");
	fp_arr = pcpu_counter_alloc_array(FP_N);
	CHECK(fp_arr);
	for (int k = 0; k < 2; k++)
		CHECK(pthread_create(&t[k], NULL, fp_writer, (void *)(intptr_t)k) == 0);
	for (int k = 0; k < 2; k++)
		CHECK(pthread_join(t[k], NULL) == 0);
	/* Every counter read, twice: all at once, then one by one (timed). */
	{
		uint64_t *all = malloc(FP_N * sizeof(*all));

		CHECK(all && pcpu_counter_fetch_array(fp_arr, FP_N, all) == 0);
		for (size_t i = 0; i < FP_N; i++)
			if (all[i] != 2) {
				fail("footprint: counter %zu is %" PRIu64 ", not 2", i, all[i]);
				break;
			}
		free(all);
	}
	t0 = now_s();
	for (int k = 0; k < iters; k++)
		sum += pcpu_counter_fetch(pcpu_counter_at(fp_arr, (size_t)k * 50 % FP_N));
	per = (now_s() - t0) / iters * 1e9;
	CHECK(sum == 2u * (uint64_t)iters);
	/* After the writes and the reads: what reading the slots cost too. */
	rss1 = status_kb("VmRSS:");
	pte1 = status_kb("VmPTE:");
	vm1 = status_kb("VmSize:");
	printf("VM_FOOTPRINT arch=%s kernel=%s mode=%s cpus=%u/%u nslots=%u counters=%d slots_written=2 "
	       "bytes_per_counter=%.2f vmpte_kb=+%ld vmsize_mb=+%ld fetch_ns=%.0f%s result=%s spec=%s\n",
	       ARCH, kernel, mode, present, possible, pcpu_nslots(), FP_N,
	       (double)(rss1 - rss0) * 1024.0 / FP_N, pte1 - pte0, (vm1 - vm0) / 1024, per,
	       commit_report(), failures ? "FAILED" : "ok", spec);
	finish(failures ? 1 : 0);
}

/* ---- --mode footprint-sparse ------------------------------------------------ */

/*
 * The segment file's bytes per series of published histograms, dense and
 * sparse (PCPU_FAMILY_SPARSE), on this machine's present CPUs: what
 * bench/memory.md's "Sparse histograms, published" measures on 2 present
 * CPUs, here with as many as the emulated machine has. A segment reserves
 * the file's pages under a new object in the regions of every present CPU
 * (a full tmpfs must never raise SIGBUS in a record), so the present count
 * moves the figures, and PCPU_NSLOTS (more slots, the same 2 present CPUs)
 * cannot stand in for it. The layouts and publications are
 * bench/memory_bench.c's: the nginx module's (247 buckets) in a shared
 * tree, as the module's; Prometheus' native schema 3 (481 buckets) in an
 * ordinary segment. Per kind, a registry of its own, a warm-up series
 * (the one-time costs: the registry, the family, the first pages), then
 * SPF_N series, and the file's growth divided by SPF_N after each stage,
 * each on top of the one before:
 *   reg   the series registered, nothing recorded;
 *   w1    one record into each, from CPU 0 (the thread pinned there: the
 *         first CPU this process may run on);
 *   w2    one more from CPU 1 (the second), the same bucket;
 *   all2  a value in every bucket of each, from CPU 0 and from CPU 1;
 * and, in another registry of the same kind (so that no bucket written
 * above counts),
 *   wall  one record into each from every CPU this process may run on (the
 *         line's writers=P), in turn, the same bucket.
 * The writes go to slot c from CPU c (PCPU_INDEX=cpu, set for the
 * footprint modes). Every series' count is checked. One line per kind,
 *   VM_FOOTPRINT_SPARSE ... kind=K buckets=B n=N writers=P file_per_series
 *     reg=.. w1=.. w2=.. all2=.. wall=..
 * then VM_FOOTPRINT ... result=ok|FAILED spec=SPEC (run.sh's verdict).
 * SPF_N = 256: the 16-byte pairs of a dense series fill whole pages in
 * every region whatever its buckets (bench/memory_bench.c's N/40), and 8
 * buckets' 128 bytes do too.
 */
enum { SPF_N = 256 };
static const struct {
	const char *name;
	int tree, native3, sparse;
} spf_kinds[] = {
	{"nginx-tree-dense", 1, 0, 0},
	{"nginx-tree-sparse", 1, 0, 1},
	{"native3-segment-dense", 0, 1, 0},
	{"native3-segment-sparse", 0, 1, 1},
};

/* Copied from bench/memory_bench.c (nginx_layout, native3_layout), itself
 * from integrations/nginx/ngx_http_pcpu_tree.c: the same series measured. */
static const struct pcpu_histogram_layout spf_nginx = {
	.scheme = PCPU_HISTOGRAM_EXPONENTIAL,
	.schema = 2,
	.export_per_octave = 1,
	.max_value = 60000000,
};
static const struct pcpu_histogram_layout spf_native3 = {
	.scheme = PCPU_HISTOGRAM_EXPONENTIAL,
	.schema = 3,
};

static double spf_file(const char *path)
{
	struct stat st;

	CHECK(stat(path, &st) == 0);
	return (double)st.st_blocks * 512.0;
}

/* pin(), and the thread then runs there (a record lands in that CPU's slot). */
static void spf_pin(int cpu)
{
	pin(cpu);
	if (sched_getcpu() != cpu)
		fail("footprint-sparse: pinned to CPU %d, runs on %d", cpu, sched_getcpu());
}

/* One record, out of line: inlined into spf_run(), whose loops keep many
 * values live, the ARMv7 pair section's operands (a base and two 64-bit
 * values beside its five fixed registers) found no registers left ("asm
 * operand has impossible constraints", gcc 12, armhf). */
static __attribute__((noinline)) void spf_record(const pcpu_histogram_t *h, int64_t v)
{
	pcpu_histogram_record(h, v);
}

/* One registry of kind k: SPF_N series, one record from each of the
 * `nw` CPUs cpus[] in turn, then (all) every bucket from the first two.
 * out[0..3] get the file's growth per series after reg, w1, the nw CPUs'
 * records (w2 or wall) and all2. Returns the series' buckets. */
static size_t spf_run(int k, const int *cpus, int nw, int all, double *out)
{
	static const char *const label[] = {"id"};
	char dir[] = "/dev/shm/vm_sparse.XXXXXX", id[16];
	const char *lv[1] = {id};
	struct pcpu_segment_options o = {0};
	struct pcpu_family_desc d = {0};
	const pcpu_histogram_t *h[SPF_N];
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_family_t *fam;
	const char *path;
	uint64_t want = 0, got, *counts;
	double base;
	size_t nb;
	int64_t v = spf_kinds[k].native3 ? 3000000 /* 3 ms in ns */ : 1500 /* 1.5 ms in us */;

	spf_pin(cpus[0]);
	CHECK(mkdtemp(dir));
	reg = pcpu_registry_create();
	CHECK(reg);
	o.dir = dir;
	o.flags = spf_kinds[k].tree ? PCPU_SEGMENT_SHARED_TREE : 0;
	seg = pcpu_segment_publish(reg, "sparse", &o);
	if (!seg) {
		fail("footprint-sparse: pcpu_segment_publish: %s", pcpu_segment_error());
		finish(1);
	}
	path = pcpu_segment_path(seg);
	d.name = "vm_duration_seconds";
	d.help = "Duration.";
	d.unit = "seconds";
	d.type = PCPU_METRIC_HISTOGRAM;
	d.nlabels = 1;
	d.label_names = label;
	d.histogram = spf_kinds[k].native3 ? &spf_native3 : &spf_nginx;
	d.scale_exp10 = spf_kinds[k].native3 ? -9 : -6;
	fam = pcpu_registry_family_ex(reg, &d, spf_kinds[k].sparse ? PCPU_FAMILY_SPARSE : 0, 0, NULL,
				      NULL);
	if (!fam) {
		fail("footprint-sparse: family: %s", pcpu_stats_error());
		finish(1);
	}
	snprintf(id, sizeof id, "warm-up");
	CHECK(pcpu_family_histogram(fam, lv));
	base = spf_file(path);
	for (int i = 0; i < SPF_N; i++) {
		snprintf(id, sizeof id, "%d", i);
		h[i] = pcpu_family_histogram(fam, lv);
		CHECK(h[i]);
	}
	nb = pcpu_histogram_nbuckets(h[0]);
	out[0] = (spf_file(path) - base) / SPF_N;
	for (int c = 0; c < nw; c++) {
		spf_pin(cpus[c]);
		for (int i = 0; i < SPF_N; i++)
			spf_record(h[i], v);
		want++;
		if (c == 0 || c == nw - 1)
			out[c == 0 ? 1 : 2] = (spf_file(path) - base) / SPF_N;
	}
	if (all) {
		for (int c = 0; c < 2; c++) {
			spf_pin(cpus[c]);
			for (int i = 0; i < SPF_N; i++)
				for (size_t b = 0; b < nb; b++) {
					int64_t lo, hi;

					CHECK(pcpu_histogram_bucket_range(h[i], b, &lo, &hi) == 0);
					spf_record(h[i], lo == INT64_MIN ? hi : lo);
				}
		}
		want += 2 * nb;
		out[3] = (spf_file(path) - base) / SPF_N;
	}
	counts = malloc(nb * sizeof(*counts));
	CHECK(counts);
	for (int i = 0; i < SPF_N; i++) {
		CHECK(pcpu_histogram_read(h[i], counts, nb, &got, NULL) == 0);
		if (got != want) {
			fail("footprint-sparse: %s series %d holds %" PRIu64 ", want %" PRIu64,
			     spf_kinds[k].name, i, got, want);
			break;
		}
	}
	free(counts);
	pcpu_registry_destroy(reg); /* removes the file: the tmpfs's room back */
	rmdir(dir);
	return nb;
}

static void footprint_sparse(const char *kernel, unsigned present, unsigned possible,
			     const char *mode, const char *spec)
{
	static int cpus[CPU_SETSIZE];
	cpu_set_t set;
	int n = 0;

	CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	if (n < 2) {
		fail("footprint-sparse: %d CPU to run on, 2 needed", n);
		finish(1);
	}
	for (int k = 0; k < (int)(sizeof(spf_kinds) / sizeof(spf_kinds[0])); k++) {
		double f[4] = {0}, g[4] = {0};
		size_t nb = spf_run(k, cpus, 2, 1, f); /* reg, w1, w2, all2 */

		(void)spf_run(k, cpus, n, 0, g); /* wall: its third figure */
		printf("VM_FOOTPRINT_SPARSE arch=%s kernel=%s cpus=%u/%u nslots=%u kind=%s buckets=%zu "
		       "n=%d writers=%d file_per_series reg=%.0f w1=%.0f w2=%.0f all2=%.0f wall=%.0f\n",
		       ARCH, kernel, present, possible, pcpu_nslots(), spf_kinds[k].name, nb, SPF_N, n,
		       f[0], f[1], f[2], f[3], g[2]);
	}
	printf("VM_FOOTPRINT arch=%s kernel=%s mode=%s cpus=%u/%u nslots=%u kinds=4 n=%d result=%s spec=%s\n",
	       ARCH, kernel, mode, present, possible, pcpu_nslots(), SPF_N,
	       failures ? "FAILED" : "ok", spec);
	finish(failures ? 1 : 0);
}

/* ---- --workload tree: a pre-fork server's shared registry ------------------- */

/*
 * What a pre-fork server does with pcpu (pcpu/segment.h,
 * PCPU_SEGMENT_SHARED_TREE): the master publishes a shared-tree registry on
 * a tmpfs, registers a counter family, an unlabelled counter and two
 * consistent group families with a few series each, then forks workers;
 * each worker runs several threads that add to the groups and counters
 * (their own timer signals interrupting them, the handler adding too, and
 * now and then a hop to another CPU), makes a series of each kind after
 * fork() (registering finds what another worker made), and exits when its
 * share of the work is done, while the master forks new workers, reads
 * every group, and collects and reads the segment as an exporter would.
 * Lanes are thus held and released by threads of processes that come and
 * go. At the end every value is compared with what the workers did, both
 * through the library (pcpu_counter_fetch, pcpu_group_read) and through
 * the segment (pcpu/reader.h).
 *
 * Consistency, checked three ways: every group read the master makes while
 * the workers run, every group in the segment snapshots, and a read made
 * from inside a writer's own update: group.c's test hook
 * pcpu__test_group_tree_pause runs once the writer holds its lane and has
 * written the first member only, and the writer then reads its group.
 * That read must show the group as before the update (the lane's undo copy,
 * which a reader uses while undo_seq == seq): a lane taken with a seq whose
 * generation is stale -- the 32-bit skew that commit fdd6c8f fixed, where
 * the rseq take compares and stores seq's low word only -- leaves undo_seq
 * != seq, and the read then shows the half-written values.
 *
 * The 32-bit skew needs another take and release of the lane between the
 * writer's read of seq and its section: a preemption or a signal landing in
 * those few instructions (under TCG, 2 of 200,000 reads caught it with the
 * fix reverted, in one of two runs). So the probe makes it happen: group.c's
 * other hook, pcpu__test_group_tree_before_take, runs right there, and
 * there, one time in 8, the writer updates the same group first (what a
 * signal handler may do: a tree group's update is async-signal-safe). On a
 * 64-bit word the section then finds seq changed and tries again; on a
 * 32-bit one it commits on the low word, and only the reread of the whole
 * seq keeps undo_seq == seq.
 *
 * Members: flow (packets, bytes, debt) adds (v, 2v, -3v) and pair (x, y)
 * adds (d, 3d): in every consistent read bytes == 2 packets, debt == -3
 * packets, y == 3x -- relations that a read showing the first member
 * written and not the others breaks. Each worker
 * also adds to a counter(9) counter of its own (counter_u64_add from its
 * threads, counter_u64_fetch exact when they are done).
 */
enum { TA = 3, TB = 2, TC = 3, TREE_MAXW = 64 };
static const char *const ta_names[TA] = {"a0", "a1", "late"}; /* "late": made after fork() */
static const char *const tb_names[TB] = {"b0", "b1"};
static const char *const tc_names[TC] = {"k0", "k1", "late"};

struct tree_shared {
	int64_t a[TA][3], b[TB][2], c[TC], total; /* what the workers added */
	unsigned long adds, aborts, hook_reads, hook_torn, reads, torn, read_errors, injected;
	int worker_failures;
};

static struct tree_shared *tsh;
static pcpu_registry_t *treg;
static pcpu_group_family_t *tgf_flow, *tgf_pair;
static pcpu_family_t *tf_req;
static pcpu_counter_t tc_total;
static pcpu_group_t *tg_a[TA], *tg_b[TB];
static pcpu_counter_t tc_c[TC];
static counter_u64_t t_c9; /* this worker's counter(9) counter */
static unsigned long tree_ops; /* per worker thread */
static int tree_ncpu;

/* The group this thread is adding to, for the hook: 1 flow, 2 pair. */
static __thread const pcpu_group_t *t_cur;
static __thread int t_cur_kind, t_cur_idx, t_nested;
static __thread int64_t t_hruns, t_inj[TA + TB]; /* updates made in the take hook */
static __thread uint64_t t_inj_rng;

/* Whether a read of a group is consistent (see above). */
static int tree_whole(int kind, const int64_t *v)
{
	return kind == 1 ? v[1] == 2 * v[0] && v[2] == -3 * v[0] : v[1] == 3 * v[0];
}

/* group.c's hook: this thread holds its lane, the first member written. */
static void tree_pause(void *lane)
{
	int64_t v[3];

	(void)lane;
	if (!t_cur)
		return;
	if (pcpu_group_read_timeout(t_cur, 0, v, 10000000000ull) != 0) {
		__atomic_fetch_add(&tsh->read_errors, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_fetch_add(&tsh->hook_reads, 1, __ATOMIC_RELAXED);
	if (!tree_whole(t_cur_kind, v))
		__atomic_fetch_add(&tsh->hook_torn, 1, __ATOMIC_RELAXED);
}

/* group.c's other hook: the lane read free, not yet taken. One time in 8
 * the same group is updated first, by this thread (not from the nested
 * update's own hook). */
static void tree_before_take(void *lane)
{
	(void)lane;
	if (!t_cur || t_nested || check_xorshift(&t_inj_rng) % 8 != 0)
		return;
	t_nested = 1;
	if (t_cur_kind == 1)
		pcpu_group_add(t_cur, 0, (const int64_t[]){1, 2, -3});
	else
		pcpu_group_add2(t_cur, 0, 1, 3);
	t_inj[t_cur_idx]++;
	t_nested = 0;
}

static void tree_handler(int sig)
{
	int saved = errno;
	const pcpu_group_t *cur = t_cur;

	(void)sig;
	t_cur = NULL; /* the hook reads only for the thread's own adds */
	pcpu_group_add(tg_a[0], 0, (const int64_t[]){1, 2, -3});
	pcpu_counter_add(tc_c[0], 3);
	counter_u64_add(t_c9, 1);
	t_hruns++;
	t_cur = cur;
	errno = saved;
}

static void *tree_thread(void *arg)
{
	int me = (int)(intptr_t)arg;
	int64_t a[TA][3] = {{0}}, b[TB][2] = {{0}}, c[TC] = {0}, total = 0, c9 = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 16) ^ (uint64_t)me;
	unsigned long i, published = 0, published_aborts = 0;
	struct sigevent sev;
	timer_t timer;
	sigset_t all;
	cpu_set_t every;

	t_inj_rng = rng ^ 0x5851f42d4c957f2dull;
	CHECK(sched_getaffinity(0, sizeof(every), &every) == 0);
	if (timer_us) {
		struct itimerspec it = {{0, (long)timer_us * 1000}, {0, (long)timer_us * 1000}};

		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGUSR1;
		sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
		CHECK(timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0);
		CHECK(timer_settime(timer, 0, &it, NULL) == 0);
	}
	for (i = 0; i < tree_ops; i++) {
		uint64_t r = check_xorshift(&rng);
		int64_t v = (int64_t)((r >> 20) % 1000) + 1;
		unsigned k = (unsigned)(r % 8);

		if (k < 3) {
			/* Mostly series 0, the one the handler adds to as well. */
			unsigned s = (r >> 8) % 4 == 0 ? (unsigned)((r >> 10) % TA) : 0;

			t_cur_kind = 1;
			t_cur_idx = (int)s;
			__atomic_store_n(&t_cur, tg_a[s], __ATOMIC_RELAXED);
			pcpu_group_add(tg_a[s], 0, (const int64_t[]){v, 2 * v, -3 * v});
			__atomic_store_n(&t_cur, NULL, __ATOMIC_RELAXED);
			a[s][0] += v;
			a[s][1] += 2 * v;
			a[s][2] -= 3 * v;
		} else if (k < 4) {
			unsigned s = (unsigned)((r >> 8) % TB);

			t_cur_kind = 2;
			t_cur_idx = TA + (int)s;
			__atomic_store_n(&t_cur, tg_b[s], __ATOMIC_RELAXED);
			pcpu_group_add2(tg_b[s], 0, v, 3 * v);
			__atomic_store_n(&t_cur, NULL, __ATOMIC_RELAXED);
			b[s][0] += v;
			b[s][1] += 3 * v;
		} else if (k < 7) {
			unsigned s = (unsigned)((r >> 8) % TC);

			pcpu_counter_add(tc_c[s], v);
			c[s] += v;
		} else {
			pcpu_counter_add(tc_total, 1);
			counter_enter();
			counter_u64_add_protected(t_c9, v);
			counter_exit();
			total += 1;
			c9 += v;
		}
		if ((i & 511) == 511) {
			/* A hop to another CPU and back to all of them. */
			cpu_set_t one;

			CPU_ZERO(&one);
			CPU_SET((int)((r >> 32) % (uint64_t)tree_ncpu), &one);
			sched_setaffinity(0, sizeof(one), &one);
			sched_setaffinity(0, sizeof(every), &every);
			__atomic_fetch_add(&tsh->adds, i + 1 - published, __ATOMIC_RELAXED);
			published = i + 1;
			__atomic_fetch_add(&tsh->aborts, pcpu__test_inject_aborts - published_aborts,
					   __ATOMIC_RELAXED);
			published_aborts = pcpu__test_inject_aborts;
		}
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (timer_us)
		CHECK(timer_delete(timer) == 0);
	a[0][0] += t_hruns;
	a[0][1] += 2 * t_hruns;
	a[0][2] -= 3 * t_hruns;
	c[0] += 3 * t_hruns;
	c9 += t_hruns;
	for (int s = 0; s < TA + TB; s++) {
		int64_t n = t_inj[s];

		if (s < TA) {
			a[s][0] += n;
			a[s][1] += 2 * n;
			a[s][2] -= 3 * n;
		} else {
			b[s - TA][0] += n;
			b[s - TA][1] += 3 * n;
		}
		__atomic_fetch_add(&tsh->injected, (unsigned long)n, __ATOMIC_RELAXED);
	}
	for (int s = 0; s < TA; s++)
		for (int m = 0; m < 3; m++)
			__atomic_fetch_add(&tsh->a[s][m], a[s][m], __ATOMIC_RELAXED);
	for (int s = 0; s < TB; s++)
		for (int m = 0; m < 2; m++)
			__atomic_fetch_add(&tsh->b[s][m], b[s][m], __ATOMIC_RELAXED);
	for (int s = 0; s < TC; s++)
		__atomic_fetch_add(&tsh->c[s], c[s], __ATOMIC_RELAXED);
	__atomic_fetch_add(&tsh->total, total, __ATOMIC_RELAXED);
	__atomic_fetch_add(&tsh->adds, i + (unsigned long)t_hruns * 3 - published, __ATOMIC_RELAXED);
	__atomic_fetch_add(&tsh->aborts, pcpu__test_inject_aborts - published_aborts, __ATOMIC_RELAXED);
	return (void *)(intptr_t)c9;
}

/* A worker: its series made after fork(), its threads, its counter(9)
 * counter exact, then exit. */
static void tree_worker(int nthr)
{
	pthread_t t[MAX_THREADS];
	int64_t c9 = 0;
	uint64_t got;
	struct sigaction sa;

	/* Registering finds what the master or another worker made. */
	tg_a[TA - 1] = pcpu_group_family_series(tgf_flow, (const char *const[]){ta_names[TA - 1]});
	tc_c[TC - 1] = pcpu_family_counter(tf_req, (const char *const[]){tc_names[TC - 1]});
	if (!tg_a[TA - 1] || !tc_c[TC - 1]) {
		fail("tree worker: a series after fork(): %s", pcpu_stats_error());
		_exit(1);
	}
	t_c9 = counter_u64_alloc(M_WAITOK);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = tree_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	pcpu__test_group_tree_pause = tree_pause;
	pcpu__test_group_tree_before_take = tree_before_take;
	for (int k = 0; k < nthr; k++)
		CHECK(pthread_create(&t[k], NULL, tree_thread, (void *)(intptr_t)k) == 0);
	for (int k = 0; k < nthr; k++) {
		void *ret;

		CHECK(pthread_join(t[k], &ret) == 0);
		c9 += (int64_t)(intptr_t)ret;
	}
	got = counter_u64_fetch(t_c9);
	if ((int64_t)got != c9) {
		fail("tree worker %d: counter(9) counter %" PRId64 " != %" PRId64, (int)getpid(),
		     (int64_t)got, c9);
		_exit(1);
	}
	counter_u64_free(t_c9);
	_exit(0);
}

/* The master's reads of every group while the workers run. */
static void tree_read_groups(void)
{
	for (int s = 0; s < TA + TB; s++) {
		const pcpu_group_t *g = s < TA ? tg_a[s] : tg_b[s - TA];
		int64_t v[3];

		if (!g)
			continue;
		if (pcpu_group_read_timeout(g, 0, v, 10000000000ull) != 0) {
			tsh->read_errors++;
			continue;
		}
		tsh->reads++;
		if (!tree_whole(s < TA ? 1 : 2, v))
			tsh->torn++;
	}
}

/* The value of series `label` of family `name` in a reader's snapshot:
 * 1 and *out if there, else 0. */
static int snap_value(const struct pcpu_reader_snapshot *s, const char *name, const char *label,
		      int64_t *out)
{
	for (size_t fi = 0; fi < s->snapshot.nfamilies; fi++) {
		const struct pcpu_snapshot_family *f = &s->snapshot.families[fi];

		if (strcmp(f->name, name) != 0)
			continue;
		for (size_t si = 0; si < f->nseries; si++) {
			const struct pcpu_snapshot_series *se = &f->series[si];

			if (label && (f->nlabels != 1 || strcmp(se->label_values[0], label) != 0))
				continue;
			*out = f->type == PCPU_METRIC_GAUGE ? se->value.gauge : (int64_t)se->value.counter;
			return 1;
		}
	}
	return 0;
}

/* The segment as an exporter reads it, after a collection (a group's
 * published copy is its last collected read). With `final`, every value
 * must be the workers' total; otherwise every group whole. */
static void tree_read_segment(const char *dir, int final)
{
	static const char *const flow[3] = {"tree_flow_packets", "tree_flow_bytes", "tree_flow_debt"};
	static const char *const pair[2] = {"tree_pair_x", "tree_pair_y"};
	struct pcpu_reader_options ro = {0};
	struct pcpu_reader_snapshot *s = NULL;
	pcpu_reader_t *r;
	int64_t v[3];

	if (pcpu_registry_collect(treg) != 0)
		fail("tree: pcpu_registry_collect: %s", pcpu_stats_error());
	ro.dir = dir;
	r = pcpu_reader_open("tree", &ro);
	if (!r || pcpu_reader_snapshot(r, 0, &s) != 0) {
		fail("tree: reading the segment: %s", pcpu_reader_error());
		if (r)
			pcpu_reader_close(r);
		return;
	}
	pcpu_reader_close(r);
	if (s->incomplete || s->nospace)
		fail("tree: segment snapshot incomplete %d, out of space %d", s->incomplete, s->nospace);
	for (int k = 0; k < TA; k++) {
		int have = 0;

		for (int m = 0; m < 3; m++)
			have += snap_value(s, flow[m], ta_names[k], &v[m]);
		if (have == 0 && !final)
			continue; /* "late" before a worker made it */
		if (have != 3)
			fail("tree: segment: flow %s has %d of its 3 members", ta_names[k], have);
		else if (!tree_whole(1, v))
			fail("tree: segment: flow %s torn: %" PRId64 ", %" PRId64 ", %" PRId64, ta_names[k],
			     v[0], v[1], v[2]);
		else if (final)
			for (int m = 0; m < 3; m++)
				if (v[m] != tsh->a[k][m])
					fail("tree: segment: %s{flow=%s} %" PRId64 " != %" PRId64, flow[m],
					     ta_names[k], v[m], tsh->a[k][m]);
	}
	for (int k = 0; k < TB; k++) {
		int have = 0;

		for (int m = 0; m < 2; m++)
			have += snap_value(s, pair[m], tb_names[k], &v[m]);
		if (have != 2)
			fail("tree: segment: pair %s has %d of its 2 members", tb_names[k], have);
		else if (!tree_whole(2, v))
			fail("tree: segment: pair %s torn: %" PRId64 ", %" PRId64, tb_names[k], v[0], v[1]);
		else if (final)
			for (int m = 0; m < 2; m++)
				if (v[m] != tsh->b[k][m])
					fail("tree: segment: %s{pair=%s} %" PRId64 " != %" PRId64, pair[m],
					     tb_names[k], v[m], tsh->b[k][m]);
	}
	if (final) {
		for (int k = 0; k < TC; k++)
			if (!snap_value(s, "tree_requests", tc_names[k], &v[0]) || v[0] != tsh->c[k])
				fail("tree: segment: tree_requests{kind=%s} %" PRId64 " != %" PRId64,
				     tc_names[k], v[0], tsh->c[k]);
		if (!snap_value(s, "tree_ops", NULL, &v[0]) || v[0] != tsh->total)
			fail("tree: segment: tree_ops %" PRId64 " != %" PRId64, v[0], tsh->total);
	}
	pcpu_reader_snapshot_free(s);
}

static void tree_run(const char *kernel, unsigned present, unsigned possible, const char *mode,
		     const char *spec, unsigned long min_adds, unsigned long min_aborts, double max_seconds)
{
	char dir[] = "/dev/shm/vm_stress.XXXXXX";
	struct pcpu_segment_options o = {0};
	static const char *const flow_label[] = {"flow"}, *const pair_label[] = {"pair"};
	struct pcpu_family_desc d, m[3];
	pcpu_segment_t *seg;
	int nw = 3, nthr, live = 0, spawned = 0, polls = 0, min_spawn, over = 0;
	char aborts_s[32];
	pid_t pids[TREE_MAXW] = {0};
	double t0 = now_s(), elapsed;
	unsigned long per_worker;

	tree_ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	nthr = (2 * tree_ncpu + nw - 1) / nw;
	if (nthr < 2)
		nthr = 2;
	if (nthr > MAX_THREADS)
		nthr = MAX_THREADS;
	/* Each worker does a sixth of the adds: at least 6 workers (3 at a
	 * time: 3 exit and 3 more are forked mid-run), more while the aborts
	 * are short. */
	min_spawn = 2 * nw;
	per_worker = min_adds / (unsigned long)min_spawn;
	tree_ops = per_worker / (unsigned long)nthr + 1;
	tsh = mmap(NULL, sizeof(*tsh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(tsh != MAP_FAILED);
	if (!mkdtemp(dir)) {
		fail("tree: mkdtemp %s: %s", dir, strerror(errno));
		finish(1);
	}
	treg = pcpu_registry_create();
	CHECK(treg);
	memset(&d, 0, sizeof(d));
	d.name = "tree_requests";
	d.type = PCPU_METRIC_COUNTER;
	d.label_names = (const char *const[]){"kind"};
	d.nlabels = 1;
	tf_req = pcpu_registry_family(treg, &d);
	CHECK(tf_req);
	o.dir = dir;
	o.flags = PCPU_SEGMENT_SHARED_TREE;
	seg = pcpu_segment_publish(treg, "tree", &o);
	if (!seg) {
		fail("tree: pcpu_segment_publish: %s", pcpu_segment_error());
		finish(1);
	}
	/* After publication, before fork(): the groups, the other series. */
	memset(m, 0, sizeof(m));
	m[0].name = "tree_flow_packets";
	m[0].type = PCPU_METRIC_COUNTER;
	m[1].name = "tree_flow_bytes";
	m[1].type = PCPU_METRIC_COUNTER;
	m[2].name = "tree_flow_debt";
	m[2].type = PCPU_METRIC_GAUGE;
	for (int k = 0; k < 3; k++) {
		m[k].label_names = flow_label;
		m[k].nlabels = 1;
	}
	tgf_flow = pcpu_registry_group(treg, m, 3);
	m[0].name = "tree_pair_x";
	m[1].name = "tree_pair_y";
	m[1].type = PCPU_METRIC_COUNTER;
	for (int k = 0; k < 2; k++)
		m[k].label_names = pair_label;
	tgf_pair = pcpu_registry_group(treg, m, 2);
	if (!tgf_flow || !tgf_pair) {
		fail("tree: pcpu_registry_group: %s", pcpu_stats_error());
		finish(1);
	}
	for (int k = 0; k < TA - 1; k++)
		tg_a[k] = pcpu_group_family_series(tgf_flow, (const char *const[]){ta_names[k]});
	for (int k = 0; k < TB; k++)
		tg_b[k] = pcpu_group_family_series(tgf_pair, (const char *const[]){tb_names[k]});
	for (int k = 0; k < TC - 1; k++)
		tc_c[k] = pcpu_family_counter(tf_req, (const char *const[]){tc_names[k]});
	tc_total = pcpu_registry_counter(treg, "tree_ops", "operations of the tree's workers");
	CHECK(tg_a[0] && tg_a[1] && tg_b[0] && tg_b[1] && tc_c[0] && tc_c[1] && tc_total);

	for (;;) {
		int st;
		pid_t w;

		elapsed = now_s() - t0;
		if (elapsed >= max_seconds && !over) {
			over = 1;
			fail("tree: bound of %.0f s reached: %lu adds, %lu aborts, %d workers", max_seconds,
			     tsh->adds, tsh->aborts, spawned);
			for (int k = 0; k < nw; k++)
				if (pids[k] > 0)
					kill(pids[k], SIGKILL);
		}
		/* Forks while work is left: at least min_spawn workers, more
		 * while adds or aborts are short. */
		while (live < nw && elapsed < max_seconds &&
		       (spawned < min_spawn || __atomic_load_n(&tsh->adds, __ATOMIC_RELAXED) < min_adds ||
			__atomic_load_n(&tsh->aborts, __ATOMIC_RELAXED) < min_aborts) &&
		       spawned < TREE_MAXW * 4) {
			int slot = 0;
			pid_t pid;

			while (pids[slot] > 0)
				slot++;
			fflush(stdout);
			pid = fork();
			CHECK(pid >= 0);
			if (pid == 0)
				tree_worker(nthr);
			pids[slot] = pid;
			live++;
			spawned++;
		}
		if (live == 0)
			break;
		while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
			for (int k = 0; k < nw; k++)
				if (pids[k] == w)
					pids[k] = 0;
			live--;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fail("tree: worker %d ended with status 0x%x", (int)w, st);
				tsh->worker_failures++;
			}
		}
		tree_read_groups();
		if (++polls % 16 == 0)
			tree_read_segment(dir, 0);
		usleep(20000);
	}
	elapsed = now_s() - t0;

	/* Every value, through the library and through the segment. */
	tg_a[TA - 1] = pcpu_group_family_series(tgf_flow, (const char *const[]){ta_names[TA - 1]});
	tc_c[TC - 1] = pcpu_family_counter(tf_req, (const char *const[]){tc_names[TC - 1]});
	CHECK(tg_a[TA - 1] && tc_c[TC - 1]);
	for (int k = 0; k < TA + TB; k++) {
		const pcpu_group_t *g = k < TA ? tg_a[k] : tg_b[k - TA];
		const int64_t *want = k < TA ? tsh->a[k] : tsh->b[k - TA];
		int n = k < TA ? 3 : 2;
		int64_t v[3];

		if (pcpu_group_read(g, 0, v) != 0) {
			fail("tree: group %d: pcpu_group_read: %s", k, strerror(errno));
			continue;
		}
		for (int j = 0; j < n; j++)
			if (v[j] != want[j])
				fail("tree: group %s member %d: %" PRId64 " != %" PRId64 " (lost %" PRId64 ")",
				     k < TA ? ta_names[k] : tb_names[k - TA], j, v[j], want[j], want[j] - v[j]);
	}
	for (int k = 0; k < TC; k++)
		if ((int64_t)pcpu_counter_fetch(tc_c[k]) != tsh->c[k])
			fail("tree: counter %s: %" PRId64 " != %" PRId64 " (lost %" PRId64 ")", tc_names[k],
			     (int64_t)pcpu_counter_fetch(tc_c[k]), tsh->c[k],
			     tsh->c[k] - (int64_t)pcpu_counter_fetch(tc_c[k]));
	if ((int64_t)pcpu_counter_fetch(tc_total) != tsh->total)
		fail("tree: counter tree_ops: %" PRId64 " != %" PRId64, (int64_t)pcpu_counter_fetch(tc_total),
		     tsh->total);
	tree_read_segment(dir, 1);
	if (tsh->hook_torn)
		fail("tree: group read in mid-update torn %lu times of %lu (the writer's own lane showed "
		     "its half-written values)", tsh->hook_torn, tsh->hook_reads);
	if (tsh->hook_reads == 0)
		fail("tree: the mid-update hook never ran");
	if (tsh->injected == 0 && min_aborts)
		fail("tree: no update between a lane's read and its take (rseq path not taken?)");
	if (tsh->torn)
		fail("tree: %lu of %lu group reads torn", tsh->torn, tsh->reads);
	if (tsh->read_errors)
		fail("tree: %lu group reads failed (timed out)", tsh->read_errors);
	if (tsh->aborts < min_aborts)
		fail("tree: only %lu sections aborted", tsh->aborts);
	if (min_aborts)
		snprintf(aborts_s, sizeof(aborts_s), "%lu", tsh->aborts);
	else /* fallback: no section runs */
		snprintf(aborts_s, sizeof(aborts_s), "-");
	pcpu_registry_destroy(treg); /* removes the file */
	rmdir(dir);
	printf("VM_RESULT arch=%s variant=%s kernel=%s mode=%s workload=tree index=%s mm_cid=%d "
	       "cpus=%u/%u workers=%d threads=%d adds=%lu aborts=%s forks=%d hotplug=0 "
	       "group_reads=%lu hook_reads=%lu injected=%lu seconds=%.1f%s result=%s spec=%s\n",
	       ARCH, VARIANT, kernel, mode, pcpu_zone_index(NULL) == PCPU_INDEX_MM_CID ? "mm_cid" : "cpu",
	       pcpu_rseq_has_mm_cid(), present, possible, spawned, nthr, tsh->adds,
	       aborts_s, spawned,
	       tsh->reads, tsh->hook_reads, tsh->injected, elapsed, commit_report(),
	       failures ? "FAILED" : "exact", spec);
	finish(failures ? 1 : 0);
}

/* ---- --workload carry: 64-bit words read while they carry past 2^32 ------------ */

/*
 * On a 32-bit target a slot's 64-bit word committed with one `strd` may be
 * seen by another CPU half new and half old: on a core without LPAE
 * (Cortex-A8/A9), and in QEMU before 8.1 (two 32-bit host stores; a
 * writer's vCPU thread descheduled between them leaves the half-made word
 * in memory for thousands of reads). Where the add carries into the high
 * half, that is a total 2^32 off: a false counter reset and a 4.3 x 10^9
 * spike to Prometheus, which no reader can tell from a value. So ARMv7's
 * adds never write a changing high half that way (pcpu/arch/arm.h,
 * "Carries": the low word's `str`, or an `ldrexd`/`strexd` carry section),
 * and this workload must read no torn value in any mode (issue 51: with
 * `strd` commits about 3% of fetches tore; with `strd` put back in the
 * carry sections, about 1%). In the fallback mode the adds are atomic
 * read-modify-writes; the segment reader's copy (a pread, 32 bits at a
 * time) may still straddle a carry, which the reader detects
 * (src/core/core.h, "torn copies").
 *
 * Writers (half the CPUs, each pinned to its own) each own a counter of a
 * published registry: it adds 2^32 - 1 once, then +1 and -1 for ever, so
 * that its slot's word carries into and borrows from the high half at
 * every add. Readers (pinned to the other CPUs) fetch every writer's
 * counter (pcpu_counter_fetch, pcpu_counter_fetch_array of a one-element
 * array, pcpu_counter_fetch_slot of its slot) and read the segment
 * (pcpu/reader.h): every value must be 2^32 - 1 or 2^32. Each writer also
 * records -1 and then 1 into a histogram of its own (bounds {2}: both in
 * its first bucket), whose sum then swings between 0 and -1, its high half
 * changing at every record (ARMv7: the histogram pair's carry path, two
 * single adds); readers read it (pcpu_histogram_read): the sum must be 0
 * or -1, and at the end it is 0 with a count of twice the pairs. It runs until
 * --carry-reads fetches and a hundredth as many segment reads are made (and
 * each writer carried at least that often), --max-seconds at most.
 *   VM_RESULT ... workload=carry writers=W reads=N torn=T seg_reads=S
 *             seg_torn=U seg_unsettled=E hist_reads=H hist_torn=V ...
 *             result=exact|FAILED
 * (seg_unsettled: segment reads refused with EAGAIN, a value's halves
 * changing at every copy; never a failure, unlike a torn value.)
 */
enum { CARRY_MAXW = 32 };
static pcpu_counter_t carry_c[CARRY_MAXW];
static pcpu_histogram_t *carry_h[CARRY_MAXW];
static unsigned long carry_hist_reads, carry_hist_torn;
static unsigned carry_slot[CARRY_MAXW];
static int carry_nw, carry_started;
static int carry_stop;
static unsigned long carry_adds[CARRY_MAXW];
static unsigned long carry_reads, carry_torn, carry_seg_reads, carry_seg_torn, carry_seg_errors;
/* Segment reads refused because a value's halves kept changing through
 * every attempt (EAGAIN: src/core/core.h, "torn copies"): the reader returns no value
 * rather than one that may be torn. Counted, not failures. */
static unsigned long carry_seg_unsettled;
/* How the torn fetches came: in how many runs of consecutive torn fetches
 * of one counter by one reader, and the longest (a torn state that lasts,
 * as when the writing vCPU's host thread is descheduled between the two
 * halves of its store, or many short ones). */
static unsigned long carry_torn_runs, carry_torn_longest;
static uint64_t carry_bad[4];

#define CARRY_LO ((uint64_t)UINT32_MAX)
#define CARRY_HI ((uint64_t)UINT32_MAX + 1)

static void carry_pin(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
}

static void *carry_writer(void *arg)
{
	int k = (int)(intptr_t)arg;
	unsigned long n = 0;

	carry_pin(k);
	pcpu_counter_add(carry_c[k], (int64_t)CARRY_LO);
	__atomic_store_n(&carry_slot[k], pcpu_current_slot(), __ATOMIC_RELAXED);
	__atomic_fetch_add(&carry_started, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&carry_stop, __ATOMIC_RELAXED)) {
		pcpu_counter_add(carry_c[k], 1);  /* 2^32: a carry into the high half */
		pcpu_counter_add(carry_c[k], -1); /* 2^32 - 1: a borrow from it */
		pcpu_histogram_record(carry_h[k], -1); /* sum 0 -> -1: a borrow */
		pcpu_histogram_record(carry_h[k], 1);  /* sum -1 -> 0: a carry */
		if ((++n & 255) == 0)
			__atomic_store_n(&carry_adds[k], 2 * n, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&carry_adds[k], 2 * n, __ATOMIC_RELAXED);
	return NULL;
}

static int carry_check(uint64_t v, unsigned long *torn)
{
	if (v != CARRY_LO && v != CARRY_HI) {
		unsigned long t = __atomic_fetch_add(torn, 1, __ATOMIC_RELAXED);

		if (t < 4)
			carry_bad[t] = v;
		return 1;
	}
	return 0;
}

static void *carry_reader(void *arg)
{
	int cpu = (int)(intptr_t)arg, seg = cpu == carry_nw; /* the first reader reads the segment too */
	struct pcpu_reader_options ro = {0};
	pcpu_reader_t *r = NULL;
	unsigned long n = 0, run[CARRY_MAXW] = {0};

	/* Fallback adds spread over the slots (their mirror words): only the
	 * rseq modes keep a writer's count in its CPU's slot. */
	int per_slot = pcpu_rseq_mode() != PCPU_RSEQ_FALLBACK;

	carry_pin(cpu);
	if (seg && !(r = pcpu_reader_open("carry", &ro)))
		fail("carry: pcpu_reader_open: %s", pcpu_reader_error());
	while (!__atomic_load_n(&carry_stop, __ATOMIC_RELAXED)) {
		for (int k = 0; k < carry_nw; k++) {
			uint64_t a[1];

			if (carry_check(pcpu_counter_fetch(carry_c[k]), &carry_torn)) {
				if (run[k]++ == 0)
					__atomic_fetch_add(&carry_torn_runs, 1, __ATOMIC_RELAXED);
				if (run[k] > __atomic_load_n(&carry_torn_longest, __ATOMIC_RELAXED))
					__atomic_store_n(&carry_torn_longest, run[k], __ATOMIC_RELAXED);
			} else {
				run[k] = 0;
			}
			CHECK(pcpu_counter_fetch_array(carry_c[k], 1, a) == 0);
			carry_check(a[0], &carry_torn);
			if (per_slot)
				carry_check(pcpu_counter_fetch_slot(carry_c[k], carry_slot[k]), &carry_torn);
			{
				uint64_t counts[2];
				int64_t sum;

				CHECK(pcpu_histogram_read(carry_h[k], counts, 2, NULL, &sum) == 0);
				if (sum != 0 && sum != -1 && __atomic_fetch_add(&carry_hist_torn, 1, __ATOMIC_RELAXED) == 0)
					printf("vm_stress: carry: histogram %d's sum read as %" PRId64 " (want 0 or -1)\n", k, sum);
				__atomic_fetch_add(&carry_hist_reads, 1, __ATOMIC_RELAXED);
			}
			__atomic_fetch_add(&carry_reads, 2 + (unsigned long)per_slot, __ATOMIC_RELAXED);
		}
		if (r && (++n & 7) == 0) {
			struct pcpu_reader_snapshot *s = NULL;

			if (pcpu_reader_snapshot(r, 0, &s) != 0) {
				if (errno == EAGAIN)
					__atomic_fetch_add(&carry_seg_unsettled, 1, __ATOMIC_RELAXED);
				else
					carry_seg_errors++;
				continue;
			}
			for (int k = 0; k < carry_nw; k++) {
				char name[32];
				int64_t v;

				snprintf(name, sizeof(name), "carry_w%d", k);
				if (!snap_value(s, name, NULL, &v))
					carry_seg_errors++;
				else
					carry_check((uint64_t)v, &carry_seg_torn);
			}
			__atomic_fetch_add(&carry_seg_reads, (unsigned long)carry_nw, __ATOMIC_RELAXED);
			pcpu_reader_snapshot_free(s);
		}
	}
	if (r)
		pcpu_reader_close(r);
	return NULL;
}

static void carry_run(const char *kernel, unsigned present, unsigned possible, const char *mode,
		      const char *spec, unsigned long min_reads, double max_seconds)
{
	pthread_t wt[CARRY_MAXW], rt[CARRY_MAXW];
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_segment_t *seg;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int nr;
	unsigned long carries = 0;
	double t0 = now_s(), elapsed;

	CHECK(reg);
	if (ncpu < 2) {
		fail("carry: needs 2 CPUs or more, has %ld", ncpu);
		finish(1);
	}
	carry_nw = (int)(ncpu / 2) < CARRY_MAXW ? (int)(ncpu / 2) : CARRY_MAXW;
	nr = (int)ncpu - carry_nw < CARRY_MAXW ? (int)ncpu - carry_nw : CARRY_MAXW;
	seg = pcpu_segment_publish(reg, "carry", NULL);
	if (!seg) {
		fail("carry: pcpu_segment_publish: %s", pcpu_segment_error());
		finish(1);
	}
	for (int k = 0; k < carry_nw; k++) {
		char name[32];

		snprintf(name, sizeof(name), "carry_w%d", k);
		carry_c[k] = pcpu_registry_counter(reg, name, "A counter carrying past 2^32.");
		CHECK(carry_c[k]);
		{
			static const int64_t bounds[] = {2};
			const struct pcpu_histogram_layout lay = {
				.scheme = PCPU_HISTOGRAM_EXPLICIT, .bounds = bounds, .nbounds = 1};

			carry_h[k] = pcpu_histogram_create(&lay);
			CHECK(carry_h[k]);
		}
	}
	for (int k = 0; k < carry_nw; k++)
		CHECK(pthread_create(&wt[k], NULL, carry_writer, (void *)(intptr_t)k) == 0);
	while (__atomic_load_n(&carry_started, __ATOMIC_ACQUIRE) < carry_nw)
		usleep(1000);
	for (int k = 0; k < nr; k++)
		CHECK(pthread_create(&rt[k], NULL, carry_reader, (void *)(intptr_t)(carry_nw + k)) == 0);
	for (;;) {
		unsigned long least = ~0ul;

		for (int k = 0; k < carry_nw; k++) {
			unsigned long a = __atomic_load_n(&carry_adds[k], __ATOMIC_RELAXED);

			least = a < least ? a : least;
		}
		if ((__atomic_load_n(&carry_reads, __ATOMIC_RELAXED) >= min_reads &&
		     __atomic_load_n(&carry_seg_reads, __ATOMIC_RELAXED) >= min_reads / 100 && least >= min_reads) ||
		    now_s() - t0 > max_seconds)
			break;
		usleep(20000);
	}
	__atomic_store_n(&carry_stop, 1, __ATOMIC_RELAXED);
	for (int k = 0; k < nr; k++)
		pthread_join(rt[k], NULL);
	for (int k = 0; k < carry_nw; k++) {
		pthread_join(wt[k], NULL);
		carries += carry_adds[k];
		if (pcpu_counter_fetch(carry_c[k]) != CARRY_LO)
			fail("carry: counter %d ends at %" PRIu64 ", want %" PRIu64, k, pcpu_counter_fetch(carry_c[k]),
			     CARRY_LO);
		{
			uint64_t counts[2], count;
			int64_t sum;

			CHECK(pcpu_histogram_read(carry_h[k], counts, 2, &count, &sum) == 0);
			if (count != carry_adds[k] || sum != 0 || counts[0] != count)
				fail("carry: histogram %d ends with count %" PRIu64 " (first bucket %" PRIu64 ") and sum %" PRId64
				     ", want %lu and 0",
				     k, count, counts[0], sum, carry_adds[k]);
			pcpu_histogram_destroy(carry_h[k]);
		}
	}
	elapsed = now_s() - t0;
	if (carry_reads < min_reads || carry_seg_reads < min_reads / 100)
		fail("carry: only %lu fetches and %lu segment reads in %.0f s", carry_reads, carry_seg_reads,
		     elapsed);
	if (carry_seg_errors)
		fail("carry: %lu segment reads failed or lacked a counter", carry_seg_errors);
	if (carry_hist_torn)
		fail("carry: %lu of %lu histogram reads had a torn sum", carry_hist_torn, carry_hist_reads);
	if (carry_torn || carry_seg_torn)
		fail("carry: torn reads: %lu of %lu fetches (pcpu_counter_fetch: %lu runs of consecutive torn reads, "
		     "the longest %lu), %lu of %lu segment reads (values %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
		     "; want %" PRIu64 " or %" PRIu64 ")",
		     carry_torn, carry_reads, carry_torn_runs, carry_torn_longest, carry_seg_torn, carry_seg_reads,
		     carry_bad[0], carry_bad[1], carry_bad[2], carry_bad[3], CARRY_LO, CARRY_HI);
	pcpu_registry_destroy(reg); /* removes the file */
	printf("VM_RESULT arch=%s variant=%s kernel=%s mode=%s workload=carry index=%s mm_cid=%d "
	       "cpus=%u/%u writers=%d adds=%lu aborts=- forks=0 hotplug=0 reads=%lu torn=%lu seg_reads=%lu "
	       "seg_torn=%lu seg_unsettled=%lu hist_reads=%lu hist_torn=%lu seconds=%.1f result=%s spec=%s\n",
	       ARCH, VARIANT, kernel, mode, pcpu_zone_index(NULL) == PCPU_INDEX_MM_CID ? "mm_cid" : "cpu",
	       pcpu_rseq_has_mm_cid(), present, possible, carry_nw, carries, carry_reads, carry_torn,
	       carry_seg_reads, carry_seg_torn, carry_seg_unsettled, carry_hist_reads, carry_hist_torn, elapsed,
	       failures ? "FAILED" : "exact", spec);
	finish(failures ? 1 : 0);
}

/* path with args in a child, waited for: its wait status, or -1. As init,
 * orphans are ours too: this waits for that child only. */
static int run_child(const char *path, char *const args[])
{
	pid_t pid, w;
	int st;

	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execv(path, args);
		printf("vm_stress: FAIL: exec %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
		;
	return w == pid ? st : -1;
}

/* --modes A,B,...: each mode in a child of its own, one after the other
 * (a spec is MODE[:cpu|:mm_cid][:expect=cpu|mm_cid][:hotplug=N]), the other arguments
 * passed on; then the end (as init: power-off). */
static void run_modes(int argc, char **argv, int at)
{
	char *list = strdup(argv[at + 1]), *save = NULL, *m;
	unsigned long rounds = 1;

	CHECK(list);
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--rounds"))
			rounds = strtoul(argv[i + 1], NULL, 0);
	for (m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
		char *args[64], *copy = strdup(m), *save2 = NULL, *part;
		int n = 0, st;

		CHECK(copy && argc < 48);
		args[n++] = argv[0];
		args[n++] = "--spec";
		args[n++] = m;
		part = strtok_r(copy, ":", &save2);
		args[n++] = "--mode";
		args[n++] = part;
		while ((part = strtok_r(NULL, ":", &save2))) {
			if (!strncmp(part, "hotplug=", 8)) {
				args[n++] = "--hotplug";
				args[n++] = part + 8;
			} else if (!strcmp(part, "tree") || !strcmp(part, "carry")) {
				args[n++] = "--workload";
				args[n++] = part;
			} else if (!strncmp(part, "expect=", 7)) {
				args[n++] = "--expect-index";
				args[n++] = part + 7;
			} else if (!strcmp(part, "strict")) {
				args[n++] = "--strict-commit";
			} else {
				args[n++] = "--index";
				args[n++] = part;
			}
		}
		for (int i = 1; i < argc; i++) {
			if (i == at || i == at + 1)
				continue;
			if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
				i++;
				continue;
			}
			args[n++] = argv[i];
		}
		args[n] = NULL;
		/* --rounds R: the mode again while it ends exact, at most R
		 * runs (for the broken build, whose lost update needs an
		 * interruption on one instruction: each run is another chance,
		 * and the first run that loses one ends it). */
		for (unsigned long r = 0; r < rounds; r++) {
			st = run_child("/proc/self/exe", args);
			if (strstr(m, ":strict"))
				(void)set_overcommit("0"); /* the next modes as before */
			printf("VM_MODE_END spec=%s round=%lu status=0x%x\n", m, r + 1, st);
			if (st != 0)
				break;
		}
		free(copy);
	}
	free(list);
	finish(0);
}

/* /stages (scripts/vm/run.sh --stage): one boot for several builds of one
 * machine (plain, split, broken...), a boot of an emulated machine costing
 * as much as a build's run. Each line is a stage, "BINARY ARG...": run in a
 * child of its own (not init there: it runs its --modes and exits), one
 * after the other, "VM_STAGE N" printed before each so that run.sh gives
 * each stage's lines to its own verdicts; then the end (power-off). */
static void run_stages(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int n = 0;

	CHECK(f);
	while (fgets(line, sizeof line, f)) {
		char *args[64], *save = NULL, *a;
		int k = 0;

		line[strcspn(line, "\n")] = '\0';
		for (a = strtok_r(line, " ", &save); a && k < 63; a = strtok_r(NULL, " ", &save))
			args[k++] = a;
		if (k == 0)
			continue;
		args[k] = NULL;
		printf("VM_STAGE %d %s\n", ++n, args[0]);
		printf("VM_STAGE_END %d status=0x%x\n", n, run_child(args[0], args));
	}
	fclose(f);
	finish(0);
}

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	unsigned long min_adds = 20000000, min_aborts = 1000, tree_adds = 0, tree_aborts = 0;
	double max_seconds = 300, t0, elapsed, next_fork;
	const char *spec = "-", *mode = "glibc", *index = NULL, *expect_index = NULL, *index_name;
	int hotplug = 0, hotplug_done = 0, do_footprint = 0, forks = 0, offline = -1, tree = 0, carry = 0;
	unsigned long carry_min = 3000000;
	unsigned present, possible;
	pthread_t t[MAX_THREADS], rd;
	struct sigaction sa;
	struct utsname un;
	char aborts_s[32];
	long ncpu;

	is_init = getpid() == 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (is_init) {
		mkdir("/proc", 0555);
		mkdir("/sys", 0555);
		mkdir("/dev", 0755);
		mount("proc", "/proc", "proc", 0, NULL);
		mount("sysfs", "/sys", "sysfs", 0, NULL);
		mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
		/* A tmpfs for the shared-tree segment (--workload tree). */
		mkdir("/dev/shm", 01777);
		mount("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777");
		/* run.sh tells a boot that never reached init (an emulated
		 * kernel's panic) from a run that failed. */
		printf("VM_INIT\n");
		if (access("/stages", R_OK) == 0)
			run_stages("/stages");
	}
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--modes") && i + 1 < argc)
			run_modes(argc, argv, i);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--spec") && i + 1 < argc)
			spec = argv[++i];
		else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			mode = argv[++i];
		else if (!strcmp(argv[i], "--index") && i + 1 < argc)
			index = argv[++i];
		else if (!strcmp(argv[i], "--expect-index") && i + 1 < argc)
			expect_index = argv[++i];
		else if (!strcmp(argv[i], "--adds") && i + 1 < argc)
			min_adds = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--aborts") && i + 1 < argc)
			min_aborts = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--tree-adds") && i + 1 < argc)
			tree_adds = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--tree-aborts") && i + 1 < argc)
			tree_aborts = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc)
			max_seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--hotplug") && i + 1 < argc)
			hotplug = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--timer-us") && i + 1 < argc)
			timer_us = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--spin") && i + 1 < argc)
			pcpu__test_inject_spin = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--footprint"))
			do_footprint = 1;
		else if (!strcmp(argv[i], "--strict-commit"))
			strict_commit = 1;
		else if (!strcmp(argv[i], "--workload") && i + 1 < argc && !strcmp(argv[i + 1], "tree"))
			tree = 1, i++;
		else if (!strcmp(argv[i], "--workload") && i + 1 < argc && !strcmp(argv[i + 1], "carry"))
			carry = 1, i++;
		else if (!strcmp(argv[i], "--carry-reads") && i + 1 < argc)
			carry_min = strtoul(argv[++i], NULL, 0);
		else {
			printf("usage: vm_stress [--mode glibc|own|fallback|seccomp] [--index cpu|mm_cid] "
			       "[--expect-index cpu|mm_cid] [--adds N] [--aborts A] [--max-seconds S] "
			       "[--hotplug N] [--timer-us U] [--spin N] [--footprint] [--workload tree|carry] "
			       "[--tree-adds N] [--tree-aborts A] [--carry-reads N]\n");
			finish(2);
		}
	}
	/* The mode's environment, then this program again, once. */
	if (!getenv("PCPU_VM_STARTED")) {
		if (!strcmp(mode, "own"))
			setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0", 1);
		else if (!strcmp(mode, "fallback"))
			setenv("PCPU_RSEQ", "0", 1);
		else if (!strncmp(mode, "footprint", 9)) {
			/* CPU numbers: the writers pinned to CPUs 0 and 1 write
			 * slots 0 and 1 (mm_cid could give both cid 0). */
			setenv("PCPU_INDEX", "cpu", 1);
			if (!strcmp(mode, "footprint-all")) /* every slot walked */
				setenv("PCPU_SLOT_WALK", "all", 1);
		}
		else if (!strcmp(mode, "seccomp"))
			seccomp_deny(__NR_rseq, -1, EPERM);
		else if (strcmp(mode, "glibc") != 0) {
			printf("vm_stress: unknown mode %s\n", mode);
			finish(2);
		}
		if (tree || carry) /* a shared tree needs CPU-number slots; carry pins a writer per slot */
			setenv("PCPU_INDEX", "cpu", 1);
		if (index)
			setenv("PCPU_INDEX", index, 1);
		if (strict_commit && set_overcommit("2") != 0) {
			printf("vm_stress: vm.overcommit_memory=2: %s\n", strerror(errno));
			finish(2);
		}
		setenv("PCPU_VM_STARTED", "1", 1);
		execv("/proc/self/exe", argv);
		printf("vm_stress: exec /proc/self/exe: %s\n", strerror(errno));
		finish(2);
	}
	expect_mode = !strcmp(mode, "seccomp") ? "fallback" : mode;
	CHECK(uname(&un) == 0);
	if (strict_commit) {
		/* The kernel never overcommits now, and pcpu saw it. */
		commit0_kb = file_kb("/proc/meminfo", "Committed_AS:");
		CHECK(pcpu_nslots() > 0);
		if (!pcpu_commit_strict)
			fail("strict commit: vm.overcommit_memory is 2, but pcpu does not account strictly");
	}
	present = read_cpu_list("/sys/devices/system/cpu/present", NULL, 0);
	possible = read_cpu_list("/sys/devices/system/cpu/possible", NULL, 0);
	if (!strcmp(mode, "footprint-sparse"))
		footprint_sparse(un.release, present, possible, mode, spec);
	if (do_footprint || !strncmp(mode, "footprint", 9))
		footprint(un.release, present, possible, mode, spec);
	if (tree) {
		/* --tree-adds, --tree-aborts: the tree's own, where one boot
		 * runs both workloads with the threads' --adds. */
		if (tree_adds)
			min_adds = tree_adds;
		if (tree_aborts)
			min_aborts = tree_aborts;
	}
	if (!strcmp(expect_mode, "fallback")) {
		/* No section runs; under TCG each fallback add is an emulated
		 * atomic, several times slower: a quarter of the adds. */
		min_aborts = 0;
		min_adds /= 4;
	}
	if (tree)
		tree_run(un.release, present, possible, mode, spec, min_adds, min_aborts, max_seconds);
	if (carry)
		carry_run(un.release, present, possible, mode, spec, carry_min, max_seconds);

	index_name = pcpu_zone_index(NULL) == PCPU_INDEX_MM_CID ? "mm_cid" : "cpu";
	if (expect_index && strcmp(expect_index, index_name) != 0)
		fail("slot index %s (kernel has mm_cid: %d), expected %s", index_name,
		     pcpu_rseq_has_mm_cid(), expect_index);
	if (!strcmp(index_name, "mm_cid") && !pcpu_rseq_has_mm_cid())
		fail("index mm_cid on a kernel without it");
	{
		/* A zone that needs mm_cid: only where the process uses it. */
		pcpu_zone_t *z;

		errno = 0;
		z = pcpu_zone_create(PCPU_INDEX_MM_CID);
		if (!strcmp(index_name, "mm_cid") ? !z : (z || errno != EINVAL))
			fail("pcpu_zone_create(PCPU_INDEX_MM_CID) with index %s: %p, errno %d", index_name,
			     (void *)z, errno);
		pcpu_zone_destroy(z);
	}

	for (int k = 0; k < NSINGLE; k++)
		single[k] = pcpu_counter_alloc_array(k + 1) + k; /* element k of an array */
	many = pcpu_counter_alloc_array(NMANY);
	{
		static const struct pcpu_histogram_layout lay = {
			.scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 1, .max_value = 100000};

		hist = pcpu_histogram_create(&lay);
	}
	group = pcpu_group_alloc(2, 1);
	ref = pcpu_ref_create(release_fn, NULL);
	rw = pcpu_rwlock_create();
	{
		struct pcpu_objcache_desc d = {0};

		d.size = sizeof(struct obj);
		d.capacity = 8; /* small: the depot and the backing store work too */
		cache = pcpu_objcache_create(&d);
	}
	c9[0] = counter_u64_alloc(M_WAITOK);
	c9[1] = counter_u64_alloc(M_NOWAIT | M_ZERO);
	hc = pcpu_hcounter_create(16);
	hl = pcpu_hcounter_create(16);
	CHECK(hc && hl);
	/* A few times the bounds' width: the limiter runs per-CPU while the
	 * bounds leave room, and switches to and from its precise mode. */
	hl_limit = 4 * pcpu_hcounter_range(hl) + 64;
	{
		pcpu_zone_t *z = pcpu_zone_create(PCPU_INDEX_DEFAULT);

		CHECK(z);
		vlog = pcpu_zone_alloc(z, sizeof(struct vlog), 64);
		CHECK(vlog);
	}
	CHECK(single[0] && single[1] && single[2] && many && hist && group && ref && rw && cache);
	CHECK(c9[0] && c9[1] && c9_early != EARLY_COUNTER);
	nbuckets = pcpu_histogram_nbuckets(hist);
	CHECK(nbuckets <= 64);
	exp_hcount = calloc(nbuckets, sizeof(*exp_hcount));
	CHECK(exp_hcount);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	check_mode();

	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	nthreads = (int)(2 * ncpu);
	if (nthreads < 4)
		nthreads = 4;
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_create(&t[i], NULL, adder, (void *)(intptr_t)i) == 0);
	CHECK(pthread_create(&rd, NULL, reader, NULL) == 0);

	t0 = now_s();
	next_fork = 0.5;
	for (;;) {
		usleep(50000);
		elapsed = now_s() - t0;
		if (elapsed >= max_seconds) {
			fail("bound of %.0f s reached: %lu adds, %lu aborts, %d hotplug switches", max_seconds,
			     __atomic_load_n(&total_adds, __ATOMIC_RELAXED),
			     __atomic_load_n(&total_aborts, __ATOMIC_RELAXED), hotplug_done);
			break;
		}
		if (elapsed >= next_fork && forks < 20) {
			forks += fork_check();
			next_fork = elapsed + 0.5;
		}
		if (hotplug_done < hotplug && ncpu > 1) {
			/* One CPU at a time, a different one each time (never 0). */
			if (offline < 0) {
				int cpu = 1 + hotplug_done / 2 % (int)(ncpu - 1);

				if (cpu_online(cpu, 0) == 0) {
					offline = cpu;
					hotplug_done++;
				} else {
					fail("cpu%d offline: %s", cpu, strerror(errno));
					hotplug = hotplug_done;
				}
			} else {
				if (cpu_online(offline, 1) == 0) {
					offline = -1;
					hotplug_done++;
				} else {
					fail("cpu%d online: %s", offline, strerror(errno));
					hotplug = hotplug_done;
				}
			}
		}
		if (__atomic_load_n(&total_adds, __ATOMIC_RELAXED) >= min_adds &&
		    __atomic_load_n(&total_aborts, __ATOMIC_RELAXED) >= min_aborts &&
		    hotplug_done >= hotplug && offline < 0 && forks >= 1)
			break;
	}
	if (offline >= 0)
		cpu_online(offline, 1);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	__atomic_store_n(&stop_reader, 1, __ATOMIC_RELAXED);
	CHECK(pthread_join(rd, NULL) == 0);
	elapsed = now_s() - t0;

	/* Every total, exact. */
	for (int k = 0; k < NSINGLE; k++)
		if (pcpu_counter_fetch(single[k]) != (uint64_t)expected[k])
			fail("counter %d: %" PRId64 " != %" PRId64 " (lost %" PRId64 ")", k,
			     (int64_t)pcpu_counter_fetch(single[k]), expected[k],
			     expected[k] - (int64_t)pcpu_counter_fetch(single[k]));
	for (int j = 0; j < 2; j++)
		if ((int64_t)counter_u64_fetch(c9[j]) != exp_c9[j])
			fail("counter(9) %d: %" PRId64 " != %" PRId64 " (lost %" PRId64 ")", j,
			     (int64_t)counter_u64_fetch(c9[j]), exp_c9[j],
			     exp_c9[j] - (int64_t)counter_u64_fetch(c9[j]));
	if ((int64_t)counter_u64_fetch(c9_early) != exp_c9_early || pcpu_counter9_early_adds() != 0)
		fail("counter(9) early counter: %" PRId64 " != %" PRId64 " (%" PRIu64 " early adds)",
		     (int64_t)counter_u64_fetch(c9_early), exp_c9_early, pcpu_counter9_early_adds());
	for (int k = 0; k < NMANY; k++)
		if (pcpu_counter_fetch(many + k) != (uint64_t)expected[NSINGLE + k])
			fail("add_many counter %d: %" PRId64 " != %" PRId64, k,
			     (int64_t)pcpu_counter_fetch(many + k), expected[NSINGLE + k]);
	{
		uint64_t counts[64], count;
		int64_t sum, g[2];

		CHECK(pcpu_histogram_read(hist, counts, nbuckets, &count, &sum) == 0);
		for (size_t b = 0; b < nbuckets; b++)
			if (counts[b] != exp_hcount[b])
				fail("histogram bucket %zu: %" PRIu64 " != %" PRIu64, b, counts[b], exp_hcount[b]);
		if (sum != exp_hsum)
			fail("histogram sum: %" PRId64 " != %" PRId64, sum, exp_hsum);
		CHECK(pcpu_group_read(group, 0, g) == 0);
		if (g[0] != exp_g0 || g[1] != exp_g1)
			fail("group: %" PRId64 ", %" PRId64 " != %" PRId64 ", %" PRId64, g[0], g[1], exp_g0, exp_g1);
	}
	{
		/* The hierarchical counters: exact, the bounds around the
		 * sum, compare exact; the limiter never over-admitted and
		 * back to 0 after every release. */
		int64_t s = pcpu_hcounter_sum(hc), ls = pcpu_hcounter_sum(hl);
		struct pcpu_hcounter_approx a = pcpu_hcounter_approx(hc);

		if (s != exp_hc)
			fail("hcounter: sum %" PRId64 " != %" PRId64 " (lost %" PRId64 ")", s, exp_hc,
			     exp_hc - s);
		if (a.min > s || s > a.max)
			fail("hcounter: sum %" PRId64 " outside its bounds [%" PRId64 ", %" PRId64 "]", s,
			     a.min, a.max);
		if (pcpu_hcounter_compare(hc, exp_hc) != 0 || pcpu_hcounter_compare(hc, exp_hc - 1) <= 0 ||
		    pcpu_hcounter_compare(hc, exp_hc + 1) >= 0)
			fail("hcounter: compare wrong around %" PRId64 " (sum %" PRId64 ")", exp_hc, s);
		if (hl_over)
			fail("hcounter limiter: %" PRId64 " admissions over the limit %" PRId64, hl_over,
			     hl_limit);
		if (ls != 0)
			fail("hcounter limiter: %" PRId64 " after every release, not 0 (%" PRId64
			     " admitted)",
			     ls, hl_admitted);
	}
	{
		unsigned long heads = 0;

		for (unsigned sl = 0; sl < pcpu_nslots(); sl++)
			heads += (unsigned long)((struct vlog *)pcpu_slot_ptr(vlog, sl))->head;
		if (heads != vlog_commits)
			fail("load_cbne_store_store: the heads say %lu commits, the adders %lu", heads,
			     vlog_commits);
		if (strcmp(expect_mode, "fallback") != 0 && vlog_commits == 0)
			fail("load_cbne_store_store: no commit");
	}
	if (bad_group_reads)
		fail("%lu of %lu group reads inconsistent", bad_group_reads, group_reads);
	if (bad_rw_reads)
		fail("%lu reads under the read lock saw a write half done", bad_rw_reads);
	/* Every reader has left: the lock is free, its count exactly 0. */
	errno = 0;
	if (!rw_lost && !pcpu_rwlock_trywrlock(rw))
		fail("rwlock: not free after every reader left: %s (a lost update)", strerror(errno));
	else if (!rw_lost)
		CHECK(pcpu_rwlock_wrunlock(rw) == 0);
	if (pcpu_ref_read(ref) != 1)
		fail("ref holds %" PRId64 " references after balanced get/put, not 1", pcpu_ref_read(ref));
	if (pcpu_ref_kill(ref) != 0)
		fail("pcpu_ref_kill: %s", strerror(errno));
	else if (__atomic_load_n(&released, __ATOMIC_RELAXED) != 1)
		fail("ref released %d times after the kill", released);
	{
		struct pcpu_objcache_stats st;

		CHECK(pcpu_objcache_stats(cache, &st) == 0);
		if (handed_twice)
			fail("object cache: an object was handed out while in use, %lu times", handed_twice);
		if (st.gets != st.puts || st.gets != cache_ops)
			fail("object cache: %" PRIu64 " gets, %" PRIu64 " puts, %lu done", st.gets, st.puts,
			     cache_ops);
	}
	if (__atomic_load_n(&total_aborts, __ATOMIC_RELAXED) < min_aborts)
		fail("only %lu sections aborted", total_aborts);

	/* In the fallback modes no section runs: the hook's count is of adds
	 * sent to the fallback path, not of aborts. */
	if (!strcmp(expect_mode, "fallback"))
		snprintf(aborts_s, sizeof(aborts_s), "-");
	else
		snprintf(aborts_s, sizeof(aborts_s), "%lu", total_aborts);
	if (owned_claims == 0 && pcpu_worker_max() > 0)
		fail("no adder got an owned slot (%u of them)", pcpu_worker_max());
	printf("VM_RESULT arch=%s variant=%s kernel=%s mode=%s index=%s mm_cid=%d cpus=%u/%u "
	       "threads=%d owned=%d adds=%lu aborts=%s forks=%d hotplug=%d group_reads=%lu "
	       "rw_writes=%lu hc_admitted=%" PRId64 " hc_refused=%" PRId64 " seconds=%.1f%s result=%s spec=%s\n",
	       ARCH, VARIANT, un.release, mode, index_name, pcpu_rseq_has_mm_cid(), present, possible,
	       nthreads, owned_claims, total_adds, aborts_s, forks, hotplug_done, group_reads, rw_writes,
	       hl_admitted, hl_refused, elapsed, commit_report(),
	       failures ? "FAILED" : "exact", spec);
	finish(failures ? 1 : 0);
	return 0;
}
