/* SPDX-License-Identifier: MIT */
/*
 * Client connections as stub_status gives them, in the tree, so that any
 * reader of the segment (pcpustat, the collector) has them, not only the
 * display:
 *
 *   nginx_connections{state="active|reading|writing|waiting"}   gauges
 *   nginx_connections_accepted_total, nginx_connections_handled_total
 *
 * nginx keeps these itself, in shared atomic words every worker updates
 * (ngx_stat_*, NGX_STAT_STUB: nginx built with http_stub_status_module,
 * as Debian's is). They are sampled into the tree: by each worker every
 * second (a timer), and by the display handler just before its snapshot,
 * so a scrape of the display is exact at its instant and an outside
 * reader's values are at most about a second old while a worker runs.
 *
 * One sampler at a time for the whole master: the sample is taken under
 * the mutex of a small shared zone of nginx's, with trylock -- a worker
 * that finds it taken skips, since the holder is writing the same values.
 * The gauges are set (pcpu_gauge_set(): a read and an offset, which two
 * processes must not interleave: the mutex). accepted and handled are
 * monotonic and exposed as counters: each sample adds what nginx counted
 * since the last sample, kept in that zone. The zone has a fixed name and
 * size, so a reload keeps it, as it keeps nginx's own counters: a reload
 * neither loses nor repeats a connection. A binary upgrade's new master
 * has counters of its own from zero, and a zone of its own: the tree's
 * counters then add both masters' connections (and go on, never back),
 * while its stub_status shows its own. The gauges, while both masters'
 * workers sample, show the last sampler's master's.
 *
 * The state of upstream zones' peers is sampled with them (peers.c).
 *
 * A worker killed holding the mutex: the master releases it (nginx's
 * ngx_unlock_mutexes() does it for every shared zone).
 */
#include "ngx_http_pcpu_module.h"

/* The zone's data: what the tree has been given so far. */
typedef struct {
	ngx_atomic_uint_t accepted, handled;
} last_t;

typedef struct {
	ngx_slab_pool_t *shpool;
	last_t *last;
} conn_ctx_t;

/* The running cycle's (set by the master in init_module, inherited). */
static conn_ctx_t *ctx;
static pcpu_gauge_t active, reading, writing, waiting;
static pcpu_counter_t accepted, handled;
static ngx_event_t timer;

#define SAMPLE_MS 1000

static ngx_int_t zone_init(ngx_shm_zone_t *shm_zone, void *data)
{
	conn_ctx_t *octx = data, *c = shm_zone->data;

	if (octx) { /* a reload kept the zone: the last samples go on */
		c->shpool = octx->shpool;
		c->last = octx->last;
		return NGX_OK;
	}
	c->shpool = (ngx_slab_pool_t *)shm_zone->shm.addr;
	c->last = ngx_slab_calloc(c->shpool, sizeof(last_t));
	return c->last ? NGX_OK : NGX_ERROR;
}

ngx_int_t ngx_http_pcpu_connections_conf(ngx_conf_t *cf, ngx_http_pcpu_main_conf_t *pmcf)
{
	ngx_str_t name = ngx_string("pcpu_stats_connections");
	conn_ctx_t *c = ngx_pcalloc(cf->pool, sizeof(*c));

	if (c == NULL)
		return NGX_ERROR;
	pmcf->conn_shm = ngx_shared_memory_add(cf, &name, 8 * ngx_pagesize, &ngx_http_pcpu_module);
	if (pmcf->conn_shm == NULL)
		return NGX_ERROR;
	pmcf->conn_shm->init = zone_init;
	pmcf->conn_shm->data = c;
	return NGX_OK;
}

void ngx_http_pcpu_connections_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf)
{
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	static const char *const states[] = {"active", "reading", "writing", "waiting"};
	pcpu_gauge_t *g[] = {&active, &reading, &writing, &waiting};
	ngx_uint_t i, refused = 0;

	ctx = pmcf && pmcf->conn_shm ? pmcf->conn_shm->data : NULL;
	if (ctx == NULL)
		return;
	for (i = 0; i < 4; i++) {
		*g[i] = pcpu_family_gauge(t->conn, &states[i]);
		refused += *g[i] == NULL;
	}
	accepted = pcpu_family_counter(t->conn_accepted, NULL);
	handled = pcpu_family_counter(t->conn_handled, NULL);
	refused += (accepted == NULL) + (handled == NULL);
	if (refused) {
		ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
			      "pcpu: %ui series of the connections refused: %s (counted in "
			      "nginx_pcpu_series_refused_total{reason=\"segment_full\"})",
			      refused, pcpu_stats_error());
		if (t->refused_c[NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL])
			pcpu_counter_add(t->refused_c[NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL],
					 (int64_t)refused);
	}
}

#if (NGX_STAT_STUB)
/* Adds to `c` what nginx's `now` has more than `*last`. */
static void advance(pcpu_counter_t c, ngx_atomic_uint_t now, ngx_atomic_uint_t *last)
{
	if (now > *last) {
		if (c)
			pcpu_counter_add(c, (int64_t)(now - *last));
		*last = now;
	}
}
#endif

void ngx_http_pcpu_connections_sample(void)
{
	if (ngx_http_pcpu_tree.reg == NULL || ctx == NULL || ctx->last == NULL ||
	    !ngx_shmtx_trylock(&ctx->shpool->mutex))
		return;
#if (NGX_STAT_STUB)
	if (active)
		(void)pcpu_gauge_set(active, (int64_t)*ngx_stat_active);
	if (reading)
		(void)pcpu_gauge_set(reading, (int64_t)*ngx_stat_reading);
	if (writing)
		(void)pcpu_gauge_set(writing, (int64_t)*ngx_stat_writing);
	if (waiting)
		(void)pcpu_gauge_set(waiting, (int64_t)*ngx_stat_waiting);
	advance(accepted, *ngx_stat_accepted, &ctx->last->accepted);
	advance(handled, *ngx_stat_handled, &ctx->last->handled);
#endif
	ngx_http_pcpu_peers_sample();
	ngx_shmtx_unlock(&ctx->shpool->mutex);
}

static void tick(ngx_event_t *ev)
{
	ngx_http_pcpu_connections_sample();
	ngx_http_pcpu_reuse_tick();
	/* With pcpu_stats_expire, on while the worker shuts down: it still
	 * acknowledges retired keys (reuse.c), and a cancelable timer keeps
	 * no worker from exiting (ngx_event_no_timers_left()). */
	if ((!ngx_exiting && !ngx_quit) || ngx_http_pcpu_tree.expire)
		ngx_add_timer(ev, SAMPLE_MS);
}

void ngx_http_pcpu_connections_process(ngx_cycle_t *cycle)
{
	if (ctx == NULL || ngx_http_pcpu_tree.reg == NULL || ngx_process != NGX_PROCESS_WORKER)
		return;
	timer.handler = tick;
	timer.log = cycle->log;
	timer.data = &timer;
	/* A worker shutting down gracefully does not wait for it. */
	timer.cancelable = 1;
	ngx_add_timer(&timer, SAMPLE_MS);
}
