/* SPDX-License-Identifier: MIT */
/*
 * Validation of names, labels and text against the Prometheus and
 * OpenMetrics rules, and the per-thread error message.
 *
 * Why validate at all: an exposition with one bad name is rejected whole by
 * a scraper, so a bad name must be refused where it enters (registration),
 * with a message that says what is wrong, not discovered at scrape time.
 * The writers validate again, because a snapshot may come from elsewhere.
 *
 * Rules (Prometheus data model, OpenMetrics 1.0):
 *  - metric name   [a-zA-Z_:][a-zA-Z0-9_:]*
 *  - label name    [a-zA-Z_][a-zA-Z0-9_]*, names starting with "__" are
 *                  reserved; "le" is reserved in histograms (checked by the
 *                  callers, who know the type)
 *  - label value   any UTF-8 (escaped by the writers); help text the same
 *  - unit          a suffix of the name: name ends in "_" + unit
 * Lengths are bounded (PCPU_STATS_*_MAX) so metadata fits fixed-size
 * records.
 *
 * The message is kept in a per-thread buffer and built without stdio, so
 * that the validators stay async-signal-safe and a hostile name (newlines,
 * escape sequences, megabytes) is shown truncated and with bytes escaped.
 */
#include <errno.h>
#include <string.h>

#include "stats_internal.h"
#include "error.h"

/* The buffer is the statistics layer's domain of the library's per-thread
 * messages (error.c). */

struct pcpu__msg pcpu__msg_begin(void)
{
	size_t cap;
	struct pcpu__msg m;

	m.p = pcpu__error_buffer(PCPU_ERROR_STATS, &cap);
	m.len = 0;
	m.cap = cap;
	m.p[0] = '\0';
	return m;
}

static void msg_putc(struct pcpu__msg *m, char c)
{
	if (m->len + 1 < m->cap) {
		m->p[m->len++] = c;
		m->p[m->len] = '\0';
	}
}

void pcpu__msg_str(struct pcpu__msg *m, const char *s)
{
	while (*s)
		msg_putc(m, *s++);
}

static void msg_hex(struct pcpu__msg *m, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";
	msg_putc(m, '\\');
	msg_putc(m, 'x');
	msg_putc(m, hex[c >> 4]);
	msg_putc(m, hex[c & 15]);
}

void pcpu__msg_quoted(struct pcpu__msg *m, const char *s, size_t max)
{
	size_t i;

	msg_putc(m, '"');
	for (i = 0; s[i] && i < max; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			msg_hex(m, c);
		else
			msg_putc(m, (char)c);
	}
	msg_putc(m, '"');
	if (s[i])
		pcpu__msg_str(m, "...");
}

