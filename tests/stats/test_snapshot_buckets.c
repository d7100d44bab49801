/*
 * pcpu_snapshot_histogram_buckets() and pcpu_snapshot_bucket_le() give the
 * buckets, cumulative counts and `le` strings pcpu_snapshot_write() writes:
 * checked against the writer's own 0.0.4 text for every bucket of a few
 * families (all buckets exposed, a subset, scaled to seconds, bounds past
 * 10^15 and negative ones), plus the errors.
 */
#include "../check.h"
#include <pcpu/pcpu.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The writer's `_bucket` lines of family f (one series, no labels). */
static char *writer_text(struct pcpu_snapshot_family *f)
{
	struct pcpu_snapshot s = { 1, f };
	char *out = NULL;
	size_t len;

	CHECK(pcpu_snapshot_write(&s, PCPU_FORMAT_PROMETHEUS, &out, &len) == 0);
	return out;
}

/* Our lines for the same family, in the writer's layout. */
static char *our_lines(const struct pcpu_snapshot_family *f)
{
	size_t idx[64], k, n;
	uint64_t cum[64];
	char *text = calloc(1, 8192), le[PCPU_FORMAT_NUMBER_MAX];
	size_t len = 0;

	CHECK(text && f->nbuckets <= 64);
	n = pcpu_snapshot_histogram_buckets(f, f->series[0].value.histogram.counts, idx, cum,
					    f->nbuckets);
	CHECK(n >= 1 && n <= f->nbuckets && idx[n - 1] == f->nbuckets - 1);
	for (k = 0; k < n; k++) {
		CHECK(pcpu_snapshot_bucket_le(f, idx[k], le, sizeof le) > 0);
		len += (size_t)snprintf(text + len, 8192 - len, "%s_bucket{le=\"%s\"} %llu\n", f->name,
					le, (unsigned long long)cum[k]);
	}
	return text;
}

/* Every `_bucket` line of the writer's text, in order. */
static char *bucket_lines(const char *text, const char *name)
{
	char *out = calloc(1, 8192), prefix[128];
	const char *p = text;
	size_t len = 0;

	CHECK(out);
	snprintf(prefix, sizeof prefix, "%s_bucket{", name);
	while ((p = strstr(p, prefix)) != NULL) {
		size_t k = strcspn(p, "\n") + 1;

		CHECK(len + k < 8192);
		memcpy(out + len, p, k);
		len += k;
		p += k;
	}
	return out;
}

static void same_as_writer(struct pcpu_snapshot_family *f)
{
	char *w = writer_text(f), *want = bucket_lines(w, f->name), *got = our_lines(f);

	if (strcmp(want, got) != 0) {
		fprintf(stderr, "writer:\n%sours:\n%s", want, got);
		CHECK(!"the same buckets as the writer");
	}
	free(w);
	free(want);
	free(got);
}

int main(void)
{
	int64_t upper[] = { -3, 0, 5000000, 10000000, 1000000000, 1234567890123456789 };
	uint64_t counts[] = { 1, 2, 3, 4, 5, 6, 7 };
	uint32_t some[] = { 1, 3, 5 };
	struct pcpu_snapshot_series s = { .value.histogram = { counts, 7 } };
	struct pcpu_snapshot_family f = {
		.name = "lat_seconds", .type = PCPU_METRIC_HISTOGRAM, .nbuckets = 7,
		.bucket_upper = upper, .nseries = 1, .series = &s,
	};
	struct pcpu_snapshot_family g = { .name = "g", .type = PCPU_METRIC_GAUGE };
	size_t idx[7];
	uint64_t cum[7];
	char le[PCPU_FORMAT_NUMBER_MAX];

	same_as_writer(&f);            /* every bucket, unscaled */
	f.scale_exp10 = -9;
	same_as_writer(&f);            /* in seconds */
	f.export_buckets = some;
	f.nexport = 3;
	same_as_writer(&f);            /* a subset, counts of hidden buckets included */
	f.scale_exp10 = 3;
	same_as_writer(&f);

	/* Fewer entries than exposed: the count, and the first cap written. */
	CHECK(pcpu_snapshot_histogram_buckets(&f, counts, idx, cum, 2) == 4);
	CHECK(idx[0] == 1 && cum[0] == 3 && idx[1] == 3 && cum[1] == 10);
	CHECK(pcpu_snapshot_histogram_buckets(&f, NULL, NULL, NULL, 0) == 4);
	CHECK(pcpu_snapshot_histogram_buckets(&f, NULL, idx, NULL, 7) == 4 && idx[3] == 6);

	/* Errors. */
	errno = 0;
	CHECK(pcpu_snapshot_histogram_buckets(&g, counts, idx, cum, 7) == 0 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_snapshot_histogram_buckets(&f, NULL, idx, cum, 7) == 0 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_snapshot_histogram_buckets(NULL, counts, idx, cum, 7) == 0 && errno == EINVAL);
	CHECK(pcpu_snapshot_bucket_le(&f, 6, le, sizeof le) == 4 && strcmp(le, "+Inf") == 0);
	errno = 0;
	CHECK(pcpu_snapshot_bucket_le(&f, 7, le, sizeof le) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_snapshot_bucket_le(&g, 0, le, sizeof le) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pcpu_snapshot_bucket_le(&f, 6, le, 4) == -1 && errno == ERANGE && le[0] == '\0');
	f.scale_exp10 = 23;
	errno = 0;
	CHECK(pcpu_snapshot_bucket_le(&f, 0, le, sizeof le) == -1 && errno == EINVAL);
	printf("ok\n");
	return 0;
}
