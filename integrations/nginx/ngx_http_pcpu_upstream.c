/* SPDX-License-Identifier: MIT */
/*
 * Upstream peers: each attempt of a request's last upstream group, counted
 * under its upstream and peer (nginx_http_upstream_*): the response code
 * ($upstream_status), the response, connect and header times
 * ($upstream_response_time, $upstream_connect_time,
 * $upstream_header_time: histograms, an attempt without one -- "-" in the
 * access log -- not recorded) and the bytes both ways
 * ($upstream_bytes_received, $upstream_bytes_sent). Names and peers come
 * from requests: each is admitted under the tree's bounds (filter.c); with
 * pcpu_stats_expire, an expired peer lends its series to a new peer at
 * the peers' bound (reuse.c).
 */
#include "ngx_http_pcpu_admission.h"


/* An upstream peer's series in this process. */
typedef struct {
	ngx_str_node_t sn; /* str: "upstream\0peer" */
	const char *labels[2];
	pcpu_histogram_t *duration, *connect, *header;
	pcpu_counter_t received, sent;
	pcpu_gauge_t seen; /* with pcpu_stats_expire, but "__other__" */
	time_t seen_at;
	ngx_http_pcpu_shared_key_t *shared; /* its admission; NULL: "__other__" (reuse.c) */
	ngx_uint_t ncodes;
	struct {
		ngx_uint_t status;
		pcpu_counter_t c;
	} codes[8];
} peer_t;

static ngx_rbtree_t peers;
static ngx_rbtree_node_t peers_sentinel;

/* This process's peer of key "upstream\0peer", or NULL. */
static peer_t *peer_find(ngx_str_t *key, uint32_t hash)
{
	return (peer_t *)ngx_str_rbtree_lookup(&peers, key, hash);
}

/* "u\0a" in the request's pool. */
static ngx_int_t peer_key(ngx_pool_t *pool, ngx_str_t *u, ngx_str_t *a, ngx_str_t *key)
{
	u_char *k;

	key->len = u->len + 1 + a->len;
	key->data = k = ngx_pnalloc(pool, key->len);
	if (k == NULL)
		return NGX_ERROR;
	k = ngx_cpymem(k, u->data, u->len);
	*k++ = '\0';
	ngx_memcpy(k, a->data, a->len);
	return NGX_OK;
}

/* The series of an upstream's peer in this process. Upstream names and
 * peers come from requests (proxy_pass http://$host...): each is admitted
 * for the whole tree under its bound (pcpu_stats_max_upstreams,
 * pcpu_stats_max_peers; filter.c keeps them with the filters' keys), else
 * counted under "__other__": a name not admitted as upstream="__other__",
 * peer="__other__"; a peer not admitted as its upstream's
 * peer="__other__". So a worker holds at most the admitted peers and one
 * "__other__" per admitted upstream, and the tree as many. */
