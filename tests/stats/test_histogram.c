/*
 * Histograms: bucket placement at every boundary, quantile estimates within
 * the configured precision, exact count and sum under concurrent recording,
 * one copy of a layout's tables for all its histograms.
 */
#include "../check.h"
#include <pcpu/pcpu.h>
#include <pcpu/stats.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Every explicit bound b: b goes to its bucket, b + 1 to the next. */
static void test_explicit_boundaries(void)
{
	static const int64_t bounds[] = { INT64_MIN + 1, -10, 0, 1, 5, 100, 1000, INT64_MAX - 1 };
	struct pcpu_histogram_layout l = { PCPU_HISTOGRAM_EXPLICIT, bounds, 8, 0, 0, 0, 0, 0, 0 };
	pcpu_histogram_t *h = pcpu_histogram_create(&l);
	uint64_t counts[9], count;
	int64_t sum, lo, hi, expect_sum = 0;
	size_t i, nb;

	CHECK(h);
	nb = pcpu_histogram_nbuckets(h);
	CHECK(nb == 9);
	CHECK(pcpu_histogram_bucket_of(h, INT64_MIN) == 0);
	CHECK(pcpu_histogram_bucket_of(h, INT64_MAX) == 8);
	for (i = 0; i < 8; i++) {
		CHECK(pcpu_histogram_bucket_of(h, bounds[i]) == i);
		CHECK(pcpu_histogram_bucket_of(h, bounds[i] + 1) == i + 1);
		CHECK(pcpu_histogram_bucket_range(h, i, &lo, &hi) == 0);
		CHECK(hi == bounds[i]);
		CHECK(lo == (i ? bounds[i - 1] + 1 : INT64_MIN));
		/* Through the recording path too: record both sides. */
		pcpu_histogram_record(h, bounds[i]);
		pcpu_histogram_record(h, bounds[i] + 1);
		expect_sum = (int64_t)((uint64_t)expect_sum + (uint64_t)bounds[i] +
				       (uint64_t)(bounds[i] + 1));
	}
	CHECK(pcpu_histogram_bucket_range(h, 8, &lo, &hi) == 0 && lo == INT64_MAX && hi == INT64_MAX);
	CHECK(pcpu_histogram_bucket_range(h, 9, &lo, &hi) < 0 && errno == EINVAL);
	CHECK(pcpu_histogram_read(h, counts, nb, &count, &sum) == 0);
	CHECK_EQ_U64(count, 16);
	CHECK_EQ_U64(sum, expect_sum); /* modulo 2^64, like the recording */
	CHECK_EQ_U64(counts[0], 1);
	for (i = 1; i < 8; i++)
		CHECK_EQ_U64(counts[i], 2);
	CHECK_EQ_U64(counts[8], 1);
	CHECK(pcpu_histogram_read(h, counts, nb - 1, NULL, NULL) < 0 && errno == EINVAL);
	pcpu_histogram_destroy(h);
}

/*
 * The branch-free searches (two-level for up to 16 bounds, binary beyond)
 * against a plain linear scan: every size 1..40, random sorted bounds,
 * random values and every bound, bound + 1 and bound - 1.
 */
static void test_search_random(void)
{
	uint64_t x = 0x853c49e6748fea9bull;
	size_t n, i, k;

	for (n = 1; n <= 40; n++) {
		int64_t b[40], v;
		struct pcpu_histogram_layout l = { PCPU_HISTOGRAM_EXPLICIT, b, n, 0, 0, 0, 0, 0, 0 };
		pcpu_histogram_t *h;

		for (i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			b[i] = (i ? b[i - 1] : -1000) + 1 + (int64_t)(x % 1000);
		}
		if (n == 40)
			b[n - 1] = INT64_MAX; /* a bound at the top: +Inf unreachable */
		CHECK((h = pcpu_histogram_create(&l)) != NULL);
		for (k = 0; k < 3 * n + 2000; k++) {
			size_t want = 0;

			if (k < 3 * n) { /* b - 1, b, b + 1 (not past INT64_MAX) */
				int64_t d = (int64_t)(k % 3) - 1;

				v = d > 0 && b[k / 3] == INT64_MAX ? INT64_MAX : b[k / 3] + d;
			} else {
				v = (int64_t)(x = x * 6364136223846793005ull + 1442695040888963407ull) >> 40;
			}
			while (want < n && b[want] < v)
				want++;
			if (pcpu_histogram_bucket_of(h, v) != want) {
				fprintf(stderr, "n=%zu v=%lld: bucket %zu, want %zu\n", n, (long long)v,
					pcpu_histogram_bucket_of(h, v), want);
				CHECK(0);
			}
		}
		pcpu_histogram_destroy(h);
	}
}

