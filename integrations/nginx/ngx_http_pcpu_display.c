/* SPDX-License-Identifier: MIT */
/*
 * `pcpu_stats_display;`: the tree's statistics from nginx itself, in the
 * format the client asks for.
 *
 *   ?format=prometheus|openmetrics|json|html   asked by name, else by Accept:
 *   application/json -> JSON; text/html -> the status page (browsers);
 *   anything else as Prometheus clients negotiate (pcpu_format_negotiate():
 *   OpenMetrics, text 0.0.4, or protobuf where libpcpu has it).
 *   gzip when Accept-Encoding allows it (pcpu_format_gzip_acceptable()).
 *
 * What is shown is the tree's, read from its segment as pcpustat reads it
 * (pcpu_reader_snapshot(): every worker's series, the master's, those of
 * workers gone), not this worker's own view (a process of a shared
 * registry sees only the series it registered). The descriptor is the
 * master's, opened before the workers forked: workers that run as another
 * user (the `user` directive) read a file they could not open.
 */
#include <zlib.h>

#include "ngx_http_pcpu_module.h"
#include "ngx_http_pcpu_html.h" /* ngx_http_pcpu_html[]: status.html, made by `config` */

enum { FORMAT_HTML = 100 };

static ngx_int_t ngx_http_pcpu_display_handler(ngx_http_request_t *r);

char *ngx_http_pcpu_display_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
	ngx_http_pcpu_main_conf_t *pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_pcpu_module);

	clcf->handler = ngx_http_pcpu_display_handler;
	pmcf->used = 1;
	return NGX_CONF_OK;
}

/* The first request header named `name` (NUL-terminated, as nginx keeps
 * them), or NULL. */
static const char *header(ngx_http_request_t *r, const char *name)
{
	ngx_list_part_t *part = &r->headers_in.headers.part;
	ngx_table_elt_t *h = part->elts;
	size_t len = ngx_strlen(name);
	ngx_uint_t i;

	for (i = 0;; i++) {
		if (i >= part->nelts) {
			if (part->next == NULL)
				return NULL;
			part = part->next;
			h = part->elts;
			i = 0;
		}
		if (h[i].key.len == len && ngx_strncasecmp(h[i].key.data, (u_char *)name, len) == 0)
			return (const char *)h[i].value.data;
	}
}

static int format_of(ngx_http_request_t *r)
{
	static const struct {
		ngx_str_t name;
		int format;
	} names[] = {
		{ngx_string("prometheus"), PCPU_FORMAT_PROMETHEUS},
		{ngx_string("openmetrics"), PCPU_FORMAT_OPENMETRICS},
		{ngx_string("json"), PCPU_FORMAT_JSON},
		{ngx_string("protobuf"), PCPU_FORMAT_PROTOBUF},
		{ngx_string("html"), FORMAT_HTML},
	};
	const char *accept = header(r, "Accept");
	ngx_str_t v;
	ngx_uint_t i;

	if (ngx_http_arg(r, (u_char *)"format", 6, &v) == NGX_OK) {
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (v.len == names[i].name.len &&
			    ngx_strncasecmp(v.data, names[i].name.data, v.len) == 0)
				return names[i].format;
		return -1;
	}
	if (accept && ngx_strcasestrn((u_char *)accept, "application/json", 16 - 1))
		return PCPU_FORMAT_JSON;
	if (accept && ngx_strcasestrn((u_char *)accept, "text/html", 9 - 1))
		return FORMAT_HTML;
	return pcpu_format_negotiate(accept);
}

/* gzip of [in, in + len) into the request's pool; NGX_ERROR if zlib fails. */
static ngx_int_t gzip_body(ngx_http_request_t *r, const u_char *in, size_t len, ngx_str_t *out)
{
	z_stream z;
	uLong cap;

	ngx_memzero(&z, sizeof(z));
	if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NGX_ERROR;
	cap = deflateBound(&z, (uLong)len);
	out->data = ngx_pnalloc(r->pool, cap);
	if (out->data == NULL) {
		deflateEnd(&z);
		return NGX_ERROR;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out->data;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&z);
		return NGX_ERROR;
	}
	out->len = z.total_out;
	deflateEnd(&z);
	return NGX_OK;
}

static ngx_int_t add_header(ngx_http_request_t *r, const char *key, const char *value,
			    ngx_table_elt_t **set)
{
	ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);

	if (h == NULL)
		return NGX_ERROR;
	h->hash = 1;
	h->key.data = (u_char *)key;
	h->key.len = ngx_strlen(key);
	h->value.data = (u_char *)value;
	h->value.len = ngx_strlen(value);
#if (nginx_version >= 1023000)
	h->next = NULL;
