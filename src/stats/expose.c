/* SPDX-License-Identifier: MIT */
/*
 * The exposition writers: Prometheus text 0.0.4, OpenMetrics 1.0, JSON (and
 * the Prometheus protobuf format, in expose_protobuf.c, where built).
 *
 * Two passes. The first validates the whole snapshot -- every name, label,
 * text, bucket layout, and the absence of duplicates and name clashes --
 * because a snapshot may come from outside the registry (a reader of another
 * process's statistics) and a scraper rejects an exposition with one bad
 * line. The second writes into one growable buffer; an allocation failure
 * there drops the rest, and the buffer is freed instead of returned. So a
 * caller gets a whole, valid exposition or an error, never part of one.
 *
 * Duplicates: two families clash when any of the sample names they write
 * (OpenMetrics' reserved suffix sets, see pcpu__type_suffixes()) are equal,
 * found by sorting those names (there are few families); two series of a
 * family clash when their label values are equal, found with a seeded hash
 * table (linear: sorting 10^5 label sets cost more than writing them).
 *
 * A registry's own snapshot was validated piece by piece at registration,
 * so pcpu_registry_write() skips the first pass (pcpu__snapshot_write()).
 *
 * Format details that matter to strict parsers:
 *  - OpenMetrics counters are `<family>_total`; the 0.0.4 TYPE line names the
 *    sample (`# TYPE x_total counter`) as Prometheus' own clients do, which
 *    promtool expects.
 *  - An info family x_info (PCPU_SNAPSHOT_INFO) is OpenMetrics family `x`
 *    of type info, sample `x_info`; a gauge elsewhere (no info type).
 *  - `le` is written in OpenMetrics' canonical form ("1.0", "0.005",
 *    "1e+06", "+Inf") in every format, so a bucket has one name everywhere.
 *  - OpenMetrics forbids `_sum` in a histogram with negative buckets, and
 *    negative counter-like samples: such histograms get neither `_sum` nor
 *    `_count` (the spec allows both to be absent; `_count` requires `_sum`).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"
#include "hashtab.h"
#include "validate.h"

/* ---- validation ---- */

struct sample_name {
	const char *base;
	size_t baselen; /* of base: an info family's OpenMetrics name is a prefix */
	const char *suffix;
	size_t family;
};

static int cmp_sample_name(const void *a, const void *b)
{
	const struct sample_name *x = a, *y = b;
	return pcpu__cmp_concat(x->base, x->baselen, x->suffix, y->base, y->baselen, y->suffix);
}

/* A series looked up among those of a family. */
struct series_key {
	const struct pcpu_snapshot_family *f;
	const struct pcpu_snapshot_series *se;
};

static int same_labels(const struct pcpu__hslot *s, const void *ctx)
{
	const struct series_key *k = ctx;
	const struct pcpu_snapshot_series *x = &k->f->series[s->key - 1];
	unsigned i;

	for (i = 0; i < k->f->nlabels; i++)
		if (strcmp(x->label_values[i], k->se->label_values[i]) != 0)
			return 0;
	return 1;
}

/* A hash seed for one call's table: from the table's address and a
 * counter, so that keys crafted to collide cannot be chosen ahead. */
static uint64_t table_seed(const struct pcpu__htab *t)
{
	static uint64_t calls;

	return ((uint64_t)(uintptr_t)t->slots * 0x9e3779b97f4a7c15ull) ^
	       __atomic_add_fetch(&calls, 0x632be59bd9b4e019ull, __ATOMIC_RELAXED);
}

/*
 * Whether two series of a family have the same label values: 1 yes, 0 no,
 * -1 out of memory. The library's hash table (hashtab.h) of series indices,
 * linear in the number of series. The hash is seeded per call from an
 * address and a counter, so that label values crafted to collide -- a
 * snapshot can come from another process -- cannot be chosen ahead to make
 * it quadratic.
 */
