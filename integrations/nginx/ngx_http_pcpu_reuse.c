/* SPDX-License-Identifier: MIT */
/*
 * Expired filter keys and upstream peers lend their series to new ones
 * (pcpu_stats_expire; issue 63: "series not seen for a configurable time
 * expire"), and expired upstream names free their place under
 * pcpu_stats_max_upstreams: a name has no series of its own (its peers'
 * carry it), so it is retired once none of its peers is live and it has
 * no peer="__other__" series (which never expires), with its expired
 * peers, and a new name past the bound takes the place of the oldest one
 * every worker let go of (the workers hold no handle of a name, but read
 * a full record's names without the mutex: the same epochs guard it). A
 * name met again after that is a new name.
 *
 * Why. A filter at its bound holds max_keys keys (the peers,
 * pcpu_stats_max_peers), and pcpu removes no series from a shared
 * registry: with expiry that only hid keys, a filter that had once met
 * max_keys keys counted every new key under "__other__" for good.
 * pcpu_family_relabel() gives a series new label values over the same
 * storage, its values from zero -- provided, as for free(), that no
 * process of the tree still uses the old series' handles. The workers
 * cache each key's handles (filter.c; a peer's, upstream.c), so the series
 * of a key goes to another only once every worker has let go of it:
 *
 *  1. Retire. A worker's timer (once a second; a record looked at every
 *     expire/2 at most, by one worker) retires the keys of a filter (the
 *     peers) at its bound not met for the expiry: they are queued, oldest first, in a
 *     new epoch (sh->epoch + 1), and the record's `full` flag is cleared.
 *     A filter below its bound keeps its expired keys (hidden only): the
 *     bound has room for new keys, and a key met again has its count.
 *  2. Acknowledge. Each worker, at the top of its log handler and from its
 *     timer -- between events, where it holds no handle in flight --
 *     compares the epoch with the last one it acknowledged: when it moved,
 *     it drops its handles of the retired keys, then stores the epoch in
 *     its slot. The log handler's cost: a load and a comparison.
 *  3. Reckon. Once a second, a worker's timer takes `safe`, the lowest
 *     epoch the live workers acknowledged; the slot of a process gone
 *     (killed, exited: kill(pid, 0) fails with ESRCH) is freed, and a
 *     worker respawned in a killed one's slot acknowledged everything
 *     when it started (it holds nothing).
 *  4. Lend. A worker meeting a new key at a full filter, under the
 *     admission mutex it takes for new keys anyway, relabels the series of
 *     the oldest retired key of an epoch <= safe (every family: requests,
 *     bytes, classes, time, last seen; a peer's times, bytes, last seen
 *     and status codes -- all 1000 tried, where it has a few: 0.44 ms a
 *     peer, 0.07 to 0.25 ms a filter's key, measured in nginx_reusepeers
 *     and nginx_reuse on a loaded 2-CPU machine) to the new key, and
 *     replaces that shared key by the new one: admitted, from zero. No key
 *     to lend yet: "__other__", as before. A peer's series may go to a
 *     peer of another upstream.
 *
 * A name is retired with its peers (retire_names_locked), and a peer
 * admitted or met again under a retired name makes the name live again
 * (ngx_http_pcpu_reuse_name), so a live peer never has a name that lost
 * its place; a name's place goes (reuse_locked, nothing relabelled) only
 * once every worker acknowledged its epoch.
 *
 * A retired key met again before its series went to another key is live
 * again, counted on (filter.c checks the cached key's `retired` as it
 * counts, so a request met between its retirement and its worker's
 * acknowledgement is not lost); met after, it is a new key, from zero.
 *
 * `full` (filter.c reads a full record's keys without the mutex): keys are
 * inserted and removed only in step 4, for a key retired in an epoch E
 * that cleared `full`, and every worker acknowledged E after it, so no
 * walk that began with `full` set still runs; `full` is set again only
 * when no key is retired (refull).
 *
 * Who else may hold a key's series:
 *  - a reload's old workers, when the zone is kept (same filters and
 *    bounds): they have slots, and go on acknowledging while they shut
 *    down (the timer is cancelable: it never keeps a worker from exiting);
 *  - a reload that made a new zone: the old zone lends no more (frozen),
 *    the new one none until the old one's processes are gone (`foreign`);
 *  - a binary upgrade: two masters, two zones over one tree; a zone lends
 *    only while the tree's gauge nginx_pcpu_masters is 1 (each master adds
 *    itself as it makes or joins the tree, and takes itself off as it
 *    leaves). A master killed by SIGKILL never takes itself off: its tree
 *    lends nothing until nginx restarts. The new master also waits for
 *    the old one (its parent: `foreign`) to be gone, which covers an old
 *    master whose module predates the gauge (and lends nothing itself).
 *  - a worker stopped (SIGSTOP, a debugger, a module blocking its event
 *    loop) holds every lending back until it runs again or dies; nothing
 *    waits for it, new keys count under "__other__" meanwhile. It is never
 *    passed over: stopped inside its log phase, it may hold handles of a
 *    retired key, and a histogram's handle is freed once its series is
 *    relabelled.
 *  - without workers (master_process off) nothing is lent.
 */
