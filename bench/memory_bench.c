/* SPDX-License-Identifier: MIT */
/*
 * pcpu_bench_memory: what a series costs in memory, kind by kind, at 2, 64
 * and 256 CPU slots (issue 61), beside prometheus-cpp, a shared atomic,
 * DPDK's per-lcore arrays and nginx-module-vts. bench/memory.md has the
 * command and its output.
 *
 * Each configuration (a kind at a slot count) runs in a fresh process:
 * this program again, with PCPU_NSLOTS=<slots> and PCPU_INDEX=cpu in its
 * environment. PCPU_NSLOTS gives a small machine a big one's CPU slots
 * (issue 61 found the segment files' blocks byte-identical to those of an
 * emulated machine with that many possible CPUs); PCPU_INDEX=cpu makes a
 * write from CPU c land in slot c, and a shared tree needs it. The process
 * makes one series of its kind, takes a baseline, makes N more, and
 * measures the growth of
 *   - the segment file's allocated bytes, st_blocks * 512 (published kinds),
 *   - the process's resident memory: Rss of /proc/self/smaps_rollup (a
 *     walk of the page tables: exact), and of it the shared memory,
 *     Pss_Shmem (smaps_rollup has no Rss_Shmem; no other process maps the
 *     segment, so its Pss is its Rss),
 *   - its page tables, VmPTE of /proc/self/status,
 *   - its heap, mallinfo2() uordblks + hblkhd,
 * after three stages (histograms four), each on top of the one before:
 *   registered   N series made, nothing written;
 *   1 write      one update of every series, on the first CPU the process
 *                may run on;
 *   each CPU     the same thread pinned in turn to every CPU the process
 *                may run on (sched_getaffinity), one update of every
 *                series on each;
 *   all buckets  (histograms) on each of those CPUs, a value in every
 *                bucket of every series.
 * It then checks every value (a counter holds its updates, a histogram its
 * count) and reports to its parent through fd 3; the parent divides by N
 * and prints the tables. The one-time costs (the registry or zone, the
 * family, the first series) have a table of their own.
 *
 * Only the public API (the headers in include/pcpu), so that this file
 * builds against later versions of the library unchanged and measures
 * them the same way.
 *
 * N: --n (default 10240) series of counters, N/2 flows (N counters), N/40
 * histograms (256). Values come in whole 4 KiB pages, so N is a multiple
 * of 512, the counters of a page, and N/40 of 256, the histograms whose
 * 16-byte pairs fill whole pages whatever their buckets: at 355f8a0 the
 * series then fill whole pages in every slot region, and the figures hold
 * no partial page. Another N may leave one partial page per slot region,
 * up to 4096 / N bytes per series and region.
 *
 * Options: --slots LIST (default 2,64,256), --n N, --kinds LIST (the
 * names of the detail table), --csv DIR (memory.csv: every figure per
 * series; memory_first.csv: the one-time costs), --dir DIR (where the
 * temporary segment directory is made; default /dev/shm, the tmpfs that
 * segments live on), --promcpp PATH|none (bench/promcpp_memory.cc built
 * against the real prometheus-cpp; default pcpu_bench_promcpp_memory
 * beside this program, which CMake builds where Debian's
 * prometheus-cpp-dev is installed), --promcpp-n N (its series, default
 * 10^5), --smoke (tiny: --n 1024, --slots 2,8, every kind, every check;
 * what ctest runs).
 */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcpu/pcpu.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

struct bench_opts bench_opt; /* util.c's: argv (bench_run_self), csv_dir */
unsigned bench_ncpu;
double bench_tsc_ghz;

/* ---- the kinds ------------------------------------------------------------ */

enum pub { PUB_NONE, PUB_SEGMENT, PUB_TREE };
enum value {
	V_COUNTER,   /* a counter family's series */
	V_HIST10,    /* a histogram family, 10 explicit bounds */
	V_NGINX,     /* a histogram family, the nginx module's layout */
	V_NATIVE3,   /* a histogram family, exponential schema 3 */
	V_ALLOC,     /* pcpu_counter_alloc(), one per series */
	V_FLOWS,     /* one array of 2 counters per flow */
};

struct kind {
	const char *name; /* --kinds, the detail table */
	const char *what; /* the summary's words */
	enum pub pub;
	enum value value;
	unsigned div;     /* series = --n / div (at least 1) */
	int sparse;       /* histograms: PCPU_FAMILY_SPARSE (issue 61) */
};

