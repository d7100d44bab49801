/* SPDX-License-Identifier: MIT */
/*
 * HTTP content negotiation for expositions: which format an Accept header
 * asks for, and whether an Accept-Encoding header takes gzip.
 *
 * Why in the library and not in the exporter: every program that serves
 * its own registry from its own HTTP server has to answer Prometheus'
 * Accept header the same way pcpustat does, and a second implementation
 * would drift (the protobuf format is chosen only where this library can
 * write it). One parser, fuzzed (tests/stats/fuzz/fuzz_negotiate.c).
 *
 * Both headers are lists of `token [; name=value]...` separated by commas
 * (RFC 9110 sections 12.5.1 and 12.5.3); a `q` parameter ranks them, 0
 * meaning "not acceptable". Parsing allocates nothing and reads each byte a
 * bounded number of times, so a hostile header costs linear time; anything
 * malformed in one element makes that element count as not acceptable,
 * never the whole header invalid (clients send odd things).
 */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "stats_internal.h"

/* One list element: its token (media range or coding) and parameters. */
struct element {
	const char *tok;
	size_t toklen;
	const char *params; /* from the first ';' to the element's end */
	size_t paramslen;
	int q;              /* 0..1000; -1 if malformed */
};

static int is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* RFC 9110 qvalue: "0" ["." 0*3DIGIT] / "1" ["." 0*3"0"], in thousandths;
 * -1 if malformed. Done by hand: strtod() depends on the locale. */
static int parse_q(const char *s, size_t n)
{
	int v, scale = 100;
	size_t i;

	if (n == 0 || (s[0] != '0' && s[0] != '1'))
		return -1;
	v = (s[0] - '0') * 1000;
	if (n == 1)
		return v;
	if (s[1] != '.' || n > 5)
		return -1;
	for (i = 2; i < n; i++, scale /= 10) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v += (s[i] - '0') * scale;
	}
	return v > 1000 ? -1 : v;
}

/* Scans the element starting at *p (up to a comma outside quotes or the
 * end); leaves *p after its comma. */
static void next_element(const char **p, struct element *e)
{
	const char *s = *p, *end, *semi = NULL;
	int quoted = 0;

	while (is_ows(*s))
		s++;
	for (end = s; *end && (quoted || *end != ','); end++) {
		if (*end == '"')
			quoted = !quoted;
		else if (*end == '\\' && quoted && end[1])
			end++;
		else if (*end == ';' && !quoted && !semi)
			semi = end;
	}
	*p = *end ? end + 1 : end;
	e->tok = s;
	e->toklen = (size_t)((semi ? semi : end) - s);
	while (e->toklen && is_ows(s[e->toklen - 1]))
		e->toklen--;
	e->params = semi ? semi : end;
	e->paramslen = (size_t)(end - e->params);
	e->q = 1000;
}

/* Finds parameter `name` of e (case-insensitive name); returns its value
 * (quotes removed, escapes left) in *v / *vn. 1 if present. */
static int param(const struct element *e, const char *name, const char **v, size_t *vn)
{
	const char *p = e->params, *end = e->params + e->paramslen;
	size_t nl = strlen(name);

	while (p < end) {
		const char *pn, *pe, *eq;
		int quoted = 0;

		p++; /* the ';' */
		pn = p;
		for (pe = p; pe < end && (quoted || *pe != ';'); pe++) {
			if (*pe == '"')
				quoted = !quoted;
			else if (*pe == '\\' && quoted && pe + 1 < end)
				pe++;
		}
		p = pe;
		while (pn < pe && is_ows(*pn))
			pn++;
		eq = memchr(pn, '=', (size_t)(pe - pn));
		if (!eq)
			continue;
		{
			const char *ne = eq, *vs = eq + 1, *ve = pe;

			while (ne > pn && is_ows(ne[-1]))
				ne--;
			if ((size_t)(ne - pn) != nl || strncasecmp(pn, name, nl) != 0)
				continue;
			while (vs < ve && is_ows(*vs))
				vs++;
			while (ve > vs && is_ows(ve[-1]))
				ve--;
			if (ve - vs >= 2 && *vs == '"' && ve[-1] == '"') {
				vs++;
				ve--;
			}
			*v = vs;
			*vn = (size_t)(ve - vs);
			return 1;
		}
	}
	return 0;
}

