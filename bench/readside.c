/* SPDX-License-Identifier: MIT */
/*
 * Section "read": what reading costs, and what memory counters take.
 *
 *  - pcpu_counter_fetch() of one counter: ns per call (two loads per slot);
 *  - pcpu_counter_fetch_array() snapshots of 10^4, 10^5, 10^6 counters, in
 *    ms, next to the same counters read by one pcpu_counter_fetch() each;
 *  - resident memory per counter for 10^6 counters written by 1 or 2
 *    threads, CPU-indexed vs mm_cid-indexed zone, from /proc/self/status
 *    (VmRSS) and per slot from mincore(), next to the address space the zone
 *    reserves (VmSize). The writers are not pinned: which slots a thread
 *    touches as the scheduler moves it is exactly what differs between the
 *    two indexes.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Adders that write every counter of an array, `passes` times, all running
 * at once (a barrier starts them together). */
struct rs_writer {
	pcpu_counter_t arr;
	size_t n;
	unsigned passes;
	pthread_barrier_t *start;
};

static void *rs_writer_main(void *arg)
{
	struct rs_writer *wr = arg;
	unsigned p;
	size_t i;

	(void)bench_rseq_area();
	pthread_barrier_wait(wr->start);
	for (p = 0; p < wr->passes; p++) {
		for (i = 0; i < wr->n; i++)
			pcpu_counter_add(pcpu_counter_at(wr->arr, i), 1);
		/* A short sleep between passes: the thread wakes wherever the
		 * scheduler puts it, as a real thread blocking on I/O would. */
		bench_sleep_ns(1000000);
	}
	return NULL;
}

static void rs_write_all(pcpu_counter_t arr, size_t n, unsigned nthreads, unsigned passes)
{
	pthread_t tid[BENCH_MAX_THREADS];
	struct rs_writer wr;
	pthread_barrier_t start;
	unsigned i;

	pthread_barrier_init(&start, NULL, nthreads);
	wr.arr = arr;
	wr.n = n;
	wr.passes = passes;
	wr.start = &start;
	for (i = 0; i < nthreads; i++)
		tid[i] = bench_thread_start(rs_writer_main, &wr, -1);
	for (i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&start);
}

/* Bytes of [p, p + len) that are resident. */
static size_t rs_resident(const void *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), npages, i, res = 0;
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
	unsigned char *vec;

	npages = ((uintptr_t)p + len - start + page - 1) / page;
	vec = malloc(npages);
	if (!vec || mincore((void *)start, npages * page, vec) != 0) {
		free(vec);
		return 0;
	}
	for (i = 0; i < npages; i++)
		res += (vec[i] & 1) ? page : 0;
	free(vec);
	return res;
}

/* Lists the slots of `arr` (n counters) that have resident pages, "0,1", or
 * with `mib` set, with how much of each is resident: "0: 15.3, 1: 0.7 MiB". */
static unsigned rs_resident_slots(pcpu_counter_t arr, size_t n, char *list, size_t len, int mib)
{
	unsigned s, count = 0;

	list[0] = 0;
	for (s = 0; s < pcpu_nslots(); s++) {
		size_t res = rs_resident(pcpu_slot_ptr(arr, s), n * sizeof(struct pcpu_counter));

		if (res == 0)
			continue;
		count++;
		if (mib)
			snprintf(list + strlen(list), len - strlen(list), "%s%u: %.1f",
				 count > 1 ? ", " : "", s, (double)res / (1 << 20));
		else
			snprintf(list + strlen(list), len - strlen(list), "%s%u",
				 count > 1 ? "," : "", s);
	}
	if (mib && count)
		snprintf(list + strlen(list), len - strlen(list), " MiB");
	return count;
}

static int rs_all_equal(const uint64_t *out, size_t n, uint64_t want)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (out[i] != want)
			return 0;
	return 1;
}

/* The same traffic as a snapshot of n counters over all slots, on plain
 * arrays: the floor any snapshot code could reach on this machine. */
