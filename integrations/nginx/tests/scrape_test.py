#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One scrape for what stub_status, nginx-prometheus-exporter and VTS give
(issue 63, item 4), against a real nginx (docs/nginx.md).

  scrape_test.py TEST MODULE_SO BUILD_DIR

TEST:
  connections  nginx_connections{state}, _accepted_total, _handled_total equal
               to stub_status in the same nginx (the display samples before its
               snapshot), and in the segment for pcpustat within the timer's
               second
  versions     requests by HTTP version per server zone (0.9, 1.0, 1.1, and 2.0
               over h2c with curl) equal to the access log's $server_protocol
  peers        upstream connect and header time histograms and bytes both ways
               per peer, equal to the access log's $upstream_* values; none of
               the histograms with pcpu_stats_upstream_timing off
  zonepeers    the state of an upstream zone's peers (weight, backup, down,
               fails, unavailable, connections) as gauges, from the display and
               from the segment
  filterhist   pcpu_stats_filter ... histogram: a request-time histogram per key,
               its counts the key's requests; none without `histogram`
  budget       past pcpu_stats_max_series, the new series are refused and
               counted once per request and series, and nginx serves on
  limits       limit_req and limit_conn outcomes per server, equal to the access
               log's $limit_req_status and $limit_conn_status
  websocket    upgraded connections (101 through proxy_pass) counted on their
               own with their time, kept out of the request-time histograms
  ssl          SSL handshakes and session reuses per server, against Python's
               ssl client with and without a session, and the access log;
               failed handshakes per server (a protocol refused, a client
               that does not trust the certificate, a cut-off ClientHello,
               ssl_reject_handshake by SNI), and none for a completed
               handshake, plain HTTP to the port or a silent connection
