/* SPDX-License-Identifier: MIT */
/*
 * pcpu_stat_statements' tree and entries: the registry the postmaster
 * makes and publishes before it forks (one family per statistic), and a
 * backend's entries -- a local hash from key to the entry's handles, each
 * entry registered in the tree the first time the backend meets its key
 * (found, with its values, where another backend made it).
 */
#include "pcpu_stat_statements.h"

#include <grp.h>
#include <stdio.h>

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* ---- the statistics: one family each ---------------------------------------------- */

#define P PSS_NAME "_"
const stat_desc pss_counters[NCOUNTERS] = {
	[C_CALLS] = {P "calls", "Times the statement was executed", NULL, 0},
	[C_ROWS] = {P "rows", "Rows retrieved or affected by the statement", NULL, 0},
	[C_EXEC_TIME] = {P "exec_time_seconds", "Time spent executing the statement", "seconds", -9},
	[C_SHARED_HIT] = {P "shared_blks_hit", "Shared block cache hits", NULL, 0},
	[C_SHARED_READ] = {P "shared_blks_read", "Shared blocks read", NULL, 0},
	[C_SHARED_DIRTIED] = {P "shared_blks_dirtied", "Shared blocks dirtied", NULL, 0},
	[C_SHARED_WRITTEN] = {P "shared_blks_written", "Shared blocks written", NULL, 0},
	[C_LOCAL_HIT] = {P "local_blks_hit", "Local block cache hits", NULL, 0},
	[C_LOCAL_READ] = {P "local_blks_read", "Local blocks read", NULL, 0},
	[C_LOCAL_DIRTIED] = {P "local_blks_dirtied", "Local blocks dirtied", NULL, 0},
	[C_LOCAL_WRITTEN] = {P "local_blks_written", "Local blocks written", NULL, 0},
	[C_TEMP_READ] = {P "temp_blks_read", "Temporary blocks read", NULL, 0},
	[C_TEMP_WRITTEN] = {P "temp_blks_written", "Temporary blocks written", NULL, 0},
	[C_BLK_READ_TIME] = {P "blk_read_time_seconds",
			     "Time spent reading data file blocks (track_io_timing)", "seconds", -9},
	[C_BLK_WRITE_TIME] = {P "blk_write_time_seconds",
			      "Time spent writing data file blocks (track_io_timing)", "seconds", -9},
	[C_TEMP_BLK_READ_TIME] = {P "temp_blk_read_time_seconds",
				  "Time spent reading temporary file blocks (track_io_timing)",
				  "seconds", -9},
	[C_TEMP_BLK_WRITE_TIME] = {P "temp_blk_write_time_seconds",
				   "Time spent writing temporary file blocks (track_io_timing)",
				   "seconds", -9},
	[C_WAL_RECORDS] = {P "wal_records", "WAL records generated", NULL, 0},
	[C_WAL_FPI] = {P "wal_fpi", "WAL full page images generated", NULL, 0},
	[C_WAL_BYTES] = {P "wal_bytes", "WAL generated", "bytes", 0},
	[C_JIT_FUNCTIONS] = {P "jit_functions", "Functions JIT-compiled", NULL, 0},
	[C_JIT_GENERATION_TIME] = {P "jit_generation_time_seconds", "Time spent generating JIT code",
				   "seconds", -9},
	[C_JIT_INLINING_COUNT] = {P "jit_inlining_count", "Times functions were inlined", NULL, 0},
	[C_JIT_INLINING_TIME] = {P "jit_inlining_time_seconds", "Time spent inlining functions",
				 "seconds", -9},
	[C_JIT_OPTIMIZATION_COUNT] = {P "jit_optimization_count", "Times the statement was optimized",
				      NULL, 0},
	[C_JIT_OPTIMIZATION_TIME] = {P "jit_optimization_time_seconds", "Time spent optimizing",
				     "seconds", -9},
	[C_JIT_EMISSION_COUNT] = {P "jit_emission_count", "Times code was emitted", NULL, 0},
	[C_JIT_EMISSION_TIME] = {P "jit_emission_time_seconds", "Time spent emitting code", "seconds",
				 -9},
	[C_PLANS] = {P "plans", "Times the statement was planned (track_planning)", NULL, 0},
	[C_PLAN_TIME] = {P "plan_time_seconds", "Time spent planning the statement", "seconds", -9},
};

