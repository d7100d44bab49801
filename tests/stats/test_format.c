/*
 * The writers' building blocks, tested directly (this test compiles
 * src/stats/format.c and validate.c into itself): shortest round-trip
 * doubles in Go's layout, independent of the locale; exact scaling; the
 * UTF-8 validator against a reference decoder, exhaustively up to three
 * bytes.
 */
#include "../check.h"
#include "utf8_ref.h"
#include "stats_internal.h"
#include "si.h"
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void expect_fmt(double v, int canonical, const char *want)
{
	char buf[PCPU__DOUBLE_BUF];
	size_t n = pcpu__fmt_double(buf, v, canonical);

	if (strcmp(buf, want) != 0 || n != strlen(want)) {
		fprintf(stderr, "format %.17g (canonical %d): got \"%s\", want \"%s\"\n", v, canonical,
			buf, want);
		exit(1);
	}
}

static void expect_si(double v, const char *unit, const char *want)
{
	char buf[PCPU_FORMAT_NUMBER_MAX + 16];
	int n = si_format(buf, sizeof buf, v, unit);

	if (n < 0 || strcmp(buf, want) != 0 || (size_t)n != strlen(want)) {
		fprintf(stderr, "si_format(%.17g, \"%s\"): got %d \"%s\", want \"%s\"\n", v,
			unit ? unit : "(null)", n, buf, want);
		exit(1);
	}
}

/* For people: three significant digits, SI prefixes for multiples. */
static void test_si(void)
{
	char small[8];

	expect_si(2302049761.1, "/s", "2.30 G/s"); /* what `pcpustat -w` printed 2.3020497611e+09 for */
	expect_si(950400, "/s", "950 k/s");
	expect_si(999.4, "/s", "999 /s");
	expect_si(999.6, "/s", "1.00 k/s"); /* the prefix after rounding */
	expect_si(1000, "/s", "1.00 k/s");
	expect_si(12, "/s", "12.0 /s");
	expect_si(5, "/s", "5.00 /s");
	expect_si(1, NULL, "1.00");
	expect_si(123456, "", "123 k");
	expect_si(-1500, "/s", "-1.50 k/s");
	expect_si(0.25, "/s", "0.250 /s");
	expect_si(0.00125, "/s", "0.00125 /s");
	expect_si(0.000125, "/s", "1.25e-04 /s");
	expect_si(0, "/s", "0 /s");
	expect_si(-0.0, NULL, "0");
	expect_si(1e6, "B", "1.00 MB");
	expect_si(4.5e18, "", "4.50 E");
	expect_si(9.99e26, "", "999 Y");
	expect_si(1e27, "", "1.00e+27");
	expect_si(HUGE_VAL, "/s", "+Inf /s");
	expect_si(-HUGE_VAL, NULL, "-Inf");
	expect_si(NAN, NULL, "NaN");
	/* Too small a buffer: ERANGE and ""; NULL out: EINVAL. */
	errno = 0;
	CHECK(si_format(small, sizeof small, 2.3e9, "/s") == -1 && errno == ERANGE && small[0] == '\0');
	CHECK(si_format(small, sizeof small, 2.3e9, "") == 6 && strcmp(small, "2.30 G") == 0);
	errno = 0;
	CHECK(si_format(NULL, 8, 1, NULL) == -1 && errno == EINVAL);
}

