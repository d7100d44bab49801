/* SPDX-License-Identifier: MIT */
/*
 * `pcpu_stats_display;`: the tree's statistics from nginx itself, in the
 * format the client asks for.
 *
 *   ?format=prometheus|openmetrics|json|html   asked by name, else by Accept:
 *   application/json -> JSON; text/html -> the status page (browsers);
 *   anything else as Prometheus clients negotiate (pcpu_format_negotiate():
 *   OpenMetrics, text 0.0.4, or protobuf where libpcpu has it).
 *   gzip when Accept-Encoding allows it (pcpu_format_gzip_acceptable()).
 *
 * What is shown is the tree's, read from its segment as pcpustat reads it
 * (pcpu_reader_snapshot(): every worker's series, the master's, those of
 * workers gone), not this worker's own view (a process of a shared
 * registry sees only the series it registered). The descriptor is the
 * master's, opened before the workers forked: workers that run as another
 * user (the `user` directive) read a file they could not open.
 *
 * Off the event loop (issue 63): reading the segment, writing the text and
 * compressing it take about 1 ms per 1,000 filter keys, which a worker
 * spent inline while its other connections waited (20 ms at 20,000 keys).
 * Where nginx has threads, that work runs in one of nginx's thread pools
 * (`pcpu_stats_display thread_pool=NAME;`, nginx's `default` pool unless
 * named; `thread_pool=off` keeps it inline) and the event loop only sends
 * the result. The worker's reader is shared by the pool's threads under a
 * mutex; what a scrape makes is malloc()ed there and freed with the
 * request's pool, which nginx cannot free before the request is finalized
 * (the handler holds a reference, r->main->count, until the task is done).
 */
#include <pthread.h>
#include <zlib.h>

#include "ngx_http_pcpu_module.h"
#include "ngx_http_pcpu_html.h" /* ngx_http_pcpu_html[]: status.html, made by `config` */

enum { FORMAT_HTML = 100 };

static ngx_int_t ngx_http_pcpu_display_handler(ngx_http_request_t *r);

/* pcpu_stats_display [thread_pool=NAME|off]; */
char *ngx_http_pcpu_display_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
	ngx_http_pcpu_main_conf_t *pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_pcpu_module);
	ngx_http_pcpu_loc_conf_t *plcf = conf;
	ngx_str_t *args = cf->args->elts, name = ngx_null_string;
	static const ngx_str_t opt = ngx_string("thread_pool=");

	(void)cmd;
	if (cf->args->nelts > 1) {
		if (args[1].len <= opt.len || ngx_strncmp(args[1].data, opt.data, opt.len) != 0) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
					   "invalid parameter \"%V\": pcpu_stats_display takes "
					   "thread_pool=NAME or thread_pool=off",
					   &args[1]);
			return NGX_CONF_ERROR;
		}
		name.data = args[1].data + opt.len;
		name.len = args[1].len - opt.len;
	}
	plcf->display_pool = NULL;
	if (!(name.len == 3 && ngx_strncmp(name.data, "off", 3) == 0)) {
#if (NGX_THREADS)
		/* NULL: nginx's `default` pool (32 threads, made for the
		 * workers at start only when something names it); a name
		 * must be a `thread_pool` of the main context. */
		plcf->display_pool = ngx_thread_pool_add(cf, name.len ? &name : NULL);
		if (plcf->display_pool == NULL)
			return NGX_CONF_ERROR;
#else
		if (name.len) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
					   "\"%V\": this nginx is built without threads "
					   "(--with-threads)",
					   &args[1]);
			return NGX_CONF_ERROR;
		}
#endif
	}
	clcf->handler = ngx_http_pcpu_display_handler;
	pmcf->used = 1;
	return NGX_CONF_OK;
}

/* The first request header named `name` (NUL-terminated, as nginx keeps
 * them), or NULL. */
