/* SPDX-License-Identifier: MIT */
/*
 * pcpustat helpers: strings, series names, JSON strings, histogram
 * quantiles, and series filters. Numbers are formatted by the library
 * (pcpu_format_double() and friends), so the tool prints exactly what the
 * exposition does, whatever the locale.
 *
 * Why escape label values for the terminal: a segment is another process's
 * data. A label value may hold escape sequences that would reprogram the
 * terminal of whoever runs pcpustat; we show them as \n, \x1b, ... instead.
 */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <pwd.h>
#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pcpustat.h"

static void sb_grow(struct sbuf *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->len + more + 1 <= b->cap)
		return;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		fputs("pcpustat: out of memory\n", stderr);
		exit(1);
	}
	b->p = p;
	b->cap = cap;
}

void sb_putn(struct sbuf *b, const char *s, size_t n)
{
	sb_grow(b, n);
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void sb_puts(struct sbuf *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sb_grow(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sb_free(struct sbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

double scaled(double v, int scale)
{
	return pcpu_stats_scale(v, scale);
}

/* Writes s in double quotes, escaping '"', '\\' and newline with a
 * backslash and other control bytes as \\u00XX for JSON or \\xXX for the
 * terminal; other bytes (UTF-8 included) as they are. */
static void quoted(struct sbuf *b, const char *s, int json)
{
	const unsigned char *p = (const unsigned char *)s;

	sb_puts(b, "\"");
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			sb_printf(b, "\\%c", *p);
		else if (*p == '\n')
			sb_puts(b, "\\n");
		else if (*p < 0x20 || *p == 0x7f)
			sb_printf(b, json ? "\\u%04x" : "\\x%02x", *p);
		else
			sb_putn(b, (const char *)p, 1);
	}
	sb_puts(b, "\"");
}

void family_name(struct sbuf *b, const struct pcpu_snapshot_family *f)
{
	const char *suffix = pcpu_stats_sample_suffix(f->type);

	sb_puts(b, f->name);
	sb_puts(b, suffix ? suffix : "");
}

void series_name(struct sbuf *b, const struct pcpu_snapshot_family *f,
		 const struct pcpu_snapshot_series *s)
{
	unsigned l;

	family_name(b, f);
	if (!f->nlabels)
		return;
	sb_puts(b, "{");
	for (l = 0; l < f->nlabels; l++) {
		sb_printf(b, "%s%s=", l ? "," : "", f->label_names[l]);
		quoted(b, s->label_values[l], 0);
	}
	sb_puts(b, "}");
}

void json_string(struct sbuf *b, const char *s)
{
	quoted(b, s, 1);
}

/* ---- filters ---- */

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
	struct sbuf name = { 0 }, full = { 0 };
	size_t i;
	int m = 0;

	if (filter_empty(f))
		return 1;
	family_name(&name, fam);
	series_name(&full, fam, s);
	for (i = 0; i < f->nglobs && !m; i++)
		m = fnmatch(f->globs[i], name.p, 0) == 0 || fnmatch(f->globs[i], full.p, 0) == 0 ||
		    fnmatch(f->globs[i], fam->name, 0) == 0;
	for (i = 0; i < f->nres && !m; i++)
		m = regexec(&f->res[i], full.p, 0, NULL, 0) == 0;
	sb_free(&name);
	sb_free(&full);
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

int parse_user(const char *s, unsigned *uid)
{
	struct passwd *pw;
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s && !*end && errno == 0 && v < 0xffffffffu) {
		*uid = (unsigned)v;
		return 0;
	}
	pw = getpwnam(s);
	if (!pw)
		return -1;
	*uid = (unsigned)pw->pw_uid;
	return 0;
}

const char *user_name(unsigned uid, char *buf, size_t cap)
{
	struct passwd *pw = getpwuid((uid_t)uid);

	if (pw)
		snprintf(buf, cap, "%s", pw->pw_name);
	else
		snprintf(buf, cap, "%u", uid);
	return buf;
}
