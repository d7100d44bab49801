/* SPDX-License-Identifier: MIT */
/*
 * Clocks, statistics, tables and CSV files of the benchmark suite.
 *
 * Clocks: bench_ticks() (the TSC) is what the data-plane section reports in,
 * as DPDK's guide does; it is calibrated once against CLOCK_MONOTONIC so
 * nanoseconds and TSC cycles convert both ways. The TSC counts at a constant
 * rate whatever the core clock does, so "TSC cycles" are wall time in a
 * CPU-independent unit, not core cycles.
 */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* One tick/ns pair, read so that the clock read sits between two tick
 * reads close together: an interrupt between them would blur the pair, so
 * keep the tightest of a few tries. */
static void tick_ns_pair(uint64_t *ticks, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	int i;

	for (i = 0; i < 16; i++) {
		uint64_t t0 = bench_ticks();
		uint64_t n = bench_now_ns();
		uint64_t t1 = bench_ticks();

		if (t1 - t0 < best) {
			best = t1 - t0;
			*ticks = t0 + (t1 - t0) / 2;
			*ns = n;
		}
	}
}

void bench_calibrate_ticks(void)
{
	double r[3];
	int i;

	/* Three 20 ms windows; the median resists one disturbed window. */
	for (i = 0; i < 3; i++) {
		uint64_t t0, n0, t1, n1;

		tick_ns_pair(&t0, &n0);
		bench_sleep_ns(20 * 1000 * 1000);
		tick_ns_pair(&t1, &n1);
		r[i] = (double)(t1 - t0) / (double)(n1 - n0);
	}
	bench_tsc_ghz = bench_median(r, 3);
}

