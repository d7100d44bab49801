/* SPDX-License-Identifier: MIT */
/*
 * nginx's traffic statistics in a pcpu shared registry (README.md, "nginx"):
 * what the module's files share.
 *
 *   ngx_http_pcpu_module.c   directives, configuration, the log-phase
 *                            handler that counts every request
 *   ngx_http_pcpu_tree.c     the registry of the process tree: made (or
 *                            joined, after a binary upgrade) by the master,
 *                            its families, the series of each zone, leaving
 *   ngx_http_pcpu_filter.c   user keys (pcpu_stats_filter), upstream names
 *                            and peers: admission under a bound for the
 *                            whole tree, shared by the workers; label values
 *   ngx_http_pcpu_reuse.c    expired filter keys lend their series to new
 *                            keys (pcpu_stats_expire at a filter's bound)
 *   ngx_http_pcpu_display.c  pcpu_stats_display: Prometheus text,
 *                            OpenMetrics, JSON, the HTML status page
 *   ngx_http_pcpu_upstream.c upstream peers: responses, times, bytes
 *   ngx_http_pcpu_connections.c  stub_status's connections, sampled
 *   ngx_http_pcpu_peers.c    the state of upstream zones' peers, sampled
 *   ngx_http_pcpu_server.c   per server zone: HTTP versions, limit_req and
 *                            limit_conn outcomes, upgraded connections, SSL
 *
 * Where things live. The registry is the master's, made once per master
 * process (module globals: the module is never unloaded, see `config`) and
 * inherited by every worker at fork(); its series are the tree's, so a
 * series a worker registers is found, not made again, by the others.
 * Handles are per process (a worker maps the chunks it needs where it
 * likes), so everything that caches them -- a zone's status codes, a
 * filter's keys, the upstream peers -- is filled lazily in each worker, in
 * memory the worker got by fork() (the configuration's, copied on write)
 * or allocated itself. Per-configuration state is in the cycle's pool and
 * goes with the cycle: a reload leaks nothing.
 */
#ifndef NGX_HTTP_PCPU_MODULE_H
#define NGX_HTTP_PCPU_MODULE_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <pcpu/pcpu.h>

/* Bytes of a label value taken from a request or the configuration:
 * longer values are cut (at a character boundary). */
#define NGX_HTTP_PCPU_LABEL_MAX 256
/* The key (or peer) that counts what a bound turned away. */
#define NGX_HTTP_PCPU_OTHER "__other__"
/* Status codes with a cached series per zone: 0..999 (HTTP's are three
 * digits; nginx's own 0, 9, 444, 499 among them). */
#define NGX_HTTP_PCPU_CODES 1000
/* Response classes: 1xx..5xx, then "other" (0, 9, 600 and up). */
#define NGX_HTTP_PCPU_CLASSES 6
/* Cache statuses: ngx_http_cache_status[], 1..7. */
#define NGX_HTTP_PCPU_CACHE_STATUSES 8
/* Default bounds for the whole tree (every worker, across reloads and
 * binary upgrades): a filter's keys (pcpu_stats_filter ... max_keys=N),
 * upstream names (pcpu_stats_max_upstreams), upstream peers
 * (pcpu_stats_max_peers). Past them, "__other__". */
#define NGX_HTTP_PCPU_MAX_KEYS 1000
#define NGX_HTTP_PCPU_MAX_UPSTREAMS 1000
#define NGX_HTTP_PCPU_MAX_PEERS 1024
/* The segment's budget: families and series (pcpu_stats_max_series). */
#define NGX_HTTP_PCPU_MAX_SERIES 131072
/* HTTP versions counted (r->http_version): 0.9, 1.0, 1.1, 2.0, 3.0, other. */
#define NGX_HTTP_PCPU_VERSIONS 6
/* $limit_req_status / $limit_conn_status values: PASSED, DELAYED,
 * REJECTED, DELAYED_DRY_RUN, REJECTED_DRY_RUN. */
#define NGX_HTTP_PCPU_LIMITS 5
/* What admission answers for a key it admits (else a refusal's reason). */
#define NGX_HTTP_PCPU_ADMITTED (-1)

/* Why a series was refused: the values of nginx_pcpu_series_refused_total's
 * label `reason` (ngx_http_pcpu_reason_names[]). */
