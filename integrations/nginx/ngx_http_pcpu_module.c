/* SPDX-License-Identifier: MIT */
/*
 * ngx_http_pcpu_module: nginx's traffic statistics in a pcpu shared
 * registry, one for the master and every worker (ngx_http_pcpu_module.h
 * says which file does what; README.md, "nginx", how to use it).
 *
 *   load_module modules/ngx_http_pcpu_module.so;
 *   http {
 *       pcpu_stats on;                               # http, server, location
 *       pcpu_stats_filter country $geoip_country;    # a user key (any value)
 *       server {
 *           location = /status { pcpu_stats_display; }
 *       }
 *   }
 *
 * Counting happens in the log phase, where the access log writes its line,
 * on what the access log logs: the status ($status), the bytes sent
 * ($bytes_sent), the request's length ($request_length), the request time
 * ($request_time, milliseconds). Each count is an rseq add into the CPU's
 * copy of the tree's one counter: no lock, no atomic instruction, no
 * shared cache line between workers (VTS takes a shared-memory mutex for
 * every key of every request).
 */
#include "ngx_http_pcpu_module.h"

static ngx_int_t ngx_http_pcpu_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_pcpu_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_pcpu_create_srv_conf(ngx_conf_t *cf);
static void *ngx_http_pcpu_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_pcpu_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_pcpu_stats(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_pcpu_segment(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_pcpu_init_module(ngx_cycle_t *cycle);
static ngx_int_t ngx_http_pcpu_init_process(ngx_cycle_t *cycle);
static void ngx_http_pcpu_exit_master(ngx_cycle_t *cycle);

static ngx_conf_num_bounds_t ngx_http_pcpu_bound = {ngx_conf_check_num_bounds, 1, 1000000};
static ngx_conf_num_bounds_t ngx_http_pcpu_series_bound = {ngx_conf_check_num_bounds, 100, 16777216};

static ngx_command_t ngx_http_pcpu_commands[] = {
	{ngx_string("pcpu_stats"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
	 ngx_http_pcpu_stats, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
	{ngx_string("pcpu_stats_filter"),
	 NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_2MORE,
	 ngx_http_pcpu_filter_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
	{ngx_string("pcpu_stats_display"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS | NGX_CONF_TAKE1,
	 ngx_http_pcpu_display_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
	{ngx_string("pcpu_stats_segment"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE12,
	 ngx_http_pcpu_segment, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
	{ngx_string("pcpu_stats_strict"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG, ngx_conf_set_flag_slot,
	 NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_pcpu_main_conf_t, strict), NULL},
	{ngx_string("pcpu_stats_max_upstreams"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_num_slot,
	 NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_pcpu_main_conf_t, max_upstreams),
	 &ngx_http_pcpu_bound},
	{ngx_string("pcpu_stats_max_peers"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_num_slot,
	 NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_pcpu_main_conf_t, max_peers),
	 &ngx_http_pcpu_bound},
	{ngx_string("pcpu_stats_max_series"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_num_slot,
	 NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_pcpu_main_conf_t, max_series),
	 &ngx_http_pcpu_series_bound},
	{ngx_string("pcpu_stats_expire"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_sec_slot,
	 NGX_HTTP_MAIN_CONF_OFFSET, offsetof(ngx_http_pcpu_main_conf_t, expire), NULL},
	{ngx_string("pcpu_stats_upstream_timing"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG,
	 ngx_conf_set_flag_slot, NGX_HTTP_MAIN_CONF_OFFSET,
	 offsetof(ngx_http_pcpu_main_conf_t, upstream_timing), NULL},
	ngx_null_command};

static ngx_http_module_t ngx_http_pcpu_module_ctx = {
	NULL,                           /* preconfiguration */
	ngx_http_pcpu_postconfiguration, /* postconfiguration */
	ngx_http_pcpu_create_main_conf, /* create main configuration */
	NULL,                           /* init main configuration */
	ngx_http_pcpu_create_srv_conf,  /* create server configuration */
	NULL,                           /* merge server configuration */
	ngx_http_pcpu_create_loc_conf,  /* create location configuration */
	ngx_http_pcpu_merge_loc_conf,   /* merge location configuration */
};

ngx_module_t ngx_http_pcpu_module = {
	NGX_MODULE_V1,
	&ngx_http_pcpu_module_ctx,  /* module context */
	ngx_http_pcpu_commands,     /* module directives */
	NGX_HTTP_MODULE,            /* module type */
	NULL,                       /* init master (never called by nginx) */
	ngx_http_pcpu_init_module,  /* init module: in the master, per cycle */
	ngx_http_pcpu_init_process, /* init process */
	NULL,                       /* init thread */
	NULL,                       /* exit thread */
	NULL,                       /* exit process */
	ngx_http_pcpu_exit_master,  /* exit master */
	NGX_MODULE_V1_PADDING};

/* ---- configuration ------------------------------------------------------------ */

static void *ngx_http_pcpu_create_main_conf(ngx_conf_t *cf)
{
	ngx_http_pcpu_main_conf_t *pmcf = ngx_pcalloc(cf->pool, sizeof(*pmcf));

	if (pmcf == NULL)
		return NULL;
	pmcf->group = NGX_CONF_UNSET;
	pmcf->strict = NGX_CONF_UNSET;
	pmcf->max_upstreams = NGX_CONF_UNSET;
	pmcf->max_peers = NGX_CONF_UNSET;
	pmcf->max_series = NGX_CONF_UNSET;
	pmcf->upstream_timing = NGX_CONF_UNSET;
	pmcf->expire = NGX_CONF_UNSET;
	pmcf->limit_req_var = pmcf->limit_conn_var = NGX_ERROR;
	if (ngx_array_init(&pmcf->defs, cf->pool, 4, sizeof(ngx_http_pcpu_filter_def_t *)) != NGX_OK)
		return NULL;
	return pmcf;
}

static void *ngx_http_pcpu_create_srv_conf(ngx_conf_t *cf)
{
	return ngx_pcalloc(cf->pool, sizeof(ngx_http_pcpu_srv_conf_t));
}

static void *ngx_http_pcpu_create_loc_conf(ngx_conf_t *cf)
{
	ngx_http_pcpu_loc_conf_t *plcf = ngx_pcalloc(cf->pool, sizeof(*plcf));

	if (plcf == NULL)
		return NULL;
	plcf->enable = NGX_CONF_UNSET;
	plcf->filters = NGX_CONF_UNSET_PTR;
	return plcf;
}

/* A zone for these labels, added to the configuration's list. */
static ngx_http_pcpu_zone_t *zone_new(ngx_conf_t *cf, ngx_str_t *server, ngx_str_t *location)
{
	ngx_http_pcpu_main_conf_t *pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_pcpu_module);
	ngx_http_pcpu_zone_t *z = ngx_pcalloc(cf->pool, sizeof(*z));
	ngx_str_t v;

	if (z == NULL || ngx_http_pcpu_label(cf->pool, server, &v) != NGX_OK ||
	    (z->labels[0] = ngx_http_pcpu_cstr(cf->pool, &v)) == NULL)
		return NULL;
	if (location) {
		if (ngx_http_pcpu_label(cf->pool, location, &v) != NGX_OK ||
		    (z->labels[1] = ngx_http_pcpu_cstr(cf->pool, &v)) == NULL)
			return NULL;
		z->location = 1;
	}
	z->next = pmcf->zones;
	pmcf->zones = z;
	return z;
}

static char *ngx_http_pcpu_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
	ngx_http_pcpu_loc_conf_t *prev = parent, *conf = child;
	ngx_http_core_srv_conf_t *cscf;
	ngx_http_pcpu_srv_conf_t *pscf;
	ngx_str_t name;

	ngx_conf_merge_value(conf->enable, prev->enable, 0);
	ngx_conf_merge_ptr_value(conf->filters, prev->filters, NULL);
	if (!conf->enable)
		return NGX_CONF_OK;
	/* The zone of the server being merged (ngx_http_merge_servers() sets
	 * cf->ctx's srv_conf to it), made once per server{}. */
	pscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_pcpu_module);
	if (pscf->zone == NULL) {
		cscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_core_module);
		name = cscf->server_name;
		if (name.len == 0) {
			ngx_str_set(&name, "_");
		}
		pscf->zone = zone_new(cf, &name, NULL);
		if (pscf->zone == NULL)
			return NGX_CONF_ERROR;
	}
	conf->server = pscf->zone;
	if (conf->location_stats && conf->location == NULL) {
		name.data = (u_char *)pscf->zone->labels[0];
		name.len = ngx_strlen(name.data);
		conf->location = zone_new(cf, &name, &conf->location_name);
		if (conf->location == NULL)
			return NGX_CONF_ERROR;
	}
	return NGX_CONF_OK;
}

/* `pcpu_stats on|off`; written in a location, `on` also counts the
 * location in a zone of its own (labels server, location). */
static char *ngx_http_pcpu_stats(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_pcpu_loc_conf_t *plcf = conf;
	ngx_http_pcpu_main_conf_t *pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_pcpu_module);
	ngx_http_core_loc_conf_t *clcf;
	const char *prefix = "";
	char *rv;
	u_char *p;

	rv = ngx_conf_set_flag_slot(cf, cmd, conf);
	if (rv != NGX_CONF_OK)
		return rv;
	pmcf->used = 1;
	if (!plcf->enable || cf->cmd_type != NGX_HTTP_LOC_CONF)
		return NGX_CONF_OK;
	clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
	/* The location as written: "= /x", "~ \.php$", "^~ /img/", "/", "@fallback". */
	if (clcf->exact_match)
		prefix = "= ";
#if (NGX_PCRE)
	else if (clcf->regex)
		prefix = "~ ";
#endif
	else if (clcf->noregex)
		prefix = "^~ ";
	plcf->location_name.len = ngx_strlen(prefix) + clcf->name.len;
	plcf->location_name.data = p = ngx_pnalloc(cf->pool, plcf->location_name.len);
	if (p == NULL)
		return NGX_CONF_ERROR;
	p = ngx_cpymem(p, prefix, ngx_strlen(prefix));
	ngx_memcpy(p, clcf->name.data, clcf->name.len);
	plcf->location_stats = 1;
	return NGX_CONF_OK;
}

/* `pcpu_stats_segment NAME [group=GROUP]` */
static char *ngx_http_pcpu_segment(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_pcpu_main_conf_t *pmcf = conf;
	ngx_str_t *value = cf->args->elts;
	struct group *gr;
	size_t i;

	if (pmcf->segment.data)
		return "is duplicate";
	if (value[1].len == 0 || value[1].len > PCPU_SEGMENT_NAME_MAX ||
	    value[1].data[0] == '.' || value[1].data[0] == '-')
		goto invalid;
	for (i = 0; i < value[1].len; i++) {
		u_char c = value[1].data[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			goto invalid;
	}
	pmcf->segment = value[1];
	if (cf->args->nelts == 3) {
		if (value[2].len <= 6 || ngx_strncmp(value[2].data, "group=", 6) != 0) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"", &value[2]);
			return NGX_CONF_ERROR;
		}
		gr = getgrnam((char *)value[2].data + 6);
		if (gr == NULL) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "pcpu_stats_segment: no group \"%s\"",
					   value[2].data + 6);
			return NGX_CONF_ERROR;
		}
		pmcf->group = (ngx_int_t)gr->gr_gid;
	}
	return NGX_CONF_OK;
invalid:
	ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
			   "pcpu_stats_segment: \"%V\": 1 to %d characters of [A-Za-z0-9_.-], not "
			   "starting with '.' or '-'",
			   &value[1], PCPU_SEGMENT_NAME_MAX);
	return NGX_CONF_ERROR;
}

/* ---- counting ------------------------------------------------------------------- */

/* $status, as the access log writes it. */
static ngx_uint_t request_status(ngx_http_request_t *r)
{
	if (r->err_status)
		return r->err_status;
	if (r->headers_out.status)
		return r->headers_out.status;
	if (r->http_version == NGX_HTTP_VERSION_9)
		return 9;
	return 0;
}

static void zone_count(ngx_http_request_t *r, ngx_http_pcpu_zone_t *z, ngx_uint_t status,
		       off_t received, off_t sent, int64_t us)
{
	pcpu_counter_t c = ngx_http_pcpu_zone_code(z, status, r->connection->log);

	if (c)
		pcpu_counter_inc(c);
	if (z->classes[ngx_http_pcpu_class(status)])
		pcpu_counter_inc(z->classes[ngx_http_pcpu_class(status)]);
	if (z->req_bytes)
		pcpu_counter_add(z->req_bytes, (int64_t)received);
	if (z->resp_bytes)
		pcpu_counter_add(z->resp_bytes, (int64_t)sent);
	if (z->duration && us >= 0)
		pcpu_histogram_record(z->duration, us);
}

static ngx_int_t ngx_http_pcpu_log_handler(ngx_http_request_t *r)
{
	ngx_http_pcpu_loc_conf_t *plcf = ngx_http_get_module_loc_conf(r, ngx_http_pcpu_module);
	ngx_uint_t status, upgraded;
	int64_t us;
	ngx_time_t *tp;
	ngx_msec_int_t ms;
	off_t sent, received;

	if (!plcf->enable || plcf->server == NULL || ngx_http_pcpu_tree.reg == NULL)
		return NGX_OK;
	/* Between events: no handle in flight (reuse.c). */
	ngx_http_pcpu_reuse_ack();
	status = request_status(r);
	sent = r->connection->sent;
	received = r->request_length;
	/* $request_time: milliseconds, as nginx keeps time; recorded in
	 * microseconds so that the histogram's zero bucket holds only 0. */
	tp = ngx_timeofday();
	ms = (ngx_msec_int_t)((tp->sec - r->start_sec) * 1000 + (tp->msec - r->start_msec));
	if (ms < 0)
		ms = 0;
	us = (int64_t)ms * 1000;
	/* A connection upgraded through an upstream (WebSocket) is logged
	 * when it ends: its time is its life, not a request's latency. It
	 * counts as a request (the access log has its line) and on its own
	 * (server.c), and its time stays out of the request-time
	 * histograms (us < 0 below). */
	upgraded = r->upstream && r->upstream->upgrade;
	zone_count(r, plcf->server, status, received, sent, upgraded ? -1 : us);
	ngx_http_pcpu_server_count(r, ngx_http_get_module_main_conf(r, ngx_http_pcpu_module),
				   plcf->server, upgraded, us);
	if (plcf->location)
		zone_count(r, plcf->location, status, received, sent, upgraded ? -1 : us);
	if (plcf->filters && plcf->filters->nelts)
		ngx_http_pcpu_filters(r, plcf->filters, status, received, sent, upgraded ? -1 : us);
	if (r->upstream) {
		ngx_http_pcpu_upstreams(r, upgraded);
#if (NGX_HTTP_CACHE)
		if (r->upstream->cache_status) {
			pcpu_counter_t c = ngx_http_pcpu_zone_cache(plcf->server, r->upstream->cache_status,
								    r->connection->log);

			if (c)
				pcpu_counter_inc(c);
		}
#endif
	}
	return NGX_OK;
}

static ngx_int_t ngx_http_pcpu_postconfiguration(ngx_conf_t *cf)
{
	ngx_http_pcpu_main_conf_t *pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_pcpu_module);
	ngx_http_core_main_conf_t *cmcf;
	ngx_http_handler_pt *h;

	ngx_conf_init_value(pmcf->max_upstreams, NGX_HTTP_PCPU_MAX_UPSTREAMS);
	ngx_conf_init_value(pmcf->max_peers, NGX_HTTP_PCPU_MAX_PEERS);
	ngx_conf_init_value(pmcf->max_series, NGX_HTTP_PCPU_MAX_SERIES);
	ngx_conf_init_value(pmcf->upstream_timing, 1);
	ngx_conf_init_value(pmcf->expire, 0);
	if (!pmcf->used)
		return NGX_OK;
	cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
	h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
	if (h == NULL)
		return NGX_ERROR;
	*h = ngx_http_pcpu_log_handler;
	ngx_http_pcpu_server_conf(cf, pmcf);
	if (ngx_http_pcpu_connections_conf(cf, pmcf) != NGX_OK)
		return NGX_ERROR;
	return ngx_http_pcpu_filter_zone(cf, pmcf);
}

/* ---- the process tree's life -------------------------------------------------- */

/* A cycle's pool goes: if no later cycle set the module up, the module is
 * no longer configured (a reload without it) or nginx exits: the master
 * leaves the tree. A new cycle that failed to start goes too; the running
 * one stays the module's. */
static void cycle_gone(void *data)
{
	ngx_cycle_t *gone = data;
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;

	if (t->prev == gone)
		t->prev = NULL; /* never compared with a cycle reusing its address */
	if (t->cycle != gone || (ngx_process != NGX_PROCESS_MASTER && ngx_process != NGX_PROCESS_SINGLE))
		return;
	if (t->prev && t->prev == (ngx_cycle_t *)ngx_cycle) {
		/* A reload that failed after we set its cycle up: the running
		 * cycle is the module's still. */
		t->cycle = t->prev;
		t->prev = NULL;
		return;
	}
	ngx_http_pcpu_tree_leave(gone);
}

/* Statistics never take nginx down. nginx calls exit(1) when an
 * init_module fails, at startup and -- the new cycle committed, the old
 * workers left orphans -- at a reload too. So after startup nothing here
 * fails: what cannot be had is logged, counted where it can be
 * (nginx_pcpu_series_refused_total) and not counted. At startup (nginx's
 * first cycle, or a binary upgrade's new master), a tree that cannot be
 * made leaves nginx serving with statistics off and an alert, unless
 * `pcpu_stats_strict on;` asks that nginx then not start (nor start with
 * series refused). */
static ngx_int_t ngx_http_pcpu_init_module(ngx_cycle_t *cycle)
{
	ngx_http_conf_ctx_t *ctx;
	ngx_http_pcpu_main_conf_t *pmcf;
	ngx_pool_cleanup_t *cln;
	ngx_uint_t strict;
	ngx_int_t rc;

	/* The master (or a single process) sets up; not `nginx -t`, nor
	 * `nginx -s reload`, which parse the configuration too. */
	if (ngx_test_config ||
	    (ngx_process != NGX_PROCESS_SINGLE && ngx_process != NGX_PROCESS_MASTER))
		return NGX_OK;
	/* Nothing sampled unless this cycle says so below: the last cycle's
	 * shared zones are unmapped once this one is set up. */
	ngx_http_pcpu_connections_init(cycle, NULL);
	ngx_http_pcpu_peers_init(NULL);
	ctx = (ngx_http_conf_ctx_t *)ngx_get_conf(cycle->conf_ctx, ngx_http_module);
	if (ctx == NULL)
		return NGX_OK; /* no http{} */
	pmcf = ctx->main_conf[ngx_http_pcpu_module.ctx_index];
	if (!pmcf->used)
		return NGX_OK;
	strict = pmcf->strict == 1 && ngx_is_init_cycle(cycle->old_cycle);
	ngx_http_pcpu_tree.expire = pmcf->expire; /* the workers forked next have it */
	rc = ngx_http_pcpu_tree_init(cycle, pmcf, strict ? NGX_LOG_EMERG : NGX_LOG_ALERT);
	if (rc == NGX_ERROR) {
		if (strict)
			return NGX_ERROR;
		ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
			      "pcpu: statistics off: nginx serves on, counting nothing; the display "
			      "answers 503 (a reload tries again; pcpu_stats_strict on; makes a "
			      "start fail instead)");
	} else {
		ngx_http_pcpu_connections_init(cycle, pmcf);
		ngx_http_pcpu_peers_init(cycle);
		if ((ngx_http_pcpu_filter_init(cycle, pmcf) != NGX_OK || rc != NGX_OK) && strict)
			return NGX_ERROR;
	}
	cln = ngx_pool_cleanup_add(cycle->pool, 0);
	if (cln == NULL) {
		/* The tree is then left at exit only (exit_master). */
		ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "pcpu: no memory for the cycle's cleanup");
	} else {
		cln->handler = cycle_gone;
		cln->data = cycle;
	}
	ngx_http_pcpu_tree.prev = ngx_http_pcpu_tree.cycle;
	ngx_http_pcpu_tree.cycle = cycle;
	return NGX_OK;
}

static ngx_int_t ngx_http_pcpu_init_process(ngx_cycle_t *cycle)
{
	/* The worker's first add costs what every add costs. */
	if (ngx_http_pcpu_tree.reg) {
		(void)pcpu_thread_init();
		ngx_http_pcpu_reuse_process(cycle);
		ngx_http_pcpu_connections_process(cycle);
	}
	return NGX_OK;
}

static void ngx_http_pcpu_exit_master(ngx_cycle_t *cycle)
{
	ngx_http_pcpu_tree_leave(cycle);
}