static void pcpu__msg_u64(struct pcpu__msg *m, uint64_t v)
{
	char d[24];
	int n = 0;

	do {
		d[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		msg_putc(m, d[--n]);
}

int pcpu__msg_fail(struct pcpu__msg *m, int err)
{
	(void)m;
	errno = err;
	return -1;
}

void pcpu__set_error(const char *s)
{
	struct pcpu__msg m = pcpu__msg_begin();
	pcpu__msg_str(&m, s);
}

void pcpu__msg_prefix(const char *what, const char *name)
{
	char old[PCPU_ERROR_MAX];
	size_t cap;
	const char *cur = pcpu__error_buffer(PCPU_ERROR_STATS, &cap);
	struct pcpu__msg m;

	memcpy(old, cur, cap); /* cap <= PCPU_ERROR_MAX, NUL-terminated */
	m = pcpu__msg_begin();
	pcpu__msg_str(&m, what);
	if (name) {
		msg_putc(&m, ' ');
		pcpu__msg_quoted(&m, name, 64);
	}
	pcpu__msg_str(&m, ": ");
	pcpu__msg_str(&m, old);
}

const char *pcpu_stats_error(void)
{
	return pcpu__error_buffer(PCPU_ERROR_STATS, NULL);
}

static int is_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* Common body of the two name checks. */
static int check_name(const char *kind, const char *name, size_t max, int colon)
{
	struct pcpu__msg m;
	size_t i;

	if (!name) {
		m = pcpu__msg_begin();
		pcpu__msg_str(&m, kind);
		pcpu__msg_str(&m, " is NULL");
		return pcpu__msg_fail(&m, EINVAL);
	}
	for (i = 0; name[i]; i++) {
		unsigned char c = (unsigned char)name[i];
		int ok = is_alpha(c) || c == '_' || (colon && c == ':') || (i > 0 && is_digit(c));

		if (i >= max) {
			m = pcpu__msg_begin();
			pcpu__msg_str(&m, kind);
			msg_putc(&m, ' ');
			pcpu__msg_quoted(&m, name, 48);
			pcpu__msg_str(&m, " is longer than ");
			pcpu__msg_u64(&m, max);
			pcpu__msg_str(&m, " bytes");
			return pcpu__msg_fail(&m, EINVAL);
		}
		if (!ok) {
			m = pcpu__msg_begin();
			pcpu__msg_str(&m, kind);
			msg_putc(&m, ' ');
			pcpu__msg_quoted(&m, name, 64);
			pcpu__msg_str(&m, ": character ");
			if (c >= 0x20 && c < 0x7f && c != '\'') {
				msg_putc(&m, '\'');
				msg_putc(&m, (char)c);
				msg_putc(&m, '\'');
			} else {
				msg_hex(&m, c);
			}
			pcpu__msg_str(&m, " at offset ");
			pcpu__msg_u64(&m, i);
			pcpu__msg_str(&m, i == 0 ? " not allowed (must start with a letter, '_'"
						 : " not allowed (only letters, digits, '_'");
			pcpu__msg_str(&m, colon ? " or ':')" : ")");
			return pcpu__msg_fail(&m, EINVAL);
		}
	}
	if (i == 0) {
		m = pcpu__msg_begin();
		pcpu__msg_str(&m, kind);
		pcpu__msg_str(&m, " is empty");
		return pcpu__msg_fail(&m, EINVAL);
	}
	return 0;
}

int pcpu_stats_check_metric_name(const char *name)
{
	return check_name("metric name", name, PCPU_STATS_NAME_MAX, 1);
}

int pcpu_stats_check_label_name(const char *name)
{
	if (check_name("label name", name, PCPU_STATS_LABEL_NAME_MAX, 0) < 0)
		return -1;
	if (name[0] == '_' && name[1] == '_') {
		struct pcpu__msg m = pcpu__msg_begin();
		pcpu__msg_str(&m, "label name ");
		pcpu__msg_quoted(&m, name, 64);
		pcpu__msg_str(&m, ": names starting with \"__\" are reserved");
		return pcpu__msg_fail(&m, EINVAL);
	}
	return 0;
}

/*
 * Well-formed UTF-8 per Unicode 15 table 3-7: the second byte's range
 * depends on the first, which excludes overlong forms (C0, C1, E0 80..9F,
 * F0 80..8F), surrogates (ED A0..BF) and code points past U+10FFFF
 * (F4 90.., F5..FF).
 */
size_t pcpu__utf8_valid_prefix(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		unsigned char lo = 0x80, hi = 0xbf;
		size_t need, k;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2;
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;
		} else {
			return i;
		}
		if (n - i <= need)
			return i;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return i;
		for (k = 2; k <= need; k++)
			if (s[i + k] < 0x80 || s[i + k] > 0xbf)
				return i;
		i += need + 1;
	}
	return n;
}

static int check_text(const char *kind, const char *s, size_t max)
{
	struct pcpu__msg m;
	size_t n, bad;

	if (!s) {
		m = pcpu__msg_begin();
		pcpu__msg_str(&m, kind);
		pcpu__msg_str(&m, " is NULL");
		return pcpu__msg_fail(&m, EINVAL);
	}
	n = strnlen(s, max + 1);
	if (n > max) {
		m = pcpu__msg_begin();
		pcpu__msg_str(&m, kind);
		pcpu__msg_str(&m, " is longer than ");
		pcpu__msg_u64(&m, max);
		pcpu__msg_str(&m, " bytes");
		return pcpu__msg_fail(&m, EINVAL);
	}
	bad = pcpu__utf8_valid_prefix(s, n);
	if (bad != n) {
		m = pcpu__msg_begin();
		pcpu__msg_str(&m, kind);
		msg_putc(&m, ' ');
		pcpu__msg_quoted(&m, s, 48);
		pcpu__msg_str(&m, " is not valid UTF-8 (byte ");
		msg_hex(&m, (unsigned char)s[bad]);
		pcpu__msg_str(&m, " at offset ");
		pcpu__msg_u64(&m, bad);
		pcpu__msg_str(&m, ")");
		return pcpu__msg_fail(&m, EINVAL);
	}
	return 0;
}