static const struct kind kinds[] = {
	{"seg-counter", "published counter, ordinary segment", PUB_SEGMENT, V_COUNTER, 1, 0},
	{"tree-counter", "published counter, shared tree", PUB_TREE, V_COUNTER, 1, 0},
	{"seg-hist10", "published histogram, 10 explicit bounds", PUB_SEGMENT, V_HIST10, 40, 0},
	{"tree-nginx", "published histogram, the nginx module's layout (a shared tree, as the "
		       "module's)", PUB_TREE, V_NGINX, 40, 0},
	{"seg-native3", "published native histogram, schema 3", PUB_SEGMENT, V_NATIVE3, 40, 0},
	{"priv-nginx", "histogram, the nginx module's layout, private registry", PUB_NONE, V_NGINX,
	 40, 0},
	{"priv-native3", "native histogram, schema 3, private registry", PUB_NONE, V_NATIVE3, 40, 0},
#ifdef PCPU_HISTOGRAM_GROUP_BUCKETS /* a library with sparse histograms */
	{"priv-nginx-sparse", "histogram, the nginx module's layout, private registry, sparse",
	 PUB_NONE, V_NGINX, 40, 1},
	{"priv-native3-sparse", "native histogram, schema 3, private registry, sparse", PUB_NONE,
	 V_NATIVE3, 40, 1},
	{"tree-nginx-sparse", "published histogram, the nginx module's layout, shared tree, sparse "
			      "(format 2.10)", PUB_TREE, V_NGINX, 40, 1},
	{"seg-native3-sparse", "published native histogram, schema 3, sparse (format 2.10)",
	 PUB_SEGMENT, V_NATIVE3, 40, 1},
#endif
	{"priv-counter", "private counter, pcpu_counter_alloc()", PUB_NONE, V_ALLOC, 1, 0},
	{"seg-flows", "flow (2 counters), one array in a published registry's zone", PUB_SEGMENT,
	 V_FLOWS, 2, 0},
	{"priv-flows", "flow (2 counters), one array, pcpu_counter_alloc_array()", PUB_NONE, V_FLOWS,
	 2, 0},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* 10 explicit bounds, nanoseconds (exposed in seconds): Prometheus' default
 * buckets, 5 ms to 5 s (its eleventh, 10 s, left out). */
static const int64_t hist10_bounds[10] = {5000000,   10000000,  25000000,  50000000,   100000000,
					  250000000, 500000000, 1000000000, 2500000000, 5000000000};

/* The nginx module's request-time layout, copied from
 * integrations/nginx/ngx_http_pcpu_tree.c (duration_layout, and the family's
 * scale_exp10 -6 from its family()): microseconds exposed in seconds,
 * exponential schema 2, classic `le` buckets one per power of two up to
 * 60 s. 247 buckets (pcpu_histogram_nbuckets() at 355f8a0). */
static const struct pcpu_histogram_layout nginx_layout = {
	.scheme = PCPU_HISTOGRAM_EXPONENTIAL,
	.schema = 2,
	.export_per_octave = 1,
	.max_value = 60000000,
};
#define NGINX_SCALE (-6)

/* A Prometheus native histogram of nanoseconds exposed in seconds, schema 3
 * (8 buckets per power of two): 481 buckets at 355f8a0. */
static const struct pcpu_histogram_layout native3_layout = {
	.scheme = PCPU_HISTOGRAM_EXPONENTIAL,
	.schema = 3,
};

/* ---- what a child measures --------------------------------------------------- */

#define NSTAGES 4
static const char *const stage_names[NSTAGES] = {"registered", "1 write", "each CPU",
						 "all buckets"};

struct sample {
	double file, rss, shmem, pte, heap; /* bytes */
};

struct child_res {
	int ok;
	unsigned nslots;   /* CPU slots in the child: pcpu_nslots() - pcpu_worker_max() */
	unsigned owned;    /* its owned slots, pcpu_worker_max() */
	unsigned n;        /* series (flows) made */
	unsigned writers;  /* CPUs of the "each CPU" stage */
	unsigned nbuckets; /* histograms: pcpu_histogram_nbuckets() */
	unsigned nstages;
	struct sample grow[NSTAGES]; /* growth from the baseline, whole process */
	struct sample first; /* the baseline less the same before the registry (or zone) */
	char err[200];
};

static const char default_base[] = "/dev/shm";

static struct {
	unsigned slots[BENCH_MAX_LIST], nslots;
	unsigned n;
	int kind_on[NKINDS];
	const char *base_dir;
	const char *promcpp;  /* NULL: look beside this program; "none": skip */
	unsigned promcpp_n;
	int smoke;
	const char *child_kind; /* this is a child: its kind (--dir is then the segments' own) */
} opt = {.slots = {2, 64, 256}, .nslots = 3, .n = 10240, .base_dir = default_base,
	 .promcpp_n = 100000};

static unsigned allowed[CPU_SETSIZE], nallowed; /* CPUs this process may run on */

static void find_allowed(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof set, &set) != 0)
		bench_die("sched_getaffinity: %s", strerror(errno));
	nallowed = 0;
	for (unsigned c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			allowed[nallowed++] = c;
	if (nallowed == 0)
		bench_die("no CPU in the affinity mask");
}

static void pin(unsigned cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		bench_die("sched_setaffinity(%u): %s", cpu, strerror(errno));
	if (sched_getcpu() != (int)cpu)
		bench_die("pinned to CPU %u, runs on %d", cpu, sched_getcpu());
}

static void take(struct sample *s, const char *path)
{
	struct mallinfo2 mi = mallinfo2(); /* first: the readers below malloc and free */
	struct stat st;

	s->heap = (double)mi.uordblks + (double)mi.hblkhd;
	s->file = 0;
	if (path) {
		if (stat(path, &st) != 0)
			bench_die("stat %s: %s", path, strerror(errno));
		s->file = (double)st.st_blocks * 512.0;
	}
	s->rss = (double)bench_smaps_rollup_kb("Rss") * 1024.0;
	/* smaps_rollup has no Rss_Shmem: Pss_Shmem is the same bytes where, as
	 * here, no other process maps the segment's file */
	s->shmem = (double)bench_smaps_rollup_kb("Pss_Shmem") * 1024.0;
	s->pte = (double)bench_proc_status_kb("VmPTE") * 1024.0;
	if (s->rss < 0 || s->shmem < 0 || s->pte < 0)
		bench_die("cannot read /proc/self/smaps_rollup (Rss, Pss_Shmem) or VmPTE");
}