/* Every log-linear bucket: contiguous, each end maps back to it, width
 * within 2^-p of its lower bound, values past the limit go to +Inf. */
static void test_log_linear_boundaries(unsigned p, int64_t max)
{
	struct pcpu_histogram_layout l = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0, p, max, 0, 0, 0, 0 };
	pcpu_histogram_t *h = pcpu_histogram_create(&l);
	int64_t lo, hi, prev_hi = -1;
	size_t b, nb;

	CHECK(h);
	nb = pcpu_histogram_nbuckets(h);
	for (b = 0; b + 1 < nb; b++) {
		CHECK(pcpu_histogram_bucket_range(h, b, &lo, &hi) == 0);
		CHECK(lo == prev_hi + 1);
		CHECK(hi >= lo);
		CHECK(pcpu_histogram_bucket_of(h, lo) == b);
		CHECK(pcpu_histogram_bucket_of(h, hi) == b);
		CHECK(pcpu_histogram_bucket_of(h, lo + (hi - lo) / 2) == b);
		/* width <= 2^-p of the lower bound (width-1 buckets are exact) */
		CHECK(hi == lo || (double)(hi - lo + 1) <= ldexp((double)lo, -(int)p));
		prev_hi = hi;
	}
	CHECK(prev_hi >= max); /* max_value has a finite bucket */
	if (prev_hi < INT64_MAX) {
		CHECK(pcpu_histogram_bucket_of(h, prev_hi + 1) == nb - 1);
		CHECK(pcpu_histogram_bucket_of(h, INT64_MAX) == nb - 1);
		CHECK(pcpu_histogram_bucket_range(h, nb - 1, &lo, &hi) == 0 && lo == prev_hi + 1);
	}
	CHECK(pcpu_histogram_bucket_of(h, -5) == 0); /* negatives count as 0 */
	pcpu_histogram_destroy(h);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Quantile estimates against the exact order statistics. */
static void test_quantiles(unsigned p)
{
	enum { N = 100000 };
	struct pcpu_histogram_layout l = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0, p,
					   (int64_t)600 * 1000000000, 0, 0, 0, 0 };
	pcpu_histogram_t *h = pcpu_histogram_create(&l);
	int64_t *v = malloc(N * sizeof *v);
	uint64_t *counts;
	static const double qs[] = { 0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1 };
	size_t i, nb;

	CHECK(h && v);
	for (i = 0; i < N; i++) {
		/* log-uniform from 1 ns to ~10 minutes */
		double e = (double)(next_rand(&rng) % 1000000) / 1000000.0 * 39.0;
		v[i] = (int64_t)ldexp(1.0, (int)e) + (int64_t)(next_rand(&rng) % 1000);
		pcpu_histogram_record(h, v[i]);
	}
	qsort(v, N, sizeof *v, cmp_i64);
	nb = pcpu_histogram_nbuckets(h);
	counts = malloc(nb * sizeof *counts);
	CHECK(counts);
	CHECK(pcpu_histogram_read(h, counts, nb, NULL, NULL) == 0);
	for (i = 0; i < sizeof qs / sizeof qs[0]; i++) {
		uint64_t rank = (uint64_t)ceil(qs[i] * N);
		double truth, est = pcpu_histogram_quantile(h, counts, nb, qs[i]);

		if (rank < 1)
			rank = 1;
		truth = (double)v[rank - 1];
		/* Interpolated inside the bucket holding the true value: off
		 * by less than the bucket's width (2^-p of it; 1 below 2^p). */
		if (fabs(est - truth) > fmax(1.0, ldexp(truth, -(int)p))) {
			fprintf(stderr, "p=%u q=%g: estimate %.17g, true %.17g\n", p, qs[i], est, truth);
			CHECK(0);
		}
	}
	CHECK(isnan(pcpu_histogram_quantile(h, counts, nb, 1.5)) && errno == EINVAL);
	free(counts);
	free(v);
	pcpu_histogram_destroy(h);
}

/* Explicit quantiles interpolate inside the right bucket. */
static void test_explicit_quantile(void)
{
	static const int64_t bounds[] = { 10, 20, 40 };
	struct pcpu_histogram_layout l = { PCPU_HISTOGRAM_EXPLICIT, bounds, 3, 0, 0, 0, 0, 0, 0 };
	pcpu_histogram_t *h = pcpu_histogram_create(&l);
	uint64_t counts[4];
	int i;

	CHECK(h);
	for (i = 0; i < 10; i++)
		pcpu_histogram_record(h, 5);   /* (-inf, 10] */
	for (i = 0; i < 10; i++)
		pcpu_histogram_record(h, 30);  /* (20, 40] */
	pcpu_histogram_record_n(h, 100, 5); /* +Inf */
	CHECK(pcpu_histogram_read(h, counts, 4, NULL, NULL) == 0);
	CHECK(counts[0] == 10 && counts[1] == 0 && counts[2] == 10 && counts[3] == 5);
	/* rank 10 of 25 is the last of bucket 0: its upper bound */
	CHECK(pcpu_histogram_quantile(h, counts, 4, 0.4) == 10.0);
	/* rank 15: halfway through (20, 40] */
	CHECK(pcpu_histogram_quantile(h, counts, 4, 0.6) == 30.0);
	/* +Inf bucket: the largest bound */
	CHECK(pcpu_histogram_quantile(h, counts, 4, 1.0) == 40.0);
	pcpu_histogram_destroy(h);
}

