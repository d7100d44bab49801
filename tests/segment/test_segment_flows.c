/*
 * Flows tables readable from outside through the segment (format 2.9,
 * pcpu_segment_flows_create(), pcpu_reader_flows_*(); issue 61).
 *
 *   test_segment_flows            the end-to-end test: a published table,
 *                                 adds from several threads, read by another
 *                                 process (this program exec()ed as
 *                                 `read`) exact after each collection, and
 *                                 short of it before when adds are still
 *                                 buffered; the table's life (destroy:
 *                                 ESTALE, gone from the list), a fork()
 *                                 child's adds never reaching the file, the
 *                                 snapshot of a segment holding a table
 *                                 (the FLOWS kind skipped), refusals.
 *   test_segment_flows full [mount|userns]
 *                                 a small tmpfs, filled: a table that does
 *                                 not fit is refused (ENOSPC, counted),
 *                                 never SIGBUS; one made before keeps
 *                                 counting exactly through the full file
 *                                 system.
 *   test_segment_flows churn [SECONDS]
 *                                 adds from several threads and a
 *                                 collection every millisecond, while a
 *                                 table is destroyed and made again (its
 *                                 pages reused) and another process reads
 *                                 both: every value it reads is one the
 *                                 table it listed held (never the next
 *                                 table's), words never decrease, and
 *                                 the last read after a collection is
 *                                 exact.
 *   test_segment_flows read PATH TABLE M [below]
 *                                 the reader: every flow f of TABLE must
 *                                 read packets M and bytes M x (f + 1)
 *                                 (exit 0); exit 3 when some value is
 *                                 below (not yet flushed), 1 otherwise.
 *                                 With `below`: exit 0 iff some value is
 *                                 below and none above.
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
#include <time.h>
#include <unistd.h>

#include <pcpu/flows.h>
#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "format.h"
#include "small_fs.h"

#define NFLOWS 5000
#define NTHREADS 4
#define ROUNDS 3

static const char *const counters[] = { "packets", "bytes" };
static pcpu_flows_t *table;
static const char *self;

static void *adder(void *arg)
{
	(void)arg;
	for (int r = 0; r < ROUNDS; r++)
		for (size_t f = 0; f < NFLOWS; f++) {
			CHECK(pcpu_flows_add(table, f, 0, 1) == 0);
			CHECK(pcpu_flows_add(table, f, 1, f + 1) == 0);
		}
	return NULL;
}

static void add_from_threads(void)
{
	pthread_t t[NTHREADS];

	for (int i = 0; i < NTHREADS; i++)
		CHECK(pthread_create(&t[i], NULL, adder, NULL) == 0);
	for (int i = 0; i < NTHREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
}

/* The reader, in this process or (through run_reader) another. */
static int read_table(const char *path, const char *name, uint64_t m, int below)
{
	struct pcpu_reader_flows *ts;
	pcpu_reader_t *r = pcpu_reader_open(path, NULL);
	size_t n, i, k, low = 0, high = 0;
	uint64_t *v;

	if (!r) {
		fprintf(stderr, "reader: open %s: %s\n", path, pcpu_reader_error());
		return 1;
	}
	if (pcpu_reader_flows_list(r, &ts, &n) != 0) {
		fprintf(stderr, "reader: list: %s\n", pcpu_reader_error());
		return 1;
	}
	for (i = 0; i < n && strcmp(ts[i].name, name) != 0; i++)
		;
	if (i == n) {
		fprintf(stderr, "reader: no table %s among %zu\n", name, n);
		return 1;
	}
	CHECK(ts[i].nflows == NFLOWS && ts[i].ncounters == 2);
	CHECK(strcmp(ts[i].counter_names[0], "packets") == 0);
	CHECK(strcmp(ts[i].counter_names[1], "bytes") == 0);
	CHECK(ts[i].help && strcmp(ts[i].help, "Per-flow traffic.") == 0);
	v = calloc(NFLOWS * 2, sizeof *v);
	CHECK(v != NULL);
	/* Two ranges, to read a part as well as the start. */
	if (pcpu_reader_flows_read(r, &ts[i], 0, 100, v) != 0 ||
	    pcpu_reader_flows_read(r, &ts[i], 100, NFLOWS - 100, v + 200) != 0) {
		fprintf(stderr, "reader: read: %s\n", pcpu_reader_error());
		return 1;
	}
	for (k = 0; k < NFLOWS; k++) {
		uint64_t p = v[2 * k], b = v[2 * k + 1];

		low += (p < m) + (b < m * (k + 1));
		high += (p > m) + (b > m * (k + 1));
		if ((p != m || b != m * (k + 1)) && !below && low + high < 4)
			fprintf(stderr, "reader: flow %zu: packets %llu bytes %llu, expected %llu %llu\n",
				k, (unsigned long long)p, (unsigned long long)b,
				(unsigned long long)m, (unsigned long long)(m * (k + 1)));
	}
	free(v);
	pcpu_reader_flows_free(ts, n);
	pcpu_reader_close(r);
	if (below)
		return low > 0 && high == 0 ? 0 : 1;
	return high ? 1 : low ? 3 : 0;
}

