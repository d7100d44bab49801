/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces of the statistics layer, grouped by the file that
 * defines them. Nothing here is exported from the shared library.
 *
 * validate.c, format.c, expose.c and hashtab.c use only libc, this header
 * and hashtab.h: the fuzz targets build them alone, without the core.
 */
#ifndef PCPU_STATS_INTERNAL_H
#define PCPU_STATS_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pcpu/expose.h>

#include "format.h"
#include "histogram_layout.h"
#include "validate.h"

#define PCPU_HIDDEN __attribute__((visibility("hidden")))

/* ---- validate.c: names, labels, UTF-8, the per-thread error message ---- */

/* Message builder for pcpu_stats_error(): async-signal-safe (no stdio). */
struct pcpu__msg {
	char *p;
	size_t len, cap;
};
PCPU_HIDDEN struct pcpu__msg pcpu__msg_begin(void);
PCPU_HIDDEN void pcpu__msg_str(struct pcpu__msg *m, const char *s);
/* Appends at most `max` bytes of s, quoted, with non-printable bytes as \xNN. */
PCPU_HIDDEN void pcpu__msg_quoted(struct pcpu__msg *m, const char *s, size_t max);
/* Sets errno to err and returns -1, for `return pcpu__msg_fail(&m, EINVAL);`. */
PCPU_HIDDEN int pcpu__msg_fail(struct pcpu__msg *m, int err);
/* Sets the message to `what` + ": " + the current one (adds context). */
PCPU_HIDDEN void pcpu__msg_prefix(const char *what, const char *name);
/* Sets the whole message to s. */
PCPU_HIDDEN void pcpu__set_error(const char *s);

/* Offset of the first byte that is not well-formed UTF-8 in s[0..n), or n. */
PCPU_HIDDEN size_t pcpu__utf8_valid_prefix(const char *s, size_t n);
/* pcpu__check_help(), pcpu__check_unit(), pcpu__info_name_len(): validate.h. */
/* A histogram's bucket bounds: strictly increasing also once scaled to
 * doubles (distinct integers beyond 2^53 may not be). The check
 * pcpu_snapshot_write() makes of every snapshot and the registry makes once
 * at registration. Returns 0 or -1 with errno EINVAL and a message. */
PCPU_HIDDEN int pcpu__check_bounds(const int64_t *upper, size_t n, int scale_exp10);

/* The sample names a family writes, e.g. "foo" histogram -> foo, foo_bucket,
 * foo_count, foo_sum, foo_created (the OpenMetrics clash set). Returns the
 * number of suffixes for `type` and sets *suffixes. */
PCPU_HIDDEN size_t pcpu__type_suffixes(enum pcpu_metric_type type, const char *const **suffixes);
PCPU_HIDDEN const char *pcpu__type_name(enum pcpu_metric_type type);
/* pcpu__type_info(): format.h (format.c reads it without this header). */
/* The names a snapshot family owns (the OpenMetrics clash set): its name
 * plus each of its type's suffixes, and for an info family its OpenMetrics
 * name. Name k (k < the count returned) is f->name[0..*baselen) + *suffix. */
PCPU_HIDDEN size_t pcpu__family_owned_name(const struct pcpu_snapshot_family *f, size_t k,
					   size_t *baselen, const char **suffix);
/* Whether bucket k of a histogram family is exposed (has an `le`): the
 * +Inf bucket always, the others when the family exports every bucket or k
 * is the next of its export_buckets (*x walks them, from 0; k only grows).
 * The one statement of the rule: the text and protobuf writers and
 * pcpu_snapshot_histogram_buckets() (histogram_export.c) all use it. */
static inline int pcpu__bucket_exposed(const struct pcpu_snapshot_family *f, size_t k, size_t *x)
{
	if (k + 1 == f->nbuckets || !f->export_buckets)
		return 1;
	if (*x < f->nexport && f->export_buckets[*x] == k) {
		(*x)++;
		return 1;
	}
	return 0;
}
/* Compares a1[0..a1n) + a2 with b1[0..b1n) + b2 as strcmp() compares the
 * strings, without building them. */
PCPU_HIDDEN int pcpu__cmp_concat(const char *a1, size_t a1n, const char *a2, const char *b1,
				 size_t b1n, const char *b2);

/* ---- arena.c: memory freed all at once ---- */

struct pcpu__arena_block;
struct pcpu__arena {
	struct pcpu__arena_block *blocks;
	int failed; /* an allocation failed (and returned NULL) */
};
/* n bytes, 16-byte aligned, valid until pcpu__arena_free(); NULL (and
 * a->failed set) without memory. */
PCPU_HIDDEN void *pcpu__arena_alloc(struct pcpu__arena *a, size_t n);
PCPU_HIDDEN void pcpu__arena_free(struct pcpu__arena *a);

/* ---- expose.c ---- */

/* Whether two series of family f have the same label values: 1, 0, or -1
 * out of memory (expose.c; linear, seeded hash). */
PCPU_HIDDEN int pcpu__has_duplicate_series(const struct pcpu_snapshot_family *f);
/* Whether two series of the n label sets fams[0..n) of one name are one
 * series to Prometheus (an empty label value is an absent label): 1, 0, or
 * -1 out of memory (expose.c; sorts their canonical labels). */
PCPU_HIDDEN int pcpu__labelsets_duplicate(const struct pcpu_snapshot_family *fams, size_t n);
/* pcpu__snapshot_check(): validate.h (a segment reader checks with it). */
/* pcpu_snapshot_write(), without the validation pass when `validate` is 0:
 * only for snapshots whose every part was validated before (a registry's). */
PCPU_HIDDEN int pcpu__snapshot_write(const struct pcpu_snapshot *s, enum pcpu_format fmt,
				     char **out, size_t *len, int validate);

/* The `le` bounds a histogram layout exposes (pcpu__export_list(),
 * pcpu__native_export_rule()): histogram_layout.h, shared with the segment. */

/* base^i = 2^(i * 2^-schema), the native bucket boundary i (histogram.c;
 * libc only, within a few ulps). */
PCPU_HIDDEN double pcpu__native_bound(int schema, int32_t i);

/* ---- expose_protobuf.c (only with protobuf-c: PCPU_HAVE_PROTOBUF) ---- */

struct pcpu__buf;
/* Appends the delimited MetricFamily messages of a validated snapshot to b;
 * -1 when out of memory. */
PCPU_HIDDEN int pcpu__write_protobuf(const struct pcpu_snapshot *s, struct pcpu__buf *b);

#endif /* PCPU_STATS_INTERNAL_H */