/* Layout errors. */
static void test_layout_errors(void)
{
	static const int64_t bad[] = { 1, 1 };
	struct pcpu_histogram_layout l = { PCPU_HISTOGRAM_EXPLICIT, bad, 2, 0, 0, 0, 0, 0, 0 };

	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	CHECK(strstr(pcpu_stats_error(), "strictly increasing"));
	l.nbounds = 0;
	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	l.scheme = PCPU_HISTOGRAM_LOG_LINEAR;
	l.precision_bits = 15;
	l.max_value = 100;
	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	CHECK(strstr(pcpu_stats_error(), "precision"));
	l.precision_bits = 3;
	l.max_value = 0;
	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	l.precision_bits = 14;
	l.max_value = INT64_MAX; /* the largest layout: 50 groups of 16384 */
	{
		pcpu_histogram_t *h = pcpu_histogram_create(&l);
		CHECK(h && pcpu_histogram_nbuckets(h) == 50 * 16384 + 1);
		CHECK(pcpu_histogram_bucket_of(h, INT64_MAX) == 50 * 16384 - 1);
		pcpu_histogram_destroy(h);
	}
	l.max_value = 100;
	l.export_per_octave = 3;
	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	CHECK(strstr(pcpu_stats_error(), "export_per_octave"));
	l.export_per_octave = 128;
	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	l.export_per_octave = 0;
	l.scheme = (enum pcpu_histogram_scheme)7;
	CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
	CHECK(pcpu_histogram_create(NULL) == NULL && errno == EINVAL);
}

/*
 * Exponential (native) buckets against Prometheus' definition: a value x
 * (exposed units: v * 10^scale) > zero threshold belongs to native index
 * ceil(log2(x) * 2^schema). Checked for every schema, a few scales, every
 * bucket's two ends and random values (libm here, not in the library);
 * values within 1e-12 of a boundary are skipped (the library's bounds are
 * a few ulps from the exact ones). Negative values count as 0.
 */
static void test_exponential(void)
{
	static const int scales[] = { -9, -6, 0, 3 };
	uint64_t x = 0x2545f4914f6cdd1dull;
	int schema;
	size_t si;

	for (schema = PCPU_HISTOGRAM_SCHEMA_MIN; schema <= PCPU_HISTOGRAM_SCHEMA_MAX; schema++) {
		for (si = 0; si < sizeof scales / sizeof scales[0]; si++) {
			struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL,
							   .schema = schema, .scale_exp10 = scales[si] };
			pcpu_histogram_t *h = pcpu_histogram_create(&l);
			struct pcpu_family_desc d = { .name = "e", .type = PCPU_METRIC_HISTOGRAM,
						      .scale_exp10 = scales[si], .histogram = &l };
			pcpu_registry_t *reg;
			struct pcpu_snapshot *s;
			const struct pcpu_snapshot_family *f;
			int64_t lo, hi;
			size_t nb, b, k;

			if (!h) { /* too many buckets: only fine schemas with small units */
				CHECK(errno == EINVAL && schema >= 6);
				continue;
			}
			nb = pcpu_histogram_nbuckets(h);
			CHECK(h->pcpu__bits != 0); /* the table lookup, not the search, is checked */
			CHECK(pcpu_histogram_bucket_of(h, -5) == 0 && pcpu_histogram_bucket_of(h, 0) == 0);
			CHECK(pcpu_histogram_bucket_of(h, INT64_MAX) == nb - 2); /* +Inf unreachable */
			CHECK((reg = pcpu_registry_create()) && pcpu_registry_family(reg, &d) &&
			      pcpu_family_histogram(pcpu_registry_find(reg, "e"), NULL));
			CHECK((s = pcpu_registry_snapshot(reg)) != NULL);
			f = &s->families[0];
			CHECK((f->flags & PCPU_SNAPSHOT_NATIVE) && f->native_schema == schema &&
			      f->nbuckets == nb);
			for (k = 0; k < 2 * nb + 3000; k++) {
				int64_t v;
				double xv, idx;

				if (k < 2 * nb - 2) { /* both ends of each finite bucket */
					CHECK(pcpu_histogram_bucket_range(h, k / 2, &lo, &hi) == 0);
					v = k % 2 ? hi : lo;
				} else {
					x ^= x << 13;
					x ^= x >> 7;
					x ^= x << 17;
					v = (int64_t)(x >> (x % 63));
				}
				b = pcpu_histogram_bucket_of(h, v);
				xv = (double)v * pow(10, scales[si]);
				idx = ceil(log2(xv) * ldexp(1, schema));
				if (v <= 0 || fabs(log2(xv) * ldexp(1, schema) - round(log2(xv) * ldexp(1, schema))) < 1e-9)
					continue; /* the zero bucket, or at a boundary */
				if (b == 0) { /* zero bucket: at or below base^(index - 1) */
					CHECK(idx <= f->native_index - 1);
				} else if ((double)(f->native_index + (int32_t)b - 1) != idx) {
					fprintf(stderr, "schema %d scale %d v=%lld: bucket %zu (native %d), Prometheus %g\n",
						schema, scales[si], (long long)v, b,
						f->native_index + (int)b - 1, idx);
					CHECK(0);
				}
			}
			pcpu_snapshot_free(s);
			pcpu_registry_destroy(reg);
			pcpu_histogram_destroy(h);
		}
	}
	{
		struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 9 };

		CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
		l.schema = 8;
		l.scale_exp10 = -9; /* 60 powers of two of 256 buckets: too many */
		CHECK(pcpu_histogram_create(&l) == NULL && errno == EINVAL);
		CHECK(strstr(pcpu_stats_error(), "4096"));
	}
}

