/* The statistics tests' text helpers: what another process sees of a
 * published segment -- its Prometheus text (or another format's), read
 * through the segment reader (malloc'd; the test frees it) -- and a
 * registry's own exposition, and whether a text has a given whole line. */
#ifndef PCPU_TEST_SEGMENT_TEXT_H
#define PCPU_TEST_SEGMENT_TEXT_H

#include "../check.h"
#include <pcpu/reader.h>
#include <pcpu/stats.h>
#include <string.h>

static inline char *segment_text_as(const char *path, enum pcpu_format format)
{
	struct pcpu_reader_options ro;
	struct pcpu_reader_snapshot *rs;
	pcpu_reader_t *r;
	char *text;
	size_t len;

	memset(&ro, 0, sizeof ro);
	r = pcpu_reader_open(path, &ro);
	CHECK(r != NULL);
	CHECK(pcpu_reader_snapshot(r, 0, &rs) == 0);
	CHECK(pcpu_snapshot_write(&rs->snapshot, format, &text, &len) == 0);
	pcpu_reader_snapshot_free(rs);
	pcpu_reader_close(r);
	return text;
}

static inline char *segment_text(const char *path)
{
	return segment_text_as(path, PCPU_FORMAT_PROMETHEUS);
}

/* pcpu_registry_write()'s Prometheus text (malloc'd). */
static inline char *registry_text(pcpu_registry_t *reg)
{
	char *text;
	size_t len;

	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	return text;
}

/* 1 if `line` is one of text's lines, whole; 0 otherwise. */
static inline int text_has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while ((p = strstr(p, line))) {
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			return 1;
		p += n;
	}
	return 0;
}

#endif