#endif
	if (set)
		*set = h;
	return NGX_OK;
}

static void free_exposition(void *p)
{
	free(p);
}

/* The tree's exposition in `fmt`, in memory the request's pool frees. */
static ngx_int_t exposition(ngx_http_request_t *r, int fmt, ngx_str_t *body)
{
	/* This worker's reader, kept open (nginx workers are one thread). */
	static pcpu_reader_t *reader;
	struct pcpu_reader_options o;
	struct pcpu_reader_snapshot *s;
	ngx_pool_cleanup_t *cln;
	char *text;
	size_t len;

	if (reader == NULL) {
		ngx_memzero(&o, sizeof(o));
		o.flags = PCPU_READER_OWNER | PCPU_READER_ALLOW_STALE;
		o.owner = ngx_http_pcpu_tree.owner;
		reader = pcpu_reader_open_fd(ngx_http_pcpu_tree.read_fd, &o);
		if (reader == NULL) {
			ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "pcpu: reading the statistics: %s",
				      pcpu_reader_error());
			return NGX_ERROR;
		}
	}
	if (pcpu_reader_snapshot(reader, 0, &s) != 0) {
		ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "pcpu: reading the statistics: %s",
			      pcpu_reader_error());
		return NGX_ERROR;
	}
	if (pcpu_snapshot_write(&s->snapshot, (enum pcpu_format)fmt, &text, &len) != 0) {
		ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "pcpu: writing the statistics: %s",
			      pcpu_stats_error());
		pcpu_reader_snapshot_free(s);
		return NGX_ERROR;
	}
	pcpu_reader_snapshot_free(s);
	cln = ngx_pool_cleanup_add(r->pool, 0);
	if (cln == NULL) {
		free(text);
		return NGX_ERROR;
	}
	cln->handler = free_exposition;
	cln->data = text;
	body->data = (u_char *)text;
	body->len = len;
	return NGX_OK;
}

static ngx_int_t ngx_http_pcpu_display_handler(ngx_http_request_t *r)
{
	ngx_str_t body, gz;
	ngx_buf_t *b;
	ngx_chain_t out;
	ngx_int_t rc;
	int fmt;

	if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD)))
		return NGX_HTTP_NOT_ALLOWED;
	rc = ngx_http_discard_request_body(r);
	if (rc != NGX_OK)
		return rc;
	fmt = format_of(r);
	if (fmt < 0 || (fmt != FORMAT_HTML && !pcpu_format_supported((enum pcpu_format)fmt)))
		return 406; /* Not Acceptable: a format it does not know or has not */
	if (ngx_http_pcpu_tree.read_fd == NGX_INVALID_FILE)
		return NGX_HTTP_SERVICE_UNAVAILABLE;
	if (fmt == FORMAT_HTML) {
		body.data = (u_char *)ngx_http_pcpu_html;
		body.len = sizeof(ngx_http_pcpu_html);
		ngx_str_set(&r->headers_out.content_type, "text/html; charset=utf-8");
	} else {
		if (exposition(r, fmt, &body) != NGX_OK)
			return NGX_HTTP_INTERNAL_SERVER_ERROR;
		r->headers_out.content_type.data = (u_char *)pcpu_format_content_type((enum pcpu_format)fmt);
		r->headers_out.content_type.len = ngx_strlen(r->headers_out.content_type.data);
	}
	r->headers_out.content_type_len = r->headers_out.content_type.len;
	if (add_header(r, "Vary", "Accept, Accept-Encoding", NULL) != NGX_OK ||
	    add_header(r, "Cache-Control", "no-store", NULL) != NGX_OK)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	if (body.len > 512 && pcpu_format_gzip_acceptable(header(r, "Accept-Encoding")) &&
	    gzip_body(r, body.data, body.len, &gz) == NGX_OK) {
		body = gz;
		if (add_header(r, "Content-Encoding", "gzip", &r->headers_out.content_encoding) != NGX_OK)
			return NGX_HTTP_INTERNAL_SERVER_ERROR;
	}
	r->headers_out.status = NGX_HTTP_OK;
	r->headers_out.content_length_n = (off_t)body.len;
	rc = ngx_http_send_header(r);
	if (rc == NGX_ERROR || rc > NGX_OK || r->header_only)
		return rc;
	b = ngx_calloc_buf(r->pool);
	if (b == NULL)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	b->pos = body.data;
	b->last = body.data + body.len;
	b->memory = 1;
	b->last_buf = (r == r->main) ? 1 : 0;
	b->last_in_chain = 1;
	out.buf = b;
	out.next = NULL;
	return ngx_http_output_filter(r, &out);
}
