/* The statistics tests' check of a refusal: `expr` must be false (a
 * failed call), errno `err`, and pcpu_stats_error() must contain `text`. */
#ifndef PCPU_TEST_STATS_CHECK_H
#define PCPU_TEST_STATS_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pcpu/stats.h>

#define CHECK_ERR(expr, err, text)                                                       \
	do {                                                                             \
		errno = 0;                                                               \
		if ((expr) || errno != (err) || !strstr(pcpu_stats_error(), (text))) {     \
			fprintf(stderr, "%s:%d: %s: errno %d, message \"%s\", expected %d, " \
				"\"%s\"\n", __FILE__, __LINE__, #expr, errno,            \
				pcpu_stats_error(), (err), (text));                      \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

#endif
