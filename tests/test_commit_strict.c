/*
 * Strict commit accounting (issue 61, item 4): with vm.overcommit_memory=2
 * the kernel ignores MAP_NORESERVE and charges commit for every writable
 * private mapping, so a zone's chunk (2 x possible CPUs x 32 MiB) could
 * not be mapped writable at 64 possible CPUs and more: pcpu_counter_alloc()
 * and pcpu_registry_create() failed with ENOMEM. Under PCPU_COMMIT=strict
 * (what pcpu does by itself where the kernel's mode is 2) a private zone's
 * chunks are read-only but for what pcpu writes: the regions of the slots
 * that can be written, over the zone's objects (src/core/zone_chunk.h,
 * "Commit").
 *
 * This machine's overcommit mode is not changed (it is machine-wide; the
 * emulated machine does that: scripts/vm/run-all.sh, MODE:strict). Instead,
 * with PCPU_COMMIT=strict and PCPU_NSLOTS=256 (tests/CMakeLists.txt), every
 * layer is used as a program uses it -- counters one by one and in arrays,
 * atomic adds, resets, gauges, a hierarchical counter through its precise
 * mode and a reset, a reference count killed, the read-mostly lock written,
 * an object cache drained, a consistent group, histograms, an owned slot,
 * a published segment, a fork() child doing the same -- and then:
 *  - what mode 2 would charge: the growth of the process's private
 *    writable mappings (/proc/self/smaps, "rw-p"), which must stay within
 *    a bound far below one chunk's 16 GiB (and is printed per counter);
 *  - the regions of slots no thread can write are read-only: a write there
 *    (a child process's) dies of SIGSEGV, a read gives 0;
 *  - every value is exact.
 *
 * Usage: test_commit_strict
 */
#include "check.h"
#include "present_cpus.h"

#include <pcpu/pcpu.h>
#include <pcpu/hcounter.h>
#include <pcpu/objcache.h>
#include <pcpu/ref.h>
#include <pcpu/rwlock.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <pcpu/worker.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NCOUNTERS 100000
/* What the whole run may add to the private writable mappings: 16 GiB
 * would be one chunk made writable whole. */
#define BOUND ((uint64_t)256 << 20)

/* Bytes of private writable mappings: what vm.overcommit_memory=2 charges
 * (/proc/self/smaps' "rw-p" mappings). */
static uint64_t private_writable(void)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	uint64_t total = 0;

	CHECK(f != NULL);
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && strcmp(perms, "rw-p") == 0)
			total += hi - lo;
	}
	fclose(f);
	return total;
}

static int released;

static void on_release(void *arg)
{
	(void)arg;
	released++;
}

struct everything {
	pcpu_counter_t one[64], array;
	pcpu_gauge_t gauge;
	pcpu_hcounter_t *hc;
	pcpu_ref_t *ref;
	pcpu_rwlock_t *rw;
	pcpu_objcache_t *cache;
	pcpu_registry_t *reg;
	pcpu_counter_t pub;
	pcpu_histogram_t *hist;
	pcpu_group_t *group;
};

static struct everything e;

static void *adder(void *arg)
{
	pcpu_worker_t w;
	int owned = arg != NULL && pcpu_worker_claim(&w) == 0;

	for (int i = 0; i < 1000; i++) {
		for (int k = 0; k < 64; k++)
			pcpu_counter_add(e.one[k], 1);
		pcpu_counter_add(pcpu_counter_at(e.array, (size_t)i * 97 % NCOUNTERS), 1);
		pcpu_counter_add_atomic(e.one[0], 1);
		pcpu_gauge_add(e.gauge, 2);
		pcpu_hcounter_add(e.hc, 1);
		pcpu_ref_get(e.ref);
		pcpu_ref_put(e.ref);
		pcpu_rwlock_rdlock(e.rw);
		pcpu_rwlock_rdunlock(e.rw);
		pcpu_objcache_put(e.cache, pcpu_objcache_get(e.cache));
		pcpu_counter_add(e.pub, 1);
		pcpu_histogram_record(e.hist, i);
		pcpu_group_add2(e.group, 0, 1, 3);
		if (owned)
			pcpu_counter_add_owned(w, e.one[1], 1);
	}
	if (owned)
		CHECK(pcpu_worker_release() == 0);
	return NULL;
}

