/* SPDX-License-Identifier: MIT */
/*
 * The registry of the nginx process tree: made by the master before it
 * forks its workers (pcpu_segment_publish(), PCPU_SEGMENT_SHARED_TREE), or,
 * in a binary upgrade, joined by the new master (pcpu_segment_join()) so
 * that counts go on where the old master's are -- neither from zero nor
 * twice -- and left by each master as it quits (pcpu_segment_leave(): the
 * last one out removes the segment).
 *
 * A binary upgrade: the old master fork()s and exec()s the new binary,
 * which inherits the listening sockets (the NGINX variable) and nothing of
 * the old tree's memory. The old master's environment for it comes from
 * the `env` list of its configuration (ngx_set_environment()), to which
 * this file adds NGINX_PCPU_TREE=<the segment's path>; the new master, and
 * only a master started by an upgrade (ngx_inherited), joins that tree.
 * Where it cannot (another pcpu format, another user...), it says why and
 * publishes a tree of its own: counts restart, as after a restart.
 *
 * The first master publishes before daemonising (nginx runs init_module
 * before it forks into the background): the segment's name carries that
 * first process's pid, and the tree lives while any of its processes does
 * (its member lock), so readers see it live all along.
 *
 * Slots must be CPU numbers: the master calls pcpu_configure() before
 * anything of pcpu runs, so no PCPU_INDEX=cpu is needed (and none can be:
 * nginx clears its workers' environment). No owned slots: nginx's workers
 * do not pin threads to them, and every slot is a slot every read walks.
 */
#include <stdlib.h>

#include "ngx_http_pcpu_module.h"

#define TREE_ENV "NGINX_PCPU_TREE"

ngx_http_pcpu_tree_t ngx_http_pcpu_tree = {.read_fd = NGX_INVALID_FILE};

const char *const ngx_http_pcpu_class_names[NGX_HTTP_PCPU_CLASSES] = {"1xx", "2xx", "3xx",
								       "4xx", "5xx", "other"};

/* Request and response times: nginx's milliseconds recorded as
 * microseconds (so that 0 ms alone is in the zero bucket), exposed in
 * seconds; exponential buckets (Prometheus native histograms, 4 per power
 * of two, at most 19 % wide) and classic `le` buckets, one per power of
 * two from the zero bucket's bound up to 2^25 us (33.6 s, the last at or
 * below 60 s: slower requests count in +Inf only), 25 lines a series. */
static const struct pcpu_histogram_layout duration_layout = {
	.scheme = PCPU_HISTOGRAM_EXPONENTIAL,
	.schema = 2,
	.export_per_octave = 1,
	.max_value = 60000000,
};

ngx_uint_t ngx_http_pcpu_class(ngx_uint_t status)
{
	return status >= 100 && status < 600 ? status / 100 - 1 : NGX_HTTP_PCPU_CLASSES - 1;
}

static pcpu_family_t *family(ngx_log_t *log, const char *name, const char *help, const char *unit,
			     enum pcpu_metric_type type, unsigned n, const char *const *labels)
{
	struct pcpu_family_desc d = {
		.name = name, .help = help, .unit = unit, .type = type, .nlabels = n,
		.label_names = labels};
	pcpu_family_t *f;

	if (type == PCPU_METRIC_HISTOGRAM) {
		d.scale_exp10 = -6;
		d.histogram = &duration_layout;
	}
	f = pcpu_registry_family(ngx_http_pcpu_tree.reg, &d);
	if (f == NULL) {
		ngx_log_error(NGX_LOG_EMERG, log, 0, "pcpu: family %s: %s", name, pcpu_stats_error());
	}
	return f;
}

