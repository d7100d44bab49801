/* SPDX-License-Identifier: MIT */
/*
 * ngx_stream_pcpu_module: nginx's stream (TCP/UDP) sessions in the same
 * pcpu registry tree as ngx_http_pcpu_module's, on the same display.
 *
 *   load_module modules/ngx_http_pcpu_module.so;     # first: the tree is its
 *   load_module modules/ngx_stream_pcpu_module.so;
 *   http {
 *       pcpu_stats on;                               # makes the tree
 *       server { location = /metrics { pcpu_stats_display; } }
 *   }
 *   stream {
 *       pcpu_stats on;                               # stream, server
 *       server { listen 12345; proxy_pass backend; }
 *   }
 *
 * Per stream server (labelled by its first `listen`, as the configuration
 * writes it: stream servers have no name):
 *   nginx_stream_sessions_total{server,status}   sessions ended, by $status
 *   nginx_stream_received_bytes_total{server}    bytes from clients ($bytes_received)
 *   nginx_stream_sent_bytes_total{server}        bytes to clients ($bytes_sent)
 *   nginx_stream_session_duration_seconds{server}  $session_time, a histogram
 *                                                with the http module's layout
 *
 * Counted in the log phase, where the stream access log writes its line,
 * from the same values, so the counts equal the access log's. Each count
 * is the http module's: an rseq add into the CPU's copy of the tree's one
 * counter, no lock, no atomic instruction.
 *
 * The tree is the http module's (ngx_http_pcpu_tree, resolved when nginx
 * loads this module after it: nginx opens modules RTLD_GLOBAL), made by
 * the master when an http{} block uses the module. Without one, stream
 * servers are not counted and the master says so once at start and at each
 * reload; nothing else changes.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_stream.h>

#include <pcpu/pcpu.h>

#include "ngx_http_pcpu_module.h" /* the tree, ngx_http_pcpu_family() */

#define STATUSES 1000 /* $status is three digits */

typedef struct ngx_stream_pcpu_srv_conf_s ngx_stream_pcpu_srv_conf_t;
struct ngx_stream_pcpu_srv_conf_s {
	ngx_flag_t enable;           /* pcpu_stats on|off */
	const char *label;           /* the server's first listen, NUL-terminated */
	/* Registered by the master before it forks (every process has them). */
	pcpu_counter_t received, sent;
	pcpu_histogram_t *duration;
	/* Per process, filled as statuses are met. */
	pcpu_counter_t *statuses;    /* STATUSES of them, or NULL */
	ngx_stream_pcpu_srv_conf_t *next; /* every counted server of the configuration */
};

typedef struct {
	ngx_stream_pcpu_srv_conf_t *servers; /* the counted ones */
} ngx_stream_pcpu_main_conf_t;

static ngx_int_t ngx_stream_pcpu_postconfiguration(ngx_conf_t *cf);
static void *ngx_stream_pcpu_create_main_conf(ngx_conf_t *cf);
static void *ngx_stream_pcpu_create_srv_conf(ngx_conf_t *cf);
static char *ngx_stream_pcpu_merge_srv_conf(ngx_conf_t *cf, void *parent, void *child);
static ngx_int_t ngx_stream_pcpu_init_module(ngx_cycle_t *cycle);

static ngx_command_t ngx_stream_pcpu_commands[] = {
	{ngx_string("pcpu_stats"), NGX_STREAM_MAIN_CONF | NGX_STREAM_SRV_CONF | NGX_CONF_FLAG,
	 ngx_conf_set_flag_slot, NGX_STREAM_SRV_CONF_OFFSET,
	 offsetof(ngx_stream_pcpu_srv_conf_t, enable), NULL},
	ngx_null_command};

static ngx_stream_module_t ngx_stream_pcpu_module_ctx = {
	NULL,                              /* preconfiguration */
	ngx_stream_pcpu_postconfiguration, /* postconfiguration */
	ngx_stream_pcpu_create_main_conf,  /* create main configuration */
	NULL,                              /* init main configuration */
	ngx_stream_pcpu_create_srv_conf,   /* create server configuration */
	ngx_stream_pcpu_merge_srv_conf,    /* merge server configuration */
};