/* The `le` lines of a histogram family's 0.0.4 exposition, in order. */
static size_t le_lines(pcpu_registry_t *reg, char les[][48], size_t max)
{
	char *text, *p;
	size_t len, n = 0;

	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	for (p = text; (p = strstr(p, "le=\"")) != NULL && n < max; p++) {
		size_t k = strcspn(p + 4, "\"");
		CHECK(k < 48);
		memcpy(les[n], p + 4, k);
		les[n++][k] = '\0';
	}
	free(text);
	return n;
}

/*
 * Log-linear exposition: the same `le` set from creation on, whatever was
 * recorded (a bucket's series appearing later breaks rate() in PromQL),
 * export_per_octave bounds per power of two from export_min, ending in
 * +Inf; folded buckets add up in the next exposed bound.
 */
static void test_export(void)
{
	struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR,
					   .precision_bits = 5, .max_value = 1 << 20,
					   .export_per_octave = 2, .export_min = 1000 };
	struct pcpu_family_desc d = { .name = "lat_seconds", .unit = "seconds",
				      .type = PCPU_METRIC_HISTOGRAM, .scale_exp10 = -9,
				      .histogram = &l };
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_family_t *f;
	pcpu_histogram_t *h;
	static char before[200][48], after[200][48];
	size_t nb, na, i;
	char *text;
	size_t len;

	CHECK(reg && (f = pcpu_registry_family(reg, &d)) && (h = pcpu_family_histogram(f, NULL)));
	nb = le_lines(reg, before, 200);
	/* 2 per power of two from 1000 to 2^21 - 1: 1023 1535 2047 ...
	 * (2^10 .. 2^21 and 1.5 * 2^10 .. 1.5 * 2^20, minus one), +Inf. */
	CHECK(nb == 12 + 11 + 1);
	CHECK(strcmp(before[0], "1.023e-06") == 0 && strcmp(before[1], "1.535e-06") == 0 &&
	      strcmp(before[nb - 2], "0.002097151") == 0 && strcmp(before[nb - 1], "+Inf") == 0);
	for (i = 0; i < 1000; i++)
		pcpu_histogram_record(h, (int64_t)(i * i * 2 + 3));
	na = le_lines(reg, after, 200);
	CHECK(na == nb);
	for (i = 0; i < nb; i++)
		CHECK(strcmp(before[i], after[i]) == 0);
	/* Values <= 1023 (23 of them: i*i*2+3 <= 1023 for i <= 22) fold into
	 * the first bound; everything under 2^21 is finite. */
	CHECK(pcpu_registry_write(reg, PCPU_FORMAT_PROMETHEUS, &text, &len) == 0);
	CHECK(strstr(text, "lat_seconds_bucket{le=\"1.023e-06\"} 23\n"));
	CHECK(strstr(text, "lat_seconds_bucket{le=\"0.002097151\"} 1000\n"));
	CHECK(strstr(text, "lat_seconds_bucket{le=\"+Inf\"} 1000\n"));
	free(text);
	/* Another export rule is another layout: a different family. */
	l.export_per_octave = 4;
	CHECK(pcpu_registry_family(reg, &d) == NULL && errno == EEXIST);
	pcpu_registry_destroy(reg);
}