const stat_desc pss_gauges[NGAUGES] = {
	[G_MIN_EXEC] = {P "min_exec_time_seconds", "Shortest execution of the statement", "seconds",
			-9},
	[G_MAX_EXEC] = {P "max_exec_time_seconds", "Longest execution of the statement", "seconds",
			-9},
	[G_MIN_PLAN] = {P "min_plan_time_seconds", "Shortest planning of the statement", "seconds",
			-9},
	[G_MAX_PLAN] = {P "max_plan_time_seconds", "Longest planning of the statement", "seconds",
			-9},
};

const stat_desc pss_fractions[NFRACTIONS] = {
	[F_EXEC_SQUARES] = {P "exec_time_squares",
			    "Sum of the squared execution times, in ms^2 (the standard deviation's)",
			    NULL, 0},
	[F_PLAN_SQUARES] = {P "plan_time_squares",
			    "Sum of the squared planning times, in ms^2 (the standard deviation's)",
			    NULL, 0},
};


/*
 * The execution times' histogram (EXEC_HIST): exponential buckets of
 * schema 0 -- Prometheus' native histogram buckets (2^(i-1), 2^i] seconds,
 * one per power of two, over every int64 of nanoseconds: 65 buckets, the
 * zero bucket and +Inf included -- so that a percentile is known within a
 * factor of 2 (interpolated inside its bucket, as PromQL's
 * histogram_quantile() does). Classic `le` buckets for the text
 * expositions: one per power of two from 2^-16 s (15.3 us: export_min, 10
 * us, folds the buckets below it into the first) to 2^5 s (32 s: max_value,
 * 60 s, leaves the bounds above it to +Inf): 22 bounds and +Inf. Schema 1
 * (a factor of 1.41) would double the buckets, and the memory: 2 x 16 B per
 * bucket and CPU (docs/postgresql.md, "Latency histograms").
 */
const struct pcpu_histogram_layout pss_hist_layout = {
	.scheme = PCPU_HISTOGRAM_EXPONENTIAL,
	.schema = 0,
	.export_per_octave = 1,
	.export_min = 10 * 1000,                  /* 10 us, in ns */
	.max_value = 60 * INT64CONST(1000000000), /* 1 min */
};

const stat_desc pss_exec_hist = {
	EXEC_HIST, "Execution times of the statement (its calls)", "seconds", -9};

/* Times each entry was reset: its counter's slot-0 word, atomic adds
 * only (pss_view.c), the epoch of its text. */
static const stat_desc entry_resets = {
	ENTRY_RESETS, "Times the entry was reset (its text is recorded anew after each)", NULL, 0};

/* Whether each entry is in the table: a gauge whose slot-0 word is 1 (in)
 * or 0 (new, evicted or reset), compare-and-swap only (pss_entry_in(),
 * pss_entry_out()). Readers list the entries in it. */
static const stat_desc entry_live = {
	ENTRY_LIVE, "1 while the statement's entry is in the table (0: evicted or reset)", NULL, 0};

pss_tree_t pss_tree;

static const char *const key_labels[] = {"userid", "dbid", "queryid", "toplevel"};
static const char *const text_labels[] = {"userid", "dbid", "queryid", "toplevel", "epoch",
					  "query"};

static HTAB *local_entries;
static long nstale; /* its entries marked stale (pss_entry_purge()) */
/* The entry pss_entry_find() looked up last: a statement with constants is
 * looked up at its parse analysis and again when it is counted, and a
 * workload repeats statements, so the second lookup is mostly one compare
 * (about 270 instructions less a SELECT 1: bench/postgresql.md,
 * "Instructions"). Entries leave the hash only where stale_trim() and
 * pss_entry_purge(true) remove them, which clear it; an entry whose set is
 * retired, or whose registration failed, stays in the hash, stale, and is
 * refused by find's test like any other stale one. */
static pss_entry *last_found;

/* ---- making the tree ------------------------------------------------------------------ */