static ngx_int_t families(ngx_log_t *log)
{
	static const char *const server[] = {"server", "code"}, *const server_class[] = {"server", "class"},
				 *const server_cache[] = {"server", "cache"},
				 *const location[] = {"server", "location", "code"},
				 *const location_class[] = {"server", "location", "class"},
				 *const key[] = {"filter", "key"},
				 *const key_class[] = {"filter", "key", "class"},
				 *const peer[] = {"upstream", "peer", "code"};
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;

	t->server.requests = family(log, "nginx_http_requests",
				    "Requests, by server zone and status code ($status)", NULL,
				    PCPU_METRIC_COUNTER, 2, server);
	t->server.responses = family(log, "nginx_http_responses",
				     "Responses, by server zone and status class", NULL,
				     PCPU_METRIC_COUNTER, 2, server_class);
	t->server.req_bytes = family(log, "nginx_http_request_bytes",
				     "Bytes received in requests ($request_length), by server zone",
				     "bytes", PCPU_METRIC_COUNTER, 1, server);
	t->server.resp_bytes = family(log, "nginx_http_response_bytes",
				      "Bytes sent to clients ($bytes_sent), by server zone", "bytes",
				      PCPU_METRIC_COUNTER, 1, server);
	t->server.duration = family(log, "nginx_http_request_duration_seconds",
				    "Request processing time ($request_time), by server zone",
				    "seconds", PCPU_METRIC_HISTOGRAM, 1, server);
	t->server.cache = family(log, "nginx_http_cache_requests",
				 "Requests answered through a cache, by server zone and cache status "
				 "($upstream_cache_status)",
				 NULL, PCPU_METRIC_COUNTER, 2, server_cache);
	t->location.requests = family(log, "nginx_http_location_requests",
				      "Requests, by location zone and status code", NULL,
				      PCPU_METRIC_COUNTER, 3, location);
	t->location.responses = family(log, "nginx_http_location_responses",
				       "Responses, by location zone and status class", NULL,
				       PCPU_METRIC_COUNTER, 3, location_class);
	t->location.req_bytes = family(log, "nginx_http_location_request_bytes",
				       "Bytes received in requests, by location zone", "bytes",
				       PCPU_METRIC_COUNTER, 2, location);
	t->location.resp_bytes = family(log, "nginx_http_location_response_bytes",
					"Bytes sent to clients, by location zone", "bytes",
					PCPU_METRIC_COUNTER, 2, location);
	t->location.duration = family(log, "nginx_http_location_request_duration_seconds",
				      "Request processing time, by location zone", "seconds",
				      PCPU_METRIC_HISTOGRAM, 2, location);
	t->f_requests = family(log, "nginx_http_filter_requests",
			       "Requests, by filter (pcpu_stats_filter) and key", NULL,
			       PCPU_METRIC_COUNTER, 2, key);
	t->f_responses = family(log, "nginx_http_filter_responses",
				"Responses, by filter, key and status class", NULL, PCPU_METRIC_COUNTER,
				3, key_class);
	t->f_req_bytes = family(log, "nginx_http_filter_request_bytes",
				"Bytes received in requests, by filter and key", "bytes",
				PCPU_METRIC_COUNTER, 2, key);
	t->f_resp_bytes = family(log, "nginx_http_filter_response_bytes",
				 "Bytes sent to clients, by filter and key", "bytes",
				 PCPU_METRIC_COUNTER, 2, key);
	t->up_responses = family(log, "nginx_http_upstream_responses",
				 "Upstream responses, by upstream, peer and status ($upstream_status; "
				 "\"000\": no response)",
				 NULL, PCPU_METRIC_COUNTER, 3, peer);
	t->up_duration = family(log, "nginx_http_upstream_response_duration_seconds",
				"Upstream response time ($upstream_response_time), by upstream and peer",
				"seconds", PCPU_METRIC_HISTOGRAM, 2, peer);
	return t->server.requests && t->server.responses && t->server.req_bytes &&
			       t->server.resp_bytes && t->server.duration && t->server.cache &&
			       t->location.requests && t->location.responses &&
			       t->location.req_bytes && t->location.resp_bytes &&
			       t->location.duration && t->f_requests && t->f_responses &&
			       t->f_req_bytes && t->f_resp_bytes && t->up_responses && t->up_duration
		       ? NGX_OK
		       : NGX_ERROR;
}

/* A new registry with the tree's families; NGX_ERROR logged. */
static ngx_int_t registry(ngx_log_t *log)
{
	ngx_http_pcpu_tree.reg = pcpu_registry_create();
	if (ngx_http_pcpu_tree.reg == NULL) {
		ngx_log_error(NGX_LOG_EMERG, log, ngx_errno, "pcpu_registry_create() failed");
		return NGX_ERROR;
	}
	return families(log);
}

