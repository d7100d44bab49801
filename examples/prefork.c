/*
 * A pre-fork server's statistics: one registry for the whole process tree
 * (README.md, "Pre-fork servers").
 *
 * The master creates a registry, declares its families, publishes it with
 * PCPU_SEGMENT_SHARED_TREE and forks its workers. Each worker "serves
 * requests": it counts them by path and status -- label values it meets as
 * it goes, so it registers series long after fork() -- and records their
 * latency. Every worker adds into the same per-CPU copies, with the same
 * inline add as a single process; a series two workers register is one
 * series. The master restarts a worker that dies, and on SIGTERM or SIGINT
 * stops them, reads the whole tree back through its segment (what
 * `pcpustat` and `pcpustat serve` read) and checks that the requests
 * counted equal those the workers said they served.
 *
 *   pcpu_example_prefork [--workers N] [--seconds S] [--name NAME]
 *   pcpustat prefork                  # one segment for the whole tree
 *   pcpustat serve prefork            # http://127.0.0.1:9464/metrics
 *
 * Slots must be CPU numbers: mm_cid is per process, and publishing a shared
 * registry without CPU-number slots fails with EINVAL. So the master's first
 * pcpu call is pcpu_configure(), which chooses them for the process.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/pcpu.h>

#define MAX_WORKERS 256

static const char *paths[] = {"/", "/login", "/search", "/cart", "/checkout", "/api/items"};
static const char *statuses[] = {"200", "200", "200", "304", "404", "500"};

/* What each worker says it served: in memory shared with the master, one
 * word per worker, which only that worker writes. */
