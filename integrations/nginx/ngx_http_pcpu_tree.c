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
const char *const ngx_http_pcpu_reason_names[NGX_HTTP_PCPU_REASONS] = {
	"segment_full", "max_keys", "zone_full", "upstreams", "peers"};

/* The level of what tree_init() logs about a tree it cannot make: EMERG
 * where that stops nginx (pcpu_stats_strict at startup), else ALERT. */
static ngx_uint_t level = NGX_LOG_ALERT;

/* Request and response times: nginx's milliseconds recorded as
 * microseconds (so that 0 ms alone is in the zero bucket), exposed in
 * seconds; exponential buckets (Prometheus native histograms, 4 per power
 * of two, at most 19 % wide) and classic `le` buckets, one per power of
 * two from the zero bucket's bound up to 2^25 us (33.6 s, the last at or
 * below 60 s: slower requests count in +Inf only), 25 lines a series.
 * The stream module's session times too. */
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

pcpu_family_t *ngx_http_pcpu_family(ngx_log_t *log, const char *name, const char *help,
				    const char *unit, enum pcpu_metric_type type, unsigned n,
				    const char *const *labels)
{
	struct pcpu_family_desc d = {
		.name = name, .help = help, .unit = unit, .type = type, .nlabels = n,
		.label_names = labels};
	pcpu_family_t *f;
	unsigned flags = 0;

	if (type == PCPU_METRIC_HISTOGRAM) {
		d.scale_exp10 = -6;
		d.histogram = &duration_layout;
		/* Sparse buckets (segment format 2.10): a series' 247 buckets
		 * take memory as they are used. Requests of 1-50 ms fall in
		 * 23 buckets, 3-4 groups of 8: about 2 KB of the tree at 2
		 * present CPUs, where dense buckets take 16 KB of it
		 * (bench/memory.md). Every process registers alike (the tree
		 * refuses a family registered with the other storage). */
		flags = PCPU_FAMILY_SPARSE;
	}
	f = pcpu_registry_family_ex(ngx_http_pcpu_tree.reg, &d, flags, 0, NULL, NULL);
	if (f == NULL) {
		ngx_log_error(level, log, 0, "pcpu: family %s: %s", name, pcpu_stats_error());
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
				 *const peer[] = {"upstream", "peer", "code"},
				 *const reason[] = {"reason"}, *const source[] = {"source"},
				 *const version[] = {"server", "version"},
				 *const status[] = {"server", "status"}, *const state[] = {"state"},
				 *const zpeer[] = {"upstream", "peer"};
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;

	t->server.requests = ngx_http_pcpu_family(log, "nginx_http_requests",
				    "Requests, by server zone and status code ($status)", NULL,
				    PCPU_METRIC_COUNTER, 2, server);
	t->server.responses = ngx_http_pcpu_family(log, "nginx_http_responses",
				     "Responses, by server zone and status class", NULL,
				     PCPU_METRIC_COUNTER, 2, server_class);
	t->server.req_bytes = ngx_http_pcpu_family(log, "nginx_http_request_bytes",
				     "Bytes received in requests ($request_length), by server zone",
				     "bytes", PCPU_METRIC_COUNTER, 1, server);
	t->server.resp_bytes = ngx_http_pcpu_family(log, "nginx_http_response_bytes",
				      "Bytes sent to clients ($bytes_sent), by server zone", "bytes",
				      PCPU_METRIC_COUNTER, 1, server);
	t->server.duration = ngx_http_pcpu_family(log, "nginx_http_request_duration_seconds",
				    "Request processing time ($request_time), by server zone",
				    "seconds", PCPU_METRIC_HISTOGRAM, 1, server);
	t->server.cache = ngx_http_pcpu_family(log, "nginx_http_cache_requests",
				 "Requests answered through a cache, by server zone and cache status "
				 "($upstream_cache_status)",
				 NULL, PCPU_METRIC_COUNTER, 2, server_cache);
	t->location.requests = ngx_http_pcpu_family(log, "nginx_http_location_requests",
				      "Requests, by location zone and status code", NULL,
				      PCPU_METRIC_COUNTER, 3, location);
	t->location.responses = ngx_http_pcpu_family(log, "nginx_http_location_responses",
				       "Responses, by location zone and status class", NULL,
				       PCPU_METRIC_COUNTER, 3, location_class);
	t->location.req_bytes = ngx_http_pcpu_family(log, "nginx_http_location_request_bytes",
				       "Bytes received in requests, by location zone", "bytes",
				       PCPU_METRIC_COUNTER, 2, location);
	t->location.resp_bytes = ngx_http_pcpu_family(log, "nginx_http_location_response_bytes",
					"Bytes sent to clients, by location zone", "bytes",
					PCPU_METRIC_COUNTER, 2, location);
	t->location.duration = ngx_http_pcpu_family(log, "nginx_http_location_request_duration_seconds",
				      "Request processing time, by location zone", "seconds",
				      PCPU_METRIC_HISTOGRAM, 2, location);
	t->f_requests = ngx_http_pcpu_family(log, "nginx_http_filter_requests",
			       "Requests, by filter (pcpu_stats_filter) and key", NULL,
			       PCPU_METRIC_COUNTER, 2, key);
	t->f_responses = ngx_http_pcpu_family(log, "nginx_http_filter_responses",
				"Responses, by filter, key and status class", NULL, PCPU_METRIC_COUNTER,
				3, key_class);
	t->f_req_bytes = ngx_http_pcpu_family(log, "nginx_http_filter_request_bytes",
				"Bytes received in requests, by filter and key", "bytes",
				PCPU_METRIC_COUNTER, 2, key);
	t->f_resp_bytes = ngx_http_pcpu_family(log, "nginx_http_filter_response_bytes",
				 "Bytes sent to clients, by filter and key", "bytes",
				 PCPU_METRIC_COUNTER, 2, key);
	t->up_responses = ngx_http_pcpu_family(log, "nginx_http_upstream_responses",
				 "Upstream responses, by upstream, peer and status ($upstream_status; "
				 "\"000\": no response)",
				 NULL, PCPU_METRIC_COUNTER, 3, peer);
	t->up_duration = ngx_http_pcpu_family(log, "nginx_http_upstream_response_duration_seconds",
				"Upstream response time ($upstream_response_time), by upstream and peer",
				"seconds", PCPU_METRIC_HISTOGRAM, 2, peer);
	t->up_connect = ngx_http_pcpu_family(log, "nginx_http_upstream_connect_duration_seconds",
			       "Time to connect to the upstream peer ($upstream_connect_time), by "
			       "upstream and peer",
			       "seconds", PCPU_METRIC_HISTOGRAM, 2, peer);
	t->up_header = ngx_http_pcpu_family(log, "nginx_http_upstream_header_duration_seconds",
			      "Time to the upstream response's header ($upstream_header_time), by "
			      "upstream and peer",
			      "seconds", PCPU_METRIC_HISTOGRAM, 2, peer);
	t->up_received = ngx_http_pcpu_family(log, "nginx_http_upstream_received_bytes",
				"Bytes received from the upstream peer ($upstream_bytes_received)",
				"bytes", PCPU_METRIC_COUNTER, 2, peer);
	t->up_sent = ngx_http_pcpu_family(log, "nginx_http_upstream_sent_bytes",
			    "Bytes sent to the upstream peer ($upstream_bytes_sent)", "bytes",
			    PCPU_METRIC_COUNTER, 2, peer);
	t->f_duration = ngx_http_pcpu_family(log, "nginx_http_filter_request_duration_seconds",
			       "Request processing time, by filter and key (filters with the "
			       "`histogram` parameter)",
			       "seconds", PCPU_METRIC_HISTOGRAM, 2, key);
	t->up_seen = ngx_http_pcpu_family(log, "nginx_http_upstream_last_seen_timestamp_seconds",
			    "When an upstream peer last had an attempt, in seconds since the "
			    "epoch (with pcpu_stats_expire: the display leaves out peers not seen "
			    "for that long)",
			    "seconds", PCPU_METRIC_GAUGE, 2, zpeer);
	t->f_seen = ngx_http_pcpu_family(log, "nginx_http_filter_last_seen_timestamp_seconds",
			   "When a filter's key last had a request, in seconds since the epoch "
			   "(with pcpu_stats_expire: the display leaves out keys not seen for "
			   "that long)",
			   "seconds", PCPU_METRIC_GAUGE, 2, key);
	t->versions = ngx_http_pcpu_family(log, "nginx_http_requests_by_version",
			     "Requests, by server zone and HTTP version (0.9, 1.0, 1.1, 2.0, 3.0)",
			     NULL, PCPU_METRIC_COUNTER, 2, version);
	t->limit_req = ngx_http_pcpu_family(log, "nginx_http_limit_req_requests",
			      "Requests limit_req decided on, by server zone and $limit_req_status",
			      NULL, PCPU_METRIC_COUNTER, 2, status);
	t->limit_conn = ngx_http_pcpu_family(log, "nginx_http_limit_conn_requests",
			       "Requests limit_conn decided on, by server zone and $limit_conn_status",
			       NULL, PCPU_METRIC_COUNTER, 2, status);
	t->upgraded = ngx_http_pcpu_family(log, "nginx_http_upgraded",
			     "Upgraded connections (101 Switching Protocols: WebSocket) ended, by "
			     "server zone: counted in the requests, kept out of their time",
			     NULL, PCPU_METRIC_COUNTER, 1, server);
	t->upgraded_duration = ngx_http_pcpu_family(log, "nginx_http_upgraded_duration_seconds",
				      "How long upgraded connections lasted, by server zone",
				      "seconds", PCPU_METRIC_HISTOGRAM, 1, server);
	t->ssl_handshakes = ngx_http_pcpu_family(log, "nginx_http_ssl_handshakes",
				   "SSL/TLS connections that made a request, by server zone (counted "
				   "at their first request)",
				   NULL, PCPU_METRIC_COUNTER, 1, server);
	t->ssl_reuses = ngx_http_pcpu_family(log, "nginx_http_ssl_session_reuses",
			       "Of those, the handshakes that resumed a session", NULL,
			       PCPU_METRIC_COUNTER, 1, server);
	t->ssl_failed = ngx_http_pcpu_family(log, "nginx_http_ssl_handshakes_failed",
			       "SSL/TLS handshakes begun and never done, by server zone (SNI's "
			       "server, else the address's default): refused, aborted by the "
			       "client, cut off or timed out",
			       NULL, PCPU_METRIC_COUNTER, 1, server);
	t->conn = ngx_http_pcpu_family(log, "nginx_connections",
			 "Client connections by state, as stub_status gives them: active, "
			 "reading, writing, waiting (sampled every second and at each scrape)",
			 NULL, PCPU_METRIC_GAUGE, 1, state);
	t->conn_accepted = ngx_http_pcpu_family(log, "nginx_connections_accepted",
				  "Client connections accepted (stub_status's accepts)", NULL,
				  PCPU_METRIC_COUNTER, 0, NULL);
	t->conn_handled = ngx_http_pcpu_family(log, "nginx_connections_handled",
				 "Client connections handled (stub_status's handled)", NULL,
				 PCPU_METRIC_COUNTER, 0, NULL);
	t->zp_weight = ngx_http_pcpu_family(log, "nginx_http_upstream_peer_weight",
			      "The weight of a peer of an upstream with a zone", NULL,
			      PCPU_METRIC_GAUGE, 2, zpeer);
	t->zp_backup = ngx_http_pcpu_family(log, "nginx_http_upstream_peer_backup",
			      "1 for a backup peer of an upstream with a zone", NULL,
			      PCPU_METRIC_GAUGE, 2, zpeer);
	t->zp_down = ngx_http_pcpu_family(log, "nginx_http_upstream_peer_down",
			    "1 for a peer marked down, of an upstream with a zone", NULL,
			    PCPU_METRIC_GAUGE, 2, zpeer);
	t->zp_fails = ngx_http_pcpu_family(log, "nginx_http_upstream_peer_fails",
			     "Failed attempts a peer of an upstream with a zone has now (max_fails)",
			     NULL, PCPU_METRIC_GAUGE, 2, zpeer);
	t->zp_unavailable = ngx_http_pcpu_family(log, "nginx_http_upstream_peer_unavailable",
				   "1 while max_fails holds a peer out (for fail_timeout)", NULL,
				   PCPU_METRIC_GAUGE, 2, zpeer);
	t->zp_conns = ngx_http_pcpu_family(log, "nginx_http_upstream_peer_connections",
			     "Connections to a peer of an upstream with a zone, now", NULL,
			     PCPU_METRIC_GAUGE, 2, zpeer);
	t->refused = ngx_http_pcpu_family(log, "nginx_pcpu_series_refused",
			    "Series the module asked for and did not get, by reason: a request "
			    "counted under \"__other__\" (max_keys, zone_full, upstreams, peers) or "
			    "not at all (segment_full: once per request and series; at a reload, "
			    "once per series of the configuration)",
			    NULL, PCPU_METRIC_COUNTER, 1, reason);
	t->f_keys = ngx_http_pcpu_family(log, "nginx_pcpu_keys",
			   "Label values the tree holds, by source: zones (server and location "
			   "zones of the configuration), upstreams (names), peers, filter:NAME "
			   "(a filter's keys); \"__other__\" aside",
			   NULL, PCPU_METRIC_GAUGE, 1, source);
	t->f_keys_max = ngx_http_pcpu_family(log, "nginx_pcpu_keys_max",
			       "The bound of each source of label values from requests "
			       "(pcpu_stats_max_upstreams, pcpu_stats_max_peers, max_keys=)",
			       NULL, PCPU_METRIC_GAUGE, 1, source);
	t->f_keys_reusable = ngx_http_pcpu_family(log, "nginx_pcpu_keys_reusable",
				     "With pcpu_stats_expire: keys of a filter (filter:NAME), or "
				     "peers, at their bound and not seen for the expiry, whose series "
				     "every worker let go: the next new keys take them over, from zero, "
				     "instead of \"__other__\"",
				     NULL, PCPU_METRIC_GAUGE, 1, source);
	t->f_masters = ngx_http_pcpu_family(log, "nginx_pcpu_masters",
			      "nginx masters counting in these statistics: 2 during a binary "
			      "upgrade (expired keys lend their series only while it is 1)",
			      NULL, PCPU_METRIC_GAUGE, 0, NULL);
	t->f_seg_bytes = ngx_http_pcpu_family(log, "nginx_pcpu_segment_bytes",
				"Memory the statistics' segment takes (its file's allocated "
				"blocks), as of the last reload or scrape",
				"bytes", PCPU_METRIC_GAUGE, 0, NULL);
	t->f_series_max = ngx_http_pcpu_family(log, "nginx_pcpu_series_max",
				 "The segment's budget of families and series "
				 "(pcpu_stats_max_series, as the tree was made)",
				 NULL, PCPU_METRIC_GAUGE, 0, NULL);
	return t->server.requests && t->server.responses && t->server.req_bytes &&
			       t->server.resp_bytes && t->server.duration && t->server.cache &&
			       t->location.requests && t->location.responses &&
			       t->location.req_bytes && t->location.resp_bytes &&
			       t->location.duration && t->f_requests && t->f_responses &&
			       t->f_req_bytes && t->f_resp_bytes && t->up_responses && t->up_duration &&
			       t->refused && t->f_keys && t->f_keys_max && t->f_seg_bytes &&
			       t->f_keys_reusable && t->f_masters &&
			       t->f_series_max && t->up_connect && t->up_header && t->up_received &&
			       t->up_sent && t->f_duration && t->f_seen && t->up_seen && t->versions && t->limit_req &&
			       t->limit_conn && t->upgraded && t->upgraded_duration &&
			       t->ssl_handshakes && t->ssl_reuses && t->ssl_failed && t->conn && t->conn_accepted &&
			       t->conn_handled && t->zp_weight && t->zp_backup && t->zp_down &&
			       t->zp_fails && t->zp_unavailable && t->zp_conns
		       ? NGX_OK
		       : NGX_ERROR;
}

/* A new registry with the tree's families; NGX_ERROR logged. */
static ngx_int_t registry(ngx_log_t *log)
{
	ngx_http_pcpu_tree.reg = pcpu_registry_create();
	if (ngx_http_pcpu_tree.reg == NULL) {
		ngx_log_error(level, log, ngx_errno, "pcpu_registry_create() failed");
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
	ngx_uint_t i;

	cfg.index = PCPU_INDEX_CPU;
	cfg.owned_slots = 0;
	if (pcpu_configure(&cfg) != 0) {
		ngx_log_error(level, cycle->log, ngx_errno,
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
		/* The budget: a registration past it is refused (ENOSPC), as
		 * one the file system has no room for. */
		o.max_entries = (size_t)pmcf->max_series;
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
			ngx_log_error(level, cycle->log, 0, "pcpu: publishing \"%s\": %s", name,
				      pcpu_segment_error());
			return NGX_ERROR;
		}
	}
	path = pcpu_segment_path(t->seg);
	t->read_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (t->read_fd == NGX_INVALID_FILE || ngx_fd_info(t->read_fd, &fi) == NGX_FILE_ERROR) {
		ngx_log_error(level, cycle->log, ngx_errno, "pcpu: open \"%s\"", path);
		return NGX_ERROR;
	}
	t->owner = fi.st_uid;
	/* The self-metrics' series, before the configuration's: where the
	 * segment fills up, they are there to say so. */
	for (i = 0; i < NGX_HTTP_PCPU_REASONS; i++)
		t->refused_c[i] = pcpu_family_counter(t->refused, &ngx_http_pcpu_reason_names[i]);
	t->zones = ngx_http_pcpu_source_gauge(t->f_keys, "zones");
	t->upstreams = ngx_http_pcpu_source_gauge(t->f_keys, "upstreams");
	t->peers = ngx_http_pcpu_source_gauge(t->f_keys, "peers");
	t->upstreams_max = ngx_http_pcpu_source_gauge(t->f_keys_max, "upstreams");
	t->peers_max = ngx_http_pcpu_source_gauge(t->f_keys_max, "peers");
	t->seg_bytes = pcpu_family_gauge(t->f_seg_bytes, NULL);
	t->series_max = pcpu_family_gauge(t->f_series_max, NULL);
	if (t->series_max && !t->joined)
		(void)pcpu_gauge_set(t->series_max, pmcf->max_series);
	/* This master counts in the tree (an add: a joined tree's old master
	 * is in it already), until it leaves. */
	t->masters = pcpu_family_gauge(t->f_masters, NULL);
	if (t->masters)
		pcpu_gauge_add(t->masters, 1);
	ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0, "pcpu: statistics in \"%s\"", path);
	return NGX_OK;
}

/* The series every process needs from the start, registered by the master
 * before it forks (the workers inherit the handles): how many were refused
 * (their handles NULL: what they count is not counted). */
static ngx_uint_t zone_series(ngx_http_pcpu_zone_t *z)
{
	ngx_http_pcpu_zone_families_t *f =
		z->location ? &ngx_http_pcpu_tree.location : &ngx_http_pcpu_tree.server;
	const char *v[3] = {z->labels[0], z->labels[1], NULL};
	unsigned n = z->location ? 2 : 1, i;
	ngx_uint_t refused = 0;

	z->req_bytes = pcpu_family_counter(f->req_bytes, v);
	refused += z->req_bytes == NULL;
	z->resp_bytes = pcpu_family_counter(f->resp_bytes, v);
	refused += z->resp_bytes == NULL;
	z->duration = pcpu_family_histogram(f->duration, v);
	refused += z->duration == NULL;
	for (i = 0; i < NGX_HTTP_PCPU_CLASSES; i++) {
		v[n] = ngx_http_pcpu_class_names[i];
		z->classes[i] = pcpu_family_counter(f->responses, v);
		refused += z->classes[i] == NULL;
	}
	return refused;
}

/* No tree: what a failed tree_make() left goes; the module's handlers
 * count nothing (ngx_http_pcpu_tree.reg NULL) and the display answers 503. */
static void tree_off(void)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;

	if (t->seg) {
		(void)pcpu_segment_leave(t->seg);
		t->seg = NULL;
	}
	if (t->reg) {
		pcpu_registry_destroy(t->reg);
		t->reg = NULL;
	}
	if (t->read_fd != NGX_INVALID_FILE) {
		(void)close(t->read_fd);
		t->read_fd = NGX_INVALID_FILE;
	}
	t->joined = 0;
	ngx_memzero(t->refused_c, sizeof(t->refused_c));
	t->zones = t->upstreams = t->peers = t->upstreams_max = t->peers_max = NULL;
	t->seg_bytes = t->series_max = t->masters = t->peers_reusable = NULL;
	t->upstreams_reusable = NULL;
}

