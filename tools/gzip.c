/* SPDX-License-Identifier: MIT */
/*
 * gzip bodies on zlib, for what the tool sends: `pcpustat serve`'s
 * responses to a scraper that accepts gzip, and `pcpustat push`'s OTLP
 * requests with --compression gzip. One implementation for both.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pcpustat.h"

char *gzip_body(const void *body, size_t len, int level, size_t *zlen)
{
	z_stream z;
	size_t cap;
	char *out;

	if (len > 0xffffffffu) /* zlib's counts are 32-bit */
		return NULL;
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	cap = deflateBound(&z, len);
	out = malloc(cap ? cap : 1);
	if (!out) {
		deflateEnd(&z);
		return NULL;
	}
	z.next_in = (Bytef *)body;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&z);
		free(out);
		return NULL;
	}
	*zlen = z.total_out;
	deflateEnd(&z);
	return out;
}