/* Adds NGINX_PCPU_TREE=<path> to the environment a binary upgrade gives
 * the new master (the configuration's `env` list, which the workers get
 * too: harmless). */
static ngx_int_t export_path(ngx_cycle_t *cycle, const char *path)
{
	ngx_core_conf_t *ccf = (ngx_core_conf_t *)ngx_get_conf(cycle->conf_ctx, ngx_core_module);
	size_t n = sizeof(TREE_ENV "=") - 1 + ngx_strlen(path);
	ngx_str_t *var = ngx_array_push(&ccf->env);

	if (var == NULL)
		return NGX_ERROR;
	var->data = ngx_pnalloc(cycle->pool, n + 1);
	if (var->data == NULL)
		return NGX_ERROR;
	ngx_sprintf(var->data, TREE_ENV "=%s%Z", path);
	var->len = sizeof(TREE_ENV) - 1; /* the name: ngx_set_environment() reads "name=value" so */
	return NGX_OK;
}

/* The first time in this master: the registry, joined or published, and a
 * read-only descriptor of its file for the display handler. */
static ngx_int_t tree_make(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	struct pcpu_config cfg = PCPU_CONFIG_INIT;
	struct pcpu_segment_options o;
	const char *old = ngx_inherited ? getenv(TREE_ENV) : NULL, *path;
	char name[PCPU_SEGMENT_NAME_MAX + 1];
	ngx_file_info_t fi;

	cfg.index = PCPU_INDEX_CPU;
	cfg.owned_slots = 0;
	if (pcpu_configure(&cfg) != 0) {
		ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
			      "pcpu_configure() failed: the statistics of a process tree need slots "
			      "by CPU number, and pcpu already runs with another choice here");
		return NGX_ERROR;
	}
	if (registry(cycle->log) != NGX_OK)
		return NGX_ERROR;
	if (old && *old) {
		t->seg = pcpu_segment_join(t->reg, old);
		if (t->seg) {
			t->joined = 1;
			ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
				      "pcpu: joined the old master's statistics \"%s\"", old);
		} else {
			ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
				      "pcpu: cannot join the old master's statistics \"%s\" (%s): "
				      "counting anew",
				      old, pcpu_segment_error());
			/* Its zone may be the old tree's now: start over. */
			pcpu_registry_destroy(t->reg);
			if (registry(cycle->log) != NGX_OK)
				return NGX_ERROR;
		}
	}
	if (t->seg == NULL) {
		ngx_memzero(&o, sizeof(o));
		o.flags = PCPU_SEGMENT_SHARED_TREE;
		if (pmcf->group != NGX_CONF_UNSET) {
			o.flags |= PCPU_SEGMENT_GROUP_READ;
			o.group = (gid_t)pmcf->group;
		}
		if (pmcf->segment.len)
			ngx_sprintf((u_char *)name, "%V%Z", &pmcf->segment);
		else
			ngx_cpystrn((u_char *)name, (u_char *)"nginx", sizeof(name));
		t->seg = pcpu_segment_publish(t->reg, name, &o);
		if (t->seg == NULL) {
			ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "pcpu: publishing \"%s\": %s", name,
				      pcpu_segment_error());
			return NGX_ERROR;
		}
	}
	path = pcpu_segment_path(t->seg);
	t->read_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (t->read_fd == NGX_INVALID_FILE || ngx_fd_info(t->read_fd, &fi) == NGX_FILE_ERROR) {
		ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno, "pcpu: open \"%s\"", path);
		return NGX_ERROR;
	}
	t->owner = fi.st_uid;
	ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0, "pcpu: statistics in \"%s\"", path);
	return NGX_OK;
}

/* The series every process needs from the start, registered by the master
 * before it forks (the workers inherit the handles). */
