/* SPDX-License-Identifier: MIT */
/*
 * User keys: `pcpu_stats_filter NAME $value [max_keys=N] [histogram]`
 * counts each request under the value the expression takes for it, in
 * nginx_http_filter_requests_total{filter="NAME",key="VALUE"} and its
 * bytes and classes -- VTS's filter_by_set_key -- and, with `histogram`,
 * its time in nginx_http_filter_request_duration_seconds{filter,key}.
 *
 * The bound. A key is a label value, a series the tree keeps until the
 * master ends it (pcpu removes nothing from a shared registry; with
 * pcpu_stats_expire, a filter at its bound lends an expired key's series
 * to a new key: reuse.c), and keys
 * come from requests: unbounded, an attacker's to choose. So each filter
 * admits at most max_keys keys (1000 by default) for the whole tree; a
 * request whose key was not admitted counts under key="__other__", so the
 * keys of a filter always add up to all its requests. What is admitted is
 * shared by every worker in a shared memory zone of nginx's (slab,
 * red-black tree, its mutex, as limit_req keeps its keys: a worker killed
 * holding the mutex has it released by the master, ngx_unlock_mutexes()).
 *
 * Cost. The mutex is taken only when a worker meets a key it has no handles
 * for yet: once per key and worker until the filter is full. Once full,
 * the admitted keys do not change while the `full` flag is set (it is set,
 * with release order, after the last insertion; cleared only by a
 * retirement, whose keys move once every worker has acknowledged it:
 * reuse.c), and a worker looks an unknown key up without the mutex -- so
 * a flood of new keys past the bound costs a lookup per request, never a
 * lock (with expired keys retired and not lent yet, the mutex: reuse.c).
 * Known keys cost a lookup in the worker's own tree and a few rseq adds:
 * no lock, no atomic instruction (with pcpu_stats_expire, a load of the
 * shared key's `retired`, and a store of its last second seen once a
 * second).
 *
 * The same zone admits upstream names and peers under their bounds
 * (pcpu_stats_max_upstreams, pcpu_stats_max_peers), for tree.c.
 *
 * The zone is named after its bounds and filters (a CRC of the upstream
 * bounds and of the filters' names and bounds), so a reload keeps it
 * (nginx reuses a zone of the same name and size) exactly while they stay
 * the same, and it always has the room of its bounds: a renamed filter gets a new zone, never the room an
 * old name's keys took (which left a renamed filter 112 of its 200 keys,
 * and the next rename no room for its record at all: init_module failed,
 * and nginx's master with it). A new zone (filters renamed, added, bounds
 * changed, a binary upgrade's new master) starts with the keys the tree
 * already has, read from the segment, so the bound holds across the tree's
 * whole life. Keys admitted by old workers finishing their requests after
 * such a reload are not in the new zone: the tree may then hold up to that
 * many keys more than the bound.
 *
 * Should the zone fill up all the same, a filter stops admitting (its
 * `full` flag set: no mutex after that either), counts the rest under
 * "__other__" and says so (reason "zone_full"); a filter without a record
 * counts every request there. Nothing here fails a reload.
 */
#include "ngx_http_pcpu_admission.h"

/* Shared memory per key, at most: its node and label (256 bytes), as the
 * slab allocator rounds them. */
#define KEY_BYTES 512

typedef ngx_http_pcpu_shared_t shared_t;
typedef ngx_http_pcpu_zone_ctx_t zone_ctx_t;
typedef ngx_http_pcpu_shared_key_t shared_key_t;

/* A key's series in this process. */
typedef struct {
	ngx_str_node_t sn; /* str: the label value */
	const char *labels[3];
	pcpu_counter_t requests, req_bytes, resp_bytes;
	pcpu_counter_t classes[NGX_HTTP_PCPU_CLASSES];
	pcpu_histogram_t *duration; /* the filter's `histogram` */
	ngx_int_t refused;  /* the "__other__" key met for a reason (an index), or -1 */
	shared_key_t *shared; /* its admission, NULL for "__other__" (reuse.c) */
	/* With pcpu_stats_expire: its last-seen gauge, and the second this
	 * process last met it (the gauge is looked at once a second). */
	pcpu_gauge_t seen;
	time_t seen_at;
} filter_key_t;

static zone_ctx_t *zone_ctx;
/* The cycle zone_ctx was set up for (the master): the zone a reload's new
 * one replaces, while that cycle is the running one. */
static ngx_cycle_t *zone_cycle;
/* The zone's upstream names' and peers' records (NULL: no room). */
static ngx_http_pcpu_admission_t *upstreams, *peers;

zone_ctx_t *ngx_http_pcpu_zone(void)
{
	return zone_ctx;
}

/* ---- label values ------------------------------------------------------------- */