static const char *header(ngx_http_request_t *r, const char *name)
{
	ngx_list_part_t *part = &r->headers_in.headers.part;
	ngx_table_elt_t *h = part->elts;
	size_t len = ngx_strlen(name);
	ngx_uint_t i;

	for (i = 0;; i++) {
		if (i >= part->nelts) {
			if (part->next == NULL)
				return NULL;
			part = part->next;
			h = part->elts;
			i = 0;
		}
		if (h[i].key.len == len && ngx_strncasecmp(h[i].key.data, (u_char *)name, len) == 0)
			return (const char *)h[i].value.data;
	}
}

static int format_of(ngx_http_request_t *r)
{
	static const struct {
		ngx_str_t name;
		int format;
	} names[] = {
		{ngx_string("prometheus"), PCPU_FORMAT_PROMETHEUS},
		{ngx_string("openmetrics"), PCPU_FORMAT_OPENMETRICS},
		{ngx_string("json"), PCPU_FORMAT_JSON},
		{ngx_string("protobuf"), PCPU_FORMAT_PROTOBUF},
		{ngx_string("html"), FORMAT_HTML},
	};
	const char *accept = header(r, "Accept");
	ngx_str_t v;
	ngx_uint_t i;

	if (ngx_http_arg(r, (u_char *)"format", 6, &v) == NGX_OK) {
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (v.len == names[i].name.len &&
			    ngx_strncasecmp(v.data, names[i].name.data, v.len) == 0)
				return names[i].format;
		return -1;
	}
	if (accept && ngx_strcasestrn((u_char *)accept, "application/json", 16 - 1))
		return PCPU_FORMAT_JSON;
	if (accept && ngx_strcasestrn((u_char *)accept, "text/html", 9 - 1))
		return FORMAT_HTML;
	return pcpu_format_negotiate(accept);
}

/* gzip of [in, in + len) into malloc()ed memory (any thread); NGX_ERROR
 * if zlib or malloc fails. */
static ngx_int_t gzip_body(const u_char *in, size_t len, ngx_str_t *out)
{
	z_stream z;
	uLong cap;

	ngx_memzero(&z, sizeof(z));
	if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NGX_ERROR;
	cap = deflateBound(&z, (uLong)len);
	out->data = malloc(cap);
	if (out->data == NULL) {
		deflateEnd(&z);
		return NGX_ERROR;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out->data;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&z);
		free(out->data);
		out->data = NULL;
		return NGX_ERROR;
	}
	out->len = z.total_out;
	deflateEnd(&z);
	return NGX_OK;
}

static ngx_int_t add_header(ngx_http_request_t *r, const char *key, const char *value,
			    ngx_table_elt_t **set)
{
	ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);

	if (h == NULL)
		return NGX_ERROR;
	h->hash = 1;
	h->key.data = (u_char *)key;
	h->key.len = ngx_strlen(key);
	h->value.data = (u_char *)value;
	h->value.len = ngx_strlen(value);
#if (nginx_version >= 1023000)
	h->next = NULL;
#endif
	if (set)
		*set = h;
	return NGX_OK;
}

/* One scrape: what the event loop asks for, and what the work (in the
 * event loop or a pool's thread) makes. */
struct scrape {
	ngx_http_request_t *r;
	int fmt;
	int gzip;              /* the client takes gzip */
	ngx_str_t body;        /* the exposition, malloc()ed (its gzip if gz) */
	int gz;                /* body is gzip */
	const char *failed;    /* NULL, or what failed: "reading", "writing" */
	char why[256];         /* ... and the library's message */
};

/* The request pool's cleanup: the scrape's body. */
static void scrape_free(void *data)
{
	struct scrape *sc = data;

	free(sc->body.data);
	sc->body.data = NULL;
}

/* ---- expiry (pcpu_stats_expire) ---------------------------------------------------- */

/* The label values from requests that expire: a filter's keys and the
 * upstream peers, each with a last-seen gauge the workers set as they meet
 * it (filter.c, upstream.c). A source's families are those labelled as
 * its last-seen family is, except the state of upstream zones' peers
 * (nginx_http_upstream_peer_*), which comes from the configuration. */
