/*
 * What a scrape costs, per series, on the server's side (issue 51, section
 * 2): one registry of N counter series (N/100 families of 100 series, one
 * label, each given a random amount by a thread on every online CPU, so
 * that every CPU's slot holds data), and in one run, for N = 10^3, 10^4, 10^5, text and protobuf,
 * with and without gzip:
 *
 *   writer    pcpu_registry_write() of the registry in this process (and
 *             pcpu_exporter_gzip() at the exporter's level 1 for gzip): the
 *             C API's own cost, the yardstick;
 *   serve     `pcpustat serve` scraped at /metrics over HTTP, the registry
 *             published as a segment (pcpu_segment_publish()): the
 *             exporter process's CPU per scrape -- reading the segment from
 *             outside (the reader never trusts it), merging, labelling
 *             (pcpu_segment, pcpu_pid: a longer exposition), writing, HTTP;
 *   serve1    the same at /metrics/scrapebench: the one segment as it is,
 *             unlabelled, no merge;
 *   lwriter   the exposition serve writes, written in this process: the
 *             registry's snapshot (pcpu_registry_snapshot()) merged with
 *             serve's two labels (pcpu_snapshot_merge_add()) and written
 *             (pcpu_snapshot_merge_write(), and gzip): what the C API costs
 *             for the same longer text, the yardstick serve's own cost
 *             over it is read against;
 *   inproc    the same registry served from inside a process by
 *             libpcpu-exporter (pcpu_exporter_add_registry(): what
 *             pcpu::exposer and examples/exporter.c do), the serving
 *             process's CPU per scrape.
 *
 * The servers' CPU time is read from /proc/PID/task/<TID>/schedstat
 * (nanoseconds, every thread of the process), over a batch of scrapes on
 * one kept-alive connection, as Prometheus scrapes; the client's time is
 * not counted. Each figure is the median of R rounds (a batch each), the
 * variants interleaved round by round. Printed: microseconds per series
 * per scrape, and each over writer -- the target is serve <= 2x writer at
 * every size, format and compression -- and serve over lwriter.
 *
 *   pcpu_bench_scrape PCPUSTAT [--sizes 1000,10000,100000] [--rounds R] [--smoke]
 *
 * --smoke: 10^3 series, 2 rounds of 2 scrapes: every variant runs and
 * answers (ctest bench_scrape_smoke).
 */
#include <errno.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/exporter.h>
#include <pcpu/pcpu.h>
#include <pcpu/segment.h>

#include "bench.h"

#define MAX_SIZES 8

static int rounds = 5, smoke;
/* The servers started, stopped at exit whatever happens (a failed scrape
 * exits at once). */
static pid_t children[2];

/* CPU time of every thread of process pid, in ns (schedstat's first field). */
static double process_cpu_ns(pid_t pid)
{
	char path[64];
	struct dirent *de;
	double sum = 0;
	DIR *d;

	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL) {
		char p[320];
		unsigned long long ns;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/%d/task/%s/schedstat", (int)pid, de->d_name);
		f = fopen(p, "r");
		if (f && fscanf(f, "%llu", &ns) == 1)
			sum += (double)ns;
		if (f)
			fclose(f);
	}
	closedir(d);
	return sum;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the registry ------------------------------------------------------------------ */

/* Every online CPU's thread adds a random amount to every counter, so that
 * each CPU's slot holds data, as in a server whose requests run on every
 * CPU (a reader then sums each series over every slot). */
struct spread {
	pcpu_counter_t *c;
	size_t n;
	int cpu;
};

static void *spread_adds(void *arg)
{
	struct spread *sp = arg;
	uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)(sp->cpu + 1);
	cpu_set_t set;
	size_t i;

	CPU_ZERO(&set);
	CPU_SET(sp->cpu, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
	for (i = 0; i < sp->n; i++)
		pcpu_counter_add(sp->c[i], (int64_t)(bench_xorshift(&x) % 100000));
	return NULL;
}

#define SPREAD_MAX 64 /* threads at most: the first 64 online CPUs */

static void spread_over_cpus(pcpu_counter_t *c, size_t n)
{
	cpu_set_t online;
	struct spread sp[SPREAD_MAX];
	pthread_t t[SPREAD_MAX];
	int cpu, k = 0, j;

	if (sched_getaffinity(0, sizeof online, &online) != 0)
		return;
	for (cpu = 0; cpu < CPU_SETSIZE && k < SPREAD_MAX; cpu++)
		if (CPU_ISSET(cpu, &online)) {
			sp[k].c = c;
			sp[k].n = n;
			sp[k].cpu = cpu;
			if (pthread_create(&t[k], NULL, spread_adds, &sp[k]) == 0)
				k++;
		}
	for (j = 0; j < k; j++)
		pthread_join(t[j], NULL);
}

