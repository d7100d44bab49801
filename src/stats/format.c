/* SPDX-License-Identifier: MIT */
/*
 * Output buffer, number formatting and escaping for the writers.
 *
 * Buffer: one growable allocation. A failed allocation sets `failed` and
 * drops all later output, so a writer checks once at the end and either
 * hands out the whole exposition or frees it: never a partial one.
 *
 * Integers are formatted by hand (exact, fast, no locale). Doubles must be
 * printed without loss of precision and independently of the application's
 * locale (LC_NUMERIC may use a comma): we ask snprintf for 1, 2, ... 17
 * significant digits in the C locale (a locale_t made once with newlocale,
 * installed for the call with uselocale and restored at once) and keep the
 * fewest that strtod reads back as the same double -- the shortest
 * round-trip form, found by a binary search (about five tries). The digits are then
 * laid out as Go's strconv.FormatFloat(v, 'g', -1, 64) does, which is what
 * the Prometheus clients print (see pcpu__fmt_double()).
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

void pcpu__buf_reserve(struct pcpu__buf *b, size_t more)
{
	size_t need, cap;
	char *p;

	if (b->failed)
		return;
	if (more > SIZE_MAX / 2 - b->len)
		goto failed;
	need = b->len + more + 1;
	if (need <= b->cap)
		return;
	cap = b->cap ? b->cap : 4096;
	while (cap < need)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		goto failed;
	b->p = p;
	b->cap = cap;
	return;
failed:
	b->failed = 1;
	b->cap = b->len; /* no room: pcpu__buf_put() drops the rest */
}

