#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A private PostgreSQL 15 cluster for pcpu_stat_statements' tests, its
package test and its benchmark: initdb in a temporary folder as the
`postgres` user, a server on a private port and unix socket directory (no
TCP), psql and pgbench against it, stopped and removed at the end; and the
tests' small helpers (psql from a file, waiting for a query's answer, a
backend's pid, a read from outside by another user). Split from
pg_test.py, whose scenarios use it."""
import os
import pwd
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

PG_BIN = "/usr/lib/postgresql/15/bin"
PG_LIB = "/usr/lib/postgresql/15/lib"
PG_SHARE = "/usr/share/postgresql/15"
USER = "postgres"


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def skip(msg):
    print("SKIP: " + msg, flush=True)
    sys.exit(77)


def require(module_dir, tools):
    """What every scenario needs before it makes a cluster: the module
    built in module_dir (else a failure), the client programs `tools`, the
    postgres user, and to run as root or as that user (else a skip)."""
    if not os.path.exists(os.path.join(module_dir, "pcpu_stat_statements.so")):
        fail("no pcpu_stat_statements.so in " + module_dir)
    if any(shutil.which(t) is None for t in tools):
        skip("%s (postgresql-client-15) are not installed" % " and ".join(tools))
    try:
        pwd.getpwnam(USER)
    except KeyError:
        skip("no user %s (postgresql-15 makes it)" % USER)
    if os.geteuid() != 0 and pwd.getpwuid(os.geteuid()).pw_name != USER:
        skip("the server runs as %s: run the test as root or as %s" % (USER, USER))


class Cluster:
    """A private PostgreSQL installation tree and cluster in a temporary
    folder. PostgreSQL 15 finds its share and library folders relative to
    its binary (and reads extensions' control files only from its share
    folder), so the binaries are copied into T/usr/lib/postgresql/15/bin
    and the share and library folders are made of symbolic links to the
    system's, plus this build's module and files: nothing is installed
    into the system."""

    def __init__(self, module_dir):
        self.root = tempfile.mkdtemp(prefix="pcpu-pg.")
        os.chmod(self.root, 0o755)
        self.bin = self.root + PG_BIN
        lib = self.root + PG_LIB
        share = self.root + PG_SHARE
        os.makedirs(self.bin)
        os.makedirs(lib)
        os.makedirs(share + "/extension")
        for name in ("postgres", "initdb", "pg_ctl"):
            shutil.copy2(os.path.join(PG_BIN, name), self.bin)
        for name in os.listdir(PG_LIB):
            os.symlink(os.path.join(PG_LIB, name), os.path.join(lib, name))
        for name in os.listdir(PG_SHARE):
            if name != "extension":
                os.symlink(os.path.join(PG_SHARE, name), os.path.join(share, name))
        for name in os.listdir(PG_SHARE + "/extension"):
            os.symlink(os.path.join(PG_SHARE, "extension", name),
                       os.path.join(share, "extension", name))
        for name in os.listdir(module_dir):
            if name.startswith("pcpu_stat_statements") and (
                    name.endswith(".so") or name.endswith(".control") or name.endswith(".sql")):
                dest = lib if name.endswith(".so") else share + "/extension"
                shutil.copy2(os.path.join(module_dir, name), dest)
        self.data = self.root + "/data"
        self.sock = self.root + "/sock"
        os.makedirs(self.sock)
        self.uid = pwd.getpwnam(USER).pw_uid
        self.gid = pwd.getpwnam(USER).pw_gid
        for d in (self.sock,):
            os.chown(d, self.uid, self.gid)
        self.port = free_port()
        self.log = self.root + "/server.log"
        self.started = False

    def as_user(self, argv, **kw):
        """argv run as the postgres user (runuser when root)."""
        if os.geteuid() == 0:
            argv = ["runuser", "-u", USER, "--"] + argv
        return subprocess.run(argv, cwd=self.root, **kw)

    def initdb(self, conf, preload="pg_stat_statements,pcpu_stat_statements"):
        os.makedirs(self.data)
        os.chown(self.data, self.uid, self.gid)
        r = self.as_user([self.bin + "/initdb", "-D", self.data, "-U", USER, "-A", "trust",
                          "--no-sync", "-E", "UTF8", "--locale=C"],
                         capture_output=True, text=True)
        if r.returncode != 0:
            fail("initdb: " + r.stdout + r.stderr)
        with open(self.data + "/postgresql.conf", "a") as f:
            f.write("\n# pcpu's test\nlisten_addresses = ''\nport = %d\n"
                    "unix_socket_directories = '%s'\nfsync = off\n"
                    "shared_preload_libraries = '%s'\n"
                    "restart_after_crash = on\n%s\n" % (self.port, self.sock, preload, conf))

    def start(self):
        open(self.log, "w").close()
        os.chown(self.log, self.uid, self.gid)
        r = self.as_user([self.bin + "/pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60",
                          "start"], capture_output=True, text=True)
        if r.returncode != 0:
            fail("pg_ctl start: %s%s\n--- server log:\n%s" % (r.stdout, r.stderr, self.server_log()))
        self.started = True

    def stop(self):
        if self.started:
            self.as_user([self.bin + "/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"],
                         capture_output=True, text=True)
            self.started = False

    def server_log(self):
        try:
            with open(self.log) as f:
                return f.read()[-int(os.environ.get("PSS_LOG_TAIL", "6000")):]
        except OSError:
            return ""

    def psql(self, sql, db="postgres", check=True):
        r = self.as_user(["psql", "-X", "-q", "-At", "-F", "|", "-v", "ON_ERROR_STOP=1",
                          "-h", self.sock, "-p", str(self.port), "-d", db, "-c", sql],
                         capture_output=True, text=True)
        if check and r.returncode != 0:
            fail("psql %r: %s%s\n--- server log:\n%s" % (sql, r.stdout, r.stderr,
                                                         self.server_log()))
        return r.stdout.strip()

    def pgbench(self, args, check=True):
        r = self.as_user(["pgbench", "-h", self.sock, "-p", str(self.port)] + args + ["postgres"],
                         capture_output=True, text=True)
        if check and r.returncode != 0:
            fail("pgbench %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
        return r

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def free_port():
    """A port no unix socket of ours uses and no TCP server listens on (the
    segment's name carries it: postgresql.<port>)."""
    for _ in range(100):
        port = random.randint(20000, 60000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        if not os.path.exists("/tmp/.s.PGSQL.%d" % port):
            return port
    fail("no free port")


def psql_file(c, name, lines, timeout=60):
    """The statements `lines` run by one psql session (one backend), which
    must end within `timeout` seconds (a generous bound: a session blocked
    on anything never ends)."""
    path = c.root + "/" + name
    with open(path, "w") as f:
        f.write("".join(line + ";\n" for line in lines))
    os.chmod(path, 0o644)
    try:
        r = c.as_user(["psql", "-X", "-q", "-o", "/dev/null", "-v", "ON_ERROR_STOP=1",
                       "-h", c.sock, "-p", str(c.port), "-d", "postgres", "-f", path],
                      capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0:
        fail("psql -f %s: %s%s" % (name, r.stdout, r.stderr))
    return r


def wait_for(c, sql, want, what, timeout=30):
    """Polls `sql` until it returns `want` (a function of the output)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = c.psql(sql)
        if want(out):
            return out
        time.sleep(0.05)
    fail("%s: still %r after %d s\n--- server log:\n%s" % (what, out, timeout, c.server_log()))


def backend_pid(c, timeout=20):
    """The pid of a pgbench client's backend."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        pids = c.psql("SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' "
                      "AND backend_type = 'client backend'")
        if pids:
            return int(pids.splitlines()[0])
        time.sleep(0.05)
    fail("no pgbench backend to kill")


# A user of no account: neither postgres nor root.
READER_UID = 54321
# A series of calls as pcpustat prints it.
CALLS_LINE = re.compile(r"^\s*pcpu_stat_statements_calls_total\{", re.M)


def other_reader(c):
    """The statistics read from outside by another user, a member of
    `.group` only (the server's own group here: the reader's uid is not
    postgres', its gid not 0): pcpustat -u postgres reads the tree's folder
    and the export, and lists the statements the view lists; the same
    user without the group is refused (the folder is 0750, the files
    0640). Needs root, to take the other user's identity; the scenario
    runs as root or as postgres (require()), and as postgres it says it
    did not check this."""
    if os.geteuid() != 0:
        print("not root: the read by a member of .group (another user) not checked")
        return
    tool = os.environ.get("PCPUSTAT", "pcpustat")
    tree = os.path.dirname(re.search(r'statistics in "([^"]+)"', c.server_log()).group(1))
    want = int(c.psql("SELECT count(*) FROM pcpu_stat_statements"))
    for what, folder in (("the tree", ["-d", tree]), ("the export", [])):
        argv = [tool, "-u", USER] + folder + ["postgresql.%d" % c.port,
                                              "pcpu_stat_statements_calls*"]
        r = subprocess.run(argv, user=READER_UID, group=READER_UID, extra_groups=[c.gid],
                           capture_output=True, text=True, cwd="/")
        got = len(CALLS_LINE.findall(r.stdout))
        # The export holds what the evictor copied last (export_interval):
        # read, perhaps still empty.
        if r.returncode != 0 or "postgresql.%d " % c.port not in r.stdout or \
                (folder and got < want):
            fail("%s read by uid %d in group %d: rc %d, %d series of calls (the view lists "
                 "%d):\n%s%s" % (what, READER_UID, c.gid, r.returncode, got, want,
                                  r.stdout[-1500:], r.stderr[-1500:]))
        r = subprocess.run(argv, user=READER_UID, group=READER_UID, extra_groups=[],
                           capture_output=True, text=True, cwd="/")
        if r.returncode == 0 or CALLS_LINE.search(r.stdout):
            fail("%s read by uid %d outside group %d: not refused\n%s"
                 % (what, READER_UID, c.gid, r.stdout[-1500:]))
    print("read from outside by uid %d in the server's group: the tree (%d statements) and "
          "the export; refused without the group" % (READER_UID, want))