ngx_int_t ngx_http_pcpu_tree_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf,
				  ngx_uint_t lvl)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	ngx_http_pcpu_zone_t *z;
	ngx_uint_t refused = 0, zones = 0, nzones = 0;
	pcpu_counter_t c;

	level = lvl;
	if (t->reg && t->seg == NULL) {
		/* A reload dropped the module, this one brings it back: the
		 * tree was left (and removed); a new one. The old registry's
		 * workers are gone with the cycle that dropped it. */
		tree_off();
	}
	if (t->reg == NULL && tree_make(cycle, pmcf) != NGX_OK) {
		tree_off();
		return NGX_ERROR;
	}
	if (export_path(cycle, pcpu_segment_path(t->seg)) != NGX_OK) {
		ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
			      "pcpu: no memory for " TREE_ENV ": a binary upgrade will count anew");
	}
	for (z = pmcf->zones; z; z = z->next) {
		ngx_uint_t n = zone_series(z);

		refused += n;
		zones += n != 0;
		nzones++;
	}
	if (t->zones)
		(void)pcpu_gauge_set(t->zones, (int64_t)nzones);
	ngx_http_pcpu_segment_bytes();
	if (refused == 0)
		return NGX_OK;
	/* Nothing of the configuration is lost but these series' counts: the
	 * zones count what has a series (once per reload, not per zone). */
	lvl = lvl == NGX_LOG_EMERG ? NGX_LOG_EMERG : NGX_LOG_ERR;
	ngx_log_error(lvl, cycle->log, 0,
		      "pcpu: %ui series of %ui zones refused, their counts lost: %s (the "
		      "statistics' segment is full? counted in "
		      "nginx_pcpu_series_refused_total{reason=\"segment_full\"})",
		      refused, zones, pcpu_stats_error());
	c = t->refused_c[NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL];
	if (c)
		pcpu_counter_add(c, (int64_t)refused);
	return NGX_DECLINED;
}

