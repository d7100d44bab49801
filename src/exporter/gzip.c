/* SPDX-License-Identifier: MIT */
/*
 * gzip bodies on zlib: the exporter's compressed responses, and whatever
 * else a program sends compressed (`pcpustat push`'s OTLP requests with
 * --compression gzip). One implementation for all.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "exporter_internal.h"

char *pcpu_exporter_gzip(const void *body, size_t len, int level, size_t *zlen)
{
	z_stream z;
	size_t cap;
	char *out;

	if (level < 1 || level > 9 || !zlen || (!body && len)) {
		pcpu__exp_fail(EINVAL, "pcpu_exporter_gzip: level %d not in 1..9, or no body or length", level);
		return NULL;
	}
	if (len > 0xffffffffu) { /* zlib's counts are 32-bit */
		pcpu__exp_fail(EFBIG, "pcpu_exporter_gzip: %zu bytes: over zlib's 4 GiB", len);
		return NULL;
	}
	memset(&z, 0, sizeof z);
	/* 15 window bits + 16: a gzip header and trailer instead of zlib's. */
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		pcpu__exp_fail(ENOMEM, "pcpu_exporter_gzip: out of memory");
		return NULL;
	}
	cap = deflateBound(&z, (uLong)len);
	out = malloc(cap ? cap : 1);
	if (!out) {
		deflateEnd(&z);
		pcpu__exp_fail(ENOMEM, "pcpu_exporter_gzip: out of memory");
		return NULL;
	}
	z.next_in = (Bytef *)(uintptr_t)body;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) { /* cannot be, with deflateBound()'s room */
		deflateEnd(&z);
		free(out);
		pcpu__exp_fail(ENOMEM, "pcpu_exporter_gzip: zlib failed");
		return NULL;
	}
	*zlen = z.total_out;
	deflateEnd(&z);
	return out;
}
