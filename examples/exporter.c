/* A program serving its own registry to Prometheus over HTTP (or HTTPS with
 * basic authentication: the exporter toolkit's web configuration file),
 * with libpcpu-exporter -- the same server `pcpustat serve` is:
 *
 *     pcpu_example_exporter [ADDRESS [WEB_CONFIG|- [TIMEOUT]]]
 *     curl http://127.0.0.1:9464/metrics         (the default ADDRESS)
 *
 * TIMEOUT: seconds of inactivity before a connection is closed (default 10;
 * the hostile tests lengthen it, to show idle clients are shed before it).
 * Its "work" counts a request every millisecond until SIGINT or SIGTERM. */
#define _GNU_SOURCE
#include <pcpu/exporter.h>
#include <pcpu/pcpu.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	struct pcpu_family_desc d = { .name = "example_requests", .help = "Requests served.",
				      .type = PCPU_METRIC_COUNTER, .nlabels = 1,
				      .label_names = (const char *[]){"method"} };
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_counter_t get = reg ? pcpu_family_counter(pcpu_registry_family(reg, &d), (const char *[]){"GET"}) : NULL;
	if (!get) {
		fprintf(stderr, "pcpu: %s\n", pcpu_stats_error());
		return 1;
	}
	/* SIGINT and SIGTERM for sigtimedwait() below, not the server's threads. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);

	/* The whole server: an address, the registry at /metrics, start. */
	pcpu_exporter_t *e = pcpu_exporter_new();
	if (!e || pcpu_exporter_listen(e, argc > 1 ? argv[1] : "127.0.0.1:9464") < 0 ||
	    (argc > 2 && strcmp(argv[2], "-") != 0 && pcpu_exporter_web_config(e, argv[2]) < 0) ||
	    (argc > 3 && pcpu_exporter_set_timeout(e, (unsigned)atoi(argv[3])) < 0) ||
	    pcpu_exporter_add_registry(e, "/metrics", reg) < 0 || pcpu_exporter_start(e) < 0) {
		fprintf(stderr, "pcpu_example_exporter: %s\n", pcpu_exporter_error());
		return 1;
	}
	char where[128];
	pcpu_exporter_address(e, 0, where, sizeof where);
	printf("serving %s://%s/metrics\n", pcpu_exporter_tls(e) ? "https" : "http", where);
	fflush(stdout);

	struct timespec ms = { 0, 1000000 };
	while (sigtimedwait(&stop, NULL, &ms) < 0)
		pcpu_counter_inc(get);
	pcpu_exporter_free(e); /* stops serving: then the registry may go */
	pcpu_registry_destroy(reg);
	return 0;
}
