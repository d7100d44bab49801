/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat push`'s HTTP(S) client, on libcurl (Debian
 * libcurl4-openssl-dev): the de facto C HTTP client, with TLS and a CA
 * file, basic and bearer authentication, timeouts and keep-alive, which a
 * hand-written client would get wrong. One handle, reused, so that a
 * connection (and its TLS session) lasts from push to push.
 *
 * Headers: remote write sends Content-Encoding: snappy, Content-Type:
 * application/x-protobuf and X-Prometheus-Remote-Write-Version: 0.1.0, as
 * its 1.0 specification asks; OTLP sends Content-Type:
 * application/x-protobuf. The password and token files are read at every
 * push, as Prometheus reads its own, so that they can be rotated without a
 * restart; a file that cannot be read makes the push fail and retry.
 *
 * What a response means, as each protocol's specification says: 2xx sent;
 * a connection that failed, timed out or was closed, and the retryable
 * statuses -- remote write: 429 and every 5xx; OTLP/HTTP: 429, 502, 503
 * and 504 only -- are the receiver's trouble: retry later, after the
 * answer's Retry-After when it gives one (seconds or an HTTP date, at most
 * PUSH_RETRY_AFTER_MAX); any other status (400, 404, 413, OTLP's 500 and
 * 501...) means this request will never be accepted: retrying it cannot
 * help, it is dropped, and the log says the status and the start of the
 * receiver's answer; 401 and 403 are said to be the credentials refused.
 * An OTLP 2xx may carry a partial_success (data points the receiver
 * rejected): push_otlp.c decodes it for the log. Only the first 4 KiB of
 * an answer are kept, whatever its size. Redirects are not followed.
 *
 * OTLP/gRPC (--otlp-grpc) is the same client on HTTP/2 (libcurl with
 * nghttp2: prior knowledge for http://, ALPN for https://), with gRPC's
 * framing, headers and status trailers from push_grpc.c.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "push.h"

#define ANSWER_KEPT 4096

struct push_http {
	const struct push_http_config *cfg;
	CURL *c;
	struct curl_slist *hdrs;
	char errbuf[CURL_ERROR_SIZE];
	char answer[ANSWER_KEPT + 1];
	size_t nanswer;
	char *url;                /* gRPC: the base URL and the method's path */
	uint8_t *framed;          /* gRPC: the request with its 5-byte prefix */
	size_t framed_cap;
	struct grpc_status grpc;  /* gRPC: what the answer's trailers said */
};

/* The receiver's answer: its start kept, the rest read and forgotten. */
static size_t on_answer(char *p, size_t size, size_t n, void *cls)
{
	struct push_http *h = cls;
	size_t len = size * n, room = ANSWER_KEPT - h->nanswer;

	if (room) {
		memcpy(h->answer + h->nanswer, p, len < room ? len : room);
		h->nanswer += len < room ? len : room;
	}
	return len;
}

/* A header or trailer line of the answer: gRPC's status is in them. */
static size_t on_header(char *p, size_t size, size_t n, void *cls)
{
	struct push_http *h = cls;

	grpc_header(&h->grpc, p, size * n);
	return size * n;
}

/* A secret file's first line, without the newline: 0, or -1 (why says). */
static int read_secret(const char *file, char *out, size_t cap, char *why, size_t whycap)
{
	FILE *f = fopen(file, "r");
	size_t n;

	if (!f) {
		snprintf(why, whycap, "cannot read %s: %s", file, strerror(errno));
		return -1;
	}
	n = fread(out, 1, cap - 1, f);
	fclose(f);
	out[n] = 0;
	out[strcspn(out, "\r\n")] = 0;
	if (!out[0]) {
		snprintf(why, whycap, "%s is empty", file);
		return -1;
	}
	return 0;
}

int push_secret_check(const char *file, char *why, size_t cap)
{
	char secret[4096];
	int rc = read_secret(file, secret, sizeof secret, why, cap);

	explicit_bzero(secret, sizeof secret);
	return rc;
}

int push_ca_check(const char *file, char *why, size_t cap)
{
	/* What libcurl (OpenSSL) reads from CURLOPT_CAINFO: a PEM file of
	 * certificates. Not parsed here: its first 1 MiB must hold one. */
	static const char pem[] = "-----BEGIN CERTIFICATE-----";
	char *buf = malloc(1 << 20);
	FILE *f = fopen(file, "r");
	size_t n;
	int rc = -1;

	if (!f || !buf) {
		snprintf(why, cap, "cannot read %s: %s", file, strerror(f ? ENOMEM : errno));
	} else {
		n = fread(buf, 1, (1 << 20) - 1, f);
		if (ferror(f)) {
			snprintf(why, cap, "cannot read %s: %s", file, strerror(errno));
		} else {
			buf[n] = 0;
			if (!memmem(buf, n, pem, sizeof pem - 1))
				snprintf(why, cap, "%s holds no PEM certificate (%s)", file, pem);
			else
				rc = 0;
		}
	}
	if (f)
		fclose(f);
	free(buf);
	return rc;
}

struct push_http *push_http_new(const struct push_http_config *cfg, char *err, size_t cap)
{
	struct push_http *h = calloc(1, sizeof *h);
	char ua[64];

	if (!h || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, cap, "cannot start libcurl");
		free(h);
		return NULL;
	}
	if (!(h->c = curl_easy_init())) {
		snprintf(err, cap, "cannot start libcurl");
		curl_global_cleanup();
		free(h);
		return NULL;
	}
	h->cfg = cfg;
	if (cfg->grpc) {
		/* gRPC: the base URL plus the method (one slash between); the
		 * message's compression is gRPC's own header, not HTTP's. */
		size_t n = strlen(cfg->url);

		if (asprintf(&h->url, "%.*s%s", (int)(n && cfg->url[n - 1] == '/' ? n - 1 : n), cfg->url,
			     GRPC_OTLP_METRICS_PATH) < 0) {
			h->url = NULL;
			snprintf(err, cap, "out of memory");
			push_http_free(h);
			return NULL;
		}
		h->hdrs = curl_slist_append(h->hdrs, "Content-Type: application/grpc");
		h->hdrs = curl_slist_append(h->hdrs, "TE: trailers");
		if (cfg->gzip)
			h->hdrs = curl_slist_append(h->hdrs, "grpc-encoding: gzip");
	} else {
		h->hdrs = curl_slist_append(h->hdrs, "Content-Type: application/x-protobuf");
	}
	if (cfg->proto == PUSH_REMOTE_WRITE) {
		h->hdrs = curl_slist_append(h->hdrs, "Content-Encoding: snappy");
		h->hdrs = curl_slist_append(h->hdrs, "X-Prometheus-Remote-Write-Version: 0.1.0");
	}
	if (cfg->gzip && !cfg->grpc)
		h->hdrs = curl_slist_append(h->hdrs, "Content-Encoding: gzip");
	for (size_t i = 0; i < cfg->nheaders && h->hdrs; i++) /* OTEL_EXPORTER_OTLP_HEADERS */
		h->hdrs = curl_slist_append(h->hdrs, cfg->headers[i]);
	h->hdrs = curl_slist_append(h->hdrs, "Expect:"); /* no 100-continue round trip */
	snprintf(ua, sizeof ua, "pcpustat/%s", PCPUSTAT_VERSION);
	if (!h->hdrs || curl_easy_setopt(h->c, CURLOPT_URL, h->url ? h->url : cfg->url) != CURLE_OK ||
	    curl_easy_setopt(h->c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK) {
		snprintf(err, cap, "bad URL %s", cfg->url);
		push_http_free(h);
		return NULL;
	}
	curl_easy_setopt(h->c, CURLOPT_HTTPHEADER, h->hdrs);
	curl_easy_setopt(h->c, CURLOPT_USERAGENT, ua);
	curl_easy_setopt(h->c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h->c, CURLOPT_TIMEOUT_MS, (long)(cfg->timeout * 1000));
	curl_easy_setopt(h->c, CURLOPT_CONNECTTIMEOUT_MS, (long)(cfg->timeout * 1000));
	curl_easy_setopt(h->c, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(h->c, CURLOPT_WRITEFUNCTION, on_answer);
	curl_easy_setopt(h->c, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(h->c, CURLOPT_POST, 1L);
	if (cfg->ca_file)
		curl_easy_setopt(h->c, CURLOPT_CAINFO, cfg->ca_file);
	if (cfg->grpc) {
		/* HTTP/2 or nothing: cleartext with prior knowledge (what an
		 * OTLP/gRPC receiver on http:// speaks), TLS by ALPN. */
		long v = strncasecmp(cfg->url, "https:", 6) == 0 ? CURL_HTTP_VERSION_2TLS
								 : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;

		if (curl_easy_setopt(h->c, CURLOPT_HTTP_VERSION, v) != CURLE_OK) {
			snprintf(err, cap, "this libcurl has no HTTP/2, which OTLP/gRPC needs");
			push_http_free(h);
			return NULL;
		}
		curl_easy_setopt(h->c, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(h->c, CURLOPT_HEADERDATA, h);
		/* A connection per request: Debian 12's libcurl (7.88.1) fails
		 * the second stream of a reused cleartext HTTP/2 connection to a
		 * gRPC server ("Error in the HTTP2 framing layer", curl's own
		 * command line too). One handshake per push interval costs
		 * nothing next to a collection; push_otlp_grpc pushes several
		 * times in one agent, so a reuse that breaks again fails it. */
		curl_easy_setopt(h->c, CURLOPT_FORBID_REUSE, 1L);
	}
	if (cfg->verbose)
		curl_easy_setopt(h->c, CURLOPT_VERBOSE, 1L);
	return h;
}

/* Basic or bearer authentication from its file, for this request. */
static int set_auth(struct push_http *h, char *why, size_t cap)
{
	const struct push_http_config *cfg = h->cfg;
	char secret[4096];

	if (cfg->basic_user) {
		if (read_secret(cfg->basic_password_file, secret, sizeof secret, why, cap) < 0)
			return -1;
		curl_easy_setopt(h->c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h->c, CURLOPT_USERNAME, cfg->basic_user);
		curl_easy_setopt(h->c, CURLOPT_PASSWORD, secret);
	} else if (cfg->bearer_token_file) {
		if (read_secret(cfg->bearer_token_file, secret, sizeof secret, why, cap) < 0)
			return -1;
		curl_easy_setopt(h->c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl_easy_setopt(h->c, CURLOPT_XOAUTH2_BEARER, secret);
	}
	explicit_bzero(secret, sizeof secret); /* libcurl keeps its own copy */
	return 0;
}

/* The answer's start, printable, for the log. */
static const char *answer_text(struct push_http *h)
{
	size_t i;

	h->answer[h->nanswer] = 0;
	for (i = 0; i < h->nanswer; i++)
		if ((unsigned char)h->answer[i] < 0x20 || h->answer[i] == 0x7f)
			h->answer[i] = ' ';
	while (h->nanswer && h->answer[h->nanswer - 1] == ' ')
		h->answer[--h->nanswer] = 0;
	return h->answer;
}

/* Whether `status` is one the protocol retries. */
static int retryable(enum push_protocol proto, long status)
{
	if (status == 429)
		return 1;
	if (proto == PUSH_OTLP) /* OTLP/HTTP: "All other 4xx or 5xx ... MUST NOT be retried" */
		return status == 502 || status == 503 || status == 504;
	return status >= 500; /* remote write 1.0: 5xx and 429 */
}

/* The OTLP/gRPC answer: its grpc-status (or the code its HTTP status
 * stands for), and partial_success when it is OK. */
static enum push_outcome grpc_answer(struct push_http *h, long status, char *why, size_t cap,
				     struct push_answer *ans)
{
	struct grpc_status *g = &h->grpc;
	enum push_outcome out;
	const uint8_t *msg;
	size_t mlen;
	long version = 0;

	curl_easy_getinfo(h->c, CURLINFO_HTTP_VERSION, &version);
	if (version != CURL_HTTP_VERSION_2_0) {
		snprintf(why, cap, "the receiver did not speak HTTP/2 (gRPC needs it): HTTP %ld", status);
		return PUSH_DROP;
	}
	if (status != 200 && !g->seen) {
		g->code = grpc_from_http(status);
		snprintf(g->message, sizeof g->message, "HTTP %ld", status);
	} else if (!g->seen) {
		snprintf(why, cap, "gRPC answer without grpc-status");
		return PUSH_DROP;
	}
	out = grpc_outcome(g);
	snprintf(why, cap, "gRPC %s (%d)%s%.300s", grpc_code_name(g->code), g->code, g->message[0] ? ": " : "",
		 g->message);
	if (out == PUSH_SENT && grpc_unframe((const uint8_t *)h->answer, h->nanswer, &msg, &mlen) == 0 && mlen)
		otlp_partial_success(msg, mlen, &ans->rejected, ans->rejected_why, sizeof ans->rejected_why);
	return out;
}

enum push_outcome push_http_post(struct push_http *h, const uint8_t *body, size_t len, char *why, size_t cap,
				 struct push_answer *ans)
{
	long status = 0;
	curl_off_t after = -1;
	CURLcode rc;

	ans->retry_after = -1;
	ans->rejected = 0;
	ans->rejected_why[0] = 0;
	h->nanswer = 0;
	h->errbuf[0] = 0;
	memset(&h->grpc, 0, sizeof h->grpc);
	if (set_auth(h, why, cap) < 0)
		return PUSH_RETRY;
	if (h->cfg->grpc) {
		/* One length-prefixed message (push_grpc.c). */
		if (len > 0xffffffffu) {
			snprintf(why, cap, "a request of %zu bytes is more than gRPC frames", len);
			return PUSH_DROP;
		}
		if (h->framed_cap < len + 5) {
			uint8_t *f = realloc(h->framed, len + 5);

			if (!f) {
				snprintf(why, cap, "out of memory");
				return PUSH_RETRY;
			}
			h->framed = f;
			h->framed_cap = len + 5;
		}
		grpc_frame(h->framed, len, h->cfg->gzip);
		memcpy(h->framed + 5, body, len);
		body = h->framed;
		len += 5;
	}
	curl_easy_setopt(h->c, CURLOPT_POSTFIELDS, (const char *)body);
	curl_easy_setopt(h->c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	rc = curl_easy_perform(h->c);
	if (rc != CURLE_OK) {
		snprintf(why, cap, "%s", h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc));
		return PUSH_RETRY;
	}
	curl_easy_getinfo(h->c, CURLINFO_RESPONSE_CODE, &status);
	if (h->cfg->grpc)
		return grpc_answer(h, status, why, cap, ans);
	if (status >= 200 && status < 300) {
		/* The answer is protobuf here: decoded before answer_text()
		 * makes it printable. */
		if (h->cfg->proto == PUSH_OTLP && h->nanswer)
			otlp_partial_success((const uint8_t *)h->answer, h->nanswer, &ans->rejected,
					     ans->rejected_why, sizeof ans->rejected_why);
		snprintf(why, cap, "HTTP %ld", status);
		return PUSH_SENT;
	}
	snprintf(why, cap, "HTTP %ld%s%.300s", status, h->nanswer ? ": " : "", answer_text(h));
	if (retryable(h->cfg->proto, status)) {
		/* libcurl: 0 when the answer had no Retry-After. */
		if (curl_easy_getinfo(h->c, CURLINFO_RETRY_AFTER, &after) == CURLE_OK && after > 0)
			ans->retry_after = after > PUSH_RETRY_AFTER_MAX ? PUSH_RETRY_AFTER_MAX : (double)after;
		return PUSH_RETRY;
	}
	return status == 401 || status == 403 ? PUSH_DENIED : PUSH_DROP;
}

void push_http_free(struct push_http *h)
{
	if (!h)
		return;
	if (h->c) {
		curl_easy_cleanup(h->c);
		curl_global_cleanup(); /* counted: one per push_http_new() */
	}
	curl_slist_free_all(h->hdrs);
	free(h->url);
	free(h->framed);
	free(h);
}