int pcpu__has_duplicate_series(const struct pcpu_snapshot_family *f)
{
	struct pcpu__htab tab = { 0 };
	uint64_t seed;
	size_t i;
	int dup = 0;

	if (pcpu__htab_reserve(&tab, f->nseries) < 0)
		return -1;
	seed = table_seed(&tab);
	for (i = 0; i < f->nseries && !dup; i++) {
		struct series_key k = { f, &f->series[i] };
		uint64_t h = pcpu__hash_values(PCPU__HASH_INIT ^ seed, f->series[i].label_values,
					       f->nlabels);

		int added = 0;

		/* Reserved above: never NULL. */
		(void)pcpu__htab_find_or_add(&tab, h, same_labels, &k, (uintptr_t)i + 1, 0, &added);
		dup = !added;
	}
	pcpu__htab_free(&tab);
	return dup;
}

static int fail_family(const struct pcpu_snapshot_family *f, int err)
{
	pcpu__msg_prefix("family", f->name);
	errno = err;
	return -1;
}

static int fail_msg(const struct pcpu_snapshot_family *f, const char *msg)
{
	pcpu__set_error(msg);
	return fail_family(f, EINVAL);
}

static int check_histogram(const struct pcpu_snapshot_family *f)
{
	size_t b;

	if (f->nbuckets < 1 || f->nbuckets > ((size_t)1 << 24))
		return fail_msg(f, "a histogram needs 1 to 2^24 buckets (the last is +Inf)");
	if (f->nbuckets > 1 && !f->bucket_upper)
		return fail_msg(f, "bucket_upper is NULL");
	if (f->nbuckets > 1 && pcpu__check_bounds(f->bucket_upper, f->nbuckets - 1, f->scale_exp10) < 0)
		return fail_family(f, EINVAL);
	if ((f->flags & PCPU_SNAPSHOT_NATIVE) &&
	    (f->native_schema < -4 || f->native_schema > 8 || f->nbuckets < 2 ||
	     f->bucket_upper[0] < 0 || f->native_index < -(INT32_MAX / 2) ||
	     f->native_index > INT32_MAX / 2))
		return fail_msg(f, "native histogram: schema not -4..8, a negative zero bucket, or an index out of range");
	if (f->export_buckets) {
		if (f->nexport > f->nbuckets - 1)
			return fail_msg(f, "more exported buckets than finite buckets");
		for (b = 0; b < f->nexport; b++)
			if (f->export_buckets[b] >= f->nbuckets - 1 ||
			    (b && f->export_buckets[b] <= f->export_buckets[b - 1]))
				return fail_msg(f, "export_buckets must be strictly increasing finite bucket indices");
	}
	return 0;
}

/* What a family's values alone can make invalid: a histogram's bucket
 * counts (present, their sum within 2^64), an info family's values (1).
 * The rest of check_family() depends on the structure only. */
static int check_values(const struct pcpu_snapshot_family *f)
{
	size_t i, b;

	if (f->nseries && !f->series)
		return fail_msg(f, "series is NULL");
	if (pcpu__has_buckets(f->type))
		for (i = 0; i < f->nseries; i++) {
			const uint64_t *c = f->series[i].value.histogram.counts;
			uint64_t total = 0;

			if (!c)
				return fail_msg(f, "a series has no bucket counts");
			for (b = 0; b < f->nbuckets; b++) {
				if (total + c[b] < total)
					return fail_msg(f, "bucket counts overflow 2^64 when summed");
				total += c[b];
			}
		}
	if (f->flags & PCPU_SNAPSHOT_INFO)
		for (i = 0; i < f->nseries; i++)
			if (f->series[i].value.gauge != 1)
				return fail_msg(f, "an info family's series are 1");
	return 0;
}