Exit 0 when the test passed, 77 when it cannot run here (ctest: skipped).
"""
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Nginx, eq, expect, fail, free_port, series, total, wait_for  # noqa: E402


def access_log(n, name="access.log"):
    with open(os.path.join(n.prefix, "logs", name)) as f:
        return [l.split() for l in f.read().splitlines() if l.strip()]


def wait_lines(n, want, name="access.log"):
    """The access log once it has `want` lines (a worker logs just after
    the client has its response)."""
    wait_for(lambda: len(access_log(n, name)) >= want, "%d access log lines" % want, timeout=20)
    return access_log(n, name)


def raw_request(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(data)
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    return out


# ---- connections ---------------------------------------------------------------------

def stub_values(text):
    m = re.search(r"Active connections: (\d+)\s+server accepts handled requests\s+(\d+) (\d+) (\d+)\s+"
                  r"Reading: (\d+) Writing: (\d+) Waiting: (\d+)", text)
    if not m:
        fail("stub_status: %r" % text)
    a, acc, hnd, _, rd, wr, wa = (int(x) for x in m.groups())
    return dict(active=a, reading=rd, writing=wr, waiting=wa, accepted=acc, handled=hnd)


def pcpu_values(doc):
    v = {s: total(doc, "nginx_connections", state=s) for s in ("active", "reading", "writing", "waiting")}
    v["accepted"] = total(doc, "nginx_connections_accepted")
    v["handled"] = total(doc, "nginx_connections_handled")
    return v


def test_connections(module, build):
    """stub_status's connections, from the display and from the segment."""
    n = Nginx(module, """
    pcpu_stats on;
    server {
        listen 127.0.0.1:%(port)d;
        server_name c.test;
        location = /stub { stub_status; }
        location = /metrics { pcpu_stats_display; }
        location / { return 200 "ok\\n"; }
    }""")
    n.start()
    idle = []
    try:
        # Connections that stay open, idle (keep-alive): waiting.
        for _ in range(3):
            c = http.client.HTTPConnection("127.0.0.1", n.port, timeout=30)
            c.request("GET", "/")
            c.getresponse().read()
            idle.append(c)
        # A new connection asks stub_status, then the display, at once: the
        # display's values are the same only if it sampled nginx's counters
        # itself (the timer's sample is up to a second old, before this
        # connection was accepted). Retried until a quiet moment (a closed
        # client's connection nginx has not seen close yet).
        last = []

        def same():
            c = http.client.HTTPConnection("127.0.0.1", n.port, timeout=30)
            c.request("GET", "/stub")
            stub = stub_values(c.getresponse().read().decode())
            c.request("GET", "/metrics?format=json", headers={"Accept-Encoding": "identity"})
            doc = json.loads(c.getresponse().read())
            c.close()
            last[:] = [stub, pcpu_values(doc)]
            return last[0] == last[1]
        # Also until the three idle ones are waiting: a worker may not yet
        # have set a connection keep-alive when its client has read the
        # response (seen once: writing 2, waiting 2).
        for _ in range(20):
            if same() and last[0]["waiting"] >= 3:
                break
            time.sleep(0.2)
        else:
            fail("the display's connections differ from stub_status, or fewer than 3 wait: "
                 "%r, stub_status %r" % (last[1], last[0]))
        expect(last[0]["waiting"] >= 3 and last[0]["writing"] >= 1, "stub_status: %r" % last[0])
        # Outside readers: the segment, through pcpustat, within the timer's
        # second (no display asked).
        c = http.client.HTTPConnection("127.0.0.1", n.port, timeout=30)
        c.request("GET", "/stub")
        before = stub_values(c.getresponse().read().decode())
        for _ in range(4):
            d = http.client.HTTPConnection("127.0.0.1", n.port, timeout=30)
            d.request("GET", "/")
            d.getresponse().read()
            idle.append(d)
        time.sleep(2.5)
        c.request("GET", "/stub")
        after = stub_values(c.getresponse().read().decode())
        eq(after["accepted"], before["accepted"] + 4, "stub_status's accepted (a quiet moment)")
        pcpustat = os.path.join(build, "tools", "pcpustat")
        js = json.loads(subprocess.run([pcpustat, "-j", n.segment], capture_output=True, text=True,
                                       check=True).stdout)
        seen = pcpu_values(js["statistics"])
        for k in ("accepted", "handled", "active"):
            eq(seen[k], after[k], "pcpustat's %s, a second after (stub_status: %r)" % (k, after))
        text = n.stats("prometheus")
        for name in ('nginx_connections{state="waiting"}', "nginx_connections_accepted_total ",
                     "# TYPE nginx_connections_accepted_total counter",
                     "# TYPE nginx_connections gauge"):
            expect(name in text, "%s in the exposition" % name)
        c.close()
        # A reload keeps the samples' zone, as nginx keeps its counters:
        # accepted and handled neither restart nor count twice.
        n.reload()
        for _ in range(20):
            if same():
                break
            time.sleep(0.2)
        else:
            fail("after a reload: %r != stub_status %r" % (last[1], last[0]))
        # A reload that drops the module's directives (the module stays
        # loaded: -z nodelete) unmaps the samples' zone: the new workers
        # must not sample into it (they did: SIGSEGV at their first tick).
        m = n.master()
        n.write_conf(body="server { listen 127.0.0.1:%(port)d; location / { return 200; } }",
                     load=True)
        with open(n.conf) as f:
            conf = f.read()
        with open(n.conf, "w") as f:  # not even the status server's display
            f.write(conf.replace("pcpu_stats_display;", "return 204;").replace(
                "pcpu_stats off;", "").replace("pcpu_stats_segment %s;" % n.segment, ""))
        harness.reload_survives(n, m)
        workers = n.workers()
        time.sleep(2.5)
        eq(n.workers(), workers, "the workers after 2.5 s of ticks")
        expect("exited on signal" not in n.error_log(), "no worker crashed:\n" + n.error_log()[-1500:])
    finally:
        for c in idle:
            c.close()
        n.stop()


# ---- versions ---------------------------------------------------------------------------