static void test_known(void)
{
	expect_fmt(0.005, 0, "0.005");
	expect_fmt(1, 0, "1");
	expect_fmt(1, 1, "1.0");
	expect_fmt(0, 0, "0");
	expect_fmt(0, 1, "0.0");
	expect_fmt(10, 1, "10.0");
	expect_fmt(123456, 1, "123456.0");
	expect_fmt(1234567, 1, "1.234567e+06");
	expect_fmt(1e6, 1, "1e+06");
	expect_fmt(1.5e6, 0, "1.5e+06");
	expect_fmt(0.0001, 0, "0.0001");
	expect_fmt(0.00001, 0, "1e-05");
	expect_fmt(0.1 + 0.2, 0, "0.30000000000000004");
	expect_fmt(-2.5, 0, "-2.5");
	expect_fmt(-273.5, 1, "-273.5");
	expect_fmt(1e22, 0, "1e+22");
	expect_fmt(1e100, 0, "1e+100");
	expect_fmt(5e-324, 0, "5e-324");
	expect_fmt(DBL_MAX, 0, "1.7976931348623157e+308");
	expect_fmt(INFINITY, 1, "+Inf");
	expect_fmt(-INFINITY, 1, "-Inf");
	expect_fmt(NAN, 1, "NaN");
	expect_fmt(pcpu__scale_i64(5000000, -9), 1, "0.005");
	expect_fmt(pcpu__scale_i64(2500000000, -9), 1, "2.5");
	expect_fmt(pcpu__scale_i64(1234567891, -9), 0, "1.234567891");
	expect_fmt(pcpu__scale_i64(1, -5), 0, "1e-05");
	expect_fmt(pcpu__scale_i64(15, 6), 0, "1.5e+07");
	expect_fmt(pcpu__scale_u64(UINT64_MAX, 0), 0, "1.8446744073709552e+19");
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Random finite doubles: the output reads back exactly, and one digit
 * fewer would not (shortest). */
static locale_t c_loc;

static void test_round_trip(int n)
{
	int i;

	if (!c_loc)
		c_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
	CHECK(c_loc);
	for (i = 0; i < n; i++) {
		uint64_t bits = next_rand();
		double v, back;
		locale_t prev;
		char buf[PCPU__DOUBLE_BUF], tmp[64];
		int digits = 0;
		const char *p;

		memcpy(&v, &bits, sizeof v);
		if (!isfinite(v))
			continue;
		pcpu__fmt_double(buf, v, i & 1); /* under the caller's locale */
		/* ... checked in the C locale (strtod and snprintf follow it). */
		prev = uselocale(c_loc);
		back = strtod(buf, NULL);
		if (back != v && !(v == 0 && back == 0)) {
			fprintf(stderr, "%.17g printed as %s reads back as %.17g\n", v, buf, back);
			exit(1);
		}
		for (p = buf; *p && *p != 'e'; p++)
			if (*p >= '1' && *p <= '9')
				digits = (int)(p - buf) + 1; /* position of the last non-zero digit */
		/* count significant digits properly */
		{
			int sig = 0, started = 0;
			for (p = buf; *p && *p != 'e'; p++) {
				if (*p < '0' || *p > '9')
					continue;
				if (*p != '0')
					started = 1;
				if (started)
					sig++;
			}
			/* trailing zeros of an integer are not significant */
			while (sig > 1 && strchr(buf, 'e') == NULL && strchr(buf, '.') == NULL) {
				size_t len = strlen(buf);
				if (buf[len - 1] != '0')
					break;
				buf[len - 1] = '\0';
				sig--;
			}
			if (sig > 1) {
				snprintf(tmp, sizeof tmp, "%.*e", sig - 2, v);
				if (strtod(tmp, NULL) == v) {
					fprintf(stderr, "%.17g: %s is not the shortest (%s)\n", v, buf, tmp);
					exit(1);
				}
			}
		}
		(void)digits;
		uselocale(prev);
	}
}

/*
 * Scaled integers (counter and gauge values, sums, `le` bounds) take a
 * shortcut below 10^15: their own digits, laid out. The shortcut must
 * print exactly what the general path prints for the scaled double, for
 * every scale, sign and magnitude -- integers with few digits and with
 * trailing zeros, and those just below and at the 10^15 limit included.
 */
static void test_scaled_exact(int n)
{
	static const int64_t edge[] = { 0, 1, 9, 10, 100, 123456, 1000000, 999999999999999,
					1000000000000000, 1000000000000001, 9007199254740992,
					INT64_MAX, INT64_MIN };
	int i, scale;

	for (i = 0; i < n; i++) {
		uint64_t r = next_rand();
		int64_t v;
		char got[PCPU__DOUBLE_BUF], want[PCPU__DOUBLE_BUF];

		if (i < (int)(sizeof edge / sizeof *edge) * 2)
			v = i & 1 ? (int64_t)(0 - (uint64_t)edge[i / 2]) : edge[i / 2]; /* INT64_MIN too */
		else if (i & 2) /* few digits, trailing zeros: 1..99999 * 10^0..12 */
			v = (int64_t)(r % 100000 + 1) * (int64_t)pow(10, (double)((r >> 20) % 13));
		else /* any magnitude up to 2^(1..62), either sign */
			v = (int64_t)(r >> (2 + (r >> 58) % 61)) * (r & 1 ? -1 : 1);
		for (scale = -PCPU_STATS_SCALE_MAX; scale <= PCPU_STATS_SCALE_MAX; scale++) {
			if (!scale)
				continue;
			pcpu__fmt_scaled(got, (uint64_t)v, 1, scale);
			pcpu__fmt_double(want, pcpu__scale_i64(v, scale), 0);
			if (strcmp(got, want) != 0) {
				fprintf(stderr, "%lld * 10^%d: got %s, want %s\n", (long long)v, scale, got, want);
				exit(1);
			}
			if (v >= 0) {
				pcpu__fmt_scaled(got, (uint64_t)v, 0, scale);
				pcpu__fmt_double(want, pcpu__scale_u64((uint64_t)v, scale), 0);
				CHECK(strcmp(got, want) == 0);
			}
		}
		for (scale = -PCPU_STATS_SCALE_MAX; scale <= PCPU_STATS_SCALE_MAX; scale++) {
			pcpu__fmt_bound(got, v, scale);
			pcpu__fmt_double(want, pcpu__scale_i64(v, scale), 1);
			if (strcmp(got, want) != 0) {
				fprintf(stderr, "le %lld * 10^%d: got %s, want %s\n", (long long)v, scale, got, want);
				exit(1);
			}
		}
	}
}

static char dir[] = "/tmp/pcpu-locale-XXXXXX";

/* A locale whose decimal point is a comma: an installed one, or one built
 * with localedef into a temporary LOCPATH. */
static int comma_locale(const char **name)
{
	static const char *const locs[] = { "de_DE.UTF-8", "fr_FR.UTF-8", "de_DE.utf8", "ru_RU.UTF-8" };
	char cmd[256];
	size_t i;

	for (i = 0; i < sizeof locs / sizeof locs[0]; i++) {
		if (setlocale(LC_ALL, locs[i]) && *localeconv()->decimal_point == ',') {
			*name = locs[i];
			return 1;
		}
	}
	if (!mkdtemp(dir))
		return 0;
	snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", dir);
	if (system(cmd) == 0) {
		setenv("LOCPATH", dir, 1);
		if (setlocale(LC_ALL, "de_DE.UTF-8") && *localeconv()->decimal_point == ',') {
			*name = "de_DE.UTF-8 (built with localedef)";
			return 1;
		}
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return 0;
}

static void test_locale(void)
{
	const char *name;

	{
		if (comma_locale(&name)) {
			expect_fmt(0.005, 1, "0.005");
			expect_fmt(1234567, 1, "1.234567e+06");
			expect_si(2302049761.1, "/s", "2.30 G/s");
			expect_si(0.25, "/s", "0.250 /s");
			test_round_trip(1000);
			setlocale(LC_ALL, "C");
			printf("formatting under %s: ok\n", name);
			if (strcmp(dir, "/tmp/pcpu-locale-XXXXXX") != 0) {
				char cmd[64];
				snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
				CHECK(system(cmd) == 0);
			}
			return;
		}
	}
	printf("no locale with a decimal comma installed; locale check not run\n");
}

static void test_utf8(void)
{
	unsigned char s[4];
	unsigned a, b, c;
	int i;

	for (a = 0; a < 256; a++) {
		s[0] = (unsigned char)a;
		CHECK(pcpu__utf8_valid_prefix((char *)s, 1) == ref_utf8_prefix(s, 1));
		for (b = 0; b < 256; b++) {
			s[1] = (unsigned char)b;
			CHECK(pcpu__utf8_valid_prefix((char *)s, 2) == ref_utf8_prefix(s, 2));
			if (a < 0xe0 || a > 0xf4)
				continue;
			for (c = 0; c < 256; c++) {
				s[2] = (unsigned char)c;
				CHECK(pcpu__utf8_valid_prefix((char *)s, 3) == ref_utf8_prefix(s, 3));
			}
		}
	}
	for (i = 0; i < 500000; i++) {
		uint64_t r = next_rand();
		s[0] = (unsigned char)(0xf0 + (r & 7));
		s[1] = (unsigned char)(r >> 8);
		s[2] = (unsigned char)(r >> 16);
		s[3] = (unsigned char)(r >> 24);
		if (i & 1) { /* mostly continuation bytes, to reach valid ones */
			s[1] = (unsigned char)(0x80 | (s[1] & 0x3f));
			s[2] = (unsigned char)(0x80 | (s[2] & 0x3f));
			s[3] = (unsigned char)(0x80 | (s[3] & 0x3f));
		}
		CHECK(pcpu__utf8_valid_prefix((char *)s, 4) == ref_utf8_prefix(s, 4));
	}
}

static void test_escapes(void)
{
	struct pcpu__buf b = { NULL, 0, 0, 0 };

	pcpu__buf_label_value(&b, "a\"b\\c\nd\te");
	CHECK(strcmp(b.p, "a\\\"b\\\\c\\nd\te") == 0);
	b.len = 0;
	pcpu__buf_help(&b, "a\"b\\c\nd", 0);
	CHECK(strcmp(b.p, "a\"b\\\\c\\nd") == 0);
	b.len = 0;
	pcpu__buf_help(&b, "a\"b\\c\nd", 1);
	CHECK(strcmp(b.p, "a\\\"b\\\\c\\nd") == 0);
	b.len = 0;
	pcpu__buf_json_string(&b, "q\"\\\n\t\x01\x7f\xc3\xbc");
	CHECK(strcmp(b.p, "\"q\\\"\\\\\\n\\t\\u0001\\u007f\xc3\xbc\"") == 0);
	b.len = 0;
	pcpu__buf_i64(&b, INT64_MIN);
	CHECK(strcmp(b.p, "-9223372036854775808") == 0);
	b.len = 0;
	pcpu__buf_u64(&b, UINT64_MAX);
	CHECK(strcmp(b.p, "18446744073709551615") == 0);
	free(b.p);
}

int main(void)
{
	test_known();
	test_si();
	test_round_trip(60000);
	test_scaled_exact(3000);
	test_locale();
	test_utf8();
	test_escapes();
	printf("format tests passed\n");
	return 0;
}