/* `pcpustat flows` (PCPU_TEST_PCPUSTAT names it): the listing, and the
 * top 3 flows by bytes, in text and as Prometheus samples, exactly. */
static void check_pcpustat(const char *path, uint64_t m)
{
	const char *tool = getenv("PCPU_TEST_PCPUSTAT");
	char cmd[1200], out[4096], want[4096];
	size_t n;
	FILE *p;

	if (!tool || !*tool)
		return;
	snprintf(cmd, sizeof cmd, "'%s' flows '%s' flow_traffic -n 3 -s bytes --prometheus", tool,
		 path);
	CHECK((p = popen(cmd, "r")) != NULL);
	n = fread(out, 1, sizeof out - 1, p);
	out[n] = 0;
	CHECK(pclose(p) == 0);
	snprintf(want, sizeof want,
		 "# HELP flow_traffic Per-flow traffic.\n"
		 "# TYPE flow_traffic counter\n"
		 "flow_traffic_total{counter=\"packets\",flow=\"4999\"} %llu\n"
		 "flow_traffic_total{counter=\"bytes\",flow=\"4999\"} %llu\n"
		 "flow_traffic_total{counter=\"packets\",flow=\"4998\"} %llu\n"
		 "flow_traffic_total{counter=\"bytes\",flow=\"4998\"} %llu\n"
		 "flow_traffic_total{counter=\"packets\",flow=\"4997\"} %llu\n"
		 "flow_traffic_total{counter=\"bytes\",flow=\"4997\"} %llu\n",
		 (unsigned long long)m, (unsigned long long)(m * 5000), (unsigned long long)m,
		 (unsigned long long)(m * 4999), (unsigned long long)m, (unsigned long long)(m * 4998));
	if (strcmp(out, want) != 0) {
		fprintf(stderr, "pcpustat flows printed:\n%s\nnot:\n%s", out, want);
		exit(1);
	}
	/* Text, by the first counter (ties: the smaller flow first). */
	snprintf(cmd, sizeof cmd, "'%s' flows '%s' flow_traffic --top 2", tool, path);
	CHECK((p = popen(cmd, "r")) != NULL);
	n = fread(out, 1, sizeof out - 1, p);
	out[n] = 0;
	CHECK(pclose(p) == 0);
	snprintf(want, sizeof want,
		 "%12s %20s %20s\n%12d %20llu %20llu\n%12d %20llu %20llu\n", "FLOW", "packets",
		 "bytes", 0, (unsigned long long)m, (unsigned long long)m, 1, (unsigned long long)m,
		 (unsigned long long)(2 * m));
	if (strcmp(out, want) != 0) {
		fprintf(stderr, "pcpustat flows printed:\n%s\nnot:\n%s", out, want);
		exit(1);
	}
	snprintf(cmd, sizeof cmd, "'%s' flows '%s'", tool, path);
	CHECK((p = popen(cmd, "r")) != NULL);
	n = fread(out, 1, sizeof out - 1, p);
	out[n] = 0;
	CHECK(pclose(p) == 0);
	CHECK(strstr(out, "flow_traffic") && strstr(out, "packets,bytes") &&
	      strstr(out, "Per-flow traffic.") && strstr(out, "other_table"));
	printf("pcpustat flows: the listing and the top 3 flows as expected\n");
	fflush(stdout); /* not again from a fork() child's exit */
}