static void grow(struct sample *g, const struct sample *now, const struct sample *base)
{
	g->file = now->file - base->file;
	g->rss = now->rss - base->rss;
	g->shmem = now->shmem - base->shmem;
	g->pte = now->pte - base->pte;
	g->heap = now->heap - base->heap;
}

/* A value that lands in an ordinary bucket of each layout. */
static int64_t typical_value(enum value v)
{
	return v == V_NGINX ? 1500 /* 1.5 ms in us */ : 3000000 /* 3 ms in ns */;
}

/* The child: one kind, n series, in a fresh process. Never returns. */
static void child(const struct kind *k, unsigned n, const char *dir)
{
	static const char *const label[] = {"id"};
	int hist = k->value == V_HIST10 || k->value == V_NGINX || k->value == V_NATIVE3;
	unsigned nser = k->value == V_FLOWS ? 2 * n : n; /* counters or histograms */
	void **h = bench_xmalloc((size_t)nser * sizeof *h); /* before the baseline */
	struct child_res r;
	struct sample pre, base, now;
	pcpu_registry_t *reg = NULL;
	pcpu_segment_t *seg = NULL;
	pcpu_family_t *fam = NULL;
	const char *path = NULL;
	pcpu_counter_t arr = NULL;
	char id[32];
	const char *lv[1] = {id};
	uint64_t want_count = 0;
	const char *env_err;

	memset(&r, 0, sizeof r);
	r.n = n;
	pin(allowed[0]);
	r.owned = pcpu_worker_max();
	r.nslots = pcpu_nslots() - r.owned;
	if ((env_err = pcpu_environment_error()))
		bench_die("%s", env_err);
	take(&pre, NULL);
	/* a registry for the published kinds and the families; the private
	 * counters and flows take pcpu's default zone */
	if ((k->pub != PUB_NONE || k->value == V_COUNTER || hist) && !(reg = pcpu_registry_create()))
		bench_die("pcpu_registry_create: %s", strerror(errno));
	if (k->pub != PUB_NONE) {
		struct pcpu_segment_options so;

		memset(&so, 0, sizeof so);
		so.dir = dir;
		so.flags = k->pub == PUB_TREE ? PCPU_SEGMENT_SHARED_TREE : 0;
		if (!(seg = pcpu_segment_publish(reg, "membench", &so)))
			bench_die("pcpu_segment_publish: %s", pcpu_segment_error());
		path = pcpu_segment_path(seg);
	}
	/* The warm-up series' label, made as the others' are: the code a
	 * measured step runs first (libc's number formatting is 16 pages of
	 * it) is then resident before the baseline, not counted as the
	 * series' Rss. */
	snprintf(id, sizeof id, "%u", UINT_MAX);
	if (k->value == V_COUNTER || hist) {
		struct pcpu_family_desc d;

		memset(&d, 0, sizeof d);
		d.nlabels = 1;
		d.label_names = label;
		if (k->value == V_COUNTER) {
			d.name = "membench_items";
			d.help = "Items.";
			d.type = PCPU_METRIC_COUNTER;
		} else {
			struct pcpu_histogram_layout *l = bench_xmalloc(sizeof *l);

			d.name = "membench_duration_seconds";
			d.help = "Duration.";
			d.unit = "seconds";
			d.type = PCPU_METRIC_HISTOGRAM;
			d.scale_exp10 = -9;
			if (k->value == V_HIST10) {
				memset(l, 0, sizeof *l);
				l->scheme = PCPU_HISTOGRAM_EXPLICIT;
				l->bounds = hist10_bounds;
				l->nbounds = 10;
			} else if (k->value == V_NGINX) {
				*l = nginx_layout;
				d.scale_exp10 = NGINX_SCALE;
			} else {
				*l = native3_layout;
			}
			d.histogram = l;
		}
#ifdef PCPU_HISTOGRAM_GROUP_BUCKETS
		fam = pcpu_registry_family_ex(reg, &d, k->sparse ? PCPU_FAMILY_SPARSE : 0, 0, NULL, NULL);
#else
		fam = pcpu_registry_family(reg, &d);
#endif
		if (!fam)
			bench_die("pcpu_registry_family: %s", pcpu_stats_error());
		/* one series first: the family's one-time costs stay out */
		if (!(k->value == V_COUNTER ? (void *)pcpu_family_counter(fam, lv)
					    : (void *)pcpu_family_histogram(fam, lv)))
			bench_die("warm-up series: %s", pcpu_stats_error());
	} else if (k->value == V_ALLOC || !reg) {
		if (!pcpu_counter_alloc()) /* makes the default zone */
			bench_die("pcpu_counter_alloc: %s", strerror(errno));
	} else if (!pcpu_counter_alloc_in(pcpu_registry_zone(reg), 1)) {
		bench_die("pcpu_counter_alloc_in: %s", strerror(errno));
	}

	take(&base, path);
	grow(&r.first, &base, &pre);
	r.first.file = base.file; /* the whole file: it did not exist before */
	/* registered */
	for (unsigned i = 0; i < n; i++) {
		snprintf(id, sizeof id, "%u", i);
		switch (k->value) {
		case V_COUNTER:
			h[i] = pcpu_family_counter(fam, lv);
			break;
		case V_HIST10:
		case V_NGINX:
		case V_NATIVE3:
			h[i] = pcpu_family_histogram(fam, lv);
			break;
		case V_ALLOC:
			h[i] = pcpu_counter_alloc();
			break;
		case V_FLOWS:
			if (i == 0)
				arr = reg ? pcpu_counter_alloc_in(pcpu_registry_zone(reg), 2 * (size_t)n)
					  : pcpu_counter_alloc_array(2 * (size_t)n);
			if (!arr)
				bench_die("counter array of %u: %s", 2 * n, strerror(errno));
			break;
		}
		if (k->value != V_FLOWS && !h[i])
			bench_die("series %u: %s", i, hist || k->value == V_COUNTER
							     ? pcpu_stats_error()
							     : strerror(errno));
	}
	if (k->value == V_FLOWS)
		for (unsigned i = 0; i < nser; i++)
			h[i] = pcpu_counter_at(arr, i);
	if (hist)
		r.nbuckets = (unsigned)pcpu_histogram_nbuckets((const pcpu_histogram_t *)h[0]);
	take(&now, path);
	grow(&r.grow[0], &now, &base);

	/* 1 write, then each CPU: one update of every series per pass */
	r.writers = nallowed;
	for (unsigned pass = 0; pass <= nallowed; pass++) {
		pin(allowed[pass == 0 ? 0 : pass - 1]);
		for (unsigned i = 0; i < nser; i++) {
			if (hist)
				pcpu_histogram_record((const pcpu_histogram_t *)h[i],
						      typical_value(k->value));
			else
				pcpu_counter_add((pcpu_counter_t)h[i], 1);
		}
		want_count++;
		if (pass == 0 || pass == nallowed) {
			take(&now, path);
			grow(&r.grow[pass == 0 ? 1 : 2], &now, &base);
		}
	}
	r.nstages = 3;
	if (hist) {
		/* all buckets: a value of every bucket, on each CPU (its lower
		 * end, or for a first bucket open below its upper end) */
		for (unsigned c = 0; c < nallowed; c++) {
			pin(allowed[c]);
			for (unsigned i = 0; i < nser; i++)
				for (unsigned b = 0; b < r.nbuckets; b++) {
					int64_t lo, hi;

					if (pcpu_histogram_bucket_range((const pcpu_histogram_t *)h[i],
									b, &lo, &hi) != 0)
						bench_die("bucket range %u: %s", b, strerror(errno));
					pcpu_histogram_record((const pcpu_histogram_t *)h[i],
							      lo == INT64_MIN ? hi : lo);
				}
		}
		want_count += (uint64_t)nallowed * r.nbuckets;
		take(&now, path);
		grow(&r.grow[3], &now, &base);
		r.nstages = 4;
	}

	/* every value holds its updates */
	r.ok = 1;
	{
		uint64_t *counts = hist ? bench_xmalloc(r.nbuckets * sizeof *counts) : NULL;

		for (unsigned i = 0; i < nser && r.ok; i++) {
			uint64_t got;

			if (hist) {
				if (pcpu_histogram_read((const pcpu_histogram_t *)h[i], counts,
							r.nbuckets, &got, NULL) != 0)
					bench_die("pcpu_histogram_read: %s", strerror(errno));
			} else {
				got = pcpu_counter_fetch((pcpu_counter_t)h[i]);
			}
			if (got != want_count) {
				r.ok = 0;
				snprintf(r.err, sizeof r.err, "series %u holds %" PRIu64 ", want %" PRIu64,
					 i, got, want_count);
			}
		}
		free(counts);
	}
	if (write(3, &r, sizeof r) != (ssize_t)sizeof r)
		bench_die("writing the result: %s", strerror(errno));
	if (reg)
		pcpu_registry_destroy(reg); /* removes the segment's file */
	exit(0);
}

