/* SPDX-License-Identifier: MIT */
/*
 * OTLP/gRPC's wire rules for `pcpustat push --otlp-grpc` (issue 42): the
 * parts of gRPC over HTTP/2 that are not HTTP/2 itself. HTTP/2 (framing,
 * HPACK, streams, trailers) is libcurl's, on nghttp2; what is left is
 * gRPC's own, as its PROTOCOL-HTTP2 document describes it:
 *
 *   - a request is a POST to /<package>.<Service>/<Method> with
 *     content-type application/grpc and te: trailers; its body is one
 *     length-prefixed message: a flag byte (1: the message is compressed
 *     with the grpc-encoding named in the headers), a 4-byte big-endian
 *     length, then the protobuf message;
 *   - the answer is HTTP 200 with one such message, then trailers carrying
 *     grpc-status (a decimal code, 0 OK) and grpc-message (percent-encoded
 *     text); an immediate error may come "trailers-only", grpc-status in
 *     the headers; a non-200 HTTP status (a proxy's) maps to a code.
 *
 * What a code means for the exporter is OTLP's: its specification lists
 * the retryable codes (CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE,
 * UNAVAILABLE, DATA_LOSS, and RESOURCE_EXHAUSTED only when the server sent
 * RetryInfo, in grpc-status-details-bin); any other failure is permanent.
 * RetryInfo's delay itself is not decoded: such a retry waits the agent's
 * backoff.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "push.h"

static const char *const code_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

const char *grpc_code_name(int code)
{
	return code >= 0 && code < (int)(sizeof code_names / sizeof code_names[0]) ? code_names[code] : "?";
}

void grpc_frame(uint8_t prefix[5], size_t len, int compressed)
{
	prefix[0] = compressed ? 1 : 0;
	prefix[1] = (uint8_t)(len >> 24);
	prefix[2] = (uint8_t)(len >> 16);
	prefix[3] = (uint8_t)(len >> 8);
	prefix[4] = (uint8_t)len;
}

int grpc_unframe(const uint8_t *p, size_t n, const uint8_t **msg, size_t *len)
{
	size_t l;

	if (n < 5 || p[0] != 0) /* we ask for no compression of answers */
		return -1;
	l = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
	if (l > n - 5)
		return -1; /* more than the kept start of the answer */
	*msg = p + 5;
	*len = l;
	return 0;
}

/* %XX escapes of grpc-message decoded in place; anything else kept. */
static void percent_decode(char *s)
{
	char *w = s;

	for (; *s; s++) {
		unsigned v;

		if (s[0] == '%' && s[1] && s[2] && sscanf(s + 1, "%2x", &v) == 1 &&
		    strchr("0123456789abcdefABCDEF", s[1]) && strchr("0123456789abcdefABCDEF", s[2])) {
			*w++ = (char)v;
			s += 2;
		} else {
			*w++ = *s;
		}
	}
	*w = 0;
}

void grpc_header(struct grpc_status *g, const char *line, size_t len)
{
	static const char status[] = "grpc-status:", message[] = "grpc-message:",
			  details[] = "grpc-status-details-bin:";
	size_t n;

	if (len >= sizeof status - 1 && strncasecmp(line, status, sizeof status - 1) == 0) {
		char num[16];

		n = len - (sizeof status - 1);
		if (n >= sizeof num)
			n = sizeof num - 1;
		memcpy(num, line + sizeof status - 1, n);
		num[n] = 0;
		g->code = atoi(num);
		g->seen = 1;
	} else if (len >= sizeof message - 1 && strncasecmp(line, message, sizeof message - 1) == 0) {
		const char *v = line + sizeof message - 1;

		n = len - (sizeof message - 1);
		while (n && (*v == ' ' || *v == '\t'))
			v++, n--;
		while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
			n--;
		if (n >= sizeof g->message)
			n = sizeof g->message - 1;
		memcpy(g->message, v, n);
		g->message[n] = 0;
		percent_decode(g->message);
	} else if (len >= sizeof details - 1 && strncasecmp(line, details, sizeof details - 1) == 0) {
		g->details = 1;
	}
}

int grpc_from_http(long status)
{
	/* gRPC's "HTTP to gRPC status code mapping", for answers that never
	 * reached a gRPC server (a proxy's, a load balancer's). */
	switch (status) {
	case 400: return 13; /* INTERNAL */
	case 401: return 16; /* UNAUTHENTICATED */
	case 403: return 7;  /* PERMISSION_DENIED */
	case 404: return 12; /* UNIMPLEMENTED */
	case 429: case 502: case 503: case 504: return 14; /* UNAVAILABLE */
	default: return 2;   /* UNKNOWN */
	}
}

enum push_outcome grpc_outcome(const struct grpc_status *g)
{
	switch (g->code) {
	case 0:
		return PUSH_SENT;
	case 1: case 4: case 10: case 11: case 14: case 15: /* OTLP's retryable codes */
		return PUSH_RETRY;
	case 8: /* RESOURCE_EXHAUSTED: only when the server says when (RetryInfo) */
		return g->details ? PUSH_RETRY : PUSH_DROP;
	case 7: case 16:
		return PUSH_DENIED;
	default:
		return PUSH_DROP;
	}
}
