/* SPDX-License-Identifier: MIT */
/*
 * `pcpustat serve`: a Prometheus exporter for statistics segments.
 *
 *   GET /metrics          every served segment in one exposition; each series
 *                         gets the labels pcpu_segment="NAME", pcpu_pid="PID",
 *                         plus pcpu_segment_up{...} 1 (read) or 0 (not)
 *   GET /metrics/SEGMENT  one segment (name, pid or file name) as it is
 *   GET /                 a short index
 *
 * Format: OpenMetrics 1.0 when the Accept header prefers
 * application/openmetrics-text (Prometheus does), else Prometheus text
 * 0.0.4 -- both written by the statistics layer's writers, which produce a
 * whole exposition or nothing.
 *
 * Isolation: every scrape opens each segment afresh with the exporter's own
 * credentials and the reader's owner checks, so a segment its user cannot
 * read is never exposed. A segment that fails -- unreadable, corrupted,
 * writer gone, or clashing with another segment's metric names -- is left
 * out whole and reported as pcpu_segment_up 0 (and once on stderr); the
 * others are exposed as usual. Never a partial segment.
 *
 * Why a small server of our own and not an HTTP library: the exporter needs
 * GET of two paths, keep-alive and timeouts, nothing else; the well-kept
 * embeddable servers (libmicrohttpd, civetweb) would be a build dependency
 * larger than this file. It is one thread and one poll() loop: scrapes are
 * served one at a time (a scrape takes microseconds to milliseconds), and
 * slow clients cannot stall it because every socket is non-blocking with a
 * deadline. Requests are limited to 8 KiB of headers, clients to
 * --max-clients; the listening address is 127.0.0.1 unless told otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pcpustat.h"

#define REQ_MAX 8192
/* Seconds a client may take to send a request or take a response
 * (--timeout). */
static double client_timeout = 10.0;

static const char serve_usage[] =
	"Usage: pcpustat serve [OPTIONS] [SEGMENT...]\n"
	"\n"
	"Serves pcpu statistics segments to Prometheus over HTTP:\n"
	"  /metrics          the SEGMENTs given (default: every segment you can read),\n"
	"                    labelled pcpu_segment=\"NAME\" and pcpu_pid=\"PID\", with\n"
	"                    pcpu_segment_up 1 or 0 for each\n"
	"  /metrics/SEGMENT  one segment, unlabelled\n"
	"OpenMetrics or Prometheus text format, as the client's Accept header prefers.\n"
	"A segment that cannot be read is left out (pcpu_segment_up 0), never half shown.\n"
	"\n"
	"Options:\n"
	"  -l, --listen ADDR    HOST:PORT, [IPv6]:PORT or PORT (default 127.0.0.1:9464;\n"
	"                       port 0 picks a free one). The address actually used is\n"
	"                       printed on standard output.\n"
	"  -d, --dir DIR        segment directory (default $PCPU_SEGMENT_DIR, else the\n"
	"                       per-user directories /dev/shm/pcpu-UID)\n"
	"  -u, --owner USER     serve segments owned by USER (default: yourself; root: anyone)\n"
	"  -a, --any-owner      serve segments of any owner you have access to\n"
	"      --max-clients N  connections at once (default 64)\n"
	"      --timeout SECS   close a connection idle or stalled that long (default 10)\n"
	"  -h, --help\n"
	"\n"
	"Prometheus scrape configuration:\n"
	"  scrape_configs:\n"
	"    - job_name: pcpu\n"
	"      static_configs: [{ targets: ['127.0.0.1:9464'] }]\n"
	"\n"
	"SIGINT or SIGTERM stop it.\n";

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- allocation pool for one scrape ------------------------------------------------ */

struct pool {
	void **p;
	size_t n, cap;
};

static void *pool_alloc(struct pool *pl, size_t size)
{
	void *x = calloc(1, size ? size : 1);

	if (!x)
		goto oom;
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? pl->cap * 2 : 64;
		void **a = realloc(pl->p, cap * sizeof *a);
		if (!a)
			goto oom;
		pl->p = a;
		pl->cap = cap;
	}
	pl->p[pl->n++] = x;
	return x;
oom:
	fputs("pcpustat serve: out of memory\n", stderr);
	exit(1);
}

static char *pool_strdup(struct pool *pl, const char *s)
{
	char *d = pool_alloc(pl, strlen(s) + 1);
	strcpy(d, s);
	return d;
}

static void pool_free(struct pool *pl)
{
	size_t i;

	for (i = 0; i < pl->n; i++)
		free(pl->p[i]);
	free(pl->p);
	memset(pl, 0, sizeof *pl);
}