/* The registry, published in dir (before its first series, as publishing
 * wants), in *segp. */
static pcpu_registry_t *make_registry(size_t n, const char *dir, pcpu_segment_t **segp)
{
	pcpu_registry_t *reg = pcpu_registry_create();
	struct pcpu_segment_options so;
	size_t f, i, per = n < 100 ? n : 100, made = 0;
	pcpu_counter_t *all = calloc(n ? n : 1, sizeof *all);

	if (!reg || !all)
		goto fail;
	memset(&so, 0, sizeof so);
	so.dir = dir;
	*segp = pcpu_segment_publish(reg, "scrapebench", &so);
	if (!*segp) {
		fprintf(stderr, "pcpu_bench_scrape: publish: %s\n", pcpu_segment_error());
		exit(1);
	}
	for (f = 0; f < n / per; f++) {
		char name[64], help[96], value[32];
		struct pcpu_family_desc d;
		pcpu_family_t *fam;

		snprintf(name, sizeof name, "bench_requests_%zu", f);
		snprintf(help, sizeof help, "Requests of kind %zu.", f);
		memset(&d, 0, sizeof d);
		d.name = name;
		d.help = help;
		d.type = PCPU_METRIC_COUNTER;
		d.nlabels = 1;
		d.label_names = (const char *[]){ "id" };
		fam = pcpu_registry_family(reg, &d);
		for (i = 0; fam && i < per; i++) {
			pcpu_counter_t c;

			snprintf(value, sizeof value, "%zu", i);
			c = pcpu_family_counter(fam, (const char *[]){ value });
			if (!c)
				goto fail;
			all[made++] = c;
		}
		if (!fam)
			goto fail;
	}
	spread_over_cpus(all, made);
	free(all);
	return reg;
fail: /* the caller exits */
	free(all);
	return NULL;
}

/* ---- an HTTP client on one kept-alive connection --------------------------------------- */

static int connect_to(int port)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static const char *scrape_path = "/metrics";

/* One GET of scrape_path on fd: the body's length, or -1. */
static long scrape(int fd, enum pcpu_format fmt, int gz)
{
	static char buf[1 << 16];
	char req[512];
	size_t have = 0;
	long clen = -1, got;
	char *end;
	int n;

	n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: bench\r\nAccept: %s\r\n%s\r\n", scrape_path,
		     fmt == PCPU_FORMAT_PROTOBUF
			     ? "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
			     : "text/plain;version=0.0.4",
		     gz ? "Accept-Encoding: gzip\r\n" : "");
	if (write(fd, req, (size_t)n) != n)
		return -1;
	for (;;) {
		ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);

		if (r <= 0)
			return -1;
		have += (size_t)r;
		buf[have] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")) != NULL)
			break;
		if (have == sizeof buf - 1)
			return -1;
	}
	if (strncmp(buf, "HTTP/1.1 200", 12) != 0) {
		fprintf(stderr, "scrape: %.200s\n", buf);
		return -1;
	}
	{
		char *cl = strcasestr(buf, "\r\nContent-Length:");

		if (!cl)
			return -1;
		clen = strtol(cl + 17, NULL, 10);
	}
	got = (long)(have - (size_t)(end + 4 - buf));
	while (got < clen) {
		ssize_t r = read(fd, buf, sizeof buf);

		if (r <= 0)
			return -1;
		got += r;
	}
	return clen;
}

/* A server and the kept-alive connection to it. */
struct server {
	pid_t pid;
	int port, fd;
};

/* CPU ns of the server per scrape of `path` over `batch` scrapes on its
 * connection. A connection the server closed (idle past its timeout while
 * the other variants ran, on a loaded machine) is made again, once. */
static double server_batch(struct server *sv, const char *path, enum pcpu_format fmt, int gz, int batch)
{
	double c0 = process_cpu_ns(sv->pid), c1;
	int i;

	scrape_path = path;
	for (i = 0; i < batch; i++)
		if (scrape(sv->fd, fmt, gz) < 0) {
			close(sv->fd);
			sv->fd = connect_to(sv->port);
			if (sv->fd < 0 || scrape(sv->fd, fmt, gz) < 0) {
				fprintf(stderr, "pcpu_bench_scrape: a scrape of %s failed\n", path);
				exit(1);
			}
		}
	c1 = process_cpu_ns(sv->pid);
	return (c1 - c0) / batch;
}

/* ns per write (and gzip) over `batch` calls: pcpu_registry_write(), or
 * with `labelled` the exposition serve writes for the segment -- a
 * snapshot of the registry merged with the two labels serve gives it,
 * written by pcpu_snapshot_merge_write(). */