static const struct {
	const char *seen, *l0, *l1, *except;
} sources[] = {
	{"nginx_http_filter_last_seen_timestamp_seconds", "filter", "key", NULL},
	{"nginx_http_upstream_last_seen_timestamp_seconds", "upstream", "peer", "nginx_http_upstream_peer_"},
};
#define NSOURCES (sizeof(sources) / sizeof(sources[0]))

/* A label value pair not seen for pcpu_stats_expire. */
typedef struct {
	const char *v0, *v1;
} gone_t;

static int gone_cmp(const void *a, const void *b)
{
	const gone_t *x = a, *y = b;
	int c = strcmp(x->v0, y->v0);

	return c ? c : strcmp(x->v1, y->v1);
}

/* What expire_hide() allocates, freed with expire_free(). */
struct hidden {
	struct pcpu_snapshot_family *families;
	void *series, *gone;           /* the kept series; the pairs gone */
	void *expired, *exseries;      /* the new family's labels and series */
};

static void expire_free(struct hidden *h)
{
	free(h->families);
	free(h->series);
	free(h->gone);
	free(h->expired);
	free(h->exseries);
}

/* The source whose series family f has, or -1. */
static int source_of(const struct pcpu_snapshot_family *f)
{
	size_t i;

	for (i = 0; i < NSOURCES; i++)
		if (f->nlabels >= 2 && strcmp(f->label_names[0], sources[i].l0) == 0 &&
		    strcmp(f->label_names[1], sources[i].l1) == 0 &&
		    (sources[i].except == NULL ||
		     strncmp(f->name, sources[i].except, strlen(sources[i].except)) != 0))
			return (int)i;
	return -1;
}

static const char *const expired_labels[] = {"source"};

/* The label of a series of nginx_pcpu_keys_expired: one per source label
 * value ("filter:NAME", "peers"). */
struct expired {
	const char *label;
	char value[sizeof("filter:") + NGX_HTTP_PCPU_LABEL_MAX];
};

/* The snapshot the display writes, with pcpu_stats_expire on: `in` less
 * the series of the filter keys and upstream peers not seen for that long
 * (every family of theirs: counts, bytes, times, last seen), plus
 * nginx_pcpu_keys_expired{source}: how many of each source this display
 * left out. The series stay in the segment (pcpu removes nothing from a
 * shared registry) and count on; a key met again shows again with its
 * whole count. 0 (*out the snapshot to write; `h` what to free), or -1:
 * no memory. */
static int expire_hide(const struct pcpu_snapshot *in, time_t expire, struct pcpu_snapshot *out,
		       struct hidden *h)
{
	const struct pcpu_snapshot_family *seen[NSOURCES] = {NULL};
	struct pcpu_snapshot_series *kept, *exs;
	struct pcpu_snapshot_family *fam;
	size_t f, j, k, n = 0, nseries = 0, nexp = 0, nseen = 0, at;
	size_t ngone[NSOURCES] = {0}, first[NSOURCES];
	struct expired *ex;
	gone_t *gone, g;
	time_t now = time(NULL);
	int s, placed = 0;