/* ---- the served segments ------------------------------------------------------------ */

struct server {
	struct pcpu_reader_options ropt;
	char **targets; /* from the command line; NULL: every segment */
	int ntargets;
	/* Last error reported per target, so stderr says each thing once. */
	struct {
		char key[128];
		char msg[320];
	} *seen;
	size_t nseen;
};

static void report(struct server *sv, const char *key, const char *msg)
{
	size_t i;

	for (i = 0; i < sv->nseen; i++)
		if (strcmp(sv->seen[i].key, key) == 0)
			break;
	if (i == sv->nseen) {
		void *p = realloc(sv->seen, (sv->nseen + 1) * sizeof *sv->seen);
		if (!p)
			return;
		sv->seen = p;
		snprintf(sv->seen[i].key, sizeof sv->seen[i].key, "%s", key);
		sv->seen[i].msg[0] = '\0';
		sv->nseen++;
	}
	if (strcmp(sv->seen[i].msg, msg ? msg : "") == 0)
		return;
	snprintf(sv->seen[i].msg, sizeof sv->seen[i].msg, "%s", msg ? msg : "");
	if (msg)
		fprintf(stderr, "pcpustat serve: %s: %s\n", key, msg);
	else
		fprintf(stderr, "pcpustat serve: %s: readable again\n", key);
}

/* A segment name, pid or file name; never a path (HTTP clients choose it). */
static int valid_target(const char *t)
{
	size_t i;

	if (!*t || strlen(t) > 100 || t[0] == '.' || t[0] == '-')
		return 0;
	for (i = 0; t[i]; i++)
		if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
		      (t[i] >= '0' && t[i] <= '9') || t[i] == '_' || t[i] == '.' || t[i] == '-'))
			return 0;
	return 1;
}

struct seg {
	char key[128]; /* what we opened it by */
	char name[65]; /* PCPU_SEGMENT_NAME_MAX + 1 */
	char pid[16];
	struct pcpu_reader_snapshot *snap;
	struct pcpu_snapshot labeled;
	int ok;
	char err[320];
};

static const char *const EXTRA_LABELS[] = { "pcpu_segment", "pcpu_pid" };

/* Reads one segment into g (ok or err set). */
static void read_segment(struct server *sv, struct seg *g, struct pool *pl)
{
	pcpu_reader_t *r = pcpu_reader_open(g->key, &sv->ropt);
	size_t f, i;
	char *text;
	size_t len;

	if (!r) {
		snprintf(g->err, sizeof g->err, "%s", pcpu_reader_error());
		return;
	}
	snprintf(g->name, sizeof g->name, "%s", pcpu_reader_name(r));
	snprintf(g->pid, sizeof g->pid, "%d", (int)pcpu_reader_pid(r));
	if (pcpu_reader_snapshot(r, 0, &g->snap) < 0) {
		snprintf(g->err, sizeof g->err, "%s", pcpu_reader_error());
		pcpu_reader_close(r);
		return;
	}
	pcpu_reader_close(r);

	/* The labelled copy. */
	g->labeled.nfamilies = g->snap->snapshot.nfamilies;
	g->labeled.families = pool_alloc(pl, g->labeled.nfamilies * sizeof *g->labeled.families);
	for (f = 0; f < g->labeled.nfamilies; f++) {
		const struct pcpu_snapshot_family *in = &g->snap->snapshot.families[f];
		struct pcpu_snapshot_family *out = (struct pcpu_snapshot_family *)&g->labeled.families[f];
		const char **names = pool_alloc(pl, (in->nlabels + 2) * sizeof *names);
		struct pcpu_snapshot_series *series = pool_alloc(pl, in->nseries * sizeof *series);
		unsigned l;

		*out = *in;
		for (l = 0; l < in->nlabels; l++) {
			if (strcmp(in->label_names[l], EXTRA_LABELS[0]) == 0 ||
			    strcmp(in->label_names[l], EXTRA_LABELS[1]) == 0) {
				snprintf(g->err, sizeof g->err,
					 "metric %.100s uses the label %s, which the exporter adds itself",
					 in->name, in->label_names[l]);
				return;
			}
			names[l] = in->label_names[l];
		}
		names[in->nlabels] = EXTRA_LABELS[0];
		names[in->nlabels + 1] = EXTRA_LABELS[1];
		out->label_names = names;
		out->nlabels = in->nlabels + 2;
		for (i = 0; i < in->nseries; i++) {
			const char **vals = pool_alloc(pl, (in->nlabels + 2) * sizeof *vals);

			for (l = 0; l < in->nlabels; l++)
				vals[l] = in->series[i].label_values[l];
			vals[in->nlabels] = g->name;
			vals[in->nlabels + 1] = g->pid;
			series[i] = in->series[i];
			series[i].label_values = vals;
		}
		out->series = series;
	}
	/* Valid on its own? (names, labels, UTF-8, bucket layouts...) */
	if (pcpu_snapshot_write(&g->labeled, PCPU_FORMAT_PROMETHEUS, &text, &len) < 0) {
		snprintf(g->err, sizeof g->err, "cannot be exposed: %s", pcpu_stats_error());
		return;
	}
	free(text);
	g->ok = 1;
}

