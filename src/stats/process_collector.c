/* SPDX-License-Identifier: MIT */
/*
 * The standard process collector: the process_* metrics the Prometheus
 * client libraries export (client_golang's process collector, the Python
 * client's ProcessCollector), with the same names, types and meanings, so
 * that dashboards and alerts written for them work unchanged.
 *
 * Where the values come from (Linux):
 *   process_cpu_seconds_total      getrusage(RUSAGE_SELF): user + system,
 *                                  microseconds (scale -6) -- finer than the
 *                                  clock ticks of /proc/self/stat
 *   process_resident_memory_bytes  /proc/self/statm, field 2, * page size
 *   process_virtual_memory_bytes   /proc/self/statm, field 1, * page size
 *   process_open_fds               entries of /proc/self/fd (minus the one
 *                                  the scan itself opens)
 *   process_max_fds                getrlimit(RLIMIT_NOFILE), soft limit
 *   process_start_time_seconds     /proc/stat btime + /proc/self/stat
 *                                  field 22 (clock ticks after boot), in
 *                                  milliseconds (scale -3)
 * Each is one callback series (collector.c): a failed read (no /proc in a
 * sandbox) leaves just that series out of the snapshot.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "registry.h"

enum proc_metric {
	PROC_CPU,
	PROC_RSS,
	PROC_VSIZE,
	PROC_OPEN_FDS,
	PROC_MAX_FDS,
	PROC_START_TIME,
};

/* Reads a small /proc file into buf (NUL-terminated); 0 or -1. */
static int read_small(const char *path, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return 0;
}

/* Field `k` (1-based) of a line of unsigned decimal fields. */
static int field_u64(const char *s, unsigned k, uint64_t *out)
{
	char *end;

	while (--k) {
		s += strspn(s, " ");
		s += strcspn(s, " ");
	}
	errno = 0;
	*out = strtoull(s, &end, 10);
	if (end == s || errno)
		return -1;
	return 0;
}

static int statm_pages(unsigned field, int64_t *bytes)
{
	char buf[256];
	uint64_t pages;
	long page = sysconf(_SC_PAGESIZE);

	if (read_small("/proc/self/statm", buf, sizeof buf) < 0 || field_u64(buf, field, &pages) < 0 ||
	    page <= 0)
		return -1;
	*bytes = (int64_t)(pages * (uint64_t)page);
	return 0;
}

static int open_fds(int64_t *n)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int64_t count = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			count++;
	closedir(d);
	*n = count - 1; /* the directory stream's own descriptor */
	return 0;
}

/* Seconds since the epoch when the machine booted: /proc/stat's btime
 * line, which follows a per-CPU line each and an interrupt line that can
 * be long, so the file is read a line at a time. */
static int boot_time(uint64_t *btime)
{
	FILE *f = fopen("/proc/stat", "re");
	char *line = NULL;
	size_t cap = 0;
	int r = -1;

	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0)
		if (strncmp(line, "btime ", 6) == 0) {
			r = field_u64(line + 6, 1, btime);
			break;
		}
	free(line);
	fclose(f);
	return r;
}

/* Milliseconds since the epoch when the process started. */
static int start_time_ms(int64_t *ms)
{
	char buf[1024];
	const char *p;
	uint64_t ticks, btime;
	long hz = sysconf(_SC_CLK_TCK);

	/* Field 2 (comm) may hold spaces and parentheses: count from the
	 * last ')' -- field 3 starts after it, so starttime (22) is the 20th
	 * field from there. */
	if (hz <= 0 || read_small("/proc/self/stat", buf, sizeof buf) < 0 ||
	    !(p = strrchr(buf, ')')) || field_u64(p + 1, 20, &ticks) < 0 || boot_time(&btime) < 0)
		return -1;
	*ms = (int64_t)(btime * 1000 + ticks * 1000 / (uint64_t)hz);
	return 0;
}

static int process_value(void *arg, int64_t *value)
{
	struct rusage ru;
	struct rlimit rl;

	switch ((enum proc_metric)(uintptr_t)arg) {
	case PROC_CPU:
		if (getrusage(RUSAGE_SELF, &ru) < 0)
			return -1;
		*value = ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
			 ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
		return 0;
	case PROC_RSS:
		return statm_pages(2, value);
	case PROC_VSIZE:
		return statm_pages(1, value);
	case PROC_OPEN_FDS:
		return open_fds(value);
	case PROC_MAX_FDS:
		if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
			return -1;
		*value = rl.rlim_cur == RLIM_INFINITY ? INT64_MAX : (int64_t)rl.rlim_cur;
		return 0;
	case PROC_START_TIME:
		return start_time_ms(value);
	}
	errno = EINVAL;
	return -1;
}

int pcpu_registry_process_collector(pcpu_registry_t *reg)
{
	static const struct {
		const char *name, *help;
		enum pcpu_metric_type type;
		int scale;
		enum proc_metric what;
	} m[] = {
		{ "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
		  PCPU_METRIC_COUNTER, -6, PROC_CPU },
		{ "process_resident_memory_bytes", "Resident memory size in bytes.", PCPU_METRIC_GAUGE,
		  0, PROC_RSS },
		{ "process_virtual_memory_bytes", "Virtual memory size in bytes.", PCPU_METRIC_GAUGE, 0,
		  PROC_VSIZE },
		{ "process_open_fds", "Number of open file descriptors.", PCPU_METRIC_GAUGE, 0,
		  PROC_OPEN_FDS },
		{ "process_max_fds", "Maximum number of open file descriptors.", PCPU_METRIC_GAUGE, 0,
		  PROC_MAX_FDS },
		{ "process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
		  PCPU_METRIC_GAUGE, -3, PROC_START_TIME },
	};
	size_t k;

	if (!reg) {
		pcpu__set_error("registry is NULL");
		errno = EINVAL;
		return -1;
	}
	for (k = 0; k < sizeof m / sizeof m[0]; k++) {
		struct pcpu_family_desc d;
		pcpu_family_t *f;

		memset(&d, 0, sizeof d);
		d.name = m[k].name;
		d.help = m[k].help;
		d.type = m[k].type;
		d.scale_exp10 = m[k].scale;
		f = pcpu_registry_family(reg, &d);
		if (!f || pcpu_family_callback(f, NULL, process_value, (void *)(uintptr_t)m[k].what) < 0)
			return -1;
	}
	return 0;
}
