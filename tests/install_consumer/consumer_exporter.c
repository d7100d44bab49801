/* A program serving its own registry with the *installed*
 * libpcpu-exporter: pcpu_exporter_add_registry() on an ephemeral port,
 * scraped once over a socket. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pcpu/exporter.h>
#include <pcpu/pcpu.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	struct pcpu_family_desc d = { .name = "consumer_served", .help = "Served.", .type = PCPU_METRIC_COUNTER };
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_counter_t c = reg ? pcpu_family_counter(pcpu_registry_family(reg, &d), NULL) : NULL;
	pcpu_exporter_t *e = pcpu_exporter_new();
	struct sockaddr_in a;
	char all[8192];
	size_t have = 0;
	ssize_t n;
	int fd;

	if (!c || !e || pcpu_exporter_listen(e, "127.0.0.1:0") < 0 || pcpu_exporter_add_registry(e, "/metrics", reg) < 0 ||
	    pcpu_exporter_start(e) < 0) {
		fprintf(stderr, "consumer_exporter: %s\n", pcpu_exporter_error());
		return 1;
	}
	pcpu_counter_add(c, 7);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)pcpu_exporter_port(e, 0));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
		return 1;
	while (have < sizeof all - 1 && (n = read(fd, all + have, sizeof all - 1 - have)) > 0)
		have += (size_t)n;
	all[have] = '\0';
	close(fd);
	pcpu_exporter_free(e);
	pcpu_registry_destroy(reg);
	if (strncmp(all, "HTTP/1.1 200", 12) != 0 || !strstr(all, "\nconsumer_served_total 7\n")) {
		fprintf(stderr, "consumer_exporter: unexpected answer:\n%s\n", all);
		return 1;
	}
	puts("consumer_exporter: scraped consumer_served_total 7");
	return 0;
}