/* Sample names a family writes (the OpenMetrics clash set), as the
 * statistics layer's registry reserves them. */
static size_t sample_names(const struct pcpu_snapshot_family *f, char out[][PCPU_STATS_NAME_MAX + 16])
{
	static const char *const counter[] = { "", "_total", "_created" };
	static const char *const gauge[] = { "" };
	static const char *const hist[] = { "", "_bucket", "_count", "_sum", "_created" };
	const char *const *suf = f->type == PCPU_METRIC_COUNTER ? counter : f->type == PCPU_METRIC_GAUGE ? gauge : hist;
	size_t n = f->type == PCPU_METRIC_COUNTER ? 3 : f->type == PCPU_METRIC_GAUGE ? 1 : 5, i;

	for (i = 0; i < n; i++)
		snprintf(out[i], PCPU_STATS_NAME_MAX + 16, "%s%s", f->name, suf[i]);
	return n;
}

static int str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static int same_family(const struct pcpu_snapshot_family *a, const struct pcpu_snapshot_family *b)
{
	unsigned l;

	if (a->type != b->type || a->scale_exp10 != b->scale_exp10 || a->flags != b->flags ||
	    a->nlabels != b->nlabels || !str_eq(a->help, b->help) || !str_eq(a->unit, b->unit) ||
	    a->nbuckets != b->nbuckets)
		return 0;
	for (l = 0; l < a->nlabels; l++)
		if (strcmp(a->label_names[l], b->label_names[l]) != 0)
			return 0;
	return a->type != PCPU_METRIC_HISTOGRAM || a->nbuckets < 2 ||
	       memcmp(a->bucket_upper, b->bucket_upper, (a->nbuckets - 1) * sizeof(int64_t)) == 0;
}

/* The merged exposition under construction. */
struct merged {
	struct pcpu_snapshot_family *fams;
	size_t n, cap;
};

static struct pcpu_snapshot_family *merged_find(struct merged *m, const char *name)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		if (strcmp(m->fams[i].name, name) == 0)
			return &m->fams[i];
	return NULL;
}

/* Whether family f can join m: same name means same metadata; a different
 * name must not write a sample name another family writes. */
static int merge_check(struct merged *m, const struct pcpu_snapshot_family *f, char *err, size_t cap)
{
	char mine[5][PCPU_STATS_NAME_MAX + 16], theirs[5][PCPU_STATS_NAME_MAX + 16];
	struct pcpu_snapshot_family *e = merged_find(m, f->name);
	size_t nm, nt, i, j, k;

	if (e) {
		if (!same_family(e, f)) {
			snprintf(err, cap, "metric %.100s differs from another segment's (type, help, unit, "
				 "labels or buckets)", f->name);
			return -1;
		}
		return 0;
	}
	nm = sample_names(f, mine);
	for (k = 0; k < m->n; k++) {
		nt = sample_names(&m->fams[k], theirs);
		for (i = 0; i < nm; i++)
			for (j = 0; j < nt; j++)
				if (strcmp(mine[i], theirs[j]) == 0) {
					snprintf(err, cap, "metric %.100s clashes with metric %.100s of another "
						 "segment", f->name, m->fams[k].name);
					return -1;
				}
	}
	return 0;
}

static void merge_add(struct merged *m, const struct pcpu_snapshot_family *f, struct pool *pl)
{
	struct pcpu_snapshot_family *e = merged_find(m, f->name);

	if (e) {
		struct pcpu_snapshot_series *s = pool_alloc(pl, (e->nseries + f->nseries) * sizeof *s);

		memcpy(s, e->series, e->nseries * sizeof *s);
		memcpy(s + e->nseries, f->series, f->nseries * sizeof *s);
		e->series = s;
		e->nseries += f->nseries;
		return;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 32;
		struct pcpu_snapshot_family *a = realloc(m->fams, cap * sizeof *a);
		if (!a) {
			fputs("pcpustat serve: out of memory\n", stderr);
			exit(1);
		}
		m->fams = a;
		m->cap = cap;
	}
	m->fams[m->n++] = *f;
}