static int check_family(const struct pcpu_snapshot_family *f)
{
	const struct pcpu_metric_type_info *t;
	unsigned l, k;
	size_t i;

	if (!f->name) {
		pcpu__set_error("metric name is NULL");
		return fail_family(f, EINVAL);
	}
	if (pcpu_stats_check_metric_name(f->name) < 0)
		return fail_family(f, EINVAL);
	if (!(t = pcpu__type_info(f->type)))
		return fail_msg(f, "unknown metric type");
	if (pcpu__check_help(f->help) < 0 || pcpu__check_unit(f->name, f->unit) < 0)
		return fail_family(f, EINVAL);
	if (f->scale_exp10 > PCPU_STATS_SCALE_MAX || f->scale_exp10 < -PCPU_STATS_SCALE_MAX)
		return fail_msg(f, "scale_exp10 out of range [-22, 22]");
	if (f->nlabels > PCPU_STATS_LABELS_MAX)
		return fail_msg(f, "too many labels");
	if (f->nlabels && !f->label_names)
		return fail_msg(f, "label_names is NULL");
	for (l = 0; l < f->nlabels; l++) {
		if (pcpu_stats_check_label_name(f->label_names[l]) < 0)
			return fail_family(f, EINVAL);
		if (t->bucket_label && strcmp(f->label_names[l], t->bucket_label) == 0)
			return fail_msg(f, "label name \"le\" is reserved in histograms");
		for (k = 0; k < l; k++)
			if (strcmp(f->label_names[k], f->label_names[l]) == 0)
				return fail_msg(f, "a label name appears twice");
	}
	if (f->nseries && !f->series)
		return fail_msg(f, "series is NULL");
	for (i = 0; i < f->nseries; i++) {
		if (f->nlabels && !f->series[i].label_values)
			return fail_msg(f, "a series has no label values");
		for (l = 0; l < f->nlabels; l++)
			if (pcpu_stats_check_label_value(f->series[i].label_values[l]) < 0)
				return fail_family(f, EINVAL);
	}
	if (t->value == PCPU_VALUE_BUCKETS && check_histogram(f) < 0)
		return -1;
	if (f->flags & PCPU_SNAPSHOT_INFO) {
		if (!(t->flags & PCPU_TYPE_INFO) || !pcpu__info_name_len(f->name, f->flags) ||
		    (f->unit && *f->unit) || f->scale_exp10)
			return fail_msg(f, "an info family (PCPU_SNAPSHOT_INFO) is a gauge named "
					   "*_info, without unit or scale");
	}
	if ((f->flags & PCPU_SNAPSHOT_NANOS) &&
	    (!(t->flags & PCPU_TYPE_FRACTIONS) || (f->flags & PCPU_SNAPSHOT_INFO)))
		return fail_msg(f, "fractions (PCPU_SNAPSHOT_NANOS) are for counters, gauges and "
				   "histograms that are not info metrics");
	if (f->nseries > UINT32_MAX - 1)
		return fail_msg(f, "too many series");
	if (f->nseries > 1) {
		int dup = pcpu__has_duplicate_series(f);

		if (dup < 0) {
			errno = ENOMEM;
			return -1;
		}
		if (dup)
			return fail_msg(f, "two series have the same label values");
	}
	return check_values(f);
}

/* A series' labels as Prometheus sees them, to compare series of several
 * label sets: its non-empty labels (an empty value is an absent label),
 * sorted by name, as "name\0value\0..." in a buffer of its own. */
struct canon {
	char *s;
	size_t len;
};

static int canonical(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *se,
		     struct canon *out)
{
	unsigned idx[PCPU_STATS_LABELS_MAX], n = 0, l, k;
	size_t len = 0;
	char *p;

	for (l = 0; l < f->nlabels; l++) {
		if (!se->label_values[l][0])
			continue;
		for (k = n; k > 0 && strcmp(f->label_names[idx[k - 1]], f->label_names[l]) > 0; k--)
			idx[k] = idx[k - 1];
		idx[k] = l;
		n++;
		len += strlen(f->label_names[l]) + strlen(se->label_values[l]) + 2;
	}
	out->s = p = malloc(len + 1);
	out->len = len;
	if (!p)
		return -1;
	for (k = 0; k < n; k++) {
		size_t a = strlen(f->label_names[idx[k]]) + 1, b = strlen(se->label_values[idx[k]]) + 1;

		memcpy(p, f->label_names[idx[k]], a);
		memcpy(p + a, se->label_values[idx[k]], b);
		p += a + b;
	}
	return 0;
}