#include <errno.h>
#include <signal.h>

#include "ngx_http_pcpu_admission.h"

static ngx_http_pcpu_ack_t *slot; /* this worker's, or NULL: no lending here */
static ngx_uint_t acked;          /* the epoch it last acknowledged */

void ngx_http_pcpu_reuse_process(ngx_cycle_t *cycle)
{
	ngx_http_pcpu_zone_ctx_t *z = ngx_http_pcpu_zone();

	if (z == NULL || !ngx_http_pcpu_tree.expire || ngx_process != NGX_PROCESS_WORKER ||
	    ngx_process_slot < 0 || ngx_process_slot >= NGX_MAX_PROCESSES)
		return;
	ngx_shmtx_lock(&z->shpool->mutex);
	slot = &z->sh->acks[ngx_process_slot];
	/* A new process holds no handle: every epoch so far acknowledged
	 * (respawned in a killed worker's slot, it takes the slot over). */
	acked = z->sh->epoch;
	__atomic_store_n(&slot->acked, acked, __ATOMIC_RELEASE);
	slot->pid = ngx_pid;
	ngx_shmtx_unlock(&z->shpool->mutex);
}

static ngx_http_pcpu_main_conf_t *main_conf(void)
{
	return ngx_http_cycle_get_module_main_conf((ngx_cycle_t *)ngx_cycle, ngx_http_pcpu_module);
}

void ngx_http_pcpu_reuse_ack(void)
{
	ngx_http_pcpu_main_conf_t *pmcf;
	ngx_http_pcpu_filter_def_t **defs;
	ngx_uint_t e, i;

	if (slot == NULL)
		return;
	/* Acquire: the keys retired in epoch e are marked before it is
	 * stored (release, under the mutex). */
	e = __atomic_load_n(&ngx_http_pcpu_zone()->sh->epoch, __ATOMIC_ACQUIRE);
	if (e == acked)
		return;
	pmcf = main_conf();
	defs = pmcf ? pmcf->defs.elts : NULL;
	for (i = 0; pmcf && i < pmcf->defs.nelts; i++)
		ngx_http_pcpu_filter_purge(defs[i]);
	ngx_http_pcpu_upstream_purge();
	acked = e;
	/* Release: the handles dropped before another worker lends. */
	__atomic_store_n(&slot->acked, e, __ATOMIC_RELEASE);
}

void ngx_http_pcpu_refull_locked(ngx_http_pcpu_admission_t *a)
{
	if (a->retired == 0 && (a->count >= a->max_keys || a->zone_full))
		__atomic_store_n(&a->full, 1, __ATOMIC_RELEASE);
}

