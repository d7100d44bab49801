/* SPDX-License-Identifier: MIT */
/*
 * Merging snapshots: one exposition from several processes' statistics
 * (pcpustat serve merges every segment it reads), each series labelled with
 * where it came from.
 *
 * Families are indexed by the sample names they write, in the library's
 * hash table (hashtab.h: the name's hash, linear probing, half full): a
 * family is found by its name and a clash (`foo_total` of counter foo
 * against a gauge named foo_total) by any of its suffixed names, each in
 * constant time, so merging is linear in the size of the inputs -- the
 * exporter's earlier list search was quadratic in the number of families.
 * The hash is sequential, so the hash of "foo" then "_total" is the hash
 * of "foo_total": names are never concatenated to be hashed.
 *
 * All or nothing per input: pcpu_snapshot_merge_add() checks everything
 * and reserves every array it will need before it changes anything, so a
 * bad input (or ENOMEM) leaves the merge as it was.
 *
 * Memory: the labelled copies of the inputs come from an arena (arena.c)
 * freed with the merge; families' series arrays grow by doubling.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"
#include "hashtab.h"
#include "validate.h"


struct mfam {
	struct pcpu_snapshot_family f; /* f.series == series */
	struct pcpu_snapshot_series *series;
	size_t cap; /* 0: series lie in the arena, not ours to realloc */
	size_t next; /* another label set of its name (index + 1), 0: none */
	unsigned inputs; /* inputs that gave it series: past 1, they may clash */
	int reserved; /* pcpu_snapshot_merge_reserve()'s: out of the result while empty */
};

/* The table's slots: a name a family owns, as its index k among the
 * family's names (pcpu__family_owned_name()) + 1 in the key, and the
 * family's index in the value. */

struct pcpu_snapshot_merge {
	struct mfam *fams;
	size_t nfams, capfams;
	struct pcpu__htab tab;
	struct pcpu__arena arena; /* labelled copies of the inputs */
	struct pcpu_snapshot_family *sorted; /* the result's families */
	struct pcpu_snapshot result;
};

/* The hash of sample name base[0..baselen) + suffix (FNV-1a is sequential:
 * no copy). */
static uint64_t sample_hash(const char *base, size_t baselen, const char *suffix)
{
	return pcpu__hash_str(pcpu__hash_bytes(PCPU__HASH_INIT, base, baselen), suffix);
}

static int fail(int err, const char *what, const char *name, const char *why)
{
	struct pcpu__msg msg = pcpu__msg_begin();

	pcpu__msg_str(&msg, what);
	if (name) {
		pcpu__msg_str(&msg, " ");
		pcpu__msg_quoted(&msg, name, 100);
	}
	pcpu__msg_str(&msg, why);
	return pcpu__msg_fail(&msg, err);
}

pcpu_snapshot_merge_t *pcpu_snapshot_merge_new(void)
{
	pcpu_snapshot_merge_t *m = calloc(1, sizeof *m);

	if (!m)
		errno = ENOMEM;
	return m;
}

void pcpu_snapshot_merge_free(pcpu_snapshot_merge_t *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->nfams; i++)
		if (m->fams[i].cap)
			free(m->fams[i].series);
	pcpu__arena_free(&m->arena);
	free(m->fams);
	pcpu__htab_free(&m->tab);
	free(m->sorted);
	free(m);
}

/* A name looked up: base[0..baselen) + suffix. */
struct name_key {
	const pcpu_snapshot_merge_t *m;
	const char *base, *suffix;
	size_t baselen;
};

static int name_eq(const struct pcpu__hslot *s, const void *ctx)
{
	const struct name_key *k = ctx;
	const struct pcpu_snapshot_family *f = &k->m->fams[s->val].f;
	const char *suf;
	size_t bl;

	pcpu__family_owned_name(f, (size_t)s->key - 1, &bl, &suf);
	return pcpu__cmp_concat(f->name, bl, suf, k->base, k->baselen, k->suffix) == 0;
}