def test_versions(module, build):
    """Requests by HTTP version per server zone, against the access log."""
    n = Nginx(module, """
    pcpu_stats on;
    log_format v '$server_name $server_protocol $status';
    server {
        listen 127.0.0.1:%(port)d;
        listen 127.0.0.1:%(h2_port)d http2;
        server_name v.test;
        access_log %(prefix)s/logs/access.log v;
        location / { return 200 "ok\\n"; }
    }""", h2_port=free_port())
    n.start()
    try:
        want = 0
        for i in range(3):
            raw_request(n.port, b"GET /a HTTP/1.0\r\nHost: v.test\r\n\r\n")
            want += 1
        for i in range(5):
            n.get("/b", host="v.test")
            want += 1
        raw_request(n.port, b"GET /c\r\n")  # HTTP/0.9
        want += 1
        h2 = shutil.which("curl") and "HTTP2" in subprocess.run(
            ["curl", "--version"], capture_output=True, text=True).stdout
        if h2:
            for i in range(2):
                subprocess.run(["curl", "-s", "-o", "/dev/null", "--http2-prior-knowledge",
                                "http://127.0.0.1:%d/h2" % n.h2_port], check=True)
                want += 1
        else:
            print("no curl with HTTP/2: HTTP/2 not tried")
        log = wait_lines(n, want)
        byv = {}
        for srv, proto, _ in log:
            v = {"HTTP/1.0": "1.0", "HTTP/1.1": "1.1", "HTTP/2.0": "2.0", "-": "0.9",
                 "HTTP/0.9": "0.9"}.get(proto, proto)
            byv[v] = byv.get(v, 0) + 1
        d = n.stats()
        got = {l["version"]: v for l, v in series(d, "nginx_http_requests_by_version")
               if l["server"] == "v.test"}
        eq(got, byv, "requests by version (access log: %r)" % byv)
        expect({"1.0", "1.1", "0.9"} <= set(got) and (not h2 or "2.0" in got), "versions met: %r" % got)
    finally:
        n.stop()


# ---- backends -----------------------------------------------------------------------------

class Slow(BaseHTTPRequestHandler):
    """A backend that takes 30 ms to answer, with a body of ?n= bytes."""
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        time.sleep(0.03)
        m = re.search(r"n=(\d+)", self.path)
        body = b"x" * int(m.group(1) if m else 10)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.do_GET()

    def log_message(self, *a):
        pass


def serve(handler):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_peers(module, build):
    """Upstream connect and header times and bytes per peer, against the
    access log's $upstream_connect_time, _header_time, _bytes_received,
    _bytes_sent."""
    srv = serve(Slow)
    n = Nginx(module, """
    pcpu_stats on;
    log_format u '$upstream_addr|$upstream_connect_time|$upstream_header_time|'
                 '$upstream_bytes_received|$upstream_bytes_sent|$upstream_status';
    upstream pool { server 127.0.0.1:%(backend)d; server 127.0.0.1:%(dead)d; }
    server {
        listen 127.0.0.1:%(port)d;
        server_name p.test;
        access_log %(prefix)s/logs/access.log u;
        location / { proxy_pass http://pool; proxy_next_upstream error; }
    }""", backend=srv.server_address[1], dead=free_port())
    n.start()
    try:
        for i in range(12):
            if i % 3 == 0:
                c = http.client.HTTPConnection("127.0.0.1", n.port, timeout=30)
                c.request("POST", "/?n=%d" % (100 * i), body=b"y" * (50 * i))
                c.getresponse().read()
                c.close()
            else:
                n.get("/?n=%d" % (100 * i))
        log = wait_lines(n, 12)
        want = {}

        for line in log:
            addrs, ct, ht, rx, tx, _ = " ".join(line).split("|")
            for a, c1, h1, r1, t1 in zip(addrs.split(","), ct.split(","), ht.split(","),
                                         rx.split(","), tx.split(",")):
                w = want.setdefault(a.strip(), dict(connect=0, header=0, rx=0, tx=0, csum=0.0))
                if c1.strip() != "-":
                    w["connect"] += 1
                    w["csum"] += float(c1)
                if h1.strip() != "-":
                    w["header"] += 1
                w["rx"] += int(r1)
                w["tx"] += int(t1)
        d = n.stats()
        for peer, w in want.items():
            m = dict(upstream="pool", peer=peer)
            eq(total(d, "nginx_http_upstream_connect_duration_seconds", **m), w["connect"],
               "connect times of " + peer)
            eq(total(d, "nginx_http_upstream_header_duration_seconds", **m), w["header"],
               "header times of " + peer)
            eq(total(d, "nginx_http_upstream_received_bytes", **m), w["rx"], "bytes from " + peer)
            eq(total(d, "nginx_http_upstream_sent_bytes", **m), w["tx"], "bytes to " + peer)
        live = "127.0.0.1:%d" % srv.server_address[1]
        expect(want[live]["header"] > 0 and want[live]["rx"] > 1000 and want[live]["tx"] > 0,
               "the live peer answered: %r" % want)
        h = [v for l, v in series(d, "nginx_http_upstream_header_duration_seconds") if l["peer"] == live][0]
        expect(h["sum"] >= 0.03 * want[live]["header"] * 0.9,
               "header times of at least the backend's 30 ms: %r" % h["sum"])
        # pcpu_stats_upstream_timing off: a new upstream's peers have their
        # bytes and response times, no connect or header histograms.
        n.body = n.body.replace("upstream pool {", "pcpu_stats_upstream_timing off;\n"
                                "    upstream pool2 { server 127.0.0.1:%(backend)d; }\n    upstream pool {")
        n.body = n.body.replace("proxy_pass http://pool;", "proxy_pass http://pool2;")
        n.write_conf()
        n.reload()
        for i in range(3):
            n.get("/?n=10")
        d = harness.grown(n, lambda d: total(d, "nginx_http_upstream_response_duration_seconds",
                                             upstream="pool2"), 3)
        eq(total(d, "nginx_http_upstream_received_bytes", upstream="pool2") > 0, True, "pool2's bytes")
        eq([l for l, v in series(d, "nginx_http_upstream_connect_duration_seconds") +
            series(d, "nginx_http_upstream_header_duration_seconds") if l["upstream"] == "pool2"], [],
           "no connect or header histograms with pcpu_stats_upstream_timing off")
    finally:
        n.stop()
        srv.shutdown()


