/* SPDX-License-Identifier: MIT */
/*
 * pcpu_stat_statements.save: the statistics across a server's restart. At
 * the postmaster's normal exit (its children gone), every entry of the
 * tree -- read from its segment as the view reads it -- is written to
 * pg_stat/pcpu_stat_statements.stat (a temporary name, then renamed); at
 * the next start the postmaster, before it forks, makes each entry again
 * in the new tree with those values, and removes the file. A crash keeps
 * the counts without it: the tree lives in the postmaster, which a crash
 * restart keeps.
 *
 * The file is text, one entry a line -- userid, dbid, queryid, toplevel,
 * the counters, the extremes (ns), the sums of squares, the execution
 * times' histogram (its sum in ns, then its buckets' counts), the entry's
 * resets, its text's epoch and its text's length -- then the text's bytes
 * and a newline; the first line names the format and the module's
 * statistics (the histogram's buckets too), so a file of another layout is
 * refused (logged, removed) rather than read into the wrong counters.
 */
#include "pcpu_stat_statements.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "utils/hsearch.h"

#define SAVE_FILE PGSTAT_STAT_PERMANENT_DIRECTORY "/" PSS_NAME ".stat"
#define SAVE_HEADER "pcpu_stat_statements 2 %d %d %d %d\n"

bool pss_save = true;