static void tree_leave(int code, Datum arg)
{
	(void)code;
	(void)arg;
	/* The postmaster's exit (its children are gone): the last process of
	 * the tree removes the segment's name. */
	if (pss_tree.seg != NULL && pcpu_segment_leave(pss_tree.seg) < 0)
		ereport(LOG, (errmsg(PSS_NAME ": leaving the statistics: %s", pcpu_segment_error())));
	pss_tree.seg = NULL;
}

pcpu_family_t *pss_family(pcpu_registry_t *reg, const stat_desc *d, enum pcpu_metric_type type,
			  bool fractions)
{
	struct pcpu_family_desc f = {.name = d->name,
				     .help = d->help,
				     .unit = d->unit,
				     .type = type,
				     .nlabels = lengthof(key_labels),
				     .label_names = key_labels,
				     .scale_exp10 = d->scale,
				     .histogram = type == PCPU_METRIC_HISTOGRAM ? &pss_hist_layout : NULL};
	/* The execution times' histogram: sparse buckets (segment format
	 * 2.10), groups of 8 made as a statement's times fall in them -- one
	 * or two groups for most statements, where dense buckets take all 65
	 * per present CPU (bench/postgresql.md). Every process registers it
	 * alike: the postmaster, before its children exist. */
	unsigned flags = type == PCPU_METRIC_HISTOGRAM ? PCPU_FAMILY_SPARSE : 0;
	pcpu_family_t *fam = fractions ? pcpu_registry_family_nanos(reg, &f, 0, NULL, NULL)
				       : pcpu_registry_family_ex(reg, &f, flags, 0, NULL, NULL);

	if (fam == NULL)
		snprintf(pss_tree.why, sizeof(pss_tree.why), "family %s: %s", d->name, pcpu_stats_error());
	return fam;
}

/* The slot-0 word of the unlabelled series of family `d` (a gauge or a
 * counter), written by atomics only (as the extremes'); NULL with
 * pss_tree.why on failure. */
static int64 *tree_word(const struct pcpu_family_desc *d)
{
	pcpu_family_t *f = pcpu_registry_family(pss_tree.reg, d);
	void *w = NULL;

	if (f != NULL && d->type == PCPU_METRIC_GAUGE) {
		pcpu_gauge_t g = pcpu_family_gauge(f, NULL);

		w = g ? pcpu_slot_ptr(g, 0) : NULL;
	} else if (f != NULL) {
		pcpu_counter_t c = pcpu_family_counter(f, NULL);

		w = c ? pcpu_slot_ptr(c, 0) : NULL;
	}
	if (w == NULL)
		snprintf(pss_tree.why, sizeof(pss_tree.why), "%s: %s", d->name, pcpu_stats_error());
	return (int64 *)w;
}

/* The tree's own words: pcpu_stat_statements_info's stats_reset (a gauge
 * of microseconds since the Unix epoch, exposed in seconds), the entries in
 * the table, the eviction passes. */
const struct pcpu_family_desc pss_entries_desc = {
	.name = PSS_NAME "_entries",
	.help = "Entries in the table (pcpu_stat_statements.max bounds them)",
	.type = PCPU_METRIC_GAUGE};
const struct pcpu_family_desc pss_dealloc_desc = {
	.name = PSS_NAME "_dealloc",
	.help = "Times the least-used entries were evicted to make room "
		"(pcpu_stat_statements_info's dealloc)",
	.type = PCPU_METRIC_COUNTER};

