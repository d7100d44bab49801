/*
 * libFuzzer target: the segment reader on arbitrary bytes. The input is the
 * whole segment file; the reader's memory source serves it (as pread would
 * serve a file), so a run covers header and directory validation, value
 * summing, per-slot values and, for what it accepts, the exposition writers;
 * then two plain snapshots of the same reader -- the second from the
 * directory the first kept, if it did -- which must write the same text.
 * Built with clang -fsanitize=fuzzer,address,undefined (tests/segment).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/reader.h>

pcpu_reader_t *pcpu__reader_open_mem(const void *buf, size_t len, size_t max_bytes);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pcpu_reader_snapshot *s;
	pcpu_reader_t *r = pcpu__reader_open_mem(data, size, (size_t)16 << 20);

	if (!r)
		return 0;
	if (pcpu_reader_snapshot(r, PCPU_READER_PER_SLOT, &s) == 0) {
		size_t f, i;
		char *out;
		size_t len;

		/* In range and asked for: never EINVAL. A member of a consistent
		 * group has no per-slot values (its value is the group's last
		 * consistent read): NULL, errno untouched. */
		for (f = 0; f < s->snapshot.nfamilies; f++)
			for (i = 0; i < s->snapshot.families[f].nseries; i++) {
				errno = 0;
				/* In range, per-slot: values, or ENODATA (a group
				 * member); never NULL without a reason. */
				if (!pcpu_reader_snapshot_slots(s, f, i) && errno != ENODATA)
					abort();
			}
		if (pcpu_snapshot_write(&s->snapshot, PCPU_FORMAT_OPENMETRICS, &out, &len) == 0)
			free(out);
		if (pcpu_snapshot_write(&s->snapshot, PCPU_FORMAT_JSON, &out, &len) == 0)
			free(out);
		pcpu_reader_snapshot_free(s);
	}
	/* The memory does not change between the two: the second snapshot,
	 * from the kept directory or read anew, is the first's, and either
	 * may be freed first (they share names and labels). */
	if (pcpu_reader_snapshot(r, 0, &s) == 0) {
		struct pcpu_reader_snapshot *t;
		char *a = NULL, *b = NULL;
		size_t alen = 0, blen = 0;
		int ra, rb;

		if (pcpu_reader_snapshot(r, 0, &t) != 0)
			abort();
		ra = pcpu_snapshot_write(&s->snapshot, PCPU_FORMAT_PROMETHEUS, &a, &alen);
		pcpu_reader_snapshot_free(s);
		rb = pcpu_snapshot_write(&t->snapshot, PCPU_FORMAT_PROMETHEUS, &b, &blen);
		if (ra != rb || (ra == 0 && (alen != blen || memcmp(a, b, alen) != 0)))
			abort();
		free(a);
		free(b);
		pcpu_reader_snapshot_free(t);
	}
	pcpu_reader_close(r);
	return 0;
}