void pss_save_at_exit(int code, Datum arg)
{
	char tmp[MAXPGPATH];
	FILE *f = NULL;
	bool ok = false;

	(void)arg;
	/* After a crash the tree is the postmaster's still: nothing to save
	 * then (and no time for it). */
	if (code != 0 || !pss_save || pss_tree.seg == NULL)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", SAVE_FILE);
	PG_TRY();
	{
		HTAB *rows = pss_read_rows();
		HASH_SEQ_STATUS it;
		pss_row *r;
		int i;

		f = AllocateFile(tmp, PG_BINARY_W);
		if (f == NULL)
			ereport(LOG, (errcode_for_file_access(),
				      errmsg(PSS_NAME ": could not write \"%s\": %m", tmp)));
		else {
			fprintf(f, SAVE_HEADER, NCOUNTERS, NGAUGES, NFRACTIONS,
				(int)pss_tree.hist_nbuckets);
			hash_seq_init(&it, rows);
			while ((r = (pss_row *)hash_seq_search(&it)) != NULL) {
				size_t len = r->query ? strlen(r->query) : 0;

				if (!r->whole || !r->live)
					continue;
				fprintf(f, "%u %u " INT64_FORMAT " %d", r->key.userid, r->key.dbid,
					(int64)r->key.queryid, r->key.toplevel ? 1 : 0);
				for (i = 0; i < NCOUNTERS; i++)
					fprintf(f, " " UINT64_FORMAT, r->c[i]);
				for (i = 0; i < NGAUGES; i++)
					fprintf(f, " " INT64_FORMAT, r->g[i]);
				for (i = 0; i < NFRACTIONS; i++)
					fprintf(f, " %.17g", r->f[i]);
				fprintf(f, " " INT64_FORMAT, r->hist ? r->hist_sum : 0);
				for (i = 0; i < (int)pss_tree.hist_nbuckets; i++)
					fprintf(f, " " UINT64_FORMAT, r->hist ? r->hist[i] : 0);
				fprintf(f, " " INT64_FORMAT " " INT64_FORMAT " %zu\n", r->epoch,
					r->query_epoch, len);
				if (len)
					fwrite(r->query, 1, len, f);
				fputc('\n', f);
			}
			ok = !ferror(f);
		}
	}
	PG_CATCH();
	{
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
	pss_snapshot_done();
	if (f != NULL && FreeFile(f) != 0)
		ok = false;
	if (ok && rename(tmp, SAVE_FILE) == 0)
		return;
	if (f != NULL)
		ereport(LOG, (errmsg(PSS_NAME ": could not save the statistics in \"%s\"", SAVE_FILE)));
	unlink(tmp);
}

/* One entry of the file into the tree: its series made (as a backend
 * makes them), its values added to the new tree's zeros. */
static bool load_entry(FILE *f)
{
	pss_key k;
	uint64 c[NCOUNTERS];
	int64 g[NGAUGES], epoch, query_epoch, qid;
	double sq[NFRACTIONS];
	uint64 hist[PSS_HIST_BUCKETS_MAX];
	int64 hist_sum;
	unsigned userid, dbid;
	int toplevel, i;
	size_t len;
	char *text;
	pss_entry *e;

	if (fscanf(f, "%u %u " INT64_FORMAT " %d", &userid, &dbid, &qid, &toplevel) != 4)
		return false;
	for (i = 0; i < NCOUNTERS; i++)
		if (fscanf(f, UINT64_FORMAT, &c[i]) != 1)
			return false;
	for (i = 0; i < NGAUGES; i++)
		if (fscanf(f, INT64_FORMAT, &g[i]) != 1)
			return false;
	for (i = 0; i < NFRACTIONS; i++)
		if (fscanf(f, "%lg", &sq[i]) != 1)
			return false;
	if (fscanf(f, INT64_FORMAT, &hist_sum) != 1)
		return false;
	for (i = 0; i < (int)pss_tree.hist_nbuckets; i++)
		if (fscanf(f, UINT64_FORMAT, &hist[i]) != 1)
			return false;
	if (fscanf(f, INT64_FORMAT " " INT64_FORMAT " %zu", &epoch, &query_epoch, &len) != 3 ||
	    fgetc(f) != '\n' || len >= PCPU_STATS_LABEL_VALUE_MAX)
		return false;
	text = palloc(len + 1);
	if (fread(text, 1, len, f) != len || fgetc(f) != '\n') {
		pfree(text);
		return false;
	}
	text[len] = '\0';
	memset(&k, 0, sizeof(k));
	k.userid = userid;
	k.dbid = dbid;
	k.queryid = (uint64)qid;
	k.toplevel = toplevel != 0;
	e = pss_entry_get(&k, NULL, 0, PSS_ADOPT);
	if (e != NULL) {
		pss_entry_in(e);
		for (i = 0; i < NCOUNTERS; i++)
			if (c[i])
				pcpu_counter_add(e->c[i], (int64)c[i]);
		for (i = 0; i < NGAUGES; i++)
			__atomic_store_n(e->minmax[i], g[i], __ATOMIC_RELAXED);
		for (i = 0; i < NFRACTIONS; i++)
			if (sq[i] != 0)
				pcpu_counter_add_double(e->f[i], sq[i]);
		(void)pcpu_histogram_merge(e->h, hist, pss_tree.hist_nbuckets, hist_sum);
		__atomic_store_n(e->epoch, epoch, __ATOMIC_RELAXED);
		if (len) {
			/* The text already in UTF-8, at most the label's size:
			 * as it was. */
			e->text_epoch = query_epoch;
			pss_entry_text(e, text, (int)len);
		}
		e->text_epoch = epoch;
	}
	pfree(text);
	return true;
}

void pss_save_load(void)
{
	FILE *f = AllocateFile(SAVE_FILE, PG_BINARY_R);
	int nc, ng, nf, nb;
	long n = 0;

	if (f == NULL) {
		if (errno != ENOENT)
			ereport(LOG, (errcode_for_file_access(),
				      errmsg(PSS_NAME ": could not read \"%s\": %m", SAVE_FILE)));
		return;
	}
	if (fscanf(f, "pcpu_stat_statements 2 %d %d %d %d", &nc, &ng, &nf, &nb) != 4 ||
	    fgetc(f) != '\n' || nc != NCOUNTERS || ng != NGAUGES || nf != NFRACTIONS ||
	    nb != (int)pss_tree.hist_nbuckets) {
		ereport(LOG, (errmsg(PSS_NAME ": \"%s\" is of another format: not read", SAVE_FILE)));
	} else {
		int ch;

		while ((ch = fgetc(f)) != EOF) {
			ungetc(ch, f);
			if (!load_entry(f)) {
				ereport(LOG, (errmsg(PSS_NAME ": \"%s\" is damaged after %ld entries",
						     SAVE_FILE, n)));
				break;
			}
			n++;
		}
	}
	FreeFile(f);
	unlink(SAVE_FILE);
	if (n)
		ereport(LOG, (errmsg(PSS_NAME ": %ld entries read back from \"%s\"", n, SAVE_FILE)));
}
