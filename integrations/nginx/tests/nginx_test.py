#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nginx's pcpu module against a real nginx (README.md, "nginx").

  nginx_test.py TEST MODULE_SO BUILD_DIR

TEST:
  basic     every statistic the module keeps, exactly, in every format;
            the display handler's negotiation, gzip, errors; nginx -t
  reload    reloads keep counting, leak nothing (the master's descriptors,
            the tree's series); a reload without the module ends the tree
  upgrade   binary upgrades (USR2, then QUIT to the old master), twice, and
            a rollback: one tree, counts that never go back nor double
  exact     the proof: under wrk load with reloads, two binary upgrades and
            killed workers, the module's counts equal the access log's lines
            per server, status and key, its bytes the log's $bytes_sent sums
  user      a root master, workers as nobody: they count, register new
            series and read the tree through the master's descriptor
  affinity  worker_processes auto and worker_cpu_affinity auto, exact
  html      the status page in headless Chromium: tables, rates, screenshot
  readers   pcpustat (list, print, JSON, -p), pcpustat serve, pcpustat push
            (OTLP), the OpenTelemetry Collector receiver (go/)
Exit 0 when the test passed, 77 when it cannot run here (ctest: skipped).
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import http.server

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Nginx, fail, free_port, wait_for, series, total, proc_stat, children, gone, ungzip  # noqa: E402
from harness import grown, steady  # noqa: E402

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def segment_files(name):
    return glob.glob("/dev/shm/pcpu-%d*/pcpu.*.%s" % (os.geteuid(), name))


def expect(cond, msg):
    if not cond:
        fail(msg)


def eq(a, b, what):
    if a != b:
        fail("%s: %r != %r" % (what, a, b))


# ---- basic -----------------------------------------------------------------------------

BASIC = """
    proxy_cache_path %(prefix)s/cache keys_zone=c:1m;
    upstream backend { server 127.0.0.1:%(backend_port)d; }
    pcpu_stats on;
    pcpu_stats_filter ua $http_user_agent max_keys=3;
    pcpu_stats_filter k $http_x_key histogram;
    server {
        listen 127.0.0.1:%(port)d;
        server_name a.test;
        location / { return 200 "a\\n"; }
        location /api/ { pcpu_stats on; return 404; }
        location /off { pcpu_stats off; return 200; }
        location /up/ { proxy_pass http://backend/; }
        # nginx sends the first response before it marks the cache entry
        # as there, and the second request may reach another worker in
        # between: without the lock it goes to the backend a second time
        # (a MISS, seen under load in CI). The lock makes it wait for the
        # entry.
        location /cached/ { proxy_cache c; proxy_cache_valid 200 1h; proxy_cache_lock on;
                            proxy_cache_lock_timeout 60s; proxy_pass http://backend/; }
    }
    server {
        listen 127.0.0.1:%(port)d;
        server_name b.test;
        location / { return 503; }
    }
    server {
        listen 127.0.0.1:%(backend_port)d;
        server_name backend.test;
        pcpu_stats off;
        location / { return 200 "from the backend\\n"; }
    }
"""


def test_basic(module, build):
    n = Nginx(module, BASIC, backend_port=free_port())
    # Other tests running beside this one make segments of their own: only
    # a file of nginx -t's process or of the configured name is its own.
    before = set(glob.glob("/dev/shm/pcpu-*/pcpu.*"))
    t = subprocess.Popen([harness.NGINX, "-p", n.prefix, "-c", n.conf, "-t"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    out = t.communicate()[0]
    expect(t.returncode == 0, "nginx -t: %s" % out)
    made = {f for f in set(glob.glob("/dev/shm/pcpu-*/pcpu.*")) - before
            if os.path.basename(f).startswith("pcpu.%d." % t.pid) or f.endswith("." + n.segment)}
    eq(made, set(), "segments made by nginx -t")
    n.start()
    try:
        expect(len(segment_files(n.segment)) == 1, "one segment: %s" % segment_files(n.segment))
        for i in range(7):
            n.get("/", host="a.test", headers={"User-Agent": "ua%d" % (i % 5), "X-Key": "x"})
        for i in range(3):
            n.get("/api/v%d" % i, host="a.test", headers={"User-Agent": "ua0", "X-Key": "y"})
        n.get("/off", host="a.test", headers={"X-Key": "z"})
        for i in range(4):
            n.get("/", host="b.test", headers={"X-Key": b"caf\xe9\xff".decode("latin-1")})
        n.get("/up/x", host="a.test", headers={"X-Key": "x"})
        n.get("/cached/y", host="a.test", headers={"X-Key": "x"})
        n.get("/cached/y", host="a.test", headers={"X-Key": "x"})
        d = grown(n, lambda d: total(d, "nginx_http_requests"), 17)  # log phases after the responses
        eq(total(d, "nginx_http_requests", server="a.test", code="200"), 10, "a.test 200")
        eq(total(d, "nginx_http_requests", server="a.test", code="404"), 3, "a.test 404")
        eq(total(d, "nginx_http_requests", server="b.test", code="503"), 4, "b.test 503")
        eq(total(d, "nginx_http_requests"), 17, "all requests (not /off, not the status server)")
        eq(total(d, "nginx_http_responses", server="a.test", **{"class": "2xx"}), 10, "2xx")
        eq(total(d, "nginx_http_responses", server="b.test", **{"class": "5xx"}), 4, "5xx")
        eq(len(series(d, "nginx_http_responses")), 12, "classes made for both zones, zero or not")
        eq(total(d, "nginx_http_location_requests", server="a.test", location="/api/", code="404"), 3,
           "location zone")
        eq(total(d, "nginx_http_location_requests"), 3, "only the location written with pcpu_stats on")
        eq(total(d, "nginx_http_request_duration_seconds", server="a.test"), 13, "histogram count")
        # Filters: ua admitted ua0, ua1, ua2 (max_keys=3); ua3, ua4 -> __other__.
        eq(total(d, "nginx_http_filter_requests", filter="ua"), 17, "ua filter: every request, under a key or __other__")
        keys = sorted(l["key"] for l, v in series(d, "nginx_http_filter_requests") if l["filter"] == "ua")
        expect(len(keys) == 4 and "__other__" in keys, "3 ua keys and __other__: %s" % keys)
        eq(total(d, "nginx_http_filter_requests", filter="k", key="x"), 10, "k=x")
        eq(total(d, "nginx_http_filter_requests", filter="k", key="y"), 3, "k=y")
        eq(total(d, "nginx_http_filter_requests", filter="k", key="caf\\xe9\\xff"), 4,
           "a key that is not UTF-8, escaped")
        eq(total(d, "nginx_http_filter_responses", filter="k", key="y", **{"class": "4xx"}), 3,
           "key class")
        # Upstreams and cache.
        ups = series(d, "nginx_http_upstream_responses")
        eq(sum(v for l, v in ups if l["upstream"] == "backend" and l["code"] == "200"), 2,
           "upstream responses (the cached one not asked twice): %s" % ups)
        expect(all(l["peer"] == "127.0.0.1:%d" % n.backend_port for l, v in ups), "peer: %s" % ups)
        eq(total(d, "nginx_http_upstream_response_duration_seconds", upstream="backend"), 2,
           "upstream histogram")
        eq(total(d, "nginx_http_cache_requests", server="a.test", cache="MISS"), 1, "cache MISS")
        eq(total(d, "nginx_http_cache_requests", server="a.test", cache="HIT"), 1, "cache HIT")
        # Bytes: the server's, against what the clients got ($bytes_sent).
        expect(total(d, "nginx_http_response_bytes", server="b.test") > 4 * 100, "bytes sent")
        expect(total(d, "nginx_http_request_bytes", server="b.test") > 4 * 40, "bytes received")

        # The display handler: negotiation, formats, gzip, errors.
        st, h, body = n.get("/", port=n.status_port)
        expect(h["content-type"].startswith("text/plain; version=0.0.4"), h["content-type"])
        expect(b'nginx_http_requests_total{server="a.test",code="200"} 10' in body, "text sample")
        if shutil.which("promtool"):
            r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True)
            expect(r.returncode == 0, "promtool: %s" % r.stderr.decode())
        st, h, om = n.get("/", port=n.status_port,
                          headers={"Accept": "application/openmetrics-text;version=1.0.0"})
        expect(h["content-type"].startswith("application/openmetrics-text"), h["content-type"])
        expect(om.endswith(b"# EOF\n"), "OpenMetrics ends with # EOF")
        try:
            from prometheus_client.openmetrics.parser import text_string_to_metric_families
            fams = {f.name: f for f in text_string_to_metric_families(om.decode())}
            expect("nginx_http_requests" in fams, "OpenMetrics parsed: %s" % sorted(fams)[:5])
        except ImportError:
            pass
        st, h, js = n.get("/", port=n.status_port, headers={"Accept": "application/json"})
        expect(h["content-type"].startswith("application/json") and js.startswith(b"{"), "JSON")
        st, h, page = n.get("/", port=n.status_port, headers={"Accept": "text/html,*/*;q=0.8"})
        expect(h["content-type"].startswith("text/html") and b"<title>" in page, "HTML page")
        st, h, gz = n.get("/", port=n.status_port, headers={"Accept-Encoding": "gzip"})
        eq(h.get("content-encoding"), "gzip", "gzip")
        eq(steady(ungzip(gz)), steady(body), "gzip body")
        eq(n.get("/?format=bogus", port=n.status_port)[0], 406, "unknown format")
        eq(n.get("/", port=n.status_port, method="POST")[0], 405, "POST")
        st, h, empty = n.get("/", port=n.status_port, method="HEAD")
        expect(st == 200 and empty == b"", "HEAD")
        st, h, pb = n.get("/", port=n.status_port, headers={
            "Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                      "encoding=delimited"})
        expect(st == 200, "protobuf answered")
        log = n.error_log()
        expect("pcpu: statistics in" in log, "the module says where: %s" % log[-500:])
    finally:
        n.stop()
    eq(segment_files(n.segment), [], "segment removed when nginx quits")


# ---- reload ----------------------------------------------------------------------------

RELOAD = """
    pcpu_stats on;
    pcpu_stats_filter k $arg_k max_keys=5;
    server {
        listen 127.0.0.1:%(port)d;
        server_name r.test;
        location / { return 200 "r\\n"; }
    }
"""


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def settled_fds(n, m):
    """The master's descriptors once a reload has settled: its only children
    are the new workers (old ones finishing their requests still hold a
    channel to the master until it reaps them) and the count reads the same
    five times over 0.2 s."""
    last = []

    def settled():
        if children(m) != sorted(n.workers(m)):
            last.clear()
            return None
        last.append(fds(m))
        del last[:-5]
        return last[0] if len(last) == 5 and len(set(last)) == 1 else None
    return wait_for(settled, "the master's descriptors to settle", step=0.05)


def test_reload(module, build):
    n = Nginx(module, RELOAD).start()
    try:
        m = n.master()
        want = 0
        counts = []
        for i in range(12):
            for j in range(5):
                n.get("/?k=%d" % (j + i), host="r.test")
                want += 1
            n.reload()
            d = n.stats()
            counts.append(total(d, "nginx_http_requests"))
            if i == 1:
                fd_after_two, nseries = settled_fds(n, m), sum(len(f["metrics"]) for f in d["families"])
        eq(counts[-1], want, "requests after 12 reloads")
        expect(counts == sorted(counts), "counts never go back: %s" % counts)
        eq(settled_fds(n, m), fd_after_two, "the master's descriptors after 12 reloads")
        d = n.stats()
        # Keys are bounded: 5 admitted (the bound holds across reloads:
        # the zone is kept), the rest in __other__; no series made twice.
        keys = [l["key"] for l, v in series(d, "nginx_http_filter_requests")]
        eq(len(keys), 6, "5 keys and __other__ after reloads: %s" % keys)
        eq(sum(len(f["metrics"]) for f in d["families"]), nseries + 0, "series after reloads")
        eq(len(segment_files(n.segment)), 1, "one segment")
        # A configuration that fails to load keeps the running one's tree.
        with open(n.conf) as f:
            good = f.read()
        with open(n.conf, "w") as f:
            f.write(good.replace("return 200", "return 200 200 200 200"))
        m = n.master()
        os.kill(m, signal.SIGHUP)
        wait_for(lambda: "invalid number of arguments" in n.error_log(), "the failed reload")
        with open(n.conf, "w") as f:
            f.write(good)
        n.get("/", host="r.test")
        # the request is counted in its worker's log phase, after the
        # client has the response: a read from the other worker may come first
        s = grown(n, lambda s: total(s, "nginx_http_requests"), want + 1)
        eq(total(s, "nginx_http_requests"), want + 1, "after a failed reload")
        eq(len(segment_files(n.segment)), 1, "one segment after a failed reload")
        # Without the module: the tree ends; with it again: a new one.
        n.write_conf_without_module()
        old_workers = set(n.workers())
        n.run("-s", "reload")
        wait_for(lambda: not segment_files(n.segment), "the tree to end when the module goes")
        wait_for(lambda: not (set(n.workers()) & old_workers), "new workers")
        n.write_conf()
        n.reload()
        wait_for(lambda: segment_files(n.segment), "a new tree with the module again")
    finally:
        n.stop()
    eq(segment_files(n.segment), [], "segment removed at quit")


# ---- upgrade ---------------------------------------------------------------------------

UPGRADE = """
    pcpu_stats on;
    pcpu_stats_filter k $arg_k;
    server {
        listen 127.0.0.1:%(port)d;
        server_name u.test;
        location / { return 200 "u\\n"; }
    }
"""


def test_upgrade(module, build):
    n = Nginx(module, UPGRADE).start()
    try:
        path = segment_files(n.segment)
        eq(len(path), 1, "one segment")
        want = 0
        for round_ in range(2):
            for i in range(20):
                n.get("/?k=%d" % (i % 4), host="u.test")
                want += 1
            old, new = n.upgrade()
            wait_for(lambda: gone(old), "the old master to quit")
            eq(segment_files(n.segment), path, "the same segment after upgrade %d" % (round_ + 1))
            eq(total(grown(n, lambda d: total(d, "nginx_http_requests"), want), "nginx_http_requests"), want,
               "counts after upgrade %d" % (round_ + 1))
            expect("joined the old master's statistics" in n.error_log(), "the new master joined")
        for i in range(3):
            n.get("/?k=0", host="u.test")
            want += 1
        d = grown(n, lambda d: total(d, "nginx_http_requests"), want)
        eq(total(d, "nginx_http_requests"), want, "counting after the upgrades")
        eq(total(d, "nginx_http_filter_requests", key="0"), 5 + 5 + 3, "a key across upgrades")
        # A rollback: USR2, then QUIT to the new master; the old one keeps
        # the tree (and its name).
        old = n.master()
        os.kill(old, signal.SIGUSR2)
        new = wait_for(lambda: n.master() if n.master() not in (None, old) else None, "new master")
        n.masters.append(new)
        wait_for(lambda: n.workers(new), "its workers")
        os.kill(new, signal.SIGQUIT)
        wait_for(lambda: gone(new), "the new master to quit")
        # (the old master renames its pid file back when the new one exits)
        wait_for(lambda: n.master() == old, "the old master's pid file back")
        eq(segment_files(n.segment), path, "the tree stays with the old master after a rollback")
        n.get("/", host="u.test")
        eq(total(grown(n, lambda d: total(d, "nginx_http_requests"), want + 1), "nginx_http_requests"),
           want + 1, "counting after the rollback")
        expect("statistics left to the other master" in n.error_log(), "the new master left")
    finally:
        n.stop()
    eq(segment_files(n.segment), [], "segment removed when the last master quits")


# ---- exact -----------------------------------------------------------------------------

EXACT = """
    log_format exact '$server_name|$status|$bytes_sent|$request_length|$http_x_key';
    access_log %(prefix)s/logs/access.log exact;
    pcpu_stats on;
    pcpu_stats_filter key $http_x_key max_keys=40;
    server {
        listen 127.0.0.1:%(port)d;
        server_name a.test;
        location / { return 200 "a\\n"; }
        location /missing { return 404; }
        location /moved { return 301 /; }
        location /static/ { alias %(prefix)s/html/; }
        location /slow/ { alias %(prefix)s/html/; limit_rate 20k; }
    }
    server {
        listen 127.0.0.1:%(port)d;
        server_name b.test;
        location / { return 200 "bbbb\\n"; }
        location /err { return 503; }
        location /static/ { alias %(prefix)s/html/; }
    }
"""

WRK_SCRIPT = r"""
-- Requests of every kind: two servers, statuses 200/301/404/503, a static
-- file, a slow one (limit_rate: in flight when workers are killed), 60
-- keys (past the bound of 40).
local paths = {"/", "/", "/", "/missing", "/moved", "/static/small.txt", "/err"}
local n = 0
init = function(args)
  math.randomseed(os.time() * 1000 + tonumber(tostring({}):sub(8), 16) % 1000)
end
request = function()
  n = n + 1
  local host = (math.random(2) == 1) and "a.test" or "b.test"
  local p = paths[math.random(#paths)]
  if math.random(400) == 1 then p = "/slow/big.bin" end
  return wrk.format("GET", p, {["Host"] = host, ["X-Key"] = "k" .. math.random(60)})
end
"""


def log_counts(path):
    """Per (server, status) lines, per server bytes, per key lines and bytes."""
    req, sent, recv, keys, kbytes = {}, {}, {}, {}, {}
    with open(path) as f:
        for line in f:
            server, status, b, rl, key = line.rstrip("\n").split("|")
            req[(server, status)] = req.get((server, status), 0) + 1
            sent[server] = sent.get(server, 0) + int(b)
            recv[server] = recv.get(server, 0) + int(rl)
            keys[key] = keys.get(key, 0) + 1
            kbytes[key] = kbytes.get(key, 0) + int(b)
    return req, sent, recv, keys, kbytes


def check_exact(n, d):
    """The module's counts against the access log, line for line."""
    req, sent, recv, keys, kbytes = log_counts(os.path.join(n.prefix, "logs", "access.log"))
    mod = {(l["server"], l["code"]): v for l, v in series(d, "nginx_http_requests")}
    eq({k: v for k, v in mod.items() if v}, req, "requests per server and status (module vs log)")
    for server in sent:
        eq(total(d, "nginx_http_response_bytes", server=server), sent[server],
           "%s: bytes sent (module vs $bytes_sent)" % server)
        eq(total(d, "nginx_http_request_bytes", server=server), recv[server],
           "%s: bytes received (module vs $request_length)" % server)
    mkeys = {l["key"]: v for l, v in series(d, "nginx_http_filter_requests")}
    mbytes = {l["key"]: v for l, v in series(d, "nginx_http_filter_response_bytes")}
    if len(keys) > 40:
        expect(len(mkeys) == 41 and "__other__" in mkeys, "40 keys and __other__: %d" % len(mkeys))
    else:
        eq(set(mkeys), set(keys), "keys (module vs log)")
    for k, v in mkeys.items():
        if k != "__other__":
            eq(v, keys.get(k, 0), "key %s (module vs log)" % k)
            eq(mbytes[k], kbytes.get(k, 0), "key %s bytes" % k)
    eq(mkeys.get("__other__", 0), sum(v for k, v in keys.items() if k not in mkeys),
       "__other__ = the log's lines of keys not admitted")
    return sum(req.values())


def test_exact(module, build):
    if not shutil.which("wrk"):
        print("wrk not found (scripts/install-deps.sh installs it)")
        return SKIP
    n = Nginx(module, EXACT, main="worker_shutdown_timeout 30s;")
    os.makedirs(os.path.join(n.prefix, "html"))
    with open(os.path.join(n.prefix, "html", "small.txt"), "w") as f:
        f.write("small static file\n" * 20)
    with open(os.path.join(n.prefix, "html", "big.bin"), "wb") as f:
        f.write(os.urandom(60 * 1024))
    script = os.path.join(n.prefix, "load.lua")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT)
    n.start()
    samples, stop = [], threading.Event()

    def sampler():
        # Counts read all along, through reloads and upgrades: they never go back.
        while not stop.is_set():
            try:
                samples.append(total(n.stats(), "nginx_http_requests"))
            except Exception:  # a status request cut by an upgrade's switch: retried
                pass
            time.sleep(0.05)

    events = []
    try:
        wrk = subprocess.Popen(["wrk", "-t2", "-c16", "-d14s", "-s", script,
                                "http://127.0.0.1:%d/" % n.port],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        t = threading.Thread(target=sampler)
        t.start()
        time.sleep(1)
        n.reload(); events.append("reload")
        time.sleep(1)
        events.append("killed worker %d" % n.kill_worker())
        time.sleep(1)
        old, new = n.upgrade(); events.append("upgrade %d -> %d" % (old, new))
        time.sleep(1)
        n.reload(); events.append("reload")
        time.sleep(1)
        events.append("killed worker %d" % n.kill_worker())
        time.sleep(1)
        old, new = n.upgrade(); events.append("upgrade %d -> %d" % (old, new))
        time.sleep(1)
        events.append("killed worker %d" % n.kill_worker())
        out = wrk.communicate(timeout=120)[0]
        # Every old master and worker done (their last requests logged).
        for m in n.masters[:-1]:
            wait_for(lambda: gone(m), "old master %d" % m, 60)
        wait_for(lambda: len(children(n.master())) == n.workers_n, "only the last workers", 60)
        stop.set()
        t.join()
        settle(n)
        d = n.stats()
        lines = check_exact(n, d)
        eq(total(d, "nginx_http_requests_by_version"), total(d, "nginx_http_requests"),
           "requests by HTTP version: each request once, across it all")
        expect(lines > 1000, "the load ran: %d requests\n%s" % (lines, out))
        expect(samples == sorted(samples) and len(samples) > 20,
               "counts never went back: %d samples, first drop at %s" % (
                   len(samples), next((i for i in range(1, len(samples)) if samples[i] < samples[i - 1]), None)))
        eq(len(segment_files(n.segment)), 1, "one segment all along")
        m = re.search(r"(\d+) requests in", out)
        print("exact: %d log lines = module counts (wrk: %s requests); %s" % (
            lines, m.group(1) if m else "?", "; ".join(events)))
    finally:
        stop.set()
        n.stop()
        n.kill_all()
    eq(segment_files(n.segment), [], "segment removed at the end")


# ---- user ------------------------------------------------------------------------------

USER = """
    log_format exact '$server_name|$status|$bytes_sent|$request_length|$http_x_key';
    access_log %(prefix)s/logs/access.log exact;
    pcpu_stats on;
    pcpu_stats_filter key $http_x_key max_keys=40;
    server {
        listen 127.0.0.1:%(port)d;
        server_name a.test;
        location / { return 200 "a\\n"; }
        location /missing { return 404; }
    }
    server {
        listen 127.0.0.1:%(port)d;
        server_name b.test;
        location / { return 200 "bbbb\\n"; }
    }
"""


def test_user(module, build):
    if os.geteuid() != 0:
        print("not root: the user directive needs a root master")
        return SKIP
    n = Nginx(module, USER, main="user nobody nogroup;", segment_options=" group=nogroup")
    n.start()
    try:
        for w in n.workers():
            with open("/proc/%d/status" % w) as f:
                uid = re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1)
            eq(uid, "65534", "worker %d runs as nobody" % w)
        path = segment_files(n.segment)[0]
        st = os.stat(path)
        expect(st.st_uid == 0 and st.st_gid == 65534 and (st.st_mode & 0o777) == 0o640,
               "root's file, group nogroup, 0640: %o" % st.st_mode)
        # Series the workers meet after start (codes, keys): registered by
        # processes that could not open the file themselves.
        for i in range(50):
            n.get("/missing" if i % 3 else "/", host="a.test" if i % 2 else "b.test",
                  headers={"X-Key": "k%d" % (i % 7)})
        n.reload()
        for i in range(20):
            n.get("/", host="a.test", headers={"X-Key": "new%d" % (i % 3)})
        lines = check_exact_users(n)
        # pcpu_stats_segment ... group=nogroup: that group reads it (a
        # Prometheus exporter's user, say) with pcpustat, not being root.
        if shutil.which("setpriv"):
            r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                os.path.join(build, "tools", "pcpustat"), "-u", "root", n.segment],
                               capture_output=True, text=True)
            expect(r.returncode == 0 and "nginx_http_requests_total" in r.stdout,
                   "pcpustat as a member of the group: %s%s" % (r.stdout[-500:], r.stderr))
        print("user: workers as nobody counted %d requests exactly; the group reads them" % lines)
    finally:
        n.stop()
    eq(segment_files(n.segment), [], "segment removed")


def settle(n):
    """Waits until the access log stops growing: every request in flight
    when the load stopped is answered and logged."""
    path = os.path.join(n.prefix, "logs", "access.log")
    last = [-1, time.monotonic()]

    def still():
        size = os.path.getsize(path)
        if size != last[0]:
            last[0], last[1] = size, time.monotonic()
        return time.monotonic() - last[1] > 0.5
    wait_for(still, "the access log to settle", 60)


def check_exact_users(n):
    settle(n)
    return check_exact(n, n.stats())


# ---- affinity --------------------------------------------------------------------------

def test_affinity(module, build):
    if not shutil.which("wrk"):
        return SKIP
    n = Nginx(module, USER, main="worker_cpu_affinity auto;", workers="auto")
    n.start()
    try:
        # (start() waits for the first worker only: the others may still be forking)
        wait_for(lambda: len(n.workers()) == os.cpu_count(), "worker_processes auto: a worker per CPU")
        allowed = set()
        for w in n.workers():
            with open("/proc/%d/status" % w) as f:
                allowed.add(re.search(r"^Cpus_allowed_list:\s+(\S+)", f.read(), re.M).group(1))
        expect(len(allowed) == len(n.workers()), "each worker on its own CPU: %s" % allowed)
        script = os.path.join(n.prefix, "load.lua")
        with open(script, "w") as f:
            f.write(WRK_SCRIPT.replace('"/static/small.txt", "/err"', '"/"')
                    .replace('if math.random(400) == 1 then p = "/slow/big.bin" end', ""))
        subprocess.run(["wrk", "-t2", "-c8", "-d3s", "-s", script, "http://127.0.0.1:%d/" % n.port],
                       capture_output=True, check=True)
        lines = check_exact_users(n)
        # The per-CPU copies: every worker's CPU counted into its own slot.
        out = subprocess.run([os.path.join(build, "tools", "pcpustat"), "-p", n.segment,
                              "nginx_http_requests_total"], capture_output=True, text=True)
        expect(out.returncode == 0, out.stderr)
        cpus = set(re.findall(r"cpu(\d+)=", out.stdout)) or set(re.findall(r"\bcpu(\d+)\b", out.stdout))
        if os.cpu_count() > 1:
            expect(len(cpus) > 1, "more than one CPU's slot used:\n%s" % out.stdout)
        print("affinity: %d workers, %d requests exact, slots of CPUs %s" % (
            len(n.workers()), lines, sorted(cpus)))
    finally:
        n.stop()


# ---- html ------------------------------------------------------------------------------

def chromium():
    for c in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(c):
            return shutil.which(c)
    return None


class Browser:
    """Headless Chromium driven over its DevTools pipe (--remote-debugging-pipe:
    JSON messages ending in NUL on descriptors 3 and 4), so the page runs in
    real time -- its rates are over the real seconds between its reads --
    and is read and photographed when we say."""

    def __init__(self, exe, flags, url):
        self.to_r, self.to_w = os.pipe()
        self.from_r, self.from_w = os.pipe()
        os.set_inheritable(self.to_r, True)
        os.set_inheritable(self.from_w, True)

        def fds():
            os.dup2(self.to_r, 3)
            os.dup2(self.from_w, 4)
        self.p = subprocess.Popen([exe] + flags + ["--remote-debugging-pipe", url],
                                  preexec_fn=fds, close_fds=False,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(self.to_r)
        os.close(self.from_w)
        self.buf, self.next_id = b"", 0
        page = wait_for(lambda: next((t for t in self.call("Target.getTargets")["targetInfos"]
                                      if t["type"] == "page"), None), "a page target")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True)["sessionId"]

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.from_r, 1 << 16)
                if not chunk:
                    fail("chromium exited: %s" % self.p.stderr.read().decode()[-2000:])
                self.buf += chunk
            line, self.buf = self.buf.split(b"\0", 1)
            r = json.loads(line)
            if r.get("id") == self.next_id:
                if "error" in r:
                    fail("%s: %s" % (method, r["error"]))
                return r["result"]

    def page(self, method, **params):
        return self.call(method, session=self.session, **params)

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
        os.close(self.to_w)
        os.close(self.from_r)


