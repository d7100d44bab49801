/* SPDX-License-Identifier: MIT */
/*
 * What else a server zone counts, in the log phase with the rest:
 *
 *   nginx_http_requests_by_version_total{server,version}   r->http_version:
 *       0.9, 1.0, 1.1, 2.0, 3.0 ("other" for anything else)
 *   nginx_http_limit_req_requests_total{server,status}     $limit_req_status
 *   nginx_http_limit_conn_requests_total{server,status}    $limit_conn_status
 *       (PASSED, DELAYED, REJECTED, DELAYED_DRY_RUN, REJECTED_DRY_RUN; a
 *       request no limit applied to has none and is not counted)
 *   nginx_http_upgraded_total{server}, nginx_http_upgraded_duration_seconds
 *       connections upgraded through an upstream (101 Switching Protocols:
 *       WebSocket), counted when they end; their time here only, never in
 *       the request-time histograms (a WebSocket held an hour is no
 *       request latency)
 *   nginx_http_ssl_handshakes_total{server}, nginx_http_ssl_session_reuses_total
 *       an SSL connection's first request (r->connection->requests == 1;
 *       HTTP/2: the stream with id 1) counts its handshake, and its reuse
 *       when SSL_session_reused() says the session was resumed.
 *   nginx_http_ssl_handshakes_failed_total{server}
 *       a connection whose handshake began (nginx saw a TLS record's
 *       first byte and called OpenSSL) and that closed before it was
 *       done: refused (protocol, ciphers, ssl_reject_handshake), aborted
 *       by the client (a certificate it did not trust), cut off or timed
 *       out. Such a
 *       connection has no request, hence no log phase: it is watched from
 *       its handshake's start (the SSL_CTX's info callback, wrapped) and
 *       counted when its pool goes, under the server SNI chose by then
 *       (else the address's default server).
 *
 * Each series is made in a process the first time it is met (a handle in
 * the zone, the configuration's memory, this process's copy), then costs
 * an add.
 */
#include "ngx_http_pcpu_module.h"

static const char *const versions[NGX_HTTP_PCPU_VERSIONS] = {"0.9", "1.0", "1.1",
							     "2.0", "3.0", "other"};
static const ngx_str_t limits[NGX_HTTP_PCPU_LIMITS] = {
	ngx_string("PASSED"), ngx_string("DELAYED"), ngx_string("REJECTED"),
	ngx_string("DELAYED_DRY_RUN"), ngx_string("REJECTED_DRY_RUN")};

/* A variable's index if this nginx defines it (limit_req and limit_conn
 * are built in, but an index of an unknown variable would fail the
 * configuration), else NGX_ERROR. */
static ngx_int_t var_index(ngx_conf_t *cf, const char *name)
{
	ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
	ngx_str_t n = {ngx_strlen(name), (u_char *)name};
	ngx_hash_key_t *k;
	ngx_uint_t i;

	if (cmcf->variables_keys == NULL)
		return NGX_ERROR;
	k = cmcf->variables_keys->keys.elts;
	for (i = 0; i < cmcf->variables_keys->keys.nelts; i++)
		if (k[i].key.len == n.len && ngx_strncmp(k[i].key.data, n.data, n.len) == 0)
			return ngx_http_get_variable_index(cf, &n);
	return NGX_ERROR;
}

#if (NGX_HTTP_SSL)
static void ssl_wrap(ngx_conf_t *cf);
#endif

void ngx_http_pcpu_server_conf(ngx_conf_t *cf, ngx_http_pcpu_main_conf_t *pmcf)
{
	pmcf->limit_req_var = var_index(cf, "limit_req_status");
	pmcf->limit_conn_var = var_index(cf, "limit_conn_status");
#if (NGX_HTTP_SSL)
	ssl_wrap(cf);
#endif
}

static ngx_uint_t version_index(ngx_uint_t v)
{
	switch (v) {
	case NGX_HTTP_VERSION_9:
		return 0;
	case NGX_HTTP_VERSION_10:
		return 1;
	case NGX_HTTP_VERSION_11:
		return 2;
	case NGX_HTTP_VERSION_20:
		return 3;
#ifdef NGX_HTTP_VERSION_30
	case NGX_HTTP_VERSION_30:
		return 4;
#else
	case 3000:
		return 4;
#endif
	default:
		return 5;
	}
}