ngx_int_t ngx_http_pcpu_label(ngx_pool_t *pool, ngx_str_t *in, ngx_str_t *out)
{
	size_t i, n = in->len;
	u_char *p, *q;
	char *c;

	for (i = 0; i < n && i < NGX_HTTP_PCPU_LABEL_MAX && in->data[i] < 0x80; i++)
		;
	if (i == n) {
		*out = *in; /* ASCII, short enough: as it is (the common case) */
		return NGX_OK;
	}
	if (n > NGX_HTTP_PCPU_LABEL_MAX) {
		n = NGX_HTTP_PCPU_LABEL_MAX;
		while (n > 0 && (in->data[n] & 0xc0) == 0x80)
			n--; /* not in the middle of a character */
	}
	c = ngx_pnalloc(pool, 4 * n + 1);
	if (c == NULL)
		return NGX_ERROR;
	ngx_memcpy(c, in->data, n);
	c[n] = '\0';
	if (pcpu_stats_check_label_value(c) == 0) {
		out->data = (u_char *)c;
		out->len = n;
		return NGX_OK;
	}
	/* Not UTF-8: every byte past ASCII written \xHH (distinct values stay
	 * distinct), cut again at the bound. */
	p = (u_char *)c;
	for (i = 0, q = p; i < n; i++) {
		u_char b = in->data[i];

		if (b < 0x80) {
			if ((size_t)(q - p) + 1 > NGX_HTTP_PCPU_LABEL_MAX)
				break;
			*q++ = b;
		} else {
			if ((size_t)(q - p) + 4 > NGX_HTTP_PCPU_LABEL_MAX)
				break;
			q = ngx_sprintf(q, "\\x%02xd", (int)b);
		}
	}
	*q = '\0';
	out->data = p;
	out->len = q - p;
	return NGX_OK;
}

char *ngx_http_pcpu_cstr(ngx_pool_t *pool, ngx_str_t *s)
{
	char *c = ngx_pnalloc(pool, s->len + 1);

	if (c) {
		ngx_memcpy(c, s->data, s->len);
		c[s->len] = '\0';
	}
	return c;
}

/* ---- configuration ------------------------------------------------------------ */

char *ngx_http_pcpu_filter_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_pcpu_loc_conf_t *plcf = conf;
	ngx_http_pcpu_main_conf_t *pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_pcpu_module);
	ngx_str_t *value = cf->args->elts, name;
	ngx_http_compile_complex_value_t ccv;
	ngx_http_pcpu_filter_def_t **defs, *def = NULL;
	ngx_http_pcpu_filter_t *f;
	ngx_int_t max = NGX_HTTP_PCPU_MAX_KEYS;
	ngx_uint_t i, has_max = 0, histogram = 0;

	if (cf->args->nelts > 5)
		return "takes NAME VALUE [max_keys=N] [histogram]";
	/* [max_keys=N] [histogram], in any order. */
	for (i = 3; i < cf->args->nelts; i++) {
		if (value[i].len == 9 && ngx_strncmp(value[i].data, "histogram", 9) == 0 && !histogram) {
			histogram = 1;
			continue;
		}
		if (has_max || value[i].len <= 9 || ngx_strncmp(value[i].data, "max_keys=", 9) != 0 ||
		    (max = ngx_atoi(value[i].data + 9, value[i].len - 9)) == NGX_ERROR || max < 1 ||
		    max > 1000000) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
					   "invalid parameter \"%V\" (max_keys=N, 1 to 1000000; "
					   "histogram)",
					   &value[i]);
			return NGX_CONF_ERROR;
		}
		has_max = 1;
	}
	if (ngx_http_pcpu_label(cf->pool, &value[1], &name) != NGX_OK)
		return NGX_CONF_ERROR;
	if (name.len == 0) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "pcpu_stats_filter: empty filter name");
		return NGX_CONF_ERROR;
	}
	/* One definition per name: its bound, its keys. */
	defs = pmcf->defs.elts;
	for (i = 0; i < pmcf->defs.nelts; i++)
		if (defs[i]->name.len == name.len &&
		    ngx_strncmp(defs[i]->name.data, name.data, name.len) == 0)
			def = defs[i];
	if (def && has_max && def->max_keys != (ngx_uint_t)max) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				   "pcpu_stats_filter \"%V\": max_keys=%i, declared with %ui before",
				   &name, max, def->max_keys);
		return NGX_CONF_ERROR;
	}
	if (def == NULL) {
		def = ngx_pcalloc(cf->pool, sizeof(*def));
		defs = ngx_array_push(&pmcf->defs);
		if (def == NULL || defs == NULL || (def->cname = ngx_http_pcpu_cstr(cf->pool, &name)) == NULL)
			return NGX_CONF_ERROR;
		def->name = name;
		def->max_keys = (ngx_uint_t)max;
		*defs = def;
	}
	/* A filter's keys are one set of series: a histogram asked for by
	 * any of its directives is every key's. */
	def->histogram |= histogram;
	/* nginx's rule for lists of a level: a level that has some uses its
	 * own, one that has none inherits its parent's. */
	if (plcf->filters == NGX_CONF_UNSET_PTR) {
		plcf->filters = ngx_array_create(cf->pool, 2, sizeof(ngx_http_pcpu_filter_t));
		if (plcf->filters == NULL)
			return NGX_CONF_ERROR;
	}
	f = ngx_array_push(plcf->filters);
	if (f == NULL)
		return NGX_CONF_ERROR;
	ngx_memzero(f, sizeof(*f));
	f->def = def;
	f->index = NGX_ERROR;
	if (value[2].len > 1 && value[2].data[0] == '$') {
		/* One variable, the common case: read where nginx keeps it
		 * (no copy, no allocation per request). */
		ngx_str_t var = {value[2].len - 1, value[2].data + 1};

		for (i = 0; i < var.len; i++)
			if (!((var.data[i] >= 'a' && var.data[i] <= 'z') ||
			      (var.data[i] >= 'A' && var.data[i] <= 'Z') ||
			      (var.data[i] >= '0' && var.data[i] <= '9') || var.data[i] == '_'))
				break;
		if (i == var.len) {
			f->index = ngx_http_get_variable_index(cf, &var);
			if (f->index == NGX_ERROR)
				return NGX_CONF_ERROR;
			return NGX_CONF_OK;
		}
	}
	ngx_memzero(&ccv, sizeof(ccv));
	ccv.cf = cf;
	ccv.value = &value[2];
	ccv.complex_value = &f->value;
	if (ngx_http_compile_complex_value(&ccv) != NGX_OK)
		return NGX_CONF_ERROR;
	return NGX_CONF_OK;
}

