/* SPDX-License-Identifier: MIT */
/*
 * pcpu_stat_statements' eviction at pcpu_stat_statements.max, off the
 * queries' path: a background worker of the postmaster's tree (which also
 * makes the bounded export: pss_export.c).
 *
 * pg_stat_statements, on meeting a new statement with its table full,
 * evicts 5 % of the entries (the least used) under its table's exclusive
 * lock, inside the query that met it: every backend that counts waits.
 * Here a backend never evicts and never waits for an eviction: the entry
 * it meets comes into the table (pss_entry_in(): a compare-and-swap of the
 * entry's live word and an atomic add to the tree's count of entries, both
 * wait-free), and this worker, which looks at that count every
 * EVICT_POLL_MS (and reads the tree every export_interval seconds in any
 * case), brings the table back under the bound when it is past it:
 *
 *  - it ranks the entries in the table by use -- calls plus plans since
 *    the entry came in, fewest first (pg_stat_statements' usage, without
 *    its decay), less total time first among equals. It finds them
 *    through the sets in use (pss_sets_live(): their keys, read under
 *    the sets' lock in shared mode) and its own handles of their series,
 *    fetching four counters and a live word per entry (evict_sets()); every
 *    export_interval, and when the sets cannot account for the count (an
 *    entry without a set, adopted after a crash restart), it reads the
 *    tree's segment as any reader does instead (no lock: the view's
 *    pss_read_rows(); counted in pcpu_stat_statements_evictor_reads);
 *  - it takes out the least used: as many as the table holds past the
 *    bound, plus 5 % of it (at least 10), as pg_stat_statements does;
 *    pss_entry_out() resets each by offset (pcpu_counter_zero(): adds
 *    running meanwhile are never lost into a half) and marks it out;
 *  - then it counts the pass (dealloc) and bumps the tree's resets word,
 *    so that every backend reloads its copies of the extremes and, at its
 *    next count of an evicted statement, brings it back in, from zero --
 *    as pg_stat_statements makes a new entry for an evicted statement met
 *    again (with the text it had: recorded anew, each return would take a
 *    directory entry more).
 *
 * Nothing a query does waits for this: the fetches and the read take no
 * lock, the resets are offsets, the live words compare-and-swaps; only a
 * backend meeting a key for the first time, which takes the sets' lock,
 * may wait for one pass over the sets (max_keys of them, a copy each). The
 * worker's first look at an entry registers its series in the worker
 * (pss_entry_get(): the sets' lock and the tree's directory lock, as a
 * backend's first meeting of a key takes them); its later looks are local.
 *
 * What the shared tree cannot do: free a series (pcpu never removes one
 * from a shared registry, which another process may hold). The evicted
 * entries' sets of series are retired instead, and relabelled for new
 * statements once no backend can still count into them (pss_reuse.c); the
 * tree holds at most pcpu_stat_statements.max_keys sets at once, and a new
 * statement meeting none free (this worker behind, or stopped) is not
 * counted (docs/postgresql.md, "Eviction").
 */
#include "pcpu_stat_statements.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#define EVICT_POLL_MS 100

PGDLLEXPORT void pss_evict_main(Datum arg);

void pss_evict_register(void)
{
	BackgroundWorker w;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS;
	w.bgw_start_time = BgWorkerStart_PostmasterStart;
	w.bgw_restart_time = 1;
	strlcpy(w.bgw_library_name, PSS_NAME, BGW_MAXLEN);
	strlcpy(w.bgw_function_name, "pss_evict_main", BGW_MAXLEN);
	strlcpy(w.bgw_name, PSS_NAME " evictor", BGW_MAXLEN);
	strlcpy(w.bgw_type, PSS_NAME " evictor", BGW_MAXLEN);
	RegisterBackgroundWorker(&w);
}

/* A candidate: its key, the entry's use (calls plus plans since it came
 * in) and total time; the row of the whole read, if it came from one. */