static int cmp_canon(const void *a, const void *b)
{
	const struct canon *x = a, *y = b;

	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->s, y->s, x->len);
}

int pcpu__labelsets_duplicate(const struct pcpu_snapshot_family *fams, size_t n)
{
	struct canon *c;
	size_t k, i, total = 0, at = 0;
	int dup = 0, err = 0;

	for (k = 0; k < n; k++)
		total += fams[k].nseries;
	c = calloc(total ? total : 1, sizeof *c);
	if (!c)
		return -1;
	for (k = 0; k < n && !err; k++)
		for (i = 0; i < fams[k].nseries && !err; i++)
			err = canonical(&fams[k], &fams[k].series[i], &c[at++]) < 0;
	if (!err) {
		qsort(c, total, sizeof *c, cmp_canon);
		for (i = 1; i < total && !dup; i++)
			dup = cmp_canon(&c[i - 1], &c[i]) == 0;
	}
	for (i = 0; i < total; i++)
		free(c[i].s);
	free(c);
	return err ? -1 : dup;
}

/* The families of one name next to each other (a registry's snapshot, a
 * segment reader's and a merge's are so sorted): label sets of one metric,
 * no two with the same label names, no series in two of them. Families
 * of one name apart are left to the sample names' check (a clash). */
static int check_labelsets(const struct pcpu_snapshot *s)
{
	size_t i, j, k;

	for (i = 0; i < s->nfamilies; i = j) {
		const struct pcpu_snapshot_family *f = &s->families[i];

		for (j = i + 1; j < s->nfamilies && strcmp(s->families[j].name, f->name) == 0; j++) {
			const struct pcpu_snapshot_family *g = &s->families[j];

			if (!pcpu__same_metric(f, g))
				return fail_msg(g, "its name's samples are written by two families that "
						   "are not two label sets of one metric (type, help, unit, "
						   "scale, flags, buckets)");
			for (k = i; k < j; k++)
				if (pcpu__same_label_set(s->families[k].nlabels, s->families[k].label_names,
							 g->nlabels, g->label_names))
					return fail_msg(g, "its name's samples are written by two families "
							   "with the same label names");
		}
		if (j - i > 1) {
			int dup = pcpu__labelsets_duplicate(f, j - i);

			if (dup < 0) {
				errno = ENOMEM;
				return -1;
			}
			if (dup)
				return fail_msg(f, "two label sets of one name have the same series (an "
						   "empty label value is an absent label)");
		}
	}
	return 0;
}

/* Whether family i is another label set of family i - 1's name. */
static int labelset_of_previous(const struct pcpu_snapshot *s, size_t i)
{
	return i > 0 && strcmp(s->families[i].name, s->families[i - 1].name) == 0;
}

/* A sample name looked up among those seen (pcpu__snapshot_check()): a
 * slot's key is 1 + an index in `names`. */
struct name_key {
	const struct sample_name *names, *n;
};

static int same_sample_name(const struct pcpu__hslot *sl, const void *ctx)
{
	const struct name_key *k = ctx;

	return cmp_sample_name(&k->names[sl->key - 1], k->n) == 0;
}