void bench_machine_usage(struct bench_usage *u)
{
	unsigned long long v[8] = { 0 };
	long hz = sysconf(_SC_CLK_TCK);
	struct rusage ru;
	FILE *f = fopen("/proc/stat", "r");

	memset(u, 0, sizeof(*u));
	u->wall_s = (double)bench_now_ns() / 1e9;
	if (f) {
		/* cpu  user nice system idle iowait irq softirq steal */
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
			u->busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)hz;
			u->steal_s = (double)v[7] / (double)hz;
		}
		fclose(f);
	}
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		u->self_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
			    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	/* The processes this program runs itself (a second index, memory
	 * configurations) are ours too, once waited for. */
	if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
		u->self_s += (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
			     (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Since `start`: the wall time, the CPU time others used and the hypervisor
 * stole, and their share of the machine. */
static double usage_since(const struct bench_usage *start, double *wall, double *others,
			  double *steal)
{
	struct bench_usage now;

	bench_machine_usage(&now);
	*wall = now.wall_s - start->wall_s;
	*others = (now.busy_s - start->busy_s) - (now.self_s - start->self_s);
	if (*others < 0)
		*others = 0; /* the two clocks tick at different granularity */
	*steal = now.steal_s - start->steal_s;
	return *wall > 0 ? (*others + *steal) / (*wall * bench_ncpu) : 0;
}

double bench_usage_share(const struct bench_usage *start)
{
	double wall, others, steal;

	return usage_since(start, &wall, &others, &steal);
}

void bench_print_usage(const char *what, const struct bench_usage *start)
{
	double wall, others, steal, share = usage_since(start, &wall, &others, &steal);

	/* Three decimals: a 0.1 s section with 0.02 CPU-s of others (10 %)
	 * printed "0.0 CPU-s ... 10 %" with one, and 0.006 CPU-s (3 %) "0.00"
	 * with two. */
	printf("(%s: %.1f s; meanwhile other processes used %.3f CPU-s and the hypervisor "
	       "stole %.3f CPU-s, %.0f%% of the machine%s)\n\n", what, wall, others, steal,
	       100 * share, share > BENCH_DISTURBED ? " — **disturbed: figures not representative**" : "");
}

enum pcpu_index bench_process_index(void)
{
	return pcpu_zone_index(NULL);
}

const char *bench_index_name(int index)
{
	return index == PCPU_INDEX_CPU ? "cpu" : index == PCPU_INDEX_MM_CID ? "mm_cid" : "?";
}

long bench_run_self(char *const args[], const char *const env[], void *buf, size_t len)
{
	char *argv[64];
	int fds[2], status;
	unsigned n = 0, i;
	size_t got = 0;
	pid_t pid;

	argv[n++] = bench_opt.argv[0];
	for (i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if (pipe(fds) != 0)
		bench_die("pipe: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		for (i = 0; env && env[i]; i++) {
			const char *eq = strchr(env[i], '=');

			if (eq) {
				char name[64];

				snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
				setenv(name, eq + 1, 1);
			} else {
				unsetenv(env[i]);
			}
		}
		close(fds[0]);
		if (fds[1] != 3) {
			dup2(fds[1], 3);
			close(fds[1]);
		}
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		ssize_t r = read(fds[0], (char *)buf + got, len - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == len) {
			char sink[256];

			while (read(fds[0], sink, sizeof(sink)) > 0)
				;
			break;
		}
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return (long)got;
}

long bench_smaps_rollup_kb(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	long kb = -1;
	FILE *f = fopen("/proc/self/smaps_rollup", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			kb = strtol(line + klen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

long bench_rss_bytes(void)
{
	long kb = bench_smaps_rollup_kb("Rss"), pages, resident;
	FILE *f;

	if (kb >= 0)
		return kb * 1024;
	f = fopen("/proc/self/statm", "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

void bench_progress(const char *fmt, ...)
{
	va_list ap;

	fputs("progress: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void *bench_xmalloc(size_t size)
{
	void *p = NULL;

	size = (size + BENCH_CACHELINE - 1) & ~(size_t)(BENCH_CACHELINE - 1);
	if (posix_memalign(&p, BENCH_CACHELINE, size ? size : BENCH_CACHELINE) != 0)
		bench_die("out of memory (%zu bytes)", size);
	memset(p, 0, size);
	return p;
}

pthread_t bench_thread_start(void *(*fn)(void *), void *arg, int cpu)
{
	pthread_attr_t attr;
	pthread_t tid;
	int err;

	pthread_attr_init(&attr);
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	err = pthread_create(&tid, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	if (err)
		bench_die("pthread_create: %s", strerror(err));
	return tid;
}

int bench_allowed_cpu(unsigned n)
{
	cpu_set_t set;
	unsigned seen = 0;
	int cpu;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return (int)n;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (CPU_ISSET(cpu, &set) && seen++ == n)
			return cpu;
	}
	return -1;
}

long bench_proc_status_kb(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			kb = strtol(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb;
}

/* ---- statistics ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Linear interpolation between order statistics (the usual "type 7"). */
static double quantile(const double *sorted, unsigned n, double q)
{
	double pos = q * (n - 1);
	unsigned lo = (unsigned)pos;

	if (lo + 1 >= n)
		return sorted[n - 1];
	return sorted[lo] + (pos - lo) * (sorted[lo + 1] - sorted[lo]);
}

/* The rank k (1-based) of the distribution-free 95 % confidence interval of
 * a median, [x_(k), x_(n+1-k)]: the largest k with P(B <= k-1) <= 0.025 for
 * B ~ binomial(n, 1/2). 0 when n is too small for any (n < 6). */
static unsigned median_ci_rank(unsigned n)
{
	double cum = 0;
	unsigned j, k = 0;

	for (j = 0; j < n; j++) {
		cum += exp(lgamma(n + 1.0) - lgamma(j + 1.0) - lgamma(n - j + 1.0) - n * log(2.0));
		if (cum > 0.025)
			break;
		k = j + 1;
	}
	return k;
}

struct bench_stat bench_stat_of(const double *v, unsigned n)
{
	struct bench_stat s = { NAN, NAN, NAN, NAN, NAN, NAN, NAN, n };
	double *tmp;
	unsigned k;

	if (n == 0)
		return s;
	tmp = malloc(n * sizeof(*tmp));
	if (!tmp)
		bench_die("out of memory");
	memcpy(tmp, v, n * sizeof(*tmp));
	qsort(tmp, n, sizeof(*tmp), cmp_double);
	s.min = tmp[0];
	s.max = tmp[n - 1];
	s.med = quantile(tmp, n, 0.5);
	s.q1 = quantile(tmp, n, 0.25);
	s.q3 = quantile(tmp, n, 0.75);
	k = median_ci_rank(n);
	if (k > 0) {
		s.ci_lo = tmp[k - 1];
		s.ci_hi = tmp[n - k];
	}
	free(tmp);
	return s;
}

double bench_median(const double *v, unsigned n)
{
	return bench_stat_of(v, n).med;
}

/* ---- output ------------------------------------------------------------------- */

static char *xvasprintf(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0)
		bench_die("out of memory");
	return s;
}

void tbl_init(struct tbl *t, unsigned ncols)
{
	memset(t, 0, sizeof(*t));
	if (ncols > TBL_MAX_COLS)
		bench_die("table with %u columns", ncols);
	t->ncols = ncols;
}

void tbl_headers(struct tbl *t, ...)
{
	va_list ap;
	const char *h;

	va_start(ap, t);
	while ((h = va_arg(ap, const char *)))
		tbl_cell(t, "%s", h);
	va_end(ap);
}

void tbl_cell(struct tbl *t, const char *fmt, ...)
{
	va_list ap;

	if (t->nrows > TBL_MAX_ROWS)
		bench_die("table with more than %u rows", TBL_MAX_ROWS);
	va_start(ap, fmt);
	t->cells[t->nrows][t->cur] = xvasprintf(fmt, ap);
	va_end(ap);
	if (++t->cur == t->ncols) {
		t->cur = 0;
		t->nrows++;
	}
}

/* Display width of a UTF-8 string (the tables use "–" and "×"). */
static unsigned utf8_width(const char *s)
{
	unsigned w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

void tbl_print(struct tbl *t)
{
	unsigned width[TBL_MAX_COLS] = { 0 };
	unsigned r, c;

	for (r = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++) {
			unsigned w = t->cells[r][c] ? utf8_width(t->cells[r][c]) : 0;

			if (w > width[c])
				width[c] = w;
		}
	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r][c] ? t->cells[r][c] : "";

			printf("| %s%*s ", s, (int)(width[c] - utf8_width(s)), "");
		}
		printf("|\n");
		if (r == 0) {
			for (c = 0; c < t->ncols; c++) {
				unsigned k;

				putchar('|');
				for (k = 0; k < width[c] + 2; k++)
					putchar('-');
			}
			printf("|\n");
		}
	}
	printf("\n");
	for (r = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++)
			free(t->cells[r][c]);
	memset(t, 0, sizeof(*t));
}

const char *bench_fmt_num(char *buf, size_t len, double v)
{
	double a = fabs(v);

	if (isnan(v))
		snprintf(buf, len, "n/a");
	else if (a >= 1000)
		snprintf(buf, len, "%.0f", v);
	else if (a >= 100)
		snprintf(buf, len, "%.1f", v);
	else if (a >= 10)
		snprintf(buf, len, "%.2f", v);
	else
		snprintf(buf, len, "%.3g", v);
	return buf;
}

const char *bench_fmt_stat(char *buf, size_t len, struct bench_stat s)
{
	char a[32], b[32], c[32];

	if (s.n <= 1)
		return bench_fmt_num(buf, len, s.med);
	snprintf(buf, len, "%s (%s–%s)", bench_fmt_num(a, sizeof(a), s.med),
		 bench_fmt_num(b, sizeof(b), s.min), bench_fmt_num(c, sizeof(c), s.max));
	return buf;
}

const char *bench_fmt_ratio(char *buf, size_t len, struct bench_stat s, int digits)
{
	if (isnan(s.ci_lo))
		snprintf(buf, len, "%.*f× (%.*f–%.*f)", digits, s.med, digits, s.min, digits, s.max);
	else
		snprintf(buf, len, "%.*f× (%.*f–%.*f) [%.*f–%.*f]", digits, s.med, digits, s.min,
			 digits, s.max, digits, s.ci_lo, digits, s.ci_hi);
	return buf;
}

FILE *bench_csv_open(const char *name, const char *header)
{
	char path[4096];
	FILE *f;

	if (!bench_opt.csv_dir)
		return NULL;
	mkdir(bench_opt.csv_dir, 0777); /* exists already: fine; else fopen says */
	snprintf(path, sizeof(path), "%s/%s", bench_opt.csv_dir, name);
	f = fopen(path, "w");
	if (!f)
		bench_die("cannot write %s: %s", path, strerror(errno));
	fprintf(f, "%s\n", header);
	return f;
}
