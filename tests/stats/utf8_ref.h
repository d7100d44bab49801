/*
 * Reference checks the tests and fuzzers compare pcpu's validators with,
 * written differently on purpose: UTF-8 by decoding code points and testing
 * their ranges (not by table 3-7 byte ranges), names by explicit sets.
 */
#ifndef PCPU_TEST_UTF8_REF_H
#define PCPU_TEST_UTF8_REF_H

#include <stddef.h>
#include <string.h>

/* Length of the valid UTF-8 prefix of s[0..n). */
static inline size_t ref_utf8_prefix(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i], cp, len, k;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			len = 2;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return i;
		}
		if (n - i < len)
			return i;
		for (k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
			return i; /* overlong */
		if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += len;
	}
	return n;
}

static inline int ref_metric_name_ok(const char *s)
{
	static const char first[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:";
	static const char rest[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:0123456789";
	size_t n = strlen(s), i;

	if (n == 0 || n > 200 || !strchr(first, s[0]))
		return 0;
	for (i = 1; i < n; i++)
		if (!strchr(rest, s[i]))
			return 0;
	return 1;
}

static inline int ref_label_name_ok(const char *s)
{
	static const char first[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_";
	static const char rest[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789";
	size_t n = strlen(s), i;

	if (n == 0 || n > 100 || !strchr(first, s[0]) || (s[0] == '_' && s[1] == '_'))
		return 0;
	for (i = 1; i < n; i++)
		if (!strchr(rest, s[i]))
			return 0;
	return 1;
}

#endif