enum {
	NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, /* the segment's file system is full: not counted */
	NGX_HTTP_PCPU_REFUSED_MAX_KEYS,     /* a filter's max_keys: under "__other__" */
	NGX_HTTP_PCPU_REFUSED_ZONE_FULL,    /* the admission zone is full: "__other__" */
	NGX_HTTP_PCPU_REFUSED_UPSTREAMS,    /* the bound on upstream names: "__other__" */
	NGX_HTTP_PCPU_REFUSED_PEERS,        /* the bound on peers: "__other__" */
	NGX_HTTP_PCPU_REASONS
};

/* A server zone (every server{}) or a location zone (a location with
 * `pcpu_stats on;` written in it). */
typedef struct ngx_http_pcpu_zone_s ngx_http_pcpu_zone_t;
struct ngx_http_pcpu_zone_s {
	const char *labels[2];       /* server[, location]: NUL-terminated */
	ngx_uint_t location;         /* a location zone */
	/* Registered by the master before it forks (every process has them). */
	pcpu_counter_t req_bytes, resp_bytes;
	pcpu_counter_t classes[NGX_HTTP_PCPU_CLASSES];
	pcpu_histogram_t *duration;
	/* Per process, filled as codes and cache statuses are met. */
	pcpu_counter_t *codes; /* NGX_HTTP_PCPU_CODES of them, or NULL */
	pcpu_counter_t cache[NGX_HTTP_PCPU_CACHE_STATUSES];
	/* Per process, server zones only (server.c). */
	pcpu_counter_t versions[NGX_HTTP_PCPU_VERSIONS];
	pcpu_counter_t limit_req[NGX_HTTP_PCPU_LIMITS], limit_conn[NGX_HTTP_PCPU_LIMITS];
	pcpu_counter_t upgraded, ssl_handshakes, ssl_reuses, ssl_failed;
	pcpu_histogram_t *upgraded_duration;
	ngx_http_pcpu_zone_t *next; /* every zone of the configuration */
};

/* The admission of a filter's keys, in the shared memory zone (filter.c),
 * and a key admitted there (ngx_http_pcpu_admission.h). */
typedef struct ngx_http_pcpu_admission_s ngx_http_pcpu_admission_t;
typedef struct ngx_http_pcpu_shared_key_s ngx_http_pcpu_shared_key_t;

/* A filter (pcpu_stats_filter NAME ...), one per NAME in the configuration. */
typedef struct {
	ngx_str_t name;
	const char *cname;              /* name, NUL-terminated */
	ngx_uint_t max_keys;
	ngx_uint_t histogram;           /* `histogram`: a request-time histogram per key */
	ngx_http_pcpu_admission_t *admission; /* set by the master (filter.c) */
	pcpu_gauge_t keys, keys_max;    /* nginx_pcpu_keys{source="filter:NAME"}, _max */
	pcpu_gauge_t reusable;          /* nginx_pcpu_keys_reusable{source="filter:NAME"} */
	/* Per process: the keys this process has handles for. */
	ngx_rbtree_t *local;
	ngx_uint_t nlocal;
	void *other;                    /* the "__other__" key's handles, per process */
	/* Per process: the last value met and its key (most requests in a
	 * row share a key: a comparison instead of a look-up). */
	void *last;
	u_char *last_raw;
	size_t last_len;
} ngx_http_pcpu_filter_def_t;

/* A pcpu_stats_filter directive: its filter and the value it takes. */
typedef struct {
	ngx_http_pcpu_filter_def_t *def;
	ngx_int_t index;                /* a lone $variable's index, or NGX_ERROR */
	ngx_http_complex_value_t value; /* else the expression */
} ngx_http_pcpu_filter_t;

