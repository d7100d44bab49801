/* SPDX-License-Identifier: MIT */
/*
 * Section "read": what reading costs, and what memory counters take.
 *
 *  - pcpu_counter_fetch() of one counter: ns per call;
 *  - pcpu_counter_fetch_array() snapshots of 10^4, 10^5, 10^6 counters, in
 *    ms, next to the same counters read by one pcpu_counter_fetch() each and
 *    to a "memory floor": the same bytes (8 B per counter for each slot a
 *    fetch walks, the layout of Core v2) summed from plain arrays, measured
 *    in the same rounds. A fetch walks the CPU slots and the owned slots
 *    this process ever claimed (the incr and dataplane sections claim some),
 *    not every one of pcpu_nslots(): rs_walked_slots() finds which;
 *  - resident memory per counter: 10^6 counters allocated one by one with
 *    pcpu_counter_alloc() and written by 2 threads pinned to 2 CPUs, measured in a
 *    fresh process per configuration (this program run again with
 *    --memory-child), as the growth of the whole process's resident set
 *    (smaps_rollup Rss), so the allocator's bookkeeping counts; with the
 *    machine's slot count and with PCPU_NSLOTS=64 (64 possible slots, 2
 *    active), for each slot index; next to plain 8 B arrays, one per writer.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Adders that write every counter of an array (or of a list of handles),
 * `passes` times, all running at once (a barrier starts them together). */
struct rs_writer {
	pcpu_counter_t arr;     /* an array of n counters, or NULL: */
	pcpu_counter_t *list;   /* n handles */
	size_t n;
	unsigned passes;
	pthread_barrier_t *ready, *start, *done; /* ready/done may be NULL */
};

static void *rs_writer_main(void *arg)
{
	struct rs_writer *wr = arg;
	unsigned p;
	size_t i;

	(void)bench_rseq_area();
	if (wr->ready)
		pthread_barrier_wait(wr->ready);
	pthread_barrier_wait(wr->start);
	for (p = 0; p < wr->passes; p++) {
		if (wr->list)
			for (i = 0; i < wr->n; i++)
				pcpu_counter_add(wr->list[i], 1);
		else
			for (i = 0; i < wr->n; i++)
				pcpu_counter_add(pcpu_counter_at(wr->arr, i), 1);
		/* A short sleep between passes: the thread wakes wherever the
		 * scheduler puts it, as a real thread blocking on I/O would. */
		bench_sleep_ns(1000000);
	}
	if (wr->done)
		pthread_barrier_wait(wr->done);
	return NULL;
}

static void rs_write_all(pcpu_counter_t arr, size_t n, unsigned nthreads, unsigned passes)
{
	pthread_t tid[BENCH_MAX_THREADS];
	struct rs_writer wr;
	pthread_barrier_t start;
	unsigned i;

	memset(&wr, 0, sizeof(wr));
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

/* Bytes of [p, p + len) that are resident (0 where nothing is mapped). */
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

/* Lists the slots s < n with in[s] set, "0,1", "0-9,12" (three or more
 * consecutive slots as a range). */
static void rs_format_slots(const unsigned char *in, unsigned n, char *list, size_t size)
{
	unsigned s = 0, e;

	list[0] = 0;
	while (s < n) {
		size_t l = strlen(list);

		if (!in[s]) {
			s++;
			continue;
		}
		for (e = s; e + 1 < n && in[e + 1]; e++)
			;
		if (e - s >= 2)
			snprintf(list + l, size - l, "%s%u-%u", l ? "," : "", s, e);
		else if (e > s)
			snprintf(list + l, size - l, "%s%u,%u", l ? "," : "", s, e);
		else
			snprintf(list + l, size - l, "%s%u", l ? "," : "", s);
		s = e + 1;
	}
}

/* Whether [p, p + len) holds a nonzero word in a resident page. mincore()
 * alone is not enough: a page that was only read maps the kernel's shared
 * zero page, which mincore() reports as resident (pcpu_zone_free() reads
 * the ends of a freed object's copies in every slot to clear them, so a
 * later object there would seem resident in every slot). */
static int rs_holds_data(const void *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), npages, i, k;
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1), end = (uintptr_t)p + len;
	unsigned char *vec;
	int found = 0;

	npages = (end - start + page - 1) / page;
	vec = malloc(npages);
	if (!vec || mincore((void *)start, npages * page, vec) != 0) {
		free(vec);
		return 0;
	}
	for (i = 0; i < npages && !found; i++) {
		uintptr_t a = start + i * page, b = a + page;

		if (!(vec[i] & 1))
			continue;
		if (a < (uintptr_t)p)
			a = (uintptr_t)p;
		if (b > end)
			b = end;
		for (k = a; k < b && !found; k += 8)
			found = *(const volatile uint64_t *)k != 0;
	}
	free(vec);
	return found;
}