static void rs_memory_floor(size_t n, double *v, FILE *csv, struct tbl *tb)
{
	const unsigned nr = bench_opt.rounds, nslots = pcpu_nslots();
	size_t words = n * 2 * nslots, i;
	int64_t *src = bench_xmalloc(words * sizeof(*src));
	uint64_t *dst = bench_xmalloc(n * sizeof(*dst));
	struct bench_stat s;
	char buf[96];
	unsigned r, k;

	for (i = 0; i < words; i++)
		src[i] = 1;
	for (r = 0; r < nr; r++) {
		uint64_t t0 = bench_now_ns();

		for (i = 0; i < n; i++)
			dst[i] = 0;
		for (k = 0; k < nslots; k++) {
			const int64_t *p = src + (size_t)k * 2 * n;

			for (i = 0; i < n; i++)
				dst[i] += (uint64_t)(p[2 * i] + p[2 * i + 1]);
		}
		__asm__ volatile("" : : "r"(dst) : "memory");
		v[r] = (double)(bench_now_ns() - t0) / 1e6;
	}
	s = bench_stat_of(v, nr);
	tbl_cell(tb, "%zu", n);
	tbl_cell(tb, "memory floor (plain arrays)");
	tbl_cell(tb, "%s", bench_fmt_stat(buf, sizeof(buf), s));
	tbl_cell(tb, "—");
	tbl_cell(tb, "%.2f", s.med * 1e6 / (double)n);
	tbl_cell(tb, "%s", dst[n - 1] == 2 * nslots ? "yes" : "**NO**");
	if (csv)
		fprintf(csv, "memory_floor,plain,%zu,ms,%.4f,%.4f,%.4f,%d,\"\"\n", n, s.med, s.min,
			s.max, dst[n - 1] == 2 * nslots);
	free(src);
	free(dst);
}

static const char *index_name(pcpu_zone_t *z)
{
	return pcpu_zone_index(z) == PCPU_INDEX_CPU ? "CPU" : "mm_cid";
}