ngx_module_t ngx_stream_pcpu_module = {
	NGX_MODULE_V1,
	&ngx_stream_pcpu_module_ctx, /* module context */
	ngx_stream_pcpu_commands,    /* module directives */
	NGX_STREAM_MODULE,           /* module type */
	NULL,                        /* init master */
	ngx_stream_pcpu_init_module, /* init module: in the master, per cycle */
	NULL,                        /* init process */
	NULL,                        /* init thread */
	NULL,                        /* exit thread */
	NULL,                        /* exit process */
	NULL,                        /* exit master */
	NGX_MODULE_V1_PADDING};

/* The stream families, in the registry they were made in (a reload that
 * made a new tree makes them again). */
static struct {
	pcpu_registry_t *reg;
	pcpu_family_t *sessions, *received, *sent, *duration;
} fam;

/* ---- configuration ------------------------------------------------------------ */

static void *ngx_stream_pcpu_create_main_conf(ngx_conf_t *cf)
{
	return ngx_pcalloc(cf->pool, sizeof(ngx_stream_pcpu_main_conf_t));
}

static void *ngx_stream_pcpu_create_srv_conf(ngx_conf_t *cf)
{
	ngx_stream_pcpu_srv_conf_t *conf = ngx_pcalloc(cf->pool, sizeof(*conf));

	if (conf == NULL)
		return NULL;
	conf->enable = NGX_CONF_UNSET;
	return conf;
}

static char *ngx_stream_pcpu_merge_srv_conf(ngx_conf_t *cf, void *parent, void *child)
{
	ngx_stream_pcpu_srv_conf_t *prev = parent, *conf = child;

	(void)cf;
	ngx_conf_merge_value(conf->enable, prev->enable, 0);
	return NGX_CONF_OK;
}

static ngx_int_t ngx_stream_pcpu_log_handler(ngx_stream_session_t *s);

/* Each counted server's label, its first listen's text, and the log
 * phase's handler. */
static ngx_int_t ngx_stream_pcpu_postconfiguration(ngx_conf_t *cf)
{
	ngx_stream_core_main_conf_t *cmcf = ngx_stream_conf_get_module_main_conf(cf, ngx_stream_core_module);
	ngx_stream_pcpu_main_conf_t *pmcf = ngx_stream_conf_get_module_main_conf(cf, ngx_stream_pcpu_module);
	ngx_stream_listen_t *l = cmcf->listen.elts;
	ngx_stream_handler_pt *h;
	ngx_stream_pcpu_srv_conf_t *conf;
	ngx_str_t v;
	ngx_uint_t i, any = 0;

	for (i = 0; i < cmcf->listen.nelts; i++) {
		conf = l[i].ctx->srv_conf[ngx_stream_pcpu_module.ctx_index];
		if (!conf->enable || conf->label)
			continue;
		if (ngx_http_pcpu_label(cf->pool, &l[i].addr_text, &v) != NGX_OK ||
		    (conf->label = ngx_http_pcpu_cstr(cf->pool, &v)) == NULL)
			return NGX_ERROR;
		conf->next = pmcf->servers;
		pmcf->servers = conf;
		any = 1;
	}
	if (!any)
		return NGX_OK;
	h = ngx_array_push(&cmcf->phases[NGX_STREAM_LOG_PHASE].handlers);
	if (h == NULL)
		return NGX_ERROR;
	*h = ngx_stream_pcpu_log_handler;
	return NGX_OK;
}

/* ---- the tree's series ---------------------------------------------------------- */

static ngx_int_t families(ngx_log_t *log)
{
	static const char *const server[] = {"server", "status"};

	if (fam.reg == ngx_http_pcpu_tree.reg && fam.sessions)
		return NGX_OK;
	fam.reg = ngx_http_pcpu_tree.reg;
	fam.sessions = ngx_http_pcpu_family(log, "nginx_stream_sessions", "Stream sessions ended, by server and status ($status)",
			      NULL, PCPU_METRIC_COUNTER, 2, server);
	fam.received = ngx_http_pcpu_family(log, "nginx_stream_received_bytes",
			      "Bytes received from stream clients ($bytes_received), by server", "bytes",
			      PCPU_METRIC_COUNTER, 1, server);
	fam.sent = ngx_http_pcpu_family(log, "nginx_stream_sent_bytes",
			  "Bytes sent to stream clients ($bytes_sent), by server", "bytes",
			  PCPU_METRIC_COUNTER, 1, server);
	fam.duration = ngx_http_pcpu_family(log, "nginx_stream_session_duration_seconds",
			      "Stream session time ($session_time), by server", "seconds",
			      PCPU_METRIC_HISTOGRAM, 1, server);
	if (fam.sessions && fam.received && fam.sent && fam.duration)
		return NGX_OK;
	fam.reg = NULL;
	fam.sessions = NULL;
	return NGX_ERROR;
}