int pcpu_stats_check_label_value(const char *value)
{
	return check_text("label value", value, PCPU_STATS_LABEL_VALUE_MAX);
}

int pcpu__check_help(const char *help)
{
	if (!help)
		return 0;
	return check_text("help text", help, PCPU_STATS_HELP_MAX);
}

int pcpu__check_unit(const char *name, const char *unit)
{
	struct pcpu__msg m;
	size_t nl, ul, i;

	if (!unit || !*unit)
		return 0;
	ul = strnlen(unit, PCPU_STATS_UNIT_MAX + 1);
	for (i = 0; i < ul; i++) {
		unsigned char c = (unsigned char)unit[i];
		if (!(is_alpha(c) || is_digit(c) || c == '_' || c == ':'))
			break;
	}
	if (ul > PCPU_STATS_UNIT_MAX || i != ul) {
		m = pcpu__msg_begin();
		pcpu__msg_str(&m, "unit ");
		pcpu__msg_quoted(&m, unit, 64);
		pcpu__msg_str(&m, ul > PCPU_STATS_UNIT_MAX ? " is too long"
							   : " may hold only letters, digits, '_' and ':'");
		return pcpu__msg_fail(&m, EINVAL);
	}
	nl = strlen(name);
	if (nl < ul + 2 || name[nl - ul - 1] != '_' || memcmp(name + nl - ul, unit, ul) != 0) {
		m = pcpu__msg_begin();
		pcpu__msg_str(&m, "unit ");
		pcpu__msg_quoted(&m, unit, 64);
		pcpu__msg_str(&m, ": the name ");
		pcpu__msg_quoted(&m, name, 64);
		pcpu__msg_str(&m, " must end in \"_");
		pcpu__msg_str(&m, unit);
		pcpu__msg_str(&m, "\" (OpenMetrics)");
		return pcpu__msg_fail(&m, EINVAL);
	}
	return 0;
}

size_t pcpu__type_suffixes(enum pcpu_metric_type type, const char *const **suffixes)
{
	const struct pcpu_metric_type_info *t = pcpu__type_info(type);

	*suffixes = t ? t->suffixes : NULL;
	return t ? t->nsuffixes : 0;
}

size_t pcpu__info_name_len(const char *name, unsigned flags)
{
	size_t n;

	if (!(flags & PCPU_SNAPSHOT_INFO) || !name)
		return 0;
	n = strlen(name);
	return n > 5 && strcmp(name + n - 5, "_info") == 0 ? n - 5 : 0;
}

size_t pcpu__family_owned_name(const struct pcpu_snapshot_family *f, size_t k, size_t *baselen,
			       const char **suffix)
{
	const char *const *suf;
	size_t ns = pcpu__type_suffixes(f->type, &suf), info = pcpu__info_name_len(f->name, f->flags);

	if (k < ns) {
		*baselen = strlen(f->name);
		*suffix = suf[k];
	} else if (info) {
		*baselen = info; /* `x_info` is OpenMetrics family `x` */
		*suffix = "";
	}
	return ns + (info ? 1 : 0);
}

int pcpu__cmp_concat(const char *a1, size_t a1n, const char *a2, const char *b1, size_t b1n,
		     const char *b2)
{
	for (;;) {
		unsigned char ca, cb;

		if (!a1n && a2) {
			a1 = a2;
			a1n = strlen(a2);
			a2 = NULL;
		}
		if (!b1n && b2) {
			b1 = b2;
			b1n = strlen(b2);
			b2 = NULL;
		}
		ca = a1n ? (unsigned char)*a1 : 0;
		cb = b1n ? (unsigned char)*b1 : 0;
		if (ca != cb)
			return ca < cb ? -1 : 1;
		if (!ca)
			return 0;
		a1++, a1n--;
		b1++, b1n--;
	}
}