	*out = *in;
	ngx_memzero(h, sizeof(*h));
	for (f = 0; f < in->nfamilies; f++) {
		nseries += in->families[f].nseries;
		s = source_of(&in->families[f]);
		if (s >= 0 && strcmp(in->families[f].name, sources[s].seen) == 0) {
			seen[s] = &in->families[f];
			nseen += in->families[f].nseries;
		}
	}
	h->gone = gone = malloc((nseen + 1) * sizeof(*gone));
	h->expired = ex = malloc((nseen + 1) * sizeof(*ex));
	h->exseries = exs = malloc((nseen + 1) * sizeof(*exs));
	h->families = malloc((in->nfamilies + 1) * sizeof(*h->families));
	h->series = kept = malloc((nseries + 1) * sizeof(*kept));
	if (gone == NULL || ex == NULL || exs == NULL || h->families == NULL || kept == NULL) {
		expire_free(h);
		return -1;
	}
	/* Each source's pairs gone, sorted, then its expired counts: per
	 * filter, or one for the peers. */
	for (s = 0, at = 0; s < (int)NSOURCES; s++) {
		first[s] = at;
		for (j = 0; seen[s] && j < seen[s]->nseries; j++) {
			int64_t t = seen[s]->series[j].value.gauge;

			if (t > 0 && t + (int64_t)expire < (int64_t)now) {
				gone[at].v0 = seen[s]->series[j].label_values[0];
				gone[at++].v1 = seen[s]->series[j].label_values[1];
			}
		}
		ngone[s] = at - first[s];
		qsort(gone + first[s], ngone[s], sizeof(*gone), gone_cmp);
		for (j = 0; seen[s] && j < seen[s]->nseries; j++) {
			const char *v0 = seen[s]->series[j].label_values[0];

			if (s == 0)
				snprintf(ex[nexp].value, sizeof(ex[nexp].value), "filter:%s", v0);
			else
				snprintf(ex[nexp].value, sizeof(ex[nexp].value), "peers");
			for (k = 0; k < nexp; k++)
				if (strcmp(ex[k].value, ex[nexp].value) == 0)
					break;
			if (k == nexp) {
				ngx_memzero(&exs[k], sizeof(exs[k]));
				ex[k].label = ex[k].value;
				exs[k].label_values = &ex[k].label;
				nexp++;
			}
			g.v0 = v0;
			g.v1 = seen[s]->series[j].label_values[1];
			if (bsearch(&g, gone + first[s], ngone[s], sizeof(*gone), gone_cmp))
				exs[k].value.gauge++;
		}
	}
	for (f = 0, at = 0; f < in->nfamilies; f++) {
		fam = &h->families[at++];
		*fam = in->families[f];
		s = source_of(fam);
		if (s >= 0 && ngone[s]) {
			fam->series = kept + n;
			fam->nseries = 0;
			fam->flags &= ~(unsigned)PCPU_SNAPSHOT_CHECKED; /* its series changed */
			for (j = 0; j < in->families[f].nseries; j++) {
				g.v0 = in->families[f].series[j].label_values[0];
				g.v1 = in->families[f].series[j].label_values[1];
				if (bsearch(&g, gone + first[s], ngone[s], sizeof(*gone), gone_cmp) == NULL) {
					kept[n++] = in->families[f].series[j];
					fam->nseries++;
				}
			}
		}
		/* nginx_pcpu_keys_expired beside nginx_pcpu_keys (else last). */
		if (!placed && (strcmp(in->families[f].name, "nginx_pcpu_keys") == 0 || f + 1 == in->nfamilies)) {
			fam = &h->families[at++];
			ngx_memzero(fam, sizeof(*fam));
			fam->name = "nginx_pcpu_keys_expired";
			fam->help = "Label values not seen for pcpu_stats_expire, left out of this "
				    "display, by source (filter:NAME, peers); computed by the display, "
				    "not in the segment";
			fam->type = PCPU_METRIC_GAUGE;
			fam->nlabels = 1;
			fam->label_names = expired_labels;
			fam->nseries = nexp;
			fam->series = exs;
			placed = 1;
		}
	}
	out->families = h->families;
	out->nfamilies = at;
	return 0;
}

/* This worker's reader, kept open: the event loop or the pool's threads
 * use it, one at a time. */
static pcpu_reader_t *reader;
static pthread_mutex_t reader_lock = PTHREAD_MUTEX_INITIALIZER;

/* The tree's exposition in sc->fmt, gzipped if the client takes it and it
 * is worth it, into sc->body; or sc->failed and sc->why. Runs anywhere:
 * it touches nothing of nginx's but the tree's descriptor and owner, set
 * before the workers started. */