/* Queues key k of record a, retired in epoch e (the mutex held). */
static void queue_locked(ngx_http_pcpu_admission_t *a, ngx_http_pcpu_shared_key_t *k, ngx_uint_t e)
{
	__atomic_store_n(&k->retired, e, __ATOMIC_RELAXED);
	k->next = NULL;
	if (a->rtail)
		a->rtail->next = k;
	else
		a->rhead = k;
	a->rtail = k;
	a->retired++;
	/* Before the epoch: a worker acknowledging it walks no full record
	 * without the mutex any more. */
	__atomic_store_n(&a->full, 0, __ATOMIC_RELAXED);
}

static ngx_uint_t expired(ngx_http_pcpu_shared_key_t *k, time_t now)
{
	return k->seen && k->seen + ngx_http_pcpu_tree.expire < now;
}

/* The upstream name (of record a) of peer k ("upstream\0peer"), or NULL. */
static ngx_http_pcpu_shared_key_t *name_of(ngx_http_pcpu_admission_t *a, ngx_http_pcpu_shared_key_t *k)
{
	u_char *end = ngx_strlchr(k->sn.str.data, k->sn.str.data + k->sn.str.len, '\0');
	ngx_str_t name;

	if (end == NULL)
		return NULL;
	name.data = k->sn.str.data;
	name.len = end - name.data;
	return (ngx_http_pcpu_shared_key_t *)ngx_str_rbtree_lookup(&a->keys, &name,
								   ngx_hash_key(name.data, name.len));
}

/* Step 1 for the upstream names (record a), in epoch e: a name has no
 * series of its own (its peers' carry it), so it is retired once none of
 * its peers is live (met within the expiry, not retired) and it has no
 * peer="__other__" series (which never expires), with its expired peers
 * -- below the peers' bound too: they carry the name, and a worker that
 * kept their handles would count under a name that lost its place. Its
 * last second seen: its admission's, or its latest peer's (workers look a
 * name up only as they admit a peer). How many went. */
static ngx_uint_t retire_names_locked(ngx_http_pcpu_shared_t *sh, ngx_http_pcpu_admission_t *a,
				      ngx_uint_t e, time_t now)
{
	ngx_http_pcpu_admission_t *p = sh->peers;
	ngx_rbtree_node_t *node;
	ngx_http_pcpu_shared_key_t *k, *n;
	ngx_uint_t count = 0;

	if (p == NULL)
		return 0; /* no peers' record (no room): which name is free is not known */
	for (node = ngx_rbtree_min(a->keys.root, a->keys.sentinel); node; node = ngx_rbtree_next(&a->keys, node))
		((ngx_http_pcpu_shared_key_t *)node)->held = 0;
	for (node = p->keys.root == p->keys.sentinel ? NULL : ngx_rbtree_min(p->keys.root, p->keys.sentinel);
	     node; node = ngx_rbtree_next(&p->keys, node)) {
		k = (ngx_http_pcpu_shared_key_t *)node;
		if ((n = name_of(a, k)) == NULL)
			continue; /* its name gone already: the peer waits to be lent */
		if (!k->retired && !expired(k, now))
			n->held = 1;
		if (k->seen > n->seen)
			n->seen = k->seen;
	}
	for (node = ngx_rbtree_min(a->keys.root, a->keys.sentinel); node; node = ngx_rbtree_next(&a->keys, node)) {
		k = (ngx_http_pcpu_shared_key_t *)node;
		if (k->retired || k->held || k->others || !expired(k, now))
			continue;
		queue_locked(a, k, e);
		count++;
	}
	for (node = count && p->keys.root != p->keys.sentinel ? ngx_rbtree_min(p->keys.root, p->keys.sentinel)
							       : NULL;
	     node; node = ngx_rbtree_next(&p->keys, node)) {
		k = (ngx_http_pcpu_shared_key_t *)node;
		if (!k->retired && (n = name_of(a, k)) && n->retired == e)
			queue_locked(p, k, e);
	}
	return count;
}