/* ---- the parent ------------------------------------------------------------- */

static struct child_res res[BENCH_MAX_LIST][NKINDS];

static unsigned series_of(const struct kind *k)
{
	unsigned n = opt.n / k->div;

	return n ? n : 1;
}

static void run_child(unsigned si, unsigned ki, const char *dir)
{
	char nb[32], slots_env[48];
	char *args[] = {"--child", (char *)kinds[ki].name, "--n", nb, "--dir", (char *)dir, NULL};
	const char *env[] = {slots_env, "PCPU_INDEX=cpu", "PCPU_SEGMENT_DIR", "PCPU_OWNED_SLOTS",
			     NULL};
	struct child_res *r = &res[si][ki];
	long got;

	snprintf(nb, sizeof nb, "%u", series_of(&kinds[ki]));
	snprintf(slots_env, sizeof slots_env, "PCPU_NSLOTS=%u", opt.slots[si]);
	bench_progress("%s, PCPU_NSLOTS=%u, %s series", kinds[ki].name, opt.slots[si], nb);
	got = bench_run_self(args, env, r, sizeof *r);
	if (got != (long)sizeof *r)
		bench_die("%s at PCPU_NSLOTS=%u: the child failed", kinds[ki].name, opt.slots[si]);
	if (!r->ok)
		bench_die("%s at PCPU_NSLOTS=%u: %s", kinds[ki].name, opt.slots[si], r->err);
}

/* prometheus-cpp's figures, from bench/promcpp_memory.cc built against the
 * real prometheus-cpp: resident and malloc bytes per counter and per
 * histogram (11 bounds). NAN where it was not run. */
static double promcpp_fig[2][2] = {{NAN, NAN}, {NAN, NAN}}; /* [counter|hist][rss|malloc] */
static char promcpp_path[4096];