static bool tree_words(void)
{
	static const struct pcpu_family_desc stats_reset = {
		.name = PSS_NAME "_stats_reset_timestamp_seconds",
		.help = "When every statement's statistics were last reset (or the server started)",
		.unit = "seconds",
		.type = PCPU_METRIC_GAUGE,
		.scale_exp10 = -6};
	/* The entries' series sets (pss_reuse.c), as the evictor last saw
	 * them: made (at most max_keys), retired (evicted, waiting until no
	 * counting section can hold them), free (for new statements). */
	static const struct pcpu_family_desc sets_made = {
		.name = PSS_NAME "_sets",
		.help = "Entries' series sets made (pcpu_stat_statements.max_keys bounds them)",
		.type = PCPU_METRIC_GAUGE};
	static const struct pcpu_family_desc sets_retired = {
		.name = PSS_NAME "_sets_retired",
		.help = "Evicted entries' series sets waiting until no backend can count into them",
		.type = PCPU_METRIC_GAUGE};
	static const struct pcpu_family_desc sets_free = {
		.name = PSS_NAME "_sets_free",
		.help = "Evicted entries' series sets free for new statements",
		.type = PCPU_METRIC_GAUGE};
	/* The evictor's reads of the whole tree (pss_evict.c): every
	 * export_interval, and when the sets in use could not rank the table. */
	static const struct pcpu_family_desc evictor_reads = {
		.name = PSS_NAME "_evictor_reads",
		.help = "Times the evictor read every series of the tree (every export_interval, "
			"and when ranking the sets in use could not bring the table under the bound)",
		.type = PCPU_METRIC_COUNTER};
	/* Registrations of an entry's series by counting backends: a
	 * statement met for the first time by the backend, or whose set was
	 * relabelled since it last counted it (pss_entry_get()). */
	static const struct pcpu_family_desc registrations = {
		.name = PSS_NAME "_registrations",
		.help = "Times a backend registered a statement's series: met for the first time "
			"by that backend, or its series relabelled since",
		.type = PCPU_METRIC_COUNTER};
	pcpu_family_t *f;

	pss_tree.stats_reset = tree_word(&stats_reset);
	pss_tree.nlive = pss_tree.stats_reset ? tree_word(&pss_entries_desc) : NULL;
	pss_tree.dealloc = pss_tree.nlive ? tree_word(&pss_dealloc_desc) : NULL;
	pss_tree.sets_made = pss_tree.dealloc ? tree_word(&sets_made) : NULL;
	pss_tree.sets_retired = pss_tree.sets_made ? tree_word(&sets_retired) : NULL;
	pss_tree.sets_free = pss_tree.sets_retired ? tree_word(&sets_free) : NULL;
	pss_tree.tree_reads = pss_tree.sets_free ? tree_word(&evictor_reads) : NULL;
	f = pss_tree.tree_reads ? pcpu_registry_family(pss_tree.reg, &registrations) : NULL;
	pss_tree.registrations = f ? pcpu_family_counter(f, NULL) : NULL;
	if (pss_tree.tree_reads != NULL && pss_tree.registrations == NULL)
		snprintf(pss_tree.why, sizeof(pss_tree.why), "%s: %s", registrations.name,
			 pcpu_stats_error());
	return pss_tree.registrations != NULL;
}

