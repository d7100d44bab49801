/*
 * The segment reader's copy of a 64-bit word on a 32-bit target (issue 51).
 *
 * There the kernel may copy a word 32 bits at a time, so a pread() can
 * return half of one store and half of another: a counter read 2^32 off.
 * The reader copies each run three times and keeps a word only when the
 * high halves agree (src/core/core.h, src/segment/reader_values.c
 * settle_run()). This program is linked with that file built as on a
 * 32-bit target (PCPU__TORN64=1, tests/segment/CMakeLists.txt) and plays
 * the tearing copy on a 64-bit machine: a read hook changes the word's high
 * half before every read that covers it, as a writer carrying across 2^32
 * faster than the reader copies would.
 *  - a word whose high half changes at every read is never returned: the
 *    snapshot fails with EAGAIN and says why (before: after 64 re-reads
 *    the reader kept whatever the last copy held, 2^32 x k off);
 *  - the same through the reader's kept directory (its second snapshot);
 *  - a word that settles within an attempt, or in a later attempt, reads
 *    exact;
 *  - once the word settles for good, the same reader reads it exact again;
 *  - a middle copy torn between two copies whose high halves agree with it
 *    (a word going back and forth across 2^32: 2^32 - 16 -> 2^32 -> back,
 *    its copy low half first reading 0; or high half first, 2^33 - 16) is
 *    never kept: it is not between them. Issue 51's rule (high halves
 *    alone) kept the first, and the ARMv7 machine read a counter of
 *    2^32 - 1 as 0.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcpu/reader.h>
#include <pcpu/segment.h>
#include <pcpu/stats.h>

#include "check.h"
#include "core/core.h" /* pcpu__settled() */
#include "seg_builder.h"

pcpu_reader_t *pcpu__reader_open_mem(const void *buf, size_t len, size_t max_bytes);
void pcpu__reader_set_read_hook(pcpu_reader_t *r,
				void (*fn)(void *ctx, unsigned n, uint64_t off, size_t len), void *ctx);

/* requests{method="GET"}: slot 0's word at byte 16 of chunk 0 (seg_builder.h's
 * standard segment), set to just under 2^32, plus 5 + 7 from the others. */
#define WORD_OFF 16
#define WORD_LO ((int64_t)0xfffffff0)
#define GET_TOTAL ((uint64_t)WORD_LO + 5 + 7)

struct tear {
	struct sb *b;
	unsigned left;  /* reads covering the word that still tear it */
	unsigned torn;  /* reads torn so far */
	const int64_t *seq; /* else: what the next nseq reads covering it find */
	unsigned nseq;
};

/* Before each read: while `left` lasts, a read covering the word finds its
 * high half changed (k = 1, 2, ...: never the same twice in a row);
 * afterwards the word is back as written. */
static void tear_hook(void *ctx, unsigned n, uint64_t off, size_t len)
{
	struct tear *t = ctx;
	uint64_t at = t->b->h->data_offset + WORD_OFF;
	int64_t v = WORD_LO;

	(void)n;
	if (off > at || off + len < at + 8)
		return;
	if (t->nseq) {
		t->nseq--;
		v = *t->seq++;
	} else if (t->left) {
		t->left--;
		t->torn++;
		v += (int64_t)((uint64_t)t->torn << 32);
	}
	sb_put64(t->b, 0, 0, WORD_OFF, v);
}

static const struct pcpu_snapshot_family *fam(const struct pcpu_reader_snapshot *s, const char *name)
{
	size_t f;

	for (f = 0; f < s->snapshot.nfamilies; f++)
		if (strcmp(s->snapshot.families[f].name, name) == 0)
			return &s->snapshot.families[f];
	fprintf(stderr, "no family %s\n", name);
	exit(1);
}

/* A snapshot with `flags`; the GET series must read exact. */
static void expect_exact(pcpu_reader_t *r, unsigned flags, const char *what)
{
	struct pcpu_reader_snapshot *s = NULL;
	const struct pcpu_snapshot_family *f;

	if (pcpu_reader_snapshot(r, flags, &s) != 0) {
		fprintf(stderr, "%s: snapshot failed: %s\n", what, pcpu_reader_error());
		exit(1);
	}
	f = fam(s, "requests");
	CHECK(f->nseries == 2 && strcmp(f->series[0].label_values[0], "GET") == 0);
	if (f->series[0].value.counter != GET_TOTAL) {
		fprintf(stderr, "%s: read %llu, want %llu (%lld x 2^32 off)\n", what,
			(unsigned long long)f->series[0].value.counter, (unsigned long long)GET_TOTAL,
			(long long)(int64_t)(f->series[0].value.counter - GET_TOTAL) >> 32);
		exit(1);
	}
	CHECK_EQ_U64(f->series[1].value.counter, 3);
	pcpu_reader_snapshot_free(s);
	printf("  %s: exact\n", what);
}