int pcpu__snapshot_check(const struct pcpu_snapshot *s)
{
	struct sample_name *names;
	struct pcpu__htab tab = { 0 };
	uint64_t seed;
	size_t i, n = 0, cap = 0;

	if (s->nfamilies && !s->families) {
		pcpu__set_error("snapshot: families is NULL");
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < s->nfamilies; i++) {
		const struct pcpu_snapshot_family *f = &s->families[i];
		size_t bl;
		const char *suf;

		/* A marked family's structure was checked when it was read
		 * (PCPU_SNAPSHOT_CHECKED); what lies between families is
		 * checked below, always. */
		if ((f->flags & PCPU_SNAPSHOT_CHECKED ? check_values(f) : check_family(f)) < 0)
			return -1;
		cap += pcpu__family_owned_name(&s->families[i], 0, &bl, &suf);
	}
	if (check_labelsets(s) < 0)
		return -1;
	if (cap < 2)
		return 0;
	/* Two families that write one sample: each name looked up in the
	 * library's hash table as it comes (linear; a sort of the names was
	 * most of the check, a twentieth of a scrape of 10^5 series in 1,000
	 * families). Seeded per call, as pcpu__has_duplicate_series(): names
	 * crafted to collide cannot be chosen ahead. */
	names = malloc(cap * sizeof *names);
	if (!names || pcpu__htab_reserve(&tab, cap) < 0) {
		free(names);
		errno = ENOMEM;
		return -1;
	}
	seed = table_seed(&tab);
	for (i = 0; i < s->nfamilies; i++) {
		size_t k, ns = 1;

		if (labelset_of_previous(s, i))
			continue; /* its name's names are its first label set's */
		for (k = 0; k < ns; k++, n++) {
			struct name_key key = { names, &names[n] };
			uint64_t h;
			int added = 0;

			ns = pcpu__family_owned_name(&s->families[i], k, &names[n].baselen,
						     &names[n].suffix);
			names[n].base = s->families[i].name;
			names[n].family = i;
			h = pcpu__hash_str(pcpu__hash_bytes(PCPU__HASH_INIT ^ seed, names[n].base, names[n].baselen),
					   names[n].suffix);
			/* Reserved above: never NULL. */
			(void)pcpu__htab_find_or_add(&tab, h, same_sample_name, &key, (uintptr_t)n + 1, 0, &added);
			if (!added) {
				const struct pcpu_snapshot_family *f = &s->families[i];
				struct pcpu__msg m = pcpu__msg_begin();

				pcpu__msg_str(&m, "sample name ");
				pcpu__msg_quoted(&m, names[n].base, names[n].baselen < 64 ? names[n].baselen : 64);
				pcpu__msg_str(&m, " + \"");
				pcpu__msg_str(&m, names[n].suffix);
				pcpu__msg_str(&m, "\" is written by two families");
				pcpu__htab_free(&tab);
				free(names);
				return fail_family(f, EINVAL);
			}
		}
	}
	pcpu__htab_free(&tab);
	free(names);
	return 0;
}

/* ---- text formats ---- */

static void put_labels(struct pcpu__buf *b, const struct pcpu_snapshot_family *f,
		       const struct pcpu_snapshot_series *se, const char *le)
{
	unsigned l;

	if (!f->nlabels && !le)
		return;
	pcpu__buf_putc(b, '{');
	for (l = 0; l < f->nlabels; l++) {
		if (l)
			pcpu__buf_putc(b, ',');
		pcpu__buf_puts(b, f->label_names[l]);
		pcpu__buf_put(b, "=\"", 2);
		pcpu__buf_label_value(b, se->label_values[l]);
		pcpu__buf_putc(b, '"');
	}
	if (le) {
		if (f->nlabels)
			pcpu__buf_putc(b, ',');
		pcpu__buf_put(b, "le=\"", 4);
		pcpu__buf_puts(b, le);
		pcpu__buf_putc(b, '"');
	}
	pcpu__buf_putc(b, '}');
}

/* A number as the text formats write it; JSON has no NaN or infinities,
 * so there they are the strings "NaN", "+Inf" and "-Inf" (as the `le` of
 * the +Inf bucket is, and as Prometheus' HTTP API writes every value). */
static void put_number(struct pcpu__buf *b, const char *d, size_t n, int json)
{
	int special = json && (d[0] == 'N' || (d[0] == '+') || (d[0] == '-' && d[1] == 'I'));

	if (special)
		pcpu__buf_putc(b, '"');
	pcpu__buf_put(b, d, n);
	if (special)
		pcpu__buf_putc(b, '"');
}

/* A histogram's sum: the integer sum scaled, plus its residue. */
static void put_sum(struct pcpu__buf *b, const struct pcpu_snapshot_family *f,
		    const struct pcpu_snapshot_series *se, int json)
{
	char d[PCPU__DOUBLE_BUF];

	put_number(b, d, pcpu__fmt_sum(d, f, se), json);
}