#define UNIX_TO_PG_USECS                                                                       \
	((int64)(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC)

void pss_set_stats_reset(TimestampTz t)
{
	__atomic_store_n(pss_tree.stats_reset, (int64)t + UNIX_TO_PG_USECS, __ATOMIC_RELAXED);
}

TimestampTz pss_stats_reset(void)
{
	return (TimestampTz)(__atomic_load_n(pss_tree.stats_reset, __ATOMIC_RELAXED) -
			     UNIX_TO_PG_USECS);
}

/* In the postmaster, before it forks: false with pss_tree.why on failure. */
bool pss_tree_make(int max, int max_keys, const char *group, const char *dir)
{
	struct pcpu_config cfg = PCPU_CONFIG_INIT;
	struct pcpu_segment_options o;
	char name[PCPU_SEGMENT_NAME_MAX + 1];
	pcpu_counter_t resets;
	int i;

	cfg.index = PCPU_INDEX_CPU;
	cfg.owned_slots = 0;
	if (pcpu_configure(&cfg) != 0) {
		snprintf(pss_tree.why, sizeof(pss_tree.why),
			 "pcpu_configure() failed (%m): a process tree's statistics need slots by "
			 "CPU number, and pcpu already runs with another choice in this server");
		return false;
	}
	pss_tree.reg = pcpu_registry_create();
	if (pss_tree.reg == NULL) {
		snprintf(pss_tree.why, sizeof(pss_tree.why), "pcpu_registry_create() failed: %m");
		return false;
	}
	for (i = 0; i < NCOUNTERS; i++)
		if ((pss_tree.counters[i] = pss_family(pss_tree.reg, &pss_counters[i],
						       PCPU_METRIC_COUNTER, false)) == NULL)
			return false;
	for (i = 0; i < NGAUGES; i++)
		if ((pss_tree.gauges[i] = pss_family(pss_tree.reg, &pss_gauges[i],
						     PCPU_METRIC_GAUGE, false)) == NULL)
			return false;
	for (i = 0; i < NFRACTIONS; i++)
		if ((pss_tree.fractions[i] = pss_family(pss_tree.reg, &pss_fractions[i],
							PCPU_METRIC_COUNTER, true)) == NULL)
			return false;
	pss_tree.entry_resets =
		pss_family(pss_tree.reg, &entry_resets, PCPU_METRIC_COUNTER, false);
	if (pss_tree.entry_resets == NULL)
		return false;
	pss_tree.entry_live = pss_family(pss_tree.reg, &entry_live, PCPU_METRIC_GAUGE, false);
	if (pss_tree.entry_live == NULL)
		return false;
	pss_tree.exec_hist = pss_family(pss_tree.reg, &pss_exec_hist, PCPU_METRIC_HISTOGRAM, false);
	if (pss_tree.exec_hist == NULL)
		return false;
	{
		/* The buckets a series has: a throwaway histogram of the
		 * layout (the scale does not change their number). */
		pcpu_histogram_t *h = pcpu_histogram_create(&pss_hist_layout);

		if (h == NULL) {
			snprintf(pss_tree.why, sizeof(pss_tree.why), "the histogram's layout: %s",
				 pcpu_stats_error());
			return false;
		}
		pss_tree.hist_nbuckets = pcpu_histogram_nbuckets(h);
		pcpu_histogram_destroy(h);
		if (pss_tree.hist_nbuckets > PSS_HIST_BUCKETS_MAX) {
			snprintf(pss_tree.why, sizeof(pss_tree.why),
				 "the histogram has %zu buckets, more than %d", pss_tree.hist_nbuckets,
				 PSS_HIST_BUCKETS_MAX);
			return false;
		}
	}
	pss_tree.max = max;
	memset(&o, 0, sizeof(o));
	o.flags = PCPU_SEGMENT_SHARED_TREE;
	o.dir = dir;
	if (group != NULL && group[0] != '\0') {
		/* Readers in that group (pcpustat run by a monitoring user):
		 * the file 0640 with this group, which the server's user
		 * must be a member of. */
		struct group *gr = getgrnam(group);

		if (gr == NULL) {
			snprintf(pss_tree.why, sizeof(pss_tree.why),
				 "pcpu_stat_statements.group: no group \"%s\"", group);
			return false;
		}
		o.flags |= PCPU_SEGMENT_GROUP_READ;
		o.group = gr->gr_gid;
		pss_tree.group_read = true;
		pss_tree.gid = gr->gr_gid;
	}
	/* The directory: the families and the tree's own series; the
	 * entries' series, max_keys sets at most (pcpu_stat_statements.
	 * max_keys: evicted entries' sets are relabelled for new statements,
	 * their texts too, pss_reuse.c); and the texts no set holds (an
	 * entry without a set, a crash restart's leftovers): room for 16 per
	 * set, a million at least (the table is sparse: only the entries used
	 * take memory). Past it a text is refused (logged), its statement
	 * still counted. */
	o.max_entries = (size_t)(NCOUNTERS + NGAUGES + NFRACTIONS + 32) +
			(size_t)max_keys * SERIES_PER_ENTRY +
			Max((size_t)max_keys * 16, (size_t)1 << 20);
	if (o.max_entries > (size_t)1 << 28)
		o.max_entries = (size_t)1 << 28;
	snprintf(name, sizeof(name), "postgresql.%d", PostPortNumber);
	pss_tree.seg = pcpu_segment_publish(pss_tree.reg, name, &o);
	if (pss_tree.seg == NULL) {
		snprintf(pss_tree.why, sizeof(pss_tree.why), "publishing \"%s\": %s", name,
			 pcpu_segment_error());
		return false;
	}
	strlcpy(pss_tree.path, pcpu_segment_path(pss_tree.seg), sizeof(pss_tree.path));
	resets = pcpu_registry_counter(pss_tree.reg, RESETS,
				       "Times pcpu_stat_statements_reset() ran in this tree");
	if (resets == NULL) {
		snprintf(pss_tree.why, sizeof(pss_tree.why), "counter %s: %s", RESETS, pcpu_stats_error());
		pcpu_segment_unpublish(pss_tree.seg);
		pss_tree.seg = NULL;
		return false;
	}
	pss_tree.resets = (int64 *)pcpu_slot_ptr(resets, 0);
	if (!tree_words()) {
		pcpu_segment_unpublish(pss_tree.seg);
		pss_tree.seg = NULL;
		return false;
	}
	pss_set_stats_reset(GetCurrentTimestamp());
	on_proc_exit(tree_leave, (Datum)0);
	return true;
}


/* ---- entries -------------------------------------------------------------------------- */

void pss_key_values(const pss_key *k, char buf[4][24], const char *v[6])
{
	snprintf(buf[0], 24, "%u", k->userid);
	snprintf(buf[1], 24, "%u", k->dbid);
	snprintf(buf[2], 24, INT64_FORMAT, (int64)k->queryid);
	v[0] = buf[0];
	v[1] = buf[1];
	v[2] = buf[2];
	v[3] = k->toplevel ? "true" : "false";
	v[4] = v[5] = NULL;
}

void pss_refused(const char *what)
{
	static bool said;

	if (!said) {
		said = true;
		ereport(LOG, (errmsg(PSS_NAME ": %s (the statement is not counted; "
				     "pcpu_stat_statements.max_keys bounds the entries at once)",
				     what)));
	}
}

static void refused(const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "%s: %s", what, pcpu_stats_error());
	pss_refused(msg);
}