/* Step 1 for record a, the mutex held. */
static void retire_locked(ngx_http_pcpu_shared_t *sh, ngx_http_pcpu_admission_t *a, time_t now)
{
	ngx_rbtree_node_t *node, *sentinel = a->keys.sentinel;
	ngx_http_pcpu_shared_key_t *k;
	ngx_uint_t e = sh->epoch + 1, n = 0;

	if (a->keys.root == sentinel)
		return;
	if (a == sh->upstreams)
		n = retire_names_locked(sh, a, e, now);
	else
		for (node = ngx_rbtree_min(a->keys.root, sentinel); node; node = ngx_rbtree_next(&a->keys, node)) {
			k = (ngx_http_pcpu_shared_key_t *)node;
			if (k->retired || !expired(k, now))
				continue;
			queue_locked(a, k, e);
			n++;
		}
	if (n)
		__atomic_store_n(&sh->epoch, e, __ATOMIC_RELEASE);
}

static ngx_uint_t alive(ngx_pid_t pid)
{
	return kill(pid, 0) == 0 || ngx_errno != ESRCH;
}

/* Whether the zone may lend now: the only master of the tree (read just
 * before lending: a new master adds itself before it forks a worker). */
static ngx_uint_t alone(void)
{
	pcpu_gauge_t m = ngx_http_pcpu_tree.masters;

	return m && pcpu_gauge_read(m) == 1;
}

/* The records that lend: each filter's (def), then the peers' and the
 * upstream names' (def NULL; a name lends its place, no series), with
 * their nginx_pcpu_keys_reusable gauge. Lender i's record in *a (NULL: it
 * has none, the zone had no room), or 0 past the last one. */
static ngx_uint_t lender(ngx_http_pcpu_main_conf_t *pmcf, ngx_uint_t i,
			 ngx_http_pcpu_admission_t **a, ngx_http_pcpu_filter_def_t **def,
			 pcpu_gauge_t *reusable)
{
	ngx_http_pcpu_filter_def_t **defs = pmcf->defs.elts;

	if (i < pmcf->defs.nelts) {
		*def = defs[i];
		*reusable = defs[i]->reusable;
		*a = defs[i]->admission;
		return 1;
	}
	*def = NULL;
	*a = i == pmcf->defs.nelts ? ngx_http_pcpu_zone()->sh->peers : ngx_http_pcpu_zone()->sh->upstreams;
	*reusable = i == pmcf->defs.nelts ? ngx_http_pcpu_tree.peers_reusable
					  : ngx_http_pcpu_tree.upstreams_reusable;
	return i <= pmcf->defs.nelts + 1;
}

/* nginx_pcpu_keys_reusable of record a: its retired keys every worker let go. */
static void reusable_locked(ngx_http_pcpu_shared_t *sh, ngx_http_pcpu_admission_t *a,
			    pcpu_gauge_t g)
{
	ngx_http_pcpu_shared_key_t *k;
	int64_t n = 0;

	if (g == NULL || a == NULL)
		return;
	for (k = a->rhead; k && !sh->blocked && k->retired <= sh->safe; k = k->next)
		n++;
	(void)pcpu_gauge_set(g, n);
}

/* Step 3, the mutex held. */
static void reckon_locked(ngx_http_pcpu_shared_t *sh, ngx_http_pcpu_main_conf_t *pmcf)
{
	ngx_http_pcpu_filter_def_t *def;
	ngx_http_pcpu_admission_t *a;
	ngx_uint_t i, min = sh->epoch, blocked = sh->frozen || !alone(), e;
	pcpu_gauge_t g;

	for (i = 0; i < NGX_MAX_PROCESSES; i++) {
		if (sh->acks[i].pid == 0)
			continue;
		if (!alive(sh->acks[i].pid)) {
			sh->acks[i].pid = 0;
			continue;
		}
		e = __atomic_load_n(&sh->acks[i].acked, __ATOMIC_ACQUIRE);
		if (e < min)
			min = e;
	}
	for (i = 0; i < sh->nforeign;) {
		if (alive(sh->foreign[i])) {
			blocked = 1;
			i++;
		} else {
			sh->foreign[i] = sh->foreign[--sh->nforeign];
		}
	}
	sh->safe = min;
	sh->blocked = blocked;
	for (i = 0; lender(pmcf, i, &a, &def, &g); i++) {
		if (a == NULL)
			continue;
		/* Nothing to lend for now: the retired keys live again (no
		 * key moves), so that `full` spares new keys the mutex. They
		 * are retired again once the zone may lend. */
		while (blocked && a->rhead)
			ngx_http_pcpu_revive_locked(a, a->rhead);
		reusable_locked(sh, a, g);
	}
}