/*
 * pcpu_snapshot_quantile() over a registry snapshot: the same estimate as
 * pcpu_histogram_quantile() over a read, scaled; every bucket counts, not
 * only the exposed ones; errors for what is not a histogram.
 */
static void test_snapshot_quantile(void)
{
	struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_LOG_LINEAR,
					   .precision_bits = 4, .max_value = 1 << 20,
					   .export_per_octave = 1 };
	struct pcpu_family_desc d = { .name = "lat_seconds", .unit = "seconds",
				      .type = PCPU_METRIC_HISTOGRAM, .scale_exp10 = -6,
				      .histogram = &l };
	struct pcpu_family_desc g = { .name = "g", .type = PCPU_METRIC_GAUGE };
	static const double qs[] = { 0, 0.1, 0.5, 0.9, 0.99, 1 };
	pcpu_registry_t *reg = pcpu_registry_create();
	pcpu_family_t *f;
	pcpu_histogram_t *h;
	struct pcpu_snapshot *s;
	uint64_t counts[1024];
	size_t i, nbk;

	CHECK(reg && (f = pcpu_registry_family(reg, &d)) && (h = pcpu_family_histogram(f, NULL)));
	CHECK(pcpu_registry_gauge(reg, "g", NULL));
	for (i = 1; i <= 5000; i++)
		pcpu_histogram_record(h, (int64_t)(i * 37 % 90001));
	nbk = pcpu_histogram_nbuckets(h);
	CHECK(nbk <= 1024 && pcpu_histogram_read(h, counts, nbk, NULL, NULL) == 0);
	CHECK((s = pcpu_registry_snapshot(reg)) != NULL);
	CHECK(strcmp(s->families[1].name, "lat_seconds") == 0);
	for (i = 0; i < sizeof qs / sizeof qs[0]; i++) {
		double a = pcpu_snapshot_quantile(&s->families[1],
						  s->families[1].series[0].value.histogram.counts, qs[i]);
		double b = pcpu_histogram_quantile(h, counts, nbk, qs[i]) * 1e-6;

		if (fabs(a - b) > 1e-12 * b) {
			fprintf(stderr, "q=%g: snapshot %.17g, histogram %.17g\n", qs[i], a, b);
			CHECK(0);
		}
	}
	/* Finer than the one exposed bound per power of two: the median of
	 * i*37 mod 90001 is near 45000, inside (32767, 65535]. */
	{
		double m = pcpu_snapshot_quantile(&s->families[1],
						  s->families[1].series[0].value.histogram.counts, 0.5);
		CHECK(fabs(m - 0.045) < 0.045 / 16);
	}
	errno = 0;
	CHECK(isnan(pcpu_snapshot_quantile(&s->families[0], counts, 0.5)) && errno == EINVAL);
	CHECK(isnan(pcpu_snapshot_quantile(&s->families[1], counts, -0.1)) && errno == EINVAL);
	CHECK(isnan(pcpu_snapshot_quantile(NULL, counts, 0.5)) && errno == EINVAL);
	memset(counts, 0, sizeof counts);
	CHECK(isnan(pcpu_snapshot_quantile(&s->families[1], counts, 0.5)) && errno == EINVAL);
	(void)g;
	pcpu_snapshot_free(s);
	pcpu_registry_destroy(reg);
}

/* Concurrent recording: count and sum exact, every bucket exact. */
enum { THREADS = 8, PER_THREAD = 200000 };
static pcpu_histogram_t *shared_h;
static uint64_t expect_counts[THREADS][64 * 8 + 1];
static int64_t expect_sums[THREADS];
static int stop_reader;

static void *recorder(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t s = 0x1234567u + (uint64_t)t * 7919;
	int i;

	for (i = 0; i < PER_THREAD; i++) {
		int64_t v = (int64_t)((next_rand(&s) >> 1) >> (next_rand(&s) % 63));
		size_t b = pcpu_histogram_bucket_of(shared_h, v);

		pcpu_histogram_record(shared_h, v);
		expect_counts[t][b]++;
		expect_sums[t] = (int64_t)((uint64_t)expect_sums[t] + (uint64_t)v);
	}
	return NULL;
}

static void *reader(void *arg)
{
	size_t nb = pcpu_histogram_nbuckets(shared_h);
	uint64_t *c = malloc(nb * sizeof *c), count, last = 0;

	(void)arg;
	CHECK(c);
	while (!__atomic_load_n(&stop_reader, __ATOMIC_RELAXED)) {
		CHECK(pcpu_histogram_read(shared_h, c, nb, &count, NULL) == 0);
		CHECK(count >= last); /* counts only grow */
		last = count;
	}
	free(c);
	return NULL;
}