/* The slot of name base[0..baselen) + suffix, or NULL. */
static struct pcpu__hslot *lookup(pcpu_snapshot_merge_t *m, const char *base, size_t baselen,
				  const char *suffix)
{
	struct name_key k = { m, base, suffix, baselen };

	return pcpu__htab_find(&m->tab, sample_hash(base, baselen, suffix), name_eq, &k);
}

/* Test hook (tests/stats/test_merge.c, which links the static library):
 * the lookups made so far and the table slots they visited, so that a test
 * checks the hash spreads names (about 1.5-2.5 slots a lookup in a table at
 * most half full; every name hashed alike makes it thousands) without
 * timing anything. */
PCPU_HIDDEN void pcpu__snapshot_merge_probes(const pcpu_snapshot_merge_t *m, size_t *lookups,
					     size_t *probes)
{
	*lookups = m->tab.lookups;
	*probes = m->tab.probes;
}

/* The merged family named `name` that holds the name's sample names (its
 * first label set), or NULL. */
static struct mfam *find_name(pcpu_snapshot_merge_t *m, const char *name)
{
	struct pcpu__hslot *s = lookup(m, name, strlen(name), "");

	if (!s || strcmp(m->fams[s->val].f.name, name) != 0)
		return NULL; /* absent, or another family's suffixed name */
	return &m->fams[s->val];
}

static int same_labels(const struct pcpu_snapshot_family *a, const struct pcpu_snapshot_family *b)
{
	unsigned l;

	if (a->nlabels != b->nlabels)
		return 0;
	for (l = 0; l < b->nlabels; l++)
		if (strcmp(a->label_names[l], b->label_names[l]) != 0)
			return 0;
	return 1;
}

/* The merged family named as f with f's label names (another label set of
 * the name is another family), or NULL. */
static struct mfam *find_family(pcpu_snapshot_merge_t *m, const struct pcpu_snapshot_family *f)
{
	struct mfam *e = find_name(m, f->name);

	while (e && !same_labels(&e->f, f))
		e = e->next ? &m->fams[e->next - 1] : NULL;
	return e;
}

static void *arena_alloc(pcpu_snapshot_merge_t *m, size_t size)
{
	return pcpu__arena_alloc(&m->arena, size);
}

/* Checks family f of an input against the merge: the same family as one
 * merged before, or another label set of a name merged before (its label
 * names not those of one of its sets in another order), or a new name. */
static int check_against(pcpu_snapshot_merge_t *m, const struct pcpu_snapshot_family *f)
{
	const struct mfam *e = find_name(m, f->name);
	size_t k, ns = 1;

	if (e) {
		for (; e; e = e->next ? &m->fams[e->next - 1] : NULL) {
			if (!pcpu__same_metric(&e->f, f))
				break;
			if (same_labels(&e->f, f))
				return 0;
			if (pcpu__same_label_set(e->f.nlabels, e->f.label_names, f->nlabels,
						 f->label_names))
				break;
		}
		return e ? fail(EINVAL, "family", f->name, " differs from the one merged before (type, "
						       "help, unit, scale, labels or buckets)")
			 : 0;
	}
	for (k = 0; k < ns; k++) {
		size_t bl;
		const char *suf;

		ns = pcpu__family_owned_name(f, k, &bl, &suf);
		if (lookup(m, f->name, bl, suf))
			return fail(EINVAL, "family", f->name, " writes a sample name of a family merged before");
	}
	return 0;
}

/* The input's families with the extra labels, in the arena; validated on
 * their own (names, labels, values, duplicates, buckets). */
static int labelled_copy(pcpu_snapshot_merge_t *m, const struct pcpu_snapshot *s, unsigned nextra,
			 const char *const *names, const char *const *values,
			 struct pcpu_snapshot_family **out)
{
	struct pcpu_snapshot_family *fams;
	struct pcpu_snapshot tmp;
	size_t f, i;

