# SPDX-License-Identifier: MIT
"""A real nginx for the module's tests: configuration, start, signals,
workers, requests, the module's statistics read back.

nginx runs as installed (Debian's /usr/sbin/nginx, the binary the module
is built against), with a prefix of its own in a temporary directory,
ports chosen free, and a segment name of its own (pcpu_stats_segment), so
that tests and other programs on the machine never share one.
"""
import gzip
import http.client
import json
import os
import platform
import random
import signal
import socket
import subprocess
import tempfile
import time

NGINX = "/usr/sbin/nginx"

# epoll_wait, epoll_pwait, epoll_pwait2 on the architectures we run on: a
# worker stopped in one of them is between requests' steps, in the event
# loop, never between the access log's line and the module's count.
EPOLL_WAIT = {"x86_64": {232, 281, 441}, "aarch64": {22, 441}}.get(platform.machine(), set())


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fail(msg):
    raise AssertionError(msg)


def expect(cond, msg):
    if not cond:
        fail(msg)


def eq(a, b, what):
    if a != b:
        fail("%s: %r != %r" % (what, a, b))


def wait_for(cond, what, timeout=30.0, step=0.02):
    """Polls cond() until it is true; a hang fails after `timeout` s."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            fail("timed out waiting for " + what)
        time.sleep(step)


def proc_stat(pid):
    """(state, ppid, start time) of a process, or None if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def gone(pid):
    """True once a process has exited (gone or a zombie): one read of its
    stat, since it may vanish between two."""
    st = proc_stat(pid)
    return st is None or st[0] == "Z"


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def children(ppid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st and st[1] == ppid and st[0] != "Z":
                out.append(int(d))
    return sorted(out)


# Every prefix made: removed when the test passes (kept for a look when
# it fails).
PREFIXES = []


class Nginx:
    """One nginx instance: its prefix, configuration, master."""

    def __init__(self, module, body, name=None, prefix=None, main="", workers=2, **extra):
        self.__dict__.update(extra)
        self.module = module
        self.prefix = prefix or tempfile.mkdtemp(prefix="pcpu-nginx-")
        PREFIXES.append(self.prefix)
        os.makedirs(os.path.join(self.prefix, "logs"), exist_ok=True)
        os.chmod(self.prefix, 0o755)
        self.segment = name or "nginx-test-%d-%d" % (os.getpid(), random.randrange(1 << 30))
        self.port = free_port()
        self.status_port = free_port()
        self.main = main
        self.workers_n = workers
        self.body = body
        self.conf = os.path.join(self.prefix, "nginx.conf")
        self.pidfile = os.path.join(self.prefix, "logs", "nginx.pid")
        self.masters = []
        self.write_conf()

    def text(self, body=None, load=True, extra_http=""):
        return """%s
worker_processes %s;
error_log %s/logs/error.log notice;
pid %s;
%s
events { worker_connections 1024; }
http {
    pcpu_stats_segment %s%s;
    %s
    %s
    server {
        listen 127.0.0.1:%d;
        server_name status.test;
        access_log off;
        pcpu_stats off;
        location / { pcpu_stats_display; }
    }
}
""" % ("load_module %s;" % self.module if load else "", self.workers_n, self.prefix, self.pidfile,
       self.main, self.segment, getattr(self, "segment_options", ""), extra_http, (body if body is not None else self.body) % self.__dict__,
       self.status_port)

    def write_conf(self, **kw):
        self.conf_kw = kw  # start() writes it again with other ports
        with open(self.conf, "w") as f:
            f.write(self.text(**kw))

    def write_conf_without_module(self):
        """The same ports, no module, no pcpu directive."""
        with open(self.conf, "w") as f:
            f.write("""worker_processes %s;
error_log %s/logs/error.log notice;
pid %s;
events { worker_connections 1024; }
http {
    server { listen 127.0.0.1:%d; location / { return 200; } }
    server { listen 127.0.0.1:%d; location / { return 204; } }
}
""" % (self.workers_n, self.prefix, self.pidfile, self.port, self.status_port))

    def run(self, *args, check=True):
        r = subprocess.run([NGINX, "-p", self.prefix, "-c", self.conf] + list(args),
                           capture_output=True, text=True)
        if check and r.returncode != 0:
            fail("nginx %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
        return r

    def start(self):
        # free_port() closes its socket before nginx binds the port, and
        # any connect() on this machine (other tests' clients) may take it
        # as its ephemeral port meanwhile: nginx then refuses to start
        # ("bind() ... failed (98: Address already in use)"). Other ports,
        # twice at most; any other failure is the test's.
        for attempt in range(3):
            r = self.run(check=False)
            if r.returncode == 0:
                break
            if "(98:" not in r.stderr or attempt == 2:
                fail("nginx: %s%s" % (r.stdout, r.stderr))
            self.port, self.status_port = free_port(), free_port()
            self.write_conf(**getattr(self, "conf_kw", {}))
        self.first_master = self.master()
        self.masters.append(self.first_master)
        wait_for(lambda: len(self.workers()) >= 1, "workers")
        wait_for(self.answers, "nginx to answer")
        return self

    def master(self):
        try:
            with open(self.pidfile) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def workers(self, master=None):
        m = master or self.master()
        return [p for p in children(m) if "worker process" in cmdline(p)
                and "shutting down" not in cmdline(p)]

    def answers(self):
        try:
            self.get("/", port=self.status_port)
            return True
        except OSError:
            return False

    def get(self, path, host=None, headers=None, port=None, method="GET"):
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=30)
        h = dict(headers or {})
        if host:
            h["Host"] = host
        c.request(method, path, headers=h)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), body

    def stats(self, fmt="json"):
        """The module's statistics, from its display handler."""
        st, hd, body = self.get("/?format=" + fmt, port=self.status_port,
                                headers={"Accept-Encoding": "identity"})
        if st != 200:
            fail("status page: %d %r" % (st, body[:200]))
        return json.loads(body) if fmt == "json" else body.decode()

    def reload(self):
        """nginx -s reload; returns once the new workers run."""
        m = self.master()
        old = set(self.workers(m))
        self.run("-s", "reload")
        wait_for(lambda: set(self.workers(m)) and not (set(self.workers(m)) & old),
                 "new workers after reload")

    def upgrade(self):
        """A binary upgrade: USR2 (a new master, exec()ed by the old one),
        then QUIT to the old master. Returns (old master, new master)."""
        old = self.master()
        os.kill(old, signal.SIGUSR2)
        new = wait_for(lambda: self.master() if self.master() not in (None, old) else None,
                       "the new master's pid file")
        self.masters.append(new)
        wait_for(lambda: self.workers(new), "the new master's workers")
        os.kill(old, signal.SIGQUIT)
        return old, new

    def kill_worker(self):
        """SIGKILLs a worker that is in the middle of requests but stopped in
        its event loop (so never between the access log and the module).
        Returns its pid."""
        w = self.stop_worker()
        os.kill(w, signal.SIGKILL)
        wait_for(lambda: gone(w), "killed worker")
        return w

    def stop_worker(self):
        """SIGSTOPs a worker in its event loop (epoll_wait: holding no lock,
        between requests' log phases); SIGCONT resumes it. Returns its pid."""
        for _ in range(5000):
            ws = self.workers()
            if not ws:
                time.sleep(0.01)
                continue
            w = random.choice(ws)
            try:
                os.kill(w, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            wait_for(lambda: (proc_stat(w) or ("T",))[0] in "Tt", "worker to stop")
            try:
                with open("/proc/%d/syscall" % w) as f:
                    nr = f.read().split()[0]
            except OSError:
                nr = "-1"
            if nr.isdigit() and int(nr) in EPOLL_WAIT:
                return w
            try:
                os.kill(w, signal.SIGCONT)
            except ProcessLookupError:
                pass
            time.sleep(0.002)
        fail("no worker ever stopped in its event loop")

    def stop(self):
        m = self.master()
        if m is None or proc_stat(m) is None:
            return
        os.kill(m, signal.SIGQUIT)
        wait_for(lambda: gone(m), "nginx to quit")
        # Its workers too (the master waits for them before it exits).
        wait_for(lambda: not children(m), "workers to exit")

    def kill_all(self):
        """Last resort (a failed test): no nginx of ours left behind."""
        for m in set(self.masters) | {self.master()}:
            if m and proc_stat(m):
                for p in children(m) + [m]:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass

    def error_log(self):
        with open(os.path.join(self.prefix, "logs", "error.log")) as f:
            return f.read()


def series(doc, family):
    """[(labels dict, value or histogram dict)] of a family in the module's JSON."""
    for f in doc["families"]:
        if f["name"] in (family, family + "_total"):
            return [(m["labels"], m.get("value", m)) for m in f["metrics"]]
    return []


def total(doc, family, **match):
    n = 0
    for labels, v in series(doc, family):
        if all(labels.get(k) == val for k, val in match.items()):
            n += v if isinstance(v, (int, float)) else v["count"]
    return n


def ungzip(body):
    return gzip.decompress(body)


def steady(text):
    """An exposition (bytes) without the connections' samples, which every
    scrape changes (its own connection is accepted, then writing): two
    scrapes in a row are otherwise the same."""
    return b"\n".join(l for l in text.split(b"\n") if not l.startswith(b"nginx_connections"))


def reload_survives(n, m):
    """nginx -s reload with master m: it must stay (and be the pid file's), and
    its new workers replace the old ones."""
    old = set(n.workers(m))
    n.run("-s", "reload")
    wait_for(lambda: gone(m) or (set(n.workers(m)) and not (set(n.workers(m)) & old)),
             "new workers after reload")
    if gone(m):
        for w in old:  # orphans of the master that exited: none left behind
            try:
                os.kill(w, signal.SIGKILL)
            except OSError:
                pass
        fail("the master exited on a reload:\n" + n.error_log()[-3000:])
    eq(n.master(), m, "the master after a reload")


def grown(n, count, want):
    """The statistics once count(statistics) reaches want: a worker counts a
    request in its log phase, just after the client has its response, so a
    read that follows the last response at once may come before its count."""
    last = []

    def reached():
        last[:] = [n.stats()]
        return count(last[0]) >= want
    try:
        wait_for(reached, "the counts to reach %r" % want, timeout=10)
    except AssertionError:
        pass  # the caller's check says what differs
    return last[0]


def log_lines(n, what):
    return [l for l in n.error_log().splitlines() if what in l]


SKIP = 77


def strace_readers(pid, action, timeout=30.0):
    """The threads of process `pid` that pread() its pcpu segment while
    action() runs: strace -f attached to every thread first (TracerPid in
    each thread's status), then the action, then strace stopped."""
    import shutil
    if not shutil.which("strace"):
        fail("strace not installed (scripts/install-deps.sh)")
    seg = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if "/pcpu-" in os.readlink("/proc/%d/fd/%s" % (pid, fd)):
                seg.add(int(fd))
        except OSError:
            pass
    out = tempfile.NamedTemporaryFile(prefix="pcpu-strace-", delete=False)
    out.close()
    p = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=pread64", "-o", out.name,
                          "-p", str(pid)], stderr=subprocess.DEVNULL)
    try:
        def attached():
            for t in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                    if "TracerPid:\t%d\n" % p.pid not in f.read():
                        return False
            return True
        wait_for(attached, "strace attached to %d" % pid, timeout=timeout)
        action()
    finally:
        p.terminate()
        p.wait()
    readers = set()
    with open(out.name) as f:
        for line in f:
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[1].startswith("pread64("):
                fd = parts[1][len("pread64("):].split(",", 1)[0]
                if fd.isdigit() and int(fd) in seg:
                    readers.add(int(parts[0]))
    os.unlink(out.name)
    return readers


def main(tests, doc, name):
    """The scenarios' command line: TEST MODULE_SO BUILD_DIR. Exit 0 when
    the test passed, 77 when it cannot run here (ctest: skipped)."""
    import shutil
    import sys
    if len(sys.argv) != 4 or sys.argv[1] not in tests:
        print(doc)
        return 2
    module, build = os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    if not os.path.exists(NGINX):
        print("nginx not installed (scripts/install-deps.sh)")
        return SKIP
    if tests[sys.argv[1]](module, build) == SKIP:
        return SKIP
    for p in PREFIXES:
        shutil.rmtree(p, ignore_errors=True)
    print("%s %s: passed" % (name, sys.argv[1]))
    return 0
