/* SPDX-License-Identifier: MIT */
/*
 * pcpu_stat_statements: PostgreSQL's statement statistics (the columns of
 * pg_stat_statements 1.10) kept in one pcpu registry shared by the
 * postmaster's process tree (PCPU_SEGMENT_SHARED_TREE), without
 * pg_stat_statements' per-entry spinlock and table lock.
 *
 * The tree: loaded with shared_preload_libraries, _PG_init runs in the
 * postmaster before it forks anything. It chooses CPU-number slots
 * (pcpu_configure()), makes the registry with its families -- one per
 * statistic, labelled userid, dbid, queryid, toplevel -- and publishes it
 * as the shared tree "postgresql.<port>" (/dev/shm/pcpu-<uid>/). Every
 * backend forked from the postmaster, after a crash restart too, writes the
 * same memory; pcpustat reads it from outside.
 *
 * An entry: a (userid, dbid, queryid, toplevel) key's series, one in each
 * family. A backend keeps a local hash (dynahash in TopMemoryContext) from
 * key to the entry's handles. The first time a backend meets a key it
 * registers the entry's series (pcpu_family_counter()...: the tree's
 * directory lock, found if another backend made them); afterwards an
 * execution or a planning costs a local hash lookup and one rseq add per
 * non-zero statistic: no lock, no atomic.
 *
 * min/max exec time: a gauge series per entry whose slot-0 word holds the
 * value, written only by compare-and-swap (never by an rseq add, so the
 * words are no sequence's: pcpu/percpu_ops.h, "Who may write what"); read
 * as a gauge it is the value itself, in every reader and exposition. Each
 * backend caches the value it last saw and tries a CAS only when an
 * execution beats it: after a warm-up, new extremes are rare, so the common
 * path is a compare with a local copy. A reset zeroes the words and bumps
 * the tree's reset counter (slot-0 word, atomic too), which every backend
 * compares (one load of a read-mostly line) before using its cache.
 *
 * The execution times' histogram: one exponential histogram series per
 * entry (schema 0: Prometheus' native buckets, one per power of two),
 * recorded in store() with the time exec_time adds -- one rseq section,
 * no lock, no atomic; the view's exec_time_p50/_p90/_p99 are its
 * percentiles (pss_view.c), a reset zeroes it by offset (pss_tree.c).
 *
 * The query text (pss_text.c): normalized ($1 for the constants) when a
 * backend first meets a key at parse analysis, or the statement's text at
 * its first count; a label of the info family
 * pcpu_stat_statements_query_info with the entry's epoch (its resets), so
 * that the first text after a reset is recorded anew, as
 * pg_stat_statements records it after removing the entry.
 *
 * The files: this one (the hooks, the counting, the settings, _PG_init);
 * pss_tree.c (the tree and a backend's entries); pss_text.c (the texts);
 * pss_view.c (the views and the reset, which read the tree's segment as
 * any reader does); pss_save.c (.save across a restart); pss_evict.c (the
 * background worker that evicts past .max, never a query); pss_reuse.c
 * (the evicted entries' series reused for new statements, and the
 * counting sections that make it safe: store() counts inside one);
 * pss_export.c (the top statements it copies for pcpustat).
 *
 * The library never prints or exits; this file reports with ereport().
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "access/parallel.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "fmgr.h"
#include "jit/jit.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "optimizer/planner.h"
#include "parser/analyze.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/queryjumble.h"

#include "pcpu_stat_statements.h"


PG_MODULE_MAGIC;

/* ---- settings ------------------------------------------------------------------------ */

typedef enum { TRACK_NONE, TRACK_TOP, TRACK_ALL } track_level;

static const struct config_enum_entry track_options[] = {
	{"none", TRACK_NONE, false}, {"top", TRACK_TOP, false}, {"all", TRACK_ALL, false}, {NULL, 0, false}};

static int pss_max = 5000;
static int pss_max_keys = 0; /* 0: 4 x pss_max */
static char *pss_group = NULL;
static int pss_track = TRACK_TOP;
static bool pss_track_utility = true;
static bool pss_track_planning = false;
/* A test's hook (tests/pg_reuse.py): milliseconds each count sleeps inside
 * its counting section, with wait event Extension -- a backend stopped
 * there delays the reuse of evicted entries' series, never makes it wrong.
 * Superuser only, hidden; 0 (off) costs one load and a branch. */
static int pss_debug_section_sleep = 0;