static int cmp_fam(const void *a, const void *b)
{
	return strcmp(((const struct pcpu_snapshot_family *)a)->name,
		      ((const struct pcpu_snapshot_family *)b)->name);
}

/* Builds the /metrics exposition. 0 with *body, or -1 with a message. */
static int scrape_all(struct server *sv, enum pcpu_format fmt, char **body, size_t *len, char *err,
		      size_t errcap)
{
	struct pool pl = { 0 };
	struct merged m = { 0 };
	struct seg *segs = NULL;
	struct pcpu_snapshot_family up;
	struct pcpu_snapshot_series *ups;
	struct pcpu_snapshot all;
	size_t n = 0, i, f;
	int rc;

	if (sv->ntargets) {
		n = (size_t)sv->ntargets;
		segs = pool_alloc(&pl, n * sizeof *segs);
		for (i = 0; i < n; i++)
			snprintf(segs[i].key, sizeof segs[i].key, "%s", sv->targets[i]);
	} else {
		struct pcpu_segment_info *info;

		if (pcpu_segment_list(&sv->ropt, &info, &n) < 0) {
			snprintf(err, errcap, "listing segments: %s", pcpu_reader_error());
			return -1;
		}
		segs = pool_alloc(&pl, n * sizeof *segs);
		for (i = 0; i < n; i++)
			snprintf(segs[i].key, sizeof segs[i].key, "%s", info[i].file);
		free(info);
	}

	/* pcpu_segment_up first: a segment may not clash with it either. */
	memset(&up, 0, sizeof up);
	up.name = "pcpu_segment_up";
	up.help = "1 if pcpustat could read and expose the segment, 0 if not.";
	up.type = PCPU_METRIC_GAUGE;
	up.nlabels = 2;
	up.label_names = EXTRA_LABELS;
	ups = pool_alloc(&pl, (n ? n : 1) * sizeof *ups);
	up.series = ups;
	merge_add(&m, &up, &pl);

	for (i = 0; i < n; i++) {
		struct seg *g = &segs[i];

		read_segment(sv, g, &pl);
		for (f = 0; g->ok && f < g->labeled.nfamilies; f++)
			if (merge_check(&m, &g->labeled.families[f], g->err, sizeof g->err) < 0)
				g->ok = 0;
		/* Families of one segment never clash among themselves (the
		 * writer refused that), so checking against m suffices. */
		for (f = 0; g->ok && f < g->labeled.nfamilies; f++)
			merge_add(&m, &g->labeled.families[f], &pl);
		report(sv, g->key, g->ok ? NULL : g->err);
		if (!g->name[0]) {
			/* Never opened: name and pid from the key if it is a file name. */
			const char *k = g->key;
			if (strncmp(k, "pcpu.", 5) == 0 && strchr(k + 5, '.')) {
				int pl = (int)(strchr(k + 5, '.') - (k + 5));

				snprintf(g->pid, sizeof g->pid, "%.*s", pl < 15 ? pl : 15, k + 5);
				snprintf(g->name, sizeof g->name, "%.64s", strchr(k + 5, '.') + 1);
			} else {
				snprintf(g->name, sizeof g->name, "%.64s", k);
			}
		}
		{
			const char **vals = pool_alloc(&pl, 2 * sizeof *vals);
			struct pcpu_snapshot_family *u = merged_find(&m, "pcpu_segment_up");

			vals[0] = pool_strdup(&pl, g->name);
			vals[1] = pool_strdup(&pl, g->pid);
			ups[u->nseries].label_values = vals;
			ups[u->nseries].value.gauge = g->ok;
			u->series = ups;
			u->nseries++;
		}
	}
	qsort(m.fams, m.n, sizeof *m.fams, cmp_fam);
	all.nfamilies = m.n;
	all.families = m.fams;
	rc = pcpu_snapshot_write(&all, fmt, body, len);
	if (rc < 0)
		snprintf(err, errcap, "writing the exposition: %s", pcpu_stats_error());
	for (i = 0; i < n; i++)
		pcpu_reader_snapshot_free(segs[i].snap);
	free(m.fams);
	pool_free(&pl);
	return rc;
}