/* In the master, per cycle, after the http module's (loaded first) made
 * or kept the tree: the families, and each counted server's series that
 * every process needs from the start. Never fails the cycle: statistics
 * do not stop nginx; what cannot be counted is said once. */
static ngx_int_t ngx_stream_pcpu_init_module(ngx_cycle_t *cycle)
{
	ngx_stream_pcpu_main_conf_t *pmcf;
	ngx_stream_pcpu_srv_conf_t *conf;
	const char *v[1];

	if (ngx_test_config ||
	    (ngx_process != NGX_PROCESS_SINGLE && ngx_process != NGX_PROCESS_MASTER))
		return NGX_OK;
	pmcf = ngx_stream_cycle_get_module_main_conf(cycle, ngx_stream_pcpu_module);
	if (pmcf == NULL || pmcf->servers == NULL)
		return NGX_OK; /* no stream{}, or nothing counted */
	if (ngx_http_pcpu_tree.reg == NULL || ngx_http_pcpu_tree.seg == NULL) {
		ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
			      "pcpu: stream servers are not counted: their statistics go in the http "
			      "module's tree, and no http{} block here uses it (pcpu_stats on, or "
			      "pcpu_stats_display)");
		for (conf = pmcf->servers; conf; conf = conf->next)
			conf->enable = 0;
		return NGX_OK;
	}
	if (families(cycle->log) != NGX_OK) {
		for (conf = pmcf->servers; conf; conf = conf->next)
			conf->enable = 0;
		return NGX_OK;
	}
	for (conf = pmcf->servers; conf; conf = conf->next) {
		v[0] = conf->label;
		conf->received = pcpu_family_counter(fam.received, v);
		conf->sent = pcpu_family_counter(fam.sent, v);
		conf->duration = pcpu_family_histogram(fam.duration, v);
		if (!conf->received || !conf->sent || !conf->duration) {
			ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
				      "pcpu: stream server \"%s\" is not counted: %s", conf->label,
				      pcpu_stats_error());
			conf->enable = 0;
		}
	}
	return NGX_OK;
}

/* The session-status series of `conf` in this process, made when first
 * met; NULL (logged once per process) if the tree refuses it. */
static pcpu_counter_t status_counter(ngx_stream_pcpu_srv_conf_t *conf, ngx_uint_t status,
				     ngx_log_t *log)
{
	char code[NGX_INT_T_LEN + 1];
	const char *v[2];
	pcpu_counter_t c;

	if (status >= STATUSES)
		status = 0; /* never: nginx's are 200, 400, 403, 500, 502, 503 */
	if (conf->statuses && conf->statuses[status])
		return conf->statuses[status];
	if (conf->statuses == NULL) {
		/* This process's: the configuration's memory is its own copy. */
		conf->statuses = ngx_calloc(STATUSES * sizeof(pcpu_counter_t), log);
		if (conf->statuses == NULL)
			return NULL;
	}
	ngx_sprintf((u_char *)code, "%03ui%Z", status);
	v[0] = conf->label;
	v[1] = code;
	c = pcpu_family_counter(fam.sessions, v);
	if (c == NULL) /* said once, counted in nginx_pcpu_series_refused_total */
		ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, log, "a stream status's series");
	conf->statuses[status] = c;
	return c;
}

static ngx_int_t ngx_stream_pcpu_log_handler(ngx_stream_session_t *s)
{
	ngx_stream_pcpu_srv_conf_t *conf = ngx_stream_get_module_srv_conf(s, ngx_stream_pcpu_module);
	ngx_time_t *tp;
	ngx_msec_int_t ms;
	pcpu_counter_t c;

	if (!conf->enable || conf->duration == NULL)
		return NGX_OK;
	/* $session_time's arithmetic (ngx_stream_variables.c), in ms. */
	tp = ngx_timeofday();
	ms = (ngx_msec_int_t)((tp->sec - s->start_sec) * 1000 + (tp->msec - s->start_msec));
	if (ms < 0)
		ms = 0;
	c = status_counter(conf, s->status, s->connection->log);
	if (c)
		pcpu_counter_inc(c);
	pcpu_counter_add(conf->received, (int64_t)s->received);
	pcpu_counter_add(conf->sent, (int64_t)s->connection->sent);
	pcpu_histogram_record(conf->duration, (int64_t)ms * 1000);
	return NGX_OK;
}