static void test_concurrent(void)
{
	struct pcpu_histogram_layout l = { PCPU_HISTOGRAM_LOG_LINEAR, NULL, 0, 3, INT64_MAX, 0, 0, 0, 0 };
	pthread_t th[THREADS], rd;
	uint64_t *counts, count, want_count = 0;
	int64_t sum, want_sum = 0;
	size_t nb, b;
	int t;

	shared_h = pcpu_histogram_create(&l);
	CHECK(shared_h);
	nb = pcpu_histogram_nbuckets(shared_h);
	CHECK(nb <= 64 * 8 + 1);
	CHECK(pthread_create(&rd, NULL, reader, NULL) == 0);
	for (t = 0; t < THREADS; t++)
		CHECK(pthread_create(&th[t], NULL, recorder, (void *)(intptr_t)t) == 0);
	for (t = 0; t < THREADS; t++)
		CHECK(pthread_join(th[t], NULL) == 0);
	__atomic_store_n(&stop_reader, 1, __ATOMIC_RELAXED);
	CHECK(pthread_join(rd, NULL) == 0);
	counts = malloc(nb * sizeof *counts);
	CHECK(counts);
	CHECK(pcpu_histogram_read(shared_h, counts, nb, &count, &sum) == 0);
	for (b = 0; b < nb; b++) {
		uint64_t want = 0;
		for (t = 0; t < THREADS; t++)
			want += expect_counts[t][b];
		CHECK_EQ_U64(counts[b], want);
		want_count += want;
	}
	for (t = 0; t < THREADS; t++)
		want_sum = (int64_t)((uint64_t)want_sum + (uint64_t)expect_sums[t]);
	CHECK_EQ_U64(count, (uint64_t)THREADS * PER_THREAD);
	CHECK_EQ_U64(want_count, count);
	CHECK_EQ_U64(sum, want_sum);
	free(counts);
	pcpu_histogram_destroy(shared_h);
}

/*
 * pcpu_histogram_zero() and pcpu_histogram_merge(): a zero reads 0 in
 * every bucket and the sum; a merge of a read gives that read back; both
 * refuse bad arguments. Then zeros racing recorders: a read never counts
 * more than was recorded (an offset applied twice would), and once the
 * recorders stop a last zero reads 0 and later records read exactly.
 */
static int zero_stop;
static uint64_t zero_recorded;

