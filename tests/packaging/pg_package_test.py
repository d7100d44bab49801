#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""postgresql-15-pcpu as a PostgreSQL user meets it (deb_test.sh, section 6):
the extension's files as the package installs them, in a cluster of its
own (integrations/postgresql/tests/pg_cluster.py's Cluster: initdb in a
temporary folder, run as the postgres user, stopped and removed at the
end), with the steps of the README's PostgreSQL section as it writes
them: its shared_preload_libraries line, its psql statements (CREATE
EXTENSION, a query on the view), in order; then a statement run 3 times
is counted 3 times in the view pcpu_stat_statements, and the packaged
pcpustat reads the same count from outside the database, from the segment
the README names (postgresql.<port>).

Usage: pg_package_test.py ROOT
  ROOT  a folder where postgresql-15-pcpu, pcpu-tools and the libraries
        they depend on are unpacked (dpkg -x); the postgres user must be
        able to read it.

Exit status: 0 passed, 1 failed, 77 cannot run here (not root and not the
postgres user, no PostgreSQL 15 server or psql), as pg_test.py.
"""
import os
import pwd
import re
import shutil
import subprocess
import time
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "integrations", "postgresql", "tests"))
from pg_cluster import PG_BIN, USER, Cluster, fail, skip  # noqa: E402

PG_CONFIG = PG_BIN + "/pg_config"
README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
# How many times the test's statement runs: the count the view and
# pcpustat must both show.
RUNS = 3


def pg_config(what):
    return subprocess.run([PG_CONFIG, what], check=True, capture_output=True,
                          text=True).stdout.strip()


def readme_steps():
    """(shared_preload_libraries, [SQL]) of the README's PostgreSQL
    section's sh blocks; fails where it says neither, or does not read
    the segment postgresql.<port> with pcpustat."""
    with open(README) as f:
        text = f.read()
    if "\n## PostgreSQL\n" not in text:
        fail("README.md has no '## PostgreSQL' section")
    sec = text[text.index("\n## PostgreSQL\n"):]
    sec = sec[:sec.index("\n## ", 1)]
    sh = "\n".join(re.findall(r"^```sh\n(.*?)^```$", sec, re.M | re.S))
    preload = re.search(r"shared_preload_libraries = '([^']*)'", sh)
    sql = re.findall(r"psql -c '([^']*)'", sh)
    if not preload or not sql:
        fail("README.md's PostgreSQL section: no shared_preload_libraries line or psql -c '...'")
    if not re.search(r"\bpcpustat postgresql\.5432\b", sh):
        fail("README.md's PostgreSQL section does not read the segment postgresql.5432 with pcpustat")
    return preload.group(1), sql


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    root = os.path.abspath(sys.argv[1])
    if shutil.which("psql") is None or not os.path.exists(PG_BIN + "/postgres"):
        skip("PostgreSQL 15's server and psql (postgresql-15) are not installed")
    if os.geteuid() != 0 and pwd.getpwuid(os.geteuid()).pw_name != USER:
        skip("the server runs as %s: run the test as root or as %s" % (USER, USER))
    # The package's files, where PostgreSQL 15's pg_config says they go.
    so = root + pg_config("--pkglibdir") + "/pcpu_stat_statements.so"
    ext = root + pg_config("--sharedir") + "/extension"
    files = [so, ext + "/pcpu_stat_statements.control", ext + "/pcpu_stat_statements--1.0.sql"]
    for f in files:
        if not os.path.exists(f):
            fail("the package has no " + f[len(root):])
    # Cluster takes the module's files from one folder.
    module_dir = tempfile.mkdtemp(prefix="pcpu-pgpkg.")
    for f in files:
        shutil.copy2(f, module_dir)
    ma = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], check=True,
                        capture_output=True, text=True).stdout.strip()
    # The packaged libraries (the module has no run path), for the server
    # and pcpustat; the segment where a server publishes it, never a test's
    # PCPU_SEGMENT_DIR.
    os.environ["LD_LIBRARY_PATH"] = root + "/usr/lib/" + ma
    os.environ.pop("PCPU_SEGMENT_DIR", None)
    preload, readme_sql = readme_steps()
    c = Cluster(module_dir)
    try:
        # A copy of the top statements each second (10 by default): the
        # README's pcpustat reads that copy (docs/postgresql.md, Export).
        c.initdb("pcpu_stat_statements.export_interval = 1", preload=preload)
        c.start()
        if "pcpu_stat_statements: statistics in" not in c.server_log():
            fail("the packaged module did not publish its statistics:\n" + c.server_log())
        for sql in readme_sql:
            print("README: psql -c '%s'" % sql)
            c.psql(sql)
        for _ in range(RUNS):
            c.psql("SELECT 42 AS pcpu_package_test")
        row = c.psql("SELECT queryid, calls FROM pcpu_stat_statements "
                     "WHERE query = 'SELECT $1 AS pcpu_package_test'")
        if not row or row.split("|")[1] != str(RUNS):
            fail("pcpu_stat_statements: %r, not %d calls of the test's statement" % (row, RUNS))
        queryid = row.split("|")[0]
        print("the view: %s calls of queryid %s" % (RUNS, queryid))
        # From outside, as docs/postgresql.md says: the server's user reads
        # the segment postgresql.<port>.
        # The copy is at most export_interval old: a few tries.
        for _ in range(40):
            r = c.as_user([root + "/usr/bin/pcpustat", "postgresql.%d" % c.port,
                           '*_calls_total*queryid="%s"*' % queryid],
                          capture_output=True, text=True)
            lines = [line.split() for line in r.stdout.splitlines()
                     if "pcpu_stat_statements_calls_total" in line]
            if r.returncode != 0 or (len(lines) == 1 and lines[0][-1] == str(RUNS)):
                break
            time.sleep(0.25)
        print(r.stdout.strip())
        if r.returncode != 0 or len(lines) != 1 or lines[0][-1] != str(RUNS):
            fail("pcpustat postgresql.%d: exit %d, %r%s, not one calls series of %d"
                 % (c.port, r.returncode, r.stdout, r.stderr, RUNS))
        said = [line for line in c.server_log().splitlines()
                if "pcpu_stat_statements:" in line and "statistics in" not in line
                and "statements exported in" not in line]  # the two lines of a good start
        if said:
            fail("the module complained:\n" + "\n".join(said))
    finally:
        c.cleanup()
        shutil.rmtree(module_dir, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