static int token_is(const struct element *e, const char *t)
{
	return e->toklen == strlen(t) && strncasecmp(e->tok, t, e->toklen) == 0;
}

static int value_is(const char *v, size_t n, const char *want)
{
	return n == strlen(want) && strncmp(v, want, n) == 0;
}

/* Parses the whole element: token, then its q (if any). */
static void element_read(const char **p, struct element *e)
{
	const char *v;
	size_t vn;

	next_element(p, e);
	if (param(e, "q", &v, &vn))
		e->q = parse_q(v, vn);
}

/* Keeps the best q seen for a candidate. */
static void rank(int *best, int q)
{
	if (q > *best)
		*best = q;
}

enum pcpu_format pcpu_format_negotiate_among(const char *accept, unsigned formats)
{
	int q_pb = 0, q_om = 0, q_text = 0;
	const char *p = accept;

	if (!pcpu_format_supported(PCPU_FORMAT_PROTOBUF))
		formats &= ~(1u << PCPU_FORMAT_PROTOBUF);
	if (!accept)
		return PCPU_FORMAT_PROMETHEUS;
	while (*p) {
		struct element e;
		const char *v;
		size_t vn;

		element_read(&p, &e);
		if (e.q <= 0)
			continue;
		if (token_is(&e, "application/vnd.google.protobuf")) {
			/* Only the delimited MetricFamily stream is what we write. */
			if (param(&e, "proto", &v, &vn) && value_is(v, vn, "io.prometheus.client.MetricFamily") &&
			    param(&e, "encoding", &v, &vn) && value_is(v, vn, "delimited"))
				rank(&q_pb, e.q);
		} else if (token_is(&e, "application/openmetrics-text")) {
			if (!param(&e, "version", &v, &vn) || value_is(v, vn, "1.0.0") ||
			    value_is(v, vn, "0.0.1"))
				rank(&q_om, e.q);
		} else if (token_is(&e, "text/plain")) {
			if (!param(&e, "version", &v, &vn) || value_is(v, vn, "0.0.4"))
				rank(&q_text, e.q);
		} else if (token_is(&e, "text/*") || token_is(&e, "*/*")) {
			/* A wildcard takes the default format, never one the
			 * client did not name. */
			rank(&q_text, e.q);
		}
	}
	/* What the caller cannot write is not a candidate. */
	if (!(formats & (1u << PCPU_FORMAT_PROTOBUF)))
		q_pb = 0;
	if (!(formats & (1u << PCPU_FORMAT_OPENMETRICS)))
		q_om = 0;
	/* Highest q wins; ties go to the richer format (what a client that
	 * names it and something else equally most likely wants). */
	if (q_pb > 0 && q_pb >= q_om && q_pb >= q_text)
		return PCPU_FORMAT_PROTOBUF;
	if (q_om > 0 && q_om >= q_text)
		return PCPU_FORMAT_OPENMETRICS;
	return PCPU_FORMAT_PROMETHEUS;
}

enum pcpu_format pcpu_format_negotiate(const char *accept)
{
	return pcpu_format_negotiate_among(accept, (1u << PCPU_FORMAT_PROMETHEUS) |
							   (1u << PCPU_FORMAT_OPENMETRICS) |
							   (1u << PCPU_FORMAT_PROTOBUF));
}

int pcpu_format_gzip_acceptable(const char *accept_encoding)
{
	int q_gzip = -1, q_any = -1;
	const char *p = accept_encoding;

	if (!accept_encoding)
		return 0;
	while (*p) {
		struct element e;

		element_read(&p, &e);
		if (token_is(&e, "gzip") || token_is(&e, "x-gzip"))
			rank(&q_gzip, e.q < 0 ? 0 : e.q);
		else if (token_is(&e, "*"))
			rank(&q_any, e.q < 0 ? 0 : e.q);
	}
	/* An explicit gzip entry decides (gzip;q=0 refuses it even beside
	 * "*"); else a wildcard does. */
	return q_gzip >= 0 ? q_gzip > 0 : q_any > 0;
}