/* Counts the outcome $limit_*_status says, if any. */
static void limit(ngx_http_request_t *r, ngx_http_pcpu_zone_t *z, ngx_int_t index,
		  pcpu_counter_t *slots, pcpu_family_t *f)
{
	ngx_http_variable_value_t *vv;
	const char *v[2];
	ngx_uint_t i;

	if (index == NGX_ERROR)
		return;
	vv = ngx_http_get_indexed_variable(r, index);
	if (vv == NULL || vv->not_found || vv->len == 0)
		return;
	for (i = 0; i < NGX_HTTP_PCPU_LIMITS; i++) {
		if (vv->len != limits[i].len || ngx_strncmp(vv->data, limits[i].data, vv->len) != 0)
			continue;
		v[0] = z->labels[0];
		v[1] = (const char *)limits[i].data; /* a literal: NUL-terminated */
		if (ngx_http_pcpu_lazy_counter(&slots[i], f, v, r->connection->log,
					       "a limit outcome's series"))
			pcpu_counter_inc(slots[i]);
		return;
	}
}

#if (NGX_HTTP_SSL)
/* nginx's info callback of its servers' SSL_CTXs (ngx_ssl_info_callback,
 * the same for all), which ours calls first; NULL until one is wrapped. */
static void (*ssl_info_prev)(const ngx_ssl_conn_t *, int, int);
/* An SSL ex_data index: set on a connection once it is watched. */
static int ssl_watched_index = -1;

/* What a watched connection's cleanup needs: both in its pool, which
 * outlives the cleanup (ngx_destroy_pool() runs cleanups first), while
 * c->ssl itself is NULL by then (ngx_ssl_shutdown()). */
typedef struct {
	ngx_http_connection_t *hc;
	ngx_ssl_connection_t *sc;
	ngx_log_t *log;
} ssl_watch_t;

/* The connection's pool goes: a handshake never done is a failure of the
 * server the connection has now (hc->conf_ctx: SNI's choice, if it got
 * that far), if that server has a zone. */
static void ssl_closed(void *data)
{
	ssl_watch_t *w = data;
	ngx_http_pcpu_srv_conf_t *pscf;
	ngx_http_pcpu_zone_t *z;

	if (w->sc->handshaked || ngx_http_pcpu_tree.reg == NULL)
		return;
	pscf = w->hc->conf_ctx->srv_conf[ngx_http_pcpu_module.ctx_index];
	z = pscf->zone;
	if (z && ngx_http_pcpu_lazy_counter(&z->ssl_failed, ngx_http_pcpu_tree.ssl_failed, z->labels,
					    w->log, "an SSL series"))
		pcpu_counter_inc(z->ssl_failed);
}

/* Every info event of the servers' SSL connections: nginx's callback, then
 * at the first handshake's start (no request yet: the connection's data is
 * still its ngx_http_connection_t) the watch. */
static void ssl_info(const ngx_ssl_conn_t *ssl_conn, int where, int ret)
{
	ngx_connection_t *c;
	ngx_pool_cleanup_t *cln;
	ssl_watch_t *w;

	ssl_info_prev(ssl_conn, where, ret);
	if (!(where & SSL_CB_HANDSHAKE_START) || ngx_http_pcpu_tree.reg == NULL)
		return;
	c = ngx_ssl_get_connection((ngx_ssl_conn_t *)ssl_conn);
	if (c == NULL || c->ssl == NULL || c->ssl->handshaked ||
	    SSL_get_ex_data(ssl_conn, ssl_watched_index) != NULL)
		return; /* a renegotiation, or watched already */
	cln = ngx_pool_cleanup_add(c->pool, sizeof(ssl_watch_t));
	if (cln == NULL)
		return; /* no memory: this connection's failure goes uncounted */
	w = cln->data;
	w->hc = c->data;
	w->sc = c->ssl;
	w->log = c->log;
	cln->handler = ssl_closed;
	(void)SSL_set_ex_data((ngx_ssl_conn_t *)ssl_conn, ssl_watched_index, w);
}