	fams = arena_alloc(m, (s->nfamilies ? s->nfamilies : 1) * sizeof *fams);
	if (!fams)
		return fail(ENOMEM, "out of memory", NULL, "");
	for (f = 0; f < s->nfamilies; f++) {
		const struct pcpu_snapshot_family *in = &s->families[f];
		struct pcpu_snapshot_series *series;
		const struct pcpu_metric_type_info *t;
		const char **ln;
		unsigned l, x;

		if (!in->name || (in->nlabels && !in->label_names) || (in->nseries && !in->series))
			return fail(EINVAL, "a family", NULL, " has a NULL name, label names or series");
		if (in->nlabels + nextra > PCPU_STATS_LABELS_MAX)
			return fail(EINVAL, "family", in->name, " has too many labels with the extra ones");
		for (l = 0; l < in->nlabels; l++)
			for (x = 0; x < nextra; x++)
				if (in->label_names[l] && strcmp(in->label_names[l], names[x]) == 0)
					return fail(EINVAL, "family", in->name,
						    " already has a label the merge adds");
		/* What a family's own check says of the extra labels and a
		 * marked family (PCPU_SNAPSHOT_CHECKED) does not get: "le" is
		 * a histogram's (their names, values and distinctness are
		 * pcpu_snapshot_merge_add()'s). */
		t = pcpu__type_info(in->type);
		for (x = 0; x < nextra && t && t->bucket_label; x++)
			if (strcmp(names[x], t->bucket_label) == 0)
				return fail(EINVAL, "family", in->name,
					    " is a histogram: the merge's label \"le\" is reserved in it");
		ln = arena_alloc(m, (in->nlabels + nextra) * sizeof *ln + 1);
		series = arena_alloc(m, in->nseries * sizeof *series + 1);
		if (!ln || !series)
			return fail(ENOMEM, "out of memory", NULL, "");
		if (in->nlabels)
			memcpy(ln, in->label_names, in->nlabels * sizeof *ln);
		if (nextra)
			memcpy(ln + in->nlabels, names, nextra * sizeof *ln);
		fams[f] = *in;
		fams[f].nlabels = in->nlabels + nextra;
		fams[f].label_names = ln;
		fams[f].series = series;
		for (i = 0; i < in->nseries; i++) {
			const char **lv = arena_alloc(m, (in->nlabels + nextra) * sizeof *lv + 1);

			if (!lv)
				return fail(ENOMEM, "out of memory", NULL, "");
			if (in->nlabels && !in->series[i].label_values)
				return fail(EINVAL, "family", in->name, " has a series without label values");
			if (in->nlabels)
				memcpy(lv, in->series[i].label_values, in->nlabels * sizeof *lv);
			if (nextra)
				memcpy(lv + in->nlabels, values, nextra * sizeof *lv);
			series[i] = in->series[i];
			series[i].label_values = lv;
		}
	}
	/* The writers' own checks, so that the merged whole is valid exactly
	 * when each input is (and no two clash, checked by the table) -- the
	 * checks alone: writing the text as well cost as much again (issue 51). */
	tmp.nfamilies = s->nfamilies;
	tmp.families = fams;
	if (pcpu__snapshot_check(&tmp) < 0)
		return -1;
	*out = fams;
	return 0;
}

