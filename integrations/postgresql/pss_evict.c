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
 *  - it reads the tree's segment as any reader does (no lock: the view's
 *    pss_read_rows()), and ranks the entries in the table by use -- calls
 *    plus plans since the entry came in, fewest first (pg_stat_statements'
 *    usage, without its decay), less total time first among equals;
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
 * Nothing a query does waits for this: the read takes no lock, the resets
 * are offsets, the live words compare-and-swaps. The worker's first look
 * at an entry registers its series in the worker (pss_entry_get(): the
 * tree's directory lock, held for one lookup, as a backend's first meeting
 * of a key takes it); its later looks are local.
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

typedef struct {
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

/* One pass over the tree's `rows` (pss_read_rows()): the table back under
 * the bound; the rows of the entries taken out marked out too. */
static void evict(HTAB *rows)
{
	HASH_SEQ_STATUS it;
	pss_row *r;
	victim *v;
	pss_entry **gone;
	long n = 0, i, out;
	int ngone = 0;

	v = palloc(sizeof(victim) * (hash_get_num_entries(rows) + 1));
	hash_seq_init(&it, rows);
	while ((r = (pss_row *)hash_seq_search(&it)) != NULL) {
		if (!r->whole || !r->live)
			continue;
		v[n].row = r;
		v[n].use = r->c[C_CALLS] + r->c[C_PLANS];
		v[n].time = r->c[C_EXEC_TIME] + r->c[C_PLAN_TIME];
		n++;
	}
	if (n <= pss_tree.max)
		return; /* the count ran ahead of the read: nothing to do yet */
	out = (n - pss_tree.max) + Max(10, (long)pss_tree.max * 5 / 100);
	if (out > n)
		out = n;
	qsort(v, (size_t)n, sizeof(victim), by_use);
	gone = palloc(sizeof(pss_entry *) * out);
	for (i = 0; i < out; i++) {
		pss_entry *e = pss_entry_get(&v[i].row->key, NULL, 0, PSS_ADOPT);

		if (e != NULL) {
			pss_entry_out(e, false);
			gone[ngone++] = e;
		}
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

void pss_evict_main(Datum arg)
{
	MemoryContext cxt;
	TimestampTz next_read;
	bool exporting, due;

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
		/* The tree is read when the count says the table is past
		 * the bound, and every export_interval: to export, and to
		 * find a table past it whose count is short (a backend killed
		 * between its CAS and its add). An error ends the worker; the
		 * postmaster starts another. */
		due = GetCurrentTimestamp() >= next_read;
		if (due || __atomic_load_n(pss_tree.nlive, __ATOMIC_RELAXED) > pss_tree.max) {
			HTAB *rows;

			MemoryContextSwitchTo(cxt);
			rows = pss_read_rows();
			evict(rows);
			if (due && exporting)
				pss_export_pass(rows);
			pss_snapshot_done();
			MemoryContextSwitchTo(TopMemoryContext);
			MemoryContextReset(cxt);
		}
		if (due)
			next_read = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
								pss_export_interval * 1000);
	}
	proc_exit(0);
}
