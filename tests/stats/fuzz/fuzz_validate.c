/*
 * libFuzzer target: the name, label and UTF-8 validators and the number
 * formatter, checked against reference implementations (tests/stats/
 * utf8_ref.h) rather than only for crashes.
 *
 * Input: the bytes are one candidate string (cut at the first NUL); the
 * first 8 bytes, if present, are also read as a double to format.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"
#include "../utf8_ref.h"

#define REQUIRE(c)                                                                   \
	do {                                                                         \
		if (!(c)) {                                                          \
			fprintf(stderr, "fuzz_validate: %s failed at line %d\n", #c, __LINE__); \
			abort();                                                     \
		}                                                                    \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	size_t n;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	n = strlen(s);

	REQUIRE((pcpu_stats_check_metric_name(s) == 0) == ref_metric_name_ok(s));
	REQUIRE((pcpu_stats_check_label_name(s) == 0) == ref_label_name_ok(s));
	REQUIRE(pcpu__utf8_valid_prefix(s, n) == ref_utf8_prefix((const unsigned char *)s, n));
	REQUIRE((pcpu_stats_check_label_value(s) == 0) ==
		(n <= PCPU_STATS_LABEL_VALUE_MAX && ref_utf8_prefix((const unsigned char *)s, n) == n));
	/* Messages are bounded and printable ASCII (hostile bytes escaped). */
	{
		const char *m = pcpu_stats_error();
		size_t i, ml = strlen(m);

		REQUIRE(ml < 320);
		for (i = 0; i < ml; i++)
			REQUIRE(m[i] >= 0x20 && m[i] < 0x7f);
	}
	if (size >= 8) {
		double v;
		char buf[PCPU__DOUBLE_BUF];
		size_t len;

		memcpy(&v, data, sizeof v);
		len = pcpu__fmt_double(buf, v, data[size - 1] & 1);
		REQUIRE(len == strlen(buf) && len < 32);
		if (isfinite(v)) {
			REQUIRE(strtod(buf, NULL) == v);
			REQUIRE(!strchr(buf, ','));
		}
	}
	free(s);
	return 0;
}