def test_html(module, build):
    browser = chromium()
    if not browser:
        print("chromium not found (scripts/install-deps.sh installs Debian's)")
        return SKIP
    n = Nginx(module, BASIC, backend_port=free_port())
    n.start()
    profile = tempfile.mkdtemp(prefix="pcpu-chromium-")
    stop = threading.Event()

    def traffic():
        i = 0
        while not stop.is_set():
            try:
                n.get("/" if i % 4 else "/api/x", host="a.test" if i % 3 else "b.test",
                      headers={"User-Agent": "ua%d" % (i % 2), "X-Key": "key-%d" % (i % 5)})
                n.get("/up/z", host="a.test", headers={"X-Key": "up"})
            except OSError:
                pass
            i += 1
            time.sleep(0.005)

    t = threading.Thread(target=traffic)
    t.start()
    out = os.path.join(build, "integrations", "nginx", "status-page.png")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             "--user-data-dir=" + profile, "--window-size=1280,1000"]
    url = "http://127.0.0.1:%d/" % n.status_port
    b = None
    try:
        time.sleep(0.5)
        b = Browser(browser, flags, url)
        # The page reads the statistics every second: after a few reads its
        # tables are there, with rates between its last two.
        time.sleep(3.5)
        html = b.page("Runtime.evaluate", expression="document.documentElement.outerHTML",
                      returnByValue=True)["result"]["value"]
        for want in ('id="servers"', "a.test", "b.test", 'id="locations"', "/api/",
                     'id="filter-k"', "key-3", 'id="upstreams"', "backend", "req/s", "Updated",
                     'id="connections"', "accepted/s"):
            expect(want in html, "status page shows %r:\n%s" % (want, html[-3000:]))
        expect(re.search(r'id="filter-k"><thead><tr>[^\n]*?<th>p99</th></tr></thead>', html),
               "filter k's latency (histogram): p50 and p99 columns")
        # Rates: requests per second while the traffic runs, not zero.
        row = re.search(r'<td class="name">a\.test</td><td>[\d,]+</td><td>([^<]+)</td>', html)
        expect(row and re.match(r"[\d.,]+$", row.group(1)) and
               float(row.group(1).replace(",", "")) > 0,
               "a rate in the a.test row: %s" % (row.group(0) if row else html[-2000:]))
        png = b.page("Page.captureScreenshot", format="png")["data"]
        with open(out, "wb") as f:
            f.write(__import__("base64").b64decode(png))
        expect(os.path.getsize(out) > 10000, "screenshot %s" % out)
        print("html: tables and rates shown (a.test: %s req/s); screenshot %s (%d bytes)" % (
            row.group(1), out, os.path.getsize(out)))
    finally:
        if b:
            b.close()
        stop.set()
        t.join()
        n.stop()
        shutil.rmtree(profile, ignore_errors=True)


