/*
 * libFuzzer target: the exposition writers on snapshots built from the
 * input (names, help, units, labels, values, bucket layouts -- valid or
 * not). Checks, beyond "no crash, no leak":
 *  - a snapshot is written in all three formats or refused in all three,
 *    and a refusal leaves *out untouched;
 *  - text output parses back line by line (HELP/TYPE/UNIT comments and
 *    samples); the label values and sample names it contains are exactly
 *    the snapshot's (escaping round-trips); OpenMetrics ends in "# EOF";
 *  - JSON output is well-formed (a small recursive-descent checker).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"

#define REQUIRE(c)                                                                   \
	do {                                                                         \
		if (!(c)) {                                                          \
			fprintf(stderr, "fuzz_expose: %s failed at line %d\n", #c, __LINE__); \
			abort();                                                     \
		}                                                                    \
	} while (0)

struct input {
	const uint8_t *p;
	size_t n;
};

static unsigned take_u8(struct input *in)
{
	unsigned v = 0;

	if (in->n) {
		v = *in->p++;
		in->n--;
	}
	return v;
}

static uint64_t take_u64(struct input *in)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = (v << 8) | take_u8(in);
	return v;
}

/* A string: length byte, then that many bytes (NULs become 'x'). Strings
 * are kept in a pool freed at the end. */
static char *pool[512];
static int npool;

static const char *take_str(struct input *in)
{
	unsigned len = take_u8(in) % 48, i;
	char *s;

	if (npool == 512)
		return "x";
	s = malloc(len + 1);
	if (!s)
		return "x";
	for (i = 0; i < len; i++) {
		unsigned c = take_u8(in);
		s[i] = c ? (char)c : 'x';
	}
	s[len] = '\0';
	pool[npool++] = s;
	return s;
}

/* A name: mostly valid (picked from a small alphabet so that clashes and
 * duplicates happen), sometimes raw bytes. */
static const char *take_name(struct input *in)
{
	static const char *const names[] = { "a", "b", "a_total", "a_bucket", "a_count", "a_sum",
					      "a_created", "x_seconds", "le", "__x", "9", "c:d" };
	unsigned k = take_u8(in);

	if (k < 200)
		return names[k % (sizeof names / sizeof names[0])];
	return take_str(in);
}

/* Unescapes a text-format label value starting after the opening quote;
 * returns the position after the closing quote, or NULL. */
static const char *unescape(const char *p, const char *end, char *out, size_t cap)
{
	size_t k = 0;

	while (p < end && *p != '"') {
		char c = *p++;

		if (c == '\n')
			return NULL; /* a raw newline inside a value */
		if (c == '\\') {
			if (p >= end)
				return NULL;
			c = *p++;
			if (c == 'n')
				c = '\n';
			else if (c != '\\' && c != '"')
				return NULL;
		}
		if (k + 1 >= cap)
			return NULL;
		out[k++] = c;
	}
	if (p >= end)
		return NULL;
	out[k] = '\0';
	return p + 1;
}

/* Checks every line of a text exposition; counts the sample lines and
 * checks their label values are among the snapshot's (or the le label). */
static size_t check_text(const char *buf, size_t len, const struct pcpu_snapshot *s, int om)
{
	const char *p = buf, *end = buf + len;
	size_t samples = 0;
	static char val[PCPU_STATS_LABEL_VALUE_MAX * 2 + 8];

	REQUIRE(len > 0 ? buf[len - 1] == '\n' : !om);
	if (om)
		REQUIRE(len >= 6 && memcmp(end - 6, "# EOF\n", 6) == 0);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		REQUIRE(nl);
		REQUIRE(nl > p); /* no blank lines */
		if (*p == '#') {
			REQUIRE(!strncmp(p, "# HELP ", 7) || !strncmp(p, "# TYPE ", 7) ||
				!strncmp(p, "# UNIT ", 7) || (om && nl - p == 5 && !strncmp(p, "# EOF", 5)));
		} else {
			const char *q = p;

			while (q < nl && *q != '{' && *q != ' ')
				q++;
			REQUIRE(q > p && q < nl);
			if (*q == '{') {
				q++;
				for (;;) {
					const char *eq = q;
					size_t f, l, j;
					int found;

					while (eq < nl && *eq != '=')
						eq++;
					REQUIRE(eq < nl && eq[1] == '"');
					q = unescape(eq + 2, nl, val, sizeof val);
					REQUIRE(q);
					found = (eq - p >= 2 && !strncmp(eq - 2, "le", 2));
					for (f = 0; f < s->nfamilies && !found; f++)
						for (j = 0; j < s->families[f].nseries && !found; j++)
							for (l = 0; l < s->families[f].nlabels; l++)
								if (!strcmp(s->families[f].series[j].label_values[l], val))
									found = 1;
					REQUIRE(found);
					if (*q == ',') {
						q++;
						continue;
					}
					REQUIRE(*q == '}');
					q++;
					break;
				}
			}
			REQUIRE(*q == ' ' && q + 1 < nl);
			samples++;
		}
		p = nl + 1;
	}
	return samples;
}

/* ---- a tiny JSON checker ---- */

static const char *json_value(const char *p, const char *end, int depth);

static const char *ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