/* /metrics/SEGMENT: returns the HTTP status. */
static int scrape_one(struct server *sv, const char *target, enum pcpu_format fmt, char **body,
		      size_t *len, char *err, size_t errcap)
{
	struct pcpu_reader_snapshot *s;
	pcpu_reader_t *r;
	int i, allowed = sv->ntargets == 0;

	for (i = 0; i < sv->ntargets; i++)
		if (strcmp(sv->targets[i], target) == 0)
			allowed = 1;
	if (!allowed || !valid_target(target)) {
		snprintf(err, errcap, "not a served segment: %.100s", target);
		return 404;
	}
	r = pcpu_reader_open(target, &sv->ropt);
	if (!r) {
		int e = errno;
		snprintf(err, errcap, "%s", pcpu_reader_error());
		return e == ENOENT ? 404 : (e == EACCES || e == EPERM || e == ELOOP) ? 403 : 503;
	}
	if (pcpu_reader_snapshot(r, 0, &s) < 0) {
		snprintf(err, errcap, "%s", pcpu_reader_error());
		pcpu_reader_close(r);
		return 503;
	}
	pcpu_reader_close(r);
	if (pcpu_snapshot_write(&s->snapshot, fmt, body, len) < 0) {
		snprintf(err, errcap, "segment %.100s cannot be exposed: %s", target, pcpu_stats_error());
		pcpu_reader_snapshot_free(s);
		return 503;
	}
	pcpu_reader_snapshot_free(s);
	return 200;
}

/* ---- HTTP ------------------------------------------------------------------------- */

/* Picks the format from an Accept header: OpenMetrics if its q is > 0 and
 * at least that of text/plain (or a wildcard), else Prometheus text. */
static enum pcpu_format negotiate(const char *accept)
{
	double q_om = 0, q_text = 0, q_pb = 0;
	const char *p = accept;

	if (!accept)
		return PCPU_FORMAT_PROMETHEUS;
	while (*p) {
		const char *end = strchr(p, ','), *semi;
		char type[128];
		double q = 1;
		int version_ok = 1;
		size_t tl;

		if (!end)
			end = p + strlen(p);
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		semi = memchr(p, ';', (size_t)(end - p));
		tl = (size_t)((semi ? semi : end) - p);
		while (tl && (p[tl - 1] == ' ' || p[tl - 1] == '\t'))
			tl--;
		if (tl >= sizeof type)
			tl = sizeof type - 1;
		memcpy(type, p, tl);
		type[tl] = '\0';
		/* Parameters: q=, version= */
		while (semi && semi < end) {
			const char *pn = semi + 1, *next = memchr(pn, ';', (size_t)(end - pn));
			const char *pe = next ? next : end;

			while (pn < pe && *pn == ' ')
				pn++;
			if ((size_t)(pe - pn) > 2 && strncasecmp(pn, "q=", 2) == 0)
				q = strtod(pn + 2, NULL);
			else if ((size_t)(pe - pn) > 8 && strncasecmp(pn, "version=", 8) == 0)
				version_ok = strncmp(pn + 8, "1.0.0", 5) == 0 || strncmp(pn + 8, "0.0.1", 5) == 0;
			semi = next;
		}
		if (q < 0 || q != q)
			q = 0;
		if (strcasecmp(type, "application/openmetrics-text") == 0 && version_ok) {
			if (q > q_om)
				q_om = q;
		} else if (strcasecmp(type, "application/vnd.google.protobuf") == 0 &&
			   pcpu_format_supported(PCPU_FORMAT_PROTOBUF)) {
			/* Prometheus asks for it with native histograms enabled.
			 * (Interim: issue 12 moves negotiation into the library.) */
			if (q > q_pb)
				q_pb = q;
		} else if (strcasecmp(type, "text/plain") == 0 || strcasecmp(type, "text/*") == 0 ||
			   strcmp(type, "*/*") == 0) {
			if (q > q_text)
				q_text = q;
		}
		p = *end ? end + 1 : end;
	}
	if (q_pb > 0 && q_pb >= q_om && q_pb >= q_text)
		return PCPU_FORMAT_PROTOBUF;
	return q_om > 0 && q_om >= q_text ? PCPU_FORMAT_OPENMETRICS : PCPU_FORMAT_PROMETHEUS;
}

struct client {
	int fd;
	char in[REQ_MAX];
	size_t inlen;
	char *out;
	size_t outlen, outoff;
	int keep_alive;
	int draining; /* response sent, write side shut: discarding input until EOF */
	double deadline;
};