/* Lists the slots whose copy of [obj, obj + len) holds data (nonzero words),
 * "0,1"; sets has[s] for each. Returns how many. */
static unsigned rs_data_slots(const void *obj, size_t len, unsigned char *has, char *list,
			      size_t size)
{
	unsigned s, count = 0;

	for (s = 0; s < pcpu_nslots(); s++) {
		has[s] = (unsigned char)rs_holds_data(pcpu_slot_ptr(obj, s), len);
		count += has[s];
	}
	rs_format_slots(has, pcpu_nslots(), list, size);
	return count;
}

/* The slots a fetch walks, ascending, into walk[]: a scratch counter gets 1
 * in one slot at a time, and the slot is walked where the fetch then reads
 * 1. Lists them in `list`; returns how many. */
static unsigned rs_walked_slots(unsigned *walk, char *list, size_t size)
{
	pcpu_counter_t c = pcpu_counter_alloc();
	unsigned char *in = bench_xmalloc(pcpu_nslots());
	unsigned s, count = 0;

	if (!c)
		bench_die("pcpu_counter_alloc failed");
	for (s = 0; s < pcpu_nslots(); s++) {
		int64_t *w = pcpu_slot_ptr(c, s);

		*w = 1;
		in[s] = pcpu_counter_fetch(c) == 1;
		if (in[s])
			walk[count++] = s;
		*w = 0;
	}
	pcpu_counter_free(c);
	rs_format_slots(in, pcpu_nslots(), list, size);
	free(in);
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

/* The memory floor of a snapshot: plain arrays holding what a snapshot must
 * read, one 8-byte word per counter for each slot a fetch walks, summed slot
 * by slot into an 8-byte result per counter. As the counters' slots are:
 * the arrays of the slots that hold data are written (1 in every word), the
 * others never (a read maps the kernel's zero page, as it does for the
 * counters' untouched slots). */
struct rs_floor {
	size_t n;
	unsigned nslots;  /* arrays: the slots a fetch walks */
	unsigned written; /* of them, written: the slots that hold data */
	size_t len;       /* bytes of src */
	int64_t *src;     /* nslots arrays of n words */
	uint64_t *dst;
};

static void rs_floor_init(struct rs_floor *f, size_t n, const unsigned *walk, unsigned nwalk,
			  const unsigned char *has_data)
{
	size_t i;
	unsigned k;

	f->n = n;
	f->nslots = nwalk;
	f->written = 0;
	f->len = n * nwalk * sizeof(*f->src);
	f->src = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (f->src == MAP_FAILED)
		bench_die("mmap of %zu bytes failed", f->len);
	f->dst = bench_xmalloc(n * sizeof(*f->dst));
	for (k = 0; k < nwalk; k++) {
		if (!has_data[walk[k]])
			continue;
		f->written++;
		for (i = 0; i < n; i++)
			f->src[(size_t)k * n + i] = 1;
	}
}

static void rs_floor_free(struct rs_floor *f)
{
	munmap(f->src, f->len);
	free(f->dst);
}

static double rs_floor_run(struct rs_floor *f)
{
	uint64_t t0;
	size_t i;
	unsigned k;

	/* As the snapshot's output buffer is before each snapshot (not timed):
	 * the same cache state for the result array on both sides. */
	memset(f->dst, 0xff, f->n * sizeof(*f->dst));
	t0 = bench_thread_cpu_ns();

	memset(f->dst, 0, f->n * sizeof(*f->dst));
	for (k = 0; k < f->nslots; k++) {
		const int64_t *p = f->src + (size_t)k * f->n;

		for (i = 0; i < f->n; i++)
			f->dst[i] += (uint64_t)p[i];
	}
	__asm__ volatile("" : : "r"(f->dst) : "memory");
	return (double)(bench_thread_cpu_ns() - t0) / 1e6;
}

/* ---- memory: one configuration, in a process of its own ------------------------ */

#define MEM_N 1000000
#define MEM_THREADS 2

/* The floor: MEM_THREADS plain arrays of 8-byte words, one per writer (a
 * per-CPU array of 8 B x 2 on this machine), written like the counters.
 * Returns resident bytes per counter. */
struct rs_floor_writer {
	int64_t *arr;
	unsigned passes;
	pthread_barrier_t *start;
};

static void *rs_floor_writer_main(void *arg)
{
	struct rs_floor_writer *fw = arg;
	unsigned p;
	size_t i;

	pthread_barrier_wait(fw->start);
	for (p = 0; p < fw->passes; p++) {
		for (i = 0; i < MEM_N; i++)
			__atomic_store_n(&fw->arr[i], fw->arr[i] + 1, __ATOMIC_RELAXED);
		bench_sleep_ns(1000000);
	}
	return NULL;
}

static double rs_mem_floor(unsigned passes)
{
	struct rs_floor_writer fw[MEM_THREADS];
	pthread_t tid[MEM_THREADS];
	pthread_barrier_t start;
	size_t len = (size_t)MEM_N * 8 * MEM_THREADS;
	long rss0, rss1;
	char *m;
	unsigned i;

	pthread_barrier_init(&start, NULL, MEM_THREADS + 1);
	for (i = 0; i < MEM_THREADS; i++) {
		fw[i].passes = passes;
		fw[i].start = &start;
		tid[i] = bench_thread_start(rs_floor_writer_main, &fw[i], bench_allowed_cpu(i));
	}
	rss0 = bench_rss_bytes();
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		bench_die("mmap of %zu bytes failed", len);
	for (i = 0; i < MEM_THREADS; i++)
		fw[i].arr = (int64_t *)(m + (size_t)i * MEM_N * 8);
	pthread_barrier_wait(&start);
	for (i = 0; i < MEM_THREADS; i++)
		pthread_join(tid[i], NULL);
	rss1 = bench_rss_bytes();
	munmap(m, len);
	pthread_barrier_destroy(&start);
	return (double)(rss1 - rss0) / MEM_N;
}

static void rs_write_fd3(const void *p, size_t len)
{
	const char *c = p;

	while (len > 0) {
		ssize_t w = write(3, c, len);

		if (w <= 0)
			_exit(3);
		c += w;
		len -= (size_t)w;
	}
}

/* pcpu_bench --memory-child: measures one configuration (the environment
 * sets PCPU_NSLOTS and PCPU_INDEX) and writes a struct bench_mem_result to
 * fd 3. A fresh process, so that nothing else moves its resident set. */
void bench_memory_child(void)
{
	static struct bench_mem_result m;
	pcpu_counter_t *h;
	pthread_t tid[MEM_THREADS];
	pthread_barrier_t ready, start, done;
	struct rs_writer wr;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	unsigned passes = bench_opt.mem_passes, s, i;
	unsigned char *in;
	long rss0, rss1;
	uint64_t t0;
	size_t k;

	memset(&m, 0, sizeof(m));
	m.index = bench_process_index();
	m.nslots = pcpu_nslots();
	m.threads = MEM_THREADS;
	m.floor_b = rs_mem_floor(passes);

	/* The handles are the benchmark's memory: resident before the start. */
	h = bench_xmalloc((size_t)MEM_N * sizeof(*h));
	memset(&wr, 0, sizeof(wr));
	pthread_barrier_init(&ready, NULL, MEM_THREADS + 1);
	pthread_barrier_init(&start, NULL, MEM_THREADS + 1);
	pthread_barrier_init(&done, NULL, MEM_THREADS + 1);
	wr.list = h;
	wr.n = MEM_N;
	wr.passes = passes;
	wr.ready = &ready;
	wr.start = &start;
	wr.done = &done;
	/* The writers start (stacks, rseq registration) before the baseline.
	 * Each is pinned to a CPU of its own (while there are CPUs), so both
	 * write at once on different CPUs, whatever else the machine runs:
	 * 2 active slots, with either index. (Unpinned, on a busy machine, the
	 * two may take turns on one CPU and share one slot.) */
	for (i = 0; i < MEM_THREADS; i++)
		tid[i] = bench_thread_start(rs_writer_main, &wr, bench_allowed_cpu(i));
	pthread_barrier_wait(&ready);

	rss0 = bench_rss_bytes();
	t0 = bench_now_ns();
	for (k = 0; k < MEM_N; k++) {
		h[k] = pcpu_counter_alloc();
		if (!h[k]) {
			snprintf(m.err, sizeof(m.err), "pcpu_counter_alloc() failed at counter %zu", k);
			rs_write_fd3(&m, sizeof(m));
			_exit(0);
		}
		if ((uintptr_t)h[k] < lo)
			lo = (uintptr_t)h[k];
		if ((uintptr_t)h[k] > hi)
			hi = (uintptr_t)h[k];
	}
	m.alloc_ns = (double)(bench_now_ns() - t0) / MEM_N;
	pthread_barrier_wait(&start);
	pthread_barrier_wait(&done); /* every pass done; writers still alive */
	rss1 = bench_rss_bytes();
	m.rss_b = (double)(rss1 - rss0) / MEM_N;
	m.span_b = (double)(hi - lo + sizeof(struct pcpu_counter)) / MEM_N;
	in = bench_xmalloc(m.nslots);
	memset(in, 0, m.nslots);
	for (s = 0; s < m.nslots; s++) {
		size_t len = hi - lo + sizeof(struct pcpu_counter);
		size_t rs = rs_resident(pcpu_slot_ptr((void *)lo, s), len);

		m.slot_b += (double)rs;
		/* Core v2 (8-byte counters): slot s's mirror words are nslots
		 * regions further. The older layout has no mirror region. */
		if (sizeof(struct pcpu_counter) == 8)
			m.mirror_b += (double)rs_resident(pcpu_slot_ptr((void *)lo, m.nslots + s), len);
		else
			m.mirror_b = NAN;
		if (rs) {
			m.slots_resident++;
			in[s] = 1;
		}
	}
	rs_format_slots(in, m.nslots, m.slots, sizeof(m.slots));
	free(in);
	m.slot_b /= MEM_N;
	m.mirror_b /= MEM_N;
	for (i = 0; i < MEM_THREADS; i++)
		pthread_join(tid[i], NULL);
	m.exact = 1;
	for (k = 0; k < MEM_N; k++)
		if (pcpu_counter_fetch(h[k]) != (uint64_t)MEM_THREADS * passes)
			m.exact = 0;
	m.ok = 1;
	rs_write_fd3(&m, sizeof(m));
}

/* Runs the memory test in a child process with PCPU_NSLOTS=nslots (0: the
 * machine's) and PCPU_INDEX=index. */
static int rs_memory_config(unsigned nslots, int index, struct bench_mem_result *m)
{
	char passes[16], e_nslots[32], e_index[32];
	char *args[] = { "--memory-child", "--mem-passes", passes, NULL };
	const char *env[3] = { e_index, e_nslots, NULL };
	long got;

	snprintf(passes, sizeof(passes), "%u", bench_opt.mem_passes);
	snprintf(e_index, sizeof(e_index), "PCPU_INDEX=%s", bench_index_name(index));
	if (nslots)
		snprintf(e_nslots, sizeof(e_nslots), "PCPU_NSLOTS=%u", nslots);
	else
		snprintf(e_nslots, sizeof(e_nslots), "PCPU_NSLOTS");
	memset(m, 0, sizeof(*m));
	got = bench_run_self(args, env, m, sizeof(*m));
	if (got != (long)sizeof(*m)) {
		memset(m, 0, sizeof(*m));
		snprintf(m->err, sizeof(m->err), "the child process failed (%s %s)", e_index, e_nslots);
		return -1;
	}
	return m->ok ? 0 : -1;
}

/* Rounds of the snapshot table, at least: the three rows take ~25 ms a round
 * at 10^6 counters, and a few rounds are not enough for a median of memory-
 * bound runs on a machine shared with other work. */
#define RS_SNAPSHOT_MIN_ROUNDS 15

/* One snapshot round's three measurements, ms of the thread's CPU time. */
static void rs_snapshot_round(pcpu_counter_t arr, size_t n, uint64_t *out, struct rs_floor *fl,
			      unsigned lead, double *fa, double *fe, double *fm, int *exact)
{
	unsigned j;

	for (j = 0; j < 3; j++) {
		uint64_t t0;
		size_t k;

		switch ((lead + j) % 3) {
		case 0:
			memset(out, 0, n * sizeof(*out));
			t0 = bench_thread_cpu_ns();
			pcpu_counter_fetch_array(arr, n, out);
			*fa = (double)(bench_thread_cpu_ns() - t0) / 1e6;
			*exact &= rs_all_equal(out, n, 2);
			break;
		case 1:
			memset(out, 0, n * sizeof(*out));
			t0 = bench_thread_cpu_ns();
			for (k = 0; k < n; k++)
				out[k] = pcpu_counter_fetch(pcpu_counter_at(arr, k));
			*fe = (double)(bench_thread_cpu_ns() - t0) / 1e6;
			*exact &= rs_all_equal(out, n, 2);
			break;
		default:
			*fm = rs_floor_run(fl);
			*exact &= fl->dst[n - 1] == fl->written;
		}
	}
}

/* ---- fetch of one counter ------------------------------------------------------- */

/* Sums the n words at w[0..n-1], `calls` times; ns per sum into *ns, and
 * the sums' total into *sum. The same shape as a fetch's walk (a table of
 * where the words are, a load and an add each), without the library. */
static void rs_sum_words(int64_t *const *w, unsigned n, uint64_t calls, double *ns, uint64_t *sum)
{
	uint64_t t0 = bench_thread_cpu_ns(), k, total = 0;
	unsigned i;

	for (k = 0; k < calls; k++) {
		uint64_t s = 0;

		for (i = 0; i < n; i++)
			s += (uint64_t)__atomic_load_n(w[i], __ATOMIC_RELAXED);
		total += s;
		__asm__ volatile("" : : "r"(total));
	}
	*ns = (double)(bench_thread_cpu_ns() - t0) / (double)calls;
	*sum += total;
}

/* The calls' cost in the thread's CPU time, not wall time: a row timed by
 * the TSC charged it whatever preempted the thread (a disturbed run printed
 * 389 ns for a fetch that costs 15-18 ns of CPU time). */
static uint64_t rs_fetch_calls(pcpu_counter_t c, uint64_t calls, double *ns)
{
	uint64_t t0 = bench_thread_cpu_ns(), k, sum = 0;

	for (k = 0; k < calls; k++)
		sum += pcpu_counter_fetch(c);
	*ns = (double)(bench_thread_cpu_ns() - t0) / (double)calls;
	return sum;
}

/* What reading one counter costs, and why. A fetch loads the counter's
 * word in each walked slot; the slots are PCPU_SLOT_STRIDE apart, so the
 * words share their page offset, hence their L1 set (an L1 is indexed by
 * address bits below 4 KiB): past the L1's ways (8 or 12) a repeated fetch
 * can miss in L1 -- the third row against the fourth says what that costs
 * (1.1-1.2x on a 16-core Xeon, bench/16-cores.md), the first two against
 * the third what the library's loop adds. Rows, interleaved in every round:
 * the fetch of a counter written on one slot (the others read the kernel's
 * zero page: one physical line); of a counter written in every walked slot
 * (every word its own line); and plain loops summing as many words
 * PCPU_SLOT_STRIDE apart at the counter's page offset (the layout alone),
 * and in consecutive cache lines of one array (the same loads with no two
 * in one L1 set). */
static void rs_fetch_one(unsigned nwalk, const unsigned *walk, const char *iname, FILE *csv,
			 double *v)
{
	enum { ONE, EVERY, STRIDED, SPREAD, NROWS };
	static const char *const what[NROWS] = {
		"pcpu_counter_fetch, 1 counter written on 1 slot",
		"pcpu_counter_fetch, 1 counter written in every walked slot",
		"plain loop: as many words PCPU_SLOT_STRIDE apart (the slots' layout)",
		"plain loop: as many words in consecutive cache lines",
	};
	static const char *const key[NROWS] = { "fetch", "fetch_every_slot", "words_strided",
						"words_spread" };
	const unsigned nr = bench_opt.rounds;
	const uint64_t calls = 200000;
	pcpu_counter_t one = pcpu_counter_alloc(), every = pcpu_counter_alloc();
	size_t off = (uintptr_t)every & 4095, len = (size_t)nwalk * PCPU_SLOT_STRIDE;
	char *strided = mmap(NULL, len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	int64_t *spread = bench_xmalloc((size_t)nwalk * 64 + 64);
	int64_t **ws = bench_xmalloc(nwalk * sizeof(*ws)), **wp = bench_xmalloc(nwalk * sizeof(*wp));
	double *rows = bench_xmalloc((size_t)NROWS * nr * sizeof(double));
	uint64_t sum[NROWS] = { 0 }, want[NROWS];
	struct bench_stat st[NROWS];
	char buf[96];
	unsigned i, r, k;
	struct tbl tb;

	if (!one || !every)
		bench_die("pcpu_counter_alloc failed");
	if (strided == MAP_FAILED)
		bench_die("mmap of %zu bytes failed", len);
	pcpu_counter_add(one, 7);
	for (i = 0; i < nwalk; i++) {
		*(int64_t *)pcpu_slot_ptr(every, walk[i]) = 1;
		ws[i] = (int64_t *)(strided + (size_t)i * PCPU_SLOT_STRIDE + off);
		*ws[i] = 1;
		wp[i] = spread + (size_t)i * 8;
		*wp[i] = 1;
	}
	want[ONE] = 7;
	want[EVERY] = want[STRIDED] = want[SPREAD] = nwalk;
	for (r = 0; r < nr; r++)
		for (k = 0; k < NROWS; k++) {
			unsigned row = (k + r) % NROWS; /* a different one first each round */
			double *out = &rows[(size_t)row * nr + r];

			if (row == ONE)
				sum[ONE] += rs_fetch_calls(one, calls, out);
			else if (row == EVERY)
				sum[EVERY] += rs_fetch_calls(every, calls, out);
			else
				rs_sum_words(row == STRIDED ? ws : wp, nwalk, calls, out, &sum[row]);
		}
	tbl_init(&tb, 5);
	tbl_headers(&tb, "operation", "index", "CPU ns per call", "/ consecutive lines", "exact", NULL);
	for (k = 0; k < NROWS; k++) {
		int exact = sum[k] == want[k] * calls * nr;

		for (r = 0; r < nr; r++)
			v[r] = rows[(size_t)k * nr + r] / rows[(size_t)SPREAD * nr + r];
		st[k] = bench_stat_of(&rows[(size_t)k * nr], nr);
		tbl_cell(&tb, "%s", what[k]);
		tbl_cell(&tb, "%s (%u of %u slots walked)", iname, nwalk, pcpu_nslots());
		tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), st[k]));
		tbl_cell(&tb, "%.2f×", bench_median(v, nr));
		tbl_cell(&tb, "%s", exact ? "yes" : "**NO**");
		if (csv)
			fprintf(csv, "%s,%s,1,ns,%.3f,%.3f,%.3f,%d,\"\"\n", key[k], iname, st[k].med,
				st[k].min, st[k].max, exact);
	}
	tbl_print(&tb);
	printf("One counter read %llu times a row, the thread's CPU time per read, median "
	       "(min–max) of %u rounds, the rows "
	       "interleaved; \"/ consecutive lines\": the median of the rounds' ratios to the last "
	       "row. The %u words of a counter written everywhere share a page offset (slots are "
	       "PCPU_SLOT_STRIDE apart), hence an L1 set: the third row is that layout with no "
	       "library code, the last the same loads spread over %u L1 sets.\n\n",
	       (unsigned long long)calls, nr, nwalk, nwalk);
	pcpu_counter_free(one);
	pcpu_counter_free(every);
	munmap(strided, len);
	free(spread);
	free(ws);
	free(wp);
	free(rows);
}