static void run_promcpp(void)
{
	char cmd[4200], line[512];
	FILE *p;

	if (opt.promcpp && !strcmp(opt.promcpp, "none"))
		return;
	if (opt.promcpp) {
		snprintf(promcpp_path, sizeof promcpp_path, "%s", opt.promcpp);
	} else {
		char self[4000];
		ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
		char *slash;

		if (len <= 0)
			return;
		self[len] = 0;
		slash = strrchr(self, '/');
		if (!slash)
			return;
		*slash = 0;
		snprintf(promcpp_path, sizeof promcpp_path, "%s/pcpu_bench_promcpp_memory", self);
	}
	if (access(promcpp_path, X_OK) != 0) {
		if (opt.promcpp)
			bench_die("%s: %s", promcpp_path, strerror(errno));
		promcpp_path[0] = 0;
		return;
	}
	bench_progress("%s %u", promcpp_path, opt.promcpp_n);
	snprintf(cmd, sizeof cmd, "'%s' %u", promcpp_path, opt.promcpp_n);
	fflush(stdout);
	if (!(p = popen(cmd, "r")))
		bench_die("popen %s: %s", cmd, strerror(errno));
	while (fgets(line, sizeof line, p)) {
		const char *w;
		double rss, heap;
		int which;

		if ((w = strstr(line, " counter ")))
			which = 0;
		else if ((w = strstr(line, " histogram ")))
			which = 1;
		else
			continue;
		w = strchr(w + 1, ' ');
		if (w && sscanf(w, " %lf B/series resident %lf B/series malloc", &rss, &heap) == 2) {
			promcpp_fig[which][0] = rss;
			promcpp_fig[which][1] = heap;
		}
	}
	if (pclose(p) != 0 || isnan(promcpp_fig[0][0]) || isnan(promcpp_fig[1][0]))
		bench_die("%s printed no figures", promcpp_path);
}

/* Bytes with thousands separators, "—" for NAN. */
static const char *fmt_b(char *buf, size_t len, double v)
{
	char digits[40], *o = buf;
	long long x;
	int nd, neg;

	if (isnan(v)) {
		snprintf(buf, len, "—");
		return buf;
	}
	if (fabs(v) < 100 && fabs(v - round(v)) >= 0.05) {
		snprintf(buf, len, "%.1f", v);
		return buf;
	}
	x = llround(v);
	neg = x < 0;
	snprintf(digits, sizeof digits, "%lld", neg ? -x : x);
	nd = (int)strlen(digits);
	if (neg)
		*o++ = '-';
	for (int i = 0; i < nd && (size_t)(o - buf) < len - 2; i++) {
		*o++ = digits[i];
		if ((nd - 1 - i) % 3 == 0 && i != nd - 1)
			*o++ = ',';
	}
	*o = 0;
	return buf;
}

/* Decimal MB / GB, as the issue writes the 10^6-flow rows. */
static const char *fmt_big(char *buf, size_t len, double v)
{
	if (isnan(v))
		snprintf(buf, len, "—");
	else if (v >= 1e9)
		snprintf(buf, len, "%.2f GB", v / 1e9);
	else
		snprintf(buf, len, "%.1f MB", v / 1e6);
	return buf;
}

static int kind_index(const char *name)
{
	for (unsigned i = 0; i < NKINDS; i++)
		if (!strcmp(kinds[i].name, name))
			return (int)i;
	return -1;
}

/* Per series of kind ki at slot-count index si, stage st; NAN if not run. */
static double per(unsigned si, int ki, unsigned st, int what)
{
	const struct child_res *r;
	const struct sample *g;

	if (ki < 0 || !opt.kind_on[ki])
		return NAN;
	r = &res[si][ki];
	if (st >= r->nstages)
		return NAN;
	g = &r->grow[st];
	switch (what) {
	case 0: return kinds[ki].pub == PUB_NONE ? NAN : g->file / r->n;
	case 1: return g->rss / r->n;
	case 2: return g->shmem / r->n;
	case 3: return g->pte / r->n;
	default: return g->heap / r->n;
	}
}

