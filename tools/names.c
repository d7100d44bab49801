/* SPDX-License-Identifier: MIT */
/*
 * How pcpustat writes series names and strings: the exposition name of a
 * family, "name{label="value",...}" with label values made safe for a
 * terminal, and JSON strings. Text is built with stdio into memory
 * (open_memstream), the tool's one growable buffer; numbers are the
 * library's (pcpu_format_double() and friends), so the tool prints exactly
 * what the exposition does, whatever the locale.
 *
 * Why escape label values for the terminal: a segment is another process's
 * data. A label value may hold escape sequences that would reprogram the
 * terminal of whoever runs pcpustat; we show them as \n, \x1b, ... instead.
 */
#include <stdlib.h>
#include <string.h>

#include "pcpustat.h"

FILE *mem_open(char **p, size_t *len)
{
	FILE *f = open_memstream(p, len);

	if (!f) {
		fputs("pcpustat: out of memory\n", stderr);
		exit(1);
	}
	return f;
}

/* Writes s in double quotes, escaping '"', '\\' and newline with a
 * backslash and other control bytes as \\u00XX for JSON or \\xXX for the
 * terminal; other bytes (UTF-8 included) as they are. */
static void quoted(FILE *b, const char *s, int json)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', b);
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(b, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", b);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(b, json ? "\\u%04x" : "\\x%02x", *p);
		else
			fputc(*p, b);
	}
	fputc('"', b);
}

void family_name(FILE *b, const struct pcpu_snapshot_family *f)
{
	const char *suffix = pcpu_stats_sample_suffix(f->type);

	fputs(f->name, b);
	fputs(suffix ? suffix : "", b);
}

void series_name(FILE *b, const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s)
{
	unsigned l;

	family_name(b, f);
	if (!f->nlabels)
		return;
	fputc('{', b);
	for (l = 0; l < f->nlabels; l++) {
		fprintf(b, "%s%s=", l ? "," : "", f->label_names[l]);
		quoted(b, s->label_values[l], 0);
	}
	fputc('}', b);
}

/* The name as a string, for callers that need one. */
static char *as_string(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s)
{
	char *p = NULL;
	size_t len = 0;
	FILE *b = mem_open(&p, &len);

	if (s)
		series_name(b, f, s);
	else
		family_name(b, f);
	if (fclose(b) != 0 || !p) {
		fputs("pcpustat: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

char *series_name_str(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s)
{
	return as_string(f, s);
}

char *family_name_str(const struct pcpu_snapshot_family *f)
{
	return as_string(f, NULL);
}

void json_string(FILE *b, const char *s)
{
	quoted(b, s, 1);
}