static ngx_int_t zone_init(ngx_shm_zone_t *shm_zone, void *data)
{
	zone_ctx_t *octx = data, *ctx = shm_zone->data;

	if (octx) {
		/* A reload kept the zone: its keys stay admitted. */
		ctx->sh = octx->sh;
		ctx->shpool = octx->shpool;
		return NGX_OK;
	}
	ctx->shpool = (ngx_slab_pool_t *)shm_zone->shm.addr;
	ctx->sh = ngx_slab_calloc(ctx->shpool, sizeof(shared_t));
	if (ctx->sh == NULL)
		return NGX_ERROR;
	ngx_rbtree_init(&ctx->sh->filters, &ctx->sh->sentinel, ngx_str_rbtree_insert_value);
	ctx->sh->seeded = 0;
	ctx->sh->upstreams = ctx->sh->peers = NULL;
	ctx->shpool->data = ctx->sh;
	ctx->shpool->log_nomem = 0; /* a full zone is the bound's business, logged below */
	return NGX_OK;
}

ngx_int_t ngx_http_pcpu_filter_zone(ngx_conf_t *cf, ngx_http_pcpu_main_conf_t *pmcf)
{
	ngx_http_pcpu_filter_def_t **defs = pmcf->defs.elts;
	size_t size = 16 * ngx_pagesize;
	zone_ctx_t *ctx;
	ngx_uint_t i;
	ngx_str_t name;
	uint32_t crc;
	u_char bound[2 * NGX_INT_T_LEN + 4];

	/* Named after its bounds: upstream names and peers (keys of two
	 * labels), then the filters in the order written, each name and
	 * bound. */
	size += sizeof(shared_t) + 2 * sizeof(ngx_http_pcpu_admission_t) + 4 * KEY_BYTES +
		(size_t)pmcf->max_upstreams * KEY_BYTES + (size_t)pmcf->max_peers * 2 * KEY_BYTES;
	ngx_crc32_init(crc);
	ngx_crc32_update(&crc, bound,
			 ngx_sprintf(bound, "%i|%i|", pmcf->max_upstreams, pmcf->max_peers) - bound);
	for (i = 0; i < pmcf->defs.nelts; i++) {
		size += sizeof(ngx_http_pcpu_admission_t) + 2 * KEY_BYTES +
			defs[i]->max_keys * KEY_BYTES;
		ngx_crc32_update(&crc, defs[i]->name.data, defs[i]->name.len);
		ngx_crc32_update(&crc, bound, ngx_sprintf(bound, "|%ui|", defs[i]->max_keys) - bound);
	}
	ngx_crc32_final(crc);
	size = ngx_align(size, ngx_pagesize);
	name.data = ngx_pnalloc(cf->pool, sizeof("pcpu_stats_filters_") - 1 + 8);
	if (name.data == NULL)
		return NGX_ERROR;
	name.len = ngx_sprintf(name.data, "pcpu_stats_filters_%08xD", crc) - name.data;
	ctx = ngx_pcalloc(cf->pool, sizeof(*ctx));
	if (ctx == NULL)
		return NGX_ERROR;
	pmcf->shm = ngx_shared_memory_add(cf, &name, size, &ngx_http_pcpu_module);
	if (pmcf->shm == NULL)
		return NGX_ERROR;
	pmcf->shm->init = zone_init;
	pmcf->shm->data = ctx;
	return NGX_OK;
}

/* ---- admission -------------------------------------------------------------------- */

