/*
 * A tiny sparse file must not make reads slow (issue 10, item 5): a
 * hostile segment that declares 65,536 slots (131,072 regions per chunk,
 * 512 MiB of holes per chunk) but holds only N values in slot 0 must cost
 * about as many system calls as a plain segment of 2 slots holding the same
 * N values -- not N x 131,072 (one lseek per run per region). Counted with
 * the reader's system call counter (pcpu__reader_syscalls), not timed; the
 * times are printed for information.
 *
 * Then the budget: a segment whose every region holds data (a 16-byte
 * stride, so 131,072 regions fit in 2 MiB of real data) costs a pread per
 * region, and each counts 4 KiB against max_bytes: with a 64 MiB budget the
 * snapshot stops with EFBIG after at most 64 MiB / 4 KiB system calls.
 *
 * The files live in /dev/shm (tmpfs: SEEK_DATA knows its holes).
 *
 * Usage: test_segment_sparse [N]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pcpu/reader.h>

#include "check.h"
#include "seg_builder.h"

uint64_t pcpu__reader_syscalls(const pcpu_reader_t *r);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A segment file of `n` counter series c{id="K"} = K + 1, each in a chunk
 * of its own (so every series is a run of its own), its value in slot 0's
 * region (and, for one in four, in slot 0's mirror). Only the header,
 * directory and the values are written: the rest is holes. */
static void make_file(const char *path, unsigned nslots, uint64_t stride, unsigned n, uint64_t voff)
{
	static const char *const idl[] = { "id" };
	uint64_t span = 2 * (uint64_t)nslots * stride;
	struct sb b;
	unsigned k;
	int fd;

	sb_init(&b, nslots, stride, 0, n + 1, 16 * (n + 1) + 64);
	sb_family(&b, 1, 1, "c", "Counter.", NULL, 1, idl, 0, 0, 0, NULL);
	for (k = 0; k < n; k++) {
		char id[16];
		const char *v[1] = { id };

		snprintf(id, sizeof id, "%u", k);
		sb_series(&b, 1, 1, 1, v, k, voff, 8);
	}
	b.h->nchunks = n;
	b.h->writer_uid = (uint32_t)geteuid();
	b.h->data_offset = (b.h->data_offset + 4095) & ~(uint64_t)4095;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, b.buf, b.len, 0) == (ssize_t)b.len);
	CHECK(ftruncate(fd, (off_t)(b.h->data_offset + n * span)) == 0);
	for (k = 0; k < n; k++) {
		int64_t v = k + 1, one = 1;
		uint64_t at = b.h->data_offset + k * span + voff;

		if (k % 4 == 0) {
			v = k;
			CHECK(pwrite(fd, &one, 8, (off_t)(at + nslots * stride)) == 8); /* mirror */
		}
		CHECK(pwrite(fd, &v, 8, (off_t)at) == 8);
	}
	close(fd);
	free(b.buf);
}

/* Snapshots `path`; returns the reader's system calls, checks the values. */
static uint64_t read_file(const char *path, unsigned n, unsigned flags, double *secs)
{
	struct pcpu_reader_options o;
	struct pcpu_reader_snapshot *s;
	pcpu_reader_t *r;
	uint64_t before, calls;
	double t0;
	size_t k;

	memset(&o, 0, sizeof o);
	o.flags = PCPU_READER_ANY_OWNER | PCPU_READER_ALLOW_STALE;
	r = pcpu_reader_open(path, &o);
	if (!r) {
		fprintf(stderr, "%s: %s\n", path, pcpu_reader_error());
		exit(1);
	}
	before = pcpu__reader_syscalls(r);
	t0 = now_s();
	if (pcpu_reader_snapshot(r, flags, &s) != 0) {
		fprintf(stderr, "%s: %s\n", path, pcpu_reader_error());
		exit(1);
	}
	*secs = now_s() - t0;
	calls = pcpu__reader_syscalls(r) - before;
	CHECK(s->snapshot.nfamilies == 1 && s->snapshot.families[0].nseries == n);
	for (k = 0; k < n; k++)
		CHECK_EQ_U64(s->snapshot.families[0].series[k].value.counter, k + 1);
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	return calls;
}