void ngx_http_pcpu_reuse_tick(void)
{
	ngx_http_pcpu_zone_ctx_t *z = ngx_http_pcpu_zone();
	ngx_http_pcpu_main_conf_t *pmcf;
	ngx_http_pcpu_filter_def_t *def;
	ngx_http_pcpu_admission_t *a;
	time_t now = ngx_time(), every = ngx_max(ngx_http_pcpu_tree.expire / 2, 1);
	pcpu_gauge_t g;
	ngx_uint_t i;

	if (slot == NULL || (pmcf = main_conf()) == NULL)
		return;
	ngx_http_pcpu_reuse_ack();
	for (i = 0; lender(pmcf, i, &a, &def, &g); i++) {
		if (__atomic_load_n(&z->sh->blocked, __ATOMIC_RELAXED))
			break; /* nothing retired while nothing can be lent */
		/* Unlocked reads, checked again under the mutex: a look that
		 * finds nothing to do costs no lock. */
		if (a == NULL || a->zone_full || __atomic_load_n(&a->count, __ATOMIC_RELAXED) < a->max_keys ||
		    __atomic_load_n(&a->scanned, __ATOMIC_RELAXED) + every > now)
			continue;
		ngx_shmtx_lock(&z->shpool->mutex);
		if (a->scanned + every <= now) {
			a->scanned = now;
			retire_locked(z->sh, a, now);
		}
		ngx_shmtx_unlock(&z->shpool->mutex);
	}
	if (__atomic_load_n(&z->sh->safe_at, __ATOMIC_RELAXED) == now)
		return;
	ngx_shmtx_lock(&z->shpool->mutex);
	if (z->sh->safe_at != now) {
		z->sh->safe_at = now;
		reckon_locked(z->sh, pmcf);
	}
	ngx_shmtx_unlock(&z->shpool->mutex);
}

/* Every series of a key (def's key, or a peer: "upstream\0peer") `from`
 * now key `to`: the first family of the list (requests; a peer's response
 * time, which every peer has) first, and where it cannot go nothing does
 * (NGX_DECLINED); a family after it that refuses (logged) keeps its old
 * series: under the old key, hidden as expired while its last-seen gauge
 * went. The last family's third label runs over `third` (response
 * classes; a peer's status codes: every one nginx can log, 000-999, most
 * of them not found, ENOENT). */