typedef struct {
	const pss_key *key;
	pss_row *row;
	uint64 use;
	uint64 time;
} victim;

static int by_use(const void *a, const void *b)
{
	const victim *x = a, *y = b;

	if (x->use != y->use)
		return x->use < y->use ? -1 : 1;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return 0;
}

/* Takes the least used of the n candidates out of the table, when there
 * are more than the bound: the table back under it, plus 5 % of it. */
static void evict(victim *v, long n)
{
	pss_entry **gone;
	long i, out;
	int ngone = 0;

	if (n <= pss_tree.max)
		return; /* the count ran ahead of the look: nothing to do yet */
	out = (n - pss_tree.max) + Max(10, (long)pss_tree.max * 5 / 100);
	if (out > n)
		out = n;
	qsort(v, (size_t)n, sizeof(victim), by_use);
	gone = palloc(sizeof(pss_entry *) * out);
	for (i = 0; i < out; i++) {
		pss_entry *e = pss_entry_get(v[i].key, NULL, 0, PSS_ADOPT);

		if (e != NULL) {
			pss_entry_out(e, false);
			gone[ngone++] = e;
		}
		if (v[i].row != NULL)
			v[i].row->live = false;
	}
	/* Their sets retired: relabelled for new statements once no counting
	 * section can still hold them (pss_sets_reclaim(), at the polls). */
	pss_sets_retire(gone, ngone);
	__atomic_add_fetch(pss_tree.dealloc, 1, __ATOMIC_RELAXED);
	/* Every backend reloads its copies and brings an evicted statement
	 * back in at its next count. */
	__atomic_add_fetch(pss_tree.resets, 1, __ATOMIC_RELEASE);
}

/* One pass over the tree's `rows` (pss_read_rows()): the table back under
 * the bound; the rows of the entries taken out marked out too. */
static void evict_rows(HTAB *rows)
{
	HASH_SEQ_STATUS it;
	pss_row *r;
	victim *v;
	long n = 0;

	v = palloc(sizeof(victim) * (hash_get_num_entries(rows) + 1));
	hash_seq_init(&it, rows);
	while ((r = (pss_row *)hash_seq_search(&it)) != NULL) {
		if (!r->whole || !r->live)
			continue;
		v[n].key = &r->key;
		v[n].row = r;
		v[n].use = r->c[C_CALLS] + r->c[C_PLANS];
		v[n].time = r->c[C_EXEC_TIME] + r->c[C_PLAN_TIME];
		n++;
	}
	evict(v, n);
}

/* This worker's handles of the series that rank a set's entry: its calls,
 * plans and times, and its live word, taken under the set's labelling
 * `labelled` (0: none yet). One per set, for the worker's life: only a new
 * labelling -- another key taking the set (pcpu_families_relabel()), or,
 * after a crash restart, a key's own series taking its number
 * (pss_sets_take()) -- makes them other series, whose handles the next
 * look takes. A LIVE set keeps its labelling until this worker retires
 * it: the handles hold from pss_sets_live() to the fetches. */
typedef struct {
	uint32 labelled;
	pcpu_counter_t use[2], time[2];
	int64 *live;
} rank_handles;

static rank_handles *ranks;

static bool rank_take(rank_handles *h, const pss_key *key, uint32 labelled)
{
	static const int use[2] = {C_CALLS, C_PLANS}, time[2] = {C_EXEC_TIME, C_PLAN_TIME};
	char buf[4][24];
	const char *v[6];
	pcpu_gauge_t live;
	int i;

	pss_key_values(key, buf, v);
	h->labelled = 0;
	for (i = 0; i < 2; i++) {
		h->use[i] = pcpu_family_counter(pss_tree.counters[use[i]], v);
		h->time[i] = pcpu_family_counter(pss_tree.counters[time[i]], v);
		if (h->use[i] == NULL || h->time[i] == NULL)
			return false;
	}
	live = pcpu_family_gauge(pss_tree.entry_live, v);
	if (live == NULL)
		return false;
	h->live = (int64 *)pcpu_slot_ptr(live, 0);
	h->labelled = labelled;
	return true;
}