/* Admission's answers: a key admitted (now or before), or refused for the
 * bound or for want of room. */
enum { ADMITTED = -1, REFUSED_BOUND = NGX_HTTP_PCPU_REFUSED_MAX_KEYS,
       REFUSED_ZONE = NGX_HTTP_PCPU_REFUSED_ZONE_FULL };

/* Why a filter that admits no more refuses. */
static ngx_int_t refusal(ngx_http_pcpu_admission_t *a)
{
	return a->zone_full ? REFUSED_ZONE : REFUSED_BOUND;
}

/* Admits `key` into `a` (the shared zone's mutex held); its shared key in
 * *out. A retired key (reuse.c) met again is live again. */
static ngx_int_t admit_locked(ngx_slab_pool_t *shpool, ngx_http_pcpu_admission_t *a, ngx_str_t *key,
			      uint32_t hash, shared_key_t **out)
{
	shared_key_t *n = (shared_key_t *)ngx_str_rbtree_lookup(&a->keys, key, hash);

	if (n) {
		if (n->retired)
			ngx_http_pcpu_revive_locked(a, n);
		if (ngx_http_pcpu_tree.expire)
			n->seen = ngx_time();
		*out = n;
		return ADMITTED;
	}
	if (a->full || a->count >= a->max_keys)
		return refusal(a);
	n = ngx_slab_calloc_locked(shpool, sizeof(*n) + key->len);
	if (n == NULL) {
		/* No room: the filter admits no more (its keys never change
		 * again, read without the mutex from now on). */
		a->zone_full = 1;
		ngx_http_pcpu_refull_locked(a);
		return REFUSED_ZONE;
	}
	n->sn.str.data = (u_char *)(n + 1);
	n->sn.str.len = key->len;
	ngx_memcpy(n->sn.str.data, key->data, key->len);
	n->sn.node.key = hash;
	/* Without pcpu_stats_expire, never seen: a reload that turns it on
	 * retires such a key only once met again (as the display shows a
	 * key without a last-seen gauge). */
	n->seen = ngx_http_pcpu_tree.expire ? ngx_time() : 0;
	ngx_rbtree_insert(&a->keys, &n->sn.node);
	++a->count;
	/* After the insertion: a worker that sees `full` set reads a tree
	 * that no one changes while it is set, without the mutex. */
	ngx_http_pcpu_refull_locked(a);
	*out = n;
	return ADMITTED;
}

/* `gauge` (nginx_pcpu_keys of the record's source) is set to the count
 * under the mutex, so the last set is the last count. A key past the
 * bound of a record that `lends` (a filter's, def; the peers') may have
 * an expired key's series (reuse.c). */
static ngx_int_t admit(ngx_http_pcpu_filter_def_t *def, ngx_uint_t lends,
		       ngx_http_pcpu_admission_t *a, ngx_str_t *key, uint32_t hash, pcpu_gauge_t gauge,
		       shared_key_t **out)
{
	shared_key_t *n = NULL;
	ngx_uint_t count;
	ngx_int_t rc;

	if (a == NULL)
		return REFUSED_ZONE; /* no record: the zone had no room for it */
	if (__atomic_load_n(&a->full, __ATOMIC_ACQUIRE)) {
		n = (shared_key_t *)ngx_str_rbtree_lookup(&a->keys, key, hash);
		*out = n;
		return n ? ADMITTED : refusal(a);
	}
	ngx_shmtx_lock(&zone_ctx->shpool->mutex);
	count = a->count;
	rc = admit_locked(zone_ctx->shpool, a, key, hash, &n);
	if (rc == REFUSED_BOUND && lends && a->retired)
		rc = ngx_http_pcpu_reuse_locked(a, def, key, hash, &n);
	*out = n;
	if (a->count != count && gauge)
		(void)pcpu_gauge_set(gauge, (int64_t)a->count);
	ngx_shmtx_unlock(&zone_ctx->shpool->mutex);
	return rc;
}

/* A new admission record (the mutex held), or NULL: no room. */
static ngx_http_pcpu_admission_t *record(ngx_str_t *name, ngx_uint_t max_keys)
{
	ngx_http_pcpu_admission_t *a = ngx_slab_calloc_locked(zone_ctx->shpool, sizeof(*a) + name->len);

	if (a == NULL)
		return NULL;
	a->sn.str.data = (u_char *)(a + 1);
	a->sn.str.len = name->len;
	ngx_memcpy(a->sn.str.data, name->data, name->len);
	a->sn.node.key = ngx_hash_key(name->data, name->len);
	a->max_keys = max_keys;
	ngx_rbtree_init(&a->keys, &a->sentinel, ngx_str_rbtree_insert_value);
	return a;
}

/* Upstream names and peers: a refusal for the bound is theirs, one for
 * want of room the zone's. */