/* ---- the tree (made by the postmaster, inherited by every backend) ------------------- */

static int nested_level = 0;
static int plan_nested_level = 0; /* planner calls in progress (planning may plan) */

/* The utility statement being measured (ProcessUtility), and its level:
 * its own executor run (the query of CREATE TABLE AS, DECLARE, EXPLAIN
 * ANALYZE, when it carries the utility's queryId) is not counted again. */
static uint64 util_queryid = 0;
static int util_level = -1;

#define inner_of_utility(qid) ((qid) == util_queryid && nested_level == util_level + 1)

#define pss_enabled(level)                                                                     \
	(pss_tree.seg != NULL && !IsParallelWorker() &&                                            \
	 (pss_track == TRACK_ALL || (pss_track == TRACK_TOP && (level) == 0)))

static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorRun_hook_type prev_ExecutorRun = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static planner_hook_type prev_planner = NULL;
static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;

void _PG_init(void);


/* A new extreme: CAS into the shared word, off the common path. Returns the
 * word's value afterwards. Out of line, as lower_min(): the only atomic
 * read-modify-writes of the counting path, which ctest postgresql_hot_path
 * tells apart from the hooks' own code (tests/hot_path.py). */
static pg_noinline int64 raise_max(int64 *w, int64 t)
{
	int64 cur = __atomic_load_n(w, __ATOMIC_RELAXED);

	while (cur < t && !__atomic_compare_exchange_n(w, &cur, t, false, __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
	return cur < t ? t : cur;
}

static pg_noinline int64 lower_min(int64 *w, int64 t)
{
	int64 cur = __atomic_load_n(w, __ATOMIC_RELAXED);

	/* 0: no execution since the entry was made or reset. */
	while ((cur == 0 || t < cur) &&
	       !__atomic_compare_exchange_n(w, &cur, t, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return cur == 0 || t < cur ? t : cur;
}

#define ADD(i, v)                                                                              \
	do {                                                                                   \
		int64 v_ = (int64)(v);                                                         \
		if (v_ != 0)                                                                   \
			pcpu_counter_add(e->c[i], v_);                                         \
	} while (0)

static int64 nanos(instr_time t)
{
	/* Most of a statement's I/O and JIT times are 0: no libm call then. */
	return INSTR_TIME_IS_ZERO(t) ? 0 : (int64)llround(INSTR_TIME_GET_DOUBLE(t) * 1e9);
}

/* The extremes of one kind (gmin, gmax) with t (ns, >= 1): a compare with
 * this backend's copies; a CAS on the shared word only for a new extreme.
 * After a reset anywhere (the tree's resets word moved), the copies are
 * read again first. */
static void extremes(pss_entry *e, int gmin, int gmax, int64 t)
{
	int64 resets = __atomic_load_n(pss_tree.resets, __ATOMIC_ACQUIRE);
	int i;

	if (resets != e->resets_seen) {
		e->resets_seen = resets;
		for (i = 0; i < NGAUGES; i++)
			e->seen[i] = __atomic_load_n(e->minmax[i], __ATOMIC_RELAXED);
	}
	if (t > e->seen[gmax])
		e->seen[gmax] = raise_max(e->minmax[gmax], t);
	if (e->seen[gmin] == 0 || t < e->seen[gmin])
		e->seen[gmin] = lower_min(e->minmax[gmin], t);
}

/* pcpu_stat_statements.debug_section_sleep's sleep, in a count's section. */
static pg_noinline void section_sleep(void)
{
	pgstat_report_wait_start(PG_WAIT_EXTENSION);
	pg_usleep((long)pss_debug_section_sleep * 1000L);
	pgstat_report_wait_end();
}

typedef enum { KIND_PLAN, KIND_EXEC } store_kind;

/* One planning (KIND_PLAN: planner) or execution (KIND_EXEC: ExecutorEnd,
 * ProcessUtility) of `queryid`, as pg_stat_statements counts them: a
 * planning adds its time and its buffers and WAL, an execution its time,
 * rows, buffers, WAL and JIT. */
static void store(store_kind kind, const char *query, uint64 queryid, int location, int len,
		  double seconds, uint64 rows, const BufferUsage *b, const WalUsage *w,
		  const JitInstrumentation *j)
{
	pss_key key;
	pss_entry *e;
	double ms;
	int64 t;

	if (queryid == UINT64CONST(0))
		return;
	memset(&key, 0, sizeof(key));
	key.userid = GetUserId();
	key.dbid = MyDatabaseId;
	key.queryid = queryid;
	key.toplevel = nested_level == 0;
	/* The entry's handles are taken and used inside the counting
	 * section: the evictor reuses no series a section may still hold
	 * (pss_reuse.c). Plain stores and loads. */
	pss_section_enter();
	e = pss_entry_find(&key);
	if (e == NULL) {
		const char *text = NULL;

		if (query != NULL)
			text = CleanQuerytext(query, &location, &len);
		e = pss_entry_get(&key, text, text ? len : 0, PSS_COUNT);
		if (e != NULL)
			pss_entry_check(e); /* into the table */
	} else {
		/* Reset or evicted since its text was recorded: the text
		 * anew, and the entry back into the table. */
		pss_entry_check(e);
		if (e->want_text && query != NULL) {
			const char *text = CleanQuerytext(query, &location, &len);

			pss_entry_text(e, text, len);
		}
	}
	if (e == NULL) {
		pss_section_leave();
		return;
	}
	if (unlikely(pss_debug_section_sleep > 0))
		section_sleep();

	t = (int64)llround(seconds * 1e9);
	if (t < 1)
		t = 1; /* 0 is the extremes' "none yet" */
	ms = seconds * 1e3;
	if (kind == KIND_EXEC) {
		ADD(C_ROWS, rows);
		ADD(C_EXEC_TIME, t);
		pcpu_counter_add_double(e->f[F_EXEC_SQUARES], ms * ms);
	} else {
		ADD(C_PLAN_TIME, t);
		pcpu_counter_add_double(e->f[F_PLAN_SQUARES], ms * ms);
	}
	ADD(C_SHARED_HIT, b->shared_blks_hit);
	ADD(C_SHARED_READ, b->shared_blks_read);
	ADD(C_SHARED_DIRTIED, b->shared_blks_dirtied);
	ADD(C_SHARED_WRITTEN, b->shared_blks_written);
	ADD(C_LOCAL_HIT, b->local_blks_hit);
	ADD(C_LOCAL_READ, b->local_blks_read);
	ADD(C_LOCAL_DIRTIED, b->local_blks_dirtied);
	ADD(C_LOCAL_WRITTEN, b->local_blks_written);
	ADD(C_TEMP_READ, b->temp_blks_read);
	ADD(C_TEMP_WRITTEN, b->temp_blks_written);
	ADD(C_BLK_READ_TIME, nanos(b->blk_read_time));
	ADD(C_BLK_WRITE_TIME, nanos(b->blk_write_time));
	ADD(C_TEMP_BLK_READ_TIME, nanos(b->temp_blk_read_time));
	ADD(C_TEMP_BLK_WRITE_TIME, nanos(b->temp_blk_write_time));
	ADD(C_WAL_RECORDS, w->wal_records);
	ADD(C_WAL_FPI, w->wal_fpi);
	ADD(C_WAL_BYTES, w->wal_bytes);
	if (j != NULL) {
		ADD(C_JIT_FUNCTIONS, j->created_functions);
		ADD(C_JIT_GENERATION_TIME, nanos(j->generation_counter));
		if (!INSTR_TIME_IS_ZERO(j->inlining_counter)) {
			ADD(C_JIT_INLINING_COUNT, 1);
			ADD(C_JIT_INLINING_TIME, nanos(j->inlining_counter));
		}
		if (!INSTR_TIME_IS_ZERO(j->optimization_counter)) {
			ADD(C_JIT_OPTIMIZATION_COUNT, 1);
			ADD(C_JIT_OPTIMIZATION_TIME, nanos(j->optimization_counter));
		}
		if (!INSTR_TIME_IS_ZERO(j->emission_counter)) {
			ADD(C_JIT_EMISSION_COUNT, 1);
			ADD(C_JIT_EMISSION_TIME, nanos(j->emission_counter));
		}
	}
	if (kind == KIND_EXEC) {
		extremes(e, G_MIN_EXEC, G_MAX_EXEC, t);
		/* The execution's time into its bucket: one rseq section on
		 * this CPU's copy (no lock, no atomic); its count is calls. */
		pcpu_histogram_record(e->h, t);
		pcpu_counter_inc(e->c[C_CALLS]);
	} else {
		extremes(e, G_MIN_PLAN, G_MAX_PLAN, t);
		pcpu_counter_inc(e->c[C_PLANS]);
	}
	pss_section_leave();
}

/* ---- hooks ------------------------------------------------------------------------------ */

/* A statement with constants met for the first time in this backend: its
 * entry made now, with the text normalized ($1...), as pg_stat_statements
 * makes its entry then. A statement without constants is recorded with
 * its text at its first count. */
static void pss_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	pss_entry *e;
	pss_key key;
	char *text;
	int len;

	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
	if (!pss_enabled(nested_level) || jstate == NULL || jstate->clocations_count <= 0 ||
	    query->queryId == UINT64CONST(0) || pstate->p_sourcetext == NULL)
		return;
	memset(&key, 0, sizeof(key));
	key.userid = GetUserId();
	key.dbid = MyDatabaseId;
	key.queryid = query->queryId;
	key.toplevel = nested_level == 0;
	pss_section_enter(); /* as store()'s */
	e = pss_entry_find(&key);
	if (e != NULL) {
		/* Known: only a text to record anew (after a reset) is made. */
		pss_entry_check(e);
		if (!e->want_text) {
			pss_section_leave();
			return;
		}
	}
	text = pss_normalize(pstate->p_sourcetext, query->stmt_location, query->stmt_len, jstate,
			     &len);
	if (e != NULL)
		pss_entry_text(e, text, len);
	else if ((e = pss_entry_get(&key, text, len, PSS_COUNT)) != NULL)
		pss_entry_check(e); /* into the table, as pg_stat_statements' entry */
	pss_section_leave();
	pfree(text);
}

static PlannedStmt *plan(Query *parse, const char *query_string, int cursorOptions,
			 ParamListInfo boundParams)
{
	return prev_planner ? prev_planner(parse, query_string, cursorOptions, boundParams)
			    : standard_planner(parse, query_string, cursorOptions, boundParams);
}

/* Planning, with pcpu_stat_statements.track_planning: its time, buffers
 * and WAL, counted as pg_stat_statements counts them (a statement planned
 * while another is planned -- a function inlined, say -- at the nested
 * level). */
static PlannedStmt *pss_planner(Query *parse, const char *query_string, int cursorOptions,
				ParamListInfo boundParams)
{
	PlannedStmt *result;
	instr_time start, duration;
	BufferUsage bufusage, bufstart;
	WalUsage walusage, walstart;

	if (!pss_enabled(plan_nested_level + nested_level) || !pss_track_planning ||
	    query_string == NULL || parse->queryId == UINT64CONST(0))
		return plan(parse, query_string, cursorOptions, boundParams);
	bufstart = pgBufferUsage;
	walstart = pgWalUsage;
	INSTR_TIME_SET_CURRENT(start);
	plan_nested_level++;
	PG_TRY();
	{
		result = plan(parse, query_string, cursorOptions, boundParams);
	}
	PG_FINALLY();
	{
		plan_nested_level--;
	}
	PG_END_TRY();
	INSTR_TIME_SET_CURRENT(duration);
	INSTR_TIME_SUBTRACT(duration, start);
	memset(&bufusage, 0, sizeof(bufusage));
	BufferUsageAccumDiff(&bufusage, &pgBufferUsage, &bufstart);
	memset(&walusage, 0, sizeof(walusage));
	WalUsageAccumDiff(&walusage, &pgWalUsage, &walstart);
	store(KIND_PLAN, query_string, parse->queryId, parse->stmt_location, parse->stmt_len,
	      INSTR_TIME_GET_DOUBLE(duration), 0, &bufusage, &walusage, NULL);
	return result;
}

static void pss_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	/* The statement's totals (time, buffers, WAL), as
	 * pg_stat_statements and auto_explain ask for them; shared with them
	 * when they ask too. */
	if (pss_enabled(nested_level) && queryDesc->plannedstmt->queryId != UINT64CONST(0) &&
	    !inner_of_utility(queryDesc->plannedstmt->queryId) && queryDesc->totaltime == NULL) {
		MemoryContext old = MemoryContextSwitchTo(queryDesc->estate->es_query_cxt);

		queryDesc->totaltime = InstrAlloc(1, INSTRUMENT_ALL, false);
		MemoryContextSwitchTo(old);
	}
}

static void pss_ExecutorRun(QueryDesc *queryDesc, ScanDirection direction, uint64 count,
			    bool execute_once)
{
	nested_level++;
	PG_TRY();
	{
		if (prev_ExecutorRun)
			prev_ExecutorRun(queryDesc, direction, count, execute_once);
		else
			standard_ExecutorRun(queryDesc, direction, count, execute_once);
	}
	PG_FINALLY();
	{
		nested_level--;
	}
	PG_END_TRY();
}

static void pss_ExecutorFinish(QueryDesc *queryDesc)
{
	nested_level++;
	PG_TRY();
	{
		if (prev_ExecutorFinish)
			prev_ExecutorFinish(queryDesc);
		else
			standard_ExecutorFinish(queryDesc);
	}
	PG_FINALLY();
	{
		nested_level--;
	}
	PG_END_TRY();
}

static void pss_ExecutorEnd(QueryDesc *queryDesc)
{
	uint64 queryId = queryDesc->plannedstmt->queryId;

	if (queryId != UINT64CONST(0) && queryDesc->totaltime && pss_enabled(nested_level) &&
	    !inner_of_utility(queryId)) {
		EState *es = queryDesc->estate;

		/* Ends the totals' loop (a no-op where another module did). */
		InstrEndLoop(queryDesc->totaltime);
		store(KIND_EXEC, queryDesc->sourceText, queryId, queryDesc->plannedstmt->stmt_location,
		      queryDesc->plannedstmt->stmt_len, queryDesc->totaltime->total,
		      es->es_processed, &queryDesc->totaltime->bufusage,
		      &queryDesc->totaltime->walusage, es->es_jit ? &es->es_jit->instr : NULL);
	}
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/* EXECUTE, PREPARE and DEALLOCATE are counted as the executor runs them
 * (EXECUTE) or not at all, as pg_stat_statements does. */
#define HANDLED_UTILITY(n) \
	(!IsA((n), ExecuteStmt) && !IsA((n), PrepareStmt) && !IsA((n), DeallocateStmt))

static void pss_ProcessUtility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
			       ProcessUtilityContext context, ParamListInfo params,
			       QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node *parsetree = pstmt->utilityStmt;
	uint64 queryId = pstmt->queryId;
	int location = pstmt->stmt_location, len = pstmt->stmt_len;
	bool enabled = pss_track_utility && pss_enabled(nested_level);

	/*
	 * A utility statement that runs an optimizable one (CREATE TABLE AS,
	 * DECLARE, EXPLAIN ANALYZE) is counted here, once: its inner
	 * executor run is not (inner_of_utility()). pg_stat_statements gets
	 * the same by setting pstmt->queryId to 0 before it calls the next
	 * hook; this module leaves it as it is, so that a module called
	 * after it -- pg_stat_statements listed before it in
	 * shared_preload_libraries -- still sees the statement's queryId and
	 * counts it too.
	 */
	if (enabled && HANDLED_UTILITY(parsetree)) {
		instr_time start, duration;
		BufferUsage bufusage, bufstart = pgBufferUsage;
		WalUsage walusage, walstart = pgWalUsage;
		uint64 rows;

		uint64 saved_queryid = util_queryid;
		int saved_level = util_level;

		INSTR_TIME_SET_CURRENT(start);
		util_queryid = queryId;
		util_level = nested_level;
		nested_level++;
		PG_TRY();
		{
			if (prev_ProcessUtility)
				prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
						    queryEnv, dest, qc);
			else
				standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
		}
		PG_FINALLY();
		{
			nested_level--;
			util_queryid = saved_queryid;
			util_level = saved_level;
		}
		PG_END_TRY();
		INSTR_TIME_SET_CURRENT(duration);
		INSTR_TIME_SUBTRACT(duration, start);
		/* Rows: those of the commands whose completion tag carries them. */
		rows = (qc && (qc->commandTag == CMDTAG_COPY || qc->commandTag == CMDTAG_FETCH ||
			       qc->commandTag == CMDTAG_SELECT ||
			       qc->commandTag == CMDTAG_REFRESH_MATERIALIZED_VIEW))
			       ? qc->nprocessed
			       : 0;
		memset(&bufusage, 0, sizeof(bufusage));
		BufferUsageAccumDiff(&bufusage, &pgBufferUsage, &bufstart);
		memset(&walusage, 0, sizeof(walusage));
		WalUsageAccumDiff(&walusage, &pgWalUsage, &walstart);
		store(KIND_EXEC, queryString, queryId, location, len, INSTR_TIME_GET_DOUBLE(duration),
		      rows,
		      &bufusage, &walusage, NULL);
	} else if (prev_ProcessUtility) {
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv,
				    dest, qc);
	} else {
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv,
					dest, qc);
	}
}

