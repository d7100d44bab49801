/* SPDX-License-Identifier: MIT */
/*
 * pcpu_stat_statements' bounded export: what pcpustat, `pcpustat serve`
 * and its pushes read by default is the top pcpu_stat_statements.export_top
 * statements by total time (execution plus planning), not every entry --
 * 5,000 entries are some 190,000 series a scrape.
 *
 * A reader reads a segment whole, and the tree is one segment holding
 * every entry (and, since a shared tree frees no series, every entry ever
 * evicted too). So the tree is published in a folder of its own, beside
 * pcpustat's default one (<the default>/postgresql-all: `pcpustat -d` it
 * to read everything), and the evictor worker, every export_interval
 * seconds, reads the tree as any reader does and copies the top entries
 * into a registry of its own -- private, so that it may remove the series
 * of a statement that leaves the top -- published as
 * "postgresql.<port>" in the default folder, the name the tree had there.
 * The copy has the tree's families, names and labels (the statements'
 * counters, extremes, sums of squares, execution times' histograms and
 * texts), so that a dashboard made
 * for the tree reads it unchanged; its values are the tree's at the last
 * copy (a counter goes on from its last value; it restarts from zero when
 * its entry was evicted or reset, which a reader takes as a counter
 * reset). export_top = 0 exports everything: the tree is then published in
 * the default folder itself, as before, and there is no copy.
 */
#include "pcpu_stat_statements.h"

#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

int pss_export_top = 100;
int pss_export_interval = 10;

/* The worker's export registry. */
static pcpu_registry_t *ereg;
static pcpu_segment_t *eseg;
static pcpu_family_t *ecounters[NCOUNTERS], *egauges[NGAUGES], *efractions[NFRACTIONS];
static pcpu_family_t *ehist, *eentries_f, *edealloc_f;
static pcpu_gauge_t eentries;
static pcpu_counter_t edealloc;
static uint64 dealloc_last;

/* A statement exported: its series in the export registry, and what they
 * were last set to. */
typedef struct {
	pss_key key;
	bool top; /* in the top at this pass */
	pcpu_counter_t c[NCOUNTERS];
	uint64 last[NCOUNTERS];
	pcpu_gauge_t g[NGAUGES];
	pcpu_counter_t f[NFRACTIONS];
	pcpu_histogram_t *h;
	uint64 hlast[PSS_HIST_BUCKETS_MAX]; /* its buckets and sum as last set */
	int64 hsum_last;
	char *text; /* its text series' labels, TopMemoryContext */
	char epoch[24];
} exported;

static HTAB *exports;

static void export_leave(int code, Datum arg)
{
	(void)code;
	(void)arg;
	if (eseg != NULL)
		pcpu_segment_unpublish(eseg);
	eseg = NULL;
}

/* Said once per worker. */
static void export_failed(const char *what)
{
	static bool said;

	if (!said) {
		said = true;
		ereport(LOG, (errmsg(PSS_NAME ": the export: %s: %s", what, pcpu_stats_error())));
	}
}