def test_zonepeers(module, build):
    """The state of an upstream zone's peers: weight, backup, down, fails,
    unavailable, connections, from the display and from the segment."""
    srv = serve(Slow)
    dead, down, backup = free_port(), free_port(), free_port()
    n = Nginx(module, """
    pcpu_stats on;
    log_format u '$upstream_addr';
    upstream zp {
        zone zp 64k;
        server 127.0.0.1:%(backend)d weight=3;
        server 127.0.0.1:%(dead)d max_fails=2 fail_timeout=60s;
        server 127.0.0.1:%(down)d down;
        server 127.0.0.1:%(backup)d backup;
    }
    upstream nozone { server 127.0.0.1:%(backend)d; }
    server {
        listen 127.0.0.1:%(port)d;
        server_name z.test;
        access_log %(prefix)s/logs/access.log u;
        location / { proxy_pass http://zp; }
        location /nozone { proxy_pass http://nozone; }
    }""", backend=srv.server_address[1], dead=dead, down=down, backup=backup, workers=1)
    n.start()
    try:
        for i in range(12):
            n.get("/")
        n.get("/nozone")
        log = wait_lines(n, 13)
        tried = sum(l[0].count("127.0.0.1:%d" % dead) for l in log)
        expect(tried >= 2, "the dead peer tried: %d" % tried)

        def state(doc):
            out = {}
            for fam in ("weight", "backup", "down", "fails", "unavailable", "connections"):
                for l, v in series(doc, "nginx_http_upstream_peer_" + fam):
                    out.setdefault((l["upstream"], l["peer"]), {})[fam] = v
            return out
        want = {
            ("zp", "127.0.0.1:%d" % srv.server_address[1]): dict(weight=3, backup=0, down=0, fails=0,
                                                                 unavailable=0, connections=0),
            ("zp", "127.0.0.1:%d" % dead): dict(weight=1, backup=0, down=0, fails=2, unavailable=1,
                                               connections=0),
            ("zp", "127.0.0.1:%d" % down): dict(weight=1, backup=0, down=1, fails=0, unavailable=0,
                                               connections=0),
            ("zp", "127.0.0.1:%d" % backup): dict(weight=1, backup=1, down=0, fails=0, unavailable=0,
                                                 connections=0),
        }
        eq(state(n.stats()), want, "the zone's peers from the display (no upstream without a zone)")
        pcpustat = os.path.join(build, "tools", "pcpustat")
        js = json.loads(subprocess.run([pcpustat, "-j", n.segment], capture_output=True, text=True,
                                       check=True).stdout)
        eq(state(js["statistics"]), want, "the zone's peers from the segment (pcpustat)")
    finally:
        n.stop()
        srv.shutdown()