static ngx_int_t zone_series(ngx_log_t *log, ngx_http_pcpu_zone_t *z)
{
	ngx_http_pcpu_zone_families_t *f =
		z->location ? &ngx_http_pcpu_tree.location : &ngx_http_pcpu_tree.server;
	const char *v[3] = {z->labels[0], z->labels[1], NULL};
	unsigned n = z->location ? 2 : 1, i;

	z->req_bytes = pcpu_family_counter(f->req_bytes, v);
	z->resp_bytes = pcpu_family_counter(f->resp_bytes, v);
	z->duration = pcpu_family_histogram(f->duration, v);
	for (i = 0; i < NGX_HTTP_PCPU_CLASSES; i++) {
		v[n] = ngx_http_pcpu_class_names[i];
		z->classes[i] = pcpu_family_counter(f->responses, v);
		if (z->classes[i] == NULL)
			break;
	}
	if (!z->req_bytes || !z->resp_bytes || !z->duration || i < NGX_HTTP_PCPU_CLASSES) {
		ngx_log_error(NGX_LOG_EMERG, log, 0, "pcpu: series of \"%s\"%s%s: %s", z->labels[0],
			      z->location ? " location " : "", z->location ? z->labels[1] : "",
			      pcpu_stats_error());
		return NGX_ERROR;
	}
	return NGX_OK;
}

ngx_int_t ngx_http_pcpu_tree_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	ngx_http_pcpu_zone_t *z;

	if (t->reg && t->seg == NULL) {
		/* A reload dropped the module, this one brings it back: the
		 * tree was left (and removed); a new one. The old registry's
		 * workers are gone with the cycle that dropped it. */
		pcpu_registry_destroy(t->reg);
		t->reg = NULL;
		t->joined = 0;
		if (t->read_fd != NGX_INVALID_FILE) {
			(void)close(t->read_fd);
			t->read_fd = NGX_INVALID_FILE;
		}
	}
	if (t->reg == NULL && tree_make(cycle, pmcf) != NGX_OK)
		return NGX_ERROR;
	if (export_path(cycle, pcpu_segment_path(t->seg)) != NGX_OK)
		return NGX_ERROR;
	for (z = pmcf->zones; z; z = z->next)
		if (zone_series(cycle->log, z) != NGX_OK)
			return NGX_ERROR;
	return NGX_OK;
}

void ngx_http_pcpu_tree_leave(ngx_cycle_t *cycle)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	int rc;

	if (t->seg == NULL)
		return;
	rc = pcpu_segment_leave(t->seg);
	if (rc < 0) {
		ngx_log_error(NGX_LOG_WARN, cycle->log, 0, "pcpu: leaving the statistics: %s",
			      pcpu_segment_error());
	} else if (rc == 0) {
		ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
			      "pcpu: statistics left to the other master");
	}
	/* The registry stays (its handles may still be used until exit), but
	 * this master counts no more. */
	t->seg = NULL;
}

/* ---- series met as requests come -------------------------------------------------- */

/* Logged once per process: a series refused (the tree's directory full). */
static void refused(ngx_log_t *log, const char *what)
{
	static ngx_uint_t said;

	if (said++ == 0) {
		ngx_log_error(NGX_LOG_ERR, log, 0, "pcpu: %s: %s (not counted)", what,
			      pcpu_stats_error());
	}
}

pcpu_counter_t ngx_http_pcpu_zone_code(ngx_http_pcpu_zone_t *z, ngx_uint_t status, ngx_log_t *log)
{
	ngx_http_pcpu_zone_families_t *f =
		z->location ? &ngx_http_pcpu_tree.location : &ngx_http_pcpu_tree.server;
	const char *v[3] = {z->labels[0], z->labels[1], NULL};
	char code[NGX_INT_T_LEN + 1];
	pcpu_counter_t c;

	if (status < NGX_HTTP_PCPU_CODES && z->codes && z->codes[status])
		return z->codes[status];
	if (status < NGX_HTTP_PCPU_CODES && z->codes == NULL) {
		/* This process's: the configuration's memory is its own copy. */
		z->codes = ngx_calloc(NGX_HTTP_PCPU_CODES * sizeof(pcpu_counter_t), log);
		if (z->codes == NULL)
			return NULL;
	}
	ngx_sprintf((u_char *)code, "%03ui%Z", status);
	v[z->location ? 2 : 1] = code;
	c = pcpu_family_counter(f->requests, v);
	if (c == NULL)
		refused(log, "a status code's series");
	else if (status < NGX_HTTP_PCPU_CODES)
		z->codes[status] = c;
	return c;
}