const char *pcpu__type_name(enum pcpu_metric_type type)
{
	const struct pcpu_metric_type_info *t = pcpu__type_info(type);

	return t ? t->name : NULL;
}

size_t pcpu_stats_type_suffixes(enum pcpu_metric_type type, const char *const **suffixes)
{
	const char *const *suf;
	size_t n = pcpu__type_suffixes(type, &suf);

	if (suffixes)
		*suffixes = suf;
	return n;
}

const char *pcpu_stats_sample_suffix(enum pcpu_metric_type type)
{
	const struct pcpu_metric_type_info *t = pcpu__type_info(type);

	return t ? t->sample_suffix : NULL;
}

const char *pcpu_metric_type_name(enum pcpu_metric_type type)
{
	return pcpu__type_name(type);
}

/* Bucket bounds: checked here, below both the registry (at registration)
 * and the writers (for every snapshot), which call it. */
int pcpu__check_bounds(const int64_t *upper, size_t n, int scale_exp10)
{
	size_t b;

	for (b = 1; b < n; b++) {
		if (upper[b] <= upper[b - 1]) {
			pcpu__set_error("bucket bounds are not strictly increasing");
			errno = EINVAL;
			return -1;
		}
		/* Distinct integers may round to one double once scaled (beyond
		 * 2^53): the exposition would repeat an `le`. */
		if (pcpu__scale_i64(upper[b], scale_exp10) <= pcpu__scale_i64(upper[b - 1], scale_exp10)) {
			pcpu__set_error("two bucket bounds are equal once scaled to doubles");
			errno = EINVAL;
			return -1;
		}
	}
	return 0;
}

int pcpu__cmp_family_order(const char *an, unsigned anl, const char *const *al, const char *bn,
			   unsigned bnl, const char *const *bl)
{
	int c = strcmp(an, bn);
	unsigned l;

	if (c || anl != bnl)
		return c ? c : anl < bnl ? -1 : 1;
	for (l = 0; l < anl; l++)
		if ((c = strcmp(al[l], bl[l])) != 0)
			return c;
	return 0;
}

int pcpu__same_label_set(unsigned n, const char *const *a, unsigned m, const char *const *b)
{
	unsigned l, k;

	if (n != m)
		return 0;
	for (l = 0; l < n; l++) {
		for (k = 0; k < m; k++)
			if (strcmp(a[l], b[k]) == 0)
				break;
		if (k == m)
			return 0;
	}
	return 1;
}

int pcpu__same_metric(const struct pcpu_snapshot_family *a, const struct pcpu_snapshot_family *b)
{
	/* Help: NULL writes no HELP line, "" an empty one. Unit: NULL and ""
	 * both write none (pcpu/expose.h). */
	if (a->type != b->type || a->scale_exp10 != b->scale_exp10 ||
	    (a->flags & ~PCPU_SNAPSHOT_CHECKED) != (b->flags & ~PCPU_SNAPSHOT_CHECKED) ||
	    !a->help != !b->help || (a->help && strcmp(a->help, b->help) != 0) ||
	    strcmp(a->unit ? a->unit : "", b->unit ? b->unit : "") != 0 || a->nbuckets != b->nbuckets)
		return 0;
	if (!pcpu__has_buckets(a->type))
		return 1;
	if (a->nbuckets >= 2 &&
	    memcmp(a->bucket_upper, b->bucket_upper, (a->nbuckets - 1) * sizeof(int64_t)) != 0)
		return 0;
	/* The exposed buckets: the `le`s, or the native schema and offset. */
	if (!a->export_buckets != !b->export_buckets || a->nexport != b->nexport ||
	    (a->export_buckets &&
	     memcmp(a->export_buckets, b->export_buckets, a->nexport * sizeof(uint32_t)) != 0))
		return 0;
	return !(a->flags & PCPU_SNAPSHOT_NATIVE) ||
	       (a->native_schema == b->native_schema && a->native_index == b->native_index);
}