static const char *json_string(const char *p, const char *end)
{
	if (p >= end || *p != '"')
		return NULL;
	for (p++; p < end && *p != '"'; p++) {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (p >= end)
				return NULL;
			if (*p == 'u') {
				int i;
				for (i = 0; i < 4; i++)
					if (++p >= end || !strchr("0123456789abcdefABCDEF", *p))
						return NULL;
			} else if (!strchr("\"\\/bfnrt", *p)) {
				return NULL;
			}
		}
	}
	return p < end ? p + 1 : NULL;
}

static const char *json_number(const char *p, const char *end)
{
	const char *q = p;

	if (q < end && *q == '-')
		q++;
	if (q >= end || *q < '0' || *q > '9')
		return NULL;
	if (*q == '0')
		q++;
	else
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	if (q < end && *q == '.') {
		q++;
		if (q >= end || *q < '0' || *q > '9')
			return NULL;
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < end && (*q == '+' || *q == '-'))
			q++;
		if (q >= end || *q < '0' || *q > '9')
			return NULL;
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	return q;
}

static const char *json_value(const char *p, const char *end, int depth)
{
	p = ws(p, end);
	if (p >= end || depth > 16)
		return NULL;
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		int obj = *p == '{';

		p = ws(p + 1, end);
		if (p < end && *p == close)
			return p + 1;
		for (;;) {
			if (obj) {
				p = json_string(ws(p, end), end);
				if (!p)
					return NULL;
				p = ws(p, end);
				if (p >= end || *p != ':')
					return NULL;
				p++;
			}
			p = json_value(p, end, depth + 1);
			if (!p)
				return NULL;
			p = ws(p, end);
			if (p < end && *p == ',') {
				p++;
				continue;
			}
			if (p < end && *p == close)
				return p + 1;
			return NULL;
		}
	}
	if (*p == '"')
		return json_string(p, end);
	return json_number(p, end);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct pcpu_snapshot_family fam[3];
	struct pcpu_snapshot_series ser[3][3];
	const char *labels[3][3][3], *lnames[3][3];
	uint64_t counts[3][3][6];
	int64_t upper[3][5];
	uint32_t exported[3][5];
	struct pcpu_snapshot s;
	size_t nsamples[4] = { 0 };
	int ok[4], fmt, f, j, l;

	memset(fam, 0, sizeof fam);
	memset(ser, 0, sizeof ser);
	s.nfamilies = take_u8(&in) % 4;
	s.families = fam;
	for (f = 0; f < (int)s.nfamilies; f++) {
		struct pcpu_snapshot_family *F = &fam[f];
		unsigned k = take_u8(&in);

		F->name = take_name(&in);
		F->type = (enum pcpu_metric_type)(k % 4); /* 0: invalid */
		F->help = (k & 4) ? take_str(&in) : NULL;
		F->unit = (k & 8) ? ((k & 16) ? "seconds" : take_str(&in)) : NULL;
		F->scale_exp10 = (int)(take_u8(&in) % 50) - 25;
		if (k & 32) {
			/* An export list, valid or not (unordered, out of range). */
			F->nexport = take_u8(&in) % 6;
			for (j = 0; j < (int)F->nexport; j++)
				exported[f][j] = take_u8(&in) % 7;
			F->export_buckets = exported[f];
		}
		F->nlabels = take_u8(&in) % 4;
		for (l = 0; l < (int)F->nlabels; l++)
			lnames[f][l] = take_name(&in);
		F->label_names = lnames[f];
		F->nbuckets = 1 + take_u8(&in) % 6;
		for (j = 0; j + 1 < (int)F->nbuckets; j++)
			upper[f][j] = (int64_t)take_u64(&in) >> (take_u8(&in) % 64);
		F->bucket_upper = upper[f];
		F->nseries = take_u8(&in) % 4;
		F->series = ser[f];
		for (j = 0; j < (int)F->nseries; j++) {
			for (l = 0; l < (int)F->nlabels; l++)
				labels[f][j][l] = take_str(&in);
			ser[f][j].label_values = labels[f][j];
			if (F->type == PCPU_METRIC_HISTOGRAM) {
				int b;
				for (b = 0; b < 6; b++)
					counts[f][j][b] = take_u64(&in) >> (take_u8(&in) % 65 == 64 ? 0 : 8);
				ser[f][j].value.histogram.counts = counts[f][j];
				ser[f][j].value.histogram.sum = (int64_t)take_u64(&in);
			} else {
				ser[f][j].value.counter = take_u64(&in);
			}
		}
	}

	for (fmt = PCPU_FORMAT_PROMETHEUS; fmt <= PCPU_FORMAT_JSON; fmt++) {
		char *out = (char *)"untouched";
		size_t len = 7;

		ok[fmt] = pcpu_snapshot_write(&s, (enum pcpu_format)fmt, &out, &len) == 0;
		if (!ok[fmt]) {
			REQUIRE(!strcmp(out, "untouched") && len == 7);
			REQUIRE(pcpu_stats_error()[0] != '\0');
			continue;
		}
		REQUIRE(strlen(out) == len);
		if (fmt == PCPU_FORMAT_JSON) {
			const char *e = json_value(out, out + len, 0);
			REQUIRE(e && ws(e, out + len) == out + len);
		} else {
			nsamples[fmt] = check_text(out, len, &s, fmt == PCPU_FORMAT_OPENMETRICS);
		}
		free(out);
	}
	REQUIRE(ok[1] == ok[2] && ok[2] == ok[3]);
	/* OpenMetrics may leave out _sum/_count of histograms, nothing else. */
	if (ok[1])
		REQUIRE(nsamples[2] <= nsamples[1]);
	while (npool)
		free(pool[--npool]);
	return 0;
}