static double writer_batch(pcpu_registry_t *reg, enum pcpu_format fmt, int gz, int batch, int labelled)
{
	static const char *const names[2] = { "pcpu_segment", "pcpu_pid" };
	char pid[16];
	const char *values[2] = { "scrapebench", pid };
	double t0;
	int i;

	snprintf(pid, sizeof pid, "%d", (int)getpid());
	t0 = (double)bench_thread_cpu_ns();
	for (i = 0; i < batch; i++) {
		struct pcpu_snapshot *snap = NULL;
		pcpu_snapshot_merge_t *m = NULL;
		char *out, *z;
		size_t len, zlen;
		int rc;

		if (labelled) {
			snap = pcpu_registry_snapshot(reg);
			m = pcpu_snapshot_merge_new();
			rc = !snap || !m || pcpu_snapshot_merge_add(m, snap, 2, names, values) != 0 ||
			     pcpu_snapshot_merge_write(m, fmt, &out, &len) != 0;
		} else {
			rc = pcpu_registry_write(reg, fmt, &out, &len) != 0;
		}
		if (rc) {
			fprintf(stderr, "%s: %s\n", labelled ? "labelled write" : "pcpu_registry_write",
				pcpu_stats_error());
			exit(1);
		}
		if (gz) {
			z = pcpu_exporter_gzip(out, len, 1, &zlen);
			free(z);
		}
		free(out);
		pcpu_snapshot_merge_free(m);
		pcpu_snapshot_free(snap);
	}
	return ((double)bench_thread_cpu_ns() - t0) / batch;
}

/* ---- the servers ------------------------------------------------------------------ */

