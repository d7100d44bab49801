#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pgbench against PostgreSQL 15 with no statement statistics, with
pg_stat_statements and with pcpu_stat_statements (integrations/postgresql),
side by side in one run; then the memory of an entry at 2, 64 and 256
CPU slots. bench/postgresql.md records what it printed.

usage: bench/postgresql_bench.py MODULE_DIR [--clients 1,2] [--duration 5]
                                 [--rounds 5] [--scale 1] [--entries 500]
                                 [--baseline DIR] [--no-memory]
                                 [--connections N [--connect-tx 300]] [--churn N]
                                 [--instructions N]
  MODULE_DIR  the build's integrations/postgresql (pcpu_stat_statements.so)
  DIR         another build's module folder, a fourth variant in the same run

Three clusters run at once (integrations/postgresql/tests/pg_cluster.py's
private clusters, as the tests make them: initdb in a temporary folder as
the postgres user, a unix socket of their own), the same but for
shared_preload_libraries: '' / 'pg_stat_statements' /
'pcpu_stat_statements', each module with its defaults (track = top,
track_utility on, track_planning off). Workloads: pgbench's built-in
select-only script with prepared statements (-S -M prepared) and a
one-statement script (SELECT 1, -M prepared), at each client count (-c N
-j N). Each round runs every workload, client count and variant once for
--duration seconds, in a shuffled order. Printed: the medians over the
rounds of transactions per second, of the average latency and of the
server's CPU time per transaction (user + system of the postmaster's
children: the reaped ones -- the backends, which exit when pgbench
disconnects -- and the running ones, the background processes and
pcpu_stat_statements' evictor; before 2026-11-29 04:00 UTC the reaped ones
only), over the transactions, each with its ratio to no module. The CPU time per
transaction is what a module costs; on a machine other programs load it
moves much less than the throughput does.

New connections (--connections N, instead of the above): each variant's
cluster first runs N distinct statements once (pcpu_stat_statements.max
and pg_stat_statements.max 5,000), so that the table holds N entries, as
a server's does after a while; then pgbench -C (a new connection, so a new
backend, per transaction) runs -S at 2 clients for --connect-tx
transactions per client, in --rounds rounds, the variants in a shuffled
order. Printed: the medians of the server's CPU time per connection (as
above), of TPS and of the minor page faults per
connection (the postmaster's reaped children's), each with its ratio to no
module. What a connection costs is what a server without a connection
pooler pays per client.