/* A counter's or gauge's value, with its fraction and residue
 * (PCPU_SNAPSHOT_NANOS). */
static void put_series_value(struct pcpu__buf *b, const struct pcpu_snapshot_family *f,
			     const struct pcpu_snapshot_series *se, int json)
{
	char d[PCPU__DOUBLE_BUF];

	put_number(b, d, pcpu__fmt_series(d, f, se), json);
}

/* The `le` strings of a histogram family's exposed buckets (the others'
 * are left unset), computed once per family. */
static char (*le_strings(const struct pcpu_snapshot_family *f))[PCPU__DOUBLE_BUF]
{
	char (*le)[PCPU__DOUBLE_BUF] = malloc(f->nbuckets * sizeof *le);
	size_t b, x = 0;

	if (!le)
		return NULL;
	for (b = 0; b + 1 < f->nbuckets; b++)
		if (pcpu__bucket_exposed(f, b, &x))
			pcpu__fmt_bound(le[b], f->bucket_upper[b], f->scale_exp10);
	strcpy(le[f->nbuckets - 1], "+Inf");
	return le;
}

static int write_text(const struct pcpu_snapshot *s, struct pcpu__buf *b, int om)
{
	size_t i, j, k;

	for (i = 0; i < s->nfamilies; i++) {
		const struct pcpu_snapshot_family *f = &s->families[i];
		/* Validated: a type the table describes. */
		const struct pcpu_metric_type_info *t = pcpu__type_info(f->type);
		const char *total = t->sample_suffix;
		char (*le)[PCPU__DOUBLE_BUF] = NULL;
		int negative_bound = 0;

		if (labelset_of_previous(s, i)) {
			/* Another label set of the name: under its header. */
		} else if (om) {
			/* The family's name in OpenMetrics: x for info family x_info. */
			size_t info = pcpu__info_name_len(f->name, f->flags);
			size_t namelen = info ? info : strlen(f->name);

			pcpu__buf_put(b, "# TYPE ", 7);
			pcpu__buf_put(b, f->name, namelen);
			pcpu__buf_putc(b, ' ');
			pcpu__buf_puts(b, info ? "info" : t->openmetrics_type);
			pcpu__buf_putc(b, '\n');
			if (f->unit && *f->unit) {
				pcpu__buf_put(b, "# UNIT ", 7);
				pcpu__buf_put(b, f->name, namelen);
				pcpu__buf_putc(b, ' ');
				pcpu__buf_puts(b, f->unit);
				pcpu__buf_putc(b, '\n');
			}
			if (f->help) {
				pcpu__buf_put(b, "# HELP ", 7);
				pcpu__buf_put(b, f->name, namelen);
				pcpu__buf_putc(b, ' ');
				pcpu__buf_help(b, f->help, 1);
				pcpu__buf_putc(b, '\n');
			}
		} else {
			if (f->help) {
				pcpu__buf_put(b, "# HELP ", 7);
				pcpu__buf_puts(b, f->name);
				pcpu__buf_puts(b, total);
				pcpu__buf_putc(b, ' ');
				pcpu__buf_help(b, f->help, 0);
				pcpu__buf_putc(b, '\n');
			}
			pcpu__buf_put(b, "# TYPE ", 7);
			pcpu__buf_puts(b, f->name);
			pcpu__buf_puts(b, total);
			pcpu__buf_putc(b, ' ');
			pcpu__buf_puts(b, t->text_type);
			pcpu__buf_putc(b, '\n');
		}
		if (t->value == PCPU_VALUE_BUCKETS) {
			le = le_strings(f);
			if (!le)
				return -1;
			negative_bound = f->nbuckets > 1 && f->bucket_upper[0] < 0;
		}
		for (j = 0; j < f->nseries; j++) {
			const struct pcpu_snapshot_series *se = &f->series[j];

			if (t->value != PCPU_VALUE_BUCKETS) {
				pcpu__buf_puts(b, f->name);
				pcpu__buf_puts(b, total);
				put_labels(b, f, se, NULL);
				pcpu__buf_putc(b, ' ');
				put_series_value(b, f, se, 0);
				pcpu__buf_putc(b, '\n');
				continue;
			}
			{
				const uint64_t *c = se->value.histogram.counts;
				uint64_t cum = 0;
				size_t x = 0; /* next of export_buckets */

				for (k = 0; k < f->nbuckets; k++) {
					cum += c[k];
					if (!pcpu__bucket_exposed(f, k, &x))
						continue;
					pcpu__buf_puts(b, f->name);
					pcpu__buf_puts(b, t->bucket_suffix);
					put_labels(b, f, se, le[k]);
					pcpu__buf_putc(b, ' ');
					pcpu__buf_u64(b, cum);
					pcpu__buf_putc(b, '\n');
				}
				if (om && (negative_bound || !(pcpu_snapshot_sum(f, se) >= 0)))
					continue; /* negative or NaN: OpenMetrics has neither */
				pcpu__buf_puts(b, f->name);
				pcpu__buf_puts(b, t->sum_suffix);
				put_labels(b, f, se, NULL);
				pcpu__buf_putc(b, ' ');
				put_sum(b, f, se, 0);
				pcpu__buf_putc(b, '\n');
				pcpu__buf_puts(b, f->name);
				pcpu__buf_puts(b, t->count_suffix);
				put_labels(b, f, se, NULL);
				pcpu__buf_putc(b, ' ');
				pcpu__buf_u64(b, cum);
				pcpu__buf_putc(b, '\n');
			}
		}
		free(le);
	}
	if (om)
		pcpu__buf_put(b, "# EOF\n", 6);
	return 0;
}