# ---- readers ---------------------------------------------------------------------------

class OtlpSink(http.server.BaseHTTPRequestHandler):
    bodies = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        OtlpSink.bodies.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def test_readers(module, build):
    pcpustat = os.path.join(build, "tools", "pcpustat")
    n = Nginx(module, RELOAD).start()
    serve = None
    try:
        for i in range(9):
            n.get("/?k=%d" % (i % 2), host="r.test")
        d = grown(n, lambda d: total(d, "nginx_http_requests"), 9)
        eq(total(d, "nginx_http_requests"), 9, "display")
        # pcpustat: listed, printed, as JSON, per CPU.
        out = subprocess.run([pcpustat], capture_output=True, text=True).stdout
        expect(n.segment in out, "pcpustat lists the segment:\n" + out)
        out = subprocess.run([pcpustat, n.segment], capture_output=True, text=True)
        expect(out.returncode == 0 and re.search(
            r'nginx_http_requests_total\{server="r.test",code="200"\}\s+9', out.stdout),
            "pcpustat prints it:\n" + out.stdout + out.stderr)
        js = json.loads(subprocess.run([pcpustat, "-j", n.segment], capture_output=True,
                                       text=True, check=True).stdout)
        eq(js["state"], "live", "pcpustat -j: the tree lives (its publisher exited when nginx daemonised)")
        eq(total(js["statistics"], "nginx_http_requests"), 9, "pcpustat -j")
        # pcpustat serve.
        port = free_port()
        serve = subprocess.Popen([pcpustat, "serve", "--listen", "127.0.0.1:%d" % port, n.segment],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        import urllib.request

        def scrape():
            try:
                return urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
            except OSError:
                return None
        text = wait_for(scrape, "pcpustat serve")
        expect(re.search(r'nginx_http_requests_total\{server="r.test",code="200",pcpu_segment="%s"'
                         % re.escape(n.segment), text), "pcpustat serve:\n" + text[:2000])
        # pcpustat push --otlp, once (SIGTERM pushes once more and exits).
        sink = http.server.HTTPServer(("127.0.0.1", 0), OtlpSink)
        th = threading.Thread(target=sink.serve_forever)
        th.start()
        push = subprocess.Popen([pcpustat, "push", "--otlp",
                                 "http://127.0.0.1:%d/v1/metrics" % sink.server_address[1],
                                 "--interval", "1", n.segment],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_for(lambda: OtlpSink.bodies, "an OTLP push")
        push.send_signal(signal.SIGTERM)
        push.wait(timeout=30)
        sink.shutdown()
        th.join()
        try:
            from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
            req = metrics_service_pb2.ExportMetricsServiceRequest()
            req.ParseFromString(OtlpSink.bodies[-1])
            names = {m.name: m for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
            expect("nginx_http_requests" in names, "OTLP metrics: %s" % sorted(names)[:10])
            pts = names["nginx_http_requests"].sum.data_points
            eq(sum(p.as_int for p in pts), 9, "OTLP nginx_http_requests")
        except ImportError:
            expect(b"nginx_http_requests" in OtlpSink.bodies[-1], "OTLP body names the family")
        # The OpenTelemetry Collector receiver (go/pcpureceiver).
        go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
        src = os.path.join(HERE, "..", "..", "..", "go")
        if go and os.path.isdir(src):
            env = dict(os.environ, PCPU_NGINX_SEGMENT=segment_files(n.segment)[0],
                       PCPU_NGINX_REQUESTS="9")
            r = subprocess.run([go, "test", "-count=1", "-run", "^TestNginxSegment$", "-v",
                                "./pcpureceiver/"], cwd=src, env=env, capture_output=True, text=True,
                               timeout=600)
            expect(r.returncode == 0 and "--- PASS: TestNginxSegment" in r.stdout,
                   "the Collector receiver:\n" + r.stdout[-3000:] + r.stderr[-2000:])
            print("readers: the Collector receiver read the nginx tree")
        else:
            print("readers: no Go toolchain: the Collector receiver not tried")
        print("readers: pcpustat, serve, push (OTLP) read the nginx tree")
    finally:
        if serve:
            serve.terminate()
            serve.wait()
        n.stop()


TESTS = {"basic": test_basic, "reload": test_reload, "upgrade": test_upgrade, "exact": test_exact,
         "user": test_user, "affinity": test_affinity, "html": test_html, "readers": test_readers}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in TESTS:
        print(__doc__)
        return 2
    module, build = os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    if not os.path.exists("/usr/sbin/nginx"):
        print("nginx not installed (scripts/install-deps.sh)")
        return SKIP
    rc = TESTS[sys.argv[1]](module, build)
    if rc == SKIP:
        return SKIP
    for p in harness.PREFIXES:
        shutil.rmtree(p, ignore_errors=True)
    print("nginx_test %s: passed" % sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