/* This program exec()ed as the reader: its exit status. */
static int run_reader(const char *path, const char *name, uint64_t m, int below)
{
	char ms[32];
	pid_t c;
	int st;

	snprintf(ms, sizeof ms, "%llu", (unsigned long long)m);
	c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		execl(self, self, "read", path, name, ms, below ? "below" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(c, &st, 0) == c);
	CHECK(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* The reader against a hostile writer: each field of the table's entry,
 * and its names, damaged in the file in turn (then restored): the table is
 * left out of the list, never read past its bounds. */
static void hostile(const char *path)
{
	struct pcpu_reader_flows *ts;
	struct pcpu__seg_header h;
	struct pcpu__seg_entry e, bad;
	pcpu_reader_t *r;
	size_t n, i, idx = 0;
	char blob[256];
	int fd = open(path, O_RDWR);
	uint64_t off;

	CHECK(fd >= 0);
	CHECK(pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h);
	CHECK((r = pcpu_reader_open(path, NULL)) != NULL);
	CHECK(pcpu_reader_flows_list(r, &ts, &n) == 0 && n == 2);
	for (i = 0; i < n; i++)
		if (strcmp(ts[i].name, "flow_traffic") == 0)
			idx = (size_t)ts[i].pcpu__entry;
	pcpu_reader_flows_free(ts, n);
	off = h.entries_offset + idx * h.entry_size;
	CHECK(pread(fd, &e, sizeof e, (off_t)off) == (ssize_t)sizeof e);
	CHECK(e.kind == PCPU__SEG_FLOWS && e.blob_len < sizeof blob);
	CHECK(pread(fd, blob, e.blob_len, (off_t)(h.strings_offset + e.blob_off)) == (ssize_t)e.blob_len);
	for (int k = 0; k < 16; k++) {
		bad = e;
		switch (k) {
		case 0: bad.value_off = PCPU__SEG_TABLES_BASE - 4096; break; /* among the chunks */
		case 1: bad.value_off = (uint64_t)1 << 62; break;           /* past the file */
		case 2: bad.value_off += 8; break;                          /* not a page */
		case 3: bad.serial = 0; break;
		case 4: bad.serial = (uint64_t)1 << 40; break;               /* keys overflow */
		case 5: bad.serial = UINT64_MAX; break;
		case 6: bad.u32a = 0; break;
		case 7: bad.u32a = 65; break;
		case 8: bad.u32b = 4; break;
		case 9: bad.flags = 2; break;
		case 10: bad.blob_len = 0; break;
		case 11: bad.blob_off = UINT64_MAX - 8; break;
		case 12: bad.blob_len -= 1; break;                          /* a name cut */
		case 13: bad.blob_len = PCPU__SEG_BLOB_MAX + 8; break;
		case 14: bad.seq |= 1; break;                               /* being written */
		case 15: bad.flags = 0; break;                              /* help read as a counter */
		}
		CHECK(pwrite(fd, &bad, sizeof bad, (off_t)off) == (ssize_t)sizeof bad);
		CHECK(pcpu_reader_flows_list(r, &ts, &n) == 0);
		if (n != 1 || strcmp(ts[0].name, "other_table") != 0) {
			fprintf(stderr, "damage %d: %zu tables listed\n", k, n);
			exit(1);
		}
		pcpu_reader_flows_free(ts, n);
	}
	CHECK(pwrite(fd, &e, sizeof e, (off_t)off) == (ssize_t)sizeof e);
	/* Names: an invalid metric name; a counter name given twice (the
	 * last 14 bytes, "packets\0bytes\0", become two equal names). */
	for (int k = 0; k < 2; k++) {
		char b2[256];

		memcpy(b2, blob, e.blob_len);
		if (k == 0)
			b2[4] = '-'; /* flow-traffic */
		else
			memcpy(b2 + e.blob_len - 14, "counts\0counts", 14);
		CHECK(pwrite(fd, b2, e.blob_len, (off_t)(h.strings_offset + e.blob_off)) ==
		      (ssize_t)e.blob_len);
		CHECK(pcpu_reader_flows_list(r, &ts, &n) == 0);
		if (n != 1) {
			fprintf(stderr, "bad names %d: %zu tables listed\n", k, n);
			exit(1);
		}
		pcpu_reader_flows_free(ts, n);
	}
	CHECK(pwrite(fd, blob, e.blob_len, (off_t)(h.strings_offset + e.blob_off)) == (ssize_t)e.blob_len);
	CHECK(pcpu_reader_flows_list(r, &ts, &n) == 0 && n == 2);
	pcpu_reader_flows_free(ts, n);
	pcpu_reader_close(r);
	close(fd);
}

static void refusals(pcpu_segment_t *seg)
{
	static const char *const dup[] = { "a", "a" };
	static const char *const bad[] = { "a", "b-c" };

	errno = 0;
	CHECK(pcpu_segment_flows_create(NULL, "x", NULL, 1, 1, counters, NULL) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_flows_create(seg, "1x", NULL, 1, 1, counters, NULL) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_flows_create(seg, "x", NULL, 0, 1, counters, NULL) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_flows_create(seg, "x", NULL, 1, 0, counters, NULL) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_flows_create(seg, "x", NULL, 1, 65, counters, NULL) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_flows_create(seg, "x", NULL, 1, 2, dup, NULL) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_flows_create(seg, "x", NULL, 1, 2, bad, NULL) == NULL && errno == EINVAL);
	CHECK(pcpu_segment_flows_create(seg, "x", NULL, (size_t)1 << 31, 2, counters, NULL) == NULL &&
	      errno == E2BIG);
}

/* A directory with no room left: the table is refused (ENOSPC), its pages
 * given back, and one fits once an entry is free again. */
static void directory_full(const char *dir)
{
	struct pcpu_segment_options o;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_counter_t c;
	pcpu_flows_t *f;

	memset(&o, 0, sizeof o);
	o.dir = dir;
	o.max_entries = 2;
	CHECK((reg = pcpu_registry_create()) != NULL);
	CHECK((seg = pcpu_segment_publish(reg, "flowsfull", &o)) != NULL);
	CHECK((c = pcpu_registry_counter(reg, "requests", "Requests.")) != NULL); /* 2 entries */
	errno = 0;
	CHECK(pcpu_segment_flows_create(seg, "flow_traffic", NULL, 1000, 2, counters, NULL) == NULL &&
	      errno == ENOSPC);
	CHECK(pcpu_registry_remove_family(reg, pcpu_registry_find(reg, "requests")) == 0);
	CHECK((f = pcpu_segment_flows_create(seg, "flow_traffic", NULL, 1000, 2, counters, NULL)) != NULL);
	pcpu_flows_destroy(f);
	pcpu_registry_destroy(reg);
}

static int end_to_end(void)
{
	char dir[] = "/tmp/pcpu-flowseg.XXXXXX", cmd[600];
	struct pcpu_segment_options o;
	struct pcpu_flows_attr a;
	struct pcpu_reader_snapshot *s;
	struct pcpu_reader_flows *ts;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_counter_t c;
	pcpu_reader_t *r;
	pcpu_flows_t *other;
	uint64_t m = NTHREADS * ROUNDS, v[4];
	size_t n, pending;
	char *text;
	size_t len;
	pid_t child;
	int st;

	CHECK(mkdtemp(dir) != NULL);
	memset(&o, 0, sizeof o);
	o.dir = dir;
	CHECK((reg = pcpu_registry_create()) != NULL);
	CHECK((seg = pcpu_segment_publish(reg, "flowseg", &o)) != NULL);
	CHECK((c = pcpu_registry_counter(reg, "requests", "Requests.")) != NULL);
	pcpu_counter_add(c, 7);
	refusals(seg);
	directory_full(dir);

	/* Large buffers: adds stay buffered until a flush (a slot drains
	 * after 65,536 adds at the earliest; each thread adds 30,000). */
	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.buffer = PCPU_FLOWS_MAX_BUFFER;
	table = pcpu_segment_flows_create(seg, "flow_traffic", "Per-flow traffic.", NFLOWS, 2,
					  counters, &a);
	if (!table) {
		fprintf(stderr, "create: %s\n", pcpu_segment_error());
		return 1;
	}
	CHECK((other = pcpu_segment_flows_create(seg, "other_table", NULL, 10, 1, counters, NULL)) != NULL);
	CHECK(pcpu_flows_add(other, 3, 0, 42) == 0);

	add_from_threads();
	/* In-process reads are exact at once (they read the buffers). */
	CHECK_EQ_U64(pcpu_flows_read(table, 7, 1), m * 8);
	/* From outside, before any collection: short of it while adds are
	 * buffered (with rseq; without, every add went to the words). */
	pending = pcpu_flows_pending(table);
	if (pending > 0)
		CHECK(run_reader(pcpu_segment_path(seg), "flow_traffic", m, 1) == 0);
	/* A collection drains the tables: exact from outside. */
	CHECK(pcpu_registry_collect(reg) >= 0);
	CHECK(pcpu_flows_pending(table) == 0);
	CHECK(run_reader(pcpu_segment_path(seg), "flow_traffic", m, 0) == 0);
	check_pcpustat(pcpu_segment_path(seg), m);

	/* Again, the collection an in-process scrape makes. */
	add_from_threads();
	m *= 2;
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	free(text);
	CHECK(run_reader(pcpu_segment_path(seg), "flow_traffic", m, 0) == 0);

	/* The snapshot of a segment holding tables: the FLOWS kind skipped,
	 * the series read as before. */
	CHECK((r = pcpu_reader_open(pcpu_segment_path(seg), NULL)) != NULL);
	CHECK(pcpu_reader_snapshot(r, 0, &s) == 0);
	CHECK(s->snapshot.nfamilies == 1 && strcmp(s->snapshot.families[0].name, "requests") == 0);
	CHECK(s->stable);
	pcpu_reader_snapshot_free(s);

	/* A fork() child's adds stay in the child. */
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		for (int i = 0; i < 1000; i++)
			if (pcpu_flows_add(table, 1, 0, 1000) != 0 || pcpu_flows_add(other, 3, 0, 1) != 0)
				_exit(1);
		if (pcpu_flows_flush(table) != 0 || pcpu_flows_read(table, 1, 0) != m + 1000000)
			_exit(1);
		pcpu_flows_destroy(other); /* the parent's entry stays */
		_exit(0);
	}
	CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(pcpu_registry_collect(reg) >= 0);
	CHECK(run_reader(pcpu_segment_path(seg), "flow_traffic", m, 0) == 0);

	hostile(pcpu_segment_path(seg));

	/* Destroying a table: its entry goes; a read of the old listing is
	 * refused (ESTALE), never another table's values. */
	CHECK(pcpu_reader_flows_list(r, &ts, &n) == 0 && n == 2);
	for (size_t i = 0; i < n; i++)
		if (strcmp(ts[i].name, "other_table") == 0) {
			CHECK(ts[i].help == NULL && ts[i].nflows == 10);
			CHECK(pcpu_reader_flows_read(r, &ts[i], 3, 1, v) == 0);
			CHECK_EQ_U64(v[0], 42);
			pcpu_flows_destroy(other);
			errno = 0;
			CHECK(pcpu_reader_flows_read(r, &ts[i], 3, 1, v) == -1 && errno == ESTALE);
			/* A new table may take its place: still ESTALE. */
			CHECK((other = pcpu_segment_flows_create(seg, "other_table", NULL, 10, 1, counters,
								 NULL)) != NULL);
			CHECK(pcpu_reader_flows_read(r, &ts[i], 3, 1, v) == -1 && errno == ESTALE);
		}
	pcpu_reader_flows_free(ts, n);
	CHECK(pcpu_reader_flows_list(r, &ts, &n) == 0 && n == 2);
	pcpu_reader_flows_free(ts, n);
	errno = 0;
	CHECK(pcpu_reader_flows_read(r, NULL, 0, 1, v) == -1 && errno == EINVAL);
	pcpu_reader_close(r);

	/* The registry first: the tables outlive it, counting unseen. */
	pcpu_registry_destroy(reg);
	CHECK(pcpu_flows_add(table, 0, 0, 1) == 0);
	CHECK_EQ_U64(pcpu_flows_read(table, 0, 0), m + 1);
	pcpu_flows_destroy(table);
	pcpu_flows_destroy(other);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
	printf("test_segment_flows: a table of %d flows read from another process, exact after "
	       "each collection (%zu adds still buffered before the first: read short of them)\n",
	       NFLOWS, pending);
	return 0;
}

/* ---- churn: reads from another process while tables come and go ---------------- */

#define CHURN_FLOWS 262144 /* 2 MB of words: a read that takes a while */

static volatile int churn_stop;
static pcpu_registry_t *churn_reg;

/* Adds to `table` until told to stop: flow f gets 1 packet and f + 1 bytes
 * a round; *rounds counts them. */
static void *churn_adder(void *arg)
{
	uint64_t *rounds = arg;

	while (!__atomic_load_n(&churn_stop, __ATOMIC_RELAXED)) {
		for (size_t f = 0; f < NFLOWS; f++) {
			CHECK(pcpu_flows_add(table, f, 0, 1) == 0);
			CHECK(pcpu_flows_add(table, f, 1, f + 1) == 0);
		}
		++*rounds;
	}
	return NULL;
}

static void *churn_collector(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&churn_stop, __ATOMIC_RELAXED)) {
		CHECK(pcpu_registry_collect(churn_reg) >= 0);
		usleep(1000);
	}
	return NULL;
}