static void scrape_make(struct scrape *sc)
{
	struct pcpu_reader_options o;
	struct pcpu_reader_snapshot *s = NULL;
	char *text;
	size_t len;
	ngx_str_t gz;
	int rc;

	if (sc->fmt == FORMAT_HTML) { /* the status page: a constant */
		text = malloc(sizeof(ngx_http_pcpu_html));
		if (text == NULL) {
			sc->failed = "writing";
			ngx_cpystrn((u_char *)sc->why, (u_char *)"out of memory", sizeof(sc->why));
			return;
		}
		len = sizeof(ngx_http_pcpu_html);
		ngx_memcpy(text, ngx_http_pcpu_html, len);
		goto made;
	}
	pthread_mutex_lock(&reader_lock);
	if (reader == NULL) {
		ngx_memzero(&o, sizeof(o));
		o.flags = PCPU_READER_OWNER | PCPU_READER_ALLOW_STALE;
		o.owner = ngx_http_pcpu_tree.owner;
		reader = pcpu_reader_open_fd(ngx_http_pcpu_tree.read_fd, &o);
	}
	/* nginx_pcpu_segment_bytes as of this scrape (fstat and a gauge's
	 * set: thread-safe). */
	ngx_http_pcpu_segment_bytes();
	rc = reader ? pcpu_reader_snapshot(reader, 0, &s) : -1;
	if (rc != 0) {
		sc->failed = "reading";
		ngx_cpystrn((u_char *)sc->why, (u_char *)pcpu_reader_error(), sizeof(sc->why));
	}
	pthread_mutex_unlock(&reader_lock);
	if (rc != 0)
		return;
	if (ngx_http_pcpu_tree.expire) {
		struct pcpu_snapshot shown;
		struct hidden h;

		rc = expire_hide(&s->snapshot, ngx_http_pcpu_tree.expire, &shown, &h);
		if (rc == 0) {
			rc = pcpu_snapshot_write(&shown, (enum pcpu_format)sc->fmt, &text, &len);
			expire_free(&h);
		}
	} else {
		rc = pcpu_snapshot_write(&s->snapshot, (enum pcpu_format)sc->fmt, &text, &len);
	}
	pcpu_reader_snapshot_free(s);
	if (rc != 0) {
		sc->failed = "writing";
		ngx_cpystrn((u_char *)sc->why, (u_char *)pcpu_stats_error(), sizeof(sc->why));
		return;
	}
made:
	sc->body.data = (u_char *)text;
	sc->body.len = len;
	if (sc->gzip && len > 512 && gzip_body((u_char *)text, len, &gz) == NGX_OK) {
		free(text);
		sc->body = gz;
		sc->gz = 1;
	}
}

/* Sends what scrape_make() made (the event loop): the status, headers and
 * body, or a 500 with the failure logged. */
static ngx_int_t scrape_send(struct scrape *sc)
{
	ngx_http_request_t *r = sc->r;
	ngx_buf_t *b;
	ngx_chain_t out;
	ngx_int_t rc;

	if (sc->failed) {
		ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "pcpu: %s the statistics: %s",
			      sc->failed, sc->why);
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	}
	if (sc->fmt == FORMAT_HTML) {
		ngx_str_set(&r->headers_out.content_type, "text/html; charset=utf-8");
	} else {
		r->headers_out.content_type.data = (u_char *)pcpu_format_content_type((enum pcpu_format)sc->fmt);
		r->headers_out.content_type.len = ngx_strlen(r->headers_out.content_type.data);
	}
	r->headers_out.content_type_len = r->headers_out.content_type.len;
	if (add_header(r, "Vary", "Accept, Accept-Encoding", NULL) != NGX_OK ||
	    add_header(r, "Cache-Control", "no-store", NULL) != NGX_OK ||
	    (sc->gz && add_header(r, "Content-Encoding", "gzip", &r->headers_out.content_encoding) != NGX_OK))
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	r->headers_out.status = NGX_HTTP_OK;
	r->headers_out.content_length_n = (off_t)sc->body.len;
	rc = ngx_http_send_header(r);
	if (rc == NGX_ERROR || rc > NGX_OK || r->header_only)
		return rc;
	b = ngx_calloc_buf(r->pool);
	if (b == NULL)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	b->pos = sc->body.data;
	b->last = sc->body.data + sc->body.len;
	b->memory = 1;
	b->last_buf = (r == r->main) ? 1 : 0;
	b->last_in_chain = 1;
	out.buf = b;
	out.next = NULL;
	return ngx_http_output_filter(r, &out);
}