void bench_readside(void)
{
	const unsigned nr = bench_opt.rounds;
	const unsigned nsr = nr > RS_SNAPSHOT_MIN_ROUNDS ? nr : RS_SNAPSHOT_MIN_ROUNDS;
	static const size_t sizes[] = { 10000, 100000, 1000000 };
	double *v = bench_xmalloc(nsr * sizeof(double)), *v2 = bench_xmalloc(nsr * sizeof(double));
	double *v3 = bench_xmalloc(nsr * sizeof(double)), *ratio = bench_xmalloc(nsr * sizeof(double));
	uint64_t *out = bench_xmalloc(1000000 * sizeof(uint64_t));
	const char *iname = bench_index_name(bench_process_index());
	unsigned *walk = bench_xmalloc(pcpu_nslots() * sizeof(unsigned));
	unsigned char *has_data = bench_xmalloc(pcpu_nslots());
	char walked[256];
	unsigned si, r, i, nwalk;
	struct tbl tb;
	FILE *csv;
	char buf[96], b2[96], b3[96];

	printf("## 4. Read side and memory\n\n");
	csv = bench_csv_open("readside.csv",
			     "operation,zone,counters,unit,median,min,max,exact,resident_slots");

	/* Which slots a fetch reads: the CPU slots and the owned slots claimed
	 * so far (the incr and dataplane sections claim some). */
	nwalk = rs_walked_slots(walk, walked, sizeof(walked));

	/* ---- fetch of one counter ---- */
	rs_fetch_one(nwalk, walk, iname, csv, v);

	/* ---- snapshots ---- */
	printf("Snapshots: an array of n counters (pcpu_counter_alloc_array, %s index) written "
	       "first by 2 unpinned threads running at once (\"slots with data\": how many slots' "
	       "copies then hold nonzero words, and which; one when the two threads took turns on "
	       "one CPU slot). A fetch walks %u of the %u slots: %s (the CPU "
	       "slots, then the owned slots this process has claimed). Each round runs "
	       "pcpu_counter_fetch_array, n × pcpu_counter_fetch and the "
	       "memory floor in turn, a different one first each round, after one warm-up round "
	       "not counted. ms of the thread's CPU time (time other work holds the CPU is not "
	       "counted), median (min–max) of %u rounds; the ratio is the median of the rounds' "
	       "ratios.\n\n", iname, nwalk, pcpu_nslots(), walked, nsr);
	tbl_init(&tb, 7);
	tbl_headers(&tb, "counters", "slots with data", "pcpu_counter_fetch_array, ms",
		    "n × pcpu_counter_fetch, ms", "memory floor, ms", "fetch_array / floor",
		    "exact", NULL);
	for (si = 0; si < 3 && sizes[si] <= bench_opt.max_snapshot; si++) {
		size_t n = sizes[si];
		pcpu_counter_t arr = pcpu_counter_alloc_array(n);
		struct bench_stat sa, sf, sl;
		struct rs_floor fl;
		char slots[256];
		double rmed;
		int exact = 1;

		if (!arr)
			bench_die("pcpu_counter_alloc_array(%zu) failed", n);
		rs_write_all(arr, n, 2, 1);
		{
			/* "1: slot 0", "2: slots 0,1": a count and which (a bare
			 * list "0" read as no slot at all). */
			char list[200];
			unsigned nd = rs_data_slots(arr, n * sizeof(struct pcpu_counter), has_data,
						    list, sizeof(list));

			snprintf(slots, sizeof(slots), "%u: slot%s %s", nd, nd == 1 ? "" : "s",
				 nd ? list : "none");
		}
		rs_floor_init(&fl, n, walk, nwalk, has_data);
		/* The warm-up round faults in the floor's result array and the
		 * output buffer, and brings the code in. */
		rs_snapshot_round(arr, n, out, &fl, 0, &v[0], &v2[0], &v3[0], &exact);
		for (r = 0; r < nsr; r++) {
			rs_snapshot_round(arr, n, out, &fl, r, &v[r], &v2[r], &v3[r], &exact);
			ratio[r] = v[r] / v3[r];
		}
		sa = bench_stat_of(v, nsr);
		sf = bench_stat_of(v2, nsr);
		sl = bench_stat_of(v3, nsr);
		rmed = bench_median(ratio, nsr);
		tbl_cell(&tb, "%zu", n);
		tbl_cell(&tb, "%s", slots);
		tbl_cell(&tb, "%s", bench_fmt_stat(buf, sizeof(buf), sa));
		tbl_cell(&tb, "%s", bench_fmt_stat(b2, sizeof(b2), sf));
		tbl_cell(&tb, "%s", bench_fmt_stat(b3, sizeof(b3), sl));
		tbl_cell(&tb, "%.2f×", rmed);
		tbl_cell(&tb, "%s", exact ? "yes" : "**NO**");
		if (csv) {
			fprintf(csv, "fetch_array,%s,%zu,ms,%.4f,%.4f,%.4f,%d,\"%s\"\n", iname, n,
				sa.med, sa.min, sa.max, exact, slots);
			fprintf(csv, "fetch_each,%s,%zu,ms,%.4f,%.4f,%.4f,%d,\"%s\"\n", iname, n,
				sf.med, sf.min, sf.max, exact, slots);
			fprintf(csv, "memory_floor,plain,%zu,ms,%.4f,%.4f,%.4f,%d,\"\"\n", n, sl.med,
				sl.min, sl.max, exact);
			fprintf(csv, "fetch_array_vs_floor,%s,%zu,ratio,%.4f,,,%d,\"\"\n", iname, n,
				rmed, exact);
		}
		if (n == 1000000) {
			bench_targets.have_snapshot = 1;
			bench_targets.snapshot_1e6_ms = sa.med;
			bench_targets.snapshot_floor_ms = sl.med;
			bench_targets.snapshot_vs_floor = rmed;
			bench_targets.snapshot_slots = nwalk;
			bench_targets.snapshot_nslots = pcpu_nslots();
		}
		pcpu_counter_free(arr);
		rs_floor_free(&fl);
	}
	tbl_print(&tb);
	printf("\"memory floor\": plain arrays of the bytes a snapshot must read (8 B per "
	       "counter for each of the %u slots a fetch walks) summed slot by slot into an 8 B "
	       "result per counter, i.e. what the memory system allows; the arrays of the slots "
	       "with data are written, the others never (a read maps the kernel's zero page, as "
	       "for the counters' untouched slots). (Before Core v2 this floor read 16 B per "
	       "slot.)\n\n", nwalk);
	if (csv)
		fclose(csv);

	/* ---- memory ---- */
	printf("Memory for 10^6 counters allocated one by one with pcpu_counter_alloc(), written "
	       "%u times by %u threads running at once, pinned to different CPUs (1 ms sleep between "
	       "passes); each "
	       "row is a fresh process (`pcpu_bench --memory-child`) with the environment shown. "
	       "\"resident\" is the growth of the whole process's Rss (smaps_rollup: counters, "
	       "allocator bookkeeping, everything) over allocation and writes, per counter; "
	       "\"floor\": %u plain arrays of 8 B per counter, one per writer, written the same way "
	       "in the same process.\n\n", bench_opt.mem_passes, MEM_THREADS, MEM_THREADS);
	csv = bench_csv_open("memory.csv",
			     "index,nslots,threads,counters,rss_bytes_per_counter,floor_bytes_per_counter,"
			     "resident_slots,slot_bytes_per_counter,mirror_bytes_per_counter,"
			     "span_bytes_per_counter,alloc_ns,exact");
	tbl_init(&tb, 10);
	tbl_headers(&tb, "environment", "index, slots", "resident B/counter (Rss Δ)",
		    "floor: plain 8 B × 2, B/counter", "slots resident", "slot words B/counter (mincore)",
		    "mirror B/counter (mincore)", "slot-0 address span B/counter",
		    "ns per pcpu_counter_alloc", "exact", NULL);
	bench_targets.nmem = 0;
	{
		static const unsigned nslots_cfg[2] = { 0, 64 };
		int idx_cfg[2] = { PCPU_INDEX_CPU, PCPU_INDEX_MM_CID };
		unsigned ci, ii;

		for (ci = 0; ci < 2; ci++)
			for (ii = 0; ii < 2; ii++) {
				struct bench_mem_result *m = &bench_targets.mem[bench_targets.nmem];
				char env[64];

				if (idx_cfg[ii] == PCPU_INDEX_MM_CID && !pcpu_rseq_has_mm_cid())
					continue;
				bench_progress("read: memory, PCPU_INDEX=%s PCPU_NSLOTS=%u",
					bench_index_name(idx_cfg[ii]), nslots_cfg[ci]);
				rs_memory_config(nslots_cfg[ci], idx_cfg[ii], m);
				snprintf(env, sizeof(env), "PCPU_INDEX=%s%s", bench_index_name(idx_cfg[ii]),
					 nslots_cfg[ci] ? " PCPU_NSLOTS=64" : "");
				snprintf(m->env, sizeof(m->env), "%s", env);
				bench_targets.nmem++;
				tbl_cell(&tb, "%s", env);
				if (!m->ok) {
					tbl_cell(&tb, "**failed**: %s", m->err);
					for (i = 0; i < 8; i++)
						tbl_cell(&tb, "—");
					continue;
				}
				tbl_cell(&tb, "%s, %u", bench_index_name(m->index), m->nslots);
				tbl_cell(&tb, "%.2f", m->rss_b);
				tbl_cell(&tb, "%.2f", m->floor_b);
				tbl_cell(&tb, "%s", m->slots);
				tbl_cell(&tb, "%.2f", m->slot_b);
				if (isnan(m->mirror_b))
					tbl_cell(&tb, "— (no mirror region)");
				else
					tbl_cell(&tb, "%.2f", m->mirror_b);
				tbl_cell(&tb, "%.2f", m->span_b);
				tbl_cell(&tb, "%.0f", m->alloc_ns);
				tbl_cell(&tb, "%s", m->exact ? "yes" : "**NO**");
				if (csv)
					fprintf(csv, "%s,%u,%u,%d,%.3f,%.3f,\"%s\",%.3f,%.3f,%.3f,%.1f,%d\n",
						bench_index_name(m->index), m->nslots, m->threads, MEM_N,
						m->rss_b, m->floor_b, m->slots, m->slot_b, m->mirror_b,
						m->span_b, m->alloc_ns, m->exact);
			}
	}
	tbl_print(&tb);
	printf("A counter is %zu bytes per slot; zones reserve address space for every possible "
	       "slot with MAP_NORESERVE, so only written pages count. \"mirror\": Core v2's "
	       "region of atomic-only words (slot s's mirror at nslots + s strides), resident only "
	       "where a fallback add, reset or gauge set wrote.\n\n",
	       sizeof(struct pcpu_counter));
	if (csv)
		fclose(csv);
	free(v);
	free(v2);
	free(v3);
	free(ratio);
	free(out);
	free(walk);
	free(has_data);
}