/* A snapshot with `flags` while the word never settles: it must fail with
 * EAGAIN, naming the cause, and return no value at all. */
static void expect_refused(pcpu_reader_t *r, unsigned flags, const char *what)
{
	struct pcpu_reader_snapshot *s = NULL;
	int rc;

	errno = 0;
	rc = pcpu_reader_snapshot(r, flags, &s);
	if (rc == 0) {
		const struct pcpu_snapshot_family *f = fam(s, "requests");

		fprintf(stderr, "%s: a word torn at every read was returned as %llu (want a refusal)\n", what,
			(unsigned long long)f->series[0].value.counter);
		exit(1);
	}
	CHECK(s == NULL);
	CHECK(errno == EAGAIN);
	CHECK(strstr(pcpu_reader_error(), "kept changing between its two halves") != NULL);
	printf("  %s: refused (%s)\n", what, pcpu_reader_error());
}

int main(void)
{
	struct sb b;
	struct tear t = { &b, 0, 0, NULL, 0 };
	/* The word as three copies find it, the middle one torn: it held
	 * 2^32 - 16 (the copies before and after), and 2^32 for a moment
	 * during the middle copy, which took one half from each. */
	static const int64_t torn_low[] = { WORD_LO, 0, WORD_LO };
	static const int64_t above = WORD_LO + 16;               /* 2^32 */
	static const int64_t torn_high[] = { above, (int64_t)0x1fffffff0, above };
	pcpu_reader_t *r;

	printf("test_torn_copy:\n");
	/* The rule alone: a, b, c read in that order settle on b. */
	CHECK(pcpu__settled(5, 5, 5) && pcpu__settled(5, 6, 7) && pcpu__settled(7, 6, 5));
	CHECK(!pcpu__settled(5, 8, 7) && !pcpu__settled(7, 4, 5)); /* b not between */
	CHECK(!pcpu__settled(0xffffffff, 0, 0xffffffff));            /* torn low half first */
	CHECK(!pcpu__settled(0x100000000, 0x1ffffffff, 0x100000000)); /* torn high half first */
	CHECK(pcpu__settled(0x100000000, 0x100000000, 0x1ffffffff));
	/* A gauge around 0: -1 -> 0 moves by +1; the torn -2^32 is not between. */
	CHECK(!pcpu__settled(UINT64_MAX, 0, 0) && pcpu__settled(UINT64_MAX - 1, UINT64_MAX, UINT64_MAX));
	CHECK(!pcpu__settled(UINT64_MAX, 0xffffffff00000000u, UINT64_MAX));
	CHECK(pcpu__settled(UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 2)); /* falling */
	sb_standard(&b);
	sb_put64(&b, 0, 0, WORD_OFF, WORD_LO);

	r = pcpu__reader_open_mem(b.buf, b.len, 0);
	CHECK(r);
	pcpu__reader_set_read_hook(r, tear_hook, &t);

	/* Torn at every read: each attempt re-reads the word 64 times, and
	 * every attempt fails; per slot and whole. */
	t.left = ~0u;
	expect_refused(r, PCPU_READER_PER_SLOT, "torn at every read, per slot");
	expect_refused(r, 0, "torn at every read");
	CHECK(t.torn > 4 * 64); /* every attempt re-read it, none kept it */

	/* Settles within the first attempt's re-reads, then in a later one. */
	t.left = 20;
	expect_exact(r, 0, "torn for 20 reads");
	t.left = 150;
	expect_exact(r, 0, "torn for 150 reads (past two attempts)");
	t.left = 150;
	expect_exact(r, PCPU_READER_PER_SLOT, "torn for 150 reads, per slot");

	/* The directory is kept now (the last whole snapshot was stable): the
	 * next snapshot reads the values alone into it; torn for ever, it
	 * must fail too, and read exact once the word settles. */
	expect_exact(r, 0, "settled, from the kept directory");
	t.left = ~0u;
	expect_refused(r, 0, "torn at every read, from the kept directory");
	t.left = 0;
	expect_exact(r, 0, "settled again");

	/* Torn between agreeing high halves: re-read until settled, exact. */
	t.seq = torn_low, t.nseq = 3;
	expect_exact(r, 0, "middle copy torn to 0 between two of 2^32 - 16");
	CHECK(t.nseq == 0);
	t.seq = torn_high, t.nseq = 3;
	expect_exact(r, 0, "middle copy torn to 2^33 - 16 between two of 2^32");
	t.seq = torn_low, t.nseq = 3;
	expect_exact(r, PCPU_READER_PER_SLOT, "middle copy torn to 0, per slot");

	pcpu_reader_close(r);
	free(b.buf);
	printf("test_torn_copy: ok\n");
	return 0;
}