static uint64 value(pcpu_counter_t c)
{
	return (uint64)pcpu_counter_fetch(c);
}

/*
 * The table back under the bound from the sets in use, without reading the
 * tree: each LIVE set's live word and four counters, through this worker's
 * handles of them (rank_handles). The read of the whole tree parses and
 * sorts every series of every set, 38 a set (114,000 with 3,000 sets), at
 * each pass: while a churn of new statements kept the table past the
 * bound, those reads took half of a 2-vCPU machine (bench/postgresql.md,
 * "Eviction churn"). Registering each set's whole entry here instead
 * (pss_entry_get(), 38 series and the sets' lock, again each time an
 * evicted statement came back) made it worse: 0.097x no module's TPS.
 * False when the sets show the table at most at the bound while the count
 * says past it: an entry without a set (adopted after a crash restart)
 * may be in it, which only the whole read sees.
 */
static bool evict_sets(void)
{
	pss_live_set *sets = palloc(sizeof(pss_live_set) * pss_max_sets);
	victim *v = palloc(sizeof(victim) * (pss_max_sets + 1));
	int i, nsets;
	long n = 0;

	if (ranks == NULL)
		ranks = MemoryContextAllocZero(TopMemoryContext,
					       sizeof(rank_handles) * pss_max_sets);
	nsets = pss_sets_live(sets, pss_max_sets);
	for (i = 0; i < nsets; i++) {
		rank_handles *h = &ranks[sets[i].set];

		if (h->labelled != sets[i].labelled && !rank_take(h, &sets[i].key, sets[i].labelled))
			continue; /* refused: ranked by the whole read only */
		if (__atomic_load_n(h->live, __ATOMIC_RELAXED) != 1)
			continue;
		v[n].key = &sets[i].key;
		v[n].row = NULL;
		v[n].use = value(h->use[0]) + value(h->use[1]);
		v[n].time = value(h->time[0]) + value(h->time[1]);
		n++;
	}
	if (n <= pss_tree.max)
		return false;
	evict(v, n);
	return true;
}

void pss_evict_main(Datum arg)
{
	MemoryContext cxt;
	TimestampTz next_read;
	bool exporting, due, past;

	(void)arg;
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	cxt = AllocSetContextCreate(TopMemoryContext, PSS_NAME " evictor", ALLOCSET_DEFAULT_SIZES);
	exporting = pss_tree.seg != NULL && pss_export_start();
	next_read = GetCurrentTimestamp();
	while (!ShutdownRequestPending) {
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				EVICT_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (ConfigReloadPending) {
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (pss_tree.seg == NULL)
			continue;
		/* The retired sets no section can hold any more: free. */
		pss_sets_reclaim();
		/* Past the bound by the count: the table ranked from the sets
		 * in use. The whole tree is read every export_interval -- to
		 * export, and to find a table past the bound whose count is
		 * short (a backend killed between its CAS and its add) -- and
		 * when the sets could not account for the count. An error
		 * ends the worker; the postmaster starts another. */
		due = GetCurrentTimestamp() >= next_read;
		past = __atomic_load_n(pss_tree.nlive, __ATOMIC_RELAXED) > pss_tree.max;
		MemoryContextSwitchTo(cxt);
		if (past && !due && evict_sets())
			past = false;
		if (due || past) {
			HTAB *rows = pss_read_rows();

			__atomic_add_fetch(pss_tree.tree_reads, 1, __ATOMIC_RELAXED);
			evict_rows(rows);
			if (due && exporting)
				pss_export_pass(rows);
			pss_snapshot_done();
		}
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(cxt);
		if (due)
			next_read = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
								pss_export_interval * 1000);
	}
	proc_exit(0);
}
