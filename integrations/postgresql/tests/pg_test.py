#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pcpu_stat_statements against a real PostgreSQL 15 (Debian's), in a
cluster of its own: initdb in a temporary folder, the server on a private
port and unix socket directory (no TCP), run as the `postgres` user
(PostgreSQL refuses root), stopped at the end, the folder removed.

The server loads pg_stat_statements and pcpu_stat_statements together
(shared_preload_libraries, pcpu_stat_statements last: see the README), so
that every scenario compares the two, per (userid, dbid, queryid,
toplevel), exactly.

Usage: pg_test.py SCENARIO MODULE_DIR
  MODULE_DIR  the build folder holding pcpu_stat_statements.so and its
              control and SQL files (the CMake build's
              integrations/postgresql/)

Scenarios:
  exact   pgbench -i, the built-in script (tpcb-like, 2 clients, 2 jobs)
          and a custom script (1 and 2 clients); then calls and rows, and
          every block and WAL counter, equal to pg_stat_statements' for
          every queryid, and the query texts, normalized alike ($1...); the
          executor's times within rounding; min <= mean <= max;
          pcpu_stat_statements_reset() of one queryid and of all, and
          pcpu_stat_statements_info's stats_reset moved by the latter;
          with pcpu_stat_statements.group, the segment file 0640 with
          that group.
  nested  pg_stat_statements.track = all in both: PL/pgSQL and DO blocks'
          statements, CREATE TABLE AS, EXPLAIN ANALYZE, DECLARE and FETCH,
          PREPARE and EXECUTE, a parallel query, COPY, a data-modifying
          WITH, a JIT-compiled query (its JIT counts compared); pgbench -C (2,300 connections, one per
          transaction) and a reload
          (pg_ctl reload) between runs: every entry equal, the nested ones
          (toplevel false) too.
  regress pg_stat_statements' own regression test (PostgreSQL 15.18's, names
          changed: tests/regress/), this module alone preloaded: its output
          equal to PostgreSQL's expected output but for column widths.
  restart pcpu_stat_statements.save on (as pg_stat_statements.save): a
          pg_ctl restart keeps every entry equal to pg_stat_statements'
          (counters and texts) and the extremes as they were; counting
          goes on after it.
  evict   pcpu_stat_statements.max = 100 and 300 distinct statements: the
          least-used entries evicted by the module's worker, never by a
          query, while a query waits on a lock (scenario_evict's docstring);
          the kept ones exact, dealloc counted, the statements that find
          no free set (max_keys) refused.
  export  pcpu_stat_statements.export_top = 10: pcpustat reads the top 10
          statements by total time by default, every one in the tree's
          folder (scenario_export's docstring).
  histogram
          the execution times' histogram and the view's percentiles
          (scenario_histogram's docstring): known sleeps, its count equal
          to calls for every entry, the percentiles as PromQL computes them
          from pcpustat's buckets, a reset, a restart with .save, the
          export.
  crash   a backend killed with SIGKILL in the middle of a pgbench run:
          the postmaster's crash restart; afterwards the counts kept from
          before (pg_stat_statements loses its own) and counting goes on,
          exactly: the increase of calls and rows over a later run equals
          pg_stat_statements' counts of that run.

Exit status: 0 passed, 1 failed, 77 cannot run here (not root and not the
postgres user, no pgbench), which ctest reports as skipped.
"""

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time

from pg_cluster import (USER, Cluster, backend_pid, fail, other_reader, psql_file, require,
                        wait_for)


COLS = ("calls", "plans", "rows", "shared_blks_hit", "shared_blks_read", "shared_blks_dirtied",
        "shared_blks_written", "local_blks_hit", "local_blks_read", "local_blks_dirtied",
        "local_blks_written", "temp_blks_read", "temp_blks_written", "wal_records", "wal_fpi",
        "wal_bytes",
        "jit_functions", "jit_inlining_count", "jit_optimization_count", "jit_emission_count")


def joint(c):
    """{(userid, dbid, toplevel, queryid): (pgss, ours, query, pgss_query)} --
    pgss and ours {col: int} of the entries that ran (calls > 0), read by one
    statement, so that both views are read at the same point of the
    statement counts (a statement counts itself once it ends)."""
    cols = ", ".join("coalesce(p.%s, 0), coalesce(q.%s, 0)" % (col, col) for col in COLS)
    sql = ("SELECT userid, dbid, toplevel, queryid, %s, "
           "replace(coalesce(p.query, ''), E'\\n', ' '), "
           "replace(coalesce(q.query, p.query, ''), E'\\n', ' ') FROM "
           "(SELECT * FROM pg_stat_statements WHERE calls > 0) p FULL JOIN "
           "(SELECT * FROM pcpu_stat_statements WHERE calls > 0) q "
           "USING (userid, dbid, toplevel, queryid)" % cols)
    out = {}
    for line in c.psql(sql).splitlines():
        f = line.split("|")
        vals = [int(x) for x in f[4:4 + 2 * len(COLS)]]
        pgss = dict(zip(COLS, vals[0::2]))
        ours = dict(zip(COLS, vals[1::2]))
        # The texts hold no '|' here (pgbench's and these reads').
        out[tuple(f[:4])] = (pgss, ours, f[-1], f[-2])
    return out


def compare(c, base=None, skip_readers=False):
    """Every entry of pg_stat_statements equal to pcpu_stat_statements' --
    minus `base` (an earlier joint() read) when given, leaving out the
    statements that read or reset the views with `skip_readers`.
    Returns (entries compared, the read)."""
    read = joint(c)
    bad = []
    n = 0
    for k in sorted(read):
        pgss, ours, query, pgss_query = read[k]
        if skip_readers and "stat_statements" in query:
            continue
        n += 1
        # The texts: both normalized ($1...) alike, where both list the entry.
        if pgss["calls"] and ours["calls"] and not base and query != pgss_query:
            bad.append("%s query: pg_stat_statements %r, pcpu_stat_statements %r"
                       % ("/".join(k), pgss_query, query))
        for col in COLS:
            got = ours[col] - (base[k][1][col] if base and k in base else 0)
            if pgss[col] != got:
                bad.append("%s %s: pg_stat_statements %d, pcpu_stat_statements %d (%s)"
                           % ("/".join(k), col, pgss[col], got, query[:60]))
    if bad:
        fail("%d differences:\n  %s" % (len(bad), "\n  ".join(bad[:40])))
    return n, read


CUSTOM = """\\set aid random(1, 100000)
\\set delta random(-5000, 5000)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT bid, bbalance FROM pgbench_branches;
SELECT tid, tbalance FROM pgbench_tellers WHERE tid <= :aid % 10 + 1;
"""


def workload(c, script):
    c.pgbench(["-n", "-c", "2", "-j", "2", "-t", "300"])  # built-in tpcb-like
    c.pgbench(["-n", "-c", "1", "-t", "200", "-f", script])
    c.pgbench(["-n", "-c", "2", "-j", "2", "-t", "200", "-f", script])


def compare_times(c):
    """The executor's statements' times: both modules read the same
    instrumentation (the statement's totaltime), so total, min, max, mean
    and stddev agree but for pcpu_stat_statements' rounding to whole
    nanoseconds (and the sum of squares' to billionths of a ms^2)."""
    cols = ("total_exec_time", "min_exec_time", "max_exec_time", "mean_exec_time",
            "stddev_exec_time")
    sql = ("SELECT p.calls, %s, replace(p.query, E'\\n', ' ') FROM pg_stat_statements p "
           "JOIN pcpu_stat_statements q USING (userid, dbid, toplevel, queryid) "
           "WHERE p.query ~* '^\\s*(select|update|insert|delete)' AND p.calls > 0"
           % ", ".join("p.%s, q.%s" % (x, x) for x in cols))
    bad, n = [], 0
    for line in c.psql(sql).splitlines():
        f = line.split("|")
        calls = int(f[0])
        n += 1
        for k, col in enumerate(cols):
            want, got = float(f[1 + 2 * k]), float(f[2 + 2 * k])
            tol = 1e-6 * calls if col == "total_exec_time" else 1e-5 + 1e-4 * abs(want)
            if abs(want - got) > tol:
                bad.append("%s %s: pg_stat_statements %.9f, pcpu_stat_statements %.9f"
                           % (f[-1][:50], col, want, got))
    if bad or n == 0:
        fail("times of %d entries differ:\n  %s" % (n, "\n  ".join(bad[:40])))
    return n


def scenario_exact(c, script):
    c.pgbench(["-i", "-s", "1", "-q"])
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    workload(c, script)
    n, _ = compare(c)
    print("times equal: %d entries" % compare_times(c))
    # pcpu_stat_statements.group = postgres: the segment readable by the group.
    path = re.search(r'statistics in "([^"]+)"', c.server_log()).group(1)
    st = os.stat(path)
    if st.st_mode & 0o777 != 0o640 or st.st_gid != c.gid:
        fail("%s: mode %o, group %d (0640 and %d expected)" % (path, st.st_mode & 0o777,
                                                            st.st_gid, c.gid))
    # The export's segment (the top statements) readable by the group too.
    path = re.search(r'statements exported in "([^"]+)"', c.server_log()).group(1)
    st = os.stat(path)
    if st.st_mode & 0o777 != 0o640 or st.st_gid != c.gid:
        fail("%s: mode %o, group %d (0640 and %d expected)" % (path, st.st_mode & 0o777,
                                                            st.st_gid, c.gid))
    other_reader(c)
    # The extremes and the texts.
    # (calls > 0: with track_planning, this very statement is listed,
    # planned and not yet run, as pg_stat_statements lists it.)
    bad = c.psql("SELECT count(*) FROM pcpu_stat_statements WHERE calls > 0 AND NOT "
                 "(min_exec_time > 0 AND min_exec_time <= mean_exec_time AND "
                 "mean_exec_time <= max_exec_time AND total_exec_time > 0 AND query <> '')")
    if bad != "0":
        fail("%s entries with min/mean/max or text wrong:\n%s" % (bad, c.psql(
            "SELECT queryid, calls, min_exec_time, mean_exec_time, max_exec_time, query "
            "FROM pcpu_stat_statements")))
    upd = c.psql("SELECT calls, rows FROM pcpu_stat_statements WHERE query LIKE "
                 "'UPDATE pgbench_accounts SET abalance = abalance + $1%' OR query LIKE "
                 "'UPDATE pgbench_accounts SET abalance = abalance + :delta%'")
    if upd != "1200|1200":
        fail("the custom script's UPDATE, normalized: %r" % upd)
    print("entries compared (counters and texts): %d" % n)
    # Reset of one statement, then of all: both extensions reset alike.
    qid = c.psql("SELECT queryid FROM pcpu_stat_statements WHERE query LIKE "
                 "'SELECT bid, bbalance FROM pgbench_branches%' LIMIT 1")
    if not qid:
        fail("no entry for the custom script's SELECT of pgbench_branches:\n"
             + c.psql("SELECT queryid, calls, query FROM pcpu_stat_statements"))
    # One statement for both resets: both count it, once, after them.
    c.psql("SELECT pg_stat_statements_reset(0, 0, %s), pcpu_stat_statements_reset(0, 0, %s)"
           % (qid, qid))
    if c.psql("SELECT count(*) FROM pcpu_stat_statements WHERE queryid = %s" % qid) != "0":
        fail("queryid %s still listed after its reset" % qid)
    c.pgbench(["-n", "-c", "1", "-t", "50", "-f", script])
    compare(c)
    before = c.psql("SELECT dealloc, stats_reset FROM pcpu_stat_statements_info")
    c.psql("SELECT pg_stat_statements_reset(), pcpu_stat_statements_reset()")
    after = c.psql("SELECT p.dealloc, q.dealloc, q.stats_reset > '%s', "
                   "abs(extract(epoch FROM p.stats_reset - q.stats_reset)) < 1 "
                   "FROM pg_stat_statements_info p, pcpu_stat_statements_info q"
                   % before.split("|")[1])
    if after != "0|0|t|t":
        fail("pcpu_stat_statements_info after a full reset: %r (before: %r)" % (after, before))
    workload(c, script)
    n, _ = compare(c)
    print("after the resets: %d entries equal; pcpu_stat_statements_info: %s" % (n, after))


NESTED_SQL = """
CREATE FUNCTION pcpu_t_balance(a int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE b int;
BEGIN
  SELECT abalance INTO b FROM pgbench_accounts WHERE aid = a;
  RETURN b;
END $$;
SELECT pcpu_t_balance(g) FROM generate_series(1, 50) g;
DO $$ BEGIN PERFORM count(*) FROM pgbench_tellers; END $$;
CREATE TABLE pcpu_t_copy AS SELECT * FROM pgbench_branches;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM pgbench_accounts WHERE aid < 100;
PREPARE p(int) AS SELECT abalance FROM pgbench_accounts WHERE aid = $1;
EXECUTE p(1);
EXECUTE p(2);
DEALLOCATE p;
BEGIN;
DECLARE cur CURSOR FOR SELECT aid FROM pgbench_accounts WHERE aid < 20;
FETCH 5 FROM cur;
FETCH 5 FROM cur;
CLOSE cur;
COMMIT;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT count(*) FROM pgbench_accounts WHERE abalance = 0;
RESET ALL;
SET jit = on;
SET jit_above_cost = 0;
SET jit_inline_above_cost = 0;
SET jit_optimize_above_cost = 0;
SELECT sum(abalance + aid) FROM pgbench_accounts WHERE bid = 1;
SELECT sum(abalance + aid) FROM pgbench_accounts WHERE bid = 1;
RESET ALL;
COPY (SELECT * FROM pgbench_branches) TO STDOUT;
WITH u AS (UPDATE pgbench_tellers SET tbalance = tbalance WHERE tid < 4 RETURNING tid) SELECT count(*) FROM u;
"""

NESTED_SCRIPT = """\\set aid random(1, 100000)
SELECT pcpu_t_balance(:aid);
"""


def scenario_nested(c, script):
    """track = all in both: nested statements (PL/pgSQL, DO), utility
    statements that run a query (CREATE TABLE AS, EXPLAIN ANALYZE,
    DECLARE), prepared statements, a parallel query, COPY; connections
    made per transaction (pgbench -C) and a reload between runs."""
    c.pgbench(["-i", "-s", "1", "-q"])
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    sql = c.root + "/nested.sql"
    with open(sql, "w") as f:
        f.write(NESTED_SQL)
    os.chmod(sql, 0o644)
    r = c.as_user(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", c.sock, "-p", str(c.port),
                   "-d", "postgres", "-f", sql], capture_output=True, text=True)
    if r.returncode != 0:
        fail("psql -f nested.sql: " + r.stdout + r.stderr)
    nested_script = c.root + "/nested_bench.sql"
    with open(nested_script, "w") as f:
        f.write(NESTED_SCRIPT)
    os.chmod(nested_script, 0o644)
    c.pgbench(["-n", "-C", "-c", "2", "-j", "2", "-t", "100"])
    # Thousands of short connections: 2,000 backends, each forked, adopting
    # the tree's entries and exiting after one select.
    c.pgbench(["-n", "-C", "-S", "-c", "2", "-j", "2", "-t", "1000"])
    r = c.as_user([c.bin + "/pg_ctl", "-D", c.data, "reload"], capture_output=True, text=True)
    if r.returncode != 0:
        fail("pg_ctl reload: " + r.stdout + r.stderr)
    c.pgbench(["-n", "-c", "2", "-j", "2", "-t", "200", "-f", nested_script])
    c.pgbench(["-n", "-C", "-c", "1", "-t", "100", "-f", script])
    n, read = compare(c)
    nested = sum(1 for k in read if k[2] == "f")
    if nested == 0:
        fail("no nested (toplevel false) entry: track = all not in effect")
    selects = [v[1]["calls"] for v in read.values()
               if v[2].startswith("SELECT abalance FROM pgbench_accounts WHERE aid =")]
    if not selects or max(selects) < 2000:
        fail("pgbench -C -S: %r calls of its select, not 2,000 or more" % selects)
    jit = sum(1 for v in read.values() if v[1]["jit_functions"])
    if jit == 0:
        fail("no entry with JIT-compiled functions (jit_above_cost = 0)")
    print("track = all, -C (2,300 connections), a reload, the JIT: %d entries equal, %d of them "
          "nested, %d JIT-compiled; the -C select %d calls" % (n, nested, jit, max(selects)))


def widths(text):
    """psql's output without its column widths: the name is two characters
    longer than pg_stat_statements', and psql pads a table's columns to
    their widest value (a header, a query text naming the function), so
    runs of spaces and of dashes are made one; nothing else is changed."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"-{2,}", "--", line)
        out.append(re.sub(r" {2,}", " ", line).rstrip() + "\n")
    return out


def scenario_regress(c, script):
    """pg_stat_statements' own regression test (PostgreSQL 15.18's
    contrib/pg_stat_statements/sql/pg_stat_statements.sql), names changed,
    run as pg_regress runs it -- psql -X -a -q on a fresh database, with
    pg_regress's environment and database settings -- and its output
    compared with PostgreSQL's expected output, names changed, but for the
    columns' widths (widths(); regress/README.md)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sql = os.path.join(here, "regress", "sql", "pcpu_stat_statements.sql")
    expected = os.path.join(here, "regress", "expected", "pcpu_stat_statements.out")
    db = "contrib_regression"
    c.psql("CREATE DATABASE %s TEMPLATE = template0" % db)
    c.psql("ALTER DATABASE %s SET lc_messages TO 'C'; ALTER DATABASE %s SET lc_monetary TO 'C';"
           "ALTER DATABASE %s SET lc_numeric TO 'C'; ALTER DATABASE %s SET lc_time TO 'C';"
           "ALTER DATABASE %s SET bytea_output TO 'hex';"
           "ALTER DATABASE %s SET timezone_abbreviations TO 'Default';" % ((db,) * 6))
    env = dict(os.environ, PGTZ="PST8PDT", PGDATESTYLE="Postgres, MDY", LC_MESSAGES="C",
               PGAPPNAME="pg_regress")
    env.pop("PGCLIENTENCODING", None)
    with open(sql) as f:
        # Notices and errors where they come, as pg_regress's 2>&1.
        r = c.as_user(["psql", "-X", "-a", "-q", "-h", c.sock, "-p", str(c.port), "-d", db],
                      stdin=f, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                      env=env)
    out = r.stdout
    result = os.path.join(os.environ.get("PCPU_PG_REGRESS_OUT", c.root), "pcpu_stat_statements.out")
    with open(result, "w") as f:
        f.write(out)
    with open(expected) as f:
        want = f.read()
    if widths(out) != widths(want):
        import difflib
        diff = "".join(difflib.unified_diff(widths(want), widths(out), "expected", "result"))
        fail("the regression test's output differs from the expected (%s):\n%s"
             % (expected, diff[:12000]))
    print("pg_stat_statements' regression test: %d lines of output as expected"
          % len(out.splitlines()))


def scenario_restart(c, script):
    """pcpu_stat_statements.save (on, as pg_stat_statements.save): a
    pg_ctl restart keeps every entry, both modules alike -- counters,
    texts, extremes -- and counting goes on after it."""
    c.pgbench(["-i", "-s", "1", "-q"])
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    workload(c, script)
    n0, _ = compare(c)
    extremes = ("SELECT queryid, min_exec_time, max_exec_time, stddev_exec_time FROM "
                "pcpu_stat_statements WHERE query ~* '^(select|update|insert) ' "
                "AND query !~ 'stat_statements' ORDER BY queryid")
    before = c.psql(extremes)
    c.stop()
    c.start()
    if " entries read back from " not in c.server_log():
        fail("nothing read back at the start:\n" + c.server_log())
    n1, _ = compare(c)
    after = c.psql(extremes)
    if after != before:
        fail("the extremes changed across the restart:\n%s\n---\n%s" % (before, after))
    workload(c, script)
    n2, _ = compare(c)
    print("pg_ctl restart: %d entries equal before, %d after, %d after more runs"
          % (n0, n1, n2))


HOT = ("SELECT abs(-7)", "SELECT lower('X')", "SELECT upper('x')", "SELECT length('xyz')",
       "SELECT sqrt(4.0)")


def evictor_pid(c):
    """The evictor worker's pid: the postmaster's child whose title names it
    (a worker without a database connection is not in pg_stat_activity)."""
    with open(c.data + "/postmaster.pid") as f:
        postmaster = int(f.readline())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                title = f.read().decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == postmaster and "pcpu_stat_statements evictor" in title:
            return int(pid)
    fail("no evictor worker among the postmaster's children")


def info_dealloc(c):
    return int(c.psql("SELECT dealloc FROM pcpu_stat_statements_info"))


def scenario_evict(c, script):
    """pcpu_stat_statements.max = 100 (max_keys 250): past the bound the
    least-used entries are evicted by the module's background worker, never
    by a query, and a running query never waits for it.

    - 5 hot statements run 30 times each first;
    - the evictor is stopped (SIGSTOP), a session holds an advisory lock and
      a second one runs a query that waits for it (a query in progress);
    - 300 distinct statements from a third session end while the evictor is
      stopped -- no backend waits for an eviction -- and leave the table
      past the bound (more than 100 listed, dealloc 0): the statements that
      find no free set (250) are refused, logged once per backend;
    - the evictor let go (SIGCONT): dealloc moves and the table comes back
      under the bound while the waiting query still waits -- eviction never
      waits for a running query either;
    - the lock released, the waiting query ends and is counted; the hot
      statements run 30 times more: every hot entry, and the waiting query's,
      equal to pg_stat_statements' (max 5000: it evicts nothing), no listed
      entry counts more than pg_stat_statements';
    - every entry's histogram count equals its calls in the tree, the
      evicted ones' 0 (eviction resets the histogram too);
    - pcpu_stat_statements_reset() of every entry sets dealloc back to 0."""
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    if psql_file(c, "hot.sql", [q for q in HOT for _ in range(30)]) is None:
        fail("the hot statements did not end")
    evictor = evictor_pid(c)
    user = ["runuser", "-u", USER, "--"] if os.geteuid() == 0 else []
    psql = user + ["psql", "-X", "-q", "-At", "-h", c.sock, "-p", str(c.port), "-d", "postgres"]
    holder = waiter = None
    os.kill(evictor, signal.SIGSTOP)
    try:
        holder = subprocess.Popen(psql, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, cwd=c.root)
        holder.stdin.write("SELECT pg_advisory_lock(4242);\n")
        holder.stdin.flush()
        wait_for(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted",
                 lambda out: out == "1", "the holder's advisory lock")
        waiter = subprocess.Popen(psql + ["-c", "SELECT pg_advisory_xact_lock(4242), 'waiter'"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  cwd=c.root)
        wait_for(c, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                 "AND query LIKE '%waiter%'", lambda out: out == "1", "the waiting query")
        fill = ["SELECT %s" % "+".join(["1"] * k) for k in range(1, 301)]
        if psql_file(c, "fill.sql", fill) is None:
            fail("300 distinct statements did not end while the evictor was stopped: "
                 "a backend waits for an eviction")
        over = int(c.psql("SELECT count(*) FROM pcpu_stat_statements"))
        if over <= 100 or info_dealloc(c) != 0:
            fail("with the evictor stopped: %d entries listed, dealloc %d (want > 100, 0)"
                 % (over, info_dealloc(c)))
        os.kill(evictor, signal.SIGCONT)
        evictor = None
        wait_for(c, "SELECT dealloc FROM pcpu_stat_statements_info",
                 lambda out: int(out) >= 1, "dealloc after the evictor went on")
        listed = int(wait_for(c, "SELECT count(*) FROM pcpu_stat_statements",
                              lambda out: int(out) <= 100, "the table under the bound"))
        if waiter.poll() is not None:
            fail("the waiting query ended before its lock was released: %s"
                 % waiter.stdout.read())
        holder.stdin.write("SELECT pg_advisory_unlock(4242);\n\\q\n")
        holder.stdin.flush()
        out, _ = waiter.communicate(timeout=60)
        if "waiter" not in out:
            fail("the waiting query: %r" % out)
        holder.communicate(timeout=60)
    finally:
        if evictor is not None:
            os.kill(evictor, signal.SIGCONT)
        for p in (holder, waiter):
            if p is not None and p.poll() is None:
                p.kill()
    dealloc = info_dealloc(c)
    if psql_file(c, "hot.sql", [q for q in HOT for _ in range(30)]) is None:
        fail("the hot statements did not end")
    read = joint(c)
    kept, more = [], []
    for k, (p, q, query, _) in read.items():
        if q["calls"] and any(q[col] > p[col] for col in ("calls", "rows")):
            more.append("%s: %r pg_stat_statements %d calls, ours %d"
                        % (k[3], query[:40], p["calls"], q["calls"]))
        # The texts normalized: "SELECT abs($1)", "... xact_lock($1), $2".
        if any(query.startswith(h.split("(")[0] + "(") for h in HOT) \
                or "pg_advisory_xact_lock" in query:
            kept.append(k)
            if (p["calls"], p["rows"]) != (q["calls"], q["rows"]):
                more.append("%s: %r pg_stat_statements %d calls %d rows, ours %d, %d"
                            % (k[3], query[:40], p["calls"], p["rows"], q["calls"], q["rows"]))
    if len(kept) != len(HOT) + 1 or more:
        fail("%d kept entries found (want %d); differences:\n  %s"
             % (len(kept), len(HOT) + 1, "\n  ".join(more[:20])))
    # Eviction resets the histograms too: in the tree, every entry's count
    # equals its calls, the evicted ones' 0.
    folder = os.path.dirname(re.search(r'statistics in "([^"]+)"', c.server_log()).group(1))
    tree, _ = tree_read(c, folder)
    bad = [(k, e["calls"], e["count"]) for k, e in tree.items() if e["count"] != e["calls"]]
    evicted = sum(1 for e in tree.values() if e["calls"] == 0)
    if bad or evicted < 100:
        fail("histogram counts differ from calls: %r; %d evicted" % (bad[:20], evicted))
    refusals = c.server_log().count("pcpu_stat_statements: an entry's ")
    if refusals < 1:
        fail("no refusal past max_keys in the log:\n" + c.server_log())
    c.psql("SELECT pcpu_stat_statements_reset()")
    if info_dealloc(c) != 0:
        fail("dealloc %d after a reset of every entry" % info_dealloc(c))
    print("pcpu_stat_statements.max = 100: %d listed with the evictor stopped, %d after it "
          "went on (dealloc %d), the query waiting on a lock meanwhile; %d kept entries exact; "
          "%d refusals past max_keys" % (over, listed, dealloc, len(kept), refusals))


def exported(c, folder=None):
    """{queryid: calls} of the statements pcpustat reads from the segment
    postgresql.<port>, in pcpustat's default folder or in `folder`."""
    argv = [os.environ.get("PCPUSTAT", "pcpustat")]
    if folder:
        argv += ["-d", folder]
    r = c.as_user(argv + ["postgresql.%d" % c.port, "pcpu_stat_statements_calls*"],
                  capture_output=True, text=True)
    if r.returncode != 0:
        fail("pcpustat: %s%s" % (r.stdout, r.stderr))
    out = {}
    for m in re.finditer(r'pcpu_stat_statements_calls(?:_total)?\{[^}]*queryid="(-?\d+)"'
                         r'[^}]*\}\s+(\d+)', r.stdout):
        out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out, r.stdout


def scenario_export(c, script):
    """pcpu_stat_statements.export_top = 10, export_interval = 1 s: pcpustat
    reads by default (the segment postgresql.<port> of its default folder)
    exactly the 10 statements of most total time: 40 statements run, 10
    exported, with the count of entries in the table beside them; then a
    statement that sleeps, run twice, comes into them with its calls as the
    view counts them, and another leaves; `pcpustat -d
    <folder>/postgresql-all` reads every statement (the tree)."""
    c.psql("CREATE EXTENSION pcpu_stat_statements;")
    if psql_file(c, "many.sql", ["SELECT %s" % "+".join(["1"] * k) for k in range(1, 41)]) is None:
        fail("the statements did not end")
    deadline = time.time() + 30
    while len(exported(c)[0]) < 10:
        if time.time() > deadline:
            fail("not 10 statements exported:\n%s" % exported(c)[1][:3000])
        time.sleep(0.1)
    # Then one of more time than any: in the top, another out of it.
    sleeper = "SELECT pg_sleep(0.2)"
    if psql_file(c, "sleep.sql", [sleeper, sleeper]) is None:
        fail("the statements did not end")
    calls = c.psql("SELECT queryid, calls FROM pcpu_stat_statements "
                   "WHERE query LIKE 'SELECT pg_sleep%'").split("|")
    if len(calls) != 2:
        fail("the sleeping statement is not in the view: %r" % calls)
    deadline = time.time() + 30
    while True:
        top, text = exported(c)
        if top.get(calls[0]) == int(calls[1]):
            break
        if time.time() > deadline:
            fail("the sleeping statement (%s, %s calls) not exported:\n%s"
                 % (calls[0], calls[1], text[:3000]))
        time.sleep(0.1)
    if len(top) != 10:
        fail("%d statements exported with export_top = 10:\n%s" % (len(top), text[:3000]))
    # The table's size beside them: every entry in it, not only the top.
    r = c.as_user([os.environ.get("PCPUSTAT", "pcpustat"), "postgresql.%d" % c.port,
                   "pcpu_stat_statements_entries"], capture_output=True, text=True)
    m = re.search(r"pcpu_stat_statements_entries\s+(\d+)", r.stdout)
    if not m or int(m.group(1)) < 42:
        fail("pcpu_stat_statements_entries not exported, or below 42:\n%s%s"
             % (r.stdout, r.stderr))
    folder = os.path.dirname(re.search(r'statistics in "([^"]+)"', c.server_log()).group(1))
    if not folder.endswith("/postgresql-all"):
        fail("the tree is in %s, not in a folder postgresql-all" % folder)
    listed = set(c.psql("SELECT queryid FROM pcpu_stat_statements WHERE calls > 0").split())
    every, text = exported(c, folder)
    if len(every) < 42 or not listed <= set(every):
        fail("pcpustat -d %s: %d statements, the view %d (%d not read):\n%s"
             % (folder, len(every), len(listed), len(listed - set(every)), text[:2000]))
    print("export_top = 10: pcpustat reads %d statements by default (the sleeping one with "
          "its %s calls), %d with -d %s" % (len(top), calls[1], len(every), folder))


HIST = "pcpu_stat_statements_exec_duration_seconds"


def tree_read(c, folder=None):
    """{key: {"calls": n, "count": n, "sum": s, "le": [(bound, cumulative)]}}
    of every entry pcpustat reads (--json; the tree in `folder`, else the
    default read: the export), key = (userid, dbid, queryid, toplevel)."""
    argv = [os.environ.get("PCPUSTAT", "pcpustat"), "-j"]
    if folder:
        argv += ["-d", folder]
    r = c.as_user(argv + ["postgresql.%d" % c.port, "pcpu_stat_statements_calls*", HIST + "*"],
                  capture_output=True, text=True)
    if r.returncode != 0:
        fail("pcpustat: %s%s" % (r.stdout, r.stderr))
    out = {}
    docs, text, i = [], r.stdout, 0
    while text[i:].strip():  # one document per segment
        while text[i].isspace():
            i += 1
        doc, i = json.JSONDecoder().raw_decode(text, i)
        docs.append(doc)
    for doc in docs:
        for fam in doc["statistics"]["families"]:
            for m in fam["metrics"]:
                lab = m["labels"]
                key = (lab.get("userid"), lab.get("dbid"), lab.get("queryid"),
                       lab.get("toplevel"))
                e = out.setdefault(key, {"calls": 0, "count": None, "sum": None, "le": []})
                if fam["name"] == "pcpu_stat_statements_calls":
                    e["calls"] = int(m["value"])
                elif fam["name"] == HIST:
                    e["count"] = int(m["count"])
                    e["sum"] = float(m["sum"])
                    e["le"] = sorted((float(b["le"]), int(b["count"])) for b in m["buckets"])
    return out, r.stdout


def promql_quantile(q, le):
    """Prometheus' histogram_quantile() over cumulative classic buckets."""
    total = le[-1][1]
    rank = q * total
    prev_bound, prev_cum = 0.0, 0
    for bound, cum in le:
        if cum >= rank and cum > prev_cum:
            if bound == float("inf"):
                return prev_bound
            return prev_bound + (bound - prev_bound) * (rank - prev_cum) / (cum - prev_cum)
        prev_bound, prev_cum = bound, cum
    return float("nan")


def scenario_histogram(c, script):
    """The execution times' histogram of each entry, and the view's
    exec_time_p50, _p90, _p99 (ms) computed from it:
      - `SELECT pg_sleep($1)` run 80 times for 1 ms and 20 times for 50 ms
        (one entry: the constant is normalized): calls 100, the
        histogram's count 100 (pcpustat), every 1 ms sleep below 31.25
        ms and every 50 ms one above (cumulative count 80 at le =
        2^-5 s); p50 in [0.977, 31.25) ms, p90 and p99 in [31.25 ms, the
        bound of max_exec_time's bucket]; each percentile equal to PromQL's
        histogram_quantile() over pcpustat's buckets of the entry;
      - every entry's histogram count equal to its calls (the tree; 30
        other statements and utility commands run beside them);
      - the export (pcpustat's default read) carries the same buckets;
      - pcpu_stat_statements_reset(): the histogram from zero (3 sleeps of
        1 ms after it: count 3 = calls, p99 below 31.25 ms);
      - pg_ctl restart with .save: the buckets and percentiles as they were.
    """
    c.psql("CREATE EXTENSION pcpu_stat_statements;")
    lines = ["SELECT pg_sleep(0.001)"] * 80 + ["SELECT pg_sleep(0.05)"] * 20
    # Beside them, 30 statements run 1 to 3 times each, and utility ones.
    lines += ["SELECT %s" % "+".join(["1"] * k) for k in range(1, 31) for _ in range(k % 3 + 1)]
    lines += ["CREATE TEMP TABLE t%d (a int)" % k for k in range(5)] + ["VACUUM pg_class"] * 2
    random.Random(64).shuffle(lines)
    if psql_file(c, "sleeps.sql", lines) is None:
        fail("the sleeps did not end")
    view = ("SELECT queryid, calls, exec_time_p50, exec_time_p90, exec_time_p99, max_exec_time "
            "FROM pcpu_stat_statements WHERE query = 'SELECT pg_sleep($1)'")
    row = c.psql(view).split("|")
    if len(row) != 6:
        fail("the sleeping statement is not in the view: %r" % row)
    qid, calls = row[0], int(row[1])
    p50, p90, p99, mx = (float(x) for x in row[2:])
    if calls != 100:
        fail("calls %d, 100 run" % calls)
    top = 2.0 ** math.ceil(math.log2(mx / 1e3)) * 1e3  # max's bucket's bound, ms
    if not (2.0 ** -10 * 1e3 <= p50 < 31.25):
        fail("p50 %.6f ms: not in [0.977, 31.25) ms (80 of 100 sleeps of 1 ms)" % p50)
    for name, p in (("p90", p90), ("p99", p99)):
        if not (31.25 <= p <= top):
            fail("%s %.6f ms: not in [31.25, %.3f] ms (20 of 100 sleeps of 50 ms)" % (name, p, top))
    folder = os.path.dirname(re.search(r'statistics in "([^"]+)"', c.server_log()).group(1))

    def check_tree(want_count):
        tree, text = tree_read(c, folder)
        mine = [e for k, e in tree.items() if k[2] == qid and k[3] == "true"]
        if len(mine) != 1 or mine[0]["count"] != want_count:
            fail("the histogram of %s: %r, count %d wanted:\n%s"
                 % (qid, mine, want_count, text[:3000]))
        bad = [(k, e["calls"], e["count"]) for k, e in tree.items()
               if e["count"] is not None and e["count"] != e["calls"]]
        if bad:
            fail("histogram counts differ from calls: %r" % bad[:20])
        return mine[0], sum(1 for e in tree.values() if e["count"] is not None)

    e, n = check_tree(100)
    le = dict(e["le"])
    if le.get(2.0 ** -5) != 80 or le.get(float("inf")) != 100:
        fail("cumulative counts: %r (80 at le=0.03125, 100 at +Inf wanted)" % e["le"])
    for name, q, p in (("p50", 0.5, p50), ("p90", 0.9, p90), ("p99", 0.99, p99)):
        want = promql_quantile(q, e["le"]) * 1e3
        if abs(want - p) > 1e-9 * want:
            fail("%s: the view %.9f ms, histogram_quantile() over pcpustat's buckets %.9f ms"
                 % (name, p, want))
    # The export (pcpustat's default read) copies the buckets.
    deadline = time.time() + 30
    while True:
        exp, text = tree_read(c)
        x = [v for k, v in exp.items() if k[2] == qid and k[3] == "true"]
        if x and x[0]["le"] == e["le"] and x[0]["count"] == 100:
            break
        if time.time() > deadline:
            fail("the export's histogram of %s: %r, the tree's %r:\n%s"
                 % (qid, x, e["le"], text[:3000]))
        time.sleep(0.1)
    print("%d sleeps: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, as histogram_quantile() over "
          "pcpustat's %d buckets; %d entries' counts equal to their calls; exported"
          % (calls, p50, p90, p99, len(e["le"]), n))
    # .save across a restart: the same buckets and percentiles.
    c.stop()
    c.start()
    if " entries read back from " not in c.server_log():
        fail("nothing read back at the start:\n" + c.server_log())
    after = c.psql(view).split("|")
    if after != row:
        fail("the view across the restart: %r, then %r" % (row, after))
    e2, _ = check_tree(100)
    if e2["le"] != e["le"] or e2["sum"] != e["sum"]:
        fail("the histogram across the restart: %r (sum %r), then %r (sum %r)"
             % (e["le"], e["sum"], e2["le"], e2["sum"]))
    # A reset: the histogram from zero.
    c.psql("SELECT pcpu_stat_statements_reset()")
    if psql_file(c, "sleeps2.sql", ["SELECT pg_sleep(0.001)"] * 3) is None:
        fail("the sleeps did not end")
    row = c.psql(view).split("|")
    if int(row[1]) != 3 or float(row[4]) >= 31.25:
        fail("after the reset and 3 sleeps of 1 ms: calls %s, p99 %s ms" % (row[1], row[4]))
    e3, _ = check_tree(3)
    print("restart with .save: the same; reset: count %d, p99 %.3f ms" % (e3["count"],
                                                                         float(row[4])))


def ours_calls(read):
    return {k: v[1]["calls"] for k, v in read.items() if v[1]["calls"]}


def scenario_crash(c, script):
    c.pgbench(["-i", "-s", "1", "-q"])
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    workload(c, script)
    _, read = compare(c)
    before = ours_calls(read)
    # A backend killed with SIGKILL: the postmaster ends every backend and
    # reinitializes shared memory (pg_stat_statements' table with it).
    bench = subprocess.Popen(
        (["runuser", "-u", USER, "--"] if os.geteuid() == 0 else [])
        + ["pgbench", "-h", c.sock, "-p", str(c.port), "-n", "-c", "2", "-j", "2", "-T", "30",
           "-f", script, "postgres"],
        cwd=c.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    pid = backend_pid(c)
    os.kill(pid, signal.SIGKILL)
    bench.wait(timeout=60)
    deadline = time.time() + 60
    while time.time() < deadline:
        r = c.psql("SELECT 1", check=False)
        if r == "1":
            break
        time.sleep(0.2)
    else:
        fail("the server did not come back after the crash:\n" + c.server_log())
    if "terminated by signal 9" not in c.server_log():
        fail("no crash restart in the server log:\n" + c.server_log())
    read = joint(c)
    after = ours_calls(read)
    lost = [k for k in before if after.get(k, 0) < before[k]]
    if lost:
        fail("counts lost in the crash restart: %s" % lost)
    print("after the crash restart: pcpu_stat_statements kept %d entries, "
          "pg_stat_statements %d" % (len(after), sum(1 for v in read.values() if v[0]["calls"])))
    # Counting goes on, exactly: what the next runs add to
    # pcpu_stat_statements equals pg_stat_statements' counts of them
    # (which started over at the restart; reset here).
    c.psql("SELECT pg_stat_statements_reset()")
    base = joint(c)
    workload(c, script)
    n, _ = compare(c, base=base, skip_readers=True)
    print("after the crash restart: %d entries counted on, exactly" % n)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("exact", "crash", "nested", "regress",
                                                  "restart", "evict", "export",
                                                  "histogram"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    scenario, module_dir = sys.argv[1], sys.argv[2]
    require(module_dir, ["pgbench", "psql"])
    c = Cluster(module_dir)
    try:
        script = c.root + "/custom.sql"
        with open(script, "w") as f:
            f.write(CUSTOM)
        os.chmod(script, 0o644)
        if scenario == "regress":
            # pg_stat_statements' own configuration (its
            # pg_stat_statements.conf), for this module alone.
            c.initdb("", preload="pcpu_stat_statements")
        else:
            c.initdb("compute_query_id = on\npg_stat_statements.track_utility = on\n"
                     "pg_stat_statements.max = 5000\npcpu_stat_statements.max = 5000\n"
                     "pg_stat_statements.track_planning = on\n"
                     "pcpu_stat_statements.track_planning = on\n"
                     + ("pg_stat_statements.track = all\npcpu_stat_statements.track = all\n"
                        if scenario == "nested" else "")
                     + ("pcpu_stat_statements.group = 'postgres'\n"
                        if scenario == "exact" else "")
                     + ("pcpu_stat_statements.max = 100\npcpu_stat_statements.max_keys = 250\n"
                        if scenario == "evict" else "")
                     + ("pcpu_stat_statements.export_top = 10\n"
                        "pcpu_stat_statements.export_interval = 1\n"
                        if scenario in ("export", "histogram") else ""))
        c.start()
        if "pcpu_stat_statements: statistics in" not in c.server_log():
            fail("the module did not publish its tree:\n" + c.server_log())
        if scenario == "exact":
            scenario_exact(c, script)
        elif scenario == "nested":
            scenario_nested(c, script)
        elif scenario == "regress":
            scenario_regress(c, script)
        elif scenario == "restart":
            scenario_restart(c, script)
        elif scenario == "evict":
            scenario_evict(c, script)
        elif scenario == "export":
            scenario_export(c, script)
        elif scenario == "histogram":
            scenario_histogram(c, script)
        else:
            scenario_crash(c, script)
        said = [line for line in c.server_log().splitlines()
                if "pcpu_stat_statements:" in line and "statistics in" not in line
                and " entries read back from " not in line
                and " statements exported in " not in line
                and not (scenario == "evict" and "an entry's " in line)]
        if said:
            fail("the module complained:\n" + "\n".join(said))
    finally:
        c.cleanup()
    print("PASS")


if __name__ == "__main__":
    main()
