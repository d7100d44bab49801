/* SPDX-License-Identifier: MIT */
/*
 * The OpenTelemetry exporter environment, as the OTLP exporter and SDK
 * specifications name it, read once at start for `pcpustat push --otlp`:
 *
 *   OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL  http/protobuf (the default) or
 *                                        grpc; http/json is refused (not
 *                                        implemented)
 *   OTEL_EXPORTER_OTLP_METRICS_ENDPOINT  the metrics URL, used as it is
 *   OTEL_EXPORTER_OTLP_ENDPOINT          a base URL: <base>/v1/metrics over
 *                                        HTTP (a query kept after the
 *                                        path); over gRPC used as it is
 *   OTEL_EXPORTER_OTLP_[METRICS_]HEADERS  key=value,... (values
 *                                        percent-encoded): HTTP headers
 *   OTEL_EXPORTER_OTLP_[METRICS_]TIMEOUT  milliseconds per request
 *   OTEL_EXPORTER_OTLP_[METRICS_]CERTIFICATE  CA file for https://
 *   OTEL_EXPORTER_OTLP_[METRICS_]COMPRESSION  gzip or none
 *   OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE  cumulative, delta
 *                                        or lowmemory (any case; no
 *                                        generic variable exists)
 *   OTEL_METRIC_EXPORT_INTERVAL          milliseconds between two pushes
 *                                        (the SDK's periodic reader)
 *   OTEL_RESOURCE_ATTRIBUTES             key=value,... resource attributes
 *   OTEL_SERVICE_NAME                    service.name (over the one in
 *                                        OTEL_RESOURCE_ATTRIBUTES)
 *
 * The metrics-specific variable wins over the generic one, as the
 * specification says; push.c then lets the command line win over both
 * (the specification's "programmatic configuration" comes first). Values
 * are checked here: a malformed one is an error at start, never ignored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "push.h"

/* The metrics variable if set and not empty, else the generic one; *which
 * names the one used. */
