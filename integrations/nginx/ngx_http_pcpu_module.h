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
 *   ngx_http_pcpu_filter.c   user keys (pcpu_stats_filter): admission under a
 *                            bound, shared by the workers; label values
 *   ngx_http_pcpu_display.c  pcpu_stats_display: Prometheus text,
 *                            OpenMetrics, JSON, the HTML status page
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
/* Upstream peers each worker keeps series for; past it, "__other__". */
#define NGX_HTTP_PCPU_PEERS_MAX 1024
/* Default bound on a filter's keys (pcpu_stats_filter ... max_keys=N). */
#define NGX_HTTP_PCPU_MAX_KEYS 1000

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
	ngx_http_pcpu_zone_t *next; /* every zone of the configuration */
};

/* The admission of a filter's keys, in the shared memory zone (filter.c). */
typedef struct ngx_http_pcpu_admission_s ngx_http_pcpu_admission_t;

/* A filter (pcpu_stats_filter NAME ...), one per NAME in the configuration. */
typedef struct {
	ngx_str_t name;
	const char *cname;              /* name, NUL-terminated */
	ngx_uint_t max_keys;
	ngx_http_pcpu_admission_t *admission; /* set by the master (filter.c) */
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
	ngx_cycle_t *cycle;         /* the last cycle that set the module up */
	ngx_cycle_t *prev;          /* the one before, while it lives */
	ngx_uint_t joined;          /* joined a tree (binary upgrade) */
} ngx_http_pcpu_tree_t;

extern ngx_module_t ngx_http_pcpu_module;
extern ngx_http_pcpu_tree_t ngx_http_pcpu_tree;

/* ---- tree.c ---- */

/* In the master (or single process), for a new cycle: makes or joins the
 * tree the first time, then registers the series of the configuration's
 * zones and filters. NGX_OK or NGX_ERROR (logged). */
ngx_int_t ngx_http_pcpu_tree_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf);
/* The master leaves the tree (its last process removes the segment). */
void ngx_http_pcpu_tree_leave(ngx_cycle_t *cycle);
/* A zone's series in the calling process: the code's counter (registered
 * the first time), or NULL (logged once). */
pcpu_counter_t ngx_http_pcpu_zone_code(ngx_http_pcpu_zone_t *z, ngx_uint_t status, ngx_log_t *log);
pcpu_counter_t ngx_http_pcpu_zone_cache(ngx_http_pcpu_zone_t *z, ngx_uint_t status, ngx_log_t *log);
/* The request's upstream attempts, counted per upstream and peer. */
void ngx_http_pcpu_upstreams(ngx_http_request_t *r);
/* The response class index of a status (0..5). */
ngx_uint_t ngx_http_pcpu_class(ngx_uint_t status);
extern const char *const ngx_http_pcpu_class_names[NGX_HTTP_PCPU_CLASSES];

/* ---- filter.c ---- */

/* `pcpu_stats_filter NAME $value [max_keys=N]`. */
char *ngx_http_pcpu_filter_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* The shared memory zone of the filters' admission (postconfiguration). */
ngx_int_t ngx_http_pcpu_filter_zone(ngx_conf_t *cf, ngx_http_pcpu_main_conf_t *pmcf);
/* In the master, the tree made: every filter's admission record, fresh
 * ones filled with the keys the tree has. */
ngx_int_t ngx_http_pcpu_filter_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf);
/* Counts request r under each of its filters. */
void ngx_http_pcpu_filters(ngx_http_request_t *r, ngx_array_t *filters, ngx_uint_t status,
			   off_t received, off_t sent);
/* A label value from request data (pcpu takes UTF-8 of bounded length):
 * `in` itself when it is one, else a copy in `pool` with invalid bytes
 * written \xHH, cut at NGX_HTTP_PCPU_LABEL_MAX bytes. NGX_ERROR (ENOMEM). */
ngx_int_t ngx_http_pcpu_label(ngx_pool_t *pool, ngx_str_t *in, ngx_str_t *out);
/* A NUL-terminated copy in `pool`, or NULL. */
char *ngx_http_pcpu_cstr(ngx_pool_t *pool, ngx_str_t *s);

/* ---- display.c ---- */

/* `pcpu_stats_display;` */
char *ngx_http_pcpu_display_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

#endif /* NGX_HTTP_PCPU_MODULE_H */
