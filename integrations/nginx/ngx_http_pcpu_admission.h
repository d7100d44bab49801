/* SPDX-License-Identifier: MIT */
/*
 * The admission zone's shared records (filter.c admits, reuse.c retires
 * expired keys and lends their series to new ones, upstream.c keeps its
 * peers' shared keys): private to those three files.
 */
#ifndef NGX_HTTP_PCPU_ADMISSION_H
#define NGX_HTTP_PCPU_ADMISSION_H

#include "ngx_http_pcpu_module.h"

/* A key admitted, in the shared zone. */
struct ngx_http_pcpu_shared_key_s {
	ngx_str_node_t sn;  /* str: the label value */
	/* With pcpu_stats_expire: the last second a worker met it (a plain
	 * store, once a second per worker: the retirement reads it under
	 * the mutex, a second late at worst). */
	time_t seen;
	/* The epoch it was retired in (reuse.c), 0 while it is live: read
	 * without the mutex by the workers that cache it. */
	ngx_uint_t retired;
	ngx_http_pcpu_shared_key_t *next; /* the record's retired keys, oldest first */
	/* An upstream name's (reuse.c): it carries a series that never
	 * expires (its peer="__other__"), so it is never retired; a peer of
	 * it not retired (the retirement's scratch). */
	ngx_uint_t others, held;
};

struct ngx_http_pcpu_admission_s {
	ngx_str_node_t sn; /* the filter's name */
	ngx_uint_t max_keys;
	ngx_uint_t count;   /* keys admitted: retired ones among them until reused */
	ngx_uint_t full;    /* count reached max_keys (or the zone is full) and no
			     * key is retired: the keys do not change while it is
			     * set, read without the mutex (reuse.c says why) */
	ngx_uint_t zone_full; /* full because the zone had no room */
	ngx_rbtree_t keys;  /* ngx_http_pcpu_shared_key_t */
	ngx_rbtree_node_t sentinel;
	/* reuse.c: the retired keys (oldest first), how many, when a worker
	 * last looked for expired ones. */
	ngx_http_pcpu_shared_key_t *rhead, *rtail;
	ngx_uint_t retired;
	time_t scanned;
};

/* A worker's acknowledgement of the epochs (reuse.c). */
typedef struct {
	ngx_pid_t pid;      /* 0: a free slot */
	ngx_uint_t acked;   /* the last epoch it acknowledged */
} ngx_http_pcpu_ack_t;

typedef struct {
	ngx_rbtree_t filters; /* ngx_http_pcpu_admission_t, by name */
	ngx_rbtree_node_t sentinel;
	ngx_uint_t seeded;    /* the tree's keys read in */
	/* Upstream names, and peers ("upstream\0peer"): the zone's name
	 * carries their bounds, so a zone kept has these. */
	ngx_http_pcpu_admission_t *upstreams, *peers;
	/* reuse.c: the epoch each retirement bumps; the last one every live
	 * worker acknowledged (`safe`, with when it was reckoned); whether a
	 * series may be lent at all (`blocked`: another zone's processes may
	 * hold the tree's series, `frozen`: for good); the processes of the
	 * zone a reload replaced by this one; each worker's slot, by its
	 * ngx_process_slot. */
	ngx_uint_t epoch, safe;
	time_t safe_at;
	ngx_uint_t blocked, frozen;
	ngx_uint_t nforeign;
	ngx_pid_t foreign[NGX_MAX_PROCESSES];
	ngx_http_pcpu_ack_t acks[NGX_MAX_PROCESSES];
} ngx_http_pcpu_shared_t;

typedef struct {
	ngx_http_pcpu_shared_t *sh;
	ngx_slab_pool_t *shpool;
} ngx_http_pcpu_zone_ctx_t;

/* The zone this process admits with (filter.c; NULL: none). */
ngx_http_pcpu_zone_ctx_t *ngx_http_pcpu_zone(void);

/* ---- reuse.c ---- */

/* The mutex held: the series for `key` (hash `hash`, not admitted) lent
 * by the oldest retired key of record a -- def's, or the peers' (def
 * NULL) --, whose shared key goes; its new shared key in *out.
 * NGX_HTTP_PCPU_ADMITTED, or the refusal's reason (MAX_KEYS: the bound). */
ngx_int_t ngx_http_pcpu_reuse_locked(ngx_http_pcpu_admission_t *a, ngx_http_pcpu_filter_def_t *def,
				     ngx_str_t *key, uint32_t hash, ngx_http_pcpu_shared_key_t **out);
/* The mutex held: retired key n met again before its series went to
 * another key: live again, counted on. */
void ngx_http_pcpu_revive_locked(ngx_http_pcpu_admission_t *a, ngx_http_pcpu_shared_key_t *n);
/* The mutex held: `full` set again when the record is at its bound with
 * no retired key. */
void ngx_http_pcpu_refull_locked(ngx_http_pcpu_admission_t *a);
/* Upstream name n (admitted in this event: not freed) carries a series:
 * live again if it was retired, and kept for good when `other` (its
 * peer="__other__" series, which never expires). */
void ngx_http_pcpu_reuse_name(ngx_http_pcpu_shared_key_t *n, ngx_uint_t other);
/* The master, a new zone replacing `prev` (a reload that renamed or
 * re-bounded filters): prev lends no series again, the new one none until
 * prev's processes are gone. */
void ngx_http_pcpu_reuse_handover(ngx_http_pcpu_zone_ctx_t *prev, ngx_http_pcpu_zone_ctx_t *ctx);
/* The master of a binary upgrade, which joined the old master's tree, its
 * first zone: nothing lent until the old master (its parent) is gone. */
void ngx_http_pcpu_reuse_joined(ngx_http_pcpu_zone_ctx_t *ctx);

/* ---- filter.c, for reuse.c ---- */

/* Drops this process's handles of def's keys that are retired. */
void ngx_http_pcpu_filter_purge(ngx_http_pcpu_filter_def_t *def);

/* ---- upstream.c, for reuse.c ---- */

/* Drops this process's handles of the peers that are retired. */
void ngx_http_pcpu_upstream_purge(void);

#endif /* NGX_HTTP_PCPU_ADMISSION_H */