static volatile uint64_t *served;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void worker(int id, pcpu_family_t *requests, pcpu_family_t *latency, double seconds)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(getpid() + id);
	struct timespec t0, now;

	signal(SIGINT, SIG_IGN); /* a terminal's ^C is the master's to pass on */
	signal(SIGTERM, on_signal);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!stop) {
		for (int i = 0; i < 1000; i++) {
			const char *labels[2];
			int64_t us;

			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			labels[0] = paths[rng % 6];
			labels[1] = statuses[(rng >> 8) % 6];
			us = (int64_t)((rng >> 16) % 50000) + 50;
			/* The first request for a (path, status) registers its
			 * series -- found again if another worker made it. A real
			 * server keeps the handles it gets. */
			pcpu_counter_inc(pcpu_family_counter(requests, labels));
			pcpu_histogram_record(pcpu_family_histogram(latency, labels), us);
			served[id]++;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (seconds > 0 &&
		    (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 >= seconds)
			break;
	}
	_exit(0);
}

static pid_t spawn(int id, pcpu_family_t *requests, pcpu_family_t *latency, double seconds)
{
	pid_t pid = fork();

	if (pid == 0)
		worker(id, requests, latency, seconds);
	return pid;
}

/* The tree's total of http_requests, read the way pcpustat reads it. */
static int read_total(const char *name, uint64_t *total, size_t *nseries)
{
	struct pcpu_reader_snapshot *s;
	pcpu_reader_t *r = pcpu_reader_open(name, NULL);

	if (!r)
		return -1;
	if (pcpu_reader_snapshot(r, 0, &s) != 0) {
		pcpu_reader_close(r);
		return -1;
	}
	*total = 0;
	*nseries = 0;
	for (size_t f = 0; f < s->snapshot.nfamilies; f++)
		if (!strcmp(s->snapshot.families[f].name, "http_requests"))
			for (size_t i = 0; i < s->snapshot.families[f].nseries; i++) {
				*total += s->snapshot.families[f].series[i].value.counter;
				(*nseries)++;
			}
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct pcpu_histogram_layout us = {
		.scheme = PCPU_HISTOGRAM_LOG_LINEAR, .precision_bits = 2, .max_value = 10000000,
		.export_per_octave = 1};
	struct pcpu_segment_options opts = {.flags = PCPU_SEGMENT_SHARED_TREE};
	const char *name = "prefork";
	int nworkers = 4, restarts = 0;
	double seconds = 0;
	pid_t pids[MAX_WORKERS];
	pcpu_registry_t *reg;
	pcpu_family_t *requests, *latency;
	pcpu_segment_t *seg;
	uint64_t total, want = 0;
	size_t nseries;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--workers") && i + 1 < argc)
			nworkers = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--name") && i + 1 < argc)
			name = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--workers N] [--seconds S] [--name NAME]\n",
				argv[0]);
			return 2;
		}
	}
	if (nworkers < 1 || nworkers > MAX_WORKERS) {
		fprintf(stderr, "prefork: 1 to %d workers\n", MAX_WORKERS);
		return 2;
	}
	served = mmap(NULL, MAX_WORKERS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (served == MAP_FAILED)
		return perror("mmap"), 1;

	/* The master: CPU-number slots, families, then the shared registry,
	 * then the workers. */
	struct pcpu_config cfg = PCPU_CONFIG_INIT;
	cfg.index = PCPU_INDEX_CPU;
	if (pcpu_configure(&cfg) != 0)
		return perror("pcpu_configure"), 1;
	reg = pcpu_registry_create();
	requests = pcpu_registry_family(reg, &(struct pcpu_family_desc){
		.name = "http_requests", .help = "Requests served, by path and status",
		.type = PCPU_METRIC_COUNTER, .nlabels = 2,
		.label_names = (const char *[]){"path", "status"}});
	latency = pcpu_registry_family(reg, &(struct pcpu_family_desc){
		.name = "http_request_duration_seconds", .help = "Time to serve a request",
		.type = PCPU_METRIC_HISTOGRAM, .nlabels = 2,
		.label_names = (const char *[]){"path", "status"}, .scale_exp10 = -6, /* us -> s */
		.histogram = &us});
	if (!requests || !latency) {
		fprintf(stderr, "prefork: %s\n", pcpu_stats_error());
		return 1;
	}
	seg = pcpu_segment_publish(reg, name, &opts);
	if (!seg) {
		fprintf(stderr, "prefork: publishing: %s\n", pcpu_segment_error());
		return 1;
	}
	printf("prefork: master %d, %d workers, segment %s\n", (int)getpid(), nworkers,
	       pcpu_segment_path(seg));
	fflush(stdout);
	{
		/* Not SA_RESTART: wait() below must return EINTR to pass the
		 * stop on to the workers. */
		struct sigaction sa = {.sa_handler = on_signal};

		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}
	for (int i = 0; i < nworkers; i++)
		pids[i] = spawn(i, requests, latency, seconds);

	/* Restart workers that die before they were asked to stop; with
	 * --seconds, the workers end by themselves. */
	for (int alive = nworkers; alive > 0;) {
		int st;
		pid_t pid = wait(&st);

		if (pid < 0) {
			if (errno == EINTR) {
				if (stop)
					for (int i = 0; i < nworkers; i++)
						if (pids[i] > 0)
							kill(pids[i], SIGTERM);
				continue;
			}
			break;
		}
		for (int i = 0; i < nworkers; i++)
			if (pids[i] == pid) {
				pids[i] = -1;
				if (!stop && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
					pids[i] = spawn(i, requests, latency, seconds);
					restarts++;
				} else {
					alive--;
				}
			}
	}
	for (int i = 0; i < nworkers; i++)
		want += served[i];
	if (read_total(name, &total, &nseries) != 0) {
		fprintf(stderr, "prefork: reading the segment: %s\n", pcpu_reader_error());
		return 1;
	}
	printf("prefork: %" PRIu64 " requests served, %" PRIu64 " counted in %zu series, %d restarts\n",
	       want, total, nseries, restarts);
	pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	/* A worker killed between its add and its note would make total one
	 * more than want; a clean stop makes them equal. */
	return total == want ? 0 : 1;
}