/* The reader process: reads flow_traffic (its words never decrease, and
 * packets x (f + 1) = bytes at every flow whose two words it read
 * between the same two flushes -- not checked: a flush may land between
 * them) and the churning table churn_K, whose last word is K or 0 (made,
 * not yet written): never another K. Until `stop` exists. */
static int churn_reader(const char *path, const char *stop)
{
	pcpu_reader_t *r = pcpu_reader_open(path, NULL);
	uint64_t *prev = calloc(NFLOWS * 2, sizeof *prev), *v = calloc(CHURN_FLOWS, sizeof *v);
	unsigned long reads = 0, churn_reads = 0, stale = 0;

	CHECK(r && prev && v);
	while (access(stop, F_OK) != 0) {
		struct pcpu_reader_flows *ts;
		size_t n;

		CHECK(pcpu_reader_flows_list(r, &ts, &n) == 0);
		for (size_t i = 0; i < n; i++) {
			unsigned long k;

			if (strcmp(ts[i].name, "flow_traffic") == 0) {
				CHECK(pcpu_reader_flows_read(r, &ts[i], 0, NFLOWS, v) == 0);
				for (size_t w = 0; w < NFLOWS * 2; w++) {
					if (v[w] < prev[w]) {
						fprintf(stderr, "churn reader: word %zu went from %llu to %llu\n",
							w, (unsigned long long)prev[w], (unsigned long long)v[w]);
						return 1;
					}
					prev[w] = v[w];
				}
				reads++;
			} else if (sscanf(ts[i].name, "churn_%lu", &k) == 1) {
				if (pcpu_reader_flows_read(r, &ts[i], 0, CHURN_FLOWS, v) != 0) {
					CHECK(errno == ESTALE);
					stale++;
					continue;
				}
				if (v[CHURN_FLOWS - 1] != k && v[CHURN_FLOWS - 1] != 0) {
					fprintf(stderr, "churn reader: table churn_%lu read %llu: another table's\n",
						k, (unsigned long long)v[CHURN_FLOWS - 1]);
					return 1;
				}
				churn_reads++;
			}
		}
		pcpu_reader_flows_free(ts, n);
	}
	printf("churn reader: %lu reads of flow_traffic, %lu of a churning table, %lu stale\n", reads,
	       churn_reads, stale);
	pcpu_reader_close(r);
	free(prev);
	free(v);
	return 0;
}