static void respond(struct client *c, int status, const char *ctype, const char *body, size_t blen,
		    int head_only, const char *extra)
{
	const char *reason = status == 200 ? "OK" : status == 400 ? "Bad Request" :
			     status == 403 ? "Forbidden" : status == 404 ? "Not Found" :
			     status == 405 ? "Method Not Allowed" : status == 431 ? "Request Header Fields Too Large" :
			     status == 503 ? "Service Unavailable" : "Internal Server Error";
	struct sbuf b = { 0 };

	sb_printf(&b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: %s\r\n%s\r\n",
		  status, reason, ctype, blen, c->keep_alive ? "keep-alive" : "close", extra ? extra : "");
	if (!head_only)
		sb_putn(&b, body, blen);
	free(c->out);
	c->out = b.p;
	c->outlen = b.len;
	c->outoff = 0;
}

static void respond_text(struct client *c, int status, const char *msg)
{
	char body[512];

	snprintf(body, sizeof body, "%s\n", msg);
	respond(c, status, "text/plain; charset=utf-8", body, strlen(body), 0, NULL);
}

/* Finds header `name` in the request; copies its value. */
static int header(const char *req, const char *name, char *out, size_t cap)
{
	const char *p = strstr(req, "\r\n");
	size_t nl = strlen(name);

	while (p && p[2] != '\r') {
		const char *line = p + 2, *eol = strstr(line, "\r\n");

		if (!eol)
			break;
		if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			const char *v = line + nl + 1;
			size_t vl;

			while (*v == ' ' || *v == '\t')
				v++;
			vl = (size_t)(eol - v);
			if (vl >= cap)
				vl = cap - 1;
			memcpy(out, v, vl);
			out[vl] = '\0';
			return 1;
		}
		p = eol;
	}
	return 0;
}

/* Handles the complete request in c->in[0 .. hdr_end). */
static void handle(struct server *sv, struct client *c, size_t hdr_end)
{
	char method[16], target[256], version[16], accept[1024], conn[64], err[400];
	char *req = c->in, *body = NULL, *q;
	size_t blen = 0;
	enum pcpu_format fmt;
	int head, status;

	req[hdr_end - 2] = '\0'; /* keep one "\r\n" after the last header */
	if (sscanf(req, "%15s %255s %15s", method, target, version) != 3 ||
	    (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0)) {
		c->keep_alive = 0;
		respond_text(c, 400, "bad request");
		return;
	}
	c->keep_alive = strcmp(version, "HTTP/1.1") == 0;
	if (header(req, "Connection", conn, sizeof conn)) {
		if (strcasecmp(conn, "close") == 0)
			c->keep_alive = 0;
		else if (strcasecmp(conn, "keep-alive") == 0)
			c->keep_alive = 1;
	}
	head = strcmp(method, "HEAD") == 0;
	if (!head && strcmp(method, "GET") != 0) {
		respond(c, 405, "text/plain; charset=utf-8", "GET or HEAD only\n", 17, 0, "Allow: GET, HEAD\r\n");
		return;
	}
	if ((q = strchr(target, '?')) != NULL)
		*q = '\0';
	fmt = negotiate(header(req, "Accept", accept, sizeof accept) ? accept : NULL);
	if (strcmp(target, "/") == 0) {
		static const char index_text[] =
			"pcpustat serve: pcpu statistics for Prometheus\n"
			"  /metrics          all served segments\n"
			"  /metrics/SEGMENT  one segment (name, pid or file name)\n";
		respond(c, 200, "text/plain; charset=utf-8", index_text, sizeof index_text - 1, head, NULL);
		return;
	}
	if (strcmp(target, "/metrics") == 0) {
		if (scrape_all(sv, fmt, &body, &blen, err, sizeof err) < 0) {
			fprintf(stderr, "pcpustat serve: %s\n", err);
			respond_text(c, 500, err);
			return;
		}
		status = 200;
	} else if (strncmp(target, "/metrics/", 9) == 0) {
		status = scrape_one(sv, target + 9, fmt, &body, &blen, err, sizeof err);
		if (status != 200) {
			respond_text(c, status, err);
			return;
		}
	} else {
		respond_text(c, 404, "not found: try /metrics");
		return;
	}
	respond(c, status, pcpu_format_content_type(fmt), body, blen, head, NULL);
	free(body);
}

static void client_close(struct client *c)
{
	close(c->fd);
	free(c->out);
	free(c);
}

/* Handles a complete request waiting in the buffer, if any. */
static void client_handle_buffered(struct server *sv, struct client *c)
{
	char *end = c->out ? NULL : strstr(c->in, "\r\n\r\n");
	size_t used, rest;
	char saved[REQ_MAX];

	if (!end)
		return;
	/* Bodies are not expected (GET/HEAD); pipelined requests that follow
	 * are kept for after this response. */
	used = (size_t)(end - c->in) + 4;
	rest = c->inlen - used;
	memcpy(saved, c->in + used, rest);
	handle(sv, c, used);
	memcpy(c->in, saved, rest);
	c->inlen = rest;
	c->in[rest] = '\0';
	c->deadline = now_s() + client_timeout;
}