pcpu_gauge_t ngx_http_pcpu_source_gauge(pcpu_family_t *f, const char *source)
{
	return f ? pcpu_family_gauge(f, &source) : NULL;
}

void ngx_http_pcpu_segment_bytes(void)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	ngx_file_info_t fi;

	if (t->seg_bytes && t->read_fd != NGX_INVALID_FILE && ngx_fd_info(t->read_fd, &fi) != NGX_FILE_ERROR)
		(void)pcpu_gauge_set(t->seg_bytes, (int64_t)fi.st_blocks * 512);
}

void ngx_http_pcpu_tree_leave(ngx_cycle_t *cycle)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	int rc;

	if (t->seg == NULL)
		return;
	if (t->masters) {
		pcpu_gauge_add(t->masters, -1);
		t->masters = NULL;
	}
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

void ngx_http_pcpu_refused(ngx_uint_t reason, ngx_log_t *log, const char *what)
{
	/* Per process: the master never calls this (workers start with 0). */
	static ngx_uint_t said[NGX_HTTP_PCPU_REASONS];
	pcpu_counter_t c = ngx_http_pcpu_tree.refused_c[reason];

	if (c)
		pcpu_counter_inc(c);
	if (said[reason]++ || log == NULL)
		return;
	if (reason == NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL) {
		ngx_log_error(NGX_LOG_ERR, log, 0,
			      "pcpu: %s: %s (not counted; said once, counted in "
			      "nginx_pcpu_series_refused_total{reason=\"%s\"})",
			      what, pcpu_stats_error(), ngx_http_pcpu_reason_names[reason]);
	} else {
		ngx_log_error(NGX_LOG_WARN, log, 0,
			      "pcpu: %s: past the bound, counted under \"" NGX_HTTP_PCPU_OTHER
			      "\" (said once, counted in nginx_pcpu_series_refused_total{reason=\"%s\"})",
			      what, ngx_http_pcpu_reason_names[reason]);
	}
}

pcpu_counter_t ngx_http_pcpu_lazy_counter(pcpu_counter_t *slot, pcpu_family_t *f,
					  const char *const *v, ngx_log_t *log, const char *what)
{
	if (*slot == NULL) {
		*slot = pcpu_family_counter(f, v);
		if (*slot == NULL)
			ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, log, what);
	}
	return *slot;
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
		ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, log, "a status code's series");
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
		ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, log, "a cache status's series");
	z->cache[status] = c;
	return c;
#else
	return NULL;
#endif
}