void pcpu__buf_put_grow(struct pcpu__buf *b, const char *s, size_t n)
{
	pcpu__buf_reserve(b, n);
	if (b->failed)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* The digits of v at the end of d[0..24); returns where they start. */
static size_t u64_digits(char d[24], uint64_t v)
{
	size_t n = 24;

	do {
		d[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return n;
}

void pcpu__buf_u64(struct pcpu__buf *b, uint64_t v)
{
	char d[24];
	size_t n = u64_digits(d, v);

	pcpu__buf_put(b, d + n, 24 - n);
}

void pcpu__buf_i64(struct pcpu__buf *b, int64_t v)
{
	if (v < 0) {
		pcpu__buf_putc(b, '-');
		pcpu__buf_u64(b, 0 - (uint64_t)v);
	} else {
		pcpu__buf_u64(b, (uint64_t)v);
	}
}

/* ---- doubles ---- */

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void make_c_locale(void)
{
	c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/*
 * Shortest round-trip digits of a finite, non-zero |v|: fills digits[]
 * (no dot, no leading zero) and returns their count; *exp10 is the decimal
 * exponent of the first digit (v = 0.d1d2d3... * 10^(exp10 + 1)).
 */
static int shortest_digits(double v, char *digits, int *exp10)
{
	char tmp[48];
	int prec, lo, hi, n = 0;
	locale_t old = (locale_t)0;

	pthread_once(&c_locale_once, make_c_locale);
	if (c_locale)
		old = uselocale(c_locale);
	/* Round-tripping is monotonic in the number of digits (with correct
	 * rounding, p digits that read back mean p + 1 digits do too), so
	 * binary-search the shortest between 1 and 17, which always works. */
	lo = 1;
	hi = 17;
	while (lo < hi) {
		prec = lo + (hi - lo) / 2;
		snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
		if (strtod(tmp, NULL) == v)
			hi = prec;
		else
			lo = prec + 1;
	}
	snprintf(tmp, sizeof tmp, "%.*e", lo - 1, v);
	if (c_locale)
		uselocale(old);
	/* tmp is "d.ddde[+-]XX" (or "de[+-]XX"); with a locale that could not
	 * be created the dot may be another character: skip any non-digit. */
	{
		const char *p = tmp;
		const char *e = strchr(tmp, 'e');

		for (; p < e; p++)
			if (*p >= '0' && *p <= '9')
				digits[n++] = *p;
		*exp10 = atoi(e + 1);
	}
	while (n > 1 && digits[n - 1] == '0')
		n--;
	digits[n] = '\0';
	return n;
}

/*
 * Go's strconv.FormatFloat(v, 'g', -1, 64): with the shortest digits
 * d1..dn and decimal exponent x (v = d1.d2...dn * 10^x), Go's rule for the
 * shortest form is exponent notation when x < -4 or x >= 6, with at least
 * two exponent digits. So 123456 prints as "123456", 1234567 as
 * "1.234567e+06", 1e6 as "1e+06", 0.0001 as "0.0001", 0.00001 as "1e-05".
 * Lays out digits[0..n) (no trailing zero) after the sign in out[k].
 */
static size_t layout_g(char *out, size_t k, const char *digits, int n, int x, int canonical)
{
	int i;

	if (x < -4 || x >= 6) {
		out[k++] = digits[0];
		if (n > 1) {
			out[k++] = '.';
			for (i = 1; i < n; i++)
				out[k++] = digits[i];
		}
		out[k++] = 'e';
		out[k++] = x < 0 ? '-' : '+';
		if (x < 0)
			x = -x;
		if (x >= 100) {
			out[k++] = (char)('0' + x / 100);
			x %= 100;
			out[k++] = (char)('0' + x / 10);
		} else {
			out[k++] = (char)('0' + x / 10);
		}
		out[k++] = (char)('0' + x % 10);
	} else if (x < 0) {
		out[k++] = '0';
		out[k++] = '.';
		for (i = -1; i > x; i--)
			out[k++] = '0';
		for (i = 0; i < n; i++)
			out[k++] = digits[i];
	} else {
		for (i = 0; i <= x; i++)
			out[k++] = i < n ? digits[i] : '0';
		if (n > x + 1) {
			out[k++] = '.';
			for (i = x + 1; i < n; i++)
				out[k++] = digits[i];
		} else if (canonical) {
			out[k++] = '.';
			out[k++] = '0';
		}
	}
	out[k] = '\0';
	return k;
}

size_t pcpu__fmt_double(char *out, double v, int canonical)
{
	char digits[24];
	int n, x;
	size_t k = 0;

	if (isinf(v)) {
		strcpy(out, v > 0 ? "+Inf" : "-Inf");
		return strlen(out);
	}
	if (isnan(v)) {
		strcpy(out, "NaN");
		return 3;
	}
	if (v == 0) {
		strcpy(out, canonical ? "0.0" : "0");
		return strlen(out);
	}
	if (v < 0) {
		out[k++] = '-';
		v = -v;
	}
	n = shortest_digits(v, digits, &x);
	return layout_g(out, k, digits, n, x, canonical);
}

/* Exact powers of ten: every one up to 10^22 is representable. */
static const double pow10_tab[PCPU_STATS_SCALE_MAX + 1] = {
	1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* One correctly rounded operation on exact operands: (double)v is exact for
 * |v| <= 2^53, and so the result is the double nearest v * 10^scale. */
static double scale_double(double d, int scale)
{
	if (scale > 0)
		return d * pow10_tab[scale > PCPU_STATS_SCALE_MAX ? PCPU_STATS_SCALE_MAX : scale];
	if (scale < 0)
		return d / pow10_tab[-scale > PCPU_STATS_SCALE_MAX ? PCPU_STATS_SCALE_MAX : -scale];
	return d;
}

double pcpu__scale_i64(int64_t v, int scale)
{
	return scale_double((double)v, scale);
}

double pcpu__scale_u64(uint64_t v, int scale)
{
	return scale_double((double)v, scale);
}

/* Below 10^15 an integer has at most 15 significant digits. */
#define EXACT_DIGITS_LIMIT 1000000000000000ull

/*
 * v * 10^scale (v negative when neg) as pcpu__fmt_double() writes it,
 * for m = |v| < EXACT_DIGITS_LIMIT and scale or canonical set.
 *
 * The shortest digits of the double nearest m * 10^scale -- what
 * pcpu__fmt_double() of pcpu__scale_*() finds with snprintf and strtod,
 * about 15 times slower -- are m's own digits, trailing zeros dropped: that
 * double is the nearest to the decimal m * 10^scale (one correctly rounded
 * operation on exact operands, m < 2^53), and a decimal of at most 15
 * significant digits is the shortest that reads back as its nearest double
 * (DBL_DIG: distinct decimals of 15 digits or fewer have distinct nearest
 * doubles, so fewer digits name another double).
 */
static size_t fmt_exact(char *out, int neg, uint64_t m, int scale, int canonical)
{
	char d[24];
	size_t n, end = 24, k = 0;

	if (!m) {
		strcpy(out, canonical ? "0.0" : "0");
		return strlen(out);
	}
	if (neg)
		out[k++] = '-';
	n = u64_digits(d, m);
	while (d[end - 1] == '0')
		end--;
	return layout_g(out, k, d + n, (int)(end - n), (int)(24 - n) - 1 + scale, canonical);
}

size_t pcpu__fmt_scaled(char *out, uint64_t v, int is_signed, int scale)
{
	int neg = is_signed && (int64_t)v < 0;
	uint64_t m = neg ? 0 - v : v;
	char d[24];
	size_t n, k = 0;

	if (scale) {
		if (m < EXACT_DIGITS_LIMIT)
			return fmt_exact(out, neg, m, scale, 0);
		return pcpu__fmt_double(out, is_signed ? pcpu__scale_i64((int64_t)v, scale)
						       : pcpu__scale_u64(v, scale), 0);
	}
	if (neg)
		out[k++] = '-';
	n = u64_digits(d, m);
	memcpy(out + k, d + n, 24 - n);
	k += 24 - n;
	out[k] = '\0';
	return k;
}

size_t pcpu__fmt_bound(char *out, int64_t v, int scale)
{
	uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

	if (m < EXACT_DIGITS_LIMIT)
		return fmt_exact(out, v < 0, m, scale, 1);
	return pcpu__fmt_double(out, pcpu__scale_i64(v, scale), 1);
}

/* ---- the public formatting functions ---- */

/* Copies a formatted number out to the caller's buffer; ERANGE (and "" if
 * there is room for it) when it does not fit. */
static int copy_out(char *out, size_t cap, const char *num, size_t n)
{
	if (n + 1 > cap) {
		if (cap)
			out[0] = '\0';
		errno = ERANGE;
		return -1;
	}
	memcpy(out, num, n + 1);
	return (int)n;
}

int pcpu_format_double(char *out, size_t cap, double v, unsigned flags)
{
	char num[PCPU__DOUBLE_BUF];

	if (!out || (flags & ~PCPU_FORMAT_NUMBER_CANONICAL)) {
		errno = EINVAL;
		return -1;
	}
	return copy_out(out, cap, num, pcpu__fmt_double(num, v, !!(flags & PCPU_FORMAT_NUMBER_CANONICAL)));
}

static int format_scaled(char *out, size_t cap, uint64_t v, int is_signed, int scale)
{
	char num[PCPU__DOUBLE_BUF];

	if (!out || scale > PCPU_STATS_SCALE_MAX || scale < -PCPU_STATS_SCALE_MAX) {
		errno = EINVAL;
		return -1;
	}
	return copy_out(out, cap, num, pcpu__fmt_scaled(num, v, is_signed, scale));
}

int pcpu_format_i64(char *out, size_t cap, int64_t v, int scale_exp10)
{
	return format_scaled(out, cap, (uint64_t)v, 1, scale_exp10);
}

int pcpu_format_u64(char *out, size_t cap, uint64_t v, int scale_exp10)
{
	return format_scaled(out, cap, v, 0, scale_exp10);
}

double pcpu_stats_scale(double v, int scale_exp10)
{
	return scale_double(v, scale_exp10);
}

/* ---- a series' value ---- */

/* A counter or gauge series' integer value (modulo 2^64; a gauge's read as
 * int64) and, in a PCPU_SNAPSHOT_NANOS family, the billionths left over
 * once their whole units are added to it (|*rem| < 10^9, 0 without) and
 * the residue (0 without). */
static uint64_t series_units(const struct pcpu_snapshot_family *f,
			     const struct pcpu_snapshot_series *s, int64_t *rem, double *residue)
{
	uint64_t v = pcpu__type_info(f->type)->value == PCPU_VALUE_UNSIGNED ? s->value.counter
									    : (uint64_t)s->value.gauge;

	*rem = 0;
	*residue = 0.0;
	if (!(f->flags & PCPU_SNAPSHOT_NANOS))
		return v;
	*rem = s->value.fixed.nanos % 1000000000;
	*residue = s->value.fixed.residue;
	return v + (uint64_t)(s->value.fixed.nanos / 1000000000);
}

static int series_checked(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s)
{
	const struct pcpu_metric_type_info *t = f ? pcpu__type_info(f->type) : NULL;

	if (!s || !t || t->value == PCPU_VALUE_BUCKETS) {
		errno = EINVAL;
		return 0;
	}
	return 1;
}

/* The units, the fraction and the residue as one double: the integer part
 * first, then the billionths, so that a value of decimal fractions reads
 * as its decimal (3 units and 300000000 billionths: 3.3, the double
 * nearest), then the residue -- pcpu_fraction_value()'s rule, which
 * scale 0 (a family with fractions has it) leaves as it is. */
static double series_double(const struct pcpu_snapshot_family *f, uint64_t units, int64_t rem,
			    double residue)
{
	int is_signed = pcpu__type_info(f->type)->value != PCPU_VALUE_UNSIGNED;
	double v;

	if (units == 0 && rem == 0 && (f->flags & PCPU_SNAPSHOT_NANOS))
		return residue; /* -0.0 stays -0.0 */
	v = is_signed ? (double)(int64_t)units : (double)units;
	if (rem)
		v += (double)rem / 1e9;
	return scale_double(v, f->scale_exp10) + residue;
}

/* Whether a residue changes a value: anything but +0.0 does (-0.0 too). */
static int has_residue(double r)
{
	uint64_t b;

	memcpy(&b, &r, sizeof b);
	return b != 0;
}

double pcpu_snapshot_value(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s)
{
	int64_t rem;
	double residue;
	uint64_t units;

	if (!series_checked(f, s))
		return __builtin_nan("");
	units = series_units(f, s, &rem, &residue);
	return series_double(f, units, rem, residue);
}

size_t pcpu__fmt_series(char *out, const struct pcpu_snapshot_family *f,
			const struct pcpu_snapshot_series *s)
{
	int64_t rem;
	double residue;
	uint64_t units = series_units(f, s, &rem, &residue);

	if (!rem && !has_residue(residue)) /* exact: the integer, scaled as any value */
		return pcpu__fmt_scaled(out, units, pcpu__type_info(f->type)->value == PCPU_VALUE_SIGNED,
					f->scale_exp10);
	return pcpu__fmt_double(out, series_double(f, units, rem, residue), 0);
}

double pcpu_snapshot_sum(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s)
{
	if (!f || !s || !pcpu__has_buckets(f->type)) {
		errno = EINVAL;
		return __builtin_nan("");
	}
	return pcpu__scale_i64(s->value.histogram.sum, f->scale_exp10) + s->value.histogram.residue;
}

size_t pcpu__fmt_sum(char *out, const struct pcpu_snapshot_family *f,
		     const struct pcpu_snapshot_series *s)
{
	if (!has_residue(s->value.histogram.residue))
		return pcpu__fmt_scaled(out, (uint64_t)s->value.histogram.sum, 1, f->scale_exp10);
	return pcpu__fmt_double(out, pcpu__scale_i64(s->value.histogram.sum, f->scale_exp10) +
					     s->value.histogram.residue,
				0);
}

int pcpu_snapshot_format_value(char *out, size_t cap, const struct pcpu_snapshot_family *f,
			       const struct pcpu_snapshot_series *s)
{
	char num[PCPU__DOUBLE_BUF];

	if (!out || !series_checked(f, s) || f->scale_exp10 > PCPU_STATS_SCALE_MAX ||
	    f->scale_exp10 < -PCPU_STATS_SCALE_MAX) {
		errno = EINVAL;
		return -1;
	}
	return copy_out(out, cap, num, pcpu__fmt_series(num, f, s));
}

/* ---- escaping ---- */

void pcpu__buf_label_value(struct pcpu__buf *b, const char *s)
{
	const char *run = s;

	for (; *s; s++) {
		const char *esc;

		switch (*s) {
		case '\\':
			esc = "\\\\";
			break;
		case '"':
			esc = "\\\"";
			break;
		case '\n':
			esc = "\\n";
			break;
		default:
			continue;
		}
		pcpu__buf_put(b, run, (size_t)(s - run));
		pcpu__buf_put(b, esc, 2);
		run = s + 1;
	}
	pcpu__buf_put(b, run, (size_t)(s - run));
}

void pcpu__buf_help(struct pcpu__buf *b, const char *s, int quote)
{
	const char *run = s;

	for (; *s; s++) {
		const char *esc;

		if (*s == '\\')
			esc = "\\\\";
		else if (*s == '\n')
			esc = "\\n";
		else if (*s == '"' && quote)
			esc = "\\\"";
		else
			continue;
		pcpu__buf_put(b, run, (size_t)(s - run));
		pcpu__buf_put(b, esc, 2);
		run = s + 1;
	}
	pcpu__buf_put(b, run, (size_t)(s - run));
}

void pcpu__buf_json_string(struct pcpu__buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const char *run = s;

	pcpu__buf_putc(b, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[6];
		size_t n = 2;

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
		} else if (c == '\n') {
			esc[0] = '\\';
			esc[1] = 'n';
		} else if (c == '\t') {
			esc[0] = '\\';
			esc[1] = 't';
		} else if (c < 0x20 || c == 0x7f) {
			esc[0] = '\\';
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			n = 6;
		} else {
			continue;
		}
		pcpu__buf_put(b, run, (size_t)(s - run));
		pcpu__buf_put(b, esc, n);
		run = s + 1;
	}
	pcpu__buf_put(b, run, (size_t)(s - run));
	pcpu__buf_putc(b, '"');
}