static ngx_int_t relabel(ngx_http_pcpu_filter_def_t *def, ngx_str_t *from, ngx_str_t *to)
{
	static ngx_uint_t said;
	ngx_http_pcpu_tree_t *t = &ngx_http_pcpu_tree;
	pcpu_family_t *keyf[] = {t->f_requests, t->f_req_bytes, t->f_resp_bytes, t->f_duration,
				 t->f_seen, t->f_responses};
	pcpu_family_t *peerf[] = {t->up_duration, t->up_connect, t->up_header, t->up_received,
				  t->up_sent, t->up_seen, t->up_responses};
	pcpu_family_t **fams = def ? keyf : peerf;
	ngx_uint_t nf = def ? 6 : 7, third = def ? NGX_HTTP_PCPU_CLASSES : NGX_HTTP_PCPU_CODES, i;
	char fb[2 * NGX_HTTP_PCPU_LABEL_MAX + 2], tb[2 * NGX_HTTP_PCPU_LABEL_MAX + 2];
	char code[NGX_INT_T_LEN + 1];
	const char *ov[3], *nv[3];

	if (from->len >= sizeof(fb) || to->len >= sizeof(tb))
		return NGX_DECLINED;
	ngx_memcpy(fb, from->data, from->len);
	fb[from->len] = '\0';
	ngx_memcpy(tb, to->data, to->len);
	tb[to->len] = '\0';
	/* A filter's key: filter, key; a peer's: upstream, peer. */
	ov[0] = def ? def->cname : fb;
	ov[1] = def ? fb : fb + ngx_strlen(fb) + 1;
	nv[0] = def ? def->cname : tb;
	nv[1] = def ? tb : tb + ngx_strlen(tb) + 1;
	if (!def && (ov[1] > fb + from->len || nv[1] > tb + to->len))
		return NGX_DECLINED; /* not "upstream\0peer" */
	ov[2] = nv[2] = NULL;
	for (i = 0; i < nf - 1 + third; i++) {
		pcpu_family_t *f = fams[ngx_min(i, nf - 1)];

		if (i >= nf - 1) {
			if (def) {
				ov[2] = ngx_http_pcpu_class_names[i - (nf - 1)];
			} else {
				ngx_sprintf((u_char *)code, "%03ui%Z", i - (nf - 1));
				ov[2] = code;
			}
			nv[2] = ov[2];
		}
		/* ENOENT: a series never made (a class or code never met, no
		 * histogram). */
		if (f == NULL || pcpu_family_relabel(f, ov, nv) == 0 || errno == ENOENT)
			continue;
		if (!said++)
			ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
				      "pcpu: %s \"%s\" \"%s\" cannot lend its series to \"%s\" \"%s\": %s "
				      "(said once)", def ? "filter key" : "upstream peer", ov[0], ov[1],
				      nv[0], nv[1], pcpu_stats_error());
		if (i == 0)
			return NGX_DECLINED;
	}
	return NGX_OK;
}

ngx_int_t ngx_http_pcpu_reuse_locked(ngx_http_pcpu_admission_t *a, ngx_http_pcpu_filter_def_t *def,
				     ngx_str_t *key, uint32_t hash, ngx_http_pcpu_shared_key_t **out)
{
	ngx_http_pcpu_zone_ctx_t *z = ngx_http_pcpu_zone();
	ngx_http_pcpu_shared_key_t *old = a->rhead, *n;

	if (slot == NULL || old == NULL || z->sh->blocked || z->sh->frozen || old->retired > z->sh->safe ||
	    !alone())
		return NGX_HTTP_PCPU_REFUSED_MAX_KEYS;
	/* The new shared key first: without room, nothing changes. */
	n = ngx_slab_alloc_locked(z->shpool, sizeof(*n) + key->len);
	if (n == NULL)
		return NGX_HTTP_PCPU_REFUSED_ZONE_FULL;
	/* An upstream name: its place only (its series went with its peers'). */
	if (a != z->sh->upstreams && relabel(def, &old->sn.str, key) != NGX_OK) {
		ngx_slab_free_locked(z->shpool, n);
		return NGX_HTTP_PCPU_REFUSED_MAX_KEYS;
	}
	a->rhead = old->next;
	if (a->rhead == NULL)
		a->rtail = NULL;
	a->retired--;
	ngx_rbtree_delete(&a->keys, &old->sn.node);
	ngx_slab_free_locked(z->shpool, old);
	ngx_memzero(n, sizeof(*n));
	n->sn.str.data = (u_char *)(n + 1);
	n->sn.str.len = key->len;
	ngx_memcpy(n->sn.str.data, key->data, key->len);
	n->sn.node.key = hash;
	n->seen = ngx_time();
	ngx_rbtree_insert(&a->keys, &n->sn.node);
	ngx_http_pcpu_refull_locked(a);
	reusable_locked(z->sh, a, def ? def->reusable : a == z->sh->upstreams ? ngx_http_pcpu_tree.upstreams_reusable
									       : ngx_http_pcpu_tree.peers_reusable);
	*out = n;
	return NGX_HTTP_PCPU_ADMITTED;
}