ngx_int_t ngx_http_pcpu_admit_upstream(ngx_str_t *name, shared_key_t **shared)
{
	/* A name past the bound may take the place of one whose peers all
	 * expired (reuse.c). */
	ngx_int_t rc = admit(NULL, 1, upstreams, name, ngx_hash_key(name->data, name->len),
			     ngx_http_pcpu_tree.upstreams, shared);

	return rc == REFUSED_BOUND ? NGX_HTTP_PCPU_REFUSED_UPSTREAMS : rc;
}

ngx_int_t ngx_http_pcpu_admit_peer(ngx_str_t *key, shared_key_t **shared)
{
	ngx_int_t rc = admit(NULL, 1, peers, key, ngx_hash_key(key->data, key->len),
			     ngx_http_pcpu_tree.peers, shared);

	return rc == REFUSED_BOUND ? NGX_HTTP_PCPU_REFUSED_PEERS : rc;
}

/* The master, a new zone: the keys the tree has (a binary upgrade's old
 * master's, those of the cycle before a reload that made a new zone). */
static void seed(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf)
{
	struct pcpu_reader_options o;
	struct pcpu_reader_snapshot *s;
	ngx_http_pcpu_filter_def_t **defs = pmcf->defs.elts;
	pcpu_reader_t *r;
	shared_key_t *sk;
	ngx_uint_t i, n = 0;
	size_t f, j;

	ngx_memzero(&o, sizeof(o));
	o.flags = PCPU_READER_OWNER | PCPU_READER_ALLOW_STALE;
	o.owner = ngx_http_pcpu_tree.owner;
	r = pcpu_reader_open_fd(ngx_http_pcpu_tree.read_fd, &o);
	if (r == NULL || pcpu_reader_snapshot(r, 0, &s) != 0) {
		ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
			      "pcpu: reading the keys the statistics have: %s (the bounds count "
			      "from zero)",
			      pcpu_reader_error());
		pcpu_reader_close(r);
		return;
	}
	ngx_shmtx_lock(&zone_ctx->shpool->mutex);
	for (f = 0; f < s->snapshot.nfamilies; f++) {
		const struct pcpu_snapshot_family *fam = &s->snapshot.families[f];

		if (ngx_strcmp(fam->name, "nginx_http_upstream_response_duration_seconds") == 0 &&
		    fam->nlabels == 2) {
			/* Every peer has one: its upstream, then the peer. */
			for (j = 0; j < fam->nseries; j++) {
				const char *const *v = fam->series[j].label_values;
				size_t ul = ngx_strlen(v[0]), pl = ngx_strlen(v[1]);
				u_char key[2 * NGX_HTTP_PCPU_LABEL_MAX + 2];
				ngx_str_t k = {ul, (u_char *)v[0]};

				if (ngx_strcmp(v[0], NGX_HTTP_PCPU_OTHER) == 0 || ul + 1 + pl > sizeof(key) ||
				    upstreams == NULL ||
				    admit_locked(zone_ctx->shpool, upstreams, &k, ngx_hash_key(k.data, k.len),
						 &sk) != ADMITTED)
					continue;
				n++;
				if (ngx_strcmp(v[1], NGX_HTTP_PCPU_OTHER) == 0) {
					sk->others = 1; /* never retired (reuse.c) */
					continue;
				}
				if (peers == NULL)
					continue;
				ngx_memcpy(key, v[0], ul);
				key[ul] = '\0';
				ngx_memcpy(key + ul + 1, v[1], pl);
				k.data = key;
				k.len = ul + 1 + pl;
				n += admit_locked(zone_ctx->shpool, peers, &k, ngx_hash_key(k.data, k.len),
						  &sk) == ADMITTED;
			}
			continue;
		}
		if (ngx_strcmp(fam->name, "nginx_http_filter_requests") != 0 || fam->nlabels != 2)
			continue;
		for (j = 0; j < fam->nseries; j++) {
			const char *const *v = fam->series[j].label_values;
			ngx_str_t key;

			if (ngx_strcmp(v[1], NGX_HTTP_PCPU_OTHER) == 0)
				continue;
			key.data = (u_char *)v[1];
			key.len = ngx_strlen(v[1]);
			for (i = 0; i < pmcf->defs.nelts; i++)
				if (ngx_strcmp(defs[i]->cname, v[0]) == 0 && defs[i]->admission)
					n += admit_locked(zone_ctx->shpool, defs[i]->admission, &key,
							  ngx_hash_key(key.data, key.len), &sk) == ADMITTED;
		}
	}
	zone_ctx->sh->seeded = 1;
	ngx_shmtx_unlock(&zone_ctx->shpool->mutex);
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	if (n) {
		ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
			      "pcpu: %ui filter keys, upstream names and peers the statistics had, "
			      "admitted again",
			      n);
	}
}

/* The master: the self-metrics of admission, as the zone has them now
 * (a zone kept, a new one seeded). */