static char plain[128], hostile[128], dense[128];

/* The files are large (apparent size): never left behind, even on failure. */
static void cleanup(void)
{
	unlink(plain);
	unlink(hostile);
	unlink(dense);
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 300;
	uint64_t cp, ch, cps, chs, cd;
	double tp, th, tps, ths, td;
	int fd;

	snprintf(plain, sizeof plain, "/dev/shm/pcpu-sparse-plain.%d", (int)getpid());
	snprintf(hostile, sizeof hostile, "/dev/shm/pcpu-sparse-hostile.%d", (int)getpid());
	snprintf(dense, sizeof dense, "/dev/shm/pcpu-sparse-dense.%d", (int)getpid());
	atexit(cleanup);
	make_file(plain, 2, 4096, n, 128);
	make_file(hostile, 65536, 4096, n, 128);

	cp = read_file(plain, n, 0, &tp);
	ch = read_file(hostile, n, 0, &th);
	cps = read_file(plain, n, PCPU_READER_PER_SLOT, &tps);
	chs = read_file(hostile, n, PCPU_READER_PER_SLOT, &ths);
	printf("test_segment_sparse: %u series, one per chunk; system calls per snapshot: "
	       "2 slots %llu (%.2f ms), 65,536 slots %llu (%.2f ms); per slot: %llu (%.2f ms), "
	       "%llu (%.2f ms)\n",
	       n, (unsigned long long)cp, tp * 1e3, (unsigned long long)ch, th * 1e3,
	       (unsigned long long)cps, tps * 1e3, (unsigned long long)chs, ths * 1e3);
	fflush(stdout);
	/* The same live data: at most twice the calls (plus a constant). */
	if (ch > 2 * cp + 16 || chs > 2 * cps + 16) {
		fprintf(stderr, "the sparse file costs %.1fx the system calls of the plain one\n",
			(double)ch / (double)cp);
		return 1;
	}

	/* Data in every region: the budget bounds the calls. */
	{
		struct pcpu_reader_options o;
		struct pcpu_reader_snapshot *s;
		pcpu_reader_t *r;
		const size_t budget = (size_t)64 << 20;
		static char ones[1 << 16];
		uint64_t off, end, before;

		make_file(dense, 65536, 16, 1, 0);
		memset(ones, 1, sizeof ones);
		fd = open(dense, O_RDWR);
		CHECK(fd >= 0);
		{
			struct pcpu__seg_header h;

			CHECK(pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h);
			off = h.data_offset;
			end = h.data_offset + h.chunk_span;
			for (; off < end; off += sizeof ones)
				CHECK(pwrite(fd, ones, sizeof ones, (off_t)off) == (ssize_t)sizeof ones);
		}
		close(fd);
		memset(&o, 0, sizeof o);
		o.flags = PCPU_READER_ANY_OWNER | PCPU_READER_ALLOW_STALE;
		o.max_bytes = budget;
		r = pcpu_reader_open(dense, &o);
		CHECK(r != NULL);
		before = pcpu__reader_syscalls(r);
		td = now_s();
		CHECK(pcpu_reader_snapshot(r, 0, &s) == -1 && errno == EFBIG);
		td = now_s() - td;
		cd = pcpu__reader_syscalls(r) - before;
		pcpu_reader_close(r);
		printf("test_segment_sparse: data in all 131,072 regions, max_bytes 64 MiB: EFBIG after "
		       "%llu system calls (%.2f ms)\n",
		       (unsigned long long)cd, td * 1e3);
		CHECK(cd <= budget / 4096 + 16);
	}
	printf("test_segment_sparse: ok\n");
	return 0;
}