/* ---- loading ------------------------------------------------------------------------------ */

void _PG_init(void)
{
	int max_keys;

	/* The tree must be made before the postmaster forks: only as a
	 * preloaded library. Loaded otherwise (LOAD, CREATE EXTENSION), the
	 * functions say so. */
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomIntVariable(PSS_NAME ".max", "Sets the most statements tracked.",
				"Past it, the least-used entries are evicted by a background "
				"worker, never by a running query.",
				&pss_max, 5000, 100, INT_MAX / (SERIES_PER_ENTRY + 1) - 64,
				PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable(PSS_NAME ".max_keys",
				"Sets the most statements' series the server holds at once.",
				"The table's entries, the evicted ones waiting until no backend "
				"can still count into them, and the free ones, which new "
				"statements take (pss_reuse.c); a new statement meeting none left "
				"(the evictor behind) is not counted. 0: 4 times "
				"pcpu_stat_statements.max.",
				&pss_max_keys, 0, 0, INT_MAX / (SERIES_PER_ENTRY + 1) - 64,
				PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable(PSS_NAME ".track", "Selects which statements are tracked.", NULL,
				 &pss_track, TRACK_TOP, track_options, PGC_SUSET, 0, NULL, NULL,
				 NULL);
	DefineCustomBoolVariable(PSS_NAME ".track_utility",
				 "Selects whether utility commands are tracked.", NULL,
				 &pss_track_utility, true, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable(PSS_NAME ".track_planning",
				 "Selects whether planning duration is tracked.", NULL,
				 &pss_track_planning, false, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable(PSS_NAME ".group",
				   "Sets a group whose members may read the statistics from outside "
				   "(pcpustat).",
				   "The segment file is then 0640 with this group (the server's user "
				   "must be a member); empty: the server's user alone.",
				   &pss_group, "", PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable(PSS_NAME ".save",
				 "Save pcpu_stat_statements statistics across server shutdowns.", NULL,
				 &pss_save, true, PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable(PSS_NAME ".export_top",
				"Sets how many statements pcpustat reads by default.",
				"The top statements by total time, copied every export_interval "
				"seconds into the segment postgresql.<port> of pcpustat's default "
				"folder; the whole tree lies in its folder postgresql-all. "
				"0: every statement, the tree itself in the default folder.",
				&pss_export_top, 100, 0, INT_MAX, PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable(PSS_NAME ".export_interval",
				"Sets the seconds between two copies of the top statements.", NULL,
				&pss_export_interval, 10, 1, 3600, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL,
				NULL);
	DefineCustomIntVariable(PSS_NAME ".debug_section_sleep",
				"Sleeps in each count's section (tests only).",
				"Milliseconds a count waits (wait event Extension) while it holds "
				"its entry: a test's way to stop a backend there. 0: off.",
				&pss_debug_section_sleep, 0, 0, 60000, PGC_SUSET,
				GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_UNIT_MS, NULL, NULL, NULL);
	MarkGUCPrefixReserved(PSS_NAME);

	/* The core computes query identifiers (compute_query_id = auto). */
	EnableQueryId();

	max_keys = pss_max_keys == 0
			   ? (int)Min(4 * (int64)pss_max, INT_MAX / (SERIES_PER_ENTRY + 1) - 64)
			   : Max(pss_max_keys, pss_max);
	if (!pss_tree_make(pss_max, max_keys, pss_group, pss_export_tree_dir(pss_group))) {
		ereport(WARNING, (errmsg(PSS_NAME ": statements are not counted: %s", pss_tree.why)));
		return;
	}
	/* The sets' shared memory and the counting sections (pss_reuse.c). */
	pss_reuse_init(max_keys);
	/* The statistics of the last shutdown, then theirs saved at this
	 * server's: its callback runs before the tree's (on_proc_exit's
	 * callbacks run last registered first). */
	if (pss_save)
		pss_save_load();
	on_proc_exit(pss_save_at_exit, (Datum)0);
	pss_evict_register();
	ereport(LOG, (errmsg(PSS_NAME ": statistics in \"%s\"", pss_tree.path)));

	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = pss_ExecutorStart;
	prev_ExecutorRun = ExecutorRun_hook;
	ExecutorRun_hook = pss_ExecutorRun;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = pss_ExecutorFinish;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = pss_ExecutorEnd;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = pss_ProcessUtility;
	prev_planner = planner_hook;
	planner_hook = pss_planner;
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = pss_post_parse_analyze;
}