/* Makes room, before anything changes, for what adding `fams` needs. */
static int reserve(pcpu_snapshot_merge_t *m, const struct pcpu_snapshot_family *fams, size_t n)
{
	size_t f, newfams = 0, newnames = 0;

	for (f = 0; f < n; f++) {
		struct mfam *e = find_family(m, &fams[f]);
		size_t bl;
		const char *suf;

		if (e) {
			size_t need = e->f.nseries + fams[f].nseries;

			if (need > e->cap) {
				size_t cap = e->cap ? e->cap : 8;
				struct pcpu_snapshot_series *p;

				while (cap < need)
					cap *= 2;
				p = e->cap ? realloc(e->series, cap * sizeof *p) : malloc(cap * sizeof *p);
				if (!p)
					return -1;
				if (!e->cap && e->f.nseries)
					memcpy(p, e->series, e->f.nseries * sizeof *p);
				e->series = p;
				e->f.series = p;
				e->cap = cap;
			}
		} else {
			newfams++;
			/* A name's names once: by its first label set. */
			if (!find_name(m, fams[f].name) &&
			    (f == 0 || strcmp(fams[f - 1].name, fams[f].name) != 0))
				newnames += pcpu__family_owned_name(&fams[f], 0, &bl, &suf);
		}
	}
	if (m->nfams + newfams > m->capfams) {
		size_t cap = m->capfams ? m->capfams : 32;
		struct mfam *p;

		while (cap < m->nfams + newfams)
			cap *= 2;
		p = realloc(m->fams, cap * sizeof *p);
		if (!p)
			return -1;
		m->fams = p;
		m->capfams = cap;
	}
	return pcpu__htab_reserve(&m->tab, newnames);
}

int pcpu_snapshot_merge_add(pcpu_snapshot_merge_t *m, const struct pcpu_snapshot *s, unsigned nlabels,
			    const char *const *label_names, const char *const *label_values)
{
	struct pcpu_snapshot_family *fams = NULL;
	size_t f;
	unsigned x;

	if (!m || !s || (s->nfamilies && !s->families) || (nlabels && (!label_names || !label_values)))
		return fail(EINVAL, "pcpu_snapshot_merge_add: NULL argument", NULL, "");
	for (x = 0; x < nlabels; x++) {
		unsigned y;

		if (!label_names[x] || !label_values[x])
			return fail(EINVAL, "pcpu_snapshot_merge_add: NULL extra label", NULL, "");
		if (pcpu_stats_check_label_name(label_names[x]) < 0 ||
		    pcpu_stats_check_label_value(label_values[x]) < 0)
			return -1;
		for (y = 0; y < x; y++)
			if (strcmp(label_names[y], label_names[x]) == 0)
				return fail(EINVAL, "pcpu_snapshot_merge_add: extra label", label_names[x],
					    " given twice");
	}
	if (labelled_copy(m, s, nlabels, label_names, label_values, &fams) < 0)
		return -1;
	/* Families of one input never clash among themselves (checked just
	 * now), so checking each against the merge suffices. */
	for (f = 0; f < s->nfamilies; f++)
		if (check_against(m, &fams[f]) < 0)
			return -1;
	if (reserve(m, fams, s->nfamilies) < 0)
		return fail(ENOMEM, "out of memory", NULL, "");
	for (f = 0; f < s->nfamilies; f++) {
		const struct pcpu_snapshot_family *in = &fams[f];
		struct mfam *e = find_family(m, in);

		if (!e) {
			struct mfam *head = find_name(m, in->name);
			size_t k, ns = head ? 0 : 1;

			e = &m->fams[m->nfams++];
			e->f = *in; /* its name is what lookup() compares */
			e->cap = 0;
			e->next = 0;
			if (head) { /* another label set: after the name's last */
				while (head->next)
					head = &m->fams[head->next - 1];
				head->next = m->nfams;
			}
			e->inputs = in->nseries != 0;
			e->reserved = 0;
			for (k = 0; k < ns; k++) {
				size_t bl;
				const char *suf;

				ns = pcpu__family_owned_name(in, k, &bl, &suf);
				/* Reserved: cannot fail. */
				(void)pcpu__htab_add(&m->tab, sample_hash(in->name, bl, suf),
						     (uintptr_t)k + 1, (uint32_t)(m->nfams - 1));
			}
			/* Its series stay in the arena (cap 0: not ours to
			 * realloc) until another input adds to the family. */
			e->series = (struct pcpu_snapshot_series *)in->series;
			continue;
		}
		if (in->nseries) {
			memcpy(e->series + e->f.nseries, in->series, in->nseries * sizeof *in->series);
			e->inputs++;
		}
		e->f.series = e->series;
		e->f.nseries += in->nseries;
	}
	return 0;
}

