/* SPDX-License-Identifier: MIT */
/*
 * pcpu_stat_statements' view and reset: the tree's segment read as any
 * reader reads it (pcpu_reader_snapshot() of its file: every backend's
 * series, summed over the CPUs), its families joined by key into
 * pg_stat_statements 1.10's rows, and the execution times' percentiles
 * from each entry's histogram; a reset by offset (pcpu_counter_zero()),
 * pcpu's way, which never stops a counting backend.
 */
#include "pcpu_stat_statements.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(pcpu_stat_statements_1_10);
PG_FUNCTION_INFO_V1(pcpu_stat_statements_reset_1_7);
PG_FUNCTION_INFO_V1(pcpu_stat_statements_info);

/* ---- reading: the view ----------------------------------------------------------------- */

static void check_loaded(void)
{
	if (pss_tree.seg == NULL)
		ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg(PSS_NAME " must be loaded via shared_preload_libraries"),
			 pss_tree.why[0] ? errdetail("%s", pss_tree.why) : 0));
}

typedef pss_row row_t;

static bool parse_key(const struct pcpu_snapshot_family *f, const struct pcpu_snapshot_series *s,
		      pss_key *k)
{
	char *end;

	if (f->nlabels < PSS_KEY_LABELS)
		return false;
	memset(k, 0, sizeof(*k));
	errno = 0;
	k->userid = (Oid)strtoul(s->label_values[0], &end, 10);
	if (*end)
		return false;
	k->dbid = (Oid)strtoul(s->label_values[1], &end, 10);
	if (*end)
		return false;
	k->queryid = (uint64)strtoll(s->label_values[2], &end, 10);
	if (*end || errno)
		return false;
	k->toplevel = strcmp(s->label_values[3], "true") == 0;
	return true;
}

/* The snapshot pss_read_rows() took, freed by its caller's PG_FINALLY
 * (pss_snapshot_done()), errors included. */
static struct pcpu_reader_snapshot *cur_snap;

void pss_snapshot_done(void)
{
	pcpu_reader_snapshot_free(cur_snap);
	cur_snap = NULL;
}