/* ---- JSON ---- */

static void json_labels(struct pcpu__buf *b, const struct pcpu_snapshot_family *f,
			const struct pcpu_snapshot_series *se)
{
	unsigned l;

	pcpu__buf_put(b, "\"labels\":{", 10);
	for (l = 0; l < f->nlabels; l++) {
		if (l)
			pcpu__buf_putc(b, ',');
		pcpu__buf_json_string(b, f->label_names[l]);
		pcpu__buf_putc(b, ':');
		pcpu__buf_json_string(b, se->label_values[l]);
	}
	pcpu__buf_putc(b, '}');
}

static int write_json(const struct pcpu_snapshot *s, struct pcpu__buf *b)
{
	size_t i, j, k, written = 0;

	pcpu__buf_puts(b, "{\"families\":[");
	for (i = 0; i < s->nfamilies; i++) {
		const struct pcpu_snapshot_family *f = &s->families[i];
		const struct pcpu_metric_type_info *t = pcpu__type_info(f->type);
		char (*le)[PCPU__DOUBLE_BUF] = NULL;
		/* Another label set of the name: its metrics in the same array. */
		int more = labelset_of_previous(s, i);

		if (!more) {
			written = 0;
			pcpu__buf_puts(b, i ? ",\n{\"name\":" : "\n{\"name\":");
			pcpu__buf_json_string(b, f->name);
			pcpu__buf_puts(b, ",\"type\":\"");
			pcpu__buf_puts(b, t->name);
			pcpu__buf_puts(b, "\",\"help\":");
			pcpu__buf_json_string(b, f->help ? f->help : "");
			pcpu__buf_puts(b, ",\"unit\":");
			pcpu__buf_json_string(b, f->unit ? f->unit : "");
			pcpu__buf_puts(b, ",\"metrics\":[");
		}
		if (t->value == PCPU_VALUE_BUCKETS) {
			le = le_strings(f);
			if (!le)
				return -1;
		}
		for (j = 0; j < f->nseries; j++) {
			const struct pcpu_snapshot_series *se = &f->series[j];

			pcpu__buf_puts(b, written++ ? ",\n{" : "\n{");
			json_labels(b, f, se);
			if (t->value != PCPU_VALUE_BUCKETS) {
				pcpu__buf_puts(b, ",\"value\":");
				put_series_value(b, f, se, 1);
			} else {
				const uint64_t *c = se->value.histogram.counts;
				uint64_t cum = 0, total = 0;
				size_t x = 0; /* next of export_buckets */
				int first = 1;

				for (k = 0; k < f->nbuckets; k++)
					total += c[k];
				pcpu__buf_puts(b, ",\"count\":");
				pcpu__buf_u64(b, total);
				pcpu__buf_puts(b, ",\"sum\":");
				put_sum(b, f, se, 1);
				pcpu__buf_puts(b, ",\"buckets\":[");
				for (k = 0; k < f->nbuckets; k++) {
					cum += c[k];
					if (!pcpu__bucket_exposed(f, k, &x))
						continue;
					pcpu__buf_puts(b, first ? "{\"le\":" : ",{\"le\":");
					first = 0;
					if (k + 1 < f->nbuckets)
						pcpu__buf_puts(b, le[k]);
					else
						pcpu__buf_puts(b, "\"+Inf\"");
					pcpu__buf_puts(b, ",\"count\":");
					pcpu__buf_u64(b, cum);
					pcpu__buf_putc(b, '}');
				}
				pcpu__buf_putc(b, ']');
			}
			pcpu__buf_putc(b, '}');
		}
		if (!(i + 1 < s->nfamilies && labelset_of_previous(s, i + 1)))
			pcpu__buf_puts(b, "]}");
		free(le);
	}
	pcpu__buf_puts(b, "\n]}\n");
	return 0;
}