static void print_summary(void)
{
	struct tbl t;
	char b[64];
	unsigned nc = opt.nslots + 5;
	int ki;

	/* The table: file bytes per series right after registration
	 * for published kinds (at 355f8a0 every page is allocated then);
	 * heap, Rss where the row says. */
	printf("## Bytes per series (issue 61's table)\n\n");
	tbl_init(&t, nc);
	tbl_cell(&t, "bytes per series");
	for (unsigned s = 0; s < opt.nslots; s++) {
		unsigned got = opt.slots[s];

		for (unsigned k = 0; k < NKINDS; k++)
			if (opt.kind_on[k]) {
				got = res[s][k].nslots; /* below the possible CPUs, PCPU_NSLOTS is ignored */
				break;
			}
		tbl_cell(&t, "%u slots", got);
	}
	tbl_headers(&t, "prometheus-cpp 1.0.1 (resident / malloc)", "shared atomic (computed)",
		    "DPDK per-lcore array (computed)", "nginx-module-vts (bench/nginx.md)", NULL);

#define ROW_BEGIN(label, ...) tbl_cell(&t, label, __VA_ARGS__)
#define SLOTS(ki, st, what)                                                           \
	for (unsigned s = 0; s < opt.nslots; s++)                                       \
		tbl_cell(&t, "%s", fmt_b(b, sizeof b, per(s, ki, st, what)))
#define PEERS(p, a, d, v) tbl_cell(&t, "%s", p), tbl_cell(&t, "%s", a), tbl_cell(&t, "%s", d), \
			  tbl_cell(&t, "%s", v)

	char pc[64], ph[64], tmp1[32], tmp2[32];

	if (isnan(promcpp_fig[0][0])) {
		snprintf(pc, sizeof pc, "not run");
		snprintf(ph, sizeof ph, "not run");
	} else {
		snprintf(pc, sizeof pc, "%s / %s", fmt_b(tmp1, sizeof tmp1, promcpp_fig[0][0]),
			 fmt_b(tmp2, sizeof tmp2, promcpp_fig[0][1]));
		snprintf(ph, sizeof ph, "%s / %s (11 bounds)",
			 fmt_b(tmp1, sizeof tmp1, promcpp_fig[1][0]),
			 fmt_b(tmp2, sizeof tmp2, promcpp_fig[1][1]));
	}

	ki = kind_index("seg-counter");
	ROW_BEGIN("%s, file", "published counter, ordinary segment");
	SLOTS(ki, 0, 0);
	PEERS(pc, "8", "1,024", "—");
	ki = kind_index("tree-counter");
	ROW_BEGIN("%s, file", "published counter, shared tree");
	SLOTS(ki, 0, 0);
	PEERS(pc, "8", "1,024", "—");
	ki = kind_index("seg-hist10");
	ROW_BEGIN("%s, file", "published 10-bound histogram");
	SLOTS(ki, 0, 0);
	PEERS(ph, "88", "11,264", "—");
	ki = kind_index("tree-nginx");
	ROW_BEGIN("published nginx module histogram (%u buckets), shared tree, file",
		  opt.kind_on[ki] ? res[0][ki].nbuckets : 0);
	SLOTS(ki, 0, 0);
	PEERS("—", "—", "—", "—");
	ki = kind_index("seg-native3");
	ROW_BEGIN("published native histogram, schema 3 (%u buckets), file",
		  opt.kind_on[ki] ? res[0][ki].nbuckets : 0);
	SLOTS(ki, 0, 0);
	PEERS("—", "—", "—", "—");
	ki = kind_index("priv-nginx");
	ROW_BEGIN("%s", "heap per exponential histogram series, private registry: nginx layout");
	SLOTS(ki, 0, 4);
	PEERS("—", "—", "—", "—");
	ki = kind_index("priv-native3");
	ROW_BEGIN("%s", "heap per exponential histogram series, private registry: schema 3");
	SLOTS(ki, 0, 4);
	PEERS("—", "—", "—", "—");
	ki = kind_index("priv-counter");
	ROW_BEGIN("private counter, Rss after writes from %u CPUs", nallowed);
	SLOTS(ki, 2, 1);
	PEERS("—", "8", "1,024", "—");
	ki = kind_index("tree-counter");
	ROW_BEGIN("%s", "nginx module filter key (4 counter series), file: 4 × the shared tree's "
			"counter (computed)");
	for (unsigned s = 0; s < opt.nslots; s++)
		tbl_cell(&t, "%s", fmt_b(b, sizeof b, 4 * per(s, ki, 0, 0)));
	PEERS("—", "32", "4,096", "3,551");
	ki = kind_index("seg-flows");
	ROW_BEGIN("%s", "10^6 flows × 2 counters, published one array, file (10^6 × per flow)");
	for (unsigned s = 0; s < opt.nslots; s++)
		tbl_cell(&t, "%s", fmt_big(b, sizeof b, 1e6 * per(s, ki, 0, 0)));
	PEERS("—", "16.0 MB", "2.05 GB", "—");
	ki = kind_index("priv-flows");
	ROW_BEGIN("10^6 flows × 2 counters, private, 16 writing CPUs (10^6 × Rss per flow: "
		  "registered + 16 × (after %u CPUs - registered) / %u)", nallowed, nallowed);
	for (unsigned s = 0; s < opt.nslots; s++)
		tbl_cell(&t, "%s", fmt_big(b, sizeof b,
					   1e6 * (per(s, ki, 0, 1) +
						  16 * (per(s, ki, 2, 1) - per(s, ki, 0, 1)) / nallowed)));
	PEERS("—", "16.0 MB", "2.05 GB", "—");
	tbl_print(&t);
#undef ROW_BEGIN
#undef SLOTS
#undef PEERS
}