typedef struct {
	ngx_str_t segment;           /* pcpu_stats_segment NAME */
	ngx_int_t group;             /* group=GROUP: its gid, or -1 */
	ngx_array_t defs;            /* ngx_http_pcpu_filter_def_t * */
	ngx_http_pcpu_zone_t *zones; /* every zone */
	ngx_shm_zone_t *shm;         /* the filters' admission (filter.c) */
	ngx_uint_t used;             /* any pcpu_stats or pcpu_stats_display */
	ngx_flag_t strict;           /* pcpu_stats_strict: a start fails over statistics */
	ngx_int_t max_upstreams;     /* pcpu_stats_max_upstreams */
	ngx_int_t max_peers;         /* pcpu_stats_max_peers */
	ngx_int_t max_series;        /* pcpu_stats_max_series: the segment's budget */
	ngx_flag_t upstream_timing;  /* pcpu_stats_upstream_timing: connect, header times */
	time_t expire;               /* pcpu_stats_expire: seconds, 0 off (filter.c) */
	ngx_shm_zone_t *conn_shm;    /* the connections' last samples (connections.c) */
	ngx_int_t limit_req_var;     /* $limit_req_status's index, or NGX_ERROR (server.c) */
	ngx_int_t limit_conn_var;    /* $limit_conn_status's index, or NGX_ERROR */
} ngx_http_pcpu_main_conf_t;

typedef struct {
	ngx_http_pcpu_zone_t *zone;
} ngx_http_pcpu_srv_conf_t;

typedef struct {
	ngx_flag_t enable;              /* pcpu_stats on|off */
	ngx_http_pcpu_zone_t *server;   /* the server's zone */
	ngx_http_pcpu_zone_t *location; /* this location's, if written here */
	ngx_uint_t location_stats;      /* `pcpu_stats on` written in this location */
	ngx_str_t location_name;        /* its label */
	ngx_array_t *filters;           /* ngx_http_pcpu_filter_t, inherited if unset */
	void *display_pool;             /* pcpu_stats_display's ngx_thread_pool_t, or
					 * NULL: it writes in the event loop (display.c) */
} ngx_http_pcpu_loc_conf_t;

/* The families of the tree, by what they count. */
typedef struct {
	pcpu_family_t *requests, *responses, *req_bytes, *resp_bytes, *duration, *cache;
} ngx_http_pcpu_zone_families_t;

/* The registry of the process tree (tree.c): one per master process. */
typedef struct {
	pcpu_registry_t *reg;
	pcpu_segment_t *seg;
	ngx_fd_t read_fd;           /* the segment's file, read-only (display) */
	ngx_uid_t owner;            /* its owner, for the reader's check */
	ngx_http_pcpu_zone_families_t server, location;
	pcpu_family_t *f_requests, *f_responses, *f_req_bytes, *f_resp_bytes;
	pcpu_family_t *up_responses, *up_duration;
	pcpu_family_t *up_connect, *up_header, *up_received, *up_sent;
	pcpu_family_t *up_seen;     /* nginx_http_upstream_last_seen_timestamp_seconds */
	pcpu_family_t *f_duration;  /* nginx_http_filter_request_duration_seconds */
	pcpu_family_t *f_seen;      /* nginx_http_filter_last_seen_timestamp_seconds */
	time_t expire;              /* pcpu_stats_expire of the cycle set up last */
	/* Per server zone (server.c). */
	pcpu_family_t *versions, *limit_req, *limit_conn, *upgraded, *upgraded_duration;
	pcpu_family_t *ssl_handshakes, *ssl_reuses, *ssl_failed;
	/* stub_status's (connections.c). */
	pcpu_family_t *conn, *conn_accepted, *conn_handled;
	/* The state of upstream zones' peers (peers.c). */
	pcpu_family_t *zp_weight, *zp_backup, *zp_down, *zp_fails, *zp_unavailable, *zp_conns;
	pcpu_family_t *refused;     /* nginx_pcpu_series_refused_total{reason} */
	pcpu_counter_t refused_c[NGX_HTTP_PCPU_REASONS];
	/* Self-metrics: keys by source and their bounds, the segment's size. */
	pcpu_family_t *f_keys, *f_keys_max, *f_seg_bytes, *f_series_max;
	pcpu_family_t *f_keys_reusable; /* expired keys whose series wait for a new key */
	pcpu_gauge_t peers_reusable; /* its series of the peers (filter.c) */
	pcpu_gauge_t upstreams_reusable; /* ... of the upstream names (filter.c) */
	pcpu_family_t *f_masters;   /* nginx_pcpu_masters: 2 during a binary upgrade */
	pcpu_gauge_t masters;       /* its series: this master counted in it */
	pcpu_gauge_t zones, upstreams, peers, upstreams_max, peers_max, seg_bytes, series_max;
	ngx_cycle_t *cycle;         /* the last cycle that set the module up */
	ngx_cycle_t *prev;          /* the one before, while it lives */
	ngx_uint_t joined;          /* joined a tree (binary upgrade) */
} ngx_http_pcpu_tree_t;