/* A key's hash for the backend's table: the queryid is a hash already
 * (JumbleQuery's), so the others are mixed into it with one multiply and
 * shift instead of hash_bytes() over the 24 bytes (about 120 instructions
 * a lookup, and a statement looks up twice). */
static uint32 key_hash(const void *k, Size size)
{
	const pss_key *key = (const pss_key *)k;
	uint64 h = key->queryid ^ ((uint64)key->userid << 32 | key->dbid) ^ (uint64)key->toplevel;

	(void)size;
	h *= UINT64CONST(0x9E3779B97F4A7C15);
	return (uint32)(h >> 32);
}

HTAB *pss_local_entries(void)
{
	if (local_entries == NULL) {
		HASHCTL ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(pss_key);
		ctl.entrysize = sizeof(pss_entry);
		ctl.hash = key_hash; /* keys compared with memcmp (zeroed padding) */
		ctl.hcxt = TopMemoryContext;
		local_entries = hash_create(PSS_NAME " entries", 256, &ctl,
					    HASH_ELEM | HASH_FUNCTION | HASH_CONTEXT);
	}
	return local_entries;
}

static void mark_stale(pss_entry *e);

/* A key that took no set, or whose series could not be registered: its
 * element stays, stale and without a set (so that pss_entry_find(), and
 * its last_found, refuse it), until the key is met again -- the next
 * pss_entry_get() tries again from the start -- or stale_trim() drops it. */
static void entry_failed(pss_entry *e)
{
	e->set = -1;
	mark_stale(e);
}

/*
 * The backend's entry of `key`: found in the local hash (no lock), or its
 * set taken (pss_reuse.c: the sets' lock) and its series registered in the
 * tree (the directory's lock, once per backend and key; found where another
 * backend made them or a free set was relabelled for the key). `text`
 * (NULL: none) is the statement's text, recorded with a new entry. NULL
 * when refused: nothing is kept, a later call tries again (a set may have
 * been freed meanwhile).
 */
pss_entry *pss_entry_get(const pss_key *key, const char *text, int text_len, pss_get_mode mode)
{
	pss_entry *e;
	bool found, ok;
	int was = -1;

	e = (pss_entry *)hash_search(pss_local_entries(), key, HASH_ENTER, &found);
	if (found && !e->stale)
		return e;
	if (found) {
		/* Its set was retired since its handles were taken (an
		 * eviction): the key takes a set again below. */
		was = e->set;
		nstale--;
	}
	e->stale = false;
	e->set = -1;
	e->gen = pss_section_gen();
	if (!pss_sets_take(e, mode)) {
		entry_failed(e);
		return NULL;
	}
	if (was >= 0 && e->set == was && pss_set_labelling(was) == e->labelled) {
		/* Its own set back, its series never relabelled since (the
		 * same labelling): still the key's, and the handles good --
		 * no registration, which, for an evicted statement met again,
		 * was most of what it cost (bench/postgresql.md, "Eviction
		 * churn"). As a new entry's: extremes and table at the first
		 * count; a text anew if a reset moved its epoch meanwhile
		 * (pss_entry_check(): text_epoch is kept). */
		pss_sets_done(e);
		e->resets_seen = -1;
		e->text_resets_seen = -1;
		return e;
	}
	/* Registered under the sets' lock: the set's series are whole (made
	 * or relabelled for the key) before another process meets it. */
	ok = pss_entry_register(e, text, text_len);
	e->labelled = pss_set_labelling(e->set);
	pss_sets_done(e);
	if (!ok) {
		entry_failed(e);
		return NULL;
	}
	if (mode == PSS_COUNT)
		pcpu_counter_add(pss_tree.registrations, 1);
	return e;
}