static void print_detail(FILE *csv)
{
	struct tbl t;
	char b[6][48];

	printf("## Every figure: growth per series after each stage\n\n");
	tbl_init(&t, 11);
	tbl_headers(&t, "kind", "CPU slots", "N", "stage", "file allocated", "Rss", "Rss shmem",
		    "VmPTE", "VmPTE total, KiB", "heap", "buckets", NULL);
	for (unsigned ki = 0; ki < NKINDS; ki++) {
		if (!opt.kind_on[ki])
			continue;
		for (unsigned s = 0; s < opt.nslots; s++) {
			const struct child_res *r = &res[s][ki];

			for (unsigned st = 0; st < r->nstages; st++) {
				char stage[48];

				if (st == 2 || st == 3)
					snprintf(stage, sizeof stage, "%s (%u)", stage_names[st],
						 r->writers);
				else
					snprintf(stage, sizeof stage, "%s", stage_names[st]);
				tbl_cell(&t, "%s", kinds[ki].name);
				tbl_cell(&t, "%u (+%u owned)", r->nslots, r->owned);
				tbl_cell(&t, "%u", r->n);
				tbl_cell(&t, "%s", stage);
				for (int w = 0; w < 4; w++)
					tbl_cell(&t, "%s", fmt_b(b[w], sizeof b[w], per(s, (int)ki, st, w)));
				tbl_cell(&t, "%s", fmt_b(b[4], sizeof b[4], r->grow[st].pte / 1024));
				tbl_cell(&t, "%s", fmt_b(b[5], sizeof b[5], per(s, (int)ki, st, 4)));
				if (r->nbuckets)
					tbl_cell(&t, "%u", r->nbuckets);
				else
					tbl_cell(&t, "—");
				if (csv)
					fprintf(csv, "%s,%u,%u,%u,%u,%s,%u,%.1f,%.1f,%.1f,%.1f,%.1f,%u\n",
						kinds[ki].name, opt.slots[s], r->nslots, r->owned, r->n,
						stage_names[st], st >= 2 ? r->writers : 1,
						per(s, (int)ki, st, 0), per(s, (int)ki, st, 1),
						per(s, (int)ki, st, 2), per(s, (int)ki, st, 3),
						per(s, (int)ki, st, 4), r->nbuckets);
			}
		}
	}
	tbl_print(&t);
	printf("Kinds:\n\n");
	for (unsigned ki = 0; ki < NKINDS; ki++)
		if (opt.kind_on[ki])
			printf("- %s: %s\n", kinds[ki].name, kinds[ki].what);
	printf("\n");
}

/* What the registry (or zone), its family and the warm-up series cost:
 * one-time costs, in bytes, that the per-series figures leave out. */
static void print_first(FILE *csv)
{
	struct tbl t;
	char b[5][48];

	printf("## The first series: the registry or zone, the family and one series, in bytes\n\n");
	tbl_init(&t, 7);
	tbl_headers(&t, "kind", "CPU slots", "file allocated", "Rss", "Rss shmem", "VmPTE", "heap",
		    NULL);
	for (unsigned ki = 0; ki < NKINDS; ki++) {
		if (!opt.kind_on[ki])
			continue;
		for (unsigned s = 0; s < opt.nslots; s++) {
			const struct child_res *r = &res[s][ki];
			const struct sample *f = &r->first;

			tbl_cell(&t, "%s", kinds[ki].name);
			tbl_cell(&t, "%u", r->nslots);
			tbl_cell(&t, "%s", fmt_b(b[0], sizeof b[0],
						 kinds[ki].pub == PUB_NONE ? NAN : f->file));
			tbl_cell(&t, "%s", fmt_b(b[1], sizeof b[1], f->rss));
			tbl_cell(&t, "%s", fmt_b(b[2], sizeof b[2], f->shmem));
			tbl_cell(&t, "%s", fmt_b(b[3], sizeof b[3], f->pte));
			tbl_cell(&t, "%s", fmt_b(b[4], sizeof b[4], f->heap));
			if (csv)
				fprintf(csv, "%s,%u,%u,%u,%.0f,%.0f,%.0f,%.0f,%.0f\n", kinds[ki].name,
					opt.slots[s], r->nslots, r->owned,
					kinds[ki].pub == PUB_NONE ? NAN : f->file, f->rss, f->shmem,
					f->pte, f->heap);
		}
	}
	tbl_print(&t);
}

/* The temporary segment directory, removed at exit with whatever a failed
 * child left in it (a child that dies keeps its segment file). */
static char seg_dir[4096];