#if (NGX_THREADS)
/* The pool's thread. */
static void scrape_thread(void *data, ngx_log_t *log)
{
	(void)log;
	scrape_make(data);
}

/* Back in the event loop: send, and give back the reference the handler
 * took. */
static void scrape_done(ngx_event_t *ev)
{
	struct scrape *sc = ev->data;
	ngx_http_request_t *r = sc->r;
	ngx_connection_t *c = r->connection;

	ngx_http_finalize_request(r, scrape_send(sc));
	ngx_http_run_posted_requests(c);
}

/* Posts the scrape `task` (its ctx filled in) to `pool`. NGX_DONE: the
 * request waits for scrape_done(); NGX_DECLINED: the pool's queue is full
 * (nginx logged it), so the caller does it here. */
static ngx_int_t scrape_post(ngx_http_request_t *r, ngx_thread_pool_t *pool, ngx_thread_task_t *task)
{
	task->handler = scrape_thread;
	task->event.handler = scrape_done;
	task->event.data = task->ctx;
	if (ngx_thread_task_post(pool, task) != NGX_OK)
		return NGX_DECLINED;
	r->main->count++;
	return NGX_DONE;
}
#endif

static ngx_int_t ngx_http_pcpu_display_handler(ngx_http_request_t *r)
{
	ngx_http_pcpu_loc_conf_t *plcf = ngx_http_get_module_loc_conf(r, ngx_http_pcpu_module);
	struct scrape *sc = NULL;
	ngx_pool_cleanup_t *cln;
	ngx_int_t rc;
	int fmt;
#if (NGX_THREADS)
	ngx_thread_task_t *task = NULL;
#endif

	if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD)))
		return NGX_HTTP_NOT_ALLOWED;
	rc = ngx_http_discard_request_body(r);
	if (rc != NGX_OK)
		return rc;
	fmt = format_of(r);
	if (fmt < 0 || (fmt != FORMAT_HTML && !pcpu_format_supported((enum pcpu_format)fmt)))
		return 406; /* Not Acceptable: a format it does not know or has not */
	if (ngx_http_pcpu_tree.read_fd == NGX_INVALID_FILE)
		return NGX_HTTP_SERVICE_UNAVAILABLE;
	/* stub_status's connections, as of now (connections.c). */
	ngx_http_pcpu_connections_sample();
	/* The cleanup first: whoever makes the body, the pool frees it. */
	cln = ngx_pool_cleanup_add(r->pool, 0);
	if (cln == NULL)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
#if (NGX_THREADS)
	/* The status page is a constant: only expositions go to the pool. */
	if (plcf->display_pool && fmt != FORMAT_HTML &&
	    (task = ngx_thread_task_alloc(r->pool, sizeof(*sc))) != NULL)
		sc = task->ctx; /* zeroed */
#else
	(void)plcf;
#endif
	if (sc == NULL && (sc = ngx_pcalloc(r->pool, sizeof(*sc))) == NULL)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	sc->r = r;
	sc->fmt = fmt;
	sc->gzip = pcpu_format_gzip_acceptable(header(r, "Accept-Encoding"));
	cln->handler = scrape_free;
	cln->data = sc;
#if (NGX_THREADS)
	if (task && scrape_post(r, plcf->display_pool, task) == NGX_DONE)
		return NGX_DONE; /* scrape_done() sends it */
#endif
	scrape_make(sc);
	return scrape_send(sc);
}