bool pss_entry_register(pss_entry *e, const char *text, int text_len)
{
	char buf[4][24];
	const char *v[6];
	pcpu_counter_t epoch;
	int i;

	pss_key_values(&e->key, buf, v);
	for (i = 0; i < NGAUGES; i++) {
		pcpu_gauge_t g = pcpu_family_gauge(pss_tree.gauges[i], v);

		if (g == NULL) {
			refused("an entry's series");
			return false;
		}
		e->minmax[i] = (int64 *)pcpu_slot_ptr(g, 0);
	}
	for (i = 0; i < NFRACTIONS; i++) {
		e->f[i] = pcpu_family_counter(pss_tree.fractions[i], v);
		if (e->f[i] == NULL) {
			refused("an entry's series");
			return false;
		}
	}
	e->h = pcpu_family_histogram(pss_tree.exec_hist, v);
	if (e->h == NULL) {
		refused("an entry's series");
		return false;
	}
	epoch = pcpu_family_counter(pss_tree.entry_resets, v);
	if (epoch == NULL) {
		refused("an entry's series");
		return false;
	}
	e->epoch = (int64 *)pcpu_slot_ptr(epoch, 0);
	{
		pcpu_gauge_t live = pcpu_family_gauge(pss_tree.entry_live, v);

		if (live == NULL) {
			refused("an entry's series");
			return false;
		}
		e->live = (int64 *)pcpu_slot_ptr(live, 0);
	}
	/* Not looked at yet: the first pss_entry_check() brings the entry
	 * into the table (the counting path's; the reset's, the evictor's
	 * and .save's registrations leave it as it is). */
	e->text_resets_seen = -1;
	e->text_epoch = __atomic_load_n(e->epoch, __ATOMIC_RELAXED);
	e->want_text = false;
	/* calls last: the view lists the entries that have it, whole. */
	for (i = NCOUNTERS - 1; i >= 0; i--) {
		e->c[i] = pcpu_family_counter(pss_tree.counters[i], v);
		if (e->c[i] == NULL) {
			refused("an entry's series");
			return false;
		}
		/* The text before calls, as part of the entry: the set's
		 * text series relabelled for the key (pss_reuse.c). A second
		 * text of the key and epoch (another backend's, met at the
		 * same time) leaves the first; either way the entry counts. */
		if (i == 1 && text != NULL)
			pss_entry_text(e, text, text_len);
	}
	e->resets_seen = -1; /* load the extremes at the first count */
	return true;
}

void pss_entry_check(pss_entry *e)
{
	int64 resets = __atomic_load_n(pss_tree.resets, __ATOMIC_ACQUIRE), epoch;

	if (resets == e->text_resets_seen)
		return;
	e->text_resets_seen = resets;
	epoch = __atomic_load_n(e->epoch, __ATOMIC_RELAXED);
	if (epoch != e->text_epoch) {
		e->text_epoch = epoch;
		e->want_text = true;
	}
	if (__atomic_load_n(e->live, __ATOMIC_RELAXED) == 0)
		pss_entry_in(e);
}

/* Out of line: with pss_entry_out(), the table's only atomic
 * read-modify-writes, which ctest postgresql_hot_path allows off the
 * common path (tests/hot_path.py). */
