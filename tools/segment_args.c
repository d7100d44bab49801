/* SPDX-License-Identifier: MIT */
/*
 * The SEGMENT arguments of `pcpustat serve` and `pcpustat push`: what the
 * command line may name, checked once for both, as `pcpustat SEGMENT`
 * takes it -- a segment name, a pid, a file name (pcpu.PID.NAME), or a path
 * to a segment file (anything with a '/'; pcpu_reader_open() opens it with
 * the same checks of owner and header as a listed file).
 *
 * A path is for the command line only: an HTTP client's /metrics/SEGMENT
 * is checked by valid_target(), which never accepts one.
 */
#include <stdio.h>
#include <string.h>

#include "scrape.h"

int check_segment_args(const char *who, char *const *args, size_t n)
{
	/* A target is opened by its key (struct seg): a path must fit. */
	const size_t max = sizeof(((struct seg *)0)->key) - 1;
	size_t i;

	for (i = 0; i < n; i++) {
		const char *t = args[i];

		if (strchr(t, '/') && strlen(t) <= max)
			continue;
		if (strchr(t, '/')) {
			fprintf(stderr, "%s: '%.60s...': a path of at most %zu bytes, please (or give the "
				"directory with --dir and the file name)\n", who, t, max);
			return -1;
		}
		if (!valid_target(t)) {
			fprintf(stderr, "%s: '%s' is not a segment name, pid, file name or path\n", who, t);
			return -1;
		}
	}
	return 0;
}