static void gauges(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf)
{
	ngx_http_pcpu_filter_def_t **defs = pmcf->defs.elts;
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	ngx_uint_t i;
	char *source;

	ngx_shmtx_lock(&zone_ctx->shpool->mutex);
	if (t->upstreams && upstreams)
		(void)pcpu_gauge_set(t->upstreams, (int64_t)upstreams->count);
	if (t->peers && peers)
		(void)pcpu_gauge_set(t->peers, (int64_t)peers->count);
	if (t->upstreams_max && upstreams)
		(void)pcpu_gauge_set(t->upstreams_max, (int64_t)upstreams->max_keys);
	if (t->peers_max && peers)
		(void)pcpu_gauge_set(t->peers_max, (int64_t)peers->max_keys);
	if (pmcf->expire && t->peers_reusable == NULL)
		t->peers_reusable = ngx_http_pcpu_source_gauge(t->f_keys_reusable, "peers");
	if (pmcf->expire && t->upstreams_reusable == NULL)
		t->upstreams_reusable = ngx_http_pcpu_source_gauge(t->f_keys_reusable, "upstreams");
	for (i = 0; i < pmcf->defs.nelts; i++) {
		source = ngx_pnalloc(cycle->pool, sizeof("filter:") + defs[i]->name.len);
		if (source == NULL)
			break;
		ngx_sprintf((u_char *)source, "filter:%V%Z", &defs[i]->name);
		defs[i]->keys = ngx_http_pcpu_source_gauge(t->f_keys, source);
		defs[i]->keys_max = ngx_http_pcpu_source_gauge(t->f_keys_max, source);
		if (pmcf->expire)
			defs[i]->reusable = ngx_http_pcpu_source_gauge(t->f_keys_reusable, source);
		if (defs[i]->admission == NULL)
			continue;
		if (defs[i]->keys)
			(void)pcpu_gauge_set(defs[i]->keys, (int64_t)defs[i]->admission->count);
		if (defs[i]->keys_max)
			(void)pcpu_gauge_set(defs[i]->keys_max, (int64_t)defs[i]->admission->max_keys);
	}
	ngx_shmtx_unlock(&zone_ctx->shpool->mutex);
}

ngx_int_t ngx_http_pcpu_filter_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf)
{
	ngx_http_pcpu_filter_def_t **defs = pmcf->defs.elts;
	ngx_http_pcpu_admission_t *a;
	zone_ctx_t *prev = zone_cycle && zone_cycle == cycle->old_cycle ? zone_ctx : NULL;
	ngx_uint_t i, none = 0;
	uint32_t hash;

	zone_ctx = pmcf->shm ? pmcf->shm->data : NULL;
	if (zone_cycle == NULL && ngx_http_pcpu_tree.joined)
		ngx_http_pcpu_reuse_joined(zone_ctx);
	zone_cycle = cycle;
	/* A new zone in place of the running cycle's (filters renamed,
	 * bounds changed): neither lends series while the other's processes
	 * may hold them (reuse.c). */
	ngx_http_pcpu_reuse_handover(prev, zone_ctx);
	upstreams = peers = NULL;
	if (zone_ctx == NULL)
		return NGX_OK;
	ngx_shmtx_lock(&zone_ctx->shpool->mutex);
	if (zone_ctx->sh->upstreams == NULL) {
		ngx_str_t u = ngx_string("upstreams");

		zone_ctx->sh->upstreams = record(&u, (ngx_uint_t)pmcf->max_upstreams);
		none += zone_ctx->sh->upstreams == NULL;
	}
	if (zone_ctx->sh->peers == NULL) {
		ngx_str_t p = ngx_string("peers");

		zone_ctx->sh->peers = record(&p, (ngx_uint_t)pmcf->max_peers);
		none += zone_ctx->sh->peers == NULL;
	}
	upstreams = zone_ctx->sh->upstreams;
	peers = zone_ctx->sh->peers;
	for (i = 0; i < pmcf->defs.nelts; i++) {
		hash = ngx_hash_key(defs[i]->name.data, defs[i]->name.len);
		a = (ngx_http_pcpu_admission_t *)ngx_str_rbtree_lookup(&zone_ctx->sh->filters,
								       &defs[i]->name, hash);
		if (a == NULL) {
			a = record(&defs[i]->name, defs[i]->max_keys);
			if (a == NULL) {
				/* Its requests count under "__other__". */
				defs[i]->admission = NULL;
				none++;
				continue;
			}
			ngx_rbtree_insert(&zone_ctx->sh->filters, &a->sn.node);
		} else if (a->max_keys != defs[i]->max_keys) {
			/* The zone's size is the same, the bound not: the old
			 * bound holds until a restart (a full filter's keys
			 * must never change under lock-free readers). */
			ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
				      "pcpu_stats_filter \"%V\": max_keys stays %ui until a restart",
				      &defs[i]->name, a->max_keys);
		}
		defs[i]->admission = a;
	}
	ngx_shmtx_unlock(&zone_ctx->shpool->mutex);
	if (!zone_ctx->sh->seeded)
		seed(cycle, pmcf);
	gauges(cycle, pmcf);
	if (none) {
		ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
			      "pcpu: the admission zone is full: %ui filters (or the upstream names "
			      "or peers) admit no key, their requests count under \"" NGX_HTTP_PCPU_OTHER
			      "\" (counted in nginx_pcpu_series_refused_total{reason=\"zone_full\"})",
			      none);
		return NGX_DECLINED;
	}
	return NGX_OK;
}

