/* SPDX-License-Identifier: MIT */
/*
 * HTTP basic authentication (RFC 7617): the user and password of an
 * Authorization header. The scheme is case-insensitive (RFC 9110 11.1:
 * "basic" is Basic), the credentials strict base64 (RFC 4648: the standard
 * alphabet, padding optional but only to a whole quad, no stray bits), the
 * user what comes before the first colon. libmicrohttpd 0.9.75's own parser
 * takes only "Basic " with a capital B, which clients need not send.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exporter_internal.h"

static int sextet(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Decodes in[0..n) into out (room for 3 * n / 4 + 1 bytes): its length, or
 * -1 if it is not strict base64. */
static long decode(const char *in, size_t n, char *out)
{
	size_t all = n, i, o = 0;
	unsigned acc = 0;
	int bits = 0;

	while (n > 0 && in[n - 1] == '=' && all - n < 2)
		n--;
	if (n % 4 == 1 || (n != all && all % 4 != 0))
		return -1;
	for (i = 0; i < n; i++) {
		int v = sextet(in[i]);

		if (v < 0)
			return -1;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	if (acc & ((1u << bits) - 1))
		return -1; /* stray bits in the last sextet */
	return (long)o;
}

int pcpu__exp_parse_basic(const char *header, char **buf, const char **user, const char **password)
{
	const char *end;
	char *out, *colon;
	long n;

	*buf = NULL;
	if (!header)
		return 0;
	while (*header == ' ' || *header == '\t')
		header++;
	if (strncasecmp(header, "Basic", 5) != 0 || (header[5] != ' ' && header[5] != '\t'))
		return 0;
	header += 6;
	while (*header == ' ' || *header == '\t')
		header++;
	end = header + strlen(header);
	while (end > header && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (end == header)
		return 0;
	out = malloc((size_t)(end - header) / 4 * 3 + 4);
	if (!out)
		return -1;
	n = decode(header, (size_t)(end - header), out);
	if (n < 0 || memchr(out, '\0', (size_t)n) || !(colon = memchr(out, ':', (size_t)n))) {
		explicit_bzero(out, (size_t)(end - header) / 4 * 3 + 4);
		free(out);
		return 0;
	}
	out[n] = '\0';
	*colon = '\0';
	*buf = out;
	*user = out;
	*password = colon + 1;
	return 1;
}