void bench_readside(void)
{
	const unsigned nr = bench_opt.rounds;
	static const size_t sizes[] = { 10000, 100000, 1000000 };
	pcpu_zone_t *zones[2];
	enum pcpu_index want[2] = { PCPU_INDEX_CPU, PCPU_INDEX_MM_CID };
	double *v = bench_xmalloc(nr * sizeof(double)), *v2 = bench_xmalloc(nr * sizeof(double));
	uint64_t *out = bench_xmalloc(1000000 * sizeof(uint64_t));
	enum pcpu_index def_index;
	pcpu_zone_t *zdef;
	unsigned zi, si, r, t;
	struct tbl tb;
	FILE *csv;
	char buf[96], b2[96];

	zdef = pcpu_zone_create(PCPU_INDEX_DEFAULT);
	if (!zdef)
		bench_die("pcpu_zone_create failed");
	def_index = pcpu_zone_index(zdef);
	pcpu_zone_destroy(zdef);

	printf("## 4. Read side and memory\n\n");
	csv = bench_csv_open("readside.csv",
			     "operation,zone,counters,unit,median,min,max,exact,resident_slots");

	/* ---- fetch of one counter ---- */
	tbl_init(&tb, 4);
	tbl_headers(&tb, "operation", "zone", "ns per call", "exact", NULL);
	for (zi = 0; zi < 2; zi++) {
		pcpu_counter_t c;
		const uint64_t calls = 200000;
		uint64_t sum = 0;
		struct bench_stat s;
		int exact;

		zones[zi] = pcpu_zone_create(want[zi]);
		if (!zones[zi] || !(c = pcpu_counter_alloc_in(zones[zi], 1)))
			bench_die("pcpu allocation failed");
		pcpu_counter_add(c, 7);
		for (r = 0; r < nr; r++) {
			uint64_t t0 = bench_ticks(), i;

			for (i = 0; i < calls; i++)
				sum += pcpu_counter_fetch(c);
			v[r] = (double)(bench_ticks() - t0) / bench_tsc_ghz / (double)calls;
		}
		s = bench_stat_of(v, nr);
		exact = sum == 7 * calls * nr;

		tbl_cell(&tb, "pcpu_counter_fetch, 1 counter");
		tbl_cell(&tb, "%s (%u slots)", index_name(zones[zi]), pcpu_nslots());
		tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), s));
		tbl_cell(&tb, "%s", exact ? "yes" : "**NO**");
		if (csv)
			fprintf(csv, "fetch,%s,1,ns,%.3f,%.3f,%.3f,%d,\"\"\n", index_name(zones[zi]), s.med,
				s.min, s.max, exact);
		pcpu_counter_free(c);
	}
	tbl_print(&tb);

	/* ---- snapshots ---- */
	printf("Snapshots: counters written first by 2 unpinned threads running at once; "
	       "\"slots\" lists the slots with resident pages. ms, median (min–max) of %u rounds.\n\n",
	       nr);
	tbl_init(&tb, 6);
	tbl_headers(&tb, "counters", "zone (slots resident)", "pcpu_counter_fetch_array, ms",
		    "n × pcpu_counter_fetch, ms", "ns per counter (array)", "exact", NULL);
	for (si = 0; si < 3 && sizes[si] <= bench_opt.max_snapshot; si++) {
		for (zi = 0; zi < 2; zi++) {
			size_t n = sizes[si], i;
			pcpu_counter_t arr = pcpu_counter_alloc_in(zones[zi], n);
			struct bench_stat sa, sf;
			char slots[64];
			int exact = 1;

			if (!arr)
				bench_die("pcpu_counter_alloc_in(%zu) failed", n);
			rs_write_all(arr, n, 2, 1);
			rs_resident_slots(arr, n, slots, sizeof(slots), 0);
			for (r = 0; r < nr; r++) {
				uint64_t t0;

				/* Alternate the two methods inside each round. */
				memset(out, 0, n * sizeof(*out));
				t0 = bench_now_ns();
				pcpu_counter_fetch_array(arr, n, out);
				v[r] = (double)(bench_now_ns() - t0) / 1e6;
				exact &= rs_all_equal(out, n, 2);
				memset(out, 0, n * sizeof(*out));
				t0 = bench_now_ns();
				for (i = 0; i < n; i++)
					out[i] = pcpu_counter_fetch(pcpu_counter_at(arr, i));
				v2[r] = (double)(bench_now_ns() - t0) / 1e6;
				exact &= rs_all_equal(out, n, 2);
			}
			sa = bench_stat_of(v, nr);
			sf = bench_stat_of(v2, nr);
			tbl_cell(&tb, "%zu", n);
			tbl_cell(&tb, "%s (%s)", index_name(zones[zi]), slots);
			tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), sa));
			tbl_cell(&tb, "%s", bench_fmt_stat(b2, sizeof(b2), sf));
			tbl_cell(&tb, "%.2f", sa.med * 1e6 / (double)n);
			tbl_cell(&tb, "%s", exact ? "yes" : "**NO**");
			if (csv) {
				fprintf(csv, "fetch_array,%s,%zu,ms,%.4f,%.4f,%.4f,%d,\"%s\"\n",
					index_name(zones[zi]), n, sa.med, sa.min, sa.max, exact, slots);
				fprintf(csv, "fetch_each,%s,%zu,ms,%.4f,%.4f,%.4f,%d,\"%s\"\n",
					index_name(zones[zi]), n, sf.med, sf.min, sf.max, exact, slots);
			}
			if (n == 1000000 && pcpu_zone_index(zones[zi]) == def_index) {
				bench_targets.have_snapshot = 1;
				bench_targets.snapshot_1e6_ms = sa.med;
				bench_targets.snapshot_slots = pcpu_nslots();
			}
			pcpu_counter_free(arr);
		}
		rs_memory_floor(sizes[si], v, csv, &tb);
	}
	tbl_print(&tb);
	printf("\"memory floor\": summing a plain array of the bytes a snapshot reads "
	       "(16 B × slots per counter) into an 8 B result per counter, i.e. what the "
	       "memory system allows.\n\n");
	for (zi = 0; zi < 2; zi++)
		pcpu_zone_destroy(zones[zi]);
	if (csv)
		fclose(csv);

	/* ---- memory ---- */
	printf("Memory for 10^6 counters (%zu bytes per slot each), written %u times by 1 or 2 "
	       "unpinned threads running at once (1 ms sleep between passes); "
	       "fresh zone per row.\n\n", sizeof(struct pcpu_counter), bench_opt.mem_passes);
	csv = bench_csv_open("memory.csv",
			     "zone,threads,counters,rss_bytes_per_counter,resident_slots,"
			     "slot_resident_bytes_per_counter,virt_reserved_bytes_per_counter,exact");
	tbl_init(&tb, 7);
	tbl_headers(&tb, "zone", "threads", "resident B/counter (VmRSS)", "resident per slot (mincore)",
		    "B/counter (mincore, all slots)", "address space reserved, B/counter (VmSize)", "exact", NULL);
	for (zi = 0; zi < 2; zi++)
		for (t = 1; t <= 2; t++) {
			const size_t n = 1000000;
			long rss0, rss1, vm0, vm1;
			pcpu_zone_t *z;
			pcpu_counter_t arr;
			char slots[64];
			size_t res = 0;
			unsigned s;
			int exact;

			rss0 = bench_proc_status_kb("VmRSS");
			vm0 = bench_proc_status_kb("VmSize");
			z = pcpu_zone_create(want[zi]);
			if (!z || !(arr = pcpu_counter_alloc_in(z, n)))
				bench_die("pcpu allocation failed");
			vm1 = bench_proc_status_kb("VmSize");
			rs_write_all(arr, n, t, bench_opt.mem_passes);
			rss1 = bench_proc_status_kb("VmRSS");
			rs_resident_slots(arr, n, slots, sizeof(slots), 1);
			for (s = 0; s < pcpu_nslots(); s++)
				res += rs_resident(pcpu_slot_ptr(arr, s), n * sizeof(struct pcpu_counter));
			pcpu_counter_fetch_array(arr, n, out);
			exact = rs_all_equal(out, n, (uint64_t)t * bench_opt.mem_passes);

			tbl_cell(&tb, "%s", index_name(z));
			tbl_cell(&tb, "%u", t);
			tbl_cell(&tb, "%.1f", (double)(rss1 - rss0) * 1024 / (double)n);
			tbl_cell(&tb, "%s", slots);
			tbl_cell(&tb, "%.1f", (double)res / (double)n);
			tbl_cell(&tb, "%.1f (%.0f MiB)", (double)(vm1 - vm0) * 1024 / (double)n,
				 (double)(vm1 - vm0) / 1024);
			tbl_cell(&tb, "%s", exact ? "yes" : "**NO**");
			if (csv)
				fprintf(csv, "%s,%u,%zu,%.2f,\"%s\",%.2f,%.2f,%d\n", index_name(z), t, n,
					(double)(rss1 - rss0) * 1024 / (double)n, slots,
					(double)res / (double)n, (double)(vm1 - vm0) * 1024 / (double)n,
					exact);
			pcpu_counter_free(arr);
			pcpu_zone_destroy(z);
		}
	tbl_print(&tb);
	printf("A counter is %zu bytes per slot (an rseq word and a fallback word); the zone "
	       "reserves address space for all %u possible slots with MAP_NORESERVE.\n\n",
	       sizeof(struct pcpu_counter), pcpu_nslots());
	if (csv)
		fclose(csv);
	free(v);
	free(v2);
	free(out);
}
