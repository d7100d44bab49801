/* SPDX-License-Identifier: MIT */
/*
 * format.c's interface: the library's one growable output buffer (the
 * writers' text and protobuf output), the exact number formatting the
 * writers and pcpu_format_*() share, and the text formats' escaping.
 * Internal: nothing here is exported. libc only (the fuzz targets build
 * format.c alone).
 */
#ifndef PCPU_STATS_FORMAT_H
#define PCPU_STATS_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <pcpu/expose.h>

#include "../core/core.h"

/* ---- metric_type.c: the one description of each metric type ---- */

/* pcpu_metric_type_info() without setting errno (NULL for no type), for
 * the writers' and validators' own use. */
PCPU_HIDDEN const struct pcpu_metric_type_info *pcpu__type_info(enum pcpu_metric_type type);
/* Whether `type` is a type whose series hold buckets (the table's
 * PCPU_VALUE_BUCKETS; 0 for no type): what the histogram functions accept. */
static inline int pcpu__has_buckets(enum pcpu_metric_type type)
{
	const struct pcpu_metric_type_info *t = pcpu__type_info(type);

	return t && t->value == PCPU_VALUE_BUCKETS;
}

/* ---- format.c: growable output buffer and number formatting ---- */

struct pcpu__buf {
	char *p;
	size_t len, cap;
	int failed; /* an allocation failed: everything after is dropped */
};
PCPU_HIDDEN void pcpu__buf_reserve(struct pcpu__buf *b, size_t more);
/* pcpu__buf_put() where the buffer must grow first (or has failed). */
PCPU_HIDDEN void pcpu__buf_put_grow(struct pcpu__buf *b, const char *s, size_t n);

/* Appends s[0..n), keeping the text NUL-terminated. Inline: the writers
 * append a few bytes at a time, millions of times per exposition, and a
 * call per append cost as much as the copying. */
static inline void pcpu__buf_put(struct pcpu__buf *b, const char *s, size_t n)
{
	if (__builtin_expect(b->cap - b->len > n, 1)) { /* cap is 0 until allocated */
		memcpy(b->p + b->len, s, n);
		b->len += n;
		b->p[b->len] = '\0';
		return;
	}
	pcpu__buf_put_grow(b, s, n);
}

static inline void pcpu__buf_puts(struct pcpu__buf *b, const char *s)
{
	pcpu__buf_put(b, s, strlen(s));
}

static inline void pcpu__buf_putc(struct pcpu__buf *b, char c)
{
	pcpu__buf_put(b, &c, 1);
}
PCPU_HIDDEN void pcpu__buf_u64(struct pcpu__buf *b, uint64_t v);
PCPU_HIDDEN void pcpu__buf_i64(struct pcpu__buf *b, int64_t v);

/* Shortest decimal that reads back as the same double, in the style of Go's
 * strconv.FormatFloat(v, 'g', -1, 64) (what Prometheus' own clients print):
 * "0.005", "1", "1e+06", "1.5e-05". `canonical` adds ".0" to integral values
 * without an exponent ("1.0"), OpenMetrics' canonical form. v must be
 * finite. Writes a NUL-terminated string of at most 32 bytes; returns its
 * length. Independent of the locale. */
#define PCPU__DOUBLE_BUF 40
PCPU_HIDDEN size_t pcpu__fmt_double(char *out, double v, int canonical);
/* An integer value as the writers expose it: with scale 0 the exact
 * integer (v read as int64_t when is_signed), else pcpu__fmt_double() of
 * v * 10^scale. out has PCPU__DOUBLE_BUF bytes; returns the length. */
PCPU_HIDDEN size_t pcpu__fmt_scaled(char *out, uint64_t v, int is_signed, int scale);
/* A counter or gauge series' value as the writers expose it
 * (pcpu_snapshot_format_value(); the family's type and scale trusted).
 * out has PCPU__DOUBLE_BUF bytes; returns the length. */
PCPU_HIDDEN size_t pcpu__fmt_series(char *out, const struct pcpu_snapshot_family *f,
				    const struct pcpu_snapshot_series *s);
/* A histogram series' sum as the writers expose it: the integer sum
 * scaled as pcpu__fmt_scaled() (exact) where the residue is 0, else
 * pcpu__fmt_double() of pcpu_snapshot_sum(). */
PCPU_HIDDEN size_t pcpu__fmt_sum(char *out, const struct pcpu_snapshot_family *f,
				 const struct pcpu_snapshot_series *s);
/* A bucket bound as the `le` writers expose it: pcpu__fmt_double() of
 * v * 10^scale in the canonical form. */
PCPU_HIDDEN size_t pcpu__fmt_bound(char *out, int64_t v, int scale);
/* v * 10^scale as a double, correctly rounded for |v| <= 2^53. */
PCPU_HIDDEN double pcpu__scale_i64(int64_t v, int scale);
PCPU_HIDDEN double pcpu__scale_u64(uint64_t v, int scale);

/* Escapes for the text formats. */
PCPU_HIDDEN void pcpu__buf_label_value(struct pcpu__buf *b, const char *s); /* \\ \" \n */
PCPU_HIDDEN void pcpu__buf_help(struct pcpu__buf *b, const char *s, int quote); /* \\ \n (\") */
PCPU_HIDDEN void pcpu__buf_json_string(struct pcpu__buf *b, const char *s);

#endif /* PCPU_STATS_FORMAT_H */