extern ngx_module_t ngx_http_pcpu_module;
extern ngx_http_pcpu_tree_t ngx_http_pcpu_tree;
/* A family of the tree's registry (tree.c), its histograms' buckets those
 * of request, upstream and stream session times (microseconds, exposed
 * in seconds); NULL, logged, if the registry refuses it. */
pcpu_family_t *ngx_http_pcpu_family(ngx_log_t *log, const char *name, const char *help,
				    const char *unit, enum pcpu_metric_type type, unsigned n,
				    const char *const *labels);

/* ---- tree.c ---- */

/* In the master (or single process), for a new cycle: makes or joins the
 * tree the first time, then registers the series of the configuration's
 * zones. NGX_OK; NGX_DECLINED: series refused (logged, counted), the others
 * made; NGX_ERROR: no tree (logged at `level`; statistics off, the module's
 * handlers count nothing). */
ngx_int_t ngx_http_pcpu_tree_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf,
				  ngx_uint_t level);
/* The master leaves the tree (its last process removes the segment). */
void ngx_http_pcpu_tree_leave(ngx_cycle_t *cycle);
/* A zone's series in the calling process: the code's counter (registered
 * the first time), or NULL (logged once). */
pcpu_counter_t ngx_http_pcpu_zone_code(ngx_http_pcpu_zone_t *z, ngx_uint_t status, ngx_log_t *log);
pcpu_counter_t ngx_http_pcpu_zone_cache(ngx_http_pcpu_zone_t *z, ngx_uint_t status, ngx_log_t *log);
/* A series refused for `reason`: counted in nginx_pcpu_series_refused_total,
 * logged once per process and reason (`what` says which series). */
void ngx_http_pcpu_refused(ngx_uint_t reason, ngx_log_t *log, const char *what);
extern const char *const ngx_http_pcpu_reason_names[NGX_HTTP_PCPU_REASONS];
/* Sets nginx_pcpu_segment_bytes: what the segment's file takes now. */
void ngx_http_pcpu_segment_bytes(void);
/* A self-metric's gauge of this source, or NULL (logged by the caller). */
pcpu_gauge_t ngx_http_pcpu_source_gauge(pcpu_family_t *f, const char *source);
/* The response class index of a status (0..5). */
ngx_uint_t ngx_http_pcpu_class(ngx_uint_t status);
extern const char *const ngx_http_pcpu_class_names[NGX_HTTP_PCPU_CLASSES];

/* ---- filter.c ---- */

/* `pcpu_stats_filter NAME $value [max_keys=N]`. */
char *ngx_http_pcpu_filter_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* The shared memory zone of admission: filter keys, upstream names, peers
 * (postconfiguration). */
ngx_int_t ngx_http_pcpu_filter_zone(ngx_conf_t *cf, ngx_http_pcpu_main_conf_t *pmcf);
/* In the master, the tree made: every filter's admission record, fresh
 * ones filled with the keys the tree has. NGX_OK, or NGX_DECLINED: a
 * filter without one (the zone full: logged; it counts under
 * "__other__"). */
ngx_int_t ngx_http_pcpu_filter_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf);
/* Admission of an upstream name, and of a peer ("upstream\0peer", its
 * upstream admitted): NGX_HTTP_PCPU_ADMITTED or the refusal's reason. */
ngx_int_t ngx_http_pcpu_admit_upstream(ngx_str_t *name, ngx_http_pcpu_shared_key_t **shared);
/* A peer's shared key in *shared, where admitted (admission.h). */
ngx_int_t ngx_http_pcpu_admit_peer(ngx_str_t *key, ngx_http_pcpu_shared_key_t **shared);
/* Counts request r under each of its filters; its time `us` in the
 * filters with a histogram, unless negative (an upgraded connection). */
void ngx_http_pcpu_filters(ngx_http_request_t *r, ngx_array_t *filters, ngx_uint_t status,
			   off_t received, off_t sent, int64_t us);