static peer_t *peer_get(ngx_http_request_t *r, ngx_str_t *upstream, ngx_str_t *addr,
			ngx_flag_t timing)
{
	static ngx_str_t other = ngx_string(NGX_HTTP_PCPU_OTHER);
	ngx_str_t key, u, a;
	ngx_http_pcpu_shared_key_t *shared = NULL, *name = NULL;
	ngx_pool_t *pool = r->pool;
	ngx_int_t rc = NGX_HTTP_PCPU_ADMITTED;
	uint32_t hash;
	ngx_uint_t i;
	peer_t *p;
	u_char *k;

	if (peers.root == NULL)
		ngx_rbtree_init(&peers, &peers_sentinel, ngx_str_rbtree_insert_value);
	if (ngx_http_pcpu_label(pool, upstream, &u) != NGX_OK ||
	    ngx_http_pcpu_label(pool, addr, &a) != NGX_OK || peer_key(pool, &u, &a, &key) != NGX_OK)
		return NULL;
	hash = ngx_hash_key(key.data, key.len);
	p = peer_find(&key, hash);
	if (p)
		return p;
	/* Not one of this process's: admitted, or folded. */
	if (!(u.len == other.len && ngx_strncmp(u.data, other.data, u.len) == 0))
		rc = ngx_http_pcpu_admit_upstream(&u, &name);
	if (rc != NGX_HTTP_PCPU_ADMITTED) {
		u = other;
		a = other;
	} else if (!(a.len == other.len && ngx_strncmp(a.data, other.data, a.len) == 0)) {
		rc = ngx_http_pcpu_admit_peer(&key, &shared);
		if (rc != NGX_HTTP_PCPU_ADMITTED)
			a = other;
	}
	/* After the peer's admission: a name retired meanwhile (its peers all
	 * expired) carries this peer again. */
	if (name)
		ngx_http_pcpu_reuse_name(name, a.len == other.len &&
					 ngx_strncmp(a.data, other.data, a.len) == 0);
	if (rc != NGX_HTTP_PCPU_ADMITTED) {
		ngx_http_pcpu_refused((ngx_uint_t)rc, r->connection->log,
				      rc == NGX_HTTP_PCPU_REFUSED_UPSTREAMS ? "an upstream name"
									    : "an upstream peer");
		if (peer_key(pool, &u, &a, &key) != NGX_OK)
			return NULL;
		hash = ngx_hash_key(key.data, key.len);
		p = peer_find(&key, hash);
		if (p)
			return p;
	}
	/* Held for the worker's life: ngx_alloc, not the request's pool. */
	p = ngx_calloc(sizeof(*p) + key.len + 2, r->connection->log);
	if (p == NULL)
		return NULL;
	k = (u_char *)(p + 1);
	ngx_memcpy(k, key.data, key.len);
	k[key.len] = '\0';
	p->sn.str.data = k;
	p->sn.str.len = key.len;
	p->sn.node.key = hash;
	p->shared = rc == NGX_HTTP_PCPU_ADMITTED ? shared : NULL;
	p->labels[0] = (const char *)k;
	p->labels[1] = (const char *)k + u.len + 1;
	/* Made with the peer: a refused one is not asked for again (one
	 * refusal per peer and series). */
	p->duration = pcpu_family_histogram(ngx_http_pcpu_tree.up_duration, p->labels);
	/* Two histograms more per peer (pcpu_stats_upstream_timing off: not
	 * made, not counted as refused). */
	if (timing) {
		p->connect = pcpu_family_histogram(ngx_http_pcpu_tree.up_connect, p->labels);
		p->header = pcpu_family_histogram(ngx_http_pcpu_tree.up_header, p->labels);
	}
	if (ngx_http_pcpu_tree.expire && ngx_strcmp(p->labels[1], NGX_HTTP_PCPU_OTHER) != 0) {
		/* An upstream's "__other__" never expires; a peer without the
		 * gauge is never left out. */
		p->seen = pcpu_family_gauge(ngx_http_pcpu_tree.up_seen, p->labels);
		if (p->seen == NULL)
			ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, r->connection->log,
					      "an upstream peer's last-seen gauge");
	}
	p->received = pcpu_family_counter(ngx_http_pcpu_tree.up_received, p->labels);
	p->sent = pcpu_family_counter(ngx_http_pcpu_tree.up_sent, p->labels);
	for (i = (p->duration == NULL) + (timing && p->connect == NULL) +
		 (timing && p->header == NULL) + (p->received == NULL) + (p->sent == NULL);
	     i; i--)
		ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, r->connection->log,
				      "an upstream peer's series");
	ngx_rbtree_insert(&peers, &p->sn.node);
	return p;
}

void ngx_http_pcpu_upstream_purge(void)
{
	ngx_rbtree_node_t *node, *next;
	peer_t *p;

	if (peers.root == NULL || peers.root == &peers_sentinel)
		return;
	for (node = ngx_rbtree_min(peers.root, &peers_sentinel); node; node = next) {
		next = ngx_rbtree_next(&peers, node);
		p = (peer_t *)node;
		if (p->shared == NULL || !__atomic_load_n(&p->shared->retired, __ATOMIC_RELAXED))
			continue;
		/* Its handles go with it: the series may soon be another peer's. */
		ngx_rbtree_delete(&peers, node);
		ngx_free(p);
	}
}