int pcpu_snapshot_merge_reserve(pcpu_snapshot_merge_t *m, const struct pcpu_snapshot *s)
{
	size_t f, before;

	if (!m || !s || (s->nfamilies && !s->families))
		return fail(EINVAL, "pcpu_snapshot_merge_reserve: NULL argument", NULL, "");
	for (f = 0; f < s->nfamilies; f++)
		if (s->families[f].nseries)
			return fail(EINVAL, "pcpu_snapshot_merge_reserve: family", s->families[f].name,
				    " has series (a reservation has none)");
	before = m->nfams;
	if (pcpu_snapshot_merge_add(m, s, 0, NULL, NULL) < 0)
		return -1;
	for (f = before; f < m->nfams; f++)
		m->fams[f].reserved = 1;
	return 0;
}

static int cmp_family(const void *a, const void *b)
{
	const struct pcpu_snapshot_family *x = a, *y = b;

	return pcpu__cmp_family_order(x->name, x->nlabels, x->label_names, y->name, y->nlabels,
				      y->label_names);
}

const struct pcpu_snapshot *pcpu_snapshot_merge_result(pcpu_snapshot_merge_t *m)
{
	struct pcpu_snapshot_family *p;
	size_t i, n;

	if (!m) {
		errno = EINVAL;
		return NULL;
	}
	p = realloc(m->sorted, (m->nfams ? m->nfams : 1) * sizeof *p);
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	m->sorted = p;
	for (i = 0, n = 0; i < m->nfams; i++)
		if (!m->fams[i].reserved || m->fams[i].f.nseries)
			p[n++] = m->fams[i].f;
	qsort(p, n, sizeof *p, cmp_family);
	m->result.nfamilies = n;
	m->result.families = p;
	return &m->result;
}

int pcpu_snapshot_merge_write(pcpu_snapshot_merge_t *m, enum pcpu_format fmt, char **out, size_t *len)
{
	const struct pcpu_snapshot *all;
	size_t i, j;

	if (!m || !out || !len)
		return fail(EINVAL, "pcpu_snapshot_merge_write: NULL argument", NULL, "");
	/* Every input was checked when added, and every family against the
	 * others: what is left is series of one family from several inputs
	 * with the same labels (the extra labels are the caller's to make
	 * distinct), checked here, only where several inputs gave series. */
	for (i = 0; i < m->nfams; i++) {
		int dup;

		if (m->fams[i].inputs < 2)
			continue;
		dup = pcpu__has_duplicate_series(&m->fams[i].f);
		if (dup < 0)
			return fail(ENOMEM, "out of memory", NULL, "");
		if (dup)
			return fail(EINVAL, "family", m->fams[i].f.name,
				    ": two inputs gave it series with the same labels");
	}
	if (!(all = pcpu_snapshot_merge_result(m)))
		return -1;
	/* And series of several label sets of one name (issue 50): a series
	 * {a="1"} of one input and {a="1",b=""} of another are one series to
	 * Prometheus. Only names with several label sets pay for it. */
	for (i = 0; i < all->nfamilies; i = j) {
		int dup;

		for (j = i + 1; j < all->nfamilies && strcmp(all->families[j].name, all->families[i].name) == 0;
		     j++)
			;
		if (j - i < 2)
			continue;
		dup = pcpu__labelsets_duplicate(&all->families[i], j - i);
		if (dup < 0)
			return fail(ENOMEM, "out of memory", NULL, "");
		if (dup)
			return fail(EINVAL, "family", all->families[i].name,
				    ": two inputs gave two of its label sets the same series (an empty "
				    "label value is an absent label)");
	}
	return pcpu__snapshot_write(all, fmt, out, len, 0);
}