static const char *pick(const char *metrics, const char *generic, const char **which)
{
	const char *v = getenv(metrics);

	if (v && *v) {
		*which = metrics;
		return v;
	}
	v = getenv(generic);
	*which = generic;
	return v && *v ? v : NULL;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
					 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decodes s in place and trims blanks around it: 0, or -1 for a
 * bad escape or a control character (a header must not carry one). */
static int decode(char *s)
{
	char *r = s, *w = s, *end;

	while (*r == ' ' || *r == '\t')
		r++;
	for (; *r; r++) {
		if (*r == '%') {
			int hi = hexval(r[1]), lo = hi < 0 ? -1 : hexval(r[2]);

			if (lo < 0)
				return -1;
			*w++ = (char)(hi * 16 + lo);
			r += 2;
		} else {
			*w++ = *r;
		}
	}
	*w = 0;
	for (end = w; end > s && (end[-1] == ' ' || end[-1] == '\t'); end--)
		end[-1] = 0;
	for (r = s; *r; r++)
		if ((unsigned char)*r < 0x20 || *r == 0x7f)
			return -1;
	return 0;
}

/* Splits a key=value,... list (a copy the caller frees) into pairs; fn is
 * called with each decoded pair. 0, or -1 with err set. */
static int pairs(const char *var, const char *list, char **copy,
		 int (*fn)(struct otel_env *, const char *, const char *), struct otel_env *e)
{
	char *s, *item, *save = NULL;

	*copy = s = strdup(list);
	if (!s) {
		snprintf(e->err, sizeof e->err, "out of memory");
		return -1;
	}
	for (item = strtok_r(s, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq) {
			snprintf(e->err, sizeof e->err, "%s: \"%.60s\" is not key=value", var, item);
			return -1;
		}
		*eq = 0;
		if (decode(item) < 0 || decode(eq + 1) < 0 || !*item) {
			snprintf(e->err, sizeof e->err, "%s: a bad key or value (percent-encoding, control "
				 "character, empty key)", var);
			return -1;
		}
		if (fn(e, item, eq + 1) < 0)
			return -1;
	}
	return 0;
}

static int add_header(struct otel_env *e, const char *k, const char *v)
{
	char **h;
	size_t i;

	for (i = 0; k[i]; i++) /* an HTTP token */
		if (!strchr("!#$%&'*+-.^_`|~", k[i]) && !(k[i] >= '0' && k[i] <= '9') &&
		    !((k[i] | 0x20) >= 'a' && (k[i] | 0x20) <= 'z')) {
			snprintf(e->err, sizeof e->err, "%s: \"%.60s\" is not a header name", e->headers_var, k);
			return -1;
		}
	h = realloc(e->headers, (e->nheaders + 1) * sizeof *h);
	if (!h) {
		snprintf(e->err, sizeof e->err, "out of memory");
		return -1;
	}
	e->headers = h;
	if (asprintf(&h[e->nheaders], "%s: %s", k, v) < 0) {
		snprintf(e->err, sizeof e->err, "out of memory");
		return -1;
	}
	e->nheaders++;
	return 0;
}

static int add_attr(struct otel_env *e, const char *k, const char *v)
{
	struct push_label *a = realloc(e->attrs, (e->nattrs + 1) * sizeof *a);

	if (!a) {
		snprintf(e->err, sizeof e->err, "out of memory");
		return -1;
	}
	e->attrs = a;
	a[e->nattrs].name = k;
	a[e->nattrs].value = v;
	e->nattrs++;
	return 0;
}

int otel_env_read(struct otel_env *e)
{
	const char *which, *v;
	char *end;

	memset(e, 0, sizeof *e);
	if ((v = pick("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL", &which))) {
		if (strcmp(v, "grpc") == 0) {
			e->grpc = 1;
		} else if (strcmp(v, "http/protobuf") != 0) {
			snprintf(e->err, sizeof e->err, "%s: \"%.40s\" is not grpc or http/protobuf%s", which, v,
				 strcmp(v, "http/json") == 0 ? " (http/json is not implemented)" : "");
			return -1;
		}
		e->protocol_var = which;
	}
	if ((v = getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")) && *v) {
		e->endpoint = e->endpoint_own = strdup(v);
	} else if ((v = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) && *v && e->grpc) {
		/* gRPC has no per-signal path: the base is the endpoint. */
		e->endpoint = e->endpoint_own = strdup(v);
	} else if ((v = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) && *v) {
		/* The base URL's path plus the signal's, one slash between; a
		 * query (or fragment) stays after the whole path:
		 * http://h/otlp?x=1 posts to /otlp/v1/metrics?x=1. */
		size_t n = strcspn(v, "?#"), p = n && v[n - 1] == '/' ? n - 1 : n;

		if (asprintf(&e->endpoint_own, "%.*s/v1/metrics%s", (int)p, v, v + n) < 0)
			e->endpoint_own = NULL;
		e->endpoint = e->endpoint_own;
	}
	if (v && *v && !e->endpoint) {
		snprintf(e->err, sizeof e->err, "out of memory");
		return -1;
	}
	if ((v = pick("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT", &which))) {
		double ms = strtod(v, &end);

		if (*end || end == v || !(ms >= 10 && ms <= 3600000)) {
			snprintf(e->err, sizeof e->err, "%s: \"%.40s\" is not milliseconds in [10, 3600000]", which, v);
			return -1;
		}
		e->timeout = ms / 1000;
	}
	if ((v = getenv("OTEL_METRIC_EXPORT_INTERVAL")) && *v) {
		double ms = strtod(v, &end);

		/* --interval's range, in milliseconds */
		if (*end || end == v || !(ms >= 10 && ms <= 86400000)) {
			snprintf(e->err, sizeof e->err, "OTEL_METRIC_EXPORT_INTERVAL: \"%.40s\" is not milliseconds "
				 "in [10, 86400000]", v);
			return -1;
		}
		e->interval = ms / 1000;
	}
	e->certificate = pick("OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE",
			      &e->certificate_var);
	e->compression = pick("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION",
			      &e->compression_var);
	if ((v = getenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE")) && *v)
		e->temporality = v; /* checked by push.c, as the option is */
	if ((v = pick("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS", &which))) {
		e->headers_var = which;
		if (pairs(which, v, &e->headers_copy, add_header, e) < 0)
			return -1;
	}
	if ((v = getenv("OTEL_RESOURCE_ATTRIBUTES")) && *v &&
	    pairs("OTEL_RESOURCE_ATTRIBUTES", v, &e->attrs_copy, add_attr, e) < 0)
		return -1;
	if ((v = getenv("OTEL_SERVICE_NAME")) && *v)
		e->service_name = v;
	return 0;
}

void otel_env_free(struct otel_env *e)
{
	size_t i;

	for (i = 0; i < e->nheaders; i++)
		free(e->headers[i]);
	free(e->headers);
	free(e->attrs);
	free(e->headers_copy);
	free(e->attrs_copy);
	free(e->endpoint_own);
}