/* Wraps the info callback of every server's SSL_CTX: any server may be an
 * address's default one, whose context a handshake starts in. A context
 * whose callback is not nginx's (another module's) is left alone, and its
 * failures uncounted (logged). Never fails the configuration over
 * statistics: without an ex_data index (no memory), nothing is wrapped. */
static void ssl_wrap(ngx_conf_t *cf)
{
	ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
	ngx_http_core_srv_conf_t **cscfp = cmcf->servers.elts;
	ngx_http_ssl_srv_conf_t *sscf;
	void (*cb)(const ngx_ssl_conn_t *, int, int);
	ngx_uint_t s;

	if (ssl_watched_index < 0) {
		ssl_watched_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		if (ssl_watched_index < 0) {
			ngx_ssl_error(NGX_LOG_ALERT, cf->log, 0,
				      "pcpu: SSL_get_ex_new_index() failed: failed handshakes are "
				      "not counted");
			return;
		}
	}
	for (s = 0; s < cmcf->servers.nelts; s++) {
		sscf = cscfp[s]->ctx->srv_conf[ngx_http_ssl_module.ctx_index];
		if (sscf == NULL || sscf->ssl.ctx == NULL)
			continue;
		cb = SSL_CTX_get_info_callback(sscf->ssl.ctx);
		if (cb == ssl_info)
			continue;
		if (cb == NULL || (ssl_info_prev && cb != ssl_info_prev)) {
			ngx_conf_log_error(NGX_LOG_NOTICE, cf, 0,
					   "pcpu: a server's SSL context has another info callback: "
					   "its failed handshakes are not counted");
			continue;
		}
		ssl_info_prev = cb;
		SSL_CTX_set_info_callback(sscf->ssl.ctx, ssl_info);
	}
}

static void ssl(ngx_http_request_t *r, ngx_http_pcpu_zone_t *z)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	ngx_connection_t *c = r->connection;
	ngx_log_t *log = c->log;

#if (NGX_HTTP_V2)
	if (r->stream) {
		/* A stream's connection is nginx's fake one: the client's is
		 * its HTTP/2 connection's, whose first stream has id 1. */
		if (r->stream->node == NULL || r->stream->node->id != 1)
			return;
		c = r->stream->connection->connection;
	} else
#endif
		if (c->requests != 1)
		return;
	if (c->ssl == NULL || c->ssl->connection == NULL)
		return;
	if (ngx_http_pcpu_lazy_counter(&z->ssl_handshakes, t->ssl_handshakes, z->labels, log,
				       "an SSL series"))
		pcpu_counter_inc(z->ssl_handshakes);
	if (SSL_session_reused(c->ssl->connection) &&
	    ngx_http_pcpu_lazy_counter(&z->ssl_reuses, t->ssl_reuses, z->labels, log, "an SSL series"))
		pcpu_counter_inc(z->ssl_reuses);
}
#endif

void ngx_http_pcpu_server_count(ngx_http_request_t *r, ngx_http_pcpu_main_conf_t *pmcf,
				ngx_http_pcpu_zone_t *z, ngx_uint_t upgraded, int64_t us)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	ngx_uint_t vi = version_index(r->http_version);
	const char *v[2] = {z->labels[0], versions[vi]};
	ngx_log_t *log = r->connection->log;

	if (ngx_http_pcpu_lazy_counter(&z->versions[vi], t->versions, v, log, "an HTTP version's series"))
		pcpu_counter_inc(z->versions[vi]);
	limit(r, z, pmcf->limit_req_var, z->limit_req, t->limit_req);
	limit(r, z, pmcf->limit_conn_var, z->limit_conn, t->limit_conn);
#if (NGX_HTTP_SSL)
	ssl(r, z);
#endif
	if (!upgraded)
		return;
	if (ngx_http_pcpu_lazy_counter(&z->upgraded, t->upgraded, z->labels, log,
				       "an upgraded connections' series"))
		pcpu_counter_inc(z->upgraded);
	if (z->upgraded_duration == NULL) {
		z->upgraded_duration = pcpu_family_histogram(t->upgraded_duration, z->labels);
		if (z->upgraded_duration == NULL)
			ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, log,
					      "an upgraded connections' series");
	}
	if (z->upgraded_duration)
		pcpu_histogram_record(z->upgraded_duration, us);
}
