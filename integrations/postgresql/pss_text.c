/* SPDX-License-Identifier: MIT */
/*
 * pcpu_stat_statements' query texts: a statement's text with its constants
 * replaced by $1, $2... -- what pg_stat_statements shows, so that one
 * entry's text does not carry the first execution's values.
 *
 * The core's query jumbling (compute_query_id) hands post_parse_analyze the
 * locations of the constants it left out of the queryId (JumbleState's
 * clocations), not their lengths: the lengths come from scanning the text
 * again with the core's own lexer, whose token at a constant's location is
 * the constant (a '-' there is a negative number's sign, the number the
 * next token). The lexer ends each token with a NUL in its copy of the text
 * while the token is current, so a token's length is that copy's strlen()
 * from its start. Constants are numbered $1, $2... in the order of their
 * locations, after the highest $n the statement has itself; a location
 * met twice (a constant the jumble recorded twice) is one constant.
 */
#include "pcpu_stat_statements.h"

#include <stdlib.h>
#include <string.h>

#include "common/keywords.h"
#include "mb/pg_wchar.h"
#include "lib/stringinfo.h"
#include "parser/scanner.h"
#include "utils/queryjumble.h"

static int by_location(const void *a, const void *b)
{
	int x = ((const LocationLen *)a)->location, y = ((const LocationLen *)b)->location;

	return (x > y) - (x < y);
}

/* Sets locs[k].length (sorted by location) for each constant whose
 * location starts a token of `source`; the others, duplicates included,
 * keep -1. */
static void constant_lengths(const char *source, LocationLen *locs, int n)
{
	core_yy_extra_type extra;
	core_YYSTYPE val;
	YYLTYPE at;
	core_yyscan_t scanner;
	int k = 0, tok;

	scanner = scanner_init(source, &extra, &ScanKeywords, ScanKeywordTokens);
	/* The statement was scanned once already: no warnings twice. */
	extra.escape_string_warning = false;
	while (k < n && (tok = core_yylex(&val, &at, scanner)) != 0) {
		int start = at;

		while (k < n && locs[k].location < start)
			k++; /* not at a token's start: left as it is */
		if (k == n || locs[k].location != start)
			continue;
		if (tok == '-' && core_yylex(&val, &at, scanner) == 0)
			break; /* a sign, and the text ends */
		/* From the constant's start to the NUL that ends the current
		 * token (the number's, after a sign). */
		locs[k].length = (int)(at - start) + (int)strlen(extra.scanbuf + at);
		k++;
	}
	scanner_finish(scanner);
}

char *pss_normalize(const char *source, int location, int len, const JumbleState *js,
		    int *out_len)
{
	const char *stmt = CleanQuerytext(source, &location, &len);
	int n = js->clocations_count, k, pos = location, end;
	int param = js->highest_extern_param_id; /* the statement's own $n come first */
	LocationLen *locs;
	StringInfoData out;

	(void)stmt;
	locs = palloc(n * sizeof(LocationLen));
	memcpy(locs, js->clocations, n * sizeof(LocationLen));
	for (k = 0; k < n; k++)
		locs[k].length = -1;
	qsort(locs, n, sizeof(LocationLen), by_location);
	constant_lengths(source, locs, n);

	initStringInfo(&out);
	end = location + len;
	for (k = 0; k < n; k++) {
		int at = locs[k].location;

		if (locs[k].length < 0 || at < pos || at + locs[k].length > end)
			continue;
		appendBinaryStringInfo(&out, source + pos, at - pos);
		appendStringInfo(&out, "$%d", ++param);
		pos = at + locs[k].length;
	}
	if (pos < end)
		appendBinaryStringInfo(&out, source + pos, end - pos);
	pfree(locs);
	*out_len = out.len;
	return out.data;
}

/* A label value from a statement's text: at most PCPU_STATS_LABEL_VALUE_MAX - 1
 * bytes of UTF-8 (invalid sequences become '?'), palloc'd. */
char *pss_text_label(const char *src, int len)
{
	char *conv = (char *)src, *out;
	int i = 0, o = 0, n;

	if (GetDatabaseEncoding() != PG_UTF8 && GetDatabaseEncoding() != PG_SQL_ASCII)
		conv = pg_server_to_any(src, len, PG_UTF8);
	if (conv != src)
		len = strlen(conv);
	out = palloc(Min(len, PCPU_STATS_LABEL_VALUE_MAX - 1) + 1);
	while (i < len) {
		n = pg_utf_mblen((const unsigned char *)conv + i);
		if (n > len - i || !pg_utf8_islegal((const unsigned char *)conv + i, n)) {
			n = 1;
			if (o + 1 > PCPU_STATS_LABEL_VALUE_MAX - 1)
				break;
			out[o++] = '?';
		} else {
			if (o + n > PCPU_STATS_LABEL_VALUE_MAX - 1)
				break;
			memcpy(out + o, conv + i, n);
			o += n;
		}
		i += n;
	}
	out[o] = '\0';
	return out;
}
