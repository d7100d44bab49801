/* SPDX-License-Identifier: MIT */
/*
 * The state of the peers of upstreams that have a `zone` (their peers in
 * shared memory, the same for every worker), as gauges by upstream and
 * peer:
 *
 *   nginx_http_upstream_peer_weight       its weight
 *   nginx_http_upstream_peer_backup       1 for a backup server
 *   nginx_http_upstream_peer_down         1 for a server marked `down`
 *   nginx_http_upstream_peer_fails        failed attempts counted now
 *                                         (against max_fails, fail_timeout)
 *   nginx_http_upstream_peer_unavailable  1 while max_fails holds it out
 *   nginx_http_upstream_peer_connections  connections to it now
 *
 * Sampled with the connections (connections.c: every second by a worker,
 * and by the display before its snapshot), under the peers' read lock.
 * Peers come from the configuration, so their series are made by the
 * master at each cycle, as the zones' are, not admitted like the peers
 * requests meet; the peer label is the peer's address as
 * $upstream_addr gives it, the same as nginx_http_upstream_responses'.
 * An upstream without `zone` has its peers in each worker's memory, a
 * state per worker: not shown.
 */
#include "ngx_http_pcpu_module.h"

#define FIELDS 6

typedef struct {
	ngx_http_upstream_rr_peers_t *peers; /* its group, shared */
	ngx_http_upstream_rr_peer_t *peer;   /* shared */
	ngx_uint_t backup;
	pcpu_gauge_t g[FIELDS];              /* weight, backup, down, fails, unavailable,
					      * connections */
} zpeer_t;

/* The running cycle's, from its pool (set by the master, inherited). */
static zpeer_t *zpeers;
static ngx_uint_t nzpeers;

static ngx_uint_t add_group(ngx_cycle_t *cycle, ngx_http_upstream_srv_conf_t *uscf,
			    ngx_http_upstream_rr_peers_t *peers, ngx_uint_t backup, ngx_uint_t *n)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	pcpu_family_t *f[FIELDS] = {t->zp_weight, t->zp_backup, t->zp_down,
				    t->zp_fails, t->zp_unavailable, t->zp_conns};
	ngx_http_upstream_rr_peer_t *peer;
	const char *v[2];
	ngx_str_t s;
	ngx_uint_t i, refused = 0;
	zpeer_t *z;

	for (peer = peers->peer; peer; peer = peer->next) {
		if (zpeers == NULL) { /* counting */
			(*n)++;
			continue;
		}
		z = &zpeers[nzpeers];
		if (ngx_http_pcpu_label(cycle->pool, &uscf->host, &s) != NGX_OK ||
		    (v[0] = ngx_http_pcpu_cstr(cycle->pool, &s)) == NULL ||
		    ngx_http_pcpu_label(cycle->pool, &peer->name, &s) != NGX_OK ||
		    (v[1] = ngx_http_pcpu_cstr(cycle->pool, &s)) == NULL)
			return refused + FIELDS;
		z->peers = peers;
		z->peer = peer;
		z->backup = backup;
		for (i = 0; i < FIELDS; i++) {
			z->g[i] = pcpu_family_gauge(f[i], v);
			refused += z->g[i] == NULL;
		}
		nzpeers++;
	}
	return refused;
}

void ngx_http_pcpu_peers_init(ngx_cycle_t *cycle)
{
	ngx_http_upstream_main_conf_t *umcf;
	ngx_http_upstream_srv_conf_t **uscf;
	ngx_http_upstream_rr_peers_t *peers;
	ngx_uint_t i, pass, n = 0, refused = 0;

	zpeers = NULL;
	nzpeers = 0;
	if (cycle == NULL)
		return;
	umcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_upstream_module);
	if (umcf == NULL)
		return;
	uscf = umcf->upstreams.elts;
	for (pass = 0; pass < 2; pass++) { /* count, then make */
		for (i = 0; i < umcf->upstreams.nelts; i++) {
			if (uscf[i]->shm_zone == NULL || uscf[i]->peer.data == NULL)
				continue;
			peers = uscf[i]->peer.data;
			refused += add_group(cycle, uscf[i], peers, 0, &n);
			if (peers->next)
				refused += add_group(cycle, uscf[i], peers->next, 1, &n);
		}
		if (pass == 0) {
			if (n == 0)
				return;
			zpeers = ngx_pcalloc(cycle->pool, n * sizeof(zpeer_t));
			if (zpeers == NULL)
				return;
		}
	}
	if (refused) {
		ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
			      "pcpu: %ui series of upstream peers' state refused (counted in "
			      "nginx_pcpu_series_refused_total{reason=\"segment_full\"})",
			      refused);
		if (ngx_http_pcpu_tree.refused_c[NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL])
			pcpu_counter_add(ngx_http_pcpu_tree.refused_c[NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL],
					 (int64_t)refused);
	}
}

static void set(pcpu_gauge_t g, int64_t v)
{
	if (g)
		(void)pcpu_gauge_set(g, v);
}

void ngx_http_pcpu_peers_sample(void)
{
	ngx_http_upstream_rr_peers_t *locked = NULL;
	ngx_http_upstream_rr_peer_t *p;
	time_t now = ngx_time();
	ngx_uint_t i;
	zpeer_t *z;

	for (i = 0; i < nzpeers; i++) {
		z = &zpeers[i];
		if (z->peers != locked) {
			if (locked)
				ngx_http_upstream_rr_peers_unlock(locked);
			locked = z->peers;
			ngx_http_upstream_rr_peers_rlock(locked);
		}
		p = z->peer;
		set(z->g[0], (int64_t)p->weight);
		set(z->g[1], (int64_t)z->backup);
		set(z->g[2], p->down ? 1 : 0);
		set(z->g[3], (int64_t)p->fails);
		/* As round robin decides: max_fails reached within fail_timeout. */
		set(z->g[4], p->max_fails && p->fails >= p->max_fails &&
				     now - p->checked <= p->fail_timeout);
		set(z->g[5], (int64_t)p->conns);
	}
	if (locked)
		ngx_http_upstream_rr_peers_unlock(locked);
}
