/*
 * A published segment pays for the CPUs that can write it, never for
 * possible CPUs that are not present (issue 61, item 1).
 *
 * A zone's chunk has a region per possible CPU slot (and a mirror of each);
 * a published registry's zone lives in a tmpfs file, whose pages are
 * allocated only where they are written -- or read through the mapping: a
 * read fault on a hole of a shared tmpfs mapping allocates a page too (and
 * on a full file system raises SIGBUS). So the segment must neither
 * reserve pages for a slot no thread can write (a possible CPU that is not
 * present: PCPU_NSLOTS=64 on this machine gives 62 of them), nor read
 * them: not in a fetch, a histogram or group read, a snapshot, a reset, a
 * gauge set, a fork() child's copy.
 *
 * In one process, with PCPU_NSLOTS=64 (tests/segment/CMakeLists.txt): a
 * published registry (ordinary, or a shared tree with `tree`) with counter,
 * gauge, histogram and group series; a thread on each CPU the process may
 * run on adds, records, updates and sets; the main thread adds atomically
 * (the fallback path), resets, fetches, reads every group and histogram,
 * writes expositions and forks a child that does the same in its copy.
 * Then every data extent of the segment file (SEEK_DATA/SEEK_HOLE) must
 * lie in the header, the directory, or a region of a walked slot (slot 0,
 * the present CPUs, 0 .. present - 1: tests/present_cpus.h), and every
 * value must be exact.
 *
 * The directory is on /dev/shm: a tmpfs, where a read fault allocates (on a
 * disk file system it maps a page of zeros, and a reader that strays into
 * an absent slot would go unseen).
 *
 * Usage: test_segment_absent_slots [tree]
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcpu/pcpu.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>
#include <pcpu/worker.h>

#include "check.h"
#include "format.h"
#include "present_cpus.h"

#define NSERIES 300 /* more than a page of each slot's words */
#define ROUNDS 50

static pcpu_counter_t counters[NSERIES];
static pcpu_gauge_t gauges[NSERIES];
static pcpu_histogram_t *hists[NSERIES];
static pcpu_group_t *groups[NSERIES];
static int cpus[CPU_SETSIZE], ncpus;