pg_noinline void pss_entry_in(pss_entry *e)
{
	int64 out = 0;

	if (__atomic_compare_exchange_n(e->live, &out, 1, false, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		__atomic_add_fetch(pss_tree.nlive, 1, __ATOMIC_RELAXED);
}

void pss_entry_out(pss_entry *e, bool new_epoch)
{
	int64 in = 1;
	int i;

	if (__atomic_compare_exchange_n(e->live, &in, 0, false, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		__atomic_sub_fetch(pss_tree.nlive, 1, __ATOMIC_RELAXED);
	/* Every counter from now on counts from zero; adds that run
	 * meanwhile are counted once, before or after (pcpu/counter.h). */
	for (i = 0; i < NCOUNTERS; i++)
		pcpu_counter_zero(e->c[i]);
	for (i = 0; i < NFRACTIONS; i++)
		pcpu_counter_set_double(e->f[i], 0.0);
	for (i = 0; i < NGAUGES; i++)
		__atomic_store_n(e->minmax[i], 0, __ATOMIC_RELAXED);
	(void)pcpu_histogram_zero(e->h); /* by offset, as the counters */
	/* A reset's new epoch: its text is the first met from now on. An
	 * eviction keeps the text it has (the same statement's): recorded
	 * anew, each return after an eviction would take a directory entry
	 * more, which the tree never frees. */
	if (new_epoch)
		__atomic_add_fetch(e->epoch, 1, __ATOMIC_RELAXED);
}

void pss_entry_text(pss_entry *e, const char *text, int len)
{
	char buf[4][24];
	const char *v[6];

	pss_key_values(&e->key, buf, v);
	snprintf(buf[3], sizeof(buf[3]), INT64_FORMAT, e->text_epoch);
	v[4] = buf[3];
	v[5] = pss_text_label(text, len);
	/* The text series of the entry's set, relabelled (pss_reuse.c). */
	if (!pss_sets_text(e, e->text_epoch, v))
		refused("an entry's text");
	pfree((void *)v[5]);
	e->want_text = false;
}

int pss_text_info(pcpu_registry_t *reg, const char *const v[6])
{
	return pcpu_registry_info(reg, QUERY_INFO,
				  "The text of the statement (the first recorded since the entry's "
				  "epoch-th reset)",
				  lengthof(text_labels), text_labels, v);
}

/* The entry not used until its key takes a set again (pss_entry_get()). */
static void mark_stale(pss_entry *e)
{
	e->stale = true;
	nstale++;
}

/* The stale entries forgotten once they outnumber the sets: no more can be
 * taken back. */
static void stale_trim(void)
{
	HASH_SEQ_STATUS it;
	pss_entry *e;

	if (nstale <= pss_max_sets)
		return;
	/* dynahash allows removing the element just returned by the scan. */
	hash_seq_init(&it, local_entries);
	while ((e = (pss_entry *)hash_seq_search(&it)) != NULL)
		if (e->stale)
			(void)hash_search(local_entries, &e->key, HASH_REMOVE, NULL);
	nstale = 0;
	last_found = NULL;
}

void pss_entry_purge(bool all)
{
	HASH_SEQ_STATUS it;
	pss_entry *e;

	if (local_entries == NULL)
		return;
	/* Stale ones are kept: pss_entry_get() takes them back cheaply. */
	hash_seq_init(&it, local_entries);
	while ((e = (pss_entry *)hash_seq_search(&it)) != NULL) {
		if (all) {
			(void)hash_search(local_entries, &e->key, HASH_REMOVE, NULL);
		} else if (!e->stale && e->set >= 0 && pss_set_retired_after(e->set, e->gen)) {
			mark_stale(e);
		}
	}
	if (all) {
		nstale = 0;
		last_found = NULL;
	} else {
		stale_trim();
	}
}

void pss_entry_stale(const pss_key *key)
{
	pss_entry *e = pss_entry_find(key);

	if (e != NULL && e->set >= 0) {
		mark_stale(e);
		stale_trim();
	}
}

pss_entry *pss_entry_find(const pss_key *key)
{
	pss_entry *e;

	if (local_entries == NULL)
		return NULL;
	if (last_found != NULL && memcmp(&last_found->key, key, sizeof(*key)) == 0)
		e = last_found;
	else if ((e = (pss_entry *)hash_search(local_entries, key, HASH_FIND, NULL)) != NULL)
		last_found = e;
	return e != NULL && !e->stale ? e : NULL;
}