/* `pcpustat serve` on dir: its pid, and its port in *port. */
static pid_t start_serve(const char *pcpustat, const char *dir, int *port)
{
	int out[2];
	pid_t pid;
	char line[256];
	FILE *f;
	char *p;

	if (pipe(out) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		execl(pcpustat, pcpustat, "serve", "--listen", "127.0.0.1:0", "--dir", dir, "--max-bytes", "4G",
		      (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	f = fdopen(out[0], "r");
	if (!f || !fgets(line, sizeof line, f) || !(p = strstr(line, "://")) || !(p = strchr(p + 3, ':'))) {
		fprintf(stderr, "pcpu_bench_scrape: pcpustat serve did not start\n");
		exit(1);
	}
	*port = atoi(p + 1);
	fclose(f);
	return pid;
}

/* A child serving reg in process (libpcpu-exporter's registry source). */
static pid_t start_inproc(pcpu_registry_t *reg, int *port)
{
	int pfd[2];
	pid_t pid;

	if (pipe(pfd) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		pcpu_exporter_t *e = pcpu_exporter_new();
		int p = -1;

		close(pfd[0]);
		if (e && pcpu_exporter_listen(e, "127.0.0.1:0") == 0 &&
		    pcpu_exporter_add_registry(e, "/metrics", reg) == 0 && pcpu_exporter_start(e) == 0)
			p = pcpu_exporter_port(e, 0);
		if (write(pfd[1], &p, sizeof p) != sizeof p || p < 0)
			_exit(1);
		for (;;)
			pause();
	}
	close(pfd[1]);
	if (read(pfd[0], port, sizeof *port) != sizeof *port || *port < 0) {
		fprintf(stderr, "pcpu_bench_scrape: the in-process exporter did not start\n");
		exit(1);
	}
	close(pfd[0]);
	return pid;
}

static void stop_child(pid_t pid)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/* ---- one size ---------------------------------------------------------------------- */

static void run_size(const char *pcpustat, size_t n)
{
	static const enum pcpu_format fmts[2] = { PCPU_FORMAT_PROMETHEUS, PCPU_FORMAT_PROTOBUF };
	char dir[] = "/tmp/pcpu-scrape-bench.XXXXXX";
	pcpu_registry_t *reg;
	pcpu_segment_t *seg = NULL;
	struct server serve, inproc;
	int f, gz, r;
	/* Scrapes per batch: about 10^6 series' worth, at least 3. */
	int batch = smoke ? 2 : n >= 100000 ? 3 : (int)(1000000 / n) < 3 ? 3 : (int)(1000000 / n);

	if (!mkdtemp(dir) || !(reg = make_registry(n, dir, &seg))) {
		fprintf(stderr, "pcpu_bench_scrape: cannot make the registry: %s\n", pcpu_stats_error());
		exit(1);
	}
	serve.pid = children[0] = start_serve(pcpustat, dir, &serve.port);
	inproc.pid = children[1] = start_inproc(reg, &inproc.port);
	serve.fd = connect_to(serve.port);
	inproc.fd = connect_to(inproc.port);
	if (serve.fd < 0 || inproc.fd < 0) {
		fprintf(stderr, "pcpu_bench_scrape: cannot connect\n");
		exit(1);
	}
	for (f = 0; f < 2; f++) {
		if (!pcpu_format_supported(fmts[f]))
			continue;
		for (gz = 0; gz < 2; gz++) {
			double w[64], s[64], s1[64], p[64], lw[64], wm, sm, s1m, pm, lwm;

			/* Warm up: the first scrapes fault in what later ones reuse. */
			server_batch(&serve, "/metrics", fmts[f], gz, 2);
			server_batch(&serve, "/metrics/scrapebench", fmts[f], gz, 2);
			server_batch(&inproc, "/metrics", fmts[f], gz, 2);
			writer_batch(reg, fmts[f], gz, 2, 0);
			writer_batch(reg, fmts[f], gz, 2, 1);
			for (r = 0; r < rounds && r < 64; r++) {
				/* Interleaved, each round starting elsewhere. */
				int k;

				for (k = 0; k < 5; k++)
					switch ((r + k) % 5) {
					case 4:
						lw[r] = writer_batch(reg, fmts[f], gz, batch, 1);
						break;
					case 0:
						w[r] = writer_batch(reg, fmts[f], gz, batch, 0);
						break;
					case 1:
						s[r] = server_batch(&serve, "/metrics", fmts[f], gz, batch);
						break;
					case 2:
						s1[r] = server_batch(&serve, "/metrics/scrapebench", fmts[f], gz, batch);
						break;
					default:
						p[r] = server_batch(&inproc, "/metrics", fmts[f], gz, batch);
						break;
					}
			}
			wm = median(w, r);
			sm = median(s, r);
			s1m = median(s1, r);
			pm = median(p, r);
			lwm = median(lw, r);
			printf("| %6zu | %-8s | %-4s | %6.3f | %6.3f | %6.3f | %6.3f | %6.3f | %5.2fx | %5.2fx | %5.2fx | "
			       "%5.2fx | %5.2fx |\n",
			       n, fmts[f] == PCPU_FORMAT_PROTOBUF ? "protobuf" : "text", gz ? "gzip" : "none",
			       wm / 1000 / (double)n, sm / 1000 / (double)n, s1m / 1000 / (double)n, pm / 1000 / (double)n,
			       lwm / 1000 / (double)n, sm / wm, s1m / wm, pm / wm, lwm / wm, sm / lwm);
			fflush(stdout);
		}
	}
	close(serve.fd);
	close(inproc.fd);
	stop_child(serve.pid);
	stop_child(inproc.pid);
	children[0] = children[1] = 0;
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	rmdir(dir);
}

static void stop_children(void)
{
	int i;

	for (i = 0; i < 2; i++)
		if (children[i] > 0)
			stop_child(children[i]);
}

int main(int argc, char **argv)
{
	size_t sizes[MAX_SIZES] = { 1000, 10000, 100000 }, nsizes = 3, i;
	const char *pcpustat = NULL;
	int a;

	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--smoke") == 0) {
			smoke = 1;
			rounds = 2;
			sizes[0] = 1000;
			nsizes = 1;
		} else if (strcmp(argv[a], "--rounds") == 0 && a + 1 < argc) {
			rounds = atoi(argv[++a]);
		} else if (strcmp(argv[a], "--sizes") == 0 && a + 1 < argc) {
			char *s = argv[++a], *tok;

			for (nsizes = 0; (tok = strtok(s, ",")) && nsizes < MAX_SIZES; s = NULL)
				sizes[nsizes++] = strtoul(tok, NULL, 10);
		} else if (!pcpustat && argv[a][0] != '-') {
			pcpustat = argv[a];
		} else {
			fprintf(stderr, "usage: pcpu_bench_scrape PCPUSTAT [--sizes N,N...] [--rounds R] [--smoke]\n");
			return 2;
		}
	}
	if (!pcpustat || rounds < 1 || rounds > 64) {
		fprintf(stderr, "usage: pcpu_bench_scrape PCPUSTAT [--sizes N,N...] [--rounds R] [--smoke]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	atexit(stop_children);
	printf("CPU per series per scrape (us), median of %d rounds; serve (/metrics), serve1\n"
	       "(/metrics/SEGMENT) and inproc: the server process's CPU (all threads); lwriter: serve's\n"
	       "labelled exposition written in process; target serve <= 2x writer\n\n",
	       rounds);
	printf("| series | format   | gzip | writer | serve  | serve1 | inproc | lwriter | serve/writer | serve1/writer | "
	       "inproc/writer | lwriter/writer | serve/lwriter |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (i = 0; i < nsizes; i++)
		run_size(pcpustat, sizes[i]);
	return 0;
}
