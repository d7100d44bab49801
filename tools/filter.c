/* SPDX-License-Identifier: MIT */
/*
 * pcpustat's series filters: shell patterns (fnmatch) on a family's
 * exposition name or a whole series name, POSIX extended regular
 * expressions on the whole series name; and a snapshot reduced to the
 * series that match, pointing into the original.
 */
#include <fnmatch.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "pcpustat.h"

struct filter {
	char **globs;
	size_t nglobs;
	regex_t *res;
	size_t nres;
};

struct filter *filter_new(void)
{
	struct filter *f = calloc(1, sizeof *f);

	if (!f) {
		fputs("pcpustat: out of memory\n", stderr);
		exit(1);
	}
	return f;
}

int filter_add_glob(struct filter *f, const char *pattern)
{
	char **g = realloc(f->globs, (f->nglobs + 1) * sizeof *g);

	if (!g)
		return -1;
	f->globs = g;
	f->globs[f->nglobs++] = strdup(pattern);
	return 0;
}

int filter_add_regex(struct filter *f, const char *re, char *err, size_t errlen)
{
	regex_t *r = realloc(f->res, (f->nres + 1) * sizeof *r);
	int rc;

	if (!r)
		return -1;
	f->res = r;
	rc = regcomp(&f->res[f->nres], re, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		regerror(rc, &f->res[f->nres], err, errlen);
		return -1;
	}
	f->nres++;
	return 0;
}

int filter_empty(const struct filter *f)
{
	return !f || (f->nglobs == 0 && f->nres == 0);
}

int filter_match(const struct filter *f, const struct pcpu_snapshot_family *fam,
		 const struct pcpu_snapshot_series *s)
{
	char *name, *full;
	size_t i;
	int m = 0;

	if (filter_empty(f))
		return 1;
	name = family_name_str(fam);
	full = series_name_str(fam, s);
	for (i = 0; i < f->nglobs && !m; i++)
		m = fnmatch(f->globs[i], name, 0) == 0 || fnmatch(f->globs[i], full, 0) == 0 ||
		    fnmatch(f->globs[i], fam->name, 0) == 0;
	for (i = 0; i < f->nres && !m; i++)
		m = regexec(&f->res[i], full, 0, NULL, 0) == 0;
	free(name);
	free(full);
	return m;
}

void filter_free(struct filter *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->nglobs; i++)
		free(f->globs[i]);
	for (i = 0; i < f->nres; i++)
		regfree(&f->res[i]);
	free(f->globs);
	free(f->res);
	free(f);
}

int filtered_make(struct filtered *out, const struct pcpu_snapshot *s, const struct filter *flt)
{
	size_t fi, si, n = 0;

	memset(out, 0, sizeof *out);
	out->fams = calloc(s->nfamilies ? s->nfamilies : 1, sizeof *out->fams);
	out->forig = calloc(s->nfamilies ? s->nfamilies : 1, sizeof *out->forig);
	out->sorig = calloc(s->nfamilies ? s->nfamilies : 1, sizeof *out->sorig);
	if (!out->fams || !out->forig || !out->sorig)
		return -1;
	for (fi = 0; fi < s->nfamilies; fi++) {
		const struct pcpu_snapshot_family *f = &s->families[fi];
		struct pcpu_snapshot_series *kept;
		size_t k = 0;

		kept = calloc(f->nseries ? f->nseries : 1, sizeof *kept);
		out->sorig[n] = calloc(f->nseries ? f->nseries : 1, sizeof **out->sorig);
		if (!kept || !out->sorig[n]) {
			free(kept);
			return -1;
		}
		for (si = 0; si < f->nseries; si++)
			if (filter_match(flt, f, &f->series[si])) {
				out->sorig[n][k] = si;
				kept[k++] = f->series[si];
			}
		if (k == 0 && !(filter_empty(flt) && f->nseries == 0)) {
			free(kept);
			free(out->sorig[n]);
			out->sorig[n] = NULL;
			continue;
		}
		out->fams[n] = *f;
		out->fams[n].series = kept;
		out->fams[n].nseries = k;
		out->forig[n] = fi;
		n++;
	}
	out->snap.nfamilies = n;
	out->snap.families = out->fams;
	return 0;
}

void filtered_free(struct filtered *out)
{
	size_t i;

	for (i = 0; i < out->snap.nfamilies; i++) {
		free((void *)out->fams[i].series);
		free(out->sorig[i]);
	}
	free(out->fams);
	free(out->forig);
	free(out->sorig);
	memset(out, 0, sizeof *out);
}