# ---- filter histogram ----------------------------------------------------------------------

def test_filterhist(module, build):
    """A request-time histogram per filter key (`histogram`), its counts
    the key's requests; none for a filter without it."""
    n = Nginx(module, """
    pcpu_stats on;
    pcpu_stats_filter timed $arg_k max_keys=3 histogram;
    pcpu_stats_filter plain $arg_k;
    server {
        listen 127.0.0.1:%(port)d;
        server_name f.test;
        location / { return 200 "ok\\n"; }
    }""")
    n.start()
    try:
        keys = ["a", "b", "a", "c", "d", "e", "a", "b"]
        for k in keys:
            n.get("/?k=" + k)
        d = harness.grown(n, lambda d: total(d, "nginx_http_filter_requests", filter="timed"), len(keys))
        # Which 3 keys are admitted is the order of the log phases, not of
        # the requests: a worker may count a request after the next one,
        # sent once its response came, was counted by the other worker
        # (seen once: "b" after "c" and "d", under load).
        admitted = sorted(l["key"] for l, v in series(d, "nginx_http_filter_requests")
                          if l.get("filter") == "timed" and l["key"] != "__other__")
        expect(len(admitted) == 3 and set(admitted) <= set(keys), "3 keys admitted: %s" % admitted)
        for key in admitted + ["__other__"]:
            want = total(d, "nginx_http_filter_requests", filter="timed", key=key)
            expect(want > 0, "requests of key %s" % key)
            eq(total(d, "nginx_http_filter_request_duration_seconds", filter="timed", key=key), want,
               "the histogram's count of key " + key)
        eq(total(d, "nginx_http_filter_request_duration_seconds", filter="timed"), len(keys),
           "every request in the histogram")
        eq(total(d, "nginx_http_filter_request_duration_seconds", filter="plain"), 0,
           "no histogram without `histogram`")
        r = n.run("-t", check=False)
        expect(r.returncode == 0, "nginx -t: " + r.stderr)
        for bad in ("histogram histogram", "max_keys=2 max_keys=3", "histograms"):
            n.write_conf(body=n.body.replace("max_keys=3 histogram", bad))
            r = n.run("-t", check=False)
            expect(r.returncode != 0 and "invalid parameter" in r.stderr,
                   "pcpu_stats_filter ... %s refused: %s" % (bad, r.stderr))
        n.write_conf()
    finally:
        n.stop()


def test_budget(module, build):
    """The new series within the segment's budget: past it, a request whose
    HTTP version's series cannot be made is served, counted where it has
    series, and its refusal counted once (segment_full)."""
    n = Nginx(module, """
    pcpu_stats on;
    pcpu_stats_max_series 400;
    pcpu_stats_filter k $arg_k max_keys=5000 histogram;
    server {
        listen 127.0.0.1:%(port)d;
        server_name b.test;
        location / { return 200; }
    }""")
    n.start()
    try:
        for i in range(300):  # keys, with a histogram each, past the budget
            eq(n.get("/?k=key%d" % i, host="b.test")[0], 200, "served past the budget")
        s = harness.grown(n, lambda s: total(s, "nginx_http_requests"), 300)
        nseries = sum(len(f["metrics"]) for f in s["families"])
        expect(nseries + len(s["families"]) <= 400, "within the budget: %d series, %d families" % (
            nseries, len(s["families"])))
        refused = total(s, "nginx_pcpu_series_refused", reason="segment_full")
        expect(refused > 0, "the flood refused")
        for i in range(5):
            out = raw_request(n.port, b"GET /?k=key0 HTTP/1.0\r\nHost: b.test\r\n\r\n")
            expect(out.startswith(b"HTTP/1.1 200"), "HTTP/1.0 served: %r" % out[:40])
        s = harness.grown(n, lambda s: total(s, "nginx_http_requests"), 305)
        eq(total(s, "nginx_http_requests"), 305, "counted where they have series")
        eq(total(s, "nginx_http_requests_by_version", version="1.0"), 0, "no room for version 1.0")
        eq(total(s, "nginx_pcpu_series_refused", reason="segment_full") - refused, 5,
           "one refusal per request and series")
        expect("not counted; said once" in n.error_log(), "said in the error log (once per reason)")
    finally:
        n.stop()