bool pss_export_start(void)
{
	struct pcpu_segment_options o;
	char name[PCPU_SEGMENT_NAME_MAX + 1];
	HASHCTL ctl;
	int i;

	if (pss_export_top <= 0)
		return false;
	ereg = pcpu_registry_create();
	if (ereg == NULL) {
		export_failed("pcpu_registry_create()");
		return false;
	}
	for (i = 0; i < NCOUNTERS; i++)
		if ((ecounters[i] = pss_family(ereg, &pss_counters[i], PCPU_METRIC_COUNTER, false)) ==
		    NULL)
			goto fail;
	for (i = 0; i < NGAUGES; i++)
		if ((egauges[i] = pss_family(ereg, &pss_gauges[i], PCPU_METRIC_GAUGE, false)) == NULL)
			goto fail;
	for (i = 0; i < NFRACTIONS; i++)
		if ((efractions[i] = pss_family(ereg, &pss_fractions[i], PCPU_METRIC_COUNTER, true)) ==
		    NULL)
			goto fail;
	if ((ehist = pss_family(ereg, &pss_exec_hist, PCPU_METRIC_HISTOGRAM, false)) == NULL)
		goto fail;
	/* The table's size and the eviction passes, beside the statements. */
	if ((eentries_f = pcpu_registry_family(ereg, &pss_entries_desc)) == NULL ||
	    (edealloc_f = pcpu_registry_family(ereg, &pss_dealloc_desc)) == NULL)
		goto fail;
	memset(&o, 0, sizeof(o));
	if (pss_tree.group_read) {
		o.flags = PCPU_SEGMENT_GROUP_READ;
		o.group = pss_tree.gid;
	}
	snprintf(name, sizeof(name), "postgresql.%d", PostPortNumber);
	eseg = pcpu_segment_publish(ereg, name, &o);
	if (eseg == NULL) {
		ereport(LOG, (errmsg(PSS_NAME ": the export: publishing \"%s\": %s", name,
				     pcpu_segment_error())));
		goto fail;
	}
	if ((eentries = pcpu_family_gauge(eentries_f, NULL)) == NULL ||
	    (edealloc = pcpu_family_counter(edealloc_f, NULL)) == NULL) {
		export_failed("the table's series");
		pcpu_segment_unpublish(eseg);
		eseg = NULL;
		goto fail;
	}
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(pss_key);
	ctl.entrysize = sizeof(exported);
	ctl.hcxt = TopMemoryContext;
	exports = hash_create(PSS_NAME " exports", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	on_proc_exit(export_leave, (Datum)0);
	ereport(LOG, (errmsg(PSS_NAME ": the top %d statements exported in \"%s\"", pss_export_top,
			     pcpu_segment_path(eseg))));
	return true;
fail:
	export_failed("a family");
	pcpu_registry_destroy(ereg);
	ereg = NULL;
	return false;
}

/* The text series of x (x->text, x->epoch), removed. */
static void text_remove(exported *x)
{
	char buf[4][24];
	const char *v[6];
	pcpu_family_t *f = pcpu_registry_find(ereg, QUERY_INFO);

	if (x->text == NULL)
		return;
	pss_key_values(&x->key, buf, v);
	v[4] = x->epoch;
	v[5] = x->text;
	if (f != NULL)
		(void)pcpu_family_remove(f, v);
	pfree(x->text);
	x->text = NULL;
}

/* Every series of x removed (it left the top, or could not be made whole). */
static void unexport(exported *x)
{
	char buf[4][24];
	const char *v[6];
	int i;

	pss_key_values(&x->key, buf, v);
	for (i = 0; i < NCOUNTERS; i++)
		if (x->c[i] != NULL)
			(void)pcpu_family_remove(ecounters[i], v);
	for (i = 0; i < NGAUGES; i++)
		if (x->g[i] != NULL)
			(void)pcpu_family_remove(egauges[i], v);
	for (i = 0; i < NFRACTIONS; i++)
		if (x->f[i] != NULL)
			(void)pcpu_family_remove(efractions[i], v);
	if (x->h != NULL)
		(void)pcpu_family_remove(ehist, v);
	text_remove(x);
	hash_search(exports, &x->key, HASH_REMOVE, NULL);
}

static bool export_make(exported *x)
{
	char buf[4][24];
	const char *v[6];
	int i;

	memset((char *)x + sizeof(pss_key), 0, sizeof(*x) - sizeof(pss_key));
	pss_key_values(&x->key, buf, v);
	for (i = 0; i < NCOUNTERS; i++)
		if ((x->c[i] = pcpu_family_counter(ecounters[i], v)) == NULL)
			return false;
	for (i = 0; i < NGAUGES; i++)
		if ((x->g[i] = pcpu_family_gauge(egauges[i], v)) == NULL)
			return false;
	for (i = 0; i < NFRACTIONS; i++)
		if ((x->f[i] = pcpu_family_counter(efractions[i], v)) == NULL)
			return false;
	if ((x->h = pcpu_family_histogram(ehist, v)) == NULL)
		return false;
	return true;
}

/* The row's values into x's series. */
static void export_values(exported *x, const pss_row *r)
{
	int i;

	for (i = 0; i < NCOUNTERS; i++) {
		/* Counters go on from their last value; one that went down
		 * (its entry evicted or reset since) starts again from 0. */
		if (r->c[i] < x->last[i]) {
			pcpu_counter_zero(x->c[i]);
			x->last[i] = 0;
		}
		if (r->c[i] > x->last[i])
			pcpu_counter_add(x->c[i], (int64)(r->c[i] - x->last[i]));
		x->last[i] = r->c[i];
	}
	for (i = 0; i < NGAUGES; i++)
		pcpu_gauge_set(x->g[i], r->g[i]);
	for (i = 0; i < NFRACTIONS; i++)
		pcpu_counter_set_double(x->f[i], r->f[i]);
	if (r->hist != NULL) {
		/* The histogram as the counters: on from its last copy, from
		 * zero where a bucket went down (evicted or reset since). */
		uint64 d[PSS_HIST_BUCKETS_MAX];
		size_t b, n = pss_tree.hist_nbuckets;
		bool down = false;

		for (b = 0; b < n; b++)
			down |= r->hist[b] < x->hlast[b];
		if (down) {
			(void)pcpu_histogram_zero(x->h);
			memset(x->hlast, 0, sizeof(x->hlast));
			x->hsum_last = 0;
		}
		for (b = 0; b < n; b++)
			d[b] = r->hist[b] - x->hlast[b];
		(void)pcpu_histogram_merge(x->h, d, n, r->hist_sum - x->hsum_last);
		memcpy(x->hlast, r->hist, n * sizeof(uint64));
		x->hsum_last = r->hist_sum;
	}
	if (r->query != NULL) {
		char epoch[24];

		snprintf(epoch, sizeof(epoch), INT64_FORMAT, r->query_epoch);
		if (x->text == NULL || strcmp(x->epoch, epoch) != 0 || strcmp(x->text, r->query) != 0) {
			char buf[4][24];
			const char *v[6];

			text_remove(x);
			pss_key_values(&x->key, buf, v);
			v[4] = epoch;
			v[5] = r->query;
			if (pss_text_info(ereg, v) == 0 || errno == EEXIST) {
				x->text = MemoryContextStrdup(TopMemoryContext, r->query);
				strlcpy(x->epoch, epoch, sizeof(x->epoch));
			} else {
				export_failed("a text");
			}
		}
	}
}

static int by_time(const void *a, const void *b)
{
	const pss_row *x = *(pss_row *const *)a, *y = *(pss_row *const *)b;
	uint64 tx = x->c[C_EXEC_TIME] + x->c[C_PLAN_TIME], ty = y->c[C_EXEC_TIME] + y->c[C_PLAN_TIME];

	if (tx != ty)
		return tx > ty ? -1 : 1;
	return 0;
}

void pss_export_pass(HTAB *rows)
{
	HASH_SEQ_STATUS it;
	pss_row *r, **top;
	exported *x;
	long n = 0, i;

	if (ereg == NULL)
		return;
	{
		uint64 d = (uint64)__atomic_load_n(pss_tree.dealloc, __ATOMIC_RELAXED);

		pcpu_gauge_set(eentries, __atomic_load_n(pss_tree.nlive, __ATOMIC_RELAXED));
		if (d < dealloc_last) { /* set back to 0 by a reset of every entry */
			pcpu_counter_zero(edealloc);
			dealloc_last = 0;
		}
		if (d > dealloc_last)
			pcpu_counter_add(edealloc, (int64)(d - dealloc_last));
		dealloc_last = d;
	}
	top = palloc(sizeof(pss_row *) * (hash_get_num_entries(rows) + 1));
	hash_seq_init(&it, rows);
	while ((r = (pss_row *)hash_seq_search(&it)) != NULL)
		if (r->whole && r->live && (r->c[C_CALLS] != 0 || r->c[C_PLANS] != 0))
			top[n++] = r;
	qsort(top, (size_t)n, sizeof(pss_row *), by_time);
	if (n > pss_export_top)
		n = pss_export_top;
	hash_seq_init(&it, exports);
	while ((x = (exported *)hash_seq_search(&it)) != NULL)
		x->top = false;
	for (i = 0; i < n; i++) {
		bool found;

		x = (exported *)hash_search(exports, &top[i]->key, HASH_ENTER, &found);
		if (!found && !export_make(x)) {
			export_failed("a statement's series");
			unexport(x);
			continue;
		}
		x->top = true;
		export_values(x, top[i]);
	}
	/* The statements out of the top: their series removed, so that the
	 * export stays at export_top statements. */
	hash_seq_init(&it, exports);
	while ((x = (exported *)hash_seq_search(&it)) != NULL)
		if (!x->top)
			unexport(x);
}

/* In the postmaster: the folder of the whole tree when the export is on,
 * beside pcpustat's default folder (made as pcpu makes that one: the
 * caller's, not writable by others); NULL (the default folder: every
 * entry exported) when off or when the folder cannot be made, said. */
const char *pss_export_tree_dir(const char *group)
{
	static char dir[MAXPGPATH];
	char base[MAXPGPATH];
	const char *env = getenv("PCPU_SEGMENT_DIR");
	struct stat st;
	struct group *gr = NULL;

	if (pss_export_top <= 0)
		return NULL;
	if (env != NULL && env[0] != '\0')
		strlcpy(base, env, sizeof(base));
	else
		snprintf(base, sizeof(base), PCPU_SEGMENT_DEFAULT_DIR "/pcpu-%u", (unsigned)geteuid());
	snprintf(dir, sizeof(dir), "%s/postgresql-all", base);
	if (group != NULL && group[0] != '\0' && (gr = getgrnam(group)) == NULL)
		return NULL; /* pss_tree_make() says why */
	if ((mkdir(base, 0700) != 0 && errno != EEXIST) ||
	    (mkdir(dir, gr ? 0750 : 0700) != 0 && errno != EEXIST) || lstat(dir, &st) != 0 ||
	    !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (gr != NULL && (chown(dir, (uid_t)-1, gr->gr_gid) != 0 || chmod(dir, 0750) != 0))) {
		ereport(WARNING, (errmsg(PSS_NAME ": \"%s\": %m: every entry is exported "
					      "(pcpu_stat_statements.export_top is not applied)",
					 dir)));
		pss_export_top = 0;
		return NULL;
	}
	return dir;
}