static void *writer(void *arg)
{
	int cpu = *(int *)arg, r, i;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	CHECK(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
	for (r = 0; r < ROUNDS; r++)
		for (i = 0; i < NSERIES; i++) {
			pcpu_counter_add(counters[i], 1);
			pcpu_gauge_add(gauges[i], 2);
			pcpu_histogram_record(hists[i], (int64_t)(i * 37 + r) % 5000);
			pcpu_group_add2(groups[i], 0, 1, 10);
		}
	return NULL;
}

/* Everything a reader in the process can do, and the values it must see:
 * `adds` counter adds of 1 per series (after `resets` reset each to 0 in
 * the middle: `after_reset` of them since), gauges at 2 * adds... */
static void read_all(pcpu_registry_t *reg, uint64_t adds)
{
	uint64_t counts[64], count;
	int64_t sum, g[2];
	char *text;
	size_t len, nb;
	int i;

	for (i = 0; i < NSERIES; i++) {
		CHECK(pcpu_counter_fetch(counters[i]) == adds);
		CHECK(pcpu_gauge_read(gauges[i]) == (int64_t)(2 * adds));
		nb = pcpu_histogram_nbuckets(hists[i]);
		CHECK(nb <= 64);
		CHECK(pcpu_histogram_read(hists[i], counts, nb, &count, &sum) == 0);
		CHECK(count == adds);
		CHECK(pcpu_group_read(groups[i], 0, g) == 0);
		CHECK(g[0] == (int64_t)adds && g[1] == (int64_t)(10 * adds));
	}
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	free(text);
}

/* Every data extent of the file lies before data_offset, or in a walked
 * slot's region or its mirror. Returns the bytes of data found in regions. */
static uint64_t check_extents(const char *path)
{
	static unsigned char walked[4096];
	struct pcpu__seg_header h;
	uint64_t in_regions = 0;
	off_t d = 0, e, end;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	CHECK(pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h);
	CHECK(h.nslots - h.owned_slots == 64 && h.nslots <= sizeof walked);
	memset(walked, 0, sizeof walked);
	(void)mark_walked_cpu_slots(walked, h.nslots - h.owned_slots);
	CHECK(fstat(fd, &st) == 0);
	end = st.st_size;
	while (d < end) {
		d = lseek(fd, d, SEEK_DATA);
		if (d < 0) {
			CHECK(errno == ENXIO); /* no data after d */
			break;
		}
		e = lseek(fd, d, SEEK_HOLE);
		CHECK(e > d);
		for (off_t p = d; p < e; p += 4096) {
			uint64_t rel, region, slot;

			if ((uint64_t)p < h.data_offset)
				continue;
			rel = ((uint64_t)p - h.data_offset) % h.chunk_span;
			region = rel / h.slot_stride;
			slot = region % h.nslots;
			if (slot >= h.nslots - h.owned_slots || !walked[slot]) {
				fprintf(stderr,
					"FAIL: the file has data at %lld: chunk %llu, %s of slot %llu, "
					"which no thread can write (not a present CPU)\n",
					(long long)p,
					(unsigned long long)(((uint64_t)p - h.data_offset) / h.chunk_span),
					region >= h.nslots ? "mirror" : "region", (unsigned long long)slot);
				exit(1);
			}
			in_regions += 4096;
		}
		d = e;
	}
	close(fd);
	return in_regions;
}

int main(int argc, char **argv)
{
	static const int64_t bounds[] = { 10, 100, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 10000 };
	static const char *const lnames[] = { "id" };
	struct pcpu_histogram_layout lay = { PCPU_HISTOGRAM_EXPLICIT, bounds, 10, 0, 0, 0, 0, 0, 0 };
	struct pcpu_family_desc cd, gd, hd, md[2];
	struct pcpu_segment_options opt;
	char dir[] = "/dev/shm/pcpu-absent.XXXXXX", *path;
	int tree = argc > 1 && strcmp(argv[1], "tree") == 0;
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_family_t *cf, *gf, *hf;
	pcpu_group_family_t *grf;
	pcpu_segment_t *seg;
	pthread_t t[CPU_SETSIZE];
	cpu_set_t allowed;
	uint64_t adds, data;
	int i, status;
	pid_t child;

	CHECK(reg != NULL);
	/* PCPU_NSLOTS=64 CPU slots (tests/segment/CMakeLists.txt), then the
	 * owned slots (pcpu/worker.h). */
	CHECK(pcpu_nslots() - pcpu_worker_max() == 64);
	CHECK(mkdtemp(dir) != NULL);
	memset(&opt, 0, sizeof opt);
	opt.dir = dir;
	opt.flags = tree ? PCPU_SEGMENT_SHARED_TREE : 0;
	seg = pcpu_segment_publish(reg, "absent", &opt);
	if (!seg)
		fprintf(stderr, "publish: %s\n", strerror(errno));
	CHECK(seg != NULL);
	path = strdup(pcpu_segment_path(seg));
	CHECK(path != NULL);

	memset(&cd, 0, sizeof cd);
	cd.name = "c_total";
	cd.type = PCPU_METRIC_COUNTER;
	cd.nlabels = 1;
	cd.label_names = lnames;
	gd = cd;
	gd.name = "g";
	gd.type = PCPU_METRIC_GAUGE;
	hd = cd;
	hd.name = "h";
	hd.type = PCPU_METRIC_HISTOGRAM;
	hd.histogram = &lay;
	md[0] = cd;
	md[0].name = "m_packets_total";
	md[1] = cd;
	md[1].name = "m_bytes_total";
	CHECK((cf = pcpu_registry_family(reg, &cd)) != NULL);
	CHECK((gf = pcpu_registry_family(reg, &gd)) != NULL);
	CHECK((hf = pcpu_registry_family(reg, &hd)) != NULL);
	CHECK((grf = pcpu_registry_group(reg, md, 2)) != NULL);
	for (i = 0; i < NSERIES; i++) {
		char id[16];
		const char *v[1] = { id };

		snprintf(id, sizeof id, "%d", i);
		CHECK((counters[i] = pcpu_family_counter(cf, v)) != NULL);
		CHECK((gauges[i] = pcpu_family_gauge(gf, v)) != NULL);
		CHECK((hists[i] = pcpu_family_histogram(hf, v)) != NULL);
		CHECK((groups[i] = pcpu_group_family_series(grf, v)) != NULL);
	}

	/* A writer on every CPU the process may run on. */
	CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &allowed))
			cpus[ncpus++] = i;
	for (i = 0; i < ncpus; i++)
		CHECK(pthread_create(&t[i], NULL, writer, &cpus[i]) == 0);
	for (i = 0; i < ncpus; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	adds = (uint64_t)ncpus * ROUNDS;

	/* The fallback path (mirror words), then resets and gauge sets (slot
	 * 0's mirror), and every read. */
	for (i = 0; i < NSERIES; i++)
		pcpu_counter_add_atomic(counters[i], 5);
	for (i = 0; i < NSERIES; i++) {
		CHECK(pcpu_counter_fetch_and_zero(counters[i]) == adds + 5);
		pcpu_counter_add(counters[i], (int64_t)adds);
		pcpu_gauge_set(gauges[i], (int64_t)(2 * adds));
	}
	read_all(reg, adds);

	/* A child reads its copy (an ordinary segment's child leaves it; a
	 * tree's child keeps writing it). */
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		read_all(reg, adds);
		_exit(0);
	}
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_all(reg, adds);

	data = check_extents(path);
	printf("%s segment, %u slots, %d writing CPUs: %llu bytes of data in slot regions, "
	       "%.1f per series of each of 4 kinds\n",
	       tree ? "tree" : "ordinary", pcpu_nslots(), ncpus, (unsigned long long)data,
	       (double)data / (4.0 * NSERIES));
	CHECK(data > 0);

	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	free(path);
	rmdir(dir);
	printf("PASS\n");
	return 0;
}
