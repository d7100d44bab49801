#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pcpu_stat_statements' reuse of evicted entries' series (pss_reuse.c)
against a real PostgreSQL 15, beside pg_stat_statements (as pg_test.py:
its cluster, its comparison), with pcpu_stat_statements.max = 100 and
max_keys = 250 -- the series sets the tree holds at once.

Usage: pg_reuse.py SCENARIO MODULE_DIR

Scenarios:
  rounds   1,200 distinct statements (12 x max, 4.8 x max_keys) over 5
           rounds, while a long-lived backend runs its own 5 statements
           at each round, its handles cached across the evictions
           (scenario_rounds' docstring): none refused, the series sets
           bounded, the kept entries exact, the long-lived backend's
           statements counted under their own entries.
  stopped  a backend stopped (SIGSTOP) inside its counting section
           (pcpu_stat_statements.debug_section_sleep): the evicted sets
           wait for it -- new statements are refused once none is free --
           and its count lands where it belongs once it goes on
           (scenario_stopped's docstring).
  crash    a backend killed (SIGKILL) inside its counting section: the
           crash restart forgets the sets, the tree stays; new statements
           are counted, none refused, the hot ones on exactly, each with
           its own text (scenario_crash's docstring).
  texts    1,250 distinct statements in 5 rounds: the statements' text
           series (pcpu_stat_statements_query_info) stop growing after the
           first round -- a set's text relabelled for the statement that
           takes it -- and every statement listed (and exported) shows its
           own text, pg_stat_statements' (scenario_texts' docstring).
  returns  evicted statements met again by the backend that counted them
           take their own sets back with the handles it had (no
           registration), new statements do not relabel sets freed
           moments ago, and the evictor ranks the table without reading
           the tree (scenario_returns' docstring).

Exit status: 0 passed, 1 failed, 77 cannot run here (as pg_test.py).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

from pg_cluster import USER, Cluster, fail, psql_file, require, wait_for
from pg_test import HOT, joint, tree_read

MAX, MAX_KEYS = 100, 250
# The long-lived backend's statements (normalized apart from the fillers').
OWN = ("SELECT pi()", "SELECT 'l' || 'x'", "SELECT 2 * 3 * 4", "SELECT now() IS NULL",
       "SELECT upper('a') || lower('B')")
REFUSED = "pcpu_stat_statements: an entry's series: none is free"


def distinct(first, n):
    """Statements first..first+n-1, each of its own queryid: k + 1 terms in
    (k // 50 + 1) columns differ in shape, which normalization keeps."""
    out = []
    for k in range(first, first + n):
        terms = "+".join(["1"] * (k % 50 + 1))
        out.append("SELECT " + ", ".join([terms] * (k // 50 + 1)))
    return out


class Session:
    """A psql session kept open (one backend), fed statements through its
    standard input; sync() waits until it ran what it was given."""

    def __init__(self, c):
        user = ["runuser", "-u", USER, "--"] if os.geteuid() == 0 else []
        self.p = subprocess.Popen(user + ["psql", "-X", "-q", "-At", "-h", c.sock, "-p",
                                          str(c.port), "-d", "postgres"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, cwd=c.root)
        self.n = 0

    def send(self, lines):
        self.p.stdin.write("".join(line + ";\n" for line in lines))
        self.p.stdin.flush()

    def sync(self):
        self.n += 1
        mark = "sync%d" % self.n
        self.send(["SELECT '%s'" % mark])
        out = []
        while True:
            line = self.p.stdout.readline()
            if not line:
                fail("the session ended: %s" % "".join(out))
            if line.strip() == mark:
                return out
            out.append(line)

    def pid(self):
        self.send(["SELECT 'pid:' || pg_backend_pid()"])
        for line in self.sync():
            if line.startswith("pid:"):
                return int(line[4:])
        fail("no backend pid")

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=60)


def listed(c):
    return int(c.psql("SELECT count(*) FROM pcpu_stat_statements"))


def fill(c, name, stmts, times=2):
    """Each statement `times` times, in one new session; then the table
    back under the bound (the evictor caught up)."""
    if psql_file(c, name, [s for s in stmts for _ in range(times)]) is None:
        fail("the statements of %s did not end" % name)
    wait_for(c, "SELECT count(*) FROM pcpu_stat_statements", lambda out: int(out) <= MAX,
             "the table under the bound")


def full_log(c):
    """The whole server log (Cluster.server_log() keeps its end only)."""
    with open(c.log) as f:
        return f.read()


def tree_path(c):
    return re.search(r'statistics in "([^"]+)"', full_log(c)).group(1)


def tree_folder(c):
    return os.path.dirname(tree_path(c))


def tree_words(c, names):
    """The tree's unlabelled series `names` ({key: family}), read with
    pcpustat (no SQL: a query would register statements itself):
    {key: value}."""
    argv = [os.environ.get("PCPUSTAT", "pcpustat"), "-d", tree_folder(c),
            "postgresql.%d" % c.port] + [n + "*" for n in names.values()]
    r = c.as_user(argv, capture_output=True, text=True)
    if r.returncode != 0:
        fail("pcpustat: %s%s" % (r.stdout, r.stderr))
    out = {}
    for key, fam in names.items():
        m = re.search(r"^\s*%s\s+(\d+)\s*$" % fam, r.stdout, re.M)
        if m is None:
            fail("no %s in pcpustat's output:\n%s" % (fam, r.stdout))
        out[key] = int(m.group(1))
    return out


def sets(c):
    """The tree's gauges of the series sets: {made, retired, free}."""
    return tree_words(c, {"made": "pcpu_stat_statements_sets",
                          "retired": "pcpu_stat_statements_sets_retired",
                          "free": "pcpu_stat_statements_sets_free"})


def words(c):
    """The tree's words scenario_returns watches: entries, dealloc, sets
    made, registrations, evictor_reads."""
    return tree_words(c, {"entries": "pcpu_stat_statements_entries",
                          "dealloc": "pcpu_stat_statements_dealloc_total",
                          "made": "pcpu_stat_statements_sets",
                          "registrations": "pcpu_stat_statements_registrations_total",
                          "reads": "pcpu_stat_statements_evictor_reads_total"})


def wait_words(c, ok, what):
    deadline = time.time() + 60
    while True:
        w = words(c)
        if ok(w):
            return w
        if time.time() > deadline:
            fail("%s: not after 60 s (%r)" % (what, w))
        time.sleep(0.1)


def used_bytes(c):
    """The memory the tree's segment file holds (its allocated blocks)."""
    return os.stat(tree_path(c)).st_blocks * 512


def exact_or_fewer(c, hot):
    """The entries read alike in both views: every hot one equal to
    pg_stat_statements' (calls, rows); none counting more (a count landed
    in another statement's entry would)."""
    read = joint(c)
    bad = []
    for k, (p, q, query, _) in read.items():
        if q["calls"] and any(q[col] > p[col] for col in ("calls", "rows")):
            bad.append("%s %r: pg_stat_statements %d calls, ours %d"
                       % (k[3], query[:40], p["calls"], q["calls"]))
        # Their texts normalized: "SELECT abs($1)"...
        if any(query.startswith(h.split("(")[0] + "(") for h in hot) \
                and (p["calls"], p["rows"]) != (q["calls"], q["rows"]):
            bad.append("hot %r: pg_stat_statements %d calls, ours %d"
                       % (query, p["calls"], q["calls"]))
    if bad:
        fail("entries differ from pg_stat_statements':\n  " + "\n  ".join(bad[:20]))
    return read


def scenario_rounds(c):
    """- the hot statements run 30 times (never evicted);
    - a long-lived session L runs its 5 statements once per round; 5
      rounds of 240 new distinct statements, twice each, in chunks of 40
      (the table back under the bound after each): L's entries, the least
      used, are evicted every round, their sets reused by the new ones
      while L keeps its handles;
    - then 40 more; L's statements evicted (not listed), both views reset
      (the table empty: no eviction meanwhile), L runs each twice: each
      counted 2 in its own entry, as pg_stat_statements counts it, never in
      the statement that took its old series (which would count more than
      pg_stat_statements');
    - no statement refused (a set was always free: evicted ones reused);
      the sets made stay <= max_keys, and the tree's calls series too;
    - the hot statements run 30 times more: equal to pg_stat_statements',
      no entry counting more than pg_stat_statements'."""
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    fill(c, "hot.sql", HOT, times=30)
    own = Session(c)
    sizes = [used_bytes(c)]
    try:
        k = 0
        for r in range(5):
            own.send(OWN)
            own.sync()
            for chunk in range(6):
                fill(c, "fill%d_%d.sql" % (r, chunk), distinct(k, 40))
                k += 40
            sizes.append(used_bytes(c))
        fill(c, "last.sql", distinct(k, 40))
        k += 40
        if REFUSED in full_log(c):
            fail("statements refused (no set free):\n" + c.server_log())
        # L's: run 5 times (the fillers 2, the hot ones 30).
        own_ids = c.psql("SELECT queryid FROM pg_stat_statements WHERE calls = 5 "
                         "AND query <> 'SELECT $1'").split()
        shown = c.psql("SELECT queryid FROM pcpu_stat_statements").split()
        if len(own_ids) != len(OWN) or set(own_ids) & set(shown):
            fail("the long-lived session's statements %r: not 5, or not all evicted (%r)"
                 % (own_ids, set(own_ids) & set(shown)))
        # Both views from zero: the table empty, so that no eviction
        # runs while L counts (its entries would be the least used).
        c.psql("SELECT pg_stat_statements_reset(), pcpu_stat_statements_reset()")
        own.send([q for q in OWN for _ in range(2)])
        own.sync()
    finally:
        own.close()
    fill(c, "hot2.sql", HOT, times=30)
    read = exact_or_fewer(c, HOT)
    ours = {k[3]: (p["calls"], q["calls"]) for k, (p, q, _, _) in read.items()}
    wrong = [(i, ours.get(i)) for i in own_ids if ours.get(i) != (2, 2)]
    if wrong:
        fail("the long-lived session's statements, run twice since their eviction: "
             "(pg_stat_statements' calls, ours) %r (want (2, 2) each)" % wrong)
    s = sets(c)
    tree, _ = tree_read(c, tree_folder(c))
    if s["made"] > MAX_KEYS or len(tree) > MAX_KEYS + 10:
        fail("%d sets made, %d series of calls in the tree (want <= %d)"
             % (s["made"], len(tree), MAX_KEYS))
    print("%d distinct statements (max %d, max_keys %d): %d sets made (%d free, %d retired), "
          "%d calls series in the tree, none refused; the long-lived session's 5 "
          "statements counted 2 each in their own entries; hot entries exact; the "
          "segment's allocated KiB at the start and after each round: %s"
          % (k + len(HOT) + len(OWN), MAX, MAX_KEYS, s["made"], s["free"], s["retired"],
             len(tree), [b // 1024 for b in sizes]))


def scenario_stopped(c):
    """- the hot statements run 30 times; a session B runs abs(-7) (hot)
      with pcpu_stat_statements.debug_section_sleep = 3000: stopped
      (SIGSTOP) while it sleeps inside its counting section (its wait
      event Extension);
    - 280 new distinct statements (more than the sets left): evicted sets
      retired after B's section began cannot be reused while it is stopped
      -- the sets run out, the retired ones wait; 40 more, once the evictor
      has run, are all refused (logged), none counted;
    - B let go (SIGCONT): its count lands in abs(-7)'s entry; the retired
      sets are reclaimed (none left retired), 80 new statements are
      counted (no new refusal);
    - the hot statements equal to pg_stat_statements', none counting more."""
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    fill(c, "hot.sql", HOT, times=30)
    b = Session(c)
    pid = b.pid()
    stopped = False
    try:
        b.send(["SET pcpu_stat_statements.debug_section_sleep = 3000", HOT[0]])
        wait_for(c, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %d" % pid,
                 lambda out: out == "Extension", "the session inside its counting section")
        os.kill(pid, signal.SIGSTOP)
        stopped = True
        # 280 new ones: more than the sets that are not the hot ones'.
        if psql_file(c, "stopped.sql", distinct(0, 280)) is None:
            fail("statements did not end while a backend was stopped in its section")
        wait_for(c, "SELECT count(*) FROM pcpu_stat_statements", lambda out: int(out) <= MAX,
                 "the table under the bound")
        # The evictor has run since: 40 more, 3 times each (their own
        # count in pg_stat_statements), none counted -- no set was freed.
        if psql_file(c, "more.sql", [q for q in distinct(280, 40) for _ in range(3)]) is None:
            fail("statements did not end while a backend was stopped in its section")
        counted = int(c.psql("SELECT count(*) FROM pcpu_stat_statements WHERE queryid IN "
                             "(SELECT queryid FROM pg_stat_statements WHERE calls = 3 "
                             "AND query LIKE 'SELECT $1+%')"))
        held = sets(c)
        refusals = full_log(c).count(REFUSED)
        if counted or refusals < 2 or held["retired"] == 0 or held["free"] or \
                held["made"] != MAX_KEYS:
            fail("with a backend stopped in its section: %d of 40 new statements counted, %d "
                 "refusals, sets %r (want none counted: no set freed, the retired ones "
                 "waiting)" % (counted, refusals, held))
        os.kill(pid, signal.SIGCONT)
        stopped = False
        b.send(["SET pcpu_stat_statements.debug_section_sleep = 0"])
        b.sync()
        deadline = time.time() + 30
        while sets(c)["retired"] != 0:
            if time.time() > deadline:
                fail("retired sets not reclaimed after the session went on: %r" % sets(c))
            time.sleep(0.1)
        fill(c, "after.sql", distinct(400, 80))
        log = full_log(c)
        if log.count(REFUSED) != refusals:
            fail("statements refused after the stopped session went on:\n"
                 + log[log.rfind(REFUSED) - 200:][:1500])
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        b.close()
    read = exact_or_fewer(c, HOT)
    print("a backend stopped in its counting section: sets %r meanwhile, %d refusals; "
          "reclaimed once it went on; %d entries read, the hot ones exact"
          % (held, refusals, len(read)))


def scenario_crash(c):
    """- the hot statements run 30 times, 120 new ones (evictions, sets
      reused); a session B killed (SIGKILL) inside its counting section
      (.debug_section_sleep): the postmaster's crash restart makes shared
      memory anew (every slot 0, the sets forgotten), the tree stays;
    - 600 new distinct statements, 40 at a time: none refused (the sets
      made again, up to max_keys, then reused), the sets made <= max_keys;
    - the hot statements run 30 times more: what they add in ours equals
      pg_stat_statements' counts (which started over at the restart), and
      no entry counts more than its count before plus pg_stat_statements';
    - every statement listed shows pg_stat_statements' text, and the text
      series are at most the sets made + max_keys (the forgotten sets'
      texts stay) + 10."""
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    fill(c, "hot.sql", HOT, times=30)
    for chunk in range(3):
        fill(c, "pre%d.sql" % chunk, distinct(chunk * 40, 40))
    b = Session(c)
    pid = b.pid()
    b.send(["SET pcpu_stat_statements.debug_section_sleep = 3000", HOT[0]])
    wait_for(c, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %d" % pid,
             lambda out: out == "Extension", "the session inside its counting section")
    os.kill(pid, signal.SIGKILL)
    b.p.wait(timeout=60)
    deadline = time.time() + 60
    while c.psql("SELECT 1", check=False) != "1":
        if time.time() > deadline:
            fail("the server did not come back after the crash:\n" + c.server_log())
        time.sleep(0.2)
    if "terminated by signal 9" not in full_log(c):
        fail("no crash restart in the server log:\n" + c.server_log())
    before = {k: q["calls"] for k, (p, q, _, _) in joint(c).items()}
    refused = full_log(c).count(REFUSED)
    for chunk in range(15):
        fill(c, "post%d.sql" % chunk, distinct(200 + chunk * 40, 40))
    if full_log(c).count(REFUSED) != refused:
        fail("statements refused after the crash restart:\n" + c.server_log())
    s = sets(c)
    if s["made"] > MAX_KEYS or s["free"] + s["retired"] == 0:
        fail("after the crash restart: sets %r (want <= %d made, some evicted)" % (s, MAX_KEYS))
    fill(c, "hot2.sql", HOT, times=30)
    bad = []
    for k, (p, q, query, _) in joint(c).items():
        if q["calls"] > before.get(k, 0) + p["calls"]:
            bad.append("%r: %d before, pg_stat_statements %d since, ours %d"
                       % (query[:40], before.get(k, 0), p["calls"], q["calls"]))
        if any(query.startswith(h.split("(")[0] + "(") for h in HOT) \
                and q["calls"] != before.get(k, 0) + p["calls"]:
            bad.append("hot %r: %d before, pg_stat_statements %d since, ours %d"
                       % (query, before.get(k, 0), p["calls"], q["calls"]))
    if bad:
        fail("after the crash restart:\n  " + "\n  ".join(bad[:20]))
    # The texts: each listed statement's own; their series bounded (the
    # forgotten sets' texts stay, at most max_keys per crash).
    bad = own_texts(c)
    _, texts = tree_series(c)
    if bad or len(texts) > s["made"] + MAX_KEYS + 10:
        fail("after the crash restart: %d text series for %d sets, texts not "
             "pg_stat_statements': %r" % (len(texts), s["made"], bad[:10]))
    print("a backend killed inside its counting section: after the crash restart 600 new "
          "statements, none refused, sets %r; the hot entries counted on exactly; %d text "
          "series, every listed statement with its own text" % (s, len(texts)))


QUERY_INFO = "pcpu_stat_statements_query_info"


def tree_series(c, folder=True):
    """The tree's series as pcpustat reads its segment (-j, every family):
    (all of them, the text series as [(queryid, epoch, query)]) -- each
    series one directory entry. folder False: the export's segment."""
    argv = [os.environ.get("PCPUSTAT", "pcpustat"), "-j"]
    if folder:
        argv += ["-d", tree_folder(c)]
    r = c.as_user(argv + ["postgresql.%d" % c.port], capture_output=True, text=True)
    if r.returncode != 0:
        fail("pcpustat: %s%s" % (r.stdout, r.stderr))
    n, texts, out, i = 0, [], r.stdout, 0
    while out[i:].strip():  # one document per segment
        while out[i].isspace():
            i += 1
        doc, i = json.JSONDecoder().raw_decode(out, i)
        for fam in doc["statistics"]["families"]:
            n += len(fam["metrics"])
            if fam["name"] == QUERY_INFO:
                texts += [(m["labels"]["queryid"], m["labels"]["epoch"], m["labels"]["query"])
                          for m in fam["metrics"]]
    return n, texts


def own_texts(c):
    """The statements listed whose text is not pg_stat_statements' (its
    first 2,047 bytes: a label's most; these texts are ASCII), or NULL."""
    return c.psql("SELECT q.queryid, left(q.query, 60), left(p.query, 60) "
                  "FROM pcpu_stat_statements q JOIN pg_stat_statements p "
                  "USING (userid, dbid, toplevel, queryid) "
                  "WHERE q.query IS NULL OR q.query <> left(p.query, 2047)").splitlines()


def export_texts(c):
    """The export's text series (pcpustat's default read: the top
    statements) whose text is not pg_stat_statements' for their queryid,
    once an export pass has exported some; and how many there are."""
    pgss = {}
    for line in c.psql("SELECT queryid, left(query, 2047) FROM pg_stat_statements").splitlines():
        q, t = line.split("|", 1)
        pgss.setdefault(q, set()).add(t)
    deadline = time.time() + 30
    while True:
        _, texts = tree_series(c, folder=False)
        if texts or time.time() > deadline:
            break
        time.sleep(0.5)
    return [(q, t[:60]) for q, e, t in texts if t not in pgss.get(q, ())], len(texts)


def scenario_texts(c):
    """- the hot statements run 30 times; 5 rounds of 250 new distinct
      statements (1,250: 12.5 x max, 5 x max_keys), twice each, in chunks
      of 50 (the table back under the bound after each);
    - after each round the tree's text series (QUERY_INFO, one directory
      entry each) are counted: from the second round on, at most the sets
      made (<= max_keys) + 10 -- an evicted statement's text series is
      relabelled for the statement that takes its set (made anew, they
      would grow by 250 a round);
    - every statement listed shows its own text: pg_stat_statements';
      and so does every statement the export holds (pcpustat's default
      read, the top statements of its last pass);
    - both views reset, the hot statements run again: their texts recorded
      again (a new epoch: the set's text series relabelled), still
      pg_stat_statements', the text series no more than before + 10."""
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    fill(c, "hot.sql", HOT, times=30)
    counts, sizes = [], [used_bytes(c)]
    k = 0
    for r in range(5):
        for chunk in range(5):
            fill(c, "texts%d_%d.sql" % (r, chunk), distinct(k, 50))
            k += 50
        n, texts = tree_series(c)
        counts.append((n, len(texts), sets(c)["made"]))
        sizes.append(used_bytes(c))
        bad = own_texts(c)
        if bad:
            fail("round %d: statements listed without their own text (queryid, ours, "
                 "pg_stat_statements'):\n  %s" % (r, "\n  ".join(bad[:10])))
    if REFUSED in full_log(c):
        fail("statements refused (no set free):\n" + c.server_log())
    bad, exported = export_texts(c)
    if bad or not exported:
        fail("the export (pcpustat's default read): %d text series, those not "
             "pg_stat_statements' for their queryid: %r" % (exported, bad[:10]))
    print("after each round of 250 new statements (series in the tree, text series, sets "
          "made): %r; the segment's allocated KiB: %s" % (counts, [b // 1024 for b in sizes]))
    for r in range(1, 5):
        n, t, made = counts[r]
        if t > made + 10 or made > MAX_KEYS:
            fail("after round %d (%d new statements): %d text series in the tree for %d sets "
                 "(%d after the first round): want at most the sets + 10 -- the evicted "
                 "statements' texts not reused" % (r, 250 * (r + 1), t, made, counts[0][1]))
    c.psql("SELECT pg_stat_statements_reset(), pcpu_stat_statements_reset()")
    fill(c, "hot2.sql", HOT, times=3)
    n, texts = tree_series(c)
    bad = own_texts(c)
    listed = int(c.psql("SELECT count(*) FROM pcpu_stat_statements WHERE query LIKE '%abs%'"))
    if bad or listed == 0 or len(texts) > counts[-1][1] + 10:
        fail("after a reset: %d text series (%d before), %d hot statements listed, texts not "
             "pg_stat_statements': %r" % (len(texts), counts[-1][1], listed, bad[:10]))
    epochs = sorted(set(e for q, e, t in texts if "abs" in t))
    print("%d distinct statements (max %d, max_keys %d): the text series %d after the first "
          "round, %d after the last (%d sets made); every statement listed (and the %d "
          "exported) with pg_stat_statements' text; after a reset %d text series, the hot "
          "ones' epochs %s" % (k, MAX, MAX_KEYS, counts[0][1], counts[-1][1], counts[-1][2],
                               exported, len(texts), epochs))


def scenario_returns(c):
    """Evicted statements met again by the backend that counted them, and
    the evictor's passes, cost no registration and no read of the tree:
    - a session S runs 150 distinct statements (1.5 x max) once; the
      evictor takes the table back under the bound (60 evicted);
    - another session runs 20 new statements: the evicted ones' sets,
      freed moments ago, are not relabelled for them (new sets are made:
      max_keys has room) -- sets made + 20;
    - S runs its 150 three times more, the evictor taking the table back
      under the bound after each (dealloc + 3 at least); meanwhile, with
      export_interval at an hour, the counting backends register nothing
      (S takes its statements' own sets back, unrelabelled, with the
      handles it had) and the evictor reads the tree at most once (it
      ranks the table from the sets in use);
    - no entry counts more than pg_stat_statements'; the statements kept
      in the table through the last pass count as many as
      pg_stat_statements'."""
    c.psql("CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pcpu_stat_statements;")
    c.psql("ALTER SYSTEM SET pcpu_stat_statements.export_interval = 3600")
    c.psql("SELECT pg_reload_conf()")
    mine = distinct(0, 150)
    s = Session(c)
    try:
        s.send(mine)
        s.sync()
        w0 = wait_words(c, lambda w: w["entries"] <= MAX and w["dealloc"] >= 1,
                        "the table under the bound after S's first round")
        fill(c, "new.sql", distinct(150, 20), times=1)
        w1 = words(c)
        passes = w1["dealloc"]
        for r in range(3):
            s.send(mine)
            s.sync()
            w = wait_words(c, lambda w: w["entries"] <= MAX and w["dealloc"] > passes,
                           "the table under the bound after S's round %d" % (r + 2))
            passes = w["dealloc"]
        w2 = words(c)
    finally:
        s.close()
    if w1["made"] - w0["made"] < 20:
        fail("20 new statements took %d new sets (want 20: the free ones were freed "
             "moments ago, their statements likely back soon): %r, %r"
             % (w1["made"] - w0["made"], w0, w1))
    if w2["registrations"] != w1["registrations"]:
        fail("S's statements, evicted and met again, registered %d times (want 0: their "
             "own sets back, the handles S had): %r, %r"
             % (w2["registrations"] - w1["registrations"], w1, w2))
    if w2["dealloc"] - w1["dealloc"] < 3 or w2["reads"] - w1["reads"] > 1:
        fail("%d eviction passes, %d reads of the whole tree (want >= 3 passes, <= 1 read): "
             "%r, %r" % (w2["dealloc"] - w1["dealloc"], w2["reads"] - w1["reads"], w1, w2))
    read = exact_or_fewer(c, [])
    print("150 statements through a table of %d, 3 rounds more: %d eviction passes, %d "
          "registrations, %d reads of the tree (%d in all); 20 new statements took %d new "
          "sets; %d entries read, none counting more than pg_stat_statements'"
          % (MAX, w2["dealloc"] - w1["dealloc"], w2["registrations"] - w1["registrations"],
             w2["reads"] - w1["reads"], w2["reads"], w1["made"] - w0["made"], len(read)))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("rounds", "stopped", "crash", "texts",
                                                  "returns"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    scenario, module_dir = sys.argv[1], sys.argv[2]
    require(module_dir, ["psql"])
    c = Cluster(module_dir)
    try:
        c.initdb("compute_query_id = on\npg_stat_statements.max = 5000\n"
                 "pg_stat_statements.track_planning = on\n"
                 "pcpu_stat_statements.track_planning = on\n"
                 "pcpu_stat_statements.max = %d\npcpu_stat_statements.max_keys = %d\n"
                 % (MAX, MAX_KEYS))
        c.start()
        if "pcpu_stat_statements: statistics in" not in full_log(c):
            fail("the module did not publish its tree:\n" + c.server_log())
        if scenario == "rounds":
            scenario_rounds(c)
        elif scenario == "stopped":
            scenario_stopped(c)
        elif scenario == "texts":
            scenario_texts(c)
        elif scenario == "returns":
            scenario_returns(c)
        else:
            scenario_crash(c)
        said = [line for line in full_log(c).splitlines()
                if "pcpu_stat_statements:" in line and "statistics in" not in line
                and " statements exported in " not in line and REFUSED not in line]
        if said:
            fail("the module complained:\n" + "\n".join(said))
    finally:
        c.cleanup()
    print("PASS")


if __name__ == "__main__":
    main()