static pcpu_counter_t peer_code(peer_t *p, ngx_uint_t status, ngx_log_t *log)
{
	const char *v[3] = {p->labels[0], p->labels[1], NULL};
	char code[NGX_INT_T_LEN + 1];
	pcpu_counter_t c;
	ngx_uint_t i;

	for (i = 0; i < p->ncodes; i++)
		if (p->codes[i].status == status)
			return p->codes[i].c;
	ngx_sprintf((u_char *)code, "%03ui%Z", status);
	v[2] = code;
	c = pcpu_family_counter(ngx_http_pcpu_tree.up_responses, v);
	if (c == NULL)
		ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, log, "an upstream status's series");
	else if (p->ncodes < sizeof(p->codes) / sizeof(p->codes[0])) {
		p->codes[p->ncodes].status = status;
		p->codes[p->ncodes++].c = c;
	}
	return c;
}

/* A time of an upstream state, recorded unless nginx has none for it
 * ((ngx_msec_t) -1: "-" in $upstream_*_time). */
static void record(pcpu_histogram_t *h, ngx_msec_t ms)
{
	if (h && ms != (ngx_msec_t)-1)
		pcpu_histogram_record(h, (int64_t)ms * 1000);
}

void ngx_http_pcpu_upstreams(ngx_http_request_t *r, ngx_uint_t upgraded)
{
	ngx_http_pcpu_main_conf_t *pmcf = ngx_http_get_module_main_conf(r, ngx_http_pcpu_module);
	ngx_http_upstream_t *u = r->upstream;
	ngx_http_upstream_state_t *st;
	ngx_str_t name, none = ngx_string("-");
	u_char *buf;
	ngx_uint_t i, first;
	peer_t *p;
	pcpu_counter_t c;

	if (r->upstream_states == NULL || r->upstream_states->nelts == 0)
		return;
	/* The group: its name; an implicit one (proxy_pass http://host:port)
	 * as host:port, a resolved one (proxy_pass with variables) as host. */
	if (u->upstream) {
		name = u->upstream->host;
		if (u->upstream->port) {
			buf = ngx_pnalloc(r->pool, name.len + 1 + NGX_INT_T_LEN);
			if (buf == NULL)
				return;
			name.len = ngx_sprintf(buf, "%V:%d", &u->upstream->host, (int)u->upstream->port) - buf;
			name.data = buf;
		}
	} else if (u->resolved && u->resolved->host.len) {
		name = u->resolved->host;
	} else {
		name = none;
	}
	/* The attempts of the last upstream group the request went to: those
	 * after the last separator (a state without a peer), as
	 * $upstream_addr separates groups with " : ". Earlier groups' names
	 * are gone with their ngx_http_upstream_t. */
	st = r->upstream_states->elts;
	first = 0;
	for (i = 0; i < r->upstream_states->nelts; i++)
		if (st[i].peer == NULL && i + 1 < r->upstream_states->nelts)
			first = i + 1;
	for (i = first; i < r->upstream_states->nelts; i++) {
		ngx_str_t *addr = st[i].peer ? st[i].peer : &none;

		p = peer_get(r, &name, addr, pmcf->upstream_timing);
		if (p && p->shared && ngx_http_pcpu_tree.expire) {
			if (__atomic_load_n(&p->shared->retired, __ATOMIC_RELAXED)) {
				/* Retired since this worker's last acknowledgement:
				 * live again, counted on (as a filter's key). */
				ngx_http_pcpu_upstream_purge();
				p = peer_get(r, &name, addr, pmcf->upstream_timing);
			}
			/* What the retirement looks at (reuse.c). */
			if (p && p->shared && p->shared->seen != ngx_time())
				p->shared->seen = ngx_time();
		}
		if (p == NULL)
			continue;
		ngx_http_pcpu_seen(p->seen, &p->seen_at);
		c = peer_code(p, st[i].status, r->connection->log);
		if (c)
			pcpu_counter_inc(c);
		if (p->received)
			pcpu_counter_add(p->received, (int64_t)st[i].bytes_received);
		if (p->sent)
			pcpu_counter_add(p->sent, (int64_t)st[i].bytes_sent);
		record(p->connect, st[i].connect_time);
		record(p->header, st[i].header_time);
		/* An upgraded connection's response time is its whole life
		 * (a WebSocket held an hour): counted, kept out of latency. */
		if (!upgraded)
			record(p->duration, st[i].response_time);
	}
}