/* Reads what is there; 0 keep, -1 close. */
static int client_read(struct server *sv, struct client *c)
{
	for (;;) {
		ssize_t n;

		client_handle_buffered(sv, c);
		if (c->out)
			return 0; /* a response is pending: read the next request later */
		if (c->inlen >= REQ_MAX - 1) {
			c->keep_alive = 0;
			respond_text(c, 431, "request headers too large");
			return 0;
		}
		n = recv(c->fd, c->in + c->inlen, REQ_MAX - 1 - c->inlen, 0);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
		c->inlen += (size_t)n;
		c->in[c->inlen] = '\0';
	}
}

/* Writes what it can; 0 keep, -1 close. */
static int client_write(struct client *c)
{
	while (c->outoff < c->outlen) {
		ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
		c->outoff += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	if (!c->keep_alive) {
		/* Closing with unread input would send a reset, which may
		 * destroy the response before the client read it: shut our
		 * side, then read and drop what comes, for a second at most. */
		shutdown(c->fd, SHUT_WR);
		c->draining = 1;
		c->deadline = now_s() + 1.0;
		return 0;
	}
	c->deadline = now_s() + client_timeout;
	return 0;
}

/* Drops input after the last response; 0 keep, -1 close. */
static int client_drain(struct client *c)
{
	char scratch[4096];

	for (;;) {
		ssize_t n = recv(c->fd, scratch, sizeof scratch, 0);

		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	}
}

static int listen_on(const char *spec, char *shown, size_t cap)
{
	char host[256], port[16];
	struct addrinfo hints, *ai = NULL, *a;
	const char *colon;
	int fd = -1, one = 1, rc;

	if (spec[0] == '[') {
		const char *close_br = strchr(spec, ']');
		if (!close_br || close_br[1] != ':')
			return -1;
		snprintf(host, sizeof host, "%.*s", (int)(close_br - spec - 1), spec + 1);
		snprintf(port, sizeof port, "%s", close_br + 2);
	} else if ((colon = strrchr(spec, ':')) != NULL) {
		snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
		snprintf(port, sizeof port, "%s", colon + 1);
	} else {
		snprintf(host, sizeof host, "127.0.0.1");
		snprintf(port, sizeof port, "%s", spec);
	}
	if (!host[0] || strspn(port, "0123456789") != strlen(port) || !port[0]) {
		fprintf(stderr, "pcpustat serve: bad --listen '%s' (HOST:PORT, [IPv6]:PORT or PORT)\n", spec);
		return -1;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		fprintf(stderr, "pcpustat serve: %s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0)
			break;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fprintf(stderr, "pcpustat serve: cannot listen on %s:%s: %s\n", host, port, strerror(errno));
		freeaddrinfo(ai);
		return -1;
	}
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		char addr[INET6_ADDRSTRLEN];
		int loopback = 0;

		getsockname(fd, (struct sockaddr *)&ss, &sl);
		if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof addr);
			snprintf(shown, cap, "[%s]:%u", addr, ntohs(s6->sin6_port));
			loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof addr);
			snprintf(shown, cap, "%s:%u", addr, ntohs(s4->sin_port));
			loopback = (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
		}
		if (!loopback)
			fprintf(stderr, "pcpustat serve: warning: %s is not a loopback address: whoever "
				"can reach it reads these statistics\n", shown);
	}
	freeaddrinfo(ai);
	return fd;
}

