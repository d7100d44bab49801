/* SPDX-License-Identifier: MIT */
/*
 * User keys: `pcpu_stats_filter NAME $value [max_keys=N]` counts each
 * request under the value the expression takes for it, in
 * nginx_http_filter_requests_total{filter="NAME",key="VALUE"} and its
 * bytes and classes -- VTS's filter_by_set_key.
 *
 * The bound. A key is a label value, a series the tree keeps until the
 * master ends it (pcpu removes nothing from a shared registry), and keys
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
 * the admitted keys never change again, and a worker looks an unknown key
 * up without the mutex (the flag is set, with release order, after the
 * last insertion) -- so a flood of new keys past the bound costs a lookup
 * per request, never a lock. Known keys cost a lookup in the worker's own
 * tree and a few rseq adds: no lock, no atomic instruction.
 *
 * Reloads keep the zone while its size stays the same (nginx reuses it);
 * a new zone (filters added, bounds changed, a binary upgrade's new master)
 * starts with the keys the tree already has, read from the segment, so the
 * bound holds across the tree's whole life. Keys admitted by old workers
 * finishing their requests after such a reload are not in the new zone:
 * the tree may then hold up to that many keys more than the bound.
 */
#include "ngx_http_pcpu_module.h"

/* Shared memory per key, at most: its node and label (256 bytes), as the
 * slab allocator rounds them. */
#define KEY_BYTES 512

struct ngx_http_pcpu_admission_s {
	ngx_str_node_t sn; /* the filter's name */
	ngx_uint_t max_keys;
	ngx_uint_t count;   /* keys admitted: only grows */
	ngx_uint_t full;    /* count reached max_keys: the keys never change again */
	ngx_rbtree_t keys;  /* ngx_str_node_t */
	ngx_rbtree_node_t sentinel;
};

typedef struct {
	ngx_rbtree_t filters; /* ngx_http_pcpu_admission_t, by name */
	ngx_rbtree_node_t sentinel;
	ngx_uint_t seeded;    /* the tree's keys read in */
} shared_t;

typedef struct {
	shared_t *sh;
	ngx_slab_pool_t *shpool;
} zone_ctx_t;

/* A key's series in this process. */
typedef struct {
	ngx_str_node_t sn; /* str: the label value */
	const char *labels[3];
	pcpu_counter_t requests, req_bytes, resp_bytes;
	pcpu_counter_t classes[NGX_HTTP_PCPU_CLASSES];
} filter_key_t;

static zone_ctx_t *zone_ctx;

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
	ngx_uint_t i;

	if (cf->args->nelts == 4) {
		if (value[3].len <= 9 || ngx_strncmp(value[3].data, "max_keys=", 9) != 0 ||
		    (max = ngx_atoi(value[3].data + 9, value[3].len - 9)) == NGX_ERROR || max < 1 ||
		    max > 1000000) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
					   "invalid parameter \"%V\" (max_keys=N, 1 to 1000000)",
					   &value[3]);
			return NGX_CONF_ERROR;
		}
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
	if (def && cf->args->nelts == 4 && def->max_keys != (ngx_uint_t)max) {
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
	ctx->sh = ngx_slab_alloc(ctx->shpool, sizeof(shared_t));
	if (ctx->sh == NULL)
		return NGX_ERROR;
	ngx_rbtree_init(&ctx->sh->filters, &ctx->sh->sentinel, ngx_str_rbtree_insert_value);
	ctx->sh->seeded = 0;
	ctx->shpool->data = ctx->sh;
	ctx->shpool->log_nomem = 0; /* a full zone is the bound's business, logged below */
	return NGX_OK;
}

ngx_int_t ngx_http_pcpu_filter_zone(ngx_conf_t *cf, ngx_http_pcpu_main_conf_t *pmcf)
{
	static ngx_str_t name = ngx_string("pcpu_stats_filters");
	ngx_http_pcpu_filter_def_t **defs = pmcf->defs.elts;
	size_t size = 16 * ngx_pagesize;
	zone_ctx_t *ctx;
	ngx_uint_t i;

	if (pmcf->defs.nelts == 0)
		return NGX_OK;
	for (i = 0; i < pmcf->defs.nelts; i++)
		size += sizeof(ngx_http_pcpu_admission_t) + 2 * KEY_BYTES +
			defs[i]->max_keys * KEY_BYTES;
	size = ngx_align(size, ngx_pagesize);
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

/* Admits `key` into `a` (the shared zone's mutex held): 1 if admitted now
 * or before, 0 if not (the bound, or the zone full). */
static ngx_uint_t admit_locked(ngx_slab_pool_t *shpool, ngx_http_pcpu_admission_t *a, ngx_str_t *key,
			       uint32_t hash)
{
	ngx_str_node_t *n;

	if (ngx_str_rbtree_lookup(&a->keys, key, hash))
		return 1;
	if (a->full || a->count >= a->max_keys)
		return 0;
	n = ngx_slab_alloc_locked(shpool, sizeof(*n) + key->len);
	if (n == NULL)
		return 0;
	n->str.data = (u_char *)(n + 1);
	n->str.len = key->len;
	ngx_memcpy(n->str.data, key->data, key->len);
	n->node.key = hash;
	ngx_rbtree_insert(&a->keys, &n->node);
	if (++a->count >= a->max_keys)
		/* After the insertion: a worker that sees it set reads a tree
		 * that no one changes again, without the mutex. */
		__atomic_store_n(&a->full, 1, __ATOMIC_RELEASE);
	return 1;
}

static ngx_uint_t admit(ngx_http_pcpu_admission_t *a, ngx_str_t *key, uint32_t hash)
{
	ngx_uint_t ok;

	if (a == NULL)
		return 0;
	if (__atomic_load_n(&a->full, __ATOMIC_ACQUIRE))
		return ngx_str_rbtree_lookup(&a->keys, key, hash) != NULL;
	ngx_shmtx_lock(&zone_ctx->shpool->mutex);
	ok = admit_locked(zone_ctx->shpool, a, key, hash);
	ngx_shmtx_unlock(&zone_ctx->shpool->mutex);
	return ok;
}

/* The master, a new zone: the keys the tree has (a binary upgrade's old
 * master's, those of the cycle before a reload that made a new zone). */
static void seed(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf)
{
	struct pcpu_reader_options o;
	struct pcpu_reader_snapshot *s;
	ngx_http_pcpu_filter_def_t **defs = pmcf->defs.elts;
	pcpu_reader_t *r;
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
							  ngx_hash_key(key.data, key.len));
		}
	}
	zone_ctx->sh->seeded = 1;
	ngx_shmtx_unlock(&zone_ctx->shpool->mutex);
	pcpu_reader_snapshot_free(s);
	pcpu_reader_close(r);
	if (n) {
		ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
			      "pcpu: %ui filter keys the statistics had, admitted again", n);
	}
}