HTAB *pss_read_rows(void)
{
	struct pcpu_reader_snapshot **snap = &cur_snap;
	pcpu_reader_t *r;
	HASHCTL ctl;
	HTAB *rows;
	size_t i, j;
	int n;

	r = pcpu_reader_open(pss_tree.path, NULL);
	if (r == NULL || pcpu_reader_snapshot(r, 0, snap) < 0) {
		char why[512];

		strlcpy(why, pcpu_reader_error(), sizeof(why));
		pcpu_reader_close(r);
		ereport(ERROR, (errmsg(PSS_NAME ": cannot read \"%s\": %s", pss_tree.path, why)));
	}
	pcpu_reader_close(r);

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(pss_key);
	ctl.entrysize = sizeof(row_t);
	ctl.hcxt = CurrentMemoryContext;
	rows = hash_create(PSS_NAME " rows", 1024, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (i = 0; i < (*snap)->snapshot.nfamilies; i++) {
		const struct pcpu_snapshot_family *f = &(*snap)->snapshot.families[i];
		int counter = -1, gauge = -1, fraction = -1;
		bool text = strcmp(f->name, QUERY_INFO) == 0;
		bool resets = strcmp(f->name, ENTRY_RESETS) == 0;
		bool live = strcmp(f->name, ENTRY_LIVE) == 0;
		bool hist = strcmp(f->name, EXEC_HIST) == 0 && f->type == PCPU_METRIC_HISTOGRAM &&
			    f->nbuckets == pss_tree.hist_nbuckets;

		for (n = 0; n < NCOUNTERS && counter < 0; n++)
			if (strcmp(f->name, pss_counters[n].name) == 0)
				counter = n;
		for (n = 0; n < NGAUGES && gauge < 0; n++)
			if (strcmp(f->name, pss_gauges[n].name) == 0)
				gauge = n;
		for (n = 0; n < NFRACTIONS && fraction < 0; n++)
			if (strcmp(f->name, pss_fractions[n].name) == 0)
				fraction = n;
		if (counter < 0 && gauge < 0 && fraction < 0 && !text && !resets && !live && !hist)
			continue;
		for (j = 0; j < f->nseries; j++) {
			const struct pcpu_snapshot_series *s = &f->series[j];
			pss_key k;
			row_t *row;
			bool found;

			if (!parse_key(f, s, &k))
				continue;
			row = (row_t *)hash_search(rows, &k, HASH_ENTER, &found);
			if (!found) {
				memset((char *)row + sizeof(pss_key), 0, sizeof(*row) - sizeof(pss_key));
			}
			if (counter >= 0) {
				row->c[counter] = s->value.counter;
				if (counter == C_CALLS)
					row->whole = true;
			} else if (gauge >= 0) {
				row->g[gauge] = s->value.gauge;
			} else if (fraction >= 0) {
				row->f[fraction] = pcpu_snapshot_value(f, s);
			} else if (resets) {
				row->epoch = (int64)s->value.counter;
			} else if (live) {
				row->live = s->value.gauge != 0;
			} else if (hist) {
				row->hist_family = f;
				row->hist = s->value.histogram.counts;
				row->hist_sum = s->value.histogram.sum;
			} else if (f->nlabels == PSS_KEY_LABELS + 2) {
				/* The text of the latest epoch (the first of
				 * it, where two were recorded at once). */
				int64 epoch = strtoll(s->label_values[PSS_KEY_LABELS], NULL, 10);

				if (row->query == NULL || epoch > row->query_epoch) {
					row->query = s->label_values[PSS_KEY_LABELS + 1];
					row->query_epoch = epoch;
				}
			}
		}
	}
	return rows;
}

static double ms(uint64 ns)
{
	return (double)(int64)ns / 1e6;
}

/* total, min, max, mean and stddev of n plannings or executions, in ms,
 * from values[i]: the population's standard deviation, as
 * pg_stat_statements gives it (0 below 2), from the sum of squares. The
 * sums are read one after the other, not at one instant: a variance that
 * rounds below 0 is 0. */
static int times(Datum *values, int i, uint64 n, uint64 total_ns, int64 min_ns, int64 max_ns,
		 double squares)
{
	double total = ms(total_ns), mean = n ? total / (double)n : 0.0, var;

	values[i++] = Float8GetDatumFast(total);
	values[i++] = Float8GetDatumFast(n ? ms(min_ns) : 0.0);
	values[i++] = Float8GetDatumFast(n ? ms(max_ns) : 0.0);
	values[i++] = Float8GetDatumFast(mean);
	var = n > 1 ? squares / (double)n - mean * mean : 0.0;
	values[i++] = Float8GetDatumFast(var > 0 ? sqrt(var) : 0.0);
	return i;
}

/* The view's percentile columns, after pg_stat_statements 1.10's:
 * exec_time_p50, _p90, _p99. */
static const double percentiles[] = {0.5, 0.9, 0.99};

Datum pcpu_stat_statements_1_10(PG_FUNCTION_ARGS)
{
	bool showtext = PG_GETARG_BOOL(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	Oid userid = GetUserId();
	bool all_stats;

	check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != PSS_COLS)
		ereport(ERROR, (errmsg(PSS_NAME ": the function returns %d columns, %d expected",
				       rsinfo->setDesc->natts, PSS_COLS)));
	/* As pg_stat_statements: others' statements' texts and queryids only
	 * to superusers and members of pg_read_all_stats. */
	all_stats = has_privs_of_role(userid, ROLE_PG_READ_ALL_STATS);

	PG_TRY();
	{
		HTAB *rows = pss_read_rows();
		HASH_SEQ_STATUS it;
		row_t *row;

		hash_seq_init(&it, rows);
		while ((row = (row_t *)hash_seq_search(&it)) != NULL) {
			Datum values[PSS_COLS];
			bool nulls[PSS_COLS];
			int i = 0, k;
			uint64 calls = row->c[C_CALLS], plans = row->c[C_PLANS];
			char wal_bytes[32];

			/* An entry being made, out of the table (evicted, or
			 * reset: pg_stat_statements removes it), or not run since
			 * it came in. */
			if (!row->whole || !row->live || (calls == 0 && plans == 0))
				continue;
			memset(values, 0, sizeof(values));
			memset(nulls, 0, sizeof(nulls));
			values[i++] = ObjectIdGetDatum(row->key.userid);
			values[i++] = ObjectIdGetDatum(row->key.dbid);
			values[i++] = BoolGetDatum(row->key.toplevel);
			if (all_stats || row->key.userid == userid) {
				values[i++] = Int64GetDatumFast((int64)row->key.queryid);
				if (showtext && row->query)
					values[i++] = CStringGetTextDatum(row->query);
				else
					nulls[i++] = true;
			} else {
				nulls[i++] = true;
				if (showtext)
					values[i++] = CStringGetTextDatum("<insufficient privilege>");
				else
					nulls[i++] = true;
			}
			values[i++] = Int64GetDatumFast((int64)plans);
			i = times(values, i, plans, row->c[C_PLAN_TIME], row->g[G_MIN_PLAN],
				  row->g[G_MAX_PLAN], row->f[F_PLAN_SQUARES]);
			values[i++] = Int64GetDatumFast((int64)calls);
			i = times(values, i, calls, row->c[C_EXEC_TIME], row->g[G_MIN_EXEC],
				  row->g[G_MAX_EXEC], row->f[F_EXEC_SQUARES]);
			values[i++] = Int64GetDatumFast((int64)row->c[C_ROWS]);
			for (k = C_SHARED_HIT; k <= C_TEMP_WRITTEN; k++)
				values[i++] = Int64GetDatumFast((int64)row->c[k]);
			for (k = C_BLK_READ_TIME; k <= C_TEMP_BLK_WRITE_TIME; k++)
				values[i++] = Float8GetDatumFast(ms(row->c[k]));
			values[i++] = Int64GetDatumFast((int64)row->c[C_WAL_RECORDS]);
			values[i++] = Int64GetDatumFast((int64)row->c[C_WAL_FPI]);
			snprintf(wal_bytes, sizeof(wal_bytes), UINT64_FORMAT, row->c[C_WAL_BYTES]);
			values[i++] = DirectFunctionCall3(numeric_in, CStringGetDatum(wal_bytes),
							  ObjectIdGetDatum(0), Int32GetDatum(-1));
			values[i++] = Int64GetDatumFast((int64)row->c[C_JIT_FUNCTIONS]);
			values[i++] = Float8GetDatumFast(ms(row->c[C_JIT_GENERATION_TIME]));
			values[i++] = Int64GetDatumFast((int64)row->c[C_JIT_INLINING_COUNT]);
			values[i++] = Float8GetDatumFast(ms(row->c[C_JIT_INLINING_TIME]));
			values[i++] = Int64GetDatumFast((int64)row->c[C_JIT_OPTIMIZATION_COUNT]);
			values[i++] = Float8GetDatumFast(ms(row->c[C_JIT_OPTIMIZATION_TIME]));
			values[i++] = Int64GetDatumFast((int64)row->c[C_JIT_EMISSION_COUNT]);
			values[i++] = Float8GetDatumFast(ms(row->c[C_JIT_EMISSION_TIME]));
			/* The percentiles of the execution times, from the
			 * entry's histogram (its count is calls): NULL without
			 * an execution. */
			for (k = 0; k < (int)lengthof(percentiles); k++) {
				double p = row->hist ? pcpu_snapshot_quantile(row->hist_family, row->hist,
									      percentiles[k])
						     : NAN;

				if (isnan(p))
					nulls[i++] = true;
				else
					values[i++] = Float8GetDatumFast(p * 1e3);
			}
			Assert(i == PSS_COLS);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_FINALLY();
	{
		pss_snapshot_done();
	}
	PG_END_TRY();
	return (Datum)0;
}

/* ---- reset: by offset, pcpu's way ------------------------------------------------------- */

Datum pcpu_stat_statements_reset_1_7(PG_FUNCTION_ARGS)
{
	Oid userid = PG_GETARG_OID(0), dbid = PG_GETARG_OID(1);
	uint64 queryid = (uint64)PG_GETARG_INT64(2);

	check_loaded();
	PG_TRY();
	{
		HTAB *rows = pss_read_rows();
		HASH_SEQ_STATUS it;
		row_t *row;
		long listed = 0, reset = 0;

		hash_seq_init(&it, rows);
		while ((row = (row_t *)hash_seq_search(&it)) != NULL) {
			pss_entry *e;

			/* Every entry in the table, listed or not (made at parse
			 * analysis and not run yet): pg_stat_statements removes
			 * those too. */
			if (!row->whole || !row->live)
				continue;
			listed++;
			if ((userid != 0 && row->key.userid != userid) ||
			    (dbid != 0 && row->key.dbid != dbid) ||
			    (queryid != 0 && row->key.queryid != queryid))
				continue;
			/* Inside a counting section: the evictor reuses no
			 * set while this one may write it (pss_reuse.c). */
			pss_section_enter();
			e = pss_entry_get(&row->key, NULL, 0, PSS_ADOPT);
			if (e != NULL) {
				/* Out of the table, as pg_stat_statements
				 * removes it: back in at its next count. */
				pss_entry_out(e, true);
				reset++;
			}
			pss_section_leave();
		}
		/* Every entry reset: stats_reset and dealloc, as
		 * pg_stat_statements sets them when it removed every entry. */
		if (reset == listed) {
			pss_set_stats_reset(GetCurrentTimestamp());
			__atomic_store_n(pss_tree.dealloc, 0, __ATOMIC_RELAXED);
		}
		/* Every backend reloads its copies of the extremes. */
		__atomic_add_fetch(pss_tree.resets, 1, __ATOMIC_RELEASE);
	}
	PG_FINALLY();
	{
		pss_snapshot_done();
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

/* ---- pcpu_stat_statements_info ----------------------------------------------------------- */

/* dealloc: the eviction passes that made room (pss_evict.c), as
 * pg_stat_statements counts its own; stats_reset: when every entry was
 * last reset (or the server started). */
Datum pcpu_stat_statements_info(PG_FUNCTION_ARGS)
{
	TupleDesc desc;
	Datum values[2];
	bool nulls[2] = {false, false};

	check_loaded();
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int64GetDatum(__atomic_load_n(pss_tree.dealloc, __ATOMIC_RELAXED));
	values[1] = TimestampTzGetDatum(pss_stats_reset());
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