/* ---- counting ---------------------------------------------------------------------- */

/* A key's series: made in this process (found in the tree if another
 * process made them). NULL on failure (logged once). */
static filter_key_t *key_new(ngx_http_pcpu_filter_def_t *def, ngx_str_t *label, uint32_t hash,
			     shared_key_t *shared, ngx_log_t *log)
{
	filter_key_t *k = ngx_calloc(sizeof(*k) + label->len + 1, log);
	u_char *p;

	if (k == NULL)
		return NULL;
	p = (u_char *)(k + 1);
	ngx_memcpy(p, label->data, label->len);
	p[label->len] = '\0';
	k->sn.str.data = p;
	k->sn.str.len = label->len;
	k->sn.node.key = hash;
	k->refused = -1;
	k->shared = shared;
	k->labels[0] = def->cname;
	k->labels[1] = (const char *)p;
	k->requests = pcpu_family_counter(ngx_http_pcpu_tree.f_requests, k->labels);
	k->req_bytes = pcpu_family_counter(ngx_http_pcpu_tree.f_req_bytes, k->labels);
	k->resp_bytes = pcpu_family_counter(ngx_http_pcpu_tree.f_resp_bytes, k->labels);
	if (ngx_http_pcpu_tree.expire && ngx_strcmp(p, NGX_HTTP_PCPU_OTHER) != 0) {
		/* "__other__" never expires: the keys add up to the requests.
		 * A key without the gauge is never left out. */
		k->seen = pcpu_family_gauge(ngx_http_pcpu_tree.f_seen, k->labels);
		if (k->seen == NULL)
			ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, log,
					      "a filter key's last-seen gauge");
	}
	if (def->histogram) {
		k->duration = pcpu_family_histogram(ngx_http_pcpu_tree.f_duration, k->labels);
		if (k->duration == NULL)
			ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, log,
					      "a filter key's histogram");
	}
	return k;
}

static filter_key_t *key_get(ngx_http_request_t *r, ngx_http_pcpu_filter_def_t *def, ngx_str_t *label)
{
	uint32_t hash = ngx_hash_key(label->data, label->len);
	ngx_str_node_t *n;
	shared_key_t *shared = NULL;
	filter_key_t *k;
	ngx_int_t rc;

	if (def->local == NULL) {
		/* This process's, in its own memory (the configuration's is
		 * its copy). */
		ngx_rbtree_node_t *sentinel = ngx_calloc(sizeof(*sentinel), r->connection->log);

		def->local = ngx_calloc(sizeof(ngx_rbtree_t), r->connection->log);
		if (def->local == NULL || sentinel == NULL)
			return NULL;
		ngx_rbtree_init(def->local, sentinel, ngx_str_rbtree_insert_value);
	}
	n = ngx_str_rbtree_lookup(def->local, label, hash);
	if (n)
		return (filter_key_t *)n;
	rc = admit(def, 1, def->admission, label, hash, def->keys, &shared);
	if (rc != ADMITTED) {
		if (def->other == NULL) {
			ngx_str_t other = ngx_string(NGX_HTTP_PCPU_OTHER);

			def->other = key_new(def, &other, 0, NULL, r->connection->log);
			if (def->other == NULL)
				return NULL;
		}
		/* The reason goes with the key (a filter refuses for one
		 * reason once it refuses): key_of()'s caller counts it. */
		((filter_key_t *)def->other)->refused = rc;
		return def->other;
	}
	k = key_new(def, label, hash, shared, r->connection->log);
	if (k == NULL)
		return NULL;
	/* Admitted keys only: at most max_keys of them in any process. */
	ngx_rbtree_insert(def->local, &k->sn.node);
	def->nlocal++;
	return k;
}

void ngx_http_pcpu_filter_purge(ngx_http_pcpu_filter_def_t *def)
{
	ngx_rbtree_node_t *node, *next, *sentinel;
	filter_key_t *k;

	if (def->local == NULL || def->local->root == def->local->sentinel)
		return;
	sentinel = def->local->sentinel;
	for (node = ngx_rbtree_min(def->local->root, sentinel); node; node = next) {
		next = ngx_rbtree_next(def->local, node);
		k = (filter_key_t *)node;
		if (k->shared == NULL || !__atomic_load_n(&k->shared->retired, __ATOMIC_RELAXED))
			continue;
		/* Its handles go with it: the series may soon be another key's. */
		ngx_rbtree_delete(def->local, node);
		def->nlocal--;
		if (def->last == k)
			def->last = NULL;
		ngx_free(k);
	}
}

/* The key of a raw value: the process's last one for this filter when the
 * value is the same (a comparison, nothing else), else the label made of
 * it and its key, then remembered. */