ngx_int_t ngx_http_pcpu_filter_init(ngx_cycle_t *cycle, ngx_http_pcpu_main_conf_t *pmcf)
{
	ngx_http_pcpu_filter_def_t **defs = pmcf->defs.elts;
	ngx_http_pcpu_admission_t *a;
	ngx_uint_t i;
	uint32_t hash;

	zone_ctx = pmcf->shm ? pmcf->shm->data : NULL;
	if (zone_ctx == NULL)
		return NGX_OK;
	ngx_shmtx_lock(&zone_ctx->shpool->mutex);
	for (i = 0; i < pmcf->defs.nelts; i++) {
		hash = ngx_hash_key(defs[i]->name.data, defs[i]->name.len);
		a = (ngx_http_pcpu_admission_t *)ngx_str_rbtree_lookup(&zone_ctx->sh->filters,
								       &defs[i]->name, hash);
		if (a == NULL) {
			a = ngx_slab_calloc_locked(zone_ctx->shpool, sizeof(*a) + defs[i]->name.len);
			if (a == NULL)
				break;
			a->sn.str.data = (u_char *)(a + 1);
			a->sn.str.len = defs[i]->name.len;
			ngx_memcpy(a->sn.str.data, defs[i]->name.data, defs[i]->name.len);
			a->sn.node.key = hash;
			a->max_keys = defs[i]->max_keys;
			ngx_rbtree_init(&a->keys, &a->sentinel, ngx_str_rbtree_insert_value);
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
	if (i < pmcf->defs.nelts) {
		ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "pcpu: the filters' shared zone is full");
		return NGX_ERROR;
	}
	if (!zone_ctx->sh->seeded)
		seed(cycle, pmcf);
	return NGX_OK;
}

/* ---- counting ---------------------------------------------------------------------- */

/* A key's series: made in this process (found in the tree if another
 * process made them). NULL on failure (logged once). */
static filter_key_t *key_new(ngx_http_pcpu_filter_def_t *def, ngx_str_t *label, uint32_t hash,
		      ngx_log_t *log)
{
	static ngx_uint_t said;
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
	k->labels[0] = def->cname;
	k->labels[1] = (const char *)p;
	k->requests = pcpu_family_counter(ngx_http_pcpu_tree.f_requests, k->labels);
	k->req_bytes = pcpu_family_counter(ngx_http_pcpu_tree.f_req_bytes, k->labels);
	k->resp_bytes = pcpu_family_counter(ngx_http_pcpu_tree.f_resp_bytes, k->labels);
	if ((!k->requests || !k->req_bytes || !k->resp_bytes) && said++ == 0) {
		ngx_log_error(NGX_LOG_ERR, log, 0, "pcpu: filter \"%s\" key \"%s\": %s", def->cname,
			      p, pcpu_stats_error());
	}
	return k;
}

static filter_key_t *key_get(ngx_http_request_t *r, ngx_http_pcpu_filter_def_t *def, ngx_str_t *label)
{
	uint32_t hash = ngx_hash_key(label->data, label->len);
	ngx_str_node_t *n;
	filter_key_t *k;

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
	if (!admit(def->admission, label, hash)) {
		if (def->other == NULL) {
			ngx_str_t other = ngx_string(NGX_HTTP_PCPU_OTHER);

			def->other = key_new(def, &other, 0, r->connection->log);
		}
		return def->other;
	}
	k = key_new(def, label, hash, r->connection->log);
	if (k == NULL)
		return NULL;
	/* Admitted keys only: at most max_keys of them in any process. */
	ngx_rbtree_insert(def->local, &k->sn.node);
	def->nlocal++;
	return k;
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
	if (k && def->last_raw && raw->len <= NGX_HTTP_PCPU_LABEL_MAX) {
		ngx_memcpy(def->last_raw, raw->data, raw->len);
		def->last_len = raw->len;
		def->last = k;
	} else {
		def->last = NULL;
	}
	return k;
}

void ngx_http_pcpu_filters(ngx_http_request_t *r, ngx_array_t *filters, ngx_uint_t status,
			   off_t received, off_t sent)
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
		if (k == NULL)
			continue;
		if (k->requests)
			pcpu_counter_inc(k->requests);
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
	}
}