int serve_main(int argc, char **argv, const struct pcpu_reader_options *ropt)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "dir", required_argument, NULL, 'd' },
		{ "owner", required_argument, NULL, 'u' },
		{ "any-owner", no_argument, NULL, 'a' },
		{ "max-clients", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct server sv;
	struct client **clients;
	struct pollfd *pfd;
	struct sigaction sa;
	const char *listen_spec = "127.0.0.1:9464";
	char shown[128];
	size_t nclients = 0, maxc = 64, i;
	int c, lfd;

	memset(&sv, 0, sizeof sv);
	sv.ropt = *ropt;
	optind = 1;
	while ((c = getopt_long(argc, argv, "l:d:u:ah", longopts, NULL)) != -1) {
		unsigned uid;
		char *end;

		switch (c) {
		case 'l':
			listen_spec = optarg;
			break;
		case 'd':
			sv.ropt.dir = optarg;
			break;
		case 'u':
			if (parse_user(optarg, &uid) < 0) {
				fprintf(stderr, "pcpustat serve: no such user '%s'\n", optarg);
				return 2;
			}
			sv.ropt.flags = (sv.ropt.flags & ~(unsigned)PCPU_READER_ANY_OWNER) | PCPU_READER_OWNER;
			sv.ropt.owner = (uid_t)uid;
			break;
		case 'a':
			sv.ropt.flags |= PCPU_READER_ANY_OWNER;
			break;
		case 'm':
			maxc = strtoul(optarg, &end, 10);
			if (*end || maxc < 1 || maxc > 4096) {
				fputs("pcpustat serve: --max-clients wants 1..4096\n", stderr);
				return 2;
			}
			break;
		case 't':
			client_timeout = strtod(optarg, &end);
			if (*end || !(client_timeout >= 0.1 && client_timeout <= 3600)) {
				fputs("pcpustat serve: --timeout wants seconds in [0.1, 3600]\n", stderr);
				return 2;
			}
			break;
		case 'h':
			fputs(serve_usage, stdout);
			return 0;
		default:
			fputs("Try 'pcpustat serve --help'.\n", stderr);
			return 2;
		}
	}
	for (i = (size_t)optind; i < (size_t)argc; i++)
		if (!valid_target(argv[i])) {
			fprintf(stderr, "pcpustat serve: '%s' is not a segment name, pid or file name\n", argv[i]);
			return 2;
		}
	sv.targets = argv + optind;
	sv.ntargets = argc - optind;

	lfd = listen_on(listen_spec, shown, sizeof shown);
	if (lfd < 0)
		return 1;
	printf("pcpustat serve: listening on http://%s/metrics\n", shown);
	fflush(stdout);

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	clients = calloc(maxc, sizeof *clients);
	pfd = calloc(maxc + 1, sizeof *pfd);
	if (!clients || !pfd) {
		fputs("pcpustat serve: out of memory\n", stderr);
		return 1;
	}
	while (!stop) {
		double t = now_s(), next = t + 1;
		int timeout, n;

		pfd[0].fd = lfd;
		pfd[0].events = nclients < maxc ? POLLIN : 0;
		for (i = 0; i < nclients; i++) {
			pfd[i + 1].fd = clients[i]->fd;
			pfd[i + 1].events = clients[i]->out && !clients[i]->draining ? POLLOUT : POLLIN;
			pfd[i + 1].revents = 0;
			if (clients[i]->deadline < next)
				next = clients[i]->deadline;
		}
		timeout = next > t ? (int)((next - t) * 1000) + 1 : 0;
		n = poll(pfd, nclients + 1, timeout);
		if (n < 0 && errno != EINTR)
			break;
		t = now_s();
		/* Clients first (indices stay valid while we compact). */
		for (i = nclients; i-- > 0;) {
			struct client *cl = clients[i];
			short re = pfd[i + 1].revents;
			int drop = 0;

			if (n > 0 && re & (POLLERR | POLLNVAL))
				drop = 1;
			else if (cl->draining)
				drop = (n > 0 && re & (POLLIN | POLLHUP)) ? client_drain(cl) < 0 : 0;
			else if (n > 0 && re & POLLIN)
				drop = client_read(&sv, cl) < 0;
			else if (n > 0 && re & POLLHUP && !cl->out)
				drop = 1;
			if (!drop && cl->out)
				drop = client_write(cl) < 0;
			if (!drop && !cl->out && !cl->draining && cl->inlen) {
				/* A pipelined request already read: serve it now. */
				client_handle_buffered(&sv, cl);
				if (cl->out)
					drop = client_write(cl) < 0;
			}
			if (!drop && t > cl->deadline)
				drop = 1; /* too slow: a request or response took too long */
			if (drop) {
				client_close(cl);
				clients[i] = clients[--nclients];
			}
		}
		if (n > 0 && pfd[0].revents & POLLIN) {
			while (nclients < maxc) {
				int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				struct client *cl;

				if (fd < 0)
					break;
				cl = calloc(1, sizeof *cl);
				if (!cl) {
					close(fd);
					break;
				}
				cl->fd = fd;
				cl->deadline = t + client_timeout;
				clients[nclients++] = cl;
			}
		}
	}
	for (i = 0; i < nclients; i++)
		client_close(clients[i]);
	free(clients);
	free(pfd);
	free(sv.seen);
	close(lfd);
	return 0;
}