static void remove_seg_dir(void)
{
	DIR *d;
	struct dirent *e;

	if (!seg_dir[0] || !(d = opendir(seg_dir)))
		return;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "pcpu.", 5))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(seg_dir);
	seg_dir[0] = 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: pcpu_bench_memory [--slots LIST] [--n N] [--kinds LIST] [--csv DIR] "
		"[--dir DIR] [--promcpp PATH|none] [--promcpp-n N] [--smoke]\nkinds:");
	for (unsigned i = 0; i < NKINDS; i++)
		fprintf(stderr, " %s", kinds[i].name);
	fputc('\n', stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *kind_list = NULL;
	char dir[4096];
	FILE *csv;
	unsigned possible;

	bench_opt.argc = argc;
	bench_opt.argv = argv;
	bench_ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--smoke")) {
			opt.smoke = 1;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--slots"))
			opt.nslots = bench_parse_counts(a, v, opt.slots, BENCH_MAX_LIST, 65536);
		else if (!strcmp(a, "--n"))
			opt.n = (unsigned)bench_parse_num(a, v, 1, 10000000);
		else if (!strcmp(a, "--kinds"))
			kind_list = v;
		else if (!strcmp(a, "--csv"))
			bench_opt.csv_dir = v;
		else if (!strcmp(a, "--dir"))
			opt.base_dir = v;
		else if (!strcmp(a, "--promcpp"))
			opt.promcpp = v;
		else if (!strcmp(a, "--promcpp-n"))
			opt.promcpp_n = (unsigned)bench_parse_num(a, v, 1, 10000000);
		else if (!strcmp(a, "--child"))
			opt.child_kind = v;
		else
			usage();
	}
	find_allowed();
	if (opt.child_kind) {
		int ki = kind_index(opt.child_kind);

		if (ki < 0)
			bench_die("unknown kind %s", opt.child_kind);
		child(&kinds[ki], opt.n, opt.base_dir);
	}
	if (opt.smoke) {
		opt.n = 1024;
		opt.nslots = 2;
		opt.slots[0] = 2;
		opt.slots[1] = 8;
		opt.promcpp_n = 1000;
	}
	if (kind_list) {
		char *copy = strdup(kind_list), *save = NULL;

		for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			int ki = kind_index(tok);

			if (ki < 0)
				bench_die("--kinds: unknown kind %s", tok);
			opt.kind_on[ki] = 1;
		}
		free(copy);
	} else {
		for (unsigned i = 0; i < NKINDS; i++)
			opt.kind_on[i] = 1;
	}

	snprintf(dir, sizeof dir, "%s/pcpu-membench.XXXXXX", opt.base_dir);
	if (!mkdtemp(dir)) {
		/* no /dev/shm (a bare container): $TMPDIR or /tmp, whose file
		 * system may count blocks otherwise (said in the header) */
		const char *t = getenv("TMPDIR");

		if (opt.base_dir != default_base)
			bench_die("mkdtemp %s: %s", dir, strerror(errno));
		snprintf(dir, sizeof dir, "%s/pcpu-membench.XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(dir))
			bench_die("mkdtemp %s: %s", dir, strerror(errno));
	}
	/* this process's CPU slots: the possible CPUs, or PCPU_NSLOTS of its own environment */
	snprintf(seg_dir, sizeof seg_dir, "%s", dir);
	atexit(remove_seg_dir);
	possible = pcpu_nslots() - pcpu_worker_max();
	printf("# pcpu_bench_memory: bytes per series (issue 61)\n\n");
	printf("pcpu %s; %u CPUs online, %u this process may run on (", pcpu_version_string(),
	       bench_ncpu, nallowed);
	for (unsigned i = 0; i < nallowed; i++)
		printf("%s%u", i ? "," : "", allowed[i]);
	printf("), %u CPU slots without PCPU_NSLOTS; each configuration in a fresh process with "
	       "PCPU_NSLOTS=<slots> PCPU_INDEX=cpu (and the default owned slots, counted apart: "
	       "their pages are allocated at a claim, and nothing claims one here); segments in "
	       "%s (a temporary directory); N = %u counter series (N/2 flows, N/40 "
	       "histograms)\n\n",
	       possible, dir, opt.n);
	fflush(stdout);

	for (unsigned s = 0; s < opt.nslots; s++)
		for (unsigned ki = 0; ki < NKINDS; ki++)
			if (opt.kind_on[ki])
				run_child(s, ki, dir);
	/* every child destroyed its registry, which removes its file */
	if (rmdir(dir) != 0)
		bench_die("rmdir %s: %s (a segment file left behind?)", dir, strerror(errno));
	seg_dir[0] = 0;
	run_promcpp();

	print_summary();
	csv = bench_csv_open("memory.csv", "kind,slots_asked,slots,owned_slots,n,stage,writers,"
					   "file_b,rss_b,pss_shmem_b,vmpte_b,heap_b,buckets");
	print_detail(csv);
	if (csv)
		fclose(csv);
	csv = bench_csv_open("memory_first.csv", "kind,slots_asked,slots,owned_slots,file_b,rss_b,"
						 "pss_shmem_b,vmpte_b,heap_b");
	print_first(csv);
	if (csv)
		fclose(csv);
	printf("Notes:\n\n"
	       "- Bytes per series: the growth from a baseline taken after one series of the kind "
	       "was made, divided by N; each stage adds to the one before. The summary gives the "
	       "file after registration (published kinds), the heap after registration, and Rss "
	       "where its row says.\n"
	       "- file allocated: st_blocks * 512 of the segment file, values and directory "
	       "entries. Rss: /proc/self/smaps_rollup. Rss shmem: its Pss_Shmem (no other process "
	       "maps the segment, so Pss is Rss). VmPTE: /proc/self/status, the page tables, "
	       "mostly a cost per registry (the first-series table). heap: mallinfo2() uordblks + "
	       "hblkhd.\n"
	       "- Stages: registered, no writes; 1 write, one update of every series on CPU %u; "
	       "each CPU, the same thread pinned in turn to each of the %u CPUs it may run on, one "
	       "update of every series on each; all buckets (histograms), a value in every bucket "
	       "of every series on each of them. Every value was checked afterwards.\n"
	       "- Peers: a shared atomic is 8 B a counter, 88 B a 10-bound histogram's 11 counts "
	       "(a sum word adds 8). DPDK's per-lcore arrays, a static array of RTE_MAX_LCORE = 128 "
	       "cache-aligned per-lcore structs, take 8 B x 128 = 1,024 B a counter (in a struct "
	       "that fills whole cache lines) whatever the CPUs: computed, not measured. "
	       "prometheus-cpp: %s. nginx-module-vts: 3,551 B per filter key (bench/nginx.md), "
	       "not measured here.\n",
	       allowed[0], nallowed,
	       promcpp_path[0] ? "bench/promcpp_memory.cc built against Debian's prometheus-cpp "
				 "1.0.1 and run here, two labels a series, the histogram with 11 "
				 "bounds; its resident figure is /proc/self/statm's, in whole pages"
			       : "not built here (Debian prometheus-cpp-dev); "
				 "bench/promcpp_compat.sh BUILD_DIR measures it");
	if (opt.smoke)
		printf("\nsmoke: every kind ran and every value was exact\n");
	return 0;
}
