/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: HTTP negotiation of expositions (src/stats/negotiate.c),
 * the request parsing left in pcpu's own code now that pcpustat serve uses
 * libmicrohttpd. The input is an Accept or Accept-Encoding header (first
 * byte chooses); any bytes, no NUL inside. Checks, beyond memory safety:
 * the answer is a format the library can write, never protobuf where it
 * cannot, and OpenMetrics only when the header names it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <pcpu/expose.h>

static int names(const char *s, const char *what)
{
	size_t n = strlen(what);

	for (; *s; s++)
		if (strncasecmp(s, what, n) == 0)
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;
	enum pcpu_format f;
	int g;

	if (size == 0)
		return 0;
	s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	if (data[0] & 1) {
		g = pcpu_format_gzip_acceptable(s);
		if (g != 0 && g != 1)
			abort();
		if (g && !names(s, "gzip") && !strchr(s, '*'))
			abort();
	} else {
		f = pcpu_format_negotiate(s);
		if (!pcpu_format_supported(f) || f == PCPU_FORMAT_JSON)
			abort();
		if (f == PCPU_FORMAT_OPENMETRICS && !names(s, "application/openmetrics-text"))
			abort();
		if (f == PCPU_FORMAT_PROTOBUF && !names(s, "application/vnd.google.protobuf"))
			abort();
		if (pcpu_format_negotiate(s) != f) /* no state */
			abort();
	}
	free(s);
	return 0;
}