static void *zero_recorder(void *arg)
{
	uint64_t s = 0xabcdefu + (uint64_t)(intptr_t)arg;

	while (!__atomic_load_n(&zero_stop, __ATOMIC_RELAXED)) {
		/* Counted before it is recorded (the fence orders the count
		 * before the record's stores on any CPU): never fewer than a
		 * read sees. */
		__atomic_add_fetch(&zero_recorded, 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		pcpu_histogram_record(shared_h, (int64_t)(next_rand(&s) % 5000));
	}
	return NULL;
}

static void test_zero_merge(void)
{
	static const int64_t bounds[] = { 10, 100, 1000 };
	struct pcpu_histogram_layout l = { PCPU_HISTOGRAM_EXPLICIT, bounds, 3, 0, 0, 0, 0, 0, 0 };
	uint64_t counts[4], again[4], count, before;
	int64_t sum, sum2;
	pthread_t th[2];
	size_t b;
	int k;

	shared_h = pcpu_histogram_create(&l);
	CHECK(shared_h);
	for (k = 0; k < 1000; k++)
		pcpu_histogram_record(shared_h, k * 3);
	CHECK(pcpu_histogram_read(shared_h, counts, 4, &count, &sum) == 0);
	CHECK_EQ_U64(count, 1000);
	CHECK(pcpu_histogram_zero(shared_h) == 0);
	CHECK(pcpu_histogram_read(shared_h, again, 4, &count, &sum2) == 0);
	CHECK_EQ_U64(count, 0);
	CHECK_EQ_U64(sum2, 0);
	for (b = 0; b < 4; b++)
		CHECK_EQ_U64(again[b], 0);
	CHECK(pcpu_histogram_merge(shared_h, counts, 4, sum) == 0);
	CHECK(pcpu_histogram_read(shared_h, again, 4, &count, &sum2) == 0);
	CHECK_EQ_U64(count, 1000);
	CHECK_EQ_U64(sum2, sum);
	for (b = 0; b < 4; b++)
		CHECK_EQ_U64(again[b], counts[b]);
	/* Merged twice: twice the counts (a merge adds). */
	CHECK(pcpu_histogram_merge(shared_h, counts, 4, sum) == 0);
	CHECK(pcpu_histogram_read(shared_h, again, 4, &count, &sum2) == 0);
	CHECK_EQ_U64(count, 2000);
	CHECK_EQ_U64(sum2, (int64_t)(2 * (uint64_t)sum));
	CHECK(pcpu_histogram_zero(NULL) < 0 && errno == EINVAL);
	CHECK(pcpu_histogram_merge(NULL, counts, 4, 0) < 0 && errno == EINVAL);
	CHECK(pcpu_histogram_merge(shared_h, NULL, 4, 0) < 0 && errno == EINVAL);
	CHECK(pcpu_histogram_merge(shared_h, counts, 3, 0) < 0 && errno == EINVAL);
	CHECK(pcpu_histogram_read(shared_h, again, 4, &count, NULL) == 0);
	CHECK_EQ_U64(count, 2000); /* the refused merges added nothing */

	/* Zeros racing recorders. */
	CHECK(pcpu_histogram_zero(shared_h) == 0);
	for (k = 0; k < 2; k++)
		CHECK(pthread_create(&th[k], NULL, zero_recorder, (void *)(intptr_t)k) == 0);
	for (k = 0; k < 2000; k++) {
		if (k % 4 == 0)
			CHECK(pcpu_histogram_zero(shared_h) == 0);
		CHECK(pcpu_histogram_read(shared_h, again, 4, &count, NULL) == 0);
		__atomic_thread_fence(__ATOMIC_ACQUIRE); /* the read's loads before the count's */
		before = __atomic_load_n(&zero_recorded, __ATOMIC_RELAXED);
		CHECK(count <= before); /* never more than was recorded */
	}
	__atomic_store_n(&zero_stop, 1, __ATOMIC_RELAXED);
	for (k = 0; k < 2; k++)
		CHECK(pthread_join(th[k], NULL) == 0);
	CHECK(pcpu_histogram_zero(shared_h) == 0);
	CHECK(pcpu_histogram_read(shared_h, again, 4, &count, &sum2) == 0);
	CHECK_EQ_U64(count, 0);
	CHECK_EQ_U64(sum2, 0);
	for (k = 0; k < 100; k++)
		pcpu_histogram_record(shared_h, 50);
	CHECK(pcpu_histogram_read(shared_h, again, 4, &count, &sum2) == 0);
	CHECK_EQ_U64(count, 100);
	CHECK_EQ_U64(again[1], 100);
	CHECK_EQ_U64(sum2, 5000);
	pcpu_histogram_destroy(shared_h);
}

/* Heap in use (glibc's arena and its mmap()ed blocks), or 0 where
 * mallinfo2() is missing or does not see the allocator (ASan's, TSan's). */
static size_t heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33) && !defined(__SANITIZE_ADDRESS__) && \
	!defined(__SANITIZE_THREAD__)
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
#else
	return 0;
#endif
}

static void *create_destroy(void *arg)
{
	struct pcpu_histogram_layout l = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL };
	int i;

	for (i = 0; i < 300; i++) {
		pcpu_histogram_t *h;
		int64_t v = 1000 + i, lo, hi;

		l.schema = (i + (int)(intptr_t)arg) % 3;
		CHECK((h = pcpu_histogram_create(&l)) != NULL);
		CHECK(pcpu_histogram_bucket_range(h, pcpu_histogram_bucket_of(h, v), &lo, &hi) == 0);
		CHECK(lo <= v && v <= hi);
		pcpu_histogram_destroy(h);
	}
	return NULL;
}

/* A layout's bounds and lookup table are one copy per process, shared by
 * every histogram of that layout, standalone or a registry's series, and
 * freed with the last: a series costs its handle, not its tables (22.8 KB
 * each for schema 3 in nanoseconds when they were copied per series). */