pcpu_counter_t ngx_http_pcpu_zone_cache(ngx_http_pcpu_zone_t *z, ngx_uint_t status, ngx_log_t *log)
{
#if (NGX_HTTP_CACHE)
	const char *v[2];
	pcpu_counter_t c;

	if (status == 0 || status >= NGX_HTTP_PCPU_CACHE_STATUSES)
		return NULL;
	if (z->cache[status])
		return z->cache[status];
	v[0] = z->labels[0];
	v[1] = (const char *)ngx_http_cache_status[status - 1].data; /* a literal: "HIT"... */
	c = pcpu_family_counter(ngx_http_pcpu_tree.server.cache, v);
	if (c == NULL)
		refused(log, "a cache status's series");
	z->cache[status] = c;
	return c;
#else
	return NULL;
#endif
}

/* ---- upstreams -------------------------------------------------------------------- */

/* An upstream peer's series in this process. */
typedef struct {
	ngx_str_node_t sn; /* str: "upstream\0peer" */
	const char *labels[2];
	pcpu_histogram_t *duration;
	ngx_uint_t ncodes;
	struct {
		ngx_uint_t status;
		pcpu_counter_t c;
	} codes[8];
} peer_t;

static ngx_rbtree_t peers;
static ngx_rbtree_node_t peers_sentinel;
static ngx_uint_t npeers;

static peer_t *peer_get(ngx_http_request_t *r, ngx_str_t *upstream, ngx_str_t *addr)
{
	ngx_str_t key, u, a;
	ngx_pool_t *pool = r->pool;
	uint32_t hash;
	peer_t *p;
	u_char *k;

	if (peers.root == NULL)
		ngx_rbtree_init(&peers, &peers_sentinel, ngx_str_rbtree_insert_value);
	if (ngx_http_pcpu_label(pool, upstream, &u) != NGX_OK ||
	    ngx_http_pcpu_label(pool, addr, &a) != NGX_OK)
		return NULL;
	key.len = u.len + 1 + a.len;
	key.data = k = ngx_pnalloc(pool, key.len);
	if (k == NULL)
		return NULL;
	k = ngx_cpymem(k, u.data, u.len);
	*k++ = '\0';
	ngx_memcpy(k, a.data, a.len);
	hash = ngx_hash_key(key.data, key.len);
	p = (peer_t *)ngx_str_rbtree_lookup(&peers, &key, hash);
	if (p)
		return p;
	if (npeers >= NGX_HTTP_PCPU_PEERS_MAX &&
	    !(addr->len == sizeof(NGX_HTTP_PCPU_OTHER) - 1 &&
	      ngx_strncmp(addr->data, NGX_HTTP_PCPU_OTHER, addr->len) == 0)) {
		/* Past the bound: the upstream's "__other__" peer. */
		ngx_str_t other = ngx_string(NGX_HTTP_PCPU_OTHER);

		return peer_get(r, upstream, &other);
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
	p->labels[0] = (const char *)k;
	p->labels[1] = (const char *)k + u.len + 1;
	p->duration = pcpu_family_histogram(ngx_http_pcpu_tree.up_duration, p->labels);
	if (p->duration == NULL)
		refused(r->connection->log, "an upstream peer's series");
	ngx_rbtree_insert(&peers, &p->sn.node);
	npeers++;
	return p;
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
		refused(log, "an upstream status's series");
	else if (p->ncodes < sizeof(p->codes) / sizeof(p->codes[0])) {
		p->codes[p->ncodes].status = status;
		p->codes[p->ncodes++].c = c;
	}
	return c;
}

void ngx_http_pcpu_upstreams(ngx_http_request_t *r)
{
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

		p = peer_get(r, &name, addr);
		if (p == NULL)
			continue;
		c = peer_code(p, st[i].status, r->connection->log);
		if (c)
			pcpu_counter_inc(c);
		if (p->duration && st[i].response_time != (ngx_msec_t)-1)
			pcpu_histogram_record(p->duration, (int64_t)st[i].response_time * 1000);
	}
}
