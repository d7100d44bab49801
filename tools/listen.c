/* SPDX-License-Identifier: MIT */
/*
 * The exporter's socket and descriptors: the listening socket for --listen
 * (HOST:PORT, [IPv6]:PORT or PORT; a warning when it is not a loopback
 * address and nothing protects it), and the descriptor limit raised for
 * --max-clients connections.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pcpustat.h"

/* The listening socket (passed to libmicrohttpd), and its address in shown. */
int listen_on(const char *spec, char *shown, size_t cap, int protected)
{
	char host[256], port[16];
	struct addrinfo hints, *ai = NULL, *a;
	const char *colon;
	int fd = -1, one = 1, rc;

	if (spec[0] == '[') {
		const char *close_br = strchr(spec, ']');
		if (!close_br || close_br[1] != ':')
			return -1;
		snprintf(host, sizeof host, "%.*s", (int)(close_br - spec - 1), spec + 1);
		snprintf(port, sizeof port, "%s", close_br + 2);
	} else if ((colon = strrchr(spec, ':')) != NULL) {
		snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
		snprintf(port, sizeof port, "%s", colon + 1);
	} else {
		snprintf(host, sizeof host, "127.0.0.1");
		snprintf(port, sizeof port, "%s", spec);
	}
	if (!host[0] || strspn(port, "0123456789") != strlen(port) || !port[0]) {
		fprintf(stderr, "pcpustat serve: bad --listen '%s' (HOST:PORT, [IPv6]:PORT or PORT)\n", spec);
		return -1;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		fprintf(stderr, "pcpustat serve: %s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0)
			break;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fprintf(stderr, "pcpustat serve: cannot listen on %s:%s: %s\n", host, port, strerror(errno));
		freeaddrinfo(ai);
		return -1;
	}
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		char addr[INET6_ADDRSTRLEN];
		int loopback = 0;

		getsockname(fd, (struct sockaddr *)&ss, &sl);
		if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof addr);
			snprintf(shown, cap, "[%s]:%u", addr, ntohs(s6->sin6_port));
			loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof addr);
			snprintf(shown, cap, "%s:%u", addr, ntohs(s4->sin_port));
			loopback = (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
		}
		if (!loopback && !protected)
			fprintf(stderr, "pcpustat serve: warning: %s is not a loopback address: whoever "
				"can reach it reads these statistics (see --web.config.file)\n", shown);
	}
	freeaddrinfo(ai);
	return fd;
}

/* Descriptors for maxc connections: raises the soft limit toward the hard
 * one; returns the connection limit that leaves FD_RESERVE free. */
size_t fit_descriptors(size_t maxc)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)maxc + FD_RESERVE + 3;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return maxc;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < want) {
		size_t fit = rl.rlim_cur > FD_RESERVE + 4 ? (size_t)rl.rlim_cur - FD_RESERVE - 3 : 1;

		fprintf(stderr, "pcpustat serve: %zu descriptors allowed (ulimit -n): serving %zu connections "
			"at once, not %zu\n", (size_t)rl.rlim_cur, fit, maxc);
		return fit;
	}
	return maxc;
}
