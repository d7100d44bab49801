/* What another process sees of a published segment: its Prometheus text
 * (or another format's),
 * read through the segment reader (malloc'd; the test frees it). For the
 * statistics tests that check what reaches segments. */
#ifndef PCPU_TEST_SEGMENT_TEXT_H
#define PCPU_TEST_SEGMENT_TEXT_H

#include "../check.h"
#include <pcpu/reader.h>
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

#endif