int pcpu_snapshot_write(const struct pcpu_snapshot *s, enum pcpu_format fmt, char **out,
			size_t *len)
{
	return pcpu__snapshot_write(s, fmt, out, len, 1);
}

int pcpu__snapshot_write(const struct pcpu_snapshot *s, enum pcpu_format fmt, char **out,
			 size_t *len, int validate)
{
	struct pcpu__buf b = { NULL, 0, 0, 0 };
	int r;

	if (!s || !out || !len || !pcpu_format_content_type(fmt)) {
		pcpu__set_error("pcpu_snapshot_write: NULL argument or unknown format");
		errno = EINVAL;
		return -1;
	}
	if (!pcpu_format_supported(fmt)) {
		pcpu__set_error("pcpu_snapshot_write: this build of libpcpu has no protobuf writer (built without protobuf-c)");
		errno = ENOTSUP;
		return -1;
	}
	if (validate && pcpu__snapshot_check(s) < 0)
		return -1;
	pcpu__buf_reserve(&b, 256);
	if (b.p)
		b.p[0] = '\0'; /* an empty snapshot writes nothing in 0.0.4 */
	if (fmt == PCPU_FORMAT_JSON)
		r = write_json(s, &b);
#ifdef PCPU_HAVE_PROTOBUF
	else if (fmt == PCPU_FORMAT_PROTOBUF)
		r = pcpu__write_protobuf(s, &b);
#endif
	else
		r = write_text(s, &b, fmt == PCPU_FORMAT_OPENMETRICS);
	if (r < 0 || b.failed || !b.p) {
		free(b.p);
		pcpu__set_error("out of memory while writing the exposition");
		errno = ENOMEM;
		return -1;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

const char *pcpu_format_content_type(enum pcpu_format fmt)
{
	switch (fmt) {
	case PCPU_FORMAT_PROMETHEUS:
		return "text/plain; version=0.0.4; charset=utf-8";
	case PCPU_FORMAT_OPENMETRICS:
		return "application/openmetrics-text; version=1.0.0; charset=utf-8";
	case PCPU_FORMAT_JSON:
		return "application/json";
	case PCPU_FORMAT_PROTOBUF:
		return "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
		       "encoding=delimited";
	}
	return NULL;
}

int pcpu_format_supported(enum pcpu_format fmt)
{
	switch (fmt) {
	case PCPU_FORMAT_PROMETHEUS:
	case PCPU_FORMAT_OPENMETRICS:
	case PCPU_FORMAT_JSON:
		return 1;
	case PCPU_FORMAT_PROTOBUF:
#ifdef PCPU_HAVE_PROTOBUF
		return 1;
#else
		return 0; /* built without protobuf-c */
#endif
	}
	return 0;
}