/* With pcpu_stats_expire: a key (filter key, peer) met now, its last-seen
 * gauge `seen` (NULL: none) and the second this process last set it, *at. */
void ngx_http_pcpu_seen(pcpu_gauge_t seen, time_t *at);
/* A label value from request data (pcpu takes UTF-8 of bounded length):
 * `in` itself when it is one, else a copy in `pool` with invalid bytes
 * written \xHH, cut at NGX_HTTP_PCPU_LABEL_MAX bytes. NGX_ERROR (ENOMEM). */
ngx_int_t ngx_http_pcpu_label(ngx_pool_t *pool, ngx_str_t *in, ngx_str_t *out);
/* A NUL-terminated copy in `pool`, or NULL. */
char *ngx_http_pcpu_cstr(ngx_pool_t *pool, ngx_str_t *s);

/* ---- reuse.c ---- */

/* A worker starting, with pcpu_stats_expire: its slot among those that
 * acknowledge the retirement of expired keys. */
void ngx_http_pcpu_reuse_process(ngx_cycle_t *cycle);
/* A worker between events (its log handler's top, its timer): the
 * retirements since its last call acknowledged, its handles of the keys
 * retired dropped. A load and a comparison when nothing was retired. */
void ngx_http_pcpu_reuse_ack(void);
/* A worker's timer, once a second: acknowledges, retires the keys expired
 * at full filters, reckons which retired keys every worker let go. */
void ngx_http_pcpu_reuse_tick(void);

/* ---- upstream.c ---- */

/* The request's upstream attempts, counted per upstream and peer; their
 * times not recorded when `upgraded` (a WebSocket's hour is no latency). */
void ngx_http_pcpu_upstreams(ngx_http_request_t *r, ngx_uint_t upgraded);

/* ---- connections.c ---- */

/* postconfiguration: the shared zone of the last samples. */
ngx_int_t ngx_http_pcpu_connections_conf(ngx_conf_t *cf, ngx_http_pcpu_main_conf_t *pmcf);
/* The master, the tree made: the series; the zone this cycle samples with.
 * pmcf NULL: nothing to sample (a cycle without the module, or without a
 * tree: the last cycle's zone may be unmapped already). */
void ngx_http_pcpu_connections_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf);
/* A worker: the sampling timer. */
void ngx_http_pcpu_connections_process(ngx_cycle_t *cycle);
/* Writes nginx's connection counts into the tree now (the display, before
 * its snapshot; the timer). */
void ngx_http_pcpu_connections_sample(void);

/* ---- peers.c ---- */

/* The master, the tree made: the gauges of the peers of upstreams with a
 * `zone` (cycle NULL: none, as for connections_init()). */
void ngx_http_pcpu_peers_init(ngx_cycle_t *cycle);
/* Their state into the tree now (connections.c's sampler, its mutex held). */
void ngx_http_pcpu_peers_sample(void);

/* ---- server.c ---- */

/* postconfiguration: the indexes of $limit_req_status, $limit_conn_status;
 * the servers' SSL contexts watched for failed handshakes (where OpenSSL
 * cannot, logged and not watched: never an error). */
void ngx_http_pcpu_server_conf(ngx_conf_t *cf, ngx_http_pcpu_main_conf_t *pmcf);
/* Request r of server zone z: its HTTP version, limit outcomes, SSL
 * handshake; an upgraded connection's count and time (`us`). */
void ngx_http_pcpu_server_count(ngx_http_request_t *r, ngx_http_pcpu_main_conf_t *pmcf,
				ngx_http_pcpu_zone_t *z, ngx_uint_t upgraded, int64_t us);

/* ---- tree.c, for the others ---- */

/* A lazily made series of `f` in *slot (this process's): NULL, counted as
 * refused (segment_full, `what` logged once), when the tree refuses it. */
pcpu_counter_t ngx_http_pcpu_lazy_counter(pcpu_counter_t *slot, pcpu_family_t *f,
					  const char *const *v, ngx_log_t *log, const char *what);

/* ---- display.c ---- */

/* `pcpu_stats_display;` */
char *ngx_http_pcpu_display_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

#endif /* NGX_HTTP_PCPU_MODULE_H */