Eviction churn (--churn N, instead of the above): each cluster makes N
tables and runs, at 2 clients for --duration seconds a round, a script
that counts the rows of a random one (SELECT count(*) FROM t<k>: N
distinct statements) with max = 1,000 in both modules, so that the table
is always full and new statements keep evicting old ones (the workload
of Tantor's "unique statements" figure, scaled down). Printed: the
medians of TPS and of the server's CPU per transaction, with their
ratios to no module, and each module's evictions (dealloc).

Instructions (--instructions N, instead of the above): what a statement
costs each variant, counted instead of timed, so that no other load of
the machine moves it. Each variant's cluster (pgbench -i -s 1 first) runs
in single-user mode (postgres --single, one backend, no client, no
socket) under valgrind's callgrind with its cache simulation, twice: N
statements, then 2N; the difference over N is one statement's: its
instructions (Ir), L1 data misses (reads + writes), L1 instruction misses
and last-level misses. Two workloads: SELECT 1, and pgbench -S's
statement prepared once and executed with a random aid each time (the
same aids in every variant). Printed: each variant's figures and each
module's difference to none -- what the module adds to a statement.
Under valgrind there is no rseq (pcpu_rseq_mode() PCPU_RSEQ_FALLBACK), so
pcpu's adds take their fallback path: an atomic add each, about as many
instructions as the rseq path, more cycles.

Memory: a cluster with pcpu_stat_statements alone, PCPU_NSLOTS = 2 (the
CPUs here), 64 and 256 in its environment (the slots of a 64- or 256-CPU
machine; PCPU_INDEX stays cpu), runs --entries distinct statements once
each; the segment file's allocated bytes (st_blocks) before and after, over
the entries, is the memory of one entry (its 37 series and its text).
"""
import argparse
import contextlib
import os
import random
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integrations", "postgresql", "tests"))
import pg_cluster  # noqa: E402  (the tests' private clusters)

VARIANTS = [("none", ""), ("pg_stat_statements", "pg_stat_statements"),
            ("pcpu_stat_statements", "pcpu_stat_statements")]


def children_cpu(c):
    """The CPU time of the postmaster's children, in clock ticks: the
    reaped ones' (backends that have exited) and the running ones' (the
    background processes, pcpu_stat_statements' evictor among them, which
    live as long as the server)."""
    with open(c.data + "/postmaster.pid") as f:
        pid = int(f.readline())
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[13]) + int(fields[14])  # cutime, cstime
    for child in os.listdir("/proc"):
        if not child.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % child) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile: counted in cutime once reaped
        if int(fields[1]) == pid:  # ppid
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks


def children_minflt(c):
    """The postmaster's reaped children's minor page faults."""
    with open(c.data + "/postmaster.pid") as f:
        pid = int(f.readline())
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[8])  # cminflt


def distinct_statements(c, n):
    """Runs n distinct statements once each, in one session: 1 + 1 + ...
    + 1, k terms (another tree each, so another queryid)."""
    sql = c.root + "/entries.sql"
    with open(sql, "w") as f:
        f.write("".join("SELECT %s;\n" % "+".join(["1"] * k) for k in range(1, n + 1)))
    os.chmod(sql, 0o644)
    c.as_user(["psql", "-X", "-q", "-o", "/dev/null", "-h", c.sock, "-p", str(c.port),
               "-d", "postgres", "-f", sql], check=True)


def variants_of(module_dir, a):
    """(name, shared_preload_libraries, the module's folder) of each variant."""
    return [(v, preload, module_dir) for v, preload in VARIANTS] + (
        [("pcpu, --baseline", "pcpu_stat_statements", a.baseline)] if a.baseline else [])


@contextlib.contextmanager
def started(variants, conf=""):
    """A started private cluster per variant (postgresql.conf lines conf),
    by name; removed afterwards."""
    clusters = {}
    try:
        for name, preload, folder in variants:
            c = pg_cluster.Cluster(folder)
            clusters[name] = c
            c.initdb(conf, preload=preload)
            c.start()
        yield clusters
    finally:
        for c in clusters.values():
            c.cleanup()


def by_rounds(a, clusters, one):
    """a.rounds rounds of one(cluster) on every cluster, in a shuffled
    order each round: its results, a list per cluster's name."""
    results = {}
    for rnd in range(a.rounds):
        order = list(clusters)
        random.shuffle(order)
        for v in order:
            results.setdefault(v, []).append(one(clusters[v]))
        print("round %d of %d done" % (rnd + 1, a.rounds), file=sys.stderr, flush=True)
    return results


def connections(module_dir, a):
    variants = variants_of(module_dir, a)
    tx = a.connect_tx

    def one(c):
        t0, f0 = children_cpu(c), children_minflt(c)
        r = c.pgbench(["-n", "-C", "-S", "-t", str(tx), "-c", "2", "-j", "2"])
        time.sleep(0.3)
        conns = 2 * tx
        cpu_us = (children_cpu(c) - t0) / os.sysconf("SC_CLK_TCK") * 1e6 / conns
        faults = (children_minflt(c) - f0) / conns
        # -C: "tps = N (including reconnection times)"
        tps = float(re.search(r"tps = ([0-9.]+)", r.stdout).group(1))
        return cpu_us, tps, faults

    with started(variants, "pcpu_stat_statements.max = 5000\npg_stat_statements.max = 5000\n") \
            as clusters:
        for c in clusters.values():
            c.pgbench(["-i", "-s", str(a.scale), "-q"])
            distinct_statements(c, a.connections)
        results = by_rounds(a, clusters, one)
    print("\n-S with a new connection per transaction (pgbench -C), 2 clients, %d entries "
          "in the table (%d rounds of %d connections, medians):"
          % (a.connections, a.rounds, 2 * tx))
    print("  %-22s %14s %6s %10s %6s %14s" % ("", "CPU us/conn", "x", "TPS", "x", "faults/conn"))
    base = [statistics.median(x) for x in zip(*results["none"])]
    for v, _, _ in variants:
        m = [statistics.median(x) for x in zip(*results[v])]
        print("  %-22s %14.0f %6.3f %10.1f %6.3f %14.0f"
              % (v, m[0], m[0] / base[0], m[1], m[1] / base[1], m[2]))


def churn(module_dir, a):
    variants = variants_of(module_dir, a)
    with started(variants, "pcpu_stat_statements.max = 1000\npg_stat_statements.max = 1000\n") \
            as clusters:
        for c in clusters.values():
            for first in range(1, a.churn + 1, 1000):  # a transaction per 1,000: its locks
                c.psql("DO $$ BEGIN FOR i IN %d..%d LOOP EXECUTE format('CREATE TABLE t%%s (x int)', "
                       "i); END LOOP; END $$" % (first, min(first + 999, a.churn)))
            with open(c.root + "/churn.sql", "w") as f:
                f.write("\\set k random(1, %d)\nSELECT count(*) FROM t:k;\n" % a.churn)
            os.chmod(c.root + "/churn.sql", 0o644)
        results = by_rounds(a, clusters, lambda c: run(
            c, ["-f", c.root + "/churn.sql", "-c", "2", "-j", "2"], a.duration))
        print("\n%d distinct statements, max 1000, 2 clients (%d rounds of %d s, medians):"
              % (a.churn, a.rounds, a.duration))
        print("  %-22s %10s %6s %14s %6s %10s" % ("", "TPS", "x", "CPU us/tx", "x", "dealloc"))
        base = [statistics.median(x) for x in zip(*results["none"])]
        for v, preload, _ in variants:
            m = [statistics.median(x) for x in zip(*results[v])]
            c = clusters[v]
            dealloc = "-"
            if preload:
                c.psql("CREATE EXTENSION IF NOT EXISTS %s" % preload)
                dealloc = c.psql("SELECT dealloc FROM %s_info" % preload).strip()
            print("  %-22s %10.0f %6.3f %14.1f %6.3f %10s"
                  % (v, m[0], m[0] / base[0], m[2], m[2] / base[2], dealloc))


def run(c, args, duration):
    t0 = children_cpu(c)
    r = c.pgbench(["-n", "-T", str(duration)] + args)
    # The backends exit as pgbench disconnects; the postmaster reaps them.
    time.sleep(0.3)
    ticks = children_cpu(c) - t0
    tps = float(re.search(r"tps = ([0-9.]+) \(without", r.stdout).group(1))
    lat = float(re.search(r"latency average = ([0-9.]+) ms", r.stdout).group(1))
    tx = int(re.search(r"number of transactions actually processed: (\d+)", r.stdout).group(1))
    cpu_us = ticks / os.sysconf("SC_CLK_TCK") * 1e6 / max(tx, 1)
    return tps, lat, cpu_us


def throughput(module_dir, a):
    variants = variants_of(module_dir, a)
    with started(variants) as clusters:
        for c in clusters.values():
            c.pgbench(["-i", "-s", str(a.scale), "-q"])
            path = c.root + "/one.sql"
            with open(path, "w") as f:
                f.write("SELECT 1;\n")
            os.chmod(path, 0o644)
        workloads = [("-S -M prepared", ["-S", "-M", "prepared"]),
                     ("SELECT 1, -M prepared", None)]
        results = {}
        for rnd in range(a.rounds):
            jobs = [(w, n, v) for w in range(len(workloads)) for n in a.clients
                    for v, _, _ in variants]
            random.shuffle(jobs)
            for w, n, v in jobs:
                c = clusters[v]
                wargs = workloads[w][1] or ["-f", c.root + "/one.sql", "-M", "prepared"]
                res = run(c, wargs + ["-c", str(n), "-j", str(n)], a.duration)
                results.setdefault((w, n, v), []).append(res)
            print("round %d of %d done" % (rnd + 1, a.rounds), file=sys.stderr, flush=True)
    for w, (wname, _) in enumerate(workloads):
        for n in a.clients:
            print("\n%s, %d client%s (%d rounds of %d s, medians):"
                  % (wname, n, "s" if n > 1 else "", a.rounds, a.duration))
            print("  %-22s %10s %6s %12s %6s %14s %6s" % ("", "TPS", "x", "latency ms",
                                                         "x", "CPU us/tx", "x"))
            base = [statistics.median(x) for x in zip(*results[(w, n, "none")])]
            for v, _, _ in variants:
                m = [statistics.median(x) for x in zip(*results[(w, n, v)])]
                print("  %-22s %10.0f %6.3f %12.4f %6.3f %14.2f %6.3f"
                      % (v, m[0], m[0] / base[0], m[1], m[1] / base[1], m[2],
                         m[2] / base[2]))


CALLGRIND_EVENTS = ("Ir", "D1mr", "D1mw", "I1mr", "DLmr", "DLmw", "ILmr")


def callgrind_counts(c, script):
    """The event totals of one postgres --single run of `script` (its
    statements, one per line) under callgrind with the cache simulation."""
    out = c.sock + "/callgrind.out"  # a folder the postgres user may write
    with open(script) as f:
        r = c.as_user(["valgrind", "--tool=callgrind", "--cache-sim=yes",
                       "--callgrind-out-file=" + out, c.bin + "/postgres", "--single",
                       "-D", c.data, "postgres"], stdin=f, capture_output=True, text=True)
    if r.returncode != 0:
        pg_cluster.fail("postgres --single under callgrind: " + r.stderr[-3000:])
    names = values = None
    with open(out) as f:
        for line in f:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("summary:") or line.startswith("totals:"):
                values = [int(x) for x in line.split()[1:]]
    os.unlink(out)
    if names is None or values is None:
        pg_cluster.fail("no totals in callgrind's output")
    got = dict(zip(names, values))
    return [got.get(e, 0) for e in CALLGRIND_EVENTS]


def instructions(module_dir, a):
    if subprocess.run(["valgrind", "--version"], capture_output=True).returncode != 0:
        pg_cluster.fail("--instructions needs valgrind (scripts/install-deps.sh installs it)")
    n = a.instructions
    rng = random.Random(1)
    aids = [rng.randint(1, 100000 * a.scale) for _ in range(2 * n)]
    workloads = [("SELECT 1", lambda k: ["SELECT 1;"] * k),
                 ("-S, prepared", lambda k: [
                     "PREPARE s(int) AS SELECT abalance FROM pgbench_accounts WHERE aid = $1;"] +
                  ["EXECUTE s(%d);" % aid for aid in aids[:k]])]
    variants = variants_of(module_dir, a)
    per = {}
    for name, preload, folder in variants:
        c = pg_cluster.Cluster(folder)
        try:
            c.initdb("compute_query_id = on\n", preload=preload)
            c.start()
            c.pgbench(["-i", "-s", str(a.scale), "-q"])
            c.stop()
            for w, (wname, lines) in enumerate(workloads):
                counts = []
                for k in (n, 2 * n):
                    script = c.root + "/statements.sql"
                    with open(script, "w") as f:
                        f.write("".join(line + "\n" for line in lines(k)))
                    os.chmod(script, 0o644)
                    counts.append(callgrind_counts(c, script))
                per[(w, name)] = [(y - x) / n for x, y in zip(*counts)]
                print("%s, %s done" % (name, wname), file=sys.stderr, flush=True)
        finally:
            c.cleanup()
    for w, (wname, _) in enumerate(workloads):
        print("\n%s: per statement (postgres --single under callgrind, %d and %d statements):"
              % (wname, n, 2 * n))
        print("  %-22s %10s %10s %10s %10s %10s" % ("", "Ir", "L1d miss", "L1i miss", "LL miss",
                                                   "Ir - none"))
        base = per[(w, "none")]
        for v, _, _ in variants:
            m = per[(w, v)]
            print("  %-22s %10.0f %10.1f %10.1f %10.1f %10.0f"
                  % (v, m[0], m[1] + m[2], m[3], m[4] + m[5] + m[6], m[0] - base[0]))
        print("  %-22s %10s %10s %10s %10s" % ("module - none", "Ir", "L1d miss", "L1i miss",
                                              "LL miss"))
        for v, _, _ in variants[1:]:
            m = per[(w, v)]
            print("  %-22s %10.0f %10.1f %10.1f %10.1f"
                  % (v, m[0] - base[0], m[1] + m[2] - base[1] - base[2], m[3] - base[3],
                     m[4] + m[5] + m[6] - base[4] - base[5] - base[6]))


def memory(module_dir, a):
    print("\nmemory per entry (%d distinct statements, run once each):" % a.entries)
    for slots in (2, 64, 256):
        c = pg_cluster.Cluster(module_dir)
        try:
            c.initdb("", preload="pcpu_stat_statements")
            # The slots of a bigger machine: PCPU_NSLOTS in the server's
            # environment (pg_ctl passes it on).
            open(c.log, "w").close()
            os.chown(c.log, c.uid, c.gid)
            r = c.as_user(["env", "PCPU_NSLOTS=%d" % slots, c.bin + "/pg_ctl", "-D", c.data,
                           "-l", c.log, "-w", "start"], capture_output=True, text=True)
            if r.returncode != 0:
                pg_cluster.fail("pg_ctl start: " + r.stdout + r.stderr + c.server_log())
            c.started = True
            path = re.search(r'statistics in "([^"]+)"', c.server_log()).group(1)
            c.psql("CREATE EXTENSION pcpu_stat_statements")
            before = os.stat(path).st_blocks * 512
            distinct_statements(c, a.entries)
            time.sleep(0.2)
            after = os.stat(path).st_blocks * 512
            n = int(c.psql("SELECT count(*) FROM pcpu_stat_statements"))
            # The segment's own slot count, as pcpustat lists it.
            tool = os.path.abspath(os.path.join(a.tools, "pcpustat"))
            listed = c.as_user([tool], capture_output=True, text=True).stdout if os.path.exists(
                tool) else ""
            m = re.search(r"postgresql\.%d\s+\S+\s+\d+\s+\d+\s+(\d+)" % c.port, listed)
            print("  PCPU_NSLOTS=%-3d (the segment's slots: %s): %d entries, %d bytes of file more: "
                  "%.0f bytes per entry" % (slots, m.group(1) if m else "?", n, after - before,
                                            (after - before) / max(n, 1)))
        finally:
            c.cleanup()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("module_dir")
    p.add_argument("--clients", default="1,2")
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--entries", type=int, default=500)
    p.add_argument("--memory-only", action="store_true")
    p.add_argument("--tools", default="tools", help="the build's tools/ (pcpustat)")
    p.add_argument("--baseline", help="another build's module folder (pcpu_stat_statements.so, "
                   ".control, .sql), run as a fourth variant: a change measured in one run")
    p.add_argument("--no-memory", action="store_true", help="throughput only")
    p.add_argument("--connections", type=int, metavar="N",
                   help="only the new-connection cost, N entries in the table first")
    p.add_argument("--churn", type=int, metavar="N",
                   help="only the eviction churn: N distinct statements, max 1000")
    p.add_argument("--instructions", type=int, metavar="N",
                   help="only the instructions and cache misses per statement: N and 2N "
                   "statements in single-user mode under callgrind")
    p.add_argument("--connect-tx", type=int, default=300,
                   help="--connections: transactions (connections) per client and round")
    a = p.parse_args()
    a.clients = [int(x) for x in a.clients.split(",")]
    r = subprocess.run(["/usr/lib/postgresql/15/bin/postgres", "--version"],
                       capture_output=True, text=True)
    print("%s; %d CPUs; %s" % (r.stdout.strip(), os.cpu_count(),
                               time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    if a.connections is not None:
        connections(a.module_dir, a)
        return
    if a.churn is not None:
        churn(a.module_dir, a)
        return
    if a.instructions is not None:
        instructions(a.module_dir, a)
        return
    if not a.memory_only:
        throughput(a.module_dir, a)
    if not a.no_memory:
        memory(a.module_dir, a)


if __name__ == "__main__":
    main()