void ngx_http_pcpu_revive_locked(ngx_http_pcpu_admission_t *a, ngx_http_pcpu_shared_key_t *n)
{
	ngx_http_pcpu_shared_key_t **p, *prev = NULL;

	for (p = &a->rhead; *p && *p != n; p = &(*p)->next)
		prev = *p;
	if (*p == NULL)
		return; /* not queued: never retired */
	*p = n->next;
	if (a->rtail == n)
		a->rtail = prev;
	n->next = NULL;
	__atomic_store_n(&n->retired, 0, __ATOMIC_RELAXED);
	a->retired--;
	ngx_http_pcpu_refull_locked(a);
}

void ngx_http_pcpu_reuse_name(ngx_http_pcpu_shared_key_t *n, ngx_uint_t other)
{
	ngx_http_pcpu_zone_ctx_t *z = ngx_http_pcpu_zone();

	/* Unlocked reads: set once for good, retired by a holder of the
	 * mutex; a name live and marked costs nothing. */
	if (z == NULL || n == NULL ||
	    ((!other || __atomic_load_n(&n->others, __ATOMIC_RELAXED)) &&
	     !__atomic_load_n(&n->retired, __ATOMIC_RELAXED)))
		return;
	ngx_shmtx_lock(&z->shpool->mutex);
	if (other)
		n->others = 1;
	if (n->retired && z->sh->upstreams)
		ngx_http_pcpu_revive_locked(z->sh->upstreams, n);
	ngx_shmtx_unlock(&z->shpool->mutex);
}

void ngx_http_pcpu_reuse_joined(ngx_http_pcpu_zone_ctx_t *ctx)
{
	ngx_pid_t parent = getppid();

	if (ctx == NULL || parent <= 1)
		return; /* the old master gone already (reparented) */
	ngx_shmtx_lock(&ctx->shpool->mutex);
	if (ctx->sh->nforeign < NGX_MAX_PROCESSES)
		ctx->sh->foreign[ctx->sh->nforeign++] = parent;
	else
		ctx->sh->frozen = 1;
	ctx->sh->blocked = 1;
	ngx_shmtx_unlock(&ctx->shpool->mutex);
}

void ngx_http_pcpu_reuse_handover(ngx_http_pcpu_zone_ctx_t *prev, ngx_http_pcpu_zone_ctx_t *ctx)
{
	ngx_pid_t pids[NGX_MAX_PROCESSES];
	ngx_uint_t i, n = 0;

	if (prev == NULL || ctx == NULL || prev->sh == ctx->sh)
		return;
	ngx_shmtx_lock(&prev->shpool->mutex);
	prev->sh->frozen = prev->sh->blocked = 1;
	for (i = 0; i < NGX_MAX_PROCESSES && n < NGX_MAX_PROCESSES; i++)
		if (prev->sh->acks[i].pid)
			pids[n++] = prev->sh->acks[i].pid;
	for (i = 0; i < prev->sh->nforeign && n < NGX_MAX_PROCESSES; i++)
		pids[n++] = prev->sh->foreign[i];
	ngx_shmtx_unlock(&prev->shpool->mutex);
	ngx_shmtx_lock(&ctx->shpool->mutex);
	for (i = 0; i < n && ctx->sh->nforeign < NGX_MAX_PROCESSES; i++)
		ctx->sh->foreign[ctx->sh->nforeign++] = pids[i];
	if (i < n)
		ctx->sh->frozen = 1; /* more than it can watch: lends nothing */
	ctx->sh->blocked = 1;
	ngx_shmtx_unlock(&ctx->shpool->mutex);
}