static filter_key_t *key_of(ngx_http_request_t *r, ngx_http_pcpu_filter_def_t *def, ngx_str_t *raw)
{
	ngx_str_t label;
	filter_key_t *k;

	if (def->last && raw->len == def->last_len && ngx_memcmp(raw->data, def->last_raw, raw->len) == 0)
		return def->last;
	if (ngx_http_pcpu_label(r->pool, raw, &label) != NGX_OK)
		return NULL;
	k = key_get(r, def, &label);
	if (def->last_raw == NULL)
		def->last_raw = ngx_alloc(NGX_HTTP_PCPU_LABEL_MAX, r->connection->log);
	/* A value refused (counted under "__other__") may be admitted later
	 * where expired keys lend their series (reuse.c): not remembered. */
	if (k && def->last_raw && raw->len <= NGX_HTTP_PCPU_LABEL_MAX &&
	    !(k == def->other && ngx_http_pcpu_tree.expire)) {
		ngx_memcpy(def->last_raw, raw->data, raw->len);
		def->last_len = raw->len;
		def->last = k;
	} else {
		def->last = NULL;
	}
	return k;
}

/* The gauge says this second, set by the first process of the tree to
 * meet its key in this second. A set is a read and an add of the
 * difference (pcpu/gauge.h), serialised within a process only: the
 * admission zone's mutex makes it so across the tree's processes (two
 * sets at once would both add theirs). A gauge already at this second
 * costs its read, no lock. While two masters' workers run (a binary
 * upgrade), or a reload's new zone beside the old one, their mutexes
 * differ: two sets at once then leave the gauge ahead of now by the key's
 * idle time at most, so that it expires that much later, never sooner. */
void ngx_http_pcpu_seen(pcpu_gauge_t seen, time_t *at)
{
	time_t now = ngx_time();

	if (seen == NULL || *at == now)
		return;
	*at = now;
	if (pcpu_gauge_read(seen) >= (int64_t)now)
		return;
	if (zone_ctx)
		ngx_shmtx_lock(&zone_ctx->shpool->mutex);
	if (pcpu_gauge_read(seen) < (int64_t)now)
		(void)pcpu_gauge_set(seen, (int64_t)now);
	if (zone_ctx)
		ngx_shmtx_unlock(&zone_ctx->shpool->mutex);
}

void ngx_http_pcpu_filters(ngx_http_request_t *r, ngx_array_t *filters, ngx_uint_t status,
			   off_t received, off_t sent, int64_t us)
{
	ngx_http_pcpu_filter_t *f = filters->elts;
	ngx_uint_t i, cls = ngx_http_pcpu_class(status);
	ngx_str_t raw;
	filter_key_t *k;

	for (i = 0; i < filters->nelts; i++) {
		if (f[i].index != NGX_ERROR) {
			ngx_http_variable_value_t *vv = ngx_http_get_indexed_variable(r, f[i].index);

			raw.len = vv && !vv->not_found ? vv->len : 0;
			raw.data = vv && !vv->not_found ? vv->data : (u_char *)"";
		} else if (ngx_http_complex_value(r, &f[i].value, &raw) != NGX_OK) {
			continue;
		}
		k = key_of(r, f[i].def, &raw);
		if (k && k->shared && ngx_http_pcpu_tree.expire) {
			if (__atomic_load_n(&k->shared->retired, __ATOMIC_RELAXED)) {
				/* Retired since this worker's last acknowledgement
				 * (so its series is still the key's): met again, it
				 * is live again, counted on (admission revives it). */
				ngx_http_pcpu_filter_purge(f[i].def);
				k = key_of(r, f[i].def, &raw);
			}
			/* What the retirement looks at (reuse.c). */
			if (k && k->shared && k->shared->seen != ngx_time())
				k->shared->seen = ngx_time();
		}
		if (k == NULL)
			continue;
		if (k->refused >= 0)
			ngx_http_pcpu_refused((ngx_uint_t)k->refused, r->connection->log, "a filter's key");
		ngx_http_pcpu_seen(k->seen, &k->seen_at);
		if (k->requests)
			pcpu_counter_inc(k->requests);
		else
			ngx_http_pcpu_refused(NGX_HTTP_PCPU_REFUSED_SEGMENT_FULL, r->connection->log,
					      "a filter key's series");
		if (k->req_bytes)
			pcpu_counter_add(k->req_bytes, (int64_t)received);
		if (k->resp_bytes)
			pcpu_counter_add(k->resp_bytes, (int64_t)sent);
		if (k->classes[cls] == NULL) {
			const char *v[3] = {k->labels[0], k->labels[1], ngx_http_pcpu_class_names[cls]};

			k->classes[cls] = pcpu_family_counter(ngx_http_pcpu_tree.f_responses, v);
		}
		if (k->classes[cls])
			pcpu_counter_inc(k->classes[cls]);
		if (k->duration && us >= 0)
			pcpu_histogram_record(k->duration, us);
	}
}
