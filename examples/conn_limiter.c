/* SPDX-License-Identifier: MIT */
/*
 * A connection limiter: a thread-per-connection TCP server that admits at
 * most --max connections at once, with a hierarchical counter
 * (pcpu/hcounter.h) as the count of open connections.
 *
 * Each worker thread accepts on the shared listening socket; an accepted
 * connection is served only if pcpu_hcounter_limited_add(open, 1, max)
 * admits it, else it is answered "busy" and closed; closing a served one
 * is pcpu_hcounter_add(open, -1). While the count is far from the limit,
 * an admission is one rseq add on the worker's CPU and a read of one cache
 * line -- no shared atomic for the workers to fight over; near the limit
 * the counter counts exactly, so no more than --max are ever open.
 *
 * The program runs its own clients (--clients threads connecting to the
 * server on 127.0.0.1, an ephemeral port), checks that no more than --max
 * connections were ever served at once, and publishes a statistics segment
 * named conn_limiter while it runs, with the count's approximation and
 * bounds as gauges:
 *
 *     build/examples/pcpu_example_conn_limiter --seconds 30 &
 *     build/tools/pcpustat conn_limiter
 *       connections_open{bound="value"} ...  {bound="min"} ...  {bound="max"} ...
 *
 * Usage: pcpu_example_conn_limiter [--max N] [--workers N] [--clients N]
 *        [--seconds S]
 * Exit 0 when the limit held, 1 otherwise (or on an error).
 */
#include <pcpu/pcpu.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int max_open = 8, nworkers = 16, nclients = 24, stop;
static double seconds = 3;
static int listen_fd;
static struct sockaddr_in addr;
static pcpu_hcounter_t *open_conns;
static pcpu_counter_t served, refused;
static int serving, violated; /* a check of the example's own: served at once */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Serves one admitted connection: echoes lines until the client closes. */
static void serve(int fd)
{
	char buf[256];
	ssize_t n;

	if (__atomic_add_fetch(&serving, 1, __ATOMIC_SEQ_CST) > max_open)
		__atomic_store_n(&violated, 1, __ATOMIC_RELAXED);
	(void)!write(fd, "hello\n", 6);
	while ((n = read(fd, buf, sizeof buf)) > 0)
		(void)!write(fd, buf, (size_t)n);
	__atomic_sub_fetch(&serving, 1, __ATOMIC_SEQ_CST);
}

static void *worker(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct pollfd p = { .fd = listen_fd, .events = POLLIN };
		int fd;

		if (poll(&p, 1, 50) <= 0)
			continue;
		fd = accept(listen_fd, NULL, NULL);
		if (fd < 0)
			continue;
		if (pcpu_hcounter_limited_add(open_conns, 1, max_open)) {
			pcpu_counter_inc(served);
			serve(fd);
			close(fd);
			pcpu_hcounter_add(open_conns, -1); /* after the close */
		} else {
			pcpu_counter_inc(refused);
			(void)!write(fd, "busy\n", 5);
			close(fd);
		}
	}
	return NULL;
}

static void *client(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		char buf[16];

		if (fd < 0)
			return NULL;
		if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
		    read(fd, buf, sizeof buf) > 0 && buf[0] == 'h') {
			/* Admitted: a short conversation. */
			usleep(200 + rand_r(&seed) % 2000);
			(void)!write(fd, "ping\n", 5);
			(void)!read(fd, buf, sizeof buf);
		}
		close(fd);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t w[256], c[256];
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	socklen_t len = sizeof addr;
	struct pcpu_hcounter_approx a;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--max"))
			max_open = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--workers"))
			nworkers = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--clients"))
			nclients = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else
			break;
	}
	if (max_open < 1 || nworkers < 1 || nworkers > 256 || nclients < 1 || nclients > 256) {
		fprintf(stderr, "usage: %s [--max N] [--workers 1-256] [--clients 1-256] [--seconds S]\n",
			argv[0]);
		return 2;
	}
	/* The count of open connections, and the statistics pcpustat shows. */
	open_conns = pcpu_hcounter_create(32);
	reg = pcpu_registry_create();
	/* Published first, before any series (pcpustat conn_limiter). */
	seg = reg ? pcpu_segment_publish(reg, "conn_limiter", NULL) : NULL;
	if (reg && !seg)
		fprintf(stderr, "no segment: %s\n", pcpu_segment_error());
	if (!open_conns || !reg ||
	    !pcpu_registry_hcounter(reg, "connections_open", "Connections being served.", open_conns) ||
	    !(served = pcpu_registry_counter(reg, "connections_served_total", "Connections admitted.")) ||
	    !(refused = pcpu_registry_counter(reg, "connections_refused_total",
					      "Connections answered busy."))) {
		perror("pcpu");
		return 1;
	}

	/* Non-blocking: two workers woken by one connection both try accept();
	 * the one that loses must go back to poll(), not wait in accept(). */
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	memset(&addr, 0, sizeof addr);
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&addr, sizeof addr) < 0 ||
	    listen(listen_fd, 1024) < 0 || getsockname(listen_fd, (struct sockaddr *)&addr, &len) < 0) {
		perror("listen");
		return 1;
	}
	for (int i = 0; i < nworkers; i++)
		pthread_create(&w[i], NULL, worker, NULL);
	for (int i = 0; i < nclients; i++)
		pthread_create(&c[i], NULL, client, (void *)(uintptr_t)(i + 1));
	for (double end = now() + seconds; now() < end;) {
		sleep(1);
		if (seg)
			(void)pcpu_registry_collect(reg); /* the gauges' values for pcpustat */
	}
	/* The workers first (each finishes the connection it serves), then
	 * the listening socket: connections still queued in its backlog are
	 * reset, so that no client waits for ever for a "hello" no worker
	 * will send (a loaded machine had clients connect after the workers
	 * stopped, and the example hung). */
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nworkers; i++)
		pthread_join(w[i], NULL);
	close(listen_fd);
	for (int i = 0; i < nclients; i++)
		pthread_join(c[i], NULL);

	a = pcpu_hcounter_approx(open_conns);
	printf("max %d open: %llu served, %llu refused; open now %lld (approx %lld in [%lld, %lld])\n",
	       max_open, (unsigned long long)pcpu_counter_fetch(served),
	       (unsigned long long)pcpu_counter_fetch(refused), (long long)pcpu_hcounter_sum(open_conns),
	       (long long)a.value, (long long)a.min, (long long)a.max);
	if (violated || pcpu_hcounter_sum(open_conns) != 0) {
		printf("FAIL: more than %d connections were served at once\n", max_open);
		return 1;
	}
	printf("never more than %d served at once\n", max_open);
	if (seg)
		pcpu_segment_unpublish(seg);
	pcpu_registry_destroy(reg);
	pcpu_hcounter_destroy(open_conns);
	return 0;
}