static void test_shared_tables(void)
{
	enum { N = 1000 };
	static const int64_t b1[] = { 10, 20, 30 }, b2[] = { 10, 20, 30 }, b3[] = { 10, 20, 31 };
	struct pcpu_histogram_layout e3 = { .scheme = PCPU_HISTOGRAM_EXPONENTIAL, .schema = 3,
					    .scale_exp10 = -9 };
	struct pcpu_histogram_layout e2 = e3, e3s = e3;
	struct pcpu_histogram_layout x1 = { PCPU_HISTOGRAM_EXPLICIT, b1, 3, 0, 0, 0, 0, 0, 0 };
	struct pcpu_histogram_layout x2 = x1, x3 = x1;
	static const char *const ln[] = { "id" };
	struct pcpu_family_desc d = { .name = "e_seconds", .type = PCPU_METRIC_HISTOGRAM, .nlabels = 1,
				      .label_names = ln, .scale_exp10 = -9, .histogram = &e3 };
	pcpu_histogram_t *a, *b, *c, *hs[N], *s1, *s2;
	pthread_t th[4];
	pcpu_registry_t *reg;
	pcpu_family_t *f;
	size_t h0, grown, i;
	pid_t pid;
	int st;

	e2.schema = 2;
	e3s.scale_exp10 = -6;
	x2.bounds = b2;
	x3.bounds = b3;
	/* One layout, one copy; another schema or scale, another. */
	CHECK((a = pcpu_histogram_create(&e3)) && (b = pcpu_histogram_create(&e3)));
	CHECK(a->pcpu__bounds == b->pcpu__bounds && a->pcpu__bits == b->pcpu__bits && a->pcpu__bits);
	CHECK(((uintptr_t)a->pcpu__bounds & 63) == 0); /* a cache line of their own */
	CHECK((c = pcpu_histogram_create(&e2)) && c->pcpu__bounds != a->pcpu__bounds);
	pcpu_histogram_destroy(c);
	CHECK((c = pcpu_histogram_create(&e3s)) && c->pcpu__bounds != a->pcpu__bounds);
	pcpu_histogram_destroy(c);
	/* The series of a registry family share them with standalone ones. */
	CHECK((reg = pcpu_registry_create()) && (f = pcpu_registry_family(reg, &d)));
	{
		const char *v1[] = { "1" }, *v2[] = { "2" };

		CHECK((s1 = pcpu_family_histogram(f, v1)) && (s2 = pcpu_family_histogram(f, v2)));
	}
	CHECK(s1 != s2 && s1->pcpu__bounds == a->pcpu__bounds && s2->pcpu__bounds == a->pcpu__bounds);
	/* The first user gone, the others still read them. */
	pcpu_histogram_destroy(a);
	CHECK(pcpu_histogram_bucket_of(b, 1000000000) == pcpu_histogram_bucket_of(s1, 1000000000));
	pcpu_registry_destroy(reg);
	CHECK(pcpu_histogram_bucket_of(b, 1) == 0 && pcpu_histogram_bucket_of(b, 1000000000) > 1);
	/* A fork() child has the parent's, and makes and frees its own users. */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		pcpu_histogram_t *k = pcpu_histogram_create(&e3);
		int ok = k && k->pcpu__bounds == b->pcpu__bounds;

		pcpu_histogram_destroy(k);
		pcpu_histogram_destroy(b);
		k = pcpu_histogram_create(&e3);
		ok = ok && k && pcpu_histogram_bucket_of(k, 1000000000) > 1;
		pcpu_histogram_destroy(k);
		_exit(ok ? 0 : 1);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	pcpu_histogram_destroy(b);
	/* Explicit layouts by their bounds' values, not their address. */
	CHECK((a = pcpu_histogram_create(&x1)) && (b = pcpu_histogram_create(&x2)) &&
	      (c = pcpu_histogram_create(&x3)));
	CHECK(a->pcpu__bounds == b->pcpu__bounds && a->pcpu__bounds != b1 &&
	      c->pcpu__bounds != a->pcpu__bounds);
	CHECK(pcpu_histogram_bucket_of(c, 31) == 2 && pcpu_histogram_bucket_of(a, 31) == 3);
	pcpu_histogram_destroy(a);
	pcpu_histogram_destroy(b);
	pcpu_histogram_destroy(c);
	/* Made and destroyed from several threads at once: each histogram
	 * finds its layout's tables (ASan: none freed early or twice). */
	for (i = 0; i < 4; i++)
		CHECK(pthread_create(&th[i], NULL, create_destroy, (void *)(intptr_t)i) == 0);
	for (i = 0; i < 4; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
	/* The heap a series costs: its handle (the target, 1 KB). */
	h0 = heap_in_use();
	for (i = 0; i < N; i++)
		CHECK((hs[i] = pcpu_histogram_create(&e3)) != NULL);
	grown = heap_in_use() - h0;
	if (h0 && grown > (size_t)N * 1024) {
		fprintf(stderr, "heap per exponential histogram: %zu bytes, more than 1 KB\n", grown / N);
		CHECK(0);
	}
	for (i = 0; i < N; i++)
		pcpu_histogram_destroy(hs[i]);
}

int main(void)
{
	unsigned p;

	test_explicit_boundaries();
	for (p = 0; p <= 10; p++) {
		test_log_linear_boundaries(p, 1);
		test_log_linear_boundaries(p, 1000);
		test_log_linear_boundaries(p, (int64_t)1 << 40);
	}
	test_log_linear_boundaries(3, INT64_MAX);
	test_log_linear_boundaries(0, INT64_MAX);
	for (p = 0; p <= 10; p++)
		test_quantiles(p);
	test_explicit_quantile();
	test_search_random();
	test_exponential();
	test_snapshot_quantile();
	test_export();
	test_layout_errors();
	test_concurrent();
	test_zero_merge();
	test_shared_tables();
	printf("histogram tests passed (mode %s)\n", pcpu_rseq_mode_name(pcpu_rseq_mode()));
	return 0;
}