# ---- limits -------------------------------------------------------------------------------

def test_limits(module, build):
    """limit_req and limit_conn outcomes per server, against the access log."""
    srv = serve(Slow)
    n = Nginx(module, """
    pcpu_stats on;
    log_format l '$limit_req_status $limit_conn_status $status';
    limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;
    limit_conn_zone $binary_remote_addr zone=perip:1m;
    server {
        listen 127.0.0.1:%(port)d;
        server_name l.test;
        access_log %(prefix)s/logs/access.log l;
        # (not `return`: it answers before limit_req's phase)
        location /req { limit_req zone=one; proxy_pass http://127.0.0.1:%(backend)d; }
        location /dry { limit_req zone=one; limit_req_dry_run on;
                        proxy_pass http://127.0.0.1:%(backend)d; }
        location /conn { limit_conn perip 1; proxy_pass http://127.0.0.1:%(backend)d; }
        location / { return 200; }
    }""", backend=srv.server_address[1])
    n.start()
    try:
        for i in range(4):
            n.get("/req")
        for i in range(3):
            n.get("/dry")
        n.get("/")
        ths = [threading.Thread(target=n.get, args=("/conn",)) for _ in range(4)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        log = wait_lines(n, 12)
        d = n.stats()
        for var, fam in ((0, "nginx_http_limit_req_requests"), (1, "nginx_http_limit_conn_requests")):
            want = {}
            for line in log:
                if line[var] != "-":
                    want[line[var]] = want.get(line[var], 0) + 1
            got = {l["status"]: v for l, v in series(d, fam) if l["server"] == "l.test"}
            eq(got, want, fam)
        got = {l["status"] for l, v in series(d, "nginx_http_limit_req_requests")}
        expect({"PASSED", "REJECTED", "REJECTED_DRY_RUN"} <= got, "limit_req outcomes met: %r" % got)
        got = {l["status"] for l, v in series(d, "nginx_http_limit_conn_requests")}
        expect({"PASSED", "REJECTED"} <= got, "limit_conn outcomes met: %r" % got)
    finally:
        n.stop()
        srv.shutdown()


# ---- websocket ----------------------------------------------------------------------------

def ws_backend():
    """A WebSocket-ish backend: answers 101 to an Upgrade, then echoes
    until the client closes."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)

    def conn(s):
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = s.recv(4096)
            if not b:
                s.close()
                return
            buf += b
        if b"upgrade: echo" in buf.lower():
            s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
            while True:
                b = s.recv(4096)
                if not b:
                    break
                s.sendall(b)
        else:
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        s.close()

    def loop():
        while True:
            try:
                s, _ = ls.accept()
            except OSError:
                return
            threading.Thread(target=conn, args=(s,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
    return ls


def test_websocket(module, build):
    """Upgraded connections counted on their own, their time in their own
    histogram, never in the request-time histograms."""
    ls = ws_backend()
    n = Nginx(module, """
    pcpu_stats on;
    pcpu_stats_filter path $uri histogram;
    log_format w '$status $request_time';
    server {
        listen 127.0.0.1:%(port)d;
        server_name w.test;
        access_log %(prefix)s/logs/access.log w;
        location /ws { pcpu_stats on;
                       proxy_pass http://127.0.0.1:%(backend)d;
                       proxy_http_version 1.1;
                       proxy_set_header Upgrade $http_upgrade;
                       proxy_set_header Connection "upgrade";
                       proxy_read_timeout 60s; }
    }""", backend=ls.getsockname()[1])
    n.start()
    try:
        held = 1.2
        for i in range(3):
            s = socket.create_connection(("127.0.0.1", n.port), timeout=30)
            s.sendall(b"GET /ws HTTP/1.1\r\nHost: w.test\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                head += s.recv(4096)
            expect(head.startswith(b"HTTP/1.1 101"), "101 through nginx: %r" % head[:100])
            s.sendall(b"ping %d" % i)
            got = s.recv(4096)
            eq(got, b"ping %d" % i, "the echo through nginx")
            time.sleep(held)
            s.close()
        for i in range(4):
            n.get("/ws/plain", host="w.test")
        log = wait_lines(n, 7)
        d = n.stats()
        eq(total(d, "nginx_http_requests", server="w.test", code="101"),
           sum(1 for l in log if l[0] == "101"), "101s counted as requests (the access log's lines)")
        eq(total(d, "nginx_http_requests", server="w.test"), len(log), "every request counted")
        eq(total(d, "nginx_http_upgraded", server="w.test"), 3, "upgraded connections")
        h = [v for l, v in series(d, "nginx_http_upgraded_duration_seconds") if l["server"] == "w.test"]
        expect(h and h[0]["count"] == 3 and h[0]["sum"] >= 3 * held * 0.9,
               "upgraded connections' time (%s s each): %r" % (held, h))
        eq(total(d, "nginx_http_request_duration_seconds", server="w.test"), 4,
           "request times: the plain requests only")
        eq(total(d, "nginx_http_location_request_duration_seconds", server="w.test"), 4,
           "the location's request times: the plain requests only")
        eq(total(d, "nginx_http_filter_request_duration_seconds", filter="path"), 4,
           "a filter's request times: the plain requests only")
        eq(total(d, "nginx_http_upstream_response_duration_seconds"), 4,
           "upstream response times: the plain requests only")
        rt = [v for l, v in series(d, "nginx_http_request_duration_seconds") if l["server"] == "w.test"][0]
        expect(rt["sum"] < held, "no upgraded connection's time in request time: %r" % rt["sum"])
    finally:
        n.stop()
        ls.close()


# ---- ssl -------------------------------------------------------------------------------

def test_ssl(module, build):
    """SSL handshakes and session reuses per server, against Python's ssl
    client and the access log ($ssl_session_reused, $connection_requests)."""
    if not shutil.which("openssl"):
        print("no openssl")
        return harness.SKIP
    n = Nginx(module, """
    pcpu_stats on;
    log_format s '$ssl_session_reused $connection_requests $server_protocol';
    server {
        listen 127.0.0.1:%(port)d ssl;
        listen 127.0.0.1:%(h2_port)d ssl http2;
        server_name s.test;
        ssl_certificate %(prefix)s/cert.pem;
        ssl_certificate_key %(prefix)s/key.pem;
        ssl_protocols TLSv1.2;
        ssl_session_cache shared:SSL:1m;
        access_log %(prefix)s/logs/access.log s;
        location / { return 200 "ok\\n"; }
    }
    server {
        listen 127.0.0.1:%(port)d ssl;
        server_name r.test;
        ssl_reject_handshake on;
    }""", h2_port=free_port())
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=s.test", "-keyout", os.path.join(n.prefix, "key.pem"),
                    "-out", os.path.join(n.prefix, "cert.pem")], check=True, capture_output=True)
    n.write_conf()
    n.start()
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        session = None
        reused = 0
        for i in range(6):
            c = http.client.HTTPSConnection("127.0.0.1", n.port, context=ctx, timeout=30)
            c.connect()
            if i >= 3 and session is not None:
                # Resume: a new socket with the last session.
                c.sock.close()
                raw = socket.create_connection(("127.0.0.1", n.port), timeout=30)
                c.sock = ctx.wrap_socket(raw, server_hostname="s.test", session=session)
                reused += c.sock.session_reused
            for _ in range(1 + i % 2):  # some connections make two requests
                c.request("GET", "/")
                c.getresponse().read()
            session = c.sock.session
            c.close()
        expect(reused >= 2, "Python resumed sessions: %d" % reused)
        want = 9
        # HTTP/2 over SSL (curl): a connection's first stream counts its
        # handshake; three streams on one connection, one handshake.
        h2 = "HTTP2" in subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout
        if h2:
            url = "https://127.0.0.1:%d/" % n.h2_port
            subprocess.run(["curl", "-sk", "--http2", "-o", "/dev/null", url], check=True)
            subprocess.run(["curl", "-sk", "--http2", "-o", "/dev/null", "-o", "/dev/null", "-o",
                            "/dev/null", url, url, url], check=True)
            want += 4
        log = wait_lines(n, want)
        if h2:
            eq(sum(1 for l in log if l[2] == "HTTP/2.0"), 4, "HTTP/2 requests")
        first = [l for l in log if l[1] == "1"]
        d = n.stats()
        eq(total(d, "nginx_http_ssl_handshakes", server="s.test"), len(first),
           "handshakes: the connections' first requests (%d)" % len(first))
        eq(total(d, "nginx_http_ssl_session_reuses", server="s.test"),
           sum(1 for l in first if l[0] == "r"), "session reuses ($ssl_session_reused)")
        eq(total(d, "nginx_http_ssl_session_reuses", server="s.test"), reused,
           "session reuses (the client's)")
        eq(total(d, "nginx_http_ssl_handshakes", server="s.test"), 6 + (2 if h2 else 0),
           "handshakes: 6 connections of Python's and curl's %d" % (2 if h2 else 0))
        eq(total(d, "nginx_http_ssl_handshakes_failed"), 0, "no failure of a handshake done")
        # Not handshakes: plain HTTP to the SSL port (nginx answers 400 and
        # logs it), a connection that sends nothing.
        expect(b" 400 " in raw_request(n.port, b"GET / HTTP/1.0\r\n\r\n"), "plain HTTP: 400")
        socket.create_connection(("127.0.0.1", n.port), timeout=30).close()
        # Failures, each its connection's: the protocol refused (TLS 1.3
        # only against ssl_protocols TLSv1.2), the client not trusting the
        # self-signed certificate (it aborts), a ClientHello cut off, and
        # SNI naming the server with ssl_reject_handshake.
        def fails(ctx, name, n_times):
            for _ in range(n_times):
                raw = socket.create_connection(("127.0.0.1", n.port), timeout=30)
                try:
                    ctx.wrap_socket(raw, server_hostname=name).close()
                    fail("a handshake that should fail succeeded (%s)" % name)
                except ssl.SSLError:
                    pass
                raw.close()
        tls13 = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        tls13.check_hostname = False
        tls13.verify_mode = ssl.CERT_NONE
        tls13.minimum_version = ssl.TLSVersion.TLSv1_3
        fails(tls13, "s.test", 2)
        fails(ssl.create_default_context(), "s.test", 2)  # no CA for the certificate
        cut = socket.create_connection(("127.0.0.1", n.port), timeout=30)
        cut.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        cut.close()
        fails(ctx, "r.test", 3)
        wait_for(lambda: total(n.stats(), "nginx_http_ssl_handshakes_failed") >= 8,
                 "8 failed handshakes", timeout=20)
        d = n.stats()
        eq(total(d, "nginx_http_ssl_handshakes_failed", server="s.test"), 5,
           "s.test's failed handshakes: 2 protocol, 2 untrusted, 1 cut off")
        eq(total(d, "nginx_http_ssl_handshakes_failed", server="r.test"), 3,
           "r.test's failed handshakes: 3 rejected by SNI")
        eq(total(d, "nginx_http_ssl_handshakes", server="s.test"), 6 + (2 if h2 else 0),
           "handshakes: the failed ones not among them")
    finally:
        n.stop()


TESTS = {"connections": test_connections, "versions": test_versions, "peers": test_peers,
         "zonepeers": test_zonepeers, "budget": test_budget, "filterhist": test_filterhist, "limits": test_limits, "websocket": test_websocket,
         "ssl": test_ssl}

if __name__ == "__main__":
    sys.exit(harness.main(TESTS, __doc__, "scrape_test"))
