/*
 * Writes the seed corpus of the reader fuzz target (tests/segment/corpus/):
 * small valid segments of every shape, and a few damaged ones. Run by the
 * `segment_corpus` build target; the output is kept in the repository.
 * Usage: gen_corpus DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seg_builder.h"

static void save(const char *dir, const char *name, const void *buf, size_t len)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	static const char *const ln[] = { "a", "b", "c" };
	static const char *const v1[] = { "x", "\"quoted\\\"", "\xe2\x82\xac" };
	static const int64_t bounds[] = { -5, 0, 7 };
	struct sb b;
	const char *dir = argc > 1 ? argv[1] : ".";
	unsigned i;

	sb_standard(&b);
	save(dir, "standard", b.buf, b.len);
	b.h->generation = 3; /* a change in progress */
	sb_entry(&b, 2)->seq = 3;
	save(dir, "in-flux", b.buf, b.len);
	save(dir, "truncated", b.buf, b.len / 2);
	/* A 1.x header (format 1.0, chunk span without mirrors): refused. */
	b.h->generation = 2;
	sb_entry(&b, 2)->seq = 2;
	b.h->version_major = 1;
	b.h->chunk_span = (uint64_t)b.h->nslots * b.h->slot_stride;
	save(dir, "version1", b.buf, b.len);
	free(b.buf);

	/* 2.3: a consistent group's members and their GROUP entry. */
	sb_groups(&b);
	save(dir, "groups", b.buf, b.len);
	free(b.buf);
	sb_v28(&b); /* 2.8: residues, a histogram with fractions, label sets */
	save(dir, "v28", b.buf, b.len);
	free(b.buf);
	{
		uint64_t ta, tf;

		sb_v210(&b, &ta, &tf); /* 2.10: sparse histograms' tables of groups */
		save(dir, "v210", b.buf, b.len);
		free(b.buf);
	}

	/* Empty directory, one slot. */
	sb_init(&b, 1, 16, 0, 4, 64);
	save(dir, "empty", b.buf, b.len);
	free(b.buf);

	/* Three labels, negative bounds, two chunks, four slots and their
	 * mirrors, freed entries. */
	sb_init(&b, 4, 256, 2, 32, 2048);
	sb_family(&b, 10, 1, "c_total_x", "help", NULL, 3, ln, 0, 0, 0, NULL);
	sb_series(&b, 10, 1, 3, v1, 1, 16, 8);
	sb_family(&b, 11, 3, "h", NULL, NULL, 0, NULL, 1, 0, 4, bounds);
	sb_series(&b, 11, 3, 0, NULL, 0, 64, 8 * 5);
	sb_add(&b, &(struct pcpu__seg_entry){ .seq = 4 }); /* a freed entry */
	sb_family(&b, 12, 3, "l", NULL, NULL, 0, NULL, 2, 0, 5, NULL); /* p = 0 */
	sb_series(&b, 12, 3, 0, NULL, 1, 128, 8 * 6);
	sb_family(&b, 13, 2, "g_bytes", NULL, "bytes", 0, NULL, 0, 0, 0, NULL);
	sb_series(&b, 13, 2, 0, NULL, 0, 224, 8);
	for (i = 0; i < 4; i++) {
		sb_put64(&b, 1, i, 16, (int64_t)i * 1000);
		sb_mirror64(&b, 1, i, 16, 1);
		sb_put64(&b, 0, i, 72, 3);
		sb_put64(&b, 1, i, 144, 1);
		sb_mirror64(&b, 1, i, 152, 2);
		sb_put64(&b, 0, i, 224, -7);
	}
	sb_mirror64(&b, 0, 0, 224, 100); /* a gauge set */
	save(dir, "shapes", b.buf, b.len);
	free(b.buf);
	return 0;
}