static int churn(double seconds)
{
	char dir[] = "/tmp/pcpu-flowchurn.XXXXXX", stop[600], cmd[700];
	struct pcpu_segment_options o;
	pcpu_segment_t *seg;
	pthread_t t[NTHREADS], col;
	uint64_t rounds[NTHREADS] = { 0 }, m = 0;
	struct timespec t0, now;
	unsigned long k = 0;
	pid_t rd;
	int st;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(stop, sizeof stop, "%s/stop", dir);
	memset(&o, 0, sizeof o);
	o.dir = dir;
	CHECK((churn_reg = pcpu_registry_create()) != NULL);
	CHECK((seg = pcpu_segment_publish(churn_reg, "flowchurn", &o)) != NULL);
	CHECK((table = pcpu_segment_flows_create(seg, "flow_traffic", "Per-flow traffic.", NFLOWS, 2,
						 counters, NULL)) != NULL);
	snprintf(cmd, sizeof cmd, "%s", pcpu_segment_path(seg)); /* a fork() child's is NULL */
	rd = fork();
	CHECK(rd >= 0);
	if (rd == 0) {
		execl(self, self, "churn-reader", cmd, stop, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < NTHREADS; i++)
		CHECK(pthread_create(&t[i], NULL, churn_adder, &rounds[i]) == 0);
	CHECK(pthread_create(&col, NULL, churn_collector, NULL) == 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		/* A table made, its last word written K, destroyed: the next
		 * one reuses its pages. */
		char name[32];
		pcpu_flows_t *c;

		snprintf(name, sizeof name, "churn_%lu", ++k);
		c = pcpu_segment_flows_create(seg, name, NULL, CHURN_FLOWS, 1, counters, NULL);
		CHECK(c != NULL);
		CHECK(pcpu_flows_add(c, CHURN_FLOWS - 1, 0, k) == 0);
		CHECK(pcpu_flows_flush(c) == 0);
		usleep(200);
		pcpu_flows_destroy(c);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	__atomic_store_n(&churn_stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NTHREADS; i++) {
		CHECK(pthread_join(t[i], NULL) == 0);
		m += rounds[i];
	}
	CHECK(pthread_join(col, NULL) == 0);
	CHECK(pcpu_registry_collect(churn_reg) >= 0);
	CHECK(close(open(stop, O_CREAT | O_WRONLY, 0600)) == 0);
	CHECK(waitpid(rd, &st, 0) == rd);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 1;
	/* After the last collection, exact from outside. */
	CHECK(run_reader(pcpu_segment_path(seg), "flow_traffic", m, 0) == 0);
	printf("test_segment_flows churn: %lu tables made and destroyed, %llu rounds of adds, exact "
	       "after the last collection\n",
	       k, (unsigned long long)m);
	pcpu_flows_destroy(table);
	pcpu_registry_destroy(churn_reg);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
	return 0;
}

/* ---- the full file system ------------------------------------------------------ */

static int full_application(const char *dir)
{
	struct pcpu_segment_options o;
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	pcpu_flows_t *big;
	uint64_t m = NTHREADS * ROUNDS;

	memset(&o, 0, sizeof o);
	o.dir = dir;
	CHECK((reg = pcpu_registry_create()) != NULL);
	seg = pcpu_segment_publish(reg, "flowfull", &o);
	if (!seg) {
		fprintf(stderr, "publish: %s\n", pcpu_segment_error());
		return 1;
	}
	/* Made while there is room: all its pages allocated now. */
	table = pcpu_segment_flows_create(seg, "flow_traffic", "Per-flow traffic.", NFLOWS, 2,
					  counters, NULL);
	CHECK(table != NULL);
	fill(dir);
	/* No room for another: refused, counted, nothing killed. */
	errno = 0;
	big = pcpu_segment_flows_create(seg, "flow_big", NULL, 100000, 2, counters, NULL);
	CHECK(big == NULL && errno == ENOSPC);
	CHECK(pcpu_segment_nospace(seg) >= 1);
	/* The table made before counts exactly: every word written (every
	 * flow), through drains, flushes and direct adds, on a full tmpfs. */
	add_from_threads();
	CHECK(pcpu_registry_collect(reg) >= 0);
	CHECK(read_table(pcpu_segment_path(seg), "flow_traffic", m, 0) == 0);
	pcpu_flows_destroy(table);
	pcpu_registry_destroy(reg);
	return 0;
}

static int full(const char *how)
{
	char dir[] = "/tmp/pcpu-flowfull.XXXXXX", why[256] = "", cmd[600];
	/* Room for the segment's directory and chunk pages, and the table
	 * (80 KB), not for the 1.6 MB one. */
	size_t size = (size_t)4096 * (2 * pcpu_nslots() * 4 + 64) + 128 * 1024;
	int pfd[2], st;
	ssize_t n;
	pid_t c;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(pipe(pfd) == 0);
	c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		close(pfd[0]);
		if (small_tmpfs(how, dir, size, why, sizeof why) != 0) {
			if (write(pfd[1], why, strlen(why)) < 0)
				_exit(3);
			_exit(2);
		}
		close(pfd[1]);
		st = full_application(dir);
		fflush(stdout);
		_exit(st);
	}
	close(pfd[1]);
	n = read(pfd[0], why, sizeof why - 1);
	why[n > 0 ? n : 0] = '\0';
	close(pfd[0]);
	CHECK(waitpid(c, &st, 0) == c);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "test_segment_flows full (%s): killed by %s\n", how,
			strsignal(WTERMSIG(st)));
		return 1;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 2) {
		printf("test_segment_flows full: cannot use %s here: %s\n", how, why);
		return 2;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		printf("test_segment_flows full (%s): a table refused on a full tmpfs, one made "
		       "before exact\n", how);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc >= 5 && strcmp(argv[1], "read") == 0)
		return read_table(argv[2], argv[3], strtoull(argv[4], NULL, 10),
				  argc > 5 && strcmp(argv[5], "below") == 0);
	if (argc >= 4 && strcmp(argv[1], "churn-reader") == 0)
		return churn_reader(argv[2], argv[3]);
	if (argc >= 2 && strcmp(argv[1], "churn") == 0)
		return churn(argc > 2 ? atof(argv[2]) : 2.0);
	if (argc >= 2 && strcmp(argv[1], "full") == 0) {
		int rc = full(argc > 2 ? argv[2] : "mount");

		if (rc == 2 && argc <= 2)
			rc = full("userns");
		/* Neither could be mounted here: nothing to check (77: skipped). */
		return rc == 2 ? 77 : rc;
	}
	return end_to_end();
}