/* Every value, as `threads` adders of adder() leave them (each of the
 * first `owned` with an owned slot). */
static void check_values(int threads, int owned)
{
	uint64_t counts[16], count;
	int64_t sum, g[2];

	CHECK(pcpu_counter_fetch(e.one[0]) == (uint64_t)threads * 2000);
	CHECK(pcpu_counter_fetch(e.one[1]) == (uint64_t)threads * 1000 + (uint64_t)owned * 1000);
	CHECK(pcpu_counter_fetch(e.one[63]) == (uint64_t)threads * 1000);
	CHECK(pcpu_gauge_read(e.gauge) == (int64_t)threads * 2000);
	CHECK(pcpu_hcounter_sum(e.hc) == (int64_t)threads * 1000);
	CHECK(pcpu_counter_fetch(e.pub) == (uint64_t)threads * 1000);
	CHECK(pcpu_histogram_nbuckets(e.hist) <= 16);
	CHECK(pcpu_histogram_read(e.hist, counts, pcpu_histogram_nbuckets(e.hist), &count, &sum) == 0);
	CHECK(count == (uint64_t)threads * 1000);
	CHECK(pcpu_group_read(e.group, 0, g) == 0);
	CHECK(g[0] == (int64_t)threads * 1000 && g[1] == 3 * g[0]);
}

static void run_adders(int threads, int owned)
{
	pthread_t t[8];

	for (int i = 0; i < threads; i++)
		CHECK(pthread_create(&t[i], NULL, adder, i < owned ? (void *)1 : NULL) == 0);
	for (int i = 0; i < threads; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
}

int main(void)
{
	static const int64_t bounds[] = { 10, 100, 1000 };
	static const char *const ids[] = { "id" };
	static unsigned char walked[4096];
	struct pcpu_histogram_layout lay = { PCPU_HISTOGRAM_EXPLICIT, bounds, 3, 0, 0, 0, 0, 0, 0 };
	struct pcpu_objcache_desc od;
	struct pcpu_family_desc md[2];
	struct pcpu_segment_options so;
	char dir[] = "/dev/shm/pcpu-strict.XXXXXX";
	const char *const a[] = { "a" };
	pcpu_segment_t *seg;
	uint64_t before, after, per_counter;
	unsigned nslots, cpu_slots, absent = 0, s;
	int status;
	pid_t child;

	before = private_writable();
	nslots = pcpu_nslots();
	cpu_slots = nslots - pcpu_worker_max();
	CHECK(cpu_slots == 256); /* PCPU_NSLOTS=256 */
	CHECK(cpu_slots <= sizeof walked);
	(void)mark_walked_cpu_slots(walked, cpu_slots);

	/* Every layer. */
	for (int k = 0; k < 64; k++)
		CHECK((e.one[k] = pcpu_counter_alloc()) != NULL);
	/* What an array of counters costs, alone: its words in the regions
	 * (and mirrors) of the slots that can write them. */
	{
		uint64_t w0 = private_writable();

		CHECK((e.array = pcpu_counter_alloc_array(NCOUNTERS)) != NULL);
		per_counter = (private_writable() - w0) / NCOUNTERS;
	}
	CHECK((e.gauge = pcpu_gauge_alloc()) != NULL);
	CHECK((e.hc = pcpu_hcounter_create(32)) != NULL);
	CHECK((e.ref = pcpu_ref_create(on_release, NULL)) != NULL);
	CHECK((e.rw = pcpu_rwlock_create()) != NULL);
	memset(&od, 0, sizeof od);
	od.size = 48;
	CHECK((e.cache = pcpu_objcache_create(&od)) != NULL);
	CHECK((e.reg = pcpu_registry_create()) != NULL);
	CHECK(mkdtemp(dir) != NULL);
	memset(&so, 0, sizeof so);
	so.dir = dir;
	CHECK((seg = pcpu_segment_publish(e.reg, "strict", &so)) != NULL);
	CHECK((e.pub = pcpu_registry_counter(e.reg, "strict_total", "Help.")) != NULL);
	memset(md, 0, sizeof md);
	md[0].name = "strict_packets_total";
	md[0].type = PCPU_METRIC_COUNTER;
	md[0].nlabels = 1;
	md[0].label_names = ids;
	md[1] = md[0];
	md[1].name = "strict_bytes_total";
	{
		pcpu_group_family_t *gf = pcpu_registry_group(e.reg, md, 2);
		struct pcpu_family_desc hd = md[0];

		CHECK(gf && (e.group = pcpu_group_family_series(gf, a)) != NULL);
		hd.name = "strict_seconds";
		hd.type = PCPU_METRIC_HISTOGRAM;
		hd.histogram = &lay;
		e.hist = pcpu_family_histogram(pcpu_registry_family(e.reg, &hd), a);
		CHECK(e.hist != NULL);
	}

	run_adders(4, 1);
	check_values(4, 1);
	/* The switches: a reset, the precise mode, a kill, a writer, a drain. */
	CHECK(pcpu_counter_fetch_and_zero(e.one[63]) == 4000);
	pcpu_counter_add(e.one[63], 4000);
	pcpu_gauge_set(e.gauge, 8000);
	CHECK(pcpu_hcounter_limited_add(e.hc, 1, 4001) && !pcpu_hcounter_limited_add(e.hc, 1, 4001));
	CHECK(pcpu_hcounter_reset(e.hc) == 0);
	pcpu_hcounter_add(e.hc, 4000);
	CHECK(pcpu_rwlock_wrlock(e.rw) == 0 && pcpu_rwlock_wrunlock(e.rw) == 0);
	(void)pcpu_objcache_drain(e.cache);
	check_values(4, 1);

	/* A child does it all again in its copy. */
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		run_adders(2, 1);
		check_values(6, 2);
		_exit(0);
	}
	CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	check_values(4, 1);

	/* What mode 2 would charge. */
	after = private_writable();
	printf("test_commit_strict: %u slots (%u CPU slots), private writable mappings +%llu KiB "
	       "for %d counters, every other layer, 4 threads' stacks and a fork (%llu bytes per "
	       "counter of an array; bound %llu MiB)\n",
	       nslots, cpu_slots, (unsigned long long)(after - before) >> 10, NCOUNTERS,
	       (unsigned long long)per_counter, (unsigned long long)(BOUND >> 20));
	CHECK(after - before < BOUND);

	/* A slot no thread can write is read-only: read 0, and a write faults
	 * (in a child, which dies of SIGSEGV). */
	for (s = 0; s < cpu_slots; s++) {
		if (walked[s])
			continue;
		absent++;
		CHECK(*(volatile uint64_t *)pcpu_slot_ptr(e.one[5], s) == 0);
	}
	CHECK(absent == cpu_slots - 2 || absent > 0); /* 254 on a 2-CPU machine */
	for (s = 0; walked[s]; s++)
		;
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		signal(SIGSEGV, SIG_DFL);
		*(volatile uint64_t *)pcpu_slot_ptr(e.one[5], s) = 1;
		_exit(0); /* writable: the absent slot's region costs commit */
	}
	CHECK(waitpid(child, &status, 0) == child);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV) {
		fprintf(stderr, "FAIL: slot %u (absent) is writable (status 0x%x)\n", s, status);
		return 1;
	}

	CHECK(pcpu_ref_kill(e.ref) == 0);
	CHECK(released == 1);
	pcpu_ref_destroy(e.ref);
	CHECK(pcpu_rwlock_destroy(e.rw) == 0);
	CHECK(pcpu_objcache_destroy(e.cache) == 0);
	pcpu_hcounter_destroy(e.hc);
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(e.reg);
	rmdir(dir);
	printf("PASS\n");
	return 0;
}
